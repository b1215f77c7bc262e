#include "transports/inproc/inproc_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

#include "transports/small_copy.h"

namespace carflow {

// Status for a SEND/RECV pair whose byte counts differ (CF_ERR_MISMATCH).
static constexpr int kMismatch = -7;

namespace {

constexpr uint64_t kSlotHeader = 48;  // offsetof(Slot, inline_data)

uint64_t stride_for(uint64_t ring_bytes) { return (kSlotHeader + ring_bytes + 63) / 64 * 64; }

// The largest payload a slot may have for the rings of every pair of
// `images` to fit `budget`.
uint64_t fitting(uint64_t pairs, uint64_t budget) {
  const uint64_t stride = budget / (pairs * InprocTransport::kRingSlots) / 64 * 64;
  return std::max<uint64_t>(stride, 64) - kSlotHeader;
}

// The largest ring message for `images` (at least the header line's 16
// bytes): up to kRingSmallBytes within kRingBudget, more within
// kRingLargeBudget.
uint64_t budget_bytes(uint32_t images, uint64_t wanted) {
  const uint64_t pairs = uint64_t{images} * (images > 0 ? images - 1 : 0);
  if (pairs == 0 || wanted == 0) return wanted;
  const uint64_t small = std::min<uint64_t>(InprocTransport::kRingSmallBytes, fitting(pairs, InprocTransport::kRingBudget));
  return std::min(wanted, std::max(small, fitting(pairs, InprocTransport::kRingLargeBudget)));
}

}  // namespace

InprocTransport::InprocTransport(uint32_t images, uint64_t eager_bytes, uint64_t ring_bytes,
                                 TransportHooks* hooks, uint32_t base)
    : images_(images),
      base_(base),
      eager_bytes_(eager_bytes),
      ring_bytes_(budget_bytes(images, std::min<uint64_t>({ring_bytes, eager_bytes, kRingBytes}))),
      slot_stride_(stride_for(ring_bytes_)),
      hooks_(hooks) {
  static_assert(offsetof(Slot, inline_data) == kSlotHeader);
  takes_now_ = ring_bytes_ != 0;
  for (uint32_t i = 0; i < images; ++i) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    mailboxes_.back()->pulls.resize(images);
    mailboxes_.back()->eager_held = std::make_unique<std::atomic<uint32_t>[]>(images);
    mailboxes_.back()->posted_from = std::make_unique<std::atomic<uint32_t>[]>(images);
    mailboxes_.back()->rings = std::make_unique<std::atomic<Ring*>[]>(images);
  }
}

InprocTransport::~InprocTransport() {
  for (auto& mb : mailboxes_) {
    for (uint32_t src = 0; src < images_; ++src) {
      if (Ring* r = mb->rings[src].load(std::memory_order_acquire)) free_ring(r);
    }
    // Messages no receive took (their collectives failed or were abandoned
    // after a loss) go back to the pool, freed below.
    std::vector<Unexpected*> left;
    mb->unexpected.take_if([](const Unexpected*) { return true; }, &left);
    for (Unexpected* u : left) free_block(*mb, u);
    for (Unexpected* list : {mb->free_eager, mb->free_headers}) {
      while (list != nullptr) {
        Unexpected* next = list->next;
        list->~Unexpected();
        std::free(list);
        list = next;
      }
    }
  }
}

InprocTransport::Unexpected* InprocTransport::take_block(Mailbox& mb, bool eager, bool* injected) {
  *injected = injected_nomem();
  if (*injected) [[unlikely]] return nullptr;
  Unexpected*& free_list = eager ? mb.free_eager : mb.free_headers;
  if (free_list != nullptr) {
    Unexpected* u = free_list;
    free_list = u->next;
    return u;
  }
  // Pool growth: the only allocation on the message path, once per
  // concurrently unexpected message.
  void* raw = std::malloc(sizeof(Unexpected) + (eager ? eager_bytes_ : 0));
  return raw != nullptr ? new (raw) Unexpected() : nullptr;
}

