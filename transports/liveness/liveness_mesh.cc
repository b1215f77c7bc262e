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
#include <cstdio>
#include <cstring>

#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace carflow {
namespace {

namespace auth = job_auth;

enum FrameType : uint32_t {
  kHello = 0x4c560001,
  kBye = 0x4c560002,
  kLost = 0x4c560003,
  kChallenge = 0x4c560004,
  kProof = 0x4c560005,
  kClockAsk = 0x4c560006,
  kClockTell = 0x4c560007,
};
constexpr size_t kHeaderBytes = 20;  // type, rank, value, text length
// An accepted connection must prove the key within the peer timeout's
// keepalive budget, at least this: on a lossy network a connection whose
// SYN was retransmitted resends lost data only after 3 s (RFC 6298, 5.7),
// so a shorter fixed wait refuses the job's own nodes.
constexpr int kMinHelloWaitMs = 2000;
constexpr size_t kMaxUnproven = 64;  // held at once; beyond, the oldest goes
constexpr int kSendRetries = 20;     // x 50 ms: a frame that cannot leave is dropped

using Clock = std::chrono::steady_clock;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// The kernel's boot id: two processes that read the same one share
// CLOCK_MONOTONIC, whatever their network namespace.
std::string read_boot_id() {
  char buf[64] = {0};
  FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "r");
  if (f == nullptr) return "";
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  std::string id(buf, n);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id.find(' ') == std::string::npos ? id : "";
}

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

// "IP:PORT/KEY" -> its parts; false on anything else.
bool parse_address(const std::string& text, sockaddr_in* addr, std::string* key) {
  const size_t colon = text.rfind(':'), slash = text.rfind('/');
  if (colon == std::string::npos || slash == std::string::npos || slash < colon) return false;
  *addr = {};
  addr->sin_family = AF_INET;
  if (inet_pton(AF_INET, text.substr(0, colon).c_str(), &addr->sin_addr) != 1) return false;
  char* end = nullptr;
  const unsigned long port = std::strtoul(text.c_str() + colon + 1, &end, 10);
  if (end != text.c_str() + slash || port == 0 || port > 65535) return false;
  addr->sin_port = htons(static_cast<uint16_t>(port));
  *key = text.substr(slash + 1);
  return !key->empty();
}

// Names the link in its proofs, so one link's proof is no other's.
std::string link_context(uint32_t connector, uint32_t acceptor) {
  return std::to_string(connector) + ">" + std::to_string(acceptor);
}

// Sends all of `bytes` on a non-blocking socket, waiting a little for room.
bool send_bytes(int fd, const std::string& bytes) {
  size_t sent = 0;
  for (int tries = 0; sent < bytes.size() && tries < kSendRetries;) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{fd, POLLOUT, 0};
      ::poll(&p, 1, 50);
      ++tries;
    } else {
      return false;
    }
  }
  return sent == bytes.size();
}

