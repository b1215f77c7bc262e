// cfrun: starts the N processes of a carflow job, serves them the key-value
// store of transports/bootstrap/bootstrap.h (its protocol is documented
// there), forwards their output with a rank prefix, and tears the job down
// when one of them is lost.
//
//   cfrun -n N [--images K] [--hosts H1,H2,...] [--kvs-host IP]
//         [--timeout SECONDS] [--bind auto|none] [--no-lost-notices] PROGRAM ARGS...
//
// Binding (--bind auto, the default): when the processes are no more than
// the CPUs cfrun may run on, each process is bound to its own share of
// them (contiguous, disjoint, sizes differing by at most one), as Open MPI
// binds to cores for small jobs. Unbound, the kernel may put two processes
// that hand messages back and forth on one CPU (a waking process goes where
// its waker ran) and keep them there for a whole run: every hand-over then
// becomes a context switch. More processes than CPUs are left unbound.
// All processes run on this machine (network namespaces included), so they
// share its CPUs.
//
// One thread, one poll(2) over: the store's listening socket, one socket per
// process, each process's stdout and stderr pipe, and a signalfd for
// SIGCHLD, SIGINT, SIGTERM and SIGHUP. Each child runs in its own process
// group, so a terminal's Ctrl-C reaches cfrun only and cfrun forwards it;
// a process whose cfrun dies without ending it (SIGKILL) gets SIGKILL from
// the kernel (PR_SET_PDEATHSIG) instead of living on unsupervised.
//
// A process that cannot go on (out of memory) says why (LEAVE) and ends
// cleanly: cfrun prints "cfrun: rank R (pid P) <why>" and nothing more.
// A process is lost when it dies by a signal, exits non-zero, or exits 0
// without BYE. Then cfrun prints one line "cfrun: rank R (pid P) <how>",
// sends LOST to the other connected processes (not with --no-lost-notices:
// then they must find out by themselves, transports/liveness), fails every GET or FENCE that
// can no longer be answered, and gives the rest CF_EXIT_TIMEOUT seconds
// (default 5) before SIGTERM, then SIGKILL 1 s later.
//
// Who may join (transports/bootstrap/job_auth.h): cfrun makes a random
// 256-bit secret per job and gives it to its processes in their environment
// (CF_JOB_SECRET; 'ip netns exec' passes the environment on), never on a
// command line. A connection to the store that does not prove it knows the
// secret within kProofWaitSeconds, or sends a line longer than the proof
// needs, is closed; the job goes on, and at its end cfrun prints one line
// with the count of such connections.
//
// Exit status: 124 on --timeout; else the first non-zero status among the
// processes (128+S for a death by signal S); else 1 if a process exited 0
// without BYE (the job failed although no status says so); else 0.
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tools/store_server.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/cpu_shares.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

extern char** environ;

namespace carflow {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint32_t kMaxProcesses = 1024;
constexpr uint32_t kMaxImages = 65536;
constexpr double kKillAfterTermSeconds = 1.0;
constexpr size_t kMaxForwardedLine = 64 * 1024;  // longer output lines are cut here
// A rank proves the secret in one round trip at its start; strangers that
// hold connections open unproven are closed after this, and beyond
// kMaxUnproven at once the oldest goes, so they cannot use up descriptors.
constexpr double kProofWaitSeconds = 10;
constexpr size_t kMaxUnproven = 64;

const char kUsage[] =
    "usage: cfrun -n N [--images K] [--hosts H1,H2,...] [--kvs-host IP] [--timeout SECONDS]\n"
    "             [--bind auto|none] [--no-lost-notices] PROGRAM ARGS...\n"
    "  -n N              processes to start (1..1024); each gets CF_RANK, CF_NODES, CF_KVS\n"
    "  --images K        images per process, passed as CF_IMAGES\n"
    "  --hosts H,...     one entry per process: local, localhost, or ns:NAME (run inside\n"
    "                    network namespace NAME via 'ip netns exec')\n"
    "  --kvs-host IP     address the processes reach the store at (default 127.0.0.1)\n"
    "  --timeout S       wall-clock limit; on expiry kill everything and exit 124\n"
    "  --bind auto|none  auto (default): with no more processes than CPUs, bind each\n"
    "                    process to its own share of the CPUs; none: never bind\n"
    "  --no-lost-notices do not tell the other processes when one is lost; they still\n"
    "                    find out within CF_PEER_TIMEOUT through their own liveness\n"
    "                    links (for testing that detection needs no launcher)\n"
    "environment: CF_EXIT_TIMEOUT (seconds, default 5): how long the others may run on\n"
    "after a process is lost before they are terminated\n";

// ---------------------------------------------------------------- helpers

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // our own stdout is gone (EPIPE): drop, keep supervising
    text.remove_prefix(static_cast<size_t>(n));
  }
}

