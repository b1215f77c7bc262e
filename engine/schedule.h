// Compiled schedules and their per-call instances.
//
// A Schedule is one image's LocalDag turned into flat arrays: CARs, successor
// lists (CSR), dependency counts, the roots, and temp slot offsets in one
// arena. The schedule cache builds it once per key; each call then takes an
// Instance from the schedule's pool, binds the user's pointers and resets
// the counters: the hot path allocates nothing.
//
// Compiling also trims bookkeeping that the DAG keeps for readability (the
// LocalDag itself, and its JSON, stay as generated):
// - COPYs with the same predecessors run as one compiled CAR with a list of
//   segments (an aggregate's pack and unpack copies);
// - a COPY that is a RECV's only successor and has no other predecessor
//   runs in the RECV's completion, as the RECV's segments (an aggregate's
//   unpack), and the RECV releases the COPY's successors;
// - a JOIN other than the exit whose removal adds no edges (one predecessor
//   or one successor) is bypassed: its predecessors release its successors;
// - an exit JOIN with one predecessor, which has no other successor, is
//   dropped: that predecessor is the exit;
// - a CAR with one predecessor is released without touching its counter.
// Dependencies between the remaining CARs are exactly the transitive ones
// of the DAG. Only the CARs that still run are compiled, numbered densely
// in DAG order (cars(), roots(), exit() and successor lists use these
// numbers), so an instance holds no state for the others.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/reduce_ops.h"
#include "engine/trace.h"
#include "graph/car.h"
#include "transports/transport.h"

namespace carflow {

class ImageContext;
struct Instance;
struct Team;

// One copy of a fused COPY, its buffers resolved as far as the schedule
// can: a place is Instance::user[base] + offset, where the user buffers'
// entries are followed by the instance's temp arena (base 2 * members), so
// a copy looks up no buffer kind.
struct CopySegment {
  struct Place {
    uint32_t base;
    uint64_t offset;
  };
  Place src, dst;
  uint64_t length;
};

struct CompiledCar {
  CarKind kind;
  bool incoming_left;
  ReduceShape shape;
  uint64_t first_elems, chunk_elems;  // Fold / Prefix chunking
  uint32_t peer;         // team rank
  uint32_t tag;
  uint32_t member;       // aggregate member (Car::member): buffers, op, sequence offset
  BufferRef src, src2, dst;
  uint32_t succ_begin;   // into Schedule::successors
  uint32_t succ_count;
  int32_t deps;          // predecessor count
  uint32_t seg_begin = 0;  // a fused COPY: its segments in Schedule::segments (0: the
  uint32_t seg_count = 0;  // CAR's own src/dst); a RECV: the copies its completion runs
  bool seg_words = false;  // every segment is 8 to 16 bytes: copied as two words each
  bool seg_word = false;   // every segment is 8 bytes: copied as one word each (seg_words too)
  bool unpacks = false;    // a RECV with segments: its completion runs them first
  // src and dst as places (Instance::at: no look at the buffer kind), for
  // the CARs whose src and dst always name a buffer: a COPY's, a SEND's
  // src, a RECV's and a RECV_REDUCE's dst.
  CopySegment::Place src_at{}, dst_at{};
  // Its one successor is the exit JOIN, which counts (several
  // predecessors): Engine::complete counts the exit down, with no
  // successor loop.
  bool to_exit = false;
  // It is the exit: its completion finishes the instance, with nothing to
  // release first.
  bool last = false;
};

// Per-call state of one CAR. The message op is embedded, so posting a SEND or
// RECV allocates nothing.
struct CarState {
  std::atomic<int32_t> pending{0};
  uint32_t index = 0;
  Instance* instance = nullptr;
  const CompiledCar* car = nullptr;  // its schedule's cars()[index]
  CarState* next_ready = nullptr;   // VC ready-queue link
  MsgOp op;
};

class Schedule {
 public:
  Schedule(CollectiveSpec spec, LocalDag dag);
  ~Schedule();
  Schedule(const Schedule&) = delete;
  Schedule& operator=(const Schedule&) = delete;

