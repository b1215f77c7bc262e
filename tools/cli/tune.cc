// carflow tune: a selection table (engine/tuning.h, CF_TUNING) from a
// LogGP model: for each collective kind the model ranks, the registered
// algorithm (plug-ins included) with the least predicted time at every
// power of two up to --max-bytes, merged into ranges of equal choices.
#include <fstream>

#include "engine/tuning.h"
#include "graph/model/predict.h"
#include "tools/cli/cli.h"

namespace carflow::cli {
namespace {

// The element size of the computational kinds' predictions (8: double,
// the usual MPI_SUM operand); the movement kinds count bytes.
constexpr uint32_t kReduceElemSize = 8;

// The sizes tabulated: 0 for the barrier; else 1 (or one element), 2, 4,
// ... up to max_bytes.
std::vector<uint64_t> tuned_sizes(CollKind kind, uint64_t max_bytes) {
  if (kind == CollKind::Barrier) return {0};
  std::vector<uint64_t> sizes;
  for (uint64_t s = is_computational(kind) ? kReduceElemSize : 1; s <= max_bytes; s *= 2) sizes.push_back(s);
  return sizes;
}

// The ranges of one kind; false with *error when no algorithm could be
// predicted at some size.
bool tune_kind(CollKind kind, const CollectiveSpec& base, const LogGPModel& model, const AlgorithmParams& params,
               uint64_t max_bytes, std::vector<TuningRange>* out, std::string* error) {
  for (uint64_t bytes : tuned_sizes(kind, max_bytes)) {
    CollectiveSpec spec = base;
    spec.kind = kind;
    spec.nbytes = bytes;
    spec.elem_size = is_computational(kind) ? kReduceElemSize : 1;
    const std::vector<Prediction> predictions = predict_algorithms(spec, true, model, params, kMaxFlatCars);
    const Prediction* best = fastest(predictions);
    if (best == nullptr) {
      *error = std::string(coll_kind_name(kind)) + " at " + std::to_string(bytes) + " bytes: no algorithm predicted" +
               (predictions.empty() ? "" : " (" + predictions[0].gen->name + ": " + predictions[0].error + ")");
      return false;
    }
    if (!out->empty() && out->back().gen == best->gen) continue;
    out->push_back({out->empty() ? 0 : bytes, best->gen, best->time_ns});
  }
  return true;
}

}  // namespace

int cmd_tune(const Args& args) {
  std::string error;
  Config config;
  if (!Config::from_env(&config, &error)) return fail(error);
  LogGPModel model;
  uint64_t images = 0, ppn = 0, max_bytes = 0;
  if (!args.count("model-file")) return fail("--model-file: required (a model from carflow calibrate)");
  if (!args.count("out")) return fail("--out: required (the table's file)");
  if (!model_from_args(args, &model, &error) || !get_uint(args, "images", 0, 1, 1u << 16, &images, &error) ||
      !get_uint(args, "images-per-node", 0, 0, images, &ppn, &error) ||
      !get_uint(args, "max-bytes", uint64_t{16} << 20, 1, uint64_t{1} << 30, &max_bytes, &error)) {
    return fail(error);
  }
  if (!args.count("images")) return fail("--images: required (the team size the table is for)");
  TuningTable table;
  table.images = static_cast<uint32_t>(images);
  table.images_per_node = static_cast<uint32_t>(ppn);
  table.model_json = model_to_json(model);
  CollectiveSpec base;
  base.images = table.images;
  base.images_per_node = table.images_per_node;
  AlgorithmParams params;
  params.segment_bytes = config.segment_bytes;
  params.radix = config.tree_radix;
  params.window = config.exchange_window;
  model.images_per_node = table.images_per_node;
  logp_from_model(model, table.images, &params);
  for (int k = 0; k < kCollKinds; ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    if (!model_ranks_kind(kind)) continue;
    if (!tune_kind(kind, base, model, params, max_bytes, &table.kinds[k], &error)) return fail(error);
    for (const TuningRange& r : table.kinds[k]) {
      std::printf("%-15s from %10llu B  %-20s %12.1f ns\n", coll_kind_name(kind),
                  static_cast<unsigned long long>(r.from_bytes), r.gen->name.c_str(), r.time_ns);
    }
  }
  std::ofstream file(args.at("out"), std::ios::binary | std::ios::trunc);
  file << tuning_to_json(table);
  if (!file.flush()) return fail("--out: " + args.at("out") + ": cannot write");
  return 0;
}

}  // namespace carflow::cli
