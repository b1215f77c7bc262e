#include "transports/liveness/liveness_mesh.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <random>

namespace carflow {
namespace {

enum FrameType : uint32_t { kHello = 0x4c560001, kBye = 0x4c560002, kLost = 0x4c560003 };
constexpr size_t kHeaderBytes = 20;  // type, rank, value, text length
constexpr int kHelloWaitMs = 2000;   // an accepted connection must say HELLO by then
constexpr int kSendRetries = 20;     // x 50 ms: a frame that cannot leave is dropped

using Clock = std::chrono::steady_clock;

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return static_cast<int>(std::max<int64_t>(0, left.count()));
}

void put_u32(std::string* out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(v >> shift & 0xff));
}

uint64_t get_be(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = v << 8 | static_cast<unsigned char>(p[i]);
  return v;
}

std::string encode_frame(uint32_t type, uint32_t rank, uint64_t value, const std::string& text) {
  std::string out;
  out.reserve(kHeaderBytes + text.size());
  put_u32(&out, type);
  put_u32(&out, rank);
  put_u32(&out, static_cast<uint32_t>(value >> 32));
  put_u32(&out, static_cast<uint32_t>(value));
  put_u32(&out, static_cast<uint32_t>(text.size()));
  return out + text;
}

struct Frame {
  uint32_t type, rank;
  uint64_t value;
  uint32_t text_bytes;
};

Frame decode_header(const char* p) {
  return {static_cast<uint32_t>(get_be(p, 4)), static_cast<uint32_t>(get_be(p + 4, 4)), get_be(p + 8, 8),
          static_cast<uint32_t>(get_be(p + 16, 4))};
}

// "IP:PORT/NONCE" -> its parts; false on anything else.
bool parse_address(const std::string& text, sockaddr_in* addr, uint64_t* nonce) {
  const size_t colon = text.rfind(':'), slash = text.rfind('/');
  if (colon == std::string::npos || slash == std::string::npos || slash < colon) return false;
  *addr = {};
  addr->sin_family = AF_INET;
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &addr->sin_addr) != 1) return false;
  char* end = nullptr;
  const unsigned long port = std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (end != text.c_str() + slash || port == 0 || port > 65535) return false;
  addr->sin_port = htons(static_cast<uint16_t>(port));
  *nonce = std::strtoull(text.c_str() + slash + 1, &end, 16);
  return *end == '\0' && slash + 1 < text.size();
}

// Reads exactly n bytes from a non-blocking socket before the deadline.
bool read_exactly(int fd, char* buf, size_t n, Clock::time_point deadline) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd, buf + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, remaining_ms(deadline)) <= 0) return false;
    } else {
      return false;
    }
  }
  return true;
}

std::string how_link_failed(int err, const KeepaliveTiming& timing) {
  if (err == ETIMEDOUT) {
    return "no keepalive reply within " + std::to_string(timing.detect_s()) +
           " s: its host is unreachable or the network is cut";
  }
  if (err == ECONNRESET) return "its liveness connection was reset: the process ended";
  if (err == 0) return "its liveness connection closed without goodbye: the process ended";
  return std::string("its liveness connection failed: ") + std::strerror(err);
}

}  // namespace

KeepaliveTiming KeepaliveTiming::from_peer_timeout(uint64_t peer_timeout_ms) {
  constexpr int kMaxProbes = 120;  // the kernel takes at most 127
  KeepaliveTiming t;
  // The kernel's timers fire some ms late: keep 250 ms of the timeout for them.
  const uint64_t usable_ms = peer_timeout_ms > 250 ? peer_timeout_ms - 250 : 0;
  const int budget_s = static_cast<int>(std::clamp<uint64_t>(usable_ms / 1000, 2, 86400));
  t.idle_s = budget_s / 2;
  const int rest_s = budget_s - t.idle_s;
  // A probe a second, so the budget is met exactly (up to 2 x kMaxProbes s).
  t.interval_s = (rest_s + kMaxProbes - 1) / kMaxProbes;
  t.count = (rest_s + t.interval_s - 1) / t.interval_s;
  // With keepalive on, Linux ends the link at the first probe time at which
  // nothing was received for TCP_USER_TIMEOUT: idle + count x interval.
  t.user_timeout_ms = static_cast<unsigned>(t.detect_s()) * 1000;
  return t;
}

std::unique_ptr<LivenessMesh> LivenessMesh::listen(uint32_t rank, uint32_t nodes, const std::string& advertised_ip,
                                                   uint64_t peer_timeout_ms, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (fd < 0 || wake < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(fd, static_cast<int>(std::min<uint32_t>(nodes, 4096))) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("liveness: cannot open a listening TCP socket: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (wake >= 0) ::close(wake);
    return nullptr;
  }
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32 | random()) | 1;
  std::unique_ptr<LivenessMesh> mesh(new LivenessMesh(
      fd, wake, rank, nodes, advertised_ip, nonce, KeepaliveTiming::from_peer_timeout(peer_timeout_ms)));
  mesh->port_ = ntohs(addr.sin_port);
  return mesh;
}

