// Across processes: runs tests/mp_collectives under the real launcher
// (tools/cfrun) over the libfabric transport and checks what the processes
// and the launcher report: every collective verified over 2, 3 and 4
// processes x 1 and 3 images, random mixes of them (soak: sync modes,
// aggregates, teams, sync orders), the tcp provider, CF_PROGRESS=block, a
// killed peer, a peer calling exit(3), a 10,000-message unexpected flood,
// a late peer that blocked waiters must not spin for, three network
// namespaces joined by a bridge (when this host lets us make them), the
// same losing packets with every message late, a stranger from another
// namespace at the store and a liveness listener, and lost peers found
// without the launcher's notices (a kill, a network cut between
// namespaces) but no false loss for a stopped-and-resumed peer.
// Every run has cfrun's --timeout, so nothing here can hang.
//
// Usage (tests/BUILD passes them): multiproc_test CFRUN MP_COLLECTIVES JOB_STRANGER
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/shell_run.h"

#include <dirent.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <regex>
#include <string>
#include <thread>
#include <vector>

namespace {

std::string g_cfrun, g_program, g_stranger;

// Runs mp_collectives (in args) under cfrun with a time limit.
Run run(const std::string& env, const std::string& args, int timeout_s = 200) {
  return capture(env + " " + g_cfrun + " --timeout " + std::to_string(timeout_s) + " " + args);
}

// The summary lines of mp_collectives, one per process.
std::vector<std::smatch> summaries(const std::string& output) {
  static const std::regex line(
      R"(mp (\w+): node (\d+) of (\d+), (\d+) images per node: (\d+) checks, (\d+) failures, ([\d.]+) s wall, ([\d.]+) s cpu, provider ([^,]*), (\d+) unexpected, (\d+) credit waits, (\d+) rendezvous, (\d+) host ring, (\d+) ring full, (\d+) direct reads, (\d+) pumped, (\d+) split copies, (\d+) split written, (\d+) inproc ring)");
  std::vector<std::smatch> out;
  for (std::sregex_iterator it(output.begin(), output.end(), line), end; it != end; ++it) out.push_back(*it);
  return out;
}
// The summary line's fields (summaries' groups).
enum Field {
  kMode = 1, kNode = 2, kNodes = 3, kImages = 4, kChecks = 5, kFailures = 6, kWall = 7, kCpu = 8,
  kUnexpected = 10, kCreditWaits = 11, kRendezvous = 12, kHostRing = 13, kRingFull = 14, kDirectReads = 15,
  kPumped = 16, kSplitCopies = 17, kSplitWritten = 18, kInprocRing = 19,
};

// cfrun's status 0 and one summary line per node (the caller logs r.output).
std::vector<std::smatch> node_summaries(const Run& r, size_t nodes) {
  CHECK(r.status == 0);
  auto lines = summaries(r.output);
  REQUIRE(lines.size() == nodes);
  return lines;
}

void expect_all_verified(const Run& r, int nodes, uint64_t min_checks_per_image) {
  INFO(r.output);
  CHECK(r.status == 0);
  const auto lines = summaries(r.output);
  CHECK(lines.size() == static_cast<size_t>(nodes));
  uint64_t rendezvous = 0;
  for (const auto& m : lines) {
    CHECK(m[kFailures].str() == "0");
    CHECK(std::stoull(m[kChecks].str()) >= min_checks_per_image * std::stoull(m[kImages].str()));
    rendezvous += std::stoull(m[kRendezvous].str());
  }
  CHECK(rendezvous > 0);  // the large sizes took the rendezvous path
}

// Every node reports exactly `checks` checks and no failure.
void expect_each_node(const Run& r, size_t nodes, const std::string& checks) {
  INFO(r.output);
  CHECK(r.status == 0);
  const auto lines = summaries(r.output);
  CHECK(lines.size() == nodes);
  for (const auto& m : lines) {
    CHECK(m[kFailures].str() == "0");
    CHECK(m[kChecks].str() == checks);
  }
}

}  // namespace

TEST_CASE("every collective over 2, 3 and 4 processes x 1 and 3 images matches the reference (shm)") {
  for (int nodes : {2, 3, 4}) {
    for (int images : {1, 3}) {
      CAPTURE(nodes);
      CAPTURE(images);
      const Run r = run("", "-n " + std::to_string(nodes) + " --images " + std::to_string(images) + " " + g_program);
      expect_all_verified(r, nodes, 150);
      CHECK(r.output.find("provider shm") != std::string::npos);
      uint64_t direct = 0;
      for (const auto& m : summaries(r.output)) {
        CHECK(std::stoull(m[kHostRing].str()) > 0);  // host rings used
        direct += std::stoull(m[kDirectReads].str());
      }
      CHECK(direct > 0);  // large exchanges read the sender's buffer (both directions busy)
    }
  }
}

TEST_CASE("every collective over 2 processes with split copies off (streams) matches the reference") {
  // The large plain copies one way stream instead (by default they are
  // split copies from 32 KiB); both ways they are still direct reads.
  const Run r = run("CF_HOST_SPLIT_BYTES=0", "-n 2 --images 1 " + g_program);
  expect_all_verified(r, 2, 150);
  for (const auto& m : summaries(r.output)) CHECK(m[kSplitCopies].str() == "0");
}

TEST_CASE("the same over tcp;ofi_rxm and over libfabric shm alone, and with CF_PROGRESS=block and thread") {
  for (const char* env : {"CF_OFI_PROVIDER='tcp;ofi_rxm' CF_HOST_RINGS=0", "CF_HOST_RINGS=0"}) {
    const Run r = run(env, "-n 2 --images 2 " + g_program);
    expect_all_verified(r, 2, 150);
    for (const auto& m : summaries(r.output)) CHECK(m[kHostRing].str() == "0");  // no host rings
  }
  expect_all_verified(run("CF_PROGRESS=block", "-n 3 --images 1 " + g_program), 3, 150);
  expect_all_verified(run("CF_PROGRESS=thread", "-n 2 --images 2 " + g_program), 2, 150);
}

