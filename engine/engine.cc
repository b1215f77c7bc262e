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

namespace carflow {

// The running thread's worklist: CARs made ready while this thread is
// already executing CARs are queued here instead of recursing.
struct Worklist {
  std::vector<CarState*> local;
  // VCs this thread has claimed, each with the CAR that claimed it (or
  // nullptr): run the CAR, then drain what others queued meanwhile.
  std::vector<std::pair<ImageContext::Vc*, CarState*>> claimed;
  bool active = false;
  // run_roots of a direct() schedule: that instance's CARs completing on
  // this thread meanwhile, counted here (exit_step) rather than on the
  // exit's atomic counter.
  Instance* direct = nullptr;
  int32_t direct_done = 0;
  // While run_roots runs: the image whose thread this is (the waiter of
  // what it starts). An instance of that waiter finishing here needs no
  // wake: its waiter is this very thread, awake (finish).
  ImageContext* here = nullptr;
};

// This thread's worklist, reached through a pointer with the initial-exec
// TLS model (a load; the worklist itself, which has a destructor, may not
// use that model: transports/transport.h); made on the thread's first use.
// External linkage, as that model needs.
thread_local constinit Worklist* tls_work_ptr CF_FAST_TLS = nullptr;

namespace {
Worklist& this_worklist() {
  if (Worklist* w = tls_work_ptr) return *w;
  thread_local std::unique_ptr<Worklist> owner;  // freed when the thread exits
  owner = std::make_unique<Worklist>();
  return *(tls_work_ptr = owner.get());
}

// One COPY's bytes (a COPY's own, or one of a fused COPY's segments).
inline void copy_bytes(char* to, const char* from, uint64_t n) {
  if (to == from || n == 0) return;
  // An aggregate's pack and unpack copies are a few bytes each.
  if (n >= 8 && n <= 16) return copy_8_to_16(to, from, n);
  std::memcpy(to, from, n);
}

}  // namespace

size_t ScheduleKeyHash::operator()(const ScheduleKey& k) const {
  uint64_t h = reinterpret_cast<uintptr_t>(k.generator);
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001B3ull; };
  for (uint64_t v : {uint64_t(k.kind), uint64_t(k.images), uint64_t(k.rank), uint64_t(k.root),
                     uint64_t(k.elem_size),
                     k.nbytes, k.segment_bytes, uint64_t(k.in_allsync) * 2 + k.out_allsync,
                     uint64_t(k.radix), uint64_t(k.window), uint64_t(k.logp_L), uint64_t(k.logp_o),
                     uint64_t(k.logp_g), uint64_t(k.exclusive) * 2 + k.in_place, k.src_blksz,
                     k.src_offset, k.dst_blksz, k.dst_offset, uint64_t(k.images_per_node)}) {
    mix(v);
  }
  for (uint64_t v : k.counts) mix(v);
  for (uint64_t v : k.displs) mix(v);
  for (uint32_t v : k.perm) mix(v);
  return static_cast<size_t>(h ^ (h >> 32));
}

uint32_t team_images_per_node(const NodeMap& map, const std::vector<uint32_t>& members) {
  if (members.empty()) return 0;
  const uint32_t first_node = map.node_of(members[0]);
  uint32_t run = 0;
  while (run < members.size() && map.node_of(members[run]) == first_node) ++run;
  for (size_t i = 1; i < members.size(); ++i) {
    const bool starts_run = i % run == 0;
    const bool same_as_previous = map.node_of(members[i]) == map.node_of(members[i - 1]);
    if (starts_run == same_as_previous) return 0;  // a run too long, too short, or a node twice in a row
  }
  return run;
}

ImageContext::ImageContext(Engine* engine_in, uint32_t image_in, uint32_t images)
    : engine(engine_in), image(image_in) {
  for (uint32_t i = 0; i < images; ++i) vcs.push_back(std::make_unique<Vc>());
  all.members.resize(images);
  for (uint32_t i = 0; i < images; ++i) all.members[i] = i;
  all.rank = image_in;
  all.images_per_node = engine_in->all_images_per_node();
}

