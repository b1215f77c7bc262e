// MPI's data-movement collectives on carflow. For movement MPI guarantees
// only that type signatures match, not that every rank's layout does, so a
// call goes to carflow whenever the communicator has a team and moves bytes;
// a rank whose own layout is not one run of bytes packs it (Staged).
#include <cstring>
#include <memory>
#include <vector>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

// The team if the call goes to carflow, counting a fallback otherwise.
bool served(MPI_Comm comm, size_t nbytes, Coll coll, cf_team_t* team) {
  if (!team_of(comm, team, coll)) return false;
  if (nbytes > 0) return true;
  count_pmpi(coll, Fallback::Empty);
  return false;
}

int done(MPI_Comm comm, Coll coll, int status, Staged* out) {
  if (status != CF_OK) return carflow_failed(comm, coll, status);
  count_carflow(coll);
  return out == nullptr ? MPI_SUCCESS : out->finish(comm);
}

}  // namespace
}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  cf_team_t team;
  if (!team_of(comm, &team, Coll::Barrier)) return PMPI_Barrier(comm);
  return done(comm, Coll::Barrier, cf_coll_barrier(team, kFlags), nullptr);
}

int MPI_Bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
  cf_team_t team;
  if (!served(comm, type_bytes(count, type), Coll::Bcast, &team)) return PMPI_Bcast(buf, count, type, root, comm);
  Staged b;
  const bool is_root = cf_team_rank(team) == static_cast<cf_image_t>(root);
  const int rc = is_root ? b.stage_in(buf, count, type, comm) : b.stage_out(buf, count, type, comm);
  if (rc != MPI_SUCCESS) return rc;
  return done(comm, Coll::Bcast, cf_coll_broadcast(team, b.data, root, b.data, b.nbytes, kFlags), &b);
}

int MPI_Gather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
               MPI_Datatype recvtype, int root, MPI_Comm comm) {
  cf_team_t team;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const size_t block = rank == root ? type_bytes(recvcount, recvtype) : type_bytes(sendcount, sendtype);
  if (!served(comm, block, Coll::Gather, &team)) {
    return PMPI_Gather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  }
  Staged dst, src;
  int rc = MPI_SUCCESS;
  if (rank == root) {
    rc = in_place ? dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                  : dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
  }
  if (rc == MPI_SUCCESS && !in_place) rc = src.stage_in(sendbuf, sendcount, sendtype, comm);
  if (rc != MPI_SUCCESS) return rc;
  // In place, the root's block is already at its place: carflow takes an
  // identical own block (carflow.h, gather's overlap rule).
  char* mine = in_place ? dst.data + static_cast<size_t>(root) * block : src.data;
  const int st = cf_coll_gather(team, root, dst.data, mine, block, kFlags);
  return done(comm, Coll::Gather, st, rank == root ? &dst : nullptr);
}

int MPI_Scatter(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                MPI_Datatype recvtype, int root, MPI_Comm comm) {
  cf_team_t team;
  const bool in_place = recvbuf == MPI_IN_PLACE;
  int rank = 0, size = 0;
  PMPI_Comm_rank(comm, &rank);
  PMPI_Comm_size(comm, &size);
  const size_t block = rank == root ? type_bytes(sendcount, sendtype) : type_bytes(recvcount, recvtype);
  if (!served(comm, block, Coll::Scatter, &team)) {
    return PMPI_Scatter(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, root, comm);
  }
  Staged dst, src;
  int rc = MPI_SUCCESS;
  if (rank == root) rc = src.stage_in(sendbuf, sendcount * size, sendtype, comm);
  if (rc == MPI_SUCCESS && !in_place) rc = dst.stage_out(recvbuf, recvcount, recvtype, comm);
  if (rc != MPI_SUCCESS) return rc;
  char* mine = in_place ? src.data + static_cast<size_t>(root) * block : dst.data;
  const int st = cf_coll_scatter(team, mine, root, src.data, block, kFlags);
  return done(comm, Coll::Scatter, st, in_place ? nullptr : &dst);
}