// Appends what the socket holds (at most `cap` bytes in all); false at its
// end or on an error.
bool read_available(int fd, std::string* inbox, size_t cap) {
  char buf[256];
  while (inbox->size() < cap) {
    const ssize_t n = ::recv(fd, buf, std::min(sizeof buf, cap - inbox->size()), MSG_DONTWAIT);
    if (n > 0) inbox->append(buf, static_cast<size_t>(n));
    else if (n < 0 && errno == EINTR) continue;
    else return n < 0 && errno == EAGAIN;
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

// A peer's account of a loss, fit to print: its words are untrusted, so
// control bytes become '?', and a LOST frame without words still says who.
std::string lost_reason(const std::string& text, uint32_t lost, uint32_t told_by) {
  std::string how;
  for (char c : text) how += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  if (how.empty()) how = "lost, with no reason given";
  if (lost != told_by) how += "; reported by node " + std::to_string(told_by);
  return how;
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
                                                   uint64_t peer_timeout_ms, std::string* error,
                                                   std::string job_key) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  const int wake = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  socklen_t len = sizeof addr;
  if (fd < 0 || wake < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      // Room for strangers too: they must not keep real peers out of the queue.
      ::listen(fd, static_cast<int>(std::min<uint32_t>(nodes, 4096) + kMaxUnproven)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    *error = std::string("liveness: cannot open a listening TCP socket: ") + std::strerror(errno);
    if (fd >= 0) ::close(fd);
    if (wake >= 0) ::close(wake);
    return nullptr;
  }
  const bool key_given = !job_key.empty();
  if (!key_given && !random_bytes(auth::kSecretBytes, &job_key, error)) {
    *error = "liveness: " + *error;
    ::close(fd);
    ::close(wake);
    return nullptr;
  }
  std::unique_ptr<LivenessMesh> mesh(new LivenessMesh(fd, wake, rank, nodes, advertised_ip, std::move(job_key),
                                                      key_given, KeepaliveTiming::from_peer_timeout(peer_timeout_ms)));
  mesh->port_ = ntohs(addr.sin_port);
  return mesh;
}

LivenessMesh::LivenessMesh(int listen_fd, int wake_fd, uint32_t rank, uint32_t nodes, std::string ip,
                           std::string key, bool key_given, KeepaliveTiming timing)
    : wake_fd_(wake_fd), listen_fd_(listen_fd), rank_(rank), nodes_(nodes), ip_(std::move(ip)),
      key_(std::move(key)), key_given_(key_given), timing_(timing), peers_(nodes), boot_id_(read_boot_id()) {
  if (rank == 0) clock_.same_clock = true;
}

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
  return ip_ + ":" + std::to_string(port_) + "/" + (key_given_ ? std::string("-") : hex_encode(key_));
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
  std::string key_text, node0_key;
  if (addresses.size() != nodes_ || !parse_address(addresses[0], &addr, &key_text) ||
      (!key_given_ && (!hex_decode(key_text, &node0_key) || node0_key.size() != auth::kSecretBytes))) {
    *error = "liveness: node 0 published a malformed address";
    return false;
  }
  if (!key_given_) key_ = node0_key;
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  // Connects complete in the peers' listen backlogs, so nobody waits for a
  // peer that is itself still connecting; then every handshake runs at once.
  for (uint32_t n = rank_ + 1; n < nodes_; ++n) {
    if (!connect_higher(n, addresses[n], remaining_ms(deadline), error)) return false;
  }
  const bool ok = handshake(remaining_ms(deadline), error);
  ::close(listen_fd_);  // the mesh stands: nobody else may join
  listen_fd_ = -1;
  if (refused_ > 0) {
    std::fprintf(stderr, "carflow: liveness node %u: refused %llu connection(s) that did not prove the job key\n",
                 rank_, static_cast<unsigned long long>(refused_));
  }
  return ok;
}

bool LivenessMesh::connect_higher(uint32_t node, const std::string& address, int timeout_ms, std::string* error) {
  sockaddr_in addr{};
  std::string ignored;
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
  std::string random_error;
  if (!random_bytes(auth::kNonceBytes, &peers_[node].nonce, &random_error) ||
      !send_frame(node, kHello, rank_, 0, peers_[node].nonce)) {
    *error = who + " at " + address + ": cannot send HELLO " + random_error;
    return false;
  }
  return true;  // live once its CHALLENGE proves the key (check_higher)
}

// An accepted connection during its handshake: HELLO (rank, nonce) due by
// hello_by, then our CHALLENGE, then its PROOF.
struct LivenessMesh::Unproven {
  int fd;
  Clock::time_point hello_by;
  std::string inbox;
  uint32_t rank = UINT32_MAX;  // set by its HELLO
  std::string nonce, our_nonce;
};

// Until every lower rank's connection proved the key and every higher
// rank answered our HELLO with a proof of it. A connection that does not
// prove it (wrong, replayed, garbage, silent, a rank taken or not lower)
// is closed and counted, and the wait goes on; a higher rank that fails
// ours ends the mesh with an error, since its address came from the store.
bool LivenessMesh::handshake(int timeout_ms, std::string* error) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  std::vector<Unproven> unproven;
  auto lower_missing = [&] {
    uint32_t m = 0;
    for (uint32_t n = 0; n < rank_; ++n) m += peers_[n].live ? 0 : 1;
    return m;
  };
  auto higher_missing = [&] {
    uint32_t m = 0;
    for (uint32_t n = rank_ + 1; n < nodes_; ++n) m += peers_[n].live ? 0 : 1;
    return m;
  };
  auto refuse = [&](size_t i) {
    ::close(unproven[i].fd);
    unproven.erase(unproven.begin() + static_cast<std::ptrdiff_t>(i));
    ++refused_;
  };
  while (lower_missing() > 0 || higher_missing() > 0) {
    std::vector<pollfd> fds = {{lower_missing() > 0 ? listen_fd_ : -1, POLLIN, 0}};
    auto wake_at = deadline;
    for (const Unproven& u : unproven) {
      fds.push_back({u.fd, POLLIN, 0});
      wake_at = std::min(wake_at, u.hello_by);
    }
    for (uint32_t n = rank_ + 1; n < nodes_; ++n) fds.push_back({peers_[n].live ? -1 : peers_[n].fd, POLLIN, 0});
    if (Clock::now() >= deadline) {
      *error = "liveness: " + std::to_string(lower_missing()) + " lower and " + std::to_string(higher_missing()) +
               " higher node(s) did not complete the handshake in time";
      for (size_t i = unproven.size(); i-- > 0;) refuse(i);
      return false;
    }
    if (::poll(fds.data(), fds.size(), remaining_ms(wake_at)) < 0) continue;  // EINTR
    for (uint32_t n = rank_ + 1; n < nodes_; ++n) {
      if (fds[1 + unproven.size() + (n - rank_ - 1)].revents != 0 && !check_higher(n, error)) return false;
    }
    for (size_t i = unproven.size(); i-- > 0;) {
      if ((fds[1 + i].revents != 0 && !answer_lower(unproven[i])) ||
          (unproven[i].rank == UINT32_MAX - 1) || Clock::now() >= unproven[i].hello_by) {
        if (unproven[i].rank == UINT32_MAX - 1) {  // proven: now a peer's link
          unproven.erase(unproven.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          refuse(i);
        }
      }
    }
    if (fds[0].revents != 0) {
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      const auto hello_wait = std::chrono::milliseconds(std::max(kMinHelloWaitMs, timing_.detect_s() * 1000));
      if (fd >= 0) {
        Unproven u;
        u.fd = fd;
        u.hello_by = std::min(deadline, Clock::now() + hello_wait);
        unproven.push_back(std::move(u));
      }
      if (unproven.size() > kMaxUnproven) refuse(0);
    }
  }
  for (size_t i = unproven.size(); i-- > 0;) refuse(i);
  return true;
}

// The acceptor's side of one connection; false: refuse it. Once it proved
// the key, its fd becomes the peer's link and u.rank is set to UINT32_MAX - 1.
bool LivenessMesh::answer_lower(Unproven& u) {
  if (!read_available(u.fd, &u.inbox, kHeaderBytes + auth::kNonceBytes)) return false;
  if (u.inbox.size() < kHeaderBytes) return true;
  const Frame f = decode_header(u.inbox.data());
  const bool hello = u.our_nonce.empty();
  if (f.type != (hello ? kHello : kProof) || f.text_bytes != (hello ? auth::kNonceBytes : auth::kProofBytes) ||
      (hello ? f.rank >= rank_ || peers_[f.rank].fd >= 0 : f.rank != u.rank)) {
    return false;
  }
  if (u.inbox.size() < kHeaderBytes + f.text_bytes) return true;
  const std::string text = u.inbox.substr(kHeaderBytes, f.text_bytes);
  u.inbox.erase(0, kHeaderBytes + f.text_bytes);
  const std::string context = link_context(f.rank, rank_);
  if (hello) {
    std::string random_error;
    u.rank = f.rank;
    u.nonce = text;
    if (!random_bytes(auth::kNonceBytes, &u.our_nonce, &random_error)) return false;
    const std::string proof = auth::proof(key_, auth::kAcceptorRole, context, u.nonce, u.our_nonce);
    return send_bytes(u.fd, encode_frame(kChallenge, rank_, 0, u.our_nonce + proof)) && answer_lower(u);
  }
  if (!auth::verify(text, key_, auth::kConnectorRole, context, u.nonce, u.our_nonce) || peers_[u.rank].fd >= 0) {
    return false;
  }
  set_socket_options(u.fd);
  Peer& peer = peers_[u.rank];
  peer.fd = u.fd;
  peer.inbox = std::move(u.inbox);  // a BYE or LOST may already follow
  peer.live = true;
  u.rank = UINT32_MAX - 1;
  return true;
}

// The connector's side: the higher node's CHALLENGE must prove the key for
// our nonce; then our PROOF. false with *error if it does not.
bool LivenessMesh::check_higher(uint32_t node, std::string* error) {
  Peer& peer = peers_[node];
  const std::string who = "liveness: node " + std::to_string(node);
  if (!read_available(peer.fd, &peer.inbox, kHeaderBytes + auth::kNonceBytes + auth::kProofBytes)) {
    *error = who + " closed its link during the handshake";
    return false;
  }
  if (peer.inbox.size() < kHeaderBytes + auth::kNonceBytes + auth::kProofBytes) return true;
  const Frame f = decode_header(peer.inbox.data());
  const std::string their_nonce = peer.inbox.substr(kHeaderBytes, auth::kNonceBytes);
  const std::string proof = peer.inbox.substr(kHeaderBytes + auth::kNonceBytes, auth::kProofBytes);
  const std::string context = link_context(rank_, node);
  if (f.type != kChallenge || f.rank != node || f.text_bytes != auth::kNonceBytes + auth::kProofBytes ||
      !auth::verify(proof, key_, auth::kAcceptorRole, context, peer.nonce, their_nonce)) {
    *error = who + " did not prove it knows the job key: not this job's process";
    return false;
  }
  peer.inbox.clear();
  if (!send_frame(node, kProof, rank_, 0, auth::proof(key_, auth::kConnectorRole, context, peer.nonce, their_nonce))) {
    *error = who + ": cannot send PROOF";
    return false;
  }
  peer.live = true;
  return true;
}

bool LivenessMesh::send_frame(uint32_t node, uint32_t type, uint32_t rank, uint64_t value, const std::string& text) {
  const std::string bytes = encode_frame(type, rank, value, text.substr(0, kMaxTextBytes));
  std::lock_guard<std::mutex> lock(send_mu_);
  return send_bytes(peers_[node].fd, bytes);
}

void LivenessMesh::watch(LostCallback on_lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_lost_ = std::move(on_lost);
  }
  poller_ = std::thread([this] { poll_loop(); });
  if (rank_ != 0) ask_clock();
}

