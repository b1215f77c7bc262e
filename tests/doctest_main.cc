// The doctest runner shared by the test binaries; each test file holds only
// TEST_CASEs, so any of them can be linked alone or together.
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
