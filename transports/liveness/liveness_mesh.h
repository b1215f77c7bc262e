// LivenessMesh: tells a process that another node of its job is gone without
// relying on the launcher (cfrun's LOST notices, PMIx events), so a lost
// peer is found even when the launcher cannot tell: a network cut between
// hosts, a host that stopped answering, a launcher that gives no notice.
//
// Every node opens a TCP listening socket; the runtime publishes address()
// through the job store and hands every node's address to connect(). Then
// a full mesh: the lower rank connects to the higher one, and both prove
// they know the job's key before the link counts (job_auth.h): the
// connector's HELLO carries its rank and a fresh nonce, the acceptor
// answers CHALLENGE (its nonce and its proof over both), the connector
// checks it and answers PROOF. A connection that does not prove the key
// within the keepalive budget of the peer timeout (KeepaliveTiming::detect_s,
// at least 2 s) is closed and counted, and the mesh goes on forming;
// the count is printed once on stderr. The key is the one the runtime
// derives from cfrun's job secret, never sent; without one (PMIx), node 0's
// random key, shared through the job store. The listening socket closes
// once the mesh stands.
//
// What counts as lost (GASNet LAPI notes README: a job with a dead process must end,
// not hang):
//   - end of stream or an error without a prior BYE: the process died (the
//     kernel closes its sockets) -> "its liveness connection was closed
//     without goodbye" / "connection reset";
//   - no reply within the peer timeout: TCP keepalive probes (TCP_KEEPIDLE,
//     TCP_KEEPINTVL, TCP_KEEPCNT) on an idle link and TCP_USER_TIMEOUT on
//     unacknowledged data, both derived from CF_PEER_TIMEOUT (whole seconds,
//     at least 2, 250 ms under it) -> "no keepalive reply within S s".
// The kernel answers keepalives for a process that is slow, busy or stopped,
// so only a dead process or an unreachable host is reported, never a slow one.
// A node that finds a peer lost tells every other node (LOST), so a cut that
// only some links see still reaches everyone. A node that cannot go on
// (withdraw) sends LOST naming itself, with its reason.
//
// At finalize, after the runtime's exit fence, goodbye() sends BYE on every
// link and waits (bounded) for everyone's BYE, so a clean exit is never
// reported as a loss.
//
// Node 0's clock: once the poll threads run, every other node asks node 0
// for its CLOCK_MONOTONIC kClockSamples times, one round trip after the
// other, and keeps the sample with the shortest round trip: node 0's
// clock minus ours is then off by at most half that round trip. Traces of
// nodes on other hosts are shifted onto node 0's clock with it; nodes
// that share node 0's kernel (the same boot id, network namespaces
// included) share its clock exactly and are not shifted.
//
// Wire format: frames of a 20-byte header (type, rank, value: big-endian
// u32, u32, u64; then a u32 text length) and that many bytes of text
// (at most kMaxTextBytes). HELLO text = nonce; CHALLENGE text = nonce and
// proof; PROOF text = proof; LOST rank = the lost node, text = how; BYE
// carries nothing; CLOCK_ASK value = the asker's clock; CLOCK_TELL value =
// node 0's clock, text = the ask's value in decimal, a space, node 0's
// boot id.
//
// Threading: one thread (started by watch()) polls every link and calls
// on_lost(node, how) at most once per node; on_lost must not call back into
// the mesh's goodbye() or destroy it. goodbye() and the destructor are
// called by one thread; the destructor wakes and joins the poll thread
// before closing the sockets. Two meshes share nothing.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace carflow {

// Keepalive settings that notice a silent peer within a timeout.
struct KeepaliveTiming {
  int idle_s = 1;       // TCP_KEEPIDLE: quiet time before the first probe
  int interval_s = 1;   // TCP_KEEPINTVL: between probes
  int count = 1;        // TCP_KEEPCNT: unanswered probes that end the link
  unsigned user_timeout_ms = 2000;  // TCP_USER_TIMEOUT: unacknowledged data
  int detect_s() const { return idle_s + interval_s * count; }
  // Whole seconds (keepalive's unit), at least 2, otherwise at most
  // peer_timeout_ms - 250 ms (the kernel's timer slack).
  static KeepaliveTiming from_peer_timeout(uint64_t peer_timeout_ms);
};

// What a node knows of node 0's clock (LivenessMesh::clock_estimate).
struct ClockEstimate {
  uint32_t samples = 0;      // round trips to node 0 so far (0 on node 0)
  bool same_clock = false;   // node 0 runs on this kernel: the true offset is 0
  int64_t offset_ns = 0;     // estimated: node 0's CLOCK_MONOTONIC minus this node's
  uint64_t error_ns = 0;     // half the best round trip: the offset is off by at most this
};

