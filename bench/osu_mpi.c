/* osu_mpi: OSU-style latency of the MPI collectives that match carflow's,
   printed as the JSON lines `carflow bench --json` prints, so that
   bench/compare_mpi.sh can put both in one table.

     mpirun -np P osu_mpi --coll C --sizes LIST --iters N --label L
     mpirun -np P osu_mpi --coll mixed [--ops N] [--seed S] --iters R --label L

   C is a carflow collective name; the MPI call it maps to:
     broadcast       MPI_Bcast                  bytes: the whole buffer, root 0
     barrier         MPI_Barrier                one step, bytes 0
     allreduce       MPI_Allreduce              bytes: the whole vector
     scatter         MPI_Scatter                bytes: one block, root 0
     gather          MPI_Gather                 bytes: one block, root 0
     gather_all      MPI_Allgather              bytes: one block
     exchange        MPI_Alltoall               bytes: one block
     reduce_vec      MPI_Reduce                 bytes: the whole vector, root 0
     scan            MPI_Scan                   bytes: the whole vector
     reduce_scatter  MPI_Reduce_scatter_block   bytes: one block
     exscan          MPI_Exscan                 bytes: the whole vector (MPI only:
                                                carflow's scan with CF_COLL_EXCLUSIVE)
   The sizes mean what they mean to carflow (bench/latency.cc, step_spec):
   per block for the P-block kinds. The reductions sum MPI_FLOAT holding
   small integers, (rank + element) % 61 as carflow's benchmark does, so every
   summation order is exact; a size that is not a multiple of 4 sums bytes
   (MPI_UINT8_T) instead, as carflow does.

   Per size: warm-up (as many calls as the timed loop, at most 300, at
   least iters/10 and 2, ten times that before the first size: carflow's
   benchmark's rule), barrier, a timed loop,
   each rank's average; rank 0 reports the mean, minimum and maximum of the
   per-rank averages (the osu_* convention, and carflow's). Then, untimed, the
   outputs are cleared, one more call runs and every rank checks its result;
   verified is true when all ranks agree with the expected values.

   Iterations: N is the most per size; large sizes get fewer, so a step moves
   about kStepBudgetBytes:
     iters(bytes) = min(N, max(10, kStepBudgetBytes / max(bytes, 4096)))
   bench/compare_mpi.sh applies the same rule to carflow's runs and checks
   that both report the same iters.

   mixed: the seeded sequence of bench/mixed_sequence.h (N ops, default
   200; seed S, default 1), the same one `carflow bench --coll mixed` runs.
   One pass untimed, then R passes timed; avg_us is one pass. bytes is the
   sum of the ops' sizes. Every distinct kind and size is verified after.

   LIST: comma list of sizes (8, 1K, 4M) or ranges LO:HI (powers of two).
   Exit status: 0; 2 on a bad argument; the MPI error class when a call
   fails (after MPI_Abort); 1 when a result is wrong. */
#include <mpi.h>

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mixed_sequence.h"

enum { kMaxSizes = 64 };
static const uint64_t kStepBudgetBytes = 64ull << 20;
static const uint64_t kMaxBytes = 1ull << 30; /* per block */

typedef enum {
  BROADCAST, BARRIER, ALLREDUCE, SCATTER, GATHER, GATHER_ALL, EXCHANGE,
  REDUCE_VEC, SCAN, REDUCE_SCATTER, EXSCAN, NUM_COLLS
} Coll;

static const char *const kCollNames[NUM_COLLS] = {
    "broadcast", "barrier", "allreduce", "scatter", "gather", "gather_all",
    "exchange", "reduce_vec", "scan", "reduce_scatter", "exscan"};

typedef struct {
  Coll coll;
  uint64_t sizes[kMaxSizes];
  int num_sizes;
  unsigned max_iters;
  const char *label;
  int mixed;      /* --coll mixed */
  unsigned ops;   /* mixed: ops in the sequence */
  uint64_t seed;  /* mixed: the sequence's seed */
} Options;

