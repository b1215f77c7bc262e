// The reader of a carflow.graph/1 document, trusting nothing in its input:
// GraphReader checks each field for presence, type and range as it descends
// and names the JSON path of the first one that fails; structural rules
// (buffer bounds, cycles, message matching) are left to validate_global, so
// they live in one place. Its typed field checks and the collective section
// are in json_reader.cc, images and CARs in json_read_image.cc, the document
// and its message list in json_load.cc. Not public.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/json_internal.h"
#include "graph/layout.h"

namespace carflow::json_internal {

using Json = nlohmann::json;

inline constexpr uint64_t kMaxImages = 65536;
inline constexpr uint64_t kMaxCarsPerImage = uint64_t{16} << 20;
inline constexpr uint64_t kMaxTempSlots = 4096;
inline constexpr size_t kMaxAlgorithmChars = 256;
// collective.nbytes, user buffers, temp slots: below 2^48 bytes, the bound
// check_layout (graph/layout.h) puts on every extent.
inline constexpr uint64_t kMaxBufferBytes = (uint64_t{1} << 48) - 1;

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
  bool read_run_state(const Json& doc, const Path& root, GlobalDag* dag);

  std::string* error_;
};

// The member templates: here, so that each of the reader's source files can
// instantiate them.

template <typename T>
bool GraphReader::read_uint(const Json& obj, const Path& at, const char* key, uint64_t min,
                            uint64_t max, T* out) {
  const Json* value = field(obj, at, key);
  uint64_t x = 0;
  if (value == nullptr || !uint_value(*value, at.field(key), min, max, &x)) return false;
  *out = static_cast<T>(x);
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

}  // namespace carflow::json_internal
