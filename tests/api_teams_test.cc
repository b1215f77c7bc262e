// Teams through the C API: cf_team_split by color and key, collectives on
// sub-teams (roots and lists in team ranks) checked against what the member
// list implies, independent orders on different teams, nested splits,
// CF_TEAM_NULL, cf_team_free and misuse.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports after cf_run_images returns.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::run_images;

constexpr int kSingle = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE | CF_COLL_ALL_THREADS;
const int kSum = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);

// The members of image `me`'s team when every image i splits with
// color(i) and key(i): images of my color ordered by (key, image).
template <typename Color, typename Key>
std::vector<uint32_t> members_of(uint32_t P, uint32_t me, Color color, Key key) {
  std::vector<uint32_t> m;
  for (uint32_t i = 0; i < P; ++i) {
    if (color(i) == color(me)) m.push_back(i);
  }
  std::stable_sort(m.begin(), m.end(), [&](uint32_t a, uint32_t b) { return key(a) < key(b); });
  return m;
}

// cf_team_split, recording a failure instead of asserting on an image thread.
bool split(cf_team_t parent, int color, int key, cf_team_t* out, cf_image_t me, ImageLog& log) {
  const int rc = cf_team_split(parent, color, key, out);
  log.expect(me, rc == CF_OK, [&] { return cat("cf_team_split: ", cf_last_error()); });
  return rc == CF_OK;
}

// Runs broadcast, allreduce, gather_all and a rooted gather on `team`, whose
// members (rank -> image) are `members`, and checks every result.
void check_team_collectives(cf_team_t team, const std::vector<uint32_t>& members, cf_image_t me,
                            ImageLog& log) {
  const uint32_t n = static_cast<uint32_t>(members.size());
  const uint32_t rank = static_cast<uint32_t>(std::find(members.begin(), members.end(), me) - members.begin());
  log.expect(me, cf_team_size(team) == n && cf_team_rank(team) == rank,
             [&] { return cat("size/rank ", cf_team_size(team), "/", cf_team_rank(team), ", want ", n, "/", rank); });
  const cf_image_t root = n - 1;  // a team rank
  int64_t value = 1000 + me, got = -1;
  int rc = cf_coll_broadcast(team, &got, root, &value, sizeof value, kAllLocal);
  log.expect(me, rc == CF_OK && got == 1000 + members[root],
             [&] { return cat("broadcast from rank ", root, ": ", got, " (", cf_last_error(), ")"); });
  int64_t sum = 0, want_sum = 0;
  for (uint32_t m : members) want_sum += m * m;
  const int64_t sq = int64_t{me} * me;
  rc = cf_coll_allreduce(team, &sum, &sq, 8, 1, kSum, 0, kAllLocal);
  log.expect(me, rc == CF_OK && sum == want_sum, [&] { return cat("allreduce ", sum, " want ", want_sum); });
  std::vector<int64_t> all(n, -1);
  rc = cf_coll_gather_all(team, all.data(), &value, sizeof value, kAllLocal);
  bool ok = rc == CF_OK;
  for (uint32_t r = 0; r < n && ok; ++r) ok = all[r] == 1000 + members[r];
  log.expect(me, ok, [&] { return std::string("gather_all is not in team-rank order"); });
  std::vector<int64_t> at_root(n, -1);
  rc = cf_coll_gather(team, 0, at_root.data(), &value, sizeof value, kAllLocal);
  ok = rc == CF_OK;
  for (uint32_t r = 0; r < n && ok && rank == 0; ++r) ok = at_root[r] == 1000 + members[r];
  log.expect(me, ok, [&] { return std::string("gather to rank 0"); });
  rc = cf_coll_barrier(team, kAllLocal);
  log.expect(me, rc == CF_OK, [&] { return cat("barrier: ", cf_last_error()); });
}

