// Parsing of small JSON documents from outside (model files, tuning
// tables) where a key given twice is an error, not "the last one wins" as
// nlohmann has it.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace carflow {

// False with *error = "<what>: not valid JSON: ..." (printable text only)
// or "<key>: given twice". Bound the nesting first (json_nesting_ok).
bool parse_json_unique_keys(const std::string& text, const char* what, nlohmann::json* out, std::string* error);

}  // namespace carflow
