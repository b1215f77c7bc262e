/* mpi_layer_check: every collective libcarflow_mpi intercepts, on
   MPI_COMM_WORLD and on communicators made by dup, split (reversed keys),
   split_type, cart_create and a split into single processes, with several
   datatypes, ops, roots and MPI_IN_PLACE, checked against a sequential
   computation on every rank. With the layer preloaded it also checks, call
   by call, which path served it (cf_mpi_calls, found with dlsym): carflow for
   what it serves, MPI for user ops, derived or unsupported reduction
   datatypes, logical ops, count 0 and communicators of one process.
   Without the layer (or with it turned off) the results are checked alone.
   Every check runs twice: with the blocking calls, then with their
   nonblocking forms (MPI_Ibcast ...), each completed by one of the wait and
   test calls in turn. Then several nonblocking collectives outstanding at
   once, completed in another order, and point-to-point receives (waited
   on, and blocking) while a large MPI_Iallreduce is pending, their senders
   sending only once their own MPI_Iallreduce is done (no deadlock: the
   wait moves the collective). The statuses of nonblocking collectives
   waited on together with point-to-point requests: no elements, not
   cancelled, and the receive's source, tag and count intact.
   With the argument "threads", under MPI_THREAD_MULTIPLE: a second thread
   waits on the nonblocking collectives the first one starts (MPI frees
   their requests on that thread) while the first starts more.

     mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_check [threads]

   Prints "mpi_layer_check: rank R: layer on|off, N checks, F failures";
   exits 1 when a check failed. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <mpi.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
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

/* ---- blocking or nonblocking -------------------------------------------- */
static int g_nonblocking;  /* checks call the MPI_I* forms */
static unsigned g_wait_kind;

/* Completes a request by the next of the nine wait and test calls. */
static void complete(MPI_Request *r) {
  MPI_Status st;
  int flag = 0, index = 0, out = 0, indices[1];
  int rc = MPI_SUCCESS;
  switch (g_wait_kind++ % 9) {
    case 0: rc = MPI_Wait(r, &st); break;
    case 1: rc = MPI_Waitall(1, r, MPI_STATUSES_IGNORE); break;
    case 2: rc = MPI_Waitany(1, r, &index, &st); break;
    case 3: rc = MPI_Waitsome(1, r, &out, indices, MPI_STATUSES_IGNORE); break;
    case 4: while (rc == MPI_SUCCESS && !flag) rc = MPI_Test(r, &flag, &st); break;
    case 5: while (rc == MPI_SUCCESS && !flag) rc = MPI_Testall(1, r, &flag, MPI_STATUSES_IGNORE); break;
    case 6: while (rc == MPI_SUCCESS && !flag) rc = MPI_Testany(1, r, &index, &flag, &st); break;
    case 7:
      do rc = MPI_Testsome(1, r, &out, indices, MPI_STATUSES_IGNORE);
      while (rc == MPI_SUCCESS && out == 0);
      break;
    default:
      while (rc == MPI_SUCCESS && !flag) rc = MPI_Request_get_status(*r, &flag, &st);
      if (rc == MPI_SUCCESS) rc = MPI_Wait(r, &st);
  }
  CHECK(rc == MPI_SUCCESS && *r == MPI_REQUEST_NULL, "wait kind %u: status %d, request %s", (g_wait_kind - 1) % 9,
        rc, *r == MPI_REQUEST_NULL ? "freed" : "live");
}

/* COLL(Bcast, bcast, args): MPI_Bcast(args), or MPI_Ibcast(args, &r) completed. */
#define COLL(Blocking, nonblocking, ...)                                                 \
  do {                                                                                   \
    if (g_nonblocking) {                                                                 \
      MPI_Request r_ = MPI_REQUEST_NULL;                                                 \
      MPI_I##nonblocking(__VA_ARGS__, &r_);                                              \
      complete(&r_);                                                                     \
    } else {                                                                             \
      MPI_##Blocking(__VA_ARGS__);                                                       \
    }                                                                                    \
  } while (0)

