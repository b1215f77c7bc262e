// Reduce-scatter: user_src holds P blocks (BlockLayout: nbytes each, or
// spec.counts packed in rank order); image j's destination gets block j of
// the element-wise reduction over all images, x_0 op ... op x_{P-1}.
// n below = the bytes of all blocks (the source's extent).
//
// ring: P-1 steps around r -> r+1; in step k image r forwards its partial of
// block (r-k-1) and receives-and-combines block (r-k-2), which it has
// pre-loaded with its own contribution, so after P-1 steps it holds block r.
// P(P-1) messages, n - |block r| bytes sent per image: bandwidth-optimal.
// Block c accumulates from image c+1 around to c, a rotation of rank order:
// commutative operators only.
//
// direct: image r sends block j of its source to image j; image j RECVs
// the P-1 contributions into a temp and combines them strictly in rank order
// with a chain of P-1 REDUCEs that runs as the blocks arrive. P(P-1)
// messages, one step; preserves operand order.
//
// recursive_halving: P' = floor_pow2(P) "new ranks", the remainder folded
// first as in allreduce_recursive_doubling.cc (even r < 2*rem sends its
// source to r+1; it gets its block back at the end). New rank t is
// responsible for a group of blocks: {2t, 2t+1} for t < rem, {t + rem}
// otherwise, so new-rank ranges are real-rank ranges. log2 P' rounds with
// distance-doubling partners t ^ 2^k: each partner keeps the half of its
// current groups (split on whole groups, never bytes) whose destination
// agrees with it on bit k. Partners in round k cover adjacent rank ranges,
// the lower one goes on the left: operand order is preserved. To make every
// half one contiguous message the source is first packed into a temp with
// the groups in bit-reversed order of their new rank (MPICH's
// noncommutative reduce-scatter does the same); one COPY per group.
// Messages 2*rem + P' log2 P'; each image sends about n/2 + n/4 + ... bytes.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Tags: step k. Partials of blocks in flight live in one temp, packed in
// step order (block r-k-2 of step k); the last step's lands in the destination.
LocalDag ring_reduce_scatter(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  DagBuilder b(image, L.extent(), L.length(image));
  b.reserve(3 * size_t{P});
  auto block_src = [&](uint32_t c) { return user_src(L.offset(c), L.length(c)); };
  auto block_at = [&](int64_t k) { return static_cast<uint32_t>(((int64_t{image} - k) % P + P) % P); };
  const BufferRef own = user_dst(0, L.length(image));
  if (P == 1) {
    b.copy(own, block_src(0));
    return b.finish();
  }
  uint64_t partial_bytes = 0;
  for (uint32_t k = 0; k + 2 < P; ++k) partial_bytes += L.length(block_at(k + 2));
  const uint32_t slot = P > 2 ? b.temp_slot(partial_bytes) : UINT32_MAX;
  const uint32_t right = (image + 1) % P, left = (image + P - 1) % P;
  BufferRef carried = block_src(block_at(1));  // step 0 sends my own block r-1
  CarId carried_car = kNoCar;
  uint64_t next = 0;
  for (uint32_t k = 0; k + 1 < P; ++k) {
    DagBuilder::Deps send_deps;
    if (carried_car != kNoCar) send_deps.push_back(after_buffer(carried_car));
    b.send(right, k, carried, send_deps);
    const uint32_t c = block_at(k + 2);
    const BufferRef into = k + 2 < P ? temp(slot, next, L.length(c)) : own;
    next += into.length;
    const CarId init = b.copy(into, block_src(c));
    carried_car = b.recv_reduce(left, k, into, true, {after_buffer(init)});
    carried = into;
  }
  return b.finish();
}

