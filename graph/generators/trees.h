// Tree shapes over virtual ranks for rooted collectives (rank arithmetic only;
// the CARs are built elsewhere). Terms as in patterns.h: P = team size,
// vr = virtual rank, the root is vr 0; children are listed in the order a
// node sends to them (largest subtree first where the shape allows).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace carflow::patterns {

struct TreeNode {
  bool has_parent = false;
  uint32_t parent = 0;             // virtual rank
  std::vector<uint32_t> children;  // virtual ranks, in send order
};

// k-nomial tree (k >= 2): vr's parent clears vr's lowest nonzero base-k digit;
// its children add d * k^j (d = 1..k-1) at every position j below that digit,
// highest position first. k = 2 is exactly binomial_node().
// Depth = the most nonzero base-k digits of any vr < P, at most ceil(log_k P).
inline TreeNode knomial_node(uint32_t vr, uint32_t P, uint32_t k) {
  TreeNode node;
  uint64_t span = 1;  // k^j
  while (span < P) {
    const uint64_t digit = (vr / span) % k;
    if (digit != 0) {
      node.has_parent = true;
      node.parent = static_cast<uint32_t>(vr - digit * span);
      break;
    }
    span *= k;
  }
  while (span > 1) {
    span /= k;
    for (uint64_t d = 1; d < k; ++d) {
      const uint64_t child = vr + d * span;
      if (child >= P) break;
      node.children.push_back(static_cast<uint32_t>(child));
    }
  }
  return node;
}

// Binary tree in heap order: children 2vr+1, 2vr+2; depth floor(log2 P).
inline TreeNode binary_node(uint32_t vr, uint32_t P) {
  TreeNode node;
  if (vr > 0) {
    node.has_parent = true;
    node.parent = (vr - 1) / 2;
  }
  for (uint64_t child : {2 * uint64_t{vr} + 1, 2 * uint64_t{vr} + 2}) {
    if (child < P) node.children.push_back(static_cast<uint32_t>(child));
  }
  return node;
}

// Chain vr-1 -> vr -> vr+1; depth P-1.
inline TreeNode chain_node(uint32_t vr, uint32_t P) {
  TreeNode node;
  if (vr > 0) {
    node.has_parent = true;
    node.parent = vr - 1;
  }
  if (uint64_t{vr} + 1 < P) node.children.push_back(vr + 1);
  return node;
}

}  // namespace carflow::patterns