/* "MPI_Bcast", or "MPI_Ibcast" when the checks call the nonblocking forms. */
static const char *form(const char *fn) {
  static char name[64];
  if (!g_nonblocking) return fn;
  snprintf(name, sizeof name, "MPI_I%c%s", tolower((unsigned char)fn[4]), fn + 5);
  return name;
}

/* ---- which path served a call ------------------------------------------ */
enum { CARFLOW, PMPI };
static uint64_t g_cf0, g_mpi0;

static void path_begin(const char *fn) {
  if (g_calls != NULL) g_calls(form(fn), &g_cf0, &g_mpi0);
}

/* want: CARFLOW for a call the layer serves on a communicator of two or
   more processes (it goes to MPI otherwise), PMPI for one it must not. */
static void path_end(const char *fn, MPI_Comm comm, int want) {
  if (g_calls == NULL) return;
  fn = form(fn);
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
  COLL(Barrier, barrier, comm);
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
      COLL(Bcast, bcast, d, n, MPI_DOUBLE, root, comm);
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
    if (rank == root) COLL(Bcast, bcast, buf, 6, MPI_INT, root, comm);
    else COLL(Bcast, bcast, buf, 1, strided, root, comm);
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
      COLL(Gather, gather, in_place && rank == root ? MPI_IN_PLACE : mine, n, MPI_LONG, all, n, MPI_LONG, root, comm);
      path_end("MPI_Gather", comm, CARFLOW);
      int bad = 0;
      for (int r = 0; r < size && rank == root; ++r)
        for (int i = 0; i < n; ++i) bad += all[r * n + i] != value(r, i, root);
      CHECK(bad == 0, "MPI_Gather to %d%s: %d wrong", root, in_place ? " in place" : "", bad);

      /* Scatter back what was gathered, block r to rank r. */
      long got[3] = {0, 0, 0};
      if (in_place && rank == root) memset(all + rank * n, 0, sizeof(long) * n);
      path_begin("MPI_Scatter");
      COLL(Scatter, scatter, all, n, MPI_LONG, in_place && rank == root ? MPI_IN_PLACE : got, n, MPI_LONG, root, comm);
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
    COLL(Allgather, allgather, in_place ? MPI_IN_PLACE : mine, n, MPI_INT, all, n, MPI_INT, comm);
    path_end("MPI_Allgather", comm, CARFLOW);
    int bad = 0;
    for (int r = 0; r < size; ++r)
      for (int i = 0; i < n; ++i) bad += all[r * n + i] != value(r, i, 5);
    CHECK(bad == 0, "MPI_Allgather%s: %d wrong", in_place ? " in place" : "", bad);

    /* Alltoall: block j of rank i carries value(i, j * n + k). */
    int *send = fill(MPI_INT, n * size, rank, 6);
    int *recv = in_place ? send : calloc((size_t)(n * size), sizeof(int));
    path_begin("MPI_Alltoall");
    COLL(Alltoall, alltoall, in_place ? MPI_IN_PLACE : send, n, MPI_INT, recv, n, MPI_INT, comm);
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
      COLL(Allgatherv, allgatherv, in_place ? MPI_IN_PLACE : me, rank + 1, MPI_DOUBLE, v, counts, displs, MPI_DOUBLE, comm);
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

/* Gatherv, Scatterv, Alltoallv: blocks of 0, 1 and 2 ints, displacements
   packed and with gaps, in place and not, every root. */
static int layout(const int counts[], int *displs, int size, int gap) {
  int at = 0;
  for (int r = 0; r < size; ++r) {
    displs[r] = at;
    at += counts[r] + gap;
  }
  return at;
}

static void check_gatherv_scatterv(MPI_Comm comm, int root, int gap, int in_place) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int *counts = malloc(sizeof(int) * (size_t)size), *displs = malloc(sizeof(int) * (size_t)size);
  for (int r = 0; r < size; ++r) counts[r] = (r + root) % 3;
  const int at = layout(counts, displs, size, gap), salt = 20 + root + gap;
  const int here = in_place && rank == root;
  int *all = calloc((size_t)at + 1, sizeof(int));
  int *mine = fill(MPI_INT, counts[rank], rank, salt);
  if (here) memcpy(all + displs[root], mine, sizeof(int) * (size_t)counts[root]);
  path_begin("MPI_Gatherv");
  COLL(Gatherv, gatherv, here ? MPI_IN_PLACE : mine, counts[rank], MPI_INT, all, counts, displs, MPI_INT, root, comm);
  path_end("MPI_Gatherv", comm, CARFLOW);
  int bad = 0;
  for (int r = 0; r < size && rank == root; ++r) {
    for (int i = 0; i < counts[r]; ++i) bad += all[displs[r] + i] != value(r, i, salt);
    for (int i = 0; i < gap; ++i) bad += all[displs[r] + counts[r] + i] != 0;
  }
  CHECK(bad == 0, "MPI_Gatherv to %d%s%s: %d wrong", root, gap ? " with gaps" : "", here ? " in place" : "", bad);

  /* Scatter the gathered blocks back. */
  int got[3] = {-1, -1, -1};
  path_begin("MPI_Scatterv");
  COLL(Scatterv, scatterv, all, counts, displs, MPI_INT, here ? MPI_IN_PLACE : got, counts[rank], MPI_INT, root,
       comm);
  path_end("MPI_Scatterv", comm, CARFLOW);
  bad = 0;
  for (int i = 0; i < counts[rank] && !here; ++i) bad += got[i] != value(rank, i, salt);
  for (int i = counts[rank]; i < 3 && !here; ++i) bad += got[i] != -1;
  CHECK(bad == 0, "MPI_Scatterv from %d%s%s: %d wrong", root, gap ? " with gaps" : "", here ? " in place" : "", bad);
  free(all);
  free(mine);
  free(counts);
  free(displs);
}

