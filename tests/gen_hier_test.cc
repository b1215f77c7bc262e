// Node-aware generators (graph/generators/hierarchical.cc): broadcast,
// barrier, allreduce and gather_all named "hierarchical", for every P, every
// images_per_node (ppn) and every root: valid DAGs, the reference bytes
// under the sequential executor (the non-commutative sequence hash for
// allreduce), and the message locality each design promises: which images
// talk across nodes, how often, and to whom.
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/json.h"
#include "graph/registry.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

const CollKind kKinds[] = {CollKind::Broadcast, CollKind::Barrier, CollKind::Allreduce, CollKind::GatherAll};

// The ppn values every loop tries: one image per node, small nodes, one
// node exactly (P) and a ppn beyond the team (P+1).
std::vector<uint32_t> ppns_for(uint32_t P) {
  std::vector<uint32_t> ppns{1, 2, 3, 4, 8, P, P + 1};
  std::sort(ppns.begin(), ppns.end());
  ppns.erase(std::unique(ppns.begin(), ppns.end()), ppns.end());
  return ppns;
}

// Allreduce sizes count 16-byte elements (the sequence hash's element).
CollectiveSpec hier_spec(CollKind kind, uint32_t P, uint32_t ppn, uint32_t root, uint64_t size) {
  CollectiveSpec spec = testref::make_spec(kind, "hierarchical", P, root, size);
  spec.images_per_node = ppn;
  if (kind == CollKind::Allreduce) {
    spec.elem_size = 16;
    spec.nbytes = size * 16;
  }
  return spec;
}

// The node layout as the generators read it: ppn 0 is 1, ppn > P is P.
struct Nodes {
  uint32_t ppn, count;
  Nodes(uint32_t P, uint32_t ppn_in) : ppn(std::clamp(ppn_in, 1u, P)), count((P + ppn - 1) / ppn) {}
  uint32_t of(uint32_t r) const { return r / ppn; }
  bool is_first(uint32_t r) const { return r % ppn == 0; }  // leader of barrier, allreduce, gather_all
};

// Recursive doubling among `n` leaders: N' log2 N' + 2 (n - N') messages.
uint64_t rd_messages(uint32_t n) {
  const uint64_t pof2 = patterns::floor_pow2(n);
  return pof2 * patterns::ceil_log2(static_cast<uint32_t>(pof2)) + 2 * (n - pof2);
}

uint64_t cross_node_messages(const GlobalDag& dag, const Nodes& nodes) {
  uint64_t cross = 0;
  for (const MessageEdge& e : testref::edges_of(dag)) cross += nodes.of(e.from_image) != nodes.of(e.to_image);
  return cross;
}

// Per image: its SENDs' peers.
std::vector<std::vector<uint32_t>> send_peers(const GlobalDag& dag) {
  std::vector<std::vector<uint32_t>> peers(dag.spec.images);
  for (const LocalDag& local : dag.images) {
    for (const Car& car : local.cars) {
      if (car.kind == CarKind::Send) peers[local.image].push_back(car.peer);
    }
  }
  return peers;
}

std::vector<std::vector<uint32_t>> receive_peers(const GlobalDag& dag) {
  std::vector<std::vector<uint32_t>> peers(dag.spec.images);
  for (const LocalDag& local : dag.images) {
    for (const Car& car : local.cars) {
      if (car.is_receive()) peers[local.image].push_back(car.peer);
    }
  }
  return peers;
}

// ---- registration --------------------------------------------------------------

TEST_CASE("hierarchical generators exist for four kinds, read images_per_node, and flag order and segments honestly") {
  for (CollKind kind : kKinds) {
    const GeneratorInfo* gen = GeneratorRegistry::instance().find(kind, "hierarchical");
    INFO(std::string(coll_kind_name(kind)));
    REQUIRE(gen != nullptr);
    CHECK(gen->params == kUsesNodes);
    CHECK(gen->preserves_order);
    CHECK(gen->segmented == (kind == CollKind::Broadcast));
  }
}

TEST_CASE("images_per_node 0 builds the same DAGs as 1, and any value above P the same as P") {
  for (CollKind kind : kKinds) {
    for (uint32_t P : {1u, 2u, 5u, 12u, 17u}) {
      INFO(std::string(coll_kind_name(kind)), " P=", P);
      auto images = [&](uint32_t ppn) { return testref::generate_valid(hier_spec(kind, P, ppn, P / 2, 7)).images; };
      CHECK(images(0) == images(1));
      CHECK(images(P + 1) == images(P));
      CHECK(images(3 * P) == images(P));
    }
  }
}

