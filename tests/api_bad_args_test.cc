// Every entry point of carflow.h and generator.h against every class of bad
// argument, as one table: each row makes one wrong call and names the status
// the header documents for it and the words cf_last_error() must hold (the
// argument and its rule). A row passes when the call returns that status,
// changes nothing (the destination buffers keep their guard bytes, no
// handle dies) and the next valid collective gives the right data on every
// image. Calls before cf_init and after cf_finalize are made by main(),
// around the doctest run. The table must cover every function the headers
// declare: a new entry point without a row fails the coverage case.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <carflow/carflow.h>
#include <carflow/generator.h>

#include <barrier>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::run_images;

constexpr uint32_t kP = 3;
constexpr int kMulti = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE | CF_COLL_ALL_THREADS;
constexpr int kSum = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
constexpr size_t kWords = 64;  // int64 words of each buffer
constexpr int64_t kGuard = 0x5a5a5a5a5a5a5a5a;
constexpr int kStarted = 100;  // a row's call started a collective (or gave a value)
const cf_team_t kBogusTeam = reinterpret_cast<cf_team_t>(uintptr_t{0x1000});
constexpr cf_coll_handle_t kBogusHandle = 0x123456789;

void add_int64(void* results, size_t, const void* left, size_t, const void* right, size_t, int, int) {
  int64_t l, r;
  std::memcpy(&l, left, 8);
  std::memcpy(&r, right, 8);
  l += r;
  std::memcpy(results, &l, 8);
}
const cf_coll_fn_entry_t kFunctions[] = {{reinterpret_cast<cf_coll_fn_t>(&add_int64), 0}};

// One image's buffers: dst starts as guard words, src as values.
struct alignas(64) Buffers {
  int64_t dst[kWords];
  int64_t src[kWords];
};

// What the images share: their buffers (the m forms' lists point into
// them), and handles and teams published for the other images to misuse.
struct World {
  Buffers bufs[kP];
  void* dstlist[kP];
  void* srclist[kP];
  cf_team_t team[kP];             // each image's live split team
  cf_coll_handle_t live[kP];      // each image's live (unsynced) collective
  std::barrier<> published{kP};
  World() {
    for (uint32_t i = 0; i < kP; ++i) dstlist[i] = bufs[i].dst, srclist[i] = bufs[i].src;
  }
};

// A row's view: the calling image and what it may misuse.
struct Ctx {
  cf_image_t me;
  World& w;
  int64_t* dst;
  int64_t* src;
  cf_team_t freed;           // a team this image split and freed
  cf_team_t foreign;         // another image's live team
  cf_coll_handle_t synced;   // this image's handle, synced already
  cf_coll_handle_t other;    // another image's live handle
  cf_coll_handle_t mine;     // this image's live handle
};

// An initiation's status: kStarted when it returned a handle (synced here,
// so that a wrongly started collective does not hang the next row).
int nb(cf_coll_handle_t h) {
  if (h == CF_COLL_INVALID_HANDLE) return cf_last_status();
  cf_coll_wait_sync(h);
  return kStarted;
}

struct Row {
  const char* function;  // as the header names it
  const char* mistake;
  int want;              // the status the header documents
  const char* names;     // words cf_last_error() must hold
  std::function<int(Ctx&)> call;
  bool root_only = false;  // only image 0 checks it (a root's buffer), so only it calls
};

std::vector<size_t> sizes(std::initializer_list<size_t> v) { return v; }

