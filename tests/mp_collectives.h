// What the modes of mp_collectives share (mp_collectives.cc: the program,
// its modes and where each one lives).
#pragma once

#include <carflow/carflow.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "graph/reference.h"
#include "graph/registry.h"

namespace mp {

using carflow::CollectiveSpec;
using carflow::CollKind;
using Bytes = std::vector<uint8_t>;

constexpr int kLocal = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
constexpr int kSumInt64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);
constexpr int kAffine = 0;  // fn_tbl index of the non-commutative function

// What this process's images found: the summary's checks and FAIL lines.
struct Log {
  std::mutex mutex;
  std::atomic<uint64_t> checks{0};
  std::vector<std::string> failures;
  std::atomic<bool> represented{false};  // this node's representative has initiated its call
  void fail(const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex);
    if (failures.size() < 20) failures.push_back(what);
    else if (failures.size() == 20) failures.push_back("(more failures not shown)");
  }
};

// One process's run: what main read from its arguments and environment,
// and what its images report. Lives on main's stack (exit3's exit() from
// an image thread must not destroy it under the other images).
struct Context {
  int argc = 0;  // after cf_init: argv[1] the mode, argv[2..] its arguments
  char** argv = nullptr;
  std::string mode;
  uint32_t images = 1;  // per node (CF_IMAGES)
  double peer_timeout_s = 5.0;  // CF_PEER_TIMEOUT
  std::chrono::steady_clock::time_point start;
  Log log;
  // Waits that returned CF_ERR_PEER_LOST (note_lost): the summary's "lost" lines.
  std::atomic<int> lost_seen{0};
  std::string lost_message;
  std::mutex lost_mutex;
  std::atomic<long long> lost_at_ms{0};
  std::atomic<int> lost_code{0};  // the first such wait's: CF_ERR_PEER_LOST, or CF_ERR_NO_MEM (below)
  bool nomem_fault = false;       // CF_FAULT=nomem:unexpected: a failed node's waits return CF_ERR_NO_MEM
};

// A mode: one image's part, run on its image thread (cf_run_images).
using ModeBody = void (*)(Context& c, cf_image_t me);

// mp_all_mode.cc
void run_mode_all(Context& c, cf_image_t me);
// mp_soak_mode.cc
void run_mode_soak(Context& c, cf_image_t me);
// mp_failure_modes.cc: lost and stopped peers, disagreeing arguments.
void run_mode_kill(Context& c, cf_image_t me);  // kill and exit3
void run_mode_killstream(Context& c, cf_image_t me);
void run_mode_cut(Context& c, cf_image_t me);
void run_mode_slow(Context& c, cf_image_t me);
void run_mode_fault(Context& c, cf_image_t me);
void run_mode_nomem(Context& c, cf_image_t me);
void run_mode_check(Context& c, cf_image_t me);
void run_mode_sizes(Context& c, cf_image_t me);
// mp_transport_modes.cc: the transports' paths under load.
void run_mode_flood(Context& c, cf_image_t me);
void run_mode_pump(Context& c, cf_image_t me);
void run_mode_split(Context& c, cf_image_t me);
void run_mode_midsize(Context& c, cf_image_t me);
void run_mode_combines(Context& c, cf_image_t me);
void run_mode_runahead(Context& c, cf_image_t me);
void run_mode_late(Context& c, cf_image_t me);
void run_mode_reruns(Context& c, cf_image_t me);

// Shared by the modes that check against the reference (mp_collectives.cc).

// Composition of affine maps x -> a x + b on uint64 pairs, mod 2^64:
// associative, not commutative, so a reordered reduction shows.
void affine_combine(void* dst, const void* left, const void* right, size_t bytes);
void int64_sum(void* dst, const void* left, const void* right, size_t bytes);

std::string describe(const CollectiveSpec& s, const std::string& form, uint32_t me);

// 8-byte aligned storage (computational kinds need alignment).
struct Buffer {
  std::vector<uint64_t> store;
  explicit Buffer(size_t n, uint8_t fill) : store(n / 8 + 2) { std::memset(store.data(), fill, n); }
  explicit Buffer(const Bytes& b) : store(b.size() / 8 + 2) {
    if (!b.empty()) std::memcpy(store.data(), b.data(), b.size());
  }
  char* data() { return reinterpret_cast<char*>(store.data()); }
};

// The first byte at which `got` differs from `want`; want.size() if none does.
size_t first_difference(const char* got, const Bytes& want);

// Starts spec `s` (a data-movement or a computational kind) on this image's
// buffers: the m form with a SINGLE list if m_form, else the single-address
// one (v if s has counts).
cf_coll_handle_t start_movement(const CollectiveSpec& s, char* dst, char* src, bool m_form,
                                cf_team_t team = CF_TEAM_ALL, int flags = kLocal);
cf_coll_handle_t start_compute(const CollectiveSpec& s, char* dst, char* src, int func, bool m_form,
                               cf_team_t team = CF_TEAM_ALL, int flags = kLocal);

}  // namespace mp
