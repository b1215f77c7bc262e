/* Refused calls across processes: run under cfrun (`cfrun -n N [--images K]
   mp_refused`). For each class of argument error (data movement, computation,
   m forms, v forms, teams, blocking forms, an aggregate's member), every image
   makes the bad call, which must return CF_COLL_INVALID_HANDLE (or
   CF_ERR_BAD_ARG) with cf_last_status() CF_ERR_BAD_ARG; then every image runs
   one collective of every kind, each checked against a sequential reference
   computed here. cf_finalize must return CF_OK on every node.

   A C program on the public API only, built twice (tests/BUILD): against the
   static library and against libcarflow.so, the way users link it. Prints
   "refused: node N: C classes, K checks, F failures" and exits 1 on any
   failure. With one image per node (CF_IMAGES unset or 1) the main thread
   is the image (cf_coll_init); with more, cf_run_images starts them. */
#include <carflow/carflow.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define kFlags (CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS)
#define kSum CF_BUILTIN(CF_OP_SUM, CF_DT_UINT32)
#define kMaxImages 64
#define kElems 4 /* uint32 elements per image in the vector collectives */

static int g_failures[kMaxImages], g_checks[kMaxImages];

static void failed(cf_image_t me, const char *what, const char *detail) {
  if (g_failures[me]++ < 10) printf("FAIL image %u: %s: %s\n", me, what, detail);
}

/* The value image i contributes at position j of collective round r. */
static uint32_t value(uint32_t r, uint32_t i, uint32_t j) { return r * 1000003u + i * 1009u + j * 7u + 1; }

static void expect_words(cf_image_t me, const char *what, int rc, const uint32_t *got, const uint32_t *want,
                         size_t n) {
  char detail[160];
  g_checks[me]++;
  if (rc != CF_OK) {
    snprintf(detail, sizeof detail, "status %d: %s", rc, cf_last_error());
    failed(me, what, detail);
    return;
  }
  for (size_t k = 0; k < n; ++k) {
    if (got[k] != want[k]) {
      snprintf(detail, sizeof detail, "word %zu is %u, want %u", k, got[k], want[k]);
      failed(me, what, detail);
      return;
    }
  }
}

/* One collective of every kind on CF_TEAM_ALL, round r, each destination
   checked (P <= kMaxImages). */