void say(const std::string& line) { write_all(STDERR_FILENO, "cfrun: " + line + "\n"); }


std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// ---------------------------------------------------------------- options

struct LaunchOptions {
  uint32_t nodes = 0;
  uint32_t images = 0;              // 0 = not given
  std::vector<std::string> netns;   // per rank; "" = local. Empty = all local
  std::string kvs_host = "127.0.0.1";
  bool listen_on_all = false;       // namespaces or --kvs-host: other addresses must reach us
  double timeout_s = 0;             // 0 = none
  double exit_timeout_s = 5;
  bool lost_notices = true;         // --no-lost-notices: false
  bool bind = true;                 // --bind auto (true) or none
  std::vector<std::string> command;
  bool help = false;
};


bool parse_seconds(const std::string& name, const std::string& text, bool zero_ok, double* out,
                   std::string* error) {
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(v) || v < 0 ||
      (v == 0 && !zero_ok) || v > 1e7) {
    *error = name + " '" + text + "': expected a number of seconds " +
             (zero_ok ? ">= 0" : "> 0") + " (fractions allowed)";
    return false;
  }
  *out = v;
  return true;
}

bool parse_hosts(const std::string& text, std::vector<std::string>* netns, std::string* error) {
  size_t start = 0;
  for (;;) {
    const size_t comma = text.find(',', start);
    const std::string entry = text.substr(start, comma - start);
    if (entry == "local" || entry == "localhost") {
      netns->push_back("");
    } else if (entry.rfind("ns:", 0) == 0 && entry.size() > 3 &&
               entry.find('/') == std::string::npos) {
      netns->push_back(entry.substr(3));
    } else {
      *error = "--hosts entry " + std::to_string(netns->size() + 1) + " '" + entry +
               "': expected local, localhost or ns:NAME";
      return false;
    }
    if (comma == std::string::npos) return true;
    start = comma + 1;
  }
}

// Applies one option and its value; false with *error naming it otherwise.
bool apply_option(const std::string& name, const std::string& value, LaunchOptions* o,
                  std::string* error) {
  if (name == "-n") return parse_count("-n", value, 1, kMaxProcesses, &o->nodes, error);
  if (name == "--images") return parse_count("--images", value, 1, kMaxImages, &o->images, error);
  if (name == "--hosts") return parse_hosts(value, &o->netns, error);
  if (name == "--timeout") return parse_seconds("--timeout", value, false, &o->timeout_s, error);
  if (name == "--bind") {
    if (value != "auto" && value != "none") {
      *error = "--bind '" + value + "': expected auto or none";
      return false;
    }
    o->bind = value == "auto";
    return true;
  }
  // --kvs-host
  in_addr addr{};
  if (::inet_pton(AF_INET, value.c_str(), &addr) != 1) {
    *error = "--kvs-host '" + value + "': expected an IPv4 address such as 10.0.0.1";
    return false;
  }
  o->kvs_host = value;
  o->listen_on_all = true;
  return true;
}

