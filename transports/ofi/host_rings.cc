#include "transports/ofi/host_rings.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
#include <cpuid.h>
#include <immintrin.h>
#include <ctime>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "transports/small_copy.h"

namespace carflow {
namespace {

void* map_segment(const std::string& name, size_t bytes, bool create, std::string* error) {
  const int fd = create ? shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600)
                        : shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    *error = "shm_open(" + name + "): " + std::strerror(errno);
    return nullptr;
  }
  if (create && ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    *error = "ftruncate(" + name + "): " + std::strerror(errno);
    close(fd);
    shm_unlink(name.c_str());
    return nullptr;
  }
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    *error = "mmap(" + name + "): " + std::strerror(errno);
    if (create) shm_unlink(name.c_str());
    return nullptr;
  }
  return p;
}

// Shared (not process-private) futex operations: the word lives in a
// segment other processes map.
// False when timeout_ms passed with no wake-up.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0) == 0 ||
         errno != ETIMEDOUT;
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

// True when this process is registered for MEMBARRIER_CMD_GLOBAL_EXPEDITED
// (publish_seq): the kernel has it, and no seccomp filter refuses it.
static bool register_membarrier() {
  const long cmds = syscall(__NR_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  const long need = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED;
  return cmds > 0 && (cmds & need) == need &&
         syscall(__NR_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0) == 0;
}

std::unique_ptr<HostRings> HostRings::create(uint32_t node, uint32_t nodes, std::string* name,
                                             std::string* error) {
  std::unique_ptr<HostRings> r(new HostRings());
  r->node_ = node;
  r->nodes_ = nodes;
  std::random_device random;
  r->name_ = "/carflow-" + std::to_string(getpid()) + "-" + std::to_string(node) + "-" +
             std::to_string(random());
  void* mine = map_segment(r->name_, segment_bytes(nodes), true, error);
  if (mine == nullptr) return nullptr;
  // ftruncate zero-fills; slot i of every ring starts free for position i.
  for (uint32_t src = 0; src < nodes; ++src) {
    Slot* slots = r->ring(mine, src);
    for (uint32_t i = 0; i < kSlots; ++i) new (&slots[i].seq) std::atomic<uint32_t>(i);
    new (r->tail(mine, src)) Tail{};
    StreamSlot* chunks = r->stream(mine, src);
    for (uint32_t i = 0; i < kStreamSlots; ++i) new (&chunks[i].seq) std::atomic<uint32_t>(i);
  }
  r->segments_.assign(nodes, nullptr);
  r->segments_[node] = mine;
  new (r->control(node)) Control{};
  r->token_ = (uint64_t{random()} << 32 | random()) | 1;
  r->control(node)->token.store(r->token_, std::memory_order_relaxed);
  r->control(node)->token_addr.store(reinterpret_cast<uint64_t>(&r->token_), std::memory_order_relaxed);
  r->control(node)->pid.store(static_cast<int32_t>(getpid()), std::memory_order_release);
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  r->prefetchw_ = __get_cpuid(0x80000001, &eax, &ebx, &ecx, &edx) != 0 && (ecx & bit_PRFCHW) != 0;
  r->fenced_sleep_ = register_membarrier();
  r->control(node)->fenced_sleep.store(r->fenced_sleep_ ? 1 : 0, std::memory_order_release);
  r->light_publish_.assign(nodes, 0);
  r->producers_ = std::make_unique<Producer[]>(nodes);
  r->consumers_ = std::make_unique<Consumer[]>(nodes);
  *name = r->name_;
  return r;
}

// Maps [p, p + bytes) (rounded out to pages) now rather than on first use.
static void populate(void* p, size_t bytes, int advice) {
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = reinterpret_cast<uintptr_t>(p) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes + page - 1) / page * page;
  (void)madvise(reinterpret_cast<void*>(begin), end - begin, advice);  // best effort
}

HostRings::~HostRings() {
  for (void* s : segments_) {
    if (s != nullptr) munmap(s, segment_bytes(nodes_));
  }
  unlink();
}

