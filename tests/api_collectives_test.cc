// Conformance of the collectives through the public C API only: every result is
// checked against a sequential reference computed on the main thread, over
// algorithms x image counts x sizes x roots.
//
// Image threads never assert (a throwing REQUIRE would end the thread and
// doctest's INFO context is per thread): they record what they saw in an
// ImageLog, and the main thread reports it after cf_run_images returns.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "tests/test_util.h"

namespace {

using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::Mat2;
using carflow_test::matrix_operand;
using carflow_test::pattern;
using carflow_test::run_images;


constexpr size_t kNotFound = static_cast<size_t>(-1);

size_t first_difference(const void* got, const void* want, size_t nbytes) {
  if (std::memcmp(got, want, nbytes) == 0) return kNotFound;
  const auto* g = static_cast<const uint8_t*>(got);
  const auto* w = static_cast<const uint8_t*>(want);
  for (size_t i = 0; i < nbytes; ++i) {
    if (g[i] != w[i]) return i;
  }
  return kNotFound;
}

uint64_t mix(uint64_t x) {  // splitmix64 finalizer
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// {0, P-1, P/2} without repeats.
std::vector<uint32_t> roots_for(uint32_t P) {
  std::vector<uint32_t> roots;
  for (uint32_t r : {0u, P - 1, P / 2}) {
    if (std::find(roots.begin(), roots.end(), r) == roots.end()) roots.push_back(r);
  }
  return roots;
}

constexpr uint8_t kSentinel = 0xA5;
constexpr size_t kGuardBytes = 16;

// ---- broadcast ---------------------------------------------------------------

TEST_CASE("broadcast gives every image, root included, the root's bytes for every algorithm, P, size and root") {
  const std::vector<size_t> all_sizes = {1, 7, 64, 4096, 65537, size_t{1} << 20, size_t{4} << 20};
  for (const char* algorithm : {"flat", "binomial"}) {
    for (uint32_t P : {1u, 2u, 3u, 8u, 16u}) {
      INFO("algorithm: " << std::string(algorithm));
      CAPTURE(P);
      std::vector<size_t> sizes;
      for (size_t n : all_sizes) {
        if (n < (size_t{4} << 20) || P <= 8) sizes.push_back(n);
      }
      const std::vector<uint32_t> roots = roots_for(P);
      std::vector<std::vector<std::vector<uint8_t>>> expected(sizes.size());
      for (size_t s = 0; s < sizes.size(); ++s) {
        for (uint32_t root : roots) expected[s].push_back(pattern(sizes[s] * 31 + root, sizes[s]));
      }
      ImageLog log(P);
      const int status = run_images(P, [&](cf_image_t me) {
        const int set = cf_coll_set_algorithm(CF_KIND_BROADCAST, algorithm);
        log.expect(me, set == CF_OK, [&] { return cat("cf_coll_set_algorithm: ", cf_last_error()); });
        if (set != CF_OK) return;
        for (size_t s = 0; s < sizes.size(); ++s) {
          const size_t n = sizes[s];
          for (size_t r = 0; r < roots.size(); ++r) {
            const uint32_t root = roots[r];
            const size_t offset = r % 2 == 0 ? 0 : 3;  // broadcast assumes no alignment
            std::vector<uint8_t> buffer(offset + n + kGuardBytes, kSentinel);
            uint8_t* dst = buffer.data() + offset;
            std::vector<uint8_t> src;
            if (me == root) src = expected[s][r];
            auto params = [&] { return cat("nbytes=", n, " root=", root, " dst offset=", offset); };
            const int rc = cf_coll_broadcast(CF_TEAM_ALL, dst, root, me == root ? src.data() : nullptr,
                                             n, kAllLocal);
            log.expect(me, rc == CF_OK, [&] {
              return cat(params(), ": status ", cf_strerror(rc), " (", cf_last_error(), ")");
            });
            const size_t diff = first_difference(dst, expected[s][r].data(), n);
            log.expect(me, diff == kNotFound, [&] {
              return cat(params(), ": dst differs from the root's src first at byte ", diff,
                         " (expected ", int(expected[s][r][diff]), ", got ", int(dst[diff]), ")");
            });
            bool guards_intact = true;
            for (size_t i = 0; i < offset; ++i) guards_intact &= buffer[i] == kSentinel;
            for (size_t i = offset + n; i < buffer.size(); ++i) guards_intact &= buffer[i] == kSentinel;
            log.expect(me, guards_intact, [&] { return cat(params(), ": bytes outside dst were written"); });
          }
        }
      });
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == P * (1 + 3 * sizes.size() * roots.size()));
    }
  }
}

// GASNet collectives notes v1.7, "Synchronization modes": IN_NOSYNC lets data move as soon as any
// image enters, so every dst is prepared before a barrier; OUT_NOSYNC makes
// memory valid only once every image has synced, OUT_MYSYNC when this image
// has, OUT_ALLSYNC on every image as soon as any image has.
TEST_CASE("broadcast gives correct data under every combination of IN and OUT sync modes") {
  constexpr uint32_t P = 4;
  const int in_modes[] = {CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC};
  const int out_modes[] = {CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC};
  const char* in_names[] = {"IN_NOSYNC", "IN_MYSYNC", "IN_ALLSYNC"};
  const char* out_names[] = {"OUT_NOSYNC", "OUT_MYSYNC", "OUT_ALLSYNC"};
  const std::vector<size_t> sizes = {64, 65537};
  const std::vector<uint32_t> roots = {0, P - 1};
  for (const char* algorithm : {"flat", "binomial"}) {
    INFO("algorithm: " << std::string(algorithm));
    std::vector<std::vector<uint8_t>> dst(P);  // shared: OUT_ALLSYNC images read each other's
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      cf_coll_set_algorithm(CF_KIND_BROADCAST, algorithm);
      const int fence = kAllLocal;
      for (int in = 0; in < 3; ++in) {
        for (int out = 0; out < 3; ++out) {
          for (size_t n : sizes) {
            for (uint32_t root : roots) {
              const std::vector<uint8_t> want = pattern(n + root + 10 * in + 100 * out, n);
              auto params = [&] {
                return cat(in_names[in], "|", out_names[out], " nbytes=", n, " root=", root);
              };
              dst[me].assign(n, kSentinel);
              std::vector<uint8_t> src = want;
              cf_coll_barrier(CF_TEAM_ALL, fence);  // every dst is ready
              const int flags = in_modes[in] | out_modes[out] | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
              const cf_coll_handle_t h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst[me].data(), root,
                                                              src.data(), n, flags);
              log.expect(me, h != CF_COLL_INVALID_HANDLE,
                         [&] { return cat(params(), ": rejected: ", cf_last_error()); });
              const int rc = cf_coll_wait_sync(h);
              log.expect(me, rc == CF_OK, [&] { return cat(params(), ": wait_sync ", cf_strerror(rc)); });
              if (out_modes[out] == CF_COLL_OUT_ALLSYNC) {
                for (uint32_t other = 0; other < P; ++other) {
                  log.expect(me, dst[other] == want, [&] {
                    return cat(params(), ": after this image synced, image ", other,
                               "'s dst does not hold the data yet");
                  });
                }
              } else if (out_modes[out] == CF_COLL_OUT_MYSYNC) {
                log.expect(me, dst[me] == want,
                           [&] { return cat(params(), ": dst wrong right after this image's sync"); });
              }
              cf_coll_barrier(CF_TEAM_ALL, fence);  // every image has synced
              log.expect(me, dst[me] == want,
                         [&] { return cat(params(), ": dst wrong after every image synced"); });
              cf_coll_barrier(CF_TEAM_ALL, fence);  // nobody reads dst any more
            }
          }
        }
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
    // Per image and case: handle, wait_sync, the OUT-mode checks (0, 1 or P), the final check.
    CHECK(log.checks() == P * 3 * sizes.size() * roots.size() * ((3 + 0) + (3 + 1) + (3 + P)));
  }
}

// ---- barrier -----------------------------------------------------------------

TEST_CASE("barrier returns on an image only after every image has entered") {
  constexpr int kRounds = 30;
  for (uint32_t P : {1u, 2u, 3u, 8u, 16u}) {
    CAPTURE(P);
    std::vector<std::atomic<int>> entered(P);
    for (auto& e : entered) e.store(-1);
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      cf_coll_set_algorithm(CF_KIND_BARRIER, "dissemination");
      for (int round = 0; round < kRounds; ++round) {
        // One image arrives late each round (a perturbation, not synchronization).
        if (me == static_cast<uint32_t>(round) % P) {
          for (int i = 0; i < 200; ++i) std::this_thread::yield();
        }
        entered[me].store(round);
        int rc;
        if (round % 2 == 0) {
          rc = cf_coll_barrier(CF_TEAM_ALL, kAllLocal);
        } else {
          rc = cf_coll_wait_sync(cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal));
        }
        log.expect(me, rc == CF_OK, [&] { return cat("round ", round, ": ", cf_strerror(rc)); });
        for (uint32_t other = 0; other < P; ++other) {
          const int seen = entered[other].load();
          log.expect(me, seen >= round, [&] {
            return cat("round ", round, ": barrier returned before image ", other,
                       " entered (it is at round ", seen, ")");
          });
        }
      }
    });
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == size_t{P} * kRounds * (1 + P));
  }
}

