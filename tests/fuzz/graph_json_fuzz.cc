// Graph JSON as the loader meets it (graph/json.h): any bytes are refused
// with an error or loaded, and a loaded DAG saves and loads back equal,
// saving that again gives the same text, and it draws.
#include <cstddef>
#include <cstdint>
#include <string>

#include "graph/json.h"
#include "tests/fuzz/fuzz_check.h"

using carflow_fuzz::check;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  carflow::GlobalDag dag;
  std::string error;
  if (!carflow::dag_from_json(text, &dag, &error)) {
    check(!error.empty(), "a refused document has an error");
    check(dag == carflow::GlobalDag{}, "a refused document leaves the output untouched");
    return 0;
  }
  const std::string saved = carflow::dag_to_json(dag);
  carflow::GlobalDag again;
  if (!carflow::dag_from_json(saved, &again, &error)) carflow_fuzz::defect("a loaded DAG saved does not load: " + error);
  check(again == dag, "save then load gives an equal DAG");
  check(carflow::dag_to_json(again) == saved, "saving the loaded DAG again gives the same text");
  check(!carflow::dag_to_dot(dag).empty(), "a loaded DAG draws");
  return 0;
}
