// The libfabric protocol: credits and headers, eager and rendezvous
// sends, receives and matching against posted and unexpected messages,
// the completion queue, and running the actions a poll collected.
#include "transports/ofi/ofi_transport.h"


#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "transports/ofi/fabric_lib.h"
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <tuple>
#include <unordered_set>
#include "transports/ofi/ofi_internal.h"

namespace carflow {

thread_local std::vector<std::unique_ptr<OfiTransport::Actions>> OfiTransport::ScopedActions::t_pool;
thread_local constinit size_t OfiTransport::ScopedActions::t_depth CF_FAST_TLS = 0;
thread_local constinit OfiTransport::Actions* OfiTransport::ScopedActions::t_cached[kCached] CF_FAST_TLS = {};

void OfiTransport::fill_credits(PeerNode& node, Header* h) {
  h->credits = node.owed;
  node.owed = 0;
}

void OfiTransport::returned_credit(uint32_t n, Actions* actions) {
  PeerNode& node = peers_[n];
  if (++node.owed >= std::max<uint32_t>(1, options_.credits / 2)) {
    ofi_stats_.credit_msgs++;
    send_control(node, kCredit, 0, actions);
  }
}

bool OfiTransport::post_header(PeerNode& node, const Header& h_in, const void* payload,
                               uint64_t nbytes, Actions* actions) {
  Header h = h_in;
  h.src_node = node_;
  fill_credits(node, &h);
  const uint64_t total = sizeof(Header) + nbytes;
  if (total <= inject_bytes_) {
    alignas(64) char buf[sizeof(Header) + 4096];
    if (total > sizeof buf) return false;
    std::memcpy(buf, &h, sizeof h);
    if (nbytes > 0) std::memcpy(buf + sizeof h, payload, nbytes);
    for (;;) {
      const ssize_t ret = fi_tinject(ep_, buf, total, node.addr, kTag);
      if (ret == 0) return true;
      if (ret != -FI_EAGAIN || lost_now(node) != 0) return false;
      poll_cq(actions);
    }
  }
  TxBuf* tx;
  if (!free_tx_.empty()) {
    tx = free_tx_.back();
    free_tx_.pop_back();
  } else {
    auto owned = std::make_unique<TxBuf>();
    owned->kind = CtxKind::Tx;
    owned->data.resize(sizeof(Header) + options_.eager_bytes);
    if (mr_local_) {
      fi_mr_reg(domain_, owned->data.data(), owned->data.size(), FI_SEND, 0, next_key_++, 0,
                &owned->mr, nullptr);
    }
    tx = owned.get();
    tx_bufs_.push_back(std::move(owned));
  }
  std::memcpy(tx->data.data(), &h, sizeof h);
  if (nbytes > 0) std::memcpy(tx->data.data() + sizeof h, payload, nbytes);
  sends_in_flight_++;
  for (;;) {
    const ssize_t ret = fi_tsend(ep_, tx->data.data(), total,
                                 tx->mr != nullptr ? fi_mr_desc(tx->mr) : nullptr, node.addr, kTag, tx);
    if (ret == 0) return true;
    if (ret != -FI_EAGAIN || lost_now(node) != 0) {
      sends_in_flight_--;
      free_tx_.push_back(tx);
      return false;
    }
    poll_cq(actions);
  }
}

int OfiTransport::failed_send_status(const PeerNode& node) const {
  const int lost = lost_now(node);
  return lost != 0 ? lost : kTransport;
}

// CREDIT, or FIN (cookie: the sender's MsgOp; status: what its SEND completes with).
void OfiTransport::send_control(PeerNode& node, uint8_t type, uint64_t cookie, Actions* actions,
                                int status) {
  Header h;
  h.type = type;
  h.cookie = cookie;
  h.addr = static_cast<uint64_t>(static_cast<int64_t>(status));
  post_header(node, h, nullptr, 0, actions);
}

void OfiTransport::start_send(MsgOp* op, PeerNode& node, Actions* actions) {
  node.credits--;
  Header h;
  h.src = op->self;
  h.dst = op->peer;
  h.key = op->key;
  h.nbytes = op->nbytes;
  h.status = static_cast<int8_t>(op->status);
  h.digest = op->digest;
  stats_.messages++;
  stats_.bytes += op->nbytes;
  if (op->nbytes <= options_.eager_bytes) {
    h.type = kEager;
    const bool injected = sizeof(Header) + op->nbytes <= inject_bytes_;
    const bool ok = post_header(node, h, op->buf, op->nbytes, actions);
    (injected ? ofi_stats_.injected : ofi_stats_.eager)++;
    stats_.eager++;
    actions->complete.emplace_back(op, ok ? 0 : failed_send_status(node));
    return;
  }
  uint64_t key = 0;
  fid_mr* mr = register_buffer(op->buf, op->nbytes, FI_REMOTE_READ, &key);
  if (mr == nullptr) {
    actions->complete.emplace_back(op, kTransport);
    return;
  }
  h.type = kRts;
  h.addr = virt_addr_ ? reinterpret_cast<uint64_t>(op->buf) : 0;
  h.rkey = key;
  h.cookie = reinterpret_cast<uint64_t>(op);
  ofi_stats_.rendezvous++;
  stats_.single_copy++;
  sends_in_flight_++;
  if (!post_header(node, h, nullptr, 0, actions)) {
    sends_in_flight_--;
    release_buffer(op->buf, op->nbytes);
    actions->complete.emplace_back(op, failed_send_status(node));
  }
}

// CF_FAULT's action before a message to another process (off: one
// predictable branch in send()). Writes one line saying what it does and when.
[[gnu::noinline, gnu::cold]] void OfiTransport::inject_fault() {
  const uint64_t before = fault_sent_.fetch_add(1, std::memory_order_relaxed);  // messages already sent
  auto say = [&](const char* what) {
    const long long ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch()).count();
    std::fprintf(stderr, "carflow: CF_FAULT=%s: node %u %s after %llu messages at_ms=%lld\n",
                 options_.fault_text.c_str(), node_, what, static_cast<unsigned long long>(before), ms);
    std::fflush(stderr);
  };
  switch (options_.fault_kind) {
    case 1:  // kill_after:K
      if (before >= options_.fault_value) {
        say("raises SIGKILL");
        raise(SIGKILL);
      }
      break;
    case 2:  // close_link:K
      if (before >= options_.fault_value && !fault_done_.exchange(true)) {
        say("closes a liveness connection");
        if (options_.fault_close_link) options_.fault_close_link();
      }
      break;
    case 3:  // stop:S, once: a process cannot continue itself, so a child wakes it
      if (!fault_done_.exchange(true)) {
        say("stops");
        const pid_t parent = getpid();
        const pid_t child = fork();
        if (child == 0) {
          const uint64_t ms = options_.fault_value;
          const timespec pause{static_cast<time_t>(ms / 1000), static_cast<long>(ms % 1000) * 1000000};
          nanosleep(&pause, nullptr);
          kill(parent, SIGCONT);
          _exit(0);
        }
        if (child > 0) {
          raise(SIGSTOP);
          waitpid(child, nullptr, 0);
        }
        say("continues");
      }
      break;
    case 4:  // delay:US
      if (before == 0) say("delays every message");
      std::this_thread::sleep_for(std::chrono::microseconds(options_.fault_value));
      break;
    default:
      break;
  }
}

