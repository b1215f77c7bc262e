/* carflow/generator.h: writing collective algorithms ("generators") from
   outside carflow, in C.

   A generator builds ONE image's DAG of CARs for one collective call shape
   (kind, team size P, root, sizes): it adds SENDs, RECVs, reductions,
   copies and joins with the cf_dag_* calls below, each naming the CARs it
   waits for. carflow runs the generator once per shape and image, checks
   the result, caches it, and runs it like a built-in algorithm.

   Message tags are assigned by the builder: the k-th cf_dag_send from image
   i to image j matches the k-th receive (cf_dag_recv or cf_dag_recv_reduce)
   that image j adds from image i. A generator never numbers tags.

   Buffers (cf_buf_t): CF_SPACE_SRC and CF_SPACE_DST are the image's user
   source and destination as the collective's kind lays them out (per image
   bytes for broadcast and the vector reductions, P blocks of nbytes for
   the source of scatter and exchange and the destination of gather,
   gather_all and exchange; see api/README.md); CF_SPACE_TEMP is a slot of
   cf_dag_temp. `slot` is used for CF_SPACE_TEMP only.

   Errors: a call with a bad argument (a peer outside [0, P) or the image
   itself, a dependency that is not an earlier CAR of this DAG, a buffer
   past the end of its space, an unknown temp slot, a reduction on a kind
   that does not reduce, unequal operand lengths) returns CF_CAR_NONE and
   marks the DAG failed; carflow then refuses the collective with
   CF_ERR_BAD_ARG naming the generator, the image, the builder call and the
   argument. Later calls on a failed DAG also return CF_CAR_NONE.
   The rules behind those errors, in full: a cf_buf_t's space must be
   CF_SPACE_SRC, CF_SPACE_DST or CF_SPACE_TEMP (space 0 with offset and
   length 0 means "none" only for fold's and prefix's carry); deps may be
   NULL only when ndeps is 0; the reducing calls take whole elements
   (lengths a multiple of spec->elem_size); a DAG sends at most 2^30 - 1
   messages to one peer and receives as many from one; a temp slot is
   below 2^48 bytes (cf_dag_temp returns (uint32_t)-1 and fails the DAG
   otherwise). A NULL dag changes nothing: the CAR calls return
   CF_CAR_NONE, cf_dag_temp (uint32_t)-1, cf_dag_src_bytes and
   cf_dag_dst_bytes 0.

   Checks before a registered generator first runs (per team size P, root
   and sizes; cached): the DAG of every image is built and checked together
   when P <= CF_GEN_CHECK_IMAGES (256): acyclic, buffers in range, every
   send matched by a receive of the same length, no deadlock whether sends
   complete eagerly or at the receive, and no data hazard (two CARs that
   touch the same bytes, one writing, with neither depending on the other,
   directly or not; nothing may write CF_SPACE_SRC). A failure is
   CF_ERR_BAD_ARG on every image alike, naming the defect ("image 3 sends 8
   bytes to image 5, which posts no receive from 3"); nothing starts. It
   costs P generator runs the first time per process, about a microsecond
   per CAR, plus C*C/64 word operations per image of C CARs for the
   hazards. Above that P only the image's own DAG is checked (range,
   cycles, hazards): `carflow check --plugin lib.so --coll C --algo A
   --images LO:HI` checks the rest, and runs the DAGs on a sequential
   executor against the collective's reference result.

   Images or processes that registered different generators, or were
   given different CF_ALGO_<KIND> or cf_coll_set_algorithm choices: a call
   where they chose different algorithms (one has the name, another fell
   back to the default) is CF_ERR_MISMATCH on every image under CF_CHECK=1
   (a 16-bit checksum of the name: a difference escapes it 1 time in
   65536). cf_last_error() names the argument, two images that differ, the
   algorithm this image chose and, on those two images, the name the other
   chose if this process has a generator of that name; without CF_CHECK
   such a call may hang.

   Thread safety: cf_generator_register may be called from any thread,
   before or after cf_init, but before the first collective of that kind
   that should see it; a generator function may run on any image thread
   and several at once: keep it a pure function of the spec.

   CF_ALGO_<KIND>=name may name a generator registered after cf_init:
   cf_init checks only the name's form, and the first collective of the
   kind looks it up; a name no generator of the kind has by then fails
   that collective with CF_ERR_BAD_ARG naming CF_ALGO_<KIND> and the name,
   on every image alike, and nothing starts. */
