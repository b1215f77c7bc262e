// The doctest runner of the API tests: carflow is initialized once per process
// (cf_init may be called only once), errors are returned instead of aborting
// so that tests can check them, and cf_finalize runs after the last test.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <carflow/carflow.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (cf_init(&argc, &argv) != CF_OK) {
    std::fprintf(stderr, "cf_init failed: %s\n", cf_last_error());
    return 1;
  }
  cf_set_error_mode(CF_ERRORS_RETURN);
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  const int result = context.run();
  const int finalized = cf_finalize();
  if (finalized != CF_OK) {
    std::fprintf(stderr, "cf_finalize failed: %s\n", cf_last_error());
    return result != 0 ? result : 1;
  }
  return result;
}
