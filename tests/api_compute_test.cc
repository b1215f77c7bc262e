// The computational collectives through the C API: reduce_vec, scan,
// reduce_scatter(v), allreduce and the GASNet notes' block-cyclic reduce and
// prefix_reduce, for every algorithm, against the sequential reference
// (graph/reference.h): exact integer sums, the ordered product of a
// non-commutative client function, every built-in op x type, in-place
// forms, bit-identical floating-point results run to run, AMSAFE, misuse.
//
// Image threads never assert: they record into an ImageLog that the main
// thread reports after cf_run_images returns.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "graph/reference.h"
#include "graph/registry.h"
#include "tests/test_util.h"

namespace {

using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow_test::cat;
using carflow_test::contains;
using carflow_test::ImageLog;
using carflow_test::kAllLocal;
using carflow_test::Mat2;
using carflow_test::matrix_operand;
using carflow_test::run_images;
using Bytes = std::vector<uint8_t>;

constexpr int kSingle = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_SINGLE | CF_COLL_ALL_THREADS;

std::atomic<uint64_t> g_calls{0};
std::atomic<uint64_t> g_bad_calls{0};  // arguments not as the header documents
thread_local bool t_is_image = false;  // set by each image body

// The GASNet notes' non-commutative prefix example over Mat2: left operands first,
// then one result per right operand.
void matrix_seed(void* results, size_t result_count, const void* left, size_t left_count,
                 const void* right, size_t elem_size, int flags, int) {
  g_calls.fetch_add(1, std::memory_order_relaxed);
  if (elem_size != sizeof(Mat2) || result_count == 0 || (flags & CF_COLL_NONCOMM) == 0 || !t_is_image) {
    g_bad_calls.fetch_add(1, std::memory_order_relaxed);
  }
  std::vector<Mat2> out(result_count);
  Mat2 acc{};
  bool have = false;
  for (size_t i = 0; i < left_count + result_count; ++i) {
    Mat2 x;
    std::memcpy(&x, i < left_count ? static_cast<const char*>(left) + i * sizeof(Mat2)
                                   : static_cast<const char*>(right) + (i - left_count) * sizeof(Mat2),
                sizeof x);
    acc = have ? acc * x : x;
    have = true;
    if (i >= left_count) out[i - left_count] = acc;
  }
  std::memcpy(results, out.data(), result_count * sizeof(Mat2));
}
const cf_coll_fn_entry_t kFunctions[] = {{reinterpret_cast<cf_coll_fn_t>(&matrix_seed), CF_COLL_NONCOMM}};
constexpr int kMatrix = 0;
constexpr int kSumInt64 = CF_BUILTIN(CF_OP_SUM, CF_DT_INT64);

void int64_sum(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k < bytes; k += 8) {
    uint64_t a, b;
    std::memcpy(&a, static_cast<const char*>(left) + k, 8);
    std::memcpy(&b, static_cast<const char*>(right) + k, 8);
    a += b;
    std::memcpy(static_cast<char*>(dst) + k, &a, 8);
  }
}
void mat_product(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k < bytes; k += sizeof(Mat2)) {
    Mat2 a, b;
    std::memcpy(&a, static_cast<const char*>(left) + k, sizeof a);
    std::memcpy(&b, static_cast<const char*>(right) + k, sizeof b);
    a = a * b;
    std::memcpy(static_cast<char*>(dst) + k, &a, sizeof a);
  }
}

// Inputs for `spec`: reference bytes, or matrices whose product depends on order.
std::vector<Bytes> make_inputs(const CollectiveSpec& spec, bool matrices) {
  std::vector<Bytes> in = carflow::reference::inputs(spec);
  if (!matrices) return in;
  for (uint32_t i = 0; i < spec.images; ++i) {
    for (size_t k = 0; k + sizeof(Mat2) <= in[i].size(); k += sizeof(Mat2)) {
      const Mat2 m = matrix_operand(i, k / sizeof(Mat2));
      std::memcpy(&in[i][k], &m, sizeof m);
    }
  }
  return in;
}

