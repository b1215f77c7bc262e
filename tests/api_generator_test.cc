// The generator builder of carflow/generator.h: the built-ins written on it
// and their plug-in copies (api/examples/builtin_copies.c) build the same
// DAGs; every misuse is refused with the generator, image, call and
// argument named; a plug-in's hazards and matching are checked before it
// runs; its schedules are built once per key, as built-ins' are.
#include <carflow/generator.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "graph/check.h"
#include "graph/json.h"
#include "graph/model/loggp.h"
#include "graph/model/predict.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "tests/test_util.h"

extern "C" int cf_plugin_init(void);  // api/examples/builtin_copies.c

namespace {

using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow::GeneratorRegistry;
using carflow::LocalDag;
using carflow_test::cat;
using carflow_test::contains;
using carflow_test::run_images;

constexpr int kFlags = CF_COLL_IN_ALLSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

bool copies_registered() {
  static const int rc = cf_plugin_init();
  return rc == CF_OK;
}

CollectiveSpec spec_of(CollKind kind, const char* algorithm, uint32_t P, uint32_t root, uint64_t nbytes) {
  CollectiveSpec s;
  s.kind = kind;
  s.algorithm = algorithm;
  s.images = P;
  s.root = root;
  s.nbytes = nbytes;
  s.elem_size = carflow::is_computational(kind) ? 8 : 1;
  return s;
}

// generate_local of `copy` and of `builtin`, compared CAR by CAR.
void same_dags(CollectiveSpec spec, const char* builtin, const char* copy) {
  const auto* b = GeneratorRegistry::instance().find(spec.kind, builtin);
  const auto* c = GeneratorRegistry::instance().find(spec.kind, copy);
  REQUIRE(b != nullptr);
  REQUIRE(c != nullptr);
  CollectiveSpec cs = spec;
  spec.algorithm = builtin;
  cs.algorithm = copy;
  for (uint32_t i = 0; i < spec.images; ++i) {
    const LocalDag x = carflow::generate_local(*b, spec, i), y = carflow::generate_local(*c, cs, i);
    INFO(builtin, " P=", spec.images, " root=", spec.root, " nbytes=", spec.nbytes, " segment=",
         spec.segment_bytes, " counts=", spec.counts.size(), " image ", i, " ", y.error);
    CHECK(y.error.empty());
    CHECK(x.cars == y.cars);
    CHECK(x.temps == y.temps);
    CHECK(x.exit == y.exit);
    CHECK(x.src_bytes == y.src_bytes);
    CHECK(x.dst_bytes == y.dst_bytes);
  }
}

TEST_CASE("the plug-in copies of three built-ins build the built-ins' DAGs CAR by CAR") {
  REQUIRE(copies_registered());
  for (uint32_t P = 1; P <= 33; P += (P < 9 ? 1 : 4)) {
    for (uint32_t root : {0u, P - 1, P / 2}) {
      for (uint64_t n : {0ull, 8ull, 1000ull}) {
        CollectiveSpec s = spec_of(CollKind::Broadcast, "", P, root, n);
        same_dags(s, "binomial", "binomial_copy");
        s.segment_bytes = 256;
        same_dags(s, "binomial", "binomial_copy");
      }
    }
    for (uint64_t n : {8ull, 64ull, 4096ull}) {
      same_dags(spec_of(CollKind::Allreduce, "", P, 0, n), "recursive_doubling", "recursive_doubling_copy");
    }
    for (uint64_t n : {0ull, 3ull, 100ull}) {
      CollectiveSpec s = spec_of(CollKind::GatherAll, "", P, 0, n);
      same_dags(s, "ring", "ring_copy");
      s.nbytes = 0;
      for (uint32_t i = 0; i < P; ++i) s.counts.push_back((i * 7 + n) % 11);  // some blocks empty
      same_dags(s, "ring", "ring_copy");
      s.displs.clear();
      uint64_t at = 5;
      for (uint32_t i = P; i-- > 0;) s.displs.insert(s.displs.begin(), 0), (void)i;
      for (uint32_t i = P; i-- > 0;) s.displs[i] = at, at += s.counts[i] + 3;  // reverse order, gaps
      same_dags(s, "ring", "ring_copy");
    }
  }
}

TEST_CASE("a plug-in's DAG dumps and loads as JSON while its name is registered") {
  REQUIRE(copies_registered());
  CollectiveSpec s = spec_of(CollKind::Allreduce, "recursive_doubling_copy", 6, 0, 64);
  carflow::GlobalDag dag, back;
  std::string error;
  REQUIRE(carflow::generate_global(s, &dag, &error));
  const std::string text = carflow::dag_to_json(dag);
  CHECK(contains(text, "\"recursive_doubling_copy\""));
  REQUIRE(carflow::dag_from_json(text, &back, &error));
  CHECK(back.spec == dag.spec);
  CHECK(carflow::dag_to_json(back) == text);
  // A name nobody registered is refused, naming it.
  std::string other = text;
  other.replace(other.find("recursive_doubling_copy"), 23, "recursive_doubling_cop_");
  CHECK_FALSE(carflow::dag_from_json(other, &back, &error));
  CHECK(contains(error, "recursive_doubling_cop_"));
}

TEST_CASE("the plug-in copies run through the engine with the built-ins' results") {
  REQUIRE(copies_registered());
  for (uint32_t P : {1u, 2u, 3u, 5u}) {
    carflow_test::ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      for (const char* algo : {"binomial_copy", "binomial"}) {
        std::vector<uint8_t> src = carflow_test::pattern(7, 3000), dst(3000, 0);
        int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, algo);
        if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), P - 1, src.data(), src.size(), kFlags);
        log.expect(me, rc == CF_OK && dst == src, [&] { return cat(algo, " broadcast: ", rc, " ", cf_last_error()); });
      }
      for (const char* algo : {"recursive_doubling_copy", "recursive_doubling"}) {
        std::vector<uint64_t> src(33), dst(33, 0);
        for (size_t k = 0; k < src.size(); ++k) src[k] = me * 1000 + k;
        int rc = cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algo);
        if (rc == CF_OK) {
          rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), 8, src.size(),
                                 CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64), 0, kFlags);
        }
        bool ok = rc == CF_OK;
        for (size_t k = 0; ok && k < dst.size(); ++k) ok = dst[k] == 1000ull * P * (P - 1) / 2 + P * k;
        log.expect(me, ok, [&] { return cat(algo, " allreduce: ", rc, " ", cf_last_error()); });
      }
      for (const char* algo : {"ring_copy", "ring"}) {
        std::vector<uint8_t> src(17, static_cast<uint8_t>(me + 1)), dst(17 * P, 0);
        int rc = cf_coll_set_algorithm(CF_KIND_GATHER_ALL, algo);
        if (rc == CF_OK) rc = cf_coll_gather_all(CF_TEAM_ALL, dst.data(), src.data(), src.size(), kFlags);
        bool ok = rc == CF_OK;
        for (size_t k = 0; ok && k < dst.size(); ++k) ok = dst[k] == k / 17 + 1;
        log.expect(me, ok, [&] { return cat(algo, " gather_all: ", rc, " ", cf_last_error()); });
      }
      cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
      cf_coll_set_algorithm(CF_KIND_ALLREDUCE, nullptr);
      cf_coll_set_algorithm(CF_KIND_GATHER_ALL, nullptr);
    });
    CHECK(status == CF_OK);
    log.report();
  }
}

