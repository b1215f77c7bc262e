// Generator registry: generators register by (collective kind, name).
//
// A generator is a pure function (CollectiveSpec, image) -> LocalDag. It must
// handle every P >= 1 and every root, and it declares whether it preserves the
// operand order of a non-commutative reduction.
#pragma once

#include <array>
#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "graph/car.h"

namespace carflow {

using GeneratorFn = LocalDag (*)(const CollectiveSpec& spec, uint32_t image);

// Algorithm parameters a generator reads from its spec (GeneratorInfo::params);
// the engine fills only those, so other DAGs' specs stay free of them.
inline constexpr unsigned kUsesRadix = 1u << 0;   // spec.radix
inline constexpr unsigned kUsesWindow = 1u << 1;  // spec.window
inline constexpr unsigned kUsesLogp = 1u << 2;    // spec.logp_L, logp_o, logp_g
inline constexpr unsigned kUsesNodes = 1u << 3;   // spec.images_per_node

// Rank symmetry (GeneratorInfo::symmetry): image i's DAG is image 0's with
// every peer p renamed sigma_i(p) (same CARs, kinds, bytes, tags and
// dependencies, in the same order), sigma_i(p) = (p + i) mod P for Shift
// (rings, dissemination) and p XOR i for Xor (recursive doubling; P a power
// of two). Every image then runs the same timeline under a cost model that
// treats all pairs alike, so the model simulates one image
// (graph/model/predict.cc).
enum class RankSymmetry : uint8_t { None, Shift, Xor };
// Which symmetry `spec`'s DAGs have: a generator's declaration, true at
// every spec it returns Shift or Xor for (tests/model_symmetry_test.cc
// checks each declaring generator image by image).
using SymmetryFn = RankSymmetry (*)(const CollectiveSpec& spec);
// Declarations for the common cases: Shift at any P; Xor when P is a power
// of two (None otherwise).
RankSymmetry shift_symmetric(const CollectiveSpec& spec);
RankSymmetry xor_symmetric(const CollectiveSpec& spec);

// A generator with state of its own (a plug-in's, api/generator.cc): used
// instead of GeneratorInfo::fn when set.
using GeneratorClosure = std::function<LocalDag(const CollectiveSpec& spec, uint32_t image)>;

struct GeneratorInfo {
  CollKind kind;
  std::string name;
  GeneratorFn fn;
  bool preserves_order = true;  // safe for non-commutative operators
  bool segmented = false;       // honours spec.segment_bytes
  std::string summary;          // one line for `carflow info`
  unsigned params = 0;          // kUses* bits
  SymmetryFn symmetry = nullptr;  // its rank symmetry (RankSymmetry); null = none
  GeneratorClosure closure = {};  // registered at run time (a plug-in); fn is then null
  bool plugin = false;          // checked as a whole team before it first runs (engine/start.cc)
};

// Generators are only ever added, never removed or changed: an entry's
// address stays valid for the process's life, and readers need no lock
// (an entry is complete before the count that shows it is published).
// Writers are serialized by their caller: static initializers run one at
// a time, and run-time registration (api/generator.cc) holds a lock.
class GeneratorRegistry {
 public:
  static constexpr uint32_t kCapacity = 1024;
  static GeneratorRegistry& instance();
  // Registration from static initializers in graph/generators/*.cc.
  bool add(GeneratorInfo info);
  // Run-time registration: false with *error for a name the kind has
  // already, or a full registry.
  bool add_checked(GeneratorInfo info, std::string* error);
  const GeneratorInfo* find(CollKind kind, std::string_view name) const;  // no allocation
  std::vector<const GeneratorInfo*> list(CollKind kind) const;
  std::vector<const GeneratorInfo*> all() const;
  // "a, b, c": the valid names for `kind`, for error messages.
  std::string names(CollKind kind) const;
  // A name a generator may be registered under: 1 to 64 bytes of
  // [A-Za-z0-9_.-] (carflow/generator.h, cf_generator_register).
  static bool well_formed_name(std::string_view name);

 private:
  std::array<std::unique_ptr<const GeneratorInfo>, kCapacity> generators_;
  std::atomic<uint32_t> count_{0};
};

// Registers a generator at static-initialization time:
//   CARFLOW_REGISTER_GENERATOR(binomial_broadcast, {CollKind::Broadcast, "binomial", ...});
#define CARFLOW_REGISTER_GENERATOR(ident, ...) \
  static const bool carflow_registered_##ident = \
      ::carflow::GeneratorRegistry::instance().add(::carflow::GeneratorInfo __VA_ARGS__)

// One image's DAG: the generator's output with the sync-mode transform that
// spec.flags asks for (graph/transforms.h).
LocalDag generate_local(const GeneratorInfo& gen, const CollectiveSpec& spec, uint32_t image);

// The symmetry of generate_local's DAGs for `spec`: gen.symmetry's answer,
// or None for a spec outside what any declaration covers (P < 2, v forms,
// sync-mode transforms, whose exit signal has a root).
RankSymmetry rank_symmetry(const GeneratorInfo& gen, const CollectiveSpec& spec);
// sigma_image(peer): where image 0's peer `peer` lies in image `image`'s DAG.
inline uint32_t symmetric_peer(RankSymmetry symmetry, uint32_t image, uint32_t peer, uint32_t images) {
  return symmetry == RankSymmetry::Xor ? (peer ^ image) : (peer + image) % images;
}

// Whether `other`, image `image`'s DAG, is `zero` (image 0's) with every
// peer renamed by `symmetry` in what the cost model reads (CAR kinds,
// buffer lengths, members, peers, tags, dependencies); false with *why
// naming the first CAR that differs. A plug-in's declaration is checked
// with this before it is relied on.
bool mirrors_image0(const LocalDag& zero, const LocalDag& other, RankSymmetry symmetry, uint32_t image,
                    uint32_t images, std::string* why);

// Looks at each image as generate_global makes it: false stops the
// generation, with *error set by the check.
using ImageCheck = std::function<bool(const LocalDag& image, std::string* error)>;

// Runs generate_local for every image: the global DAG.
// Returns false with *error set when the algorithm is unknown, or when
// `check` (if given) refuses an image; out->images is then empty.
bool generate_global(const CollectiveSpec& spec, GlobalDag* out, std::string* error,
                     const ImageCheck& check = nullptr);

}  // namespace carflow
