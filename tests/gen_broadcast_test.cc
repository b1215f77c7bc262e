// Broadcast generators (graph/generators/broadcast_*.cc): exact message
// counts with and without segmentation, tree shapes and depths, and the
// LogP tree's optimality against a brute-force search over all schedules.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/logp_tree.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

CollectiveSpec broadcast_spec(const std::string& algorithm, uint32_t P, uint32_t root,
                              uint64_t nbytes, uint64_t segment_bytes = 0, uint32_t radix = 0) {
  CollectiveSpec spec = testref::make_spec(CollKind::Broadcast, algorithm, P, root, nbytes);
  spec.segment_bytes = segment_bytes;
  spec.radix = radix;
  return spec;
}

uint64_t messages(const GlobalDag& dag) { return dag_stats(dag).messages; }

// The tree of a tree broadcast, read back from its DAG in team ranks: each
// image's parent is the peer of its first receive, its children the peers of
// its segment-0 sends in CAR order (the send order): the first message on
// each link, tag 1 (the builder numbers a link's messages from 1). Root:
// parent -1.
struct DagTree {
  std::vector<int64_t> parent;
  std::vector<std::vector<uint32_t>> children;
};

DagTree tree_of(const GlobalDag& dag) {
  const uint32_t P = dag.spec.images;
  DagTree t{std::vector<int64_t>(P, -1), std::vector<std::vector<uint32_t>>(P)};
  for (uint32_t i = 0; i < P; ++i) {
    for (const Car& car : dag.images[i].cars) {
      if (car.kind == CarKind::Recv && car.tag == 1 && t.parent[i] < 0) t.parent[i] = car.peer;
      if (car.kind == CarKind::Send && car.tag == 1) t.children[i].push_back(car.peer);
    }
  }
  return t;
}

// Longest root-to-leaf path in edges; fails on a cycle or a second root.
uint32_t depth_of(const DagTree& t) {
  uint32_t depth = 0, roots = 0;
  for (uint32_t i = 0; i < t.parent.size(); ++i) {
    uint32_t d = 0;
    for (int64_t v = i; t.parent[v] >= 0; v = t.parent[v]) {
      REQUIRE(d <= t.parent.size());
      ++d;
    }
    roots += d == 0;
    depth = std::max(depth, d);
  }
  CHECK(roots == 1);
  return depth;
}

uint32_t ceil_log(uint32_t P, uint32_t k) {
  uint32_t m = 0;
  for (uint64_t span = 1; span < P; span *= k) ++m;
  return m;
}

// --- message counts --------------------------------------------------------

TEST_CASE("tree broadcasts send exactly P-1 messages per segment") {
  struct Case {
    const char* algorithm;
    uint32_t radix;
  };
  const Case cases[] = {{"binary", 0}, {"chain", 0}, {"knomial", 0}, {"knomial", 2},
                        {"knomial", 3}, {"knomial", 4}, {"knomial", 8}};
  for (const Case& c : cases) {
    for (uint32_t P = 1; P <= 33; ++P) {
      for (uint32_t root : {0u, P / 2, P - 1}) {
        for (uint64_t nbytes : {uint64_t{0}, uint64_t{1}, uint64_t{1000}, uint64_t{65544}}) {
          for (uint64_t segment : {uint64_t{0}, uint64_t{1024}, uint64_t{4096}}) {
            const CollectiveSpec spec =
                broadcast_spec(c.algorithm, P, root, nbytes, segment, c.radix);
            const uint64_t segments = split_segments(nbytes, segment, 1).size();
            INFO(c.algorithm, " radix=", c.radix, " P=", P, " root=", root, " nbytes=", nbytes,
                 " segment=", segment);
            const GlobalDag dag = testref::generate_valid(spec);
            CHECK(messages(dag) == (P - 1) * segments);
            CHECK(dag_stats(dag).message_bytes == (P - 1) * nbytes);
          }
        }
      }
    }
  }
}

