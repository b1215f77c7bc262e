// tools/cfrun and transports/bootstrap: the launcher run as a program over
// tests/cfrun_child (its modes are listed there), and the Bootstrap client
// against a scripted fake launcher in this process (white box: the order in
// which replies and LOST notices arrive is chosen by the test).
//
// Usage: cfrun_test CFRUN_BIN CFRUN_CHILD [doctest options]
// (tests/BUILD passes both paths with $(rootpath ...)). Every cfrun run has
// its own --timeout and the runner kills it after kRunLimitMs, so nothing
// can hang.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

extern char** environ;

namespace {

using carflow::Bootstrap;
using Clock = std::chrono::steady_clock;

constexpr int kRunLimitMs = 60000;

struct BinaryPaths {
  std::string cfrun, child;
};
BinaryPaths& binaries() {
  static BinaryPaths paths;  // set once by main from argv
  return paths;
}

size_t count_of(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

// ------------------------------------------------------------ running cfrun

struct RunResult {
  int status = -1;  // exit status, 128+S when killed by signal S
  std::string out, err;
};

// cfrun started with its stdout and stderr captured.
class CfrunProcess {
 public:
  CfrunProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {binaries().cfrun};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envs(env);
    for (char** e = environ; *e != nullptr; ++e) envs.emplace_back(*e);
    std::vector<char*> argv_ptrs, env_ptrs;  // built before fork: the test has threads
    for (std::string& a : argv) argv_ptrs.push_back(a.data());
    for (std::string& e : envs) env_ptrs.push_back(e.data());
    argv_ptrs.push_back(nullptr);
    env_ptrs.push_back(nullptr);
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::execve(argv_ptrs[0], argv_ptrs.data(), env_ptrs.data());
      ::_exit(126);
    }
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
  }
  ~CfrunProcess() {
    if (pid_ > 0) finish(0);
  }

  // Reads until stdout holds `text`; false if cfrun ended or time ran out.
  bool wait_for_stdout(const std::string& text, int timeout_ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (result_.out.find(text) == std::string::npos) {
      if (Clock::now() >= deadline || !pump(deadline)) return false;
    }
    return true;
  }

  void signal(int sig) { ::kill(pid_, sig); }

  // Reads to the end and reaps cfrun; past the limit it is terminated.
  RunResult finish(int limit_ms = kRunLimitMs) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(limit_ms);
    while (Clock::now() < deadline && pump(deadline)) {
    }
    if (out_fd_ >= 0 || err_fd_ >= 0) {
      ::kill(pid_, SIGTERM);  // it forwards to its processes
      const auto grace = Clock::now() + std::chrono::seconds(5);
      while (pump(grace)) {
      }
      ::kill(pid_, SIGKILL);
      result_.err += "\n(cfrun_test: cfrun did not finish in time)";
    }
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    result_.status = WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
    return result_;
  }

 private:
  // One poll round; false once both pipes are closed or the deadline passed.
  bool pump(Clock::time_point deadline) {
    pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
    if (out_fd_ < 0 && err_fd_ < 0) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) return true;
    read_into(fds[0], &out_fd_, &result_.out);
    read_into(fds[1], &err_fd_, &result_.err);
    return true;
  }
  static void read_into(const pollfd& p, int* fd, std::string* text) {
    if (p.fd < 0 || p.revents == 0) return;
    char chunk[4096];
    const ssize_t n = ::read(*fd, chunk, sizeof chunk);
    if (n > 0) {
      text->append(chunk, static_cast<size_t>(n));
    } else {
      ::close(*fd);
      *fd = -1;
    }
  }

  pid_t pid_ = -1;
  int out_fd_ = -1, err_fd_ = -1;
  RunResult result_;
};

RunResult run_cfrun(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
  return CfrunProcess(args, env).finish();
}

// The child program with a mode, after cfrun's options.
std::vector<std::string> with_child(std::vector<std::string> options, const std::string& mode) {
  options.push_back(binaries().child);
  options.push_back(mode);
  return options;
}

