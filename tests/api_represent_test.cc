// The representative-thread mode (GASNet collectives notes v1.7, "Collectives and threads"):
// without CF_COLL_ALL_THREADS, one thread per node calls an m form for all
// the images of its node. With CF_COLL_LOCAL the lists hold this node's
// images (in team rank order); with CF_COLL_SINGLE they hold every image of
// the team. Here one process holds every image, so the one representative
// calls for all of them while the other image threads make no call.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::pattern;
using carflow_test::run_images;

constexpr int kRepLocal = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL;
constexpr int kRepSingle = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE;
const int kSumI64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);

std::vector<void*> pointers(std::vector<std::vector<uint8_t>>& buffers) {
  std::vector<void*> list;
  for (auto& b : buffers) list.push_back(b.data());
  return list;
}

TEST_CASE("one thread calls broadcastm, scatterm, gatherm, gather_allm and exchangem for every image") {
  constexpr size_t kBlock = 56;
  for (uint32_t P : {2u, 3u, 5u}) {
    for (const int flags : {kRepLocal, kRepSingle}) {
      CAPTURE(P);
      CAPTURE(flags);
      ImageLog log(P);
      const uint32_t root = P - 1;
      const int status = run_images(P, [&](cf_image_t me) {
        if (me != 1 % P) return;  // the representative; the others make no call
        std::vector<std::vector<uint8_t>> bdst(P, std::vector<uint8_t>(kBlock, 0));
        std::vector<std::vector<uint8_t>> sdst(P, std::vector<uint8_t>(kBlock, 0));
        std::vector<std::vector<uint8_t>> gsrc, asrc, adst(P, std::vector<uint8_t>(P * kBlock, 0));
        std::vector<std::vector<uint8_t>> xsrc, xdst(P, std::vector<uint8_t>(P * kBlock, 0));
        for (uint32_t i = 0; i < P; ++i) {
          gsrc.push_back(pattern(100 + i, kBlock));
          asrc.push_back(pattern(200 + i, kBlock));
          xsrc.push_back(pattern(300 + i, P * kBlock));
        }
        std::vector<uint8_t> bsrc = pattern(7, kBlock), ssrc = pattern(8, P * kBlock), gdst(P * kBlock, 0);
        const auto b = pointers(bdst), s = pointers(sdst), g = pointers(gsrc), as = pointers(asrc),
                   ad = pointers(adst), xs = pointers(xsrc), xd = pointers(xdst);
        cf_coll_handle_t h[5] = {
            cf_coll_broadcastm_nb(CF_TEAM_ALL, b.data(), root, bsrc.data(), kBlock, flags),
            cf_coll_scatterm_nb(CF_TEAM_ALL, s.data(), root, ssrc.data(), kBlock, flags),
            cf_coll_gatherm_nb(CF_TEAM_ALL, root, gdst.data(), g.data(), kBlock, flags),
            cf_coll_gather_allm_nb(CF_TEAM_ALL, ad.data(), as.data(), kBlock, flags),
            cf_coll_exchangem_nb(CF_TEAM_ALL, xd.data(), xs.data(), kBlock, flags)};
        for (int k = 0; k < 5; ++k) {
          log.expect(me, h[k] != CF_COLL_INVALID_HANDLE, [&] { return cat("call ", k, ": ", cf_last_error()); });
        }
        const int rc = cf_coll_wait_sync_all(h, 5);
        log.expect(me, rc == CF_OK, [&] { return cat("wait_sync_all: ", cf_strerror(rc), " ", cf_last_error()); });
        for (uint32_t i = 0; i < P; ++i) {
          log.expect(me, bdst[i] == bsrc, [&] { return cat("broadcastm: image ", i); });
          log.expect(me, std::memcmp(sdst[i].data(), ssrc.data() + i * kBlock, kBlock) == 0,
                     [&] { return cat("scatterm: image ", i); });
          log.expect(me, std::memcmp(gdst.data() + i * kBlock, gsrc[i].data(), kBlock) == 0,
                     [&] { return cat("gatherm: block ", i); });
          for (uint32_t j = 0; j < P; ++j) {
            log.expect(me, std::memcmp(adst[i].data() + j * kBlock, asrc[j].data(), kBlock) == 0,
                       [&] { return cat("gather_allm: image ", i, " block ", j); });
            log.expect(me, std::memcmp(xdst[i].data() + j * kBlock, xsrc[j].data() + i * kBlock, kBlock) == 0,
                       [&] { return cat("exchangem: image ", i, " block from ", j); });
          }
        }
      });
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == 5 + 1 + P * 3 + P * P * 2);
    }
  }
}

