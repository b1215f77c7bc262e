// transports/ofi/host_rings.h within one process: two nodes' segments, each
// mapped by both. A ring takes exactly kSlots one-slot messages before it
// reports full, frees slots as the consumer takes them, and hands back every
// payload (inline ones of up to kInline bytes, multi-slot ones) intact and
// in order; push_one carries every one-slot size intact; take_next takes
// only the next message and only the receive's own, and take_next_in_place
// hands a one-slot payload over where it lies; take_grant takes only a CTS
// at a ring's head; the owner check of direct reads recognises this process;
// a receiver asleep in wait() is woken by every message pushed to it.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/ofi/host_rings.h"

namespace carflow {
namespace {

struct Pair {
  std::unique_ptr<HostRings> node[2];
  Pair() {
    std::string names[2], error;
    for (uint32_t n = 0; n < 2; ++n) {
      node[n] = HostRings::create(n, 2, &names[n], &error);
      REQUIRE_MESSAGE(node[n] != nullptr, error);
    }
    for (uint32_t n = 0; n < 2; ++n) REQUIRE_MESSAGE(node[n]->attach({names[0], names[1]}, &error), error);
    for (uint32_t n = 0; n < 2; ++n) node[n]->unlink();
  }
};

bool take_all(void*, uint32_t, uint32_t, const MsgKey&, uint32_t, bool, bool) { return true; }

// Bytes of message i: its index and a pattern, `n` long.
std::vector<char> payload(uint32_t i, size_t n) {
  std::vector<char> b(n);
  for (size_t k = 0; k < n; ++k) b[k] = static_cast<char>(i * 31 + k);
  return b;
}

TEST_CASE("a host ring holds kSlots messages, frees what the consumer took, and keeps every payload and its order") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(16);
  uint32_t sent = 0, got = 0;
  // Sizes cycle through empty, inline, one full slot: all one slot each.
  const size_t sizes[] = {0, 8, HostRings::kInline, HostRings::kInline + 1, HostRings::kPayload};
  auto size_of = [&](uint32_t i) { return sizes[i % 5]; };
  auto push = [&](uint32_t i) {
    const std::vector<char> b = payload(i, size_of(i));
    const char none = 0;  // an empty message still passes a valid pointer
    return p.node[1]->push(0, 1, 0, MsgKey{0, i, 7}, b.empty() ? &none : b.data(), b.size(), 0, i);
  };
  auto drain = [&](uint32_t max) {
    uint32_t n = p.node[0]->poll(batch.get(), max, UINT64_MAX, &take_all, nullptr);
    for (uint32_t k = 0; k < n; ++k, ++got) {
      const HostRings::Message& m = batch[k];
      CHECK(m.type == HostRings::kData);
      CHECK(m.key.seq == got);  // in order
      CHECK(m.digest == got);
      REQUIRE(m.nbytes == size_of(got));
      const std::vector<char> want = payload(got, size_of(got));
      CHECK((want.empty() || std::memcmp(m.data, want.data(), want.size()) == 0));
    }
    return n;
  };
  // Full after exactly kSlots, with nothing taken.
  while (push(sent)) ++sent;
  CHECK(sent == HostRings::kSlots);
  // Taking some frees exactly that many.
  CHECK(drain(10) == 10);
  for (int k = 0; k < 10; ++k) CHECK(push(sent++));
  CHECK_FALSE(push(sent));
  // Everything comes out, and the ring goes round several times more.
  for (int round = 0; round < 5; ++round) {
    while (got < sent) drain(16);
    while (push(sent)) ++sent;
  }
  while (got < sent) drain(16);
  CHECK(got == sent);
  CHECK(sent >= 6 * HostRings::kSlots);
}

TEST_CASE("a multi-slot message takes its slots at once and arrives whole") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(16);
  const std::vector<char> big = payload(3, HostRings::kMaxBytes);
  const uint32_t slots = HostRings::kMaxBytes / HostRings::kPayload;
  uint32_t fits = 0;
  while (p.node[1]->push(0, 1, 0, MsgKey{0, fits, 1}, big.data(), big.size(), 0, 0)) ++fits;
  CHECK(fits == HostRings::kSlots / slots);
  REQUIRE(p.node[0]->poll(batch.get(), 1, UINT64_MAX, &take_all, nullptr) == 1);
  CHECK(batch[0].nbytes == HostRings::kMaxBytes);
  CHECK(std::memcmp(batch[0].data, big.data(), big.size()) == 0);
  CHECK(p.node[1]->push(0, 1, 0, MsgKey{0, fits, 1}, big.data(), big.size(), 0, 0));  // its slots are free again
}

