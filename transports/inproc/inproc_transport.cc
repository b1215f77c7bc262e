#include "transports/inproc/inproc_transport.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace carflow {

// Status for a SEND/RECV pair whose byte counts differ (CF_ERR_MISMATCH).
static constexpr int kMismatch = -7;

InprocTransport::InprocTransport(uint32_t images, uint64_t eager_bytes, TransportHooks* hooks)
    : images_(images), eager_bytes_(eager_bytes), hooks_(hooks) {
  for (uint32_t i = 0; i < images; ++i) {
    mailboxes_.push_back(std::make_unique<Mailbox>());
    mailboxes_.back()->pulls.resize(images);
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
  Unexpected*& free_list = u->send == nullptr ? mb.free_eager : mb.free_headers;
  u->next = free_list;
  free_list = u;
}

void InprocTransport::deliver(MsgOp* recv_op, const void* src) {
  if (recv_op->nbytes == 0) return;
  if (recv_op->deliver.fn != nullptr) {
    recv_op->deliver.fn(recv_op->deliver.ctx, recv_op->buf, src, recv_op->nbytes);
  } else {
    std::memcpy(recv_op->buf, src, recv_op->nbytes);
  }
}

void InprocTransport::push_pull(uint32_t image, MsgOp* recv_op) {
  Mailbox& mb = *mailboxes_[image];
  Mailbox::PullQueue& q = mb.pulls[recv_op->peer];
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
  hooks_->deferred_work(image, recv_op->peer, recv_op->deliver.app_thread_only);
}

void InprocTransport::send(MsgOp* op) {
  Mailbox& mb = *mailboxes_[op->peer];
  const bool small = op->nbytes <= eager_bytes_;
  mb.lock.lock();
  mb.stats.messages++;
  mb.stats.bytes += op->nbytes;
  MsgOp* posted = mb.posted.take(op->self, op->key);
  if (posted != nullptr) {
    const bool may_deliver_here = tls_on_app_thread || !posted->deliver.app_thread_only;
    const bool direct = small && may_deliver_here && posted->nbytes == op->nbytes;
    (direct ? mb.stats.direct : mb.stats.single_copy)++;
    mb.lock.unlock();
    if (posted->nbytes != op->nbytes) {
      posted->on_complete(posted, kMismatch);
      op->on_complete(op, kMismatch);
    } else if (direct) {
      deliver(posted, op->buf);
      posted->on_complete(posted, 0);
      op->on_complete(op, 0);
    } else {
      posted->matched = op;
      push_pull(op->peer, posted);
    }
    return;
  }
  mb.stats.unexpected++;
  if (small) mb.stats.eager++;
  Unexpected* u = take_block(mb, small);
  u->src = op->self;
  u->key = op->key;
  u->nbytes = op->nbytes;
  u->send = small ? nullptr : op;
  if (small && op->nbytes > 0) std::memcpy(u->data(), op->buf, op->nbytes);
  mb.unexpected.insert(u);
  mb.lock.unlock();
  if (small) op->on_complete(op, 0);
}

void InprocTransport::recv(MsgOp* op) {
  Mailbox& mb = *mailboxes_[op->self];
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
      op->on_complete(op, kMismatch);
      sender->on_complete(sender, kMismatch);
      return;
    }
    if (op->deliver.app_thread_only && !tls_on_app_thread) {
      op->matched = sender;
      push_pull(op->self, op);
      return;
    }
    deliver(op, sender->buf);
    op->on_complete(op, 0);
    sender->on_complete(sender, 0);
    return;
  }
  mb.lock.unlock();
  // Eager data: the block is ours until we return it to the pool.
  const int status = u->nbytes == op->nbytes ? 0 : kMismatch;
  if (status == 0) deliver(op, u->data());
  mb.lock.lock();
  free_block(mb, u);
  mb.lock.unlock();
  op->on_complete(op, status);
}

bool InprocTransport::progress(uint32_t image, uint32_t peer, bool on_app_thread) {
  Mailbox& mb = *mailboxes_[image];
  Mailbox::PullQueue& q = mb.pulls[peer];
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
    deliver(op, sender->buf);
    op->on_complete(op, 0);
    sender->on_complete(sender, 0);
    did = true;
  }
}

bool InprocTransport::progress_all(uint32_t image, bool on_app_thread) {
  Mailbox& mb = *mailboxes_[image];
  if (mb.pending_pulls.load(std::memory_order_acquire) == 0) return false;
  bool did = false;
  for (uint32_t peer = 0; peer < images_; ++peer) did |= progress(image, peer, on_app_thread);
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
  }
  return s;
}

size_t InprocTransport::unexpected_count(uint32_t image) const {
  Mailbox& mb = *mailboxes_[image];
  mb.lock.lock();
  size_t n = mb.unexpected.size();
  mb.lock.unlock();
  return n;
}

}  // namespace carflow
