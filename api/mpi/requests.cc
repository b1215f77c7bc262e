// Nonblocking collectives as MPI requests. A call served by carflow returns
// a generalized request (MPI_Grequest_start) and joins the pending list; the
// MPI wait and test calls progress every pending carflow handle, end the
// finished calls and complete their requests, then ask MPI. While carflow
// calls are pending a wait is a loop of both, so waiting on any request
// (a point-to-point receive whose sender first waits on the collective,
// say) still moves carflow's collectives: MPI's progress rule for
// nonblocking collectives (MPI-4.0, 6.12) asks no less. MPI_Recv, MPI_Send
// and MPI_Sendrecv wait so too while carflow calls are pending.
#include <pthread.h>
#include <sched.h>

#include <algorithm>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

// MPI's status for a collective's request (Layer::request_status) with the
// call's outcome. MPI asks it at every wait or test that finds the request
// done, maybe on another thread, after the image thread wrote error and
// completed the request.
int query_call(void* state, MPI_Status* status) {
  const int error = static_cast<const Call*>(state)->error;
  *status = layer().request_status;
  status->MPI_ERROR = error;
  return error;
}

// The request is freed once MPI saw it complete (the call left the
// pending list then), on whichever thread freed it; the call's buffers go
// with its record.
int free_call(void* state) {
  auto* call = static_cast<Call*>(state);
  call->clear();
  layer().calls.give_back(call);
  return MPI_SUCCESS;
}

// A started collective cannot be taken back; MPI makes cancelling one
// erroneous anyway (MPI-4.0, 6.12).
int cancel_call(void*, int) { return MPI_SUCCESS; }

[[gnu::always_inline]] inline bool on_image_thread() {
  return pthread_equal(pthread_self(), static_cast<pthread_t>(layer().image_thread));
}

// Whether a wait must loop over carflow and MPI; else it may block in MPI.
// Other threads than MPI_Init's cannot progress carflow and leave it to it
// (nor read the pending list, which that thread changes).
// Inline: every wait, test and blocking point-to-point call asks it first.
[[gnu::always_inline]] inline bool carflow_pending() { return on_image_thread() && !layer().pending.empty(); }

// Waits until test says done: carflow's pending calls and MPI's requests
// progressed in turn (MPI_Test* progress MPI), yielding the core after a
// few empty rounds, which matters when ranks outnumber cores. Once nothing
// of carflow's is pending, MPI's own blocking wait takes over. Only when
// carflow_pending() said so: on the image thread.
template <typename Test, typename Wait>
int wait_loop(Test test, Wait wait) {
  const std::vector<Call*>& pending = layer().pending;
  for (unsigned round = 0;; ++round) {
    progress_pending();
    if (pending.empty()) return wait();
    int flag = 0;
    const int rc = test(&flag);
    if (rc != MPI_SUCCESS || flag) return rc;
    if (round >= 64) sched_yield();
  }
}

void progress_if_pending() {
  if (carflow_pending()) progress_pending();
}

}  // namespace

int Call::end_rest(int status) {
  if (status != CF_OK) return carflow_failed(comm, coll, status);
  if (!nonblocking_) count_carflow(coll);  // a nonblocking call counted when it started
  const int rc = dst.finish(comm);
  return rc != MPI_SUCCESS || extra_ == nullptr ? rc : extra_->vdst.finish(comm);
}

int Call::nothing_to_do() {
  if (!nonblocking_) count_carflow(coll);
  handle = CF_COLL_INVALID_HANDLE;
  return MPI_SUCCESS;
}

namespace {

// start_request's body, inline in start_direct too, where the handle is
// known live.
[[gnu::always_inline]] inline int start(Call* call, MPI_Request* request) {
  Layer& l = layer();
  count_carflow(call->coll);
  const int rc = PMPI_Grequest_start(query_call, free_call, cancel_call, call, request);
  if (rc != MPI_SUCCESS) {
    // A live handle may still write the record's buffers: the record stays.
    if (call->handle == CF_COLL_INVALID_HANDLE) {
      call->clear();
      l.calls.give_back(call);
    }
    return rc;
  }
  call->request = *request;
  if (call->handle == CF_COLL_INVALID_HANDLE) return PMPI_Grequest_complete(*request);  // free_call owns it now
  l.pending.push_back(call);
  return MPI_SUCCESS;
}

}  // namespace

int start_request(Call* call, MPI_Request* request) { return start(call, request); }

int start_direct(Coll coll, MPI_Comm comm, cf_coll_handle_t handle, MPI_Request* request) {
  if (handle == CF_COLL_INVALID_HANDLE) return carflow_failed(comm, coll, cf_last_status());
  Call* call = layer().calls.take();
  call->begin(coll, comm);
  call->handle = handle;
  return start(call, request);
}

