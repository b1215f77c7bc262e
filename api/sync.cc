// The C API's sync calls (try / wait, _all, _some), cf_poll and
// cf_graph_dump_json. A sync is not collective: any order, any time.
#include "carflow/carflow.h"

#include <algorithm>
#include <string>
#include <vector>

#include "api/api_internal.h"

using carflow::ImageContext;

using namespace carflow::api;

extern "C" {

namespace {
std::string failure_message(ImageContext& img, int status) {
  if (status == CF_ERR_PEER_LOST || status == CF_ERR_NO_MEM) {
    const std::string what = img.engine->lost_what();
    if (!what.empty()) return "the collective failed: " + what;
    return status == CF_ERR_PEER_LOST
               ? "the collective failed: a peer node was lost (the failure reached this image through the collective)"
               : "the collective failed: a message could not be held (no memory)";
  }
  if (status == CF_ERR_MISMATCH && !img.mismatch_message.empty()) return img.mismatch_message;
  return "the collective failed: images disagree on sizes";
}

[[gnu::noinline]] int sync_failed(ImageContext& img, int status) { return fail(status, failure_message(img, status)); }

// Syncs an instance that is done (Engine::done_instance); the C status,
// after fail() on an error.
[[gnu::always_inline]] inline int sync_done_one(ImageContext& img, carflow::Instance* inst) {
  const int status = img.engine->sync_finished(img, inst);
  return status == CF_OK ? succeed() : sync_failed(img, status);
}
}  // namespace

int cf_coll_wait_sync(cf_coll_handle_t handle) {
  ImageContext* img = current_image("cf_coll_wait_sync");
  if (img == nullptr) return t_status;
  if (carflow::Instance* inst = img->engine->done_instance(*img, handle)) return sync_done_one(*img, inst);
  std::string error;
  const int status = img->engine->wait_sync(*img, handle, &error);
  if (status == CF_ERR_BAD_ARG) return fail(status, error);
  if (status != CF_OK) return fail(status, failure_message(*img, status));
  return succeed();
}

int cf_coll_try_sync(cf_coll_handle_t handle) {
  ImageContext* img = current_image("cf_coll_try_sync");
  if (img == nullptr) return t_status;
  std::string error;
  const int status = img->engine->try_sync(*img, handle, &error);
  if (status == CF_ERR_BAD_ARG) return fail(status, error);
  if (status < 0) return fail(status, failure_message(*img, status));
  return succeed(status);
}

namespace {

// Whether a valid handle appears twice in handles[0..n); *first < *second
// are the indices of one such pair.
bool repeated_handle(const cf_coll_handle_t* handles, size_t n, size_t* first, size_t* second) {
  constexpr size_t kPairwise = 16;  // short lists (most): compared pairwise, no allocation
  if (n <= kPairwise) {
    for (size_t j = 1; j < n; ++j) {
      for (size_t i = 0; i < j; ++i) {
        if (handles[j] != CF_COLL_INVALID_HANDLE && handles[i] == handles[j]) {
          *first = i, *second = j;
          return true;
        }
      }
    }
    return false;
  }
  std::vector<std::pair<cf_coll_handle_t, size_t>> sorted;  // equal handles then sort by index
  sorted.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (handles[i] != CF_COLL_INVALID_HANDLE) sorted.emplace_back(handles[i], i);
  }
  std::sort(sorted.begin(), sorted.end());
  for (size_t k = 1; k < sorted.size(); ++k) {
    if (sorted[k].first == sorted[k - 1].first) {
      *first = sorted[k - 1].second, *second = sorted[k].second;
      return true;
    }
  }
  return false;
}

// Checks every non-INVALID entry before any is synced (a failed call changes
// nothing). Fills `live` with the instances: with `positional`, entry i for
// handles[i] (nullptr for INVALID entries); otherwise only the live ones, in
// order (an aggregate's members return INVALID: syncing its 8 calls looks
// at one instance, not 8 slots).
bool lookup_all(ImageContext& img, const cf_coll_handle_t* handles, size_t n,
                std::vector<carflow::Instance*>* live, const char* function, bool positional) {
  if (n > 0 && handles == nullptr) {
    fail(CF_ERR_BAD_ARG, std::string(function) + ": handles is NULL with n > 0");
    return false;
  }
  live->clear();
  for (size_t i = 0; i < n; ++i) {
    if (handles[i] == CF_COLL_INVALID_HANDLE) {
      if (positional) live->push_back(nullptr);
      continue;
    }
    carflow::Instance* inst = img.engine->lookup(img, handles[i]);
    if (inst == nullptr) {
      fail(CF_ERR_BAD_ARG, "handles[" + std::to_string(i) + "]: not a live handle of this image");
      return false;
    }
    live->push_back(inst);
  }
  // A handle given twice would be synced, and its slot freed, twice.
  size_t first = 0, second = 0;
  if (repeated_handle(handles, n, &first, &second)) {
    fail(CF_ERR_BAD_ARG, "handles[" + std::to_string(second) + "]: the same handle as handles[" +
                             std::to_string(first) + "] (each handle may be given once)");
    return false;
  }
  return true;
}

// Syncs every instance of a compact `live` list (all of them done).
int sync_all(ImageContext& img, const std::vector<carflow::Instance*>& live) {
  int first_error = CF_OK;
  for (carflow::Instance* inst : live) {
    const int s = img.engine->sync_done(img, inst);
    if (s != CF_OK && first_error == CF_OK) first_error = s;
  }
  if (first_error != CF_OK) return fail(first_error, failure_message(img, first_error));
  return succeed();
}

// Syncs the done entries, setting them INVALID; returns how many.
size_t sync_some(ImageContext& img, cf_coll_handle_t* handles,
                 std::vector<carflow::Instance*>& live, int* first_error) {
  size_t synced = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    if (live[i] == nullptr || !img.engine->is_done(live[i])) continue;
    const int s = img.engine->sync_done(img, live[i]);
    if (s != CF_OK && *first_error == CF_OK) *first_error = s;
    live[i] = nullptr;
    handles[i] = CF_COLL_INVALID_HANDLE;
    ++synced;
  }
  return synced;
}

}  // namespace

