#include "engine/runtime.h"

#include <arpa/inet.h>
#include <dlfcn.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "engine/status.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/cpu_shares.h"
#include "transports/bootstrap/pmix_store.h"
#include "transports/liveness/liveness_mesh.h"
#include "transports/ofi/ofi_transport.h"

namespace carflow {
namespace {

constexpr int kGetTimeoutMs = 60000;  // every node reaches cf_init within a minute

std::string to_hex(const std::string& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += digits[c >> 4];
    out += digits[c & 15];
  }
  return out;
}

bool from_hex(const std::string& hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  out->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    auto nibble = [](char c) {
      return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    };
    const int hi = nibble(hex[i]), lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi << 4 | lo));
  }
  return true;
}

// Which host this process runs on: the host name and the network namespace
// (processes in different namespaces reach each other only over the network).
std::string host_identity() {
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  struct stat st{};
  const unsigned long long ns = stat("/proc/self/ns/net", &st) == 0 ? st.st_ino : 0;
  return to_hex(std::string(name) + "/" + std::to_string(ns));
}

// The first IPv4 address of an interface that is up and not loopback:
// where other hosts reach this one when the job store has no socket to
// tell (PMIx across hosts). Loopback when there is none.
std::string first_ipv4() {
  ifaddrs* list = nullptr;
  std::string ip = "127.0.0.1";
  if (getifaddrs(&list) != 0) return ip;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || i->ifa_addr->sa_family != AF_INET || !(i->ifa_flags & IFF_UP) ||
        (i->ifa_flags & IFF_LOOPBACK)) {
      continue;
    }
    char text[INET_ADDRSTRLEN] = {};
    inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
    ip = text;
    break;
  }
  freeifaddrs(list);
  return ip;
}

// Every node publishes `mine` under `name`; *all gets every node's value,
// in node order.
bool exchange(JobStore& store, uint32_t node, uint32_t nodes, const std::string& name,
              const std::string& mine, std::vector<std::string>* all, std::string* error) {
  if (!store.put(name + "." + std::to_string(node), mine, error)) return false;
  all->assign(nodes, "");
  for (uint32_t n = 0; n < nodes; ++n) {
    if (!store.get(name + "." + std::to_string(n), &(*all)[n], kGetTimeoutMs, error)) return false;
  }
  return true;
}

}  // namespace

Runtime::Runtime() = default;

Runtime& Runtime::make() {
  static Runtime& runtime = *new Runtime;  // thread-safe first creation
  instance_.store(&runtime, std::memory_order_release);
  return runtime;
}
Runtime::~Runtime() = default;

// CF_PLUGINS: each library is loaded once per process (a later cf_init
// after cf_finalize finds its generators registered already) and its
// cf_plugin_init registers them (carflow/generator.h).
bool Runtime::load_plugins(const std::string& list, const std::string& origin, std::string* error) {
  size_t at = 0;
  while (at <= list.size() && !list.empty()) {
    size_t end = list.find(':', at);
    if (end == std::string::npos) end = list.size();
    const std::string path = list.substr(at, end - at);
    at = end + 1;
    if (path.empty() || std::find(plugins_.begin(), plugins_.end(), path) != plugins_.end()) continue;
    void* lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* why = ::dlerror();
      *error = origin + ": " + path + ": " + (why != nullptr ? why : "cannot be loaded");
      return false;
    }
    using InitFn = int (*)();
    auto init = reinterpret_cast<InitFn>(::dlsym(lib, "cf_plugin_init"));
    if (init == nullptr) {
      *error = origin + ": " + path + ": exports no cf_plugin_init";
      ::dlclose(lib);
      return false;
    }
    const int status = init();
    if (status != kOk) {
      *error = origin + ": " + path + ": cf_plugin_init returned " + status_name(status) + " (" +
               std::to_string(status) + ")";
      return false;  // its generators may be registered already: the library stays
    }
    plugins_.push_back(path);  // never unloaded: the registry points into it
  }
  return true;
}

