/* Plug-in generators through the public API: the example plug-in
   (api/examples/example_plugin.c, loaded by CF_PLUGINS from tests/BUILD)
   runs its broadcast, allreduce and gather_all on 1 to 13 images as
   threads, each destination checked against a sequential reference; wrong
   generators registered here are refused with CF_ERR_BAD_ARG on every
   image, naming the generator and the defect, and change nothing; bad
   registrations are refused. Under cfrun (tests/plugin_mp_test.sh) every
   process loads the plug-in and the same checks run across processes.
   With the arguments `bad-plugin PATH [REASON]` it checks instead that
   cf_init fails naming PATH (and REASON) when CF_PLUGINS names a library
   that does not load, lacks cf_plugin_init, or whose cf_plugin_init fails. With
   `disagree` (under cfrun and CF_CHECK=1) only node 0 registers a
   generator and asks for it, and with `disagree-env` CF_ALGO_BROADCAST
   differs between nodes: every image must get CF_ERR_MISMATCH naming the
   algorithm argument, the algorithm it chose, and the registered
   generators and CF_ALGO_BROADCAST as what differs, not hang. With `algo-env before|after|unknown`
   CF_ALGO_BROADCAST names a flat broadcast the program registers before
   or after cf_init (cf_init must accept it, the first broadcast find it;
   its calls are counted and the data checked on 1 to 5 images), or a name
   nobody registers: every image's first broadcast is refused with
   CF_ERR_BAD_ARG naming the variable and the name, nothing started. */
#include <carflow/generator.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define kFlags (CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS)
#define kMaxImages 13

static int g_failures, g_checks;

static void expect(int ok, const char *what, unsigned images, unsigned image, const char *detail) {
  __atomic_add_fetch(&g_checks, 1, __ATOMIC_RELAXED);
  if (!ok && __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED) <= 20) {
    printf("FAIL P=%u image %u: %s: %s\n", images, image, what, detail);
  }
}

/* Wrong generators. */
static int bad_peer(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  cf_buf_t b = {CF_SPACE_DST, 0, 0, s->nbytes};
  if (s->image == 0) cf_dag_send(dag, s->images, b, 0, 0); /* no such rank */
  return CF_OK;
}
static int unmatched(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  cf_buf_t b = {CF_SPACE_DST, 0, 0, s->nbytes};
  if (s->image == 0 && s->images > 1) cf_dag_send(dag, 1, b, 0, 0); /* image 1 posts no receive */
  return CF_OK;
}
static int past_end(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  cf_buf_t b = {CF_SPACE_DST, 0, 1, s->nbytes}; /* one byte too far */
  cf_car_t j = cf_dag_join(dag, 0, 0);
  cf_dag_copy(dag, b, b, &j, 1);
  return CF_OK;
}
static int refuses(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)s, (void)dag, (void)arg;
  return CF_ERR_BAD_ARG;
}

static uint64_t value(unsigned image, unsigned k) { return image * 1000003ull + k * 7ull + 1; }

