// The first-call cost of model-driven selection (CF_MODEL): a fresh
// SelectionTable per sample, so each choose() predicts every registered
// algorithm of the kind (generate all P image DAGs, simulate under LogGP)
// before it answers; later calls with the same key are a hash lookup.
// Target: under 1 ms for P <= 64.
//
//   bazel run -c opt //bench:model_select_cost -- [model.json] [samples=5] [kind [P]]
// With kind (and P), only those keys run: what a profile of one key wants.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <time.h>

#include "bench/arg.h"
#include "engine/config.h"
#include "engine/selection.h"

namespace {

// This thread's CPU time: on a shared machine the wall clock also counts
// the time the thread waited for a core.
double thread_cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace carflow;
  auto model = std::make_shared<LogGPModel>();
  std::string error;
  if (argc > 1 && std::string(argv[1]) != "-" && !load_model_file(argv[1], model.get(), &error)) {
    std::fprintf(stderr, "model_select_cost: %s\n", error.c_str());
    return 1;
  }
  const uint64_t samples = carflow_bench::arg_uint(argc, argv, 2, "samples", 5, 1, 100000);
  const std::string only_kind = argc > 3 ? argv[3] : "";
  const uint64_t only_p = carflow_bench::arg_uint(argc, argv, 4, "P", 0, 2, 64);
  Config config;
  config.model = model;
  const CollKind kinds[] = {CollKind::Broadcast, CollKind::Barrier,  CollKind::Allreduce,
                            CollKind::GatherAll, CollKind::Exchange, CollKind::ReduceScatter};
  std::printf("%-15s %4s %9s %12s %12s %12s %s\n", "kind", "P", "bytes", "median_us", "max_us", "cpu_us",
              "choice");
  double worst = 0;
  bool any = false;
  for (CollKind kind : kinds) {
    if (!only_kind.empty() && only_kind != coll_kind_name(kind)) continue;
    for (uint32_t P : {2u, 4u, 8u, 16u, 32u, 64u}) {
      if (only_p != 0 && only_p != P) continue;
      any = true;
      for (uint64_t bytes : {uint64_t{8}, uint64_t{4096}, uint64_t{256} << 10, uint64_t{4} << 20}) {
        if (kind == CollKind::Barrier && bytes != 8) continue;
        const uint64_t nbytes = kind == CollKind::Barrier ? 0 : bytes;
        const uint32_t elem = is_computational(kind) ? 8 : 1;
        std::vector<double> us, cpu;
        std::string choice;
        for (uint64_t s = 0; s < samples; ++s) {
          const SelectionTable table(config, 2);
          const auto t0 = std::chrono::steady_clock::now();
          const double c0 = thread_cpu_us();
          choice = table.choose(kind, P, nbytes, elem, true)->name;
          cpu.push_back(thread_cpu_us() - c0);
          us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(us.begin(), us.end());
        std::sort(cpu.begin(), cpu.end());
        const double cpu_us = cpu[cpu.size() / 2];
        worst = std::max(worst, cpu_us);
        std::printf("%-15s %4u %9llu %12.1f %12.1f %12.1f %s\n", coll_kind_name(kind), P,
                    static_cast<unsigned long long>(nbytes), us[us.size() / 2], us.back(), cpu_us, choice.c_str());
        std::fprintf(stderr, "{\"bench\":\"model_select_cost\",\"kind\":\"%s\",\"images\":%u,\"bytes\":%llu,"
                     "\"median_us\":%.1f,\"max_us\":%.1f,\"cpu_us\":%.1f,\"choice\":\"%s\"}\n",
                     coll_kind_name(kind), P, static_cast<unsigned long long>(nbytes), us[us.size() / 2], us.back(),
                     cpu_us, choice.c_str());
      }
    }
  }
  if (!any) {
    std::fprintf(stderr, "model_select_cost: no key matches kind '%s' and P %llu (kinds: broadcast, barrier, "
                 "allreduce, gather_all, exchange, reduce_scatter; P a power of two from 2 to 64)\n",
                 only_kind.c_str(), static_cast<unsigned long long>(only_p));
    return 2;
  }
  std::printf("largest median CPU time: %.1f us (target < 1000 us for P <= 64)\n", worst);
  return 0;
}
