// Nonblocking collectives through the public C API: handles and the sync
// family (GASNet collectives notes v1.7: "sync is not collective and may happen in any order; a
// handle is dead after a successful sync"), graph dumps, the schedule cache
// and message counts.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports. Where a test needs an image to stay out of a collective,
// that image waits on a std::atomic flag (C++20 wait/notify), never on a sleep.
// Statistics are read between two std::barrier phases of the image threads, so
// no carflow message is in flight and none is added by the measurement.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::pattern;
using carflow_test::run_images;
using carflow_test::temp_path;


// An image that must not enter a collective yet waits here.
class Gate {
 public:
  void wait() { open_.wait(false); }
  void open() {
    open_.store(true);
    open_.notify_all();
  }

 private:
  std::atomic<bool> open_{false};
};

// Polls try(), which returns a cf status, while it returns CF_NOT_READY, for at
// most 30 s; returns the last status (CF_NOT_READY if time ran out).
template <typename Try>
int poll_until_ready(Try try_sync, long* polls = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  int status = CF_NOT_READY;
  long n = 0;
  while (status == CF_NOT_READY && std::chrono::steady_clock::now() < deadline) {
    status = try_sync();
    ++n;
  }
  if (polls != nullptr) *polls = n;
  return status;
}

// ---- outstanding collectives -----------------------------------------------------

TEST_CASE("200 outstanding broadcasts on different buffers all complete when synced in reverse order") {
  constexpr int kOutstanding = 200;
  for (uint32_t P : {2u, 4u, 8u}) {
    CAPTURE(P);
    auto nbytes_of = [](int k) { return k % 3 == 2 ? size_t{12000} : size_t{48}; };  // eager and large
    std::vector<std::vector<uint8_t>> want;
    for (int k = 0; k < kOutstanding; ++k) want.push_back(pattern(k, nbytes_of(k)));
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      std::vector<std::vector<uint8_t>> dst(kOutstanding), src(kOutstanding);
      std::vector<cf_coll_handle_t> handles(kOutstanding);
      for (int k = 0; k < kOutstanding; ++k) {
        const uint32_t root = k % P;
        dst[k].assign(nbytes_of(k), 0);
        if (me == root) src[k] = want[k];
        handles[k] = cf_coll_broadcast_nb(CF_TEAM_ALL, dst[k].data(), root,
                                          me == root ? src[k].data() : nullptr, nbytes_of(k), kAllLocal);
        log.expect(me, handles[k] != CF_COLL_INVALID_HANDLE,
                   [&] { return cat("broadcast ", k, " rejected: ", cf_last_error()); });
      }
      for (int k = kOutstanding - 1; k >= 0; --k) {
        const int rc = cf_coll_wait_sync(handles[k]);
        log.expect(me, rc == CF_OK, [&] { return cat("broadcast ", k, ": wait_sync ", cf_strerror(rc)); });
      }
      for (int k = 0; k < kOutstanding; ++k) {
        log.expect(me, dst[k] == want[k],
                   [&] { return cat("broadcast ", k, " (nbytes=", nbytes_of(k), "): wrong data"); });
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == P * kOutstanding * 3);
  }
}

TEST_CASE("65535 outstanding 8-byte broadcasts complete when synced in reverse order, without syncs to make room") {
  // GASNet collectives notes v1.7, "Number outstanding": initiation never waits for the client
  // to sync; every call starts at once and all complete.
  constexpr uint32_t kOutstanding = 65535;
  const uint32_t P = 4;
  ImageLog log(P);
  REQUIRE(run_images(P, [&](cf_image_t me) {
            std::vector<uint64_t> dst(kOutstanding, 0), src(kOutstanding);
            std::vector<cf_coll_handle_t> handles(kOutstanding);
            uint32_t rejected = 0;
            for (uint32_t k = 0; k < kOutstanding; ++k) {
              src[k] = uint64_t{k} * 1000003 + k % P;
              handles[k] = cf_coll_broadcast_nb(CF_TEAM_ALL, &dst[k], k % P, &src[k], 8, kAllLocal);
              rejected += handles[k] == CF_COLL_INVALID_HANDLE;
            }
            log.expect(me, rejected == 0, [&] { return cat(rejected, " broadcasts rejected: ", cf_last_error()); });
            uint32_t failed = 0, wrong = 0;
            for (uint32_t k = kOutstanding; k-- > 0;) failed += cf_coll_wait_sync(handles[k]) != CF_OK;
            for (uint32_t k = 0; k < kOutstanding; ++k) wrong += dst[k] != uint64_t{k} * 1000003 + k % P;
            log.expect(me, failed == 0 && wrong == 0, [&] { return cat(failed, " failed, ", wrong, " wrong"); });
          }) == CF_OK);
  log.report();
}