LivenessMesh::LivenessMesh(int listen_fd, int wake_fd, uint32_t rank, uint32_t nodes, std::string ip,
                           uint64_t nonce, KeepaliveTiming timing)
    : wake_fd_(wake_fd), listen_fd_(listen_fd), rank_(rank), nodes_(nodes), ip_(std::move(ip)),
      my_nonce_(nonce), timing_(timing), peers_(nodes) {}

LivenessMesh::~LivenessMesh() {
  stop_.store(true);
  if (poller_.joinable()) {
    const uint64_t one = 1;
    (void)!::write(wake_fd_, &one, sizeof one);
    poller_.join();
  }
  for (Peer& p : peers_) {
    if (p.fd >= 0) ::close(p.fd);
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_fd_);
}

std::string LivenessMesh::address() const {
  char nonce[20];
  std::snprintf(nonce, sizeof nonce, "%" PRIx64, my_nonce_);
  return ip_ + ":" + std::to_string(port_) + "/" + nonce;
}

void LivenessMesh::set_socket_options(int fd) {
  const int on = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &timing_.idle_s, sizeof timing_.idle_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &timing_.interval_s, sizeof timing_.interval_s);
  ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &timing_.count, sizeof timing_.count);
  ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &timing_.user_timeout_ms, sizeof timing_.user_timeout_ms);
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
}

bool LivenessMesh::connect(const std::vector<std::string>& addresses, int timeout_ms, std::string* error) {
  sockaddr_in addr{};
  if (addresses.size() != nodes_ || !parse_address(addresses[0], &addr, &job_nonce_)) {
    *error = "liveness: node 0 published a malformed address";
    return false;
  }
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // Connects complete in the peers' listen backlogs, so nobody waits for a
  // peer that is itself still connecting.
  for (uint32_t n = rank_ + 1; n < nodes_; ++n) {
    if (!connect_higher(n, addresses[n], remaining_ms(deadline), error)) return false;
  }
  const bool ok = accept_lower(remaining_ms(deadline), error);
  ::close(listen_fd_);  // the mesh stands: nobody else may join
  listen_fd_ = -1;
  return ok;
}

bool LivenessMesh::connect_higher(uint32_t node, const std::string& address, int timeout_ms, std::string* error) {
  sockaddr_in addr{};
  uint64_t ignored = 0;
  const std::string who = "liveness: node " + std::to_string(node);
  if (!parse_address(address, &addr, &ignored)) {
    *error = who + " published a malformed address '" + address + "'";
    return false;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = who + ": socket: " + std::strerror(errno);
    return false;
  }
  peers_[node].fd = fd;  // closed by the destructor whatever happens next
  set_socket_options(fd);
  int err = 0;
  socklen_t len = sizeof err;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    pollfd p{fd, POLLOUT, 0};
    if (errno != EINPROGRESS || ::poll(&p, 1, timeout_ms) != 1) err = errno == EINPROGRESS ? ETIMEDOUT : errno;
    else ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  }
  if (err != 0) {
    *error = who + " at " + address + ": cannot connect: " + std::strerror(err);
    return false;
  }
  if (!send_frame(node, kHello, rank_, job_nonce_, "")) {
    *error = who + " at " + address + ": cannot send HELLO";
    return false;
  }
  peers_[node].live = true;
  return true;
}

// Accepts one connection from every lower rank. A connection whose HELLO
// does not carry the job nonce and a new lower rank is closed (a stray or a
// stale process), and the wait goes on.
bool LivenessMesh::accept_lower(int timeout_ms, std::string* error) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  uint32_t missing = rank_;
  while (missing > 0) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, remaining_ms(deadline)) <= 0) {
      *error = "liveness: " + std::to_string(missing) + " lower node(s) did not connect in time";
      return false;
    }
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) continue;
    char header[kHeaderBytes];
    const auto hello_by = std::min(deadline, Clock::now() + std::chrono::milliseconds(kHelloWaitMs));
    Frame f{};
    if (read_exactly(fd, header, sizeof header, hello_by)) f = decode_header(header);
    if (f.type != kHello || f.value != job_nonce_ || f.text_bytes != 0 || f.rank >= rank_ ||
        peers_[f.rank].fd >= 0) {
      ::close(fd);
      continue;
    }
    set_socket_options(fd);
    peers_[f.rank].fd = fd;
    peers_[f.rank].live = true;
    --missing;
  }
  return true;
}

