// Graphviz rendering of a global DAG (dag_to_dot, declared in graph/json.h).
#include <sstream>
#include <string>
#include <vector>

#include "graph/json.h"
#include "graph/json_internal.h"
#include "graph/validate.h"

namespace carflow {
namespace {

using json_internal::control_at;
using json_internal::utf8_sequence;

// Text for a DOT quoted string. dag_to_dot also draws DAGs that never went
// through the loader, so any bytes may come: quotes and backslashes are
// escaped, a newline becomes DOT's line break, and other control characters
// (a NUL would end the output for Graphviz) and bytes that are not UTF-8
// become '?'.
std::string dot_escape(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (text[i] == '\n') {
      out += "\\n";
    } else if (n == 0 || control_at(text, i) >= 0) {
      out += '?';
    } else {
      if (text[i] == '"' || text[i] == '\\') out += '\\';
      out.append(text, i, n);
    }
    i += n == 0 ? 1 : n;
  }
  return out;
}

std::string dot_node(uint32_t image, CarId car) {
  return "i" + std::to_string(image) + "_c" + std::to_string(car);
}

std::string dot_label(const Car& car, CarId id, bool is_exit) {
  std::string label = std::to_string(id) + " " + car_kind_name(car.kind);
  if (car.is_message()) label += "\\npeer " + std::to_string(car.peer) + " tag " + std::to_string(car.tag);
  if (car.kind != CarKind::Join) label += "\\n" + std::to_string(car.message_bytes()) + " B";
  if (is_exit) label += "\\n(exit)";
  return label;
}

void dot_cluster(const LocalDag& dag, uint32_t image, std::ostringstream& out) {
  out << "  subgraph cluster_" << image << " {\n";
  out << "    label=\"image " << image << "\";\n";
  for (CarId id = 0; id < dag.cars.size(); ++id) {
    out << "    " << dot_node(image, id) << " [label=\"" << dot_label(dag.cars[id], id, id == dag.exit)
        << "\"" << (dag.cars[id].sync ? ", color=gray, fontcolor=gray" : "") << "];\n";
  }
  for (CarId id = 0; id < dag.cars.size(); ++id) {
    for (const Dep& dep : dag.cars[id].deps) {
      out << "    " << dot_node(image, dep.car) << " -> " << dot_node(image, id)
          << (dep.kind == DepKind::Buffer ? " [style=dashed]" : "") << ";\n";
    }
  }
  out << "  }\n";
}

}  // namespace

std::string dag_to_dot(const GlobalDag& dag) {
  std::ostringstream out;
  out << "digraph carflow {\n";
  out << "  label=\"" << coll_kind_name(dag.spec.kind) << " " << dot_escape(dag.spec.algorithm)
      << ", P = " << dag.spec.images << ", " << dag.spec.nbytes << " bytes\";\n";
  out << "  node [shape=box, fontsize=10];\n";
  for (uint32_t i = 0; i < dag.images.size(); ++i) dot_cluster(dag.images[i], i, out);
  std::vector<MessageEdge> edges;
  std::string ignored;
  if (match_messages(dag, &edges, &ignored)) {
    for (const MessageEdge& e : edges) {
      out << "  " << dot_node(e.from_image, e.from_car) << " -> " << dot_node(e.to_image, e.to_car)
          << " [style=bold];\n";
    }
  }
  out << "}\n";
  return out.str();
}

}  // namespace carflow