void InprocTransport::free_block(Mailbox& mb, Unexpected* u) {
  if (u->send == nullptr) mb.eager_held[u->src - base_].fetch_sub(1, std::memory_order_relaxed);
  Unexpected*& free_list = u->send == nullptr ? mb.free_eager : mb.free_headers;
  u->next = free_list;
  free_list = u;
}

namespace {

// Completes a receive, handing it the sender's digest (MsgOp::digest).
void finish_recv(MsgOp* recv_op, int status, uint64_t digest) {
  recv_op->digest = digest;
  recv_op->on_complete(recv_op, status);
}

}  // namespace

void InprocTransport::deliver(MsgOp* recv_op, const void* src) {
  if (recv_op->nbytes == 0) return;
  if (recv_op->deliver.fn != nullptr) {
    recv_op->deliver.fn(recv_op->deliver.ctx, recv_op->buf, src, recv_op->nbytes);
  } else {
    std::memcpy(recv_op->buf, src, recv_op->nbytes);
  }
}

void InprocTransport::push_pull(uint32_t image, MsgOp* recv_op) {
  Mailbox& mb = mailbox(image);
  // Read what the hook needs now: once queued, the op may be pulled,
  // completed and its instance recycled by another thread.
  const uint32_t peer = recv_op->peer;
  const bool app_thread_only = recv_op->deliver.app_thread_only;
  Mailbox::PullQueue& q = mb.pulls[peer - base_];
  mb.lock.lock();
  recv_op->next = nullptr;
  if (q.tail == nullptr) {
    q.head = recv_op;
  } else {
    q.tail->next = recv_op;
  }
  q.tail = recv_op;
  mb.pending_pulls.fetch_add(1, std::memory_order_seq_cst);
  mb.lock.unlock();
  hooks_->deferred_work(image, peer, app_thread_only);
}

void InprocTransport::arrive(uint32_t image, uint32_t src, const MsgKey& key, const void* data,
                             uint64_t nbytes, MsgOp* send_op, int status, uint64_t digest) {
  Mailbox& mb = mailbox(image);
  const bool small = nbytes <= eager_bytes_;
  mb.lock.lock();
  mb.stats.messages++;
  mb.stats.bytes += nbytes;
  MsgOp* posted = mb.posted.take(src, key);
  if (posted != nullptr) {
    count_posted(mb, src, -1);
    const bool direct = small && (tls_on_app_thread || !posted->deliver.app_thread_only);
    if (posted->nbytes == nbytes) (direct ? mb.stats.direct : mb.stats.single_copy)++;
    mb.lock.unlock();
    // A failed sender's message carries no bytes: its failure is the cause,
    // whatever the sizes (as ring_status and finish_from_block decide).
    if (status == 0 && posted->nbytes != nbytes) {
      finish_recv(posted, kMismatch, digest);
      send_op->on_complete(send_op, kMismatch);
    } else if (direct || status != 0) {
      if (status == 0) deliver(posted, data);
      finish_recv(posted, status, digest);
      send_op->on_complete(send_op, 0);
    } else {
      posted->matched = send_op;
      push_pull(image, posted);
    }
    return;
  }
  if (const int failed = failed_.load(std::memory_order_relaxed); failed != 0) [[unlikely]] {
    mb.lock.unlock();  // no receive will take it (fail_all)
    send_op->on_complete(send_op, failed);
    return;
  }
  mb.stats.unexpected++;
  // Out of eager credits from this sender: its SEND waits for the RECV.
  std::atomic<uint32_t>& held = mb.eager_held[src - base_];
  const bool eager = small && held.load(std::memory_order_relaxed) < eager_credits_;
  bool injected = false;
  Unexpected* u = take_block(mb, eager, &injected);
  if (u == nullptr) [[unlikely]] {
    // Nowhere to keep it: the message is dropped and the node fails
    // (out_of_memory). The SEND counts as done; the failure is the receiver's.
    mb.lock.unlock();
    hooks_->out_of_memory(image, src, nbytes, injected);
    send_op->on_complete(send_op, 0);
    return;
  }
  if (eager) {
    mb.stats.eager++;
    held.fetch_add(1, std::memory_order_relaxed);
  }
  u->src = src;
  u->key = key;
  u->nbytes = nbytes;
  u->send = eager ? nullptr : send_op;
  u->status = status;
  u->digest = digest;
  if (eager && nbytes > 0) std::memcpy(u->data(), data, nbytes);
  mb.unexpected.insert(u);
  mb.lock.unlock();
  if (eager) send_op->on_complete(send_op, 0);
}

