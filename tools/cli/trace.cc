// carflow trace merge DIR -o F.json: the per-process trace files CF_TRACE
// wrote (engine/trace.h) joined into one, for Perfetto, chrome://tracing
// or `carflow view`.
#include "engine/trace.h"
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_trace(const Args& args) {
  auto verb = args.find("_0");
  auto dir = args.find("_1");
  if (verb == args.end() || verb->second != "merge" || dir == args.end()) {
    return fail("trace: usage: carflow trace merge DIR -o F.json");
  }
  auto out = args.find("o");
  if (out == args.end()) return fail("-o: required (the merged trace file to write)");
  size_t files = 0, events = 0;
  std::string error;
  if (!carflow::merge_traces(dir->second, out->second, &files, &events, &error)) return fail(error);
  std::printf("merged %zu files, %zu events into %s\n", files, events, out->second.c_str());
  return 0;
}

}  // namespace carflow::cli