// ---- misuse -----------------------------------------------------------------

cf_buf_t at(int space, uint64_t offset, uint64_t length, uint32_t slot = 0) { return cf_buf_t{space, slot, offset, length}; }

// Each case misuses the builder on image 1 once; the DAG comes back failed.
struct Misuse {
  const char* name;
  int kind;
  void (*build)(const cf_gen_spec_t* s, cf_dag_t* dag);
  const char* says;  // after "generator 'NAME', image 1: "
};

const Misuse kMisuses[] = {
    {"peer_past_team", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t* s, cf_dag_t* d) { cf_dag_send(d, s->images, at(CF_SPACE_DST, 0, 8), nullptr, 0); },
     "cf_dag_send: peer: 4 is not a team rank (P = 4)"},
    {"peer_self", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t* s, cf_dag_t* d) { cf_dag_recv(d, s->image, at(CF_SPACE_DST, 0, 8), nullptr, 0); },
     "cf_dag_recv: peer: 1 is the image itself"},
    {"dep_later", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) {
       const cf_car_t later = 5;
       cf_dag_join(d, &later, 1);
     },
     "cf_dag_join: deps[0]: CAR 5 is not a CAR added before (0 so far)"},
    {"dep_none", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) {
       const cf_car_t none = CF_CAR_NONE;
       cf_dag_join(d, &none, 1);
     },
     "cf_dag_join: deps[0]: CF_CAR_NONE is not a CAR added before (0 so far)"},
    {"deps_null", CF_KIND_BROADCAST, [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_join(d, nullptr, 2); },
     "cf_dag_join: deps: NULL with ndeps 2"},
    {"past_dst", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_recv(d, 0, at(CF_SPACE_DST, 4, 8), nullptr, 0); },
     "cf_dag_recv: dst: bytes [4, 12) of CF_SPACE_DST (8 bytes on this image)"},
    {"past_src", CF_KIND_GATHER_ALL,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_send(d, 0, at(CF_SPACE_SRC, 0, 9), nullptr, 0); },
     "cf_dag_send: src: bytes [0, 9) of CF_SPACE_SRC (8 bytes on this image)"},
    {"past_temp", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) {
       const uint32_t slot = cf_dag_temp(d, 4);
       cf_dag_recv(d, 0, at(CF_SPACE_TEMP, 0, 8, slot), nullptr, 0);
     },
     "cf_dag_recv: dst: bytes [0, 8) of CF_SPACE_TEMP (4 bytes on this image)"},
    {"unknown_slot", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_recv(d, 0, at(CF_SPACE_TEMP, 0, 8, 3), nullptr, 0); },
     "cf_dag_recv: dst: temp slot 3 was not made (0 slots)"},
    {"bad_space", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_recv(d, 0, at(7, 0, 8), nullptr, 0); },
     "cf_dag_recv: dst: space 7 is not CF_SPACE_SRC, CF_SPACE_DST or CF_SPACE_TEMP"},
    {"reduce_on_broadcast", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_recv_reduce(d, 0, at(CF_SPACE_DST, 0, 8), nullptr, 0); },
     "cf_dag_recv_reduce: the collective's kind does not reduce"},
    {"reduce_lengths", CF_KIND_ALLREDUCE,
     [](const cf_gen_spec_t*, cf_dag_t* d) {
       cf_dag_reduce(d, at(CF_SPACE_DST, 0, 8), at(CF_SPACE_SRC, 0, 8), at(CF_SPACE_SRC, 0, 0), nullptr, 0);
     },
     "cf_dag_reduce: dst, left, right: lengths differ (8, 8, 0)"},
    {"copy_lengths", CF_KIND_BROADCAST,
     [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_copy(d, at(CF_SPACE_DST, 0, 8), at(CF_SPACE_DST, 0, 4), nullptr, 0); },
     "cf_dag_copy: dst, src: lengths differ (8 and 4)"},
    {"fold_shape", CF_KIND_ALLREDUCE,
     [](const cf_gen_spec_t*, cf_dag_t* d) {
       cf_dag_fold(d, at(CF_SPACE_DST, 0, 0), at(CF_SPACE_SRC, 0, 8), cf_buf_t{}, 0, 0, nullptr, 0);
     },
     "cf_dag_fold: dst: 0 bytes, but src makes 1 chunks of one element each"},
    {"temp_huge", CF_KIND_BROADCAST, [](const cf_gen_spec_t*, cf_dag_t* d) { cf_dag_temp(d, uint64_t{1} << 50); },
     "cf_dag_temp: bytes: 1125899906842624 (2^48 or more)"},
};

