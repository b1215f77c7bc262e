// carflow view: a graph file (or a Chrome trace) as one self-contained HTML
// page: tools/view/'s template, style and scripts and the vendored graph
// library, compiled in (tools/view/assets.h), with the data inlined. The
// page fetches nothing, so it works offline from file://.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "tools/cli/cli.h"
#include "tools/cli/view.h"
#include "tools/view/assets.h"

namespace carflow::cli {
namespace {

bool fail_with(std::string* error, const std::string& message) {
  *error = message;
  return false;
}

// The data sits in <script type="application/json">, where "</script" or
// "<!--" inside a string would end or disturb the element (HTML Living
// Standard, "Restrictions for contents of script elements"). In JSON, <, >
// and & occur only inside strings, where \uXXXX spells the same character.
std::string inline_json(const Json& data) {
  const std::string text = data.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::string out;
  out.reserve(text.size() + text.size() / 32);
  for (const char c : text) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

// A fresh nonce per page: the page's policy runs only scripts carrying it.
std::string make_nonce() {
  std::random_device random;
  std::string nonce;
  for (int i = 0; i < 4; ++i) {
    char word[9];
    std::snprintf(word, sizeof word, "%08x", static_cast<unsigned>(random()));
    nonce += word;
  }
  return nonce;
}

// view.html with each marker (@CF_NAME@) replaced once. What replaces a
// marker is never scanned again, so nothing in the data can act as one.
bool fill_template(const std::map<std::string, std::string>& parts, std::string* page, std::string* error) {
  const std::string_view tpl = view::asset("view.html");
  size_t at = 0;
  while (true) {
    const size_t start = tpl.find("@CF_", at);
    if (start == std::string_view::npos) break;
    const size_t end = tpl.find('@', start + 1);
    const std::string name(tpl.substr(start + 1, end == std::string_view::npos ? 0 : end - start - 1));
    auto it = parts.find(name);
    if (it == parts.end()) return fail_with(error, "view: internal error: view.html has an unknown marker");
    page->append(tpl.substr(at, start - at));
    page->append(it->second);
    at = end + 1;
  }
  page->append(tpl.substr(at));
  return true;
}

bool build_page(const Json& data, std::string* page, std::string* error) {
  std::map<std::string, std::string> parts = {
      {"CF_NONCE", make_nonce()},
      {"CF_DATA", inline_json(data)},
      {"CF_STYLE", std::string(view::asset("view.css"))},
      {"CF_LIB_CYTOSCAPE", std::string(view::asset("cytoscape.min.js"))},
      {"CF_LIB_DAGRE", std::string(view::asset("cytoscape-dagre.min.js"))},
      {"CF_SCRIPT_COMMON", std::string(view::asset("view_common.js"))},
      {"CF_SCRIPT_GRAPH", std::string(view::asset("view_graph.js"))},
      {"CF_SCRIPT_TRACE", std::string(view::asset("view_trace.js"))},
  };
  for (const auto& [name, text] : parts) {
    if (text.empty()) return fail_with(error, "view: internal error: no " + name + " embedded");
  }
  return fill_template(parts, page, error);
}

// Written to a temporary file beside `path` and renamed over it, so a
// failure never leaves a half-written page under the real name.
bool write_atomically(const std::string& path, const std::string& text, std::string* error) {
  std::string tmp = path + ".XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) return fail_with(error, path + ": cannot create a file beside it (" + std::strerror(errno) + ")");
  const mode_t mask = umask(0);  // mkstemp makes 0600; a page is as readable as any new file
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const std::string reason = std::strerror(errno);
  if (close(fd) != 0 || done != text.size()) {
    unlink(tmp.c_str());
    return fail_with(error, path + ": write failed (" + reason + ")");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    unlink(tmp.c_str());
    return fail_with(error, path + ": cannot rename " + tmp + " to it (" + why + ")");
  }
  return true;
}

// F.json -> F.html; any other name gets .html added.
std::string default_output(const std::string& input) {
  const std::string ext = ".json";
  if (input.size() > ext.size() && input.compare(input.size() - ext.size(), ext.size(), ext) == 0) {
    return input.substr(0, input.size() - ext.size()) + ".html";
  }
  return input + ".html";
}

// The page's data for a graph file (graph/README.md, "See a DAG").
bool graph_data(const std::string& path, uint64_t collapse_above, Json* data, std::string* summary,
                std::string* error) {
  GlobalDag dag;
  if (!load_dag_file(path, &dag, error)) return false;  // names the file, the JSON path and the rule
  uint64_t cars = 0;
  for (const LocalDag& image : dag.images) cars += image.cars.size();
  *data = {{"format", "graph"}, {"collapse_above", collapse_above}, {"dag", Json::parse(dag_to_json(dag))}};
  *summary = dag.spec.algorithm + " " + coll_kind_name(dag.spec.kind) + " on " +
             std::to_string(dag.images.size()) + " images, " + std::to_string(cars) + " CARs" +
             (dag.images.size() > collapse_above ? ", opening collapsed" : "");
  return true;
}

bool trace_data(const std::string& path, const std::string& text, Json* data, std::string* summary,
                std::string* error) {
  if (!trace_page_data(text, data, error)) {
    *error = path + ": " + *error;
    return false;
  }
  (*data)["format"] = "trace";
  *summary = "trace, " + std::to_string((*data)["events"].size()) + " events";
  return true;
}

}  // namespace

int cmd_view(const Args& args) {
  auto file = args.find("_0");
  if (file == args.end()) return fail("view: a graph or trace file is required (carflow view F.json)");
  const std::string input = file->second;
  const std::string output = args.count("o") ? args.at("o") : default_output(input);
  std::string error;
  uint64_t collapse_above = 0;
  if (!get_uint(args, "collapse-above", 64, 0, 65536, &collapse_above, &error)) return fail(error);
  std::error_code ec;
  if (std::filesystem::equivalent(input, output, ec)) return fail("-o: " + output + " is the input file");
  InputKind kind;
  std::string text, summary, page;
  Json data;
  if (!input_kind(input, &kind, &text, &error)) return fail(error);
  const bool read = kind == InputKind::Trace ? trace_data(input, text, &data, &summary, &error)
                                             : graph_data(input, collapse_above, &data, &summary, &error);
  if (!read) return fail(error);
  data["file"] = std::filesystem::path(input).filename().string();
  if (!build_page(data, &page, &error) || !write_atomically(output, page, &error)) return fail(error);
  std::printf("%s; wrote %s\n", summary.c_str(), output.c_str());
  return 0;
}

}  // namespace carflow::cli
