// Fortran entry points (mpif.h and `use mpi`: mpi_bcast_ ...). Open MPI's
// Fortran bindings call PMPI_* directly, so without these a Fortran
// program's collectives, waits and tests never reach the layer. Each
// converts its handles (MPI_*_f2c / _c2f), statuses and Fortran's special
// addresses (MPI_IN_PLACE, MPI_BOTTOM, MPI_STATUS(ES)_IGNORE), then calls
// the layer's C entry point, so the same rules decide the path and a
// nonblocking collective's generalized request completes in mpi_wait_ as
// in MPI_Wait. Defined under gfortran's names (one trailing underscore);
// the other spellings, and mpi_f08's, are aliases at the end.
#include "api/mpi/layer.h"

#include <cstdio>
#include <cstdlib>
#include <vector>

extern "C" {
// Open MPI's Fortran special arguments: the addresses of these common blocks.
extern int mpi_fortran_in_place_;
extern int mpi_fortran_bottom_;
extern int mpi_fortran_status_ignore_;
extern int mpi_fortran_statuses_ignore_;
}

namespace carflow::mpi {
namespace {

static_assert(sizeof(MPI_Fint) == sizeof(int), "Fortran count arrays are passed to C as they are");
constexpr int kStatusInts = sizeof(MPI_Status) / sizeof(MPI_Fint);  // Fortran's MPI_STATUS_SIZE

// A Fortran buffer argument as C's: MPI_IN_PLACE and MPI_BOTTOM are
// addresses of common blocks in Fortran, constants in C.
const void* in_place(const void* buf) {
  if (buf == &mpi_fortran_in_place_) return MPI_IN_PLACE;
  return buf == &mpi_fortran_bottom_ ? MPI_BOTTOM : buf;
}
void* in_place(void* buf) { return const_cast<void*>(in_place(static_cast<const void*>(buf))); }
const int* ints(const MPI_Fint* f) { return reinterpret_cast<const int*>(f); }
MPI_Comm comm_of(const MPI_Fint* f) { return PMPI_Comm_f2c(*f); }
MPI_Datatype type_of(const MPI_Fint* f) { return PMPI_Type_f2c(*f); }
MPI_Op op_of(const MPI_Fint* f) { return PMPI_Op_f2c(*f); }

// A constructor's new communicator back as a Fortran handle.
void comm_out(int rc, const MPI_Comm* c, MPI_Fint* newcomm, MPI_Fint* ierr) {
  *ierr = rc;
  if (rc == MPI_SUCCESS) *newcomm = PMPI_Comm_c2f(*c);
}

// A nonblocking call's request back as a Fortran handle; by reference, so
// it is read after the call that sets it (argument order is unspecified).
void request_out(int rc, const MPI_Request& r, MPI_Fint* request, MPI_Fint* ierr) {
  *ierr = rc;
  if (rc == MPI_SUCCESS) *request = PMPI_Request_c2f(r);
}

void status_out(const MPI_Status& c, MPI_Fint* f) {
  if (f != &mpi_fortran_status_ignore_) PMPI_Status_c2f(&c, f);
}

// Fortran's request array as C's, and back after a wait or test (done
// requests become MPI_REQUEST_NULL's handle, their statuses written unless
// ignored). indices: C's 0-based indices, made Fortran's 1-based.
struct Requests {
  Requests(int n, const MPI_Fint* f) : c(n > 0 ? n : 0), statuses(c.size()) {
    for (size_t i = 0; i < c.size(); ++i) c[i] = PMPI_Request_f2c(f[i]);
  }
  void back(MPI_Fint* f) const {
    for (size_t i = 0; i < c.size(); ++i) f[i] = PMPI_Request_c2f(c[i]);
  }
  // C's first n statuses (Waitsome's are in the order of its indices).
  void statuses_out(MPI_Fint* f, int n) const {
    if (f == &mpi_fortran_statuses_ignore_) return;
    for (int i = 0; i < n; ++i) PMPI_Status_c2f(&statuses[i], f + static_cast<ptrdiff_t>(i) * kStatusInts);
  }
  std::vector<MPI_Request> c;
  std::vector<MPI_Status> statuses;
};

MPI_Fint logical(int flag) { return flag ? 1 : 0; }  // gfortran's .true. is 1
int index_out(int index) { return index == MPI_UNDEFINED ? index : index + 1; }

void refuse_foreign_fortran() {
  if (!foreign_mpi()) return;
  std::fprintf(stderr, "libcarflow_mpi: a Fortran program cannot run with the layer under another MPI; exiting\n");
  std::exit(1);
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

// Start and stop too: Fortran's mpi_init_ would start MPI without carflow.
// Under another MPI every later Fortran entry point here would misread its
// arguments (Open MPI's status size, special addresses), and that MPI's own
// Fortran start is bypassed: the program stops here, before MPI starts.
void mpi_init_(MPI_Fint* ierr) {
  refuse_foreign_fortran();
  *ierr = MPI_Init(nullptr, nullptr);
}

void mpi_init_thread_(const MPI_Fint* required, MPI_Fint* provided, MPI_Fint* ierr) {
  refuse_foreign_fortran();
  int level = 0;
  *ierr = MPI_Init_thread(nullptr, nullptr, *required, &level);
  *provided = level;
}

void mpi_finalize_(MPI_Fint* ierr) { *ierr = MPI_Finalize(); }

void mpi_barrier_(const MPI_Fint* comm, MPI_Fint* ierr) { *ierr = MPI_Barrier(comm_of(comm)); }

void mpi_bcast_(void* buf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* root, const MPI_Fint* comm,
                MPI_Fint* ierr) {
  *ierr = MPI_Bcast(in_place(buf), *count, type_of(type), *root, comm_of(comm));
}

void mpi_allreduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                    const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allreduce(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_reduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                 const MPI_Fint* op, const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), *root, comm_of(comm));
}

void mpi_scan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* op,
               const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Scan(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_exscan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                 const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Exscan(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), comm_of(comm));
}

