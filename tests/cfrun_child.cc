// The program tests/cfrun_test.cc starts under cfrun. argv[1] picks what
// every rank does; "rank 1" below is the one that misbehaves:
//   kv                put rank -> value, fence, read every other rank's value,
//                     print OK, bye (twice: it is idempotent), exit 0
//   print             print two lines and a partial one to stdout and a line
//                     to stderr, bye, exit 0
//   env               print CF_RANK, CF_NODES, CF_IMAGES, CF_KVS and what
//                     Bootstrap read from them, bye, exit 0
//   cpus              print "cpus" and the CPUs it may run on, bye, exit 0
//   kill              rank 1 raises SIGKILL after the fence
//   exit3             rank 1 exits 3 after the fence, without bye
//   nobye             rank 1 exits 0 after the fence, without bye
//       (in these three the others wait for LOST through watch(), print
//        "LOST <rank> <how>", bye and exit 0)
//   hang              rank 1 exits 3 after the fence; the others never exit
//   hang-ignore-term  as hang, and the others ignore SIGTERM
//   sleep             every rank prints READY after the fence and never exits
//   sleep-pid         the same, printing "READY pid=PID"
//   late              rank 0 prints "KVS <CF_KVS> SECRET <CF_JOB_SECRET>" (the
//                     test records a real proof with it); rank 1 connects
//                     only once a byte arrives on the FIFO named by
//                     CF_TEST_GO_FIFO; then as kv, printing any LOST notice
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>

#include "transports/bootstrap/bootstrap.h"

namespace {

constexpr int kWaitMs = 20000;

int fail(const std::string& what) {
  std::fprintf(stderr, "cfrun_child: %s\n", what.c_str());
  return 1;
}

void say(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);  // a pipe is block-buffered and the process may die next
}

[[noreturn]] void block_forever() {
  for (;;) ::pause();
}

int exchange_values(carflow::Bootstrap& b) {
  std::string error;
  const std::string mine = "value-of-" + std::to_string(b.rank());
  if (!b.put("rank/" + std::to_string(b.rank()), mine, &error)) return fail(error);
  if (!b.fence(kWaitMs, &error)) return fail(error);
  for (uint32_t r = 0; r < b.nodes(); ++r) {
    std::string value;
    if (!b.get("rank/" + std::to_string(r), &value, kWaitMs, &error)) return fail(error);
    if (value != "value-of-" + std::to_string(r)) return fail("rank " + std::to_string(r) + ": " + value);
  }
  say("OK");
  if (!b.bye(&error) || !b.bye(&error)) return fail(error);
  return 0;
}

int print_lines(carflow::Bootstrap& b) {
  std::printf("line one\nline two\npartial");
  std::fflush(stdout);
  std::fprintf(stderr, "err line\n");
  std::string error;
  return b.bye(&error) ? 0 : fail(error);
}

int print_env(carflow::Bootstrap& b) {
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(name) + "=" + (v ? v : "(unset)");
  };
  say(env("CF_RANK") + " " + env("CF_NODES") + " " + env("CF_IMAGES") + " " + env("CF_KVS"));
  say("bootstrap rank=" + std::to_string(b.rank()) + " nodes=" + std::to_string(b.nodes()) +
      " images=" + std::to_string(b.images_per_node()));
  std::string error;
  return b.bye(&error) ? 0 : fail(error);
}

int print_cpus(carflow::Bootstrap& b) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (::sched_getaffinity(0, sizeof set, &set) != 0) return fail("sched_getaffinity failed");
  std::string line = "cpus";
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) line += " " + std::to_string(c);
  }
  say(line);
  std::string error;
  return b.bye(&error) ? 0 : fail(error);
}

