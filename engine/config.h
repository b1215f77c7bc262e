// Configuration: every CF_* environment knob is one row of one table
// (Config::knobs(), engine/config.cc): its name, range, default and doc, and
// how it is read. Config::from_env parses by it, `carflow info` prints it,
// and api/README.md's "Environment" table is its markdown (checked by
// tests/knobs_test.cc).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "graph/car.h"
#include "graph/model/loggp.h"

namespace carflow {

struct Knob;
struct KnobValue;
struct TuningTable;

// CF_PROGRESS (GASNet collectives notes v1.7, "Progress"): who moves data while images wait.
//   poll    waiting threads poll (CF_SPIN_COUNT), yield, then block; oneTBB
//           workers copy large messages whose receive is posted.
//   thread  additionally a progress thread polls every image while any
//           collective is live and sleeps on a condition variable otherwise
//           (woken by the start of a collective); waiting threads block at once.
//   block   waiting threads block at once on their image's condition
//           variable (the inproc transport's wait object): no spinning.
enum class ProgressMode : uint8_t { Poll, Thread, Block };

// CF_INPROC_RINGS: whether image threads of a process exchange small
// messages through rings (transports/inproc): auto = when the images of the
// host do not outnumber its cores, 1 = always, 0 = never.
enum class RingsMode : uint8_t { Auto, On, Off };

// CF_BIND_IMAGES: cf_run_images binds each image thread to a CPU share of
// its own (auto) when the images are no more than the process's CPUs, as
// cfrun binds processes; none leaves them to the scheduler.
enum class BindMode : uint8_t { Auto, None };

// CF_FAULT: one fault injected on purpose, for testing a program's (and
// carflow's) handling of failures. Off unless set; its hooks sit on the
// between-process send path (transports/ofi), a schedule-cache miss
// (nomem:cache) and the unexpected-message pools (nomem:unexpected).
struct FaultSpec {
  enum Kind : uint8_t { None, KillAfter, CloseLink, Stop, Delay, NomemCache, NomemUnexpected };
  Kind kind = None;
  uint64_t value = 0;  // messages (kill_after, close_link), ms (stop), us (delay); nomem: 0
  int64_t node = -1;   // the node it applies to (-1: every node)
  bool applies_to(uint32_t n) const { return kind != None && (node < 0 || static_cast<uint64_t>(node) == n); }
};

struct Config {
  uint64_t inproc_eager_bytes = 8192;       // CF_INPROC_EAGER_BYTES
  uint64_t inproc_fastbox_bytes = 8192;     // CF_INPROC_FASTBOX_BYTES: largest ring message (0 = rings off)
  uint64_t inproc_eager_credits = 64;       // CF_INPROC_EAGER_CREDITS
  RingsMode inproc_rings = RingsMode::Auto;  // CF_INPROC_RINGS
  BindMode bind_images = BindMode::Auto;     // CF_BIND_IMAGES
  uint64_t segment_bytes = 256 * 1024;      // CF_SEGMENT_BYTES (0 = no segmentation)
  uint64_t allreduce_ring_bytes = 64 * 1024;  // CF_ALLREDUCE_RING_BYTES: bandwidth algorithm at or above
  uint64_t allreduce_split_bytes = 256 * 1024;  // CF_ALLREDUCE_SPLIT_BYTES: rabenseifner at or above (images <= cores)
  uint64_t allreduce_pair_bytes = 2 * 1024 * 1024;  // CF_ALLREDUCE_PAIR_BYTES: two images: recursive doubling below
  uint64_t reduce_large_bytes = 64 * 1024;  // CF_REDUCE_LARGE_BYTES: reduce_vec / scan /
                                            // reduce_scatter switch to bandwidth algorithms
  uint64_t data_alignment = 8;              // CF_DATA_ALIGNMENT: computational data alignment
  // CF_ALGO_<KIND> (one per CollKind: BROADCAST, ..., PREFIX_REDUCE),
  // indexed by CollKind; "" = by table.
  std::array<std::string, kCollKinds> algo;
  // Cut-offs of the default table (README, "Algorithm selection").
  uint64_t broadcast_large_bytes = 512 * 1024;  // CF_BROADCAST_LARGE_BYTES
  uint64_t rooted_tree_bytes = 2048;        // CF_ROOTED_TREE_BYTES: scatter/gather binomial below
  uint64_t gather_all_small_bytes = 1024;   // CF_GATHER_ALL_SMALL_BYTES: bruck below
  uint64_t exchange_small_bytes = 256;      // CF_EXCHANGE_SMALL_BYTES: bruck below
  uint64_t allreduce_direct_bytes = 8192;   // CF_ALLREDUCE_DIRECT_BYTES: processes > cores
  uint64_t reduce_scatter_direct_bytes = 1024 * 1024;  // CF_REDUCE_SCATTER_DIRECT_BYTES: processes > cores, per block
  // Algorithm parameters.
  uint32_t tree_radix = 4;                  // CF_TREE_RADIX: k of knomial / kary
  uint32_t exchange_window = 8;             // CF_EXCHANGE_WINDOW: windowed exchange
  uint32_t logp_L = 500, logp_o = 150, logp_g = 200;  // CF_LOGP_L / _O / _G (ns)
  // Model-driven selection (engine/selection.h): the files as named and
  // as loaded when the environment was read (a bad file fails cf_init).
  std::string model_file;                   // CF_MODEL: a LogGP model file ("" = none)
  std::shared_ptr<const LogGPModel> model;
  std::string tuning_file;                  // CF_TUNING: a `carflow tune` table ("" = none)
  std::shared_ptr<const TuningTable> tuning;
  ProgressMode progress = ProgressMode::Poll;  // CF_PROGRESS
  // Between processes (transports/ofi).
  std::string plugins;                      // CF_PLUGINS: shared libraries cf_init loads, ':'-separated
  std::string trace_dir;                    // CF_TRACE: write a trace of every CAR there ("" = off)
  uint64_t trace_events = 100000;           // CF_TRACE_EVENTS: CARs recorded per image
  uint64_t schedule_cache_bytes = 4ull << 20;  // CF_SCHEDULE_CACHE_BYTES: per image (0 = no bound)
  uint64_t hang_dump_ms = 0;                // CF_HANG_DUMP_S: report collectives outstanding this long (0 = off)
  std::string ofi_provider;                 // CF_OFI_PROVIDER: "" = shm on one host, tcp;ofi_rxm across
  uint64_t eager_bytes = 16384;             // CF_EAGER_BYTES: eager up to, rendezvous above
  uint32_t ofi_credits = 32;                // CF_OFI_CREDITS: messages in flight per peer node
  uint64_t ofi_unexpected_bytes = 64ull << 20;  // CF_OFI_UNEXPECTED_BYTES: unexpected data held
  uint64_t host_split_bytes = 32 << 10;  // CF_HOST_SPLIT_BYTES: split copies from this size (0: none)
  bool host_rings = true;                   // CF_HOST_RINGS: shared-memory rings for small messages on one host
  uint64_t peer_timeout_ms = 5000;          // CF_PEER_TIMEOUT (seconds in the environment)
  uint64_t exit_timeout_ms = 5000;          // CF_EXIT_TIMEOUT (seconds in the environment)
  uint32_t spin_count = 4000;               // CF_SPIN_COUNT: polls before yielding
  uint32_t yield_count = 200;               // CF_YIELD_COUNT: yields before blocking
  // CF_CHECK (GASNet collectives notes v1.7, "Argument conventions": an explanatory error "if
  // debugging is enabled"): images compare digests of their single-valued
  // arguments on the entry barrier's messages (engine/arg_check.h).
  bool check = false;
  FaultSpec fault;                          // CF_FAULT
  // libcarflow_mpi (api/mpi) reads these through the environment itself (it
  // sits on the C API); their rows make cf_init check them and the docs list them.
  bool mpi_verbose = false;                 // CF_MPI_VERBOSE: say once why the layer steps aside
  bool mpi_report = false;                  // CF_MPI_REPORT: per-collective counts at MPI_Finalize

