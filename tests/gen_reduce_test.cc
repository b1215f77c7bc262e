// Allreduce (rabenseifner, reduce_bcast) and reduce_vec (binomial,
// rabenseifner, flat): every image's destination against the sequential
// reduction, with the non-commutative 2x2 matrix product where a generator
// declares preserves_order; no two CARs of an image touch the same bytes
// unordered; exact message counts and message rounds of each structure.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

struct ReduceGen {
  CollKind kind;
  std::string name;
  bool segmented;
};
const ReduceGen kGenerators[] = {
    {CollKind::Allreduce, "rabenseifner", false},
    {CollKind::Allreduce, "reduce_bcast", true},
    {CollKind::Allreduce, "direct", false},
    {CollKind::ReduceVec, "binomial", true},
    {CollKind::ReduceVec, "rabenseifner", false},
    {CollKind::ReduceVec, "flat", false},
};
const uint32_t kImages[] = {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 32};
const uint64_t kCounts[] = {0, 1, 3, 1000};
constexpr uint64_t kSmallSegment = 64;  // bytes: 4 matrices, 8 words

// Roots worth trying: both ends and the middle (allreduce has none).
std::vector<uint32_t> roots_for(CollKind kind, uint32_t P) {
  if (kind == CollKind::Allreduce) return {0};
  return testref::roots_for(P);
}

std::vector<uint64_t> segments_for(const ReduceGen& gen) {
  if (gen.segmented) return {0, kSmallSegment};
  return {0};
}

CollectiveSpec reduce_spec(CollKind kind, const std::string& name, uint32_t P, uint32_t root,
                           uint64_t count, uint32_t elem_size, uint64_t segment_bytes = 0) {
  CollectiveSpec spec = testref::make_spec(kind, name, P, root, count * elem_size);
  spec.elem_size = elem_size;
  spec.segment_bytes = segment_bytes;
  return spec;
}

// ---- structure ----------------------------------------------------------------

std::vector<uint64_t> sends_per_image(const GlobalDag& dag, bool bytes) {
  std::vector<uint64_t> out;
  for (const LocalDag& local : dag.images) {
    uint64_t total = 0;
    for (const Car& car : local.cars) {
      if (car.kind == CarKind::Send) total += bytes ? car.src.length : 1;
    }
    out.push_back(total);
  }
  return out;
}

// ---- registration ---------------------------------------------------------------

TEST_CASE("reduction generators are registered with honest order and segmentation flags") {
  for (const ReduceGen& g : kGenerators) {
    INFO(std::string(coll_kind_name(g.kind)), " ", g.name);
    const GeneratorInfo* info = GeneratorRegistry::instance().find(g.kind, g.name);
    REQUIRE(info != nullptr);
    CHECK(info->preserves_order);
    CHECK(info->segmented == g.segmented);
  }
}

TEST_CASE("the matrix product the order tests rely on is not commutative on the test inputs") {
  // Otherwise a generator that reorders operands would pass the order checks.
  const CollectiveSpec spec = reduce_spec(CollKind::ReduceVec, "flat", 5, 0, 3, 16);
  std::vector<testref::Bytes> src = testref::inputs(spec);
  const std::vector<testref::Bytes> forward = testref::expected_reduction(spec, src, &testref::mat2_mul);
  std::reverse(src.begin(), src.end());
  const std::vector<testref::Bytes> backward = testref::expected_reduction(spec, src, &testref::mat2_mul);
  CHECK(forward[0] != backward[0]);
}

// ---- results ----------------------------------------------------------------------

TEST_CASE("reduction generators equal the sequential reduction for every P, count, root and segment") {
  for (const ReduceGen& g : kGenerators) {
    for (uint32_t P : kImages) {
      for (uint32_t root : roots_for(g.kind, P)) {
        for (uint64_t count : kCounts) {
          for (uint32_t elem_size : {16u, 8u}) {  // matrix product, then byte sum
            for (uint64_t segment : segments_for(g)) {
              testref::check_generator(reduce_spec(g.kind, g.name, P, root, count, elem_size, segment));
            }
          }
        }
      }
    }
  }
}

TEST_CASE("reduction generators equal the sequential reduction for a 65536-element vector") {
  for (const ReduceGen& g : kGenerators) {
    for (uint32_t P : {4u, 13u, 16u}) {
      for (uint32_t root : roots_for(g.kind, P)) {
        for (uint64_t segment : {uint64_t{0}, uint64_t{1} << 16}) {
          if (segment != 0 && !g.segmented) continue;
          testref::check_generator(reduce_spec(g.kind, g.name, P, root, 65536, 16, segment), 2);
        }
      }
    }
  }
}

