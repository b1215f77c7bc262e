// Direct permute: image i puts its source straight into image perm[i]'s
// destination, one message per moved image and a COPY for a fixed point.
// GASNet collectives notes v1.7, "Notes on algorithms: Permute": no mechanism does better than
// the puts themselves. Messages: the number of i with perm[i] != i, one step.
// An empty perm (which check_layout rejects before the API gets here, but a
// hand-built spec may carry) is read as the identity rather than indexed.
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag direct_permute(const CollectiveSpec& spec, uint32_t image) {
  const uint64_t n = spec.nbytes;
  DagBuilder b(image, n, n);
  auto target = [&](uint32_t i) { return spec.perm.empty() ? i : spec.perm[i]; };
  const uint32_t to = target(image);
  if (to == image) {
    if (n > 0) b.copy(user_dst(0, n), user_src(0, n));
    return b.finish();
  }
  const BufferRef out = n == 0 ? no_buffer() : user_src(0, n);
  const BufferRef in = n == 0 ? no_buffer() : user_dst(0, n);
  // The send and the receive are independent: a cycle of the permutation
  // must not wait around itself under rendezvous.
  b.send(to, 0, out);
  for (uint32_t from = 0; from < spec.images; ++from) {
    if (target(from) == image) b.recv(from, 0, in);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(direct_permute,
                           {CollKind::Permute, "direct", &direct_permute, true, false,
                            "each image sends straight to perm[i]; one message per moved image"});

}  // namespace carflow
