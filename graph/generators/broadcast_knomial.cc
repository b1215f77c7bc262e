// k-nomial-tree broadcast, pipelined by segments; k = spec.radix (0 = 4, 1 is
// taken as 2). Each node sends to up to k-1 children per level, largest
// subtree first; radix 2 is the binomial tree. P-1 messages per segment;
// depth at most ceil(log_k P).
#include <algorithm>

#include "graph/generators/broadcast_tree.h"
#include "graph/registry.h"

namespace carflow {
namespace {

constexpr uint32_t kDefaultRadix = 4;

LocalDag knomial_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t k = spec.radix == 0 ? kDefaultRadix : std::max<uint32_t>(spec.radix, 2);
  const uint32_t vr = patterns::virtual_rank(image, spec.root, spec.images);
  return tree_broadcast(spec, image, patterns::knomial_node(vr, spec.images, k),
                        spec.segment_bytes);
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(knomial_broadcast,
                           {CollKind::Broadcast, "knomial", &knomial_broadcast, true, true,
                            "k-nomial tree (k = radix, default 4), segments pipelined",
                            kUsesRadix});

}  // namespace carflow
