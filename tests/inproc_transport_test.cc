// The inproc transport on its own: ring handover and its fallbacks, and
// eager flow control.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include "transports/inproc/inproc_transport.h"

namespace carflow {
namespace {

struct NoHooks : TransportHooks {
  void deferred_work(uint32_t, uint32_t, bool) override {}
};

struct CountingHooks : TransportHooks {
  // Atomic: the threaded cases call the hooks from several threads.
  std::atomic<int> waiting{0};   // message_waiting calls
  std::atomic<int> app_only{0};  // deferred_work calls for an application thread
  void deferred_work(uint32_t, uint32_t, bool app_thread_only) override { app_only += app_thread_only; }
  void message_waiting(uint32_t) override { ++waiting; }
};

void fill(MsgOp& op, uint32_t self, uint32_t peer, uint32_t tag, void* buf, uint64_t nbytes, MsgCompletion done,
          void* owner) {
  op.self = self;
  op.peer = peer;
  op.key = MsgKey{0, 0, tag};
  op.buf = buf;
  op.nbytes = nbytes;
  op.on_complete = done;
  op.owner = owner;
}

struct Op {
  MsgOp op;
  int completions = 0;
  int status = 1;
  static void done(MsgOp* m, int status) {
    Op* self = static_cast<Op*>(m->owner);
    ++self->completions;
    self->status = status;
  }
  Op(uint32_t self_image, uint32_t peer, uint32_t tag, void* buf, uint64_t nbytes) {
    fill(op, self_image, peer, tag, buf, nbytes, &Op::done, this);
  }
};

// Op for the threaded cases: its completion is seen by other threads.
struct Tracked {
  MsgOp op;
  std::atomic<int> completions{0};
  std::atomic<int> status{1};
  static void done(MsgOp* m, int status) {
    auto* self = static_cast<Tracked*>(m->owner);
    self->status.store(status);
    self->completions.fetch_add(1);
  }
  void init(uint32_t me, uint32_t peer, uint32_t tag, void* buf, uint64_t nbytes) {
    fill(op, me, peer, tag, buf, nbytes, &Tracked::done, this);
  }
};

// Sends values[i] (8 bytes, tag i) from image 0 to image 1, one by one,
// calling after(send) after each.
template <typename After>
void send_each(InprocTransport& t, std::vector<uint64_t>& values, std::deque<Op>& sends, After after) {
  for (uint32_t i = 0; i < values.size(); ++i) {
    sends.emplace_back(0, 1, i, &values[i], 8);
    t.send(&sends.back().op);
    after(sends.back());
  }
}

TEST_CASE("a small message goes into the receiver's ring and a later receive takes it from the slot") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  uint64_t value = 0x1122334455667788ull, got = 0;
  Op send(0, 1, 7, &value, 8);
  t.send(&send.op);
  CHECK(send.completions == 1);  // the slot holds a copy: the SEND is done
  CHECK(send.status == 0);
  CHECK(hooks.waiting == 1);  // the receiver was told
  CHECK(t.messages_waiting(1));
  CHECK_FALSE(t.messages_waiting(0));
  CHECK(t.unexpected_count(1) == 1);
  Op recv(1, 0, 7, &got, 8);
  t.recv(&recv.op);
  CHECK(recv.completions == 1);
  CHECK(recv.status == 0);
  CHECK(got == value);
  CHECK(t.unexpected_count(1) == 0);
  CHECK_FALSE(t.messages_waiting(1));
  const TransportStats stats = t.stats();
  CHECK(stats.fastbox == 1);
  CHECK(stats.messages == 1);
  CHECK(stats.unexpected == 1);
}

TEST_CASE("send_now and recv_now move a ring message with no message op") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  REQUIRE(t.takes_now());
  uint64_t value = 99, got = 0;
  CHECK(t.send_now(0, 1, MsgKey{0, 0, 4}, &value, 8, 0));
  int status = 1;
  CHECK_FALSE(t.recv_now(1, 0, MsgKey{0, 0, 5}, &got, 8, &status));  // another key: not taken
  CHECK(t.recv_now(1, 0, MsgKey{0, 0, 4}, &got, 8, &status));
  CHECK(status == 0);
  CHECK(got == 99);
  // A message of another size completes its receive with the mismatch status, nothing copied.
  CHECK(t.send_now(0, 1, MsgKey{0, 0, 6}, &value, 8, 0));
  uint32_t small = 0;
  CHECK(t.recv_now(1, 0, MsgKey{0, 0, 6}, &small, 4, &status));
  CHECK(status == -7);
  CHECK(small == 0);
  // Rings off: never taken at once.
  InprocTransport off(2, 8192, 0, &hooks);
  CHECK_FALSE(off.takes_now());
}

