// The floor under a 2-image allreduce of N floats (default 4 MiB), without
// carflow: two threads each sum their half of the two vectors into their
// own result, then copy the other half from the other thread's result:
// the memory work of Rabenseifner's algorithm at P = 2, with no
// synchronization at all (the copied half is whatever is there). Prints it
// next to one memcpy of N bytes, the reference of the large-allreduce
// target (bench/README.md), so a run shows how far carflow is from what the machine
// allows at that moment. On this 2-core VM the floor moved between 147 us
// and 830 us within one hour (the host placing the two vCPUs), while a
// single thread's memcpy stayed at 89-91 us.
//
//   bazel run //bench:allreduce_floor -- [bytes=4194304] [iters=300]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "bench/arg.h"

namespace {

using Clock = std::chrono::steady_clock;

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx2", "default")))
#endif
void sum(float* __restrict d, const float* __restrict l, const float* __restrict r, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = l[i] + r[i];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t bytes = carflow_bench::arg_uint(argc, argv, 1, "bytes", size_t{4} << 20, 8, uint64_t{1} << 32);
  const int iters = static_cast<int>(carflow_bench::arg_uint(argc, argv, 2, "iters", 300, 1, 1000000));
  const size_t n = bytes / sizeof(float), half = n / 2;
  std::vector<float> src[2] = {std::vector<float>(n, 1.0f), std::vector<float>(n, 2.0f)};
  std::vector<float> dst[2] = {std::vector<float>(n), std::vector<float>(n)};
  auto image = [&](int me) {
    const size_t mine = me == 0 ? 0 : half, theirs = me == 0 ? half : 0;
    const size_t count = me == 0 ? half : n - half;
    for (int k = 0; k < iters; ++k) {
      sum(dst[me].data() + mine, src[0].data() + mine, src[1].data() + mine, count);
      std::memcpy(dst[me].data() + theirs, dst[1 - me].data() + theirs, (n - count) * sizeof(float));
    }
  };
  image(0), image(1);  // warm: pages touched, caches as in a loop
  auto t0 = Clock::now();
  std::thread a(image, 0), b(image, 1);
  a.join();
  b.join();
  const double floor_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  std::vector<char> from(bytes, 1), to(bytes);
  std::memcpy(to.data(), from.data(), bytes);
  t0 = Clock::now();
  for (int k = 0; k < iters; ++k) {
    std::memcpy(to.data(), from.data(), bytes);
    __asm__ __volatile__("" : : "r"(to.data()) : "memory");
  }
  const double memcpy_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / iters;
  std::printf("{\"bench\":\"allreduce_floor\",\"bytes\":%zu,\"two_threads_us\":%.2f,\"memcpy_us\":%.2f,"
              "\"floor_vs_memcpy_bandwidth\":%.2f}\n",
              bytes, floor_us, memcpy_us, memcpy_us / floor_us);
  return 0;
}
