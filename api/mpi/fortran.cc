// Fortran entry points (mpif.h and `use mpi`: mpi_bcast_ ...). Open MPI's
// Fortran bindings call PMPI_* directly, so without these a Fortran
// program's collectives never reach the layer. Each converts its handles
// (MPI_*_f2c) and Fortran's MPI_IN_PLACE, then calls the layer's C entry
// point; the communicator constructors attach a team as in C. The blocking
// collectives only: a nonblocking one would need Fortran's MPI_Wait family
// too, which calls PMPI_Wait directly, so they stay with MPI.
#include "api/mpi/layer.h"

extern "C" {
// Open MPI's Fortran MPI_IN_PLACE: the address of this common block.
extern int mpi_fortran_in_place_;
}

namespace carflow::mpi {
namespace {

const void* in_place(const void* buf) { return buf == &mpi_fortran_in_place_ ? MPI_IN_PLACE : buf; }
MPI_Comm comm_of(const MPI_Fint* f) { return PMPI_Comm_f2c(*f); }
MPI_Datatype type_of(const MPI_Fint* f) { return PMPI_Type_f2c(*f); }
MPI_Op op_of(const MPI_Fint* f) { return PMPI_Op_f2c(*f); }

// A constructor's new communicator back as a Fortran handle.
void comm_out(int rc, const MPI_Comm* c, MPI_Fint* newcomm, MPI_Fint* ierr) {
  *ierr = rc;
  if (rc == MPI_SUCCESS) *newcomm = PMPI_Comm_c2f(*c);
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

// Start and stop too: Fortran's mpi_init_ would start MPI without carflow.
void mpi_init_(MPI_Fint* ierr) { *ierr = MPI_Init(nullptr, nullptr); }

void mpi_init_thread_(const MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  int level = 0;
  *ierr = MPI_Init_thread(nullptr, nullptr, *required, &level);
  *provided = level;
}

void mpi_finalize_(MPI_Fint* ierr) { *ierr = MPI_Finalize(); }

void mpi_barrier_(const MPI_Fint* comm, MPI_Fint* ierr) { *ierr = MPI_Barrier(comm_of(comm)); }

void mpi_bcast_(void* buf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* root, const MPI_Fint* comm,
                MPI_Fint* ierr) {
  *ierr = MPI_Bcast(buf, *count, type_of(type), *root, comm_of(comm));
}

void mpi_allreduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                    const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allreduce(in_place(sendbuf), recvbuf, *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_reduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                 const MPI_Fint* op, const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce(in_place(sendbuf), recvbuf, *count, type_of(type), op_of(op), *root, comm_of(comm));
}

void mpi_scan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* op,
               const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Scan(in_place(sendbuf), recvbuf, *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_exscan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                 const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Exscan(in_place(sendbuf), recvbuf, *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_reduce_scatter_block_(const void* sendbuf, void* recvbuf, const MPI_Fint* recvcount,
                               const MPI_Fint* type, const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter_block(in_place(sendbuf), recvbuf, *recvcount, type_of(type), op_of(op),
                                   comm_of(comm));
}

void mpi_allgather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                    const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allgather(in_place(sendbuf), *sendcount, type_of(sendtype), recvbuf, *recvcount, type_of(recvtype),
                        comm_of(comm));
}

void mpi_alltoall_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                   const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Alltoall(in_place(sendbuf), *sendcount, type_of(sendtype), recvbuf, *recvcount, type_of(recvtype),
                       comm_of(comm));
}

void mpi_gather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                 const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                 MPI_Fint* ierr) {
  *ierr = MPI_Gather(in_place(sendbuf), *sendcount, type_of(sendtype), recvbuf, *recvcount, type_of(recvtype),
                     *root, comm_of(comm));
}

void mpi_scatter_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                  const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                  MPI_Fint* ierr) {
  // At the root, MPI_IN_PLACE is the receive buffer.
  *ierr = MPI_Scatter(sendbuf, *sendcount, type_of(sendtype), const_cast<void*>(in_place(recvbuf)), *recvcount,
                      type_of(recvtype), *root, comm_of(comm));
}

void mpi_comm_dup_(const MPI_Fint* comm, MPI_Fint* newcomm, MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Comm_dup(comm_of(comm), &c), &c, newcomm, ierr);
}

void mpi_comm_split_(const MPI_Fint* comm, const MPI_Fint* color, const MPI_Fint* key, MPI_Fint* newcomm,
                     MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Comm_split(comm_of(comm), *color, *key, &c), &c, newcomm, ierr);
}

}  // extern "C"
