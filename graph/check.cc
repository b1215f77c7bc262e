#include "graph/check.h"

#include <vector>

#include "graph/registry.h"
#include "graph/simulate.h"
#include "graph/validate.h"

namespace carflow {

reference::Combine check_operator(const CollectiveSpec& spec) {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  if (gen != nullptr && gen->preserves_order && spec.elem_size == 16) return &reference::sequence_hash;
  return &reference::byte_sum;
}

bool check_generator(const CollectiveSpec& spec, int orders, GlobalDag* dag, std::string* failure,
                     uint64_t* messages, reference::Combine op) {
  std::string error;
  if (!generate_global(spec, dag, &error)) return *failure = "generate: " + error, false;
  if (!validate_global(*dag, &error)) return *failure = "validate: " + error, false;
  for (const LocalDag& image : dag->images) {
    if (!check_hazards(image, &error)) return *failure = "hazard: " + error, false;
  }
  // A declared rank symmetry is what the cost model relies on.
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  const RankSymmetry symmetry = gen != nullptr ? rank_symmetry(*gen, spec) : RankSymmetry::None;
  for (uint32_t i = 1; symmetry != RankSymmetry::None && i < dag->images.size(); ++i) {
    if (!mirrors_image0(dag->images[0], dag->images[i], symmetry, i, spec.images, &error)) {
      return *failure = std::string("symmetry (") + (symmetry == RankSymmetry::Xor ? "XOR" : "shift") +
                        " declared): " + error,
             false;
    }
  }
  const std::vector<reference::Bytes> src = reference::inputs(spec);
  const bool computes = is_computational(spec.kind);
  if (!op) op = check_operator(spec);
  const std::vector<reference::Bytes> want =
      computes ? reference::expected_reduction(spec, src, op) : reference::expected(spec, src);
  for (int seed = 0; seed < orders; ++seed) {
    std::vector<reference::Bytes> s = src, d = reference::blank_outputs(spec);
    SimResult result;
    if (!simulate(*dag, &s, &d, computes ? SimReduceFn(op) : SimReduceFn(), static_cast<uint64_t>(seed), &result,
                  &error)) {
      return *failure = "run (order " + std::to_string(seed) + "): " + error, false;
    }
    for (uint32_t i = 0; i < spec.images; ++i) {
      if (d[i] != want[i]) {
        uint64_t k = 0;
        while (k < d[i].size() && k < want[i].size() && d[i][k] == want[i][k]) ++k;
        *failure = "image " + std::to_string(i) + "'s destination differs from the reference at byte " +
                   std::to_string(k) + " (order " + std::to_string(seed) + ")";
        return false;
      }
      if (s[i] != src[i]) {
        *failure = "image " + std::to_string(i) + "'s source was written (order " + std::to_string(seed) + ")";
        return false;
      }
    }
    if (messages != nullptr) *messages = result.messages;
  }
  return true;
}

}  // namespace carflow