TEST_CASE("logp broadcast sends exactly P-1 messages, one per tree edge") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t root : {0u, P / 2, P - 1}) {
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{1}, uint64_t{65544}}) {
        CollectiveSpec spec = broadcast_spec("logp", P, root, nbytes);
        INFO("P=", P, " root=", root, " nbytes=", nbytes);
        CHECK(messages(testref::generate_valid(spec)) == P - 1);
        spec.logp_L = 5000, spec.logp_o = 100, spec.logp_g = 100;  // flat-ish
        CHECK(messages(testref::generate_valid(spec)) == P - 1);
      }
    }
  }
  CHECK_FALSE(GeneratorRegistry::instance().find(CollKind::Broadcast, "logp")->segmented);
}

// Subtree of vr in the binomial tree: [vr, vr + size), counted from parents.
std::vector<uint32_t> binomial_subtree_sizes(uint32_t P) {
  std::vector<uint32_t> size(P, 1);
  for (uint32_t v = P; v-- > 1;) size[patterns::binomial_node(v, P).parent] += size[v];
  return size;
}

// Scatter: one message per non-root vr whose subtree range holds bytes.
// Ring: every non-root vr receives each nonempty piece outside its subtree
// range once; the root receives nothing. Empty pieces are never sent.
uint64_t scatter_allgather_messages(uint32_t P, uint64_t nbytes) {
  const std::vector<Segment> pieces = split_blocks(nbytes, P, 1);
  const std::vector<uint32_t> size = binomial_subtree_sizes(P);
  uint64_t count = 0;
  for (uint32_t v = 1; v < P; ++v) {
    uint64_t subtree_bytes = 0;
    for (uint32_t j = v; j < v + size[v]; ++j) subtree_bytes += pieces[j].length;
    count += subtree_bytes > 0;
    for (uint32_t j = 0; j < P; ++j) count += pieces[j].length > 0 && (j < v || j >= v + size[v]);
  }
  return count;
}

TEST_CASE("scatter_allgather sends P^2-1 minus the pieces receivers already hold") {
  // Closed forms for nbytes >= P: P = 1: 0; P = 2: scatter 1 + ring 1 (piece
  // 0 to vr 1); P = 4: scatter 3, ring vr1 3 + vr2 2 + vr3 3 = 11.
  CHECK(scatter_allgather_messages(1, 100) == 0);
  CHECK(scatter_allgather_messages(2, 100) == 2);
  CHECK(scatter_allgather_messages(4, 100) == 11);
  CHECK(scatter_allgather_messages(8, 100) == 8 * 8 - 1 - 5 - 7);
  // nbytes < P: only pieces 0..nbytes-1 hold a byte.
  CHECK(scatter_allgather_messages(8, 0) == 0);
  CHECK(scatter_allgather_messages(8, 1) == 7);  // piece 0 around the ring
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t root : {0u, P / 2, P - 1}) {
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{1}, uint64_t{5}, uint64_t{P}, uint64_t{1000},
                              uint64_t{65544}}) {
        INFO("P=", P, " root=", root, " nbytes=", nbytes);
        const GlobalDag dag = testref::generate_valid(broadcast_spec("scatter_allgather", P, root, nbytes));
        CHECK(messages(dag) == scatter_allgather_messages(P, nbytes));
        // Every non-root image receives each byte exactly once, the root none.
        for (uint32_t i = 0; i < P; ++i) {
          uint64_t received = 0;
          for (const Car& car : dag.images[i].cars) {
            if (car.is_receive()) received += car.dst.length;
          }
          CHECK(received == (i == dag.spec.root ? 0 : nbytes));
          CHECK(dag.images[i].temps.empty());
        }
      }
    }
  }
}