TEST_CASE("random mixes of collectives, sync modes, aggregates, teams and sync orders match the reference (soak)") {
  // mp_collectives soak: each run draws its ops from its seed; every image
  // checks every destination (and the bytes past it, and its sources)
  // against the sequential reference. One process of 6 images, processes
  // of several images with and without inproc rings, libfabric's eager and
  // rendezvous paths without host rings, the progress thread, and blocking
  // waits with 4 processes on the 2 cores. With a 64 KiB schedule cache
  // the progress thread completes CARs of schedules that the images evict
  // as soon as their calls end (it once read a freed schedule: 6 runs of 6
  // crashed).
  struct Soak {
    const char* env;
    int nodes, images, seed, epochs;
  };
  for (const Soak& s : {Soak{"", 1, 6, 7, 150}, Soak{"", 2, 3, 8, 150}, Soak{"CF_INPROC_RINGS=1", 2, 3, 9, 120},
                        Soak{"CF_HOST_RINGS=0 CF_EAGER_BYTES=64", 3, 1, 10, 150},
                        Soak{"CF_PROGRESS=thread", 2, 2, 11, 120}, Soak{"CF_PROGRESS=block", 4, 1, 12, 100},
                        Soak{"CF_PROGRESS=thread CF_SCHEDULE_CACHE_BYTES=65536", 2, 2, 11, 120}}) {
    const std::string env = s.env;
    CAPTURE(env);
    CAPTURE(s.nodes);
    CAPTURE(s.images);
    const Run r = run(s.env, "-n " + std::to_string(s.nodes) + " --images " + std::to_string(s.images) + " " +
                                 g_program + " soak " + std::to_string(s.seed) + " " + std::to_string(s.epochs));
    INFO(r.output);
    for (const auto& m : node_summaries(r, s.nodes)) {
      CHECK(m[kMode].str() == "soak");
      CHECK(m[kFailures].str() == "0");
      // Each epoch checks at least its barrier and each op (about 9 on average).
      CHECK(std::stoull(m[kChecks].str()) >= uint64_t{5} * s.epochs * std::stoull(m[kImages].str()));
    }
  }
}

TEST_CASE("rings between the image threads of each process beside libfabric (CF_INPROC_RINGS=1)") {
  // Off by default here (more images than cores): forced on, images of a
  // process exchange through rings while their processes use the host
  // rings, and a sleeping image is woken through its eventfd.
  for (const char* env : {"CF_INPROC_RINGS=1", "CF_INPROC_RINGS=1 CF_PROGRESS=block"}) {
    CAPTURE(env);
    const Run r = run(env, "-n 2 --images 3 " + g_program);
    expect_all_verified(r, 2, 150);
    for (const auto& m : summaries(r.output)) CHECK(std::stoull(m[kInprocRing].str()) > 0);
  }
}

TEST_CASE("runs of images back to back: messages of a node that starts the next run early are kept") {
  for (const char* env : {"CF_HOST_RINGS=0", ""}) {
    CAPTURE(env);
    // 30 runs x (50 allreduces + 1 barrier)
    expect_each_node(run(env, "-n 4 " + g_program + " reruns"), 4, "1530");
  }
}

TEST_CASE("CF_CHECK=1 across processes: disagreeing nbytes or op fails every image with CF_ERR_MISMATCH naming it") {
  for (const char* env : {"CF_CHECK=1", "CF_CHECK=1 CF_HOST_RINGS=0"}) {  // rings, and the libfabric header
    CAPTURE(env);
    // 2 images x (2 broadcasts + 2 mismatches + 1 allreduce)
    expect_each_node(run(env, "-n 3 --images 2 " + g_program + " check"), 3, "10");
  }
}

TEST_CASE("without CF_CHECK, a receive that meets a message of another size fails with CF_ERR_MISMATCH") {
  for (const char* env : {"", "CF_HOST_RINGS=0"}) {  // from the ring (taken at once or posted), and libfabric
    CAPTURE(env);
    expect_each_node(run(env, "-n 2 " + g_program + " sizes"), 2, "21");  // 20 broadcasts + 1 allreduce
  }
}

TEST_CASE("a killed peer: every other process's wait returns CF_ERR_PEER_LOST naming it, and cfrun says how it died") {
  const Run r = run("CF_EXIT_TIMEOUT=3", "-n 3 --images 2 " + g_program + " kill");
  INFO(r.output);
  CHECK(r.status == 128 + 9);
  CHECK(std::regex_search(r.output, std::regex(R"(cfrun: rank 1 \(pid \d+\) was killed by signal 9)")));
  // Both survivors, both their images, within CF_PEER_TIMEOUT (5 s) of starting.
  const std::regex lost(R"(\[(0|2)\] lost: 2 waits returned CF_ERR_PEER_LOST: .*node 1 was lost)");
  CHECK(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), lost), std::sregex_iterator()) == 2);
  for (const auto& m : summaries(r.output)) CHECK(std::stod(m[kWall].str()) < 5.0);
}

TEST_CASE("a peer killed while a large message streams to it: the sender's wait returns CF_ERR_PEER_LOST") {
  // By a split copy (the default for 64 MiB: the receiver reads 1 MiB a
  // progress call, so it sees the first byte mid-transfer) and by a stream.
  for (const char* split : {"", "CF_HOST_SPLIT_BYTES=0 "}) {
    const Run r = run(std::string(split) + "CF_EXIT_TIMEOUT=3", "-n 2 " + g_program + " killstream");
    INFO(split, r.output);
    CHECK(r.status == 128 + 9);
    CHECK(std::regex_search(r.output, std::regex(R"(\[1\] event at_ms=\d+ first byte 90)")));  // 0x5a arrived
    CHECK(std::regex_search(r.output, std::regex(R"(\[0\] lost: 1 waits returned CF_ERR_PEER_LOST: .*node 1 was lost)")));
    for (const auto& m : summaries(r.output)) {
      CHECK(std::stod(m[kWall].str()) < 5.0);
      CHECK(std::stoull(m[kRendezvous].str()) > 0);  // it went by rendezvous (RTS, then a split copy or stream)
    }
  }
}

TEST_CASE("a peer calling exit(3) mid-collective ends the job with status 3") {
  const Run r = run("CF_EXIT_TIMEOUT=3", "-n 3 " + g_program + " exit3");
  INFO(r.output);
  CHECK(r.status == 3);
  CHECK(std::regex_search(r.output, std::regex(R"(cfrun: rank 1 \(pid \d+\) exited with status 3)")));
  CHECK(std::regex_search(r.output, std::regex(R"(lost: 1 waits returned CF_ERR_PEER_LOST)")));
}

