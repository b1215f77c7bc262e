// Graph JSON, schema "carflow.graph/1": the writer, a reader that trusts
// nothing in its input, file I/O, and the Graphviz rendering.
//
// The reader checks each field for presence, type and range as it descends
// and names the JSON path of the first one that fails; structural rules
// (buffer bounds, cycles, message matching) are left to validate_global, so
// they live in one place.
#include "graph/json.h"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <sstream>
#include <utility>
#include <vector>

#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/validate.h"

namespace carflow {
namespace {

using Json = nlohmann::json;
using OrderedJson = nlohmann::ordered_json;

constexpr const char* kSchema = "carflow.graph/1";
constexpr uint64_t kMaxImages = 65536;
constexpr uint64_t kMaxCarsPerImage = uint64_t{16} << 20;
constexpr uint64_t kMaxTempSlots = 4096;
constexpr size_t kMaxAlgorithmChars = 256;
constexpr size_t kMaxNesting = 64;  // the schema itself nests 7 levels
constexpr uint64_t kMaxDocumentBytes = kMaxGraphDocumentBytes;
// collective.nbytes, user buffers, temp slots: below 2^48 bytes, the bound
// check_layout (graph/layout.h) puts on every extent.
constexpr uint64_t kMaxBufferBytes = (uint64_t{1} << 48) - 1;

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// The length of the well-formed UTF-8 sequence at text[i], or 0 when the
// bytes there are not one (overlong forms and surrogates included).
size_t utf8_sequence(const std::string& text, size_t i) {
  const auto byte = [&](size_t k) -> unsigned {
    return k < text.size() ? static_cast<unsigned char>(text[k]) : 0u;
  };
  const unsigned lead = byte(i);
  if (lead < 0x80) return 1;
  size_t n = 0;
  unsigned lo = 0x80, hi = 0xbf;  // the range of the second byte
  if (lead >= 0xc2 && lead <= 0xdf) {
    n = 2;
  } else if (lead >= 0xe0 && lead <= 0xef) {
    n = 3;
    if (lead == 0xe0) lo = 0xa0;
    if (lead == 0xed) hi = 0x9f;
  } else if (lead >= 0xf0 && lead <= 0xf4) {
    n = 4;
    if (lead == 0xf0) lo = 0x90;
    if (lead == 0xf4) hi = 0x8f;
  } else {
    return 0;
  }
  if (byte(i + 1) < lo || byte(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k) {
    if (byte(i + k) < 0x80 || byte(i + k) > 0xbf) return 0;
  }
  return n;
}

// The code point of the control character (Unicode category Cc: U+0000 to
// U+001F, U+007F to U+009F) whose encoding starts at text[i], or -1.
int control_at(const std::string& text, size_t i) {
  const unsigned c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) return static_cast<int>(c);
  if (c == 0xc2 && i + 1 < text.size()) {
    const unsigned next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return static_cast<int>(next);
  }
  return -1;
}

// Text safe to print in an error message or a DOT label: control
// characters and bytes that are not UTF-8 become '?'.
std::string visible(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size();) {
    const size_t n = utf8_sequence(text, i);
    if (n == 0 || control_at(text, i) >= 0) {
      out += '?';
      i += n == 0 ? 1 : n;
    } else {
      out.append(text, i, n);
      i += n;
    }
  }
  return out;
}

// The rule an algorithm name must meet, or "" when it does: a generator
// registered for the kind, or the name of a DAG built by hand.
std::string algorithm_problem(const CollectiveSpec& spec) {
  if (spec.algorithm == kHandBuiltAlgorithm ||
      GeneratorRegistry::instance().find(spec.kind, spec.algorithm) != nullptr) {
    return "";
  }
  const std::string names = GeneratorRegistry::instance().names(spec.kind);
  return "'" + visible(spec.algorithm.substr(0, 64)) + "' is not an algorithm of " + coll_kind_name(spec.kind) +
         " (registered: " + (names.empty() ? "none" : names) + "; or " + kHandBuiltAlgorithm +
         " for a DAG built by hand)";
}

// ---- writer ---------------------------------------------------------------

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

// ---- reader ---------------------------------------------------------------

// A JSON path kept on the stack as the reader descends; it becomes text only
// when an error needs it, so reading a million CARs builds no path strings.
struct Path {
  const Path* parent = nullptr;
  const char* key = nullptr;  // a field name, or null for an array index
  size_t index = 0;
  Path field(const char* name) const { return Path{this, name, 0}; }
  Path at(size_t i) const { return Path{this, nullptr, i}; }
  std::string str() const {
    std::vector<const Path*> chain;
    for (const Path* p = this; p->parent != nullptr; p = p->parent) chain.push_back(p);
    if (chain.empty()) return "document";
    std::string out;
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if ((*it)->key == nullptr) {
        out += "[" + std::to_string((*it)->index) + "]";
      } else {
        out += (out.empty() ? "" : ".") + std::string((*it)->key);
      }
    }
    return out;
  }
};