// Rows for one data-movement function: _nb and blocking forms alike.
#define BOTH(name, mistake, want, names, args, ...)                                         \
  Row{#name "_nb", mistake, want, names, [=](Ctx& c) { return nb(name##_nb args); }, ##__VA_ARGS__}, \
      Row{#name, mistake, want, names, [=](Ctx& c) { return name args; }, ##__VA_ARGS__}

std::vector<Row> collective_rows() {
  constexpr size_t kHuge = SIZE_MAX / 2 + 1;  // times P (3) wraps past SIZE_MAX
  const size_t wrap[kP] = {SIZE_MAX, SIZE_MAX, 8};     // v counts summing past SIZE_MAX
  const size_t same_place[kP] = {0, 0, 0};             // displs: every block at 0
  const cf_image_t not_perm[kP] = {0, 0, 1}, out_of_range[kP] = {0, 1, kP}, identity[kP] = {0, 1, 2};
  std::vector<Row> rows = {
      // broadcast, and the flag, team and root rules every collective shares
      BOTH(cf_coll_broadcast, "srcimage == P", CF_ERR_BAD_ARG, "srcimage",
           (CF_TEAM_ALL, c.dst, kP, c.src, 8, kAllLocal)),
      BOTH(cf_coll_broadcast, "NULL dst", CF_ERR_BAD_ARG, "dst", (CF_TEAM_ALL, nullptr, 0, c.src, 8, kAllLocal)),
      BOTH(cf_coll_broadcast, "NULL src on the root", CF_ERR_BAD_ARG, "src",
           (CF_TEAM_ALL, c.dst, 0, nullptr, 8, kAllLocal), true),
      BOTH(cf_coll_broadcast, "nbytes 0", CF_ERR_BAD_ARG, "nbytes", (CF_TEAM_ALL, c.dst, 0, c.src, 0, kAllLocal)),
      BOTH(cf_coll_broadcast, "nbytes SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.dst, 0, c.src, SIZE_MAX, kAllLocal)),
      BOTH(cf_coll_broadcast, "flags 0", CF_ERR_BAD_ARG, "flags", (CF_TEAM_ALL, c.dst, 0, c.src, 8, 0)),
      BOTH(cf_coll_broadcast, "an unknown flag bit", CF_ERR_BAD_ARG, "flags",
           (CF_TEAM_ALL, c.dst, 0, c.src, 8, kAllLocal | (1 << 24))),
      BOTH(cf_coll_broadcast, "a negative flags word", CF_ERR_BAD_ARG, "flags",
           (CF_TEAM_ALL, c.dst, 0, c.src, 8, kAllLocal | INT32_MIN)),
      BOTH(cf_coll_broadcast, "the scan-only CF_COLL_EXCLUSIVE", CF_ERR_BAD_ARG, "flags",
           (CF_TEAM_ALL, c.dst, 0, c.src, 8, kAllLocal | CF_COLL_EXCLUSIVE)),
      BOTH(cf_coll_broadcast, "a freed team", CF_ERR_BAD_ARG, "team", (c.freed, c.dst, 0, c.src, 8, kAllLocal)),
      BOTH(cf_coll_broadcast, "another image's team", CF_ERR_BAD_ARG, "team",
           (c.foreign, c.dst, 0, c.src, 8, kAllLocal)),
      BOTH(cf_coll_broadcast, "a team never made", CF_ERR_BAD_ARG, "team",
           (kBogusTeam, c.dst, 0, c.src, 8, kAllLocal)),
      BOTH(cf_coll_broadcast, "CF_TEAM_NULL", CF_ERR_BAD_ARG, "team", (CF_TEAM_NULL, c.dst, 0, c.src, 8, kAllLocal)),
      Row{"cf_coll_broadcast", "CF_COLL_AGGREGATE on a blocking call", CF_ERR_BAD_ARG, "flags",
          [](Ctx& c) { return cf_coll_broadcast(CF_TEAM_ALL, c.dst, 0, c.src, 8, kAllLocal | CF_COLL_AGGREGATE); }},
      BOTH(cf_coll_barrier, "flags 0", CF_ERR_BAD_ARG, "flags", (CF_TEAM_ALL, 0)),
      BOTH(cf_coll_barrier, "a freed team", CF_ERR_BAD_ARG, "team", (c.freed, kAllLocal)),
      BOTH(cf_coll_broadcastm, "NULL dstlist", CF_ERR_BAD_ARG, "dstlist",
           (CF_TEAM_ALL, nullptr, 0, c.src, 8, kMulti)),
      BOTH(cf_coll_broadcastm, "srcimage == P", CF_ERR_BAD_ARG, "srcimage",
           (CF_TEAM_ALL, c.w.dstlist, kP, c.src, 8, kMulti)),
      BOTH(cf_coll_broadcastm, "LOCAL with ALL_THREADS", CF_ERR_BAD_ARG, "flags",
           (CF_TEAM_ALL, c.w.dstlist, 0, c.src, 8, kAllLocal)),
      // scatter, gather, gather_all, exchange: P blocks, so nbytes * P must fit
      BOTH(cf_coll_scatter, "srcimage == P", CF_ERR_BAD_ARG, "srcimage", (CF_TEAM_ALL, c.dst, kP, c.src, 8, kAllLocal)),
      BOTH(cf_coll_scatter, "nbytes * P past SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.dst, 0, c.src, kHuge, kAllLocal)),
      BOTH(cf_coll_scatter, "NULL dst", CF_ERR_BAD_ARG, "dst", (CF_TEAM_ALL, nullptr, 0, c.src, 8, kAllLocal)),
      BOTH(cf_coll_scatterm, "NULL dstlist", CF_ERR_BAD_ARG, "dstlist", (CF_TEAM_ALL, nullptr, 0, c.src, 8, kMulti)),
      BOTH(cf_coll_scatterm, "nbytes * P past SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.w.dstlist, 0, c.src, kHuge, kMulti)),
      BOTH(cf_coll_gather, "dstimage == P", CF_ERR_BAD_ARG, "dstimage", (CF_TEAM_ALL, kP, c.dst, c.src, 8, kAllLocal)),
      BOTH(cf_coll_gather, "NULL src", CF_ERR_BAD_ARG, "src", (CF_TEAM_ALL, 0, c.dst, nullptr, 8, kAllLocal)),
      BOTH(cf_coll_gather, "nbytes * P past SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, 0, c.dst, c.src, kHuge, kAllLocal)),
      BOTH(cf_coll_gatherm, "NULL srclist", CF_ERR_BAD_ARG, "srclist", (CF_TEAM_ALL, 0, c.dst, nullptr, 8, kMulti)),
      BOTH(cf_coll_gatherm, "dstimage == P", CF_ERR_BAD_ARG, "dstimage",
           (CF_TEAM_ALL, kP, c.dst, c.w.srclist, 8, kMulti)),
      BOTH(cf_coll_gather_all, "NULL dst", CF_ERR_BAD_ARG, "dst", (CF_TEAM_ALL, nullptr, c.src, 8, kAllLocal)),
      BOTH(cf_coll_gather_all, "nbytes * P past SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.dst, c.src, kHuge, kAllLocal)),
      BOTH(cf_coll_gather_allm, "NULL dstlist", CF_ERR_BAD_ARG, "dstlist",
           (CF_TEAM_ALL, nullptr, c.w.srclist, 8, kMulti)),
      BOTH(cf_coll_gather_allm, "NULL srclist", CF_ERR_BAD_ARG, "srclist",
           (CF_TEAM_ALL, c.w.dstlist, nullptr, 8, kMulti)),
      BOTH(cf_coll_exchange, "NULL src", CF_ERR_BAD_ARG, "src", (CF_TEAM_ALL, c.dst, nullptr, 8, kAllLocal)),
      BOTH(cf_coll_exchange, "src == dst", CF_ERR_BAD_ARG, "overlap", (CF_TEAM_ALL, c.dst, c.dst, 8, kAllLocal)),
      BOTH(cf_coll_exchange, "nbytes * P past SIZE_MAX", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.dst, c.src, kHuge, kAllLocal)),
      BOTH(cf_coll_exchangem, "NULL srclist", CF_ERR_BAD_ARG, "srclist",
           (CF_TEAM_ALL, c.w.dstlist, nullptr, 8, kMulti)),
      BOTH(cf_coll_exchangem, "NULL dstlist", CF_ERR_BAD_ARG, "dstlist",
           (CF_TEAM_ALL, nullptr, c.w.srclist, 8, kMulti)),
      // v forms: counts and displs
      BOTH(cf_coll_scatterv, "NULL counts", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, 0, c.src, nullptr, nullptr, kAllLocal)),
      BOTH(cf_coll_scatterv, "srcimage == P", CF_ERR_BAD_ARG, "srcimage",
           (CF_TEAM_ALL, c.dst, kP, c.src, sizes({8, 8, 8}).data(), nullptr, kAllLocal)),
      BOTH(cf_coll_scatterv, "counts summing past SIZE_MAX", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, 0, c.src, wrap, nullptr, kAllLocal)),
      BOTH(cf_coll_gatherv, "dstimage == P", CF_ERR_BAD_ARG, "dstimage",
           (CF_TEAM_ALL, kP, c.dst, c.src, sizes({8, 8, 8}).data(), nullptr, kAllLocal)),
      BOTH(cf_coll_gatherv, "NULL counts", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, 0, c.dst, c.src, nullptr, nullptr, kAllLocal)),
      BOTH(cf_coll_gatherv, "counts summing past SIZE_MAX", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, 0, c.dst, c.src, wrap, nullptr, kAllLocal)),
      BOTH(cf_coll_gather_allv, "NULL counts", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, c.src, nullptr, nullptr, kAllLocal)),
      BOTH(cf_coll_gather_allv, "counts summing past SIZE_MAX", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, c.src, wrap, nullptr, kAllLocal)),
      BOTH(cf_coll_gather_allv, "displs putting written blocks on each other", CF_ERR_BAD_ARG, "displs",
           (CF_TEAM_ALL, c.dst, c.src, sizes({8, 8, 8}).data(), same_place, kAllLocal)),
      BOTH(cf_coll_gather_allv, "displs past SIZE_MAX", CF_ERR_BAD_ARG, "displs",
           (CF_TEAM_ALL, c.dst, c.src, sizes({8, 8, 8}).data(), sizes({0, 8, SIZE_MAX - 4}).data(), kAllLocal)),
      BOTH(cf_coll_exchangev, "NULL counts", CF_ERR_BAD_ARG, "counts", (CF_TEAM_ALL, c.dst, c.src, nullptr, kAllLocal)),
      BOTH(cf_coll_exchangev, "counts summing past SIZE_MAX", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, c.src, sizes({SIZE_MAX, SIZE_MAX, 8, 8, 8, 8, 8, 8, 8}).data(), kAllLocal)),
      BOTH(cf_coll_permute, "NULL perm", CF_ERR_BAD_ARG, "perm", (CF_TEAM_ALL, c.dst, c.src, 8, nullptr, kAllLocal)),
      BOTH(cf_coll_permute, "perm not a permutation", CF_ERR_BAD_ARG, "perm",
           (CF_TEAM_ALL, c.dst, c.src, 8, not_perm, kAllLocal)),
      BOTH(cf_coll_permute, "perm naming image P", CF_ERR_BAD_ARG, "perm",
           (CF_TEAM_ALL, c.dst, c.src, 8, out_of_range, kAllLocal)),
      BOTH(cf_coll_permute, "nbytes 0", CF_ERR_BAD_ARG, "nbytes",
           (CF_TEAM_ALL, c.dst, c.src, 0, identity, kAllLocal)),
      // computation: elem_size, elem_count, func, layouts
      BOTH(cf_coll_allreduce, "NULL src", CF_ERR_BAD_ARG, "src", (CF_TEAM_ALL, c.dst, nullptr, 8, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "elem_size * elem_count past SIZE_MAX", CF_ERR_BAD_ARG, "elem_count",
           (CF_TEAM_ALL, c.dst, c.src, 8, SIZE_MAX / 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "elem_size 0", CF_ERR_BAD_ARG, "elem_size",
           (CF_TEAM_ALL, c.dst, c.src, 0, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "an op code past CF_OP_MAXLOC", CF_ERR_BAD_ARG, "func",
           (CF_TEAM_ALL, c.dst, c.src, 8, 4, CF_BUILTIN(CF_OP_MAXLOC + 1, CF_DT_INT64), 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "a type code past CF_DT_DOUBLE", CF_ERR_BAD_ARG, "func",
           (CF_TEAM_ALL, c.dst, c.src, 8, 4, CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE + 1), 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "func INT_MIN", CF_ERR_BAD_ARG, "func",
           (CF_TEAM_ALL, c.dst, c.src, 8, 4, INT32_MIN, 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "func index past fn_tbl", CF_ERR_BAD_ARG, "func",
           (CF_TEAM_ALL, c.dst, c.src, 8, 4, 1, 0, kAllLocal)),
      BOTH(cf_coll_allreduce, "src misaligned", CF_ERR_BAD_ARG, "src",
           (CF_TEAM_ALL, c.dst, reinterpret_cast<char*>(c.src) + 4, 8, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_vec, "dstimage == P", CF_ERR_BAD_ARG, "dstimage",
           (CF_TEAM_ALL, kP, c.dst, c.src, 8, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_vec, "elem_size 4 for CF_DT_INT64", CF_ERR_BAD_ARG, "elem_size",
           (CF_TEAM_ALL, 0, c.dst, c.src, 4, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_vec, "NULL dst on dstimage", CF_ERR_BAD_ARG, "dst",
           (CF_TEAM_ALL, 0, nullptr, c.src, 8, 4, kSum, 0, kAllLocal), true),
      BOTH(cf_coll_scan, "NULL dst", CF_ERR_BAD_ARG, "dst", (CF_TEAM_ALL, nullptr, c.src, 8, 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_scan, "CF_OP_BAND on CF_DT_DOUBLE", CF_ERR_BAD_ARG, "func",
           (CF_TEAM_ALL, c.dst, c.src, 8, 4, CF_BUILTIN(CF_OP_BAND, CF_DT_DOUBLE), 0, kAllLocal)),
      BOTH(cf_coll_reduce_scatter, "elem_count * P past SIZE_MAX", CF_ERR_BAD_ARG, "elem_count",
           (CF_TEAM_ALL, c.dst, c.src, 8, SIZE_MAX / 16, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_scatter, "elem_count 0", CF_ERR_BAD_ARG, "elem_count",
           (CF_TEAM_ALL, c.dst, c.src, 8, 0, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_scatterv, "NULL counts", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, c.src, 8, nullptr, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce_scatterv, "counts * elem_size past SIZE_MAX", CF_ERR_BAD_ARG, "counts",
           (CF_TEAM_ALL, c.dst, c.src, 8, sizes({SIZE_MAX / 4, 1, 1}).data(), kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce, "dstimage == P", CF_ERR_BAD_ARG, "dstimage",
           (CF_TEAM_ALL, kP, c.dst, c.src, 1, 0, 8, 3, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce, "src_offset past SIZE_MAX", CF_ERR_BAD_ARG, "src_offset",
           (CF_TEAM_ALL, 0, c.dst, c.src, 1, SIZE_MAX, 8, 3, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce, "elem_count 0", CF_ERR_BAD_ARG, "elem_count",
           (CF_TEAM_ALL, 0, c.dst, c.src, 1, 0, 8, 0, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reduce, "the indefinite layout on image P", CF_ERR_BAD_ARG, "src_offset",
           (CF_TEAM_ALL, 0, c.dst, c.src, 0, kP, 8, 3, kSum, 0, kAllLocal)),
      BOTH(cf_coll_reducem, "NULL srclist", CF_ERR_BAD_ARG, "srclist",
           (CF_TEAM_ALL, 0, c.dst, nullptr, 1, 0, 8, 3, kSum, 0, kMulti)),
      BOTH(cf_coll_reducem, "src_blksz * P past SIZE_MAX", CF_ERR_BAD_ARG, "src_blksz",
           (CF_TEAM_ALL, 0, c.dst, c.w.srclist, SIZE_MAX / 2, 0, 8, 3, kSum, 0, kMulti)),
      BOTH(cf_coll_prefix_reduce, "NULL dst", CF_ERR_BAD_ARG, "dst",
           (CF_TEAM_ALL, nullptr, 1, 0, c.src, 1, 0, 8, 3, kSum, 0, kAllLocal)),
      BOTH(cf_coll_prefix_reduce, "dst_offset past SIZE_MAX", CF_ERR_BAD_ARG, "dst_offset",
           (CF_TEAM_ALL, c.dst, 1, SIZE_MAX, c.src, 1, 0, 8, 3, kSum, 0, kAllLocal)),
      BOTH(cf_coll_prefix_reduce, "elem_size * elem_count past SIZE_MAX", CF_ERR_BAD_ARG, "elem_count",
           (CF_TEAM_ALL, c.dst, 1, 0, c.src, 1, 0, 8, SIZE_MAX / 4, kSum, 0, kAllLocal)),
      BOTH(cf_coll_prefix_reducem, "NULL dstlist", CF_ERR_BAD_ARG, "dstlist",
           (CF_TEAM_ALL, nullptr, 1, 0, c.w.srclist, 1, 0, 8, 3, kSum, 0, kMulti)),
      BOTH(cf_coll_prefix_reducem, "NULL srclist", CF_ERR_BAD_ARG, "srclist",
           (CF_TEAM_ALL, c.w.dstlist, 1, 0, nullptr, 1, 0, 8, 3, kSum, 0, kMulti)),
  };
  return rows;
}
#undef BOTH

// The sync family: each with a dead handle of every kind; _all and _some
// with NULL lists and repeated entries. `mine` must survive every row.
std::vector<Row> sync_rows() {
  using Sync = int (*)(cf_coll_handle_t);
  using SyncList = int (*)(cf_coll_handle_t*, size_t);
  std::vector<Row> rows;
  const std::pair<const char*, Sync> one[] = {{"cf_coll_wait_sync", cf_coll_wait_sync},
                                              {"cf_coll_try_sync", cf_coll_try_sync}};
  for (const auto& [name, fn] : one) {
    rows.push_back({name, "a handle synced already", CF_ERR_BAD_ARG, "handle", [fn](Ctx& c) { return fn(c.synced); }});
    rows.push_back({name, "another image's live handle", CF_ERR_BAD_ARG, "handle",
                    [fn](Ctx& c) { return fn(c.other); }});
    rows.push_back({name, "a handle never made", CF_ERR_BAD_ARG, "handle", [fn](Ctx&) { return fn(kBogusHandle); }});
    rows.push_back({name, "CF_COLL_INVALID_HANDLE", CF_ERR_BAD_ARG, "handle",
                    [fn](Ctx&) { return fn(CF_COLL_INVALID_HANDLE); }});
  }
  const std::pair<const char*, SyncList> lists[] = {{"cf_coll_wait_sync_all", cf_coll_wait_sync_all},
                                                    {"cf_coll_try_sync_all", cf_coll_try_sync_all},
                                                    {"cf_coll_wait_sync_some", cf_coll_wait_sync_some},
                                                    {"cf_coll_try_sync_some", cf_coll_try_sync_some}};
  for (const auto& [name, fn] : lists) {
    rows.push_back({name, "NULL handles with n 1", CF_ERR_BAD_ARG, "handles", [fn](Ctx&) { return fn(nullptr, 1); }});
    rows.push_back({name, "a live handle given twice", CF_ERR_BAD_ARG, "handles[1]", [fn](Ctx& c) {
                      cf_coll_handle_t h[2] = {c.mine, c.mine};
                      return fn(h, 2);
                    }});
    rows.push_back({name, "a synced handle after a live one", CF_ERR_BAD_ARG, "handles[1]", [fn](Ctx& c) {
                      cf_coll_handle_t h[2] = {c.mine, c.synced};
                      const int rc = fn(h, 2);
                      return h[0] == c.mine ? rc : kStarted;  // the live entry kept
                    }});
    rows.push_back({name, "another image's handle", CF_ERR_BAD_ARG, "handles[0]", [fn](Ctx& c) {
                      cf_coll_handle_t h[1] = {c.other};
                      return fn(h, 1);
                    }});
  }
  rows.push_back({"cf_graph_dump_json", "NULL path", CF_ERR_BAD_ARG, "path",
                  [](Ctx& c) { return cf_graph_dump_json(c.mine, nullptr); }});
  rows.push_back({"cf_graph_dump_json", "a synced handle", CF_ERR_BAD_ARG, "handle", [](Ctx& c) {
                    return cf_graph_dump_json(c.synced, carflow_test::temp_path("bad_args_dump").c_str());
                  }});
  rows.push_back({"cf_graph_dump_json", "a path in no directory", CF_ERR_BAD_ARG, "path",
                  [](Ctx& c) { return cf_graph_dump_json(c.mine, "/nonexistent/carflow/dag.json"); }});
  return rows;
}

// A value-returning call: its status when it returned `refused`.
template <typename T>
int refused_as(T got, T refused) {
  return got == refused ? cf_last_status() : kStarted;
}

// `call` made while an aggregate is open on CF_TEAM_ALL (a barrier, so no
// buffer of the row's): its status, or kStarted when cf_last_error() did
// not name the aggregate. The aggregate is then ended and synced.
int with_open_aggregate(const std::function<int()>& call) {
  cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal | CF_COLL_AGGREGATE);
  const int rc = call();
  const bool named = contains(cf_last_error(), "aggregate");
  cf_coll_wait_sync(cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal));
  return named ? rc : kStarted;
}

std::vector<Row> team_and_extension_rows() {
  return {
      {"cf_coll_broadcast", "an aggregate open on the team", CF_ERR_BAD_ARG, "", [](Ctx& c) {
         return with_open_aggregate([&] { return cf_coll_broadcast(CF_TEAM_ALL, c.dst, 0, c.src, 8, kAllLocal); });
       }},
      {"cf_team_split", "an aggregate open on parent", CF_ERR_BAD_ARG, "", [](Ctx&) {
         cf_team_t t = CF_TEAM_NULL;
         return with_open_aggregate([&] { return cf_team_split(CF_TEAM_ALL, 0, 0, &t); });
       }},
      {"cf_coll_broadcastm_nb", "CF_COLL_AGGREGATE in the representative mode", CF_ERR_BAD_ARG, "flags",
       [](Ctx& c) {
         return nb(cf_coll_broadcastm_nb(CF_TEAM_ALL, c.w.dstlist, 0, c.src, 8,
                                         (kMulti & ~CF_COLL_ALL_THREADS) | CF_COLL_AGGREGATE));
       }},
      {"cf_graph_dump_json", "another image's handle", CF_ERR_BAD_ARG, "handle",
       [](Ctx& c) { return cf_graph_dump_json(c.other, carflow_test::temp_path("bad_args_other").c_str()); }},
      {"cf_team_split", "NULL newteam", CF_ERR_BAD_ARG, "newteam",
       [](Ctx&) { return cf_team_split(CF_TEAM_ALL, 0, 0, nullptr); }},
      {"cf_team_split", "a freed parent", CF_ERR_BAD_ARG, "parent", [](Ctx& c) {
         cf_team_t t = CF_TEAM_NULL;
         return cf_team_split(c.freed, 0, 0, &t);
       }},
      {"cf_team_split", "another image's parent", CF_ERR_BAD_ARG, "parent", [](Ctx& c) {
         cf_team_t t = CF_TEAM_NULL;
         return cf_team_split(c.foreign, 0, 0, &t);
       }},
      {"cf_team_free", "CF_TEAM_ALL", CF_ERR_BAD_ARG, "team", [](Ctx&) { return cf_team_free(CF_TEAM_ALL); }},
      {"cf_team_free", "a team freed already", CF_ERR_BAD_ARG, "team", [](Ctx& c) { return cf_team_free(c.freed); }},
      {"cf_team_free", "CF_TEAM_NULL", CF_ERR_BAD_ARG, "team", [](Ctx&) { return cf_team_free(CF_TEAM_NULL); }},
      {"cf_team_free", "another image's team", CF_ERR_BAD_ARG, "team",
       [](Ctx& c) { return cf_team_free(c.foreign); }},
      {"cf_team_size", "a freed team", CF_ERR_BAD_ARG, "team",
       [](Ctx& c) { return refused_as(cf_team_size(c.freed), cf_image_t{0}); }},
      {"cf_team_rank", "another image's team", CF_ERR_BAD_ARG, "team",
       [](Ctx& c) { return refused_as(cf_team_rank(c.foreign), static_cast<cf_image_t>(-1)); }},
      {"cf_coll_set_algorithm", "kind -1", CF_ERR_BAD_ARG, "kind",
       [](Ctx&) { return cf_coll_set_algorithm(-1, "flat"); }},
      {"cf_coll_set_algorithm", "an unknown name", CF_ERR_BAD_ARG, "name",
       [](Ctx&) { return cf_coll_set_algorithm(CF_KIND_BROADCAST, "no_such_algorithm"); }},
      {"cf_coll_algorithm", "kind past CF_KIND_PREFIX_REDUCE", CF_ERR_BAD_ARG, "kind",
       [](Ctx&) { return refused_as<const char*>(cf_coll_algorithm(CF_KIND_PREFIX_REDUCE + 1, 8, 8), nullptr); }},
      {"cf_get_stats", "NULL out", CF_ERR_BAD_ARG, "out", [](Ctx&) { return cf_get_stats(nullptr); }},
      {"cf_get_cache_stats", "NULL out", CF_ERR_BAD_ARG, "out", [](Ctx&) { return cf_get_cache_stats(nullptr); }},
      {"cf_get_net_stats", "NULL out", CF_ERR_BAD_ARG, "out", [](Ctx&) { return cf_get_net_stats(nullptr); }},
      {"cf_coll_init", "from an image thread", CF_ERR_BAD_ARG, "already image",
       [](Ctx& c) { return cf_coll_init(nullptr, c.me, nullptr, 0, 0); }},
      {"cf_run_images", "from an image thread", CF_ERR_BAD_ARG, "image thread",
       [](Ctx&) { return cf_run_images(1, nullptr, 0, [](cf_image_t, void*) {}, nullptr); }},
      {"cf_finalize", "from an image while cf_run_images runs", CF_ERR_BAD_ARG, "cf_run_images",
       [](Ctx&) { return cf_finalize(); }},
      {"cf_init", "a second time", CF_ERR_BAD_ARG, "cf_init", [](Ctx&) { return cf_init(nullptr, nullptr); }},
  };
}

int dummy_generator(const cf_gen_spec_t*, cf_dag_t*, void*) { return CF_OK; }

// generator.h: registration, and the builder given no DAG (a generator
// passes its own; NULL must not crash).
std::vector<Row> generator_rows() {
  const cf_buf_t none{0, 0, 0, 0}, src{CF_SPACE_SRC, 0, 0, 8}, dst{CF_SPACE_DST, 0, 0, 8};
  auto no_car = [](cf_car_t car) { return car == CF_CAR_NONE ? CF_ERR_BAD_ARG : kStarted; };
  auto reg = [](int kind, const char* name, cf_generator_fn fn, int flags) {
    return cf_generator_register(kind, name, fn, nullptr, flags, nullptr);
  };
  const char* what = "a NULL dag";
  return {
      {"cf_generator_register", "NULL fn", CF_ERR_BAD_ARG, "fn",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, "bad_args_x", nullptr, 0); }},
      {"cf_generator_register", "NULL name", CF_ERR_BAD_ARG, "name",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, nullptr, dummy_generator, 0); }},
      {"cf_generator_register", "an empty name", CF_ERR_BAD_ARG, "name",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, "", dummy_generator, 0); }},
      {"cf_generator_register", "a name with a space", CF_ERR_BAD_ARG, "name",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, "bad name", dummy_generator, 0); }},
      {"cf_generator_register", "a name of 65 bytes", CF_ERR_BAD_ARG, "name",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, std::string(65, 'a').c_str(), dummy_generator, 0); }},
      {"cf_generator_register", "a built-in's name", CF_ERR_BAD_ARG, "name",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, "binomial", dummy_generator, 0); }},
      {"cf_generator_register", "kind 99", CF_ERR_BAD_ARG, "kind",
       [reg](Ctx&) { return reg(99, "bad_args_x", dummy_generator, 0); }},
      {"cf_generator_register", "unknown gen_flags", CF_ERR_BAD_ARG, "gen_flags",
       [reg](Ctx&) { return reg(CF_KIND_BROADCAST, "bad_args_x", dummy_generator, 1 << 20); }},
      // The builder: CF_CAR_NONE (counted as CF_ERR_BAD_ARG here) and no crash.
      {"cf_dag_send", what, CF_ERR_BAD_ARG, "", [=](Ctx&) { return no_car(cf_dag_send(nullptr, 0, src, nullptr, 0)); }},
      {"cf_dag_recv", what, CF_ERR_BAD_ARG, "", [=](Ctx&) { return no_car(cf_dag_recv(nullptr, 0, dst, nullptr, 0)); }},
      {"cf_dag_recv_reduce", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_recv_reduce(nullptr, 0, dst, nullptr, 0)); }},
      {"cf_dag_recv_reduce_left", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_recv_reduce_left(nullptr, 0, dst, nullptr, 0)); }},
      {"cf_dag_recv_reduce_into", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_recv_reduce_into(nullptr, 0, dst, src, 0, nullptr, 0)); }},
      {"cf_dag_reduce", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_reduce(nullptr, dst, dst, src, nullptr, 0)); }},
      {"cf_dag_fold", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_fold(nullptr, dst, src, none, 0, 0, nullptr, 0)); }},
      {"cf_dag_prefix", what, CF_ERR_BAD_ARG, "",
       [=](Ctx&) { return no_car(cf_dag_prefix(nullptr, dst, src, none, 0, 0, nullptr, 0)); }},
      {"cf_dag_copy", what, CF_ERR_BAD_ARG, "", [=](Ctx&) { return no_car(cf_dag_copy(nullptr, dst, src, nullptr, 0)); }},
      {"cf_dag_join", what, CF_ERR_BAD_ARG, "", [=](Ctx&) { return no_car(cf_dag_join(nullptr, nullptr, 0)); }},
      {"cf_dag_temp", what, CF_ERR_BAD_ARG, "",
       [](Ctx&) { return cf_dag_temp(nullptr, 8) == UINT32_MAX ? CF_ERR_BAD_ARG : kStarted; }},
      {"cf_dag_src_bytes", what, CF_ERR_BAD_ARG, "",
       [](Ctx&) { return cf_dag_src_bytes(nullptr) == 0 ? CF_ERR_BAD_ARG : kStarted; }},
      {"cf_dag_dst_bytes", what, CF_ERR_BAD_ARG, "",
       [](Ctx&) { return cf_dag_dst_bytes(nullptr) == 0 ? CF_ERR_BAD_ARG : kStarted; }},
      // Functions with no failure: a bad input gives a defined answer.
      {"cf_strerror", "an unknown status", CF_ERR_BAD_ARG, "",
       [](Ctx&) { return cf_strerror(12345) != nullptr ? CF_ERR_BAD_ARG : kStarted; }},
      {"cf_set_error_mode", "an unknown mode (ignored: errors still return)", CF_ERR_BAD_ARG, "nbytes", [](Ctx& c) {
         cf_set_error_mode(7);
         return cf_coll_broadcast(CF_TEAM_ALL, c.dst, 0, c.src, 0, kAllLocal);
       }},
  };
}

