// MPI's data-movement collectives on carflow. For movement MPI guarantees
// only that type signatures match, not that every rank's layout does, so a
// call goes to carflow whenever the communicator has a team and moves bytes;
// a rank whose own layout is not one run of bytes packs it (Staged). The
// nonblocking forms take the same path, with PMPI's nonblocking call as the
// fallback.
#include <cstring>
#include <memory>

#include "api/mpi/layer.h"

namespace carflow::mpi {

bool served(MPI_Comm comm, size_t nbytes, Coll coll, cf_team_t* team, bool valid) {
  if (!team_of(comm, team, coll, nullptr, valid)) return false;
  if (nbytes > 0) return true;
  count_pmpi(coll, Fallback::Empty);
  return false;
}

bool valid_counts(const int counts[], int n, MPI_Datatype type) {
  for (int i = 0; i < n; ++i) {
    if (counts[i] < 0) return false;
  }
  return type != MPI_DATATYPE_NULL;
}

namespace {

// A rooted call's own buffer: ignored when MPI_IN_PLACE.
bool valid_own(const void* buf, int count, MPI_Datatype type) {
  return buf == MPI_IN_PLACE || valid_buf(count, type);
}

int barrier(MPI_Comm comm, MPI_Request* request) {
  cf_team_t team;
  if (!team_of(comm, &team, form(Coll::Barrier, request))) {
    return request != nullptr ? PMPI_Ibarrier(comm, request) : PMPI_Barrier(comm);
  }
  return call_direct(Coll::Barrier, comm, request, cf_coll_barrier, cf_coll_barrier_nb, team, kFlags);
}

// Out of line: the direct path above it does not build its Call or lambda.
[[gnu::noinline]] int bcast_staged(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm,
                                   MPI_Request* request, cf_team_t team) {
  return serve(Coll::Bcast, comm, request, [&](Call& c) {
    const bool is_root = cf_team_rank(team) == static_cast<cf_image_t>(root);
    const int rc = is_root ? c.dst.stage_in(buf, count, type, comm) : c.dst.stage_out(buf, count, type, comm);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_broadcast, cf_coll_broadcast_nb, team, c.dst.data, root, c.dst.data, c.dst.nbytes,
                 kFlags);
  });
}

int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  cf_team_t team;
  const NamedType* named = named_type(type);
  const size_t nbytes = named != nullptr ? (count > 0 ? static_cast<size_t>(count) * named->size : 0)
                                         : type_bytes(count, type);
  if (!served(comm, nbytes, form(Coll::Bcast, request), &team, valid_root(comm, root) && valid_buf(count, type))) {
    return request != nullptr ? PMPI_Ibcast(buf, count, type, root, comm, request)
                              : PMPI_Bcast(buf, count, type, root, comm);
  }
  // A predefined type's bytes are the buffer itself: nothing to stage.
  if (named != nullptr && named->plain) {
    return call_direct(Coll::Bcast, comm, request, cf_coll_broadcast, cf_coll_broadcast_nb, team, buf,
                       static_cast<cf_image_t>(root), buf, nbytes, kFlags);
  }
  return bcast_staged(buf, count, type, root, comm, request, team);
}

[[gnu::noinline]] int gather_staged(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                    int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                    MPI_Request* request, cf_team_t team, int rank, int size, size_t block) {
  return serve(Coll::Gather, comm, request, [&](Call& c) {
    const bool in_place = sendbuf == MPI_IN_PLACE;
    int rc = MPI_SUCCESS;
    if (rank == root) {
      rc = in_place ? c.dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                    : c.dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
    }
    if (rc == MPI_SUCCESS && !in_place) rc = c.src.stage_in(sendbuf, sendcount, sendtype, comm);
    if (rc != MPI_SUCCESS) return rc;
    // In place, the root's block is already at its place: carflow takes an
    // identical own block (carflow.h, gather's overlap rule).
    char* mine = in_place ? c.dst.data + static_cast<size_t>(root) * block : c.src.data;
    return c.run(cf_coll_gather, cf_coll_gather_nb, team, root, c.dst.data, mine, block, kFlags);
  });
}

int gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
           MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  cf_team_t team;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  const size_t block = rank == root ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
  const bool valid = valid_root(comm, root) && valid_own(sendbuf, sendcount, sendtype) &&
                     (rank != root || valid_buf(recvcount, recvtype));
  if (!served(comm, block, form(Coll::Gather, request), &team, valid)) {
    return request != nullptr
               ? PMPI_Igather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request)
               : PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  }
  if (sendbuf != MPI_IN_PLACE && plain_type(sendtype) && (rank != root || plain_type(recvtype))) {
    void* src = const_cast<void*>(sendbuf);
    void* dst = rank == root ? recvbuf : nullptr;
    return call_direct(Coll::Gather, comm, request, cf_coll_gather, cf_coll_gather_nb, team,
                       static_cast<cf_image_t>(root), dst, src, block, kFlags);
  }
  return gather_staged(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request, team, rank,
                       size, block);
}