std::string describe(const RunResult& r) {
  return "status " + std::to_string(r.status) + "\n--- stdout\n" + r.out + "--- stderr\n" + r.err;
}

// ------------------------------------------------------------ fake launcher

// One accepted connection of the fake launcher, read and written line by line.
class FakeConnection {
 public:
  explicit FakeConnection(int fd) : fd_(fd) {}
  ~FakeConnection() { close(); }
  // The next line without '\n'; "" on timeout or end of stream.
  std::string read_line(int timeout_ms = 5000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
    size_t end;
    while ((end = in_.find('\n')) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      pollfd p{fd_, POLLIN, 0};
      if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) return "";
      char chunk[1024];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      in_.append(chunk, static_cast<size_t>(n));
    }
    std::string line = in_.substr(0, end);
    in_.erase(0, end + 1);
    return line;
  }
  void write_line(const std::string& line) {
    const std::string text = line + "\n";
    REQUIRE(::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size()));
  }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
  std::string in_;
};

// The second field of a request line: its id.
std::string id_of(const std::string& line) {
  const size_t a = line.find(' ');
  if (a == std::string::npos) return "";
  const size_t b = line.find(' ', a + 1);
  return line.substr(a + 1, b == std::string::npos ? std::string::npos : b - a - 1);
}

class FakeLauncher {
 public:
  FakeLauncher() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(fd_, 8) == 0);
    REQUIRE(::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
    address_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  ~FakeLauncher() { ::close(fd_); }
  const std::string& address() const { return address_; }
  static std::string secret() { return std::string(carflow::job_auth::kSecretBytes, '\x42'); }

  // Connects a Bootstrap as `rank` of `nodes`, takes its proof of the
  // secret and answers its HELLO.
  std::unique_ptr<Bootstrap> connect(uint32_t rank, uint32_t nodes,
                                     std::unique_ptr<FakeConnection>* conn) {
    namespace auth = carflow::job_auth;
    std::string error;
    auto pending = std::async(std::launch::async, [&] {
      return Bootstrap::connect(address_, rank, nodes, 0, secret(), &error);
    });
    pollfd p{fd_, POLLIN, 0};
    REQUIRE(::poll(&p, 1, 5000) == 1);
    *conn = std::make_unique<FakeConnection>(::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC));
    const std::string auth_line = (*conn)->read_line();
    std::string client_nonce, client_proof;
    REQUIRE(auth_line.rfind("AUTH ", 0) == 0);
    REQUIRE(carflow::hex_decode(auth_line.substr(5), &client_nonce));
    const std::string store_nonce(auth::kNonceBytes, 's');
    (*conn)->write_line("AUTH " + carflow::hex_encode(store_nonce) + " " +
                        carflow::hex_encode(auth::proof(secret(), auth::kStoreRole, "", client_nonce, store_nonce)));
    const std::string proof_line = (*conn)->read_line();
    REQUIRE(proof_line.rfind("PROOF ", 0) == 0);
    REQUIRE(carflow::hex_decode(proof_line.substr(6), &client_proof));
    CHECK(auth::verify(client_proof, secret(), auth::kClientRole, "", client_nonce, store_nonce));
    (*conn)->write_line("OK 0");
    const std::string hello = (*conn)->read_line();
    CHECK(hello == "HELLO " + id_of(hello) + " " + std::to_string(rank) + " " + std::to_string(nodes));
    (*conn)->write_line("OK " + id_of(hello));
    std::unique_ptr<Bootstrap> b = pending.get();
    REQUIRE_MESSAGE(b != nullptr, error);
    return b;
  }

 private:
  int fd_ = -1;
  std::string address_;
};

// on_lost calls, collected for a test to wait on.
struct LostLog {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<uint32_t, std::string>> seen;

  Bootstrap::LostCallback callback() {
    return [this](uint32_t rank, const std::string& how) {
      std::lock_guard<std::mutex> lock(mu);
      seen.emplace_back(rank, how);
      cv.notify_all();
    };
  }
  bool wait_for(size_t count, int timeout_ms = 5000) {
    std::unique_lock<std::mutex> lock(mu);
    return cv.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                       [&] { return seen.size() >= count; });
  }
};

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    if (old != nullptr) old_ = old;
    had_ = old != nullptr;
    if (value != nullptr) ::setenv(name, value, 1);
    else ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_, old_.c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

