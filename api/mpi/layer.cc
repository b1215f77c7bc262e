// libcarflow_mpi's life: carflow starts after MPI_Init on the same
// processes (cf_init joins the job through the PMIx that mpirun gave MPI),
// and ends before MPI_Finalize; the per-collective counts and their report.
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

bool env_on(const char* name) {
  const char* text = std::getenv(name);
  return text != nullptr && std::strcmp(text, "1") == 0;
}

// Why this process cannot serve collectives through carflow; "" if it can.
std::string start_carflow(int rank, int size, bool* started) {
  if (size < 2) return "a job of one process has nothing to share";
  if (cf_init(nullptr, nullptr) != CF_OK) return std::string("cf_init: ") + cf_last_error();
  *started = true;
  if (cf_nodes() != static_cast<cf_node_t>(size) || cf_mynode() != static_cast<cf_node_t>(rank)) {
    return "carflow numbers this process node " + std::to_string(cf_mynode()) + " of " +
           std::to_string(cf_nodes()) + ", MPI_COMM_WORLD rank " + std::to_string(rank) + " of " +
           std::to_string(size);
  }
  if (cf_coll_init(nullptr, cf_mynode(), nullptr, 0, 0) != CF_OK) {
    return std::string("cf_coll_init: ") + cf_last_error();
  }
  if (!split_second(CF_TEAM_ALL, &layer().world_second)) return std::string("cf_team_split: ") + cf_last_error();
  return "";
}

// Whether a library is Open MPI's libmpi: it defines ompi_mpi_comm_world
// (asked through its own handle: the program's copy of the variable may
// live in the executable).
bool is_open_mpi(const char* path) {
  void* lib = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
  if (lib == nullptr) return false;
  const bool found = dlsym(lib, "ompi_mpi_comm_world") != nullptr;
  dlclose(lib);
  return found;
}

// A loaded library whose PMPI_Init (its own or its dependencies') is not
// Open MPI's: another MPI. Every object is asked, not the global scope,
// whose order can put Open MPI's first (a Fortran program reaches MPICH's
// libmpich through libmpichfort, a level below the layer's own libmpi).
int find_other_mpi(struct dl_phdr_info* info, size_t, void* data) {
  auto* other = static_cast<std::string*>(data);
  if (info->dlpi_name == nullptr || info->dlpi_name[0] == '\0') return 0;
  void* handle = dlopen(info->dlpi_name, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) return 0;
  void* init = dlsym(handle, "PMPI_Init");
  Dl_info where{};
  if (init != nullptr && dladdr(init, &where) != 0 && where.dli_fname != nullptr &&
      !is_open_mpi(where.dli_fname)) {
    *other = where.dli_fname;
  }
  dlclose(handle);
  return other->empty() ? 0 : 1;
}

std::string other_mpi_library() {
  std::string other;
  dl_iterate_phdr(find_other_mpi, &other);
  return other;
}

void print_report(const Layer& l) {
  for (int c = 0; c < static_cast<int>(Coll::kCount); ++c) {
    uint64_t pmpi = 0;
    std::string reasons;
    for (int f = 0; f < static_cast<int>(Fallback::kCount); ++f) {
      if (l.on_pmpi[c][f] == 0) continue;
      pmpi += l.on_pmpi[c][f];
      reasons += (reasons.empty() ? " (" : ", ") + std::string(fallback_name(static_cast<Fallback>(f))) + " " +
                 std::to_string(l.on_pmpi[c][f]);
    }
    if (l.on_carflow[c] == 0 && pmpi == 0) continue;
    if (!reasons.empty()) reasons += ")";
    std::fprintf(stderr, "libcarflow_mpi: rank %d: %s: %llu on carflow, %llu on MPI%s\n", l.world_rank,
                 coll_name(static_cast<Coll>(c)), static_cast<unsigned long long>(l.on_carflow[c]),
                 static_cast<unsigned long long>(pmpi), reasons.c_str());
  }
  std::fflush(stderr);
}

}  // namespace

bool foreign_mpi() {
  static const bool foreign = [] {
    const std::string other = other_mpi_library();
    if (other.empty()) return false;
    std::fprintf(stderr,
                 "libcarflow_mpi: the program's MPI is %s, not the Open MPI this layer is built for: every MPI "
                 "call goes to it unchanged, none to carflow (run without LD_PRELOAD=libcarflow_mpi.so)\n",
                 other.c_str());
    return true;
  }();
  return foreign;
}

