/* CF_HANG_DUMP_S on the public API: image 1 of 2 holds back from a
   broadcast rooted at it until the hang report about image 0 has been
   written (its DAG file appears in the directory given as argv[1]); then
   it enters, and both finish with the right data. tests/hang_test.sh runs
   it and checks the stderr line and the file. No sleeps as
   synchronization: image 1 polls for the file, with a deadline.
   `hang_report DIR lost`, under cfrun -n 2: node 1 kills itself instead of
   entering, once node 0's broadcast has started (node 0 writes DIR/posted),
   and node 0's broadcast must return CF_ERR_PEER_LOST, which writes the
   same report ("a peer was lost"). */
#include <carflow/carflow.h>

#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define kFlags (CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS)

static const char *g_dir;
static int g_failures;
static int g_lost_mode;

static int report_written(void) {
  DIR *d = opendir(g_dir);
  if (d == NULL) return 0;
  int found = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) found |= strncmp(e->d_name, "carflow-hang-", 13) == 0;
  closedir(d);
  return found;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void body(cf_image_t me, void *arg) {
  (void)arg;
  unsigned char src[8] = {1, 2, 3, 4, 5, 6, 7, 8}, dst[8] = {0};
  if (me == 0) {  /* the engine (and its SIGUSR1 handler) exists: a test may signal now */
    printf("images started\n");
    fflush(stdout);
  }
  if (g_lost_mode) {
    /* Node 1 dies only once node 0's broadcast waits for its message (the
       file `posted` says so): a loss seen before node 0 starts would fail
       that broadcast at once, with nothing waiting to report. */
    char posted[4096];
    snprintf(posted, sizeof posted, "%s/posted", g_dir);
    if (cf_mynode() == 1) {
      const double deadline = now_s() + 60;
      FILE *f = NULL;
      while ((f = fopen(posted, "r")) == NULL && now_s() < deadline) {
      }
      if (f != NULL) fclose(f);
      raise(SIGKILL);
    }
    const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst, 1, src, sizeof src, kFlags);
    FILE *f = fopen(posted, "w");
    if (f != NULL) fclose(f);
    const int rc = cf_coll_wait_sync(h);
    printf("lost: status %d (%s)\n", rc, rc == CF_ERR_PEER_LOST ? "CF_ERR_PEER_LOST" : "unexpected");
    if (rc != CF_ERR_PEER_LOST) __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED);
    return;
  }
  if (me == 1) {
    const double deadline = now_s() + 60;
    while (!report_written() && now_s() < deadline) {
    }
    if (!report_written()) {
      printf("FAIL: no hang report within 60 s\n");
      __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED);
    }
  }
  const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst, 1, src, sizeof src, kFlags);
  if (rc != CF_OK || memcmp(dst, src, sizeof src) != 0) {
    printf("FAIL image %u: status %d: %s\n", me, rc, cf_last_error());
    __atomic_add_fetch(&g_failures, 1, __ATOMIC_RELAXED);
  }
}

int main(int argc, char **argv) {
  if (argc != 2 && !(argc == 3 && strcmp(argv[2], "lost") == 0)) {
    fprintf(stderr, "usage: hang_report DIR [lost] (also CF_TRACE=DIR CF_HANG_DUMP_S=S)\n");
    return 2;
  }
  g_dir = argv[1];
  g_lost_mode = argc == 3;
  cf_set_error_mode(CF_ERRORS_RETURN);
  if (cf_init(&argc, &argv) != CF_OK || cf_run_images(g_lost_mode ? 1 : 2, NULL, 0, body, NULL) != CF_OK) {
    printf("FAIL: %s\n", cf_last_error());
    return 1;
  }
  const int fin = cf_finalize();
  printf("hang_report: %d failures, cf_finalize %d\n", g_failures, fin);
  return g_failures == 0 && (fin == CF_OK || g_lost_mode) ? 0 : 1;
}