std::vector<Row> all_rows() {
  std::vector<Row> rows = collective_rows();
  for (auto part : {sync_rows(), team_and_extension_rows(), generator_rows()}) {
    rows.insert(rows.end(), part.begin(), part.end());
  }
  return rows;
}

// ---- the runner ---------------------------------------------------------------------

bool untouched(const World& w, uint32_t image) {
  for (int64_t v : w.bufs[image].dst) {
    if (v != kGuard) return false;
  }
  return true;
}

// Every row on kP images. After each: the caller's destination is all
// guard words, and an allreduce of fresh values is right on every image.
void run_rows(const std::vector<Row>& rows, ImageLog& log) {
  World w;
  const int status = run_images(
      kP,
      [&](cf_image_t me) {
        Buffers& b = w.bufs[me];
        Ctx c{me, w, b.dst, b.src, CF_TEAM_NULL, CF_TEAM_NULL, 0, 0, 0};
        for (size_t i = 0; i < kWords; ++i) b.src[i] = static_cast<int64_t>(me * 1000 + i);
        // The misused objects: a freed team, a live one published, a synced
        // handle, a live one published (an allreduce that ends last).
        log.expect(me, cf_team_split(CF_TEAM_ALL, 0, 0, &c.freed) == CF_OK && cf_team_free(c.freed) == CF_OK,
                   [] { return cat("freeing a split team: ", cf_last_error()); });
        log.expect(me, cf_team_split(CF_TEAM_ALL, 0, 0, &w.team[me]) == CF_OK, [] { return cf_last_error(); });
        c.synced = cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal);
        log.expect(me, cf_coll_wait_sync(c.synced) == CF_OK, [] { return cf_last_error(); });
        alignas(8) int64_t live_src = me + 1, live_dst = 0;
        c.mine = w.live[me] = cf_coll_allreduce_nb(CF_TEAM_ALL, &live_dst, &live_src, 8, 1, kSum, 0, kAllLocal);
        w.published.arrive_and_wait();
        c.foreign = w.team[(me + 1) % kP];
        c.other = w.live[(me + 1) % kP];
        for (size_t r = 0; r < rows.size(); ++r) {
          const Row& row = rows[r];
          auto what = [&] { return cat(row.function, " with ", row.mistake); };
          std::fill(std::begin(b.dst), std::end(b.dst), kGuard);
          if (!row.root_only || me == 0) {
            const int rc = row.call(c);
            const std::string message = cf_last_error();
            log.expect(me, rc == row.want, [&] {
              return cat(what(), ": returned ", rc == kStarted ? "a handle or value" : cf_strerror(rc),
                         ", the header documents ", cf_strerror(row.want), " (", message, ")");
            });
            log.expect(me, contains(message, row.names),
                       [&] { return cat(what(), ": cf_last_error() \"", message, "\" does not name '", row.names, "'"); });
            log.expect(me, untouched(w, me), [&] { return cat(what(), ": dst was written"); });
            cf_set_error_mode(CF_ERRORS_RETURN);
            cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
          }
          // Nothing started on any image: the next collective is right.
          alignas(8) int64_t mine = static_cast<int64_t>(r * 10 + me), sum = -1;
          const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &mine, 8, 1, kSum, 0, kAllLocal);
          const int64_t want = static_cast<int64_t>(r * 10 * kP + kP * (kP - 1) / 2);
          log.expect(me, rc == CF_OK && sum == want, [&] {
            return cat("after ", what(), ": the next allreduce returned ", cf_strerror(rc), " and ", sum, " (want ",
                       want, ")");
          });
        }
        log.expect(me, cf_coll_wait_sync(c.mine) == CF_OK && live_dst == kP * (kP + 1) / 2,
                   [&] { return cat("the live allreduce held across the rows: ", cf_last_error(), " ", live_dst); });
        w.published.arrive_and_wait();  // no image frees its team while another names it
        log.expect(me, cf_team_free(w.team[me]) == CF_OK, [] { return cf_last_error(); });
      },
      kFunctions, 1);
  log.expect(0, status == CF_OK, [&] { return cat("cf_run_images: ", cf_strerror(status)); });
}