TEST_CASE("element size 1 with counts not divisible by P still reduces every byte") {
  for (const ReduceGen& g : kGenerators) {
    for (uint32_t P : {3u, 6u, 13u}) {
      for (uint32_t root : roots_for(g.kind, P)) {
        for (uint64_t count : {uint64_t{2}, uint64_t{5}, uint64_t{101}}) {
          testref::check_generator(reduce_spec(g.kind, g.name, P, root, count, 1, g.segmented ? 7 : 0));
        }
      }
    }
  }
}

TEST_CASE("no CAR of a reduction DAG touches bytes another CAR uses without being ordered with it") {
  for (const ReduceGen& g : kGenerators) {
    for (uint32_t P : kImages) {
      for (uint32_t root : roots_for(g.kind, P)) {
        for (uint64_t count : {uint64_t{3}, uint64_t{100}}) {
          for (uint64_t segment : segments_for(g)) {
            const CollectiveSpec spec = reduce_spec(g.kind, g.name, P, root, count, 16, segment);
            INFO(std::string(coll_kind_name(g.kind)), " ", g.name, " P=", P, " root=", root, " count=", count,
                 " segment=", segment);
            testref::check_no_races(testref::generate_valid(spec));
          }
        }
      }
    }
  }
}

TEST_CASE("reduce_vec writes only the root's destination") {
  for (const std::string name : {"binomial", "rabenseifner", "flat"}) {
    for (uint32_t P : kImages) {
      for (uint32_t root : roots_for(CollKind::ReduceVec, P)) {
        const GlobalDag dag = testref::generate_valid(reduce_spec(CollKind::ReduceVec, name, P, root, 10, 16));
        for (const LocalDag& local : dag.images) {
          INFO(name, " P=", P, " root=", root, " image ", local.image);
          CHECK(local.dst_bytes == (local.image == root ? 160u : 0u));
        }
      }
    }
  }
}

// ---- message counts and rounds ---------------------------------------------

TEST_CASE("binomial reduce_vec sends P-1 messages per segment for every root") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : roots_for(CollKind::ReduceVec, P)) {
      for (uint64_t segment : {uint64_t{0}, kSmallSegment}) {
        const CollectiveSpec spec = reduce_spec(CollKind::ReduceVec, "binomial", P, root, 10, 16, segment);
        const uint64_t segments = split_segments(spec.nbytes, segment, 16).size();
        INFO("P=", P, " root=", root, " segments=", segments);
        CHECK(dag_stats(testref::generate_valid(spec)).messages == (P - 1) * segments);
      }
    }
  }
}

TEST_CASE("binomial reduce_vec: every image sends once to its tree parent; root 0 takes ceil(log2 P) rounds") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : roots_for(CollKind::ReduceVec, P)) {
      const GlobalDag dag = testref::generate_valid(reduce_spec(CollKind::ReduceVec, "binomial", P, root, 3, 16));
      std::vector<uint32_t> sent(P, 0);
      for (const MessageEdge& e : testref::edges_of(dag)) ++sent[e.from_image];
      for (uint32_t i = 0; i < P; ++i) {
        INFO("P=", P, " root=", root, " image ", i);
        CHECK(sent[i] == (i == root ? 0u : 1u));
      }
      // Right of the root a binomial tree of P - root ranks, left of it one
      // of root ranks whose top sends to the root.
      const uint32_t right = patterns::ceil_log2(P - root), left = patterns::ceil_log2(root);
      const uint32_t want = root == 0 ? right : std::max(right, left) + 1;
      INFO("P=", P, " root=", root);
      CHECK(testref::message_rounds(dag) == want);
      CHECK(want <= patterns::ceil_log2(P) + 1);
    }
  }
}

TEST_CASE("flat reduce_vec sends P-1 messages, all to the root, combined one per round") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : roots_for(CollKind::ReduceVec, P)) {
      const GlobalDag dag = testref::generate_valid(reduce_spec(CollKind::ReduceVec, "flat", P, root, 3, 16));
      const std::vector<MessageEdge> edges = testref::edges_of(dag);
      INFO("P=", P, " root=", root);
      CHECK(edges.size() == P - 1);
      for (const MessageEdge& e : edges) CHECK(e.to_image == root);
      CHECK(testref::message_rounds(dag) == P - 1);
    }
  }
}

