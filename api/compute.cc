// The C API's computational collectives: allreduce, reduce_vec, scan,
// reduce_scatter(v) (MPI style, element-wise vectors) and the GASNet notes' reduce
// and prefix_reduce over block-cyclic arrays, with their m forms. One
// checked path (start_computation): every check runs before anything
// starts, so a rejected call changes nothing.
#include <algorithm>
#include <cstdint>
#include <string>

#include "api/api_internal.h"
#include "graph/layout.h"

using carflow::CallMemo;
using carflow::CollectiveCall;
using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow::ImageContext;
using namespace carflow::api;

namespace {

constexpr uint64_t kMaxBytes = uint64_t{1} << 48;

struct Computation {
  const char* function;
  CollKind kind;
  cf_team_t team;
  int flags;
  bool blocking = false;
  bool multi_address = false;
  // m forms: the lists (indexed by team rank, or by local index for LOCAL in
  // the representative mode) that dst / src come from.
  void* const* dst_list = nullptr;
  void* const* src_list = nullptr;
  bool dst_from_list = false, src_from_list = false;
  bool rooted = false;
  cf_image_t root = 0;
  void* dst = nullptr;
  const void* src = nullptr;
  size_t elem_size = 0;
  size_t elem_count = 0;           // per image; per block for reduce_scatter
  const size_t* counts = nullptr;  // reduce_scatterv: elements of each image's block
  bool variable = false;
  uint64_t src_blksz = 0, src_offset = 0, dst_blksz = 0, dst_offset = 0;
  int func = 0, func_arg = 0;
};

std::string str(uint64_t v) { return std::to_string(v); }

// GASNet collectives notes v1.7, "Data lifetime and alignment": data must be aligned for its
// element size, up to CF_DATA_ALIGNMENT.
bool check_alignment(const char* name, const void* p, size_t elem_size, uint64_t limit,
                     std::string* error) {
  const uint64_t want = std::min<uint64_t>(elem_size & (~elem_size + 1), limit);
  if (reinterpret_cast<uintptr_t>(p) % want == 0) return true;
  *error = std::string(name) + ": address not aligned to " + str(want) + " bytes (elem_size " +
           str(elem_size) + ", CF_DATA_ALIGNMENT " + str(limit) + ")";
  return false;
}

// In place means one buffer for source and destination (same address):
// allowed where MPI has MPI_IN_PLACE; any other overlap is refused.
bool in_place_allowed(CollKind kind) {
  return kind == CollKind::Allreduce || kind == CollKind::ReduceVec || kind == CollKind::Scan ||
         kind == CollKind::ReduceScatter;
}

// Checks one image's part of the call (its rank in `team`, its addresses in
// c.dst / c.src) and builds it; false after fail().
bool build_computation(const Computation& c, ImageContext& img, carflow::Team* team, CollectiveCall* call,
                       uint64_t* src_len_out = nullptr, uint64_t* dst_len_out = nullptr) {
  std::string error;
  const uint32_t P = team->size();
  const uint32_t me = team->rank;
  if (c.rooted && c.root >= P) {
    return fail(CF_ERR_BAD_ARG, "dstimage: " + str(c.root) + " is not a rank of the team (size " +
                                    str(P) + ")"),
           false;
  }
  if (c.elem_size == 0 || c.elem_size > UINT32_MAX) {  // CollectiveSpec::elem_size is 32 bits
    return fail(CF_ERR_BAD_ARG, "elem_size: must be at least 1 and below 2^32"), false;
  }
  CollectiveSpec spec;
  spec.kind = c.kind;
  spec.images = P;
  spec.root = c.rooted ? c.root : 0;
  spec.elem_size = static_cast<uint32_t>(c.elem_size);
  spec.flags = (c.flags & CF_COLL_EXCLUSIVE) != 0 ? carflow::kExclusiveFlag : 0;
  if (c.variable) {
    if (c.counts == nullptr) return fail(CF_ERR_BAD_ARG, "counts: NULL"), false;
    uint64_t total = 0;
    for (uint32_t i = 0; i < P; ++i) {
      if (c.counts[i] >= kMaxBytes / c.elem_size || (total += c.counts[i]) >= kMaxBytes / c.elem_size) {
        return fail(CF_ERR_BAD_ARG, "counts[" + str(i) + "]: the blocks add up to 2^48 bytes or more"),
               false;
      }
      spec.counts.push_back(c.counts[i] * c.elem_size);
    }
  } else {
    if (c.elem_count == 0) return fail(CF_ERR_BAD_ARG, "elem_count: must be > 0"), false;
    const uint64_t blocks = c.kind == CollKind::ReduceScatter ? P : 1;
    if (c.elem_count >= kMaxBytes / c.elem_size / blocks) {
      return fail(CF_ERR_BAD_ARG, "elem_size * elem_count: too large (limit 2^48 bytes)"),
             false;
    }
    spec.nbytes = uint64_t{c.elem_count} * c.elem_size;
  }
  spec.src_blksz = c.src_blksz;
  spec.src_offset = c.src_offset;
  spec.dst_blksz = c.dst_blksz;
  spec.dst_offset = c.dst_offset;
  if (!carflow::check_layout(spec, &error)) return fail(CF_ERR_BAD_ARG, error), false;

  if (!carflow::resolve_reduce_op(c.func, c.func_arg, c.elem_size, img.fn_table, &call->op, &error)) {
    return fail(CF_ERR_BAD_ARG, error), false;
  }
  const uint64_t src_len = carflow::src_extent(spec, me);
  const uint64_t dst_len = carflow::dst_extent(spec, me);
  if (src_len > 0 && c.src == nullptr) {
    return fail(CF_ERR_BAD_ARG,
                null_buffer(c.src_from_list ? "srclist" : "src", c.src_from_list, img, *team, "contributes", src_len)),
           false;
  }
  if (dst_len > 0 && c.dst == nullptr) {
    return fail(CF_ERR_BAD_ARG, null_buffer(c.dst_from_list ? "dstlist" : "dst", c.dst_from_list, img, *team, "receives", dst_len)),
           false;
  }
  const bool in_place = src_len > 0 && dst_len > 0 && c.src == c.dst;
  if (in_place && !in_place_allowed(c.kind)) {
    return fail(CF_ERR_BAD_ARG, std::string("src, dst: the same buffer (") + carflow::coll_kind_name(c.kind) +
                                    " has no in-place form; the GASNet notes leave overlap undefined)"),
           false;
  }
  if (!in_place && ranges_overlap(c.src, src_len, c.dst, dst_len)) {
    return fail(CF_ERR_BAD_ARG, "src, dst: the buffers overlap (in place means src == dst exactly)"),
           false;
  }
  const uint64_t align = img.engine->config().data_alignment;
  if ((src_len > 0 && !check_alignment(c.src_from_list ? "srclist" : "src", c.src, c.elem_size, align, &error)) ||
      (dst_len > 0 && !check_alignment(c.dst_from_list ? "dstlist" : "dst", c.dst, c.elem_size, align, &error))) {
    return fail(CF_ERR_BAD_ARG, error), false;
  }
  if (src_len_out != nullptr) *src_len_out = src_len;
  if (dst_len_out != nullptr) *dst_len_out = dst_len;
  call->kind = c.kind;
  call->root = spec.root;
  call->src = src_len > 0 ? const_cast<void*>(c.src) : unused_buffer();
  call->dst = dst_len > 0 ? c.dst : unused_buffer();
  call->nbytes = spec.nbytes;
  call->elem_size = spec.elem_size;
  call->counts = std::move(spec.counts);
  call->in_place = in_place;
  call->src_blksz = c.src_blksz;
  call->src_offset = c.src_offset;
  call->dst_blksz = c.dst_blksz;
  call->dst_offset = c.dst_offset;
  call->algorithm = img.algorithm[static_cast<int>(c.kind)];
  call->team = team;
  set_sync_modes(call, c.flags);
  return true;
}


// A single-address call with scalar arguments only: the ones the memo keeps.
bool memoizable(const Computation& c) { return !c.multi_address && !c.variable; }

// In place (src == dst) is part of the signature: it changes the schedule.
// blocks: src_blksz, src_offset, dst_blksz, dst_offset (0 for the vector forms).
inline void computation_signature(CollKind kind, bool blocking, cf_team_t team, int flags, uint32_t root,
                                  const void* src, const void* dst, size_t elem_size, size_t elem_count,
                                  const uint64_t (&blocks)[4], int func, int func_arg, Signature& sig) {
  sig[0] = static_cast<uint64_t>(kind) | uint64_t{blocking} << 8 | uint64_t{src == dst} << 9;
  sig[1] = reinterpret_cast<uint64_t>(team);
  sig[2] = static_cast<uint32_t>(flags) | uint64_t{root} << 32;
  sig[3] = elem_size;
  sig[4] = elem_count;
  for (int k = 0; k < 4; ++k) sig[5 + k] = blocks[k];
  sig[9] = static_cast<uint32_t>(func) | uint64_t{static_cast<uint32_t>(func_arg)} << 32;
  for (int w = 10; w < CallMemo::kWords; ++w) sig[w] = 0;
}

void signature_of(const Computation& c, Signature& sig) {
  const uint64_t blocks[4] = {c.src_blksz, c.src_offset, c.dst_blksz, c.dst_offset};
  computation_signature(c.kind, c.blocking, c.team, c.flags, c.rooted ? c.root : 0, c.src, c.dst, c.elem_size,
                        c.elem_count, blocks, c.func, c.func_arg, sig);
}

// The address checks of build_computation on a memo hit: true when they
// all pass (anything else takes the checked path, which reports it).
inline bool addresses_ok(const void* src, const void* dst, size_t elem_size, const CallMemo& memo,
                         uint64_t align) {
  if (!memo.buffers_present(src, dst)) return false;
  if (!memo.call.in_place && !memo.buffers_disjoint(src, dst)) return false;
  const uint64_t want = std::min<uint64_t>(elem_size & (~elem_size + 1), align);
  return (memo.src_len == 0 || reinterpret_cast<uintptr_t>(src) % want == 0) &&
         (memo.dst_len == 0 || reinterpret_cast<uintptr_t>(dst) % want == 0);
}

// The entry points' memo path (start_repeated) for a vector call
// (allreduce, reduce_vec, scan, reduce_scatter); root is 0 for a call
// without one, as in Computation.
[[gnu::always_inline]] inline bool repeated_vector(CollKind kind, cf_team_t team, int flags, cf_image_t root,
                                                   void* dst, const void* src, size_t elem_size,
                                                   size_t elem_count, int func, int func_arg,
                                                   cf_coll_handle_t* out) {
  Signature sig;
  const uint64_t no_blocks[4] = {0, 0, 0, 0};
  computation_signature(kind, false, team, flags, root, src, dst, elem_size, elem_count, no_blocks, func,
                        func_arg, sig);
  return start_repeated<CallMemo::kWords>(kind, sig, const_cast<void*>(src), dst, out,
                                          [&](ImageContext& img, const CallMemo& memo) {
                                            return addresses_ok(src, dst, elem_size, memo,
                                                                img.engine->config().data_alignment);
                                          });
}

cf_coll_handle_t start_computation(const Computation& c) {
  ImageContext* img = current_image(c.function);
  if (img == nullptr) return CF_COLL_INVALID_HANDLE;
  // An m form's lists themselves (not their entries), as the movement m
  // forms check them.
  if (c.src_from_list && c.src_list == nullptr) return list_missing(c.function, "srclist");
  if (c.dst_from_list && c.dst_list == nullptr) return list_missing(c.function, "dstlist");
  Signature sig;
  const bool memo_path = memoizable(c);
  if (memo_path) {
    signature_of(c, sig);
    CallMemo* memo = memo_hit(*img, c.kind, sig);
    const uint64_t align = img->engine->config().data_alignment;
    if (memo != nullptr && addresses_ok(c.src, c.dst, c.elem_size, *memo, align)) {
      return start_memo(*img, *memo, const_cast<void*>(c.src), c.dst);
    }
  }
  std::string error;
  // CF_COLL_EXCLUSIVE is scan's own flag; the common check knows the rest.
  const bool exclusive = (c.flags & CF_COLL_EXCLUSIVE) != 0;
  if (exclusive && c.kind != CollKind::Scan) {
    return fail(CF_ERR_BAD_ARG, "flags: CF_COLL_EXCLUSIVE applies to cf_coll_scan only"),
           CF_COLL_INVALID_HANDLE;
  }
  carflow::Team* team = nullptr;
  if (!check_common(*img, c.team, c.flags & ~CF_COLL_EXCLUSIVE, c.blocking, &error, c.multi_address,
                    &team)) {
    return fail(CF_ERR_BAD_ARG, error), CF_COLL_INVALID_HANDLE;
  }
  // A LOCAL list holds this node's images (one, outside the representative
  // mode); a SINGLE list every image of the team. The lists are not NULL
  // (checked on entry).
  const uint32_t index = (c.flags & CF_COLL_LOCAL) ? 0 : team->rank;
  auto with_entries = [&](Computation part, const LocalMember* member) {
    if (c.dst_from_list) {
      part.dst = member != nullptr ? represented_entry(c.dst_list, c.flags, *member) : c.dst_list[index];
    }
    if (c.src_from_list) {
      part.src = member != nullptr ? represented_entry(c.src_list, c.flags, *member) : c.src_list[index];
    }
    return part;
  };
  if (representative(*img, c.flags, c.multi_address)) {
    std::vector<LocalMember> members;
    if (!local_members(*img, *team, &members, &error)) return fail(CF_ERR_BAD_ARG, error), CF_COLL_INVALID_HANDLE;
    std::vector<carflow::Engine::RepresentedCall> calls;
    for (const LocalMember& member : members) {
      calls.push_back({member.image, {}});
      if (!build_computation(with_entries(c, &member), *member.image, member.team, &calls.back().call)) {
        return CF_COLL_INVALID_HANDLE;
      }
    }
    return start_represented(*img, calls);
  }
  CollectiveCall call;
  uint64_t src_len = 0, dst_len = 0;
  if (!build_computation(with_entries(c, nullptr), *img, team, &call, &src_len, &dst_len)) {
    return CF_COLL_INVALID_HANDLE;
  }
  if (memo_path) return start_remembered(*img, call, sig, src_len, dst_len);
  return start(*img, call);
}

Computation vector_call(const char* function, CollKind kind, cf_team_t team, void* dst,
                        const void* src, size_t elem_size, size_t elem_count, int func,
                        int func_arg, int flags) {
  Computation c{function, kind, team, flags};
  c.dst = dst, c.src = src, c.elem_size = elem_size, c.elem_count = elem_count;
  c.func = func, c.func_arg = func_arg;
  return c;
}

cf_coll_handle_t run(Computation c, bool blocking) {
  c.blocking = blocking;
  return start_computation(c);
}

int blocking_result(const Computation& c) {
  if (!blocking_allowed(c.team, c.flags)) return last_status();
  return finish_blocking(run(c, true));
}

}  // namespace