void mpi_reduce_scatter_block_(const void* sendbuf, void* recvbuf, const MPI_Fint* recvcount,
                               const MPI_Fint* type, const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter_block(in_place(sendbuf), in_place(recvbuf), *recvcount, type_of(type), op_of(op),
                                   comm_of(comm));
}

void mpi_allgather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                    const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allgather(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount, type_of(recvtype),
                        comm_of(comm));
}

void mpi_alltoall_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                   const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Alltoall(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount, type_of(recvtype),
                       comm_of(comm));
}

void mpi_gather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                 const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                 MPI_Fint* ierr) {
  *ierr = MPI_Gather(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount, type_of(recvtype),
                     *root, comm_of(comm));
}

void mpi_scatter_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                  const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                  MPI_Fint* ierr) {
  // At the root, MPI_IN_PLACE is the receive buffer.
  *ierr = MPI_Scatter(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount,
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


void mpi_comm_dup_with_info_(const MPI_Fint* comm, const MPI_Fint* info, MPI_Fint* newcomm, MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Comm_dup_with_info(comm_of(comm), PMPI_Info_f2c(*info), &c), &c, newcomm, ierr);
}

void mpi_comm_split_type_(const MPI_Fint* comm, const MPI_Fint* split_type, const MPI_Fint* key,
                          const MPI_Fint* info, MPI_Fint* newcomm, MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Comm_split_type(comm_of(comm), *split_type, *key, PMPI_Info_f2c(*info), &c), &c, newcomm, ierr);
}

void mpi_comm_create_(const MPI_Fint* comm, const MPI_Fint* group, MPI_Fint* newcomm, MPI_Fint* ierr) {
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Comm_create(comm_of(comm), PMPI_Group_f2c(*group), &c), &c, newcomm, ierr);
}

// Fortran LOGICAL arrays as C's ints.
void mpi_cart_create_(const MPI_Fint* comm, const MPI_Fint* ndims, const MPI_Fint* dims, const MPI_Fint* periods,
                      const MPI_Fint* reorder, MPI_Fint* newcomm, MPI_Fint* ierr) {
  std::vector<int> p(*ndims > 0 ? *ndims : 0);
  for (size_t i = 0; i < p.size(); ++i) p[i] = periods[i] != 0;
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Cart_create(comm_of(comm), *ndims, ints(dims), p.data(), *reorder != 0, &c), &c, newcomm, ierr);
}

