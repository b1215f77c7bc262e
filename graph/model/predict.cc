#include "graph/model/predict.h"

#include <cmath>

#include "graph/layout.h"
#include "graph/model/flat_dag.h"

namespace carflow {

void logp_from_model(const LogGPModel& model, uint32_t images, AlgorithmParams* params) {
  const bool one_node = model.images_per_node != 0 && model.images_per_node >= images;
  const LogGPParams& m = one_node ? model.intra : model.inter;
  // The generator's fields are whole ns; the model's values are at most 1e12.
  auto ns = [](double v) { return static_cast<uint32_t>(std::min(std::llround(v), 1000000000ll)); };
  params->logp_L = ns(m.L), params->logp_o = ns(m.o), params->logp_g = ns(m.g);
  // All three 0 means "the generator's defaults" to it: keep the tree the model asks for.
  if (params->logp_L == 0 && params->logp_o == 0 && params->logp_g == 0) params->logp_o = 1;
}

CollectiveSpec spec_for_generator(const GeneratorInfo& gen, CollectiveSpec spec, const AlgorithmParams& p) {
  spec.algorithm = gen.name;
  spec.segment_bytes = gen.segmented ? p.segment_bytes : 0;
  spec.radix = (gen.params & kUsesRadix) ? p.radix : 0;
  spec.window = (gen.params & kUsesWindow) ? p.window : 0;
  const bool logp = (gen.params & kUsesLogp) != 0;
  spec.logp_L = logp ? p.logp_L : 0;
  spec.logp_o = logp ? p.logp_o : 0;
  spec.logp_g = logp ? p.logp_g : 0;
  if (!(gen.params & kUsesNodes)) spec.images_per_node = 0;
  return spec;
}

bool model_ranks_kind(CollKind kind) {
  return kind != CollKind::Permute && kind != CollKind::Reduce && kind != CollKind::PrefixReduce;
}

std::vector<Prediction> predict_algorithms(const CollectiveSpec& base, bool commutative,
                                           const LogGPModel& model, const AlgorithmParams& params,
                                           uint64_t max_cars) {
  LogGPModel placed = model;
  placed.images_per_node = base.images_per_node;
  std::vector<Prediction> out;
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(base.kind)) {
    if (!commutative && !gen->preserves_order) continue;
    Prediction p;
    p.gen = gen;
    const CollectiveSpec spec = spec_for_generator(*gen, base, params);
    FlatDag dag;
    p.ok = check_layout(spec, &p.error) && build_flat_dag(*gen, spec, &dag, &p.error, max_cars);
    LogGPResult result;
    p.ok = p.ok && simulate_loggp(dag, placed, &result, &p.error);
    p.time_ns = result.time_ns;
    out.push_back(std::move(p));
  }
  return out;
}

const Prediction* fastest(const std::vector<Prediction>& predictions) {
  const Prediction* best = nullptr;
  for (const Prediction& p : predictions) {
    if (p.ok && (best == nullptr || p.time_ns < best->time_ns)) best = &p;
  }
  return best;
}

}  // namespace carflow
