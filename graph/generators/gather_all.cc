// Gather_all (allgather): every image's destination gets every image's
// block (graph/layout.h: user_src is the image's own block, user_dst holds
// all blocks by BlockLayout). Four schedules, after GASNet collectives notes v1.7, "Notes on
// algorithms", Gather_All:
//   direct              the Exchange-like schedule: image p sends its block
//                       to (p+1) mod P, (p+2) mod P, ... so each image
//                       receives once per step. P(P-1) messages, one step.
//   ring                P-1 steps around r -> r+1, forwarding the block
//                       received in the step before. P(P-1) messages.
//   recursive_doubling  log2 P' rounds exchanging doubling ranges of blocks
//                       (P' = floor_pow2(P)); extra images fold in first.
//                       P' log2 P' + 2(P - P') messages.
//   bruck               the GASNet notes' "Dissemination-like" schedule: round i
//                       forwards 2^i blocks; ceil(log2 P) messages per
//                       image, no surplus. P ceil(log2 P) messages.
// The GASNet notes' "Exchange-like" schedule costs O(P max(o, g)) per image, the
// dissemination one O(log P * L): direct/ring for few images or big blocks,
// bruck/recursive_doubling for many images and small blocks.
//
// Zero-byte blocks still travel as zero-byte messages (no buffer), so the
// message counts above hold for every layout.
#include <algorithm>
#include <vector>

#include "graph/builder.h"
#include "graph/gen_builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

using patterns::or_none;
using patterns::RankOrderStore;

BufferRef dst_block(const BlockLayout& L, uint32_t i) { return user_dst(L.offset(i), L.length(i)); }
BufferRef own_block(const BlockLayout& L, uint32_t image) { return user_src(0, L.length(image)); }

DagBuilder start(const BlockLayout& L, uint32_t image) {
  return DagBuilder(image, L.length(image), L.extent());
}

// (a - b) mod P without leaving 32 bits.
uint32_t minus(uint32_t a, uint64_t b, uint32_t P) {
  return static_cast<uint32_t>((a + uint64_t{P} - b % P) % P);
}

LocalDag direct_gather_all(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  DagBuilder b = start(L, image);
  b.reserve(2 * size_t{P} + 1);
  b.copy(dst_block(L, image), own_block(L, image));
  // Posted in the GASNet notes' order; nothing waits for anything.
  for (uint32_t k = 1; k < P; ++k) {
    const uint32_t from = minus(image, k, P);
    b.send((image + k) % P, 0, or_none(own_block(L, image)));
    b.recv(from, 0, or_none(dst_block(L, from)));
  }
  return b.finish();
}

// Step s: send block (r - s), received in step s-1 (step 0: from user_src),
// receive block (r - s - 1). Every block lands where it belongs in user_dst.
// Written on the checked builder of carflow/generator.h
// (graph/gen_builder.h), as a plug-in would be.
LocalDag ring_gather_all(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  GenBuilder b(spec.algorithm, spec, image);
  b.reserve(2 * size_t{P} + 1);
  b.copy(dst_block(L, image), own_block(L, image));
  const uint32_t right = (image + 1) % P, left = minus(image, 1, P);
  CarId got = kNoCar;
  for (uint32_t s = 0; s + 1 < P; ++s) {
    if (s == 0) {
      b.send(right, own_block(L, image));
    } else {
      b.send(right, dst_block(L, minus(image, s, P)), {buffer_dep(got)});
    }
    got = b.recv(left, dst_block(L, minus(image, uint64_t{s} + 1, P)));
  }
  return b.finish();
}

// P = P' + rem: images r < 2 rem pair up; even r hands its block to r+1
// (tag 0) and gets the whole result back at the end (tag 1 + rounds). New
// rank nr of the P' core images owns blocks [first(nr), first(nr+1)), so a
// range of new ranks is a range of real blocks: every round moves one
// contiguous range. Round k (tag 1 + k): partners nr ^ 2^k swap ranges.
LocalDag recursive_doubling_gather_all(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  DagBuilder b = start(L, image);
  if (P == 1) {
    b.copy(dst_block(L, image), own_block(L, image));
    return b.finish();
  }
  const patterns::Fold fold(P);
  const uint32_t rem = fold.rem, rounds = fold.rounds;
  const RankOrderStore store(L, P, &b);
  auto first = [&](uint32_t nr) { return nr < rem ? 2 * nr : nr + rem; };  // its lowest image

  if (fold.folded_away(image)) {
    b.send(image + 1, 0, or_none(own_block(L, image)));
    CarId got = b.recv(image + 1, 1 + rounds, store.range(0, P));
    // The whole result includes my block; in user_dst it lands as is.
    if (!store.in_dst()) {
      b.copy(dst_block(L, image), own_block(L, image));
      store.copy_out(&b, 0, P, image, got);
    }
    return b.finish();
  }

  CarDeps writers;  // every CAR that wrote the store
  CarId own = b.copy(dst_block(L, image), own_block(L, image));
  if (!store.in_dst() && L.length(image) > 0) {
    own = b.copy(store.range(image, image + 1), own_block(L, image));
  }
  writers.push_back(after_buffer(own));
  const uint32_t nr = fold.newrank(image);
  if (fold.paired(image)) {
    CarId got = b.recv(image - 1, 0, or_none(store.range(image - 1, image)));
    writers.push_back(after_buffer(got));
    if (!store.in_dst()) store.copy_out(&b, image - 1, image, P, got);
  }
  for (uint32_t k = 0; k < rounds; ++k) {
    const uint32_t dist = 1u << k, lo = nr & ~(dist - 1), partner_lo = (nr ^ dist) & ~(dist - 1);
    const uint32_t partner = fold.real(nr ^ dist);
    if (k == 0 && nr >= rem) {
      b.send(partner, 1 + k, or_none(own_block(L, image)));  // my range is my own block
    } else {
      b.send(partner, 1 + k, store.range(first(lo), first(lo + dist)), writers);
    }
    CarId got = b.recv(partner, 1 + k, store.range(first(partner_lo), first(partner_lo + dist)));
    writers.push_back(after_buffer(got));
    if (!store.in_dst()) store.copy_out(&b, first(partner_lo), first(partner_lo + dist), P, got);
  }
  if (fold.paired(image)) b.send(image - 1, 1 + rounds, store.range(0, P), writers);
  return b.finish();
}

