/* A plug-in whose broadcast is wrong only in its data, not its shape: from
   P = 3 on, the last image receives the root's bytes one byte off. Every
   message matches and nothing deadlocks, so only running the DAG against
   the reference shows it (tests/cli_test.cc: `carflow check` must fail at
   P = 3 and write that DAG). And an allreduce that claims
   CF_GEN_PRESERVES_ORDER but combines in rotated rank order: right for any
   commutative op, wrong for a non-commutative one from P = 2 on. */
#include <carflow/generator.h>

static int off_by_one(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images;
  const uint64_t n = s->nbytes;
  const cf_buf_t src = {CF_SPACE_SRC, 0, 0, n}, dst = {CF_SPACE_DST, 0, 0, n};
  if (s->image == s->root) {
    const cf_car_t c = cf_dag_copy(dag, dst, src, 0, 0);
    for (uint32_t i = 0; i < P; ++i) {
      if (i == s->root) continue;
      const int skewed = P >= 3 && i == (s->root + P - 1) % P && n > 1;
      const cf_buf_t part = {CF_SPACE_SRC, 0, skewed ? 1 : 0, skewed ? n - 1 : n};
      cf_dag_send(dag, i, part, &c, 0);
    }
  } else {
    const int skewed = P >= 3 && s->image == (s->root + P - 1) % P && n > 1;
    const cf_buf_t into = {CF_SPACE_DST, 0, 0, skewed ? n - 1 : n};
    cf_dag_recv(dag, s->root, into, 0, 0);
  }
  return CF_OK;
}

/* Image i: its own vector, then each other's as it arrives from i+1, i+2,
   ... (mod P) folded on the right: image 0 is in rank order, the others
   start mid-way. */
static int rotated(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, me = s->image;
  const uint64_t n = s->nbytes;
  const cf_buf_t src = {CF_SPACE_SRC, 0, 0, n}, dst = {CF_SPACE_DST, 0, 0, n};
  for (uint32_t k = 1; k < P; ++k) cf_dag_send(dag, (me + k) % P, src, 0, 0);
  cf_car_t last = cf_dag_copy(dag, dst, src, 0, 0);
  for (uint32_t k = 1; k < P; ++k) last = cf_dag_recv_reduce(dag, (me + k) % P, dst, &last, 1);
  return CF_OK;
}

int cf_plugin_init(void) {
  int rc = cf_generator_register(CF_KIND_BROADCAST, "off_by_one", off_by_one, 0, 0, "a broken broadcast, for tests");
  if (rc == CF_OK) {
    rc = cf_generator_register(CF_KIND_ALLREDUCE, "rotated", rotated, 0, CF_GEN_PRESERVES_ORDER,
                               "an allreduce out of rank order that claims to keep it, for tests");
  }
  return rc;
}