TEST_CASE("a barrier does not complete while one image has not entered it") {
  for (uint32_t P : {2u, 3u, 8u}) {
    CAPTURE(P);
    std::atomic<bool> latecomer_may_enter{false};
    ImageLog log(P);
    const int status = run_images(P, [&](cf_image_t me) {
      if (me == P - 1) {
        latecomer_may_enter.wait(false);
        log.expect(me, cf_coll_barrier(CF_TEAM_ALL, kAllLocal) == CF_OK, [] { return "barrier failed"; });
        return;
      }
      const cf_coll_handle_t h = cf_coll_barrier_nb(CF_TEAM_ALL, kAllLocal);
      if (me == 0) {  // the only image that polls before the latecomer may enter
        int not_ready = 0;
        for (int i = 0; i < 100; ++i) not_ready += cf_coll_try_sync(h) == CF_NOT_READY;
        log.expect(me, not_ready == 100, [&] {
          return cat("try_sync returned something other than CF_NOT_READY ", 100 - not_ready,
                     " times while image ", P - 1, " had not entered");
        });
        latecomer_may_enter.store(true);
        latecomer_may_enter.notify_all();
      }
      log.expect(me, cf_coll_wait_sync(h) == CF_OK, [] { return "wait_sync failed"; });
    });
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == P + 1);
  }
}

