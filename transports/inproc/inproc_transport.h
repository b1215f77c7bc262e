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
//  - flow control: a receiver holds at most `eager_credits` eager blocks from
//    one sender; past that a small unexpected message also goes single copy,
//    so its SEND completes only when the RECV takes it. A sender that runs
//    ahead of its receiver (OUT_MYSYNC loops, many outstanding calls) is
//    held back instead of growing the receiver's pool without bound.
//  - fastbox: while the receiver's thread is waiting (polling), a message of
//    up to kFastboxBytes goes into a one-slot box per VC that the receiver
//    polls and matches itself (MPICH Nemesis calls this a fastbox): one
//    cache-line handover instead of the sender locking the receiver's
//    mailbox and running its CARs. States: empty -> full (sender) ->
//    taking (receiver, by CAS) -> empty. A sender that finds the receiver
//    no longer polling retracts its message by CAS and takes the paths above.
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
  // Serves images [base, base + images) of this node (image numbers are
  // node-global). fastbox_bytes: largest message handed over in a box (0 =
  // boxes off; capped at kFastboxBytes and eager_bytes).
  InprocTransport(uint32_t images, uint64_t eager_bytes, uint64_t fastbox_bytes,
                  TransportHooks* hooks, uint32_t base = 0);
  ~InprocTransport() override;

  const char* name() const override { return "inproc"; }
  void send(MsgOp* op) override;
  void recv(MsgOp* op) override;
  bool progress(uint32_t image, uint32_t peer, bool on_app_thread) override;
  bool progress_all(uint32_t image, bool on_app_thread) override;
  void set_polling(uint32_t image, bool on) override;
  bool boxes_on() const { return fastbox_bytes_ != 0; }  // set_polling does nothing otherwise
  static constexpr uint32_t kFastboxBytes = 108;
  TransportStats stats() const override;
  uint64_t eager_bytes() const { return eager_bytes_; }
  // Eager blocks one receiver holds per sender before small messages go
  // single copy (CF_INPROC_EAGER_CREDITS). Set before the first message.
  void set_eager_credits(uint32_t credits) { eager_credits_ = credits; }
  // Messages waiting in `image`'s unexpected queue (tests, diagnostics).
  size_t unexpected_count(uint32_t image) const;

 private:
  struct Unexpected {
    uint32_t src = 0;
    MsgKey key;
    uint64_t nbytes = 0;
    MsgOp* send = nullptr;      // single-copy descriptor; nullptr = eager data follows
    int status = 0;             // the sender's failure, passed on (MsgOp::status)
    uint64_t digest = 0;        // MsgOp::digest, passed on
    Unexpected* next = nullptr;
    char* data() { return reinterpret_cast<char*>(this + 1); }
  };
  struct PostedKey {
    std::pair<uint32_t, MsgKey> operator()(const MsgOp* op) const { return {op->peer, op->key}; }
  };
  struct UnexpectedKey {
    std::pair<uint32_t, MsgKey> operator()(const Unexpected* u) const { return {u->src, u->key}; }
  };
  struct alignas(64) FastBox {
    enum : uint32_t { kEmpty = 0, kFull = 1, kTaking = 2 };
    std::atomic<uint32_t> state{kEmpty};
    uint32_t nbytes = 0;
    int32_t status = 0;  // the sender's failure, passed on (MsgOp::status)
    uint64_t digest = 0;  // MsgOp::digest, passed on
    MsgKey key;
    char data[kFastboxBytes];
    std::atomic<uint64_t> handed{0};  // written by the one sender only
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
    std::vector<uint32_t> eager_held;    // per source VC: eager blocks in `unexpected`
    std::atomic<uint32_t> pending_pulls{0};
    TransportStats stats;                // counted under `lock`, which senders hold anyway
    std::unique_ptr<FastBox[]> boxes;    // by sending image
    alignas(64) std::atomic<bool> polling{false};
  };

  Unexpected* take_block(Mailbox& mb, bool eager);  // under mb.lock
  void free_block(Mailbox& mb, Unexpected* u);      // under mb.lock
  void push_pull(uint32_t image, MsgOp* recv_op);
  void deliver(MsgOp* recv_op, const void* src);
  // Matches a message from `src` against `image`'s posted receives, or files
  // it as unexpected. `send_op` is the sender's op (nullptr when the SEND has
  // completed already and `data` is a copy). Returns after calling every
  // completion it owes.
  void arrive(uint32_t image, uint32_t src, const MsgKey& key, const void* data, uint64_t nbytes,
              MsgOp* send_op, int status, uint64_t digest);
  bool try_fastbox(MsgOp* op);
  bool take_fastbox(uint32_t image, uint32_t src);

  Mailbox& mailbox(uint32_t image) const { return *mailboxes_[image - base_]; }

  const uint32_t images_;
  const uint32_t base_;  // first image served
  const uint64_t eager_bytes_;
  const uint64_t fastbox_bytes_;  // 0 = boxes off
  uint32_t eager_credits_ = 64;
  TransportHooks* const hooks_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
};

}  // namespace carflow