// One call of `spec`'s kind through the C API (func, flags as given).
cf_coll_handle_t start_call(const CollectiveSpec& s, void* dst, void* src, int func, int flags) {
  const size_t es = s.elem_size, n = s.nbytes / es;
  switch (s.kind) {
    case CollKind::Allreduce: return cf_coll_allreduce_nb(CF_TEAM_ALL, dst, src, es, n, func, 0, flags);
    case CollKind::ReduceVec:
      return cf_coll_reduce_vec_nb(CF_TEAM_ALL, s.root, dst, src, es, n, func, 0, flags);
    case CollKind::Scan:
      return cf_coll_scan_nb(CF_TEAM_ALL, dst, src, es, n, func, 0,
                             flags | (s.flags & carflow::kExclusiveFlag ? CF_COLL_EXCLUSIVE : 0));
    case CollKind::ReduceScatter: {
      if (s.counts.empty()) return cf_coll_reduce_scatter_nb(CF_TEAM_ALL, dst, src, es, n, func, 0, flags);
      std::vector<size_t> counts;
      for (uint64_t c : s.counts) counts.push_back(c / es);
      return cf_coll_reduce_scatterv_nb(CF_TEAM_ALL, dst, src, es, counts.data(), func, 0, flags);
    }
    case CollKind::Reduce:
      return cf_coll_reduce_nb(CF_TEAM_ALL, s.root, dst, src, s.src_blksz, s.src_offset, es, n, func, 0,
                               flags);
    case CollKind::PrefixReduce:
      return cf_coll_prefix_reduce_nb(CF_TEAM_ALL, dst, s.dst_blksz, s.dst_offset, src, s.src_blksz,
                                      s.src_offset, es, n, func, 0, flags);
    default: return CF_COLL_INVALID_HANDLE;
  }
}

// Runs `spec` (algorithm "" = carflow's choice) on spec.images images and
// compares every destination with the reference. `in_place`: images whose
// source and destination can be one buffer pass src == dst.
void check_kind(const CollectiveSpec& spec, bool matrices, bool in_place = false) {
  const std::vector<Bytes> in = make_inputs(spec, matrices);
  const std::vector<Bytes> want =
      carflow::reference::expected_reduction(spec, in, matrices ? &mat_product : &int64_sum);
  const uint32_t P = spec.images;
  const int kind = static_cast<int>(spec.kind);
  const int func = matrices ? kMatrix : kSumInt64;
  INFO(carflow::coll_kind_name(spec.kind), " algo='", spec.algorithm, "' P=", P, " root=", spec.root,
       " nbytes=", spec.nbytes, " elem=", spec.elem_size, " flags=", spec.flags, " v=", spec.counts.size(),
       " in_place=", in_place, " src=", spec.src_blksz, "/", spec.src_offset, " dst=", spec.dst_blksz,
       "/", spec.dst_offset);
  ImageLog log(P);
  g_bad_calls = 0;
  const int status = run_images(
      P,
      [&](cf_image_t me) {
        t_is_image = true;
        cf_coll_set_algorithm(kind, spec.algorithm.empty() ? nullptr : spec.algorithm.c_str());
        // 8-byte aligned copies (the alignment every element size here needs).
        const size_t src_len = in[me].size(), dst_len = want[me].size();
        std::vector<uint64_t> src_store(src_len / 8 + 2), dst_store(std::max(src_len, dst_len) / 8 + 2);
        char* src = reinterpret_cast<char*>(src_store.data());
        char* dst = reinterpret_cast<char*>(dst_store.data());
        if (src_len > 0) std::memcpy(src, in[me].data(), src_len);
        std::memset(dst, carflow::reference::kUntouched, dst_len);
        const bool here_in_place = in_place && src_len > 0 && dst_len > 0 &&
                                   (spec.kind != CollKind::Scan || !(spec.flags & carflow::kExclusiveFlag) ||
                                    me != 0);
        if (here_in_place) std::memcpy(dst, in[me].data(), src_len);  // src_len > 0 here
        const cf_coll_handle_t h = start_call(spec, dst, here_in_place ? dst : src, func, kAllLocal);
        const int rc = h == CF_COLL_INVALID_HANDLE ? cf_last_status() : cf_coll_wait_sync(h);
        log.expect(me, rc == CF_OK, [&] { return cat("status ", rc, ": ", cf_last_error()); });
        if (rc != CF_OK) return;
        size_t bad = 0;
        while (bad < dst_len && static_cast<uint8_t>(dst[bad]) == want[me][bad]) ++bad;
        log.expect(me, bad == dst_len, [&] { return cat("destination differs at byte ", bad, " of ", dst_len); });
        if (!here_in_place) {
          log.expect(me, src_len == 0 || std::memcmp(src, in[me].data(), src_len) == 0, [] { return std::string("source changed"); });
        }
      },
      kFunctions, 1);
  REQUIRE(status == CF_OK);
  log.report();
  CHECK(g_bad_calls.load() == 0);
}

