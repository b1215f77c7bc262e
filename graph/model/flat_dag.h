// A global DAG in flat arrays, for the cost model (graph/model/loggp.h) at
// up to millions of images: the CARs of every image numbered in one range
// (image i's CAR c is image_base[i] + c), one field per array, successors
// in one array, and each message's two ends linked by number. Built image
// by image from a generator, so no GlobalDag of all images is ever held;
// about 40 bytes per CAR plus 4 per dependency.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/registry.h"

namespace carflow {

// The most CARs a FlatDag holds: numbers fit 28 bits (the simulator keeps
// two more in each), and 2^27 CARs take about 6 GB.
inline constexpr uint64_t kMaxFlatCars = uint64_t{1} << 27;
inline constexpr uint32_t kNoFlatCar = UINT32_MAX;

struct FlatDag {
  uint32_t images = 0;
  std::vector<uint32_t> image_base;  // images + 1 entries
  std::vector<CarKind> kind;
  std::vector<uint64_t> bytes;       // message bytes; REDUCE: src; COPY: dst
  std::vector<uint32_t> image;
  std::vector<uint32_t> deps;        // how many dependencies
  std::vector<uint32_t> succ_begin;  // cars + 1 entries into succ
  std::vector<uint32_t> succ;        // successors, by number
  std::vector<uint32_t> match;       // the other end of a message; kNoFlatCar
  uint64_t messages = 0, message_bytes = 0;

  uint64_t cars() const { return kind.size(); }
  CarId local(uint32_t car) const { return car - image_base[image[car]]; }
  // "image 3 CAR 5 (SEND)"
  std::string label(uint32_t car) const;
};

// Adds images to a FlatDag in rank order, then matches the messages.
class FlatDagBuilder {
 public:
  // max_cars: refuse a DAG that grows past it (at most kMaxFlatCars).
  FlatDagBuilder(uint32_t images, uint64_t max_cars = kMaxFlatCars);
  // Room for about `cars` CARs, so the arrays grow without copying.
  void reserve(uint64_t cars);
  // Image dag.image must be the next rank. False with *error when the DAG
  // names a CAR or peer that does not exist or the limit is passed.
  bool add(const LocalDag& dag, std::string* error);
  // Matches every SEND to its receive by (sender, receiver, member, tag);
  // false with *error naming an unmatched or doubly used end or a byte
  // count that differs. The builder is spent.
  bool finish(FlatDag* out, std::string* error);

 private:
  FlatDag dag_;
  uint64_t max_cars_;
  // Kept until finish(): what matching needs.
  std::vector<uint32_t> peer_, tag_, member_;
  bool any_member_ = false;
};

// Every image of `spec` from `gen`, one generate_local at a time. Before
// building, refuses (naming --images and the limit) a collective whose
// CAR count, estimated from image (root + 1) mod P, exceeds max_cars.
bool build_flat_dag(const GeneratorInfo& gen, const CollectiveSpec& spec, FlatDag* out,
                    std::string* error, uint64_t max_cars = kMaxFlatCars);
// An existing global DAG (tests, plan's files).
bool flat_dag_from_global(const GlobalDag& dag, FlatDag* out, std::string* error);

}  // namespace carflow
