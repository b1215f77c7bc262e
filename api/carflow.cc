// The C API: argument checks and error reporting over engine/ (shared by
// movement.cc, compute.cc and teams.cc), the lifecycle (cf_init,
// cf_coll_init, cf_run_images, cf_finalize) and the barrier. Every check
// happens before anything starts, so a rejected call changes nothing.
#include "carflow/carflow.h"

#include <pthread.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "api/api_internal.h"
#include "engine/runtime.h"
#include "engine/status.h"

using carflow::CallMemo;
using carflow::CollectiveCall;
using carflow::CollKind;
using carflow::Engine;
using carflow::ImageContext;
using carflow::Runtime;

namespace carflow::api {

thread_local constinit ImageContext* t_image CF_FAST_TLS = nullptr;
thread_local constinit int t_status CF_FAST_TLS = CF_OK;
thread_local std::string t_error;  // not CF_FAST_TLS: see transports/transport.h

int last_status() { return t_status; }

int fail(int status, const std::string& message) {
  t_status = status;
  t_error = message;
  if (Runtime::get().error_mode.load() == CF_ERRORS_ARE_FATAL) {
    std::fprintf(stderr, "carflow: %s: %s\n", cf_strerror(status), message.c_str());
    std::abort();
  }
  return status;
}

// Why the calling thread has no image (current_image's slow path).
ImageContext* no_current_image(const char* function) {
  if (!Runtime::get().initialized()) {
    fail(CF_ERR_NOT_INIT, std::string(function) + ": cf_init has not been called");
  } else {
    fail(CF_ERR_NOT_INIT, std::string(function) +
                              ": the calling thread is not an image (call cf_coll_init, or "
                              "start images with cf_run_images)");
  }
  return nullptr;
}

constexpr int kKnownFlags = (1 << 12) - 1;
constexpr int kInFlags = CF_COLL_IN_NOSYNC | CF_COLL_IN_MYSYNC | CF_COLL_IN_ALLSYNC;
constexpr int kOutFlags = CF_COLL_OUT_NOSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_OUT_ALLSYNC;
constexpr int kAddrFlags = CF_COLL_SINGLE | CF_COLL_LOCAL;

Team* find_team(ImageContext& img, cf_team_t team) {
  if (team == CF_TEAM_ALL) return &img.all;
  for (const auto& t : img.teams) {
    if (reinterpret_cast<cf_team_t>(t->handle) == team) return t.get();
  }
  return nullptr;
}

bool check_common(ImageContext& img, cf_team_t team, int flags, bool blocking, std::string* error,
                  bool multi_address, Team** team_out) {
  Team* t = find_team(img, team);
  if (t == nullptr) {
    *error = team == CF_TEAM_NULL ? "team: CF_TEAM_NULL (this image joined no team in that split)"
                                  : "team: not a live team of this image (freed, never made by "
                                    "cf_team_split, or another image's handle)";
    return false;
  }
  if (team_out != nullptr) *team_out = t;
  if ((flags & ~kKnownFlags) != 0) {
    *error = "flags: unknown bits 0x" + [&] {
      char buf[16];
      std::snprintf(buf, sizeof buf, "%x", flags & ~kKnownFlags);
      return std::string(buf);
    }();
    return false;
  }
  const struct { int mask; const char* names; } groups[] = {
      {kInFlags, "CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC"},
      {kOutFlags, "CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC"},
      {kAddrFlags, "CF_COLL_SINGLE, CF_COLL_LOCAL"}};
  for (const auto& g : groups) {
    const int count = __builtin_popcount(static_cast<unsigned>(flags & g.mask));
    if (count != 1) {
      *error = std::string("flags: exactly one of ") + g.names + " is required (got " +
               std::to_string(count) + ")";
      return false;
    }
  }
  if ((flags & CF_COLL_AGGREGATE) && blocking) {
    *error = "flags: CF_COLL_AGGREGATE is not allowed on a blocking call";
    return false;
  }
  const uint32_t images = img.engine->local_images();
  if (multi_address) {
    // GASNet notes, "CURRENT PROPOSAL": LOCAL with ALL_THREADS is not permitted for
    // the m forms (one address per caller: use the single-address form).
    // Without ALL_THREADS an m form is the representative-thread mode.
    if ((flags & CF_COLL_LOCAL) && (flags & CF_COLL_ALL_THREADS)) {
      *error = "flags: an m form with CF_COLL_LOCAL | CF_COLL_ALL_THREADS is not permitted "
               "(each caller has one address: use the single-address form)";
      return false;
    }
    return true;
  }
  if (images > 1 && !(flags & CF_COLL_ALL_THREADS)) {
    *error = "flags: this node has " + std::to_string(images) +
             " images; a single-address call needs CF_COLL_ALL_THREADS (every image thread calls); "
             "one thread calling for all images of the node must use an m form";
    return false;
  }
  if (images > 1 && (flags & CF_COLL_SINGLE)) {
    *error = "flags: CF_COLL_SINGLE needs one image per node (images of one process cannot "
             "share addresses); use CF_COLL_LOCAL";
    return false;
  }
  return true;
}

bool representative(const ImageContext& img, int flags, bool multi_address) {
  return multi_address && !(flags & CF_COLL_ALL_THREADS) && img.engine->local_images() > 1;
}

bool local_members(ImageContext& img, Team& team, std::vector<LocalMember>* out, std::string* error) {
  out->clear();
  carflow::Engine& engine = *img.engine;
  for (uint32_t rank = 0; rank < team.size(); ++rank) {
    const uint32_t image = team.members[rank];
    if (!engine.nodes().is_local(image)) continue;
    ImageContext& other = engine.local_image(image);
    Team* view = &other.all;
    if (team.id != 0) {
      view = nullptr;
      for (const auto& t : other.teams) {
        if (t->id == team.id && t->rank == rank) view = t.get();
      }
    }
    if (view == nullptr) {
      *error = "team: image " + std::to_string(image) + " of this node has no view of this team";
      return false;
    }
    out->push_back(LocalMember{&other, view, rank, static_cast<uint32_t>(out->size())});
  }
  if (out->empty() || std::none_of(out->begin(), out->end(), [&](const LocalMember& m) { return m.image == &img; })) {
    *error = "team: the representative must be a member of the team";
    return false;
  }
  return true;
}

cf_coll_handle_t list_missing(const char* function, const char* list) {
  if (current_image(function) == nullptr) return CF_COLL_INVALID_HANDLE;
  return fail(CF_ERR_BAD_ARG, std::string(list) + ": NULL"), CF_COLL_INVALID_HANDLE;
}

void* represented_entry(void* const list[], int flags, const LocalMember& member) {
  if (list == nullptr) return nullptr;
  return list[(flags & CF_COLL_LOCAL) ? member.local_index : member.rank];
}

cf_coll_handle_t start_represented(ImageContext& caller,
                                   const std::vector<carflow::Engine::RepresentedCall>& calls) {
  uint64_t handle = 0;
  std::string error;
  const int status = caller.engine->start_represented(caller, calls, &handle, &error);
  if (status != CF_OK) {
    fail(status, error);
    return CF_COLL_INVALID_HANDLE;
  }
  succeed();
  return static_cast<cf_coll_handle_t>(handle);
}

bool blocking_allowed(cf_team_t team, int flags) {
  if (flags & CF_COLL_AGGREGATE) {
    fail(CF_ERR_BAD_ARG, "flags: CF_COLL_AGGREGATE is not allowed on a blocking call");
    return false;
  }
  const Team* t = t_image == nullptr ? nullptr : find_team(*t_image, team);
  if (t != nullptr && !t->aggregate.empty()) {
    fail(CF_ERR_BAD_ARG, "team: an aggregate of " + std::to_string(t->aggregate.size()) +
                             " calls is open on this team; a blocking call cannot end it (end it "
                             "with a non-blocking call without CF_COLL_AGGREGATE)");
    return false;
  }
  return true;
}

cf_coll_handle_t start(ImageContext& img, const CollectiveCall& call) {
  uint64_t handle = 0;
  std::string error;
  const int status = img.engine->start(img, call, &handle, &error);
  if (status != CF_OK) {
    fail(status, error);
    return CF_COLL_INVALID_HANDLE;
  }
  succeed();
  return static_cast<cf_coll_handle_t>(handle);  // 0 (INVALID) for an aggregate's non-last member
}

namespace {
// start_memo_call past its first step: Engine::start, with its error text.
[[gnu::noinline]] cf_coll_handle_t start_memo_full(ImageContext& img, CallMemo& memo) {
  uint64_t handle = 0;
  std::string error;
  const int status = img.engine->start(img, memo.call, &handle, &error, &memo.prepared);
  if (status != CF_OK) {
    memo.valid = false;
    memo.join_epoch = 0;
    fail(status, error);
    return CF_COLL_INVALID_HANDLE;
  }
  succeed();
  return static_cast<cf_coll_handle_t>(handle);  // 0 (INVALID) for an aggregate's non-last member
}
}  // namespace

cf_coll_handle_t start_memo_call(ImageContext& img, CallMemo& memo) {
  succeed();  // start_memo_full sets the status again when it takes the call
  if (const uint64_t handle = img.engine->start_prepared(img, memo.call, memo.prepared)) {
    return static_cast<cf_coll_handle_t>(handle);
  }
  return start_memo_full(img, memo);
}

cf_coll_handle_t start_remembered(ImageContext& img, const CollectiveCall& call, const Signature& sig,
                                  uint64_t src_len, uint64_t dst_len) {
  CallMemo& memo = memo_slot(img, call.kind, call.flags);
  memo.valid = false;
  memo.join_epoch = 0;
  std::copy(sig, sig + CallMemo::kWords, memo.signature);
  memo.epoch = img.epoch;
  memo.set_lengths(src_len, dst_len);
  memo.call = call;
  memo.prepared = carflow::PreparedCall{};
  const cf_coll_handle_t handle = start_memo(img, memo, call.src, call.dst);
  memo.valid = last_status() == CF_OK;
  // Word 0 of a joining memo's signature is its slot's kind, not blocking
  // (a blocking call never joins an aggregate): join_repeated_member does
  // not compare it.
  if (memo.valid && memo.prepared.plain_member && sig[0] == static_cast<uint64_t>(call.kind)) {
    memo.join_epoch = memo.epoch;
    memo.join_into = &(call.team != nullptr ? *call.team : img.all).aggregate;
  }
  return handle;
}

int finish_blocking(cf_coll_handle_t handle) {
  if (handle == CF_COLL_INVALID_HANDLE) return t_status;
  return cf_coll_wait_sync(handle);
}

std::string null_buffer(const char* name, bool in_list, const ImageContext& img, const Team& team, const char* verb,
                        uint64_t bytes) {
  std::string who = "image " + std::to_string(img.image);
  if (&team != &img.all) who += " (team rank " + std::to_string(team.rank) + ")";
  const bool sends = std::string(verb) != "receives";
  return std::string(name) + ": NULL on " + who + (in_list ? " (its entry of the list)" : "") + ", which " + verb +
         " " + std::to_string(bytes) + (sends ? " bytes from it" : " bytes into it");
}

void set_sync_modes(CollectiveCall* call, int flags) {
  call->flags = flags;
  call->in_allsync = (flags & CF_COLL_IN_ALLSYNC) != 0;
  call->out_allsync = (flags & CF_COLL_OUT_ALLSYNC) != 0;
  call->aggregate = (flags & CF_COLL_AGGREGATE) != 0;
}

}  // namespace carflow::api

