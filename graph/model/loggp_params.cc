// The LogGP model's parameters from text: "--model" strings and JSON files.
// Both are user input: every key and value is checked and an error names
// the key.
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "graph/json.h"
#include "graph/json_strict.h"
#include "graph/model/loggp.h"

namespace carflow {
namespace {

using Json = nlohmann::json;

struct Key {
  const char* name;
  double LogGPParams::*field;
  bool per_pair;  // may differ within a node (an intra.X key)
  const char* doc;
};

constexpr Key kKeys[] = {
    {"L", &LogGPParams::L, true, "latency, ns"},
    {"o", &LogGPParams::o, true, "CPU overhead per message, ns"},
    {"g", &LogGPParams::g, true, "NIC gap between sends, ns"},
    {"G", &LogGPParams::G, true, "NIC gap per byte, ns/B"},
    {"O", &LogGPParams::O, true, "CPU overhead per byte, ns/B"},
    {"S", &LogGPParams::S, true, "eager limit, bytes (rendezvous above)"},
    {"gamma", &LogGPParams::gamma, false, "REDUCE per byte of operand, ns/B"},
    {"beta", &LogGPParams::beta, false, "COPY per byte, ns/B"},
};
constexpr double kMaxValue = 1e12;
constexpr const char* kIntraPrefix = "intra.";

bool fail(std::string* error, std::string message) {
  *error = std::move(message);
  return false;
}

std::string key_names() {
  std::string out;
  for (const Key& k : kKeys) out += (out.empty() ? "" : ", ") + std::string(k.name);
  for (const Key& k : kKeys) {
    if (k.per_pair) out += ", " + std::string(kIntraPrefix) + k.name;
  }
  return out;
}

// The key `name` names ("L", "intra.L"): its index in kKeys and set.
bool find_key(const std::string& name, size_t* index, bool* intra) {
  *intra = name.rfind(kIntraPrefix, 0) == 0;
  const std::string base = *intra ? name.substr(std::char_traits<char>::length(kIntraPrefix)) : name;
  for (size_t i = 0; i < std::size(kKeys); ++i) {
    if (base != kKeys[i].name || (*intra && !kKeys[i].per_pair)) continue;
    *index = i;
    return true;
  }
  return false;
}

bool check_value(const std::string& key, double value, std::string* error) {
  if (!std::isfinite(value) || value < 0 || value > kMaxValue) {
    std::ostringstream text;
    text << key << ": " << value << " is not a number in [0, 1e12]";
    return fail(error, text.str());
  }
  return true;
}

// Plain decimal numbers only ("12", "0.5", "2e3"): strtod would also take
// "inf", "nan" and hexadecimal.
bool parse_number(const std::string& key, const std::string& text, double* out, std::string* error) {
  const bool plain = !text.empty() && text.find_first_not_of("0123456789.eE+-") == std::string::npos;
  char* end = nullptr;
  const double value = plain ? std::strtod(text.c_str(), &end) : 0;
  if (!plain || end != text.c_str() + text.size()) {
    return fail(error, key + ": '" + text + "' is not a number");
  }
  if (!check_value(key, value, error)) return false;
  *out = value;
  return true;
}

// intra.X not given anywhere follows X.
void follow_inter(LogGPModel* model) {
  for (size_t i = 0; i < std::size(kKeys); ++i) {
    if (!(model->intra_given & (1u << i))) model->intra.*kKeys[i].field = model->inter.*kKeys[i].field;
  }
}

bool set_key(LogGPModel* model, const std::string& key, double value, std::set<std::string>* seen,
             std::string* error) {
  size_t i = 0;
  bool intra = false;
  if (!find_key(key, &i, &intra)) return fail(error, key + ": not a model key (keys: " + key_names() + ")");
  if (!seen->insert(key).second) return fail(error, key + ": given twice");
  LogGPParams& params = intra ? model->intra : model->inter;
  params.*(kKeys[i].field) = value;
  if (intra) model->intra_given |= 1u << i;
  return true;
}

}  // namespace

bool parse_model_string(const std::string& text, LogGPModel* model, std::string* error) {
  LogGPModel out = *model;
  std::set<std::string> seen;
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find(',', at);
    if (end == std::string::npos) end = text.size();
    const std::string item = text.substr(at, end - at);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(error, "'" + item + "': expected KEY=VALUE (keys: " + key_names() + ")");
    }
    const std::string key = item.substr(0, eq);
    double value = 0;
    size_t index = 0;
    bool intra = false;
    if (!find_key(key, &index, &intra)) {
      return fail(error, key + ": not a model key (keys: " + key_names() + ")");
    }
    if (!parse_number(key, item.substr(eq + 1), &value, error) || !set_key(&out, key, value, &seen, error)) {
      return false;
    }
    at = end + 1;
    if (end + 1 == text.size()) return fail(error, "'" + text + "': ends with a comma");
  }
  follow_inter(&out);
  *model = out;
  return true;
}