// The rules that involve several options, and CF_EXIT_TIMEOUT.
bool check_options(bool have_n, bool have_hosts, LaunchOptions* o, std::string* error) {
  if (!have_n) {
    *error = "-n N is required: the number of processes to start";
    return false;
  }
  if (o->command.empty()) {
    *error = "PROGRAM is missing: give the program to run after the options";
    return false;
  }
  if (have_hosts && o->netns.size() != o->nodes) {
    *error = "--hosts has " + std::to_string(o->netns.size()) +
             (o->netns.size() == 1 ? " entry" : " entries") + " but -n is " +
             std::to_string(o->nodes) + ": give exactly one entry per process";
    return false;
  }
  const bool any_netns = std::any_of(o->netns.begin(), o->netns.end(),
                                     [](const std::string& ns) { return !ns.empty(); });
  if (any_netns && !o->listen_on_all) {
    write_all(STDERR_FILENO,
              "cfrun: warning: --hosts runs processes in network namespaces but the store "
              "is given to them as 127.0.0.1; pass --kvs-host with an address they can reach\n");
  }
  o->listen_on_all |= any_netns;
  const char* exit_timeout = std::getenv("CF_EXIT_TIMEOUT");
  if (exit_timeout != nullptr && *exit_timeout != '\0') {
    return parse_seconds("CF_EXIT_TIMEOUT", exit_timeout, true, &o->exit_timeout_s, error);
  }
  return true;
}

bool parse_args(int argc, char** argv, LaunchOptions* o, std::string* error) {
  int i = 1;
  bool have_n = false, have_hosts = false;
  for (; i < argc; ++i) {
    std::string arg = argv[i], name = arg, value;
    if (arg == "--") {
      ++i;
      break;
    }
    if (arg.empty() || arg[0] != '-') break;  // PROGRAM
    if (arg == "-h" || arg == "--help") {
      o->help = true;
      return true;
    }
    if (arg == "--no-lost-notices") {  // the one option without a value
      o->lost_notices = false;
      continue;
    }
    bool inline_value = false;
    if (arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos) {
      name = arg.substr(0, arg.find('='));
      value = arg.substr(arg.find('=') + 1);
      inline_value = true;
    } else if (arg.rfind("-n", 0) == 0 && arg.size() > 2) {
      name = "-n";
      value = arg.substr(2);
      inline_value = true;
    }
    if (name != "-n" && name != "--images" && name != "--hosts" && name != "--kvs-host" &&
        name != "--timeout" && name != "--bind") {
      *error = "unknown option '" + arg + "'";
      return false;
    }
    if (!inline_value) {
      if (i + 1 >= argc) {
        *error = "option " + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    if (!apply_option(name, value, o, error)) return false;
    have_n |= name == "-n";
    have_hosts |= name == "--hosts";
  }
  o->command.assign(argv + i, argv + argc);
  return check_options(have_n, have_hosts, o, error);
}

// ---------------------------------------------------------------- store

// ---------------------------------------------------------------- launcher

struct Child {
  uint32_t rank = 0;
  pid_t pid = -1;
  int out_fd = -1;  // read ends of the child's stdout and stderr pipes
  int err_fd = -1;
  std::string out_partial, err_partial;
  bool running = false;
};

struct ExecImage;

struct Connection {
  int fd = -1;
  std::string peer;                  // "IP:PORT", for the refusal line
  Clock::time_point prove_by;        // closed if still unproven then
  std::string in, out;
  StoreServer::Session session;  // its rank once HELLO was accepted; refused: close once `out` is sent
};

class Launcher {
 public:
  Launcher(LaunchOptions options, std::string secret)
      : o_(std::move(options)),
        secret_hex_(hex_encode(secret)),
        store_(o_.nodes, std::move(secret), [this](uint32_t rank) { return children_[rank].running; }),
        children_(o_.nodes) {}
  int run();

 private:
  bool open_store(std::string* error);
  bool open_signals(std::string* error);
  ExecImage exec_image(uint32_t rank) const;
  bool spawn(uint32_t rank, std::string* error);
  int poll_timeout_ms() const;
  void poll_once();
  // Events.
  void accept_connections();
  void read_connection(uint64_t serial);
  void flush_connection(uint64_t serial);
  void close_connection(uint64_t serial);
  void close_unproven(Clock::time_point now);
  void read_signals();
  void forward_output(Child& c, bool is_err, bool closing);
  void child_exited(Child& c, int status);
  void report_departures();
  void check_deadlines();
  // Actions.
  void send(const std::vector<Outgoing>& lines);
  void send(uint64_t serial, std::string line);
  void start_grace();
  void signal_children(int sig);
  int exit_status() const;

  LaunchOptions o_;
  const std::string secret_hex_;  // CF_JOB_SECRET for the children
  StoreServer store_;
  std::vector<Child> children_;
  uint32_t running_ = 0;
  int listen_fd_ = -1;
  int signal_fd_ = -1;
  std::string kvs_address_;
  std::map<uint64_t, Connection> connections_;  // by serial, never reused
  uint64_t next_serial_ = 1;
  std::string first_refused_;  // the first refused connection's peer

  rlimit files_at_start_{RLIM_INFINITY, RLIM_INFINITY};
  std::vector<cpu_set_t> cpus_;  // per rank under --bind auto; empty = unbound
  std::optional<Clock::time_point> timeout_at_, grace_until_, kill_at_;
  bool teardown_ = false;      // grace or termination under way
  bool timed_out_ = false;
  int interrupts_ = 0;
  std::optional<int> first_failure_;
  bool lost_without_status_ = false;
};

bool Launcher::open_store(std::string* error) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  // Processes in other network namespaces come in over another address.
  addr.sin_addr.s_addr = htonl(o_.listen_on_all ? INADDR_ANY : INADDR_LOOPBACK);
  addr.sin_port = 0;  // the kernel picks
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, static_cast<int>(o_.nodes) + 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("cannot open the store's socket: ") + std::strerror(errno);
    return false;
  }
  kvs_address_ = o_.kvs_host + ":" + std::to_string(ntohs(addr.sin_port));
  return true;
}

