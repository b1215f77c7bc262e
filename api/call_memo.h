// The C API's call memo: what a repeated call with the same scalar
// arguments reuses (engine/README.md, "Fast paths"). Not public.
#pragma once

#include <cstdint>

#include "engine/engine.h"

namespace carflow {

// The C API's memo of the last single-address call of one kind whose
// arguments are all scalars (api/api_internal.h packs the signature): a call
// with an equal signature and the same ImageContext::epoch reuses `call`
// (the checked call, addresses unbound) and `prepared`, and checks only
// its buffer addresses.
struct CallMemo {
  static constexpr int kWords = 10;
  bool valid = false;
  uint64_t epoch = 0;
  // join_repeated_member's one test of the memo (api/api_internal.h): the
  // memo's epoch while it is valid and holds a plain aggregate member
  // (PreparedCall::plain_member), else 0 (no epoch); and the aggregate
  // that member joins, its team's (valid while the epoch is: freeing a
  // team starts a new one).
  uint64_t join_epoch = 0;
  OpenAggregate* join_into = nullptr;
  uint64_t signature[kWords] = {};
  uint64_t src_len = 0, dst_len = 0;  // bytes of src / dst the image uses
  // The memo paths' address rules for these lengths as three unsigned
  // compares (buffers_present, buffers_disjoint): src >= src_min and dst
  // >= dst_min (1 for a buffer the image uses, so not NULL; else 0), and
  // no shared byte: dst - src + dst_reach >= overlap_span (dst_reach =
  // dst_len - 1; overlap_span = src_len + dst_len - 1, or 0 when either is
  // empty; buffers that share a byte put dst - src + dst_len - 1 in
  // [0, src_len + dst_len - 1)). Set with the lengths (set_lengths).
  uintptr_t src_min = 0, dst_min = 0, dst_reach = 0, overlap_span = 0;
  bool buffers_present(const void* src, const void* dst) const {
    return reinterpret_cast<uintptr_t>(src) >= src_min && reinterpret_cast<uintptr_t>(dst) >= dst_min;
  }
  bool buffers_disjoint(const void* src, const void* dst) const {
    return reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src) + dst_reach >= overlap_span;
  }
  void set_lengths(uint64_t src_bytes, uint64_t dst_bytes) {
    src_len = src_bytes;
    dst_len = dst_bytes;
    src_min = src_bytes > 0;
    dst_min = dst_bytes > 0;
    dst_reach = dst_bytes - 1;
    overlap_span = src_bytes > 0 && dst_bytes > 0 ? src_bytes + dst_bytes - 1 : 0;
  }
  CollectiveCall call;
  PreparedCall prepared;
};

// The memos of one image: its last scalar call of each kind, without and
// with CF_COLL_AGGREGATE (an aggregate's members and its last call
// alternate). Made by cf_coll_init, owned by the image.
struct ImageMemos final : ApiImageState {
  CallMemo memo[kCollKinds][2];
};
inline CallMemo (&memos_of(ImageContext& img))[kCollKinds][2] {
  return static_cast<ImageMemos*>(img.api.get())->memo;
}

}  // namespace carflow
