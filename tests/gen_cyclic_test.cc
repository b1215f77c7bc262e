// GASNet-style block-cyclic collectives: CyclicLayout by hand and by brute
// force; reduce (rows, scalar) and prefix_reduce (dissemination) against the
// sequential reference for every P, size, source layout and destination
// layout, with the non-commutative matrix product where a generator claims to
// preserve operand order; exact message counts and the shape of each
// algorithm's messages.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/simulate.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

const std::vector<uint32_t> kImages{1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 32};
const std::vector<uint64_t> kElems{0, 1, 3, 1000};
constexpr uint64_t kLargeElems = 262144;

struct ArrayLayout {
  uint64_t blksz, offset;
};

// Source layouts: block sizes 0 (indefinite), 1 (cyclic), 3 and 64, at
// offsets 0 and 5; the indefinite layout's offset is an image (0 and P-1).
std::vector<ArrayLayout> src_layouts(uint32_t P) {
  std::vector<ArrayLayout> out{{0, 0}};
  if (P > 1) out.push_back({0, P - 1});
  for (uint64_t blksz : {1, 3, 64}) {
    for (uint64_t offset : {0, 5}) out.push_back({blksz, offset});
  }
  return out;
}

// Destination layouts of prefix_reduce: the source's own, cyclic, blocks of
// 64 at offset 5, and indefinite on image 0.
std::vector<ArrayLayout> dst_layouts(ArrayLayout src) {
  return {src, {1, 0}, {64, 5}, {0, 0}};
}

CollectiveSpec cyclic_spec(CollKind kind, const char* algorithm, uint32_t P, uint32_t root, uint64_t elems,
                           uint32_t elem_size, ArrayLayout src, ArrayLayout dst = {0, 0}) {
  CollectiveSpec spec = testref::make_spec(kind, algorithm, P, root, elems * elem_size);
  spec.elem_size = elem_size;
  spec.src_blksz = src.blksz;
  spec.src_offset = src.offset;
  if (kind == CollKind::PrefixReduce) {
    spec.dst_blksz = dst.blksz;
    spec.dst_offset = dst.offset;
  }
  return spec;
}

// ---- CyclicLayout -----------------------------------------------------------

// P = 3, blksz 2, offset 3, 10 elements: global elements 3..12 in blocks
// B1 = {3} (image 1), B2 = {4,5} (2), B3 = {6,7} (0), B4 = {8,9} (1),
// B5 = {10,11} (2), B6 = {12} (0); local index (B / 3) * 2 + g % 2.
TEST_CASE("CyclicLayout places a block-cyclic array with an offset as worked out by hand") {
  const CyclicLayout L(3, 2, 3, 10);
  const uint32_t owner[10] = {1, 2, 2, 0, 0, 1, 1, 2, 2, 0};
  const uint64_t local[10] = {1, 0, 1, 2, 3, 2, 3, 2, 3, 4};
  for (uint64_t k = 0; k < 10; ++k) {
    INFO("k=", k);
    CHECK(L.owner(k) == owner[k]);
    CHECK(L.local(k) == local[k]);
  }
  CHECK(L.first_image() == 1);
  CHECK(L.rows() == 2);
  CHECK(L.chunk() == 2);
  CHECK(L.virtual_rank(1) == 0);
  CHECK(L.virtual_rank(2) == 1);
  CHECK(L.virtual_rank(0) == 2);
  CHECK(L.real_image(2) == 0);
  // image: local_first, count, chunks, first_chunk, extent
  const uint64_t want[3][5] = {{2, 3, 2, 2, 5}, {1, 3, 2, 1, 4}, {0, 4, 2, 2, 4}};
  for (uint32_t i = 0; i < 3; ++i) {
    INFO("image ", i);
    CHECK(L.local_first(i) == want[i][0]);
    CHECK(L.count(i) == want[i][1]);
    CHECK(L.chunks(i) == want[i][2]);
    CHECK(L.first_chunk(i) == want[i][3]);
    CHECK(L.extent(i) == want[i][4]);
  }
}

