// MPI's reductions on carflow. MPI has every rank pass the same count,
// datatype and op (MPI-4.0, 6.9.1), so the choice made from them is the same
// everywhere: a predefined op and datatype with a carflow built-in go to
// carflow; user ops, derived datatypes and the logical ops go to PMPI.
#include <numeric>
#include <vector>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

struct Reduction {
  cf_team_t team;
  int func;
  size_t elem_size;
  size_t align;  // carflow's alignment rule: the largest power of two dividing elem_size
};

bool served(MPI_Comm comm, size_t count, MPI_Datatype type, MPI_Op op, Coll coll, Reduction* r) {
  if (!team_of(comm, &r->team, coll)) return false;
  if (count == 0) {
    count_pmpi(coll, Fallback::Empty);
    return false;
  }
  Fallback why;
  if (!builtin_func(type, op, &r->func, &r->elem_size, &why)) {
    count_pmpi(coll, why);
    return false;
  }
  r->align = r->elem_size & (~r->elem_size + 1);
  return true;
}

int done(MPI_Comm comm, Coll coll, int status, Staged* out) {
  if (status != CF_OK) return carflow_failed(comm, coll, status);
  count_carflow(coll);
  return out == nullptr ? MPI_SUCCESS : out->finish(comm);
}

// recvbuf as the result, and the source: recvbuf itself in place (carflow
// reads the input before writing), else sendbuf.
int stage_pair(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Comm comm,
               const Reduction& r, Staged* dst, Staged* src) {
  if (sendbuf == MPI_IN_PLACE) return dst->stage_inout(recvbuf, count, type, comm, r.align);
  const int rc = dst->stage_out(recvbuf, count, type, comm, r.align);
  return rc != MPI_SUCCESS ? rc : src->stage_in(sendbuf, count, type, comm, r.align);
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  Reduction r;
  if (!served(comm, count, type, op, Coll::Allreduce, &r)) {
    return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  }
  Staged dst, src;
  const int rc = stage_pair(sendbuf, recvbuf, count, type, comm, r, &dst, &src);
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_allreduce(r.team, dst.data, in, r.elem_size, count, r.func, 0, kFlags);
  return done(comm, Coll::Allreduce, st, &dst);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  Reduction r;
  if (!served(comm, count, type, op, Coll::Reduce, &r)) {
    return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  }
  const bool is_root = cf_team_rank(r.team) == static_cast<cf_image_t>(root);
  Staged dst, src;
  const int rc = is_root ? stage_pair(sendbuf, recvbuf, count, type, comm, r, &dst, &src)
                         : src.stage_in(sendbuf, count, type, comm, r.align);
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_reduce_vec(r.team, root, dst.data, in, r.elem_size, count, r.func, 0, kFlags);
  return done(comm, Coll::Reduce, st, is_root ? &dst : nullptr);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  Reduction r;
  if (!served(comm, count, type, op, Coll::Scan, &r)) return PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  Staged dst, src;
  const int rc = stage_pair(sendbuf, recvbuf, count, type, comm, r, &dst, &src);
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_scan(r.team, dst.data, in, r.elem_size, count, r.func, 0, kFlags);
  return done(comm, Coll::Scan, st, &dst);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  Reduction r;
  if (!served(comm, count, type, op, Coll::Exscan, &r)) {
    return PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
  }
  Staged dst, src;
  // Rank 0's result is left untouched by carflow: staged with its contents
  // so that a private copy gives back what was there.
  int rc = dst.stage_inout(recvbuf, count, type, comm, r.align);
  if (rc == MPI_SUCCESS && sendbuf != MPI_IN_PLACE) rc = src.stage_in(sendbuf, count, type, comm, r.align);
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_scan(r.team, dst.data, in, r.elem_size, count, r.func, 0, kFlags | CF_COLL_EXCLUSIVE);
  return done(comm, Coll::Exscan, st, &dst);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  Reduction r;
  if (!served(comm, recvcount, type, op, Coll::ReduceScatterBlock, &r)) {
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  }
  const int all = recvcount * static_cast<int>(cf_team_size(r.team));
  Staged dst, src;
  // In place the input is recvbuf's P blocks and the result lands at its start.
  int rc = sendbuf == MPI_IN_PLACE ? dst.stage_inout(recvbuf, all, type, comm, r.align)
                                   : dst.stage_out(recvbuf, recvcount, type, comm, r.align);
  if (rc == MPI_SUCCESS && sendbuf != MPI_IN_PLACE) rc = src.stage_in(sendbuf, all, type, comm, r.align);
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_reduce_scatter(r.team, dst.data, in, r.elem_size, recvcount, r.func, 0, kFlags);
  return done(comm, Coll::ReduceScatterBlock, st, &dst);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  const long total = std::accumulate(recvcounts, recvcounts + size, 0L);
  Reduction r;
  if (!served(comm, total, type, op, Coll::ReduceScatter, &r)) {
    return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
  }
  const std::vector<size_t> counts(recvcounts, recvcounts + size);
  Staged dst, src;
  int rc = sendbuf == MPI_IN_PLACE ? dst.stage_inout(recvbuf, static_cast<int>(total), type, comm, r.align)
                                   : dst.stage_out(recvbuf, recvcounts[rank], type, comm, r.align);
  if (rc == MPI_SUCCESS && sendbuf != MPI_IN_PLACE) {
    rc = src.stage_in(sendbuf, static_cast<int>(total), type, comm, r.align);
  }
  if (rc != MPI_SUCCESS) return rc;
  const void* in = sendbuf == MPI_IN_PLACE ? dst.data : src.data;
  const int st = cf_coll_reduce_scatterv(r.team, dst.data, in, r.elem_size, counts.data(), r.func, 0, kFlags);
  return done(comm, Coll::ReduceScatter, st, &dst);
}

}  // extern "C"
