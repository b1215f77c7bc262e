/* mpi_layer_check: every collective libcarflow_mpi intercepts, on
   MPI_COMM_WORLD and on communicators made by dup, split (reversed keys),
   split_type, cart_create and a split into single processes, with several
   datatypes, ops, roots and MPI_IN_PLACE, checked against a sequential
   computation on every rank. With the layer preloaded it also checks, call
   by call, which path served it (cf_mpi_calls, found with dlsym): carflow for
   what it serves, MPI for user ops, derived or unsupported reduction
   datatypes, logical ops, count 0 and communicators of one process.
   Without the layer (or with it turned off) the results are checked alone.

     mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_check

   Prints "mpi_layer_check: rank R: layer on|off, N checks, F failures";
   exits 1 when a check failed. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int (*calls_fn)(const char *, uint64_t *, uint64_t *);
static calls_fn g_calls;   /* NULL without the layer */
static int g_layer_on;     /* the first world barrier ran on carflow */
static int g_world_rank;
static long g_checks, g_failures;
static const char *g_where = "";  /* the communicator under test */

#define CHECK(cond, ...)                                                         \
  do {                                                                           \
    ++g_checks;                                                                  \
    if (!(cond)) {                                                               \
      ++g_failures;                                                              \
      if (g_failures <= 20) {                                                    \
        fprintf(stderr, "rank %d [%s] %s:%d: ", g_world_rank, g_where, __FILE__, __LINE__); \
        fprintf(stderr, __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                     \
      }                                                                          \
    }                                                                            \
  } while (0)

/* ---- which path served a call ------------------------------------------ */
enum { CARFLOW, PMPI };
static uint64_t g_cf0, g_mpi0;

static void path_begin(const char *fn) {
  if (g_calls != NULL) g_calls(fn, &g_cf0, &g_mpi0);
}

/* want: CARFLOW for a call the layer serves on a communicator of two or
   more processes (it goes to MPI otherwise), PMPI for one it must not. */
static void path_end(const char *fn, MPI_Comm comm, int want) {
  if (g_calls == NULL) return;
  int size;
  MPI_Comm_size(comm, &size);
  uint64_t cf = 0, mpi = 0;
  g_calls(fn, &cf, &mpi);
  const int on_carflow = g_layer_on && want == CARFLOW && size > 1;
  CHECK(cf - g_cf0 == (uint64_t)on_carflow && mpi - g_mpi0 == (uint64_t)!on_carflow,
        "%s: expected it on %s, got %llu on carflow and %llu on MPI", fn, on_carflow ? "carflow" : "MPI",
        (unsigned long long)(cf - g_cf0), (unsigned long long)(mpi - g_mpi0));
}

/* ---- values and the sequential reference ------------------------------- */
/* Small integers, so sums and products are exact in every type. */
static long long value(int rank, int i, int salt) { return (rank * 7 + i * 3 + salt) % 11 + 1; }

static long long get(MPI_Datatype t, const void *b, int i) {
  if (t == MPI_INT) return ((const int *)b)[i];
  if (t == MPI_UNSIGNED) return ((const unsigned *)b)[i];
  if (t == MPI_LONG) return ((const long *)b)[i];
  if (t == MPI_LONG_LONG) return ((const long long *)b)[i];
  if (t == MPI_UNSIGNED_LONG) return (long long)((const unsigned long *)b)[i];
  if (t == MPI_FLOAT) return (long long)((const float *)b)[i];
  if (t == MPI_DOUBLE) return (long long)((const double *)b)[i];
  if (t == MPI_SIGNED_CHAR) return ((const signed char *)b)[i];
  if (t == MPI_SHORT) return ((const short *)b)[i];
  abort();
}

static void put(MPI_Datatype t, void *b, int i, long long v) {
  if (t == MPI_INT) ((int *)b)[i] = (int)v;
  else if (t == MPI_UNSIGNED) ((unsigned *)b)[i] = (unsigned)v;
  else if (t == MPI_LONG) ((long *)b)[i] = (long)v;
  else if (t == MPI_LONG_LONG) ((long long *)b)[i] = v;
  else if (t == MPI_UNSIGNED_LONG) ((unsigned long *)b)[i] = (unsigned long)v;
  else if (t == MPI_FLOAT) ((float *)b)[i] = (float)v;
  else if (t == MPI_DOUBLE) ((double *)b)[i] = (double)v;
  else if (t == MPI_SIGNED_CHAR) ((signed char *)b)[i] = (signed char)v;
  else if (t == MPI_SHORT) ((short *)b)[i] = (short)v;
  else abort();
}

static long long apply(MPI_Op op, long long a, long long b) {
  if (op == MPI_SUM) return a + b;
  if (op == MPI_PROD) return a * b;
  if (op == MPI_MIN) return a < b ? a : b;
  if (op == MPI_MAX) return a > b ? a : b;
  if (op == MPI_BAND) return a & b;
  if (op == MPI_BOR) return a | b;
  if (op == MPI_BXOR) return a ^ b;
  abort();
}

/* Element i of ranks lo..hi-1's contributions combined. */
static long long fold(MPI_Op op, int lo, int hi, int i, int salt) {
  long long acc = value(lo, i, salt);
  for (int r = lo + 1; r < hi; ++r) acc = apply(op, acc, value(r, i, salt));
  return acc;
}

static const char *op_name(MPI_Op op) {
  return op == MPI_SUM ? "SUM" : op == MPI_PROD ? "PROD" : op == MPI_MIN ? "MIN" : op == MPI_MAX ? "MAX"
       : op == MPI_BAND ? "BAND" : op == MPI_BOR ? "BOR" : "BXOR";
}

static const char *type_name(MPI_Datatype t) {
  static char name[MPI_MAX_OBJECT_NAME];
  int len;
  MPI_Type_get_name(t, name, &len);
  return name;
}

static void *fill(MPI_Datatype t, int n, int rank, int salt) {
  int size;
  MPI_Type_size(t, &size);
  void *b = calloc((size_t)n + 1, (size_t)size);
  for (int i = 0; i < n; ++i) put(t, b, i, value(rank, i, salt));
  return b;
}

/* ---- data movement -------------------------------------------------------- */
static void check_barrier(MPI_Comm comm) {
  path_begin("MPI_Barrier");
  MPI_Barrier(comm);
  path_end("MPI_Barrier", comm, CARFLOW);
}

/* A vector type (every other int) is not one run of bytes: the layer packs
   it, and the call still runs on carflow, whatever the other ranks use. */
static MPI_Datatype every_other_int(int n) {
  MPI_Datatype t;
  MPI_Type_vector(n, 1, 2, MPI_INT, &t);
  MPI_Type_commit(&t);
  return t;
}

static void check_bcast(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int counts[] = {1, 7, 5000, 70000};
  for (int root = 0; root < size; ++root) {
    for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
      const int n = counts[c];
      double *d = fill(MPI_DOUBLE, n, root, (int)c);
      if (rank != root) memset(d, 0, sizeof(double) * (size_t)n);
      path_begin("MPI_Bcast");
      MPI_Bcast(d, n, MPI_DOUBLE, root, comm);
      path_end("MPI_Bcast", comm, CARFLOW);
      int bad = 0;
      for (int i = 0; i < n; ++i) bad += d[i] != (double)value(root, i, (int)c);
      CHECK(bad == 0, "MPI_Bcast of %d doubles from %d: %d wrong", n, root, bad);
      free(d);
    }
    /* The root sends 6 contiguous ints, the others receive them every other int. */
    int buf[12] = {0};
    MPI_Datatype strided = every_other_int(6);
    for (int i = 0; i < 6 && rank == root; ++i) buf[i] = (int)value(root, i, 9);
    path_begin("MPI_Bcast");
    if (rank == root) MPI_Bcast(buf, 6, MPI_INT, root, comm);
    else MPI_Bcast(buf, 1, strided, root, comm);
    path_end("MPI_Bcast", comm, CARFLOW);
    int bad = 0;
    for (int i = 0; i < 6 && rank != root; ++i) bad += buf[2 * i] != value(root, i, 9) || buf[2 * i + 1] != 0;
    CHECK(bad == 0, "MPI_Bcast into a vector type from %d: %d wrong", root, bad);
    MPI_Type_free(&strided);
  }
}