// ---- broadcast -----------------------------------------------------------------

TEST_CASE("hierarchical broadcast delivers the root's bytes for P = 1..33, every ppn and every root") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      for (uint32_t root = 0; root < P; ++root) {
        for (uint64_t nbytes : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4100}}) {
          INFO("ppn=", ppn);
          CollectiveSpec spec = hier_spec(CollKind::Broadcast, P, ppn, root, nbytes);
          CHECK(testref::check_generator(spec, 1).ok);
          if (nbytes == 4100 && root % 4 == 0) {
            spec.segment_bytes = 1024;
            CHECK(testref::check_generator(spec, 1).ok);
          }
        }
      }
    }
  }
}

TEST_CASE("hierarchical broadcast sends P-1 messages per segment, exactly nodes-1 of them across nodes") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      const Nodes nodes(P, ppn);
      for (uint32_t root : testref::roots_for(P)) {
        for (uint64_t segment : {uint64_t{0}, uint64_t{1000}}) {
          CollectiveSpec spec = hier_spec(CollKind::Broadcast, P, ppn, root, 4100);
          spec.segment_bytes = segment;
          const uint64_t segments = split_segments(spec.nbytes, segment, 1).size();
          INFO("P=", P, " ppn=", ppn, " root=", root, " segment=", segment);
          const GlobalDag dag = testref::generate_valid(spec);
          CHECK(dag_stats(dag).messages == (P - 1) * segments);
          CHECK(cross_node_messages(dag, nodes) == (nodes.count - 1) * segments);
        }
      }
    }
  }
}

TEST_CASE("hierarchical broadcast with ppn = 4 on 16 images: 3 messages cross nodes, root to leaders to their nodes") {
  const Nodes nodes(16, 4);
  for (uint32_t root = 0; root < 16; ++root) {
    INFO("root=", root);
    const GlobalDag dag = testref::generate_valid(hier_spec(CollKind::Broadcast, 16, 4, root, 64));
    CHECK(cross_node_messages(dag, nodes) == 3);
    // Every image but the root receives exactly once; from another node only
    // if it leads its node (the root on its own node, else image 4k).
    const auto from = receive_peers(dag);
    for (uint32_t r = 0; r < 16; ++r) {
      INFO("image ", r);
      if (r == root) {
        CHECK(from[r].empty());
        continue;
      }
      REQUIRE(from[r].size() == 1);
      const bool leads = nodes.of(r) != nodes.of(root) && nodes.is_first(r);
      CHECK((nodes.of(from[r][0]) != nodes.of(r)) == leads);
    }
    // Depth: 2 hops of the binomial tree over 4 leaders, then 2 inside the node.
    CHECK(testref::message_depth(dag) == 4);
  }
}

TEST_CASE("hierarchical broadcast with one node, or one image per node, is the binomial broadcast") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t root : testref::roots_for(P)) {
      CollectiveSpec binomial = testref::make_spec(CollKind::Broadcast, "binomial", P, root, 5000);
      binomial.segment_bytes = 1024;
      const GlobalDag want = testref::generate_valid(binomial);
      for (uint32_t ppn : {1u, P}) {
        CollectiveSpec spec = hier_spec(CollKind::Broadcast, P, ppn, root, 5000);
        spec.segment_bytes = 1024;
        INFO("P=", P, " root=", root, " ppn=", ppn);
        CHECK(testref::generate_valid(spec).images == want.images);
      }
    }
  }
}

// ---- barrier -------------------------------------------------------------------

TEST_CASE("hierarchical barrier: valid for P = 1..33 and every ppn; nobody leaves before everybody entered") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      INFO("P=", P, " ppn=", ppn);
      const CollectiveSpec spec = hier_spec(CollKind::Barrier, P, ppn, 0, 0);
      const testref::GenOutcome out = testref::check_generator(spec, 2);
      REQUIRE(out.ok);
      const auto reached = testref::exits_reached_from_entries(out.dag);
      for (uint32_t from = 0; from < P; ++from) {
        for (uint32_t to = 0; to < P; ++to) {
          INFO("image ", to, "'s exit does not wait for image ", from);
          CHECK(reached[from][to]);
        }
      }
    }
  }
}

