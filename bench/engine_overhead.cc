// Engine overhead: ns per CAR to instantiate and run a large DAG of local
// COPY (zero bytes) and JOIN CARs, no data movement. The DAG is a layered
// lattice (each CAR depends on two of the previous layer), so dependency
// counting, successor release and the worklist all do real work.
//
//   bazel run -c opt //bench:engine_overhead -- [cars] [reps]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "bench/arg.h"
#include "engine/engine.h"
#include "graph/builder.h"

int main(int argc, char** argv) {
  const uint32_t cars = static_cast<uint32_t>(carflow_bench::arg_uint(argc, argv, 1, "cars", 100000, 1, 100000000));
  const int reps = static_cast<int>(carflow_bench::arg_uint(argc, argv, 2, "reps", 50, 1, 1000000));
  const uint32_t width = 64;
  carflow::DagBuilder b(0, 0, 0);
  std::vector<carflow::CarId> prev, layer;
  for (uint32_t i = 0; i < cars; ++i) {
    carflow::DagBuilder::Deps deps;
    if (!prev.empty()) {
      deps.push_back(carflow::after(prev[i % prev.size()]));
      deps.push_back(carflow::after(prev[(i * 7 + 1) % prev.size()]));
      if (deps[0] == deps[1]) deps.pop_back();
    }
    layer.push_back(i % 2 ? b.join(deps) : b.copy(carflow::no_buffer(), carflow::no_buffer(), deps));
    if (layer.size() == width) {
      prev.swap(layer);
      layer.clear();
    }
  }
  carflow::LocalDag dag = b.finish();
  const size_t total = dag.cars.size();
  carflow::CollectiveSpec spec;
  carflow::Config config;
  carflow::Engine engine(1, config);
  carflow::ImageContext& img = engine.image(0);
  carflow::Schedule schedule(spec, std::move(dag));
  std::string error;
  auto run = [&] {
    const uint64_t h = engine.start_schedule(img, &schedule, nullptr, nullptr, carflow::ReduceOp{});
    engine.wait_sync(img, h, &error);
  };
  run();  // first run builds the pooled instance
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) run();
  const auto t1 = std::chrono::steady_clock::now();
  const double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / reps / total;
  std::printf("{\"bench\":\"engine_overhead\",\"cars\":%zu,\"reps\":%d,\"ns_per_car\":%.1f,"
              "\"instances_created\":%zu}\n",
              total, reps, ns, schedule.instances_created());
  return 0;
}