int Runtime::init(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (initialized_.load()) {
    *error = "cf_init: already called in this process (one call per process)";
    return kErrBadArg;
  }
  if (launched_) {
    *error = "cf_init: a process started by cfrun joins its job once (cf_init after cf_finalize)";
    return kErrBadArg;
  }
  // Plug-ins first: CF_ALGO_* may name their generators.
  const char* plugins = std::getenv("CF_PLUGINS");
  if (plugins != nullptr && !load_plugins(plugins, "cf_init: CF_PLUGINS", error)) return kErrBadArg;
  if (!Config::from_env(&config_, error)) return kErrBadArg;
  boot_ = Bootstrap::from_env(error);
  if (boot_ == nullptr && error->empty()) boot_ = PmixStore::from_env(error);
  if (boot_ == nullptr && !error->empty()) {
    *error = "cf_init: " + *error;
    return kErrTransport;
  }
  if (const char* pmi_size = std::getenv("PMI_SIZE");
      boot_ == nullptr && pmi_size != nullptr && std::atoi(pmi_size) > 1) {
    // MPICH's hydra speaks PMI-1/2, not PMIx: running on would make every
    // process a job of its own.
    *error = "cf_init: started by a PMI-1/2 launcher (PMI_SIZE=" + std::string(pmi_size) +
             ", e.g. MPICH's mpirun); carflow joins jobs started by cfrun or by a PMIx launcher "
             "(Open MPI's mpirun, srun --mpi=pmix)";
    return kErrTransport;
  }
  node_ = 0;
  nodes_ = 1;
  same_host_.clear();
  {
    std::lock_guard<std::mutex> lost_lock(lost_mutex_);
    lost_.clear();
  }
  left_job_.store(false, std::memory_order_relaxed);
  if (boot_ != nullptr) {
    launched_ = true;
    node_ = boot_->rank();
    nodes_ = boot_->nodes();
    if (nodes_ > 1) {
      const int status = connect_nodes(error);
      if (status != kOk) {
        liveness_.reset();
        ofi_.reset();
        boot_.reset();
        return status;
      }
    }
    static bool registered = false;
    if (!registered) {
      registered = true;
      std::atexit(&Runtime::at_exit);
    }
  }
  initialized_.store(true, std::memory_order_release);
  return kOk;
}

int Runtime::connect_nodes(std::string* error) {
  // Is every node on this host? Then shm, and the host rings for small messages.
  const std::string mine = host_identity();
  std::vector<std::string> hosts, addresses, names, oks;
  if (!exchange(*boot_, node_, nodes_, "host", mine, &hosts, error)) return kErrTransport;
  bool one_host = true;
  same_host_.assign(nodes_, true);
  for (uint32_t n = 0; n < nodes_; ++n) {
    same_host_[n] = hosts[n] == mine;
    one_host &= same_host_[n];
  }
  std::string provider = config_.ofi_provider;
  if (provider.empty()) provider = one_host ? "shm" : "tcp;ofi_rxm";
  OfiOptions options;
  options.eager_bytes = config_.eager_bytes;
  options.credits = config_.ofi_credits;
  options.unexpected_bytes = config_.ofi_unexpected_bytes;
  options.split_bytes = config_.host_split_bytes;
  if (config_.fault.applies_to(node_) && config_.fault.kind != FaultSpec::NomemCache &&
      config_.fault.kind != FaultSpec::NomemUnexpected) {
    options.fault_kind = static_cast<uint8_t>(config_.fault.kind);
    options.fault_value = config_.fault.value;
    options.fault_text = std::getenv("CF_FAULT");  // set: the config came from it
    // close_link: the connection to the lowest other node (the mesh exists by the first message).
    const uint32_t other = node_ == 0 ? 1 : 0;
    options.fault_close_link = [this, other] {
      if (liveness_ != nullptr) liveness_->sever(other);
    };
  }
  ofi_ = OfiTransport::open(provider, node_, nodes_, options, error);
  if (ofi_ == nullptr) return kErrTransport;
  if (!exchange(*boot_, node_, nodes_, "ep", to_hex(ofi_->address()), &addresses, error)) return kErrTransport;
  for (uint32_t n = 0; n < nodes_; ++n) {
    std::string bytes;
    if (!from_hex(addresses[n], &bytes)) {
      *error = "cf_init: node " + std::to_string(n) + " published a malformed endpoint address";
      return kErrTransport;
    }
    addresses[n] = std::move(bytes);
  }
  if (!ofi_->connect(addresses, error)) return kErrTransport;
  if (one_host && config_.host_rings) {
    // Every node creates its segment and publishes the name; a failure to
    // create one (no /dev/shm) is published as "-" and leaves every node on
    // libfabric alone.
    std::string name, ring_error;
    std::unique_ptr<HostRings> rings = HostRings::create(node_, nodes_, &name, &ring_error);
    if (!exchange(*boot_, node_, nodes_, "rings", rings != nullptr ? name : "-", &names, error)) {
      return kErrTransport;
    }
    bool usable = rings != nullptr && std::find(names.begin(), names.end(), "-") == names.end() &&
                  rings->attach(names, &ring_error);
    // Everyone has mapped every segment (or given up) before names go away.
    if (!boot_->fence(kGetTimeoutMs, error)) return kErrTransport;
    if (rings != nullptr) rings->unlink();
    // All or none: a node that could not attach must not be written to.
    if (!exchange(*boot_, node_, nodes_, "rings_ok", usable ? "1" : "0", &oks, error)) return kErrTransport;
    usable &= std::find(oks.begin(), oks.end(), "0") == oks.end();
    if (usable) ofi_->set_host_rings(std::move(rings));
  }
  if (!start_liveness(one_host, error)) return kErrTransport;
  // Either path may report a loss first; peer_lost keeps the first reason.
  boot_->watch([this](uint32_t node, const std::string& how) { peer_lost(node, how); });
  liveness_->watch([this](uint32_t node, const std::string& how) { peer_lost(node, how); });
  return kOk;
}

