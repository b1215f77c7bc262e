// cfrun's store (tools/store_server.h) fed lines from several fake clients,
// without sockets, as cfrun feeds it. The input is lines; each line's first
// byte picks a client and what it does:
//   bits 0-1: the client (4 connections share a 3-rank job)
//   bits 2-3: 0, 1 the rest of the line is a request line
//             2    the client proves the job secret (AUTH, PROOF), the
//                  rest of the line making its nonce: the fuzzer cannot
//                  forge the MAC, so the harness does what a real client does
//             3    an event, by the rest's first byte: the connection
//                  closes (a new one takes its place), a rank is lost
//                  (waits fail), or a rank's process exits
// so '@' + 4 * action + client is a printable selector (the corpus's
// transcripts use them: "@HELLO 1 0 3" is client 0's request, "H" its proof).
// Rules checked: replies go only to open connections and hold no newline;
// no two connections hold one
// rank; the store's proof verifies; every connection that never proved the
// secret is counted as refused exactly once; a LEAVE's reason, which cfrun
// prints, is one short printable line, reported once per rank.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tests/fuzz/fuzz_check.h"
#include "tools/store_server.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace {

using carflow::Outgoing;
using carflow::StoreServer;
using carflow_fuzz::check;
namespace job_auth = carflow::job_auth;

constexpr uint32_t kRanks = 3;
constexpr size_t kClients = 4;
const std::string kSecret(job_auth::kSecretBytes, '\x5a');

struct Client {
  uint64_t conn = 0;
  StoreServer::Session session;
  bool ever_proven = false;
};

class Harness {
 public:
  Harness() : server_(kRanks, kSecret, [this](uint32_t r) { return running_[r]; }) {
    for (Client& c : clients_) open(c);
  }

  void line(std::string_view text) {
    if (text.empty()) return;
    const auto selector = static_cast<unsigned char>(text[0]);
    Client& c = clients_[selector % kClients];
    const std::string_view rest = text.substr(1);
    switch ((selector / kClients) % 4) {
      case 0:
      case 1: request(c, rest); break;
      case 2: prove(c, rest); break;
      default: event(c, rest); break;
    }
  }

  // Every connection closes: the refusals must add up.
  void finish() {
    for (Client& c : clients_) close(c);
    check(server_.refused() == unproven_closed_, "every connection without a proof is counted once as refused");
  }

 private:
  void open(Client& c) {
    c = Client{};
    c.conn = ++last_conn_;
  }

  void close(Client& c) {
    server_.drop(c.conn, c.session);
    if (!c.ever_proven) ++unproven_closed_;
    c.conn = 0;
  }

  // As cfrun: a line past the connection's limit ends it; a refused
  // connection is closed once its replies are out.
  void request(Client& c, std::string_view text) {
    std::vector<Outgoing> out;
    if (text.size() > StoreServer::max_line_bytes(c.session)) {
      server_.refuse(c.session);
    } else {
      server_.handle(c.conn, c.session, text, &out);
    }
    if (c.session.proof == StoreServer::Session::Proof::kProven) c.ever_proven = true;
    deliver(out);
    for (const StoreServer::Departure& d : server_.take_departures()) {
      check(d.rank < kRanks && !departed_[d.rank], "a rank's LEAVE is reported once");
      departed_[d.rank] = true;
      check(d.why.size() <= StoreServer::kMaxWhyBytes, "a LEAVE's reason is cut to its limit");
      for (char ch : d.why) check(ch >= 0x20 && ch <= 0x7e, "a LEAVE's reason is printable");
    }
    if (c.session.closing) reopen(c);
  }

  void prove(Client& c, std::string_view seed) {
    if (c.session.proof != StoreServer::Session::Proof::kNone || c.session.closing) return request(c, "AUTH");
    std::string client_nonce(seed.substr(0, job_auth::kNonceBytes));
    client_nonce.resize(job_auth::kNonceBytes, '\0');
    std::vector<Outgoing> out;
    server_.handle(c.conn, c.session, "AUTH " + carflow::hex_encode(client_nonce), &out);
    check(out.size() == 1 && out[0].line.rfind("AUTH ", 0) == 0, "AUTH is answered by one AUTH line");
    std::string_view answer = std::string_view(out[0].line).substr(5);
    std::string store_nonce, store_proof;
    const std::string nonce_hex = carflow::take_field(&answer);
    check(carflow::hex_decode(nonce_hex, &store_nonce) && carflow::hex_decode(answer, &store_proof),
          "the store's AUTH holds two hex fields");
    check(job_auth::verify(store_proof, kSecret, job_auth::kStoreRole, "", client_nonce, store_nonce),
          "the store proves the job secret");
    deliver(out);
    const std::string proof = job_auth::proof(kSecret, job_auth::kClientRole, "", client_nonce, store_nonce);
    request(c, "PROOF " + carflow::hex_encode(proof));
    check(c.session.proof == StoreServer::Session::Proof::kProven, "a right proof is accepted");
  }

  void event(Client& c, std::string_view rest) {
    const unsigned what = rest.empty() ? 0 : static_cast<unsigned char>(rest[0]);
    const std::string detail(rest.empty() ? rest : rest.substr(1));
    std::vector<Outgoing> out;
    switch (what % 3) {
      case 0: reopen(c); break;
      case 1: server_.fail_waiters("rank " + std::to_string(what / 3 % kRanks) + " was lost: " + detail, &out); break;
      default: running_[what / 3 % kRanks] = false; break;
    }
    deliver(out);
  }

  void reopen(Client& c) {
    close(c);
    open(c);
  }

  void deliver(const std::vector<Outgoing>& out) {
    for (const Outgoing& o : out) {
      bool open = false;
      for (const Client& c : clients_) open = open || (c.conn == o.conn && o.conn != 0);
      check(open, "a reply goes to an open connection");
      check(o.line.find('\n') == std::string::npos, "a reply is one line");
    }
    for (size_t a = 0; a < kClients; ++a) {
      for (size_t b = a + 1; b < kClients; ++b) {
        check(clients_[a].session.rank < 0 || clients_[a].session.rank != clients_[b].session.rank,
              "no two connections hold one rank");
      }
    }
  }

  std::array<bool, kRanks> running_{true, true, true};
  std::array<bool, kRanks> departed_{};
  StoreServer server_;
  std::array<Client, kClients> clients_;
  uint64_t last_conn_ = 0;
  uint64_t unproven_closed_ = 0;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Harness harness;
  std::string_view text(reinterpret_cast<const char*>(data), size);
  while (!text.empty()) {
    const size_t end = text.find('\n');
    harness.line(text.substr(0, end));
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  harness.finish();
  return 0;
}
