// The GASNet notes' synchronization modes observed with an image that enters late
// on purpose (GASNet collectives notes v1.7, "Synchronization modes"), for all nine IN x OUT
// combinations and several collectives:
//   - under every IN mode the late image's destination is untouched until it
//     enters (data for it waits in internal buffers, never in its buffer);
//   - under IN_ALLSYNC no image's sync returns before every image entered;
//   - under OUT_ALLSYNC, when any image's sync returns, every image's
//     destination already holds its result.
// The late image waits (no sleeps) until every other image has started the
// collective and is waiting in its sync call, so they have had every chance
// to move data early.
#include <doctest/doctest.h>

#include <atomic>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::ImageLog;
using carflow_test::run_images;

constexpr int kInModes[] = {CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC};
constexpr int kOutModes[] = {CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC};
const char* const kInNames[] = {"IN_NOSYNC", "IN_MYSYNC", "IN_ALLSYNC"};
const char* const kOutNames[] = {"OUT_NOSYNC", "OUT_MYSYNC", "OUT_ALLSYNC"};

enum class Coll { Broadcast, GatherAll, Allreduce, Exchange };
const char* name(Coll c) {
  switch (c) {
    case Coll::Broadcast: return "broadcast";
    case Coll::GatherAll: return "gather_all";
    case Coll::Allreduce: return "allreduce";
    case Coll::Exchange: return "exchange";
  }
  return "?";
}

constexpr uint64_t kUntouched = 0xEEEEEEEEEEEEEEEEull;
constexpr size_t kWords = 512;  // 4 KiB per block: eager on inproc

// What image `image`'s destination must hold (P blocks of kWords words for
// gather_all and exchange, one block otherwise).
std::vector<uint64_t> expected(Coll c, uint32_t P, uint32_t image) {
  std::vector<uint64_t> want;
  for (uint32_t b = 0; b < (c == Coll::GatherAll || c == Coll::Exchange ? P : 1u); ++b) {
    for (size_t w = 0; w < kWords; ++w) {
      switch (c) {
        case Coll::Broadcast: want.push_back(1000 + w); break;                       // root 0's words
        case Coll::GatherAll: want.push_back(uint64_t{b} << 32 | w); break;         // image b's block
        case Coll::Exchange: want.push_back(uint64_t{b} << 40 | uint64_t{image} << 32 | w); break;
        case Coll::Allreduce: {
          uint64_t sum = 0;
          for (uint32_t i = 0; i < P; ++i) sum += uint64_t{i} << 32 | w;
          want.push_back(sum);
          break;
        }
      }
    }
  }
  return want;
}

std::vector<uint64_t> source(Coll c, uint32_t P, uint32_t image) {
  std::vector<uint64_t> src;
  for (uint32_t b = 0; b < (c == Coll::Exchange ? P : 1u); ++b) {
    for (size_t w = 0; w < kWords; ++w) {
      if (c == Coll::Broadcast) src.push_back(image == 0 ? 1000 + w : 0);
      if (c == Coll::GatherAll || c == Coll::Allreduce) src.push_back(uint64_t{image} << 32 | w);
      if (c == Coll::Exchange) src.push_back(uint64_t{image} << 40 | uint64_t{b} << 32 | w);  // to image b
    }
  }
  return src;
}

cf_coll_handle_t start(Coll c, uint64_t* dst, uint64_t* src, int flags) {
  const size_t bytes = kWords * 8;
  switch (c) {
    case Coll::Broadcast: return cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 0, src, bytes, flags);
    case Coll::GatherAll: return cf_coll_gather_all_nb(CF_TEAM_ALL, dst, src, bytes, flags);
    case Coll::Exchange: return cf_coll_exchange_nb(CF_TEAM_ALL, dst, src, bytes, flags);
    case Coll::Allreduce:
      return cf_coll_allreduce_nb(CF_TEAM_ALL, dst, src, 8, kWords, CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64), 0,
                                  flags);
  }
  return CF_COLL_INVALID_HANDLE;
}

TEST_CASE("every IN x OUT mode: a late image's destination stays untouched until it enters, and the ALLSYNC guarantees hold") {
  const uint32_t P = 4, late = P - 1;
  for (Coll coll : {Coll::Broadcast, Coll::GatherAll, Coll::Allreduce, Coll::Exchange}) {
    for (int in = 0; in < 3; ++in) {
      for (int out = 0; out < 3; ++out) {
        INFO(name(coll), " ", kInNames[in], " | ", kOutNames[out]);
        const int flags = kInModes[in] | kOutModes[out] | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
        std::vector<std::vector<uint64_t>> dst(P), want(P);
        for (uint32_t i = 0; i < P; ++i) {
          want[i] = expected(coll, P, i);
          dst[i].assign(want[i].size(), kUntouched);
        }
        std::atomic<uint32_t> waiting{0};
        std::atomic<bool> late_entered{false};
        ImageLog log(P);
        REQUIRE(run_images(P, [&](cf_image_t me) {
                  std::vector<uint64_t> src = source(coll, P, me);
                  if (me == late) {
                    // Every other image has started and is inside its sync call.
                    while (waiting.load(std::memory_order_acquire) < P - 1) std::this_thread::yield();
                    size_t touched = 0;
                    for (uint64_t w : dst[me]) touched += w != kUntouched;
                    log.expect(me, touched == 0,
                               [&] { return cat(touched, " words of the late image's destination written before it entered"); });
                    late_entered.store(true, std::memory_order_release);
                  }
                  const cf_coll_handle_t h = start(coll, dst[me].data(), src.data(), flags);
                  if (me != late) waiting.fetch_add(1, std::memory_order_acq_rel);
                  const int rc = cf_coll_wait_sync(h);
                  log.expect(me, rc == CF_OK, [&] { return cat("sync: ", cf_last_error()); });
                  if (in == 2) {
                    log.expect(me, late_entered.load(std::memory_order_acquire),
                               [] { return std::string("IN_ALLSYNC sync returned before the late image entered"); });
                  }
                  if (out == 2) {  // every destination is complete when any sync returns
                    for (uint32_t i = 0; i < P; ++i) {
                      log.expect(me, dst[i] == want[i],
                                 [&] { return cat("OUT_ALLSYNC: image ", i, "'s destination not complete"); });
                    }
                  }
                  log.expect(me, dst[me] == want[me], [] { return std::string("wrong result"); });
                }) == CF_OK);
        log.report();
      }
    }
  }
}

}  // namespace
