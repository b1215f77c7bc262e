// The LogGP cost model (graph/model/loggp.h): simulated times against
// closed forms derived here from the model's rules, the LogP-optimal
// broadcast against Karp, Sahay, Santos, Schauser's recurrence, the
// parameter parsers on bad input, a deadlocked DAG, and GOAL output.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/model/goal.h"
#include "graph/model/loggp.h"
#include "graph/registry.h"
#include "graph/transforms.h"
#include "graph_test_dags.h"

namespace carflow {
namespace {

const uint32_t kSizes[] = {1, 2, 3, 5, 8, 13, 16, 64};

struct Params {
  double L, o, g, G, O;
};
// Small integers and binary fractions: every closed form below is exact.
const Params kParams[] = {{6, 2, 4, 0.5, 0.25}, {10, 3, 1, 0, 0}, {1, 1, 5, 0.125, 0}, {40, 2, 2, 0, 0.5}};

LogGPModel model_of(const Params& p, double gamma = 0, double beta = 0) {
  LogGPModel m;
  m.inter = LogGPParams{p.L, p.o, p.g, p.G, p.O, 1e12, gamma, beta};
  m.intra = m.inter;
  return m;
}

// `algorithm` of `kind` on P images, unsegmented, root 0.
CollectiveSpec spec_of(CollKind kind, const char* algorithm, uint32_t P, uint64_t nbytes, uint32_t elem_size = 1) {
  CollectiveSpec spec;
  spec.kind = kind;
  spec.algorithm = algorithm;
  spec.images = P;
  spec.nbytes = nbytes;
  spec.elem_size = elem_size;
  return spec;
}

const GeneratorInfo& generator_of(const CollectiveSpec& spec) {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  REQUIRE(gen != nullptr);
  return *gen;
}

// Simulates `algorithm` of `kind` on P images, unsegmented, root 0.
LogGPResult simulate(CollKind kind, const char* algorithm, uint32_t P, uint64_t nbytes, const LogGPModel& m,
                     uint32_t elem_size = 1) {
  CollectiveSpec spec = spec_of(kind, algorithm, P, nbytes, elem_size);
  const GeneratorInfo* gen = &generator_of(spec);
  if (gen->params & kUsesLogp) {
    spec.logp_L = static_cast<uint32_t>(m.inter.L);
    spec.logp_o = static_cast<uint32_t>(m.inter.o);
    spec.logp_g = static_cast<uint32_t>(m.inter.g);
  }
  FlatDag dag;
  std::string error;
  REQUIRE_MESSAGE(build_flat_dag(*gen, spec, &dag, &error), error);
  LogGPResult result;
  REQUIRE_MESSAGE(simulate_loggp(dag, m, &result, &error), error);
  return result;
}

// Every image of `spec` as `calls` back-to-back calls (repeat_calls).
GlobalDag repeated_global(const CollectiveSpec& spec, uint32_t calls) {
  GlobalDag global;
  global.spec = spec;
  for (uint32_t image = 0; image < spec.images; ++image) {
    global.images.push_back(repeat_calls(generate_local(generator_of(spec), spec, image), calls));
    REQUIRE(global.images.back().error.empty());
  }
  return global;
}

LogGPResult simulate(const GlobalDag& global, const LogGPModel& m) {
  FlatDag dag;
  std::string error;
  REQUIRE_MESSAGE(flat_dag_from_global(global, &dag, &error), error);
  LogGPResult result;
  REQUIRE_MESSAGE(simulate_loggp(dag, m, &result, &error), error);
  return result;
}

uint32_t ceil_log2(uint32_t P) {
  uint32_t k = 0;
  while ((uint64_t{1} << k) < P) ++k;
  return k;
}

// Costs of one s-byte message under the rules: a sender's next send may
// start `gap` after the last (CPU o + (s-1)O, NIC g + (s-1)G); a message
// sent at t is received (the receive done) at t + hop when the receiver's
// CPU is free then.
struct Message {
  double gap, hop, send_cpu;
  Message(const LogGPModel& m, uint64_t s) {
    const LogGPParams& p = m.inter;
    const double s1 = s == 0 ? 0 : static_cast<double>(s - 1);
    send_cpu = p.o + s1 * p.O;
    gap = std::max(send_cpu, p.g + s1 * p.G);
    hop = p.o + s1 * p.G + p.L + p.o + s1 * p.O;
  }
};

TEST_CASE("flat broadcast: the root's sends go out one gap apart, its COPY after them") {
  const uint64_t s = 8;
  for (const Params& p : kParams) {
    for (uint32_t P : kSizes) {
      const LogGPModel m = model_of(p, 0, 0.5);
      const Message msg(m, s);
      // Root: sends 0..P-2 start at k * gap (CAR order), then the COPY.
      const double copy = s * m.inter.beta;
      const double expected =
          P == 1 ? copy : std::max((P - 2) * msg.gap + msg.send_cpu + copy, (P - 2) * msg.gap + msg.hop);
      CAPTURE(P);
      CAPTURE(p.L);
      CHECK(simulate(CollKind::Broadcast, "flat", P, s, m).time_ns == doctest::Approx(expected));
    }
  }
}

// A loop of blocking calls (repeat_calls, `carflow simulate --calls`): on 2
// images the root starts call k once its call k-1 is done (its SEND and
// COPY) and its NIC is free, so calls start one period apart; the receiver
// keeps up (its RECV costs no more than a period) and ends one hop after
// the last send.
TEST_CASE("K back-to-back flat broadcasts: one period per call, then one hop") {
  const uint64_t s = 8;
  const CollectiveSpec spec = spec_of(CollKind::Broadcast, "flat", 2, s);
  for (const Params& p : kParams) {
    for (uint32_t calls : {1u, 2u, 7u, 100u}) {
      const LogGPModel m = model_of(p, 0, 0.5);
      const Message msg(m, s);
      const double copy = s * m.inter.beta, period = std::max(msg.send_cpu + copy, msg.gap);
      const double expected = (calls - 1) * period + std::max(msg.send_cpu + copy, msg.hop);
      CAPTURE(calls);
      CAPTURE(p.L);
      const LogGPResult r = simulate(repeated_global(spec, calls), m);
      CHECK(r.time_ns == doctest::Approx(expected));
      CHECK(r.messages == calls);
    }
  }
}

TEST_CASE("repeat_calls: call k follows call k-1's exit, its own tags, and refuses tags past 32 bits") {
  const CollectiveSpec spec = spec_of(CollKind::Allreduce, "ring", 4, 64, 4);
  const LocalDag one = generate_local(generator_of(spec), spec, 1);
  const uint32_t calls = 3;
  const LocalDag many = repeat_calls(one, calls);
  REQUIRE(many.error.empty());
  const size_t n = one.cars.size();
  REQUIRE(many.cars.size() == calls * n);
  CHECK(many.exit == (calls - 1) * n + one.exit);
  for (uint32_t k = 0; k < calls; ++k) {
    for (size_t c = 0; c < n; ++c) {
      const Car& a = one.cars[c];
      const Car& b = many.cars[k * n + c];
      CHECK(a.kind == b.kind);
      if (a.is_message()) CHECK(b.tag == a.tag * calls + k);
      if (k > 0 && a.deps.empty()) {
        REQUIRE(b.deps.size() == 1);
        CHECK(b.deps[0].car == (k - 1) * n + one.exit);
      } else {
        REQUIRE(b.deps.size() == a.deps.size());
        for (size_t d = 0; d < a.deps.size(); ++d) CHECK(b.deps[d].car == a.deps[d].car + k * n);
      }
    }
  }
  // Every image repeated the same way still matches message for message.
  CHECK(simulate(repeated_global(spec, calls), model_of(kParams[0])).messages == calls * 4 * 6);

  LocalDag big = one;
  for (Car& car : big.cars) {
    if (car.is_message()) car.tag = 1u << 30;
  }
  const LocalDag refused = repeat_calls(big, 4);
  CHECK(refused.error.find("--calls") != std::string::npos);
  CHECK(refused.error.find("32 bits") != std::string::npos);
  CHECK(repeat_calls(big, 3).error.empty());
}

// Binomial tree (graph/generators/trees.h): vr's parent clears its lowest
// set bit; a node sends to vr + 2^j for every 2^j below that bit (the root:
// below 2^ceil(log2 P)), highest first, skipping ranks >= P. The i-th send
// (from 0) of a node informed at t starts at t + i * gap.
double binomial_informed(uint32_t vr, uint32_t P, const Message& msg, double root_start) {
  if (vr == 0) return root_start;
  const uint32_t bit = vr & (~vr + 1);
  const uint32_t parent = vr - bit;
  const uint64_t limit = parent == 0 ? (uint64_t{1} << ceil_log2(P)) : (parent & (~parent + 1));
  uint32_t index = 0;
  for (uint64_t b = limit >> 1; b > bit; b >>= 1) index += parent + b < P ? 1 : 0;
  return binomial_informed(parent, P, msg, root_start) + index * msg.gap + msg.hop;
}

TEST_CASE("binomial broadcast: each image is informed along its tree path, one hop per edge") {
  const uint64_t s = 16;
  for (const Params& p : kParams) {
    for (uint32_t P : kSizes) {
      const LogGPModel m = model_of(p, 0, 0.25);
      const Message msg(m, s);
      const double copy = s * m.inter.beta;  // the root's COPY runs first
      double expected = copy;
      for (uint32_t vr = 1; vr < P; ++vr) expected = std::max(expected, binomial_informed(vr, P, msg, copy));
      CAPTURE(P);
      CAPTURE(p.L);
      CHECK(simulate(CollKind::Broadcast, "binomial", P, s, m).time_ns == doctest::Approx(expected));
      // Powers of two with gap <= hop: the deepest path, log2 P hops.
      if ((P & (P - 1)) == 0 && msg.gap <= msg.hop) {
        CHECK(expected == doctest::Approx(copy + ceil_log2(P) * msg.hop));
      }
    }
  }
}

TEST_CASE("dissemination barrier: ceil(log2 P) rounds, each a hop or the NIC gap") {
  const Params params[] = {{6, 2, 4, 0, 0}, {6, 2, 20, 0, 0}, {1, 3, 1, 0.5, 0.5}};
  for (const Params& p : params) {
    for (uint32_t P : kSizes) {
      const LogGPModel m = model_of(p);
      const double hop = 2 * p.o + p.L;  // zero-byte messages
      const uint32_t R = ceil_log2(P);
      // Round k's send waits for round k-1's receive (a hop after its own
      // send, by symmetry) and for the NIC (g after the last send).
      const double expected = P == 1 ? 0 : (R - 1) * std::max(hop, p.g) + hop;
      CAPTURE(P);
      CAPTURE(p.g);
      CHECK(simulate(CollKind::Barrier, "dissemination", P, 0, m).time_ns == doctest::Approx(expected));
    }
  }
}

TEST_CASE("recursive doubling allreduce: log2 P rounds of a hop and a reduction") {
  const uint64_t s = 64;
  for (const Params& p : kParams) {
    for (uint32_t P : {1u, 2u, 4u, 8u, 16u, 64u}) {
      const LogGPModel m = model_of(p, 0.5, 0.25);
      const Message msg(m, s);
      // Round 0 combines as it receives (RECV_REDUCE); later rounds RECV
      // then REDUCE: either way a hop plus s * gamma per round. P = 1: a COPY.
      const double expected = P == 1 ? s * m.inter.beta : ceil_log2(P) * (msg.hop + s * m.inter.gamma);
      CAPTURE(P);
      CAPTURE(p.L);
      CHECK(simulate(CollKind::Allreduce, "recursive_doubling", P, s, m, 8).time_ns ==
            doctest::Approx(expected));
    }
  }
}

TEST_CASE("recursive doubling allreduce on 3 images: the fold, one round, the unfold") {
  // Traced by hand (G = O = 0, s bytes): image 0 hands its vector to image
  // 1 and image 2 sends round 0's to image 1, both arriving at o + L. Image
  // 1 receives them in CAR order (to 2o + L, 3o + L), folds (+ s gamma),
  // sends round 0 (to 4o + L + s gamma; image 2 has it at 5o + 2L + 2s
  // gamma), combines (+ s gamma) and sends the result back: image 0 has
  // it at 4o + L + 2 s gamma + 2o + L.
  const uint64_t s = 32;
  const LogGPModel m = model_of({7, 3, 2, 0, 0}, 0.5, 0);
  const double o = 3, L = 7, r = s * 0.5;
  CHECK(simulate(CollKind::Allreduce, "recursive_doubling", 3, s, m, 8).time_ns ==
        doctest::Approx(6 * o + 2 * L + 2 * r));
}

TEST_CASE("ring allreduce: 2(P-1) steps around the ring, one block each") {
  for (const Params& p : kParams) {
    for (uint32_t P : kSizes) {
      const uint64_t block = 8, n = block * P;
      const LogGPModel m = model_of(p, 0.5, 0.25);
      const Message msg(m, block);
      const double nic_gap = p.g + (block - 1) * p.G;
      // Every image does the same at the same time: the initial COPY of the
      // whole vector, then P-1 reduce-scatter steps (a send, a hop, a
      // block's reduction) and P-1 allgather steps (a send, a hop); each
      // send also waits for the NIC.
      double ready = n * m.inter.beta, nic = 0;
      for (uint32_t step = 0; step + 1 < 2 * P - 1; ++step) {
        const double start = std::max(ready, nic);
        nic = start + nic_gap;
        ready = start + msg.hop + (step + 1 < P ? block * m.inter.gamma : 0);
      }
      CAPTURE(P);
      CAPTURE(p.L);
      CHECK(simulate(CollKind::Allreduce, "ring", P, n, m, 8).time_ns == doctest::Approx(ready));
      if (nic_gap <= msg.hop) {  // then simply 2(P-1) hops and P-1 reductions
        CHECK(ready == doctest::Approx(n * m.inter.beta + (P - 1) * (2 * msg.hop + block * m.inter.gamma)));
      }
    }
  }
}

// Karp, Sahay, Santos, Schauser, "Optimal broadcast and summation in the
// LogP model" (SPAA 1993): with the root's sends gap = max(g, o) apart and
// a message taking hop = L + 2o, the most nodes informed by time t are
// N(t) = 1 for t < hop, else N(t - gap) + N(t - hop); the optimal
// broadcast time on P nodes is the least t with N(t) >= P.
double logp_optimal(uint32_t P, uint64_t L, uint64_t o, uint64_t g) {
  const uint64_t gap = std::max(g, o), hop = L + 2 * o;
  std::vector<uint64_t> N;
  for (uint64_t t = 0;; ++t) {
    uint64_t n = 1;
    if (t >= hop) n = std::min<uint64_t>(P, (t >= gap ? N[t - gap] : 1) + N[t - hop]);
    N.push_back(n);
    if (n >= P) return static_cast<double>(t);
  }
}

TEST_CASE("logp broadcast takes the LogP-optimal time of Karp et al.") {
  const uint64_t kLog[][3] = {{6, 2, 4}, {10, 1, 3}, {1, 3, 2}, {20, 5, 5}, {3, 1, 7}, {50, 2, 1}, {0, 1, 1}};
  for (const auto& lgo : kLog) {
    const LogGPModel m = model_of({double(lgo[0]), double(lgo[1]), double(lgo[2]), 0, 0});
    for (uint32_t P = 1; P <= 64; ++P) {
      CAPTURE(P);
      CAPTURE(lgo[0]);
      CAPTURE(lgo[1]);
      CAPTURE(lgo[2]);
      CHECK(simulate(CollKind::Broadcast, "logp", P, 8, m).time_ns ==
            doctest::Approx(logp_optimal(P, lgo[0], lgo[1], lgo[2])));
    }
  }
}

TEST_CASE("a message above S waits for its receive and pays the handshake") {
  LogGPModel m = model_of({10, 2, 3, 0.5, 0.25});
  const double o = 2, L = 10, s1 = 7;  // one_message() sends 8 bytes
  const double eager = o + s1 * 0.5 + L + o + s1 * 0.25;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(eager));
  m.inter.S = m.intra.S = 4;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(eager + L + 2 * o));
}

