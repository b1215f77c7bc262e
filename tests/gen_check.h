// Checks a generator end to end without threads: builds the global DAG,
// validates it, runs it with the sequential executor (graph/simulate.h) in
// several random orders, and compares every image's destination with the
// sequential reference (tests/coll_reference.h).
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/check.h"
#include "graph/registry.h"
#include "graph/simulate.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "tests/coll_reference.h"

namespace carflow::testref {

// A spec for `kind`/`algorithm` with the fields every kind needs; permute
// gets the permutation i -> (i * 3 + 1) mod P when that is one, else a shift.
inline CollectiveSpec make_spec(CollKind kind, const std::string& algorithm, uint32_t P,
                                uint32_t root, uint64_t nbytes) {
  CollectiveSpec s;
  s.kind = kind;
  s.algorithm = algorithm;
  s.images = P;
  s.root = root % P;
  s.nbytes = kind == CollKind::Barrier ? 0 : nbytes;
  if (kind == CollKind::Permute) {
    const uint32_t mul = (P % 3 == 0) ? 1 : 3;
    for (uint32_t i = 0; i < P; ++i) s.perm.push_back((i * mul + 1) % P);
  }
  return s;
}

struct GenOutcome {
  bool ok = false;
  uint64_t messages = 0;  // without sync transforms
  GlobalDag dag;
};

// Operators for the computational kinds. mat2_mul: 2x2 matrices of
// uint32 (16-byte elements) multiplied mod 2^32, associative but not
// commutative, so any reordering of operands shows. For generators that
// reorder (commutative ops only): reference::byte_sum.
inline void mat2_mul(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t off = 0; off + 16 <= bytes; off += 16) {
    uint32_t a[4], b[4], c[4];
    std::memcpy(a, static_cast<const char*>(left) + off, 16);
    std::memcpy(b, static_cast<const char*>(right) + off, 16);
    c[0] = a[0] * b[0] + a[1] * b[2];
    c[1] = a[0] * b[1] + a[1] * b[3];
    c[2] = a[2] * b[0] + a[3] * b[2];
    c[3] = a[2] * b[1] + a[3] * b[3];
    std::memcpy(static_cast<char*>(dst) + off, c, 16);
  }
}
// The operator a test of `spec` uses: the non-commutative sequence hash
// where the generator preserves order and elements are 16 bytes.
inline Combine default_op(const CollectiveSpec& spec) { return check_operator(spec); }

// Runs the whole check (graph/check.h: generation, validation, hazards,
// `seeds` random orders against the reference); reports a failure through
// doctest with the spec in the message. Computational kinds combine with
// `op` (default_op when empty).
inline GenOutcome check_generator(const CollectiveSpec& spec, int seeds = 3, Combine op = nullptr) {
  GenOutcome out;
  INFO(std::string(coll_kind_name(spec.kind)), " ", spec.algorithm, " P=", spec.images, " root=", spec.root,
       " nbytes=", spec.nbytes, " counts=", spec.counts.size(), " segment=", spec.segment_bytes,
       " radix=", spec.radix, " window=", spec.window, " elem_size=", spec.elem_size, " flags=", spec.flags,
       " src_layout=", spec.src_blksz, "/", spec.src_offset, " dst_layout=", spec.dst_blksz, "/", spec.dst_offset);
  std::string failure;
  if (!carflow::check_generator(spec, seeds, &out.dag, &failure, &out.messages, op)) {
    FAIL_CHECK(failure);
    return out;
  }
  out.ok = true;
  return out;
}

// The global DAG of `spec`, required to generate and validate.
inline GlobalDag generate_valid(const CollectiveSpec& spec) {
  INFO(std::string(coll_kind_name(spec.kind)), " ", spec.algorithm, " P=", spec.images, " root=", spec.root,
       " nbytes=", spec.nbytes, " segment=", spec.segment_bytes, " radix=", spec.radix, " src=",
       spec.src_blksz, "/", spec.src_offset, " dst=", spec.dst_blksz, "/", spec.dst_offset);
  GlobalDag dag;
  std::string error;
  REQUIRE(generate_global(spec, &dag, &error));
  INFO(error);
  REQUIRE(validate_global(dag, &error));
  return dag;
}

inline std::vector<MessageEdge> edges_of(const GlobalDag& dag) {
  std::vector<MessageEdge> edges;
  std::string error;
  REQUIRE(match_messages(dag, &edges, &error));
  return edges;
}

// Roots worth trying for P images: both ends, the middle, a third.
inline std::vector<uint32_t> roots_for(uint32_t P) {
  std::vector<uint32_t> roots{0, P - 1, P / 2, P / 3};
  std::sort(roots.begin(), roots.end());
  roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
  return roots;
}

