// The engine: runs collective DAG instances for the images of this process.
//
// How a call runs (engine/README.md walks through it with one allreduce):
//  1. start() picks the algorithm, finds or builds the Schedule (cache keyed
//     by collective, algorithm, sizes, root and sync flags), takes a pooled
//     Instance, binds pointers and the op, gives it the team's next sequence
//     number and makes its root CARs ready.
//  2. run_roots() runs each root on the starting thread (a SEND claims its
//     VC first), then what it released. make_ready(): a message CAR goes to
//     its VC's queue; a local CAR to the thread's worklist. A thread that
//     finds the VC idle claims it and runs the CARs inline (the fast path);
//     a busy VC is drained by its holder. A released JOIN completes where
//     it is released; the exit JOIN finishes the instance there.
//  3. The transport completes message CARs on whatever thread moves the
//     bytes; complete() releases successors. Deferred large copies are
//     served by a oneTBB flow graph with one serial node per VC, so copies on
//     different VCs run in parallel on workers, or by a waiting image thread.
//  4. The instance is done when all its CARs are; sync calls observe that
//     (a handle that is already done is synced inline: sync_finished).
// Any thread may run any image's CARs: counters are atomic, VC queues are
// claimed, so a running thread keeps everyone's work moving even when the
// image threads outnumber the cores.
#pragma once

#include <oneapi/tbb/flow_graph.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unistd.h>
#include <unordered_map>
#include <vector>

#include "engine/config.h"
#include "engine/reduce_ops.h"
#include "engine/schedule.h"
#include "engine/selection.h"
#include "engine/status.h"
#include "engine/trace.h"
#include "engine/vc_queue.h"
#include "graph/registry.h"
#include "transports/inproc/inproc_transport.h"
#include "transports/line_pair.h"

namespace carflow {

class Engine;
class Schedule;
struct Worklist;  // a thread's ready CARs (engine.cc)

// What shapes an aggregate's merged schedule: the members' schedules in
// order and the merged sync modes.
struct AggregateKey {
  std::vector<const Schedule*> parts;
  bool in_allsync = false, out_allsync = false;
  auto operator<=>(const AggregateKey&) const = default;
};

// CF_COLL_AGGREGATE: the aggregate being formed on a team, kept the way
// the last call uses it (Engine::join_aggregate). Each member call appends
// its schedule (generated without a sync transform) and its buffers in
// Instance::user order, so binding the merged instance is one copy. The
// last aggregate started on the team is kept too: an aggregate that repeats
// it (compared once, by its last call: repeated_by) finds its merged
// schedule with no lookup in the image's map.
class OpenAggregate {
 public:
  static constexpr uint8_t kSyncIn = 1, kSyncOut = 2;  // IN_ALLSYNC, OUT_ALLSYNC
  // A member as one word: its schedule (generated without a sync
  // transform) with its kSyncIn / kSyncOut bits in the low bits
  // (PreparedCall::part), so a member call stores one word and two
  // addresses, and comparing members compares their sync modes too.
  static uintptr_t part_of(const Schedule* schedule, uint8_t member_sync) {
    static_assert(alignof(Schedule) > (kSyncIn | kSyncOut), "the sync bits fit below a schedule's alignment");
    return reinterpret_cast<uintptr_t>(schedule) | member_sync;
  }
  static const Schedule* schedule_of(uintptr_t part) {
    return reinterpret_cast<const Schedule*>(part & ~uintptr_t{kSyncIn | kSyncOut});
  }
  // Appends a member call (part_of its schedule and sync bits, and its
  // buffers), growing the arrays when they are full.
  void add(uintptr_t part, void* src, void* dst) {
    if (size_ == capacity_) grow();
    append_member(part, src, dst);
  }
  // Room for a member that is not the last without growing.
  bool has_room() const { return size_ + 1 < capacity_; }
  // add() of a member that is not the last, when has_room(): the capacity
  // never exceeds kMaxAggregateMembers, so has_room() keeps the limit too.
  // Most of an aggregate's calls: a word and two addresses stored, no
  // vector bookkeeping.
  void append_member(uintptr_t part, void* src, void* dst) {
    const uint32_t m = size_;
    parts_[m] = part;
    buffers_[2 * m] = static_cast<char*>(src);
    buffers_[2 * m + 1] = static_cast<char*>(dst);
    size_ = m + 1;
  }
  void pop_back();  // drops the last member (a last call that did not start)
  void clear();     // forgets the members (not the last aggregate): the next one starts empty
  uint32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const Schedule* part(uint32_t m) const { return schedule_of(parts_[m]); }
  char* const* buffers() const { return buffers_.get(); }  // 2 per member: source, destination
  // The members' kSyncIn / kSyncOut bits, merged (any member's).
  uint8_t merged_sync() const {
    uintptr_t any = 0;
    for (uint32_t m = 0; m < size_; ++m) any |= parts_[m];
    return static_cast<uint8_t>(any & (kSyncIn | kSyncOut));
  }
  // The last aggregate's merged schedule when this one, ended by a last
  // member (`last_part`) not yet added, repeats it (the same members with
  // the same sync modes, so the same merged modes); else nullptr.
  Schedule* repeated_by(uintptr_t last_part) const {
    if (last_parts_.size() != size_ + 1 || last_parts_[size_] != last_part) return nullptr;
    // The members before the last, once here rather than as each is added.
    return std::equal(parts_.get(), parts_.get() + size_, last_parts_.data()) ? last_schedule_ : nullptr;
  }
  // Remembers the members, now all added, as the last aggregate started
  // on the team, with its merged schedule.
  void started(Schedule* merged) {
    last_parts_.assign(parts_.get(), parts_.get() + size_);
    last_schedule_ = merged;
  }

