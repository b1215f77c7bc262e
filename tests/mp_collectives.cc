// Every collective of the C API across processes: run under cfrun
// (`cfrun -n N --images K mp_collectives [mode]`). Each image computes the
// inputs and the sequential reference for every image (graph/reference.h),
// runs the call on its own buffers and compares its destination byte for
// byte. Sizes cover the eager path (8 B, 4 KiB) and the rendezvous path
// (96 KiB > CF_EAGER_BYTES). Prints one summary line per process and exits
// 1 on any failure.
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
#include <carflow/carflow.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <vector>

#include "graph/reference.h"
#include "graph/registry.h"

namespace {

using carflow::CollectiveSpec;
using carflow::CollKind;
using Bytes = std::vector<uint8_t>;

constexpr int kLocal = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
constexpr int kSumInt64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
constexpr int kAffine = 0;  // fn_tbl index of the non-commutative function

// Composition of affine maps x -> a x + b on uint64 pairs, mod 2^64:
// associative, not commutative, so a reordered reduction shows.
void affine_combine(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k + 16 <= bytes; k += 16) {
    uint64_t l[2], r[2];
    std::memcpy(l, static_cast<const char*>(left) + k, 16);
    std::memcpy(r, static_cast<const char*>(right) + k, 16);
    const uint64_t out[2] = {l[0] * r[0], r[0] * l[1] + r[1]};
    std::memcpy(static_cast<char*>(dst) + k, out, 16);
  }
}

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

void int64_sum(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k + 8 <= bytes; k += 8) {
    uint64_t a, b;
    std::memcpy(&a, static_cast<const char*>(left) + k, 8);
    std::memcpy(&b, static_cast<const char*>(right) + k, 8);
    a += b;
    std::memcpy(static_cast<char*>(dst) + k, &a, 8);
  }
}

struct Log {
  std::mutex mutex;
  std::atomic<uint64_t> checks{0};
  std::vector<std::string> failures;
  std::atomic<bool> represented{false};  // this node's representative has initiated its call
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures.size() < 20) failures.push_back(what);
    else if (failures.size() == 20) failures.push_back("(more failures not shown)");
  }
};

std::string describe(const CollectiveSpec& s, const std::string& form, uint32_t me) {
  return std::string(carflow::coll_kind_name(s.kind)) + form + " algo='" + s.algorithm +
         "' P=" + std::to_string(s.images) + " nbytes=" + std::to_string(s.nbytes) +
         " root=" + std::to_string(s.root) + " image " + std::to_string(me);
}

// 8-byte aligned storage (computational kinds need alignment).
struct Buffer {
  std::vector<uint64_t> store;
  explicit Buffer(size_t n, uint8_t fill) : store(n / 8 + 2) { std::memset(store.data(), fill, n); }
  explicit Buffer(const Bytes& b) : store(b.size() / 8 + 2) {
    if (!b.empty()) std::memcpy(store.data(), b.data(), b.size());
  }
  char* data() { return reinterpret_cast<char*>(store.data()); }
};

// The first byte at which `got` differs from `want`; want.size() if none does.
size_t first_difference(const char* got, const Bytes& want) {
  const auto* g = reinterpret_cast<const uint8_t*>(got);
  return static_cast<size_t>(std::mismatch(want.begin(), want.end(), g).first - want.begin());
}