// ---- calls made by a thread that is no image -------------------------------------------

// Each entry point's valid call, made where no image is: before cf_init,
// after cf_finalize, or from a thread that never called cf_coll_init.
struct Unattached {
  const char* function;
  std::function<int()> call;
};

std::vector<Unattached> unattached_calls() {
  alignas(64) static int64_t d[kWords], s[kWords];
  static void* list[kP] = {d, d, d};
  static const size_t counts[kP * kP] = {8, 8, 8, 8, 8, 8, 8, 8, 8};
  static const cf_image_t perm[kP] = {0, 1, 2};
  static cf_coll_handle_t handles[1] = {kBogusHandle};
  static cf_team_t team_out;
  cf_team_t* team = &team_out;
  auto status = [] { return cf_last_status(); };
  return {
      {"cf_coll_broadcast_nb", [] { return nb(cf_coll_broadcast_nb(CF_TEAM_ALL, d, 0, s, 8, kAllLocal)); }},
      {"cf_coll_broadcast", [] { return cf_coll_broadcast(CF_TEAM_ALL, d, 0, s, 8, kAllLocal); }},
      {"cf_coll_barrier", [] { return cf_coll_barrier(CF_TEAM_ALL, kAllLocal); }},
      {"cf_coll_broadcastm_nb", [] { return nb(cf_coll_broadcastm_nb(CF_TEAM_ALL, list, 0, s, 8, kMulti)); }},
      {"cf_coll_scatter", [] { return cf_coll_scatter(CF_TEAM_ALL, d, 0, s, 8, kAllLocal); }},
      {"cf_coll_gather_nb", [] { return nb(cf_coll_gather_nb(CF_TEAM_ALL, 0, d, s, 8, kAllLocal)); }},
      {"cf_coll_gather_all", [] { return cf_coll_gather_all(CF_TEAM_ALL, d, s, 8, kAllLocal); }},
      {"cf_coll_exchange", [] { return cf_coll_exchange(CF_TEAM_ALL, d, s, 8, kAllLocal); }},
      {"cf_coll_exchangem", [] { return cf_coll_exchangem(CF_TEAM_ALL, list, list, 8, kMulti); }},
      {"cf_coll_gatherv", [] { return cf_coll_gatherv(CF_TEAM_ALL, 0, d, s, counts, nullptr, kAllLocal); }},
      {"cf_coll_exchangev", [] { return cf_coll_exchangev(CF_TEAM_ALL, d, s, counts, kAllLocal); }},
      {"cf_coll_permute", [] { return cf_coll_permute(CF_TEAM_ALL, d, s, 8, perm, kAllLocal); }},
      {"cf_coll_allreduce", [] { return cf_coll_allreduce(CF_TEAM_ALL, d, s, 8, 1, kSum, 0, kAllLocal); }},
      {"cf_coll_reduce_scatter", [] { return cf_coll_reduce_scatter(CF_TEAM_ALL, d, s, 8, 1, kSum, 0, kAllLocal); }},
      {"cf_coll_reduce", [] { return cf_coll_reduce(CF_TEAM_ALL, 0, d, s, 1, 0, 8, 3, kSum, 0, kAllLocal); }},
      {"cf_coll_prefix_reducem",
       [] { return cf_coll_prefix_reducem(CF_TEAM_ALL, list, 1, 0, list, 1, 0, 8, 3, kSum, 0, kMulti); }},
      {"cf_coll_wait_sync", [] { return cf_coll_wait_sync(kBogusHandle); }},
      {"cf_coll_try_sync", [] { return cf_coll_try_sync(kBogusHandle); }},
      {"cf_coll_wait_sync_all", [] { return cf_coll_wait_sync_all(handles, 1); }},
      {"cf_coll_try_sync_all", [] { return cf_coll_try_sync_all(handles, 1); }},
      {"cf_coll_wait_sync_some", [] { return cf_coll_wait_sync_some(handles, 1); }},
      {"cf_coll_try_sync_some", [] { return cf_coll_try_sync_some(handles, 1); }},
      {"cf_poll", [] { return cf_poll(); }},
      {"cf_team_split", [team] { return cf_team_split(CF_TEAM_ALL, 0, 0, team); }},
      {"cf_team_free", [] { return cf_team_free(kBogusTeam); }},
      {"cf_team_size", [status] { return cf_team_size(CF_TEAM_ALL) == 0 ? status() : kStarted; }},
      {"cf_team_rank", [status] { return cf_team_rank(CF_TEAM_ALL) == cf_image_t(-1) ? status() : kStarted; }},
      {"cf_graph_dump_json", [] { return cf_graph_dump_json(kBogusHandle, "/dev/null"); }},
      {"cf_coll_set_algorithm", [] { return cf_coll_set_algorithm(CF_KIND_BROADCAST, "flat"); }},
      {"cf_coll_algorithm",
       [status] { return cf_coll_algorithm(CF_KIND_BROADCAST, 8, 8) == nullptr ? status() : kStarted; }},
  };
}