void mpi_cart_sub_(const MPI_Fint* comm, const MPI_Fint* remain_dims, MPI_Fint* newcomm, MPI_Fint* ierr) {
  int ndims = 0;
  const MPI_Comm parent = comm_of(comm);
  if (PMPI_Cartdim_get(parent, &ndims) != MPI_SUCCESS) ndims = 0;
  std::vector<int> r(ndims);
  for (int i = 0; i < ndims; ++i) r[i] = remain_dims[i] != 0;
  MPI_Comm c = MPI_COMM_NULL;
  comm_out(MPI_Cart_sub(parent, r.data(), &c), &c, newcomm, ierr);
}

// The v forms and MPI_Reduce_scatter: counts and displacements are Fortran
// INTEGER arrays, the same ints as C's.
void mpi_reduce_scatter_(const void* sendbuf, void* recvbuf, const MPI_Fint* recvcounts, const MPI_Fint* type,
                         const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Reduce_scatter(in_place(sendbuf), in_place(recvbuf), ints(recvcounts), type_of(type), op_of(op),
                             comm_of(comm));
}

void mpi_allgatherv_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                     const MPI_Fint* recvcounts, const MPI_Fint* displs, const MPI_Fint* recvtype,
                     const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Allgatherv(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), ints(recvcounts),
                         ints(displs), type_of(recvtype), comm_of(comm));
}

void mpi_gatherv_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                  const MPI_Fint* recvcounts, const MPI_Fint* displs, const MPI_Fint* recvtype, const MPI_Fint* root,
                  const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Gatherv(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), ints(recvcounts),
                      ints(displs), type_of(recvtype), *root, comm_of(comm));
}

void mpi_scatterv_(const void* sendbuf, const MPI_Fint* sendcounts, const MPI_Fint* displs, const MPI_Fint* sendtype,
                   void* recvbuf, const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root,
                   const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Scatterv(in_place(sendbuf), ints(sendcounts), ints(displs), type_of(sendtype), in_place(recvbuf),
                       *recvcount, type_of(recvtype), *root, comm_of(comm));
}

void mpi_alltoallv_(const void* sendbuf, const MPI_Fint* sendcounts, const MPI_Fint* sdispls,
                    const MPI_Fint* sendtype, void* recvbuf, const MPI_Fint* recvcounts, const MPI_Fint* rdispls,
                    const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* ierr) {
  *ierr = MPI_Alltoallv(in_place(sendbuf), ints(sendcounts), ints(sdispls), type_of(sendtype), in_place(recvbuf),
                        ints(recvcounts), ints(rdispls), type_of(recvtype), comm_of(comm));
}

// Nonblocking collectives: the C call's request, as a Fortran handle, is
// the layer's generalized request when carflow serves the call.
void mpi_ibarrier_(const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ibarrier(comm_of(comm), &r), r, request, ierr);
}

void mpi_ibcast_(void* buf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* root, const MPI_Fint* comm,
                 MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ibcast(in_place(buf), *count, type_of(type), *root, comm_of(comm), &r), r, request, ierr);
}

void mpi_ireduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                  const MPI_Fint* op, const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* request,
                  MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ireduce(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), *root,
                          comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iallreduce_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                     const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iallreduce(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op),
                             comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iscan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type, const MPI_Fint* op,
                const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iscan(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iexscan_(const void* sendbuf, void* recvbuf, const MPI_Fint* count, const MPI_Fint* type,
                  const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(
      MPI_Iexscan(in_place(sendbuf), in_place(recvbuf), *count, type_of(type), op_of(op), comm_of(comm), &r), r,
      request, ierr);
}

void mpi_ireduce_scatter_block_(const void* sendbuf, void* recvbuf, const MPI_Fint* recvcount,
                                const MPI_Fint* type, const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* request,
                                MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ireduce_scatter_block(in_place(sendbuf), in_place(recvbuf), *recvcount, type_of(type),
                                        op_of(op), comm_of(comm), &r),
              r, request, ierr);
}

void mpi_ireduce_scatter_(const void* sendbuf, void* recvbuf, const MPI_Fint* recvcounts, const MPI_Fint* type,
                          const MPI_Fint* op, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ireduce_scatter(in_place(sendbuf), in_place(recvbuf), ints(recvcounts), type_of(type), op_of(op),
                                  comm_of(comm), &r),
              r, request, ierr);
}

