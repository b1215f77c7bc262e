// Reduce-then-broadcast allreduce: a binomial reduce to image 0, then a
// binomial broadcast of the result from image 0, both pipelined by segments
// of spec.segment_bytes (whole elements).
//
// The tree is binomial_node() over ranks rooted at 0: image r's subtree is
// the consecutive ranks [r, r + lowbit(r)), and its children r + 2^j own
// [r + 2^j, r + 2^(j+1)), all to its right. An image starts from its own
// vector and combines its children's partials as they arrive, nearest
// (smallest) subtree first, each as the RIGHT operand (RECV_REDUCE), so
// every partial is x_r op ... op x_(end-1) in rank order: operand order is
// preserved (non-commutative ops are safe) and fixed run to run.
// Each segment is its own reduce chain and broadcast, so segment s+1 climbs
// the tree while segment s is still on its way.
//
// Cost: 2(P-1) messages per segment (P-1 up, P-1 down) and 2 ceil(log2 P)
// rounds plus (segments - 1) pipeline steps. An image sends its n bytes up
// and n to each child: image 0 sends n ceil(log2 P), a leaf 1n; about 2n
// on average. Latency-bound: for small vectors or few images.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag reduce_bcast_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  DagBuilder b(image, n, n);
  const patterns::BinomialNode node = patterns::binomial_node(image, P);
  const std::vector<Segment> segments = split_segments(n, spec.segment_bytes, spec.elem_size);
  // Tags: segment s goes up under s and down under S + s.
  const uint32_t S = static_cast<uint32_t>(segments.size());
  for (uint32_t s = 0; s < S; ++s) {
    const BufferRef mine = user_dst(segments[s].offset, segments[s].length);
    const BufferRef own = user_src(segments[s].offset, segments[s].length);
    // Reduce: the segment's partial of my subtree.
    CarId partial = kNoCar;
    if (node.children.empty() && !node.has_parent) partial = b.copy(mine, own);  // P == 1
    // The first child's data combines with my own straight into dst (a
    // RECV_REDUCE with a local operand), later ones into dst.
    for (auto child = node.children.rbegin(); child != node.children.rend(); ++child) {
      partial = partial == kNoCar ? b.recv_reduce(*child, s, mine, false, {}, own)
                                  : b.recv_reduce(*child, s, mine, false, {after_buffer(partial)});
    }
    // Broadcast: the result arrives from my parent over what I sent up.
    CarId result = partial;
    if (node.has_parent) {
      const CarId up = partial == kNoCar ? b.send(node.parent, s, own)
                                         : b.send(node.parent, s, mine, {after_buffer(partial)});
      result = b.recv(node.parent, S + s, mine, {after_buffer(up)});
    }
    for (uint32_t child : node.children) b.send(child, S + s, mine, {after_buffer(result)});
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(reduce_bcast_allreduce,
                           {CollKind::Allreduce, "reduce_bcast", &reduce_bcast_allreduce, true, true,
                            "binomial reduce to image 0 + binomial broadcast, pipelined by segments"});

}  // namespace carflow
