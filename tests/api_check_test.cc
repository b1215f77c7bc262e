// CF_CHECK=1 (tests/BUILD sets it): images check that their single-valued
// arguments agree (GASNet collectives notes v1.7, "Argument conventions"; engine/arg_check.h).
// Checked here: a disagreement in each of nbytes, root, flags, op, counts
// (a v form) and the algorithm (each image naming its choice), and in one
// member of an aggregate, fails the collective with
// CF_ERR_MISMATCH on every image, with cf_last_error naming the argument;
// no destination buffer is touched; nothing hangs (blocking calls return);
// the team works afterwards; and agreeing calls still deliver the data a
// sequential reference computes.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <functional>
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

const int kSumI64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
const int kMaxI64 = CF_BUILTIN(CF_OP_MAX, CF_DT_INT64);
constexpr uint8_t kUntouched = 0xAB;
constexpr size_t kDstBytes = 1 << 17;  // room for every call below

// One image's part of a collective under test: `odd` is true on the one
// image that passes a different value; `dst` (kDstBytes, filled with
// kUntouched) is the image's destination. Returns the call's status.
using CallFn = std::function<int(cf_image_t me, bool odd, uint8_t* dst)>;

// The team must still work after a failed collective: an allreduce checked
// against its sum.
void expect_team_works(ImageLog& log, cf_image_t me, uint32_t P) {
  int64_t mine = me + 1, sum = 0;
  const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumI64, 0, kAllLocal);
  log.expect(me, rc == CF_OK && sum == int64_t{P} * (P + 1) / 2, [&] {
    return cat("allreduce after the mismatch: ", cf_strerror(rc), " sum ", sum, " ", cf_last_error());
  });
}

// Runs `call` on P images with image `odd_image` disagreeing, and checks
// that every image fails with CF_ERR_MISMATCH naming `argument`, that no
// destination byte changed, and that the team still works.
void expect_mismatch(const char* argument, uint32_t P, uint32_t odd_image, const CallFn& call) {
  CAPTURE(argument);
  CAPTURE(P);
  CAPTURE(odd_image);
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> dst(kDstBytes, kUntouched);
    for (int round = 0; round < 2; ++round) {  // the second finds its schedules cached
      const int rc = call(me, me == odd_image, dst.data());
      const std::string error = cf_last_error();
      log.expect(me, rc == CF_ERR_MISMATCH, [&] {
        return cat("round ", round, ": expected CF_ERR_MISMATCH, got ", cf_strerror(rc), " (", error, ")");
      });
      const std::string named = cat("CF_CHECK: argument ", argument, " differs between images: image ");
      log.expect(me, contains(error, named), [&] {
        return cat("round ", round, ": the error should contain '", named, "': '", error, "'");
      });
      size_t changed = 0;
      for (uint8_t b : dst) changed += b != kUntouched;
      log.expect(me, changed == 0, [&] { return cat("round ", round, ": ", changed, " destination bytes changed"); });
      expect_team_works(log, me, P);
    }
  });
  CHECK(status == CF_OK);
  log.report();
}

// Every image count, with the odd image first, last and in the middle.
void for_each_case(const std::function<void(uint32_t P, uint32_t odd)>& body) {
  for (uint32_t P : {2u, 3u, 5u, 8u}) {
    for (uint32_t odd : {0u, P - 1, P / 2}) body(P, odd);
  }
}

TEST_CASE("CF_CHECK: a broadcast whose nbytes differs on one image fails everywhere naming nbytes") {
  static std::vector<uint8_t> src = pattern(1, kDstBytes);
  for (size_t other : {size_t{16}, size_t{100000}}) {  // the same algorithm, and a different one
    CAPTURE(other);
    for_each_case([&](uint32_t P, uint32_t odd) {
      expect_mismatch("nbytes", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
        return cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src.data(), is_odd ? other : 8, kAllLocal);
      });
    });
  }
}

TEST_CASE("CF_CHECK: a broadcast whose root differs on one image fails everywhere naming root") {
  static std::vector<uint8_t> src = pattern(2, 64);
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("root", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
      return cf_coll_broadcast(CF_TEAM_ALL, dst, is_odd ? P - 1 : 0, src.data(), 64, kAllLocal);
    });
  });
}

TEST_CASE("CF_CHECK: a gather whose sync flags differ on one image fails everywhere naming flags") {
  static std::vector<uint8_t> src = pattern(3, 64);
  const int all_sync = CF_COLL_IN_MYSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("flags", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
      return cf_coll_gather(CF_TEAM_ALL, 0, dst, src.data(), 64, is_odd ? all_sync : kAllLocal);
    });
  });
}

TEST_CASE("CF_CHECK: an allreduce whose op differs on one image fails everywhere naming op") {
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("op", P, odd, [&](cf_image_t me, bool is_odd, uint8_t* dst) {
      int64_t mine[4] = {me, 2 * me, 3, -int64_t{me}};
      return cf_coll_allreduce(CF_TEAM_ALL, dst, mine, 8, 4, is_odd ? kMaxI64 : kSumI64, 0, kAllLocal);
    });
  });
}

