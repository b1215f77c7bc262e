// Running a DAG: numbering and launching an instance, its ready CARs,
// the worklist and VC claims, executing each CAR kind, completions, and
// finishing (waking the waiter). The hot path of every call.
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

// This thread's worklist (engine_internal.h).
thread_local constinit Worklist* tls_work_ptr CF_FAST_TLS = nullptr;

Worklist& new_worklist() {
  thread_local std::unique_ptr<Worklist> owner;  // freed when the thread exits
  owner = std::make_unique<Worklist>();
  return *(tls_work_ptr = owner.get());
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
  if (const int failed = peer_failure(); failed != 0) [[unlikely]] return launch_after_failure(*inst, failed);
  tls_on_app_thread = true;
  if (timing_) [[unlikely]] trace_launch(*inst);
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

// After a loss the images are out of step: each numbers its calls as it
// starts them, but one has given up a collective that another still runs,
// so a receive posted now could match a message of another collective
// (another size: CF_ERR_MISMATCH; the same: wrong data), and a send could
// reach such a receive. A collective launched then posts nothing and
// changes no buffer: it is done at once, failed.
void Engine::launch_after_failure(Instance& inst, int status) {
  inst.status.store(status, std::memory_order_relaxed);
  if (config_.progress == ProgressMode::Thread) live_.fetch_sub(1, std::memory_order_acq_rel);
  inst.done.store(true, std::memory_order_release);
}

void Engine::note_peer_failure(int status) {
  // A peer that ran out of memory has left the job: to this node it is lost.
  if (status != kErrPeerLost && status != kErrNoMem) return;
  int none = 0;
  peer_failure_.compare_exchange_strong(none, kErrPeerLost, std::memory_order_acq_rel);
}

int Engine::start_represented(ImageContext& caller, const std::vector<RepresentedCall>& calls,
                              uint64_t* handle, std::string* error) {
  std::vector<Schedule*> schedules;
  std::vector<uint64_t> digests;
  // The schedules below stay unstarted until every part has one: none may
  // be trimmed meanwhile.
  struct Hold {
    int& n;
    explicit Hold(int& count) : n(count) { ++n; }
    ~Hold() { --n; }
  } hold(caller.trim_hold);
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
  if (timing_) [[unlikely]] trace_ready(cs);
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
    // thread inside a carflow call (GASNet collectives notes v1.7): park it for the image's
    // next poll and wake the image if it sleeps.
    ImageContext& img = *inst.image;
    {
      std::lock_guard<std::mutex> lock(img.app_only_mutex);
      img.app_only.push_back(cs);
      // seq_cst: before wake()'s look at the sleepers (wait_until).
      img.app_only_pending.store(true, std::memory_order_seq_cst);
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
  if (timing_) [[unlikely]] trace_start(cs);
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
// them. A stream's sender otherwise sits idle while its receiver copies
// chunks out; the copy fills those gaps instead of running before the
// stream starts.
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
  if (timing_) [[unlikely]] trace_done(cs);
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
      note_peer_failure(status);
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
    // complete (the JOIN precedes it), so `inst` stays ours. Without one,
    // the last successor's release may let another thread finish the
    // instance and its schedule be evicted: nothing of either is read after
    // it (the count is read first).
    CarState* join = nullptr;
    const uint32_t count = car.succ_count;
    for (uint32_t i = 0; i < count; ++i) {
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
    if (timing_) [[unlikely]] trace_done(cs);
  }
}

void Engine::finish_on_waiter(Instance& inst) {
  if (timing_) [[unlikely]] {
    trace_done(&inst.cars[inst.schedule->exit()]);
    if (hang_dump_ns_ != 0) forget_live(inst);
  }
  if (config_.progress == ProgressMode::Thread) live_.fetch_sub(1, std::memory_order_acq_rel);
  inst.done.store(true, std::memory_order_release);
}

void Engine::finish(Instance& inst) {
  if (timing_) [[unlikely]] {
    trace_done(&inst.cars[inst.schedule->exit()]);
    if (hang_dump_ns_ != 0) forget_live(inst);  // before `done`: the watcher may hold it till then
  }
  ImageContext* img = inst.waiter;
  const Worklist* work = tls_work_ptr;
  // A small call's exit usually completes while the call starts.
  if (work != nullptr && work->here == img) return finish_on_waiter(inst);
  if (config_.progress == ProgressMode::Thread) live_.fetch_sub(1, std::memory_order_acq_rel);
  inst.done.store(true, std::memory_order_seq_cst);
  // `inst` may be recycled by its owner from here on; touch only `img`.
  wake(*img);
}
void Engine::trace_launch(Instance& inst) {
  const size_t n = inst.schedule->cars().size();
  if (inst.times == nullptr) inst.times.reset(new CarTimes[n]);
  const uint64_t now = trace_now();
  for (size_t i = 0; i < n; ++i) {
    inst.times[i].ready.store(0, std::memory_order_relaxed);
    inst.times[i].start.store(0, std::memory_order_relaxed);
    inst.times[i].done.store(0, std::memory_order_relaxed);
  }
  for (uint32_t root : inst.schedule->roots()) inst.times[root].ready.store(now, std::memory_order_relaxed);
  if (hang_dump_ns_ != 0) {
    std::lock_guard<std::mutex> lock(live_mutex_);
    live_instances_[&inst] = LiveInstance{now, false};
  }
}

void Engine::trace_done(CarState* cs) {
  Instance& inst = *cs->instance;
  CarTimes& t = inst.times[cs->index];
  const uint64_t now = trace_now_ordered();
  if (t.done.exchange(now, std::memory_order_relaxed) != 0 || !tracing_) return;  // the exit, seen twice
  const CompiledCar& car = *cs->car;
  TraceRecord r;
  r.ready = t.ready.load(std::memory_order_relaxed);
  r.start = t.start.load(std::memory_order_relaxed);
  r.done = now;
  r.kind_bytes = TraceRecord::pack(car.kind, car.kind == CarKind::Send ? car.src.length : car.dst.length);
  r.schedule = inst.schedule;
  r.team = inst.team;
  r.seq = inst.seq + car.member;
  r.tag = car.tag;
  r.car = inst.schedule->dag_id(cs->index);
  r.image = inst.image->image;
  const bool message = car.kind == CarKind::Send || car.kind == CarKind::Recv || car.kind == CarKind::RecvReduce;
  r.peer = message ? inst.members[car.peer] : 0;
  trace_buffers_[r.image - base_]->add(r);
}

}  // namespace carflow
