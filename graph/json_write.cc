// Writing graph JSON (schema "carflow.graph/1"): the document of a global
// DAG, the size bound generate_global_bounded applies while building one,
// and saving a file the loader will accept.
#include "graph/json.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "graph/json_internal.h"
#include "graph/registry.h"
#include "graph/validate.h"

namespace carflow {
namespace {

using json_internal::algorithm_problem;
using json_internal::errno_text;
using json_internal::fail;
using json_internal::kSchema;
using OrderedJson = nlohmann::ordered_json;

OrderedJson buffer_to_json(const BufferRef& ref) {
  OrderedJson j;
  j["space"] = buffer_space_name(ref.space);
  if (ref.space == BufferSpace::Temp) j["slot"] = ref.slot;
  j["offset"] = ref.offset;
  j["length"] = ref.length;
  return j;
}

OrderedJson car_to_json(const Car& car, CarId id) {
  OrderedJson j;
  j["id"] = id;
  j["kind"] = car_kind_name(car.kind);
  if (car.is_message()) {
    j["peer"] = car.peer;
    j["tag"] = car.tag;
  }
  const std::pair<const char*, const BufferRef*> buffers[] = {
      {"src", &car.src}, {"src2", &car.src2}, {"dst", &car.dst}};
  for (const auto& [name, ref] : buffers) {
    if (ref->space != BufferSpace::None) j[name] = buffer_to_json(*ref);
  }
  if (car.kind == CarKind::RecvReduce && car.incoming_left) j["incoming_left"] = true;
  if (car.shape != ReduceShape::Elementwise) j["shape"] = reduce_shape_name(car.shape);
  if (car.first_elems != 0) j["first_elems"] = car.first_elems;
  if (car.chunk_elems != 0) j["chunk_elems"] = car.chunk_elems;
  if (car.sync) j["sync"] = true;
  if (car.member != 0) j["member"] = car.member;
  OrderedJson deps = OrderedJson::array();
  for (const Dep& dep : car.deps) {
    OrderedJson d;
    d["car"] = dep.car;
    d["kind"] = dep_kind_name(dep.kind);
    deps.push_back(std::move(d));
  }
  j["deps"] = std::move(deps);
  return j;
}

OrderedJson image_to_json(const LocalDag& dag) {
  OrderedJson j;
  j["image"] = dag.image;
  j["src_bytes"] = dag.src_bytes;
  j["dst_bytes"] = dag.dst_bytes;
  j["temps"] = dag.temps;
  j["exit"] = dag.exit;
  if (!dag.members.empty()) {
    OrderedJson members = OrderedJson::array();
    for (const MemberBuffers& m : dag.members) {
      OrderedJson e;
      e["src_bytes"] = m.src_bytes;
      e["dst_bytes"] = m.dst_bytes;
      e["elem_size"] = m.elem_size;
      members.push_back(std::move(e));
    }
    j["members"] = std::move(members);
  }
  OrderedJson cars = OrderedJson::array();
  for (CarId id = 0; id < dag.cars.size(); ++id) cars.push_back(car_to_json(dag.cars[id], id));
  j["cars"] = std::move(cars);
  return j;
}

OrderedJson spec_to_json(const CollectiveSpec& spec) {
  OrderedJson j;
  j["kind"] = coll_kind_name(spec.kind);
  j["algorithm"] = spec.algorithm;
  j["images"] = spec.images;
  j["root"] = spec.root;
  j["nbytes"] = spec.nbytes;
  j["elem_size"] = spec.elem_size;
  j["segment_bytes"] = spec.segment_bytes;
  j["flags"] = spec.flags;
  // Optional fields: written only when they differ from their defaults.
  if (!spec.counts.empty()) j["counts"] = spec.counts;
  if (!spec.displs.empty()) j["displs"] = spec.displs;
  if (!spec.perm.empty()) j["perm"] = spec.perm;
  if (spec.radix != 0) j["radix"] = spec.radix;
  if (spec.window != 0) j["window"] = spec.window;
  if (spec.images_per_node != 0) j["images_per_node"] = spec.images_per_node;
  if (spec.logp_L != 0 || spec.logp_o != 0 || spec.logp_g != 0) {
    j["logp"] = {{"L", spec.logp_L}, {"o", spec.logp_o}, {"g", spec.logp_g}};
  }
  if (spec.src_blksz != 0 || spec.src_offset != 0) j["src_layout"] = {{"blksz", spec.src_blksz}, {"offset", spec.src_offset}};
  if (spec.dst_blksz != 0 || spec.dst_offset != 0) j["dst_layout"] = {{"blksz", spec.dst_blksz}, {"offset", spec.dst_offset}};
  return j;
}

OrderedJson messages_to_json(const std::vector<MessageEdge>& edges) {
  OrderedJson messages = OrderedJson::array();
  for (const MessageEdge& e : edges) {
    OrderedJson m;
    m["from"] = {e.from_image, e.from_car};
    m["to"] = {e.to_image, e.to_car};
    messages.push_back(std::move(m));
  }
  return messages;
}

}  // namespace

uint64_t image_json_bytes(const LocalDag& image) {
  const std::string text = image_to_json(image).dump(1, ' ', false, OrderedJson::error_handler_t::replace);
  // In the document the section sits two levels deep (two more spaces on
  // each of its lines), and each of its SENDs has an entry in the message
  // list (matched or not, at least "{"from": [], "to": []}" and a comma).
  uint64_t bytes = text.size() + 2 * (static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n')) + 1);
  for (const Car& car : image.cars) bytes += car.kind == CarKind::Send ? 24 : 0;
  return bytes;
}

bool generate_global_bounded(const CollectiveSpec& spec, GlobalDag* out, std::string* error) {
  uint64_t bytes = 0;
  uint32_t built = 0;
  return generate_global(spec, out, error, [&](const LocalDag& image, std::string* why) {
    bytes += image_json_bytes(image);
    ++built;
    if (bytes <= kMaxGraphDocumentBytes) return true;
    return fail(why, "images: the DAG's JSON passes the loader's limit of " + std::to_string(kMaxGraphDocumentBytes >> 20) +
                         " MiB with the first " + std::to_string(built) + " of its " + std::to_string(spec.images) +
                         " images (" + std::to_string(bytes) + " bytes), so it cannot be saved; "
                         "use fewer images or another algorithm");
  });
}

std::string dag_to_json(const GlobalDag& dag) {
  OrderedJson doc;
  doc["schema"] = kSchema;
  doc["scope"] = "global";
  doc["collective"] = spec_to_json(dag.spec);
  OrderedJson images = OrderedJson::array();
  for (const LocalDag& image : dag.images) images.push_back(image_to_json(image));
  doc["images"] = std::move(images);
  // An unmatched DAG gets no message list; loading it then reports the
  // matching error itself.
  std::vector<MessageEdge> edges;
  std::string ignored;
  if (match_messages(dag, &edges, &ignored)) doc["messages"] = messages_to_json(edges);
  if (!dag.run_state.cars.empty()) {
    OrderedJson states = OrderedJson::array();
    for (CarRunState s : dag.run_state.cars) states.push_back(run_state_name(s));
    doc["run_state"] = {{"image", dag.run_state.image}, {"cars", std::move(states)}};
  }
  // replace: an algorithm name of invalid UTF-8 must not make dump() throw.
  return doc.dump(1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
}

bool save_dag_file(const GlobalDag& dag, const std::string& path, std::string* error) {
  std::string problem;
  if (!validate_global(dag, &problem)) return fail(error, path + ": not saved, the DAG is invalid: " + problem);
  // The loader's rule, so that every saved file loads again.
  problem = algorithm_problem(dag.spec);
  if (!problem.empty()) return fail(error, path + ": not saved, collective.algorithm: " + problem);
  const std::string text = dag_to_json(dag);
  if (text.size() > kMaxGraphDocumentBytes) {  // the loader would refuse it
    return fail(error, path + ": not saved, its JSON is " + std::to_string(text.size()) +
                           " bytes, above the loader's limit of " + std::to_string(kMaxGraphDocumentBytes >> 20) + " MiB");
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail(error, path + ": is a directory, not a file name");
  // Written beside the target and renamed over it, so a crash mid-write never
  // leaves a truncated file under the real name.
  const std::string tmp = path + ".tmp";
  std::ofstream file(tmp, std::ios::binary | std::ios::trunc);
  if (!file) return fail(error, path + ": cannot create " + tmp + " (" + errno_text() + ")");
  file.write(text.data(), static_cast<std::streamsize>(text.size()));
  file.close();
  if (!file) {
    const std::string reason = errno_text();
    std::remove(tmp.c_str());
    return fail(error, path + ": write failed (" + reason + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string reason = errno_text();
    std::remove(tmp.c_str());
    return fail(error, path + ": cannot replace with " + tmp + " (" + reason + ")");
  }
  return true;
}

}  // namespace carflow