static void check_gather_scatter(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const int n = 3;
  for (int root = 0; root < size; ++root) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      long *all = calloc((size_t)(n * size), sizeof(long));
      long *mine = fill(MPI_LONG, n, rank, root);
      if (in_place && rank == root) memcpy(all + rank * n, mine, sizeof(long) * n);
      path_begin("MPI_Gather");
      MPI_Gather(in_place && rank == root ? MPI_IN_PLACE : mine, n, MPI_LONG, all, n, MPI_LONG, root, comm);
      path_end("MPI_Gather", comm, CARFLOW);
      int bad = 0;
      for (int r = 0; r < size && rank == root; ++r)
        for (int i = 0; i < n; ++i) bad += all[r * n + i] != value(r, i, root);
      CHECK(bad == 0, "MPI_Gather to %d%s: %d wrong", root, in_place ? " in place" : "", bad);

      /* Scatter back what was gathered, block r to rank r. */
      long got[3] = {0, 0, 0};
      if (in_place && rank == root) memset(all + rank * n, 0, sizeof(long) * n);
      path_begin("MPI_Scatter");
      MPI_Scatter(all, n, MPI_LONG, in_place && rank == root ? MPI_IN_PLACE : got, n, MPI_LONG, root, comm);
      path_end("MPI_Scatter", comm, CARFLOW);
      bad = 0;
      for (int i = 0; i < n && !(in_place && rank == root); ++i) bad += got[i] != value(rank, i, root);
      CHECK(bad == 0, "MPI_Scatter from %d%s: %d wrong", root, in_place ? " in place" : "", bad);
      free(all);
      free(mine);
    }
  }
}

