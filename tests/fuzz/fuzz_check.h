// What a fuzz target does when an input shows a defect: say which rule
// broke and abort, so libFuzzer (or replay_main.cc) stops with a crash file.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace carflow_fuzz {

[[noreturn]] inline void defect(const std::string& rule) {
  std::fprintf(stderr, "fuzz: %s\n", rule.c_str());
  std::abort();
}

inline void check(bool holds, const char* rule) {
  if (!holds) defect(rule);
}

}  // namespace carflow_fuzz