// The launcher tells of a lost process only when it sees it die (and when
// it is asked to); the mesh also sees a cut network, an unreachable host,
// or a launcher that says nothing.
bool Runtime::start_liveness(bool one_host, std::string* error) {
  std::string ip = boot_->local_ip();
  if (ip.empty()) ip = one_host ? "127.0.0.1" : first_ipv4();
  liveness_ = LivenessMesh::listen(node_, nodes_, ip, config_.peer_timeout_ms, error,
                                   boot_->derived_key("carflow liveness mesh"));
  std::vector<std::string> addresses;
  if (liveness_ == nullptr || !exchange(*boot_, node_, nodes_, "live", liveness_->address(), &addresses, error) ||
      !liveness_->connect(addresses, kGetTimeoutMs, error)) {
    *error = "cf_init: " + *error;
    return false;
  }
  return true;
}

// The launcher or the liveness mesh says a node is gone (or the launcher
// itself is): fail every wait on this node (GASNet LAPI notes: a job with a dead
// process ends, it does not hang).
void Runtime::peer_lost(uint32_t node, const std::string& how) {
  std::lock_guard<std::mutex> lock(lost_mutex_);
  if (exiting_) return;  // exit() is tearing the process down under us
  const std::string what = node == UINT32_MAX ? "the launcher (cfrun) went away: " + how
                                              : "node " + std::to_string(node) + " was lost (" + how + ")";
  if (lost_.empty()) lost_ = what;
  // The engine first: a wait that sees an operation failed by fail_node
  // (its collective done, with CF_ERR_PEER_LOST) finds the node named.
  if (engine_ != nullptr) engine_->fail_all(kErrPeerLost, lost_);
  if (ofi_ != nullptr && node != UINT32_MAX) ofi_->fail_node(node, kErrPeerLost);
}

// This node cannot go on (a message it could not keep): it stops messaging
// the others, and they hear it leave, as a lost node that says why, instead
// of waiting on it; the launcher hears why, to report it. The transport,
// the mesh and the store outlive every engine, whose threads alone call this.
void Runtime::leave_job(const std::string& why) {
  left_job_.store(true, std::memory_order_release);
  if (ofi_ != nullptr) {
    for (uint32_t n = 0; n < nodes_; ++n) {
      if (n != node_) ofi_->fail_node(n, kErrNoMem);  // nothing more to or from them
    }
  }
  if (liveness_ != nullptr) liveness_->withdraw("it " + why);
  if (boot_ != nullptr) boot_->leave(why);
}

