// engine/selection.h: the default algorithm table's choices where the kind
// of oversubscription decides them. Processes outnumbering a host's cores
// take one-round algorithms; image threads of one process outnumbering
// them take the fewest messages; a team spread over hosts counts only the
// images on this host against its cores.
#include <doctest/doctest.h>

#include <string>

#include "engine/config.h"
#include "engine/selection.h"

namespace carflow {
namespace {

constexpr uint32_t kCores = 2;

std::string pick(const SelectionTable& table, CollKind kind, uint32_t images, uint64_t nbytes,
                 bool commutative = true) {
  return table.choose(kind, images, nbytes, 8, commutative)->name;
}

TEST_CASE("processes outnumbering the cores take one-round algorithms for small calls") {
  const Config config;
  // 4 processes of one image each on a 2-core host.
  const SelectionTable table(config, kCores, 1, 4);
  CHECK(pick(table, CollKind::Allreduce, 4, 8) == "direct");
  CHECK(pick(table, CollKind::Allreduce, 4, config.allreduce_direct_bytes - 8) == "direct");
  CHECK(pick(table, CollKind::Allreduce, 4, config.allreduce_direct_bytes) == "recursive_doubling");
  CHECK(pick(table, CollKind::Allreduce, 4, 8, /*commutative=*/false) == "direct");  // keeps order
  CHECK(pick(table, CollKind::Barrier, 4, 0) == "direct");
  CHECK(pick(table, CollKind::GatherAll, 4, 8) == "direct");
  CHECK(pick(table, CollKind::Exchange, 4, 8) == "pairwise");
  CHECK(pick(table, CollKind::Scatter, 4, 8) == "flat");
  CHECK(pick(table, CollKind::Gather, 4, 8) == "binomial");
  CHECK(pick(table, CollKind::Scan, 4, 8) == "linear");
}

TEST_CASE("image threads outnumbering the cores keep the fewest-message choices") {
  const Config config;
  // One process of 8 image threads on a 2-core host.
  const SelectionTable table(config, kCores, 8, 8);
  CHECK(pick(table, CollKind::Allreduce, 8, 8) == "reduce_bcast");
  CHECK(pick(table, CollKind::Barrier, 8, 0) == "kary");
  CHECK(pick(table, CollKind::GatherAll, 8, 8) == "hierarchical");
  CHECK(pick(table, CollKind::Exchange, 8, 8) == "bruck");
  CHECK(pick(table, CollKind::Scatter, 8, 8) == "binomial");
}

TEST_CASE("a core per image keeps the latency choices") {
  const Config config;
  const SelectionTable table(config, kCores, 1, 2);
  CHECK(pick(table, CollKind::Allreduce, 2, 8) == "recursive_doubling");
  CHECK(pick(table, CollKind::Barrier, 2, 0) == "dissemination");
  CHECK(pick(table, CollKind::Exchange, 2, 8) == "pairwise");
}

TEST_CASE("only the team's images on this host count against its cores") {
  const Config config;
  // 2 images per host, 8 hosts: a team of 8 does not oversubscribe any host.
  const SelectionTable spread(config, kCores, 1, 2);
  CHECK(pick(spread, CollKind::Allreduce, 8, 8) == "recursive_doubling");
  CHECK(pick(spread, CollKind::Barrier, 8, 0) == "dissemination");
  CHECK(pick(spread, CollKind::GatherAll, 8, 8) == "recursive_doubling");
  CHECK(pick(spread, CollKind::Exchange, 8, 8) == "bruck");
  // A team of 2 on a host of 4 processes: its 2 images fit the 2 cores.
  const SelectionTable crowded(config, kCores, 1, 4);
  CHECK(pick(crowded, CollKind::Allreduce, 2, 8) == "recursive_doubling");
}

}  // namespace
}  // namespace carflow
