// Argument checking through the public C API, in CF_ERRORS_RETURN mode (set
// by api_main.cc). The header's contract: a bad argument gives CF_ERR_BAD_ARG
// (blocking form) or CF_COLL_INVALID_HANDLE with cf_last_status() negative
// (_nb form), cf_last_error() names the argument, and "a failed call changes
// nothing: no collective starts, no handle dies".
//
// Every bad call is made identically on every image (or, for arguments that
// only the root checks, on the root alone), then all images run a valid
// broadcast: if the rejected call had started anything, sequence numbers would
// disagree and that broadcast would deliver wrong data or hang.
#include <doctest/doctest.h>

#include <climits>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <functional>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::pattern;
using carflow_test::run_images;


// ---- the calls and their valid arguments ---------------------------------------------

struct Buffers {
  alignas(64) unsigned char dst[512];
  alignas(64) unsigned char src[512];
};

constexpr int kUnknownFlag = 1 << 20;
const cf_team_t kNoSuchTeam = reinterpret_cast<cf_team_t>(uintptr_t{1});

struct BroadcastArgs {
  cf_team_t team;
  void* dst;
  cf_image_t srcimage;
  void* src;
  size_t nbytes;
  int flags;
  static BroadcastArgs valid(Buffers& b) { return {CF_TEAM_ALL, b.dst, 0, b.src, 64, kAllLocal}; }
  cf_coll_handle_t start() const { return cf_coll_broadcast_nb(team, dst, srcimage, src, nbytes, flags); }
  int run() const { return cf_coll_broadcast(team, dst, srcimage, src, nbytes, flags); }
};

struct AllreduceArgs {
  cf_team_t team;
  void* dst;
  const void* src;
  size_t elem_size, elem_count;
  int func, func_arg, flags;
  static AllreduceArgs valid(Buffers& b) {
    return {CF_TEAM_ALL, b.dst, b.src, sizeof(double), 4, CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE), 0, kAllLocal};
  }
  cf_coll_handle_t start() const {
    return cf_coll_allreduce_nb(team, dst, src, elem_size, elem_count, func, func_arg, flags);
  }
  int run() const { return cf_coll_allreduce(team, dst, src, elem_size, elem_count, func, func_arg, flags); }
};

struct BarrierArgs {
  cf_team_t team;
  int flags;
  static BarrierArgs valid(Buffers&) { return {CF_TEAM_ALL, kAllLocal}; }
  cf_coll_handle_t start() const { return cf_coll_barrier_nb(team, flags); }
  int run() const { return cf_coll_barrier(team, flags); }
};

// One way of getting a call wrong.
template <typename Args>
struct BadCall {
  std::string what;      // the mistake
  std::string argument;  // what cf_last_error() must name
  std::function<void(Args&, uint32_t P)> spoil;
  uint32_t min_images = 1;  // the rule applies only with this many images
  bool root_only = false;   // only the root checks it, so only the root (image 0) calls
  bool blocking_only = false;  // a mistake only on the blocking form
};

// Flag mistakes apply alike to every collective.
template <typename Args>
std::vector<BadCall<Args>> flag_mistakes() {
  return {
      {"no IN_* flag", "flags", [](Args& a, uint32_t) { a.flags &= ~CF_COLL_IN_MYSYNC; }},
      {"two IN_* flags", "flags", [](Args& a, uint32_t) { a.flags |= CF_COLL_IN_ALLSYNC; }},
      {"no OUT_* flag", "flags", [](Args& a, uint32_t) { a.flags &= ~CF_COLL_OUT_MYSYNC; }},
      {"two OUT_* flags", "flags", [](Args& a, uint32_t) { a.flags |= CF_COLL_OUT_NOSYNC; }},
      {"neither SINGLE nor LOCAL", "flags", [](Args& a, uint32_t) { a.flags &= ~CF_COLL_LOCAL; }},
      {"both SINGLE and LOCAL", "flags", [](Args& a, uint32_t) { a.flags |= CF_COLL_SINGLE; }},
      {"an unknown flag bit (1 << 20)", "flags", [](Args& a, uint32_t) { a.flags |= kUnknownFlag; }},
      {"CF_COLL_AGGREGATE on a blocking call", "flags", [](Args& a, uint32_t) { a.flags |= CF_COLL_AGGREGATE; },
       1, false, true},
      {"no ALL_THREADS with several images", "flags",
       [](Args& a, uint32_t) { a.flags &= ~CF_COLL_ALL_THREADS; }, 2},
      {"SINGLE with several images", "flags",
       [](Args& a, uint32_t) { a.flags = (a.flags & ~CF_COLL_LOCAL) | CF_COLL_SINGLE; }, 2},
      {"a team other than CF_TEAM_ALL", "team", [](Args& a, uint32_t) { a.team = kNoSuchTeam; }},
  };
}

