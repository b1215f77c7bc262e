// Two pinned threads for the floor benchmarks (pingpong_floor, ring_floor):
// which two CPUs, and pinning the calling thread to one.
#pragma once

#include <pthread.h>
#include <sched.h>

#include <vector>

namespace carflow_bench {

// The first two CPUs this process may run on, or {} when it has fewer.
inline std::vector<int> two_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus.size() == 2 ? cpus : std::vector<int>{};
}

// Pins the calling thread to `cpu`.
inline void pin(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace carflow_bench
