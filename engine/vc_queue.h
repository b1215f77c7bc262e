// VcQueue: the ready CARs of one virtual connection (image -> peer), served
// serially (GASNet notes: MPICH communication-agent notes, "for each VC there is a
// posted receive queue and posted send queue").
//
// Whoever claims the queue drains it; a thread that pushes while another
// holds the claim leaves the CAR to that thread. release() followed by a
// re-check closes the window where a push lands just as the holder leaves.
#pragma once

#include <atomic>

#include "engine/schedule.h"
#include "transports/spin_lock.h"

namespace carflow {

class VcQueue {
 public:
  void push(CarState* cs) {
    cs->next_ready = nullptr;
    lock_.lock();
    if (tail_ == nullptr) {
      head_ = cs;
    } else {
      tail_->next_ready = cs;
    }
    tail_ = cs;
    size_.fetch_add(1, std::memory_order_seq_cst);
    lock_.unlock();
  }

  CarState* pop() {
    if (size_.load(std::memory_order_acquire) == 0) return nullptr;
    lock_.lock();
    CarState* cs = head_;
    if (cs != nullptr) {
      head_ = cs->next_ready;
      if (head_ == nullptr) tail_ = nullptr;
      size_.fetch_sub(1, std::memory_order_relaxed);
    }
    lock_.unlock();
    return cs;
  }

  bool try_claim() { return !busy_.exchange(true, std::memory_order_seq_cst); }
  void release() { busy_.store(false, std::memory_order_seq_cst); }
  bool empty() const { return size_.load(std::memory_order_seq_cst) == 0; }

 private:
  SpinLock lock_;
  CarState* head_ = nullptr;
  CarState* tail_ = nullptr;
  std::atomic<uint32_t> size_{0};
  std::atomic<bool> busy_{false};
};

}  // namespace carflow
