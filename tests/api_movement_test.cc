// The data-movement collectives through the public C API and the real
// engine (inproc images): every collective x every registered algorithm x
// P in {1, 2, 3, 4, 5, 7, 8, 13, 16, 17, 32} x sizes {1, 7, 64, 4096, 1 MiB}
// (capped so one image's buffers stay within 8 MiB), with non-zero roots,
// verified byte for byte against the sequential reference; then the v, m
// and in-place forms and the argument errors.
#include <doctest/doctest.h>

#include <algorithm>
#include <barrier>
#include <mutex>
#include <cstring>
#include <string>
#include <vector>

#include "graph/reference.h"
#include "graph/registry.h"
#include "tests/test_util.h"

namespace {

using carflow::CollectiveSpec;
using carflow::CollKind;
using Bytes = std::vector<uint8_t>;
using carflow_test::kAllLocal;
using carflow_test::run_images;

constexpr int kAllSingle = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE |
                           CF_COLL_ALL_THREADS;

// Starts one data-movement call of `spec` on the calling image with its own
// buffers (single-address form; the v form when spec.counts is set).
cf_coll_handle_t start_call(const CollectiveSpec& spec, Bytes& dst, Bytes& src, int flags) {
  std::vector<size_t> counts(spec.counts.begin(), spec.counts.end());
  std::vector<size_t> displs(spec.displs.begin(), spec.displs.end());
  const size_t* c = counts.empty() ? nullptr : counts.data();
  const size_t* d = displs.empty() ? nullptr : displs.data();
  const bool v = !spec.counts.empty();
  const uint32_t r = spec.root;
  switch (spec.kind) {
    case CollKind::Broadcast:
      return cf_coll_broadcast_nb(CF_TEAM_ALL, dst.data(), r, src.data(), spec.nbytes, flags);
    case CollKind::Scatter:
      return v ? cf_coll_scatterv_nb(CF_TEAM_ALL, dst.data(), r, src.data(), c, d, flags)
               : cf_coll_scatter_nb(CF_TEAM_ALL, dst.data(), r, src.data(), spec.nbytes, flags);
    case CollKind::Gather:
      return v ? cf_coll_gatherv_nb(CF_TEAM_ALL, r, dst.data(), src.data(), c, d, flags)
               : cf_coll_gather_nb(CF_TEAM_ALL, r, dst.data(), src.data(), spec.nbytes, flags);
    case CollKind::GatherAll:
      return v ? cf_coll_gather_allv_nb(CF_TEAM_ALL, dst.data(), src.data(), c, d, flags)
               : cf_coll_gather_all_nb(CF_TEAM_ALL, dst.data(), src.data(), spec.nbytes, flags);
    case CollKind::Exchange:
      return v ? cf_coll_exchangev_nb(CF_TEAM_ALL, dst.data(), src.data(), c, flags)
               : cf_coll_exchange_nb(CF_TEAM_ALL, dst.data(), src.data(), spec.nbytes, flags);
    case CollKind::Permute: {
      std::vector<cf_image_t> perm(spec.perm.begin(), spec.perm.end());
      return cf_coll_permute_nb(CF_TEAM_ALL, dst.data(), src.data(), spec.nbytes, perm.data(), flags);
    }
    default:
      return CF_COLL_INVALID_HANDLE;
  }
}

// One test point: image 0 computes the reference while the others wait at
// a std::barrier (not the library's), then every image runs and checks.
struct Point {
  CollectiveSpec spec;
  std::string algorithm;  // "" = default table
};

// Runs the points on P images; returns the failures in words.
std::vector<std::string> run_points(uint32_t P, const std::vector<Point>& points) {
  std::barrier<> sync(P);
  std::vector<Bytes> inputs, want;
  std::vector<std::string> failures;
  std::mutex mutex;
  auto report = [&](const Point& p, uint32_t me, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures.size() < 20) {
      failures.push_back(std::string(carflow::coll_kind_name(p.spec.kind)) + " " +
                         (p.algorithm.empty() ? "default" : p.algorithm) + " P=" + std::to_string(P) +
                         " nbytes=" + std::to_string(p.spec.nbytes) + " root=" +
                         std::to_string(p.spec.root) + (p.spec.counts.empty() ? "" : " (v)") +
                         " image " + std::to_string(me) + ": " + what);
    }
  };
  const int rc = run_images(P, [&](cf_image_t me) {
    for (const Point& p : points) {
      if (me == 0) {
        inputs = carflow::reference::inputs(p.spec);
        want = carflow::reference::expected(p.spec, inputs);
      }
      sync.arrive_and_wait();
      const int kind = static_cast<int>(p.spec.kind);
      if (cf_coll_set_algorithm(kind, p.algorithm.empty() ? nullptr : p.algorithm.c_str()) != CF_OK) {
        report(p, me, std::string("cf_coll_set_algorithm: ") + cf_last_error());
      }
      Bytes src = inputs[me];
      Bytes dst = carflow::reference::blank_outputs(p.spec)[me];
      const cf_coll_handle_t h = start_call(p.spec, dst, src, kAllLocal);
      if (h == CF_COLL_INVALID_HANDLE) {
        report(p, me, std::string("start failed: ") + cf_last_error());
      } else if (cf_coll_wait_sync(h) != CF_OK) {
        report(p, me, std::string("sync failed: ") + cf_last_error());
      } else if (dst != want[me]) {
        size_t k = 0;
        while (dst[k] == want[me][k]) ++k;
        report(p, me, "destination differs at byte " + std::to_string(k));
      } else if (src != inputs[me]) {
        report(p, me, "source was modified");
      }
      cf_coll_set_algorithm(kind, nullptr);
      sync.arrive_and_wait();  // nobody reuses inputs/want before all checked
    }
  });
  if (rc != CF_OK) failures.push_back(std::string("cf_run_images: ") + cf_last_error());
  return failures;
}

