/* carflow: nonblocking collectives for the images of a parallel program.
 *
 * C11 and C++ compatible. Semantics follow the GASNet collectives design
 * notes v1.7 with GASNET_ renamed CF_ (see README.md). This header lists only
 * what works in this release; every function documents its errors.
 *
 * Errors: functions returning int give CF_OK (0), CF_NOT_READY (1, try_*
 * calls) or a negative CF_ERR_*. Initiation functions return a handle or, on
 * error, CF_COLL_INVALID_HANDLE with cf_last_status() negative. In the
 * default mode (CF_ERRORS_ARE_FATAL) an error prints cf_last_error() and
 * aborts; cf_set_error_mode(CF_ERRORS_RETURN) makes calls return instead.
 * A failed call changes nothing: no collective starts, no handle dies.
 *
 * Threads: cf_init/cf_finalize are called once per process by one thread.
 * Image threads (cf_coll_init or cf_run_images) call the collective and sync
 * functions; a handle belongs to the image thread that started it.
 */
#ifndef CARFLOW_CARFLOW_H
#define CARFLOW_CARFLOW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint32_t cf_image_t; /* image number, node-major, 0-based */
typedef uint32_t cf_node_t;  /* node (process) number */
typedef struct cf_team_s *cf_team_t; /* opaque */
#define CF_TEAM_ALL ((cf_team_t)0)
#define CF_TEAM_NULL ((cf_team_t)-1) /* cf_team_split's result for a negative color */
typedef uintptr_t cf_coll_handle_t;
#define CF_COLL_INVALID_HANDLE ((cf_coll_handle_t)0)

/* ---- status codes ---------------------------------------------------- */
#define CF_OK 0
#define CF_NOT_READY 1
#define CF_ERR_BAD_ARG (-1)   /* invalid argument or flag combination */
#define CF_ERR_NOT_INIT (-2)  /* cf_init / cf_coll_init not called */
#define CF_ERR_NO_MEM (-3)
#define CF_ERR_TRANSPORT (-4)
#define CF_ERR_PEER_LOST (-5) /* a peer process died or became unreachable: every
                                 pending and later sync returns it within
                                 CF_PEER_TIMEOUT seconds (default 5), with or without
                                 the launcher's notice: a process that died is seen
                                 at once, an unreachable host or a cut network within
                                 the timeout (at least 2 s). cf_last_error() names
                                 the lost node and how ("node 1 was lost (no
                                 keepalive reply within 4 s: ...)"). A slow or
                                 stopped peer is not lost. The buffers of a
                                 collective that failed so may still be read or
                                 written by this node until cf_finalize (do not free
                                 them) */
#define CF_ERR_TIMEOUT (-6)
#define CF_ERR_MISMATCH (-7)  /* images disagree on single-valued arguments */
/* CF_ERR_MISMATCH comes from a sync call (or a blocking call). Without
   CF_CHECK it is reported only when a message's size differs from what its
   receiver expected. With the environment variable CF_CHECK=1 (a debugging
   mode; every process must use the same value) images compare digests of
   their single-valued arguments (kind, root, nbytes, flags, op = func and
   func_arg, counts, layout = displs / blksz / offsets / perm, algorithm) on
   an entry barrier added to every call: a call where they differ fails
   with CF_ERR_MISMATCH on every image of the team, changes no destination
   buffer, and cf_last_error() names the argument and two images that
   disagree ("CF_CHECK: argument nbytes differs between images: image 3 and
   image 4 passed different values"). README, "Argument checking". */

/* The name of a status code ("CF_ERR_BAD_ARG"); never NULL. */
const char *cf_strerror(int status);
/* This thread's last failure in words, naming the argument and the rule
   ("nbytes: must be > 0"); "" if none. Valid until this thread's next call. */
const char *cf_last_error(void);
#define CF_ERRORS_ARE_FATAL 0 /* default: print the message, abort */
#define CF_ERRORS_RETURN 1    /* return the error; see cf_last_status() */
/* Process-wide; any thread, any time. Unknown modes are ignored. */
void cf_set_error_mode(int mode);
/* This thread's last status (CF_OK after a successful call). */
int cf_last_status(void);
/* A refused call (CF_ERR_BAD_ARG from an initiation, CF_COLL_INVALID_HANDLE
   in CF_ERRORS_RETURN mode) starts nothing and changes nothing: no sequence
   number, handle, team or aggregate state moves, in this process or any
   other, so when every image of the team makes the same refused call the
   next collective runs as if it had not been made. Arguments that are the
   same on every image (kind, root, nbytes, flags, op, counts, perm) are
   refused on every image alike. A per-image argument (a NULL or overlapping
   buffer, a misaligned one) can be wrong on some images only; then those
   images refuse the call while the others start it, and the images are out
   of step: a user error carflow cannot see without a message. The started
   collective and the ones after it may then wait forever or fail with
   CF_ERR_MISMATCH (when a message's size differs from its receive's); no
   byte is written outside a buffer the call was given. With CF_CHECK=1 the
   next call fails with CF_ERR_MISMATCH on the images whose calls differ,
   naming the argument ("argument kind differs between images"). */

