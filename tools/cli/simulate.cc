// carflow simulate: a collective's predicted time under the LogGP model
// (graph/model/loggp.h), one algorithm or every algorithm of the kind.
// Image DAGs are generated a chunk at a time into a FlatDag, never as a
// whole GlobalDag, so P reaches 2^20 for the log-depth algorithms.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "graph/model/loggp.h"
#include "graph/transforms.h"
#include "tools/cli/cli.h"

namespace carflow::cli {
namespace {

constexpr uint64_t kMaxSimImages = uint64_t{1} << 20;
// Generating P image DAGs costs P generator calls; a generator that builds
// the whole tree in every call (logp) is quadratic, so refuse what would
// take longer than this.
constexpr double kMaxGenerateSeconds = 600;
// Critical paths longer than this print their two ends only.
constexpr size_t kPathEnds = 6;
// --calls: how many back-to-back calls one DAG may chain.
constexpr uint64_t kMaxCalls = 100000;

std::string number(double v) {
  char buf[32];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
      continue;
    }
    out += c;
  }
  return out + "\"";
}

struct Outcome {
  std::string algorithm;
  carflow::CollectiveSpec spec;
  bool ok = false;
  std::string error;  // why it was not simulated
  carflow::LogGPResult result;
  double build_s = 0, simulate_s = 0;
  uint32_t calls = 1;  // back-to-back calls simulated (--calls)
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The steps of the critical path as text, its middle left out when long.
std::vector<std::string> path_text(const std::vector<carflow::PathStep>& path) {
  std::vector<std::string> out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path.size() > 2 * kPathEnds && i == kPathEnds) {
      out.push_back("... " + std::to_string(path.size() - 2 * kPathEnds) + " more ...");
      i = path.size() - kPathEnds;
    }
    const carflow::PathStep& s = path[i];
    out.push_back(std::to_string(s.image) + "/" + std::to_string(s.car) + " " +
                  carflow::car_kind_name(s.kind) + " " + number(s.start_ns) + "-" + number(s.done_ns) +
                  " ns (after " + s.waited_for + ")");
  }
  return out;
}

// The spec the engine would use for `algorithm`, with the logp generator's
// tree built for the model's own L, o, g.
bool spec_for(const Args& args, const carflow::Config& config, const std::string& algorithm,
              const carflow::LogGPModel& model, carflow::CollectiveSpec* spec, std::string* error) {
  Args with = args;
  if (!algorithm.empty()) with["algo"] = algorithm;
  if (!spec_from_args(with, config, kMaxSimImages, true, spec, error)) return false;
  if (!carflow::check_layout(*spec, error)) return *error = as_options(*error), false;
  const carflow::GeneratorInfo* gen = carflow::GeneratorRegistry::instance().find(spec->kind, spec->algorithm);
  if (gen->params & carflow::kUsesLogp) {
    auto ns = [](double v) { return static_cast<uint32_t>(std::min(std::llround(v), 1000000000ll)); };
    spec->logp_L = ns(model.inter.L), spec->logp_o = ns(model.inter.o), spec->logp_g = ns(model.inter.g);
  }
  return true;
}

// Image DAGs are generated and packed (FlatImages) on every core, a chunk
// at a time, while this thread appends the finished chunks in rank order
// (generators are pure functions of the spec and the image, as the
// engine's image threads rely on). A chunk holds about kChunkCars CARs:
// each image's LocalDag is packed while it is still in cache, and the
// chunks in flight stay small.
constexpr uint64_t kChunkCars = uint64_t{1} << 15;
constexpr uint64_t kMaxChunkImages = 4096;

class ChunkPipeline {
 public:
  ChunkPipeline(const carflow::GeneratorInfo& gen, const carflow::CollectiveSpec& spec, uint64_t estimate)
      : gen_(gen), spec_(spec), workers_(std::max(1u, std::thread::hardware_concurrency())) {
    const uint64_t per_image = std::max<uint64_t>(1, estimate / spec.images);
    chunk_images_ = static_cast<uint32_t>(std::clamp<uint64_t>(kChunkCars / per_image, 1, kMaxChunkImages));
    chunks_ = (spec.images + chunk_images_ - 1) / chunk_images_;
    slots_.resize(2 * workers_ + 2);
    ready_.assign(slots_.size(), false);
  }