TEST_CASE("CF_CHECK: an allreduce whose func_arg differs on one image fails everywhere naming op") {
  expect_mismatch("op", 4, 2, [&](cf_image_t me, bool is_odd, uint8_t* dst) {
    int64_t mine = me;
    return cf_coll_allreduce(CF_TEAM_ALL, dst, &mine, 8, 1, kSumI64, is_odd ? 1 : 0, kAllLocal);
  });
}

TEST_CASE("CF_CHECK: a gather_allv whose counts differ on one image fails everywhere naming counts") {
  static std::vector<uint8_t> src = pattern(4, 64);
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("counts", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
      std::vector<size_t> counts(P, 8);
      if (is_odd) counts[0] = 16;
      return cf_coll_gather_allv(CF_TEAM_ALL, dst, src.data(), counts.data(), nullptr, kAllLocal);
    });
  });
}

// The broadcast algorithm each image forces: the odd image's is flat.
const char* algorithm_of(bool odd) { return odd ? "flat" : "binomial"; }

// expect_mismatch("algorithm") with each image's broadcasts (`call`) under
// algorithm_of(odd); returns what cf_last_error() said on each image.
std::vector<std::string> expect_algorithm_mismatch(uint32_t P, uint32_t odd,
                                                   const std::function<int(uint8_t* dst)>& call) {
  std::vector<std::string> said(P);
  expect_mismatch("algorithm", P, odd, [&](cf_image_t me, bool is_odd, uint8_t* dst) {
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, algorithm_of(is_odd));
    if (rc == CF_OK) rc = call(dst);
    said[me] = cf_last_error();
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
    return rc;
  });
  return said;
}

TEST_CASE("CF_CHECK: images that chose different algorithms fail everywhere naming algorithm and their choices") {
  static std::vector<uint8_t> src = pattern(6, 64);
  for_each_case([&](uint32_t P, uint32_t odd) {
    const std::vector<std::string> said = expect_algorithm_mismatch(
        P, odd, [&](uint8_t* dst) { return cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src.data(), 64, kAllLocal); });
    // Every image names its own choice and what to compare; the image that
    // found the difference first names the other's choice too.
    size_t both = 0;
    for (uint32_t me = 0; me < P; ++me) {
      INFO("P=", P, " odd=", odd, " image ", me, ": ", said[me]);
      CHECK(contains(said[me], cat("this image (", me, ") chose '", algorithm_of(me == odd), "' for this broadcast")));
      CHECK(contains(said[me], "the registered generators (CF_PLUGINS, cf_generator_register) or the "
                               "CF_ALGO_BROADCAST / cf_coll_set_algorithm choices differ"));
      both += contains(said[me], "chose 'binomial'") && contains(said[me], "chose 'flat'");
      CHECK_FALSE(contains(said[me], "not registered"));  // one process: every name is known
    }
    INFO("P=", P, " odd=", odd);
    CHECK(both >= 1);
  });
}

TEST_CASE("CF_CHECK: an aggregate with one disagreeing member fails everywhere naming the argument") {
  static std::vector<uint8_t> src = pattern(5, 256);
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("nbytes", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
      // Three broadcasts into separate parts of dst; the middle one differs.
      const cf_coll_handle_t none = cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src.data(), 64,
                                                         kAllLocal | CF_COLL_AGGREGATE);
      if (none != CF_COLL_INVALID_HANDLE || cf_last_status() != CF_OK) return -100;
      cf_coll_broadcast_nb(CF_TEAM_ALL, dst + 1024, P - 1, src.data(), is_odd ? 32 : 64,
                           kAllLocal | CF_COLL_AGGREGATE);
      if (cf_last_status() != CF_OK) return -101;
      const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst + 2048, 0, src.data(), 8, kAllLocal);
      if (h == CF_COLL_INVALID_HANDLE) return -102;
      return cf_coll_wait_sync(h);
    });
  });
}

TEST_CASE("CF_CHECK: an aggregate whose algorithm differs on one image fails everywhere naming its members' choice") {
  static std::vector<uint8_t> src = pattern(7, 256);
  for_each_case([&](uint32_t P, uint32_t odd) {
    const std::vector<std::string> said = expect_algorithm_mismatch(P, odd, [&](uint8_t* dst) {
      cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src.data(), 64, kAllLocal | CF_COLL_AGGREGATE);
      if (cf_last_status() != CF_OK) return cf_last_status();
      const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst + 1024, P - 1, src.data(), 64, kAllLocal);
      return h == CF_COLL_INVALID_HANDLE ? cf_last_status() : cf_coll_wait_sync(h);
    });
    for (uint32_t me = 0; me < P; ++me) {
      INFO("P=", P, " odd=", odd, " image ", me, ": ", said[me]);
      CHECK(contains(said[me], cat("for a member of an aggregate: this image (", me, ") chose '",
                                   algorithm_of(me == odd), "'; the registered generators")));
    }
  });
}