TEST_CASE("a ring message is delivered to an already posted receive when the receiver polls") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  std::vector<uint8_t> data(1024, 0xab), got(1024, 0);
  Op recv(1, 0, 3, got.data(), 1024);
  t.recv(&recv.op);
  CHECK(recv.completions == 0);
  Op send(0, 1, 3, data.data(), 1024);
  t.send(&send.op);
  CHECK(send.completions == 1);
  CHECK(recv.completions == 0);  // waiting in the ring for the receiver
  CHECK(t.messages_waiting(1));
  CHECK(t.progress_all(1, true));
  CHECK(recv.completions == 1);
  CHECK(recv.status == 0);
  CHECK(got == data);
  CHECK(t.stats().direct == 1);
  CHECK_FALSE(t.messages_waiting(1));
}

TEST_CASE("the rings of every pair of images stay within the memory budget: many images get smaller slots") {
  CountingHooks hooks;
  CHECK(InprocTransport(2, 8192, 1024, &hooks).ring_bytes() == 1024);
  CHECK(InprocTransport(124, 8192, 1024, &hooks).ring_bytes() == 1024);
  CHECK(InprocTransport(2, 512, 1024, &hooks).ring_bytes() == 512);  // never above the eager threshold
  // Slots above 1 KiB only within the smaller budget: 8 KiB up to 16
  // images, less from there, never below 1 KiB up to 128 images.
  CHECK(InprocTransport(2, 8192, 8192, &hooks).ring_bytes() == 8192);
  CHECK(InprocTransport(16, 8192, 8192, &hooks).ring_bytes() == 8192);
  const uint64_t at32 = InprocTransport(32, 8192, 8192, &hooks).ring_bytes();
  CHECK(at32 > 1024);
  CHECK(at32 < 8192);
  CHECK(uint64_t{32} * 31 * InprocTransport::kRingSlots * (at32 + 48) <= InprocTransport::kRingLargeBudget);
  CHECK(InprocTransport(64, 8192, 8192, &hooks).ring_bytes() == 1024);
  CHECK(InprocTransport(256, 8192, 8192, &hooks).ring_bytes() == 208);
  InprocTransport t(256, 8192, 1024, &hooks);
  // 256 * 255 pairs * 16 slots of 256 bytes (a 48-byte header, 208 of data) = 255 MiB.
  REQUIRE(t.ring_bytes() == 208);
  CHECK(uint64_t{256} * 255 * InprocTransport::kRingSlots * 256 <= InprocTransport::kRingBudget);
  tls_on_app_thread = true;
  std::vector<uint8_t> fits(208, 3), over(209, 4), got_fits(208), got_over(209);
  Op s1(0, 255, 1, fits.data(), 208), s2(0, 255, 2, over.data(), 209);
  t.send(&s1.op);
  t.send(&s2.op);
  CHECK(hooks.waiting == 1);  // only the first went through the ring
  Op r1(255, 0, 1, got_fits.data(), 208), r2(255, 0, 2, got_over.data(), 209);
  t.recv(&r1.op);
  t.recv(&r2.op);
  CHECK(got_fits == fits);
  CHECK(got_over == over);
  CHECK(t.stats().fastbox == 1);
}

