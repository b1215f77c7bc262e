#include "graph/model/predict.h"

#include <algorithm>
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

namespace {

// The cheapest of the parameter sets (intra, inter, and every band's),
// per key: a bound must hold for every pair of images and every size.
LogGPParams cheapest(const LogGPModel& m) {
  LogGPParams p = m.inter;
  const auto take = [&p](const LogGPParams& q) {
    p.o = std::min(p.o, q.o), p.O = std::min(p.O, q.O);
    p.g = std::min(p.g, q.g), p.G = std::min(p.G, q.G);
    p.gamma = std::min(p.gamma, q.gamma), p.beta = std::min(p.beta, q.beta);
  };
  take(m.intra);
  for (const LogGPBand& b : m.bands) take(b.inter), take(b.intra);
  return p;
}

double image_bound(const LocalDag& dag, const LogGPParams& p) {
  double cpu = 0, nic = 0, largest_send = 0;
  for (const Car& car : dag.cars) {
    const double s = static_cast<double>(car.message_bytes()), less_one = s > 0 ? s - 1 : 0;
    if (car.is_message()) cpu += p.o + less_one * p.O;
    if (car.kind == CarKind::RecvReduce) cpu += s * p.gamma;
    if (car.kind == CarKind::Reduce) cpu += static_cast<double>(car.src.length) * p.gamma;
    if (car.kind == CarKind::Copy) cpu += static_cast<double>(car.dst.length) * p.beta;
    if (car.kind == CarKind::Send) {
      nic += p.g + less_one * p.G;
      largest_send = std::max(largest_send, p.g + less_one * p.G);
    }
  }
  // The last send ends its CPU part after every earlier one has left the NIC.
  return std::max(cpu, nic - largest_send);
}

struct Candidate {
  Prediction prediction;
  CollectiveSpec spec;
  double bound = 0;
  std::vector<LocalDag> first;  // images 0 and 1 as the bound built them, for the build
};

double bound_of(const std::vector<LocalDag>& images, const LogGPModel& model) {
  const LogGPParams p = cheapest(model);
  double bound = 0;
  for (const LocalDag& dag : images) {
    if (!dag.error.empty()) return 0;  // the full build reports it
    bound = std::max(bound, image_bound(dag, p));
  }
  // The simulator adds the same terms in another order: leave room for rounding.
  return bound * (1 - 1e-9);
}

std::vector<LocalDag> first_images(const GeneratorInfo& gen, const CollectiveSpec& spec) {
  std::vector<LocalDag> out;
  for (uint32_t image = 0; image < std::min<uint32_t>(spec.images, 2); ++image) {
    out.push_back(generate_local(gen, spec, image));
  }
  return out;
}

// The model every message of a P-image team meets when all pairs cost
// alike (no nodes, one image per node, or one node), as one set per size
// with no nodes; false when pairs differ.
bool uniform_model(const LogGPModel& m, uint32_t images, LogGPModel* out) {
  *out = m;
  out->images_per_node = 0;
  if (m.images_per_node == 0 || m.images_per_node == 1) return true;
  const auto same_pairs = [](const LogGPParams& a, const LogGPParams& b) {
    return a.L == b.L && a.o == b.o && a.g == b.g && a.G == b.G && a.O == b.O && a.S == b.S;
  };
  // Every message within one node: the intra sets stand in for the inter ones
  // (REDUCE and COPY keep the inter sets' gamma and beta).
  const auto as_intra = [](LogGPParams* inter, const LogGPParams& intra) {
    const double gamma = inter->gamma, beta = inter->beta;
    *inter = intra;
    inter->gamma = gamma, inter->beta = beta;
  };
  if (m.images_per_node >= images) {
    as_intra(&out->inter, m.intra);
    for (LogGPBand& b : out->bands) as_intra(&b.inter, b.intra);
    return true;
  }
  if (!same_pairs(m.inter, m.intra)) return false;
  for (const LogGPBand& b : m.bands) {
    if (!same_pairs(b.inter, b.intra)) return false;
  }
  return true;
}

// A rank-symmetric candidate's time from image 0 alone (registry.h,
// RankSymmetry): every image starts at 0 and runs image 0's timeline, the
// messages it receives leaving their senders when its own mirrored SENDs
// leave it. Exact when every pair costs alike and a message arrives after
// the instant it is sent (o + L > 0): no two images then touch each other
// at one instant, so the simulator's tie order is every image's own.
// False when the shortcut does not apply (or fails; the full run reports why).
bool simulate_mirrored(Candidate* c, const LogGPModel& placed, uint64_t max_cars, double limit_ns) {
  const RankSymmetry symmetry = rank_symmetry(*c->prediction.gen, c->spec);
  LogGPModel one;
  if (symmetry == RankSymmetry::None || !uniform_model(placed, c->spec.images, &one) ||
      !(one.inter.o + one.inter.L > 0)) {
    return false;
  }
  for (const LogGPBand& b : one.bands) {
    if (!(b.inter.o + b.inter.L > 0)) return false;
  }
  uint64_t estimate = 0;
  std::string error;
  if (!estimate_flat_cars(*c->prediction.gen, c->spec, max_cars, &estimate, &error, c->first)) return false;
  // A plug-in's declaration is its author's word: images 1 and P - 1 must
  // bear it out, or the whole team is simulated (the run's whole-team
  // check then refuses the plug-in by name).
  if (c->prediction.gen->plugin) {
    const uint32_t P = c->spec.images;
    if (c->first.size() < 2 || !mirrors_image0(c->first[0], c->first[1], symmetry, 1, P, &error)) return false;
    if (P > 2 && !mirrors_image0(c->first[0], generate_local(*c->prediction.gen, c->spec, P - 1), symmetry,
                                 P - 1, P, &error)) {
      return false;
    }
  }
  FlatDag dag;
  LogGPResult result;
  if (!build_mirrored_flat_dag(c->first[0], c->spec.images, symmetry, &dag, &error, max_cars) ||
      !simulate_loggp(dag, one, &result, &error, limit_ns)) {
    return false;
  }
  c->prediction.ok = !result.exceeded;
  c->prediction.time_ns = result.time_ns;
  c->prediction.one_image = true;
  return true;
}

// Simulates c, stopping once its time passes limit_ns (error "exceeded").
void simulate_candidate(Candidate* c, const LogGPModel& placed, uint64_t max_cars, double limit_ns,
                        bool mirror) {
  Prediction& p = c->prediction;
  if (!mirror || !simulate_mirrored(c, placed, max_cars, limit_ns)) {
    FlatDag dag;
    p.ok = build_flat_dag(*p.gen, c->spec, &dag, &p.error, max_cars, c->first);
    LogGPResult result;
    p.ok = p.ok && simulate_loggp(dag, placed, &result, &p.error, limit_ns);
    p.time_ns = result.time_ns;
    if (p.ok && result.exceeded) p.ok = false;
  }
  if (!p.ok && p.error.empty()) p.error = "exceeded: over " + std::to_string(limit_ns) + " ns, the best so far";
}

}  // namespace