CollectiveSpec vector_spec(CollKind kind, const std::string& algo, uint32_t P, uint64_t count,
                           uint32_t elem, uint32_t root = 0, bool exclusive = false) {
  CollectiveSpec s;
  s.kind = kind;
  s.algorithm = algo;
  s.images = P;
  s.root = root % P;
  s.elem_size = elem;
  s.nbytes = count * elem;
  if (exclusive) s.flags = carflow::kExclusiveFlag;
  return s;
}

std::vector<std::string> algorithms(CollKind kind, bool order_preserving_only) {
  std::vector<std::string> out;
  for (const carflow::GeneratorInfo* g : carflow::GeneratorRegistry::instance().list(kind)) {
    if (!order_preserving_only || g->preserves_order) out.push_back(g->name);
  }
  out.push_back("");  // the default table
  return out;
}

const CollKind kVectorKinds[] = {CollKind::Allreduce, CollKind::ReduceVec, CollKind::Scan,
                                 CollKind::ReduceScatter};

// The variable form of a reduce_scatter spec: block i has ((3i + 1) mod 5)
// times the uniform count (some blocks empty).
void make_variable(CollectiveSpec* s) {
  s->counts.clear();
  for (uint32_t i = 0; i < s->images; ++i) s->counts.push_back(uint64_t{(i * 3 + 1) % 5} * s->nbytes);
  s->nbytes = 0;
}

TEST_CASE("every MPI-style computational collective and algorithm gives the exact integer sum") {
  for (CollKind kind : kVectorKinds) {
    for (const std::string& algo : algorithms(kind, false)) {
      for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
        for (uint64_t count : {1u, 3u, 1000u}) {
          for (uint32_t root : {0u, P - 1}) {
            if (root != 0 && kind != CollKind::ReduceVec) continue;
            for (bool excl : {false, true}) {
              if (excl && kind != CollKind::Scan) continue;
              check_kind(vector_spec(kind, algo, P, count, 8, root, excl), false);
            }
          }
          if (kind == CollKind::ReduceScatter) {
            CollectiveSpec v = vector_spec(kind, algo, P, count, 8);
            make_variable(&v);
            check_kind(v, false);
          }
        }
      }
      // One large vector: 2 MiB of int64 per image (per block for reduce_scatter).
      check_kind(vector_spec(kind, algo, 4, kind == CollKind::ReduceScatter ? 65536 : 262144, 8, 3), false);
    }
  }
}

TEST_CASE("order-preserving algorithms, and carflow's choice, give the ordered product of a NONCOMM function") {
  for (CollKind kind : kVectorKinds) {
    for (const std::string& algo : algorithms(kind, true)) {
      for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
        for (uint64_t count : {1u, 3u, 64u}) {
          for (bool excl : {false, true}) {
            if (excl && kind != CollKind::Scan) continue;
            check_kind(vector_spec(kind, algo, P, count, sizeof(Mat2), P / 2, excl), true);
          }
        }
      }
    }
    // carflow's choice for a large vector must still keep the order.
    check_kind(vector_spec(kind, "", 3, 8192, sizeof(Mat2), 1), true);
  }
}

TEST_CASE("in-place allreduce, reduce_vec (root), scan and reduce_scatter equal the out-of-place result") {
  for (CollKind kind : kVectorKinds) {
    for (const std::string& algo : algorithms(kind, false)) {
      for (uint32_t P : {1u, 3u, 8u}) {
        for (bool excl : {false, true}) {
          if (excl && kind != CollKind::Scan) continue;
          check_kind(vector_spec(kind, algo, P, 1000, 8, P - 1, excl), false, true);
        }
      }
    }
  }
}

// ---- seed style ----------------------------------------------------------------

CollectiveSpec cyclic_spec(CollKind kind, const std::string& algo, uint32_t P, uint64_t count, uint32_t elem,
                           uint64_t blksz, uint64_t offset, uint32_t root) {
  CollectiveSpec s = vector_spec(kind, algo, P, count, elem, root);
  s.src_blksz = blksz;
  s.src_offset = blksz == 0 ? offset % P : offset;
  return s;
}

