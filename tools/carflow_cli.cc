// The `carflow` command line: demo, plan, dot, bench, compare, info.
// `tools/carflow` (the shell entry) installs what is missing, builds this
// binary and forwards its arguments here.
#include <carflow/carflow.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "bench/latency.h"
#include "engine/config.h"
#include "engine/selection.h"
#include "graph/json.h"
#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/transforms.h"
#include "graph/validate.h"

namespace {

using Args = std::map<std::string, std::string>;

const char kUsage[] =
    "usage: carflow <command> [options]\n"
    "  demo  [--images 8] [--out DIR]      every collective, 8 B..4 MiB, verified;\n"
    "                                      writes each DAG as JSON into DIR (cf-demo-graphs)\n"
    "  plan  --coll C --images P --bytes N [--algo A] [--root R] [--elem-size E]\n"
    "        [--in-allsync] [--out-allsync] [--exclusive] [--src-blksz B --src-offset O\n"
    "        --dst-blksz B --dst-offset O] [--images-per-node K] --out F.json\n"
    "                                      build and validate a global DAG\n"
    "  dot   F.json                        Graphviz rendering of a graph file, to stdout\n"
    "  bench --coll C --images P --sizes LIST [--iters N] [--algo A] [--sync IN,OUT] [--json]\n"
    "        [--calls K | --aggregate K [--rounds R]]  K calls per iteration, separate or\n"
    "                                      aggregated (R interleaved rounds of one call,\n"
    "                                      K separate and K aggregated)\n"
    "                                      OSU-style latency; LIST like 8,1K,4M or 8:4M\n"
    "                                      (LO:HI = LO, 2LO, 4LO, ... up to HI)\n"
    "  compare [--coll C] [--images 8] [--sizes 8,1M] [--iters N] [--rounds 5]\n"
    "                                      every algorithm vs the default choice, one run\n"
    "  info                                environment knobs, algorithms, thresholds\n";

// What a command accepts: options that take a value, flags that do not,
// and how many plain arguments (dot: the file).
struct CommandSpec {
  std::vector<std::string> valued;
  std::vector<std::string> flags;
  size_t positional = 0;
};

const CommandSpec* command_spec(const std::string& cmd) {
  static const std::map<std::string, CommandSpec> kSpecs = {
      {"demo", {{"images", "out"}, {}, 0}},
      {"plan",
       {{"coll", "images", "bytes", "algo", "root", "elem-size", "src-blksz", "src-offset", "dst-blksz",
         "dst-offset", "images-per-node", "out"},
        {"in-allsync", "out-allsync", "exclusive"},
        0}},
      {"dot", {{}, {}, 1}},
      {"bench", {{"coll", "images", "sizes", "iters", "algo", "sync", "calls", "aggregate", "rounds"}, {"json"}, 0}},
      {"compare", {{"coll", "images", "sizes", "iters", "rounds"}, {}, 0}},
      {"info", {{}, {}, 0}},
  };
  auto it = kSpecs.find(cmd);
  return it == kSpecs.end() ? nullptr : &it->second;
}

// --key value pairs and flags (mapped to "1") as `spec` allows them; plain
// arguments as "_0", "_1", ... Anything else is an error naming it.
bool parse_args(const std::string& cmd, const CommandSpec& spec, int argc, char** argv, int first, Args* out,
                std::string* error) {
  auto listed = [](const std::vector<std::string>& list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  };
  size_t positional = 0;
  for (int i = first; i < argc; ++i) {
    std::string key = argv[i];
    if (key.rfind("--", 0) != 0) {
      if (positional == spec.positional) {
        *error = "'" + key + "': unexpected argument (carflow " + cmd + " takes " +
                 (spec.positional == 0 ? std::string("only --options") : "one file") + ")";
        return false;
      }
      (*out)["_" + std::to_string(positional++)] = key;
      continue;
    }
    key = key.substr(2);
    if (out->count(key)) {
      *error = "--" + key + ": given twice";
      return false;
    }
    if (listed(spec.flags, key)) {
      (*out)[key] = "1";
    } else if (listed(spec.valued, key)) {
      if (i + 1 >= argc) {
        *error = "--" + key + ": missing value";
        return false;
      }
      (*out)[key] = argv[++i];
    } else {
      std::string known;
      for (const auto& k : spec.valued) known += (known.empty() ? "--" : ", --") + k;
      for (const auto& k : spec.flags) known += (known.empty() ? "--" : ", --") + k;
      *error = "--" + key + ": not an option of carflow " + cmd +
               (known.empty() ? " (it takes none)" : " (its options: " + known + ")");
      return false;
    }
  }
  return true;
}

// An unsigned option in [min, max] (sizes with K/M/G suffixes allowed);
// `fallback` when absent.
bool get_uint(const Args& args, const std::string& key, uint64_t fallback, uint64_t min, uint64_t max,
              uint64_t* out, std::string* error) {
  auto it = args.find(key);
  if (it == args.end()) {
    *out = fallback;
    return true;
  }
  std::vector<uint64_t> v;
  std::string e;
  uint64_t value = 0;
  // parse_sizes rejects 0; a plain 0 is a number too.
  const bool number = it->second == "0" ||
                      (carflow_bench::parse_sizes(it->second, &v, &e) && v.size() == 1 &&
                       it->second.find(':') == std::string::npos);
  if (number && !v.empty()) value = v[0];
  if (!number || value < min || value > max) {
    *error = "--" + key + ": '" + it->second + "' is not a number in [" + std::to_string(min) + ", " +
             std::to_string(max) + "]";
    return false;
  }
  *out = value;
  return true;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "carflow: %s\n", message.c_str());
  return 2;
}