TEST_CASE("a message of 2^41 bytes keeps its size past the CAR's 40-bit field") {
  const uint64_t s = uint64_t{1} << 41;
  DagBuilder a(0, s, s);
  a.send(1, 0, user_src(0, s));
  DagBuilder b(1, 0, s);
  b.recv(0, 0, user_dst(0, s));
  const GlobalDag global = test_dags::make_global(CollKind::Broadcast, 2, s, {a.finish(), b.finish()});
  FlatDag dag;
  std::string error;
  REQUIRE_MESSAGE(flat_dag_from_global(global, &dag, &error), error);
  CHECK(dag.car[0].stored_bytes() == kBigFlatBytes);
  CHECK(dag.bytes(0) == s);
  CHECK(dag.bytes(dag.image_base[1]) == s);
  CHECK(dag.bytes(1) == 0);  // image 0's exit JOIN
  CHECK(dag.message_bytes == s);
  LogGPResult r;
  REQUIRE_MESSAGE(simulate_loggp(dag, model_of({10, 2, 3, 0.5, 0.25}), &r, &error), error);
  const double s1 = static_cast<double>(s - 1);
  CHECK(r.time_ns == doctest::Approx(2 + s1 * 0.5 + 10 + 2 + s1 * 0.25));
}

TEST_CASE("images of one node use the intra-node parameters") {
  LogGPModel m = model_of({100, 2, 3, 0, 0});
  m.intra.L = 5;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(2 + 100 + 2));
  m.images_per_node = 2;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(2 + 5 + 2));
  m.images_per_node = 1;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(2 + 100 + 2));
}