  std::vector<std::pair<uint32_t, ReduceOp>> ops;  // reduction members: index, op
  std::vector<uint64_t> digests;  // CF_CHECK: each member's argument digest

 private:
  void grow();
  std::unique_ptr<uintptr_t[]> parts_;  // the members (part_of), in call order
  std::unique_ptr<char*[]> buffers_;    // in Instance::user order
  uint32_t size_ = 0, capacity_ = 0;
  // The last aggregate started on the team: its members (empty = none
  // yet) and merged schedule.
  std::vector<uintptr_t> last_parts_;
  Schedule* last_schedule_ = nullptr;
};

// A team as one image sees it (GASNet collectives notes v1.7, "Teams"): the member list (team
// rank -> image), the same on every member; this image's rank; the id every
// member computes alike, which tags the team's messages on the wire; and the
// image's counters for it. Collectives on one team are numbered in the
// order this image starts them, so members must start them in the same
// order; collectives on different teams need no common order.
struct Team {
  uint32_t id = 0;                 // 0 = CF_TEAM_ALL
  std::vector<uint32_t> members;   // team rank -> image
  uint32_t rank = 0;               // this image's team rank
  uint32_t next_seq = 0;           // sequence number of the next collective
  uint32_t splits = 0;             // cf_team_split calls made on this team
  uint32_t outstanding = 0;        // started, not yet synced, collectives
  uint32_t images_per_node = 0;    // node-major with equal runs: ranks per node; else 0
  // The cf_team_t the API gave out for it (0 for CF_TEAM_ALL): a number,
  // not the address, so a freed team's handle never names a later team
  // allocated where it was, nor another image's team.
  uintptr_t handle = 0;
  // CF_COLL_AGGREGATE: the aggregate being formed on this team (empty
  // when none is open; Engine::start).
  OpenAggregate aggregate;
  uint32_t size() const { return static_cast<uint32_t>(members.size()); }
};

// Ranks per node of a team whose members are node-major in runs of equal
// length (the last may be shorter), as node-aware generators need; 0 when
// the team is not laid out that way.
uint32_t team_images_per_node(const NodeMap& map, const std::vector<uint32_t>& members);

// Everything that shapes one image's DAG. The vectors are empty except for
// the v forms and permute, so building a key allocates nothing otherwise.
struct ScheduleKey {
  CollKind kind;
  const GeneratorInfo* generator;
  uint32_t images, rank, root, elem_size;  // images: team size; rank: this image's
  uint64_t nbytes, segment_bytes;
  bool in_allsync, out_allsync;
  uint32_t radix, window, logp_L, logp_o, logp_g;
  std::vector<uint64_t> counts, displs;
  std::vector<uint32_t> perm;
  bool exclusive = false;  // scan: CF_COLL_EXCLUSIVE
  bool in_place = false;   // this image's source and destination are one buffer
  uint64_t src_blksz = 0, src_offset = 0, dst_blksz = 0, dst_offset = 0;  // GASNet-style reduce / prefix
  uint32_t images_per_node = 0;  // node-aware generators only
  bool operator==(const ScheduleKey&) const = default;
};
struct ScheduleKeyHash {
  size_t operator()(const ScheduleKey& k) const;
};

// What a collective call asks for, validated by the API layer.
struct CollectiveCall {
  CollKind kind = CollKind::Barrier;
  uint32_t root = 0;
  void* src = nullptr;
  void* dst = nullptr;
  uint64_t nbytes = 0;
  uint32_t elem_size = 1;
  ReduceOp op;           // computational kinds only
  // v forms (graph/layout.h): counts and displs in bytes; permute: perm.
  std::vector<uint64_t> counts, displs;
  std::vector<uint32_t> perm;
  bool in_allsync = false;
  bool out_allsync = false;
  bool in_place = false;  // src == dst: the engine copies the source first (apply_in_place)
  // GASNet-style reduce / prefix_reduce: block-cyclic layouts (graph/layout.h).
  uint64_t src_blksz = 0, src_offset = 0, dst_blksz = 0, dst_offset = 0;
  int flags = 0;
  // CF_COLL_AGGREGATE: joins the team's open aggregate instead of starting;
  // the next call on the team without it starts the whole aggregate.
  bool aggregate = false;
  const GeneratorInfo* algorithm = nullptr;  // nullptr = the engine's choice
  Team* team = nullptr;                       // nullptr = CF_TEAM_ALL
};

// What the engine decided for one call, kept by a caller that repeats the
// same call (the C API's per-kind memo, CallMemo): the algorithm, the
// schedule of a whole call and of an aggregate member, and the CF_CHECK
// digest. Empty fields are filled on first use; valid only for calls equal
// to the one they were made for, apart from the buffer addresses.
struct PreparedCall {
  const GeneratorInfo* gen = nullptr;
  Schedule* schedule = nullptr;  // started alone
  Schedule* member = nullptr;    // joining an aggregate (no sync transform)
  // Set with `member`: its join records only buffers (no op, no digest);
  // `member` with its IN/OUT_ALLSYNC bits (OpenAggregate::part_of).
  bool plain_member = false;
  uintptr_t part = 0;
  uint64_t digest = 0;
  bool has_digest = false;
};

// Per-image state the C API keeps in the image (its call memos:
// api/call_memo.h); the engine only owns it.
struct ApiImageState {
  virtual ~ApiImageState() = default;
};

// An image's free handle slots, reused oldest first and only while more
// than kReuseDistance of them are free: a slot comes back at the earliest
// kReuseDistance + 1 collectives of the image after it was freed, so its
// 16-bit generation (Engine::make_handle) wraps only after 65536 * 257
// (about 16.8 million) collectives, not 65536 as a slot reused at once
// would. Costs a few KiB of slots per image.
class FreeSlots {
 public:
  static constexpr uint32_t kReuseDistance = 256;
  bool reusable() const { return tail_ - head_ > kReuseDistance; }
  uint32_t pop() { return ring_[head_++ & mask_]; }
  void push(uint32_t slot) {
    if (tail_ - head_ == capacity_) grow();
    ring_[tail_++ & mask_] = slot;
  }

