/* mpi_layer_mpich: a program built against MPICH (mpicc.mpich), run with
 * libcarflow_mpi preloaded: the layer is built for Open MPI's ABI, so it
 * must say so and leave every call to MPICH, and the results must be
 * right. Checks a blocking and a nonblocking collective, a communicator
 * made and freed, a wait and a receive.
 *   mpirun.mpich -np P -genv LD_PRELOAD .../libcarflow_mpi.so mpi_layer_mpich */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 0, failures = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int mine[2] = {rank, 1}, sum[2] = {0, 0};
  MPI_Allreduce(mine, sum, 2, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  failures += sum[0] != size * (size - 1) / 2 || sum[1] != size;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int root_value = rank == 0 ? 42 : -1;
  MPI_Request request;
  MPI_Ibcast(&root_value, 1, MPI_INT, 0, dup, &request);
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  failures += root_value != 42;
  int from_left = -1;
  MPI_Sendrecv(&rank, 1, MPI_INT, (rank + 1) % size, 0, &from_left, 1, MPI_INT, (rank + size - 1) % size, 0, dup,
               MPI_STATUS_IGNORE);
  failures += from_left != (rank + size - 1) % size;
  MPI_Comm_free(&dup);
  printf("mpi_layer_mpich: rank %d: %d failures\n", rank, failures);
  MPI_Finalize();
  return failures == 0 ? 0 : 1;
}
