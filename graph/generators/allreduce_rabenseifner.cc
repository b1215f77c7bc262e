// Rabenseifner allreduce: reduce-scatter by recursive halving of the vector,
// then allgather by recursive doubling; for large vectors.
//
// P not a power of two (P = P' + rem, P' = floor_pow2(P)): images r < 2*rem
// fold in pairs first (even r sends its vector to r+1, which combines it on
// the left) and get the result back at the end, as in recursive doubling;
// the core runs on P' "new ranks" (L = log2 P' rounds each way).
//
// Terms: the vector is cut into P' blocks of whole elements (split_blocks;
// empty when elements < P'); a range is [lo, hi) of block indices.
// Reduce-scatter round k = 0..L-1: partner = newrank ^ 2^k (distance
// doubling) holds the same range; the image with bit k clear keeps the lower
// half, the other the upper; each sends the half it gives away and combines
// the partner's copy of the half it keeps into dst as it arrives
// (RECV_REDUCE). After round k an image's partial covers the aligned group
// of 2^(k+1) consecutive new ranks around it, and new ranks map to
// increasing runs of real ranks, so the partner's data is the left operand
// exactly when the partner is lower: operand order is preserved
// (non-commutative ops are safe) and fixed run to run. Image newrank ends
// with block bitreverse(newrank). Allgather rounds k = L-1..0 undo the
// halving: send the range held, receive the partner's half into dst.
//
// Cost: 2L rounds (+2 fold rounds when P is not a power of two); a core
// image sends 2L messages carrying 2 n (P'-1)/P' bytes; P' * 2L + 2 rem
// messages in all.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/halving.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Tags: 0 = fold, 1 + k = reduce-scatter round k, 1 + L + k = allgather
// round k, 1 + 2L = unfold.
constexpr uint32_t kFoldTag = 0;

BufferRef dst_at(const Segment& s) { return user_dst(s.offset, s.length); }
BufferRef src_at(const Segment& s) { return user_src(s.offset, s.length); }

LocalDag rabenseifner_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  DagBuilder b(image, n, n);
  const patterns::Fold fold(P);
  const uint32_t pof2 = fold.pof2, rounds = fold.rounds;
  const uint32_t unfold_tag = 1 + 2 * rounds;

  if (fold.folded_away(image)) {
    // Folded away: hand my vector to r+1, then receive the result.
    b.send(image + 1, kFoldTag, user_src(0, n));
    b.recv(image + 1, unfold_tag, user_dst(0, n));
    return b.finish();
  }
  const bool folded = fold.paired(image);
  const uint32_t newrank = fold.newrank(image);
  auto real = [&](uint32_t nr) { return fold.real(nr); };

  const Halves h = halves(split_blocks(n, pof2, spec.elem_size), newrank, rounds);

  // `writer`: the last CAR that wrote the range this image holds in dst.
  CarId writer = kNoCar;
  if (folded) {
    writer = b.recv_reduce(image - 1, kFoldTag, user_dst(0, n), true, {}, user_src(0, n));
  } else if (rounds == 0) {
    writer = b.copy(dst_at({0, n}), src_at({0, n}));
  }
  // Otherwise round 0 sends the given half straight from the source and
  // combines the kept half of the source with the partner's into dst.

  const std::vector<CarId> rs_send = halving_rounds(b, h, newrank, !folded, dst_at, real, &writer);

  // Allgather by recursive doubling: every CAR that wrote the held range
  // precedes the send of it.
  CarDeps held_writers{after_buffer(writer)};
  for (uint32_t k = rounds; k-- > 0;) {
    const uint32_t partner = real(newrank ^ (1u << k));
    const uint32_t tag = 1 + rounds + k;
    b.send(partner, tag, dst_at(h.keep[k]), held_writers);
    DagBuilder::Deps recv_deps;
    if (k > 0 || folded) recv_deps.push_back(after_buffer(rs_send[k]));  // it read these bytes of dst
    held_writers.push_back(after_buffer(b.recv(partner, tag, dst_at(h.give[k]), recv_deps)));
  }
  if (folded) b.send(image - 1, unfold_tag, user_dst(0, n), held_writers);
  return b.finish();
}

// Partners XOR new ranks, so images agree up to that relabelling when
// there is no fold (P a power of two) and the halves split evenly.
RankSymmetry rabenseifner_symmetry(const CollectiveSpec& spec) {
  const uint64_t elems = spec.nbytes / (spec.elem_size == 0 ? 1 : spec.elem_size);
  return elems % spec.images == 0 ? xor_symmetric(spec) : RankSymmetry::None;
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(rabenseifner_allreduce,
                           {CollKind::Allreduce, "rabenseifner", &rabenseifner_allreduce, true, false,
                            "recursive-halving reduce-scatter + recursive-doubling allgather; "
                            "large vectors", 0, &rabenseifner_symmetry});

}  // namespace carflow
