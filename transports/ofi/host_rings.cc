#include "transports/ofi/host_rings.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <climits>
#include <ctime>

#include <cerrno>
#include <cstring>
#include <random>

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
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  timespec ts{timeout_ms / 1000, (timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

}  // namespace

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
  }
  r->segments_.assign(nodes, nullptr);
  r->segments_[node] = mine;
  new (r->control(node)) Control{};
  r->producers_ = std::make_unique<Producer[]>(nodes);
  r->consumers_ = std::make_unique<Consumer[]>(nodes);
  *name = r->name_;
  return r;
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
  }
  return true;
}

void HostRings::unlink() {
  if (!name_.empty()) shm_unlink(name_.c_str());
  name_.clear();
}

bool HostRings::push(uint32_t dst_node, uint32_t src, uint32_t dst, const MsgKey& key,
                     const void* data, uint64_t nbytes, int status) {
  if (nbytes > kPayload || segments_[dst_node] == nullptr) return false;
  Producer& p = producers_[dst_node];
  p.lock.lock();
  Slot& slot = ring(segments_[dst_node], node_)[p.pos % kSlots];
  if (slot.seq.load(std::memory_order_acquire) != p.pos) {
    p.lock.unlock();
    return false;  // full: the receiver is behind
  }
  slot.nbytes = static_cast<uint32_t>(nbytes);
  slot.src = src;
  slot.dst = dst;
  slot.key = key;
  slot.status = status;
  if (nbytes > 0) std::memcpy(slot.data, data, nbytes);
  slot.seq.store(p.pos + 1, std::memory_order_seq_cst);
  ++p.pos;
  p.lock.unlock();
  ring(dst_node);
  return true;
}

void HostRings::ring(uint32_t node) {
  Control* c = control(node);
  // Dekker with wait(): we published the message (seq_cst), then look for
  // sleepers; a sleeper announces itself, then looks for messages.
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

void HostRings::wait(int timeout_ms) {
  Control* c = control(node_);
  const uint32_t seen = c->doorbell.load(std::memory_order_seq_cst);
  c->sleepers.fetch_add(1, std::memory_order_seq_cst);
  if (!pending()) futex_wait(&c->doorbell, seen, timeout_ms);
  c->sleepers.fetch_sub(1, std::memory_order_seq_cst);
}

uint32_t HostRings::poll(Message* out, uint32_t max) {
  uint32_t taken = 0;
  void* mine = segments_[node_];
  for (uint32_t src = 0; src < nodes_ && taken < max; ++src) {
    if (src == node_) continue;
    Consumer& c = consumers_[src];
    Slot* slots = ring(mine, src);
    // Cheap look before the lock: most polls find nothing.
    const uint32_t peek = c.pos.load(std::memory_order_relaxed);
    if (slots[peek % kSlots].seq.load(std::memory_order_acquire) != peek + 1) continue;
    if (!c.lock.try_lock()) continue;
    uint32_t pos = c.pos.load(std::memory_order_relaxed);
    while (taken < max) {
      Slot& slot = slots[pos % kSlots];
      if (slot.seq.load(std::memory_order_acquire) != pos + 1) break;
      Message& m = out[taken++];
      m.src = slot.src;
      m.dst = slot.dst;
      m.key = slot.key;
      m.status = slot.status;
      m.nbytes = slot.nbytes <= kPayload ? slot.nbytes : kPayload;
      if (m.nbytes > 0) std::memcpy(m.data, slot.data, m.nbytes);
      slot.seq.store(pos + kSlots, std::memory_order_release);
      ++pos;
    }
    c.pos.store(pos, std::memory_order_relaxed);
    c.lock.unlock();
  }
  return taken;
}

}  // namespace carflow