TEST_CASE("reduce_bcast allreduce sends 2(P-1) messages per segment in 2 log2 P rounds") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint64_t segment : {uint64_t{0}, kSmallSegment}) {
      const CollectiveSpec spec = reduce_spec(CollKind::Allreduce, "reduce_bcast", P, 0, 10, 16, segment);
      const uint64_t segments = split_segments(spec.nbytes, segment, 16).size();
      const GlobalDag dag = testref::generate_valid(spec);
      INFO("P=", P, " segments=", segments);
      CHECK(dag_stats(dag).messages == 2 * (P - 1) * segments);
      if (segment == 0) {
        const uint32_t bound = 2 * patterns::ceil_log2(P);
        if ((P & (P - 1)) == 0) {
          CHECK(testref::message_rounds(dag) == bound);
        } else {
          CHECK(testref::message_rounds(dag) <= bound);
        }
      }
    }
  }
}

TEST_CASE("direct allreduce sends P(P-1) whole vectors, none waiting for a message") {
  for (uint32_t P = 2; P <= 17; ++P) {
    const CollectiveSpec spec = reduce_spec(CollKind::Allreduce, "direct", P, 0, 10, 16);
    const GlobalDag dag = testref::generate_valid(spec);
    INFO("P=", P);
    CHECK(dag_stats(dag).messages == uint64_t{P} * (P - 1));
    CHECK(dag_stats(dag).message_bytes == uint64_t{P} * (P - 1) * spec.nbytes);
    CHECK(testref::message_depth(dag) == 1);  // no SEND waits for a message
  }
}

TEST_CASE("rabenseifner allreduce: 2 log2 P' rounds, P' 2 log2 P' + 2 rem messages") {
  for (uint32_t P = 1; P <= 40; ++P) {
    const uint32_t pof2 = patterns::floor_pow2(P), rem = P - pof2, L = patterns::ceil_log2(pof2);
    // 32 elements per block, so halves split evenly.
    const uint64_t count = uint64_t{32} * pof2, n = count * 16;
    const GlobalDag dag = testref::generate_valid(reduce_spec(CollKind::Allreduce, "rabenseifner", P, 0, count, 16));
    INFO("P=", P);
    CHECK(dag_stats(dag).messages == uint64_t{pof2} * 2 * L + 2 * rem);
    CHECK(testref::message_rounds(dag) == 2 * L + (rem ? 2 : 0));
    const std::vector<uint64_t> sends = sends_per_image(dag, false), bytes = sends_per_image(dag, true);
    for (uint32_t i = 0; i < P; ++i) {
      INFO("image ", i);
      const bool folded_away = i < 2 * rem && i % 2 == 0;
      const bool folded = i < 2 * rem && i % 2 == 1;
      // Halving and doubling each move n (P'-1)/P' bytes; folding adds n.
      CHECK(sends[i] == (folded_away ? 1 : 2 * L + (folded ? 1 : 0)));
      CHECK(bytes[i] == (folded_away ? n : 2 * (n - n / pof2) + (folded ? n : 0)));
    }
  }
}

TEST_CASE("rabenseifner reduce_vec: rem + P' log2 P' + P' - 1 messages in 2 log2 P' (+1) rounds") {
  for (uint32_t P = 1; P <= 40; ++P) {
    const uint32_t pof2 = patterns::floor_pow2(P), rem = P - pof2, L = patterns::ceil_log2(pof2);
    for (uint32_t root : roots_for(CollKind::ReduceVec, P)) {
      const uint64_t count = uint64_t{32} * pof2, n = count * 16;
      const GlobalDag dag = testref::generate_valid(reduce_spec(CollKind::ReduceVec, "rabenseifner", P, root, count, 16));
      INFO("P=", P, " root=", root);
      CHECK(dag_stats(dag).messages == rem + uint64_t{pof2} * L + (pof2 - 1));
      CHECK(testref::message_rounds(dag) == 2 * L + (rem ? 1 : 0));
      // The root is never folded away; it sends only while halving.
      const std::vector<uint64_t> sends = sends_per_image(dag, false), bytes = sends_per_image(dag, true);
      CHECK(sends[root] == L);
      CHECK(bytes[root] == n - n / pof2);
    }
  }
}

}  // namespace
}  // namespace carflow