TEST_CASE("a message takes the parameters of its size's band") {
  LogGPModel m = model_of({100, 2, 3, 0, 0});
  const double o = 2;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(o + 100 + o));  // 8 bytes
  LogGPBand band;
  band.from = 9;  // above the message: the main set still holds
  band.inter = band.intra = m.inter;
  band.inter.L = band.intra.L = 7;
  m.bands.push_back(band);
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(o + 100 + o));
  m.bands[0].from = 8;
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(o + 7 + o));
  m.bands[0].inter.S = m.bands[0].intra.S = 4;  // the band's eager limit: the handshake too
  CHECK(simulate(test_dags::one_message(), m).time_ns == doctest::Approx(o + 7 + o + 7 + 2 * o));
  // A flat broadcast on 1 image is its root's COPY: beta of the copy's band.
  LogGPModel copies = model_of({1, 1, 1, 0, 0}, 0, 0.5);
  CHECK(simulate(CollKind::Broadcast, "flat", 1, 4096, copies).time_ns == doctest::Approx(2048));
  LogGPBand large;
  large.from = 4096;
  large.inter = large.intra = copies.inter;
  large.inter.beta = large.intra.beta = 2;
  copies.bands.push_back(large);
  CHECK(simulate(CollKind::Broadcast, "flat", 1, 4095, copies).time_ns == doctest::Approx(4095 * 0.5));
  CHECK(simulate(CollKind::Broadcast, "flat", 1, 4096, copies).time_ns == doctest::Approx(8192));
}

