// Modes of mp_collectives for the failure tests: peers lost (kill, exit3,
// killstream, cut) or only stopped (slow), and calls whose arguments
// disagree across nodes (check, sizes). mp_collectives.cc describes each.
#include "tests/mp_collectives.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace mp {

namespace {

// Wall-clock milliseconds: comparable between the processes of one machine.
long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch()).count();
}

// Stops this whole process for `ms` and lets a child wake it (a process
// cannot continue itself); the child does only async-signal-safe work.
void stop_for(long long ms) {
  const pid_t parent = getpid();
  const pid_t child = fork();
  if (child == 0) {
    const timespec pause{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
    nanosleep(&pause, nullptr);
    kill(parent, SIGCONT);
    _exit(0);
  }
  raise(SIGSTOP);
  waitpid(child, nullptr, 0);
}

// A wait that should have returned CF_ERR_PEER_LOST: the first one's time
// and the last one's message for the summary's "lost" lines.
void note_lost(Context& c, int rc, const char* what) {
  if (rc != CF_ERR_PEER_LOST && !(rc == CF_ERR_NO_MEM && c.nomem_fault)) {
    c.log.fail(std::string(what) + " with a lost peer returned " + std::to_string(rc));
    return;
  }
  long long zero = 0;
  if (c.lost_at_ms.compare_exchange_strong(zero, wall_ms())) c.lost_code = rc;
  c.lost_seen++;
  std::lock_guard<std::mutex> lock(c.lost_mutex);
  c.lost_message = cf_last_error();
}

}  // namespace

// kill, exit3: everyone but node 1 waits for a broadcast rooted on node 1.
void run_mode_kill(Context& c, cf_image_t me) {
  const uint32_t root = c.images;  // the first image of node 1
  if (cf_mynode() == 1) {
    if (me == root) {
      std::printf("event at_ms=%lld\n", wall_ms());
      std::fflush(stdout);
      if (c.mode == "kill") raise(SIGKILL);
      std::exit(3);
    }
  }
  uint64_t x = me, y = 0;
  note_lost(c, cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal), "broadcast");
}

// killstream: image 0 (node 0) broadcasts 64 MiB to node 1's image, which
// takes the first bytes (the transfer is under way: through a host stream
// on one host) and kills itself; the root must see CF_ERR_PEER_LOST.
void run_mode_killstream(Context& c, cf_image_t me) {
  Log& log = c.log;
  constexpr size_t kBytes = size_t{64} << 20;
  std::vector<uint8_t> src(kBytes, 0x5a), buf(kBytes, 0);
  const int flat = cf_coll_set_algorithm(CF_KIND_BROADCAST, "flat");
  if (flat != CF_OK) log.fail("killstream: flat broadcast not available");
  if (cf_mynode() == 1) {
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, buf.data(), 0, src.data(), kBytes, kLocal);
    while (buf[0] == 0 && cf_coll_try_sync(h) == CF_NOT_READY) {
    }
    std::printf("event at_ms=%lld first byte %d\n", wall_ms(), buf[0]);
    std::fflush(stdout);
    raise(SIGKILL);
  }
  note_lost(c, cf_coll_broadcast(CF_TEAM_ALL, buf.data(), 0, src.data(), kBytes, kLocal), "broadcast");
}

// cut [IFACE]: node 1 cuts its own link (IFACE, eth0 unless given) and
// waits in a barrier nobody can reach; the others wait for node 1's
// broadcast.
void run_mode_cut(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t root = c.images;
  uint64_t x = me, y = 0;
  if (cf_mynode() == 1) {
    const std::string down = "ip link set " + std::string(c.argc > 2 ? c.argv[2] : "eth0") + " down";
    std::printf("event at_ms=%lld\n", wall_ms());
    std::fflush(stdout);
    if (std::system(down.c_str()) != 0) log.fail("cut: '" + down + "' failed");
    note_lost(c, cf_coll_barrier(CF_TEAM_ALL, kLocal), "barrier");
  } else {
    note_lost(c, cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal), "broadcast");
  }
}

// slow: the first image of node 1 stops its process for twice
// CF_PEER_TIMEOUT before joining a broadcast it roots.
void run_mode_slow(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t root = c.images;
  uint64_t x = me, y = 0;
  if (me == root) stop_for(static_cast<long long>(2000 * c.peer_timeout_s));
  log.checks++;
  const int rc = cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal);
  if (rc != CF_OK || y != root) {
    log.fail("slow: broadcast returned " + std::to_string(rc) + " (" + cf_last_error() + "), y = " +
             std::to_string(y));
  }
}