static void check_allgather_alltoall(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  for (int in_place = 0; in_place < 2; ++in_place) {
    const int n = 4;
    int *all = calloc((size_t)(n * size), sizeof(int));
    int *mine = fill(MPI_INT, n, rank, 5);
    if (in_place) memcpy(all + rank * n, mine, sizeof(int) * n);
    path_begin("MPI_Allgather");
    MPI_Allgather(in_place ? MPI_IN_PLACE : mine, n, MPI_INT, all, n, MPI_INT, comm);
    path_end("MPI_Allgather", comm, CARFLOW);
    int bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad += all[r * n + i] != value(r, i, 5);
    CHECK(bad == 0, "MPI_Allgather%s: %d wrong", in_place ? " in place" : "", bad);

    /* Alltoall: block j of rank i carries value(i, j * n + k). */
    int *send = fill(MPI_INT, n * size, rank, 6);
    int *recv = in_place ? send : calloc((size_t)(n * size), sizeof(int));
    path_begin("MPI_Alltoall");
    MPI_Alltoall(in_place ? MPI_IN_PLACE : send, n, MPI_INT, recv, n, MPI_INT, comm);
    path_end("MPI_Alltoall", comm, CARFLOW);
    bad = 0;
    for (int r = 0; r < size; ++r)
      for (int k = 0; k < n; ++k) bad += recv[r * n + k] != value(r, rank * n + k, 6);
    CHECK(bad == 0, "MPI_Alltoall%s: %d wrong", in_place ? " in place" : "", bad);
    if (!in_place) free(recv);
    free(send);
    free(all);
    free(mine);

    /* Allgatherv: rank r gives r + 1 doubles; packed, then spread with gaps. */
    int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
    for (int spread = 0; spread < 2; ++spread) {
      int at = 0;
      for (int r = 0; r < size; ++r) {
        counts[r] = r + 1;
        displs[r] = at;
        at += counts[r] + spread * 2;
      }
      double *v = calloc((size_t)at + 1, sizeof(double));
      double *me = fill(MPI_DOUBLE, rank + 1, rank, 8);
      if (in_place) memcpy(v + displs[rank], me, sizeof(double) * (size_t)(rank + 1));
      path_begin("MPI_Allgatherv");
      MPI_Allgatherv(in_place ? MPI_IN_PLACE : me, rank + 1, MPI_DOUBLE, v, counts, displs, MPI_DOUBLE, comm);
      path_end("MPI_Allgatherv", comm, CARFLOW);
      bad = 0;
      for (int r = 0; r < size; ++r)
        for (int i = 0; i < counts[r]; ++i) bad += v[displs[r] + i] != (double)value(r, i, 8);
      for (int r = 0; r < size && spread; ++r) bad += v[displs[r] + counts[r]] != 0.0;
      CHECK(bad == 0, "MPI_Allgatherv%s%s: %d wrong", in_place ? " in place" : "", spread ? " with gaps" : "",
            bad);
      free(v);
      free(me);
    }
    free(counts);
    free(displs);
  }
}