TEST_CASE("REDUCEs and COPYs take gamma and beta from the band of the collective's largest buffer") {
  // One image: a COPY of 100 bytes and a REDUCE of 100 bytes, its user
  // buffers `buffer` bytes each.
  auto pieces = [](uint64_t buffer) {
    GlobalDag global;
    global.spec.kind = CollKind::Allreduce;
    global.spec.images = 1;
    global.spec.nbytes = buffer;
    DagBuilder b(0, buffer, buffer);
    const CarId copied = b.copy(user_dst(0, 100), user_src(0, 100));
    b.reduce(user_dst(100, 100), user_src(100, 100), user_src(200, 100), {after(copied)});
    global.images.push_back(b.finish());
    return global;
  };
  LogGPModel m = model_of({1, 1, 1, 0, 0}, 0.25, 0.5);
  LogGPBand large;
  large.from = 1 << 20;
  large.inter = large.intra = m.inter;
  large.inter.gamma = large.intra.gamma = 3;
  large.inter.beta = large.intra.beta = 2;
  m.bands.push_back(large);
  CHECK(simulate(pieces(4096), m).time_ns == doctest::Approx(100 * 0.5 + 100 * 0.25));
  CHECK(simulate(pieces((1 << 20) - 1), m).time_ns == doctest::Approx(100 * 0.5 + 100 * 0.25));
  CHECK(simulate(pieces(1 << 20), m).time_ns == doctest::Approx(100 * 2 + 100 * 3));
  // A RECV_REDUCE's combine too: 2 images exchanging 100 bytes of 2 MiB
  // vectors, each combining on arrival.
  GlobalDag two;
  two.spec.kind = CollKind::Allreduce;
  two.spec.images = 2;
  for (uint32_t image = 0; image < 2; ++image) {
    DagBuilder b(image, 2 << 20, 2 << 20);
    b.send(1 - image, 0, user_src(0, 100));
    b.recv_reduce(1 - image, 0, user_dst(0, 100), true, {}, user_src(0, 100));
    two.images.push_back(b.finish());
  }
  // SEND o, then the message (o + L) arrives at 2 and its RECV_REDUCE
  // takes o + 100 gamma from the large band.
  CHECK(simulate(two, m).time_ns == doctest::Approx(1 + 1 + 1 + 100 * 3));
  FlatDag dag;
  std::string error;
  REQUIRE_MESSAGE(flat_dag_from_global(two, &dag, &error), error);
  CHECK(dag.footprint == (2u << 20));
  // Without bands nothing changes: one gamma and one beta for every size.
  m.bands.clear();
  CHECK(simulate(pieces(1 << 20), m).time_ns == doctest::Approx(100 * 0.5 + 100 * 0.25));
}

