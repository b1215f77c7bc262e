// Mode "soak" of mp_collectives: random mixes of collectives, checked
// against the sequential reference.
#include "tests/mp_collectives.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace mp {

namespace {

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

}  // namespace

// mp_collectives soak [SEED [EPOCHS]]: seed 1 and 50 epochs unless given.
void run_mode_soak(Context& c, cf_image_t me) {
  run_soak(c.log, me, c.argc > 2 ? std::strtoull(c.argv[2], nullptr, 10) : 1, c.argc > 3 ? std::atoi(c.argv[3]) : 50);
}

}  // namespace mp