class LivenessMesh {
 public:
  using LostCallback = std::function<void(uint32_t node, const std::string& how)>;
  static constexpr size_t kMaxTextBytes = 1024;

  // Listens on every interface (an ephemeral port) as `rank` of `nodes`.
  // advertised_ip: the address other nodes reach this one at. job_key: the
  // key every node was given (JobStore::derived_key); "" = node 0's random
  // one, published in its address.
  static std::unique_ptr<LivenessMesh> listen(uint32_t rank, uint32_t nodes,
                                              const std::string& advertised_ip,
                                              uint64_t peer_timeout_ms, std::string* error,
                                              std::string job_key = "");
  ~LivenessMesh();
  LivenessMesh(const LivenessMesh&) = delete;
  LivenessMesh& operator=(const LivenessMesh&) = delete;

  // "IP:PORT/KEY" to publish: KEY is this node's random key in hex (node
  // 0's becomes the job's), or "-" when the job's key was given.
  std::string address() const;
  // addresses[n]: node n's address(). Connects to every higher rank and
  // accepts every lower one; false with *error naming the node on failure
  // or when timeout_ms passes.
  bool connect(const std::vector<std::string>& addresses, int timeout_ms, std::string* error);
  // Starts the poll thread. Call once, after connect().
  void watch(LostCallback on_lost);
  // BYE to every live peer; then waits up to timeout_ms for every live
  // peer's BYE (0: does not wait). Losses are no longer reported after it.
  void goodbye(int timeout_ms);
  // Shuts the connection to `node` down (CF_FAULT=close_link): both ends
  // find it failed and report each other lost.
  void sever(uint32_t node);
  // This node leaves the job, failed (`how`, e.g. "it ran out of memory:
  // ..."): LOST naming itself to every live peer, which reports it lost
  // with that text. It reports no loss itself from then on.
  void withdraw(const std::string& how);

  const KeepaliveTiming& timing() const { return timing_; }
  // Node 0's clock as estimated so far (see above); node 0 itself: the
  // same clock.
  ClockEstimate clock_estimate() const;
  static constexpr uint32_t kClockSamples = 16;
  // Connections closed by connect() for want of a proof of the key.
  uint64_t refused() const { return refused_; }

 private:
  struct Peer {
    int fd = -1;
    bool live = false;      // connected and not lost
    bool said_bye = false;  // its BYE arrived
    bool reported = false;  // on_lost was called (or is being called) for it
    std::string inbox;      // bytes of a partial frame
    std::string nonce;      // a higher peer's: the nonce our HELLO sent
  };
  struct Unproven;  // an accepted connection during its handshake

  LivenessMesh(int listen_fd, int wake_fd, uint32_t rank, uint32_t nodes, std::string ip,
               std::string key, bool key_given, KeepaliveTiming timing);
  bool connect_higher(uint32_t node, const std::string& address, int timeout_ms, std::string* error);
  bool handshake(int timeout_ms, std::string* error);
  bool answer_lower(Unproven& u);
  bool check_higher(uint32_t node, std::string* error);
  void set_socket_options(int fd);
  bool send_frame(uint32_t node, uint32_t type, uint32_t rank, uint64_t value, const std::string& text);
  void poll_loop();
  void read_peer(uint32_t node);
  bool handle_frames(uint32_t node);
  void report_lost(uint32_t node, const std::string& how);
  bool ask_clock();
  void clock_told(uint64_t node0_now, const std::string& text);

  const int wake_fd_;  // eventfd: wakes the poll thread to stop
  int listen_fd_;
  const uint32_t rank_;
  const uint32_t nodes_;
  const std::string ip_;
  std::string key_;          // the job's, once connect() knows it
  const bool key_given_;     // false: key_ is this node's candidate until connect()
  uint64_t refused_ = 0;
  const KeepaliveTiming timing_;
  uint16_t port_ = 0;

  std::mutex send_mu_;  // one frame at a time on any link
  std::mutex mu_;       // guards peers_' live / said_bye / reported, reporting_, on_lost_
  std::condition_variable changed_;  // a BYE or a loss arrived
  std::vector<Peer> peers_;          // by node; peers_[rank_] unused
  bool reporting_ = true;            // false once goodbye() began
  LostCallback on_lost_;
  const std::string boot_id_;  // this kernel's; "" when unknown
  mutable std::mutex clock_mu_;
  uint64_t clock_asked_at_ = 0;  // the outstanding CLOCK_ASK's value (0: none)
  ClockEstimate clock_;
  std::atomic<bool> stop_{false};
  std::thread poller_;
};

}  // namespace carflow