// ---- the sync family ---------------------------------------------------------------

TEST_CASE("wait_sync_all syncs every live entry, skips INVALID entries, and leaves the handles dead") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const std::vector<uint8_t> want_small = pattern(1, 100), want_large = pattern(2, 20000);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> small(100), large(20000);
    std::vector<uint8_t> small_src = want_small, large_src = want_large;
    std::vector<int64_t> sum_src(10, me + 1), sum(10, 0);
    const cf_coll_handle_t b0 = cf_coll_broadcast_nb(CF_TEAM_ALL, small.data(), 0, small_src.data(), 100, kAllLocal);
    const cf_coll_handle_t bar = cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal);
    const cf_coll_handle_t red = cf_coll_allreduce_nb(CF_TEAM_ALL, sum.data(), sum_src.data(), 8, 10,
                                                      CF_BUILTIN(CF_OP_SUM, CF_DT_INT64), 0, kAllLocal);
    const cf_coll_handle_t b1 = cf_coll_broadcast_nb(CF_TEAM_ALL, large.data(), P - 1, large_src.data(), 20000, kAllLocal);
    cf_coll_handle_t handles[] = {CF_COLL_INVALID_HANDLE, b0, CF_COLL_INVALID_HANDLE, bar, red,
                                  CF_COLL_INVALID_HANDLE, b1};
    const int rc = cf_coll_wait_sync_all(handles, std::size(handles));
    log.expect(me, rc == CF_OK, [&] { return cat("wait_sync_all: ", cf_strerror(rc), " ", cf_last_error()); });
    log.expect(me, small == want_small, [] { return "broadcast of 100 bytes: wrong data"; });
    log.expect(me, large == want_large, [] { return "broadcast of 20000 bytes: wrong data"; });
    log.expect(me, std::all_of(sum.begin(), sum.end(), [](int64_t v) { return v == 6; }),
               [&] { return cat("allreduce: got ", sum[0], ", expected 6"); });
    for (cf_coll_handle_t h : {b0, bar, red, b1}) {
      const int again = cf_coll_try_sync(h);
      log.expect(me, again == CF_ERR_BAD_ARG, [&] {
        return cat("a handle synced by wait_sync_all is still live: try_sync gave ", cf_strerror(again));
      });
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * 8);
}

TEST_CASE("try_sync_all returns CF_NOT_READY and syncs nothing until every entry is done") {
  constexpr uint32_t P = 2;
  const std::vector<uint8_t> want0 = pattern(10, 64), want1 = pattern(11, 64);
  Gate gate;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> dst0(64), dst1(64), src0 = want0, src1 = want1;
    if (me == 1) gate.wait();  // image 1 enters neither broadcast before the gate opens
    cf_coll_handle_t handles[2] = {
        cf_coll_broadcast_nb(CF_TEAM_ALL, dst0.data(), 0, src0.data(), 64, kAllLocal),
        cf_coll_broadcast_nb(CF_TEAM_ALL, dst1.data(), 1, src1.data(), 64, kAllLocal)};
    const cf_coll_handle_t original[2] = {handles[0], handles[1]};
    if (me == 0) {
      // The broadcast rooted at image 1 cannot finish before image 1 enters it.
      int not_ready = 0;
      for (int i = 0; i < 50; ++i) not_ready += cf_coll_try_sync_all(handles, 2) == CF_NOT_READY;
      log.expect(me, not_ready == 50, [&] {
        return cat("try_sync_all returned something other than CF_NOT_READY ", 50 - not_ready,
                   " times while image 1 had not entered");
      });
      log.expect(me, handles[0] == original[0] && handles[1] == original[1],
                 [] { return "try_sync_all changed the array while returning CF_NOT_READY"; });
      gate.open();
    }
    // CF_OK (not CF_ERR_BAD_ARG) shows no entry was synced by the calls above.
    const int rc = poll_until_ready([&] { return cf_coll_try_sync_all(handles, 2); });
    log.expect(me, rc == CF_OK, [&] { return cat("try_sync_all finally gave ", cf_strerror(rc), ": ", cf_last_error()); });
    log.expect(me, dst0 == want0 && dst1 == want1, [] { return "wrong data after try_sync_all"; });
    log.expect(me, cf_coll_try_sync(original[0]) == CF_ERR_BAD_ARG &&
                       cf_coll_try_sync(original[1]) == CF_ERR_BAD_ARG,
               [] { return "a handle is still live after try_sync_all returned CF_OK"; });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 2 + P * 3);
}

