// A carflow team per communicator. A constructor that every rank of its
// parent calls (dup, split, split_type, create, cart_create, cart_sub) is
// followed by cf_team_split over the parent's team, so the team has the
// communicator's members in its rank order; the team is the communicator's
// attribute and is freed with it. Communicators made otherwise
// (intercommunicators, MPI_Comm_create_group, graph topologies, idup) have
// no team and stay with PMPI, as do those of one process.
#include <pthread.h>

#include <cstdio>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

int delete_team(MPI_Comm, int, void* value, void*) {
  Layer& l = layer();
  // After MPI_Finalize began, free_all_teams has freed every team already.
  if (l.finalized) return MPI_SUCCESS;
  auto* attr = static_cast<TeamAttr*>(value);
  if (l.last_attr == attr) {
    l.last_comm = MPI_COMM_NULL;
    l.last_attr = nullptr;
  }
  cf_team_free(attr->second);
  cf_team_free(attr->team);
  l.teams.erase(attr);
  delete attr;
  return MPI_SUCCESS;
}

bool parent_team(MPI_Comm comm, cf_team_t* team, cf_team_t* second = nullptr) {
  if (comm == MPI_COMM_WORLD) {
    *team = CF_TEAM_ALL;
    if (second != nullptr) *second = layer().world_second;
    return true;
  }
  // The last communicator's team, kept: MPI's attribute lookup (a hash
  // table) costs more than the rest of the layer's decision. delete_team
  // forgets it before the handle can name another communicator.
  Layer& l = layer();
  if (comm != l.last_comm) {
    void* value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, l.keyval, &value, &found);
    if (!found) return false;
    l.last_comm = comm;
    l.last_attr = static_cast<TeamAttr*>(value);
  }
  *team = l.last_attr->team;
  if (second != nullptr) *second = l.last_attr->second;
  return true;
}


// The parent rank of child's rank 0: the same on every member of child, so
// it is a color that groups them.
int leader_in_parent(MPI_Comm parent, MPI_Comm child) {
  MPI_Group parent_group, child_group;
  PMPI_Comm_group(parent, &parent_group);
  PMPI_Comm_group(child, &child_group);
  const int zero = 0;
  int leader = 0;
  PMPI_Group_translate_ranks(child_group, 1, &zero, parent_group, &leader);
  PMPI_Group_free(&parent_group);
  PMPI_Group_free(&child_group);
  return leader;
}

}  // namespace

bool split_second(cf_team_t team, cf_team_t* second) {
  if (cf_team_split(team, 0, static_cast<int>(cf_team_rank(team)), second) == CF_OK) return true;
  std::fprintf(stderr, "libcarflow_mpi: rank %d: cf_team_split: %s\n", layer().world_rank, cf_last_error());
  return false;
}

void create_team_keyval() {
  // MPI_COMM_NULL_COPY_FN: a duplicate gets its own team (attach_team), not
  // a copy of its parent's.
  PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, delete_team, &layer().keyval, nullptr);
}

void free_all_teams() {
  Layer& l = layer();
  for (TeamAttr* attr : l.teams) {
    cf_team_free(attr->second);
    cf_team_free(attr->team);
    delete attr;
  }
  l.teams.clear();
  l.last_comm = MPI_COMM_NULL;
  l.last_attr = nullptr;
  if (l.world_second != CF_TEAM_NULL) cf_team_free(l.world_second);
  l.world_second = CF_TEAM_NULL;
}

bool team_of_rest(MPI_Comm comm, cf_team_t* team, Coll coll, cf_team_t* second, bool valid) {
  const Layer& l = layer();
  if (!l.active) {
    count_pmpi(coll, Fallback::Off);
    return false;
  }
  // carflow's image is the thread that called MPI_Init; another thread's
  // call cannot go to MPI alone (the other ranks are on carflow), so it is
  // refused loudly instead of hanging.
  if (!pthread_equal(pthread_self(), static_cast<pthread_t>(l.image_thread))) {
    std::fprintf(stderr,
                 "libcarflow_mpi: rank %d: %s called from a thread other than MPI_Init's; carflow serves "
                 "collectives from that thread only (run without LD_PRELOAD=libcarflow_mpi.so)\n",
                 l.world_rank, coll_name(coll));
    PMPI_Abort(MPI_COMM_WORLD, MPI_ERR_OTHER);
  }
  if (!valid || comm == MPI_COMM_NULL) {
    count_pmpi(coll, Fallback::Erroneous);
    return false;
  }
  if (parent_team(comm, team, second)) return true;
  count_pmpi(coll, Fallback::NoTeam);
  return false;
}

void attach_team(MPI_Comm parent, MPI_Comm child) {
  Layer& l = layer();
  cf_team_t parent_t;
  if (!l.active || !parent_team(parent, &parent_t)) return;
  int color = -1, key = 0, size = 0;
  if (child != MPI_COMM_NULL) {
    PMPI_Comm_rank(child, &key);
    PMPI_Comm_size(child, &size);
    color = leader_in_parent(parent, child);
  }
  cf_team_t team = CF_TEAM_NULL;
  // carflow ranks a team by key, ties by parent rank: key = the child's rank
  // gives the team the communicator's order.
  if (cf_team_split(parent_t, color, key, &team) != CF_OK) {
    std::fprintf(stderr, "libcarflow_mpi: rank %d: cf_team_split: %s\n", l.world_rank, cf_last_error());
    PMPI_Comm_call_errhandler(parent, MPI_ERR_OTHER);
    return;
  }
  if (child == MPI_COMM_NULL) return;
  if (size < 2) {
    cf_team_free(team);
    return;
  }
  cf_team_t second = CF_TEAM_NULL;
  if (!split_second(team, &second)) {
    cf_team_free(team);
    PMPI_Comm_call_errhandler(parent, MPI_ERR_OTHER);
    return;
  }
  auto* attr = new TeamAttr{team, second, key, size};
  l.teams.insert(attr);
  PMPI_Comm_set_attr(child, l.keyval, attr);
}

}  // namespace carflow::mpi

using carflow::mpi::attach_team;

extern "C" {

int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup(comm, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Comm_dup_with_info(MPI_Comm comm, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_dup_with_info(comm, info, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split(comm, color, key, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Comm_split_type(MPI_Comm comm, int split_type, int key, MPI_Info info, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_split_type(comm, split_type, key, info, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Comm_create(MPI_Comm comm, MPI_Group group, MPI_Comm* newcomm) {
  const int rc = PMPI_Comm_create(comm, group, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Cart_create(MPI_Comm comm, int ndims, const int dims[], const int periods[], int reorder,
                    MPI_Comm* newcomm) {
  const int rc = PMPI_Cart_create(comm, ndims, dims, periods, reorder, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

int MPI_Cart_sub(MPI_Comm comm, const int remain_dims[], MPI_Comm* newcomm) {
  const int rc = PMPI_Cart_sub(comm, remain_dims, newcomm);
  if (rc == MPI_SUCCESS) attach_team(comm, *newcomm);
  return rc;
}

}  // extern "C"