 private:
  void grow() {  // twice the room (a power of two), oldest first from index 0
    const uint32_t capacity = std::max(2 * capacity_, 2 * kReuseDistance);
    auto bigger = std::make_unique<uint32_t[]>(capacity);
    for (uint32_t i = 0; i < capacity_; ++i) bigger[i] = ring_[(head_ + i) & mask_];
    head_ = 0;
    tail_ = capacity_;
    capacity_ = capacity;
    mask_ = capacity - 1;
    ring_ = std::move(bigger);
  }
  // Counters run on past the capacity (unsigned: their difference is the
  // count); the slot of counter c is ring_[c & mask_].
  std::unique_ptr<uint32_t[]> ring_;
  uint32_t head_ = 0, tail_ = 0, capacity_ = 0, mask_ = 0;
};

// One image's state; only its own thread touches the cache and handle table.
class ImageContext {
 public:
  ImageContext(Engine* engine, uint32_t image, uint32_t images);

  Engine* const engine;
  const uint32_t image;
  std::vector<ClientFunction> fn_table;
  Team all;                                 // CF_TEAM_ALL: every image, rank = image
  std::vector<std::unique_ptr<Team>> teams;  // made by cf_team_split, not yet freed
  uint32_t teams_made = 0;                   // cf_team_split results so far: Team::handle

  struct alignas(64) Vc {  // its own cache lines: each image's thread claims its VCs
    VcQueue ready;
    std::atomic<bool> scheduled{false};  // a flow-graph message is pending
    std::atomic<bool> left_to_waiter{false};  // deferred work left for the waiting image thread
    std::unique_ptr<tbb::flow::function_node<tbb::flow::continue_msg>> node;
  };
  std::vector<std::unique_ptr<Vc>> vcs;  // by peer image

  std::unordered_map<ScheduleKey, std::unique_ptr<Schedule>, ScheduleKeyHash> cache;
  std::vector<Instance*> handle_slots;
  std::vector<uint32_t> handle_generation;
  FreeSlots free_slots;
  std::atomic<uint64_t> generator_runs{0};  // schedule-cache misses
  // CF_FAULT=nomem:cache: 1 once this image's first miss reported no memory, 2 while start() says so.
  uint8_t fault_nomem = 0;
  std::atomic<uint64_t> schedules_evicted{0};  // dropped to keep CF_SCHEDULE_CACHE_BYTES
  std::atomic<uint64_t> cache_bytes{0};        // held by `cache` after the last miss
  uint64_t cache_total = 0;  // footprint() of `cache`'s schedules, kept as they come, grow and go
  int trim_hold = 0;  // > 0: schedules looked up and not yet started are held (no trimming)
  const GeneratorInfo* algorithm[kCollKinds] = {};  // per-kind override (cf_coll_set_algorithm)
  Schedule* last_schedule = nullptr;        // one-entry cache in front of `cache`
  ScheduleKey last_key{};
  // Merged schedules of aggregates (each team keeps its last one in front
  // of this: OpenAggregate::last).
  std::map<AggregateKey, std::unique_ptr<Schedule>> aggregates;
  // The C API's state of this image (made by cf_coll_init).
  std::unique_ptr<ApiImageState> api;
  // Bumped by whatever changes what equal arguments mean on this image
  // (cf_coll_set_algorithm, cf_team_split, cf_team_free): memos of an
  // older epoch are stale. 64 bits: it never wraps to a memo's 0.
  uint64_t epoch = 1;

  int representing = 0;  // live composite handles of this thread (representative mode): poll every image
  // CF_CHECK: what the last collective this thread synced with
  // CF_ERR_MISMATCH found (engine/arg_check.h), for cf_last_error.
  std::string mismatch_message;
  // The C API's _all / _some sync calls: the instances behind the handles,
  // kept so a repeated sync allocates nothing.
  std::vector<Instance*> sync_scratch;