std::vector<BadCall<BroadcastArgs>> broadcast_mistakes() {
  std::vector<BadCall<BroadcastArgs>> cases = flag_mistakes<BroadcastArgs>();
  using A = BroadcastArgs;
  const std::vector<BadCall<A>> own = {
      {"NULL dst", "dst", [](A& a, uint32_t) { a.dst = nullptr; }},
      {"nbytes 0", "nbytes", [](A& a, uint32_t) { a.nbytes = 0; }},
      // Huge sizes: every image refuses (they hung, or wrapped the overlap test).
      {"nbytes 2^48", "nbytes: 281474976710656 is not below 2^48", [](A& a, uint32_t) { a.nbytes = size_t{1} << 48; }},
      {"nbytes SIZE_MAX", "nbytes", [](A& a, uint32_t) { a.nbytes = SIZE_MAX; }},
      {"srcimage == P", "srcimage", [](A& a, uint32_t P) { a.srcimage = P; }},
      {"srcimage == UINT32_MAX", "srcimage", [](A& a, uint32_t) { a.srcimage = UINT32_MAX; }},
      {"NULL src on the root", "src", [](A& a, uint32_t) { a.src = nullptr; }, 1, true},
      {"src = dst + 1 on the root (overlapping, not identical)", "overlap",
       [](A& a, uint32_t) { a.src = static_cast<unsigned char*>(a.dst) + 1; }, 1, true},
      {"dst = src + 63 on the root (overlapping, not identical)", "overlap",
       [](A& a, uint32_t) { a.dst = static_cast<unsigned char*>(a.src) + 63; }, 1, true},
  };
  cases.insert(cases.end(), own.begin(), own.end());
  return cases;
}

// fn_tbl of the allreduce runs: [0] commutative, [1] CF_COLL_NONCOMM.
void int64_max(void* results, size_t, const void* left, size_t, const void* right, size_t, int, int) {
  int64_t l, r;
  std::memcpy(&l, left, 8);
  std::memcpy(&r, right, 8);
  const int64_t out = l > r ? l : r;
  std::memcpy(results, &out, 8);
}
void int64_keep_left(void* results, size_t, const void* left, size_t, const void*, size_t, int, int) {
  std::memcpy(results, left, 8);
}
const cf_coll_fn_entry_t kFunctions[] = {
    {reinterpret_cast<cf_coll_fn_t>(&int64_max), 0},
    {reinterpret_cast<cf_coll_fn_t>(&int64_keep_left), CF_COLL_NONCOMM},
};

