// DAG transforms applied after a generator runs: a sync mode, segmentation
// and coalescing are rewrites of the DAG (graph/README.md).
#pragma once

#include "graph/car.h"

namespace carflow {

// Bits of CollectiveSpec::flags that shape the DAG (equal to the C API's
// CF_COLL_IN_ALLSYNC and CF_COLL_OUT_ALLSYNC).
inline constexpr int kSpecInAllSync = 1 << 2;
inline constexpr int kSpecOutAllSync = 1 << 5;

// Tags at and above this value belong to transforms, never to generators.
inline constexpr uint32_t kTransformTagBase = 0x40000000u;
// The entry barrier's messages (in_allsync) use [kTransformTagBase, + 0x100):
// the same on every image of a team whatever the other arguments are.
inline bool is_entry_sync_tag(uint32_t tag) {
  return tag >= kTransformTagBase && tag < kTransformTagBase + 0x100;
}

// GASNet collectives notes v1.7, "Synchronization modes". IN_NOSYNC and IN_MYSYNC need nothing:
// an image's CARs start only once it has entered, eager data waits in
// internal buffers, and a receive into a user buffer is posted only by its
// owner. OUT_MYSYNC and OUT_NOSYNC are met when the local DAG is done.
// in_allsync: every CAR waits for an entry dissemination barrier, the exit
//   synchronization's too (out_allsync): nothing of the call but the entry
//   barrier runs before every image has entered (CF_CHECK relies on it:
//   engine/arg_check.h).
// out_allsync: the exit waits for an exit dissemination barrier after all
//   data CARs, so any image's sync implies every image's buffers are done;
//   or, with done_root >= 0 (a collective where the root finishing implies
//   every image's buffers are done: gather), for the GASNet notes' zero-byte
//   broadcast from the root instead: P-1 messages rather than P log P;
//   or, with fan_in_root >= 0 (other rooted collectives: broadcast,
//   scatter), a zero-byte fan-in to that root then the zero-byte broadcast:
//   2(P-1) messages.
LocalDag apply_sync_mode(LocalDag dag, uint32_t images, bool in_allsync, bool out_allsync,
                         int32_t done_root = -1, int32_t fan_in_root = -1);

// The fan_in_root apply_sync_mode takes for `spec`: the root of the other
// rooted collectives, else -1.
inline int32_t out_allsync_fan_in_root(const CollectiveSpec& spec) {
  const bool rooted = spec.kind == CollKind::Broadcast || spec.kind == CollKind::Scatter;
  return rooted ? static_cast<int32_t>(spec.root) : -1;
}

// The done_root apply_sync_mode takes for `spec`: the root for gather and
// the reductions to one image (every image's part ends in data the root
// waits for), else -1.
inline int32_t out_allsync_root(const CollectiveSpec& spec) {
  const bool to_root = spec.kind == CollKind::Gather || spec.kind == CollKind::ReduceVec ||
                       spec.kind == CollKind::Reduce;
  return to_root ? static_cast<int32_t>(spec.root) : -1;
}

// In-place calls (user source and destination are one buffer): the image
// first copies its source into a new temp slot and every CAR that read the
// source reads the copy, so no generator needs to care that writes to the
// destination clobber its input. A DAG that never reads its source is
// returned unchanged.
LocalDag apply_in_place(LocalDag dag);

// `calls` back-to-back calls of the collective whose image DAG is `one`,
// as one DAG: what a loop of blocking calls runs, for the cost model
// (`carflow simulate --calls`). Call k's CARs follow call k-1's exit JOIN
// on the same image (a call starts once the image's previous call is
// locally done), and its tags are tag * calls + k, so every call's
// messages match only their own. dag.error is set when a tag would pass
// 32 bits.
LocalDag repeat_calls(const LocalDag& one, uint32_t calls);

}  // namespace carflow