// The node-wide counters: any thread may read them while images run, so
// they are CF_ERR_NOT_INIT only with no images running.
std::vector<Unattached> no_images_calls() {
  static cf_stats_t stats;
  static cf_cache_stats_t cache;
  return {
      {"cf_get_stats", [] { return cf_get_stats(&stats); }},
      {"cf_get_cache_stats", [] { return cf_get_cache_stats(&cache); }},
  };
}

// The calls that need cf_init (not merely an image): made before cf_init
// and after cf_finalize only.
std::vector<Unattached> lifecycle_calls() {
  static cf_net_stats_t net;
  return {
      {"cf_finalize", [] { return cf_finalize(); }},
      {"cf_coll_init", [] { return cf_coll_init(nullptr, 0, nullptr, 0, 0); }},
      {"cf_run_images", [] { return cf_run_images(2, nullptr, 0, [](cf_image_t, void*) {}, nullptr); }},
      {"cf_get_net_stats", [] { return cf_get_net_stats(&net); }},
  };
}

// Each call must return CF_ERR_NOT_INIT, name itself or the missing step, and
// leave cf_myimage() at -1. Returns the failures, `when` in each.
std::vector<std::string> unattached_failures(const std::vector<Unattached>& calls, const char* when) {
  std::vector<std::string> failures;
  for (const Unattached& u : calls) {
    const int rc = u.call();
    const std::string message = cf_last_error();
    if (rc != CF_ERR_NOT_INIT || cf_last_status() != CF_ERR_NOT_INIT || message.empty()) {
      failures.push_back(cat(when, ": ", u.function, " returned ", rc == kStarted ? "a value" : cf_strerror(rc),
                             " (", message, "), the header documents CF_ERR_NOT_INIT"));
    }
    if (cf_myimage() != static_cast<cf_image_t>(-1)) failures.push_back(cat(when, ": ", u.function, " made an image"));
  }
  return failures;
}

