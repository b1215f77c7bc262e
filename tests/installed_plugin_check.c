/* A user's program against an installed carflow: tests/installed_test.sh
   builds it with cc and pkg-config, outside Bazel, and loads the example
   plug-in (share/carflow/examples/example_plugin.c) through CF_PLUGINS.
   Each algorithm the example registers runs on every image and each
   destination is checked, with the guard bytes past it, against a
   reference computed here, sequentially:
     broadcast  example_binomial      every root, 1 B to past the eager size
     allreduce  example_reduce_bcast  uint64 sums, and a non-commutative
                                      client function (the example claims
                                      CF_GEN_PRESERVES_ORDER)
     gather_all example_ring          odd and large blocks
   Usage: installed_plugin_check set|env [MAX_IMAGES]
     set  chooses the algorithms with cf_coll_set_algorithm;
     env  expects CF_ALGO_<KIND> to have chosen them.
   Either way cf_coll_algorithm must name the example's algorithm, so a
   choice that fell back to a built-in fails. Alone it runs 1 to MAX_IMAGES
   (default 13) images as threads; under cfrun (CF_IMAGES set) each process
   runs its images once. One summary line; exit 0 only if all passed. */
#include <carflow/carflow.h>

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define kFlags (CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS)
#define kGuard 16
#define kGuardByte 0xA5

static atomic_int g_checks, g_failures;
static int g_use_set_algorithm;

/* Image threads never stop the run: they count and print, main reports. */
static void expect(int ok, const char *what, unsigned images, unsigned image, const char *detail) {
  atomic_fetch_add(&g_checks, 1);
  if (!ok && atomic_fetch_add(&g_failures, 1) < 20) {
    printf("FAIL P=%u image %u: %s: %s\n", images, image, what, detail);
    fflush(stdout);
  }
}

static unsigned char pattern(unsigned image, size_t k, unsigned salt) {
  return (unsigned char)(image * 131u + k * 7u + salt * 17u + 1u);
}
static uint64_t value(unsigned image, size_t k) { return image * 1000003ull + k * 7919ull + 1; }

/* nbytes plus guard bytes, which no collective may touch. 16-aligned, as
   the computational kinds need. */
static unsigned char *guarded(size_t nbytes) {
  unsigned char *p = aligned_alloc(16, (nbytes + kGuard + 15) / 16 * 16);
  if (p != NULL) memset(p, kGuardByte, nbytes + kGuard);
  return p;
}
static int guard_intact(const unsigned char *p, size_t nbytes) {
  for (size_t k = 0; k < kGuard; ++k) {
    if (p[nbytes + k] != kGuardByte) return 0;
  }
  return 1;
}

/* Chooses (set mode) or expects (env mode) the example's algorithm, and
   checks it is the one a call of this size would run. */
static int use_algorithm(int kind, const char *name, size_t nbytes, size_t elem_size, unsigned P, unsigned me) {
  char detail[256];
  if (g_use_set_algorithm && cf_coll_set_algorithm(kind, name) != CF_OK) {
    expect(0, "cf_coll_set_algorithm", P, me, cf_last_error());
    return 0;
  }
  const char *chosen = cf_coll_algorithm(kind, nbytes, elem_size);
  snprintf(detail, sizeof detail, "wanted %s, carflow would run %s", name, chosen ? chosen : cf_last_error());
  expect(chosen != NULL && strcmp(chosen, name) == 0, "algorithm choice", P, me, detail);
  return chosen != NULL && strcmp(chosen, name) == 0;
}

static void check_broadcast(unsigned P, unsigned me) {
  static const size_t sizes[] = {1, 1000, 70000}; /* 70000: past the eager size between processes */
  char what[128], detail[256];
  for (unsigned s = 0; s < sizeof sizes / sizeof sizes[0]; ++s) {
    const size_t n = sizes[s];
    if (!use_algorithm(CF_KIND_BROADCAST, "example_binomial", n, 1, P, me)) return;
    unsigned char *src = guarded(n), *dst = guarded(n);
    for (unsigned root = 0; root < P; ++root) {
      for (size_t k = 0; k < n; ++k) src[k] = pattern(me, k, root);
      memset(dst, 0, n);
      const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst, root, src, n, kFlags);
      size_t bad = 0;
      while (rc == CF_OK && bad < n && dst[bad] == pattern(root, bad, root)) ++bad;
      snprintf(what, sizeof what, "example_binomial broadcast nbytes=%zu root=%u", n, root);
      snprintf(detail, sizeof detail, "status %d %s; first wrong byte %zu", rc, rc ? cf_last_error() : "", bad);
      expect(rc == CF_OK && bad == n && guard_intact(dst, n), what, P, me, detail);
    }
    free(src);
    free(dst);
  }
}

/* x -> a x + b on uint64 pairs, composed left to right: associative, not
   commutative, so an operand taken out of rank order shows. */
static void affine_combine(uint64_t out[2], const uint64_t l[2], const uint64_t r[2]) {
  const uint64_t a = l[0] * r[0], b = r[0] * l[1] + r[1];
  out[0] = a;
  out[1] = b;
}

/* cf_coll_reduce_fn: results[i] = fold of the left operands, then right[0..i]. */
static void affine_fn(void *results, size_t result_count, const void *left, size_t left_count, const void *right,
                      size_t elem_size, int flags, int arg) {
  (void)elem_size, (void)flags, (void)arg;
  uint64_t acc[2];
  int have = 0;
  for (size_t i = 0; i < left_count + result_count; ++i) {
    uint64_t x[2];
    memcpy(x, i < left_count ? (const char *)left + 16 * i : (const char *)right + 16 * (i - left_count), 16);
    if (have) affine_combine(acc, acc, x);
    else memcpy(acc, x, 16), have = 1;
    if (i >= left_count) memcpy((char *)results + 16 * (i - left_count), acc, 16);
  }
}