void InprocTransport::fail_all(int status) {
  // Stored before each mailbox lock is taken: a receive posted after the
  // sweep of its mailbox, or a message finding none, sees it under that lock.
  failed_.store(status, std::memory_order_release);
  std::vector<MsgOp*> receives, sends, pulled;
  std::vector<Unexpected*> descriptors;
  for (auto& mailbox : mailboxes_) {
    Mailbox& mb = *mailbox;
    mb.lock.lock();
    mb.posted.take_if([](const MsgOp*) { return true; }, &receives);
    // Matched receives whose copy has not started: they fail uncopied,
    // their eager blocks go back to the pool, their senders fail too.
    for (Mailbox::PullQueue& q : mb.pulls) {
      for (MsgOp* op = q.head; op != nullptr; op = op->next) {
        pulled.push_back(op);
        if (op->held != nullptr) {
          free_block(mb, static_cast<Unexpected*>(op->held));
          op->held = nullptr;
        } else {
          sends.push_back(op->matched);
          op->matched = nullptr;
        }
      }
      q.head = q.tail = nullptr;
    }
    mb.pending_pulls.store(0, std::memory_order_relaxed);
    for (uint32_t src = 0; src < images_; ++src) mb.posted_from[src].store(0, std::memory_order_relaxed);
    // Single-copy sends wait for a receive that no longer comes.
    descriptors.clear();
    mb.unexpected.take_if([](const Unexpected* u) { return u->send != nullptr; }, &descriptors);
    for (Unexpected* u : descriptors) {
      sends.push_back(u->send);
      free_block(mb, u);
    }
    mb.lock.unlock();
  }
  for (MsgOp* op : receives) finish_recv(op, status, 0);
  for (MsgOp* op : pulled) finish_recv(op, status, 0);
  for (MsgOp* op : sends) op->on_complete(op, status);
}

InprocTransport::Ring* InprocTransport::make_ring() const {
  void* raw = ::operator new(sizeof(Ring) + kRingSlots * slot_stride_, std::align_val_t{kLinePair});
  Ring* r = new (raw) Ring();
  for (uint32_t i = 0; i < kRingSlots; ++i) {
    Slot* s = new (&slot(*r, i)) Slot();
    s->seq.store(i, std::memory_order_relaxed);
  }
  return r;
}

void InprocTransport::free_ring(Ring* r) const {
  r->~Ring();  // Slot and Ring are trivially destructible past their atomics
  ::operator delete(r, std::align_val_t{kLinePair});
}

InprocTransport::Slot* InprocTransport::head_slot(Ring& r) const {
  const uint64_t head = r.head.load(std::memory_order_relaxed);
  Slot& s = slot(r, head);
  return s.seq.load(std::memory_order_acquire) == head + 1 ? &s : nullptr;
}

void InprocTransport::pop(Ring& r) const {
  const uint64_t head = r.head.load(std::memory_order_relaxed);
  slot(r, head).seq.store(head + kRingSlots, std::memory_order_release);
  r.head.store(head + 1, std::memory_order_relaxed);
}

