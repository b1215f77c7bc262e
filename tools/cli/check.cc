// carflow check: a generator (plug-in or built-in) checked at every team
// size of a range, every root asked for and several sizes, on the
// sequential executor against the reference (graph/check.h).
#include "graph/check.h"
#include "tools/cli/cli.h"

namespace carflow::cli {
namespace {

// --images LO:HI or P.
bool image_range(const Args& args, uint32_t* lo, uint32_t* hi, std::string* error) {
  auto it = args.find("images");
  const std::string text = it == args.end() ? "1:16" : it->second;
  const size_t colon = text.find(':');
  Args one;
  uint64_t a = 0, b = 0;
  one["images"] = text.substr(0, colon);
  if (!get_uint(one, "images", 0, 1, kCheckImages, &a, error)) return false;
  b = a;
  if (colon != std::string::npos) {
    one["images"] = text.substr(colon + 1);
    if (!get_uint(one, "images", 0, 1, kCheckImages, &b, error)) return false;
  }
  if (b < a) return *error = "--images: LO:HI needs LO <= HI (got '" + text + "')", false;
  *lo = static_cast<uint32_t>(a);
  *hi = static_cast<uint32_t>(b);
  return true;
}

// --bytes LIST (8,1K,...), every entry a multiple of the element size.
bool byte_list(const Args& args, const carflow::CollectiveSpec& spec, std::vector<uint64_t>* out,
               std::string* error) {
  auto it = args.find("bytes");
  if (spec.kind == carflow::CollKind::Barrier) return out->assign({0}), true;
  if (it == args.end()) {
    const uint64_t e = spec.elem_size;
    *out = carflow::is_computational(spec.kind) ? std::vector<uint64_t>{e, 3 * e, 100 * e}
                                                : std::vector<uint64_t>{1, 8, 1000};
    return true;
  }
  std::string e;
  if (!carflow_bench::parse_sizes(it->second, out, &e)) return *error = "--bytes: " + e, false;
  for (uint64_t n : *out) {
    if (n % spec.elem_size != 0) {
      return *error = "--bytes: " + std::to_string(n) + " is not a multiple of the element size " +
                      std::to_string(spec.elem_size), false;
    }
  }
  return true;
}

bool rooted(carflow::CollKind k) {
  using K = carflow::CollKind;
  return k == K::Broadcast || k == K::Scatter || k == K::Gather || k == K::ReduceVec || k == K::Reduce;
}

}  // namespace

int cmd_check(const Args& args) {
  std::string error;
  carflow::Config config;
  if (!carflow::Config::from_env(&config, &error)) return fail(error);
  if (!args.count("algo")) return fail("--algo: required (the algorithm to check; `carflow info` lists them)");
  Args spec_args = args;
  spec_args.erase("images");
  spec_args.erase("root");
  spec_args.erase("bytes");
  carflow::CollectiveSpec base;
  if (!spec_from_args(spec_args, config, kCheckImages, false, &base, &error)) return fail(error);
  const carflow::GeneratorInfo* gen = carflow::GeneratorRegistry::instance().find(base.kind, base.algorithm);
  // An order-preserving reduction is checked with a non-commutative operator
  // on 16-byte elements (graph/check.h), unless --elem-size says otherwise.
  if (carflow::is_computational(base.kind) && !args.count("elem-size")) {
    base.elem_size = gen->preserves_order ? 16 : 8;
  }
  uint32_t lo = 0, hi = 0;
  uint64_t orders = 0, fixed_root = 0;
  std::vector<uint64_t> sizes;
  if (!image_range(args, &lo, &hi, &error) || !byte_list(args, base, &sizes, &error) ||
      !get_uint(args, "orders", 3, 1, 1000, &orders, &error) ||
      !get_uint(args, "root", 0, 0, kCheckImages - 1, &fixed_root, &error)) {
    return fail(error);
  }
  auto roots_arg = args.find("roots");
  if (roots_arg != args.end() && roots_arg->second != "all" && roots_arg->second != "ends") {
    return fail("--roots: expected 'all' or 'ends' (0, P/2 and P-1; the default)");
  }
  const bool all_roots = roots_arg != args.end() && roots_arg->second == "all";
  // A segmented generator is checked unsegmented and cut into three
  // segments, so its pipelining is exercised at small sizes too.
  std::vector<bool> segment_modes{false};
  if (gen->segmented) segment_modes.push_back(true);
  const std::string out = args.count("out") ? args.at("out") : "carflow-check-failure.json";
  std::printf("check %s %s: P = %u..%u, %zu sizes, %s, %llu orders each%s\n",
              carflow::coll_kind_name(base.kind), base.algorithm.c_str(), lo, hi, sizes.size(),
              !rooted(base.kind) ? "no root" : args.count("root") ? "one root" : all_roots ? "every root" : "roots 0, P/2, P-1",
              static_cast<unsigned long long>(orders),
              carflow::is_computational(base.kind)
                  ? (base.elem_size == 16 && gen->preserves_order ? "; non-commutative operator" : "; byte sum")
                  : "");
  for (uint32_t P = lo; P <= hi; ++P) {
    std::vector<uint32_t> roots;
    if (!rooted(base.kind)) {
      roots = {0};
    } else if (args.count("root")) {
      if (fixed_root >= P) continue;
      roots = {static_cast<uint32_t>(fixed_root)};
    } else if (all_roots) {
      for (uint32_t r = 0; r < P; ++r) roots.push_back(r);
    } else {
      roots = {0, P / 2, P - 1};
      std::sort(roots.begin(), roots.end());
      roots.erase(std::unique(roots.begin(), roots.end()), roots.end());
    }
    uint64_t runs = 0;
    for (uint32_t root : roots) {
      for (uint64_t n : sizes) {
        for (bool segmented : segment_modes) {
          carflow::CollectiveSpec spec = base;
          set_images(&spec, P);
          spec.root = root;
          spec.nbytes = n;
          spec.segment_bytes = segmented ? std::max<uint64_t>(spec.elem_size, n / 3 / spec.elem_size * spec.elem_size)
                                         : 0;
          if (!carflow::check_layout(spec, &error)) return fail(as_options(error));
          carflow::GlobalDag dag;
          std::string failure;
          if (!carflow::check_generator(spec, static_cast<int>(orders), &dag, &failure)) {
            std::printf("P=%-5u FAIL root %u, %llu bytes%s: %s\n", P, root, static_cast<unsigned long long>(n),
                        segmented ? (", segments of " + std::to_string(spec.segment_bytes)).c_str() : "",
                        failure.c_str());
            if (!dag.images.empty() && carflow::save_dag_file(dag, out, &error)) {
              std::printf("wrote the failing DAG to %s (carflow dot %s, carflow view %s)\n", out.c_str(),
                          out.c_str(), out.c_str());
            }
            return 1;
          }
          ++runs;
        }
      }
    }
    std::printf("P=%-5u PASS (%llu DAGs)\n", P, static_cast<unsigned long long>(runs));
  }
  return 0;
}

}  // namespace carflow::cli
