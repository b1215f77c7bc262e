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
// Computational kinds (nbytes = elem_count * elem_size, whole elements):
//   allreduce   user_src and user_dst are nbytes on every image.
//   reduce_vec  user_src nbytes on every image; user_dst nbytes on the root.
//   scan        user_src and user_dst nbytes; image i's dst = x_0 op .. op x_i,
//               or with kExclusiveFlag x_0 op .. op x_{i-1} (image 0's dst
//               is not written).
//   reduce_scatter  user_src holds P blocks (BlockLayout: nbytes each, or
//               counts packed in rank order, no displs); user_dst is the
//               image's own block of the element-wise result.
//   reduce      (GASNet notes) user_src is the image's part of a block-cyclic array
//               (CyclicLayout of src_blksz, src_offset); the root's user_dst
//               is one element: all used elements combined in order.
//   prefix_reduce (GASNet notes) user_src as for reduce; user_dst the image's part
//               of the destination array (dst_blksz, dst_offset); element k
//               of the destination gets elements 0..k of the source combined.
#pragma once

#include <cstdint>
#include <optional>
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

// A block-cyclic distributed array (GASNet collectives notes v1.7, "UPC-imposed complications"):
// the used elements k = 0..count-1 are global elements offset+k of an array
// dealt to the images in blocks of `blksz` elements, block B on image B % P
// at local element (B / P) * blksz + g % blksz. blksz == 0 is the indefinite
// layout: all elements on image `offset`, element k at local element k.
// An image's used elements are one contiguous run of its buffer, in global
// order, cut into chunks at block boundaries; chunk c of the image with
// virtual rank v is global block B0 + c*P + v (B0 the first used block), so
// "row" c of the array is chunk c of every image in virtual-rank order.
class CyclicLayout {
 public:
  CyclicLayout(uint32_t images, uint64_t blksz, uint64_t offset, uint64_t count);
  uint32_t owner(uint64_t k) const;  // image of used element k
  uint64_t local(uint64_t k) const;  // its element index in that image's buffer
  uint64_t local_first(uint32_t i) const { return first_[i]; }
  uint64_t count(uint32_t i) const { return count_[i]; }
  uint64_t chunks(uint32_t i) const { return chunks_[i]; }
  uint64_t first_chunk(uint32_t i) const { return first_chunk_[i]; }  // elements
  uint64_t chunk() const { return blksz_; }       // 0: one chunk (indefinite)
  uint32_t first_image() const { return i0_; }    // owner of element 0
  uint32_t virtual_rank(uint32_t i) const { return (i + P_ - i0_) % P_; }
  uint32_t real_image(uint32_t v) const { return (v + i0_) % P_; }
  // Elements image i's buffer must hold (0 when it has none).
  uint64_t extent(uint32_t i) const { return count_[i] ? first_[i] + count_[i] : 0; }
  uint64_t rows() const { return chunks_[i0_]; }  // chunks of the first image

 private:
  uint32_t P_;
  uint64_t blksz_, offset_, total_;
  uint32_t i0_ = 0;
  std::vector<uint64_t> first_, count_, chunks_, first_chunk_;
};
CyclicLayout src_cyclic(const CollectiveSpec& spec);
CyclicLayout dst_cyclic(const CollectiveSpec& spec);

// Bytes of image `image`'s user source / destination buffer for a spec (0
// where the image does not use that buffer).
uint64_t src_extent(const CollectiveSpec& spec, uint32_t image);
uint64_t dst_extent(const CollectiveSpec& spec, uint32_t image);
// The same for every image of one spec, its layout built once (an
// exchange's holds P^2 offsets): for callers that ask about all images.
// `spec` must outlive it.
class Extents {
 public:
  explicit Extents(const CollectiveSpec& spec);
  uint64_t src(uint32_t image) const;
  uint64_t dst(uint32_t image) const;

 private:
  const CollectiveSpec& spec_;
  std::optional<BlockLayout> blocks_;
  std::optional<ExchangeLayout> exchange_;
  std::optional<CyclicLayout> src_cyclic_, dst_cyclic_;
};

// Checks the layout fields of `spec` against its kind: counts / displs / perm
// sizes, no overflow (every extent below 2^48), gather and gather_all blocks
// that do not overlap, perm a permutation. Returns false with *error naming
// the field and the rule. The API, the JSON loader and the CLI call it
// before any generator sees the spec.
bool check_layout(const CollectiveSpec& spec, std::string* error);

}  // namespace carflow