bool is_movement(CollKind k) { return k != CollKind::Barrier && !carflow::is_computational(k); }
// Bytes one image's buffers hold for a block size (P blocks, or 1).
uint64_t footprint(CollKind k, uint32_t P, uint64_t nbytes) {
  return (k == CollKind::Broadcast || k == CollKind::Permute) ? nbytes : uint64_t{P} * nbytes;
}

using carflow::reference::test_spec;


TEST_CASE("every data-movement collective and algorithm matches the reference on inproc images") {
  for (uint32_t P : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 13u, 16u, 17u, 32u}) {
    std::vector<Point> points;
    for (int k = 0; k < carflow::kCollKinds; ++k) {
      const CollKind kind = static_cast<CollKind>(k);
      if (!is_movement(kind)) continue;
      std::vector<std::string> algos = {""};
      for (const auto* g : carflow::GeneratorRegistry::instance().list(kind)) algos.push_back(g->name);
      for (const std::string& algo : algos) {
        for (uint64_t nbytes : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4096}, uint64_t{1} << 20}) {
          if (footprint(kind, P, nbytes) > (uint64_t{8} << 20)) continue;
          // Large sizes on many images: one root is enough (time).
          const bool big = nbytes > 4096 || P > 16;
          for (uint32_t root : {P - 1, P / 2}) {
            if (big && root != P - 1) continue;
            points.push_back(Point{test_spec(kind, P, root, nbytes), algo});
          }
        }
      }
    }
    INFO("P = ", P, ", ", points.size(), " points");
    const auto failures = run_points(P, points);
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}

TEST_CASE("v forms (counts with zeros, displs with gaps) match the reference for every algorithm") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
    std::vector<Point> points;
    for (CollKind kind : {CollKind::Scatter, CollKind::Gather, CollKind::GatherAll, CollKind::Exchange}) {
      std::vector<std::string> algos = {""};
      for (const auto* g : carflow::GeneratorRegistry::instance().list(kind)) algos.push_back(g->name);
      for (const std::string& algo : algos) {
        for (uint64_t nbytes : {uint64_t{5}, uint64_t{3000}}) {
          for (bool displs : {false, true}) {
            if (displs && kind == CollKind::Exchange) continue;
            CollectiveSpec s = test_spec(kind, P, P / 2, nbytes);
            carflow::reference::make_variable(&s, displs);
            points.push_back(Point{s, algo});
          }
        }
      }
    }
    const auto failures = run_points(P, points);
    for (const auto& f : failures) FAIL_CHECK(f);
    CHECK(failures.empty());
  }
}

