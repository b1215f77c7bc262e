#include "engine/config.h"

#include <cerrno>
#include <cstdlib>

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

}  // namespace

bool Config::from_env(Config* out, std::string* error) {
  Config c;
  uint64_t spin = c.spin_count, yields = c.yield_count;
  if (!read_uint("CF_INPROC_EAGER_BYTES", 0, 1 << 20, &c.inproc_eager_bytes, error) ||
      !read_uint("CF_INPROC_FASTBOX_BYTES", 0, 108, &c.inproc_fastbox_bytes, error) ||
      !read_uint("CF_SEGMENT_BYTES", 0, uint64_t{1} << 40, &c.segment_bytes, error) ||
      !read_uint("CF_ALLREDUCE_RING_BYTES", 0, uint64_t{1} << 40, &c.allreduce_ring_bytes,
                 error) ||
      !read_uint("CF_SPIN_COUNT", 0, 100000000, &spin, error) ||
      !read_uint("CF_YIELD_COUNT", 0, 100000000, &yields, error) ||
      !read_algo("CF_ALGO_BROADCAST", CollKind::Broadcast, &c.algo_broadcast, error) ||
      !read_algo("CF_ALGO_BARRIER", CollKind::Barrier, &c.algo_barrier, error) ||
      !read_algo("CF_ALGO_ALLREDUCE", CollKind::Allreduce, &c.algo_allreduce, error)) {
    return false;
  }
  if (c.segment_bytes != 0 && c.segment_bytes < 64) {
    *error = "CF_SEGMENT_BYTES=" + std::to_string(c.segment_bytes) +
             ": must be 0 (no segmentation) or at least 64";
    return false;
  }
  c.spin_count = static_cast<uint32_t>(spin);
  c.yield_count = static_cast<uint32_t>(yields);
  *out = c;
  return true;
}

std::vector<std::vector<std::string>> Config::describe() const {
  auto algo = [](const std::string& a) { return a.empty() ? std::string("(table)") : a; };
  return {
      {"CF_INPROC_EAGER_BYTES", std::to_string(inproc_eager_bytes),
       "inproc: messages up to this size are copied eagerly; larger ones single-copy"},
      {"CF_INPROC_FASTBOX_BYTES", std::to_string(inproc_fastbox_bytes),
       "inproc: messages up to this size go through a per-VC box the receiver polls, when images <= cores (0 = off, max 108)"},
      {"CF_SEGMENT_BYTES", std::to_string(segment_bytes),
       "pipelined algorithms cut messages into segments of this size (0 = off)"},
      {"CF_ALLREDUCE_RING_BYTES", std::to_string(allreduce_ring_bytes),
       "default allreduce: recursive doubling below this size, ring at or above"},
      {"CF_ALGO_BROADCAST", algo(algo_broadcast), "force a broadcast algorithm"},
      {"CF_ALGO_BARRIER", algo(algo_barrier), "force a barrier algorithm"},
      {"CF_ALGO_ALLREDUCE", algo(algo_allreduce), "force an allreduce algorithm"},
      {"CF_SPIN_COUNT", std::to_string(spin_count), "waits poll this many times, then yield"},
      {"CF_YIELD_COUNT", std::to_string(yield_count), "then yield this many times, then block"},
  };
}

}  // namespace carflow