void mpi_igather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                  const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                  MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Igather(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount,
                          type_of(recvtype), *root, comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iscatter_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                   const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* root, const MPI_Fint* comm,
                   MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iscatter(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount,
                           type_of(recvtype), *root, comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iallgather_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                     const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* request,
                     MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iallgather(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount,
                             type_of(recvtype), comm_of(comm), &r),
              r, request, ierr);
}

void mpi_ialltoall_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                    const MPI_Fint* recvcount, const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* request,
                    MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ialltoall(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), *recvcount,
                            type_of(recvtype), comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iallgatherv_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                      const MPI_Fint* recvcounts, const MPI_Fint* displs, const MPI_Fint* recvtype,
                      const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iallgatherv(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf),
                              ints(recvcounts), ints(displs), type_of(recvtype), comm_of(comm), &r),
              r, request, ierr);
}

void mpi_igatherv_(const void* sendbuf, const MPI_Fint* sendcount, const MPI_Fint* sendtype, void* recvbuf,
                   const MPI_Fint* recvcounts, const MPI_Fint* displs, const MPI_Fint* recvtype,
                   const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Igatherv(in_place(sendbuf), *sendcount, type_of(sendtype), in_place(recvbuf), ints(recvcounts),
                           ints(displs), type_of(recvtype), *root, comm_of(comm), &r),
              r, request, ierr);
}

void mpi_iscatterv_(const void* sendbuf, const MPI_Fint* sendcounts, const MPI_Fint* displs,
                    const MPI_Fint* sendtype, void* recvbuf, const MPI_Fint* recvcount, const MPI_Fint* recvtype,
                    const MPI_Fint* root, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Iscatterv(in_place(sendbuf), ints(sendcounts), ints(displs), type_of(sendtype),
                            in_place(recvbuf), *recvcount, type_of(recvtype), *root, comm_of(comm), &r),
              r, request, ierr);
}

void mpi_ialltoallv_(const void* sendbuf, const MPI_Fint* sendcounts, const MPI_Fint* sdispls,
                     const MPI_Fint* sendtype, void* recvbuf, const MPI_Fint* recvcounts, const MPI_Fint* rdispls,
                     const MPI_Fint* recvtype, const MPI_Fint* comm, MPI_Fint* request, MPI_Fint* ierr) {
  MPI_Request r;
  request_out(MPI_Ialltoallv(in_place(sendbuf), ints(sendcounts), ints(sdispls), type_of(sendtype),
                             in_place(recvbuf), ints(recvcounts), ints(rdispls), type_of(recvtype), comm_of(comm),
                             &r),
              r, request, ierr);
}

// Waits and tests: through the layer's C calls, which move carflow's
// pending collectives and complete their requests before asking MPI.
void mpi_wait_(MPI_Fint* request, MPI_Fint* status, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  MPI_Status s;
  *ierr = MPI_Wait(&r, &s);
  *request = PMPI_Request_c2f(r);
  if (*ierr == MPI_SUCCESS) status_out(s, status);
}

void mpi_waitall_(const MPI_Fint* count, MPI_Fint* requests, MPI_Fint* statuses, MPI_Fint* ierr) {
  Requests r(*count, requests);
  *ierr = MPI_Waitall(*count, r.c.data(), r.statuses.data());
  r.back(requests);
  if (*ierr == MPI_SUCCESS || *ierr == MPI_ERR_IN_STATUS) r.statuses_out(statuses, *count);
}

void mpi_waitany_(const MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* status, MPI_Fint* ierr) {
  Requests r(*count, requests);
  int i = MPI_UNDEFINED;
  MPI_Status s;
  *ierr = MPI_Waitany(*count, r.c.data(), &i, &s);
  r.back(requests);
  if (*ierr != MPI_SUCCESS) return;
  *index = index_out(i);
  status_out(s, status);
}

void mpi_waitsome_(const MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                   MPI_Fint* statuses, MPI_Fint* ierr) {
  Requests r(*incount, requests);
  std::vector<int> done(r.c.size());
  int n = 0;
  *ierr = MPI_Waitsome(*incount, r.c.data(), &n, done.data(), r.statuses.data());
  r.back(requests);
  if (*ierr != MPI_SUCCESS && *ierr != MPI_ERR_IN_STATUS) return;
  *outcount = n;
  if (n == MPI_UNDEFINED) return;
  r.statuses_out(statuses, n);
  for (int i = 0; i < n; ++i) indices[i] = done[i] + 1;
}

