// Sync: releasing and abandoning handles, try / wait, and dumping an
// in-flight handle's DAG.
#include "engine/engine.h"

#include <algorithm>
#include <chrono>
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

int Engine::release(ImageContext& img, uint32_t slot) {
  Instance* inst = img.handle_slots[slot];
  const Schedule& schedule = *inst->schedule;  // cached beyond the release below
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
  // A collective that failed after this node failed or lost a peer (or a
  // peer's failure reached it) reports that cause, not a consequence
  // (messages of images out of step).
  if (first != 0 && lost_status() == 0 && peer_failure() != 0) await_loss_report(img);
  if (first != 0 && lost_status() != 0) return lost_status();
  if (first != 0 && peer_failure() != 0) return peer_failure();
  if (first == kErrMismatch) img.mismatch_message = describe_mismatch(report, img.image, schedule);
  return first;
}

// A peer's failure reached this node through a message before the loss was
// reported here: the sync waits for the report (the liveness links make it
// within CF_PEER_TIMEOUT), so that its error names the lost node, and a
// program that ends on it leaves as after a loss, not with a goodbye the
// nodes still waiting would take for a clean exit.
void Engine::await_loss_report(ImageContext& img) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(config_.peer_timeout_ms);
  while (lost_status() == 0 && std::chrono::steady_clock::now() < deadline) {
    if (!poll(img)) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A collective not done when a peer node was lost (or this node failed)
// syncs with the lost status. fail_all had the transports complete what
// they held, so it is usually done after a few polls: a thread may still be
// delivering into its buffers until then, and the caller may reuse them once
// this returns. One still waiting after kSettleAfterLossMs (a read from the
// lost node that the provider never ends) is abandoned: its handle dies, and
// the instance is not recycled (CARs of it may still be posted in a
// transport); the job is ending anyway.
int Engine::abandon(ImageContext& img, Instance* inst) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kSettleAfterLossMs);
  while (!is_done(inst) && std::chrono::steady_clock::now() < deadline) {
    if (!poll(img)) std::this_thread::yield();
  }
  if (is_done(inst)) {
    release(img, inst->handle_slot);
    return lost_status();
  }
  if (timing_) {  // the hang dump's report of what it waited for, as it is given up
    std::lock_guard<std::mutex> lock(live_mutex_);
    auto it = live_instances_.find(inst);
    if (it == live_instances_.end() || !it->second.reported) {  // not yet reported at the loss (fail_all)
      report_hang(*inst, it != live_instances_.end() ? trace_clock_.duration_ns(trace_now() - it->second.since) : 0,
                  loss_reason(lost_status()));
    }
    if (it != live_instances_.end()) live_instances_.erase(it);
  }
  // A CAR of it that completes late releases SENDs: they carry the failure
  // to their peers (MsgOp::status), not bytes of a collective given up.
  for (Instance* part : inst->represented) {
    int ok = kOk;
    part->status.compare_exchange_strong(ok, lost_status(), std::memory_order_acq_rel);
  }
  int ok = kOk;
  inst->status.compare_exchange_strong(ok, lost_status(), std::memory_order_acq_rel);
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
  return save_dag_file(global_dag_of(*inst), path, error);
}

GlobalDag global_dag_of(const Instance& inst) {
  // Every image's schedule for the same key (generators are pure, so
  // running them again gives exactly what each image runs).
  const CollectiveSpec& spec = inst.schedule->spec();
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  const std::vector<const Schedule*>& parts = inst.schedule->parts;
  GlobalDag global;
  global.spec = spec;  // an aggregate's: its first member's, with the merged sync modes
  for (uint32_t i = 0; i < spec.images; ++i) {
    if (i == inst.team_obj->rank) {
      global.images.push_back(inst.schedule->dag());
    } else if (!parts.empty()) {
      global.images.push_back(merged_dag(parts, i, false, (spec.flags & kSpecInAllSync) != 0,
                                         (spec.flags & kSpecOutAllSync) != 0));
    } else {
      global.images.push_back(generate_local(*gen, spec, i));
    }
  }
  return global;
}
}  // namespace carflow