// A process returning from main without cf_finalize finalizes here. A
// process calling exit() while its images still run is an abrupt end: no
// fence and no goodbye, so cfrun reports it lost and ends the job.
void Runtime::at_exit() {
  Runtime& rt = Runtime::get();
  if (!rt.initialized()) return;
  if (rt.images() > 0) {
    // The watcher threads live on through the static destructors that
    // follow (TBB's, libfabric's): from here a loss touches nothing.
    std::lock_guard<std::mutex> lock(rt.lost_mutex_);
    rt.exiting_ = true;
    return;
  }
  std::string error;
  rt.finalize(&error);
}

int Runtime::finalize(std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!initialized_.load()) {
    *error = "cf_finalize: cf_init was not called";
    return kErrNotInit;
  }
  if (running_) {  // its images still use the engine
    *error = "cf_finalize: cf_run_images is still running its images (call cf_finalize after it returns)";
    return kErrBadArg;
  }
  int status = kOk;
  bool lost;
  {
    std::lock_guard<std::mutex> lost_lock(lost_mutex_);
    lost = !lost_.empty() || left_job_.load(std::memory_order_acquire);
  }
  if (boot_ != nullptr) {
    const int timeout = static_cast<int>(config_.exit_timeout_ms);
    if (ofi_ != nullptr && !lost && !ofi_->quiesce(timeout)) {
      *error = "cf_finalize: messages to other nodes still pending after CF_EXIT_TIMEOUT";
      status = kErrTimeout;
    }
    // Collective and quiet: nobody tears down its endpoint while a peer may
    // still read from it. After a loss there is nobody to wait for.
    if (status == kOk && !lost && !boot_->fence(timeout, error)) {
      *error = "cf_finalize: the exit fence failed: " + *error;
      status = kErrTimeout;
    }
    // Past the fence nobody's exit is a loss: BYE on every liveness link,
    // and the peers' BYEs awaited before the links close (not after a loss:
    // the survivors may be gone).
    if (status == kOk && liveness_ != nullptr) liveness_->goodbye(lost ? 0 : timeout);
    if (status == kOk) boot_->bye(error);
  }
  {
    std::lock_guard<std::mutex> lost_lock(lost_mutex_);
    engine_.reset();
    ofi_.reset();
  }
  liveness_.reset();  // joins its poll thread
  boot_.reset();  // joins the watcher thread
  attached_.clear();
  images_.store(0);
  initialized_.store(false, std::memory_order_release);
  return status;
}

namespace {

// Per pair (local image, any image) the engine keeps a VC with its flow-graph
// node and queues: their measured size (bench/PERFORMANCE_LOG.md), rounded
// up.
constexpr double kBytesPerImagePair = 1400;

// Whether the engine for `counts` fits this machine's memory; else the
// error names the images and the sizes (CF_ERR_NO_MEM).
bool engine_fits(const std::vector<uint32_t>& counts, uint32_t node, std::string* error) {
  double total = 0;
  for (uint32_t c : counts) total += c;
  const double local = node < counts.size() ? counts[node] : 0;
  const double need = local * total * kBytesPerImagePair;
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  const double have = pages > 0 && page > 0 ? static_cast<double>(pages) * page : 0;
  if (have == 0 || need <= have) return true;
  char text[256];
  std::snprintf(text, sizeof text,
                "%.0f images on this node (of %.0f) need about %.1f GiB of per-pair state, more than this "
                "machine's %.1f GiB of memory",
                local, total, need / (1 << 30), have / (1 << 30));
  *error = text;
  return false;
}

}  // namespace

std::unique_ptr<Engine> Runtime::make_engine(const std::vector<uint32_t>& counts) {
  const NodeMap map = NodeMap::make(node_, counts);
  if (ofi_ != nullptr) ofi_->set_node_map(map);
  uint32_t host_images = 0;
  for (uint32_t n = 0; n < counts.size(); ++n) {
    if (n == node_ || (n < same_host_.size() && same_host_[n])) host_images += counts[n];
  }
  // Before the engine, whose progress thread may already poll the transport.
  if (ofi_ != nullptr) ofi_->set_cores_shared(Engine::shares_cores(map.local(), std::max(host_images, map.local())));
  auto engine = std::make_unique<Engine>(map, config_, ofi_.get(), host_images);
  engine->set_clock_source(liveness_.get());  // freed after the engines
  if (liveness_ != nullptr) engine->on_node_failure([this](const std::string& why) { leave_job(why); });
  attached_.assign(map.local(), false);
  images_.store(map.total(), std::memory_order_release);
  return engine;
}