// ---- allreduce: SUM ------------------------------------------------------------

const char* const kAllreduceAlgorithms[] = {"recursive_doubling", "ring", "rabenseifner", "reduce_bcast"};

int64_t sum_operand_int64(uint32_t image, size_t j) {
  return (int64_t{image} + 1) * 1000003 - static_cast<int64_t>(j % 4099) * 977;
}
// Small integers: every partial sum is exact, whatever the order.
double sum_operand_double(uint32_t image, size_t j) {
  return static_cast<double>(static_cast<int64_t>((image * 131 + j * 17) % 2001) - 1000);
}

TEST_CASE("allreduce SUM on int64 and double equals the sequential sum for every algorithm, P and count") {
  for (const char* algorithm : kAllreduceAlgorithms) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u, 16u}) {
      INFO("algorithm: " << std::string(algorithm));
      CAPTURE(P);
      std::vector<size_t> counts = {1, 3, 1000};
      if (P <= 8) counts.push_back(262144);
      std::vector<std::vector<int64_t>> want_i64(counts.size());
      std::vector<std::vector<double>> want_double(counts.size());
      for (size_t c = 0; c < counts.size(); ++c) {
        want_i64[c].assign(counts[c], 0);
        want_double[c].assign(counts[c], 0.0);
        for (uint32_t i = 0; i < P; ++i) {
          for (size_t j = 0; j < counts[c]; ++j) {
            want_i64[c][j] += sum_operand_int64(i, j);
            want_double[c][j] += sum_operand_double(i, j);
          }
        }
      }
      ImageLog log(P);
      const int status = run_images(P, [&](cf_image_t me) {
        cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algorithm);
        for (size_t c = 0; c < counts.size(); ++c) {
          const size_t count = counts[c];
          std::vector<int64_t> src(count), dst(count, INT64_MIN);
          for (size_t j = 0; j < count; ++j) src[j] = sum_operand_int64(me, j);
          int rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), sizeof(int64_t), count,
                                     CF_BUILTIN(CF_OP_SUM, CF_DT_INT64), 0, kAllLocal);
          log.expect(me, rc == CF_OK, [&] { return cat("int64 count=", count, ": ", cf_last_error()); });
          size_t bad = std::mismatch(dst.begin(), dst.end(), want_i64[c].begin()).first - dst.begin();
          log.expect(me, bad == count, [&] {
            return cat("int64 count=", count, ": element ", bad, " is ", dst[bad], ", expected ",
                       want_i64[c][bad]);
          });

          std::vector<double> dsrc(count), ddst(count, -0.125);
          for (size_t j = 0; j < count; ++j) dsrc[j] = sum_operand_double(me, j);
          rc = cf_coll_allreduce(CF_TEAM_ALL, ddst.data(), dsrc.data(), sizeof(double), count,
                                 CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE), 0, kAllLocal);
          log.expect(me, rc == CF_OK, [&] { return cat("double count=", count, ": ", cf_last_error()); });
          bad = std::mismatch(ddst.begin(), ddst.end(), want_double[c].begin()).first - ddst.begin();
          log.expect(me, bad == count, [&] {
            return cat("double count=", count, ": element ", bad, " is ", ddst[bad], ", expected ",
                       want_double[c][bad]);
          });
        }
      });
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == P * counts.size() * 4);
    }
  }
}

