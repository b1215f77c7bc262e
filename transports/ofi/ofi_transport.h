// ofi: images of other processes and hosts, over libfabric.
//
// One RDM endpoint per process (node), shared by its images; the provider is
// shm between processes of one host and tcp;ofi_rxm across hosts, or
// CF_OFI_PROVIDER. Collective keys (team, sequence, edge) are matched in
// software against per-image posted and unexpected tables, exactly as the
// inproc transport does; libfabric moves headers and bytes. Every wire
// message is a tagged send of an 80-byte Header, followed by data for eager
// messages. Protocols (Cray MPT notes section 2, MPICH notes):
//  - eager (nbytes <= CF_EAGER_BYTES): header and payload in one message.
//    Payloads that fit the provider's inject size go with fi_tinject (no
//    send buffer held: "very short messages packed with their header");
//    larger ones are copied once into a pooled send buffer. Either way the
//    SEND completes at once.
//  - rendezvous (above): the header alone (RTS) carries the sender's buffer
//    address and key; once the receive is matched, the receiver pulls the
//    bytes with fi_read straight into the destination and sends FIN, which
//    completes the SEND. Registrations are cached (MrCache).
//  - one host (set_host_rings): libfabric carries no messages at all. Small
//    ones go through the host rings, large ones through host streams
//    (host_rings.h; RTS in the ring, CTS or FIN back, chunks in shared
//    memory); see the stream members below.
// Flow control: every node pre-posts receive buffers, and a sender holds a
// number of credits per peer node; an eager or RTS message spends one and
// waits in a per-node queue when there is none. The receiver returns credits
// in the header of any message going back, or in an explicit CREDIT message
// when half of them are owed. Unexpected eager data is copied out of the
// receive buffer into a pooled block; while the unexpected bytes held exceed
// CF_OFI_UNEXPECTED_BYTES, credits are returned only when blocks are
// consumed, so a flood of unexpected messages is bounded by that much memory.
//
// Threading: one lock guards the endpoint, the CQ and the tables; engine
// callbacks (completions, deliveries) run after it is released.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "transports/inproc/key_table.h"
#include "transports/ofi/host_rings.h"
#include "transports/spin_lock.h"
#include "transports/transport.h"

struct fid_fabric;
struct fid_domain;
struct fid_ep;
struct fid_cq;
struct fid_av;
struct fid_mr;
struct fi_info;

namespace carflow {

struct OfiOptions {
  std::string provider;                // "" = shm on one host, tcp;ofi_rxm across hosts
  uint64_t eager_bytes = 16384;        // CF_EAGER_BYTES
  uint32_t credits = 32;               // CF_OFI_CREDITS: per peer node
  uint64_t unexpected_bytes = 64 << 20;  // CF_OFI_UNEXPECTED_BYTES
  uint64_t split_bytes = 32 << 10;       // CF_HOST_SPLIT_BYTES (0: no split copies)
  // CF_FAULT, when it applies to this node (engine/config.h FaultSpec):
  // kind 0 = none, 1 kill_after, 2 close_link, 3 stop, 4 delay.
  uint8_t fault_kind = 0;
  uint64_t fault_value = 0;
  std::string fault_text;                 // the spec, for the line the fault writes
  std::function<void()> fault_close_link;  // close_link: closes one liveness connection
};

struct OfiStats {
  uint64_t injected = 0;     // eager messages sent with fi_tinject
  uint64_t eager = 0;        // eager messages sent from a pooled buffer
  uint64_t rendezvous = 0;   // RTS sent (the receiver reads the data)
  uint64_t unexpected = 0;   // eager or RTS arrivals with no posted receive
  uint64_t credit_waits = 0; // sends queued for lack of credits
  uint64_t credit_msgs = 0;  // explicit CREDIT messages sent
  uint64_t mr_hits = 0, mr_misses = 0;
  uint64_t host_ring = 0;    // small messages sent through the host rings
  uint64_t ring_spills = 0;  // ... that found the ring full and waited in the sender's backlog
  uint64_t streamed = 0;     // large messages sent through host streams (RTS on the ring)
  uint64_t direct_reads = 0; // ... that this node received by reading the sender's buffer (CMA)
  uint64_t pumped_bytes = 0; // stream bytes sent from inside a long local copy (pump_sends)
  uint64_t split_copies = 0; // large messages this node received by a split copy with their sender
  uint64_t split_written = 0;  // bytes this node wrote into receivers' buffers (split copies)
};

class OfiTransport final : public Transport {
 public:
  // Opens fabric, domain, endpoint and CQ for `provider` (never ""), for a
  // job of `nodes` nodes of which this is `node`. nullptr and *error on failure.
  static std::unique_ptr<OfiTransport> open(const std::string& provider, uint32_t node,
                                            uint32_t nodes, const OfiOptions& options,
                                            std::string* error);
  ~OfiTransport() override;