/* ---- lifecycle --------------------------------------------------------- */
/* Once per process, before anything else but the error functions. Reads the
   CF_* environment (README, "Environment"); a bad value is CF_ERR_BAD_ARG
   naming the variable. Without a launcher the process is node 0 of 1.
   argc/argv may be NULL. Errors: CF_ERR_BAD_ARG (environment, called twice). */
int cf_init(int *argc, char ***argv);
/* Ends the library: waits for deferred work, frees every image and schedule.
   Image threads must have finished their collectives. Errors: CF_ERR_NOT_INIT
   (no cf_init, or cf_finalize called already), CF_ERR_BAD_ARG (cf_run_images
   is still running). */
int cf_finalize(void);
/* This process's node number and the job's node (process) count: from the
   launcher (tools/cfrun) or PMIx (mpirun, srun --mpi=pmix); 0 and 1 without
   one. Valid after cf_init. */
cf_node_t cf_mynode(void);
cf_node_t cf_nodes(void);

/* ---- collectives set-up ---------------------------------------------- */
typedef void (*cf_coll_fn_t)(void);
typedef struct {
  cf_coll_fn_t fnptr; /* a cf_coll_reduce_fn, cast */
  unsigned int flags; /* CF_COLL_NONCOMM | CF_COLL_AMSAFE */
} cf_coll_fn_entry_t;
#define CF_COLL_NONCOMM (1u << 0) /* operand order must be kept */
#define CF_COLL_AMSAFE (1u << 1)  /* may run on carflow's helper threads */

/* Called by EVERY image thread of every node (GASNet collectives notes v1.7). images: the number
   of images on each node (cf_nodes() entries), or NULL for one per node;
   my_image: the calling thread's image, node-major; fn_tbl/fn_count: the
   client reduction functions, named by index in computational collectives.
   init_flags must be 0. Errors: CF_ERR_NOT_INIT (no cf_init), CF_ERR_BAD_ARG
   (my_image out of range, image taken, thread already an image, images
   disagreeing with other images' calls, fn_tbl NULL with fn_count > 0, an
   entry with a NULL fnptr, unknown flags). */
int cf_coll_init(const cf_image_t images[], cf_image_t my_image,
                 const cf_coll_fn_entry_t fn_tbl[], size_t fn_count, int init_flags);
/* The calling thread's image, or (cf_image_t)-1 if it is not an image. */
cf_image_t cf_myimage(void);
/* Number of images, or 0 before the first cf_coll_init. */
cf_image_t cf_images(void);
/* Starts n image threads on this node; each calls cf_coll_init(images = {n},
   its image, fn_tbl, fn_count, 0) and then fn(image, arg); returns when all
   have returned, then frees the images (cf_run_images may be called again).
   Errors: CF_ERR_NOT_INIT, CF_ERR_BAD_ARG (n == 0, fn NULL, images already
   running), CF_ERR_NO_MEM (threads could not start, or the images' per-pair
   state, about 1.4 KB per pair of a local image and any image, would not
   fit this machine's memory: a few thousand images per process). The same
   memory rule makes cf_coll_init's first call CF_ERR_NO_MEM. */
int cf_run_images(cf_image_t n, const cf_coll_fn_entry_t fn_tbl[], size_t fn_count,
                  void (*fn)(cf_image_t image, void *arg), void *arg);

/* The GASNet notes' client reduction signature: results[i] = fold of left_operands
   (left_count of them) and right_operands[0..i], in order. carflow calls it
   with result_count = left_count = 1 for element-wise combines. */
typedef void(cf_coll_reduce_fn)(void *results, size_t result_count, const void *left_operands,
                                size_t left_count, const void *right_operands, size_t elem_size,
                                int flags, int arg);

