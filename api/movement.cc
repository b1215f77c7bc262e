// The C API's data-movement collectives: broadcast, scatter, gather,
// gather_all, exchange, permute, and their multiple-address ("m") and
// variable-size ("v") forms, all through one checked path (start_movement). Every check runs before
// anything starts, so a rejected call changes nothing.
#include <cstdint>
#include <string>
#include <vector>

#include "api/api_internal.h"
#include "graph/layout.h"

using carflow::CallMemo;
using carflow::CollectiveCall;
using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow::ImageContext;
using namespace carflow::api;

namespace {

// One call as the API received it, before any check.
struct Movement {
  const char* function;
  CollKind kind;
  cf_team_t team;
  int flags;
  bool blocking = false;
  bool multi_address = false;   // an m form: dst and / or src come from a list
  void* const* dst_list = nullptr;
  void* const* src_list = nullptr;
  bool rooted = false;
  const char* root_name = "";   // "srcimage" or "dstimage"
  cf_image_t root = 0;
  void* dst = nullptr;
  void* src = nullptr;
  size_t nbytes = 0;
  const size_t* counts = nullptr;  // v forms
  const size_t* displs = nullptr;
  bool variable = false;
  const cf_image_t* perm = nullptr;  // permute
};

std::string str(uint64_t v) { return std::to_string(v); }

// Whether an image's src / dst is an entry of the call's list: in an m form,
// except broadcastm's and scatterm's one src and gatherm's one dst.
bool src_from_list(const Movement& m) {
  return m.multi_address && m.kind != CollKind::Broadcast && m.kind != CollKind::Scatter;
}
bool dst_from_list(const Movement& m) { return m.multi_address && m.kind != CollKind::Gather; }

// The GASNet notes' overlap rule for one image: `dst` and `src` must be disjoint,
// except that the image's own block may be identical (same address and
// length) where `own_block_identical` allows it.
bool check_overlap(const Movement& m, const CollectiveSpec& spec, uint32_t me, uint64_t src_len,
                   uint64_t dst_len, std::string* error) {
  if (!ranges_overlap(m.src, src_len, m.dst, dst_len)) return true;
  const char* src = static_cast<const char*>(m.src);
  const char* dst = static_cast<const char*>(m.dst);
  switch (m.kind) {
    case CollKind::Broadcast:
      if (src == dst) return true;
      break;
    case CollKind::Scatter: {  // own block of src is dst
      const carflow::BlockLayout blocks(spec);
      if (dst == src + blocks.offset(me) && dst_len == blocks.length(me)) return true;
      break;
    }
    case CollKind::Gather:
    case CollKind::GatherAll: {  // own block of dst is src
      const carflow::BlockLayout blocks(spec);
      if (src == dst + blocks.offset(me) && src_len == blocks.length(me)) return true;
      break;
    }
    case CollKind::Permute:
      if (src == dst && spec.perm[me] == me) return true;
      break;
    default:
      break;
  }
  *error = std::string(src_from_list(m) ? "srclist" : "src") + ", " + (dst_from_list(m) ? "dstlist" : "dst") +
           ": the buffers overlap (only an image's own block may be identical to its "
           "counterpart; " + std::string(carflow::coll_kind_name(m.kind)) +
           (m.kind == CollKind::Exchange ? " allows no overlap)" : " allows no other overlap)");
  return false;
}

// Checks one image's part of the call (its rank in `team`, its addresses in
// m.dst / m.src) and builds it; false after fail().
bool build_movement(const Movement& m, ImageContext& img, carflow::Team* team, CollectiveCall* call,
                    uint64_t* src_len_out = nullptr, uint64_t* dst_len_out = nullptr) {
  std::string error;
  const uint32_t P = team->size();
  const uint32_t me = team->rank;
  if (m.rooted && m.root >= P) {
    return fail(CF_ERR_BAD_ARG, std::string(m.root_name) + ": " + str(m.root) +
                                    " is not a rank of the team (size " + str(P) + ")"),
           false;
  }
  CollectiveSpec spec;
  spec.kind = m.kind;
  spec.images = P;
  spec.root = m.rooted ? m.root : 0;
  if (m.variable) {
    if (m.counts == nullptr) return fail(CF_ERR_BAD_ARG, "counts: NULL"), false;
    const uint64_t n = m.kind == CollKind::Exchange ? uint64_t{P} * P : P;
    spec.counts.assign(m.counts, m.counts + n);
    if (m.displs != nullptr) spec.displs.assign(m.displs, m.displs + P);
  } else if (m.nbytes == 0) {
    return fail(CF_ERR_BAD_ARG, "nbytes: must be > 0"), false;
  } else {
    spec.nbytes = m.nbytes;
  }
  if (m.kind == CollKind::Permute) {
    if (m.perm == nullptr) return fail(CF_ERR_BAD_ARG, "perm: NULL"), false;
    spec.perm.assign(m.perm, m.perm + P);
  }
  if (!carflow::check_layout(spec, &error)) return fail(CF_ERR_BAD_ARG, error), false;
  const uint64_t src_len = carflow::src_extent(spec, me);
  const uint64_t dst_len = carflow::dst_extent(spec, me);
  const bool src_list = src_from_list(m), dst_list = dst_from_list(m);
  if (src_len > 0 && m.src == nullptr) {
    return fail(CF_ERR_BAD_ARG, null_buffer(src_list ? "srclist" : "src", src_list, img, *team, "sends", src_len)),
           false;
  }
  if (dst_len > 0 && m.dst == nullptr) {
    return fail(CF_ERR_BAD_ARG, null_buffer(dst_list ? "dstlist" : "dst", dst_list, img, *team, "receives", dst_len)),
           false;
  }
  if (!check_overlap(m, spec, me, src_len, dst_len, &error)) {
    return fail(CF_ERR_BAD_ARG, error), false;
  }
  if (src_len_out != nullptr) *src_len_out = src_len;
  if (dst_len_out != nullptr) *dst_len_out = dst_len;
  call->kind = m.kind;
  call->root = spec.root;
  call->src = src_len > 0 ? m.src : unused_buffer();
  call->dst = dst_len > 0 ? m.dst : unused_buffer();
  call->nbytes = spec.nbytes;
  call->counts = std::move(spec.counts);
  call->displs = std::move(spec.displs);
  call->perm = std::move(spec.perm);
  call->algorithm = img.algorithm[static_cast<int>(m.kind)];
  call->team = team;
  set_sync_modes(call, m.flags);
  return true;
}


// A single-address call with scalar arguments only: the ones the memo keeps.
bool memoizable(const Movement& m) {
  return !m.multi_address && !m.variable && m.kind != CollKind::Permute;
}

// The memo signature of a memoizable movement call: words 0-3, the rest zero.
constexpr int kMovementWords = 4;
inline void movement_signature(CollKind kind, bool blocking, cf_team_t team, int flags, cf_image_t root,
                               size_t nbytes, Signature& sig) {
  sig[0] = static_cast<uint64_t>(kind) | uint64_t{blocking} << 8;
  sig[1] = reinterpret_cast<uint64_t>(team);
  sig[2] = static_cast<uint32_t>(flags) | uint64_t{root} << 32;
  sig[3] = nbytes;
  for (int w = kMovementWords; w < CallMemo::kWords; ++w) sig[w] = 0;
}

void signature_of(const Movement& m, Signature& sig) {
  movement_signature(m.kind, m.blocking, m.team, m.flags, m.root, m.nbytes, sig);
}

// build_movement's address checks on a memo's call; anything unusual
// (NULL, an overlap) takes the checked path. The one permitted overlap
// that is common, a broadcast in place (src == dst, as MPI_Bcast has it),
// stays on the memo path: its schedule is the same as with two buffers.
inline bool movement_addresses_ok(CollKind kind, const CallMemo& memo, const void* src, const void* dst) {
  return memo.buffers_present(src, dst) &&
         (memo.buffers_disjoint(src, dst) || (kind == CollKind::Broadcast && src == dst));
}

// The entry points' memo path (start_repeated) for a single-address call;
// root is 0 for a call without one, as in Movement.
[[gnu::always_inline]] inline bool repeated(CollKind kind, cf_team_t team, int flags, cf_image_t root,
                                            void* src, void* dst, size_t nbytes, cf_coll_handle_t* out) {
  Signature sig;
  movement_signature(kind, false, team, flags, root, nbytes, sig);
  return start_repeated<kMovementWords>(kind, sig, src, dst, out, [&](ImageContext&, const CallMemo& memo) {
    return movement_addresses_ok(kind, memo, src, dst);
  });
}

// The entry points' first look: a repeated plain aggregate member joins
// here (join_repeated_member).
[[gnu::always_inline]] inline bool joined_member(CollKind kind, cf_team_t team, int flags, cf_image_t root,
                                                 void* src, void* dst, size_t nbytes) {
  Signature sig;
  movement_signature(kind, false, team, flags, root, nbytes, sig);
  return join_repeated_member<kMovementWords>(kind, sig, src, dst, [&](ImageContext&, const CallMemo& memo) {
    return movement_addresses_ok(kind, memo, src, dst);
  });
}

cf_coll_handle_t start_movement(const Movement& m) {
  ImageContext* img = current_image(m.function);
  if (img == nullptr) return CF_COLL_INVALID_HANDLE;
  // A memo hit started in the entry point (repeated); this is the checked
  // path, which remembers a memoizable call for next time.
  Signature sig;
  const bool memo_path = memoizable(m);
  if (memo_path) signature_of(m, sig);
  std::string error;
  carflow::Team* team = nullptr;
  if (!check_common(*img, m.team, m.flags, m.blocking, &error, m.multi_address, &team)) {
    return fail(CF_ERR_BAD_ARG, error), CF_COLL_INVALID_HANDLE;
  }
  if (representative(*img, m.flags, m.multi_address)) {
    std::vector<LocalMember> members;
    if (!local_members(*img, *team, &members, &error)) return fail(CF_ERR_BAD_ARG, error), CF_COLL_INVALID_HANDLE;
    std::vector<carflow::Engine::RepresentedCall> calls;
    for (const LocalMember& member : members) {
      Movement part = m;
      if (m.dst_list != nullptr) part.dst = represented_entry(m.dst_list, m.flags, member);
      if (m.src_list != nullptr) part.src = represented_entry(m.src_list, m.flags, member);
      calls.push_back({member.image, {}});
      if (!build_movement(part, *member.image, member.team, &calls.back().call)) return CF_COLL_INVALID_HANDLE;
    }
    return start_represented(*img, calls);
  }
  // A LOCAL list (no ALL_THREADS: LOCAL with it is refused) holds this
  // node's one image; a SINGLE list every image of the team.
  const uint32_t index = (m.flags & CF_COLL_LOCAL) ? 0 : team->rank;
  Movement mine = m;
  if (m.dst_list != nullptr) mine.dst = m.dst_list[index];
  if (m.src_list != nullptr) mine.src = m.src_list[index];
  CollectiveCall call;
  uint64_t src_len = 0, dst_len = 0;
  if (!build_movement(mine, *img, team, &call, &src_len, &dst_len)) return CF_COLL_INVALID_HANDLE;
  if (memo_path) return start_remembered(*img, call, sig, src_len, dst_len);
  return start(*img, call);
}

// The checked path of a single-address call, out of line so that the
// entry points' memo path (repeated) keeps a small frame. root_name is
// nullptr for a call without a root.
[[gnu::noinline]] cf_coll_handle_t checked_single(const char* function, CollKind kind, const char* root_name,
                                                  cf_image_t root, cf_team_t team, void* dst, void* src,
                                                  size_t nbytes, int flags) {
  Movement m{function, kind, team, flags};
  if (root_name != nullptr) m.rooted = true, m.root_name = root_name, m.root = root;
  m.dst = dst, m.src = src, m.nbytes = nbytes;
  return start_movement(m);
}

// What a single-address entry point does after joined_member: the memo
// path, else the checked path. Out of line, with the entry point's own
// arguments, so the entry point is a short test and a tail call.
struct EntryNames {
  const char* function;
  const char* root;  // nullptr: no root argument
};
constexpr EntryNames entry_names(CollKind kind) {
  switch (kind) {
    case CollKind::Broadcast: return {"cf_coll_broadcast_nb", "srcimage"};
    case CollKind::Scatter: return {"cf_coll_scatter_nb", "srcimage"};
    case CollKind::Gather: return {"cf_coll_gather_nb", "dstimage"};
    case CollKind::GatherAll: return {"cf_coll_gather_all_nb", nullptr};
    case CollKind::Exchange: return {"cf_coll_exchange_nb", nullptr};
    default: return {"(not a single-address movement)", nullptr};
  }
}
template <CollKind kKind>
[[gnu::noinline]] cf_coll_handle_t single_rest(cf_team_t team, void* dst, cf_image_t root, void* src,
                                               size_t nbytes, int flags) {
  cf_coll_handle_t handle;
  if (repeated(kKind, team, flags, root, src, dst, nbytes, &handle)) return handle;
  constexpr EntryNames names = entry_names(kKind);
  return checked_single(names.function, kKind, names.root, root, team, dst, src, nbytes, flags);
}

int blocking(cf_coll_handle_t handle) { return finish_blocking(handle); }

}  // namespace

