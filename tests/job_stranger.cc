// A stranger from another host: every attack of tests/strangers.h on a
// running job's store and on one node's liveness listener, then one line
// for the caller (multiproc_test runs it in a network namespace of its
// own): "stranger: N store and M liveness connection(s) attacked".
//
// Usage: job_stranger KVS_ADDRESS SECRET_HEX LIVENESS_ADDRESS [doctest options].
// The secret serves one exchange that passes, to be replayed.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "tests/strangers.h"

namespace {
std::string g_kvs, g_secret_hex, g_liveness;
}  // namespace

TEST_CASE("a stranger gets nothing from the store or a liveness listener, and each connection is closed") {
  std::string secret, error;
  REQUIRE_MESSAGE(carflow::job_auth::parse_secret(g_secret_hex, &secret, &error), error);
  const int store = strangers::attack_store(g_kvs, secret);
  const int liveness = strangers::attack_liveness(g_liveness);
  std::printf("stranger: %d store and %d liveness connection(s) attacked\n", store, liveness);
}

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  std::vector<std::string> targets;
  for (int i = 1; i < argc; ++i) {
    if (targets.size() < 3 && argv[i][0] != '-') targets.emplace_back(argv[i]);
    else rest.push_back(argv[i]);
  }
  if (targets.size() != 3) {
    std::fprintf(stderr, "usage: %s KVS_ADDRESS SECRET_HEX LIVENESS_ADDRESS [doctest options]\n", argv[0]);
    return 2;
  }
  g_kvs = targets[0];
  g_secret_hex = targets[1];
  g_liveness = targets[2];
  doctest::Context context(static_cast<int>(rest.size()), rest.data());
  return context.run();
}