std::vector<std::string> g_before_init;  // main() fills it before cf_init

// cf_generator_register is allowed before cf_init (generator.h): it
// registers, and refuses a bad argument as it does later. main() calls it
// before cf_init; returns the failures.
std::vector<std::string> register_before_init() {
  std::vector<std::string> failures;
  const int bad = cf_generator_register(CF_KIND_BROADCAST, "bad_args_early", nullptr, nullptr, 0, nullptr);
  if (bad != CF_ERR_BAD_ARG || std::string(cf_last_error()).find("fn") == std::string::npos) {
    failures.push_back(cat("before cf_init: cf_generator_register with NULL fn returned ", cf_strerror(bad), " (",
                           cf_last_error(), "), the header documents CF_ERR_BAD_ARG naming fn"));
  }
  const int good = cf_generator_register(CF_KIND_BROADCAST, "bad_args_early", dummy_generator, nullptr, 0, nullptr);
  if (good != CF_OK) {
    failures.push_back(cat("before cf_init: cf_generator_register returned ", cf_strerror(good), " (",
                           cf_last_error(), "), registration is allowed before cf_init"));
  }
  return failures;
}
std::vector<std::string> g_register_before_init;  // main() fills it before cf_init

std::set<std::string> declared_functions(const std::string& header) {
  std::ifstream in(header);
  std::stringstream text;
  text << in.rdbuf();
  std::set<std::string> names;
  const std::string s = text.str();
  const std::regex declaration(R"(\b(cf_[a-z_]+)\s*\()");
  for (auto it = std::sregex_iterator(s.begin(), s.end(), declaration); it != std::sregex_iterator(); ++it) {
    names.insert((*it)[1]);
  }
  return names;
}

