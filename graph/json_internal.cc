// The text checks and the algorithm rule declared in graph/json_internal.h.
#include "graph/json_internal.h"

#include "graph/json.h"
#include "graph/registry.h"

namespace carflow::json_internal {

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

}  // namespace carflow::json_internal
