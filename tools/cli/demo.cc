// carflow demo: every collective from 8 B to 4 MiB, verified, with its DAGs.
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_demo(const Args& args) {
  std::string error;
  uint64_t images = 8;
  if (!get_uint(args, "images", 8, 1, 1024, &images, &error)) return fail(error);
  const std::string dir = args.count("out") ? args.at("out") : "cf-demo-graphs";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return fail("--out: cannot create '" + dir + "': " + ec.message());
  std::printf("carflow demo: %llu inproc images; DAGs go to %s/\n\n",
              static_cast<unsigned long long>(images), dir.c_str());
  print_table_header();
  bool all_ok = true;
  size_t graphs = 0;
  for (const char* coll : {"broadcast", "barrier", "allreduce", "scatter", "gather", "gather_all",
                           "exchange", "permute", "reduce_vec", "scan", "reduce_scatter", "reduce",
                           "prefix_reduce"}) {
    carflow_bench::LatencyOptions opt;
    opt.coll = coll;
    opt.images = static_cast<uint32_t>(images);
    opt.graph_dir = dir;
    // Per-block sizes for the P-block collectives: up to 256 KiB a block.
    const bool blocks = !std::strcmp(coll, "scatter") || !std::strcmp(coll, "gather") ||
                        !std::strcmp(coll, "gather_all") || !std::strcmp(coll, "exchange") ||
                        !std::strcmp(coll, "reduce_scatter");
    carflow_bench::parse_sizes(blocks ? "8,64,512,4K,32K,256K" : "8,64,512,4K,32K,256K,1M,4M",
                               &opt.sizes, &error);
    std::vector<carflow_bench::LatencyResult> results;
    if (!carflow_bench::run_latency(opt, &results, &error)) return fail(error);
    for (const auto& r : results) {
      print_row(r);
      all_ok &= r.verified;
      graphs += std::filesystem::exists(r.graph_file);
    }
  }
  std::printf("\n%s; %zu DAG files in %s/ (render one: tools/carflow dot %s/broadcast_4K.json)\n",
              all_ok ? "all results verified" : "VERIFICATION FAILED", graphs, dir.c_str(),
              dir.c_str());
  return all_ok ? 0 : 1;
}

}  // namespace carflow::cli