int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                  MPI_Datatype recvtype, MPI_Comm comm) {
  cf_team_t team;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const size_t block = type_bytes(recvcount, recvtype);
  if (!served(comm, block, Coll::Allgather, &team)) {
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  const int size = static_cast<int>(cf_team_size(team));
  Staged dst, src;
  int rc = in_place ? dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                    : dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
  if (rc == MPI_SUCCESS && !in_place) rc = src.stage_in(sendbuf, sendcount, sendtype, comm);
  if (rc != MPI_SUCCESS) return rc;
  char* mine = in_place ? dst.data + cf_team_rank(team) * block : src.data;
  return done(comm, Coll::Allgather, cf_coll_gather_all(team, dst.data, mine, block, kFlags), &dst);
}

// carflow's gather_allv with packed blocks (displacements are each rank's
// own layout, which MPI lets differ): the blocks land packed, then move to
// their displacements unless those are packed already.
int MPI_Allgatherv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                   const int recvcounts[], const int displs[], MPI_Datatype recvtype, MPI_Comm comm) {
  cf_team_t team;
  int size = 0, rank = 0;
  PMPI_Comm_size(comm, &size);
  PMPI_Comm_rank(comm, &rank);
  std::vector<size_t> counts(size);
  size_t total = 0;
  int total_count = 0;
  bool packed = true;
  for (int i = 0; i < size; ++i) {
    counts[i] = type_bytes(recvcounts[i], recvtype);
    packed = packed && displs[i] == total_count;
    total += counts[i];
    total_count += recvcounts[i];
  }
  if (!served(comm, total, Coll::Allgatherv, &team)) {
    return PMPI_Allgatherv(sendbuf, sendcount, sendtype, recvbuf, recvcounts, displs, recvtype, comm);
  }
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(recvtype, &lb, &extent);
  char* base = static_cast<char*>(recvbuf);
  Staged src, dst;
  std::unique_ptr<char[]> own;
  int rc = MPI_SUCCESS;
  if (sendbuf == MPI_IN_PLACE) {
    // A private copy: carflow's v forms take no overlap of source and destination.
    Staged in;
    rc = in.stage_in(base + displs[rank] * extent, recvcounts[rank], recvtype, comm);
    own.reset(new char[counts[rank] + 1]);
    if (rc == MPI_SUCCESS) std::memcpy(own.get(), in.data, counts[rank]);
  } else {
    rc = src.stage_in(sendbuf, sendcount, sendtype, comm);
  }
  std::unique_ptr<char[]> blocks;
  if (packed) {
    if (rc == MPI_SUCCESS) rc = dst.stage_out(recvbuf, total_count, recvtype, comm);
  } else {
    blocks.reset(new char[total]);
  }
  if (rc != MPI_SUCCESS) return rc;
  char* out = packed ? dst.data : blocks.get();
  const int st = cf_coll_gather_allv(team, out, own ? own.get() : src.data, counts.data(), nullptr, kFlags);
  rc = done(comm, Coll::Allgatherv, st, packed ? &dst : nullptr);
  size_t offset = 0;
  for (int i = 0; rc == MPI_SUCCESS && !packed && i < size; offset += counts[i], ++i) {
    Staged block;
    rc = block.stage_out(base + displs[i] * extent, recvcounts[i], recvtype, comm);
    if (rc != MPI_SUCCESS) break;
    std::memcpy(block.data, blocks.get() + offset, counts[i]);
    rc = block.finish(comm);
  }
  return rc;
}

int MPI_Alltoall(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
                 MPI_Datatype recvtype, MPI_Comm comm) {
  cf_team_t team;
  const bool in_place = sendbuf == MPI_IN_PLACE;
  const size_t block = type_bytes(recvcount, recvtype);
  if (!served(comm, block, Coll::Alltoall, &team)) {
    return PMPI_Alltoall(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  }
  const int size = static_cast<int>(cf_team_size(team));
  Staged dst, src;
  std::unique_ptr<char[]> copy;
  int rc = in_place ? dst.stage_inout(recvbuf, recvcount * size, recvtype, comm)
                    : dst.stage_out(recvbuf, recvcount * size, recvtype, comm);
  if (rc == MPI_SUCCESS && !in_place) rc = src.stage_in(sendbuf, sendcount * size, sendtype, comm);
  if (rc != MPI_SUCCESS) return rc;
  if (in_place) {
    // exchange allows no overlap at all (carflow.h): send from a copy.
    copy.reset(new char[dst.nbytes]);
    std::memcpy(copy.get(), dst.data, dst.nbytes);
  }
  const int st = cf_coll_exchange(team, dst.data, in_place ? copy.get() : src.data, block, kFlags);
  return done(comm, Coll::Alltoall, st, &dst);
}

}  // extern "C"
