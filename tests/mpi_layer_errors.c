/* mpi_layer_errors: every class of erroneous collective call a program can
 * make, under MPI_ERRORS_RETURN, through libcarflow_mpi or without it: a bad
 * root, a negative count, a null datatype or op, aliased buffers, a freed
 * communicator, a call after MPI_Finalize; blocking and nonblocking forms, on MPI_COMM_WORLD and
 * on a duplicate (which has a team). Each call must return the error class
 * Open MPI alone returns, and the next valid collective must still work.
 * Prints one line per call, "errors: rank R: CALL: class NAME", so the test
 * compares the runs with and without the layer line by line, then
 * "errors: rank R: N checks, M failures".
 *   mpirun -np P [-x LD_PRELOAD=.../libcarflow_mpi.so] mpi_layer_errors [after-finalize [CALL]]
 * With after-finalize it calls MPI_Barrier (or CALL: gather, scatter,
 * reduce_scatter, allgatherv) after MPI_Finalize, which Open MPI reports,
 * naming that call, and aborts; the test compares both ways. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank, size, checks, failures;

static const char* class_name(int cls) {
  switch (cls) {
    case MPI_SUCCESS: return "MPI_SUCCESS";
    case MPI_ERR_ROOT: return "MPI_ERR_ROOT";
    case MPI_ERR_COUNT: return "MPI_ERR_COUNT";
    case MPI_ERR_TYPE: return "MPI_ERR_TYPE";
    case MPI_ERR_OP: return "MPI_ERR_OP";
    case MPI_ERR_COMM: return "MPI_ERR_COMM";
    case MPI_ERR_BUFFER: return "MPI_ERR_BUFFER";
    case MPI_ERR_ARG: return "MPI_ERR_ARG";
    case MPI_ERR_TRUNCATE: return "MPI_ERR_TRUNCATE";
    case MPI_ERR_REQUEST: return "MPI_ERR_REQUEST";
    default: return "another class";
  }
}

/* The call's error class against Open MPI's, then one valid allreduce on
 * comm to show the communicator still works. */
static void expect(const char* call, int rc, int want, MPI_Comm comm) {
  int cls = rc;
  if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
  printf("errors: rank %d: %s: class %s\n", rank, call, class_name(cls));
  ++checks;
  if (cls != want) {
    ++failures;
    printf("errors: rank %d: %s: wanted %s\n", rank, call, class_name(want));
  }
  if (comm == MPI_COMM_NULL) comm = MPI_COMM_WORLD;
  int n = 0, one = 1, sum = 0;
  MPI_Comm_size(comm, &n);
  rc = MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, comm);
  ++checks;
  if (rc != MPI_SUCCESS || sum != n) {
    ++failures;
    printf("errors: rank %d: the allreduce after %s gave %d (rc %d)\n", rank, call, sum, rc);
  }
}

/* A request's outcome: the call's error, or the wait's. */
static int started(int rc, MPI_Request* request) {
  return rc != MPI_SUCCESS ? rc : MPI_Wait(request, MPI_STATUS_IGNORE);
}

