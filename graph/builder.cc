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

Car& DagBuilder::add(CarKind kind, Deps&& deps) {
  Car& car = dag_.cars.emplace_back();
  car.kind = kind;
  car.deps = std::move(deps);
  return car;
}

CarId DagBuilder::send(uint32_t peer, uint32_t tag, BufferRef src, Deps deps) {
  Car& car = add(CarKind::Send, std::move(deps));
  car.peer = peer;
  car.tag = tag;
  car.src = src;
  return last();
}

CarId DagBuilder::recv(uint32_t peer, uint32_t tag, BufferRef dst, Deps deps) {
  Car& car = add(CarKind::Recv, std::move(deps));
  car.peer = peer;
  car.tag = tag;
  car.dst = dst;
  return last();
}

CarId DagBuilder::recv_reduce(uint32_t peer, uint32_t tag, BufferRef dst, bool incoming_left,
                              Deps deps, BufferRef local) {
  Car& car = add(CarKind::RecvReduce, std::move(deps));
  car.src = local;
  car.peer = peer;
  car.tag = tag;
  car.dst = dst;
  car.incoming_left = incoming_left;
  return last();
}

CarId DagBuilder::reduce(BufferRef dst, BufferRef left, BufferRef right, Deps deps) {
  Car& car = add(CarKind::Reduce, std::move(deps));
  car.dst = dst;
  car.src = left;
  car.src2 = right;
  return last();
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
  Car& car = add(CarKind::Copy, std::move(deps));
  car.dst = dst;
  car.src = src;
  return last();
}

CarId DagBuilder::join(Deps deps) {
  add(CarKind::Join, std::move(deps));
  return last();
}

uint32_t DagBuilder::temp_slot(uint64_t bytes) {
  dag_.temps.push_back(bytes);
  return static_cast<uint32_t>(dag_.temps.size() - 1);
}

LocalDag DagBuilder::finish() {
  std::vector<uint8_t> has_successor(dag_.cars.size(), 0);
  for (const Car& car : dag_.cars) {
    for (const Dep& dep : car.deps) {
      if (dep.car < has_successor.size()) has_successor[dep.car] = 1;
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
