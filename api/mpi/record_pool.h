// Records reused instead of allocated per call: the state of a nonblocking
// MPI collective lives from its start on one thread (MPI_Init's) to the
// moment MPI frees its request, which may be on any thread under
// MPI_THREAD_MULTIPLE. The owner thread takes and gives back through a
// plain list; other threads give back through a lock-free stack that the
// owner, its only reader, empties whole when its list runs dry (one reader
// taking everything at once: no ABA). Memory goes back to the heap only
// with the pool, so once it holds as many records as were ever live at
// once, a call allocates nothing.
#ifndef CARFLOW_API_MPI_RECORD_POOL_H
#define CARFLOW_API_MPI_RECORD_POOL_H

#include <pthread.h>

#include <atomic>
#include <memory>
#include <new>
#include <utility>
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

  // A record made from args. Owner thread only.
  template <typename... A>
  T* take(A&&... args) {
    if (free_ == nullptr) free_ = returned_.exchange(nullptr, std::memory_order_acquire);
    if (free_ == nullptr) {
      slots_.push_back(std::make_unique<Slot>());
      free_ = slots_.back().get();
    }
    Slot* slot = free_;
    free_ = slot->next;
    return new (&slot->record) T(std::forward<A>(args)...);
  }

  // Ends a record of take's. Any thread.
  void give_back(T* record) {
    record->~T();
    // A union and its members share an address.
    Slot* slot = reinterpret_cast<Slot*>(record);
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

  // Records made so far (live or free): the most ever live at once.
  size_t capacity() const { return slots_.size(); }

 private:
  union Slot {
    Slot* next;  // while free
    T record;    // while taken
    Slot() : next(nullptr) {}
    ~Slot() {}  // a record still taken when the pool goes is not ended
  };
  Slot* free_ = nullptr;                // the owner's
  std::atomic<Slot*> returned_{nullptr};  // given back by other threads
  std::vector<std::unique_ptr<Slot>> slots_;
  pthread_t owner_{};
  bool has_owner_ = false;
};

}  // namespace carflow::mpi

#endif  // CARFLOW_API_MPI_RECORD_POOL_H