bool HostRings::attach(const std::vector<std::string>& names, std::string* error) {
  for (uint32_t n = 0; n < nodes_; ++n) {
    if (n == node_ || segments_[n] != nullptr) continue;
    segments_[n] = map_segment(names[n], segment_bytes(nodes_), false, error);
    if (segments_[n] == nullptr) return false;
    // Map now the pages this process writes as the ring's producer (about
    // 70 of them): faulted in one by one on the first lap, they would slow
    // the first calls of every small collective.
    // Best effort: kernels before 5.14 fault them in on first use.
    populate(ring(segments_[n], node_), kSlots * sizeof(Slot), MADV_POPULATE_WRITE);
    populate(control(n), sizeof(Control) + size_t{nodes_} * sizeof(Tail), MADV_POPULATE_READ);
    // Written by its owner before it published the segment's name.
    light_publish_[n] = fenced_sleep_ && control(n)->fenced_sleep.load(std::memory_order_acquire) == 1;
  }
  return true;
}

void HostRings::unlink() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

bool HostRings::push(uint32_t dst_node, uint32_t src, uint32_t dst, const MsgKey& key,
                     const void* data, uint64_t nbytes, int status, uint64_t digest) {
  if (nbytes > kMaxBytes) return false;
  return publish(dst_node, kData, src, dst, key, data, nbytes, status, digest, 0, 0);
}


bool HostRings::has_room(Producer& p, uint32_t dst_node, uint32_t chunks) {
  // Free up to p.limit; past it, look at how far the consumer has come
  // (acquire: its reads of those slots are done before we overwrite them).
  if (static_cast<int32_t>(p.pos + chunks - p.limit) <= 0) return true;
  p.limit = tail(segments_[dst_node], node_)->consumed.load(std::memory_order_acquire) + kSlots;
  return static_cast<int32_t>(p.pos + chunks - p.limit) <= 0;
}

void HostRings::write_header(Slot& first, Type type, uint32_t src, uint32_t dst, const MsgKey& key, uint64_t nbytes,
                             int status, uint64_t digest, uint32_t chunks) {
  first.nbytes = static_cast<uint32_t>(nbytes);
  first.src = src;
  first.dst = dst;
  first.key = key;
  first.status = status;
  first.digest = digest;
  first.chunks = chunks;
  first.type = type;
}

