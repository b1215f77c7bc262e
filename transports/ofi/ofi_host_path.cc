// Processes of one host: the shared-memory rings (small messages), the
// streams (large ones), direct reads and split copies (host_rings.h has
// the shared structures); a message taken from a ring is matched like an
// eager arrival.
#include "transports/ofi/ofi_transport.h"


#include <poll.h>
#include "transports/ofi/fabric_lib.h"
#include <sys/uio.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <new>
#include <thread>
#include <tuple>
#include <unordered_set>
#include "transports/ofi/ofi_internal.h"

namespace carflow {

void OfiTransport::set_host_rings(std::unique_ptr<HostRings> rings) {
  rings_ = std::move(rings);
  takes_now_ = rings_ != nullptr;  // send_now and recv_now go through the rings
  ring_backlog_ = std::make_unique<RingBacklog[]>(nodes_);
  streams_out_ = std::make_unique<StreamOut[]>(nodes_);
  streams_in_ = std::make_unique<StreamIn[]>(nodes_);
}


bool OfiTransport::send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                            int status) {
  // CF_FAULT: every message takes send(), where the fault acts; after a
  // failed node, send() also refuses messages to it.
  if (rings_ == nullptr || nbytes > HostRings::kPayload || fault_armed_ ||
      node_failed_.load(std::memory_order_relaxed)) {
    return false;
  }
  // False for a node of another host (no segment) and for a full ring:
  // send() then takes the path it would have.
  return rings_->push_one(map_.node_of(peer), self, peer, key, buf, static_cast<uint32_t>(nbytes), status, 0);
}

bool OfiTransport::recv_now(uint32_t self, uint32_t peer, const MsgKey& key, void* buf, uint64_t nbytes,
                            int* status) {
  if (rings_ == nullptr || nbytes > HostRings::kMaxBytes) return false;  // larger ones come as an RTS
  bool sized = false;
  int32_t sent_status = 0;
  uint64_t digest = 0;
  if (!rings_->take_next(map_.node_of(peer), peer, self, key, buf, nbytes, &sized, &sent_status, &digest)) {
    return false;
  }
  *status = taken_status(sized, sent_status);
  return true;
}

void OfiTransport::complete_taken(MsgOp* op, const char* operand, bool sized, int status) {
  status = taken_status(sized, status);
  if (status == 0 && operand != nullptr && op->nbytes > 0) op->deliver.fn(op->deliver.ctx, op->buf, operand, op->nbytes);
  op->on_complete(op, status);
}

// A sender running ahead has usually left the message next in its ring:
// the receive takes it there, and is never posted. Plain copies land in
// the destination straight from the ring; a combine of one slot runs on the
// slot itself, a longer one's operand goes through this thread's buffer
// first, so that the combine runs with no ring locked. (Nothing between the
// copy and the combine can start another receive on this thread.) A
// combine that must run on the image's own thread takes the posted path.
bool OfiTransport::take_from_ring(MsgOp* op) {
  if (op->nbytes > HostRings::kMaxBytes) return false;  // comes as an RTS, never as data
  if (op->deliver.fn != nullptr) return take_combine_from_ring(op);
  bool sized = false;
  int32_t status = 0;
  if (!rings_->take_next(map_.node_of(op->peer), op->peer, op->self, op->key, op->buf, op->nbytes, &sized,
                         &status, &op->digest)) {
    return false;
  }
  complete_taken(op, nullptr, sized, status);
  return true;
}

char* OfiTransport::combine_operand() {
  struct alignas(64) Operand {
    char bytes[kCombineBytes];
  };
  thread_local std::unique_ptr<Operand> t_operand;
  if (t_operand == nullptr) t_operand = std::make_unique<Operand>();
  return t_operand->bytes;
}

