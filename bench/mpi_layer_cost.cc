// mpi_layer_cost: what libcarflow_mpi adds to one MPI collective call, in
// ns: its decision (team, datatype and op lookups, argument checks), the
// staging of the user's buffers, the counts, and for a nonblocking call the
// generalized request, the pending list and the wait that completes it.
//
//   mpirun -np 2 bazel-bin/bench/mpi_layer_cost [calls] [windows]
//
// The binary holds the layer's own code (//api/mpi:layer, linked in as the
// preloaded library would be) with carflow's collective calls stubbed at link
// time (-Wl,--wrap, BUILD): cf_coll_barrier, _broadcast, _allreduce,
// _scatter, _gather, _gather_all and _exchange return CF_OK at once, the
// _nb forms of the first three a handle that cf_coll_try_sync finds
// done at its first try. What is timed is then the MPI_* entry point of the
// layer from argument to return, minus the collective. carflow itself starts
// as under the preload (MPI_Init), so the layer is on. Rank 0 times; the
// other ranks sleep meanwhile (they only make the layer turn on: a job of
// one process is left to MPI), so nothing crosses processes in a timed loop.
//
// Per case: `windows` windows (default 400) of `calls` calls each (default
// 5000, well under a millisecond) after a warm-up; ns_per_call is the
// fastest window's average (on a shared machine most windows meet another
// process; the fastest is the one that did not), median_ns the median
// window's. "stub alone" is the loop around a call of the stub itself, the
// floor every other line includes. "MPI's generalized request" is what MPI
// alone charges for the request every nonblocking call of the layer returns
// (PMPI_Grequest_start, _complete, PMPI_Wait, with a query that only copies
// a status and a free that does nothing): its part of the nonblocking
// lines. Prints one JSON line per case, then a table.
#include <carflow/carflow.h>
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include <unistd.h>

#include "bench/arg.h"

namespace {

// Any value other than CF_COLL_INVALID_HANDLE: the layer only stores it and
// hands it back to cf_coll_try_sync.
const cf_coll_handle_t kDoneHandle = 0x5ca1ab1e;

}  // namespace

extern "C" {
int __real_cf_coll_try_sync(cf_coll_handle_t handle);

int __wrap_cf_coll_barrier(cf_team_t, int) { return CF_OK; }
cf_coll_handle_t __wrap_cf_coll_barrier_nb(cf_team_t, int) { return kDoneHandle; }
int __wrap_cf_coll_broadcast(cf_team_t, void*, cf_image_t, void*, size_t, int) { return CF_OK; }
cf_coll_handle_t __wrap_cf_coll_broadcast_nb(cf_team_t, void*, cf_image_t, void*, size_t, int) {
  return kDoneHandle;
}
int __wrap_cf_coll_allreduce(cf_team_t, void*, const void*, size_t, size_t, int, int, int) { return CF_OK; }
cf_coll_handle_t __wrap_cf_coll_allreduce_nb(cf_team_t, void*, const void*, size_t, size_t, int, int, int) {
  return kDoneHandle;
}
int __wrap_cf_coll_scatter(cf_team_t, void*, cf_image_t, void*, size_t, int) { return CF_OK; }
int __wrap_cf_coll_gather(cf_team_t, cf_image_t, void*, void*, size_t, int) { return CF_OK; }
int __wrap_cf_coll_gather_all(cf_team_t, void*, void*, size_t, int) { return CF_OK; }
int __wrap_cf_coll_exchange(cf_team_t, void*, void*, size_t, int) { return CF_OK; }
int __wrap_cf_coll_try_sync(cf_coll_handle_t handle) {
  return handle == kDoneHandle ? CF_OK : __real_cf_coll_try_sync(handle);
}
}  // extern "C"

