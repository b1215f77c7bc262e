// OSU-style collective latency over inproc images: warm-up, then each image
// times its own iterations; avg/min/max are the mean, minimum and maximum of
// the per-image averages (as osu_* benchmarks report). A barrier separates
// size steps. Results are verified against a sequential reference after the
// timed loop (Gloo's benchmarks verify by default too).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace carflow_bench {

struct LatencyOptions {
  std::string coll;             // a collective kind name (graph/car.h)
  uint32_t images = 2;
  std::vector<uint64_t> sizes;  // bytes (ignored by barrier: one step)
  uint32_t iters = 0;           // 0 = by size (about 20 ms of work per step)
  std::string algo;             // "" = default table
  int flags = 0;                // 0 = IN_MYSYNC|OUT_MYSYNC|LOCAL|ALL_THREADS
  std::string graph_dir;        // non-empty: image 0 dumps each step's DAG here
  // Calls per timed iteration, each on its own buffers: one aggregate
  // (CF_COLL_AGGREGATE on all but the last) or separate calls synced
  // together with cf_coll_wait_sync_all. Latency is per iteration.
  uint32_t calls = 1;
  bool aggregate = false;
  // coll "mixed": the seeded sequence of bench/mixed_sequence.h, `ops` long;
  // iters passes are timed after one untimed (default 10).
  uint32_t mixed_ops = 200;
  uint64_t mixed_seed = 1;
  // Before each iteration every image writes its sources again (the same
  // bytes, as an application that computed new data: the lines are then
  // modified in its own core's cache), the images meet in a barrier, and
  // only the call is timed. By default the sources stay as the first
  // iteration left them, so a peer that reads them keeps them in its own
  // cache from one iteration to the next and pays no transfer.
  bool fresh_src = false;
};

struct LatencyResult {
  std::string coll;
  uint64_t bytes = 0;
  uint32_t images = 0;
  uint32_t nodes = 1;
  std::string algo;
  uint32_t iters = 0;
  uint32_t calls = 1;
  bool aggregate = false;
  bool fresh_src = false;
  double avg_us = 0, min_us = 0, max_us = 0;
  bool verified = false;
  std::string graph_file;  // set when graph_dir was given
  // --copy-floor: the bytes the busiest process must receive at least
  // (received_bytes) and one memcpy of them in this process, the floor no
  // implementation goes below; copy_us < 0 when not measured.
  uint64_t copy_bytes = 0;
  double copy_us = -1;
  // coll "mixed": avg_us is one pass of the sequence; its ops, seed and
  // the sum of its sizes.
  uint32_t ops = 0;
  uint64_t seed = 0, total_bytes = 0;
};

// Runs every size; requires cf_init. False with *error on a bad option or a
// failed call; a verification failure is reported in the result, not here.
bool run_latency(const LatencyOptions& options, std::vector<LatencyResult>* results,
                 std::string* error);

std::string to_json_line(const LatencyResult& r);
// "8", "4K", "1M", "8:4M" (8, 16, ... up to 4M: LO:HI doubles from LO while
// the size stays <= HI), comma lists of these.
bool parse_sizes(const std::string& text, std::vector<uint64_t>* out, std::string* error);
std::string format_bytes(uint64_t bytes);

// Mean wall time of one memcpy of `bytes` (warm buffers), in microseconds:
// the reference the broadcast target is measured against.
double memcpy_us(uint64_t bytes);

// The bytes the busiest of `images` processes must receive at least for
// one `coll` of `bytes` (the step's size as the benchmark counts it: a
// block for the rooted and all-to-all block kinds, the whole vector else):
// broadcast, scatter, reduce_vec, scan: bytes; gather, gather_all,
// exchange, reduce_scatter: (images - 1) blocks; allreduce: 2 (images - 1)
// / images of the vector (the bandwidth bound); barrier: 0.
uint64_t received_bytes(const std::string& coll, uint64_t bytes, uint32_t images);

}  // namespace carflow_bench