void OfiTransport::send(MsgOp* op) {
  if (fault_armed_) [[unlikely]] inject_fault();
  if (rings_ != nullptr) {
    const uint32_t dst_node = map_.node_of(op->peer);
    // Nothing goes to a node that is lost, nor from a node that left the
    // job: its next collective's messages would meet the others' current one.
    if (node_failed_.load(std::memory_order_acquire)) [[unlikely]] {
      const int lost = lost_now_[dst_node].load(std::memory_order_acquire);
      if (lost != 0) {
        op->on_complete(op, lost);
        return;
      }
    }
    const bool streamed = op->nbytes > HostRings::kMaxBytes;
    if (streamed) {
      // Announced before the RTS goes out, so that its CTS finds it.
      StreamOut& out = streams_out_[dst_node];
      out.lock.lock();
      const int lost = out.lost.load(std::memory_order_relaxed);
      if (lost == 0) out.announced.push_back(op);
      out.lock.unlock();
      if (lost != 0) {
        op->on_complete(op, lost);
        return;
      }
      add_host_work(streams_busy_);
      streamed_.fetch_add(1, std::memory_order_relaxed);
    }
    if (push_to_ring(dst_node, *op)) {
      if (streamed) return;  // the SEND completes when its bytes are in the stream
      op->on_complete(op, 0);
      return;
    }
    // Full: the receiver is 256 slots behind (a root running ahead). The
    // SEND waits in the backlog; the sender's next progress pushes it, and a
    // sender that waits for its call paces itself to the receiver.
    ring_spills_.fetch_add(1, std::memory_order_relaxed);
    RingBacklog& b = ring_backlog_[dst_node];
    b.lock.lock();
    const int lost = b.lost;
    if (lost == 0) {
      op->next = nullptr;
      (b.tail != nullptr ? b.tail->next : b.head) = op;
      b.tail = op;
      add_host_work(ring_backlogged_);
    }
    b.lock.unlock();
    // A lost node's streamed sends complete from their announcement.
    if (lost != 0 && !streamed) op->on_complete(op, lost);
    return;
  }
  Actions actions;
  {
    std::lock_guard<SpinLock> guard(lock_);
    PeerNode& node = peers_[map_.node_of(op->peer)];
    if (node.lost != 0) {
      actions.complete.emplace_back(op, node.lost);
    } else if (node.credits == 0 || !node.waiting.empty()) {
      ofi_stats_.credit_waits++;
      node.waiting.push_back(op);  // in order behind earlier waiting sends
      poll_cq(&actions);           // credits may be on their way already
    } else {
      start_send(op, node, &actions);
    }
  }
  run(actions);
}

