// Records reused instead of allocated per call: the state of a nonblocking
// MPI collective lives from its start on one thread (MPI_Init's) to the
// moment MPI frees its request, which may be on any thread under
// MPI_THREAD_MULTIPLE. The owner thread takes and gives back through a
// plain list; other threads give back through a lock-free stack that the
// owner, its only reader, empties whole when its list runs dry (one reader
// taking everything at once: no ABA). Records are made once and go back to
// the heap only with the pool, so once it holds as many as were ever live
// at once, a call allocates nothing and builds nothing.
#ifndef CARFLOW_API_MPI_RECORD_POOL_H
#define CARFLOW_API_MPI_RECORD_POOL_H

#include <pthread.h>

#include <atomic>
#include <memory>
#include <vector>

namespace carflow::mpi {

template <typename T>
class RecordPool {
 public:
  RecordPool() = default;
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;

  // The one thread that takes; give_back from it skips the atomic stack.
  void set_owner(pthread_t owner) {
    owner_ = owner;
    has_owner_ = true;
  }

  // A record as its last user gave it back, or a new default-made one:
  // records are made once and reused, never ended before the pool, so the
  // user leaves each one ready for the next. Owner thread only.
  T* take() {
    if (free_ == nullptr) free_ = returned_.exchange(nullptr, std::memory_order_acquire);
    if (free_ == nullptr) {
      slots_.push_back(std::make_unique<Slot>());
      free_ = slots_.back().get();
    }
    Slot* slot = free_;
    free_ = slot->next;
    return slot;
  }

  // A record of take's, for reuse. Any thread.
  void give_back(T* record) {
    Slot* slot = static_cast<Slot*>(record);
    if (has_owner_ && pthread_equal(pthread_self(), owner_)) {
      slot->next = free_;
      free_ = slot;
      return;
    }
    Slot* head = returned_.load(std::memory_order_relaxed);
    do {
      slot->next = head;
    } while (!returned_.compare_exchange_weak(head, slot, std::memory_order_release, std::memory_order_relaxed));
  }

  // Records made so far (taken or free): the most ever taken at once.
  size_t capacity() const { return slots_.size(); }

 private:
  struct Slot final : T {
    Slot* next = nullptr;  // while free
  };
  Slot* free_ = nullptr;                  // the owner's
  std::atomic<Slot*> returned_{nullptr};  // given back by other threads
  std::vector<std::unique_ptr<Slot>> slots_;
  pthread_t owner_{};
  bool has_owner_ = false;
};

}  // namespace carflow::mpi

#endif  // CARFLOW_API_MPI_RECORD_POOL_H
