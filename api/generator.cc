// The public generator builder (carflow/generator.h) over graph/'s
// DagBuilder, and run-time registration. The builder checks every argument
// against the spec as it goes, so a wrong generator is refused with the
// builder call that went wrong, before any message is sent.
#include "carflow/generator.h"

#include <mutex>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "graph/builder.h"
#include "graph/layout.h"
#include "graph/registry.h"
#include "graph/transforms.h"

using carflow::BufferRef;
using carflow::CarId;
using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow::DagBuilder;
using carflow::Dep;
using carflow::LocalDag;

struct cf_dag {
  cf_dag(const std::string& name, const CollectiveSpec& spec, uint32_t image)
      : builder(image, carflow::src_extent(spec, image), carflow::dst_extent(spec, image)),
        generator(name),
        image(image),
        images(spec.images),
        reduces(carflow::is_computational(spec.kind)),
        src_bytes(carflow::src_extent(spec, image)),
        dst_bytes(carflow::dst_extent(spec, image)),
        sends_to(spec.images, 0),
        receives_from(spec.images, 0) {}

  DagBuilder builder;
  const std::string& generator;
  uint32_t image, images;
  bool reduces;
  uint64_t src_bytes, dst_bytes;
  std::vector<uint64_t> temps;
  // Per peer: messages so far, so the k-th send to j gets the tag the k-th
  // receive at j from this image gets (tag k + 1; tags from
  // kTransformTagBase up belong to the sync transforms).
  std::vector<uint32_t> sends_to, receives_from;
  uint32_t cars = 0;
  std::string error;  // the first bad call; the DAG is refused with it

  cf_car_t refuse(const char* call, const std::string& what) {
    if (error.empty()) {
      error = "generator '" + generator + "', image " + std::to_string(image) + ": " + call + ": " + what;
    }
    return CF_CAR_NONE;
  }
};