void OfiTransport::recv(MsgOp* op) {
  if (rings_ != nullptr && take_from_ring(op)) return;
  bool posted = false;
  {
    ScopedActions scoped;
    Actions& actions = *scoped;
    {
      std::lock_guard<SpinLock> guard(lock_);
      ImageQueues& q = queues(op->self);
      Unexpected* u = q.unexpected.take(op->peer, op->key);
      if (u == nullptr) {
        if (peers_[map_.node_of(op->peer)].lost != 0) {
          actions.complete.emplace_back(op, peers_[map_.node_of(op->peer)].lost);
        } else {
          post_receive(q, op);
          posted = true;
        }
      } else {
        match(op, u->h, u->data(), u, nullptr, &actions);
      }
    }
    run(actions);
  }
  // A sender running ahead left the message in the ring, where the poll
  // the receive would wait for finds it: look now, from here (not from
  // inside a poll, whose batch is still being delivered).
  if (posted && rings_ != nullptr) poll_rings();
}

// A receive meets its message: eager data (in a receive buffer or an
// unexpected block) is delivered after the lock is released; an RTS starts
// the read.
void OfiTransport::match(MsgOp* op, const Header& h, const void* data, Unexpected* block, RxBuf* rx,
                         Actions* actions) {
  op->digest = h.digest;  // the receive owns op until it completes
  if (h.nbytes != op->nbytes || h.status != 0) {
    // A mismatch, or the sender's collective failed: no data, the status.
    const int status = h.status != 0 ? h.status : kMismatch;
    actions->deliveries.push_back({op, nullptr, block, rx, status, nullptr});
    if (h.type == kRts) send_control(peers_[h.src_node], kFin, h.cookie, actions, h.status != 0 ? 0 : kMismatch);
    if (h.type == kRingRts) {
      accept_stream(nullptr, h.src_node, h.cookie, h.status != 0 ? 0 : kMismatch, 0, actions);
    }
    return;
  }
  if (h.type == kRingRts) {
    if (block != nullptr) actions->deliveries.push_back({nullptr, nullptr, block, nullptr, 0, nullptr});
    accept_stream(op, h.src_node, h.cookie, -1, h.addr, actions);
    return;
  }
  if (h.type == kEager) {
    stats_.direct += block == nullptr ? 1 : 0;
    actions->deliveries.push_back({op, data, block, rx, 0, nullptr});
    return;
  }
  // RTS: the header is consumed now; the data comes by fi_read.
  if (block != nullptr || rx != nullptr) actions->deliveries.push_back({nullptr, nullptr, block, rx, 0, nullptr});
  start_read(op, h, actions);
}

