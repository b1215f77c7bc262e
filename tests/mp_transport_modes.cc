// Modes of mp_collectives for the transports' paths under load: an
// unexpected flood, pumped streams, split copies, a ring run past, a late
// node, runs back to back. mp_collectives.cc describes each.
#include "tests/mp_collectives.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <string>
#include <vector>

namespace mp {

void run_mode_flood(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t P = cf_images();
  const uint32_t per = 10000 / (P > 1 ? P - 1 : 1) + 1;
  // Image 0 enters a barrier on a second team first; the others start
  // all their gathers (which send at once) and then enter that barrier.
  cf_team_t side = CF_TEAM_NULL;
  cf_team_split(CF_TEAM_ALL, 0, static_cast<int>(me), &side);
  std::vector<uint64_t> mine(per, me), gathered(me == 0 ? uint64_t{per} * P : 1);
  std::vector<cf_coll_handle_t> handles(per);
  const int flood = CF_COLL_IN_NOSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  cf_coll_set_algorithm(CF_KIND_GATHER, "flat");  // every image sends to image 0 itself
  if (me != 0) {
    for (uint32_t i = 0; i < per; ++i) {
      handles[i] = cf_coll_gather_nb(CF_TEAM_ALL, 0, nullptr, &mine[i], 8, flood);
    }
  }
  cf_coll_barrier(side, kLocal);
  if (me == 0) {
    for (uint32_t i = 0; i < per; ++i) {
      handles[i] = cf_coll_gather_nb(CF_TEAM_ALL, 0, &gathered[uint64_t{i} * P], &mine[i], 8, flood);
    }
  }
  log.checks++;
  if (cf_coll_wait_sync_all(handles.data(), per) != CF_OK) log.fail(std::string("flood: ") + cf_last_error());
  if (me == 0) {
    for (uint64_t i = 0; i < uint64_t{per} * P; ++i) {
      if (gathered[i] != i % P) {
        log.fail("flood: gathered[" + std::to_string(i) + "] = " + std::to_string(gathered[i]));
        break;
      }
    }
  }
  cf_team_free(side);
}

void run_mode_pump(Context& c, cf_image_t me) {
  Log& log = c.log;
  // 4 MiB broadcasts and a scatter of 1 MiB blocks from node 0: its own
  // block is copied while its stream goes out (pumped_bytes).
  // Whether the receiver's grant comes while the root still copies
  // depends on the scheduler (a loaded machine may not run the
  // receiver then): rounds go on, at least 3 and at most 200, until
  // the root has pumped; the root says when to stop.
  constexpr size_t kBytes = 4 << 20, kBlock = 1 << 20;
  std::vector<uint8_t> src(kBytes), dst(kBytes);
  for (uint32_t round = 0, more = 1; more != 0; ++round) {
    for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<uint8_t>(me == 0 ? i * 7 + round : 0);
    std::fill(dst.begin(), dst.end(), 0xee);
    log.checks++;
    if (cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), kBytes, kLocal) != CF_OK) {
      log.fail(std::string("pump: broadcast: ") + cf_last_error());
    }
    for (size_t i = 0; i < kBytes; ++i) {
      if (dst[i] != static_cast<uint8_t>(i * 7 + round)) {
        log.fail("pump: broadcast " + std::to_string(round) + ": byte " + std::to_string(i));
        break;
      }
    }
    cf_net_stats_t net{};
    cf_get_net_stats(&net);
    uint32_t go_on = round + 1 < 3 || (net.pumped_bytes == 0 && round + 1 < 200) ? 1 : 0;
    if (cf_coll_broadcast(CF_TEAM_ALL, &more, 0, &go_on, sizeof more, kLocal) != CF_OK) {
      log.fail(std::string("pump: ") + cf_last_error());
      break;
    }
  }
  for (size_t i = 0; i < kBytes; ++i) src[i] = static_cast<uint8_t>(me == 0 ? i * 13 + 1 : 0);
  std::fill(dst.begin(), dst.end(), 0xee);
  log.checks++;
  if (cf_coll_scatter(CF_TEAM_ALL, dst.data(), 0, src.data(), kBlock, kLocal) != CF_OK) {
    log.fail(std::string("pump: scatter: ") + cf_last_error());
  }
  for (size_t i = 0; i < kBlock; ++i) {
    if (dst[i] != static_cast<uint8_t>((me * kBlock + i) * 13 + 1)) {
      log.fail("pump: scatter: byte " + std::to_string(i));
      break;
    }
  }
}

