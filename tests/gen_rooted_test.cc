// Rooted data movement (scatter, gather: flat and binomial), direct permute
// and the k-ary barrier: exact message counts, the shape of each tree, and
// data checks for the layouts the generic sweep does not name explicitly.
#include <doctest/doctest.h>

#include <algorithm>
#include <random>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

TEST_CASE("flat and binomial scatter and gather send exactly P-1 messages for every root") {
  for (CollKind kind : {CollKind::Scatter, CollKind::Gather}) {
    for (const char* algorithm : {"flat", "binomial"}) {
      for (uint32_t P = 1; P <= 40; ++P) {
        for (uint32_t root : testref::roots_for(P)) {
          for (uint64_t nbytes : {uint64_t{0}, uint64_t{5}}) {
            CollectiveSpec spec = testref::make_spec(kind, algorithm, P, root, nbytes);
            INFO(coll_kind_name(kind), " ", algorithm, " P=", P, " root=", root, " nbytes=", nbytes);
            CHECK(dag_stats(testref::generate_valid(spec)).messages == P - 1);
          }
        }
      }
    }
  }
}

// In binomial scatter (down) and gather (up) every message runs along a
// tree edge, and each non-root image has exactly one message with its parent.
void check_binomial_edges(CollKind kind) {
  const bool down = kind == CollKind::Scatter;
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : testref::roots_for(P)) {
      const GlobalDag dag = testref::generate_valid(testref::make_spec(kind, "binomial", P, root, 3));
      std::vector<uint32_t> with_parent(P, 0);
      uint32_t at_root = 0;
      for (const MessageEdge& e : testref::edges_of(dag)) {
        const uint32_t parent = down ? e.from_image : e.to_image;
        const uint32_t child = down ? e.to_image : e.from_image;
        const uint32_t vc = patterns::virtual_rank(child, root, P);
        const patterns::BinomialNode node = patterns::binomial_node(vc, P);
        INFO(coll_kind_name(kind), " P=", P, " root=", root, " edge ", e.from_image, " -> ", e.to_image);
        REQUIRE(node.has_parent);
        CHECK(patterns::real_rank(node.parent, root, P) == parent);
        ++with_parent[child];
        if (parent == root) ++at_root;
      }
      for (uint32_t i = 0; i < P; ++i) {
        INFO(coll_kind_name(kind), " P=", P, " root=", root, " image ", i);
        CHECK(with_parent[i] == (i == root ? 0u : 1u));
      }
      INFO(coll_kind_name(kind), " P=", P, " root=", root);
      CHECK(at_root == patterns::ceil_log2(P));
    }
  }
}

TEST_CASE("binomial scatter sends one message per tree edge, ceil(log2 P) from the root") {
  check_binomial_edges(CollKind::Scatter);
}

TEST_CASE("binomial gather sends one message per tree edge, ceil(log2 P) into the root") {
  check_binomial_edges(CollKind::Gather);
}

TEST_CASE("binomial scatter and gather finish in ceil(log2 P) message hops") {
  for (CollKind kind : {CollKind::Scatter, CollKind::Gather}) {
    for (uint32_t P = 1; P <= 33; ++P) {
      const GlobalDag dag = testref::generate_valid(testref::make_spec(kind, "binomial", P, P / 2, 16));
      // Per hop a SEND and its RECV, plus one COPY layer at the root (packing
      // or unpacking, all in parallel) and the exit JOIN; intermediate COPYs
      // run beside the forwarding.
      INFO(coll_kind_name(kind), " P=", P);
      CHECK(dag_stats(dag).critical_path <= 2 * patterns::ceil_log2(P) + 2);
    }
  }
}

TEST_CASE("binomial scatter and gather with a packed layout and root 0 use no temp at the root") {
  for (CollKind kind : {CollKind::Scatter, CollKind::Gather}) {
    for (uint32_t P : {2u, 5u, 8u, 13u}) {
      const GlobalDag dag = testref::generate_valid(testref::make_spec(kind, "binomial", P, 0, 8));
      INFO(coll_kind_name(kind), " P=", P);
      CHECK(dag.images[0].temps.empty());
      testref::check_generator(dag.spec);
    }
  }
}

TEST_CASE("binomial scatter and gather with root != 0 pack only the range that wraps") {
  for (CollKind kind : {CollKind::Scatter, CollKind::Gather}) {
    for (uint32_t P = 2; P <= 17; ++P) {
      for (uint32_t root = 1; root < P; ++root) {
        const CollectiveSpec spec = testref::make_spec(kind, "binomial", P, root, 8);
        const GlobalDag dag = testref::generate_valid(spec);
        INFO(coll_kind_name(kind), " P=", P, " root=", root);
        CHECK(dag.images[root].temps.size() <= 1);
        CHECK(testref::check_generator(spec, 2).ok);
      }
    }
  }
}