/* ---- flags: exactly one IN_*, one OUT_*, one of SINGLE/LOCAL ----------- */
#define CF_COLL_IN_NOSYNC (1 << 0)
#define CF_COLL_IN_MYSYNC (1 << 1)
#define CF_COLL_IN_ALLSYNC (1 << 2)
#define CF_COLL_OUT_NOSYNC (1 << 3)
#define CF_COLL_OUT_MYSYNC (1 << 4)
#define CF_COLL_OUT_ALLSYNC (1 << 5)
#define CF_COLL_SINGLE (1 << 6) /* addresses agree on all images: single-address forms need
                                   one image per node; m forms take it with any count */
#define CF_COLL_LOCAL (1 << 7)  /* each image passes its own addresses */
/* CF_COLL_AGGREGATE (non-blocking calls only): the call joins the aggregate
   open on its team (or opens one) and returns CF_COLL_INVALID_HANDLE with
   cf_last_status() == CF_OK; the next non-blocking call on the team without
   the flag ends the aggregate and returns its one handle, whose sync covers
   every member. All members run as one merged DAG once the last is called;
   members with equal arguments share messages. At most 4096 calls per
   aggregate. CF_ERR_BAD_ARG: the flag on a blocking call; a blocking call,
   cf_team_split or cf_team_free on a team with an open aggregate. */
#define CF_COLL_AGGREGATE (1 << 8)
#define CF_COLL_ALL_THREADS (1 << 9) /* every image thread calls; required when a
                                        node has more than one image */
#define CF_COLL_DST_IN_SEGMENT (1 << 10) /* accepted; carflow has no segment */
#define CF_COLL_SRC_IN_SEGMENT (1 << 11)

/* ---- data movement ------------------------------------------------------
   Collectives must be started in the same order on every member of their
   team. Arguments checked on every call (CF_ERR_BAD_ARG, nothing started):
   team (a live team of the image), flags (above), srcimage < the team's
   size (roots are team ranks), dst != NULL, src !=
   NULL on srcimage, nbytes > 0, src and dst on srcimage either identical or
   disjoint. Every image gets srcimage's nbytes in dst, srcimage included.
   Each _nb call has a blocking form without _nb that returns the status.
   Every collective, sync and team call made by a thread that is not an
   image (before cf_init, after cf_finalize, or never cf_coll_init'ed) is
   CF_ERR_NOT_INIT. */
cf_coll_handle_t cf_coll_broadcast_nb(cf_team_t team, void *dst, cf_image_t srcimage, void *src,
                                      size_t nbytes, int flags);
int cf_coll_broadcast(cf_team_t team, void *dst, cf_image_t srcimage, void *src, size_t nbytes,
                      int flags);
/* Completes on an image once every image has entered (flags as above). */
cf_coll_handle_t cf_coll_barrier_nb(cf_team_t team, int flags);
int cf_coll_barrier(cf_team_t team, int flags);

/* Scatter, gather, gather_all, exchange (GASNet notes' semantics; nbytes per block).
   Block i of a buffer that holds one block per image is at i * nbytes.
   - scatter: image i's dst gets block i of srcimage's src (P * nbytes).
   - gather: block i of dstimage's dst (P * nbytes) gets image i's src.
   - gather_all: block i of every image's dst (P * nbytes) gets image i's src.
   - exchange: block j of image i's src (P * nbytes) goes to block i of image
     j's dst (P * nbytes).
   Overlap (GASNet notes' rule): src and dst must be disjoint, except that the
   calling image's own block of the P-block buffer may be identical to its
   single block (scatter on srcimage, gather on dstimage, gather_all);
   exchange has no exceptions. Other overlaps are CF_ERR_BAD_ARG. NULL is
   accepted for a buffer the image does not use (src of scatter off
   srcimage, dst of gather off dstimage). */
cf_coll_handle_t cf_coll_scatter_nb(cf_team_t team, void *dst, cf_image_t srcimage, void *src,
                                    size_t nbytes, int flags);
int cf_coll_scatter(cf_team_t team, void *dst, cf_image_t srcimage, void *src, size_t nbytes,
                    int flags);
cf_coll_handle_t cf_coll_gather_nb(cf_team_t team, cf_image_t dstimage, void *dst, void *src,
                                   size_t nbytes, int flags);
int cf_coll_gather(cf_team_t team, cf_image_t dstimage, void *dst, void *src, size_t nbytes,
                   int flags);
cf_coll_handle_t cf_coll_gather_all_nb(cf_team_t team, void *dst, void *src, size_t nbytes,
                                       int flags);
int cf_coll_gather_all(cf_team_t team, void *dst, void *src, size_t nbytes, int flags);
cf_coll_handle_t cf_coll_exchange_nb(cf_team_t team, void *dst, void *src, size_t nbytes,
                                     int flags);