// ---- the behaviours --------------------------------------------------------------------

TEST_CASE("every bad argument of every entry point returns the documented status, names the argument and changes nothing") {
  const std::vector<Row> rows = all_rows();
  ImageLog log(kP);
  run_rows(rows, log);
  log.report();
  size_t checks = 5 * kP + 1;  // set-up, the live handle, the team freed, cf_run_images
  for (const Row& row : rows) checks += (row.root_only ? 3 : 3 * kP) + kP;
  CHECK(log.checks() == checks);
}

TEST_CASE("every function the headers declare has a row") {
  std::set<std::string> covered;
  for (const Row& row : all_rows()) covered.insert(row.function);
  for (const auto& u : unattached_calls()) covered.insert(u.function);
  for (const auto& u : lifecycle_calls()) covered.insert(u.function);
  for (const auto& u : no_images_calls()) covered.insert(u.function);
  // No arguments to get wrong; exercised by every row.
  for (const char* f : {"cf_last_error", "cf_last_status", "cf_myimage", "cf_images", "cf_mynode", "cf_nodes",
                        "cf_plugin_init" /* the plug-in's function, not carflow's */}) {
    covered.insert(f);
  }
  for (const char* header : {"api/include/carflow/carflow.h", "api/include/carflow/generator.h"}) {
    const std::set<std::string> declared = declared_functions(header);
    CHECK_MESSAGE(declared.size() > 10, header, " not read");
    for (const std::string& f : declared) CHECK_MESSAGE(covered.count(f) == 1, f, " (", header, ") has no row");
  }
}

