/* Three of carflow's built-in algorithms written again as a plug-in, on the
   public builder only (carflow/generator.h): the binomial broadcast, the
   recursive-doubling allreduce and the ring gather_all. They build the very
   DAGs the built-ins build (a test compares them CAR by CAR), so they show
   what a real, segmented, order-preserving generator looks like from
   outside, and a benchmark can time the plug-in path against the built-in.

   Registered as binomial_copy (broadcast), recursive_doubling_copy
   (allreduce) and ring_copy (gather_all):
     cc -shared -fPIC -O2 builtin_copies.c $(pkg-config --cflags carflow) -o libbuiltin_copies.so
     CF_PLUGINS=./libbuiltin_copies.so CF_ALGO_BROADCAST=binomial_copy ./app */
#include <carflow/generator.h>

static cf_buf_t buf(int space, uint64_t offset, uint64_t length) {
  cf_buf_t b = {space, 0, offset, length};
  return b;
}
static cf_buf_t temp_buf(uint32_t slot, uint64_t offset, uint64_t length) {
  cf_buf_t b = {CF_SPACE_TEMP, slot, offset, length};
  return b;
}

/* ---- binomial broadcast, pipelined by segments ----------------------------
   Virtual rank vr = (rank - root) mod P. vr's parent clears its lowest set
   bit; its children are vr + 2^j for every 2^j below that bit, largest
   first. The root copies src to dst and sends from src; every other image
   receives segment s into dst and forwards it to its children as soon as it
   has arrived. */
static int binomial_copy(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, vr = (s->image + P - s->root) % P;
  const int is_root = s->image == s->root;
  const uint64_t n = s->nbytes;
  uint64_t step = n;
  if (s->segment_bytes > 0 && s->segment_bytes < n) step = s->segment_bytes;
  uint64_t span = 1; /* the lowest set bit of vr, or the first power of two >= P */
  while (span < P && (vr & span) == 0) span <<= 1;
  if (is_root) cf_dag_copy(dag, buf(CF_SPACE_DST, 0, n), buf(CF_SPACE_SRC, 0, n), 0, 0);
  for (uint64_t off = 0; off < n || (n == 0 && off == 0); off += step) {
    const uint64_t len = n == 0 ? 0 : (step < n - off ? step : n - off);
    const cf_buf_t data = buf(is_root ? CF_SPACE_SRC : CF_SPACE_DST, off, len);
    cf_car_t got = CF_CAR_NONE;
    if (!is_root) {
      const uint32_t parent = (uint32_t)((vr - span + s->root) % P);
      got = CF_DEP_BUFFER(cf_dag_recv(dag, parent, data, 0, 0));
    }
    for (uint64_t m = span >> 1; m >= 1; m >>= 1) {
      if (vr + m < P) cf_dag_send(dag, (uint32_t)((vr + m + s->root) % P), data, &got, is_root ? 0 : 1);
    }
    if (n == 0) break;
  }
  return CF_OK; /* a builder error, if any, is in the DAG: carflow reports it */
}

/* ---- recursive-doubling allreduce -----------------------------------------
   P = P' + rem with P' the largest power of two <= P: images r < 2 rem pair
   up, the even one hands its vector to r + 1 first and gets the result back
   last, so the core runs on P' "new ranks". In round k partners
   nr ^ 2^k swap their whole partial results; the lower new rank's partial
   is the left operand, so the operand order is the rank order. */