bool Launcher::open_signals(std::string* error) {
  sigset_t set;
  sigemptyset(&set);
  for (int s : {SIGCHLD, SIGINT, SIGTERM, SIGHUP}) sigaddset(&set, s);
  ::sigprocmask(SIG_BLOCK, &set, nullptr);
  std::signal(SIGPIPE, SIG_IGN);  // a closed stdout must not kill the supervisor
  signal_fd_ = ::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK);
  if (signal_fd_ < 0) {
    *error = std::string("signalfd failed: ") + std::strerror(errno);
    return false;
  }
  return true;
}

// What one child executes, built before fork.
struct ExecImage {
  std::vector<std::string> args, env;
  std::vector<char*> argv, envp;  // point into args and env
};

ExecImage Launcher::exec_image(uint32_t rank) const {
  ExecImage x;
  const std::string netns = o_.netns.empty() ? "" : o_.netns[rank];
  if (!netns.empty()) x.args = {"ip", "netns", "exec", netns};
  x.args.insert(x.args.end(), o_.command.begin(), o_.command.end());
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string_view v = *e;
    if (!v.starts_with("CF_RANK=") && !v.starts_with("CF_NODES=") && !v.starts_with("CF_KVS=") &&
        !v.starts_with("CF_IMAGES=") && !v.starts_with(std::string(job_auth::kSecretVariable) + "=")) {
      x.env.emplace_back(v);
    }
  }
  x.env.push_back("CF_RANK=" + std::to_string(rank));
  x.env.push_back("CF_NODES=" + std::to_string(o_.nodes));
  x.env.push_back("CF_KVS=" + kvs_address_);
  x.env.push_back(std::string(job_auth::kSecretVariable) + "=" + secret_hex_);
  if (o_.images != 0) x.env.push_back("CF_IMAGES=" + std::to_string(o_.images));
  for (std::string& a : x.args) x.argv.push_back(a.data());
  for (std::string& e : x.env) x.envp.push_back(e.data());
  x.argv.push_back(nullptr);
  x.envp.push_back(nullptr);
  return x;
}

