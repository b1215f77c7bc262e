// Rank arithmetic shared by generators, kept apart from the CARs they build.
//
// Terms: P = team size, r = team rank, root = rooted collective's root,
// vr = virtual rank (r - root) mod P, so every tree is rooted at vr 0.
#pragma once

#include <cstdint>
#include <vector>

namespace carflow::patterns {

inline uint32_t virtual_rank(uint32_t r, uint32_t root, uint32_t P) { return (r + P - root) % P; }
inline uint32_t real_rank(uint32_t vr, uint32_t root, uint32_t P) { return (vr + root) % P; }

// Smallest k with 2^k >= n (0 for n <= 1).
inline uint32_t ceil_log2(uint32_t n) {
  uint32_t k = 0;
  while ((uint64_t{1} << k) < n) ++k;
  return k;
}

// Largest power of two <= n (n >= 1).
inline uint32_t floor_pow2(uint32_t n) {
  uint32_t p = 1;
  while (uint64_t{p} * 2 <= n) p *= 2;
  return p;
}

// Recursive doubling / halving on any P (MPICH's scheme): P' = floor_pow2(P)
// "new ranks" run the core; the first 2*rem images (rem = P - P') pair up as
// (2i, 2i+1) and fold into one core member, by default the odd one (new
// rank i); every later image r is new rank r - rem.
struct Fold {
  uint32_t pof2, rem, rounds;  // P', P - P', log2 P'
  explicit Fold(uint32_t P) : pof2(floor_pow2(P)), rem(P - pof2), rounds(ceil_log2(pof2)) {}
  bool paired(uint32_t r) const { return r < 2 * rem; }
  // The even image of a pair, which hands its data over and sits out.
  bool folded_away(uint32_t r) const { return paired(r) && r % 2 == 0; }
  uint32_t newrank(uint32_t r) const { return paired(r) ? r / 2 : r - rem; }
  uint32_t real(uint32_t nr) const { return nr < rem ? 2 * nr + 1 : nr + rem; }
};

// Binomial tree over virtual ranks: vr's parent clears its lowest set bit;
// its children are vr + 2^j for 2^j below that bit, largest subtree first.
struct BinomialNode {
  bool has_parent = false;
  uint32_t parent = 0;               // virtual rank
  std::vector<uint32_t> children;    // virtual ranks, largest subtree first
};

inline BinomialNode binomial_node(uint32_t vr, uint32_t P) {
  BinomialNode node;
  uint32_t mask = 1;
  while (mask < P) {
    if (vr & mask) {
      node.has_parent = true;
      node.parent = vr - mask;
      break;
    }
    mask <<= 1;
  }
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < P) node.children.push_back(vr + mask);
  }
  return node;
}

}  // namespace carflow::patterns