namespace {

std::mutex g_register_mutex;  // serializes run-time registrations (graph/registry.h)

const char* space_name(int space) {
  return space == CF_SPACE_SRC ? "CF_SPACE_SRC" : space == CF_SPACE_DST ? "CF_SPACE_DST" : "CF_SPACE_TEMP";
}

// `buf` as a BufferRef, or false after dag->refuse naming `arg`.
bool to_ref(cf_dag_t* dag, const char* call, const char* arg, cf_buf_t buf, BufferRef* out) {
  uint64_t size = 0;
  carflow::BufferSpace space;
  if (buf.space == CF_SPACE_SRC) {
    space = carflow::BufferSpace::UserSrc;
    size = dag->src_bytes;
  } else if (buf.space == CF_SPACE_DST) {
    space = carflow::BufferSpace::UserDst;
    size = dag->dst_bytes;
  } else if (buf.space == CF_SPACE_TEMP) {
    space = carflow::BufferSpace::Temp;
    if (buf.slot >= dag->temps.size()) {
      dag->refuse(call, std::string(arg) + ": temp slot " + std::to_string(buf.slot) + " was not made (" +
                            std::to_string(dag->temps.size()) + " slots)");
      return false;
    }
    size = dag->temps[buf.slot];
  } else {
    dag->refuse(call, std::string(arg) + ": space " + std::to_string(buf.space) +
                          " is not CF_SPACE_SRC, CF_SPACE_DST or CF_SPACE_TEMP");
    return false;
  }
  if (buf.offset > size || buf.length > size - buf.offset) {
    dag->refuse(call, std::string(arg) + ": bytes [" + std::to_string(buf.offset) + ", " +
                          std::to_string(buf.offset + buf.length) + ") of " + space_name(buf.space) + " (" +
                          std::to_string(size) + " bytes on this image)");
    return false;
  }
  *out = BufferRef{space, buf.space == CF_SPACE_TEMP ? buf.slot : 0, buf.offset, buf.length};
  return true;
}

// The deps as progress dependencies, or false after dag->refuse.
bool to_deps(cf_dag_t* dag, const char* call, const cf_car_t* deps, size_t ndeps, DagBuilder::Deps* out) {
  if (ndeps > 0 && deps == nullptr) {
    dag->refuse(call, "deps: NULL with ndeps " + std::to_string(ndeps));
    return false;
  }
  for (size_t i = 0; i < ndeps; ++i) {
    if (deps[i] >= dag->cars) {
      dag->refuse(call, "deps[" + std::to_string(i) + "]: " +
                            (deps[i] == CF_CAR_NONE ? std::string("CF_CAR_NONE")
                                                    : "CAR " + std::to_string(deps[i])) +
                            " is not a CAR added before (" + std::to_string(dag->cars) + " so far)");
      return false;
    }
    out->push_back(carflow::after(deps[i]));
  }
  return true;
}

bool peer_ok(cf_dag_t* dag, const char* call, uint32_t peer) {
  if (peer >= dag->images || peer == dag->image) {
    dag->refuse(call, "peer: " + std::to_string(peer) +
                          (peer == dag->image ? " is the image itself" : " is not a team rank (P = " +
                                                                              std::to_string(dag->images) + ")"));
    return false;
  }
  return true;
}

cf_car_t added(cf_dag_t* dag, CarId id) {
  ++dag->cars;
  return static_cast<cf_car_t>(id);
}

// A receive, plain or reducing; the tag is the next one from `peer`.
cf_car_t receive(cf_dag_t* dag, const char* call, uint32_t peer, cf_buf_t dst, const cf_car_t* deps, size_t ndeps,
                 int reduce_side) {
  if (dag == nullptr || !dag->error.empty()) return CF_CAR_NONE;
  BufferRef d;
  DagBuilder::Deps dd;
  if (!peer_ok(dag, call, peer) || !to_ref(dag, call, "dst", dst, &d) || !to_deps(dag, call, deps, ndeps, &dd)) {
    return CF_CAR_NONE;
  }
  if (reduce_side != 0 && !dag->reduces) return dag->refuse(call, "the collective's kind does not reduce");
  if (dag->receives_from[peer] + 1 >= carflow::kTransformTagBase) return dag->refuse(call, "too many messages");
  const uint32_t tag = ++dag->receives_from[peer];
  if (reduce_side == 0) return added(dag, dag->builder.recv(peer, tag, d, std::move(dd)));
  return added(dag, dag->builder.recv_reduce(peer, tag, d, reduce_side < 0, std::move(dd)));
}

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
  for (char c : n) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return *error = "name: '" + n + "' has a character outside [A-Za-z0-9_.-]", false;
  }
  return true;
}

}  // namespace