// In the forked child. cfrun is single-threaded, so it may call anything.
[[noreturn]] void exec_child(const ExecImage& x, int out_fd, int err_fd, const rlimit& files,
                             const cpu_set_t* cpus, pid_t launcher) {
  ::setpgid(0, 0);
  // Its own process group keeps a terminal's Ctrl-C and a test runner's
  // group kill away from it: if cfrun itself dies unannounced (SIGKILL),
  // the kernel ends it (kept across exec). A cfrun that is already gone
  // (it died before this line) is seen as a new parent.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(128 + SIGKILL);
  const int devnull = ::open("/dev/null", O_RDONLY);
  ::dup2(devnull, STDIN_FILENO);
  ::dup2(out_fd, STDOUT_FILENO);
  ::dup2(err_fd, STDERR_FILENO);
  std::signal(SIGPIPE, SIG_DFL);  // undo what cfrun changed for itself
  ::setrlimit(RLIMIT_NOFILE, &files);
  // Inherited through exec (and 'ip netns exec'). Failing leaves the
  // process unbound, which is slower at worst: say so, go on.
  if (cpus != nullptr && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0) {
    std::fprintf(stderr, "cfrun: warning: cannot bind to its CPUs: %s\n", std::strerror(errno));
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::execvpe(x.argv[0], x.argv.data(), x.envp.data());
  std::fprintf(stderr, "cfrun: cannot execute '%s': %s\n", x.argv[0], std::strerror(errno));
  ::_exit(127);
}

bool Launcher::spawn(uint32_t rank, std::string* error) {
  const ExecImage image = exec_image(rank);
  int out[2] = {-1, -1}, err[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    *error = std::string("pipe failed: ") + std::strerror(errno);
    for (int fd : {out[0], out[1]}) if (fd >= 0) ::close(fd);
    return false;
  }
  const pid_t launcher = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *error = std::string("fork failed: ") + std::strerror(errno);
    for (int fd : {out[0], out[1], err[0], err[1]}) ::close(fd);
    return false;
  }
  if (pid == 0) {
    exec_child(image, out[1], err[1], files_at_start_, cpus_.empty() ? nullptr : &cpus_[rank], launcher);
  }
  ::setpgid(pid, pid);  // also here, so that signals sent at once reach the group
  ::close(out[1]);
  ::close(err[1]);
  Child& c = children_[rank];
  c.rank = rank;
  c.pid = pid;
  c.out_fd = out[0];
  c.err_fd = err[0];
  ::fcntl(c.out_fd, F_SETFL, O_NONBLOCK);
  ::fcntl(c.err_fd, F_SETFL, O_NONBLOCK);
  c.running = true;
  ++running_;
  return true;
}

int Launcher::run() {
  // Three descriptors per process (two pipes and a socket); the children get
  // the limit cfrun was started with.
  if (::getrlimit(RLIMIT_NOFILE, &files_at_start_) == 0 &&
      files_at_start_.rlim_cur < files_at_start_.rlim_max) {
    rlimit raised = files_at_start_;
    raised.rlim_cur = raised.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &raised);
  }
  std::string error;
  if (!open_store(&error) || !open_signals(&error)) {
    say(error);
    return 1;
  }
  if (o_.timeout_s > 0) {
    timeout_at_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                     std::chrono::duration<double>(o_.timeout_s));
  }
  if (o_.bind) cpus_ = cpu_shares(o_.nodes);
  for (uint32_t r = 0; r < o_.nodes; ++r) {
    if (!spawn(r, &error)) {
      say(error);
      first_failure_ = 1;
      start_grace();  // the started ones get the usual grace, then are terminated
      break;
    }
  }
  while (running_ > 0) {
    poll_once();
    check_deadlines();
  }
  for (Child& c : children_) {  // what the exited processes wrote is all in the pipes
    forward_output(c, false, true);
    forward_output(c, true, true);
  }
  while (!connections_.empty()) close_connection(connections_.begin()->first);
  if (store_.refused() > 0) {
    say("refused " + std::to_string(store_.refused()) + " connection(s) to the store that did not prove the job " +
        "secret (the first from " + first_refused_ + ")");
  }
  return exit_status();
}

