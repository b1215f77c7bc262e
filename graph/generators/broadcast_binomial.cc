// Binomial-tree broadcast, pipelined by segments: an image forwards segment s
// to its children as soon as s has arrived, largest subtree first (the
// k-nomial tree with k = 2). Exactly P-1 messages per segment; depth
// floor(log2 P) (at most ceil(log2 P)).
#include "graph/generators/broadcast_tree.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag binomial_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t vr = patterns::virtual_rank(image, spec.root, spec.images);
  return tree_broadcast(spec, image, patterns::knomial_node(vr, spec.images, 2), spec.segment_bytes);
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(binomial_broadcast,
                           {CollKind::Broadcast, "binomial", &binomial_broadcast, true, true,
                            "binomial tree, segments pipelined down the tree"});

}  // namespace carflow
