// OfiTransport's private types (operation contexts, the wire header,
// unexpected blocks, per-image queues, streams) and wire constants, shared
// by its source files. Not for other users of the transport.
#pragma once

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

namespace carflow {
// The wire format and the private parts of OfiTransport, shared by its
// source files (ofi_endpoint.cc, ofi_protocol.cc, ofi_host_path.cc,
// ofi_progress.cc).
namespace ofi_wire {

constexpr int kMismatch = -7;   // CF_ERR_MISMATCH
constexpr int kTransport = -4;  // CF_ERR_TRANSPORT
constexpr uint64_t kTag = 0xCF;  // every carflow message; keys are matched in software
// Unexpected blocks come in two pooled sizes: small, and the largest eager
// message (a root running ahead of its receivers files thousands).
constexpr uint64_t kSmallBlock = 256;

enum : uint8_t { kEager = 1, kRts = 2, kFin = 3, kCredit = 4,
                 kRingRts = 5 };  // kRingRts: an RTS from the host ring, kept as unexpected
enum class CtxKind : uint8_t { Rx, Tx, Read };

inline std::string fi_error(const char* what, ssize_t ret) {
  return std::string(what) + ": " + fi_strerror(static_cast<int>(-ret));
}

}  // namespace ofi_wire
using namespace ofi_wire;

// Every libfabric operation context starts with the provider's scratch space.
struct OfiCtx {
  fi_context2 fi;
  CtxKind kind;
};

// 80 bytes: a multiple of 16, so eager payloads after it stay 16-byte
// aligned for reduction kernels.
struct alignas(16) OfiTransport::Header {
  uint8_t type = 0;
  int8_t status = 0;  // eager / RTS: the sender's failure, passed on (MsgOp::status)
  uint8_t pad[2] = {};
  uint32_t credits = 0;   // credits returned to the receiver of this header
  uint32_t src_node = 0;
  uint32_t src = 0, dst = 0;  // images
  MsgKey key;
  uint64_t nbytes = 0;
  uint64_t addr = 0;    // RTS: remote address; FIN: status
  uint64_t rkey = 0;    // RTS: registration key
  uint64_t cookie = 0;  // RTS / FIN: the sender's MsgOp
  uint64_t digest = 0;  // eager / RTS: MsgOp::digest (engine/arg_check.h)
};
static_assert(sizeof(OfiTransport::Header) == 80, "the wire header: one cache line and the digest");

struct OfiTransport::RxBuf : OfiCtx {
  std::vector<char> data;
  fid_mr* mr = nullptr;
};

struct OfiTransport::TxBuf : OfiCtx {
  std::vector<char> data;
  fid_mr* mr = nullptr;
};

struct OfiTransport::Read : OfiCtx {
  MsgOp* op = nullptr;
  Header h;
  char* temp = nullptr;  // RECV_REDUCE: bytes land here, then combine
  fid_mr* temp_mr = nullptr;
  bool registered_dst = false;
};

// alignas: data() follows the struct and is read as reduction elements.
struct alignas(64) OfiTransport::Unexpected {
  Header h;
  Unexpected* next = nullptr;
  uint64_t capacity = 0;
  bool credit_held = false;  // the sender's credit comes back when this is consumed
  char* data() { return reinterpret_cast<char*>(this + 1); }
};

inline std::pair<uint32_t, MsgKey> OfiTransport::UnexpectedKey::operator()(const Unexpected* u) const {
  return {u->h.src, u->h.key};
}

struct OfiTransport::ImageQueues {
  KeyTable<MsgOp, PostedKey> posted;
  // posted.size(), kept under lock_ and readable without it: a ring poll
  // looks at it before taking the lock to ask whether a message is wanted.
  std::atomic<uint32_t> posted_count{0};
  void posted_changed() {
    posted_count.store(static_cast<uint32_t>(posted.size()), std::memory_order_relaxed);
  }
  KeyTable<Unexpected, UnexpectedKey> unexpected;
  // Deliveries that need this image's own thread (non-AMSAFE combines).
  std::vector<Actions::Delivery> app_only;
  std::atomic<bool> app_only_pending{false};
};

class OfiTransport::ScopedActions {
 public:
  // The first kCached depths come from a plain thread-local array (no TLS
  // wrapper call); t_pool owns every Actions and is touched only to grow.
  ScopedActions() {
    Actions* cached = t_depth < kCached ? t_cached[t_depth] : nullptr;
    actions_ = cached != nullptr ? cached : grow();
    ++t_depth;
  }
  ~ScopedActions() {
    actions_->complete.clear();
    actions_->deliveries.clear();
    actions_->dropped = {};
    --t_depth;
  }
  ScopedActions(const ScopedActions&) = delete;
  ScopedActions& operator=(const ScopedActions&) = delete;
  Actions& operator*() { return *actions_; }

