#include "graph/builder.h"

#include <utility>

namespace carflow {

DagBuilder::DagBuilder(uint32_t image, uint64_t src_bytes, uint64_t dst_bytes) {
  dag_.image = image;
  dag_.src_bytes = src_bytes;
  dag_.dst_bytes = dst_bytes;
  // Most DAGs hold a few CARs to a few dozen: one block up front instead of
  // a regrowth (and a move of every CAR) at each power of two.
  dag_.cars.reserve(16);
}

CarId DagBuilder::add(Car car) {
  dag_.cars.push_back(std::move(car));
  return static_cast<CarId>(dag_.cars.size() - 1);
}

CarId DagBuilder::send(uint32_t peer, uint32_t tag, BufferRef src, Deps deps) {
  Car car;
  car.kind = CarKind::Send;
  car.peer = peer;
  car.tag = tag;
  car.src = src;
  car.deps = std::move(deps);
  return add(std::move(car));
}

CarId DagBuilder::recv(uint32_t peer, uint32_t tag, BufferRef dst, Deps deps) {
  Car car;
  car.kind = CarKind::Recv;
  car.peer = peer;
  car.tag = tag;
  car.dst = dst;
  car.deps = std::move(deps);
  return add(std::move(car));
}

CarId DagBuilder::recv_reduce(uint32_t peer, uint32_t tag, BufferRef dst, bool incoming_left,
                              Deps deps, BufferRef local) {
  Car car;
  car.kind = CarKind::RecvReduce;
  car.src = local;
  car.peer = peer;
  car.tag = tag;
  car.dst = dst;
  car.incoming_left = incoming_left;
  car.deps = std::move(deps);
  return add(std::move(car));
}

CarId DagBuilder::reduce(BufferRef dst, BufferRef left, BufferRef right, Deps deps) {
  Car car;
  car.kind = CarKind::Reduce;
  car.dst = dst;
  car.src = left;
  car.src2 = right;
  car.deps = std::move(deps);
  return add(std::move(car));
}

CarId DagBuilder::fold(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems,
                       uint64_t chunk_elems, Deps deps) {
  CarId id = reduce(dst, src, carry, std::move(deps));
  Car& car = dag_.cars[id];
  car.shape = ReduceShape::Fold;
  car.first_elems = first_elems;
  car.chunk_elems = chunk_elems;
  return id;
}

CarId DagBuilder::prefix(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems,
                         uint64_t chunk_elems, Deps deps) {
  CarId id = fold(dst, src, carry, first_elems, chunk_elems, std::move(deps));
  dag_.cars[id].shape = ReduceShape::Prefix;
  return id;
}

CarId DagBuilder::copy(BufferRef dst, BufferRef src, Deps deps) {
  Car car;
  car.kind = CarKind::Copy;
  car.dst = dst;
  car.src = src;
  car.deps = std::move(deps);
  return add(std::move(car));
}

CarId DagBuilder::join(Deps deps) {
  Car car;
  car.kind = CarKind::Join;
  car.deps = std::move(deps);
  return add(std::move(car));
}

uint32_t DagBuilder::temp_slot(uint64_t bytes) {
  dag_.temps.push_back(bytes);
  return static_cast<uint32_t>(dag_.temps.size() - 1);
}

LocalDag DagBuilder::finish() {
  std::vector<bool> has_successor(dag_.cars.size(), false);
  for (const Car& car : dag_.cars) {
    for (const Dep& dep : car.deps) {
      if (dep.car < has_successor.size()) has_successor[dep.car] = true;
    }
  }
  Deps sinks;
  for (CarId id = 0; id < dag_.cars.size(); ++id) {
    if (!has_successor[id]) sinks.push_back(after(id));
  }
  dag_.exit = join(std::move(sinks));
  return std::move(dag_);
}

std::vector<Segment> split_segments(uint64_t nbytes, uint64_t segment_bytes, uint32_t elem_size) {
  if (elem_size == 0) elem_size = 1;
  uint64_t step = nbytes;
  if (segment_bytes > 0 && segment_bytes < nbytes) {
    step = segment_bytes / elem_size * elem_size;
    if (step == 0) step = elem_size;
  }
  std::vector<Segment> out;
  if (nbytes == 0) {
    out.push_back({0, 0});
    return out;
  }
  for (uint64_t off = 0; off < nbytes; off += step) {
    out.push_back({off, std::min(step, nbytes - off)});
  }
  return out;
}

std::vector<Segment> split_blocks(uint64_t nbytes, uint32_t parts, uint32_t elem_size) {
  if (elem_size == 0) elem_size = 1;
  uint64_t elems = nbytes / elem_size;
  uint64_t base = elems / parts, extra = elems % parts;
  std::vector<Segment> out;
  uint64_t off = 0;
  for (uint32_t i = 0; i < parts; ++i) {
    uint64_t len = (base + (i < extra ? 1 : 0)) * elem_size;
    out.push_back({off, len});
    off += len;
  }
  return out;
}

}  // namespace carflow