TEST_CASE("representative reducem and prefix_reducem, then every image thread calls again in step") {
  constexpr size_t kElems = 24;
  constexpr uint32_t P = 4;
  ImageLog log(P);
  std::vector<int64_t> after(P, 0);
  // The GASNet notes: a representative's initiation may not be concurrent with any
  // other initiation on the node; the other threads wait until it is made.
  std::atomic<bool> initiated{false};
  const int status = run_images(P, [&](cf_image_t me) {
    if (me != 0) initiated.wait(false);
    if (me == 0) {
      // Block-cyclic blocks of 3 elements over 4 images: image i holds
      // blocks i, i+4, ...; each image's local array is 2 blocks.
      std::vector<std::vector<int64_t>> src(P, std::vector<int64_t>(6)), dst(P, std::vector<int64_t>(6, 0));
      std::vector<int64_t> global(kElems);
      for (size_t e = 0; e < kElems; ++e) {
        global[e] = static_cast<int64_t>(e * e) - 7;
        const size_t block = e / 3, owner = block % P, local = (block / P) * 3 + e % 3;
        src[owner][local] = global[e];
      }
      std::vector<void*> s, d;
      for (uint32_t i = 0; i < P; ++i) {
        s.push_back(src[i].data());
        d.push_back(dst[i].data());
      }
      int64_t total = 0;
      cf_coll_handle_t h[2] = {
          cf_coll_reducem_nb(CF_TEAM_ALL, 2, &total, s.data(), 3, 0, 8, kElems, kSumI64, 0, kRepLocal),
          cf_coll_prefix_reducem_nb(CF_TEAM_ALL, d.data(), 3, 0, s.data(), 3, 0, 8, kElems, kSumI64, 0,
                                    kRepLocal)};
      initiated.store(true);
      initiated.notify_all();
      const int rc = cf_coll_wait_sync_all(h, 2);
      log.expect(me, rc == CF_OK, [&] { return cat("wait_sync_all: ", cf_strerror(rc), " ", cf_last_error()); });
      int64_t want = 0;
      for (size_t e = 0; e < kElems; ++e) {
        want += global[e];
        const size_t block = e / 3, owner = block % P, local = (block / P) * 3 + e % 3;
        log.expect(me, dst[owner][local] == want,
                   [&] { return cat("prefix element ", e, " = ", dst[owner][local], ", want ", want); });
      }
      log.expect(me, total == want, [&] { return cat("reducem = ", total, ", want ", want); });
    }
    // The representative's call numbered the collective for every image of
    // the node, so a call by all image threads now matches up.
    int64_t mine = me + 1, sum = 0;
    const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumI64, 0, kAllLocal);
    log.expect(me, rc == CF_OK, [&] { return cat("allreduce after: ", cf_last_error()); });
    after[me] = sum;
  });
  REQUIRE(status == CF_OK);
  log.report();
  for (uint32_t i = 0; i < P; ++i) CHECK(after[i] == 10);
}

TEST_CASE("the GASNet notes' rules between LOCAL, SINGLE, ALL_THREADS and the m forms are clear errors") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    if (me != 0) return;
    uint64_t value = 5, out[P] = {};
    void* list[P] = {&out[0], &out[1], &out[2]};
    auto expect_error = [&](cf_coll_handle_t h, const char* what, const char* part) {
      const std::string text = cf_last_error();
      log.expect(me, h == CF_COLL_INVALID_HANDLE && cf_last_status() == CF_ERR_BAD_ARG && contains(text, part),
                 [&] { return cat(what, ": got \"", text, "\", want CF_ERR_BAD_ARG naming ", part); });
    };
    expect_error(cf_coll_broadcast_nb(CF_TEAM_ALL, &out[0], 0, &value, 8, kRepLocal),
                 "a single-address call with LOCAL, no ALL_THREADS, several images", "m form");
    expect_error(cf_coll_broadcastm_nb(CF_TEAM_ALL, list, 0, &value, 8, kRepLocal | CF_COLL_ALL_THREADS),
                 "an m form with LOCAL | ALL_THREADS", "not permitted");
    list[2] = nullptr;
    expect_error(cf_coll_broadcastm_nb(CF_TEAM_ALL, list, 0, &value, 8, kRepLocal),
                 "a NULL entry in a representative's list", "dstlist");
    list[2] = &out[2];
    expect_error(cf_coll_broadcastm_nb(CF_TEAM_ALL, list, 0, &value, 8, kRepLocal | CF_COLL_AGGREGATE),
                 "AGGREGATE in the representative mode", "representative");
    // Nothing started: a good call works.
    const int rc = cf_coll_broadcastm(CF_TEAM_ALL, list, 0, &value, 8, kRepLocal);
    log.expect(me, rc == CF_OK && out[0] == 5 && out[1] == 5 && out[2] == 5,
               [&] { return cat("broadcastm after the errors: ", cf_strerror(rc), " ", cf_last_error()); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 5);
}

}  // namespace
