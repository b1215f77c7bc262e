// Ranges of blocks over a binomial subtree, shared by binomial scatter and
// gather (graph/generators/scatter.cc, gather.cc), and the rank-order block
// store of gather_all's recursive doubling (gather_all.cc, hierarchical.cc).
//
// Terms: P, root, vr as in patterns.h. A subtree of the binomial tree is a
// range of virtual ranks [first, end); its blocks, taken in virtual-rank order
// (real rank (vr + root) mod P), travel as ONE message along each tree edge,
// packed back to back ("range order"). L is the BlockLayout of the root's
// all-blocks buffer (scatter: its source, gather: its destination).
#pragma once

#include <cstdint>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"

namespace carflow::patterns {

// vr's binomial subtree is [vr, binomial_subtree_end(vr, P)): vr and the
// lowbit(vr) - 1 ranks after it (all P for the root), clipped to P. A child
// vr + 2^j of binomial_node() owns [vr + 2^j, vr + 2^(j+1)).
inline uint32_t binomial_subtree_end(uint32_t vr, uint32_t P) {
  if (vr == 0) return P;
  const uint64_t end = uint64_t{vr} + (vr & (~vr + 1u));
  return end < P ? static_cast<uint32_t>(end) : P;
}

// Bytes of the blocks of virtual ranks [first, end).
inline uint64_t range_bytes(const BlockLayout& L, uint32_t first, uint32_t end, uint32_t root,
                            uint32_t P) {
  uint64_t bytes = 0;
  for (uint32_t v = first; v < end; ++v) bytes += L.length(real_rank(v, root, P));
  return bytes;
}

// Where the blocks of [first, end) lie in the all-blocks buffer. They are
// `contiguous` when their non-empty blocks sit back to back in range order,
// so one message can use the user buffer directly (from `offset`). A packed
// layout with root != 0 breaks at most one range, the one that wraps from
// real rank P-1 to 0; reversed or gapped displs break many.
struct BlockRun {
  uint64_t bytes = 0;
  uint64_t offset = 0;
  bool contiguous = true;
};

inline BlockRun block_run(const BlockLayout& L, uint32_t first, uint32_t end, uint32_t root,
                          uint32_t P) {
  BlockRun run;
  for (uint32_t v = first; v < end; ++v) {
    const uint32_t r = real_rank(v, root, P);
    if (L.length(r) == 0) continue;  // an empty block sits anywhere
    if (run.bytes == 0) {
      run.offset = L.offset(r);
    } else if (L.offset(r) != run.offset + run.bytes) {
      run.contiguous = false;
    }
    run.bytes += L.length(r);
  }
  if (run.bytes == 0) run.offset = 0;
  return run;
}

// A zero-byte message carries no buffer (graph/car.h); `ref` otherwise.
inline BufferRef or_none(BufferRef ref) { return ref.length == 0 ? no_buffer() : ref; }

// Where an image keeps a team's blocks in rank order (gather_all.cc's
// recursive_doubling, hierarchical.cc's gather_all): user_dst itself when
// the layout puts the non-empty blocks back to back in rank order (every
// rank range is then one contiguous piece), otherwise a temp slot packed in
// rank order whose blocks are COPYed to user_dst after they arrive.
class RankOrderStore {
 public:
  RankOrderStore(const BlockLayout& L, uint32_t P, DagBuilder* b) : L_(L), P_(P), prefix_(P + 1, 0) {
    for (uint32_t i = 0; i < P; ++i) prefix_[i + 1] = prefix_[i] + L.length(i);
    in_dst_ = block_run(L, 0, P, 0, P).contiguous;
    if (!in_dst_) slot_ = b->temp_slot(prefix_[P]);
  }
  bool in_dst() const { return in_dst_; }
  // Blocks [first, end) as one buffer range (none when empty).
  BufferRef range(uint32_t first, uint32_t end) const {
    if (in_dst_) {
      const BlockRun run = block_run(L_, first, end, 0, P_);
      return or_none(user_dst(run.offset, run.bytes));
    }
    return or_none(temp(slot_, prefix_[first], prefix_[end] - prefix_[first]));
  }
  // Temp only (a no-op in user_dst): COPY the non-empty blocks [first, end)
  // except `skip` to user_dst once `writer` has filled them.
  void copy_out(DagBuilder* b, uint32_t first, uint32_t end, uint32_t skip, CarId writer) const {
    if (in_dst_) return;
    for (uint32_t i = first; i < end; ++i) {
      if (i == skip || L_.length(i) == 0) continue;
      b->copy(user_dst(L_.offset(i), L_.length(i)), temp(slot_, prefix_[i], L_.length(i)),
              {after_buffer(writer)});
    }
  }

 private:
  const BlockLayout& L_;
  uint32_t P_;
  std::vector<uint64_t> prefix_;
  bool in_dst_ = true;
  uint32_t slot_ = 0;
};

}  // namespace carflow::patterns
