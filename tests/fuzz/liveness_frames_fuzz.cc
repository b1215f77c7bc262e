// The liveness mesh (transports/liveness/liveness_mesh.h) reading what a
// peer sends it. The first byte picks the door:
//   even  the rest is node 0's published address ("IP:PORT/KEY"), given to
//         connect() of a node 1 that has no key of its own: the address
//         and the hex key are parsed; a well-formed one leads to a
//         connect() that gives up after 1 ms, nobody being there.
//   odd   node 0 is played by hand: it proves the key (the handshake is
//         not what is fuzzed here: job_auth is), reads node 1's first
//         CLOCK_ASK, then sends the rest as frames, every "$ASK" in it
//         replaced by that ask's value in decimal (so a well-formed
//         CLOCK_TELL is within reach), and closes.
// The mesh must not crash, report a peer lost at most once, and keep its
// clock estimate within its rules (at most kClockSamples samples, a bound
// no longer than the time since the asking began).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"
#include "transports/liveness/liveness_mesh.h"

namespace {

using carflow::LivenessMesh;
using carflow_fuzz::check;
namespace auth = carflow::job_auth;

const std::string kKey(auth::kSecretBytes, '\x4b');
constexpr uint32_t kHello = 0x4c560001, kProof = 0x4c560005, kClockAsk = 0x4c560006;

std::string frame(uint32_t type, uint32_t rank, const std::string& text) {
  const uint32_t words[5] = {htonl(type), htonl(rank), 0, 0, htonl(static_cast<uint32_t>(text.size()))};
  return std::string(reinterpret_cast<const char*>(words), sizeof words) + text;
}

bool send_all(int fd, const std::string& bytes) {
  size_t at = 0;
  while (at < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (n <= 0) return false;
    at += static_cast<size_t>(n);
  }
  return true;
}

// n bytes, or "" when the link ends first (a 5 s limit: never a hang).
std::string read_n(int fd, size_t n) {
  const timeval limit{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  std::string got(n, '\0');
  return ::recv(fd, got.data(), n, MSG_WAITALL) == static_cast<ssize_t>(n) ? got : "";
}

int connect_to(const std::string& address) {
  const uint16_t port = static_cast<uint16_t>(std::stoul(address.substr(address.find(':') + 1)));
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void address_door(const std::string& text) {
  std::string error;
  std::unique_ptr<LivenessMesh> mesh = LivenessMesh::listen(1, 2, "127.0.0.1", 2000, &error);
  check(mesh != nullptr, "listen");
  const bool ok = mesh->connect({text, mesh->address()}, 1, &error);
  check(!ok, "connect() succeeded with nobody as node 0");
  check(!error.empty(), "connect() failed without saying why");
}

void frames_door(const std::string& body) {
  std::string error;
  std::unique_ptr<LivenessMesh> mesh = LivenessMesh::listen(1, 2, "127.0.0.1", 2000, &error, kKey);
  check(mesh != nullptr, "listen");
  const std::vector<std::string> addresses = {"127.0.0.1:1/-", mesh->address()};
  bool joined = false;
  std::thread joiner([&] { joined = mesh->connect(addresses, 5000, &error); });
  // Node 0's side of the handshake, as its mesh does it. A machine out of
  // ports or too busy to finish it in time (the mesh waits 2 s for a
  // HELLO) skips the input; the handshake is liveness_test's to check.
  const int fd = connect_to(mesh->address());
  if (fd < 0) {
    joiner.join();
    return;
  }
  std::string nonce, random_error;
  check(carflow::random_bytes(auth::kNonceBytes, &nonce, &random_error), "random nonce");
  check(send_all(fd, frame(kHello, 0, nonce)), "send HELLO");
  const std::string challenge = read_n(fd, 20 + auth::kNonceBytes + auth::kProofBytes);
  if (!challenge.empty()) {
    const std::string theirs = challenge.substr(20, auth::kNonceBytes);
    send_all(fd, frame(kProof, 0, auth::proof(kKey, auth::kConnectorRole, "0>1", nonce, theirs)));
  }
  joiner.join();
  if (!joined) {
    ::close(fd);
    return;
  }

  std::atomic<int> losses{0};
  const auto watched = std::chrono::steady_clock::now();
  mesh->watch([&](uint32_t node, const std::string& how) {
    check(node == 0, "a loss of a node that does not exist");
    check(!how.empty(), "a loss without how");
    losses.fetch_add(1);
  });
  const std::string ask = read_n(fd, 20);
  check(ask.size() == 20, "no CLOCK_ASK from node 1 within 5 s");
  uint32_t type;
  std::memcpy(&type, ask.data(), 4);
  check(ntohl(type) == kClockAsk, "node 1's first frame is not CLOCK_ASK");
  uint32_t hi, lo;
  std::memcpy(&hi, ask.data() + 8, 4);
  std::memcpy(&lo, ask.data() + 12, 4);
  const std::string asked = std::to_string(uint64_t{ntohl(hi)} << 32 | ntohl(lo));
  std::string sent = body;
  for (size_t at = sent.find("$ASK"); at != std::string::npos; at = sent.find("$ASK", at + asked.size())) {
    sent.replace(at, 4, asked);
  }
  send_all(fd, sent);  // the mesh may close the link part way: a malformed frame
  ::shutdown(fd, SHUT_WR);
  mesh->goodbye(10000);  // returns once the link ended (our close) or said BYE
  const carflow::ClockEstimate clock = mesh->clock_estimate();
  check(clock.samples <= LivenessMesh::kClockSamples, "more clock samples than asked for");
  check(!clock.same_clock || clock.samples > 0, "same clock without an answer from node 0");
  // Half a round trip that began after watch() and ended by now.
  const auto since_watch = std::chrono::steady_clock::now() - watched;
  check(clock.error_ns <= static_cast<uint64_t>(std::chrono::nanoseconds(since_watch).count()),
        "a clock bound longer than the run");
  check(losses.load() <= 1, "one node lost more than once");
  mesh.reset();
  // Reset rather than close: a million inputs would leave as many
  // connections in TIME_WAIT and run the machine out of ports.
  const linger reset{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof reset);
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] % 2 == 0) {
    address_door(rest);
  } else {
    frames_door(rest);
  }
  return 0;
}
