// What graph/json's source files share and nothing else needs: the schema
// name, error reporting, the text checks both the loader and the DOT output
// apply to names taken from a DAG, and the algorithm rule both saving and
// loading enforce. Not public.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <utility>

#include "graph/car.h"

// A namespace of its own: names such as fail here and ImageContext in
// json_reader.h exist elsewhere in carflow.
namespace carflow::json_internal {

inline constexpr const char* kSchema = "carflow.graph/1";

inline bool fail(std::string* error, std::string message) {
  if (error != nullptr) *error = std::move(message);
  return false;
}

inline std::string errno_text() { return std::strerror(errno); }

// The length of the well-formed UTF-8 sequence at text[i], or 0 when the
// bytes there are not one (overlong forms and surrogates included).
size_t utf8_sequence(const std::string& text, size_t i);

// The code point of the control character (Unicode category Cc: U+0000 to
// U+001F, U+007F to U+009F) whose encoding starts at text[i], or -1.
// Inline: read_string's message then sees that the code point fits its
// buffer.
inline int control_at(const std::string& text, size_t i) {
  const unsigned c = static_cast<unsigned char>(text[i]);
  if (c < 0x20 || c == 0x7f) return static_cast<int>(c);
  if (c == 0xc2 && i + 1 < text.size()) {
    const unsigned next = static_cast<unsigned char>(text[i + 1]);
    if (next >= 0x80 && next <= 0x9f) return static_cast<int>(next);
  }
  return -1;
}

// Text safe to print in an error message: control characters and bytes
// that are not UTF-8 become '?'.
std::string visible(const std::string& text);

// The rule an algorithm name must meet, or "" when it does: a generator
// registered for the kind, or the name of a DAG built by hand.
std::string algorithm_problem(const CollectiveSpec& spec);

}  // namespace carflow::json_internal