TEST_CASE("wait_sync_some and try_sync_some sync the done entries, set them INVALID and leave the others live") {
  constexpr uint32_t P = 2;
  const std::vector<uint8_t> want0 = pattern(20, 5000), want1 = pattern(21, 5000);
  Gate gate;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> dst0(5000), dst1(5000), src0 = want0, src1 = want1;
    if (me == 1) {  // takes part in the first broadcast only, until the gate opens
      log.expect(me, cf_coll_broadcast(CF_TEAM_ALL, dst0.data(), 0, nullptr, 5000, kAllLocal) == CF_OK,
                 [] { return "first broadcast failed"; });
      gate.wait();
      log.expect(me, cf_coll_broadcast(CF_TEAM_ALL, dst1.data(), 1, src1.data(), 5000, kAllLocal) == CF_OK,
                 [] { return "second broadcast failed"; });
      log.expect(me, dst0 == want0 && dst1 == want1, [] { return "wrong data"; });
      return;
    }
    const cf_coll_handle_t first = cf_coll_broadcast_nb(CF_TEAM_ALL, dst0.data(), 0, src0.data(), 5000, kAllLocal);
    const cf_coll_handle_t second = cf_coll_broadcast_nb(CF_TEAM_ALL, dst1.data(), 1, nullptr, 5000, kAllLocal);
    cf_coll_handle_t handles[2] = {first, second};
    int rc = cf_coll_wait_sync_some(handles, 2);
    log.expect(me, rc == CF_OK, [&] { return cat("wait_sync_some: ", cf_strerror(rc)); });
    log.expect(me, handles[0] == CF_COLL_INVALID_HANDLE && handles[1] == second, [&] {
      return cat("after wait_sync_some, entries are {", handles[0], ", ", handles[1],
                 "}, expected {INVALID, the second handle ", second, "}");
    });
    log.expect(me, dst0 == want0, [] { return "first broadcast: wrong data after wait_sync_some"; });
    int not_ready = 0;
    for (int i = 0; i < 50; ++i) not_ready += cf_coll_try_sync_some(handles, 2) == CF_NOT_READY;
    log.expect(me, not_ready == 50 && handles[1] == second, [&] {
      return cat("try_sync_some gave something other than CF_NOT_READY ", 50 - not_ready,
                 " times while image 1 had not entered (entry now ", handles[1], ")");
    });
    gate.open();
    rc = poll_until_ready([&] { return cf_coll_try_sync_some(handles, 2); });
    log.expect(me, rc == CF_OK && handles[1] == CF_COLL_INVALID_HANDLE, [&] {
      return cat("try_sync_some finally gave ", cf_strerror(rc), ", entry ", handles[1]);
    });
    log.expect(me, dst1 == want1, [] { return "second broadcast: wrong data after try_sync_some"; });
    log.expect(me, cf_coll_try_sync(first) == CF_ERR_BAD_ARG && cf_coll_try_sync(second) == CF_ERR_BAD_ARG,
               [] { return "a handle synced by *_sync_some is still live"; });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 3 + 7);
}

