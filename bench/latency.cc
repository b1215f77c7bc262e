#include "bench/latency.h"

#include <carflow/carflow.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <mutex>
#include <sstream>
#include <utility>

#include "bench/mixed_sequence.h"
#include "graph/reference.h"

namespace carflow_bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxCalls = 1024;  // --calls limit
constexpr int kDefaultFlags =
    CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

int kind_of(const std::string& coll) {
  carflow::CollKind kind = carflow::CollKind::Barrier;
  carflow::parse_coll_kind(coll, &kind);
  return static_cast<int>(kind);
}

// The spec the reference checks a step against: root 0, bytes per block
// (the whole vector for allreduce, reduce_vec, scan, reduce and
// prefix_reduce), permute by i -> i + 1, float sums for the computational
// kinds (cyclic blocks of 64 elements for reduce and prefix_reduce).
carflow::CollectiveSpec step_spec(const std::string& coll, uint32_t images, uint64_t bytes) {
  carflow::CollectiveSpec spec;
  carflow::parse_coll_kind(coll, &spec.kind);
  spec.images = images;
  spec.nbytes = bytes;
  if (spec.kind == carflow::CollKind::Permute) {
    for (uint32_t i = 0; i < images; ++i) spec.perm.push_back((i + 1) % images);
  }
  if (carflow::is_computational(spec.kind)) spec.elem_size = bytes % 4 == 0 ? 4 : 1;
  if (spec.kind == carflow::CollKind::Reduce || spec.kind == carflow::CollKind::PrefixReduce) {
    spec.src_blksz = spec.dst_blksz = 64;
  }
  return spec;
}

// Float elements hold small integers, so every order of summing is exact and
// the sequential reference is the answer for any algorithm.
void float_sum(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k + 4 <= bytes; k += 4) {
    float a, b;
    std::memcpy(&a, static_cast<const char*>(left) + k, 4);
    std::memcpy(&b, static_cast<const char*>(right) + k, 4);
    a += b;
    std::memcpy(static_cast<char*>(dst) + k, &a, 4);
  }
}

// Fills the inputs of a float computational step with small integers whose
// every partial sum stays below 2^24, so every order of summing is exact.
// An elementwise kind sums one element of each image (images terms); reduce
// and prefix_reduce fold every element of every image into one result, so
// their values shrink as the step grows (4 MiB on 8 images: 0 and 1).
void exact_float_inputs(const carflow::CollectiveSpec& spec, std::vector<std::vector<uint8_t>>* inputs) {
  constexpr uint64_t kExact = uint64_t{1} << 24;
  const bool folds = spec.kind == carflow::CollKind::Reduce || spec.kind == carflow::CollKind::PrefixReduce;
  uint64_t terms = spec.images;
  if (folds) {
    terms = 0;
    for (const auto& in : *inputs) terms += in.size() / 4;
  }
  terms = std::max<uint64_t>(terms, 1);
  const uint64_t largest = std::min<uint64_t>(60, kExact / terms);  // each value <= largest
  // Too many terms even for 0 and 1: a 1 every `stride` elements.
  const uint64_t stride = largest == 0 ? terms / (kExact / 2) + 1 : 1;
  for (uint32_t i = 0; i < inputs->size(); ++i) {
    auto& in = (*inputs)[i];
    for (size_t k = 0; k + 4 <= in.size(); k += 4) {
      const uint64_t n = i + k / 4;
      const float v = largest > 0 ? static_cast<float>(n % (largest + 1)) : (n % stride == 0 ? 1.0f : 0.0f);
      std::memcpy(&in[k], &v, 4);
    }
  }
}

uint32_t iterations_for(uint64_t bytes, uint32_t requested) {
  if (requested > 0) return requested;
  const uint64_t budget = 64ull << 20;  // bytes moved per step, roughly
  return static_cast<uint32_t>(std::clamp<uint64_t>(budget / std::max<uint64_t>(bytes, 4096), 10, 5000));
}

