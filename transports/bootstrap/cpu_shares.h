// Where the parts of a job run: `parts` contiguous shares of the CPUs this
// thread may use (its affinity), one per process (cfrun --bind auto) or per
// image thread (cf_run_images, CF_BIND_IMAGES=auto). Part r gets the r-th
// run. Empty when there is nothing to bind: fewer than two parts, more
// parts than CPUs, or the affinity cannot be read.
#pragma once

#include <sched.h>

#include <cstdint>
#include <vector>

namespace carflow {

inline std::vector<cpu_set_t> cpu_shares(uint32_t parts) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (parts < 2 || ::sched_getaffinity(0, sizeof allowed, &allowed) != 0) return {};
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (cpus.size() < parts) return {};
  std::vector<cpu_set_t> shares(parts);
  for (uint32_t r = 0; r < parts; ++r) {
    CPU_ZERO(&shares[r]);
    const size_t begin = cpus.size() * r / parts, end = cpus.size() * (r + 1) / parts;
    for (size_t i = begin; i < end; ++i) CPU_SET(cpus[i], &shares[r]);
  }
  return shares;
}

}  // namespace carflow