int cf_coll_exchange(cf_team_t team, void *dst, void *src, size_t nbytes, int flags);

/* Multiple-address ("m") forms (GASNet collectives notes v1.7), by flags:
   - CF_COLL_SINGLE | CF_COLL_ALL_THREADS: every image thread calls; the
     lists hold one address per image of the team, indexed by team rank,
     identical on every caller; each image uses its own entry.
   - Without CF_COLL_ALL_THREADS, one representative thread per node (any
     image thread of it) calls for every image of its node that is in the
     team, and gets one handle that syncs them all. With CF_COLL_SINGLE the
     lists hold every image of the team (by team rank); with CF_COLL_LOCAL
     they hold this node's members of the team, in team rank order. The
     node's other image threads must not start a collective while the
     representative's call is being made (the GASNet notes' serialization rule);
     they may compute or sync meanwhile. Not with CF_COLL_AGGREGATE.
   - CF_COLL_LOCAL | CF_COLL_ALL_THREADS is not permitted (GASNet notes: one
     address per caller; use the single-address form). A single-address
     form without CF_COLL_ALL_THREADS on a node of several images is
     CF_ERR_BAD_ARG too (there is no way to name the other images'
     addresses). */
cf_coll_handle_t cf_coll_broadcastm_nb(cf_team_t team, void *const dstlist[], cf_image_t srcimage,
                                       void *src, size_t nbytes, int flags);
int cf_coll_broadcastm(cf_team_t team, void *const dstlist[], cf_image_t srcimage, void *src,
                       size_t nbytes, int flags);
cf_coll_handle_t cf_coll_scatterm_nb(cf_team_t team, void *const dstlist[], cf_image_t srcimage,
                                     void *src, size_t nbytes, int flags);
int cf_coll_scatterm(cf_team_t team, void *const dstlist[], cf_image_t srcimage, void *src,
                     size_t nbytes, int flags);
cf_coll_handle_t cf_coll_gatherm_nb(cf_team_t team, cf_image_t dstimage, void *dst,
                                    void *const srclist[], size_t nbytes, int flags);
int cf_coll_gatherm(cf_team_t team, cf_image_t dstimage, void *dst, void *const srclist[],
                    size_t nbytes, int flags);
cf_coll_handle_t cf_coll_gather_allm_nb(cf_team_t team, void *const dstlist[],
                                        void *const srclist[], size_t nbytes, int flags);
int cf_coll_gather_allm(cf_team_t team, void *const dstlist[], void *const srclist[],
                        size_t nbytes, int flags);
cf_coll_handle_t cf_coll_exchangem_nb(cf_team_t team, void *const dstlist[],
                                      void *const srclist[], size_t nbytes, int flags);
int cf_coll_exchangem(cf_team_t team, void *const dstlist[], void *const srclist[],
                      size_t nbytes, int flags);

/* Variable-contribution ("v") forms, sizes in bytes. counts and displs are
   single-valued: the same on every image.
   - scatterv / gatherv / gather_allv: counts[i] = bytes of image i's block
     (0 allowed), displs[i] = its offset in the P-block buffer (NULL: packed
     in rank order). Blocks that are written (gatherv, gather_allv) must not
     overlap.
   - exchangev: counts[i * P + j] = bytes image i sends to image j; blocks are
     packed in rank order in src (by destination) and dst (by source).
   A block of 0 bytes may come with a NULL buffer. */
cf_coll_handle_t cf_coll_scatterv_nb(cf_team_t team, void *dst, cf_image_t srcimage, void *src,
                                     const size_t counts[], const size_t displs[], int flags);
int cf_coll_scatterv(cf_team_t team, void *dst, cf_image_t srcimage, void *src,
                     const size_t counts[], const size_t displs[], int flags);
cf_coll_handle_t cf_coll_gatherv_nb(cf_team_t team, cf_image_t dstimage, void *dst, void *src,
                                    const size_t counts[], const size_t displs[], int flags);
int cf_coll_gatherv(cf_team_t team, cf_image_t dstimage, void *dst, void *src,
                    const size_t counts[], const size_t displs[], int flags);
cf_coll_handle_t cf_coll_gather_allv_nb(cf_team_t team, void *dst, void *src,
                                        const size_t counts[], const size_t displs[], int flags);
int cf_coll_gather_allv(cf_team_t team, void *dst, void *src, const size_t counts[],
                        const size_t displs[], int flags);
cf_coll_handle_t cf_coll_exchangev_nb(cf_team_t team, void *dst, void *src, const size_t counts[],
                                      int flags);
