// CF_BIND_IMAGES: cf_run_images gives each image thread its own share of
// the process's CPUs when the images are no more than those CPUs (auto, the
// default), and leaves them unbound with more images or with `none` (the
// _none variant). The calling thread's own affinity never changes.
#include <doctest/doctest.h>
#include <sched.h>

#include <carflow/carflow.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

cpu_set_t affinity() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(sched_getaffinity(0, sizeof set, &set) == 0);
  return set;
}

// Each image's CPU set as its thread sees it.
std::vector<cpu_set_t> run_and_record(cf_image_t n) {
  std::vector<cpu_set_t> seen(n);
  const int rc = cf_run_images(
      n, nullptr, 0,
      [](cf_image_t me, void* arg) {
        auto& sets = *static_cast<std::vector<cpu_set_t>*>(arg);
        CPU_ZERO(&sets[me]);
        sched_getaffinity(0, sizeof sets[me], &sets[me]);
      },
      &seen);
  CHECK(rc == CF_OK);
  return seen;
}

bool bound_by_default() {
  const char* v = std::getenv("CF_BIND_IMAGES");
  return v == nullptr || std::strcmp(v, "auto") == 0;
}

}  // namespace

TEST_CASE("image threads get disjoint CPU shares covering the process's CPUs when they fit, else stay unbound") {
  const cpu_set_t mine = affinity();
  const int cpus = CPU_COUNT(&mine);
  CAPTURE(cpus);
  if (cpus >= 2) {
    const std::vector<cpu_set_t> seen = run_and_record(2);
    cpu_set_t both;
    CPU_OR(&both, &seen[0], &seen[1]);
    CHECK(CPU_EQUAL(&both, &mine));  // nothing outside the process's CPUs, none left out
    if (bound_by_default()) {
      cpu_set_t common;
      CPU_AND(&common, &seen[0], &seen[1]);
      CHECK(CPU_COUNT(&common) == 0);
      CHECK(CPU_COUNT(&seen[0]) == cpus / 2);
      CHECK(CPU_COUNT(&seen[1]) == cpus - cpus / 2);
    } else {
      CHECK(CPU_EQUAL(&seen[0], &mine));
      CHECK(CPU_EQUAL(&seen[1], &mine));
    }
  } else {
    MESSAGE("one CPU: only the unbound case applies");
  }
  // More images than CPUs: every image may run anywhere, bound or not.
  const std::vector<cpu_set_t> many = run_and_record(static_cast<cf_image_t>(cpus + 1));
  for (const cpu_set_t& s : many) CHECK(CPU_EQUAL(&s, &mine));
  const cpu_set_t after = affinity();
  CHECK(CPU_EQUAL(&after, &mine));
}