// ---- allreduce: every built-in op and type ----------------------------------------

template <typename T> constexpr int kTypeCode = -1;
template <> constexpr int kTypeCode<int8_t> = CF_DT_INT8;
template <> constexpr int kTypeCode<uint8_t> = CF_DT_UINT8;
template <> constexpr int kTypeCode<int32_t> = CF_DT_INT32;
template <> constexpr int kTypeCode<uint32_t> = CF_DT_UINT32;
template <> constexpr int kTypeCode<int64_t> = CF_DT_INT64;
template <> constexpr int kTypeCode<uint64_t> = CF_DT_UINT64;
template <> constexpr int kTypeCode<float> = CF_DT_FLOAT;
template <> constexpr int kTypeCode<double> = CF_DT_DOUBLE;
const char* const kTypeNames[] = {"INT8", "UINT8", "INT32", "UINT32", "INT64", "UINT64", "FLOAT", "DOUBLE"};
const char* const kOpNames[] = {"SUM", "PROD", "MIN", "MAX", "BAND", "BOR", "BXOR", "MINLOC", "MAXLOC"};

// Operands chosen so that no op overflows (PROD wraps identically in any order
// for the integer types) and every floating result is exact.
template <typename T>
T op_operand(int op, uint32_t image, size_t j) {
  constexpr bool is_signed = std::is_signed_v<T>;
  switch (op) {
    case CF_OP_SUM: {
      const int v = static_cast<int>((image * 3 + j) % 7);
      if constexpr (std::is_floating_point_v<T>) return static_cast<T>((v - 3) * 0.5);
      return static_cast<T>(is_signed ? v - 3 : v);
    }
    case CF_OP_PROD: {
      const int k = static_cast<int>((image + j) % 3);
      if constexpr (std::is_floating_point_v<T>) return k == 0 ? T(2) : k == 1 ? T(-1) : T(0.5);
      if constexpr (is_signed) return static_cast<T>(k == 0 ? 2 : k == 1 ? 1 : -1);
      return static_cast<T>(k == 0 ? 2 : 1);
    }
    case CF_OP_MIN:
    case CF_OP_MAX: {
      const int v = static_cast<int>((image * 37 + j * 11) % 200);
      if constexpr (std::is_floating_point_v<T>) return static_cast<T>(v - 100 + 0.25);
      return static_cast<T>(is_signed ? v - 100 : v);
    }
    default:  // bitwise: all bits vary
      return static_cast<T>(mix(uint64_t{image} * 1000 + j));
  }
}

