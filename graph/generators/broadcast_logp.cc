// LogP-optimal broadcast (logp_tree.h): one message per tree edge, P-1 in all,
// not segmented; the tree comes from spec.logp_L / logp_o / logp_g (ns),
// all 0 meaning L = 1000, o = 300, g = 400. The optimal shape runs from the
// flat tree (L >> max(g, o)) to the binomial tree (L near max(g, o)).
// Sends are created in the tree's send order (earliest child first, whose
// subtree is the largest); they are not chained, so the engine may overlap.
#include "graph/generators/broadcast_tree.h"
#include "graph/generators/logp_tree.h"
#include "graph/registry.h"

namespace carflow {
namespace {

constexpr uint64_t kDefaultL = 1000, kDefaultO = 300, kDefaultG = 400;

// The tree of the last (P, L, o, g) this thread asked for: a team's images
// are generated one after another with the same parameters, and building
// the whole tree for each of P images cost O(P^2 log P).
const LogpTree& tree_for(uint32_t P, uint64_t L, uint64_t o, uint64_t g) {
  struct Memo {
    bool valid = false;
    uint32_t P = 0;
    uint64_t L = 0, o = 0, g = 0;
    LogpTree tree;
  };
  thread_local Memo memo;
  if (!memo.valid || memo.P != P || memo.L != L || memo.o != o || memo.g != g) {
    memo.tree = build_logp_tree(P, L, o, g);
    memo.valid = true, memo.P = P, memo.L = L, memo.o = o, memo.g = g;
  }
  return memo.tree;
}

LocalDag logp_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const bool defaults = spec.logp_L == 0 && spec.logp_o == 0 && spec.logp_g == 0;
  const LogpTree& tree = tree_for(spec.images, defaults ? kDefaultL : spec.logp_L,
                                  defaults ? kDefaultO : spec.logp_o, defaults ? kDefaultG : spec.logp_g);
  const uint32_t vr = patterns::virtual_rank(image, spec.root, spec.images);
  patterns::TreeNode node;
  node.has_parent = tree.parent[vr] != kLogpNoParent;
  node.parent = node.has_parent ? tree.parent[vr] : 0;
  node.children = tree.children[vr];
  return tree_broadcast(spec, image, node, 0);
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(logp_broadcast,
                           {CollKind::Broadcast, "logp", &logp_broadcast, true, false,
                            "LogP-optimal tree (Karp et al. 1993) from logp_L/o/g; one message",
                            kUsesLogp});

}  // namespace carflow