// Tags: 0 (each ordered pair exchanges one block).
LocalDag direct_reduce_scatter(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  const uint64_t len = L.length(image);
  DagBuilder b(image, L.extent(), len);
  b.reserve(3 * size_t{P});
  const BufferRef own = user_dst(0, len);
  const BufferRef mine = user_src(L.offset(image), len);
  if (P == 1) {
    b.copy(own, mine);
    return b.finish();
  }
  for (uint32_t step = 1; step < P; ++step) {  // r+1, r+2, ...: spread the load
    const uint32_t to = (image + step) % P;
    b.send(to, 0, user_src(L.offset(to), L.length(to)));
  }
  // Contribution of image i: my source for i == image, else its temp region.
  const uint32_t slot = b.temp_slot((P - 1) * len);
  std::vector<BufferRef> part(P);
  std::vector<CarId> arrived(P, kNoCar);
  for (uint32_t i = 0; i < P; ++i) {
    if (i == image) {
      part[i] = mine;
      continue;
    }
    part[i] = temp(slot, (i < image ? i : i - 1) * len, len);
    arrived[i] = b.recv(i, 0, part[i]);
  }
  BufferRef acc = part[0];
  CarId acc_car = arrived[0];
  for (uint32_t i = 1; i < P; ++i) {
    DagBuilder::Deps deps;
    if (acc_car != kNoCar) deps.push_back(after_buffer(acc_car));
    if (arrived[i] != kNoCar) deps.push_back(after_buffer(arrived[i]));
    acc_car = b.reduce(own, acc, part[i], deps);
    acc = own;
  }
  return b.finish();
}

// ---- recursive halving ------------------------------------------------------

// Bit-reversal of t over `bits` bits.
uint32_t reverse_bits(uint32_t t, uint32_t bits) {
  uint32_t r = 0;
  for (uint32_t i = 0; i < bits; ++i) r |= ((t >> i) & 1u) << (bits - 1 - i);
  return r;
}

// Where each new rank's group of blocks lies: in the source (contiguous,
// blocks are packed in rank order) and in the packed temp, whose position p
// holds the group of new rank reverse_bits(p).
struct HalvingPlan {
  uint32_t pof2 = 1, rem = 0, rounds = 0;
  std::vector<uint32_t> first_block;  // by new rank; group = [first, first + blocks)
  std::vector<uint32_t> blocks;
  std::vector<uint64_t> src_offset, bytes;  // by new rank
  std::vector<uint64_t> pos_offset;         // by position, P' + 1 entries

  HalvingPlan(const CollectiveSpec& spec, const BlockLayout& L) {
    const patterns::Fold fold(spec.images);
    pof2 = fold.pof2, rem = fold.rem, rounds = fold.rounds;
    for (uint32_t t = 0; t < pof2; ++t) {
      const uint32_t first = t < rem ? 2 * t : t + rem, count = t < rem ? 2 : 1;
      first_block.push_back(first);
      blocks.push_back(count);
      src_offset.push_back(L.offset(first));
      uint64_t sum = 0;
      for (uint32_t c = first; c < first + count; ++c) sum += L.length(c);
      bytes.push_back(sum);
    }
    pos_offset.assign(pof2 + 1, 0);
    for (uint32_t p = 0; p < pof2; ++p) pos_offset[p + 1] = pos_offset[p] + bytes[reverse_bits(p, rounds)];
  }
  uint32_t position(uint32_t t) const { return reverse_bits(t, rounds); }
  // Bytes of positions [first, end) in the packed temp.
  BufferRef packed(uint32_t slot, uint32_t first, uint32_t end) const {
    return temp(slot, pos_offset[first], pos_offset[end] - pos_offset[first]);
  }
};

// Packs the source into the temp, one COPY per group; returns the COPYs.
std::vector<CarId> pack_groups(DagBuilder& b, const HalvingPlan& plan, uint32_t slot) {
  std::vector<CarId> copies;
  for (uint32_t t = 0; t < plan.pof2; ++t) {
    const uint32_t p = plan.position(t);
    copies.push_back(b.copy(plan.packed(slot, p, p + 1), user_src(plan.src_offset[t], plan.bytes[t])));
  }
  return copies;
}

