/* An order-keeping scan and reduce_vec on the public builder only
   (carflow/generator.h), shaped by the tree radix: team ranks form groups
   of k = spec->radix consecutive ranks, group g led by rank g*k.

   Terms: n = elements per image, es = spec->elem_size, m = the group's
   size, r = a rank's place in its group, T = the leader's temp of m*n
   elements with element j of group rank r at T[j*m + r], so chunk j of T
   (m elements) is element j of every member in rank order.

   Both start alike: every member sends its n elements to its leader one
   element a message, and the leader copies its own into T.
   reduce  the leader folds each chunk of T (cf_dag_fold, chunks of m) into
           its group's partial A; leader g > 0 receives the partial of
           groups 0..g-1 from leader g-1 on the left (cf_dag_recv_reduce_left)
           and passes A on; the last leader sends A to the root.
   scan    leader g > 0 receives C, the scan of groups 0..g-1, from leader
           g-1; Q = prefix of each chunk of T with C's element j as the
           left-most operand of chunk j (cf_dag_prefix); Q[j*m + r] is
           rank r's element j (exclusive: Q[j*m + r - 1], the leader C),
           sent back one element a message; the last element of each
           chunk is C for the next leader.
   Messages: (m-1)*n per group each way (scan) or one way (reduce), plus
   one per pair of consecutive leaders, plus (reduce) one to the root
   when it is not the last leader. */
#include "tests/ordered_plugin.h"

#include <carflow/generator.h>

#include <stdlib.h>
#include <string.h>

typedef struct {
  ordered_record_t *record;
  int reversed;
} ordered_arg_t;

#define kMaxRegistrations 8
static ordered_arg_t g_args[kMaxRegistrations];
static int g_registered;

typedef struct {
  uint32_t k, group, groups, leader, m, r;
} group_t;

uint32_t ordered_plugin_group(uint32_t radix) { return radix != 0 ? radix : 4; }

static group_t group_of(const cf_gen_spec_t *s) {
  group_t g;
  g.k = ordered_plugin_group(s->radix);
  g.group = s->image / g.k;
  g.groups = (s->images + g.k - 1) / g.k;
  g.leader = g.group * g.k;
  g.m = s->images - g.leader < g.k ? s->images - g.leader : g.k;
  g.r = s->image - g.leader;
  return g;
}

static cf_buf_t elems(int space, uint32_t slot, uint64_t first, uint64_t count, uint64_t es) {
  cf_buf_t b = {space, slot, first * es, count * es};
  return b;
}

static void record(const ordered_arg_t *a, const cf_gen_spec_t *s) {
  __atomic_store_n(&a->record->radix_seen, s->radix, __ATOMIC_RELAXED);
  __atomic_add_fetch(&a->record->calls, 1, __ATOMIC_RELAXED);
}

/* Fills the leader's T (slot t) from its group; a member sends. On the
   leader: a JOIN of the CARs that fill T. reversed lays ranks out m-1-r. */
static cf_car_t gather_transposed(cf_dag_t *dag, const cf_gen_spec_t *s, const group_t *g, uint32_t t, int reversed) {
  const uint64_t es = s->elem_size, n = s->nbytes / es;
  if (g->r != 0) {
    for (uint64_t j = 0; j < n; ++j) cf_dag_send(dag, g->leader, elems(CF_SPACE_SRC, 0, j, 1, es), 0, 0);
    return CF_CAR_NONE;
  }
  cf_car_t *filled = malloc(sizeof(cf_car_t) * (g->m * n + 1));
  if (filled == NULL) return CF_CAR_NONE;
  size_t nfilled = 0;
  for (uint32_t r = 0; r < g->m; ++r) {
    const uint64_t pos = reversed ? g->m - 1 - r : r;
    for (uint64_t j = 0; j < n; ++j) {
      const cf_buf_t into = elems(CF_SPACE_TEMP, t, j * g->m + pos, 1, es);
      filled[nfilled++] = r == 0 ? cf_dag_copy(dag, into, elems(CF_SPACE_SRC, 0, j, 1, es), 0, 0)
                                 : cf_dag_recv(dag, g->leader + r, into, 0, 0);
    }
  }
  const cf_car_t all = cf_dag_join(dag, filled, nfilled);
  free(filled);
  return all;
}

static int ordered_reduce(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  const ordered_arg_t *a = arg;
  record(a, s);
  const group_t g = group_of(s);
  const uint64_t es = s->elem_size, n = s->nbytes / es;
  const uint32_t last_leader = (g.groups - 1) * g.k;
  const cf_buf_t dst = elems(CF_SPACE_DST, 0, 0, n, es);
  if (g.r != 0) {
    gather_transposed(dag, s, &g, 0, a->reversed);
  } else {
    const uint32_t t = cf_dag_temp(dag, g.m * n * es), p = cf_dag_temp(dag, n * es);
    const cf_buf_t part = elems(CF_SPACE_TEMP, p, 0, n, es), none = {0, 0, 0, 0};
    const cf_car_t filled = gather_transposed(dag, s, &g, t, a->reversed);
    cf_car_t have = cf_dag_fold(dag, part, elems(CF_SPACE_TEMP, t, 0, g.m * n, es), none, g.m, g.m, &filled, 1);
    if (g.group > 0) {
      have = a->reversed ? cf_dag_recv_reduce(dag, g.leader - g.k, part, &have, 1)
                         : cf_dag_recv_reduce_left(dag, g.leader - g.k, part, &have, 1);
    }
    if (g.group + 1 < g.groups) {
      cf_dag_send(dag, g.leader + g.k, part, &have, 1);
    } else if (s->image == s->root) {
      cf_dag_copy(dag, dst, part, &have, 1);
    } else {
      cf_dag_send(dag, s->root, part, &have, 1);
    }
  }
  if (s->image == s->root && s->image != last_leader) cf_dag_recv(dag, last_leader, dst, 0, 0);
  return CF_OK;
}