bool LivenessMesh::send_frame(uint32_t node, uint32_t type, uint32_t rank, uint64_t value, const std::string& text) {
  const std::string bytes = encode_frame(type, rank, value, text.substr(0, kMaxTextBytes));
  std::lock_guard<std::mutex> lock(send_mu_);
  size_t sent = 0;
  for (int tries = 0; sent < bytes.size() && tries < kSendRetries;) {
    const ssize_t n = ::send(peers_[node].fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{peers_[node].fd, POLLOUT, 0};
      ::poll(&p, 1, 50);
      ++tries;
    } else {
      return false;
    }
  }
  return sent == bytes.size();
}

void LivenessMesh::watch(LostCallback on_lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_lost_ = std::move(on_lost);
  }
  poller_ = std::thread([this] { poll_loop(); });
}

void LivenessMesh::poll_loop() {
  std::vector<pollfd> fds(nodes_ + 1);
  while (!stop_.load()) {
    fds[0] = {wake_fd_, POLLIN, 0};
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (uint32_t n = 0; n < nodes_; ++n) fds[n + 1] = {peers_[n].live ? peers_[n].fd : -1, POLLIN, 0};
    }
    if (::poll(fds.data(), fds.size(), -1) < 0 && errno != EINTR) return;
    for (uint32_t n = 0; n < nodes_ && !stop_.load(); ++n) {
      if (fds[n + 1].revents != 0) read_peer(n);
    }
  }
}

// Everything the link holds; at its end (or error) the peer is lost unless
// it said BYE first.
void LivenessMesh::read_peer(uint32_t node) {
  Peer& peer = peers_[node];
  char buf[4096];
  for (;;) {
    const ssize_t n = ::recv(peer.fd, buf, sizeof buf, MSG_DONTWAIT);
    if (n > 0) {
      peer.inbox.append(buf, static_cast<size_t>(n));
      if (handle_frames(node)) continue;
    } else if (n < 0 && errno == EINTR) {
      continue;
    } else if (n < 0 && errno == EAGAIN) {
      return;
    }
    // End of stream, a broken link, or a malformed frame.
    const int err = n < 0 ? errno : 0;
    bool said_bye;
    {
      std::lock_guard<std::mutex> lock(mu_);
      peer.live = false;
      said_bye = peer.said_bye;
    }
    changed_.notify_all();
    if (!said_bye) report_lost(node, n > 0 ? "it sent a malformed liveness frame" : how_link_failed(err, timing_));
    return;
  }
}

// Takes the complete frames out of the node's inbox; false on a malformed one.
bool LivenessMesh::handle_frames(uint32_t node) {
  std::string& inbox = peers_[node].inbox;
  size_t at = 0;
  while (inbox.size() - at >= kHeaderBytes) {
    const Frame f = decode_header(inbox.data() + at);
    if (f.text_bytes > kMaxTextBytes) return false;
    if (inbox.size() - at < kHeaderBytes + f.text_bytes) break;
    const std::string text = inbox.substr(at + kHeaderBytes, f.text_bytes);
    at += kHeaderBytes + f.text_bytes;
    if (f.type == kBye) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        peers_[node].said_bye = true;
      }
      changed_.notify_all();
    } else if (f.type == kLost && f.rank < nodes_ && f.rank != rank_) {
      report_lost(f.rank, text + "; reported by node " + std::to_string(node));
    } else if (f.type != kLost) {
      return false;
    }
  }
  inbox.erase(0, at);
  return true;
}

// Once per node: tells every other live peer (a cut that only some links
// see reaches everyone), then the runtime.
void LivenessMesh::report_lost(uint32_t node, const std::string& how) {
  LostCallback on_lost;
  std::vector<uint32_t> relay_to;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Peer& lost = peers_[node];
    if (!reporting_ || lost.reported || lost.said_bye) return;
    lost.reported = true;
    on_lost = on_lost_;
    for (uint32_t n = 0; n < nodes_; ++n) {
      if (n != node && peers_[n].live) relay_to.push_back(n);
    }
  }
  for (uint32_t n : relay_to) send_frame(n, kLost, node, 0, how);
  if (on_lost) on_lost(node, how);
}

void LivenessMesh::goodbye(int timeout_ms) {
  std::vector<uint32_t> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reporting_ = false;
    for (uint32_t n = 0; n < nodes_; ++n) {
      if (peers_[n].live) live.push_back(n);
    }
  }
  for (uint32_t n : live) send_frame(n, kBye, rank_, 0, "");
  if (!poller_.joinable() || timeout_ms <= 0) return;
  // Until every peer said BYE or its link ended: closing earlier could
  // reset a link before the peer read our BYE.
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return std::all_of(live.begin(), live.end(), [&](uint32_t n) { return peers_[n].said_bye || !peers_[n].live; });
  });
}

}  // namespace carflow