  // Touched by other threads (wake(), parking a REDUCE): on line pairs of
  // their own (transports/line_pair.h), apart from the fields above that
  // this image's thread writes on every call: a line shared with those
  // would cross between the cores on every call.
  alignas(kLinePair) std::atomic<int> sleepers{0};
  // The thread that last called for this image in the representative mode:
  // a sender that leaves a message for this image (inproc rings) wakes it
  // too. Left set afterwards (a stale one costs a spurious wake-up).
  std::atomic<ImageContext*> represented_by{nullptr};
  // This image's thread is inside wait_until, polling (or sleeping, to be
  // woken): deferred copies into the image are left to it, and some VC's
  // were (Engine::deferred_work, leave_wait).
  std::atomic<bool> waiting{false};
  std::atomic<bool> left_to_waiter{false};
  int wake_fd = -1;  // eventfd, when there is a transport between nodes to sleep on
  std::mutex sleep_mutex;
  std::condition_variable sleep_cv;
  // REDUCE CARs of non-AMSAFE client functions made ready on a helper
  // thread, waiting for this image's thread (Engine::poll).
  std::mutex app_only_mutex;
  std::vector<CarState*> app_only;
  std::atomic<bool> app_only_pending{false};
  alignas(kLinePair) char end_of_shared_lines[1] = {};
};

class Engine final : public TransportHooks {
 public:
  // The images of this node (map.local() of them, numbered from map.base()).
  // remote: the transport to other nodes' images (not owned; nullptr when
  // there is one node); it must outlive the engine.
  // host_images: images of every process on this host (0 = this node's),
  // to tell when image threads outnumber the cores.
  Engine(const NodeMap& map, const Config& config, Transport* remote = nullptr,
         uint32_t host_images = 0);
  Engine(uint32_t images, const Config& config) : Engine(NodeMap::single(images), config) {}
  ~Engine() override;

  uint32_t images() const { return images_; }  // all images, every node
  // The cores that `on_host` images (every process's on this host), `local`
  // of them in this process, have: the host's, unless this process may use
  // fewer CPUs (taskset, a cgroup's cpuset, a launcher's binding) than its
  // share of them. Each process is taken to have as many as this one.
  static uint32_t host_cores(uint32_t local, uint32_t on_host);
  // `on_host` images outnumber their cores (host_cores).
  static bool shares_cores(uint32_t local, uint32_t on_host) { return on_host > host_cores(local, on_host); }
  uint32_t local_images() const { return local_; }
  const NodeMap& nodes() const { return map_; }
  uint32_t all_images_per_node() const { return all_images_per_node_; }  // CF_TEAM_ALL's
  const Config& config() const { return config_; }
  ImageContext& image(uint32_t local_index) { return *images_ctx_[local_index]; }
  InprocTransport& transport() { return *transport_; }
  Transport* remote() { return remote_; }

  // The trace moves this node's times onto node 0's clock as `mesh`
  // estimates it; it must outlive the engine.
  void set_clock_source(const LivenessMesh* mesh) { clock_source_ = mesh; }

  // A peer node was lost (launcher notice, transport error): every wait
  // returns `status` from now on, naming `what` (GASNet LAPI notes: robust exit).
  void fail_all(int status, const std::string& what);
  int lost_status() const { return lost_status_.load(std::memory_order_acquire); }
  // The hang report's words for why a collective was given up (`status`: fail_all's).
  static const char* loss_reason(int status);
  // What every collective launched from now on fails with (0: none):
  // fail_all's status, or CF_ERR_PEER_LOST once a peer's failure reached a
  // collective here through a message, before this node is told of the loss.
  int peer_failure() const { return peer_failure_.load(std::memory_order_acquire); }
  std::string lost_what() const;
  // Called with why ("ran out of memory: ...") after a transport ran out of
  // memory for an unexpected message and fail_all(kErrNoMem) failed this
  // node: the runtime tells the other nodes. Set before the first message.
  void on_node_failure(std::function<void(const std::string& why)> fn) { on_node_failure_ = std::move(fn); }

  // Starts a collective on `img`; returns kOk and *handle, or an error with
  // *error naming the argument and rule (nothing started).
  // prepared: what an earlier start of an equal call decided (filled here
  // where empty), or nullptr; a caller holding one tries start_prepared
  // first.
  int start(ImageContext& img, const CollectiveCall& call, uint64_t* handle, std::string* error,
            PreparedCall* prepared = nullptr);
  // The first step for a repeat (the C API's memo, before start()), which can fail
  // at nothing (so it takes no error text): a call whose schedule
  // `prepared` holds, with no aggregate open, goes straight to its
  // instance; the last call of an aggregate that repeats the team's last
  // one starts the merged schedule. Returns the handle (never 0), or 0,
  // with nothing done, when start() must take the call. A handle rather
  // than a flag, so that each step below is a tail call.
  [[gnu::always_inline]] uint64_t start_prepared(ImageContext& img, const CollectiveCall& call,
                                                 const PreparedCall& prepared) {
    if (call.aggregate || (config_.check && !prepared.has_digest)) return 0;
    Team& team = team_of(img, call);
    if (!team.aggregate.empty()) return end_prepared_aggregate(img, call, prepared);
    if (prepared.schedule == nullptr) return 0;
    return start_alone(img, call, prepared.schedule, prepared.digest, team);
  }
  // Starts an already-built schedule (tests and the engine benchmark).
  // team: nullptr = CF_TEAM_ALL.
  uint64_t start_schedule(ImageContext& img, Schedule* schedule, void* src, void* dst,
                          const ReduceOp& op, Team* team = nullptr);
  // The algorithm start() would use (table, environment or call).
  bool choose_algorithm(const CollectiveCall& call, const GeneratorInfo** out,
                        std::string* error) const;
  // The repeat of an aggregate member whose PreparedCall an earlier equal
  // call filled (the C API's memo): joins the team's open aggregate with
  // src and dst, skipping start()'s decisions. False, with nothing done,
  // when start() must take the call (not prepared yet, or the aggregate is
  // full and the call must fail there).
  [[gnu::always_inline]] bool join_prepared(ImageContext& img, const CollectiveCall& call,
                                            const PreparedCall& p, void* src, void* dst) {
    Team& team = team_of(img, call);
    if (p.member == nullptr || (config_.check && !p.has_digest) ||
        aggregate_full(team)) {
      return false;
    }
    add_part(team, call, p, src, dst);
    return true;
  }
  // No room for another member that is not the last (size() + 1 >=
  // kMaxAggregateMembers).
  static bool aggregate_full(const Team& team) {
    return team.aggregate.size() + 1 >= kMaxAggregateMembers;
  }
  // The team a call runs on.
  static Team& team_of(ImageContext& img, const CollectiveCall& call) {
    return call.team != nullptr ? *call.team : img.all;
  }