TEST_CASE("take_next takes only the next message, and only when it is the receive's") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(4);
  bool sized = false;
  int32_t status = 0;
  uint64_t digest = 0;
  std::vector<char> into(HostRings::kMaxBytes, 0);
  // Nothing there.
  CHECK_FALSE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 0, 1}, into.data(), 8, &sized, &status, &digest));
  // The next message is someone else's: left for the poll.
  const std::vector<char> small = payload(1, 8), big = payload(2, 3 * HostRings::kPayload + 5);
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 1, 1}, small.data(), small.size(), 0, 11));
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 2, 1}, big.data(), big.size(), 0, 22));
  CHECK_FALSE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 2, 1}, into.data(), big.size(), &sized, &status, &digest));
  CHECK_FALSE(p.node[0]->take_next(1, 2, 0, MsgKey{0, 1, 1}, into.data(), 8, &sized, &status, &digest));  // src
  CHECK_FALSE(p.node[0]->take_next(1, 1, 3, MsgKey{0, 1, 1}, into.data(), 8, &sized, &status, &digest));  // dst
  CHECK(p.node[0]->taken_next() == 0);
  // Its own: an inline payload, then a multi-slot one, each whole.
  REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 1, 1}, into.data(), 8, &sized, &status, &digest));
  CHECK((sized && status == 0 && digest == 11));
  CHECK(std::memcmp(into.data(), small.data(), small.size()) == 0);
  REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 2, 1}, into.data(), big.size(), &sized, &status, &digest));
  CHECK((sized && status == 0 && digest == 22));
  CHECK(std::memcmp(into.data(), big.data(), big.size()) == 0);
  CHECK(p.node[0]->taken_next() == 2);
  // A size that differs, and a failed sender: taken, nothing written.
  std::fill(into.begin(), into.end(), 0);
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 3, 1}, small.data(), small.size(), 0, 0));
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 4, 1}, small.data(), small.size(), -7, 33));
  REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 3, 1}, into.data(), 16, &sized, &status, &digest));
  CHECK((!sized && status == 0));
  REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 4, 1}, into.data(), 8, &sized, &status, &digest));
  CHECK((sized && status == -7 && digest == 33));
  CHECK(std::all_of(into.begin(), into.end(), [](char c) { return c == 0; }));
  // The ring is empty and its slots are free: the poll finds nothing, and a
  // full ring's worth fits again.
  CHECK(p.node[0]->poll(batch.get(), 4, UINT64_MAX, &take_all, nullptr) == 0);
  uint32_t fits = 0;
  while (p.node[1]->push(0, 1, 0, MsgKey{0, 100 + fits, 1}, small.data(), small.size(), 0, 0)) ++fits;
  CHECK(fits == HostRings::kSlots);
}

