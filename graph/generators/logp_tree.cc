// Greedy LogP broadcast tree (see logp_tree.h).
#include "graph/generators/logp_tree.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace carflow {

LogpTree build_logp_tree(uint32_t P, uint64_t L, uint64_t o, uint64_t g) {
  LogpTree tree;
  tree.parent.assign(P, kLogpNoParent);
  tree.children.assign(P, {});
  tree.informed_at.assign(P, 0);
  const uint64_t gap = std::max(g, o), hop = L + 2 * o;
  // (time the node can start its next send, node); ties go to the lower vr.
  using Ready = std::pair<uint64_t, uint32_t>;
  std::priority_queue<Ready, std::vector<Ready>, std::greater<Ready>> ready;
  if (P > 0) ready.push({0, 0});
  for (uint32_t next = 1; next < P; ++next) {
    const auto [t, sender] = ready.top();
    ready.pop();
    tree.parent[next] = sender;
    tree.children[sender].push_back(next);
    tree.informed_at[next] = t + hop;
    tree.completion_time = std::max(tree.completion_time, t + hop);
    ready.push({t + gap, sender});
    ready.push({t + hop, next});
  }
  return tree;
}

}  // namespace carflow
