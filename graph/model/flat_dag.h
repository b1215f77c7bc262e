// A global DAG in flat arrays, for the cost model (graph/model/loggp.h) at
// up to millions of images: the CARs of every image numbered in one range
// (image i's CAR c is image_base[i] + c), one field per array, successors
// in one array, and each message's two ends linked by number. Built image
// by image from a generator, so no GlobalDag of all images is ever held;
// 36 bytes per CAR plus 4 per dependency.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "graph/car.h"
#include "graph/model/huge_pages.h"
#include "graph/registry.h"

namespace carflow {

// The most CARs a FlatDag holds: numbers fit 28 bits (the simulator keeps
// two more in each), and 2^27 CARs take about 6 GB.
inline constexpr uint64_t kMaxFlatCars = uint64_t{1} << 27;
inline constexpr uint32_t kNoFlatCar = UINT32_MAX;

// The most images a FlatDag holds (21 bits of FlatCar's first word).
inline constexpr uint64_t kMaxFlatImages = uint64_t{1} << 21;
// Byte counts from this one up are kept beside the CARs (FlatDag::big_bytes).
inline constexpr uint64_t kBigFlatBytes = (uint64_t{1} << 40) - 1;

// One CAR: what the simulator reads and writes, in one place, 32 bytes
// aligned to 32, so a CAR costs one cache line and a million-image DAG
// fewer pages to fault in. The dependency counts, read once a run, are
// kept apart (FlatDag::deps).
struct alignas(32) FlatCar {
  // Bytes (40 bits: message bytes; REDUCE: src; COPY: dst; kBigFlatBytes:
  // see FlatDag::big_bytes), kind (3 bits), image (21 bits).
  uint64_t word = 0;
  uint32_t succ_begin = 0;      // its successors: succ[succ_begin, next CAR's succ_begin)
  uint32_t match = kNoFlatCar;  // the other end of a message
  // The simulator's state (graph/model/loggp_sim.cc), reset by each run:
  // `link` counts what the CAR still waits for until it is ready, then
  // links it into its image's CPU queue.
  uint32_t link = 0;
  uint32_t cause = 0;
  double t = 0;

  uint64_t stored_bytes() const { return word & kBigFlatBytes; }
  CarKind kind() const { return static_cast<CarKind>((word >> 40) & 7); }
  uint32_t image() const { return static_cast<uint32_t>(word >> 43); }
  void set(uint64_t bytes, CarKind kind, uint32_t image) {
    word = std::min(bytes, kBigFlatBytes) | uint64_t{static_cast<uint8_t>(kind)} << 40 | uint64_t{image} << 43;
  }
};
static_assert(sizeof(FlatCar) == 32);

struct FlatDag {
  uint32_t images = 0;
  std::vector<uint32_t> image_base;  // images + 1 entries
  HugeVector<FlatCar> car;          // cars() + 1 entries: the last holds only succ_begin
  HugeVector<uint32_t> deps;         // each CAR's dependency count
  HugeVector<uint32_t> succ;         // successors, by number
  // The byte counts of CARs whose word holds kBigFlatBytes, sorted by CAR.
  std::vector<std::pair<uint32_t, uint64_t>> big_bytes;
  uint64_t messages = 0, message_bytes = 0;
  // The largest user buffer of any image (aggregate members included):
  // the data the collective streams through, whose size sets the band of
  // its REDUCEs' and COPYs' per-byte costs (loggp.h).
  uint64_t footprint = 0;

  uint64_t cars() const { return car.empty() ? 0 : car.size() - 1; }
  CarId local(uint32_t c) const { return c - image_base[car[c].image()]; }
  uint64_t bytes(uint32_t c) const {
    const uint64_t b = car[c].stored_bytes();
    return b == kBigFlatBytes ? big(c) : b;
  }
  uint64_t big(uint32_t c) const;
  // "image 3 CAR 5 (SEND)"
  std::string label(uint32_t c) const;
};

// The CARs of consecutive images packed for a FlatDag: what
// FlatDagBuilder keeps, and what a thread other than the builder's can
// pack ahead for it (FlatDagBuilder::append). CAR numbers, succ_begin and
// successors count from this pack's first CAR.
struct FlatImages {
  uint32_t first_image = 0;
  std::vector<uint32_t> ends;  // one past each image's last CAR
  HugeVector<FlatCar> car;
  HugeVector<uint32_t> deps, succ, peer, tag, member;  // member: empty until a CAR has one
  std::vector<std::pair<uint32_t, uint64_t>> big_bytes;  // as FlatDag's, numbered from this pack's first CAR
  uint64_t footprint = 0;  // as FlatDag's, over the images packed
  std::string error;  // why the image after the last packed one was refused