// What the CARs of one image may refer to.
struct ImageContext {
  uint32_t images = 0;  // P
  uint32_t image = 0;
  size_t cars = 0;
  size_t temps = 0;
  size_t members = 0;  // aggregate members (0: a single collective)
};

class GraphReader {
 public:
  explicit GraphReader(std::string* error) : error_(error) {}
  bool read_document(const Json& doc, GlobalDag* dag);
  bool check_messages(const Json& doc, const GlobalDag& dag);

 private:
  bool fail_at(const Path& at, const std::string& rule) { return fail(error_, at.str() + ": " + rule); }
  bool expect_object(const Json& value, const Path& at);
  bool expect_array(const Json& value, const Path& at, uint64_t max_entries);
  bool only_fields(const Json& obj, const Path& at, std::initializer_list<const char*> allowed,
                   const std::string& what);
  const Json* field(const Json& obj, const Path& at, const char* key);
  template <typename T>
  bool read_uint(const Json& obj, const Path& at, const char* key, uint64_t min, uint64_t max, T* out);
  bool uint_value(const Json& value, const Path& at, uint64_t min, uint64_t max, uint64_t* out);
  bool read_string(const Json& obj, const Path& at, const char* key, std::string* out);
  template <typename Enum>
  bool read_name(const Json& obj, const Path& at, const char* key, bool (*parse)(const std::string&, Enum*),
                 const char* what, Enum* out);
  bool read_flags(const Json& obj, const Path& at, int* out);
  bool read_spec(const Json& value, const Path& at, CollectiveSpec* spec);
  template <typename T>
  bool read_optional_array(const Json& obj, const Path& at, const char* key, uint64_t max_entries,
                           uint64_t max_value, std::vector<T>* out);
  template <typename T>
  bool read_optional_uint(const Json& obj, const Path& at, const char* key, uint64_t max, T* out);
  bool read_spec_extras(const Json& value, const Path& at, CollectiveSpec* spec);
  bool read_image(const Json& value, const Path& at, uint32_t index, uint32_t images,
                  const Extents& implied, LocalDag* dag);
  bool read_temps(const Json& obj, const Path& at, std::vector<uint64_t>* temps);
  bool read_members(const Json& obj, const Path& at, std::vector<MemberBuffers>* members);
  bool read_car(const Json& value, const Path& at, const ImageContext& ctx, CarId id, Car* car);
  bool read_peer_and_tag(const Json& obj, const Path& at, const ImageContext& ctx, Car* car);
  bool read_buffer(const Json& value, const Path& at, const ImageContext& ctx, BufferRef* ref);
  bool read_incoming_left(const Json& obj, const Path& at, Car* car);
  bool read_shape(const Json& obj, const Path& at, Car* car);
  bool read_deps(const Json& obj, const Path& at, const ImageContext& ctx, CarId id, Car* car);
  bool read_pair(const Json& obj, const Path& at, const char* key, uint32_t* image, CarId* car);

  std::string* error_;
};

bool GraphReader::expect_object(const Json& value, const Path& at) {
  return value.is_object() || fail_at(at, "expected an object");
}

bool GraphReader::expect_array(const Json& value, const Path& at, uint64_t max_entries) {
  if (!value.is_array()) return fail_at(at, "expected an array");
  if (value.size() > max_entries) {
    return fail_at(at, std::to_string(value.size()) + " entries exceed the limit of " +
                           std::to_string(max_entries));
  }
  return true;
}