TEST_CASE("a message of kDirectBytes or more to a posted receive skips the ring: one copy, done at once") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 8192, &hooks);
  tls_on_app_thread = true;
  const uint64_t n = InprocTransport::kDirectBytes;
  std::vector<uint8_t> data(n), got(n, 0);
  for (uint64_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 13 + 5);
  Op recv(1, 0, 3, got.data(), n);
  t.recv(&recv.op);
  Op send(0, 1, 3, data.data(), n);
  t.send(&send.op);
  // The sender copied into the receive's buffer: both sides are done, no poll.
  CHECK(send.completions == 1);
  CHECK(send.status == 0);
  CHECK(recv.completions == 1);
  CHECK(recv.status == 0);
  CHECK(got == data);
  CHECK(t.stats().fastbox == 0);
  CHECK(t.stats().direct == 1);
  CHECK_FALSE(t.messages_waiting(1));
  // One byte less, or no receive posted: the ring, as before.
  std::vector<uint8_t> small(n - 1, 7), got_small(n - 1, 0);
  Op recv_small(1, 0, 4, got_small.data(), n - 1);
  t.recv(&recv_small.op);
  Op send_small(0, 1, 4, small.data(), n - 1);
  t.send(&send_small.op);
  CHECK(recv_small.completions == 0);  // in the ring until the receiver polls
  CHECK(t.messages_waiting(1));
  CHECK(t.progress_all(1, true));
  CHECK(got_small == small);
  CHECK(t.stats().fastbox == 1);
  Op send_first(0, 1, 5, data.data(), n);
  t.send(&send_first.op);
  CHECK(send_first.completions == 1);
  CHECK(t.messages_waiting(1));
  std::fill(got.begin(), got.end(), 0);
  Op recv_later(1, 0, 5, got.data(), n);
  t.recv(&recv_later.op);
  CHECK(recv_later.status == 0);
  CHECK(got == data);
  CHECK(t.stats().fastbox == 2);
  // A receive posted for one sender does not send another's messages past the ring.
  InprocTransport three(3, 8192, 8192, &hooks);
  Op from_two(1, 2, 6, got.data(), n);
  three.recv(&from_two.op);
  Op send_zero(0, 1, 6, data.data(), n);
  three.send(&send_zero.op);
  CHECK(send_zero.completions == 1);
  CHECK(three.messages_waiting(1));  // in the ring
  CHECK(three.stats().direct == 0);
  CHECK(from_two.completions == 0);
}

TEST_CASE("with 8 KiB slots a message of 1-8 KiB goes through the ring whole, and one byte more does not") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 8192, &hooks);
  tls_on_app_thread = true;
  for (uint64_t n : {uint64_t{1025}, uint64_t{4096}, uint64_t{8192}}) {
    std::vector<uint8_t> data(n), got(n);
    for (uint64_t i = 0; i < n; ++i) data[i] = static_cast<uint8_t>(i * 7 + n);
    Op s(0, 1, 3, data.data(), n);
    t.send(&s.op);
    CHECK(s.status == 0);  // complete at once: it is in the slot
    Op r(1, 0, 3, got.data(), n);
    t.recv(&r.op);
    CHECK(r.status == 0);
    CHECK(got == data);
  }
  CHECK(t.stats().fastbox == 3);
  std::vector<uint8_t> over(8193, 9), got_over(8193);
  Op s(0, 1, 4, over.data(), over.size());
  t.send(&s.op);
  Op r(1, 0, 4, got_over.data(), got_over.size());
  t.recv(&r.op);
  CHECK(got_over == over);
  CHECK(t.stats().fastbox == 3);  // the mailbox path
}

TEST_CASE("a poll leaves a lone unmatched message in its slot and files it once another comes behind") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  uint64_t a = 1, b = 2, got_a = 0, got_b = 0;
  Op sa(0, 1, 1, &a, 8);
  t.send(&sa.op);
  CHECK_FALSE(t.progress_all(1, true));  // kept: its receive takes it from the slot
  CHECK_FALSE(t.messages_waiting(1));    // nothing to do until something changes: may sleep
  CHECK(t.stats().unexpected == 0);
  Op sb(0, 1, 2, &b, 8);
  t.send(&sb.op);
  CHECK(t.messages_waiting(1));
  CHECK(t.progress_all(1, true));  // a is filed as unexpected; b, alone now, is kept
  CHECK(t.stats().eager == 1);
  CHECK(t.unexpected_count(1) == 2);
  Op rb(1, 0, 2, &got_b, 8), ra(1, 0, 1, &got_a, 8);
  t.recv(&rb.op);  // from the slot
  t.recv(&ra.op);  // from the queue
  CHECK(got_a == 1);
  CHECK(got_b == 2);
  CHECK(ra.completions == 1);
  CHECK(rb.completions == 1);
  CHECK(t.unexpected_count(1) == 0);
}