int misuse_generator(const cf_gen_spec_t* s, cf_dag_t* dag, void* arg) {
  const Misuse* m = static_cast<const Misuse*>(arg);
  if (s->image == 1) {
    m->build(s, dag);
    // Every call after the first failure is refused too.
    if (cf_dag_join(dag, nullptr, 0) != CF_CAR_NONE) return CF_ERR_TRANSPORT;  // any status the test then sees as wrong
  }
  return CF_OK;
}

TEST_CASE("every builder misuse fails the DAG, naming the generator, the image, the call and the argument") {
  for (const Misuse& m : kMisuses) {
    const std::string name = std::string("misuse_") + m.name;
    REQUIRE(cf_generator_register(m.kind, name.c_str(), misuse_generator, const_cast<Misuse*>(&m), 0, nullptr) ==
            CF_OK);
    CollectiveSpec s = spec_of(static_cast<CollKind>(m.kind), name.c_str(), 4, 0, 8);
    const auto* gen = GeneratorRegistry::instance().find(s.kind, name);
    REQUIRE(gen != nullptr);
    const LocalDag dag = carflow::generate_local(*gen, s, 1);
    INFO(m.name, ": ", dag.error);
    CHECK(dag.error == "generator '" + name + "', image 1: " + m.says);
    std::string error;
    CHECK_FALSE(carflow::validate_local(dag, 4, &error, s.elem_size));
    CHECK(contains(error, m.says));
    CHECK(carflow::generate_local(*gen, s, 0).error.empty());
  }
}