// ============================================================ cfrun

TEST_CASE("every rank reads every other rank's value after a fence") {
  for (const char* n : {"1", "2", "5"}) {
    const RunResult r = run_cfrun(with_child({"-n", n, "--timeout", "30"}, "kv"));
    INFO("-n ", n, "\n", describe(r));
    CHECK(r.status == 0);
    for (int rank = 0; rank < std::atoi(n); ++rank) {
      CHECK(count_of(r.out, "[" + std::to_string(rank) + "] OK\n") == 1);
    }
    CHECK(r.err.find("cfrun:") == std::string::npos);
  }
}

TEST_CASE("forwarded output carries the rank prefix and a partial last line is flushed") {
  const RunResult r = run_cfrun(with_child({"-n", "2", "--timeout", "30"}, "print"));
  INFO(describe(r));
  CHECK(r.status == 0);
  for (const std::string rank : {"0", "1"}) {
    const std::string p = "[" + rank + "] ";
    CHECK(r.out.find(p + "line one\n") != std::string::npos);
    CHECK(r.out.find(p + "line two\n") != std::string::npos);
    CHECK(r.out.find(p + "partial\n") != std::string::npos);
    CHECK(r.err.find(p + "err line\n") != std::string::npos);
  }
  CHECK(count_of(r.out, "\n") == 6);  // every line whole, none mixed with another rank's
}

TEST_CASE("each process gets CF_RANK, CF_NODES, CF_KVS and CF_IMAGES") {
  const RunResult r = run_cfrun(
      with_child({"-n", "3", "--images", "4", "--hosts", "local,localhost,local", "--timeout", "30"},
                 "env"),
      {"CF_IMAGES=99", "CF_RANK=77"});  // cfrun's own values must not leak through
  INFO(describe(r));
  CHECK(r.status == 0);
  for (int rank = 0; rank < 3; ++rank) {
    const std::string p = "[" + std::to_string(rank) + "] ";
    CHECK(r.out.find(p + "CF_RANK=" + std::to_string(rank) + " CF_NODES=3 CF_IMAGES=4 CF_KVS=127.0.0.1:") !=
          std::string::npos);
    CHECK(r.out.find(p + "bootstrap rank=" + std::to_string(rank) + " nodes=3 images=4\n") !=
          std::string::npos);
  }
  const RunResult plain = run_cfrun(with_child({"-n", "1", "--timeout", "30"}, "env"));
  INFO(describe(plain));
  CHECK(plain.out.find("CF_IMAGES=(unset)") != std::string::npos);
  CHECK(plain.out.find("images=0\n") != std::string::npos);
}

// The CPUs this test may run on, as cfrun_child's "cpus" line lists them.
std::vector<int> own_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  return cpus;
}

// Rank r's CPUs from "[r] cpus 0 1 ..." in cfrun's output (empty: no line).
std::vector<int> cpus_of(const std::string& out, int rank) {
  const std::string prefix = "[" + std::to_string(rank) + "] cpus";
  const size_t at = out.find(prefix);
  if (at == std::string::npos) return {};
  std::istringstream line(out.substr(at + prefix.size(), out.find('\n', at) - at - prefix.size()));
  std::vector<int> cpus;
  for (int c; line >> c;) cpus.push_back(c);
  return cpus;
}

