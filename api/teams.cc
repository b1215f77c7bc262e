// Teams (GASNet collectives notes v1.7, "Teams"; MPI_Comm_split's model): cf_team_split makes a
// sub-team of a parent by color and key with one gather_all of (color, key)
// over the parent, run by the engine like any collective; every member then
// computes the same member list and the same wire id, so no further
// communication is needed.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/api_internal.h"

using carflow::CollectiveCall;
using carflow::CollKind;
using carflow::ImageContext;
using carflow::Team;
using namespace carflow::api;

namespace {

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The wire id of a split's team: a hash of (parent id, how many splits the
// parent has seen, color), so members agree without talking. Teams that
// share an image pair would need equal hashes to collide (probability about
// 2^-32 per pair of live teams); the GASNet notes allow equal ids on disjoint teams.
uint32_t child_id(uint32_t parent, uint32_t split, int color) {
  const uint64_t h = mix(mix((uint64_t{parent} << 32) | split) ^ static_cast<uint32_t>(color));
  const uint32_t id = static_cast<uint32_t>(h ^ (h >> 32));
  return id == 0 ? 1 : id;  // 0 is CF_TEAM_ALL
}

}  // namespace

extern "C" {

int cf_team_split(cf_team_t parent, int color, int key, cf_team_t* newteam) {
  ImageContext* img = current_image("cf_team_split");
  if (img == nullptr) return last_status();
  Team* p = find_team(*img, parent);
  if (p == nullptr) return fail(CF_ERR_BAD_ARG, "parent: not a live team of this image");
  if (newteam == nullptr) return fail(CF_ERR_BAD_ARG, "newteam: NULL");
  if (!p->aggregate.empty()) {
    return fail(CF_ERR_BAD_ARG, "parent: an aggregate is open on it (end the aggregate first)");
  }
  struct Entry {
    int32_t color, key;
  };
  const Entry mine{color < 0 ? -1 : color, key};
  std::vector<Entry> all(p->size());
  CollectiveCall call;
  call.kind = CollKind::GatherAll;
  call.src = const_cast<Entry*>(&mine);
  call.dst = all.data();
  call.nbytes = sizeof(Entry);
  call.team = p;
  set_sync_modes(&call, CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS);
  const int status = finish_blocking(start(*img, call));
  if (status != CF_OK) return status;
  const uint32_t split = p->splits++;  // every member counts every split alike
  if (mine.color < 0) {
    *newteam = CF_TEAM_NULL;
    return succeed();
  }
  std::vector<uint32_t> ranks;  // parent ranks of my color, ordered by (key, parent rank)
  for (uint32_t r = 0; r < all.size(); ++r) {
    if (all[r].color == mine.color) ranks.push_back(r);
  }
  std::stable_sort(ranks.begin(), ranks.end(),
                   [&](uint32_t a, uint32_t b) { return all[a].key < all[b].key; });
  auto team = std::make_unique<Team>();
  team->id = child_id(p->id, split, mine.color);
  for (uint32_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i] == p->rank) team->rank = i;
    team->members.push_back(p->members[ranks[i]]);
  }
  team->images_per_node = carflow::team_images_per_node(img->engine->nodes(), team->members);
  // Odd, so never 0 (CF_TEAM_ALL); the image in the high bits, so never
  // another image's, and never -1 (CF_TEAM_NULL) below 2^31 images.
  team->handle = (uintptr_t{img->image} << 33) | (uintptr_t{++img->teams_made} << 1) | 1;
  *newteam = reinterpret_cast<cf_team_t>(team->handle);
  img->teams.push_back(std::move(team));
  ++img->epoch;
  return succeed();
}

int cf_team_free(cf_team_t team) {
  ImageContext* img = current_image("cf_team_free");
  if (img == nullptr) return last_status();
  if (team == CF_TEAM_ALL) return fail(CF_ERR_BAD_ARG, "team: CF_TEAM_ALL cannot be freed");
  Team* t = find_team(*img, team);
  if (t == nullptr) return fail(CF_ERR_BAD_ARG, "team: not a live team of this image (freed already?)");
  if (t->outstanding > 0) {
    return fail(CF_ERR_BAD_ARG, "team: " + std::to_string(t->outstanding) +
                                    " collectives on it are not synced yet");
  }
  if (!t->aggregate.empty()) {
    return fail(CF_ERR_BAD_ARG, "team: an aggregate of " + std::to_string(t->aggregate.size()) +
                                    " calls is open on it (end the aggregate first)");
  }
  img->teams.erase(std::find_if(img->teams.begin(), img->teams.end(),
                                [&](const std::unique_ptr<Team>& x) { return x.get() == t; }));
  ++img->epoch;  // a memo may name the freed team's handle
  return succeed();
}

cf_image_t cf_team_size(cf_team_t team) {
  ImageContext* img = current_image("cf_team_size");
  if (img == nullptr) return 0;
  const Team* t = find_team(*img, team);
  if (t == nullptr) return fail(CF_ERR_BAD_ARG, "team: not a live team of this image"), 0;
  succeed();
  return t->size();
}

cf_image_t cf_team_rank(cf_team_t team) {
  ImageContext* img = current_image("cf_team_rank");
  if (img == nullptr) return static_cast<cf_image_t>(-1);
  const Team* t = find_team(*img, team);
  if (t == nullptr) return fail(CF_ERR_BAD_ARG, "team: not a live team of this image"), static_cast<cf_image_t>(-1);
  succeed();
  return t->rank;
}

}  // extern "C"
