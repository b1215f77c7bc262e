// The transport interface: tagged messages between images, shaped like
// libfabric's tagged API (fi_tsend / fi_trecv): a receive names its source and
// an exact key, the transport matches, moves the bytes and calls completions.
//
// Ops are owned by the caller (the engine embeds one per message CAR) and
// must stay valid until their completion runs. Completions may run on any
// thread: the one that finds the match, or the one that moves the data.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace carflow {

// Where images live: node n (a process) holds images [first[n], first[n+1]),
// numbered node-major as the GASNet notes say. One node with all images is the
// embedded (inproc-only) case.
struct NodeMap {
  uint32_t node = 0;                 // this process
  std::vector<uint32_t> first{0, 1}; // size nodes + 1; first.back() = all images
  std::vector<uint32_t> owner;       // image -> node

  static NodeMap single(uint32_t images) { return make(0, {images}); }
  // counts[n]: images of node n (each at least 1).
  static NodeMap make(uint32_t node, const std::vector<uint32_t>& counts) {
    NodeMap m;
    m.node = node;
    m.first.assign(1, 0);
    for (uint32_t n = 0; n < counts.size(); ++n) {
      m.first.push_back(m.first.back() + counts[n]);
      m.owner.insert(m.owner.end(), counts[n], n);
    }
    return m;
  }
  uint32_t nodes() const { return static_cast<uint32_t>(first.size() - 1); }
  uint32_t total() const { return first.back(); }
  uint32_t base() const { return first[node]; }
  uint32_t local() const { return first[node + 1] - first[node]; }
  uint32_t node_of(uint32_t image) const { return owner[image]; }
  bool is_local(uint32_t image) const { return image - base() < local(); }
};

// Wire tag: (team, sequence, edge). Collective traffic never needs wildcards.
struct MsgKey {
  uint32_t team = 0;
  uint32_t seq = 0;
  uint32_t tag = 0;
  bool operator==(const MsgKey&) const = default;
};

// How received bytes land in the destination: plain copy (fn == nullptr) or a
// combine (RECV_REDUCE): fn(ctx, dst, incoming, nbytes).
struct Deliver {
  void (*fn)(void* ctx, void* dst, const void* incoming, size_t nbytes) = nullptr;
  void* ctx = nullptr;
  // Client reduction functions without CF_COLL_AMSAFE must run on application
  // threads inside carflow calls (GASNet collectives notes v1.7, "Registration of functions").
  bool app_thread_only = false;
  // fn may be called on parts of the message, each a whole number of
  // units long, at its offset in the destination (dst = buf + offset).
  uint32_t unit = 1;
};

struct MsgOp;
using MsgCompletion = void (*)(MsgOp* op, int status);

struct MsgOp {
  // Filled by the caller.
  uint32_t self = 0;         // this side's image (node-global index)
  uint32_t peer = 0;         // the other side's image
  MsgKey key;
  void* buf = nullptr;       // send: source bytes; receive: destination
  uint64_t nbytes = 0;
  Deliver deliver;           // receives only
  MsgCompletion on_complete = nullptr;
  void* owner = nullptr;     // the caller's context for on_complete
  // Sends: the sender's collective has already failed with this status (a
  // lost peer upstream); the receive completes with it instead of data, so
  // a failure travels along the DAG's message edges like data does.
  int status = 0;
  // Carried beside the data like `status` (engine/arg_check.h): sends fill it
  // with the collective's argument digest (or, with a failed status, the
  // mismatch report); a receive finds the sender's there when it completes.
  // 0 = none (CF_CHECK off).
  uint64_t digest = 0;

  // Transport-private state (intrusive queues, matched partner, data held
  // for a later delivery).
  MsgOp* next = nullptr;
  MsgOp* matched = nullptr;
  void* held = nullptr;
};

struct TransportStats {
  uint64_t messages = 0;        // sends started
  uint64_t bytes = 0;
  uint64_t eager = 0;           // sends copied into an internal buffer
  uint64_t direct = 0;          // sends copied straight into a posted receive
  uint64_t single_copy = 0;     // large messages copied once, sender to receiver
  uint64_t unexpected = 0;      // messages that arrived before their receive
  uint64_t fastbox = 0;         // small messages handed over in a per-VC ring (inproc)
};

// What the transport asks of the engine.
class TransportHooks {
 public:
  virtual ~TransportHooks() = default;
  // Deferred data movement on VC (image <- peer) is queued (e.g. a matched
  // large message); the engine must make sure progress(image, peer) runs soon.
  // app_thread_only: only an application thread may run it.
  virtual void deferred_work(uint32_t image, uint32_t peer, bool app_thread_only) = 0;
  // A message was left for `image` to take (it polls, or is woken).
  virtual void message_waiting(uint32_t image) { (void)image; }
  // The unexpected-message pool could not hold a message of nbytes from
  // `src` to `image` (an allocation failed; injected: CF_FAULT said so). The
  // message is gone, so a receive of this node would wait for it forever:
  // the engine fails the node. Called with no transport lock held.
  virtual void out_of_memory(uint32_t image, uint32_t src, uint64_t nbytes, bool injected) {
    (void)image, (void)src, (void)nbytes, (void)injected;
  }
};

