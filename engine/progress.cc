// Progress: deferred work handed to an image's thread, VCs served by the
// flow graph, and polling the transports.
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
  // As message_waiting: the thread that called for this image polls for it.
  if (ImageContext* rep = img.represented_by.load(std::memory_order_seq_cst)) wake(*rep);
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
}  // namespace carflow
