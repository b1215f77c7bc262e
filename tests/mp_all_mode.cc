// Mode "all" of mp_collectives: every collective, every algorithm at a
// small size and carflow's choice at every size, checked byte for byte
// against the sequential reference; an aggregate across nodes and the
// representative-thread mode.
#include "tests/mp_collectives.h"

#include <algorithm>
#include <string>
#include <vector>

namespace mp {

namespace {

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

}  // namespace

void run_mode_all(Context& c, cf_image_t me) {
  Log& log = c.log;
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
}  // namespace mp
