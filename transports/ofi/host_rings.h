// Host rings: small messages between processes of one host through shared
// memory, beside libfabric (the fastboxes of MPICH Nemesis and Open MPI's
// vader: one cache-line handover instead of a provider round trip).
//
// Every node owns one segment (POSIX shm) holding one ring per source node;
// a ring is a bounded single-producer single-consumer queue of kSlots slots
// of 1088 bytes, a message taking one or more consecutive slots (Vyukov's sequence protocol: a slot is free for the producer
// at position p when its seq is p, full for the consumer when it is p + 1).
// The image threads of a sending process share a ring through a spin lock;
// the threads of the receiving process take turns draining it (try-lock).
// Keys are matched exactly, so messages need no common order with the
// libfabric path.
//
// Streams (large messages): beside each ring, the segment holds a stream of
// kStreamSlots chunks of kStreamChunk bytes per source node, with the same
// sequence protocol. A large message is announced by an RTS in the ring;
// once its receive is matched, the receiver grants the stream (CTS, one
// transfer at a time per node pair), the sender copies the bytes in chunk
// by chunk and the receiver copies them out as they come: two copies that
// overlap, instead of a kernel-assisted single copy (process_vm_readv can
// run at a fraction of memcpy's speed).
//
// Split copies (messages of CF_HOST_SPLIT_BYTES, default 32 KiB, and more,
// OfiTransport::want_split): both processes copy, each its share,
// straight between the user buffers. The receiver reads pieces from the
// front of the sender's buffer (process_vm_readv) while the sender writes
// pieces from the back into the receiver's buffer (process_vm_writev); each
// takes its next piece from one word in the receiver's segment, so the
// process with less else to do copies more. One transfer at a time per node
// pair, told apart by a generation number in that word.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "transports/line_pair.h"
#include "transports/spin_lock.h"
#include "transports/transport.h"

namespace carflow {

class HostRings {
 public:
  // 256 slots absorb a root that runs ahead of its receivers, where a
  // smaller ring would fill and hold the root back (its sends wait in the
  // backlog); 1 KiB payloads cover the small-message range (a slot is 17
  // cache lines, only those holding data are touched).
  static constexpr uint32_t kSlots = 256;
  static constexpr uint32_t kPayload = 1024;  // bytes of data per slot
  static constexpr uint32_t kInline = 16;     // data bytes that fit a slot's header line
  // A message takes up to kMaxChunks consecutive slots (published first slot
  // last): messages up to 16 KiB (the default CF_EAGER_BYTES) stay here.
  static constexpr uint32_t kMaxChunks = 16;
  static constexpr uint32_t kMaxBytes = kPayload * kMaxChunks;

  // Streams: 8 chunks of 32 KiB per node pair (a 256 KiB window: a larger
  // one streams no faster, and every pair of a host's processes has one
  // in /dev/shm).
  static constexpr uint32_t kStreamSlots = 8;
  static constexpr uint32_t kStreamChunk = 32 << 10;

  // What a ring message is. kData carries its payload; the others are
  // one-slot control messages of the stream protocol, with `cookie` the
  // sender's MsgOp: kRts announces a large message of `size` bytes (src,
  // dst, key, status and digest as for data) and where it lies in the
  // sender (`addr`, for a direct read); kCts grants the stream, in chunks
  // of `size` bytes; kSplit asks for a split copy of transfer `status`
  // (its generation) in pieces of `size` bytes into the receiver's buffer
  // at `addr`; kFin declines it with `status` (a mismatch, or the sender's
  // own failure passed back), or with status 0 says the receiver read the
  // bytes itself (or, after a kSplit, that the copy is done).
  enum Type : uint8_t { kData = 0, kRts = 1, kCts = 2, kFin = 3, kSplit = 4 };

  struct Message {
    uint32_t src = 0, dst = 0;  // images
    MsgKey key;
    uint32_t nbytes = 0;  // payload bytes (kData)
    int32_t status = 0;  // the sender's failure (MsgOp::status)
    uint64_t digest = 0;  // MsgOp::digest
    Type type = kData;
    uint64_t cookie = 0, size = 0;  // control messages (see Type)
    uint64_t addr = 0;              // kRts: the data's address in the sender; kSplit: the receiver's buffer
    alignas(64) char data[kMaxBytes];  // aligned: reduction kernels read it as elements
  };