void mpi_test_(MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
  MPI_Request r = PMPI_Request_f2c(*request);
  int done = 0;
  MPI_Status s;
  *ierr = MPI_Test(&r, &done, &s);
  *request = PMPI_Request_c2f(r);
  if (*ierr != MPI_SUCCESS) return;
  *flag = logical(done);
  if (done) status_out(s, status);
}

void mpi_testall_(const MPI_Fint* count, MPI_Fint* requests, MPI_Fint* flag, MPI_Fint* statuses, MPI_Fint* ierr) {
  Requests r(*count, requests);
  int done = 0;
  *ierr = MPI_Testall(*count, r.c.data(), &done, r.statuses.data());
  r.back(requests);
  if (*ierr != MPI_SUCCESS && *ierr != MPI_ERR_IN_STATUS) return;
  *flag = logical(done);
  if (done) r.statuses_out(statuses, *count);
}

void mpi_testany_(const MPI_Fint* count, MPI_Fint* requests, MPI_Fint* index, MPI_Fint* flag, MPI_Fint* status,
                  MPI_Fint* ierr) {
  Requests r(*count, requests);
  int i = MPI_UNDEFINED, done = 0;
  MPI_Status s;
  *ierr = MPI_Testany(*count, r.c.data(), &i, &done, &s);
  r.back(requests);
  if (*ierr != MPI_SUCCESS) return;
  *index = index_out(i);
  *flag = logical(done);
  if (done && i != MPI_UNDEFINED) status_out(s, status);
}

void mpi_testsome_(const MPI_Fint* incount, MPI_Fint* requests, MPI_Fint* outcount, MPI_Fint* indices,
                   MPI_Fint* statuses, MPI_Fint* ierr) {
  Requests r(*incount, requests);
  std::vector<int> done(r.c.size());
  int n = 0;
  *ierr = MPI_Testsome(*incount, r.c.data(), &n, done.data(), r.statuses.data());
  r.back(requests);
  if (*ierr != MPI_SUCCESS && *ierr != MPI_ERR_IN_STATUS) return;
  *outcount = n;
  if (n == MPI_UNDEFINED) return;
  r.statuses_out(statuses, n);
  for (int i = 0; i < n; ++i) indices[i] = done[i] + 1;
}

// The request stays allocated: its handle is not written back.
void mpi_request_get_status_(const MPI_Fint* request, MPI_Fint* flag, MPI_Fint* status, MPI_Fint* ierr) {
  int done = 0;
  MPI_Status s;
  *ierr = MPI_Request_get_status(PMPI_Request_f2c(*request), &done, &s);
  if (*ierr != MPI_SUCCESS) return;
  *flag = logical(done);
  if (done) status_out(s, status);
}