// Under nomem:unexpected, a message that certainly reaches node 1 before
// its receive: a root broadcasts (flat: it sends to each image itself)
// while node 1's first image is held in a barrier with the root alone,
// which the root enters only once its broadcast sends are done. The path
// from root to held image keeps order, so the held image's broadcast
// message arrives before the barrier's: unexpected (in the ofi tables,
// through a host ring or libfabric). The root is image 0 unless the mode's
// argument names another (never node 1's first image).
void broadcast_ahead_of_node1(Context& c, cf_image_t me) {
  Log& log = c.log;
  const cf_image_t held = c.images;  // node 1's first image
  const cf_image_t root = c.argc > 2 ? static_cast<cf_image_t>(std::atoi(c.argv[2])) : 0;
  cf_team_t pair = CF_TEAM_NULL;
  const int split = cf_team_split(CF_TEAM_ALL, me == root || me == held ? 0 : -1, static_cast<int>(me), &pair);
  if (split != CF_OK) return note_lost(c, split, "cf_team_split");  // an earlier message found no memory
  if (cf_coll_set_algorithm(CF_KIND_BROADCAST, "flat") != CF_OK) log.fail("fault: flat broadcast not available");
  uint64_t x = 7, y = 0;
  const cf_coll_handle_t h = me == held ? CF_COLL_INVALID_HANDLE
                                        : cf_coll_broadcast_nb(CF_TEAM_ALL, &y, root, &x, 8, kLocal);
  int rc = me == root ? cf_coll_wait_sync(h) : CF_OK;  // its sends go out before the barrier's
  if (rc == CF_OK && pair != CF_TEAM_NULL) rc = cf_coll_barrier(pair, kLocal);
  if (rc == CF_OK && me != root) {
    rc = me == held ? cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal) : cf_coll_wait_sync(h);
  }
  if (rc != CF_OK) note_lost(c, rc, "the broadcast ahead of node 1");
  else if (y != x) log.fail("fault: the broadcast ahead of node 1 delivered " + std::to_string(y));
  cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  if (pair != CF_TEAM_NULL) cf_team_free(pair);
}

// A retried allreduce after a loss: CF_ERR_PEER_LOST, and its destination
// untouched (a retry that matched a peer's message of another round would
// change it or fail with CF_ERR_MISMATCH).
void retry_after_loss(Context& c, cf_image_t me, int round) {
  int64_t mine = me + round, sum = -1;
  note_lost(c, cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal), "a retried allreduce");
  if (sum != -1) c.log.fail("fault: a retried allreduce " + std::to_string(round) + " wrote " + std::to_string(sum));
}

// fault: every image runs 200 allreduces under the CF_FAULT the test set.
// A fault that loses a node (kill_after, close_link) must fail a pending
// allreduce and a later barrier with CF_ERR_PEER_LOST naming a node, on
// every image still alive; one that only slows (delay, stop) must leave
// every sum right. nomem:unexpected: broadcast_ahead_of_node1 first.
// "fault retry": each failed allreduce is tried again, as a runtime that
// retries a collective would, and the rounds go on: every call after the
// loss must fail with CF_ERR_PEER_LOST, however far out of step the images
// are.
void run_mode_fault(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t P = cf_images();
  const bool retry = c.argc > 2 && std::strcmp(c.argv[2], "retry") == 0;
  if (c.nomem_fault) broadcast_ahead_of_node1(c, me);
  bool failed = false;
  for (int round = 0; round < 200; ++round) {
    int64_t mine = me + round, sum = 0;
    const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal);
    if (rc != CF_OK || failed) {
      note_lost(c, rc, "allreduce");
      if (std::strstr(cf_last_error(), "node ") == nullptr) log.fail(std::string("no node named: ") + cf_last_error());
      failed = true;
      if (retry) {
        retry_after_loss(c, me, round);
        continue;
      }
      note_lost(c, cf_coll_barrier(CF_TEAM_ALL, kLocal), "a later barrier");
      return;
    }
    log.checks++;
    if (sum != int64_t{P} * (P - 1) / 2 + int64_t{P} * round) log.fail("fault: allreduce " + std::to_string(round) + " wrong");
  }
  if (failed) note_lost(c, cf_coll_barrier(CF_TEAM_ALL, kLocal), "a later barrier");
}

// An aggregate of two broadcasts (roots 0 and P-1) closed by an allreduce,
// every result checked.
void aggregate_checked(Log& log, cf_image_t me, uint32_t P, const char* what) {
  uint64_t b[2] = {}, src = 500 + me;
  int64_t one = 1, sum = 0;
  cf_coll_broadcast_nb(CF_TEAM_ALL, &b[0], 0, &src, 8, kLocal | CF_COLL_AGGREGATE);
  cf_coll_broadcast_nb(CF_TEAM_ALL, &b[1], P - 1, &src, 8, kLocal | CF_COLL_AGGREGATE);
  const int rc = cf_coll_wait_sync(cf_coll_allreduce_nb(CF_TEAM_ALL, &sum, &one, 8, 1, kSumInt64, 0, kLocal));
  log.checks++;
  if (rc != CF_OK || b[0] != 500 || b[1] != 500 + P - 1 || sum != int64_t{P}) {
    log.fail(std::string("nomem: ") + what + " returned " + std::to_string(rc) + " (" + cf_last_error() + ")");
  }
}

