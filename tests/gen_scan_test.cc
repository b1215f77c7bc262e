// Scan (dissemination, linear) and reduce-scatter (ring, direct,
// recursive_halving): results against the sequential reference for every P,
// size, element size and form (inclusive / exclusive, uniform / v), with the
// non-commutative matrix product wherever a generator claims to preserve
// operand order; plus exact message counts and the shape of each algorithm.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"
#include "graph/simulate.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

const std::vector<uint32_t> kImages{1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 32};
const std::vector<uint64_t> kElems{0, 1, 3, 1000};
constexpr uint64_t kLargeElems = 65536;

CollectiveSpec scan_spec(const char* algorithm, uint32_t P, uint64_t elems, uint32_t elem_size,
                         bool exclusive, uint64_t segment_bytes = 0) {
  CollectiveSpec spec = testref::make_spec(CollKind::Scan, algorithm, P, 0, elems * elem_size);
  spec.elem_size = elem_size;
  spec.flags = exclusive ? kExclusiveFlag : 0;
  spec.segment_bytes = segment_bytes;
  return spec;
}

// elems per block (uniform form).
CollectiveSpec reduce_scatter_spec(const char* algorithm, uint32_t P, uint64_t elems, uint32_t elem_size) {
  CollectiveSpec spec = testref::make_spec(CollKind::ReduceScatter, algorithm, P, 0, elems * elem_size);
  spec.elem_size = elem_size;
  return spec;
}

// The v form of make_variable with counts in whole elements: block sizes up
// to 2 * elems elements, every fifth block (i % 5 == 3) empty.
CollectiveSpec variable_spec(const char* algorithm, uint32_t P, uint64_t elems, uint32_t elem_size) {
  CollectiveSpec spec = reduce_scatter_spec(algorithm, P, elems, 1);
  spec.nbytes = elems;
  testref::make_variable(&spec, false);
  for (uint64_t& c : spec.counts) c *= elem_size;
  spec.elem_size = elem_size;
  return spec;
}

uint64_t messages_of(const CollectiveSpec& spec) { return dag_stats(testref::generate_valid(spec)).messages; }

// ---- declarations ---------------------------------------------------------

TEST_CASE("scan and reduce-scatter generators are registered with honest flags") {
  struct Want {
    CollKind kind;
    const char* name;
    bool preserves_order, segmented;
  };
  for (const Want& w : {Want{CollKind::Scan, "dissemination", true, false},
                        Want{CollKind::Scan, "linear", true, true},
                        Want{CollKind::ReduceScatter, "ring", false, false},
                        Want{CollKind::ReduceScatter, "direct", true, false},
                        Want{CollKind::ReduceScatter, "recursive_halving", true, false}}) {
    const GeneratorInfo* gen = GeneratorRegistry::instance().find(w.kind, w.name);
    INFO(w.name);
    REQUIRE(gen != nullptr);
    CHECK(gen->preserves_order == w.preserves_order);
    CHECK(gen->segmented == w.segmented);
    CHECK(gen->params == 0u);
  }
}

// Hazards (a CAR overwriting bytes a SEND or a REDUCE still reads) show
// only in some execution orders: many seeds on small cases.
TEST_CASE("every scan and reduce-scatter generator is race-free over 40 random orders") {
  for (uint32_t P : {2u, 3u, 4u, 5u, 6u, 7u, 8u, 9u, 12u, 16u, 17u}) {
    for (const char* algorithm : {"dissemination", "linear"}) {
      for (bool exclusive : {false, true}) {
        CHECK(testref::check_generator(scan_spec(algorithm, P, 3, 16, exclusive, 16), 40).ok);
      }
    }
    for (const char* algorithm : {"ring", "direct", "recursive_halving"}) {
      CHECK(testref::check_generator(reduce_scatter_spec(algorithm, P, 3, 16), 40).ok);
      CHECK(testref::check_generator(variable_spec(algorithm, P, 3, 16), 40).ok);
    }
  }
}

