// carflow dot: a graph file as Graphviz.
#include "tools/cli/cli.h"

namespace carflow::cli {

int cmd_dot(const Args& args) {
  auto file = args.find("_0");
  if (file == args.end()) return fail("dot: a graph file is required (carflow dot F.json)");
  carflow::GlobalDag dag;
  std::string error;
  if (!carflow::load_dag_file(file->second, &dag, &error)) return fail(error);  // names the file
  std::fputs(carflow::dag_to_dot(dag).c_str(), stdout);
  return 0;
}

}  // namespace carflow::cli