// Unknown fields are rejected rather than skipped: a misspelt optional field
// ("incomming_left") would otherwise load as its default without a word.
bool GraphReader::only_fields(const Json& obj, const Path& at,
                              std::initializer_list<const char*> allowed, const std::string& what) {
  for (const auto& item : obj.items()) {
    bool known = false;
    for (const char* name : allowed) known = known || item.key() == name;
    if (!known) {
      // The name is the file's: shown truncated and without control characters.
      const std::string shown = visible(item.key().substr(0, 64));
      return fail_at(at.field(shown.c_str()), "not a field of " + what);
    }
  }
  return true;
}

const Json* GraphReader::field(const Json& obj, const Path& at, const char* key) {
  const auto it = obj.find(key);
  if (it == obj.end()) {
    fail_at(at.field(key), "missing");
    return nullptr;
  }
  return &*it;
}

// nlohmann parses a negative integer as number_integer and a fraction, an
// exponent or anything from 2^64 up as number_float: all fail here.
bool GraphReader::uint_value(const Json& value, const Path& at, uint64_t min, uint64_t max,
                             uint64_t* out) {
  if (!value.is_number_unsigned()) return fail_at(at, "expected an unsigned integer");
  const uint64_t x = value.get<uint64_t>();
  if (x < min || x > max) {
    return fail_at(at, std::to_string(x) + " is out of range [" + std::to_string(min) + ", " +
                           std::to_string(max) + "]");
  }
  *out = x;
  return true;
}

template <typename T>
bool GraphReader::read_uint(const Json& obj, const Path& at, const char* key, uint64_t min,
                            uint64_t max, T* out) {
  const Json* value = field(obj, at, key);
  uint64_t x = 0;
  if (value == nullptr || !uint_value(*value, at.field(key), min, max, &x)) return false;
  *out = static_cast<T>(x);
  return true;
}

bool GraphReader::read_string(const Json& obj, const Path& at, const char* key, std::string* out) {
  const Json* value = field(obj, at, key);
  if (value == nullptr) return false;
  if (!value->is_string()) return fail_at(at.field(key), "expected a string");
  const std::string& text = value->get_ref<const std::string&>();
  // A NUL would cut the string short wherever it is printed, and the rest
  // would garble messages and DOT labels; no name needs one.
  for (size_t i = 0; i < text.size(); ++i) {
    const int c = control_at(text, i);
    if (c >= 0) {
      char code[8];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(c));
      return fail_at(at.field(key), std::string("holds the control character ") + code + " at byte " +
                                        std::to_string(i));
    }
  }
  *out = text;
  return true;
}

template <typename Enum>
bool GraphReader::read_name(const Json& obj, const Path& at, const char* key,
                            bool (*parse)(const std::string&, Enum*), const char* what, Enum* out) {
  std::string name;
  if (!read_string(obj, at, key, &name)) return false;
  if (name.size() > 64 || !parse(name, out)) {
    return fail_at(at.field(key), "'" + name.substr(0, 64) + "' is not " + what);
  }
  return true;
}

bool GraphReader::read_flags(const Json& obj, const Path& at, int* out) {
  const Json* value = field(obj, at, "flags");
  if (value == nullptr) return false;
  const bool fits = value->is_number_unsigned() ? value->get<uint64_t>() <= INT_MAX
                    : value->is_number_integer()
                        ? value->get<int64_t>() >= INT_MIN && value->get<int64_t>() <= INT_MAX
                        : false;
  if (!fits) return fail_at(at.field("flags"), "expected an integer in the range of int");
  *out = static_cast<int>(value->get<int64_t>());
  return true;
}

bool GraphReader::read_spec(const Json& value, const Path& at, CollectiveSpec* spec) {
  if (!expect_object(value, at) ||
      !only_fields(value, at,
                   {"kind", "algorithm", "images", "root", "nbytes", "elem_size", "segment_bytes",
                    "flags", "counts", "displs", "perm", "radix", "window", "logp", "src_layout",
                    "dst_layout", "images_per_node"},
                   "the collective")) {
    return false;
  }
  if (!read_name(value, at, "kind", parse_coll_kind,
                 "a collective kind (broadcast, barrier, allreduce, scatter, gather, gather_all, "
                 "exchange, permute, reduce_vec, scan, reduce_scatter, reduce, prefix_reduce)",
                 &spec->kind) ||
      !read_string(value, at, "algorithm", &spec->algorithm) ||
      !read_uint(value, at, "images", 1, kMaxImages, &spec->images) ||
      !read_uint(value, at, "root", 0, UINT32_MAX, &spec->root) ||
      !read_uint(value, at, "nbytes", 0, kMaxBufferBytes, &spec->nbytes) ||
      !read_uint(value, at, "elem_size", 1, UINT32_MAX, &spec->elem_size) ||
      !read_uint(value, at, "segment_bytes", 0, UINT64_MAX, &spec->segment_bytes) ||
      !read_flags(value, at, &spec->flags)) {
    return false;
  }
  if (spec->algorithm.size() > kMaxAlgorithmChars) {
    return fail_at(at.field("algorithm"), "longer than " + std::to_string(kMaxAlgorithmChars) + " bytes");
  }
  const std::string problem = algorithm_problem(*spec);
  if (!problem.empty()) return fail_at(at.field("algorithm"), problem);
  if (spec->root >= spec->images) {
    return fail_at(at.field("root"), std::to_string(spec->root) + " is not a team rank (P = " +
                                         std::to_string(spec->images) + ")");
  }
  return read_spec_extras(value, at, spec);
}