 private:
  static constexpr size_t kCached = 8;
  static Actions* grow() {
    if (t_pool.size() <= t_depth) t_pool.push_back(std::make_unique<Actions>());
    Actions* a = t_pool[t_depth].get();
    if (t_depth < kCached) t_cached[t_depth] = a;
    return a;
  }
  Actions* actions_;
  static thread_local std::vector<std::unique_ptr<Actions>> t_pool;
  static thread_local constinit size_t t_depth CF_FAST_TLS;
  static thread_local constinit Actions* t_cached[kCached] CF_FAST_TLS;
};

struct alignas(64) OfiTransport::StreamOut {
  SpinLock lock;                  // the queues and `lost`
  std::deque<MsgOp*> announced;   // RTS pushed (or backlogged), no answer yet
  std::deque<std::pair<MsgOp*, uint32_t>> granted;  // CTS came: the send and its chunk size
  std::atomic<int> lost{0};
  std::atomic<bool> copying{false};  // a send is being copied in (a hint for the receiver)
  // kSplit grants of sends still announced, in order: the sender writes
  // pieces from the back of each (host_rings.h, split copies). The send's
  // buffer and size are copied here: the FIN that ends the copy may
  // complete the send while a copier looks at its entry.
  struct Split {
    uint64_t cookie;
    const char* src;
    uint64_t nbytes;
    uint64_t dst;    // the receiver's buffer, in the receiver
    uint32_t gen;    // the transfer's generation
    uint64_t piece;  // bytes per piece
  };
  std::deque<Split> splits;
  SpinLock copier;                // the thread copying in; what follows is its
  int writes = -1;                // process_vm_writev into the node's owner is allowed (-1: not asked yet)
  MsgOp* active = nullptr;
  uint32_t chunk = 0;
  uint64_t done = 0;
};

struct alignas(64) OfiTransport::StreamIn {
  struct Matched {
    MsgOp* op;        // nullptr: a declined RTS (FIN only)
    uint64_t cookie;  // the sender's MsgOp
    int decline;      // FIN status when op is nullptr
    uint64_t addr;    // the data in the sender (0: unknown), for a direct read
  };
  SpinLock lock;  // the queue and `lost`
  std::deque<Matched> waiting;
  std::atomic<int> lost{0};
  SpinLock copier;  // the thread copying out; what follows is its
  bool active = false;
  Matched now{};
  bool answered = false;  // the CTS / FIN is in the ring
  bool direct = false;    // this receive reads the sender's buffer itself (read_direct)
  bool split = false;     // this receive is a split copy (advance_split)
  bool settled = false;   // ... whose pieces are all in (its FIN is next)
  int split_status = 0;   // ... and how it ended (a failed read)
  uint32_t gen = 0;       // the last split copy's generation from this node
  uint32_t pieces = 0;    // ... its pieces and their size
  uint64_t piece = 0;
  bool owner_checked = false;  // HostRings::reads_owner asked for this node (once)
  std::atomic<bool> direct_failed{false};  // a direct read from this node failed once: streams only
  std::atomic<uint32_t> accepted{0};  // receives queued or being copied (streams_from_others)
  uint32_t chunk = 0;
  uint64_t done = 0;
  char* temp = nullptr;  // a combine that must run on the image's own thread, or read directly: bytes land here first
};

// A receive's status once its message is taken from a ring: the sender's
// failure, else a mismatch when the sizes differ (sized: they agree).
inline int taken_status(bool sized, int sent_status) {
  return sent_status == 0 && !sized ? kMismatch : sent_status;
}


// A SEND into the host ring of `node` (send and the backlog flush).
inline bool OfiTransport::push_to_ring(uint32_t node, const MsgOp& op) {
  if (op.nbytes <= HostRings::kPayload) {
    return rings_->push_one(node, op.self, op.peer, op.key, op.buf, static_cast<uint32_t>(op.nbytes), op.status,
                            op.digest);
  }
  if (op.nbytes > HostRings::kMaxBytes) {
    return rings_->push_control(node, HostRings::kRts, op.self, op.peer, op.key, op.status, op.digest,
                                reinterpret_cast<uint64_t>(&op), op.nbytes,
                                reinterpret_cast<uint64_t>(op.buf));
  }
  return rings_->push(node, op.self, op.peer, op.key, op.buf, op.nbytes, op.status, op.digest);
}

}  // namespace carflow
