// Starting a call: the algorithm, the schedule cache (a DAG generated,
// transformed, validated and compiled once per key), and starting a
// schedule alone.
#include "engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/arg_check.h"
#include "engine/status.h"
#include "engine/tsan_annotations.h"
#include "graph/aggregate.h"
#include "graph/json.h"
#include "graph/layout.h"
#include "graph/model/predict.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "transports/small_copy.h"
#include "engine/engine_internal.h"

namespace carflow {

bool Engine::choose_algorithm(const CollectiveCall& call, const GeneratorInfo** out,
                              std::string* error) const {
  const GeneratorInfo* gen = call.algorithm;
  if (gen == nullptr && !selection_.forced(call.kind, &gen, error)) return false;
  if (gen == nullptr) {
    // The v forms are chosen by their largest block.
    uint64_t nbytes = call.nbytes;
    for (uint64_t c : call.counts) nbytes = std::max(nbytes, c);
    const uint32_t P = call.team != nullptr ? call.team->size() : images_;
    const uint32_t ppn = call.team != nullptr ? call.team->images_per_node : all_images_per_node_;
    gen = selection_.choose(call.kind, P, nbytes, call.elem_size, call.op.commutative, ppn, call.counts.empty());
  }
  if (is_computational(call.kind) && !call.op.commutative && !gen->preserves_order) {
    *error = "func: a CF_COLL_NONCOMM function needs an order-preserving algorithm; '" +
             gen->name + "' reorders operands";
    return false;
  }
  *out = gen;
  return true;
}

Schedule* Engine::schedule_for(ImageContext& img, const CollectiveCall& call,
                               const GeneratorInfo* gen, std::string* error, bool check_barrier) {
  const Team& team = team_of(img, call);
  // CF_CHECK: every image hears its peers' digests before touching data.
  const bool in_allsync = call.in_allsync || (config_.check && check_barrier);
  const uint64_t segment = gen->segmented ? config_.segment_bytes : 0;
  const bool logp = (gen->params & kUsesLogp) != 0;
  // With a model (CF_MODEL) the logp tree is built for its L, o, g, as the
  // model's own prediction of it was.
  AlgorithmParams logp_params{0, 0, 0, config_.logp_L, config_.logp_o, config_.logp_g};
  if (logp && config_.model != nullptr) {
    LogGPModel model = *config_.model;
    model.images_per_node = team.images_per_node;
    logp_from_model(model, team.size(), &logp_params);
  }
  ScheduleKey key{call.kind,
                  gen,
                  team.size(),
                  team.rank,
                  call.root,
                  call.elem_size,
                  call.nbytes,
                  segment,
                  in_allsync,
                  call.out_allsync,
                  (gen->params & kUsesRadix) ? config_.tree_radix : 0,
                  (gen->params & kUsesWindow) ? config_.exchange_window : 0,
                  logp ? logp_params.logp_L : 0,
                  logp ? logp_params.logp_o : 0,
                  logp ? logp_params.logp_g : 0,
                  call.counts,
                  call.displs,
                  call.perm,
                  call.kind == CollKind::Scan && (call.flags & kExclusiveFlag) != 0,
                  call.in_place,
                  call.src_blksz,
                  call.src_offset,
                  call.dst_blksz,
                  call.dst_offset,
                  (gen->params & kUsesNodes) ? team.images_per_node : 0};
  if (img.last_schedule != nullptr && img.last_key == key) return img.last_schedule;
  auto it = img.cache.find(key);
  if (it != img.cache.end()) {
    img.last_key = key;
    img.last_schedule = it->second.get();
    return img.last_schedule;
  }
  if (config_.fault.kind == FaultSpec::NomemCache && img.fault_nomem == 0) [[unlikely]] {
    img.fault_nomem = 2;  // this image's first miss only: the call after it builds
    *error = "CF_FAULT=nomem:cache: the schedule cache could not hold this call's schedule (no memory)";
    return nullptr;
  }
  CollectiveSpec spec;
  spec.kind = call.kind;
  spec.algorithm = gen->name;
  spec.images = team.size();
  spec.root = call.root;
  spec.nbytes = call.nbytes;
  spec.elem_size = call.elem_size;
  spec.segment_bytes = segment;
  spec.flags = (in_allsync ? kSpecInAllSync : 0) | (call.out_allsync ? kSpecOutAllSync : 0) |
               (key.exclusive ? kExclusiveFlag : 0);
  spec.src_blksz = key.src_blksz;
  spec.src_offset = key.src_offset;
  spec.dst_blksz = key.dst_blksz;
  spec.dst_offset = key.dst_offset;
  spec.images_per_node = key.images_per_node;
  spec.counts = key.counts;
  spec.displs = key.displs;
  spec.perm = key.perm;
  spec.radix = key.radix;
  spec.window = key.window;
  spec.logp_L = key.logp_L;
  spec.logp_o = key.logp_o;
  spec.logp_g = key.logp_g;
  if (!check_layout(spec, error)) return nullptr;
  if (gen->plugin && spec.images <= kPluginCheckImages && !check_plugin(spec, error)) return nullptr;
  LocalDag dag = generate_local(*gen, spec, team.rank);
  if (gen->plugin && dag.error.empty() && !check_hazards(dag, &dag.error)) {
    dag.error = "generator '" + gen->name + "': " + dag.error;
  }
  if (call.in_place) dag = apply_in_place(std::move(dag));
  img.generator_runs.fetch_add(1, std::memory_order_relaxed);
  if (!validate_local(dag, team.size(), error, spec.elem_size)) {
    *error = "generator '" + gen->name + "' produced an invalid DAG: " + *error;
    return nullptr;
  }
  auto schedule = std::make_unique<Schedule>(spec, std::move(dag));
  Schedule* raw = schedule.get();
  img.cache.emplace(key, std::move(schedule));
  img.cache_total += raw->footprint();
  raw->account_to(&img.cache_total);
  if (config_.schedule_cache_bytes != 0) trim_cache(img, raw);
  img.last_key = key;
  img.last_schedule = raw;
  return raw;
}


int Engine::start(ImageContext& img, const CollectiveCall& call, uint64_t* handle,
                  std::string* error, PreparedCall* prepared) {
  PreparedCall once;
  PreparedCall& p = prepared != nullptr ? *prepared : once;
  if (p.gen == nullptr && !choose_algorithm(call, &p.gen, error)) return kErrBadArg;
  if (config_.check && !p.has_digest) {
    p.digest = arg_digest(call, *p.gen);
    p.has_digest = true;
  }
  if (call.aggregate || !team_of(img, call).aggregate.empty()) {
    return join_aggregate(img, call, p, handle, error);
  }
  if (p.schedule == nullptr) p.schedule = schedule_for(img, call, p.gen, error);
  if (p.schedule == nullptr) return no_schedule_status(img);
  *handle = start_alone(img, call, p.schedule, p.digest, team_of(img, call));
  return kOk;
}

int Engine::no_schedule_status(ImageContext& img) {
  if (img.fault_nomem != 2) return kErrBadArg;
  img.fault_nomem = 1;
  return kErrNoMem;
}

uint64_t Engine::start_schedule(ImageContext& img, Schedule* schedule, void* src, void* dst,
                                const ReduceOp& op, Team* team_in) {
  Instance* inst = schedule->acquire();
  // An arena the cache had freed is back (acquire): trim again if that
  // took the cache past its budget.
  if (config_.schedule_cache_bytes != 0 && img.cache_total > config_.schedule_cache_bytes) trim_cache(img, schedule);
  inst->bind(0, src, dst, op);
  return launch(img, inst, team_in != nullptr ? *team_in : img.all, 1);
}
// A registered (plug-in) generator's DAGs for every image of the team,
// checked together once per spec: every image then reaches the same
// verdict, so a defect refuses the call on all of them alike instead of
// leaving some images waiting for messages that never come.
bool Engine::check_plugin(const CollectiveSpec& spec, std::string* error) {
  std::lock_guard<std::mutex> lock(plugin_mutex_);
  for (const auto& [checked, verdict] : plugin_checks_) {
    if (checked == spec) {
      if (!verdict.empty()) *error = verdict;
      return verdict.empty();
    }
  }
  GlobalDag global;
  std::string problem;
  bool ok = generate_global(spec, &global, &problem) && validate_global(global, &problem);
  for (uint32_t i = 0; ok && i < global.images.size(); ++i) ok = check_hazards(global.images[i], &problem);
  // A declared rank symmetry lets the cost model simulate image 0 alone:
  // hold the plug-in to it.
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  const RankSymmetry symmetry = ok && gen != nullptr ? rank_symmetry(*gen, spec) : RankSymmetry::None;
  for (uint32_t i = 1; symmetry != RankSymmetry::None && ok && i < global.images.size(); ++i) {
    std::string why;
    if (!mirrors_image0(global.images[0], global.images[i], symmetry, i, spec.images, &why)) {
      ok = false;
      problem = std::string("it was registered with ") +
                (symmetry == RankSymmetry::Xor ? "CF_GEN_XOR_SYMMETRIC" : "CF_GEN_SHIFT_SYMMETRIC") +
                ", but " + why;
    }
  }
  if (!ok) {
    problem = "generator '" + spec.algorithm + "' (P = " + std::to_string(spec.images) +
              ") failed its whole-team check: " + problem;
  } else {
    problem.clear();
  }
  plugin_checks_.emplace_back(spec, problem);
  if (!problem.empty()) *error = problem;
  return problem.empty();
}

void Engine::trim_cache(ImageContext& img, const Schedule* fresh) {
  uint64_t total = img.cache_total;
  img.cache_bytes.store(total, std::memory_order_relaxed);
  if (total <= config_.schedule_cache_bytes || img.trim_hold > 0) return;
  // Down to three quarters of the budget, so that a workload just past it
  // does not trim on every miss.
  const uint64_t target = config_.schedule_cache_bytes / 4 * 3;
  // First the temp arenas of idle instances, least used schedules first
  // (an arena is the call's data size and costs an allocation to get
  // back), then whole schedules (they cost a build): one list, least used
  // first, for both passes.
  std::vector<std::pair<uint64_t, ScheduleKey>> order;  // (uses, key)
  for (const auto& [key, schedule] : img.cache) {
    if (schedule.get() != fresh) order.emplace_back(schedule->uses, key);
  }
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  for (const auto& [uses, key] : order) {
    if (img.cache_total <= target) break;
    img.cache.find(key)->second->drop_idle_temps();  // lowers img.cache_total through its account
  }
  total = img.cache_total;
  uint64_t dropped = 0;
  for (const auto& [uses, key] : order) {
    if (total <= target) break;
    auto it = img.cache.find(key);
    if (it->second->pinned || it->second->in_use != 0) continue;
    total -= it->second->footprint();
    img.cache.erase(it);
    img.cache_total = total;
    ++dropped;
  }
  for (auto& [key, schedule] : img.cache) schedule->uses = 0;  // "least used" counts from here
  img.cache_bytes.store(total, std::memory_order_relaxed);
  if (dropped == 0) return;
  img.schedules_evicted.fetch_add(dropped, std::memory_order_relaxed);
  img.last_schedule = nullptr;
  ++img.epoch;  // memos may hold a dropped schedule
}

}  // namespace carflow