TEST_CASE("every sync_all and sync_some call returns CF_OK at once on an empty or all-INVALID array") {
  ImageLog log(2);
  const int status = run_images(2, [&](cf_image_t me) {
    cf_coll_handle_t none[3] = {CF_COLL_INVALID_HANDLE, CF_COLL_INVALID_HANDLE, CF_COLL_INVALID_HANDLE};
    const struct {
      const char* name;
      int (*fn)(cf_coll_handle_t*, size_t);
    } calls[] = {{"wait_sync_all", cf_coll_wait_sync_all},
                 {"try_sync_all", cf_coll_try_sync_all},
                 {"wait_sync_some", cf_coll_wait_sync_some},
                 {"try_sync_some", cf_coll_try_sync_some}};
    for (const auto& call : calls) {
      const int all_invalid = call.fn(none, 3);
      log.expect(me, all_invalid == CF_OK, [&] { return cat(call.name, " on 3 INVALID entries: ", cf_strerror(all_invalid)); });
      const int empty = call.fn(none, 0);
      log.expect(me, empty == CF_OK, [&] { return cat(call.name, " on 0 entries: ", cf_strerror(empty)); });
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 2 * 8);
}

TEST_CASE("a handle is dead once synced: syncing it again, or a never-valid handle, gives CF_ERR_BAD_ARG") {
  constexpr uint32_t P = 2;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    uint64_t value = me == 0 ? 42 : 0;
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
    log.expect(me, cf_coll_wait_sync(h) == CF_OK && value == 42, [] { return "first sync failed"; });
    int rc = cf_coll_wait_sync(h);
    log.expect(me, rc == CF_ERR_BAD_ARG && cf_last_status() == CF_ERR_BAD_ARG &&
                       contains(cf_last_error(), "handle"),
               [&] { return cat("wait_sync of a synced handle: ", cf_strerror(rc), " (", cf_last_error(), ")"); });
    rc = cf_coll_try_sync(h);
    log.expect(me, rc == CF_ERR_BAD_ARG, [&] { return cat("try_sync of a synced handle: ", cf_strerror(rc)); });
    for (cf_coll_handle_t never : {CF_COLL_INVALID_HANDLE, static_cast<cf_coll_handle_t>(0xdeadbeef)}) {
      rc = cf_coll_wait_sync(never);
      log.expect(me, rc == CF_ERR_BAD_ARG, [&] { return cat("wait_sync(", never, "): ", cf_strerror(rc)); });
      rc = cf_coll_try_sync(never);
      log.expect(me, rc == CF_ERR_BAD_ARG, [&] { return cat("try_sync(", never, "): ", cf_strerror(rc)); });
    }
    // A dead entry fails the whole call, which then syncs nothing else.
    const cf_coll_handle_t live = cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal);
    for (auto fn : {cf_coll_wait_sync_all, cf_coll_try_sync_all, cf_coll_wait_sync_some, cf_coll_try_sync_some}) {
      cf_coll_handle_t mixed[2] = {live, h};
      rc = fn(mixed, 2);
      log.expect(me, rc == CF_ERR_BAD_ARG && mixed[0] == live,
                 [&] { return cat("a *_sync_all/_some call with a dead entry gave ", cf_strerror(rc)); });
    }
    rc = cf_coll_wait_sync(live);
    log.expect(me, rc == CF_OK, [&] {
      return cat("the live handle next to a dead one was synced by a failed call: ", cf_strerror(rc));
    });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * (3 + 4 + 4 + 1));
}

