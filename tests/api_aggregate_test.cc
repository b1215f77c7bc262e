// CF_COLL_AGGREGATE through the public C API (GASNet collectives notes v1.7, "CURRENT PROPOSAL"):
// consecutive non-blocking initiations with the flag, closed by one without
// it, run as one merged DAG under the last call's handle. Checked here:
// every member's data against a sequential reference, the handles, message
// counts (coalescing), the schedule cache, the JSON dump and misuse.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports. Statistics are read between two std::barrier phases, so no
// carflow message is in flight while they are read.
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <unistd.h>

#include "graph/json.h"
#include "graph/validate.h"
#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::pattern;
using carflow_test::run_images;

constexpr int kAllSync = CF_COLL_IN_ALLSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
const int kSumI64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
const int kMaxI64 = CF_BUILTIN(CF_OP_MAX, CF_DT_INT64);

int64_t contribution(uint32_t image, uint32_t member, size_t j) {
  return static_cast<int64_t>((image + 1) * 1000 + member * 37 + j) * (j % 2 ? -1 : 1);
}

cf_stats_t quiet_stats(cf_image_t me, std::barrier<>& phase) {
  cf_stats_t stats{};
  phase.arrive_and_wait();
  if (me == 0) cf_get_stats(&stats);
  phase.arrive_and_wait();
  return stats;
}

// Checks that a non-last member returned CF_COLL_INVALID_HANDLE with CF_OK.
void expect_member(ImageLog& log, cf_image_t me, cf_coll_handle_t h, const char* what) {
  const int status = cf_last_status();
  log.expect(me, h == CF_COLL_INVALID_HANDLE && status == CF_OK, [&] {
    return cat(what, ": an aggregate member should return CF_COLL_INVALID_HANDLE with CF_OK, got handle ",
               h, " and ", cf_strerror(status), " ", cf_last_error());
  });
}

TEST_CASE("aggregated broadcasts with different roots and sizes all deliver under the last handle") {
  const size_t sizes[] = {8, 1000, 8, 70000, 8, 1, 4096, 8};
  constexpr uint32_t kMembers = 8;
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
    CAPTURE(P);
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      std::vector<std::vector<uint8_t>> dst(kMembers), src(kMembers);
      for (uint32_t k = 0; k < kMembers; ++k) {
        dst[k].assign(sizes[k], 0);
        src[k] = pattern(k, sizes[k]);
      }
      for (int round = 0; round < 3; ++round) {  // the merged schedule is reused
        cf_coll_handle_t last = CF_COLL_INVALID_HANDLE;
        for (uint32_t k = 0; k < kMembers; ++k) {
          const bool is_last = k + 1 == kMembers;
          std::fill(dst[k].begin(), dst[k].end(), 0);
          const cf_coll_handle_t h =
              cf_coll_broadcast_nb(CF_TEAM_ALL, dst[k].data(), (k * 3) % P, src[k].data(), sizes[k],
                                   kAllLocal | (is_last ? 0 : CF_COLL_AGGREGATE));
          if (!is_last) {
            expect_member(log, me, h, "broadcast");
          } else {
            last = h;
          }
        }
        const int rc = cf_coll_wait_sync(last);
        log.expect(me, rc == CF_OK, [&] { return cat("wait_sync: ", cf_strerror(rc), " ", cf_last_error()); });
        for (uint32_t k = 0; k < kMembers; ++k) {
          log.expect(me, dst[k] == src[k], [&] { return cat("round ", round, " member ", k, ": wrong data"); });
        }
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == P * 3 * (kMembers - 1 + 1 + kMembers));
  }
}