static void body(cf_image_t me, void *arg) {
  const unsigned P = cf_images();
  char detail[512];
  (void)arg;
  /* broadcast of 1000 bytes from the last image */
  {
    unsigned char src[1000], dst[1000];
    for (int k = 0; k < 1000; ++k) src[k] = (unsigned char)(me * 31 + k);
    memset(dst, 0, sizeof dst);
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, "example_binomial");
    if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst, P - 1, src, sizeof src, kFlags);
    int ok = rc == CF_OK;
    for (int k = 0; ok && k < 1000; ++k) ok = dst[k] == (unsigned char)((P - 1) * 31 + k);
    snprintf(detail, sizeof detail, "status %d: %s", rc, rc ? cf_last_error() : "wrong data");
    expect(ok, "example_binomial broadcast", P, me, detail);
  }
  /* allreduce of 37 uint64 sums */
  {
    uint64_t src[37], dst[37];
    for (unsigned k = 0; k < 37; ++k) src[k] = value(me, k);
    int rc = cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "example_reduce_bcast");
    if (rc == CF_OK) rc = cf_coll_allreduce(CF_TEAM_ALL, dst, src, 8, 37, CF_BUILTIN(CF_OP_SUM, CF_DT_UINT64), 0, kFlags);
    int ok = rc == CF_OK;
    for (unsigned k = 0; ok && k < 37; ++k) {
      uint64_t want = 0;
      for (unsigned i = 0; i < P; ++i) want += value(i, k);
      ok = dst[k] == want;
    }
    snprintf(detail, sizeof detail, "status %d: %s", rc, rc ? cf_last_error() : "wrong sum");
    expect(ok, "example_reduce_bcast allreduce", P, me, detail);
  }
  /* gather_all of 24-byte blocks */
  {
    uint64_t src[3], dst[3 * kMaxImages];
    for (unsigned k = 0; k < 3; ++k) src[k] = value(me, k);
    int rc = cf_coll_set_algorithm(CF_KIND_GATHER_ALL, "example_ring");
    if (rc == CF_OK) rc = cf_coll_gather_all(CF_TEAM_ALL, dst, src, sizeof src, kFlags);
    int ok = rc == CF_OK;
    for (unsigned i = 0; ok && i < P; ++i) {
      for (unsigned k = 0; ok && k < 3; ++k) ok = dst[i * 3 + k] == value(i, k);
    }
    snprintf(detail, sizeof detail, "status %d: %s", rc, rc ? cf_last_error() : "wrong block");
    expect(ok, "example_ring gather_all", P, me, detail);
  }
  /* Wrong generators: refused on every image, naming what is wrong. */
  {
    struct { const char *name, *says; unsigned min_images; } bad[] = {
        {"test_bad_peer", "cf_dag_send: peer", 2},
        {"test_unmatched", "whole-team check", 2},
        {"test_past_end", "cf_dag_copy", 1},
        {"test_refuses", "returned CF_ERR_BAD_ARG", 1},
    };
    unsigned char src[8] = {1}, dst[8];
    for (unsigned b = 0; b < sizeof bad / sizeof bad[0]; ++b) {
      if (P < bad[b].min_images) continue;
      int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, bad[b].name);
      if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src, sizeof src, kFlags);
      const char *msg = cf_last_error();
      snprintf(detail, sizeof detail, "status %d: %s", rc, msg);
      expect(rc == CF_ERR_BAD_ARG && strstr(msg, bad[b].name) != NULL && strstr(msg, bad[b].says) != NULL,
             bad[b].name, P, me, detail);
    }
  }
  /* Nothing changed: a built-in broadcast after the refusals. */
  {
    unsigned char src[8], dst[8] = {0};
    for (int k = 0; k < 8; ++k) src[k] = (unsigned char)(me + k);
    int rc = cf_coll_set_algorithm(CF_KIND_BROADCAST, NULL);
    if (rc == CF_OK) rc = cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src, sizeof src, kFlags);
    int ok = rc == CF_OK;
    for (int k = 0; ok && k < 8; ++k) ok = dst[k] == (unsigned char)k;
    snprintf(detail, sizeof detail, "status %d: %s", rc, rc ? cf_last_error() : "wrong data");
    expect(ok, "built-in broadcast after the refusals", P, me, detail);
  }
}

static void registration_errors(void) {
  struct { int kind; const char *name; cf_generator_fn fn; int flags; const char *says; } cases[] = {
      {CF_KIND_BROADCAST, "binomial", bad_peer, 0, "already has an algorithm 'binomial'"},
      {CF_KIND_BROADCAST, "example_binomial", bad_peer, 0, "already has an algorithm 'example_binomial'"},
      {CF_KIND_BROADCAST, "x", NULL, 0, "fn: NULL"},
      {CF_KIND_BROADCAST, "", bad_peer, 0, "name: must be 1 to 64 bytes"},
      {CF_KIND_BROADCAST, NULL, bad_peer, 0, "name: NULL"},
      {CF_KIND_BROADCAST, "two words", bad_peer, 0, "outside [A-Za-z0-9_.-]"},
      {99, "x", bad_peer, 0, "kind: expected a CF_KIND_*"},
      {CF_KIND_BROADCAST, "x", bad_peer, 1 << 7, "gen_flags: only"},
  };
  for (unsigned c = 0; c < sizeof cases / sizeof cases[0]; ++c) {
    const int rc = cf_generator_register(cases[c].kind, cases[c].name, cases[c].fn, NULL, cases[c].flags, NULL);
    expect(rc == CF_ERR_BAD_ARG && strstr(cf_last_error(), cases[c].says) != NULL, "cf_generator_register refuses",
           0, 0, cf_last_error());
  }
}

/* Node 0 uses "only_on_node0"; the other nodes do not have it, so they keep
   the default broadcast. */