std::string kinds_list() {
  std::string out;
  for (int k = 0; k < carflow::kCollKinds; ++k) {
    out += (k ? ", " : "") + std::string(carflow::coll_kind_name(static_cast<carflow::CollKind>(k)));
  }
  return out;
}

// --coll's value as a kind; false with *error naming the option and the kinds.
bool coll_kind(const std::string& name, carflow::CollKind* kind, std::string* error) {
  if (carflow::parse_coll_kind(name, kind)) return true;
  *error = "--coll: expected one of " + kinds_list();
  return false;
}

// --algo: a generator registered for `kind` (graph/registry.h).
bool algo_known(carflow::CollKind kind, const std::string& name, std::string* error) {
  if (carflow::GeneratorRegistry::instance().find(kind, name) != nullptr) return true;
  *error = "--algo: " + std::string(carflow::coll_kind_name(kind)) + " has no algorithm '" + name +
           "' (its algorithms: " + carflow::GeneratorRegistry::instance().names(kind) + ")";
  return false;
}

// A layout error names the spec's fields ("dst_blksz, dst_offset: ..."):
// say them as the options that set them.
std::string as_options(const std::string& error) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"src_blksz", "--src-blksz"}, {"src_offset", "--src-offset"}, {"dst_blksz", "--dst-blksz"},
      {"dst_offset", "--dst-offset"}, {"elem_size", "--elem-size"}, {"nbytes", "--bytes"},
      {"root", "--root"}, {"images", "--images"}};
  const size_t colon = error.find(": ");
  if (colon == std::string::npos) return error;
  std::string head = error.substr(0, colon), out;
  size_t at = 0;
  while (at < head.size()) {  // comma-separated field names
    size_t end = head.find(", ", at);
    if (end == std::string::npos) end = head.size();
    std::string name = head.substr(at, end - at);
    for (const auto& [field, option] : kNames) {
      if (name == field) name = option;
    }
    out += (out.empty() ? "" : ", ") + name;
    at = end + 2;
  }
  return out + error.substr(colon);
}

