// The default algorithm table (README, "Algorithm selection"), as data
// resolved once: environment overrides first, then the table by (P, bytes).
#pragma once

#include <cstdint>

#include "engine/config.h"
#include "graph/registry.h"

namespace carflow {

class SelectionTable {
 public:
  explicit SelectionTable(const Config& config);
  // The generator for a call; never nullptr. `commutative`: the op allows
  // reordering (allreduce only).
  const GeneratorInfo* choose(CollKind kind, uint32_t images, uint64_t nbytes, uint32_t elem_size,
                              bool commutative) const;

 private:
  uint64_t allreduce_ring_bytes_;
  const GeneratorInfo* forced_[3] = {};
  const GeneratorInfo* flat_broadcast_;
  const GeneratorInfo* binomial_broadcast_;
  const GeneratorInfo* dissemination_barrier_;
  const GeneratorInfo* recursive_doubling_allreduce_;
  const GeneratorInfo* ring_allreduce_;
};

}  // namespace carflow