TEST_CASE("a misused builder refuses the collective on every image alike, and nothing starts") {
  const Misuse& m = kMisuses[0];
  REQUIRE(cf_generator_register(CF_KIND_BROADCAST, "misuse_engine", misuse_generator, const_cast<Misuse*>(&m), 0,
                                nullptr) == CF_OK);
  carflow_test::ImageLog log(4);
  const int status = run_images(4, [&](cf_image_t me) {
    std::vector<uint8_t> src(8, 5), dst(8, 0);
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, "misuse_engine");
    if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), 8, kFlags);
    const std::string why = cf_last_error();
    log.expect(me, rc == CF_ERR_BAD_ARG && contains(why, "generator 'misuse_engine', image 1: cf_dag_send: peer"),
               [&] { return cat("status ", rc, ": ", why); });
    log.expect(me, dst == std::vector<uint8_t>(8, 0), [] { return std::string("dst was written"); });
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
    rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), 8, kFlags);  // the next call works
    log.expect(me, rc == CF_OK && dst == src, [&] { return cat("after: ", rc, " ", cf_last_error()); });
  });
  CHECK(status == CF_OK);
  log.report();
}

// ---- whole-team checks --------------------------------------------------------

// Image 0 receives into dst and copies src into dst, unordered.
int hazard(const cf_gen_spec_t* s, cf_dag_t* dag, void*) {
  const cf_buf_t d = at(CF_SPACE_DST, 0, s->nbytes);
  if (s->image == 0) {
    cf_dag_copy(dag, d, at(CF_SPACE_SRC, 0, s->nbytes), nullptr, 0);
    for (uint32_t i = 1; i < s->images; ++i) cf_dag_send(dag, i, at(CF_SPACE_SRC, 0, s->nbytes), nullptr, 0);
    if (s->images > 1) cf_dag_recv(dag, 1, d, nullptr, 0);
  } else {
    cf_dag_recv(dag, 0, d, nullptr, 0);
    if (s->image == 1) cf_dag_send(dag, 0, d, nullptr, 0);
  }
  return CF_OK;
}

// Image 1 receives 8 bytes from image 0, which sends 4.
int short_send(const cf_gen_spec_t* s, cf_dag_t* dag, void*) {
  if (s->image == 0) {
    cf_dag_copy(dag, at(CF_SPACE_DST, 0, s->nbytes), at(CF_SPACE_SRC, 0, s->nbytes), nullptr, 0);
    for (uint32_t i = 1; i < s->images; ++i) cf_dag_send(dag, i, at(CF_SPACE_SRC, 0, i == 1 ? 4 : s->nbytes), nullptr, 0);
  } else {
    cf_dag_recv(dag, 0, at(CF_SPACE_DST, 0, s->nbytes), nullptr, 0);
  }
  return CF_OK;
}

