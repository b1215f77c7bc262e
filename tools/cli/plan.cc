// carflow plan: build, validate and save a collective's global DAG.
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_plan(const Args& args) {
  std::string error;
  carflow::CollectiveSpec spec;
  auto coll = args.find("coll");
  if (!coll_kind(coll == args.end() ? "" : coll->second, &spec.kind, &error)) return fail(error);
  uint64_t images = 0, bytes = 0, root = 0, elem = 1, segment = 0, ppn = 0;
  if (!get_uint(args, "images", 0, 1, 4096, &images, &error) ||
      !get_uint(args, "bytes", spec.kind == carflow::CollKind::Barrier ? 0 : 8, 0, uint64_t{1} << 32,
                &bytes, &error) ||
      !get_uint(args, "root", 0, 0, 4095, &root, &error) ||
      !get_uint(args, "elem-size", carflow::is_computational(spec.kind) ? 8 : 1, 1, 4096, &elem,
                &error) ||
      !get_uint(args, "src-blksz", 0, 0, uint64_t{1} << 40, &spec.src_blksz, &error) ||
      !get_uint(args, "src-offset", 0, 0, uint64_t{1} << 40, &spec.src_offset, &error) ||
      !get_uint(args, "dst-blksz", 0, 0, uint64_t{1} << 40, &spec.dst_blksz, &error) ||
      !get_uint(args, "dst-offset", 0, 0, uint64_t{1} << 40, &spec.dst_offset, &error) ||
      !get_uint(args, "images-per-node", 0, 0, 4096, &ppn, &error)) {
    return fail(error);
  }
  carflow::Config config;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  if (images == 0) return fail("--images: required, 1..4096");
  if (root >= images) return fail("--root: must be below --images");
  if (bytes % elem != 0) return fail("--bytes: must be a multiple of --elem-size");
  auto algo = args.find("algo");
  if (algo != args.end() && !algo_known(spec.kind, algo->second, &error)) return fail(error);
  spec.algorithm = algo != args.end()
                       ? algo->second
                       : carflow::SelectionTable(config, std::thread::hardware_concurrency())
                             .choose(spec.kind, static_cast<uint32_t>(images), bytes,
                                     static_cast<uint32_t>(elem), true)
                             ->name;
  const carflow::GeneratorInfo* gen =
      carflow::GeneratorRegistry::instance().find(spec.kind, spec.algorithm);
  if (gen != nullptr && gen->segmented) segment = config.segment_bytes;
  spec.images = static_cast<uint32_t>(images);
  spec.root = static_cast<uint32_t>(root);
  spec.nbytes = bytes;
  spec.elem_size = static_cast<uint32_t>(elem);
  spec.segment_bytes = segment;
  spec.flags = (args.count("in-allsync") ? carflow::kSpecInAllSync : 0) |
               (args.count("out-allsync") ? carflow::kSpecOutAllSync : 0) |
               (args.count("exclusive") ? carflow::kExclusiveFlag : 0);
  if (spec.kind == carflow::CollKind::Permute) {  // the shift i -> i + 1
    for (uint32_t i = 0; i < spec.images; ++i) spec.perm.push_back((i + 1) % spec.images);
  }
  if (gen != nullptr) {  // the parameters the engine would give this generator
    if (gen->params & carflow::kUsesRadix) spec.radix = config.tree_radix;
    if (gen->params & carflow::kUsesWindow) spec.window = config.exchange_window;
    if (gen->params & carflow::kUsesLogp) {
      spec.logp_L = config.logp_L, spec.logp_o = config.logp_o, spec.logp_g = config.logp_g;
    }
    if (gen->params & carflow::kUsesNodes) spec.images_per_node = static_cast<uint32_t>(ppn);
  }
  if (!carflow::check_layout(spec, &error)) return fail(as_options(error));
  carflow::GlobalDag dag;
  // Image by image, refused once it could not be saved (before it takes
  // gigabytes, as a pairwise exchange on 1024 images would).
  if (!carflow::generate_global_bounded(spec, &dag, &error)) return fail(as_options(error));
  if (!carflow::validate_global(dag, &error)) return fail("invalid DAG: " + error);
  const carflow::DagStats stats = carflow::dag_stats(dag);
  auto out = args.find("out");
  if (out == args.end()) return fail("--out: required (the JSON file to write)");
  if (!carflow::save_dag_file(dag, out->second, &error)) return fail(error);
  std::printf("%s %s on %u images, %llu bytes: %llu CARs, %llu messages (%llu bytes), "
              "critical path %llu CARs; valid; wrote %s\n",
              spec.algorithm.c_str(), coll->second.c_str(), spec.images,
              static_cast<unsigned long long>(bytes), static_cast<unsigned long long>(stats.cars),
              static_cast<unsigned long long>(stats.messages),
              static_cast<unsigned long long>(stats.message_bytes),
              static_cast<unsigned long long>(stats.critical_path), out->second.c_str());
  return 0;
}

}  // namespace carflow::cli
