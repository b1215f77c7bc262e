// SmallVector: a vector that keeps up to N elements inside itself and moves
// to the heap only beyond that. A CAR's dependency list is short (one to
// three for nearly every CAR), and a heap block per CAR made allocation a
// large part of generating and freeing DAGs at millions of images.
// Trivially copyable elements only, so growing and moving are memcpy.
#pragma once

#include <algorithm>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <type_traits>

namespace carflow {

template <typename T, uint32_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector copies its elements with memcpy");
  static_assert(N > 0, "SmallVector needs room for at least one element inside");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVector() noexcept {}
  explicit SmallVector(size_type n, const T& value = T()) { resize(n, value); }
  SmallVector(std::initializer_list<T> init) { assign(init.begin(), init.end()); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(const SmallVector& other) { assign(other.begin(), other.end()); }
  SmallVector(SmallVector&& other) noexcept { take(other); }
  ~SmallVector() { release(); }

  SmallVector& operator=(const SmallVector& other) {
    if (this != &other) assign(other.begin(), other.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& other) noexcept {
    if (this != &other) {
      release();
      take(other);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> init) {
    assign(init.begin(), init.end());
    return *this;
  }

  template <std::input_iterator It>
  void assign(It first, It last) {
    clear();
    if constexpr (std::forward_iterator<It>) reserve(static_cast<size_type>(std::distance(first, last)));
    for (; first != last; ++first) push_back(*first);
  }

  T* data() noexcept { return on_heap() ? heap_ : inline_data(); }
  const T* data() const noexcept { return on_heap() ? heap_ : inline_data(); }
  size_type size() const noexcept { return size_; }
  size_type capacity() const noexcept { return capacity_; }
  bool empty() const noexcept { return size_ == 0; }

  iterator begin() noexcept { return data(); }
  iterator end() noexcept { return data() + size_; }
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept { return data() + size_; }
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }

  T& operator[](size_type i) { return data()[i]; }
  const T& operator[](size_type i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }

  void push_back(const T& value) {
    if (size_ == capacity_) {
      const T copy = value;  // value may live in the block that grow() frees
      grow(size_ + 1);
      new (data() + size_) T(copy);
    } else {
      new (data() + size_) T(value);
    }
    ++size_;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T{std::forward<Args>(args)...});
    return back();
  }
  void pop_back() { --size_; }
  void clear() noexcept { size_ = 0; }
  void reserve(size_type n) {
    if (n > capacity_) grow(n);
  }
  void resize(size_type n, const T& value = T()) {
    reserve(n);
    for (size_type i = size_; i < n; ++i) new (data() + i) T(value);
    size_ = static_cast<uint32_t>(n);
  }
  iterator insert(const_iterator pos, const T& value) {
    const size_type at = static_cast<size_type>(pos - begin());
    push_back(value);
    std::rotate(begin() + at, end() - 1, end());
    return begin() + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_type at = static_cast<size_type>(pos - begin());
    const SmallVector added(first, last);  // the range may lie in this vector
    reserve(size_ + added.size());
    std::memmove(static_cast<void*>(data() + at + added.size()), data() + at, (size_ - at) * sizeof(T));
    if (!added.empty()) std::memcpy(static_cast<void*>(data() + at), added.data(), added.size() * sizeof(T));
    size_ += added.size_;
    return begin() + at;
  }
  iterator erase(const_iterator first, const_iterator last) {
    const size_type at = static_cast<size_type>(first - begin()), n = static_cast<size_type>(last - first);
    std::memmove(static_cast<void*>(data() + at), data() + at + n, (size_ - at - n) * sizeof(T));
    size_ -= static_cast<uint32_t>(n);
    return begin() + at;
  }
  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }

  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  bool on_heap() const noexcept { return capacity_ > N; }
  T* inline_data() noexcept { return reinterpret_cast<T*>(inline_); }
  const T* inline_data() const noexcept { return reinterpret_cast<const T*>(inline_); }

  void grow(size_type at_least) {
    size_type cap = std::max<size_type>(at_least, size_type{capacity_} * 2);
    if (cap > UINT32_MAX) cap = UINT32_MAX;
    if (at_least > cap) throw std::bad_alloc();
    T* block = static_cast<T*>(std::malloc(cap * sizeof(T)));
    if (block == nullptr) throw std::bad_alloc();
    if (size_ > 0) std::memcpy(static_cast<void*>(block), data(), size_ * sizeof(T));
    release();
    heap_ = block;
    capacity_ = static_cast<uint32_t>(cap);
  }
  void release() noexcept {
    if (on_heap()) std::free(heap_);
  }
  // Leaves `other` empty and inline.
  void take(SmallVector& other) noexcept {
    size_ = other.size_;
    capacity_ = other.capacity_;
    std::memcpy(inline_, other.inline_, sizeof inline_);  // the heap pointer, or the elements
    other.size_ = 0;
    other.capacity_ = N;
  }

  uint32_t size_ = 0;
  uint32_t capacity_ = N;  // above N: the elements are on the heap
  union {
    alignas(T) unsigned char inline_[N * sizeof(T) > sizeof(T*) ? N * sizeof(T) : sizeof(T*)] = {};
    T* heap_;
  };
};

}  // namespace carflow