// Message rounds: the longest chain of messages when a matched SEND and its
// receive complete together (rendezvous), so a chain of receives at one
// image counts one round per message.
inline uint32_t message_rounds(const GlobalDag& dag) {
  const uint32_t P = dag.spec.images;
  std::vector<std::vector<uint32_t>> depth(P);
  std::vector<size_t> base(P + 1, 0);
  for (uint32_t i = 0; i < P; ++i) {
    depth[i].assign(dag.images[i].cars.size(), 0);
    base[i + 1] = base[i] + dag.images[i].cars.size();
  }
  std::vector<std::pair<uint32_t, CarId>> other(base[P], {UINT32_MAX, 0});
  for (const MessageEdge& e : edges_of(dag)) {
    other[base[e.from_image] + e.from_car] = {e.to_image, e.to_car};
    other[base[e.to_image] + e.to_car] = {e.from_image, e.from_car};
  }
  // Relax to a fixed point: local ids are topological and the contracted
  // DAG is acyclic (validate_global), so at most #messages + 1 sweeps.
  uint32_t rounds = 0;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t i = 0; i < P; ++i) {
      for (CarId c = 0; c < dag.images[i].cars.size(); ++c) {
        uint32_t d = 0;
        for (const Dep& dep : dag.images[i].cars[c].deps) d = std::max(d, depth[i][dep.car]);
        const auto [j, m] = other[base[i] + c];
        if (j != UINT32_MAX) {
          for (const Dep& dep : dag.images[j].cars[m].deps) d = std::max(d, depth[j][dep.car]);
          ++d;
        }
        if (d > depth[i][c]) {
          depth[i][c] = d;
          changed = true;
        }
        rounds = std::max(rounds, d);
      }
    }
  }
  return rounds;
}

// Message depth: the most messages on one chain of the global DAG
// (dependencies inside an image, SEND -> receive between images): a tree's
// depth, where message_rounds counts a root's receives one after another.
inline uint64_t message_depth(const GlobalDag& dag) {
  const uint32_t P = dag.spec.images;
  std::vector<size_t> base(P + 1, 0);
  for (uint32_t i = 0; i < P; ++i) base[i + 1] = base[i] + dag.images[i].cars.size();
  std::vector<std::vector<std::pair<size_t, uint64_t>>> succ(base[P]);  // (node, messages on the edge)
  std::vector<uint64_t> indegree(base[P], 0);
  auto link = [&](size_t from, size_t to, uint64_t weight) {
    succ[from].push_back({to, weight});
    ++indegree[to];
  };
  for (uint32_t i = 0; i < P; ++i) {
    for (CarId c = 0; c < dag.images[i].cars.size(); ++c) {
      for (const Dep& d : dag.images[i].cars[c].deps) link(base[i] + d.car, base[i] + c, 0);
    }
  }
  for (const MessageEdge& e : edges_of(dag)) {
    link(base[e.from_image] + e.from_car, base[e.to_image] + e.to_car, 1);
  }
  std::vector<uint64_t> depth(base[P], 0);
  std::vector<size_t> ready;
  for (size_t n = 0; n < base[P]; ++n) {
    if (indegree[n] == 0) ready.push_back(n);
  }
  uint64_t rounds = 0;
  while (!ready.empty()) {
    const size_t n = ready.back();
    ready.pop_back();
    rounds = std::max(rounds, depth[n]);
    for (const auto& [m, weight] : succ[n]) {
      depth[m] = std::max(depth[m], depth[n] + weight);
      if (--indegree[m] == 0) ready.push_back(m);
    }
  }
  return rounds;
}


// Happens-before over the global DAG: dependency edges inside an image and
// message edges (SEND -> its receive) between images. reached[from][to]:
// image `to`'s exit is reachable from the CARs `starts(from, car)` picks on
// image `from`: from each of them (`every`), or from one at least (true
// when it picks none, with `every`).
template <typename Starts>
std::vector<std::vector<bool>> exits_reached_from(const GlobalDag& dag, Starts starts, bool every) {
  std::vector<MessageEdge> edges;
  std::string error;
  REQUIRE(match_messages(dag, &edges, &error));
  const uint32_t P = dag.spec.images;
  std::vector<size_t> base(P + 1, 0);
  for (uint32_t i = 0; i < P; ++i) base[i + 1] = base[i] + dag.images[i].cars.size();
  std::vector<std::vector<size_t>> succ(base[P]);
  for (uint32_t i = 0; i < P; ++i) {
    for (CarId c = 0; c < dag.images[i].cars.size(); ++c) {
      for (const Dep& d : dag.images[i].cars[c].deps) succ[base[i] + d.car].push_back(base[i] + c);
    }
  }
  for (const MessageEdge& e : edges) succ[base[e.from_image] + e.from_car].push_back(base[e.to_image] + e.to_car);
  auto search = [&](std::vector<size_t> stack) {
    std::vector<bool> seen(base[P], false);
    while (!stack.empty()) {
      const size_t n = stack.back();
      stack.pop_back();
      if (seen[n]) continue;
      seen[n] = true;
      for (size_t m : succ[n]) stack.push_back(m);
    }
    return seen;
  };
  std::vector<std::vector<bool>> reached(P, std::vector<bool>(P, every));
  for (uint32_t from = 0; from < P; ++from) {
    std::vector<size_t> picked;
    for (CarId c = 0; c < dag.images[from].cars.size(); ++c) {
      if (starts(from, c)) picked.push_back(base[from] + c);
    }
    if (picked.empty()) continue;
    // `every`: one search per start; otherwise one search from all of them.
    std::vector<std::vector<size_t>> groups;
    if (every) {
      for (size_t n : picked) groups.push_back({n});
    } else {
      groups.push_back(picked);
    }
    for (uint32_t to = 0; to < P; ++to) reached[from][to] = true;
    for (const auto& group : groups) {
      const std::vector<bool> seen = search(group);
      for (uint32_t to = 0; to < P; ++to) {
        reached[from][to] = reached[from][to] && seen[base[to] + dag.images[to].exit];
      }
    }
  }
  return reached;
}

