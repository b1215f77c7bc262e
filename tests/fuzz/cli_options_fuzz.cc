// The command line's parser (tools/cli/options.cc, spec.cc) on argv made
// from the input: words separated by NUL, the first one the command. A
// refused command line names why; an accepted one holds only the command's
// options, its flags as "1" and at most its plain arguments. When the
// options describe a small collective, it is planned as `carflow plan`
// would: a DAG the generators make must validate, save and load back equal.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "tools/cli/cli.h"

namespace {

using carflow_fuzz::check;

constexpr size_t kMaxWords = 64;
// Plans bigger than this take too long per input to fuzz.
constexpr uint32_t kMaxPlanImages = 32;
constexpr uint64_t kMaxPlanBytes = 4096;

bool listed(const std::vector<std::string>& list, const std::string& key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

void check_parsed(const carflow::cli::CommandSpec& spec, const carflow::cli::Args& args) {
  size_t plain = 0;
  for (const auto& [key, value] : args) {
    if (listed(spec.flags, key)) {
      check(value == "1", "a flag maps to 1");
    } else if (!listed(spec.valued, key)) {
      check(key.size() > 1 && key[0] == '_', "every parsed key is an option, a flag or a plain argument");
      ++plain;
    }
  }
  check(plain <= spec.positional, "no more plain arguments than the command takes");
}

void plan(const carflow::cli::Args& args) {
  const carflow::Config config;
  carflow::CollectiveSpec spec;
  std::string error;
  if (!carflow::cli::spec_from_args(args, config, carflow::cli::kCheckImages, false, &spec, &error)) {
    check(!error.empty(), "refused options say why");
    return;
  }
  if (spec.images == 0 || spec.images > kMaxPlanImages || spec.nbytes > kMaxPlanBytes ||
      !carflow::check_layout(spec, &error)) {
    return;
  }
  carflow::GlobalDag dag;
  if (!carflow::generate_global_bounded(spec, &dag, &error)) return;
  if (!carflow::validate_global(dag, &error)) carflow_fuzz::defect("a generated DAG is invalid: " + error);
  carflow::GlobalDag loaded;
  if (!carflow::dag_from_json(carflow::dag_to_json(dag), &loaded, &error)) {
    carflow_fuzz::defect("a generated DAG does not load: " + error);
  }
  check(loaded == dag, "a generated DAG loads back equal");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words{"carflow"};
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (size_t at = 0; at <= text.size() && words.size() <= kMaxWords;) {
    const size_t end = std::min(text.find('\0', at), text.size());
    words.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  std::vector<char*> argv;
  for (std::string& w : words) argv.push_back(w.data());
  argv.push_back(nullptr);
  const int argc = static_cast<int>(words.size());
  const carflow::cli::CommandSpec* spec = carflow::cli::command_spec(words[1]);
  if (spec == nullptr) return 0;
  carflow::cli::Args args;
  std::string error;
  if (!carflow::cli::parse_args(words[1], *spec, argc, argv.data(), 2, &args, &error)) {
    check(!error.empty(), "a refused command line says why");
    return 0;
  }
  check_parsed(*spec, args);
  if (args.count("sizes")) {
    std::vector<uint64_t> sizes;
    if (carflow_bench::parse_sizes(args.at("sizes"), &sizes, &error)) check(!sizes.empty(), "sizes parse to some");
  }
  if (args.count("coll")) plan(args);
  return 0;
}