TEST_CASE("hierarchical barrier: leaders send ceil(log2 nodes) messages across nodes, to leaders; others one to their leader and none across") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      const Nodes nodes(P, ppn);
      INFO("P=", P, " ppn=", ppn, " nodes=", nodes.count);
      const GlobalDag dag = testref::generate_valid(hier_spec(CollKind::Barrier, P, ppn, 0, 0));
      const uint32_t rounds = patterns::ceil_log2(nodes.count);
      CHECK(dag_stats(dag).messages == 2 * uint64_t{P - nodes.count} + uint64_t{nodes.count} * rounds);
      CHECK(cross_node_messages(dag, nodes) == uint64_t{nodes.count} * rounds);
      const auto peers = send_peers(dag);
      for (uint32_t r = 0; r < P; ++r) {
        INFO("image ", r);
        uint64_t across = 0, to_leader = 0;
        for (uint32_t peer : peers[r]) {
          across += nodes.of(peer) != nodes.of(r);
          to_leader += peer == nodes.of(r) * nodes.ppn;
          if (nodes.of(peer) != nodes.of(r)) CHECK(nodes.is_first(peer));
        }
        if (nodes.is_first(r)) {
          CHECK(across == rounds);
        } else {
          CHECK(across == 0);
          CHECK(to_leader == 1);
        }
      }
    }
  }
}

// ---- allreduce -----------------------------------------------------------------

TEST_CASE("hierarchical allreduce equals the left-to-right reduction under a non-commutative operator") {
  REQUIRE(GeneratorRegistry::instance().find(CollKind::Allreduce, "hierarchical")->preserves_order);
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      for (uint64_t count : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{257}}) {
        INFO("ppn=", ppn);
        const CollectiveSpec spec = hier_spec(CollKind::Allreduce, P, ppn, 0, count);
        CHECK(testref::check_generator(spec, 2, &testref::sequence_hash).ok);
      }
    }
  }
}

TEST_CASE("hierarchical allreduce: each non-leader sends its vector once, to its own leader; only leaders talk across nodes") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      const Nodes nodes(P, ppn);
      INFO("P=", P, " ppn=", ppn, " nodes=", nodes.count);
      const GlobalDag dag = testref::generate_valid(hier_spec(CollKind::Allreduce, P, ppn, 0, 3));
      CHECK(dag_stats(dag).messages == 2 * uint64_t{P - nodes.count} + rd_messages(nodes.count));
      CHECK(cross_node_messages(dag, nodes) == rd_messages(nodes.count));
      const auto to = send_peers(dag);
      const auto from = receive_peers(dag);
      for (uint32_t r = 0; r < P; ++r) {
        INFO("image ", r);
        if (nodes.is_first(r)) {
          for (uint32_t peer : to[r]) {
            if (nodes.of(peer) != nodes.of(r)) CHECK(nodes.is_first(peer));
          }
          continue;
        }
        // Non-leaders: one vector to the leader, the rest of their sends
        // forward the result inside the node; one receive, from the node.
        CHECK(std::count(to[r].begin(), to[r].end(), nodes.of(r) * nodes.ppn) == 1);
        for (uint32_t peer : to[r]) CHECK(nodes.of(peer) == nodes.of(r));
        REQUIRE(from[r].size() == 1);
        CHECK(nodes.of(from[r][0]) == nodes.of(r));
      }
    }
  }
}

// ---- gather_all ----------------------------------------------------------------

TEST_CASE("hierarchical gather_all delivers every block for P = 1..33 and every ppn, v forms included") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      INFO("ppn=", ppn);
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4096}}) {
        CHECK(testref::check_generator(hier_spec(CollKind::GatherAll, P, ppn, 0, nbytes), 1).ok);
      }
      for (bool with_displs : {false, true}) {
        INFO("v form, displs=", with_displs);
        CollectiveSpec var = hier_spec(CollKind::GatherAll, P, ppn, 0, 24);
        reference::make_variable(&var, with_displs);
        CHECK(testref::check_generator(var, 2).ok);
      }
    }
  }
}