/* One size step: buffers and the MPI view of them. */
typedef struct {
  Coll coll;
  int rank, nranks;
  uint64_t bytes;      /* as given: block or whole vector */
  int elem_size;       /* 4 (MPI_FLOAT) or 1 (MPI_UINT8_T) for the reductions */
  int count;           /* elements (bytes / elem_size) per block or vector */
  MPI_Datatype type;
  unsigned char *src, *dst;
  size_t src_bytes, dst_bytes;
} Step;

static int fail_usage(const char *message) {
  fprintf(stderr, "osu_mpi: %s\n"
          "usage: osu_mpi --coll C --sizes LIST --iters N --label L\n"
          "       osu_mpi --coll mixed [--ops N] [--seed S] --iters R --label L\n", message);
  return 2;
}

/* "8", "4K", "1M", "1G"; 0 on error. */
static uint64_t parse_size(const char *text, size_t len) {
  uint64_t v = 0;
  size_t i = 0;
  for (; i < len && isdigit((unsigned char)text[i]); ++i) {
    if (v > kMaxBytes) return 0;
    v = v * 10 + (uint64_t)(text[i] - '0');
  }
  if (i == 0) return 0;
  if (i + 1 == len) {
    const char suffix = (char)toupper((unsigned char)text[i]);
    if (suffix == 'K') v <<= 10;
    else if (suffix == 'M') v <<= 20;
    else if (suffix == 'G') v <<= 30;
    else return 0;
  } else if (i != len) {
    return 0;
  }
  return v <= kMaxBytes ? v : 0;
}

static int parse_sizes(const char *text, Options *o) {
  const char *item = text;
  while (*item != '\0') {
    const char *end = strchr(item, ',');
    const size_t len = end != NULL ? (size_t)(end - item) : strlen(item);
    const char *colon = memchr(item, ':', len);
    const uint64_t lo = parse_size(item, colon != NULL ? (size_t)(colon - item) : len);
    const uint64_t hi = colon != NULL ? parse_size(colon + 1, len - (size_t)(colon - item) - 1) : lo;
    if (lo == 0 || hi == 0 || lo > hi) return 0;
    for (uint64_t v = lo; v <= hi; v *= 2) {
      if (o->num_sizes == kMaxSizes) return 0;
      o->sizes[o->num_sizes++] = v;
    }
    item = end != NULL ? end + 1 : item + len;
  }
  return o->num_sizes > 0;
}

static int parse_options(int argc, char **argv, Options *o) {
  const char *coll = NULL, *sizes = NULL, *iters = NULL, *ops = NULL, *seed = NULL;
  o->label = NULL;
  o->mixed = 0;
  o->ops = 200;
  o->seed = 1;
  for (int i = 1; i < argc; ++i) {
    if (i + 1 >= argc) return fail_usage("every option takes a value");
    const char *key = argv[i], *value = argv[++i];
    if (strcmp(key, "--coll") == 0) coll = value;
    else if (strcmp(key, "--sizes") == 0) sizes = value;
    else if (strcmp(key, "--iters") == 0) iters = value;
    else if (strcmp(key, "--label") == 0) o->label = value;
    else if (strcmp(key, "--ops") == 0) ops = value;
    else if (strcmp(key, "--seed") == 0) seed = value;
    else return fail_usage("unknown option");
  }
  char *end = NULL;
  if (coll != NULL && strcmp(coll, "mixed") == 0) {
    if (iters == NULL || o->label == NULL) return fail_usage("--iters and --label are required");
    if (sizes != NULL) return fail_usage("--sizes: mixed draws its own");
    o->mixed = 1;
    if (ops != NULL) {
      const unsigned long n = strtoul(ops, &end, 10);
      if (*end != '\0' || n == 0 || n > 100000) return fail_usage("--ops: 1..100000");
      o->ops = (unsigned)n;
    }
    if (seed != NULL) {
      const unsigned long long v = strtoull(seed, &end, 10);
      if (*end != '\0' || *seed == '\0') return fail_usage("--seed: a number");
      o->seed = v;
    }
    const unsigned long n = strtoul(iters, &end, 10);
    if (*end != '\0' || n == 0 || n > 1000000) return fail_usage("--iters: 1..1000000");
    o->max_iters = (unsigned)n;
    return 0;
  }
  if (ops != NULL || seed != NULL) return fail_usage("--ops, --seed: only with --coll mixed");
  if (coll == NULL || sizes == NULL || iters == NULL || o->label == NULL) {
    return fail_usage("--coll, --sizes, --iters and --label are required");
  }
  o->coll = NUM_COLLS;
  for (int c = 0; c < NUM_COLLS; ++c) {
    if (strcmp(coll, kCollNames[c]) == 0) o->coll = (Coll)c;
  }
  if (o->coll == NUM_COLLS) return fail_usage("--coll: not a collective this program maps to MPI");
  o->num_sizes = 0;
  if (!parse_sizes(sizes, o)) return fail_usage("--sizes: sizes 1..1G (K/M/G), ranges LO:HI, at most 64");
  const unsigned long n = strtoul(iters, &end, 10);
  if (*end != '\0' || n == 0 || n > 1000000) return fail_usage("--iters: 1..1000000");
  o->max_iters = (unsigned)n;
  return 0;
}

