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

std::string g_cli;     // absolute path of carflow_cli
std::string g_plugin;  // absolute path of libbroken_plugin.so

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

TEST_CASE("check passes a built-in at every P of a range, and fails a broken DAG at the smallest P") {
  const Run ok = cli("check --coll allreduce --algo recursive_doubling --images 1:6 --bytes 16,160");
  INFO(ok.output);
  CHECK(ok.status == 0);
  for (int P = 1; P <= 6; ++P) CHECK(ok.output.find("P=" + std::to_string(P) + " ") != std::string::npos);
  CHECK(ok.output.find("non-commutative operator") != std::string::npos);
  CHECK(ok.output.find("FAIL") == std::string::npos);
  const Run roots = cli("check --coll broadcast --algo binomial --images 4 --roots all");
  INFO(roots.output);
  CHECK(roots.status == 0);
  CHECK(roots.output.find("P=4     PASS (24 DAGs)") != std::string::npos);  // 4 roots x 3 sizes x 2 segmentings
  const std::string dir = scratch("check");
  const Run broken = cli("check --plugin '" + g_plugin + "' --coll broadcast --algo off_by_one --images 1:8", dir);
  INFO(broken.output);
  CHECK(broken.status == 1);
  CHECK(broken.output.find("P=2     PASS") != std::string::npos);
  CHECK(broken.output.find("P=3     FAIL root 0, 8 bytes: image 2's destination differs from the reference at byte 0") !=
        std::string::npos);
  CHECK(broken.output.find("P=4") == std::string::npos);  // stops at the first failure
  CHECK(std::filesystem::exists(dir + "/carflow-check-failure.json"));
  CHECK(cli("dot " + dir + "/carflow-check-failure.json --plugin '" + g_plugin + "'").status == 0);
}

TEST_CASE("check runs an allreduce that claims rank order with a non-commutative operator: out of order fails at P = 2") {
  const std::string dir = scratch("check_order");
  const Run rotated = cli("check --plugin '" + g_plugin + "' --coll allreduce --algo rotated --images 1:5", dir);
  INFO(rotated.output);
  CHECK(rotated.status == 1);
  CHECK(rotated.output.find("non-commutative operator") != std::string::npos);
  CHECK(rotated.output.find("P=1     PASS") != std::string::npos);
  CHECK(rotated.output.find("P=2     FAIL root 0, 16 bytes: image 1's destination differs from the reference") !=
        std::string::npos);
  CHECK(rotated.output.find("P=3") == std::string::npos);
}

TEST_CASE("info --plugin lists the plug-in's algorithms with their summaries, marked [plug-in]") {
  const Run info = cli("info --plugin '" + g_plugin + "'");
  INFO(info.output);
  CHECK(info.status == 0);
  CHECK(info.output.find("  broadcast  off_by_one           a broken broadcast, for tests [plug-in]\n") !=
        std::string::npos);
  CHECK(info.output.find("  allreduce  rotated              an allreduce out of rank order that claims to keep it, "
                         "for tests [plug-in]\n") != std::string::npos);
  CHECK(info.output.find("binomial") != std::string::npos);  // the built-ins too, unmarked
}

TEST_CASE("view --plugin draws a DAG of a plug-in's algorithm; dot, view and info show --plugin in their usage") {
  const std::string dir = scratch("view_plugin");
  CHECK(cli("check --plugin '" + g_plugin + "' --coll broadcast --algo off_by_one --images 3", dir).status == 1);
  const Run view = cli("view carflow-check-failure.json -o page.html --plugin '" + g_plugin + "'", dir);
  INFO(view.output);
  CHECK(view.status == 0);
  const std::string page = dir + "/page.html";
  CHECK((std::filesystem::exists(page) && std::filesystem::file_size(page) > 0));
  const Run usage = cli("");
  for (const char* line : {"  dot   F.json [--plugin LIB.so]",
                           "  view  F.json [-o F.html] [--collapse-above 64] [--plugin LIB.so]",
                           "  info  [--plugin LIB.so]"}) {
    CHECK_MESSAGE(usage.output.find(line) != std::string::npos, line);
  }
}

TEST_CASE("an option a command does not take is an error naming it") {
  expect_error("bench --coll allreduce --images 2 --size 1M",
               "--size: not an option of carflow bench (its options: --coll, --images, --sizes, --iters, "
               "--algo, --sync, --calls, --aggregate, --rounds, --plugin, --ops, --seed, --json, --copy-floor, "
               "--fresh-src)");
  expect_error("info --bogus", "--bogus: not an option of carflow info (its options: --plugin)");
  expect_error("info --plugin /nonexistent/libx.so",
               "--plugin: /nonexistent/libx.so: /nonexistent/libx.so: cannot open shared object file: No such file or "
               "directory");
  expect_error("check --coll broadcast", "--algo: required (the algorithm to check; `carflow info` lists them)");
  expect_error("check --coll broadcast --algo binomial --images 5:3", "--images: LO:HI needs LO <= HI (got '5:3')");
  expect_error("check --coll broadcast --algo binomial --roots some",
               "--roots: expected 'all' or 'ends' (0, P/2 and P-1; the default)");
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
  if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-') {
    std::fprintf(stderr, "usage: %s CARFLOW_CLI BROKEN_PLUGIN [doctest options]\n", argv[0]);
    return 2;
  }
  g_cli = std::filesystem::absolute(argv[1]).string();
  g_plugin = std::filesystem::absolute(argv[2]).string();
  doctest::Context context;
  context.applyCommandLine(argc - 2, argv + 2);
  return context.run();
}
