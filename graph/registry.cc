#include "graph/registry.h"

#include "graph/transforms.h"

namespace carflow {

GeneratorRegistry& GeneratorRegistry::instance() {
  // Filled once by static initializers before main; read-only afterwards.
  // Never destroyed: image threads still building schedules while another
  // thread calls exit() must not find it torn down by static destruction.
  static GeneratorRegistry& registry = *new GeneratorRegistry;
  return registry;
}

bool GeneratorRegistry::add(GeneratorInfo info) {
  generators_.push_back(std::move(info));
  return true;
}

const GeneratorInfo* GeneratorRegistry::find(CollKind kind, std::string_view name) const {
  for (const GeneratorInfo& g : generators_) {
    if (g.kind == kind && g.name == name) return &g;
  }
  return nullptr;
}

std::vector<const GeneratorInfo*> GeneratorRegistry::list(CollKind kind) const {
  std::vector<const GeneratorInfo*> out;
  for (const GeneratorInfo& g : generators_) {
    if (g.kind == kind) out.push_back(&g);
  }
  return out;
}

std::vector<const GeneratorInfo*> GeneratorRegistry::all() const {
  std::vector<const GeneratorInfo*> out;
  for (const GeneratorInfo& g : generators_) out.push_back(&g);
  return out;
}

std::string GeneratorRegistry::names(CollKind kind) const {
  std::string out;
  for (const GeneratorInfo* g : list(kind)) {
    if (!out.empty()) out += ", ";
    out += g->name;
  }
  return out;
}

LocalDag generate_local(const GeneratorInfo& gen, const CollectiveSpec& spec, uint32_t image) {
  return apply_sync_mode(gen.fn(spec, image), spec.images, (spec.flags & kSpecInAllSync) != 0,
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