TEST_CASE("take_grant takes only a grant (CTS or split) at the head of the ring, with its fields") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(4);
  HostRings::Grant g;
  CHECK_FALSE(p.node[0]->take_grant(1, &g));  // nothing there
  CHECK_FALSE(p.node[0]->take_grant(0, &g));  // its own node: no ring
  CHECK_FALSE(p.node[0]->take_grant(2, &g));  // no such node
  // A data message and a FIN ahead of a CTS: none taken, all left in order.
  const std::vector<char> small = payload(1, 8);
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 1, 1}, small.data(), small.size(), 0, 0));
  REQUIRE(p.node[1]->push_control(0, HostRings::kFin, 1, 0, MsgKey{0, 2, 1}, 0, 0, 77, 0));
  REQUIRE(p.node[1]->push_control(0, HostRings::kCts, 1, 0, MsgKey{0, 3, 1}, 0, 0, 88, 4096));
  REQUIRE(p.node[1]->push_control(0, HostRings::kSplit, 1, 0, MsgKey{0, 4, 1}, 5, 0, 99, 131072, 0x123000));
  CHECK_FALSE(p.node[0]->take_grant(1, &g));
  REQUIRE(p.node[0]->poll(batch.get(), 1, UINT64_MAX, &take_all, nullptr) == 1);
  CHECK((batch[0].type == HostRings::kData && batch[0].key.seq == 1));
  CHECK_FALSE(p.node[0]->take_grant(1, &g));  // the FIN
  REQUIRE(p.node[0]->poll(batch.get(), 1, UINT64_MAX, &take_all, nullptr) == 1);
  CHECK((batch[0].type == HostRings::kFin && batch[0].cookie == 77));
  // The CTS and the split grant: taken with their fields, and gone from the ring.
  REQUIRE(p.node[0]->take_grant(1, &g));
  CHECK((g.type == HostRings::kCts && g.cookie == 88 && g.size == 4096));
  REQUIRE(p.node[0]->take_grant(1, &g));
  CHECK((g.type == HostRings::kSplit && g.cookie == 99 && g.size == 131072 && g.addr == 0x123000 && g.status == 5));
  CHECK(p.node[0]->poll(batch.get(), 4, UINT64_MAX, &take_all, nullptr) == 0);
  // Their slots are free again: a full ring's worth fits.
  uint32_t fits = 0;
  while (p.node[1]->push(0, 1, 0, MsgKey{0, 100 + fits, 1}, small.data(), small.size(), 0, 0)) ++fits;
  CHECK(fits == HostRings::kSlots);
}

TEST_CASE("a polled split grant carries the receiver's address and the generation") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(4);
  REQUIRE(p.node[1]->push_control(0, HostRings::kSplit, 1, 0, MsgKey{0, 4, 1}, 7, 0, 99, 131072, 0x456000));
  REQUIRE(p.node[0]->poll(batch.get(), 4, UINT64_MAX, &take_all, nullptr) == 1);
  CHECK((batch[0].type == HostRings::kSplit && batch[0].cookie == 99 && batch[0].size == 131072 &&
         batch[0].addr == 0x456000 && batch[0].status == 7 && batch[0].nbytes == 0));
}

TEST_CASE("split copies: the receiver takes pieces from the front, the sender from the back, each once") {
  Pair p;
  // Node 0 receives from node 1: the word lives in node 0's segment.
  HostRings& rx = *p.node[0];
  HostRings& tx = *p.node[1];
  int64_t returned = 0;
  rx.split_begin(1, 3, 5);
  CHECK(tx.split_take_back(0, 2) == -1);  // another generation takes nothing
  CHECK(tx.split_take_back(0, 3) == 4);
  CHECK(rx.split_take_front(1) == 0);
  CHECK(tx.split_take_back(0, 3) == 3);
  CHECK(rx.split_take_front(1) == 1);
  CHECK(rx.split_take_front(1) == 2);
  CHECK(rx.split_take_front(1) == -1);  // they met: nothing left
  CHECK(tx.split_take_back(0, 3) == -1);
  // The sender's two pieces are not finished yet: not settled.
  CHECK_FALSE(rx.split_settled(1, 5, &returned));
  tx.split_done(0, 4, true);
  CHECK_FALSE(rx.split_settled(1, 5, &returned));
  tx.split_done(0, 3, true);
  REQUIRE(rx.split_settled(1, 5, &returned));
  CHECK(returned == -1);
  // The next transfer: a failed write gives its piece back to the receiver.
  rx.split_begin(1, 4, 2);
  CHECK(tx.split_take_back(0, 3) == -1);  // the old generation is over
  CHECK(tx.split_take_back(0, 4) == 1);
  tx.split_done(0, 1, false);
  CHECK(rx.split_take_front(1) == 0);
  REQUIRE(rx.split_settled(1, 2, &returned));
  CHECK(returned == 1);
  // Closed (a failed read): the sender takes nothing more; its piece in
  // flight still has to finish before the copy is settled.
  rx.split_begin(1, 5, 8);
  CHECK(tx.split_take_back(0, 5) == 7);
  CHECK(rx.split_take_front(1) == 0);
  rx.split_close(1);
  CHECK(tx.split_take_back(0, 5) == -1);
  CHECK(rx.split_take_front(1) == -1);
  CHECK_FALSE(rx.split_settled(1, 8, &returned));
  tx.split_done(0, 7, true);
  REQUIRE(rx.split_settled(1, 8, &returned));
  CHECK(returned == -1);
}