// ---- scan -----------------------------------------------------------------

TEST_CASE("dissemination and linear scan match the reference, inclusive and exclusive") {
  for (const char* algorithm : {"dissemination", "linear"}) {
    for (uint32_t P : kImages) {
      for (uint64_t elems : kElems) {
        for (uint32_t es : {16u, 8u}) {
          for (bool exclusive : {false, true}) {
            CHECK(testref::check_generator(scan_spec(algorithm, P, elems, es, exclusive)).ok);
          }
        }
      }
    }
  }
}

TEST_CASE("linear scan pipelines small segments, including ones that do not divide the vector") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (uint32_t es : {16u, 8u}) {
        for (uint64_t segment_elems : {1u, 7u}) {
          for (bool exclusive : {false, true}) {
            // A segment size that is not a whole number of elements is cut down to one.
            const uint64_t segment = segment_elems * es + (segment_elems == 7 ? 3 : 0);
            CHECK(testref::check_generator(scan_spec("linear", P, elems, es, exclusive, segment)).ok);
          }
        }
      }
    }
  }
}

TEST_CASE("scan of a large vector (65536 elements) matches the reference") {
  for (uint32_t P : {3u, 8u, 13u}) {
    for (uint32_t es : {16u, 8u}) {
      for (bool exclusive : {false, true}) {
        CHECK(testref::check_generator(scan_spec("dissemination", P, kLargeElems, es, exclusive), 1).ok);
        CHECK(testref::check_generator(scan_spec("linear", P, kLargeElems, es, exclusive, 65536), 1).ok);
      }
    }
  }
}

TEST_CASE("exclusive scan never writes image 0's destination") {
  for (const char* algorithm : {"dissemination", "linear"}) {
    for (uint32_t P : {1u, 2u, 5u, 16u}) {
      const GlobalDag dag = testref::generate_valid(scan_spec(algorithm, P, 3, 8, true, 8));
      for (const Car& car : dag.images[0].cars) {
        INFO(algorithm, " P=", P, " car ", car_kind_name(car.kind));
        CHECK(car.dst.space != BufferSpace::UserDst);
      }
    }
  }
}

TEST_CASE("dissemination scan sends sum over k of (P - 2^k) messages, r -> r + 2^k in round k") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (bool exclusive : {false, true}) {
      const GlobalDag dag = testref::generate_valid(scan_spec("dissemination", P, 5, 8, exclusive));
      uint64_t want = 0;
      for (uint32_t k = 0; k < patterns::ceil_log2(P); ++k) want += P - (1u << k);
      INFO("P=", P, " exclusive=", exclusive);
      CHECK(dag_stats(dag).messages == want);
      CHECK(dag_stats(dag).message_bytes == want * 40);
      for (const MessageEdge& e : testref::edges_of(dag)) {
        const uint32_t tag = dag.images[e.from_image].cars[e.from_car].tag;
        INFO("edge ", e.from_image, " -> ", e.to_image, " tag ", tag);
        CHECK(e.to_image == e.from_image + (1u << tag));
      }
    }
  }
}

TEST_CASE("linear scan sends P-1 messages per segment, each from r to r+1") {
  for (uint32_t P = 1; P <= 20; ++P) {
    for (uint64_t segment : {uint64_t{0}, uint64_t{16}, uint64_t{24}}) {
      for (bool exclusive : {false, true}) {
        const CollectiveSpec spec = scan_spec("linear", P, 10, 8, exclusive, segment);
        const GlobalDag dag = testref::generate_valid(spec);
        const uint64_t segments = split_segments(80, segment, 8).size();
        INFO("P=", P, " segment=", segment, " exclusive=", exclusive);
        CHECK(segments == (segment == 0 ? 1u : segment == 16 ? 5u : 4u));
        CHECK(dag_stats(dag).messages == (P - 1) * segments);
        for (const MessageEdge& e : testref::edges_of(dag)) CHECK(e.to_image == e.from_image + 1);
      }
    }
  }
}

