/* mpi_layer_spellings: libcarflow_mpi's Fortran entry points under every
   spelling. Each gfortran name given (mpi_x_, as the layer exports them)
   must resolve, in the preloaded program, to the layer's function under
   mpi_x, mpi_x__, MPI_X and ompi_x_f too (the same address, in
   libcarflow_mpi.so); then a barrier through each spelling and an
   allreduce through two must run on carflow (cf_mpi_calls) with the right
   result.

     mpirun -np P -x LD_PRELOAD=.../libcarflow_mpi.so mpi_layer_spellings mpi_bcast_ ...

   Prints "mpi_layer_spellings: rank R: N checks, F failures"; exits 1 when
   a check failed. */
#define _GNU_SOURCE
#include <ctype.h>
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

static long g_checks, g_failures;
static int g_rank;

#define CHECK(cond, ...)                                      \
  do {                                                        \
    ++g_checks;                                               \
    if (!(cond)) {                                            \
      ++g_failures;                                           \
      fprintf(stderr, "rank %d: wrong: ", g_rank);            \
      fprintf(stderr, __VA_ARGS__);                           \
      fputc('\n', stderr);                                    \
    }                                                         \
  } while (0)

/* name's other spellings; gfortran is "mpi_x_". */
static void spellings(const char *gfortran, char out[4][128]) {
  size_t n = strlen(gfortran) - 1; /* without the trailing underscore */
  snprintf(out[0], 128, "%.*s", (int)n, gfortran);
  snprintf(out[1], 128, "%.*s__", (int)n, gfortran);
  for (size_t i = 0; i <= n; ++i) out[2][i] = i < n ? (char)toupper((unsigned char)gfortran[i]) : '\0';
  snprintf(out[3], 128, "o%.*s_f", (int)n, gfortran);
}

static int in_layer(void *fn) {
  Dl_info info;
  return fn != NULL && dladdr(fn, &info) != 0 && info.dli_fname != NULL &&
         strstr(info.dli_fname, "libcarflow_mpi") != NULL;
}

typedef int (*calls_fn)(const char *, uint64_t *, uint64_t *);

static uint64_t on_carflow(calls_fn calls, const char *fn) {
  uint64_t cf = 0, mpi = 0;
  calls(fn, &cf, &mpi);
  return cf;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
  int size = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int a = 1; a < argc; ++a) {
    void *gfortran = dlsym(RTLD_DEFAULT, argv[a]);
    CHECK(in_layer(gfortran), "%s is not the layer's", argv[a]);
    char other[4][128];
    spellings(argv[a], other);
    for (int s = 0; s < 4; ++s) {
      void *fn = dlsym(RTLD_DEFAULT, other[s]);
      CHECK(fn == gfortran && in_layer(fn), "%s is not the layer's %s", other[s], argv[a]);
    }
  }
  calls_fn calls = (calls_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "cf_mpi_calls");
  CHECK(calls != NULL, "cf_mpi_calls not found: is the layer preloaded?");
  if (calls != NULL) {
    MPI_Fint comm = MPI_Comm_c2f(MPI_COMM_WORLD), ierr = -1;
    const char *barriers[] = {"mpi_barrier_", "mpi_barrier", "mpi_barrier__", "MPI_BARRIER", "ompi_barrier_f"};
    for (int s = 0; s < 5; ++s) {
      void (*barrier)(MPI_Fint *, MPI_Fint *) =
          (void (*)(MPI_Fint *, MPI_Fint *))(uintptr_t)dlsym(RTLD_DEFAULT, barriers[s]);
      const uint64_t before = on_carflow(calls, "MPI_Barrier");
      if (barrier != NULL) barrier(&comm, &ierr);
      CHECK(barrier != NULL && ierr == MPI_SUCCESS && on_carflow(calls, "MPI_Barrier") == before + 1,
            "%s did not run on carflow", barriers[s]);
    }
    const char *allreduces[] = {"mpi_allreduce__", "MPI_ALLREDUCE"};
    for (int s = 0; s < 2; ++s) {
      void (*allreduce)(const void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *) =
          (void (*)(const void *, void *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *, MPI_Fint *))(uintptr_t)
              dlsym(RTLD_DEFAULT, allreduces[s]);
      int mine = g_rank + 1 + s, sum = -1;
      MPI_Fint count = 1, type = MPI_Type_c2f(MPI_INT), op = MPI_Op_c2f(MPI_SUM);
      const uint64_t before = on_carflow(calls, "MPI_Allreduce");
      if (allreduce != NULL) allreduce(&mine, &sum, &count, &type, &op, &comm, &ierr);
      CHECK(allreduce != NULL && ierr == MPI_SUCCESS && sum == size * (size + 1) / 2 + s * size &&
                on_carflow(calls, "MPI_Allreduce") == before + 1,
            "%s: sum %d, or not on carflow", allreduces[s], sum);
    }
  }
  printf("mpi_layer_spellings: rank %d: %ld checks, %ld failures\n", g_rank, g_checks, g_failures);
  MPI_Finalize();
  return g_failures == 0 ? 0 : 1;
}
