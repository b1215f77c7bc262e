// Node-aware ("hierarchical") generators for broadcast, barrier, allreduce
// and gather_all (the GASNet notes' SMP-aware collectives, the Cray MPT notes):
// cheap phases among the images of one node, one logarithmic phase among
// one leader per node, so the slow links between nodes carry as few
// messages as the collective allows.
//
// Terms: P = team size, ppn = CollectiveSpec::images_per_node (0 = unknown,
// taken as 1; values above P act as P), node k holds team ranks
// [k ppn, min((k+1) ppn, P)), nodes = ceil(P / ppn). The leader of node k is
// its first image k ppn, except in broadcast, where the root leads its own
// node. "In-node binomial tree" = patterns::knomial_node(.., 2) over the
// node's images, rooted at the leader.
//
// broadcast  binomial tree over the leaders (relative to the root's node),
//            then the in-node binomial tree from each leader; a leader
//            forwards to other nodes' leaders first (the longer path).
//            One tree of P-1 edges, pipelined by segments (broadcast_tree.h):
//            (P-1) messages per segment, of which exactly nodes-1 cross
//            nodes. The root leads its node, so no hop is spent getting the
//            data to image k ppn; sending from the root straight to every
//            other leader would instead serialize nodes-1 sends at the root
//            (nodes-1 rounds instead of ceil(log2 nodes)).
// barrier    zero-byte fan-in of every image to its leader, dissemination
//            among the leaders (ceil(log2 nodes) rounds), release down the
//            in-node binomial tree. 2 (P - nodes) + nodes ceil(log2 nodes)
//            messages; a leader sends ceil(log2 nodes) of them across nodes,
//            other images none.
// allreduce  every non-leader sends its vector to its leader, which combines
//            them in rank order (x_first op ... op x_last, a contiguous run);
//            recursive doubling among the leaders in node order (lower node
//            on the left, as allreduce_recursive_doubling.cc), then the result
//            down the in-node binomial tree. Every combine keeps operand
//            order, so the result is the strict left-to-right reduction.
//            2 (P - nodes) + R messages, R = N' log2 N' + 2 (nodes - N')
//            (N' = floor_pow2(nodes)) of them between leaders.
// gather_all every non-leader sends its block to its leader, which then
//            holds its node's contiguous run of blocks; recursive doubling
//            among the leaders exchanges runs (a range of new ranks is a range
//            of nodes, hence of blocks: one message per round); the whole
//            result goes down the in-node binomial tree. Same counts as
//            allreduce. Any layout, v forms included: blocks live in user_dst
//            when the layout packs them in rank order, otherwise in a temp
//            packed in rank order and COPYed out (as gather_all.cc does).
//
// Fan-ins are flat (one message per non-leader) because a node's images
// share memory: the leader posts every receive at once, and allreduce needs
// the rank-order chain anyway. Releases carry the data (or the barrier's
// signal) to every image and use the binomial tree to cut the leader's
// serial sends from ppn-1 to ceil(log2 ppn).
#include <algorithm>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/broadcast_tree.h"
#include "graph/generators/patterns.h"
#include "graph/generators/trees.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

using patterns::or_none;
using patterns::RankOrderStore;
using patterns::TreeNode;

// Tags of the three-phase generators (barrier, allreduce, gather_all): the
// leader phase's fold, rounds and unfold follow kFoldTag.
constexpr uint32_t kFanInTag = 0;
constexpr uint32_t kReleaseTag = 1;
constexpr uint32_t kFoldTag = 2;
constexpr uint32_t kRoundTag = 3;  // round j: kRoundTag + j; unfold: kRoundTag + rounds

// The nodes of a team (terms above).
struct NodeMap {
  uint32_t P, ppn, nodes;
  explicit NodeMap(const CollectiveSpec& spec)
      : P(spec.images),
        ppn(std::clamp<uint32_t>(spec.images_per_node, 1, std::max<uint32_t>(spec.images, 1))),
        nodes((P + ppn - 1) / ppn) {}
  uint32_t node(uint32_t r) const { return r / ppn; }
  // First image of node k; first(nodes) = P.
  uint32_t first(uint32_t k) const { return static_cast<uint32_t>(std::min<uint64_t>(uint64_t{k} * ppn, P)); }
  uint32_t end(uint32_t k) const { return first(k + 1); }
};