int cf_coll_exchangev(cf_team_t team, void *dst, void *src, const size_t counts[], int flags);

/* Permute: image i's src (nbytes) goes to image perm[i]'s dst. perm is a
   permutation of 0..P-1, the same on every image. src and dst must be
   disjoint unless perm[i] == i, where they may be identical. */
cf_coll_handle_t cf_coll_permute_nb(cf_team_t team, void *dst, void *src, size_t nbytes,
                                    const cf_image_t perm[], int flags);
int cf_coll_permute(cf_team_t team, void *dst, void *src, size_t nbytes, const cf_image_t perm[],
                    int flags);

/* ---- computation ------------------------------------------------------------
   Common rules (GASNet collectives notes v1.7, computational collectives):
   - func: CF_BUILTIN(op, type) or an index into cf_coll_init's fn_tbl;
     func_arg is passed to client functions. Client functions get the GASNet notes'
     vector signature (cf_coll_reduce_fn): element-wise combines call it with
     result_count = left_count = 1; a reduction of a run calls it once with
     the run's first n-1 elements as left operands and the last as the right
     one; a prefix reduction with result_count = the run's length and at most
     one left operand (the carry). Functions registered without
     CF_COLL_AMSAFE run only on application threads inside carflow calls.
   - Operand order: every algorithm combines in a fixed order, so
     floating-point results are the same bits run to run for a fixed image
     count, size and algorithm. Order-preserving algorithms (README,
     "Algorithm selection") combine strictly left to right in rank (array)
     order and serve CF_COLL_NONCOMM functions; the default table picks one
     for them, and forcing a reordering one (e.g. CF_ALGO_ALLREDUCE=ring) with
     a NONCOMM function is CF_ERR_BAD_ARG.
   - Alignment: src and dst must be aligned to min(largest power of two
     dividing elem_size, CF_DATA_ALIGNMENT (default 8)).
   - In place (MPI_IN_PLACE): allreduce, reduce_vec (at the root), scan and
     reduce_scatter accept src == dst; the input is read before any result
     is written. Any other overlap of src and dst is CF_ERR_BAD_ARG.
   - Errors (CF_ERR_BAD_ARG, nothing started): NULL buffers an image uses,
     elem_size or elem_count 0, sizes reaching 2^48 bytes, elem_size not
     matching a built-in's type (MINLOC/MAXLOC: a (value, index) pair of the
     type; ties keep the smaller index), a bitwise op on a float type, func
     not in fn_tbl, misalignment, overlap, dstimage out of range. */

/* MPI style: element-wise over each image's vector of elem_count elements.
   allreduce: every image's dst = src_0 op src_1 op ... op src_{P-1}. */
cf_coll_handle_t cf_coll_allreduce_nb(cf_team_t team, void *dst, const void *src,
                                      size_t elem_size, size_t elem_count, int func,
                                      int func_arg, int flags);
int cf_coll_allreduce(cf_team_t team, void *dst, const void *src, size_t elem_size,
                      size_t elem_count, int func, int func_arg, int flags);
/* reduce_vec: the same result, only in dstimage's dst (dst is ignored and
   may be NULL elsewhere). */
cf_coll_handle_t cf_coll_reduce_vec_nb(cf_team_t team, cf_image_t dstimage, void *dst,
                                       const void *src, size_t elem_size, size_t elem_count,
                                       int func, int func_arg, int flags);
int cf_coll_reduce_vec(cf_team_t team, cf_image_t dstimage, void *dst, const void *src,
                       size_t elem_size, size_t elem_count, int func, int func_arg, int flags);
/* scan: image i's dst = src_0 op ... op src_i; with CF_COLL_EXCLUSIVE
   src_0 op ... op src_{i-1}, and image 0's dst is left untouched. */
#define CF_COLL_EXCLUSIVE (1 << 12)
cf_coll_handle_t cf_coll_scan_nb(cf_team_t team, void *dst, const void *src,
                                 size_t elem_size, size_t elem_count,
                                 int func, int func_arg, int flags);
int cf_coll_scan(cf_team_t team, void *dst, const void *src, size_t elem_size,
                 size_t elem_count, int func, int func_arg, int flags);
/* reduce_scatter: src holds P blocks of elem_count elements; image i's dst
   (elem_count elements) gets block i of the element-wise reduction.
   reduce_scatterv: block i has counts[i] elements (P entries, zeros
   allowed), packed in rank order in src. In place: src == dst, the result
   lands at the start of the buffer. */