TEST_CASE("CyclicLayout with fewer blocks than images leaves the others empty") {
  // P = 5, blksz 3, offset 4, 4 elements: 4,5 in B1 (image 1), 6,7 in B2 (image 2).
  const CyclicLayout L(5, 3, 4, 4);
  CHECK(L.first_image() == 1);
  CHECK(L.rows() == 1);
  const uint32_t owner[4] = {1, 1, 2, 2};
  const uint64_t local[4] = {1, 2, 0, 1};
  for (uint64_t k = 0; k < 4; ++k) {
    INFO("k=", k);
    CHECK(L.owner(k) == owner[k]);
    CHECK(L.local(k) == local[k]);
  }
  CHECK(L.count(1) == 2);
  CHECK(L.local_first(1) == 1);
  CHECK(L.first_chunk(1) == 2);
  CHECK(L.count(2) == 2);
  CHECK(L.local_first(2) == 0);
  CHECK(L.extent(2) == 2);
  for (uint32_t i : {0u, 3u, 4u}) {
    INFO("image ", i);
    CHECK(L.count(i) == 0);
    CHECK(L.chunks(i) == 0);
    CHECK(L.extent(i) == 0);
  }
}

TEST_CASE("CyclicLayout with block size 0 puts the whole array on the image named by the offset") {
  const CyclicLayout L(4, 0, 2, 5);
  CHECK(L.first_image() == 2);
  CHECK(L.rows() == 1);
  CHECK(L.chunk() == 0);
  for (uint64_t k = 0; k < 5; ++k) {
    CHECK(L.owner(k) == 2);
    CHECK(L.local(k) == k);
  }
  CHECK(L.count(2) == 5);
  CHECK(L.chunks(2) == 1);
  CHECK(L.first_chunk(2) == 5);
  CHECK(L.extent(2) == 5);
  for (uint32_t i : {0u, 1u, 3u}) CHECK(L.extent(i) == 0);
  const CyclicLayout empty(4, 0, 2, 0);
  CHECK(empty.rows() == 0);
  CHECK(empty.extent(2) == 0);
}

// Every image's elements, in array order, are one contiguous run of its
// buffer; the run splits at block boundaries into chunks(i) chunks, the
// first first_chunk(i) long; chunk c of virtual rank v is row c; chunk
// counts are R or R-1 with the R's a prefix of virtual ranks.
TEST_CASE("CyclicLayout runs, chunks and rows agree with an element-by-element walk") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
    for (uint64_t blksz : {1, 2, 3, 7}) {
      for (uint64_t offset : {0, 1, 5, 13}) {
        for (uint64_t count : {0, 1, 2, 6, 20, 41}) {
          INFO("P=", P, " blksz=", blksz, " offset=", offset, " count=", count);
          const CyclicLayout L(P, blksz, offset, count);
          std::vector<std::vector<uint64_t>> locals(P), blocks(P);
          for (uint64_t k = 0; k < count; ++k) {
            const uint64_t block = (offset + k) / blksz;
            REQUIRE(L.owner(k) == block % P);
            locals[L.owner(k)].push_back(L.local(k));
            if (blocks[L.owner(k)].empty() || blocks[L.owner(k)].back() != block) {
              blocks[L.owner(k)].push_back(block);
            }
          }
          const uint64_t R = L.rows();
          for (uint32_t i = 0; i < P; ++i) {
            INFO("image ", i);
            REQUIRE(L.count(i) == locals[i].size());
            for (uint64_t j = 0; j < locals[i].size(); ++j) CHECK(locals[i][j] == L.local_first(i) + j);
            CHECK(L.chunks(i) == blocks[i].size());
            if (L.count(i) > 0) {
              const uint64_t first_block = blocks[i][0];
              uint64_t in_first = 0;
              for (uint64_t k = 0; k < count; ++k) in_first += (offset + k) / blksz == first_block;
              CHECK(L.first_chunk(i) == in_first);
              CHECK(first_block == (offset / blksz) + L.virtual_rank(i));
            }
            const uint64_t n = L.chunks(i);
            CHECK((n == R || n + 1 == R));
            if (L.virtual_rank(i) > 0) CHECK(n <= L.chunks(L.real_image(L.virtual_rank(i) - 1)));
          }
          if (count > 0) CHECK(L.owner(0) == L.first_image());
        }
      }
    }
  }
}

// ---- reduce -----------------------------------------------------------------

TEST_CASE("rows reduce combines a block-cyclic array in array order for every P, size, layout and root") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (uint32_t root : testref::roots_for(P)) {
          for (uint32_t es : {16u, 8u}) {
            testref::check_generator(cyclic_spec(CollKind::Reduce, "rows", P, root, elems, es, src));
          }
          testref::check_generator(cyclic_spec(CollKind::Reduce, "rows", P, root, elems, 16, src), 3,
                                   &testref::sequence_hash);
        }
      }
    }
  }
}

TEST_CASE("scalar reduce gives the commutative result for every P, size, layout and root") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (uint32_t root : testref::roots_for(P)) {
          testref::check_generator(cyclic_spec(CollKind::Reduce, "scalar", P, root, elems, 8, src));
        }
      }
    }
  }
}