TEST_CASE("split by parity and by reversed keys: every collective works on the sub-teams in team-rank order") {
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
    CAPTURE(P);
    ImageLog log(P);
    REQUIRE(run_images(P, [&](cf_image_t me) {
              auto parity = [](uint32_t i) { return static_cast<int>(i % 2); };
              auto reversed = [](uint32_t i) { return -static_cast<int>(i); };
              cf_team_t half = CF_TEAM_ALL;
              if (!split(CF_TEAM_ALL, parity(me), reversed(me), &half, me, log)) return;
              check_team_collectives(half, members_of(P, me, parity, reversed), me, log);
              // The parent still works, interleaved with the sub-team.
              check_team_collectives(CF_TEAM_ALL, members_of(P, me, [](uint32_t) { return 0; },
                                                             [](uint32_t i) { return static_cast<int>(i); }),
                                     me, log);
              log.expect(me, cf_team_free(half) == CF_OK, [&] { return cat("free: ", cf_last_error()); });
            }) == CF_OK);
    log.report();
  }
}

TEST_CASE("collectives on different teams may be started in different orders by images in only one of them") {
  const uint32_t P = 6;
  ImageLog log(P);
  REQUIRE(run_images(P, [&](cf_image_t me) {
            cf_team_t half = CF_TEAM_ALL;
            if (!split(CF_TEAM_ALL, me % 2, 0, &half, me, log)) return;
            const int64_t one = 1;
            int64_t team_sum = 0, world_sum = 0;
            cf_coll_handle_t h[2];
            // Even images: team first; odd images: world first (allowed: no
            // image is in both the even and the odd team).
            if (me % 2 == 0) {
              h[0] = cf_coll_allreduce_nb(half, &team_sum, &one, 8, 1, kSum, 0, kAllLocal);
              h[1] = cf_coll_allreduce_nb(CF_TEAM_ALL, &world_sum, &one, 8, 1, kSum, 0, kAllLocal);
            } else {
              h[1] = cf_coll_allreduce_nb(CF_TEAM_ALL, &world_sum, &one, 8, 1, kSum, 0, kAllLocal);
              h[0] = cf_coll_allreduce_nb(half, &team_sum, &one, 8, 1, kSum, 0, kAllLocal);
            }
            const int rc = cf_coll_wait_sync_all(h, 2);
            log.expect(me, rc == CF_OK && team_sum == 3 && world_sum == 6,
                       [&] { return cat("team ", team_sum, " world ", world_sum, " ", cf_last_error()); });
            cf_team_free(half);
          }) == CF_OK);
  log.report();
}

TEST_CASE("nested splits, repeated splits of one parent, and m forms indexed by team rank") {
  const uint32_t P = 8;
  ImageLog log(P);
  std::vector<std::vector<int64_t>> stores(P, std::vector<int64_t>(4, -1));
  std::vector<int64_t> values(P);
  std::vector<std::vector<void*>> dstlist(2), srclist(2);
  for (uint32_t i = 0; i < P; ++i) {
    values[i] = 500 + i;
    dstlist[i / 4].push_back(stores[i].data());
    srclist[i / 4].push_back(&values[i]);
  }
  REQUIRE(run_images(P, [&](cf_image_t me) {
            cf_team_t quarter = CF_TEAM_ALL, half = CF_TEAM_ALL;
            if (!split(CF_TEAM_ALL, me / 4, static_cast<int>(me), &half, me, log) ||
                !split(half, (me / 2) % 2, -static_cast<int>(me), &quarter, me, log)) {
              return;
            }
            check_team_collectives(quarter, {me | 1u, me & ~1u}, me, log);  // pairs, reversed
            // Twenty successive splits of the same parent: each new team's
            // messages must not mix with its predecessors'.
            for (int round = 0; round < 20; ++round) {
              cf_team_t t = CF_TEAM_ALL;
              if (!split(CF_TEAM_ALL, static_cast<int>((me + round) % 3), 0, &t, me, log)) return;
              std::vector<uint32_t> m;
              for (uint32_t i = 0; i < P; ++i) {
                if ((i + round) % 3 == (me + round) % 3) m.push_back(i);
              }
              check_team_collectives(t, m, me, log);
              log.expect(me, cf_team_free(t) == CF_OK, [&] { return std::string("free"); });
            }
            // gather_allm over the half team: entry r of the (shared) lists is
            // team rank r's, i.e. image 4 * half + r.
            const uint32_t h = me / 4;
            const int rc = cf_coll_gather_allm(half, dstlist[h].data(), srclist[h].data(), 8, kSingle);
            bool ok = rc == CF_OK && cf_team_rank(half) == me % 4;
            for (uint32_t r = 0; r < 4 && ok; ++r) ok = stores[me][r] == 500 + h * 4 + r;
            log.expect(me, ok, [&] { return cat("gather_allm: ", cf_last_error()); });
            cf_team_free(quarter);
            cf_team_free(half);
          }) == CF_OK);
  log.report();
}