// A message taken straight from its slot by a receive posted after it came
// (under r.take_lock; counted by the ring, not the mailbox).
void InprocTransport::count_late(Ring& r, uint32_t nbytes) {
  r.late.store(r.late.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  r.late_bytes.store(r.late_bytes.load(std::memory_order_relaxed) + nbytes, std::memory_order_relaxed);
}

bool InprocTransport::push(uint32_t dst, uint32_t src, const MsgKey& key, const void* buf, uint64_t nbytes,
                           int status, uint64_t digest) {
  if (ring_bytes_ == 0 || nbytes > ring_bytes_) return false;
  Mailbox& mb = mailbox(dst);
  // A receiver that holds this sender's eager credits in its unexpected
  // queue has not been taking its messages: the mailbox path makes the
  // sender wait for its receives instead of filling the ring too.
  if (mb.eager_held[src - base_].load(std::memory_order_relaxed) >= eager_credits_) return false;
  // A hint read without the lock: a receive posted just after is met in
  // the ring as before, and one taken just before leaves arrive() to file
  // the message as unexpected (a pooled copy).
  if (nbytes >= kDirectBytes && mb.posted_from[src - base_].load(std::memory_order_relaxed) != 0) return false;
  std::atomic<Ring*>& slot_of_ring = mb.rings[src - base_];
  Ring* r = slot_of_ring.load(std::memory_order_acquire);
  if (r == nullptr) {  // the first message between these two images
    Ring* made = make_ring();
    if (slot_of_ring.compare_exchange_strong(r, made, std::memory_order_acq_rel)) {
      r = made;
    } else {
      free_ring(made);  // another thread's came first: r is it
    }
  }
  if (!r->push_lock.try_lock()) return false;
  const uint64_t tail = r->tail;
  Slot& s = slot(*r, tail);
  if (s.seq.load(std::memory_order_acquire) != tail) {
    r->push_lock.unlock();
    return false;  // full
  }
  s.key = key;
  s.nbytes = static_cast<uint32_t>(nbytes);
  s.status = status;
  s.digest = digest;
  copy_slot(s.data(), static_cast<const char*>(buf), nbytes);
  // seq_cst: pairs with a receiver that announces it sleeps, then looks at
  // its rings (Engine::wait_until); one of the two sees the other.
  s.seq.store(tail + 1, std::memory_order_seq_cst);
  r->tail = tail + 1;
  r->push_lock.unlock();
  hooks_->message_waiting(dst);
  return true;
}

bool InprocTransport::send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                               int status) {
  return push(peer, self, key, buf, nbytes, status, 0);
}

void InprocTransport::send(MsgOp* op) {
  if (push(op->peer, op->self, op->key, op->buf, op->nbytes, op->status, op->digest)) {
    op->on_complete(op, 0);
    return;
  }
  arrive(op->peer, op->self, op->key, op->buf, op->nbytes, op, op->status, op->digest);
}

bool InprocTransport::recv_now(uint32_t self, uint32_t peer, const MsgKey& key, void* buf, uint64_t nbytes,
                               int* status) {
  if (failed_.load(std::memory_order_relaxed) != 0) [[unlikely]] return false;  // recv() fails it
  Ring* r = ring(self, peer);
  if (r == nullptr || !r->take_lock.try_lock()) return false;
  Slot* s = head_slot(*r);
  if (s == nullptr || !(s->key == key) || s->digest != 0) {
    r->take_lock.unlock();
    return false;
  }
  *status = ring_status(*s, nbytes);
  if (*status == 0) copy_slot(static_cast<char*>(buf), s->data(), nbytes);
  count_late(*r, s->nbytes);
  pop(*r);
  r->take_lock.unlock();
  return true;
}

int InprocTransport::ring_status(const Slot& s, uint64_t nbytes) {
  return s.status != 0 ? s.status : s.nbytes == nbytes ? 0 : kMismatch;
}

