// Rank symmetry (graph/registry.h, RankSymmetry): every generator that
// declares it builds image i's DAG as image 0's with the peers relabelled,
// wherever its declaration says so, and the cost model's one-image run of
// such a DAG (build_mirrored_flat_dag) gives the full simulation's time
// exactly.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "graph/model/flat_dag.h"
#include "graph/model/loggp.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// The kinds whose generators may declare a symmetry: no root.
const CollKind kKinds[] = {CollKind::Barrier, CollKind::Allreduce, CollKind::GatherAll, CollKind::Exchange,
                           CollKind::ReduceScatter};
const uint32_t kImages[] = {2, 3, 4, 5, 6, 7, 8, 12, 16, 17, 31, 32, 64};
const uint64_t kBytes[] = {0, 8, 24, 4096, 40000, 262144, 4 << 20};

std::vector<const GeneratorInfo*> declaring() {
  std::vector<const GeneratorInfo*> out;
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    if (gen->symmetry != nullptr) out.push_back(gen);
  }
  return out;
}

CollectiveSpec spec_of(const GeneratorInfo& gen, uint32_t P, uint64_t bytes) {
  CollectiveSpec spec;
  spec.kind = gen.kind;
  spec.algorithm = gen.name;
  spec.images = P;
  spec.elem_size = is_computational(gen.kind) ? 8 : 1;
  spec.nbytes = gen.kind == CollKind::Barrier ? 0 : bytes;
  return spec;
}

// What the cost model reads of a CAR, with the peer as image 0 would name it.
std::string cost_view(const Car& car, RankSymmetry symmetry, uint32_t image, uint32_t P, bool relabel) {
  std::string s = std::string(car_kind_name(car.kind)) + " src " + std::to_string(car.src.length) + " src2 " +
                  std::to_string(car.src2.length) + " dst " + std::to_string(car.dst.length) + " member " +
                  std::to_string(car.member);
  if (car.is_message()) {
    const uint32_t peer = relabel ? symmetric_peer(symmetry, image, car.peer, P) : car.peer;
    s += " peer " + std::to_string(peer) + " tag " + std::to_string(car.tag);
  }
  s += " deps";
  for (const Dep& d : car.deps) s += " " + std::to_string(d.car);
  return s;
}

TEST_CASE("a generator declaring rank symmetry builds every image as image 0 relabelled") {
  const std::vector<const GeneratorInfo*> gens = declaring();
  REQUIRE(gens.size() >= 8);
  for (const GeneratorInfo* gen : gens) {
    CHECK(gen->closure == nullptr);
    bool applied = false;
    for (uint32_t P : kImages) {
      for (uint64_t bytes : kBytes) {
        const CollectiveSpec spec = spec_of(*gen, P, bytes);
        const RankSymmetry symmetry = rank_symmetry(*gen, spec);
        if (symmetry == RankSymmetry::None) continue;
        applied = true;
        const LocalDag zero = generate_local(*gen, spec, 0);
        for (uint32_t i = 1; i < P; ++i) {
          const LocalDag other = generate_local(*gen, spec, i);
          INFO(std::string(coll_kind_name(gen->kind)), " ", gen->name, " P=", P, " bytes=", bytes, " image ", i);
          std::string differs;
          if (other.cars.size() != zero.cars.size()) differs = "CAR count";
          for (size_t c = 0; differs.empty() && c < zero.cars.size(); ++c) {
            const std::string want = cost_view(zero.cars[c], symmetry, i, P, true);
            const std::string got = cost_view(other.cars[c], symmetry, i, P, false);
            if (got != want) differs = "CAR " + std::to_string(c) + ": " + got + ", image 0's: " + want;
          }
          CHECK_MESSAGE(differs.empty(), differs);
          if (!differs.empty()) break;
        }
      }
    }
    INFO(gen->name);
    CHECK(applied);
  }
}

