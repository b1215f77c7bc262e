// transports/liveness: meshes of in-process endpoints on loopback. A node
// whose links close without BYE is reported lost, naming it; BYE is never a
// loss; a connection that does not prove the job's key (none, a wrong one,
// a replay, garbage, silence) is refused while the mesh forms; a LOST relay
// names the lost node and who saw it. Network cuts need namespaces: multiproc_test.
#include <arpa/inet.h>
#include <sys/time.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"
#include "transports/liveness/liveness_mesh.h"

namespace carflow {
namespace {

constexpr int kConnectMs = 10000;

struct Report {
  uint32_t observer, lost;
  std::string how;
};

// Every on_lost call of every mesh, in arrival order.
class LostLog {
 public:
  LivenessMesh::LostCallback for_observer(uint32_t observer) {
    return [this, observer](uint32_t lost, const std::string& how) {
      std::lock_guard<std::mutex> lock(mu_);
      reports_.push_back({observer, lost, how});
      changed_.notify_all();
    };
  }
  // All reports once there are at least n (or after 10 s).
  std::vector<Report> wait_for(size_t n) {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, std::chrono::seconds(10), [&] { return reports_.size() >= n; });
    return reports_;
  }
  std::vector<Report> now() {
    std::lock_guard<std::mutex> lock(mu_);
    return reports_;
  }

 private:
  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<Report> reports_;
};

using Meshes = std::vector<std::unique_ptr<LivenessMesh>>;

// Listening meshes for nodes first..nodes-1 (lower ones left to the test).
Meshes listen_all(uint32_t first, uint32_t nodes, std::vector<std::string>* addresses) {
  Meshes meshes(nodes);
  addresses->assign(nodes, "");
  for (uint32_t n = first; n < nodes; ++n) {
    std::string error;
    meshes[n] = LivenessMesh::listen(n, nodes, "127.0.0.1", 2000, &error);
    REQUIRE_MESSAGE(meshes[n] != nullptr, error);
    (*addresses)[n] = meshes[n]->address();
  }
  return meshes;
}

// connect() on every mesh at once (each waits for its lower ranks).
void connect_all(Meshes& meshes, const std::vector<std::string>& addresses, LostLog* log) {
  std::vector<std::thread> threads;
  std::vector<std::string> errors(meshes.size());
  std::vector<int> ok(meshes.size(), 0);
  for (uint32_t n = 0; n < meshes.size(); ++n) {
    if (meshes[n] == nullptr) continue;
    threads.emplace_back([&, n] { ok[n] = meshes[n]->connect(addresses, kConnectMs, &errors[n]); });
  }
  for (std::thread& t : threads) t.join();
  for (uint32_t n = 0; n < meshes.size(); ++n) {
    if (meshes[n] == nullptr) continue;
    CHECK_MESSAGE(ok[n], "node ", n, ": ", errors[n]);
    meshes[n]->watch(log->for_observer(n));
  }
}

int raw_connect(const std::string& address) {
  const uint16_t port = static_cast<uint16_t>(std::stoul(address.substr(address.find(':') + 1)));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  return fd;
}

std::string frame(uint32_t type, uint32_t rank, const std::string& text) {
  const uint32_t words[5] = {htonl(type), htonl(rank), 0, 0, htonl(static_cast<uint32_t>(text.size()))};
  return std::string(reinterpret_cast<const char*>(words), sizeof words) + text;
}

// Reads n bytes; "" if the connection ended first.
std::string read_n(int fd, size_t n) {
  std::string got(n, '\0');
  size_t at = 0;
  while (at < n) {
    const ssize_t r = ::recv(fd, got.data() + at, n - at, 0);
    if (r <= 0) return "";
    at += static_cast<size_t>(r);
  }
  return got;
}

// A lower rank's side of the handshake played by hand with `key` (what its
// mesh does), in two steps so a test can order connections: hello()
// connects and sends HELLO; prove() answers the CHALLENGE (with the wrong
// key, wrongly) and returns the link's fd. *sent: the bytes it sent.
struct HandNode {
  int fd = -1;
  uint32_t from, to;
  std::string nonce, sent;

