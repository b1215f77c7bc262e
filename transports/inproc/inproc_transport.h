// inproc: images that are threads of one process.
//
// Each image has a Mailbox: the receives it posted (one queue per source VC,
// hashed) and one queue of unexpected messages. Protocols:
//  - receive already posted: the sender moves the bytes straight into it when
//    they are at most the eager threshold; above it the receiver side copies
//    them from the sender's buffer (deferred work), so large copies run on the
//    receiving side in parallel with the sender's own work.
//  - not posted, small: eager; copied once into a pooled buffer, the SEND
//    completes at once and the RECV copies out when it posts.
//  - not posted, large: single copy; a descriptor of the sender's buffer
//    waits in the unexpected queue and the RECV copies straight from it, then
//    completes both sides.
// Threshold: CF_INPROC_EAGER_BYTES (see README).
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "transports/inproc/key_table.h"
#include "transports/spin_lock.h"
#include "transports/transport.h"

namespace carflow {

class InprocTransport final : public Transport {
 public:
  InprocTransport(uint32_t images, uint64_t eager_bytes, TransportHooks* hooks);
  ~InprocTransport() override;

  const char* name() const override { return "inproc"; }
  void send(MsgOp* op) override;
  void recv(MsgOp* op) override;
  bool progress(uint32_t image, uint32_t peer, bool on_app_thread) override;
  bool progress_all(uint32_t image, bool on_app_thread) override;
  TransportStats stats() const override;
  uint64_t eager_bytes() const { return eager_bytes_; }
  // Messages waiting in `image`'s unexpected queue (tests, diagnostics).
  size_t unexpected_count(uint32_t image) const;

 private:
  struct Unexpected {
    uint32_t src = 0;
    MsgKey key;
    uint64_t nbytes = 0;
    MsgOp* send = nullptr;      // single-copy descriptor; nullptr = eager data follows
    Unexpected* next = nullptr;
    char* data() { return reinterpret_cast<char*>(this + 1); }
  };
  struct PostedKey {
    std::pair<uint32_t, MsgKey> operator()(const MsgOp* op) const { return {op->peer, op->key}; }
  };
  struct UnexpectedKey {
    std::pair<uint32_t, MsgKey> operator()(const Unexpected* u) const { return {u->src, u->key}; }
  };
  struct alignas(64) Mailbox {
    SpinLock lock;
    KeyTable<MsgOp, PostedKey> posted;
    KeyTable<Unexpected, UnexpectedKey> unexpected;
    Unexpected* free_eager = nullptr;    // pooled eager blocks (header + eager_bytes)
    Unexpected* free_headers = nullptr;  // pooled single-copy descriptors
    struct PullQueue {
      MsgOp* head = nullptr;
      MsgOp* tail = nullptr;
    };
    std::vector<PullQueue> pulls;        // per source VC: matched receives still to copy
    std::atomic<uint32_t> pending_pulls{0};
    TransportStats stats;                // counted under `lock`, which senders hold anyway
  };

  Unexpected* take_block(Mailbox& mb, bool eager);  // under mb.lock
  void free_block(Mailbox& mb, Unexpected* u);      // under mb.lock
  void push_pull(uint32_t image, MsgOp* recv_op);
  void deliver(MsgOp* recv_op, const void* src);

  const uint32_t images_;
  const uint64_t eager_bytes_;
  TransportHooks* const hooks_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
};

}  // namespace carflow
