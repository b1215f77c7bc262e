// The `carflow` command line: demo, plan, simulate, dot, view, bench, compare, info,
// calibrate, tune.
// `tools/carflow` (the shell entry) installs what is missing, builds this
// binary and forwards its arguments here.
#include "engine/runtime.h"
#include "tools/cli/cli.h"

namespace {

const char kUsage[] =
    "usage: carflow <command> [options]\n"
    "  demo  [--images 8] [--out DIR]      every collective, 8 B..4 MiB, verified;\n"
    "                                      writes each DAG as JSON into DIR (cf-demo-graphs)\n"
    "  plan  --coll C --images P --bytes N [--algo A] [--root R] [--elem-size E]\n"
    "        [--in-allsync] [--out-allsync] [--exclusive] [--src-blksz B --src-offset O\n"
    "        --dst-blksz B --dst-offset O] [--images-per-node K] --out F.json\n"
    "                                      build and validate a global DAG\n"
    "        [--format json|goal [--model M]]  goal: LogGOPSim's GOAL schedule (stdout\n"
    "                                      when --out is absent)\n"
    "  simulate --coll C --images P --bytes N [--algo A|all] [--root R] [--images-per-node K]\n"
    "        [--model L=500,o=150,...] [--model-file F.json] [--calls K] [--json]\n"
    "                                      predicted time under LogGP (graph/README.md, \"Cost\n"
    "                                      model\"), P up to 2^20; all: every algorithm, ranked;\n"
    "                                      --calls: K back-to-back calls, and the time per call\n"
    "  check --algo A --coll C [--images LO:HI] [--bytes LIST] [--roots all|ends | --root R]\n"
    "        [--elem-size E] [--orders 3] [--plugin LIB.so] [--out F.json]\n"
    "                                      an algorithm (a plug-in's or built-in) at every P:\n"
    "                                      validated, run in seeded orders on the sequential\n"
    "                                      executor, compared with the reference; writes the\n"
    "                                      first failing DAG to F.json\n"
    "  dot   F.json [--plugin LIB.so]      Graphviz rendering of a graph file, to stdout\n"
    "  view  F.json [-o F.html] [--collapse-above 64] [--plugin LIB.so]\n"
    "                                      one self-contained HTML page drawing the DAG\n"
    "                                      (or a Chrome trace-event file as a timeline)\n"
    "  trace merge DIR -o F.json           the trace files CF_TRACE=DIR wrote, one per process,\n"
    "                                      joined into one (Perfetto, chrome://tracing, view)\n"
    "  bench --coll C --images P --sizes LIST [--iters N] [--algo A] [--sync IN,OUT] [--json] [--copy-floor]\n"
    "        [--calls K | --aggregate K [--rounds R]]  K calls per iteration, separate or\n"
    "                                      aggregated (R interleaved rounds of one call,\n"
    "                                      K separate and K aggregated)\n"
    "        --coll mixed [--ops 200] [--seed 1]: passes over a seeded mix of kinds and sizes\n"
    "        --fresh-src: sources written again before each call, calls timed one by one\n"
    "                                      OSU-style latency; LIST like 8,1K,4M or 8:4M\n"
    "                                      (LO:HI = LO, 2LO, 4LO, ... up to HI)\n"
    "  compare [--coll C] [--images 8] [--sizes 8,1M] [--iters N] [--rounds 5] [--fresh-src]\n"
    "                                      every algorithm vs the default choice, one run\n"
    "  calibrate [--transport inproc|shm|tcp] [--out model.json] [--iters 2000]\n"
    "                                      LogGP parameters measured on a transport between\n"
    "                                      2 images (shm, tcp: 2 processes under cfrun)\n"
    "  tune  --model-file F --images P [--images-per-node K] [--max-bytes 16M] --out T.json\n"
    "                                      per kind, the predicted fastest algorithm by size\n"
    "                                      range: a table for CF_TUNING\n"
  "  info  [--plugin LIB.so]            environment knobs, algorithms (a plug-in's too),\n"
  "                                      thresholds\n";


}  // namespace

using namespace carflow::cli;

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
  // Plug-ins before anything reads the registry: --plugin, then CF_PLUGINS
  // (which cf_init would load too; a library loads once).
  const char* env_plugins = std::getenv("CF_PLUGINS");
  if ((args.count("plugin") &&
       !carflow::Runtime::get().add_plugins(args.at("plugin"), "--plugin", &error)) ||
      (env_plugins != nullptr && !carflow::Runtime::get().add_plugins(env_plugins, "CF_PLUGINS", &error))) {
    return fail(error);
  }
  if (cmd == "plan") return cmd_plan(args);
  if (cmd == "check") return cmd_check(args);
  if (cmd == "dot") return cmd_dot(args);
  if (cmd == "simulate") return cmd_simulate(args);
  if (cmd == "view") return cmd_view(args);
  if (cmd == "trace") return cmd_trace(args);
  if (cmd == "info") return cmd_info();
  if (cmd == "tune") return cmd_tune(args);
  if (cmd == "calibrate") return cmd_calibrate(args, argc, argv);
  if (cf_init(&argc, &argv) != CF_OK) return 2;  // prints the reason (fatal mode)
  cf_set_error_mode(CF_ERRORS_RETURN);
  const int rc = cmd == "demo" ? cmd_demo(args) : cmd == "compare" ? cmd_compare(args) : cmd_bench(args);
  cf_finalize();
  return rc;
}