[[gnu::noinline]] int scatter_staged(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                     int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                                     MPI_Request* request, cf_team_t team, int rank, int size, size_t block) {
  return serve(Coll::Scatter, comm, request, [&](Call& c) {
    const bool in_place = recvbuf == MPI_IN_PLACE;
    int rc = MPI_SUCCESS;
    if (rank == root) rc = c.src.stage_in(sendbuf, sendcount * size, sendtype, comm);
    if (rc == MPI_SUCCESS && !in_place) rc = c.dst.stage_out(recvbuf, recvcount, recvtype, comm);
    if (rc != MPI_SUCCESS) return rc;
    char* mine = in_place ? c.src.data + static_cast<size_t>(root) * block : c.dst.data;
    return c.run(cf_coll_scatter, cf_coll_scatter_nb, team, mine, root, c.src.data, block, kFlags);
  });
}

int scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
            MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  cf_team_t team;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  const size_t block = rank == root ? type_bytes(sendcount, sendtype) : type_bytes(recvcount, recvtype);
  const bool valid = valid_root(comm, root) && valid_own(recvbuf, recvcount, recvtype) &&
                     (rank != root || valid_buf(sendcount, sendtype));
  if (!served(comm, block, form(Coll::Scatter, request), &team, valid)) {
    return request != nullptr
               ? PMPI_Iscatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request)
               : PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  }
  if (recvbuf != MPI_IN_PLACE && plain_type(recvtype) && (rank != root || plain_type(sendtype))) {
    void* src = rank == root ? const_cast<void*>(sendbuf) : nullptr;
    return call_direct(Coll::Scatter, comm, request, cf_coll_scatter, cf_coll_scatter_nb, team, recvbuf,
                       static_cast<cf_image_t>(root), src, block, kFlags);
  }
  return scatter_staged(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request, team, rank,
                        size, block);
}

[[gnu::noinline]] int allgather_staged(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                       int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request,
                                       cf_team_t team, size_t block) {
  return serve(Coll::Allgather, comm, request, [&](Call& c) {
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const int size = static_cast<int>(cf_team_size(team));
    int rc = in_place ? c.dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                      : c.dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
    if (rc == MPI_SUCCESS && !in_place) rc = c.src.stage_in(sendbuf, sendcount, sendtype, comm);
    if (rc != MPI_SUCCESS) return rc;
    char* mine = in_place ? c.dst.data + cf_team_rank(team) * block : c.src.data;
    return c.run(cf_coll_gather_all, cf_coll_gather_all_nb, team, c.dst.data, mine, block, kFlags);
  });
}

[[gnu::noinline]] int alltoall_staged(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                      int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request,
                                      cf_team_t team, size_t block) {
  return serve(Coll::Alltoall, comm, request, [&](Call& c) {
    const bool in_place = sendbuf == MPI_IN_PLACE;
    const int size = static_cast<int>(cf_team_size(team));
    int rc = in_place ? c.dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                      : c.dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
    if (rc == MPI_SUCCESS && !in_place) rc = c.src.stage_in(sendbuf, sendcount * size, sendtype, comm);
    if (rc != MPI_SUCCESS) return rc;
    char* from = c.src.data;
    if (in_place) {
      // exchange allows no overlap at all (carflow.h): send from a copy.
      c.copy().reset(new char[c.dst.nbytes]);
      std::memcpy(c.copy().get(), c.dst.data, c.dst.nbytes);
      from = c.copy().get();
    }
    return c.run(cf_coll_exchange, cf_coll_exchange_nb, team, c.dst.data, from, block, kFlags);
  });
}

// Allgather and Alltoall: a block per pair of ranks and no root, so the
// same checks, fallback and direct path; their carflow calls (gather_all,
// exchange) and PMPI calls share one signature. A template, so each
// entry point picks its calls at compile time.
template <Coll coll>
int every_block(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  constexpr bool all_to_all = coll == Coll::Alltoall;
  cf_team_t team;
  const size_t block = type_bytes(recvcount, recvtype);
  if (!served(comm, block, form(coll, request), &team,
              valid_own(sendbuf, sendcount, sendtype) && valid_buf(recvcount, recvtype))) {
    if (request != nullptr) {
      return (all_to_all ? PMPI_Ialltoall : PMPI_Iallgather)(sendbuf, sendcount, sendtype, recvbuf, recvcount,
                                                             recvtype, comm, request);
    }
    return (all_to_all ? PMPI_Alltoall : PMPI_Allgather)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                                         comm);
  }
  if (sendbuf != MPI_IN_PLACE && plain_type(sendtype) && plain_type(recvtype)) {
    void* src = const_cast<void*>(sendbuf);
    return call_direct(coll, comm, request, all_to_all ? cf_coll_exchange : cf_coll_gather_all,
                       all_to_all ? cf_coll_exchange_nb : cf_coll_gather_all_nb, team, recvbuf, src, block, kFlags);
  }
  return (all_to_all ? alltoall_staged : allgather_staged)(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype,
                                                           comm, request, team, block);
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Barrier(MPI_Comm comm) { return barrier(comm, nullptr); }
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) { return barrier(comm, request); }

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  return bcast(buf, count, type, root, comm, nullptr);
}
int MPI_Ibcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  return bcast(buf, count, type, root, comm, request);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int MPI_Igather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int MPI_Iscatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  return scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  return every_block<Coll::Allgather>(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}
int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                   MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return every_block<Coll::Allgather>(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  return every_block<Coll::Alltoall>(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}
int MPI_Ialltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  return every_block<Coll::Alltoall>(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

}  // extern "C"