TEST_CASE("scatter_allgather delivers the root's bytes when nbytes < P and when not") {
  for (uint32_t P : {1u, 2u, 3u, 6u, 9u, 16u, 21u}) {
    for (uint64_t nbytes :
         {uint64_t{0}, uint64_t{1}, uint64_t{P - 1}, uint64_t{P + 3}, uint64_t{777}}) {
      for (uint32_t root : {0u, P - 1, P / 2}) {
        testref::check_generator(broadcast_spec("scatter_allgather", P, root, nbytes), 4);
      }
    }
  }
}

// --- shapes and depths -----------------------------------------------------

TEST_CASE("knomial broadcast with radix 2 is the binomial tree, send order included") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : {0u, P / 3, P - 1}) {
      const DagTree knomial = tree_of(testref::generate_valid(broadcast_spec("knomial", P, root, 64, 0, 2)));
      const DagTree binomial = tree_of(testref::generate_valid(broadcast_spec("binomial", P, root, 64)));
      INFO("P=", P, " root=", root);
      CHECK(knomial.parent == binomial.parent);
      CHECK(knomial.children == binomial.children);
    }
  }
}

TEST_CASE("knomial broadcast has depth ceil(log_k P) at most, the most nonzero base-k digits") {
  for (uint32_t k : {2u, 3u, 4u, 8u}) {
    for (uint32_t P = 1; P <= 80; ++P) {
      uint32_t most_digits = 0;  // the depth of vr is its count of nonzero base-k digits
      for (uint32_t vr = 0; vr < P; ++vr) {
        uint32_t digits = 0;
        for (uint32_t x = vr; x > 0; x /= k) digits += x % k != 0;
        most_digits = std::max(most_digits, digits);
      }
      for (uint32_t root : {0u, P - 1}) {
        INFO("k=", k, " P=", P, " root=", root);
        const DagTree t = tree_of(testref::generate_valid(broadcast_spec("knomial", P, root, 8, 0, k)));
        const uint32_t depth = depth_of(t);
        CHECK(depth == most_digits);
        CHECK(depth <= ceil_log(P, k));
        // Equality whenever some vr < P is all nonzero digits (always for k = 2).
        uint64_t all_ones = 0;
        for (uint32_t m = 0; m < ceil_log(P, k); ++m) all_ones = all_ones * k + 1;
        if (all_ones < P) CHECK(depth == ceil_log(P, k));
        if (k == 2) CHECK(depth == patterns::ceil_log2(P + 1) - 1);  // floor(log2 P)
        // Fan-out: at most (k-1) * ceil(log_k P) children at the root.
        CHECK(t.children[root].size() <= (k - 1) * ceil_log(P, k));
      }
    }
  }
  // Radix 0 means 4.
  for (uint32_t P : {5u, 16u, 17u, 33u}) {
    CHECK(tree_of(testref::generate_valid(broadcast_spec("knomial", P, 1 % P, 8, 0, 0))).children ==
          tree_of(testref::generate_valid(broadcast_spec("knomial", P, 1 % P, 8, 0, 4))).children);
  }
}

TEST_CASE("knomial broadcast with radix 3 and 8 delivers the root's bytes, segmented too") {
  for (uint32_t k : {3u, 5u, 8u, 100u}) {
    for (uint32_t P : {1u, 2u, 4u, 9u, 10u, 27u, 30u}) {
      for (uint64_t segment : {uint64_t{0}, uint64_t{100}}) {
        testref::check_generator(broadcast_spec("knomial", P, P / 2, 1000, segment, k), 2);
      }
    }
  }
}

TEST_CASE("binary broadcast is the heap-order tree of depth floor(log2 P)") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : {0u, P / 2, P - 1}) {
      INFO("P=", P, " root=", root);
      const DagTree t = tree_of(testref::generate_valid(broadcast_spec("binary", P, root, 8)));
      CHECK(depth_of(t) == patterns::ceil_log2(P + 1) - 1);
      for (uint32_t vr = 1; vr < P; ++vr) {
        CHECK(t.parent[patterns::real_rank(vr, root, P)] ==
              patterns::real_rank((vr - 1) / 2, root, P));
      }
    }
  }
}