/* Rank i sends (i + j) % 3 doubles to rank j (symmetric, so in place works):
   element k of that block is value(i, 10 * j + k). */
static void check_alltoallv(MPI_Comm comm, int gap, int in_place) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int *counts = malloc(sizeof(int) * (size_t)size), *sdispls = malloc(sizeof(int) * (size_t)size);
  int *rdispls = malloc(sizeof(int) * (size_t)size);
  for (int j = 0; j < size; ++j) counts[j] = (rank + j) % 3;
  const int sat = layout(counts, sdispls, size, 0), rat = layout(counts, rdispls, size, gap);
  double *send = calloc((size_t)sat + 1, sizeof(double)), *recv = calloc((size_t)rat + 1, sizeof(double));
  double *out = in_place ? recv : send;
  const int *out_displs = in_place ? rdispls : sdispls;
  for (int j = 0; j < size; ++j)
    for (int k = 0; k < counts[j]; ++k) out[out_displs[j] + k] = (double)value(rank, 10 * j + k, 31);
  path_begin("MPI_Alltoallv");
  COLL(Alltoallv, alltoallv, in_place ? MPI_IN_PLACE : send, counts, sdispls, MPI_DOUBLE, recv, counts, rdispls,
       MPI_DOUBLE, comm);
  path_end("MPI_Alltoallv", comm, CARFLOW);
  int bad = 0;
  for (int j = 0; j < size; ++j) {
    for (int k = 0; k < counts[j]; ++k) bad += recv[rdispls[j] + k] != (double)value(j, 10 * rank + k, 31);
    for (int k = 0; k < gap; ++k) bad += recv[rdispls[j] + counts[j] + k] != 0.0;
  }
  CHECK(bad == 0, "MPI_Alltoallv%s%s: %d wrong", gap ? " with gaps" : "", in_place ? " in place" : "", bad);
  free(send);
  free(recv);
  free(counts);
  free(sdispls);
  free(rdispls);
}

static void check_v_forms(MPI_Comm comm) {
  int size;
  MPI_Comm_size(comm, &size);
  for (int gap = 0; gap < 3; gap += 2) {
    for (int in_place = 0; in_place < 2; ++in_place) {
      for (int root = 0; root < size; ++root) check_gatherv_scatterv(comm, root, gap, in_place);
      check_alltoallv(comm, gap, in_place);
    }
  }
}

/* Several nonblocking collectives outstanding at once (one on MPI: a user
   op), completed together, last started first. */
static void int_max(void *in, void *inout, int *len, MPI_Datatype *t) {
  (void)t;
  for (int i = 0; i < *len; ++i)
    if (((int *)in)[i] > ((int *)inout)[i]) ((int *)inout)[i] = ((int *)in)[i];
}