  // Creates this node's inbound segment; *name is what peers open.
  static std::unique_ptr<HostRings> create(uint32_t node, uint32_t nodes, std::string* name,
                                           std::string* error);
  ~HostRings();
  // Maps every node's segment (names[node]; this node's own is already mapped).
  bool attach(const std::vector<std::string>& names, std::string* error);
  // Removes this node's segment name once every node has mapped it.
  void unlink();

  // Queues a message for `dst_node`; false when it does not fit or the ring is full.
  bool push(uint32_t dst_node, uint32_t src, uint32_t dst, const MsgKey& key, const void* data,
            uint64_t nbytes, int status, uint64_t digest);
  // push() of a data message of one slot (at most kPayload bytes; most
  // small collectives' messages): no chunk loop; up to kInline bytes ride
  // in the header's line, up to 64 are copied without a library call.
  bool push_one(uint32_t dst_node, uint32_t src, uint32_t dst, const MsgKey& key, const void* data,
                uint32_t nbytes, int status, uint64_t digest);
  // Queues a one-slot control message (see Type; addr: kRts's and
  // kSplit's); false when the ring is full.
  bool push_control(uint32_t dst_node, Type type, uint32_t src, uint32_t dst, const MsgKey& key,
                    int status, uint64_t digest, uint64_t cookie, uint64_t size, uint64_t addr = 0);
  // The process that owns `node`'s segment (0: unknown), for direct reads.
  int pid_of(uint32_t node) const;
  // True when pid_of(node) is that segment's owner as this process sees it:
  // a token in the owner's private memory, read with process_vm_readv,
  // equals the one in its segment. (A pid from another PID namespace, or
  // one reused, names some other process; reading it would deliver its
  // bytes.)
  bool reads_owner(uint32_t node) const;
  // Takes waiting messages into out[] in each ring's order, up to `max`
  // and until they hold max_bytes. Before each data message or RTS it asks
  // wanted(ctx, src image, dst image, key, messages taken so far, head,
  // stuck) and leaves that ring at the first it declines (kCts and kFin
  // are always taken). head: nothing was taken from this ring yet in this
  // poll. stuck (only with head): the ring had fewer than kMaxChunks free
  // slots, with this same message at its head, on kStuckPolls polls in a
  // row: its sender may be waiting for room that no receive will make.
  // *held (when given) is set when it left a full ring's first message
  // (its sender may wait on this receiver: poll again rather than sleep).
  // Returns how many it took.
  using Wanted = bool (*)(void* ctx, uint32_t src, uint32_t dst, const MsgKey& key, uint32_t taken, bool head,
                          bool stuck);
  // A receiver that takes its messages as they come frees a full ring
  // within a few polls; one that takes none for this many is not going to.
  static constexpr uint32_t kStuckPolls = 64;
  uint32_t poll(Message* out, uint32_t max, uint64_t max_bytes, Wanted wanted, void* ctx, bool* held = nullptr);
  // A receive that finds its message next in src_node's ring takes it
  // there: when that message is data from image `src` to image `dst`
  // under `key`, copies its payload into buf (only when it is exactly
  // `nbytes` long and the sender's status is 0), frees its slots and
  // returns true with the sender's status, whether the size matched
  // (*sized) and the digest. False (nothing taken) for any other message,
  // none, or another thread draining the ring.
  bool take_next(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key, void* buf,
                 uint64_t nbytes, bool* sized, int32_t* status, uint64_t* digest);
  // take_next for a receive that uses the payload where it lies (a combine
  // whose function may run under the ring's lock): instead of copying,
  // calls use(ctx, payload, nbytes) while the slot is still this
  // process's, when the message is exactly nbytes long and the sender's
  // status is 0. The payload is 16-byte aligned. Messages of one slot only
  // (at most kPayload bytes): false, nothing taken, for a longer one.
  using Use = void (*)(void* ctx, const char* payload, uint32_t nbytes);
  bool take_next_in_place(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key, uint64_t nbytes,
                          bool* sized, int32_t* status, uint64_t* digest, Use use, void* ctx);
  // Takes the next message of src_node's ring when it is a grant (kCts or
  // kSplit): true with its fields in *grant. False (nothing taken) for any
  // other message, none, or another thread draining the ring. For a sender
  // that tops up its transfers from inside other work
  // (OfiTransport::pump_sends).
  struct Grant {
    Type type = kCts;
    int32_t status = 0;  // kSplit: the generation
    uint64_t cookie = 0, size = 0, addr = 0;
  };
  bool take_grant(uint32_t src_node, Grant* grant);
  // A look at the next message of src_node's ring, without taking it or
  // its lock: true with its images and key when it is a data message.
  // Only a hint (another process writes the ring, another thread may take
  // the message meanwhile): take_next checks again.
  bool peek_data(uint32_t src_node, uint32_t* src, uint32_t* dst, MsgKey* key) const;
  // Sleeps until a message is pushed to this node, wake() is called, or
  // timeout_ms passes: a futex on this node's doorbell word in shared
  // memory, rung by senders that see a sleeper.
  // wake_fd (or -1): the image's eventfd, written by the engine before it
  // rings the doorbell for local news; a wait that finds it readable does
  // not sleep. (A waker that came between the engine's last look and this
  // thread's announcing itself here saw no sleeper and rang nothing: the
  // eventfd is what tells; without it that wake-up would be lost and the
  // thread would sleep the whole timeout.) busy(busy_arg), when given, is
  // the caller's own work, looked at after the announcement: its writers
  // call wake() after they publish it. False when it slept the whole
  // timeout.
  bool wait(int timeout_ms, int wake_fd = -1, bool (*busy)(const void*) = nullptr, const void* busy_arg = nullptr);
  // Rings this node's doorbell (local news for a sleeping image thread).
  void wake() { ring_doorbell(node_); }
  // Data messages (kData) published so far, to every node.
  uint64_t data_sent() const;
  // Messages taken by take_next so far, from every node.
  uint64_t taken_next() const;