static unsigned iters_for(uint64_t bytes, unsigned max_iters) {
  uint64_t n = kStepBudgetBytes / (bytes > 4096 ? bytes : 4096);
  if (n < 10) n = 10;
  return n < max_iters ? (unsigned)n : max_iters;
}

static int is_reduction(Coll c) {
  return c == ALLREDUCE || c == REDUCE_VEC || c == SCAN || c == REDUCE_SCATTER || c == EXSCAN;
}

/* The value a reduction input holds: element k of rank r's source. */
static unsigned input_value(int rank, size_t k) { return (unsigned)(((size_t)rank + k) % 61); }

/* The byte pattern the data-movement kinds send: byte k of block `block`. */
static unsigned char pattern(size_t block, size_t k) {
  return (unsigned char)(block * 31u + k * 7u + 1u);
}

static void store(const Step *s, unsigned char *buf, size_t k, unsigned value) {
  if (s->elem_size == 4) {
    const float f = (float)value;
    memcpy(buf + 4 * k, &f, 4);
  } else {
    buf[k] = (unsigned char)value;
  }
}

static int equals(const Step *s, const unsigned char *buf, size_t k, unsigned value) {
  if (s->elem_size == 4) {
    float f;
    memcpy(&f, buf + 4 * k, 4);
    return f == (float)value;
  }
  return buf[k] == (unsigned char)value;
}

static void check_mpi(int rc, const char *what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0, error_class = 1;
  MPI_Error_string(rc, text, &len);
  MPI_Error_class(rc, &error_class);
  fprintf(stderr, "osu_mpi: %s failed: %s\n", what, text);
  MPI_Abort(MPI_COMM_WORLD, error_class != 0 ? error_class : 1);
}

