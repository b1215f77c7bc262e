// Every collective of the C API across processes: run under cfrun
// (`cfrun -n N --images K mp_collectives [mode]`). Each image computes the
// inputs and the sequential reference for every image (graph/reference.h),
// runs the call on its own buffers and compares its destination byte for
// byte. Sizes cover the eager path (8 B, 4 KiB) and the rendezvous path
// (96 KiB > CF_EAGER_BYTES). Prints one summary line per process and exits
// 1 on any failure.
//
// This file: the shared helpers, main and its table of modes. Each mode is
// one image's part, run_mode_NAME (mp_collectives.h): "all" (the above) in
// mp_all_mode.cc, "soak" in mp_soak_mode.cc; kill, exit3, killstream, cut,
// slow, check and sizes in mp_failure_modes.cc; flood, pump, split,
// runahead, reruns and late in mp_transport_modes.cc.
//
// Other modes, for the failure tests:
//   kill   node 1 kills itself (SIGKILL) while the others wait in a
//          broadcast it never joins; they must see CF_ERR_PEER_LOST.
//   exit3  node 1 calls exit(3) instead; the same is expected.
//   killstream  node 1 takes the first bytes of a 64 MiB broadcast from
//          node 0 (a host stream under way) and kills itself; node 0 must
//          see CF_ERR_PEER_LOST.
//   cut IFACE  (one process per network namespace) node 1 takes its
//          interface IFACE down, so its host stops answering while its
//          process lives on; everyone must see CF_ERR_PEER_LOST (the others
//          naming node 1) through keepalives alone.
//   slow   node 1 is stopped (SIGSTOP) for twice CF_PEER_TIMEOUT, then
//          continues: a slow peer is not lost, the broadcast succeeds.
//   fault  200 allreduces under the CF_FAULT the caller set: a lost node
//          fails a pending one and a later barrier with CF_ERR_PEER_LOST
//          (under nomem:unexpected, CF_ERR_NO_MEM on the node that failed;
//          "fault R" roots the broadcast sent ahead of node 1 at image R;
//          "fault retry" retries each failed allreduce and goes on: every
//          call after the loss must fail with CF_ERR_PEER_LOST);
//          a slowed one leaves every sum right (the fault writes its
//          "at_ms=T" line on stderr).
//   nomem  (CF_FAULT=nomem:cache) each image's first allreduce fails with
//          CF_ERR_NO_MEM; the 20 after it are right.
// kill and cut print "event at_ms=T" (the victim, just before) and each
// process that saw the loss "lost at_ms=T" (wall clock, ms): the test
// checks the detection delay.
//   flood  every image but 0 starts 10000 / (P-1) small gathers to image 0
//          before image 0 posts any (they arrive unexpected), then all sync.
//   pump   (nodes of 1 image) node 0 broadcasts 4 MiB (3 to 200 times,
//          until it has pumped) and scatters 1 MiB blocks, each verified:
//          its own block's copy tops up its streams (the summary's pumped
//          bytes).
//   split  (2 nodes of 1 image) broadcasts and scatters from node 0 and
//          gathers to it, of 200 KiB to 4 MiB, verified to the byte and
//          past the end, until every sender has written pieces of a split
//          copy.
//   midsize  (2 nodes of 1 image) broadcasts from node 0 and gathers to
//          it of 20 KiB to 1 MiB - 1, 3 rounds, verified to the byte and
//          past the end: the test reads their paths from the counters.
//   combines  (2 nodes of 1 image) recursive-doubling allreduces of 20
//          KiB to 3 MiB (both nodes combine the other's vector at once),
//          3 rounds, and a 256 KiB reduce_vec to node 0, every element
//          checked: the test reads from the counters which were read whole.
//   runahead  (3 nodes of 1 image) node 0 broadcasts 600 times to node 1
//          on their team, then joins a barrier with node 2; node 2 first
//          needs that barrier, then one with node 1; node 1 first needs
//          that one, then takes the broadcasts. Node 0 runs past its ring
//          to node 1 (256 slots) while node 1 waits on node 2 with no
//          receive from node 0 posted: only node 1 taking node 0's
//          messages unasked (a ring that stays full) lets anyone finish.
//   reruns 30 runs of images back to back, 50 allreduces each.
//   late   node 1 computes for a while before its broadcast; the waiting
//          nodes must block (CPU time well below wall time under
//          CF_PROGRESS=block) — checked by the test with getrusage.
//   check  under CF_CHECK=1: agreeing calls deliver (eager and rendezvous
//          sizes); calls where node 1's images pass another nbytes, or
//          another op, fail with CF_ERR_MISMATCH naming it on every image
//          of every node, destinations untouched; the team works after.
//   sizes  node 1's images receive broadcasts of another size: they fail
//          with CF_ERR_MISMATCH (no CF_CHECK needed).
//   soak SEED EPOCHS  random mixes of collectives (mp_soak_mode.cc).
// An unknown mode runs no call: the summary line only.
#include "tests/mp_collectives.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace mp {