// The in-node binomial tree rooted at `leader`, for `image` (same node), in
// team ranks.
TreeNode node_tree(const NodeMap& m, uint32_t image, uint32_t leader) {
  const uint32_t k = m.node(image), first = m.first(k), size = m.end(k) - first;
  const uint32_t lv = leader - first;
  auto real = [&](uint32_t v) { return first + (v + lv) % size; };
  TreeNode t = patterns::knomial_node((image - first + size - lv) % size, size, 2);
  t.parent = real(t.parent);
  for (uint32_t& c : t.children) c = real(c);
  return t;
}

// ---- broadcast ---------------------------------------------------------------

LocalDag hierarchical_broadcast(const CollectiveSpec& spec, uint32_t image) {
  const NodeMap m(spec);
  const uint32_t P = spec.images, home = m.node(spec.root), k = m.node(image);
  auto leader = [&](uint32_t node) { return node == home ? spec.root : m.first(node); };
  TreeNode tree = node_tree(m, image, leader(k));
  if (image == leader(k)) {
    // Across nodes: binomial over virtual node numbers, the root's node at 0.
    auto leader_of = [&](uint32_t vn) { return leader((vn + home) % m.nodes); };
    const TreeNode across = patterns::knomial_node((k + m.nodes - home) % m.nodes, m.nodes, 2);
    tree.has_parent = across.has_parent;
    tree.parent = leader_of(across.parent);
    std::vector<uint32_t> children;
    for (uint32_t vn : across.children) children.push_back(leader_of(vn));
    children.insert(children.end(), tree.children.begin(), tree.children.end());
    tree.children = std::move(children);
  }
  // tree_broadcast speaks virtual ranks relative to the root.
  auto virt = [&](uint32_t r) { return patterns::virtual_rank(r, spec.root, P); };
  tree.parent = virt(tree.parent);
  for (uint32_t& c : tree.children) c = virt(c);
  return tree_broadcast(spec, image, tree, spec.segment_bytes);
}

// ---- barrier -----------------------------------------------------------------

LocalDag hierarchical_barrier(const CollectiveSpec& spec, uint32_t image) {
  const NodeMap m(spec);
  const uint32_t k = m.node(image), leader = m.first(k);
  const TreeNode tree = node_tree(m, image, leader);
  DagBuilder b(image, 0, 0);
  if (image != leader) {
    b.send(leader, kFanInTag, no_buffer());
    const CarId released = b.recv(tree.parent, kReleaseTag, no_buffer());
    for (uint32_t c : tree.children) b.send(c, kReleaseTag, no_buffer(), {after(released)});
    return b.finish();
  }
  DagBuilder::Deps heard;  // my node has entered
  for (uint32_t r = leader + 1; r < m.end(k); ++r) heard.push_back(after(b.recv(r, kFanInTag, no_buffer())));
  // Dissemination among leaders (barrier_dissemination.cc): each signal
  // carries everything heard before it, through the previous receive and,
  // via the send chain, every earlier one.
  CarId prev_send = kNoCar, prev_recv = kNoCar;
  for (uint32_t j = 0, dist = 1; dist < m.nodes; ++j, dist *= 2) {
    const DagBuilder::Deps deps =
        prev_send == kNoCar ? heard : DagBuilder::Deps{after(prev_send), after(prev_recv)};
    prev_send = b.send(m.first((k + dist) % m.nodes), kRoundTag + j, no_buffer(), deps);
    prev_recv = b.recv(m.first((k + m.nodes - dist) % m.nodes), kRoundTag + j, no_buffer());
  }
  const DagBuilder::Deps all_heard =
      prev_send == kNoCar ? heard : DagBuilder::Deps{after(prev_send), after(prev_recv)};
  for (uint32_t c : tree.children) b.send(c, kReleaseTag, no_buffer(), all_heard);
  return b.finish();
}

// ---- allreduce ---------------------------------------------------------------