void run_mode_split(Context& c, cf_image_t me) {
  Log& log = c.log;
  // Large messages one way between 2 processes, each copied by both
  // (split copies, from 32 KiB by default): broadcasts of 4 MiB and
  // 3 MiB + 12345 (32 and 25 pieces, the last one short), of 256 KiB
  // and of a piece and a part (200 KiB + 123), a gather of 1 MiB + 4099 byte
  // blocks toward node 0 (node 1 sends) and a scatter of such blocks
  // from node 0. Rounds go on, at least 2 and at most 200, until the
  // senders have written part of a message (it depends on the
  // scheduler which process takes which piece).
  const size_t sizes[] = {4 << 20, (3 << 20) + 12345, 256 << 10, (200 << 10) + 123};
  std::vector<uint8_t> src(8 << 20), dst(8 << 20);
  // dst holds want(i) for its first n bytes, and the 64 after them are
  // untouched (0xee); else one failure naming the first wrong byte.
  auto arrived = [&](const std::string& what, uint32_t round, size_t n, auto want) {
    for (size_t i = 0; i < n + 64; ++i) {
      if (dst[i] != (i < n ? want(i) : 0xee)) {
        log.fail("split: " + what + " in round " + std::to_string(round) + ": byte " + std::to_string(i));
        return;
      }
    }
  };
  for (uint32_t round = 0, more = 1; more != 0; ++round) {
    for (size_t bytes : sizes) {
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(me == 0 ? i * 11 + round + bytes : 0);
      std::fill(dst.begin(), dst.end(), 0xee);
      log.checks++;
      if (cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), bytes, kLocal) != CF_OK) {
        log.fail(std::string("split: broadcast: ") + cf_last_error());
      }
      arrived("broadcast of " + std::to_string(bytes), round, bytes,
              [&](size_t i) { return static_cast<uint8_t>(i * 11 + round + bytes); });
    }
    const size_t block = (1 << 20) + 4099;
    for (size_t i = 0; i < block; ++i) src[i] = static_cast<uint8_t>(i * 5 + me + round);
    std::fill(dst.begin(), dst.end(), 0xee);
    log.checks++;
    if (cf_coll_gather(CF_TEAM_ALL, 0, dst.data(), src.data(), block, kLocal) != CF_OK) {
      log.fail(std::string("split: gather: ") + cf_last_error());
    }
    for (size_t i = 0; me == 0 && i < 2 * block; ++i) {
      if (dst[i] != static_cast<uint8_t>((i % block) * 5 + i / block + round)) {
        log.fail("split: gather in round " + std::to_string(round) + ": byte " + std::to_string(i));
        break;
      }
    }
    // The same blocks scattered from node 0: its own block's copy
    // first, then it writes pieces of node 1's.
    for (size_t i = 0; i < 2 * block; ++i) src[i] = static_cast<uint8_t>(me == 0 ? i * 3 + round : 0);
    std::fill(dst.begin(), dst.end(), 0xee);
    log.checks++;
    if (cf_coll_scatter(CF_TEAM_ALL, dst.data(), 0, src.data(), block, kLocal) != CF_OK) {
      log.fail(std::string("split: scatter: ") + cf_last_error());
    }
    arrived("scatter", round, block, [&](size_t i) { return static_cast<uint8_t>((me * block + i) * 3 + round); });
    // Another round while some node received split copies but has
    // written no piece of one yet (with split copies off: two rounds).
    cf_net_stats_t net{};
    cf_get_net_stats(&net);
    int64_t waiting = net.split_copies > 0 && net.split_written_bytes == 0 ? 1 : 0, waiting_sum = 0;
    if (cf_coll_allreduce(CF_TEAM_ALL, &waiting_sum, &waiting, 8, 1, kSumInt64, 0, kLocal) != CF_OK) {
      log.fail(std::string("split: ") + cf_last_error());
      break;
    }
    more = round + 1 < 2 || (waiting_sum > 0 && round + 1 < 200) ? 1 : 0;
  }
}

