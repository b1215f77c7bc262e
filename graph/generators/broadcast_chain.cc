// Pipelined chain broadcast root -> root+1 -> ... -> root-1 (virtual ranks):
// each image forwards segment s as soon as it has arrived, so with S segments
// the last image finishes after P-1+S-1 segment steps. P-1 messages per
// segment; depth P-1. For large messages with many segments.
#include "graph/generators/broadcast_tree.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag chain_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t vr = patterns::virtual_rank(image, spec.root, spec.images);
  return tree_broadcast(spec, image, patterns::chain_node(vr, spec.images), spec.segment_bytes);
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(chain_broadcast,
                           {CollKind::Broadcast, "chain", &chain_broadcast, true, true,
                            "pipelined chain root -> root+1 -> ...; large segmented messages"});

}  // namespace carflow