  bool run(carflow::FlatDagBuilder* builder, std::string* error) {
    std::vector<std::thread> threads;
    for (unsigned w = 0; w < workers_; ++w) threads.emplace_back([this] { work(); });
    bool ok = true;
    for (uint32_t j = 0; j < chunks_ && ok; ++j) {
      const size_t slot = j % slots_.size();
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return ready_[slot]; });
      }
      ok = builder->append(slots_[slot], error);
      std::lock_guard<std::mutex> lock(mu_);
      ready_[slot] = false;
      ++appended_;
      stop_ = !ok;
      cv_.notify_all();
    }
    for (std::thread& t : threads) t.join();
    return ok;
  }

 private:
  // Claims the next chunk whose slot has been appended, packs it, marks it ready.
  void work() {
    for (;;) {
      uint32_t j;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || next_ >= chunks_ || next_ < appended_ + slots_.size(); });
        if (stop_ || next_ >= chunks_) return;
        j = next_++;
      }
      carflow::FlatImages& chunk = slots_[j % slots_.size()];
      const uint32_t first = j * chunk_images_, last = std::min(spec_.images, first + chunk_images_);
      chunk.restart(first);
      for (uint32_t i = first; i < last; ++i) {
        if (!chunk.pack(carflow::generate_local(gen_, spec_, i), spec_.images, carflow::kMaxFlatCars,
                        &chunk.error)) {
          break;
        }
      }
      std::lock_guard<std::mutex> lock(mu_);
      ready_[j % slots_.size()] = true;
      cv_.notify_all();
    }
  }

  const carflow::GeneratorInfo& gen_;
  const carflow::CollectiveSpec& spec_;
  const unsigned workers_;
  uint32_t chunk_images_ = 1, chunks_ = 0;
  std::vector<carflow::FlatImages> slots_;  // chunk j packs into slot j % size
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> ready_;  // by slot, under mu_
  uint32_t next_ = 0, appended_ = 0;
  bool stop_ = false;
};

bool build_parallel(const carflow::GeneratorInfo& gen, const carflow::CollectiveSpec& spec, uint64_t estimate,
                    carflow::FlatDag* out, std::string* error) {
  carflow::FlatDagBuilder builder(spec.images);
  builder.reserve(estimate);
  ChunkPipeline pipeline(gen, spec, estimate);
  return pipeline.run(&builder, error) && builder.finish(out, error);
}

// `calls` back-to-back calls of `gen` as one generator (repeat_calls): each
// image's DAG is the generator's, sync mode included, chained `calls` times.
// Run with spec.flags 0, so generate_local adds no second sync mode.
carflow::GeneratorInfo repeated(const carflow::GeneratorInfo& gen, const carflow::CollectiveSpec& spec,
                                uint32_t calls) {
  carflow::GeneratorInfo out = gen;
  out.fn = nullptr;
  out.closure = [&gen, spec, calls](const carflow::CollectiveSpec&, uint32_t image) {
    return carflow::repeat_calls(carflow::generate_local(gen, spec, image), calls);
  };
  return out;
}