static void every_kind(cf_image_t me, uint32_t r) {
  const uint32_t P = cf_images(), root = r % P;
  uint32_t src[kMaxImages * kElems] = {0}, dst[kMaxImages * kElems] = {0}, want[kMaxImages * kElems] = {0};
  uint32_t i, j;

  src[0] = value(r, me, 0);
  for (j = 0; j < P; ++j) want[j] = value(r, root, 0);
  expect_words(me, "broadcast", cf_coll_broadcast(CF_TEAM_ALL, dst, root, src, 4, kFlags), dst, want, 1);

  for (j = 0; j < P; ++j) src[j] = value(r, me, j);
  want[0] = value(r, root, me);
  expect_words(me, "scatter", cf_coll_scatter(CF_TEAM_ALL, dst, root, src, 4, kFlags), dst, want, 1);

  src[0] = value(r, me, 0);
  for (j = 0; j < P; ++j) want[j] = value(r, j, 0);
  memset(dst, 0, sizeof dst);
  {
    const int rc = cf_coll_gather(CF_TEAM_ALL, root, dst, src, 4, kFlags);
    if (me == root) expect_words(me, "gather", rc, dst, want, P);
    else expect_words(me, "gather", rc, want, want, 0);
  }
  expect_words(me, "gather_all", cf_coll_gather_all(CF_TEAM_ALL, dst, src, 4, kFlags), dst, want, P);

  for (j = 0; j < P; ++j) {
    src[j] = value(r, me, j);
    want[j] = value(r, j, me);
  }
  expect_words(me, "exchange", cf_coll_exchange(CF_TEAM_ALL, dst, src, 4, kFlags), dst, want, P);

  {
    cf_image_t perm[kMaxImages];
    for (i = 0; i < P; ++i) perm[i] = (i + 1 + r) % P;
    src[0] = value(r, me, 0);
    for (i = 0; i < P; ++i) {
      if (perm[i] == me) want[0] = value(r, i, 0);
    }
    expect_words(me, "permute", cf_coll_permute(CF_TEAM_ALL, dst, src, 4, perm, kFlags), dst, want, 1);
  }

  expect_words(me, "barrier", cf_coll_barrier(CF_TEAM_ALL, kFlags), want, want, 0);

  /* Vectors of kElems uint32: sums over images, prefixes, blocks. */
  for (j = 0; j < kElems; ++j) {
    src[j] = value(r, me, j);
    want[j] = 0;
    for (i = 0; i < P; ++i) want[j] += value(r, i, j);
  }
  expect_words(me, "allreduce", cf_coll_allreduce(CF_TEAM_ALL, dst, src, 4, kElems, kSum, 0, kFlags), dst, want,
               kElems);
  {
    const int rc = cf_coll_reduce_vec(CF_TEAM_ALL, root, dst, src, 4, kElems, kSum, 0, kFlags);
    expect_words(me, "reduce_vec", rc, me == root ? dst : want, want, kElems);
  }
  for (j = 0; j < kElems; ++j) {
    want[j] = 0;
    for (i = 0; i <= me; ++i) want[j] += value(r, i, j);
  }
  expect_words(me, "scan", cf_coll_scan(CF_TEAM_ALL, dst, src, 4, kElems, kSum, 0, kFlags), dst, want, kElems);

  for (j = 0; j < P * 2; ++j) src[j] = value(r, me, j);
  for (j = 0; j < 2; ++j) {
    want[j] = 0;
    for (i = 0; i < P; ++i) want[j] += value(r, i, me * 2 + j);
  }
  expect_words(me, "reduce_scatter", cf_coll_reduce_scatter(CF_TEAM_ALL, dst, src, 4, 2, kSum, 0, kFlags), dst,
               want, 2);

  /* Seed style, cyclic layout: global element k (of 2P) is value(r, k, 0),
     held by image k % P at local index k / P. */
  for (j = 0; j < 2; ++j) src[j] = value(r, me + j * P, 0);
  want[0] = 0;
  for (i = 0; i < 2 * P; ++i) want[0] += value(r, i, 0);
  {
    const int rc = cf_coll_reduce(CF_TEAM_ALL, root, dst, src, 1, 0, 4, 2 * P, kSum, 0, kFlags);
    expect_words(me, "reduce", rc, me == root ? dst : want, want, 1);
  }
  for (j = 0; j < 2; ++j) {
    want[j] = 0;
    for (i = 0; i <= me + j * P; ++i) want[j] += value(r, i, 0);
  }
  expect_words(me, "prefix_reduce",
               cf_coll_prefix_reduce(CF_TEAM_ALL, dst, 1, 0, src, 1, 0, 4, 2 * P, kSum, 0, kFlags), dst, want, 2);
}

/* One class of refusal: every image makes the call (it returns a handle;
   blocking ones return a status, as `status`). */
typedef struct {
  const char *name;
  int (*call)(cf_image_t me, char *buf, char *other);
} Refusal;

static int handle_status(cf_coll_handle_t h) { return h == CF_COLL_INVALID_HANDLE ? cf_last_status() : 99; }

