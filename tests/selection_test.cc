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

struct Want {
  CollKind kind;
  uint32_t images;  // the team's
  uint64_t nbytes;
  const char* algorithm;
  bool commutative = true;
};

// Every choice of `table` is `want`'s.
void check_choices(uint32_t local_images, uint32_t host_images, std::initializer_list<Want> wants) {
  const SelectionTable table(Config{}, kCores, local_images, host_images);
  for (const Want& w : wants) {
    INFO(coll_kind_name(w.kind), " P=", w.images, " bytes=", w.nbytes, " local=", local_images,
         " host=", host_images);
    CHECK(table.choose(w.kind, w.images, w.nbytes, 8, w.commutative)->name == std::string(w.algorithm));
  }
}

TEST_CASE("processes outnumbering the cores take one-round algorithms for small calls") {
  const uint64_t direct_below = Config{}.allreduce_direct_bytes;
  // 4 processes of one image each on a 2-core host.
  check_choices(1, 4,
                {{CollKind::Allreduce, 4, 8, "direct"},
                 {CollKind::Allreduce, 4, direct_below - 8, "direct"},
                 {CollKind::Allreduce, 4, direct_below, "recursive_doubling"},
                 {CollKind::Allreduce, 4, 8, "direct", /*commutative=*/false},  // keeps order
                 {CollKind::Barrier, 4, 0, "direct"},
                 {CollKind::GatherAll, 4, 8, "direct"},
                 {CollKind::Exchange, 4, 8, "pairwise"},
                 {CollKind::Scatter, 4, 8, "flat"},
                 {CollKind::Gather, 4, 8, "binomial"},
                 {CollKind::Scan, 4, 8, "linear"}});
  // reduce_scatter's size is one block: direct below the cut-off, for any
  // function (direct keeps operand order), then the bandwidth choice.
  const uint64_t rs_direct_below = Config{}.reduce_scatter_direct_bytes;
  check_choices(1, 4,
                {{CollKind::ReduceScatter, 4, 8, "direct"},
                 {CollKind::ReduceScatter, 4, 8, "direct", /*commutative=*/false},
                 {CollKind::ReduceScatter, 4, rs_direct_below - 8, "direct"},
                 {CollKind::ReduceScatter, 4, rs_direct_below, "ring"},
                 {CollKind::ReduceScatter, 2, 8, "ring"}});
}

TEST_CASE("image threads outnumbering the cores keep the fewest-message choices") {
  // One process of 8 image threads on a 2-core host.
  check_choices(8, 8,
                {{CollKind::Allreduce, 8, 8, "reduce_bcast"},
                 {CollKind::Barrier, 8, 0, "kary"},
                 {CollKind::GatherAll, 8, 8, "hierarchical"},
                 {CollKind::Exchange, 8, 8, "bruck"},
                 {CollKind::Scatter, 8, 8, "binomial"}});
}

TEST_CASE("a core per image keeps the latency choices") {
  check_choices(1, 2,
                {{CollKind::Allreduce, 2, 8, "recursive_doubling"},
                 {CollKind::Barrier, 2, 0, "dissemination"},
                 {CollKind::Exchange, 2, 8, "pairwise"}});
}

TEST_CASE("two images take recursive doubling's one exchange for allreduce up to the pair size") {
  const uint64_t split = Config{}.allreduce_split_bytes, ring = Config{}.allreduce_ring_bytes;
  const uint64_t pair = Config{}.allreduce_pair_bytes;
  REQUIRE(pair > split);
  // Two image threads of one process, and two processes.
  for (uint32_t local : {2u, 1u}) {
    check_choices(local, 2,
                  {{CollKind::Allreduce, 2, 8, "recursive_doubling"},
                   {CollKind::Allreduce, 2, ring, "recursive_doubling"},
                   {CollKind::Allreduce, 2, split, "recursive_doubling"},
                   {CollKind::Allreduce, 2, pair - 8, "recursive_doubling"},
                   {CollKind::Allreduce, 2, pair - 8, "recursive_doubling", /*commutative=*/false},
                   {CollKind::Allreduce, 2, pair, "rabenseifner"}});
  }
  // More images (4 over two hosts of 2) keep the bandwidth choices.
  check_choices(1, 2,
                {{CollKind::Allreduce, 4, ring, "reduce_bcast"},
                 {CollKind::Allreduce, 4, split, "rabenseifner"}});
  check_choices(2, 2, {{CollKind::Allreduce, 4, split, "rabenseifner"}});
}

TEST_CASE("only the team's images on this host count against its cores") {
  // 2 images per host, 8 hosts: a team of 8 does not oversubscribe any host.
  check_choices(1, 2,
                {{CollKind::Allreduce, 8, 8, "recursive_doubling"},
                 {CollKind::Barrier, 8, 0, "dissemination"},
                 {CollKind::GatherAll, 8, 8, "recursive_doubling"},
                 {CollKind::Exchange, 8, 8, "bruck"},
                 {CollKind::ReduceScatter, 8, 8, "recursive_halving"}});
  // A team of 2 on a host of 4 processes: its 2 images fit the 2 cores.
  check_choices(1, 4, {{CollKind::Allreduce, 2, 8, "recursive_doubling"}});
}

}  // namespace
}  // namespace carflow