std::vector<BadCall<AllreduceArgs>> allreduce_mistakes() {
  std::vector<BadCall<AllreduceArgs>> cases = flag_mistakes<AllreduceArgs>();
  using A = AllreduceArgs;
  auto bytes = [](const void* p, ptrdiff_t offset) { return static_cast<const unsigned char*>(p) + offset; };
  const std::vector<BadCall<A>> own = {
      {"NULL dst", "dst", [](A& a, uint32_t) { a.dst = nullptr; }},
      {"NULL src", "src", [](A& a, uint32_t) { a.src = nullptr; }},
      {"elem_size 0", "elem_size", [](A& a, uint32_t) { a.elem_size = 0; }},
      // Above 32 bits it used to be cut to its low 32 bits (2^32 + 8 ran as 8).
      {"elem_size 2^32 + 8", "elem_size: must be at least 1 and below 2^32",
       [](A& a, uint32_t) { a.elem_size = (size_t{1} << 32) + 8, a.elem_count = 1; }},
      {"elem_count 0", "elem_count", [](A& a, uint32_t) { a.elem_count = 0; }},
      {"elem_size * elem_count overflowing", "elem_count", [](A& a, uint32_t) { a.elem_count = SIZE_MAX / 4; }},
      {"CF_OP_BAND on CF_DT_FLOAT", "func",
       [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_BAND, CF_DT_FLOAT), a.elem_size = 4; }},
      {"CF_OP_BXOR on CF_DT_DOUBLE", "func", [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_BXOR, CF_DT_DOUBLE); }},
      {"elem_size 4 for CF_DT_INT64", "elem_size",
       [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64), a.elem_size = 4; }},
      {"elem_size 4 for CF_OP_MINLOC on CF_DT_INT32 (a pair is 8)", "elem_size",
       [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_MINLOC, CF_DT_INT32), a.elem_size = 4; }},
      {"an op code past CF_OP_MAXLOC", "func",
       [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_MAXLOC + 1, CF_DT_INT8), a.elem_size = 1; }},
      {"a type code past CF_DT_DOUBLE", "func", [](A& a, uint32_t) { a.func = CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE + 1); }},
      {"func index == table size", "func", [](A& a, uint32_t) { a.func = 2; }},
      {"func index far past the table", "func", [](A& a, uint32_t) { a.func = 1000; }},
      {"double src misaligned by 1", "src", [bytes](A& a, uint32_t) { a.src = bytes(a.src, 1); }},
      {"double src misaligned by 4", "src", [bytes](A& a, uint32_t) { a.src = bytes(a.src, 4); }},
      {"double dst misaligned by 4", "dst",
       [](A& a, uint32_t) { a.dst = static_cast<unsigned char*>(a.dst) + 4; }},
      {"src overlapping dst", "overlap", [](A& a, uint32_t) { a.src = static_cast<unsigned char*>(a.dst) + 8; }},
      {"a CF_COLL_NONCOMM function with the ring algorithm forced", "func",
       [](A& a, uint32_t) {
         cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "ring");
         a.func = 1;
         a.elem_size = sizeof(int64_t);
       }},
  };
  cases.insert(cases.end(), own.begin(), own.end());
  return cases;
}

std::vector<BadCall<BarrierArgs>> barrier_mistakes() { return flag_mistakes<BarrierArgs>(); }

// ---- the runner ------------------------------------------------------------------------

// Makes every bad call of `cases` in both forms on P images; `rejections`
// gets the checks of the rejections, `afterwards` those of the valid broadcast
// that follows each of them.
// warm: every image first makes the valid call in the same form, so the
// bad one reaches the API's memo of it (api/api_internal.h, memo_hit): a call
// equal to the last one apart from its addresses skips the argument
// checks but not the address checks.
template <typename Args>
void run_bad_calls(uint32_t P, const std::vector<BadCall<Args>>& cases, ImageLog& rejections,
                   ImageLog& afterwards, bool warm = false) {
  const int status = run_images(
      P,
      [&](cf_image_t me) {
        Buffers buffers;
        std::memset(&buffers, 0, sizeof buffers);
        for (size_t i = 0; i < cases.size(); ++i) {
          const BadCall<Args>& c = cases[i];
          if (P < c.min_images) continue;
          for (const bool blocking : {false, true}) {
            if (c.blocking_only && !blocking) continue;
            auto params = [&] {
              return cat(c.what, blocking ? " (blocking form)" : " (_nb form)", warm ? ", after a valid call" : "");
            };
            if (warm) {
              const Args valid = Args::valid(buffers);
              const int rc = blocking ? valid.run() : cf_coll_wait_sync(valid.start());
              rejections.expect(me, rc == CF_OK, [&] { return cat(params(), ": the valid call: ", cf_last_error()); });
            }
            if (!c.root_only || me == 0) {
              Args args = Args::valid(buffers);
              c.spoil(args, P);
              if (blocking) {
                const int rc = args.run();
                rejections.expect(me, rc == CF_ERR_BAD_ARG && cf_last_status() == CF_ERR_BAD_ARG, [&] {
                  return cat(params(), ": returned ", cf_strerror(rc), ", last status ",
                             cf_strerror(cf_last_status()));
                });
              } else {
                const cf_coll_handle_t h = args.start();
                const int last = cf_last_status();
                rejections.expect(me, h == CF_COLL_INVALID_HANDLE && last == CF_ERR_BAD_ARG, [&] {
                  return cat(params(), ": returned handle ", h, ", last status ", cf_strerror(last));
                });
                if (h != CF_COLL_INVALID_HANDLE && !c.root_only) cf_coll_wait_sync(h);
              }
              const std::string message = cf_last_error();
              rejections.expect(me, contains(message, c.argument), [&] {
                return cat(params(), ": cf_last_error() \"", message, "\" does not name '", c.argument, "'");
              });
            }
            cf_coll_set_algorithm(CF_KIND_ALLREDUCE, nullptr);
            // Nothing started: a valid collective right after works on every image.
            const uint32_t root = static_cast<uint32_t>(i % P);
            const std::vector<uint8_t> want = pattern(i * 2 + blocking, 100);
            std::vector<uint8_t> dst(100, 0), src = want;
            const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), root, src.data(), 100, kAllLocal);
            const int last = cf_last_status();
            afterwards.expect(me, rc == CF_OK && last == CF_OK && dst == want, [&] {
              return cat("after ", params(), ": the next broadcast returned ", cf_strerror(rc),
                         " (last status ", cf_strerror(last), ")", dst == want ? "" : " with wrong data");
            });
          }
        }
      },
      kFunctions, 2);
  rejections.expect(0, status == CF_OK, [&] { return cat("cf_run_images: ", cf_strerror(status)); });
}