/* Data movement. */
static int r_nbytes0(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_broadcast_nb(CF_TEAM_ALL, o, 0, b, 0, kFlags)); }
static int r_root(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_broadcast_nb(CF_TEAM_ALL, o, cf_images() + 3, b, 1, kFlags)); }
static int r_two_in(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_broadcast_nb(CF_TEAM_ALL, o, 0, b, 1, kFlags | CF_COLL_IN_NOSYNC)); }
static int r_no_out(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_scatter_nb(CF_TEAM_ALL, o, 0, b, 1, kFlags & ~CF_COLL_OUT_MYSYNC)); }
static int r_dst_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_broadcast_nb(CF_TEAM_ALL, NULL, 0, b, 1, kFlags)); }
static int r_unknown_flag(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_scatter_nb(CF_TEAM_ALL, o, 0, b, 1, kFlags | (1 << 30))); }
static int r_gather_root(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_gather_nb(CF_TEAM_ALL, cf_images(), o, b, 1, kFlags)); }
static int r_overlap(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_exchange_nb(CF_TEAM_ALL, b + 1, b, 1, kFlags)); }
static int r_huge(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_gather_all_nb(CF_TEAM_ALL, o, b, (size_t)1 << 50, kFlags)); }
static int r_perm_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_permute_nb(CF_TEAM_ALL, o, b, 1, NULL, kFlags)); }
static int r_perm_dup(cf_image_t me, char *b, char *o) {
  cf_image_t perm[kMaxImages] = {0};  /* every image sends to 0 */
  return handle_status(cf_coll_permute_nb(CF_TEAM_ALL, o, b, 1, perm, kFlags));
}
/* m forms. */
static int r_m_null_list(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_broadcastm_nb(CF_TEAM_ALL, NULL, 0, b, 1, kFlags)); }
static int r_m_local_all(cf_image_t me, char *b, char *o) {
  void *list[kMaxImages];
  for (int i = 0; i < kMaxImages; ++i) list[i] = o;
  return handle_status(cf_coll_gather_allm_nb(CF_TEAM_ALL, list, list, 1, kFlags));
}
/* v forms. */
static int r_v_counts_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_scatterv_nb(CF_TEAM_ALL, o, 0, b, NULL, NULL, kFlags)); }
static int r_v_huge(cf_image_t me, char *b, char *o) {
  size_t counts[kMaxImages];
  for (int i = 0; i < kMaxImages; ++i) counts[i] = (size_t)1 << 60;
  return handle_status(cf_coll_gather_allv_nb(CF_TEAM_ALL, o, b, counts, NULL, kFlags));
}
/* Computation. */
static int r_elem0(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_allreduce_nb(CF_TEAM_ALL, o, b, 0, 1, kSum, 0, kFlags)); }
static int r_count0(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_reduce_nb(CF_TEAM_ALL, 0, o, b, 1, 0, 4, 0, kSum, 0, kFlags)); }
static int r_func(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_allreduce_nb(CF_TEAM_ALL, o, b, 4, 1, 5, 0, kFlags)); }
static int r_type_size(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_scan_nb(CF_TEAM_ALL, o, b, 3, 1, kSum, 0, kFlags)); }
static int r_float_band(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_reduce_scatter_nb(CF_TEAM_ALL, o, b, 4, 1, CF_BUILTIN(CF_OP_BAND, CF_DT_FLOAT), 0, kFlags)); }
static int r_vec_root(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_reduce_vec_nb(CF_TEAM_ALL, cf_images() + 1, o, b, 4, 1, kSum, 0, kFlags)); }
static int r_misaligned(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_allreduce_nb(CF_TEAM_ALL, o + 1, b, 4, 1, kSum, 0, kFlags)); }
static int r_prefix_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_prefix_reduce_nb(CF_TEAM_ALL, o, 1, 0, NULL, 1, 0, 4, 2 * cf_images(), kSum, 0, kFlags)); }
static int r_reducem_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_reducem_nb(CF_TEAM_ALL, 0, o, NULL, 1, 0, 4, 1, kSum, 0, kFlags)); }
/* Teams. */
static int r_team_null(cf_image_t me, char *b, char *o) { return handle_status(cf_coll_barrier_nb(CF_TEAM_NULL, kFlags)); }
static int r_team_freed(cf_image_t me, char *b, char *o) {
  cf_team_t t = CF_TEAM_NULL;
  if (cf_team_split(CF_TEAM_ALL, 0, (int)me, &t) != CF_OK || cf_team_free(t) != CF_OK) return 98;
  return handle_status(cf_coll_broadcast_nb(t, o, 0, b, 1, kFlags));
}
static int r_split_null(cf_image_t me, char *b, char *o) { return cf_team_split(CF_TEAM_ALL, 0, (int)me, NULL); }
/* Blocking forms and aggregates. */
static int r_blocking_aggregate(cf_image_t me, char *b, char *o) { return cf_coll_exchange(CF_TEAM_ALL, o, b, 1, kFlags | CF_COLL_AGGREGATE); }
static int r_blocking_flags(cf_image_t me, char *b, char *o) { return cf_coll_barrier(CF_TEAM_ALL, CF_COLL_IN_MYSYNC); }
/* An aggregate whose middle member is refused: the others still run as one. */
static int r_aggregate_member(cf_image_t me, char *b, char *o) {
  uint32_t x[3] = {0, 0, 0}, mine = value(7, me, 0);
  cf_coll_broadcast_nb(CF_TEAM_ALL, &x[0], 0, &mine, 4, kFlags | CF_COLL_AGGREGATE);
  const int status = handle_status(cf_coll_broadcast_nb(CF_TEAM_ALL, &x[1], 0, &mine, 0, kFlags | CF_COLL_AGGREGATE));
  const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, &x[2], cf_images() - 1, &mine, 4, kFlags);
  const uint32_t want[3] = {value(7, 0, 0), 0, value(7, cf_images() - 1, 0)};
  expect_words(me, "aggregate around the refused member", h == CF_COLL_INVALID_HANDLE ? cf_last_status()
                                                                                       : cf_coll_wait_sync(h),
               x, want, 3);
  return status;
}

