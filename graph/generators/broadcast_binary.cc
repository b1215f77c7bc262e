// Binary-tree broadcast, pipelined by segments: vr forwards each segment to
// 2vr+1 then 2vr+2. P-1 messages per segment; depth floor(log2 P). GASNet collectives notes v1.7,
// "Notes on algorithms": with the flat tree, the first shape to implement.
#include "graph/generators/broadcast_tree.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag binary_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t vr = patterns::virtual_rank(image, spec.root, spec.images);
  return tree_broadcast(spec, image, patterns::binary_node(vr, spec.images), spec.segment_bytes);
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(binary_broadcast,
                           {CollKind::Broadcast, "binary", &binary_broadcast, true, true,
                            "binary tree (children 2vr+1, 2vr+2), segments pipelined"});

}  // namespace carflow
