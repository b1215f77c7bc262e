// GenBuilder: the checked DAG builder of carflow/generator.h. The C calls
// (cf_dag_send, ...) are its face in api/generator.cc, and built-in
// generators use it directly, so the path plug-ins take is the one the
// project's own algorithms take and test.
//
// Over DagBuilder (graph/builder.h) it adds what a generator written by
// someone else needs:
//   - message tags are assigned: the k-th send from i to j gets tag k + 1,
//     and so does the k-th receive at j from i, so they match;
//   - every argument is checked as it comes (peer, deps, buffer ranges,
//     temp slots, reductions only on reducing kinds, operand lengths); the
//     first bad call makes every later call return kNoCar, and finish()
//     hands the DAG back with LocalDag::error naming the generator, the
//     image, the call and the argument (validate_local then refuses it);
//   - a zero-byte message carries no buffer.
// Dependencies are CarIds of this DAG added before; buffer_dep(id) marks
// one as a data hazard (DepKind::Buffer) rather than an ordering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "graph/builder.h"
#include "graph/car.h"
#include "graph/small_vector.h"

namespace carflow {

// CF_DEP_BUFFER: the dependency bit that makes a dep a buffer dep.
inline constexpr CarId kBufferDepBit = 1u << 31;
inline constexpr CarId buffer_dep(CarId car) { return car | kBufferDepBit; }

class GenBuilder {
 public:
  using DepList = std::initializer_list<CarId>;

  // `generator`: the name errors give (spec.algorithm for built-ins).
  GenBuilder(std::string_view generator, const CollectiveSpec& spec, uint32_t image);

  CarId send(uint32_t peer, BufferRef src, const CarId* deps, size_t ndeps);
  CarId recv(uint32_t peer, BufferRef dst, const CarId* deps, size_t ndeps);
  // dst = local op incoming (incoming op local with incoming_left); local
  // no_buffer() = dst's own contents. `call` names the C call in errors.
  CarId recv_reduce(const char* call, uint32_t peer, BufferRef dst, BufferRef local, bool incoming_left,
                    const CarId* deps, size_t ndeps);
  CarId reduce(BufferRef dst, BufferRef left, BufferRef right, const CarId* deps, size_t ndeps);
  // ReduceShape::Fold / Prefix (graph/car.h): chunks of src, carry one
  // element per chunk or no_buffer().
  CarId fold(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems, uint64_t chunk_elems,
             const CarId* deps, size_t ndeps);
  CarId prefix(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems, uint64_t chunk_elems,
               const CarId* deps, size_t ndeps);
  CarId copy(BufferRef dst, BufferRef src, const CarId* deps, size_t ndeps);
  CarId join(const CarId* deps, size_t ndeps);
  // A temp slot of `bytes`: its index, or UINT32_MAX on a failed DAG.
  uint32_t temp(uint64_t bytes);
  // Room for `cars` CARs (DagBuilder::reserve).
  void reserve(size_t cars) { builder_.reserve(cars); }

  // The same with the deps in a list or vector.
  CarId send(uint32_t peer, BufferRef src, DepList deps = {}) { return send(peer, src, deps.begin(), deps.size()); }
  CarId send(uint32_t peer, BufferRef src, const std::vector<CarId>& deps) {
    return send(peer, src, deps.data(), deps.size());
  }
  CarId recv(uint32_t peer, BufferRef dst, DepList deps = {}) { return recv(peer, dst, deps.begin(), deps.size()); }
  CarId recv(uint32_t peer, BufferRef dst, const std::vector<CarId>& deps) {
    return recv(peer, dst, deps.data(), deps.size());
  }
  CarId recv_reduce(uint32_t peer, BufferRef dst, BufferRef local, bool incoming_left, DepList deps = {}) {
    return recv_reduce("cf_dag_recv_reduce_into", peer, dst, local, incoming_left, deps.begin(), deps.size());
  }
  CarId reduce(BufferRef dst, BufferRef left, BufferRef right, DepList deps = {}) {
    return reduce(dst, left, right, deps.begin(), deps.size());
  }
  CarId reduce(BufferRef dst, BufferRef left, BufferRef right, const std::vector<CarId>& deps) {
    return reduce(dst, left, right, deps.data(), deps.size());
  }
  CarId copy(BufferRef dst, BufferRef src, DepList deps = {}) { return copy(dst, src, deps.begin(), deps.size()); }
  CarId join(const std::vector<CarId>& deps) { return join(deps.data(), deps.size()); }
  // And in a SmallVector, which a generator builds without a heap block.
  template <uint32_t N>
  CarId send(uint32_t peer, BufferRef src, const SmallVector<CarId, N>& deps) {
    return send(peer, src, deps.data(), deps.size());
  }
  template <uint32_t N>
  CarId reduce(BufferRef dst, BufferRef left, BufferRef right, const SmallVector<CarId, N>& deps) {
    return reduce(dst, left, right, deps.data(), deps.size());
  }

  // Marks the DAG failed with `what` (the first failure wins); kNoCar.
  CarId refuse(const char* call, const std::string& what);
  bool failed() const { return !error_.empty(); }
  const std::string& error() const { return error_; }
  uint32_t images() const { return images_; }
  uint32_t image() const { return image_; }
  uint64_t src_bytes() const { return src_bytes_; }
  uint64_t dst_bytes() const { return dst_bytes_; }

  // Adds the exit JOIN; a failed DAG comes back with LocalDag::error set.
  LocalDag finish();

 private:
  // Messages so far per peer. Most algorithms talk to few peers (log P,
  // up to 20 at 2^20 images, more with a sync transform's): a short list
  // held inline, then a hash map, so building stays O(CARs) at any P.
  class PeerCounts {
   public:
    uint32_t next(uint32_t peer);
   private:
    static constexpr uint32_t kFew = 32;
    struct Count {
      uint32_t peer, messages;
    };
    SmallVector<Count, kFew> few_;
    std::unordered_map<uint32_t, uint32_t> many_;
  };

  bool peer_ok(const char* call, uint32_t peer);
  bool buffer_ok(const char* call, const char* arg, BufferRef* ref);
  bool deps_ok(const char* call, const CarId* deps, size_t ndeps, DagBuilder::Deps* out);
  CarId added(CarId id);
  CarId message(bool send, uint32_t peer, BufferRef buf, const CarId* deps, size_t ndeps);

  DagBuilder builder_;
  std::string_view generator_;
  uint32_t image_, images_;
  bool reduces_;
  uint32_t elem_size_;
  uint64_t src_bytes_, dst_bytes_;
  std::vector<uint64_t> temps_;
  PeerCounts sends_to_, receives_from_;
  uint32_t cars_ = 0;
  std::string error_;
};

}  // namespace carflow
