// Where each image's block lives in the user buffers of a data-movement
// collective (scatter, gather, gather_all, exchange, permute), for the
// uniform forms (every block spec.nbytes, packed in rank order) and the
// variable-size "v" forms (spec.counts / spec.displs, graph/car.h).
//
// Buffer conventions every generator of these kinds follows (team ranks):
//   scatter     root: user_src holds all blocks (BlockLayout); every image's
//               user_dst is its own block (length(image) bytes).
//   gather      every image's user_src is its own block; the root's user_dst
//               holds all blocks.
//   gather_all  user_src is the image's own block; user_dst holds all blocks.
//   exchange    user_src holds the blocks for images 0..P-1 packed in rank
//               order; user_dst the blocks from images 0..P-1 (ExchangeLayout).
//   permute     user_src and user_dst are nbytes each; image i's source goes
//               to image perm[i]'s destination.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/car.h"

namespace carflow {

// Blocks of scatter / gather / gather_all: block i belongs to image i.
class BlockLayout {
 public:
  explicit BlockLayout(const CollectiveSpec& spec);
  uint64_t offset(uint32_t i) const { return uniform_ ? i * nbytes_ : offsets_[i]; }
  uint64_t length(uint32_t i) const { return uniform_ ? nbytes_ : lengths_[i]; }
  // Bytes of the buffer that holds all blocks: max(offset + length).
  uint64_t extent() const { return extent_; }
  // Every block the same size, packed in rank order.
  bool packed() const { return packed_; }

 private:
  bool uniform_ = true, packed_ = true;
  uint64_t nbytes_ = 0, extent_ = 0;
  std::vector<uint64_t> offsets_, lengths_;
};

// Blocks of exchange: (from, to) pairs, packed in rank order on both sides.
class ExchangeLayout {
 public:
  explicit ExchangeLayout(const CollectiveSpec& spec);
  uint64_t length(uint32_t from, uint32_t to) const {
    return uniform_ ? nbytes_ : counts_[uint64_t{from} * P_ + to];
  }
  // Offset of block (from -> to) in from's source / in to's destination.
  uint64_t send_offset(uint32_t from, uint32_t to) const {
    return uniform_ ? uint64_t{to} * nbytes_ : send_off_[uint64_t{from} * P_ + to];
  }
  uint64_t recv_offset(uint32_t to, uint32_t from) const {
    return uniform_ ? uint64_t{from} * nbytes_ : recv_off_[uint64_t{to} * P_ + from];
  }
  uint64_t src_bytes(uint32_t image) const;
  uint64_t dst_bytes(uint32_t image) const;
  bool uniform() const { return uniform_; }

 private:
  uint32_t P_ = 1;
  bool uniform_ = true;
  uint64_t nbytes_ = 0;
  std::vector<uint64_t> counts_, send_off_, recv_off_;
};

// Bytes of image `image`'s user source / destination buffer for a
// data-movement spec (0 where the image does not use that buffer).
uint64_t src_extent(const CollectiveSpec& spec, uint32_t image);
uint64_t dst_extent(const CollectiveSpec& spec, uint32_t image);

// Checks the layout fields of `spec` against its kind: counts / displs / perm
// sizes, no overflow (every extent below 2^48), gather and gather_all blocks
// that do not overlap, perm a permutation. Returns false with *error naming
// the field and the rule. The API, the JSON loader and the CLI call it
// before any generator sees the spec.
bool check_layout(const CollectiveSpec& spec, std::string* error);

}  // namespace carflow
