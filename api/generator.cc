// The C face of the generator builder (carflow/generator.h): each cf_dag_*
// call is graph/gen_builder.h's GenBuilder, which the built-in generators
// use too; and run-time registration.
#include "carflow/generator.h"

#include <mutex>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "graph/gen_builder.h"
#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/transforms.h"

using carflow::BufferRef;
using carflow::BufferSpace;
using carflow::CarId;
using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow::GenBuilder;
using carflow::LocalDag;

struct cf_dag {
  cf_dag(const std::string& name, const CollectiveSpec& spec, uint32_t image) : b(name, spec, image) {}
  GenBuilder b;
};

namespace {

std::mutex g_register_mutex;  // serializes run-time registrations (graph/registry.h)

static_assert(sizeof(cf_car_t) == sizeof(CarId) && CF_CAR_NONE == carflow::kNoCar);
static_assert(CF_DEP_BUFFER(0) == carflow::kBufferDepBit);

// `buf` as a BufferRef; a space outside CF_SPACE_* refuses the DAG (the
// builder checks the range).
BufferRef ref(cf_dag_t* dag, const char* call, const char* arg, cf_buf_t buf) {
  BufferSpace space;
  switch (buf.space) {
    case CF_SPACE_SRC: space = BufferSpace::UserSrc; break;
    case CF_SPACE_DST: space = BufferSpace::UserDst; break;
    case CF_SPACE_TEMP: space = BufferSpace::Temp; break;
    default:
      dag->b.refuse(call, std::string(arg) + ": space " + std::to_string(buf.space) +
                              " is not CF_SPACE_SRC, CF_SPACE_DST or CF_SPACE_TEMP");
      return BufferRef{};
  }
  return BufferRef{space, buf.slot, buf.offset, buf.length};
}

// An optional operand: space 0 is "none".
BufferRef optional_ref(cf_dag_t* dag, const char* call, const char* arg, cf_buf_t buf) {
  return buf.space == 0 && buf.offset == 0 && buf.length == 0 ? BufferRef{} : ref(dag, call, arg, buf);
}

bool usable(const cf_dag_t* dag) { return dag != nullptr && !dag->b.failed(); }

// The C spec a generator sees, pointing into `spec`.
cf_gen_spec_t c_spec(const CollectiveSpec& spec, uint32_t image) {
  cf_gen_spec_t s{};
  s.kind = static_cast<int>(spec.kind);
  s.algorithm = spec.algorithm.c_str();
  s.images = spec.images;
  s.image = image;
  s.root = spec.root;
  s.nbytes = spec.nbytes;
  s.elem_size = spec.elem_size;
  s.segment_bytes = spec.segment_bytes;
  s.flags = spec.flags & carflow::kExclusiveFlag ? CF_COLL_EXCLUSIVE : 0;
  s.counts = spec.counts.empty() ? nullptr : spec.counts.data();
  s.ncounts = spec.counts.size();
  s.displs = spec.displs.empty() ? nullptr : spec.displs.data();
  s.ndispls = spec.displs.size();
  s.perm = spec.perm.empty() ? nullptr : spec.perm.data();
  s.images_per_node = spec.images_per_node;
  s.radix = spec.radix;
  return s;
}

bool name_ok(const char* name, std::string* error) {
  if (name == nullptr) return *error = "name: NULL", false;
  const std::string n(name);
  if (n.empty() || n.size() > 64) return *error = "name: must be 1 to 64 bytes", false;
  if (!carflow::GeneratorRegistry::well_formed_name(n)) {
    return *error = "name: '" + n + "' has a character outside [A-Za-z0-9_.-]", false;
  }
  return true;
}

}  // namespace