TEST_CASE("direct reads: the owner check knows this process and its pid") {
  Pair p;
  CHECK(p.node[0]->pid_of(1) == getpid());
  CHECK(p.node[0]->reads_owner(1));
  CHECK(p.node[1]->reads_owner(0));
}

}  // namespace
}  // namespace carflow

namespace carflow {
namespace {

TEST_CASE("push_one carries every one-slot size intact, to the poll and to take_next") {
  Pair p;
  auto batch = std::make_unique<HostRings::Message[]>(1);
  // Every copy path: inline words and halves and bytes, 16-byte pieces (17-64,
  // two or four), the library copy (65-1024).
  const uint32_t sizes[] = {0, 1, 3, 4, 7, 8, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 100, 1000,
                            HostRings::kPayload};
  std::vector<char> into(HostRings::kPayload + 64);
  uint32_t i = 0;
  for (uint32_t n : sizes) {
    CAPTURE(n);
    const std::vector<char> b = payload(i, n);
    const char none = 0;
    // To the poll.
    REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, i, 2}, n ? b.data() : &none, n, 0, i));
    REQUIRE(p.node[0]->poll(batch.get(), 1, UINT64_MAX, &take_all, nullptr) == 1);
    CHECK(batch[0].nbytes == n);
    CHECK((n == 0 || std::memcmp(batch[0].data, b.data(), n) == 0));
    ++i;
    // To take_next, with a guard byte after the payload that must stay.
    std::fill(into.begin(), into.end(), '#');
    REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, i, 2}, n ? b.data() : &none, n, 0, i));
    bool sized = false;
    int32_t status = 0;
    uint64_t digest = 0;
    REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, i, 2}, into.data(), n, &sized, &status, &digest));
    CHECK((sized && status == 0 && digest == i));
    CHECK((n == 0 || std::memcmp(into.data(), b.data(), n) == 0));
    CHECK(into[n] == '#');
    ++i;
  }
}

struct Seen {
  std::vector<char> bytes;
  int calls = 0;
  bool aligned = true;
};

void record(void* ctx, const char* payload_bytes, uint32_t n) {
  auto* seen = static_cast<Seen*>(ctx);
  seen->bytes.assign(payload_bytes, payload_bytes + n);
  seen->aligned = seen->aligned && reinterpret_cast<uintptr_t>(payload_bytes) % 16 == 0;
  ++seen->calls;
}