TEST_CASE("a process whose cf_init failed exits with its status and message, and so do the others, no signal") {
  struct Case {
    const char* setting;  // rank 1's alone
    const char* cause;    // in rank 1's message
  };
  // Before the bootstrap; at the transport, after the others opened theirs;
  // at the address exchange (tcp cannot reach shm addresses), after the
  // others made their host rings.
  for (const Case& k : {Case{"CF_EAGER_BYTES=many", "CF_EAGER_BYTES='many'"},
                        Case{"CF_OFI_PROVIDER=bogus", "libfabric provider 'bogus'"},
                        Case{"CF_OFI_PROVIDER=tcp", "fi_av_insert"}}) {
    const Run r = run("", "-n 3 sh -c 'if [ \"$CF_RANK\" = 1 ]; then export " + std::string(k.setting) + "; fi; exec " +
                              g_program + " none'", 60);
    INFO(k.setting, r.output);
    CHECK(r.status == 1);
    CHECK(r.output.find("signal") == std::string::npos);
    CHECK(r.output.find("[1] cf_init: " + std::string(k.cause)) != std::string::npos);
    for (const char* rank : {"0", "1", "2"}) {
      CHECK(std::regex_search(r.output, std::regex(std::string(R"(cfrun: rank )") + rank +
                                                   R"( \(pid \d+\) exited with status 1)")));
    }
    for (const char* rank : {"0", "2"}) {
      CHECK(std::regex_search(r.output, std::regex(std::string(R"(\[)") + rank +
                                                   R"(\] cf_init: bootstrap get '\w+\.\d': .*rank 1 was lost)")));
    }
  }
}

TEST_CASE("a flood of 10,000 unexpected messages at one image completes under credit flow control") {
  // Through libfabric alone (credits), then with the host rings in front
  // (a full ring holds its senders' messages back in their backlog).
  for (const char* env : {"CF_OFI_CREDITS=16 CF_HOST_RINGS=0", "CF_OFI_CREDITS=16"}) {
    CAPTURE(env);
    const Run r = run(env, "-n 5 " + g_program + " flood");
    INFO(r.output);
    CHECK(r.status == 0);
    const auto lines = summaries(r.output);
    REQUIRE(lines.size() == 5);
    const bool rings = std::string(env).find("CF_HOST_RINGS=0") == std::string::npos;
    uint64_t waits = 0, ring_sends = 0, ring_full = 0, unexpected = 0;
    for (const auto& m : lines) {
      CHECK(m[kFailures].str() == "0");  // every gathered value verified at image 0
      if (m[kNode].str() == "0") unexpected = std::stoull(m[kUnexpected].str());
      waits += std::stoull(m[kCreditWaits].str());
      if (m[kNode].str() != "0") ring_sends += std::stoull(m[kHostRing].str());
      if (m[kNode].str() != "0") ring_full += std::stoull(m[kRingFull].str());
    }
    if (!rings) {
      // Through libfabric alone every gather reaches image 0 before it posts
      // (the side barrier's message follows them on each pair), and senders
      // ran out of credits and waited instead of overrunning the receiver.
      CHECK(unexpected >= 10000);
      CHECK(waits > 0);
    } else {
      // With rings, a sender's side-barrier message can take a ring slot
      // freed while its earlier gathers still wait in its backlog, so image
      // 0 may post some receives before they land: the count of unexpected
      // arrivals is not fixed. Whether a ring fills depends on how fast
      // image 0, polling inside its side barrier, takes the first message of
      // each poll into its unexpected queue: since its polls got faster
      // (this is the case that made ring_full 0 in one run of many), that is
      // timing, not a guarantee; host_rings_test checks the full ring
      // itself. What is fixed: the rings carried the whole flood (2500
      // gathers per sender), image 0 took unexpected arrivals, and every
      // value was verified above.
      CHECK(ring_sends >= 10000);
      MESSAGE("senders found a ring full ", ring_full, " times");
      CHECK(unexpected > 0);
    }
  }
}

TEST_CASE("a sender that runs past its ring while the receiver waits on a third process completes") {
  // Node 1 posts no receive from node 0 until node 2 is done, and node 2
  // waits on node 0: node 1 must take node 0's messages from a ring that
  // stays full without being asked (HostRings::kStuckPolls), or nobody
  // finishes (cfrun's timeout).
  const Run r = run("", "-n 3 " + g_program + " runahead", 60);
  INFO(r.output);
  for (const auto& m : node_summaries(r, 3)) {
    CHECK(m[kFailures].str() == "0");  // every broadcast delivered, in order
    if (m[kNode].str() == "0") CHECK(std::stoull(m[kRingFull].str()) > 0);  // node 0 found its ring full
    if (m[kNode].str() == "1") CHECK(std::stoull(m[kUnexpected].str()) > 0);  // node 1 took some unasked
  }
}

TEST_CASE("a root's own large block is copied while its stream goes out") {
  // Streams: split copies (from 32 KiB by default) would take these.
  const Run r = run("CF_HOST_SPLIT_BYTES=0", "-n 2 " + g_program + " pump", 60);
  INFO(r.output);
  for (const auto& m : node_summaries(r, 2)) {
    CHECK(m[kFailures].str() == "0");  // every byte verified, the root's own block included
    CHECK(std::stoull(m[kChecks].str()) >= 4);
    // The root streamed part of each message from inside its own copy.
    if (m[kNode].str() == "0") CHECK(std::stoull(m[kPumped].str()) > 0);
    if (m[kNode].str() == "1") CHECK(m[kPumped].str() == "0");
    CHECK(m[kSplitCopies].str() == "0");
  }
}

TEST_CASE("a large message one way is copied by both processes, each its share (split copies)") {
  const Run r = run("", "-n 2 " + g_program + " split", 120);  // the default: from 32 KiB
  INFO(r.output);
  for (const auto& m : node_summaries(r, 2)) {
    CHECK(m[kFailures].str() == "0");  // every byte in place, none past the end
    CHECK(std::stoull(m[kChecks].str()) >= 12);  // 2 rounds or more of 4 broadcasts, a gather and a scatter
    // Node 1 receives the broadcasts and scatters, node 0 the gathers: by
    // split copies, with their senders writing part of some of them.
    CHECK(std::stoull(m[kSplitCopies].str()) > 0);
    CHECK(std::stoull(m[kSplitWritten].str()) > 0);
    CHECK(m[kDirectReads].str() == "0");
  }
  // Off: the same messages stream.
  const Run off = run("CF_HOST_SPLIT_BYTES=0", "-n 2 " + g_program + " split", 120);
  INFO(off.output);
  for (const auto& m : node_summaries(off, 2)) {
    CHECK(m[kFailures].str() == "0");
    CHECK(m[kSplitCopies].str() == "0");
    CHECK(m[kSplitWritten].str() == "0");
  }
}

