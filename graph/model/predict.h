// Predicted times of a collective's algorithms under the LogGP model
// (loggp.h): what `carflow tune` tabulates and what the engine's
// model-driven selection (CF_MODEL) ranks. Pure: a spec and a model in,
// times out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/model/loggp.h"
#include "graph/registry.h"

namespace carflow {

// The parameters the engine gives a generator that reads them (its
// GeneratorInfo::params and segmented flag); 0 = the generator's default.
struct AlgorithmParams {
  uint64_t segment_bytes = 0;
  uint32_t radix = 0, window = 0;
  uint32_t logp_L = 0, logp_o = 0, logp_g = 0;
};

// L, o and g of `model` in whole ns as the logp broadcast reads them: the
// intra-node set when the team is one node (images_per_node 0 < K >= P).
void logp_from_model(const LogGPModel& model, uint32_t images, AlgorithmParams* params);

// `base` with only the parameters `gen` reads set from `params`, its
// algorithm set to gen's name (the engine's ScheduleKey does the same).
CollectiveSpec spec_for_generator(const GeneratorInfo& gen, CollectiveSpec base, const AlgorithmParams& params);

// The kinds the model ranks: every rooted and all-to-all kind with one
// block size; permute and the block-cyclic reduce / prefix_reduce keep
// the default table (their DAGs depend on per-call layouts).
bool model_ranks_kind(CollKind kind);

struct Prediction {
  const GeneratorInfo* gen = nullptr;
  bool ok = false;
  double time_ns = 0;
  std::string error;  // why it was not predicted (its DAG is refused, too large, deadlocks)
  bool one_image = false;  // simulated as image 0 alone (rank symmetry, registry.h)
};

// Every generator registered for base.kind that may run the call
// (order-preserving ones only when !commutative), predicted under `model`
// with images_per_node = base.images_per_node; registry order.
// max_cars bounds each DAG (larger ones are not predicted). `prune`: a
// generator whose lower bound (lower_bound_ns) shows it cannot beat the
// best found so far is not simulated (ok false, error "pruned: ..."), so
// fastest() names the same generator as without pruning.
std::vector<Prediction> predict_algorithms(const CollectiveSpec& base, bool commutative,
                                           const LogGPModel& model, const AlgorithmParams& params,
                                           uint64_t max_cars, bool prune = true);

// One generator's prediction for `spec` (its parameters already set), as
// predict_algorithms makes it without a time limit; `mirror` allows the
// one-image simulation where the generator's rank symmetry holds.
Prediction predict_generator(const GeneratorInfo& gen, const CollectiveSpec& spec, const LogGPModel& model,
                             uint64_t max_cars, bool mirror);

// A lower bound of `spec`'s time under `model` from two image DAGs (0 and
// 1) alone: each image's CPU holds every CAR for at least its cost, and
// its NIC spaces its sends by g + (s-1)G, whatever the others do.
double lower_bound_ns(const GeneratorInfo& gen, const CollectiveSpec& spec, const LogGPModel& model);

// The predicted fastest of `predictions` (the first on ties, so every
// image and process that predicts the same picks the same), or nullptr.
const Prediction* fastest(const std::vector<Prediction>& predictions);

}  // namespace carflow
