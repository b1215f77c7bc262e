#include "graph/json_strict.h"

#include <set>
#include <vector>

namespace carflow {

bool parse_json_unique_keys(const std::string& text, const char* what, nlohmann::json* out, std::string* error) {
  using Json = nlohmann::json;
  std::string duplicate;
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto note_keys = [&](int, Json::parse_event_t event, Json& parsed) {
    if (event == Json::parse_event_t::object_start) keys.emplace_back();
    if (event == Json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == Json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second &&
        duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json doc;
  try {
    doc = Json::parse(text, note_keys);
  } catch (const Json::exception& e) {
    std::string message = e.what();
    for (char& ch : message) {
      if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
    }
    *error = std::string(what) + ": not valid JSON: " + message;
    return false;
  }
  if (!duplicate.empty()) {
    *error = duplicate + ": given twice";
    return false;
  }
  *out = std::move(doc);
  return true;
}

}  // namespace carflow
