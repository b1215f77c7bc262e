// transports/liveness: meshes of in-process endpoints on loopback. A node
// whose links close without BYE is reported lost, naming it; BYE is never a
// loss; a connection without the job's nonce is refused; a LOST relay names
// the lost node and who saw it. Network cuts need namespaces: multiproc_test.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

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

// A raw TCP connection to a mesh's port saying HELLO as `rank` with `nonce`
// (what a lower rank's mesh sends), for playing node 0 by hand.
int raw_hello(const std::string& address, uint32_t rank, uint64_t nonce) {
  const uint16_t port = static_cast<uint16_t>(std::stoul(address.substr(address.find(':') + 1)));
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const uint32_t words[5] = {htonl(0x4c560001), htonl(rank), htonl(static_cast<uint32_t>(nonce >> 32)),
                             htonl(static_cast<uint32_t>(nonce)), 0};
  REQUIRE(::send(fd, words, sizeof words, MSG_NOSIGNAL) == sizeof words);
  return fd;
}

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
      CHECK(r.how.find("closed without goodbye") != std::string::npos);
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

TEST_CASE("a connection without the job's nonce is refused, and the mesh still forms") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(1, 3, &addresses);  // node 0 is played by hand
  const uint64_t nonce = 0x1234567;
  addresses[0] = "127.0.0.1:1/1234567";  // nobody connects to node 0
  const int stray = raw_hello(addresses[2], 0, nonce + 2);
  const int stray_rank = raw_hello(addresses[1], 7, nonce);  // no such lower rank
  const int node0_to_1 = raw_hello(addresses[1], 0, nonce);
  const int node0_to_2 = raw_hello(addresses[2], 0, nonce);
  connect_all(meshes, addresses, &log);
  // The strays were closed by the meshes: reading them ends at once.
  char byte;
  CHECK(::recv(stray, &byte, 1, 0) <= 0);
  CHECK(::recv(stray_rank, &byte, 1, 0) <= 0);
  ::close(node0_to_1);
  ::close(node0_to_2);
  const std::vector<Report> reports = log.wait_for(2);
  REQUIRE(reports.size() == 2);
  for (const Report& r : reports) CHECK(r.lost == 0);
  for (auto& m : meshes) {
    if (m != nullptr) m->goodbye(0);
  }
  ::close(stray);
  ::close(stray_rank);
}

TEST_CASE("a LOST relay from one node is reported with the lost node and who saw it") {
  LostLog log;
  std::vector<std::string> addresses;
  Meshes meshes = listen_all(1, 3, &addresses);
  addresses[0] = "127.0.0.1:1/99";
  const int node0_to_1 = raw_hello(addresses[1], 0, 0x99);
  const int node0_to_2 = raw_hello(addresses[2], 0, 0x99);
  connect_all(meshes, addresses, &log);
  // Node 0 says node 2 is gone, on its link to node 1 only.
  const std::string how = "test cut";
  const uint32_t words[5] = {htonl(0x4c560003), htonl(2), 0, 0, htonl(static_cast<uint32_t>(how.size()))};
  std::string frame(reinterpret_cast<const char*>(words), sizeof words);
  frame += how;
  REQUIRE(::send(node0_to_1, frame.data(), frame.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(frame.size()));
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

}  // namespace carflow
