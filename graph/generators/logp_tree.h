// The LogP-optimal broadcast tree of Karp, Sahay, Santos and Schauser,
// "Optimal broadcast and summation in the LogP model" (SPAA 1993); GASNet collectives notes v1.7,
// "Notes on algorithms": the tree depends only on the parameters, so every
// image computes the same one independently, with a heap.
//
// Model: a send started at time t keeps the sender busy for o; the receiver
// has the data at t + o + L + o; a node starts consecutive sends
// max(g, o) apart, and may start sending as soon as it has the data.
// Greedy construction: every informed node sends as early as it can, to the
// next uninformed node in virtual-rank order; in O(P log P). This gives the
// P-1 earliest receive times possible, hence the least completion time.
#pragma once

#include <cstdint>
#include <vector>

namespace carflow {

inline constexpr uint32_t kLogpNoParent = UINT32_MAX;

struct LogpTree {
  std::vector<uint32_t> parent;                 // virtual ranks; root: kLogpNoParent
  std::vector<std::vector<uint32_t>> children;  // in send order
  std::vector<uint64_t> informed_at;            // when each node has the data
  uint64_t completion_time = 0;                 // latest informed_at
};

// Over virtual ranks 0..P-1 (root 0), P >= 1; L, o, g in any one time unit.
LogpTree build_logp_tree(uint32_t P, uint64_t L, uint64_t o, uint64_t g);

}  // namespace carflow