void OfiTransport::start_read(MsgOp* op, const Header& h, Actions* actions) {
  auto* rd = new Read();
  rd->kind = CtxKind::Read;
  rd->op = op;
  rd->h = h;
  char* dst = static_cast<char*>(op->buf);
  if (op->deliver.fn != nullptr) {
    rd->temp = static_cast<char*>(std::malloc(op->nbytes));
    dst = rd->temp;
  }
  void* desc = nullptr;
  if (mr_local_) {
    uint64_t key;
    fid_mr* mr = register_buffer(dst, op->nbytes, FI_READ, &key);
    rd->registered_dst = mr != nullptr;
    desc = mr != nullptr ? fi_mr_desc(mr) : nullptr;
  }
  PeerNode& node = peers_[h.src_node];
  for (;;) {
    const ssize_t ret = fi_read(ep_, dst, op->nbytes, desc, node.addr, h.addr, h.rkey, rd);
    if (ret == 0) return;
    if (ret != -FI_EAGAIN || lost_now(node) != 0) {
      actions->deliveries.push_back({op, nullptr, nullptr, nullptr, failed_send_status(node), rd});
      return;
    }
    poll_cq(actions);
  }
}

void OfiTransport::handle_arrival(RxBuf* rx, Actions* actions) {
  const Header h = *reinterpret_cast<const Header*>(rx->data.data());
  if (h.src_node >= peers_.size()) {
    post_rx(rx, actions);  // not from a node of this job: dropped
    return;
  }
  PeerNode& node = peers_[h.src_node];
  if (h.credits > 0) {
    node.credits += h.credits;
    while (node.credits > 0 && !node.waiting.empty() && node.lost == 0) {
      MsgOp* op = node.waiting.front();
      node.waiting.pop_front();
      start_send(op, node, actions);
    }
  }
  switch (h.type) {
    case kCredit:
      post_rx(rx, actions);
      return;
    case kFin: {
      auto* op = reinterpret_cast<MsgOp*>(h.cookie);
      sends_in_flight_--;
      release_buffer(op->buf, op->nbytes);
      actions->complete.emplace_back(op, static_cast<int>(static_cast<int64_t>(h.addr)));
      post_rx(rx, actions);
      return;
    }
    case kEager:
    case kRts:
      break;
    default:
      post_rx(rx, actions);
      return;
  }
  if (!map_.is_local(h.dst) || h.src >= map_.total()) {
    post_rx(rx, actions);  // not addressed to an image of this node: dropped
    return;
  }
  ImageQueues& q = queues(h.dst);
  MsgOp* posted = take_receive(q, h.src, h.key);
  if (posted != nullptr) {
    returned_credit(h.src_node, actions);
    match(posted, h, rx->data.data() + sizeof(Header), nullptr, rx, actions);
    return;
  }
  // Unexpected: copy out (eager data, or just the RTS header) and repost.
  Unexpected* u = store_unexpected(h, rx->data.data() + sizeof(Header), h.type == kEager ? h.nbytes : 0, actions);
  if (u != nullptr) u->credit_held = unexpected_held_ > options_.unexpected_bytes;
  if (u == nullptr || !u->credit_held) returned_credit(h.src_node, actions);
  post_rx(rx, actions);
}

OfiTransport::Unexpected* OfiTransport::store_unexpected(const Header& h, const void* data,
                                                         uint64_t data_bytes, Actions* actions) {
  stats_.unexpected++;
  ofi_stats_.unexpected++;
  bool injected = false;
  Unexpected* u = take_block(data_bytes, &injected);
  if (u == nullptr) [[unlikely]] {
    if (!actions->dropped.any) actions->dropped = {true, injected, h.dst, h.src, h.nbytes};
    return nullptr;
  }
  u->h = h;
  u->credit_held = false;
  if (data_bytes > 0) std::memcpy(u->data(), data, data_bytes);
  unexpected_held_ += sizeof(Unexpected) + u->capacity;
  queues(h.dst).unexpected.insert(u);
  return u;
}

