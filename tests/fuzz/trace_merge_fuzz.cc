// `carflow trace merge` (engine/trace.h merge_traces) on a directory
// holding the input as one trace file. A refused file is named in the
// error; a merged one is a JSON object whose traceEvents are the file's.
#include <stdlib.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/trace.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using carflow_fuzz::check;

// A fresh directory for the whole run: in/ holds the trace, out/ the merge.
struct Dirs {
  Dirs() {
    std::string pattern = (std::filesystem::temp_directory_path() / "carflow-fuzz-trace-XXXXXX").string();
    check(::mkdtemp(pattern.data()) != nullptr, "a temporary directory");
    root = pattern;
    std::filesystem::create_directory(root / "in");
    std::filesystem::create_directory(root / "out");
    trace = (root / "in" / "carflow-trace-node0-run0.json").string();
    merged = (root / "out" / "merged.json").string();
  }
  ~Dirs() {
    std::error_code ec;
    std::filesystem::remove_all(root, ec);
  }
  std::filesystem::path root;
  std::string trace, merged;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Dirs dirs;
  {
    std::ofstream f(dirs.trace, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    check(static_cast<bool>(f), "the trace file is written");
  }
  size_t files = 0, events = 0;
  std::string error;
  if (!carflow::merge_traces((dirs.root / "in").string(), dirs.merged, &files, &events, &error)) {
    check(error.find(dirs.trace) != std::string::npos, "a refused trace names its file");
    return 0;
  }
  check(files == 1, "one file merged");
  std::ifstream in(dirs.merged, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str(), nullptr, false);
  check(doc.is_object() && doc.contains("traceEvents") && doc["traceEvents"].is_array(),
        "the merge is an object with traceEvents");
  check(doc["traceEvents"].size() == events, "the merge holds every event counted");
  return 0;
}