TEST_CASE("seed reduce over block-cyclic arrays: every layout, algorithm and root") {
  for (const std::string& algo : algorithms(CollKind::Reduce, false)) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
      for (uint64_t blksz : {0u, 1u, 3u, 64u}) {
        for (uint64_t offset : {0u, 5u}) {
          for (uint64_t count : {1u, 3u, 1000u}) {
            for (bool matrices : {false, true}) {
              const carflow::GeneratorInfo* g = carflow::GeneratorRegistry::instance().find(CollKind::Reduce, algo);
              if (matrices && g != nullptr && !g->preserves_order) continue;
              check_kind(cyclic_spec(CollKind::Reduce, algo, P, count, matrices ? sizeof(Mat2) : 8, blksz, offset,
                                     P - 1),
                         matrices);
            }
          }
        }
      }
    }
  }
  check_kind(cyclic_spec(CollKind::Reduce, "", 8, 262144, 8, 64, 5, 3), false);
  check_kind(cyclic_spec(CollKind::Reduce, "", 8, 65536, sizeof(Mat2), 3, 5, 3), true);
}

TEST_CASE("seed prefix_reduce: every source layout into the same and into other destination layouts") {
  struct Layout {
    uint64_t blksz, offset;
  };
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
    for (uint64_t blksz : {0u, 1u, 3u, 64u}) {
      for (uint64_t offset : {0u, 5u}) {
        for (uint64_t count : {1u, 3u, 1000u}) {
          CollectiveSpec s = cyclic_spec(CollKind::PrefixReduce, "", P, count, sizeof(Mat2), blksz, offset, 0);
          const Layout same{s.src_blksz, s.src_offset};
          for (Layout dst : {same, Layout{1, 0}, Layout{64, 5}, Layout{0, 0}}) {
            s.dst_blksz = dst.blksz, s.dst_offset = dst.offset;
            check_kind(s, true);
          }
        }
      }
    }
  }
  CollectiveSpec big = cyclic_spec(CollKind::PrefixReduce, "", 8, 262144, 8, 64, 5, 0);
  big.dst_blksz = 64, big.dst_offset = 5;
  check_kind(big, false);
}

TEST_CASE("the m forms reducem and prefix_reducem take each image's address from the list") {
  for (uint32_t P : {1u, 3u, 8u}) {
    const uint64_t count = 100, blksz = 3;
    CollectiveSpec spec = cyclic_spec(CollKind::PrefixReduce, "", P, count, 8, blksz, 5, 0);
    spec.dst_blksz = blksz, spec.dst_offset = 5;
    const std::vector<Bytes> in = make_inputs(spec, false);
    const std::vector<Bytes> want = carflow::reference::expected_reduction(spec, in, &int64_sum);
    CollectiveSpec rspec = spec;
    rspec.kind = CollKind::Reduce;
    rspec.root = P - 1;
    const std::vector<Bytes> want_reduce = carflow::reference::expected_reduction(rspec, in, &int64_sum);
    std::vector<std::vector<uint64_t>> src(P), dst(P);
    std::vector<void*> srclist(P), dstlist(P);
    for (uint32_t i = 0; i < P; ++i) {
      src[i].resize(in[i].size() / 8 + 1);
      dst[i].resize(want[i].size() / 8 + 1);
      std::memset(dst[i].data(), carflow::reference::kUntouched, want[i].size());  // unused elements stay
      if (!in[i].empty()) std::memcpy(src[i].data(), in[i].data(), in[i].size());
      srclist[i] = src[i].data();
      dstlist[i] = dst[i].data();
    }
    std::vector<uint64_t> result(1, 0);
    ImageLog log(P);
    REQUIRE(run_images(P, [&](cf_image_t me) {
              int rc = cf_coll_prefix_reducem(CF_TEAM_ALL, dstlist.data(), blksz, 5, srclist.data(), blksz, 5, 8,
                                              count, kSumInt64, 0, kSingle);
              log.expect(me, rc == CF_OK, [&] { return cat("prefix_reducem: ", cf_last_error()); });
              rc = cf_coll_reducem(CF_TEAM_ALL, P - 1, result.data(), srclist.data(), blksz, 5, 8, count, kSumInt64,
                                   0, kSingle);
              log.expect(me, rc == CF_OK, [&] { return cat("reducem: ", cf_last_error()); });
            }) == CF_OK);
    log.report();
    for (uint32_t i = 0; i < P; ++i) {
      CAPTURE(i);
      size_t bad = 0;
      const auto* got = reinterpret_cast<const uint8_t*>(dst[i].data());
      while (bad < want[i].size() && got[bad] == want[i][bad]) ++bad;
      CHECK_MESSAGE(bad == want[i].size(), "byte ", bad, " of ", want[i].size());
    }
    CHECK(std::memcmp(result.data(), want_reduce[P - 1].data(), 8) == 0);
  }
}