int cmd_plan(const Args& args) {
  std::string error;
  carflow::CollectiveSpec spec;
  auto coll = args.find("coll");
  if (!coll_kind(coll == args.end() ? "" : coll->second, &spec.kind, &error)) return fail(error);
  uint64_t images = 0, bytes = 0, root = 0, elem = 1, segment = 0, ppn = 0;
  if (!get_uint(args, "images", 0, 1, 4096, &images, &error) ||
      !get_uint(args, "bytes", spec.kind == carflow::CollKind::Barrier ? 0 : 8, 0, uint64_t{1} << 32,
                &bytes, &error) ||
      !get_uint(args, "root", 0, 0, 4095, &root, &error) ||
      !get_uint(args, "elem-size", carflow::is_computational(spec.kind) ? 8 : 1, 1, 4096, &elem,
                &error) ||
      !get_uint(args, "src-blksz", 0, 0, uint64_t{1} << 40, &spec.src_blksz, &error) ||
      !get_uint(args, "src-offset", 0, 0, uint64_t{1} << 40, &spec.src_offset, &error) ||
      !get_uint(args, "dst-blksz", 0, 0, uint64_t{1} << 40, &spec.dst_blksz, &error) ||
      !get_uint(args, "dst-offset", 0, 0, uint64_t{1} << 40, &spec.dst_offset, &error) ||
      !get_uint(args, "images-per-node", 0, 0, 4096, &ppn, &error)) {
    return fail(error);
  }
  carflow::Config config;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  if (images == 0) return fail("--images: required, 1..4096");
  if (root >= images) return fail("--root: must be below --images");
  if (bytes % elem != 0) return fail("--bytes: must be a multiple of --elem-size");
  auto algo = args.find("algo");
  if (algo != args.end() && !algo_known(spec.kind, algo->second, &error)) return fail(error);
  spec.algorithm = algo != args.end()
                       ? algo->second
                       : carflow::SelectionTable(config, std::thread::hardware_concurrency())
                             .choose(spec.kind, static_cast<uint32_t>(images), bytes,
                                     static_cast<uint32_t>(elem), true)
                             ->name;
  const carflow::GeneratorInfo* gen =
      carflow::GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  if (gen != nullptr && gen->segmented) segment = config.segment_bytes;
  spec.images = static_cast<uint32_t>(images);
  spec.root = static_cast<uint32_t>(root);
  spec.nbytes = bytes;
  spec.elem_size = static_cast<uint32_t>(elem);
  spec.segment_bytes = segment;
  spec.flags = (args.count("in-allsync") ? carflow::kSpecInAllSync : 0) |
               (args.count("out-allsync") ? carflow::kSpecOutAllSync : 0) |
               (args.count("exclusive") ? carflow::kExclusiveFlag : 0);
  if (spec.kind == carflow::CollKind::Permute) {  // the shift i -> i + 1
    for (uint32_t i = 0; i < spec.images; ++i) spec.perm.push_back((i + 1) % spec.images);
  }
  if (gen != nullptr) {  // the parameters the engine would give this generator
    if (gen->params & carflow::kUsesRadix) spec.radix = config.tree_radix;
    if (gen->params & carflow::kUsesWindow) spec.window = config.exchange_window;
    if (gen->params & carflow::kUsesLogp) {
      spec.logp_L = config.logp_L, spec.logp_o = config.logp_o, spec.logp_g = config.logp_g;
    }
    if (gen->params & carflow::kUsesNodes) spec.images_per_node = static_cast<uint32_t>(ppn);
  }
  if (!carflow::check_layout(spec, &error)) return fail(as_options(error));
  carflow::GlobalDag dag;
  // Image by image, refused once it could not be saved (before it takes
  // gigabytes: exchange pairwise on 1024 images did).
  if (!carflow::generate_global_bounded(spec, &dag, &error)) return fail(as_options(error));
  if (!carflow::validate_global(dag, &error)) return fail("invalid DAG: " + error);
  const carflow::DagStats stats = carflow::dag_stats(dag);
  auto out = args.find("out");
  if (out == args.end()) return fail("--out: required (the JSON file to write)");
  if (!carflow::save_dag_file(dag, out->second, &error)) return fail(error);
  std::printf("%s %s on %u images, %llu bytes: %llu CARs, %llu messages (%llu bytes), "
              "critical path %llu CARs; valid; wrote %s\n",
              spec.algorithm.c_str(), coll->second.c_str(), spec.images,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(stats.cars),
              static_cast<unsigned long long>(stats.messages),
              static_cast<unsigned long long>(stats.message_bytes),
              static_cast<unsigned long long>(stats.critical_path), out->second.c_str());
  return 0;
}