Outcome run_one(const carflow::GeneratorInfo& one_call, const carflow::CollectiveSpec& one_spec,
                const carflow::LogGPModel& model, uint32_t calls) {
  Outcome out;
  out.algorithm = one_call.name;
  out.calls = calls;
  carflow::CollectiveSpec spec = one_spec;
  const carflow::GeneratorInfo gen = calls > 1 ? repeated(one_call, one_spec, calls) : one_call;
  if (calls > 1) spec.flags = 0;
  auto t0 = std::chrono::steady_clock::now();
  uint64_t estimate = 0;
  if (!carflow::estimate_flat_cars(gen, spec, carflow::kMaxFlatCars, &estimate, &out.error)) {
    if (calls > 1) out.error += " (" + std::to_string(calls) + " back-to-back calls, --calls)";
    return out;
  }
  double per_image = seconds_since(t0);
  if (per_image * spec.images > kMaxGenerateSeconds && spec.images > 2) {
    // The first image may have built what every image shares (logp's tree
    // is kept for the next image): time a second one.
    t0 = std::chrono::steady_clock::now();
    (void)carflow::generate_local(gen, spec, (spec.root + 2) % spec.images);
    per_image = seconds_since(t0);
  }
  if (per_image * spec.images > kMaxGenerateSeconds) {
    out.error = "--images: generating " + gen.name + "'s " + std::to_string(spec.images) +
                " image DAGs would take about " + number(std::round(per_image * spec.images)) + " s (" +
                number(std::round(per_image * 1e6)) + " us per image), over the limit of " +
                number(kMaxGenerateSeconds) + " s";
    return out;
  }
  carflow::FlatDag dag;
  t0 = std::chrono::steady_clock::now();
  if (!build_parallel(gen, spec, estimate, &dag, &out.error)) return out;
  out.build_s = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  if (!carflow::simulate_loggp(dag, model, &out.result, &out.error)) return out;
  out.simulate_s = seconds_since(t0);
  out.ok = true;
  return out;
}

void print_json(const Outcome& o, size_t rank) {
  const carflow::CollectiveSpec& spec = o.spec;
  std::string line = "{\"coll\": " + json_string(carflow::coll_kind_name(spec.kind)) +
                     ", \"algorithm\": " + json_string(o.algorithm) +
                     ", \"images\": " + std::to_string(spec.images) + ", \"bytes\": " + std::to_string(spec.nbytes);
  if (!o.ok) {
    std::printf("%s, \"error\": %s}\n", line.c_str(), json_string(o.error).c_str());
    return;
  }
  const carflow::LogGPResult& r = o.result;
  line += ", \"rank\": " + std::to_string(rank) + ", \"time_ns\": " + number(r.time_ns) +
          ", \"calls\": " + std::to_string(o.calls) + ", \"per_call_ns\": " + number(r.time_ns / o.calls) + ", \"messages\": " + std::to_string(r.messages) +
          ", \"message_bytes\": " + std::to_string(r.message_bytes) + ", \"cars\": " + std::to_string(r.cars) +
          ", \"last_image\": " + std::to_string(r.last_image) +
          ", \"critical_path_cars\": " + std::to_string(r.critical_path.size()) + ", \"critical_path\": [";
  const std::vector<std::string> path = path_text(r.critical_path);
  for (size_t i = 0; i < path.size(); ++i) line += (i ? ", " : "") + json_string(path[i]);
  line += "], \"build_s\": " + number(o.build_s) + ", \"simulate_s\": " + number(o.simulate_s) + "}";
  std::printf("%s\n", line.c_str());
}

void print_human(const carflow::CollectiveSpec& spec, const carflow::LogGPModel& model,
                 const std::vector<Outcome>& outcomes) {
  const carflow::LogGPParams& m = model.inter;
  std::printf("%s on %u images, %llu bytes; LogGP L=%s o=%s g=%s G=%s O=%s S=%s gamma=%s beta=%s%s\n",
              carflow::coll_kind_name(spec.kind), spec.images, static_cast<unsigned long long>(spec.nbytes),
              number(m.L).c_str(), number(m.o).c_str(), number(m.g).c_str(), number(m.G).c_str(),
              number(m.O).c_str(), number(m.S).c_str(), number(m.gamma).c_str(), number(m.beta).c_str(),
              model.images_per_node ? (", " + std::to_string(model.images_per_node) + " images per node").c_str()
                                    : "");
  const uint32_t calls = outcomes.empty() ? 1 : outcomes[0].calls;
  if (calls > 1) {
    std::printf("%u back-to-back calls (each image starts a call once its previous one is done); "
                "time per call = time / %u\n", calls, calls);
  }
  std::printf("  %-20s %14s %12s %14s %12s%s\n", "algorithm", "time (ns)", "messages", "message bytes", "CARs",
              calls > 1 ? "  per call (ns)" : "");
  for (const Outcome& o : outcomes) {
    if (!o.ok) {
      std::printf("  %-20s not simulated: %s\n", o.algorithm.c_str(), o.error.c_str());
      continue;
    }
    const carflow::LogGPResult& r = o.result;
    std::printf("  %-20s %14s %12llu %14llu %12llu%s\n", o.algorithm.c_str(), number(r.time_ns).c_str(),
                static_cast<unsigned long long>(r.messages), static_cast<unsigned long long>(r.message_bytes),
                static_cast<unsigned long long>(r.cars),
                calls > 1 ? ("  " + number(r.time_ns / calls)).c_str() : "");
  }
  for (const Outcome& o : outcomes) {
    if (!o.ok) continue;
    std::printf("critical path of %s (%zu CARs, image/CAR kind start-done):\n", o.algorithm.c_str(),
                o.result.critical_path.size());
    for (const std::string& step : path_text(o.result.critical_path)) std::printf("  %s\n", step.c_str());
    break;  // the fastest only
  }
}

}  // namespace