  // Syncs a done instance: frees its handle, returns its status. An
  // instance that is not done (a peer node was lost) is abandoned: its
  // handle dies and the lost status is returned.
  int sync_done(ImageContext& img, Instance* inst) {
    if (!is_done(inst)) return abandon(img, inst);
    return sync_finished(img, inst);
  }
  // sync_done of an instance known to be done (is_done).
  [[gnu::always_inline]] int sync_finished(ImageContext& img, Instance* inst) {
    // Most syncs: one instance that succeeded, no parts to gather.
    if (inst->represented.empty() && inst->status.load(std::memory_order_acquire) == kOk) {
      free_handle(img, inst);
      inst->schedule->release(inst);
      return kOk;
    }
    return release(img, inst->handle_slot);
  }
  bool is_done(const Instance* inst) const {
    if (!inst->done.load(std::memory_order_acquire)) return false;
    for (const Instance* f : inst->represented) {
      if (!f->done.load(std::memory_order_acquire)) return false;
    }
    return true;
  }
  // The representative-thread mode (GASNet collectives notes v1.7, "Collectives and threads":
  // one thread per node calls for all its images): starts calls[k] for
  // image calls[k].image, every local member of the team, the caller's own
  // call among them, under one composite handle of the caller. The
  // caller's thread owns every part (schedules from its cache) and polls
  // for all of them while it waits.
  struct RepresentedCall {
    ImageContext* image;
    CollectiveCall call;
  };
  int start_represented(ImageContext& caller, const std::vector<RepresentedCall>& calls,
                        uint64_t* handle, std::string* error);
  // This process's image `image` (a global image number of this node).
  ImageContext& local_image(uint32_t image) { return *images_ctx_[image - base_]; }
  // Waits with backoff until done() is true or a peer node is lost (defined below).
  template <typename Done>
  void wait_until(ImageContext& img, Done done);
  int try_sync(ImageContext& img, uint64_t handle, std::string* error);
  int wait_sync(ImageContext& img, uint64_t handle, std::string* error);
  // Runs deferred work that needs this image's thread; true if it did some.
  bool poll(ImageContext& img);
  // Handle layout: generation (16 bits) | image (16 bits) | slot + 1 (32
  // bits). The image makes handles of different image threads differ, so
  // syncing another thread's handle is caught; the generation catches
  // stale handles.
  static uint64_t make_handle(uint32_t generation, uint32_t image, uint32_t slot) {
    return (uint64_t{generation & 0xffff} << 48) | (uint64_t{image & 0xffff} << 32) | (slot + 1);
  }
  // The instance behind a live handle, or nullptr.
  Instance* lookup(ImageContext& img, uint64_t handle) {
    const uint64_t slot = (handle & 0xffffffffull) - 1;  // wraps for a handle of slot 0 (INVALID)
    if (slot >= img.handle_slots.size()) return nullptr;
    if (handle != make_handle(img.handle_generation[slot], img.image, static_cast<uint32_t>(slot))) return nullptr;
    return img.handle_slots[slot];
  }
  // The instance behind `handle` when it is live and done, else nullptr:
  // the sync calls' first look (a call that finished while it started
  // needs no list and no wait loop).
  Instance* done_instance(ImageContext& img, uint64_t handle) {
    Instance* inst = lookup(img, handle);
    return inst != nullptr && is_done(inst) ? inst : nullptr;
  }
  bool dump_json(ImageContext& img, uint64_t handle, const std::string& path, std::string* error);

  void deferred_work(uint32_t image, uint32_t peer, bool app_thread_only) override;
  void message_waiting(uint32_t image) override;
  void out_of_memory(uint32_t image, uint32_t src, uint64_t nbytes, bool injected) override;

