#include "engine/selection.h"

namespace carflow {

SelectionTable::SelectionTable(const Config& config)
    : allreduce_ring_bytes_(config.allreduce_ring_bytes) {
  const GeneratorRegistry& reg = GeneratorRegistry::instance();
  flat_broadcast_ = reg.find(CollKind::Broadcast, "flat");
  binomial_broadcast_ = reg.find(CollKind::Broadcast, "binomial");
  dissemination_barrier_ = reg.find(CollKind::Barrier, "dissemination");
  recursive_doubling_allreduce_ = reg.find(CollKind::Allreduce, "recursive_doubling");
  ring_allreduce_ = reg.find(CollKind::Allreduce, "ring");
  // Config::from_env has checked these names; "" finds nothing (no override).
  forced_[static_cast<int>(CollKind::Broadcast)] = reg.find(CollKind::Broadcast, config.algo_broadcast);
  forced_[static_cast<int>(CollKind::Barrier)] = reg.find(CollKind::Barrier, config.algo_barrier);
  forced_[static_cast<int>(CollKind::Allreduce)] = reg.find(CollKind::Allreduce, config.algo_allreduce);
}

const GeneratorInfo* SelectionTable::choose(CollKind kind, uint32_t images, uint64_t nbytes,
                                            uint32_t elem_size, bool commutative) const {
  if (forced_[static_cast<int>(kind)] != nullptr) return forced_[static_cast<int>(kind)];
  switch (kind) {
    case CollKind::Broadcast:
      return images <= 2 ? flat_broadcast_ : binomial_broadcast_;
    case CollKind::Barrier:
      return dissemination_barrier_;
    case CollKind::Allreduce:
      // Ring needs commutativity and at least one element per image.
      return nbytes >= allreduce_ring_bytes_ && commutative &&
                     nbytes >= uint64_t{images} * elem_size
                 ? ring_allreduce_
                 : recursive_doubling_allreduce_;
  }
  return nullptr;
}

}  // namespace carflow