// One aggregate of many kinds, one of them in place, with members that
// share a spec but not an op (they are coalesced; each keeps its op).
TEST_CASE("a mixed aggregate: broadcast, allreduce SUM and MAX, gather, scatter, exchange, scan, in-place allreduce") {
  constexpr size_t kElems = 5;
  constexpr size_t kBlock = 24;
  for (uint32_t P : {1u, 2u, 3u, 4u, 7u}) {
    CAPTURE(P);
    ImageLog log(P);
    const uint32_t root = P - 1;
    // Three rounds: the later ones repeat the aggregate, so its last call
    // (a reduction) starts the remembered merged schedule and binds its
    // own buffers and op there.
    const int status = run_images(P, [&](cf_image_t me) {
      for (uint32_t round = 0; round < 3; ++round) {
        std::vector<uint8_t> bsrc = pattern(99 + round, 300), bdst(300, 0);
        std::vector<int64_t> a(kElems), b(kElems), sum(kElems), mx(kElems), inplace(kElems), scan(kElems);
        for (size_t j = 0; j < kElems; ++j) {
          a[j] = contribution(me, 0, j);
          b[j] = contribution(me, 1, j);
          inplace[j] = contribution(me, 2 + round, j);
        }
        std::vector<uint8_t> gsrc = pattern(1000 + me, kBlock), gdst(P * kBlock, 0);
        std::vector<uint8_t> ssrc(P * kBlock), sdst(kBlock, 0);
        for (uint32_t i = 0; i < P; ++i) {
          const auto block = pattern(2000 + i, kBlock);
          std::memcpy(ssrc.data() + i * kBlock, block.data(), kBlock);
        }
        std::vector<uint8_t> xsrc(P * kBlock), xdst(P * kBlock, 0);
        for (uint32_t j = 0; j < P; ++j) {
          const auto block = pattern(3000 + me * 64 + j, kBlock);
          std::memcpy(xsrc.data() + j * kBlock, block.data(), kBlock);
        }
        const int agg = CF_COLL_AGGREGATE;
        const int sync = CF_COLL_IN_NOSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
        expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, bdst.data(), root, bsrc.data(), bsrc.size(), kAllLocal | agg), "broadcast");
        expect_member(log, me, cf_coll_allreduce_nb(CF_TEAM_ALL, sum.data(), a.data(), 8, kElems, kSumI64, 0, kAllLocal | agg), "allreduce sum");
        expect_member(log, me, cf_coll_allreduce_nb(CF_TEAM_ALL, mx.data(), b.data(), 8, kElems, kMaxI64, 0, kAllLocal | agg), "allreduce max");
        expect_member(log, me, cf_coll_gather_nb(CF_TEAM_ALL, 0, gdst.data(), gsrc.data(), kBlock, sync | agg), "gather");
        expect_member(log, me, cf_coll_scatter_nb(CF_TEAM_ALL, sdst.data(), root, ssrc.data(), kBlock, kAllLocal | agg), "scatter");
        expect_member(log, me, cf_coll_exchange_nb(CF_TEAM_ALL, xdst.data(), xsrc.data(), kBlock, kAllLocal | agg), "exchange");
        expect_member(log, me, cf_coll_scan_nb(CF_TEAM_ALL, scan.data(), a.data(), 8, kElems, kSumI64, 0, kAllLocal | agg), "scan");
        const cf_coll_handle_t last =
            cf_coll_allreduce_nb(CF_TEAM_ALL, inplace.data(), inplace.data(), 8, kElems, kSumI64, 0, kAllLocal);
        const int rc = cf_coll_wait_sync(last);
        log.expect(me, rc == CF_OK, [&] { return cat("wait_sync: ", cf_strerror(rc), " ", cf_last_error()); });
        log.expect(me, bdst == bsrc, [] { return std::string("broadcast: wrong data"); });
        for (size_t j = 0; j < kElems; ++j) {
          int64_t want_sum = 0, want_max = INT64_MIN, want_inplace = 0, want_scan = 0;
          for (uint32_t i = 0; i < P; ++i) {
            want_sum += contribution(i, 0, j);
            want_max = std::max(want_max, contribution(i, 1, j));
            want_inplace += contribution(i, 2 + round, j);
            if (i <= me) want_scan += contribution(i, 0, j);
          }
          log.expect(me, sum[j] == want_sum, [&] { return cat("allreduce sum [", j, "] = ", sum[j], ", want ", want_sum); });
          log.expect(me, mx[j] == want_max, [&] { return cat("allreduce max [", j, "] = ", mx[j], ", want ", want_max); });
          log.expect(me, inplace[j] == want_inplace, [&] { return cat("in-place allreduce [", j, "] = ", inplace[j], ", want ", want_inplace); });
          log.expect(me, scan[j] == want_scan, [&] { return cat("scan [", j, "] = ", scan[j], ", want ", want_scan); });
        }
        if (me == 0) {
          for (uint32_t i = 0; i < P; ++i) {
            const auto want = pattern(1000 + i, kBlock);
            log.expect(me, std::memcmp(gdst.data() + i * kBlock, want.data(), kBlock) == 0,
                       [&] { return cat("gather: block ", i, " wrong"); });
          }
        }
        log.expect(me, sdst == pattern(2000 + me, kBlock), [] { return std::string("scatter: wrong block"); });
        for (uint32_t i = 0; i < P; ++i) {
          const auto want = pattern(3000 + i * 64 + me, kBlock);
          log.expect(me, std::memcmp(xdst.data() + i * kBlock, want.data(), kBlock) == 0,
                     [&] { return cat("exchange: block from ", i, " wrong"); });
        }
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
  }
}

// Members with equal arguments are coalesced: packed, relayed without
// unpacking where an image forwards what it received, unpacked or combined.
TEST_CASE("coalesced members of each kind give every member its own result") {
  constexpr uint32_t kMembers = 4;
  constexpr size_t kBlock = 40;
  for (uint32_t P : {2u, 3u, 5u, 8u}) {
    CAPTURE(P);
    ImageLog log(P);
    const uint32_t root = P / 2;
    const int status = run_images(P, [&](cf_image_t me) {
      std::vector<std::vector<uint8_t>> bsrc, bdst, asrc, adst, xsrc, xdst, ssrc, sdst;
      std::vector<std::vector<int64_t>> rsrc, rdst;
      for (uint32_t k = 0; k < kMembers; ++k) {
        bsrc.push_back(pattern(10 + k, kBlock));
        bdst.emplace_back(kBlock, 0);
        asrc.push_back(pattern(100 + k * 16 + me, kBlock));
        adst.emplace_back(P * kBlock, 0);
        xsrc.push_back(pattern(1000 + k * 256 + me, P * kBlock));
        xdst.emplace_back(P * kBlock, 0);
        ssrc.push_back(pattern(5000 + k, P * kBlock));
        sdst.emplace_back(kBlock, 0);
        rsrc.emplace_back(3);
        for (size_t j = 0; j < 3; ++j) rsrc[k][j] = contribution(me, k, j);
        rdst.emplace_back(3, 0);
      }
      auto flags = [&](uint32_t k) { return kAllLocal | (k + 1 < kMembers ? CF_COLL_AGGREGATE : 0); };
      cf_coll_handle_t h[5];
      for (uint32_t k = 0; k < kMembers; ++k) {
        h[0] = cf_coll_broadcast_nb(CF_TEAM_ALL, bdst[k].data(), root, bsrc[k].data(), kBlock, flags(k));
      }
      for (uint32_t k = 0; k < kMembers; ++k) {
        h[1] = cf_coll_gather_all_nb(CF_TEAM_ALL, adst[k].data(), asrc[k].data(), kBlock, flags(k));
      }
      for (uint32_t k = 0; k < kMembers; ++k) {
        h[2] = cf_coll_exchange_nb(CF_TEAM_ALL, xdst[k].data(), xsrc[k].data(), kBlock, flags(k));
      }
      for (uint32_t k = 0; k < kMembers; ++k) {
        h[3] = cf_coll_scatter_nb(CF_TEAM_ALL, sdst[k].data(), root, ssrc[k].data(), kBlock, flags(k));
      }
      for (uint32_t k = 0; k < kMembers; ++k) {
        h[4] = cf_coll_allreduce_nb(CF_TEAM_ALL, rdst[k].data(), rsrc[k].data(), 8, 3,
                                    k % 2 ? kMaxI64 : kSumI64, 0, flags(k));
      }
      const int rc = cf_coll_wait_sync_all(h, 5);
      log.expect(me, rc == CF_OK, [&] { return cat("wait_sync_all: ", cf_strerror(rc), " ", cf_last_error()); });
      for (uint32_t k = 0; k < kMembers; ++k) {
        log.expect(me, bdst[k] == bsrc[k], [&] { return cat("broadcast member ", k); });
        log.expect(me, sdst[k] == std::vector<uint8_t>(ssrc[k].begin() + me * kBlock, ssrc[k].begin() + (me + 1) * kBlock),
                   [&] { return cat("scatter member ", k); });
        for (uint32_t i = 0; i < P; ++i) {
          const auto a = pattern(100 + k * 16 + i, kBlock);
          log.expect(me, std::memcmp(adst[k].data() + i * kBlock, a.data(), kBlock) == 0,
                     [&] { return cat("gather_all member ", k, " block ", i); });
          const auto x = pattern(1000 + k * 256 + i, P * kBlock);
          log.expect(me, std::memcmp(xdst[k].data() + i * kBlock, x.data() + me * kBlock, kBlock) == 0,
                     [&] { return cat("exchange member ", k, " block from ", i); });
        }
        for (size_t j = 0; j < 3; ++j) {
          int64_t want = k % 2 ? INT64_MIN : 0;
          for (uint32_t i = 0; i < P; ++i) {
            want = k % 2 ? std::max(want, contribution(i, k, j)) : want + contribution(i, k, j);
          }
          log.expect(me, rdst[k][j] == want, [&] { return cat("allreduce member ", k, " [", j, "] = ", rdst[k][j], ", want ", want); });
        }
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
  }
}

// Messages sent by all images while each runs `collective` once.
template <typename Collective>
uint64_t count_messages(uint32_t P, Collective collective, ImageLog& log) {
  std::barrier<> phase(P);
  uint64_t messages = 0;
  const int status = run_images(P, [&](cf_image_t me) {
    const cf_stats_t before = quiet_stats(me, phase);
    const int rc = collective(me);
    log.expect(me, rc == CF_OK, [&] { return cat("collective failed: ", cf_strerror(rc), " ", cf_last_error()); });
    const cf_stats_t after = quiet_stats(me, phase);
    if (me == 0) messages = after.messages - before.messages;
  });
  log.expect(0, status == CF_OK, [&] { return cat("cf_run_images: ", cf_strerror(status)); });
  return messages;
}

TEST_CASE("8 aggregated 8-byte broadcasts with IN_ALLSYNC|OUT_ALLSYNC send no more messages than one") {
  constexpr uint32_t P = 8;
  ImageLog log(P);
  const uint64_t one = count_messages(P, [&](cf_image_t me) {
    uint64_t value = me == 0 ? 42 : 0;
    const int rc = cf_coll_broadcast(CF_TEAM_ALL, &value, 0, &value, 8, kAllSync);
    log.expect(me, value == 42, [] { return std::string("single broadcast: wrong data"); });
    return rc;
  }, log);
  const uint64_t eight = count_messages(P, [&](cf_image_t me) {
    uint64_t values[8] = {};
    uint64_t sources[8];
    for (int k = 0; k < 8; ++k) sources[k] = 1000 + k;
    cf_coll_handle_t h = CF_COLL_INVALID_HANDLE;
    for (int k = 0; k < 8; ++k) {
      h = cf_coll_broadcast_nb(CF_TEAM_ALL, &values[k], 0, &sources[k], 8, kAllSync | (k < 7 ? CF_COLL_AGGREGATE : 0));
    }
    const int rc = cf_coll_wait_sync(h);
    for (int k = 0; k < 8; ++k) {
      log.expect(me, values[k] == uint64_t(1000 + k), [&] { return cat("member ", k, ": ", values[k]); });
    }
    return rc;
  }, log);
  log.report();
  CHECK(one > 0);
  CHECK(eight <= one);
  MESSAGE("one broadcast: " << one << " messages; 8 aggregated: " << eight);

  // Without coalescing they would be 8 times the data messages: the same
  // count proves the members' messages travel together.
  ImageLog log2(P);
  const uint64_t one_allreduce = count_messages(P, [&](cf_image_t me) {
    int64_t in = me, out = 0;
    return cf_coll_allreduce(CF_TEAM_ALL, &out, &in, 8, 1, kSumI64, 0, kAllLocal);
  }, log2);
  const uint64_t eight_allreduce = count_messages(P, [&](cf_image_t me) {
    int64_t in[8], out[8];
    cf_coll_handle_t h = CF_COLL_INVALID_HANDLE;
    for (int k = 0; k < 8; ++k) {
      in[k] = me * 10 + k;
      h = cf_coll_allreduce_nb(CF_TEAM_ALL, &out[k], &in[k], 8, 1, k % 2 ? kMaxI64 : kSumI64, 0,
                               kAllLocal | (k < 7 ? CF_COLL_AGGREGATE : 0));
    }
    const int rc = cf_coll_wait_sync(h);
    for (int k = 0; k < 8; ++k) {
      const int64_t want = k % 2 ? int64_t(P - 1) * 10 + k : int64_t(P * (P - 1) / 2) * 10 + int64_t(P) * k;
      log2.expect(me, out[k] == want, [&] { return cat("allreduce member ", k, ": ", out[k], ", want ", want); });
    }
    return rc;
  }, log2);
  log2.report();
  CHECK(one_allreduce > 0);
  CHECK(eight_allreduce == one_allreduce);
}

TEST_CASE("a repeated aggregate runs no generator again") {
  constexpr uint32_t P = 4;
  std::barrier<> phase(P);
  ImageLog log(P);
  uint64_t built_first = 0, built_repeat = 0;
  const int status = run_images(P, [&](cf_image_t me) {
    auto aggregate = [&] {
      uint32_t a = me, b = 0, c[4] = {};
      cf_coll_broadcast_nb(CF_TEAM_ALL, &b, 1, &a, 4, kAllLocal | CF_COLL_AGGREGATE);
      const cf_coll_handle_t h = cf_coll_gather_all_nb(CF_TEAM_ALL, c, &a, 4, kAllLocal);
      const int rc = cf_coll_wait_sync(h);
      log.expect(me, rc == CF_OK && b == 1 && c[3] == 3, [&] { return cat("aggregate: ", cf_strerror(rc)); });
    };
    const cf_stats_t s0 = quiet_stats(me, phase);
    aggregate();
    const cf_stats_t s1 = quiet_stats(me, phase);
    aggregate();
    const cf_stats_t s2 = quiet_stats(me, phase);
    if (me == 0) {
      built_first = s1.schedules_built - s0.schedules_built;
      built_repeat = s2.schedules_built - s1.schedules_built;
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(built_first == 2 * P);
  CHECK(built_repeat == 0);
}

TEST_CASE("aggregates that repeat, shorten, extend or change the last one each run their own members") {
  // Each team remembers its last aggregate and compares members with it as
  // they are called; a different aggregate of any shape must still run its
  // own merged DAG. Member k broadcasts from roots[k]; round r's values
  // differ from every other round's.
  constexpr uint32_t P = 4;
  const std::vector<std::vector<uint32_t>> rounds = {
      {1, 2, 3}, {1, 2, 3}, {1, 2}, {1, 2, 3, 0}, {1, 0, 3}, {1, 2, 3}, {3}, {1, 2, 3}};
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    for (size_t r = 0; r < rounds.size(); ++r) {
      const std::vector<uint32_t>& roots = rounds[r];
      std::vector<uint64_t> src(roots.size()), dst(roots.size(), 0);
      for (size_t k = 0; k < roots.size(); ++k) src[k] = 1000 * r + 100 * me + k;
      // The last round repeats the first with OUT_ALLSYNC on its last call:
      // same members, other sync modes, another merged DAG.
      const bool allsync_last = r + 1 == rounds.size();
      cf_coll_handle_t h = CF_COLL_INVALID_HANDLE;
      for (size_t k = 0; k < roots.size(); ++k) {
        const bool last = k + 1 == roots.size();
        int flags = last ? kAllLocal : kAllLocal | CF_COLL_AGGREGATE;
        if (last && allsync_last) flags = (flags & ~CF_COLL_OUT_MYSYNC) | CF_COLL_OUT_ALLSYNC;
        h = cf_coll_broadcast_nb(CF_TEAM_ALL, &dst[k], roots[k], &src[k], 8, flags);
        if (!last) expect_member(log, me, h, "member");
      }
      const int rc = cf_coll_wait_sync(h);
      log.expect(me, rc == CF_OK, [&] { return cat("round ", r, ": ", cf_strerror(rc)); });
      for (size_t k = 0; k < roots.size(); ++k) {
        const uint64_t want = 1000 * r + 100 * roots[k] + k;
        log.expect(me, dst[k] == want, [&] { return cat("round ", r, " member ", k, ": ", dst[k], ", want ", want); });
      }
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
}

TEST_CASE("an aggregate holds at most 4096 calls: the 4096th member is refused, the last call still joins") {
  // Members join through the entry points' fast path while the open
  // aggregate has room and through the engine when it must grow; either way
  // the limit is exact and a refused member changes nothing.
  constexpr uint32_t P = 2;
  constexpr size_t kCalls = 4096;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> src(kCalls), dst(kCalls, 0);
    for (size_t k = 0; k < kCalls; ++k) src[k] = static_cast<uint8_t>(k * 7 + me);
    for (size_t k = 0; k + 1 < kCalls; ++k) {
      const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &dst[k], k % P, &src[k], 1, kAllLocal | CF_COLL_AGGREGATE);
      if (h != CF_COLL_INVALID_HANDLE || cf_last_status() != CF_OK) {
        log.expect(me, false, [&] { return cat("member ", k, ": ", cf_last_error()); });
        return;
      }
    }
    uint8_t extra = 0;
    const cf_coll_handle_t refused =
        cf_coll_broadcast_nb(CF_TEAM_ALL, &extra, 0, &src[0], 1, kAllLocal | CF_COLL_AGGREGATE);
    const std::string text = cf_last_error();
    log.expect(me, refused == CF_COLL_INVALID_HANDLE && cf_last_status() == CF_ERR_BAD_ARG && contains(text, "4096"),
               [&] { return cat("member 4096: want CF_ERR_BAD_ARG naming the limit, got \"", text, "\""); });
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &dst[kCalls - 1], 1, &src[kCalls - 1], 1, kAllLocal);
    const int rc = cf_coll_wait_sync(h);
    log.expect(me, rc == CF_OK, [&] { return cat("the last call: ", cf_strerror(rc), " ", cf_last_error()); });
    size_t wrong = 0;
    for (size_t k = 0; k < kCalls; ++k) {
      const size_t root = k + 1 < kCalls ? k % P : 1;
      wrong += dst[k] != static_cast<uint8_t>(k * 7 + root);
    }
    log.expect(me, wrong == 0 && extra == 0, [&] { return cat(wrong, " of ", kCalls, " members wrong; extra=", int(extra)); });
  });
  REQUIRE(status == CF_OK);
  log.report();
}

TEST_CASE("the JSON dump of an aggregate is a valid global DAG whose CARs name their members") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = cat(dir != nullptr && *dir != '\0' ? dir : "/tmp", "/aggregate_", getpid(), ".json");
  const int status = run_images(P, [&](cf_image_t me) {
    uint64_t a = me + 1, b = 0, c = 0, d = 0;
    cf_coll_broadcast_nb(CF_TEAM_ALL, &b, 0, &a, 8, kAllSync | CF_COLL_AGGREGATE);
    cf_coll_broadcast_nb(CF_TEAM_ALL, &c, 0, &a, 8, kAllSync | CF_COLL_AGGREGATE);
    const cf_coll_handle_t h = cf_coll_allreduce_nb(CF_TEAM_ALL, &d, &a, 8, 1, kSumI64, 0, kAllLocal);
    if (me == 1) {
      const int dumped = cf_graph_dump_json(h, path.c_str());
      log.expect(me, dumped == CF_OK, [&] { return cat("dump: ", cf_last_error()); });
    }
    const int rc = cf_coll_wait_sync(h);
    log.expect(me, rc == CF_OK && b == 1 && c == 1 && d == 6, [&] { return cat("aggregate: ", cf_strerror(rc)); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  carflow::GlobalDag dag;
  std::string error;
  REQUIRE_MESSAGE(carflow::load_dag_file(path, &dag, &error), error);
  std::remove(path.c_str());
  CHECK_MESSAGE(carflow::validate_global(dag, &error), error);
  REQUIRE(dag.images.size() == P);
  for (const carflow::LocalDag& image : dag.images) {
    CHECK(image.members.size() == 3);
    bool member2 = false, sync = false;
    for (const carflow::Car& car : image.cars) {
      member2 |= car.member == 2;
      sync |= car.sync;
    }
    CHECK(member2);
    CHECK(sync);  // one entry and one exit synchronization, from the ALLSYNC members
  }
}

TEST_CASE("aggregate misuse is a clear error that changes nothing") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    uint64_t a = 7 + me, b = 0, c = 0, d = 0;
    auto expect_error = [&](int rc, const char* what, const char* part) {
      const std::string text = cf_last_error();
      log.expect(me, rc == CF_ERR_BAD_ARG && contains(text, part), [&] {
        return cat(what, ": got ", cf_strerror(rc), " \"", text, "\", want CF_ERR_BAD_ARG naming ", part);
      });
    };
    expect_error(cf_coll_broadcast(CF_TEAM_ALL, &b, 0, &a, 8, kAllLocal | CF_COLL_AGGREGATE),
                 "AGGREGATE on a blocking call", "flags");
    expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, &b, 0, &a, 8, kAllLocal | CF_COLL_AGGREGATE), "first");
    // While the aggregate is open: blocking calls, team_split and a bad member fail...
    expect_error(cf_coll_barrier(CF_TEAM_ALL, kAllLocal), "a blocking barrier inside an aggregate", "aggregate");
    expect_error(cf_coll_allreduce(CF_TEAM_ALL, &d, &a, 8, 1, kSumI64, 0, kAllLocal),
                 "a blocking allreduce inside an aggregate", "aggregate");
    cf_team_t sub = CF_TEAM_NULL;
    expect_error(cf_team_split(CF_TEAM_ALL, 0, me, &sub), "cf_team_split inside an aggregate", "aggregate");
    expect_error(cf_coll_broadcast_nb(CF_TEAM_ALL, nullptr, 0, &a, 8, kAllLocal | CF_COLL_AGGREGATE) ==
                         CF_COLL_INVALID_HANDLE
                     ? cf_last_status()
                     : CF_OK,
                 "a member with a NULL dst", "dst");
    // ...and the aggregate goes on without them.
    expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, &c, 1, &a, 8, kAllLocal | CF_COLL_AGGREGATE), "second");
    const cf_coll_handle_t h = cf_coll_allreduce_nb(CF_TEAM_ALL, &d, &a, 8, 1, kSumI64, 0, kAllLocal);
    log.expect(me, h != CF_COLL_INVALID_HANDLE, [] { return std::string("the last member has a valid handle"); });
    const int rc = cf_coll_wait_sync(h);
    log.expect(me, rc == CF_OK && b == 7 && c == 8 && d == 7 + 8 + 9,
               [&] { return cat("aggregate after errors: ", cf_strerror(rc), " b=", b, " c=", c, " d=", d); });
    // Closed: blocking calls work again.
    const int barrier = cf_coll_barrier(CF_TEAM_ALL, kAllLocal);
    log.expect(me, barrier == CF_OK, [&] { return cat("barrier after the aggregate: ", cf_strerror(barrier)); });
  });
  REQUIRE(status == CF_OK);
  log.report();
}

