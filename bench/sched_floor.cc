// The floor under any barrier of T threads when the threads outnumber the
// cores: every thread must run at least once after the last one arrives.
// Measures, without carflow, (1) a round in which each of T threads calls
// sched_yield once, and (2) the simplest shared-memory barrier there is (a
// sense-reversing counter, waiters yielding). Compare with
// `tools/carflow bench --coll barrier --images T`.
//
//   bazel run //bench:sched_floor -- [threads=8] [rounds=200000]
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/arg.h"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

template <typename Body>
double run_threads(unsigned threads, Body body) {
  std::vector<std::thread> pool;
  const auto t0 = Clock::now();
  for (unsigned i = 0; i < threads; ++i) pool.emplace_back(body);
  for (auto& t : pool) t.join();
  return us_since(t0);
}

}  // namespace

int main(int argc, char** argv) {
  const unsigned threads = static_cast<unsigned>(carflow_bench::arg_uint(argc, argv, 1, "threads", 8, 2, 4096));
  const long rounds = static_cast<long>(carflow_bench::arg_uint(argc, argv, 2, "rounds", 200000, 1, uint64_t{1} << 40));
  const double yield_us = run_threads(threads, [&] {
    for (long i = 0; i < rounds; ++i) sched_yield();
  });
  alignas(64) std::atomic<unsigned> count{0};
  alignas(64) std::atomic<bool> sense{false};
  const long barriers = rounds / 4;
  const double barrier_us = run_threads(threads, [&] {
    bool local = false;
    for (long i = 0; i < barriers; ++i) {
      local = !local;
      if (count.fetch_add(1, std::memory_order_acq_rel) == threads - 1) {
        count.store(0, std::memory_order_relaxed);
        sense.store(local, std::memory_order_release);
      } else {
        while (sense.load(std::memory_order_acquire) != local) sched_yield();
      }
    }
  });
  std::printf("{\"bench\":\"sched_floor\",\"threads\":%u,\"cores\":%u,\"yield_round_us\":%.2f,"
              "\"counter_barrier_us\":%.2f}\n",
              threads, std::thread::hardware_concurrency(), yield_us / rounds, barrier_us / barriers);
  return 0;
}