TEST_CASE("--bind auto gives each process its own share of the CPUs when they suffice; none and too many leave them unbound") {
  const std::vector<int> all = own_cpus();
  const int n = std::min<int>(static_cast<int>(all.size()), 4);
  if (n >= 2) {
    const RunResult r = run_cfrun(with_child({"-n", std::to_string(n), "--timeout", "30"}, "cpus"));
    INFO(describe(r));
    REQUIRE(r.status == 0);
    std::vector<int> seen;
    for (int rank = 0; rank < n; ++rank) {
      const std::vector<int> mine = cpus_of(r.out, rank);
      CHECK(mine.size() >= all.size() / n);
      CHECK(mine.size() <= (all.size() + n - 1) / n);
      seen.insert(seen.end(), mine.begin(), mine.end());
    }
    std::sort(seen.begin(), seen.end());
    CHECK(seen == all);  // disjoint, and together every CPU
  } else {
    MESSAGE("one CPU: nothing to share out; checking the unbound cases only");
  }
  const RunResult none = run_cfrun(with_child({"-n", "2", "--bind", "none", "--timeout", "30"}, "cpus"));
  INFO(describe(none));
  REQUIRE(none.status == 0);
  CHECK(cpus_of(none.out, 0) == all);
  CHECK(cpus_of(none.out, 1) == all);
  const std::string many = std::to_string(all.size() + 1);
  const RunResult over = run_cfrun(with_child({"-n", many, "--timeout", "30"}, "cpus"));
  INFO(describe(over));
  REQUIRE(over.status == 0);
  CHECK(cpus_of(over.out, 0) == all);
  CHECK(cpus_of(over.out, static_cast<int>(all.size())) == all);
}

TEST_CASE("a lost rank (SIGKILL, exit 3) is reported once and the others see LOST naming it") {
  struct Case {
    const char* mode;
    int status;       // cfrun's exit status
    const char* how;  // as cfrun words it
  };
  for (const Case& c : {Case{"kill", 128 + SIGKILL, "was killed by signal 9 (Killed)"},
                        Case{"exit3", 3, "exited with status 3"}}) {
    CAPTURE(c.mode);
    const RunResult r = run_cfrun(with_child({"-n", "3", "--timeout", "30"}, c.mode));
    INFO(describe(r));
    CHECK(r.status == c.status);
    const std::string how = c.how;
    CHECK(r.err.find("cfrun: rank 1 (pid ") != std::string::npos);
    CHECK(std::regex_search(r.err, std::regex(R"((^|\n)cfrun: rank 1 \(pid [0-9]+\) )" +
                                              std::regex_replace(how, std::regex(R"([()])"), R"(\$&)") + "\n")));
    CHECK(count_of(r.err, "cfrun: rank") == 1);
    CHECK(r.out.find("[0] LOST 1 " + how + "\n") != std::string::npos);
    CHECK(r.out.find("[2] LOST 1 " + how + "\n") != std::string::npos);
  }
}

TEST_CASE("--no-lost-notices: cfrun still reports a lost rank but tells the others nothing") {
  const RunResult r = run_cfrun(with_child({"--no-lost-notices", "-n", "3", "--timeout", "30"}, "quiet"),
                                {"CF_EXIT_TIMEOUT=20"});  // no SIGTERM while they listen
  INFO(describe(r));
  CHECK(r.status == 3);
  CHECK(std::regex_search(r.err, std::regex(R"((^|\n)cfrun: rank 1 \(pid [0-9]+\) exited with status 3\n)")));
  CHECK(r.out.find("[0] NO NOTICE\n") != std::string::npos);
  CHECK(r.out.find("[2] NO NOTICE\n") != std::string::npos);
  CHECK(r.out.find("LOST") == std::string::npos);
  // The same run without the option does tell them.
  const RunResult told = run_cfrun(with_child({"-n", "3", "--timeout", "30"}, "quiet"), {"CF_EXIT_TIMEOUT=20"});
  INFO(describe(told));
  CHECK(told.out.find("[0] LOST 1 exited with status 3\n") != std::string::npos);
  CHECK(told.out.find("[2] LOST 1 exited with status 3\n") != std::string::npos);
}

TEST_CASE("a rank exiting 0 without bye is lost and cfrun exits 1") {
  const RunResult r = run_cfrun(with_child({"-n", "2", "--timeout", "30"}, "nobye"));
  INFO(describe(r));
  CHECK(r.status == 1);
  CHECK(std::regex_search(
      r.err, std::regex(R"((^|\n)cfrun: rank 1 \(pid [0-9]+\) exited with status 0 without cf_finalize\n)")));
  CHECK(r.out.find("[0] LOST 1 exited with status 0 without cf_finalize\n") != std::string::npos);
}