static const Refusal kRefusals[] = {
    {"broadcast nbytes 0", r_nbytes0},
    {"broadcast root out of range", r_root},
    {"broadcast two IN flags", r_two_in},
    {"scatter no OUT flag", r_no_out},
    {"broadcast dst NULL", r_dst_null},
    {"scatter unknown flag bit", r_unknown_flag},
    {"gather dstimage out of range", r_gather_root},
    {"exchange overlapping buffers", r_overlap},
    {"gather_all nbytes 2^50", r_huge},
    {"permute perm NULL", r_perm_null},
    {"permute not a permutation", r_perm_dup},
    {"broadcastm dstlist NULL", r_m_null_list},
    {"gather_allm LOCAL | ALL_THREADS", r_m_local_all},
    {"scatterv counts NULL", r_v_counts_null},
    {"gather_allv counts 2^60", r_v_huge},
    {"allreduce elem_size 0", r_elem0},
    {"reduce elem_count 0", r_count0},
    {"allreduce func not in fn_tbl", r_func},
    {"scan elem_size 3 for uint32", r_type_size},
    {"reduce_scatter BAND on float", r_float_band},
    {"reduce_vec dstimage out of range", r_vec_root},
    {"allreduce misaligned dst", r_misaligned},
    {"prefix_reduce src NULL", r_prefix_null},
    {"reducem srclist NULL", r_reducem_null},
    {"barrier on CF_TEAM_NULL", r_team_null},
    {"broadcast on a freed team", r_team_freed},
    {"cf_team_split newteam NULL", r_split_null},
    {"blocking exchange with AGGREGATE", r_blocking_aggregate},
    {"blocking barrier without OUT and address flags", r_blocking_flags},
    {"aggregate member nbytes 0", r_aggregate_member},
};

static void image_body(cf_image_t me, void *arg) {
  (void)arg;
  /* 8-aligned buffers of 64 bytes: what the bad calls point at. */
  uint64_t buf[8] = {0}, other[8] = {0};
  const size_t n = sizeof kRefusals / sizeof kRefusals[0];
  every_kind(me, 0);
  for (size_t c = 0; c < n; ++c) {
    const int status = kRefusals[c].call(me, (char *)buf, (char *)other);
    g_checks[me]++;
    if (status != CF_ERR_BAD_ARG) {
      char detail[300];
      snprintf(detail, sizeof detail, "returned %d (want CF_ERR_BAD_ARG), last error: %s", status, cf_last_error());
      failed(me, kRefusals[c].name, detail);
      return; /* a call that started may have left the images out of step */
    }
    every_kind(me, (uint32_t)c + 1);
  }
}

int main(int argc, char **argv) {
  if (cf_init(&argc, &argv) != CF_OK) {
    fprintf(stderr, "cf_init: %s\n", cf_last_error());
    return 1;
  }
  cf_set_error_mode(CF_ERRORS_RETURN);
  const char *k = getenv("CF_IMAGES");
  const cf_image_t images = k != NULL ? (cf_image_t)atoi(k) : 1;
  if (images == 1) {
    if (cf_coll_init(NULL, cf_mynode(), NULL, 0, 0) != CF_OK) {
      fprintf(stderr, "cf_coll_init: %s\n", cf_last_error());
      return 1;
    }
  }
  if (cf_images() > kMaxImages && images == 1) {
    fprintf(stderr, "mp_refused: at most %d images\n", kMaxImages);
    return 1;
  }
  if (images == 1) {
    image_body(cf_myimage(), NULL);
  } else if (cf_run_images(images, NULL, 0, image_body, NULL) != CF_OK) {
    fprintf(stderr, "cf_run_images: %s\n", cf_last_error());
    return 1;
  }
  int failures = 0, checks = 0;
  for (int i = 0; i < kMaxImages; ++i) {
    failures += g_failures[i];
    checks += g_checks[i];
  }
  const int fin = cf_finalize();
  if (fin != CF_OK) {
    printf("FAIL node %u: cf_finalize returned %d: %s\n", cf_mynode(), fin, cf_last_error());
    failures++;
  }
  printf("refused: node %u: %d classes, %d checks, %d failures\n", cf_mynode(),
         (int)(sizeof kRefusals / sizeof kRefusals[0]), checks, failures);
  fflush(stdout);
  return failures == 0 ? 0 : 1;
}
