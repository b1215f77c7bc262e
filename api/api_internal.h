// What the C API's source files share: the per-thread status and error
// text, the checks every collective makes, and starting a call. Not public.
#pragma once

#include <string>
#include <vector>

#include "api/call_memo.h"
#include "carflow/carflow.h"
#include "engine/runtime.h"

namespace carflow::api {

extern thread_local constinit ImageContext* t_image CF_FAST_TLS;  // the calling thread's image

// Records a failure (status, message naming the argument and rule); aborts
// in CF_ERRORS_ARE_FATAL mode. Returns status.
int fail(int status, const std::string& message);
extern thread_local constinit int t_status CF_FAST_TLS;
inline int succeed(int status = CF_OK) { return t_status = status; }
int last_status();
// The calling thread's image, or nullptr after reporting why not.
ImageContext* no_current_image(const char* function);
inline ImageContext* current_image(const char* function) {
  ImageContext* img = t_image;
  return img != nullptr && Runtime::live() ? img : no_current_image(function);
}
// The calling image's view of `team`, or nullptr when `team` is not a live
// team of this image (freed, CF_TEAM_NULL, never made, another image's).
Team* find_team(ImageContext& img, cf_team_t team);
// Team, flag groups, AGGREGATE and the LOCAL / SINGLE / ALL_THREADS rules
// (multi_address: the rules of the m forms). *team_out: the team.
bool check_common(ImageContext& img, cf_team_t team, int flags, bool blocking, std::string* error,
                  bool multi_address = false, Team** team_out = nullptr);
// Stands in for a buffer the calling image does not use (0 bytes of it), so
// no CAR ever sees a null base. Aligned for any element.
inline void* unused_buffer() {
  alignas(64) static char stand_in[64];
  return stand_in;
}
// True when [a, a+n) and [b, b+m) share a byte.
inline bool ranges_overlap(const void* a, size_t n, const void* b, size_t m) {
  const auto x = reinterpret_cast<uintptr_t>(a), y = reinterpret_cast<uintptr_t>(b);
  return n > 0 && m > 0 && x < y + m && y < x + n;
}
void set_sync_modes(CollectiveCall* call, int flags);
// The error for a NULL buffer the calling image uses: "dst: NULL on image 5
// (team rank 3), which receives 8 bytes into it"; in_list: the buffer is an
// entry of the m form's list named `name`.
std::string null_buffer(const char* name, bool in_list, const ImageContext& img, const Team& team, const char* verb,
                        uint64_t bytes);
// An m form called with a NULL list (`list` names it): the error, after
// the calling-thread check every entry point makes first.
cf_coll_handle_t list_missing(const char* function, const char* list);
// The representative-thread mode (GASNet collectives notes v1.7, "Collectives and threads"):
// an m form called without CF_COLL_ALL_THREADS on a node of several
// images; the calling thread calls for every image of its node.
bool representative(const ImageContext& img, int flags, bool multi_address);
// An image of this node that belongs to a team: its context, its own view
// of the team, its team rank and its index among the node's members.
struct LocalMember {
  ImageContext* image;
  Team* team;
  uint32_t rank;
  uint32_t local_index;
};
// The team's members on this node, in team rank order; false with *error
// when one has no view of the team or the caller is not a member.
bool local_members(ImageContext& img, Team& team, std::vector<LocalMember>* out, std::string* error);
// A member's entry of an m form's list in the representative mode: LOCAL
// lists hold this node's members (local index), SINGLE lists the whole team.
void* represented_entry(void* const list[], int flags, const LocalMember& member);
// Starts the parts under one handle of the caller (after fail() on an error).
cf_coll_handle_t start_represented(ImageContext& caller,
                                   const std::vector<carflow::Engine::RepresentedCall>& calls);
// Blocking forms: false (after fail()) for CF_COLL_AGGREGATE on the call or
// an aggregate open on `team`, which only a non-blocking call may end.
bool blocking_allowed(cf_team_t team, int flags);
// Starts the call; the handle, or CF_COLL_INVALID_HANDLE after fail().
cf_coll_handle_t start(ImageContext& img, const CollectiveCall& call);
// The memoized path (api/call_memo.h, CallMemo). A call whose arguments
// are all scalars packs them into a signature (unused words zero); when
// the image's memo of that kind holds the same signature for the current
// epoch, memo_hit returns it and the caller checks only the addresses.
// Word 2 of every signature holds the flags in its low 32 bits.
using Signature = uint64_t[CallMemo::kWords];
inline CallMemo& memo_slot(ImageContext& img, CollKind kind, int flags) {
  return memos_of(img)[static_cast<int>(kind)][(flags & CF_COLL_AGGREGATE) != 0];
}
// Inline, so that the caller's signature words stay in registers (no
// store and reload of the array on every call). kUsed: the words this
// kind's signatures may hold; the rest are zero in every signature its
// memo is given, so they need no compare.
template <int kUsed = CallMemo::kWords>
inline CallMemo* memo_hit(ImageContext& img, CollKind kind, const Signature& sig) {
  static_assert(kUsed >= 3 && kUsed <= CallMemo::kWords, "word 2 holds the flags");
  CallMemo& memo = memo_slot(img, kind, static_cast<int>(sig[2]));
  if (!memo.valid || memo.epoch != img.epoch) return nullptr;
  // No early exit: a hit compares every word anyway. Two accumulators,
  // so the words are compared side by side rather than in one chain.
  uint64_t differ[2] = {0, 0};
#pragma GCC unroll 16
  for (int w = 0; w < kUsed; ++w) differ[w & 1] |= memo.signature[w] ^ sig[w];
  return (differ[0] | differ[1]) == 0 ? &memo : nullptr;
}
// Starts the memo's call (memo.call, its addresses bound); the memo is
// dropped if the start fails.
cf_coll_handle_t start_memo_call(ImageContext& img, CallMemo& memo);
// Starts the memo's call with these addresses (call.src / call.dst as the
// checked path would bind them). Inline: a repeated aggregate member only
// records its buffers, and that is most of an aggregate's calls.
[[gnu::always_inline]] inline cf_coll_handle_t start_memo(ImageContext& img, CallMemo& memo, void* src,
                                                        void* dst) {
  src = memo.src_len > 0 ? src : unused_buffer();
  dst = memo.dst_len > 0 ? dst : unused_buffer();
  if (memo.call.aggregate && img.engine->join_prepared(img, memo.call, memo.prepared, src, dst)) {
    succeed();
    return CF_COLL_INVALID_HANDLE;
  }
  memo.call.src = src;
  memo.call.dst = dst;
  return start_memo_call(img, memo);
}
// The memo path of a call with no more than scalars and two addresses:
// when the calling image's memo holds `sig` and addresses_ok(memo) finds
// the addresses fit build's checks (the caller's kind's, e.g. not NULL
// where bytes are used, no overlap), starts the call into *out and returns
// true. Inline in the C entry points, so a repeated call builds no argument
// record and enters no checked path; false sends the call down the checked
// path, which reports whatever is wrong. kUsed: as memo_hit's.
template <int kUsed, typename AddressesOk>
[[gnu::always_inline]] inline bool start_repeated(CollKind kind, const Signature& sig, void* src, void* dst,
                                                  cf_coll_handle_t* out, AddressesOk addresses_ok) {
  ImageContext* img = t_image;
  if (img == nullptr || !Runtime::live()) return false;
  CallMemo* memo = memo_hit<kUsed>(*img, kind, sig);
  if (memo == nullptr || !addresses_ok(*img, *memo)) return false;
  *out = start_memo(*img, *memo, src, dst);
  return true;
}
// The repeat of a plain aggregate member (engine/engine.h,
// PreparedCall::plain_member: data movement, not checking) whose memo
// holds `sig`, with addresses that fit (addresses_ok): joins the team's
// open aggregate right here and returns true. Most of an aggregate's calls
// take this path, so it makes no call and uses few registers: the caller
// tail-calls its full path (start_repeated, then the checked path) when
// this returns false.
template <int kUsed, typename AddressesOk>
[[gnu::always_inline]] inline bool join_repeated_member(CollKind kind, const Signature& sig, void* src, void* dst,
                                                        AddressesOk addresses_ok) {
  if ((sig[2] & CF_COLL_AGGREGATE) == 0) return false;
  ImageContext* img = t_image;
  if (img == nullptr || !Runtime::live()) return false;
  // The AGGREGATE memo of the kind: a fixed offset into the image.
  const CallMemo& memo = memos_of(*img)[static_cast<int>(kind)][1];
  if (memo.join_epoch != img->epoch) return false;  // valid, a plain member, this epoch
  // Word 0 is the slot's kind (start_remembered sets join_epoch only
  // then); the others compared one by one, each a fused compare and branch.
#pragma GCC unroll 16
  for (int w = 1; w < kUsed; ++w) {
    if (memo.signature[w] != sig[w]) return false;
  }
  if (!addresses_ok(*img, memo)) return false;
  OpenAggregate& agg = *memo.join_into;
  if (!agg.has_room()) return false;
  // Every test passed: from here on the caller's arguments are not needed
  // for its fallback, which leaves the compiler registers to spare.
  agg.append_member(memo.prepared.part, memo.src_len > 0 ? src : unused_buffer(),
                    memo.dst_len > 0 ? dst : unused_buffer());
  succeed();
  return true;
}
// Starts a call the checked path built and, when it starts, remembers it
// under `sig` with the byte counts of src and dst the image uses.
cf_coll_handle_t start_remembered(ImageContext& img, const CollectiveCall& call, const Signature& sig,
                                  uint64_t src_len, uint64_t dst_len);
// Blocking forms: waits for a started handle (or returns the start's error).
int finish_blocking(cf_coll_handle_t handle);

}  // namespace carflow::api