int cmd_dot(const Args& args) {
  auto file = args.find("_0");
  if (file == args.end()) return fail("dot: a graph file is required (carflow dot F.json)");
  carflow::GlobalDag dag;
  std::string error;
  if (!carflow::load_dag_file(file->second, &dag, &error)) return fail(error);  // names the file
  std::fputs(carflow::dag_to_dot(dag).c_str(), stdout);
  return 0;
}

void print_table_header() {
  std::printf("%-14s %10s %-20s %6s %10s %10s %10s %s\n", "coll", "bytes", "algorithm", "images",
              "avg_us", "min_us", "max_us", "verified");
}

void print_row(const carflow_bench::LatencyResult& r) {
  // Several calls per iteration: "broadcast x8" (separate), "broadcast agg8".
  const std::string coll = r.calls > 1 ? r.coll + (r.aggregate ? " agg" : " x") + std::to_string(r.calls) : r.coll;
  std::printf("%-14s %10s %-20s %6u %10.2f %10.2f %10.2f %s\n", coll.c_str(),
              carflow_bench::format_bytes(r.bytes).c_str(), r.algo.c_str(), r.images, r.avg_us,
              r.min_us, r.max_us, r.verified ? "yes" : "NO");
}

int cmd_bench(const Args& args) {
  carflow_bench::LatencyOptions opt;
  std::string error;
  uint64_t images = 0, iters = 0, calls = 1, aggregate = 0;
  if (!get_uint(args, "images", 2, 1, 1024, &images, &error) ||
      !get_uint(args, "iters", 0, 0, 100000000, &iters, &error) ||
      !get_uint(args, "calls", 1, 1, 1024, &calls, &error) ||
      !get_uint(args, "aggregate", 0, 1, 1024, &aggregate, &error)) {
    return fail(error);
  }
  opt.images = static_cast<uint32_t>(images);
  opt.iters = static_cast<uint32_t>(iters);
  // --calls K: K separate calls per iteration; --aggregate K: K calls as one aggregate.
  if (args.count("calls") && aggregate > 0) return fail("--calls, --aggregate: give one of them");
  opt.calls = static_cast<uint32_t>(aggregate > 0 ? aggregate : calls);
  opt.aggregate = aggregate > 0;
  // --sync IN,OUT: the sync modes of the timed calls (default mysync,mysync).
  auto sync = args.find("sync");
  if (sync != args.end()) {
    const std::string v = sync->second;
    const size_t comma = v.find(',');
    const std::string in = v.substr(0, comma), out = comma == std::string::npos ? "" : v.substr(comma + 1);
    auto mode = [](const std::string& m, int no, int my, int all) {
      return m == "nosync" ? no : m == "mysync" ? my : m == "allsync" ? all : -1;
    };
    const int in_flag = mode(in, CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC);
    const int out_flag = mode(out, CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC);
    if (in_flag < 0 || out_flag < 0) {
      return fail("--sync: '" + v + "' is not IN,OUT with each of nosync, mysync, allsync");
    }
    opt.flags = in_flag | out_flag | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  }
  auto coll = args.find("coll");
  if (coll == args.end()) return fail("--coll: required (" + kinds_list() + ")");
  opt.coll = coll->second;
  auto sizes = args.find("sizes");
  if (opt.coll != "barrier" &&
      !carflow_bench::parse_sizes(sizes == args.end() ? "8" : sizes->second, &opt.sizes, &error)) {
    return fail(error);
  }
  if (args.count("algo")) {
    carflow::CollKind kind;
    if (!coll_kind(opt.coll, &kind, &error)) return fail(error);
    if (!algo_known(kind, args.at("algo"), &error)) return fail(error);
    opt.algo = args.at("algo");
  }
  std::vector<carflow_bench::LatencyResult> results;
  // --aggregate K also runs one call and K separate calls in the same run:
  // the references of the aggregation targets. --rounds R repeats the three,
  // interleaved, and reports the mean of each over the rounds (runs with
  // more image threads than cores are bimodal: one run says little).
  uint64_t rounds = 1;
  if (!get_uint(args, "rounds", 1, 1, 1000, &rounds, &error)) return fail(error);
  if (rounds > 1 && !opt.aggregate) return fail("--rounds: only with --aggregate");
  if (opt.aggregate) {
    carflow_bench::LatencyOptions single = opt, separate = opt;
    single.calls = 1;
    single.aggregate = separate.aggregate = false;
    std::vector<carflow_bench::LatencyResult> round_results;
    std::vector<std::vector<double>> times(3);  // one call, separate, aggregated (first size)
    for (uint64_t r = 0; r < rounds; ++r) {
      round_results.clear();
      if (!carflow_bench::run_latency(single, &round_results, &error) ||
          !carflow_bench::run_latency(separate, &round_results, &error) ||
          !carflow_bench::run_latency(opt, &round_results, &error)) {
        return fail(error);
      }
      const size_t n = round_results.size() / 3;
      for (size_t v = 0; v < 3 && n > 0; ++v) times[v].push_back(round_results[v * n].avg_us);
      if (r + 1 < rounds) {
        for (const auto& x : round_results) {
          if (!x.verified) return fail("round " + std::to_string(r) + ": wrong data");
        }
      }
    }
    results = round_results;
    if (rounds > 1) {
      auto mean_se = [](const std::vector<double>& x, double* se) {
        double sum = 0, sq = 0;
        for (double v : x) sum += v;
        const double mean = sum / x.size();
        for (double v : x) sq += (v - mean) * (v - mean);
        *se = std::sqrt(sq / (x.size() - 1) / x.size());
        return mean;
      };
      double se[3], mean[3];
      for (int v = 0; v < 3; ++v) mean[v] = mean_se(times[v], &se[v]);
      // Each round runs the three back to back, so a slow phase of the
      // machine (they last seconds on a shared VM) mostly hits all three
      // of a round: the median of the rounds' own ratios is the steadier
      // figure when the means drift.
      auto median_ratio = [&](int num, int den) {
        std::vector<double> q;
        for (size_t r = 0; r < times[num].size(); ++r) q.push_back(times[num][r] / times[den][r]);
        std::sort(q.begin(), q.end());
        const size_t h = q.size() / 2;
        return q.size() % 2 ? q[h] : (q[h - 1] + q[h]) / 2;
      };
      std::printf("%s %s, %llu rounds (mean +- standard error): one call %.2f +- %.2f us, %u separate "
                  "%.2f +- %.2f us, %u aggregated %.2f +- %.2f us; aggregated / one call = %.2f, "
                  "aggregated / separate = %.2f\n",
                  opt.coll.c_str(), carflow_bench::format_bytes(results[0].bytes).c_str(),
                  static_cast<unsigned long long>(rounds), mean[0], se[0], opt.calls, mean[1], se[1],
                  opt.calls, mean[2], se[2], mean[2] / mean[0], mean[2] / mean[1]);
      std::printf("%s %s, median of the %llu rounds' own ratios: aggregated / one call = %.2f, "
                  "aggregated / separate = %.2f\n",
                  opt.coll.c_str(), carflow_bench::format_bytes(results[0].bytes).c_str(),
                  static_cast<unsigned long long>(rounds), median_ratio(2, 0), median_ratio(2, 1));
    }
  } else if (!carflow_bench::run_latency(opt, &results, &error)) {
    return fail(error);
  }
  const bool json = args.count("json") > 0;
  if (!json) print_table_header();
  bool all_ok = true;
  for (const auto& r : results) {
    if (json) {
      std::printf("%s\n", carflow_bench::to_json_line(r).c_str());
    } else {
      print_row(r);
    }
    all_ok &= r.verified;
  }
  if (opt.aggregate && !json) {
    const size_t n = opt.sizes.empty() ? 1 : opt.sizes.size();
    for (size_t i = 0; i < n && 3 * n <= results.size(); ++i) {
      const auto &one = results[i], &sep = results[n + i], &agg = results[2 * n + i];
      std::printf("%s %s: %u aggregated / one call = %.2f; aggregated / %u separate = %.2f\n",
                  opt.coll.c_str(), carflow_bench::format_bytes(one.bytes).c_str(), opt.calls,
                  agg.avg_us / one.avg_us, opt.calls, agg.avg_us / sep.avg_us);
    }
  }
  // The references of the bandwidth targets, measured in the same run: one
  // memcpy of the message (broadcast); for allreduce, the fraction of the
  // memcpy bandwidth achieved (bytes of the vector / time).
  if ((opt.coll == "broadcast" || opt.coll == "allreduce") && !json) {
    for (const auto& r : results) {
      const double ref = carflow_bench::memcpy_us(r.bytes);
      if (opt.coll == "broadcast") {
        std::printf("memcpy of %s in the same run: %.2f us; broadcast / memcpy = %.2f\n",
                    carflow_bench::format_bytes(r.bytes).c_str(), ref, r.avg_us / ref);
      } else {
        std::printf("memcpy of %s in the same run: %.2f us; allreduce bandwidth / memcpy bandwidth = %.0f%%\n",
                    carflow_bench::format_bytes(r.bytes).c_str(), ref, 100.0 * ref / r.avg_us);
      }
    }
  }
  return all_ok ? 0 : 1;
}