TEST_CASE("m forms: each image uses its own entry of dstlist / srclist") {
  const uint32_t P = 5;
  const uint64_t n = 100;
  std::vector<Bytes> dsts(P, Bytes(P * n)), srcs(P, Bytes(P * n));
  std::vector<void*> dstlist(P), srclist(P);
  for (uint32_t i = 0; i < P; ++i) {
    dstlist[i] = dsts[i].data();
    srclist[i] = srcs[i].data();
  }
  std::vector<int> bad(P, 0);
  auto fill = [&](uint32_t me) {
    for (uint64_t k = 0; k < P * n; ++k) srcs[me][k] = carflow::reference::pattern(me, k);
    std::fill(dsts[me].begin(), dsts[me].end(), 0);
  };
  std::barrier<> sync(P);
  REQUIRE(run_images(P, [&](cf_image_t me) {
    // broadcastm from image 2: every dstlist entry gets image 2's source.
    fill(me);
    sync.arrive_and_wait();
    bad[me] |= cf_coll_broadcastm(CF_TEAM_ALL, dstlist.data(), 2, srcs[me].data(), n, kAllSingle) != CF_OK;
    for (uint64_t k = 0; k < n; ++k) bad[me] |= dsts[me][k] != carflow::reference::pattern(2, k);
    sync.arrive_and_wait();
    // scatterm from image 3.
    fill(me);
    sync.arrive_and_wait();
    bad[me] |= cf_coll_scatterm(CF_TEAM_ALL, dstlist.data(), 3, srcs[me].data(), n, kAllSingle) != CF_OK;
    for (uint64_t k = 0; k < n; ++k) bad[me] |= dsts[me][k] != carflow::reference::pattern(3, me * n + k);
    sync.arrive_and_wait();
    // gatherm to image 1 from each srclist entry's first block.
    fill(me);
    sync.arrive_and_wait();
    bad[me] |= cf_coll_gatherm(CF_TEAM_ALL, 1, dsts[me].data(), srclist.data(), n, kAllSingle) != CF_OK;
    if (me == 1) {
      for (uint32_t i = 0; i < P; ++i) {
        for (uint64_t k = 0; k < n; ++k) bad[me] |= dsts[me][i * n + k] != carflow::reference::pattern(i, k);
      }
    }
    sync.arrive_and_wait();
    // gather_allm and exchangem.
    fill(me);
    sync.arrive_and_wait();
    bad[me] |= cf_coll_gather_allm(CF_TEAM_ALL, dstlist.data(), srclist.data(), n, kAllSingle) != CF_OK;
    for (uint32_t i = 0; i < P; ++i) {
      for (uint64_t k = 0; k < n; ++k) bad[me] |= dsts[me][i * n + k] != carflow::reference::pattern(i, k);
    }
    sync.arrive_and_wait();
    fill(me);
    sync.arrive_and_wait();
    bad[me] |= cf_coll_exchangem(CF_TEAM_ALL, dstlist.data(), srclist.data(), n, kAllSingle) != CF_OK;
    for (uint32_t i = 0; i < P; ++i) {
      for (uint64_t k = 0; k < n; ++k) {
        bad[me] |= dsts[me][i * n + k] != carflow::reference::pattern(i, me * n + k);
      }
    }
  }) == CF_OK);
  for (uint32_t i = 0; i < P; ++i) CHECK_MESSAGE(bad[i] == 0, "image ", i);
}

