/* An example generator plug-in, built on the public builder only
   (carflow/generator.h): a binomial broadcast, an allreduce as a binomial
   reduce to rank 0 followed by a binomial broadcast, and a ring gather_all.

   Build it outside carflow's tree against an installed prefix:
     cc -shared -fPIC -O2 example_plugin.c $(pkg-config --cflags carflow) -o libexample_plugin.so
   and load it with CF_PLUGINS=./libexample_plugin.so; the algorithms are
   then chosen like built-in ones: CF_ALGO_BROADCAST=example_binomial, or
   cf_coll_set_algorithm(CF_KIND_BROADCAST, "example_binomial"). */
#include <carflow/generator.h>

/* Team rank `vr` steps from the root, and back. */
static uint32_t virtual_rank(uint32_t rank, uint32_t root, uint32_t P) { return (rank + P - root) % P; }
static uint32_t real_rank(uint32_t vr, uint32_t root, uint32_t P) { return (vr + root) % P; }
static uint32_t lowest_bit(uint32_t v) { return v & (~v + 1); }

static cf_buf_t whole(int space, uint64_t bytes) {
  cf_buf_t b = {space, 0, 0, bytes};
  return b;
}

/* Broadcast of dst (filled by `have`, or received) down a binomial tree
   rooted at `root`: receive from the parent, then send to the children,
   farthest first. Returns the last CAR, or CF_CAR_NONE. */
static cf_car_t tree_down(cf_dag_t *dag, const cf_gen_spec_t *s, uint32_t root, cf_car_t have, uint64_t bytes) {
  const uint32_t P = s->images, vr = virtual_rank(s->image, root, P);
  cf_car_t ready = have;
  uint32_t span = P;  /* children are vr + m for powers of two m below lowest_bit(vr) */
  if (vr != 0) {
    span = lowest_bit(vr);
    const uint32_t parent = real_rank(vr - span, root, P);
    ready = cf_dag_recv(dag, parent, whole(CF_SPACE_DST, bytes), &have, have == CF_CAR_NONE ? 0 : 1);
  }
  cf_car_t last = ready;
  uint32_t m = 1;
  while (m < span && m < P) m <<= 1;
  for (m >>= 1; m >= 1; m >>= 1) {
    if (m < span && vr + m < P) {
      last = cf_dag_send(dag, real_rank(vr + m, root, P), whole(CF_SPACE_DST, bytes), &ready,
                         ready == CF_CAR_NONE ? 0 : 1);
    }
    if (m == 1) break;
  }
  return last;
}

static int example_binomial(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  cf_car_t have = CF_CAR_NONE;
  if (s->image == s->root) have = cf_dag_copy(dag, whole(CF_SPACE_DST, s->nbytes), whole(CF_SPACE_SRC, s->nbytes), 0, 0);
  tree_down(dag, s, s->root, have, s->nbytes);
  return CF_OK;  /* a builder error, if any, is in the DAG: carflow reports it */
}

/* Binomial reduce to rank 0 in rank order (dst = lower ranks op higher
   ranks at every step), then the broadcast above from rank 0. */
static int example_reduce_bcast(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, me = s->image;
  cf_car_t last = cf_dag_copy(dag, whole(CF_SPACE_DST, s->nbytes), whole(CF_SPACE_SRC, s->nbytes), 0, 0);
  for (uint32_t m = 1; m < P; m <<= 1) {
    if (me & m) {
      last = cf_dag_send(dag, me - m, whole(CF_SPACE_DST, s->nbytes), &last, 1);
      break;
    }
    if (me + m < P) last = cf_dag_recv_reduce(dag, me + m, whole(CF_SPACE_DST, s->nbytes), &last, 1);
  }
  tree_down(dag, s, 0, last, s->nbytes);
  return CF_OK;
}

/* Ring: in step k every image passes block (me - k) mod P to its right
   neighbour and receives block (me - k - 1) mod P from its left one. */
static int example_ring(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, me = s->image, right = (me + 1) % P, left = (me + P - 1) % P;
  const uint64_t n = s->nbytes;
  cf_buf_t mine = {CF_SPACE_DST, 0, (uint64_t)me * n, n};
  cf_car_t last = cf_dag_copy(dag, mine, whole(CF_SPACE_SRC, n), 0, 0);
  for (uint32_t k = 0; k + 1 < P; ++k) {
    cf_buf_t out = {CF_SPACE_DST, 0, (uint64_t)((me + P - k) % P) * n, n};
    cf_buf_t in = {CF_SPACE_DST, 0, (uint64_t)((me + 2 * P - k - 1) % P) * n, n};
    cf_dag_send(dag, right, out, &last, 1);
    last = cf_dag_recv(dag, left, in, &last, 1);
  }
  return CF_OK;
}

int cf_plugin_init(void) {
  int rc = cf_generator_register(CF_KIND_BROADCAST, "example_binomial", example_binomial, 0, 0,
                                 "example plug-in: binomial tree, whole message");
  if (rc == CF_OK) {
    rc = cf_generator_register(CF_KIND_ALLREDUCE, "example_reduce_bcast", example_reduce_bcast, 0,
                               CF_GEN_PRESERVES_ORDER, "example plug-in: binomial reduce to 0, then broadcast");
  }
  if (rc == CF_OK) {
    rc = cf_generator_register(CF_KIND_GATHER_ALL, "example_ring", example_ring, 0, 0,
                               "example plug-in: ring, P-1 steps");
  }
  return rc;
}