// nomem [aggregate] (CF_FAULT=nomem:cache): each image's first allreduce
// fails with CF_ERR_NO_MEM naming CF_FAULT, having started nothing; the
// next 20 are right. With "aggregate" the refused first call is an
// aggregate's first member: CF_ERR_NO_MEM as well (not CF_ERR_BAD_ARG), it
// joins nothing, and an aggregate after it runs right.
void run_mode_nomem(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t P = cf_images();
  const bool aggregate = c.argc > 2 && std::strcmp(c.argv[2], "aggregate") == 0;
  int64_t mine = me, sum = -1;
  int rc;
  if (aggregate) {
    uint64_t b = 0;
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &b, 0, &mine, 8, kLocal | CF_COLL_AGGREGATE);
    rc = h == CF_COLL_INVALID_HANDLE ? cf_last_status() : CF_OK;
  } else {
    rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal);
  }
  log.checks++;
  if (rc != CF_ERR_NO_MEM || std::strstr(cf_last_error(), "CF_FAULT=nomem:cache") == nullptr || sum != -1) {
    log.fail(std::string("nomem: the first ") + (aggregate ? "aggregate member" : "allreduce") + " returned " +
             std::to_string(rc) + " (" + cf_last_error() + ")");
  }
  if (aggregate) aggregate_checked(log, me, P, "the aggregate after the refused member");
  for (int round = 0; round < 20; ++round) {
    rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal);
    log.checks++;
    if (rc != CF_OK || sum != int64_t{P} * (P - 1) / 2) log.fail("nomem: allreduce " + std::to_string(round) + " after it returned " + std::to_string(rc));
  }
}

// Mode "sizes" (no CF_CHECK; one image per node): node 1 gives 20
// broadcasts rooted on node 0 twice the root's nbytes. Its receive meets a
// message of another size, whether next in the sender's ring or after it
// was posted, and fails with CF_ERR_MISMATCH, its destination untouched;
// the root's calls succeed; an agreeing allreduce follows.
void run_mode_sizes(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t P = cf_images();
  const bool odd = cf_mynode() == 1;
  auto expect = [&](bool ok, const std::string& what) {
    log.checks++;
    if (!ok) log.fail("sizes: image " + std::to_string(me) + ": " + what + " (" + cf_last_error() + ")");
  };
  for (int round = 0; round < 20; ++round) {
    Bytes src(16, 1), dst(16, 0xAB);
    const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), odd ? 16 : 8, kLocal);
    if (odd) {
      expect(rc == CF_ERR_MISMATCH && std::strstr(cf_last_error(), "disagree on sizes") != nullptr &&
                 dst == Bytes(16, 0xAB),
             "a 16-byte receive of an 8-byte broadcast returned " + std::to_string(rc));
    } else {
      expect(rc == CF_OK && std::equal(dst.begin(), dst.begin() + 8, src.begin()),
             "the root's 8-byte broadcast returned " + std::to_string(rc));
    }
  }
  int64_t mine = me, sum = 0;
  const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal);
  expect(rc == CF_OK && sum == int64_t{P} * (P - 1) / 2, "allreduce after the mismatches");
}

// Mode "check" (CF_CHECK=1): one image's part.
void run_mode_check(Context& c, cf_image_t me) {
  Log& log = c.log;
  const uint32_t P = cf_images();
  const bool odd = cf_mynode() == 1;  // every image of node 1 disagrees
  auto expect = [&](bool ok, const std::string& what) {
    log.checks++;
    if (!ok) log.fail("check: image " + std::to_string(me) + ": " + what + " (" + cf_last_error() + ")");
  };
  auto untouched = [](const Bytes& b) {
    for (uint8_t x : b) {
      if (x != 0xAB) return false;
    }
    return true;
  };
  for (size_t nbytes : {size_t{8}, size_t{96 * 1024}}) {  // eager, rendezvous
    Bytes src(nbytes), dst(nbytes, 0);
    for (size_t i = 0; i < nbytes; ++i) src[i] = static_cast<uint8_t>(i * 7 + nbytes);
    const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), P - 1, src.data(), nbytes, kLocal);
    expect(rc == CF_OK && dst == src, "agreeing broadcast of " + std::to_string(nbytes) + " bytes");
  }
  Bytes src(64, 1), dst(64, 0xAB);
  int rc = cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), odd ? 16 : 8, kLocal);
  expect(rc == CF_ERR_MISMATCH && std::strstr(cf_last_error(), "argument nbytes") != nullptr && untouched(dst),
         "nbytes mismatch returned " + std::to_string(rc));
  int64_t mine = me, out[8];
  std::memset(out, 0xAB, sizeof out);
  rc = cf_coll_allreduce(CF_TEAM_ALL, out, &mine, 8, 1, odd ? CF_BUILTIN(CF_OP_MAX, CF_DT_INT64) : kSumInt64, 0,
                         kLocal);
  expect(rc == CF_ERR_MISMATCH && std::strstr(cf_last_error(), "argument op") != nullptr &&
             untouched(Bytes(reinterpret_cast<uint8_t*>(out), reinterpret_cast<uint8_t*>(out + 8))),
         "op mismatch returned " + std::to_string(rc));
  int64_t sum = 0;
  rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSumInt64, 0, kLocal);
  expect(rc == CF_OK && sum == int64_t{P} * (P - 1) / 2, "allreduce after the mismatches");
}

}  // namespace mp