template <typename Args>
size_t rejection_checks(uint32_t P, const std::vector<BadCall<Args>>& cases, bool warm) {
  size_t n = 1;  // cf_run_images
  for (const auto& c : cases) {
    if (P < c.min_images) continue;
    n += (c.blocking_only ? 1 : 2) * (2 * (c.root_only ? 1 : P) + (warm ? P : 0));
  }
  return n;
}

template <typename Args>
size_t applicable(uint32_t P, const std::vector<BadCall<Args>>& cases) {
  size_t n = 0;
  for (const auto& c : cases) n += (P >= c.min_images) * (c.blocking_only ? 1 : 2);
  return n;
}

template <typename Args>
void check_rejections(const std::vector<BadCall<Args>>& cases, bool warm = false) {
  for (uint32_t P : {1u, 4u}) {
    CAPTURE(P);
    ImageLog rejections(P), afterwards(P);
    run_bad_calls(P, cases, rejections, afterwards, warm);
    rejections.report();
    CHECK(rejections.checks() == rejection_checks(P, cases, warm));
  }
}

template <typename Args>
void check_nothing_started(const std::vector<BadCall<Args>>& cases) {
  for (uint32_t P : {1u, 4u}) {
    CAPTURE(P);
    ImageLog rejections(P), afterwards(P);
    run_bad_calls(P, cases, rejections, afterwards);
    afterwards.report();
    CHECK(afterwards.checks() == P * applicable(P, cases));
  }
}

// ---- the behaviours ------------------------------------------------------------------------

TEST_CASE("a broadcast with a bad argument or flag combination returns CF_ERR_BAD_ARG naming the argument") {
  check_rejections(broadcast_mistakes());
}

TEST_CASE("a rejected broadcast starts nothing: the next collective gives correct data on every image") {
  check_nothing_started(broadcast_mistakes());
}

TEST_CASE("an allreduce with a bad argument returns CF_ERR_BAD_ARG naming the argument") {
  check_rejections(allreduce_mistakes());
}

TEST_CASE("a rejected allreduce starts nothing: the next collective gives correct data on every image") {
  check_nothing_started(allreduce_mistakes());
}

TEST_CASE("right after a valid identical call, a broadcast or allreduce with one bad argument is still rejected") {
  SUBCASE("broadcast") { check_rejections(broadcast_mistakes(), true); }
  SUBCASE("allreduce") { check_rejections(allreduce_mistakes(), true); }
  SUBCASE("barrier") { check_rejections(barrier_mistakes(), true); }
}