TEST_CASE("reduce generators are correct on a large array") {
  for (uint32_t P : {5u, 16u}) {
    for (ArrayLayout src : {ArrayLayout{1, 0}, ArrayLayout{64, 5}}) {
      testref::check_generator(cyclic_spec(CollKind::Reduce, "rows", P, P / 2, kLargeElems, 16, src), 1,
                               &testref::sequence_hash);
      testref::check_generator(cyclic_spec(CollKind::Reduce, "scalar", P, P / 2, kLargeElems, 8, src), 1);
    }
  }
}

TEST_CASE("reduce generators declare their operand order honestly") {
  const GeneratorRegistry& registry = GeneratorRegistry::instance();
  REQUIRE(registry.find(CollKind::Reduce, "rows") != nullptr);
  REQUIRE(registry.find(CollKind::Reduce, "scalar") != nullptr);
  CHECK(registry.find(CollKind::Reduce, "rows")->preserves_order);
  CHECK_FALSE(registry.find(CollKind::Reduce, "scalar")->preserves_order);
  CHECK_FALSE(registry.find(CollKind::Reduce, "rows")->segmented);
  CHECK_FALSE(registry.find(CollKind::Reduce, "scalar")->segmented);
}

// Whether simulating `spec` with `op` reproduces the reference on every image.
bool matches_reference(const CollectiveSpec& spec, const testref::Combine& op) {
  const GlobalDag dag = testref::generate_valid(spec);
  const std::vector<testref::Bytes> src = testref::inputs(spec);
  const std::vector<testref::Bytes> want = testref::expected_reduction(spec, src, op);
  std::vector<testref::Bytes> s = src, d = testref::blank_outputs(spec);
  SimResult result;
  std::string error;
  REQUIRE(simulate(dag, &s, &d, op, 0, &result, &error));
  return d == want;
}

// The tests can fail: a non-commutative operator notices the scalar
// reduce's reordering (each image's blocks folded before the images are
// combined), the matrix product only on a short array.
TEST_CASE("non-commutative operators tell the order-preserving rows reduce from the reordering scalar one") {
  for (uint64_t elems : {uint64_t{12}, uint64_t{1000}}) {
    INFO("elems=", elems);
    const CollectiveSpec rows = cyclic_spec(CollKind::Reduce, "rows", 4, 0, elems, 16, {1, 0});
    const CollectiveSpec scalar = cyclic_spec(CollKind::Reduce, "scalar", 4, 0, elems, 16, {1, 0});
    CHECK(matches_reference(rows, &testref::sequence_hash));
    CHECK_FALSE(matches_reference(scalar, &testref::sequence_hash));
    CHECK(matches_reference(rows, &testref::mat2_mul));
    if (elems == 12) CHECK_FALSE(matches_reference(scalar, &testref::mat2_mul));
  }
}

// Images holding data (those with n_v > 0).
uint32_t holders(const CyclicLayout& L, uint32_t P) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < P; ++i) n += L.count(i) > 0;
  return n;
}

// Rows reduce: every holder but v 0 sends its n_v rows to its binomial
// parent once; v 0 sends the one result element to the root unless it is it.
TEST_CASE("rows reduce sends one message per holder but v 0 along its binomial tree, plus one to the root") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (uint32_t root : testref::roots_for(P)) {
          const CollectiveSpec spec = cyclic_spec(CollKind::Reduce, "rows", P, root, elems, 16, src);
          const CyclicLayout L = src_cyclic(spec);
          INFO("P=", P, " elems=", elems, " src=", src.blksz, "/", src.offset, " root=", root);
          const GlobalDag dag = testref::generate_valid(spec);
          const bool to_root = elems > 0 && root != L.first_image();
          uint64_t bytes = to_root ? 16 : 0;
          for (uint32_t i = 0; i < P; ++i) {
            if (L.virtual_rank(i) != 0) bytes += L.chunks(i) * 16;
          }
          const DagStats stats = dag_stats(dag);
          CHECK(stats.messages == (elems == 0 ? 0 : holders(L, P) - 1) + (to_root ? 1 : 0));
          const uint64_t rounds = patterns::ceil_log2(holders(L, P)) + (to_root ? 1 : 0);
          CHECK(testref::message_depth(dag) <= rounds);
          if (holders(L, P) == P && (P & (P - 1)) == 0) CHECK(testref::message_depth(dag) == rounds);
          CHECK(stats.message_bytes == bytes);
          for (const MessageEdge& e : testref::edges_of(dag)) {
            const uint32_t vf = L.virtual_rank(e.from_image);
            if (vf == 0) {
              CHECK(e.to_image == root);
              continue;
            }
            const patterns::BinomialNode node = patterns::binomial_node(vf, P);
            REQUIRE(node.has_parent);
            CHECK(e.to_image == L.real_image(node.parent));
          }
        }
      }
    }
  }
}

