// Loading graph JSON: bounds on the raw text, parsing, GraphReader on the
// document's top level and its message list, validate_global, and reading a
// file of bounded size. A hostile file ends in an error message, never in
// an exception.
#include "graph/json.h"

#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>
#include <vector>

#include "graph/json_reader.h"
#include "graph/validate.h"

namespace carflow {
namespace json_internal {

bool GraphReader::read_document(const Json& doc, GlobalDag* dag) {
  const Path root;
  std::string schema, scope;
  // The schema first: a document of another schema fails on that, not on
  // whichever of its fields this reader happens not to know.
  if (!expect_object(doc, root) || !read_string(doc, root, "schema", &schema)) return false;
  if (schema != kSchema) {
    return fail_at(root.field("schema"), "'" + schema.substr(0, 64) + "' is not supported (expected '" +
                                             kSchema + "')");
  }
  if (!only_fields(doc, root, {"schema", "scope", "collective", "images", "messages", "run_state"}, "the document") ||
      !read_string(doc, root, "scope", &scope)) {
    return false;
  }
  if (scope != "global") {
    return fail_at(root.field("scope"), "'" + scope.substr(0, 64) + "' is not supported (expected 'global')");
  }
  const Json* collective = field(doc, root, "collective");
  const Json* images = nullptr;
  const Path images_path = root.field("images");
  if (collective == nullptr || !read_spec(*collective, root.field("collective"), &dag->spec) ||
      (images = field(doc, root, "images")) == nullptr || !expect_array(*images, images_path, kMaxImages)) {
    return false;
  }
  if (images->size() != dag->spec.images) {
    return fail_at(images_path, std::to_string(images->size()) + " entries but collective.images is " +
                                    std::to_string(dag->spec.images));
  }
  dag->images.resize(images->size());
  const Extents implied(dag->spec);  // each layout built once, not per image
  for (uint32_t i = 0; i < images->size(); ++i) {
    if (!read_image((*images)[i], images_path.at(i), i, dag->spec.images, implied, &dag->images[i])) {
      return false;
    }
  }
  return read_run_state(doc, root, dag);
}

// A hang dump's states: one known name per CAR of an existing image.
bool GraphReader::read_run_state(const Json& doc, const Path& root, GlobalDag* dag) {
  const auto it = doc.find("run_state");
  if (it == doc.end()) return true;
  const Path at = root.field("run_state");
  uint32_t image = 0;
  if (!expect_object(*it, at) || !only_fields(*it, at, {"image", "cars"}, "run_state") ||
      !read_uint(*it, at, "image", 0, dag->images.empty() ? 0 : dag->images.size() - 1, &image)) {
    return false;
  }
  const Json* cars = field(*it, at, "cars");
  const size_t want = dag->images[image].cars.size();
  if (cars == nullptr || !expect_array(*cars, at.field("cars"), want)) return false;
  if (cars->size() != want) {
    return fail_at(at.field("cars"), std::to_string(cars->size()) + " entries but image " + std::to_string(image) +
                                         " has " + std::to_string(want) + " CARs");
  }
  dag->run_state.image = image;
  for (size_t i = 0; i < cars->size(); ++i) {
    CarRunState s;
    if (!(*cars)[i].is_string() || !parse_run_state((*cars)[i].get<std::string>(), &s)) {
      return fail_at(at.field("cars").at(i), "expected one of done, running, ready, waiting_dep, waiting_message");
    }
    dag->run_state.cars.push_back(s);
  }
  return true;
}

bool GraphReader::read_pair(const Json& obj, const Path& at, const char* key, uint32_t* image, CarId* car) {
  const Json* value = field(obj, at, key);
  const Path path = at.field(key);
  if (value == nullptr) return false;
  if (!value->is_array() || value->size() != 2) return fail_at(path, "expected [image, car]");
  uint64_t i = 0, c = 0;
  if (!uint_value((*value)[0], path.at(0), 0, UINT32_MAX, &i) ||
      !uint_value((*value)[1], path.at(1), 0, UINT32_MAX, &c)) {
    return false;
  }
  *image = static_cast<uint32_t>(i);
  *car = static_cast<CarId>(c);
  return true;
}

// The message list is redundant (it follows from the CARs), so it must agree
// with the matching; a disagreement means the file was edited by hand.
bool GraphReader::check_messages(const Json& doc, const GlobalDag& dag) {
  const auto it = doc.find("messages");
  if (it == doc.end()) return true;
  const Path root;
  const Path at = root.field("messages");
  std::vector<MessageEdge> edges;
  if (!match_messages(dag, &edges, error_) || !expect_array(*it, at, edges.size())) return false;
  if (it->size() != edges.size()) {
    return fail_at(at, std::to_string(it->size()) + " entries but the DAG has " +
                           std::to_string(edges.size()) + " matched messages");
  }
  for (size_t i = 0; i < edges.size(); ++i) {
    const Json& value = (*it)[i];
    MessageEdge listed;
    if (!expect_object(value, at.at(i)) || !only_fields(value, at.at(i), {"from", "to"}, "a message") ||
        !read_pair(value, at.at(i), "from", &listed.from_image, &listed.from_car) ||
        !read_pair(value, at.at(i), "to", &listed.to_image, &listed.to_car)) {
      return false;
    }
    const MessageEdge& e = edges[i];
    if (listed != e) {
      return fail_at(at.at(i), "does not match the CARs, which pair image " + std::to_string(e.from_image) +
                                   " car " + std::to_string(e.from_car) + " with image " +
                                   std::to_string(e.to_image) + " car " + std::to_string(e.to_car));
    }
  }
  return true;
}

}  // namespace json_internal

namespace {

using json_internal::errno_text;
using json_internal::fail;
using json_internal::GraphReader;
using json_internal::Json;

constexpr size_t kMaxNesting = 64;  // the schema itself nests 7 levels

bool check_nesting(const std::string& text, std::string* error) {
  if (json_nesting_ok(text, kMaxNesting)) return true;
  return fail(error, "document: nests deeper than " + std::to_string(kMaxNesting) + " levels");
}

// Parser messages quote the bytes they stopped at, which may be invalid UTF-8
// or control characters; an error message should be safe to print.
std::string printable(const std::string& text) {
  std::string out = text;
  for (char& ch : out) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
  }
  return out;
}

bool parse_and_read(const std::string& text, GlobalDag* out, std::string* error) {
  if (text.size() > kMaxGraphDocumentBytes) {
    return fail(error, "document: " + std::to_string(text.size()) + " bytes exceed the limit of 512 MiB");
  }
  if (!check_nesting(text, error)) return false;
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::exception& e) {
    return fail(error, "not valid JSON: " + printable(e.what()));
  }
  GlobalDag dag;
  GraphReader reader(error);
  if (!reader.read_document(doc, &dag) || !validate_global(dag, error) ||
      !reader.check_messages(doc, dag)) {
    return false;
  }
  *out = std::move(dag);
  return true;
}

}  // namespace