bool HostRings::push_one(uint32_t dst_node, uint32_t src, uint32_t dst, const MsgKey& key, const void* data,
                         uint32_t nbytes, int status, uint64_t digest) {
  void* segment = segments_[dst_node];
  if (segment == nullptr) return false;
  Producer& p = producers_[dst_node];
  p.lock.lock();
  if (!has_room(p, dst_node, 1)) {
    p.lock.unlock();
    return false;
  }
  Slot& slot = ring(segment, node_)[p.pos % kSlots];
  write_header(slot, kData, src, dst, key, nbytes, status, digest, 1);
  copy_slot(nbytes <= kInline ? slot.tail.inline_data : slot.data, static_cast<const char*>(data), nbytes);
  p.data_sent.store(p.data_sent.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  publish_seq(slot.seq, p.pos + 1, dst_node);
  ++p.pos;
  claim_next(p, segment);
  p.lock.unlock();
  ring_doorbell(dst_node);
  return true;
}

bool HostRings::push_control(uint32_t dst_node, Type type, uint32_t src, uint32_t dst, const MsgKey& key,
                             int status, uint64_t digest, uint64_t cookie, uint64_t size, uint64_t addr) {
  // An RTS's (or kSplit's) address travels as its slot's 8 bytes of data.
  const bool rts = type == kRts || type == kSplit;
  return publish(dst_node, type, src, dst, key, rts ? &addr : nullptr, rts ? sizeof addr : 0,
                 status, digest, cookie, size);
}

bool HostRings::reads_owner(uint32_t node) const {
  const int pid = pid_of(node);
  if (pid == 0) return false;
  const Control* c = control(node);
  uint64_t seen = 0;
  iovec local{&seen, sizeof seen};
  iovec remote{reinterpret_cast<void*>(c->token_addr.load(std::memory_order_relaxed)), sizeof seen};
  return ::process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(sizeof seen) &&
         seen != 0 && seen == c->token.load(std::memory_order_relaxed);
}

int HostRings::pid_of(uint32_t node) const {
  if (node >= nodes_ || segments_[node] == nullptr) return 0;
  const int pid = control(node)->pid.load(std::memory_order_acquire);
  return pid > 0 ? pid : 0;  // written by another process
}

bool HostRings::publish(uint32_t dst_node, Type type, uint32_t src, uint32_t dst, const MsgKey& key,
                        const void* data, uint64_t nbytes, int status, uint64_t digest, uint64_t cookie,
                        uint64_t size) {
  if (segments_[dst_node] == nullptr) return false;
  const uint32_t chunks = nbytes == 0 ? 1 : static_cast<uint32_t>((nbytes + kPayload - 1) / kPayload);
  Producer& p = producers_[dst_node];
  p.lock.lock();
  Slot* slots = ring(segments_[dst_node], node_);
  if (!has_room(p, dst_node, chunks)) {
    p.lock.unlock();
    return false;  // full: the receiver is behind
  }
  Slot& first = slots[p.pos % kSlots];
  write_header(first, type, src, dst, key, nbytes, status, digest, chunks);
  const char* bytes = static_cast<const char*>(data);
  if (type == kData && nbytes <= kInline) {
    copy_small(first.tail.inline_data, bytes, static_cast<uint32_t>(nbytes));
  } else {
    first.tail.control.cookie = cookie;
    first.tail.control.size = size;
  }
  for (uint32_t i = 0; i < chunks && !(type == kData && nbytes <= kInline); ++i) {
    const uint64_t at = uint64_t{i} * kPayload;
    const uint64_t n = std::min<uint64_t>(kPayload, nbytes - std::min(nbytes, at));
    if (n > 0) std::memcpy(slots[(p.pos + i) % kSlots].data, bytes + at, n);
  }
  // The continuation slots first, the first slot last: a consumer that
  // sees the first one full finds the whole message.
  for (uint32_t i = chunks; i-- > 1;) {
    slots[(p.pos + i) % kSlots].seq.store(p.pos + i + 1, std::memory_order_release);
  }
  if (type == kData) p.data_sent.store(p.data_sent.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  publish_seq(first.seq, p.pos + 1, dst_node);
  p.pos += chunks;
  claim_next(p, segments_[dst_node]);
  p.lock.unlock();
  ring_doorbell(dst_node);
  return true;
}

// Copies into a stream chunk with non-temporal stores: the chunk's lines
// were last read by the receiving process's core, and ordinary stores would
// first take each line back from it (a cross-core round trip per line).
static void copy_streaming(char* dst, const char* src, size_t n) {
#if defined(__SSE2__)
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i d = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), d);
  }
  if (i < n) std::memcpy(dst + i, src + i, n - i);
  _mm_sfence();  // the stores are visible before the chunk is published
#else
  std::memcpy(dst, src, n);
#endif
}

uint64_t HostRings::stream_put(uint32_t dst_node, const char* data, uint64_t nbytes, uint32_t chunk) {
  Producer& p = producers_[dst_node];
  StreamSlot* slots = stream(segments_[dst_node], node_);
  chunk = std::clamp<uint32_t>(chunk, 1, kStreamChunk);
  uint64_t taken = 0;
  while (taken < nbytes) {
    StreamSlot& slot = slots[p.stream_pos % kStreamSlots];
    if (slot.seq.load(std::memory_order_acquire) != p.stream_pos) break;  // not yet read
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(chunk, nbytes - taken));
    copy_streaming(slot.data, data + taken, n);
    slot.nbytes = n;
    publish_seq(slot.seq, p.stream_pos + 1, dst_node);
    ++p.stream_pos;
    taken += n;
  }
  if (taken > 0) ring_doorbell(dst_node);
  return taken;
}