template <typename T>
T op_apply(int op, T a, T b) {
  switch (op) {
    case CF_OP_SUM: return static_cast<T>(a + b);
    case CF_OP_PROD: return static_cast<T>(a * b);
    case CF_OP_MIN: return std::min(a, b);
    case CF_OP_MAX: return std::max(a, b);
    default:
      if constexpr (std::is_integral_v<T>) {
        if (op == CF_OP_BAND) return static_cast<T>(a & b);
        if (op == CF_OP_BOR) return static_cast<T>(a | b);
        if (op == CF_OP_BXOR) return static_cast<T>(a ^ b);
      }
      return T{};
  }
}

template <typename T>
void allreduce_every_op(cf_image_t me, uint32_t P, ImageLog& log) {
  constexpr size_t kCount = 7;
  for (int op = CF_OP_SUM; op <= CF_OP_BXOR; ++op) {
    if (std::is_floating_point_v<T> && op >= CF_OP_BAND) continue;  // undefined on floats
    std::vector<T> src(kCount), dst(kCount, T(99)), want(kCount);
    for (size_t j = 0; j < kCount; ++j) {
      src[j] = op_operand<T>(op, me, j);
      want[j] = op_operand<T>(op, 0, j);
      for (uint32_t i = 1; i < P; ++i) want[j] = op_apply<T>(op, want[j], op_operand<T>(op, i, j));
    }
    auto params = [&] { return cat("CF_OP_", kOpNames[op], " on CF_DT_", kTypeNames[kTypeCode<T>]); };
    const int rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), sizeof(T), kCount,
                                     CF_BUILTIN(op, kTypeCode<T>), 0, kAllLocal);
    log.expect(me, rc == CF_OK, [&] { return cat(params(), ": ", cf_last_error()); });
    const size_t bad = std::mismatch(dst.begin(), dst.end(), want.begin()).first - dst.begin();
    log.expect(me, bad == kCount, [&] {
      return cat(params(), ": element ", bad, " is ", +dst[bad], ", expected ", +want[bad]);
    });
  }
}

template <typename... Ts>
void allreduce_every_op_and_type(cf_image_t me, uint32_t P, ImageLog& log) {
  (allreduce_every_op<Ts>(me, P, log), ...);
}

TEST_CASE("allreduce with every built-in op on every type it is defined for equals a sequential fold") {
  for (const char* algorithm : kAllreduceAlgorithms) {
    for (uint32_t P : {1u, 5u, 8u}) {
      INFO("algorithm: " << std::string(algorithm));
      CAPTURE(P);
      ImageLog log(P);
      const int status = run_images(P, [&](cf_image_t me) {
        cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algorithm);
        allreduce_every_op_and_type<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, float,
                                    double>(me, P, log);
      });
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == P * 2 * (6 * 7 + 2 * 4));
    }
  }
}

// MINLOC/MAXLOC elements are (value, index) pairs of the type. Indices fall as
// images rise, so "ties pick the smaller index" differs from "ties keep the
// left operand".
template <typename T>
struct LocPair {
  T value, index;
};

template <typename T>
LocPair<T> loc_operand(uint32_t P, uint32_t image, size_t j) {
  const int v = static_cast<int>((image + j) % 3);
  return {static_cast<T>(std::is_signed_v<T> ? v - 1 : v),
          static_cast<T>((P - 1 - image) * 2 + j % 2)};
}

template <typename T>
LocPair<T> loc_apply(bool is_min, LocPair<T> a, LocPair<T> b) {
  if (a.value == b.value) return a.index <= b.index ? a : b;
  return (is_min ? a.value < b.value : a.value > b.value) ? a : b;
}

