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