TEST_CASE("a repeated call follows cf_coll_set_algorithm and cf_team_free made between the two calls") {
  ImageLog log(4);
  const int status = run_images(4, [&](cf_image_t me) {
    alignas(8) int64_t src[4] = {1, 2, 3, int64_t{me}}, dst[4] = {};
    const int func = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
    // The algorithm each of three equal calls ran, read from its graph.
    for (const char* algo : {"recursive_doubling", "ring", "recursive_doubling"}) {
      log.expect(me, cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algo) == CF_OK, [&] { return cf_last_error(); });
      const cf_coll_handle_t h = cf_coll_allreduce_nb(CF_TEAM_ALL, dst, src, 8, 4, func, 0, kAllLocal);
      const std::string path = carflow_test::temp_path(cat("carflow_memo_", me, "_", algo));
      log.expect(me, cf_graph_dump_json(h, path.c_str()) == CF_OK, [&] { return cf_last_error(); });
      log.expect(me, cf_coll_wait_sync(h) == CF_OK && dst[0] == 4 && dst[3] == 6,
                 [&] { return cat(algo, ": status ", cf_last_error(), ", dst[3] = ", dst[3]); });
      std::ifstream in(path);
      const std::string graph{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      std::remove(path.c_str());
      log.expect(me, contains(graph, cat("\"algorithm\": \"", algo, "\"")) ||
                         contains(graph, cat("\"algorithm\":\"", algo, "\"")),
                 [&] { return cat("the call after choosing '", algo, "' ran another algorithm"); });
    }
    cf_coll_set_algorithm(CF_KIND_ALLREDUCE, nullptr);
    cf_team_t half = CF_TEAM_NULL;
    log.expect(me, cf_team_split(CF_TEAM_ALL, static_cast<int>(me % 2), 0, &half) == CF_OK,
               [&] { return cf_last_error(); });
    alignas(8) unsigned char b[16] = {};
    for (int round = 0; round < 2; ++round) {
      log.expect(me, cf_coll_broadcast(half, b, 0, b, sizeof b, kAllLocal) == CF_OK,
                 [&] { return cat("broadcast on the new team: ", cf_last_error()); });
    }
    log.expect(me, cf_team_free(half) == CF_OK, [&] { return cf_last_error(); });
    const int rc = cf_coll_broadcast(half, b, 0, b, sizeof b, kAllLocal);
    log.expect(me, rc == CF_ERR_BAD_ARG && contains(cf_last_error(), "team"), [&] {
      return cat("the same broadcast on the freed team returned ", cf_strerror(rc), " (", cf_last_error(), ")");
    });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 4 * (3 * 4 + 1 + 2 + 1 + 1));
}

TEST_CASE("a permute of 2^48 bytes or more is refused on every image and writes nothing") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    const cf_image_t perm[P] = {1, 2, 0};
    for (size_t nbytes : {size_t{1} << 48, SIZE_MAX}) {
      std::vector<uint8_t> src(256, static_cast<uint8_t>(me + 1)), dst(256, 0);
      const cf_coll_handle_t h = cf_coll_permute_nb(CF_TEAM_ALL, dst.data(), src.data(), nbytes, perm, kAllLocal);
      const int last = cf_last_status();
      const std::string message = cf_last_error();
      log.expect(me,
                 h == CF_COLL_INVALID_HANDLE && last == CF_ERR_BAD_ARG && contains(message, "nbytes") &&
                     dst == std::vector<uint8_t>(256, 0),
                 [&] { return cat("nbytes ", nbytes, ": handle ", h, ", ", cf_strerror(last), " (", message, ")"); });
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * 2);
}

TEST_CASE("a NULL buffer on a team names the image and its team rank; an m form's list names the list") {
  constexpr uint32_t P = 3;
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    cf_team_t reversed = CF_TEAM_NULL;
    const int split = cf_team_split(CF_TEAM_ALL, 0, static_cast<int>(P - me), &reversed);  // rank = P-1-me
    log.expect(me, split == CF_OK, [&] { return cat("split: ", cf_strerror(split)); });
    uint64_t src = 1;
    cf_coll_handle_t h = cf_coll_broadcast_nb(reversed, nullptr, 0, &src, sizeof src, kAllLocal);
    std::string message = cf_last_error();
    const std::string want = cat("dst: NULL on image ", me, " (team rank ", P - 1 - me, "), which receives 8 bytes into it");
    log.expect(me, h == CF_COLL_INVALID_HANDLE && message == want, [&] { return cat("team: ", message); });
    // exchangem: the lists overlap, and the error names them.
    std::vector<uint64_t> buf(2 * P);
    std::vector<void*> srcs(P, buf.data()), dsts(P, buf.data() + 1);
    h = cf_coll_exchangem_nb(CF_TEAM_ALL, dsts.data(), srcs.data(), sizeof(uint64_t),
                             CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE | CF_COLL_ALL_THREADS);
    message = cf_last_error();
    log.expect(me, h == CF_COLL_INVALID_HANDLE && contains(message, "srclist, dstlist: the buffers overlap"),
               [&] { return cat("exchangem: ", message); });
    cf_team_free(reversed);
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * 3);
}