 private:
  // check_barrier: under CF_CHECK, add the entry barrier the digests ride
  // on (aggregate members get it once, on the merged DAG).
  Schedule* schedule_for(ImageContext& img, const CollectiveCall& call,
                         const GeneratorInfo* gen, std::string* error, bool check_barrier = true);
  // The status of a call schedule_for gave no schedule: CF_ERR_NO_MEM for
  // CF_FAULT=nomem:cache's refused miss (once), else CF_ERR_BAD_ARG.
  int no_schedule_status(ImageContext& img);
  // Plug-in generators up to this team size are checked as a whole team
  // before they first run (carflow/generator.h, CF_GEN_CHECK_IMAGES).
  static constexpr uint32_t kPluginCheckImages = 256;
  bool check_plugin(const CollectiveSpec& spec, std::string* error);
  // Keeps img.cache within CF_SCHEDULE_CACHE_BYTES after a miss added
  // `fresh`: drops the least used schedules that no call is running and no
  // aggregate points to, and makes the C API's memos stale (epoch).
  void trim_cache(ImageContext& img, const Schedule* fresh);
  std::mutex plugin_mutex_;
  std::vector<std::pair<CollectiveSpec, std::string>> plugin_checks_;  // spec -> "" or the defect
  int join_aggregate(ImageContext& img, const CollectiveCall& call, PreparedCall& prepared,
                     uint64_t* handle, std::string* error);
  [[gnu::always_inline]] void add_part(Team& team, const CollectiveCall& call, const PreparedCall& p, void* src,
                                       void* dst) {
    OpenAggregate& agg = team.aggregate;
    if (is_computational(call.kind)) agg.ops.emplace_back(static_cast<uint32_t>(agg.size()), call.op);
    if (config_.check) agg.digests.push_back(p.digest);
    agg.add(p.part, src, dst);
  }
  // An aggregate member's schedule and join flags, on its first call (out
  // of line: join_aggregate keeps a small frame).
  [[gnu::noinline]] bool prepare_member(ImageContext& img, const CollectiveCall& call, PreparedCall& prepared,
                                        std::string* error);
  Schedule* aggregate_schedule(ImageContext& img, Team& team, std::string* error);
  // Starts the team's open aggregate on its merged schedule (the members'
  // buffers, ops and digests bound) and closes it; returns the handle.
  // last: the last member when it was not added to the aggregate (its
  // buffers, op and, under CF_CHECK, last_digest are bound after the
  // others'), or nullptr.
  uint64_t launch_aggregate(ImageContext& img, Team& team, Schedule* merged, const CollectiveCall* last = nullptr,
                            uint64_t last_digest = 0);
  // launch_aggregate's body, inline in end_prepared_aggregate (the repeat
  // path: one frame and a tail call of launch).
  [[gnu::always_inline]] uint64_t launch_aggregate_inline(ImageContext& img, Team& team, Schedule* merged,
                                                          const CollectiveCall* last, uint64_t last_digest);
  // Starts a call alone (no aggregate) on its schedule: takes an instance,
  // binds the buffers (and the op of a reduction) and launches it. Inline
  // in start(): its repeat path is every repeated call's.
  [[gnu::always_inline]] uint64_t start_alone(ImageContext& img, const CollectiveCall& call, Schedule* schedule,
                                              uint64_t digest, Team& team) {
    Instance* inst = schedule->acquire();
    if (is_computational(call.kind)) {
      inst->bind(0, call.src, call.dst, call.op);
    } else {
      inst->bind_buffers(0, call.src, call.dst);
    }
    if (config_.check) inst->digest = digest;
    return launch(img, inst, team, 1);
  }
  // start_prepared's last call of an aggregate that repeats the team's
  // last one: starts the merged schedule; its handle, or 0 (nothing done)
  // otherwise.
  uint64_t end_prepared_aggregate(ImageContext& img, const CollectiveCall& call, const PreparedCall& prepared);
  // Numbers, registers and starts a bound instance; `seqs` sequence numbers
  // are taken (one per aggregate member).
  uint64_t launch(ImageContext& img, Instance* inst, Team& team, uint32_t seqs);
  [[gnu::always_inline]] inline void number(ImageContext& img, Instance* inst, Team& team, uint32_t seqs);
  void run_roots(ImageContext& img, Instance* inst);
  // run_roots of an instance launched after a failure (peer_failure()):
  // done at once with `status`, nothing posted.
  void launch_after_failure(Instance& inst, int status);
  // A CAR completed with a peer's failure: later collectives fail at launch.
  void note_peer_failure(int status);
  bool poll_image(ImageContext& img);
  void make_ready(CarState* cs);
  // make_ready without running: queues `cs` on `work` (a SEND on its VC,
  // claimed when idle), or parks a REDUCE that needs the image's thread.
  void enqueue(Worklist& work, CarState* cs);
  // A root of a call this image's thread starts, run now (not queued).
  [[gnu::always_inline]] inline void run_root(CarState* cs);
  // A ready SEND onto its VC: the VC when this thread claimed it (it then
  // runs the SEND, unless *queued says it went into the VC's queue, and
  // drains the VC), else nullptr (the VC's holder sends it).
  [[gnu::always_inline]] inline ImageContext::Vc* claim_vc(CarState* cs, bool* queued);
  void run_worklist();
  void run_queued(Worklist& work);  // runs work's CARs until none is left
  void drain(ImageContext::Vc& vc);
  void execute(CarState* cs);
  // A COPY of at least kPumpedCopyBytes on a node with a remote transport
  // goes kPumpSliceBytes at a time, with Transport::pump_sends between.
  static constexpr uint64_t kPumpedCopyBytes = 256 << 10;
  static constexpr uint64_t kPumpSliceBytes = 64 << 10;
  void pumped_copy(char* to, const char* from, uint64_t n);
  void post_send(CarState* cs);         // execute's SEND
  void post_recv(CarState* cs);         // execute's RECV
  void post_recv_reduce(CarState* cs);  // execute's RECV_REDUCE
  // A message CAR's op: what every SEND and receive sets (a SEND adds its
  // status and digest, a receive its delivery).
  [[gnu::always_inline]] static inline void fill_op(MsgOp& op, const Instance& inst, uint32_t peer, const MsgKey& key,
                                                    char* buf, uint64_t nbytes);
  // A CAR is done: runs an unpacking RECV's segments, then releases its
  // successors, or finishes the instance at its exit. Inline for the most
  // common cases, without an error: a CAR that only releases the exit
  // JOIN (CompiledCar::to_exit), and the exit itself (CompiledCar::last).
  // complete_slow releases the rest (it never unpacks).
  [[gnu::always_inline]] inline void complete(CarState* cs, int status);
  void complete_slow(CarState* cs, int status);
  // A RECV's segments (CompiledCar::unpacks), run as its completion starts.
  static void unpack(const Instance& inst, const CompiledCar& car);
  void finish(Instance& inst);
  // finish() on the waiter's own thread, inside its call (run_roots): it
  // is awake, so no wake and no store-load fence for one.
  [[gnu::always_inline]] inline void finish_on_waiter(Instance& inst);
  // A CompiledCar::to_exit CAR is done: counts the exit down (or, inside
  // run_roots' direct loop of its instance, leaves the count to it).
  [[gnu::always_inline]] inline void exit_step(Instance& inst);
  void serve_vc(uint32_t image, uint32_t peer);
  void schedule_vc(ImageContext::Vc& vc);  // a flow-graph message for the VC, unless one is pending
  // The image's thread leaves wait_until or run_roots: copies left for it
  // run here (run_here) or go to the flow graph.
  void leave_wait(ImageContext& img, bool run_here = false);
  int release(ImageContext& img, uint32_t slot);
  // Frees a synced instance's handle slot (the instance itself is not recycled here).
  static void free_handle(ImageContext& img, Instance* inst) {
    const uint32_t slot = inst->handle_slot;
    img.handle_slots[slot] = nullptr;
    ++img.handle_generation[slot];
    img.free_slots.push(slot);
    --inst->team_obj->outstanding;
  }
  int abandon(ImageContext& img, Instance* inst);
  void await_loss_report(ImageContext& img);
  // How long abandon polls for a collective to finish after a loss.
  static constexpr int kSettleAfterLossMs = 500;
  static void on_message_complete(MsgOp* op, int status);
  static void reduce_incoming(void* ctx, void* dst, const void* incoming, size_t nbytes);
  static void run_chunked(const Instance& inst, const CompiledCar& car);
  static void copy_segments(const Instance& inst, const CompiledCar& car);

