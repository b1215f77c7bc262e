// A generator checked end to end without threads, as `carflow check` and
// the generator tests do: the global DAG built and validated (matching,
// deadlock freedom, data hazards on every image, a declared rank symmetry
// image by image), then run by the
// sequential executor (graph/simulate.h) in several seeded orders on
// patterned bytes, every image's destination compared with the sequential
// reference (graph/reference.h) and every source checked untouched.
// Reductions combine with the sequence hash (non-commutative) when the
// generator preserves order and elements are 16 bytes, else a byte sum.
#pragma once

#include <cstdint>
#include <string>

#include "graph/car.h"
#include "graph/reference.h"

namespace carflow {

// The operator check_generator uses for `spec` (see above).
reference::Combine check_operator(const CollectiveSpec& spec);

// True when `spec`'s algorithm passes; otherwise false with *failure
// naming the step and what differs. *dag holds the global DAG when it
// could be built (to save for `carflow dot` or the viewer); *messages the
// message count. `op`: the reductions' operator (check_operator's if empty).
bool check_generator(const CollectiveSpec& spec, int orders, GlobalDag* dag, std::string* failure,
                     uint64_t* messages = nullptr, reference::Combine op = nullptr);

}  // namespace carflow