int cf_coll_wait_sync_all(cf_coll_handle_t* handles, size_t n) {
  ImageContext* img = current_image("cf_coll_wait_sync_all");
  if (img == nullptr) return t_status;
  // One handle, already done (a loop that starts and syncs one call at a time).
  if (n == 1 && handles != nullptr) {
    if (carflow::Instance* inst = img->engine->done_instance(*img, handles[0])) return sync_done_one(*img, inst);
  }
  std::vector<carflow::Instance*>& live = img->sync_scratch;
  if (!lookup_all(*img, handles, n, &live, "cf_coll_wait_sync_all", false)) return t_status;
  img->engine->wait_until(*img, [&] {
    for (auto* inst : live) {
      if (!img->engine->is_done(inst)) return false;
    }
    return true;
  });
  return sync_all(*img, live);
}

int cf_coll_try_sync_all(cf_coll_handle_t* handles, size_t n) {
  ImageContext* img = current_image("cf_coll_try_sync_all");
  if (img == nullptr) return t_status;
  std::vector<carflow::Instance*>& live = img->sync_scratch;
  if (!lookup_all(*img, handles, n, &live, "cf_coll_try_sync_all", false)) return t_status;
  img->engine->poll(*img);
  for (auto* inst : live) {
    if (!img->engine->is_done(inst)) return succeed(CF_NOT_READY);
  }
  return sync_all(*img, live);
}

int cf_coll_wait_sync_some(cf_coll_handle_t* handles, size_t n) {
  ImageContext* img = current_image("cf_coll_wait_sync_some");
  if (img == nullptr) return t_status;
  std::vector<carflow::Instance*>& live = img->sync_scratch;
  if (!lookup_all(*img, handles, n, &live, "cf_coll_wait_sync_some", true)) return t_status;
  bool any_live = false;
  for (auto* inst : live) any_live |= inst != nullptr;
  if (!any_live) return succeed();
  img->engine->wait_until(*img, [&] {
    for (auto* inst : live) {
      if (inst != nullptr && img->engine->is_done(inst)) return true;
    }
    return false;
  });
  int first_error = img->engine->lost_status();
  sync_some(*img, handles, live, &first_error);
  if (first_error != CF_OK) return fail(first_error, failure_message(*img, first_error));
  return succeed();
}

int cf_coll_try_sync_some(cf_coll_handle_t* handles, size_t n) {
  ImageContext* img = current_image("cf_coll_try_sync_some");
  if (img == nullptr) return t_status;
  std::vector<carflow::Instance*>& live = img->sync_scratch;
  if (!lookup_all(*img, handles, n, &live, "cf_coll_try_sync_some", true)) return t_status;
  bool any_live = false;
  for (auto* inst : live) any_live |= inst != nullptr;
  if (!any_live) return succeed();
  img->engine->poll(*img);
  int first_error = CF_OK;
  const size_t synced = sync_some(*img, handles, live, &first_error);
  if (first_error != CF_OK) return fail(first_error, failure_message(*img, first_error));
  return succeed(synced > 0 ? CF_OK : CF_NOT_READY);
}

int cf_poll(void) {
  ImageContext* img = current_image("cf_poll");
  if (img == nullptr) return t_status;
  img->engine->poll(*img);
  return succeed();
}

int cf_graph_dump_json(cf_coll_handle_t handle, const char* path) {
  ImageContext* img = current_image("cf_graph_dump_json");
  if (img == nullptr) return t_status;
  if (path == nullptr) return fail(CF_ERR_BAD_ARG, "path: NULL");
  std::string error;
  if (!img->engine->dump_json(*img, handle, path, &error)) {
    // The file's own errors start with the path: say which argument it is.
    return fail(CF_ERR_BAD_ARG, error.rfind("handle:", 0) == 0 ? error : "path: " + error);
  }
  return succeed();
}

}  // extern "C"