// ---- reduce-scatter -------------------------------------------------------

const char* const kReduceScatter[] = {"ring", "direct", "recursive_halving"};

TEST_CASE("ring, direct and recursive-halving reduce-scatter match the reference (uniform blocks)") {
  for (const char* algorithm : kReduceScatter) {
    for (uint32_t P : kImages) {
      for (uint64_t elems : kElems) {
        for (uint32_t es : {16u, 8u}) {
          CHECK(testref::check_generator(reduce_scatter_spec(algorithm, P, elems, es)).ok);
        }
      }
    }
  }
}

TEST_CASE("reduce-scatter v form: unequal and empty blocks") {
  for (const char* algorithm : kReduceScatter) {
    for (uint32_t P : kImages) {
      for (uint64_t elems : kElems) {
        for (uint32_t es : {16u, 8u}) {
          CHECK(testref::check_generator(variable_spec(algorithm, P, elems, es)).ok);
        }
      }
      // Empty first and last blocks, and one image owning everything.
      for (uint32_t es : {16u, 8u}) {
        CollectiveSpec spec = reduce_scatter_spec(algorithm, P, 0, es);
        for (uint32_t i = 0; i < P; ++i) spec.counts.push_back((i == 0 || i + 1 == P) ? 0 : (i % 3) * es);
        CHECK(testref::check_generator(spec).ok);
        spec.counts.assign(P, 0);
        spec.counts[P / 2] = 5 * es;
        CHECK(testref::check_generator(spec).ok);
      }
    }
  }
}

TEST_CASE("reduce-scatter of large blocks (65536 elements in all) matches the reference") {
  for (const char* algorithm : kReduceScatter) {
    for (uint32_t P : {3u, 8u, 13u}) {
      for (uint32_t es : {16u, 8u}) {
        CHECK(testref::check_generator(reduce_scatter_spec(algorithm, P, kLargeElems / P, es), 1).ok);
      }
    }
  }
}

TEST_CASE("ring and direct reduce-scatter send P(P-1) messages; recursive halving 2 rem + P' log2 P'") {
  for (uint32_t P = 1; P <= 40; ++P) {
    const uint64_t pof2 = patterns::floor_pow2(P), rem = P - pof2;
    INFO("P=", P);
    CHECK(messages_of(reduce_scatter_spec("ring", P, 3, 8)) == uint64_t{P} * (P - 1));
    CHECK(messages_of(reduce_scatter_spec("direct", P, 3, 8)) == uint64_t{P} * (P - 1));
    CHECK(messages_of(reduce_scatter_spec("recursive_halving", P, 3, 8)) ==
          2 * rem + pof2 * patterns::ceil_log2(static_cast<uint32_t>(pof2)));
    CHECK(messages_of(variable_spec("recursive_halving", P, 3, 8)) ==
          2 * rem + pof2 * patterns::ceil_log2(static_cast<uint32_t>(pof2)));
  }
}

TEST_CASE("ring, direct and (power-of-two P) recursive halving send each block P-1 times in all") {
  for (uint32_t P = 1; P <= 40; ++P) {
    const uint64_t block = 3 * 8, want = uint64_t{P} * (P - 1) * block;
    INFO("P=", P);
    CHECK(dag_stats(testref::generate_valid(reduce_scatter_spec("ring", P, 3, 8))).message_bytes == want);
    CHECK(dag_stats(testref::generate_valid(reduce_scatter_spec("direct", P, 3, 8))).message_bytes == want);
    if (P == patterns::floor_pow2(P)) {
      CHECK(dag_stats(testref::generate_valid(reduce_scatter_spec("recursive_halving", P, 3, 8))).message_bytes == want);
    }
  }
}