TEST_CASE("the critical path runs from time 0 to the collective's time") {
  const LogGPModel m = model_of({6, 2, 4, 0, 0});
  const LogGPResult r = simulate(CollKind::Broadcast, "binomial", 8, 8, m);
  REQUIRE(!r.critical_path.empty());
  CHECK(r.critical_path.front().start_ns == 0);
  CHECK(r.critical_path.back().done_ns == doctest::Approx(r.time_ns));
  CHECK(r.messages == 7);
  CHECK(r.message_bytes == 56);
  for (size_t i = 1; i < r.critical_path.size(); ++i) {
    CHECK(r.critical_path[i].start_ns >= r.critical_path[i - 1].done_ns - 1e-9);
  }
  // Three hops down the tree: a RECV after a message on each of them.
  CHECK(std::count_if(r.critical_path.begin(), r.critical_path.end(), [](const PathStep& s) {
          return std::string(s.waited_for) == "message";
        }) == 3);
}

TEST_CASE("a deadlocked DAG is refused naming the images and what their CARs wait on") {
  // Each image receives before it sends, and sends only after receiving.
  std::vector<LocalDag> locals;
  for (uint32_t i = 0; i < 2; ++i) {
    DagBuilder b(i, 8, 8);
    const CarId got = b.recv(1 - i, 0, user_dst(0, 8));
    b.send(1 - i, 0, user_src(0, 8), {after(got)});
    locals.push_back(b.finish());
  }
  const GlobalDag global = test_dags::make_global(CollKind::Exchange, 2, 8, std::move(locals));
  FlatDag dag;
  std::string error;
  REQUIRE(flat_dag_from_global(global, &dag, &error));
  LogGPResult result;
  CHECK_FALSE(simulate_loggp(dag, model_of(kParams[0]), &result, &error));
  CHECK(error.find("deadlock: 6 of 6 CARs never ran, on 2 of 2 images (0, 1)") != std::string::npos);
  CHECK(error.find("image 0 CAR 0 (RECV) waits on its message from image 1 CAR 1 (SEND), which never ran") !=
        std::string::npos);
}