OfiTransport::Unexpected* OfiTransport::take_block(uint64_t data_bytes, bool* injected) {
  *injected = injected_nomem();
  if (*injected) [[unlikely]] return nullptr;
  Unexpected* u = nullptr;
  std::vector<Unexpected*>& pool = data_bytes <= kSmallBlock ? free_blocks_ : free_large_blocks_;
  if (data_bytes <= std::max(kSmallBlock, options_.eager_bytes) && !pool.empty()) {
    u = pool.back();
    pool.pop_back();
  } else {
    const uint64_t capacity = data_bytes <= kSmallBlock ? kSmallBlock : std::max(data_bytes, options_.eager_bytes);
    // sizeof(Unexpected) is a multiple of its alignment: so is the total.
    void* raw = std::aligned_alloc(alignof(Unexpected), sizeof(Unexpected) + (capacity + 63) / 64 * 64);
    if (raw == nullptr) return nullptr;
    u = new (raw) Unexpected();
    u->capacity = capacity;
  }
  return u;
}

void OfiTransport::post_receive(ImageQueues& q, MsgOp* op) {
  q.posted.insert(op);
  q.posted_changed();
  std::atomic<uint32_t>& from = posted_from_[map_.node_of(op->peer)];
  from.store(from.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);  // under lock_: no locked add
}

MsgOp* OfiTransport::take_receive(ImageQueues& q, uint32_t src, const MsgKey& key) {
  MsgOp* op = q.posted.take(src, key);
  if (op == nullptr) return nullptr;
  q.posted_changed();
  std::atomic<uint32_t>& from = posted_from_[map_.node_of(src)];
  from.store(from.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  return op;
}

bool OfiTransport::poll_cq(Actions* actions) {
  fi_cq_tagged_entry entries[16];
  bool any = false;
  for (;;) {
    const ssize_t n = fi_cq_read(cq_, entries, 16);
    if (n == -FI_EAGAIN || n == 0) return any;
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_, &err, 0) != 1) return any;
      any = true;
      auto* ctx = static_cast<OfiCtx*>(err.op_context);
      if (ctx == nullptr) continue;
      if (ctx->kind == CtxKind::Tx) {
        sends_in_flight_--;
        free_tx_.push_back(static_cast<TxBuf*>(ctx));
      } else if (ctx->kind == CtxKind::Read) {
        auto* rd = static_cast<Read*>(ctx);
        actions->deliveries.push_back({rd->op, nullptr, nullptr, nullptr, kTransport, rd});
      }
      // A failed receive buffer (endpoint closing) is not reposted.
      continue;
    }
    if (n < 0) return any;
    any = true;
    for (ssize_t i = 0; i < n; ++i) {
      auto* ctx = static_cast<OfiCtx*>(entries[i].op_context);
      switch (ctx->kind) {
        case CtxKind::Rx:
          handle_arrival(static_cast<RxBuf*>(ctx), actions);
          break;
        case CtxKind::Tx:
          sends_in_flight_--;
          free_tx_.push_back(static_cast<TxBuf*>(ctx));
          break;
        case CtxKind::Read: {
          auto* rd = static_cast<Read*>(ctx);
          send_control(peers_[rd->h.src_node], kFin, rd->h.cookie, actions);
          const void* data = rd->temp != nullptr ? rd->temp : rd->op->buf;
          actions->deliveries.push_back({rd->op, data, nullptr, nullptr, 0, rd});
          break;
        }
      }
    }
  }
}

void OfiTransport::report_dropped(Actions::Dropped& dropped) {
  TransportHooks* hooks;
  {
    std::lock_guard<SpinLock> guard(lock_);
    hooks = hooks_;
  }
  if (hooks != nullptr) hooks->out_of_memory(dropped.image, dropped.src, dropped.nbytes, dropped.injected);
  dropped.any = false;
}

