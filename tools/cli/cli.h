// The `carflow` command line (tools/carflow runs it): what its commands
// share. One file per command: plan.cc, dot.cc, view.cc, bench.cc, compare.cc,
// demo.cc, info.cc; options.cc parses the command line, main.cc dispatches.
#pragma once

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
#include "graph/model/loggp.h"
#include "graph/registry.h"
#include "graph/transforms.h"
#include "graph/validate.h"

namespace carflow::cli {

using Args = std::map<std::string, std::string>;

// What a command accepts: options that take a value, flags that do not,
// and how many plain arguments (dot: the file).
struct CommandSpec {
  std::vector<std::string> valued;
  std::vector<std::string> flags;
  size_t positional = 0;
};
// The command's spec, or nullptr for an unknown command.
const CommandSpec* command_spec(const std::string& cmd);
// argv[first..] as options of `cmd`; false with *error naming the option.
bool parse_args(const std::string& cmd, const CommandSpec& spec, int argc, char** argv, int first, Args* out,
                std::string* error);
// An unsigned option in [min, max] (sizes with K/M/G suffixes allowed);
// `fallback` when absent.
bool get_uint(const Args& args, const std::string& key, uint64_t fallback, uint64_t min, uint64_t max,
              uint64_t* out, std::string* error);
// Prints "carflow: message" to stderr; returns 2 (the usage error status).
int fail(const std::string& message);
std::string kinds_list();
// --coll's value as a kind; false with *error naming the option and the kinds.
bool coll_kind(const std::string& name, carflow::CollKind* kind, std::string* error);
// --algo: a generator registered for `kind` (graph/registry.h).
bool algo_known(carflow::CollKind kind, const std::string& name, std::string* error);
// A layout error names the spec's fields ("dst_blksz, dst_offset: ..."):
// say them as the options that set them.
std::string as_options(const std::string& error);
// The collective that --coll, --images, --bytes, --algo, --root,
// --elem-size, the layout and sync options describe, with the parameters
// the engine would give its generator (default algorithm: the selection
// table's). --images up to max_images (0 when absent and !need_images);
// false with *error naming the option.
bool spec_from_args(const Args& args, const carflow::Config& config, uint64_t max_images, bool need_images,
                    carflow::CollectiveSpec* out, std::string* error);
// Sets the team size and what depends on it (permute's shift).
void set_images(carflow::CollectiveSpec* spec, uint32_t images);
// bench's and demo's table.
void print_table_header();
void print_row(const carflow_bench::LatencyResult& r);

int cmd_plan(const Args& args);
// check's largest team (its DAGs are built whole, as plan's are).
inline constexpr uint64_t kCheckImages = 4096;
int cmd_check(const Args& args);
int cmd_dot(const Args& args);
int cmd_view(const Args& args);
int cmd_trace(const Args& args);
int cmd_bench(const Args& args);
int cmd_compare(const Args& args);
int cmd_demo(const Args& args);
int cmd_info();
int cmd_simulate(const Args& args);
// calibrate measures through the engine, so it calls cf_init itself (and
// between processes starts itself again under cfrun with argv).
int cmd_calibrate(const Args& args, int argc, char** argv);
int cmd_tune(const Args& args);
// The LogGP model of --model-file and --model (graph/model/loggp.h);
// false with *error naming the option and the key.
bool model_from_args(const Args& args, carflow::LogGPModel* model, std::string* error);

}  // namespace carflow::cli
