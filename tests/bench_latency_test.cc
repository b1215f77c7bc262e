// The bench's own verification (bench/latency.cc): the demo and `carflow
// bench` check every result against the sequential reference, so the inputs
// must make that reference exact for any order of summing. Reduce and
// prefix_reduce fold every element of every image into one running sum:
// at 4 MiB on 8 images the old inputs (values up to 60) passed 2^24 and the
// demo reported correct results as wrong.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "bench/latency.h"
#include "bench/mixed_sequence.h"

namespace {

carflow_bench::LatencyResult run_one(const std::string& coll, uint32_t images, uint64_t bytes) {
  carflow_bench::LatencyOptions opt;
  opt.coll = coll;
  opt.images = images;
  opt.sizes = {bytes};
  opt.iters = 2;
  std::vector<carflow_bench::LatencyResult> results;
  std::string error;
  REQUIRE_MESSAGE(carflow_bench::run_latency(opt, &results, &error), error);
  REQUIRE(results.size() == 1);
  return results[0];
}

}  // namespace

TEST_CASE("bench: folds of 4 MiB on 8 images verify (their sums stay exact)") {
  for (const char* coll : {"reduce", "prefix_reduce"}) {
    CAPTURE(coll);
    const auto r = run_one(coll, 8, 4u << 20);
    CHECK(r.verified);
    CHECK(r.iters == 2);
  }
}

TEST_CASE("bench: every collective verifies at 8 B and 4 KiB on 5 images") {
  for (const char* coll : {"broadcast", "barrier", "allreduce", "scatter", "gather", "gather_all",
                           "exchange", "permute", "reduce_vec", "scan", "reduce_scatter", "reduce",
                           "prefix_reduce"}) {
    for (uint64_t bytes : {8u, 4096u}) {
      CAPTURE(coll);
      CAPTURE(bytes);
      CHECK(run_one(coll, 5, bytes).verified);
    }
  }
}

TEST_CASE("bench: an unknown collective is an error naming --coll") {
  carflow_bench::LatencyOptions opt;
  opt.coll = "allgather";
  opt.sizes = {8};
  std::vector<carflow_bench::LatencyResult> results;
  std::string error;
  CHECK_FALSE(carflow_bench::run_latency(opt, &results, &error));
  CHECK(error.rfind("--coll: 'allgather'", 0) == 0);
  CHECK(results.empty());
}

TEST_CASE("bench: no images is an error naming --images") {
  carflow_bench::LatencyOptions opt;
  opt.coll = "broadcast";
  opt.images = 0;
  opt.sizes = {8};
  std::vector<carflow_bench::LatencyResult> results;
  std::string error;
  CHECK_FALSE(carflow_bench::run_latency(opt, &results, &error));
  CHECK(error == "--images: must be at least 1");
  CHECK(results.empty());
}

TEST_CASE("bench: the mixed workload runs the seeded sequence and verifies every kind and size in it") {
  carflow_bench::LatencyOptions opt;
  opt.coll = "mixed";
  opt.images = 3;
  opt.iters = 1;
  opt.mixed_ops = 60;
  opt.mixed_seed = 7;
  std::vector<carflow_bench::LatencyResult> results;
  std::string error;
  REQUIRE_MESSAGE(carflow_bench::run_latency(opt, &results, &error), error);
  REQUIRE(results.size() == 1);
  const auto& r = results[0];
  CHECK(r.verified);
  CHECK(r.ops == 60);
  CHECK(r.seed == 7);
  // The same draws, made here: every implementation that includes the
  // header runs these ops.
  uint64_t state = 7, total = 0;
  int kinds_seen = 0;
  bool seen[kMixedKinds] = {};
  for (int i = 0; i < 60; ++i) {
    int kind = -1;
    uint64_t bytes = 0;
    mixed_op(&state, &kind, &bytes);
    REQUIRE(kind >= 0);
    REQUIRE(kind < kMixedKinds);
    CHECK((kind == 1 ? bytes == 0 : (bytes >= 8 && bytes <= (4u << 20) && (bytes & (bytes - 1)) == 0)));
    if (!seen[kind]) ++kinds_seen;
    seen[kind] = true;
    total += bytes;
  }
  CHECK(r.total_bytes == total);
  CHECK(kinds_seen >= 8);
  opt.mixed_ops = 0;
  results.clear();
  CHECK_FALSE(carflow_bench::run_latency(opt, &results, &error));
  CHECK(error.rfind("--ops", 0) == 0);
}

TEST_CASE("bench: --fresh-src writes the sources again before every call, and every call still verifies") {
  // In-place and out-of-place kinds, rooted and not: a rewrite that landed
  // on a destination, or a source a call had changed, would fail the check.
  for (const char* coll : {"broadcast", "allreduce", "scatter", "gather_all", "exchange", "scan",
                           "reduce_scatter", "barrier"}) {
    CAPTURE(coll);
    carflow_bench::LatencyOptions opt;
    opt.coll = coll;
    opt.images = 3;
    opt.sizes = {8, 4096};
    opt.iters = 5;
    opt.calls = 2;
    opt.fresh_src = true;
    std::vector<carflow_bench::LatencyResult> results;
    std::string error;
    REQUIRE_MESSAGE(carflow_bench::run_latency(opt, &results, &error), error);
    REQUIRE(results.size() == (std::string(coll) == "barrier" ? 1u : 2u));
    for (const auto& r : results) {
      CHECK(r.verified);
      CHECK(r.fresh_src);
      CHECK(r.avg_us > 0);
      CHECK(carflow_bench::to_json_line(r).find(",\"fresh_src\":true") != std::string::npos);
    }
  }
  // Without it the JSON says nothing of it.
  CHECK(carflow_bench::to_json_line(run_one("allreduce", 2, 8)).find("fresh_src") == std::string::npos);
  carflow_bench::LatencyOptions mixed;
  mixed.coll = "mixed";
  mixed.fresh_src = true;
  std::vector<carflow_bench::LatencyResult> results;
  std::string error;
  CHECK_FALSE(carflow_bench::run_latency(mixed, &results, &error));
  CHECK(error == "--fresh-src: not with --coll mixed (its passes are timed whole)");
  CHECK(results.empty());
}

TEST_CASE("bench: the copy floor counts what the busiest process must receive") {
  using carflow_bench::received_bytes;
  CHECK(received_bytes("broadcast", 1000, 4) == 1000);
  CHECK(received_bytes("scatter", 1000, 4) == 1000);
  CHECK(received_bytes("gather", 1000, 4) == 3000);
  CHECK(received_bytes("gather_all", 1000, 4) == 3000);
  CHECK(received_bytes("exchange", 1000, 4) == 3000);
  CHECK(received_bytes("reduce_scatter", 1000, 4) == 3000);
  CHECK(received_bytes("allreduce", 1000, 4) == 1500);
  CHECK(received_bytes("allreduce", 1000, 2) == 1000);
  CHECK(received_bytes("reduce_vec", 1000, 4) == 1000);
  CHECK(received_bytes("barrier", 0, 4) == 0);
  CHECK(received_bytes("broadcast", 1000, 1) == 0);
}
