// Positional number arguments of the floor benchmarks: argv[i] or a
// default, checked against a range. A bad one exits with a message naming
// the program, the argument and the range.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace carflow_bench {

inline uint64_t arg_uint(int argc, char** argv, int i, const char* name, uint64_t fallback, uint64_t min,
                         uint64_t max) {
  if (argc <= i) return fallback;
  const char* text = argv[i];
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(text, &end, 10);
  if (*text < '0' || *text > '9' || *end != '\0' || errno != 0 || v < min || v > max) {
    std::fprintf(stderr, "%s: %s: '%s' is not a number in [%llu, %llu]\n", argv[0], name, text,
                 static_cast<unsigned long long>(min), static_cast<unsigned long long>(max));
    std::exit(2);
  }
  return v;
}

}  // namespace carflow_bench