  // The endpoint's address, to publish; then connect() with every node's.
  std::string address() const;
  bool connect(const std::vector<std::string>& addresses, std::string* error);
  // Images of each node, set when the images are known (cf_coll_init).
  void set_node_map(const NodeMap& map);
  const std::string& provider() const { return provider_; }
  uint64_t eager_bytes() const { return options_.eager_bytes; }
  uint64_t inject_bytes() const { return inject_bytes_; }
  const OfiOptions& options() const { return options_; }

  // Small messages to nodes on this host go through shared-memory rings
  // (host_rings.h) from now on. Call before the engine starts.
  void set_host_rings(std::unique_ptr<HostRings> rings);
  // The host's images outnumber its cores: a large receive from a node on
  // this host while no other node streams to this one reads the sender's
  // buffer (one copy, on the receiver's core), not only those of an
  // exchange. A stream copies twice, and its overlap of copy-in and
  // copy-out needs two free cores. Call before the engine starts.
  void set_cores_shared(bool shared) { cores_shared_ = shared; }
  // Every receive from, and send to, `node` completes with `status` from now
  // on (the node is lost).
  void fail_node(uint32_t node, int status);
  // fail_node of every other node.
  void fail_all(int status) override;
  // Drives the CQ until every send this node started has left (cf_finalize),
  // at most timeout_ms; false if some are still pending.
  bool quiesce(int timeout_ms);

  const char* name() const override { return "ofi"; }
  void pump_sends() override;
  void send(MsgOp* op) override;
  // One ring slot of data to a node of this host, when the ring has room.
  bool send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                int status) override;
  // The message, when it is next in the sender's ring (take_from_ring).
  bool recv_now(uint32_t self, uint32_t peer, const MsgKey& key, void* buf, uint64_t nbytes,
                int* status) override;
  void recv(MsgOp* op) override;
  bool progress(uint32_t image, uint32_t peer, bool on_app_thread) override;
  bool progress_all(uint32_t image, bool on_app_thread) override;
  TransportStats stats() const override;
  OfiStats ofi_stats() const;
  void set_hooks(TransportHooks* hooks) override;
  void wait(int wake_fd, int timeout_ms) override;
  // Deliveries parked for `image`'s own thread (a combine only an
  // application thread may run, reached on another thread).
  bool messages_waiting(uint32_t image) const override;
  void wake_waiters() override {
    if (rings_ != nullptr) rings_->wake();
  }

  struct Header;
  struct RxBuf;
  struct TxBuf;
  struct Read;
  struct Unexpected;

 private:
  OfiTransport() = default;
  // Work found under the lock, run after it is released.
  struct Actions {
    std::vector<std::pair<MsgOp*, int>> complete;       // on_complete(op, status)
    struct Delivery {
      MsgOp* op;
      const void* data;
      Unexpected* block;   // returned to the pool afterwards (or nullptr)
      RxBuf* rx;           // reposted afterwards (or nullptr)
      int status;
      Read* read;          // a finished rendezvous read (temp freed, FIN sent)
    };
    std::vector<Delivery> deliveries;
    // A message the unexpected pool could not hold (no memory): told to the
    // hooks once the lock is released.
    struct Dropped {
      bool any = false;
      bool injected = false;
      uint32_t image = 0, src = 0;
      uint64_t nbytes = 0;
    } dropped;
    bool empty() const { return complete.empty() && deliveries.empty() && !dropped.any; }
  };
  // The Actions of one call on the message path, reused per thread and
  // nesting depth (run() may start sends and receives that need their
  // own): once warm, finding work allocates nothing.
  class ScopedActions;
  struct PostedKey {
    std::pair<uint32_t, MsgKey> operator()(const MsgOp* op) const { return {op->peer, op->key}; }
  };
  struct UnexpectedKey {
    std::pair<uint32_t, MsgKey> operator()(const Unexpected* u) const;
  };
  struct ImageQueues;
  struct PeerNode {
    uint64_t addr = 0;                  // fi_addr_t
    uint32_t credits = 0;               // we may send this many eager/RTS messages
    uint32_t owed = 0;                  // credits to return to it
    std::deque<MsgOp*> waiting;         // sends waiting for credits, in order
    int lost = 0;                       // status once lost
  };