// Untimed calls before each step's timed loop: as many as the loop, at
// most 300, at least a tenth of it and 2; ten times that before a run's
// first step. A tenth alone left the first size of a sweep carrying the
// processes' first wake-ups after start: on 4 processes sharing 2 cores,
// 30 warm-up calls then 300 timed 8-byte broadcasts read 0.6-3.6 us a
// call, the same step after 300 warm-up calls 0.2-0.5 (bench/osu_mpi.c
// warms up alike).
uint32_t warmup_calls(uint32_t iters, bool first_step) {
  const uint32_t calls = std::max({2u, iters / 10, std::min(iters, 300u)});
  return first_step ? 10 * calls : calls;
}

struct Step;
// Starts one call of the step's kind on dst / src with flags: its handle
// (INVALID on an error, or for an aggregate's member). One small function
// per kind, chosen once per step, so the timed loop holds no switch.
using Starter = cf_coll_handle_t (*)(const Step& step, void* dst, void* src, int flags);

// One image's view of one size step.
struct Step;
// Runs one iteration of a step (run_once below, instantiated per kind).
using RunOnce = int (*)(const Step& step, cf_image_t me, uint32_t calls, void* const* src, void* const* dst,
                        std::string* graph_path);
struct Step {
  const LatencyOptions* options;
  uint64_t bytes;
  uint32_t iters;
  int flags;
  carflow::CollectiveSpec spec;
  std::vector<std::vector<uint8_t>> inputs;     // per image
  std::vector<std::vector<uint8_t>> expected;   // per image
  RunOnce run = nullptr;         // the step's kind's run_once
  std::vector<cf_image_t> perm;  // permute's, as the C API takes it
  int func = 0;                  // the reduction of the computational kinds
};

// Starts one call of kind K on dst / src with flags: its handle (INVALID on
// an error, or for an aggregate's member).
template <carflow::CollKind K>
cf_coll_handle_t start_call(const Step& s, void* d, void* src, int f) {
  using enum carflow::CollKind;
  const size_t es = std::max<size_t>(1, s.spec.elem_size);
  const size_t n = s.bytes / es;
  if constexpr (K == Broadcast) return cf_coll_broadcast_nb(CF_TEAM_ALL, d, 0, src, s.bytes, f);
  if constexpr (K == Scatter) return cf_coll_scatter_nb(CF_TEAM_ALL, d, 0, src, s.bytes, f);
  if constexpr (K == Gather) return cf_coll_gather_nb(CF_TEAM_ALL, 0, d, src, s.bytes, f);
  if constexpr (K == GatherAll) return cf_coll_gather_all_nb(CF_TEAM_ALL, d, src, s.bytes, f);
  if constexpr (K == Exchange) return cf_coll_exchange_nb(CF_TEAM_ALL, d, src, s.bytes, f);
  if constexpr (K == Permute) return cf_coll_permute_nb(CF_TEAM_ALL, d, src, s.bytes, s.perm.data(), f);
  if constexpr (K == Barrier) return cf_coll_barrier_nb(CF_TEAM_ALL, f);
  if constexpr (K == Allreduce) return cf_coll_allreduce_nb(CF_TEAM_ALL, d, src, es, n, s.func, 0, f);
  if constexpr (K == ReduceVec) return cf_coll_reduce_vec_nb(CF_TEAM_ALL, 0, d, src, es, n, s.func, 0, f);
  if constexpr (K == Scan) return cf_coll_scan_nb(CF_TEAM_ALL, d, src, es, n, s.func, 0, f);
  if constexpr (K == ReduceScatter) return cf_coll_reduce_scatter_nb(CF_TEAM_ALL, d, src, es, n, s.func, 0, f);
  if constexpr (K == Reduce) {
    return cf_coll_reduce_nb(CF_TEAM_ALL, 0, d, src, s.spec.src_blksz, 0, es, n, s.func, 0, f);
  }
  if constexpr (K == PrefixReduce) {
    return cf_coll_prefix_reduce_nb(CF_TEAM_ALL, d, s.spec.dst_blksz, 0, src, s.spec.src_blksz, 0, es, n,
                                    s.func, 0, f);
  }
}