void affine_combine(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k + 16 <= bytes; k += 16) {
    uint64_t l[2], r[2];
    std::memcpy(l, static_cast<const char*>(left) + k, 16);
    std::memcpy(r, static_cast<const char*>(right) + k, 16);
    const uint64_t out[2] = {l[0] * r[0], r[0] * l[1] + r[1]};
    std::memcpy(static_cast<char*>(dst) + k, out, 16);
  }
}

void int64_sum(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k + 8 <= bytes; k += 8) {
    uint64_t a, b;
    std::memcpy(&a, static_cast<const char*>(left) + k, 8);
    std::memcpy(&b, static_cast<const char*>(right) + k, 8);
    a += b;
    std::memcpy(static_cast<char*>(dst) + k, &a, 8);
  }
}

std::string describe(const CollectiveSpec& s, const std::string& form, uint32_t me) {
  return std::string(carflow::coll_kind_name(s.kind)) + form + " algo='" + s.algorithm +
         "' P=" + std::to_string(s.images) + " nbytes=" + std::to_string(s.nbytes) +
         " root=" + std::to_string(s.root) + " image " + std::to_string(me);
}

size_t first_difference(const char* got, const Bytes& want) {
  const auto* g = reinterpret_cast<const uint8_t*>(got);
  return static_cast<size_t>(std::mismatch(want.begin(), want.end(), g).first - want.begin());
}

cf_coll_handle_t start_movement(const CollectiveSpec& s, char* dst, char* src, bool m_form,
                                cf_team_t team, int flags) {
  std::vector<size_t> counts(s.counts.begin(), s.counts.end());
  std::vector<size_t> displs(s.displs.begin(), s.displs.end());
  const size_t* c = counts.empty() ? nullptr : counts.data();
  const size_t* d = displs.empty() ? nullptr : displs.data();
  const bool v = !s.counts.empty();
  const uint32_t r = s.root;
  if (m_form) {
    // A SINGLE list (every team rank's entry); each image thread's own
    // entry is the only one it uses, so every entry is its buffer.
    std::vector<void*> dl(s.images, dst), sl(s.images, src);
    const int mf = (flags & ~CF_COLL_LOCAL) | CF_COLL_SINGLE;
    switch (s.kind) {
      case CollKind::Broadcast: return cf_coll_broadcastm_nb(team, dl.data(), r, src, s.nbytes, mf);
      case CollKind::Scatter: return cf_coll_scatterm_nb(team, dl.data(), r, src, s.nbytes, mf);
      case CollKind::Gather: return cf_coll_gatherm_nb(team, r, dst, sl.data(), s.nbytes, mf);
      case CollKind::GatherAll: return cf_coll_gather_allm_nb(team, dl.data(), sl.data(), s.nbytes, mf);
      case CollKind::Exchange: return cf_coll_exchangem_nb(team, dl.data(), sl.data(), s.nbytes, mf);
      default: return CF_COLL_INVALID_HANDLE;
    }
  }
  switch (s.kind) {
    case CollKind::Broadcast: return cf_coll_broadcast_nb(team, dst, r, src, s.nbytes, flags);
    case CollKind::Scatter:
      return v ? cf_coll_scatterv_nb(team, dst, r, src, c, d, flags)
               : cf_coll_scatter_nb(team, dst, r, src, s.nbytes, flags);
    case CollKind::Gather:
      return v ? cf_coll_gatherv_nb(team, r, dst, src, c, d, flags)
               : cf_coll_gather_nb(team, r, dst, src, s.nbytes, flags);
    case CollKind::GatherAll:
      return v ? cf_coll_gather_allv_nb(team, dst, src, c, d, flags)
               : cf_coll_gather_all_nb(team, dst, src, s.nbytes, flags);
    case CollKind::Exchange:
      return v ? cf_coll_exchangev_nb(team, dst, src, c, flags)
               : cf_coll_exchange_nb(team, dst, src, s.nbytes, flags);
    case CollKind::Permute: {
      std::vector<cf_image_t> perm(s.perm.begin(), s.perm.end());
      return cf_coll_permute_nb(team, dst, src, s.nbytes, perm.data(), flags);
    }
    default: return CF_COLL_INVALID_HANDLE;
  }
}