  const CollectiveSpec& spec() const { return spec_; }
  const LocalDag& dag() const { return dag_; }
  const std::vector<CompiledCar>& cars() const { return cars_; }
  const uint32_t* successors(const CompiledCar& c) const { return successors_.data() + c.succ_begin; }
  const std::vector<uint32_t>& roots() const { return roots_; }
  const CopySegment* segments(const CompiledCar& c) const { return segments_.data() + c.seg_begin; }
  // CARs that run per call after compiling (at most dag().cars.size()).
  size_t live_cars() const { return cars_.size(); }
  // Aggregate members this schedule binds (1 outside aggregates).
  uint32_t members() const { return members_; }
  uint32_t exit() const { return exit_; }  // index into cars()
  // The DAG's CAR id (dag().cars) of compiled CAR i (traces, hang dumps).
  uint32_t dag_id(uint32_t i) const { return dag_ids_[i]; }
  // Every CAR but the exit JOIN is a root and releases only the exit (a
  // broadcast or scatter root: its own COPY and its SENDs): the roots run
  // one after the other and their completions on the starting thread are
  // counted there, not on the exit's atomic counter (Engine::run_roots).
  bool direct() const { return direct_; }
  uint64_t temp_offset(uint32_t slot) const { return temp_offsets_[slot]; }

  // Pool: only the owning image's thread calls these. acquire() takes a
  // pooled instance (a new one when none is free), its counters reset.
  Instance* acquire();
  void release(Instance* instance);  // back into the pool (defined after Instance)
  size_t instances_created() const { return created_; }
  // The schedule cache's budget (CF_SCHEDULE_CACHE_BYTES, Engine::trim_cache):
  // calls started since the last trim, calls outstanding, bytes held.
  uint64_t uses = 0;
  uint32_t in_use = 0;
  bool pinned = false;  // an aggregate member's: merged schedules point to it
  // Bytes held: the arrays, the pooled instances and the temp arenas they
  // hold (O(1): the cache sums it per miss).
  uint64_t footprint() const { return static_bytes_ + created_ * instance_bytes_ + temps_held_ * temp_bytes_; }
  // Frees the temp arenas of the pooled (idle) instances, which acquire()
  // allocates again when it hands one out; returns the bytes freed. The
  // cache trims these before it drops whole schedules: a DAG is small and
  // costs a build, an arena is as large as the call's data and costs only
  // an allocation.
  uint64_t drop_idle_temps();
  // The cache's running total, grown here as the pool grows (owner thread only).
  void account_to(uint64_t* total) { account_ = total; }

  // Aggregates: the members' own schedules, in call order (empty otherwise).
  std::vector<const Schedule*> parts;

