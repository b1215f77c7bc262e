// carflow compare: every algorithm of a collective against the default choice.
#include "tools/cli/cli.h"

namespace carflow::cli {

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
        // round runs slower, so no algorithm may always be first.
        for (size_t step = 0; step < algos.size(); ++step) {
          const size_t a = (step + round) % algos.size();
          carflow_bench::LatencyOptions opt;
          opt.coll = coll;
          opt.images = static_cast<uint32_t>(images);
          opt.iters = static_cast<uint32_t>(iters);
          opt.sizes = {bytes};
          opt.algo = algos[a];
          opt.fresh_src = args.count("fresh-src") != 0;
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

}  // namespace carflow::cli