extern "C" {

// ---- MPI style ---------------------------------------------------------------

cf_coll_handle_t cf_coll_allreduce_nb(cf_team_t team, void* dst, const void* src, size_t elem_size,
                                      size_t elem_count, int func, int func_arg, int flags) {
  cf_coll_handle_t handle;
  if (repeated_vector(CollKind::Allreduce, team, flags, 0, dst, src, elem_size, elem_count, func, func_arg,
                      &handle)) {
    return handle;
  }
  return run(vector_call("cf_coll_allreduce_nb", CollKind::Allreduce, team, dst, src, elem_size,
                         elem_count, func, func_arg, flags),
             false);
}
int cf_coll_allreduce(cf_team_t team, void* dst, const void* src, size_t elem_size,
                      size_t elem_count, int func, int func_arg, int flags) {
  return blocking_result(vector_call("cf_coll_allreduce", CollKind::Allreduce, team, dst, src,
                                     elem_size, elem_count, func, func_arg, flags));
}

cf_coll_handle_t cf_coll_reduce_vec_nb(cf_team_t team, cf_image_t dstimage, void* dst,
                                       const void* src, size_t elem_size, size_t elem_count,
                                       int func, int func_arg, int flags) {
  cf_coll_handle_t handle;
  if (repeated_vector(CollKind::ReduceVec, team, flags, dstimage, dst, src, elem_size, elem_count, func,
                      func_arg, &handle)) {
    return handle;
  }
  Computation c = vector_call("cf_coll_reduce_vec_nb", CollKind::ReduceVec, team, dst, src,
                              elem_size, elem_count, func, func_arg, flags);
  c.rooted = true, c.root = dstimage;
  return run(c, false);
}
int cf_coll_reduce_vec(cf_team_t team, cf_image_t dstimage, void* dst, const void* src,
                       size_t elem_size, size_t elem_count, int func, int func_arg, int flags) {
  Computation c = vector_call("cf_coll_reduce_vec", CollKind::ReduceVec, team, dst, src, elem_size,
                              elem_count, func, func_arg, flags);
  c.rooted = true, c.root = dstimage;
  return blocking_result(c);
}

cf_coll_handle_t cf_coll_scan_nb(cf_team_t team, void* dst, const void* src, size_t elem_size,
                                 size_t elem_count, int func, int func_arg, int flags) {
  cf_coll_handle_t handle;
  if (repeated_vector(CollKind::Scan, team, flags, 0, dst, src, elem_size, elem_count, func, func_arg,
                      &handle)) {
    return handle;
  }
  return run(vector_call("cf_coll_scan_nb", CollKind::Scan, team, dst, src, elem_size, elem_count,
                         func, func_arg, flags),
             false);
}
int cf_coll_scan(cf_team_t team, void* dst, const void* src, size_t elem_size, size_t elem_count,
                 int func, int func_arg, int flags) {
  return blocking_result(vector_call("cf_coll_scan", CollKind::Scan, team, dst, src, elem_size,
                                     elem_count, func, func_arg, flags));
}

cf_coll_handle_t cf_coll_reduce_scatter_nb(cf_team_t team, void* dst, const void* src,
                                           size_t elem_size, size_t elem_count, int func,
                                           int func_arg, int flags) {
  cf_coll_handle_t handle;
  if (repeated_vector(CollKind::ReduceScatter, team, flags, 0, dst, src, elem_size, elem_count, func,
                      func_arg, &handle)) {
    return handle;
  }
  return run(vector_call("cf_coll_reduce_scatter_nb", CollKind::ReduceScatter, team, dst, src,
                         elem_size, elem_count, func, func_arg, flags),
             false);
}
int cf_coll_reduce_scatter(cf_team_t team, void* dst, const void* src, size_t elem_size,
                           size_t elem_count, int func, int func_arg, int flags) {
  return blocking_result(vector_call("cf_coll_reduce_scatter", CollKind::ReduceScatter, team, dst,
                                     src, elem_size, elem_count, func, func_arg, flags));
}

cf_coll_handle_t cf_coll_reduce_scatterv_nb(cf_team_t team, void* dst, const void* src,
                                            size_t elem_size, const size_t counts[], int func,
                                            int func_arg, int flags) {
  Computation c = vector_call("cf_coll_reduce_scatterv_nb", CollKind::ReduceScatter, team, dst, src,
                              elem_size, 0, func, func_arg, flags);
  c.variable = true, c.counts = counts;
  return run(c, false);
}
int cf_coll_reduce_scatterv(cf_team_t team, void* dst, const void* src, size_t elem_size,
                            const size_t counts[], int func, int func_arg, int flags) {
  Computation c = vector_call("cf_coll_reduce_scatterv", CollKind::ReduceScatter, team, dst, src,
                              elem_size, 0, func, func_arg, flags);
  c.variable = true, c.counts = counts;
  return blocking_result(c);
}

// ---- GASNet style: block-cyclic arrays -----------------------------------------

namespace {
Computation reduce_call(const char* function, cf_team_t team, cf_image_t dstimage, void* dst,
                        const void* src, size_t src_blksz, size_t src_offset, size_t elem_size,
                        size_t elem_count, int func, int func_arg, int flags) {
  Computation c = vector_call(function, CollKind::Reduce, team, dst, src, elem_size, elem_count,
                              func, func_arg, flags);
  c.rooted = true, c.root = dstimage;
  c.src_blksz = src_blksz, c.src_offset = src_offset;
  return c;
}
Computation prefix_call(const char* function, cf_team_t team, void* dst, size_t dst_blksz,
                        size_t dst_offset, const void* src, size_t src_blksz, size_t src_offset,
                        size_t elem_size, size_t elem_count, int func, int func_arg, int flags) {
  Computation c = vector_call(function, CollKind::PrefixReduce, team, dst, src, elem_size,
                              elem_count, func, func_arg, flags);
  c.src_blksz = src_blksz, c.src_offset = src_offset;
  c.dst_blksz = dst_blksz, c.dst_offset = dst_offset;
  return c;
}
Computation with_lists(Computation c, void* const dstlist[], void* const srclist[]) {
  c.multi_address = true;
  c.dst_from_list = dstlist != nullptr || c.kind == CollKind::PrefixReduce;
  c.src_from_list = true;
  c.dst_list = dstlist;
  c.src_list = srclist;
  return c;
}
}  // namespace

cf_coll_handle_t cf_coll_reduce_nb(cf_team_t team, cf_image_t dstimage, void* dst, void* src,
                                   size_t src_blksz, size_t src_offset, size_t elem_size,
                                   size_t elem_count, int func, int func_arg, int flags) {
  return run(reduce_call("cf_coll_reduce_nb", team, dstimage, dst, src, src_blksz, src_offset,
                         elem_size, elem_count, func, func_arg, flags),
             false);
}
int cf_coll_reduce(cf_team_t team, cf_image_t dstimage, void* dst, void* src, size_t src_blksz,
                   size_t src_offset, size_t elem_size, size_t elem_count, int func, int func_arg,
                   int flags) {
  return blocking_result(reduce_call("cf_coll_reduce", team, dstimage, dst, src, src_blksz,
                                     src_offset, elem_size, elem_count, func, func_arg, flags));
}
cf_coll_handle_t cf_coll_reducem_nb(cf_team_t team, cf_image_t dstimage, void* dst,
                                    void* const srclist[], size_t src_blksz, size_t src_offset,
                                    size_t elem_size, size_t elem_count, int func, int func_arg,
                                    int flags) {
  return run(with_lists(reduce_call("cf_coll_reducem_nb", team, dstimage, dst, nullptr, src_blksz,
                                    src_offset, elem_size, elem_count, func, func_arg, flags),
                        nullptr, srclist),
             false);
}
int cf_coll_reducem(cf_team_t team, cf_image_t dstimage, void* dst, void* const srclist[],
                    size_t src_blksz, size_t src_offset, size_t elem_size, size_t elem_count,
                    int func, int func_arg, int flags) {
  return blocking_result(with_lists(reduce_call("cf_coll_reducem", team, dstimage, dst, nullptr,
                                                src_blksz, src_offset, elem_size, elem_count, func,
                                                func_arg, flags),
                                    nullptr, srclist));
}

cf_coll_handle_t cf_coll_prefix_reduce_nb(cf_team_t team, void* dst, size_t dst_blksz,
                                          size_t dst_offset, void* src, size_t src_blksz,
                                          size_t src_offset, size_t elem_size, size_t elem_count,
                                          int func, int func_arg, int flags) {
  return run(prefix_call("cf_coll_prefix_reduce_nb", team, dst, dst_blksz, dst_offset, src,
                         src_blksz, src_offset, elem_size, elem_count, func, func_arg, flags),
             false);
}
int cf_coll_prefix_reduce(cf_team_t team, void* dst, size_t dst_blksz, size_t dst_offset,
                          void* src, size_t src_blksz, size_t src_offset, size_t elem_size,
                          size_t elem_count, int func, int func_arg, int flags) {
  return blocking_result(prefix_call("cf_coll_prefix_reduce", team, dst, dst_blksz, dst_offset, src,
                                     src_blksz, src_offset, elem_size, elem_count, func, func_arg,
                                     flags));
}
cf_coll_handle_t cf_coll_prefix_reducem_nb(cf_team_t team, void* const dstlist[], size_t dst_blksz,
                                           size_t dst_offset, void* const srclist[],
                                           size_t src_blksz, size_t src_offset, size_t elem_size,
                                           size_t elem_count, int func, int func_arg, int flags) {
  return run(with_lists(prefix_call("cf_coll_prefix_reducem_nb", team, nullptr, dst_blksz, dst_offset,
                                    nullptr, src_blksz, src_offset, elem_size, elem_count, func,
                                    func_arg, flags),
                        dstlist, srclist),
             false);
}
int cf_coll_prefix_reducem(cf_team_t team, void* const dstlist[], size_t dst_blksz,
                           size_t dst_offset, void* const srclist[], size_t src_blksz,
                           size_t src_offset, size_t elem_size, size_t elem_count, int func,
                           int func_arg, int flags) {
  return blocking_result(with_lists(prefix_call("cf_coll_prefix_reducem", team, nullptr, dst_blksz,
                                                dst_offset, nullptr, src_blksz, src_offset,
                                                elem_size, elem_count, func, func_arg, flags),
                                    dstlist, srclist));
}

}  // extern "C"