TEST_CASE("recursive halving pairs new ranks at distance 2^k in round k") {
  for (uint32_t P = 2; P <= 40; ++P) {
    const uint32_t pof2 = patterns::floor_pow2(P), rem = P - pof2, rounds = patterns::ceil_log2(pof2);
    const GlobalDag dag = testref::generate_valid(reduce_scatter_spec("recursive_halving", P, 2, 8));
    auto newrank = [&](uint32_t r) { return r < 2 * rem ? r / 2 : r - rem; };
    for (const MessageEdge& e : testref::edges_of(dag)) {
      const uint32_t tag = dag.images[e.from_image].cars[e.from_car].tag;
      INFO("P=", P, " edge ", e.from_image, " -> ", e.to_image, " tag ", tag);
      if (tag == 0) {  // fold: even r < 2 rem into r + 1
        CHECK(e.from_image % 2 == 0);
        CHECK(e.to_image == e.from_image + 1);
        CHECK(e.to_image < 2 * rem);
      } else if (tag == 1 + rounds) {  // unfold: the folded image's block back
        CHECK(e.to_image + 1 == e.from_image);
        CHECK(e.from_image < 2 * rem);
      } else {
        CHECK((newrank(e.from_image) ^ newrank(e.to_image)) == (1u << (tag - 1)));
      }
    }
  }
}

// The ring's flag must say false: with a non-commutative operator its
// rotated combining order gives a different answer (this is what the
// order-preserving generators are checked against above).
TEST_CASE("ring reduce-scatter reorders operands, so it declares preserves_order = false") {
  const CollectiveSpec spec = reduce_scatter_spec("ring", 4, 2, 16);
  const GlobalDag dag = testref::generate_valid(spec);
  const auto src = testref::inputs(spec);
  const auto want = testref::expected_reduction(spec, src, &testref::mat2_mul);
  std::vector<Bytes> s = src, d = testref::blank_outputs(spec);
  SimResult result;
  std::string error;
  REQUIRE(simulate(dag, &s, &d, &testref::mat2_mul, 1, &result, &error));
  CHECK(d[3] == want[3]);  // block P-1 accumulates 0, 1, ..., P-1 in order
  CHECK(d[0] != want[0]);  // block 0 accumulates 1, ..., P-1, 0
}

}  // namespace
}  // namespace carflow

namespace carflow {
namespace {

// The CAR kinds of image `image`'s DAG, exit included.
std::vector<CarKind> kinds_of(const GlobalDag& dag, uint32_t image) {
  std::vector<CarKind> kinds;
  for (const Car& car : dag.images[image].cars) kinds.push_back(car.kind);
  return kinds;
}

TEST_CASE("two images: scan and allreduce combine as the data arrives (RECV_REDUCE, no REDUCE after it)") {
  // Scan (inclusive): image 1's x_0 op x_1 is one combining receive.
  CollectiveSpec scan = testref::make_spec(CollKind::Scan, "dissemination", 2, 0, 16);
  scan.elem_size = 8;
  const GlobalDag s = testref::generate_valid(scan);
  CHECK(kinds_of(s, 1) == std::vector<CarKind>{CarKind::RecvReduce, CarKind::Join});
  const Car& combine = s.images[1].cars[0];
  CHECK(combine.incoming_left);  // x_0 stays on the left
  CHECK(combine.src == user_src(0, 16));
  // Allreduce: each image sends its source and combines the partner's
  // into its destination, its own source the local operand.
  CollectiveSpec allreduce = testref::make_spec(CollKind::Allreduce, "recursive_doubling", 2, 0, 16);
  allreduce.elem_size = 8;
  const GlobalDag a = testref::generate_valid(allreduce);
  for (uint32_t image : {0u, 1u}) {
    CAPTURE(image);
    CHECK(kinds_of(a, image) == std::vector<CarKind>{CarKind::Send, CarKind::RecvReduce, CarKind::Join});
    CHECK(a.images[image].cars[1].incoming_left == (image == 1));  // the lower rank on the left
    CHECK(a.images[image].temps.empty());
  }
}

}  // namespace
}  // namespace carflow