  // Streams. The caller runs one transfer at a time per node pair and
  // serializes the calls for each stream.
  // Copies data into free chunks of the stream to dst_node, `chunk` bytes
  // each (the last one shorter); returns the bytes it took (0: none free).
  uint64_t stream_put(uint32_t dst_node, const char* data, uint64_t nbytes, uint32_t chunk);
  // The next filled chunk of the stream from src_node and its size, or
  // nullptr; stream_pop frees it for the sender.
  const char* stream_front(uint32_t src_node, uint32_t* nbytes);
  void stream_pop(uint32_t src_node);

  // Split copies (see the top). Pieces are numbered 0 .. pieces - 1; the
  // receiver takes them from the front, the sender from the back.
  // Generations and piece counts fit the word that holds both cursors.
  static constexpr uint32_t kSplitGenBits = 24, kSplitPieceBits = 20;
  static constexpr uint32_t kSplitMaxPieces = (1u << kSplitPieceBits) - 1;
  // Receiver: transfer `gen` (nonzero, below 2^24) of `pieces` pieces from
  // src_node starts (before its kSplit is pushed).
  void split_begin(uint32_t src_node, uint32_t gen, uint32_t pieces);
  // Receiver: the next piece from the front, or -1 when none is left.
  int64_t split_take_front(uint32_t src_node);
  // Receiver: no piece is handed out any more (a failed read, a lost sender).
  void split_close(uint32_t src_node);
  // Receiver: true when no piece of the transfer's `pieces` is left to
  // take and every piece the sender took is written or given back;
  // *returned: the piece the sender gave back (its write failed: the
  // receiver reads it), or -1. (Another process writes the counters: the
  // caller checks *returned against pieces.)
  bool split_settled(uint32_t src_node, uint32_t pieces, int64_t* returned) const;
  // Sender: the next piece from the back of transfer `gen` to dst_node, or
  // -1 when none is left (or that transfer is over).
  int64_t split_take_back(uint32_t dst_node, uint32_t gen);
  // Sender: a piece it took is written (ok), or given back (!ok; it then
  // takes no more of this transfer).
  void split_done(uint32_t dst_node, uint32_t piece, bool ok);