bool InprocTransport::alone(const Ring& r, uint64_t head) const {
  return slot(r, head + 1).seq.load(std::memory_order_acquire) != head + 2;
}

uint32_t InprocTransport::drain(uint32_t image, uint32_t src, Ring& r, bool on_app_thread, bool keep_last) {
  Mailbox& mb = mailbox(image);
  uint32_t taken = 0;
  for (;; ++taken) {
    if (!r.take_lock.try_lock()) return taken;
    Slot* s = head_slot(r);
    if (s == nullptr) {
      r.take_lock.unlock();
      return taken;
    }
    mb.lock.lock();
    MsgOp* posted = mb.posted.find(src, s->key);
    if (posted != nullptr && posted->deliver.app_thread_only && !on_app_thread) {
      mb.lock.unlock();
      r.take_lock.unlock();
      hooks_->deferred_work(image, src, true);  // the image's thread takes it
      return taken;
    }
    const uint64_t head = r.head.load(std::memory_order_relaxed);
    if (posted == nullptr && keep_last && alone(r, head)) {
      r.kept.store(head, std::memory_order_relaxed);
      mb.lock.unlock();
      r.take_lock.unlock();
      return taken;
    }
    mb.stats.messages++;
    mb.stats.bytes += s->nbytes;
    if (posted != nullptr) {
      mb.posted.take(src, s->key);
      count_posted(mb, src, -1);
      mb.stats.direct++;
    } else {
      // Filed as eager data: the SEND completed when it went into the ring.
      bool injected = false;
      Unexpected* u = take_block(mb, true, &injected);
      if (u == nullptr) [[unlikely]] {  // dropped, as in arrive()
        const uint64_t nbytes = s->nbytes;
        mb.lock.unlock();
        pop(r);
        r.take_lock.unlock();
        hooks_->out_of_memory(image, src, nbytes, injected);
        return taken + 1;
      }
      mb.stats.unexpected++;
      mb.stats.eager++;
      mb.eager_held[src - base_].fetch_add(1, std::memory_order_relaxed);
      u->src = src;
      u->key = s->key;
      u->nbytes = s->nbytes;
      u->send = nullptr;
      u->status = s->status;
      u->digest = s->digest;
      if (s->nbytes > 0) std::memcpy(u->data(), s->data(), s->nbytes);
      mb.unexpected.insert(u);
    }
    mb.lock.unlock();
    const int status = posted != nullptr ? ring_status(*s, posted->nbytes) : s->status;
    const uint64_t digest = s->digest;
    if (posted != nullptr && status == 0) deliver(posted, s->data());
    pop(r);
    r.take_lock.unlock();
    if (posted != nullptr) finish_recv(posted, status, digest);
  }
}

bool InprocTransport::to_drain(const Ring& r) const {
  const uint64_t head = r.head.load(std::memory_order_relaxed);
  if (slot(r, head).seq.load(std::memory_order_acquire) != head + 1) return false;
  // A message that a drain left (no receive for it yet) counts again once
  // another comes behind it or a receive is posted (kept is reset then).
  return head != r.kept.load(std::memory_order_relaxed) || !alone(r, head);
}

bool InprocTransport::messages_waiting(uint32_t image) const {
  // A queued copy (push_pull) wakes the image only if it sleeps already:
  // one queued just before it announced itself is seen here (seq_cst, as
  // push_pull's count and the waker's look at the sleepers).
  if (mailbox(image).pending_pulls.load(std::memory_order_seq_cst) != 0) return true;
  // After fail_all no receive takes what the rings hold.
  if (ring_bytes_ == 0 || failed_.load(std::memory_order_relaxed) != 0) return false;
  for (uint32_t src = base_; src < base_ + images_; ++src) {
    const Ring* r = ring(image, src);
    if (r != nullptr && to_drain(*r)) return true;
  }
  return false;
}

