// Aggregates (CF_COLL_AGGREGATE): members join the team's open aggregate,
// the last call starts the merged schedule under one handle.
#include "engine/engine.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>

#include <sys/eventfd.h>
#include <unistd.h>

#include "engine/arg_check.h"
#include "engine/status.h"
#include "engine/tsan_annotations.h"
#include "graph/aggregate.h"
#include "graph/json.h"
#include "graph/layout.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "transports/small_copy.h"
#include "engine/engine_internal.h"

namespace carflow {

inline uint64_t Engine::launch_aggregate_inline(ImageContext& img, Team& team, Schedule* merged,
                                                const CollectiveCall* last, uint64_t last_digest) {
  OpenAggregate& agg = team.aggregate;
  Instance* inst = merged->acquire();
  // The members' buffers are already in Instance::user order; data
  // movement has no op to bind, only reductions read ops[m].
  uint32_t members = agg.size();
  std::memcpy(inst->user, agg.buffers(), 2 * size_t{members} * sizeof(char*));
  for (const auto& [m, op] : agg.ops) inst->ops[m] = op;
  for (uint64_t d : agg.digests) inst->digest = combine_digests(inst->digest, d);
  if (last != nullptr) {  // the last member, bound here instead of added
    inst->bind_buffers(members, last->src, last->dst);
    if (is_computational(last->kind)) inst->ops[members] = last->op;
    if (config_.check) inst->digest = combine_digests(inst->digest, last_digest);
    ++members;
  }
  agg.clear();
  return launch(img, inst, team, members);
}

uint64_t Engine::launch_aggregate(ImageContext& img, Team& team, Schedule* merged, const CollectiveCall* last,
                                  uint64_t last_digest) {
  return launch_aggregate_inline(img, team, merged, last, last_digest);
}

uint64_t Engine::end_prepared_aggregate(ImageContext& img, const CollectiveCall& call, const PreparedCall& prepared) {
  if (prepared.member == nullptr) return 0;
  Team& team = team_of(img, call);
  Schedule* merged = team.aggregate.repeated_by(prepared.part);
  if (merged == nullptr) return 0;  // join_aggregate takes the call
  return launch_aggregate_inline(img, team, merged, &call, prepared.digest);
}

namespace {

// The exit signal an aggregate can use: the cheaper rooted forms only when
// every member allows the same one (graph/transforms.h), else -1.
template <typename RootOf>
int32_t common_root(const std::vector<const Schedule*>& parts, RootOf root_of) {
  const int32_t root = root_of(parts[0]->spec());
  for (const Schedule* s : parts) {
    if (root_of(s->spec()) != root) return -1;
  }
  return root;
}

}  // namespace

LocalDag merged_dag(const std::vector<const Schedule*>& parts, uint32_t image, bool own, bool in_allsync,
                    bool out_allsync) {
  std::vector<AggregateMember> members;
  members.reserve(parts.size());
  for (uint32_t m = 0; m < parts.size(); ++m) {
    const CollectiveSpec& spec = parts[m]->spec();
    uint32_t group = m;
    for (uint32_t j = 0; j < m; ++j) {
      if (parts[j]->spec() == spec) {
        group = members[j].group;
        break;
      }
    }
    LocalDag dag = own ? parts[m]->dag()
                       : generate_local(*GeneratorRegistry::instance().find(spec.kind, spec.algorithm),
                                        spec, image);
    members.push_back(AggregateMember{std::move(dag), group, spec.elem_size});
  }
  const uint32_t images = parts[0]->spec().images;
  return apply_sync_mode(merge_aggregate(std::move(members)), images, in_allsync, out_allsync,
                         common_root(parts, out_allsync_root), common_root(parts, out_allsync_fan_in_root));
}

// CF_COLL_AGGREGATE (GASNet collectives notes v1.7): a member is checked and its DAG generated
// when it is called, so a bad call fails at once and joins nothing; data
// moves when the last member (a call without the flag) starts the merged
// DAG under one handle. Buffers are bound at each member's call.
int Engine::join_aggregate(ImageContext& img, const CollectiveCall& call, PreparedCall& prepared,
                           uint64_t* handle, std::string* error) {
  Team& team = team_of(img, call);
  if (aggregate_full(team) && call.aggregate) {
    *error = "flags: an aggregate holds at most " + std::to_string(kMaxAggregateMembers) +
             " calls; end it with a call without CF_COLL_AGGREGATE";
    return kErrBadArg;
  }
  if (prepared.member == nullptr && !prepare_member(img, call, prepared, error)) return no_schedule_status(img);
  OpenAggregate& agg = team.aggregate;
  // A last call that ends the team's last aggregate again: its merged
  // schedule, with no lookup.
  Schedule* merged = call.aggregate ? nullptr : agg.repeated_by(prepared.part);
  add_part(team, call, prepared, call.src, call.dst);
  if (call.aggregate) {
    *handle = 0;  // the GASNet notes leave it undefined; the API returns CF_COLL_INVALID_HANDLE
    return kOk;
  }
  if (merged == nullptr) merged = aggregate_schedule(img, team, error);
  if (merged == nullptr) {
    agg.pop_back();  // the failed last call joins nothing; the aggregate stays open
    return kErrBadArg;
  }
  *handle = launch_aggregate(img, team, merged);
  return kOk;
}

void OpenAggregate::grow() {
  // At most kMaxAggregateMembers: has_room() is then the limit too.
  const uint32_t capacity = std::min(kMaxAggregateMembers, std::max(16u, 2 * capacity_));
  auto parts = std::make_unique<uintptr_t[]>(capacity);
  auto buffers = std::make_unique<char*[]>(2 * size_t{capacity});
  std::copy(parts_.get(), parts_.get() + size_, parts.get());
  std::copy(buffers_.get(), buffers_.get() + 2 * size_, buffers.get());
  parts_ = std::move(parts);
  buffers_ = std::move(buffers);
  capacity_ = capacity;
}

void OpenAggregate::pop_back() {
  const uint32_t m = size_ - 1;
  if (!ops.empty() && ops.back().first == m) ops.pop_back();
  if (!digests.empty()) digests.pop_back();
  size_ = m;
}

void OpenAggregate::clear() {
  size_ = 0;
  ops.clear();
  digests.clear();
}

bool Engine::prepare_member(ImageContext& img, const CollectiveCall& call, PreparedCall& prepared,
                            std::string* error) {
  CollectiveCall member = call;  // generated without a sync transform: the aggregate has one
  member.in_allsync = member.out_allsync = false;
  prepared.member = schedule_for(img, member, prepared.gen, error, false);
  if (prepared.member == nullptr) return false;
  prepared.member->pinned = true;  // merged schedules will point to it
  prepared.plain_member = !is_computational(call.kind) && !config_.check;
  prepared.part = OpenAggregate::part_of(
      prepared.member, (call.in_allsync ? OpenAggregate::kSyncIn : 0) | (call.out_allsync ? OpenAggregate::kSyncOut : 0));
  return true;
}

// The merged schedule of an aggregate that does not repeat the team's last
// one (join_aggregate looks at that first): from the image's map, or built.
Schedule* Engine::aggregate_schedule(ImageContext& img, Team& team, std::string* error) {
  OpenAggregate& agg = team.aggregate;
  // IN_ALLSYNC also under CF_CHECK: the digests ride on the entry barrier.
  const uint8_t sync = agg.merged_sync();
  const bool in_allsync = (sync & OpenAggregate::kSyncIn) || config_.check;
  const bool out_allsync = (sync & OpenAggregate::kSyncOut) != 0;
  AggregateKey wanted{{}, in_allsync, out_allsync};
  wanted.parts.reserve(agg.size());
  for (uint32_t m = 0; m < agg.size(); ++m) wanted.parts.push_back(agg.part(m));
  auto it = img.aggregates.find(wanted);
  if (it == img.aggregates.end()) {
    LocalDag dag = merged_dag(wanted.parts, team.rank, true, in_allsync, out_allsync);
    if (!validate_local(dag, team.size(), error)) {
      *error = "aggregate: the merged DAG is invalid: " + *error;
      return nullptr;
    }
    CollectiveSpec spec = wanted.parts[0]->spec();
    spec.flags |= (in_allsync ? kSpecInAllSync : 0) | (out_allsync ? kSpecOutAllSync : 0);
    auto schedule = std::make_unique<Schedule>(spec, std::move(dag));
    schedule->parts = wanted.parts;
    it = img.aggregates.emplace(wanted, std::move(schedule)).first;
  }
  // The next aggregate on the team compares its members with this one's
  // (OpenAggregate::repeated_by).
  agg.started(it->second.get());
  return it->second.get();
}
}  // namespace carflow
