// Refused calls between processes: runs tests/mp_refused (every class of
// argument error made on every image, each followed by one verified
// collective of every kind, then cf_finalize) under the real launcher, in
// every progress mode, with the program linked against the static library
// and against libcarflow.so. Every run has cfrun's --timeout.
//
// Usage (tests/BUILD passes them): refused_test CFRUN MP_REFUSED_STATIC MP_REFUSED_SHARED
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "tests/shell_run.h"

#include <sys/wait.h>

#include <cstdio>
#include <regex>
#include <string>

namespace {

std::string g_cfrun, g_static, g_shared;

// Every node prints its summary with every class run, checks made, and no
// failure (cf_finalize's status included).
void expect_clean(const Run& r, int nodes, int images) {
  INFO(r.output);
  CHECK(r.status == 0);
  static const std::regex line(R"(refused: node (\d+): (\d+) classes, (\d+) checks, (\d+) failures)");
  int seen = 0;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), line), end; it != end; ++it, ++seen) {
    const std::smatch& m = *it;
    CHECK(m[4].str() == "0");
    const int classes = std::stoi(m[2].str());
    CHECK(classes >= 30);
    // One kind-by-kind round (13 checks) before the refusals and after each
    // (a refusal is one check, its aggregate class one more), per image.
    CHECK(std::stoi(m[3].str()) == images * (13 * (classes + 1) + classes + 1));
  }
  CHECK(seen == nodes);
}

}  // namespace

TEST_CASE("every refused call leaves the next collectives of every kind correct across processes") {
  for (const std::string* program : {&g_shared, &g_static}) {
    for (const std::string progress : {"poll", "thread", "block"}) {
      for (const auto& shape : {std::pair{2, 1}, std::pair{3, 2}}) {
        const int nodes = shape.first, images = shape.second;
        CAPTURE(*program);
        CAPTURE(progress);
        CAPTURE(nodes);
        CAPTURE(images);
        const Run r = capture(std::string("CF_PROGRESS=") + progress + " " + g_cfrun + " --timeout 120 -n " +
                          std::to_string(nodes) + " --images " + std::to_string(images) + " " + *program);
        expect_clean(r, nodes, images);
      }
    }
  }
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: refused_test CFRUN MP_REFUSED_STATIC MP_REFUSED_SHARED\n");
    return 2;
  }
  g_cfrun = argv[1];
  g_static = argv[2];
  g_shared = argv[3];
  doctest::Context context;
  context.applyCommandLine(argc - 3, argv + 3);
  return context.run();
}