template <typename T>
bool GraphReader::read_optional_array(const Json& obj, const Path& at, const char* key,
                                      uint64_t max_entries, uint64_t max_value, std::vector<T>* out) {
  const auto it = obj.find(key);
  if (it == obj.end()) return true;
  const Path here = at.field(key);
  if (!expect_array(*it, here, max_entries)) return false;
  out->reserve(it->size());
  for (size_t i = 0; i < it->size(); ++i) {
    uint64_t x = 0;
    if (!uint_value((*it)[i], here.at(i), 0, max_value, &x)) return false;
    out->push_back(static_cast<T>(x));
  }
  return true;
}

template <typename T>
bool GraphReader::read_optional_uint(const Json& obj, const Path& at, const char* key, uint64_t max,
                                     T* out) {
  return obj.find(key) == obj.end() || read_uint(obj, at, key, 0, max, out);
}

// The layout and algorithm-parameter fields; check_layout (graph/layout.h)
// then applies the per-kind rules, so a generator never sees a bad layout.
bool GraphReader::read_spec_extras(const Json& value, const Path& at, CollectiveSpec* spec) {
  const uint64_t P = spec->images;
  if (!read_optional_array(value, at, "counts", P * P, UINT64_MAX, &spec->counts) ||
      !read_optional_array(value, at, "displs", P, UINT64_MAX, &spec->displs) ||
      !read_optional_array(value, at, "perm", P, UINT32_MAX, &spec->perm) ||
      !read_optional_uint(value, at, "radix", UINT32_MAX, &spec->radix) ||
      !read_optional_uint(value, at, "window", UINT32_MAX, &spec->window) ||
      !read_optional_uint(value, at, "images_per_node", UINT32_MAX, &spec->images_per_node)) {
    return false;
  }
  const auto logp = value.find("logp");
  if (logp != value.end()) {
    const Path here = at.field("logp");
    if (!expect_object(*logp, here) || !only_fields(*logp, here, {"L", "o", "g"}, "logp") ||
        !read_uint(*logp, here, "L", 0, UINT32_MAX, &spec->logp_L) ||
        !read_uint(*logp, here, "o", 0, UINT32_MAX, &spec->logp_o) ||
        !read_uint(*logp, here, "g", 0, UINT32_MAX, &spec->logp_g)) {
      return false;
    }
  }
  const std::pair<const char*, uint64_t*> layouts[] = {{"src_layout", &spec->src_blksz},
                                                        {"dst_layout", &spec->dst_blksz}};
  for (const auto& [key, blksz] : layouts) {
    const auto it = value.find(key);
    if (it == value.end()) continue;
    const Path here = at.field(key);
    uint64_t* offset = blksz == &spec->src_blksz ? &spec->src_offset : &spec->dst_offset;
    if (!expect_object(*it, here) || !only_fields(*it, here, {"blksz", "offset"}, key) ||
        !read_uint(*it, here, "blksz", 0, UINT64_MAX, blksz) ||
        !read_uint(*it, here, "offset", 0, UINT64_MAX, offset)) {
      return false;
    }
  }
  std::string problem;
  if (!check_layout(*spec, &problem)) return fail_at(at, problem);
  return true;
}