// counts {3, 0, 5, 2, 4} at displs {20, 2, 9, 0, 30}: out of order, with gaps
// and an empty block.
CollectiveSpec scattered_displs(CollKind kind, const char* algorithm) {
  CollectiveSpec spec = testref::make_spec(kind, algorithm, 5, 3, 0);
  spec.counts = {3, 0, 5, 2, 4};
  spec.displs = {20, 2, 9, 0, 30};
  return spec;
}

TEST_CASE("scatter and gather with non-contiguous displs, P=5, root=3, deliver the blocks") {
  for (CollKind kind : {CollKind::Scatter, CollKind::Gather}) {
    for (const char* algorithm : {"flat", "binomial"}) {
      const CollectiveSpec spec = scattered_displs(kind, algorithm);
      INFO(coll_kind_name(kind), " ", algorithm);
      const testref::GenOutcome out = testref::check_generator(spec, 5);
      CHECK(out.ok);
      CHECK(dag_stats(out.dag).messages == 4);
    }
  }
}

uint64_t moved(const std::vector<uint32_t>& perm) {
  uint64_t n = 0;
  for (uint32_t i = 0; i < perm.size(); ++i) n += perm[i] != i;
  return n;
}

TEST_CASE("direct permute sends one message per image that moves and COPYs fixed points") {
  std::mt19937 rng(7);
  for (uint32_t P = 1; P <= 24; ++P) {
    std::vector<std::vector<uint32_t>> perms;
    std::vector<uint32_t> identity(P);
    for (uint32_t i = 0; i < P; ++i) identity[i] = i;
    perms.push_back(identity);
    std::vector<uint32_t> shift(P), swap_pairs = identity;
    for (uint32_t i = 0; i < P; ++i) shift[i] = (i + 1) % P;
    perms.push_back(shift);
    for (uint32_t i = 0; i + 1 < P; i += 2) std::swap(swap_pairs[i], swap_pairs[i + 1]);
    perms.push_back(swap_pairs);  // fixed point at the end when P is odd
    for (int t = 0; t < 3; ++t) {
      std::vector<uint32_t> p = identity;
      std::shuffle(p.begin(), p.end(), rng);
      perms.push_back(p);
    }
    for (const auto& perm : perms) {
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{9}}) {
        CollectiveSpec spec = testref::make_spec(CollKind::Permute, "direct", P, 0, nbytes);
        spec.perm = perm;
        INFO("P=", P, " nbytes=", nbytes, " moved=", moved(perm));
        const testref::GenOutcome out = testref::check_generator(spec, 2);
        REQUIRE(out.ok);
        CHECK(dag_stats(out.dag).messages == moved(perm));
      }
    }
  }
}

// Height of a k-ary tree over P ranks (rank r's parent is (r-1)/k).
uint32_t kary_height(uint32_t P, uint32_t k) {
  uint32_t height = 0;
  for (uint64_t r = P - 1; r > 0; r = (r - 1) / k) ++height;
  return height;
}

TEST_CASE("k-ary barrier sends 2(P-1) messages and is 2 * height hops deep") {
  for (uint32_t radix : {0u, 1u, 2u, 3u, 4u, 8u, 64u}) {
    for (uint32_t P = 1; P <= 40; ++P) {
      CollectiveSpec spec = testref::make_spec(CollKind::Barrier, "kary", P, 0, 0);
      spec.radix = radix;
      const GlobalDag dag = testref::generate_valid(spec);
      const DagStats stats = dag_stats(dag);
      const uint32_t h = kary_height(P, radix == 0 ? 4 : radix);
      INFO("radix=", radix, " P=", P, " height=", h);
      CHECK(stats.messages == 2 * (P - 1));
      // Fan-in: leaf SEND, (RECV, SEND) per inner level, RECV at rank 0;
      // fan-out the same back down; then the leaf's exit JOIN.
      CHECK(stats.critical_path == (h == 0 ? 1 : 4 * h + 1));
    }
  }
}

TEST_CASE("k-ary barrier: every image's exit waits for every image's entry, any radix") {
  for (uint32_t radix : {1u, 2u, 3u, 5u}) {
    for (uint32_t P = 1; P <= 20; ++P) {
      CollectiveSpec spec = testref::make_spec(CollKind::Barrier, "kary", P, 0, 0);
      spec.radix = radix;
      const GlobalDag dag = testref::generate_valid(spec);
      const auto reached = testref::exits_reached_from_entries(dag);
      for (uint32_t from = 0; from < P; ++from) {
        for (uint32_t to = 0; to < P; ++to) {
          INFO("radix=", radix, " P=", P, ": image ", to, "'s exit does not wait for image ", from);
          CHECK(reached[from][to]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace carflow
