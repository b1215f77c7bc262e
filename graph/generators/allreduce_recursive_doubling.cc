// Recursive-doubling allreduce: log2(P') rounds in which partners exchange
// their whole partial result, for small vectors.
//
// P not a power of two (P = P' + rem, P' = floor_pow2(P)): images r < 2*rem
// fold in pairs first (even r sends to r+1) and get the result back at the
// end, so the core runs on P' "new ranks". The lower rank's partial is always
// the left operand, so operand order is preserved (non-commutative ops are
// safe) and the evaluation order is fixed run to run.
#include "graph/gen_builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Written on the checked builder of carflow/generator.h
// (graph/gen_builder.h), as a plug-in would be: tags follow message order.
LocalDag recursive_doubling_allreduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t n = spec.nbytes;
  GenBuilder b(spec.algorithm, spec, image);
  const patterns::Fold fold(P);
  const uint32_t rounds = fold.rounds;

  if (fold.folded_away(image)) {
    // Folded away: hand my vector to r+1, then receive the result.
    b.send(image + 1, user_src(0, n));
    b.recv(image + 1, user_dst(0, n));
    return b.finish();
  }

  // `cur` holds my partial result; it starts as the user's source.
  BufferRef cur = user_src(0, n);
  CarId cur_car = kNoCar;
  // At most three deps per CAR: held inline, as a CAR's own are.
  using Ids = SmallVector<CarId, 3>;
  auto deps_on_cur = [&]() {
    Ids d;
    if (cur_car != kNoCar) d.push_back(buffer_dep(cur_car));
    return d;
  };
  const uint32_t newrank = fold.newrank(image);
  if (fold.paired(image)) {  // odd: absorb the even neighbour's vector (it is left)
    const uint32_t slot = b.temp(n);
    const CarId got = b.recv(image - 1, temp(slot, 0, n));
    cur_car = b.reduce(user_dst(0, n), temp(slot, 0, n), cur, {buffer_dep(got)});
    cur = user_dst(0, n);
  }
  for (uint32_t k = 0; k < rounds; ++k) {
    const uint32_t partner_new = newrank ^ (1u << k);
    const uint32_t partner = fold.real(partner_new);
    const bool theirs_left = partner_new < newrank;
    const CarId sent = b.send(partner, cur, deps_on_cur());
    if (cur.space == BufferSpace::UserSrc) {
      // The first round from the user's source: the partner's vector is
      // combined as it arrives, straight into the destination (which no
      // SEND reads yet), with the source as the local operand.
      cur_car = b.recv_reduce(partner, user_dst(0, n), cur, theirs_left);
      cur = user_dst(0, n);
      continue;
    }
    const uint32_t slot = b.temp(n);
    const CarId got = b.recv(partner, temp(slot, 0, n));
    Ids deps = deps_on_cur();
    deps.push_back(buffer_dep(got));
    deps.push_back(buffer_dep(sent));  // the result overwrites what was sent
    const BufferRef theirs = temp(slot, 0, n);
    cur_car = b.reduce(user_dst(0, n), theirs_left ? theirs : cur, theirs_left ? cur : theirs, deps);
    cur = user_dst(0, n);
  }
  if (cur_car == kNoCar) cur_car = b.copy(user_dst(0, n), user_src(0, n));  // P == 1
  if (fold.paired(image)) b.send(image - 1, user_dst(0, n), {buffer_dep(cur_car)});
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(recursive_doubling_allreduce,
                           {CollKind::Allreduce, "recursive_doubling",
                            &recursive_doubling_allreduce, true, false,
                            "log2 P rounds exchanging whole vectors; small messages", 0,
                            &xor_symmetric});

}  // namespace carflow