static int only_here(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  (void)arg;
  cf_buf_t d = {CF_SPACE_DST, 0, 0, s->nbytes}, src = {CF_SPACE_SRC, 0, 0, s->nbytes};
  if (s->image == s->root) {
    cf_car_t c = cf_dag_copy(dag, d, src, 0, 0);
    for (uint32_t i = 0; i < s->images; ++i) {
      if (i != s->root) cf_dag_send(dag, i, src, &c, 0);
    }
  } else {
    cf_dag_recv(dag, s->root, d, 0, 0);
  }
  return CF_OK;
}

/* algo-env: only_here counted, under CF_ALGO_BROADCAST. */
#define kProgramFlat "program_flat"
static int g_flat_calls;
static int counted_flat(const cf_gen_spec_t *s, cf_dag_t *dag, void *arg) {
  __atomic_add_fetch(&g_flat_calls, 1, __ATOMIC_RELAXED);
  return only_here(s, dag, arg);
}

static void register_flat(const char *what) {
  const int rc = cf_generator_register(CF_KIND_BROADCAST, kProgramFlat, counted_flat, NULL, 0, NULL);
  expect(rc == CF_OK, what, 0, 0, cf_last_error());
}

static void algo_env_body(cf_image_t me, void *arg) {
  const unsigned P = cf_images();
  const int known = *(const int *)arg;
  char detail[512];
  unsigned char src[100], dst[100];
  for (int k = 0; k < 100; ++k) src[k] = (unsigned char)(me * 13 + k);
  memset(dst, 0xee, sizeof dst);
  const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst, P - 1, src, sizeof src, kFlags);
  const char *msg = cf_last_error();
  int ok = known ? rc == CF_OK
                 : rc == CF_ERR_BAD_ARG && strstr(msg, "CF_ALGO_BROADCAST='no_such_algo': unknown broadcast algorithm");
  for (int k = 0; ok && k < 100; ++k) ok = dst[k] == (known ? (unsigned char)((P - 1) * 13 + k) : 0xee);
  snprintf(detail, sizeof detail, "status %d: %s", rc, rc ? msg : "wrong data");
  expect(ok, known ? "broadcast by the program's generator" : "an unknown name refused, nothing started", P, me,
         detail);
  const int barrier = cf_coll_barrier(CF_TEAM_ALL, kFlags);
  expect(barrier == CF_OK, "a barrier after it", P, me, cf_last_error());
}

static int algo_env(const char *mode, int *argc, char ***argv) {
  const int known = strcmp(mode, "unknown") != 0;
  setenv("CF_ALGO_BROADCAST", known ? kProgramFlat : "no_such_algo", 1);
  const int before = strcmp(mode, "before") == 0;
  if (known && before) register_flat("cf_generator_register before cf_init");
  if (cf_init(argc, argv) != CF_OK) {
    printf("FAIL cf_init: %s\n", cf_last_error());
    return 1;
  }
  if (known && !before) register_flat("cf_generator_register after cf_init");
  for (cf_image_t P = 1; P <= 5; ++P) {
    if (cf_run_images(P, NULL, 0, algo_env_body, (void *)&known) != CF_OK) {
      printf("FAIL cf_run_images(%u): %s\n", P, cf_last_error());
      g_failures++;
    }
  }
  /* At least each image's own DAG at each P of 1 to 5; none for an unknown name. */
  const int calls = __atomic_load_n(&g_flat_calls, __ATOMIC_RELAXED);
  expect(known ? calls >= 15 : calls == 0, "the program's generator was the one that ran", 0, 0, mode);
  const int fin = cf_finalize();
  printf("plugin_test algo-env %s: %d checks, %d failures, %d generator calls, cf_finalize %d\n", mode, g_checks,
         g_failures, calls, fin);
  return g_failures == 0 && fin == CF_OK ? 0 : 1;
}

/* Images whose broadcast algorithms differ (arg non-NULL: by CF_ALGO_BROADCAST,
   set per node before cf_init) get CF_ERR_MISMATCH naming the argument, the
   algorithm this image chose and what to compare between processes. */
static void disagree_body(cf_image_t me, void *arg) {
  char detail[1024], own[128];
  if (arg == NULL) {
    const int chose = cf_coll_set_algorithm(CF_KIND_BROADCAST, "only_on_node0");
    expect((chose == CF_OK) == (cf_mynode() == 0), "only node 0 knows the algorithm", cf_images(), me,
           cf_last_error());
  }
  unsigned char src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8] = {0};
  const char *mine = cf_coll_algorithm(CF_KIND_BROADCAST, sizeof src, 1);
  snprintf(own, sizeof own, "chose '%s' for this broadcast", mine != NULL ? mine : "(none)");
  const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst, 0, src, sizeof src, kFlags);
  const char *msg = cf_last_error();
  printf("disagree: image %u: %s\n", me, msg);
  snprintf(detail, sizeof detail, "status %d: %s (expected the words \"%s\")", rc, msg, own);
  expect(rc == CF_ERR_MISMATCH && strstr(msg, "argument algorithm differs between images") != NULL &&
             strstr(msg, own) != NULL && strstr(msg, "registered generators") != NULL &&
             strstr(msg, "CF_ALGO_BROADCAST") != NULL,
         "images that chose different algorithms get CF_ERR_MISMATCH naming their choice", cf_images(), me, detail);
  cf_coll_set_algorithm(CF_KIND_BROADCAST, NULL);
}

