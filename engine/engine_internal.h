// What the engine's source files share and nothing else needs: the running
// thread's worklist, the small copy every COPY uses, and the merged DAG of
// an aggregate (for running it and for dumping it). Not public.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/engine.h"
#include "transports/small_copy.h"

namespace carflow {

// The global DAG of a running instance: its own image's DAG and every
// other team rank's, generated again (Engine::dump_json, hang reports).
GlobalDag global_dag_of(const Instance& inst);

// The running thread's worklist: CARs made ready while this thread is
// already executing CARs are queued here instead of recursing.
struct Worklist {
  std::vector<CarState*> local;
  // VCs this thread has claimed, each with the CAR that claimed it (or
  // nullptr): run the CAR, then drain what others queued meanwhile.
  std::vector<std::pair<ImageContext::Vc*, CarState*>> claimed;
  bool active = false;
  // run_roots of a direct() schedule: that instance's CARs completing on
  // this thread meanwhile, counted here (exit_step) rather than on the
  // exit's atomic counter.
  Instance* direct = nullptr;
  int32_t direct_done = 0;
  // While run_roots runs: the image whose thread this is (the waiter of
  // what it starts). An instance of that waiter finishing here needs no
  // wake: its waiter is this very thread, awake (finish).
  ImageContext* here = nullptr;
};

// This thread's worklist, reached through a pointer with the initial-exec
// TLS model (a load; the worklist itself, which has a destructor, may not
// use that model: transports/transport.h); made on the thread's first use
// (new_worklist). External linkage, as that model needs.
extern thread_local constinit Worklist* tls_work_ptr CF_FAST_TLS;
Worklist& new_worklist();
inline Worklist& this_worklist() {
  if (Worklist* w = tls_work_ptr) return *w;
  return new_worklist();
}

// One COPY's bytes (a COPY's own, or one of a fused COPY's segments).
inline void copy_bytes(char* to, const char* from, uint64_t n) {
  if (to == from || n == 0) return;
  // An aggregate's pack and unpack copies are a few bytes each.
  if (n >= 8 && n <= 16) return copy_8_to_16(to, from, n);
  std::memcpy(to, from, n);
}

// Image `image`'s merged DAG of the aggregate of `parts`: the members' DAGs
// (the schedules' own for this image, regenerated for others), merged, then
// the sync transform once.
LocalDag merged_dag(const std::vector<const Schedule*>& parts, uint32_t image, bool own, bool in_allsync,
                    bool out_allsync);

}  // namespace carflow
