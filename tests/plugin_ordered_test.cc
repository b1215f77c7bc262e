// A plug-in's order-keeping scan and reduce_vec (tests/ordered_plugin.c:
// cf_dag_fold, cf_dag_prefix and cf_dag_recv_reduce_left, shaped by
// spec->radix) pass the checker with a non-commutative operator at every P
// from 1 to 9 and several radixes, and give the ordered product of a
// CF_COLL_NONCOMM function through the engine; CF_TREE_RADIX (3, from
// tests/BUILD) reaches the generator. A copy that reverses the order is
// caught both ways, so these checks can fail.
#include <carflow/generator.h>

#include <cstring>
#include <string>
#include <vector>

#include "graph/check.h"
#include "graph/reference.h"
#include "tests/ordered_plugin.h"
#include "tests/test_util.h"

namespace {

using carflow::CollectiveSpec;
using carflow::CollKind;
using carflow_test::cat;
using carflow_test::Mat2;
using carflow_test::run_images;

ordered_record_t g_scan, g_reduce, g_reversed_scan, g_reversed_reduce;

bool registered() {
  static const int rc = [] {
    const int ok = ordered_plugin_register("ordered", 0, &g_scan, &g_reduce);
    return ok != CF_OK ? ok : ordered_plugin_register("reversed", 1, &g_reversed_scan, &g_reversed_reduce);
  }();
  return rc == CF_OK;
}

constexpr uint32_t kEngineRadix = 3;  // CF_TREE_RADIX in tests/BUILD; the default is 4

CollectiveSpec spec_of(CollKind kind, const std::string& algorithm, uint32_t P, uint32_t radix, uint64_t n,
                       uint32_t root, bool exclusive) {
  CollectiveSpec s;
  s.kind = kind;
  s.algorithm = algorithm;
  s.images = P;
  s.root = root;
  s.elem_size = 16;  // the checker's sequence hash works on 16-byte elements
  s.nbytes = n * s.elem_size;
  s.radix = radix;
  s.flags = exclusive ? carflow::kExclusiveFlag : 0;
  return s;
}

// The messages ordered_plugin.c promises (its header comment).
uint64_t expected_messages(const CollectiveSpec& s) {
  const uint32_t k = ordered_plugin_group(s.radix), groups = (s.images + k - 1) / k;
  const uint64_t n = s.nbytes / s.elem_size, members = s.images - groups;  // ranks that are not leaders
  const bool scan = s.kind == CollKind::Scan;
  uint64_t m = members * n * (scan ? 2 : 1) + (groups - 1);
  if (!scan && s.root != (groups - 1) * k) ++m;
  return m;
}

// Every shape the checker tries: P, radix, elements, root or exclusive.
template <typename F>
void for_each_spec(const std::string& prefix, F&& f) {
  for (uint32_t P = 1; P <= 9; ++P) {
    for (uint32_t radix : {2u, 3u, 4u}) {
      for (uint64_t n : {1u, 3u}) {
        for (uint32_t root : {0u, P / 2, P - 1}) {
          f(spec_of(CollKind::ReduceVec, prefix + "_reduce", P, radix, n, root, false));
        }
        for (bool exclusive : {false, true}) f(spec_of(CollKind::Scan, prefix + "_scan", P, radix, n, 0, exclusive));
      }
    }
  }
}

std::string describe(const CollectiveSpec& s) {
  return cat(s.algorithm, " P=", s.images, " radix=", s.radix, " elements=", s.nbytes / s.elem_size,
             " root=", s.root, " exclusive=", (s.flags & carflow::kExclusiveFlag) != 0);
}

// The checker's verdict (carflow check's) with the non-commutative sequence hash.
bool passes_check(const CollectiveSpec& s, int orders, std::string* failure, uint64_t* messages = nullptr) {
  carflow::GlobalDag dag;
  return carflow::check_generator(s, orders, &dag, failure, messages, &carflow::reference::sequence_hash);
}

TEST_CASE("a plug-in's scan and reduce_vec on fold, prefix and recv_reduce_left pass the checker in rank order") {
  REQUIRE(registered());
  for_each_spec("ordered", [](const CollectiveSpec& s) {
    INFO(describe(s));
    std::string failure;
    uint64_t messages = 0;
    CHECK_MESSAGE(passes_check(s, 3, &failure, &messages), failure);
    CHECK(messages == expected_messages(s));  // the radix shapes the DAG
    CHECK(__atomic_load_n(&(s.kind == CollKind::Scan ? g_scan : g_reduce).radix_seen, __ATOMIC_RELAXED) == s.radix);
  });
}

TEST_CASE("the same plug-in with its operands reversed fails the checker from P = 2 on") {
  REQUIRE(registered());
  for_each_spec("reversed", [](const CollectiveSpec& s) {
    INFO(describe(s));
    std::string failure;
    const bool ok = passes_check(s, 1, &failure);
    CHECK(ok == (s.images == 1));
    if (!ok) CHECK(carflow_test::contains(failure, "differs from the reference"));
  });
}

// results[i] = left operands, then right operands 0..i, multiplied in order.
void matrix_product(void* results, size_t result_count, const void* left, size_t left_count, const void* right,
                    size_t elem_size, int, int) {
  Mat2 acc{};
  for (size_t i = 0; i < left_count + result_count; ++i) {
    Mat2 x;
    const char* from = i < left_count ? static_cast<const char*>(left) + i * elem_size
                                      : static_cast<const char*>(right) + (i - left_count) * elem_size;
    std::memcpy(&x, from, sizeof x);
    acc = i == 0 ? x : acc * x;
    if (i >= left_count) std::memcpy(static_cast<char*>(results) + (i - left_count) * elem_size, &acc, sizeof acc);
  }
}
const cf_coll_fn_entry_t kFunctions[] = {{reinterpret_cast<cf_coll_fn_t>(&matrix_product), CF_COLL_NONCOMM}};
constexpr int kMatrix = 0;
constexpr size_t kCount = 3;

// Images first..last of element j multiplied in rank order.
Mat2 product(uint32_t first, uint32_t last, size_t j) {
  Mat2 acc = carflow_test::matrix_operand(first, j);
  for (uint32_t i = first + 1; i <= last; ++i) acc = acc * carflow_test::matrix_operand(i, j);
  return acc;
}

// What one image's scan (inclusive, exclusive) and reduce_vec gave, right or wrong.
struct Outcome {
  bool ran = true, inclusive = true, exclusive = true, reduce = true;
  std::string error;
};

Outcome run_once(const char* prefix, uint32_t P, cf_image_t me) {
  Outcome o;
  std::vector<Mat2> src(kCount), dst(kCount);
  for (size_t j = 0; j < kCount; ++j) src[j] = carflow_test::matrix_operand(me, j);
  const std::string scan = cat(prefix, "_scan"), reduce = cat(prefix, "_reduce");
  int rc = cf_coll_set_algorithm(CF_KIND_SCAN, scan.c_str());
  if (rc == CF_OK) rc = cf_coll_set_algorithm(CF_KIND_REDUCE_VEC, reduce.c_str());
  for (bool exclusive : {false, true}) {
    dst.assign(kCount, Mat2{7, 7, 7, 7});
    const int flags = carflow_test::kAllLocal | (exclusive ? CF_COLL_EXCLUSIVE : 0);
    if (rc == CF_OK) rc = cf_coll_scan(CF_TEAM_ALL, dst.data(), src.data(), sizeof(Mat2), kCount, kMatrix, 0, flags);
    bool& right = exclusive ? o.exclusive : o.inclusive;
    for (size_t j = 0; j < kCount; ++j) {
      const Mat2 want = !exclusive ? product(0, me, j) : me == 0 ? Mat2{7, 7, 7, 7} : product(0, me - 1, j);
      right = right && dst[j] == want;
    }
  }
  const uint32_t root = P / 2;
  dst.assign(kCount, Mat2{});
  if (rc == CF_OK) {
    rc = cf_coll_reduce_vec(CF_TEAM_ALL, root, dst.data(), src.data(), sizeof(Mat2), kCount, kMatrix, 0,
                            carflow_test::kAllLocal);
  }
  for (size_t j = 0; me == root && j < kCount; ++j) o.reduce = o.reduce && dst[j] == product(0, P - 1, j);
  o.ran = rc == CF_OK;
  if (!o.ran) o.error = cat("status ", rc, ": ", cf_last_error());
  cf_coll_set_algorithm(CF_KIND_SCAN, nullptr);
  cf_coll_set_algorithm(CF_KIND_REDUCE_VEC, nullptr);
  return o;
}

TEST_CASE("through the engine the plug-in gives the ordered product of a NONCOMM function, with CF_TREE_RADIX") {
  REQUIRE(registered());
  const uint32_t scan_calls = g_scan.calls, reduce_calls = g_reduce.calls;
  for (uint32_t P : {1u, 2u, 3u, 5u, 8u}) {
    carflow_test::ImageLog log(P);
    const int status = run_images(
        P,
        [&](cf_image_t me) {
          const Outcome o = run_once("ordered", P, me);
          log.expect(me, o.ran, [&] { return cat("P=", P, ": ", o.error); });
          log.expect(me, o.inclusive, [&] { return cat("P=", P, ": inclusive scan differs from the product"); });
          log.expect(me, o.exclusive, [&] { return cat("P=", P, ": exclusive scan differs from the product"); });
          log.expect(me, o.reduce, [&] { return cat("P=", P, ": reduce_vec at root ", P / 2, " differs"); });
        },
        kFunctions, 1);
    CHECK(status == CF_OK);
    log.report();
  }
  CHECK(g_scan.calls > scan_calls);
  CHECK(g_reduce.calls > reduce_calls);
  CHECK(g_scan.radix_seen == kEngineRadix);
  CHECK(g_reduce.radix_seen == kEngineRadix);
}

TEST_CASE("through the engine the reversed plug-in's products differ on some image from P = 2 on") {
  REQUIRE(registered());
  for (uint32_t P : {2u, 3u, 5u, 8u}) {
    std::vector<Outcome> seen(P);
    const int status = run_images(P, [&](cf_image_t me) { seen[me] = run_once("reversed", P, me); }, kFunctions, 1);
    CHECK(status == CF_OK);
    bool inclusive = true, exclusive = true, reduce = true;
    for (const Outcome& o : seen) {
      INFO("P=", P, " ", o.error);
      CHECK(o.ran);
      inclusive = inclusive && o.inclusive;
      exclusive = exclusive && o.exclusive;
      reduce = reduce && o.reduce;
    }
    INFO("P=", P);
    CHECK_FALSE(inclusive);
    CHECK_FALSE(exclusive);
    CHECK_FALSE(reduce);
  }
  CHECK(g_reversed_scan.radix_seen == kEngineRadix);
}

}  // namespace