// Runs one iteration of the step: `calls` calls of kind K (buffers src[k],
// dst[k]), as one aggregate or as separate calls synced together; returns
// the status. A template per kind, chosen once per step, so the timed loop
// adds per call only the entry point's own call and a status check of an
// INVALID handle (every aggregate member's).
template <carflow::CollKind K>
int run_once(const Step& step, cf_image_t me, uint32_t calls, void* const* src, void* const* dst,
             std::string* graph_path) {
  cf_coll_handle_t handles[kMaxCalls];
  const uint32_t last = calls - 1;
  const int member = step.options->aggregate ? step.flags | CF_COLL_AGGREGATE : step.flags;
  for (uint32_t k = 0; k < last; ++k) {
    handles[k] = start_call<K>(step, dst[k], src[k], member);
    if (handles[k] == CF_COLL_INVALID_HANDLE && cf_last_status() != CF_OK) return cf_last_status();
  }
  handles[last] = start_call<K>(step, dst[last], src[last], step.flags);
  if (handles[last] == CF_COLL_INVALID_HANDLE && cf_last_status() != CF_OK) return cf_last_status();
  if (graph_path != nullptr && me == 0) cf_graph_dump_json(handles[last], graph_path->c_str());
  // An aggregate has one handle, its last call's (the members' are
  // INVALID): it is synced alone, as one call is.
  if (step.options->aggregate || calls == 1) return cf_coll_wait_sync(handles[last]);
  return cf_coll_wait_sync_all(handles, calls);
}

// run_once of `kind`.
template <int... kKinds>
RunOnce run_once_for(carflow::CollKind kind, std::integer_sequence<int, kKinds...>) {
  RunOnce out = nullptr;
  ((kind == static_cast<carflow::CollKind>(kKinds) ? (out = &run_once<static_cast<carflow::CollKind>(kKinds)>)
                                                    : out),
   ...);
  return out;
}
RunOnce run_once_for(carflow::CollKind kind) {
  return run_once_for(kind, std::make_integer_sequence<int, carflow::kCollKinds>{});
}

// What the images of one cf_run_images report: each one's time and
// whether its outputs were right; the first error.
struct ImageRuns {
  explicit ImageRuns(uint32_t images) : per_image_us(images, 0), ok(images, 0) {}
  std::vector<double> per_image_us;
  std::vector<char> ok;
  std::atomic<int> failed{0};
  std::string first_error;
  std::mutex mutex;
  // Image slot `slot` ends with `status` and outputs `right` or not.
  void finish(uint32_t slot, int status, bool right) {
    ok[slot] = status == CF_OK && right;
    if (status != CF_OK) {
      std::lock_guard<std::mutex> lock(mutex);
      first_error = cf_last_error();
      failed = 1;
    }
    cf_coll_barrier(CF_TEAM_ALL, kDefaultFlags);
  }
  // body(image) on every local image; false with *error when one failed.
  template <typename Body>
  bool run(uint32_t images, Body& body, std::string* error) {
    auto trampoline = [](cf_image_t image, void* arg) { (*static_cast<Body*>(arg))(image); };
    if (cf_run_images(images, nullptr, 0, trampoline, &body) != CF_OK || failed) {
      *error = first_error.empty() ? cf_last_error() : first_error;
      return false;
    }
    return true;
  }
  // The result's times (mean, minimum, maximum over the images) and verdict.
  void fill(LatencyResult* r) const {
    r->min_us = *std::min_element(per_image_us.begin(), per_image_us.end());
    r->max_us = *std::max_element(per_image_us.begin(), per_image_us.end());
    for (double v : per_image_us) r->avg_us += v / per_image_us.size();
    r->verified = std::all_of(ok.begin(), ok.end(), [](char c) { return c != 0; });
  }
};

// A step of `coll` and `bytes` over `total` images, its inputs and the
// sequential reference's outputs made.
Step make_step(const LatencyOptions& options, const std::string& coll, uint32_t total, uint64_t bytes) {
  Step step{&options, bytes, iterations_for(bytes, options.iters),
            options.flags != 0 ? options.flags : kDefaultFlags, {}, {}, {}, nullptr, {}, 0};
  step.spec = step_spec(coll, total, bytes);
  step.run = run_once_for(step.spec.kind);
  step.perm.assign(step.spec.perm.begin(), step.spec.perm.end());
  step.func = step.spec.elem_size == 4 ? CF_BUILTIN(CF_OP_SUM, CF_DT_FLOAT) : CF_BUILTIN(CF_OP_SUM, CF_DT_UINT8);
  step.inputs = carflow::reference::inputs(step.spec);
  if (carflow::is_computational(step.spec.kind)) {
    if (step.spec.elem_size == 4) exact_float_inputs(step.spec, &step.inputs);
    step.expected = carflow::reference::expected_reduction(
        step.spec, step.inputs, step.spec.elem_size == 4 ? &float_sum : &carflow::reference::byte_sum);
  } else {
    step.expected = carflow::reference::expected(step.spec, step.inputs);
  }
  return step;
}