void run_mode_midsize(Context& c, cf_image_t me) {
  Log& log = c.log;
  // One way at a time between 2 processes of 1 image: node 0 broadcasts,
  // then gathers blocks of the same size, for each size in kMidSizes, 3
  // rounds; each node receives one message of each size per round, and
  // the test reads from its counters which path those took. Every byte
  // is checked, and the 64 after each message stay untouched.
  // From just above the host ring's 16 KiB to just below 1 MiB
  // (multiproc_test counts those from 32 KiB).
  constexpr size_t kMidSizes[] = {20 << 10, 32 << 10, (96 << 10) + 7, 256 << 10, 512 << 10, (1 << 20) - 1};
  constexpr uint32_t kRounds = 3;
  const size_t max_bytes = kMidSizes[std::size(kMidSizes) - 1];
  std::vector<uint8_t> src(max_bytes), dst(2 * max_bytes + 64);
  for (uint32_t round = 0; round < kRounds; ++round) {
    for (size_t bytes : kMidSizes) {
      const std::string what = std::to_string(bytes) + " bytes in round " + std::to_string(round);
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(me == 0 ? i * 7 + round : 0);
      std::fill(dst.begin(), dst.end(), 0xee);
      log.checks++;
      if (cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), bytes, kLocal) != CF_OK) {
        log.fail("midsize: broadcast of " + what + ": " + cf_last_error());
      }
      for (size_t i = 0; i < bytes + 64; ++i) {
        if (dst[i] != (i < bytes ? static_cast<uint8_t>(i * 7 + round) : 0xee)) {
          log.fail("midsize: broadcast of " + what + ": byte " + std::to_string(i));
          break;
        }
      }
      for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 3 + me + round);
      std::fill(dst.begin(), dst.end(), 0xee);
      log.checks++;
      if (cf_coll_gather(CF_TEAM_ALL, 0, dst.data(), src.data(), bytes, kLocal) != CF_OK) {
        log.fail("midsize: gather of " + what + ": " + cf_last_error());
      }
      for (size_t i = 0; me == 0 && i < 2 * bytes + 64; ++i) {
        const uint8_t want = i < 2 * bytes ? static_cast<uint8_t>((i % bytes) * 3 + i / bytes + round) : 0xee;
        if (dst[i] != want) {
          log.fail("midsize: gather of " + what + ": byte " + std::to_string(i));
          break;
        }
      }
    }
  }
}

void run_mode_combines(Context& c, cf_image_t me) {
  Log& log = c.log;
  // Two processes of 1 image combine each other's vectors at once
  // (recursive-doubling allreduce: each sends its vector and combines the
  // other's), 3 rounds of each size in kSizes, then one way (reduce_vec to
  // node 0) at 256 KiB. Every element is checked, and the 64 bytes after
  // each result stay untouched; the test reads from the counters which
  // exchanges the receivers read whole (CF_HOST_SPLIT_BYTES to 2 MiB).
  constexpr size_t kSizes[] = {20 << 10, 32 << 10, (96 << 10) + 8, 1 << 20, 2 << 20, 3 << 20};
  constexpr uint32_t kRounds = 3;
  if (cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "recursive_doubling") != CF_OK) {
    log.fail(std::string("combines: ") + cf_last_error());
    return;
  }
  const size_t max_n = kSizes[std::size(kSizes) - 1] / 8;
  std::vector<int64_t> src(max_n), dst(max_n + 8);
  auto check = [&](const char* what, size_t n, uint32_t round, bool has_result) {
    for (size_t i = 0; i < n + 8 && has_result; ++i) {
      // Node k's element i is i * (k + 3) + round: the sum of both is i * 7 + 2 * round.
      const int64_t want = i < n ? static_cast<int64_t>(i * 7 + 2 * round) : int64_t{-1};
      if (dst[i] != want) {
        log.fail(std::string("combines: ") + what + " of " + std::to_string(n * 8) + " bytes in round " +
                 std::to_string(round) + ": element " + std::to_string(i));
        return;
      }
    }
  };
  for (uint32_t round = 0; round < kRounds; ++round) {
    for (size_t bytes : kSizes) {
      const size_t n = bytes / 8;
      for (size_t i = 0; i < n; ++i) src[i] = static_cast<int64_t>(i * (me + 3) + round);
      std::fill(dst.begin(), dst.end(), -1);
      log.checks++;
      if (cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), 8, n, kSumInt64, 0, kLocal) != CF_OK) {
        log.fail(std::string("combines: allreduce: ") + cf_last_error());
      }
      check("allreduce", n, round, true);
    }
    const size_t n = (256 << 10) / 8;
    for (size_t i = 0; i < n; ++i) src[i] = static_cast<int64_t>(i * (me + 3) + round);
    std::fill(dst.begin(), dst.end(), -1);
    log.checks++;
    if (cf_coll_reduce_vec(CF_TEAM_ALL, 0, dst.data(), src.data(), 8, n, kSumInt64, 0, kLocal) != CF_OK) {
      log.fail(std::string("combines: reduce_vec: ") + cf_last_error());
    }
    check("reduce_vec", n, round, me == 0);
  }
}