TEST_CASE("a handle kept after its sync stays dead while its image starts and syncs 70000 more collectives") {
  // Each slot's generation has 16 bits: were a freed slot reused at once,
  // the kept handle would name the live collective of the 65536th call
  // after it. Slots are reused oldest first, past 256 free ones.
  ImageLog log(1);
  const int status = run_images(1, [&](cf_image_t me) {
    uint64_t value = 7;
    const cf_coll_handle_t kept = cf_coll_broadcast_nb(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
    log.expect(me, cf_coll_wait_sync(kept) == CF_OK, [] { return "the first sync failed"; });
    int failed = 0, stale_live = 0;
    for (int i = 1; i <= 70000; ++i) {
      const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
      if (h == kept) ++stale_live;  // the kept handle names this live collective
      if (cf_coll_wait_sync(h) != CF_OK) ++failed;
    }
    log.expect(me, failed == 0 && stale_live == 0,
               [&] { return cat(failed, " syncs failed; the kept handle named ", stale_live, " live collectives"); });
    const int rc = cf_coll_try_sync(kept);
    log.expect(me, rc == CF_ERR_BAD_ARG, [&] { return cat("try_sync of the kept handle: ", cf_strerror(rc)); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 3);
}

TEST_CASE("a handle given twice to a *_sync_all/_some call is CF_ERR_BAD_ARG naming both entries, and syncs nothing") {
  constexpr uint32_t P = 2;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    for (auto fn : {cf_coll_wait_sync_all, cf_coll_try_sync_all, cf_coll_wait_sync_some, cf_coll_try_sync_some}) {
      // A short list (pairwise check) and a long one (sorted check).
      for (size_t n : {size_t{3}, size_t{40}}) {
        std::vector<cf_coll_handle_t> hs(n, CF_COLL_INVALID_HANDLE);
        for (size_t i = 0; i + 1 < n; ++i) hs[i] = cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal);
        hs[n - 1] = hs[1];  // the repeat
        const std::vector<cf_coll_handle_t> before = hs;
        const int rc = fn(hs.data(), n);
        log.expect(me,
                   rc == CF_ERR_BAD_ARG && hs == before &&
                       contains(cf_last_error(), cat("handles[", n - 1, "]: the same handle as handles[1]")),
                   [&] { return cat("n=", n, ": ", cf_strerror(rc), " (", cf_last_error(), ")"); });
        // Every handle is still live and syncs once.
        hs.pop_back();
        const int ok = cf_coll_wait_sync_all(hs.data(), hs.size());
        log.expect(me, ok == CF_OK, [&] { return cat("n=", n, ": the handles after the refused call: ", cf_strerror(ok)); });
      }
    }
    // Data still right afterwards.
    uint64_t value = me == 0 ? 77 : 0;
    const int rc = cf_coll_broadcast(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
    log.expect(me, rc == CF_OK && value == 77, [&] { return cat("broadcast after: ", cf_strerror(rc), " ", value); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * (4 * 2 * 2 + 1));
}

TEST_CASE("a handle is live only on the image thread that started it") {
  constexpr uint32_t P = 2;
  SUBCASE("on a thread with no live handle") {
    std::atomic<cf_coll_handle_t> published{CF_COLL_INVALID_HANDLE};
    Gate published_gate;
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      uint64_t value = 7;
      if (me == 0) {
        const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
        published = h;
        published_gate.open();
        log.expect(me, cf_coll_wait_sync(h) == CF_OK, [] { return "own wait_sync failed"; });
        return;
      }
      published_gate.wait();
      const int rc = cf_coll_try_sync(published.load());
      log.expect(me, rc == CF_ERR_BAD_ARG, [&] { return cat("try_sync of image 0's handle: ", cf_strerror(rc)); });
      log.expect(me, cf_coll_broadcast(CF_TEAM_ALL, &value, 0, nullptr, sizeof value, kAllLocal) == CF_OK,
                 [] { return "broadcast failed"; });
    });
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == 3);
  }
  SUBCASE("on a thread with a live handle of its own for the same collective") {
    std::atomic<cf_coll_handle_t> published{CF_COLL_INVALID_HANDLE};
    Gate published_gate;
    ImageLog log(P);
    cf_coll_handle_t seen[P] = {};
    const int status = run_images(P, [&](cf_image_t me) {
      uint64_t value = 7;
      const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &value, 0, &value, sizeof value, kAllLocal);
      seen[me] = h;
      if (me == 0) {
        published = h;
        published_gate.open();
      } else {
        published_gate.wait();
        const int rc = cf_coll_try_sync(published.load());
        log.expect(me, rc == CF_ERR_BAD_ARG, [&] {
          return cat("try_sync of image 0's handle ", published.load(), " gave ", cf_strerror(rc),
                     " (this image's own live handle is ", h, ")");
        });
      }
      const int own = cf_coll_wait_sync(h);
      log.expect(me, own == CF_OK, [&] {
        return cat("wait_sync of the image's own handle ", h, " gave ", cf_strerror(own), " (", cf_last_error(), ")");
      });
    });
    REQUIRE(status == CF_OK);
    INFO("handle values: image 0 got " << seen[0] << ", image 1 got " << seen[1]);
    log.report();
    CHECK(log.checks() == 3);
  }
}

TEST_CASE("try_sync reports CF_NOT_READY while the collective cannot finish and CF_OK once polled to completion") {
  constexpr uint32_t P = 2;
  const std::vector<uint8_t> want = pattern(30, 3000);
  Gate gate;
  ImageLog log(P);
  long polls = 0;
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> dst(3000), src = want;
    if (me == 1) gate.wait();
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst.data(), 1, src.data(), 3000, kAllLocal);
    if (me == 0) {
      const int first = cf_coll_try_sync(h);
      log.expect(me, first == CF_NOT_READY, [&] {
        return cat("try_sync before the root entered gave ", cf_strerror(first));
      });
      gate.open();
    }
    const int rc = poll_until_ready([&] { return cf_coll_try_sync(h); }, me == 0 ? &polls : nullptr);
    log.expect(me, rc == CF_OK, [&] { return cat("try_sync finally gave ", cf_strerror(rc)); });
    log.expect(me, dst == want, [] { return "wrong data"; });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 1 + P * 2);
  MESSAGE("image 0 polled try_sync " << polls << " times");
}