// Every registered algorithm of a collective against the default choice, in
// one run: the table behind the README's selection defaults. Rounds run
// every algorithm once each, interleaved, so slow drift of a shared machine
// hits all alike; the median round is reported.
int cmd_compare(const Args& args) {
  std::string error;
  uint64_t images = 8, iters = 0, rounds = 5;
  if (!get_uint(args, "images", 8, 1, 1024, &images, &error) ||
      !get_uint(args, "iters", 0, 0, 100000000, &iters, &error) ||
      !get_uint(args, "rounds", 5, 1, 1000, &rounds, &error)) {
    return fail(error);
  }
  std::vector<std::string> colls;
  if (args.count("coll")) {
    carflow::CollKind kind;
    if (!coll_kind(args.at("coll"), &kind, &error)) return fail(error);
    colls.push_back(args.at("coll"));
  } else {
    colls = {"broadcast", "scatter", "gather", "gather_all", "exchange", "barrier"};
  }
  std::vector<uint64_t> sizes;
  if (!carflow_bench::parse_sizes(args.count("sizes") ? args.at("sizes") : "8,1M", &sizes, &error)) {
    return fail(error);
  }
  std::printf("%-10s %10s %-28s %10s %8s %10s %8s   (%llu rounds)\n", "coll", "bytes", "algorithm",
              "mean_us", "stderr", "median_us", "vs_best", static_cast<unsigned long long>(rounds));
  bool all_ok = true;
  for (const std::string& coll : colls) {
    carflow::CollKind kind;
    if (!coll_kind(coll, &kind, &error)) return fail(error);
    for (uint64_t bytes : kind == carflow::CollKind::Barrier ? std::vector<uint64_t>{0} : sizes) {
      std::vector<std::string> algos = {""};  // "" = the default table
      for (const auto* g : carflow::GeneratorRegistry::instance().list(kind)) algos.push_back(g->name);
      std::vector<std::vector<double>> samples(algos.size());
      std::string default_algo;
      for (uint64_t round = 0; round < rounds; ++round) {
        // Each round starts one algorithm later: whichever runs first in a
        // round runs slower (measured: the default, always first, 1.4-1.8x
        // its own algorithm measured later in the same round).
        for (size_t step = 0; step < algos.size(); ++step) {
          const size_t a = (step + round) % algos.size();
          carflow_bench::LatencyOptions opt;
          opt.coll = coll;
          opt.images = static_cast<uint32_t>(images);
          opt.iters = static_cast<uint32_t>(iters);
          opt.sizes = {bytes};
          opt.algo = algos[a];
          std::vector<carflow_bench::LatencyResult> results;
          if (!carflow_bench::run_latency(opt, &results, &error)) {
            return fail(coll + " " + algos[a] + ": " + error);
          }
          all_ok &= results[0].verified;
          if (algos[a].empty()) default_algo = results[0].algo;
          samples[a].push_back(results[0].avg_us);
        }
      }
      // With more image threads than cores a run's time is bimodal (which
      // threads share a core is settled when they start), so one
      // algorithm's median jumps between the modes from run to run: the
      // mean over the rounds is the steadier figure, shown with its
      // standard error.
      std::vector<double> mean(algos.size()), stderr_of(algos.size()), median(algos.size());
      for (size_t a = 0; a < algos.size(); ++a) {
        const std::vector<double>& x = samples[a];
        double sum = 0, sq = 0;
        for (double v : x) sum += v;
        mean[a] = sum / x.size();
        for (double v : x) sq += (v - mean[a]) * (v - mean[a]);
        stderr_of[a] = x.size() > 1 ? std::sqrt(sq / (x.size() - 1) / x.size()) : 0;
        std::vector<double> sorted = x;
        std::sort(sorted.begin(), sorted.end());
        median[a] = sorted[sorted.size() / 2];
      }
      const double best = *std::min_element(mean.begin() + 1, mean.end());
      for (size_t a = 0; a < algos.size(); ++a) {
        const std::string name = algos[a].empty() ? "default (" + default_algo + ")" : algos[a];
        std::printf("%-10s %10s %-28s %10.2f %8.2f %10.2f %8.2f\n", coll.c_str(),
                    carflow_bench::format_bytes(bytes).c_str(), name.c_str(), mean[a], stderr_of[a],
                    median[a], mean[a] / best);
      }
      std::fflush(stdout);
    }
  }
  return all_ok ? 0 : 1;
}