void learn_request_status() {
  MPI_Status& status = layer().request_status;
  PMPI_Status_set_elements(&status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(&status, 0);
  status.MPI_SOURCE = MPI_UNDEFINED;
  status.MPI_TAG = MPI_UNDEFINED;
  status.MPI_ERROR = MPI_SUCCESS;
}

namespace {

// The call is over: results in place, its request complete. free_call may
// run inside MPI_Grequest_complete, so the call is off the list by then.
void complete_call(Call* call, int status) {
  call->error = call->end(status);
  PMPI_Grequest_complete(call->request);
}

bool held(cf_team_t team) {
  const std::vector<cf_team_t>& teams = layer().held;
  return std::find(teams.begin(), teams.end(), team) != teams.end();
}

// One pending call's turn; false when it is over.
bool progress_call(Call* call) {
  if (call->handle != CF_COLL_INVALID_HANDLE) {
    const int status = cf_coll_try_sync(call->handle);
    if (status == CF_NOT_READY) {
      if (call->has_next()) layer().held.push_back(call->second_team());
      return true;
    }
    call->handle = CF_COLL_INVALID_HANDLE;
    if (status != CF_OK || !call->has_next()) {
      complete_call(call, status);
      return false;
    }
  }
  // The first step is done; the second starts in the order the calls did.
  if (held(call->second_team())) return true;
  const std::unique_ptr<Step> next = call->take_next();
  const int rc = next->run(*call);
  if (rc != MPI_SUCCESS) {
    call->error = rc;
    PMPI_Grequest_complete(call->request);
    return false;
  }
  if (call->handle != CF_COLL_INVALID_HANDLE) return true;
  complete_call(call, CF_OK);  // nothing to move
  return false;
}

}  // namespace

void progress_pending() {
  Layer& l = layer();
  l.held.clear();
  if (l.pending.size() == 1) {  // the common case, without the list's bookkeeping
    if (!progress_call(l.pending.front())) l.pending.clear();
    return;
  }
  size_t kept = 0;
  for (size_t i = 0; i < l.pending.size(); ++i) {
    Call* call = l.pending[i];
    if (progress_call(call)) l.pending[kept++] = call;
  }
  l.pending.resize(kept);
}

}  // namespace carflow::mpi

using namespace carflow::mpi;

extern "C" {

int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  if (!carflow_pending()) return PMPI_Wait(request, status);
  return wait_loop([&](int* flag) { return PMPI_Test(request, flag, status); },
                   [&] { return PMPI_Wait(request, status); });
}

int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  if (!carflow_pending()) return PMPI_Waitall(count, requests, statuses);
  return wait_loop([&](int* flag) { return PMPI_Testall(count, requests, flag, statuses); },
                   [&] { return PMPI_Waitall(count, requests, statuses); });
}

int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  if (!carflow_pending()) return PMPI_Waitany(count, requests, index, status);
  // Testany sets flag with index MPI_UNDEFINED when no request is active.
  return wait_loop([&](int* flag) { return PMPI_Testany(count, requests, index, flag, status); },
                   [&] { return PMPI_Waitany(count, requests, index, status); });
}

int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  if (!carflow_pending()) return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  // Testsome gives 0 while none is done, MPI_UNDEFINED when none is active.
  return wait_loop(
      [&](int* flag) {
        const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
        *flag = *outcount != 0;
        return rc;
      },
      [&] { return PMPI_Waitsome(incount, requests, outcount, indices, statuses); });
}

int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  progress_if_pending();
  return PMPI_Test(request, flag, status);
}

int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  progress_if_pending();
  return PMPI_Testall(count, requests, flag, statuses);
}

int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  progress_if_pending();
  return PMPI_Testany(count, requests, index, flag, status);
}

int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[], MPI_Status statuses[]) {
  progress_if_pending();
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}

int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  progress_if_pending();
  return PMPI_Request_get_status(request, flag, status);
}

// Blocking point-to-point calls wait the same way while carflow calls are
// pending: as their nonblocking forms and MPI_Wait's loop.
int MPI_Recv(void* buf, int count, MPI_Datatype type, int source, int tag, MPI_Comm comm, MPI_Status* status) {
  if (!carflow_pending()) return PMPI_Recv(buf, count, type, source, tag, comm, status);
  MPI_Request request;
  const int rc = PMPI_Irecv(buf, count, type, source, tag, comm, &request);
  return rc != MPI_SUCCESS ? rc : MPI_Wait(&request, status);
}

int MPI_Send(const void* buf, int count, MPI_Datatype type, int dest, int tag, MPI_Comm comm) {
  if (!carflow_pending()) return PMPI_Send(buf, count, type, dest, tag, comm);
  MPI_Request request;
  const int rc = PMPI_Isend(buf, count, type, dest, tag, comm, &request);
  return rc != MPI_SUCCESS ? rc : MPI_Wait(&request, MPI_STATUS_IGNORE);
}

int MPI_Sendrecv(const void* sendbuf, int sendcount, MPI_Datatype sendtype, int dest, int sendtag, void* recvbuf,
                 int recvcount, MPI_Datatype recvtype, int source, int recvtag, MPI_Comm comm, MPI_Status* status) {
  if (!carflow_pending()) {
    return PMPI_Sendrecv(sendbuf, sendcount, sendtype, dest, sendtag, recvbuf, recvcount, recvtype, source,
                         recvtag, comm, status);
  }
  MPI_Request requests[2];
  int rc = PMPI_Irecv(recvbuf, recvcount, recvtype, source, recvtag, comm, &requests[0]);
  if (rc == MPI_SUCCESS) rc = PMPI_Isend(sendbuf, sendcount, sendtype, dest, sendtag, comm, &requests[1]);
  if (rc != MPI_SUCCESS) return rc;
  MPI_Status statuses[2];
  rc = MPI_Waitall(2, requests, statuses);
  if (status != MPI_STATUS_IGNORE) *status = statuses[0];
  return rc;
}

}  // extern "C"