static void *checked_calloc(size_t bytes) {
  void *p = calloc(bytes > 0 ? bytes : 1, 1);
  if (p == NULL) {
    fprintf(stderr, "osu_mpi: out of memory (%zu bytes)\n", bytes);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return p;
}

/* Buffers sized for the kind (P blocks where MPI reads or writes P blocks)
   and filled with the inputs; outputs start zeroed. */
static void step_init(Step *s, Coll coll, uint64_t bytes, int rank, int nranks) {
  const size_t b = (size_t)bytes, all = (size_t)nranks * b;
  const int root = rank == 0;
  s->coll = coll;
  s->rank = rank;
  s->nranks = nranks;
  s->bytes = bytes;
  s->elem_size = is_reduction(coll) && bytes % 4 == 0 ? 4 : 1;
  s->count = (int)(b / (size_t)s->elem_size);
  s->type = !is_reduction(coll) ? MPI_BYTE : s->elem_size == 4 ? MPI_FLOAT : MPI_UINT8_T;
  s->src_bytes = s->dst_bytes = 0;
  switch (coll) {
    case BROADCAST: s->dst_bytes = b; break; /* in place: dst is the root's source */
    case BARRIER: break;
    case SCATTER: s->src_bytes = root ? all : 0; s->dst_bytes = b; break;
    case GATHER: s->src_bytes = b; s->dst_bytes = root ? all : 0; break;
    case GATHER_ALL: s->src_bytes = b; s->dst_bytes = all; break;
    case EXCHANGE: s->src_bytes = all; s->dst_bytes = all; break;
    case REDUCE_SCATTER: s->src_bytes = all; s->dst_bytes = b; break;
    case ALLREDUCE: case REDUCE_VEC: case SCAN: case EXSCAN: s->src_bytes = b; s->dst_bytes = b; break;
    case NUM_COLLS: break;
  }
  s->src = checked_calloc(s->src_bytes);
  s->dst = checked_calloc(s->dst_bytes);
  if (is_reduction(coll)) {
    for (size_t k = 0; k < s->src_bytes / (size_t)s->elem_size; ++k) store(s, s->src, k, input_value(rank, k));
  } else if (coll == BROADCAST) {
    if (root) for (size_t k = 0; k < b; ++k) s->dst[k] = pattern(0, k);
  } else if (coll == EXCHANGE) {
    for (size_t j = 0; j < (size_t)nranks; ++j) {
      for (size_t k = 0; k < b; ++k) s->src[j * b + k] = pattern((size_t)rank * (size_t)nranks + j, k);
    }
  } else if (coll == SCATTER) {
    for (size_t k = 0; k < s->src_bytes; ++k) s->src[k] = pattern(k / b, k % b);
  } else {
    for (size_t k = 0; k < s->src_bytes; ++k) s->src[k] = pattern((size_t)rank, k);
  }
}

static void step_free(Step *s) {
  free(s->src);
  free(s->dst);
}

static void run_once(const Step *s) {
  const int n = s->count;
  void *src = s->src, *dst = s->dst;
  int rc = MPI_SUCCESS;
  switch (s->coll) {
    case BROADCAST: rc = MPI_Bcast(dst, n, s->type, 0, MPI_COMM_WORLD); break;
    case BARRIER: rc = MPI_Barrier(MPI_COMM_WORLD); break;
    case ALLREDUCE: rc = MPI_Allreduce(src, dst, n, s->type, MPI_SUM, MPI_COMM_WORLD); break;
    case SCATTER: rc = MPI_Scatter(src, n, s->type, dst, n, s->type, 0, MPI_COMM_WORLD); break;
    case GATHER: rc = MPI_Gather(src, n, s->type, dst, n, s->type, 0, MPI_COMM_WORLD); break;
    case GATHER_ALL: rc = MPI_Allgather(src, n, s->type, dst, n, s->type, MPI_COMM_WORLD); break;
    case EXCHANGE: rc = MPI_Alltoall(src, n, s->type, dst, n, s->type, MPI_COMM_WORLD); break;
    case REDUCE_VEC: rc = MPI_Reduce(src, dst, n, s->type, MPI_SUM, 0, MPI_COMM_WORLD); break;
    case SCAN: rc = MPI_Scan(src, dst, n, s->type, MPI_SUM, MPI_COMM_WORLD); break;
    case EXSCAN: rc = MPI_Exscan(src, dst, n, s->type, MPI_SUM, MPI_COMM_WORLD); break;
    case REDUCE_SCATTER:
      rc = MPI_Reduce_scatter_block(src, dst, n, s->type, MPI_SUM, MPI_COMM_WORLD);
      break;
    case NUM_COLLS: break;
  }
  check_mpi(rc, kCollNames[s->coll]);
}

/* Sum over ranks first..last of input element k. */
static unsigned sum_inputs(int first, int last, size_t k) {
  unsigned sum = 0;
  for (int r = first; r <= last; ++r) sum += input_value(r, k);
  return sum;
}

/* This rank's output against the expected values of the call. */
static int step_verify(const Step *s) {
  const size_t b = (size_t)s->bytes, P = (size_t)s->nranks, me = (size_t)s->rank;
  const int last = s->nranks - 1;
  const size_t count = (size_t)s->count;
  switch (s->coll) {
    case BARRIER: return 1;
    case BROADCAST:
      for (size_t k = 0; k < b; ++k) if (s->dst[k] != pattern(0, k)) return 0;
      return 1;
    case SCATTER:
      for (size_t k = 0; k < b; ++k) if (s->dst[k] != pattern(me, k)) return 0;
      return 1;
    case GATHER: case GATHER_ALL: /* the root's (gather) or everyone's P blocks */
      for (size_t k = 0; k < s->dst_bytes; ++k) if (s->dst[k] != pattern(k / b, k % b)) return 0;
      return 1;
    case EXCHANGE: /* block j came from rank j, which sent its block `me` */
      for (size_t j = 0; j < P; ++j) {
        for (size_t k = 0; k < b; ++k) if (s->dst[j * b + k] != pattern(j * P + me, k)) return 0;
      }
      return 1;
    case ALLREDUCE: case REDUCE_VEC:
      if (s->coll == REDUCE_VEC && me != 0) return 1;
      for (size_t k = 0; k < count; ++k) if (!equals(s, s->dst, k, sum_inputs(0, last, k))) return 0;
      return 1;
    case SCAN:
      for (size_t k = 0; k < count; ++k) if (!equals(s, s->dst, k, sum_inputs(0, s->rank, k))) return 0;
      return 1;
    case EXSCAN: /* rank 0's result is left as it was: cleared before the check */
      for (size_t k = 0; k < count; ++k) {
        if (!equals(s, s->dst, k, s->rank == 0 ? 0 : sum_inputs(0, s->rank - 1, k))) return 0;
      }
      return 1;
    case REDUCE_SCATTER:
      for (size_t k = 0; k < count; ++k) {
        if (!equals(s, s->dst, k, sum_inputs(0, last, me * count + k))) return 0;
      }
      return 1;
    case NUM_COLLS: break;
  }
  return 0;
}

/* Every rank's time and verdict gathered; rank 0 prints the JSON line
   (`extra`: more fields, "" or starting with a comma). Returns 1 when
   every rank verified. */
static int report(const char *coll, uint64_t bytes, const char *label, unsigned iters, double my_us, int ok,
                  const char *extra) {
  int rank = 0, nranks = 1, all_ok = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD), "verify");
  double sum_us = 0, min_us = 0, max_us = 0;
  check_mpi(MPI_Reduce(&my_us, &sum_us, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD), "reduce avg");
  check_mpi(MPI_Reduce(&my_us, &min_us, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD), "reduce min");
  check_mpi(MPI_Reduce(&my_us, &max_us, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD), "reduce max");
  if (rank == 0) {
    printf("{\"coll\":\"%s\",\"bytes\":%llu,\"images\":%d,\"nodes\":%d,\"algo\":\"%s\","
           "\"iters\":%u,\"avg_us\":%.4f,\"min_us\":%.4f,\"max_us\":%.4f,\"verified\":%s%s}\n",
           coll, (unsigned long long)bytes, nranks, nranks, label, iters, sum_us / nranks, min_us, max_us,
           all_ok ? "true" : "false", extra);
    fflush(stdout);
  }
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  return all_ok;
}

