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
  for (uint32_t peer = 0; peer < P; ++peer) {
    if (peer != image) b.send(peer, 0, user_src(0, n));
  }
  // The chain folds v0, v1, ... into the destination, one link per rank.
  // Ranks 2.. receive v0 and fold their own vector in with a REDUCE at
  // their place; ranks 0 and 1 start with a combining receive of the other's
  // vector against their own source, so no link copies a vector by itself.
  CarId last = kNoCar;
  auto after_last = [&]() {
    DagBuilder::Deps d;
    if (last != kNoCar) d.push_back(after_buffer(last));
    return d;
  };
  for (uint32_t k = 0; k < P; ++k) {
    if (k == image) {
      // Ranks 0 and 1 fold their own vector into the first link.
      if (image >= 2) last = b.reduce(user_dst(0, n), user_dst(0, n), user_src(0, n), after_last());
      continue;
    }
    if (last == kNoCar && k == 0 && image != 1) {
      last = b.recv(k, 0, user_dst(0, n));  // v0 lands first
    } else if (last == kNoCar) {
      // Rank 0 or 1 folding the other's vector with its own: v0 left.
      last = b.recv_reduce(k, 0, user_dst(0, n), /*incoming_left=*/k < image, {}, user_src(0, n));
    } else {
      last = b.recv_reduce(k, 0, user_dst(0, n), /*incoming_left=*/false, after_last());
    }
  }
  if (last == kNoCar) b.copy(user_dst(0, n), user_src(0, n));  // P == 1
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(direct_allreduce,
                           {CollKind::Allreduce, "direct", &direct_allreduce, true, false,
                            "every image sends its vector to all others in one step and folds "
                            "them in rank order; P(P-1) messages, small vectors when processes "
                            "outnumber cores"});

}  // namespace carflow