/* ---- reductions ----------------------------------------------------------- */
typedef struct {
  MPI_Datatype type;
  MPI_Op ops[7];
  int nops;
} TypeOps;

/* Every reduction of one (type, op) with n elements, roots all, in place
   and not; salt makes each call's data differ. */
static void check_one_reduction(MPI_Comm comm, MPI_Datatype t, MPI_Op op, int n, int salt) {
  int rank, size, tsize;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  MPI_Type_size(t, &tsize);
  const char *tn = type_name(t), *on = op_name(op);
  for (int in_place = 0; in_place < 2; ++in_place) {
    void *src = fill(t, n * size, rank, salt);
    void *dst = calloc((size_t)(n * size) + 1, (size_t)tsize);
    if (in_place) memcpy(dst, src, (size_t)(n * size * tsize));
    path_begin("MPI_Allreduce");
    MPI_Allreduce(in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Allreduce", comm, CARFLOW);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += get(t, dst, i) != fold(op, 0, size, i, salt);
    CHECK(bad == 0, "MPI_Allreduce %s %s n=%d%s: %d wrong", tn, on, n, in_place ? " in place" : "", bad);

    for (int root = 0; root < size; ++root) {
      memset(dst, 0, (size_t)(n * tsize));
      const int here = in_place && rank == root;
      if (here) memcpy(dst, src, (size_t)(n * tsize));
      path_begin("MPI_Reduce");
      MPI_Reduce(here ? MPI_IN_PLACE : src, dst, n, t, op, root, comm);
      path_end("MPI_Reduce", comm, CARFLOW);
      bad = 0;
      for (int i = 0; i < n && rank == root; ++i) bad += get(t, dst, i) != fold(op, 0, size, i, salt);
      CHECK(bad == 0, "MPI_Reduce %s %s to %d%s: %d wrong", tn, on, root, here ? " in place" : "", bad);
    }

    if (in_place) memcpy(dst, src, (size_t)(n * tsize));
    path_begin("MPI_Scan");
    MPI_Scan(in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Scan", comm, CARFLOW);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += get(t, dst, i) != fold(op, 0, rank + 1, i, salt);
    CHECK(bad == 0, "MPI_Scan %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);

    if (in_place) memcpy(dst, src, (size_t)(n * tsize));
    path_begin("MPI_Exscan");
    MPI_Exscan(in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Exscan", comm, CARFLOW);
    bad = 0;
    for (int i = 0; i < n && rank > 0; ++i) bad += get(t, dst, i) != fold(op, 0, rank, i, salt);
    CHECK(bad == 0, "MPI_Exscan %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);

    /* Reduce_scatter_block: block r of the P-block reduction to rank r. */
    if (in_place) memcpy(dst, src, (size_t)(n * size * tsize));
    path_begin("MPI_Reduce_scatter_block");
    MPI_Reduce_scatter_block(in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Reduce_scatter_block", comm, CARFLOW);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += get(t, dst, i) != fold(op, 0, size, rank * n + i, salt);
    CHECK(bad == 0, "MPI_Reduce_scatter_block %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);

    /* Reduce_scatter: rank r gets r % 3 elements (zeros allowed). */
    int *counts = malloc(sizeof(int) * (size_t)size), at = 0, mine_at = 0;
    for (int r = 0; r < size; ++r) {
      counts[r] = r % 3;
      if (r == rank) mine_at = at;
      at += counts[r];
    }
    if (at > 0) {
      if (in_place) memcpy(dst, src, (size_t)(at * tsize));
      path_begin("MPI_Reduce_scatter");
      MPI_Reduce_scatter(in_place ? MPI_IN_PLACE : src, dst, counts, t, op, comm);
      path_end("MPI_Reduce_scatter", comm, CARFLOW);
      bad = 0;
      for (int i = 0; i < counts[rank]; ++i) bad += get(t, dst, i) != fold(op, 0, size, mine_at + i, salt);
      CHECK(bad == 0, "MPI_Reduce_scatter %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);
    }
    free(counts);
    free(src);
    free(dst);
  }
}

static void check_minloc(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  /* Values repeat across ranks, so ties must keep the smaller index. */
  int in[4], out[4];
  for (int k = 0; k < 2; ++k) {
    in[2 * k] = (rank + k) % 2;
    in[2 * k + 1] = rank;
  }
  for (int m = 0; m < 2; ++m) {
    const MPI_Op op = m == 0 ? MPI_MINLOC : MPI_MAXLOC;
    path_begin("MPI_Allreduce");
    MPI_Allreduce(in, out, 2, MPI_2INT, op, comm);
    path_end("MPI_Allreduce", comm, CARFLOW);
    int bad = 0;
    for (int k = 0; k < 2; ++k) {
      int best = in[0], where = -1;
      for (int r = 0; r < size; ++r) {
        const int v = (r + k) % 2;
        if (where < 0 || (m == 0 ? v < best : v > best)) best = v, where = r;
      }
      bad += out[2 * k] != best || out[2 * k + 1] != where;
    }
    CHECK(bad == 0, "MPI_Allreduce MPI_2INT %s: %d wrong", m == 0 ? "MINLOC" : "MAXLOC", bad);
  }
}

static void check_reductions(MPI_Comm comm) {
  const TypeOps table[] = {
      {MPI_INT, {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX, MPI_BAND, MPI_BOR, MPI_BXOR}, 7},
      {MPI_UNSIGNED, {MPI_SUM, MPI_MAX, MPI_BXOR}, 3},
      {MPI_LONG, {MPI_SUM, MPI_MIN}, 2},
      {MPI_LONG_LONG, {MPI_SUM, MPI_BOR}, 2},
      {MPI_UNSIGNED_LONG, {MPI_PROD, MPI_BAND}, 2},
      {MPI_FLOAT, {MPI_SUM, MPI_MAX}, 2},
      {MPI_DOUBLE, {MPI_SUM, MPI_PROD, MPI_MIN}, 3},
      {MPI_SIGNED_CHAR, {MPI_SUM, MPI_MIN}, 2},
  };
  int salt = 0;
  for (size_t t = 0; t < sizeof table / sizeof table[0]; ++t)
    for (int o = 0; o < table[t].nops; ++o)
      for (int n = 1; n <= 1000; n *= 37) check_one_reduction(comm, table[t].type, table[t].ops[o], n, ++salt);
  check_minloc(comm);
}

/* ---- calls that stay with MPI ------------------------------------------- */
static void int_sum(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  for (int i = 0; i < *len; ++i) ((int *)inout)[i] += ((int *)in)[i];
}

static void pair_sum(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  for (int i = 0; i < 2 * *len; ++i) ((int *)inout)[i] += ((int *)in)[i];
}

static void check_fallbacks(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  const long long sum0 = fold(MPI_SUM, 0, size, 0, 1), sum1 = fold(MPI_SUM, 0, size, 1, 1);
  int in[2] = {(int)value(rank, 0, 1), (int)value(rank, 1, 1)}, out[2] = {0, 0};

  MPI_Op user;
  MPI_Op_create(int_sum, 1, &user);
  path_begin("MPI_Allreduce");
  MPI_Allreduce(in, out, 2, MPI_INT, user, comm);
  path_end("MPI_Allreduce", comm, PMPI);
  CHECK(out[0] == sum0 && out[1] == sum1, "MPI_Allreduce with a user op: wrong");
  MPI_Op_free(&user);

  /* A derived datatype (two ints) with a user op on it. */
  MPI_Datatype two;
  MPI_Type_contiguous(2, MPI_INT, &two);
  MPI_Type_commit(&two);
  MPI_Op pair;
  MPI_Op_create(pair_sum, 1, &pair);
  out[0] = out[1] = 0;
  path_begin("MPI_Reduce");
  MPI_Reduce(in, out, 1, two, pair, 0, comm);
  path_end("MPI_Reduce", comm, PMPI);
  CHECK(rank != 0 || (out[0] == sum0 && out[1] == sum1), "MPI_Reduce of a derived type: wrong");
  MPI_Op_free(&pair);
  MPI_Type_free(&two);

  /* A predefined type carflow has no type for, and a logical op. */
  short s = (short)value(rank, 0, 1), s_out = 0;
  path_begin("MPI_Allreduce");
  MPI_Allreduce(&s, &s_out, 1, MPI_SHORT, MPI_SUM, comm);
  path_end("MPI_Allreduce", comm, PMPI);
  CHECK(s_out == sum0, "MPI_Allreduce of MPI_SHORT: wrong");
  int flag = rank >= 0, all = 0;
  path_begin("MPI_Allreduce");
  MPI_Allreduce(&flag, &all, 1, MPI_INT, MPI_LAND, comm);
  path_end("MPI_Allreduce", comm, PMPI);
  CHECK(all == 1, "MPI_Allreduce MPI_LAND: wrong");

  /* Count 0. */
  path_begin("MPI_Bcast");
  MPI_Bcast(in, 0, MPI_INT, 0, comm);
  path_end("MPI_Bcast", comm, PMPI);
  path_begin("MPI_Allreduce");
  MPI_Allreduce(in, out, 0, MPI_INT, MPI_SUM, comm);
  path_end("MPI_Allreduce", comm, PMPI);
}

/* ---- the communicators --------------------------------------------------- */
static void run_all(MPI_Comm comm, const char *where) {
  g_where = where;
  check_barrier(comm);
  check_bcast(comm);
  check_gather_scatter(comm);
  check_allgather_alltoall(comm);
  check_reductions(comm);
  check_fallbacks(comm);
}

int main(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  g_calls = (calls_fn)dlsym(RTLD_DEFAULT, "cf_mpi_calls");
  uint64_t cf = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_calls != NULL) g_calls("MPI_Barrier", &cf, NULL);
  g_layer_on = cf == 1;

  run_all(MPI_COMM_WORLD, "world");
  MPI_Comm dup, split, shared, cart, single, dup_of_split;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run_all(dup, "dup");
  /* Reversed keys: the team's order must follow the communicator's. */
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, -g_world_rank, &split);
  run_all(split, "split");
  MPI_Comm_dup(split, &dup_of_split);
  run_all(dup_of_split, "dup of split");
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  run_all(shared, "split_type");
  int size, dims[1] = {0}, periods[1] = {1};
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dims[0] = size;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &cart);
  run_all(cart, "cart");
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank, 0, &single);
  run_all(single, "one process");
  MPI_Comm_free(&dup_of_split);
  MPI_Comm_free(&split);
  /* A freed communicator's team is gone; the others still work. */
  run_all(dup, "dup after frees");
  MPI_Comm_free(&dup);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&single);

  printf("mpi_layer_check: rank %d: layer %s, %ld checks, %ld failures\n", g_world_rank,
         g_layer_on ? "on" : "off", g_checks, g_failures);
  fflush(stdout);
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}