namespace {

// Unknown fields, duplicates (which nlohmann would let the last win),
// non-numbers and nesting other than "intra" are errors naming the field.
bool read_object(const Json& obj, const std::string& prefix, LogGPModel* model,
                 std::set<std::string>* seen, std::string* error, const char* skip = nullptr) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = prefix + it.key();
    if (prefix.empty() && skip != nullptr && it.key() == skip) continue;  // the caller's to read
    if (prefix.empty() && it.key() == "intra") {
      if (!it.value().is_object()) return fail(error, "intra: expected an object of intra-node keys");
      if (!read_object(it.value(), kIntraPrefix, model, seen, error)) return false;
      continue;
    }
    size_t index = 0;
    bool intra = false;
    if (!find_key(key, &index, &intra)) {
      return fail(error, key + ": not a model key (keys: " + key_names() + ", intra: {...})");
    }
    if (!it.value().is_number()) return fail(error, key + ": expected a number, got " + it.value().dump());
    if (!check_value(key, it.value().get<double>(), error) ||
        !set_key(model, key, it.value().get<double>(), seen, error)) {
      return false;
    }
  }
  return true;
}

constexpr size_t kMaxBands = 16;
constexpr uint64_t kMaxFrom = uint64_t{1} << 50;

unsigned given_mask(const std::set<std::string>& seen, bool intra) {
  unsigned mask = 0;
  for (size_t i = 0; i < std::size(kKeys); ++i) {
    if (seen.count(intra ? std::string(kIntraPrefix) + kKeys[i].name : std::string(kKeys[i].name))) mask |= 1u << i;
  }
  return mask;
}

// "bands": [{"from": BYTES, KEY: VALUE, ..., "intra": {...}}, ...], `from`
// ascending. A band starts from the set below it (the previous band, or
// the main set) and changes the keys it gives; its intra.X follows its own
// X where it gives X and not intra.X.
bool read_bands(const Json& list, LogGPModel* model, std::string* error) {
  if (!list.is_array()) return fail(error, "bands: expected an array of objects");
  if (list.size() > kMaxBands) return fail(error, "bands: more than " + std::to_string(kMaxBands));
  std::vector<LogGPBand> bands;
  for (size_t b = 0; b < list.size(); ++b) {
    const std::string name = "bands[" + std::to_string(b) + "]";
    const Json& obj = list[b];
    if (!obj.is_object()) return fail(error, name + ": expected an object with \"from\" and model keys");
    const uint64_t floor = bands.empty() ? 1 : bands.back().from + 1;
    if (!obj.contains("from") || !obj["from"].is_number_unsigned() || obj["from"].get<uint64_t>() < floor ||
        obj["from"].get<uint64_t>() > kMaxFrom) {
      return fail(error, name + ".from: expected a whole number of bytes in [" + std::to_string(floor) + ", 2^50]" +
                             (bands.empty() ? "" : ", above the band before"));
    }
    LogGPModel band_model;
    band_model.inter = bands.empty() ? model->inter : bands.back().inter;
    band_model.intra = bands.empty() ? model->intra : bands.back().intra;
    std::set<std::string> seen;
    if (!read_object(obj, "", &band_model, &seen, error, "from")) return fail(error, name + "." + *error);
    LogGPBand band;
    band.from = obj["from"].get<uint64_t>();
    band.given = given_mask(seen, false);
    band.intra_given = given_mask(seen, true);
    band.inter = band_model.inter;
    band.intra = band_model.intra;
    for (size_t i = 0; i < std::size(kKeys); ++i) {
      const bool follows = !kKeys[i].per_pair || ((band.given >> i & 1u) && !(band.intra_given >> i & 1u));
      if (follows) band.intra.*kKeys[i].field = band.inter.*kKeys[i].field;
    }
    bands.push_back(band);
  }
  model->bands = std::move(bands);
  return true;
}

}  // namespace