/* The scan's leader: Q from T and the lower groups' C, then results out. */
static void scan_leader(cf_dag_t *dag, const cf_gen_spec_t *s, const group_t *g, int reversed) {
  const uint64_t es = s->elem_size, n = s->nbytes / es, mn = g->m * n;
  const int exclusive = (s->flags & CF_COLL_EXCLUSIVE) != 0;
  const uint32_t t = cf_dag_temp(dag, mn * es), q = cf_dag_temp(dag, mn * es);
  cf_car_t deps[2];
  size_t ndeps = 0;
  deps[ndeps++] = gather_transposed(dag, s, g, t, reversed);
  cf_buf_t carry = {0, 0, 0, 0};
  if (g->group > 0) {
    carry = elems(CF_SPACE_TEMP, cf_dag_temp(dag, n * es), 0, n, es);
    deps[ndeps++] = cf_dag_recv(dag, g->leader - g->k, carry, 0, 0);
  }
  const cf_car_t scan = cf_dag_prefix(dag, elems(CF_SPACE_TEMP, q, 0, mn, es), elems(CF_SPACE_TEMP, t, 0, mn, es),
                                      carry, g->m, g->m, deps, ndeps);
  if (g->group + 1 < g->groups) {  /* C for the next leader: each chunk's last element */
    const uint32_t c = cf_dag_temp(dag, n * es);
    cf_car_t *copies = malloc(sizeof(cf_car_t) * (n + 1));
    if (copies == NULL) return;
    for (uint64_t j = 0; j < n; ++j) {
      const cf_buf_t last = elems(CF_SPACE_TEMP, q, j * g->m + g->m - 1, 1, es);
      copies[j] = cf_dag_copy(dag, elems(CF_SPACE_TEMP, c, j, 1, es), last, &scan, 1);
    }
    cf_dag_send(dag, g->leader + g->k, elems(CF_SPACE_TEMP, c, 0, n, es), copies, n);
    free(copies);
  }
  for (uint32_t r = 1; r < g->m; ++r) {
    for (uint64_t j = 0; j < n; ++j) {
      cf_dag_send(dag, g->leader + r, elems(CF_SPACE_TEMP, q, j * g->m + r - (exclusive ? 1 : 0), 1, es), &scan, 1);
    }
  }
  if (!exclusive) {
    for (uint64_t j = 0; j < n; ++j) {
      cf_dag_copy(dag, elems(CF_SPACE_DST, 0, j, 1, es), elems(CF_SPACE_TEMP, q, j * g->m, 1, es), &scan, 1);
    }
  } else if (g->group > 0) {
    cf_dag_copy(dag, elems(CF_SPACE_DST, 0, 0, n, es), carry, &deps[1], 1);
  }
}

static int ordered_scan(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  const ordered_arg_t *a = arg;
  record(a, s);
  const group_t g = group_of(s);
  if (g.r == 0) {
    scan_leader(dag, s, &g, a->reversed);
    return CF_OK;
  }
  const uint64_t es = s->elem_size, n = s->nbytes / es;
  gather_transposed(dag, s, &g, 0, a->reversed);
  for (uint64_t j = 0; j < n; ++j) cf_dag_recv(dag, g.leader, elems(CF_SPACE_DST, 0, j, 1, es), 0, 0);
  return CF_OK;
}

int ordered_plugin_register(const char *prefix, int reversed, ordered_record_t *scan, ordered_record_t *reduce) {
  if (g_registered + 2 > kMaxRegistrations || strlen(prefix) > 40) return CF_ERR_BAD_ARG;
  char name[64];
  ordered_arg_t *scan_arg = &g_args[g_registered++], *reduce_arg = &g_args[g_registered++];
  scan_arg->record = scan;
  scan_arg->reversed = reversed;
  reduce_arg->record = reduce;
  reduce_arg->reversed = reversed;
  strcpy(name, prefix);
  strcat(name, "_scan");
  int rc = cf_generator_register(CF_KIND_SCAN, name, ordered_scan, scan_arg, CF_GEN_PRESERVES_ORDER,
                                 "test plug-in: groups of radix, prefix per chunk, chained carries");
  if (rc != CF_OK) return rc;
  strcpy(name, prefix);
  strcat(name, "_reduce");
  return cf_generator_register(CF_KIND_REDUCE_VEC, name, ordered_reduce, reduce_arg, CF_GEN_PRESERVES_ORDER,
                               "test plug-in: groups of radix folded per chunk, chained to the root");
}