/* One size step; rank 0 prints its JSON line. Returns 1 when verified. */
static int run_step(const Options *o, uint64_t bytes, int rank, int nranks, int first_step) {
  Step s;
  step_init(&s, o->coll, bytes, rank, nranks);
  const unsigned iters = iters_for(bytes, o->max_iters);
  unsigned warmup = iters < 300 ? iters : 300;
  if (warmup < iters / 10) warmup = iters / 10;
  if (warmup < 2) warmup = 2;
  if (first_step) warmup *= 10;
  for (unsigned i = 0; i < warmup; ++i) run_once(&s);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  const double t0 = MPI_Wtime();
  for (unsigned i = 0; i < iters; ++i) run_once(&s);
  const double my_us = (MPI_Wtime() - t0) * 1e6 / iters;

  /* Untimed: clear what the call writes (the broadcast root keeps its
     source), run once more, check. */
  if (!(s.coll == BROADCAST && rank == 0)) memset(s.dst, 0, s.dst_bytes);
  run_once(&s);
  const int ok = step_verify(&s);
  step_free(&s);
  return report(kCollNames[o->coll], bytes, o->label, iters, my_us, ok, "");
}

/* The mixed workload: one Step per distinct kind and size (made before the
   clock starts), the sequence as pointers to them. Returns 1 when every
   distinct step verified. */