  Transport& transport_for(uint32_t peer) {  // per message: base_/local_, not the map's vector
    return peer - base_ < local_ ? static_cast<Transport&>(*transport_) : *remote_;
  }
  void wake(ImageContext& img);  // a sleeping image thread: look again

  // CF_TRACE (engine/trace.h): one buffer per local image. CF_HANG_DUMP_S
  // (engine/hang.cc) needs the CARs' times too: timing_ is the one branch
  // the hot path pays when both are off.
  bool timing_ = false;
  bool tracing_ = false;
  const LivenessMesh* clock_source_ = nullptr;  // node 0's clock for the trace (set_clock_source)
  TraceClock trace_clock_;                        // the stamps' CLOCK_MONOTONIC, from the engine's start
  uint32_t trace_run_ = 0;
  std::vector<std::unique_ptr<TraceBuffer>> trace_buffers_;
  void trace_launch(Instance& inst);
  void trace_done(CarState* cs);
  // CF_HANG_DUMP_S: the instances started and not finished, when they
  // started and whether they were reported; the thread that watches them.
  struct LiveInstance {
    uint64_t since = 0;
    bool reported = false;
  };
  uint64_t hang_dump_ns_ = 0;
  std::mutex live_mutex_;
  std::unordered_map<Instance*, LiveInstance> live_instances_;  // guarded by live_mutex_
  std::condition_variable hang_cv_;
  bool hang_stop_ = false;  // guarded by live_mutex_
  std::thread hang_thread_;
  void start_hang_watch();
  void stop_hang_watch();
  void hang_loop();
  void forget_live(Instance& inst) {
    std::lock_guard<std::mutex> lock(live_mutex_);
    live_instances_.erase(&inst);
  }
  // One line per report on stderr and the DAG with its CARs' states in a
  // file (engine/hang.cc). Called with live_mutex_ held, or on an
  // abandoned instance.
  void report_hang(Instance& inst, uint64_t age_ns, const char* why);
  static void trace_start(CarState* cs) { cs->instance->times[cs->index].start.store(trace_now(), std::memory_order_relaxed); }
  static void trace_ready(CarState* cs) { cs->instance->times[cs->index].ready.store(trace_now(), std::memory_order_relaxed); }