static void check_outstanding(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { N = 1000 };
  double *src = fill(MPI_DOUBLE, N, rank, 50), *sum = calloc(N, sizeof(double));
  long *b = fill(MPI_LONG, N, size - 1, 51);
  if (rank != size - 1) memset(b, 0, sizeof(long) * N);
  int mine = rank * 3, *all = calloc((size_t)size, sizeof(int)), top = 0, one = rank;
  MPI_Op user;
  MPI_Op_create(int_max, 1, &user);
  MPI_Request r[5];
  MPI_Iallreduce(src, sum, N, MPI_DOUBLE, MPI_SUM, comm, &r[0]);
  MPI_Ibcast(b, N, MPI_LONG, size - 1, comm, &r[1]);
  MPI_Ibarrier(comm, &r[2]);
  MPI_Iallreduce(&one, &top, 1, MPI_INT, user, comm, &r[3]);
  MPI_Iallgather(&mine, 1, MPI_INT, all, 1, MPI_INT, comm, &r[4]);
  MPI_Request reversed[5] = {r[4], r[3], r[2], r[1], r[0]};
  if (rank % 2 == 0) {
    MPI_Waitall(5, reversed, MPI_STATUSES_IGNORE);
  } else {
    int left = 5, out, indices[5];
    while (left > 0) {
      MPI_Waitsome(5, reversed, &out, indices, MPI_STATUSES_IGNORE);
      left -= out;
    }
  }
  int bad = 0;
  for (int i = 0; i < N; ++i) bad += sum[i] != (double)fold(MPI_SUM, 0, size, i, 50) || b[i] != value(size - 1, i, 51);
  for (int r2 = 0; r2 < size; ++r2) bad += all[r2] != r2 * 3;
  bad += top != size - 1;
  for (int i = 0; i < 5; ++i) bad += reversed[i] != MPI_REQUEST_NULL;
  CHECK(bad == 0, "five outstanding nonblocking collectives: %d wrong", bad);
  MPI_Op_free(&user);
  free(src);
  free(sum);
  free(b);
  free(all);
}

/* Nonblocking collectives in one MPI_Waitall with a receive and a send, over
   many rounds (the layer reuses its records): every result right, the
   collectives' statuses empty (no elements, not cancelled), the receive's
   source, tag and count its own. */
static void check_statuses(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  int bad = 0;
  for (int round = 0; round < 50; ++round) {
    const int root = round % size, to = (rank + 1) % size, from = (rank + size - 1) % size, tag = 7 + round;
    long b = rank == root ? 1000 + round : -1;
    double mine = rank + round, sum = 0;
    int got = -1, sent = rank * 100 + round;
    MPI_Request r[4];
    MPI_Status st[4];
    MPI_Irecv(&got, 1, MPI_INT, from, tag, comm, &r[0]);
    MPI_Ibcast(&b, 1, MPI_LONG, root, comm, &r[1]);
    MPI_Isend(&sent, 1, MPI_INT, to, tag, comm, &r[2]);
    MPI_Iallreduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, comm, &r[3]);
    bad += MPI_Waitall(4, r, st) != MPI_SUCCESS;
    int n = -1;
    MPI_Get_count(&st[0], MPI_INT, &n);
    bad += got != from * 100 + round || st[0].MPI_SOURCE != from || st[0].MPI_TAG != tag || n != 1;
    bad += b != 1000 + round || sum != size * (size - 1) / 2.0 + (double)size * round;
    for (int i = 1; g_layer_on && i < 4; i += 2) {
      int cancelled = 1;
      MPI_Get_count(&st[i], MPI_BYTE, &n);
      MPI_Test_cancelled(&st[i], &cancelled);
      bad += n != 0 || cancelled;
    }
  }
  CHECK(bad == 0, "statuses of collectives waited on with point-to-point: %d wrong", bad);
}

/* Rank 0 waits for a message from every other rank while a 1.6 MB
   MPI_Iallreduce is pending; each of them sends only once its own
   MPI_Iallreduce is done, which needs rank 0's part of the collective to
   move while rank 0 waits on the receive: MPI_Wait and MPI_Waitany on
   MPI_Irecv, then (blocking) MPI_Recv and MPI_Sendrecv. */