namespace {

struct Case {
  const char* name;  // what the table calls it
  const char* call;  // the MPI function whose count must grow (served by carflow)
  int (*run)(MPI_Comm comm, double* buf);
};

// The stub alone, through a pointer the compiler cannot see through.
int (*volatile stub_barrier)(cf_team_t, int) = __wrap_cf_coll_barrier;
int call_stub(MPI_Comm, double*) { return stub_barrier(CF_TEAM_ALL, 0); }

int barrier(MPI_Comm comm, double*) { return MPI_Barrier(comm); }
int bcast(MPI_Comm comm, double* buf) { return MPI_Bcast(buf, 1, MPI_DOUBLE, 0, comm); }
int allreduce(MPI_Comm comm, double* buf) {
  return MPI_Allreduce(buf, buf + 8, 1, MPI_DOUBLE, MPI_SUM, comm);
}
int allreduce_in_place(MPI_Comm comm, double* buf) {
  return MPI_Allreduce(MPI_IN_PLACE, buf, 1, MPI_DOUBLE, MPI_SUM, comm);
}
// Rank 0 is every rooted call's root; 1 double a block (2 ranks: buf holds
// the blocks at 0 and 1, the received ones at 8 and 9).
int scatter(MPI_Comm comm, double* buf) { return MPI_Scatter(buf, 1, MPI_DOUBLE, buf + 8, 1, MPI_DOUBLE, 0, comm); }
int gather(MPI_Comm comm, double* buf) { return MPI_Gather(buf, 1, MPI_DOUBLE, buf + 8, 1, MPI_DOUBLE, 0, comm); }
int allgather(MPI_Comm comm, double* buf) { return MPI_Allgather(buf, 1, MPI_DOUBLE, buf + 8, 1, MPI_DOUBLE, comm); }
int alltoall(MPI_Comm comm, double* buf) { return MPI_Alltoall(buf, 1, MPI_DOUBLE, buf + 8, 1, MPI_DOUBLE, comm); }
int ibarrier_wait(MPI_Comm comm, double*) {
  MPI_Request request;
  const int rc = MPI_Ibarrier(comm, &request);
  return rc != MPI_SUCCESS ? rc : MPI_Wait(&request, MPI_STATUS_IGNORE);
}
int ibcast_wait(MPI_Comm comm, double* buf) {
  MPI_Request request;
  const int rc = MPI_Ibcast(buf, 1, MPI_DOUBLE, 0, comm, &request);
  return rc != MPI_SUCCESS ? rc : MPI_Wait(&request, MPI_STATUS_IGNORE);
}
int iallreduce_wait(MPI_Comm comm, double* buf) {
  MPI_Request request;
  const int rc = MPI_Iallreduce(buf, buf + 8, 1, MPI_DOUBLE, MPI_SUM, comm, &request);
  return rc != MPI_SUCCESS ? rc : MPI_Wait(&request, MPI_STATUS_IGNORE);
}
// The least a query may do: copy a status made once by MPI's setters (no
// elements, not cancelled), as the layer's own query does.
MPI_Status empty_status;
int query_nothing(void*, MPI_Status* status) {
  *status = empty_status;
  return MPI_SUCCESS;
}
int free_nothing(void*) { return MPI_SUCCESS; }
int cancel_nothing(void*, int) { return MPI_SUCCESS; }
int grequest_alone(MPI_Comm, double*) {
  MPI_Request request;
  int rc = PMPI_Grequest_start(query_nothing, free_nothing, cancel_nothing, nullptr, &request);
  if (rc == MPI_SUCCESS) rc = PMPI_Grequest_complete(request);
  return rc != MPI_SUCCESS ? rc : PMPI_Wait(&request, MPI_STATUS_IGNORE);
}

const Case kCases[] = {
    {"stub alone", nullptr, call_stub},
    {"MPI's generalized request", nullptr, grequest_alone},
    {"MPI_Barrier", "MPI_Barrier", barrier},
    {"MPI_Bcast 8 B", "MPI_Bcast", bcast},
    {"MPI_Allreduce 1 double", "MPI_Allreduce", allreduce},
    {"MPI_Allreduce in place", "MPI_Allreduce", allreduce_in_place},
    {"MPI_Scatter 1 double", "MPI_Scatter", scatter},
    {"MPI_Gather 1 double", "MPI_Gather", gather},
    {"MPI_Allgather 1 double", "MPI_Allgather", allgather},
    {"MPI_Alltoall 1 double", "MPI_Alltoall", alltoall},
    {"MPI_Ibarrier + MPI_Wait", "MPI_Ibarrier", ibarrier_wait},
    {"MPI_Ibcast + MPI_Wait", "MPI_Ibcast", ibcast_wait},
    {"MPI_Iallreduce + MPI_Wait", "MPI_Iallreduce", iallreduce_wait},
};

extern "C" int cf_mpi_calls(const char* mpi_function, uint64_t* on_carflow, uint64_t* on_mpi);

uint64_t served_count(const char* call) {
  uint64_t on_carflow = 0, on_mpi = 0;
  cf_mpi_calls(call, &on_carflow, &on_mpi);
  return on_carflow;
}

// The other ranks sleep until rank 0 is done: a zero-byte message from it,
// looked for every millisecond, so they take no core from the timing.
void wait_asleep() {
  MPI_Request request;
  PMPI_Irecv(nullptr, 0, MPI_BYTE, 0, 0, MPI_COMM_WORLD, &request);
  for (int done = 0; !done;) {
    PMPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (!done) usleep(1000);
  }
}
void wake_sleepers() {
  int size = 1;
  PMPI_Comm_size(MPI_COMM_WORLD, &size);
  for (int r = 1; r < size; ++r) PMPI_Send(nullptr, 0, MPI_BYTE, r, 0, MPI_COMM_WORLD);
}

// ns per call of each window, sorted.
std::vector<double> time_case(const Case& c, MPI_Comm comm, long calls, int windows) {
  double buf[16] = {1.0};
  for (long i = 0; i < calls / 10 + 1; ++i) c.run(comm, buf);
  std::vector<double> ns;
  for (int r = 0; r < windows; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < calls; ++i) {
      if (c.run(comm, buf) != MPI_SUCCESS) {
        std::fprintf(stderr, "mpi_layer_cost: %s failed\n", c.name);
        PMPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() /
                 static_cast<double>(calls));
  }
  std::sort(ns.begin(), ns.end());
  return ns;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);  // the layer's: carflow starts, the layer turns on
  PMPI_Status_set_elements(&empty_status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(&empty_status, 0);
  const long calls = static_cast<long>(carflow_bench::arg_uint(argc, argv, 1, "calls", 5000, 1, 100000000));
  const int windows = static_cast<int>(carflow_bench::arg_uint(argc, argv, 2, "windows", 400, 1, 100000));
  int rank = 0;
  PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
  // A communicator of the layer's own (its team is an attribute lookup away);
  // MPI_COMM_WORLD's is a comparison.
  MPI_Comm dup = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  if (rank != 0) {
    wait_asleep();
    MPI_Comm_free(&dup);
    MPI_Finalize();
    return 0;
  }
  struct Row { const char* name; const char* comm; double best, median; };
  std::vector<Row> rows;
  for (const auto& [comm, comm_name] : {std::pair{MPI_COMM_WORLD, "world"}, std::pair{dup, "dup"}}) {
    for (const Case& c : kCases) {
      if (c.call == nullptr && comm != MPI_COMM_WORLD) continue;
      const uint64_t before = c.call != nullptr ? served_count(c.call) : 0;
      const std::vector<double> ns = time_case(c, comm, calls, windows);
      if (c.call != nullptr && served_count(c.call) - before < static_cast<uint64_t>(calls) * windows) {
        std::fprintf(stderr, "mpi_layer_cost: %s on %s was not served by the layer (is it on?)\n", c.name,
                     comm_name);
        PMPI_Abort(MPI_COMM_WORLD, 1);
      }
      const double median = ns[ns.size() / 2];
      std::printf("{\"case\":\"%s\",\"comm\":\"%s\",\"calls\":%ld,\"windows\":%d,"
                  "\"ns_per_call\":%.1f,\"median_ns\":%.1f}\n",
                  c.name, comm_name, calls, windows, ns.front(), median);
      rows.push_back({c.name, comm_name, ns.front(), median});
    }
  }
  std::printf("\n| call (carflow stubbed) | communicator | ns per call | median window ns |\n|---|---|---:|---:|\n");
  for (const Row& r : rows) std::printf("| %s | %s | %.1f | %.1f |\n", r.name, r.comm, r.best, r.median);
  std::fflush(stdout);
  wake_sleepers();
  MPI_Comm_free(&dup);
  MPI_Finalize();
  return 0;
}
