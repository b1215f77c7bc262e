// libcarflow_mpi's internals: the layer's one state object, its per-call
// decision, the staging of MPI buffers as carflow's contiguous bytes, and
// the calls served, blocking or behind a generalized request.
// The layer sits on the public C API only (carflow/carflow.h) and on PMPI_*.
#ifndef CARFLOW_API_MPI_LAYER_H
#define CARFLOW_API_MPI_LAYER_H

#include <carflow/carflow.h>
#include <mpi.h>
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <type_traits>
#include <unordered_set>
#include <vector>

#include "api/mpi/record_pool.h"

namespace carflow::mpi {

// The collectives the layer intercepts, in the order the report lists them:
// the blocking ones, then their nonblocking forms in the same order.
enum class Coll {
  Barrier, Bcast, Reduce, Allreduce, Allgather, Allgatherv, Alltoall, Gather, Scatter, Scan,
  Exscan, ReduceScatterBlock, ReduceScatter, Gatherv, Scatterv, Alltoallv, kBlocking,
  kCount = 2 * kBlocking
};
const char* coll_name(Coll c);  // "MPI_Bcast", "MPI_Ibcast"
// c's nonblocking form when the MPI call has a request, else c.
inline Coll form(Coll c, const MPI_Request* request) {
  return request == nullptr ? c : static_cast<Coll>(static_cast<int>(c) + static_cast<int>(Coll::kBlocking));
}

// Why a call went to PMPI. Every reason is decided from what MPI guarantees
// equal on every rank of the call (communicator, type signature, the
// reduction's datatype and op, counts), so all ranks take the same path.
enum class Fallback { Off, NoTeam, Empty, Datatype, Op, Erroneous, kCount };
const char* fallback_name(Fallback f);  // "count 0"

// Sync modes for every carflow call, chosen for MPI's blocking semantics
// (GASNet collectives design notes v1.7, "Synchronization modes"):
// IN_MYSYNC because an MPI rank's buffers may be in use until it enters the
// call, and OUT_MYSYNC because a blocking MPI collective returns exactly when
// this rank's buffers are usable (result in place, source free), and no
// later: ALLSYNC would add a barrier MPI does not promise. One image per
// process, each passing its own addresses: LOCAL | ALL_THREADS.
constexpr int kFlags = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

class Call;

// A carflow call's failure as an MPI error on comm: prints cf_last_error()
// and calls the communicator's error handler (fatal by default).
int carflow_failed(MPI_Comm comm, Coll c, int status);

// MPI's predefined reduction ops that carflow has a function for, by index
// (predefined_op): SUM, PROD, MIN, MAX, BAND, BOR, BXOR, MINLOC, MAXLOC.
constexpr int kPredefinedOps = 9;

// A predefined datatype's layout as MPI gives it, read once when the layer
// turns on (learn_named_types). Predefined handles live as long as MPI, so
// everything a call asks of one (size, extent, true extent, carflow's
// function per op) is one table lookup instead of several MPI queries.
struct NamedType {
  MPI_Datatype type = MPI_DATATYPE_NULL;  // MPI_DATATYPE_NULL: a free slot
  int size = 0;
  MPI_Aint extent = 0, true_lb = 0, true_extent = 0;
  // Elements of it, any count, are one run of bytes at the buffer's own
  // address: carflow takes a user's buffer as it is.
  bool plain = false;
  // CF_BUILTIN(op, type) per predefined_op index, or kNoFunc where carflow
  // has no function (MPI then reports or serves the call).
  static constexpr int kNoFunc = 0;  // built-ins are negative (carflow.h), registered ones >= 0
  int func[kPredefinedOps] = {};
};
constexpr size_t kNamedTypeSlots = 128;  // open addressing by handle, under half full

// A communicator's teams, as the value of its attribute. `second` has the
// same members and serves only the second step of the nonblocking v forms
// (vforms.cc), which starts when a wait sees the first one done: carflow
// orders collectives per team, so those steps keep one order of their own.
struct TeamAttr {
  cf_team_t team;
  cf_team_t second;
  int rank, size;  // this process's rank in the communicator, and its size
};

// count elements of type as carflow's contiguous bytes. When the layout is
// one run of bytes in type-map order, data points into the user's buffer;
// else into a private buffer the layer packs or unpacks (PMPI_Pack), so
// every rank still takes carflow's path whatever its own layout.
class Staged {
 public:
  // For reading: the bytes of buf (packed now when needed). align: data's
  // alignment, a power of two, copied to a private buffer when the user's is not aligned
  // (carflow refuses misaligned reduction buffers, and on one rank alone a
  // refusal would put the ranks out of step).
  int stage_in(const void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  // For writing: data is where the result goes; finish() unpacks it.
  int stage_out(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  // For both (in place): like stage_out, but data holds buf's bytes first.
  int stage_inout(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align = 1);
  // Inline: most calls have nothing to write back.
  bool writes_back() const { return writes_ && tmp_ != nullptr; }
  int finish(MPI_Comm comm) { return writes_back() ? write_back(comm) : MPI_SUCCESS; }
  // Unstaged again; nothing to do for one never staged (a direct call's).
  void clear() {
    if (data != nullptr || nbytes != 0 || writes_ || tmp_ != nullptr) *this = Staged();
  }
  char* data = nullptr;
  size_t nbytes = 0;

 private:
  int stage(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align, bool fill);
  int write_back(MPI_Comm comm);
  std::unique_ptr<char[]> tmp_;
  bool packed_ = false;   // tmp_ holds PMPI_Pack's bytes (else a plain copy)
  bool writes_ = false;   // finish() copies tmp_ back into the user's buffer
  void* user_ = nullptr;
  int count_ = 0;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
};

// An MPI v-form buffer (counts and displacements in elements of type, each
// rank's own layout: MPI lets displacements differ by rank) as carflow's
// blocks packed in rank order. Packed displacements are staged as one
// buffer (no copy when the type is one run of bytes); others go through a
// private packed copy, filled block by block for reading, spread block by
// block by finish(). Displacements so never decide carflow or MPI.
class Blocks {
 public:
  int stage_in(const void* base, const int counts[], const int displs[], MPI_Datatype type, int n,
               MPI_Comm comm);
  int stage_out(void* base, const int counts[], const int displs[], MPI_Datatype type, int n, MPI_Comm comm);
  int finish(MPI_Comm comm);
  char* data = nullptr;
  std::vector<size_t> bytes;  // block i's bytes
  size_t nbytes = 0;

 private:
  int stage(void* base, const int counts[], const int displs[], MPI_Datatype type, int n, MPI_Comm comm,
            bool fill);
  Staged whole_;
  std::unique_ptr<char[]> packed_;  // blocks at other displacements, packed
  char* base_ = nullptr;
  std::vector<int> counts_, displs_;
  MPI_Datatype type_ = MPI_DATATYPE_NULL;
  bool writes_ = false;
};

// The second step of a two-step call (vforms.cc), run once the first is
// done: an interface of one function, so a call that has none carries one
// null pointer.
class Step {
 public:
  virtual ~Step() = default;
  virtual int run(Call& call) = 0;
};

// One MPI collective served by carflow, from its staging to its end. A
// blocking call's lives on its MPI function's stack; a nonblocking call's
// in a record of Layer::calls until MPI frees its request (requests.cc).
// What only some calls need (the v forms' blocks and counts, private
// copies, a second step) is made at first use, so the common call builds
// and ends two empty Staged and a few words.
class Call {
 public:
  Call(Coll coll, MPI_Comm comm, bool nonblocking) : coll(coll), comm(comm), nonblocking_(nonblocking) {}
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  // A record of Layer::calls: made once, then begun and cleared per call.
  Call() : nonblocking_(true) {}
  void begin(Coll c, MPI_Comm m) {
    coll = c;
    comm = m;
    handle = CF_COLL_INVALID_HANDLE;
    error = MPI_SUCCESS;
  }
  // Back to an empty call: staged buffers and extras freed (on any thread).
  void clear() {
    dst.clear();
    src.clear();
    if (extra_ != nullptr) extra_.reset();
  }

  // Runs carflow's collective: its blocking form for a blocking MPI call,
  // else its _nb form, whose handle the MPI wait and test calls progress.
  template <typename... A>
  int run(int (*blocking)(A...), cf_coll_handle_t (*start)(A...), std::type_identity_t<A>... args) {
    if (!nonblocking_) return end(blocking(args...));
    handle = start(args...);
    return handle == CF_COLL_INVALID_HANDLE ? carflow_failed(comm, coll, cf_last_status()) : MPI_SUCCESS;
  }
  // carflow's part ended with status: the results go to the user's buffers.
  // Inline when nothing is staged (a direct nonblocking call's).
  int end(int status) {
    if (status == CF_OK && nonblocking_ && extra_ == nullptr && !dst.writes_back()) return MPI_SUCCESS;
    return end_rest(status);
  }
  // A call that moves nothing on any rank (every count 0): done at once.
  int nothing_to_do();
  bool nonblocking() const { return nonblocking_; }

  Coll coll = Coll::kCount;
  MPI_Comm comm = MPI_COMM_NULL;
  Staged dst, src;
  Blocks& vdst() { return extra().vdst; }  // the v forms' blocks
  Blocks& vsrc() { return extra().vsrc; }
  // A private copy of a source carflow must not overlap.
  std::unique_ptr<char[]>& copy() { return extra().copy; }
  std::vector<size_t>& counts() { return extra().counts; }  // v forms: bytes per block, as every rank knows them
  std::vector<size_t>& own_counts() { return extra().own_counts; }  // v forms: this rank's row, being shared
  // A nonblocking call of two steps: the second, started on second_team
  // once handle (the first) is done and every older call's second step on
  // that team has started.
  void then(cf_team_t second_team, std::unique_ptr<Step> step) {
    extra().second_team = second_team;
    extra().next = std::move(step);
  }
  bool has_next() const { return extra_ != nullptr && extra_->next != nullptr; }
  cf_team_t second_team() const { return extra_ != nullptr ? extra_->second_team : CF_TEAM_NULL; }
  std::unique_ptr<Step> take_next() { return std::move(extra().next); }

  cf_coll_handle_t handle = CF_COLL_INVALID_HANDLE;
  MPI_Request request = MPI_REQUEST_NULL;  // the generalized request of a nonblocking call
  int error = MPI_SUCCESS;                 // its outcome, for the request's status

 private:
  struct Extra {
    Blocks vdst, vsrc;
    std::unique_ptr<char[]> copy;
    std::vector<size_t> counts, own_counts;
    std::unique_ptr<Step> next;
    cf_team_t second_team = CF_TEAM_NULL;
  };
  Extra& extra() {
    if (extra_ == nullptr) extra_ = std::make_unique<Extra>();
    return *extra_;
  }
  int end_rest(int status);
  std::unique_ptr<Extra> extra_;
  const bool nonblocking_;
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
  MPI_Comm last_comm = MPI_COMM_NULL;   // the last communicator whose team was looked up,
  TeamAttr* last_attr = nullptr;        // and its attribute (comms.cc, parent_team)
  int world_size = 0;
  std::vector<Call*> pending;  // nonblocking calls whose carflow handle is live, oldest first
  RecordPool<Call> calls;      // every nonblocking call's record (requests.cc)
  // A finished request's status, made once by MPI's own setters: no source,
  // tag or elements, not cancelled; MPI's query of a request copies it.
  MPI_Status request_status{};
  NamedType named_types[kNamedTypeSlots];  // MPI's predefined datatypes (staging.cc)
  std::vector<cf_team_t> held;  // progress_pending's scratch: second teams whose next step must wait
  cf_team_t world_second = CF_TEAM_NULL;  // MPI_COMM_WORLD's TeamAttr::second
  uint64_t on_carflow[static_cast<int>(Coll::kCount)] = {};
  uint64_t on_pmpi[static_cast<int>(Coll::kCount)][static_cast<int>(Fallback::kCount)] = {};
};
// Inline: every call of the layer asks for it several times.
inline Layer& layer() {
  static Layer the_layer;
  return the_layer;
}

// The calling rank and the size of comm, for the checks made before a
// call is served; 0 and 0 when the layer is not serving (after
// MPI_Finalize, or stepped aside), where the call then goes to MPI
// unchanged: asking the communicator first would make MPI's error name
// MPI_Comm_rank instead of the collective the program called. Known
// without asking MPI for MPI_COMM_WORLD and the last communicator served.
inline void comm_rank_size(MPI_Comm comm, int* rank, int* size) {
  const Layer& l = layer();
  *rank = 0;
  *size = 0;
  if (!l.active) return;
  if (comm == MPI_COMM_WORLD) {
    *rank = l.world_rank;
    *size = l.world_size;
  } else if (comm == l.last_comm) {
    *rank = l.last_attr->rank;
    *size = l.last_attr->size;
  } else {
    PMPI_Comm_rank(comm, rank);
    PMPI_Comm_size(comm, size);
  }
}

// Whether the program runs another MPI than the Open MPI whose mpi.h the
// layer is built with (MPICH: handles are integers, not Open MPI's
// pointers). Said once on stderr; then every call goes to that MPI
// unchanged and no handle is ever read.
bool foreign_mpi();

// Starts carflow after PMPI_Init(_thread) and decides, alike on every rank,
// whether the layer serves calls; ends it before PMPI_Finalize.
void start_after_mpi_init();
void stop_before_mpi_finalize();

// The team serving `comm`, or why it has none. MPI_COMM_WORLD is
// CF_TEAM_ALL; other communicators hold theirs as an attribute.
// valid: the arguments pass the checks below; a call that fails them (or
// names MPI_COMM_NULL) goes to PMPI, which returns the error Open MPI alone
// returns, through the communicator's error handler.
// Inline for the common case (MPI_COMM_WORLD or the last communicator,
// valid arguments, MPI_Init's thread); team_of_rest decides the others.
bool team_of_rest(MPI_Comm comm, cf_team_t* team, Coll coll, cf_team_t* second, bool valid);
inline bool team_of(MPI_Comm comm, cf_team_t* team, Coll coll, cf_team_t* second = nullptr, bool valid = true) {
  const Layer& l = layer();
  if (l.active && valid && pthread_equal(pthread_self(), static_cast<pthread_t>(l.image_thread))) {
    if (comm == MPI_COMM_WORLD) {
      *team = CF_TEAM_ALL;
      if (second != nullptr) *second = l.world_second;
      return true;
    }
    if (comm == l.last_comm && comm != MPI_COMM_NULL) {
      *team = l.last_attr->team;
      if (second != nullptr) *second = l.last_attr->second;
      return true;
    }
  }
  return team_of_rest(comm, team, coll, second, valid);
}
// Data movement of nbytes on every rank: the team if the call goes to
// carflow, counting the fallback otherwise.
bool served(MPI_Comm comm, size_t nbytes, Coll coll, cf_team_t* team, bool valid = true);
// Argument checks Open MPI makes too (its MPI_PARAM_CHECK): a root of the
// communicator, counts not negative, a datatype that is not null.
inline bool valid_root(MPI_Comm comm, int root) {
  if (!layer().active || comm == MPI_COMM_NULL) return false;
  int rank = 0, size = 0;
  comm_rank_size(comm, &rank, &size);
  return root >= 0 && root < size;
}
inline bool valid_buf(int count, MPI_Datatype type) { return count >= 0 && type != MPI_DATATYPE_NULL; }
bool valid_counts(const int counts[], int n, MPI_Datatype type);
// After a communicator constructor ran on every rank of `parent`: gives
// `child` (MPI_COMM_NULL on ranks outside it) a team split from parent's.
void attach_team(MPI_Comm parent, MPI_Comm child);
// The attribute's key, made once carflow runs; every team freed before cf_finalize.
void create_team_keyval();
// The second team of `team` (TeamAttr::second), split from it by every member.
bool split_second(cf_team_t team, cf_team_t* second);
void free_all_teams();

inline void count_carflow(Coll c) { ++layer().on_carflow[static_cast<int>(c)]; }
void count_pmpi(Coll c, Fallback why);

// The index of a predefined op carflow has a function for
// (NamedType::func), or -1.
int predefined_op(MPI_Op op);

// A handle's first slot in Layer::named_types: Fibonacci hashing of its
// address (handles are pointers to objects of tens of bytes).
inline size_t named_slot(MPI_Datatype type) {
  static_assert(kNamedTypeSlots == 128);
  return static_cast<size_t>((reinterpret_cast<uintptr_t>(type) >> 3) * 0x9E3779B97F4A7C15ull >> 57);
}

// The layout of a predefined type, or nullptr (a derived type, or before
// the layer turned on).
inline const NamedType* named_type(MPI_Datatype type) {
  if (type == MPI_DATATYPE_NULL) return nullptr;
  const NamedType* slots = layer().named_types;
  for (size_t i = named_slot(type);; i = (i + 1) % kNamedTypeSlots) {
    if (slots[i].type == type) return &slots[i];
    if (slots[i].type == MPI_DATATYPE_NULL) return nullptr;  // the table is under half full
  }
}

// A predefined type whose elements, any count, are one run of bytes at the
// buffer (NamedType::plain): carflow takes such a buffer as it is, with no
// staging, so a call whose buffers are all plain goes to carflow directly.
inline bool plain_type(MPI_Datatype type) {
  const NamedType* named = named_type(type);
  return named != nullptr && named->plain;
}

// A blocking call carflow ran on the user's own buffers (nothing staged)
// ended with status.
inline int direct_end(MPI_Comm comm, Coll coll, int status) {
  if (status != CF_OK) return carflow_failed(comm, coll, status);
  count_carflow(coll);
  return MPI_SUCCESS;
}

// Bytes of count elements of type (MPI_Type_size times count).
size_t type_bytes(int count, MPI_Datatype type);
// Fills Layer::named_types; after MPI_Init, before the first call served.
void learn_named_types();
// Fills Layer::request_status, likewise.
void learn_request_status();

// A nonblocking call's record, its carflow handle live (or none: nothing
// to move), behind a new generalized request in *request.
int start_request(Call* call, MPI_Request* request);
// Runs body(call) for a blocking MPI call (request == nullptr), or for a
// nonblocking one whose generalized request goes to *request.
template <typename Body>
int serve(Coll coll, MPI_Comm comm, MPI_Request* request, Body body) {
  if (request == nullptr) {
    Call call(coll, comm, false);
    return body(call);
  }
  Call* call = layer().calls.take();
  call->begin(form(coll, request), comm);
  const int rc = body(*call);
  if (rc != MPI_SUCCESS) {
    call->clear();
    layer().calls.give_back(call);
    return rc;
  }
  return start_request(call, request);
}

// A nonblocking call carflow runs on the user's own buffers (nothing
// staged; coll is the nonblocking form): its handle, from carflow's _nb
// call, in a record behind MPI's request.
int start_direct(Coll coll, MPI_Comm comm, cf_coll_handle_t handle, MPI_Request* request);

// A call carflow runs on the user's own buffers, `coll` its blocking form:
// blocking(args...) ends it when request is null, else nonblocking(args...)
// starts it behind *request.
template <typename Blocking, typename Nonblocking, typename... Args>
inline int call_direct(Coll coll, MPI_Comm comm, MPI_Request* request, Blocking blocking, Nonblocking nonblocking,
                       Args... args) {
  if (request == nullptr) return direct_end(comm, coll, blocking(args...));
  return start_direct(form(coll, request), comm, nonblocking(args...), request);
}

// Every pending nonblocking call whose carflow handle is done ends and
// completes its generalized request. Only from MPI_Init's thread.
void progress_pending();

}  // namespace carflow::mpi

#endif  // CARFLOW_API_MPI_LAYER_H