const HostRings::Slot* HostRings::lock_head(uint32_t src_node, uint32_t* pos) {
  if (src_node >= nodes_ || src_node == node_) return nullptr;
  Consumer& c = consumers_[src_node];
  Slot* slots = ring(segments_[node_], src_node);
  const uint32_t peek = c.pos.load(std::memory_order_relaxed);
  if (slots[peek % kSlots].seq.load(std::memory_order_acquire) != peek + 1) return nullptr;
  if (!c.lock.try_lock()) return nullptr;
  // Still at `peek` (no other thread took it meanwhile): the slot is the
  // one seen full, and stays full until we free it.
  if (c.pos.load(std::memory_order_relaxed) != peek) {
    c.lock.unlock();
    return nullptr;
  }
  *pos = peek;
  return &slots[peek % kSlots];
}

void HostRings::free_head(uint32_t src_node, uint32_t pos, uint32_t chunks) {
  // The slots are the producer's again (release: after our reads).
  tail(segments_[node_], src_node)->consumed.store(pos + chunks, std::memory_order_release);
  consumers_[src_node].pos.store(pos + chunks, std::memory_order_relaxed);
}

bool HostRings::take_grant(uint32_t src_node, Grant* grant) {
  uint32_t pos = 0;
  const Slot* slot = lock_head(src_node, &pos);
  if (slot == nullptr) return false;
  Consumer& c = consumers_[src_node];
  const Type type = slot->type;
  const bool granted = type == kCts || type == kSplit;
  if (granted) {
    grant->type = type;
    grant->status = slot->status;
    grant->cookie = slot->tail.control.cookie;
    grant->size = slot->tail.control.size;
    grant->addr = 0;
    if (type == kSplit && slot->nbytes == sizeof grant->addr) std::memcpy(&grant->addr, slot->data, sizeof grant->addr);
    free_head(src_node, pos, 1);  // a control message takes one slot
  }
  c.lock.unlock();
  return granted;
}

void HostRings::split_begin(uint32_t src_node, uint32_t gen, uint32_t pieces) {
  Split* sp = split(segments_[node_], src_node);
  sp->finished.store(0, std::memory_order_relaxed);
  sp->returned.store(0, std::memory_order_relaxed);
  // Release: the counters are reset before the sender can see the new
  // generation (it learns it from the kSplit pushed after this).
  sp->cursors.store(split_word(gen, 0, std::min(pieces, kSplitMaxPieces)), std::memory_order_release);
}

int64_t HostRings::split_take_front(uint32_t src_node) {
  Split* sp = split(segments_[node_], src_node);
  uint64_t w = sp->cursors.load(std::memory_order_acquire);
  for (;;) {
    const SplitCursors c = split_cursors(w);
    if (c.front >= c.back) return -1;
    if (sp->cursors.compare_exchange_weak(w, split_word(c.gen, c.front + 1, c.back), std::memory_order_acq_rel)) {
      return static_cast<int64_t>(c.front);
    }
  }
}

void HostRings::split_close(uint32_t src_node) {
  Split* sp = split(segments_[node_], src_node);
  uint64_t w = sp->cursors.load(std::memory_order_acquire);
  // front = back: what the sender took stays its; nothing else is taken.
  for (SplitCursors c = split_cursors(w);
       !sp->cursors.compare_exchange_weak(w, split_word(c.gen, c.back, c.back), std::memory_order_acq_rel);
       c = split_cursors(w)) {
  }
}

bool HostRings::split_settled(uint32_t src_node, uint32_t pieces, int64_t* returned) const {
  const Split* sp = split(segments_[node_], src_node);
  const SplitCursors c = split_cursors(sp->cursors.load(std::memory_order_acquire));
  if (c.front < c.back) return false;
  // The sender took the pieces from back to the end it was given; they are
  // all done when `finished` says so (acquire: after its writes).
  const uint64_t total = std::min(pieces, kSplitMaxPieces);
  if (c.back > total || sp->finished.load(std::memory_order_acquire) < total - c.back) return false;
  *returned = static_cast<int64_t>(sp->returned.load(std::memory_order_acquire)) - 1;
  return true;
}

