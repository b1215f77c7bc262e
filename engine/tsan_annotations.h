// Happens-before edges ThreadSanitizer cannot see by itself. Debian's libtbb
// is not instrumented, so the order TBB gives between try_put on one thread
// and the node's body on a worker is invisible to TSan; these annotations
// state it. They compile to nothing without -fsanitize=thread.
#pragma once

#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace carflow {

// The address both sides name; one for all nodes (TSan only over-orders).
inline char tbb_handoff_marker;

// Before handing work to a flow-graph node.
inline void tsan_release_to_tbb() {
#if defined(__SANITIZE_THREAD__)
  __tsan_release(&tbb_handoff_marker);
#endif
}

// First thing in a flow-graph body, before it reads its closure.
inline void tsan_acquire_from_tbb() {
#if defined(__SANITIZE_THREAD__)
  __tsan_acquire(&tbb_handoff_marker);
#endif
}

}  // namespace carflow
