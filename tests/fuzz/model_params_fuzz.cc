// The LogGP model's parsers (graph/model/loggp.h): --model strings and
// --model-file JSON, both on every input. A refused text names why and
// leaves the model as it was; an accepted one gives values in [0, 1e12],
// and the model written back as a string, or as JSON, parses to itself.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "graph/model/loggp.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using carflow::LogGPModel;
using carflow::LogGPParams;
using carflow_fuzz::check;

struct Field {
  const char* name;
  double LogGPParams::*value;
  bool per_pair;
};
constexpr Field kFields[] = {{"L", &LogGPParams::L, true},         {"o", &LogGPParams::o, true},
                             {"g", &LogGPParams::g, true},         {"G", &LogGPParams::G, true},
                             {"O", &LogGPParams::O, true},         {"S", &LogGPParams::S, true},
                             {"gamma", &LogGPParams::gamma, false}, {"beta", &LogGPParams::beta, false}};

std::string number(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.17g", v);
  return text;
}

bool same(const LogGPModel& a, const LogGPModel& b) {
  for (const Field& f : kFields) {
    if (a.inter.*f.value != b.inter.*f.value || a.intra.*f.value != b.intra.*f.value) return false;
  }
  return a.images_per_node == b.images_per_node && a.intra_given == b.intra_given;
}

void check_values(const LogGPModel& m) {
  for (const Field& f : kFields) {
    for (double v : {m.inter.*f.value, m.intra.*f.value}) {
      check(std::isfinite(v) && v >= 0 && v <= 1e12, "an accepted value is in [0, 1e12]");
    }
  }
}

// Every inter key, and the intra keys given, as "K=V,..." and as JSON.
void write_back(const LogGPModel& m, std::string* text, std::string* json) {
  std::string intra_json;
  for (size_t i = 0; i < std::size(kFields); ++i) {
    const Field& f = kFields[i];
    *text += (text->empty() ? "" : ",") + std::string(f.name) + "=" + number(m.inter.*f.value);
    *json += (json->empty() ? "{" : ", ") + std::string("\"") + f.name + "\": " + number(m.inter.*f.value);
    if (m.intra_given & (1u << i)) {
      *text += ",intra." + std::string(f.name) + "=" + number(m.intra.*f.value);
      intra_json += (intra_json.empty() ? "" : ", ") + std::string("\"") + f.name + "\": " + number(m.intra.*f.value);
    }
  }
  *json += ", \"intra\": {" + intra_json + "}}";
}

void check_parser(bool (*parse)(const std::string&, LogGPModel*, std::string*), const std::string& input) {
  LogGPModel model;
  const LogGPModel before = model;
  std::string error;
  if (!parse(input, &model, &error)) {
    check(!error.empty(), "a refused model says why");
    check(same(model, before), "a refused model leaves the model as it was");
    return;
  }
  check_values(model);
  std::string text, json;
  write_back(model, &text, &json);
  LogGPModel from_text, from_json;
  if (!carflow::parse_model_string(text, &from_text, &error)) carflow_fuzz::defect("written back: " + text + ": " + error);
  if (!carflow::parse_model_json(json, &from_json, &error)) carflow_fuzz::defect("written back: " + json + ": " + error);
  check(same(from_text, model) && same(from_json, model), "a model written back parses to itself");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_parser(carflow::parse_model_string, input);
  check_parser(carflow::parse_model_json, input);
  return 0;
}
