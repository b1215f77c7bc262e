// Ranges of blocks over a binomial subtree, shared by binomial scatter and
// gather (graph/generators/scatter.cc, gather.cc).
//
// Terms: P, root, vr as in patterns.h. A subtree of the binomial tree is a
// range of virtual ranks [first, end); its blocks, taken in virtual-rank order
// (real rank (vr + root) mod P), travel as ONE message along each tree edge,
// packed back to back ("range order"). L is the BlockLayout of the root's
// all-blocks buffer (scatter: its source, gather: its destination).
#pragma once

#include <cstdint>

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

}  // namespace carflow::patterns
