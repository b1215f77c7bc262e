#include "transports/inproc/inproc_transport.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>

namespace carflow {

// Status for a SEND/RECV pair whose byte counts differ (CF_ERR_MISMATCH).
static constexpr int kMismatch = -7;

InprocTransport::InprocTransport(uint32_t images, uint64_t eager_bytes, uint64_t fastbox_bytes,
                                 TransportHooks* hooks, uint32_t base)
    : images_(images),
      base_(base),
      eager_bytes_(eager_bytes),
      fastbox_bytes_(std::min<uint64_t>({fastbox_bytes, eager_bytes, kFastboxBytes})),
      hooks_(hooks) {
  for (uint32_t i = 0; i < images; ++i) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    mailboxes_.back()->pulls.resize(images);
    mailboxes_.back()->eager_held.resize(images);
    mailboxes_.back()->boxes = std::make_unique<FastBox[]>(images);
  }
}

InprocTransport::~InprocTransport() {
  for (auto& mb : mailboxes_) {
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

InprocTransport::Unexpected* InprocTransport::take_block(Mailbox& mb, bool eager) {
  Unexpected*& free_list = eager ? mb.free_eager : mb.free_headers;
  if (free_list != nullptr) {
    Unexpected* u = free_list;
    free_list = u->next;
    return u;
  }
  // Pool growth: the only allocation on the message path, once per
  // concurrently unexpected message.
  void* raw = std::malloc(sizeof(Unexpected) + (eager ? eager_bytes_ : 0));
  if (raw == nullptr) throw std::bad_alloc();
  return new (raw) Unexpected();
}

void InprocTransport::free_block(Mailbox& mb, Unexpected* u) {
  if (u->send == nullptr) --mb.eager_held[u->src - base_];
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
    const bool may_deliver_here = tls_on_app_thread || !posted->deliver.app_thread_only;
    // A box copy (send_op == nullptr) is taken on the receiver's own thread,
    // so it is always delivered here.
    const bool direct = (small && may_deliver_here) || send_op == nullptr;
    if (posted->nbytes == nbytes) (direct ? mb.stats.direct : mb.stats.single_copy)++;
    mb.lock.unlock();
    if (posted->nbytes != nbytes) {
      finish_recv(posted, kMismatch, digest);
      if (send_op != nullptr) send_op->on_complete(send_op, kMismatch);
    } else if (direct || status != 0) {
      if (status == 0) deliver(posted, data);
      finish_recv(posted, status, digest);
      if (send_op != nullptr) send_op->on_complete(send_op, 0);
    } else {
      posted->matched = send_op;
      push_pull(image, posted);
    }
    return;
  }
  mb.stats.unexpected++;
  // Out of eager credits from this sender: its SEND waits for the RECV. A
  // box copy (no send_op) has completed its SEND already and stays eager.
  uint32_t& held = mb.eager_held[src - base_];
  const bool eager = small && (held < eager_credits_ || send_op == nullptr);
  if (eager) {
    mb.stats.eager++;
    ++held;
  }
  Unexpected* u = take_block(mb, eager);
  u->src = src;
  u->key = key;
  u->nbytes = nbytes;
  u->send = eager ? nullptr : send_op;
  u->status = status;
  u->digest = digest;
  if (eager && nbytes > 0) std::memcpy(u->data(), data, nbytes);
  mb.unexpected.insert(u);
  mb.lock.unlock();
  if (eager && send_op != nullptr) send_op->on_complete(send_op, 0);
}

bool InprocTransport::try_fastbox(MsgOp* op) {
  if (op->nbytes > fastbox_bytes_) return false;
  Mailbox& mb = mailbox(op->peer);
  if (!mb.polling.load(std::memory_order_acquire)) return false;
  FastBox& box = mb.boxes[op->self - base_];
  if (box.state.load(std::memory_order_acquire) != FastBox::kEmpty) return false;
  box.nbytes = static_cast<uint32_t>(op->nbytes);
  box.status = op->status;
  box.digest = op->digest;
  box.key = op->key;
  if (op->nbytes > 0) std::memcpy(box.data, op->buf, op->nbytes);
  box.state.store(FastBox::kFull, std::memory_order_seq_cst);
  // The receiver may have stopped polling meanwhile: then either it saw the
  // box in its final check, or we take the message back (Dekker: each side
  // writes its flag, then reads the other's).
  if (!mb.polling.load(std::memory_order_seq_cst)) {
    uint32_t full = FastBox::kFull;
    if (box.state.compare_exchange_strong(full, FastBox::kEmpty, std::memory_order_acq_rel)) {
      return false;
    }
  }
  box.handed.store(box.handed.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  op->on_complete(op, 0);
  return true;
}

bool InprocTransport::take_fastbox(uint32_t image, uint32_t src) {
  FastBox& box = mailbox(image).boxes[src - base_];
  if (box.state.load(std::memory_order_acquire) != FastBox::kFull) return false;
  uint32_t full = FastBox::kFull;
  if (!box.state.compare_exchange_strong(full, FastBox::kTaking, std::memory_order_acq_rel)) {
    return false;
  }
  // Copy out and free the box first: the sender may refill it while we match.
  char data[kFastboxBytes];
  const uint32_t nbytes = box.nbytes;
  const int status = box.status;
  const uint64_t digest = box.digest;
  const MsgKey key = box.key;
  if (nbytes > 0) std::memcpy(data, box.data, nbytes);
  box.state.store(FastBox::kEmpty, std::memory_order_release);
  arrive(image, src, key, data, nbytes, nullptr, status, digest);
  return true;
}

void InprocTransport::send(MsgOp* op) {
  if (fastbox_bytes_ > 0 && try_fastbox(op)) return;
  arrive(op->peer, op->self, op->key, op->buf, op->nbytes, op, op->status, op->digest);
}

void InprocTransport::set_polling(uint32_t image, bool on) {
  if (fastbox_bytes_ == 0) return;
  Mailbox& mb = mailbox(image);
  mb.polling.store(on, std::memory_order_seq_cst);
  if (!on) {
    for (uint32_t src = base_; src < base_ + images_; ++src) take_fastbox(image, src);
  }
}

void InprocTransport::recv(MsgOp* op) {
  // A message waiting in the box goes through the queues first, so the
  // lookup below sees it.
  if (fastbox_bytes_ > 0) take_fastbox(op->self, op->peer);
  Mailbox& mb = mailbox(op->self);
  mb.lock.lock();
  Unexpected* u = mb.unexpected.take(op->peer, op->key);
  if (u == nullptr) {
    mb.posted.insert(op);
    mb.lock.unlock();
    return;
  }
  MsgOp* sender = u->send;
  if (sender != nullptr) {  // single copy straight from the sender's buffer
    free_block(mb, u);
    mb.lock.unlock();
    if (sender->nbytes != op->nbytes) {
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
  // Eager data: the block is ours until we return it to the pool.
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
    MsgOp* sender = op->matched;
    op->matched = nullptr;
    const int failed = sender->status;
    if (failed == 0) deliver(op, sender->buf);
    finish_recv(op, failed, sender->digest);
    sender->on_complete(sender, 0);
    did = true;
  }
}

bool InprocTransport::progress_all(uint32_t image, bool on_app_thread) {
  if (images_ == 1) return false;  // a node of one image: nothing moves in process
  Mailbox& mb = mailbox(image);
  bool did = false;
  if (fastbox_bytes_ > 0 && on_app_thread) {
    for (uint32_t src = base_; src < base_ + images_; ++src) did |= take_fastbox(image, src);
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
      s.fastbox += mb->boxes[src].handed.load(std::memory_order_relaxed);
    }
  }
  return s;
}

size_t InprocTransport::unexpected_count(uint32_t image) const {
  Mailbox& mb = mailbox(image);
  mb.lock.lock();
  size_t n = mb.unexpected.size();
  mb.lock.unlock();
  return n;
}

}  // namespace carflow
