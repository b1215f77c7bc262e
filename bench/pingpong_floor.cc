// The floor under any small message between two cores: one cache line's
// round trip. Two threads on two different CPUs pass a counter back and
// forth through two atomics (each on its own line), no carflow. A 2-process
// barrier or 8-byte allreduce needs at least one such hand-over each way.
//
//   bazel run //bench:pingpong_floor -- [round_trips=2000000]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "bench/arg.h"
#include "bench/two_cpus.h"

namespace {

using carflow_bench::pin;
using carflow_bench::two_cpus;

struct alignas(64) Line {
  std::atomic<uint64_t> value{0};
};

}  // namespace

int main(int argc, char** argv) {
  const uint64_t trips = carflow_bench::arg_uint(argc, argv, 1, "trips", 2000000, 1, uint64_t{1} << 40);
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty() || trips == 0) {
    std::fprintf(stderr, "pingpong_floor: needs two CPUs and at least one round trip\n");
    return 1;
  }
  Line ping, pong;
  std::thread echo([&] {
    pin(cpus[1]);
    for (uint64_t i = 1; i <= trips; ++i) {
      while (ping.value.load(std::memory_order_acquire) != i) {
      }
      pong.value.store(i, std::memory_order_release);
    }
  });
  pin(cpus[0]);
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 1; i <= trips; ++i) {
    ping.value.store(i, std::memory_order_release);
    while (pong.value.load(std::memory_order_acquire) != i) {
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
  echo.join();
  std::printf("{\"bench\":\"pingpong_floor\",\"cpus\":[%d,%d],\"round_trip_ns\":%.1f}\n", cpus[0], cpus[1],
              ns / static_cast<double>(trips));
  return 0;
}