static void check_p2p_while_pending(MPI_Comm comm, int blocking) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  enum { N = 200000 };
  double *src = fill(MPI_DOUBLE, N, rank, 60), *sum = calloc(N, sizeof(double));
  MPI_Request coll;
  g_nonblocking = 1;
  path_begin("MPI_Allreduce");
  MPI_Iallreduce(src, sum, N, MPI_DOUBLE, MPI_SUM, comm, &coll);
  path_end("MPI_Allreduce", comm, CARFLOW);
  g_nonblocking = 0;
  int bad = 0;
  if (rank == 0) {
    for (int r = 1; r < size; ++r) {
      int got = -1, index, none = 0;
      MPI_Request recv;
      if (blocking && r % 2) {
        MPI_Recv(&got, 1, MPI_INT, r, 77, comm, MPI_STATUS_IGNORE);
      } else if (blocking) {
        MPI_Sendrecv(&none, 0, MPI_INT, r, 78, &got, 1, MPI_INT, r, 77, comm, MPI_STATUS_IGNORE);
      } else {
        MPI_Irecv(&got, 1, MPI_INT, r, 77, comm, &recv);
        if (r % 2) MPI_Wait(&recv, MPI_STATUS_IGNORE);
        else MPI_Waitany(1, &recv, &index, MPI_STATUS_IGNORE);
      }
      bad += got != r;
    }
    MPI_Wait(&coll, MPI_STATUS_IGNORE);
  } else {
    MPI_Wait(&coll, MPI_STATUS_IGNORE);
    MPI_Send(&rank, 1, MPI_INT, 0, 77, comm);
    if (blocking && rank % 2 == 0) MPI_Recv(NULL, 0, MPI_INT, 0, 78, comm, MPI_STATUS_IGNORE);
  }
  for (int i = 0; i < N; ++i) bad += sum[i] != (double)fold(MPI_SUM, 0, size, i, 60);
  CHECK(bad == 0, "a %s receive waited on while MPI_Iallreduce is pending: %d wrong",
        blocking ? "blocking" : "nonblocking", bad);
  free(src);
  free(sum);
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
    COLL(Allreduce, allreduce, in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Allreduce", comm, CARFLOW);
    int bad = 0;
    for (int i = 0; i < n; ++i) bad += get(t, dst, i) != fold(op, 0, size, i, salt);
    CHECK(bad == 0, "MPI_Allreduce %s %s n=%d%s: %d wrong", tn, on, n, in_place ? " in place" : "", bad);

    for (int root = 0; root < size; ++root) {
      memset(dst, 0, (size_t)(n * tsize));
      const int here = in_place && rank == root;
      if (here) memcpy(dst, src, (size_t)(n * tsize));
      path_begin("MPI_Reduce");
      COLL(Reduce, reduce, here ? MPI_IN_PLACE : src, dst, n, t, op, root, comm);
      path_end("MPI_Reduce", comm, CARFLOW);
      bad = 0;
      for (int i = 0; i < n && rank == root; ++i) bad += get(t, dst, i) != fold(op, 0, size, i, salt);
      CHECK(bad == 0, "MPI_Reduce %s %s to %d%s: %d wrong", tn, on, root, here ? " in place" : "", bad);
    }

    if (in_place) memcpy(dst, src, (size_t)(n * tsize));
    path_begin("MPI_Scan");
    COLL(Scan, scan, in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Scan", comm, CARFLOW);
    bad = 0;
    for (int i = 0; i < n; ++i) bad += get(t, dst, i) != fold(op, 0, rank + 1, i, salt);
    CHECK(bad == 0, "MPI_Scan %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);

    if (in_place) memcpy(dst, src, (size_t)(n * tsize));
    path_begin("MPI_Exscan");
    COLL(Exscan, exscan, in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
    path_end("MPI_Exscan", comm, CARFLOW);
    bad = 0;
    for (int i = 0; i < n && rank > 0; ++i) bad += get(t, dst, i) != fold(op, 0, rank, i, salt);
    CHECK(bad == 0, "MPI_Exscan %s %s%s: %d wrong", tn, on, in_place ? " in place" : "", bad);

    /* Reduce_scatter_block: block r of the P-block reduction to rank r. */
    if (in_place) memcpy(dst, src, (size_t)(n * size * tsize));
    path_begin("MPI_Reduce_scatter_block");
    COLL(Reduce_scatter_block, reduce_scatter_block, in_place ? MPI_IN_PLACE : src, dst, n, t, op, comm);
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
      COLL(Reduce_scatter, reduce_scatter, in_place ? MPI_IN_PLACE : src, dst, counts, t, op, comm);
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
    COLL(Allreduce, allreduce, in, out, 2, MPI_2INT, op, comm);
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
  COLL(Allreduce, allreduce, in, out, 2, MPI_INT, user, comm);
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
  COLL(Reduce, reduce, in, out, 1, two, pair, 0, comm);
  path_end("MPI_Reduce", comm, PMPI);
  CHECK(rank != 0 || (out[0] == sum0 && out[1] == sum1), "MPI_Reduce of a derived type: wrong");
  MPI_Op_free(&pair);
  MPI_Type_free(&two);

  /* A predefined type carflow has no type for, and a logical op. */
  short s = (short)value(rank, 0, 1), s_out = 0;
  path_begin("MPI_Allreduce");
  COLL(Allreduce, allreduce, &s, &s_out, 1, MPI_SHORT, MPI_SUM, comm);
  path_end("MPI_Allreduce", comm, PMPI);
  CHECK(s_out == sum0, "MPI_Allreduce of MPI_SHORT: wrong");
  int flag = rank >= 0, all = 0;
  path_begin("MPI_Allreduce");
  COLL(Allreduce, allreduce, &flag, &all, 1, MPI_INT, MPI_LAND, comm);
  path_end("MPI_Allreduce", comm, PMPI);
  CHECK(all == 1, "MPI_Allreduce MPI_LAND: wrong");

  /* Count 0. */
  path_begin("MPI_Bcast");
  COLL(Bcast, bcast, in, 0, MPI_INT, 0, comm);
  path_end("MPI_Bcast", comm, PMPI);
  path_begin("MPI_Allreduce");
  COLL(Allreduce, allreduce, in, out, 0, MPI_INT, MPI_SUM, comm);
  path_end("MPI_Allreduce", comm, PMPI);
}

/* ---- the communicators --------------------------------------------------- */
static void run_all(MPI_Comm comm, const char *where) {
  g_where = where;
  check_barrier(comm);
  check_bcast(comm);
  check_gather_scatter(comm);
  check_allgather_alltoall(comm);
  check_v_forms(comm);
  check_reductions(comm);
  check_fallbacks(comm);
}

/* Every check blocking, then nonblocking. */
static void run_both(MPI_Comm comm, const char *where) {
  for (g_nonblocking = 0; g_nonblocking < 2; ++g_nonblocking) run_all(comm, where);
  g_nonblocking = 0;
  check_outstanding(comm);
  check_statuses(comm);
}

/* ---- another thread waits --------------------------------------------- */
enum { THREAD_CALLS = 2000, THREAD_AHEAD = 16 };
static MPI_Request g_thread_requests[THREAD_CALLS];
static atomic_int g_started, g_waited;

static void *wait_each(void *unused) {
  (void)unused;
  for (int i = 0; i < THREAD_CALLS; ++i) {
    while (atomic_load(&g_started) <= i) sched_yield();
    MPI_Wait(&g_thread_requests[i], MPI_STATUS_IGNORE);
    atomic_store(&g_waited, i + 1);
  }
  return NULL;
}

/* MPI_Init's thread moves the collectives (MPI_Testall of no request) while
   at most THREAD_AHEAD of them are left to the other thread's waits. */
static void progress_until_waited(int target) {
  while (atomic_load(&g_waited) < target) {
    int flag = 0;
    MPI_Testall(0, NULL, &flag, MPI_STATUSES_IGNORE);
  }
}

static void check_other_thread_waits(MPI_Comm comm) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  long *values = calloc(THREAD_CALLS, sizeof(long));
  double *mine = calloc(THREAD_CALLS, sizeof(double)), *sums = calloc(THREAD_CALLS, sizeof(double));
  pthread_t waiter;
  pthread_create(&waiter, NULL, wait_each, NULL);
  for (int i = 0; i < THREAD_CALLS; ++i) {
    if (i % 2 == 0) {
      values[i] = rank == i % size ? i : -1;
      MPI_Ibcast(&values[i], 1, MPI_LONG, i % size, comm, &g_thread_requests[i]);
    } else {
      mine[i] = rank + i;
      MPI_Iallreduce(&mine[i], &sums[i], 1, MPI_DOUBLE, MPI_SUM, comm, &g_thread_requests[i]);
    }
    atomic_store(&g_started, i + 1);
    progress_until_waited(i + 1 - THREAD_AHEAD);
  }
  progress_until_waited(THREAD_CALLS);
  pthread_join(waiter, NULL);
  int bad = 0;
  for (int i = 0; i < THREAD_CALLS; ++i) {
    bad += i % 2 == 0 ? values[i] != i : sums[i] != size * (size - 1) / 2.0 + (double)size * i;
  }
  CHECK(bad == 0, "nonblocking collectives waited on by another thread: %d of %d wrong", bad, THREAD_CALLS);
  free(values);
  free(mine);
  free(sums);
}

static int run_threads(int argc, char **argv) {
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  g_calls = (calls_fn)dlsym(RTLD_DEFAULT, "cf_mpi_calls");
  uint64_t cf = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_calls != NULL) g_calls("MPI_Barrier", &cf, NULL);
  g_layer_on = cf == 1;
  g_where = "threads";
  CHECK(provided == MPI_THREAD_MULTIPLE, "MPI_THREAD_MULTIPLE not provided (%d)", provided);
  if (provided == MPI_THREAD_MULTIPLE) check_other_thread_waits(MPI_COMM_WORLD);
  printf("mpi_layer_check: rank %d: layer %s, %ld checks, %ld failures\n", g_world_rank,
         g_layer_on ? "on" : "off", g_checks, g_failures);
  fflush(stdout);
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "threads") == 0) return run_threads(argc, argv);
  int provided;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_world_rank);
  g_calls = (calls_fn)dlsym(RTLD_DEFAULT, "cf_mpi_calls");
  uint64_t cf = 0;
  MPI_Barrier(MPI_COMM_WORLD);
  if (g_calls != NULL) g_calls("MPI_Barrier", &cf, NULL);
  g_layer_on = cf == 1;

  run_both(MPI_COMM_WORLD, "world");
  check_p2p_while_pending(MPI_COMM_WORLD, 0);
  check_p2p_while_pending(MPI_COMM_WORLD, 1);
  MPI_Comm dup, split, shared, cart, single, dup_of_split;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  run_both(dup, "dup");
  /* Reversed keys: the team's order must follow the communicator's. */
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, -g_world_rank, &split);
  run_both(split, "split");
  MPI_Comm_dup(split, &dup_of_split);
  run_both(dup_of_split, "dup of split");
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &shared);
  run_both(shared, "split_type");
  int size, dims[1] = {0}, periods[1] = {1};
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  dims[0] = size;
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 1, &cart);
  run_both(cart, "cart");
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank, 0, &single);
  run_both(single, "one process");
  MPI_Comm_free(&dup_of_split);
  MPI_Comm_free(&split);
  /* A freed communicator's team is gone; the others still work. */
  run_both(dup, "dup after frees");
  MPI_Comm_free(&dup);
  /* The layer keeps the last communicator's team; dup was it. One made next
     (Open MPI may hand it dup's handle) of other members gets its own. */
  MPI_Comm after_free;
  MPI_Comm_split(MPI_COMM_WORLD, g_world_rank % 2, -g_world_rank, &after_free);
  run_both(after_free, "split made after freeing the last one used");
  MPI_Comm_free(&after_free);
  MPI_Comm_free(&shared);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&single);

  printf("mpi_layer_check: rank %d: layer %s, %ld checks, %ld failures\n", g_world_rank,
         g_layer_on ? "on" : "off", g_checks, g_failures);
  fflush(stdout);
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}
