// carflow plan / check / simulate: the collective the options describe.
#include "tools/cli/cli.h"

namespace carflow::cli {

bool spec_from_args(const Args& args, const carflow::Config& config, uint64_t max_images, bool need_images,
                    carflow::CollectiveSpec* out, std::string* error) {
  carflow::CollectiveSpec spec;
  auto coll = args.find("coll");
  if (!coll_kind(coll == args.end() ? "" : coll->second, &spec.kind, error)) return false;
  uint64_t images = 0, bytes = 0, root = 0, elem = 1, segment = 0, ppn = 0;
  if (!get_uint(args, "images", 0, 1, max_images, &images, error) ||
      !get_uint(args, "bytes", spec.kind == carflow::CollKind::Barrier ? 0 : 8, 0, uint64_t{1} << 32,
                &bytes, error) ||
      !get_uint(args, "root", 0, 0, max_images - 1, &root, error) ||
      !get_uint(args, "elem-size", carflow::is_computational(spec.kind) ? 8 : 1, 1, 4096, &elem, error) ||
      !get_uint(args, "src-blksz", 0, 0, uint64_t{1} << 40, &spec.src_blksz, error) ||
      !get_uint(args, "src-offset", 0, 0, uint64_t{1} << 40, &spec.src_offset, error) ||
      !get_uint(args, "dst-blksz", 0, 0, uint64_t{1} << 40, &spec.dst_blksz, error) ||
      !get_uint(args, "dst-offset", 0, 0, uint64_t{1} << 40, &spec.dst_offset, error) ||
      !get_uint(args, "images-per-node", 0, 0, max_images, &ppn, error)) {
    return false;
  }
  auto fail_with = [error](const std::string& what) { return *error = what, false; };
  if (images == 0 && need_images) {
    return fail_with("--images: required, 1.." + std::to_string(max_images));
  }
  if (images != 0 && root >= images) return fail_with("--root: must be below --images");
  if (bytes % elem != 0) return fail_with("--bytes: must be a multiple of --elem-size");
  auto algo = args.find("algo");
  if (algo != args.end() && !algo_known(spec.kind, algo->second, error)) return false;
  spec.algorithm = algo != args.end()
                       ? algo->second
                       : carflow::SelectionTable(config, std::thread::hardware_concurrency())
                             .choose(spec.kind, static_cast<uint32_t>(images == 0 ? 2 : images), bytes,
                                     static_cast<uint32_t>(elem), true)
                             ->name;
  const carflow::GeneratorInfo* gen = carflow::GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  if (gen != nullptr && gen->segmented) segment = config.segment_bytes;
  spec.images = static_cast<uint32_t>(images);
  spec.root = static_cast<uint32_t>(root);
  spec.nbytes = bytes;
  spec.elem_size = static_cast<uint32_t>(elem);
  spec.segment_bytes = segment;
  spec.flags = (args.count("in-allsync") ? carflow::kSpecInAllSync : 0) |
               (args.count("out-allsync") ? carflow::kSpecOutAllSync : 0) |
               (args.count("exclusive") ? carflow::kExclusiveFlag : 0);
  if (gen != nullptr) {  // the parameters the engine would give this generator
    if (gen->params & carflow::kUsesRadix) spec.radix = config.tree_radix;
    if (gen->params & carflow::kUsesWindow) spec.window = config.exchange_window;
    if (gen->params & carflow::kUsesLogp) {
      spec.logp_L = config.logp_L, spec.logp_o = config.logp_o, spec.logp_g = config.logp_g;
    }
    if (gen->params & carflow::kUsesNodes) spec.images_per_node = static_cast<uint32_t>(ppn);
  }
  set_images(&spec, spec.images);
  *out = std::move(spec);
  return true;
}

void set_images(carflow::CollectiveSpec* spec, uint32_t images) {
  spec->images = images;
  spec->perm.clear();
  if (spec->kind == carflow::CollKind::Permute) {  // the shift i -> i + 1
    for (uint32_t i = 0; i < images; ++i) spec->perm.push_back((i + 1) % images);
  }
}

}  // namespace carflow::cli
