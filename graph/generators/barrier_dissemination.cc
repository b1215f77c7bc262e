// Dissemination barrier (Hensgen, Finkel, Manber): in round k image r signals
// (r + 2^k) mod P and waits for (r - 2^k) mod P; ceil(log2 P) rounds of
// zero-byte messages, any P.
#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag dissemination_barrier(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  DagBuilder b(image, 0, 0);
  // Round k's signal must carry everything heard in rounds 0..k-1: it waits
  // for the previous round's receive and, through the previous send, for all
  // earlier receives. Without the send chain, an image could finish having
  // heard from only some images (a receive completing says nothing about
  // the receives posted before it).
  CarId prev_recv = kNoCar, prev_send = kNoCar;
  for (uint32_t k = 0, dist = 1; dist < P; ++k, dist *= 2) {
    DagBuilder::Deps deps;
    if (prev_recv != kNoCar) deps.push_back(after(prev_recv));
    if (prev_send != kNoCar) deps.push_back(after(prev_send));
    prev_send = b.send((image + dist) % P, k, no_buffer(), deps);
    prev_recv = b.recv((image + P - dist) % P, k, no_buffer());
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(dissemination_barrier,
                           {CollKind::Barrier, "dissemination", &dissemination_barrier, true,
                            false, "ceil(log2 P) rounds of zero-byte messages", 0, &shift_symmetric});

}  // namespace carflow