// ---- graph dump ---------------------------------------------------------------------

TEST_CASE("cf_graph_dump_json writes a carflow.graph/1 document for a live handle and rejects dead ones") {
  constexpr uint32_t P = 4;
  const std::string path = temp_path("carflow_api_handles_dump");
  ImageLog log(P);
  std::string written;
  const int status = run_images(P, [&](cf_image_t me) {
    cf_coll_set_algorithm(CF_KIND_BROADCAST, "binomial");
    std::vector<uint8_t> buffer(1000, static_cast<uint8_t>(me));
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, buffer.data(), 1, buffer.data(), 1000, kAllLocal);
    if (me == 0) {
      const int rc = cf_graph_dump_json(h, path.c_str());
      log.expect(me, rc == CF_OK, [&] { return cat("dump of a live handle: ", cf_strerror(rc), " ", cf_last_error()); });
      std::ifstream in(path);
      written.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      int bad = cf_graph_dump_json(h, nullptr);
      log.expect(me, bad == CF_ERR_BAD_ARG && contains(cf_last_error(), "path"),
                 [&] { return cat("NULL path: ", cf_strerror(bad), " (", cf_last_error(), ")"); });
      bad = cf_graph_dump_json(h, "/nonexistent-carflow-dir/graph.json");
      log.expect(me, bad == CF_ERR_BAD_ARG && contains(cf_last_error(), "path: /nonexistent-carflow-dir/graph.json: "),
                 [&] { return cat("unwritable path: ", cf_strerror(bad), " (", cf_last_error(), ")"); });
      const std::string dir = std::filesystem::path(path).parent_path().string();
      bad = cf_graph_dump_json(h, dir.c_str());
      log.expect(me, bad == CF_ERR_BAD_ARG && contains(cf_last_error(), "path: " + dir + ": is a directory"),
                 [&] { return cat("a directory: ", cf_strerror(bad), " (", cf_last_error(), ")"); });
    }
    log.expect(me, cf_coll_wait_sync(h) == CF_OK, [] { return "wait_sync failed"; });
    if (me == 0) {
      const int dead = cf_graph_dump_json(h, path.c_str());
      log.expect(me, dead == CF_ERR_BAD_ARG, [&] { return cat("dump of a synced handle: ", cf_strerror(dead)); });
    }
  });
  std::remove(path.c_str());
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P + 5);
  CHECK(contains(written, "carflow.graph/1"));
}

// ---- statistics: schedule cache and message counts ---------------------------------------

// Reads the node's statistics on image 0 while every image waits between two
// phases of `phase`: nothing is in flight, and the reading sends nothing.
cf_stats_t quiet_stats(cf_image_t me, std::barrier<>& phase) {
  cf_stats_t stats{};
  phase.arrive_and_wait();
  if (me == 0) cf_get_stats(&stats);
  phase.arrive_and_wait();
  return stats;
}