TEST_CASE("scalar reduce sends P-1 messages when every image holds data, fewer otherwise, one element each") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (uint32_t root : testref::roots_for(P)) {
          const CollectiveSpec spec = cyclic_spec(CollKind::Reduce, "scalar", P, root, elems, 8, src);
          const CyclicLayout L = src_cyclic(spec);
          INFO("P=", P, " elems=", elems, " src=", src.blksz, "/", src.offset, " root=", root);
          const GlobalDag dag = testref::generate_valid(spec);
          const DagStats stats = dag_stats(dag);
          CHECK(stats.message_bytes == stats.messages * 8);
          CHECK(testref::message_depth(dag) <= patterns::ceil_log2(P));
          CHECK(stats.messages <= P - 1);
          if (holders(L, P) == P) CHECK(stats.messages == P - 1);
          if (elems == 0) CHECK(stats.messages == 0);
          if (src.blksz == 0 && elems > 0) {
            // One holder: its value climbs one edge per set bit of its
            // virtual rank below the root.
            const uint32_t vr = patterns::virtual_rank(src.offset, root, P);
            CHECK(stats.messages == static_cast<uint64_t>(__builtin_popcount(vr)));
          }
        }
      }
    }
  }
}

// OUT_ALLSYNC: no image's exit completes before every data CAR of every
// image has; checked on layouts where some images hold nothing.
TEST_CASE("block-cyclic generators stay correct under sync modes; OUT_ALLSYNC waits for all data") {
  const struct {
    CollKind kind;
    const char* name;
    uint32_t elem_size;
  } gens[] = {{CollKind::Reduce, "rows", 16}, {CollKind::Reduce, "scalar", 8},
              {CollKind::PrefixReduce, "dissemination", 16}};
  for (const auto& gen : gens) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
      for (ArrayLayout src : {ArrayLayout{1, 0}, ArrayLayout{3, 5}, ArrayLayout{0, P - 1}}) {
        for (uint64_t elems : {uint64_t{3}, uint64_t{100}}) {
          for (int flags : {kSpecOutAllSync, kSpecInAllSync | kSpecOutAllSync}) {
            CollectiveSpec spec =
                cyclic_spec(gen.kind, gen.name, P, P / 2, elems, gen.elem_size, src, {1, 0});
            spec.flags = flags;
            INFO(gen.name, " P=", P, " src=", src.blksz, "/", src.offset, " elems=", elems, " flags=", flags);
            const GlobalDag dag = testref::check_generator(spec).dag;
            CollectiveSpec bare = spec;
            bare.flags = 0;
            const GlobalDag plain = testref::generate_valid(bare);
            testref::check_exits_wait_for_all_data(dag, plain);
          }
        }
      }
    }
  }
}

// ---- prefix_reduce ----------------------------------------------------------

TEST_CASE("dissemination prefix_reduce matches the sequential prefix for every P, size and pair of layouts") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (ArrayLayout dst : dst_layouts(src)) {
          for (uint32_t es : {16u, 8u}) {
            testref::check_generator(
                cyclic_spec(CollKind::PrefixReduce, "dissemination", P, 0, elems, es, src, dst));
          }
          testref::check_generator(
              cyclic_spec(CollKind::PrefixReduce, "dissemination", P, 0, elems, 16, src, dst), 3,
              &testref::sequence_hash);
        }
      }
    }
  }
}

TEST_CASE("dissemination prefix_reduce is correct on a large array, in place and reblocked") {
  for (uint32_t P : {5u, 16u}) {
    for (ArrayLayout src : {ArrayLayout{1, 0}, ArrayLayout{64, 5}}) {
      for (ArrayLayout dst : {src, ArrayLayout{64, 0}, ArrayLayout{0, 0}}) {
        testref::check_generator(
            cyclic_spec(CollKind::PrefixReduce, "dissemination", P, 0, kLargeElems, 16, src, dst), 1,
            &testref::sequence_hash);
      }
    }
  }
}

TEST_CASE("dissemination prefix_reduce declares that it preserves operand order") {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(CollKind::PrefixReduce, "dissemination");
  REQUIRE(gen != nullptr);
  CHECK(gen->preserves_order);
  CHECK_FALSE(gen->segmented);
}