bool OfiTransport::take_combine_from_ring(MsgOp* op) {
  if (op->deliver.app_thread_only || op->nbytes > kCombineBytes) return false;
  bool sized = false;
  int32_t status = 0;
  const uint32_t node = map_.node_of(op->peer);
  // A message of one slot is combined where it lies, under the ring's
  // consumer lock: the combine may run there (not app_thread_only: a
  // built-in or an AM-safe client function, which the GASNet notes let run in a
  // handler), and reading the slot costs no more than copying it would.
  if (op->nbytes <= HostRings::kPayload) {
    auto combine = [](void* ctx, const char* payload, uint32_t n) {
      auto* recv = static_cast<MsgOp*>(ctx);
      recv->deliver.fn(recv->deliver.ctx, recv->buf, payload, n);
    };
    if (!rings_->take_next_in_place(node, op->peer, op->self, op->key, op->nbytes, &sized, &status, &op->digest,
                                    combine, op)) {
      return false;
    }
    complete_taken(op, nullptr, sized, status);  // combined already
    return true;
  }
  char* operand = combine_operand();
  if (!rings_->take_next(node, op->peer, op->self, op->key, operand, op->nbytes, &sized, &status, &op->digest)) {
    return false;
  }
  complete_taken(op, operand, sized, status);
  return true;
}

// A message from a host ring: matched like an eager arrival, without credits.
// The ring is shared memory another process writes: images are checked.
void OfiTransport::arrive_from_ring(const HostRings::Message& m, Actions* actions) {
  if (m.src >= map_.total()) return;
  if (m.type == HostRings::kCts || m.type == HostRings::kFin || m.type == HostRings::kSplit) {
    stream_control(m, actions);
    return;
  }
  if (!map_.is_local(m.dst)) return;
  ImageQueues& q = queues(m.dst);
  MsgOp* posted = take_receive(q, m.src, m.key);
  const bool rts = m.type == HostRings::kRts;
  if (posted == nullptr || rts) {
    Header h;
    h.type = rts ? kRingRts : kEager;
    h.src_node = map_.node_of(m.src);
    h.src = m.src;
    h.dst = m.dst;
    h.key = m.key;
    h.nbytes = rts ? m.size : m.nbytes;
    h.status = static_cast<int8_t>(m.status);
    h.digest = m.digest;
    h.cookie = m.cookie;
    if (rts) h.addr = m.addr;
    if (posted == nullptr) {
      store_unexpected(h, m.data, rts ? 0 : m.nbytes, actions);
    } else {
      match(posted, h, nullptr, nullptr, nullptr, actions);  // an RTS: the stream starts
    }
    return;
  }
  stats_.direct++;
  posted->digest = m.digest;
  const int status = m.status != 0 ? m.status : posted->nbytes == m.nbytes ? 0 : kMismatch;
  actions->deliveries.push_back({posted, status == 0 ? m.data : nullptr, nullptr, nullptr, status, nullptr});
}

// The cookie came from another process: only a send still announced to
// that node is taken.
MsgOp* OfiTransport::answer_announced(StreamOut& out, uint64_t cookie, bool cts, uint64_t size) {
  auto it = std::find(out.announced.begin(), out.announced.end(), reinterpret_cast<MsgOp*>(cookie));
  if (it == out.announced.end()) return nullptr;
  MsgOp* op = *it;
  out.announced.erase(it);
  if (cts) out.granted.emplace_back(op, static_cast<uint32_t>(std::clamp<uint64_t>(size, 1, HostRings::kStreamChunk)));
  // A FIN ends a split copy too: its entry goes (a copier holding a copy
  // of it finds the transfer over).
  std::erase_if(out.splits, [cookie](const StreamOut::Split& sp) { return sp.cookie == cookie; });
  return op;
}

// The grant's fields came from another process: a piece size below a page,
// or no address, leaves the whole copy to the receiver.
void OfiTransport::add_split(StreamOut& out, uint64_t cookie, uint64_t piece, uint64_t addr, int32_t gen) {
  auto it = std::find(out.announced.begin(), out.announced.end(), reinterpret_cast<MsgOp*>(cookie));
  if (it == out.announced.end() || addr == 0 || piece < 4096) return;
  const MsgOp* op = *it;
  out.splits.push_back({cookie, static_cast<const char*>(op->buf), op->nbytes, addr, static_cast<uint32_t>(gen), piece});
}

