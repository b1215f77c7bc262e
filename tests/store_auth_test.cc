// Nobody joins a job that is not theirs: strangers at cfrun's store port,
// there before a slow rank, with no secret, a wrong one, a replayed proof,
// garbage or a huge line, read no key, write none, make nobody see a loss,
// and the job's results are right; a client refuses a store that cannot
// prove the secret (transports/bootstrap/job_auth.h).
//
// Usage: store_auth_test CFRUN_BIN CFRUN_CHILD [doctest options]. cfrun runs
// with --timeout and is killed at the end of each case whatever happens.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "tests/strangers.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

extern char** environ;

namespace {

namespace auth = carflow::job_auth;
using strangers::Clock;
using strangers::kWaitMs;
using strangers::nonce;

std::string g_cfrun, g_child;

// cfrun -n 2 ... child late, its output in pipes.
class Job {
 public:
  explicit Job(const std::string& fifo) {
    std::vector<std::string> args = {g_cfrun, "-n", "2", "--timeout", "60", g_child, "late"};
    std::vector<std::string> env = {"CF_TEST_GO_FIFO=" + fifo};
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    for (std::string& e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);
    int out[2], err[2];
    REQUIRE(::pipe2(out, O_CLOEXEC) == 0);
    REQUIRE(::pipe2(err, O_CLOEXEC) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(out[1], STDOUT_FILENO);
      ::dup2(err[1], STDERR_FILENO);
      ::execve(argv[0], argv.data(), envp.data());
      ::_exit(126);
    }
    ::close(out[1]);
    ::close(err[1]);
    fds_[0] = out[0];
    fds_[1] = err[0];
  }
  ~Job() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    for (int fd : fds_) if (fd >= 0) ::close(fd);
  }
  pid_t pid() const { return pid_; }

  // Reads until stdout holds `text`; false if cfrun ended or time ran out.
  bool wait_for_stdout(const std::string& text) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (out_.find(text) == std::string::npos) {
      if (Clock::now() >= deadline || !pump(deadline)) return false;
    }
    return true;
  }
  // Reads to the end; the exit status (-1 if it did not end in time).
  int finish() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (Clock::now() < deadline && pump(deadline)) {
    }
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;  // its --timeout bounds this
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool pump(Clock::time_point deadline) {
    pollfd p[2] = {{fds_[0], POLLIN, 0}, {fds_[1], POLLIN, 0}};
    if (fds_[0] < 0 && fds_[1] < 0) return false;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (::poll(p, 2, static_cast<int>(std::max<int64_t>(left, 0))) <= 0) return false;
    for (int i = 0; i < 2; ++i) {
      if (p[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds_[i], buf, sizeof buf);
      if (n <= 0) {
        ::close(fds_[i]);
        fds_[i] = -1;
      } else {
        (i == 0 ? out_ : err_).append(buf, static_cast<size_t>(n));
      }
    }
    return true;
  }
  pid_t pid_ = -1;
  int fds_[2] = {-1, -1};
  std::string out_, err_;
};

uint64_t high_water_kb(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  }
  return 0;
}

}  // namespace

TEST_CASE("strangers at the store before a slow rank get nothing in, and the job's results are right") {
  char dir_template[] = "/tmp/store_auth_XXXXXX";
  REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string fifo = std::string(dir_template) + "/go";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  Job job(fifo);
  REQUIRE_MESSAGE(job.wait_for_stdout("SECRET "), job.out(), job.err());
  const size_t at = job.out().find("[0] KVS ");
  REQUIRE(at != std::string::npos);
  const std::string line = job.out().substr(at, job.out().find('\n', at) - at);
  const std::string kvs = line.substr(8, line.find(' ', 8) - 8);
  std::string secret, error;
  REQUIRE_MESSAGE(auth::parse_secret(line.substr(line.find("SECRET ") + 7), &secret, &error), error);
  const int refused = strangers::attack_store(kvs, secret);
  CHECK(high_water_kb(job.pid()) < 64 * 1024);

  // The slow rank joins now: the job runs as if nobody had come.
  {
    const int go = ::open(fifo.c_str(), O_WRONLY | O_CLOEXEC);
    REQUIRE(go >= 0);
    REQUIRE(::write(go, "g", 1) == 1);
    ::close(go);
  }
  const int status = job.finish();
  INFO("stdout:\n", job.out(), "\nstderr:\n", job.err());
  CHECK(status == 0);
  CHECK(job.out().find("[0] OK\n") != std::string::npos);
  CHECK(job.out().find("[1] OK\n") != std::string::npos);
  CHECK(job.out().find("LOST") == std::string::npos);
  CHECK(job.err().find("cfrun: refused " + std::to_string(refused) +
                       " connection(s) to the store that did not prove the job secret (the first from 127.0.0.1:") !=
        std::string::npos);
  size_t cfrun_lines = 0;
  for (size_t p = job.err().find("cfrun:"); p != std::string::npos; p = job.err().find("cfrun:", p + 1)) ++cfrun_lines;
  CHECK(cfrun_lines == 1);
  ::unlink(fifo.c_str());
  ::rmdir(dir_template);
}

TEST_CASE("a client gives up on a store that cannot prove the job secret, replayed or guessed") {
  const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 4) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const std::string kvs = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  const std::string secret(auth::kSecretBytes, '\x21'), wrong(auth::kSecretBytes, '\x22');
  // A store answer recorded from an earlier exchange (another client nonce).
  const std::string old_client = nonce(), old_store = nonce();
  const std::string recorded = "AUTH " + carflow::hex_encode(old_store) + " " +
                               carflow::hex_encode(auth::proof(secret, auth::kStoreRole, "", old_client, old_store));
  struct Case {
    const char* what;
    std::function<std::string(const std::string& client_nonce)> answer;
  };
  const std::vector<Case> cases = {
      {"replayed answer", [&](const std::string&) { return recorded; }},
      {"wrong secret",
       [&](const std::string& c) {
         const std::string s = nonce();
         return "AUTH " + carflow::hex_encode(s) + " " + carflow::hex_encode(auth::proof(wrong, auth::kStoreRole, "", c, s));
       }},
      {"the client's own role reflected",
       [&](const std::string& c) {
         const std::string s = nonce();
         return "AUTH " + carflow::hex_encode(s) + " " + carflow::hex_encode(auth::proof(secret, auth::kClientRole, "", c, s));
       }},
      {"no proof", [&](const std::string&) { return std::string("OK 0"); }},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    std::string error;
    auto client = std::async(std::launch::async, [&] { return carflow::Bootstrap::connect(kvs, 0, 1, 0, secret, &error); });
    const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    REQUIRE(fd >= 0);
    std::string in;
    char ch;
    while (::recv(fd, &ch, 1, 0) == 1 && ch != '\n') in.push_back(ch);
    std::string client_nonce;
    REQUIRE(in.rfind("AUTH ", 0) == 0);
    REQUIRE(carflow::hex_decode(in.substr(5), &client_nonce));
    const std::string answer = c.answer(client_nonce) + "\n";
    REQUIRE(::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(answer.size()));
    // The client must not send its proof (nor anything) to such a store.
    in.clear();
    while (::recv(fd, &ch, 1, 0) == 1) in.push_back(ch);
    CHECK(in.empty());
    CHECK(client.get() == nullptr);
    CHECK(error.find("the store did not prove it knows this job's secret") != std::string::npos);
    ::close(fd);
  }
  ::close(listener);
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
  g_cfrun = paths[0];
  g_child = paths[1];
  doctest::Context context(static_cast<int>(rest.size()), rest.data());
  return context.run();
}