  bool poll_cq(Actions* actions);                  // under lock_
  bool poll_rings();                               // without lock_
  static bool ring_message_wanted(void* ctx, uint32_t src, uint32_t dst, const MsgKey& key, uint32_t taken,
                                  bool head, bool stuck);  // HostRings::Wanted; takes lock_
  // Posted receives change only through these (under lock_): they keep
  // ImageQueues::posted_count and posted_from_ with the table.
  void post_receive(ImageQueues& q, MsgOp* op);
  MsgOp* take_receive(ImageQueues& q, uint32_t src, const MsgKey& key);
  [[gnu::always_inline]] inline bool push_to_ring(uint32_t node, const MsgOp& op);  // false: the ring is full
  // Pushes backlogged ring sends that now fit (without lock_); true if any did.
  bool flush_ring_backlogs();
  void arrive_from_ring(const HostRings::Message& m, Actions* actions);  // under lock_
  // Under lock_; nullptr when no memory, the message dropped and noted in *actions.
  Unexpected* store_unexpected(const Header& h, const void* data, uint64_t data_bytes, Actions* actions);
  // Under lock_: a pooled block of at least data_bytes; nullptr when no
  // memory (*injected: CF_FAULT's failure).
  Unexpected* take_block(uint64_t data_bytes, bool* injected);
  void report_dropped(Actions::Dropped& dropped);  // to the hooks, outside lock_
  void free_block(Unexpected* u);  // an unexpected message's block, not pooled (under lock_)
  // Every image's unexpected messages (under lock_); held credits go back through `actions` (may be null).
  void free_queued_messages(Actions* actions);
  void handle_arrival(RxBuf* rx, Actions* actions);  // under lock_
  void start_send(MsgOp* op, PeerNode& node, Actions* actions);  // under lock_, spends a credit
  void match(MsgOp* op, const Header& h, const void* data, Unexpected* block, RxBuf* rx,
             Actions* actions);                    // under lock_
  void start_read(MsgOp* op, const Header& h, Actions* actions);  // under lock_
  void post_rx(RxBuf* rx, Actions* actions);      // under lock_
  void send_control(PeerNode& node, uint8_t type, uint64_t cookie, Actions* actions, int status = 0);
  void fill_credits(PeerNode& node, Header* h);
  void returned_credit(uint32_t node, Actions* actions);  // under lock_
  bool post_header(PeerNode& node, const Header& h, const void* payload, uint64_t nbytes,
                   Actions* actions);              // under lock_; inject or pooled buffer
  void run(Actions& actions);                      // without lock_
  fid_mr* register_buffer(void* buf, uint64_t nbytes, uint64_t access, uint64_t* key);
  void release_buffer(void* buf, uint64_t nbytes);
  ImageQueues& queues(uint32_t image);

  std::string provider_;
  OfiOptions options_;
  // CF_FAULT: tested once per message sent to another process; the rest is out of line.
  bool fault_armed_ = false;  // set by open()
  std::atomic<bool> node_failed_{false};  // fail_node was called
  // Per node, its lost status, set by fail_node before it takes lock_: a
  // send that a gone peer's provider refuses with EAGAIN for ever (its
  // shared-memory region unlinked) gives up there, lock_ held.
  std::unique_ptr<std::atomic<int>[]> lost_now_;
  int lost_now(const PeerNode& node) const {
    return lost_now_[static_cast<size_t>(&node - peers_.data())].load(std::memory_order_acquire);
  }
  // What an operation with a node that the provider refused completes with.
  int failed_send_status(const PeerNode& node) const;
  std::atomic<uint64_t> fault_sent_{0};
  std::atomic<bool> fault_done_{false};
  void inject_fault();
  uint32_t node_ = 0, nodes_ = 1;
  uint64_t inject_bytes_ = 0;
  bool virt_addr_ = false, prov_key_ = false, mr_local_ = false;
  uint64_t next_key_ = 1;
  fi_info* info_ = nullptr;
  fid_fabric* fabric_ = nullptr;
  fid_domain* domain_ = nullptr;
  fid_ep* ep_ = nullptr;
  fid_cq* cq_ = nullptr;
  fid_av* av_ = nullptr;
  int wait_fd_ = -1;  // the CQ's wait object, when the provider has one

