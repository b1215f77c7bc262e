// The command line (tools/cli/) as a user meets it: options each
// command takes, errors that name the option and the rule, and relative
// paths resolved in the caller's directory. Each run is bounded by
// timeout(1).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace {

std::string g_cli;  // absolute path of carflow_cli

struct Run {
  int status = -1;
  std::string output;  // stdout and stderr
};

Run cli(const std::string& args, const std::string& dir = "") {
  const std::string cd = dir.empty() ? "" : "cd '" + dir + "' && ";
  const std::string command = cd + "timeout 120 '" + g_cli + "' " + args + " 2>&1";
  Run r;
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) r.output.append(buf, n);
  const int raw = ::pclose(pipe);
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  return r;
}

// A fresh directory under the test's temporary directory.
std::string scratch(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::filesystem::path dir = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

void expect_error(const std::string& args, const std::string& message) {
  INFO(args);
  const Run r = cli(args);
  CHECK(r.status == 2);
  CHECK(r.output == "carflow: " + message + "\n");
}

}  // namespace

TEST_CASE("an option a command does not take is an error naming it") {
  expect_error("bench --coll allreduce --images 2 --size 1M",
               "--size: not an option of carflow bench (its options: --coll, --images, --sizes, --iters, "
               "--algo, --sync, --calls, --aggregate, --rounds, --json)");
  expect_error("info --bogus", "--bogus: not an option of carflow info (it takes none)");
  expect_error("plan --coll scan --images 5 stray --out s.json",
               "'stray': unexpected argument (carflow plan takes only --options)");
  expect_error("dot a.json b.json", "'b.json': unexpected argument (carflow dot takes one file)");
  expect_error("bench --coll broadcast --images 2 --images 3", "--images: given twice");
  expect_error("bench --coll broadcast --iters", "--iters: missing value");
  const Run unknown = cli("frobnicate");
  CHECK(unknown.status == 2);
  CHECK(unknown.output.rfind("carflow: unknown command 'frobnicate'\nusage: carflow <command>", 0) == 0);
}

TEST_CASE("numbers out of range name the option and the range, and nothing runs") {
  expect_error("bench --coll broadcast --images 0", "--images: '0' is not a number in [1, 1024]");
  expect_error("demo --images 0", "--images: '0' is not a number in [1, 1024]");
  expect_error("compare --coll allreduce --images 2 --sizes 8 --rounds 0",
               "--rounds: '0' is not a number in [1, 1000]");
  expect_error("plan --coll reduce --images 4 --bytes 64 --elem-size 0 --out r.json",
               "--elem-size: '0' is not a number in [1, 4096]");
  expect_error("bench --coll broadcast --images 1:4", "--images: '1:4' is not a number in [1, 1024]");
}

TEST_CASE("an unknown algorithm or a misplaced layout names its option") {
  expect_error("bench --coll allreduce --images 2 --algo ring2",
               "--algo: allreduce has no algorithm 'ring2' (its algorithms: direct, rabenseifner, "
               "recursive_doubling, reduce_bcast, ring, hierarchical)");
  expect_error("plan --coll reduce --images 4 --bytes 64 --elem-size 8 --dst-blksz 0 --dst-offset 2 --out r.json",
               "--dst-blksz, --dst-offset: only prefix_reduce takes a destination layout");
  expect_error("compare --coll bogus", "--coll: expected one of broadcast, barrier, allreduce, scatter, gather, "
                                       "gather_all, exchange, permute, reduce_vec, scan, reduce_scatter, reduce, "
                                       "prefix_reduce");
}

TEST_CASE("plan refuses a DAG too big to save while it builds it, names --images, and writes nothing") {
  // Pairwise exchange on 1024 images: over 600 MB of JSON. It used to be
  // built whole (4.5 GB, half a minute) and refused only when saved.
  const std::string dir = scratch("too_big");
  const Run r = cli("plan --coll exchange --algo pairwise --images 1024 --out x.json", dir);
  INFO(r.output);
  CHECK(r.status == 2);
  CHECK(r.output.rfind("carflow: --images: the DAG's JSON passes the loader's limit of 512 MiB with the first ", 0) ==
        0);
  CHECK(r.output.find(" of its 1024 images (") != std::string::npos);
  CHECK(!std::filesystem::exists(dir + "/x.json"));
  CHECK(!std::filesystem::exists(dir + "/x.json.tmp"));
}

TEST_CASE("flags take no value: --exclusive before --out") {
  const std::string dir = scratch("exclusive");
  const Run r = cli("plan --coll scan --images 5 --bytes 64 --exclusive --out s.json", dir);
  CHECK(r.status == 0);
  CHECK(r.output.find("scan on 5 images, 64 bytes") != std::string::npos);
  CHECK(std::filesystem::exists(dir + "/s.json"));
}

TEST_CASE("relative paths are the caller's: plan writes and dot reads in its directory") {
  const std::string dir = scratch("relative");
  const Run plan = cli("plan --coll allreduce --images 3 --bytes 16 --out g.json", dir);
  REQUIRE(plan.status == 0);
  REQUIRE(std::filesystem::exists(dir + "/g.json"));
  const Run dot = cli("dot g.json", dir);
  CHECK(dot.status == 0);
  CHECK(dot.output.rfind("digraph", 0) == 0);
  const Run missing = cli("dot nothing.json", dir);
  CHECK(missing.status == 2);
  const size_t named = missing.output.find("nothing.json");
  CHECK(named != std::string::npos);
  CHECK(missing.output.find("nothing.json", named + 1) == std::string::npos);  // named once
}

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') {
    std::fprintf(stderr, "usage: %s CARFLOW_CLI [doctest options]\n", argv[0]);
    return 2;
  }
  g_cli = argv[1];
  if (g_cli[0] != '/') g_cli = std::filesystem::absolute(g_cli).string();
  doctest::Context context;
  context.applyCommandLine(argc - 1, argv + 1);
  return context.run();
}
