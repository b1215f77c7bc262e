// Scatter + ring allgather broadcast (van de Geijn), for large messages: the
// root cuts nbytes into P pieces (split_blocks; piece i belongs to vr i),
// scatters them down the binomial tree, then the pieces circulate around the
// ring vr -> vr+1. Every piece is a contiguous range of the destination, so
// data lands straight in user_dst; no temps.
//
// Scatter: vr receives its subtree's pieces [vr, vr + size(vr)) from its
// parent in one message (tag 0) and forwards each child's subtree range in
// one message, largest subtree first.
// Ring: in step k vr sends piece vr-k to vr+1 (tag 1 + k: each pair's tags
// rise with the steps, in the order the model's message matcher wants
// them), which it got from vr-1 in step k-1 or already holds from the
// scatter. A piece the
// receiver already holds from the scatter is not sent again: the root holds
// all, so nothing goes to the root, and vr skips its right neighbour's
// subtree range.
// Empty pieces (nbytes < P) are never sent. With m = min(nbytes, P) nonempty
// pieces (0..m-1): messages = (m - 1) scatter + sum over vr = 1..P-1 of the
// nonempty pieces outside [vr, vr + size(vr)); 0 when nbytes = 0. For
// nbytes >= P that is P^2 - 1 - sum_{vr>0} size(vr).
#include <algorithm>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Pieces in vr's binomial subtree: [vr, vr + subtree_size(vr)).
uint32_t subtree_size(uint32_t vr, uint32_t P) {
  if (vr == 0) return P;
  return std::min(vr & (~vr + 1), P - vr);
}

struct PieceRanges {
  std::vector<Segment> pieces;
  // Bytes of pieces [first, first + count) of the destination.
  Segment range(uint32_t first, uint32_t count) const {
    const Segment& last = pieces[first + count - 1];
    return {pieces[first].offset, last.offset + last.length - pieces[first].offset};
  }
};

LocalDag scatter_allgather_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  const bool is_root = image == spec.root;
  const uint32_t vr = patterns::virtual_rank(image, spec.root, P);
  auto real = [&](uint32_t v) { return patterns::real_rank(v, spec.root, P); };
  const PieceRanges ranges{split_blocks(n, P, 1)};
  DagBuilder b(image, is_root ? n : 0, n);
  b.reserve(2 * size_t{P} + 2 * patterns::ceil_log2(P) + 3);
  // The root sends from its source, so its COPY runs alongside everything.
  auto data = [&](Segment s) {
    return is_root ? user_src(s.offset, s.length) : user_dst(s.offset, s.length);
  };
  if (is_root) b.copy(user_dst(0, n), user_src(0, n));

  // Scatter down the binomial tree.
  const patterns::BinomialNode node = patterns::binomial_node(vr, P);
  DagBuilder::Deps have_subtree;
  if (node.has_parent) {
    const Segment mine = ranges.range(vr, subtree_size(vr, P));
    if (mine.length > 0) {
      const CarId got = b.recv(real(node.parent), 0, user_dst(mine.offset, mine.length));
      have_subtree.push_back(after_buffer(got));
    }
  }
  for (uint32_t child : node.children) {
    const Segment theirs = ranges.range(child, subtree_size(child, P));
    if (theirs.length > 0) b.send(real(child), 0, data(theirs), have_subtree);
  }
  if (P == 1) return b.finish();

  // Ring allgather of the pieces nobody holds yet.
  const uint32_t right = (vr + 1) % P, left = (vr + P - 1) % P;
  const uint32_t mine_end = vr + subtree_size(vr, P), right_end = right + subtree_size(right, P);
  auto held = [](uint32_t piece, uint32_t first, uint32_t end) {
    return piece >= first && piece < end;
  };
  std::vector<CarId> got(P, kNoCar);
  for (uint32_t k = 0; k + 1 < P; ++k) {
    const uint32_t out = (vr + P - k) % P;  // piece sent this step
    const Segment& po = ranges.pieces[out];
    if (po.length > 0 && !held(out, right, right_end)) {
      DagBuilder::Deps deps = held(out, vr, mine_end) ? have_subtree
                                                      : DagBuilder::Deps{after_buffer(got[out])};
      b.send(real(right), 1 + k, data(po), deps);
    }
    const uint32_t in = (vr + P - k - 1) % P;  // piece received this step
    const Segment& pi = ranges.pieces[in];
    if (pi.length > 0 && !held(in, vr, mine_end)) {
      got[in] = b.recv(real(left), 1 + k, user_dst(pi.offset, pi.length));
    }
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(scatter_allgather_broadcast,
                           {CollKind::Broadcast, "scatter_allgather", &scatter_allgather_broadcast,
                            true, false,
                            "van de Geijn: binomial scatter of P pieces + ring allgather; large"});

}  // namespace carflow