  // Reads the environment, row by row of knobs(); false with *error naming
  // the variable and rule.
  static bool from_env(Config* out, std::string* error);
  // Every row of knobs() with this configuration's value, for `carflow info`.
  std::vector<KnobValue> describe() const;
  // The table: every CF_* variable, in the order the docs list them.
  static const std::vector<Knob>& knobs();
  // knobs() as api/README.md's markdown table ("| Name | Default | ..."),
  // one line each, header and separator first (`carflow info --markdown`).
  static std::vector<std::string> markdown_table();
  // "CF_ALGO_GATHER_ALL" for CollKind::GatherAll.
  static std::string algo_variable(CollKind kind);
};

// One CF_* variable: one row of the docs' table and of `carflow info`.
struct Knob {
  std::string name;
  std::string fallback;  // the default, as text: show(Config{}), or "(set by cfrun)"
  std::string range;     // the values accepted, as text ("0..2^40", "poll, thread or block")
  std::string doc;       // one line (markdown: `code` allowed)
  // Reads the variable's text (set and not empty) into *c; false with
  // *error = "CF_X='text': expected ...". Empty for the launcher's
  // variables, read by transports/bootstrap, not by Config.
  std::function<bool(const char* text, Config* c, std::string* error)> parse;
  // A rule beyond the range, checked once every variable is read (CF_DATA_ALIGNMENT
  // a power of two, ...); may be empty.
  std::function<bool(const Config& c, std::string* error)> check;
  // The value in c as text (launcher's variables: the environment's).
  std::function<std::string(const Config& c)> show;

  bool set_by_launcher() const { return !parse; }
};

// A row of `carflow info`: a knob and its current value.
struct KnobValue {
  std::string name, value, range, doc;
};

}  // namespace carflow