TEST_CASE("XOR symmetry holds only at powers of two, and sync transforms and v forms have none") {
  for (const GeneratorInfo* gen : declaring()) {
    CollectiveSpec spec = spec_of(*gen, 6, 48);
    INFO(gen->name);
    CHECK(rank_symmetry(*gen, spec) != RankSymmetry::Xor);
    spec.images = 8;
    spec.flags = 1 << 2;  // IN_ALLSYNC
    CHECK(rank_symmetry(*gen, spec) == RankSymmetry::None);
    spec.flags = 0;
    spec.counts.assign(8, 48);
    CHECK(rank_symmetry(*gen, spec) == RankSymmetry::None);
  }
}

TEST_CASE("the one-image run of a rank-symmetric DAG takes the full simulation's time exactly") {
  // The last: a calibrated model's shape, with bands of sizes (a JSON file).
  const char* const models[] = {"", "L=221,o=144,g=200,G=0.069,gamma=0.05,beta=0.03,S=65536",
                                "L=20000,o=10,g=10,G=0.01", "L=100,o=2000,g=3000,G=2,O=0.5,S=0",
                                "L=0,o=1,g=0,G=0,gamma=0,beta=0",
                                R"({"L": 140, "o": 122, "g": 163, "G": 0.26, "S": 8192, "gamma": 0.038, "beta": 0.031, "intra": {"L": 60},
      "bands": [{"from": 1024, "L": 260, "G": 0.145}, {"from": 16384, "L": 194, "G": 0.044},
                {"from": 1048576, "L": 0, "G": 0.25, "beta": 0.1}]})"};
  int compared = 0;
  for (const char* text : models) {
    LogGPModel model;
    std::string error;
    REQUIRE_MESSAGE((text[0] == '{' ? parse_model_json(text, &model, &error)
                                    : parse_model_string(text, &model, &error)),
                    error);
    for (const GeneratorInfo* gen : declaring()) {
      for (uint32_t P : kImages) {
        for (uint64_t bytes : kBytes) {
          const CollectiveSpec spec = spec_of(*gen, P, bytes);
          const RankSymmetry symmetry = rank_symmetry(*gen, spec);
          if (symmetry == RankSymmetry::None) continue;
          INFO("model '", std::string(text), "' ", std::string(coll_kind_name(gen->kind)), " ", gen->name, " P=", P,
               " bytes=", bytes);
          FlatDag full, one;
          LogGPResult whole, mirrored;
          REQUIRE_MESSAGE(build_flat_dag(*gen, spec, &full, &error), error);
          REQUIRE_MESSAGE(simulate_loggp(full, model, &whole, &error), error);
          REQUIRE_MESSAGE(build_mirrored_flat_dag(generate_local(*gen, spec, 0), P, symmetry, &one, &error), error);
          REQUIRE_MESSAGE(simulate_loggp(one, model, &mirrored, &error), error);
          CHECK(mirrored.time_ns == whole.time_ns);
          CHECK(one.messages * P == full.messages);
          ++compared;
        }
      }
    }
  }
  CHECK(compared > 500);
}

TEST_CASE("a run stopped at its time limit reports exceeded, and one under it is whole") {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(CollKind::Allreduce, "ring");
  REQUIRE(gen != nullptr);
  const CollectiveSpec spec = spec_of(*gen, 8, 4096);
  LogGPModel model;
  FlatDag dag;
  std::string error;
  REQUIRE_MESSAGE(build_flat_dag(*gen, spec, &dag, &error), error);
  LogGPResult whole, cut, exact;
  REQUIRE(simulate_loggp(dag, model, &whole, &error));
  CHECK_FALSE(whole.exceeded);
  REQUIRE(simulate_loggp(dag, model, &cut, &error, whole.time_ns / 2));
  CHECK(cut.exceeded);
  CHECK(cut.time_ns > whole.time_ns / 2);
  CHECK(cut.time_ns <= whole.time_ns);
  REQUIRE(simulate_loggp(dag, model, &exact, &error, whole.time_ns));
  CHECK_FALSE(exact.exceeded);
  CHECK(exact.time_ns == whole.time_ns);
}

}  // namespace
}  // namespace carflow