// Bruck / dissemination (GASNet collectives notes v1.7, Gather_All; the GASNet notes' p -> p + 2^i
// pairing mirrored so that data accumulates own block first): image p keeps
// a temp in rotated order, position j holding block (p + j) mod P. Round i
// (dist = 2^i, tag i): send positions [0, cnt) to (p - dist) mod P, receive
// positions [dist, dist + cnt) from (p + dist) mod P, with
// cnt = min(dist, P - dist): the last round of a non-power-of-two P sends
// only the P - 2^k blocks still missing. Each round's blocks are COPYed
// into user_dst as they arrive, as few runs as the layout allows.
void copy_rotated(DagBuilder* b, const BlockLayout& L, uint32_t image, uint32_t P, uint32_t slot,
                  const std::vector<uint64_t>& rot, uint32_t first, uint32_t end, CarId writer) {
  uint64_t run_src = 0, run_dst = 0, run_bytes = 0;
  auto flush = [&]() {
    if (run_bytes > 0) {
      b->copy(user_dst(run_dst, run_bytes), temp(slot, run_src, run_bytes), {after_buffer(writer)});
    }
    run_bytes = 0;
  };
  for (uint32_t j = first; j < end; ++j) {
    const uint32_t block = (image + j) % P;
    if (L.length(block) == 0) continue;
    if (run_bytes > 0 && (L.offset(block) != run_dst + run_bytes || rot[j] != run_src + run_bytes)) {
      flush();
    }
    if (run_bytes == 0) {
      run_src = rot[j];
      run_dst = L.offset(block);
    }
    run_bytes += L.length(block);
  }
  flush();
}

LocalDag bruck_gather_all(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  DagBuilder b = start(L, image);
  b.copy(dst_block(L, image), own_block(L, image));
  if (P == 1) return b.finish();
  std::vector<uint64_t> rot(P + 1, 0);  // rot[j]: offset of position j in the temp
  for (uint32_t j = 0; j < P; ++j) rot[j + 1] = rot[j] + L.length((image + j) % P);
  const uint32_t slot = b.temp_slot(rot[P]);
  CarDeps writers;
  // Position 0 is read by rounds i >= 1 only; round 0 sends from user_src.
  if (P > 2) writers.push_back(after_buffer(b.copy(temp(slot, 0, rot[1]), own_block(L, image))));
  uint32_t round = 0;
  for (uint64_t dist = 1; dist < P; dist *= 2, ++round) {
    const uint32_t d = static_cast<uint32_t>(dist);
    const uint32_t cnt = std::min(d, P - d);
    if (round == 0) {
      b.send(minus(image, d, P), round, or_none(own_block(L, image)));
    } else {
      b.send(minus(image, d, P), round, or_none(temp(slot, 0, rot[cnt])), writers);
    }
    CarId got = b.recv((image + d) % P, round, or_none(temp(slot, rot[d], rot[d + cnt] - rot[d])));
    writers.push_back(after_buffer(got));
    copy_rotated(&b, L, image, P, slot, rot, d, d + cnt, got);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(
    direct_gather_all, {CollKind::GatherAll, "direct", &direct_gather_all, true, false,
                        "every image sends its block to every other in one step; P(P-1) messages", 0,
                        &shift_symmetric});
CARFLOW_REGISTER_GENERATOR(ring_gather_all,
                           {CollKind::GatherAll, "ring", &ring_gather_all, true, false,
                            "P-1 forwarding steps around a ring; large blocks", 0, &shift_symmetric});
CARFLOW_REGISTER_GENERATOR(recursive_doubling_gather_all,
                           {CollKind::GatherAll, "recursive_doubling",
                            &recursive_doubling_gather_all, true, false,
                            "log2 P rounds exchanging doubling ranges; any P", 0, &xor_symmetric});
CARFLOW_REGISTER_GENERATOR(
    bruck_gather_all, {CollKind::GatherAll, "bruck", &bruck_gather_all, true, false,
                       "dissemination: ceil(log2 P) messages per image, no surplus; small blocks"});

}  // namespace carflow