bool GraphReader::read_temps(const Json& obj, const Path& at, std::vector<uint64_t>* temps) {
  const Json* value = field(obj, at, "temps");
  const Path path = at.field("temps");
  if (value == nullptr || !expect_array(*value, path, kMaxTempSlots)) return false;
  temps->resize(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    if (!uint_value((*value)[i], path.at(i), 0, kMaxBufferBytes, &(*temps)[i])) return false;
  }
  return true;
}

// Aggregates: each member's user buffer sizes and element size (optional).
bool GraphReader::read_members(const Json& obj, const Path& at, std::vector<MemberBuffers>* members) {
  const auto it = obj.find("members");
  if (it == obj.end()) return true;
  const Path path = at.field("members");
  if (!expect_array(*it, path, kMaxAggregateMembers)) return false;
  members->resize(it->size());
  for (size_t m = 0; m < it->size(); ++m) {
    const Json& e = (*it)[m];
    const Path here = path.at(m);
    MemberBuffers& out = (*members)[m];
    if (!expect_object(e, here) ||
        !only_fields(e, here, {"src_bytes", "dst_bytes", "elem_size"}, "an aggregate member") ||
        !read_uint(e, here, "src_bytes", 0, kMaxBufferBytes, &out.src_bytes) ||
        !read_uint(e, here, "dst_bytes", 0, kMaxBufferBytes, &out.dst_bytes) ||
        !read_uint(e, here, "elem_size", 1, UINT32_MAX, &out.elem_size)) {
      return false;
    }
  }
  return true;
}

bool GraphReader::read_image(const Json& value, const Path& at, uint32_t index, uint32_t images,
                             const Extents& implied, LocalDag* dag) {
  if (!expect_object(value, at) ||
      !only_fields(value, at, {"image", "src_bytes", "dst_bytes", "temps", "exit", "members", "cars"},
                   "an image") ||
      !read_uint(value, at, "image", 0, UINT32_MAX, &dag->image)) {
    return false;
  }
  if (dag->image != index) {
    return fail_at(at.field("image"), std::to_string(dag->image) + " must equal its index " +
                                          std::to_string(index));
  }
  const Json* cars = nullptr;
  if (!read_uint(value, at, "src_bytes", 0, kMaxBufferBytes, &dag->src_bytes) ||
      !read_uint(value, at, "dst_bytes", 0, kMaxBufferBytes, &dag->dst_bytes)) {
    return false;
  }
  // The user buffers are the collective's (an aggregate's: its first
  // member's, which the collective describes); no other size is right.
  const struct {
    const char* key;
    uint64_t got, want;
  } user[] = {{"src_bytes", dag->src_bytes, implied.src(index)},
              {"dst_bytes", dag->dst_bytes, implied.dst(index)}};
  for (const auto& [key, got, want] : user) {
    if (got != want) {
      return fail_at(at.field(key), std::to_string(got) + " must equal " + std::to_string(want) +
                                        ", the size the collective implies for image " +
                                        std::to_string(index));
    }
  }
  if (!read_temps(value, at, &dag->temps) || (cars = field(value, at, "cars")) == nullptr ||
      !expect_array(*cars, at.field("cars"), kMaxCarsPerImage) ||
      !read_uint(value, at, "exit", 0, UINT32_MAX, &dag->exit)) {
    return false;
  }
  if (dag->exit >= cars->size()) {
    return fail_at(at.field("exit"), std::to_string(dag->exit) + " is not a CAR of this image (" +
                                         std::to_string(cars->size()) + " cars)");
  }
  if (!read_members(value, at, &dag->members)) return false;
  const ImageContext ctx{images, index, cars->size(), dag->temps.size(), dag->members.size()};
  const Path cars_path = at.field("cars");
  dag->cars.resize(cars->size());
  for (CarId id = 0; id < cars->size(); ++id) {
    if (!read_car((*cars)[id], cars_path.at(id), ctx, id, &dag->cars[id])) return false;
  }
  return true;
}