TEST_CASE("processes that ignore LOST are terminated after CF_EXIT_TIMEOUT") {
  const auto start = Clock::now();
  const RunResult r = run_cfrun(with_child({"-n", "3", "--timeout", "30"}, "hang"),
                                {"CF_EXIT_TIMEOUT=0.2"});
  INFO(describe(r));
  CHECK(r.status == 3);  // the first non-zero status, not the SIGTERMs that followed
  CHECK(std::regex_search(r.err, std::regex(R"(cfrun: rank 0 \(pid [0-9]+\) was killed by signal 15 \(Terminated\)\n)")));
  CHECK(std::regex_search(r.err, std::regex(R"(cfrun: rank 2 \(pid [0-9]+\) was killed by signal 15 \(Terminated\)\n)")));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("processes that also ignore SIGTERM are killed 1 s later") {
  const auto start = Clock::now();
  const RunResult r = run_cfrun(with_child({"-n", "2", "--timeout", "30"}, "hang-ignore-term"),
                                {"CF_EXIT_TIMEOUT=0"});
  INFO(describe(r));
  CHECK(r.status == 3);
  CHECK(std::regex_search(r.err, std::regex(R"(cfrun: rank 0 \(pid [0-9]+\) was killed by signal 9 \(Killed\)\n)")));
  CHECK(Clock::now() - start >= std::chrono::milliseconds(1000));
  CHECK(Clock::now() - start < std::chrono::seconds(20));
}

TEST_CASE("--timeout kills every process and cfrun exits 124") {
  const RunResult r = run_cfrun(with_child({"-n", "2", "--timeout", "1"}, "sleep"));
  INFO(describe(r));
  CHECK(r.status == 124);
  CHECK(r.err.find("cfrun: timeout after 1 s\n") != std::string::npos);
  CHECK(r.out.find("[0] READY\n") != std::string::npos);
}

TEST_CASE("SIGTERM to cfrun is forwarded to the processes") {
  CfrunProcess cfrun(with_child({"-n", "2", "--timeout", "30"}, "sleep"));
  REQUIRE(cfrun.wait_for_stdout("[0] READY\n", 20000));
  REQUIRE(cfrun.wait_for_stdout("[1] READY\n", 20000));
  cfrun.signal(SIGTERM);
  const RunResult r = cfrun.finish();
  INFO(describe(r));
  CHECK(r.status == 128 + SIGTERM);
  CHECK(std::regex_search(r.err, std::regex(R"(cfrun: rank 0 \(pid [0-9]+\) was killed by signal 15 \(Terminated\)\n)")));
  CHECK(std::regex_search(r.err, std::regex(R"(cfrun: rank 1 \(pid [0-9]+\) was killed by signal 15 \(Terminated\)\n)")));
}

TEST_CASE("processes of a cfrun killed with SIGKILL do not outlive it") {
  CfrunProcess cfrun(with_child({"-n", "2", "--timeout", "60"}, "sleep-pid"));
  REQUIRE(cfrun.wait_for_stdout("[0] READY pid=", 20000));
  REQUIRE(cfrun.wait_for_stdout("[1] READY pid=", 20000));  // cfrun forwards whole lines
  cfrun.signal(SIGKILL);
  const RunResult r = cfrun.finish();
  INFO(describe(r));
  CHECK(r.status == 128 + SIGKILL);
  const std::regex ready(R"(\[[01]\] READY pid=([0-9]+)\n)");
  int seen = 0;
  for (std::sregex_iterator it(r.out.begin(), r.out.end(), ready), end; it != end; ++it, ++seen) {
    const pid_t pid = static_cast<pid_t>(std::stol((*it)[1].str()));
    // Not our child (cfrun's, now reparented): a pidfd tells when it ends.
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) {
      CHECK(errno == ESRCH);  // gone already
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    const int ready_fds = ::poll(&p, 1, 10000);
    CHECK_MESSAGE(ready_fds == 1, "process ", pid, " still runs 10 s after its cfrun was killed");
    if (ready_fds != 1) ::kill(pid, SIGKILL);  // no orphan left behind by a failing test
    ::close(fd);
  }
  CHECK(seen == 2);
}

TEST_CASE("bad usage exits 2 with a message naming the argument and starts nothing") {
  char dir_template[] = "/tmp/cfrun_test_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string marker = std::string(dir_template) + "/started";
  struct Case {
    std::vector<std::string> args;
    std::string named;  // the message must contain this
  };
  const std::vector<Case> cases = {
      {{"touch", marker}, "-n"},
      {{"-n", "0", "touch", marker}, "-n '0'"},
      {{"-n", "abc", "touch", marker}, "-n 'abc'"},
      {{"-n", "2"}, "PROGRAM"},
      {{"-n", "2", "--hosts", "local", "touch", marker}, "--hosts has 1 entry but -n is 2"},
      {{"-n", "2", "--hosts", "local,nowhere", "touch", marker}, "--hosts entry 2 'nowhere'"},
      {{"-n", "1", "--bogus", "touch", marker}, "'--bogus'"},
      {{"-n", "1", "--timeout", "-1", "touch", marker}, "--timeout '-1'"},
      {{"-n", "1", "--images", "0", "touch", marker}, "--images '0'"},
      {{"-n", "1", "--kvs-host", "nowhere", "touch", marker}, "--kvs-host 'nowhere'"},
      {{"-n", "1", "--timeout"}, "--timeout needs a value"},
      {{"-n", "1", "--bind", "cores", "touch", marker}, "--bind 'cores'"},
  };
  for (const Case& c : cases) {
    std::string joined;
    for (const std::string& a : c.args) joined += a + " ";
    const RunResult r = run_cfrun(c.args);
    INFO("cfrun ", joined, "\n", describe(r));
    CHECK(r.status == 2);
    CHECK(r.err.find(c.named) != std::string::npos);
    CHECK(r.err.find("usage: cfrun") != std::string::npos);
    CHECK(::access(marker.c_str(), F_OK) != 0);
  }
  const RunResult bad_env = run_cfrun({"-n", "1", "touch", marker}, {"CF_EXIT_TIMEOUT=soon"});
  INFO(describe(bad_env));
  CHECK(bad_env.status == 2);
  CHECK(bad_env.err.find("CF_EXIT_TIMEOUT 'soon'") != std::string::npos);
  CHECK(::access(marker.c_str(), F_OK) != 0);
  ::rmdir(dir_template);
}

// ============================================================ Bootstrap client

TEST_CASE("from_env without CF_KVS returns nullptr and no error") {
  ScopedEnv kvs("CF_KVS", nullptr);
  std::string error = "stale";
  CHECK(Bootstrap::from_env(&error) == nullptr);
  CHECK(error.empty());
}

TEST_CASE("from_env with an unusable environment names the variable") {
  FakeLauncher fake;  // listening, so only the variables can be wrong
  struct Case {
    const char* rank;
    const char* nodes;
    const char* kvs;
    std::string named;
  };
  const std::string good = fake.address();
  ScopedEnv secret("CF_JOB_SECRET", std::string(64, 'a').c_str());
  const std::vector<Case> cases = {
      {"2", "2", good.c_str(), "CF_RANK='2'"},
      {"x", "2", good.c_str(), "CF_RANK='x'"},
      {nullptr, "2", good.c_str(), "CF_RANK is not set"},
      {"0", "0", good.c_str(), "CF_NODES='0'"},
      {"0", nullptr, good.c_str(), "CF_NODES is not set"},
      {"0", "1", "127.0.0.1", "CF_KVS='127.0.0.1'"},
      {"0", "1", "127.0.0.1:0", "CF_KVS='127.0.0.1:0'"},
  };
  for (const Case& c : cases) {
    ScopedEnv rank("CF_RANK", c.rank), nodes("CF_NODES", c.nodes), kvs("CF_KVS", c.kvs);
    std::string error;
    INFO("expected: ", c.named);
    CHECK(Bootstrap::from_env(&error) == nullptr);
    CHECK(error.find(c.named) != std::string::npos);
  }
}

TEST_CASE("from_env without the job secret, or with a malformed one, names CF_JOB_SECRET") {
  FakeLauncher fake;
  const std::string good = fake.address();
  ScopedEnv rank("CF_RANK", "0"), nodes("CF_NODES", "1"), kvs("CF_KVS", good.c_str());
  for (const char* secret : {static_cast<const char*>(nullptr), "", "abc", "zz"}) {
    ScopedEnv variable("CF_JOB_SECRET", secret);
    std::string error;
    INFO("CF_JOB_SECRET=", secret == nullptr ? "(unset)" : secret);
    CHECK(Bootstrap::from_env(&error) == nullptr);
    CHECK(error.find("CF_JOB_SECRET") != std::string::npos);
  }
}

TEST_CASE("connecting where no launcher listens fails with a message naming the address") {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // take a free port, then free it
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  ::close(fd);
  const std::string address = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  std::string error;
  CHECK(Bootstrap::connect(address, 0, 1, 0, FakeLauncher::secret(), &error) == nullptr);
  CHECK(error.find(address) != std::string::npos);
  CHECK(error.find("cannot connect") != std::string::npos);
}

TEST_CASE("a LOST notice between a request and its reply goes to on_lost, the reply to the caller") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn;
  auto b = fake.connect(0, 2, &conn);
  LostLog lost;
  b->watch(lost.callback());
  std::string value, error;
  auto pending = std::async(std::launch::async, [&] { return b->get("addr/1", &value, 5000, &error); });
  const std::string request = conn->read_line();
  CHECK(request == "GET " + id_of(request) + " addr/1");
  conn->write_line("LOST 1 exited_with_status_0_without_cf%5Ffinalize");
  conn->write_line("VAL " + id_of(request) + " 0a0b");
  CHECK_MESSAGE(pending.get(), error);
  CHECK(value == "0a0b");
  REQUIRE(lost.wait_for(1));
  CHECK(lost.seen[0] == std::make_pair(1u, std::string("exited with status 0 without cf_finalize")));
}