  // Short sections (queue and table updates) on every message: a spin lock
  // costs less than a futex mutex there. Sections that call into libfabric
  // (CQ reads, without host rings) are longer; a waiter yields after a few
  // dozen spins (transports/spin_lock.h).
  mutable SpinLock lock_;
  TransportHooks* hooks_ = nullptr;  // guarded by lock_
  NodeMap map_;
  std::vector<PeerNode> peers_;
  std::vector<std::unique_ptr<ImageQueues>> images_;  // by local image
  std::vector<std::unique_ptr<RxBuf>> rx_bufs_;
  std::vector<TxBuf*> free_tx_;
  std::vector<std::unique_ptr<TxBuf>> tx_bufs_;
  std::vector<Unexpected*> free_blocks_;        // capacity kSmallBlock
  std::vector<Unexpected*> free_large_blocks_;  // capacity eager_bytes
  uint64_t unexpected_held_ = 0;   // bytes in unexpected blocks
  // Receives posted at this node's images from each node's images, kept
  // under lock_ and readable without it: a ring's first message that no
  // receive wants is taken (as unexpected) only when a receive from its
  // node waits, possibly behind it, or when its sender may be out of
  // room (ring_message_wanted).
  std::unique_ptr<std::atomic<uint32_t>[]> posted_from_;
  // The last ring poll left a full ring's first message untaken: wait()
  // yields instead of sleeping until polls find the ring stuck.
  std::atomic<bool> rings_held_{false};
  // This process's own host-path work (backlogged sends, streams, a held
  // ring): wait() yields rather than sleeps while there is some, and looks
  // again once its sleep is announced (HostRings::wait).
  bool host_work_pending() const {
    return ring_backlogged_.load(std::memory_order_seq_cst) != 0 ||
           streams_busy_.load(std::memory_order_seq_cst) != 0 || rings_held_.load(std::memory_order_relaxed);
  }
  // Counts new host-path work and rings this node's doorbell for a thread
  // on its way to sleep that looked before it (seq_cst: before the look
  // at the sleepers).
  void add_host_work(std::atomic<uint32_t>& count) {
    count.fetch_add(1, std::memory_order_seq_cst);
    rings_->wake();
  }
  uint64_t sends_in_flight_ = 0;   // pooled sends and RTS not yet finished
  struct MrEntry {
    fid_mr* mr = nullptr;
    uint64_t key = 0;
    uint32_t users = 0;
    uint64_t last_use = 0;
  };
  std::map<std::pair<uintptr_t, uint64_t>, MrEntry> mr_cache_;
  uint64_t mr_clock_ = 0;
  TransportStats stats_;
  OfiStats ofi_stats_;
  std::unique_ptr<HostRings> rings_;
  std::atomic<uint64_t> ring_spills_{0};
  // Host-ring sends that found their ring full, per destination node, in
  // order. They wait here, their SENDs not complete, until progress pushes
  // them as the receiver frees slots: a full ring means the receiver is
  // behind, and sending through libfabric instead (slower for it to take)
  // would keep it behind for good.
  struct alignas(64) RingBacklog {
    SpinLock lock;
    MsgOp* head = nullptr;  // linked through MsgOp::next
    MsgOp* tail = nullptr;
    int lost = 0;           // the node is lost: sends complete with this
  };
  std::unique_ptr<RingBacklog[]> ring_backlog_;  // by node, with rings_
  std::atomic<uint32_t> ring_backlogged_{0};     // sends in every backlog