cf_coll_handle_t cf_coll_reduce_scatter_nb(cf_team_t team, void *dst, const void *src,
                                           size_t elem_size, size_t elem_count, int func,
                                           int func_arg, int flags);
int cf_coll_reduce_scatter(cf_team_t team, void *dst, const void *src, size_t elem_size,
                           size_t elem_count, int func, int func_arg, int flags);
cf_coll_handle_t cf_coll_reduce_scatterv_nb(cf_team_t team, void *dst, const void *src,
                                            size_t elem_size, const size_t counts[], int func,
                                            int func_arg, int flags);
int cf_coll_reduce_scatterv(cf_team_t team, void *dst, const void *src, size_t elem_size,
                            const size_t counts[], int func, int func_arg, int flags);

/* GASNet style: a distributed block-cyclic array of elem_count elements of
   elem_size bytes. src_blksz: block size in elements (1 = cyclic); the used
   elements are global elements src_offset .. src_offset+elem_count-1 of the
   array dealt to images 0..P-1 in blocks, each image's src being the base of
   its part. src_blksz 0 is the indefinite layout: all elem_count elements on
   image src_offset. reduce: dstimage's dst (one element) = all used
   elements combined in array order. prefix_reduce: element k of the
   destination array (dst_blksz, dst_offset, the same rules; reblocking is
   allowed) = elements 0..k of the source combined. The m forms take one
   address per image (CF_COLL_SINGLE). Source and destination must not
   overlap. */
cf_coll_handle_t cf_coll_reduce_nb(cf_team_t team, cf_image_t dstimage, void *dst,
                                   void *src, size_t src_blksz, size_t src_offset,
                                   size_t elem_size, size_t elem_count,
                                   int func, int func_arg, int flags);
int cf_coll_reduce(cf_team_t team, cf_image_t dstimage, void *dst, void *src,
                   size_t src_blksz, size_t src_offset, size_t elem_size, size_t elem_count,
                   int func, int func_arg, int flags);
cf_coll_handle_t cf_coll_reducem_nb(cf_team_t team, cf_image_t dstimage, void *dst,
                                    void *const srclist[], size_t src_blksz, size_t src_offset,
                                    size_t elem_size, size_t elem_count, int func, int func_arg,
                                    int flags);
int cf_coll_reducem(cf_team_t team, cf_image_t dstimage, void *dst, void *const srclist[],
                    size_t src_blksz, size_t src_offset, size_t elem_size, size_t elem_count,
                    int func, int func_arg, int flags);
cf_coll_handle_t cf_coll_prefix_reduce_nb(cf_team_t team, void *dst, size_t dst_blksz,
                                          size_t dst_offset, void *src, size_t src_blksz,
                                          size_t src_offset, size_t elem_size,
                                          size_t elem_count, int func, int func_arg, int flags);
int cf_coll_prefix_reduce(cf_team_t team, void *dst, size_t dst_blksz, size_t dst_offset,
                          void *src, size_t src_blksz, size_t src_offset, size_t elem_size,
                          size_t elem_count, int func, int func_arg, int flags);
cf_coll_handle_t cf_coll_prefix_reducem_nb(cf_team_t team, void *const dstlist[],
                                           size_t dst_blksz, size_t dst_offset,
                                           void *const srclist[], size_t src_blksz,
                                           size_t src_offset, size_t elem_size,
                                           size_t elem_count, int func, int func_arg, int flags);
int cf_coll_prefix_reducem(cf_team_t team, void *const dstlist[], size_t dst_blksz,
                           size_t dst_offset, void *const srclist[], size_t src_blksz,
                           size_t src_offset, size_t elem_size, size_t elem_count, int func,
                           int func_arg, int flags);

enum { CF_OP_SUM, CF_OP_PROD, CF_OP_MIN, CF_OP_MAX, CF_OP_BAND, CF_OP_BOR,
       CF_OP_BXOR, CF_OP_MINLOC, CF_OP_MAXLOC };
enum { CF_DT_INT8, CF_DT_UINT8, CF_DT_INT32, CF_DT_UINT32, CF_DT_INT64,
       CF_DT_UINT64, CF_DT_FLOAT, CF_DT_DOUBLE };
#define CF_BUILTIN(op, type) (-1 - ((op) * 16 + (type)))