bool GraphReader::read_car(const Json& value, const Path& at, const ImageContext& ctx, CarId id,
                           Car* car) {
  CarId json_id = 0;
  if (!expect_object(value, at) ||
      !only_fields(value, at,
                   {"id", "kind", "peer", "tag", "src", "src2", "dst", "incoming_left", "shape",
                    "first_elems", "chunk_elems", "sync", "member", "deps"},
                   "a CAR") ||
      !read_uint(value, at, "id", 0, UINT32_MAX, &json_id)) {
    return false;
  }
  if (json_id != id) {
    return fail_at(at.field("id"), std::to_string(json_id) + " must equal its index " + std::to_string(id));
  }
  if (!read_name(value, at, "kind", parse_car_kind,
                 "a CAR kind (SEND, RECV, RECV_REDUCE, REDUCE, COPY, JOIN)", &car->kind) ||
      !read_peer_and_tag(value, at, ctx, car)) {
    return false;
  }
  // Which buffers a kind may use is validate_global's rule; here an absent
  // buffer is simply none.
  const std::pair<const char*, BufferRef*> buffers[] = {
      {"src", &car->src}, {"src2", &car->src2}, {"dst", &car->dst}};
  for (const auto& [key, ref] : buffers) {
    const auto it = value.find(key);
    if (it != value.end() && !read_buffer(*it, at.field(key), ctx, ref)) return false;
  }
  const auto sync = value.find("sync");
  if (sync != value.end()) {
    if (!sync->is_boolean()) return fail_at(at.field("sync"), "expected true or false");
    car->sync = sync->get<bool>();
  }
  if (value.contains("member")) {
    if (!read_uint(value, at, "member", 1, UINT32_MAX, &car->member)) return false;
    if (car->member >= ctx.members) {
      return fail_at(at.field("member"), std::to_string(car->member) + " is not a member of this image's "
                                         "aggregate (" + std::to_string(ctx.members) + " members)");
    }
  }
  return read_incoming_left(value, at, car) && read_shape(value, at, car) &&
         read_deps(value, at, ctx, id, car);
}

bool GraphReader::read_shape(const Json& obj, const Path& at, Car* car) {
  if (obj.contains("shape") &&
      !read_name(obj, at, "shape", parse_reduce_shape, "a reduce shape (elementwise, fold, prefix)",
                 &car->shape)) {
    return false;
  }
  if (car->kind != CarKind::Reduce) {
    for (const char* key : {"shape", "first_elems", "chunk_elems"}) {
      if (obj.contains(key)) return fail_at(at.field(key), "only REDUCE has one");
    }
  }
  // The chunk rules themselves are validate_global's (they need elem_size).
  return read_optional_uint(obj, at, "first_elems", UINT64_MAX, &car->first_elems) &&
         read_optional_uint(obj, at, "chunk_elems", UINT64_MAX, &car->chunk_elems);
}

bool GraphReader::read_peer_and_tag(const Json& obj, const Path& at, const ImageContext& ctx, Car* car) {
  if (!car->is_message()) {
    for (const char* key : {"peer", "tag"}) {
      if (obj.contains(key)) return fail_at(at.field(key), "only SEND, RECV and RECV_REDUCE have one");
    }
    return true;
  }
  if (!read_uint(obj, at, "peer", 0, UINT32_MAX, &car->peer) ||
      !read_uint(obj, at, "tag", 0, UINT32_MAX, &car->tag)) {
    return false;
  }
  const std::string peer = std::to_string(car->peer);
  if (car->peer >= ctx.images) {
    return fail_at(at.field("peer"), peer + " is not a team rank (P = " + std::to_string(ctx.images) + ")");
  }
  if (car->peer == ctx.image) return fail_at(at.field("peer"), peer + " is the image itself");
  return true;
}

bool GraphReader::read_buffer(const Json& value, const Path& at, const ImageContext& ctx, BufferRef* ref) {
  if (!expect_object(value, at) ||
      !only_fields(value, at, {"space", "slot", "offset", "length"}, "a buffer") ||
      !read_name(value, at, "space", parse_buffer_space, "a buffer space (none, user_src, user_dst, temp)",
                 &ref->space)) {
    return false;
  }
  if (ref->space == BufferSpace::Temp) {
    if (!read_uint(value, at, "slot", 0, UINT32_MAX, &ref->slot)) return false;
    if (ref->slot >= ctx.temps) {
      return fail_at(at.field("slot"), std::to_string(ref->slot) + " is not a temp slot (the image has " +
                                           std::to_string(ctx.temps) + ")");
    }
  } else if (value.contains("slot")) {
    return fail_at(at.field("slot"), "only temp buffers have a slot");
  }
  return read_uint(value, at, "offset", 0, UINT64_MAX, &ref->offset) &&
         read_uint(value, at, "length", 0, UINT64_MAX, &ref->length);
}