// coll "mixed": every distinct kind and size of the sequence is one step,
// made (inputs and references) before the clock starts; each image times
// the passes over the sequence, then runs every distinct step once more on
// cleared outputs and checks them.
bool run_mixed(const LatencyOptions& options, std::vector<LatencyResult>* results, std::string* error) {
  if (options.mixed_ops == 0) {
    *error = "--ops: at least 1";
    return false;
  }
  if (options.fresh_src) {
    *error = "--fresh-src: not with --coll mixed (its passes are timed whole)";
    return false;
  }
  const uint32_t total = options.images * cf_nodes();
  const uint32_t base = options.images * cf_mynode();
  const uint32_t passes = options.iters > 0 ? options.iters : 10;
  std::vector<Step> steps;
  std::vector<std::pair<int, uint64_t>> made;  // (kind index, bytes) of steps[i]
  std::vector<uint32_t> sequence;
  uint64_t state = options.mixed_seed, total_bytes = 0;
  for (uint32_t i = 0; i < options.mixed_ops; ++i) {
    int kind = 0;
    uint64_t bytes = 0;
    mixed_op(&state, &kind, &bytes);
    total_bytes += bytes;
    const auto key = std::make_pair(kind, bytes);
    auto at = std::find(made.begin(), made.end(), key);
    if (at == made.end()) {
      made.push_back(key);
      steps.push_back(make_step(options, kMixedKindNames[kind], total, bytes));
      at = made.end() - 1;
    }
    sequence.push_back(static_cast<uint32_t>(at - made.begin()));
  }
  ImageRuns runs(options.images);
  auto body = [&](cf_image_t me) {
    std::vector<std::vector<uint8_t>> src, dst;
    std::vector<void*> src_at, dst_at;
    for (const Step& step : steps) {
      src.push_back(step.inputs[me]);
      dst.push_back(carflow::reference::blank_outputs(step.spec)[me]);
      src.back().reserve(1);  // no NULL buffer pointer
      dst.back().reserve(1);
    }
    for (size_t k = 0; k < steps.size(); ++k) {
      src_at.push_back(src[k].data());
      dst_at.push_back(dst[k].data());
    }
    int status = CF_OK;
    auto pass = [&] {
      for (uint32_t k : sequence) {
        if (status != CF_OK) return;
        status = steps[k].run(steps[k], me, 1, &src_at[k], &dst_at[k], nullptr);
      }
    };
    pass();
    cf_coll_barrier(CF_TEAM_ALL, kDefaultFlags);
    const auto t0 = Clock::now();
    for (uint32_t r = 0; r < passes; ++r) pass();
    const auto t1 = Clock::now();
    runs.per_image_us[me - base] = std::chrono::duration<double, std::micro>(t1 - t0).count() / passes;
    bool right = status == CF_OK;
    for (size_t k = 0; k < steps.size() && status == CF_OK; ++k) {
      dst[k] = carflow::reference::blank_outputs(steps[k].spec)[me];
      dst[k].reserve(1);
      dst_at[k] = dst[k].data();
      status = steps[k].run(steps[k], me, 1, &src_at[k], &dst_at[k], nullptr);
      right = right && (steps[k].spec.kind == carflow::CollKind::Barrier || dst[k] == steps[k].expected[me]);
    }
    runs.finish(me - base, status, right);
  };
  if (!runs.run(options.images, body, error)) return false;
  LatencyResult r;
  r.coll = "mixed";
  r.images = total;
  r.nodes = cf_nodes();
  r.algo = "mixed";
  r.iters = passes;
  runs.fill(&r);
  r.ops = options.mixed_ops;
  r.seed = options.mixed_seed;
  r.total_bytes = total_bytes;
  results->push_back(r);
  return true;
}

}  // namespace

