// The inproc transport on its own: fastbox handover and its fallbacks, and
// eager flow control.
#include <doctest/doctest.h>

#include <cstring>
#include <deque>
#include <vector>

#include "transports/inproc/inproc_transport.h"

namespace carflow {
namespace {

struct NoHooks : TransportHooks {
  void deferred_work(uint32_t, uint32_t, bool) override {}
};

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
    op.self = self_image;
    op.peer = peer;
    op.key = MsgKey{0, 0, tag};
    op.buf = buf;
    op.nbytes = nbytes;
    op.on_complete = &Op::done;
    op.owner = this;
  }
};

TEST_CASE("a small message to a polling receiver goes through the box and a later receive takes it") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 108, &hooks);
  tls_on_app_thread = true;
  uint64_t value = 0x1122334455667788ull, got = 0;
  t.set_polling(1, true);
  Op send(0, 1, 7, &value, 8);
  t.send(&send.op);
  CHECK(send.completions == 1);  // the box holds a copy: the SEND is done
  CHECK(t.stats().fastbox == 1);
  Op recv(1, 0, 7, &got, 8);
  t.recv(&recv.op);
  CHECK(recv.completions == 1);
  CHECK(recv.status == 0);
  CHECK(got == value);
  t.set_polling(1, false);
}

TEST_CASE("a box message is matched to an already posted receive when the receiver polls") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 108, &hooks);
  tls_on_app_thread = true;
  std::vector<uint8_t> data(100, 0xab), got(100, 0);
  Op recv(1, 0, 3, got.data(), 100);
  t.recv(&recv.op);
  CHECK(recv.completions == 0);
  t.set_polling(1, true);
  Op send(0, 1, 3, data.data(), 100);
  t.send(&send.op);
  CHECK(recv.completions == 0);  // waiting in the box for the receiver
  CHECK(t.progress_all(1, true));
  CHECK(recv.completions == 1);
  CHECK(got == data);
  t.set_polling(1, false);
}

TEST_CASE("a receiver that stops polling takes what is in its boxes") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 108, &hooks);
  tls_on_app_thread = true;
  uint32_t value = 42, got = 0;
  Op recv(1, 0, 1, &got, 4);
  t.recv(&recv.op);
  t.set_polling(1, true);
  Op send(0, 1, 1, &value, 4);
  t.send(&send.op);
  t.set_polling(1, false);  // the final check matches the posted receive
  CHECK(recv.completions == 1);
  CHECK(got == 42);
}

TEST_CASE("messages to a receiver that is not polling, or too large for a box, skip the box") {
  NoHooks hooks;
  InprocTransport t(2, 8192, 108, &hooks);
  tls_on_app_thread = true;
  std::vector<uint8_t> small(8, 1), large(200, 2), got_small(8), got_large(200);
  Op s1(0, 1, 1, small.data(), 8);
  t.send(&s1.op);  // receiver not polling: mailbox path (unexpected, eager)
  t.set_polling(1, true);
  Op s2(0, 1, 2, large.data(), 200);
  t.send(&s2.op);  // larger than a box
  CHECK(t.stats().fastbox == 0);
  CHECK(t.unexpected_count(1) == 2);
  Op r1(1, 0, 1, got_small.data(), 8), r2(1, 0, 2, got_large.data(), 200);
  t.recv(&r1.op);
  t.recv(&r2.op);
  CHECK(got_small == small);
  CHECK(got_large == large);
  t.set_polling(1, false);
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

}  // namespace
}  // namespace carflow
