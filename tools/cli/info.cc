// carflow info: the environment knobs, the algorithms, the default selection.
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_info() {
  carflow::Config config;
  std::string error;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  std::printf("environment (engine/config.cc; current values):\n");
  std::printf("  %-30s %-14s %-27s %s\n", "name", "value", "range", "what it does");
  for (const carflow::KnobValue& row : config.describe()) {
    std::string doc = row.doc;  // markdown's `code` marks, dropped on a terminal
    doc.erase(std::remove(doc.begin(), doc.end(), '`'), doc.end());
    std::printf("  %-30s %-14s %-27s %s\n", row.name.c_str(), row.value.c_str(), row.range.c_str(), doc.c_str());
  }
  std::printf("\nalgorithms (graph/generators/; [plug-in]: registered at run time, CF_PLUGINS or --plugin):\n");
  for (const carflow::GeneratorInfo* g : carflow::GeneratorRegistry::instance().all()) {
    const bool commutative_only = carflow::is_computational(g->kind) && !g->preserves_order;
    std::printf("  %-10s %-20s %s%s%s%s\n", carflow::coll_kind_name(g->kind), g->name.c_str(), g->summary.c_str(),
                commutative_only ? " [commutative ops only]" : "", g->segmented ? " [segmented]" : "",
                g->plugin ? " [plug-in]" : "");
  }
  const auto u = [](uint64_t v) { return static_cast<unsigned long long>(v); };
  std::printf("\ndefault selection (README, \"Algorithm selection\"); \"threads\": image threads of one\n"
              "process outnumber the cores; \"processes\": a host's processes do:\n"
              "  broadcast  flat for P <= 2; else knomial (threads: binary) below\n"
              "             CF_BROADCAST_LARGE_BYTES (%llu), flat at or above\n"
              "  barrier    dissemination; threads: kary; processes: direct (one round)\n"
              "  allreduce  recursive_doubling below CF_ALLREDUCE_RING_BYTES (%llu), reduce_bcast at\n"
              "             or above, and at every size for threads; rabenseifner from\n"
              "             CF_ALLREDUCE_SPLIT_BYTES (%llu) when the images fit the cores;\n"
              "             two images: recursive_doubling below CF_ALLREDUCE_PAIR_BYTES (%llu),\n"
              "             rabenseifner at or above;\n"
              "             processes: direct below CF_ALLREDUCE_DIRECT_BYTES (%llu)\n"
              "  scatter, gather  binomial below CF_ROOTED_TREE_BYTES (%llu) per block, flat at or\n"
              "             above; processes: scatter flat\n"
              "  gather_all below CF_GATHER_ALL_SMALL_BYTES (%llu) per block: recursive_doubling\n"
              "             for P a power of two, else bruck (threads: hierarchical); direct at or\n"
              "             above, and for processes\n"
              "  exchange   pairwise for P <= 2 and for processes; else bruck below\n"
              "             CF_EXCHANGE_SMALL_BYTES (%llu) per block, pairwise at or above\n"
              "  permute    direct\n"
              "  reduce_vec binomial (two-sided tree, pipelined)\n"
              "  scan       dissemination below CF_REDUCE_LARGE_BYTES (%llu), linear (pipelined)\n"
              "             at or above, and at every size when the images outnumber the cores\n"
              "  reduce_scatter  ring for P <= 2; else recursive_halving below CF_REDUCE_LARGE_BYTES\n"
              "             in total, ring at or above (direct for CF_COLL_NONCOMM functions);\n"
              "             processes: direct below CF_REDUCE_SCATTER_DIRECT_BYTES (%llu) per block\n"
              "  reduce     scalar (commutative ops), rows otherwise\n"
              "  prefix_reduce  dissemination\n"
              "  A CF_COLL_NONCOMM function always gets an order-preserving algorithm.\n",
              u(config.broadcast_large_bytes), u(config.allreduce_ring_bytes), u(config.allreduce_split_bytes),
              u(config.allreduce_pair_bytes),
              u(config.allreduce_direct_bytes), u(config.rooted_tree_bytes), u(config.gather_all_small_bytes),
              u(config.exchange_small_bytes), u(config.reduce_large_bytes), u(config.reduce_scatter_direct_bytes));
  return 0;
}

}  // namespace carflow::cli
