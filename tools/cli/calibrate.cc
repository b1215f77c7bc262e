// carflow calibrate: the LogGP parameters (graph/model/loggp.h) of one of
// carflow's transports, measured through the engine itself: small
// generators registered here (the public builder, carflow/generator.h)
// make ping-pongs, message trains and one-sided sends between 2 images, so
// the figures include what every collective's CARs pay (matching, queues,
// completion). Between processes the command starts itself under cfrun.
#include <carflow/generator.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>

#include "engine/reduce_ops.h"
#include "tools/cli/cli.h"

namespace carflow::cli {
namespace {

constexpr uint64_t kSmallBytes = 8;        // L, o, g: one 8-byte message, or a train of them
constexpr uint32_t kTrain = 16;            // messages in a train or round trips in a chain
// Round trips at these sizes set L and G per band of sizes: the cost of
// a message steps where the transport changes paths (rings, streams,
// copies that leave the caches), so each stretch between two of them gets
// its own line. The first is the 8-byte round trip. sweep_points() adds
// the eager limit S and S + 1.
constexpr uint64_t kPoints[] = {kSmallBytes, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20};
constexpr uint64_t kLoopBytes = 256 << 10;  // gamma and beta: per-byte loops over this much
constexpr uint32_t kRounds = 3;             // sweeps of the round trips (measure_image)

// One measurement's generators: `count` messages per call (round trips of
// a chain, pieces of a train or of the one-sided sends).
const uint32_t kOne = 1, kMany = kTrain;

cf_buf_t part(int space, uint64_t offset, uint64_t length) { return cf_buf_t{space, 0, offset, length}; }

// Permute on 2 images, `count` round trips in a chain: image 0 sends and
// waits for the reply before sending again. The last replies leave each
// image's dst holding its peer's src, as permute requires.
int chain_generator(const cf_gen_spec_t* spec, cf_dag_t* dag, void* arg) {
  if (spec->images != 2) return CF_ERR_BAD_ARG;
  const uint32_t count = *static_cast<const uint32_t*>(arg);
  const uint32_t peer = 1 - spec->image;
  cf_car_t last = CF_CAR_NONE;
  for (uint32_t r = 0; r < count; ++r) {
    const size_t ndeps = last == CF_CAR_NONE ? 0 : 1;
    if (spec->image == 0) {
      const cf_car_t sent = cf_dag_send(dag, peer, part(CF_SPACE_SRC, 0, spec->nbytes), &last, ndeps);
      last = cf_dag_recv(dag, peer, part(CF_SPACE_DST, 0, spec->nbytes), &sent, 1);
    } else {
      const cf_car_t got = cf_dag_recv(dag, peer, part(CF_SPACE_DST, 0, spec->nbytes), &last, ndeps);
      last = cf_dag_send(dag, peer, part(CF_SPACE_SRC, 0, spec->nbytes), &got, 1);
    }
  }
  return CF_OK;
}

// Permute on 2 images as two trains of `count` pieces: image 0's train
// goes out, image 1 answers with its own once all of it has arrived.
int train_generator(const cf_gen_spec_t* spec, cf_dag_t* dag, void* arg) {
  const uint32_t count = *static_cast<const uint32_t*>(arg);
  if (spec->images != 2 || spec->nbytes % count != 0) return CF_ERR_BAD_ARG;
  const uint64_t piece = spec->nbytes / count;
  const uint32_t peer = 1 - spec->image;
  std::vector<cf_car_t> got;
  for (uint32_t i = 0; i < count && spec->image == 0; ++i) {
    cf_dag_send(dag, peer, part(CF_SPACE_SRC, i * piece, piece), nullptr, 0);
  }
  for (uint32_t i = 0; i < count; ++i) {
    got.push_back(cf_dag_recv(dag, peer, part(CF_SPACE_DST, i * piece, piece), nullptr, 0));
  }
  if (spec->image == 1) {
    const cf_car_t all = cf_dag_join(dag, got.data(), got.size());
    for (uint32_t i = 0; i < count; ++i) cf_dag_send(dag, peer, part(CF_SPACE_SRC, i * piece, piece), &all, 1);
  }
  return CF_OK;
}

// Broadcast from image 0 on 2 images in `count` pieces: the root's part
// is its sends alone (and its own copy), so its time is the sender's cost.
int sends_generator(const cf_gen_spec_t* spec, cf_dag_t* dag, void* arg) {
  const uint32_t count = *static_cast<const uint32_t*>(arg);
  if (spec->images != 2 || spec->root != 0 || spec->nbytes % count != 0) return CF_ERR_BAD_ARG;
  const uint64_t piece = spec->nbytes / count;
  if (spec->image == 0) cf_dag_copy(dag, part(CF_SPACE_DST, 0, spec->nbytes), part(CF_SPACE_SRC, 0, spec->nbytes), nullptr, 0);
  for (uint32_t i = 0; i < count; ++i) {
    const cf_buf_t b = part(spec->image == 0 ? CF_SPACE_SRC : CF_SPACE_DST, i * piece, piece);
    if (spec->image == 0) {
      cf_dag_send(dag, 1, b, nullptr, 0);
    } else {
      cf_dag_recv(dag, 0, b, nullptr, 0);
    }
  }
  return CF_OK;
}

// Permute on 2 images, both directions at once: each image sends its
// src and receives its peer's, nothing waiting on anything. Against the
// round trips it tells what a message costs the CPUs (O) from what it
// costs on the way (G): see fit().
int swap_generator(const cf_gen_spec_t* spec, cf_dag_t* dag, void*) {
  if (spec->images != 2) return CF_ERR_BAD_ARG;
  const uint32_t peer = 1 - spec->image;
  cf_dag_send(dag, peer, part(CF_SPACE_SRC, 0, spec->nbytes), nullptr, 0);
  cf_dag_recv(dag, peer, part(CF_SPACE_DST, 0, spec->nbytes), nullptr, 0);
  return CF_OK;
}

struct Generator {
  int kind;
  const char* name;
  cf_generator_fn fn;
  const uint32_t* count;
};
constexpr Generator kGenerators[] = {
    {CF_KIND_PERMUTE, "calibrate_chain_1", chain_generator, &kOne},
    {CF_KIND_PERMUTE, "calibrate_train_1", train_generator, &kOne},
    {CF_KIND_PERMUTE, "calibrate_train_16", train_generator, &kMany},
    {CF_KIND_BROADCAST, "calibrate_sends_1", sends_generator, &kOne},
    {CF_KIND_BROADCAST, "calibrate_sends_16", sends_generator, &kMany},
    {CF_KIND_PERMUTE, "calibrate_swap", swap_generator, &kOne},
};

std::string size_name(uint64_t bytes) {
  if (bytes >= (1u << 20) && bytes % (1u << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

double now_ns() {
  return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The 10th percentile: on a shared machine most of the spread is time the
// images spent descheduled, which the model does not describe.
double low_percentile(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + v.size() / 10, v.end());
  return v[v.size() / 10];
}

struct Run {
  uint32_t iters = 2000;
  std::vector<uint8_t> src, dst;
  std::string error;  // image 0's first failure
  // Image 0's results, ns per call.
  double chain1 = 0, train1 = 0, train16 = 0, sends1 = 0, sends16 = 0;
  std::vector<uint64_t> points;    // the sizes swept (sweep_points)
  std::vector<double> round_trip;  // at points
  std::vector<double> swap;        // both directions at once, at points
};

// kPoints with the eager limit S and S + 1 among them: the model charges a
// message above S a second L + 2o (the handshake), so a stretch whose ends
// lie on both sides of S fits one line to two protocols, and the band
// below S comes out wrong at its own lower end. With S and S + 1 measured,
// every stretch lies on one side (the band from S + 1 starts the
// rendezvous; no band starts at S).
std::vector<uint64_t> sweep_points(uint64_t S) {
  std::vector<uint64_t> points(std::begin(kPoints), std::end(kPoints));
  if (S >= kSmallBytes && S < kPoints[std::size(kPoints) - 1]) points.push_back(S), points.push_back(S + 1);
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  return points;
}

// `iters` calls of one generator's collective (after a tenth as warm-up);
// the 10th percentile of the time per call on this image. Both images make the same calls.
double time_calls(cf_image_t me, Run* run, const char* algorithm, int kind, uint64_t nbytes, uint32_t iters) {
  const int flags = CF_COLL_IN_NOSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  const cf_image_t perm[2] = {1, 0};
  std::vector<uint8_t> src(nbytes, static_cast<uint8_t>(me + 1)), dst(nbytes);
  if (cf_coll_set_algorithm(kind, algorithm) != CF_OK) return run->error = cf_last_error(), 0;
  std::vector<double> times;
  const uint32_t warm = iters / 10 + 1;
  for (uint32_t i = 0; i < warm + iters; ++i) {
    const double t0 = now_ns();
    const int rc = kind == CF_KIND_PERMUTE ? cf_coll_permute(CF_TEAM_ALL, dst.data(), src.data(), nbytes, perm, flags)
                                           : cf_coll_broadcast(CF_TEAM_ALL, dst.data(), 0, src.data(), nbytes, flags);
    const double t1 = now_ns();
    // The one-sided sends: keep the root from running ahead of its peer.
    if (rc == CF_OK && kind == CF_KIND_BROADCAST) cf_coll_barrier(CF_TEAM_ALL, CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS);
    if (rc != CF_OK) return run->error = std::string(algorithm) + ": " + cf_last_error(), 0;
    if (i >= warm) times.push_back(t1 - t0);
  }
  if (dst[0] != static_cast<uint8_t>(kind == CF_KIND_PERMUTE ? 2 - me : 1)) {
    run->error = std::string(algorithm) + ": wrong data received";
  }
  cf_coll_set_algorithm(kind, nullptr);
  return low_percentile(std::move(times));
}

void measure_image(cf_image_t me, void* arg) {
  Run* run = static_cast<Run*>(arg);
  const uint32_t n = run->iters;
  const uint64_t train_bytes = kSmallBytes * kTrain;
  Run r;
  r.points = run->points;
  const size_t points = r.points.size();
  r.round_trip.resize(points);
  r.swap.resize(points);
  r.chain1 = time_calls(me, &r, "calibrate_chain_1", CF_KIND_PERMUTE, kSmallBytes, n);
  r.train1 = time_calls(me, &r, "calibrate_train_1", CF_KIND_PERMUTE, train_bytes, n);
  r.train16 = time_calls(me, &r, "calibrate_train_16", CF_KIND_PERMUTE, train_bytes, n / 4 + 1);
  r.sends1 = time_calls(me, &r, "calibrate_sends_1", CF_KIND_BROADCAST, train_bytes, n);
  r.sends16 = time_calls(me, &r, "calibrate_sends_16", CF_KIND_BROADCAST, train_bytes, n / 4 + 1);
  for (size_t i = 0; i < points; ++i) {
    r.round_trip[i] = i == 0 ? r.chain1 : std::numeric_limits<double>::infinity();
    r.swap[i] = std::numeric_limits<double>::infinity();
  }
  // The sweep in rounds, each point keeping its lowest figure: a stall of
  // the machine (another job, a descheduled image) then spoils one round
  // of one size, not the line between two sizes.
  for (uint32_t round = 0; round < kRounds; ++round) {
    for (size_t i = 0; i < points; ++i) {
      const uint64_t bytes = r.points[i];
      // Fewer calls of the large sizes: their spread is small against their time.
      const uint32_t calls = bytes <= (16u << 10) ? n : bytes <= (256u << 10) ? n / 10 + 1 : n / 40 + 1;
      const double t = time_calls(me, &r, "calibrate_chain_1", CF_KIND_PERMUTE, bytes, calls / kRounds + 1);
      r.round_trip[i] = std::min(r.round_trip[i], t);
      const double both = time_calls(me, &r, "calibrate_swap", CF_KIND_PERMUTE, bytes, calls / kRounds + 1);
      r.swap[i] = std::min(r.swap[i], both);
    }
  }
  if (me == 0) {
    r.iters = n;
    *run = std::move(r);
  }
}

// ns per byte of `body` over arrays of `bytes`, the 10th percentile of
// `reps` samples; a sample repeats the body until it has covered at least
// kLoopBytes, so small arrays are timed over more than a clock tick.
template <typename Body>
double per_byte(uint32_t reps, uint64_t bytes, Body body) {
  const uint64_t repeat = std::max<uint64_t>(1, kLoopBytes / bytes);
  std::vector<double> times;
  for (uint32_t i = 0; i < reps + 2; ++i) {
    const double t0 = now_ns();
    for (uint64_t k = 0; k < repeat; ++k) body();
    if (i >= 2) times.push_back((now_ns() - t0) / static_cast<double>(bytes * repeat));
  }
  return low_percentile(std::move(times));
}

// gamma: the engine's own SUM kernel for elements of `type` over arrays of
// `bytes`, dst = a + b in three arrays, as a RECV_REDUCE combines an
// incoming message with its source into its destination.
double reduce_per_byte(int type, size_t elem_size, uint64_t bytes, uint32_t reps, std::string* error) {
  ReduceOp op;
  if (!resolve_reduce_op(CF_BUILTIN(CF_OP_SUM, type), 0, elem_size, {}, &op, error)) return 0;
  std::vector<uint8_t> a(bytes, 0), b(bytes, 0), dst(bytes);
  return per_byte(reps, bytes, [&] {
    op.apply(dst.data(), a.data(), b.data(), bytes);
    asm volatile("" : : "r"(dst.data()) : "memory");  // keep the result
  });
}

// beta: one memcpy of `bytes`.
double copy_per_byte(uint64_t bytes, uint32_t reps) {
  std::vector<uint8_t> a(bytes, 1), b(bytes);
  return per_byte(reps, bytes, [&] {
    std::memcpy(b.data(), a.data(), bytes);
    asm volatile("" : : "r"(b.data()) : "memory");  // keep the copy
  });
}

// gamma (the slower SUM of float and double, so reductions are not
// under-predicted) and beta over arrays of `bytes`.
struct LocalCosts {
  double gamma_float = 0, gamma_double = 0, gamma = 0, beta = 0;
};
LocalCosts local_costs(uint64_t bytes, uint32_t reps, std::string* error) {
  LocalCosts c;
  c.gamma_float = reduce_per_byte(CF_DT_FLOAT, 4, bytes, reps, error);
  c.gamma_double = reduce_per_byte(CF_DT_DOUBLE, 8, bytes, reps, error);
  c.gamma = std::max(c.gamma_float, c.gamma_double);
  c.beta = copy_per_byte(bytes, reps);
  return c;
}

// Starts this command again as 2 processes under cfrun (beside this
// binary: bazel-bin/tools/cfrun_bin, or an installed cfrun) with the
// transport's environment; returns only on failure.
int relaunch_under_cfrun(const std::string& transport, int argc, char** argv) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return fail("calibrate: cannot find this program (/proc/self/exe)");
  self[n] = '\0';
  const std::string dir = std::filesystem::path(self).parent_path();
  std::string cfrun;
  for (const char* name : {"/cfrun_bin", "/cfrun"}) {
    if (access((dir + name).c_str(), X_OK) == 0) cfrun = dir + name;
  }
  if (cfrun.empty()) return fail("--transport " + transport + ": needs cfrun beside " + self + " (bazel build //tools:cfrun_bin)");
  if (transport == "tcp") {
    setenv("CF_OFI_PROVIDER", "tcp;ofi_rxm", 1);
    setenv("CF_HOST_RINGS", "0", 1);
  }
  std::vector<std::string> words = {cfrun, "-n", "2", "--images", "1", "--timeout", "300", self};
  for (int i = 1; i < argc; ++i) words.push_back(argv[i]);
  std::vector<char*> list;
  for (std::string& w : words) list.push_back(w.data());
  list.push_back(nullptr);
  execv(cfrun.c_str(), list.data());
  return fail("calibrate: cannot start " + cfrun + ": " + std::strerror(errno));
}

// L and G of one stretch of sizes [a, b]: the model's one-way time of a
// message of s bytes is k(L + 2o) + (s-1)G, k = 1 up to S bytes and 2 above
// (the rendezvous), and a round trip is twice that; the line through both
// ends' measured round trips. Where that line needs a negative L (a
// steep stretch: the copies leave the caches) L is 0 and the line goes
// through one end: the lower one for a band (`through_lower`), whose
// sizes start there, so a collective's power-of-two messages, which land
// on band starts, are priced as measured, and a message is never priced
// above two of half its size; where it needs a negative G (noise), G is 0.
// True when the stretch was steep.
// k (1, or 2 above S: the handshake) and a size's one-way time less its
// k * 2o, which the model's line in s gives as k L + (s-1)G.
double handshakes(double S, uint64_t s) { return static_cast<double>(s) > S ? 2 : 1; }
double line_value(double S, double o, uint64_t s, double round_trip) {
  return round_trip / 2 - 2 * handshakes(S, s) * o;
}

bool fit_stretch(double S, double o, uint64_t a, double ra, uint64_t b, double rb, bool through_lower, double* L,
                 double* G) {
  const double ka = handshakes(S, a), kb = handshakes(S, b);
  const double ya = line_value(S, o, a, ra), yb = line_value(S, o, b, rb);
  const double xa = static_cast<double>(a - 1), xb = static_cast<double>(b - 1);
  const double det = ka * xb - kb * xa;
  double l = det != 0 ? (ya * xb - yb * xa) / det : 0, g = det != 0 ? (ka * yb - kb * ya) / det : 0;
  const bool steep = l < 0;
  if (steep) l = 0, g = through_lower && xa > 0 ? ya / xa : yb / xb;
  if (g < 0) g = 0, l = yb / kb;
  *L = std::max(0.0, l), *G = std::max(0.0, g);
  return steep;
}

// The stretch [a, b]'s per-byte cost k1 (fit_stretch's G: a message
// alone, G + O in LogGP) split into G and O by the swaps' slope k2 over the
// same stretch. Under LogGP's rules a message alone costs L + 2o + (s-1)(G
// + O), and two at once, one each way, about max(G, O) + O per byte: each
// image's CPU pays O for its own send and then for its receive. So k2 > k1
// means O > G: O = k2 / 2 (at most k1), G = k1 - O; otherwise both
// directions go as fast as one, the bytes cost no CPU that matters, O = 0.
// Where one message is copied by both processes at once (split copies)
// and two are not, k2 reaches 2 k1 and the model gets O = k1, G = 0.
void split_cpu(double k1, uint64_t a, double swap_a, uint64_t b, double swap_b, double* G, double* O) {
  const double k2 = (swap_b - swap_a) / static_cast<double>(b - a);
  *O = k2 > k1 && k1 > 0 ? std::min(k2 / 2, k1) : 0;
  *G = k1 - *O;
}

// The fit (graph/README.md, "Calibration"): in LogGP an 8-byte round trip
// is 2(L + 2o) (one call: L also carries the call's own cost, which every
// collective pays); a train's messages follow each other at max(o, g);
// between two measured sizes L and G follow the line through their round
// trips, a band per stretch above the first.
LogGPModel fit(const Run& r, double S, double gamma, double beta) {
  LogGPModel m;
  LogGPParams& p = m.inter;
  p.o = std::max(1.0, (r.sends16 - r.sends1) / (kTrain - 1));
  p.g = std::max(0.0, (r.train16 - r.train1) / (2.0 * (kTrain - 1)));
  p.L = std::max(0.0, r.round_trip[0] / 2 - 2 * p.o);
  p.G = 0;
  // A byte is never free: where noise leaves 8 B and 1 KiB level, the
  // main line runs from 8 B to the first larger size that rises.
  const std::vector<uint64_t>& x = r.points;
  const size_t points = x.size();
  size_t main_to = 0;  // the main line runs from 8 B to x[main_to]
  while (p.G <= 0 && main_to + 1 < points) {
    ++main_to;
    fit_stretch(S, p.o, x[0], r.round_trip[0], x[main_to], r.round_trip[main_to], false, &p.L, &p.G);
  }
  split_cpu(p.G, x[0], r.swap[0], x[main_to], r.swap[main_to], &p.G, &p.O);
  p.S = S;
  p.gamma = gamma;
  p.beta = beta;
  m.intra = p;
  for (size_t i = 1; i + 1 < points; ++i) {
    // The one-byte stretch [S, S + 1] is the handshake's step, which the
    // model's rule already charges: the band below runs through S.
    if (x[i + 1] == x[i] + 1) continue;
    LogGPBand band;
    band.from = x[i];
    band.inter = m.bands.empty() ? p : m.bands.back().inter;
    const bool steep = fit_stretch(S, p.o, x[i], r.round_trip[i], x[i + 1], r.round_trip[i + 1], true,
                                   &band.inter.L, &band.inter.G);
    split_cpu(band.inter.G, x[i], r.swap[i], x[i + 1], r.swap[i + 1], &band.inter.G, &band.inter.O);
    band.intra = band.inter;
    band.given = 1u << 0 | 1u << 3 | 1u << 4;  // L, G and O (loggp_params.cc's key order)
    m.bands.push_back(band);
    // A steep last stretch priced from its lower end: one more band from
    // the largest size measured, priced as measured there and in proportion
    // above it, with the stretch's share of CPU per byte.
    if (steep && i + 2 == points && x[i + 1] > x[i] + 1) {
      LogGPBand top = band;
      top.from = x[i + 1];
      const double per_byte =
          std::max(0.0, line_value(S, p.o, x[i + 1], r.round_trip[i + 1])) / static_cast<double>(x[i + 1] - 1);
      const double total = band.inter.G + band.inter.O;
      top.inter.L = 0;
      top.inter.O = total > 0 ? per_byte * band.inter.O / total : 0;
      top.inter.G = per_byte - top.inter.O;
      top.intra = top.inter;
      m.bands.push_back(top);
    }
  }
  return m;
}

}  // namespace

int cmd_calibrate(const Args& args, int argc, char** argv) {
  const std::string transport = args.count("transport") ? args.at("transport") : "inproc";
  if (transport != "inproc" && transport != "shm" && transport != "tcp") {
    return fail("--transport: '" + transport + "': expected inproc, shm or tcp");
  }
  uint64_t iters = 0;
  std::string error;
  if (!get_uint(args, "iters", 2000, 10, 10000000, &iters, &error)) return fail(error);
  const bool launched = std::getenv("CF_NODES") != nullptr;
  if (transport != "inproc" && !launched) return relaunch_under_cfrun(transport, argc, argv);
  if (transport == "inproc" && launched) return fail("--transport inproc: run without cfrun (one process, 2 image threads)");
  for (const Generator& g : kGenerators) {
    if (cf_generator_register(g.kind, g.name, g.fn, const_cast<uint32_t*>(g.count), 0, "calibrate") != CF_OK) {
      return fail(cf_last_error());
    }
  }
  if (cf_init(&argc, &argv) != CF_OK) return 2;
  cf_set_error_mode(CF_ERRORS_RETURN);
  if (cf_nodes() != (transport == "inproc" ? 1u : 2u)) {
    cf_finalize();
    return fail("calibrate: --transport " + transport + " needs " + (transport == "inproc" ? "1 process" : "2 processes") +
                ", got " + std::to_string(cf_nodes()));
  }
  Config config;
  Config::from_env(&config, &error);  // cf_init has checked it
  const uint64_t eager = transport == "inproc" ? config.inproc_eager_bytes : config.eager_bytes;
  Run run;
  run.iters = static_cast<uint32_t>(iters);
  run.points = sweep_points(eager);
  const int rc = cf_run_images(transport == "inproc" ? 2 : 1, nullptr, 0, measure_image, &run);
  const cf_node_t node = cf_mynode();
  cf_finalize();
  if (rc != CF_OK || !run.error.empty()) return fail("calibrate: " + (run.error.empty() ? std::string(cf_strerror(rc)) : run.error));
  if (node != 0) return 0;
  const uint32_t reps = static_cast<uint32_t>(std::max<uint64_t>(5, iters / 40));
  const LocalCosts main_costs = local_costs(kLoopBytes, reps, &error);
  const double S = static_cast<double>(eager);
  LogGPModel model = fit(run, S, main_costs.gamma, main_costs.beta);
  // Each band's gamma and beta over arrays of its own lower size: a
  // collective's REDUCEs and COPYs take the band of its largest buffer
  // (graph/model/loggp.h), and arrays past the caches cost several times
  // what the main set's, over arrays that stay in them, does.
  for (LogGPBand& band : model.bands) {
    const LocalCosts c = local_costs(band.from, reps, &error);
    band.inter.gamma = band.intra.gamma = c.gamma;
    band.inter.beta = band.intra.beta = c.beta;
    band.given |= 1u << 6 | 1u << 7;  // gamma and beta (loggp_params.cc's key order)
  }
  const LogGPParams& p = model.inter;
  std::printf("transport %s, 2 images, 10th percentiles of %llu calls (noisy when the machine is shared)\n",
              transport.c_str(), static_cast<unsigned long long>(iters));
  std::printf("  round trips (one call each):");
  const size_t points = run.points.size();
  for (size_t i = 0; i < points; ++i) {
    std::printf(" %s %.0f ns%s", size_name(run.points[i]).c_str(), run.round_trip[i], i + 1 < points ? "," : "\n");
  }
  std::printf("  L     %10.2f ns     latency (round trip / 2 - 2o)\n", p.L);
  std::printf("  o     %10.2f ns     sender's cost per message (one-sided train of %u)\n", p.o, kTrain);
  std::printf("  g     %10.2f ns     gap between messages of a train\n", p.g);
  std::printf("  swaps (both ways at once):");
  for (size_t i = 0; i < points; ++i) {
    std::printf(" %s %.0f ns%s", size_name(run.points[i]).c_str(), run.swap[i], i + 1 < points ? "," : "\n");
  }
  std::printf("  G     %10.4f ns/B   per byte on the way (round trips from %s, less O)\n", p.G,
              size_name(run.points[0]).c_str());
  std::printf("  O     %10.4f ns/B   per byte of CPU at each end (swaps against round trips)\n", p.O);
  for (const LogGPBand& band : model.bands) {
    std::printf("  from %-6s L %10.2f ns, G %.4f ns/B, O %.4f ns/B, gamma %.4f ns/B, beta %.4f ns/B\n",
                size_name(band.from).c_str(), band.inter.L, band.inter.G, band.inter.O, band.inter.gamma,
                band.inter.beta);
  }
  std::printf("  S     %10.0f B      eager limit (the transport's setting)\n", p.S);
  std::printf("  gamma %10.4f ns/B   SUM: float %.4f, double %.4f (the model keeps the larger)\n", p.gamma,
              main_costs.gamma_float, main_costs.gamma_double);
  std::printf("  beta  %10.4f ns/B   memcpy of %llu KiB (the bands': over arrays of their own lower size)\n",
              p.beta, static_cast<unsigned long long>(kLoopBytes >> 10));
  if (args.count("out")) {
    std::ofstream file(args.at("out"), std::ios::binary | std::ios::trunc);
    file << model_to_json(model);
    if (!file.flush()) return fail("--out: " + args.at("out") + ": cannot write");
    std::printf("wrote %s\n", args.at("out").c_str());
  }
  return 0;
}

}  // namespace carflow::cli
