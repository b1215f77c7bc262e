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

LocalDag logp_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const bool defaults = spec.logp_L == 0 && spec.logp_o == 0 && spec.logp_g == 0;
  const LogpTree tree = build_logp_tree(spec.images, defaults ? kDefaultL : spec.logp_L,
                                        defaults ? kDefaultO : spec.logp_o,
                                        defaults ? kDefaultG : spec.logp_g);
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
