// engine/selection.h with a LogGP model (CF_MODEL) and a tuning table
// (CF_TUNING): the model's choice is the registered algorithm it predicts
// fastest, a table's ranges pick their algorithms, explicit choices win,
// and bad files are refused naming the field with nothing applied.
#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "engine/config.h"
#include "engine/selection.h"
#include "engine/tuning.h"
#include "graph/model/predict.h"

namespace carflow {
namespace {

constexpr uint32_t kCores = 2;

Config with_model(const std::string& text) {
  auto model = std::make_shared<LogGPModel>();
  std::string error;
  REQUIRE_MESSAGE(parse_model_string(text, model.get(), &error), error);
  Config c;
  c.model = model;
  return c;
}

// What predict_algorithms ranks first for the call, as the engine sets it up.
std::string predicted_fastest(const Config& c, CollKind kind, uint32_t P, uint64_t nbytes, uint32_t elem_size,
                              uint32_t ppn) {
  CollectiveSpec spec;
  spec.kind = kind, spec.images = P, spec.nbytes = nbytes, spec.elem_size = elem_size, spec.images_per_node = ppn;
  AlgorithmParams params{c.segment_bytes, c.tree_radix, c.exchange_window, 0, 0, 0};
  LogGPModel model = *c.model;
  model.images_per_node = ppn;
  logp_from_model(model, P, &params);
  // Every algorithm simulated (no pruning): the choice must not depend on it.
  const std::vector<Prediction> all = predict_algorithms(spec, true, model, params, uint64_t{1} << 20, false);
  const Prediction* best = fastest(all);
  REQUIRE(best != nullptr);
  for (const Prediction& p : all) CHECK((!p.ok || p.time_ns >= best->time_ns));
  return best->gen->name;
}

struct Call {
  CollKind kind;
  uint32_t images;
  uint64_t nbytes;
  uint32_t elem_size;
  uint32_t ppn = 0;
};

const Call kCalls[] = {
    {CollKind::Broadcast, 8, 8, 1},          {CollKind::Broadcast, 8, 4 << 20, 1},
    {CollKind::Broadcast, 16, 4096, 1, 4},   {CollKind::Barrier, 13, 0, 1},
    {CollKind::Allreduce, 8, 8, 8},          {CollKind::Allreduce, 8, 1 << 20, 8},
    {CollKind::GatherAll, 6, 64, 1},         {CollKind::Exchange, 8, 256 << 10, 1},
    {CollKind::ReduceScatter, 4, 4096, 4},   {CollKind::Scan, 5, 8, 8},
    {CollKind::Scatter, 7, 1000, 1},         {CollKind::Gather, 64, 8, 1},
    {CollKind::ReduceVec, 3, 65536, 8},
};

TEST_CASE("with a model the choice is the registered algorithm predicted fastest") {
  for (const char* model : {"L=500,o=150,g=200,G=0.1", "L=20000,o=10,g=10,G=0.01", "L=100,o=2000,g=3000,G=2"}) {
    const Config c = with_model(model);
    const SelectionTable table(c, kCores);
    for (const Call& call : kCalls) {
      INFO(model, " ", coll_kind_name(call.kind), " P=", call.images, " bytes=", call.nbytes, " ppn=", call.ppn);
      const GeneratorInfo* gen = table.choose(call.kind, call.images, call.nbytes, call.elem_size, true, call.ppn);
      CHECK(gen->name == predicted_fastest(c, call.kind, call.images, call.nbytes, call.elem_size, call.ppn));
      // Asked again: the cached answer.
      CHECK(table.choose(call.kind, call.images, call.nbytes, call.elem_size, true, call.ppn) == gen);
    }
  }
}

TEST_CASE("a pruned generator's lower bound is below its simulated time") {
  LogGPModel model;
  std::string error;
  REQUIRE(parse_model_string("L=300,o=120,g=150,G=0.09,gamma=0.05,beta=0.03", &model, &error));
  for (const Call& call : kCalls) {
    CollectiveSpec spec;
    spec.kind = call.kind, spec.images = call.images, spec.nbytes = call.nbytes, spec.elem_size = call.elem_size;
    for (const Prediction& p : predict_algorithms(spec, true, model, AlgorithmParams{}, uint64_t{1} << 20, false)) {
      if (!p.ok) continue;
      INFO(coll_kind_name(call.kind), " ", p.gen->name, " P=", call.images, " bytes=", call.nbytes);
      CHECK(lower_bound_ns(*p.gen, spec_for_generator(*p.gen, spec, AlgorithmParams{}), model) <= p.time_ns);
    }
  }
}

TEST_CASE("the fast path (bounds, early stops, one-image runs) chooses and predicts as simulating all whole") {
  const CollKind kinds[] = {CollKind::Broadcast, CollKind::Barrier,   CollKind::Allreduce,    CollKind::GatherAll,
                            CollKind::Exchange,  CollKind::Scatter,   CollKind::ReduceScatter, CollKind::ReduceVec,
                            CollKind::Scan};
  // The last: a calibrated model's shape, with bands of sizes (a JSON file).
  const char* const models[] = {"", "L=221,o=144,g=200,G=0.069,gamma=0.05,beta=0.03,S=65536",
                                "L=20000,o=10,g=10,G=0.01,intra.L=300,intra.G=0.05",
                                R"({"L": 140, "o": 122, "g": 163, "G": 0.26, "S": 8192, "gamma": 0.038, "beta": 0.031, "intra": {"L": 60},
      "bands": [{"from": 1024, "L": 260, "G": 0.145}, {"from": 16384, "L": 194, "G": 0.044},
                {"from": 1048576, "L": 0, "G": 0.25, "beta": 0.1}]})"};
  for (const char* text : models) {
    LogGPModel model;
    std::string error;
    REQUIRE_MESSAGE((text[0] == '{' ? parse_model_json(text, &model, &error)
                                    : parse_model_string(text, &model, &error)),
                    error);
    for (CollKind kind : kinds) {
      for (uint32_t P : {2u, 3u, 4u, 8u, 16u, 32u, 64u}) {
        for (uint64_t bytes : {uint64_t{8}, uint64_t{4096}, uint64_t{256} << 10, uint64_t{4} << 20}) {
          for (uint32_t ppn : {0u, 4u}) {
            if ((kind == CollKind::Barrier && bytes != 8) || (ppn != 0 && std::string(text).empty())) continue;
            const bool commutative = kind != CollKind::Scan;
            CollectiveSpec spec;
            spec.kind = kind, spec.images = P, spec.nbytes = kind == CollKind::Barrier ? 0 : bytes;
            spec.elem_size = is_computational(kind) ? 8 : 1, spec.images_per_node = ppn;
            AlgorithmParams params{256 << 10, 0, 0, 0, 0, 0};
            LogGPModel placed = model;
            placed.images_per_node = ppn;
            logp_from_model(placed, P, &params);
            INFO("model '", std::string(text), "' ", std::string(coll_kind_name(kind)), " P=", P, " bytes=", bytes,
                 " ppn=", ppn);
            const auto fast = predict_algorithms(spec, commutative, placed, params, uint64_t{1} << 20);
            const auto full = predict_algorithms(spec, commutative, placed, params, uint64_t{1} << 20, false);
            const Prediction *a = fastest(fast), *b = fastest(full);
            REQUIRE(a != nullptr);
            REQUIRE(b != nullptr);
            CHECK(a->gen == b->gen);
            CHECK(a->time_ns == b->time_ns);
          }
        }
      }
    }
  }
}

TEST_CASE("generators registered at run time (plug-ins) are candidates like the built-ins") {
  const GeneratorInfo* flat = GeneratorRegistry::instance().find(CollKind::Scatter, "flat");
  REQUIRE(flat != nullptr);
  GeneratorInfo copy = *flat;
  copy.name = "model_test_flat_copy";
  copy.plugin = true;
  copy.closure = [fn = flat->fn](const CollectiveSpec& spec, uint32_t image) { return fn(spec, image); };
  copy.fn = nullptr;
  std::string error;
  REQUIRE_MESSAGE(GeneratorRegistry::instance().add_checked(copy, &error), error);
  LogGPModel model;
  CollectiveSpec spec;
  spec.kind = CollKind::Scatter, spec.images = 6, spec.nbytes = 1 << 20;
  double flat_ns = -1, copy_ns = -2;
  for (const Prediction& p : predict_algorithms(spec, true, model, AlgorithmParams{}, uint64_t{1} << 20, false)) {
    if (p.gen->name == "flat") flat_ns = p.time_ns;
    if (p.gen->name == "model_test_flat_copy") copy_ns = p.time_ns;
  }
  CHECK(copy_ns == flat_ns);
  // Equal times: the one registered first (the built-in) is chosen.
  Config c;
  c.model = std::make_shared<LogGPModel>(model);
  const GeneratorInfo* chosen = SelectionTable(c, kCores).choose(CollKind::Scatter, 6, 1 << 20, 1, true);
  CHECK(chosen->name != "model_test_flat_copy");
}

TEST_CASE("different models choose differently: latency-bound trees against one round") {
  // Huge latency, free sends: one round of P-1 sends wins a barrier;
  // expensive sends, no latency: fewer messages per image win.
  const SelectionTable latency(with_model("L=100000,o=1,g=1"), kCores);
  const SelectionTable overhead(with_model("L=0,o=10000,g=10000"), kCores);
  CHECK(latency.choose(CollKind::Barrier, 16, 0, 1, true)->name !=
        overhead.choose(CollKind::Barrier, 16, 0, 1, true)->name);
}

TEST_CASE("explicit choices and the kinds the model does not rank keep their rules") {
  Config c = with_model("L=500");
  c.algo[static_cast<int>(CollKind::Broadcast)] = "chain";
  const SelectionTable table(c, kCores);
  const SelectionTable plain(Config{}, kCores);
  CHECK(table.choose(CollKind::Broadcast, 8, 8, 1, true)->name == "chain");
  CHECK(table.choose(CollKind::Permute, 8, 8, 1, true) == plain.choose(CollKind::Permute, 8, 8, 1, true));
  CHECK(table.choose(CollKind::Reduce, 8, 64, 8, true) == plain.choose(CollKind::Reduce, 8, 64, 8, true));
  // A v form (blocks of several sizes) keeps the default table.
  CHECK(table.choose(CollKind::GatherAll, 8, 64, 1, true, 0, false) ==
        plain.choose(CollKind::GatherAll, 8, 64, 1, true, 0, false));
}

TEST_CASE("a non-commutative call gets an order-preserving algorithm from the model") {
  const SelectionTable table(with_model("L=500"), kCores);
  for (uint64_t bytes : {8ull, 4096ull, 1ull << 20}) {
    for (CollKind kind : {CollKind::Allreduce, CollKind::ReduceScatter, CollKind::ReduceVec}) {
      INFO(coll_kind_name(kind), " bytes=", bytes);
      CHECK(table.choose(kind, 8, bytes, 8, false)->preserves_order);
    }
  }
}

TEST_CASE("threads choosing at once through one table agree") {
  const SelectionTable table(with_model("L=700,o=90"), kCores);
  std::vector<const GeneratorInfo*> seen(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < seen.size(); ++t) {
    threads.emplace_back([&, t] { seen[t] = table.choose(CollKind::Allreduce, 32, 4096, 8, true); });
  }
  for (std::thread& t : threads) t.join();
  for (const GeneratorInfo* g : seen) CHECK(g == seen[0]);
}

const char kTable[] = R"({"schema": "carflow.tuning/1", "images": 8, "images_per_node": 0,
  "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "chain", "time_ns": 12.5},
                          {"from_bytes": 1024, "algorithm": "binary"}],
            "allreduce": [{"from_bytes": 0, "algorithm": "ring"}]}})";