void OfiTransport::run(Actions& actions) {
  if (actions.empty()) return;
  // First: a failure that reaches a waiter then finds its cause recorded.
  if (actions.dropped.any) [[unlikely]] report_dropped(actions.dropped);
  struct Later {
    Unexpected* block;
    RxBuf* rx;
    Read* read;
  };
  std::vector<Later> later;
  std::vector<uint32_t> parked;  // images with deliveries for their own thread
  for (auto& d : actions.deliveries) {
    MsgOp* op = d.op;
    if (op != nullptr && d.status == 0 && op->deliver.app_thread_only && !tls_on_app_thread) {
      bool kept = true;
      {
        std::lock_guard<SpinLock> guard(lock_);
        if (d.block == nullptr && d.rx == nullptr && d.read == nullptr && d.data != nullptr && d.data != op->buf) {
          // A host-ring message points into the polling thread's batch, which
          // the next poll overwrites: the parked delivery keeps its own copy
          // in a pooled block, returned like an unexpected one afterwards.
          bool injected = false;
          Unexpected* copy = take_block(op->nbytes, &injected);
          if (copy == nullptr) [[unlikely]] {  // the receive fails instead
            kept = false;
            actions.dropped = {true, injected, op->self, op->peer, op->nbytes};
            d.status = kNoMemStatus;
          } else {
            copy->credit_held = false;
            std::memcpy(copy->data(), d.data, op->nbytes);
            unexpected_held_ += sizeof(Unexpected) + copy->capacity;
            d.data = copy->data();
            d.block = copy;
          }
        }
        if (kept) {
          ImageQueues& q = queues(op->self);
          q.app_only.push_back(d);
          // seq_cst: before deferred_work's look at the sleepers, as the
          // image's last look before sleeping (messages_waiting) is after
          // it announced itself.
          q.app_only_pending.store(true, std::memory_order_seq_cst);
        }
      }
      if (kept) {
        parked.push_back(op->self);
        continue;
      }
      report_dropped(actions.dropped);
    }
    if (op != nullptr) {
      if (d.status == 0 && op->nbytes > 0 && d.data != op->buf) {
        if (op->deliver.fn != nullptr) {
          op->deliver.fn(op->deliver.ctx, op->buf, d.data, op->nbytes);
        } else {
          std::memcpy(op->buf, d.data, op->nbytes);
        }
      }
      op->on_complete(op, d.status);
    }
    if (d.block != nullptr || d.rx != nullptr || d.read != nullptr) later.push_back({d.block, d.rx, d.read});
  }
  for (auto& [op, status] : actions.complete) op->on_complete(op, status);
  if (later.empty() && parked.empty()) return;
  TransportHooks* hooks;
  Actions more;  // completions found while reposting
  {
    std::lock_guard<SpinLock> guard(lock_);
    hooks = hooks_;
    for (const Later& l : later) {
      if (l.rx != nullptr) post_rx(l.rx, &more);
      if (l.block != nullptr) {
        unexpected_held_ -= sizeof(Unexpected) + l.block->capacity;
        if (l.block->credit_held) returned_credit(l.block->h.src_node, &more);
        if (l.block->capacity == kSmallBlock) {
          free_blocks_.push_back(l.block);
        } else if (l.block->capacity == std::max(kSmallBlock, options_.eager_bytes)) {
          free_large_blocks_.push_back(l.block);
        } else {
          l.block->~Unexpected();
          std::free(l.block);
        }
      }
      if (l.read != nullptr) {
        if (l.read->registered_dst) {
          release_buffer(l.read->temp != nullptr ? l.read->temp : l.read->op->buf, l.read->h.nbytes);
        }
        if (l.read->temp != nullptr) {
          // The registration of a temp must not outlive it in the cache.
          auto it = mr_cache_.find({reinterpret_cast<uintptr_t>(l.read->temp), l.read->h.nbytes});
          if (it != mr_cache_.end() && it->second.users == 0) {
            fi_close(&it->second.mr->fid);
            mr_cache_.erase(it);
          }
          std::free(l.read->temp);
        }
        delete l.read;
      }
    }
  }
  for (uint32_t image : parked) {
    if (hooks != nullptr) hooks->deferred_work(image, image, true);
  }
  run(more);
}

}  // namespace carflow
