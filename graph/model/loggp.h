// A LogGP cost model of carflow DAGs and its discrete-event simulator.
//
// The model: LogGP (Alexandrov, Ionescu, Schauser, Scheiman, "LogGP:
// incorporating long messages into the LogP model", SPAA 1995) with the
// rules of LogGOPSim (Hoefler, Schneider, Lumsdaine, "LogGOPSim: simulating
// large-scale applications in the LogGOPS model", HPDC 2010). Times in ns
// (double); per-byte costs in ns per byte. Parameters (the keys of --model):
//   L      latency of a message on the wire
//   o      CPU overhead of sending or receiving one message
//   g      NIC gap between the starts of two sends
//   G      NIC gap per byte
//   O      CPU overhead per byte
//   S      eager limit in bytes: larger messages take a rendezvous
//   gamma  REDUCE cost per byte of operand
//   beta   COPY cost per byte
// Rules (s = the CAR's bytes; every (s-1) term is 0 when s = 0):
//   - A CAR of s bytes takes the parameters of the last band (LogGPBand)
//     whose `from` is at most s, the main set below the first band.
//   - Every image has one CPU and one NIC. A CAR is ready when its
//     dependencies are done; a receive also needs its message to have
//     arrived. An image's CPU serves ready CARs one at a time, in the order
//     they became ready, ties by CAR id; a CAR holds the CPU until it ends.
//   - SEND starting at t (t >= ready, CPU free, NIC free): the CPU is busy
//     until t + o + (s-1)O, which is when the SEND is done; the NIC is busy
//     until t + g + (s-1)G; the message arrives at t + o + (s-1)G + L.
//   - RECV / RECV_REDUCE: starts at max(arrival, ready, CPU free) and holds
//     the CPU for o + (s-1)O, plus s * gamma for RECV_REDUCE; done then.
//   - Above S bytes a message waits for its receive to be posted (the
//     receive's dependencies done, at time p) and pays one more L + 2o, the
//     handshake: it arrives at max(t, p) + o + (s-1)G + L + (L + 2o). The
//     SEND's CPU and NIC times stay as above.
//   - REDUCE costs s * gamma (s = its left operand's bytes), COPY s * beta,
//     JOIN 0. gamma and beta (here and in RECV_REDUCE) come from the band
//     of max(s, F), F = the largest user buffer of any image (FlatDag::
//     footprint): a piece of a large buffer is not in the cache as a
//     whole small buffer is.
//   - The collective's time: the last CAR done on any image.
// Messages match SEND to receive by (sender, receiver, tag) as
// match_messages (graph/validate.h) does.
//
// Nodes: with images_per_node = K > 0, images [kK, (k+1)K) share node k and
// a message between two images of one node takes L, o, g, G, O and S from
// the intra-node set (keys "intra.L", ...; each defaults to the inter-node
// value); every other message, and every REDUCE and COPY, takes the main
// set. K = 0: every image is its own node.
#pragma once

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/model/flat_dag.h"