template <typename T>
void allreduce_loc_ops(cf_image_t me, uint32_t P, ImageLog& log) {
  constexpr size_t kCount = 6;
  for (int op : {CF_OP_MINLOC, CF_OP_MAXLOC}) {
    std::vector<LocPair<T>> src(kCount), dst(kCount, {T(77), T(77)}), want(kCount);
    for (size_t j = 0; j < kCount; ++j) {
      src[j] = loc_operand<T>(P, me, j);
      want[j] = loc_operand<T>(P, 0, j);
      for (uint32_t i = 1; i < P; ++i) want[j] = loc_apply<T>(op == CF_OP_MINLOC, want[j], loc_operand<T>(P, i, j));
    }
    const int rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), 2 * sizeof(T), kCount,
                                     CF_BUILTIN(op, kTypeCode<T>), 0, kAllLocal);
    auto params = [&] { return cat("CF_OP_", kOpNames[op], " on CF_DT_", kTypeNames[kTypeCode<T>]); };
    log.expect(me, rc == CF_OK, [&] { return cat(params(), ": ", cf_last_error()); });
    for (size_t j = 0; j < kCount; ++j) {
      log.expect(me, dst[j].value == want[j].value && dst[j].index == want[j].index, [&] {
        return cat(params(), ": element ", j, " is (", +dst[j].value, ", ", +dst[j].index,
                   "), expected (", +want[j].value, ", ", +want[j].index, ")");
      });
    }
  }
}

template <typename... Ts>
void allreduce_loc_every_type(cf_image_t me, uint32_t P, ImageLog& log) {
  (allreduce_loc_ops<Ts>(me, P, log), ...);
}

TEST_CASE("allreduce MINLOC and MAXLOC pick the extreme value and, on ties, the smaller index") {
  for (const char* algorithm : kAllreduceAlgorithms) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 16u}) {
      INFO("algorithm: " << std::string(algorithm));
      CAPTURE(P);
      ImageLog log(P);
      const int status = run_images(P, [&](cf_image_t me) {
        cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algorithm);
        allreduce_loc_every_type<int8_t, uint8_t, int32_t, uint32_t, int64_t, uint64_t, float,
                                 double>(me, P, log);
      });
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == P * 8 * 2 * (1 + 6));
    }
  }
}

// ---- allreduce: client functions --------------------------------------------------

std::atomic<uint64_t> g_client_calls{0};
std::atomic<uint64_t> g_client_bad_calls{0};  // counts or elem_size not as documented

// arg * max(arg * l, arg * r): the maximum when func_arg is 1, the minimum when -1.
void signed_max(void* results, size_t result_count, const void* left, size_t left_count,
                const void* right, size_t elem_size, int flags, int arg) {
  g_client_calls.fetch_add(1, std::memory_order_relaxed);
  if (result_count != 1 || left_count != 1 || elem_size != sizeof(int32_t) || flags != 0) {
    g_client_bad_calls.fetch_add(1, std::memory_order_relaxed);
  }
  int32_t l, r;
  std::memcpy(&l, left, sizeof l);
  std::memcpy(&r, right, sizeof r);
  const int32_t out = arg * std::max(arg * l, arg * r);
  std::memcpy(results, &out, sizeof out);
}

void matrix_multiply(void* results, size_t result_count, const void* left, size_t left_count,
                     const void* right, size_t elem_size, int flags, int arg) {
  g_client_calls.fetch_add(1, std::memory_order_relaxed);
  if (result_count != 1 || left_count != 1 || elem_size != sizeof(Mat2)) {
    g_client_bad_calls.fetch_add(1, std::memory_order_relaxed);
  }
  Mat2 l, r;
  std::memcpy(&l, left, sizeof l);
  std::memcpy(&r, right, sizeof r);
  const Mat2 out = l * r;
  std::memcpy(results, &out, sizeof out);
}

const cf_coll_fn_entry_t kClientFunctions[] = {
    {reinterpret_cast<cf_coll_fn_t>(&signed_max), 0},
    {reinterpret_cast<cf_coll_fn_t>(&matrix_multiply), CF_COLL_NONCOMM},
};
constexpr int kSignedMax = 0;
constexpr int kMatrixMultiply = 1;