TEST_CASE("chain broadcast is the chain root -> root+1 -> ... of depth P-1") {
  for (uint32_t P = 1; P <= 40; ++P) {
    for (uint32_t root : {0u, P / 2, P - 1}) {
      INFO("P=", P, " root=", root);
      const DagTree t = tree_of(testref::generate_valid(broadcast_spec("chain", P, root, 8, 4)));
      CHECK(depth_of(t) == P - 1);
      for (uint32_t i = 0; i < P; ++i) {
        if (i != root) CHECK(t.parent[i] == (i + P - 1) % P);
      }
    }
  }
}

// --- LogP --------------------------------------------------------------------

struct LogpParams {
  uint64_t L, o, g;
};

// Completion time of a broadcast along `tree` in the LogP model: the k-th
// child (k from 0) of a node informed at t is informed at
// t + k * max(g, o) + o + L + o. Fails unless the tree spans 0..P-1 from 0.
uint64_t evaluate_logp(const LogpTree& tree, const LogpParams& m) {
  const uint32_t P = static_cast<uint32_t>(tree.parent.size());
  const uint64_t gap = std::max(m.g, m.o), hop = m.L + 2 * m.o;
  std::vector<uint64_t> at(P, 0);
  std::vector<bool> seen(P, false);
  std::vector<uint32_t> queue{0};
  seen[0] = true;
  uint64_t completion = 0;
  for (size_t q = 0; q < queue.size(); ++q) {
    const uint32_t v = queue[q];
    for (size_t k = 0; k < tree.children[v].size(); ++k) {
      const uint32_t c = tree.children[v][k];
      REQUIRE(c < P);
      REQUIRE_FALSE(seen[c]);
      REQUIRE(tree.parent[c] == v);
      seen[c] = true;
      at[c] = at[v] + k * gap + hop;
      completion = std::max(completion, at[c]);
      queue.push_back(c);
    }
  }
  CHECK(queue.size() == P);
  CHECK(at == tree.informed_at);
  return completion;
}

// The least completion time over every broadcast schedule: step by step, any
// informed node starts its next send (max(g, o) after its previous one, or
// when it got the data) to a new node. Nodes with the same next send time
// are interchangeable, so only one of them is tried; branches no better than
// the best found are cut.
class LogpBruteForce {
 public:
  LogpBruteForce(uint32_t P, const LogpParams& m)
      : P_(P), gap_(std::max(m.g, m.o)), hop_(m.L + 2 * m.o), next_send_(P, 0) {}

  uint64_t optimum() {
    best_ = std::numeric_limits<uint64_t>::max();
    search(1, 0);
    return best_;
  }

 private:
  void search(uint32_t informed, uint64_t latest) {
    if (informed == P_) {
      best_ = std::min(best_, latest);
      return;
    }
    for (uint32_t i = 0; i < informed; ++i) {
      const uint64_t t = next_send_[i];
      const auto earlier = next_send_.begin() + i;
      if (std::find(next_send_.begin(), earlier, t) != earlier) continue;
      const uint64_t arrival = t + hop_;
      if (std::max(latest, arrival) >= best_) continue;
      next_send_[i] = t + gap_;
      next_send_[informed] = arrival;
      search(informed + 1, std::max(latest, arrival));
      next_send_[i] = t;
    }
  }

  uint32_t P_;
  uint64_t gap_, hop_;
  std::vector<uint64_t> next_send_;
  uint64_t best_ = 0;
};