namespace carflow {

struct LogGPParams {
  double L = 500;      // ns
  double o = 150;      // ns
  double g = 200;      // ns
  double G = 0.1;      // ns per byte (10 GB/s)
  double O = 0;        // ns per byte
  double S = 16384;    // bytes
  double gamma = 0.25;  // ns per byte
  double beta = 0.1;    // ns per byte
};

// The parameters of messages (and REDUCEs and COPYs) of at least `from`
// bytes, up to the next band: a transport's cost per message steps with
// its paths (rings, streams, copies that leave the caches), which one
// line in s cannot follow. The main set covers sizes below the first band.
struct LogGPBand {
  uint64_t from = 1;
  LogGPParams inter, intra;
  unsigned given = 0, intra_given = 0;  // the keys the band set itself (the writer keeps them)
};

struct LogGPModel {
  LogGPParams inter;  // between nodes; REDUCE and COPY everywhere
  LogGPParams intra;  // between images of one node
  uint32_t images_per_node = 0;
  unsigned intra_given = 0;  // the intra keys set explicitly (the parsers keep it)
  std::vector<LogGPBand> bands;  // ascending `from`; empty: one set for every size
  const LogGPParams& for_pair(uint32_t a, uint32_t b) const {
    return images_per_node != 0 && a / images_per_node == b / images_per_node ? intra : inter;
  }
  // The band of `bytes`, or nullptr for the main set.
  const LogGPBand* band_for(uint64_t bytes) const {
    const LogGPBand* found = nullptr;
    for (const LogGPBand& b : bands) {
      if (bytes < b.from) break;
      found = &b;
    }
    return found;
  }
  // What a message of `bytes` from image a to image b costs.
  const LogGPParams& for_message(uint32_t a, uint32_t b, uint64_t bytes) const {
    const bool same_node = images_per_node != 0 && a / images_per_node == b / images_per_node;
    const LogGPBand* band = bands.empty() ? nullptr : band_for(bytes);
    if (band == nullptr) return same_node ? intra : inter;
    return same_node ? band->intra : band->inter;
  }
  // gamma and beta for a REDUCE or COPY that streams through `bytes`
  // (the simulator passes max(its bytes, FlatDag::footprint)).
  const LogGPParams& for_local(uint64_t bytes) const {
    const LogGPBand* band = bands.empty() ? nullptr : band_for(bytes);
    return band == nullptr ? inter : band->inter;
  }
};

// "L=6,o=2,intra.L=1": sets the named keys of *model (unnamed ones keep
// their values; intra.X keys given nowhere follow X). An empty string sets
// nothing. False with *error naming the key on an unknown key, a value that
// is not a finite number >= 0, or a key given twice.
bool parse_model_string(const std::string& text, LogGPModel* model, std::string* error);
// The JSON form: {"L": 500, "o": 150, ..., "intra": {"L": 100, ...}}; the
// same keys and rules, and anything else (other fields, non-numbers, NaN,
// duplicates, nesting) refused naming the field.
bool parse_model_json(const std::string& text, LogGPModel* model, std::string* error);
// parse_model_json on a file (at most 1 MiB).
bool load_model_file(const std::string& path, LogGPModel* model, std::string* error);
// The JSON form of `model`: every main key, and "intra" with the intra keys
// set explicitly; parse_model_json reads it back to an equal model.
std::string model_to_json(const LogGPModel& model);
// The keys, their defaults and units: for usage text and the docs.
std::string model_keys_help();

// A CAR on the critical path and what made it start when it did.
struct PathStep {
  uint32_t image = 0;
  CarId car = 0;
  CarKind kind = CarKind::Join;
  double start_ns = 0, done_ns = 0;
  // What it waited for: "dependency", "message", "cpu", "nic" or "start".
  const char* waited_for = "start";
};

struct LogGPResult {
  double time_ns = 0;
  uint64_t cars = 0;
  uint64_t messages = 0;
  uint64_t message_bytes = 0;
  uint32_t last_image = 0;              // the image whose CAR finished last
  std::vector<PathStep> critical_path;  // first to last
  // The run stopped at the time limit: a CAR ends after it, so the
  // collective does too; time_ns is then that CAR's end (a lower bound),
  // and last_image and critical_path are not set.
  bool exceeded = false;
};

// Runs `dag` under `model` (the run's state is kept in dag's CARs, so a
// DAG is simulated by one caller at a time). False with *error when the
// DAG cannot complete (a deadlock): the error names the images and the
// CARs that still wait, and on what. `time_limit_ns`: stop as soon as a
// CAR would end after it (result->exceeded), so a candidate that cannot
// beat a known time costs only the part of its run up to that time.
bool simulate_loggp(FlatDag& dag, const LogGPModel& model, LogGPResult* result, std::string* error,
                    double time_limit_ns = HUGE_VAL);

}  // namespace carflow