TEST_CASE("the schedule cache runs the generator once per image for repeated identical broadcasts, and again for a new size") {
  constexpr uint32_t P = 4;
  std::barrier<> phase(P);
  uint64_t built_first = 0, built_repeat = 0, built_new_size = 0, built_old_size = 0;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> buffer(1000, 1), other(3000, 1);
    auto broadcasts = [&](std::vector<uint8_t>& b, int times) {
      for (int i = 0; i < times; ++i) {
        log.expect(me, cf_coll_broadcast(CF_TEAM_ALL, b.data(), 2, b.data(), b.size(), kAllLocal) == CF_OK,
                   [&] { return cat("broadcast of ", b.size(), " bytes failed"); });
      }
    };
    const cf_stats_t s0 = quiet_stats(me, phase);
    broadcasts(buffer, 100);
    const cf_stats_t s1 = quiet_stats(me, phase);
    broadcasts(buffer, 100);
    const cf_stats_t s2 = quiet_stats(me, phase);
    broadcasts(other, 1);
    const cf_stats_t s3 = quiet_stats(me, phase);
    broadcasts(buffer, 1);
    const cf_stats_t s4 = quiet_stats(me, phase);
    if (me == 0) {
      built_first = s1.schedules_built - s0.schedules_built;
      built_repeat = s2.schedules_built - s1.schedules_built;
      built_new_size = s3.schedules_built - s2.schedules_built;
      built_old_size = s4.schedules_built - s3.schedules_built;
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(built_first == P);
  CHECK(built_repeat == 0);
  CHECK(built_new_size == P);
  CHECK(built_old_size == 0);
}

// Messages sent by all images while each image runs `collective` once.
template <typename Collective>
void count_messages(uint32_t P, Collective collective, uint64_t* messages, ImageLog& log) {
  std::barrier<> phase(P);
  const int status = run_images(P, [&](cf_image_t me) {
    const cf_stats_t before = quiet_stats(me, phase);
    const int rc = collective(me);
    log.expect(me, rc == CF_OK, [&] { return cat("collective failed: ", cf_strerror(rc), " ", cf_last_error()); });
    const cf_stats_t after = quiet_stats(me, phase);
    if (me == 0) *messages = after.messages - before.messages;
  });
  log.expect(0, status == CF_OK, [&] { return cat("cf_run_images: ", cf_strerror(status)); });
}

uint32_t ceil_log2(uint32_t P) {
  uint32_t k = 0;
  while ((1u << k) < P) ++k;
  return k;
}

TEST_CASE("binomial and flat broadcast on P images send exactly P-1 messages") {
  for (const char* algorithm : {"binomial", "flat"}) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 16u}) {
      for (size_t nbytes : {size_t{1}, size_t{4096}, size_t{65537}}) {
        for (uint32_t root : {0u, P - 1, P / 2}) {
          INFO("algorithm: " << std::string(algorithm));
          CAPTURE(P);
          CAPTURE(nbytes);
          CAPTURE(root);
          ImageLog log(P);
          uint64_t messages = 0;
          count_messages(P, [&](cf_image_t me) {
            cf_coll_set_algorithm(CF_KIND_BROADCAST, algorithm);
            std::vector<uint8_t> buffer(nbytes, 3);
            return cf_coll_broadcast(CF_TEAM_ALL, buffer.data(), root, buffer.data(), nbytes, kAllLocal);
          }, &messages, log);
          log.report();
          CHECK(messages == P - 1);
        }
      }
    }
  }
}

TEST_CASE("dissemination barrier on P images sends exactly P*ceil(log2 P) messages") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 16u}) {
    CAPTURE(P);
    ImageLog log(P);
    uint64_t messages = 0;
    count_messages(P, [&](cf_image_t) {
      cf_coll_set_algorithm(CF_KIND_BARRIER, "dissemination");
      return cf_coll_barrier(CF_TEAM_ALL, kAllLocal);
    }, &messages, log);
    log.report();
    CHECK(messages == uint64_t{P} * ceil_log2(P));
  }
}

// P = P' + r with P' the largest power of two <= P: P' log2 P' in the core
// exchange plus one message each way per folded pair (2r).
TEST_CASE("recursive doubling allreduce sends P*log2(P) messages on powers of two (24 on P=8), 2 more per folded image otherwise") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u, 16u}) {
    for (size_t count : {size_t{1}, size_t{1000}}) {
      CAPTURE(P);
      CAPTURE(count);
      const uint32_t pof2 = 1u << (ceil_log2(P + 1) - 1);
      const uint64_t expected = uint64_t{pof2} * ceil_log2(pof2) + 2 * (P - pof2);
      if (P == 8) REQUIRE(expected == 24);
      ImageLog log(P);
      uint64_t messages = 0;
      count_messages(P, [&](cf_image_t me) {
        cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "recursive_doubling");
        std::vector<double> src(count, me), dst(count);
        return cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), sizeof(double), count,
                                 CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE), 0, kAllLocal);
      }, &messages, log);
      log.report();
      CHECK(messages == expected);
    }
  }
}

}  // namespace
