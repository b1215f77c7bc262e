// Bootstrap: the client of the key-value store that `tools/cfrun` serves to
// the processes it launches, for exchanging addresses before the transports
// connect, and for learning when another process of the job is lost.
//
// Environment (set by cfrun for each process, read only by from_env):
//   CF_RANK    this process's rank, 0..CF_NODES-1
//   CF_NODES   number of processes in the job
//   CF_KVS     HOST:PORT of the launcher's store
//   CF_IMAGES  images per process (--images), absent when not given
//   CF_JOB_SECRET  the job's secret, 64 hex digits (job_auth.h)
//
// Wire protocol: one TCP connection per process, opened at start and kept
// until exit. ASCII lines ending in '\n', at most kMaxLineBytes, fields
// separated by one space. Keys and values are tokens: printable, no spaces
// (values may be empty; the lead stores hex).
//
// First, both ends prove they know the job secret (AUTH, PROOF: job_auth.h);
// the store serves nothing before, and a client that cannot check the
// store's proof gives up. Then:
//
// Requests (process -> launcher) carry an id the process picks (decimal,
// unique on its connection); each is answered by exactly one reply with that
// id, and replies may come in any order: a GET waiting for its key does not
// hold up the requests behind it.
//   HELLO <id> <rank> <nodes>  must come first; rank < N, nodes == N, and no
//                              other connection holds the rank    -> OK <id>
//   PUT <id> <key> <value>     store (a later PUT replaces)       -> OK <id>
//   GET <id> <key>             reply delayed until the key exists -> VAL <id> <value>
//   FENCE <id>                 the k-th FENCE of a rank joins round k; the
//                              reply comes when all N ranks joined -> OK <id>
//   BYE <id>                   this process finishes cleanly      -> OK <id>
//   LEAVE <id> <how>           this process cannot go on and leaves the job
//                              (how written as LOST's, below): cfrun prints
//                              it as it prints a lost rank's   -> OK <id>
// Any request may instead get ERR <id> <reason...> (bad syntax, no HELLO yet,
// or a rank was lost, so a GET of a missing key or a FENCE can never be
// answered: the job is ending). A refused HELLO closes the connection.
//
// Notice (launcher -> process, unsolicited, between replies):
//   LOST <rank> <how>          a process died; in how a space is written '_',
//                              and '_', '%' and other non-token bytes %XX, e.g.
//                              was_killed_by_signal_9_(Killed),
//                              exited_with_status_0_without_cf%5Ffinalize
//
// Threading: a reader thread, started when the connection opens, owns every
// read of the socket. It hands replies to the waiting caller by id through a
// condition variable and LOST notices to the on_lost callback, so a reply and
// a notice can never be taken for each other. A reply that arrives after its
// caller timed out is dropped by id. All methods may be called from any
// thread, concurrently. Two Bootstrap objects share nothing.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "transports/bootstrap/job_store.h"

namespace carflow {

// The parts of the protocol that cfrun and Bootstrap share.
namespace bootstrap_protocol {
inline constexpr size_t kMaxLineBytes = size_t{1} << 20;
// A key or value fits a field: printable ASCII without spaces.
bool is_token(std::string_view text);
// LOST's <how>: "exited with status 3" <-> "exited_with_status_3" (see above).
std::string encode_words(std::string_view words);
std::string decode_words(std::string_view token);
}  // namespace bootstrap_protocol

// Reads an unsigned environment variable in [min, max]; *present tells
// whether it is set (an empty value is unset). false with *error naming the
// variable and the range when it is set to anything else.
bool read_env_uint(const char* name, uint64_t min, uint64_t max, uint64_t* out, bool* present,
                   std::string* error);

class Bootstrap final : public JobStore {
 public:

  // Returns nullptr and leaves *error empty when CF_KVS is not set (not
  // launched by cfrun); nullptr with *error naming the variable and the rule
  // when the environment is set but unusable (bad CF_RANK, cannot connect...).
  static std::unique_ptr<Bootstrap> from_env(std::string* error);
  // Connects to kvs ("HOST:PORT"), proves it knows `secret` (and checks the
  // store's proof), and says HELLO as `rank` of `nodes`. from_env's work
  // after reading the environment; tests call it directly.
  static std::unique_ptr<Bootstrap> connect(const std::string& kvs, uint32_t rank,
                                            uint32_t nodes, uint32_t images_per_node,
                                            const std::string& secret, std::string* error);
  // Closes the connection and joins the reader thread. Must not be called
  // from inside on_lost.
  ~Bootstrap() override;
  Bootstrap(const Bootstrap&) = delete;
  Bootstrap& operator=(const Bootstrap&) = delete;

  uint32_t rank() const override { return rank_; }
  uint32_t nodes() const override { return nodes_; }
  uint32_t images_per_node() const override { return images_per_node_; }  // CF_IMAGES, 0 when not given

  // timeout_ms < 0 waits without limit. Errors name the key and the cause
  // (timeout, key or value not a token, launcher answered ERR, connection
  // closed). A get/fence that timed out stays counted by the launcher: its
  // late reply is dropped, and a timed-out fence still joined its round.
  bool put(const std::string& key, const std::string& value, std::string* error) override;
  bool get(const std::string& key, std::string* value, int timeout_ms, std::string* error) override;
  bool fence(int timeout_ms, std::string* error) override;  // all ranks
  bool bye(std::string* error) override;  // idempotent; waits for the launcher's OK
  void leave(const std::string& why) override;  // LEAVE, without waiting for the OK

  // Calls on_lost(rank, how) on the reader thread for each LOST notice
  // (how as cfrun printed it, e.g. "was killed by signal 9 (Killed)"), and
  // on_lost(kLauncherRank, "launcher connection closed") if the launcher goes
  // away before bye(). Notices that arrived before watch() are delivered by
  // the reader thread right after. on_lost must not call this Bootstrap's
  // methods that wait (put/get/fence/bye) nor destroy it. Call once.
  void watch(LostCallback on_lost) override;
  std::string local_ip() const override;  // of the launcher connection (getsockname)
  std::string derived_key(std::string_view purpose) const override;

 private:
  struct Reply {
    bool ok = false;
    std::string text;  // VAL's value, or ERR's reason
  };
  struct LostNotice {
    uint32_t rank;
    std::string how;
  };

  Bootstrap(int fd, int wake_fd, uint32_t rank, uint32_t nodes, uint32_t images_per_node,
            std::string secret);
  bool request(const std::string& verb, const std::string& args, int timeout_ms,
               const std::string& what, Reply* reply, std::string* error);
  bool send_line(const std::string& line);
  void read_loop();
  void handle_line(std::string_view line);
  void deliver_notices();

  const int fd_;
  const int wake_fd_;  // eventfd: wakes the reader for watch() and shutdown
  const uint32_t rank_;
  const uint32_t nodes_;
  const uint32_t images_per_node_;
  const std::string secret_;

  std::mutex write_mu_;  // one line at a time on the socket

  std::mutex mu_;  // guards everything below
  std::condition_variable replied_;
  uint64_t next_id_ = 1;
  std::unordered_map<uint64_t, std::optional<Reply>> waiting_;  // id -> reply once it came
  bool closed_ = false;     // launcher connection gone
  bool said_bye_ = false;
  bool stopping_ = false;   // destructor running
  LostCallback on_lost_;
  std::vector<LostNotice> notices_;  // not yet handed to on_lost_

  std::thread reader_;
};

}  // namespace carflow
