#include "graph/layout.h"

#include <algorithm>
#include <numeric>

namespace carflow {
namespace {

constexpr uint64_t kMaxExtent = uint64_t{1} << 48;

std::string at(const char* field, uint64_t i) { return std::string(field) + "[" + std::to_string(i) + "]"; }

}  // namespace

BlockLayout::BlockLayout(const CollectiveSpec& spec) : nbytes_(spec.nbytes) {
  const uint32_t P = spec.images;
  if (spec.counts.empty()) {
    extent_ = uint64_t{P} * nbytes_;
    return;
  }
  uniform_ = false;
  lengths_ = spec.counts;
  offsets_.resize(P);
  uint64_t next = 0;
  for (uint32_t i = 0; i < P; ++i) {
    offsets_[i] = spec.displs.empty() ? next : spec.displs[i];
    next += lengths_[i];
    extent_ = std::max(extent_, offsets_[i] + lengths_[i]);
  }
  packed_ = spec.displs.empty() || spec.displs == [&] {
    std::vector<uint64_t> p(P);
    std::exclusive_scan(lengths_.begin(), lengths_.end(), p.begin(), uint64_t{0});
    return p;
  }();
  if (packed_) {
    for (uint32_t i = 1; i < P && packed_; ++i) packed_ = lengths_[i] == lengths_[0];
  }
}

ExchangeLayout::ExchangeLayout(const CollectiveSpec& spec) : P_(spec.images), nbytes_(spec.nbytes) {
  if (spec.counts.empty()) return;
  uniform_ = false;
  counts_ = spec.counts;
  const uint64_t n = uint64_t{P_} * P_;
  send_off_.resize(n);
  recv_off_.resize(n);
  for (uint32_t a = 0; a < P_; ++a) {
    uint64_t s = 0, r = 0;
    for (uint32_t b = 0; b < P_; ++b) {
      send_off_[uint64_t{a} * P_ + b] = s;
      s += counts_[uint64_t{a} * P_ + b];   // a sends to b
      recv_off_[uint64_t{a} * P_ + b] = r;
      r += counts_[uint64_t{b} * P_ + a];   // a receives from b
    }
  }
}

uint64_t ExchangeLayout::src_bytes(uint32_t image) const {
  if (uniform_) return uint64_t{P_} * nbytes_;
  return send_offset(image, P_ - 1) + length(image, P_ - 1);
}

uint64_t ExchangeLayout::dst_bytes(uint32_t image) const {
  if (uniform_) return uint64_t{P_} * nbytes_;
  return recv_offset(image, P_ - 1) + length(P_ - 1, image);
}

CyclicLayout::CyclicLayout(uint32_t images, uint64_t blksz, uint64_t offset, uint64_t count)
    : P_(images), blksz_(blksz), offset_(offset), total_(count), first_(images, 0),
      count_(images, 0), chunks_(images, 0), first_chunk_(images, 0) {
  if (blksz == 0) {  // indefinite: everything on image `offset`
    i0_ = static_cast<uint32_t>(offset % images);
    count_[i0_] = count;
    chunks_[i0_] = count ? 1 : 0;
    first_chunk_[i0_] = count;
    return;
  }
  const uint64_t b0 = offset / blksz;
  i0_ = static_cast<uint32_t>(b0 % images);
  if (count == 0) return;
  const uint64_t last = offset + count - 1, b_last = last / blksz;
  for (uint32_t v = 0; v < images; ++v) {
    const uint64_t b = b0 + v;  // first block of the image with virtual rank v
    if (b > b_last) break;
    const uint32_t i = real_image(v);
    const uint64_t b_end = b_last - (b_last - b) % images;  // its last block
    const uint64_t g_first = std::max(offset, b * blksz);
    const uint64_t g_end = std::min(last, b_end * blksz + blksz - 1);
    first_[i] = local(g_first - offset);
    count_[i] = local(g_end - offset) - first_[i] + 1;
    chunks_[i] = (b_end - b) / images + 1;
    first_chunk_[i] = std::min(last + 1, (b + 1) * blksz) - g_first;
  }
}

uint32_t CyclicLayout::owner(uint64_t k) const {
  if (blksz_ == 0) return i0_;
  return static_cast<uint32_t>(((offset_ + k) / blksz_) % P_);
}

uint64_t CyclicLayout::local(uint64_t k) const {
  if (blksz_ == 0) return k;
  const uint64_t g = offset_ + k;
  return (g / blksz_ / P_) * blksz_ + g % blksz_;
}

CyclicLayout src_cyclic(const CollectiveSpec& s) {
  return CyclicLayout(s.images, s.src_blksz, s.src_offset, s.nbytes / std::max(1u, s.elem_size));
}
CyclicLayout dst_cyclic(const CollectiveSpec& s) {
  return CyclicLayout(s.images, s.dst_blksz, s.dst_offset, s.nbytes / std::max(1u, s.elem_size));
}

Extents::Extents(const CollectiveSpec& spec) : spec_(spec) {
  switch (spec.kind) {
    case CollKind::Scatter:
    case CollKind::Gather:
    case CollKind::GatherAll:
    case CollKind::ReduceScatter: blocks_.emplace(spec); break;
    case CollKind::Exchange: exchange_.emplace(spec); break;
    case CollKind::Reduce: src_cyclic_.emplace(src_cyclic(spec)); break;
    case CollKind::PrefixReduce:
      src_cyclic_.emplace(src_cyclic(spec));
      dst_cyclic_.emplace(dst_cyclic(spec));
      break;
    default: break;  // the sizes follow from nbytes and root
  }
}

uint64_t Extents::src(uint32_t image) const {
  const CollectiveSpec& s = spec_;
  switch (s.kind) {
    case CollKind::Broadcast: return image == s.root ? s.nbytes : 0;
    case CollKind::Scatter: return image == s.root ? blocks_->extent() : 0;
    case CollKind::Gather:
    case CollKind::GatherAll: return blocks_->length(image);
    case CollKind::Exchange: return exchange_->src_bytes(image);
    case CollKind::Permute:
    case CollKind::Allreduce:
    case CollKind::ReduceVec:
    case CollKind::Scan: return s.nbytes;
    case CollKind::ReduceScatter: return blocks_->extent();
    case CollKind::Reduce:
    case CollKind::PrefixReduce: return src_cyclic_->extent(image) * s.elem_size;
    case CollKind::Barrier: return 0;
  }
  return 0;
}

uint64_t Extents::dst(uint32_t image) const {
  const CollectiveSpec& s = spec_;
  switch (s.kind) {
    case CollKind::Broadcast: return s.nbytes;
    case CollKind::Scatter: return blocks_->length(image);
    case CollKind::Gather: return image == s.root ? blocks_->extent() : 0;
    case CollKind::GatherAll: return blocks_->extent();
    case CollKind::Exchange: return exchange_->dst_bytes(image);
    case CollKind::Permute:
    case CollKind::Allreduce:
    case CollKind::Scan: return s.nbytes;
    case CollKind::ReduceVec: return image == s.root ? s.nbytes : 0;
    case CollKind::ReduceScatter: return blocks_->length(image);
    case CollKind::Reduce: return image == s.root ? s.elem_size : 0;
    case CollKind::PrefixReduce: return dst_cyclic_->extent(image) * s.elem_size;
    case CollKind::Barrier: return 0;
  }
  return 0;
}

uint64_t src_extent(const CollectiveSpec& s, uint32_t image) { return Extents(s).src(image); }

uint64_t dst_extent(const CollectiveSpec& s, uint32_t image) { return Extents(s).dst(image); }

namespace {

// Element-size and block-cyclic rules of the computational kinds.
bool check_computational(const CollectiveSpec& spec, std::string* error) {
  const uint64_t es = spec.elem_size;
  const bool cyclic = spec.kind == CollKind::Reduce || spec.kind == CollKind::PrefixReduce;
  if (!cyclic && (spec.src_blksz || spec.src_offset)) {
    *error = std::string("src_blksz, src_offset: only reduce and prefix_reduce take a block-cyclic layout");
    return false;
  }
  if (spec.kind != CollKind::PrefixReduce && (spec.dst_blksz || spec.dst_offset)) {
    *error = "dst_blksz, dst_offset: only prefix_reduce takes a destination layout";
    return false;
  }
  if (!is_computational(spec.kind)) return true;
  if (es == 0 || es >= kMaxExtent) {
    *error = "elem_size: must be at least 1 and below 2^48";
    return false;
  }
  if (spec.nbytes % es != 0) {
    *error = "nbytes: " + std::to_string(spec.nbytes) + " is not a whole number of " +
             std::to_string(es) + "-byte elements";
    return false;
  }
  for (uint64_t i = 0; i < spec.counts.size(); ++i) {
    if (spec.counts[i] % es != 0) {
      *error = at("counts", i) + ": " + std::to_string(spec.counts[i]) +
               " is not a whole number of elements";
      return false;
    }
  }
  if (!cyclic) return true;
  const uint64_t count = spec.nbytes / es;
  auto check = [&](const char* which, uint64_t blksz, uint64_t offset) {
    const std::string name(which);
    if (blksz == 0 && offset >= spec.images) {
      *error = name + "_offset: " + std::to_string(offset) + " is not an image (" + name +
               "_blksz 0 is the indefinite layout; the offset names the image holding it)";
      return false;
    }
    if (blksz >= kMaxExtent || offset >= kMaxExtent / es || count >= kMaxExtent / es - offset) {
      *error = name + "_blksz, " + name + "_offset: the array reaches beyond 2^48 bytes";
      return false;
    }
    return true;
  };
  return check("src", spec.src_blksz, spec.src_offset) &&
         (spec.kind != CollKind::PrefixReduce || check("dst", spec.dst_blksz, spec.dst_offset));
}

}  // namespace

bool check_layout(const CollectiveSpec& spec, std::string* error) {
  const uint64_t P = spec.images;
  if (!check_computational(spec, error)) return false;
  const bool reduce_scatter = spec.kind == CollKind::ReduceScatter;
  const bool blocks = spec.kind == CollKind::Scatter || spec.kind == CollKind::Gather ||
                      spec.kind == CollKind::GatherAll || reduce_scatter;
  const bool exchange = spec.kind == CollKind::Exchange;
  if (!spec.perm.empty() && spec.kind != CollKind::Permute) {
    *error = "perm: only permute takes a permutation";
    return false;
  }
  if (spec.kind == CollKind::Permute) {
    if (spec.perm.size() != P) {
      *error = "perm: needs one entry per image (" + std::to_string(P) + "), got " +
               std::to_string(spec.perm.size());
      return false;
    }
    std::vector<bool> seen(P, false);
    for (uint64_t i = 0; i < P; ++i) {
      if (spec.perm[i] >= P || seen[spec.perm[i]]) {
        *error = at("perm", i) + ": " + std::to_string(spec.perm[i]) +
                 (spec.perm[i] >= P ? " is not a team rank" : " is named twice (perm must be a permutation)");
        return false;
      }
      seen[spec.perm[i]] = true;
    }
  }
  if (!spec.counts.empty() && !blocks && !exchange) {
    *error = std::string("counts: ") + coll_kind_name(spec.kind) + " has no variable-size form";
    return false;
  }
  if (!spec.displs.empty() && (!blocks || reduce_scatter)) {
    *error = std::string("displs: ") + coll_kind_name(spec.kind) + " takes no displacements";
    return false;
  }
  if (!spec.displs.empty() && spec.counts.empty()) {
    *error = "displs: given without counts";
    return false;
  }
  if (spec.counts.empty()) {
    // Every buffer must stay addressable (and address arithmetic on it
    // must not wrap): a P-block buffer as a whole, any other one alone.
    if ((exchange || blocks) && spec.nbytes >= kMaxExtent / P) {
      *error = "nbytes: " + std::to_string(spec.nbytes) + " times " + std::to_string(P) +
               " blocks exceeds 2^48 bytes";
      return false;
    }
    if (spec.nbytes >= kMaxExtent) {
      *error = "nbytes: " + std::to_string(spec.nbytes) + " is not below 2^48 bytes";
      return false;
    }
    return true;
  }
  const uint64_t want = exchange ? P * P : P;
  if (spec.counts.size() != want) {
    *error = "counts: needs " + std::to_string(want) + " entries (" +
             (exchange ? "P * P" : "one per image") + "), got " + std::to_string(spec.counts.size());
    return false;
  }
  if (!spec.displs.empty() && spec.displs.size() != P) {
    *error = "displs: needs one entry per image (" + std::to_string(P) + "), got " +
             std::to_string(spec.displs.size());
    return false;
  }
  // Sums of counts below 2^48 each: no offset arithmetic can overflow.
  uint64_t total = 0;
  for (uint64_t i = 0; i < spec.counts.size(); ++i) {
    if (spec.counts[i] >= kMaxExtent || (total += spec.counts[i]) >= kMaxExtent) {
      *error = at("counts", i) + ": the counts add up to 2^48 bytes or more";
      return false;
    }
  }
  for (uint64_t i = 0; i < spec.displs.size(); ++i) {
    if (spec.displs[i] >= kMaxExtent) {
      *error = at("displs", i) + ": " + std::to_string(spec.displs[i]) + " is 2^48 or more";
      return false;
    }
  }
  // Blocks that several images write must not overlap (scatter only reads).
  if (!spec.displs.empty() && spec.kind != CollKind::Scatter) {
    std::vector<uint32_t> order;
    for (uint32_t i = 0; i < P; ++i) {
      if (spec.counts[i] > 0) order.push_back(i);
    }
    std::sort(order.begin(), order.end(),
              [&](uint32_t a, uint32_t b) { return spec.displs[a] < spec.displs[b]; });
    for (size_t k = 1; k < order.size(); ++k) {
      const uint32_t a = order[k - 1], b = order[k];
      if (spec.displs[a] + spec.counts[a] > spec.displs[b]) {
        *error = "displs: the blocks of images " + std::to_string(a) + " and " + std::to_string(b) +
                 " overlap in the destination";
        return false;
      }
    }
  }
  return true;
}

}  // namespace carflow