DagBuilder::Deps after_all(const std::vector<CarId>& cars) {
  DagBuilder::Deps deps;
  for (CarId c : cars) deps.push_back(after_buffer(c));
  return deps;
}

// Tags: 0 = fold, 1 + k = round k, 1 + rounds = unfold.
LocalDag recursive_halving_reduce_scatter(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  const uint64_t own_len = L.length(image);
  DagBuilder b(image, L.extent(), own_len);
  const BufferRef own = user_dst(0, own_len);
  if (P == 1) {
    b.copy(own, user_src(0, own_len));
    return b.finish();
  }
  const HalvingPlan plan(spec, L);
  const uint32_t slot = b.temp_slot(plan.pos_offset[plan.pof2]);
  const BufferRef all = plan.packed(slot, 0, plan.pof2);
  const std::vector<CarId> packing = pack_groups(b, plan, slot);
  const patterns::Fold fold(spec.images);
  if (fold.folded_away(image)) {
    // Folded away: my packed source goes to r+1, my block comes back.
    b.send(image + 1, 0, all, after_all(packing));
    b.recv(image + 1, 1 + plan.rounds, own);
    return b.finish();
  }
  CarId written = kNoCar;  // the last CAR that wrote my current range
  DagBuilder::Deps ready = after_all(packing);
  if (fold.paired(image)) {  // odd: the even neighbour's vector goes on the left
    written = b.recv_reduce(image - 1, 0, all, true, ready);
    ready = {after_buffer(written)};
  }
  const uint32_t t = fold.newrank(image);
  auto real = [&](uint32_t nr) { return fold.real(nr); };
  uint32_t first = 0, end = plan.pof2;  // my current range of positions
  for (uint32_t k = 0; k < plan.rounds; ++k) {
    const uint32_t partner = t ^ (1u << k);
    const uint32_t mid = first + (end - first) / 2;
    // Bit k of a new rank is bit (rounds-1-k) of its position: the lower
    // half of the range belongs to the partner whose bit k is 0.
    const bool keep_low = ((t >> k) & 1u) == 0;
    const BufferRef give = keep_low ? plan.packed(slot, mid, end) : plan.packed(slot, first, mid);
    b.send(real(partner), 1 + k, give, ready);
    if (keep_low) {
      end = mid;
    } else {
      first = mid;
    }
    written = b.recv_reduce(real(partner), 1 + k, plan.packed(slot, first, end), partner < t, ready);
    ready = {after_buffer(written)};
  }
  // My range is now the one position holding my group.
  const uint64_t base = plan.pos_offset[first];
  const uint64_t own_off = L.offset(image) - plan.src_offset[t];
  b.copy(own, temp(slot, base + own_off, own_len), ready);
  if (fold.paired(image)) {
    const uint32_t folded = image - 1;
    b.send(folded, 1 + plan.rounds, temp(slot, base + L.offset(folded) - plan.src_offset[t], L.length(folded)),
           ready);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(ring_reduce_scatter,
                           {CollKind::ReduceScatter, "ring", &ring_reduce_scatter, false, false,
                            "P-1 steps around a ring; bandwidth-optimal, commutative ops", 0,
                            &shift_symmetric});
CARFLOW_REGISTER_GENERATOR(direct_reduce_scatter,
                           {CollKind::ReduceScatter, "direct", &direct_reduce_scatter, true, false,
                            "every block straight to its owner, combined in rank order"});
CARFLOW_REGISTER_GENERATOR(recursive_halving_reduce_scatter,
                           {CollKind::ReduceScatter, "recursive_halving",
                            &recursive_halving_reduce_scatter, true, false,
                            "log2 P rounds halving the blocks, distance-doubling partners", 0,
                            &xor_symmetric});

}  // namespace carflow