int Launcher::exit_status() const {
  if (timed_out_) return 124;
  if (first_failure_) return *first_failure_;
  return lost_without_status_ ? 1 : 0;
}

int Launcher::poll_timeout_ms() const {
  std::optional<Clock::time_point> next;
  for (const auto& t : {timeout_at_, grace_until_, kill_at_}) {
    if (t && (!next || *t < *next)) next = t;
  }
  for (const auto& [serial, c] : connections_) {
    if (c.session.proof != StoreServer::Session::Proof::kProven && (!next || c.prove_by < *next)) next = c.prove_by;
  }
  if (!next) return -1;
  const auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(std::min<int64_t>(left, INT32_MAX));
}

void Launcher::poll_once() {
  enum Kind { kListen, kSignal, kConnection, kOut, kErr };
  std::vector<pollfd> fds;
  std::vector<std::pair<Kind, uint64_t>> what;
  auto add = [&](int fd, short events, Kind kind, uint64_t which) {
    fds.push_back({fd, events, 0});
    what.emplace_back(kind, which);
  };
  add(listen_fd_, POLLIN, kListen, 0);
  for (const auto& [serial, c] : connections_) {
    add(c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), kConnection, serial);
  }
  for (const Child& c : children_) {
    if (c.out_fd >= 0) add(c.out_fd, POLLIN, kOut, c.rank);
    if (c.err_fd >= 0) add(c.err_fd, POLLIN, kErr, c.rank);
  }
  add(signal_fd_, POLLIN, kSignal, 0);  // last: a BYE or output that came first is taken first
  if (::poll(fds.data(), fds.size(), poll_timeout_ms()) <= 0) return;
  for (size_t i = 0; i < fds.size(); ++i) {
    if (fds[i].revents == 0) continue;
    const auto [kind, which] = what[i];
    switch (kind) {
      case kListen: accept_connections(); break;
      case kConnection:
        if (fds[i].revents & POLLOUT) flush_connection(which);
        if (fds[i].revents & ~POLLOUT) read_connection(which);
        break;
      case kOut: forward_output(children_[which], false, false); break;
      case kErr: forward_output(children_[which], true, false); break;
      case kSignal: read_signals(); break;
    }
  }
}

void Launcher::accept_connections() {
  for (;;) {
    sockaddr_in from{};
    socklen_t len = sizeof from;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) break;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    Connection& c = connections_[next_serial_++];
    c.fd = fd;
    char ip[INET_ADDRSTRLEN] = "?";
    ::inet_ntop(AF_INET, &from.sin_addr, ip, sizeof ip);
    c.peer = std::string(ip) + ":" + std::to_string(ntohs(from.sin_port));
    c.prove_by = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(kProofWaitSeconds));
  }
  std::vector<uint64_t> unproven;  // oldest first (serials grow)
  for (const auto& [serial, c] : connections_) {
    if (c.session.proof != StoreServer::Session::Proof::kProven) unproven.push_back(serial);
  }
  for (size_t i = 0; i + kMaxUnproven < unproven.size(); ++i) close_connection(unproven[i]);
}

// Unproven connections past their time.
void Launcher::close_unproven(Clock::time_point now) {
  std::vector<uint64_t> late;
  for (const auto& [serial, c] : connections_) {
    if (c.session.proof != StoreServer::Session::Proof::kProven && now >= c.prove_by) late.push_back(serial);
  }
  for (uint64_t serial : late) close_connection(serial);
}

void Launcher::read_connection(uint64_t serial) {
  auto it = connections_.find(serial);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  char chunk[16384];
  bool eof = false;
  for (;;) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof chunk, 0);
    if (n > 0) {
      c.in.append(chunk, static_cast<size_t>(n));
      // A sender as fast as this loop must not grow `in` without end.
      if (c.in.size() > StoreServer::max_line_bytes(c.session) + sizeof chunk) break;
      continue;
    }
    eof = n == 0 || (errno != EAGAIN && errno != EINTR);
    break;
  }
  size_t start = 0, end;
  while (!c.session.closing && (end = c.in.find('\n', start)) != std::string::npos) {
    std::vector<Outgoing> out;
    store_.handle(serial, c.session, std::string_view(c.in).substr(start, end - start), &out);
    send(out);
    report_departures();
    start = end + 1;
  }
  c.in.erase(0, start);
  if (c.in.size() > StoreServer::max_line_bytes(c.session)) {  // not a bootstrap client
    store_.refuse(c.session);
    eof = true;
  }
  if (eof || (c.session.closing && c.out.empty())) close_connection(serial);
}