static void bad_args(MPI_Comm comm) {
  int buf[8] = {0}, out[64] = {0}, counts[16], displs[16];
  MPI_Request r;
  for (int i = 0; i < 16; ++i) counts[i] = 1, displs[i] = i;
  expect("MPI_Bcast root = size", MPI_Bcast(buf, 2, MPI_INT, size, comm), MPI_ERR_ROOT, comm);
  expect("MPI_Bcast root = -5", MPI_Bcast(buf, 2, MPI_INT, -5, comm), MPI_ERR_ROOT, comm);
  expect("MPI_Ibcast root = size", started(MPI_Ibcast(buf, 2, MPI_INT, size, comm, &r), &r), MPI_ERR_ROOT, comm);
  expect("MPI_Reduce root = size", MPI_Reduce(buf, out, 2, MPI_INT, MPI_SUM, size, comm), MPI_ERR_ROOT, comm);
  expect("MPI_Gather root = size", MPI_Gather(buf, 1, MPI_INT, out, 1, MPI_INT, size, comm), MPI_ERR_ROOT, comm);
  expect("MPI_Scatter root = size", MPI_Scatter(out, 1, MPI_INT, buf, 1, MPI_INT, size, comm), MPI_ERR_ROOT, comm);
  expect("MPI_Gatherv root = size", MPI_Gatherv(buf, 1, MPI_INT, out, counts, displs, MPI_INT, size, comm),
         MPI_ERR_ROOT, comm);
  expect("MPI_Scatterv root = size", MPI_Scatterv(out, counts, displs, MPI_INT, buf, 1, MPI_INT, size, comm),
         MPI_ERR_ROOT, comm);
  expect("MPI_Bcast count -1", MPI_Bcast(buf, -1, MPI_INT, 0, comm), MPI_ERR_COUNT, comm);
  expect("MPI_Allreduce count -1", MPI_Allreduce(buf, out, -1, MPI_INT, MPI_SUM, comm), MPI_ERR_COUNT, comm);
  expect("MPI_Iallreduce count -1", started(MPI_Iallreduce(buf, out, -1, MPI_INT, MPI_SUM, comm, &r), &r),
         MPI_ERR_COUNT, comm);
  expect("MPI_Allgather count -1", MPI_Allgather(buf, -1, MPI_INT, out, -1, MPI_INT, comm), MPI_ERR_COUNT, comm);
  expect("MPI_Scan count -1", MPI_Scan(buf, out, -1, MPI_INT, MPI_SUM, comm), MPI_ERR_COUNT, comm);
  expect("MPI_Bcast datatype null", MPI_Bcast(buf, 2, MPI_DATATYPE_NULL, 0, comm), MPI_ERR_TYPE, comm);
  /* Open MPI checks the op against the datatype first. */
  expect("MPI_Allreduce datatype null", MPI_Allreduce(buf, out, 2, MPI_DATATYPE_NULL, MPI_SUM, comm), MPI_ERR_OP,
         comm);
  expect("MPI_Alltoall datatype null", MPI_Alltoall(out, 1, MPI_DATATYPE_NULL, out + 16, 1, MPI_INT, comm),
         MPI_ERR_TYPE, comm);
  expect("MPI_Allreduce op null", MPI_Allreduce(buf, out, 2, MPI_INT, MPI_OP_NULL, comm), MPI_ERR_OP, comm);
  expect("MPI_Reduce_scatter_block op null", MPI_Reduce_scatter_block(out, buf, 1, MPI_INT, MPI_OP_NULL, comm),
         MPI_ERR_OP, comm);
  expect("MPI_Allreduce same buffers", MPI_Allreduce(buf, buf, 2, MPI_INT, MPI_SUM, comm), MPI_ERR_BUFFER, comm);
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (argc > 1 && strcmp(argv[1], "after-finalize") == 0) {
    /* argv[2]: the call (barrier unless named); the layer asks a
       communicator for rank and size before some, never after MPI_Finalize. */
    const char* call = argc > 2 ? argv[2] : "barrier";
    int in[64] = {0}, out[64] = {0}, counts[64], displs[64];
    for (int i = 0; i < 64; ++i) counts[i] = 1, displs[i] = i;
    MPI_Finalize();
    int rc;
    if (strcmp(call, "gather") == 0) rc = MPI_Gather(in, 1, MPI_INT, out, 1, MPI_INT, 0, MPI_COMM_WORLD);
    else if (strcmp(call, "scatter") == 0) rc = MPI_Scatter(in, 1, MPI_INT, out, 1, MPI_INT, 0, MPI_COMM_WORLD);
    else if (strcmp(call, "reduce_scatter") == 0)
      rc = MPI_Reduce_scatter(in, out, counts, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    else if (strcmp(call, "allgatherv") == 0)
      rc = MPI_Allgatherv(in, 1, MPI_INT, out, counts, displs, MPI_INT, MPI_COMM_WORLD);
    else rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 3 : 4;
  }
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);  /* inherits MPI_ERRORS_RETURN */
  bad_args(MPI_COMM_WORLD);
  bad_args(dup);

  /* A freed communicator: MPI_Comm_free leaves MPI_COMM_NULL in the handle. */
  MPI_Comm freed;
  MPI_Comm_dup(MPI_COMM_WORLD, &freed);
  MPI_Comm_free(&freed);
  int buf[4] = {0}, out[4];
  MPI_Request r;
  expect("MPI_Barrier freed communicator", MPI_Barrier(freed), MPI_ERR_COMM, MPI_COMM_WORLD);
  expect("MPI_Bcast freed communicator", MPI_Bcast(buf, 2, MPI_INT, 0, freed), MPI_ERR_COMM, MPI_COMM_WORLD);
  expect("MPI_Allreduce freed communicator", MPI_Allreduce(buf, out, 2, MPI_INT, MPI_SUM, freed), MPI_ERR_COMM,
         MPI_COMM_WORLD);
  expect("MPI_Ibarrier freed communicator", started(MPI_Ibarrier(freed, &r), &r), MPI_ERR_COMM, MPI_COMM_WORLD);
  MPI_Comm never;
  expect("MPI_Comm_dup freed communicator", MPI_Comm_dup(freed, &never), MPI_ERR_COMM,
         MPI_COMM_WORLD);

  MPI_Comm_free(&dup);
  printf("errors: rank %d: %d checks, %d failures\n", rank, checks, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
