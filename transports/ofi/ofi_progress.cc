// Progress and failure: polling, waiting on the provider's or the rings'
// wait objects, failing a lost node's operations, and quiescing at exit.
#include "transports/ofi/ofi_transport.h"


#include <poll.h>
#include "transports/ofi/fabric_lib.h"
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <tuple>
#include <unordered_set>
#include "transports/ofi/ofi_internal.h"

namespace carflow {

bool OfiTransport::progress(uint32_t image, uint32_t peer, bool on_app_thread) {
  (void)peer;
  return progress_all(image, on_app_thread);
}

bool OfiTransport::progress_all(uint32_t image, bool on_app_thread) {
  bool did = rings_ != nullptr && (poll_rings() | flush_ring_backlogs() | advance_streams());
  // With host rings, every message between the processes goes through
  // shared memory (rings and streams): libfabric's CQ has nothing to read,
  // and reading it (shm) costs more than a ring poll. Without rings,
  // threads of every image poll here: one reads the CQ, the others move on.
  const bool app_only = on_app_thread && !images_.empty() &&
                        queues(image).app_only_pending.load(std::memory_order_acquire);
  if ((rings_ == nullptr || app_only) && lock_.try_lock()) {
    ScopedActions scoped;  // only here: with rings, a poll that finds nothing needs none
    Actions& actions = *scoped;
    if (rings_ == nullptr) did |= poll_cq(&actions);
    if (app_only) {
      ImageQueues& q = queues(image);
      for (auto& d : q.app_only) actions.deliveries.push_back(d);
      q.app_only.clear();
      q.app_only_pending.store(false, std::memory_order_relaxed);
      did = true;
    }
    lock_.unlock();
    run(actions);
  }
  return did;
}

bool OfiTransport::messages_waiting(uint32_t image) const {
  return !images_.empty() && images_[image - map_.base()]->app_only_pending.load(std::memory_order_seq_cst);
}

void OfiTransport::wait(int wake_fd, int timeout_ms) {
  if (rings_ != nullptr) {
    // Sends wait for ring space that no doorbell announces, or a full
    // ring's sender may wait for this node's polls to count it stuck
    // (ring_message_wanted): look again at once.
    if (host_work_pending()) {
      std::this_thread::yield();
      return;
    }
    // One host: ring messages, stream chunks and the engine's news (its
    // eventfd, then the doorbell) end the sleep; 1 ms is only a backstop.
    // The check above is made again once the sleep is announced: work
    // added after it rings the doorbell only for a sleeper it sees
    // (add_host_work).
    const auto busy = [](const void* self) { return static_cast<const OfiTransport*>(self)->host_work_pending(); };
    (void)rings_->wait(std::min(timeout_ms, 1), wake_fd, busy, this);
    return;
  }
  pollfd fds[2];
  int n = 0;
  int step = timeout_ms;
  {
    std::lock_guard<SpinLock> guard(lock_);
    if (wait_fd_ >= 0) {
      fid* cq = &cq_->fid;
      if (fi_trywait(fabric_, &cq, 1) != FI_SUCCESS) return;  // events are waiting
      fds[n++] = pollfd{wait_fd_, POLLIN, 0};
    }
    // Providers with manual progress (tcp;ofi_rxm) may need a CQ read for
    // data to move at all, and shm has no wait object: look again after at
    // most 1 ms either way. Still off the CPU while the peer is late.
    step = std::min(timeout_ms, 1);
  }
  if (wake_fd >= 0) fds[n++] = pollfd{wake_fd, POLLIN, 0};
  ::poll(fds, n, step);
}

void OfiTransport::fail_node(uint32_t n, int status) {
  Actions actions;
  if (n >= peers_.size()) return;
  lost_now_[n].store(status, std::memory_order_release);  // ends a send spinning on EAGAIN to it
  node_failed_.store(true, std::memory_order_release);     // and stops ring sends to it (send())
  {
    std::lock_guard<SpinLock> guard(lock_);
    PeerNode& node = peers_[n];
    node.lost = status;
    for (MsgOp* op : node.waiting) actions.complete.emplace_back(op, status);
    node.waiting.clear();
    // Receives from it: their messages may never come (later ones fail in recv()).
    std::vector<MsgOp*> receives;
    for (auto& q : images_) {
      const size_t before = receives.size();
      q->posted.take_if([&](const MsgOp* op) { return map_.node_of(op->peer) == n; }, &receives);
      if (receives.size() != before) q->posted_changed();
    }
    posted_from_[n].store(0, std::memory_order_relaxed);
    for (MsgOp* op : receives) actions.complete.emplace_back(op, status);
    if (ring_backlog_ != nullptr) {
      RingBacklog& b = ring_backlog_[n];
      b.lock.lock();
      b.lost = status;
      uint32_t count = 0;
      for (MsgOp* op = b.head; op != nullptr; op = op->next, ++count) {
        // A backlogged RTS is also announced: it completes from there.
        if (op->nbytes <= HostRings::kMaxBytes) actions.complete.emplace_back(op, status);
      }
      b.head = b.tail = nullptr;
      b.lock.unlock();
      ring_backlogged_.fetch_sub(count, std::memory_order_acq_rel);
      // Streams: queued sends and receives complete now; the ones being
      // copied complete when their copier next looks (advance_out / _in).
      uint32_t ended = 0;
      StreamOut& out = streams_out_[n];
      out.lock.lock();
      out.lost.store(status, std::memory_order_release);
      for (MsgOp* op : out.announced) actions.complete.emplace_back(op, status);
      for (auto& [op, chunk] : out.granted) actions.complete.emplace_back(op, status);
      ended += static_cast<uint32_t>(out.announced.size() + out.granted.size());
      out.announced.clear();
      out.granted.clear();
      out.splits.clear();
      out.lock.unlock();
      StreamIn& in = streams_in_[n];
      in.lock.lock();
      in.lost.store(status, std::memory_order_release);
      for (const StreamIn::Matched& m : in.waiting) {
        if (m.op != nullptr) actions.complete.emplace_back(m.op, status);
      }
      ended += static_cast<uint32_t>(in.waiting.size());
      in.accepted.fetch_sub(static_cast<uint32_t>(in.waiting.size()), std::memory_order_relaxed);
      in.waiting.clear();
      in.lock.unlock();
      streams_busy_.fetch_sub(ended, std::memory_order_acq_rel);
    }
  }
  run(actions);
}

void OfiTransport::fail_all(int status) {
  for (uint32_t n = 0; n < nodes_; ++n) {
    if (n != node_) fail_node(n, status);
  }
}

bool OfiTransport::quiesce(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    Actions actions;
    bool idle;
    if (rings_ != nullptr) {
      poll_rings();  // CTS and FIN answers
      flush_ring_backlogs();
      advance_streams();
    }
    {
      std::lock_guard<SpinLock> guard(lock_);
      poll_cq(&actions);
      idle = sends_in_flight_ == 0 && ring_backlogged_.load(std::memory_order_acquire) == 0 &&
             streams_busy_.load(std::memory_order_acquire) == 0;
      for (auto& p : peers_) idle &= p.waiting.empty() || p.lost != 0;
    }
    run(actions);
    if (idle) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
}

}  // namespace carflow
