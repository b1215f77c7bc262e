// Helpers shared by the API-level tests.
#pragma once

#include <carflow/carflow.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace carflow_test {

// Runs f(image) on n image threads (cf_run_images) and returns its status.
template <typename F>
int run_images(uint32_t n, F&& f, const cf_coll_fn_entry_t* table = nullptr, size_t count = 0) {
  using Fn = std::remove_reference_t<F>;
  auto trampoline = [](cf_image_t image, void* arg) { (*static_cast<Fn*>(arg))(image); };
  return cf_run_images(n, table, count, trampoline, &f);
}

inline constexpr int kAllLocal = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL |
                                 CF_COLL_ALL_THREADS;

// A deterministic byte pattern that differs per (seed, index).
inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x);
}

inline std::vector<uint8_t> pattern(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(seed, i);
  return v;
}

}  // namespace carflow_test