TEST_CASE("a receive whose message is behind others in the ring files those and takes its own") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  std::vector<uint64_t> values = {10, 11, 12}, got(3, 0);
  std::deque<Op> sends, recvs;
  send_each(t, values, sends, [](const Op&) {});
  for (uint32_t i = 3; i-- > 0;) {  // last first
    recvs.emplace_back(1, 0, i, &got[i], 8);
    t.recv(&recvs.back().op);
    CHECK(recvs.back().completions == 1);
  }
  CHECK(got == values);
  CHECK(t.unexpected_count(1) == 0);
}

TEST_CASE("a full ring, or a message larger than a slot, goes through the mailbox; everything arrives") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  constexpr uint32_t kMessages = InprocTransport::kRingSlots + 4;
  std::vector<uint64_t> values(kMessages), got(kMessages, 0);
  for (uint32_t i = 0; i < kMessages; ++i) values[i] = 500 + i;
  std::deque<Op> sends, recvs;
  send_each(t, values, sends, [](const Op& s) { CHECK(s.completions == 1); });  // eager either way
  CHECK(hooks.waiting == InprocTransport::kRingSlots);
  CHECK(t.unexpected_count(1) == kMessages);
  std::vector<uint8_t> large(2000, 2), got_large(2000, 0);
  Op sl(0, 1, 1000, large.data(), 2000);
  t.send(&sl.op);
  CHECK(hooks.waiting == InprocTransport::kRingSlots);  // not through a ring
  for (uint32_t i = kMessages; i-- > 0;) {
    recvs.emplace_back(1, 0, i, &got[i], 8);
    t.recv(&recvs.back().op);
    CHECK(recvs.back().completions == 1);
  }
  Op rl(1, 0, 1000, got_large.data(), 2000);
  t.recv(&rl.op);
  CHECK(got == values);
  CHECK(got_large == large);
  CHECK(t.unexpected_count(1) == 0);
  CHECK(t.stats().fastbox == InprocTransport::kRingSlots);
  CHECK(t.stats().messages == kMessages + 1);
}

TEST_CASE("a helper thread leaves a ring message whose receive only the application thread may deliver") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  tls_on_app_thread = true;
  uint64_t value = 3, got = 0;
  Op recv(1, 0, 8, &got, 8);
  recv.op.deliver.app_thread_only = true;
  t.recv(&recv.op);
  Op send(0, 1, 8, &value, 8);
  t.send(&send.op);
  tls_on_app_thread = false;
  CHECK_FALSE(t.progress_all(1, false));
  CHECK(recv.completions == 0);
  CHECK(hooks.app_only == 1);  // asked for the image's own thread
  tls_on_app_thread = true;
  CHECK(t.progress_all(1, true));
  CHECK(recv.completions == 1);
  CHECK(got == 3);
}

TEST_CASE("queued eager data for a receive only an application thread may deliver waits for one") {
  CountingHooks hooks;
  for (uint64_t ring_bytes : {uint64_t{0}, uint64_t{1024}}) {
    CAPTURE(ring_bytes);
    InprocTransport t(2, 8192, ring_bytes, &hooks);
    tls_on_app_thread = true;
    uint64_t value = 41, got = 0;
    Op send(0, 1, 5, &value, 8);
    t.send(&send.op);
    CHECK(send.completions == 1);  // eager: in the queue or the ring
    tls_on_app_thread = false;     // a helper thread posts the receive
    Op recv(1, 0, 5, &got, 8);
    recv.op.deliver.app_thread_only = true;
    t.recv(&recv.op);
    CHECK(recv.completions == 0);
    CHECK_FALSE(t.progress_all(1, false));
    CHECK(recv.completions == 0);
    CHECK(got == 0);
    tls_on_app_thread = true;
    CHECK(t.progress_all(1, true));
    CHECK(recv.completions == 1);
    CHECK(recv.status == 0);
    CHECK(got == 41);
    CHECK(t.unexpected_count(1) == 0);
  }
}