void Launcher::send(const std::vector<Outgoing>& lines) {
  for (const Outgoing& o : lines) send(o.conn, o.line);
}

void Launcher::send(uint64_t serial, std::string line) {
  auto it = connections_.find(serial);
  if (it == connections_.end()) return;
  it->second.out += line;
  it->second.out += '\n';
  flush_connection(serial);
}

void Launcher::flush_connection(uint64_t serial) {
  auto it = connections_.find(serial);
  if (it == connections_.end()) return;
  Connection& c = it->second;
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;  // POLLOUT resumes
    } else {
      c.out.clear();  // the peer is gone; its EOF closes the connection
      return;
    }
  }
  if (c.session.closing) ::shutdown(c.fd, SHUT_WR);
}

void Launcher::close_connection(uint64_t serial) {
  auto it = connections_.find(serial);
  if (it == connections_.end()) return;
  store_.drop(serial, it->second.session);  // counts it if it never proved the secret
  if (first_refused_.empty() && it->second.session.proof != StoreServer::Session::Proof::kProven) {
    first_refused_ = it->second.peer;
  }
  ::close(it->second.fd);
  connections_.erase(it);
}

void Launcher::read_signals() {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    const int sig = static_cast<int>(info.ssi_signo);
    if (sig == SIGCHLD) continue;  // reaped below, whichever child it was
    if (++interrupts_ > 1) {
      say("second signal: killing every process");
      signal_children(SIGKILL);
      continue;
    }
    say("received signal " + std::to_string(sig) + " (" + strsignal(sig) +
        "), forwarding it to the processes");
    signal_children(sig);
    start_grace();
  }
  int status = 0;
  pid_t pid;
  while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
    for (Child& c : children_) {
      if (c.pid == pid && c.running) child_exited(c, status);
    }
  }
}

// Reads what the pipe holds and writes whole lines with the rank prefix, so
// that lines of different ranks never mix. `closing` (the end): no more data
// comes; a partial last line is flushed and the pipe closed.
void Launcher::forward_output(Child& c, bool is_err, bool closing) {
  int& fd = is_err ? c.err_fd : c.out_fd;
  std::string& partial = is_err ? c.err_partial : c.out_partial;
  if (fd < 0) return;
  const std::string prefix = "[" + std::to_string(c.rank) + "] ";
  char chunk[16384];
  bool eof = false;
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      eof = n == 0 || errno != EAGAIN;
      break;
    }
    partial.append(chunk, static_cast<size_t>(n));
    std::string lines;
    size_t start = 0, end;
    while ((end = partial.find('\n', start)) != std::string::npos ||
           partial.size() - start > kMaxForwardedLine) {
      if (end == std::string::npos) end = start + kMaxForwardedLine;
      lines += prefix;
      lines.append(partial, start, end - start);
      lines += '\n';
      start = partial[end] == '\n' ? end + 1 : end;
    }
    partial.erase(0, start);
    write_all(is_err ? STDERR_FILENO : STDOUT_FILENO, lines);
  }
  if (eof || closing) {
    if (!partial.empty()) write_all(is_err ? STDERR_FILENO : STDOUT_FILENO, prefix + partial + "\n");
    partial.clear();
    ::close(fd);
    fd = -1;
  }
}

