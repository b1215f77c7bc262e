// One image's part of a tree broadcast pipelined by segments, for any tree
// shape (graph/generators/trees.h): the image receives segment s from its
// parent straight into its destination and forwards it to its children, in
// the node's child order, as soon as s has arrived. The root sends from its
// source while its own COPY into its destination runs alongside.
// Exactly P-1 messages per segment. Written on the checked builder of
// carflow/generator.h (graph/gen_builder.h), as a plug-in would be.
#pragma once

#include "graph/gen_builder.h"
#include "graph/car.h"
#include "graph/generators/patterns.h"
#include "graph/generators/trees.h"

namespace carflow {

inline LocalDag tree_broadcast(const CollectiveSpec& spec, uint32_t image,
                               const patterns::TreeNode& node, uint64_t segment_bytes) {
  const uint32_t P = spec.images;
  const bool is_root = image == spec.root;
  GenBuilder b(spec.algorithm, spec, image);
  const auto segments = split_segments(spec.nbytes, segment_bytes, 1);
  b.reserve(segments.size() * (1 + node.children.size()) + 2);
  if (is_root) b.copy(user_dst(0, spec.nbytes), user_src(0, spec.nbytes));
  for (const Segment& seg : segments) {
    const BufferRef data = is_root ? user_src(seg.offset, seg.length) : user_dst(seg.offset, seg.length);
    CarId got = kNoCar;  // the segment's arrival, which its forwards wait for
    if (node.has_parent) got = buffer_dep(b.recv(patterns::real_rank(node.parent, spec.root, P), data));
    for (uint32_t child : node.children) {
      b.send(patterns::real_rank(child, spec.root, P), data, &got, node.has_parent ? 1 : 0);
    }
  }
  return b.finish();
}

}  // namespace carflow