TEST_CASE("team misuse: CF_TEAM_NULL, freed and foreign handles, roots outside the team, freeing too early") {
  const uint32_t P = 4;
  ImageLog log(P);
  std::vector<cf_team_t> handles(P, CF_TEAM_ALL);
  REQUIRE(run_images(P, [&](cf_image_t me) {
            cf_team_t t = CF_TEAM_ALL;
            // Image 3 opts out with a negative color.
            if (!split(CF_TEAM_ALL, me == 3 ? -1 : 0, 0, &t, me, log)) return;
            handles[me] = t;
            auto rejected = [&](int rc, const char* what, const char* names) {
              const std::string error = cf_last_error();
              log.expect(me, rc == CF_ERR_BAD_ARG && contains(error, names),
                         [&] { return cat(what, ": status ", rc, ", '", error, "'"); });
            };
            int64_t x = 1, y = 0;
            if (me == 3) {
              log.expect(me, t == CF_TEAM_NULL, [] { return std::string("negative color must give CF_TEAM_NULL"); });
              cf_coll_handle_t h = cf_coll_allreduce_nb(t, &y, &x, 8, 1, kSum, 0, kAllLocal);
              rejected(h == CF_COLL_INVALID_HANDLE ? cf_last_status() : CF_OK, "CF_TEAM_NULL", "CF_TEAM_NULL");
            } else {
              // Root 3 is an image but not a rank of a 3-member team.
              cf_coll_handle_t h = cf_coll_broadcast_nb(t, &y, 3, &x, 8, kAllLocal);
              rejected(h == CF_COLL_INVALID_HANDLE ? cf_last_status() : CF_OK, "root outside the team", "srcimage");
              h = cf_coll_allreduce_nb(t, &y, &x, 8, 1, kSum, 0, kAllLocal);
              rejected(cf_team_free(t), "free with a collective outstanding", "not synced");
              log.expect(me, cf_coll_wait_sync(h) == CF_OK && y == 3, [&] { return cat("sum ", y); });
              log.expect(me, cf_team_free(t) == CF_OK, [&] { return cat("free: ", cf_last_error()); });
              rejected(cf_team_free(t), "double free", "team");
              h = cf_coll_barrier_nb(t, kAllLocal);
              rejected(h == CF_COLL_INVALID_HANDLE ? cf_last_status() : CF_OK, "freed team", "team");
              rejected(cf_team_size(t) == 0 ? cf_last_status() : CF_OK, "size of a freed team", "team");
            }
            rejected(cf_team_free(CF_TEAM_ALL), "free CF_TEAM_ALL", "CF_TEAM_ALL");
            rejected(cf_team_split(CF_TEAM_ALL, 0, 0, nullptr), "NULL newteam", "newteam");
            // Nothing was started by the rejected calls: the world still works.
            y = 0;
            log.expect(me, cf_coll_allreduce(CF_TEAM_ALL, &y, &x, 8, 1, kSum, 0, kAllLocal) == CF_OK && y == 4,
                       [&] { return cat("world sum ", y); });
          }) == CF_OK);
  log.report();
}

}  // namespace