TEST_CASE("a reply that arrives after its caller timed out is dropped") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn;
  auto b = fake.connect(0, 1, &conn);
  std::string value, error;
  CHECK_FALSE(b->get("slow", &value, 100, &error));
  CHECK(error.find("'slow'") != std::string::npos);
  CHECK(error.find("timed out after 100 ms") != std::string::npos);
  const std::string late = conn->read_line();
  auto pending = std::async(std::launch::async, [&] { return b->get("fast", &value, 5000, &error); });
  const std::string next = conn->read_line();
  CHECK(next == "GET " + id_of(next) + " fast");
  CHECK(id_of(next) != id_of(late));
  conn->write_line("VAL " + id_of(late) + " late-value");
  conn->write_line("VAL " + id_of(next) + " fast-value");
  CHECK_MESSAGE(pending.get(), error);
  CHECK(value == "fast-value");
}

TEST_CASE("two Bootstrap objects in one process keep their own ranks and replies") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn0, conn1;
  auto b0 = fake.connect(0, 2, &conn0);
  auto b1 = fake.connect(1, 2, &conn1);
  CHECK(b0->rank() == 0);
  CHECK(b1->rank() == 1);
  std::string error0, error1;
  auto fence0 = std::async(std::launch::async, [&] { return b0->fence(5000, &error0); });
  auto fence1 = std::async(std::launch::async, [&] { return b1->fence(5000, &error1); });
  const std::string f0 = conn0->read_line(), f1 = conn1->read_line();
  CHECK(f0 == "FENCE " + id_of(f0));
  CHECK(f1 == "FENCE " + id_of(f1));
  conn1->write_line("OK " + id_of(f1));  // answered in the other order
  conn0->write_line("ERR " + id_of(f0) + " rank 1 was lost: exited with status 3");
  CHECK_MESSAGE(fence1.get(), error1);
  CHECK_FALSE(fence0.get());
  CHECK(error0 == "bootstrap fence: launcher answered: rank 1 was lost: exited with status 3");
  b0.reset();  // one object going away leaves the other working
  CHECK(conn0->read_line(1000).empty());
  auto bye1 = std::async(std::launch::async, [&] { return b1->bye(&error1); });
  const std::string bye = conn1->read_line();
  CHECK(bye == "BYE " + id_of(bye));
  conn1->write_line("OK " + id_of(bye));
  CHECK_MESSAGE(bye1.get(), error1);
  CHECK(b1->bye(&error1));  // idempotent: nothing more is sent
  conn1->write_line("OK 999");
  CHECK(conn1->read_line(200).empty());
}

