#include "graph/registry.h"

#include "graph/transforms.h"

namespace carflow {

GeneratorRegistry& GeneratorRegistry::instance() {
  // Filled by static initializers before main and by run-time
  // registration (plug-ins). Never destroyed: image threads still building schedules while another
  // thread calls exit() must not find it torn down by static destruction.
  static GeneratorRegistry& registry = *new GeneratorRegistry;
  return registry;
}

bool GeneratorRegistry::add(GeneratorInfo info) {
  std::string error;
  return add_checked(std::move(info), &error);
}

bool GeneratorRegistry::add_checked(GeneratorInfo info, std::string* error) {
  if (find(info.kind, info.name) != nullptr) {
    *error = "name: " + std::string(coll_kind_name(info.kind)) + " already has an algorithm '" + info.name + "'";
    return false;
  }
  const uint32_t n = count_.load(std::memory_order_relaxed);
  if (n == kCapacity) {
    *error = "name: the registry is full (" + std::to_string(kCapacity) + " algorithms)";
    return false;
  }
  generators_[n] = std::make_unique<const GeneratorInfo>(std::move(info));
  count_.store(n + 1, std::memory_order_release);
  return true;
}

const GeneratorInfo* GeneratorRegistry::find(CollKind kind, std::string_view name) const {
  const uint32_t n = count_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    const GeneratorInfo& g = *generators_[i];
    if (g.kind == kind && g.name == name) return &g;
  }
  return nullptr;
}

std::vector<const GeneratorInfo*> GeneratorRegistry::list(CollKind kind) const {
  std::vector<const GeneratorInfo*> out;
  const uint32_t n = count_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) {
    if (generators_[i]->kind == kind) out.push_back(generators_[i].get());
  }
  return out;
}

std::vector<const GeneratorInfo*> GeneratorRegistry::all() const {
  std::vector<const GeneratorInfo*> out;
  const uint32_t n = count_.load(std::memory_order_acquire);
  for (uint32_t i = 0; i < n; ++i) out.push_back(generators_[i].get());
  return out;
}

bool GeneratorRegistry::well_formed_name(std::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string GeneratorRegistry::names(CollKind kind) const {
  std::string out;
  for (const GeneratorInfo* g : list(kind)) {
    if (!out.empty()) out += ", ";
    out += g->name;
  }
  return out;
}

RankSymmetry shift_symmetric(const CollectiveSpec&) { return RankSymmetry::Shift; }

RankSymmetry xor_symmetric(const CollectiveSpec& spec) {
  return (spec.images & (spec.images - 1)) == 0 ? RankSymmetry::Xor : RankSymmetry::None;
}

RankSymmetry rank_symmetry(const GeneratorInfo& gen, const CollectiveSpec& spec) {
  if (gen.symmetry == nullptr || spec.images < 2 || !spec.counts.empty() || !spec.displs.empty() ||
      (spec.flags & (kSpecInAllSync | kSpecOutAllSync)) != 0) {
    return RankSymmetry::None;
  }
  return gen.symmetry(spec);
}

bool mirrors_image0(const LocalDag& zero, const LocalDag& other, RankSymmetry symmetry, uint32_t image,
                    uint32_t images, std::string* why) {
  if (other.cars.size() != zero.cars.size()) {
    *why = "image " + std::to_string(image) + " has " + std::to_string(other.cars.size()) +
           " CARs, image 0 " + std::to_string(zero.cars.size());
    return false;
  }
  for (size_t c = 0; c < zero.cars.size(); ++c) {
    const Car &a = zero.cars[c], &b = other.cars[c];
    bool same = a.kind == b.kind && a.src.length == b.src.length && a.src2.length == b.src2.length &&
                a.dst.length == b.dst.length && a.member == b.member && a.deps == b.deps;
    if (same && a.is_message()) {
      same = b.peer == symmetric_peer(symmetry, image, a.peer, images) && a.tag == b.tag;
    }
    if (!same) {
      *why = "image " + std::to_string(image) + "'s CAR " + std::to_string(c) +
             " is not image 0's with its peer renamed";
      return false;
    }
  }
  return true;
}

LocalDag generate_local(const GeneratorInfo& gen, const CollectiveSpec& spec, uint32_t image) {
  return apply_sync_mode(gen.closure ? gen.closure(spec, image) : gen.fn(spec, image), spec.images, (spec.flags & kSpecInAllSync) != 0,
                         (spec.flags & kSpecOutAllSync) != 0, out_allsync_root(spec),
                         out_allsync_fan_in_root(spec));
}

bool generate_global(const CollectiveSpec& spec, GlobalDag* out, std::string* error, const ImageCheck& check) {
  const GeneratorInfo* gen = GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  if (gen == nullptr) {
    *error = std::string("unknown ") + coll_kind_name(spec.kind) + " algorithm '" +
             spec.algorithm + "' (valid: " + GeneratorRegistry::instance().names(spec.kind) + ")";
    return false;
  }
  out->spec = spec;
  out->images.clear();
  for (uint32_t image = 0; image < spec.images; ++image) {
    out->images.push_back(generate_local(*gen, spec, image));
    if (check && !check(out->images.back(), error)) {
      out->images.clear();
      out->images.shrink_to_fit();
      return false;
    }
  }
  return true;
}

}  // namespace carflow