Engine::Engine(const NodeMap& map, const Config& config, Transport* remote, uint32_t host_images)
    : map_(map),
      images_(map.total()),
      local_(map.local()),
      base_(map.base()),
      config_(config),
      selection_(config, std::max(1u, std::thread::hardware_concurrency()), map.local(),
                 host_images != 0 ? host_images : map.local()),
      remote_(remote) {
  {
    std::vector<uint32_t> everyone(images_);
    for (uint32_t i = 0; i < images_; ++i) everyone[i] = i;
    all_images_per_node_ = team_images_per_node(map_, everyone);
  }
  const uint32_t cores = std::max(1u, std::thread::hardware_concurrency());
  const uint32_t on_host = std::max(host_images, local_);
  // Image threads outnumber cores: poll briefly, then yield. Across
  // processes not at all: a peer process moves its data only while it
  // runs (in one process a sender matches for a descheduled receiver), and
  // spinning first made a 4-process barrier on 2 cores 8-11 us instead of
  // 4.2 (Open MPI: 4.1).
  spin_count_ = !shares_cores(on_host) ? config.spin_count : remote_ != nullptr ? 0 : config.spin_count / 64;
  copy_routing_ = on_host > cores    ? CopyRouting::FlowGraph
                  : on_host == cores ? CopyRouting::ImageThread
                                     : CopyRouting::WaiterOrFlowGraph;
  yield_count_ = static_cast<uint32_t>(std::min<uint64_t>(
      uint64_t{config.yield_count} * (remote_ != nullptr ? 50 : 1), UINT32_MAX));
  // Rings pay off when every image has a core to drain its own on; when
  // image threads outnumber cores, senders matching for descheduled
  // receivers (the mailbox path) keeps work moving and is faster (README,
  // Performance). A node of one image has no local peer: off, so its
  // polls skip them (about 9% of a 2-process 8-byte broadcast receiver).
  const bool rings = config.inproc_rings == RingsMode::On || (config.inproc_rings == RingsMode::Auto && on_host <= cores);
  const uint64_t ring_bytes = rings && local_ > 1 ? config.inproc_fastbox_bytes : 0;
  auto inproc = std::make_unique<InprocTransport>(local_, config.inproc_eager_bytes, ring_bytes, this, base_);
  inproc->set_eager_credits(static_cast<uint32_t>(config.inproc_eager_credits));
  transport_ = std::move(inproc);
  for (uint32_t i = 0; i < local_; ++i) {
    images_ctx_.push_back(std::make_unique<ImageContext>(this, base_ + i, images_));
    if (remote_ != nullptr) images_ctx_.back()->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  }
  if (remote_ != nullptr) remote_->set_hooks(this);
  // One serial flow-graph node per VC, made once per engine (not per call).
  for (uint32_t i = 0; i < local_; ++i) {
    for (uint32_t peer = 0; peer < images_; ++peer) {
      const uint32_t image = base_ + i;
      images_ctx_[i]->vcs[peer]->node =
          std::make_unique<tbb::flow::function_node<tbb::flow::continue_msg>>(
              graph_, tbb::flow::serial, [this, image, peer](tbb::flow::continue_msg) {
                tsan_acquire_from_tbb();
                running_bodies_.fetch_add(1, std::memory_order_relaxed);
                serve_vc(image, peer);
                running_bodies_.fetch_sub(1, std::memory_order_release);
                return tbb::flow::continue_msg();
              });
    }
  }
  if (config.progress == ProgressMode::Thread) progress_thread_ = std::thread([this] { progress_loop(); });
}

// CF_PROGRESS=thread (seed v1.7, "Thoughts on progress of implementation"):
// sleeps while no collective is live; while some are, polls every image's
// transport (copies of large messages whose receive is posted, deliveries
// that need no application thread), yielding when there was nothing to do.
void Engine::progress_loop() {
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(progress_mutex_);
      progress_cv_.wait(lock, [&] { return progress_stop_ || live_.load(std::memory_order_acquire) > 0; });
      if (progress_stop_) return;
    }
    while (live_.load(std::memory_order_acquire) > 0) {
      bool did = false;
      for (uint32_t i = base_; i < base_ + local_; ++i) {
        did |= transport_->progress_all(i, false);
        if (remote_ != nullptr) did |= remote_->progress_all(i, false);
      }
      if (!did) std::this_thread::yield();
      std::lock_guard<std::mutex> lock(progress_mutex_);
      if (progress_stop_) return;
    }
  }
}

Engine::~Engine() {
  if (progress_thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(progress_mutex_);
      progress_stop_ = true;
    }
    progress_cv_.notify_all();
    progress_thread_.join();
  }
  graph_.wait_for_all();
  // wait_for_all already guarantees no body runs; this acquire makes that
  // visible to ThreadSanitizer, which cannot see inside Debian's libtbb.
  while (running_bodies_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  if (remote_ != nullptr) remote_->set_hooks(nullptr);  // forgets our posted operations
  for (auto& img : images_ctx_) {
    if (img->wake_fd >= 0) ::close(img->wake_fd);
  }
  for (Instance* inst : abandoned_) delete inst;  // their schedules still exist (images_ctx_)
}