TEST_CASE("notices that came before watch() are delivered after it") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn;
  auto b = fake.connect(1, 3, &conn);
  conn->write_line("LOST 2 was_killed_by_signal_9_(Killed)");
  // A reply after the notice proves the reader has taken the notice.
  std::string error;
  auto put = std::async(std::launch::async, [&] { return b->put("k", "v", &error); });
  const std::string request = conn->read_line();
  CHECK(request == "PUT " + id_of(request) + " k v");
  conn->write_line("OK " + id_of(request));
  CHECK_MESSAGE(put.get(), error);
  LostLog lost;
  b->watch(lost.callback());
  REQUIRE(lost.wait_for(1));
  CHECK(lost.seen[0] == std::make_pair(2u, std::string("was killed by signal 9 (Killed)")));
}

TEST_CASE("the launcher going away fails waiting calls and is reported as kLauncherRank") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn;
  auto b = fake.connect(0, 2, &conn);
  LostLog lost;
  b->watch(lost.callback());
  std::string value, error;
  auto pending = std::async(std::launch::async, [&] { return b->get("never", &value, -1, &error); });
  CHECK(!conn->read_line().empty());
  conn->close();
  CHECK_FALSE(pending.get());
  CHECK(error == "bootstrap get 'never': launcher connection closed");
  REQUIRE(lost.wait_for(1));
  CHECK(lost.seen[0] == std::make_pair(Bootstrap::kLauncherRank, std::string("launcher connection closed")));
  CHECK_FALSE(b->put("k", "v", &error));
}