// One lock from the check to the store: a loss reported in between would
// otherwise find no engine to fail and never reach this one.
void Runtime::install_engine(std::unique_ptr<Engine> engine) {
  std::lock_guard<std::mutex> lost_lock(lost_mutex_);
  engine_ = std::move(engine);
  if (!lost_.empty()) engine_->fail_all(kErrPeerLost, lost_);
}

int Runtime::begin_run(uint32_t n, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (engine_ != nullptr) {
    *error = "cf_run_images: images already exist on this node (a run in progress, or "
             "cf_coll_init called by the program's own threads)";
    return kErrBadArg;
  }
  if (!engine_fits(std::vector<uint32_t>(nodes_, n), node_, error)) {
    *error = "n: " + *error;
    return kErrNoMem;
  }
  install_engine(make_engine(std::vector<uint32_t>(nodes_, n)));
  running_ = true;
  return kOk;
}

std::vector<cpu_set_t> Runtime::image_cpu_shares(uint32_t n) const {
  // Unbound image threads of a process under load can land on one core,
  // where each spins through its poll budget before the other runs: 100x
  // slower. Bound, they stay apart, as cfrun keeps processes apart.
  if (config_.bind_images == BindMode::None) return {};
  return cpu_shares(n);
}

void Runtime::end_run() {
  std::lock_guard<std::mutex> lock(mutex_);
  running_ = false;
  std::lock_guard<std::mutex> lost_lock(lost_mutex_);
  engine_.reset();
  attached_.clear();
  images_.store(0, std::memory_order_release);
}

int Runtime::attach(const std::vector<uint32_t>& counts, uint32_t my_image,
                    std::vector<ClientFunction> table, ImageContext** out, std::string* error) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (uint32_t n = 0; n < counts.size(); ++n) {
    if (counts[n] == 0) {
      *error = "images[" + std::to_string(n) + "]: a node needs at least one image";
      return kErrBadArg;
    }
  }
  if (engine_ == nullptr) {
    // my_image is checked before the engine exists: a refused call must
    // leave none behind (cf_run_images would then find images running).
    uint64_t base = 0;
    for (uint32_t n = 0; n < node_; ++n) base += counts[n];
    if (my_image < base || my_image >= base + counts[node_]) {
      *error = "my_image: " + std::to_string(my_image) + " is not an image of this node (" + std::to_string(base) +
               ".." + std::to_string(base + counts[node_] - 1) + ")";
      return kErrBadArg;
    }
    if (!engine_fits(counts, node_, error)) {
      *error = "images: " + *error;
      return kErrNoMem;
    }
    install_engine(make_engine(counts));
  }
  const NodeMap& map = engine_->nodes();
  for (uint32_t n = 0; n < counts.size(); ++n) {
    if (counts[n] != map.first[n + 1] - map.first[n]) {
      *error = "images[" + std::to_string(n) + "]: " + std::to_string(counts[n]) +
               " images, but other image threads of this node said " +
               std::to_string(map.first[n + 1] - map.first[n]);
      return kErrBadArg;
    }
  }
  if (!map.is_local(my_image)) {
    *error = "my_image: " + std::to_string(my_image) + " is not an image of this node (" +
             std::to_string(map.base()) + ".." + std::to_string(map.base() + map.local() - 1) + ")";
    return kErrBadArg;
  }
  const uint32_t local = my_image - map.base();
  if (attached_[local]) {
    *error = "my_image: image " + std::to_string(my_image) + " was already initialized by another thread";
    return kErrBadArg;
  }
  attached_[local] = true;
  ImageContext& img = engine_->image(local);
  img.fn_table = std::move(table);
  *out = &img;
  return kOk;
}

}  // namespace carflow
