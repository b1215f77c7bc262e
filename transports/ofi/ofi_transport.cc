#include "transports/ofi/ofi_transport.h"

#include <poll.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
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
namespace {

constexpr int kMismatch = -7;   // CF_ERR_MISMATCH
constexpr int kTransport = -4;  // CF_ERR_TRANSPORT
constexpr uint64_t kTag = 0xCF;  // every carflow message; keys are matched in software
// Unexpected blocks come in two pooled sizes: small, and the largest eager
// message (a root running ahead of its receivers files thousands).
constexpr uint64_t kSmallBlock = 256;

enum : uint8_t { kEager = 1, kRts = 2, kFin = 3, kCredit = 4,
                 kRingRts = 5 };  // kRingRts: an RTS from the host ring, kept as unexpected
enum class CtxKind : uint8_t { Rx, Tx, Read };

std::string fi_error(const char* what, ssize_t ret) {
  return std::string(what) + ": " + fi_strerror(static_cast<int>(-ret));
}

}  // namespace

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

std::pair<uint32_t, MsgKey> OfiTransport::UnexpectedKey::operator()(const Unexpected* u) const {
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
thread_local std::vector<std::unique_ptr<OfiTransport::Actions>> OfiTransport::ScopedActions::t_pool;
thread_local constinit size_t OfiTransport::ScopedActions::t_depth CF_FAST_TLS = 0;
thread_local constinit OfiTransport::Actions* OfiTransport::ScopedActions::t_cached[kCached] CF_FAST_TLS = {};

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
  char* temp = nullptr;  // a combine that must run on the image's own thread: bytes land here first
};

std::unique_ptr<OfiTransport> OfiTransport::open(const std::string& provider, uint32_t node,
                                                 uint32_t nodes, const OfiOptions& options,
                                                 std::string* error) {
  std::unique_ptr<OfiTransport> t(new OfiTransport());
  t->provider_ = provider;
  t->options_ = options;
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
  if ((ret = fi_ep_bind(t->ep_, &t->cq_->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (ret = fi_ep_bind(t->ep_, &t->av_->fid, 0)) != 0 || (ret = fi_enable(t->ep_)) != 0) {
    *error = fi_error("binding the endpoint", ret);
    return nullptr;
  }
  t->peers_.resize(nodes);
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
  std::lock_guard<SpinLock> guard(lock_);
  // The queues outlive one run of images (cf_run_images after
  // cf_run_images): a faster node may already have sent messages of the
  // next run, waiting here as unexpected. They stay unless the images change.
  const bool same = map_.first == map.first && map_.node == map.node && images_.size() == map.local();
  map_ = map;
  if (same) return;
  images_.clear();
  for (uint32_t i = 0; i < map.local(); ++i) images_.push_back(std::make_unique<ImageQueues>());
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
    q->app_only.clear();
    q->app_only_pending.store(false, std::memory_order_relaxed);
  }
  for (uint32_t n = 0; n < nodes_; ++n) posted_from_[n].store(0, std::memory_order_relaxed);
  for (auto& p : peers_) p.waiting.clear();
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
      if (ret != -FI_EAGAIN) return false;
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
    if (ret != -FI_EAGAIN) {
      sends_in_flight_--;
      free_tx_.push_back(tx);
      return false;
    }
    poll_cq(actions);
  }
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
    actions->complete.emplace_back(op, ok ? 0 : kTransport);
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
    actions->complete.emplace_back(op, kTransport);
  }
}

void OfiTransport::set_host_rings(std::unique_ptr<HostRings> rings) {
  rings_ = std::move(rings);
  takes_now_ = rings_ != nullptr;  // send_now and recv_now go through the rings
  ring_backlog_ = std::make_unique<RingBacklog[]>(nodes_);
  streams_out_ = std::make_unique<StreamOut[]>(nodes_);
  streams_in_ = std::make_unique<StreamIn[]>(nodes_);
}

