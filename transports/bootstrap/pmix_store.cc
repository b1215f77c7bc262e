#include "transports/bootstrap/pmix_store.h"

#include <pmix.h>

#include <cstdlib>
#include <cstring>

#include "transports/bootstrap/bootstrap.h"

namespace carflow {
namespace {

// PMIx is one client per process and its event callbacks carry no user
// pointer: the store that registered for events is kept here.
std::mutex g_watch_mutex;
PmixStore* g_watcher = nullptr;

std::string pmix_error(const char* what, pmix_status_t rc) {
  return std::string(what) + ": " + PMIx_Error_string(rc);
}

// "ep.3" -> ("cf.ep", 3): keys end in the rank of the node that puts them.
bool split_key(const std::string& key, std::string* name, uint32_t* rank) {
  const size_t dot = key.rfind('.');
  if (dot == std::string::npos || dot + 1 == key.size()) return false;
  char* end = nullptr;
  const unsigned long r = std::strtoul(key.c_str() + dot + 1, &end, 10);
  if (*end != '\0') return false;
  *name = "cf." + key.substr(0, dot);
  *rank = static_cast<uint32_t>(r);
  return true;
}

}  // namespace

std::unique_ptr<PmixStore> PmixStore::from_env(std::string* error) {
  if (std::getenv("PMIX_NAMESPACE") == nullptr || std::getenv("PMIX_RANK") == nullptr) return nullptr;
  std::unique_ptr<PmixStore> s(new PmixStore());
  pmix_proc_t me;
  pmix_status_t rc = PMIx_Init(&me, nullptr, 0);
  if (rc != PMIX_SUCCESS) {
    *error = pmix_error("PMIx_Init (started by mpirun or srun?)", rc);
    return nullptr;
  }
  s->nspace_ = me.nspace;
  s->rank_ = me.rank;
  pmix_proc_t job;
  PMIX_LOAD_PROCID(&job, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* size = nullptr;
  rc = PMIx_Get(&job, PMIX_JOB_SIZE, nullptr, 0, &size);
  if (rc != PMIX_SUCCESS || size == nullptr) {
    *error = pmix_error("PMIx_Get(PMIX_JOB_SIZE)", rc);
    PMIx_Finalize(nullptr, 0);
    return nullptr;
  }
  s->nodes_ = size->data.uint32;
  PMIX_VALUE_RELEASE(size);
  uint64_t images = 0;
  bool has_images = false;
  if (!read_env_uint("CF_IMAGES", 1, 65536, &images, &has_images, error)) {
    PMIx_Finalize(nullptr, 0);
    return nullptr;
  }
  s->images_per_node_ = static_cast<uint32_t>(images);
  return s;
}

PmixStore::~PmixStore() {
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    if (g_watcher == this) g_watcher = nullptr;
  }
  PMIx_Finalize(nullptr, 0);
}

bool PmixStore::put(const std::string& key, const std::string& value, std::string* error) {
  std::string name;
  uint32_t rank;
  if (!split_key(key, &name, &rank)) {
    *error = "key '" + key + "': expected NAME.RANK";
    return false;
  }
  pmix_value_t v;
  PMIX_VALUE_LOAD(&v, value.c_str(), PMIX_STRING);
  const pmix_status_t rc = PMIx_Put(PMIX_GLOBAL, name.c_str(), &v);
  PMIX_VALUE_DESTRUCT(&v);
  if (rc != PMIX_SUCCESS) {
    *error = pmix_error(("PMIx_Put(" + key + ")").c_str(), rc);
    return false;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  pending_ = true;
  return true;
}

bool PmixStore::flush(int timeout_ms, std::string* error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!pending_) return true;
    pending_ = false;
  }
  pmix_status_t rc = PMIx_Commit();
  if (rc != PMIX_SUCCESS) {
    *error = pmix_error("PMIx_Commit", rc);
    return false;
  }
  return fence(timeout_ms, error);
}

bool PmixStore::get(const std::string& key, std::string* value, int timeout_ms, std::string* error) {
  std::string name;
  uint32_t rank;
  if (!split_key(key, &name, &rank) || rank >= nodes_) {
    *error = "key '" + key + "': expected NAME.RANK with a rank of this job";
    return false;
  }
  if (!flush(timeout_ms, error)) return false;
  pmix_proc_t proc;
  PMIX_LOAD_PROCID(&proc, nspace_.c_str(), rank);
  pmix_info_t info;
  int seconds = timeout_ms < 0 ? 0 : std::max(1, timeout_ms / 1000);
  PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &seconds, PMIX_INT);
  pmix_value_t* v = nullptr;
  const pmix_status_t rc = PMIx_Get(&proc, name.c_str(), &info, timeout_ms < 0 ? 0 : 1, &v);
  PMIX_INFO_DESTRUCT(&info);
  if (rc != PMIX_SUCCESS || v == nullptr || v->type != PMIX_STRING) {
    *error = pmix_error(("PMIx_Get(" + key + ")").c_str(), rc);
    if (v != nullptr) PMIX_VALUE_RELEASE(v);
    return false;
  }
  *value = v->data.string;
  PMIX_VALUE_RELEASE(v);
  return true;
}

bool PmixStore::fence(int timeout_ms, std::string* error) {
  bool collect = true;
  int seconds = timeout_ms < 0 ? 0 : std::max(1, timeout_ms / 1000);
  pmix_info_t info[2];
  PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
  PMIX_INFO_LOAD(&info[1], PMIX_TIMEOUT, &seconds, PMIX_INT);
  const pmix_status_t rc = PMIx_Fence(nullptr, 0, info, timeout_ms < 0 ? 1 : 2);
  PMIX_INFO_DESTRUCT(&info[0]);
  PMIX_INFO_DESTRUCT(&info[1]);
  if (rc != PMIX_SUCCESS) {
    *error = pmix_error("PMIx_Fence", rc);
    return false;
  }
  return true;
}

bool PmixStore::bye(std::string*) { return true; }  // PMIx_Finalize in the destructor

void PmixStore::on_event(size_t, int status, const void* source, void*, size_t, void*, size_t,
                         void* cbfunc, void* cbdata) {
  const auto* proc = static_cast<const pmix_proc_t*>(source);
  LostCallback call;
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    if (g_watcher != nullptr) call = g_watcher->on_lost_;
  }
  if (call) {
    const uint32_t rank = proc != nullptr && proc->rank < PMIX_RANK_VALID ? proc->rank : kLauncherRank;
    call(rank, std::string("PMIx reported: ") + PMIx_Error_string(status));
  }
  if (cbfunc != nullptr) {
    reinterpret_cast<pmix_event_notification_cbfunc_fn_t>(cbfunc)(PMIX_EVENT_ACTION_COMPLETE, nullptr, 0,
                                                                  nullptr, nullptr, cbdata);
  }
}

void PmixStore::watch(LostCallback on_lost) {
  {
    std::lock_guard<std::mutex> lock(g_watch_mutex);
    on_lost_ = std::move(on_lost);
    g_watcher = this;
  }
  pmix_status_t codes[] = {PMIX_ERR_PROC_ABORTED, PMIX_ERR_PROC_ABORTING, PMIX_ERR_LOST_CONNECTION};
  PMIx_Register_event_handler(codes, sizeof codes / sizeof codes[0], nullptr, 0,
                              reinterpret_cast<pmix_notification_fn_t>(&PmixStore::on_event), nullptr,
                              nullptr);
}

}  // namespace carflow
