// A sequential reference executor for global DAGs: runs every image's CARs
// on real bytes in one thread, in a seeded random order that respects the
// dependencies. Tests use it to check a generator's data movement against a
// sequential reference for any P without threads; `carflow plan --check`
// uses it too.
//
// Messages are rendezvous: a SEND completes when its receive takes the
// data, and the bytes are read at that moment (as the inproc transport's
// single-copy path does), so a CAR that overwrites a SEND's source without
// depending on the SEND is caught by some order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "graph/car.h"

namespace carflow {

using Bytes = std::vector<uint8_t>;

// dst = left op right over `bytes` bytes (dst may alias left or right).
using SimReduceFn = std::function<void(void* dst, const void* left, const void* right, size_t bytes)>;

struct SimResult {
  uint64_t messages = 0;
  uint64_t bytes = 0;
  uint64_t cars_run = 0;
};

// src[i] / dst[i]: image i's user buffers, resized to at least the DAG's
// src_bytes / dst_bytes. Returns false with *error when the DAG cannot run
// to completion (a deadlock) or a reduce CAR has no `reduce`, or the DAG is
// an aggregate (several members' buffers per image: the engine runs those).
bool simulate(const GlobalDag& dag, std::vector<Bytes>* src, std::vector<Bytes>* dst,
              const SimReduceFn& reduce, uint64_t seed, SimResult* result, std::string* error);

}  // namespace carflow