  static HandNode hello(const std::string& address, uint32_t from, uint32_t to) {
    HandNode h{raw_connect(address), from, to, "", ""};
    std::string error;
    REQUIRE(random_bytes(job_auth::kNonceBytes, &h.nonce, &error));
    h.sent = frame(0x4c560001, from, h.nonce);
    REQUIRE(::send(h.fd, h.sent.data(), h.sent.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(h.sent.size()));
    return h;
  }
  int prove(const std::string& key) {
    namespace auth = job_auth;
    const std::string challenge = read_n(fd, 20 + 2 * auth::kNonceBytes);
    if (challenge.empty()) return fd;
    const std::string theirs = challenge.substr(20, auth::kNonceBytes);
    const std::string context = std::to_string(from) + ">" + std::to_string(to);
    const std::string proof = frame(0x4c560005, from, auth::proof(key, auth::kConnectorRole, context, nonce, theirs));
    ::send(fd, proof.data(), proof.size(), MSG_NOSIGNAL);
    sent += proof;
    return fd;
  }
};

int hand_connect(const std::string& address, uint32_t from, uint32_t to, const std::string& key,
                 std::string* sent = nullptr) {
  HandNode h = HandNode::hello(address, from, to);
  const int fd = h.prove(key);
  if (sent != nullptr) *sent = h.sent;
  return fd;
}

// Whether the mesh closed the connection: reading what it sent ends
// (a CHALLENGE may come first), rather than blocking for 10 s.
bool closed_by_peer(int fd) {
  const timeval limit{10, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  char buf[256];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
  }
  return n == 0 || errno == ECONNRESET;
}

const std::string kKey(job_auth::kSecretBytes, '\x31');
const std::string kNode0 = "127.0.0.1:1/" + hex_encode(kKey);  // nobody connects to node 0

}  // namespace

TEST_CASE("keepalive timing fits CF_PEER_TIMEOUT in whole seconds, at least 2, with 250 ms to spare") {
  for (uint64_t ms : {500u, 2000u, 2500u, 3000u, 3250u, 5000u, 9000u, 60000u, 240000u}) {
    CAPTURE(ms);
    const KeepaliveTiming t = KeepaliveTiming::from_peer_timeout(ms);
    CHECK(t.detect_s() == static_cast<int>(std::max<uint64_t>(2, (ms - std::min<uint64_t>(ms, 250)) / 1000)));
    if (ms >= 2250) CHECK(uint64_t(t.detect_s()) * 1000 + 250 <= ms);
    CHECK(t.idle_s >= 1);
    CHECK(t.count >= 1);
    CHECK(t.user_timeout_ms == static_cast<unsigned>(t.detect_s()) * 1000);
  }
}

TEST_CASE("a node whose links close without BYE is reported lost by every other node, once, naming it") {
  for (uint32_t victim : {0u, 1u, 3u}) {
    CAPTURE(victim);
    LostLog log;  // outlives the meshes' threads
    std::vector<std::string> addresses;
    Meshes meshes = listen_all(0, 4, &addresses);
    connect_all(meshes, addresses, &log);
    meshes[victim].reset();  // as the kernel does for a process that died
    const std::vector<Report> reports = log.wait_for(3);
    REQUIRE(reports.size() == 3);
    std::vector<bool> observed(4, false);
    for (const Report& r : reports) {
      CHECK(r.lost == victim);
      CHECK(r.observer != victim);
      // Closed, or reset when it died with unread frames (the clock's).
      CHECK(r.how.find("the process ended") != std::string::npos);
      observed[r.observer] = true;
    }
    for (uint32_t n = 0; n < 4; ++n) CHECK(observed[n] == (n != victim));
    for (auto& m : meshes) {
      if (m != nullptr) m->goodbye(0);
    }
    CHECK(log.now().size() == 3);  // the relays repeated nothing
  }
}

TEST_CASE("a node that said BYE before closing is not lost; one that died after it is") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(0, 3, &addresses);
  connect_all(meshes, addresses, &log);
  meshes[0]->goodbye(0);  // node 0 finishes cleanly...
  meshes[0].reset();
  meshes[1].reset();      // ...then node 1 dies: node 2 reads both in this order
  const std::vector<Report> reports = log.wait_for(1);
  meshes[2]->goodbye(0);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].observer == 2);
  CHECK(reports[0].lost == 1);
  CHECK(log.now().size() == 1);
}

