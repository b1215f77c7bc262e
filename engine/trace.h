// CF_TRACE: when each CAR became ready, started and finished, per image,
// written as Chrome trace-event JSON (Perfetto, chrome://tracing, and
// `carflow view`) when the engine closes (cf_finalize, or the end of
// cf_run_images).
//
// Off (CF_TRACE unset), the engine pays one predictable branch at each
// step of a CAR. On, each image has a buffer of CF_TRACE_EVENTS records
// allocated up front; a finished CAR claims the next record with one
// atomic add (CARs of one image finish on several threads: its own, oneTBB
// workers, transport callbacks), so nothing locks. A full buffer keeps its
// first CF_TRACE_EVENTS CARs and counts the rest, which the file's
// metadata and a line on stderr report.
//
// Times in the file are CLOCK_MONOTONIC nanoseconds (stamps converted by
// TraceClock): one clock for every process of a host, so flows between
// them are ordered. A node on another host than
// node 0 shifts its times onto node 0's clock by the offset the liveness
// mesh estimated (ClockEstimate: within half the best round trip); the
// file records the offset, its bound and whether it was applied.
#pragma once

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/car.h"
#include "transports/liveness/liveness_mesh.h"

namespace carflow {

class Schedule;

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Whether stamps are the time-stamp counter: on x86-64 when the kernel
// itself keeps time by it (clocksource "tsc": invariant, one counter for
// every core), decided once per process.
bool detect_trace_tsc();
inline const bool kTraceTsc = detect_trace_tsc();

// A stamp: the counter where kTraceTsc (about a third of clock_gettime's
// cost here, and a CAR takes three), else CLOCK_MONOTONIC nanoseconds.
// TraceClock turns stamps into CLOCK_MONOTONIC nanoseconds.
inline uint64_t trace_now() {
#if defined(__x86_64__)
  if (kTraceTsc) return __rdtsc();
#endif
  return monotonic_ns();
}

// A stamp taken after every earlier instruction: RDTSC alone does not wait
// for them, so a receive's end could be stamped before the load that saw
// its message, ahead of the send's start on the other core (1 trace in 3
// of 2-image allreduces had one). Ends only: a traced 8-byte allreduce on
// 2 image threads takes about 1.16x as long with it, 1.4x with a fence at
// every stamp.
inline uint64_t trace_now_ordered() {
#if defined(__x86_64__)
  if (kTraceTsc) {
    _mm_lfence();
    return __rdtsc();
  }
#endif
  return monotonic_ns();
}

// A stamp and CLOCK_MONOTONIC read together: the narrowest of several
// stamp-clock-stamp brackets, so a read that was interrupted is never the
// one kept; the pair is within half that bracket (some ns) of each other.
struct ClockAnchor {
  uint64_t stamp = 0, ns = 0;
};
ClockAnchor take_clock_anchor();

// Stamps to CLOCK_MONOTONIC nanoseconds: linear between an anchor taken
// when the engine starts and one taken when the trace is written, so the
// rate comes from the whole run and every process of a host lands on the
// clock they share within a few ns at both ends.
class TraceClock {
 public:
  void start() { begin_ = take_clock_anchor(); }
  uint64_t to_ns(uint64_t stamp, const ClockAnchor& end) const;
  // A duration in stamps (the hang watcher's ages), at the rate so far.
  uint64_t duration_ns(uint64_t stamps) const;

 private:
  ClockAnchor begin_;
};

// A CAR's stamps in one call (Instance::times, allocated when tracing or
// dumping hangs); 0 = not yet. Written by whichever thread moves the CAR
// on, read by the hang dump while it runs.
struct CarTimes {
  std::atomic<uint64_t> ready{0}, start{0}, done{0};
};

// One cache line per CAR. Plain words, no bit-fields: assigning a bit-field
// reads the destination first, and that read misses (the buffer left the
// cache long ago) on the call's critical path.
struct alignas(64) TraceRecord {
  uint64_t ready = 0, start = 0, done = 0;
  uint64_t kind_bytes = 0;             // CarKind << 56 | bytes (below 2^48)
  const Schedule* schedule = nullptr;  // kind, algorithm; alive until the engine closes
  uint32_t team = 0, seq = 0, tag = 0;
  uint32_t car = 0;    // the CAR's id in its image's DAG
  uint32_t image = 0;  // global image numbers
  uint32_t peer = 0;
  static uint64_t pack(CarKind kind, uint64_t bytes) { return static_cast<uint64_t>(kind) << 56 | bytes; }
  CarKind kind() const { return static_cast<CarKind>(kind_bytes >> 56); }
  uint64_t bytes() const { return kind_bytes & ((uint64_t{1} << 56) - 1); }
};
static_assert(sizeof(TraceRecord) == 64);

class TraceBuffer {
 public:
  explicit TraceBuffer(size_t capacity) : records_(new TraceRecord[capacity]), capacity_(capacity) {}
  void add(const TraceRecord& r) {
    const size_t i = next_.fetch_add(1, std::memory_order_relaxed);
    if (i < capacity_) {
      // Records fill memory that left the cache long ago, and the engine's
      // next locked operation waits for a store that misses. Fetching the
      // line a few calls ahead takes the miss off the critical path
      // (non-temporal stores are worse: locked operations wait for them
      // to reach memory).
      if (i + kPrefetchAhead < capacity_) __builtin_prefetch(&records_[i + kPrefetchAhead], 1, 3);
      records_[i] = r;
    } else {
      dropped_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  // Read once every collective has finished (the engine is closing).
  size_t size() const { return std::min(next_.load(std::memory_order_acquire), capacity_); }
  const TraceRecord& operator[](size_t i) const { return records_[i]; }
  uint64_t dropped() const { return dropped_.load(std::memory_order_relaxed); }

 private:
  static constexpr size_t kPrefetchAhead = 16;
  std::unique_ptr<TraceRecord[]> records_;
  size_t capacity_;
  std::atomic<size_t> next_{0};
  std::atomic<uint64_t> dropped_{0};
};

// The flow id that ties a SEND to its receive in the trace: both sides
// compute it from the run, the message's wire key and its two images.
uint64_t trace_flow_id(uint32_t run, uint32_t team, uint32_t seq, uint32_t tag, uint32_t sender, uint32_t receiver);

// The number of this process's next traced engine (cf_init's, then one per
// cf_run_images): every process of a job counts alike, so a message's two
// sides agree on it.
uint32_t next_trace_run();

// Writes the trace of this process's images (buffers[i]: image base + i)
// to DIR/carflow-trace-node<N>-run<R>.json. False with *error when the
// file cannot be written.
// stamps: how the records' stamps become CLOCK_MONOTONIC; clock: node 0's
// clock as this node knows it (times move onto it unless it is the same).
bool write_trace(const std::string& dir, uint32_t node, uint32_t base, uint32_t run,
                 const std::vector<std::unique_ptr<TraceBuffer>>& buffers, const TraceClock& stamps,
                 const ClockEstimate& clock, std::string* path, std::string* error);

// `carflow trace merge`: the traceEvents of every carflow-trace-*.json in
// `dir` in one document, each file checked (a JSON object with a
// traceEvents array of objects). False with *error naming the file.
bool merge_traces(const std::string& dir, const std::string& out, size_t* files, size_t* events, std::string* error);

}  // namespace carflow