bool run_latency(const LatencyOptions& options, std::vector<LatencyResult>* results,
                 std::string* error) {
  if (options.coll == "mixed") return run_mixed(options, results, error);
  carflow::CollKind parsed;
  if (!carflow::parse_coll_kind(options.coll, &parsed)) {
    *error = "--coll: '" + options.coll +
             "' is not one of broadcast, barrier, allreduce, scatter, gather, gather_all, exchange, "
             "permute, reduce_vec, scan, reduce_scatter, reduce, prefix_reduce";
    return false;
  }
  if (options.images == 0) {
    *error = "--images: must be at least 1";
    return false;
  }
  if (options.calls == 0 || options.calls > kMaxCalls) {
    *error = "--calls: must be 1.." + std::to_string(kMaxCalls);
    return false;
  }
  std::vector<uint64_t> sizes = options.coll == "barrier" ? std::vector<uint64_t>{0} : options.sizes;
  if (sizes.empty()) {
    *error = "--sizes: at least one size is required";
    return false;
  }
  // Under cfrun every node (process) runs options.images images: the
  // collective spans all of them, and this node reports its own.
  const uint32_t total = options.images * cf_nodes();
  const uint32_t base = options.images * cf_mynode();
  for (const uint64_t& bytes : sizes) {
    Step step = make_step(options, options.coll, total, bytes);
    ImageRuns runs(options.images);
    std::string algo, graph_file;
    if (!options.graph_dir.empty()) {
      graph_file = options.graph_dir + "/" + options.coll + "_" + format_bytes(bytes) + ".json";
    }
    auto body = [&](cf_image_t me) {
      if (!options.algo.empty() && cf_coll_set_algorithm(kind_of(options.coll), options.algo.c_str())) {
        std::lock_guard<std::mutex> lock(runs.mutex);
        runs.first_error = cf_last_error();
        runs.failed = 1;
        return;
      }
      // At least one byte each, so no buffer pointer is NULL.
      std::vector<std::vector<uint8_t>> src(options.calls, step.inputs[me]);
      std::vector<std::vector<uint8_t>> dst(options.calls, carflow::reference::blank_outputs(step.spec)[me]);
      std::vector<void*> src_at(options.calls), dst_at(options.calls);
      for (uint32_t k = 0; k < options.calls; ++k) {
        src[k].reserve(1);
        dst[k].reserve(1);
        src_at[k] = src[k].data();
        dst_at[k] = dst[k].data();
      }
      if (me == base) {
        const char* a = cf_coll_algorithm(kind_of(options.coll), bytes, std::max(1u, step.spec.elem_size));
        algo = a != nullptr ? a : "?";
      }
      const int warmup = static_cast<int>(warmup_calls(step.iters, &bytes == &sizes.front()));
      int status = CF_OK;
      for (int i = 0; i < warmup && status == CF_OK; ++i) {
        status = step.run(step, me, options.calls, src_at.data(), dst_at.data(),
                          i == 0 && !graph_file.empty() ? &graph_file : nullptr);
      }
      cf_coll_barrier(CF_TEAM_ALL, kDefaultFlags);
      double timed_us = 0;
      if (options.fresh_src) {
        const std::vector<uint8_t>& input = step.inputs[me];
        for (uint32_t i = 0; i < step.iters && status == CF_OK; ++i) {
          for (uint32_t k = 0; k < options.calls; ++k) std::memcpy(src_at[k], input.data(), input.size());
          cf_coll_barrier(CF_TEAM_ALL, kDefaultFlags);
          const auto t0 = Clock::now();
          status = step.run(step, me, options.calls, src_at.data(), dst_at.data(), nullptr);
          timed_us += std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
        }
      } else {
        const auto t0 = Clock::now();
        for (uint32_t i = 0; i < step.iters && status == CF_OK; ++i) {
          status = step.run(step, me, options.calls, src_at.data(), dst_at.data(), nullptr);
        }
        timed_us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
      }
      runs.per_image_us[me - base] = timed_us / step.iters;
      bool right = true;
      for (const auto& d : dst) right = right && d == step.expected[me];
      runs.finish(me - base, status, step.spec.kind == carflow::CollKind::Barrier || right);
    };
    if (!runs.run(options.images, body, error)) return false;
    LatencyResult r;
    r.coll = options.coll;
    r.bytes = bytes;
    r.images = total;
    r.nodes = cf_nodes();
    r.algo = algo;
    r.iters = step.iters;
    r.calls = options.calls;
    r.aggregate = options.aggregate;
    r.fresh_src = options.fresh_src;
    runs.fill(&r);
    r.graph_file = graph_file;
    results->push_back(r);
  }
  return true;
}

