// An allocator for the cost model's big arrays: blocks of 4 MiB and more
// are 2 MiB aligned and advised for transparent huge pages, because the
// simulator reads them at random (one CAR, then another image's) and with
// 4 KiB pages nearly every such read also misses the TLB. Smaller blocks
// are cache-line aligned.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace carflow {

template <typename T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <typename U>
  HugePageAllocator(const HugePageAllocator<U>&) {}

  T* allocate(size_t n) {
    constexpr size_t kHuge = size_t{2} << 20;
    const size_t bytes = n * sizeof(T);
    void* p = nullptr;
    if (bytes >= 2 * kHuge) {
      const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
      p = std::aligned_alloc(kHuge, rounded);
      if (p != nullptr) madvise(p, rounded, MADV_HUGEPAGE);  // advice only: failure is harmless
    } else {
      // Cache-line aligned, so a 32-byte element never straddles two lines.
      constexpr size_t kLine = 64;
      p = std::aligned_alloc(kLine, (std::max<size_t>(bytes, 1) + kLine - 1) / kLine * kLine);
    }
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t) { std::free(p); }
  template <typename U>
  bool operator==(const HugePageAllocator<U>&) const { return true; }
};

template <typename T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace carflow
