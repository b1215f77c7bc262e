// cfrun's key-value store and its line protocol on the server side, apart
// from sockets: one request line of a connection in, reply lines out. The
// protocol (AUTH, PROOF, HELLO, PUT, GET, FENCE, BYE, LEAVE; replies OK, VAL, ERR;
// LOST from cfrun) is documented in transports/bootstrap/bootstrap.h. cfrun serves it
// over TCP; tests drive it directly.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace carflow {

struct Outgoing {
  uint64_t conn;
  std::string line;
};

// The store's state, apart from sockets: values, GETs waiting for a key, and
// fence rounds. Produces reply lines for the launcher to send.
class KeyValueStore {
 public:
  explicit KeyValueStore(uint32_t nodes) : joined_(nodes, 0) {}

  void put(const std::string& key, std::string value, std::vector<Outgoing>* out) {
    auto waiting = getters_.find(key);
    if (waiting != getters_.end()) {
      for (const Waiter& w : waiting->second) out->push_back({w.conn, "VAL " + w.id + " " + value});
      getters_.erase(waiting);
    }
    values_[key] = std::move(value);
  }

  void get(uint64_t conn, const std::string& id, const std::string& key,
           std::vector<Outgoing>* out) {
    auto found = values_.find(key);
    if (found != values_.end()) {
      out->push_back({conn, "VAL " + id + " " + found->second});
    } else if (!lost_.empty()) {
      out->push_back({conn, "ERR " + id + " key " + key + " does not exist and " + lost_});
    } else {
      getters_[key].push_back({conn, id});
    }
  }

  // The k-th FENCE of a rank joins round k; a round is complete when every
  // rank has joined it.
  void fence(uint32_t rank, uint64_t conn, const std::string& id, std::vector<Outgoing>* out) {
    fences_.push_back({++joined_[rank], {conn, id}});
    const uint64_t complete = *std::min_element(joined_.begin(), joined_.end());
    auto done = [&](const FenceWaiter& f) {
      if (f.round <= complete) out->push_back({f.waiter.conn, "OK " + f.waiter.id});
      else if (!lost_.empty()) out->push_back({f.waiter.conn, "ERR " + f.waiter.id + " " + lost_});
      else return false;
      return true;
    };
    std::erase_if(fences_, done);
  }

  // After a loss, waits that cannot end any more fail at once: the job is ending.
  void fail_waiters(const std::string& reason, std::vector<Outgoing>* out) {
    if (lost_.empty()) lost_ = reason;
    for (auto& [key, waiters] : getters_) {
      for (const Waiter& w : waiters) {
        out->push_back({w.conn, "ERR " + w.id + " key " + key + " does not exist and " + lost_});
      }
    }
    getters_.clear();
    for (const FenceWaiter& f : fences_) out->push_back({f.waiter.conn, "ERR " + f.waiter.id + " " + lost_});
    fences_.clear();
  }

  void drop_connection(uint64_t conn) {
    for (auto it = getters_.begin(); it != getters_.end();) {
      std::erase_if(it->second, [&](const Waiter& w) { return w.conn == conn; });
      it = it->second.empty() ? getters_.erase(it) : std::next(it);
    }
    std::erase_if(fences_, [&](const FenceWaiter& f) { return f.waiter.conn == conn; });
  }

 private:
  struct Waiter {
    uint64_t conn;
    std::string id;
  };
  struct FenceWaiter {
    uint64_t round;
    Waiter waiter;
  };
  std::unordered_map<std::string, std::string> values_;
  std::unordered_map<std::string, std::vector<Waiter>> getters_;
  std::vector<uint64_t> joined_;  // per rank: fence rounds joined
  std::vector<FenceWaiter> fences_;
  std::string lost_;              // "rank R was lost: <how>" once one was
};

// One request line at a time, per connection: the proof of the job secret
// first (AUTH, PROOF: transports/bootstrap/job_auth.h), then HELLO (it names
// the connection's rank), then PUT / GET / FENCE / BYE / LEAVE. Replies and
// the answers to earlier GETs and FENCEs go to `out`.
class StoreServer {
 public:
  // A rank that said LEAVE: why, printable and at most kMaxWhyBytes long
  // (the launcher prints it).
  struct Departure {
    uint32_t rank;
    std::string why;
  };
  static constexpr size_t kMaxWhyBytes = 1024;
  // A connection's state: how far its proof went, its rank once HELLO was
  // accepted, and whether it was refused (the caller closes it once its
  // replies are sent).
  struct Session {
    enum class Proof { kNone, kChallenged, kProven };
    Proof proof = Proof::kNone;
    std::string client_nonce, store_nonce;
    int64_t rank = -1;
    bool closing = false;
  };
  // secret: the job's (job_auth::kSecretBytes). rank_running(r): whether
  // rank r's process still runs (a HELLO for an exited rank is refused).
  StoreServer(uint32_t nodes, std::string secret, std::function<bool(uint32_t)> rank_running);
  void handle(uint64_t conn, Session& session, std::string_view line, std::vector<Outgoing>* out);
  // The longest line the connection may send now: short until it proved
  // the secret, so a stranger cannot make the store hold much.
  static size_t max_line_bytes(const Session& session);
  // The caller ends a connection that has not proved the secret (its line
  // was too long, or it took too long): counted as refused.
  void refuse(Session& session);
  // The connection is gone: its waits are dropped, its rank may HELLO
  // again; one that never proved the secret counts as refused.
  void drop(uint64_t conn, const Session& session);
  // Connections closed without a valid proof of the secret.
  uint64_t refused() const { return refused_; }
  // A rank was lost: every wait that can no longer end fails.
  void fail_waiters(const std::string& reason, std::vector<Outgoing>* out) { store_.fail_waiters(reason, out); }
  // Whether rank r said BYE (cf_finalize) before it exited.
  bool said_bye(uint32_t rank) const { return said_bye_[rank]; }
  // The ranks that said LEAVE since the last call, each rank once per job.
  std::vector<Departure> take_departures() { return std::exchange(departures_, {}); }

 private:
  void hello(uint64_t conn, Session& session, const std::string& id, std::string_view rest,
             std::vector<Outgoing>* out);
  void prove(uint64_t conn, Session& session, std::string_view line, std::vector<Outgoing>* out);

  uint32_t nodes_;
  std::string secret_;
  uint64_t refused_ = 0;
  KeyValueStore store_;
  std::function<bool(uint32_t)> rank_running_;
  std::vector<uint64_t> rank_connection_;  // rank -> connection, 0 = none
  std::vector<bool> said_bye_;
  std::vector<bool> left_;  // per rank: LEAVE taken
  std::vector<Departure> departures_;
};

// The first space-separated field of *rest, removed from it.
std::string take_field(std::string_view* rest);
// A decimal integer in [min, max]; false with *error naming `name`.
bool parse_count(const std::string& name, const std::string& text, uint32_t min, uint32_t max, uint32_t* out,
                 std::string* error);

}  // namespace carflow
