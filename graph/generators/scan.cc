// Scan (prefix reduction over images): image r's destination gets
// x_0 op ... op x_r, or with kExclusiveFlag x_0 op ... op x_{r-1} (image 0's
// destination is then not written at all; graph/layout.h).
//
// Both generators compute the exclusive prefix E_r first and derive the
// inclusive one as E_r op x_r (image 0: a copy of x_0), as the GASNet notes'
// GASNet collectives notes advise: the exclusive prefix is the one that can
// be built without ever holding x_r on the wrong side.
//
// dissemination (Hillis-Steele): ceil(log2 P) rounds; in round k (d = 2^k)
// image r sends its window W = x_{max(0,r-2d+1)} .. x_r (E_r so far op x_r)
// to r+d and receives the window of r-d, which covers the ranks just below
// its own partial, and combines it on the LEFT of E_r (RECV_REDUCE into the
// destination). Messages: sum over k of (P - 2^k), each n bytes; one REDUCE
// per round to form the window to send. Preserves operand order.
//
// linear: a pipelined chain 0 -> 1 -> ... -> P-1, cut into segments of
// spec.segment_bytes that flow independently: image r receives the prefix of
// 0..r-1 for a segment from r-1, finishes its result and forwards its
// inclusive prefix to r+1. P-1 messages per segment, P-1+S-1 segment steps
// for S segments. Preserves operand order.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

bool exclusive_scan(const CollectiveSpec& spec) { return (spec.flags & kExclusiveFlag) != 0; }

// Image r > 0 of the dissemination scan keeps E_r in its destination.
// Tags: round index k (each (r, r+2^k) pair talks in one round only).
LocalDag dissemination_scan(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  const bool exclusive = exclusive_scan(spec);
  DagBuilder b(image, n, n);
  const uint32_t rounds = patterns::ceil_log2(P);
  const BufferRef x = user_src(0, n), acc = user_dst(0, n);
  if (image == 0) {
    // E_0 is empty, so the window is always x_0 itself.
    for (uint32_t k = 0; k < rounds; ++k) b.send(1u << k, k, x);
    if (!exclusive) b.copy(acc, x);
    return b.finish();
  }
  uint32_t window_slot[2] = {UINT32_MAX, UINT32_MAX};
  CarId last_send[2] = {kNoCar, kNoCar};  // per window slot
  CarId acc_car = kNoCar;                 // last CAR that wrote the destination
  std::vector<CarId> readers;             // window REDUCEs that read it since
  auto after_readers = [&]() {
    DagBuilder::Deps deps{after_buffer(acc_car)};
    for (CarId c : readers) deps.push_back(after_buffer(c));
    return deps;
  };
  for (uint32_t k = 0; k < rounds; ++k) {
    const uint64_t d = uint64_t{1} << k;
    if (image + d < P) {
      if (k == 0) {
        b.send(image + 1, k, x);
      } else {
        // W = E op x_r in a ping-pong slot; the slot's SEND two rounds ago
        // must be done before it is overwritten.
        uint32_t& slot = window_slot[k % 2];
        if (slot == UINT32_MAX) slot = b.temp_slot(n);
        DagBuilder::Deps deps{after_buffer(acc_car)};
        if (last_send[k % 2] != kNoCar) deps.push_back(after_buffer(last_send[k % 2]));
        readers.push_back(b.reduce(temp(slot, 0, n), acc, x, deps));
        last_send[k % 2] = b.send(static_cast<uint32_t>(image + d), k, temp(slot, 0, n),
                                  {after_buffer(readers.back())});
      }
    }
    if (image >= d) {
      const uint32_t from = static_cast<uint32_t>(image - d);
      if (k == 0 && rounds == 1 && !exclusive) {
        // Two images: E_1 = x_0 is all that comes, so the inclusive result
        // x_0 op x_1 is combined as it arrives (no REDUCE after it).
        b.recv_reduce(from, k, acc, true, {}, x);
        return b.finish();
      }
      if (k == 0) {
        acc_car = b.recv(from, k, acc);
      } else {
        acc_car = b.recv_reduce(from, k, acc, true, after_readers());
        readers.clear();
      }
    }
  }
  if (!exclusive) {
    // Inclusive: x_r joins on the right, after every window has read E
    // (an image that has received everything may still send several).
    b.reduce(acc, acc, x, after_readers());
  }
  return b.finish();
}

// Tags: segment index (one pair per image, r -> r+1).
LocalDag linear_scan(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  const bool exclusive = exclusive_scan(spec);
  DagBuilder b(image, n, n);
  const auto segments = split_segments(n, spec.segment_bytes, spec.elem_size);
  const bool forwards = image + 1 < P;
  // Exclusive images 1..P-2 form E op x_r apart from their result.
  const uint32_t slot = exclusive && image > 0 && forwards ? b.temp_slot(n) : UINT32_MAX;
  for (uint32_t s = 0; s < segments.size(); ++s) {
    const uint64_t off = segments[s].offset, len = segments[s].length;
    const BufferRef x = user_src(off, len), out = user_dst(off, len);
    if (image == 0) {
      if (forwards) b.send(1, s, x);
      if (!exclusive) b.copy(out, x);
      continue;
    }
    if (!exclusive) {
      // dst = x_r, then the incoming prefix lands on its left as it arrives.
      const CarId init = b.copy(out, x);
      const CarId got = b.recv_reduce(image - 1, s, out, true, {after_buffer(init)});
      if (forwards) b.send(image + 1, s, out, {after_buffer(got)});
      continue;
    }
    const CarId got = b.recv(image - 1, s, out);
    if (forwards) {
      const BufferRef window = temp(slot, off, len);
      const CarId made = b.reduce(window, out, x, {after_buffer(got)});
      b.send(image + 1, s, window, {after_buffer(made)});
    }
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(dissemination_scan,
                           {CollKind::Scan, "dissemination", &dissemination_scan, true, false,
                            "Hillis-Steele: ceil(log2 P) rounds of doubling windows; small vectors"});
CARFLOW_REGISTER_GENERATOR(linear_scan,
                           {CollKind::Scan, "linear", &linear_scan, true, true,
                            "pipelined chain 0 -> 1 -> ... -> P-1, segmented; large vectors"});

}  // namespace carflow
