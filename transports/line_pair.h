// The distance that keeps data written by different threads from slowing
// each other. A cache line is 64 bytes, but x86 cores fetch lines in
// aligned 128-byte pairs when they can (Intel's spatial prefetcher, AMD's
// up/down prefetcher): a line another core writes on every call, next to a
// line this core reads on every message, is pulled across with it and
// invalidated again. Hot shared data is therefore aligned and padded to
// a pair, as folly and crossbeam do on x86-64.
#pragma once

#include <cstddef>

namespace carflow {

inline constexpr std::size_t kLinePair = 128;

}  // namespace carflow