  uint32_t images() const { return static_cast<uint32_t>(ends.size()); }
  // Empty, its capacity kept, for images from `first`.
  void restart(uint32_t first);
  // Packs `dag`, which must be image first_image + images(), of a team of
  // `team` ranks. False with *error when the DAG names a CAR or peer that
  // does not exist or the pack would pass max_cars.
  bool pack(const LocalDag& dag, uint32_t team, uint64_t max_cars, std::string* error);

 private:
  bool pack_one(const LocalDag& dag, uint32_t team, uint64_t max_cars, std::string* error);
  std::vector<uint32_t> count_;  // pack()'s successor counts, kept for the next image
};

// Adds images to a FlatDag in rank order, then matches the messages.
class FlatDagBuilder {
 public:
  // max_cars: refuse a DAG that grows past it (at most kMaxFlatCars).
  FlatDagBuilder(uint32_t images, uint64_t max_cars = kMaxFlatCars);
  // One image (image 0) of a team of `team_images` whose DAGs have rank
  // symmetry `mirror` (registry.h): each receive is matched to the image's
  // own SEND that stands for its sender's (sender p's SEND to 0 is image
  // 0's SEND to sigma_p^-1(0)), so the simulator runs image 0's timeline,
  // which is every image's.
  FlatDagBuilder(uint32_t team_images, RankSymmetry mirror, uint64_t max_cars = kMaxFlatCars);
  // Room for about `cars` CARs, so the arrays grow without copying.
  void reserve(uint64_t cars);
  // Image dag.image must be the next rank. False with *error when the DAG
  // names a CAR or peer that does not exist or the limit is passed.
  bool add(const LocalDag& dag, std::string* error);
  // Images packed elsewhere, the first of them the next rank: the same
  // checks as add() (a pack's error is reported after its images).
  bool append(const FlatImages& images, std::string* error);
  // Matches every SEND to its receive by (sender, receiver, member, tag);
  // false with *error naming an unmatched or doubly used end or a byte
  // count that differs. The builder is spent.
  bool finish(FlatDag* out, std::string* error);

 private:
  uint32_t images_;
  uint64_t max_cars_;
  uint32_t team_;  // peers range over [0, team_)
  RankSymmetry mirror_ = RankSymmetry::None;
  FlatImages packed_;  // every image so far
};

// The CARs of `spec` as estimated from image (root + 1) mod P (the root
// may have more, the others alike): false with *error naming --images and
// the limit when that is above max_cars, so an all-to-all algorithm at a
// large P is refused before anything is built. `known`: images [0,
// known.size()) already generated, used instead of generating again.
bool estimate_flat_cars(const GeneratorInfo& gen, const CollectiveSpec& spec, uint64_t max_cars,
                        uint64_t* estimate, std::string* error, std::span<const LocalDag> known = {});
// Every image of `spec` from `gen`, one generate_local at a time (those in
// `known` taken as they are), after estimate_flat_cars.
bool build_flat_dag(const GeneratorInfo& gen, const CollectiveSpec& spec, FlatDag* out,
                    std::string* error, uint64_t max_cars = kMaxFlatCars, std::span<const LocalDag> known = {});
// The one-image FlatDag of a rank-symmetric `spec` (FlatDagBuilder's mirror
// form) from image 0's DAG.
bool build_mirrored_flat_dag(const LocalDag& image0, uint32_t images, RankSymmetry symmetry, FlatDag* out,
                             std::string* error, uint64_t max_cars = kMaxFlatCars);
// An existing global DAG (tests, plan's files).
bool flat_dag_from_global(const GlobalDag& dag, FlatDag* out, std::string* error);

}  // namespace carflow