TEST_CASE("a message from 32 KiB to 1 MiB one way is a split copy; below 32 KiB, or with CF_HOST_SPLIT_BYTES at 1 MiB, it streams") {
  // The midsize mode: each node receives 3 rounds of one message of each
  // size (node 1 the broadcasts, node 0 the gathers): 20 KiB, then five
  // from 32 KiB to 1 MiB - 1 (run_mode_midsize). By default the five take
  // split copies (up to 128 KiB one piece, which the receiver reads
  // whole) and the 20 KiB one streams; a lower count means a mid-size
  // message went back to the stream.
  const uint64_t rounds = 3, sizes = 6, from_32k = 5;
  for (const char* env : {"", "CF_HOST_SPLIT_BYTES=1048576"}) {
    CAPTURE(env);
    const Run r = run(env, "-n 2 " + g_program + " midsize", 120);
    INFO(r.output);
    for (const auto& m : node_summaries(r, 2)) {
      CHECK(m[kFailures].str() == "0");  // every byte in place, none past the end
      CHECK(std::stoull(m[kChecks].str()) == 2 * rounds * sizes);
      CHECK(std::stoull(m[kSplitCopies].str()) == (*env == 0 ? rounds * from_32k : 0));
      CHECK(m[kDirectReads].str() == "0");  // one way only: no direct reads
    }
  }
}

TEST_CASE("an exchange of combines from 32 KiB to 2 MiB is read whole by a receiver; one way, or larger, it streams") {
  // The combines mode: 3 rounds of recursive-doubling allreduces of 20
  // KiB, 32 KiB, 96 KiB + 8, 1 MiB, 2 MiB and 3 MiB, then a reduce_vec.
  // Of each exchange of 32 KiB to 2 MiB, whichever receiver takes the
  // other's message first still has its own out: it reads (a direct read),
  // so the nodes read at least 4 x 3 between them; 20 KiB, 3 MiB and the
  // one-way reduce_vec stream. With CF_HOST_SPLIT_BYTES=0 all stream.
  for (const char* env : {"", "CF_HOST_SPLIT_BYTES=0"}) {
    CAPTURE(env);
    const Run r = run(env, "-n 2 " + g_program + " combines", 120);
    INFO(r.output);
    uint64_t reads = 0;
    for (const auto& m : node_summaries(r, 2)) {
      CHECK(m[kFailures].str() == "0");  // every element right, none past the end
      CHECK(std::stoull(m[kChecks].str()) == 3 * 7);
      reads += std::stoull(m[kDirectReads].str());
    }
    if (*env == 0) {
      CHECK(reads >= 12);
      CHECK(reads <= 24);
    } else {
      CHECK(reads == 0);
    }
  }
}

TEST_CASE("CF_PROGRESS=block keeps processes waiting on a late peer off the CPU") {
  const Run r = run("CF_PROGRESS=block", "-n 2 " + g_program + " late");
  INFO(r.output);
  CHECK(r.status == 0);
  for (const auto& m : summaries(r.output)) {
    if (m[kNode].str() != "0") continue;
    const double wall = std::stod(m[kWall].str()), cpu = std::stod(m[kCpu].str());
    CHECK(wall > 1.4);        // it did wait for the late peer
    CHECK(cpu < 0.5 * wall);  // and slept meanwhile
  }
}

// Open MPI's launcher, or a skip message when it is not installed.
bool have_openmpi() {
  if (std::system("command -v mpirun.openmpi >/dev/null 2>&1") == 0) return true;
  MESSAGE("skipped: mpirun.openmpi is not installed (Debian openmpi-bin)");
  return false;
}
// mpirun for `np` processes that pass CF_IMAGES on, as root, on fewer cores.
std::string openmpi_run(int np) {
  return "mpirun.openmpi --allow-run-as-root --oversubscribe -np " + std::to_string(np) + " -x CF_IMAGES ";
}

TEST_CASE("under Open MPI's mpirun, cf_init joins the job through PMIx (no carflow launcher)") {
  if (!have_openmpi()) return;
  const Run r = capture("CF_IMAGES=2 timeout 200 " + openmpi_run(3) + g_program);
  expect_all_verified(r, 3, 150);
  for (const auto& m : summaries(r.output)) CHECK(m[kNodes].str() == "3");  // one job of 3 nodes
}

TEST_CASE("under mpirun, a CF_IMAGES that is not a number is an error naming it") {
  if (!have_openmpi()) return;
  const Run r = capture("CF_IMAGES=abc timeout 200 " + openmpi_run(2) + g_program);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("CF_IMAGES='abc': expected an integer in [1, 65536]") != std::string::npos);
}

TEST_CASE("under Slurm's srun --mpi=pmix, cf_init joins the job through PMIx (no carflow launcher)") {
  // Opt-in: srun on a shared cluster may queue. CI makes a one-node cluster
  // with tests/slurm_local.sh and sets CF_TEST_SRUN=1.
  const char* opt_in = std::getenv("CF_TEST_SRUN");
  if (opt_in == nullptr || std::string(opt_in) != "1") {
    MESSAGE("skipped: set CF_TEST_SRUN=1 with a Slurm cluster at hand (tests/slurm_local.sh makes one)");
    return;
  }
  // -O: three tasks on fewer CPUs; --export: CF_IMAGES reaches the tasks.
  const Run r = capture("timeout 200 srun --mpi=pmix -O -n 3 --export=ALL,CF_IMAGES=2 " + g_program);
  expect_all_verified(r, 3, 150);
  for (const auto& m : summaries(r.output)) CHECK(m[kNodes].str() == "3");  // one job of 3 nodes
}

TEST_CASE("under a PMI-1 launcher (MPICH's mpirun) cf_init refuses with a clear error") {
  if (std::system("command -v mpirun.mpich >/dev/null 2>&1") != 0) {
    MESSAGE("skipped: mpirun.mpich is not installed");
    return;
  }
  const Run r = capture("timeout 100 mpirun.mpich -np 2 " + g_program);
  INFO(r.output);
  CHECK(r.status != 0);
  CHECK(r.output.find("PMI-1/2 launcher") != std::string::npos);
}

