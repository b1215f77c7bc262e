// Configuration: every CF_* environment knob is read, validated and described
// here and nowhere else (STYLE.md rule 10).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace carflow {

struct Config {
  uint64_t inproc_eager_bytes = 8192;       // CF_INPROC_EAGER_BYTES
  uint64_t inproc_fastbox_bytes = 108;      // CF_INPROC_FASTBOX_BYTES (0 = off)
  uint64_t segment_bytes = 256 * 1024;      // CF_SEGMENT_BYTES (0 = no segmentation)
  uint64_t allreduce_ring_bytes = 64 * 1024;  // CF_ALLREDUCE_RING_BYTES: ring at or above
  std::string algo_broadcast;               // CF_ALGO_BROADCAST ("" = by table)
  std::string algo_barrier;                 // CF_ALGO_BARRIER
  std::string algo_allreduce;               // CF_ALGO_ALLREDUCE
  uint32_t spin_count = 4000;               // CF_SPIN_COUNT: polls before yielding
  uint32_t yield_count = 200;               // CF_YIELD_COUNT: yields before blocking

  // Reads the environment; false with *error naming the variable and rule.
  static bool from_env(Config* out, std::string* error);
  // (name, value, meaning) for `carflow info` and the README.
  std::vector<std::vector<std::string>> describe() const;
};

}  // namespace carflow
