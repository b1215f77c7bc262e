// Sequential references for the data-movement collectives: the inputs every
// image starts with and the destination bytes every image must end with,
// computed directly from the definitions (graph/layout.h conventions).
// Used by the generator tests (graph/simulate.h), the engine and API tests
// and the benchmarks' verification.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>

#include "graph/car.h"
#include "graph/layout.h"

namespace carflow::reference {

using Bytes = std::vector<uint8_t>;

// Destination bytes no collective writes keep this value.
inline constexpr uint8_t kUntouched = 0xEE;

inline uint8_t pattern(uint32_t image, uint64_t offset, uint32_t salt = 0) {
  return static_cast<uint8_t>((image * 131u + offset * 7u + (offset >> 8) * 3u + salt * 17u) % 251u);
}

inline uint64_t src_bytes(const CollectiveSpec& s, uint32_t image) { return src_extent(s, image); }
inline uint64_t dst_bytes(const CollectiveSpec& s, uint32_t image) { return dst_extent(s, image); }

inline std::vector<Bytes> inputs(const CollectiveSpec& s, uint32_t salt = 0) {
  std::vector<Bytes> src(s.images);
  for (uint32_t i = 0; i < s.images; ++i) {
    src[i].resize(src_bytes(s, i));
    for (uint64_t k = 0; k < src[i].size(); ++k) src[i][k] = pattern(i, k, salt);
  }
  return src;
}

// Destination buffers as the test hands them to the collective.
inline std::vector<Bytes> blank_outputs(const CollectiveSpec& s) {
  std::vector<Bytes> dst(s.images);
  for (uint32_t i = 0; i < s.images; ++i) dst[i].assign(dst_bytes(s, i), kUntouched);
  return dst;
}

// A uniform spec for tests: `kind` on P images with a root and block size;
// permute gets a fixed permutation that is not the identity for P > 1.
inline CollectiveSpec test_spec(CollKind kind, uint32_t P, uint32_t root, uint64_t nbytes) {
  CollectiveSpec s;
  s.kind = kind;
  s.images = P;
  s.root = root;
  s.nbytes = nbytes;
  if (kind == CollKind::Permute) {
    for (uint32_t i = 0; i < P; ++i) s.perm.push_back((i * (P % 3 == 0 ? 1 : 3) + 1) % P);
  }
  return s;
}

// Turns a uniform spec into a v form for tests: block sizes that vary (some
// zero) and, with `with_displs`, blocks laid out in reverse rank order with
// gaps (not for exchange, whose v form has no displacements).
inline void make_variable(CollectiveSpec* s, bool with_displs) {
  const uint64_t P = s->images, n = s->nbytes;
  const uint64_t entries = s->kind == CollKind::Exchange ? P * P : P;
  s->counts.clear();
  for (uint64_t i = 0; i < entries; ++i) s->counts.push_back(i % 5 == 3 ? 0 : (i * 37 + n) % (2 * n + 1));
  s->nbytes = 0;
  s->displs.clear();
  if (with_displs && s->kind != CollKind::Exchange) {
    uint64_t next = 3;
    s->displs.assign(P, 0);
    for (uint64_t i = P; i-- > 0;) {
      s->displs[i] = next;
      next += s->counts[i] + 5;
    }
  }
}

// Data-movement kinds only (broadcast, scatter, gather, gather_all, exchange, permute).
inline std::vector<Bytes> expected(const CollectiveSpec& s, const std::vector<Bytes>& src) {
  std::vector<Bytes> dst = blank_outputs(s);
  const uint32_t P = s.images;
  auto put = [](Bytes& to, uint64_t to_off, const Bytes& from, uint64_t from_off, uint64_t n) {
    for (uint64_t k = 0; k < n; ++k) to[to_off + k] = from[from_off + k];
  };
  switch (s.kind) {
    case CollKind::Broadcast:
      for (uint32_t i = 0; i < P; ++i) put(dst[i], 0, src[s.root], 0, s.nbytes);
      break;
    case CollKind::Scatter: {
      const BlockLayout L(s);
      for (uint32_t i = 0; i < P; ++i) put(dst[i], 0, src[s.root], L.offset(i), L.length(i));
      break;
    }
    case CollKind::Gather:
    case CollKind::GatherAll: {
      const BlockLayout L(s);
      for (uint32_t to = 0; to < P; ++to) {
        if (s.kind == CollKind::Gather && to != s.root) continue;
        for (uint32_t i = 0; i < P; ++i) put(dst[to], L.offset(i), src[i], 0, L.length(i));
      }
      break;
    }
    case CollKind::Exchange: {
      const ExchangeLayout L(s);
      for (uint32_t i = 0; i < P; ++i) {
        for (uint32_t j = 0; j < P; ++j) put(dst[j], L.recv_offset(j, i), src[i], L.send_offset(i, j), L.length(i, j));
      }
      break;
    }
    case CollKind::Permute:
      for (uint32_t i = 0; i < P; ++i) put(dst[s.perm[i]], 0, src[i], 0, s.nbytes);
      break;
    default: break;  // barrier; computational kinds: expected_reduction
  }
  return dst;
}

// dst = left op right over `bytes` bytes, element-wise (dst may alias).
using Combine = std::function<void(void* dst, const void* left, const void* right, size_t bytes)>;

// Bytes added mod 256 (CF_OP_SUM on CF_DT_UINT8): commutative, for any
// element size.
inline void byte_sum(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t k = 0; k < bytes; ++k) {
    static_cast<uint8_t*>(dst)[k] =
        static_cast<uint8_t>(static_cast<const uint8_t*>(left)[k] + static_cast<const uint8_t*>(right)[k]);
  }
}

