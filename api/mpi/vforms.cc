// MPI's variable-count ("v") collectives on carflow's v forms. carflow
// wants every block's byte count on every image; displacements it takes
// packed, so each rank packs and spreads its own layout (Blocks) and the
// displacements never decide the path. MPI_Allgatherv gives every rank
// the counts; Gatherv, Scatterv and Alltoallv give each rank only its own
// (the root's arrays are significant at the root only), so they first
// share them: one gather_all of 8 bytes a rank (Alltoallv: 8 bytes per
// peer), then the data's collective (two_steps).
#include <cstring>
#include <numeric>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

size_t total(const std::vector<size_t>& counts) { return std::accumulate(counts.begin(), counts.end(), size_t{0}); }

// The calling rank's block: sendbuf, or in place its block of recvbuf,
// copied (carflow's v forms allow no overlap of source and destination).
char* own_block(Call& c, const void* sendbuf, int sendcount, MPI_Datatype sendtype, const void* recvbuf,
                int count, int displ, MPI_Datatype recvtype, int* rc) {
  if (sendbuf != MPI_IN_PLACE) {
    *rc = c.src.stage_in(sendbuf, sendcount, sendtype, c.comm);
    return c.src.data;
  }
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(recvtype, &lb, &extent);
  *rc = c.src.stage_in(static_cast<const char*>(recvbuf) + displ * extent, count, recvtype, c.comm);
  c.copy().reset(new char[c.src.nbytes + 1]);
  if (*rc == MPI_SUCCESS) std::memcpy(c.copy().get(), c.src.data, c.src.nbytes);
  return c.copy().get();
}

// The second step of a two-step call: move(call, team) on the second team
// unless the shared counts say nothing moves.
template <typename Move>
class MoveStep final : public Step {
 public:
  MoveStep(Move move, cf_team_t team) : move_(std::move(move)), team_(team) {}
  int run(Call& call) override { return total(call.counts()) == 0 ? call.nothing_to_do() : move_(call, team_); }

 private:
  Move move_;
  cf_team_t team_;
};

// A v form whose counts each rank knows only its own row of (mine): they
// are shared first (row i of c.counts() from rank i), then
// move_blocks(c, team) moves the blocks. Blocking, the two run one after the other on the
// communicator's team; nonblocking, the sharing starts now and the move on
// the second team once a wait sees it done (requests.cc), so it captures
// the MPI call's arguments by value.
template <typename Move>
int two_steps(Coll coll, MPI_Comm comm, MPI_Request* request, cf_team_t team, cf_team_t second,
              std::vector<size_t> mine, Move move_blocks) {
  return serve(coll, comm, request, [&](Call& c) {
    c.own_counts() = std::move(mine);
    c.counts().resize(c.own_counts().size() * cf_team_size(team));
    const size_t nbytes = c.own_counts().size() * sizeof(size_t);
    if (!c.nonblocking()) {
      const int st = cf_coll_gather_all(team, c.counts().data(), c.own_counts().data(), nbytes, kFlags);
      if (st != CF_OK) return carflow_failed(c.comm, c.coll, st);
      return total(c.counts()) == 0 ? c.nothing_to_do() : move_blocks(c, team);
    }
    c.then(second, std::make_unique<MoveStep<Move>>(move_blocks, second));
    return c.run(cf_coll_gather_all, cf_coll_gather_all_nb, team, c.counts().data(), c.own_counts().data(),
                 nbytes, kFlags);
  });
}

int allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
               const int displs[], MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  int size = 0, rank = 0;
  comm_rank_size(comm, &rank, &size);
  size_t nbytes = 0;
  for (int i = 0; i < size; ++i) nbytes += type_bytes(recvcounts[i], recvtype);
  cf_team_t team;
  const bool valid = (sendbuf == MPI_IN_PLACE || valid_buf(sendcount, sendtype)) &&
                     valid_counts(recvcounts, size, recvtype);
  if (!served(comm, nbytes, form(Coll::Allgatherv, request), &team, valid)) {
    return request != nullptr ? PMPI_Iallgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                                 recvtype, comm, request)
                              : PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                                recvtype, comm);
  }
  return serve(Coll::Allgatherv, comm, request, [&](Call& c) {
    int rc;
    char* mine = own_block(c, sendbuf, sendcount, sendtype, recvbuf, recvcounts[rank], displs[rank], recvtype, &rc);
    if (rc == MPI_SUCCESS) rc = c.vdst().stage_out(recvbuf, recvcounts, displs, recvtype, size, comm);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_gather_allv, cf_coll_gather_allv_nb, team, c.vdst().data, mine, c.vdst().bytes.data(),
                 nullptr, kFlags);
  });
}

int gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
            const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  cf_team_t team, second;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  // The root's counts are read only once the root is known to be valid.
  const bool valid = valid_root(comm, root) && (sendbuf == MPI_IN_PLACE || valid_buf(sendcount, sendtype)) &&
                     (rank != root || valid_counts(recvcounts, size, recvtype));
  if (!team_of(comm, &team, form(Coll::Gatherv, request), &second, valid)) {
    return request != nullptr ? PMPI_Igatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs,
                                              recvtype, root, comm, request)
                              : PMPI_Gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype,
                                             root, comm);
  }
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const size_t mine = in_place ? type_bytes(recvcounts[root], recvtype) : type_bytes(sendcount, sendtype);
  return two_steps(Coll::Gatherv, comm, request, team, second, {mine}, [=](Call& c, cf_team_t t) {
    int rc;
    char* from = own_block(c, sendbuf, sendcount, sendtype, recvbuf, in_place ? recvcounts[root] : 0,
                           in_place ? displs[root] : 0, recvtype, &rc);
    if (rc == MPI_SUCCESS && rank == root) rc = c.vdst().stage_out(recvbuf, recvcounts, displs, recvtype, size, comm);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_gatherv, cf_coll_gatherv_nb, t, root, rank == root ? c.vdst().data : nullptr, from,
                 c.counts().data(), nullptr, kFlags);
  });
}

int scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
             void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm, MPI_Request* request) {
  cf_team_t team, second;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  const bool valid = valid_root(comm, root) && (recvbuf == MPI_IN_PLACE || valid_buf(recvcount, recvtype)) &&
                     (rank != root || valid_counts(sendcounts, size, sendtype));
  if (!team_of(comm, &team, form(Coll::Scatterv, request), &second, valid)) {
    return request != nullptr ? PMPI_Iscatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount,
                                               recvtype, root, comm, request)
                              : PMPI_Scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype,
                                              root, comm);
  }
  const bool in_place = recvbuf == MPI_IN_PLACE;
  const size_t mine = in_place ? type_bytes(sendcounts[root], sendtype) : type_bytes(recvcount, recvtype);
  return two_steps(Coll::Scatterv, comm, request, team, second, {mine}, [=](Call& c, cf_team_t t) {
    int rc = rank == root ? c.vsrc().stage_in(sendbuf, sendcounts, displs, sendtype, size, comm) : MPI_SUCCESS;
    char* to = nullptr;
    if (in_place) {
      // The root's block stays where it is; carflow's copy of it is dropped.
      c.copy().reset(new char[mine + 1]);
      to = c.copy().get();
    } else if (rc == MPI_SUCCESS) {
      rc = c.dst.stage_out(recvbuf, recvcount, recvtype, comm);
      to = c.dst.data;
    }
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_scatterv, cf_coll_scatterv_nb, t, to, root, rank == root ? c.vsrc().data : nullptr,
                 c.counts().data(), nullptr, kFlags);
  });
}

int alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
              void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype, MPI_Comm comm,
              MPI_Request* request) {
  cf_team_t team, second;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  const bool valid = (sendbuf == MPI_IN_PLACE || valid_counts(sendcounts, size, sendtype)) &&
                     valid_counts(recvcounts, size, recvtype);
  if (!team_of(comm, &team, form(Coll::Alltoallv, request), &second, valid)) {
    return request != nullptr ? PMPI_Ialltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                                rdispls, recvtype, comm, request)
                              : PMPI_Alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts,
                                               rdispls, recvtype, comm);
  }
  const bool in_place = sendbuf == MPI_IN_PLACE;
  std::vector<size_t> row(size);
  for (int j = 0; j < size; ++j) {
    row[j] = in_place ? type_bytes(recvcounts[j], recvtype) : type_bytes(sendcounts[j], sendtype);
  }
  return two_steps(Coll::Alltoallv, comm, request, team, second, std::move(row), [=](Call& c, cf_team_t t) {
    int rc = in_place ? c.vsrc().stage_in(recvbuf, recvcounts, rdispls, recvtype, size, comm)
                      : c.vsrc().stage_in(sendbuf, sendcounts, sdispls, sendtype, size, comm);
    char* from = c.vsrc().data;
    if (in_place && rc == MPI_SUCCESS) {
      // exchangev allows no overlap: send from a copy.
      c.copy().reset(new char[c.vsrc().nbytes + 1]);
      std::memcpy(c.copy().get(), c.vsrc().data, c.vsrc().nbytes);
      from = c.copy().get();
    }
    if (rc == MPI_SUCCESS) rc = c.vdst().stage_out(recvbuf, recvcounts, rdispls, recvtype, size, comm);
    if (rc != MPI_SUCCESS) return rc;
    return c.run(cf_coll_exchangev, cf_coll_exchangev_nb, t, c.vdst().data, from, c.counts().data(), kFlags);
  });
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  return allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, nullptr);
}
int MPI_Iallgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                    const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm,
                    MPI_Request* request) {
  return allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm, request);
}

int MPI_Gatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, const int recvcounts[],
                const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, nullptr);
}
int MPI_Igatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                 const int recvcounts[], const int displs[], MPI_Datatype recvtype, int root, MPI_Comm comm,
                 MPI_Request* request) {
  return gatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, root, comm, request);
}

int MPI_Scatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                 void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm) {
  return scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, nullptr);
}
int MPI_Iscatterv(const void* sendbuf, const int sendcounts[], const int displs[], MPI_Datatype sendtype,
                  void* recvbuf, int recvcount, MPI_Datatype recvtype, int root, MPI_Comm comm,
                  MPI_Request* request) {
  return scatterv(sendbuf, sendcounts, displs, sendtype, recvbuf, recvcount, recvtype, root, comm, request);
}

int MPI_Alltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                  void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                  MPI_Comm comm) {
  return alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm, nullptr);
}
int MPI_Ialltoallv(const void* sendbuf, const int sendcounts[], const int sdispls[], MPI_Datatype sendtype,
                   void* recvbuf, const int recvcounts[], const int rdispls[], MPI_Datatype recvtype,
                   MPI_Comm comm, MPI_Request* request) {
  return alltoallv(sendbuf, sendcounts, sdispls, sendtype, recvbuf, recvcounts, rdispls, recvtype, comm,
                   request);
}

}  // extern "C"