TEST_CASE("a tuning table's ranges pick their algorithms for the team size it was made for") {
  auto tuning = std::make_shared<TuningTable>();
  std::string error;
  REQUIRE_MESSAGE(parse_tuning_json(kTable, tuning.get(), &error), error);
  Config c;
  c.tuning = tuning;
  const SelectionTable table(c, kCores);
  const SelectionTable plain(Config{}, kCores);
  CHECK(table.choose(CollKind::Broadcast, 8, 8, 1, true)->name == "chain");
  CHECK(table.choose(CollKind::Broadcast, 8, 1023, 1, true)->name == "chain");
  CHECK(table.choose(CollKind::Broadcast, 8, 1024, 1, true)->name == "binary");
  CHECK(table.choose(CollKind::Broadcast, 8, 1 << 30, 1, true)->name == "binary");
  CHECK(table.choose(CollKind::Broadcast, 4, 8, 1, true) == plain.choose(CollKind::Broadcast, 4, 8, 1, true));
  CHECK(table.choose(CollKind::Barrier, 8, 0, 1, true) == plain.choose(CollKind::Barrier, 8, 0, 1, true));
  // ring reorders operands: a non-commutative call falls through.
  CHECK(table.choose(CollKind::Allreduce, 8, 64, 8, true)->name == "ring");
  CHECK(table.choose(CollKind::Allreduce, 8, 64, 8, false)->preserves_order);
  // Written and read again: the same table.
  TuningTable again;
  REQUIRE(parse_tuning_json(tuning_to_json(*tuning), &again, &error));
  CHECK(again.kinds[0].size() == 2);
  CHECK(again.kinds[0][1].gen->name == "binary");
  CHECK(again.kinds[0][0].time_ns == 12.5);
}