int cmd_demo(const Args& args) {
  std::string error;
  uint64_t images = 8;
  if (!get_uint(args, "images", 8, 1, 1024, &images, &error)) return fail(error);
  const std::string dir = args.count("out") ? args.at("out") : "cf-demo-graphs";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("--out: cannot create '" + dir + "': " + ec.message());
  std::printf("carflow demo: %llu inproc images; DAGs go to %s/\n\n",
              static_cast<unsigned long long>(images), dir.c_str());
  print_table_header();
  bool all_ok = true;
  size_t graphs = 0;
  for (const char* coll : {"broadcast", "barrier", "allreduce", "scatter", "gather", "gather_all",
                           "exchange", "permute", "reduce_vec", "scan", "reduce_scatter", "reduce",
                           "prefix_reduce"}) {
    carflow_bench::LatencyOptions opt;
    opt.coll = coll;
    opt.images = static_cast<uint32_t>(images);
    opt.graph_dir = dir;
    // Per-block sizes for the P-block collectives: up to 256 KiB a block.
    const bool blocks = !std::strcmp(coll, "scatter") || !std::strcmp(coll, "gather") ||
                        !std::strcmp(coll, "gather_all") || !std::strcmp(coll, "exchange") ||
                        !std::strcmp(coll, "reduce_scatter");
    carflow_bench::parse_sizes(blocks ? "8,64,512,4K,32K,256K" : "8,64,512,4K,32K,256K,1M,4M",
                               &opt.sizes, &error);
    std::vector<carflow_bench::LatencyResult> results;
    if (!carflow_bench::run_latency(opt, &results, &error)) return fail(error);
    for (const auto& r : results) {
      print_row(r);
      all_ok &= r.verified;
      graphs += std::filesystem::exists(r.graph_file);
    }
  }
  std::printf("\n%s; %zu DAG files in %s/ (render one: tools/carflow dot %s/broadcast_4K.json)\n",
              all_ok ? "all results verified" : "VERIFICATION FAILED", graphs, dir.c_str(),
              dir.c_str());
  return all_ok ? 0 : 1;
}