static int recursive_doubling_copy(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, r = s->image;
  const uint64_t n = s->nbytes;
  uint32_t pof2 = 1, rounds = 0;
  while (pof2 * 2 <= P) pof2 *= 2, ++rounds;
  const uint32_t rem = P - pof2;
  const int paired = r < 2 * rem;
  if (paired && r % 2 == 0) { /* folded away */
    cf_dag_send(dag, r + 1, buf(CF_SPACE_SRC, 0, n), 0, 0);
    cf_dag_recv(dag, r + 1, buf(CF_SPACE_DST, 0, n), 0, 0);
    return CF_OK;
  }
  const uint32_t newrank = paired ? r / 2 : r - rem;
  cf_buf_t cur = buf(CF_SPACE_SRC, 0, n); /* my partial result */
  cf_car_t cur_car = CF_CAR_NONE;
  if (paired) { /* absorb the even neighbour's vector, which is the left operand */
    const uint32_t slot = cf_dag_temp(dag, n);
    const cf_car_t got = CF_DEP_BUFFER(cf_dag_recv(dag, r - 1, temp_buf(slot, 0, n), 0, 0));
    cur_car = cf_dag_reduce(dag, buf(CF_SPACE_DST, 0, n), temp_buf(slot, 0, n), cur, &got, 1);
    cur = buf(CF_SPACE_DST, 0, n);
  }
  for (uint32_t k = 0; k < rounds; ++k) {
    const uint32_t partner_new = newrank ^ (1u << k);
    const uint32_t partner = partner_new < rem ? 2 * partner_new + 1 : partner_new + rem;
    const int theirs_left = partner_new < newrank;
    const cf_car_t on_cur = CF_DEP_BUFFER(cur_car);
    const cf_car_t sent = cf_dag_send(dag, partner, cur, &on_cur, cur_car == CF_CAR_NONE ? 0 : 1);
    if (cur.space == CF_SPACE_SRC) {
      /* First round from the source: combine as it arrives, straight into
         dst, with the source as the local operand. */
      cur_car = cf_dag_recv_reduce_into(dag, partner, buf(CF_SPACE_DST, 0, n), cur, theirs_left, 0, 0);
      cur = buf(CF_SPACE_DST, 0, n);
      continue;
    }
    const uint32_t slot = cf_dag_temp(dag, n);
    const cf_car_t got = cf_dag_recv(dag, partner, temp_buf(slot, 0, n), 0, 0);
    const cf_car_t deps[3] = {CF_DEP_BUFFER(cur_car), CF_DEP_BUFFER(got), CF_DEP_BUFFER(sent)};
    const cf_buf_t theirs = temp_buf(slot, 0, n);
    cur_car = cf_dag_reduce(dag, buf(CF_SPACE_DST, 0, n), theirs_left ? theirs : cur, theirs_left ? cur : theirs,
                            deps, 3);
    cur = buf(CF_SPACE_DST, 0, n);
  }
  if (cur_car == CF_CAR_NONE) cur_car = cf_dag_copy(dag, buf(CF_SPACE_DST, 0, n), buf(CF_SPACE_SRC, 0, n), 0, 0);
  if (paired) {
    const cf_car_t done = CF_DEP_BUFFER(cur_car);
    cf_dag_send(dag, r - 1, buf(CF_SPACE_DST, 0, n), &done, 1);
  }
  return CF_OK;
}

/* ---- ring gather_all -------------------------------------------------------
   Step s: send block (r - s) to the right neighbour (step 0: from src; after
   that the block received in step s - 1), receive block (r - s - 1) from the
   left one. Blocks: nbytes each, packed; or the v form's counts and displs. */
static uint64_t block_length(const cf_gen_spec_t *s, uint32_t i) { return s->counts ? s->counts[i] : s->nbytes; }
static uint64_t block_offset(const cf_gen_spec_t *s, uint32_t i) {
  if (!s->counts) return (uint64_t)i * s->nbytes;
  if (s->displs) return s->displs[i];
  uint64_t off = 0;
  for (uint32_t j = 0; j < i; ++j) off += s->counts[j];
  return off;
}
static cf_buf_t dst_block(const cf_gen_spec_t *s, uint32_t i) {
  return buf(CF_SPACE_DST, block_offset(s, i), block_length(s, i));
}

static int ring_copy(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  const uint32_t P = s->images, r = s->image;
  const cf_buf_t own = buf(CF_SPACE_SRC, 0, block_length(s, r));
  cf_dag_copy(dag, dst_block(s, r), own, 0, 0);
  cf_car_t got = CF_CAR_NONE;
  for (uint32_t step = 0; step + 1 < P; ++step) {
    const uint32_t right = (r + 1) % P, left = (r + P - 1) % P;
    if (step == 0) {
      cf_dag_send(dag, right, own, 0, 0);
    } else {
      const cf_car_t dep = CF_DEP_BUFFER(got);
      cf_dag_send(dag, right, dst_block(s, (uint32_t)((r + (uint64_t)P - step) % P)), &dep, 1);
    }
    got = cf_dag_recv(dag, left, dst_block(s, (uint32_t)((r + 2 * (uint64_t)P - step - 1) % P)), 0, 0);
  }
  return CF_OK;
}

int cf_plugin_init(void) {
  int rc = cf_generator_register(CF_KIND_BROADCAST, "binomial_copy", binomial_copy, 0,
                                 CF_GEN_PRESERVES_ORDER | CF_GEN_SEGMENTED,
                                 "the built-in binomial broadcast, as a plug-in");
  if (rc == CF_OK) {
    rc = cf_generator_register(CF_KIND_ALLREDUCE, "recursive_doubling_copy", recursive_doubling_copy, 0,
                               CF_GEN_PRESERVES_ORDER | CF_GEN_XOR_SYMMETRIC,
                               "the built-in recursive-doubling allreduce, as a plug-in");
  }
  if (rc == CF_OK) {
    rc = cf_generator_register(CF_KIND_GATHER_ALL, "ring_copy", ring_copy, 0,
                               CF_GEN_PRESERVES_ORDER | CF_GEN_SHIFT_SYMMETRIC,
                               "the built-in ring gather_all, as a plug-in");
  }
  return rc;
}