// The other spellings of every entry point above, as aliases of the same
// function: bare (-fno-underscoring, IBM's xlf), two underscores (g77,
// -fsecond-underscore) and upper case (Cray, Intel's /names:uppercase),
// the names libmpi_mpifh exports besides gfortran's; and Open MPI's back
// end ompi_x_f (the same arguments), which the mpi_f08 module's bindings
// call instead of any of these.
#define SPELLINGS(lower, upper)                                       \
  decltype(lower##_) lower __attribute__((alias(#lower "_")));        \
  decltype(lower##_) lower##__ __attribute__((alias(#lower "_")));    \
  decltype(lower##_) upper __attribute__((alias(#lower "_")));        \
  decltype(lower##_) o##lower##_f __attribute__((alias(#lower "_")));
SPELLINGS(mpi_init, MPI_INIT)
SPELLINGS(mpi_init_thread, MPI_INIT_THREAD)
SPELLINGS(mpi_finalize, MPI_FINALIZE)
SPELLINGS(mpi_barrier, MPI_BARRIER)
SPELLINGS(mpi_bcast, MPI_BCAST)
SPELLINGS(mpi_allreduce, MPI_ALLREDUCE)
SPELLINGS(mpi_reduce, MPI_REDUCE)
SPELLINGS(mpi_scan, MPI_SCAN)
SPELLINGS(mpi_exscan, MPI_EXSCAN)
SPELLINGS(mpi_reduce_scatter_block, MPI_REDUCE_SCATTER_BLOCK)
SPELLINGS(mpi_allgather, MPI_ALLGATHER)
SPELLINGS(mpi_alltoall, MPI_ALLTOALL)
SPELLINGS(mpi_gather, MPI_GATHER)
SPELLINGS(mpi_scatter, MPI_SCATTER)
SPELLINGS(mpi_comm_dup, MPI_COMM_DUP)
SPELLINGS(mpi_comm_split, MPI_COMM_SPLIT)
SPELLINGS(mpi_comm_dup_with_info, MPI_COMM_DUP_WITH_INFO)
SPELLINGS(mpi_comm_split_type, MPI_COMM_SPLIT_TYPE)
SPELLINGS(mpi_comm_create, MPI_COMM_CREATE)
SPELLINGS(mpi_cart_create, MPI_CART_CREATE)
SPELLINGS(mpi_cart_sub, MPI_CART_SUB)
SPELLINGS(mpi_reduce_scatter, MPI_REDUCE_SCATTER)
SPELLINGS(mpi_allgatherv, MPI_ALLGATHERV)
SPELLINGS(mpi_gatherv, MPI_GATHERV)
SPELLINGS(mpi_scatterv, MPI_SCATTERV)
SPELLINGS(mpi_alltoallv, MPI_ALLTOALLV)
SPELLINGS(mpi_ibarrier, MPI_IBARRIER)
SPELLINGS(mpi_ibcast, MPI_IBCAST)
SPELLINGS(mpi_ireduce, MPI_IREDUCE)
SPELLINGS(mpi_iallreduce, MPI_IALLREDUCE)
SPELLINGS(mpi_iscan, MPI_ISCAN)
SPELLINGS(mpi_iexscan, MPI_IEXSCAN)
SPELLINGS(mpi_ireduce_scatter_block, MPI_IREDUCE_SCATTER_BLOCK)
SPELLINGS(mpi_ireduce_scatter, MPI_IREDUCE_SCATTER)
SPELLINGS(mpi_igather, MPI_IGATHER)
SPELLINGS(mpi_iscatter, MPI_ISCATTER)
SPELLINGS(mpi_iallgather, MPI_IALLGATHER)
SPELLINGS(mpi_ialltoall, MPI_IALLTOALL)
SPELLINGS(mpi_iallgatherv, MPI_IALLGATHERV)
SPELLINGS(mpi_igatherv, MPI_IGATHERV)
SPELLINGS(mpi_iscatterv, MPI_ISCATTERV)
SPELLINGS(mpi_ialltoallv, MPI_IALLTOALLV)
SPELLINGS(mpi_wait, MPI_WAIT)
SPELLINGS(mpi_waitall, MPI_WAITALL)
SPELLINGS(mpi_waitany, MPI_WAITANY)
SPELLINGS(mpi_waitsome, MPI_WAITSOME)
SPELLINGS(mpi_test, MPI_TEST)
SPELLINGS(mpi_testall, MPI_TESTALL)
SPELLINGS(mpi_testany, MPI_TESTANY)
SPELLINGS(mpi_testsome, MPI_TESTSOME)
SPELLINGS(mpi_request_get_status, MPI_REQUEST_GET_STATUS)
#undef SPELLINGS

// mpi_f08's calls with a LOGICAL argument (MPI_Test, _Testall, _Testany,
// _Testsome, MPI_Request_get_status, MPI_Cart_create, MPI_Cart_sub) call
// the Fortran profiling names instead of ompi_x_f: defined here too, or a
// program testing a pending collective of carflow's would test forever
// and a Cartesian communicator would have no team. They end in PMPI_* as
// Open MPI's own do.
#define PROFILING_SPELLING(lower) decltype(lower##_) p##lower##_ __attribute__((alias(#lower "_")));
PROFILING_SPELLING(mpi_test)
PROFILING_SPELLING(mpi_testall)
PROFILING_SPELLING(mpi_testany)
PROFILING_SPELLING(mpi_testsome)
PROFILING_SPELLING(mpi_request_get_status)
PROFILING_SPELLING(mpi_cart_create)
PROFILING_SPELLING(mpi_cart_sub)
#undef PROFILING_SPELLING

}  // extern "C"
