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
//  - rings: when every image thread has a core, or CF_INPROC_RINGS=1 (the
//    engine decides), a message of up to ring_bytes goes into a ring of
//    slots per VC (receiver, sender)
//    that the receiver drains itself (MPICH Nemesis' fastboxes, Open MPI's
//    vader rings): the SEND completes at once, and one cache-line handover
//    moves the message, against several lines (the mailbox lock, the
//    unexpected queue, a pooled block) on the paths above. A receive whose
//    message is at the head of its ring takes it straight from the slot;
//    a receiver polling for progress delivers ring messages to their
//    posted receives or files them as unexpected (eager), except a lone
//    one nobody waits for yet, which stays for its receive. A full ring, a
//    receiver holding its sender's eager credits, or a larger message takes
//    the paths above, and so does a message of kDirectBytes or more whose
//    receive is posted (one copy, not the ring's two). Senders wake a
//    sleeping receiver (message_waiting).
//    Each ring has a producer lock and a consumer lock (try-locks): any
//    thread may run an image's CARs, and helper threads (the progress
//    thread, a representative) drain for an image too.
// Thresholds: CF_INPROC_EAGER_BYTES, CF_INPROC_FASTBOX_BYTES (see README).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <vector>

#include "transports/inproc/key_table.h"
#include "transports/line_pair.h"
#include "transports/spin_lock.h"
#include "transports/transport.h"

namespace carflow {

class InprocTransport final : public Transport {
 public:
  // Serves images [base, base + images) of this node (image numbers are
  // node-global). ring_bytes: largest message sent through a ring (0 =
  // rings off; capped at kRingBytes and eager_bytes).
  InprocTransport(uint32_t images, uint64_t eager_bytes, uint64_t ring_bytes,
                  TransportHooks* hooks, uint32_t base = 0);
  ~InprocTransport() override;

  const char* name() const override { return "inproc"; }
  void send(MsgOp* op) override;
  bool send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                int status) override;
  void recv(MsgOp* op) override;
  bool recv_now(uint32_t self, uint32_t peer, const MsgKey& key, void* buf, uint64_t nbytes, int* status) override;
  bool progress(uint32_t image, uint32_t peer, bool on_app_thread) override;
  bool progress_all(uint32_t image, bool on_app_thread) override;
  bool messages_waiting(uint32_t image) const override;
  void fail_all(int status) override;
  bool rings_on() const { return ring_bytes_ != 0; }
  // Slots per ring, and the largest payload of one: a slot is its header's
  // cache line, with the first 16 bytes of data, and the lines of the rest
  // (17 lines for 1 KiB); a message touches only the lines it fills.
  static constexpr uint32_t kRingSlots = 16;
  static constexpr uint32_t kRingBytes = 8192;
  // The rings of every pair of images together stay within kRingBudget
  // with slots of up to kRingSmallBytes (with more than 128 images the
  // slots get smaller), and slots above that only within kRingLargeBudget
  // (up to 16 images with 8 KiB): every slot's header line is written, so
  // a ring costs about a page per slot once used, whatever its messages.
  static constexpr uint32_t kRingSmallBytes = 1024;
  // From this size a message whose receive is already posted skips the
  // ring: the sender's one copy into the receive's buffer costs less than
  // the ring's two (into the slot and out of it), each line crossing cores.
  static constexpr uint64_t kDirectBytes = 2048;
  static constexpr uint64_t kRingBudget = uint64_t{256} << 20;
  static constexpr uint64_t kRingLargeBudget = uint64_t{32} << 20;
  // The largest message that goes through a ring (0: rings off).
  uint64_t ring_bytes() const { return ring_bytes_; }
  TransportStats stats() const override;
  uint64_t eager_bytes() const { return eager_bytes_; }
  // Eager blocks one receiver holds per sender before small messages go
  // single copy (CF_INPROC_EAGER_CREDITS). Set before the first message.
  void set_eager_credits(uint32_t credits) { eager_credits_ = credits; }
  // Messages waiting for a receive at `image`: in its unexpected queue or
  // its rings (tests, diagnostics; exact while nobody sends or receives).
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
  // A ring slot: free for the producer at position p when seq == p, full
  // for the consumer at position p when seq == p + 1 (Vyukov's bounded
  // queue, one producer and one consumer at a time).
  // The slot's header line; its data runs on into the lines after it.
  struct alignas(64) Slot {
    std::atomic<uint64_t> seq{0};
    MsgKey key;
    uint32_t nbytes = 0;
    int32_t status = 0;   // the sender's failure, passed on (MsgOp::status)
    uint64_t digest = 0;  // MsgOp::digest, passed on
    alignas(16) char inline_data[16];  // aligned: reduction kernels read the data as elements
    char* data() { return reinterpret_cast<char*>(this) + offsetof(Slot, inline_data); }
  };
  static_assert(sizeof(Slot) == 64, "a slot's header is one cache line");
  // A ring: these two line pairs (transports/line_pair.h), then
  // kRingSlots slots of slot_stride_ bytes.
  struct Ring {
    alignas(kLinePair) SpinLock push_lock;  // the producer's lines
    uint64_t tail = 0;
    alignas(kLinePair) SpinLock take_lock;  // the consumer's lines
    std::atomic<uint64_t> head{0};   // written under take_lock, peeked without it
    std::atomic<uint64_t> late{0}, late_bytes{0};  // see count_late
    // The head position a drain left in place, alone and with no receive
    // posted (~0: none); written under take_lock and the mailbox lock.
    std::atomic<uint64_t> kept{~uint64_t{0}};
  };
  struct alignas(kLinePair) Mailbox {
    // Read by every sender on every message, written once: apart from the
    // lines below, which the receiver writes as it posts and takes.
    // By sending image: made by the first message through it.
    std::unique_ptr<std::atomic<Ring*>[]> rings;
    // Per source VC: eager blocks in `unexpected`. Senders read it without
    // the lock: a sender at its credit limit keeps out of the ring.
    std::unique_ptr<std::atomic<uint32_t>[]> eager_held;
    // Per source VC: receives in `posted` (written under the lock). A
    // sender whose receive is posted copies a message of kDirectBytes or
    // more straight into it (one copy) rather than through the ring (two).
    std::unique_ptr<std::atomic<uint32_t>[]> posted_from;
    alignas(kLinePair) SpinLock lock;
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