int64_t HostRings::split_take_back(uint32_t dst_node, uint32_t gen) {
  Split* sp = split(segments_[dst_node], node_);
  uint64_t w = sp->cursors.load(std::memory_order_acquire);
  for (;;) {
    const SplitCursors c = split_cursors(w);
    if (c.gen != gen || c.front >= c.back) return -1;
    if (sp->cursors.compare_exchange_weak(w, split_word(c.gen, c.front, c.back - 1), std::memory_order_acq_rel)) {
      return static_cast<int64_t>(c.back - 1);
    }
  }
}

void HostRings::split_done(uint32_t dst_node, uint32_t piece, bool ok) {
  Split* sp = split(segments_[dst_node], node_);
  if (!ok) sp->returned.store(piece + 1, std::memory_order_relaxed);
  sp->finished.fetch_add(1, std::memory_order_release);
}

const char* HostRings::stream_front(uint32_t src_node, uint32_t* nbytes) {
  const uint32_t pos = consumers_[src_node].stream_pos;
  StreamSlot& slot = stream(segments_[node_], src_node)[pos % kStreamSlots];
  if (slot.seq.load(std::memory_order_acquire) != pos + 1) return nullptr;
  *nbytes = std::min(slot.nbytes, kStreamChunk);  // another process wrote it
  return slot.data;
}

void HostRings::stream_pop(uint32_t src_node) {
  uint32_t& pos = consumers_[src_node].stream_pos;
  stream(segments_[node_], src_node)[pos % kStreamSlots].seq.store(pos + kStreamSlots, std::memory_order_release);
  ++pos;
}

uint64_t HostRings::taken_next() const {
  uint64_t sum = 0;
  for (uint32_t n = 0; n < nodes_; ++n) sum += consumers_[n].taken_next.load(std::memory_order_relaxed);
  return sum;
}

uint64_t HostRings::data_sent() const {
  uint64_t sum = 0;
  for (uint32_t n = 0; n < nodes_; ++n) sum += producers_[n].data_sent.load(std::memory_order_relaxed);
  return sum;
}

void HostRings::claim_next(const Producer& p, void* segment) const {
  if (!prefetchw_ || static_cast<int32_t>(p.pos + 1 - p.limit) > 0) return;
  const Slot* next = &ring(segment, node_)[p.pos % kSlots];
  asm volatile("prefetchw %0" : : "m"(*reinterpret_cast<const char*>(next)));
  asm volatile("prefetchw %0" : : "m"(next->data[0]));
}
void HostRings::ring_doorbell(uint32_t node) {
  Control* c = control(node);
  // Dekker with wait(): we published the message (publish_seq), then look
  // for sleepers; a sleeper announces itself, then looks for messages.
  if (c->sleepers.load(std::memory_order_seq_cst) == 0) return;
  c->doorbell.fetch_add(1, std::memory_order_seq_cst);
  futex_wake(&c->doorbell);
}

bool HostRings::pending() const {
  void* mine = segments_[node_];
  for (uint32_t src = 0; src < nodes_; ++src) {
    if (src == node_) continue;
    // pos is read without the consumer lock: a stale value only makes the
    // answer conservative (a slot already taken still reads as full).
    const uint32_t pos = consumers_[src].pos.load(std::memory_order_relaxed);
    if (ring(mine, src)[pos % kSlots].seq.load(std::memory_order_seq_cst) == pos + 1) return true;
  }
  return false;
}

bool HostRings::wait(int timeout_ms, int wake_fd, bool (*busy)(const void*), const void* busy_arg) {
  Control* c = control(node_);
  const uint32_t seen = c->doorbell.load(std::memory_order_seq_cst);
  c->sleepers.fetch_add(1, std::memory_order_seq_cst);
  // Dekker with the engine's wake: it writes the eventfd, then looks for
  // sleepers; we announced ourselves, then look at the eventfd (and the
  // caller's busy(), whose writers ring the doorbell for a sleeper).
  pollfd news{wake_fd, POLLIN, 0};
  const auto news_now = [&] {
    return (wake_fd >= 0 && ::poll(&news, 1, 0) > 0) || pending() || (busy != nullptr && busy(busy_arg));
  };
  // What is in sight already needs no barrier: a waiter that keeps finding
  // work here (a message left in its ring for a receive not yet posted)
  // would otherwise have the kernel interrupt its peers' CPUs every pass.
  bool in_time = news_now();
  if (!in_time && fenced_sleep_) {
    // Senders that published without a fence (publish_seq): their stores
    // are visible once every registered process has run a barrier, so
    // look again after it. (Should the call fail, a message missed here
    // waits for the timeout, at most 1 ms from the progress loop.)
    (void)syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0);
    in_time = news_now();
  }
  if (!in_time) in_time = futex_wait(&c->doorbell, seen, timeout_ms);
  c->sleepers.fetch_sub(1, std::memory_order_seq_cst);
  return in_time;
}