#ifndef CARFLOW_GENERATOR_H
#define CARFLOW_GENERATOR_H

#include <stddef.h>
#include <stdint.h>

#include "carflow/carflow.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cf_dag cf_dag_t;    /* one image's DAG, being built */
typedef uint32_t cf_car_t;         /* a CAR of that DAG: 0, 1, 2, ... in order of addition */
#define CF_CAR_NONE ((cf_car_t)-1) /* returned on a bad argument */
/* In a deps array: a dependency that guards data (the CAR touches bytes the
   other writes or reads) rather than an ordering. carflow waits for both
   alike; the graph JSON and its pictures tell them apart. */
#define CF_DEP_BUFFER(car) ((cf_car_t)(car) | (cf_car_t)0x80000000u)
enum { CF_SPACE_SRC = 1, CF_SPACE_DST = 2, CF_SPACE_TEMP = 3 };
typedef struct {
  int space;       /* CF_SPACE_* */
  uint32_t slot;   /* CF_SPACE_TEMP: the slot cf_dag_temp returned */
  uint64_t offset; /* bytes into the space */
  uint64_t length; /* bytes */
} cf_buf_t;

/* What the generator builds for. */
typedef struct {
  int kind;                /* CF_KIND_* */
  const char *algorithm;   /* the name it was registered under */
  uint32_t images;         /* team size P */
  uint32_t image;          /* whose DAG is being built (team rank) */
  uint32_t root;           /* rooted kinds: team rank of the root */
  uint64_t nbytes;         /* bytes per image, or per block (see above) */
  uint32_t elem_size;      /* reductions: bytes per element */
  uint64_t segment_bytes;  /* CF_GEN_SEGMENTED generators: cut messages this size; 0 = unsegmented */
  int flags;               /* CF_COLL_EXCLUSIVE for an exclusive scan; else 0 */
  const uint64_t *counts;  /* v forms: bytes per block (NULL, 0 when packed) */
  size_t ncounts;
  const uint64_t *displs;
  size_t ndispls;
  const uint32_t *perm;    /* permute: P entries, else NULL */
  uint32_t images_per_node; /* team ranks [k*K, (k+1)*K) share a node; 0 = unknown */
  uint32_t radix;          /* a tree radix: CF_TREE_RADIX (2..64, default 4) in the engine,
                              in model-driven selection and in `carflow check`; a
                              schedule is built and cached per value */
} cf_gen_spec_t;

/* A SEND of `src` to team rank `peer`, after `deps` (ndeps CARs of this DAG). */
cf_car_t cf_dag_send(cf_dag_t *dag, uint32_t peer, cf_buf_t src, const cf_car_t *deps, size_t ndeps);
/* A RECV from `peer` into `dst`. */
cf_car_t cf_dag_recv(cf_dag_t *dag, uint32_t peer, cf_buf_t dst, const cf_car_t *deps, size_t ndeps);
/* dst = dst op incoming, element-wise with the call's op (reducing kinds only). */
cf_car_t cf_dag_recv_reduce(cf_dag_t *dag, uint32_t peer, cf_buf_t dst, const cf_car_t *deps, size_t ndeps);
/* dst = incoming op dst: the incoming operand on the left, for an order-
   preserving algorithm (the sender's data comes from lower ranks). */
cf_car_t cf_dag_recv_reduce_left(cf_dag_t *dag, uint32_t peer, cf_buf_t dst, const cf_car_t *deps,
                                 size_t ndeps);
/* dst = local op incoming (incoming op local when incoming_left): the
   local operand is read from `local`, which saves a copy into dst first. */
cf_car_t cf_dag_recv_reduce_into(cf_dag_t *dag, uint32_t peer, cf_buf_t dst, cf_buf_t local, int incoming_left,
                                 const cf_car_t *deps, size_t ndeps);
/* dst = left op right, element-wise (reducing kinds only; equal lengths). */
cf_car_t cf_dag_reduce(cf_dag_t *dag, cf_buf_t dst, cf_buf_t left, cf_buf_t right, const cf_car_t *deps,
                       size_t ndeps);
/* Fold: src cut into chunks of elements (the first first_elems long, then
   chunk_elems each, the last may be shorter; chunk_elems 0 = one chunk,
   first_elems 0 = as long as chunk_elems); dst gets one element per chunk,
   the chunk combined left to right, with carry's element for that chunk
   (if carry is not {0}) as the left-most operand. Reducing kinds only. */