  // Messages above HostRings::kMaxBytes to a node on this host go through
  // its stream (host_rings.h): the RTS rides the ring, the receiver grants
  // the stream (CTS) or declines (FIN), and both sides copy chunks in
  // their progress calls. One transfer at a time per node pair and
  // direction, in the order the receiver matched them.
  struct StreamOut;  // per destination node: sends announced, granted, being copied in
  struct StreamIn;   // per source node: receives matched, being copied out
  std::unique_ptr<StreamOut[]> streams_out_;
  std::unique_ptr<StreamIn[]> streams_in_;
  std::atomic<uint32_t> streams_busy_{0};  // stream sends and receives not yet complete
  std::atomic<uint64_t> streamed_{0};      // sends that went through a stream
  std::atomic<uint64_t> pumped_bytes_{0};  // OfiStats::pumped_bytes
  std::atomic<uint64_t> direct_reads_{0};  // stream receives read with process_vm_readv
  std::atomic<uint64_t> split_copies_{0};  // OfiStats::split_copies
  std::atomic<uint64_t> split_written_{0};  // OfiStats::split_written
  bool cores_shared_ = false;               // set_cores_shared
  // Under out.lock: the send announced as `cookie`, off `announced` (onto
  // `granted` with its chunk size when cts); nullptr for none.
  static MsgOp* answer_announced(StreamOut& out, uint64_t cookie, bool cts, uint64_t size);
  // Under out.copier: when no send is being copied in, the next granted one
  // becomes active; true when one is.
  static bool next_granted(StreamOut& out);
  void stream_control(const HostRings::Message& m, Actions* actions);  // CTS / FIN, under lock_
  // A receive met an RTS from the ring; decline >= 0: answer FIN with it
  // instead. addr: the data in the sender (0: unknown).
  void accept_stream(MsgOp* op, uint32_t node, uint64_t cookie, int decline, uint64_t addr,
                     Actions* actions);  // under lock_
  // Both directions between this node and `node` busy: a receive reads the
  // sender's buffer itself (process_vm_readv, one copy) instead of the
  // stream's two (the sender's in, its own out); false when it cannot.
  bool want_direct(uint32_t node, const MsgOp& op, uint64_t addr);
  // This node has a stream to `node` announced, granted or being copied.
  bool sending_to(uint32_t node);
  // This receive may read the sender's buffer (a plain copy, and readable).
  bool can_read(uint32_t node, const MsgOp& op, uint64_t addr);
  // An address, reads from `node` allowed and not failed before.
  bool readable(uint32_t node, uint64_t addr);
  // A mid-size combine in an exchange, a core for each process: a direct
  // read into a temp, then combined, instead of a stream.
  bool want_combine_read(uint32_t node, const MsgOp& op, uint64_t addr);
  // A large receive with the sender's core free to help: a split copy
  // (host_rings.h) instead of a stream.
  bool want_split(uint32_t node, const MsgOp& op, uint64_t addr);
  // A split copy's piece (of the receiver's op) from the sender's buffer at addr.
  bool read_piece(uint32_t node, MsgOp& op, uint64_t addr, uint64_t piece, uint64_t piece_bytes);
  // The receiving side of a split copy, one step (under the StreamIn's
  // copier): true when it is over and its FIN is pushed.
  bool advance_split(uint32_t node, StreamIn& in, MsgOp& op, bool* did);
  // The sending side: up to `max` pieces of the split copies granted by
  // `node` (under its StreamOut's copier); returns the bytes written.
  uint64_t write_split_pieces(uint32_t node, uint32_t max);
  // Under out.lock: a kSplit grant for a send still announced (it stays
  // there until the FIN).
  static void add_split(StreamOut& out, uint64_t cookie, uint64_t piece, uint64_t addr, int32_t gen);
  // Split copies in pieces of this many bytes (more for a message of more
  // than HostRings::kSplitMaxPieces of them).
  static constexpr uint64_t kSplitPiece = 128 << 10;
  // Pieces a progress call reads (receiver) or writes (sender) at most.
  static constexpr uint32_t kSplitPiecesPerCall = 8;
  // A receive whose message is next in its sender's ring takes it from
  // there (HostRings::take_next) and completes; false: post it.
  bool take_from_ring(MsgOp* op);
  bool take_combine_from_ring(MsgOp* op);  // take_from_ring of a receive that combines
  // A combine of more than one slot taken from a ring lands in this
  // thread's operand buffer first, so that the combine runs with no ring
  // locked (one slot is combined in place). Up to kCombineBytes (the
  // poll's batch limit): for larger messages the extra pass over the
  // operand costs more than the posted path.
  static constexpr uint64_t kCombineBytes = 4096;
  static char* combine_operand();
  // Completes a receive taken from a ring (take_next's sized and status):
  // a size mismatch fails it; a combine's operand (or nullptr: the bytes
  // are in place) is combined first, with no lock held.
  [[gnu::always_inline]] static inline void complete_taken(MsgOp* op, const char* operand, bool sized, int status);
  // A ring's next message whose receive is posted here is taken straight
  // into the receive's buffer (as take_from_ring would have) and the
  // receive completes: the waiting receive's usual way in, without the
  // poll's batch, matching and delivery. True if one was.
  bool take_posted();
  // Some node other than `node` has stream receives queued or being copied here.
  bool streams_from_others(uint32_t node) const;
  bool read_direct(uint32_t node, char* into, uint64_t nbytes, uint64_t addr);
  bool advance_streams();  // without lock_
  bool advance_out(uint32_t node);
  bool advance_in(uint32_t node);
};

}  // namespace carflow
