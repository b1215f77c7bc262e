// The default algorithm table (README, "Algorithm selection"), as data
// resolved once: environment overrides first, then a tuning table
// (CF_TUNING), then the algorithm a LogGP model (CF_MODEL) predicts
// fastest, then the table by (P, bytes). The cut-offs are Config knobs, in
// the spirit of MPT's MPICH_*_SHORT_MSG.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "engine/config.h"
#include "graph/registry.h"

namespace carflow {

class SelectionTable {
 public:
  // `cores`: hardware threads of the node; some choices differ when the
  // images outnumber them (oversubscribed: fewer messages beat fewer
  // rounds). For allreduce only image threads of one process count (any
  // thread moves any image's messages there); when processes outnumber the
  // cores each message waits for its receiver's turn on a core, so fewer
  // rounds still win (direct: one round).
  // `local_images`: image threads of this process. `host_images`: images of
  // every process on this host (a team's images beyond them run on other
  // hosts' cores).
  SelectionTable(const Config& config, uint32_t cores, uint32_t local_images = UINT32_MAX,
                 uint32_t host_images = UINT32_MAX);
  // The generator for a call; never nullptr. `nbytes`: the call's size as
  // the table reads it (whole vector for broadcast and allreduce, one
  // block for scatter, gather, gather_all and exchange, the largest block
  // for the v forms). `commutative`: the op allows reordering (allreduce).
  // `images_per_node`: the team's ranks per node (0 = not node-major): with
  // more than one node of several images each, small broadcasts, barriers,
  // allreduces and gather_alls take the node-aware generators.
  // `uniform`: every block has nbytes (not a v form); only such calls
  // follow CF_TUNING and CF_MODEL.
  // CF_ALGO_<KIND>'s generator in *out (nullptr when unset). False, with
  // *error naming the variable and the name, when no generator of the kind
  // has that name yet: it is resolved at the kind's first call, as a
  // program may register it after cf_init.
  bool forced(CollKind kind, const GeneratorInfo** out, std::string* error) const;
  // `forced` when set and known, else by the table; never nullptr.
  const GeneratorInfo* choose(CollKind kind, uint32_t images, uint64_t nbytes, uint32_t elem_size,
                              bool commutative, uint32_t images_per_node = 0, bool uniform = true) const;
  // The model's choice (CF_MODEL), or nullptr without a model or for a kind
  // it does not rank. Predicted once per key and kept by this table (one
  // per engine), so teams and threads share the work and nothing else.
  const GeneratorInfo* model_choice(CollKind kind, uint32_t images, uint64_t nbytes, uint32_t elem_size,
                                    bool commutative, uint32_t images_per_node) const;

 private:
  const GeneratorInfo* by_table(CollKind kind, uint32_t images, uint64_t nbytes, bool commutative,
                                uint32_t images_per_node) const;
  const GeneratorInfo* get(CollKind kind, const char* name) const;
  // `gen`, or the order-preserving `fallback` when the op is not commutative
  // and `gen` reorders operands.
  const GeneratorInfo* order_safe(const GeneratorInfo* gen, bool commutative, const char* fallback) const;
  const Config config_;
  const uint32_t cores_;
  const uint32_t local_images_;
  const uint32_t host_images_;
  // CF_ALGO_* resolved: registry entries never move, so the first lookup
  // that finds one holds for good.
  mutable std::array<std::atomic<const GeneratorInfo*>, kCollKinds> forced_{};
  struct ModelKey {
    CollKind kind;
    bool commutative;
    uint32_t images, images_per_node, elem_size;
    uint64_t nbytes;
    bool operator==(const ModelKey&) const = default;
  };
  struct ModelKeyHash {
    size_t operator()(const ModelKey& k) const;
  };
  mutable std::mutex model_mutex_;
  mutable std::unordered_map<ModelKey, const GeneratorInfo*, ModelKeyHash> model_choices_;
};

}  // namespace carflow
