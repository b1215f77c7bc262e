// A selection table from `carflow tune` (CF_TUNING): for one team shape,
// per collective kind, the algorithm for each range of message sizes.
// The file format is documented in api/README.md ("Tuning tables"):
//   {"schema": "carflow.tuning/1", "images": 8, "images_per_node": 0,
//    "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "knomial"},
//                            {"from_bytes": 65536, "algorithm": "flat"}], ...},
//    "model": {...}}                        (optional: what it was tuned for)
// A range runs from its from_bytes up to the next one's; the first starts
// at 0 and the last has no end.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/registry.h"

namespace carflow {

struct TuningRange {
  uint64_t from_bytes = 0;
  const GeneratorInfo* gen = nullptr;
  double time_ns = -1;  // the prediction at from_bytes; < 0 when not given
};

struct TuningTable {
  uint32_t images = 0;           // the team size it applies to
  uint32_t images_per_node = 0;  // 0: any; else only teams of this many per node
  std::array<std::vector<TuningRange>, kCollKinds> kinds;  // sorted by from_bytes
  std::string model_json;        // the "model" object, as text ("" when absent)

  // The table's algorithm for a call, or nullptr when it says nothing
  // (another team shape, or no ranges for the kind).
  const GeneratorInfo* find(CollKind kind, uint32_t images, uint32_t images_per_node, uint64_t nbytes) const;
};

// Refuses, naming the field ("kinds.broadcast[1].algorithm: ..."): other
// fields, a wrong schema, duplicates, ranges that do not start at 0 or do
// not increase, algorithms not registered for the kind. *out is set only
// on success.
bool parse_tuning_json(const std::string& text, TuningTable* out, std::string* error);
// parse_tuning_json on a file (at most 1 MiB); errors start with the path.
bool load_tuning_file(const std::string& path, TuningTable* out, std::string* error);
std::string tuning_to_json(const TuningTable& table);

}  // namespace carflow