TEST_CASE("in place: an image's own block may be identical to its single block") {
  const uint32_t P = 6;
  const uint64_t n = 64;
  for (const char* algo_scatter : {"flat", "binomial"}) {
    std::vector<int> bad(P, 0);
    REQUIRE(run_images(P, [&](cf_image_t me) {
      cf_coll_set_algorithm(CF_KIND_SCATTER, algo_scatter);
      cf_coll_set_algorithm(CF_KIND_GATHER, algo_scatter);
      Bytes all(P * n);
      for (uint64_t k = 0; k < P * n; ++k) all[k] = carflow::reference::pattern(9, k);
      const Bytes before = all;
      // scatter: the root's destination is its own block of the source.
      Bytes mine(n);
      void* dst = me == 4 ? all.data() + 4 * n : mine.data();
      bad[me] |= cf_coll_scatter(CF_TEAM_ALL, dst, 4, all.data(), n, kAllLocal) != CF_OK;
      const uint8_t* got = static_cast<uint8_t*>(dst);
      for (uint64_t k = 0; k < n; ++k) bad[me] |= got[k] != before[me * n + k];
      // gather_all: each image's source is its own block of the destination.
      Bytes g(P * n, 0);
      for (uint64_t k = 0; k < n; ++k) g[me * n + k] = carflow::reference::pattern(me, k);
      bad[me] |= cf_coll_gather_all(CF_TEAM_ALL, g.data(), g.data() + me * n, n, kAllLocal) != CF_OK;
      for (uint32_t i = 0; i < P; ++i) {
        for (uint64_t k = 0; k < n; ++k) bad[me] |= g[i * n + k] != carflow::reference::pattern(i, k);
      }
      // gather to image 0 in place.
      Bytes h(P * n, 0), own(n);
      for (uint64_t k = 0; k < n; ++k) own[k] = carflow::reference::pattern(me, k);
      if (me == 0) std::memcpy(h.data(), own.data(), n);
      bad[me] |= cf_coll_gather(CF_TEAM_ALL, 0, h.data(), me == 0 ? h.data() : own.data(), n, kAllLocal) != CF_OK;
      if (me == 0) {
        for (uint32_t i = 0; i < P; ++i) {
          for (uint64_t k = 0; k < n; ++k) bad[me] |= h[i * n + k] != carflow::reference::pattern(i, k);
        }
      }
      cf_coll_set_algorithm(CF_KIND_SCATTER, nullptr);
      cf_coll_set_algorithm(CF_KIND_GATHER, nullptr);
    }) == CF_OK);
    for (uint32_t i = 0; i < P; ++i) CHECK_MESSAGE(bad[i] == 0, algo_scatter, " image ", i);
  }
}

TEST_CASE("a broadcast in place (src == dst), repeated: each call moves the root's new bytes") {
  // From the second call on it takes the repeated-call path, as MPI_Bcast does.
  const uint32_t P = 5;
  const uint64_t n = 24;
  std::vector<int> bad(P, 0);
  REQUIRE(run_images(P, [&](cf_image_t me) {
    Bytes buf(n);
    for (int round = 0; round < 4; ++round) {
      for (uint64_t k = 0; k < n; ++k) buf[k] = me == 2 ? carflow::reference::pattern(round, k) : 0;
      bad[me] |= cf_coll_broadcast(CF_TEAM_ALL, buf.data(), 2, buf.data(), n, kAllLocal) != CF_OK;
      for (uint64_t k = 0; k < n; ++k) bad[me] |= buf[k] != carflow::reference::pattern(round, k);
    }
  }) == CF_OK);
  for (uint32_t i = 0; i < P; ++i) CHECK_MESSAGE(bad[i] == 0, "image ", i);
}