TEST_CASE("a receiver holding its sender's eager credits keeps that sender out of the ring") {
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  t.set_eager_credits(2);
  tls_on_app_thread = true;
  constexpr uint32_t kMessages = 6;
  std::vector<uint64_t> values(kMessages), got(kMessages, 0);
  for (uint32_t i = 0; i < kMessages; ++i) values[i] = 70 + i;
  std::deque<Op> sends, recvs;
  send_each(t, values, sends, [&](const Op&) { t.progress_all(1, true); });  // a polling receiver files all but the last
  // Two filed (the credits), then senders wait in the mailbox as descriptors.
  CHECK(t.stats().eager == 2);
  CHECK(sends[kMessages - 1].completions == 0);
  for (uint32_t i = 0; i < kMessages; ++i) {
    recvs.emplace_back(1, 0, i, &got[i], 8);
    t.recv(&recvs.back().op);
    CHECK(recvs.back().completions == 1);
  }
  CHECK(got == values);
  for (const Op& s : sends) CHECK(s.completions == 1);
}

TEST_CASE("a byte-count mismatch completes both sides with an error instead of copying") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 0, &hooks);
  uint64_t value = 5, got = 0;
  Op recv(1, 0, 9, &got, 4);
  t.recv(&recv.op);
  Op send(0, 1, 9, &value, 8);
  t.send(&send.op);
  CHECK(recv.status == -7);
  CHECK(send.status == -7);
  CHECK(got == 0);
}


TEST_CASE("a copy queued for the receiver counts as waiting: an image about to sleep takes it instead") {
  CountingHooks hooks;
  InprocTransport t(2, 1024, 1024, &hooks);  // 4 KiB: above the eager limit, copied by the receiver
  tls_on_app_thread = true;
  std::vector<uint8_t> out(4096, 7), in(4096, 0);
  Op r(1, 0, 1, in.data(), in.size());
  t.recv(&r.op);
  CHECK_FALSE(t.messages_waiting(1));
  Op s(0, 1, 1, out.data(), out.size());
  t.send(&s.op);  // matched: the copy is queued for image 1's progress
  CHECK(r.completions == 0);
  CHECK(t.messages_waiting(1));
  CHECK(t.progress_all(1, true));
  CHECK(r.completions == 1);
  CHECK(s.completions == 1);
  CHECK(in == out);
  CHECK_FALSE(t.messages_waiting(1));
}

TEST_CASE("after fail_all no receive takes bytes: a ring message, a queued copy, a later receive") {
  CountingHooks hooks;
  InprocTransport t(2, 1024, 1024, &hooks);
  tls_on_app_thread = true;
  constexpr int kLost = -9;
  // A copy queued for the receiver (4 KiB, above the eager limit) and a
  // message in the ring that no receive has taken yet.
  std::vector<uint8_t> out(4096, 7), in(4096, 0);
  Op queued_recv(1, 0, 1, in.data(), in.size());
  t.recv(&queued_recv.op);
  Op queued_send(0, 1, 1, out.data(), out.size());
  t.send(&queued_send.op);
  REQUIRE(queued_recv.completions == 0);
  uint64_t value = 42, got = 0;
  Op ring_send(0, 1, 2, &value, 8);
  t.send(&ring_send.op);
  CHECK(ring_send.completions == 1);
  t.fail_all(kLost);
  CHECK(queued_recv.completions == 1);
  CHECK(queued_recv.status == kLost);
  CHECK(queued_send.completions == 1);
  CHECK(queued_send.status == kLost);
  CHECK(in == std::vector<uint8_t>(4096, 0));
  CHECK_FALSE(t.messages_waiting(1));
  int status = 0;
  CHECK_FALSE(t.recv_now(1, 0, MsgKey{0, 0, 2}, &got, 8, &status));
  Op late(1, 0, 2, &got, 8);
  t.recv(&late.op);
  CHECK(late.completions == 1);
  CHECK(late.status == kLost);
  CHECK(got == 0);
}

