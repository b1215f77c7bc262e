// transports/ofi's credit flow control between two endpoints of one
// process over libfabric's tcp;ofi_rxm on the loopback: a sender out of
// credits waits; the receiver returns a credit when it consumes a message
// it held past CF_OFI_UNEXPECTED_BYTES, and also when it drops such a
// message because its images changed (no receive will ever take it). A
// credit kept there would be gone for good: after `credits` such drops the
// sender could never send to that node again.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "transports/ofi/ofi_transport.h"

namespace carflow {
namespace {

constexpr uint32_t kCredits = 4;

struct Done {
  int completed = 0;
  int status = 0;
};

void count_done(MsgOp* op, int status) {
  Done* d = static_cast<Done*>(op->owner);
  d->completed++;
  if (status != 0) d->status = status;
}

struct Nodes {
  std::unique_ptr<OfiTransport> t[2];
  bool ok = false;
  std::string why;

  Nodes() {
    setenv("FI_TCP_IFACE", "lo", 0);
    OfiOptions options;
    options.credits = kCredits;
    options.unexpected_bytes = 0;  // every unexpected message holds its sender's credit
    std::vector<std::string> addresses;
    for (uint32_t n = 0; n < 2; ++n) {
      t[n] = OfiTransport::open("tcp;ofi_rxm", n, 2, options, &why);
      if (t[n] == nullptr) return;
      addresses.push_back(t[n]->address());
    }
    for (uint32_t n = 0; n < 2; ++n) {
      if (!t[n]->connect(addresses, &why)) return;
      t[n]->set_node_map(NodeMap::make(n, {1, 1}));
    }
    ok = true;
  }
  ~Nodes() { stop_receiver(); }
  // Node 1 makes progress on a thread of its own: a send on node 0 may
  // wait inside libfabric for node 1 to answer (its connection, a full queue).
  void start_receiver() {
    running = true;
    receiver = std::thread([this] {
      while (running.load(std::memory_order_relaxed)) t[1]->progress_all(1, false);
    });
  }
  void stop_receiver() {
    running = false;
    if (receiver.joinable()) receiver.join();
  }
  // Drives node 0 until `done` says so, at most 10 s.
  bool until(const std::function<bool()>& done) {
    const auto limit = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done()) {
      if (std::chrono::steady_clock::now() > limit) return false;
      t[0]->progress_all(0, true);
    }
    return true;
  }
  std::atomic<bool> running{false};
  std::thread receiver;
};

// `count` 8-byte sends from image 0 to image 1, keys seq first..first+count-1.
void send_many(OfiTransport* t, std::vector<MsgOp>* ops, std::vector<uint64_t>* data, Done* done, uint32_t first,
               uint32_t count) {
  ops->resize(count);
  data->resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    (*data)[i] = 1000 + first + i;
    MsgOp& op = (*ops)[i];
    op.self = 0;
    op.peer = 1;
    op.key = MsgKey{7, first + i, 0};
    op.buf = &(*data)[i];
    op.nbytes = sizeof(uint64_t);
    op.on_complete = count_done;
    op.owner = done;
    t->send(&op);
  }
}

TEST_CASE("a message dropped when the images change returns its sender's credit") {
  Nodes nodes;
  if (!nodes.ok) {
    MESSAGE("skipped: libfabric's tcp;ofi_rxm cannot open here: ", nodes.why);
    return;
  }
  OfiTransport& sender = *nodes.t[0];
  OfiTransport& receiver = *nodes.t[1];
  nodes.start_receiver();
  // Twice the credits: the first kCredits leave, the rest wait for credits.
  Done first_done;
  std::vector<MsgOp> first_ops;
  std::vector<uint64_t> first_data;
  send_many(&sender, &first_ops, &first_data, &first_done, 1, 2 * kCredits);
  CHECK(nodes.until([&] { return receiver.ofi_stats().unexpected == kCredits; }));
  CHECK(sender.ofi_stats().credit_waits == kCredits);
  CHECK(receiver.ofi_stats().unexpected == kCredits);  // held: no credit went back

  // Node 1 now has two images: the held messages are dropped unread, and
  // their credits go back, so the waiting sends leave and arrive.
  nodes.stop_receiver();
  receiver.set_node_map(NodeMap::make(1, {1, 2}));
  nodes.start_receiver();
  CHECK(nodes.until([&] { return receiver.ofi_stats().unexpected == 2 * kCredits; }));
  CHECK(receiver.ofi_stats().unexpected == 2 * kCredits);
  CHECK(nodes.until([&] { return first_done.completed == static_cast<int>(2 * kCredits); }));
  CHECK(first_done.status == 0);

  // The second batch is received: every message intact, in its own receive.
  std::vector<uint64_t> got(kCredits, 0);
  std::vector<MsgOp> recvs(kCredits);
  Done recv_done;
  for (uint32_t i = 0; i < kCredits; ++i) {
    MsgOp& op = recvs[i];
    op.self = 1;
    op.peer = 0;
    op.key = MsgKey{7, 1 + kCredits + i, 0};
    op.buf = &got[i];
    op.nbytes = sizeof(uint64_t);
    op.on_complete = count_done;
    op.owner = &recv_done;
    receiver.recv(&op);
  }
  CHECK(nodes.until([&] { return recv_done.completed == static_cast<int>(kCredits); }));
  CHECK(recv_done.status == 0);
  for (uint32_t i = 0; i < kCredits; ++i) CHECK(got[i] == 1000 + 1 + kCredits + i);
}

}  // namespace
}  // namespace carflow