// Network namespaces NAME_PREFIX ns0.. on a bridge PREFIXbr0 (SUBNET.254),
// process i at SUBNET.(i+1) on eth0; removed again by the destructor.
// ok() is false where this host does not let us make them.
class Namespaces {
 public:
  Namespaces(std::string prefix, std::string subnet, int count)
      : prefix_(std::move(prefix)), subnet_(std::move(subnet)), count_(count) {
    teardown();
    const std::string p = prefix_, bridge = p + "br0";
    const std::string setup = "set -e\n ip link add " + bridge + " type bridge && ip addr add " + subnet_ +
                              ".254/24 dev " + bridge + " && ip link set " + bridge + " up\n"
                              " for i in $(seq 0 " + std::to_string(count_ - 1) + "); do\n"
                              "  ip netns add " + p + "ns$i\n"
                              "  ip link add " + p + "veth$i type veth peer name eth0 netns " + p + "ns$i\n"
                              "  ip link set " + p + "veth$i master " + bridge + " && ip link set " + p + "veth$i up\n"
                              "  ip -n " + p + "ns$i addr add " + subnet_ + ".$((i+1))/24 dev eth0\n"
                              "  ip -n " + p + "ns$i link set eth0 up && ip -n " + p + "ns$i link set lo up\n"
                              " done";
    ok_ = std::system(("sh -c '" + setup + "' >/dev/null 2>&1").c_str()) == 0;
    if (!ok_) teardown();
  }
  ~Namespaces() { teardown(); }
  bool ok() const { return ok_; }
  // cfrun's options that put process i in namespace i, for the first
  // `processes` namespaces (all by default).
  std::string cfrun_hosts(int processes = 0) const {
    std::string hosts;
    for (int i = 0; i < (processes > 0 ? processes : count_); ++i) {
      hosts += (i ? ",ns:" : "ns:") + name(i);
    }
    return "--hosts " + hosts + " --kvs-host " + bridge_address();
  }
  // The root namespace's address on the bridge (where cfrun's store listens).
  std::string bridge_address() const { return subnet_ + ".254"; }
  std::string name(int i) const { return prefix_ + "ns" + std::to_string(i); }
  // Drops `percent` % of the packets that enter and of those that leave each
  // namespace's eth0, at random (nftables; this kernel has no netem), and
  // counts them. False where nft cannot.
  bool lose_packets(int percent) const {
    const std::string drop = " numgen random mod 100 < " + std::to_string(percent) + " counter drop; }";
    for (int i = 0; i < count_; ++i) {
      if (!nft(i, "add table inet cfloss {\n"
                  " chain in { type filter hook input priority 0; iifname \"eth0\"" + drop + "\n"
                  " chain out { type filter hook output priority 0; oifname \"eth0\"" + drop + "\n}\n")) {
        return false;
      }
    }
    return true;
  }
  // Runs nft commands (a script without single quotes) in namespace i.
  bool nft(int i, const std::string& script) const {
    const Run r = capture("printf '%s' '" + script + "' | ip netns exec " + name(i) + " nft -f -");
    if (r.status != 0) MESSAGE("nft in ", name(i), ": ", r.output);
    return r.status == 0;
  }
  // The address of the node that process i is (SUBNET.(i+1)).
  std::string address(int i) const { return subnet_ + "." + std::to_string(i + 1); }
  // Packets the rules of lose_packets dropped in namespace i.
  uint64_t packets_lost(int i) const {
    const std::string listing = capture("ip netns exec " + name(i) + " nft list table inet cfloss").output;
    static const std::regex counter(R"(counter packets (\d+))");
    uint64_t lost = 0;
    for (std::sregex_iterator it(listing.begin(), listing.end(), counter), end; it != end; ++it) {
      lost += std::stoull((*it)[1].str());
    }
    return lost;
  }

 private:
  void teardown() const {
    const std::string p = prefix_;
    (void)!std::system(("for i in $(seq 0 " + std::to_string(count_ - 1) + "); do ip netns del " + p +
                        "ns$i 2>/dev/null; ip link del " + p + "veth$i 2>/dev/null; done; ip link del " + p +
                        "br0 2>/dev/null; true")
                           .c_str());
  }
  std::string prefix_, subnet_;
  int count_;
  bool ok_ = false;
};

TEST_CASE("three network namespaces on a bridge: one process each over tcp;ofi_rxm") {
  Namespaces ns("cf", "10.99.0", 3);
  if (!ns.ok()) {
    MESSAGE("skipped: cannot create network namespaces here (needs root and iproute2)");
    return;
  }
  const Run r = run("CF_OFI_PROVIDER='tcp;ofi_rxm' FI_TCP_IFACE=eth0", "-n 3 " + ns.cfrun_hosts() + " " + g_program + " all");
  expect_all_verified(r, 3, 150);
}

TEST_CASE("three namespaces losing 5% of packets each way, every message 2 ms late: the soak is right, nobody lost") {
  // The kernel here has no netem: the loss is nftables' in each namespace
  // (a packet between two nodes crosses two eth0s: about 10% of them go),
  // the delay CF_FAULT's at every sender. TCP retransmits what is lost; a
  // link's keepalive probes are lost too, so the peer timeout leaves room
  // for several in a row (transports/README.md, "A lossy network").
  Namespaces ns("cfls", "10.95.0", 3);
  if (!ns.ok()) {
    MESSAGE("skipped: cannot create network namespaces here (needs root and iproute2)");
    return;
  }
  if (!ns.lose_packets(5)) {
    MESSAGE("skipped: cannot add nftables rules in the namespaces (needs the nftables package)");
    return;
  }
  constexpr int kEpochs = 40;
  const Run r = run("CF_OFI_PROVIDER='tcp;ofi_rxm' FI_TCP_IFACE=eth0 CF_PEER_TIMEOUT=20 CF_FAULT=delay:2000",
                    "-n 3 " + ns.cfrun_hosts() + " " + g_program + " soak 21 " + std::to_string(kEpochs), 300);
  INFO(r.output);
  for (const auto& m : node_summaries(r, 3)) {
    CHECK(m[kMode].str() == "soak");
    CHECK(m[kFailures].str() == "0");
    CHECK(std::stoull(m[kChecks].str()) >= uint64_t{5} * kEpochs);
    CHECK(r.output.find("[" + m[kNode].str() + "] carflow: CF_FAULT=delay:2000: node " + m[kNode].str() +
                        " delays every message") != std::string::npos);
  }
  CHECK(r.output.find("CF_ERR_PEER_LOST") == std::string::npos);
  CHECK(r.output.find("was lost") == std::string::npos);
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK(ns.packets_lost(i) > 0);
  }
}