// Checked up front where the size is known, and while reading for files
// whose size is not (pipes, /dev/zero).
bool read_bounded_file(const std::string& path, uint64_t limit, std::string* text, std::string* error) {
  const std::string too_big = path + ": larger than the limit of " + std::to_string(limit >> 20) + " MiB";
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) return fail(error, path + ": is a directory");
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail(error, path + ": cannot open (" + errno_text() + ")");
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > limit) return fail(error, too_big + " (" + std::to_string(size) + " bytes)");
  std::vector<char> chunk(1 << 16);
  while (file.read(chunk.data(), chunk.size()) || file.gcount() > 0) {
    text->append(chunk.data(), static_cast<size_t>(file.gcount()));
    if (text->size() > limit) return fail(error, too_big);
  }
  if (file.bad()) return fail(error, path + ": read failed (" + errno_text() + ")");
  return true;
}

bool dag_from_json(const std::string& text, GlobalDag* out, std::string* error) {
  // Nothing may escape: callers include the C API, and a hostile file must
  // end in an error message, whatever the parser or allocator throws.
  try {
    return parse_and_read(text, out, error);
  } catch (const std::exception& e) {
    return fail(error, std::string("document: cannot be loaded (") + printable(e.what()) + ")");
  } catch (...) {
    return fail(error, "document: cannot be loaded (unknown exception)");
  }
}

bool load_dag_file(const std::string& path, GlobalDag* out, std::string* error) {
  std::string text;
  try {
    if (!read_bounded_file(path, kMaxGraphDocumentBytes, &text, error)) return false;
  } catch (const std::exception& e) {
    return fail(error, path + ": cannot be read (" + printable(e.what()) + ")");
  }
  std::string problem;
  if (!dag_from_json(text, out, &problem)) return fail(error, path + ": " + problem);
  return true;
}

bool json_nesting_ok(const std::string& text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (const char ch : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (ch == '\\') {
        escaped = true;
      } else if (ch == '"') {
        in_string = false;
      }
    } else if (ch == '"') {
      in_string = true;
    } else if (ch == '[' || ch == '{') {
      if (++depth > max_depth) return false;
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

}  // namespace carflow