cf_car_t cf_dag_fold(cf_dag_t *dag, cf_buf_t dst, cf_buf_t src, cf_buf_t carry, uint64_t first_elems,
                     uint64_t chunk_elems, const cf_car_t *deps, size_t ndeps);
/* Prefix: dst as long as src; within each chunk (as for fold) dst[j] =
   src[first] op ... op src[j], with carry's element on the left. */
cf_car_t cf_dag_prefix(cf_dag_t *dag, cf_buf_t dst, cf_buf_t src, cf_buf_t carry, uint64_t first_elems,
                       uint64_t chunk_elems, const cf_car_t *deps, size_t ndeps);
/* dst = src (equal lengths). */
cf_car_t cf_dag_copy(cf_dag_t *dag, cf_buf_t dst, cf_buf_t src, const cf_car_t *deps, size_t ndeps);
/* No data: done when its deps are. */
cf_car_t cf_dag_join(cf_dag_t *dag, const cf_car_t *deps, size_t ndeps);
/* A temporary slot of `bytes` for CF_SPACE_TEMP buffers; its index, or
   (uint32_t)-1 on a failed DAG. */
uint32_t cf_dag_temp(cf_dag_t *dag, uint64_t bytes);
/* Bytes of this image's user source / destination for the spec. */
uint64_t cf_dag_src_bytes(const cf_dag_t *dag);
uint64_t cf_dag_dst_bytes(const cf_dag_t *dag);

/* A generator: fills `dag` for spec->image; CF_OK, or an error status
   (CF_ERR_BAD_ARG: this shape is not supported; the collective is then
   refused). `arg` is cf_generator_register's. */
typedef int (*cf_generator_fn)(const cf_gen_spec_t *spec, cf_dag_t *dag, void *arg);
#define CF_GEN_PRESERVES_ORDER (1 << 0) /* reductions combine in rank order: safe for CF_COLL_NONCOMM */
#define CF_GEN_SEGMENTED (1 << 1)       /* honours segment_bytes */
/* Rank symmetry, for the cost model (CF_MODEL): every image's DAG is image
   0's with each peer p renamed, CAR by CAR: (p + image) mod P for
   CF_GEN_SHIFT_SYMMETRIC (rings, dissemination), p XOR image for
   CF_GEN_XOR_SYMMETRIC (recursive doubling; used only when P is a power of
   two). The model then simulates image 0 alone. Not for rooted shapes.
   Checked: the model verifies images 1 and P - 1 before relying on it, and
   the whole-team check refuses the call (CF_ERR_BAD_ARG, naming the flag
   and the first CAR that differs) when any image breaks it. At most one. */
#define CF_GEN_SHIFT_SYMMETRIC (1 << 2)
#define CF_GEN_XOR_SYMMETRIC (1 << 3)
#define CF_GEN_CHECK_IMAGES 256         /* the whole-team check above runs up to this P */

/* Registers `fn` as algorithm `name` of `kind` (a CF_KIND_*). The name is
   then valid for CF_ALGO_<KIND>, cf_coll_set_algorithm and `carflow --algo`.
   summary: one line for `carflow info` (may be NULL).
   Errors (CF_ERR_BAD_ARG, nothing registered): fn NULL, name NULL, empty,
   longer than 64 bytes or not of [A-Za-z0-9_.-], a name the kind already
   has (built-in or registered), kind not a CF_KIND_*, unknown gen_flags,
   both symmetry flags. */
int cf_generator_register(int kind, const char *name, cf_generator_fn fn, void *arg, int gen_flags,
                          const char *summary);

/* A plug-in is a shared library exporting
     int cf_plugin_init(void);
   which registers its generators and returns CF_OK. CF_PLUGINS=a.so:b.so
   makes cf_init load each (dlopen) and call it; a library that does not
   load, lacks cf_plugin_init, or whose cf_plugin_init fails makes cf_init
   fail with CF_ERR_BAD_ARG naming the path and the reason. A plug-in binds
   to the cf_* functions of the process: a program linked with libcarflow.so
   has them; one linked with libcarflow.a must export them (-rdynamic), or
   cf_init reports the plug-in's undefined symbol. */
typedef int (*cf_plugin_init_fn)(void);

#ifdef __cplusplus
}
#endif

#endif /* CARFLOW_GENERATOR_H */