// The value of environment variable `name` in a process whose environment
// holds `entry` ("" while there is none).
std::string environment_of_process_with(const std::string& entry, const std::string& name) {
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return "";
  std::string value;
  while (const dirent* e = ::readdir(proc)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    FILE* f = std::fopen(("/proc/" + std::string(e->d_name) + "/environ").c_str(), "r");
    if (f == nullptr) continue;
    std::string env;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) env.append(buf, n);
    std::fclose(f);
    if (env.find(std::string(1, '\0') + entry) == std::string::npos) continue;
    const size_t at = env.find(std::string(1, '\0') + name + "=");
    if (at != std::string::npos) value = env.substr(at + name.size() + 2, env.find('\0', at + 1) - at - name.size() - 2);
    break;
  }
  ::closedir(proc);
  return value;
}

TEST_CASE("a stranger in a fourth namespace gets nothing from a forming job's store or liveness listener") {
  // Node 2 of three namespaces is the last to join the liveness mesh: while
  // nftables drops the connection requests of nodes 0 and 1 to it, its
  // listener waits for them, open. A stranger in a fourth namespace learns
  // the store's address and the job secret from the processes' environment
  // (the secret only to record an exchange that passed, to replay it) and
  // node 2's port from ss, attacks both (tests/strangers.h), and the
  // requests are let through.
  Namespaces ns("cfat", "10.94.0", 4);
  if (!ns.ok()) {
    MESSAGE("skipped: cannot create network namespaces here (needs root and iproute2)");
    return;
  }
  if (!ns.nft(2, "add table inet cfgate { chain in { type filter hook input priority 0; ip saddr { " + ns.address(0) +
                     ", " + ns.address(1) + " } tcp flags syn drop; }; }\n")) {
    MESSAGE("skipped: cannot add nftables rules in the namespaces (needs the nftables package)");
    return;
  }
  constexpr int kEpochs = 30;
  auto job = std::async(std::launch::async, [&] {
    // The held connects must not time out (TCP_USER_TIMEOUT, from the peer timeout).
    return run("CF_OFI_PROVIDER='tcp;ofi_rxm' FI_TCP_IFACE=eth0 CF_PEER_TIMEOUT=10",
               "-n 3 " + ns.cfrun_hosts(3) + " " + g_program + " soak 22 " + std::to_string(kEpochs), 200);
  });
  // Waits (polling, up to 60 s) until node 2 listens and the job's environment can be read.
  const std::string kvs_entry = "CF_KVS=" + ns.bridge_address() + ":";
  static const std::regex any_address_listener(R"(LISTEN +\d+ +\d+ +0\.0\.0\.0:(\d+) )");
  std::smatch port;
  std::string listeners, kvs, secret;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until; std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    listeners = capture("ip netns exec " + ns.name(2) + " ss -Hltn").output;
    kvs = environment_of_process_with(kvs_entry, "CF_KVS");
    secret = environment_of_process_with(kvs_entry, "CF_JOB_SECRET");
    if (std::regex_search(listeners, port, any_address_listener) && !kvs.empty() && !secret.empty()) break;
  }
  const bool found = !port.empty() && !kvs.empty() && !secret.empty();
  CHECK_MESSAGE(found, "node 2's listeners: ", listeners, " store: ", kvs);
  Run stranger;
  if (found) {
    stranger = capture("ip netns exec " + ns.name(3) + " " + g_stranger + " " + kvs + " " + secret + " " +
                       ns.address(2) + ":" + port[1].str());
  }
  CHECK(ns.nft(2, "delete table inet cfgate\n"));
  const Run r = job.get();
  INFO("stranger:\n", stranger.output, "\njob:\n", r.output);
  CHECK(stranger.status == 0);
  CHECK(stranger.output.find("stranger: 7 store and 4 liveness connection(s) attacked") != std::string::npos);
  for (const auto& m : node_summaries(r, 3)) {
    CHECK(m[kFailures].str() == "0");
    CHECK(std::stoull(m[kChecks].str()) >= uint64_t{5} * kEpochs);
  }
  CHECK(r.output.find("CF_ERR_PEER_LOST") == std::string::npos);
  CHECK(r.output.find("was lost") == std::string::npos);
  CHECK(r.output.find("cfrun: refused 7 connection(s) to the store that did not prove the job secret (the first from " +
                      ns.address(3) + ":") != std::string::npos);
  CHECK(r.output.find("[2] carflow: liveness node 2: refused 4 connection(s) that did not prove the job key") !=
        std::string::npos);
}

// Lost-peer detection without the launcher (cfrun --no-lost-notices):
// the time from the victim's "event at_ms" to each process's "lost at_ms".
constexpr double kPeerTimeoutS = 2;
constexpr double kDetectMarginS = 1.5;  // scheduling on 2 busy cores
const char kNoNoticesEnv[] = "CF_PEER_TIMEOUT=2 CF_EXIT_TIMEOUT=10";

struct Detection {
  std::string rank, code, message;  // code: CF_ERR_PEER_LOST or CF_ERR_NO_MEM
  double delay_s;
};

// Each survivor's first failed wait (CF_ERR_PEER_LOST, or CF_ERR_NO_MEM
// where the mode allows it), in seconds after the event that `event` finds
// (its group 1: at_ms). With min_waits 2, each survivor must have seen its
// pending wait and a later one fail.
std::vector<Detection> lost_after(const std::string& output, const std::regex& event, const char* what,
                                  int min_waits = 1) {
  std::smatch found;
  REQUIRE(std::regex_search(output, found, event));
  const long long event_ms = std::stoll(found[1].str());
  static const std::regex lost(
      R"(\[(\d+)\] lost: (\d+) waits returned (CF_ERR_PEER_LOST|CF_ERR_NO_MEM): ([^\n]*)\n\[\1\] lost at_ms=(\d+))");
  std::vector<Detection> out;
  for (std::sregex_iterator it(output.begin(), output.end(), lost), end; it != end; ++it) {
    CHECK(std::stoi((*it)[2].str()) >= min_waits);
    out.push_back({(*it)[1].str(), (*it)[3].str(), (*it)[4].str(), (std::stoll((*it)[5].str()) - event_ms) / 1000.0});
    MESSAGE("node ", out.back().rank, " saw ", out.back().code, " ", out.back().delay_s, " s after ", std::string(what));
  }
  return out;
}