uint64_t OfiTransport::write_split_pieces(uint32_t node, uint32_t max) {
  StreamOut& out = streams_out_[node];
  uint64_t wrote = 0;
  for (uint32_t written = 0; written < max;) {
    out.lock.lock();
    if (out.splits.empty()) {
      out.lock.unlock();
      break;
    }
    const StreamOut::Split sp = out.splits.front();
    out.lock.unlock();
    if (out.writes < 0) out.writes = rings_->reads_owner(node) ? 1 : 0;
    const bool may = out.writes == 1 && out.lost.load(std::memory_order_acquire) == 0;
    const int64_t k = may ? rings_->split_take_back(node, sp.gen) : -1;
    if (k < 0) {  // the receiver has the rest: this copy is done here
      out.lock.lock();
      if (!out.splits.empty() && out.splits.front().cookie == sp.cookie && out.splits.front().gen == sp.gen) {
        out.splits.pop_front();
      }
      out.lock.unlock();
      continue;
    }
    // The piece is ours until split_done: the receiver waits for it, so the
    // send (and its buffer) lives until then.
    const uint64_t at = static_cast<uint64_t>(k) * sp.piece;
    const uint64_t n = at < sp.nbytes ? std::min(sp.piece, sp.nbytes - at) : 0;
    iovec local{const_cast<char*>(sp.src) + at, n};
    iovec remote{reinterpret_cast<void*>(sp.dst + at), n};
    const bool ok = n == 0 || ::process_vm_writev(rings_->pid_of(node), &local, 1, &remote, 1, 0) ==
                                  static_cast<ssize_t>(n);
    rings_->split_done(node, static_cast<uint32_t>(k), ok);
    if (!ok) out.writes = 0;  // given back; from now on the receivers copy alone
    wrote += ok ? n : 0;
    ++written;
  }
  if (wrote > 0) split_written_.fetch_add(wrote, std::memory_order_relaxed);
  return wrote;
}

// The sender's side of a CTS (grant) or FIN (declined, with a status).
void OfiTransport::stream_control(const HostRings::Message& m, Actions* actions) {
  StreamOut& out = streams_out_[map_.node_of(m.src)];
  out.lock.lock();
  if (m.type == HostRings::kSplit) {
    add_split(out, m.cookie, m.size, m.addr, m.status);
    out.lock.unlock();
    return;
  }
  MsgOp* op = answer_announced(out, m.cookie, m.type == HostRings::kCts, m.size);
  out.lock.unlock();
  if (op != nullptr && m.type == HostRings::kFin) {
    streams_busy_.fetch_sub(1, std::memory_order_acq_rel);
    actions->complete.emplace_back(op, m.status);
  }
}

void OfiTransport::accept_stream(MsgOp* op, uint32_t node, uint64_t cookie, int decline, uint64_t addr,
                                 Actions* actions) {
  StreamIn& in = streams_in_[node];
  in.lock.lock();
  const int lost = in.lost.load(std::memory_order_relaxed);
  if (lost == 0) in.waiting.push_back({op, cookie, decline, addr});
  in.lock.unlock();
  if (lost != 0) {
    if (op != nullptr) actions->complete.emplace_back(op, lost);  // nothing else owns it yet
    return;
  }
  add_host_work(streams_busy_);
  in.accepted.fetch_add(1, std::memory_order_relaxed);
}

bool OfiTransport::advance_streams() {
  if (streams_busy_.load(std::memory_order_acquire) == 0) return false;
  bool did = false;
  for (uint32_t n = 0; n < nodes_; ++n) {
    if (n == node_) continue;
    did |= advance_out(n);
    did |= advance_in(n);
  }
  return did;
}

bool OfiTransport::next_granted(StreamOut& out) {
  if (out.active != nullptr) return true;
  out.lock.lock();
  if (!out.granted.empty()) {
    std::tie(out.active, out.chunk) = out.granted.front();
    out.granted.pop_front();
    out.done = 0;
    out.copying.store(true, std::memory_order_relaxed);
  }
  out.lock.unlock();
  return out.active != nullptr;
}

bool OfiTransport::advance_out(uint32_t node) {
  StreamOut& out = streams_out_[node];
  if (!out.copier.try_lock()) return false;  // another thread is copying
  // Split copies first: up to kSplitPiecesPerCall pieces, then the streams.
  bool did = write_split_pieces(node, kSplitPiecesPerCall) > 0;
  std::pair<MsgOp*, int> finished[8];
  uint32_t count = 0;
  while (count < 8 && next_granted(out)) {
    MsgOp* op = out.active;
    if (const int lost = out.lost.load(std::memory_order_acquire); lost != 0) {
      finished[count++] = {op, lost};
      out.active = nullptr;
      out.copying.store(false, std::memory_order_relaxed);
      continue;
    }
    const uint64_t put = rings_->stream_put(node, static_cast<const char*>(op->buf) + out.done,
                                            op->nbytes - out.done, out.chunk);
    out.done += put;
    did |= put > 0;
    if (out.done < op->nbytes) break;  // the stream is full: the receiver is copying out
    finished[count++] = {op, 0};
    out.active = nullptr;
    out.copying.store(false, std::memory_order_relaxed);
  }
  out.copier.unlock();
  if (count > 0) streams_busy_.fetch_sub(count, std::memory_order_acq_rel);
  for (uint32_t i = 0; i < count; ++i) finished[i].first->on_complete(finished[i].first, finished[i].second);
  return did || count > 0;
}