bool parse_model_json(const std::string& text, LogGPModel* model, std::string* error) {
  if (text.size() > (1u << 20)) return fail(error, "model: larger than 1 MiB");
  // The model nests two levels; refuse deeper text before the parser
  // spends memory on it.
  if (!json_nesting_ok(text, 4)) {
    return fail(error, "model: nests deeper than {\"bands\": [{\"intra\": {...}}]}");
  }
  Json doc;
  if (!parse_json_unique_keys(text, "model", &doc, error)) return false;
  if (!doc.is_object()) return fail(error, "model: expected a JSON object of keys (" + key_names() + ")");
  LogGPModel out = *model;
  std::set<std::string> seen;
  if (doc.contains("from")) return fail(error, "from: a key of a band (\"bands\": [{\"from\": ...}])");
  if (!read_object(doc, "", &out, &seen, error, "bands")) return false;
  follow_inter(&out);
  out.bands.clear();
  if (doc.contains("bands") && !read_bands(doc["bands"], &out, error)) return false;
  *model = out;
  return true;
}

bool load_model_file(const std::string& path, LogGPModel* model, std::string* error) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return fail(error, path + ": cannot open");
  std::string text;
  char buffer[4096];
  while (file.read(buffer, sizeof buffer) || file.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(file.gcount()));
    if (text.size() > (1u << 20)) return fail(error, path + ": larger than 1 MiB");
  }
  if (file.bad()) return fail(error, path + ": read error");
  if (!parse_model_json(text, model, error)) return fail(error, path + ": " + *error);
  return true;
}

std::string model_to_json(const LogGPModel& model) {
  Json doc = Json::object();
  Json intra = Json::object();
  for (size_t i = 0; i < std::size(kKeys); ++i) {
    doc[kKeys[i].name] = model.inter.*kKeys[i].field;
    if (model.intra_given & (1u << i)) intra[kKeys[i].name] = model.intra.*kKeys[i].field;
  }
  if (!intra.empty()) doc["intra"] = std::move(intra);
  for (const LogGPBand& band : model.bands) {
    Json b = Json::object();
    Json band_intra = Json::object();
    b["from"] = band.from;
    for (size_t i = 0; i < std::size(kKeys); ++i) {
      if (band.given >> i & 1u) b[kKeys[i].name] = band.inter.*kKeys[i].field;
      if (band.intra_given >> i & 1u) band_intra[kKeys[i].name] = band.intra.*kKeys[i].field;
    }
    if (!band_intra.empty()) b["intra"] = std::move(band_intra);
    doc["bands"].push_back(std::move(b));
  }
  return doc.dump(2) + "\n";
}

std::string model_keys_help() {
  const LogGPParams defaults;
  std::ostringstream out;
  for (const Key& k : kKeys) {
    out << "  " << std::left << std::setw(8) << k.name << "default " << std::setw(8) << defaults.*k.field
        << k.doc << "\n";
  }
  out << "  intra.X  for X in L, o, g, G, O, S: within a node (--images-per-node); default X\n";
  out << "  bands    model files only: [{\"from\": BYTES, KEY: VALUE, ...}, ...], the keys of messages,\n"
         "           REDUCEs and COPYs of at least `from` bytes (ascending; a band changes what it names)\n";
  return out.str();
}

}  // namespace carflow