cf_coll_handle_t start_movement(const CollectiveSpec& s, char* dst, char* src, bool m_form,
                                cf_team_t team = CF_TEAM_ALL, int flags = kLocal) {
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
                               cf_team_t team = CF_TEAM_ALL, int flags = kLocal) {
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

// Runs one spec on image `me` and checks its destination.
void check(Log& log, const CollectiveSpec& spec, cf_image_t me, bool m_form, bool affine) {
  const bool compute = carflow::is_computational(spec.kind);
  const std::string form = m_form ? "m" : spec.counts.empty() ? "" : "v";
  std::vector<Bytes> in = carflow::reference::inputs(spec);
  std::vector<Bytes> want;
  if (compute) {
    if (affine) {  // odd multipliers keep every product informative
      for (auto& b : in) {
        for (size_t k = 0; k + 8 <= b.size(); k += 16) b[k] |= 1;
      }
    }
    want = carflow::reference::expected_reduction(spec, in, affine ? &affine_combine : &int64_sum);
  } else {
    want = carflow::reference::expected(spec, in);
  }
  const int kind = static_cast<int>(spec.kind);
  if (cf_coll_set_algorithm(kind, spec.algorithm.empty() ? nullptr : spec.algorithm.c_str()) != CF_OK) {
    log.fail(describe(spec, form, me) + ": cf_coll_set_algorithm: " + cf_last_error());
    return;
  }
  Buffer src(in[me]);
  Buffer dst(std::max(want[me].size(), in[me].size()), carflow::reference::kUntouched);
  const cf_coll_handle_t h = compute ? start_compute(spec, dst.data(), src.data(), affine ? kAffine : kSumInt64, m_form)
                                     : start_movement(spec, dst.data(), src.data(), m_form);
  const int rc = h == CF_COLL_INVALID_HANDLE ? cf_last_status() : cf_coll_wait_sync(h);
  cf_coll_set_algorithm(kind, nullptr);
  log.checks++;
  if (rc != CF_OK) {
    log.fail(describe(spec, form, me) + ": status " + std::to_string(rc) + ": " + cf_last_error());
    return;
  }
  if (const size_t k = first_difference(dst.data(), want[me]); k < want[me].size()) {
    log.fail(describe(spec, form, me) + ": destination differs at byte " + std::to_string(k));
  }
}

CollectiveSpec make(CollKind kind, uint32_t P, uint32_t root, uint64_t nbytes, const std::string& algo) {
  CollectiveSpec s = carflow::reference::test_spec(kind, P, root, nbytes);
  s.algorithm = algo;
  return s;
}

// An aggregate spanning nodes (three broadcasts from different roots and an
// allreduce), then the representative-thread mode: the first image of each
// node calls gather_allm for its node's images (a LOCAL list: this node's
// images only) while the others wait until it has initiated, as the GASNet notes
// requires; then every image thread calls a barrier, which matches only if
// the representative numbered the collective for all of its images.
void run_aggregate_and_representative(Log& log, cf_image_t me, uint32_t P) {
  uint64_t b[3] = {}, src = 1000 + me;
  int64_t sum = 0, one = 1;
  for (uint32_t k = 0; k < 3; ++k) {
    cf_coll_broadcast_nb(CF_TEAM_ALL, &b[k], (k * 2 + 1) % P, &src, 8, kLocal | CF_COLL_AGGREGATE);
  }
  const cf_coll_handle_t h = cf_coll_allreduce_nb(CF_TEAM_ALL, &sum, &one, 8, 1, kSumInt64, 0, kLocal);
  log.checks++;
  const int rc = cf_coll_wait_sync(h);
  for (uint32_t k = 0; k < 3; ++k) {
    if (rc != CF_OK || sum != static_cast<int64_t>(P) || b[k] != 1000 + (k * 2 + 1) % P) {
      log.fail("aggregate: " + std::string(cf_strerror(rc)) + " " + cf_last_error() + " image " +
               std::to_string(me));
      break;
    }
  }
  const uint32_t local = P / cf_nodes();  // every node runs the same number of images
  log.checks++;
  if (me % local == 0) {
    std::vector<std::vector<uint64_t>> dst(local, std::vector<uint64_t>(P, 0));
    std::vector<uint64_t> mine(local);
    std::vector<void*> dl, sl;
    for (uint32_t k = 0; k < local; ++k) {
      mine[k] = 7000 + me + k;
      dl.push_back(dst[k].data());
      sl.push_back(&mine[k]);
    }
    const cf_coll_handle_t g = cf_coll_gather_allm_nb(
        CF_TEAM_ALL, dl.data(), sl.data(), 8, CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL);
    log.represented.store(true);
    log.represented.notify_all();
    const int grc = cf_coll_wait_sync(g);
    bool right = grc == CF_OK;
    for (uint32_t k = 0; k < local; ++k) {
      for (uint32_t j = 0; j < P; ++j) right = right && dst[k][j] == 7000 + j;
    }
    if (!right) log.fail("representative gather_allm on node " + std::to_string(cf_mynode()) + ": " + cf_last_error());
  } else {
    log.represented.wait(false);
  }
  log.checks++;
  if (cf_coll_barrier(CF_TEAM_ALL, kLocal) != CF_OK) log.fail(std::string("barrier after: ") + cf_last_error());
}

void run_all(Log& log, cf_image_t me) {
  const uint32_t P = cf_images();
  const CollKind movement[] = {CollKind::Broadcast, CollKind::Scatter, CollKind::Gather,
                               CollKind::GatherAll, CollKind::Exchange, CollKind::Permute};
  // Every algorithm at a small size; carflow's choice at every size.
  for (CollKind kind : movement) {
    std::vector<std::string> algos{""};
    for (const auto* g : carflow::GeneratorRegistry::instance().list(kind)) algos.push_back(g->name);
    for (const std::string& algo : algos) {
      for (uint64_t nbytes : {8ull, 4096ull, 96ull * 1024}) {
        if (!algo.empty() && nbytes > 4096) continue;
        if (kind == CollKind::Exchange && nbytes > 4096 && P > 6) nbytes = 32 * 1024;
        for (uint32_t root : {0u, P - 1}) {
          check(log, make(kind, P, root, nbytes, algo), me, false, false);
          if (kind == CollKind::Broadcast || kind == CollKind::Permute) break;  // root-less / one root enough
        }
      }
    }
    if (kind != CollKind::Permute) {
      CollectiveSpec v = make(kind, P, P - 1, 600, "");
      if (kind != CollKind::Broadcast) {
        carflow::reference::make_variable(&v, true);
        check(log, v, me, false, false);
      }
      check(log, make(kind, P, P / 2, 256, ""), me, true, false);  // m form
    }
  }
  // Barrier: every algorithm.
  for (const auto* g : carflow::GeneratorRegistry::instance().list(CollKind::Barrier)) {
    cf_coll_set_algorithm(CF_KIND_BARRIER, g->name.c_str());
    log.checks++;
    if (cf_coll_barrier(CF_TEAM_ALL, kLocal) != CF_OK) log.fail("barrier " + g->name + ": " + cf_last_error());
    cf_coll_set_algorithm(CF_KIND_BARRIER, nullptr);
  }
  // Computational: int64 sums for every algorithm, the affine product by
  // carflow's (order-preserving) choice, at eager and rendezvous sizes.
  const CollKind vectors[] = {CollKind::Allreduce, CollKind::ReduceVec, CollKind::Scan, CollKind::ReduceScatter};
  for (CollKind kind : vectors) {
    std::vector<std::string> algos{""};
    for (const auto* g : carflow::GeneratorRegistry::instance().list(kind)) algos.push_back(g->name);
    for (const std::string& algo : algos) {
      for (uint64_t count : {1ull, 500ull, 16384ull}) {
        if (!algo.empty() && count > 500) continue;
        CollectiveSpec s = make(kind, P, P - 1, count * 8, algo);
        s.elem_size = 8;
        check(log, s, me, false, false);
        if (kind == CollKind::Scan) {
          s.flags = carflow::kExclusiveFlag;
          check(log, s, me, false, false);
        }
      }
    }
    CollectiveSpec a = make(kind, P, 0, 16 * 300, "");
    a.elem_size = 16;
    check(log, a, me, false, true);
    if (kind == CollKind::ReduceScatter) {
      CollectiveSpec v = make(kind, P, 0, 0, "");
      v.elem_size = 8;
      for (uint32_t i = 0; i < P; ++i) v.counts.push_back(uint64_t{(i * 3 + 1) % 5} * 64);
      check(log, v, me, false, false);
    }
  }
  // Seed reduce and prefix_reduce over block-cyclic arrays.
  for (uint64_t blksz : {0ull, 3ull, 64ull}) {
    CollectiveSpec r = make(CollKind::Reduce, P, P - 1, 8 * 1000, "");
    r.elem_size = 8;
    r.src_blksz = blksz;
    r.src_offset = blksz == 0 ? P - 1 : 5;
    check(log, r, me, false, false);
    check(log, r, me, blksz == 3, true);
    CollectiveSpec p = make(CollKind::PrefixReduce, P, 0, 8 * 1000, "");
    p.elem_size = 8;
    p.src_blksz = blksz;
    p.src_offset = blksz == 0 ? 0 : 5;
    p.dst_blksz = blksz == 0 ? 0 : 7;
    p.dst_offset = blksz == 0 ? P - 1 : 0;
    check(log, p, me, false, false);
  }
  // A team split across nodes: even and odd images each allreduce.
  cf_team_t half = CF_TEAM_NULL;
  log.checks++;
  if (cf_team_split(CF_TEAM_ALL, static_cast<int>(me % 2), static_cast<int>(me), &half) != CF_OK) {
    log.fail(std::string("cf_team_split: ") + cf_last_error());
    return;
  }
  int64_t mine = me + 1, sum = 0, want = 0;
  for (uint32_t i = me % 2; i < P; i += 2) want += i + 1;
  log.checks++;
  if (cf_coll_allreduce(half, &sum, &mine, 8, 1, kSumInt64, 0, kLocal) != CF_OK || sum != want) {
    log.fail("allreduce on a split team: got " + std::to_string(sum) + ", want " + std::to_string(want));
  }
  cf_team_free(half);
  run_aggregate_and_representative(log, me, P);
}

// soak SEED EPOCHS: random mixes of collectives. Every image draws the same
// ops from SEED (kinds, sizes from 8 B to 300 KB across the eager and
// rendezvous paths, roots, v and m forms, the nine sync modes, aggregates of 2-8
// calls, blocking calls, CF_TEAM_ALL or the image's half of a split team
// ranked in reverse), prepares all its buffers, enters a barrier, starts
// the ops in order (each image after up to ~20 us of its own work) and
// syncs their handles in an order of its own (wait, wait_all, wait_some or
// try_some loops, try_sync round robin). A destination is checked against
// the sequential reference as soon as its sync returns when its OUT mode
// promises that (MYSYNC, ALLSYNC), and every destination, the 64 bytes past
// it and every source again after the epoch's closing barrier (OUT_NOSYNC
// promises only that). One epoch in three is loose: no barriers, MYSYNC and
// ALLSYNC modes only, so images run into it while others finish the last
// one, and its buffers are freed as soon as their syncs return. Before one
// op in six every image first makes a refused call (a drawn class of
// argument error, on the op's team with the op's flags, so inside an
// aggregate it is a refused member): it must return CF_ERR_BAD_ARG and
// change nothing, which the ops after it check.
struct SoakOp {
  CollectiveSpec spec;
  bool split = false;     // on the image's half team, else CF_TEAM_ALL
  bool blocking = false;  // the blocking entry point
  bool m_form = false;    // the m form (a SINGLE list), not the single-address one
  int refusal = -1;       // the refused call made before it (soak_refuse), or none
  int flags = 0;
  uint32_t rank = 0;  // the image's rank in the op's team
  Bytes in, want;
  std::unique_ptr<Buffer> src, dst;
  std::string name;
};

constexpr size_t kGuard = 64;
constexpr uint8_t kSrcGuard = 0x5a;

void soak_verify(Log& log, const SoakOp& op, const char* when) {
  log.checks++;
  const size_t n = op.want.size();
  const auto* dst = reinterpret_cast<const uint8_t*>(op.dst->data());
  const auto* src = reinterpret_cast<const uint8_t*>(op.src->data());
  std::string what;
  if (const size_t k = first_difference(op.dst->data(), op.want); k < n) {
    what = "destination differs at byte " + std::to_string(k) + " of " + std::to_string(n);
  } else if (std::any_of(dst + n, dst + n + kGuard, [](uint8_t b) { return b != carflow::reference::kUntouched; })) {
    what = "a byte past the destination's end was written";
  } else if ((!op.in.empty() && std::memcmp(src, op.in.data(), op.in.size()) != 0) ||
             std::any_of(src + op.in.size(), src + op.in.size() + kGuard, [](uint8_t b) { return b != kSrcGuard; })) {
    what = "the source was written";
  }
  if (!what.empty()) log.fail(op.name + " " + when + ": " + what);
}

// The refused calls of the soak: the same on every image, each breaking
// one rule; the status it returned (CF_ERR_BAD_ARG expected).
constexpr int kSoakRefusals = 10;
int soak_refuse(int which, cf_team_t team, int flags) {
  uint64_t a[4] = {}, b[4] = {};
  const cf_image_t P = cf_team_size(team);
  cf_coll_handle_t h = CF_COLL_INVALID_HANDLE;
  switch (which) {
    case 0: h = cf_coll_broadcast_nb(team, a, 0, b, 0, flags); break;              // nbytes 0
    case 1: h = cf_coll_scatter_nb(team, a, P + 1, b, 8, flags); break;            // root out of range
    case 2: h = cf_coll_gather_all_nb(team, a, b, 8, flags | CF_COLL_IN_ALLSYNC | CF_COLL_IN_NOSYNC); break;
    case 3: h = cf_coll_exchange_nb(team, a, b, 8, flags | (1 << 29)); break;     // unknown flag bit
    case 4: h = cf_coll_broadcast_nb(team, nullptr, 0, b, 8, flags); break;        // dst NULL everywhere
    case 5: h = cf_coll_allreduce_nb(team, a, b, 0, 1, kSumInt64, 0, flags); break;  // elem_size 0
    case 6: h = cf_coll_reduce_vec_nb(team, 0, a, b, 8, 1, 7, 0, flags); break;    // func not in fn_tbl
    case 7: h = cf_coll_permute_nb(team, a, b, 8, nullptr, flags); break;          // perm NULL
    case 8: h = cf_coll_scatterv_nb(team, a, 0, b, nullptr, nullptr, flags); break;  // counts NULL
    default: h = cf_coll_barrier_nb(CF_TEAM_NULL, flags); break;                    // no such team
  }
  return h == CF_COLL_INVALID_HANDLE ? cf_last_status() : CF_OK;
}

// soak_blocking's result for an op with no blocking form here.
constexpr int kNoBlockingForm = -1000;

// The blocking entry point of the kinds that have a plain one here;
// kNoBlockingForm for the others (the caller starts them non-blocking and waits).
int soak_blocking(const SoakOp& op, cf_team_t team) {
  const CollectiveSpec& s = op.spec;
  char* dst = op.dst->data();
  char* src = op.src->data();
  if (!s.counts.empty()) return kNoBlockingForm;
  switch (s.kind) {
    case CollKind::Broadcast: return cf_coll_broadcast(team, dst, s.root, src, s.nbytes, op.flags);
    case CollKind::GatherAll: return cf_coll_gather_all(team, dst, src, s.nbytes, op.flags);
    case CollKind::Exchange: return cf_coll_exchange(team, dst, src, s.nbytes, op.flags);
    case CollKind::Allreduce: return cf_coll_allreduce(team, dst, src, 8, s.nbytes / 8, kSumInt64, 0, op.flags);
    case CollKind::Barrier: return cf_coll_barrier(team, op.flags);
    default: return kNoBlockingForm;
  }
}

std::string hex(int flags) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%x", static_cast<unsigned>(flags));
  return text;
}