TEST_CASE("hierarchical gather_all: one block per non-leader to its leader; node runs cross nodes by recursive doubling among leaders") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (uint32_t ppn : ppns_for(P)) {
      const Nodes nodes(P, ppn);
      INFO("P=", P, " ppn=", ppn, " nodes=", nodes.count);
      const CollectiveSpec spec = hier_spec(CollKind::GatherAll, P, ppn, 0, 5);
      const GlobalDag dag = testref::generate_valid(spec);
      CHECK(dag_stats(dag).messages == 2 * uint64_t{P - nodes.count} + rd_messages(nodes.count));
      CHECK(cross_node_messages(dag, nodes) == rd_messages(nodes.count));
      const auto to = send_peers(dag);
      for (uint32_t r = 0; r < P; ++r) {
        INFO("image ", r);
        for (uint32_t peer : to[r]) {
          if (nodes.of(peer) != nodes.of(r)) CHECK((nodes.is_first(r) && nodes.is_first(peer)));
        }
        if (!nodes.is_first(r)) CHECK(std::count(to[r].begin(), to[r].end(), nodes.of(r) * nodes.ppn) == 1);
      }
      // A power-of-two number of nodes has no fold: each leader receives
      // every other node's run exactly once, P - (its node's images) blocks.
      if (nodes.count == patterns::floor_pow2(nodes.count)) {
        uint64_t across_bytes = 0;
        for (const MessageEdge& e : testref::edges_of(dag)) {
          if (nodes.of(e.from_image) != nodes.of(e.to_image)) {
            across_bytes += dag.images[e.to_image].cars[e.to_car].message_bytes();
          }
        }
        CHECK(across_bytes == 5 * uint64_t{nodes.count - 1} * P);
      }
    }
  }
}

TEST_CASE("no two CARs of a hierarchical DAG touch the same bytes unordered, v forms included") {
  for (CollKind kind : kKinds) {
    for (uint32_t P = 1; P <= 17; ++P) {
      for (uint32_t ppn : ppns_for(P)) {
        for (int layout = 0; layout < 3; ++layout) {  // uniform; v packed; v with displs
          if (layout > 0 && kind != CollKind::GatherAll) continue;
          CollectiveSpec spec = hier_spec(kind, P, ppn, P / 3, 6);
          if (layout > 0) reference::make_variable(&spec, layout == 2);
          INFO(std::string(coll_kind_name(kind)), " P=", P, " ppn=", ppn, " layout=", layout);
          testref::check_no_races(testref::generate_valid(spec));
        }
      }
    }
  }
}

// ---- sync modes and JSON -------------------------------------------------------

TEST_CASE("hierarchical DAGs stay valid under IN_ALLSYNC and OUT_ALLSYNC, and OUT_ALLSYNC waits for all data") {
  for (CollKind kind : kKinds) {
    for (uint32_t P : {1u, 2u, 5u, 8u, 13u}) {
      for (uint32_t ppn : {2u, 3u, 4u}) {
        for (int flags : {kSpecInAllSync, kSpecOutAllSync, kSpecInAllSync | kSpecOutAllSync}) {
          CollectiveSpec spec = hier_spec(kind, P, ppn, P / 2, 9);
          spec.flags = flags;
          INFO(std::string(coll_kind_name(kind)), " P=", P, " ppn=", ppn, " flags=", flags);
          const testref::GenOutcome out = testref::check_generator(spec, 1);
          REQUIRE(out.ok);
          if (flags & kSpecOutAllSync) {
            CollectiveSpec bare = spec;
            bare.flags = 0;
            testref::check_exits_wait_for_all_data(out.dag, testref::generate_valid(bare));
          }
        }
      }
    }
  }
}

TEST_CASE("hierarchical DAGs round-trip through JSON with images_per_node kept") {
  for (CollKind kind : kKinds) {
    for (uint32_t P : {1u, 2u, 7u, 16u, 33u}) {
      for (uint32_t ppn : {1u, 2u, 3u, 4u, P}) {
        if (ppn > P) continue;  // any ppn >= P builds the same DAGs as P (see above)
        CollectiveSpec spec = hier_spec(kind, P, ppn, P - 1, 100);
        spec.segment_bytes = kind == CollKind::Broadcast ? 40 : 0;
        INFO(std::string(coll_kind_name(kind)), " P=", P, " ppn=", ppn);
        const GlobalDag dag = testref::generate_valid(spec);
        const std::string text = dag_to_json(dag);
        CHECK(text.find("\"images_per_node\"") != std::string::npos);
        GlobalDag back;
        std::string error;
        REQUIRE_MESSAGE(dag_from_json(text, &back, &error), error);
        CHECK(back.spec.images_per_node == ppn);
        CHECK(back == dag);
        CHECK(dag_to_json(back) == text);
      }
    }
  }
}

}  // namespace
}  // namespace carflow