/* disagree: only node 0 registers and asks for only_on_node0.
   disagree-env: CF_ALGO_BROADCAST is binomial on node 0, flat elsewhere. */
static int disagree(int by_env, int *argc, char ***argv) {
  if (by_env) {
    const char *rank = getenv("CF_RANK");
    setenv("CF_ALGO_BROADCAST", rank != NULL && atoi(rank) == 0 ? "binomial" : "flat", 1);
  }
  if (cf_init(argc, argv) != CF_OK) {
    printf("FAIL cf_init: %s\n", cf_last_error());
    return 1;
  }
  if (!by_env && cf_mynode() == 0) cf_generator_register(CF_KIND_BROADCAST, "only_on_node0", only_here, NULL, 0, NULL);
  const char *launched = getenv("CF_IMAGES");
  if (cf_run_images(launched != NULL ? (cf_image_t)atoi(launched) : 1, NULL, 0, disagree_body,
                    by_env ? (void *)&by_env : NULL) != CF_OK) {
    printf("FAIL cf_run_images: %s\n", cf_last_error());
    g_failures++;
  }
  const int fin = cf_finalize();
  printf("plugin_test: %d checks, %d failures, cf_finalize %d\n", g_checks, g_failures, fin);
  return g_failures == 0 && fin == CF_OK ? 0 : 1;
}

int main(int argc, char **argv) {
  cf_set_error_mode(CF_ERRORS_RETURN);
  if (argc == 2 && strcmp(argv[1], "disagree") == 0) return disagree(0, &argc, &argv);
  if (argc == 2 && strcmp(argv[1], "disagree-env") == 0) return disagree(1, &argc, &argv);
  if (argc == 3 && strcmp(argv[1], "algo-env") == 0) return algo_env(argv[2], &argc, &argv);
  if ((argc == 3 || argc == 4) && strcmp(argv[1], "bad-plugin") == 0) {
    setenv("CF_PLUGINS", argv[2], 1);
    const char *reason = argc == 4 ? argv[3] : "";
    const int rc = cf_init(&argc, &argv);
    const int ok = rc == CF_ERR_BAD_ARG && strstr(cf_last_error(), argv[2]) != NULL &&
                   strstr(cf_last_error(), reason) != NULL;
    printf("%s: cf_init returned %d: %s\n", ok ? "PASS" : "FAIL", rc, cf_last_error());
    return ok ? 0 : 1;
  }
  if (cf_init(&argc, &argv) != CF_OK) {
    printf("FAIL cf_init: %s\n", cf_last_error());
    return 1;
  }
  registration_errors();
  cf_generator_register(CF_KIND_BROADCAST, "test_bad_peer", bad_peer, NULL, 0, "sends to a rank past the team");
  cf_generator_register(CF_KIND_BROADCAST, "test_unmatched", unmatched, NULL, 0, "a send nobody receives");
  cf_generator_register(CF_KIND_BROADCAST, "test_past_end", past_end, NULL, 0, "copies past dst");
  cf_generator_register(CF_KIND_BROADCAST, "test_refuses", refuses, NULL, 0, "builds nothing");
  /* Under cfrun (CF_IMAGES set) every node runs its images once; alone,
     1 to kMaxImages images in turn. */
  const char *launched = getenv("CF_IMAGES");
  const cf_image_t first = launched != NULL ? (cf_image_t)atoi(launched) : 1;
  const cf_image_t last = launched != NULL ? first : kMaxImages;
  for (cf_image_t P = first; P <= last; ++P) {
    if (cf_run_images(P, NULL, 0, body, NULL) != CF_OK) {
      printf("FAIL cf_run_images(%u): %s\n", P, cf_last_error());
      g_failures++;
    }
  }
  const int fin = cf_finalize();
  printf("plugin_test: %d checks, %d failures, cf_finalize %d\n", g_checks, g_failures, fin);
  return g_failures == 0 && fin == CF_OK ? 0 : 1;
}