void run_soak(Log& log, cf_image_t me, uint64_t seed, uint32_t epochs) {
  cf_team_t half = CF_TEAM_NULL;
  log.checks++;
  if (cf_team_split(CF_TEAM_ALL, static_cast<int>(me % 2), -static_cast<int>(me), &half) != CF_OK) {
    log.fail(std::string("soak: cf_team_split: ") + cf_last_error());
    return;
  }
  const CollKind kinds[] = {CollKind::Broadcast, CollKind::Scatter,   CollKind::Gather,    CollKind::GatherAll,
                            CollKind::Exchange,  CollKind::Permute,   CollKind::Barrier,   CollKind::Allreduce,
                            CollKind::ReduceVec, CollKind::Scan,      CollKind::ReduceScatter, CollKind::Reduce,
                            CollKind::PrefixReduce};
  const uint64_t sizes[] = {8, 16, 24, 64, 200, 1024, 4096, 20000, 98304, 300000};
  const int in_modes[] = {CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC};
  const int out_modes[] = {CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC};
  const int all_sync = CF_COLL_IN_ALLSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  std::mt19937_64 own(seed * 1000003 + me);  // this image's sync order
  for (uint32_t epoch = 0; epoch < epochs; ++epoch) {
    std::mt19937_64 rng(seed * 7919 + epoch);  // the same draws on every image
    // A loose epoch (one in three) has no barriers: its ops use only the
    // MYSYNC and ALLSYNC modes, whose promises need none, so images run
    // ahead into it while others still finish the last one.
    const bool loose = rng() % 3 == 0;
    const uint32_t count = 1 + rng() % 10;
    std::vector<SoakOp> ops(count);
    uint32_t agg_left = 0;
    bool agg_split = false;
    for (uint32_t i = 0; i < count; ++i) {
      // A fixed number of draws per op, whatever the op's team size.
      const uint64_t d[13] = {rng(), rng(), rng(), rng(), rng(), rng(), rng(),
                              rng(), rng(), rng(), rng(), rng(), rng()};
      SoakOp& op = ops[i];
      const CollKind kind = kinds[d[0] % std::size(kinds)];
      op.split = (d[1] & 1) != 0;
      if (agg_left == 0 && d[2] % 5 == 0 && i + 1 < count) {
        agg_left = static_cast<uint32_t>(std::min<uint64_t>(2 + d[3] % 7, count - i));
        agg_split = op.split;
      }
      const bool in_aggregate = agg_left > 0;
      if (in_aggregate) op.split = agg_split;
      const cf_team_t team = op.split ? half : CF_TEAM_ALL;
      const uint32_t TP = cf_team_size(team);
      op.rank = cf_team_rank(team);
      uint64_t nbytes = sizes[d[4] % std::size(sizes)];
      if ((kind == CollKind::Exchange || kind == CollKind::GatherAll) && nbytes * TP > (1u << 20)) nbytes = 4096;
      CollectiveSpec s = carflow::reference::test_spec(kind, TP, static_cast<uint32_t>(d[5] % TP), nbytes);
      if (kind == CollKind::Barrier) s.nbytes = 0;
      const bool compute = carflow::is_computational(kind);
      if (compute) s.elem_size = 8;
      const bool variable = d[6] % 4 == 0;
      if (variable && (kind == CollKind::Scatter || kind == CollKind::Gather || kind == CollKind::GatherAll ||
                       kind == CollKind::Exchange)) {
        carflow::reference::make_variable(&s, kind != CollKind::Exchange && (d[6] & 4) != 0);
      }
      if (variable && kind == CollKind::ReduceScatter) {
        s.nbytes = 0;
        for (uint32_t r = 0; r < TP; ++r) s.counts.push_back(uint64_t{(r * 3 + d[6] % 7) % 5} * 64);
      }
      if (kind == CollKind::Scan && (d[7] & 1)) s.flags = carflow::kExclusiveFlag;
      const uint64_t blksz = std::array<uint64_t, 3>{0, 3, 64}[d[8] % 3];
      if (kind == CollKind::Reduce) {
        s.src_blksz = blksz;
        s.src_offset = blksz == 0 ? s.root : 5;
      }
      if (kind == CollKind::PrefixReduce) {
        s.src_blksz = blksz;
        s.src_offset = blksz == 0 ? 0 : 5;
        s.dst_blksz = blksz == 0 ? 0 : 7;
        s.dst_offset = blksz == 0 ? TP - 1 : 0;
      }
      const uint32_t in_mode = loose ? 1 + d[9] % 2 : d[9] % 3, out_mode = loose ? 1 + (d[9] / 3) % 2 : (d[9] / 3) % 3;
      op.flags = in_modes[in_mode] | out_modes[out_mode] | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
      if (in_aggregate && --agg_left > 0) op.flags |= CF_COLL_AGGREGATE;
      op.blocking = !in_aggregate && d[10] % 6 == 0;
      op.m_form = d[11] % 4 == 0 && s.counts.empty() &&
                  (kind == CollKind::Broadcast || kind == CollKind::Scatter || kind == CollKind::Gather ||
                   kind == CollKind::GatherAll || kind == CollKind::Exchange || kind == CollKind::Reduce);
      if (op.m_form) op.blocking = false;
      if (d[12] % 6 == 0) op.refusal = static_cast<int>((d[12] / 6) % kSoakRefusals);
      op.spec = s;
      const std::vector<Bytes> in = carflow::reference::inputs(s, epoch * 16 + i);
      const std::vector<Bytes> want =
          compute ? carflow::reference::expected_reduction(s, in, &int64_sum) : carflow::reference::expected(s, in);
      op.in = in[op.rank];
      op.want = want[op.rank];
      op.src = std::make_unique<Buffer>(op.in.size() + kGuard, kSrcGuard);
      if (!op.in.empty()) std::memcpy(op.src->data(), op.in.data(), op.in.size());
      op.dst = std::make_unique<Buffer>(op.want.size() + kGuard, carflow::reference::kUntouched);
      op.name = "soak seed " + std::to_string(seed) + " epoch " + std::to_string(epoch) + " op " +
                std::to_string(i) + " " + describe(s, op.m_form ? "m" : s.counts.empty() ? "" : "v", op.rank) + " on " +
                (op.split ? "the half team" : "CF_TEAM_ALL") + " flags " + hex(op.flags) + (op.blocking ? " blocking" : "");
    }
    log.checks++;
    if (!loose && cf_coll_barrier(CF_TEAM_ALL, all_sync) != CF_OK) {
      log.fail(std::string("soak: opening barrier: ") + cf_last_error());
      break;
    }
    // Start in order; a handle stands for the ops since the previous one
    // (an aggregate's members share its last call's handle).
    std::vector<cf_coll_handle_t> handles;
    std::vector<std::vector<uint32_t>> covers;
    std::vector<uint32_t> pending;
    for (uint32_t i = 0; i < count; ++i) {
      SoakOp& op = ops[i];
      const cf_team_t team = op.split ? half : CF_TEAM_ALL;
      pending.push_back(i);
      // Images enter at times of their own: up to ~20 us of work first.
      for (uint64_t spin = own() % 4 == 0 ? own() % 20000 : 0; spin > 0; --spin) asm volatile("");
      if (op.refusal >= 0) {
        log.checks++;
        const int refused = soak_refuse(op.refusal, team, op.flags);
        if (refused != CF_ERR_BAD_ARG) {
          log.fail(op.name + ": refused call " + std::to_string(op.refusal) + " before it returned " +
                   std::to_string(refused) + ": " + cf_last_error());
          return;
        }
      }
      int rc = op.blocking ? soak_blocking(op, team) : kNoBlockingForm;
      if (rc == kNoBlockingForm) {
        const cf_coll_handle_t h =
            op.spec.kind == CollKind::Barrier ? cf_coll_barrier_nb(team, op.flags)
            : carflow::is_computational(op.spec.kind)
                ? start_compute(op.spec, op.dst->data(), op.src->data(), kSumInt64, op.m_form, team, op.flags)
                : start_movement(op.spec, op.dst->data(), op.src->data(), op.m_form, team, op.flags);
        if (op.flags & CF_COLL_AGGREGATE) {
          rc = cf_last_status();
        } else if (h == CF_COLL_INVALID_HANDLE) {
          rc = cf_last_status();
          if (rc == CF_OK) rc = -1;  // a call that ends an aggregate returns a handle
        } else if (op.blocking) {
          rc = cf_coll_wait_sync(h);
        } else {
          handles.push_back(h);
          covers.push_back(pending);
          pending.clear();
          continue;
        }
      }
      if (rc != CF_OK) {
        log.fail(op.name + ": status " + std::to_string(rc) + ": " + cf_last_error());
        return;  // the team is out of step now: stop here
      }
      if (op.blocking) {
        if ((op.flags & CF_COLL_OUT_NOSYNC) == 0) soak_verify(log, op, "after its blocking call");
        pending.clear();
      }
    }
    // Sync in this image's own order.
    std::vector<uint32_t> order(handles.size());
    for (uint32_t k = 0; k < order.size(); ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), own);
    auto synced = [&](uint32_t k) {
      for (uint32_t i : covers[k]) {
        if ((ops[i].flags & CF_COLL_OUT_NOSYNC) == 0) soak_verify(log, ops[i], "after its sync");
      }
    };
    const int how = static_cast<int>(own() % 5);
    std::vector<cf_coll_handle_t> set;
    for (uint32_t k : order) set.push_back(handles[k]);
    int rc = CF_OK;
    if (how == 0) {  // wait_sync, one by one
      for (uint32_t j = 0; j < order.size() && rc == CF_OK; ++j) {
        rc = cf_coll_wait_sync(set[j]);
        if (rc == CF_OK) synced(order[j]);
      }
    } else if (how == 1) {  // wait_sync_all
      rc = cf_coll_wait_sync_all(set.data(), set.size());
      if (rc == CF_OK) {
        for (uint32_t k : order) synced(k);
      }
    } else if (how == 2 || how == 3) {  // try_sync_some / wait_sync_some loops
      std::vector<bool> done(set.size(), false);
      for (size_t left = set.size(); left > 0 && (rc == CF_OK || rc == CF_NOT_READY);) {
        rc = how == 2 ? cf_coll_try_sync_some(set.data(), set.size()) : cf_coll_wait_sync_some(set.data(), set.size());
        for (size_t j = 0; j < set.size(); ++j) {
          if (!done[j] && set[j] == CF_COLL_INVALID_HANDLE) {
            done[j] = true;
            --left;
            synced(order[j]);
          }
        }
      }
      if (rc == CF_NOT_READY) rc = CF_OK;
    } else {  // try_sync round robin
      std::vector<bool> done(set.size(), false);
      for (size_t left = set.size(); left > 0 && rc == CF_OK;) {
        for (size_t j = 0; j < set.size() && rc == CF_OK; ++j) {
          if (done[j]) continue;
          const int t = cf_coll_try_sync(set[j]);
          if (t == CF_NOT_READY) continue;
          rc = t;
          if (t == CF_OK) {
            done[j] = true;
            --left;
            synced(order[j]);
          }
        }
      }
    }
    if (rc != CF_OK) {
      log.fail("soak seed " + std::to_string(seed) + " epoch " + std::to_string(epoch) + ": sync (way " +
               std::to_string(how) + ") returned " + std::to_string(rc) + ": " + cf_last_error());
      return;
    }
    if (loose) continue;  // every op was checked after its sync
    log.checks++;
    if (cf_coll_barrier(CF_TEAM_ALL, all_sync) != CF_OK) {
      log.fail(std::string("soak: closing barrier: ") + cf_last_error());
      return;
    }
    for (const SoakOp& op : ops) soak_verify(log, op, "after the closing barrier");
  }
  cf_team_free(half);
}

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

}  // namespace