TEST_CASE("a sender out of eager credits waits for the receive: the receiver's pool stays bounded") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 0, &hooks);
  t.set_eager_credits(4);
  tls_on_app_thread = true;
  constexpr uint32_t kMessages = 20;
  std::vector<uint64_t> values(kMessages), got(kMessages, 0);
  std::deque<Op> sends, recvs;  // stable addresses
  for (uint32_t i = 0; i < kMessages; ++i) {
    values[i] = 1000 + i;
    sends.emplace_back(0, 1, i, &values[i], 8);
    t.send(&sends.back().op);
  }
  // The first 4 went eager and completed; the other 16 wait as descriptors.
  for (uint32_t i = 0; i < kMessages; ++i) CHECK(sends[i].completions == (i < 4 ? 1 : 0));
  CHECK(t.unexpected_count(1) == kMessages);
  CHECK(t.stats().eager == 4);
  // Receiving in reverse order: each waiting SEND completes when its RECV
  // copies from the sender's buffer, with the right data.
  for (uint32_t i = kMessages; i-- > 0;) {
    recvs.emplace_back(1, 0, i, &got[i], 8);
    t.recv(&recvs.back().op);
    CHECK(recvs.back().completions == 1);
    CHECK(recvs.back().status == 0);
    CHECK(sends[i].completions == 1);
    CHECK(got[i] == values[i]);
  }
  CHECK(t.unexpected_count(1) == 0);
  // Credits came back: the next small message is eager again.
  uint64_t more = 7, more_got = 0;
  Op s(0, 1, 99, &more, 8);
  t.send(&s.op);
  CHECK(s.completions == 1);
  CHECK(t.stats().eager == 5);
  Op r(1, 0, 99, &more_got, 8);
  t.recv(&r.op);
  CHECK(more_got == 7);
}

// Three threads on one transport: a sender, the receiving image's own
// thread (posting receives, some two at a time in reverse order, and
// polling) and a helper that drains for it. Sizes straddle the ring's
// limit, so rings, the mailbox and their fallbacks all take part.
TEST_CASE("concurrent sender, receiver and helper: every message arrives once, whole") {
  constexpr uint32_t kMessages = 4000;
  auto size_of = [](uint32_t i) { return uint64_t{1} + (i * 97) % 1400; };
  CountingHooks hooks;
  InprocTransport t(2, 8192, 1024, &hooks);
  t.set_eager_credits(8);
  std::vector<std::vector<uint8_t>> out(kMessages), in(kMessages);
  std::deque<Tracked> sends(kMessages), recvs(kMessages);
  for (uint32_t i = 0; i < kMessages; ++i) {
    out[i].resize(size_of(i));
    for (size_t b = 0; b < out[i].size(); ++b) out[i][b] = static_cast<uint8_t>(i * 31 + b);
    in[i].assign(size_of(i), 0);
    sends[i].init(0, 1, i, out[i].data(), out[i].size());
    recvs[i].init(1, 0, i, in[i].data(), in[i].size());
  }
  std::atomic<bool> stop{false};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  std::thread sender([&] {
    tls_on_app_thread = true;
    for (uint32_t i = 0; i < kMessages; ++i) t.send(&sends[i].op);
  });
  std::thread helper([&] {
    tls_on_app_thread = false;
    while (!stop.load()) t.progress_all(1, false);
  });
  tls_on_app_thread = true;
  bool timed_out = false;
  for (uint32_t i = 0; i < kMessages && !timed_out; ++i) {
    const bool pair = i % 3 == 0 && i + 1 < kMessages;
    if (pair) t.recv(&recvs[i + 1].op);  // the later one first
    t.recv(&recvs[i].op);
    while (recvs[i].completions.load() == 0 || (pair && recvs[i + 1].completions.load() == 0)) {
      t.progress_all(1, true);
      if (std::chrono::steady_clock::now() > deadline) {
        timed_out = true;
        break;
      }
    }
    if (pair) ++i;
  }
  stop.store(true);
  sender.join();
  helper.join();
  REQUIRE_FALSE(timed_out);
  uint32_t wrong = 0;
  for (uint32_t i = 0; i < kMessages; ++i) {
    wrong += recvs[i].completions.load() != 1 || recvs[i].status.load() != 0 || in[i] != out[i] ||
             sends[i].completions.load() != 1 || sends[i].status.load() != 0;
  }
  CHECK(wrong == 0);
  CHECK(t.unexpected_count(1) == 0);
  const TransportStats stats = t.stats();
  CHECK(stats.messages == kMessages);
  CHECK(stats.fastbox > 0);  // some went through the ring
}

