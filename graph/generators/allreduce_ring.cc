// Ring allreduce: reduce-scatter then allgather around the ring r -> r+1,
// 2(P-1) steps each moving one block of n/P bytes; bandwidth-optimal for
// large vectors.
//
// Blocks: the vector is cut into P blocks of whole elements (split_blocks).
// Reduce-scatter step k: send block (r-k), receive-and-combine block (r-k-1)
// straight into dst. After P-1 steps image r owns the reduced block (r+1).
// Allgather step k: send block (r+1-k), receive block (r-k).
// Block b accumulates contributions starting at image b+1, so operand order
// is a rotation: commutative operators only. The order is fixed, so results
// are the same bits run to run.
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

LocalDag ring_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  DagBuilder b(image, n, n);
  b.reserve(4 * size_t{P});
  CarId init = b.copy(user_dst(0, n), user_src(0, n));
  if (P == 1) return b.finish();
  const auto blocks = split_blocks(n, P, spec.elem_size);
  const uint32_t right = (image + 1) % P, left = (image + P - 1) % P;
  auto block = [&](int64_t index) {
    const Segment& s = blocks[static_cast<uint32_t>(((index % P) + P) % P)];
    return user_dst(s.offset, s.length);
  };
  std::vector<CarId> rs_send(P - 1), rs_recv(P - 1);
  for (uint32_t k = 0; k + 1 < P; ++k) {
    DagBuilder::Deps send_deps{after_buffer(k == 0 ? init : rs_recv[k - 1])};
    rs_send[k] = b.send(right, k, block(int64_t{image} - k), send_deps);
    rs_recv[k] = b.recv_reduce(left, k, block(int64_t{image} - k - 1), true, {after_buffer(init)});
  }
  CarId prev = rs_recv[P - 2];
  for (uint32_t k = 0; k + 1 < P; ++k) {
    const uint32_t tag = P - 1 + k;
    b.send(right, tag, block(int64_t{image} + 1 - k), {after_buffer(prev)});
    // Block (r-k) was last sent in reduce-scatter step k and combined in k-1.
    DagBuilder::Deps recv_deps{after_buffer(init), after_buffer(rs_send[k])};
    if (k >= 1) recv_deps.push_back(after_buffer(rs_recv[k - 1]));
    prev = b.recv(left, tag, block(int64_t{image} - k), recv_deps);
  }
  return b.finish();
}

// Image r handles block r - k in step k: images agree up to a shift when
// every block has the same length.
RankSymmetry ring_symmetry(const CollectiveSpec& spec) {
  const uint64_t elems = spec.nbytes / (spec.elem_size == 0 ? 1 : spec.elem_size);
  return elems % spec.images == 0 ? RankSymmetry::Shift : RankSymmetry::None;
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(ring_allreduce,
                           {CollKind::Allreduce, "ring", &ring_allreduce, false, false,
                            "reduce-scatter + allgather around a ring; large vectors", 0, &ring_symmetry});

}  // namespace carflow