Prediction predict_generator(const GeneratorInfo& gen, const CollectiveSpec& spec, const LogGPModel& model,
                             uint64_t max_cars, bool mirror) {
  Candidate c;
  c.prediction.gen = &gen;
  c.spec = spec;
  if (!check_layout(c.spec, &c.prediction.error)) return c.prediction;
  LogGPModel placed = model;
  placed.images_per_node = spec.images_per_node;
  c.first = first_images(gen, c.spec);
  simulate_candidate(&c, placed, max_cars, HUGE_VAL, mirror);
  return c.prediction;
}

double lower_bound_ns(const GeneratorInfo& gen, const CollectiveSpec& spec, const LogGPModel& model) {
  return bound_of(first_images(gen, spec), model);
}

std::vector<Prediction> predict_algorithms(const CollectiveSpec& base, bool commutative,
                                           const LogGPModel& model, const AlgorithmParams& params,
                                           uint64_t max_cars, bool prune) {
  LogGPModel placed = model;
  placed.images_per_node = base.images_per_node;
  std::vector<Candidate> all;
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(base.kind)) {
    if (!commutative && !gen->preserves_order) continue;
    Candidate c;
    c.prediction.gen = gen;
    c.spec = spec_for_generator(*gen, base, params);
    if (!check_layout(c.spec, &c.prediction.error)) c.bound = -1;  // refused: never built
    if (c.bound == 0 && prune) {
      c.first = first_images(*gen, c.spec);
      c.bound = bound_of(c.first, placed);
    }
    all.push_back(std::move(c));
  }
  // Least bound first, so the best time so far is tight early; each
  // candidate runs only while it can still win: strictly below the best
  // time, or equal to it and registered before the best (which wins the
  // tie, as fastest() has it).
  std::vector<size_t> order(all.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (prune) {
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return all[a].bound < all[b].bound; });
  }
  size_t best = all.size();
  for (size_t i : order) {
    Prediction& p = all[i].prediction;
    if (all[i].bound < 0) continue;  // refused
    const double best_ns = best < all.size() ? all[best].prediction.time_ns : HUGE_VAL;
    if (prune && best < all.size() && (all[i].bound > best_ns || (i > best && all[i].bound >= best_ns))) {
      p.error = "pruned: at least " + std::to_string(all[i].bound) + " ns";
      continue;
    }
    simulate_candidate(&all[i], placed, max_cars, prune ? best_ns : HUGE_VAL, prune);
    all[i].first.clear();
    if (p.ok && (best == all.size() || p.time_ns < best_ns || (p.time_ns == best_ns && i < best))) best = i;
  }
  std::vector<Prediction> out;
  for (Candidate& c : all) out.push_back(std::move(c.prediction));
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