int cmd_info() {
  carflow::Config config;
  std::string error;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  std::printf("environment (engine/config.cc; current values):\n");
  std::printf("  %-30s %-14s %-27s %s\n", "name", "value", "range", "what it does");
  for (const carflow::KnobValue& row : config.describe()) {
    std::string doc = row.doc;  // markdown's `code` marks, dropped on a terminal
    doc.erase(std::remove(doc.begin(), doc.end(), '`'), doc.end());
    std::printf("  %-30s %-14s %-27s %s\n", row.name.c_str(), row.value.c_str(), row.range.c_str(), doc.c_str());
  }
  std::printf("\nalgorithms (graph/generators/):\n");
  for (const carflow::GeneratorInfo* g : carflow::GeneratorRegistry::instance().all()) {
    std::printf("  %-10s %-20s %s%s%s\n", carflow::coll_kind_name(g->kind), g->name.c_str(),
                g->summary.c_str(), g->preserves_order ? "" : " [commutative ops only]",
                g->segmented ? " [segmented]" : "");
  }
  const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("\ndefault selection (README, \"Algorithm selection\"); \"threads\": image threads of one\n"
              "process outnumber the cores; \"processes\": a host's processes do:\n"
              "  broadcast  flat for P <= 2; else knomial (threads: binary) below\n"
              "             CF_BROADCAST_LARGE_BYTES (%llu), flat at or above\n"
              "  barrier    dissemination; threads: kary; processes: direct (one round)\n"
              "  allreduce  recursive_doubling below CF_ALLREDUCE_RING_BYTES (%llu), reduce_bcast at\n"
              "             or above, and at every size for threads; rabenseifner from\n"
              "             CF_ALLREDUCE_SPLIT_BYTES (%llu) when the images fit the cores;\n"
              "             processes: direct below CF_ALLREDUCE_DIRECT_BYTES (%llu)\n"
              "  scatter, gather  binomial below CF_ROOTED_TREE_BYTES (%llu) per block, flat at or\n"
              "             above; processes: scatter flat\n"
              "  gather_all below CF_GATHER_ALL_SMALL_BYTES (%llu) per block: recursive_doubling\n"
              "             for P a power of two, else bruck (threads: hierarchical); direct at or\n"
              "             above, and for processes\n"
              "  exchange   pairwise for P <= 2 and for processes; else bruck below\n"
              "             CF_EXCHANGE_SMALL_BYTES (%llu) per block, pairwise at or above\n"
              "  permute    direct\n"
              "  reduce_vec binomial (two-sided tree, pipelined)\n"
              "  scan       dissemination below CF_REDUCE_LARGE_BYTES (%llu), linear (pipelined)\n"
              "             at or above, and at every size when the images outnumber the cores\n"
              "  reduce_scatter  ring for P <= 2; else recursive_halving below CF_REDUCE_LARGE_BYTES\n"
              "             in total, ring at or above (direct for CF_COLL_NONCOMM functions);\n"
              "             processes: direct below CF_REDUCE_SCATTER_DIRECT_BYTES (%llu) per block\n"
              "  reduce     scalar (commutative ops), rows otherwise\n"
              "  prefix_reduce  dissemination\n"
              "  A CF_COLL_NONCOMM function always gets an order-preserving algorithm.\n",
              u(config.broadcast_large_bytes), u(config.allreduce_ring_bytes), u(config.allreduce_split_bytes),
              u(config.allreduce_direct_bytes), u(config.rooted_tree_bytes), u(config.gather_all_small_bytes),
              u(config.exchange_small_bytes), u(config.reduce_large_bytes), u(config.reduce_scatter_direct_bytes));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "help") || !std::strcmp(argv[1], "--help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  // Hidden: the environment table as markdown, for api/README.md ("Environment").
  if (cmd == "info" && argc == 3 && !std::strcmp(argv[2], "--markdown")) {
    for (const std::string& line : carflow::Config::markdown_table()) std::printf("%s\n", line.c_str());
    return 0;
  }
  const CommandSpec* spec = command_spec(cmd);
  if (spec == nullptr) return fail("unknown command '" + cmd + "'\n" + kUsage);
  Args args;
  std::string error;
  if (!parse_args(cmd, *spec, argc, argv, 2, &args, &error)) return fail(error);
  if (cmd == "plan") return cmd_plan(args);
  if (cmd == "dot") return cmd_dot(args);
  if (cmd == "info") return cmd_info();
  if (cf_init(&argc, &argv) != CF_OK) return 2;  // prints the reason (fatal mode)
  cf_set_error_mode(CF_ERRORS_RETURN);
  const int rc = cmd == "demo" ? cmd_demo(args) : cmd == "compare" ? cmd_compare(args) : cmd_bench(args);
  cf_finalize();
  return rc;
}