void OfiTransport::pump_sends() {
  if (rings_ == nullptr || streams_busy_.load(std::memory_order_acquire) == 0) return;
  for (uint32_t node = 0; node < nodes_; ++node) {
    if (node == node_) continue;
    StreamOut& out = streams_out_[node];
    HostRings::Grant grant;
    while (rings_->take_grant(node, &grant)) {
      out.lock.lock();
      if (grant.type == HostRings::kSplit) {
        add_split(out, grant.cookie, grant.size, grant.addr, grant.status);
      } else {
        answer_announced(out, grant.cookie, true, grant.size);
      }
      out.lock.unlock();
    }
    if (!out.copier.try_lock()) continue;
    // No split pieces here: the receiver reads on from the front while
    // this copy runs, and the sender takes the rest from the back once
    // it is done (advance_out). Written between the copy's slices they
    // would stretch that copy past the receiver's reads.
    // advance_out's first step without its endings: a send that is all in,
    // or lost, stays active for the next progress call to complete.
    if (MsgOp* op = next_granted(out) ? out.active : nullptr;
        op != nullptr && out.lost.load(std::memory_order_acquire) == 0 && out.done < op->nbytes) {
      const uint64_t put = rings_->stream_put(node, static_cast<const char*>(op->buf) + out.done,
                                              op->nbytes - out.done, out.chunk);
      out.done += put;
      if (put > 0) pumped_bytes_.fetch_add(put, std::memory_order_relaxed);
    }
    out.copier.unlock();
  }
}

