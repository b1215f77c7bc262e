// The MPI layer's record pool on its own: records reused in LIFO order on
// the owner thread, given back from other threads while the owner takes,
// every record ended exactly once, and no more records made than were ever
// live at once.
#include <doctest/doctest.h>

#include <pthread.h>

#include <atomic>
#include <thread>
#include <vector>

#include "api/mpi/record_pool.h"

namespace carflow::mpi {
namespace {

// Counts the records alive, so a record ended twice or never shows.
struct Record {
  explicit Record(std::atomic<int>* alive, int value) : alive(alive), value(value) { ++*alive; }
  ~Record() { --*alive; }
  std::atomic<int>* alive;
  int value;
};

TEST_CASE("a record given back on the owner thread is the next one taken") {
  RecordPool<Record> pool;
  pool.set_owner(pthread_self());
  std::atomic<int> alive{0};
  Record* a = pool.take(&alive, 1);
  Record* b = pool.take(&alive, 2);
  CHECK(a != b);
  CHECK(alive == 2);
  pool.give_back(a);
  CHECK(alive == 1);
  Record* c = pool.take(&alive, 3);
  CHECK(c == a);
  CHECK(c->value == 3);
  pool.give_back(b);
  pool.give_back(c);
  CHECK(alive == 0);
  CHECK(pool.capacity() == 2);
}

TEST_CASE("records given back by other threads return to the owner, each ended once") {
  for (int givers : {1, 3}) {
    CAPTURE(givers);
    RecordPool<Record> pool;
    pool.set_owner(pthread_self());
    std::atomic<int> alive{0};
    constexpr int kRecords = 20000;
    constexpr int kLive = 64;  // the owner keeps at most this many out
    std::atomic<int> given{0};
    std::vector<std::atomic<Record*>> handed(kRecords);
    std::vector<std::thread> threads;
    // Giver g gives back records g, g + givers, ... as the owner hands them over.
    for (int g = 0; g < givers; ++g) {
      threads.emplace_back([&, g] {
        for (int i = g; i < kRecords; i += givers) {
          Record* r = nullptr;
          while ((r = handed[i].load(std::memory_order_acquire)) == nullptr) std::this_thread::yield();
          if (r->value != i) FAIL_CHECK("record " << i << " holds " << r->value);
          pool.give_back(r);
          given.fetch_add(1, std::memory_order_release);
        }
      });
    }
    for (int i = 0; i < kRecords; ++i) {
      while (i - given.load(std::memory_order_acquire) >= kLive) std::this_thread::yield();
      handed[i].store(pool.take(&alive, i), std::memory_order_release);
    }
    for (std::thread& t : threads) t.join();
    CHECK(alive == 0);
    CHECK(given == kRecords);
    CHECK(pool.capacity() <= static_cast<size_t>(kLive));
    // Every record came back: as many can be taken again without a new one.
    const size_t made = pool.capacity();
    std::vector<Record*> again;
    for (size_t i = 0; i < made; ++i) again.push_back(pool.take(&alive, -1));
    CHECK(pool.capacity() == made);
    for (Record* r : again) pool.give_back(r);
    CHECK(alive == 0);
  }
}

}  // namespace
}  // namespace carflow::mpi
