// MPI's reductions on carflow. MPI has every rank pass the same count,
// datatype and op (MPI-4.0, 6.9.1), so the choice made from them is the same
// everywhere: a predefined op and datatype with a carflow built-in go to
// carflow; user ops, derived datatypes and the logical ops go to PMPI.
// The nonblocking forms take the same path as their blocking ones, with
// PMPI's nonblocking call as the fallback.
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
  bool plain;    // the datatype's elements are one run of bytes at the buffer (NamedType::plain)
};

// valid: the counts are not negative, and the source is not the result
// (MPI_ERR_BUFFER or MPI_ERR_ARG from Open MPI; MPI_IN_PLACE is the way).
// The datatype is looked up once here, and what the call needs of it kept in r.
bool served(MPI_Comm comm, size_t count, MPI_Datatype type, MPI_Op op, Coll coll, Reduction* r, bool valid) {
  if (!team_of(comm, &r->team, coll, nullptr, valid)) return false;
  if (count == 0) {
    count_pmpi(coll, Fallback::Empty);
    return false;
  }
  const int op_index = predefined_op(op);
  if (op_index < 0) {
    count_pmpi(coll, Fallback::Op);
    return false;
  }
  const NamedType* t = named_type(type);
  if (t == nullptr || t->func[op_index] == NamedType::kNoFunc) {
    count_pmpi(coll, Fallback::Datatype);
    return false;
  }
  r->func = t->func[op_index];
  r->elem_size = static_cast<size_t>(t->size);
  r->align = r->elem_size & (~r->elem_size + 1);
  r->plain = t->plain;
  return true;
}

bool aligned(const void* p, size_t align) { return (reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0; }

// A call's source and result as carflow may take them, unstaged: a plain
// datatype and aligned buffers (the common case). *in: the source (the
// result itself in place).
bool direct(const Reduction& r, const void* sendbuf, void* recvbuf, const void** in) {
  *in = sendbuf == MPI_IN_PLACE ? recvbuf : sendbuf;
  return r.plain && aligned(recvbuf, r.align) && aligned(*in, r.align);
}

// recvbuf as the result, and the source: recvbuf itself in place (carflow
// reads the input before writing), else sendbuf.
const void* stage_pair(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, const Reduction& r,
                       Call& c, int* rc) {
  if (sendbuf == MPI_IN_PLACE) {
    *rc = c.dst.stage_inout(recvbuf, count, type, c.comm, r.align);
    return c.dst.data;
  }
  *rc = c.dst.stage_out(recvbuf, count, type, c.comm, r.align);
  if (*rc == MPI_SUCCESS) *rc = c.src.stage_in(sendbuf, count, type, c.comm, r.align);
  return c.src.data;
}

// Out of line: the direct path above it does not build its Call or lambda.
[[gnu::noinline]] int allreduce_staged(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type,
                                       MPI_Comm comm, MPI_Request* request, const Reduction& r) {
  return serve(Coll::Allreduce, comm, request, [&](Call& c) {
    int rc;
    const void* in = stage_pair(sendbuf, recvbuf, count, type, r, c, &rc);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_allreduce, cf_coll_allreduce_nb, r.team, c.dst.data, in, r.elem_size, count, r.func, 0,
                 kFlags);
  });
}

int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  Reduction r;
  if (!served(comm, count, type, op, form(Coll::Allreduce, request), &r, count >= 0 && sendbuf != recvbuf)) {
    return request != nullptr ? PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request)
                              : PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  }
  if (const void* in; direct(r, sendbuf, recvbuf, &in)) {
    return call_direct(Coll::Allreduce, comm, request, cf_coll_allreduce, cf_coll_allreduce_nb, r.team, recvbuf, in,
                       r.elem_size, static_cast<size_t>(count), r.func, 0, kFlags);
  }
  return allreduce_staged(sendbuf, recvbuf, count, type, comm, request, r);
}

int reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
           MPI_Request* request) {
  Reduction r;
  if (!served(comm, count, type, op, form(Coll::Reduce, request), &r,
              valid_root(comm, root) && count >= 0 && sendbuf != recvbuf)) {
    return request != nullptr ? PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request)
                              : PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  }
  // Only the root has a result.
  const bool is_root = cf_team_rank(r.team) == static_cast<cf_image_t>(root);
  if (const void* in; (is_root || sendbuf != MPI_IN_PLACE) && direct(r, sendbuf, is_root ? recvbuf : nullptr, &in)) {
    void* out = is_root ? recvbuf : nullptr;
    return call_direct(Coll::Reduce, comm, request, cf_coll_reduce_vec, cf_coll_reduce_vec_nb, r.team,
                       static_cast<cf_image_t>(root), out, in, r.elem_size, static_cast<size_t>(count), r.func, 0,
                       kFlags);
  }
  return serve(Coll::Reduce, comm, request, [&](Call& c) {
    int rc;
    const void* in = nullptr;
    if (is_root) {
      in = stage_pair(sendbuf, recvbuf, count, type, r, c, &rc);
    } else {
      rc = c.src.stage_in(sendbuf, count, type, comm, r.align);
      in = c.src.data;
    }
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_reduce_vec, cf_coll_reduce_vec_nb, r.team, root, c.dst.data, in, r.elem_size, count,
                 r.func, 0, kFlags);
  });
}