extern "C" {

cf_car_t cf_dag_send(cf_dag_t* dag, uint32_t peer, cf_buf_t src, const cf_car_t* deps, size_t ndeps) {
  if (dag == nullptr || !dag->error.empty()) return CF_CAR_NONE;
  const char* call = "cf_dag_send";
  BufferRef s;
  DagBuilder::Deps dd;
  if (!peer_ok(dag, call, peer) || !to_ref(dag, call, "src", src, &s) || !to_deps(dag, call, deps, ndeps, &dd)) {
    return CF_CAR_NONE;
  }
  if (dag->sends_to[peer] + 1 >= carflow::kTransformTagBase) return dag->refuse(call, "too many messages");
  const uint32_t tag = ++dag->sends_to[peer];
  return added(dag, dag->builder.send(peer, tag, s, std::move(dd)));
}

cf_car_t cf_dag_recv(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps, size_t ndeps) {
  return receive(dag, "cf_dag_recv", peer, dst, deps, ndeps, 0);
}

cf_car_t cf_dag_recv_reduce(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps, size_t ndeps) {
  return receive(dag, "cf_dag_recv_reduce", peer, dst, deps, ndeps, 1);
}

cf_car_t cf_dag_recv_reduce_left(cf_dag_t* dag, uint32_t peer, cf_buf_t dst, const cf_car_t* deps,
                                 size_t ndeps) {
  return receive(dag, "cf_dag_recv_reduce_left", peer, dst, deps, ndeps, -1);
}

cf_car_t cf_dag_reduce(cf_dag_t* dag, cf_buf_t dst, cf_buf_t left, cf_buf_t right, const cf_car_t* deps,
                       size_t ndeps) {
  if (dag == nullptr || !dag->error.empty()) return CF_CAR_NONE;
  const char* call = "cf_dag_reduce";
  BufferRef d, l, r;
  DagBuilder::Deps dd;
  if (!to_ref(dag, call, "dst", dst, &d) || !to_ref(dag, call, "left", left, &l) ||
      !to_ref(dag, call, "right", right, &r) || !to_deps(dag, call, deps, ndeps, &dd)) {
    return CF_CAR_NONE;
  }
  if (!dag->reduces) return dag->refuse(call, "the collective's kind does not reduce");
  if (dst.length != left.length || dst.length != right.length) {
    return dag->refuse(call, "dst, left, right: lengths differ");
  }
  return added(dag, dag->builder.reduce(d, l, r, std::move(dd)));
}

cf_car_t cf_dag_copy(cf_dag_t* dag, cf_buf_t dst, cf_buf_t src, const cf_car_t* deps, size_t ndeps) {
  if (dag == nullptr || !dag->error.empty()) return CF_CAR_NONE;
  const char* call = "cf_dag_copy";
  BufferRef d, s;
  DagBuilder::Deps dd;
  if (!to_ref(dag, call, "dst", dst, &d) || !to_ref(dag, call, "src", src, &s) ||
      !to_deps(dag, call, deps, ndeps, &dd)) {
    return CF_CAR_NONE;
  }
  if (dst.length != src.length) return dag->refuse(call, "dst, src: lengths differ");
  return added(dag, dag->builder.copy(d, s, std::move(dd)));
}

cf_car_t cf_dag_join(cf_dag_t* dag, const cf_car_t* deps, size_t ndeps) {
  if (dag == nullptr || !dag->error.empty()) return CF_CAR_NONE;
  DagBuilder::Deps dd;
  if (!to_deps(dag, "cf_dag_join", deps, ndeps, &dd)) return CF_CAR_NONE;
  return added(dag, dag->builder.join(std::move(dd)));
}

uint32_t cf_dag_temp(cf_dag_t* dag, uint64_t bytes) {
  if (dag == nullptr || !dag->error.empty()) return UINT32_MAX;
  if (bytes >= (uint64_t{1} << 48)) {
    dag->refuse("cf_dag_temp", "bytes: " + std::to_string(bytes) + " (2^48 or more)");
    return UINT32_MAX;
  }
  dag->temps.push_back(bytes);
  return dag->builder.temp_slot(bytes);
}

uint64_t cf_dag_src_bytes(const cf_dag_t* dag) { return dag == nullptr ? 0 : dag->src_bytes; }
uint64_t cf_dag_dst_bytes(const cf_dag_t* dag) { return dag == nullptr ? 0 : dag->dst_bytes; }

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
  if ((gen_flags & ~(CF_GEN_PRESERVES_ORDER | CF_GEN_SEGMENTED)) != 0) {
    return fail(CF_ERR_BAD_ARG, "gen_flags: only CF_GEN_PRESERVES_ORDER and CF_GEN_SEGMENTED are defined");
  }
  carflow::GeneratorInfo info;
  info.kind = static_cast<CollKind>(kind);
  info.name = name;
  info.fn = nullptr;
  info.preserves_order = (gen_flags & CF_GEN_PRESERVES_ORDER) != 0;
  info.segmented = (gen_flags & CF_GEN_SEGMENTED) != 0;
  info.summary = summary != nullptr ? summary : "(registered at run time)";
  info.params = carflow::kUsesRadix | carflow::kUsesNodes;
  info.plugin = true;
  const std::string registered(name);
  info.closure = [fn, arg, registered](const CollectiveSpec& spec, uint32_t image) {
    cf_dag dag(registered, spec, image);
    const cf_gen_spec_t c = c_spec(spec, image);
    const int rc = fn(&c, &dag, arg);
    LocalDag out = dag.builder.finish();
    if (!dag.error.empty()) {
      out.error = dag.error;
    } else if (rc != CF_OK) {
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