TEST_CASE("an unmatched message is refused naming the CAR") {
  DagBuilder a(0, 8, 8);
  a.send(1, 3, user_src(0, 8));
  DagBuilder b(1, 8, 8);
  b.recv(0, 4, user_dst(0, 8));
  const GlobalDag global = test_dags::make_global(CollKind::Broadcast, 2, 8, {a.finish(), b.finish()});
  FlatDag dag;
  std::string error;
  CHECK_FALSE(flat_dag_from_global(global, &dag, &error));
  CHECK(error == "image 0 CAR 0 (SEND): no receive on image 1 matches (sender 0, receiver 1, tag 3)");
}

TEST_CASE("images packed in chunks and appended make the FlatDag that adding them one by one makes") {
  const std::pair<CollKind, const char*> cases[] = {{CollKind::Broadcast, "binomial"},
                                                    {CollKind::Allreduce, "recursive_doubling"},
                                                    {CollKind::Gather, "binomial"}};
  for (const auto& [kind, algorithm] : cases) {
    for (uint32_t P : {1u, 2u, 13u, 37u}) {
      CAPTURE(algorithm);
      CAPTURE(P);
      CollectiveSpec spec;
      spec.kind = kind;
      spec.algorithm = algorithm;
      spec.images = P;
      spec.nbytes = 64;
      const GeneratorInfo* gen = GeneratorRegistry::instance().find(kind, algorithm);
      FlatDag whole, chunked;
      std::string error;
      REQUIRE_MESSAGE(build_flat_dag(*gen, spec, &whole, &error), error);
      // Chunks of 5 images, and room for one CAR: append must grow the arrays.
      FlatDagBuilder builder(P);
      builder.reserve(1);
      FlatImages chunk;
      for (uint32_t first = 0; first < P; first += 5) {
        chunk.restart(first);
        for (uint32_t i = first; i < std::min(P, first + 5); ++i) {
          REQUIRE_MESSAGE(chunk.pack(generate_local(*gen, spec, i), P, kMaxFlatCars, &error), error);
        }
        REQUIRE_MESSAGE(builder.append(chunk, &error), error);
      }
      REQUIRE_MESSAGE(builder.finish(&chunked, &error), error);
      CHECK(chunked.image_base == whole.image_base);
      CHECK(chunked.footprint == whole.footprint);
      CHECK(whole.footprint == (kind == CollKind::Gather ? 64u * P : 64u));
      CHECK(std::equal(chunked.succ.begin(), chunked.succ.end(), whole.succ.begin(), whole.succ.end()));
      REQUIRE(chunked.cars() == whole.cars());
      for (uint32_t c = 0; c <= whole.cars(); ++c) {
        CHECK(chunked.car[c].word == whole.car[c].word);
        if (c < whole.cars()) CHECK(chunked.deps[c] == whole.deps[c]);
        CHECK(chunked.car[c].succ_begin == whole.car[c].succ_begin);
        CHECK(chunked.car[c].match == whole.car[c].match);
      }
      LogGPResult a, b;
      REQUIRE(simulate_loggp(whole, model_of(kParams[0]), &a, &error));
      REQUIRE(simulate_loggp(chunked, model_of(kParams[0]), &b, &error));
      CHECK(a.time_ns == b.time_ns);
      CHECK(a.messages == b.messages);
      CHECK(a.critical_path.size() == b.critical_path.size());
    }
  }
}

TEST_CASE("a chunk's refused image is reported after the images packed before it") {
  FlatImages chunk;
  chunk.restart(0);
  std::string error;
  DagBuilder a(0, 8, 8);
  a.send(1, 0, user_src(0, 8));
  REQUIRE(chunk.pack(a.finish(), 2, kMaxFlatCars, &error));
  DagBuilder b(1, 8, 8);
  b.recv(7, 0, user_dst(0, 8));
  CHECK_FALSE(chunk.pack(b.finish(), 2, kMaxFlatCars, &chunk.error));
  CHECK(chunk.error == "image 1 CAR 0: peer 7 is not another team rank (P = 2)");
  CHECK(chunk.images() == 1);
  CHECK(chunk.car.size() == 2);  // image 0's SEND and exit JOIN, nothing of image 1
  FlatDagBuilder builder(2);
  CHECK_FALSE(builder.append(chunk, &error));
  CHECK(error == chunk.error);
}