TEST_CASE("a plug-in's hazards and unmatched messages are CF_ERR_BAD_ARG on every image, named, nothing started") {
  REQUIRE(cf_generator_register(CF_KIND_BROADCAST, "test_hazard", hazard, nullptr, 0, nullptr) == CF_OK);
  REQUIRE(cf_generator_register(CF_KIND_BROADCAST, "test_short_send", short_send, nullptr, 0, nullptr) == CF_OK);
  struct Case {
    const char* algo;
    const char* says;
  };
  for (const Case& c : {Case{"test_hazard", "image 0: CARs 0 (COPY) and 3 (RECV) both touch bytes [0, 8) of dst, "
                                            "one of them writing, and neither waits for the other"},
                        Case{"test_short_send", "4"}}) {
    carflow_test::ImageLog log(3);
    const int status = run_images(3, [&](cf_image_t me) {
      std::vector<uint8_t> src(8, 9), dst(8, 0);
      int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, c.algo);
      if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), 8, kFlags);
      const std::string why = cf_last_error();
      log.expect(me, rc == CF_ERR_BAD_ARG && contains(why, "failed its whole-team check") && contains(why, c.says),
                 [&] { return cat(c.algo, ": status ", rc, ": ", why); });
      log.expect(me, dst == std::vector<uint8_t>(8, 0), [] { return std::string("dst was written"); });
      cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
    });
    CHECK(status == CF_OK);
    log.report();
  }
}

// ---- schedules are cached -------------------------------------------------------

std::atomic<int> g_counted_calls{0};

int counted(const cf_gen_spec_t* s, cf_dag_t* dag, void* arg) {
  static_cast<std::atomic<int>*>(arg)->fetch_add(1);
  const cf_buf_t d = at(CF_SPACE_DST, 0, s->nbytes);
  if (s->image == s->root) {
    const cf_car_t c = cf_dag_copy(dag, d, at(CF_SPACE_SRC, 0, s->nbytes), nullptr, 0);
    for (uint32_t i = 0; i < s->images; ++i) {
      if (i != s->root) cf_dag_send(dag, i, at(CF_SPACE_SRC, 0, s->nbytes), &c, 0);
    }
  } else {
    cf_dag_recv(dag, s->root, d, nullptr, 0);
  }
  return CF_OK;
}

TEST_CASE("a plug-in's schedule is built once per key: P whole-team runs, then one per image") {
  REQUIRE(cf_generator_register(CF_KIND_BROADCAST, "test_counted", counted, &g_counted_calls, 0, nullptr) == CF_OK);
  constexpr uint32_t P = 4, kCalls = 25;
  carflow_test::ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, "test_counted");
    for (uint32_t k = 0; rc == CF_OK && k < kCalls; ++k) {
      for (size_t n : {size_t{16}, size_t{40}}) {  // two keys
        std::vector<uint8_t> src(n, static_cast<uint8_t>(k)), dst(n, 0);
        rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), k % P, src.data(), n, kFlags);
        if (rc == CF_OK && dst != src) rc = CF_ERR_MISMATCH;  // wrong data
      }
    }
    log.expect(me, rc == CF_OK, [&] { return cat("status ", rc, ": ", cf_last_error()); });
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  });
  CHECK(status == CF_OK);
  log.report();
  // Keys: 2 sizes x 4 roots. Each: P runs for the whole-team check (once per
  // process) and one per image for its own schedule.
  CHECK(g_counted_calls.load() == 2 * P * (P + P));
}

// ---- declared rank symmetry -----------------------------------------------------

// `counted`'s flat broadcast claims ring symmetry below: image 0 (the
// root) sends to all, the others receive, so image 1 is not image 0
// relabelled.
std::atomic<int> g_claiming_calls{0};

TEST_CASE("gen_flags: the symmetry flags are known and exclude each other") {
  CHECK(cf_generator_register(CF_KIND_BARRIER, "test_both_symmetries", counted, &g_claiming_calls,
                              CF_GEN_SHIFT_SYMMETRIC | CF_GEN_XOR_SYMMETRIC, nullptr) == CF_ERR_BAD_ARG);
  CHECK(contains(cf_last_error(), "gen_flags: CF_GEN_SHIFT_SYMMETRIC and CF_GEN_XOR_SYMMETRIC exclude each other"));
  CHECK(GeneratorRegistry::instance().find(CollKind::Barrier, "test_both_symmetries") == nullptr);
  CHECK(cf_generator_register(CF_KIND_BARRIER, "test_bad_flag", counted, &g_claiming_calls, 1 << 4, nullptr) ==
        CF_ERR_BAD_ARG);
  CHECK(contains(cf_last_error(), "CF_GEN_XOR_SYMMETRIC are defined"));
}