static const cf_coll_fn_entry_t kFunctions[] = {{(cf_coll_fn_t)affine_fn, CF_COLL_NONCOMM}};

/* One allreduce: `affine` picks the client function (16-byte pairs), else
   uint64 sums; the reference folds images 0..P-1 in order. */
static void check_allreduce_case(unsigned P, unsigned me, size_t count, int affine) {
  const size_t elem = affine ? 16 : 8, words = count * elem / 8;
  char what[128], detail[256];
  uint64_t *src = (uint64_t *)guarded(count * elem), *dst = (uint64_t *)guarded(count * elem);
  for (size_t w = 0; w < words; ++w) src[w] = value(me, w);
  const int func = affine ? 0 : CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64);
  const int rc = cf_coll_allreduce(CF_TEAM_ALL, dst, src, elem, count, func, 0, kFlags);
  size_t bad = 0;
  for (; rc == CF_OK && bad < count; ++bad) {
    uint64_t want[2] = {value(0, bad * elem / 8), affine ? value(0, bad * 2 + 1) : 0};
    for (unsigned i = 1; i < P; ++i) {
      if (affine) {
        const uint64_t x[2] = {value(i, bad * 2), value(i, bad * 2 + 1)};
        affine_combine(want, want, x);
      } else {
        want[0] += value(i, bad);
      }
    }
    if (memcmp(&dst[bad * elem / 8], want, elem) != 0) break;
  }
  snprintf(what, sizeof what, "example_reduce_bcast allreduce %s count=%zu", affine ? "affine (NONCOMM)" : "uint64 sum",
           count);
  snprintf(detail, sizeof detail, "status %d %s; first wrong element %zu", rc, rc ? cf_last_error() : "", bad);
  expect(rc == CF_OK && bad == count && guard_intact((unsigned char *)dst, count * elem), what, P, me, detail);
  free(src);
  free(dst);
}

static void check_allreduce(unsigned P, unsigned me) {
  static const size_t counts[] = {1, 37, 5000};
  for (unsigned c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    if (!use_algorithm(CF_KIND_ALLREDUCE, "example_reduce_bcast", counts[c] * 8, 8, P, me)) return;
    check_allreduce_case(P, me, counts[c], 0);
    check_allreduce_case(P, me, counts[c], 1);
  }
}

static void check_gather_all(unsigned P, unsigned me) {
  static const size_t blocks[] = {1, 24, 333, 20000};
  char what[128], detail[256];
  for (unsigned b = 0; b < sizeof blocks / sizeof blocks[0]; ++b) {
    const size_t n = blocks[b];
    if (!use_algorithm(CF_KIND_GATHER_ALL, "example_ring", n, 1, P, me)) return;
    unsigned char *src = guarded(n), *dst = guarded(n * P);
    for (size_t k = 0; k < n; ++k) src[k] = pattern(me, k, b);
    memset(dst, 0, n * P);
    const int rc = cf_coll_gather_all(CF_TEAM_ALL, dst, src, n, kFlags);
    size_t bad = 0;
    while (rc == CF_OK && bad < n * P && dst[bad] == pattern((unsigned)(bad / n), bad % n, b)) ++bad;
    snprintf(what, sizeof what, "example_ring gather_all block=%zu", n);
    snprintf(detail, sizeof detail, "status %d %s; first wrong byte %zu (block %zu)", rc, rc ? cf_last_error() : "",
             bad, bad / n);
    expect(rc == CF_OK && bad == n * P && guard_intact(dst, n * P), what, P, me, detail);
    free(src);
    free(dst);
  }
}

static void body(cf_image_t me, void *arg) {
  (void)arg;
  const unsigned P = cf_images();
  check_broadcast(P, me);
  check_allreduce(P, me);
  check_gather_all(P, me);
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "set") != 0 && strcmp(argv[1], "env") != 0)) {
    fprintf(stderr, "usage: installed_plugin_check set|env [MAX_IMAGES]\n");
    return 2;
  }
  g_use_set_algorithm = strcmp(argv[1], "set") == 0;
  const cf_image_t max_images = argc > 2 ? (cf_image_t)atoi(argv[2]) : 13;
  cf_set_error_mode(CF_ERRORS_RETURN);
  if (cf_init(&argc, &argv) != CF_OK) {
    fprintf(stderr, "installed_plugin_check: %s\n", cf_last_error());
    return 1;
  }
  /* Under cfrun each process runs the CF_IMAGES images it was given. */
  const char *launched = getenv("CF_IMAGES");
  const cf_image_t first = launched != NULL ? (cf_image_t)atoi(launched) : 1;
  const cf_image_t last = launched != NULL ? first : max_images;
  for (cf_image_t n = first; n <= last; ++n) {
    if (cf_run_images(n, kFunctions, 1, body, NULL) != CF_OK) {
      printf("FAIL cf_run_images(%u): %s\n", n, cf_last_error());
      atomic_fetch_add(&g_failures, 1);
    }
  }
  const cf_node_t node = cf_mynode();
  const int fin = cf_finalize();
  printf("installed_plugin_check: node %u, %d checks, %d failures, cf_finalize %d\n", node,
         atomic_load(&g_checks), atomic_load(&g_failures), fin);
  return atomic_load(&g_failures) == 0 && fin == CF_OK ? 0 : 1;
}