// A non-commutative operator that never forgets an operand: 16-byte
// elements (h, p) of two uint64, (h1, p1) op (h2, p2) = (h1 * q2 + h2, q1 * q2)
// with q = p | 1, a polynomial hash of the operand sequence (associative; q
// odd, so products never vanish mod 2^64, as a product of 2x2 matrices mod
// 2^32 can, after which it no longer sees an operand out of order).
inline void sequence_hash(void* dst, const void* left, const void* right, size_t bytes) {
  for (size_t off = 0; off + 16 <= bytes; off += 16) {
    uint64_t a[2], b[2];
    std::memcpy(a, static_cast<const char*>(left) + off, 16);
    std::memcpy(b, static_cast<const char*>(right) + off, 16);
    const uint64_t c[2] = {a[0] * (b[1] | 1) + b[0], (a[1] | 1) * (b[1] | 1)};
    std::memcpy(static_cast<char*>(dst) + off, c, 16);
  }
}

// Computational kinds: the destination bytes every image must end with,
// combining strictly left to right in rank (or array) order, so the result
// is exact for non-commutative operators.
inline std::vector<Bytes> expected_reduction(const CollectiveSpec& s, const std::vector<Bytes>& src,
                                             const Combine& op) {
  std::vector<Bytes> dst = blank_outputs(s);
  const uint32_t P = s.images;
  const uint64_t es = s.elem_size, n = s.nbytes;
  // Element-wise reduction of images [0, upto) over bytes [off, off + len).
  auto fold_images = [&](uint32_t upto, uint64_t off, uint64_t len) {
    Bytes acc(src[0].begin() + off, src[0].begin() + off + len);
    for (uint32_t i = 1; i < upto; ++i) op(acc.data(), acc.data(), src[i].data() + off, len);
    return acc;
  };
  switch (s.kind) {
    case CollKind::Allreduce:
    case CollKind::ReduceVec: {
      const Bytes all = fold_images(P, 0, n);
      for (uint32_t i = 0; i < P; ++i) {
        if (s.kind == CollKind::Allreduce || i == s.root) dst[i] = all;
      }
      break;
    }
    case CollKind::Scan: {
      const bool exclusive = (s.flags & kExclusiveFlag) != 0;
      for (uint32_t i = exclusive ? 1 : 0; i < P; ++i) dst[i] = fold_images(exclusive ? i : i + 1, 0, n);
      break;
    }
    case CollKind::ReduceScatter: {
      const BlockLayout L(s);
      for (uint32_t i = 0; i < P; ++i) dst[i] = fold_images(P, L.offset(i), L.length(i));
      break;
    }
    case CollKind::Reduce:
    case CollKind::PrefixReduce: {
      const CyclicLayout in = src_cyclic(s), out = dst_cyclic(s);
      const uint64_t count = n / es;
      Bytes acc(es);
      for (uint64_t k = 0; k < count; ++k) {
        const uint8_t* x = src[in.owner(k)].data() + in.local(k) * es;
        if (k == 0) {
          std::copy(x, x + es, acc.begin());
        } else {
          op(acc.data(), acc.data(), x, es);
        }
        if (s.kind == CollKind::PrefixReduce) {
          std::copy(acc.begin(), acc.end(), dst[out.owner(k)].begin() + out.local(k) * es);
        }
      }
      if (s.kind == CollKind::Reduce && count > 0) dst[s.root] = acc;
      break;
    }
    default: break;
  }
  return dst;
}

}  // namespace carflow::reference