/* ---- sync (not collective; any order; a handle dies when synced) --------
   Errors: CF_ERR_NOT_INIT (not an image thread), CF_ERR_BAD_ARG (a handle
   that is not live on this image thread: synced already, never valid,
   CF_COLL_INVALID_HANDLE to the single-handle calls, or another thread's;
   handles NULL with n > 0), or the collective's
   own failure (CF_ERR_MISMATCH when images disagreed on sizes, or with
   CF_CHECK=1 on any single-valued argument: see CF_ERR_MISMATCH).
   A dead handle is told from a live one by a 16-bit generation per handle
   slot, and a freed slot is reused only after more than 256 others (oldest
   first): a handle kept after its sync is caught for at least 65536 * 257
   (about 16.8 million) later collectives of its image; after that it may
   name its slot's newer collective. The _all / _some calls refuse a handle
   given twice. */
int cf_coll_wait_sync(cf_coll_handle_t handle);  /* CF_OK or error */
int cf_coll_try_sync(cf_coll_handle_t handle);   /* CF_OK, CF_NOT_READY, error */
/* _all: every entry (INVALID entries are skipped); try_ returns CF_NOT_READY
   and syncs none unless all are done. */
int cf_coll_wait_sync_all(cf_coll_handle_t *handles, size_t n);
int cf_coll_try_sync_all(cf_coll_handle_t *handles, size_t n);
/* _some: syncs every done entry and sets it to CF_COLL_INVALID_HANDLE; wait_
   returns once at least one was synced; try_ returns CF_NOT_READY when none
   was. Both return CF_OK at once when all entries are INVALID. */
int cf_coll_wait_sync_some(cf_coll_handle_t *handles, size_t n);
int cf_coll_try_sync_some(cf_coll_handle_t *handles, size_t n);
/* Makes progress for the calling image; CF_OK. */
int cf_poll(void);

/* ---- teams --------------------------------------------------------------------
   Every collective takes a team; roots and list indices are team ranks, and
   m-form lists have one entry per team rank. Collectives on one team must
   be started in the same order on all its members; collectives on
   different teams need no common order (each team numbers its own).
   cf_team_split: collective over parent (every member calls it, in order
   with parent's other collectives). Members with the same color >= 0 form
   a new team, ranked by key, ties by parent rank; a negative color joins no
   team and gets CF_TEAM_NULL. The new team's wire id is computed alike by
   every member from the parent's id, its split count and the color, so
   creating it costs one gather_all of 8 bytes over parent and nothing more.
   cf_team_free: local; the image's collectives on the team must be synced
   (else CF_ERR_BAD_ARG); CF_TEAM_ALL cannot be freed.
   cf_team_size / cf_team_rank: 0 / (cf_image_t)-1 with CF_ERR_BAD_ARG for a
   handle that is not a live team of the calling image.
   A team handle is the image's own and is never reused: a freed team's, or
   another image's, is CF_ERR_BAD_ARG naming team (parent for cf_team_split)
   in every call that takes a team. Errors of cf_team_split: CF_ERR_BAD_ARG
   (parent not a live team of the image, newteam NULL, an aggregate open on
   parent); of cf_team_free: CF_ERR_BAD_ARG (CF_TEAM_ALL, CF_TEAM_NULL, not
   a live team of the image, collectives or an aggregate unfinished on it);
   all four: CF_ERR_NOT_INIT from a thread that is not an image. */
int cf_team_split(cf_team_t parent, int color, int key, cf_team_t *newteam);
int cf_team_free(cf_team_t team);
cf_image_t cf_team_size(cf_team_t team);
cf_image_t cf_team_rank(cf_team_t team);

/* ---- graphs ----------------------------------------------------------------
   Writes the global DAG of a live handle's collective (schema carflow.graph/1,
   README "Graph JSON") to path. Errors: CF_ERR_BAD_ARG (handle, path NULL or
   not writable). */
int cf_graph_dump_json(cf_coll_handle_t handle, const char *path);

/* ---- extensions: algorithm choice and statistics ------------------------- */
enum {
  CF_KIND_BROADCAST,
  CF_KIND_BARRIER,
  CF_KIND_ALLREDUCE,
  CF_KIND_SCATTER,
  CF_KIND_GATHER,
  CF_KIND_GATHER_ALL,
  CF_KIND_EXCHANGE,
  CF_KIND_PERMUTE,
  CF_KIND_REDUCE_VEC,
  CF_KIND_SCAN,
  CF_KIND_REDUCE_SCATTER,
  CF_KIND_REDUCE,
  CF_KIND_PREFIX_REDUCE
};
/* Forces the calling image's algorithm for a collective kind (NULL or "" =
   back to the default table). All images must make the same choice.
   Errors: CF_ERR_BAD_ARG naming the valid algorithms; CF_ERR_NOT_INIT. */
