#include "engine/tuning.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "graph/json.h"
#include "graph/json_strict.h"

namespace carflow {
namespace {

using Json = nlohmann::json;
constexpr const char* kSchema = "carflow.tuning/1";
constexpr uint64_t kMaxFileBytes = 1u << 20;

bool fail(std::string* error, std::string message) {
  *error = std::move(message);
  return false;
}

bool read_count(const Json& doc, const char* key, uint64_t min, uint64_t max, uint32_t* out, std::string* error) {
  auto it = doc.find(key);
  if (it == doc.end()) return fail(error, std::string(key) + ": missing");
  if (!it->is_number_unsigned() || it->get<uint64_t>() < min || it->get<uint64_t>() > max) {
    return fail(error, std::string(key) + ": expected an integer in [" + std::to_string(min) + ", " +
                           std::to_string(max) + "], got " + it->dump());
  }
  *out = static_cast<uint32_t>(it->get<uint64_t>());
  return true;
}

bool read_range(const Json& item, CollKind kind, const std::string& where, uint64_t previous, bool first,
                TuningRange* out, std::string* error) {
  if (!item.is_object()) return fail(error, where + ": expected an object {\"from_bytes\", \"algorithm\"}");
  for (auto it = item.begin(); it != item.end(); ++it) {
    if (it.key() != "from_bytes" && it.key() != "algorithm" && it.key() != "time_ns") {
      return fail(error, where + "." + it.key() + ": not a field (fields: from_bytes, algorithm, time_ns)");
    }
  }
  auto from = item.find("from_bytes");
  if (from == item.end() || !from->is_number_unsigned()) {
    return fail(error, where + ".from_bytes: expected an integer >= 0");
  }
  out->from_bytes = from->get<uint64_t>();
  if (first && out->from_bytes != 0) return fail(error, where + ".from_bytes: the first range must start at 0");
  if (!first && out->from_bytes <= previous) {
    return fail(error, where + ".from_bytes: " + std::to_string(out->from_bytes) +
                           " does not follow the previous range's " + std::to_string(previous));
  }
  auto algo = item.find("algorithm");
  if (algo == item.end() || !algo->is_string()) return fail(error, where + ".algorithm: expected a name");
  out->gen = GeneratorRegistry::instance().find(kind, algo->get<std::string>());
  if (out->gen == nullptr) {
    return fail(error, where + ".algorithm: '" + algo->get<std::string>() + "' is not a " + coll_kind_name(kind) +
                           " algorithm (registered: " + GeneratorRegistry::instance().names(kind) + ")");
  }
  out->time_ns = -1;
  if (auto t = item.find("time_ns"); t != item.end()) {
    if (!t->is_number() || !std::isfinite(t->get<double>()) || t->get<double>() < 0) {
      return fail(error, where + ".time_ns: expected a number >= 0");
    }
    out->time_ns = t->get<double>();
  }
  return true;
}

bool read_kinds(const Json& kinds, TuningTable* out, std::string* error) {
  if (!kinds.is_object()) return fail(error, "kinds: expected an object of collective kinds");
  for (auto it = kinds.begin(); it != kinds.end(); ++it) {
    CollKind kind;
    const std::string where = "kinds." + it.key();
    if (!parse_coll_kind(it.key(), &kind)) return fail(error, where + ": not a collective kind");
    if (!it.value().is_array() || it.value().empty()) return fail(error, where + ": expected a non-empty array of ranges");
    std::vector<TuningRange>& ranges = out->kinds[static_cast<int>(kind)];
    for (size_t i = 0; i < it.value().size(); ++i) {
      TuningRange r;
      const uint64_t previous = ranges.empty() ? 0 : ranges.back().from_bytes;
      if (!read_range(it.value()[i], kind, where + "[" + std::to_string(i) + "]", previous, i == 0, &r, error)) {
        return false;
      }
      ranges.push_back(r);
    }
  }
  return true;
}

}  // namespace

const GeneratorInfo* TuningTable::find(CollKind kind, uint32_t P, uint32_t ppn, uint64_t nbytes) const {
  if (P != images || (images_per_node != 0 && ppn != images_per_node)) return nullptr;
  const std::vector<TuningRange>& ranges = kinds[static_cast<int>(kind)];
  const GeneratorInfo* gen = nullptr;
  for (const TuningRange& r : ranges) {  // a few ranges: a scan beats a search
    if (r.from_bytes > nbytes) break;
    gen = r.gen;
  }
  return gen;
}

bool parse_tuning_json(const std::string& text, TuningTable* out, std::string* error) {
  if (text.size() > kMaxFileBytes) return fail(error, "tuning: larger than 1 MiB");
  // kinds -> array -> range object (the model object nests one level more).
  if (!json_nesting_ok(text, 4)) return fail(error, "tuning: nests deeper than a tuning table does");
  Json doc;
  if (!parse_json_unique_keys(text, "tuning", &doc, error)) return false;
  if (!doc.is_object()) return fail(error, "tuning: expected a JSON object");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    static const std::set<std::string> kFields = {"schema", "images", "images_per_node", "kinds", "model"};
    if (!kFields.count(it.key())) {
      return fail(error, it.key() + ": not a field (fields: schema, images, images_per_node, kinds, model)");
    }
  }
  auto schema = doc.find("schema");
  if (schema == doc.end() || !schema->is_string() || schema->get<std::string>() != kSchema) {
    return fail(error, std::string("schema: expected \"") + kSchema + "\"");
  }
  TuningTable table;
  if (!read_count(doc, "images", 1, UINT32_MAX, &table.images, error)) return false;
  if (doc.contains("images_per_node") &&
      !read_count(doc, "images_per_node", 0, UINT32_MAX, &table.images_per_node, error)) {
    return false;
  }
  auto kinds = doc.find("kinds");
  if (kinds == doc.end()) return fail(error, "kinds: missing");
  if (!read_kinds(*kinds, &table, error)) return false;
  if (auto model = doc.find("model"); model != doc.end()) {
    if (!model->is_object()) return fail(error, "model: expected an object (the model tuned for)");
    table.model_json = model->dump();
  }
  *out = std::move(table);
  return true;
}

bool load_tuning_file(const std::string& path, TuningTable* out, std::string* error) {
  std::string text;
  if (!read_bounded_file(path, kMaxFileBytes, &text, error)) return false;
  if (!parse_tuning_json(text, out, error)) return fail(error, path + ": " + *error);
  return true;
}

std::string tuning_to_json(const TuningTable& table) {
  Json doc = Json::object();
  doc["schema"] = kSchema;
  doc["images"] = table.images;
  doc["images_per_node"] = table.images_per_node;
  Json kinds = Json::object();
  for (int k = 0; k < kCollKinds; ++k) {
    if (table.kinds[k].empty()) continue;
    Json ranges = Json::array();
    for (const TuningRange& r : table.kinds[k]) {
      Json range = {{"from_bytes", r.from_bytes}, {"algorithm", r.gen->name}};
      if (r.time_ns >= 0) range["time_ns"] = std::round(r.time_ns * 10) / 10;
      ranges.push_back(std::move(range));
    }
    kinds[coll_kind_name(static_cast<CollKind>(k))] = std::move(ranges);
  }
  doc["kinds"] = std::move(kinds);
  if (!table.model_json.empty()) doc["model"] = Json::parse(table.model_json);
  return doc.dump(2) + "\n";
}

}  // namespace carflow