// Recursive doubling among the leaders (allreduce_recursive_doubling.cc with
// node numbers for ranks): `cur` holds this leader's node partial, written
// by `cur_car` (kNoCar: not written by this DAG). Returns the CAR after
// which user_dst holds the result.
CarId leader_allreduce(DagBuilder& b, const NodeMap& m, uint32_t k, uint64_t n, BufferRef cur,
                       CarId cur_car) {
  const patterns::Fold fold(m.nodes);
  auto deps_on_cur = [&]() {
    DagBuilder::Deps d;
    if (cur_car != kNoCar) d.push_back(after_buffer(cur_car));
    return d;
  };
  const BufferRef result = user_dst(0, n);
  if (fold.folded_away(k)) {  // hand my partial (the left operand) to node k+1
    const CarId sent = b.send(m.first(k + 1), kFoldTag, cur, deps_on_cur());
    return b.recv(m.first(k + 1), kRoundTag + fold.rounds, result, {after_buffer(sent)});
  }
  if (fold.paired(k)) {
    const uint32_t slot = b.temp_slot(n);
    const CarId got = b.recv(m.first(k - 1), kFoldTag, temp(slot, 0, n));
    DagBuilder::Deps deps = deps_on_cur();
    deps.push_back(after_buffer(got));
    cur_car = b.reduce(result, temp(slot, 0, n), cur, deps);
    cur = result;
  }
  const uint32_t nr = fold.newrank(k);
  for (uint32_t j = 0; j < fold.rounds; ++j) {
    const uint32_t partner_new = nr ^ (1u << j);
    const uint32_t partner = m.first(fold.real(partner_new));
    const CarId sent = b.send(partner, kRoundTag + j, cur, deps_on_cur());
    const uint32_t slot = b.temp_slot(n);
    const CarId got = b.recv(partner, kRoundTag + j, temp(slot, 0, n));
    DagBuilder::Deps deps = deps_on_cur();
    deps.push_back(after_buffer(got));
    deps.push_back(after_buffer(sent));  // the result overwrites what was sent
    const BufferRef theirs = temp(slot, 0, n);
    const bool theirs_left = partner_new < nr;
    cur_car = b.reduce(result, theirs_left ? theirs : cur, theirs_left ? cur : theirs, deps);
    cur = result;
  }
  if (cur_car == kNoCar) cur_car = b.copy(result, cur);  // P == 1
  if (fold.paired(k)) b.send(m.first(k - 1), kRoundTag + fold.rounds, result, {after_buffer(cur_car)});
  return cur_car;
}

LocalDag hierarchical_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const NodeMap m(spec);
  const uint64_t n = spec.nbytes;
  const uint32_t k = m.node(image), leader = m.first(k);
  const TreeNode tree = node_tree(m, image, leader);
  DagBuilder b(image, n, n);
  if (image != leader) {
    b.send(leader, kFanInTag, user_src(0, n));
    const CarId got = b.recv(tree.parent, kReleaseTag, user_dst(0, n));
    for (uint32_t c : tree.children) b.send(c, kReleaseTag, user_dst(0, n), {after_buffer(got)});
    return b.finish();
  }
  // x_leader op x_(leader+1) op ...: each incoming vector is the right operand.
  BufferRef cur = user_src(0, n);
  CarId cur_car = kNoCar;
  for (uint32_t r = leader + 1; r < m.end(k); ++r) {
    cur_car = cur_car == kNoCar
                  ? b.recv_reduce(r, kFanInTag, user_dst(0, n), false, {}, user_src(0, n))
                  : b.recv_reduce(r, kFanInTag, user_dst(0, n), false, {after_buffer(cur_car)});
    cur = user_dst(0, n);
  }
  const CarId done = leader_allreduce(b, m, k, n, cur, cur_car);
  for (uint32_t c : tree.children) b.send(c, kReleaseTag, user_dst(0, n), {after_buffer(done)});
  return b.finish();
}

// ---- gather_all --------------------------------------------------------------

