// carflow bench: OSU-style latency of one collective, verified.
#include "tools/cli/cli.h"

namespace carflow::cli {

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
  opt.fresh_src = args.count("fresh-src") != 0;
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
  // --coll mixed: the seeded sequence of bench/mixed_sequence.h.
  uint64_t ops = 200, seed = 1;
  if (!get_uint(args, "ops", 200, 1, 100000, &ops, &error) ||
      !get_uint(args, "seed", 1, 0, UINT64_MAX, &seed, &error)) {
    return fail(error);
  }
  if ((args.count("ops") || args.count("seed")) && opt.coll != "mixed") return fail("--ops, --seed: only with --coll mixed");
  opt.mixed_ops = static_cast<uint32_t>(ops);
  opt.mixed_seed = seed;
  auto sizes = args.find("sizes");
  if (opt.coll == "mixed" && sizes != args.end()) return fail("--sizes: --coll mixed draws its own");
  if (opt.coll != "barrier" && opt.coll != "mixed" &&
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
  // --copy-floor: each step's floor, one memcpy of what the busiest process
  // must receive, timed here after the collective's loop (bench/README.md).
  if (args.count("copy-floor")) {
    for (auto& r : results) {
      r.copy_bytes = carflow_bench::received_bytes(r.coll, r.bytes, r.images);
      r.copy_us = r.copy_bytes > 0 ? carflow_bench::memcpy_us(r.copy_bytes) : 0;
    }
  }
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

}  // namespace carflow::cli