// Mode "sizes" (no CF_CHECK; one image per node): node 1 gives 20
// broadcasts rooted on node 0 twice the root's nbytes. Its receive meets a
// message of another size, whether next in the sender's ring or after it
// was posted, and fails with CF_ERR_MISMATCH, its destination untouched;
// the root's calls succeed; an agreeing allreduce follows.
void run_sizes(Log& log, cf_image_t me) {
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
void run_check(Log& log, cf_image_t me) {
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

// Messages between this process's image threads that went through a ring
// (cf_stats_t::fastbox), read by each image as its body ends: the engine,
// and its counts, are gone once cf_run_images returns.
static std::atomic<unsigned long long> g_inproc_ring{0};
static void note_inproc_rings() {
  cf_stats_t s{};
  if (cf_get_stats(&s) != CF_OK) return;
  unsigned long long seen = g_inproc_ring.load();
  while (s.fastbox > seen && !g_inproc_ring.compare_exchange_weak(seen, s.fastbox)) {
  }
}

int main(int argc, char** argv) {
  if (cf_init(&argc, &argv) != CF_OK) {
    std::fprintf(stderr, "cf_init: %s\n", cf_last_error());
    return 1;
  }
  cf_set_error_mode(CF_ERRORS_RETURN);
  const std::string mode = argc > 1 ? argv[1] : "all";
  const char* k = std::getenv("CF_IMAGES");
  const uint32_t images = k != nullptr ? static_cast<uint32_t>(std::atoi(k)) : 1;
  Log log;
  const auto start = std::chrono::steady_clock::now();
  std::atomic<int> lost_seen{0};
  std::string lost_message;
  std::mutex lost_mutex;
  std::atomic<long long> lost_at_ms{0};
  auto note_lost = [&](int rc, const char* what) {
    if (rc != CF_ERR_PEER_LOST) {
      log.fail(std::string(what) + " with a lost peer returned " + std::to_string(rc));
      return;
    }
    long long zero = 0;
    lost_at_ms.compare_exchange_strong(zero, wall_ms());
    lost_seen++;
    std::lock_guard<std::mutex> lock(lost_mutex);
    lost_message = cf_last_error();
  };
  const char* timeout_text = std::getenv("CF_PEER_TIMEOUT");
  const double peer_timeout_s = timeout_text != nullptr ? std::atof(timeout_text) : 5.0;
  auto body = [&](cf_image_t me) {
    if (mode == "all") {
      run_all(log, me);
    } else if (mode == "soak") {
      run_soak(log, me, argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1, argc > 3 ? std::atoi(argv[3]) : 50);
    } else if (mode == "kill" || mode == "exit3") {
      // Everyone but node 1 waits for a broadcast rooted on node 1.
      const uint32_t root = images;  // the first image of node 1
      if (cf_mynode() == 1) {
        if (me == root) {
          std::printf("event at_ms=%lld\n", wall_ms());
          std::fflush(stdout);
          if (mode == "kill") raise(SIGKILL);
          std::exit(3);
        }
      }
      uint64_t x = me, y = 0;
      note_lost(cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal), "broadcast");
    } else if (mode == "killstream") {
      // Image 0 (node 0) broadcasts 64 MiB to node 1's image, which takes
      // the first bytes (the transfer is under way: through a host stream
      // on one host) and kills itself; the root must see CF_ERR_PEER_LOST.
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
      note_lost(cf_coll_broadcast(CF_TEAM_ALL, buf.data(), 0, src.data(), kBytes, kLocal), "broadcast");
    } else if (mode == "cut") {
      // Node 1 cuts its own link and waits in a barrier nobody can reach;
      // the others wait for node 1's broadcast.
      const uint32_t root = images;
      uint64_t x = me, y = 0;
      if (cf_mynode() == 1) {
        const std::string down = "ip link set " + std::string(argc > 2 ? argv[2] : "eth0") + " down";
        std::printf("event at_ms=%lld\n", wall_ms());
        std::fflush(stdout);
        if (std::system(down.c_str()) != 0) log.fail("cut: '" + down + "' failed");
        note_lost(cf_coll_barrier(CF_TEAM_ALL, kLocal), "barrier");
      } else {
        note_lost(cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal), "broadcast");
      }
    } else if (mode == "slow") {
      const uint32_t root = images;
      uint64_t x = me, y = 0;
      if (me == root) stop_for(static_cast<long long>(2000 * peer_timeout_s));
      log.checks++;
      const int rc = cf_coll_broadcast(CF_TEAM_ALL, &y, root, &x, 8, kLocal);
      if (rc != CF_OK || y != root) {
        log.fail("slow: broadcast returned " + std::to_string(rc) + " (" + cf_last_error() + "), y = " +
                 std::to_string(y));
      }
    } else if (mode == "flood") {
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
    } else if (mode == "pump") {
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
    } else if (mode == "split") {
      // Large messages one way between 2 processes, each copied by both
      // (split copies, from 1 MiB by default): broadcasts of 4 MiB and
      // 3 MiB + 12345 (32 and 25 pieces, the last one short), of 256 KiB
      // and of a piece and a part (200 KiB + 123; these two stream unless
      // CF_HOST_SPLIT_BYTES is lower), a gather of 1 MiB + 4099 byte
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
    } else if (mode == "runahead") {
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
    } else if (mode == "check") {
      run_check(log, me);
    } else if (mode == "sizes") {
      run_sizes(log, me);
    } else if (mode == "late") {
      // Node 1 spins (CPU) for a while before joining; the others wait.
      uint64_t x = me, y = 0;
      if (cf_mynode() == 1) {
        const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
        volatile uint64_t spin = 0;
        while (std::chrono::steady_clock::now() < until) spin = spin + 1;
      }
      log.checks++;
      if (cf_coll_broadcast(CF_TEAM_ALL, &y, images, &x, 8, kLocal) != CF_OK || y != images) {
        log.fail("late broadcast");
      }
    }
  };
  using Body = decltype(body);
  auto trampoline = [](cf_image_t image, void* arg) {
    (*static_cast<Body*>(arg))(image);
    note_inproc_rings();
  };
  // "reruns": 30 runs of images back to back, each a burst of allreduces, so
  // a fast node starts the next run while others finish this one (its
  // messages must wait for them, not vanish with the old run's engine).
  auto burst = [&](cf_image_t me) {
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
  };
  auto burst_trampoline = [](cf_image_t image, void* arg) { (*static_cast<decltype(burst)*>(arg))(image); };
  for (int run = 0; run < (mode == "reruns" ? 30 : 1); ++run) {
    const int rc = mode == "reruns" ? cf_run_images(images, kFunctions, 1, burst_trampoline, &burst)
                                    : cf_run_images(images, kFunctions, 1, trampoline, &body);
    if (rc != CF_OK) log.fail(std::string("cf_run_images: ") + cf_last_error());
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  const double cpu = usage.ru_utime.tv_sec + usage.ru_stime.tv_sec +
                     (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
  for (const std::string& f : log.failures) std::printf("FAIL %s\n", f.c_str());
  if (lost_seen > 0) {
    std::printf("lost: %d waits returned CF_ERR_PEER_LOST: %s\n", lost_seen.load(), lost_message.c_str());
    std::printf("lost at_ms=%lld\n", lost_at_ms.load());
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
  const bool lost = lost_seen > 0;
  // The cut node's link to the launcher is cut too: its goodbye could only
  // time out. It ends here; cfrun reports it.
  if (mode == "cut" && cf_mynode() == 1) std::_Exit(log.failures.empty() ? 0 : 1);
  if (!lost && cf_finalize() != CF_OK) {
    std::fprintf(stderr, "cf_finalize: %s\n", cf_last_error());
    return 1;
  }
  return log.failures.empty() ? 0 : 1;
}
