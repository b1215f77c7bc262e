// Gather: image i's block goes to block i of the root's destination
// (BlockLayout). GASNet collectives notes v1.7, "Notes on algorithms: Gather": exactly scatter
// with the data moving the other way, so both algorithms mirror scatter.cc.
//
// flat      every image sends its block straight from its source into the
//           root's destination; the root COPYs its own. P-1 messages.
// binomial  over virtual ranks, each image sends its parent ONE message with
//           its whole subtree's blocks in virtual-rank order. P-1 messages,
//           ceil(log2 P) of them into the root, depth ceil(log2 P).
//
// Binomial buffers: leaves send straight from user_src. Intermediate images
// COPY their own block to the front of a temp slot, receive each child's
// range behind it and send the slot up. The root receives a child's range
// straight into user_dst when its blocks lie back to back there in
// virtual-rank order (block_ranges.h); otherwise (the range that wraps from
// real rank P-1 to 0 when root != 0, or a "v" layout) into a temp slot,
// COPYing each block out, rather than splitting the edge into two messages.
#include "graph/builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

using patterns::or_none;

LocalDag flat_gather(const CollectiveSpec& spec, uint32_t image) {
  const BlockLayout L(spec);
  const bool is_root = image == spec.root;
  const uint64_t own = L.length(image);
  DagBuilder b(image, own, is_root ? L.extent() : 0);
  if (!is_root) {
    b.send(spec.root, 0, or_none(user_src(0, own)));
    return b.finish();
  }
  if (own > 0) b.copy(user_dst(L.offset(image), own), user_src(0, own));
  for (uint32_t i = 0; i < spec.images; ++i) {
    if (i != image) b.recv(i, 0, or_none(user_dst(L.offset(i), L.length(i))));
  }
  return b.finish();
}

// The root's receive from the child owning virtual ranks [first, end).
void recv_range_at_root(DagBuilder& b, const CollectiveSpec& spec, const BlockLayout& L,
                        uint32_t first, uint32_t end) {
  const uint32_t P = spec.images, root = spec.root;
  const uint32_t from = patterns::real_rank(first, root, P);
  const patterns::BlockRun run = patterns::block_run(L, first, end, root, P);
  if (run.contiguous) {
    b.recv(from, 0, or_none(user_dst(run.offset, run.bytes)));
    return;
  }
  const uint32_t slot = b.temp_slot(run.bytes);
  const CarId got = b.recv(from, 0, temp(slot, 0, run.bytes));
  uint64_t at = 0;
  for (uint32_t v = first; v < end; ++v) {
    const uint32_t r = patterns::real_rank(v, root, P);
    if (L.length(r) == 0) continue;
    b.copy(user_dst(L.offset(r), L.length(r)), temp(slot, at, L.length(r)), {after_buffer(got)});
    at += L.length(r);
  }
}

LocalDag binomial_gather(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images, root = spec.root;
  const BlockLayout L(spec);
  const uint32_t vr = patterns::virtual_rank(image, root, P);
  const patterns::BinomialNode node = patterns::binomial_node(vr, P);
  const uint64_t own = L.length(image);
  DagBuilder b(image, own, image == root ? L.extent() : 0);
  if (image == root) {
    if (own > 0) b.copy(user_dst(L.offset(image), own), user_src(0, own));
    for (uint32_t child : node.children) {
      recv_range_at_root(b, spec, L, child, patterns::binomial_subtree_end(child, P));
    }
    return b.finish();
  }
  const uint32_t parent = patterns::real_rank(node.parent, root, P);
  if (node.children.empty()) {
    b.send(parent, 0, or_none(user_src(0, own)));
    return b.finish();
  }
  // The range goes up packed in virtual-rank order; own block first.
  const uint64_t total = patterns::range_bytes(L, vr, patterns::binomial_subtree_end(vr, P), root, P);
  const uint32_t slot = total > 0 ? b.temp_slot(total) : 0;
  auto range = [&](uint64_t offset, uint64_t length) {
    return length == 0 ? no_buffer() : temp(slot, offset, length);
  };
  DagBuilder::Deps filled;
  if (own > 0) filled.push_back(after_buffer(b.copy(temp(slot, 0, own), user_src(0, own))));
  for (uint32_t child : node.children) {
    const uint64_t offset = patterns::range_bytes(L, vr, child, root, P);
    const uint64_t length = patterns::range_bytes(L, child, patterns::binomial_subtree_end(child, P), root, P);
    filled.push_back(after_buffer(b.recv(patterns::real_rank(child, root, P), 0, range(offset, length))));
  }
  b.send(parent, 0, range(0, total), filled);
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(flat_gather,
                           {CollKind::Gather, "flat", &flat_gather, true, false,
                            "each image sends its block straight to the root; P-1 messages"});
CARFLOW_REGISTER_GENERATOR(binomial_gather,
                           {CollKind::Gather, "binomial", &binomial_gather, true, false,
                            "binomial tree, one message per edge carrying the subtree's blocks"});

}  // namespace carflow