// Scan, and Exscan with CF_COLL_EXCLUSIVE. Exscan leaves rank 0's result
// untouched: it is staged with its contents, so a private copy gives back
// what was there.
int scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
         MPI_Request* request, bool exclusive) {
  const Coll coll = exclusive ? Coll::Exscan : Coll::Scan;
  Reduction r;
  if (!served(comm, count, type, op, form(coll, request), &r, count >= 0 && sendbuf != recvbuf)) {
    if (exclusive) {
      return request != nullptr ? PMPI_Iexscan(sendbuf, recvbuf, count, type, op, comm, request)
                                : PMPI_Exscan(sendbuf, recvbuf, count, type, op, comm);
    }
    return request != nullptr ? PMPI_Iscan(sendbuf, recvbuf, count, type, op, comm, request)
                              : PMPI_Scan(sendbuf, recvbuf, count, type, op, comm);
  }
  return serve(coll, comm, request, [&](Call& c) {
    int rc = MPI_SUCCESS;
    const void* in = nullptr;
    if (exclusive) {
      rc = c.dst.stage_inout(recvbuf, count, type, comm, r.align);
      if (rc == MPI_SUCCESS && sendbuf != MPI_IN_PLACE) rc = c.src.stage_in(sendbuf, count, type, comm, r.align);
      in = sendbuf == MPI_IN_PLACE ? c.dst.data : c.src.data;
    } else {
      in = stage_pair(sendbuf, recvbuf, count, type, r, c, &rc);
    }
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_scan, cf_coll_scan_nb, r.team, c.dst.data, in, r.elem_size, count, r.func, 0,
                 kFlags | (exclusive ? CF_COLL_EXCLUSIVE : 0));
  });
}

// In place the input is recvbuf's blocks and the result lands at its start.
const void* stage_scatter_pair(const void* sendbuf, void* recvbuf, int mine, int all, MPI_Datatype type,
                               const Reduction& r, Call& c, int* rc) {
  if (sendbuf == MPI_IN_PLACE) {
    *rc = c.dst.stage_inout(recvbuf, all, type, c.comm, r.align);
    return c.dst.data;
  }
  *rc = c.dst.stage_out(recvbuf, mine, type, c.comm, r.align);
  if (*rc == MPI_SUCCESS) *rc = c.src.stage_in(sendbuf, all, type, c.comm, r.align);
  return c.src.data;
}

int reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                         MPI_Comm comm, MPI_Request* request) {
  Reduction r;
  if (!served(comm, recvcount, type, op, form(Coll::ReduceScatterBlock, request), &r,
              recvcount >= 0 && sendbuf != recvbuf)) {
    return request != nullptr
               ? PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request)
               : PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm);
  }
  return serve(Coll::ReduceScatterBlock, comm, request, [&](Call& c) {
    const int all = recvcount * static_cast<int>(cf_team_size(r.team));
    int rc;
    const void* in = stage_scatter_pair(sendbuf, recvbuf, recvcount, all, type, r, c, &rc);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_reduce_scatter, cf_coll_reduce_scatter_nb, r.team, c.dst.data, in, r.elem_size,
                 recvcount, r.func, 0, kFlags);
  });
}

int reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                   MPI_Comm comm, MPI_Request* request) {
  int size = 0, rank = 0;
  comm_rank_size(comm, &rank, &size);
  const long total = std::accumulate(recvcounts, recvcounts + size, 0L);
  Reduction r;
  if (!served(comm, total, type, op, form(Coll::ReduceScatter, request), &r,
              valid_counts(recvcounts, size, type) && sendbuf != recvbuf)) {
    return request != nullptr ? PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request)
                              : PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm);
  }
  return serve(Coll::ReduceScatter, comm, request, [&](Call& c) {
    c.counts().assign(recvcounts, recvcounts + size);  // kept: carflow reads them until the call ends
    int rc;
    const void* in = stage_scatter_pair(sendbuf, recvbuf, recvcounts[rank], static_cast<int>(total), type, r, c,
                                        &rc);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_reduce_scatterv, cf_coll_reduce_scatterv_nb, r.team, c.dst.data, in, r.elem_size,
                 c.counts().data(), r.func, 0, kFlags);
  });
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return allreduce(sendbuf, recvbuf, count, type, op, comm, nullptr);
}
int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  return allreduce(sendbuf, recvbuf, count, type, op, comm, request);
}

int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  return reduce(sendbuf, recvbuf, count, type, op, root, comm, nullptr);
}
int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root,
                MPI_Comm comm, MPI_Request* request) {
  return reduce(sendbuf, recvbuf, count, type, op, root, comm, request);
}

int MPI_Scan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(sendbuf, recvbuf, count, type, op, comm, nullptr, false);
}
int MPI_Iscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  return scan(sendbuf, recvbuf, count, type, op, comm, request, false);
}

int MPI_Exscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  return scan(sendbuf, recvbuf, count, type, op, comm, nullptr, true);
}
int MPI_Iexscan(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                MPI_Request* request) {
  return scan(sendbuf, recvbuf, count, type, op, comm, request, true);
}

int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  return reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, nullptr);
}
int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount, MPI_Datatype type, MPI_Op op,
                              MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter_block(sendbuf, recvbuf, recvcount, type, op, comm, request);
}

int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type, MPI_Op op,
                       MPI_Comm comm) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, nullptr);
}
int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[], MPI_Datatype type,
                        MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  return reduce_scatter(sendbuf, recvbuf, recvcounts, type, op, comm, request);
}

}  // extern "C"
