// Exchange (alltoall): block j of image i's source goes to block i of image
// j's destination (graph/layout.h, ExchangeLayout). Three schedules:
//   pairwise  GASNet collectives notes v1.7, "Notes on algorithms", Exchange: P naive scatters
//             in lock-step, image p sending to (p+1) mod P, (p+2) mod P, ...
//             so each image receives once per step. All messages may be in
//             flight at once. P(P-1) messages.
//   windowed  the pairwise order with at most W = spec.window (default 8)
//             sends and W receives outstanding per image. Cray MPT on XT3,
//             section 5: many-to-many small-message patterns overrun the
//             receiver's unexpected-message queue as P grows; bounding
//             what is in flight bounds what can arrive unexpected.
//             P(P-1) messages.
//   bruck     Bruck et al.'s index algorithm for small blocks: ceil(log2 P)
//             rounds of ONE packed message each, at the price of moving
//             each byte up to log2 P times. P ceil(log2 P) messages.
// Zero-byte blocks travel as zero-byte messages, so the counts hold for
// every layout.
#include <algorithm>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

using patterns::or_none;

constexpr uint32_t kDefaultWindow = 8;

BufferRef send_block(const ExchangeLayout& X, uint32_t from, uint32_t to) {
  return user_src(X.send_offset(from, to), X.length(from, to));
}
BufferRef recv_block(const ExchangeLayout& X, uint32_t to, uint32_t from) {
  return user_dst(X.recv_offset(to, from), X.length(from, to));
}

// The image's DAG with its own block already COPYed.
DagBuilder start(const ExchangeLayout& X, uint32_t image) {
  DagBuilder b(image, X.src_bytes(image), X.dst_bytes(image));
  b.copy(recv_block(X, image, image), send_block(X, image, image));
  return b;
}

// Step k = 1..P-1 sends to (p + k) mod P and receives from (p - k) mod P,
// straight between the user buffers, CARs created in that order. With a
// window W > 0, send k waits for send k - W and receive k for receive k - W;
// step k's send and its matching receive then both wait only on step k - W,
// so the schedule stays deadlock-free under rendezvous.
LocalDag pairwise_schedule(const CollectiveSpec& spec, uint32_t image, uint32_t window) {
  const uint32_t P = spec.images;
  const ExchangeLayout X(spec);
  DagBuilder b = start(X, image);
  std::vector<CarId> sends, recvs;
  for (uint32_t k = 1; k < P; ++k) {
    const uint32_t to = (image + k) % P, from = (image + P - k) % P;
    DagBuilder::Deps send_deps, recv_deps;
    if (window > 0 && k > window) {
      send_deps.push_back(after(sends[k - 1 - window]));
      recv_deps.push_back(after(recvs[k - 1 - window]));
    }
    sends.push_back(b.send(to, 0, or_none(send_block(X, image, to)), send_deps));
    recvs.push_back(b.recv(from, 0, or_none(recv_block(X, image, from)), recv_deps));
  }
  return b.finish();
}

LocalDag pairwise_exchange(const CollectiveSpec& spec, uint32_t image) {
  return pairwise_schedule(spec, image, 0);
}

LocalDag windowed_exchange(const CollectiveSpec& spec, uint32_t image) {
  return pairwise_schedule(spec, image, spec.window == 0 ? kDefaultWindow : spec.window);
}

// Bruck's index algorithm. Position j of image x is the block travelling
// distance j: initially image p's block for (p + j) mod P. Round k
// (tag k) moves every position with bit k set to (x + 2^k) mod P, so the
// block from s to d = s + j arrives at d as position j after the last round.
// Before round k, position j at x holds the block from
// s = x - (j mod 2^k) to s + j, which sizes it in the v forms.
//
// No working copy is kept: a position lives where it last arrived (its
// round's receive region) or, until it first moves, in user_src, which folds
// the initial rotation into the first pack. Each round packs its positions
// (COPY, skipped when one non-empty block can go as it is), sends ONE
// message and receives one into a fresh region; positions whose highest bit
// is k are final there and are COPYed into user_dst at once (the inverse
// rotation), overlapping later rounds. Fresh regions mean no CAR ever
// overwrites bytes another still reads.
class BruckExchange {
 public:
  BruckExchange(const CollectiveSpec& spec, uint32_t image)
      : P_(spec.images), image_(image), X_(spec), b_(start(X_, image)) {}

  LocalDag build() {
    if (P_ == 1) return b_.finish();
    const uint32_t rounds = patterns::ceil_log2(P_);
    where_.resize(P_);
    writer_.assign(P_, kNoCar);
    for (uint32_t j = 1; j < P_; ++j) where_[j] = send_block(X_, image_, (image_ + j) % P_);
    uint64_t pack_bytes = 0, recv_bytes = 0;
    for (uint32_t k = 0; k < rounds; ++k) {
      if (needs_pack(k)) pack_bytes += round_bytes(image_, k);
      recv_bytes += round_bytes(minus(image_, 1u << k), k);
    }
    pack_slot_ = b_.temp_slot(pack_bytes);
    recv_slot_ = b_.temp_slot(recv_bytes);
    for (uint32_t k = 0; k < rounds; ++k) run_round(k);
    return b_.finish();
  }