cf_coll_handle_t start_compute(const CollectiveSpec& s, char* dst, char* src, int func, bool m_form,
                               cf_team_t team, int flags) {
  const size_t es = s.elem_size, n = s.nbytes / es;
  std::vector<void*> sl(s.images, src);
  switch (s.kind) {
    case CollKind::Allreduce: return cf_coll_allreduce_nb(team, dst, src, es, n, func, 0, flags);
    case CollKind::ReduceVec: return cf_coll_reduce_vec_nb(team, s.root, dst, src, es, n, func, 0, flags);
    case CollKind::Scan:
      return cf_coll_scan_nb(team, dst, src, es, n, func, 0,
                             flags | (s.flags & carflow::kExclusiveFlag ? CF_COLL_EXCLUSIVE : 0));
    case CollKind::ReduceScatter: {
      if (s.counts.empty()) return cf_coll_reduce_scatter_nb(team, dst, src, es, n, func, 0, flags);
      std::vector<size_t> counts;
      for (uint64_t c : s.counts) counts.push_back(c / es);
      return cf_coll_reduce_scatterv_nb(team, dst, src, es, counts.data(), func, 0, flags);
    }
    case CollKind::Reduce:
      if (m_form) {
        return cf_coll_reducem_nb(team, s.root, dst, sl.data(), s.src_blksz, s.src_offset, es, n, func, 0,
                                  (flags & ~CF_COLL_LOCAL) | CF_COLL_SINGLE);
      }
      return cf_coll_reduce_nb(team, s.root, dst, src, s.src_blksz, s.src_offset, es, n, func, 0, flags);
    case CollKind::PrefixReduce:
      return cf_coll_prefix_reduce_nb(team, dst, s.dst_blksz, s.dst_offset, src, s.src_blksz,
                                      s.src_offset, es, n, func, 0, flags);
    default: return CF_COLL_INVALID_HANDLE;
  }
}

}  // namespace mp

