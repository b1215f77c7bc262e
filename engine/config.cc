#include "engine/config.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <utility>

#include "graph/car.h"
#include "graph/registry.h"

namespace carflow {
namespace {

bool read_uint(const char* name, uint64_t min, uint64_t max, uint64_t* out, std::string* error) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return true;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-' || v < min || v > max) {
    *error = std::string(name) + "='" + text + "': expected an integer in [" +
             std::to_string(min) + ", " + std::to_string(max) + "]";
    return false;
  }
  *out = v;
  return true;
}

bool read_algo(const char* name, CollKind kind, std::string* out, std::string* error) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return true;
  if (GeneratorRegistry::instance().find(kind, text) == nullptr) {
    *error = std::string(name) + "='" + text + "': unknown algorithm (valid: " +
             GeneratorRegistry::instance().names(kind) + ")";
    return false;
  }
  *out = text;
  return true;
}

// One of a few named values (name=value); unset or empty keeps *out.
template <typename E>
bool read_choice(const char* name, std::initializer_list<std::pair<const char*, E>> choices, E* out,
                 std::string* error) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return true;
  std::string expected;
  size_t k = 0;
  for (const auto& [word, value] : choices) {
    if (std::strcmp(text, word) == 0) {
      *out = value;
      return true;
    }
    if (k > 0) expected += k + 1 == choices.size() ? " or " : ", ";
    expected += word;
    ++k;
  }
  *error = std::string(name) + "='" + text + "': expected " + expected;
  return false;
}

// Seconds, possibly fractional (CF_PEER_TIMEOUT=0.5), as milliseconds.
bool read_seconds(const char* name, uint64_t* out_ms, std::string* error) {
  const char* text = std::getenv(name);
  if (text == nullptr || *text == '\0') return true;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  if (errno != 0 || *end != '\0' || !(v > 0) || v > 86400) {
    *error = std::string(name) + "='" + text + "': expected seconds in (0, 86400]";
    return false;
  }
  *out_ms = static_cast<uint64_t>(v * 1000 + 0.5);
  return true;
}

const char* progress_name(ProgressMode m) {
  return m == ProgressMode::Thread ? "thread" : m == ProgressMode::Block ? "block" : "poll";
}

}  // namespace