struct Bad {
  const char* text;
  const char* error;  // a part of the message
};

TEST_CASE("bad tuning tables are refused naming the field") {
  const Bad bad[] = {
      {"[]", "expected a JSON object"},
      {R"({"images": 8, "kinds": {}})", "schema"},
      {R"({"schema": "carflow.tuning/2", "images": 8, "kinds": {}})", "schema"},
      {R"({"schema": "carflow.tuning/1", "kinds": {}})", "images: missing"},
      {R"({"schema": "carflow.tuning/1", "images": 0, "kinds": {}})", "images: expected an integer"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {}, "extra": 1})", "extra: not a field"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "images": 9, "kinds": {}})", "images: given twice"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"bcast": []}})", "kinds.bcast: not a collective kind"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": []}})", "kinds.broadcast: expected a non-empty"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [{"from_bytes": 4, "algorithm": "flat"}]}})",
       "kinds.broadcast[0].from_bytes: the first range must start at 0"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "flat"},
          {"from_bytes": 0, "algorithm": "chain"}]}})", "kinds.broadcast[1].from_bytes: 0 does not follow"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [{"from_bytes": 0, "algorithm": "ring"}]}})",
       "kinds.broadcast[0].algorithm: 'ring' is not a broadcast algorithm"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [{"from_bytes": -1, "algorithm": "flat"}]}})",
       "kinds.broadcast[0].from_bytes: expected an integer"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [{"from_bytes": 0, "algo": "flat"}]}})",
       "kinds.broadcast[0].algo: not a field"},
      {R"({"schema": "carflow.tuning/1", "images": 8, "kinds": {"broadcast": [[[[[1]]]]]}})", "nests deeper"},
      {R"({"schema": "carflow.tuning/1", "images": 8,)", "not valid JSON"},
  };
  for (const Bad& b : bad) {
    INFO(b.text);
    TuningTable out;
    out.images = 77;
    std::string error;
    CHECK_FALSE(parse_tuning_json(b.text, &out, &error));
    CHECK_MESSAGE(error.find(b.error) != std::string::npos, error);
    CHECK(out.images == 77);  // untouched
  }
}