TEST_CASE("logp tree's completion time equals the brute-force optimum for P <= 10") {
  for (uint64_t L : {1u, 2u, 3u, 5u}) {
    for (uint64_t o : {0u, 1u, 2u}) {
      for (uint64_t g : {1u, 2u, 3u}) {
        for (uint32_t P = 1; P <= 10; ++P) {
          const LogpParams m{L, o, g};
          INFO("P=", P, " L=", L, " o=", o, " g=", g);
          const LogpTree tree = build_logp_tree(P, L, o, g);
          const uint64_t completion = evaluate_logp(tree, m);
          CHECK(completion == tree.completion_time);
          const uint64_t optimum = LogpBruteForce(P, m).optimum();
          CHECK(completion == optimum);
          // The evaluator on two fixed shapes, which bound the optimum.
          LogpTree flat, chain;
          flat.parent.assign(P, kLogpNoParent);
          flat.children.assign(P, {});
          flat.informed_at.assign(P, 0);
          chain = flat;
          const uint64_t gap = std::max(g, o), hop = L + 2 * o;
          for (uint32_t v = 1; v < P; ++v) {
            flat.parent[v] = 0;
            flat.children[0].push_back(v);
            flat.informed_at[v] = (v - 1) * gap + hop;
            chain.parent[v] = v - 1;
            chain.children[v - 1].push_back(v);
            chain.informed_at[v] = v * hop;
          }
          const uint64_t last = P > 1 ? P - 1 : 0;
          CHECK(evaluate_logp(flat, m) == (P > 1 ? (last - 1) * gap + hop : 0));
          CHECK(evaluate_logp(chain, m) == last * hop);
          CHECK(optimum <= std::min(evaluate_logp(flat, m), evaluate_logp(chain, m)));
        }
      }
    }
  }
}

// With L = g and o = 0 the optimal tree is a binomial tree (GASNet collectives notes v1.7, "Notes
// on algorithms"), numbered here in the order nodes are informed.
TEST_CASE("logp tree is flat when latency dominates and binomial when L equals the gap") {
  for (uint32_t P = 1; P <= 33; ++P) {
    INFO("P=", P);
    const LogpTree flat = build_logp_tree(P, 1000, 0, 1);
    CHECK(flat.children[0].size() == P - 1);
    const LogpTree binomial = build_logp_tree(P, 10, 0, 10);
    CHECK(binomial.completion_time == 10 * uint64_t{patterns::ceil_log2(P)});
    CHECK(binomial.children[0].size() == patterns::ceil_log2(P));
  }
}

TEST_CASE("logp broadcast follows build_logp_tree over virtual ranks, defaults when all 0") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t root : {0u, P / 2, P - 1}) {
      for (const LogpParams& m :
           {LogpParams{0, 0, 0}, LogpParams{1000, 300, 400}, LogpParams{100, 10, 50},
            LogpParams{20000, 100, 100}}) {
        CollectiveSpec spec = broadcast_spec("logp", P, root, 100);
        spec.logp_L = static_cast<uint32_t>(m.L);
        spec.logp_o = static_cast<uint32_t>(m.o);
        spec.logp_g = static_cast<uint32_t>(m.g);
        const bool defaults = m.L == 0 && m.o == 0 && m.g == 0;
        const LogpTree want = defaults ? build_logp_tree(P, 1000, 300, 400)
                                       : build_logp_tree(P, m.L, m.o, m.g);
        INFO("P=", P, " root=", root, " L=", m.L, " o=", m.o, " g=", m.g);
        const DagTree got = tree_of(testref::generate_valid(spec));
        for (uint32_t vr = 0; vr < P; ++vr) {
          const uint32_t r = patterns::real_rank(vr, root, P);
          if (vr == 0) {
            CHECK(got.parent[r] == -1);
          } else {
            CHECK(got.parent[r] == patterns::real_rank(want.parent[vr], root, P));
          }
          std::vector<uint32_t> children;
          for (uint32_t c : want.children[vr]) children.push_back(patterns::real_rank(c, root, P));
          CHECK(got.children[r] == children);
        }
        if (P <= 17 && root == P / 2) testref::check_generator(spec, 2);
      }
    }
  }
}

}  // namespace
}  // namespace carflow