TEST_CASE("an all-to-all algorithm is refused before it is built when it would pass the CAR limit") {
  CollectiveSpec spec;
  spec.kind = CollKind::Exchange;
  spec.algorithm = "pairwise";
  spec.images = 4096;
  spec.nbytes = 8;
  FlatDag dag;
  std::string error;
  CHECK_FALSE(build_flat_dag(*GeneratorRegistry::instance().find(spec.kind, "pairwise"), spec, &dag, &error,
                             1000000));
  CHECK(error.find("--images: pairwise on 4096 images needs about") == 0);
  CHECK(error.find("over the simulator's limit of 1000000 CARs") != std::string::npos);
}

TEST_CASE("--model strings set the keys they name and refuse bad ones naming the key") {
  LogGPModel m;
  std::string error;
  REQUIRE(parse_model_string("L=6,o=2,g=4,G=0,O=0,beta=0,gamma=0", &m, &error));
  CHECK(m.inter.L == 6);
  CHECK(m.inter.o == 2);
  CHECK(m.inter.g == 4);
  CHECK(m.inter.gamma == 0);
  CHECK(m.intra.L == 6);  // intra follows where not given
  CHECK(m.inter.S == LogGPParams{}.S);
  REQUIRE(parse_model_string("intra.L=1.5,S=0", &m, &error));
  CHECK(m.intra.L == 1.5);
  CHECK(m.inter.L == 6);
  REQUIRE(parse_model_string("L=9", &m, &error));
  CHECK(m.intra.L == 1.5);  // given once, it stays
  REQUIRE(parse_model_string("", &m, &error));

  const std::pair<const char*, const char*> bad[] = {
      {"X=1", "X: not a model key"},
      {"L=-1", "L: -1 is not a number in [0, 1e12]"},
      {"o=nan", "o: 'nan' is not a number"},
      {"g=inf", "g: 'inf' is not a number"},
      {"G=1e999", "G: inf is not a number"},
      {"O=0x10", "O: '0x10' is not a number"},
      {"S=", "S: '' is not a number"},
      {"L=1e13", "L: 1e+13 is not a number in [0, 1e12]"},
      {"L=1,L=2", "L: given twice"},
      {"L=1,", "'L=1,': ends with a comma"},
      {"L", "'L': expected KEY=VALUE"},
      {"=5", "'=5': expected KEY=VALUE"},
      {"L=1,,o=2", "'': expected KEY=VALUE"},
      {"intra.gamma=1", "intra.gamma: not a model key"},
      {"beta=1 ", "beta: '1 ' is not a number"},
  };
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    LogGPModel before;
    LogGPModel unchanged = before;
    CHECK_FALSE(parse_model_string(text, &unchanged, &error));
    CHECK(error.find(message) == 0);
    CHECK(unchanged.inter.L == before.inter.L);
  }
}

TEST_CASE("model files are JSON objects of the same keys, checked field by field") {
  LogGPModel m;
  std::string error;
  REQUIRE(parse_model_json(R"({"L": 6, "o": 2.5, "intra": {"L": 1}})", &m, &error));
  CHECK(m.inter.L == 6);
  CHECK(m.inter.o == 2.5);
  CHECK(m.intra.L == 1);
  CHECK(m.intra.o == 2.5);

  const std::pair<const char*, const char*> bad[] = {
      {R"({"L": 5, "o": "2"})", "o: expected a number"},
      {R"({"L": -1})", "L: -1 is not a number"},
      {R"({"X": 1})", "X: not a model key"},
      {R"({"L": 1, "L": 2})", "L: given twice"},
      {R"({"intra": {"gamma": 2}})", "intra.gamma: not a model key"},
      {R"({"intra": 5})", "intra: expected an object"},
      {R"({"L": true})", "L: expected a number"},
      {R"({"L": null})", "L: expected a number"},
      {R"({"L": {"a": 1}})", "L: expected a number"},
      {R"({"intra": {"L": [[[[1]]]]}})", "model: nests deeper"},
      {R"([1, 2])", "model: expected a JSON object"},
      {R"({"L": NaN})", "model: not valid JSON"},
      {R"({"L": 1e999})", "model: not valid JSON"},
      {R"({"L": 1)", "model: not valid JSON"},
      {"", "model: not valid JSON"},
  };
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    LogGPModel fresh;
    CHECK_FALSE(parse_model_json(text, &fresh, &error));
    CHECK(error.find(message) == 0);
  }
  CHECK_FALSE(load_model_file("/nonexistent/model.json", &m, &error));
  CHECK(error == "/nonexistent/model.json: cannot open");
}

