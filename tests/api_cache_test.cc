// The schedule cache's budget (CF_SCHEDULE_CACHE_BYTES = 64 KiB here, from
// tests/BUILD): calls of ever new sizes drop old schedules instead of
// growing without end, and nothing changes for the caller: repeated calls
// (the memo path), calls whose schedules were dropped, and aggregates
// still give correct data. Calls whose temp arenas alone pass the budget
// keep their schedules: the cache frees idle arenas first.
#include <carflow/carflow.h>

#include <cstdint>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::run_images;

constexpr int kFlags = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

TEST_CASE("new sizes past CF_SCHEDULE_CACHE_BYTES evict old schedules; every call stays correct") {
  constexpr uint32_t P = 4;
  cf_cache_stats_t before{};
  REQUIRE(run_images(1, [&](cf_image_t) { cf_get_cache_stats(&before); }) == CF_OK);
  carflow_test::ImageLog log(P);
  cf_cache_stats_t after{};
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint64_t> fixed_src(4, me + 1), fixed_dst(4, 0);
    for (uint32_t round = 0; round < 2; ++round) {  // the second round rebuilds dropped schedules
      for (size_t n = 1; n <= 400; n += 3) {
        std::vector<uint8_t> src(n, static_cast<uint8_t>(n + round)), dst(n, 0);
        int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), static_cast<cf_image_t>(n % P), src.data(), n, kFlags);
        log.expect(me, rc == CF_OK && dst == src, [&] { return cat("broadcast ", n, ": ", rc, " ", cf_last_error()); });
        // A call repeated all along: its memo must survive evictions.
        rc = cf_coll_allreduce(CF_TEAM_ALL, fixed_dst.data(), fixed_src.data(), 8, 4,
                               CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64), 0, kFlags);
        log.expect(me, rc == CF_OK && fixed_dst == std::vector<uint64_t>(4, P * (P + 1) / 2),
                   [&] { return cat("allreduce after size ", n, ": ", rc, " ", cf_last_error()); });
        if (n % 30 == 1) {  // an aggregate of two members now and then
          std::vector<uint8_t> a(8, 1), b(16, 2), da(8, 0), db(16, 0);
          cf_coll_handle_t h1 = cf_coll_broadcast_nb(CF_TEAM_ALL, da.data(), 0, a.data(), 8, kFlags | CF_COLL_AGGREGATE);
          cf_coll_handle_t h2 = cf_coll_broadcast_nb(CF_TEAM_ALL, db.data(), 1, b.data(), 16, kFlags);
          const int r2 = cf_coll_wait_sync(h2);  // the last member's handle syncs the aggregate
          log.expect(me, h1 == CF_COLL_INVALID_HANDLE && r2 == CF_OK && da == a && db == b,
                     [&] { return cat("aggregate: ", r2, " ", cf_last_error()); });
        }
      }
    }
    if (me == 0) cf_get_cache_stats(&after);
  });
  CHECK(status == CF_OK);
  log.report();
  INFO("built ", after.built, ", evicted ", after.evicted, ", bytes ", after.bytes);
  CHECK(after.evicted > 0);
  CHECK(after.built >= 134 * P + 200);  // the second round built dropped ones again
  CHECK(after.bytes <= P * 64 * 1024);
}

TEST_CASE("idle temp arenas go before schedules: two calls whose arenas pass the budget are built once each") {
  // direct reduce_scatter on 2 images takes a temp arena of one block: 40
  // and 48 KiB, 88 KiB together against the 64 KiB budget. Each round runs
  // both, then a broadcast of a size not seen before, whose miss trims the
  // cache: the idle arenas are freed and both schedules kept (dropping the
  // schedules instead would build them again every round).
  constexpr uint32_t P = 2, kRounds = 10;
  constexpr size_t kBlocks[] = {5 * 1024, 6 * 1024};  // uint64 elements per block
  carflow_test::ImageLog log(P);
  cf_cache_stats_t stats{};
  const int status = run_images(P, [&](cf_image_t me) {
    log.expect(me, cf_coll_set_algorithm(CF_KIND_REDUCE_SCATTER, "direct") == CF_OK,
               [&] { return cat("set_algorithm: ", cf_last_error()); });
    for (uint32_t round = 0; round < kRounds; ++round) {
      for (size_t n : kBlocks) {
        std::vector<uint64_t> src(P * n), dst(n, 0), want(n);
        for (size_t i = 0; i < P * n; ++i) src[i] = (me + 1) * 1000 + i + round;
        // Block me of the sum over both images: 1000 + 2000 + 2 (me n + i + round).
        for (size_t i = 0; i < n; ++i) want[i] = 3000 + 2 * (me * n + i + round);
        const int rc = cf_coll_reduce_scatter(CF_TEAM_ALL, dst.data(), src.data(), 8, n,
                                              CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64), 0, kFlags);
        log.expect(me, rc == CF_OK && dst == want,
                   [&] { return cat("reduce_scatter ", n, " round ", round, ": ", rc, " ", cf_last_error()); });
      }
      std::vector<uint8_t> b(10 + round, static_cast<uint8_t>(round)), db(b.size(), 0);
      const int rc = cf_coll_broadcast(CF_TEAM_ALL, db.data(), 0, b.data(), b.size(), kFlags);
      log.expect(me, rc == CF_OK && db == b, [&] { return cat("broadcast round ", round, ": ", rc); });
    }
    // Every image's calls are done (and their builds counted) before image 0 reads the sum.
    const int all_sync = CF_COLL_IN_ALLSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
    log.expect(me, cf_coll_barrier(CF_TEAM_ALL, all_sync) == CF_OK, [&] { return cat("barrier: ", cf_last_error()); });
    if (me == 0) cf_get_cache_stats(&stats);
  });
  CHECK(status == CF_OK);
  log.report();
  INFO("built ", stats.built, ", evicted ", stats.evicted, ", bytes ", stats.bytes);
  CHECK(stats.built == P * (2 + kRounds + 1));  // each size once per image, each broadcast once, the barrier
  CHECK(stats.evicted == 0);
  CHECK(stats.bytes <= P * 64 * 1024);
}

TEST_CASE("cf_get_cache_stats refuses NULL") {
  CHECK(cf_get_cache_stats(nullptr) == CF_ERR_BAD_ARG);
}

}  // namespace