// A direct read pays when this node is also sending to `node` (an
// exchange): each side then copies once, out of the other's buffer, where
// a stream has each copy in and out. One direction alone streams: the
// sender's copy-in and the receiver's copy-out overlap, which beats a
// kernel-assisted read. When the host's images outnumber its cores, a
// receive while no other node streams to this one reads as well: the
// stream's two copies then compete for the same cores, while the read
// leaves the sender's core to others. Several at once (a gather's root)
// stream: the senders' copy-ins then share the root's work, and a read
// costs its reader more than a copy out of shared memory. Plain copies
// only: a combine keeps the stream's chunkwise path.
bool OfiTransport::streams_from_others(uint32_t node) const {
  for (uint32_t n = 0; n < nodes_; ++n) {
    if (n != node && n != node_ && streams_in_[n].accepted.load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

bool OfiTransport::can_read(uint32_t node, const MsgOp& op, uint64_t addr) {
  return op.deliver.fn == nullptr && readable(node, addr);
}

bool OfiTransport::readable(uint32_t node, uint64_t addr) {
  StreamIn& in = streams_in_[node];  // its copier is ours
  if (addr == 0 || in.direct_failed.load(std::memory_order_relaxed)) return false;
  if (!in.owner_checked) {
    in.owner_checked = true;
    if (!rings_->reads_owner(node)) {
      in.direct_failed.store(true, std::memory_order_relaxed);
      return false;
    }
  }
  return true;
}

bool OfiTransport::want_direct(uint32_t node, const MsgOp& op, uint64_t addr) {
  if (!can_read(node, op, addr)) return false;
  if (cores_shared_ && !streams_from_others(node)) return true;
  return sending_to(node);
}

bool OfiTransport::sending_to(uint32_t node) {
  StreamOut& out = streams_out_[node];
  out.lock.lock();
  const bool sending = !out.announced.empty() || !out.granted.empty();
  out.lock.unlock();
  return sending || out.copying.load(std::memory_order_relaxed);
}

// One direction, with a core for each process, a message of at least
// CF_HOST_SPLIT_BYTES (32 KiB): a split copy, each process copying its
// share straight between the user buffers, instead of a stream's two
// copies (the sender's in, the receiver's out): each byte is copied once,
// by whichever side has less else to do. A message of one piece (up to
// 128 KiB) is as a rule read whole by the receiver, which starts on the
// front as it grants: a direct read.
// A stream also needs both processes on a core at once to move past its
// 256 KiB window and to overlap its copies; a split copy goes on with
// whichever runs. When the processes outnumber the cores, want_direct's
// rule holds.
bool OfiTransport::want_split(uint32_t node, const MsgOp& op, uint64_t addr) {
  return options_.split_bytes != 0 && op.nbytes >= options_.split_bytes && !cores_shared_ &&
         can_read(node, op, addr);
}

// A combine (RECV_REDUCE) from CF_HOST_SPLIT_BYTES up to kCombineReadBytes
// while this node is sending to the same node (an exchange of combines:
// recursive doubling's rounds), with a core for each process: a direct
// read of the whole message into a temp (one copy, out of the other's
// buffer), combined from there, as want_direct has plain copies do,
// rather than two streams each with a copy in and a combine out of shared
// memory (two processes, recursive-doubling allreduce: 128 KiB 19.5-23.3
// us against 29-36, 1 MiB 141-153 against 172-184). One direction alone
// keeps the stream: the sender's copy-in then overlaps the receiver's
// combine. Above 2 MiB the stream's overlap of copy and combine wins
// too (4 MiB: 804-837 us streamed, 941-986 read whole).
constexpr uint64_t kCombineReadBytes = uint64_t{2} << 20;

bool OfiTransport::want_combine_read(uint32_t node, const MsgOp& op, uint64_t addr) {
  return op.deliver.fn != nullptr && options_.split_bytes != 0 && op.nbytes >= options_.split_bytes &&
         op.nbytes <= kCombineReadBytes && !cores_shared_ && readable(node, addr) && sending_to(node);
}

bool OfiTransport::read_piece(uint32_t node, MsgOp& op, uint64_t addr, uint64_t piece, uint64_t piece_bytes) {
  const uint64_t at = piece * piece_bytes;
  if (at >= op.nbytes) return true;
  const uint64_t n = std::min(piece_bytes, op.nbytes - at);
  iovec local{static_cast<char*>(op.buf) + at, n};
  iovec remote{reinterpret_cast<void*>(addr + at), n};
  return ::process_vm_readv(rings_->pid_of(node), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

bool OfiTransport::advance_split(uint32_t node, StreamIn& in, MsgOp& op, bool* did) {
  if (!in.answered) {
    // A new generation each time: a sender still looking at an older
    // transfer's word takes nothing of this one.
    in.gen = in.gen % ((1u << HostRings::kSplitGenBits) - 1) + 1;
    in.piece = std::max(kSplitPiece, (op.nbytes / HostRings::kSplitMaxPieces + 4096) / 4096 * 4096);
    in.pieces = static_cast<uint32_t>((op.nbytes + in.piece - 1) / in.piece);
    in.split_status = 0;
    in.settled = false;
    rings_->split_begin(node, in.gen, in.pieces);
    if (!rings_->push_control(node, HostRings::kSplit, op.self, op.peer, op.key, static_cast<int>(in.gen), 0,
                              in.now.cookie, in.piece, reinterpret_cast<uint64_t>(op.buf))) {
      return false;  // the ring back is full: again at the next progress
    }
    in.answered = true;
    *did = true;
  }
  if (!in.settled) {
    // Up to kSplitPiecesPerCall pieces (1 MiB), as the sender writes: a
    // progress call returns to its other work, and to its caller, soon
    // (split_settled below says whether pieces are left).
    for (uint32_t read = 0; read < kSplitPiecesPerCall && in.split_status == 0; ++read) {
      const int64_t k = rings_->split_take_front(node);
      if (k < 0) break;
      if (!read_piece(node, op, in.now.addr, static_cast<uint64_t>(k), in.piece)) {
        in.split_status = kTransport;  // the sender's address was bad, or it is gone
        rings_->split_close(node);
      }
      *did = true;
    }
    int64_t returned = -1;
    if (!rings_->split_settled(node, in.pieces, &returned)) return false;  // pieces left, or the sender writing
    if (returned >= 0 && in.split_status == 0 &&
        (returned >= in.pieces || !read_piece(node, op, in.now.addr, static_cast<uint64_t>(returned), in.piece))) {
      in.split_status = kTransport;
    }
    in.settled = true;
  }
  // FIN: the sender's buffer is read; its send completes (with our status).
  if (!rings_->push_control(node, HostRings::kFin, op.self, op.peer, op.key, in.split_status, 0, in.now.cookie,
                            0)) {
    return false;
  }
  *did = true;
  return true;
}

// The whole message (nbytes) from the sender's buffer into `into`, in
// pieces of 1 MiB; false on any failure (not permitted, the sender gone, a
// bad address from another process), after which the caller streams it.
bool OfiTransport::read_direct(uint32_t node, char* into, uint64_t nbytes, uint64_t addr) {
  const pid_t pid = rings_->pid_of(node);
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  for (uint64_t done = 0; done < nbytes;) {
    const uint64_t n = std::min(kPiece, nbytes - done);
    iovec local{into + done, n};
    iovec remote{reinterpret_cast<void*>(addr + done), n};
    const ssize_t got = ::process_vm_readv(pid, &local, 1, &remote, 1, 0);
    if (got <= 0) return false;
    done += static_cast<uint64_t>(got);
  }
  return true;
}

// A combine that must run on its image's own thread is delivered through
// run(), which parks it there, so any thread may copy out.
bool OfiTransport::advance_in(uint32_t node) {
  StreamIn& in = streams_in_[node];
  if (!in.copier.try_lock()) return false;  // another thread is copying
  bool did = false;
  ScopedActions scoped;
  Actions& actions = *scoped;
  uint32_t count = 0;
  while (count < 8) {
    if (!in.active) {
      in.lock.lock();
      if (!in.waiting.empty()) {
        in.now = in.waiting.front();
        in.waiting.pop_front();
        in.active = true;
      }
      in.lock.unlock();
      if (!in.active) break;
      in.answered = false;
      in.done = 0;
      in.temp = nullptr;
      MsgOp* op = in.now.op;
      in.direct = op != nullptr && (want_direct(node, *op, in.now.addr) || want_combine_read(node, *op, in.now.addr));
      in.split = op != nullptr && !in.direct && want_split(node, *op, in.now.addr);
      in.chunk = HostRings::kStreamChunk;
      if (op != nullptr && op->deliver.fn != nullptr) {
        // A combine runs on whole elements as chunks come in; one that must
        // run on the image's own thread, or whose elements do not fit a
        // chunk, gets the whole message first, and so does one read directly.
        const uint32_t unit = std::max<uint32_t>(1, op->deliver.unit);
        in.chunk = HostRings::kStreamChunk / unit * unit;
        const bool whole = op->deliver.app_thread_only || in.chunk == 0;
        if (whole) in.chunk = HostRings::kStreamChunk;
        if (whole || in.direct) {
          in.temp = static_cast<char*>(std::malloc(op->nbytes));
          if (in.temp == nullptr) throw std::bad_alloc();
        }
      }
    }
    MsgOp* op = in.now.op;
    if (const int lost = in.lost.load(std::memory_order_acquire); lost != 0) {
      if (in.split && in.answered) rings_->split_close(node);
      std::free(in.temp);
      in.temp = nullptr;
      if (op != nullptr) actions.complete.emplace_back(op, lost);
      in.active = false;
      ++count;
      continue;
    }
    if (in.split) {
      if (!advance_split(node, in, *op, &did)) break;
      // A failed read: later receives from the node stream.
      if (in.split_status != 0) in.direct_failed.store(true, std::memory_order_relaxed);
      split_copies_.fetch_add(1, std::memory_order_relaxed);
      actions.complete.emplace_back(op, in.split_status);
      in.active = false;
      ++count;
      continue;
    }
    if (in.direct && !in.answered) {
      // The whole message with one copy (a combine's into its temp,
      // combined below), then FIN (status 0) completes the send. A failed
      // read turns this receive (and later ones from the node) into a
      // stream: the CTS path below rewrites every byte.
      char* into = in.temp != nullptr ? in.temp : static_cast<char*>(op->buf);
      if (in.done < op->nbytes && !read_direct(node, into, op->nbytes, in.now.addr)) {
        in.direct_failed.store(true, std::memory_order_relaxed);
        in.direct = false;
      } else {
        in.done = op->nbytes;
        const bool fin = rings_->push_control(node, HostRings::kFin, op->self, op->peer, op->key, 0, 0,
                                              in.now.cookie, 0);
        if (!fin) {
          break;  // the ring back is full: FIN at the next progress
        }
        in.answered = true;
        did = true;
        direct_reads_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    if (!in.answered) {
      const bool granted = op != nullptr;
      const uint32_t self = granted ? op->self : 0, peer = granted ? op->peer : 0;
      if (!rings_->push_control(node, granted ? HostRings::kCts : HostRings::kFin, self, peer,
                                granted ? op->key : MsgKey{}, granted ? 0 : in.now.decline, 0,
                                in.now.cookie, in.chunk)) {
        break;  // the ring back is full: again at the next progress
      }
      in.answered = true;
      did = true;
      if (!granted) {
        in.active = false;
        ++count;
        continue;
      }
    }
    char* dst = static_cast<char*>(op->buf);
    uint32_t n = 0;
    while (in.done < op->nbytes) {
      const char* chunk = rings_->stream_front(node, &n);
      if (chunk == nullptr) break;
      n = static_cast<uint32_t>(std::min<uint64_t>(n, op->nbytes - in.done));  // sizes from another process
      if (in.temp != nullptr) {
        std::memcpy(in.temp + in.done, chunk, n);
      } else if (op->deliver.fn != nullptr) {
        op->deliver.fn(op->deliver.ctx, dst + in.done, chunk, n);
      } else {
        std::memcpy(dst + in.done, chunk, n);
      }
      rings_->stream_pop(node);
      in.done += n;
      did = true;
    }
    if (in.done < op->nbytes) break;  // the sender is still copying in
    if (in.temp != nullptr) {
      // Through run(): the combine, on the image's own thread if it must be;
      // the Read frees the temp afterwards.
      auto* rd = new Read();
      rd->op = op;
      rd->temp = in.temp;
      rd->h.nbytes = op->nbytes;
      actions.deliveries.push_back({op, in.temp, nullptr, nullptr, 0, rd});
      in.temp = nullptr;
    } else {
      actions.complete.emplace_back(op, 0);
    }
    in.active = false;
    ++count;
  }
  in.copier.unlock();
  if (count > 0) {
    streams_busy_.fetch_sub(count, std::memory_order_acq_rel);
    in.accepted.fetch_sub(count, std::memory_order_relaxed);
  }
  run(actions);
  return did || count > 0;
}

// Set while this thread is inside poll_rings: its deliveries point into the
// thread's batch, so a poll started from one of them (a receive posted by
// a collective that the delivery completed) must not refill it. External
// linkage, as the initial-exec model needs (transports/transport.h).
thread_local constinit bool t_polling_rings CF_FAST_TLS = false;

bool OfiTransport::poll_rings() {
  if (t_polling_rings) return false;
  struct Flag {
    Flag() { t_polling_rings = true; }
    ~Flag() { t_polling_rings = false; }
  } polling;
  if (take_posted()) return true;
  // 16 messages of up to 16 KiB: on the heap, once per polling thread.
  thread_local std::unique_ptr<HostRings::Message[]> batch(new HostRings::Message[16]);
  HostRings::Message* messages = batch.get();
  // Up to 16 messages and 4 KiB, the ones ring_message_wanted lets it take:
  // a message nobody waits for yet (a sender running ahead) stays in the
  // ring, where its receive finds it, instead of costing two more copies
  // through a pooled block: taking them would make a receiver that fell
  // behind slower per message, so it would stay behind.
  bool held = false;
  const uint32_t n = rings_->poll(messages, 16, 4096, &OfiTransport::ring_message_wanted, this, &held);
  // Written only when it changes: every waiting thread polls, and a store
  // each time would bounce the flag's cache line between them.
  if (rings_held_.load(std::memory_order_relaxed) != held) rings_held_.store(held, std::memory_order_relaxed);
  if (n == 0) return false;
  ScopedActions scoped;
  Actions& actions = *scoped;
  {
    std::lock_guard<SpinLock> guard(lock_);
    for (uint32_t i = 0; i < n; ++i) arrive_from_ring(messages[i], &actions);
  }
  run(actions);  // deliveries point into `messages`, alive until here
  return true;
}

bool OfiTransport::take_posted() {
  bool did = false;
  for (uint32_t n = 0; n < nodes_; ++n) {
    uint32_t src = 0, dst = 0;
    MsgKey key;
    if (n == node_ || !rings_->peek_data(n, &src, &dst, &key)) continue;
    if (!map_.is_local(dst) || src >= map_.total() || queues(dst).posted_count.load(std::memory_order_relaxed) == 0) {
      continue;  // the poll's general path deals with it
    }
    MsgOp* op = nullptr;
    char* operand = nullptr;  // a combine's: the incoming operand, combined outside the lock
    bool sized = false;
    int32_t status = 0;
    {
      std::lock_guard<SpinLock> guard(lock_);
      ImageQueues& q = queues(dst);
      op = q.posted.find(src, key);
      if (op == nullptr) continue;
      if (op->deliver.fn != nullptr) {
        if (op->deliver.app_thread_only || op->nbytes > kCombineBytes) continue;
        operand = combine_operand();
      }
      // The message may no longer be next (another thread took it: it is
      // on its way to this receive through that thread's poll).
      if (!rings_->take_next(n, src, dst, key, operand != nullptr ? operand : op->buf, op->nbytes, &sized, &status,
                             &op->digest)) {
        continue;
      }
      take_receive(q, src, key);
      stats_.direct++;
    }
    complete_taken(op, operand, sized, status);
    did = true;
  }
  return did;
}

bool OfiTransport::ring_message_wanted(void* ctx, uint32_t src, uint32_t dst, const MsgKey& key, uint32_t taken,
                                       bool head, bool stuck) {
  auto* t = static_cast<OfiTransport*>(ctx);
  // The ring is memory another process writes: a message for no image of
  // this node, or from no image, is taken and then dropped.
  if (!t->map_.is_local(dst) || src >= t->map_.total()) return true;
  // A ring's first message in a poll is taken, wanted or not (an unwanted
  // one waits as unexpected), when leaving it could stall someone: a
  // receive from its node is posted (a wanted message may be behind it; a
  // wanted one itself always passes here), a stream is under way (its CTS
  // or FIN may be behind it), or the ring stays full (its sender may wait
  // for room that only this can make: a program whose receives come later
  // than its peers' sends, past the ring's 256 messages).
  // Otherwise a message nobody waits for stays where its receive will find
  // it. Taking one per poll regardless would let a receiver waiting on one
  // sender drain another that runs ahead, without bound: every message of
  // that sender would cost two copies through a pooled block, and its
  // run-ahead would take the core from the senders the receiver waits for.
  const uint32_t from_node = t->posted_from_[t->map_.node_of(src)].load(std::memory_order_relaxed);
  if (head && (stuck || from_node != 0 || t->streams_busy_.load(std::memory_order_acquire) != 0)) return true;
  // No receive from its node, or no more receives posted at dst than
  // messages taken already in this poll (a receiver with its one receive,
  // and a sender running ahead): leave it, without the lock.
  if (from_node == 0 || t->queues(dst).posted_count.load(std::memory_order_relaxed) <= taken) return false;
  std::lock_guard<SpinLock> guard(t->lock_);
  return t->queues(dst).posted.contains(src, key);
}

bool OfiTransport::flush_ring_backlogs() {
  if (ring_backlogged_.load(std::memory_order_acquire) == 0) return false;
  bool did = false;
  for (uint32_t n = 0; n < nodes_; ++n) {
    RingBacklog& b = ring_backlog_[n];
    if (!b.lock.try_lock()) continue;  // another thread is at it
    // Completions run after the lock is released: they may start sends.
    MsgOp* pushed[32];
    uint32_t count = 0;
    while (b.head != nullptr && count < 32) {
      MsgOp* op = b.head;
      if (!push_to_ring(n, *op)) break;
      b.head = op->next;
      if (b.head == nullptr) b.tail = nullptr;
      pushed[count++] = op;
    }
    b.lock.unlock();
    if (count == 0) continue;
    ring_backlogged_.fetch_sub(count, std::memory_order_acq_rel);
    for (uint32_t i = 0; i < count; ++i) {
      if (pushed[i]->nbytes > HostRings::kMaxBytes) continue;  // an RTS: its stream completes it
      pushed[i]->on_complete(pushed[i], 0);
    }
    did = true;
  }
  return did;
}

}  // namespace carflow
