// The C API's extensions beyond the GASNet collectives notes: choosing an
// algorithm, asking which one runs, statistics.
#include "carflow/carflow.h"

#include <string>

#include "api/api_internal.h"
#include "engine/runtime.h"
#include "transports/ofi/ofi_transport.h"

using carflow::CollectiveCall;
using carflow::CollKind;
using carflow::Engine;
using carflow::ImageContext;
using carflow::Runtime;

using namespace carflow::api;

namespace {

// CF_KIND_* follow CollKind's order (graph/car.h).
CollKind kind_of(int kind) { return static_cast<CollKind>(kind); }
bool valid_kind(int kind) { return kind >= 0 && kind < carflow::kCollKinds; }
constexpr const char* kKindRule = "kind: expected a CF_KIND_* value (0 to CF_KIND_PREFIX_REDUCE)";
}  // namespace

extern "C" {

int cf_coll_set_algorithm(int kind, const char* name) {
  ImageContext* img = current_image("cf_coll_set_algorithm");
  if (img == nullptr) return t_status;
  if (!valid_kind(kind)) return fail(CF_ERR_BAD_ARG, kKindRule);
  const std::string algo = name == nullptr ? "" : name;
  const auto& reg = carflow::GeneratorRegistry::instance();
  const carflow::GeneratorInfo* gen = algo.empty() ? nullptr : reg.find(kind_of(kind), algo);
  if (!algo.empty() && gen == nullptr) {
    return fail(CF_ERR_BAD_ARG, "name: unknown " + std::string(carflow::coll_kind_name(kind_of(kind))) +
                                    " algorithm '" + algo + "' (valid: " + reg.names(kind_of(kind)) + ")");
  }
  img->algorithm[kind] = gen;
  ++img->epoch;  // memos chose under the old override
  return succeed();
}

const char* cf_coll_algorithm(int kind, size_t nbytes, size_t elem_size) {
  ImageContext* img = current_image("cf_coll_algorithm");
  if (img == nullptr) return nullptr;
  if (!valid_kind(kind)) {
    fail(CF_ERR_BAD_ARG, kKindRule);
    return nullptr;
  }
  CollectiveCall call;
  call.kind = kind_of(kind);
  call.nbytes = nbytes;
  call.elem_size = static_cast<uint32_t>(elem_size == 0 ? 1 : elem_size);
  call.algorithm = img->algorithm[kind];
  const carflow::GeneratorInfo* gen = nullptr;
  std::string error;
  if (!img->engine->choose_algorithm(call, &gen, &error)) {
    fail(CF_ERR_BAD_ARG, error);
    return nullptr;
  }
  succeed();
  return gen->name.c_str();
}

int cf_get_stats(cf_stats_t* out) {
  if (out == nullptr) return fail(CF_ERR_BAD_ARG, "out: NULL");
  Runtime& rt = Runtime::get();
  if (!rt.initialized() || rt.engine() == nullptr) {
    return fail(CF_ERR_NOT_INIT, "cf_get_stats: no images are running");
  }
  Engine& engine = *rt.engine();
  const carflow::TransportStats s = engine.transport().stats();
  *out = cf_stats_t{s.messages, s.bytes, s.eager, s.direct, s.single_copy, s.unexpected, 0,
                    s.fastbox};
  for (uint32_t i = 0; i < engine.local_images(); ++i) {
    out->schedules_built += engine.image(i).generator_runs.load(std::memory_order_relaxed);
  }
  return succeed();
}

int cf_get_cache_stats(cf_cache_stats_t* out) {
  if (out == nullptr) return fail(CF_ERR_BAD_ARG, "out: NULL");
  Runtime& rt = Runtime::get();
  if (!rt.initialized() || rt.engine() == nullptr) {
    return fail(CF_ERR_NOT_INIT, "cf_get_cache_stats: no images are running");
  }
  Engine& engine = *rt.engine();
  *out = cf_cache_stats_t{};
  for (uint32_t i = 0; i < engine.local_images(); ++i) {
    out->built += engine.image(i).generator_runs.load(std::memory_order_relaxed);
    out->evicted += engine.image(i).schedules_evicted.load(std::memory_order_relaxed);
    out->bytes += engine.image(i).cache_bytes.load(std::memory_order_relaxed);
  }
  return succeed();
}

int cf_get_net_stats(cf_net_stats_t* out) {
  if (out == nullptr) return fail(CF_ERR_BAD_ARG, "out: NULL");
  Runtime& rt = Runtime::get();
  if (!rt.initialized()) return fail(CF_ERR_NOT_INIT, "cf_get_net_stats: cf_init has not been called");
  *out = cf_net_stats_t{};
  out->provider = "";
  if (carflow::OfiTransport* ofi = rt.ofi(); ofi != nullptr) {
    const carflow::TransportStats t = ofi->stats();
    const carflow::OfiStats o = ofi->ofi_stats();
    out->provider = ofi->provider().c_str();
    out->eager_bytes = ofi->eager_bytes();
    out->inject_bytes = ofi->inject_bytes();
    out->messages = t.messages;
    out->bytes = t.bytes;
    out->injected = o.injected;
    out->eager = o.eager;
    out->rendezvous = o.rendezvous + o.streamed;
    out->direct_reads = o.direct_reads;
    out->unexpected = o.unexpected;
    out->credit_waits = o.credit_waits;
    out->credit_msgs = o.credit_msgs;
    out->mr_hits = o.mr_hits;
    out->mr_misses = o.mr_misses;
    out->host_ring = o.host_ring;
    out->ring_spills = o.ring_spills;
    out->pumped_bytes = o.pumped_bytes;
    out->split_copies = o.split_copies;
    out->split_written_bytes = o.split_written;
  }
  return succeed();
}

}  // extern "C"