bool OfiTransport::push_to_ring(uint32_t node, const MsgOp& op) {
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

// A receive's status once its message is taken from a ring: the sender's
// failure, else a mismatch when the sizes differ (sized: they agree).
static int taken_status(bool sized, int sent_status) {
  return sent_status == 0 && !sized ? kMismatch : sent_status;
}

bool OfiTransport::send_now(uint32_t self, uint32_t peer, const MsgKey& key, const void* buf, uint64_t nbytes,
                            int status) {
  if (rings_ == nullptr || nbytes > HostRings::kPayload) return false;
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

void OfiTransport::send(MsgOp* op) {
  if (rings_ != nullptr) {
    const uint32_t dst_node = map_.node_of(op->peer);
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
      streams_busy_.fetch_add(1, std::memory_order_acq_rel);
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
      ring_backlogged_.fetch_add(1, std::memory_order_acq_rel);
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
    if (ret != -FI_EAGAIN) {
      actions->deliveries.push_back({op, nullptr, nullptr, nullptr, kTransport, rd});
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
  Unexpected* u = store_unexpected(h, rx->data.data() + sizeof(Header), h.type == kEager ? h.nbytes : 0);
  u->credit_held = unexpected_held_ > options_.unexpected_bytes;
  if (!u->credit_held) returned_credit(h.src_node, actions);
  post_rx(rx, actions);
}

OfiTransport::Unexpected* OfiTransport::store_unexpected(const Header& h, const void* data,
                                                         uint64_t data_bytes) {
  stats_.unexpected++;
  ofi_stats_.unexpected++;
  Unexpected* u = take_block(data_bytes);
  u->h = h;
  u->credit_held = false;
  if (data_bytes > 0) std::memcpy(u->data(), data, data_bytes);
  unexpected_held_ += sizeof(Unexpected) + u->capacity;
  queues(h.dst).unexpected.insert(u);
  return u;
}

OfiTransport::Unexpected* OfiTransport::take_block(uint64_t data_bytes) {
  Unexpected* u = nullptr;
  std::vector<Unexpected*>& pool = data_bytes <= kSmallBlock ? free_blocks_ : free_large_blocks_;
  if (data_bytes <= std::max(kSmallBlock, options_.eager_bytes) && !pool.empty()) {
    u = pool.back();
    pool.pop_back();
  } else {
    const uint64_t capacity = data_bytes <= kSmallBlock ? kSmallBlock : std::max(data_bytes, options_.eager_bytes);
    // sizeof(Unexpected) is a multiple of its alignment: so is the total.
    void* raw = std::aligned_alloc(alignof(Unexpected), sizeof(Unexpected) + (capacity + 63) / 64 * 64);
    if (raw == nullptr) throw std::bad_alloc();
    u = new (raw) Unexpected();
    u->capacity = capacity;
  }
  return u;
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
      store_unexpected(h, m.data, rts ? 0 : m.nbytes);
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
  streams_busy_.fetch_add(1, std::memory_order_acq_rel);
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
    // stretched it past the receiver's reads (4 MiB broadcast 550 us
    // against 475, 1 MiB 114 against 96; the sender wrote 46% of the
    // message against 35-38%).
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
// sender's copy-in and the receiver's copy-out overlap, which beat a read
// here (4 MiB broadcast 335 us against 400 us through libfabric's CMA).
// When the host's images outnumber its cores, a receive while no other
// node streams to this one reads as well: the stream's two copies then
// compete for the same cores, while the read leaves the sender's core to
// others (4 processes on 2 cores: 4 MiB broadcast 982 us against 1298, 256
// KiB scatter 54 against 72). Several at once (a gather's root) stream:
// the senders' copy-ins then share the root's work, and a read costs its
// reader more than a copy out of shared memory (4 MiB gather 2515 us
// reading against 1919 streaming). Plain copies only: a combine keeps the
// stream's chunkwise path.
bool OfiTransport::streams_from_others(uint32_t node) const {
  for (uint32_t n = 0; n < nodes_; ++n) {
    if (n != node && n != node_ && streams_in_[n].accepted.load(std::memory_order_relaxed) != 0) return true;
  }
  return false;
}

bool OfiTransport::can_read(uint32_t node, const MsgOp& op, uint64_t addr) {
  StreamIn& in = streams_in_[node];  // its copier is ours
  if (addr == 0 || op.deliver.fn != nullptr || in.direct_failed.load(std::memory_order_relaxed)) return false;
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
  StreamOut& out = streams_out_[node];
  out.lock.lock();
  const bool sending = !out.announced.empty() || !out.granted.empty();
  out.lock.unlock();
  return sending || out.copying.load(std::memory_order_relaxed);
}

// One direction, with a core for each process, a message of at least
// CF_HOST_SPLIT_BYTES (1 MiB): a split copy, each process copying its
// share straight between the user buffers, instead of a stream's two
// copies (the sender's in, the receiver's out). 2 processes, medians of
// 5 and of 10 interleaved runs: scatter of 4 MiB blocks 672-722 ->
// 540-555 us; the others even to 10% faster (gather 4 MiB 915 -> 774 and
// 662 -> 652, 1 MiB 135 -> 122 and even; broadcast 1 MiB 99 -> 95, 4 MiB
// even). Below 1 MiB the grant and the few pieces cost more than they
// save (512 KiB scatter 55 -> 61, broadcast 49 -> 61). When the processes
// outnumber the cores, want_direct's rule holds.
bool OfiTransport::want_split(uint32_t node, const MsgOp& op, uint64_t addr) {
  return options_.split_bytes != 0 && op.nbytes >= options_.split_bytes && !cores_shared_ &&
         can_read(node, op, addr);
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

// The whole message from the sender's buffer into op.buf, in pieces of
// 1 MiB; false on any failure (not permitted, the sender gone, a bad
// address from another process), after which the caller streams it.
bool OfiTransport::read_direct(uint32_t node, MsgOp& op, uint64_t addr) {
  const pid_t pid = rings_->pid_of(node);
  constexpr uint64_t kPiece = uint64_t{1} << 20;
  for (uint64_t done = 0; done < op.nbytes;) {
    const uint64_t n = std::min(kPiece, op.nbytes - done);
    iovec local{static_cast<char*>(op.buf) + done, n};
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
      in.direct = op != nullptr && want_direct(node, *op, in.now.addr);
      in.split = op != nullptr && !in.direct && want_split(node, *op, in.now.addr);
      in.chunk = HostRings::kStreamChunk;
      if (op != nullptr && op->deliver.fn != nullptr) {
        // A combine runs on whole elements as chunks come in; one that must
        // run on the image's own thread, or whose elements do not fit a
        // chunk, gets the whole message first.
        const uint32_t unit = std::max<uint32_t>(1, op->deliver.unit);
        in.chunk = HostRings::kStreamChunk / unit * unit;
        if (op->deliver.app_thread_only || in.chunk == 0) {
          in.chunk = HostRings::kStreamChunk;
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
      // The whole message with one copy, then FIN (status 0) completes the
      // send. A failed read turns this receive (and later ones from the
      // node) into a stream: the CTS path below rewrites every byte.
      if (in.done < op->nbytes && !read_direct(node, *op, in.now.addr)) {
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
  // through a pooled block. Taking them made a receiver that fell behind
  // slower per message, so it stayed behind: 2 processes, 16 KiB broadcast
  // 8.7-9 us per call against 2.6 us, 1 KiB gather 1.95 against 0.3 us.
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
  // it. Taking one per poll regardless let a receiver waiting on one
  // sender drain another that ran ahead, without bound: every message of
  // that sender then cost two copies through a pooled block, and its
  // run-ahead took the core from the senders the receiver waited for (4
  // processes on 2 cores, 8-byte gather: 0.7-2.3 us per call at the root
  // against 0.24-0.60).
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

void OfiTransport::run(Actions& actions) {
  if (actions.empty()) return;
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
      std::lock_guard<SpinLock> guard(lock_);
      if (d.block == nullptr && d.rx == nullptr && d.read == nullptr && d.data != nullptr && d.data != op->buf) {
        // A host-ring message points into the polling thread's batch, which
        // the next poll overwrites: the parked delivery keeps its own copy
        // in a pooled block, returned like an unexpected one afterwards.
        Unexpected* copy = take_block(op->nbytes);
        copy->credit_held = false;
        std::memcpy(copy->data(), d.data, op->nbytes);
        unexpected_held_ += sizeof(Unexpected) + copy->capacity;
        d.data = copy->data();
        d.block = copy;
      }
      ImageQueues& q = queues(op->self);
      q.app_only.push_back(d);
      q.app_only_pending.store(true, std::memory_order_release);
      parked.push_back(op->self);
      continue;
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

bool OfiTransport::progress(uint32_t image, uint32_t peer, bool on_app_thread) {
  (void)peer;
  return progress_all(image, on_app_thread);
}

bool OfiTransport::progress_all(uint32_t image, bool on_app_thread) {
  bool did = rings_ != nullptr && (poll_rings() | flush_ring_backlogs() | advance_streams());
  // With host rings, every message between the processes goes through
  // shared memory (rings and streams): libfabric's CQ has nothing to read,
  // and reading it (shm) costs more than a ring poll. Without rings,
  // threads of every image poll here: one reads the CQ, the others move on.
  const bool app_only = on_app_thread && !images_.empty() &&
                        queues(image).app_only_pending.load(std::memory_order_acquire);
  if ((rings_ == nullptr || app_only) && lock_.try_lock()) {
    ScopedActions scoped;  // only here: with rings, a poll that finds nothing needs none
    Actions& actions = *scoped;
    if (rings_ == nullptr) did |= poll_cq(&actions);
    if (app_only) {
      ImageQueues& q = queues(image);
      for (auto& d : q.app_only) actions.deliveries.push_back(d);
      q.app_only.clear();
      q.app_only_pending.store(false, std::memory_order_relaxed);
      did = true;
    }
    lock_.unlock();
    run(actions);
  }
  return did;
}

void OfiTransport::wait(int wake_fd, int timeout_ms) {
  if (rings_ != nullptr) {
    // Sends wait for ring space that no doorbell announces, or a full
    // ring's sender may wait for this node's polls to count it stuck
    // (ring_message_wanted): look again at once.
    if (ring_backlogged_.load(std::memory_order_acquire) != 0 ||
        streams_busy_.load(std::memory_order_acquire) != 0 || rings_held_.load(std::memory_order_relaxed)) {
      std::this_thread::yield();
      return;
    }
    // One host: ring messages, stream chunks and the engine's news (its
    // eventfd, then the doorbell) end the sleep; 1 ms is only a backstop.
    rings_->wait(std::min(timeout_ms, 1), wake_fd);
    return;
  }
  pollfd fds[2];
  int n = 0;
  int step = timeout_ms;
  {
    std::lock_guard<SpinLock> guard(lock_);
    if (wait_fd_ >= 0) {
      fid* cq = &cq_->fid;
      if (fi_trywait(fabric_, &cq, 1) != FI_SUCCESS) return;  // events are waiting
      fds[n++] = pollfd{wait_fd_, POLLIN, 0};
    }
    // Providers with manual progress (tcp;ofi_rxm) may need a CQ read for
    // data to move at all, and shm has no wait object: look again after at
    // most 1 ms either way. Still off the CPU while the peer is late.
    step = std::min(timeout_ms, 1);
  }
  if (wake_fd >= 0) fds[n++] = pollfd{wake_fd, POLLIN, 0};
  ::poll(fds, n, step);
}

void OfiTransport::fail_node(uint32_t n, int status) {
  Actions actions;
  {
    std::lock_guard<SpinLock> guard(lock_);
    if (n >= peers_.size()) return;
    PeerNode& node = peers_[n];
    node.lost = status;
    for (MsgOp* op : node.waiting) actions.complete.emplace_back(op, status);
    node.waiting.clear();
    if (ring_backlog_ != nullptr) {
      RingBacklog& b = ring_backlog_[n];
      b.lock.lock();
      b.lost = status;
      uint32_t count = 0;
      for (MsgOp* op = b.head; op != nullptr; op = op->next, ++count) {
        // A backlogged RTS is also announced: it completes from there.
        if (op->nbytes <= HostRings::kMaxBytes) actions.complete.emplace_back(op, status);
      }
      b.head = b.tail = nullptr;
      b.lock.unlock();
      ring_backlogged_.fetch_sub(count, std::memory_order_acq_rel);
      // Streams: queued sends and receives complete now; the ones being
      // copied complete when their copier next looks (advance_out / _in).
      uint32_t ended = 0;
      StreamOut& out = streams_out_[n];
      out.lock.lock();
      out.lost.store(status, std::memory_order_release);
      for (MsgOp* op : out.announced) actions.complete.emplace_back(op, status);
      for (auto& [op, chunk] : out.granted) actions.complete.emplace_back(op, status);
      ended += static_cast<uint32_t>(out.announced.size() + out.granted.size());
      out.announced.clear();
      out.granted.clear();
      out.splits.clear();
      out.lock.unlock();
      StreamIn& in = streams_in_[n];
      in.lock.lock();
      in.lost.store(status, std::memory_order_release);
      for (const StreamIn::Matched& m : in.waiting) {
        if (m.op != nullptr) actions.complete.emplace_back(m.op, status);
      }
      ended += static_cast<uint32_t>(in.waiting.size());
      in.accepted.fetch_sub(static_cast<uint32_t>(in.waiting.size()), std::memory_order_relaxed);
      in.waiting.clear();
      in.lock.unlock();
      streams_busy_.fetch_sub(ended, std::memory_order_acq_rel);
    }
  }
  run(actions);
}

bool OfiTransport::quiesce(int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    Actions actions;
    bool idle;
    if (rings_ != nullptr) {
      poll_rings();  // CTS and FIN answers
      flush_ring_backlogs();
      advance_streams();
    }
    {
      std::lock_guard<SpinLock> guard(lock_);
      poll_cq(&actions);
      idle = sends_in_flight_ == 0 && ring_backlogged_.load(std::memory_order_acquire) == 0 &&
             streams_busy_.load(std::memory_order_acquire) == 0;
      for (auto& p : peers_) idle &= p.waiting.empty() || p.lost != 0;
    }
    run(actions);
    if (idle) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
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