// Pairs (from, to), from != to, that share at least one element, and the
// number of pieces: maximal runs of k contiguous in both layouts.
struct Reblocking {
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  uint64_t pieces = 0;
};
Reblocking reblocking(const CyclicLayout& L, const CyclicLayout& D, uint64_t count) {
  Reblocking r;
  for (uint64_t k = 0; k < count; ++k) {
    if (L.owner(k) != D.owner(k)) r.pairs.insert({L.owner(k), D.owner(k)});
    const bool continues = k > 0 && L.owner(k) == L.owner(k - 1) && D.owner(k) == D.owner(k - 1) &&
                           L.local(k) == L.local(k - 1) + 1 && D.local(k) == D.local(k - 1) + 1;
    if (!continues) ++r.pieces;
  }
  return r;
}

// Dissemination round k: every holder w >= 2^k hears from w - 2^k (n_w rows);
// then the R-1 row totals go down a binomial tree (P-1 messages) when R >= 2;
// then one message per (from, to) pair when the layouts differ.
uint64_t expected_prefix_messages(const CollectiveSpec& spec) {
  const CyclicLayout L = src_cyclic(spec), D = dst_cyclic(spec);
  const uint32_t P = spec.images;
  uint64_t messages = 0;
  for (uint64_t step = 1; step < P; step *= 2) {
    for (uint64_t w = step; w < P; ++w) messages += L.chunks(L.real_image(static_cast<uint32_t>(w))) > 0;
  }
  if (L.rows() >= 2) messages += P - 1;
  const bool same = spec.src_blksz == spec.dst_blksz && spec.src_offset == spec.dst_offset;
  if (!same) messages += reblocking(L, D, spec.nbytes / spec.elem_size).pairs.size();
  return messages;
}

TEST_CASE("dissemination prefix_reduce sends exactly the dissemination, broadcast and reblocking messages") {
  for (uint32_t P : kImages) {
    for (uint64_t elems : kElems) {
      for (ArrayLayout src : src_layouts(P)) {
        for (ArrayLayout dst : dst_layouts(src)) {
          const CollectiveSpec spec =
              cyclic_spec(CollKind::PrefixReduce, "dissemination", P, 0, elems, 16, src, dst);
          const CyclicLayout L = src_cyclic(spec), D = dst_cyclic(spec);
          INFO("P=", P, " elems=", elems, " src=", src.blksz, "/", src.offset, " dst=", dst.blksz, "/",
               dst.offset);
          const GlobalDag dag = testref::generate_valid(spec);
          CHECK(dag_stats(dag).messages == expected_prefix_messages(spec));
          const bool same = src.blksz == dst.blksz && src.offset == dst.offset;
          const uint64_t levels = patterns::ceil_log2(P);
          const uint64_t rounds = levels * (L.rows() >= 2 ? 2 : 1) + (same ? 0 : 1);
          CHECK(testref::message_depth(dag) <= rounds);
          if (same && L.rows() >= 2 && (P & (P - 1)) == 0) CHECK(testref::message_depth(dag) == rounds);
          uint64_t copies = 0;
          for (const LocalDag& image : dag.images) {
            for (const Car& car : image.cars) copies += car.kind == CarKind::Copy;
          }
          // Packing and unpacking: at most two COPYs per piece, none in place.
          CHECK(copies <= (same ? 0 : 2 * reblocking(L, D, elems).pieces));
          for (const MessageEdge& e : testref::edges_of(dag)) {
            const Car& send = dag.images[e.from_image].cars[e.from_car];
            if (send.tag >= 32) continue;
            const uint32_t vf = L.virtual_rank(e.from_image), vt = L.virtual_rank(e.to_image);
            CHECK(vt == vf + (1u << send.tag));
          }
        }
      }
    }
  }
}

TEST_CASE("reblocking blocks of 4 to cyclic on 4 images sends one message per pair of distinct images") {
  // Blocks of 4 on 4 images to cyclic: every image's block goes to all four,
  // so 4 * 3 messages between distinct images after the prefix itself.
  const CollectiveSpec spec =
      cyclic_spec(CollKind::PrefixReduce, "dissemination", 4, 0, 16, 16, {4, 0}, {1, 0});
  const GlobalDag dag = testref::generate_valid(spec);
  uint64_t reblock = 0;
  for (const MessageEdge& e : testref::edges_of(dag)) reblock += dag.images[e.from_image].cars[e.from_car].tag == 33;
  CHECK(reblock == 12);
  CHECK(dag_stats(dag).messages == 12 + (3 + 2));  // dissemination; R = 1: no totals
  testref::check_generator(spec);
}

}  // namespace
}  // namespace carflow