void run_mode_runahead(Context& c, cf_image_t me) {
  Log& log = c.log;
  cf_team_t t01 = CF_TEAM_NULL, t02 = CF_TEAM_NULL, t12 = CF_TEAM_NULL;
  cf_team_split(CF_TEAM_ALL, me != 2 ? 0 : -1, static_cast<int>(me), &t01);
  cf_team_split(CF_TEAM_ALL, me != 1 ? 0 : -1, static_cast<int>(me), &t02);
  cf_team_split(CF_TEAM_ALL, me != 0 ? 0 : -1, static_cast<int>(me), &t12);
  constexpr uint64_t kCalls = 600;
  log.checks++;
  if (me == 0) {
    for (uint64_t i = 0; i < kCalls; ++i) {
      uint64_t x = i, y = 0;
      if (cf_coll_broadcast(t01, &y, 0, &x, 8, kLocal) != CF_OK) log.fail(std::string("runahead: ") + cf_last_error());
    }
    if (cf_coll_barrier(t02, kLocal) != CF_OK) log.fail(std::string("runahead: ") + cf_last_error());
  } else if (me == 2) {
    if (cf_coll_barrier(t02, kLocal) != CF_OK || cf_coll_barrier(t12, kLocal) != CF_OK) {
      log.fail(std::string("runahead: ") + cf_last_error());
    }
  } else if (me == 1) {
    if (cf_coll_barrier(t12, kLocal) != CF_OK) log.fail(std::string("runahead: ") + cf_last_error());
    for (uint64_t i = 0; i < kCalls; ++i) {
      uint64_t x = 0, y = ~uint64_t{0};
      if (cf_coll_broadcast(t01, &y, 0, &x, 8, kLocal) != CF_OK || y != i) {
        log.fail("runahead: broadcast " + std::to_string(i) + " delivered " + std::to_string(y) + " (" +
                 cf_last_error() + ")");
        break;
      }
    }
  }
  for (cf_team_t t : {t01, t02, t12}) {
    if (t != CF_TEAM_NULL) cf_team_free(t);
  }
}

// late: node 1 spins (CPU) for a while before joining; the others wait.
void run_mode_late(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t root = c.images;  // the first image of node 1
  uint64_t x = me, y = 0;
  if (cf_mynode() == 1) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    volatile uint64_t spin = 0;
    while (std::chrono::steady_clock::now() < until) spin = spin + 1;
  }
  log.checks++;
  if (cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal) != CF_OK || y != root) {
    log.fail("late broadcast");
  }
}

// reruns: 30 runs of images back to back, each a burst of allreduces, so
// a fast node starts the next run while others finish this one (its
// messages must wait for them, not vanish with the old run's engine).
// This is one run's part (main's table runs it 30 times).
void run_mode_reruns(Context& c, cf_image_t me) {
  Log& log = c.log;
  for (int i = 0; i < 50; ++i) {
    int64_t mine = me + i, sum = 0, want = 0;
    for (uint32_t r = 0; r < cf_images(); ++r) want += r + i;
    log.checks++;
    if (cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal) != CF_OK || sum != want) {
      log.fail("reruns: allreduce " + std::to_string(i) + " gave " + std::to_string(sum));
      return;
    }
  }
  // A dissemination barrier ends unevenly: the first node out starts the
  // next run while the others still wait for their last message.
  log.checks++;
  if (cf_coll_barrier(CF_TEAM_ALL, kLocal) != CF_OK) log.fail(std::string("reruns: barrier: ") + cf_last_error());
}

}  // namespace mp
