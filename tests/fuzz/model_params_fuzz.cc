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

bool same_params(const LogGPParams& a, const LogGPParams& b) {
  for (const Field& f : kFields) {
    if (a.*f.value != b.*f.value) return false;
  }
  return true;
}

bool same(const LogGPModel& a, const LogGPModel& b, bool with_bands = true) {
  if (!same_params(a.inter, b.inter) || !same_params(a.intra, b.intra)) return false;
  if (with_bands) {
    if (a.bands.size() != b.bands.size()) return false;
    for (size_t i = 0; i < a.bands.size(); ++i) {
      const carflow::LogGPBand &x = a.bands[i], &y = b.bands[i];
      if (x.from != y.from || !same_params(x.inter, y.inter) || !same_params(x.intra, y.intra)) return false;
    }
  }
  return a.images_per_node == b.images_per_node && a.intra_given == b.intra_given;
}

void check_set(const LogGPParams& p) {
  for (const Field& f : kFields) {
    const double v = p.*f.value;
    check(std::isfinite(v) && v >= 0 && v <= 1e12, "an accepted value is in [0, 1e12]");
  }
}

void check_values(const LogGPModel& m) {
  check_set(m.inter);
  check_set(m.intra);
  for (size_t i = 0; i < m.bands.size(); ++i) {
    check_set(m.bands[i].inter);
    check_set(m.bands[i].intra);
    check(m.bands[i].from >= 1 && (i == 0 || m.bands[i].from > m.bands[i - 1].from), "bands ascend");
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
  // The hand-written forms carry no bands; the library's writer carries everything.
  check(same(from_text, model, false) && same(from_json, model, false), "a model written back parses to itself");
  LogGPModel from_writer;
  const std::string written = carflow::model_to_json(model);
  if (!carflow::parse_model_json(written, &from_writer, &error)) carflow_fuzz::defect("model_to_json: " + written + ": " + error);
  check(same(from_writer, model), "model_to_json parses to the same model");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  check_parser(carflow::parse_model_string, input);
  check_parser(carflow::parse_model_json, input);
  return 0;
}
