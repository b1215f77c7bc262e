// Direct allreduce: every image sends its whole vector to every other image
// in one step and combines the P vectors itself, in rank order.
//
// One round: an image waits only for each peer's single send, never for a
// peer to have received first. That is what counts when processes outnumber
// the cores: each dependent round of a multi-round algorithm waits for a
// peer's turn on a core (README, Algorithm selection). The price is P(P-1)
// messages of the whole vector, so it is for small vectors only.
//
// Every image evaluates ((v0 op v1) op v2) ... op v(P-1): the operand order is
// kept (non-commutative ops are safe) and every image gets the same bits.
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag direct_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  DagBuilder b(image, n, n);
  b.reserve(3 * size_t{P} + 1);
  for (uint32_t peer = 0; peer < P; ++peer) {
    if (peer != image) b.send(peer, 0, user_src(0, n));
  }
  if (P == 1) {
    b.copy(user_dst(0, n), user_src(0, n));
    return b.finish();
  }
  // The chain folds v0, v1, ... into the destination, one link per rank.
  // Ranks 0 and 1 start with a combining receive of the other's vector
  // against their own source (v0 left); ranks 2.. receive v0, then fold
  // their own vector in with a REDUCE at their place. No link copies a
  // vector by itself.
  CarId last;
  uint32_t next;  // the first rank not yet folded in
  if (image <= 1) {
    const uint32_t other = 1 - image;
    last = b.recv_reduce(other, 0, user_dst(0, n), /*incoming_left=*/other < image, {}, user_src(0, n));
    next = 2;
  } else {
    last = b.recv(0, 0, user_dst(0, n));
    next = 1;
  }
  for (uint32_t k = next; k < P; ++k) {
    last = k == image ? b.reduce(user_dst(0, n), user_dst(0, n), user_src(0, n), {after_buffer(last)})
                      : b.recv_reduce(k, 0, user_dst(0, n), /*incoming_left=*/false, {after_buffer(last)});
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(direct_allreduce,
                           {CollKind::Allreduce, "direct", &direct_allreduce, true, false,
                            "every image sends its vector to all others in one step and folds "
                            "them in rank order; P(P-1) messages, small vectors when processes "
                            "outnumber cores"});

}  // namespace carflow
