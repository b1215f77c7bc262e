// Helpers shared by the API-level tests.
#pragma once

#include <carflow/carflow.h>
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

namespace carflow_test {

// Runs f(image) on n image threads (cf_run_images) and returns its status.
template <typename F>
int run_images(uint32_t n, F&& f, const cf_coll_fn_entry_t* table = nullptr, size_t count = 0) {
  using Fn = std::remove_reference_t<F>;
  auto trampoline = [](cf_image_t image, void* arg) { (*static_cast<Fn*>(arg))(image); };
  return cf_run_images(n, table, count, trampoline, &f);
}

inline constexpr int kAllLocal = CF_COLL_IN_MYSYNC | CF_COLL_OUT_MYSYNC | CF_COLL_LOCAL |
                                 CF_COLL_ALL_THREADS;

// A deterministic byte pattern that differs per (seed, index).
inline uint8_t pattern_byte(uint64_t seed, uint64_t i) {
  uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 31;
  return static_cast<uint8_t>(x);
}

inline std::vector<uint8_t> pattern(uint64_t seed, size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = pattern_byte(seed, i);
  return v;
}

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// What image threads saw: a count of checks made and a description (with its
// parameters) of every check that failed. Each image writes only its own
// entries; the main thread reports after the run.
class ImageLog {
 public:
  explicit ImageLog(uint32_t images) : failures_(images), checks_(images, 0) {}

  template <typename Describe>
  void expect(uint32_t image, bool ok, Describe describe) {
    ++checks_[image];
    if (!ok) failures_[image].push_back(describe());
  }

  // Main thread only, after the run: the first 30 failures, then a count.
  void report() const {
    size_t shown = 0, total = 0;
    for (size_t image = 0; image < failures_.size(); ++image) {
      for (const std::string& failure : failures_[image]) {
        ++total;
        if (++shown > 30) continue;
        FAIL_CHECK("image " << image << ": " << failure);
      }
    }
    if (total > 30) FAIL_CHECK((total - 30) << " more failures not shown");
  }
  size_t checks() const {
    size_t n = 0;
    for (size_t c : checks_) n += c;
    return n;
  }

 private:
  std::vector<std::vector<std::string>> failures_;
  std::vector<size_t> checks_;
};

// 2x2 matrices over the integers mod 2^64: associative, not commutative,
// so any reordering of operands changes the product.
struct Mat2 {
  uint64_t a, b, c, d;
  bool operator==(const Mat2&) const = default;
};
inline Mat2 operator*(const Mat2& x, const Mat2& y) {
  return {x.a * y.a + x.b * y.c, x.a * y.b + x.b * y.d, x.c * y.a + x.d * y.c, x.c * y.b + x.d * y.d};
}
inline std::ostream& operator<<(std::ostream& out, const Mat2& m) {
  return out << "[[" << m.a << ", " << m.b << "], [" << m.c << ", " << m.d << "]]";
}
inline Mat2 matrix_operand(uint32_t image, size_t j) {
  return {1 + (image + j) % 3, image + 1 + j % 4, (image * (j + 1)) % 5, 1 + image % 2};
}

// A file name in the test's scratch directory, unique to this process.
inline std::string temp_path(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return cat(dir != nullptr && *dir != '\0' ? dir : "/tmp", "/", name, "_", getpid(), ".json");
}

}  // namespace carflow_test
