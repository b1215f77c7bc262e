// libcarflow_mpi's internals: the layer's one state object, its per-call
// decision and the staging of MPI buffers as carflow's contiguous bytes.
// The layer sits on the public C API only (carflow/carflow.h) and on PMPI_*.
#ifndef CARFLOW_API_MPI_LAYER_H
#define CARFLOW_API_MPI_LAYER_H

#include <carflow/carflow.h>
#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_set>

namespace carflow::mpi {

// The collectives the layer intercepts, in the order the report lists them.
enum class Coll {
  Barrier, Bcast, Reduce, Allreduce, Allgather, Allgatherv, Alltoall, Gather, Scatter, Scan,
  Exscan, ReduceScatterBlock, ReduceScatter, kCount
};
const char* coll_name(Coll c);  // "MPI_Bcast"

// Why a call went to PMPI. Every reason is decided from what MPI guarantees
// equal on every rank of the call (communicator, type signature, the
// reduction's datatype and op, counts), so all ranks take the same path.
enum class Fallback { Off, NoTeam, Empty, Datatype, Op, kCount };
const char* fallback_name(Fallback f);  // "count 0"

// Sync modes for every carflow call, chosen for MPI's blocking semantics
// (GASNet collectives design notes v1.7, "Synchronization modes"):
// IN_MYSYNC because an MPI rank's buffers may be in use until it enters the
// call, and OUT_MYSYNC because a blocking MPI collective returns exactly when
// this rank's buffers are usable (result in place, source free), and no
// later: ALLSYNC would add a barrier MPI does not promise. One image per
// process, each passing its own addresses: LOCAL | ALL_THREADS.
constexpr int kFlags = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

// A communicator's team, as the value of its attribute.
struct TeamAttr {
  cf_team_t team;
};

// The layer's state, one per process (no other global mutable state).
struct Layer {
  bool active = false;      // carflow started and agrees with MPI_COMM_WORLD
  bool finalized = false;   // MPI_Finalize ran: delete callbacks do nothing
  bool report = false;      // CF_MPI_REPORT=1
  int world_rank = 0;
  int keyval = MPI_KEYVAL_INVALID;  // the communicator attribute holding a team
  unsigned long image_thread = 0;   // pthread_t of the thread that called MPI_Init
  std::unordered_set<TeamAttr*> teams;  // every live attribute, freed at MPI_Finalize
  uint64_t on_carflow[static_cast<int>(Coll::kCount)] = {};
  uint64_t on_pmpi[static_cast<int>(Coll::kCount)][static_cast<int>(Fallback::kCount)] = {};
};
Layer& layer();

// Starts carflow after PMPI_Init(_thread) and decides, alike on every rank,
// whether the layer serves calls; ends it before PMPI_Finalize.
void start_after_mpi_init();
void stop_before_mpi_finalize();

// The team serving `comm`, or why it has none. MPI_COMM_WORLD is
// CF_TEAM_ALL; other communicators hold theirs as an attribute.
bool team_of(MPI_Comm comm, cf_team_t* team, Coll coll);
// After a communicator constructor ran on every rank of `parent`: gives
// `child` (MPI_COMM_NULL on ranks outside it) a team split from parent's.
void attach_team(MPI_Comm parent, MPI_Comm child);
// The attribute's key, made once carflow runs; every team freed before cf_finalize.
void create_team_keyval();
void free_all_teams();

void count_carflow(Coll c);
void count_pmpi(Coll c, Fallback why);

// A carflow call's failure as an MPI error on comm: prints cf_last_error()
// and calls the communicator's error handler (fatal by default).
int carflow_failed(MPI_Comm comm, Coll c, int status);

// MPI datatype and op to carflow's reduction function: CF_BUILTIN(op,
// type), with *elem_size; false when carflow has no such function (the
// call goes to PMPI and *why says which argument).
bool builtin_func(MPI_Datatype type, MPI_Op op, int* func, size_t* elem_size, Fallback* why);

// count elements of type as carflow's contiguous bytes. When the layout is
// one run of bytes in type-map order, data points into the user's buffer;
// else into a private buffer the layer packs or unpacks (PMPI_Pack), so
// every rank still takes carflow's path whatever its own layout.
class Staged {
 public:
  // For reading: the bytes of buf (packed now when needed). align: data's
  // alignment, copied to a private buffer when the user's is not aligned
  // (carflow refuses misaligned reduction buffers, and on one rank alone a
  // refusal would put the ranks out of step).
  int stage_in(const void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  // For writing: data is where the result goes; finish() unpacks it.
  int stage_out(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  // For both (in place): like stage_out, but data holds buf's bytes first.
  int stage_inout(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  int finish(MPI_Comm comm);
  char* data = nullptr;
  size_t nbytes = 0;

 private:
  int stage(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align, bool fill);
  std::unique_ptr<char[]> tmp_;
  bool packed_ = false;   // tmp_ holds PMPI_Pack's bytes (else a plain copy)
  bool writes_ = false;   // finish() copies tmp_ back into the user's buffer
  void* user_ = nullptr;
  int count_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// Bytes of count elements of type (MPI_Type_size times count).
size_t type_bytes(int count, MPI_Datatype type);

}  // namespace carflow::mpi

#endif  // CARFLOW_API_MPI_LAYER_H