// ---- every built-in op and type ---------------------------------------------------

// Integer sums and products wrap, as the documented kernels do: computed in
// an unsigned type at least as wide as int.
template <typename T>
T wrap_mul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(a + 0u)>;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}
template <typename T>
T wrap_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<decltype(a + 0u)>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <typename T>
T apply_op(int op, T a, T b) {
  switch (op) {
    case CF_OP_SUM: return wrap_add(a, b);
    case CF_OP_PROD: return wrap_mul(a, b);
    case CF_OP_MIN: return std::min(a, b);
    case CF_OP_MAX: return std::max(a, b);
  }
  if constexpr (std::is_integral_v<T>) {
    switch (op) {
      case CF_OP_BAND: return static_cast<T>(a & b);
      case CF_OP_BOR: return static_cast<T>(a | b);
      case CF_OP_BXOR: return static_cast<T>(a ^ b);
    }
  }
  return a;
}

// Values whose products and sums stay exact in every type.
template <typename T>
T op_operand(uint32_t image, size_t j, int op) {
  if (op == CF_OP_PROD) return static_cast<T>(1 + (image + j) % 2);
  return static_cast<T>((image * 37 + j * 11) % 50);
}

// reduce_vec and scan go through element-wise kernels; the seed reduce and
// prefix_reduce through the fold and prefix kernels of the same op.
template <typename T>
void check_builtin(int type) {
  const uint32_t P = 5;
  const size_t count = 37;
  for (int op = CF_OP_SUM; op <= CF_OP_BXOR; ++op) {
    if (!std::is_integral_v<T> && op >= CF_OP_BAND) continue;
    CAPTURE(op);
    CAPTURE(type);
    const int func = CF_BUILTIN(op, type);
    std::vector<T> total(count), scan_want;
    for (size_t j = 0; j < count; ++j) {
      total[j] = op_operand<T>(0, j, op);
      for (uint32_t i = 1; i < P; ++i) total[j] = apply_op(op, total[j], op_operand<T>(i, j, op));
    }
    // Seed reduce / prefix over the cyclic array whose element k is image
    // k % P's operand k / P (blksz 1): the fold of all P * count elements.
    std::vector<T> prefix_all(P * count);
    for (size_t k = 0; k < P * count; ++k) {
      const T x = op_operand<T>(static_cast<uint32_t>(k % P), k / P, op);
      prefix_all[k] = k == 0 ? x : apply_op(op, prefix_all[k - 1], x);
    }
    ImageLog log(P);
    REQUIRE(run_images(P, [&](cf_image_t me) {
              std::vector<T> src(count), dst(count), scan_dst(count), pre(count);
              for (size_t j = 0; j < count; ++j) src[j] = op_operand<T>(me, j, op);
              int rc = cf_coll_reduce_vec(CF_TEAM_ALL, 2, dst.data(), src.data(), sizeof(T), count, func, 0, kAllLocal);
              log.expect(me, rc == CF_OK && (me != 2 || dst == total), [&] { return cat("reduce_vec op ", op); });
              rc = cf_coll_scan(CF_TEAM_ALL, scan_dst.data(), src.data(), sizeof(T), count, func, 0, kAllLocal);
              bool ok = rc == CF_OK;
              for (size_t j = 0; j < count && ok; ++j) {
                T want = op_operand<T>(0, j, op);
                for (uint32_t i = 1; i <= me; ++i) want = apply_op(op, want, op_operand<T>(i, j, op));
                ok = scan_dst[j] == want;
              }
              log.expect(me, ok, [&] { return cat("scan op ", op); });
              T one{};
              rc = cf_coll_reduce(CF_TEAM_ALL, 1, &one, src.data(), 1, 0, sizeof(T), P * count, func, 0, kAllLocal);
              log.expect(me, rc == CF_OK && (me != 1 || one == prefix_all.back()),
                         [&] { return cat("seed reduce op ", op); });
              rc = cf_coll_prefix_reduce(CF_TEAM_ALL, pre.data(), 1, 0, src.data(), 1, 0, sizeof(T), P * count, func,
                                         0, kAllLocal);
              ok = rc == CF_OK;
              for (size_t j = 0; j < count && ok; ++j) ok = pre[j] == prefix_all[j * P + me];
              log.expect(me, ok, [&] { return cat("prefix_reduce op ", op); });
            }) == CF_OK);
    log.report();
  }
}