TEST_CASE("keys and values that are not tokens are refused before anything is sent") {
  FakeLauncher fake;
  std::unique_ptr<FakeConnection> conn;
  auto b = fake.connect(0, 1, &conn);
  std::string value, error;
  CHECK_FALSE(b->put("two words", "v", &error));
  CHECK(error.find("'two words'") != std::string::npos);
  CHECK_FALSE(b->put("k", "line\nbreak", &error));
  CHECK_FALSE(b->put("", "v", &error));
  CHECK_FALSE(b->get("a b", &value, 100, &error));
  CHECK(conn->read_line(200).empty());
}

TEST_CASE("LOST's how survives encoding whatever it holds") {
  using namespace carflow::bootstrap_protocol;
  for (const std::string how : {"was killed by signal 9 (Killed)",
                                "exited with status 0 without cf_finalize", "100% _odd_ \t text", ""}) {
    const std::string wire = encode_words(how);
    INFO(how, " -> ", wire);
    CHECK(is_token(wire));
    CHECK(decode_words(wire) == how);
  }
}

int main(int argc, char** argv) {
  // The first two arguments that are not options: cfrun_bin and cfrun_child.
  std::vector<char*> rest = {argv[0]};
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (paths.size() < 2 && argv[i][0] != '-') paths.emplace_back(argv[i]);
    else rest.push_back(argv[i]);
  }
  if (paths.size() != 2) {
    std::fprintf(stderr, "usage: %s CFRUN_BIN CFRUN_CHILD [doctest options]\n", argv[0]);
    return 2;
  }
  for (std::string& p : paths) {  // absolute: children run with another cwd only if we chdir
    if (p[0] != '/') {
      char cwd[4096];
      if (::getcwd(cwd, sizeof cwd) != nullptr) p = std::string(cwd) + "/" + p;
    }
  }
  binaries() = {paths[0], paths[1]};
  doctest::Context context;
  context.applyCommandLine(static_cast<int>(rest.size()), rest.data());
  return context.run();
}