 private:
  // The next message of src_node's ring, with that ring's consumer lock
  // held (the caller unlocks), at *pos; nullptr, no lock held, when there is
  // none, the node has no ring here, or another thread drains it.
  struct Slot;
  const Slot* lock_head(uint32_t src_node, uint32_t* pos);
  // Under that lock: the `chunks` slots from pos are the producer's again.
  void free_head(uint32_t src_node, uint32_t pos, uint32_t chunks);
  // take_next's and take_next_in_place's common part: when the message
  // next from src_node is this one, consume(slots, pos, chunks, size,
  // deliverable) uses its payload (deliverable: exactly nbytes long, status
  // 0) and returns true, or false to leave the message where it is.
  template <typename Consume>
  bool take_head(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key, uint64_t nbytes, bool* sized,
                 int32_t* status, uint64_t* digest, Consume consume);
  struct alignas(64) Slot {
    std::atomic<uint32_t> seq;
    uint32_t nbytes;
    uint32_t src, dst;
    MsgKey key;
    int32_t status;
    uint32_t chunks;  // slots this message takes (first slot only)
    Type type;
    char pad[3];
    uint64_t digest;  // MsgOp::digest (first slot only)
    // Control messages carry a cookie and a size; a data message of at
    // most kInline bytes rides here, in the header's line, and leaves
    // `data` untouched: one cache line crosses between the cores, not two.
    union {
      struct {
        uint64_t cookie, size;
      } control;
      char inline_data[kInline];
    } tail;
    char data[kPayload];
  };
  static_assert(sizeof(Slot) % 64 == 0, "slots are whole cache lines");
  static_assert(offsetof(Slot, data) == 64, "the header is one cache line, the data aligned");
  // After the rings: the node's doorbell (a futex word) and its sleepers.
  // Control and each Tail take a line pair (transports/line_pair.h): the
  // producer reads Control on every message, the consumer writes its Tail
  // on every take, and a shared pair would send both lines back and forth.
  struct alignas(kLinePair) Control {
    std::atomic<uint32_t> doorbell;
    std::atomic<uint32_t> sleepers;
    // 1: the owner issues an asymmetric fence before it sleeps (see
    // publish_seq), so a registered sender may publish to it without one.
    std::atomic<uint32_t> fenced_sleep;
    std::atomic<int32_t> pid;  // the segment's owner
    std::atomic<uint64_t> token;       // reads_owner: the owner's token ...
    std::atomic<uint64_t> token_addr;  // ... and where it lies in the owner's memory
  };
  // After Control, one per source node: how far the consumer has taken
  // that node's ring. The producer reads it only when the slots it knows
  // to be free run out, so a message costs one cache line between the
  // cores each way (the slot), not a free-mark in the slot as well.
  struct alignas(kLinePair) Tail {
    std::atomic<uint32_t> consumed;
  };
  // One per source node: the split copy from it (see split_begin). cursors
  // = gen (24 bits) | front (20) | back (20): pieces below front are the
  // receiver's, pieces from back on the sender's. finished counts the
  // sender's pieces written or given back; returned is a given-back
  // piece + 1 (0: none).
  struct alignas(64) Split {
    std::atomic<uint64_t> cursors;
    std::atomic<uint32_t> finished;
    std::atomic<uint32_t> returned;
  };
  static uint64_t split_word(uint64_t gen, uint64_t front, uint64_t back) {
    return gen << (2 * kSplitPieceBits) | front << kSplitPieceBits | back;
  }
  struct SplitCursors {
    uint64_t gen, front, back;
  };
  static SplitCursors split_cursors(uint64_t word) {
    return {word >> (2 * kSplitPieceBits), word >> kSplitPieceBits & kSplitMaxPieces, word & kSplitMaxPieces};
  }
  struct alignas(64) StreamSlot {
    std::atomic<uint32_t> seq;
    uint32_t nbytes;
    char pad[56];
    char data[kStreamChunk];
  };
  static size_t segment_bytes(uint32_t nodes) {
    return size_t{nodes} * kSlots * sizeof(Slot) + sizeof(Control) + size_t{nodes} * sizeof(Tail) +
           size_t{nodes} * kStreamSlots * sizeof(StreamSlot) + size_t{nodes} * sizeof(Split);
  }
  Tail* tail(void* segment, uint32_t src_node) const {
    char* base = static_cast<char*>(segment) + size_t{nodes_} * kSlots * sizeof(Slot) + sizeof(Control);
    return reinterpret_cast<Tail*>(base) + src_node;
  }
  StreamSlot* stream(void* segment, uint32_t src_node) const {
    char* base = reinterpret_cast<char*>(tail(segment, 0)) + size_t{nodes_} * sizeof(Tail);
    return reinterpret_cast<StreamSlot*>(base) + size_t{src_node} * kStreamSlots;
  }
  Split* split(void* segment, uint32_t src_node) const {
    return reinterpret_cast<Split*>(stream(segment, 0) + size_t{nodes_} * kStreamSlots) + src_node;
  }

