// transports/ofi/host_rings.h within one process: two nodes' segments, each
// mapped by both. A ring takes exactly kSlots one-slot messages before it
// reports full, frees slots as the consumer takes them, and hands back every
// payload (inline ones of up to kInline bytes, multi-slot ones) intact and
// in order; take_next takes only the next message and only the receive's
// own; the owner check of direct reads recognises this process.
#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
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

bool take_all(void*, uint32_t, uint32_t, const MsgKey&, uint32_t) { return true; }

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

TEST_CASE("direct reads: the owner check knows this process and its pid") {
  Pair p;
  CHECK(p.node[0]->pid_of(1) == getpid());
  CHECK(p.node[0]->reads_owner(1));
  CHECK(p.node[1]->reads_owner(0));
}

}  // namespace
}  // namespace carflow