 private:
  CollectiveSpec spec_;
  LocalDag dag_;
  std::vector<CompiledCar> cars_;  // the CARs that run, densely numbered
  std::vector<uint32_t> dag_ids_;  // cars_[i] is dag_.cars[dag_ids_[i]]
  uint32_t exit_ = 0;
  bool direct_ = false;
  std::vector<uint32_t> successors_;
  std::vector<uint32_t> roots_;
  std::vector<uint32_t> counted_;  // CARs with more than one predecessor: their counters are reset per call
  std::vector<uint32_t> posting_first(std::vector<uint32_t> ids) const;
  CopySegment::Place place(const BufferRef& b, uint32_t member) const;  // a user buffer or temp; needs temp_offsets_
  CopySegment segment(const Car& copy) const;
  std::vector<CopySegment> segments_;
  std::vector<uint64_t> temp_offsets_;
  uint64_t temp_bytes_ = 0;
  uint32_t members_ = 1;
  Instance* new_instance();  // acquire's pool growth (out of line)
  void restore_temp(Instance* inst);  // acquire's: an instance's arena, new or dropped (out of line)
  void measure_footprint();
  Instance* free_ = nullptr;
  size_t created_ = 0;
  size_t temps_held_ = 0;  // instances holding their temp arena
  uint64_t static_bytes_ = 0, instance_bytes_ = 0;  // footprint(), fixed once compiled (arenas apart)
  uint64_t* account_ = nullptr;
};

struct Instance {
  Schedule* schedule = nullptr;
  ImageContext* image = nullptr;
  uint32_t team = 0;                // the team's wire id
  Team* team_obj = nullptr;         // the image's view of it (members: rank -> image)
  const uint32_t* members = nullptr;
  uint32_t seq = 0;                 // member m's messages travel under seq + m
  // The bound user buffers and ops, per aggregate member (a single call is
  // member 0): user[2m] is member m's source, user[2m + 1] its destination;
  // after the members' entries, the temp arena (CopySegment).
  char** user = user_one;
  ReduceOp* ops = &op_one;
  std::unique_ptr<CarState[]> cars;
  char* temp = nullptr;            // arena, 64-byte aligned
  std::atomic<int> status{0};
  std::atomic<bool> done{false};
  // CF_CHECK (engine/arg_check.h): this call's argument digest (0 = not
  // checking), and the mismatch found or heard of (0 = none).
  uint64_t digest = 0;
  std::atomic<uint64_t> report{0};
  uint32_t handle_slot = 0;
  Instance* next_free = nullptr;
  ImageContext* waiter = nullptr;      // woken when this instance finishes (its image, or a representative)
  std::vector<Instance*> represented;  // representative-thread mode: the other images' instances
  char* user_one[3] = {};
  ReduceOp op_one;
  std::unique_ptr<char*[]> user_many;    // aggregates: 2 per member, then the temp arena
  std::unique_ptr<ReduceOp[]> ops_many;  // aggregates: 1 per member
  // CF_TRACE: each CAR's ready, start and done times in this call
  // (engine/trace.h); allocated on the first traced call.
  std::unique_ptr<CarTimes[]> times;

  void bind_buffers(uint32_t member, void* src, void* dst) {
    user[2 * member] = static_cast<char*>(src);
    user[2 * member + 1] = static_cast<char*>(dst);
  }
  void bind(uint32_t member, void* src, void* dst, const ReduceOp& op) {
    bind_buffers(member, src, dst);
    ops[member] = op;
  }
  const ReduceOp& op_of(const CompiledCar& car) const { return ops[car.member]; }
  [[gnu::always_inline]] char* at(const CopySegment::Place& p) const { return user[p.base] + p.offset; }
  [[gnu::always_inline]] char* resolve(const BufferRef& b, uint32_t member) const {
    switch (b.space) {
      case BufferSpace::UserSrc: return user[2 * member] + b.offset;
      case BufferSpace::UserDst: return user[2 * member + 1] + b.offset;
      case BufferSpace::Temp: return temp + schedule->temp_offset(b.slot) + b.offset;
      case BufferSpace::None: break;
    }
    return nullptr;
  }
  ~Instance();
};

inline Instance* Schedule::acquire() {
  Instance* inst = free_;
  if (inst != nullptr) {
    free_ = inst->next_free;
  } else {
    inst = new_instance();
  }
  if (inst->temp == nullptr && temp_bytes_ > 0) restore_temp(inst);
  // Only CARs of several predecessors count down (a sole predecessor
  // releases its successor without the counter; roots have none).
  for (uint32_t i : counted_) inst->cars[i].pending.store(cars_[i].deps, std::memory_order_relaxed);
  ++uses;
  ++in_use;
  inst->status.store(0, std::memory_order_relaxed);
  inst->done.store(false, std::memory_order_relaxed);
  inst->digest = 0;
  inst->report.store(0, std::memory_order_relaxed);
  inst->next_free = nullptr;
  return inst;
}

inline void Schedule::release(Instance* instance) {
  --in_use;
  instance->next_free = free_;
  free_ = instance;
}

}  // namespace carflow