void InprocTransport::recv(MsgOp* op) {
  // After fail_all no receive takes bytes, whatever waits for it.
  if (const int failed = failed_.load(std::memory_order_relaxed); failed != 0) [[unlikely]] {
    finish_recv(op, failed, 0);
    return;
  }
  Ring* r = ring_bytes_ != 0 ? ring(op->self, op->peer) : nullptr;
  // The message is usually the next one of its ring: taken from its slot.
  if (r != nullptr && r->take_lock.try_lock()) {
    Slot* s = head_slot(*r);
    if (s != nullptr && s->key == op->key && (tls_on_app_thread || !op->deliver.app_thread_only)) {
      const int status = ring_status(*s, op->nbytes);
      const uint64_t digest = s->digest;
      if (status == 0) deliver(op, s->data());
      count_late(*r, s->nbytes);
      pop(*r);
      r->take_lock.unlock();
      finish_recv(op, status, digest);
      return;
    }
    r->take_lock.unlock();
  }
  Mailbox& mb = mailbox(op->self);
  mb.lock.lock();
  // Looked up again under the lock: the ring may have been made since
  // (this pair's first ring message), and a drain may have left that
  // message in its slot, unmatched, before this receive was posted; only a
  // look at the ring below finds it.
  if (r == nullptr && ring_bytes_ != 0) r = ring(op->self, op->peer);
  Unexpected* u = mb.unexpected.take(op->peer, op->key);
  if (u == nullptr && r != nullptr && head_slot(*r) != nullptr) {
    // Not queued (a full ring sends through the queues): it may be in the
    // ring behind others, which go to the queues first.
    mb.lock.unlock();
    drain(op->self, op->peer, *r, tls_on_app_thread, false);
    mb.lock.lock();
    u = mb.unexpected.take(op->peer, op->key);
  }
  if (u == nullptr) {
    if (const int failed = failed_.load(std::memory_order_relaxed); failed != 0) [[unlikely]] {
      mb.lock.unlock();
      finish_recv(op, failed, 0);
      return;
    }
    mb.posted.insert(op);
    count_posted(mb, op->peer, +1);
    // A message a drain left in the ring may be this receive's: the image
    // must look again (another thread was draining, or it is asleep).
    const bool look_again = r != nullptr && head_slot(*r) != nullptr;
    // seq_cst: ordered before message_waiting's look at the sleepers, as a
    // sleeper's look at kept is after it announced itself.
    if (look_again) r->kept.store(~uint64_t{0}, std::memory_order_seq_cst);
    mb.lock.unlock();
    if (look_again) hooks_->message_waiting(op->self);
    return;
  }
  MsgOp* sender = u->send;
  if (sender != nullptr) {  // single copy straight from the sender's buffer
    free_block(mb, u);
    mb.lock.unlock();
    if (sender->status == 0 && sender->nbytes != op->nbytes) {
      finish_recv(op, kMismatch, sender->digest);
      sender->on_complete(sender, kMismatch);
      return;
    }
    if (op->deliver.app_thread_only && !tls_on_app_thread && sender->status == 0) {
      op->matched = sender;
      push_pull(op->self, op);
      return;
    }
    const int failed = sender->status;
    if (failed == 0) deliver(op, sender->buf);
    finish_recv(op, failed, sender->digest);
    sender->on_complete(sender, 0);
    return;
  }
  mb.lock.unlock();
  // Eager data: the block is ours until we return it to the pool. A
  // delivery only an application thread may run waits for one with it.
  if (op->deliver.app_thread_only && !tls_on_app_thread) {
    op->held = u;
    push_pull(op->self, op);
    return;
  }
  finish_from_block(mb, op, u);
}

void InprocTransport::finish_from_block(Mailbox& mb, MsgOp* op, Unexpected* u) {
  const int status = u->status != 0 ? u->status : u->nbytes == op->nbytes ? 0 : kMismatch;
  if (status == 0) deliver(op, u->data());
  const uint64_t digest = u->digest;
  mb.lock.lock();
  free_block(mb, u);
  mb.lock.unlock();
  finish_recv(op, status, digest);
}