TEST_CASE("bad arguments are CF_ERR_BAD_ARG naming the argument, and start nothing") {
  const uint32_t P = 3;
  std::vector<std::string> errors(P);
  REQUIRE(run_images(P, [&](cf_image_t me) {
    Bytes a(P * 16), b(P * 16);
    std::string& e = errors[me];
    auto expect = [&](cf_coll_handle_t h, const char* needle) {
      if (h != CF_COLL_INVALID_HANDLE || cf_last_status() != CF_ERR_BAD_ARG ||
          std::string(cf_last_error()).find(needle) == std::string::npos) {
        e += std::string("[expected '") + needle + "', got '" + cf_last_error() + "'] ";
      }
    };
    expect(cf_coll_scatter_nb(CF_TEAM_ALL, a.data(), P, b.data(), 16, kAllLocal), "srcimage");
    expect(cf_coll_gather_nb(CF_TEAM_ALL, 7, a.data(), b.data(), 16, kAllLocal), "dstimage");
    expect(cf_coll_gather_all_nb(CF_TEAM_ALL, a.data(), b.data(), 0, kAllLocal), "nbytes");
    expect(cf_coll_gather_all_nb(CF_TEAM_ALL, nullptr, b.data(), 16, kAllLocal), "dst");
    expect(cf_coll_exchange_nb(CF_TEAM_ALL, a.data(), nullptr, 16, kAllLocal), "src");
    // Overlaps other than the permitted identical blocks.
    expect(cf_coll_exchange_nb(CF_TEAM_ALL, a.data(), a.data() + 1, 16, kAllLocal), "overlap");
    expect(cf_coll_gather_all_nb(CF_TEAM_ALL, a.data(), a.data() + 1, 16, kAllLocal), "overlap");
    // m forms: LOCAL with ALL_THREADS is not permitted.
    void* list[P] = {a.data(), a.data(), a.data()};
    expect(cf_coll_broadcastm_nb(CF_TEAM_ALL, list, 0, b.data(), 16, kAllLocal), "CF_COLL_LOCAL");
    expect(cf_coll_gather_allm_nb(CF_TEAM_ALL, nullptr, list, 16, kAllSingle), "dstlist");
    // v forms.
    const size_t counts[P] = {4, 4, 4};
    const size_t overlapping[P] = {0, 2, 8};
    expect(cf_coll_gatherv_nb(CF_TEAM_ALL, 0, a.data(), b.data(), nullptr, nullptr, kAllLocal), "counts");
    expect(cf_coll_gather_allv_nb(CF_TEAM_ALL, a.data(), b.data(), counts, overlapping, kAllLocal), "displs");
    // permute: not a permutation.
    const cf_image_t twice[P] = {1, 1, 0};
    expect(cf_coll_permute_nb(CF_TEAM_ALL, a.data(), b.data(), 16, twice, kAllLocal), "perm[1]");
    expect(cf_coll_permute_nb(CF_TEAM_ALL, a.data(), b.data(), 16, nullptr, kAllLocal), "perm");
    // Unknown algorithm names list the valid ones.
    if (cf_coll_set_algorithm(CF_KIND_EXCHANGE, "nope") != CF_ERR_BAD_ARG ||
        std::string(cf_last_error()).find("pairwise") == std::string::npos) {
      e += std::string("[set_algorithm: '") + cf_last_error() + "'] ";
    }
    // Nothing was started: the next collective still matches on every image.
    if (cf_coll_barrier(CF_TEAM_ALL, kAllLocal) != CF_OK) e += "[barrier after errors failed]";
  }) == CF_OK);
  for (uint32_t i = 0; i < P; ++i) CHECK_MESSAGE(errors[i].empty(), "image ", i, ": ", errors[i]);
}

}  // namespace

namespace {

TEST_CASE("gather with OUT_ALLSYNC: when any image's sync returns, the root already has every block") {
  constexpr int kOutAll = CF_COLL_IN_MYSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  for (uint32_t P : {2u, 3u, 5u, 8u}) {
    const uint64_t n = 48;
    const uint32_t root = P - 1;
    for (const char* algo : {"flat", "binomial"}) {
      Bytes root_dst(P * n, 0);
      std::vector<int> bad(P, 0);
      REQUIRE(run_images(P, [&](cf_image_t me) {
        cf_coll_set_algorithm(CF_KIND_GATHER, algo);
        for (int rep = 0; rep < 20; ++rep) {
          Bytes src(n);
          for (uint64_t k = 0; k < n; ++k) src[k] = carflow::reference::pattern(me, k, rep);
          bad[me] |= cf_coll_gather(CF_TEAM_ALL, root, me == root ? root_dst.data() : nullptr,
                                    src.data(), n, kOutAll) != CF_OK;
          // Every image, root or not, sees the root's complete result now.
          for (uint32_t i = 0; i < P; ++i) {
            for (uint64_t k = 0; k < n; ++k) {
              bad[me] |= root_dst[i * n + k] != carflow::reference::pattern(i, k, rep);
            }
          }
          cf_coll_barrier(CF_TEAM_ALL, kAllLocal);  // nobody refills before all checked
        }
        cf_coll_set_algorithm(CF_KIND_GATHER, nullptr);
      }) == CF_OK);
      for (uint32_t i = 0; i < P; ++i) CHECK_MESSAGE(bad[i] == 0, algo, " P=", P, " image ", i);
    }
  }
}

}  // namespace
