// The engine: set-up and teardown of the images of this process, the
// progress thread, and failing every collective when a peer is lost. How a
// call runs is in engine/README.md; the other steps live in start.cc (the
// schedule), aggregates.cc, run.cc (the DAG), progress.cc and sync.cc.
#include "engine/engine.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
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

uint32_t Engine::host_cores(uint32_t local, uint32_t on_host) {
  const uint32_t host = std::max(1u, std::thread::hardware_concurrency());
  cpu_set_t mine;
  CPU_ZERO(&mine);
  // The main thread's CPUs stand for the process's (an image thread may be bound to its own).
  if (::sched_getaffinity(::getpid(), sizeof mine, &mine) != 0) return host;
  const uint64_t cpus = static_cast<uint64_t>(std::max(1, CPU_COUNT(&mine)));
  const uint64_t processes = (uint64_t{on_host} + std::max(1u, local) - 1) / std::max(1u, local);
  return static_cast<uint32_t>(std::min<uint64_t>(host, cpus * processes));
}

Engine::Engine(const NodeMap& map, const Config& config, Transport* remote, uint32_t host_images)
    : map_(map),
      images_(map.total()),
      local_(map.local()),
      base_(map.base()),
      config_(config),
      selection_(config, host_cores(map.local(), std::max(host_images, map.local())), map.local(),
                 host_images != 0 ? host_images : map.local()),
      remote_(remote) {
  {
    std::vector<uint32_t> everyone(images_);
    for (uint32_t i = 0; i < images_; ++i) everyone[i] = i;
    all_images_per_node_ = team_images_per_node(map_, everyone);
  }
  hang_dump_ns_ = config_.hang_dump_ms * 1000000;
  timing_ = hang_dump_ns_ != 0 || !config_.trace_dir.empty();
  if (timing_) trace_clock_.start();
  if (hang_dump_ns_ != 0) start_hang_watch();
  if (!config_.trace_dir.empty()) {
    tracing_ = true;
    trace_run_ = next_trace_run();
    for (uint32_t i = 0; i < local_; ++i) trace_buffers_.push_back(std::make_unique<TraceBuffer>(config_.trace_events));
  }
  const uint32_t on_host = std::max(host_images, local_);
  const uint32_t cores = host_cores(local_, on_host);
  // Image threads outnumber cores: poll briefly, then yield. Across
  // processes not at all: a peer process moves its data only while it
  // runs (in one process a sender matches for a descheduled receiver), so
  // spinning only keeps that peer off the core.
  spin_count_ = on_host <= cores ? config.spin_count : remote_ != nullptr ? 0 : config.spin_count / 64;
  copy_routing_ = on_host > cores    ? CopyRouting::FlowGraph
                  : on_host == cores ? CopyRouting::ImageThread
                                     : CopyRouting::WaiterOrFlowGraph;
  yield_count_ = static_cast<uint32_t>(std::min<uint64_t>(
      uint64_t{config.yield_count} * (remote_ != nullptr ? 50 : 1), UINT32_MAX));
  // Rings pay off when every image has a core to drain its own on; when
  // image threads outnumber cores, senders matching for descheduled
  // receivers (the mailbox path) keeps work moving. A node of one image
  // has no local peer: off, so its polls skip them.
  const bool rings = config.inproc_rings == RingsMode::On || (config.inproc_rings == RingsMode::Auto && on_host <= cores);
  const uint64_t ring_bytes = rings && local_ > 1 ? config.inproc_fastbox_bytes : 0;
  auto inproc = std::make_unique<InprocTransport>(local_, config.inproc_eager_bytes, ring_bytes, this, base_);
  inproc->set_eager_credits(static_cast<uint32_t>(config.inproc_eager_credits));
  transport_ = std::move(inproc);
  // The node's first unexpected message of this run, in whichever pool takes it first.
  if (config.fault.kind == FaultSpec::NomemUnexpected && config.fault.applies_to(map.node)) {
    transport_->fail_next_unexpected_block();
    if (remote_ != nullptr) remote_->fail_next_unexpected_block();
  }
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

// CF_PROGRESS=thread (GASNet collectives notes v1.7, "Thoughts on progress of implementation"):
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
  if (hang_thread_.joinable()) stop_hang_watch();
  if (tracing_) {
    std::string path, error;
    ClockEstimate clock;
    clock.same_clock = true;  // alone, or node 0: its own clock
    if (clock_source_ != nullptr) clock = clock_source_->clock_estimate();
    if (!write_trace(config_.trace_dir, map_.node, base_, trace_run_, trace_buffers_, trace_clock_, clock, &path,
                     &error)) {
      std::fprintf(stderr, "carflow: %s\n", error.c_str());
    }
  }
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

const char* Engine::loss_reason(int status) {
  return status == kErrTimeout ? "timed out" : status == kErrNoMem ? "this node ran out of memory" : "a peer was lost";
}

void Engine::fail_all(int status, const std::string& what) {
  {
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (lost_status_.load() != 0) return;
    lost_what_ = what;
    lost_status_.store(status, std::memory_order_release);
  }
  // Before the transports fail anything: a collective launched from here
  // on runs nothing (launch_after_failure). A peer's failure noted first
  // may have set it to CF_ERR_PEER_LOST; syncs report lost_status anyway.
  int none = 0;
  peer_failure_.compare_exchange_strong(none, status, std::memory_order_acq_rel);
  // The hang report of each outstanding collective is made now, while its
  // CARs still show what they waited for: failing them marks them done.
  if (hang_dump_ns_ != 0) {
    const char* why = loss_reason(status);
    const uint64_t now = trace_now();
    std::lock_guard<std::mutex> lock(live_mutex_);
    for (auto& [inst, live] : live_instances_) {
      if (live.reported) continue;
      report_hang(*inst, trace_clock_.duration_ns(now - live.since), why);
      live.reported = true;
    }
  }
  // Every collective fails from here: what the transports hold completes
  // now, with no more bytes, so each instance finishes and its wait
  // returns only after the last write into its buffers (abandon).
  transport_->fail_all(status);
  if (remote_ != nullptr) remote_->fail_all(status);
  for (auto& img : images_ctx_) {
    img->sleepers.fetch_add(1, std::memory_order_seq_cst);  // make wake() reach it
    wake(*img);
    img->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  }
}

// A message that arrived before its receive could not be kept: that
// receive, and so its collective, can never finish. The node stops as a
// lost one would, so nobody waits on it: its own waits return
// CF_ERR_NO_MEM and the other nodes are told it left (on_node_failure_).
void Engine::out_of_memory(uint32_t image, uint32_t src, uint64_t nbytes, bool injected) {
  if (out_of_memory_.exchange(true)) return;
  const std::string why = "ran out of memory: the unexpected-message pool could not hold a message of " +
                          std::to_string(nbytes) + " bytes from image " + std::to_string(src) + " to image " +
                          std::to_string(image);
  const std::string what = "node " + std::to_string(map_.node) + " " + why;
  const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch()).count();
  if (injected) {
    const char* spec = std::getenv("CF_FAULT");
    std::fprintf(stderr, "carflow: CF_FAULT=%s: node %u fails an unexpected-message block (%s) at_ms=%lld\n",
                 spec != nullptr ? spec : "nomem:unexpected", map_.node, what.c_str(), ms);
  } else {
    std::fprintf(stderr, "carflow: %s at_ms=%lld\n", what.c_str(), ms);
  }
  {
    // Named before anything fails: a wait that sees its collective fail reads it.
    std::lock_guard<std::mutex> lock(lost_mutex_);
    if (lost_status_.load() == 0) lost_what_ = what;
  }
  // The other nodes first: a woken image's next call must not reach them
  // (its sequence number would match their next collective's).
  if (on_node_failure_) on_node_failure_(why);
  fail_all(kErrNoMem, what);
}

std::string Engine::lost_what() const {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  return lost_what_;
}

}  // namespace carflow