extern "C" {

// ---- single address ----------------------------------------------------------

cf_coll_handle_t cf_coll_broadcast_nb(cf_team_t team, void* dst, cf_image_t srcimage, void* src,
                                      size_t nbytes, int flags) {
  if (joined_member(CollKind::Broadcast, team, flags, srcimage, src, dst, nbytes)) return CF_COLL_INVALID_HANDLE;
  return single_rest<CollKind::Broadcast>(team, dst, srcimage, src, nbytes, flags);
}

cf_coll_handle_t cf_coll_scatter_nb(cf_team_t team, void* dst, cf_image_t srcimage, void* src,
                                    size_t nbytes, int flags) {
  if (joined_member(CollKind::Scatter, team, flags, srcimage, src, dst, nbytes)) return CF_COLL_INVALID_HANDLE;
  return single_rest<CollKind::Scatter>(team, dst, srcimage, src, nbytes, flags);
}

cf_coll_handle_t cf_coll_gather_nb(cf_team_t team, cf_image_t dstimage, void* dst, void* src,
                                   size_t nbytes, int flags) {
  if (joined_member(CollKind::Gather, team, flags, dstimage, src, dst, nbytes)) return CF_COLL_INVALID_HANDLE;
  return single_rest<CollKind::Gather>(team, dst, dstimage, src, nbytes, flags);
}

cf_coll_handle_t cf_coll_gather_all_nb(cf_team_t team, void* dst, void* src, size_t nbytes,
                                       int flags) {
  if (joined_member(CollKind::GatherAll, team, flags, 0, src, dst, nbytes)) return CF_COLL_INVALID_HANDLE;
  return single_rest<CollKind::GatherAll>(team, dst, 0, src, nbytes, flags);
}

cf_coll_handle_t cf_coll_exchange_nb(cf_team_t team, void* dst, void* src, size_t nbytes,
                                     int flags) {
  if (joined_member(CollKind::Exchange, team, flags, 0, src, dst, nbytes)) return CF_COLL_INVALID_HANDLE;
  return single_rest<CollKind::Exchange>(team, dst, 0, src, nbytes, flags);
}

cf_coll_handle_t cf_coll_permute_nb(cf_team_t team, void* dst, void* src, size_t nbytes,
                                    const cf_image_t perm[], int flags) {
  Movement m{"cf_coll_permute_nb", CollKind::Permute, team, flags};
  m.dst = dst, m.src = src, m.nbytes = nbytes, m.perm = perm;
  return start_movement(m);
}

// ---- variable size -------------------------------------------------------------

cf_coll_handle_t cf_coll_scatterv_nb(cf_team_t team, void* dst, cf_image_t srcimage, void* src,
                                     const size_t counts[], const size_t displs[], int flags) {
  Movement m{"cf_coll_scatterv_nb", CollKind::Scatter, team, flags};
  m.rooted = true, m.root_name = "srcimage", m.root = srcimage;
  m.dst = dst, m.src = src, m.variable = true, m.counts = counts, m.displs = displs;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_gatherv_nb(cf_team_t team, cf_image_t dstimage, void* dst, void* src,
                                    const size_t counts[], const size_t displs[], int flags) {
  Movement m{"cf_coll_gatherv_nb", CollKind::Gather, team, flags};
  m.rooted = true, m.root_name = "dstimage", m.root = dstimage;
  m.dst = dst, m.src = src, m.variable = true, m.counts = counts, m.displs = displs;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_gather_allv_nb(cf_team_t team, void* dst, void* src,
                                        const size_t counts[], const size_t displs[], int flags) {
  Movement m{"cf_coll_gather_allv_nb", CollKind::GatherAll, team, flags};
  m.dst = dst, m.src = src, m.variable = true, m.counts = counts, m.displs = displs;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_exchangev_nb(cf_team_t team, void* dst, void* src, const size_t counts[],
                                      int flags) {
  Movement m{"cf_coll_exchangev_nb", CollKind::Exchange, team, flags};
  m.dst = dst, m.src = src, m.variable = true, m.counts = counts;
  return start_movement(m);
}

// ---- multiple addresses ------------------------------------------------------------

cf_coll_handle_t cf_coll_broadcastm_nb(cf_team_t team, void* const dstlist[], cf_image_t srcimage,
                                       void* src, size_t nbytes, int flags) {
  if (dstlist == nullptr) return list_missing("cf_coll_broadcastm_nb", "dstlist");
  Movement m{"cf_coll_broadcastm_nb", CollKind::Broadcast, team, flags};
  m.multi_address = true, m.rooted = true, m.root_name = "srcimage", m.root = srcimage;
  m.dst_list = dstlist, m.src = src, m.nbytes = nbytes;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_scatterm_nb(cf_team_t team, void* const dstlist[], cf_image_t srcimage,
                                     void* src, size_t nbytes, int flags) {
  if (dstlist == nullptr) return list_missing("cf_coll_scatterm_nb", "dstlist");
  Movement m{"cf_coll_scatterm_nb", CollKind::Scatter, team, flags};
  m.multi_address = true, m.rooted = true, m.root_name = "srcimage", m.root = srcimage;
  m.dst_list = dstlist, m.src = src, m.nbytes = nbytes;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_gatherm_nb(cf_team_t team, cf_image_t dstimage, void* dst,
                                    void* const srclist[], size_t nbytes, int flags) {
  if (srclist == nullptr) return list_missing("cf_coll_gatherm_nb", "srclist");
  Movement m{"cf_coll_gatherm_nb", CollKind::Gather, team, flags};
  m.multi_address = true, m.rooted = true, m.root_name = "dstimage", m.root = dstimage;
  m.dst = dst, m.src_list = srclist, m.nbytes = nbytes;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_gather_allm_nb(cf_team_t team, void* const dstlist[],
                                        void* const srclist[], size_t nbytes, int flags) {
  if (dstlist == nullptr) return list_missing("cf_coll_gather_allm_nb", "dstlist");
  if (srclist == nullptr) return list_missing("cf_coll_gather_allm_nb", "srclist");
  Movement m{"cf_coll_gather_allm_nb", CollKind::GatherAll, team, flags};
  m.multi_address = true, m.dst_list = dstlist, m.src_list = srclist, m.nbytes = nbytes;
  return start_movement(m);
}

cf_coll_handle_t cf_coll_exchangem_nb(cf_team_t team, void* const dstlist[],
                                      void* const srclist[], size_t nbytes, int flags) {
  if (dstlist == nullptr) return list_missing("cf_coll_exchangem_nb", "dstlist");
  if (srclist == nullptr) return list_missing("cf_coll_exchangem_nb", "srclist");
  Movement m{"cf_coll_exchangem_nb", CollKind::Exchange, team, flags};
  m.multi_address = true, m.dst_list = dstlist, m.src_list = srclist, m.nbytes = nbytes;
  return start_movement(m);
}

// ---- blocking forms: no AGGREGATE, and no aggregate open on the team

#define CF_BLOCKING(call_nb, ...)                             \
  do {                                                        \
    if (!blocking_allowed(team, flags)) return last_status(); \
    return blocking(call_nb(__VA_ARGS__));                    \
  } while (0)

int cf_coll_broadcast(cf_team_t team, void* dst, cf_image_t srcimage, void* src, size_t nbytes,
                      int flags) {
  CF_BLOCKING(cf_coll_broadcast_nb, team, dst, srcimage, src, nbytes, flags);
}
int cf_coll_scatter(cf_team_t team, void* dst, cf_image_t srcimage, void* src, size_t nbytes,
                    int flags) {
  CF_BLOCKING(cf_coll_scatter_nb, team, dst, srcimage, src, nbytes, flags);
}
int cf_coll_gather(cf_team_t team, cf_image_t dstimage, void* dst, void* src, size_t nbytes,
                   int flags) {
  CF_BLOCKING(cf_coll_gather_nb, team, dstimage, dst, src, nbytes, flags);
}
int cf_coll_gather_all(cf_team_t team, void* dst, void* src, size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_gather_all_nb, team, dst, src, nbytes, flags);
}
int cf_coll_exchange(cf_team_t team, void* dst, void* src, size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_exchange_nb, team, dst, src, nbytes, flags);
}
int cf_coll_permute(cf_team_t team, void* dst, void* src, size_t nbytes, const cf_image_t perm[],
                    int flags) {
  CF_BLOCKING(cf_coll_permute_nb, team, dst, src, nbytes, perm, flags);
}
int cf_coll_scatterv(cf_team_t team, void* dst, cf_image_t srcimage, void* src,
                     const size_t counts[], const size_t displs[], int flags) {
  CF_BLOCKING(cf_coll_scatterv_nb, team, dst, srcimage, src, counts, displs, flags);
}
int cf_coll_gatherv(cf_team_t team, cf_image_t dstimage, void* dst, void* src,
                    const size_t counts[], const size_t displs[], int flags) {
  CF_BLOCKING(cf_coll_gatherv_nb, team, dstimage, dst, src, counts, displs, flags);
}
int cf_coll_gather_allv(cf_team_t team, void* dst, void* src, const size_t counts[],
                        const size_t displs[], int flags) {
  CF_BLOCKING(cf_coll_gather_allv_nb, team, dst, src, counts, displs, flags);
}
int cf_coll_exchangev(cf_team_t team, void* dst, void* src, const size_t counts[], int flags) {
  CF_BLOCKING(cf_coll_exchangev_nb, team, dst, src, counts, flags);
}
int cf_coll_broadcastm(cf_team_t team, void* const dstlist[], cf_image_t srcimage, void* src,
                       size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_broadcastm_nb, team, dstlist, srcimage, src, nbytes, flags);
}
int cf_coll_scatterm(cf_team_t team, void* const dstlist[], cf_image_t srcimage, void* src,
                     size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_scatterm_nb, team, dstlist, srcimage, src, nbytes, flags);
}
int cf_coll_gatherm(cf_team_t team, cf_image_t dstimage, void* dst, void* const srclist[],
                    size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_gatherm_nb, team, dstimage, dst, srclist, nbytes, flags);
}
int cf_coll_gather_allm(cf_team_t team, void* const dstlist[], void* const srclist[],
                        size_t nbytes, int flags) {
  CF_BLOCKING(cf_coll_gather_allm_nb, team, dstlist, srclist, nbytes, flags);
}
int cf_coll_exchangem(cf_team_t team, void* const dstlist[], void* const srclist[], size_t nbytes,
                      int flags) {
  CF_BLOCKING(cf_coll_exchangem_nb, team, dstlist, srclist, nbytes, flags);
}

}  // extern "C"
