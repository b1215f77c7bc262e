// Binomial-tree broadcast, pipelined by segments: an image forwards segment s
// to its children as soon as s has arrived, largest subtree first.
// Exactly P-1 messages per segment; depth floor(log2 P) (at most ceil(log2 P)).
#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag binomial_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const bool is_root = image == spec.root;
  const uint32_t vr = patterns::virtual_rank(image, spec.root, P);
  const patterns::BinomialNode node = patterns::binomial_node(vr, P);
  DagBuilder b(image, is_root ? spec.nbytes : 0, spec.nbytes);
  const auto segments = split_segments(spec.nbytes, spec.segment_bytes, 1);
  if (is_root) b.copy(user_dst(0, spec.nbytes), user_src(0, spec.nbytes));
  for (uint32_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    // The root forwards from its source, so its own COPY runs alongside.
    BufferRef data = is_root ? user_src(seg.offset, seg.length) : user_dst(seg.offset, seg.length);
    DagBuilder::Deps deps;
    if (node.has_parent) {
      CarId got = b.recv(patterns::real_rank(node.parent, spec.root, P), s, data);
      deps.push_back(after_buffer(got));
    }
    for (uint32_t child : node.children) {
      b.send(patterns::real_rank(child, spec.root, P), s, data, deps);
    }
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(binomial_broadcast,
                           {CollKind::Broadcast, "binomial", &binomial_broadcast, true, true,
                            "binomial tree, segments pipelined down the tree"});

}  // namespace carflow