int32_t client_operand(uint32_t image, size_t j) {
  return static_cast<int32_t>((image * 7919 + j * 104729) % 20001) - 10000;
}

TEST_CASE("allreduce with a client function from fn_tbl passes it func_arg and one element at a time") {
  for (const char* algorithm : kAllreduceAlgorithms) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u, 16u}) {
      INFO("algorithm: " << std::string(algorithm));
      CAPTURE(P);
      const std::vector<size_t> counts = {1, 3, 1000};
      g_client_calls = 0;
      g_client_bad_calls = 0;
      ImageLog log(P);
      const int status = run_images(
          P,
          [&](cf_image_t me) {
            cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algorithm);
            for (size_t count : counts) {
              for (int arg : {1, -1}) {
                std::vector<int32_t> src(count), dst(count, 0x7eadbeef), want(count);
                for (size_t j = 0; j < count; ++j) {
                  src[j] = client_operand(me, j);
                  want[j] = client_operand(0, j);
                  for (uint32_t i = 1; i < P; ++i) {
                    want[j] = arg > 0 ? std::max(want[j], client_operand(i, j))
                                      : std::min(want[j], client_operand(i, j));
                  }
                }
                const int rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), sizeof(int32_t),
                                                 count, kSignedMax, arg, kAllLocal);
                log.expect(me, rc == CF_OK, [&] {
                  return cat("count=", count, " func_arg=", arg, ": ", cf_last_error());
                });
                const size_t bad = std::mismatch(dst.begin(), dst.end(), want.begin()).first - dst.begin();
                log.expect(me, bad == count, [&] {
                  return cat("count=", count, " func_arg=", arg, ": element ", bad, " is ", dst[bad],
                             ", expected ", want[bad]);
                });
              }
            }
          },
          kClientFunctions, 2);
      REQUIRE(status == CF_OK);
      log.report();
      CHECK(log.checks() == P * counts.size() * 2 * 2);
      CHECK(g_client_bad_calls.load() == 0);
      if (P > 1) CHECK(g_client_calls.load() > 0);
    }
  }
}

// The reference: M_0 * M_1 * ... * M_{P-1}, element by element.
std::vector<Mat2> ordered_product(uint32_t P, size_t count) {
  std::vector<Mat2> want(count);
  for (size_t j = 0; j < count; ++j) {
    want[j] = matrix_operand(0, j);
    for (uint32_t i = 1; i < P; ++i) want[j] = want[j] * matrix_operand(i, j);
  }
  return want;
}

void check_matrix_allreduce(cf_image_t me, size_t count, const std::vector<Mat2>& want, ImageLog& log) {
  std::vector<Mat2> src(count), dst(count, Mat2{7, 7, 7, 7});
  for (size_t j = 0; j < count; ++j) src[j] = matrix_operand(me, j);
  const int rc = cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), sizeof(Mat2), count,
                                   kMatrixMultiply, 0, kAllLocal);
  log.expect(me, rc == CF_OK, [&] { return cat("count=", count, ": ", cf_last_error()); });
  const size_t bad = std::mismatch(dst.begin(), dst.end(), want.begin()).first - dst.begin();
  log.expect(me, bad == count, [&] {
    return cat("count=", count, ": element ", bad, " is ", dst[bad], ", expected the ordered product ",
               want[bad]);
  });
}

TEST_CASE("recursive doubling allreduce keeps the operand order of a non-commutative function") {
  const std::vector<size_t> counts = {1, 3, 64};
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u, 16u}) {
    CAPTURE(P);
    std::vector<std::vector<Mat2>> want;
    for (size_t count : counts) want.push_back(ordered_product(P, count));
    if (P > 1) {  // the operands really do not commute: the reversed product differs
      Mat2 reversed = matrix_operand(P - 1, 0);
      for (uint32_t i = P - 1; i-- > 0;) reversed = reversed * matrix_operand(i, 0);
      REQUIRE(reversed != want[0][0]);
    }
    g_client_bad_calls = 0;
    ImageLog log(P);
    const int status = run_images(
        P,
        [&](cf_image_t me) {
          cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "recursive_doubling");
          for (size_t c = 0; c < counts.size(); ++c) check_matrix_allreduce(me, counts[c], want[c], log);
        },
        kClientFunctions, 2);
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == P * counts.size() * 2);
    CHECK(g_client_bad_calls.load() == 0);
  }
}

