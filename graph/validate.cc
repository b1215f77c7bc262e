// Validation of local and global DAGs; the rules are listed in validate.h.
//
// Every walk here is iterative (Kahn's algorithm, explicit stacks): DAGs may
// hold millions of CARs, and a recursive DFS would overflow the thread's stack
// long before memory runs out.
#include "graph/validate.h"


#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <tuple>
#include <utility>

#include "graph/layout.h"

namespace carflow {
namespace {

constexpr size_t kNone = SIZE_MAX;

// A DAG can come from a file or a C caller, so enum values are range-checked
// before any name table is indexed with them.
bool known_kind(CarKind kind) { return static_cast<unsigned>(kind) <= unsigned(CarKind::Join); }
bool known_space(BufferSpace space) {
  return static_cast<unsigned>(space) <= unsigned(BufferSpace::Temp);
}
bool known_dep_kind(DepKind kind) { return static_cast<unsigned>(kind) <= unsigned(DepKind::Buffer); }
const char* kind_name(CarKind kind) { return known_kind(kind) ? car_kind_name(kind) : "?"; }

std::string car_label(uint32_t image, size_t id, const Car& car) {
  return "image " + std::to_string(image) + " car " + std::to_string(id) + " (" +
         kind_name(car.kind) + ")";
}

bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

// Successor lists in compressed form: node n's successors are
// succ[first[n] .. first[n + 1]).
struct Csr {
  std::vector<size_t> first;
  std::vector<size_t> succ;
  std::vector<size_t> indegree;
};

// `for_each_edge(emit)` calls emit(from, to) once per edge. It runs twice
// (count, then fill), so no separate edge list of millions of pairs is held.
template <typename ForEachEdge>
Csr build_csr(size_t nodes, const ForEachEdge& for_each_edge) {
  Csr g;
  g.first.assign(nodes + 1, 0);
  g.indegree.assign(nodes, 0);
  for_each_edge([&](size_t from, size_t to) {
    ++g.first[from + 1];
    ++g.indegree[to];
  });
  for (size_t n = 0; n < nodes; ++n) g.first[n + 1] += g.first[n];
  g.succ.resize(g.first[nodes]);
  std::vector<size_t> next(g.first.begin(), g.first.end() - 1);
  for_each_edge([&](size_t from, size_t to) { g.succ[next[from]++] = to; });
  return g;
}

// Kahn's algorithm. Returns the nodes in a topological order; when it holds
// fewer than all nodes, the rest lie on a cycle or behind one.
std::vector<size_t> topological_order(const Csr& g) {
  std::vector<size_t> indegree = g.indegree;
  std::vector<size_t> order;  // doubles as the queue: order[head..] is pending
  order.reserve(indegree.size());
  for (size_t n = 0; n < indegree.size(); ++n) {
    if (indegree[n] == 0) order.push_back(n);
  }
  for (size_t head = 0; head < order.size(); ++head) {
    const size_t n = order[head];
    for (size_t e = g.first[n]; e < g.first[n + 1]; ++e) {
      if (--indegree[g.succ[e]] == 0) order.push_back(g.succ[e]);
    }
  }
  return order;
}

std::vector<char> placed_nodes(size_t nodes, const std::vector<size_t>& order) {
  std::vector<char> placed(nodes, 0);
  for (size_t n : order) placed[n] = 1;
  return placed;
}

size_t first_unplaced(const std::vector<char>& placed) {
  return static_cast<size_t>(std::find(placed.begin(), placed.end(), 0) - placed.begin());
}

// One cycle among the nodes Kahn's algorithm left out, in dependency order,
// starting from its lowest node.
// Each of them keeps an unplaced predecessor, so walking predecessors from
// `start` must come back to a node already on the walk.
template <typename UnplacedPred>
std::vector<size_t> find_cycle(size_t nodes, size_t start, const UnplacedPred& unplaced_pred) {
  std::vector<size_t> position(nodes, kNone);
  std::vector<size_t> walk;
  size_t n = start;
  while (n != kNone && position[n] == kNone) {
    position[n] = walk.size();
    walk.push_back(n);
    n = unplaced_pred(n);
  }
  std::vector<size_t> cycle(walk.begin() + (n == kNone ? 0 : position[n]), walk.end());
  std::reverse(cycle.begin(), cycle.end());
  // Starting from the lowest node makes the report independent of `start`.
  std::rotate(cycle.begin(), std::min_element(cycle.begin(), cycle.end()), cycle.end());
  return cycle;
}

// "a -> b -> c -> a", eliding the middle of long cycles.
template <typename NameFn>
std::string describe_cycle(const std::vector<size_t>& cycle, const NameFn& name) {
  constexpr size_t kShown = 8;
  std::string out;
  for (size_t i = 0; i < cycle.size() && i < kShown; ++i) out += name(cycle[i]) + " -> ";
  if (cycle.size() > kShown) out += "... (" + std::to_string(cycle.size()) + " nodes) -> ";
  return out + name(cycle.front());
}

// ---- validate_local -------------------------------------------------------

// The buffers each kind reads or writes; every other buffer must be none.
// SEND and receives may also use none, for a zero-byte message (car.h).
struct BufferUse {
  bool src = false, src2 = false, dst = false;
};
BufferUse buffer_use(CarKind kind) {
  switch (kind) {
    case CarKind::Send: return {true, false, false};
    case CarKind::Recv: return {false, false, true};
    case CarKind::RecvReduce: return {true, false, true};  // src optional: the local operand
    case CarKind::Reduce: return {true, true, true};
    case CarKind::Copy: return {true, false, true};
    case CarKind::Join: break;
  }
  return {};
}

uint64_t space_size(const LocalDag& dag, const BufferRef& ref, uint32_t member) {
  switch (ref.space) {
    case BufferSpace::UserSrc:
    case BufferSpace::UserDst: return dag.user_bytes(member, ref.space);
    case BufferSpace::Temp: return dag.temps[ref.slot];
    case BufferSpace::None: break;
  }
  return 0;
}

// Empty when `ref` lies inside its buffer; otherwise the rule it breaks.
std::string buffer_problem(const LocalDag& dag, const BufferRef& ref, const std::string& name,
                           uint32_t member) {
  if (!known_space(ref.space)) {
    return name + ": space " + std::to_string(unsigned(ref.space)) + " is not a buffer space";
  }
  const std::string space = buffer_space_name(ref.space);
  // Unused fields must be zero so that a saved and reloaded DAG compares
  // equal: the JSON writes a slot only for temp buffers.
  if (ref.space != BufferSpace::Temp && ref.slot != 0) {
    return name + ": slot " + std::to_string(ref.slot) + " is set but only temp buffers have a slot";
  }
  if (ref.space == BufferSpace::None) {
    if (ref.offset == 0 && ref.length == 0) return "";
    return name + ": a none buffer must have offset 0 and length 0 (found offset " +
           std::to_string(ref.offset) + ", length " + std::to_string(ref.length) + ")";
  }
  if (ref.space == BufferSpace::Temp && ref.slot >= dag.temps.size()) {
    return name + ": temp slot " + std::to_string(ref.slot) + " does not exist (the image has " +
           std::to_string(dag.temps.size()) + ")";
  }
  const uint64_t size = space_size(dag, ref, member);
  // Compared without computing offset + length, which can wrap past 2^64.
  if (ref.offset <= size && ref.length <= size - ref.offset) return "";
  std::string buffer = space;
  if (ref.space == BufferSpace::Temp) buffer += " slot " + std::to_string(ref.slot);
  return name + ": range [offset " + std::to_string(ref.offset) + ", length " +
         std::to_string(ref.length) + "] runs past the end of " + buffer + " (" +
         std::to_string(size) + " bytes)";
}

// Lengths of a Fold / Prefix REDUCE (ReduceShape): whole elements, one
// result (fold) or carry per chunk.
std::string shape_problem(const Car& car, uint64_t es) {
  const std::string shape = reduce_shape_name(car.shape);
  if (car.src.length % es != 0 || car.src.length == 0) {
    return shape + ": src length " + std::to_string(car.src.length) + " is not a positive whole number of " +
           std::to_string(es) + "-byte elements";
  }
  const uint64_t chunks = chunk_count(car, car.src.length / es);
  const uint64_t per_chunk = chunks * es;
  const uint64_t want_dst = car.shape == ReduceShape::Fold ? per_chunk : car.src.length;
  if (car.dst.length != want_dst) {
    return shape + ": dst length " + std::to_string(car.dst.length) + " must be " + std::to_string(want_dst);
  }
  if (car.src2.space != BufferSpace::None && car.src2.length != per_chunk) {
    return shape + ": the carry (src2) must hold one element per chunk (" + std::to_string(per_chunk) +
           " bytes), found " + std::to_string(car.src2.length);
  }
  return "";
}

std::string buffers_problem(const LocalDag& dag, const Car& car, uint64_t es) {
  const BufferUse use = buffer_use(car.kind);
  const struct {
    const char* name;
    const BufferRef& ref;
    bool used;
  } operands[] = {{"src", car.src, use.src}, {"src2", car.src2, use.src2}, {"dst", car.dst, use.dst}};
  for (const auto& op : operands) {
    std::string problem = buffer_problem(dag, op.ref, op.name, car.member);
    if (!problem.empty()) return problem;
    if (!op.used && op.ref.space != BufferSpace::None) {
      return std::string(op.name) + " must be none for " + kind_name(car.kind) + " (found " +
             buffer_space_name(op.ref.space) + ")";
    }
  }
  if (car.kind == CarKind::Reduce && car.shape != ReduceShape::Elementwise) {
    return shape_problem(car, es);
  }
  const bool reduce_mismatch = car.kind == CarKind::Reduce &&
                               (car.src.length != car.dst.length || car.src2.length != car.dst.length);
  const bool copy_mismatch = (car.kind == CarKind::Copy ||
                              (car.kind == CarKind::RecvReduce && car.src.space != BufferSpace::None)) &&
                             car.src.length != car.dst.length;
  if (reduce_mismatch || copy_mismatch) {
    std::string lengths = "dst " + std::to_string(car.dst.length) + ", src " + std::to_string(car.src.length);
    if (car.kind == CarKind::Reduce) lengths += ", src2 " + std::to_string(car.src2.length);
    return "operand lengths differ (" + lengths + ")";
  }
  return "";
}

std::string fields_problem(const LocalDag& dag, const Car& car, uint32_t images) {
  if (car.member != 0 && car.member >= dag.members.size()) {
    return "member " + std::to_string(car.member) + " does not exist (the image lists " +
           std::to_string(dag.members.size()) + " aggregate members)";
  }
  if (car.is_message()) {
    if (car.peer >= images) {
      return "peer " + std::to_string(car.peer) + " is not a team rank (P = " + std::to_string(images) + ")";
    }
    if (car.peer == dag.image) return "peer " + std::to_string(car.peer) + " is the image itself";
  } else if (car.peer != 0 || car.tag != 0) {
    // Zero for the same reason as unused slots: the JSON omits them.
    return "peer and tag must be 0 for a non-message CAR (found peer " + std::to_string(car.peer) +
           ", tag " + std::to_string(car.tag) + ")";
  }
  if (car.incoming_left && car.kind != CarKind::RecvReduce) {
    return "incoming_left is set but only RECV_REDUCE uses it";
  }
  if (static_cast<unsigned>(car.shape) > unsigned(ReduceShape::Prefix)) {
    return "shape " + std::to_string(unsigned(car.shape)) + " is not a reduce shape";
  }
  if (car.kind != CarKind::Reduce && car.shape != ReduceShape::Elementwise) {
    return "shape is set but only REDUCE has one";
  }
  if ((car.shape == ReduceShape::Elementwise || car.chunk_elems == 0) &&
      (car.first_elems != 0 || car.chunk_elems != 0)) {
    return "first_elems / chunk_elems are set but only fold and prefix chunked REDUCEs use them";
  }
  if (car.first_elems > car.chunk_elems) {
    return "first_elems " + std::to_string(car.first_elems) + " exceeds chunk_elems " +
           std::to_string(car.chunk_elems);
  }
  return "";
}

std::string deps_problem(const LocalDag& dag, CarId id) {
  for (const Dep& dep : dag.cars[id].deps) {
    if (!known_dep_kind(dep.kind)) {
      return "dependency kind " + std::to_string(unsigned(dep.kind)) + " is not a dependency kind";
    }
    if (dep.car == id) return "depends on itself";
    if (dep.car >= dag.cars.size()) {
      return "depends on car " + std::to_string(dep.car) + ", which does not exist (" +
             std::to_string(dag.cars.size()) + " cars)";
    }
  }
  return "";
}

bool check_cars(const LocalDag& dag, uint32_t images, uint32_t es, std::string* error) {
  for (CarId id = 0; id < dag.cars.size(); ++id) {
    const Car& car = dag.cars[id];
    std::string problem;
    if (!known_kind(car.kind)) {
      problem = "kind " + std::to_string(unsigned(car.kind)) + " is not a CAR kind";
    } else {
      problem = deps_problem(dag, id);
      if (problem.empty()) problem = fields_problem(dag, car, images);
      if (problem.empty()) {
        const uint32_t member_es = dag.members.empty() ? es : dag.members[car.member].elem_size;
        problem = buffers_problem(dag, car, member_es == 0 ? 1 : member_es);
      }
    }
    if (!problem.empty()) return fail(error, car_label(dag.image, id, car) + ": " + problem);
  }
  return true;
}

bool check_local_acyclic(const LocalDag& dag, std::string* error) {
  const size_t n = dag.cars.size();
  const Csr g = build_csr(n, [&](const auto& emit) {
    for (size_t c = 0; c < n; ++c) {
      for (const Dep& dep : dag.cars[c].deps) emit(dep.car, c);
    }
  });
  const std::vector<size_t> order = topological_order(g);
  if (order.size() == n) return true;
  const std::vector<char> placed = placed_nodes(n, order);
  const std::vector<size_t> cycle = find_cycle(n, first_unplaced(placed), [&](size_t c) {
    for (const Dep& dep : dag.cars[c].deps) {
      if (!placed[dep.car]) return size_t{dep.car};
    }
    return kNone;
  });
  const auto name = [](size_t c) { return "car " + std::to_string(c); };
  return fail(error, car_label(dag.image, cycle.front(), dag.cars[cycle.front()]) +
                         ": dependency cycle " + describe_cycle(cycle, name));
}

bool check_reaches_exit(const LocalDag& dag, std::string* error) {
  // Walk dependencies backwards from the exit; whatever is not met cannot
  // reach it, so the image could complete while that CAR still runs.
  std::vector<char> reached(dag.cars.size(), 0);
  std::vector<CarId> stack{dag.exit};
  reached[dag.exit] = 1;
  while (!stack.empty()) {
    const CarId c = stack.back();
    stack.pop_back();
    for (const Dep& dep : dag.cars[c].deps) {
      if (!reached[dep.car]) {
        reached[dep.car] = 1;
        stack.push_back(dep.car);
      }
    }
  }
  for (CarId c = 0; c < dag.cars.size(); ++c) {
    if (!reached[c]) {
      return fail(error, car_label(dag.image, c, dag.cars[c]) + ": does not reach the exit (car " +
                             std::to_string(dag.exit) + ")");
    }
  }
  return true;
}

bool check_exit(const LocalDag& dag, std::string* error) {
  const std::string image = "image " + std::to_string(dag.image);
  if (dag.exit >= dag.cars.size()) {
    return fail(error, image + ": exit car " + std::to_string(dag.exit) + " does not exist (" +
                           std::to_string(dag.cars.size()) + " cars)");
  }
  const Car& exit = dag.cars[dag.exit];
  if (exit.kind != CarKind::Join) {
    return fail(error, car_label(dag.image, dag.exit, exit) + ": the exit must be a JOIN");
  }
  return true;
}

// ---- match_messages -------------------------------------------------------

// One side of a message, keyed the same way on both sides.
// Members of an aggregate send under their own sequence numbers, so the
// member is part of the key (graph/aggregate.h).
struct MessageEnd {
  uint32_t sender = 0, receiver = 0, member = 0, tag = 0;
  uint32_t image = 0;
  CarId car = 0;
  auto key() const { return std::tie(sender, receiver, member, tag); }
  auto order() const { return std::tie(sender, receiver, member, tag, image, car); }
};

std::vector<MessageEnd> collect_ends(const GlobalDag& dag, bool sends) {
  std::vector<MessageEnd> ends;
  for (uint32_t i = 0; i < dag.images.size(); ++i) {
    const std::vector<Car>& cars = dag.images[i].cars;
    for (CarId c = 0; c < cars.size(); ++c) {
      if (sends && cars[c].kind == CarKind::Send) {
        ends.push_back({i, cars[c].peer, cars[c].member, cars[c].tag, i, c});
      } else if (!sends && cars[c].is_receive()) {
        ends.push_back({cars[c].peer, i, cars[c].member, cars[c].tag, i, c});
      }
    }
  }
  return ends;
}

std::string end_label(const GlobalDag& dag, const MessageEnd& end) {
  return car_label(end.image, end.car, dag.images[end.image].cars[end.car]);
}

std::string key_text(const MessageEnd& end) {
  const std::string member = end.member != 0 ? ", member " + std::to_string(end.member) : "";
  return "(sender " + std::to_string(end.sender) + ", receiver " + std::to_string(end.receiver) +
         member + ", tag " + std::to_string(end.tag) + ")";
}

// Sorts `ends` by key; two ends with one key would make the match ambiguous.
bool sort_unique(const GlobalDag& dag, std::vector<MessageEnd>* ends, std::string* error) {
  std::sort(ends->begin(), ends->end(),
            [](const MessageEnd& a, const MessageEnd& b) { return a.order() < b.order(); });
  for (size_t i = 1; i < ends->size(); ++i) {
    const MessageEnd& a = (*ends)[i - 1];
    const MessageEnd& b = (*ends)[i];
    if (a.key() == b.key()) {
      return fail(error, end_label(dag, b) + ": duplicate message " + key_text(b) + "; car " +
                             std::to_string(a.car) + " uses the same tag");
    }
  }
  return true;
}

bool unmatched(const GlobalDag& dag, const MessageEnd& end, bool is_send, std::string* error) {
  const std::string other = is_send ? "receive on image " + std::to_string(end.receiver)
                                    : "SEND on image " + std::to_string(end.sender);
  return fail(error, end_label(dag, end) + ": no " + other + " matches " + key_text(end));
}

}  // namespace

bool match_messages(const GlobalDag& dag, std::vector<MessageEdge>* edges, std::string* error) {
  if (edges != nullptr) edges->clear();
  std::vector<MessageEnd> sends = collect_ends(dag, true);
  std::vector<MessageEnd> recvs = collect_ends(dag, false);
  if (!sort_unique(dag, &sends, error) || !sort_unique(dag, &recvs, error)) return false;
  // Both lists are sorted by key now, so one merge pairs them.
  std::vector<MessageEdge> out;
  out.reserve(sends.size());
  size_t r = 0;
  for (const MessageEnd& s : sends) {
    if (r < recvs.size() && recvs[r].key() < s.key()) return unmatched(dag, recvs[r], false, error);
    if (r == recvs.size() || recvs[r].key() != s.key()) return unmatched(dag, s, true, error);
    const MessageEnd& m = recvs[r++];
    const uint64_t sent = dag.images[s.image].cars[s.car].message_bytes();
    const uint64_t received = dag.images[m.image].cars[m.car].message_bytes();
    if (sent != received) {
      return fail(error, end_label(dag, m) + ": receives " + std::to_string(received) +
                             " bytes but its SEND " + end_label(dag, s) + " sends " + std::to_string(sent));
    }
    out.push_back({s.image, s.car, m.image, m.car});
  }
  if (r < recvs.size()) return unmatched(dag, recvs[r], false, error);
  std::sort(out.begin(), out.end(), [](const MessageEdge& a, const MessageEdge& b) {
    return std::tie(a.from_image, a.from_car) < std::tie(b.from_image, b.from_car);
  });
  if (edges != nullptr) *edges = std::move(out);
  return true;
}

bool validate_local(const LocalDag& dag, uint32_t images, std::string* error, uint32_t elem_size) {
  if (!dag.error.empty()) return fail(error, dag.error);
  const std::string image = "image " + std::to_string(dag.image);
  if (images == 0) return fail(error, image + ": the team size must be at least 1");
  if (dag.image >= images) {
    return fail(error, image + ": not a team rank (P = " + std::to_string(images) + ")");
  }
  if (dag.cars.size() >= kNoCar) {
    return fail(error, image + ": " + std::to_string(dag.cars.size()) + " CARs exceed the CarId range");
  }
  for (size_t m = 0; m < dag.members.size(); ++m) {
    if (dag.members[m].elem_size == 0) {
      return fail(error, image + ": member " + std::to_string(m) + ": elem_size must be at least 1");
    }
  }
  if (!dag.members.empty() && (dag.members[0].src_bytes != dag.src_bytes ||
                               dag.members[0].dst_bytes != dag.dst_bytes)) {
    return fail(error, image + ": member 0's buffers must equal src_bytes and dst_bytes");
  }
  return check_exit(dag, error) && check_cars(dag, images, elem_size, error) &&
         check_local_acyclic(dag, error) && check_reaches_exit(dag, error);
}

namespace {

// ---- the global graph -----------------------------------------------------

// CAR c of image i is node base[i] + c of one numbering across all images.
struct GlobalIndex {
  std::vector<size_t> base;
  explicit GlobalIndex(const GlobalDag& dag) : base(dag.images.size() + 1, 0) {
    for (size_t i = 0; i < dag.images.size(); ++i) base[i + 1] = base[i] + dag.images[i].cars.size();
  }
  size_t size() const { return base.back(); }
  size_t node(uint32_t image, CarId car) const { return base[image] + car; }
  std::pair<uint32_t, CarId> locate(size_t node) const {
    const size_t i = std::upper_bound(base.begin(), base.end(), node) - base.begin() - 1;
    return {static_cast<uint32_t>(i), static_cast<CarId>(node - base[i])};
  }
};

// The DAG with each matched SEND and its receive merged into the SEND's node:
// under rendezvous neither completes before the other.
struct ContractedGraph {
  std::vector<size_t> rep;      // node -> the node it was merged into
  std::vector<size_t> partner;  // node -> the other end of its message, or kNone
  Csr csr;
};

ContractedGraph contract(const GlobalDag& dag, const GlobalIndex& index,
                         const std::vector<MessageEdge>& edges) {
  ContractedGraph g;
  g.rep.resize(index.size());
  std::iota(g.rep.begin(), g.rep.end(), size_t{0});
  g.partner.assign(index.size(), kNone);
  for (const MessageEdge& e : edges) {
    const size_t s = index.node(e.from_image, e.from_car);
    const size_t r = index.node(e.to_image, e.to_car);
    g.rep[r] = s;
    g.partner[s] = r;
    g.partner[r] = s;
  }
  g.csr = build_csr(index.size(), [&](const auto& emit) {
    for (uint32_t i = 0; i < dag.images.size(); ++i) {
      const std::vector<Car>& cars = dag.images[i].cars;
      for (CarId c = 0; c < cars.size(); ++c) {
        for (const Dep& dep : cars[c].deps) emit(g.rep[index.node(i, dep.car)], g.rep[index.node(i, c)]);
      }
    }
  });
  return g;
}

std::string contracted_name(const GlobalDag& dag, const GlobalIndex& index,
                            const ContractedGraph& g, size_t node) {
  const auto name = [&](size_t n) {
    const auto [i, c] = index.locate(n);
    return car_label(i, c, dag.images[i].cars[c]);
  };
  if (g.partner[node] == kNone) return name(node);
  return name(node) + " = " + name(g.partner[node]);
}

bool check_deadlock_free(const GlobalDag& dag, const std::vector<MessageEdge>& edges,
                         std::string* error) {
  const GlobalIndex index(dag);
  const ContractedGraph g = contract(dag, index, edges);
  const std::vector<size_t> order = topological_order(g.csr);
  if (order.size() == index.size()) return true;
  const std::vector<char> placed = placed_nodes(index.size(), order);
  // A merged node's predecessors are those of both its CARs.
  const auto unplaced_pred = [&](size_t node) {
    for (size_t member : {node, g.partner[node]}) {
      if (member == kNone) continue;
      const auto [i, c] = index.locate(member);
      for (const Dep& dep : dag.images[i].cars[c].deps) {
        const size_t pred = g.rep[index.node(i, dep.car)];
        if (!placed[pred]) return pred;
      }
    }
    return kNone;
  };
  const std::vector<size_t> cycle = find_cycle(index.size(), first_unplaced(placed), unplaced_pred);
  const auto name = [&](size_t n) { return "[" + contracted_name(dag, index, g, n) + "]"; };
  return fail(error, "deadlock: with each message's SEND and receive merged, the DAG has a cycle " +
                         describe_cycle(cycle, name));
}

bool check_spec(const CollectiveSpec& spec, std::string* error) {
  if (static_cast<unsigned>(spec.kind) >= unsigned(kCollKinds)) {
    return fail(error, "spec.kind: " + std::to_string(unsigned(spec.kind)) + " is not a collective kind");
  }
  if (spec.images == 0) return fail(error, "spec.images: the team size must be at least 1");
  if (spec.root >= spec.images) {
    return fail(error, "spec.root: " + std::to_string(spec.root) + " is not a team rank (P = " +
                           std::to_string(spec.images) + ")");
  }
  if (spec.elem_size == 0) return fail(error, "spec.elem_size: must be at least 1");
  std::string problem;
  if (!check_layout(spec, &problem)) return fail(error, "spec." + problem);
  return true;
}

// Longest chain of CARs along dependencies and message edges (SEND before
// its receive), counted in CARs.
uint64_t critical_path(const GlobalDag& dag, const GlobalIndex& index,
                       const std::vector<MessageEdge>& edges) {
  const Csr g = build_csr(index.size(), [&](const auto& emit) {
    for (uint32_t i = 0; i < dag.images.size(); ++i) {
      const std::vector<Car>& cars = dag.images[i].cars;
      for (CarId c = 0; c < cars.size(); ++c) {
        for (const Dep& dep : cars[c].deps) {
          if (dep.car < cars.size()) emit(index.node(i, dep.car), index.node(i, c));
        }
      }
    }
    for (const MessageEdge& e : edges) {
      emit(index.node(e.from_image, e.from_car), index.node(e.to_image, e.to_car));
    }
  });
  std::vector<uint64_t> longest(index.size(), 1);
  uint64_t best = 0;
  for (size_t n : topological_order(g)) {
    best = std::max(best, longest[n]);
    for (size_t e = g.first[n]; e < g.first[n + 1]; ++e) {
      longest[g.succ[e]] = std::max(longest[g.succ[e]], longest[n] + 1);
    }
  }
  return best;
}

}  // namespace

bool validate_global(const GlobalDag& dag, std::string* error) {
  if (!check_spec(dag.spec, error)) return false;
  if (dag.images.size() != dag.spec.images) {
    return fail(error, "global DAG: " + std::to_string(dag.images.size()) +
                           " images but spec.images is " + std::to_string(dag.spec.images));
  }
  for (uint32_t i = 0; i < dag.images.size(); ++i) {
    if (dag.images[i].image != i) {
      return fail(error, "images[" + std::to_string(i) + "]: holds image " +
                             std::to_string(dag.images[i].image) + "; image i must sit at index i");
    }
    if (!validate_local(dag.images[i], dag.spec.images, error, dag.spec.elem_size)) return false;
  }
  std::vector<MessageEdge> edges;
  return match_messages(dag, &edges, error) && check_deadlock_free(dag, edges, error);
}

DagStats dag_stats(const GlobalDag& dag) {
  DagStats stats;
  const GlobalIndex index(dag);
  stats.cars = index.size();
  for (const LocalDag& image : dag.images) {
    const uint64_t sends = std::count_if(image.cars.begin(), image.cars.end(),
                                         [](const Car& car) { return car.kind == CarKind::Send; });
    stats.max_sends_per_image = std::max(stats.max_sends_per_image, sends);
  }
  // On an unmatched DAG (the caller skipped validation) count no messages
  // rather than guess at pairs.
  std::vector<MessageEdge> edges;
  std::string ignored;
  if (!match_messages(dag, &edges, &ignored)) edges.clear();
  stats.messages = edges.size();
  for (const MessageEdge& e : edges) {
    stats.message_bytes += dag.images[e.from_image].cars[e.from_car].message_bytes();
  }
  stats.critical_path = critical_path(dag, index, edges);
  return stats;
}

}  // namespace carflow