TEST_CASE("model files may give bands of sizes: each starts from the one below and changes what it names") {
  LogGPModel m;
  std::string error;
  REQUIRE(parse_model_json(R"({"L": 100, "G": 0.5, "intra": {"L": 10},
                               "bands": [{"from": 1024, "G": 0.25},
                                         {"from": 65536, "L": 300, "intra": {"G": 0.125}}]})",
                           &m, &error));
  REQUIRE(m.bands.size() == 2);
  const LogGPBand &low = m.bands[0], &high = m.bands[1];
  CHECK(low.from == 1024);
  CHECK(low.inter.L == 100);
  CHECK(low.inter.G == 0.25);
  CHECK(low.intra.L == 10);     // not named in the band: the set below's
  CHECK(low.intra.G == 0.25);   // named as G, not as intra.G: follows G
  CHECK(high.inter.L == 300);
  CHECK(high.inter.G == 0.25);
  CHECK(high.intra.L == 300);
  CHECK(high.intra.G == 0.125);
  CHECK(m.for_message(0, 1, 1023).G == 0.5);
  CHECK(m.for_message(0, 1, 1024).G == 0.25);
  CHECK(m.for_message(0, 1, 1 << 20).L == 300);
  CHECK(m.for_local(4096).gamma == m.inter.gamma);

  LogGPModel again;
  REQUIRE_MESSAGE(parse_model_json(model_to_json(m), &again, &error), error);
  REQUIRE(again.bands.size() == 2);
  CHECK(again.bands[1].intra.G == 0.125);
  CHECK(again.bands[0].intra.G == 0.25);
  CHECK(model_to_json(again) == model_to_json(m));

  const std::pair<const char*, const char*> bad[] = {
      {R"({"bands": 5})", "bands: expected an array"},
      {R"({"bands": [5]})", "bands[0]: expected an object"},
      {R"({"bands": [{"G": 1}]})", "bands[0].from: expected a whole number of bytes in [1, 2^50]"},
      {R"({"bands": [{"from": 0}]})", "bands[0].from: expected a whole number"},
      {R"({"bands": [{"from": 1.5}]})", "bands[0].from: expected a whole number"},
      {R"({"bands": [{"from": -4}]})", "bands[0].from: expected a whole number"},
      {R"({"bands": [{"from": 2000000000000000}]})", "bands[0].from: expected a whole number"},
      {R"({"bands": [{"from": 64}, {"from": 64}]})", "bands[1].from: expected a whole number of bytes in [65, 2^50]"},
      {R"({"bands": [{"from": 64, "X": 1}]})", "bands[0].X: not a model key"},
      {R"({"bands": [{"from": 64, "L": -1}]})", "bands[0].L: -1 is not a number"},
      {R"({"bands": [{"from": 64, "bands": []}]})", "bands[0].bands: not a model key"},
      {R"({"from": 64})", "from: a key of a band"},
      {R"({"bands": [{"from": 1}, {"from": 2}, {"from": 3}, {"from": 4}, {"from": 5}, {"from": 6}, {"from": 7},
                     {"from": 8}, {"from": 9}, {"from": 10}, {"from": 11}, {"from": 12}, {"from": 13},
                     {"from": 14}, {"from": 15}, {"from": 16}, {"from": 17}]})",
       "bands: more than 16"},
  };
  for (const auto& [text, message] : bad) {
    CAPTURE(text);
    LogGPModel fresh;
    CHECK_FALSE(parse_model_json(text, &fresh, &error));
    CHECK(error.find(message) == 0);
    CHECK(fresh.bands.empty());
  }
}

TEST_CASE("GOAL output of a small DAG") {
  // Image 0 copies (16 B) and sends; image 1 combines as it receives and
  // reduces again: every kind but JOIN's calc has a cost from gamma / beta.
  DagBuilder a(0, 16, 16);
  const CarId copied = a.copy(user_dst(0, 16), user_src(0, 16));
  a.send(1, 5, user_dst(0, 16), {after_buffer(copied)});
  DagBuilder b(1, 16, 16);
  const uint32_t slot = b.temp_slot(16);
  const CarId got = b.recv_reduce(0, 5, user_dst(0, 16), true);
  b.reduce(temp(slot, 0, 16), user_dst(0, 16), user_src(0, 16), {after_buffer(got)});
  const GlobalDag global = test_dags::make_global(CollKind::Allreduce, 2, 16, {a.finish(), b.finish()});
  LogGPParams costs;
  costs.gamma = 0.5;
  costs.beta = 0.25;
  std::ostringstream out;
  write_goal(global, costs, out);
  CHECK(out.str() ==
        "num_ranks 2\n"
        "\n"
        "rank 0 {\n"
        "l0: calc 4\n"
        "l1: send 16b to 1 tag 5\n"
        "l2: calc 0\n"
        "l1 requires l0\n"
        "l2 requires l1\n"
        "}\n"
        "\n"
        "rank 1 {\n"
        "l0: recv 16b from 0 tag 5\n"
        "l0r: calc 8\n"
        "l1: calc 8\n"
        "l2: calc 0\n"
        "l0r requires l0\n"
        "l1 requires l0r\n"
        "l2 requires l1\n"
        "}\n");
}

}  // namespace
}  // namespace carflow
