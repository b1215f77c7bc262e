// What the engine chooses under CF_TUNING and CF_MODEL, seen through the
// public API (cf_coll_algorithm, cf_graph_dump_json) on 4 image threads;
// run by model_cli_test.sh. Modes:
//   table            the fixed table model_cli_test.sh writes
//   tuned  T.json    every range of a `carflow tune` table
//   model  M.json    the model's predicted fastest algorithm, and the logp tree's L, o, g
//   forced           CF_ALGO_BROADCAST=chain wins over the model
#include <carflow/carflow.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "engine/config.h"
#include "graph/model/predict.h"

namespace {

constexpr cf_image_t kImages = 4;
int failures = 0;
std::string mode, file;

void expect(int kind, size_t nbytes, size_t elem_size, const std::string& want) {
  const char* got = cf_coll_algorithm(kind, nbytes, elem_size);
  if (got == nullptr || want != got) {
    std::fprintf(stderr, "kind %d, %zu bytes: chose %s, expected %s\n", kind, nbytes, got ? got : "(null)", want.c_str());
    ++failures;
  }
}

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

void check_tuned() {
  const nlohmann::json table = read_json(file);
  for (auto& [name, ranges] : table["kinds"].items()) {
    carflow::CollKind kind;
    if (!carflow::parse_coll_kind(name, &kind)) ++failures;
    const size_t elem = carflow::is_computational(kind) ? 8 : 1;
    for (const auto& r : ranges) {
      const uint64_t at = std::max<uint64_t>(r["from_bytes"].get<uint64_t>(), kind == carflow::CollKind::Barrier ? 0 : elem);
      expect(static_cast<int>(kind), at, elem, r["algorithm"].get<std::string>());
    }
  }
}

// The engine sets the call up as predict_algorithms is given it here: one
// node of 4 images, the knobs' defaults, the built-in (commutative) SUM.
void check_model() {
  carflow::LogGPModel model;
  carflow::Config config;
  std::string error;
  if (!carflow::load_model_file(file, &model, &error) || !carflow::Config::from_env(&config, &error)) {
    std::fprintf(stderr, "%s\n", error.c_str());
    ++failures;
    return;
  }
  model.images_per_node = kImages;
  carflow::AlgorithmParams params{config.segment_bytes, config.tree_radix, config.exchange_window, 0, 0, 0};
  carflow::logp_from_model(model, kImages, &params);
  for (carflow::CollKind kind : {carflow::CollKind::Broadcast, carflow::CollKind::Allreduce, carflow::CollKind::Barrier,
                                 carflow::CollKind::GatherAll, carflow::CollKind::Exchange}) {
    for (uint64_t bytes : {8ull, 4096ull, 1ull << 20}) {
      carflow::CollectiveSpec spec;
      spec.kind = kind, spec.images = kImages, spec.images_per_node = kImages;
      spec.nbytes = kind == carflow::CollKind::Barrier ? 0 : bytes;
      spec.elem_size = carflow::is_computational(kind) ? 8 : 1;
      const auto predictions = carflow::predict_algorithms(spec, true, model, params, uint64_t{1} << 20);
      expect(static_cast<int>(kind), spec.nbytes, spec.elem_size, carflow::fastest(predictions)->gen->name);
    }
  }
}

// The logp broadcast's tree, as its dumped DAG records it: the model's L, o, g.
void check_logp(cf_image_t me) {
  carflow::LogGPModel model;
  std::string error;
  carflow::load_model_file(file, &model, &error);
  cf_coll_set_algorithm(CF_KIND_BROADCAST, "logp");
  char src[64] = {1}, dst[64];
  const int flags = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src, sizeof src, flags);
  const std::string path = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") + "/logp.json";
  if (me == 0 && cf_graph_dump_json(h, path.c_str()) != CF_OK) ++failures;
  if (cf_coll_wait_sync(h) != CF_OK || dst[0] != 1) ++failures;
  cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  if (me != 0) return;
  const nlohmann::json logp = read_json(path)["collective"]["logp"];
  if (logp["L"] != std::llround(model.intra.L) || logp["o"] != std::llround(model.intra.o) ||
      logp["g"] != std::llround(model.intra.g)) {
    std::fprintf(stderr, "logp tree built for %s, model L=%g o=%g g=%g\n", logp.dump().c_str(), model.intra.L,
                 model.intra.o, model.intra.g);
    ++failures;
  }
}

void image(cf_image_t me, void*) {
  if (mode == "model") check_logp(me);
  if (me != 0) return;
  if (mode == "table") {
    expect(CF_KIND_BROADCAST, 8, 1, "chain");
    expect(CF_KIND_BROADCAST, 4095, 1, "chain");
    expect(CF_KIND_BROADCAST, 4096, 1, "binary");
    expect(CF_KIND_BARRIER, 0, 1, "kary");
    // cf_coll_set_algorithm wins over the table.
    cf_coll_set_algorithm(CF_KIND_BROADCAST, "flat");
    expect(CF_KIND_BROADCAST, 8, 1, "flat");
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  } else if (mode == "tuned") {
    check_tuned();
  } else if (mode == "model") {
    check_model();
  } else if (mode == "forced") {
    expect(CF_KIND_BROADCAST, 8, 1, "chain");
    expect(CF_KIND_BROADCAST, 1 << 20, 1, "chain");
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  file = argc > 2 ? argv[2] : "";
  if (cf_init(&argc, &argv) != CF_OK) return 1;
  cf_set_error_mode(CF_ERRORS_RETURN);
  if (cf_run_images(kImages, nullptr, 0, image, nullptr) != CF_OK) ++failures;
  cf_finalize();
  std::printf("%s: %d failures\n", mode.c_str(), failures);
  return failures == 0 ? 0 : 1;
}