std::string temp_file(const std::string& name, const std::string& text) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST_CASE("CF_MODEL and CF_TUNING: bad files fail the whole environment, naming the variable and field") {
  const Bad bad_models[] = {{R"({"L": "fast"})", "L: expected a number"},
                            {R"({"L": 1, "q": 2})", "q: not a model key"},
                            {R"({"L": -1})", "L: -1 is not a number"}};
  for (const Bad& b : bad_models) {
    INFO(b.text);
    setenv("CF_MODEL", temp_file("bad_model.json", b.text).c_str(), 1);
    Config c;
    c.segment_bytes = 12345;
    std::string error;
    CHECK_FALSE(Config::from_env(&c, &error));
    CHECK_MESSAGE(error.find("CF_MODEL: ") == 0, error);
    CHECK_MESSAGE(error.find(b.error) != std::string::npos, error);
    CHECK(c.segment_bytes == 12345);  // nothing applied
  }
  setenv("CF_MODEL", (std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/missing.json").c_str(), 1);
  {
    Config c;
    std::string error;
    CHECK_FALSE(Config::from_env(&c, &error));
    CHECK_MESSAGE(error.find("missing.json") != std::string::npos, error);
  }
  setenv("CF_MODEL", temp_file("good_model.json", R"({"L": 900, "o": 40})").c_str(), 1);
  setenv("CF_TUNING", temp_file("bad_table.json", R"({"schema": "carflow.tuning/1", "images": 8})").c_str(), 1);
  {
    Config c;
    std::string error;
    CHECK_FALSE(Config::from_env(&c, &error));
    CHECK_MESSAGE(error.find("CF_TUNING: ") == 0, error);
    CHECK_MESSAGE(error.find("kinds: missing") != std::string::npos, error);
    CHECK(c.model == nullptr);  // the good model was not applied either
  }
  setenv("CF_TUNING", temp_file("good_table.json", kTable).c_str(), 1);
  {
    Config c;
    std::string error;
    REQUIRE_MESSAGE(Config::from_env(&c, &error), error);
    REQUIRE(c.model != nullptr);
    CHECK(c.model->inter.L == 900);
    REQUIRE(c.tuning != nullptr);
    CHECK(c.tuning->images == 8);
  }
  unsetenv("CF_MODEL");
  unsetenv("CF_TUNING");
}

TEST_CASE("the logp broadcast's L, o, g come from the model, intra-node ones on one node") {
  LogGPModel m;
  std::string error;
  REQUIRE(parse_model_string("L=1234.4,o=56.6,g=78,intra.L=10,intra.o=2,intra.g=3", &m, &error));
  AlgorithmParams p;
  logp_from_model(m, 8, &p);
  CHECK(p.logp_L == 1234);
  CHECK(p.logp_o == 57);
  CHECK(p.logp_g == 78);
  m.images_per_node = 8;
  logp_from_model(m, 8, &p);
  CHECK(p.logp_L == 10);
  CHECK(p.logp_o == 2);
  CHECK(p.logp_g == 3);
}

}  // namespace
}  // namespace carflow