TEST_CASE("a repeated member's addresses are checked: overlapping root buffers are refused, adjacent ones join") {
  // From the second round on every member repeats the one before it, so
  // it takes the memo's join path (api/api_internal.h), whose address test
  // is three compares on precomputed bounds (CallMemo::set_lengths): here
  // its edges, one byte either side.
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    for (int round = 0; round < 3; ++round) {
      unsigned char buf[64];
      std::memset(buf, 0xee, sizeof buf);
      // The root's sources: buf[0, 8) and buf[24, 32).
      for (int j = 0; j < 8; ++j) buf[j] = static_cast<unsigned char>(round * 16 + j), buf[24 + j] = static_cast<unsigned char>(200 + j);
      const std::vector<unsigned char> first(buf, buf + 8), second(buf + 24, buf + 32);
      // Adjacent, valid: dst right after src, and src right after dst.
      expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, buf + 8, 0, buf, 8, kAllLocal | CF_COLL_AGGREGATE),
                    "dst = src + 8");
      expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, buf + 16, 0, buf + 24, 8, kAllLocal | CF_COLL_AGGREGATE),
                    "src = dst + 8");
      if (me == 0) {  // only the root reads src: only it may refuse these
        for (const int shift : {7, -7, 1, -1}) {
          unsigned char* src = buf + 40;
          const cf_coll_handle_t h =
              cf_coll_broadcast_nb(CF_TEAM_ALL, src + shift, 0, src, 8, kAllLocal | CF_COLL_AGGREGATE);
          const int rc = cf_last_status();
          const std::string text = cf_last_error();
          log.expect(me, h == CF_COLL_INVALID_HANDLE && rc == CF_ERR_BAD_ARG && contains(text, "overlap"), [&] {
            return cat("round ", round, ", dst = src + ", shift, ": got ", cf_strerror(rc), " \"", text,
                       "\", want CF_ERR_BAD_ARG naming the overlap");
          });
        }
      }
      unsigned char last = 0, from = static_cast<unsigned char>(round + 1);
      const int rc = cf_coll_wait_sync(cf_coll_broadcast_nb(CF_TEAM_ALL, &last, 0, &from, 1, kAllLocal));
      const bool right = std::equal(first.begin(), first.end(), buf + 8) &&
                         std::equal(second.begin(), second.end(), buf + 16) && last == round + 1;
      log.expect(me, rc == CF_OK && right, [&] {
        return cat("round ", round, ": ", cf_strerror(rc), right ? "" : ", wrong data");
      });
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
}

