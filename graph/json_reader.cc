// GraphReader's typed field checks, which every section uses, and the
// collective section of the document.
#include "graph/json_reader.h"

#include <climits>
#include <cstdio>
#include <utility>

namespace carflow::json_internal {

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

}  // namespace carflow::json_internal
