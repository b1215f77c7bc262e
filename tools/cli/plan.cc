// carflow plan: build, validate and save a collective's global DAG, as
// graph JSON or as a GOAL schedule (graph/model/goal.h).
#include <fstream>
#include <iostream>

#include "graph/model/goal.h"
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_plan(const Args& args) {
  std::string error;
  carflow::Config config;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  carflow::CollectiveSpec spec;
  if (!spec_from_args(args, config, 4096, true, &spec, &error)) return fail(error);
  const uint64_t bytes = spec.nbytes;
  auto coll = args.find("coll");
  if (!carflow::check_layout(spec, &error)) return fail(as_options(error));
  carflow::GlobalDag dag;
  // Image by image, refused once it could not be saved (before it takes
  // gigabytes, as a pairwise exchange on 1024 images would).
  if (!carflow::generate_global_bounded(spec, &dag, &error)) return fail(as_options(error));
  if (!carflow::validate_global(dag, &error)) return fail("invalid DAG: " + error);
  const carflow::DagStats stats = carflow::dag_stats(dag);
  auto out = args.find("out");
  const std::string format = args.count("format") ? args.at("format") : "json";
  if (format != "json" && format != "goal") return fail("--format: expected json or goal");
  if (format == "goal") {
    carflow::LogGPModel model;  // REDUCE and COPY costs become calc times
    if (!model_from_args(args, &model, &error)) return fail(error);
    if (out == args.end()) {
      carflow::write_goal(dag, model, std::cout);
      return std::cout.flush() ? 0 : fail("stdout: write failed");
    }
    std::ofstream file(out->second);
    carflow::write_goal(dag, model, file);
    if (!file.flush()) return fail(out->second + ": cannot write");
  } else {
    if (out == args.end()) return fail("--out: required (the JSON file to write)");
    if (!carflow::save_dag_file(dag, out->second, &error)) return fail(error);
  }
  std::printf("%s %s on %u images, %llu bytes: %llu CARs, %llu messages (%llu bytes), "
              "critical path %llu CARs; valid; wrote %s\n",
              spec.algorithm.c_str(), coll->second.c_str(), spec.images,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(stats.cars),
              static_cast<unsigned long long>(stats.messages),
              static_cast<unsigned long long>(stats.message_bytes),
              static_cast<unsigned long long>(stats.critical_path), out->second.c_str());
  return 0;
}

}  // namespace carflow::cli