// Recursive doubling among the leaders over node runs of blocks (as
// recursive_doubling in gather_all.cc, nodes for images). `writers`: every
// CAR that wrote the store so far; grows with the receives.
void leader_gather_all(DagBuilder& b, const NodeMap& m, uint32_t k, const RankOrderStore& store,
                       CarDeps* writers) {
  const patterns::Fold fold(m.nodes);
  const uint32_t lo = m.first(k), hi = m.end(k);
  // Blocks of new ranks [a, b): new rank nr holds nodes [node_of(nr), node_of(nr+1)).
  auto node_of = [&](uint32_t nr) { return nr < fold.rem ? 2 * nr : nr + fold.rem; };
  auto blocks = [&](uint32_t a, uint32_t end) { return store.range(m.first(node_of(a)), m.first(node_of(end))); };
  if (fold.folded_away(k)) {
    const CarId sent = b.send(m.first(k + 1), kFoldTag, store.range(lo, hi), *writers);
    // The whole result rewrites my node's run too: only after it was sent.
    const CarId got = b.recv(m.first(k + 1), kRoundTag + fold.rounds, store.range(0, m.P), {after_buffer(sent)});
    writers->push_back(after_buffer(got));
    store.copy_out(&b, 0, m.P, lo, got);  // my own block came from user_src
    return;
  }
  if (fold.paired(k)) {
    const uint32_t from = m.first(k - 1);
    const CarId got = b.recv(from, kFoldTag, store.range(from, lo));
    writers->push_back(after_buffer(got));
    store.copy_out(&b, from, lo, m.P, got);
  }
  const uint32_t nr = fold.newrank(k);
  for (uint32_t j = 0; j < fold.rounds; ++j) {
    const uint32_t dist = 1u << j, mine = nr & ~(dist - 1), theirs = (nr ^ dist) & ~(dist - 1);
    const uint32_t partner = m.first(fold.real(nr ^ dist));
    b.send(partner, kRoundTag + j, blocks(mine, mine + dist), *writers);
    const CarId got = b.recv(partner, kRoundTag + j, blocks(theirs, theirs + dist));
    writers->push_back(after_buffer(got));
    store.copy_out(&b, m.first(node_of(theirs)), m.first(node_of(theirs + dist)), m.P, got);
  }
  if (fold.paired(k)) b.send(m.first(k - 1), kRoundTag + fold.rounds, store.range(0, m.P), *writers);
}

LocalDag hierarchical_gather_all(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const BlockLayout L(spec);
  const NodeMap m(spec);
  const uint32_t k = m.node(image), leader = m.first(k);
  const TreeNode tree = node_tree(m, image, leader);
  const BufferRef own = user_src(0, L.length(image));
  DagBuilder b(image, L.length(image), L.extent());
  const RankOrderStore store(L, P, &b);
  if (image != leader) {
    b.send(leader, kFanInTag, or_none(own));
    // In user_dst the whole result includes my block as it is.
    const CarId got = b.recv(tree.parent, kReleaseTag, store.range(0, P));
    if (!store.in_dst()) {
      b.copy(user_dst(L.offset(image), L.length(image)), own);
      store.copy_out(&b, 0, P, image, got);
    }
    for (uint32_t c : tree.children) b.send(c, kReleaseTag, store.range(0, P), {after_buffer(got)});
    return b.finish();
  }
  const patterns::Fold fold(m.nodes);
  // A folded-away leader receives the whole result into the store, over its
  // node's run: it copies its node's blocks out of the temp only after that.
  const bool copy_later = fold.folded_away(k);
  CarDeps writers;
  writers.push_back(after_buffer(b.copy(user_dst(L.offset(image), L.length(image)), own)));
  if (!store.in_dst() && L.length(image) > 0) writers.push_back(after_buffer(b.copy(store.range(image, image + 1), own)));
  for (uint32_t r = leader + 1; r < m.end(k); ++r) {
    const CarId got = b.recv(r, kFanInTag, store.range(r, r + 1));
    writers.push_back(after_buffer(got));
    if (!copy_later) store.copy_out(&b, r, r + 1, P, got);
  }
  leader_gather_all(b, m, k, store, &writers);
  for (uint32_t c : tree.children) b.send(c, kReleaseTag, store.range(0, P), writers);
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(hierarchical_broadcast,
                           {CollKind::Broadcast, "hierarchical", &hierarchical_broadcast, true, true,
                            "binomial over node leaders, then binomial within each node; segments pipelined",
                            kUsesNodes});
CARFLOW_REGISTER_GENERATOR(hierarchical_barrier,
                           {CollKind::Barrier, "hierarchical", &hierarchical_barrier, true, false,
                            "fan-in to node leaders, dissemination among leaders, release within nodes",
                            kUsesNodes});
CARFLOW_REGISTER_GENERATOR(hierarchical_allreduce,
                           {CollKind::Allreduce, "hierarchical", &hierarchical_allreduce, true, false,
                            "ordered reduce to node leaders, recursive doubling among leaders, "
                            "binomial release within nodes",
                            kUsesNodes});
CARFLOW_REGISTER_GENERATOR(hierarchical_gather_all,
                           {CollKind::GatherAll, "hierarchical", &hierarchical_gather_all, true, false,
                            "blocks to node leaders, recursive doubling of node runs among leaders, "
                            "binomial release within nodes",
                            kUsesNodes});

}  // namespace carflow