// The names in /dev/shm of the shm regions of process `pid` (transports/ofi names them cf_<pid>_<random>).
std::vector<std::string> shm_regions_of(const std::string& pid) {
  std::vector<std::string> names;
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return names;
  while (const dirent* e = ::readdir(dir)) {
    if (std::string(e->d_name).rfind("cf_" + pid + "_", 0) == 0) names.push_back(e->d_name);
  }
  ::closedir(dir);
  return names;
}

std::vector<Detection> detections(const std::string& output) {
  return lost_after(output, std::regex(R"(\[1\] event at_ms=(\d+))"), "the loss");
}

TEST_CASE("without launcher notices, a killed peer is found by the liveness links within CF_PEER_TIMEOUT, named") {
  const Run r = run(kNoNoticesEnv, "--no-lost-notices -n 3 --images 2 " + g_program + " kill");
  INFO(r.output);
  CHECK(r.status == 128 + 9);
  const std::vector<Detection> found = detections(r.output);
  CHECK(found.size() == 2);
  for (const Detection& d : found) {
    CHECK(d.rank != "1");
    CHECK(d.message.find("node 1 was lost (its liveness connection") != std::string::npos);
    CHECK(d.message.find("killed by signal") == std::string::npos);  // cfrun said nothing
    CHECK(d.delay_s < kPeerTimeoutS + kDetectMarginS);
  }
  // The killed process could not close its shm endpoint: cfrun removed its region.
  std::smatch killed;
  REQUIRE(std::regex_search(r.output, killed, std::regex(R"(rank 1 \(pid (\d+)\) was killed by signal 9)")));
  CHECK(shm_regions_of(killed[1].str()).empty());
}

TEST_CASE("without launcher notices, a peer whose host stops answering (a network cut) is found by keepalives") {
  Namespaces ns("cflv", "10.98.0", 3);
  if (!ns.ok()) {
    MESSAGE("skipped: cannot create network namespaces here (needs root and iproute2)");
    return;
  }
  const Run r = run(std::string(kNoNoticesEnv) + " CF_OFI_PROVIDER='tcp;ofi_rxm' FI_TCP_IFACE=eth0",
                    "--no-lost-notices -n 3 " + ns.cfrun_hosts() + " " + g_program + " cut eth0");
  INFO(r.output);
  const std::vector<Detection> found = detections(r.output);
  CHECK(found.size() == 3);  // the cut node finds the others gone too
  for (const Detection& d : found) {
    const bool keepalive = d.message.find("no keepalive reply within 2 s") != std::string::npos;
    if (d.rank == "1") {
      // The cut node's own sends may fail at once (its route is gone)
      // before a keepalive times out: either is a right diagnosis.
      CHECK((keepalive || d.message.find("its liveness connection failed: Network is unreachable") !=
                              std::string::npos));
    } else {
      CHECK(keepalive);
      CHECK(d.message.find("node 1 was lost") != std::string::npos);
    }
    CHECK(d.delay_s < kPeerTimeoutS + kDetectMarginS);
  }
  CHECK(r.output.find("FAIL") == std::string::npos);
}

TEST_CASE("a slow peer (stopped for twice CF_PEER_TIMEOUT) is not reported lost: the broadcast succeeds") {
  const Run r = run(kNoNoticesEnv, "--no-lost-notices -n 3 " + g_program + " slow");
  INFO(r.output);
  CHECK(r.status == 0);
  CHECK(r.output.find("CF_ERR_PEER_LOST") == std::string::npos);
  const auto lines = summaries(r.output);
  CHECK(lines.size() == 3);
  for (const auto& m : lines) {
    CHECK(m[kChecks].str() == "1");
    CHECK(m[kFailures].str() == "0");
    CHECK(std::stod(m[kWall].str()) >= 2 * kPeerTimeoutS);  // it really was stopped that long
  }
}

// CF_FAULT (mode "fault"): each survivor's first CF_ERR_PEER_LOST, seconds
// after the line the fault writes when it acts; the pending allreduce and
// the later barrier both fail, on every image.
std::vector<Detection> fault_detections(const std::string& output) {
  return lost_after(output, std::regex(R"(carflow: CF_FAULT=[^:]+:[^:]+: node \d+ [^\n]* at_ms=(\d+))"),
                    "the fault", 2);
}

TEST_CASE("CF_FAULT=kill_after:20,node=1: the others' pending and later waits return CF_ERR_PEER_LOST naming node 1") {
  for (const char* notices : {"", "--no-lost-notices "}) {
    const Run r = run(std::string(kNoNoticesEnv) + " CF_FAULT=kill_after:20,node=1",
                      std::string(notices) + "-n 3 --images 2 " + g_program + " fault", 60);
    INFO(notices, r.output);
    CHECK(r.status == 128 + 9);
    CHECK(std::regex_search(r.output, std::regex(R"(cfrun: rank 1 \(pid \d+\) was killed by signal 9)")));
    CHECK(std::regex_search(r.output, std::regex(R"(CF_FAULT=kill_after:20,node=1: node 1 raises SIGKILL after 20 messages)")));
    const std::vector<Detection> found = fault_detections(r.output);
    CHECK(found.size() == 2);
    for (const Detection& d : found) {
      CHECK(d.rank != "1");
      CHECK(d.message.find("node 1 was lost") != std::string::npos);
      CHECK(d.delay_s < kPeerTimeoutS + 1);
    }
    CHECK(r.output.find("FAIL") == std::string::npos);
  }
}

TEST_CASE("CF_FAULT=close_link:20,node=1: a closed liveness connection fails every node's waits, each naming a node") {
  const Run r = run(std::string(kNoNoticesEnv) + " CF_FAULT=close_link:20,node=1", "-n 3 --images 2 " + g_program + " fault", 60);
  INFO(r.output);
  CHECK(std::regex_search(r.output, std::regex(R"(node 1 closes a liveness connection after 20 messages)")));
  const std::vector<Detection> found = fault_detections(r.output);
  CHECK(found.size() == 3);
  for (const Detection& d : found) {
    CHECK(d.message.find(d.rank == "1" ? "node 0 was lost" : "was lost") != std::string::npos);
    CHECK(d.delay_s < kPeerTimeoutS + 1);
  }
  CHECK(r.output.find("FAIL") == std::string::npos);
}

