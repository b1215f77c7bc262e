// Strangers at a job's doors: TCP clients that do not know the job secret
// (or misuse it) at cfrun's store and at a liveness listener, each attack
// checked with doctest. store_auth_test runs them on loopback before a slow
// rank joins; job_stranger runs them from another network namespace while
// a job forms (multiproc_test).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace strangers {

namespace auth = carflow::job_auth;
using Clock = std::chrono::steady_clock;

constexpr int kWaitMs = 20000;
const std::string kRefusal = "ERR 0 no proof of the job secret";

inline std::string nonce() {
  std::string n, error;
  REQUIRE(carflow::random_bytes(auth::kNonceBytes, &n, &error));
  return n;
}

// A TCP connection to IPV4:PORT.
inline int tcp_connect(const std::string& address) {
  const size_t colon = address.rfind(':');
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(std::atoi(address.c_str() + colon + 1)));
  REQUIRE(::inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) == 1);
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE_MESSAGE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0, address);
  return fd;
}

// A stranger's connection, line by line (the store's protocol) or raw.
class Stranger {
 public:
  explicit Stranger(const std::string& address) : fd_(tcp_connect(address)) {}
  ~Stranger() { ::close(fd_); }
  Stranger(const Stranger&) = delete;
  Stranger& operator=(const Stranger&) = delete;
  // false once the other end closed the connection.
  bool send_text(const std::string& text) {
    return ::send(fd_, text.data(), text.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(text.size());
  }
  // Sends 64 KiB chunks of `fill` until `limit` bytes or the other end
  // closes; the bytes that went.
  uint64_t flood(uint64_t limit, char fill) {
    const std::string chunk(1 << 16, fill);
    uint64_t sent = 0;
    while (sent < limit && send_text(chunk)) sent += chunk.size();
    return sent;
  }
  // The next line, or "EOF" once the other end closed the connection.
  std::string read_line() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    for (;;) {
      const size_t nl = in_.find('\n');
      if (nl != std::string::npos) {
        std::string line = in_.substr(0, nl);
        in_.erase(0, nl + 1);
        return line;
      }
      if (!receive(deadline)) return "EOF";
    }
  }
  // Fails unless the other end closes the connection within kWaitMs (what
  // it sends first is read and dropped).
  void expect_closed() {
    const auto deadline = Clock::now() + std::chrono::milliseconds(kWaitMs);
    while (receive(deadline)) in_.clear();
  }
  // The store's AUTH answer to a fresh nonce -> (client nonce, store nonce, store proof).
  void challenge(std::string* client_nonce, std::string* store_nonce, std::string* store_proof) {
    *client_nonce = nonce();
    REQUIRE(send_text("AUTH " + carflow::hex_encode(*client_nonce) + "\n"));
    const std::string line = read_line();
    REQUIRE(line.rfind("AUTH ", 0) == 0);
    const size_t space = line.find(' ', 5);
    REQUIRE(carflow::hex_decode(line.substr(5, space - 5), store_nonce));
    REQUIRE(carflow::hex_decode(line.substr(space + 1), store_proof));
  }

