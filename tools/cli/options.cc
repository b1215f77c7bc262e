// Command-line parsing and the checks commands share.
#include "tools/cli/cli.h"

namespace carflow::cli {

const CommandSpec* command_spec(const std::string& cmd) {
  static const std::map<std::string, CommandSpec> kSpecs = {
      {"demo", {{"images", "out", "plugin"}, {}, 0}},
      {"plan",
       {{"coll", "images", "bytes", "algo", "root", "elem-size", "src-blksz", "src-offset", "dst-blksz",
         "dst-offset", "images-per-node", "out", "format", "model", "model-file", "plugin"},
        {"in-allsync", "out-allsync", "exclusive"},
        0}},
      {"simulate",
       {{"coll", "images", "bytes", "algo", "root", "elem-size", "images-per-node", "model", "model-file",
         "plugin", "calls"},
        {"json", "in-allsync", "out-allsync", "exclusive"},
        0}},
      {"check",
       {{"coll", "images", "bytes", "algo", "root", "roots", "elem-size", "images-per-node", "orders", "out",
         "plugin"},
        {"exclusive"},
        0}},
      {"dot", {{"plugin"}, {}, 1}},
      {"view", {{"o", "collapse-above", "plugin"}, {}, 1}},
      {"trace", {{"o"}, {}, 2}},
      {"bench",
       {{"coll", "images", "sizes", "iters", "algo", "sync", "calls", "aggregate", "rounds", "plugin", "ops", "seed"},
        {"json", "copy-floor", "fresh-src"}, 0}},
      {"compare", {{"coll", "images", "sizes", "iters", "rounds", "plugin"}, {"fresh-src"}, 0}},
      {"info", {{"plugin"}, {}, 0}},
      {"calibrate", {{"transport", "out", "iters"}, {}, 0}},
      {"tune", {{"model-file", "model", "images", "images-per-node", "max-bytes", "out", "plugin"}, {}, 0}},
  };
  auto it = kSpecs.find(cmd);
  return it == kSpecs.end() ? nullptr : &it->second;
}

// --key value pairs and flags (mapped to "1") as `spec` allows them; plain
// arguments as "_0", "_1", ... Anything else is an error naming it.
bool parse_args(const std::string& cmd, const CommandSpec& spec, int argc, char** argv, int first, Args* out,
                std::string* error) {
  auto listed = [](const std::vector<std::string>& list, const std::string& key) {
    return std::find(list.begin(), list.end(), key) != list.end();
  };
  size_t positional = 0;
  for (int i = first; i < argc; ++i) {
    std::string key = argv[i];
    if (key.size() == 2 && key[0] == '-' && key[1] != '-') key = "-" + key;  // -o is --o
    if (key.rfind("--", 0) != 0) {
      if (positional == spec.positional) {
        *error = "'" + key + "': unexpected argument (carflow " + cmd + " takes " +
                 (spec.positional == 0   ? std::string("only --options")
                  : spec.positional == 1 ? std::string("one file")
                                         : std::to_string(spec.positional) + " arguments") +
                 ")";
        return false;
      }
      (*out)["_" + std::to_string(positional++)] = key;
      continue;
    }
    key = key.substr(2);
    if (out->count(key)) {
      *error = "--" + key + ": given twice";
      return false;
    }
    if (listed(spec.flags, key)) {
      (*out)[key] = "1";
    } else if (listed(spec.valued, key)) {
      if (i + 1 >= argc) {
        *error = "--" + key + ": missing value";
        return false;
      }
      (*out)[key] = argv[++i];
    } else {
      std::string known;
      for (const auto& k : spec.valued) known += std::string(known.empty() ? "" : ", ") + (k.size() == 1 ? "-" : "--") + k;
      for (const auto& k : spec.flags) known += (known.empty() ? "--" : ", --") + k;
      *error = "--" + key + ": not an option of carflow " + cmd +
               (known.empty() ? " (it takes none)" : " (its options: " + known + ")");
      return false;
    }
  }
  return true;
}

// An unsigned option in [min, max] (sizes with K/M/G suffixes allowed);
// `fallback` when absent.
bool get_uint(const Args& args, const std::string& key, uint64_t fallback, uint64_t min, uint64_t max,
              uint64_t* out, std::string* error) {
  auto it = args.find(key);
  if (it == args.end()) {
    *out = fallback;
    return true;
  }
  std::vector<uint64_t> v;
  std::string e;
  uint64_t value = 0;
  // parse_sizes rejects 0; a plain 0 is a number too.
  const bool number = it->second == "0" ||
                      (carflow_bench::parse_sizes(it->second, &v, &e) && v.size() == 1 &&
                       it->second.find(':') == std::string::npos);
  if (number && !v.empty()) value = v[0];
  if (!number || value < min || value > max) {
    *error = "--" + key + ": '" + it->second + "' is not a number in [" + std::to_string(min) + ", " +
             std::to_string(max) + "]";
    return false;
  }
  *out = value;
  return true;
}

int fail(const std::string& message) {
  std::fprintf(stderr, "carflow: %s\n", message.c_str());
  return 2;
}

std::string kinds_list() {
  std::string out;
  for (int k = 0; k < carflow::kCollKinds; ++k) {
    out += (k ? ", " : "") + std::string(carflow::coll_kind_name(static_cast<carflow::CollKind>(k)));
  }
  return out;
}

// --coll's value as a kind; false with *error naming the option and the kinds.
bool coll_kind(const std::string& name, carflow::CollKind* kind, std::string* error) {
  if (carflow::parse_coll_kind(name, kind)) return true;
  *error = "--coll: expected one of " + kinds_list();
  return false;
}

// --algo: a generator registered for `kind` (graph/registry.h).
bool algo_known(carflow::CollKind kind, const std::string& name, std::string* error) {
  if (carflow::GeneratorRegistry::instance().find(kind, name) != nullptr) return true;
  *error = "--algo: " + std::string(carflow::coll_kind_name(kind)) + " has no algorithm '" + name +
           "' (its algorithms: " + carflow::GeneratorRegistry::instance().names(kind) + ")";
  return false;
}

// A layout error names the spec's fields ("dst_blksz, dst_offset: ..."):
// say them as the options that set them.
std::string as_options(const std::string& error) {
  static const std::pair<const char*, const char*> kNames[] = {
      {"src_blksz", "--src-blksz"}, {"src_offset", "--src-offset"}, {"dst_blksz", "--dst-blksz"},
      {"dst_offset", "--dst-offset"}, {"elem_size", "--elem-size"}, {"nbytes", "--bytes"},
      {"root", "--root"}, {"images", "--images"}};
  const size_t colon = error.find(": ");
  if (colon == std::string::npos) return error;
  std::string head = error.substr(0, colon), out;
  size_t at = 0;
  while (at < head.size()) {  // comma-separated field names
    size_t end = head.find(", ", at);
    if (end == std::string::npos) end = head.size();
    std::string name = head.substr(at, end - at);
    for (const auto& [field, option] : kNames) {
      if (name == field) name = option;
    }
    out += (out.empty() ? "" : ", ") + name;
    at = end + 2;
  }
  return out + error.substr(colon);
}

}  // namespace carflow::cli