// A pair's first ring message makes the ring. A receive posted meanwhile
// may have looked before the ring existed, and a helper's drain may leave
// that message in its slot (alone, no receive yet): the receive must still
// find it. Each round takes a fresh transport and widens the window: a
// third image's 1 MiB eager message holds the receiver's mailbox while its
// receive waits to post, the ring is made and the helper waits to drain.
TEST_CASE("a receive posted while its pair's ring is being made finds the ring's first message") {
  constexpr uint32_t kRounds = 200;
  constexpr uint64_t kLarge = uint64_t{1} << 20;  // copied under the mailbox lock (eager, unexpected)
  CountingHooks hooks;
  std::atomic<InprocTransport*> current{nullptr};
  std::atomic<uint32_t> round{0}, large_started{0}, recv_started{0}, sent{0};
  std::atomic<bool> stop{false}, helper_busy{false};
  std::vector<uint8_t> large(kLarge, 5);
  uint64_t value = 0x1234567890abcdef, got = 0;
  Tracked send_op, large_op, recv_op;
  auto wait_for = [&](std::atomic<uint32_t>& phase, uint32_t r) {
    while (phase.load(std::memory_order_acquire) != r && !stop.load()) std::this_thread::yield();
    return !stop.load();
  };
  std::thread third([&] {  // image 2: the large message to image 1
    tls_on_app_thread = true;
    for (uint32_t r = 1; r <= kRounds && wait_for(round, r); ++r) {
      large_started.store(r, std::memory_order_release);
      current.load()->send(&large_op.op);
    }
  });
  std::thread sender([&] {  // image 0: the ring's first message, once the receive is on its way
    tls_on_app_thread = true;
    for (uint32_t r = 1; r <= kRounds && wait_for(recv_started, r); ++r) {
      current.load()->send(&send_op.op);
      sent.store(r, std::memory_order_release);
    }
  });
  std::thread helper([&] {
    tls_on_app_thread = false;
    while (!stop.load()) {
      // seq_cst, paired with the main thread's: it frees a transport only
      // once this is false after it took the transport away.
      helper_busy.store(true);
      if (InprocTransport* t = current.load()) t->progress_all(1, false);
      helper_busy.store(false);
    }
  });
  tls_on_app_thread = true;
  uint32_t lost = 0, wrong = 0;
  for (uint32_t r = 1; r <= kRounds && lost == 0; ++r) {
    auto t = std::make_unique<InprocTransport>(3, kLarge, 8192, &hooks);
    got = 0;
    for (Tracked* op : {&send_op, &large_op, &recv_op}) op->completions = 0;
    send_op.init(0, 1, 1, &value, 8);
    large_op.init(2, 1, 1, large.data(), kLarge);
    recv_op.init(1, 0, 1, &got, 8);
    current.store(t.get());
    round.store(r, std::memory_order_release);
    wait_for(large_started, r);
    std::atomic<int> spin{0};
    while (spin.fetch_add(1, std::memory_order_relaxed) < 2000) {  // let the large copy take the lock first
    }
    recv_started.store(r, std::memory_order_release);
    t->recv(&recv_op.op);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (recv_op.completions.load() == 0 || sent.load(std::memory_order_acquire) != r ||
           large_op.completions.load() == 0) {
      t->progress_all(1, true);
      if (std::chrono::steady_clock::now() > deadline) {
        ++lost;
        break;
      }
    }
    wrong += got != value || recv_op.completions.load() != 1;
    current.store(nullptr);
    while (helper_busy.load()) {  // the helper may still be inside this transport
    }
  }
  stop.store(true);
  third.join();
  sender.join();
  helper.join();
  CHECK(lost == 0);
  CHECK(wrong == 0);
}

}  // namespace
}  // namespace carflow
