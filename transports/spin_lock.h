// A test-and-test-and-set lock for critical sections of a few dozen
// instructions (queue links), where a futex-based mutex costs more than the
// section itself.
#pragma once

#include <atomic>
#include <thread>

namespace carflow {

// One spin-wait step: tells the core we are waiting (x86 PAUSE).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

class SpinLock {
 public:
  void lock() {
    for (int spins = 0;; ++spins) {
      if (!flag_.exchange(true, std::memory_order_acquire)) return;
      while (flag_.load(std::memory_order_relaxed)) {
        if (++spins > 64) std::this_thread::yield();  // oversubscribed cores
      }
    }
  }
  bool try_lock() { return !flag_.exchange(true, std::memory_order_acquire); }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace carflow
