// The recursive-halving reduce-scatter of Rabenseifner's algorithm, shared by
// allreduce_rabenseifner.cc (then an allgather by recursive doubling) and
// reduce_vec.cc (then a binomial gather to the root).
//
// Terms: P' = a power of two, L = log2 P' rounds; newrank in [0, P') is an
// image's rank in that core (the caller folds any extra images first);
// `blocks` are the P' blocks of whole elements the vector is cut into
// (split_blocks; empty when elements < P'); a range is [lo, hi) of block
// indices. Round k = 0..L-1: partner = newrank ^ 2^k (distance doubling)
// holds the same range; the image with bit k clear keeps the lower half
// (keep[k]), the other the upper, and each gives the partner the other half
// (give[k]). After round k an image's partial covers the aligned group of
// 2^(k+1) new ranks around it, so the partner's data is the left operand
// exactly when the partner is lower (operand order preserved). Image newrank
// ends holding block bitreverse(newrank); the second phase undoes the
// halving from keep and give.
//
// Cost: L rounds; each image sends L messages carrying n (P'-1)/P' bytes
// (n/2 + n/4 + ...) and combines as many bytes; P' L messages in all.
#pragma once

#include <cstdint>
#include <vector>

#include "graph/builder.h"

namespace carflow {

// The byte ranges this image keeps and gives away in each halving round.
struct Halves {
  std::vector<Segment> keep, give;
};

inline Halves halves(const std::vector<Segment>& blocks, uint32_t newrank, uint32_t rounds) {
  auto span = [&](uint32_t lo, uint32_t hi) {
    return Segment{blocks[lo].offset, blocks[hi - 1].offset + blocks[hi - 1].length - blocks[lo].offset};
  };
  Halves h;
  uint32_t lo = 0, hi = static_cast<uint32_t>(blocks.size());
  for (uint32_t k = 0; k < rounds; ++k) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if ((newrank & (1u << k)) == 0) {
      h.keep.push_back(span(lo, mid));
      h.give.push_back(span(mid, hi));
      hi = mid;
    } else {
      h.keep.push_back(span(mid, hi));
      h.give.push_back(span(lo, mid));
      lo = mid;
    }
  }
  return h;
}

// Reduce-scatter by recursive halving into `work` (Segment -> BufferRef of
// the partial's buffer: the destination, or a temp). Round k uses tag 1 + k
// (tag 0 is the caller's fold). real(newrank) is the team rank. *writer: the
// last CAR that wrote the range held (updated); round 0 sends from the
// source unless the fold already put the data in the work buffer, and with
// *writer == kNoCar (nothing copied into the work buffer yet) it combines
// the incoming half with the source's kept half straight into the work
// buffer (RECV_REDUCE with a local operand: no copy first). Returns
// the rounds' SENDs, which the second phase must follow before it
// overwrites the bytes they read.
template <typename Work, typename Real>
std::vector<CarId> halving_rounds(DagBuilder& b, const Halves& h, uint32_t newrank, bool first_from_src,
                                  const Work& work, const Real& real, CarId* writer) {
  std::vector<CarId> sends;
  for (uint32_t k = 0; k < h.keep.size(); ++k) {
    const uint32_t partner_new = newrank ^ (1u << k);
    const uint32_t partner = real(partner_new);
    const Segment& give = h.give[k];
    sends.push_back(k == 0 && first_from_src
                        ? b.send(partner, 1 + k, user_src(give.offset, give.length))
                        : b.send(partner, 1 + k, work(give), {after_buffer(*writer)}));
    const Segment& keep = h.keep[k];
    if (*writer == kNoCar) {
      *writer = b.recv_reduce(partner, 1 + k, work(keep), partner_new < newrank, {},
                              user_src(keep.offset, keep.length));
    } else {
      *writer = b.recv_reduce(partner, 1 + k, work(keep), partner_new < newrank, {after_buffer(*writer)});
    }
  }
  return sends;
}

}  // namespace carflow