// One round trip at a time: the poll thread sends the next ask when the
// answer to this one arrives.
bool LivenessMesh::ask_clock() {
  uint64_t now;
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    now = clock_asked_at_ = monotonic_ns();
  }
  return send_frame(0, kClockAsk, rank_, now, "");
}

void LivenessMesh::clock_told(uint64_t node0_now, const std::string& text) {
  const uint64_t now = monotonic_ns();
  const size_t space = text.find(' ');
  if (space == std::string::npos || space == 0 || space > 20) return;
  uint64_t asked = 0;
  for (size_t i = 0; i < space; ++i) {
    if (text[i] < '0' || text[i] > '9') return;
    asked = asked * 10 + static_cast<uint64_t>(text[i] - '0');
  }
  bool again;
  {
    std::lock_guard<std::mutex> lock(clock_mu_);
    // Only the answer to the outstanding ask counts (not a stale or made-up one).
    if (asked == 0 || asked != clock_asked_at_ || now < asked) return;
    clock_asked_at_ = 0;
    const uint64_t round_trip = now - asked;
    if (clock_.samples == 0 || round_trip / 2 < clock_.error_ns) {
      clock_.error_ns = round_trip / 2;
      clock_.offset_ns = static_cast<int64_t>(node0_now - (asked + round_trip / 2));
    }
    clock_.same_clock = !boot_id_.empty() && text.compare(space + 1, std::string::npos, boot_id_) == 0;
    ++clock_.samples;
    again = clock_.samples < kClockSamples;
  }
  if (again) ask_clock();
}

ClockEstimate LivenessMesh::clock_estimate() const {
  std::lock_guard<std::mutex> lock(clock_mu_);
  return clock_;
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
      report_lost(f.rank, lost_reason(text, f.rank, node));
    } else if (f.type == kClockAsk && rank_ == 0) {
      send_frame(node, kClockTell, rank_, monotonic_ns(), std::to_string(f.value) + " " + boot_id_);
    } else if (f.type == kClockTell && node == 0) {
      clock_told(f.value, text);
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

void LivenessMesh::sever(uint32_t node) {
  std::lock_guard<std::mutex> lock(mu_);
  if (node < peers_.size() && node != rank_ && peers_[node].fd >= 0 && peers_[node].live) {
    ::shutdown(peers_[node].fd, SHUT_RDWR);  // the fd stays open until the destructor
  }
}

void LivenessMesh::withdraw(const std::string& how) {
  std::vector<uint32_t> live;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!reporting_) return;  // said goodbye, or withdrew already
    reporting_ = false;
    for (uint32_t n = 0; n < nodes_; ++n) {
      if (n != rank_ && peers_[n].live) live.push_back(n);
    }
  }
  for (uint32_t n : live) send_frame(n, kLost, rank_, 0, how);
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