TEST_CASE("a plug-in's declared rank symmetry: one image simulated, the whole team's time; a false claim is caught") {
  REQUIRE(copies_registered());
  carflow::LogGPModel model;
  std::string error;
  REQUIRE(carflow::parse_model_string("L=221,o=144,g=200,G=0.069,gamma=0.05,beta=0.03,S=65536", &model, &error));
  struct Case {
    CollKind kind;
    const char* algo;
    std::vector<uint32_t> images;
  };
  for (const Case& c : {Case{CollKind::Allreduce, "recursive_doubling_copy", {2, 4, 8, 16, 32}},
                        Case{CollKind::GatherAll, "ring_copy", {2, 3, 5, 8, 13}}}) {
    const auto* gen = GeneratorRegistry::instance().find(c.kind, c.algo);
    REQUIRE(gen != nullptr);
    for (uint32_t P : c.images) {
      for (uint64_t bytes : {uint64_t{64}, uint64_t{4096}, uint64_t{1} << 18}) {
        const CollectiveSpec spec = spec_of(c.kind, c.algo, P, 0, bytes * P);
        const carflow::Prediction one = carflow::predict_generator(*gen, spec, model, uint64_t{1} << 20, true);
        const carflow::Prediction all = carflow::predict_generator(*gen, spec, model, uint64_t{1} << 20, false);
        INFO(c.algo, " P=", P, " bytes=", bytes * P, " ", one.error, " ", all.error);
        CHECK(one.ok);
        CHECK(all.ok);
        CHECK(one.one_image);
        CHECK_FALSE(all.one_image);
        CHECK(one.time_ns == all.time_ns);
      }
    }
  }
  // The false claim: the model does not take it, and the engine refuses the
  // call on every image, naming the flag, before anything starts.
  REQUIRE(cf_generator_register(CF_KIND_BROADCAST, "test_false_shift", counted, &g_claiming_calls,
                                CF_GEN_SHIFT_SYMMETRIC, nullptr) == CF_OK);
  const auto* liar = GeneratorRegistry::instance().find(CollKind::Broadcast, "test_false_shift");
  REQUIRE(liar != nullptr);
  const carflow::Prediction p =
      carflow::predict_generator(*liar, spec_of(CollKind::Broadcast, "test_false_shift", 4, 0, 64), model,
                                 uint64_t{1} << 20, true);
  CHECK(p.ok);
  CHECK_FALSE(p.one_image);
  carflow::GlobalDag global;
  std::string failure;
  CHECK_FALSE(carflow::check_generator(spec_of(CollKind::Broadcast, "test_false_shift", 4, 0, 64), 1, &global,
                                       &failure));
  INFO(failure);
  CHECK(contains(failure, "symmetry (shift declared): image 1 has 2 CARs, image 0 5"));
  constexpr uint32_t P = 4;
  carflow_test::ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> src(8, 9), dst(8, 0);
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, "test_false_shift");
    if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), 8,
                                        CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS);
    const std::string why = cf_last_error();
    log.expect(me, rc == CF_ERR_BAD_ARG && contains(why, "failed its whole-team check") &&
                       contains(why, "registered with CF_GEN_SHIFT_SYMMETRIC, but image 1"),
               [&] { return cat("status ", rc, ": ", why); });
    log.expect(me, dst == std::vector<uint8_t>(8, 0), [] { return std::string("dst was written"); });
    // With a sync mode the symmetry is not claimed (its exit has a root), so
    // the same generator runs right.
    rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), 8, kFlags);
    log.expect(me, rc == CF_OK && dst == src, [&] { return cat("synced: status ", rc, ": ", cf_last_error()); });
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  });
  CHECK(status == CF_OK);
  log.report();
}

}  // namespace