// Rank 1 fails as `mode` says after the fence; the others report the LOST
// (mode "quiet", under cfrun --no-lost-notices: rank 1 exits 3, and the
// others say NO NOTICE when none came within kQuietMs).
int lose_rank_one(carflow::Bootstrap& b, const std::string& mode) {
  std::string error;
  // Before the fence: once rank 1 passes it, it may exit and cfrun's SIGTERM
  // (CF_EXIT_TIMEOUT=0) may arrive at once.
  if (mode == "hang-ignore-term" && b.rank() != 1) std::signal(SIGTERM, SIG_IGN);
  if (!b.fence(kWaitMs, &error)) return fail(error);
  if (b.rank() == 1) {
    if (mode == "kill") std::raise(SIGKILL);
    if (mode == "nobye") std::exit(0);
    std::exit(3);
  }
  if (mode.starts_with("hang")) {
    say("WAITING");
    block_forever();
  }
  // Shared with the callback: the reader thread may outlive this frame.
  struct Seen {
    std::mutex mu;
    std::condition_variable cv;
    std::string first;
  };
  auto seen = std::make_shared<Seen>();
  b.watch([seen](uint32_t rank, const std::string& how) {
    std::lock_guard<std::mutex> lock(seen->mu);
    if (seen->first.empty()) seen->first = "LOST " + std::to_string(rank) + " " + how;
    seen->cv.notify_all();
  });
  std::string notice;
  {
    constexpr int kQuietMs = 1500;  // cfrun's notices come within milliseconds
    std::unique_lock<std::mutex> lock(seen->mu);
    if (!seen->cv.wait_for(lock, std::chrono::milliseconds(mode == "quiet" ? kQuietMs : kWaitMs),
                           [&] { return !seen->first.empty(); })) {
      if (mode != "quiet") return fail("no LOST notice within " + std::to_string(kWaitMs) + " ms");
    }
    notice = seen->first.empty() ? "NO NOTICE" : seen->first;
  }
  say(notice);
  return b.bye(&error) ? 0 : fail(error);
}

// A slow rank 1: strangers reach the store before it does.
bool wait_for_go() {
  const char* fifo = std::getenv("CF_TEST_GO_FIFO");
  if (fifo == nullptr) return false;
  const int fd = ::open(fifo, O_RDONLY | O_CLOEXEC);  // blocks until the test opens it to write
  char byte;
  const bool go = fd >= 0 && ::read(fd, &byte, 1) == 1;
  if (fd >= 0) ::close(fd);
  return go;
}

int run(const std::string& mode) {
  std::string error;
  const char* rank = std::getenv("CF_RANK");
  if (mode == "late" && rank != nullptr && std::string(rank) == "1" && !wait_for_go()) {
    return fail("no go on CF_TEST_GO_FIFO");
  }
  std::unique_ptr<carflow::Bootstrap> b = carflow::Bootstrap::from_env(&error);
  if (!b) return fail(error.empty() ? "not started by cfrun (CF_KVS unset)" : error);
  if (mode == "kv") return exchange_values(*b);
  if (mode == "late") {
    if (b->rank() == 0) {
      say(std::string("KVS ") + std::getenv("CF_KVS") + " SECRET " + std::getenv("CF_JOB_SECRET"));
    }
    b->watch([](uint32_t r, const std::string& how) { say("LOST " + std::to_string(r) + " " + how); });
    return exchange_values(*b);
  }
  if (mode == "print") return print_lines(*b);
  if (mode == "env") return print_env(*b);
  if (mode == "cpus") return print_cpus(*b);
  if (mode == "kill" || mode == "exit3" || mode == "nobye" || mode == "hang" ||
      mode == "hang-ignore-term" || mode == "quiet") {
    return lose_rank_one(*b, mode);
  }
  if (mode == "sleep" || mode == "sleep-pid") {
    if (!b->fence(kWaitMs, &error)) return fail(error);
    say(mode == "sleep" ? std::string("READY") : "READY pid=" + std::to_string(::getpid()));
    block_forever();
  }
  return fail("unknown mode '" + mode + "'");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return fail("usage: cfrun_child MODE");
  return run(argv[1]);
}