std::string Config::algo_variable(CollKind kind) {
  std::string name = std::string("CF_ALGO_") + coll_kind_name(kind);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

bool Config::from_env(Config* out, std::string* error) {
  Config c;
  uint64_t spin = c.spin_count, yields = c.yield_count, radix = c.tree_radix,
           window = c.exchange_window, L = c.logp_L, o = c.logp_o, g = c.logp_g;
  for (int k = 0; k < kCollKinds; ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    if (!read_algo(algo_variable(kind).c_str(), kind, &c.algo[k], error)) return false;
  }
  if (!read_choice("CF_PROGRESS",
                   {{"poll", ProgressMode::Poll}, {"thread", ProgressMode::Thread}, {"block", ProgressMode::Block}},
                   &c.progress, error) ||
      !read_choice("CF_INPROC_RINGS", {{"auto", RingsMode::Auto}, {"1", RingsMode::On}, {"0", RingsMode::Off}},
                   &c.inproc_rings, error)) {
    return false;
  }
  if (const char* p = std::getenv("CF_OFI_PROVIDER"); p != nullptr) c.ofi_provider = p;
  uint64_t credits = c.ofi_credits, rings = c.host_rings ? 1 : 0, check = c.check ? 1 : 0;
  if (!read_uint("CF_EAGER_BYTES", 0, 1 << 20, &c.eager_bytes, error) ||
      !read_uint("CF_OFI_CREDITS", 1, 4096, &credits, error) ||
      !read_uint("CF_HOST_RINGS", 0, 1, &rings, error) ||
      !read_uint("CF_CHECK", 0, 1, &check, error) ||
      !read_uint("CF_OFI_UNEXPECTED_BYTES", 0, uint64_t{1} << 40, &c.ofi_unexpected_bytes, error) ||
      !read_uint("CF_HOST_SPLIT_BYTES", 0, uint64_t{1} << 40, &c.host_split_bytes, error) ||
      !read_seconds("CF_PEER_TIMEOUT", &c.peer_timeout_ms, error) ||
      !read_seconds("CF_EXIT_TIMEOUT", &c.exit_timeout_ms, error)) {
    return false;
  }
  c.ofi_credits = static_cast<uint32_t>(credits);
  c.host_rings = rings != 0;
  c.check = check != 0;
  if (!read_uint("CF_INPROC_EAGER_BYTES", 0, 1 << 20, &c.inproc_eager_bytes, error) ||
      !read_uint("CF_INPROC_FASTBOX_BYTES", 0, 1024, &c.inproc_fastbox_bytes, error) ||
      !read_uint("CF_INPROC_EAGER_CREDITS", 1, 1 << 20, &c.inproc_eager_credits, error) ||
      !read_uint("CF_SEGMENT_BYTES", 0, uint64_t{1} << 40, &c.segment_bytes, error) ||
      !read_uint("CF_ALLREDUCE_RING_BYTES", 0, uint64_t{1} << 40, &c.allreduce_ring_bytes,
                 error) ||
      !read_uint("CF_ALLREDUCE_SPLIT_BYTES", 0, uint64_t{1} << 40, &c.allreduce_split_bytes,
                 error) ||
      !read_uint("CF_REDUCE_LARGE_BYTES", 0, uint64_t{1} << 40, &c.reduce_large_bytes, error) ||
      !read_uint("CF_DATA_ALIGNMENT", 1, 4096, &c.data_alignment, error) ||
      !read_uint("CF_SPIN_COUNT", 0, 100000000, &spin, error) ||
      !read_uint("CF_YIELD_COUNT", 0, 100000000, &yields, error) ||
      !read_uint("CF_BROADCAST_LARGE_BYTES", 0, uint64_t{1} << 40, &c.broadcast_large_bytes, error) ||
      !read_uint("CF_ROOTED_TREE_BYTES", 0, uint64_t{1} << 40, &c.rooted_tree_bytes, error) ||
      !read_uint("CF_GATHER_ALL_SMALL_BYTES", 0, uint64_t{1} << 40, &c.gather_all_small_bytes, error) ||
      !read_uint("CF_EXCHANGE_SMALL_BYTES", 0, uint64_t{1} << 40, &c.exchange_small_bytes, error) ||
      !read_uint("CF_ALLREDUCE_DIRECT_BYTES", 0, uint64_t{1} << 40, &c.allreduce_direct_bytes, error) ||
      !read_uint("CF_REDUCE_SCATTER_DIRECT_BYTES", 0, uint64_t{1} << 40, &c.reduce_scatter_direct_bytes,
                 error) ||
      !read_uint("CF_TREE_RADIX", 2, 64, &radix, error) ||
      !read_uint("CF_EXCHANGE_WINDOW", 1, 65536, &window, error) ||
      !read_uint("CF_LOGP_L", 0, 1000000000, &L, error) ||
      !read_uint("CF_LOGP_O", 0, 1000000000, &o, error) ||
      !read_uint("CF_LOGP_G", 0, 1000000000, &g, error)) {
    return false;
  }
  if ((c.data_alignment & (c.data_alignment - 1)) != 0) {
    *error = "CF_DATA_ALIGNMENT=" + std::to_string(c.data_alignment) + ": must be a power of two";
    return false;
  }
  if (c.segment_bytes != 0 && c.segment_bytes < 64) {
    *error = "CF_SEGMENT_BYTES=" + std::to_string(c.segment_bytes) +
             ": must be 0 (no segmentation) or at least 64";
    return false;
  }
  if (L + o + g == 0) {
    *error = "CF_LOGP_L, CF_LOGP_O, CF_LOGP_G: may not all be 0";
    return false;
  }
  c.tree_radix = static_cast<uint32_t>(radix);
  c.exchange_window = static_cast<uint32_t>(window);
  c.logp_L = static_cast<uint32_t>(L);
  c.logp_o = static_cast<uint32_t>(o);
  c.logp_g = static_cast<uint32_t>(g);
  c.spin_count = static_cast<uint32_t>(spin);
  c.yield_count = static_cast<uint32_t>(yields);
  *out = c;
  return true;
}

std::vector<std::vector<std::string>> Config::describe() const {
  auto shown = [](const std::string& a) { return a.empty() ? std::string("(table)") : a; };
  std::vector<std::vector<std::string>> rows = {
      {"CF_INPROC_EAGER_BYTES", std::to_string(inproc_eager_bytes),
       "inproc: messages up to this size are copied eagerly; larger ones single-copy"},
      {"CF_INPROC_EAGER_CREDITS", std::to_string(inproc_eager_credits),
       "inproc: eager messages one image holds unexpected from one sender; past that the sender waits for the receive"},
      {"CF_INPROC_RINGS",
       inproc_rings == RingsMode::On ? "1" : inproc_rings == RingsMode::Off ? "0" : "auto",
       "inproc: rings for small messages between image threads: auto = when images <= cores, 1 = always, 0 = never"},
      {"CF_INPROC_FASTBOX_BYTES", std::to_string(inproc_fastbox_bytes),
       "inproc: messages up to this size go through a per-VC ring the receiver drains, when images <= cores (0 = off, max 1024)"},
      {"CF_SEGMENT_BYTES", std::to_string(segment_bytes),
       "pipelined algorithms cut messages into segments of this size (0 = off)"},
      {"CF_ALLREDUCE_RING_BYTES", std::to_string(allreduce_ring_bytes),
       "default allreduce: recursive doubling below this size, reduce_bcast at or above"},
      {"CF_ALLREDUCE_SPLIT_BYTES", std::to_string(allreduce_split_bytes),
       "default allreduce when the images do not outnumber the cores: rabenseifner (each image reduces 1/P) at or above"},
      {"CF_REDUCE_LARGE_BYTES", std::to_string(reduce_large_bytes),
       "scan, reduce_scatter (whole vector): latency algorithms below, bandwidth algorithms at or above"},
      {"CF_DATA_ALIGNMENT", std::to_string(data_alignment),
       "computational collectives: buffers aligned to min(elem_size's power of two, this)"},
      {"CF_BROADCAST_LARGE_BYTES", std::to_string(broadcast_large_bytes),
       "default broadcast on P > 2: knomial below, flat at or above"},
      {"CF_ROOTED_TREE_BYTES", std::to_string(rooted_tree_bytes),
       "default scatter/gather: binomial below this block size, flat at or above (scatter: flat when "
       "processes outnumber the cores)"},
      {"CF_GATHER_ALL_SMALL_BYTES", std::to_string(gather_all_small_bytes),
       "default gather_all: recursive_doubling (P a power of two) or bruck below this block size, direct at or "
       "above (and when processes outnumber the cores)"},
      {"CF_EXCHANGE_SMALL_BYTES", std::to_string(exchange_small_bytes),
       "default exchange: bruck below this block size, pairwise at or above (and when processes outnumber "
       "the cores)"},
      {"CF_ALLREDUCE_DIRECT_BYTES", std::to_string(allreduce_direct_bytes),
       "default allreduce when processes outnumber the cores: direct (one round) below this size"},
      {"CF_REDUCE_SCATTER_DIRECT_BYTES", std::to_string(reduce_scatter_direct_bytes),
       "default reduce_scatter when processes outnumber the cores: direct (one round) below this block size"},
      {"CF_TREE_RADIX", std::to_string(tree_radix), "k of the knomial broadcast and kary barrier"},
      {"CF_EXCHANGE_WINDOW", std::to_string(exchange_window),
       "windowed exchange: messages in flight per image"},
      {"CF_LOGP_L", std::to_string(logp_L), "logp broadcast: network latency L in ns"},
      {"CF_LOGP_O", std::to_string(logp_o), "logp broadcast: per-message overhead o in ns"},
      {"CF_LOGP_G", std::to_string(logp_g), "logp broadcast: gap g between sends in ns"},
  };
  for (int k = 0; k < kCollKinds; ++k) {
    const CollKind kind = static_cast<CollKind>(k);
    rows.push_back({algo_variable(kind), shown(algo[k]),
                    std::string("force a ") + coll_kind_name(kind) + " algorithm"});
  }
  rows.push_back({"CF_PROGRESS", progress_name(progress),
                  "poll (waiters poll, yield, block), thread (plus a progress thread while "
                  "collectives are live), block (waiters block at once)"});
  rows.push_back({"CF_OFI_PROVIDER", ofi_provider.empty() ? "(auto)" : ofi_provider,
                  "libfabric provider between processes: auto = shm on one host, tcp;ofi_rxm across hosts"});
  rows.push_back({"CF_EAGER_BYTES", std::to_string(eager_bytes),
                  "between processes through libfabric: eager (data with the header) up to this size, "
                  "rendezvous (receiver reads) above"});
  rows.push_back({"CF_OFI_CREDITS", std::to_string(ofi_credits),
                  "between processes: eager/RTS messages a node may have in flight to one peer node"});
  rows.push_back({"CF_OFI_UNEXPECTED_BYTES", std::to_string(ofi_unexpected_bytes),
                  "between processes: unexpected data held before senders are throttled"});
  rows.push_back({"CF_HOST_RINGS", host_rings ? "1" : "0",
                  "between processes of one host: messages up to 16 KiB through shared-memory rings, larger ones "
                  "through shared-memory streams the receiver grants, or read from the sender's buffer "
                  "(process_vm_readv) while both directions are busy or, when the host's images outnumber its "
                  "cores, while no other node streams to the receiver (0 = libfabric only)"});
  rows.push_back({"CF_HOST_SPLIT_BYTES", std::to_string(host_split_bytes),
                  "between processes of one host with a core each: a message of at least this size in one "
                  "direction is copied by both, the receiver reading pieces from the front of the "
                  "sender's buffer while the sender writes pieces from the back into the receiver's (0 = never)"});
  rows.push_back({"CF_PEER_TIMEOUT", std::to_string(peer_timeout_ms / 1000.0).substr(0, 5),
                  "seconds: a dead or unreachable peer fails every wait with CF_ERR_PEER_LOST within this time "
                  "(liveness links with TCP keepalives; whole seconds, at least 2, for an unreachable host)"});
  rows.push_back({"CF_EXIT_TIMEOUT", std::to_string(exit_timeout_ms / 1000.0).substr(0, 5),
                  "seconds: cf_finalize's exit fence, and cfrun's grace before it ends the others"});
  rows.push_back({"CF_CHECK", check ? "1" : "0",
                  "debug: images check that single-valued arguments (kind, root, nbytes, flags, op, counts) "
                  "agree, CF_ERR_MISMATCH naming the argument; forces IN_ALLSYNC. Same value in every process"});
  rows.push_back({"CF_SPIN_COUNT", std::to_string(spin_count), "waits poll this many times, then yield"});
  rows.push_back({"CF_YIELD_COUNT", std::to_string(yield_count), "then yield this many times, then block"});
  return rows;
}

}  // namespace carflow