  Control* control(uint32_t node) const {
    return reinterpret_cast<Control*>(static_cast<char*>(segments_[node]) +
                                      size_t{nodes_} * kSlots * sizeof(Slot));
  }
  // push and push_control: one message of `type` into the ring to dst_node
  // (its payload in consecutive slots, the first slot published last).
  bool publish(uint32_t dst_node, Type type, uint32_t src, uint32_t dst, const MsgKey& key,
               const void* data, uint64_t nbytes, int status, uint64_t digest, uint64_t cookie,
               uint64_t size);
  void ring_doorbell(uint32_t node);  // wakes `node`'s sleepers, if any
  struct Producer;
  // After a push: asks for the next slot's header line and first data line
  // for writing (PREFETCHW) while the caller goes on, when that slot is
  // known free. Those lines were last read by the receiver; without this
  // the next push's stores (and its fence, where publish_seq needs one)
  // wait for them.
  void claim_next(const Producer& p, void* segment) const;
  // Under p.lock: room for `chunks` more slots in the ring to dst_node
  // (it looks at the consumer's progress only past what it knows is free).
  [[gnu::always_inline]] inline bool has_room(Producer& p, uint32_t dst_node, uint32_t chunks);
  // A message's header fields in its first slot (not its seq).
  static void write_header(Slot& first, Type type, uint32_t src, uint32_t dst, const MsgKey& key, uint64_t nbytes,
                           int status, uint64_t digest, uint32_t chunks);
  // The payload of the message at `pos` (nbytes over `chunks` slots, or in
  // the first slot's header line when in_header) into `to`.
  static void copy_out(const Slot* slots, uint32_t pos, uint32_t chunks, uint32_t nbytes, bool in_header,
                       void* to);
  bool pending() const;      // a message waits in one of this node's rings
  // Publishes a slot (seq = value) in dst_node's segment for ring_doorbell,
  // which then looks for sleepers: Dekker with wait(), which announces a
  // sleeper, then looks for messages. Each side needs its store ordered
  // before its load. A full fence after every message waits for the
  // slot's line to come back from the receiver's core (a quarter of an
  // 8-byte broadcast's time on two processes); instead, where both
  // processes registered for membarrier's global expedited command, the
  // sender publishes with a plain release store and the sleeper, before it
  // looks, has the kernel run a full barrier on every CPU running a
  // registered process (MEMBARRIER_CMD_GLOBAL_EXPEDITED, about half a
  // microsecond, paid only on the way to sleep).
  void publish_seq(std::atomic<uint32_t>& seq, uint32_t value, uint32_t dst_node) {
    if (light_publish_[dst_node]) {
      seq.store(value, std::memory_order_release);
      std::atomic_signal_fence(std::memory_order_seq_cst);  // the sleepers load stays after it
    } else {
      seq.store(value, std::memory_order_seq_cst);
    }
  }
  Slot* ring(void* segment, uint32_t src_node) const {
    return static_cast<Slot*>(segment) + size_t{src_node} * kSlots;
  }

  HostRings() = default;
  uint64_t token_ = 0;  // Control::token, in this process's own memory
  bool prefetchw_ = false;  // the CPU has PREFETCHW (CPUID 0x80000001 ECX bit 8)
  bool fenced_sleep_ = false;  // registered for membarrier; wait() fences with it
  std::vector<uint8_t> light_publish_;  // by node: publish_seq needs no fence
  uint32_t node_ = 0, nodes_ = 0;
  std::string name_;
  std::vector<void*> segments_;  // by node: its inbound rings, mapped here
  // Producer side (this process), per destination node.
  struct alignas(64) Producer {
    SpinLock lock;
    uint32_t pos = 0;
    uint32_t limit = kSlots;  // positions below this are known free (the consumer's Tail + kSlots)
    uint32_t stream_pos = 0;  // the stream to the node (its caller serializes)
    // Counted under `lock` without a locked add (one of those after the
    // publishing store would wait for that store's cache line); read by
    // data_sent() from any thread.
    std::atomic<uint64_t> data_sent{0};
  };
  std::unique_ptr<Producer[]> producers_;
  // Consumer side (this process), per source node.
  struct alignas(64) Consumer {
    SpinLock lock;  // try_lock: one draining thread at a time
    std::atomic<uint32_t> pos{0};  // written under lock; read without it by pending()
    uint32_t stream_pos = 0;  // the stream from the node (its caller serializes)
    std::atomic<uint64_t> taken_next{0};  // under lock, no locked add; read by taken_next()
    // poll() found the ring full with its head at position full_at - 1
    // (0: not full at the last look) on full_polls polls in a row.
    uint32_t full_at = 0, full_polls = 0;
  };
  std::unique_ptr<Consumer[]> consumers_;
};

}  // namespace carflow