// The images fall out of step at the loss (one has failed its allreduce
// while another, on a node that has not heard yet, waits in the next): a
// retry must not match a message of another round, in either progress mode.
TEST_CASE("CF_FAULT=close_link:20,node=1 with each failed allreduce retried: every retry returns CF_ERR_PEER_LOST") {
  for (const char* progress : {"block", "thread"}) {
    const Run r = run(std::string(kNoNoticesEnv) + " CF_PROGRESS=" + progress + " CF_FAULT=close_link:20,node=1",
                      "-n 3 --images 2 " + g_program + " fault retry", 60);
    INFO(progress, r.output);
    const std::vector<Detection> found = fault_detections(r.output);
    CHECK(found.size() == 3);
    for (const Detection& d : found) {
      CHECK(d.code == "CF_ERR_PEER_LOST");
      CHECK(d.delay_s < kPeerTimeoutS + 1);
    }
    CHECK(r.output.find("FAIL") == std::string::npos);
  }
}

TEST_CASE("CF_FAULT=nomem:unexpected,node=1: node 1's waits return CF_ERR_NO_MEM, the others' CF_ERR_PEER_LOST, each naming node 1") {
  struct Case {
    const char* env;
    const char* shape;
    const char* root;      // of the broadcast ahead of node 1 (mode fault's argument)
    const char* receiver;  // the image whose message was dropped: node 1's
    int runs;
  };
  // The ofi tables (root image 0: host rings), the inproc mailbox's pool
  // (root node 1's last image), and libfabric's unexpected table (one image
  // per node, no host rings). There a survivor may first send to node 1
  // after it has gone: the send must end with the loss, not spin on the
  // provider's EAGAIN. With node 1's root the survivors' images fall out of
  // step: one's allreduce fails while its partner's, started later, still
  // sends to it; that message must not land in the first one's buffers
  // once its wait has returned (they were its stack, reused: glibc aborted
  // the process at exit in most runs), hence several runs.
  for (const Case& k : {Case{"", "-n 3 --images 2 ", "0", "[23]", 1}, Case{"", "-n 3 --images 2 ", "3", "[23]", 4},
                        Case{" CF_HOST_RINGS=0", "-n 3 --images 1 ", "0", "1", 1}}) {
    for (int i = 0; i < k.runs; ++i) {
      // The fault acts at node 1's first message that arrives before its
      // receive: the program sends one ahead of node 1 (mp_failure_modes.cc,
      // broadcast_ahead_of_node1), so every run has one.
      const Run r = run(std::string(kNoNoticesEnv) + k.env + " CF_FAULT=nomem:unexpected,node=1",
                        k.shape + g_program + " fault " + k.root, 60);
      INFO(k.shape, k.env, "root ", k.root, " run ", i, r.output);
      CHECK(r.status == 0);  // nobody dies: each process reports and exits
      // The launcher names the node and the cause, as it does for a killed one.
      CHECK(std::regex_search(r.output, std::regex(R"(cfrun: rank 1 \(pid \d+\) ran out of memory: the )"
                                                   R"(unexpected-message pool could not hold a message of \d+ bytes)")));
      CHECK(std::regex_search(
          r.output, std::regex(std::string(R"(\[1\] carflow: CF_FAULT=nomem:unexpected,node=1: node 1 fails an )"
                                           R"(unexpected-message block \(node 1 ran out of memory: the unexpected-message )"
                                           R"(pool could not hold a message of \d+ bytes from image \d+ to image )") +
                               k.receiver + R"(\))")));
      const std::vector<Detection> found = fault_detections(r.output);
      CHECK(found.size() == 3);
      for (const Detection& d : found) {
        const bool failed_node = d.rank == "1";
        CHECK(d.code == (failed_node ? "CF_ERR_NO_MEM" : "CF_ERR_PEER_LOST"));
        CHECK(d.message.find(failed_node ? "node 1 ran out of memory: the unexpected-message pool"
                                         : "node 1 was lost (it ran out of memory: the unexpected-message pool") !=
              std::string::npos);
        CHECK(d.delay_s < kPeerTimeoutS + 1);
      }
      CHECK(r.output.find("FAIL") == std::string::npos);
    }
  }
}

TEST_CASE("CF_FAULT=delay and stop (longer than CF_PEER_TIMEOUT) slow node 1 down but lose nothing") {
  struct Case {
    const char* fault;
    double min_wall_s;  // node 1's
  };
  for (const Case& k : {Case{"delay:2000,node=1", 0.4}, Case{"stop:3,node=1", 3.0}}) {
    const Run r = run(std::string(kNoNoticesEnv) + " CF_FAULT=" + k.fault, "-n 2 --images 2 " + g_program + " fault", 60);
    INFO(k.fault, r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("CF_ERR_PEER_LOST") == std::string::npos);
    CHECK(r.output.find(std::string("CF_FAULT=") + k.fault + ": node 1") != std::string::npos);
    const auto lines = summaries(r.output);
    CHECK(lines.size() == 2);
    for (const auto& m : lines) {
      CHECK(m[kChecks].str() == "400");  // 200 allreduces x 2 images, verified
      CHECK(m[kFailures].str() == "0");
      if (m[kNode].str() == "1") CHECK(std::stod(m[kWall].str()) >= k.min_wall_s);
    }
  }
}

TEST_CASE("CF_FAULT=nomem:cache: every image's first call returns CF_ERR_NO_MEM, and the next calls work") {
  const Run r = run("CF_FAULT=nomem:cache", "-n 2 --images 2 " + g_program + " nomem", 60);
  expect_each_node(r, 2, "42");  // per image: the refused call and 20 allreduces
}

TEST_CASE("CF_FAULT=nomem:cache: a refused aggregate member returns CF_ERR_NO_MEM on every image, and joins nothing") {
  const Run r = run("CF_FAULT=nomem:cache", "-n 2 --images 2 " + g_program + " nomem aggregate", 60);
  expect_each_node(r, 2, "44");  // per image: the refused member, an aggregate and 20 allreduces
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: multiproc_test CFRUN MP_COLLECTIVES JOB_STRANGER [doctest options]\n");
    return 2;
  }
  g_cfrun = argv[1];
  g_program = argv[2];
  g_stranger = argv[3];
  doctest::Context context;
  context.applyCommandLine(argc - 3, argv + 3);
  return context.run();
}