// A receive's or send's status when its message could not be held (CF_ERR_NO_MEM).
constexpr int kNoMemStatus = -3;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;
  virtual void send(MsgOp* op) = 0;
  // Whether send_now and recv_now may ever say yes: a transport that
  // never does spares its callers the call (a plain load, not a virtual
  // call per message).
  bool takes_now() const { return takes_now_; }
  // A message the transport can take at once and forget (its bytes copied
  // out, nothing to call back, no argument digest): true when it did, and
  // the send is complete; false, with nothing done, and the caller send()s
  // it. The host rings take data of one slot this way (OfiTransport).
  virtual bool send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                        int status) {
    (void)self, (void)peer, (void)key, (void)buf, (void)nbytes, (void)status;
    return false;
  }
  virtual void recv(MsgOp* op) = 0;
  // A plain receive (no delivery function, no argument digest) whose
  // message the transport can hand over at once: true, its bytes in buf
  // and the receive's status in *status (a sender's failure, or the
  // mismatch status for a message of another size); false, with nothing
  // done, and the caller recv()s it. The host rings take the next message
  // of the sender's ring this way (OfiTransport).
  virtual bool recv_now(uint32_t self, uint32_t peer, const MsgKey& key, void* buf, uint64_t nbytes, int* status) {
    (void)self, (void)peer, (void)key, (void)buf, (void)nbytes, (void)status;
    return false;
  }
  // Runs deferred work of VC (image <- peer); returns true when it did some.
  // on_app_thread: the caller is an application thread.
  virtual bool progress(uint32_t image, uint32_t peer, bool on_app_thread) = 0;
  // The same for every VC into `image` (a cheap check when there is none).
  virtual bool progress_all(uint32_t image, bool on_app_thread) = 0;
  // Whether messages or copies wait for `image` to take them in
  // progress_all (a thread about to sleep looks here after it announced
  // itself; senders that leave them call TransportHooks::message_waiting or
  // deferred_work after).
  virtual bool messages_waiting(uint32_t image) const {
    (void)image;
    return false;
  }
  virtual TransportStats stats() const = 0;
  // Transports between nodes: who to tell about deferred work, and a wait
  // object. wait() sleeps until the transport may have news or `wake_fd`
  // (an eventfd the engine writes to wake this image) is readable, at most
  // timeout_ms; the default cannot sleep on anything and only yields.
  virtual void set_hooks(TransportHooks* hooks) { (void)hooks; }
  // Moves bytes of this node's outbound large messages as far as there is
  // room (taking the grants that came for them), completing nothing and
  // calling no callback, so that a thread may call it from inside a CAR: a
  // long local copy calls it between slices and so keeps a stream fed
  // while the receiver copies out.
  virtual void pump_sends() {}
  virtual void wait(int wake_fd, int timeout_ms) { (void)wake_fd, (void)timeout_ms; }
  // Ends the wait() of this node's sleeping threads (the engine has news).
  virtual void wake_waiters() {}
  // This node lost a peer or failed itself, so every collective fails:
  // every receive and send the transport holds, and every later one it is
  // given, completes with `status` and moves no more bytes. A receive's
  // completion is then the last time anything writes into its buffer, so
  // a wait that returns once its collective is done leaves the caller's
  // buffers alone. Callable from any thread, with no transport lock held.
  virtual void fail_all(int status) { (void)status; }
  // CF_FAULT=nomem:unexpected: the next block the unexpected-message pool
  // takes fails as if out of memory.
  void fail_next_unexpected_block() { fail_next_block_.store(true, std::memory_order_relaxed); }

 protected:
  // Whether this block allocation is the injected failure (once per arming).
  bool injected_nomem() {
    return fail_next_block_.load(std::memory_order_relaxed) && fail_next_block_.exchange(false);
  }
  bool takes_now_ = false;  // set by a transport that overrides send_now and recv_now
  std::atomic<bool> fail_next_block_{false};
};

}  // namespace carflow

// Thread-locals read on every call: the initial-exec model reads them at a
// fixed offset from the thread pointer instead of calling __tls_get_addr,
// which the default model of a shared library does on each access. The
// library's few such variables fit the static TLS surplus glibc keeps for
// libraries loaded with dlopen. Only for variables with constant
// initialization and no destructor, and with external linkage: for an
// initial-exec variable with internal linkage (static, or in an anonymous
// namespace) the gold linker of binutils 2.40 writes a relocation in the
// shared library that resolves to offset 0 of its TLS block, the guard of
// another variable, so two variables share a byte (tests/tls_relocs.sh
// checks the built library).
#define CF_FAST_TLS __attribute__((tls_model("initial-exec")))

namespace carflow {
// True on application (image) threads inside carflow calls; false on helper
// threads (oneTBB workers). Set by the engine; read by transports to decide
// whether a Deliver marked app_thread_only may run here.
inline thread_local bool tls_on_app_thread CF_FAST_TLS = false;
}  // namespace carflow
