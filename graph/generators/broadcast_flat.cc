// Flat broadcast: the root sends every segment straight to every other image.
// P-1 messages per segment, all from the root; best for tiny P.
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag flat_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const bool is_root = image == spec.root;
  DagBuilder b(image, is_root ? spec.nbytes : 0, spec.nbytes);
  // Segments interleave the root's messages to its receivers; with one
  // receiver they only add a handshake each.
  const auto segments = split_segments(spec.nbytes, spec.images > 2 ? spec.segment_bytes : 0, 1);
  if (is_root) {
    // Sends first: the root's own copy then runs while they are under way.
    for (uint32_t s = 0; s < segments.size(); ++s) {
      for (uint32_t peer = 0; peer < spec.images; ++peer) {
        if (peer != image) b.send(peer, s, user_src(segments[s].offset, segments[s].length));
      }
    }
    b.copy(user_dst(0, spec.nbytes), user_src(0, spec.nbytes));
  } else {
    for (uint32_t s = 0; s < segments.size(); ++s) {
      b.recv(spec.root, s, user_dst(segments[s].offset, segments[s].length));
    }
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(flat_broadcast,
                           {CollKind::Broadcast, "flat", &flat_broadcast, true, true,
                            "root sends to every image; P-1 messages per segment"});

}  // namespace carflow
