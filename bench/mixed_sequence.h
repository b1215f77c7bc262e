/* The mixed workload of bench/compare_mpi.sh --mixed: a seeded sequence of
   collectives and sizes that carflow (carflow bench --coll mixed) and each
   MPI (bench/osu_mpi.c --coll mixed) run alike, op for op. C, so that
   osu_mpi.c, built by each MPI's compiler wrapper, shares it.

   Op i: the kind is uniform over the ten kinds below; the size is
   8 << floor(20 u^3) bytes for u uniform in [0, 1): 8 B to 4 MiB, weighted
   toward small as applications are (37% of ops at 8 B, 21% at 8 KiB or
   more, 1.7% at 4 MiB). Sizes count as the benchmarks count them: a block
   for the block kinds, the whole vector for the others. */
#ifndef CARFLOW_BENCH_MIXED_SEQUENCE_H_
#define CARFLOW_BENCH_MIXED_SEQUENCE_H_

#include <stdint.h>

enum { kMixedKinds = 10 };

/* The kinds in draw order, by carflow's names (osu_mpi.c maps them to MPI). */
static const char *const kMixedKindNames[kMixedKinds] = {
    "broadcast", "barrier", "allreduce", "scatter", "gather", "gather_all",
    "exchange", "reduce_vec", "scan", "reduce_scatter"};

/* splitmix64: the state advances by a constant, the output is mixed. */
static inline uint64_t mixed_next(uint64_t *state) {
  uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Draws the next op: its kind's index in kMixedKindNames and its bytes
   (0 for the barrier). */
static inline void mixed_op(uint64_t *state, int *kind, uint64_t *bytes) {
  *kind = (int)(mixed_next(state) % kMixedKinds);
  const double u = (double)(mixed_next(state) >> 11) / 9007199254740992.0; /* 2^53 */
  int k = (int)(20.0 * u * u * u);
  if (k > 19) k = 19;
  *bytes = *kind == 1 ? 0 : (uint64_t)8 << k;
}

#endif /* CARFLOW_BENCH_MIXED_SEQUENCE_H_ */