// A barrier (or an IN_ALLSYNC transform) is only correct if every image's
// exit is reachable from every image's first CARs: nobody leaves before
// everybody entered.
inline std::vector<std::vector<bool>> exits_reached_from_entries(const GlobalDag& dag) {
  return exits_reached_from(
      dag, [&](uint32_t i, CarId c) { return dag.images[i].cars[c].deps.empty(); }, false);
}

// OUT_ALLSYNC: no image's exit may complete before every data CAR of every
// image has. `plain` is the same DAG without sync transforms (the
// transformed one keeps its CAR ids); a SEND counts as done when its
// receive is, as a rendezvous transport has it.
inline void check_exits_wait_for_all_data(const GlobalDag& dag, const GlobalDag& plain) {
  const auto reached = exits_reached_from(dag, [&](uint32_t i, CarId c) {
    return c < plain.images[i].cars.size() && plain.images[i].cars[c].kind != CarKind::Join;
  }, true);
  for (uint32_t from = 0; from < dag.spec.images; ++from) {
    for (uint32_t to = 0; to < dag.spec.images; ++to) {
      INFO("image ", to, "'s exit does not wait for image ", from, "'s data");
      CHECK(reached[from][to]);
    }
  }
}

// ---- hazards ----------------------------------------------------------------

// The bytes a CAR reads and writes.
struct Access {
  BufferRef ref;
  bool write;
};

inline std::vector<Access> accesses(const Car& car) {
  switch (car.kind) {
    case CarKind::Send: return {{car.src, false}};
    case CarKind::Recv: return {{car.dst, true}};
    case CarKind::RecvReduce: return {{car.src, false}, {car.dst, true}};  // src: the local operand, if any
    case CarKind::Reduce: return {{car.src, false}, {car.src2, false}, {car.dst, true}};
    case CarKind::Copy: return {{car.src, false}, {car.dst, true}};
    case CarKind::Join: break;
  }
  return {};
}

inline bool overlap(const BufferRef& a, const BufferRef& b) {
  if (a.space != b.space || a.space == BufferSpace::None || a.length == 0 || b.length == 0) return false;
  if (a.space == BufferSpace::Temp && a.slot != b.slot) return false;
  return a.offset < b.offset + b.length && b.offset < a.offset + a.length;
}

// The brief's buffer rule, checked for every pair rather than in some random
// order: two CARs of one image that touch the same bytes, one of them
// writing, must be ordered by the image's own dependencies (the executor
// cannot show a race when both write the same bytes, as a leader's copies
// and the whole result it receives later do). Also: nothing writes the
// user source.
inline void check_no_races(const GlobalDag& dag) {
  for (const LocalDag& local : dag.images) {
    const size_t C = local.cars.size(), words = (C + 63) / 64;
    // before[c]: the CARs c transitively depends on (DagBuilder ids are
    // topological: a CAR can only name CARs created before it).
    std::vector<std::vector<uint64_t>> before(C, std::vector<uint64_t>(words, 0));
    for (CarId c = 0; c < C; ++c) {
      for (const Dep& d : local.cars[c].deps) {
        REQUIRE(d.car < c);
        for (size_t w = 0; w < words; ++w) before[c][w] |= before[d.car][w];
        before[c][d.car / 64] |= uint64_t{1} << (d.car % 64);
      }
    }
    auto ordered = [&](CarId a, CarId b) {  // a < b
      return (before[b][a / 64] >> (a % 64)) & 1;
    };
    std::vector<std::vector<Access>> acc(C);
    for (CarId c = 0; c < C; ++c) {
      acc[c] = accesses(local.cars[c]);
      for (const Access& x : acc[c]) {
        INFO("image ", local.image, " CAR ", c);
        CHECK_FALSE((x.write && x.ref.space == BufferSpace::UserSrc));
      }
    }
    for (CarId b = 0; b < C; ++b) {
      for (CarId a = 0; a < b; ++a) {
        bool conflict = false;
        for (const Access& x : acc[a]) {
          for (const Access& y : acc[b]) conflict = conflict || ((x.write || y.write) && overlap(x.ref, y.ref));
        }
        if (conflict && !ordered(a, b)) {
          FAIL_CHECK("image ", local.image, ": CARs ", a, " (", std::string(car_kind_name(local.cars[a].kind)),
                     ") and ", b, " (", std::string(car_kind_name(local.cars[b].kind)),
                     ") touch the same bytes unordered");
          return;
        }
      }
    }
  }
}

}  // namespace carflow::testref