void HostRings::copy_out(const Slot* slots, uint32_t pos, uint32_t chunks, uint32_t nbytes, bool in_header,
                         void* to) {
  char* out = static_cast<char*>(to);
  if (in_header) {
    copy_small(out, slots[pos % kSlots].tail.inline_data, nbytes);
    return;
  }
  if (chunks == 1) {
    copy_slot(out, slots[pos % kSlots].data, std::min(nbytes, kPayload));
    return;
  }
  for (uint32_t i = 0; i < chunks; ++i) {
    const uint32_t at = i * kPayload;
    const uint32_t n = std::min(kPayload, nbytes - std::min(nbytes, at));
    if (n > 0) std::memcpy(out + at, slots[(pos + i) % kSlots].data, n);
  }
}

bool HostRings::peek_data(uint32_t src_node, uint32_t* src, uint32_t* dst, MsgKey* key) const {
  if (src_node >= nodes_ || src_node == node_) return false;
  const uint32_t pos = consumers_[src_node].pos.load(std::memory_order_relaxed);
  const Slot& slot = ring(segments_[node_], src_node)[pos % kSlots];
  if (slot.seq.load(std::memory_order_acquire) != pos + 1 || slot.type != kData) return false;
  *src = slot.src;
  *dst = slot.dst;
  *key = slot.key;
  return true;
}