TEST_CASE("take_next_in_place hands a one-slot payload over where it lies, and leaves longer messages") {
  Pair p;
  bool sized = false;
  int32_t status = 0;
  uint64_t digest = 0;
  Seen seen;
  // Nothing there; then someone else's message: nothing taken, nothing used.
  CHECK_FALSE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 1, 3}, 8, &sized, &status, &digest, &record, &seen));
  const std::vector<char> small = payload(1, 8), mid = payload(2, 64), big = payload(3, HostRings::kPayload + 1);
  REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, 1, 3}, small.data(), small.size(), 0, 5));
  CHECK_FALSE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 9, 3}, 8, &sized, &status, &digest, &record, &seen));
  CHECK(seen.calls == 0);
  // Its own, inline and in the slot's data: used once each, whole, aligned.
  REQUIRE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 1, 3}, 8, &sized, &status, &digest, &record, &seen));
  CHECK((sized && status == 0 && digest == 5 && seen.calls == 1 && seen.bytes == small));
  REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, 2, 3}, mid.data(), mid.size(), 0, 6));
  REQUIRE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 2, 3}, 64, &sized, &status, &digest, &record, &seen));
  CHECK((sized && status == 0 && digest == 6 && seen.calls == 2 && seen.bytes == mid && seen.aligned));
  // A message of two slots is declined and stays next for take_next.
  REQUIRE(p.node[1]->push(0, 1, 0, MsgKey{0, 3, 3}, big.data(), big.size(), 0, 7));
  CHECK_FALSE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 3, 3}, big.size(), &sized, &status, &digest,
                                            &record, &seen));
  CHECK(seen.calls == 2);
  std::vector<char> into(big.size());
  REQUIRE(p.node[0]->take_next(1, 1, 0, MsgKey{0, 3, 3}, into.data(), into.size(), &sized, &status, &digest));
  CHECK((sized && into == big));
  // A size that differs, and a failed sender: taken, never used.
  REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, 4, 3}, small.data(), small.size(), 0, 0));
  REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, 5, 3}, small.data(), small.size(), -7, 33));
  REQUIRE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 4, 3}, 16, &sized, &status, &digest, &record, &seen));
  CHECK((!sized && status == 0));
  REQUIRE(p.node[0]->take_next_in_place(1, 1, 0, MsgKey{0, 5, 3}, 8, &sized, &status, &digest, &record, &seen));
  CHECK((sized && status == -7 && digest == 33));
  CHECK(seen.calls == 2);
  CHECK(p.node[0]->taken_next() == 5);
}

TEST_CASE("a receiver asleep in wait() is woken by every message: none sleeps out the timeout") {
  // push_one publishes, then looks for sleepers; wait() announces a
  // sleeper, then looks for messages. Whatever fence publish_seq uses here
  // (none, where membarrier pairs with the sleeper's), a message published
  // while the receiver goes to sleep must wake it. The sender waits for each
  // message to be taken and pushes the next at once, while the receiver is
  // on its way back to sleep: the race the protocol must win every time.
  Pair p;
  // A wait that sleeps its whole timeout while a pushed message waits is a
  // lost wake-up; one that times out with nothing pushed (the sender not
  // scheduled, on a loaded machine) is not.
  constexpr uint32_t kMessages = 20000, kGiveUp = 3;
  constexpr int kTimeoutMs = 2000;
  std::atomic<uint32_t> taken{0}, pushed{0}, timeouts{0};
  std::thread receiver([&] {
    auto batch = std::make_unique<HostRings::Message[]>(4);
    uint32_t got = 0;
    while (got < kMessages && timeouts.load() < kGiveUp) {
      const uint32_t n = p.node[0]->poll(batch.get(), 4, UINT64_MAX, &take_all, nullptr);
      if (n > 0) {
        got += n;
        taken.store(got, std::memory_order_release);
      } else if (!p.node[0]->wait(kTimeoutMs) && pushed.load() > got) {
        timeouts.fetch_add(1);
      }
    }
  });
  const char byte = 1;
  for (uint32_t i = 0; i < kMessages && timeouts.load() < kGiveUp; ++i) {
    REQUIRE(p.node[1]->push_one(0, 1, 0, MsgKey{0, i, 1}, &byte, 1, 0, 0));
    pushed.store(i + 1);
    while (taken.load(std::memory_order_acquire) <= i && timeouts.load() < kGiveUp) {
    }
  }
  receiver.join();
  CHECK(taken.load() == kMessages);
  CHECK(timeouts.load() == 0);
}

}  // namespace
}  // namespace carflow