TEST_CASE("reducem and prefix_reducem with a NULL list name the list, with every image calling and in the representative mode") {
  constexpr uint32_t P = 2;
  constexpr int kSum = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
  ImageLog log(P);
  const int status = run_images(P, [&](cf_image_t me) {
    int64_t x = 1, y = 0;
    std::vector<void*> list(P, &x), out(P, &y);
    // ALL_THREADS (every image calls) and, without it, the representative
    // mode: both check the lists themselves before anything else.
    for (int threads : {CF_COLL_ALL_THREADS, 0}) {
      const int flags = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE | threads;
      cf_coll_handle_t h = cf_coll_reducem_nb(CF_TEAM_ALL, 0, &y, nullptr, 0, 0, 8, 1, kSum, 0, flags);
      std::string message = cf_last_error();
      log.expect(me, h == CF_COLL_INVALID_HANDLE && message == "srclist: NULL", [&] { return cat("reducem: ", message); });
      h = cf_coll_prefix_reducem_nb(CF_TEAM_ALL, out.data(), 0, 0, nullptr, 0, 0, 8, 1, kSum, 0, flags);
      message = cf_last_error();
      log.expect(me, h == CF_COLL_INVALID_HANDLE && message == "srclist: NULL",
                 [&] { return cat("prefix_reducem srclist: ", message); });
      h = cf_coll_prefix_reducem_nb(CF_TEAM_ALL, nullptr, 0, 0, list.data(), 0, 0, 8, 1, kSum, 0, flags);
      message = cf_last_error();
      log.expect(me, h == CF_COLL_INVALID_HANDLE && message == "dstlist: NULL",
                 [&] { return cat("prefix_reducem dstlist: ", message); });
    }
    // Nothing started: the next collective works.
    const int rc = cf_coll_allreduce(CF_TEAM_ALL, &y, &x, 8, 1, kSum, 0, kAllLocal);
    log.expect(me, rc == CF_OK && y == P, [&] { return cat("allreduce after: ", cf_strerror(rc), " ", y); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == P * 7);
}

TEST_CASE("a barrier with bad flags or team returns CF_ERR_BAD_ARG naming the argument") {
  check_rejections(barrier_mistakes());
}

TEST_CASE("a rejected barrier starts nothing: the next collective gives correct data on every image") {
  check_nothing_started(barrier_mistakes());
}

TEST_CASE("cf_coll_set_algorithm rejects an unknown algorithm or kind, naming the valid ones, and keeps the previous choice") {
  const struct {
    int kind;
    const char* valid;  // one of the names the error must list
    const char* chosen;
  } kinds[] = {{CF_KIND_BROADCAST, "binomial", "flat"},
               {CF_KIND_BARRIER, "dissemination", "dissemination"},
               {CF_KIND_ALLREDUCE, "recursive_doubling", "ring"}};
  ImageLog log(2);
  const int status = run_images(2, [&](cf_image_t me) {
    for (const auto& k : kinds) {
      log.expect(me, cf_coll_set_algorithm(k.kind, k.chosen) == CF_OK,
                 [&] { return cat("choosing '", k.chosen, "': ", cf_last_error()); });
      const int rc = cf_coll_set_algorithm(k.kind, "no_such_algorithm");
      const std::string message = cf_last_error();
      log.expect(me, rc == CF_ERR_BAD_ARG && contains(message, "no_such_algorithm") && contains(message, k.valid), [&] {
        return cat("kind ", k.kind, ": returned ", cf_strerror(rc), ", message \"", message,
                   "\" (expected to name the bad name and '", k.valid, "')");
      });
      const char* now = cf_coll_algorithm(k.kind, 64, 8);
      log.expect(me, now != nullptr && std::string(now) == k.chosen, [&] {
        return cat("kind ", k.kind, ": after the rejected call the algorithm is '", now ? now : "(null)",
                   "', expected '", k.chosen, "' still");
      });
    }
    const int rc = cf_coll_set_algorithm(CF_KIND_PREFIX_REDUCE + 1, "flat");
    log.expect(me, rc == CF_ERR_BAD_ARG && contains(cf_last_error(), "kind"),
               [&] { return cat("kind CF_KIND_PREFIX_REDUCE + 1: ", cf_strerror(rc), " (", cf_last_error(), ")"); });
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 2 * (3 * 3 + 1));
}

// Each call below from a thread that is not an image; returns the failures.
std::vector<std::string> calls_from_a_non_image_thread() {
  std::vector<std::string> failures;
  auto expect_not_init = [&](const char* call, int rc) {
    if (rc != CF_ERR_NOT_INIT || cf_last_status() != CF_ERR_NOT_INIT) {
      failures.push_back(cat(call, ": returned ", cf_strerror(rc), ", last status ",
                             cf_strerror(cf_last_status())));
    }
  };
  auto expect_invalid = [&](const char* call, cf_coll_handle_t h) {
    if (h != CF_COLL_INVALID_HANDLE || cf_last_status() != CF_ERR_NOT_INIT) {
      failures.push_back(cat(call, ": returned handle ", h, ", last status ", cf_strerror(cf_last_status())));
    }
  };
  alignas(8) unsigned char dst[64] = {}, src[64] = {};
  cf_coll_handle_t handles[1] = {CF_COLL_INVALID_HANDLE};
  expect_invalid("cf_coll_broadcast_nb", cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src, 64, kAllLocal));
  expect_not_init("cf_coll_broadcast", cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src, 64, kAllLocal));
  expect_invalid("cf_coll_barrier_nb", cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal));
  expect_not_init("cf_coll_barrier", cf_coll_barrier(CF_TEAM_ALL, kAllLocal));
  expect_invalid("cf_coll_allreduce_nb", cf_coll_allreduce_nb(CF_TEAM_ALL, dst, src, 8, 8,
                                                              CF_BUILTIN(CF_OP_SUM, CF_DT_INT64), 0, kAllLocal));
  expect_not_init("cf_coll_allreduce", cf_coll_allreduce(CF_TEAM_ALL, dst, src, 8, 8,
                                                         CF_BUILTIN(CF_OP_SUM, CF_DT_INT64), 0, kAllLocal));
  expect_not_init("cf_coll_wait_sync", cf_coll_wait_sync(static_cast<cf_coll_handle_t>(1)));
  expect_not_init("cf_coll_try_sync", cf_coll_try_sync(static_cast<cf_coll_handle_t>(1)));
  expect_not_init("cf_coll_wait_sync_all", cf_coll_wait_sync_all(handles, 1));
  expect_not_init("cf_coll_try_sync_some", cf_coll_try_sync_some(handles, 1));
  expect_not_init("cf_poll", cf_poll());
  expect_not_init("cf_coll_set_algorithm", cf_coll_set_algorithm(CF_KIND_BROADCAST, "flat"));
  if (cf_myimage() != static_cast<cf_image_t>(-1)) failures.push_back(cat("cf_myimage() is ", cf_myimage()));
  return failures;
}

TEST_CASE("collective calls from a thread that is not an image give CF_ERR_NOT_INIT") {
  SUBCASE("the main thread, with no images running") {
    for (const std::string& failure : calls_from_a_non_image_thread()) FAIL_CHECK(failure);
    cf_stats_t stats;
    CHECK(cf_get_stats(&stats) == CF_ERR_NOT_INIT);
  }
  SUBCASE("a thread started by an image while images are running") {
    std::vector<std::string> failures;
    const int status = run_images(2, [&](cf_image_t me) {
      if (me == 0) std::thread([&] { failures = calls_from_a_non_image_thread(); }).join();
      cf_coll_barrier(CF_TEAM_ALL, kAllLocal);
    });
    REQUIRE(status == CF_OK);
    for (const std::string& failure : failures) FAIL_CHECK(failure);
  }
}

}  // namespace

TEST_CASE("two images choose the one-partner forms: pairwise exchange and the ring's reduce-scatter") {
  ImageLog log(2);
  const int status = run_images(2, [&](cf_image_t me) {
    const std::pair<int, const char*> want[] = {{CF_KIND_EXCHANGE, "pairwise"}, {CF_KIND_REDUCE_SCATTER, "ring"}};
    for (const auto& [kind, name] : want) {
      const char* chosen = cf_coll_algorithm(kind, 8, 8);
      log.expect(me, chosen != nullptr && std::string(chosen) == name, [&, kind = kind, name = name] {
        return cat("kind ", kind, ": chose '", chosen ? chosen : "(null)", "', expected '", name, "'");
      });
    }
  });
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(log.checks() == 2 * 2);
}