TEST_CASE("allreduce keeps the operand order of a non-commutative function when carflow picks the algorithm, even for large vectors") {
  const size_t count = 4096;  // 128 KiB: at or above the size where ring becomes the default
  for (uint32_t P : {3u, 8u}) {
    CAPTURE(P);
    const std::vector<Mat2> want = ordered_product(P, count);
    ImageLog log(P);
    const int status = run_images(
        P, [&](cf_image_t me) { check_matrix_allreduce(me, count, want, log); }, kClientFunctions, 2);
    REQUIRE(status == CF_OK);
    log.report();
    CHECK(log.checks() == P * 2);
  }
}

// ---- allreduce: reproducibility ------------------------------------------------------

// Non-integer values over 40 binary orders of magnitude: sums depend on order.
double wide_operand(uint32_t image, size_t j) {
  const uint64_t u = mix(uint64_t{image} * 1000003 + j);
  const double mantissa = 1.0 + static_cast<double>(u >> 11) * 0x1.0p-53;
  const int exponent = static_cast<int>(u % 41) - 20;
  return ((u >> 5) & 1 ? -1.0 : 1.0) * std::ldexp(mantissa, exponent);
}

TEST_CASE("floating-point allreduce gives the same bits on every run and every image for a fixed P and algorithm") {
  constexpr int kRuns = 20;
  for (const char* algorithm : kAllreduceAlgorithms) {
    for (uint32_t P : {2u, 3u, 8u, 13u}) {
      for (size_t count : {size_t{1000}, size_t{20011}}) {
        INFO("algorithm: " << std::string(algorithm));
        CAPTURE(P);
        CAPTURE(count);
        std::vector<double> first;
        int runs_differing = 0, images_differing = 0, runs_failed = 0;
        for (int run = 0; run < kRuns; ++run) {
          std::vector<std::vector<double>> results(P, std::vector<double>(count, 0.0));
          std::vector<int> statuses(P, CF_OK);
          const int status = run_images(P, [&](cf_image_t me) {
            cf_coll_set_algorithm(CF_KIND_ALLREDUCE, algorithm);
            std::vector<double> src(count);
            for (size_t j = 0; j < count; ++j) src[j] = wide_operand(me, j);
            statuses[me] = cf_coll_allreduce(CF_TEAM_ALL, results[me].data(), src.data(), sizeof(double),
                                             count, CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE), 0, kAllLocal);
          });
          REQUIRE(status == CF_OK);
          runs_failed += std::count(statuses.begin(), statuses.end(), CF_OK) != static_cast<ptrdiff_t>(P);
          if (run == 0) first = results[0];
          for (uint32_t i = 0; i < P; ++i) {
            if (first_difference(results[i].data(), results[0].data(), count * sizeof(double)) != kNotFound) {
              ++images_differing;
            }
          }
          if (first_difference(results[0].data(), first.data(), count * sizeof(double)) != kNotFound) {
            ++runs_differing;
          }
        }
        CHECK(runs_failed == 0);
        CHECK(runs_differing == 0);
        CHECK(images_differing == 0);
        // The bits are reproducible and also a sum: close to the sequential one.
        size_t far = 0;
        for (size_t j = 0; j < count; ++j) {
          double sum = 0, magnitude = 0;
          for (uint32_t i = 0; i < P; ++i) {
            sum += wide_operand(i, j);
            magnitude += std::fabs(wide_operand(i, j));
          }
          far += std::fabs(first[j] - sum) > 1e-12 * magnitude;
        }
        CHECK(far == 0);
      }
    }
  }
}

}  // namespace
