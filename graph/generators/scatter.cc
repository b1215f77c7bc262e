// Scatter: block i of the root's source (BlockLayout) goes to image i.
//
// flat      the root sends every block straight from its source to its
//           image and COPYs its own: P-1 messages, one step, all from the root.
// binomial  the LogGP-style tree of GASNet collectives notes v1.7 ("Notes on algorithms: Scatter",
//           forwarding data along a tree): over virtual ranks, each child gets
//           ONE message holding its whole subtree's blocks in virtual-rank
//           order, and forwards sub-ranges from there. P-1 messages,
//           ceil(log2 P) of them from the root, depth ceil(log2 P).
//
// Binomial buffers: the root sends a child's range straight from its source
// when the range's blocks lie back to back there in virtual-rank order
// (block_ranges.h). A packed layout with root != 0 has one range that wraps
// from real rank P-1 to 0; rather than split it into two messages (which
// would break "one message per tree edge" and cost a second latency), the
// root packs that range, and any range a "v" layout scatters, into a temp
// slot with one COPY per block. Intermediate images receive their range into
// a temp slot, COPY their own block (the first) to user_dst and forward the
// rest from the temp; leaves receive straight into user_dst.
#include "graph/builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

using patterns::or_none;

LocalDag flat_scatter(const CollectiveSpec& spec, uint32_t image) {
  const BlockLayout L(spec);
  const bool is_root = image == spec.root;
  const uint64_t own = L.length(image);
  DagBuilder b(image, is_root ? L.extent() : 0, own);
  if (!is_root) {
    b.recv(spec.root, 0, or_none(user_dst(0, own)));
    return b.finish();
  }
  // Sends first: the root's own copy then runs while they are under way.
  for (uint32_t i = 0; i < spec.images; ++i) {
    if (i != image) b.send(i, 0, or_none(user_src(L.offset(i), L.length(i))));
  }
  if (own > 0) b.copy(user_dst(0, own), user_src(L.offset(image), own));
  return b.finish();
}

// The root's message to the child owning virtual ranks [first, end).
void send_range_from_root(DagBuilder& b, const CollectiveSpec& spec, const BlockLayout& L,
                          uint32_t first, uint32_t end) {
  const uint32_t P = spec.images, root = spec.root;
  const uint32_t to = patterns::real_rank(first, root, P);
  const patterns::BlockRun run = patterns::block_run(L, first, end, root, P);
  if (run.contiguous) {
    b.send(to, 0, or_none(user_src(run.offset, run.bytes)));
    return;
  }
  const uint32_t slot = b.temp_slot(run.bytes);
  DagBuilder::Deps packed;
  uint64_t at = 0;
  for (uint32_t v = first; v < end; ++v) {
    const uint32_t r = patterns::real_rank(v, root, P);
    if (L.length(r) == 0) continue;
    packed.push_back(after_buffer(b.copy(temp(slot, at, L.length(r)), user_src(L.offset(r), L.length(r)))));
    at += L.length(r);
  }
  b.send(to, 0, temp(slot, 0, run.bytes), packed);
}

LocalDag binomial_scatter(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images, root = spec.root;
  const BlockLayout L(spec);
  const uint32_t vr = patterns::virtual_rank(image, root, P);
  const patterns::BinomialNode node = patterns::binomial_node(vr, P);
  const uint64_t own = L.length(image);
  DagBuilder b(image, image == root ? L.extent() : 0, own);
  if (image == root) {
    if (own > 0) b.copy(user_dst(0, own), user_src(L.offset(image), own));
    for (uint32_t child : node.children) {
      send_range_from_root(b, spec, L, child, patterns::binomial_subtree_end(child, P));
    }
    return b.finish();
  }
  const uint32_t parent = patterns::real_rank(node.parent, root, P);
  if (node.children.empty()) {
    b.recv(parent, 0, or_none(user_dst(0, own)));
    return b.finish();
  }
  // The range arrives packed in virtual-rank order; own block first.
  const uint64_t total = patterns::range_bytes(L, vr, patterns::binomial_subtree_end(vr, P), root, P);
  const uint32_t slot = total > 0 ? b.temp_slot(total) : 0;
  auto range = [&](uint64_t offset, uint64_t length) {
    return length == 0 ? no_buffer() : temp(slot, offset, length);
  };
  const CarId got = b.recv(parent, 0, range(0, total));
  if (own > 0) b.copy(user_dst(0, own), temp(slot, 0, own), {after_buffer(got)});
  for (uint32_t child : node.children) {
    const uint64_t offset = patterns::range_bytes(L, vr, child, root, P);
    const uint64_t length = patterns::range_bytes(L, child, patterns::binomial_subtree_end(child, P), root, P);
    b.send(patterns::real_rank(child, root, P), 0, range(offset, length), {after_buffer(got)});
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(flat_scatter,
                           {CollKind::Scatter, "flat", &flat_scatter, true, false,
                            "root sends each block straight to its image; P-1 messages"});
CARFLOW_REGISTER_GENERATOR(binomial_scatter,
                           {CollKind::Scatter, "binomial", &binomial_scatter, true, false,
                            "binomial tree, one message per edge carrying the subtree's blocks"});

}  // namespace carflow