TEST_CASE("every built-in op on every type it is defined for, through element-wise, fold and prefix kernels") {
  check_builtin<int8_t>(CF_DT_INT8);
  check_builtin<uint8_t>(CF_DT_UINT8);
  check_builtin<int32_t>(CF_DT_INT32);
  check_builtin<uint32_t>(CF_DT_UINT32);
  check_builtin<int64_t>(CF_DT_INT64);
  check_builtin<uint64_t>(CF_DT_UINT64);
  check_builtin<float>(CF_DT_FLOAT);
  check_builtin<double>(CF_DT_DOUBLE);
}

TEST_CASE("MINLOC and MAXLOC through reduce_vec keep the extreme value and, on ties, the smaller index") {
  const uint32_t P = 6;
  ImageLog log(P);
  REQUIRE(run_images(P, [&](cf_image_t me) {
            // value me % 3 (ties between images), index = image
            const double src[2] = {static_cast<double>(me % 3), static_cast<double>(me)};
            double lo[2] = {}, hi[2] = {};
            int rc = cf_coll_reduce_vec(CF_TEAM_ALL, 0, lo, src, 16, 1, CF_BUILTIN(CF_OP_MINLOC, CF_DT_DOUBLE), 0,
                                        kAllLocal);
            rc |= cf_coll_reduce_vec(CF_TEAM_ALL, 0, hi, src, 16, 1, CF_BUILTIN(CF_OP_MAXLOC, CF_DT_DOUBLE), 0,
                                     kAllLocal);
            log.expect(me, rc == CF_OK, [&] { return std::string(cf_last_error()); });
            if (me == 0) {
              log.expect(me, lo[0] == 0 && lo[1] == 0, [&] { return cat("minloc ", lo[0], ",", lo[1]); });
              log.expect(me, hi[0] == 2 && hi[1] == 2, [&] { return cat("maxloc ", hi[0], ",", hi[1]); });
            }
          }) == CF_OK);
  log.report();
}

// ---- determinism ----------------------------------------------------------------

double wide_operand(uint32_t image, size_t j) {
  uint64_t u = (uint64_t{image} * 1000003 + j) * 0x9E3779B97F4A7C15ull;
  u ^= u >> 29;
  const double mantissa = 1.0 + static_cast<double>(u >> 11) * 0x1.0p-53;
  return ((u >> 5) & 1 ? -1.0 : 1.0) * std::ldexp(mantissa, static_cast<int>(u % 41) - 20);
}

TEST_CASE("floating-point sums are bit-identical across 20 runs for every computational kind and algorithm") {
  const uint32_t P = 5;
  const size_t count = 2003;
  const int func = CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE);
  for (CollKind kind : {CollKind::ReduceVec, CollKind::Scan, CollKind::ReduceScatter, CollKind::Reduce,
                        CollKind::PrefixReduce}) {
    for (const std::string& algo : algorithms(kind, false)) {
      INFO(carflow::coll_kind_name(kind), " ", algo);
      CollectiveSpec s = kind == CollKind::Reduce || kind == CollKind::PrefixReduce
                             ? cyclic_spec(kind, algo, P, count, 8, 3, 5, 1)
                             : vector_spec(kind, algo, P, count, 8, 1);
      s.dst_blksz = s.src_blksz, s.dst_offset = s.src_offset;
      std::vector<Bytes> first;
      int differing = 0;
      for (int run = 0; run < 20; ++run) {
        std::vector<Bytes> in = carflow::reference::inputs(s);
        for (uint32_t i = 0; i < P; ++i) {
          for (size_t k = 0; k + 8 <= in[i].size(); k += 8) {
            const double v = wide_operand(i, k / 8);
            std::memcpy(&in[i][k], &v, 8);
          }
        }
        std::vector<Bytes> out = carflow::reference::blank_outputs(s);
        REQUIRE(run_images(P, [&](cf_image_t me) {
                  cf_coll_set_algorithm(static_cast<int>(kind), algo.empty() ? nullptr : algo.c_str());
                  std::vector<double> src(in[me].size() / 8 + 1), dst(out[me].size() / 8 + 1);
                  if (!in[me].empty()) std::memcpy(src.data(), in[me].data(), in[me].size());
                  const cf_coll_handle_t h = start_call(s, dst.data(), src.data(), func, kAllLocal);
                  if (h != CF_COLL_INVALID_HANDLE && cf_coll_wait_sync(h) == CF_OK && !out[me].empty()) {
                    std::memcpy(out[me].data(), dst.data(), out[me].size());
                  }
                }) == CF_OK);
        if (run == 0) first = out;
        differing += out != first;
      }
      CHECK(differing == 0);
    }
  }
}

