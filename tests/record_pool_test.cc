// The MPI layer's record pool on its own: records reused in LIFO order on
// the owner thread; given back from other threads while the owner takes,
// each arriving with what its last user wrote; and no more records made
// than were ever taken at once.
#include <doctest/doctest.h>

#include <pthread.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/mpi/record_pool.h"

namespace carflow::mpi {
namespace {

struct Record {
  int value = -1;
};

TEST_CASE("a record given back on the owner thread is the next one taken, as it was left") {
  RecordPool<Record> pool;
  pool.set_owner(pthread_self());
  Record* a = pool.take();
  Record* b = pool.take();
  CHECK(a != b);
  CHECK(a->value == -1);
  a->value = 1;
  pool.give_back(a);
  Record* c = pool.take();
  CHECK(c == a);
  CHECK(c->value == 1);
  pool.give_back(b);
  pool.give_back(c);
  CHECK(pool.capacity() == 2);
}

TEST_CASE("records given back by other threads return to the owner") {
  for (int givers : {1, 3}) {
    CAPTURE(givers);
    RecordPool<Record> pool;
    pool.set_owner(pthread_self());
    constexpr int kRecords = 20000;
    constexpr int kLive = 64;  // the owner keeps at most this many out
    std::atomic<int> given{0}, wrong{0};
    std::vector<std::atomic<Record*>> handed(kRecords);
    std::vector<std::thread> threads;
    // Giver g gives back records g, g + givers, ... as the owner hands them
    // over, after checking and rewriting what the owner wrote.
    for (int g = 0; g < givers; ++g) {
      threads.emplace_back([&, g] {
        for (int i = g; i < kRecords; i += givers) {
          Record* r = nullptr;
          while ((r = handed[i].load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
          if (r->value != i) wrong.fetch_add(1);
          r->value = -2;
          pool.give_back(r);
          given.fetch_add(1, std::memory_order_release);
        }
      });
    }
    for (int i = 0; i < kRecords; ++i) {
      while (i - given.load(std::memory_order_acquire) >= kLive) std::this_thread::yield();
      Record* r = pool.take();
      if (r->value != -1 && r->value != -2) wrong.fetch_add(1);
      r->value = i;
      handed[i].store(r, std::memory_order_release);
    }
    for (std::thread& t : threads) t.join();
    CHECK(wrong == 0);
    CHECK(given == kRecords);
    CHECK(pool.capacity() <= static_cast<size_t>(kLive));
    // Every record came back: as many can be taken again without a new one.
    const size_t made = pool.capacity();
    std::vector<Record*> again;
    for (size_t i = 0; i < made; ++i) again.push_back(pool.take());
    CHECK(pool.capacity() == made);
    for (Record* r : again) pool.give_back(r);
  }
}

}  // namespace
}  // namespace carflow::mpi
