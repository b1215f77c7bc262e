// DagBuilder: how generators write a LocalDag.
//
// A generator creates CARs in any order; each call names its predecessors.
// finish() adds the exit JOIN that depends on every CAR nothing else depends
// on, so every image's DAG reaches its exit by construction.
#pragma once

#include <initializer_list>
#include <vector>

#include "graph/car.h"

namespace carflow {

inline Dep after(CarId car) { return Dep{car, DepKind::Progress}; }
inline Dep after_buffer(CarId car) { return Dep{car, DepKind::Buffer}; }

inline BufferRef user_src(uint64_t offset, uint64_t length) {
  return BufferRef{BufferSpace::UserSrc, 0, offset, length};
}
inline BufferRef user_dst(uint64_t offset, uint64_t length) {
  return BufferRef{BufferSpace::UserDst, 0, offset, length};
}
inline BufferRef temp(uint32_t slot, uint64_t offset, uint64_t length) {
  return BufferRef{BufferSpace::Temp, slot, offset, length};
}
inline BufferRef no_buffer() { return BufferRef{}; }

class DagBuilder {
 public:
  using Deps = CarDeps;

  DagBuilder(uint32_t image, uint64_t src_bytes, uint64_t dst_bytes);

  CarId send(uint32_t peer, uint32_t tag, BufferRef src, Deps deps = {});
  CarId recv(uint32_t peer, uint32_t tag, BufferRef dst, Deps deps = {});
  // `local`: the local operand (no_buffer() = dst's own contents).
  CarId recv_reduce(uint32_t peer, uint32_t tag, BufferRef dst, bool incoming_left,
                    Deps deps = {}, BufferRef local = no_buffer());
  CarId reduce(BufferRef dst, BufferRef left, BufferRef right, Deps deps = {});
  // Fold / Prefix REDUCEs (ReduceShape): `carry` is no_buffer() or one
  // element per chunk; chunk_elems 0 = src is one chunk.
  CarId fold(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems,
             uint64_t chunk_elems, Deps deps = {});
  CarId prefix(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems,
               uint64_t chunk_elems, Deps deps = {});
  CarId copy(BufferRef dst, BufferRef src, Deps deps = {});
  CarId join(Deps deps = {});
  // A new temporary slot of `bytes`; returns its index.
  uint32_t temp_slot(uint64_t bytes);
  // Room for `cars` CARs (the exit JOIN included), so a generator that
  // knows its count builds without regrowing (a move of every CAR each time).
  void reserve(size_t cars) { dag_.cars.reserve(cars); }

  // Adds the exit JOIN and returns the finished DAG (the builder is spent).
  LocalDag finish();

 private:
  // A new CAR of `kind` with `deps`, built in place at the end of the DAG
  // (a Car is about 150 bytes: building one aside and moving it in cost a
  // tenth of generating a large DAG).
  Car& add(CarKind kind, Deps&& deps);
  CarId last() const { return static_cast<CarId>(dag_.cars.size() - 1); }
  LocalDag dag_;
};

// Splits [0, nbytes) into pieces of at most `segment_bytes`, cut on multiples
// of elem_size (0 segment_bytes = one piece). A zero-byte range is one piece.
struct Segment {
  uint64_t offset;
  uint64_t length;
};
std::vector<Segment> split_segments(uint64_t nbytes, uint64_t segment_bytes, uint32_t elem_size);

// Splits [0, nbytes) into `parts` contiguous blocks of whole elements, the
// first (count % parts) blocks one element longer; blocks may be empty.
std::vector<Segment> split_blocks(uint64_t nbytes, uint32_t parts, uint32_t elem_size);

}  // namespace carflow