static int run_mixed(const Options *o, int rank, int nranks) {
  Step *made[NUM_COLLS][21] = {{NULL}};
  Step **seq = checked_calloc(sizeof(Step *) * o->ops);
  uint64_t state = o->seed, total = 0;
  for (unsigned i = 0; i < o->ops; ++i) {
    int kind = 0, k = 20;
    uint64_t bytes = 0;
    mixed_op(&state, &kind, &bytes);
    if (bytes > 0) for (k = 0; ((uint64_t)8 << k) < bytes; ++k) {}
    if (made[kind][k] == NULL) {
      made[kind][k] = checked_calloc(sizeof(Step));
      step_init(made[kind][k], (Coll)kind, bytes, rank, nranks);
    }
    seq[i] = made[kind][k];
    total += bytes;
  }
  for (unsigned i = 0; i < o->ops; ++i) run_once(seq[i]);
  check_mpi(MPI_Barrier(MPI_COMM_WORLD), "barrier");
  const double t0 = MPI_Wtime();
  for (unsigned r = 0; r < o->max_iters; ++r) {
    for (unsigned i = 0; i < o->ops; ++i) run_once(seq[i]);
  }
  const double my_us = (MPI_Wtime() - t0) * 1e6 / o->max_iters;
  int ok = 1;
  for (int c = 0; c < NUM_COLLS; ++c) {
    for (int k = 0; k <= 20; ++k) {
      Step *s = made[c][k];
      if (s == NULL) continue;
      if (!(s->coll == BROADCAST && rank == 0)) memset(s->dst, 0, s->dst_bytes);
      run_once(s);
      ok &= step_verify(s);
      step_free(s);
      free(s);
    }
  }
  free(seq);
  char extra[128];
  snprintf(extra, sizeof extra, ",\"ops\":%u,\"seed\":%llu,\"total_bytes\":%llu", o->ops,
           (unsigned long long)o->seed, (unsigned long long)total);
  return report("mixed", 0, o->label, o->max_iters, my_us, ok, extra);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, nranks = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &nranks);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  Options o;
  /* Every rank parses the same arguments, so all agree on failing. */
  const int usage = parse_options(argc, argv, &o);
  if (usage != 0) {
    MPI_Finalize();
    return usage;
  }
  if (o.mixed) {
    const int ok = run_mixed(&o, rank, nranks);
    MPI_Finalize();
    return ok ? 0 : 1;
  }
  int all_ok = 1;
  const int num_steps = o.coll == BARRIER ? 1 : o.num_sizes;
  for (int i = 0; i < num_steps; ++i) {
    all_ok &= run_step(&o, o.coll == BARRIER ? 0 : o.sizes[i], rank, nranks, i == 0);
  }
  MPI_Finalize();
  return all_ok ? 0 : 1;
}