 private:
  uint32_t minus(uint32_t a, uint64_t b) const {
    return static_cast<uint32_t>((a + uint64_t{P_} - b % P_) % P_);
  }
  // Bytes of position j at image x before round k.
  uint64_t position_bytes(uint32_t x, uint32_t j, uint32_t k) const {
    const uint32_t s = minus(x, j & ((1u << k) - 1));
    return X_.length(s, (s + j) % P_);
  }
  uint64_t round_bytes(uint32_t x, uint32_t k) const {
    uint64_t bytes = 0;
    for (uint32_t j = 1u << k; j < P_; ++j) {
      if (j & (1u << k)) bytes += position_bytes(x, j, k);
    }
    return bytes;
  }
  bool needs_pack(uint32_t k) const {
    uint32_t nonempty = 0;
    for (uint32_t j = 1u << k; j < P_; ++j) {
      if ((j & (1u << k)) && position_bytes(image_, j, k) > 0) ++nonempty;
    }
    return nonempty > 1;
  }

  void run_round(uint32_t k) {
    const uint32_t bit = 1u << k;
    const uint32_t to = static_cast<uint32_t>((image_ + uint64_t{bit}) % P_),
                   from = minus(image_, bit);
    if (needs_pack(k)) {
      const uint64_t base = pack_off_;
      DagBuilder::Deps packed;
      for (uint32_t j = bit; j < P_; ++j) {
        if (!(j & bit) || where_[j].length == 0) continue;
        DagBuilder::Deps deps;
        if (writer_[j] != kNoCar) deps.push_back(after_buffer(writer_[j]));
        const BufferRef slot_range = temp(pack_slot_, pack_off_, where_[j].length);
        packed.push_back(after_buffer(b_.copy(slot_range, where_[j], deps)));
        pack_off_ += where_[j].length;
      }
      b_.send(to, k, temp(pack_slot_, base, pack_off_ - base), packed);
    } else {
      send_single(to, k);
    }
    const uint64_t base = recv_off_;
    recv_off_ += round_bytes(from, k);
    const CarId got = b_.recv(from, k, or_none(temp(recv_slot_, base, recv_off_ - base)));
    uint64_t at = base;
    for (uint32_t j = bit; j < P_; ++j) {
      if (!(j & bit)) continue;
      const uint64_t bytes = position_bytes(from, j, k);
      where_[j] = temp(recv_slot_, at, bytes);
      writer_[j] = got;
      at += bytes;
      if (j < 2 * uint64_t{bit} && bytes > 0) {  // highest bit k: final
        b_.copy(recv_block(X_, image_, minus(image_, j)), where_[j], {after_buffer(got)});
      }
    }
  }

  // At most one non-empty position: it goes as it lies.
  void send_single(uint32_t to, uint32_t k) {
    const uint32_t bit = 1u << k;
    for (uint32_t j = bit; j < P_; ++j) {
      if (!(j & bit) || where_[j].length == 0) continue;
      DagBuilder::Deps deps;
      if (writer_[j] != kNoCar) deps.push_back(after_buffer(writer_[j]));
      b_.send(to, k, where_[j], deps);
      return;
    }
    b_.send(to, k, no_buffer());
  }

  const uint32_t P_, image_;
  const ExchangeLayout X_;
  DagBuilder b_;
  std::vector<BufferRef> where_;  // where each position's bytes live now
  std::vector<CarId> writer_;     // the receive that put them there (kNoCar: user_src)
  uint32_t pack_slot_ = 0, recv_slot_ = 0;
  uint64_t pack_off_ = 0, recv_off_ = 0;
};

LocalDag bruck_exchange(const CollectiveSpec& spec, uint32_t image) {
  return BruckExchange(spec, image).build();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(pairwise_exchange,
                           {CollKind::Exchange, "pairwise", &pairwise_exchange, true, false,
                            "P-1 steps to (p+k) mod P, all in flight; P(P-1) messages", 0,
                            &shift_symmetric});
CARFLOW_REGISTER_GENERATOR(
    windowed_exchange, {CollKind::Exchange, "windowed", &windowed_exchange, true, false,
                        "pairwise order, at most spec.window (8) messages in flight per image",
                        kUsesWindow, &shift_symmetric});
CARFLOW_REGISTER_GENERATOR(
    bruck_exchange,
    {CollKind::Exchange, "bruck", &bruck_exchange, true, false,
     "Bruck index algorithm: ceil(log2 P) packed messages per image; small blocks", 0, &shift_symmetric});

}  // namespace carflow
