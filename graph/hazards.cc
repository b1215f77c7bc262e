// Data hazards inside one image's DAG (graph/validate.h, check_hazards).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "graph/validate.h"

namespace carflow {
namespace {

struct Access {
  BufferRef ref;
  CarId car;
  bool write;
};

void add_accesses(const Car& car, CarId id, std::vector<Access>* out) {
  auto add = [&](const BufferRef& ref, bool write) {
    if (ref.space != BufferSpace::None && ref.length > 0) out->push_back({ref, id, write});
  };
  switch (car.kind) {
    case CarKind::Send: add(car.src, false); break;
    case CarKind::Recv: add(car.dst, true); break;
    case CarKind::RecvReduce:
      add(car.src, false);  // the local operand, if any
      add(car.dst, true);
      break;
    case CarKind::Reduce:
      add(car.src, false);
      add(car.src2, false);
      add(car.dst, true);
      break;
    case CarKind::Copy:
      add(car.src, false);
      add(car.dst, true);
      break;
    case CarKind::Join: break;
  }
}

const char* space_name(BufferSpace s) {
  return s == BufferSpace::UserSrc ? "src" : s == BufferSpace::UserDst ? "dst" : "temp";
}

}  // namespace

bool check_hazards(const LocalDag& dag, std::string* error) {
  const size_t C = dag.cars.size();
  if (C > kHazardCheckCars) return true;
  const std::string where = "image " + std::to_string(dag.image) + ": ";
  // A topological order (validate_local has ruled out cycles and bad ids).
  std::vector<uint32_t> indegree(C, 0);
  std::vector<std::vector<CarId>> succ(C);
  for (CarId c = 0; c < C; ++c) {
    for (const Dep& d : dag.cars[c].deps) {
      if (d.car >= C) {
        *error = where + "CAR " + std::to_string(c) + " depends on CAR " + std::to_string(d.car) + ", which does not exist";
        return false;
      }
      succ[d.car].push_back(c);
      ++indegree[c];
    }
  }
  std::vector<CarId> order, ready;
  for (CarId c = 0; c < C; ++c) {
    if (indegree[c] == 0) ready.push_back(c);
  }
  while (!ready.empty()) {
    const CarId c = ready.back();
    ready.pop_back();
    order.push_back(c);
    for (CarId s : succ[c]) {
      if (--indegree[s] == 0) ready.push_back(s);
    }
  }
  if (order.size() != C) {
    *error = where + "the CARs form a cycle";
    return false;
  }
  // before[c]: the CARs c waits for, directly or not (a bit set per CAR).
  const size_t words = (C + 63) / 64;
  std::vector<uint64_t> before(C * words, 0);
  for (CarId c : order) {
    uint64_t* mine = &before[c * words];
    for (const Dep& d : dag.cars[c].deps) {
      const uint64_t* theirs = &before[size_t{d.car} * words];
      for (size_t w = 0; w < words; ++w) mine[w] |= theirs[w];
      mine[d.car / 64] |= uint64_t{1} << (d.car % 64);
    }
  }
  auto ordered = [&](CarId a, CarId b) {
    return ((before[size_t{b} * words + a / 64] >> (a % 64)) & 1) || ((before[size_t{a} * words + b / 64] >> (b % 64)) & 1);
  };
  std::vector<Access> acc;
  for (CarId c = 0; c < C; ++c) add_accesses(dag.cars[c], c, &acc);
  for (const Access& a : acc) {
    if (a.write && a.ref.space == BufferSpace::UserSrc) {
      *error = where + "CAR " + std::to_string(a.car) + " (" + car_kind_name(dag.cars[a.car].kind) +
               ") writes the user source, which a collective only reads";
      return false;
    }
  }
  // Sweep each buffer's accesses by offset; compare those that overlap.
  std::sort(acc.begin(), acc.end(), [](const Access& x, const Access& y) {
    if (x.ref.space != y.ref.space) return x.ref.space < y.ref.space;
    if (x.ref.slot != y.ref.slot) return x.ref.slot < y.ref.slot;
    return x.ref.offset < y.ref.offset;
  });
  std::vector<size_t> active;
  for (size_t i = 0; i < acc.size(); ++i) {
    const Access& b = acc[i];
    std::erase_if(active, [&](size_t k) {
      const Access& a = acc[k];
      return a.ref.space != b.ref.space || a.ref.slot != b.ref.slot || a.ref.offset + a.ref.length <= b.ref.offset;
    });
    for (size_t k : active) {
      const Access& a = acc[k];
      if ((a.write || b.write) && a.car != b.car && !ordered(a.car, b.car)) {
        const CarId x = std::min(a.car, b.car), y = std::max(a.car, b.car);
        const uint64_t from = std::max(a.ref.offset, b.ref.offset);
        const uint64_t to = std::min(a.ref.offset + a.ref.length, b.ref.offset + b.ref.length);
        *error = where + "CARs " + std::to_string(x) + " (" + car_kind_name(dag.cars[x].kind) + ") and " +
                 std::to_string(y) + " (" + car_kind_name(dag.cars[y].kind) + ") both touch bytes [" +
                 std::to_string(from) + ", " + std::to_string(to) + ") of " + space_name(b.ref.space) +
                 (b.ref.space == BufferSpace::Temp ? " slot " + std::to_string(b.ref.slot) : std::string()) +
                 ", one of them writing, and neither waits for the other";
        return false;
      }
    }
    active.push_back(i);
  }
  return true;
}

}  // namespace carflow