// ---- AMSAFE ----------------------------------------------------------------------

TEST_CASE("a client function without CF_COLL_AMSAFE runs only on image threads inside carflow calls") {
  // matrix_seed counts a call off an image thread as bad; large vectors make
  // helper threads move data, so the reductions they enable must be handed back.
  for (CollKind kind : {CollKind::Allreduce, CollKind::ReduceVec, CollKind::Scan, CollKind::ReduceScatter}) {
    for (const std::string& algo : algorithms(kind, true)) {
      g_calls = 0;
      check_kind(vector_spec(kind, algo, 4, 4096, sizeof(Mat2), 1), true);
      CHECK(g_calls.load() > 0);
    }
  }
}

// ---- who combines -------------------------------------------------------------------

std::atomic<uint64_t> g_on_image{0}, g_off_image{0};

// An AMSAFE element-wise int64 sum that counts where it runs.
void counting_sum(void* results, size_t, const void* left, size_t, const void* right, size_t, int, int) {
  (t_is_image ? g_on_image : g_off_image).fetch_add(1, std::memory_order_relaxed);
  int64_t a, b;
  std::memcpy(&a, left, 8);
  std::memcpy(&b, right, 8);
  a += b;
  std::memcpy(results, &a, 8);
}

TEST_CASE("with a core per image, a large incoming combine runs on the receiving image's own thread") {
  // 64 KiB is above the inproc eager size: the receiver combines straight
  // out of the sender's buffer, work the engine may give a oneTBB worker.
  // With as many images as cores the worker would share a core with them,
  // so the engine leaves it to the image's thread (engine.h,
  // copies_stay_with_images_), even for an AMSAFE function.
  const uint32_t P = std::max(1u, std::thread::hardware_concurrency());
  if (P < 2) {
    MESSAGE("skipped: one core, no messages between images");
    return;
  }
  const cf_coll_fn_entry_t table[] = {{reinterpret_cast<cf_coll_fn_t>(&counting_sum), CF_COLL_AMSAFE}};
  const size_t n = 8192;  // int64s: 64 KiB
  g_on_image = g_off_image = 0;
  std::atomic<int> wrong{0};
  REQUIRE(run_images(
              P,
              [&](cf_image_t me) {
                t_is_image = true;
                cf_coll_set_algorithm(CF_KIND_ALLREDUCE, "rabenseifner");
                std::vector<int64_t> src(n), dst(n);
                for (int round = 0; round < 100; ++round) {
                  for (size_t k = 0; k < n; ++k) src[k] = static_cast<int64_t>(me * 1000 + k + round);
                  if (cf_coll_allreduce(CF_TEAM_ALL, dst.data(), src.data(), 8, n, 0, 0, kAllLocal) != CF_OK) {
                    wrong++;
                    continue;
                  }
                  for (size_t k = 0; k < n; ++k) {
                    const int64_t want = 1000 * int64_t{P} * (P - 1) / 2 + int64_t{P} * static_cast<int64_t>(k + round);
                    if (dst[k] != want) {
                      wrong++;
                      break;
                    }
                  }
                }
                t_is_image = false;
              },
              table, 1) == CF_OK);
  CHECK(wrong.load() == 0);
  CHECK(g_on_image.load() > 0);
  // CF_PROGRESS=thread adds a progress thread that moves data for every
  // image, by design: there the combine may run on it.
  const char* progress = std::getenv("CF_PROGRESS");
  if (progress == nullptr || std::string(progress) != "thread") CHECK(g_off_image.load() == 0);
}

// ---- misuse ------------------------------------------------------------------------

struct Misuse {
  const char* what;
  const char* names;  // must appear in the error message
  std::function<cf_coll_handle_t(cf_image_t me, char* buf)> call;
};