TEST_CASE("CF_CHECK: an aggregate whose last call disagrees fails everywhere, also when it repeats") {
  // expect_mismatch's second round repeats the aggregate: its last call then
  // starts the team's last merged schedule directly, binding its digest there.
  // A scan, not an allreduce: expect_team_works's allreduce would replace
  // the allreduce memo between the rounds.
  static std::vector<int64_t> src(32, 7);
  for_each_case([&](uint32_t P, uint32_t odd) {
    expect_mismatch("nbytes", P, odd, [&](cf_image_t, bool is_odd, uint8_t* dst) {
      cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src.data(), 64, kAllLocal | CF_COLL_AGGREGATE);
      if (cf_last_status() != CF_OK) return -100;
      const cf_coll_handle_t h =
          cf_coll_scan_nb(CF_TEAM_ALL, dst + 1024, src.data(), 8, is_odd ? 2 : 4, kSumI64, 0, kAllLocal);
      if (h == CF_COLL_INVALID_HANDLE) return -101;
      return cf_coll_wait_sync(h);
    });
  });
}

TEST_CASE("CF_CHECK: non-blocking mismatched calls fail at sync, and the next agreeing call delivers") {
  const uint32_t P = 5;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    std::vector<uint8_t> dst(64, kUntouched), src = pattern(6, 64);
    const cf_coll_handle_t bad =
        cf_coll_broadcast_nb(CF_TEAM_ALL, dst.data(), me == 3 ? 2 : 1, src.data(), 64, kAllLocal);
    int rc = cf_coll_wait_sync(bad);
    log.expect(me, rc == CF_ERR_MISMATCH && contains(cf_last_error(), "argument root"),
               [&] { return cat("bad broadcast: ", cf_strerror(rc), " ", cf_last_error()); });
    rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 1, src.data(), 64, kAllLocal);
    log.expect(me, rc == CF_OK && dst == src,
               [&] { return cat("good broadcast: ", cf_strerror(rc), " ", cf_last_error()); });
  });
  CHECK(status == CF_OK);
  log.report();
}

TEST_CASE("CF_CHECK: agreeing arguments deliver what a sequential reference computes") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
    CAPTURE(P);
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      for (size_t nbytes : {size_t{8}, size_t{1000}, size_t{100000}}) {
        const cf_image_t root = static_cast<cf_image_t>(nbytes % P);
        std::vector<uint8_t> src = pattern(root + nbytes, nbytes), dst(nbytes, 0);
        const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), root, src.data(), nbytes, kAllLocal);
        log.expect(me, rc == CF_OK && dst == src,
                   [&] { return cat("broadcast ", nbytes, ": ", cf_strerror(rc), " ", cf_last_error()); });
      }
      for (size_t n : {size_t{1}, size_t{300}}) {
        std::vector<int64_t> mine(n), sum(n, 0), want(n, 0);
        for (size_t j = 0; j < n; ++j) {
          mine[j] = static_cast<int64_t>(me * 1000 + j);
          for (uint32_t r = 0; r < P; ++r) want[j] += static_cast<int64_t>(r * 1000 + j);
        }
        const int rc = cf_coll_allreduce(CF_TEAM_ALL, sum.data(), mine.data(), 8, n, kSumI64, 0, kAllLocal);
        log.expect(me, rc == CF_OK && sum == want,
                   [&] { return cat("allreduce ", n, ": ", cf_strerror(rc), " ", cf_last_error()); });
      }
      std::vector<size_t> counts(P);
      size_t total = 0;
      for (uint32_t r = 0; r < P; ++r) total += counts[r] = 8 * (r + 1);
      std::vector<uint8_t> mine = pattern(100 + me, counts[me]), all(total, 0), want;
      for (uint32_t r = 0; r < P; ++r) {
        const std::vector<uint8_t> block = pattern(100 + r, counts[r]);
        want.insert(want.end(), block.begin(), block.end());
      }
      const int rc = cf_coll_gather_allv(CF_TEAM_ALL, all.data(), mine.data(), counts.data(), nullptr,
                                         (kAllLocal & ~CF_COLL_OUT_MYSYNC) | CF_COLL_OUT_ALLSYNC);
      log.expect(me, rc == CF_OK && all == want,
                 [&] { return cat("gather_allv: ", cf_strerror(rc), " ", cf_last_error()); });
    });
    CHECK(status == CF_OK);
    log.report();
  }
}

TEST_CASE("CF_CHECK is on in this suite (tests/BUILD)") {
  const char* check = std::getenv("CF_CHECK");
  REQUIRE(check != nullptr);
  CHECK(std::string(check) == "1");
}

}  // namespace
