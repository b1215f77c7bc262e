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
                 std::set<std::string>* seen, std::string* error) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const std::string key = prefix + it.key();
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

}  // namespace

bool parse_model_json(const std::string& text, LogGPModel* model, std::string* error) {
  if (text.size() > (1u << 20)) return fail(error, "model: larger than 1 MiB");
  // The model nests two levels; refuse deeper text before the parser
  // spends memory on it.
  if (!json_nesting_ok(text, 2)) return fail(error, "model: nests deeper than {\"intra\": {...}}");
  Json doc;
  if (!parse_json_unique_keys(text, "model", &doc, error)) return false;
  if (!doc.is_object()) return fail(error, "model: expected a JSON object of keys (" + key_names() + ")");
  LogGPModel out = *model;
  std::set<std::string> seen;
  if (!read_object(doc, "", &out, &seen, error)) return false;
  follow_inter(&out);
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
  return out.str();
}

}  // namespace carflow