  const NodeMap map_;
  const uint32_t images_, local_, base_;
  uint32_t all_images_per_node_ = 0;  // CF_TEAM_ALL's ranks per node
  const Config config_;
  const SelectionTable selection_;
  // Polls before yielding: CF_SPIN_COUNT, cut to 1/64 when image threads
  // outnumber the cores (a spinning thread then steals a peer's core).
  uint32_t spin_count_ = 0;
  // Yields before sleeping: CF_YIELD_COUNT, times 50 when there are other
  // processes. A waiter that sleeps then blocks on the libfabric wait
  // object, and waking from it costs more than the yields save (a process
  // that shares its core and sleeps misses its turn).
  uint32_t yield_count_ = 0;
  // Who runs a deferred copy into an image (deferred_work), by how the
  // host's image threads compare with its cores:
  //  - more threads than cores: the flow graph (waiters are often
  //    descheduled, so a copy left to one waits for its next turn);
  //  - as many: the image's own thread, at its next carflow call (a oneTBB
  //    worker has no core of its own: running an image's reduction, it
  //    takes the core of that image's thread);
  //  - fewer: the image's thread while it waits or starts a call
  //    (ImageContext::waiting), the flow graph otherwise.
  enum class CopyRouting { FlowGraph, ImageThread, WaiterOrFlowGraph };
  CopyRouting copy_routing_ = CopyRouting::FlowGraph;
  bool copies_to_waiters() const { return copy_routing_ == CopyRouting::WaiterOrFlowGraph; }
  std::unique_ptr<InprocTransport> transport_;
  Transport* const remote_;
  std::atomic<int> lost_status_{0};
  std::atomic<int> peer_failure_{0};  // peer_failure()
  // Instances abandoned after a loss: freed when the engine goes, once no
  // transport can touch them any more.
  std::mutex abandoned_mutex_;
  std::vector<Instance*> abandoned_;
  mutable std::mutex lost_mutex_;
  std::string lost_what_;  // guarded by lost_mutex_
  std::function<void(const std::string&)> on_node_failure_;
  std::atomic<bool> out_of_memory_{false};  // reported once
  std::atomic<int> running_bodies_{0};  // flow-graph bodies in progress
  // CF_PROGRESS=thread: the progress thread, the number of live instances
  // (started, exit not yet complete) and the condition it sleeps on.
  void progress_loop();
  std::atomic<int> live_{0};
  std::mutex progress_mutex_;
  std::condition_variable progress_cv_;
  bool progress_stop_ = false;  // guarded by progress_mutex_
  std::thread progress_thread_;
  tbb::flow::graph graph_;  // before the images: their VC nodes live in it
  std::vector<std::unique_ptr<ImageContext>> images_ctx_;
};

// Waits with the GASNet notes' backoff (MPICH notes, MPI_Wait): poll, then yield,
// then block on the image's condition variable until a completion or
// deferred work for this image wakes it. The timed wait only bounds the cost
// of a wake-up that raced with going to sleep; the protocol does not need it.
template <typename Done>
void Engine::wait_until(ImageContext& img, Done done) {
  if (done()) return;
  struct Leave {  // copies left to this thread go elsewhere once it leaves
    Engine& engine;
    ImageContext& img;
    ~Leave() {
      if (engine.copies_to_waiters()) engine.leave_wait(img);
    }
  } leave{*this, img};
  if (copies_to_waiters()) img.waiting.store(true, std::memory_order_seq_cst);
  const bool spin = config_.progress == ProgressMode::Poll;
  for (uint32_t i = 0; spin && i < spin_count_; ++i) {
    if (done() || lost_status() != 0) return;
    poll(img);
  }
  for (uint32_t i = 0; spin && i < yield_count_; ++i) {
    if (done() || lost_status() != 0) return;
    if (!poll(img)) std::this_thread::yield();
  }
  while (!done() && lost_status() == 0) {
    if (poll(img)) continue;
    if (done()) return;
    img.sleepers.fetch_add(1, std::memory_order_seq_cst);
    // Orders the looks below after the announcement (a waker stores, then
    // looks at the sleepers; each side sees the other's).
    std::atomic_thread_fence(std::memory_order_seq_cst);
    // A message or copy a peer left for us (inproc rings, queued copies), or
    // a REDUCE parked for this thread, before it could see us here: its
    // sender saw no sleeper, so we take it instead of sleeping. A
    // representative looks for the images it polls for too.
    auto work_for = [&](uint32_t image, const ImageContext& ctx) {
      return transport_->messages_waiting(image) || ctx.app_only_pending.load(std::memory_order_seq_cst) ||
             (remote_ != nullptr && remote_->messages_waiting(image));
    };
    auto messages_waiting = [&] {
      bool waiting = work_for(img.image, img);
      for (uint32_t i = 0; !waiting && img.representing > 0 && i < local_; ++i) {
        waiting = work_for(base_ + i, *images_ctx_[i]);
      }
      return waiting;
    };
    if (messages_waiting()) {
      img.sleepers.fetch_sub(1, std::memory_order_seq_cst);
      continue;
    }
    if (remote_ != nullptr) {
      // Messages from other nodes arrive on the transport's wait object,
      // local news on the image's eventfd: sleep on both.
      if (!done() && lost_status() == 0) remote_->wait(img.wake_fd, 100);
      uint64_t drained;
      while (::read(img.wake_fd, &drained, sizeof drained) > 0) {
      }
    } else {
      // Looked at again under the lock a waker takes to notify (wake()): a
      // message published after the look above is seen here, or its
      // sender's notify comes once we wait.
      std::unique_lock<std::mutex> lock(img.sleep_mutex);
      if (!done() && !messages_waiting()) img.sleep_cv.wait_for(lock, std::chrono::milliseconds(100));
    }
    img.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (lost_status() != 0) return;
  }
}

}  // namespace carflow