namespace {

using namespace mp;

// The GASNet notes' callback: left operands folded, then one result per right operand.
void affine_seed(void* results, size_t result_count, const void* left, size_t left_count,
                 const void* right, size_t elem_size, int, int) {
  std::vector<uint8_t> acc(elem_size);
  bool have = false;
  for (size_t i = 0; i < left_count + result_count; ++i) {
    const void* x = i < left_count ? static_cast<const char*>(left) + i * elem_size
                                   : static_cast<const char*>(right) + (i - left_count) * elem_size;
    if (have) {
      affine_combine(acc.data(), acc.data(), x, elem_size);
    } else {
      std::memcpy(acc.data(), x, elem_size);
      have = true;
    }
    if (i >= left_count) std::memcpy(static_cast<char*>(results) + (i - left_count) * elem_size, acc.data(), elem_size);
  }
}

const cf_coll_fn_entry_t kFunctions[] = {{reinterpret_cast<cf_coll_fn_t>(&affine_seed), CF_COLL_NONCOMM}};

// Messages between this process's image threads that went through a ring
// (cf_stats_t::fastbox), read by each image as its body ends: the engine,
// and its counts, are gone once cf_run_images returns.
std::atomic<unsigned long long> g_inproc_ring{0};
void note_inproc_rings() {
  cf_stats_t s{};
  if (cf_get_stats(&s) != CF_OK) return;
  unsigned long long seen = g_inproc_ring.load();
  while (s.fastbox > seen && !g_inproc_ring.compare_exchange_weak(seen, s.fastbox)) {
  }
}

// A mode of the table: which part each image runs, how often.
struct Mode {
  std::string_view name;
  ModeBody body;
  int runs = 1;  // cf_run_images calls back to back
  bool count_rings = true;  // each image notes its inproc ring messages after its part
};

void run_no_mode(Context&, cf_image_t) {}

constexpr Mode kModes[] = {
    {"all", run_mode_all},
    {"soak", run_mode_soak},
    {"kill", run_mode_kill},
    {"exit3", run_mode_kill},
    {"killstream", run_mode_killstream},
    {"cut", run_mode_cut},
    {"slow", run_mode_slow},
    {"fault", run_mode_fault},
    {"nomem", run_mode_nomem},
    {"flood", run_mode_flood},
    {"pump", run_mode_pump},
    {"split", run_mode_split},
    {"midsize", run_mode_midsize},
    {"combines", run_mode_combines},
    {"runahead", run_mode_runahead},
    {"check", run_mode_check},
    {"sizes", run_mode_sizes},
    {"late", run_mode_late},
    // 30 runs of images back to back (see run_mode_reruns).
    {"reruns", run_mode_reruns, 30, false},
};

// An unknown mode: no calls, the summary line only.
constexpr Mode kNoMode = {"", run_no_mode};

const Mode& find_mode(const std::string& name) {
  for (const Mode& m : kModes) {
    if (m.name == name) return m;
  }
  return kNoMode;
}

// What cf_run_images hands each image thread.
struct Run {
  Context& c;
  const Mode& mode;
};

void run_image(cf_image_t image, void* arg) {
  const Run& run = *static_cast<Run*>(arg);
  run.mode.body(run.c, image);
  if (run.mode.count_rings) note_inproc_rings();
}

// The lines multiproc_test parses: FAIL lines, "lost" lines, one summary
// line; then goodbye (cf_finalize) unless a peer was lost. 0 if nothing failed.
int finish(Context& c) {
  Log& log = c.log;
  const std::string& mode = c.mode;
  const uint32_t images = c.images;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - c.start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                     (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  for (const std::string& f : log.failures) std::printf("FAIL %s\n", f.c_str());
  if (c.lost_seen > 0) {
    std::printf("lost: %d waits returned %s: %s\n", c.lost_seen.load(),
                c.lost_code == CF_ERR_NO_MEM ? "CF_ERR_NO_MEM" : "CF_ERR_PEER_LOST", c.lost_message.c_str());
    std::printf("lost at_ms=%lld\n", c.lost_at_ms.load());
  }
  cf_net_stats_t net{};
  cf_get_net_stats(&net);

  std::printf("mp %s: node %u of %u, %u images per node: %llu checks, %zu failures, %.2f s wall, %.2f s cpu, "
              "provider %s, %llu unexpected, %llu credit waits, %llu rendezvous, %llu host ring, %llu ring full, "
              "%llu direct reads, %llu pumped, %llu split copies, %llu split written, %llu inproc ring\n",
              mode.c_str(), cf_mynode(), cf_nodes(), images, (unsigned long long)log.checks.load(),
              log.failures.size(), seconds, cpu, net.provider, (unsigned long long)net.unexpected,
              (unsigned long long)net.credit_waits, (unsigned long long)net.rendezvous,
              (unsigned long long)net.host_ring, (unsigned long long)net.ring_spills,
              (unsigned long long)net.direct_reads, (unsigned long long)net.pumped_bytes,
              (unsigned long long)net.split_copies, (unsigned long long)net.split_written_bytes,
              (unsigned long long)g_inproc_ring.load());
  std::fflush(stdout);
  const bool lost = c.lost_seen > 0;
  // The cut node's link to the launcher is cut too: its goodbye could only
  // time out. It ends here; cfrun reports it.
  if (mode == "cut" && cf_mynode() == 1) std::_Exit(log.failures.empty() ? 0 : 1);
  if (!lost && cf_finalize() != CF_OK) {
    std::fprintf(stderr, "cf_finalize: %s\n", cf_last_error());
    return 1;
  }
  return log.failures.empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  cf_set_error_mode(CF_ERRORS_RETURN);  // a failed cf_init too: it must leave an exit that is clean
  if (cf_init(&argc, &argv) != CF_OK) {
    std::fprintf(stderr, "cf_init: %s\n", cf_last_error());
    return 1;
  }
  Context c;
  c.argc = argc;
  c.argv = argv;
  c.mode = argc > 1 ? argv[1] : "all";
  const char* k = std::getenv("CF_IMAGES");
  c.images = k != nullptr ? static_cast<uint32_t>(std::atoi(k)) : 1;
  c.start = std::chrono::steady_clock::now();
  const char* timeout_text = std::getenv("CF_PEER_TIMEOUT");
  c.peer_timeout_s = timeout_text != nullptr ? std::atof(timeout_text) : 5.0;
  const char* fault = std::getenv("CF_FAULT");
  c.nomem_fault = fault != nullptr && std::strncmp(fault, "nomem:unexpected", 16) == 0;
  const Mode& mode = find_mode(c.mode);
  Run run{c, mode};
  for (int i = 0; i < mode.runs; ++i) {
    const int rc = cf_run_images(c.images, kFunctions, 1, run_image, &run);
    if (rc != CF_OK) c.log.fail(std::string("cf_run_images: ") + cf_last_error());
  }
  return finish(c);
}