// The model: defaults, then --model-file, then --model on top.
bool model_from_args(const Args& args, carflow::LogGPModel* model, std::string* error) {
  auto file = args.find("model-file");
  if (file != args.end() && !carflow::load_model_file(file->second, model, error)) {
    return *error = "--model-file: " + *error, false;
  }
  auto text = args.find("model");
  if (text != args.end() && !carflow::parse_model_string(text->second, model, error)) {
    return *error = "--model: " + *error, false;
  }
  return true;
}

int cmd_simulate(const Args& args) {
  std::string error;
  carflow::Config config;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  carflow::LogGPModel model;
  uint64_t ppn = 0, calls = 1;
  if (!model_from_args(args, &model, &error) ||
      !get_uint(args, "images-per-node", 0, 0, kMaxSimImages, &ppn, &error) ||
      !get_uint(args, "calls", 1, 1, kMaxCalls, &calls, &error)) {
    return fail(error);
  }
  model.images_per_node = static_cast<uint32_t>(ppn);
  auto algo = args.find("algo");
  const bool all = algo != args.end() && algo->second == "all";
  carflow::CollectiveSpec spec;
  if (!spec_for(args, config, all ? "" : (algo != args.end() ? algo->second : ""), model, &spec, &error)) {
    if (!all) return fail(error);
    // --algo all: the first check that fails is about the collective
    // (an algorithm "all" is what spec_from_args cannot know).
    Args without = args;
    without.erase("algo");
    if (!spec_for(without, config, "", model, &spec, &error)) return fail(error);
  }
  std::vector<const carflow::GeneratorInfo*> gens;
  if (all) {
    gens = carflow::GeneratorRegistry::instance().list(spec.kind);
  } else {
    gens.push_back(carflow::GeneratorRegistry::instance().find(spec.kind, spec.algorithm));
  }
  std::vector<Outcome> outcomes;
  for (const carflow::GeneratorInfo* gen : gens) {
    carflow::CollectiveSpec one = spec;
    Outcome o;
    if (spec_for(args, config, gen->name, model, &one, &o.error)) {
      o = run_one(*gen, one, model, static_cast<uint32_t>(calls));
    }
    o.algorithm = gen->name;
    o.calls = static_cast<uint32_t>(calls);
    o.spec = one;
    outcomes.push_back(std::move(o));
  }
  if (!all && !outcomes[0].ok) return fail(outcomes[0].algorithm + ": " + outcomes[0].error);
  std::stable_sort(outcomes.begin(), outcomes.end(), [](const Outcome& a, const Outcome& b) {
    return a.ok != b.ok ? a.ok : a.ok && a.result.time_ns < b.result.time_ns;
  });
  if (args.count("json")) {
    for (size_t i = 0; i < outcomes.size(); ++i) print_json(outcomes[i], i + 1);
  } else {
    print_human(spec, model, outcomes);
  }
  return std::any_of(outcomes.begin(), outcomes.end(), [](const Outcome& o) { return o.ok; }) ? 0 : 2;
}

}  // namespace carflow::cli