const char* coll_name(Coll c) {
  static const char* const names[] = {
      "MPI_Barrier",    "MPI_Bcast",      "MPI_Reduce",    "MPI_Allreduce",
      "MPI_Allgather",  "MPI_Allgatherv", "MPI_Alltoall",  "MPI_Gather",
      "MPI_Scatter",    "MPI_Scan",       "MPI_Exscan",    "MPI_Reduce_scatter_block",
      "MPI_Reduce_scatter", "MPI_Gatherv", "MPI_Scatterv", "MPI_Alltoallv",
      "MPI_Ibarrier",   "MPI_Ibcast",     "MPI_Ireduce",   "MPI_Iallreduce",
      "MPI_Iallgather", "MPI_Iallgatherv", "MPI_Ialltoall", "MPI_Igather",
      "MPI_Iscatter",   "MPI_Iscan",      "MPI_Iexscan",   "MPI_Ireduce_scatter_block",
      "MPI_Ireduce_scatter", "MPI_Igatherv", "MPI_Iscatterv", "MPI_Ialltoallv"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Coll::kCount));
  return names[static_cast<int>(c)];
}

const char* fallback_name(Fallback f) {
  static const char* const names[] = {"layer off", "communicator without a team", "count 0", "datatype",
                                      "op", "erroneous arguments"};
  static_assert(sizeof names / sizeof names[0] == static_cast<size_t>(Fallback::kCount));
  return names[static_cast<int>(f)];
}

void count_pmpi(Coll c, Fallback why) { ++layer().on_pmpi[static_cast<int>(c)][static_cast<int>(why)]; }

int carflow_failed(MPI_Comm comm, Coll c, int status) {
  std::fprintf(stderr, "libcarflow_mpi: rank %d: %s on carflow failed: %s (%s)\n", layer().world_rank,
               coll_name(c), cf_last_error(), cf_strerror(status));
  PMPI_Comm_call_errhandler(comm, MPI_ERR_OTHER);
  return MPI_ERR_OTHER;
}

// Every rank takes the same decision: one that cannot start carflow turns
// the layer off everywhere (a collective served by carflow on some ranks and
// by MPI on others would never meet). The lowest such rank says why.
void start_after_mpi_init() {
  Layer& l = layer();
  int size = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &l.world_rank);
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  l.world_size = size;
  l.report = env_on("CF_MPI_REPORT");
  // Failures come back as statuses: the layer turns them into MPI errors.
  cf_set_error_mode(CF_ERRORS_RETURN);
  bool started = false;
  const std::string why = start_carflow(l.world_rank, size, &started);
  const int mine = why.empty() ? INT_MAX : l.world_rank;
  int first_failed = INT_MAX;
  PMPI_Allreduce(&mine, &first_failed, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  const bool verbose = env_on("CF_MPI_VERBOSE");
  if (first_failed != INT_MAX) {
    if (started) cf_finalize();
    if (verbose && first_failed == l.world_rank) {
      std::fprintf(stderr, "libcarflow_mpi: every collective goes to MPI: rank %d: %s\n", l.world_rank,
                   why.c_str());
    }
    return;
  }
  create_team_keyval();
  learn_named_types();
  learn_request_status();
  l.image_thread = static_cast<unsigned long>(pthread_self());
  l.calls.set_owner(pthread_self());
  l.active = true;
  if (verbose && l.world_rank == 0) {
    std::fprintf(stderr, "libcarflow_mpi: carflow serves the collectives of %d processes\n", size);
  }
}

void stop_before_mpi_finalize() {
  Layer& l = layer();
  if (l.report) print_report(l);
  if (l.active) {
    free_all_teams();
    cf_finalize();
    l.active = false;
  }
  l.finalized = true;
}

}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Init(int* argc, char*** argv) {
  if (foreign_mpi()) return PMPI_Init(argc, argv);
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) start_after_mpi_init();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  if (foreign_mpi()) return PMPI_Init_thread(argc, argv, required, provided);
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) start_after_mpi_init();
  return rc;
}

int MPI_Finalize(void) {
  stop_before_mpi_finalize();
  return PMPI_Finalize();
}

// For tests and tools (looked up with dlsym, so a program runs with or
// without the layer): calls of one MPI collective ("MPI_Bcast") served by
// carflow and by MPI so far. 0, or -1 for a name the layer does not count.
int cf_mpi_calls(const char* mpi_function, uint64_t* on_carflow, uint64_t* on_mpi) {
  for (int c = 0; c < static_cast<int>(Coll::kCount); ++c) {
    if (std::strcmp(mpi_function, coll_name(static_cast<Coll>(c))) != 0) continue;
    const Layer& l = layer();
    uint64_t pmpi = 0;
    for (uint64_t n : l.on_pmpi[c]) pmpi += n;
    if (on_carflow != nullptr) *on_carflow = l.on_carflow[c];
    if (on_mpi != nullptr) *on_mpi = pmpi;
    return 0;
  }
  return -1;
}

}  // extern "C"
