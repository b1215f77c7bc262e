// The libfabric endpoint: opening the provider, addresses and connections,
// the node map and hooks, receive buffers, memory registration, statistics.
#include "transports/ofi/ofi_transport.h"

#include <poll.h>
#include <sys/random.h>
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

namespace {

// The shm provider names its region /dev/shm/<pid>:<ep>:<n> by default; a
// process killed before it closes its endpoint leaves the region behind,
// and a later process given the same pid then cannot open its own (EBUSY).
// A name with 64 random bits never meets a stale one; it keeps the pid so
// that cfrun can remove a dead child's regions.
int name_shm_endpoint(fid_ep* ep) {
  uint64_t random = 0;
  if (::getrandom(&random, sizeof random, 0) != static_cast<ssize_t>(sizeof random)) return -FI_EIO;
  char name[64];
  std::snprintf(name, sizeof name, "cf_%ld_%016llx", static_cast<long>(::getpid()),
                static_cast<unsigned long long>(random));
  return fi_setname(&ep->fid, name, std::strlen(name) + 1);
}

}  // namespace

std::unique_ptr<OfiTransport> OfiTransport::open(const std::string& provider, uint32_t node,
                                                 uint32_t nodes, const OfiOptions& options,
                                                 std::string* error) {
  if (!load_libfabric(error)) return nullptr;
  std::unique_ptr<OfiTransport> t(new OfiTransport());
  t->provider_ = provider;
  t->options_ = options;
  t->fault_armed_ = options.fault_kind != 0;
  t->node_ = node;
  t->nodes_ = nodes;
  t->posted_from_ = std::make_unique<std::atomic<uint32_t>[]>(nodes);
  fi_info* hints = fi_allocinfo();
  hints->caps = FI_TAGGED | FI_RMA | FI_READ | FI_REMOTE_READ;
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  hints->ep_attr->type = FI_EP_RDM;
  hints->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_LOCAL;
  hints->domain_attr->threading = FI_THREAD_DOMAIN;
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  hints->fabric_attr->prov_name = strdup(provider.c_str());
  int ret = fi_getinfo(FI_VERSION(1, 17), nullptr, nullptr, 0, hints, &t->info_);
  fi_freeinfo(hints);
  if (ret != 0) {
    *error = "libfabric provider '" + provider + "': " + fi_strerror(-ret) +
             " (CF_OFI_PROVIDER names another; `fi_info -l` lists what this host has)";
    return nullptr;
  }
  fi_info* info = t->info_;
  t->inject_bytes_ = info->tx_attr->inject_size;
  const uint64_t mr_mode = info->domain_attr->mr_mode;
  t->virt_addr_ = (mr_mode & FI_MR_VIRT_ADDR) != 0;
  t->prov_key_ = (mr_mode & FI_MR_PROV_KEY) != 0;
  t->mr_local_ = (mr_mode & FI_MR_LOCAL) != 0;
  if ((ret = fi_fabric(info->fabric_attr, &t->fabric_, nullptr)) != 0) {
    *error = fi_error("fi_fabric", ret);
    return nullptr;
  }
  if ((ret = fi_domain(t->fabric_, info, &t->domain_, nullptr)) != 0) {
    *error = fi_error("fi_domain", ret);
    return nullptr;
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.size = 4096;
  cq_attr.wait_obj = FI_WAIT_FD;
  if (fi_cq_open(t->domain_, &cq_attr, &t->cq_, nullptr) == 0) {
    if (fi_control(&t->cq_->fid, FI_GETWAIT, &t->wait_fd_) != 0) t->wait_fd_ = -1;
  } else {
    // shm has no wait object: waits then sleep in short steps (wait()).
    cq_attr.wait_obj = FI_WAIT_NONE;
    if ((ret = fi_cq_open(t->domain_, &cq_attr, &t->cq_, nullptr)) != 0) {
      *error = fi_error("fi_cq_open", ret);
      return nullptr;
    }
  }
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = nodes;
  if ((ret = fi_av_open(t->domain_, &av_attr, &t->av_, nullptr)) != 0) {
    *error = fi_error("fi_av_open", ret);
    return nullptr;
  }
  if ((ret = fi_endpoint(t->domain_, info, &t->ep_, nullptr)) != 0) {
    *error = fi_error("fi_endpoint", ret);
    return nullptr;
  }
  if (provider == "shm" && (ret = name_shm_endpoint(t->ep_)) != 0) {
    *error = fi_error("naming the shm endpoint", ret);
    return nullptr;
  }
  if ((ret = fi_ep_bind(t->ep_, &t->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (ret = fi_ep_bind(t->ep_, &t->av_->fid, 0)) != 0 || (ret = fi_enable(t->ep_)) != 0) {
    *error = fi_error("binding the endpoint", ret);
    return nullptr;
  }
  t->peers_.resize(nodes);
  t->lost_now_ = std::make_unique<std::atomic<int>[]>(nodes);
  for (auto& p : t->peers_) p.credits = options.credits;
  return t;
}

OfiTransport::~OfiTransport() {
  if (ep_ != nullptr) fi_close(&ep_->fid);
  for (auto& rx : rx_bufs_) {
    if (rx->mr != nullptr) fi_close(&rx->mr->fid);
  }
  for (auto& tx : tx_bufs_) {
    if (tx->mr != nullptr) fi_close(&tx->mr->fid);
  }
  for (auto& [range, e] : mr_cache_) fi_close(&e.mr->fid);
  if (av_ != nullptr) fi_close(&av_->fid);
  if (cq_ != nullptr) fi_close(&cq_->fid);
  if (domain_ != nullptr) fi_close(&domain_->fid);
  if (fabric_ != nullptr) fi_close(&fabric_->fid);
  if (info_ != nullptr) fi_freeinfo(info_);
  free_queued_messages(nullptr);
  for (Unexpected* u : free_large_blocks_) free_blocks_.push_back(u);
  for (Unexpected* u : free_blocks_) {
    u->~Unexpected();
    std::free(u);
  }
}

std::string OfiTransport::address() const {
  char name[256];
  size_t len = sizeof name;
  if (fi_getname(&ep_->fid, name, &len) != 0) return "";
  return std::string(name, len);
}

bool OfiTransport::connect(const std::vector<std::string>& addresses, std::string* error) {
  std::lock_guard<SpinLock> guard(lock_);
  for (uint32_t n = 0; n < addresses.size(); ++n) {
    fi_addr_t addr = FI_ADDR_UNSPEC;
    if (fi_av_insert(av_, addresses[n].data(), 1, &addr, 0, nullptr) != 1) {
      *error = "fi_av_insert: the address of node " + std::to_string(n) + " is not usable";
      return false;
    }
    peers_[n].addr = addr;
  }
  // Receive buffers: every peer's credits, and a few for control messages.
  const uint32_t count = options_.credits * (nodes_ > 1 ? nodes_ - 1 : 1) + 16;
  for (uint32_t i = 0; i < count; ++i) {
    auto rx = std::make_unique<RxBuf>();
    rx->kind = CtxKind::Rx;
    rx->data.resize(sizeof(Header) + options_.eager_bytes);
    if (mr_local_ && fi_mr_reg(domain_, rx->data.data(), rx->data.size(), FI_RECV, 0, next_key_++, 0,
                               &rx->mr, nullptr) != 0) {
      *error = "fi_mr_reg: cannot register receive buffers";
      return false;
    }
    Actions none;  // nothing has been sent yet, so nothing can complete
    post_rx(rx.get(), &none);
    rx_bufs_.push_back(std::move(rx));
  }
  return true;
}

void OfiTransport::set_node_map(const NodeMap& map) {
  ScopedActions scoped;
  {
    std::lock_guard<SpinLock> guard(lock_);
    // The queues outlive one run of images (cf_run_images after
    // cf_run_images): a faster node may already have sent messages of the
    // next run, waiting here as unexpected. They stay unless the images change.
    const bool same = map_.first == map.first && map_.node == map.node && images_.size() == map.local();
    map_ = map;
    if (same) return;
    free_queued_messages(&*scoped);
    images_.clear();
    for (uint32_t i = 0; i < map.local(); ++i) images_.push_back(std::make_unique<ImageQueues>());
  }
  run(*scoped);  // the credits given back may have let waiting sends go
}

void OfiTransport::set_hooks(TransportHooks* hooks) {
  std::lock_guard<SpinLock> guard(lock_);
  hooks_ = hooks;
  if (hooks != nullptr) return;
  // The engine is going away: forget every operation it posted (only a
  // collective abandoned after a lost peer can leave any). Unexpected
  // messages stay: they may belong to the next run of images.
  for (auto& q : images_) {
    q->posted.clear();
    q->posted_changed();
    for (const Actions::Delivery& d : q->app_only) {
      if (d.block != nullptr) free_block(d.block);
    }
    q->app_only.clear();
    q->app_only_pending.store(false, std::memory_order_relaxed);
  }
  for (uint32_t n = 0; n < nodes_; ++n) posted_from_[n].store(0, std::memory_order_relaxed);
  for (auto& p : peers_) p.waiting.clear();
}

// Messages no receive will take: the engine is gone (their collectives
// failed or were abandoned after a loss), or the images changed. A block
// that kept its sender's credit gives it back (with `actions`; the
// endpoint's last moments pass none), or that sender would be a credit
// short for good.
void OfiTransport::free_queued_messages(Actions* actions) {
  std::vector<Unexpected*> left;
  for (auto& q : images_) {
    q->unexpected.take_if([](const Unexpected*) { return true; }, &left);
    for (const Actions::Delivery& d : q->app_only) {
      if (d.block != nullptr) left.push_back(d.block);
    }
    q->app_only.clear();
  }
  for (Unexpected* u : left) {
    if (u->credit_held && actions != nullptr) returned_credit(u->h.src_node, actions);
    free_block(u);
  }
}

void OfiTransport::free_block(Unexpected* u) {
  unexpected_held_ -= sizeof(Unexpected) + u->capacity;
  u->~Unexpected();
  std::free(u);
}

OfiTransport::ImageQueues& OfiTransport::queues(uint32_t image) {
  return *images_[image - map_.base()];
}

void OfiTransport::post_rx(RxBuf* rx, Actions* actions) {
  for (;;) {
    const ssize_t ret = fi_trecv(ep_, rx->data.data(), rx->data.size(),
                                 rx->mr != nullptr ? fi_mr_desc(rx->mr) : nullptr, FI_ADDR_UNSPEC,
                                 kTag, 0, rx);
    if (ret != -FI_EAGAIN) return;
    poll_cq(actions);
  }
}

fid_mr* OfiTransport::register_buffer(void* buf, uint64_t nbytes, uint64_t access, uint64_t* key) {
  const auto range = std::make_pair(reinterpret_cast<uintptr_t>(buf), nbytes);
  auto it = mr_cache_.find(range);
  if (it != mr_cache_.end()) {
    ofi_stats_.mr_hits++;
    it->second.users++;
    it->second.last_use = ++mr_clock_;
    *key = it->second.key;
    return it->second.mr;
  }
  ofi_stats_.mr_misses++;
  // Bounded cache: drop the least recently used idle registration.
  if (mr_cache_.size() >= 256) {
    auto victim = mr_cache_.end();
    for (auto e = mr_cache_.begin(); e != mr_cache_.end(); ++e) {
      if (e->second.users == 0 && (victim == mr_cache_.end() || e->second.last_use < victim->second.last_use)) {
        victim = e;
      }
    }
    if (victim != mr_cache_.end()) {
      fi_close(&victim->second.mr->fid);
      mr_cache_.erase(victim);
    }
  }
  MrEntry e;
  const uint64_t requested = next_key_++;
  if (fi_mr_reg(domain_, buf, nbytes, access | FI_READ | FI_REMOTE_READ, 0, requested, 0, &e.mr,
                nullptr) != 0) {
    return nullptr;
  }
  e.key = prov_key_ ? fi_mr_key(e.mr) : requested;
  e.users = 1;
  e.last_use = ++mr_clock_;
  *key = e.key;
  mr_cache_.emplace(range, e);
  return e.mr;
}

void OfiTransport::release_buffer(void* buf, uint64_t nbytes) {
  auto it = mr_cache_.find({reinterpret_cast<uintptr_t>(buf), nbytes});
  if (it != mr_cache_.end() && it->second.users > 0) it->second.users--;
}

TransportStats OfiTransport::stats() const {
  std::lock_guard<SpinLock> guard(lock_);
  TransportStats s = stats_;
  if (rings_ != nullptr) s.direct += rings_->taken_next();  // met a posted receive's equal
  return s;
}

OfiStats OfiTransport::ofi_stats() const {
  std::lock_guard<SpinLock> guard(lock_);
  OfiStats s = ofi_stats_;
  s.host_ring = rings_ != nullptr ? rings_->data_sent() : 0;
  s.ring_spills = ring_spills_.load(std::memory_order_relaxed);
  s.streamed = streamed_.load(std::memory_order_relaxed);
  s.direct_reads = direct_reads_.load(std::memory_order_relaxed);
  s.pumped_bytes = pumped_bytes_.load(std::memory_order_relaxed);
  s.split_copies = split_copies_.load(std::memory_order_relaxed);
  s.split_written = split_written_.load(std::memory_order_relaxed);
  return s;
}

}  // namespace carflow