template <typename Consume>
bool HostRings::take_head(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key, uint64_t nbytes,
                          bool* sized, int32_t* status, uint64_t* digest, Consume consume) {
  uint32_t pos = 0;
  const Slot* head = lock_head(src_node, &pos);
  if (head == nullptr) return false;
  Consumer& c = consumers_[src_node];
  const Slot* slots = ring(segments_[node_], src_node);
  const Slot& slot = *head;
  // Another process wrote the slot: every field is checked before use.
  const bool ours = slot.type == kData && slot.src == src && slot.dst == dst && slot.key == key;
  const uint32_t chunks = slot.chunks >= 1 && slot.chunks <= kMaxChunks ? slot.chunks : 1;
  const uint32_t size = slot.nbytes;
  const int32_t sent_status = slot.status;
  // A failed sender's bytes are not data.
  if (!ours || size > uint64_t{chunks} * kPayload ||
      !consume(slots, pos, chunks, size, size == nbytes && sent_status == 0)) {
    c.lock.unlock();
    return false;  // not ours (or malformed, or declined): the poll takes it as it would
  }
  *sized = size == nbytes;
  *status = sent_status;
  *digest = slot.digest;
  free_head(src_node, pos, chunks);
  c.taken_next.store(c.taken_next.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  c.lock.unlock();
  return true;
}

bool HostRings::take_next(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key, void* buf,
                          uint64_t nbytes, bool* sized, int32_t* status, uint64_t* digest) {
  return take_head(src_node, src, dst, key, nbytes, sized, status, digest,
                   [buf](const Slot* slots, uint32_t pos, uint32_t chunks, uint32_t size, bool deliverable) {
                     if (!deliverable) return true;
                     if (size <= kInline) {  // most small messages: no call
                       copy_small(static_cast<char*>(buf), slots[pos % kSlots].tail.inline_data, size);
                     } else {
                       copy_out(slots, pos, chunks, size, false, buf);
                     }
                     return true;
                   });
}

bool HostRings::take_next_in_place(uint32_t src_node, uint32_t src, uint32_t dst, const MsgKey& key,
                                   uint64_t nbytes, bool* sized, int32_t* status, uint64_t* digest, Use use,
                                   void* ctx) {
  return take_head(src_node, src, dst, key, nbytes, sized, status, digest,
                   [use, ctx](const Slot* slots, uint32_t pos, uint32_t chunks, uint32_t size, bool deliverable) {
                     if (chunks > 1) return false;
                     const Slot& slot = slots[pos % kSlots];
                     if (deliverable) use(ctx, size <= kInline ? slot.tail.inline_data : slot.data, size);
                     return true;
                   });
}

uint32_t HostRings::poll(Message* out, uint32_t max, uint64_t max_bytes, Wanted wanted, void* ctx, bool* held) {
  uint32_t taken = 0;
  uint64_t bytes = 0;
  void* mine = segments_[node_];
  for (uint32_t src = 0; src < nodes_ && taken < max && bytes < max_bytes; ++src) {
    if (src == node_) continue;
    Consumer& c = consumers_[src];
    Slot* slots = ring(mine, src);
    // Cheap look before the lock: most polls find nothing.
    const uint32_t peek = c.pos.load(std::memory_order_relaxed);
    if (slots[peek % kSlots].seq.load(std::memory_order_acquire) != peek + 1) continue;
    if (!c.lock.try_lock()) continue;
    const uint32_t start = c.pos.load(std::memory_order_relaxed);
    uint32_t pos = start;
    while (taken < max && bytes < max_bytes) {
      Slot& slot = slots[pos % kSlots];
      if (slot.seq.load(std::memory_order_acquire) != pos + 1) break;
      // Another process wrote this: an unknown type reads as a FIN of no
      // send, which the transport ignores.
      const bool known = slot.type <= kSplit;
      const Type type = known ? slot.type : kFin;
      const bool control = type == kCts || type == kFin || type == kSplit;
      // At the head: fewer than kMaxChunks slots free when the slot
      // kSlots - kMaxChunks past it is written (one more load).
      const bool head = pos == start;
      bool full = false, stuck = false;
      if (head && !control) {
        const uint32_t far = pos + kSlots - kMaxChunks;
        full = slots[far % kSlots].seq.load(std::memory_order_acquire) == far + 1;
        if (!full) {
          c.full_at = 0;
        } else if (c.full_at == pos + 1) {
          stuck = ++c.full_polls >= kStuckPolls;
        } else {
          c.full_at = pos + 1;
          c.full_polls = 1;
        }
      }
      if (!control && !wanted(ctx, slot.src, slot.dst, slot.key, taken, head, stuck)) {
        if (full && held != nullptr) *held = true;
        break;
      }
      // Another process wrote this: sizes are checked before use.
      const uint32_t chunks = slot.chunks >= 1 && slot.chunks <= kMaxChunks ? slot.chunks : 1;
      Message& m = out[taken++];
      m.src = slot.src;
      m.dst = slot.dst;
      m.key = slot.key;
      m.status = slot.status;
      m.digest = slot.digest;
      m.type = type;
      const bool inline_data = type == kData && slot.nbytes <= kInline;
      m.cookie = known && !inline_data ? slot.tail.control.cookie : 0;
      m.size = inline_data ? 0 : slot.tail.control.size;
      m.nbytes = type == kData ? std::min<uint32_t>(slot.nbytes, chunks * kPayload) : 0;
      m.addr = 0;
      if ((type == kRts || type == kSplit) && slot.nbytes == sizeof m.addr) {
        std::memcpy(&m.addr, slot.data, sizeof m.addr);
      }
      bytes += m.nbytes;
      copy_out(slots, pos, chunks, m.nbytes, inline_data, m.data);
      pos += chunks;
    }
    // The slots up to pos are the producer's again (release: after our reads).
    tail(mine, src)->consumed.store(pos, std::memory_order_release);
    c.pos.store(pos, std::memory_order_relaxed);
    c.lock.unlock();
  }
  return taken;
}

}  // namespace carflow