int cf_coll_set_algorithm(int kind, const char *name);
/* The algorithm the calling image would use for a call of nbytes
   (allreduce: elem_size-byte elements, built-in op); NULL with
   cf_last_status() CF_ERR_BAD_ARG on a bad kind, CF_ERR_NOT_INIT from a
   thread that is not an image. */
const char *cf_coll_algorithm(int kind, size_t nbytes, size_t elem_size);
typedef struct {
  uint64_t messages;       /* messages sent by all images of this node */
  uint64_t bytes;
  uint64_t eager;          /* copied into an internal buffer first */
  uint64_t direct;         /* copied straight into a posted receive */
  uint64_t single_copy;    /* large, copied once from the sender's buffer */
  uint64_t unexpected;     /* arrived before their receive was posted */
  uint64_t schedules_built; /* generator runs (schedule cache misses), all images */
  uint64_t fastbox;        /* small messages handed over in a per-VC ring (inproc) */
} cf_stats_t;
/* Counters since the images started; any thread may read them. Errors:
   CF_ERR_NOT_INIT (no images running), CF_ERR_BAD_ARG (out NULL). */
int cf_get_stats(cf_stats_t *out);
/* The schedule cache, summed over this node's images: each image keeps
   the schedules (compiled DAGs) of the calls it made, up to
   CF_SCHEDULE_CACHE_BYTES; past it the temp buffers of idle calls are
   freed, then the least used schedules since the last trim are dropped and
   built again when needed. Any thread. Errors: CF_ERR_NOT_INIT
   (no images running), CF_ERR_BAD_ARG (out NULL). */
typedef struct {
  uint64_t built;    /* schedules built (cache misses) */
  uint64_t evicted;  /* dropped to stay within the budget */
  uint64_t bytes;    /* held, as of each image's last miss or trim */
} cf_cache_stats_t;
int cf_get_cache_stats(cf_cache_stats_t *out);

/* Between processes (cfrun -n N with N > 1): the libfabric transport's
   protocol and counters since cf_init. With one node, provider is "" and
   every counter 0. Errors: CF_ERR_NOT_INIT (no cf_init, or after
   cf_finalize), CF_ERR_BAD_ARG (out NULL). */
typedef struct {
  const char *provider;   /* libfabric provider: "shm", "tcp;ofi_rxm", ... */
  uint64_t eager_bytes;   /* eager (data with the header) up to this size */
  uint64_t inject_bytes;  /* header + data up to this size leave with fi_tinject */
  uint64_t messages;      /* messages this node sent to other nodes */
  uint64_t bytes;
  uint64_t injected;      /* eager messages sent with fi_tinject (no send buffer) */
  uint64_t eager;         /* eager messages sent from a pooled send buffer */
  uint64_t rendezvous;    /* large messages sent by rendezvous: the receiver
                             read them (RTS, fi_read, FIN) or, between
                             processes of one host with host rings, the
                             sender streamed them once granted (RTS, CTS,
                             chunks through shared memory) or the receiver
                             read them (see direct_reads) */
  uint64_t unexpected;    /* arrivals with no posted receive */
  uint64_t credit_waits;  /* sends that waited for flow-control credits */
  uint64_t credit_msgs;   /* explicit credit returns sent */
  uint64_t mr_hits;       /* memory-registration cache hits and misses */
  uint64_t mr_misses;
  uint64_t host_ring;     /* small messages sent through shared-memory rings
                             (processes of one host, CF_HOST_RINGS) */
  uint64_t ring_spills;   /* small messages that found the ring full: each
                             waits, its send not complete, until the
                             sender's progress finds room (the receiver is
                             behind); they no longer go through libfabric */
  uint64_t direct_reads;  /* large messages this node received from a
                             process of its host by reading the sender's
                             buffer (process_vm_readv, one copy), as it does
                             while it is also sending to that process */
  uint64_t pumped_bytes;  /* bytes of large messages this node streamed to a
                             process of its host from inside a long local
                             copy (a broadcast or scatter root's own block
                             of 256 KiB or more, copied in 64 KiB slices
                             with the streams topped up between them) */
  uint64_t split_copies;  /* large messages this node received from a
                             process of its host by a split copy: it read
                             pieces from the front of the sender's buffer
                             while the sender wrote pieces from the back
                             into its own (messages of CF_HOST_SPLIT_BYTES,
                             default 32 KiB, and more) */
  uint64_t split_written_bytes; /* bytes this node wrote into receivers'
                             buffers for split copies */
} cf_net_stats_t;
int cf_get_net_stats(cf_net_stats_t *out);

#ifdef __cplusplus
}
#endif
#endif /* CARFLOW_CARFLOW_H */
