#include "transports/ofi/host_rings.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

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
                     const void* data, uint64_t nbytes) {
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
  if (nbytes > 0) std::memcpy(slot.data, data, nbytes);
  slot.seq.store(p.pos + 1, std::memory_order_release);
  ++p.pos;
  p.lock.unlock();
  return true;
}

uint32_t HostRings::poll(Message* out, uint32_t max) {
  uint32_t taken = 0;
  void* mine = segments_[node_];
  for (uint32_t src = 0; src < nodes_ && taken < max; ++src) {
    if (src == node_) continue;
    Consumer& c = consumers_[src];
    Slot* slots = ring(mine, src);
    // Cheap look before the lock: most polls find nothing.
    if (slots[c.pos % kSlots].seq.load(std::memory_order_acquire) != c.pos + 1) continue;
    if (!c.lock.try_lock()) continue;
    while (taken < max) {
      Slot& slot = slots[c.pos % kSlots];
      if (slot.seq.load(std::memory_order_acquire) != c.pos + 1) break;
      Message& m = out[taken++];
      m.src = slot.src;
      m.dst = slot.dst;
      m.key = slot.key;
      m.nbytes = slot.nbytes <= kPayload ? slot.nbytes : kPayload;
      if (m.nbytes > 0) std::memcpy(m.data, slot.data, m.nbytes);
      slot.seq.store(c.pos + kSlots, std::memory_order_release);
      ++c.pos;
    }
    c.lock.unlock();
  }
  return taken;
}

}  // namespace carflow