// A process that dies without closing its libfabric shm endpoint leaves
// its region in /dev/shm: carflow's are named cf_<pid>_<random>
// (transports/ofi), libfabric's default <pid>:<ep>:<n>. The launcher knows
// which pids were its children: it clears theirs once they are gone.
void remove_shm_regions(pid_t pid) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return;
  const std::string ours = "cf_" + std::to_string(pid) + "_", default_name = std::to_string(pid) + ":";
  while (const dirent* e = ::readdir(dir)) {
    const std::string_view name(e->d_name);
    if (name.starts_with(ours) || name.starts_with(default_name)) ::unlinkat(::dirfd(dir), e->d_name, 0);
  }
  ::closedir(dir);
}

void Launcher::child_exited(Child& c, int status) {
  c.running = false;
  --running_;
  remove_shm_regions(c.pid);
  forward_output(c, false, false);  // its last words come before the verdict
  forward_output(c, true, false);
  std::string how;
  int code = 0;
  if (WIFSIGNALED(status)) {
    code = 128 + WTERMSIG(status);
    how = "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
          strsignal(WTERMSIG(status)) + ")";
  } else {
    code = WEXITSTATUS(status);
    if (code != 0) how = "exited with status " + std::to_string(code);
    else if (!store_.said_bye(c.rank)) how = "exited with status 0 without cf_finalize";
  }
  if (code != 0 && !first_failure_) first_failure_ = code;
  if (how.empty()) return;
  lost_without_status_ |= code == 0;
  say("rank " + std::to_string(c.rank) + " (pid " + std::to_string(c.pid) + ") " + how);
  std::vector<Outgoing> out;
  const std::string notice = "LOST " + std::to_string(c.rank) + " " +
                             bootstrap_protocol::encode_words(how);
  for (const auto& [serial, conn] : connections_) {
    if (!o_.lost_notices) break;
    if (conn.session.rank >= 0 && static_cast<uint32_t>(conn.session.rank) != c.rank) out.push_back({serial, notice});
  }
  store_.fail_waiters("rank " + std::to_string(c.rank) + " was lost: " + how, &out);
  send(out);
  start_grace();
}

// A rank that cannot go on says why (LEAVE) and lives on to end cleanly,
// while the others hear it leave through their liveness links: cfrun only
// names it, as it names a rank that died.
void Launcher::report_departures() {
  for (const StoreServer::Departure& d : store_.take_departures()) {
    say("rank " + std::to_string(d.rank) + " (pid " + std::to_string(children_[d.rank].pid) + ") " + d.why);
  }
}

void Launcher::start_grace() {
  if (teardown_) return;
  teardown_ = true;
  grace_until_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(o_.exit_timeout_s));
}

void Launcher::check_deadlines() {
  const auto now = Clock::now();
  close_unproven(now);
  if (timeout_at_ && now >= *timeout_at_) {
    timeout_at_.reset();
    timed_out_ = true;
    say("timeout after " + seconds_text(o_.timeout_s) + " s");
    teardown_ = true;
    if (!kill_at_) grace_until_ = now;  // no grace: terminate now (unless already done)
  }
  if (grace_until_ && now >= *grace_until_) {
    grace_until_.reset();
    signal_children(SIGTERM);
    kill_at_ = now + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(kKillAfterTermSeconds));
  }
  if (kill_at_ && now >= *kill_at_) {
    kill_at_.reset();
    signal_children(SIGKILL);
  }
}

void Launcher::signal_children(int sig) {
  for (const Child& c : children_) {
    if (!c.running) continue;
    if (::kill(-c.pid, sig) != 0) ::kill(c.pid, sig);  // the child may have left its group
  }
}

int launch(int argc, char** argv) {
  LaunchOptions options;
  std::string error;
  if (!parse_args(argc, argv, &options, &error)) {
    write_all(STDERR_FILENO, "cfrun: " + error + "\n" + kUsage);
    return 2;
  }
  if (options.help) {
    write_all(STDOUT_FILENO, kUsage);
    return 0;
  }
  std::string secret;
  if (!job_auth::new_secret(&secret, &error)) {
    write_all(STDERR_FILENO, "cfrun: cannot make the job secret: " + error + "\n");
    return 1;
  }
  return Launcher(std::move(options), std::move(secret)).run();
}

}  // namespace
}  // namespace carflow

int main(int argc, char** argv) { return carflow::launch(argc, argv); }