extern "C" {

cf_car_t cf_dag_send(cf_dag_t* dag, uint32_t peer, cf_buf_t src, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const BufferRef s = ref(dag, "cf_dag_send", "src", src);
  return usable(dag) ? dag->b.send(peer, s, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_recv(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const BufferRef d = ref(dag, "cf_dag_recv", "dst", dst);
  return usable(dag) ? dag->b.recv(peer, d, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_recv_reduce(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_recv_reduce";
  const BufferRef d = ref(dag, call, "dst", dst);
  return usable(dag) ? dag->b.recv_reduce(call, peer, d, BufferRef{}, false, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_recv_reduce_left(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps,
                                 size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_recv_reduce_left";
  const BufferRef d = ref(dag, call, "dst", dst);
  return usable(dag) ? dag->b.recv_reduce(call, peer, d, BufferRef{}, true, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_recv_reduce_into(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, cf_buf_t local, int incoming_left,
                                 const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_recv_reduce_into";
  const BufferRef d = ref(dag, call, "dst", dst);
  const BufferRef l = ref(dag, call, "local", local);
  return usable(dag) ? dag->b.recv_reduce(call, peer, d, l, incoming_left != 0, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_reduce(cf_dag_t* dag, cf_buf_t dst, cf_buf_t left, cf_buf_t right, const cf_car_t* deps,
                       size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_reduce";
  const BufferRef d = ref(dag, call, "dst", dst), l = ref(dag, call, "left", left),
                  r = ref(dag, call, "right", right);
  return usable(dag) ? dag->b.reduce(d, l, r, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_fold(cf_dag_t* dag, cf_buf_t dst, cf_buf_t src, cf_buf_t carry, uint64_t first_elems,
                     uint64_t chunk_elems, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_fold";
  const BufferRef d = ref(dag, call, "dst", dst), s = ref(dag, call, "src", src),
                  c = optional_ref(dag, call, "carry", carry);
  return usable(dag) ? dag->b.fold(d, s, c, first_elems, chunk_elems, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_prefix(cf_dag_t* dag, cf_buf_t dst, cf_buf_t src, cf_buf_t carry, uint64_t first_elems,
                       uint64_t chunk_elems, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const char* call = "cf_dag_prefix";
  const BufferRef d = ref(dag, call, "dst", dst), s = ref(dag, call, "src", src),
                  c = optional_ref(dag, call, "carry", carry);
  return usable(dag) ? dag->b.prefix(d, s, c, first_elems, chunk_elems, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_copy(cf_dag_t* dag, cf_buf_t dst, cf_buf_t src, const cf_car_t* deps, size_t ndeps) {
  if (!usable(dag)) return CF_CAR_NONE;
  const BufferRef d = ref(dag, "cf_dag_copy", "dst", dst), s = ref(dag, "cf_dag_copy", "src", src);
  return usable(dag) ? dag->b.copy(d, s, deps, ndeps) : CF_CAR_NONE;
}

cf_car_t cf_dag_join(cf_dag_t* dag, const cf_car_t* deps, size_t ndeps) {
  return usable(dag) ? dag->b.join(deps, ndeps) : CF_CAR_NONE;
}

uint32_t cf_dag_temp(cf_dag_t* dag, uint64_t bytes) { return dag == nullptr ? UINT32_MAX : dag->b.temp(bytes); }

uint64_t cf_dag_src_bytes(const cf_dag_t* dag) { return dag == nullptr ? 0 : dag->b.src_bytes(); }
uint64_t cf_dag_dst_bytes(const cf_dag_t* dag) { return dag == nullptr ? 0 : dag->b.dst_bytes(); }

int cf_generator_register(int kind, const char* name, cf_generator_fn fn, void* arg, int gen_flags,
                          const char* summary) {
  using carflow::api::fail;
  using carflow::api::succeed;
  std::string error;
  if (kind < 0 || kind >= carflow::kCollKinds) {
    return fail(CF_ERR_BAD_ARG, "kind: expected a CF_KIND_* value (0 to CF_KIND_PREFIX_REDUCE)");
  }
  if (!name_ok(name, &error)) return fail(CF_ERR_BAD_ARG, error);
  if (fn == nullptr) return fail(CF_ERR_BAD_ARG, "fn: NULL");
  constexpr int kSymmetric = CF_GEN_SHIFT_SYMMETRIC | CF_GEN_XOR_SYMMETRIC;
  if ((gen_flags & ~(CF_GEN_PRESERVES_ORDER | CF_GEN_SEGMENTED | kSymmetric)) != 0) {
    return fail(CF_ERR_BAD_ARG,
                "gen_flags: only CF_GEN_PRESERVES_ORDER, CF_GEN_SEGMENTED, CF_GEN_SHIFT_SYMMETRIC and "
                "CF_GEN_XOR_SYMMETRIC are defined");
  }
  if ((gen_flags & kSymmetric) == kSymmetric) {
    return fail(CF_ERR_BAD_ARG, "gen_flags: CF_GEN_SHIFT_SYMMETRIC and CF_GEN_XOR_SYMMETRIC exclude each other");
  }
  carflow::GeneratorInfo info;
  info.kind = static_cast<CollKind>(kind);
  info.name = name;
  info.fn = nullptr;
  info.preserves_order = (gen_flags & CF_GEN_PRESERVES_ORDER) != 0;
  info.segmented = (gen_flags & CF_GEN_SEGMENTED) != 0;
  if ((gen_flags & CF_GEN_SHIFT_SYMMETRIC) != 0) info.symmetry = carflow::shift_symmetric;
  if ((gen_flags & CF_GEN_XOR_SYMMETRIC) != 0) info.symmetry = carflow::xor_symmetric;
  info.summary = summary != nullptr ? summary : "(registered at run time)";
  info.params = carflow::kUsesRadix | carflow::kUsesNodes;
  info.plugin = true;
  const std::string registered(name);
  info.closure = [fn, arg, registered](const CollectiveSpec& spec, uint32_t image) {
    cf_dag dag(registered, spec, image);
    const cf_gen_spec_t c = c_spec(spec, image);
    const int rc = fn(&c, &dag, arg);
    LocalDag out = dag.b.finish();
    if (out.error.empty() && rc != CF_OK) {
      out.error = "generator '" + registered + "', image " + std::to_string(image) + ": returned " +
                  cf_strerror(rc) + " (it does not build this call)";
    }
    return out;
  };
  std::lock_guard<std::mutex> lock(g_register_mutex);
  if (!carflow::GeneratorRegistry::instance().add_checked(std::move(info), &error)) {
    return fail(CF_ERR_BAD_ARG, error);
  }
  return succeed();
}

}  // extern "C"