using namespace carflow::api;

extern "C" {

const char* cf_strerror(int status) { return carflow::status_name(status); }

const char* cf_last_error(void) { return t_error.c_str(); }
void cf_set_error_mode(int mode) {
  if (mode == CF_ERRORS_ARE_FATAL || mode == CF_ERRORS_RETURN) Runtime::get().error_mode = mode;
}
int cf_last_status(void) { return t_status; }

int cf_init(int* argc, char*** argv) {
  (void)argc;
  (void)argv;
  std::string error;
  const int status = Runtime::get().init(&error);
  return status == CF_OK ? succeed() : fail(status, error);
}

int cf_finalize(void) {
  std::string error;
  const int status = Runtime::get().finalize(&error);
  if (status == CF_ERR_BAD_ARG) return fail(status, error);  // refused: nothing changed
  t_image = nullptr;
  return status == CF_OK ? succeed() : fail(status, error);
}

cf_node_t cf_mynode(void) { return Runtime::get().node(); }
cf_node_t cf_nodes(void) { return Runtime::get().nodes(); }

int cf_coll_init(const cf_image_t images[], cf_image_t my_image, const cf_coll_fn_entry_t fn_tbl[],
                 size_t fn_count, int init_flags) {
  if (!Runtime::get().initialized()) return fail(CF_ERR_NOT_INIT, "cf_coll_init: cf_init has not been called");
  if (t_image != nullptr) {
    return fail(CF_ERR_BAD_ARG, "cf_coll_init: the calling thread is already image " +
                                    std::to_string(t_image->image));
  }
  if (init_flags != 0) return fail(CF_ERR_BAD_ARG, "init_flags: must be 0");
  if (fn_count > 0 && fn_tbl == nullptr) return fail(CF_ERR_BAD_ARG, "fn_tbl: NULL with fn_count > 0");
  std::vector<carflow::ClientFunction> table;
  for (size_t i = 0; i < fn_count; ++i) {
    if (fn_tbl[i].fnptr == nullptr) {
      return fail(CF_ERR_BAD_ARG, "fn_tbl[" + std::to_string(i) + "].fnptr: NULL");
    }
    if ((fn_tbl[i].flags & ~(CF_COLL_NONCOMM | CF_COLL_AMSAFE)) != 0) {
      return fail(CF_ERR_BAD_ARG, "fn_tbl[" + std::to_string(i) +
                                      "].flags: only CF_COLL_NONCOMM and CF_COLL_AMSAFE are defined");
    }
    table.push_back({reinterpret_cast<carflow::ClientReduceFn*>(fn_tbl[i].fnptr), fn_tbl[i].flags});
  }
  // images[n]: the images of node n, for every node (NULL: one per node,
  // and the image is the node).
  const uint32_t nodes = cf_nodes();
  std::vector<uint32_t> counts(nodes, 1);
  if (images != nullptr) {
    counts.assign(images, images + nodes);
  } else if (my_image != cf_mynode()) {  // one image per node: the node's number
    return fail(CF_ERR_BAD_ARG, "my_image: " + std::to_string(my_image) +
                                    " with images NULL (one image per node), where this node's image is " +
                                    std::to_string(cf_mynode()));
  }
  std::string error;
  ImageContext* img = nullptr;
  const int status = Runtime::get().attach(counts, my_image, std::move(table), &img, &error);
  if (status != CF_OK) return fail(status, error);
  if (img->api == nullptr) img->api = std::make_unique<carflow::ImageMemos>();
  t_image = img;
  carflow::tls_on_app_thread = true;
  return succeed();
}

cf_image_t cf_myimage(void) { return t_image == nullptr ? static_cast<cf_image_t>(-1) : t_image->image; }
cf_image_t cf_images(void) { return Runtime::get().images(); }

int cf_run_images(cf_image_t n, const cf_coll_fn_entry_t fn_tbl[], size_t fn_count,
                  void (*fn)(cf_image_t image, void* arg), void* arg) {
  Runtime& rt = Runtime::get();
  if (!rt.initialized()) return fail(CF_ERR_NOT_INIT, "cf_run_images: cf_init has not been called");
  if (n == 0) return fail(CF_ERR_BAD_ARG, "n: must be at least 1");
  if (fn == nullptr) return fail(CF_ERR_BAD_ARG, "fn: NULL");
  if (t_image != nullptr) return fail(CF_ERR_BAD_ARG, "cf_run_images: called from an image thread");
  std::string error;
  if (const int begun = rt.begin_run(n, &error); begun != CF_OK) return fail(begun, error);
  std::vector<int> statuses(n, CF_OK);
  std::vector<std::string> errors(n);
  const std::vector<cf_image_t> counts(cf_nodes(), n);  // every node runs n images
  const cf_image_t base = cf_mynode() * n;
  std::vector<std::thread> threads;
  const int mode = rt.error_mode.load();
  const std::vector<cpu_set_t> cpus = rt.image_cpu_shares(n);
  try {
    for (cf_image_t i = 0; i < n; ++i) {
      threads.emplace_back([&, i] {
        // Failing leaves the thread unbound: slower at worst.
        if (!cpus.empty()) (void)pthread_setaffinity_np(pthread_self(), sizeof cpus[i], &cpus[i]);
        cf_set_error_mode(mode);
        statuses[i] = cf_coll_init(counts.data(), base + i, fn_tbl, fn_count, 0);
        if (statuses[i] == CF_OK) {
          fn(base + i, arg);
        } else {
          errors[i] = cf_last_error();
        }
        t_image = nullptr;
      });
    }
  } catch (const std::system_error&) {
    for (auto& t : threads) t.join();
    rt.end_run();
    return fail(CF_ERR_NO_MEM, "cf_run_images: could not start " + std::to_string(n) + " threads");
  }
  for (auto& t : threads) t.join();
  rt.end_run();
  for (cf_image_t i = 0; i < n; ++i) {
    if (statuses[i] != CF_OK) {
      return fail(statuses[i], "cf_run_images: image " + std::to_string(base + i) +
                                   " failed in cf_coll_init: " + errors[i]);
    }
  }
  return succeed();
}

cf_coll_handle_t cf_coll_barrier_nb(cf_team_t team, int flags) {
  ImageContext* img = current_image("cf_coll_barrier_nb");
  if (img == nullptr) return CF_COLL_INVALID_HANDLE;
  Signature sig = {static_cast<uint64_t>(CollKind::Barrier), reinterpret_cast<uint64_t>(team),
                   static_cast<uint32_t>(flags)};
  if (CallMemo* memo = memo_hit(*img, CollKind::Barrier, sig)) return start_memo(*img, *memo, nullptr, nullptr);
  std::string error;
  carflow::Team* t = nullptr;
  if (!check_common(*img, team, flags, false, &error, false, &t)) return fail(CF_ERR_BAD_ARG, error), 0;
  CollectiveCall call;
  call.kind = CollKind::Barrier;
  call.team = t;
  call.algorithm = img->algorithm[CF_KIND_BARRIER];
  set_sync_modes(&call, flags);
  return start_remembered(*img, call, sig, 0, 0);
}

int cf_coll_barrier(cf_team_t team, int flags) {
  if (!blocking_allowed(team, flags)) return last_status();
  return finish_blocking(cf_coll_barrier_nb(team, flags));
}

}  // extern "C"