TEST_CASE("aggregates on two teams form separately, and cf_team_free refuses a team with an open aggregate") {
  constexpr uint32_t P = 4;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    cf_team_t half = CF_TEAM_NULL;
    int rc = cf_team_split(CF_TEAM_ALL, me % 2, me, &half);
    log.expect(me, rc == CF_OK, [&] { return cat("split: ", cf_last_error()); });
    uint64_t a = me, all_sum = 0, half_sum = 0, all_b = 0;
    // Interleaved members of aggregates on two teams.
    expect_member(log, me, cf_coll_allreduce_nb(half, &half_sum, &a, 8, 1, kSumI64, 0, kAllLocal | CF_COLL_AGGREGATE), "half");
    expect_member(log, me, cf_coll_broadcast_nb(CF_TEAM_ALL, &all_b, 2, &a, 8, kAllLocal | CF_COLL_AGGREGATE), "all");
    rc = cf_team_free(half);
    log.expect(me, rc == CF_ERR_BAD_ARG && contains(cf_last_error(), "aggregate"),
               [&] { return cat("team_free with an open aggregate: ", cf_strerror(rc)); });
    const cf_coll_handle_t h_all = cf_coll_allreduce_nb(CF_TEAM_ALL, &all_sum, &a, 8, 1, kSumI64, 0, kAllLocal);
    uint64_t half_b = 0;
    const cf_coll_handle_t h_half = cf_coll_broadcast_nb(half, &half_b, 1, &a, 8, kAllLocal);
    cf_coll_handle_t handles[2] = {h_half, h_all};
    rc = cf_coll_wait_sync_all(handles, 2);
    const uint64_t want_half = me % 2 ? 1 + 3 : 0 + 2;
    const uint64_t want_half_b = me % 2 ? 3 : 2;  // rank 1 of each half
    log.expect(me, rc == CF_OK && all_sum == 6 && all_b == 2 && half_sum == want_half && half_b == want_half_b,
               [&] { return cat("two teams: ", cf_strerror(rc), " all_sum=", all_sum, " all_b=", all_b,
                                " half_sum=", half_sum, " half_b=", half_b); });
    rc = cf_team_free(half);
    log.expect(me, rc == CF_OK, [&] { return cat("team_free: ", cf_last_error()); });
  });
  REQUIRE(status == CF_OK);
  log.report();
}

}  // namespace