void Engine::fail_all(int status, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (lost_status_.load() != 0) return;
    lost_what_ = what;
    lost_status_.store(status, std::memory_order_release);
  }
  for (auto& img : images_ctx_) {
    img->sleepers.fetch_add(1, std::memory_order_seq_cst);  // make wake() reach it
    wake(*img);
    img->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

std::string Engine::lost_what() const {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return lost_what_;
}

void Engine::wake(ImageContext& img) {
  if (img.sleepers.load(std::memory_order_seq_cst) == 0) return;
  if (img.wake_fd >= 0) {
    const uint64_t one = 1;
    [[maybe_unused]] ssize_t n = ::write(img.wake_fd, &one, sizeof one);
    remote_->wake_waiters();
  }
  std::lock_guard<std::mutex> lock(img.sleep_mutex);
  img.sleep_cv.notify_all();
}

bool Engine::choose_algorithm(const CollectiveCall& call, const GeneratorInfo** out,
                              std::string* error) const {
  const GeneratorInfo* gen = call.algorithm;
  if (gen == nullptr) {
    // The v forms are chosen by their largest block.
    uint64_t nbytes = call.nbytes;
    for (uint64_t c : call.counts) nbytes = std::max(nbytes, c);
    const uint32_t P = call.team != nullptr ? call.team->size() : images_;
    const uint32_t ppn = call.team != nullptr ? call.team->images_per_node : all_images_per_node_;
    gen = selection_.choose(call.kind, P, nbytes, call.elem_size, call.op.commutative, ppn);
  }
  if (is_computational(call.kind) && !call.op.commutative && !gen->preserves_order) {
    *error = "func: a CF_COLL_NONCOMM function needs an order-preserving algorithm; '" +
             gen->name + "' reorders operands";
    return false;
  }
  *out = gen;
  return true;
}

Schedule* Engine::schedule_for(ImageContext& img, const CollectiveCall& call,
                               const GeneratorInfo* gen, std::string* error, bool check_barrier) {
  const Team& team = team_of(img, call);
  // CF_CHECK: every image hears its peers' digests before touching data.
  const bool in_allsync = call.in_allsync || (config_.check && check_barrier);
  const uint64_t segment = gen->segmented ? config_.segment_bytes : 0;
  const bool logp = (gen->params & kUsesLogp) != 0;
  ScheduleKey key{call.kind,
                  gen,
                  team.size(),
                  team.rank,
                  call.root,
                  call.elem_size,
                  call.nbytes,
                  segment,
                  in_allsync,
                  call.out_allsync,
                  (gen->params & kUsesRadix) ? config_.tree_radix : 0,
                  (gen->params & kUsesWindow) ? config_.exchange_window : 0,
                  logp ? config_.logp_L : 0,
                  logp ? config_.logp_o : 0,
                  logp ? config_.logp_g : 0,
                  call.counts,
                  call.displs,
                  call.perm,
                  call.kind == CollKind::Scan && (call.flags & kExclusiveFlag) != 0,
                  call.in_place,
                  call.src_blksz,
                  call.src_offset,
                  call.dst_blksz,
                  call.dst_offset,
                  (gen->params & kUsesNodes) ? team.images_per_node : 0};
  if (img.last_schedule != nullptr && img.last_key == key) return img.last_schedule;
  auto it = img.cache.find(key);
  if (it != img.cache.end()) {
    img.last_key = key;
    img.last_schedule = it->second.get();
    return img.last_schedule;
  }
  CollectiveSpec spec;
  spec.kind = call.kind;
  spec.algorithm = gen->name;
  spec.images = team.size();
  spec.root = call.root;
  spec.nbytes = call.nbytes;
  spec.elem_size = call.elem_size;
  spec.segment_bytes = segment;
  spec.flags = (in_allsync ? kSpecInAllSync : 0) | (call.out_allsync ? kSpecOutAllSync : 0) |
               (key.exclusive ? kExclusiveFlag : 0);
  spec.src_blksz = key.src_blksz;
  spec.src_offset = key.src_offset;
  spec.dst_blksz = key.dst_blksz;
  spec.dst_offset = key.dst_offset;
  spec.images_per_node = key.images_per_node;
  spec.counts = key.counts;
  spec.displs = key.displs;
  spec.perm = key.perm;
  spec.radix = key.radix;
  spec.window = key.window;
  spec.logp_L = key.logp_L;
  spec.logp_o = key.logp_o;
  spec.logp_g = key.logp_g;
  if (!check_layout(spec, error)) return nullptr;
  LocalDag dag = generate_local(*gen, spec, team.rank);
  if (call.in_place) dag = apply_in_place(std::move(dag));
  img.generator_runs.fetch_add(1, std::memory_order_relaxed);
  if (!validate_local(dag, team.size(), error, spec.elem_size)) {
    *error = "generator '" + gen->name + "' produced an invalid DAG: " + *error;
    return nullptr;
  }
  auto schedule = std::make_unique<Schedule>(spec, std::move(dag));
  Schedule* raw = schedule.get();
  img.cache.emplace(key, std::move(schedule));
  img.last_key = key;
  img.last_schedule = raw;
  return raw;
}

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

int Engine::start(ImageContext& img, const CollectiveCall& call, uint64_t* handle,
                  std::string* error, PreparedCall* prepared) {
  PreparedCall once;
  PreparedCall& p = prepared != nullptr ? *prepared : once;
  if (p.gen == nullptr && !choose_algorithm(call, &p.gen, error)) return kErrBadArg;
  if (config_.check && !p.has_digest) {
    p.digest = arg_digest(call, *p.gen);
    p.has_digest = true;
  }
  if (call.aggregate || !team_of(img, call).aggregate.empty()) {
    return join_aggregate(img, call, p, handle, error);
  }
  if (p.schedule == nullptr) p.schedule = schedule_for(img, call, p.gen, error);
  if (p.schedule == nullptr) return kErrBadArg;
  *handle = start_alone(img, call, p.schedule, p.digest, team_of(img, call));
  return kOk;
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

// Image `image`'s merged DAG of the aggregate of `parts`: the members' DAGs
// (the schedules' own for this image, regenerated for others), merged, then
// the sync transform once.
LocalDag merged_dag(const std::vector<const Schedule*>& parts, uint32_t image, bool own,
                    bool in_allsync, bool out_allsync) {
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

}  // namespace

// CF_COLL_AGGREGATE (seed v1.7): a member is checked and its DAG generated
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
  if (prepared.member == nullptr && !prepare_member(img, call, prepared, error)) return kErrBadArg;
  OpenAggregate& agg = team.aggregate;
  // A last call that ends the team's last aggregate again: its merged
  // schedule, with no lookup.
  Schedule* merged = call.aggregate ? nullptr : agg.repeated_by(prepared.part);
  add_part(team, call, prepared, call.src, call.dst);
  if (call.aggregate) {
    *handle = 0;  // the seed leaves it undefined; the API returns CF_COLL_INVALID_HANDLE
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

uint64_t Engine::start_schedule(ImageContext& img, Schedule* schedule, void* src, void* dst,
                                const ReduceOp& op, Team* team_in) {
  Instance* inst = schedule->acquire();
  inst->bind(0, src, dst, op);
  return launch(img, inst, team_in != nullptr ? *team_in : img.all, 1);
}

uint64_t Engine::launch(ImageContext& img, Instance* inst, Team& team, uint32_t seqs) {
  number(img, inst, team, seqs);
  ++team.outstanding;
  uint32_t slot;
  if (img.free_slots.reusable()) {
    slot = img.free_slots.pop();
  } else {
    slot = static_cast<uint32_t>(img.handle_slots.size());
    img.handle_slots.push_back(nullptr);
    img.handle_generation.push_back(1);
  }
  img.handle_slots[slot] = inst;
  inst->handle_slot = slot;
  const uint64_t handle = make_handle(img.handle_generation[slot], img.image, slot);
  run_roots(img, inst);
  return handle;
}

// Gives a bound instance its image, team and sequence numbers.
void Engine::number(ImageContext& img, Instance* inst, Team& team, uint32_t seqs) {
  inst->image = &img;
  inst->waiter = &img;
  inst->team = team.id;
  inst->team_obj = &team;
  inst->members = team.members.data();
  inst->seq = team.next_seq;
  team.next_seq += seqs;
  // The entry hook: wakes the progress thread when the first collective starts.
  // Counted only for the progress thread: the shared counter costs every
  // collective a contended cache line otherwise.
  if (progress_thread_.joinable() && live_.fetch_add(1, std::memory_order_acq_rel) == 0) {
    std::lock_guard<std::mutex> lock(progress_mutex_);
    progress_cv_.notify_one();
  }
}

void Engine::run_roots(ImageContext& img, Instance* inst) {
  tls_on_app_thread = true;
  // Copies into this image that become ready meanwhile wait for this
  // thread, which runs them before it returns (copy_routing_).
  const bool left_here = copies_to_waiters();
  if (left_here) img.waiting.store(true, std::memory_order_seq_cst);
  // The instance may finish during this loop; roots() belongs to the
  // schedule, which outlives it, and each root is made ready exactly once.
  CarState* cars = inst->cars.get();
  Worklist& work = this_worklist();
  const Schedule& schedule = *inst->schedule;
  // run_roots runs on the thread of the instance's waiter: its own image's
  // (launch), or the representative's (start_represented).
  ImageContext* const was_here = work.here;
  work.here = inst->waiter;
  if (work.active) {  // called from inside a CAR: queue the roots behind it
    for (uint32_t root : schedule.roots()) enqueue(work, &cars[root]);
  } else if (schedule.direct()) {
    // Every CAR but the exit is a root that releases only the exit: the
    // ones that complete here are counted in `work` and applied to the
    // exit's counter once (none of them touches it when all do). Until
    // then the exit cannot complete, so `inst` stays ours.
    work.active = true;
    work.direct = inst;
    work.direct_done = 0;
    for (uint32_t root : schedule.roots()) {
      run_root(&cars[root]);
      if (!work.local.empty() || !work.claimed.empty()) run_queued(work);  // others' CARs, from a drained VC
    }
    work.direct = nullptr;
    work.active = false;
    const int32_t done = work.direct_done;
    CarState& exit = cars[schedule.exit()];
    if (done == schedule.cars()[schedule.exit()].deps ||
        (done > 0 && exit.pending.fetch_sub(done, std::memory_order_acq_rel) == done)) {
      finish_on_waiter(*inst);  // this thread is its waiter's (work.here)
    }
  } else {
    // Each root runs now, then whatever it released, before the next
    // root: the order make_ready gives, without queueing the roots.
    work.active = true;
    for (uint32_t root : schedule.roots()) {
      run_root(&cars[root]);
      if (!work.local.empty() || !work.claimed.empty()) run_queued(work);
    }
    work.active = false;
  }
  work.here = was_here;
  if (left_here) leave_wait(img, true);
}

int Engine::start_represented(ImageContext& caller, const std::vector<RepresentedCall>& calls,
                              uint64_t* handle, std::string* error) {
  std::vector<Schedule*> schedules;
  std::vector<uint64_t> digests;
  for (const RepresentedCall& rc : calls) {
    if (rc.call.aggregate || !team_of(*rc.image, rc.call).aggregate.empty()) {
      *error = "flags: CF_COLL_AGGREGATE is not supported in the representative-thread mode";
      return kErrBadArg;
    }
    const GeneratorInfo* gen = nullptr;
    if (!choose_algorithm(rc.call, &gen, error)) return kErrBadArg;
    // Every part's schedule lives in the caller's cache (keyed by the
    // part's rank), so only the caller's thread touches their pools.
    Schedule* schedule = schedule_for(caller, rc.call, gen, error);
    if (schedule == nullptr) return kErrBadArg;
    schedules.push_back(schedule);
    if (config_.check) digests.push_back(arg_digest(rc.call, *gen));  // nothing to keep otherwise
  }
  Instance* leader = nullptr;
  std::vector<Instance*> parts;
  for (size_t k = 0; k < calls.size(); ++k) {
    Instance* inst = schedules[k]->acquire();
    inst->bind(0, calls[k].call.src, calls[k].call.dst, calls[k].call.op);
    inst->digest = config_.check ? digests[k] : 0;
    inst->represented.clear();
    parts.push_back(inst);
    if (calls[k].image == &caller) leader = inst;
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    if (parts[k] == leader) continue;
    leader->represented.push_back(parts[k]);
    number(*calls[k].image, parts[k], team_of(*calls[k].image, calls[k].call), 1);
    parts[k]->waiter = &caller;
    calls[k].image->represented_by.store(&caller, std::memory_order_seq_cst);
  }
  ++caller.representing;
  // Numbered first, started together: every part's team advances its
  // sequence as if its own thread had called.
  for (size_t k = 0; k < calls.size(); ++k) {
    if (parts[k] != leader) run_roots(*calls[k].image, parts[k]);
  }
  for (size_t k = 0; k < calls.size(); ++k) {
    if (parts[k] == leader) *handle = launch(caller, leader, team_of(caller, calls[k].call), 1);
  }
  return kOk;
}

void Engine::make_ready(CarState* cs) {
  Worklist& work = this_worklist();
  enqueue(work, cs);
  if (!work.active) run_worklist();
}

void Engine::run_root(CarState* cs) {
  if (cs->car->kind != CarKind::Send) {
    execute(cs);  // on the image's thread: even a client function's REDUCE may run
    return;
  }
  bool queued = false;
  ImageContext::Vc* vc = claim_vc(cs, &queued);
  if (vc == nullptr) return;  // its holder sends it
  if (!queued) execute(cs);
  drain(*vc);
}

ImageContext::Vc* Engine::claim_vc(CarState* cs, bool* queued) {
  // SENDs of one VC go out in order, one thread at a time (the VC's send
  // queue). Receives need no such queue: posting one is a single insert
  // into the VC's posted-receive queue in the transport.
  const Instance& inst = *cs->instance;
  ImageContext::Vc& vc = *inst.image->vcs[inst.members[cs->car->peer]];
  if (vc.ready.try_claim()) return &vc;  // idle VC: no queueing at all
  vc.ready.push(cs);
  *queued = true;
  return vc.ready.try_claim() ? &vc : nullptr;
}

void Engine::enqueue(Worklist& work, CarState* cs) {
  Instance& inst = *cs->instance;
  const CompiledCar& car = *cs->car;
  if (car.kind == CarKind::Send) {
    bool queued = false;
    if (ImageContext::Vc* vc = claim_vc(cs, &queued)) work.claimed.emplace_back(vc, queued ? nullptr : cs);
  } else if (car.kind == CarKind::Reduce && !inst.op_of(car).amsafe && !tls_on_app_thread) {
    // A client function without CF_COLL_AMSAFE runs only on an application
    // thread inside a carflow call (seed v1.7): park it for the image's
    // next poll and wake the image if it sleeps.
    ImageContext& img = *inst.image;
    {
      std::lock_guard<std::mutex> lock(img.app_only_mutex);
      img.app_only.push_back(cs);
      img.app_only_pending.store(true, std::memory_order_release);
    }
    wake(img);
    return;
  } else {
    work.local.push_back(cs);
  }
}

void Engine::run_worklist() {
  Worklist& work = this_worklist();
  work.active = true;
  run_queued(work);
  work.active = false;
}

void Engine::run_queued(Worklist& work) {
  for (;;) {
    if (!work.local.empty()) {
      CarState* cs = work.local.back();
      work.local.pop_back();
      execute(cs);
    } else if (!work.claimed.empty()) {
      auto [vc, cs] = work.claimed.back();
      work.claimed.pop_back();
      if (cs != nullptr) execute(cs);
      drain(*vc);
    } else {
      return;
    }
  }
}

void Engine::drain(ImageContext::Vc& vc) {
  for (;;) {
    while (CarState* cs = vc.ready.pop()) execute(cs);
    vc.ready.release();
    if (vc.ready.empty() || !vc.ready.try_claim()) return;
  }
}

// CF_CHECK found disagreeing arguments on this instance.
static inline bool mismatched(const Instance& inst) {
  return inst.digest != 0 && inst.status.load(std::memory_order_acquire) == kErrMismatch;
}

// After a mismatch nothing runs past the entry barrier (no effect on user
// buffers; peers, which fail alike, skip theirs).
static inline bool skipped(const Instance& inst, const CompiledCar& car) {
  return !is_entry_sync_tag(car.tag) && mismatched(inst);
}

// A message CAR's peer image (its team rank's) and key.
struct MessageTarget {
  uint32_t peer;
  MsgKey key;
};
static inline MessageTarget target_of(const Instance& inst, const CompiledCar& car) {
  return {inst.members[car.peer], MsgKey{inst.team, inst.seq + car.member, car.tag}};
}

void Engine::execute(CarState* cs) {
  const CompiledCar& car = *cs->car;
  Instance& inst = *cs->instance;
  if (skipped(inst, car)) return complete_slow(cs, kOk);  // rare: complete()'s slow path, as a tail call
  // Messages first, each in its own function (a tail call), so that they
  // do not pay for the local CARs' frame.
  if (car.kind == CarKind::Send) return post_send(cs);
  if (car.kind == CarKind::Recv) return post_recv(cs);
  if (car.kind == CarKind::RecvReduce) return post_recv_reduce(cs);
  switch (car.kind) {
    case CarKind::Join:
      complete(cs, kOk);
      return;
    case CarKind::Copy: {
      if (car.seg_count == 0 && car.dst.length >= kPumpedCopyBytes && remote_ != nullptr) {
        pumped_copy(inst.at(car.dst_at), inst.at(car.src_at), car.dst.length);
      } else if (car.seg_count == 0) {
        copy_bytes(inst.at(car.dst_at), inst.at(car.src_at), car.dst.length);
      } else {
        copy_segments(inst, car);
      }
      complete(cs, kOk);
      return;
    }
    case CarKind::Reduce:
      if (car.shape == ReduceShape::Elementwise) {
        inst.op_of(car).apply(inst.resolve(car.dst, car.member), inst.resolve(car.src, car.member),
                              inst.resolve(car.src2, car.member), car.dst.length);
      } else {
        run_chunked(inst, car);
      }
      complete(cs, kOk);
      return;
    case CarKind::Send:
    case CarKind::Recv:
    case CarKind::RecvReduce:
      break;  // above
  }
}

// A long local copy on a node that may be streaming a large message out
// (a broadcast or scatter root's own block beside its send, which the
// generators emit first): slices, the outbound streams topped up between
// them. A stream's sender otherwise waits for its receiver to copy chunks
// out about 40% of the time (4 MiB, this 2-core VM); the copy fills those
// gaps instead of running before the stream starts.
void Engine::pumped_copy(char* to, const char* from, uint64_t n) {
  if (to == from) return;
  for (uint64_t at = 0; at < n; at += kPumpSliceBytes) {
    std::memcpy(to + at, from + at, std::min(kPumpSliceBytes, n - at));
    remote_->pump_sends();
  }
}

void Engine::fill_op(MsgOp& op, const Instance& inst, uint32_t peer, const MsgKey& key, char* buf, uint64_t nbytes) {
  op.self = inst.image->image;
  op.peer = peer;
  op.key = key;
  op.on_complete = &Engine::on_message_complete;
  op.matched = nullptr;
  op.held = nullptr;
  op.buf = buf;
  op.nbytes = nbytes;
}

void Engine::post_send(CarState* cs) {
  Instance& inst = *cs->instance;
  const CompiledCar& car = *cs->car;
  const auto [peer, key] = target_of(inst, car);
  const int status = inst.status.load(std::memory_order_acquire);
  Transport& transport = transport_for(peer);
  // Most small SENDs: the transport takes the bytes at once and the SEND
  // is complete, with no message op to fill and no callback.
  if (inst.digest == 0 && transport.takes_now() &&
      transport.send_now(inst.image->image, peer, key, inst.at(car.src_at), car.src.length, status)) {
    complete(cs, kOk);
    return;
  }
  MsgOp& op = cs->op;
  fill_op(op, inst, peer, key, inst.at(car.src_at), car.src.length);
  op.status = status;
  op.digest = inst.digest;
  // A checking image that found a mismatch passes its report on instead.
  if (op.status == kErrMismatch && op.digest != 0) op.digest = inst.report.load(std::memory_order_acquire);
  transport.send(&op);
}

void Engine::post_recv(CarState* cs) {
  Instance& inst = *cs->instance;
  const CompiledCar& car = *cs->car;
  const auto [peer, key] = target_of(inst, car);
  Transport& transport = transport_for(peer);
  // A plain receive whose message is already there (its sender ran
  // ahead): taken at once, with no message op to fill and no callback.
  int status = kOk;
  if (inst.digest == 0 && transport.takes_now() &&
      transport.recv_now(inst.image->image, peer, key, inst.at(car.dst_at), car.dst.length, &status)) {
    complete(cs, status);
    return;
  }
  MsgOp& op = cs->op;
  fill_op(op, inst, peer, key, inst.at(car.dst_at), car.dst.length);
  op.deliver = Deliver{};
  transport.recv(&op);
}

void Engine::post_recv_reduce(CarState* cs) {
  Instance& inst = *cs->instance;
  const CompiledCar& car = *cs->car;
  const auto [peer, key] = target_of(inst, car);
  MsgOp& op = cs->op;
  fill_op(op, inst, peer, key, inst.at(car.dst_at), car.dst.length);
  const ReduceOp& reduce = inst.op_of(car);
  op.deliver = Deliver{&Engine::reduce_incoming, cs, !reduce.amsafe, std::max<uint32_t>(1, reduce.elem_size)};
  transport_for(peer).recv(&op);
}

void Engine::copy_segments(const Instance& inst, const CompiledCar& car) {
  // Locals, not reloads: the copies' stores could alias inst's fields.
  char* const* user = inst.user;
  const CopySegment* seg = inst.schedule->segments(car);
  const CopySegment* end = seg + car.seg_count;
  if (car.seg_word) {  // an aggregate of 8-byte calls: one word per segment
    for (; seg != end; ++seg) {
      std::memcpy(user[seg->dst.base] + seg->dst.offset, user[seg->src.base] + seg->src.offset, 8);
    }
    return;
  }
  if (car.seg_words) {  // an aggregate of small calls: one branch-free copy per segment
    for (; seg != end; ++seg) {
      copy_8_to_16(user[seg->dst.base] + seg->dst.offset, user[seg->src.base] + seg->src.offset, seg->length);
    }
    return;
  }
  for (; seg != end; ++seg) {
    copy_bytes(user[seg->dst.base] + seg->dst.offset, user[seg->src.base] + seg->src.offset, seg->length);
  }
}

// A Fold / Prefix REDUCE (graph/car.h, ReduceShape): one kernel call per
// chunk, with the chunk's carry when the CAR has one.
void Engine::run_chunked(const Instance& inst, const CompiledCar& car) {
  const ReduceOp& op = inst.op_of(car);
  const uint64_t es = op.elem_size;
  const char* src = inst.resolve(car.src, car.member);
  const char* carry = inst.resolve(car.src2, car.member);
  char* dst = inst.resolve(car.dst, car.member);
  Car shape;
  shape.first_elems = car.first_elems;
  shape.chunk_elems = car.chunk_elems;
  const bool fold = car.shape == ReduceShape::Fold;
  for_each_chunk(shape, car.src.length / es, [&](uint64_t c, uint64_t first, uint64_t n) {
    const char* chunk_carry = carry ? carry + c * es : nullptr;
    if (fold) {
      op.fold(dst + c * es, chunk_carry, src + first * es, n);
    } else {
      op.prefix(dst + first * es, chunk_carry, src + first * es, n);
    }
  });
}

void Engine::reduce_incoming(void* ctx, void* dst, const void* incoming, size_t nbytes) {
  auto* cs = static_cast<CarState*>(ctx);
  const Instance& inst = *cs->instance;
  const CompiledCar& car = *cs->car;
  // A transport may deliver the message in parts (Deliver::unit): this
  // part's local operand sits at the same offset as its destination.
  const size_t offset = static_cast<size_t>(static_cast<char*>(dst) - static_cast<char*>(cs->op.buf));
  const void* local = car.src.space == BufferSpace::None ? dst : inst.resolve(car.src, car.member) + offset;
  const ReduceOp& op = inst.op_of(car);
  if (car.incoming_left) {
    op.apply(dst, incoming, local, nbytes);
  } else {
    op.apply(dst, local, incoming, nbytes);
  }
}

void Engine::on_message_complete(MsgOp* op, int status) {
  auto* cs = static_cast<CarState*>(op->owner);
  Instance& inst = *cs->instance;
  if (inst.digest != 0) status = check_arrival(inst, *cs->car, *op, status);
  inst.image->engine->complete(cs, status);
}

void Engine::exit_step(Instance& inst) {
  Worklist* work = tls_work_ptr;
  if (work != nullptr && work->direct == &inst) {
    ++work->direct_done;
    return;
  }
  // After its last fetch_sub a thread must not touch `inst` (see complete).
  if (inst.cars[inst.schedule->exit()].pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(inst);
}

void Engine::complete(CarState* cs, int status) {
  const CompiledCar& car = *cs->car;
  if (status == kOk) {
    // A RECV that took over its unpack COPYs (schedule.h) runs them now,
    // as the COPYs would have run (not after a CF_CHECK mismatch: see
    // execute); an aggregate's leaf then still takes the short way out.
    if (car.unpacks) unpack(*cs->instance, car);
    if (car.to_exit) return exit_step(*cs->instance);
    if (car.last) return finish(*cs->instance);
  }
  complete_slow(cs, status);
}

void Engine::unpack(const Instance& inst, const CompiledCar& car) {
  // Not after a CF_CHECK mismatch: see execute.
  if (!mismatched(inst)) copy_segments(inst, car);
}

void Engine::complete_slow(CarState* cs, int status) {
  for (;;) {
    Instance& inst = *cs->instance;
    if (status != kOk) {
      int expected = kOk;
      inst.status.compare_exchange_strong(expected, status);
    }
    const CompiledCar& car = *cs->car;
    const uint32_t* succ = inst.schedule->successors(car);
    // An unpacking RECV ran its segments in complete(); one skipped after a
    // CF_CHECK mismatch (execute) must not run them, and does not here.
    // Every CAR reaches the exit, so the instance is done exactly when the
    // exit completes; no per-instance counter is needed. After its last
    // fetch_sub a thread must not touch `inst`: the owner may recycle it.
    if (car.last) {
      finish(inst);
      return;
    }
    if (car.to_exit) {  // most CARs of small calls
      exit_step(inst);
      return;
    }
    const CompiledCar* cars = inst.schedule->cars().data();
    // A JOIN does nothing but release its successors: one this CAR
    // releases is completed right here, not queued and executed (most
    // exits are JOINs), after the loop. Until then the exit cannot
    // complete (the JOIN precedes it), so `inst` stays ours.
    CarState* join = nullptr;
    for (uint32_t i = 0; i < car.succ_count; ++i) {
      CarState* next = &inst.cars[succ[i]];
      // This CAR is a sole predecessor's: nothing else can release `next`.
      if (cars[succ[i]].deps == 1 || next->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        if (cars[succ[i]].kind != CarKind::Join) {
          make_ready(next);
        } else if (succ[i] == inst.schedule->exit()) {
          // The exit JOIN, released: every other CAR is complete, so it
          // was this CAR's only successor. Done; nothing left to release.
          finish(inst);
          return;
        } else {
          if (join != nullptr) complete(join, kOk);  // two released JOINs: rare
          join = next;
        }
      }
    }
    if (join == nullptr) return;
    cs = join;
    status = kOk;
  }
}

void Engine::finish_on_waiter(Instance& inst) {
  if (config_.progress == ProgressMode::Thread) live_.fetch_sub(1, std::memory_order_acq_rel);
  inst.done.store(true, std::memory_order_release);
}

void Engine::finish(Instance& inst) {
  ImageContext* img = inst.waiter;
  const Worklist* work = tls_work_ptr;
  // A small call's exit usually completes while the call starts.
  if (work != nullptr && work->here == img) return finish_on_waiter(inst);
  if (config_.progress == ProgressMode::Thread) live_.fetch_sub(1, std::memory_order_acq_rel);
  inst.done.store(true, std::memory_order_seq_cst);
  // `inst` may be recycled by its owner from here on; touch only `img`.
  wake(*img);
}

void Engine::message_waiting(uint32_t image) {
  ImageContext& img = *images_ctx_[image - base_];
  wake(img);
  // seq_cst, after the sender's publish: a representative that set this
  // before it announced itself asleep is seen here, or sees the message.
  if (ImageContext* rep = img.represented_by.load(std::memory_order_seq_cst)) wake(*rep);
}

void Engine::deferred_work(uint32_t image, uint32_t peer, bool app_thread_only) {
  ImageContext& img = *images_ctx_[image - base_];
  if (!app_thread_only && copy_routing_ == CopyRouting::FlowGraph) {
    schedule_vc(*img.vcs[peer]);
  } else if (!app_thread_only && copy_routing_ == CopyRouting::WaiterOrFlowGraph) {
    ImageContext::Vc& vc = *img.vcs[peer];
    // The image's thread is waiting: it runs the copy itself (a oneTBB
    // worker would share its core). The flags pair with leave_wait's (each
    // side stores, then reads the other's; seq_cst): if the thread is
    // leaving, at least one side sees the VC's flag, and whichever clears
    // it hands the VC on.
    vc.left_to_waiter.store(true, std::memory_order_seq_cst);
    img.left_to_waiter.store(true, std::memory_order_seq_cst);
    if (!img.waiting.load(std::memory_order_seq_cst) &&
        vc.left_to_waiter.exchange(false, std::memory_order_seq_cst)) {
      schedule_vc(vc);
    }
  }
  wake(img);
}

void Engine::schedule_vc(ImageContext::Vc& vc) {
  if (!vc.scheduled.exchange(true, std::memory_order_acq_rel)) {
    tsan_release_to_tbb();
    vc.node->try_put(tbb::flow::continue_msg());
  }
}

void Engine::leave_wait(ImageContext& img, bool run_here) {
  img.waiting.store(false, std::memory_order_seq_cst);
  if (!img.left_to_waiter.exchange(false, std::memory_order_seq_cst)) return;
  for (uint32_t peer = 0; peer < img.vcs.size(); ++peer) {
    ImageContext::Vc& vc = *img.vcs[peer];
    if (!vc.left_to_waiter.exchange(false, std::memory_order_seq_cst)) continue;
    if (run_here) {
      transport_for(peer).progress(img.image, peer, true);
    } else {
      schedule_vc(vc);
    }
  }
}

void Engine::serve_vc(uint32_t image, uint32_t peer) {
  ImageContext::Vc& vc = *images_ctx_[image - base_]->vcs[peer];
  vc.scheduled.store(false, std::memory_order_release);
  tls_on_app_thread = false;
  transport_for(peer).progress(image, peer, false);
  if (!vc.ready.empty() && vc.ready.try_claim()) {
    Worklist& work = this_worklist();
    work.claimed.emplace_back(&vc, nullptr);
    if (!work.active) run_worklist();
  }
}

bool Engine::poll(ImageContext& img) {
  bool did = poll_image(img);
  if (img.representing > 0) {  // a representative polls for the images it called for
    for (auto& other : images_ctx_) {
      if (other.get() != &img) did |= poll_image(*other);
    }
  }
  return did;
}

bool Engine::poll_image(ImageContext& img) {
  tls_on_app_thread = true;
  bool did = false;
  if (img.app_only_pending.load(std::memory_order_acquire)) {
    std::vector<CarState*> parked;
    {
      std::lock_guard<std::mutex> lock(img.app_only_mutex);
      parked.swap(img.app_only);
      img.app_only_pending.store(false, std::memory_order_relaxed);
    }
    Worklist& work = this_worklist();
    for (CarState* cs : parked) work.local.push_back(cs);
    if (!work.active) run_worklist();
    did = !parked.empty();
  }
  if (remote_ != nullptr) did |= remote_->progress_all(img.image, true);
  return transport_->progress_all(img.image, true) || did;
}

int Engine::release(ImageContext& img, uint32_t slot) {
  Instance* inst = img.handle_slots[slot];
  const int status = inst->status.load(std::memory_order_acquire);
  free_handle(img, inst);
  int first = status;
  uint64_t report = inst->report.load(std::memory_order_acquire);
  if (!inst->represented.empty()) {
    for (Instance* part : inst->represented) {
      const int s = part->status.load(std::memory_order_acquire);
      if (first == 0) first = s;
      if (report == 0) report = part->report.load(std::memory_order_acquire);
      part->schedule->release(part);
    }
    inst->represented.clear();
    --img.representing;
  }
  inst->schedule->release(inst);
  if (first == kErrMismatch) img.mismatch_message = describe_mismatch(report);
  return first;
}

// A collective that cannot finish because a peer node is lost: its handle
// dies with the lost status. The instance itself is not recycled (CARs of it
// may still be posted in a transport); the job is ending anyway.
int Engine::abandon(ImageContext& img, Instance* inst) {
  const uint32_t slot = inst->handle_slot;
  img.handle_slots[slot] = nullptr;
  ++img.handle_generation[slot];
  --inst->team_obj->outstanding;
  {
    std::lock_guard<std::mutex> lock(abandoned_mutex_);
    abandoned_.push_back(inst);
    for (Instance* part : inst->represented) abandoned_.push_back(part);
  }
  if (!inst->represented.empty()) --img.representing;
  return lost_status();
}

int Engine::try_sync(ImageContext& img, uint64_t handle, std::string* error) {
  Instance* inst = lookup(img, handle);
  if (inst == nullptr) {
    *error = "handle: not a live handle of this image (already synced, or another thread's)";
    return kErrBadArg;
  }
  if (!is_done(inst)) {
    poll(img);
    if (!is_done(inst)) {
      return lost_status() != 0 ? abandon(img, inst) : kNotReady;
    }
  }
  return release(img, inst->handle_slot);
}

int Engine::wait_sync(ImageContext& img, uint64_t handle, std::string* error) {
  Instance* inst = lookup(img, handle);
  if (inst == nullptr) {
    *error = "handle: not a live handle of this image (already synced, or another thread's)";
    return kErrBadArg;
  }
  wait_until(img, [&] { return is_done(inst); });
  return sync_done(img, inst);
}

bool Engine::dump_json(ImageContext& img, uint64_t handle, const std::string& path,
                       std::string* error) {
  Instance* inst = lookup(img, handle);
  if (inst == nullptr) {
    *error = "handle: not a live handle of this image";
    return false;
  }
  // The global DAG: every image's schedule for the same key (generators are
  // pure, so running them again gives exactly what each image runs).
  const CollectiveSpec& spec = inst->schedule->spec();
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  const std::vector<const Schedule*>& parts = inst->schedule->parts;
  GlobalDag global;
  global.spec = spec;  // an aggregate's: its first member's, with the merged sync modes
  for (uint32_t i = 0; i < spec.images; ++i) {
    if (i == inst->team_obj->rank) {
      global.images.push_back(inst->schedule->dag());
    } else if (!parts.empty()) {
      global.images.push_back(merged_dag(parts, i, false, (spec.flags & kSpecInAllSync) != 0,
                                         (spec.flags & kSpecOutAllSync) != 0));
    } else {
      global.images.push_back(generate_local(*gen, spec, i));
    }
  }
  return save_dag_file(global, path, error);
}

}  // namespace carflow