bool InprocTransport::progress(uint32_t image, uint32_t peer, bool on_app_thread) {
  Mailbox& mb = mailbox(image);
  Mailbox::PullQueue& q = mb.pulls[peer - base_];
  bool did = false;
  for (;;) {
    if (mb.pending_pulls.load(std::memory_order_acquire) == 0) return did;
    mb.lock.lock();
    MsgOp* op = q.head;
    if (op != nullptr && op->deliver.app_thread_only && !on_app_thread) op = nullptr;
    if (op != nullptr) {
      q.head = op->next;
      if (q.head == nullptr) q.tail = nullptr;
      mb.pending_pulls.fetch_sub(1, std::memory_order_relaxed);
    }
    mb.lock.unlock();
    if (op == nullptr) return did;
    did = true;
    if (op->held != nullptr) {  // eager data kept for an application thread
      Unexpected* u = static_cast<Unexpected*>(op->held);
      op->held = nullptr;
      finish_from_block(mb, op, u);
      continue;
    }
    MsgOp* sender = op->matched;
    op->matched = nullptr;
    const int failed = sender->status;
    if (failed == 0) deliver(op, sender->buf);
    finish_recv(op, failed, sender->digest);
    sender->on_complete(sender, 0);
  }
}

bool InprocTransport::progress_all(uint32_t image, bool on_app_thread) {
  if (images_ == 1) return false;  // a node of one image: nothing moves in process
  Mailbox& mb = mailbox(image);
  bool did = false;
  if (ring_bytes_ != 0) {
    for (uint32_t src = base_; src < base_ + images_; ++src) {
      Ring* r = ring(image, src);
      if (r != nullptr && to_drain(*r)) did |= drain(image, src, *r, on_app_thread, true) != 0;
    }
  }
  if (mb.pending_pulls.load(std::memory_order_acquire) == 0) return did;
  for (uint32_t peer = base_; peer < base_ + images_; ++peer) did |= progress(image, peer, on_app_thread);
  return did;
}

TransportStats InprocTransport::stats() const {
  TransportStats s;
  for (const auto& mb : mailboxes_) {
    mb->lock.lock();
    const TransportStats m = mb->stats;
    mb->lock.unlock();
    s.messages += m.messages;
    s.bytes += m.bytes;
    s.eager += m.eager;
    s.direct += m.direct;
    s.single_copy += m.single_copy;
    s.unexpected += m.unexpected;
    for (uint32_t src = 0; src < images_; ++src) {
      const Ring* r = mb->rings[src].load(std::memory_order_acquire);
      if (r == nullptr) continue;
      // Ring messages taken straight from their slot; the ones drained
      // into the mailbox are in its counts already.
      const uint64_t late = r->late.load(std::memory_order_relaxed);
      s.messages += late;
      s.bytes += r->late_bytes.load(std::memory_order_relaxed);
      s.unexpected += late;
      s.eager += late;
      s.fastbox += r->head.load(std::memory_order_relaxed);
    }
  }
  return s;
}

size_t InprocTransport::unexpected_count(uint32_t image) const {
  Mailbox& mb = mailbox(image);
  mb.lock.lock();
  size_t n = mb.unexpected.size();
  mb.lock.unlock();
  for (uint32_t src = 0; src < images_; ++src) {
    const Ring* r = mb.rings[src].load(std::memory_order_acquire);
    if (r != nullptr) {
      const uint64_t head = r->head.load(std::memory_order_relaxed);
      for (uint64_t p = head; p < head + kRingSlots && slot(*r, p).seq.load(std::memory_order_acquire) == p + 1; ++p) ++n;
    }
  }
  return n;
}

}  // namespace carflow