bool GraphReader::read_incoming_left(const Json& obj, const Path& at, Car* car) {
  const auto it = obj.find("incoming_left");
  if (it == obj.end()) return true;
  if (car->kind != CarKind::RecvReduce) {
    return fail_at(at.field("incoming_left"), "only RECV_REDUCE has incoming_left");
  }
  if (!it->is_boolean()) return fail_at(at.field("incoming_left"), "expected true or false");
  car->incoming_left = it->get<bool>();
  return true;
}

bool GraphReader::read_deps(const Json& obj, const Path& at, const ImageContext& ctx, CarId id, Car* car) {
  const Json* deps = field(obj, at, "deps");
  const Path path = at.field("deps");
  // A list longer than the image must name some CAR twice: bounded by it.
  if (deps == nullptr || !expect_array(*deps, path, ctx.cars)) return false;
  car->deps.resize(deps->size());
  for (size_t i = 0; i < deps->size(); ++i) {
    const Json& value = (*deps)[i];
    const Path dep_path = path.at(i);
    Dep& dep = car->deps[i];
    if (!expect_object(value, dep_path) || !only_fields(value, dep_path, {"car", "kind"}, "a dependency") ||
        !read_uint(value, dep_path, "car", 0, UINT32_MAX, &dep.car) ||
        !read_name(value, dep_path, "kind", parse_dep_kind, "a dependency kind (progress, buffer)",
                   &dep.kind)) {
      return false;
    }
    const std::string name = std::to_string(dep.car);
    if (dep.car == id) return fail_at(dep_path.field("car"), name + " is the CAR itself");
    if (dep.car >= ctx.cars) {
      return fail_at(dep_path.field("car"), name + " is not a CAR of this image (" +
                                                std::to_string(ctx.cars) + " cars)");
    }
  }
  return true;
}

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
  if (!only_fields(doc, root, {"schema", "scope", "collective", "images", "messages"}, "the document") ||
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

// nlohmann's copy, comparison and dump recurse once per nesting level, and a
// hostile "[[[[..." costs memory per level before any schema check could see
// it; so depth is bounded on the raw text first. Brackets inside strings do
// not nest.
bool check_nesting(const std::string& text, std::string* error) {
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
      if (++depth > kMaxNesting) {
        return fail(error, "document: nests deeper than " + std::to_string(kMaxNesting) + " levels");
      }
    } else if ((ch == ']' || ch == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
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
  if (text.size() > kMaxDocumentBytes) {
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

// ---- files ----------------------------------------------------------------

std::string errno_text() { return std::strerror(errno); }

// Reads at most `limit` bytes: checked up front where the size is known, and
// while reading for files whose size is not (pipes, /dev/zero).
bool read_bounded(const std::string& path, uint64_t limit, std::string* text, std::string* error) {
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

// ---- Graphviz -------------------------------------------------------------

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
    if (bytes <= kMaxDocumentBytes) return true;
    return fail(why, "images: the DAG's JSON passes the loader's limit of " + std::to_string(kMaxDocumentBytes >> 20) +
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
  // replace: an algorithm name of invalid UTF-8 must not make dump() throw.
  return doc.dump(1, ' ', false, OrderedJson::error_handler_t::replace) + "\n";
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

bool save_dag_file(const GlobalDag& dag, const std::string& path, std::string* error) {
  std::string problem;
  if (!validate_global(dag, &problem)) return fail(error, path + ": not saved, the DAG is invalid: " + problem);
  // The loader's rule, so that every saved file loads again.
  problem = algorithm_problem(dag.spec);
  if (!problem.empty()) return fail(error, path + ": not saved, collective.algorithm: " + problem);
  const std::string text = dag_to_json(dag);
  if (text.size() > kMaxDocumentBytes) {  // the loader would refuse it
    return fail(error, path + ": not saved, its JSON is " + std::to_string(text.size()) +
                           " bytes, above the loader's limit of " + std::to_string(kMaxDocumentBytes >> 20) + " MiB");
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

bool load_dag_file(const std::string& path, GlobalDag* out, std::string* error) {
  std::string text;
  try {
    if (!read_bounded(path, kMaxDocumentBytes, &text, error)) return false;
  } catch (const std::exception& e) {
    return fail(error, path + ": cannot be read (" + printable(e.what()) + ")");
  }
  std::string problem;
  if (!dag_from_json(text, out, &problem)) return fail(error, path + ": " + problem);
  return true;
}

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