TEST_CASE("goodbye waits for every peer's BYE, then no loss is reported") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(0, 3, &addresses);
  connect_all(meshes, addresses, &log);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (auto& m : meshes) threads.emplace_back([&m] { m->goodbye(20000); });
  for (std::thread& t : threads) t.join();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));  // not the timeout
  for (auto& m : meshes) m.reset();
  CHECK(log.now().empty());
}

TEST_CASE("connections that do not prove the job's key are refused and counted, and the mesh still forms") {
  LostLog log;
  std::vector<std::string> addresses;
  // A recorded exchange of node 0 with node 1 of an earlier mesh of the same key.
  std::string recorded;
  {
    Meshes earlier = listen_all(1, 2, &addresses);
    addresses[0] = kNode0;
    LostLog earlier_log;
    auto hand = std::async(std::launch::async, [&] { return hand_connect(addresses[1], 0, 1, kKey, &recorded); });
    connect_all(earlier, addresses, &earlier_log);
    ::close(hand.get());
    earlier[1]->goodbye(0);
  }
  Meshes meshes = listen_all(1, 3, &addresses);  // node 0 is played by hand
  addresses[0] = kNode0;
  // Before node 0 comes (accepted in this order): a wrong key, a rank that
  // is not lower, garbage, the replay, and a connection that says nothing.
  const std::string wrong_key(job_auth::kSecretBytes, '\x32');
  HandNode wrong_hello = HandNode::hello(addresses[2], 0, 2);
  auto wrong = std::async(std::launch::async, [&] { return wrong_hello.prove(wrong_key); });
  const int not_lower = raw_connect(addresses[1]);
  const std::string hello7 = frame(0x4c560001, 7, std::string(job_auth::kNonceBytes, 'n'));
  ::send(not_lower, hello7.data(), hello7.size(), MSG_NOSIGNAL);
  const int garbage = raw_connect(addresses[1]);
  const std::string junk(100000, '\xee');
  ::send(garbage, junk.data(), junk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  const int replay = raw_connect(addresses[1]);
  ::send(replay, recorded.data(), recorded.size(), MSG_NOSIGNAL);
  const int silent = raw_connect(addresses[2]);
  HandNode hello1 = HandNode::hello(addresses[1], 0, 1), hello2 = HandNode::hello(addresses[2], 0, 2);
  auto node0_to_1 = std::async(std::launch::async, [&] { return hello1.prove(kKey); });
  auto node0_to_2 = std::async(std::launch::async, [&] { return hello2.prove(kKey); });
  connect_all(meshes, addresses, &log);
  const int wrong_fd = wrong.get();
  for (int fd : {wrong_fd, not_lower, garbage, replay, silent}) CHECK(closed_by_peer(fd));
  CHECK(meshes[1]->refused() == 3);
  CHECK(meshes[2]->refused() == 2);
  CHECK(log.now().empty());  // no stranger is anybody's loss
  const int link1 = node0_to_1.get(), link2 = node0_to_2.get();
  ::close(link1);
  ::close(link2);
  const std::vector<Report> reports = log.wait_for(2);
  REQUIRE(reports.size() == 2);
  for (const Report& r : reports) CHECK(r.lost == 0);
  for (auto& m : meshes) {
    if (m != nullptr) m->goodbye(0);
  }
  for (int fd : {wrong_fd, not_lower, garbage, replay, silent}) ::close(fd);
}

TEST_CASE("a node whose peer cannot prove the job's key fails to join, naming that node") {
  // Node 0 connects to node 1, played by hand.
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(listener, 1) == 0);
  REQUIRE(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  std::string error;
  std::unique_ptr<LivenessMesh> node0 = LivenessMesh::listen(0, 2, "127.0.0.1", 2000, &error, kKey);
  REQUIRE(node0 != nullptr);
  CHECK(node0->address().ends_with("/-"));  // a given key is never published
  const std::vector<std::string> two = {node0->address(), "127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/-"};
  auto joined = std::async(std::launch::async, [&] { return node0->connect(two, kConnectMs, &error); });
  const int fd = ::accept(listener, nullptr, nullptr);
  REQUIRE(read_n(fd, 20 + job_auth::kNonceBytes).size() == 20 + job_auth::kNonceBytes);
  // An impostor's challenge: a nonce and a proof made without the key.
  const std::string challenge = frame(0x4c560004, 1, std::string(2 * job_auth::kNonceBytes, 'i'));
  ::send(fd, challenge.data(), challenge.size(), MSG_NOSIGNAL);
  CHECK_FALSE(joined.get());
  CHECK(error == "liveness: node 1 did not prove it knows the job key: not this job's process");
  node0.reset();
  CHECK(read_n(fd, 1).empty());  // no PROOF was sent to it
  ::close(fd);
  ::close(listener);
}

// A LOST frame on a hand-made link: node `lost` is gone, for the reason `how`.
void send_lost(int fd, uint32_t lost, const std::string& how) {
  const uint32_t words[5] = {htonl(0x4c560003), htonl(lost), 0, 0, htonl(static_cast<uint32_t>(how.size()))};
  std::string frame(reinterpret_cast<const char*>(words), sizeof words);
  frame += how;
  REQUIRE(::send(fd, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
}

TEST_CASE("a LOST relay from one node is reported with the lost node and who saw it") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(1, 3, &addresses);
  addresses[0] = kNode0;
  auto hand1 = std::async(std::launch::async, [&] { return hand_connect(addresses[1], 0, 1, kKey); });
  auto hand2 = std::async(std::launch::async, [&] { return hand_connect(addresses[2], 0, 2, kKey); });
  connect_all(meshes, addresses, &log);
  const int node0_to_1 = hand1.get(), node0_to_2 = hand2.get();
  // Node 0 says node 2 is gone, on its link to node 1 only.
  send_lost(node0_to_1, 2, "test cut");
  const std::vector<Report> reports = log.wait_for(1);
  REQUIRE(reports.size() == 1);
  CHECK(reports[0].observer == 1);
  CHECK(reports[0].lost == 2);
  CHECK(reports[0].how == "test cut; reported by node 0");
  for (auto& m : meshes) {
    if (m != nullptr) m->goodbye(0);
  }
  ::close(node0_to_1);
  ::close(node0_to_2);
}

TEST_CASE("a LOST frame's words are untrusted: none still give a reason, control bytes are masked") {
  for (const std::string& how : {std::string(), std::string("cut\x1b[2J\n")}) {
    CAPTURE(how);
    LostLog log;
    std::vector<std::string> addresses;
    Meshes meshes = listen_all(1, 2, &addresses);
    addresses[0] = kNode0;
    auto hand1 = std::async(std::launch::async, [&] { return hand_connect(addresses[1], 0, 1, kKey); });
    connect_all(meshes, addresses, &log);
    const int node0_to_1 = hand1.get();
    // Node 0 says it is itself gone.
    send_lost(node0_to_1, 0, how);
    const std::vector<Report> reports = log.wait_for(1);
    REQUIRE(reports.size() == 1);
    CHECK(reports[0].lost == 0);
    CHECK(reports[0].how == (how.empty() ? "lost, with no reason given" : "cut?[2J?"));
    meshes[1]->goodbye(0);
    ::close(node0_to_1);
  }
}

TEST_CASE("every node estimates node 0's clock within half its best round trip; on one kernel, the same clock") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(0, 3, &addresses);
  connect_all(meshes, addresses, &log);
  const ClockEstimate zero = meshes[0]->clock_estimate();
  CHECK(zero.same_clock);
  CHECK(zero.samples == 0);
  CHECK(zero.offset_ns == 0);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (uint32_t n = 1; n < meshes.size(); ++n) {
    while (meshes[n]->clock_estimate().samples < LivenessMesh::kClockSamples &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();
    }
    const ClockEstimate e = meshes[n]->clock_estimate();
    INFO("node ", n, ": offset ", e.offset_ns, " ns, error ", e.error_ns, " ns, samples ", e.samples);
    CHECK(e.samples == LivenessMesh::kClockSamples);  // no more than asked, no fewer
    CHECK(e.same_clock);                              // one kernel, one boot id
    // One clock read by both: the truth is 0, and the estimate must say so
    // within its own bound (a sign or unit slip would not).
    CHECK(e.error_ns > 0);
    CHECK(e.error_ns < 1000000000ull);
    CHECK(static_cast<uint64_t>(e.offset_ns < 0 ? -e.offset_ns : e.offset_ns) <= e.error_ns);
  }
  for (auto& m : meshes) m->goodbye(5000);
  meshes.clear();
  CHECK(log.now().empty());
}

}  // namespace carflow