std::string to_json_line(const LatencyResult& r) {
  std::ostringstream out;
  out.precision(4);
  out << std::fixed << "{\"coll\":\"" << r.coll << "\",\"bytes\":" << r.bytes
      << ",\"images\":" << r.images << ",\"nodes\":" << r.nodes << ",\"algo\":\"" << r.algo
      << "\",\"iters\":" << r.iters << ",\"avg_us\":" << r.avg_us << ",\"min_us\":" << r.min_us
      << ",\"max_us\":" << r.max_us << ",\"verified\":" << (r.verified ? "true" : "false");
  if (r.calls > 1) out << ",\"calls\":" << r.calls << ",\"aggregate\":" << (r.aggregate ? "true" : "false");
  if (r.fresh_src) out << ",\"fresh_src\":true";
  if (r.ops > 0) out << ",\"ops\":" << r.ops << ",\"seed\":" << r.seed << ",\"total_bytes\":" << r.total_bytes;
  if (r.copy_us >= 0) out << ",\"copy_bytes\":" << r.copy_bytes << ",\"copy_us\":" << r.copy_us;
  out << "}";
  return out.str();
}

std::string format_bytes(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + "M";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "K";
  return std::to_string(bytes);
}

namespace {
bool parse_one(const std::string& text, uint64_t* out) {
  if (text.empty()) return false;
  size_t pos = 0;
  uint64_t v = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    if (v > (uint64_t{1} << 40)) return false;
    v = v * 10 + (text[pos++] - '0');
  }
  if (pos == 0) return false;
  const std::string suffix = text.substr(pos);
  if (suffix == "K" || suffix == "k") v <<= 10;
  else if (suffix == "M" || suffix == "m") v <<= 20;
  else if (suffix == "G" || suffix == "g") v <<= 30;
  else if (!suffix.empty()) return false;
  *out = v;
  return v > 0 && v <= (uint64_t{1} << 32);
}
}  // namespace

bool parse_sizes(const std::string& text, std::vector<uint64_t>* out, std::string* error) {
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    const size_t colon = item.find(':');
    uint64_t lo = 0, hi = 0;
    const bool ok = colon == std::string::npos
                        ? parse_one(item, &lo) && (hi = lo, true)
                        : parse_one(item.substr(0, colon), &lo) && parse_one(item.substr(colon + 1), &hi);
    if (!ok || lo > hi) {
      *error = "--sizes: '" + item + "' is not a size (1..4G, suffix K/M/G) or range LO:HI";
      return false;
    }
    for (uint64_t v = lo; v <= hi; v *= 2) out->push_back(v);
  }
  if (out->empty()) {
    *error = "--sizes: empty";
    return false;
  }
  return true;
}

uint64_t received_bytes(const std::string& coll, uint64_t bytes, uint32_t images) {
  const uint64_t others = images > 0 ? images - 1 : 0;
  if (coll == "barrier" || images < 2) return 0;
  if (coll == "gather" || coll == "gather_all" || coll == "exchange" || coll == "reduce_scatter") return others * bytes;
  if (coll == "allreduce") return 2 * others * bytes / images;
  return bytes;
}

double memcpy_us(uint64_t bytes) {
  // Warm buffers, mean of repeated copies: the same conditions as the
  // benchmark loop it is compared with.
  std::vector<uint8_t> a(bytes, 1), b(bytes, 0);
  const int reps = static_cast<int>(std::clamp<uint64_t>((256ull << 20) / bytes, 5, 10000));
  for (int rep = 0; rep < 2; ++rep) std::memcpy(b.data(), a.data(), bytes);
  const auto t0 = Clock::now();
  for (int rep = 0; rep < reps; ++rep) {
    std::memcpy(b.data(), a.data(), bytes);
    a[rep % bytes] = b[(rep + 1) % bytes];  // keep the copies observable
  }
  const auto t1 = Clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / reps;
}

}  // namespace carflow_bench