TEST_CASE("misused computational calls return CF_ERR_BAD_ARG naming the argument, and start nothing") {
  const int sum_double = CF_BUILTIN(CF_OP_SUM, CF_DT_DOUBLE);
  const std::vector<Misuse> cases = {
      {"misaligned double src", "src",
       [=](cf_image_t, char* b) { return cf_coll_reduce_vec_nb(CF_TEAM_ALL, 0, b + 256, b + 4, 8, 4, sum_double, 0, kAllLocal); }},
      {"misaligned dst", "dst",
       [=](cf_image_t, char* b) { return cf_coll_scan_nb(CF_TEAM_ALL, b + 258, b, 8, 4, sum_double, 0, kAllLocal); }},
      {"function index not in fn_tbl", "func",
       [=](cf_image_t, char* b) { return cf_coll_scan_nb(CF_TEAM_ALL, b + 256, b, 8, 4, 7, 0, kAllLocal); }},
      {"NONCOMM function with ring forced", "func",
       [=](cf_image_t, char* b) {
         cf_coll_set_algorithm(CF_KIND_REDUCE_SCATTER, "ring");
         return cf_coll_reduce_scatter_nb(CF_TEAM_ALL, b + 512, b, sizeof(Mat2), 1, kMatrix, 0, kAllLocal);
       }},
      {"CF_COLL_EXCLUSIVE on allreduce", "CF_COLL_EXCLUSIVE",
       [=](cf_image_t, char* b) {
         return cf_coll_allreduce_nb(CF_TEAM_ALL, b + 256, b, 8, 4, sum_double, 0, kAllLocal | CF_COLL_EXCLUSIVE);
       }},
      {"overlapping src and dst", "overlap",
       [=](cf_image_t, char* b) { return cf_coll_allreduce_nb(CF_TEAM_ALL, b + 8, b, 8, 4, sum_double, 0, kAllLocal); }},
      {"in-place prefix_reduce", "src, dst",
       [=](cf_image_t, char* b) { return cf_coll_prefix_reduce_nb(CF_TEAM_ALL, b, 1, 0, b, 1, 0, 8, 4, sum_double, 0, kAllLocal); }},
      {"indefinite layout naming a missing image", "src_offset",
       [=](cf_image_t, char* b) { return cf_coll_reduce_nb(CF_TEAM_ALL, 0, b + 256, b, 0, 99, 8, 4, sum_double, 0, kAllLocal); }},
      {"dstimage out of range", "dstimage",
       [=](cf_image_t, char* b) { return cf_coll_reduce_vec_nb(CF_TEAM_ALL, 99, b + 256, b, 8, 4, sum_double, 0, kAllLocal); }},
      {"NULL counts", "counts",
       [=](cf_image_t, char* b) { return cf_coll_reduce_scatterv_nb(CF_TEAM_ALL, b + 256, b, 8, nullptr, sum_double, 0, kAllLocal); }},
      {"NULL srclist", "srclist",
       [=](cf_image_t, char* b) { return cf_coll_reducem_nb(CF_TEAM_ALL, 0, b + 256, nullptr, 1, 0, 8, 4, sum_double, 0, kSingle); }},
      {"elem_count 0", "elem_count",
       [=](cf_image_t, char* b) { return cf_coll_reduce_vec_nb(CF_TEAM_ALL, 0, b + 256, b, 8, 0, sum_double, 0, kAllLocal); }},
  };
  const uint32_t P = 3;
  for (const Misuse& m : cases) {
    INFO(m.what);
    ImageLog log(P);
    REQUIRE(run_images(
                P,
                [&](cf_image_t me) {
                  alignas(64) char buf[1024] = {};
                  const cf_coll_handle_t h = m.call(me, buf);
                  const std::string error = cf_last_error();
                  log.expect(me, h == CF_COLL_INVALID_HANDLE && cf_last_status() == CF_ERR_BAD_ARG &&
                                     contains(error, m.names),
                             [&] { return cat("status ", cf_last_status(), ", error '", error, "'"); });
                  cf_coll_set_algorithm(CF_KIND_REDUCE_SCATTER, nullptr);
                  // Nothing started: the next collective matches up and is right.
                  int64_t one = 1, sum = 0;
                  const int rc = cf_coll_allreduce(CF_TEAM_ALL, &sum, &one, 8, 1, kSumInt64, 0, kAllLocal);
                  log.expect(me, rc == CF_OK && sum == P, [&] { return cat("next allreduce: ", sum); });
                },
                kFunctions, 1) == CF_OK);
    log.report();
  }
}

}  // namespace
