// Direct barrier: on entry every image signals every other image with a
// zero-byte message and leaves once it has heard from all of them. One
// round of P(P-1) messages: no signal waits for another, which is what
// counts when processes outnumber the cores (each dependent round of
// dissemination or a tree waits for a peer's next turn on a core).
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag direct_barrier(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  DagBuilder b(image, 0, 0);
  // Each signal is sent on entry, so hearing from every other image means
  // every image has entered.
  for (uint32_t k = 1; k < P; ++k) b.send((image + k) % P, 0, no_buffer());
  for (uint32_t k = 1; k < P; ++k) b.recv((image + P - k) % P, 0, no_buffer());
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(direct_barrier,
                           {CollKind::Barrier, "direct", &direct_barrier, true, false,
                            "every image signals every other on entry; one round of P(P-1) "
                            "zero-byte messages", 0, &shift_symmetric});

}  // namespace carflow