  // Under mb.lock; nullptr when no memory (*injected: CF_FAULT's failure).
  Unexpected* take_block(Mailbox& mb, bool eager, bool* injected);
  void free_block(Mailbox& mb, Unexpected* u);      // under mb.lock
  // Queues a matched receive for progress(): its sender's bytes
  // (recv_op->matched) or an eager block (recv_op->held) to deliver.
  void push_pull(uint32_t image, MsgOp* recv_op);
  // Delivers eager block u to op, returns u to the pool, completes op.
  void finish_from_block(Mailbox& mb, MsgOp* op, Unexpected* u);
  void deliver(MsgOp* recv_op, const void* src);
  // Matches a message from `src` against `image`'s posted receives, or files
  // it as unexpected. `send_op` is the sender's op (nullptr when the SEND has
  // completed already and `data` is a copy). Returns after calling every
  // completion it owes.
  void arrive(uint32_t image, uint32_t src, const MsgKey& key, const void* data, uint64_t nbytes,
              MsgOp* send_op, int status, uint64_t digest);
  // Puts a message into ring (dst <- src); false when rings are off, it is
  // too large, the ring is full or busy, or dst holds src's eager credits.
  bool push(uint32_t dst, uint32_t src, const MsgKey& key, const void* buf, uint64_t nbytes, int status,
            uint64_t digest);
  Ring* ring(uint32_t dst, uint32_t src) const {
    return mailbox(dst).rings[src - base_].load(std::memory_order_acquire);
  }
  Ring* make_ring() const;
  void free_ring(Ring* r) const;
  Slot& slot(const Ring& r, uint64_t pos) const {
    char* first = reinterpret_cast<char*>(const_cast<Ring*>(&r) + 1);
    return *reinterpret_cast<Slot*>(first + (pos % kRingSlots) * slot_stride_);
  }
  // The message at the head of r, or nullptr (under r.take_lock).
  Slot* head_slot(Ring& r) const;
  void pop(Ring& r) const;  // frees the head slot (under r.take_lock)
  static void count_late(Ring& r, uint32_t nbytes);
  // A receive of nbytes meeting the message in s: the sender's failure, the
  // mismatch status for another size, or 0.
  static int ring_status(const Slot& s, uint64_t nbytes);
  // Takes the messages waiting in ring (image <- src) in order: each is
  // delivered to its posted receive or filed as unexpected. Stops at a
  // message whose receive only an application thread may deliver, when
  // the caller is not one (and asks for one). keep_last: the ring's last
  // message stays when no receive waits for it (its receive, posted soon,
  // takes it from the slot: no queueing, no pooled block). Returns how
  // many it took.
  uint32_t drain(uint32_t image, uint32_t src, Ring& r, bool on_app_thread, bool keep_last);
  // Whether the message at `head` is the ring's last one.
  bool alone(const Ring& r, uint64_t head) const;
  // Whether r holds a message a drain would take now (not one it left).
  bool to_drain(const Ring& r) const;

  Mailbox& mailbox(uint32_t image) const { return *mailboxes_[image - base_]; }
  // A receive from src went into mb.posted (+1) or left it (-1), under
  // mb.lock: the one writer, so no read-modify-write is needed.
  void count_posted(Mailbox& mb, uint32_t src, int delta) const {
    std::atomic<uint32_t>& n = mb.posted_from[src - base_];
    n.store(n.load(std::memory_order_relaxed) + static_cast<uint32_t>(delta), std::memory_order_relaxed);
  }

  const uint32_t images_;
  const uint32_t base_;  // first image served
  const uint64_t eager_bytes_;
  const uint64_t ring_bytes_;   // 0 = rings off
  const uint64_t slot_stride_;  // bytes from one slot to the next
  uint32_t eager_credits_ = 64;
  TransportHooks* const hooks_;
  std::vector<std::unique_ptr<Mailbox>> mailboxes_;
  // fail_all's status (0: none); read by every receive and by a message
  // that finds no receive. A line of its own (the class is padded to the
  // alignment): nothing written shares it.
  alignas(64) std::atomic<int> failed_{0};
};

}  // namespace carflow