 private:
  // Appends what arrives before `deadline`; false at the end of the stream.
  bool receive(Clock::time_point deadline) {
    pollfd p{fd_, POLLIN, 0};
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    REQUIRE_MESSAGE(::poll(&p, 1, static_cast<int>(std::max<int64_t>(left, 0))) == 1, "nothing within ", kWaitMs, " ms");
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
  int fd_;
  std::string in_;
};

// What the store does with a stranger that sends `text`: its reply lines
// up to the end of the connection.
inline std::vector<std::string> replies_to(const std::string& kvs, const std::string& text) {
  Stranger s(kvs);
  s.send_text(text);
  std::vector<std::string> lines;
  for (std::string line = s.read_line(); line != "EOF"; line = s.read_line()) lines.push_back(line);
  return lines;
}

// Every attack on cfrun's store at `kvs` of the job whose secret is
// `secret` (raw bytes; the replay needs one exchange that passed): no
// secret, a wrong one, a replayed exchange, garbage, a line that never
// ends (1 GiB). Each must be refused; returns how many connections the
// store should have counted.
inline int attack_store(const std::string& kvs, const std::string& secret) {
  int refused = 0;
  // No secret: rank 1's place, rank 0's key, a forged key.
  for (const std::string first : {"HELLO 1 1 2", "GET 1 rank/0", "PUT 1 rank/1 value-of-forged"}) {
    INFO(first);
    CHECK(replies_to(kvs, first + "\n") == std::vector<std::string>{kRefusal});
    ++refused;
  }
  // A wrong secret: the store's proof does not check, and ours is refused.
  {
    Stranger s(kvs);
    std::string client_nonce, store_nonce, store_proof;
    s.challenge(&client_nonce, &store_nonce, &store_proof);
    const std::string wrong(auth::kSecretBytes, '\x13');
    CHECK_FALSE(auth::verify(store_proof, wrong, auth::kStoreRole, "", client_nonce, store_nonce));
    CHECK(auth::verify(store_proof, secret, auth::kStoreRole, "", client_nonce, store_nonce));
    s.send_text("PROOF " + carflow::hex_encode(auth::proof(wrong, auth::kClientRole, "", client_nonce, store_nonce)) +
                "\nHELLO 1 1 2\n");
    CHECK(s.read_line() == kRefusal);
    CHECK(s.read_line() == "EOF");
    ++refused;
  }
  // A recorded exchange that passed, replayed on a new connection.
  {
    std::string client_nonce, store_nonce, store_proof;
    Stranger recorded(kvs);
    recorded.challenge(&client_nonce, &store_nonce, &store_proof);
    const std::string auth_line = "AUTH " + carflow::hex_encode(client_nonce) + "\n";
    const std::string proof_line =
        "PROOF " + carflow::hex_encode(auth::proof(secret, auth::kClientRole, "", client_nonce, store_nonce)) + "\n";
    recorded.send_text(proof_line);
    REQUIRE(recorded.read_line() == "OK 0");
    const std::vector<std::string> replay = replies_to(kvs, auth_line + proof_line + "HELLO 1 1 2\n");
    REQUIRE(replay.size() == 2);
    CHECK(replay[0].rfind("AUTH ", 0) == 0);
    CHECK(replay[0] != "AUTH " + carflow::hex_encode(store_nonce) + " " + carflow::hex_encode(store_proof));
    CHECK(replay[1] == kRefusal);
    ++refused;
  }
  // Garbage, and a line that never ends: closed after a few hundred bytes.
  CHECK(replies_to(kvs, std::string("\x00\xff\x01 \r\n\n", 7) + std::string(100, '\x7f') + "\n") ==
        std::vector<std::string>{kRefusal});
  ++refused;
  {
    Stranger s(kvs);
    const uint64_t sent = s.flood(uint64_t{1} << 30, 'A');
    INFO("bytes sent before the store closed the connection: ", sent);
    CHECK(sent < (uint64_t{64} << 20));
    ++refused;
  }
  return refused;
}

// A liveness frame (transports/liveness/liveness_mesh.h, "Wire format")
// whose header announces `text_bytes` of text, followed by `text`.
inline std::string liveness_frame(uint32_t type, uint32_t rank, const std::string& text, uint32_t text_bytes) {
  const uint32_t words[5] = {htonl(type), htonl(rank), 0, 0, htonl(text_bytes)};
  return std::string(reinterpret_cast<const char*>(words), sizeof words) + text;
}
constexpr uint32_t kLivenessHello = 0x4c560001;
constexpr uint32_t kLivenessProof = 0x4c560005;

// Attacks on a liveness listener at `address` (a node that still waits
// for lower ranks): garbage, a HELLO claiming rank 0 answered with a
// proof under a wrong key, a HELLO from a rank the job does not have, and
// a frame announcing 1 GiB of text. The node must close each at once (a
// silent connection waits out the peer timeout: liveness_test has it);
// returns how many it should have counted.
inline int attack_liveness(const std::string& address) {
  const std::string mine = nonce(), wrong_key(auth::kSecretBytes, '\x44');
  const std::string wrong_proof = auth::proof(wrong_key, auth::kConnectorRole, "", mine, nonce());
  const std::pair<const char*, std::string> attacks[] = {
      {"garbage", std::string(100000, '\xee')},
      {"a proof under a wrong key",
       liveness_frame(kLivenessHello, 0, mine, auth::kNonceBytes) +
           liveness_frame(kLivenessProof, 0, wrong_proof, static_cast<uint32_t>(wrong_proof.size()))},
      {"a rank the job does not have", liveness_frame(kLivenessHello, 7, mine, auth::kNonceBytes)},
  };
  int refused = 0;
  for (const auto& [what, bytes] : attacks) {
    INFO(what);
    Stranger s(address);
    s.send_text(bytes);
    s.expect_closed();
    ++refused;
  }
  {
    Stranger s(address);
    s.send_text(liveness_frame(kLivenessHello, 0, "", 1u << 30));
    const uint64_t sent = s.flood(uint64_t{1} << 30, 'B');
    INFO("a frame announcing 1 GiB of text: bytes sent before the node closed the connection: ", sent);
    CHECK(sent < (uint64_t{64} << 20));
    ++refused;
  }
  return refused;
}

}  // namespace strangers