TEST_CASE("calls before cf_init return CF_ERR_NOT_INIT and change nothing") {
  for (const std::string& failure : g_before_init) FAIL_CHECK(failure);
  CHECK(g_before_init.empty());
}

TEST_CASE("cf_generator_register before cf_init registers, and refuses a bad argument as it does later") {
  for (const std::string& failure : g_register_before_init) FAIL_CHECK(failure);
  // The early name is known once images run.
  std::string chose;
  const int status = run_images(1, [&](cf_image_t) {
    if (cf_coll_set_algorithm(CF_KIND_BROADCAST, "bad_args_early") == CF_OK) {
      const char* name = cf_coll_algorithm(CF_KIND_BROADCAST, 8, 1);
      chose = name != nullptr ? name : cf_last_error();
    }
    cf_coll_set_algorithm(CF_KIND_BROADCAST, nullptr);
  });
  CHECK(status == CF_OK);
  CHECK(chose == "bad_args_early");
}

TEST_CASE("calls from a thread that is not an image return CF_ERR_NOT_INIT, with images running or not") {
  std::vector<std::string> idle, running;
  std::thread([&] {
    std::vector<Unattached> calls = unattached_calls();
    for (const auto& u : no_images_calls()) calls.push_back(u);
    idle = unattached_failures(calls, "no images running");
  }).join();
  const int status = run_images(2, [&](cf_image_t me) {
    if (me == 0) std::thread([&] { running = unattached_failures(unattached_calls(), "images running"); }).join();
    cf_coll_barrier(CF_TEAM_ALL, kAllLocal);
  });
  CHECK(status == CF_OK);
  for (const auto& f : idle) FAIL_CHECK(f);
  for (const auto& f : running) FAIL_CHECK(f);
}

TEST_CASE("cf_coll_init and cf_run_images refuse bad set-up arguments and make no image") {
  const cf_coll_fn_entry_t null_entry[] = {{nullptr, 0}};
  const cf_coll_fn_entry_t bad_flags[] = {{kFunctions[0].fnptr, 1u << 7}};
  const cf_image_t images[] = {2};
  struct Case {
    const char* mistake;
    const char* names;
    std::function<int()> call;
  };
  const std::vector<Case> cases = {
      {"cf_coll_init with init_flags 1", "init_flags", [] { return cf_coll_init(nullptr, 0, nullptr, 0, 1); }},
      {"cf_coll_init with fn_tbl NULL and fn_count 1", "fn_tbl", [] { return cf_coll_init(nullptr, 0, nullptr, 1, 0); }},
      {"cf_coll_init with a NULL fnptr", "fnptr", [&] { return cf_coll_init(nullptr, 0, null_entry, 1, 0); }},
      {"cf_coll_init with unknown function flags", "fn_tbl[0]", [&] { return cf_coll_init(nullptr, 0, bad_flags, 1, 0); }},
      {"cf_coll_init with my_image past the images", "my_image", [&] { return cf_coll_init(images, 2, nullptr, 0, 0); }},
      {"cf_coll_init with my_image UINT32_MAX", "my_image",
       [] { return cf_coll_init(nullptr, UINT32_MAX, nullptr, 0, 0); }},
      {"cf_run_images with n 0", "n", [] { return cf_run_images(0, nullptr, 0, [](cf_image_t, void*) {}, nullptr); }},
      {"cf_run_images with fn NULL", "fn", [] { return cf_run_images(2, nullptr, 0, nullptr, nullptr); }},
      {"cf_run_images with fn_tbl NULL and fn_count 1", "fn_tbl",
       [] { return cf_run_images(2, nullptr, 1, [](cf_image_t, void*) {}, nullptr); }},
      {"cf_run_images with a NULL fnptr", "fnptr",
       [&] { return cf_run_images(2, null_entry, 1, [](cf_image_t, void*) {}, nullptr); }},
  };
  for (const Case& c : cases) {
    int rc = 0;
    std::string message;
    cf_image_t image = 0;
    std::thread([&] {  // a fresh thread each: one that became an image stays one
      rc = c.call();
      message = cf_last_error();
      image = cf_myimage();
    }).join();
    CHECK_MESSAGE(rc == CF_ERR_BAD_ARG, c.mistake, ": ", cf_strerror(rc), " (", message, ")");
    CHECK_MESSAGE(contains(message, c.names), c.mistake, ": \"", message, "\" does not name ", c.names);
    CHECK_MESSAGE(image == static_cast<cf_image_t>(-1), c.mistake, ": the thread became image ", image);
  }
  // Nothing was taken: images run.
  std::vector<int64_t> got(2, -1);
  const int status = run_images(2, [&](cf_image_t me) {
    alignas(8) int64_t v = me + 5, sum = 0;
    cf_coll_allreduce(CF_TEAM_ALL, &sum, &v, 8, 1, kSum, 0, kAllLocal);
    got[me] = sum;
  });
  CHECK(status == CF_OK);
  CHECK(got == std::vector<int64_t>{11, 11});
}

}  // namespace

int main(int argc, char** argv) {
  cf_set_error_mode(CF_ERRORS_RETURN);
  std::vector<Unattached> before = unattached_calls();
  for (const auto& u : lifecycle_calls()) before.push_back(u);
  for (const auto& u : no_images_calls()) before.push_back(u);
  g_before_init = unattached_failures(before, "before cf_init");
  g_register_before_init = register_before_init();
  if (cf_init(&argc, &argv) != CF_OK) {
    std::fprintf(stderr, "cf_init failed: %s\n", cf_last_error());
    return 1;
  }
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  int result = context.run();
  if (cf_finalize() != CF_OK) {
    std::fprintf(stderr, "cf_finalize failed: %s\n", cf_last_error());
    return 1;
  }
  std::vector<Unattached> after = unattached_calls();
  for (const auto& u : lifecycle_calls()) after.push_back(u);
  for (const auto& u : no_images_calls()) after.push_back(u);
  for (const std::string& failure : unattached_failures(after, "after cf_finalize")) {
    std::fprintf(stderr, "FAILED: %s\n", failure.c_str());
    result = 1;
  }
  return result;
}
