// cfrun's store as its clients meet it, without sockets (tools/store_server.h):
// the proof of the job secret first, then HELLO, PUT / GET / FENCE / BYE / LEAVE,
// waits answered when they can be, and failed when a rank is lost.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tools/store_server.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

using carflow::Outgoing;
using carflow::StoreServer;
namespace job_auth = carflow::job_auth;

namespace {

const std::string kSecret(job_auth::kSecretBytes, '\x5a');

// A session past its proof of the secret: the cases of the proof itself
// come last.
StoreServer::Session proven() {
  StoreServer::Session s;
  s.proof = StoreServer::Session::Proof::kProven;
  return s;
}

struct Client {
  uint64_t conn;
  StoreServer::Session session;
};

// The lines `server` sends for one request, as "conn: line".
std::vector<std::string> ask(StoreServer& server, Client& c, const std::string& line) {
  std::vector<Outgoing> out;
  server.handle(c.conn, c.session, line, &out);
  std::vector<std::string> text;
  for (const Outgoing& o : out) text.push_back(std::to_string(o.conn) + ": " + o.line);
  return text;
}

using Lines = std::vector<std::string>;

}  // namespace

TEST_CASE("a connection must say HELLO with a free rank of a running process before anything else") {
  std::vector<bool> running{true, true, false};
  StoreServer server(3, kSecret, [&](uint32_t r) { return running[r]; });
  Client a{1, proven()}, b{2, proven()}, c{3, proven()}, d{4, proven()};
  CHECK(ask(server, a, "PUT 7 k v") == Lines{"1: ERR 7 send HELLO <id> <rank> <nodes> first"});
  CHECK_FALSE(a.session.closing);
  CHECK(ask(server, a, "HELLO 1 0 4") == Lines{"1: ERR 1 nodes '4' but cfrun started 3"});
  CHECK(a.session.closing);
  CHECK(ask(server, b, "HELLO 1 0 3") == Lines{"2: OK 1"});
  CHECK(b.session.rank == 0);
  CHECK(ask(server, b, "HELLO 2 1 3") == Lines{"2: ERR 2 this connection is already rank 0"});
  CHECK(ask(server, c, "HELLO 1 0 3") == Lines{"3: ERR 1 rank 0 is already connected"});
  CHECK(ask(server, d, "HELLO 1 2 3") == Lines{"4: ERR 1 rank 2 has already exited"});
  Client e{5, proven()};
  CHECK(ask(server, e, "HELLO 1 x 3") == Lines{"5: ERR 1 rank 'x': expected an integer in [0, 2]"});
  // A dropped connection frees its rank.
  server.drop(b.conn, b.session);
  Client f{6, proven()};
  CHECK(ask(server, f, "HELLO 1 0 3") == Lines{"6: OK 1"});
}

TEST_CASE("a GET waits for its key's PUT; PUT and GET refuse malformed lines") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, proven()}, b{2, proven()};
  ask(server, a, "HELLO 1 0 2");
  ask(server, b, "HELLO 1 1 2");
  CHECK(ask(server, b, "GET 5 ep0").empty());  // waits
  CHECK(ask(server, a, "PUT 6 ep0 abcd") == Lines{"2: VAL 5 abcd", "1: OK 6"});
  CHECK(ask(server, b, "GET 7 ep0") == Lines{"2: VAL 7 abcd"});
  CHECK(ask(server, a, "PUT 8") == Lines{"1: ERR 8 PUT needs <key> <value> without spaces"});
  CHECK(ask(server, a, "PUT 9 k two words") == Lines{"1: ERR 9 PUT needs <key> <value> without spaces"});
  CHECK(ask(server, a, "FROB 10") == Lines{"1: ERR 10 unknown request 'FROB'"});
  CHECK(ask(server, a, "GET 11") == Lines{"1: ERR 11 unknown request 'GET'"});
}

TEST_CASE("the k-th FENCE of every rank completes round k") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, proven()}, b{2, proven()};
  ask(server, a, "HELLO 1 0 2");
  ask(server, b, "HELLO 1 1 2");
  CHECK(ask(server, a, "FENCE 2").empty());
  CHECK(ask(server, a, "FENCE 3").empty());  // round 2 for rank 0
  CHECK(ask(server, b, "FENCE 4") == Lines{"1: OK 2", "2: OK 4"});
  CHECK(ask(server, b, "FENCE 5") == Lines{"1: OK 3", "2: OK 5"});
}

TEST_CASE("after a loss, waits that cannot end fail, and later ones fail at once") {
  StoreServer server(3, kSecret, [](uint32_t) { return true; });
  Client a{1, proven()}, b{2, proven()};
  ask(server, a, "HELLO 1 0 3");
  ask(server, b, "HELLO 1 1 3");
  CHECK(ask(server, a, "GET 2 never").empty());
  CHECK(ask(server, b, "FENCE 3").empty());
  std::vector<Outgoing> out;
  server.fail_waiters("rank 2 was lost: exited with status 1", &out);
  REQUIRE(out.size() == 2);
  CHECK(out[0].line == "ERR 2 key never does not exist and rank 2 was lost: exited with status 1");
  CHECK(out[1].line == "ERR 3 rank 2 was lost: exited with status 1");
  CHECK(ask(server, a, "GET 4 never") == Lines{"1: ERR 4 key never does not exist and rank 2 was lost: exited with status 1"});
}

TEST_CASE("BYE is remembered per rank") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, proven()};
  ask(server, a, "HELLO 1 1 2");
  CHECK_FALSE(server.said_bye(1));
  CHECK(ask(server, a, "BYE 2") == Lines{"1: OK 2"});
  CHECK(server.said_bye(1));
  CHECK_FALSE(server.said_bye(0));
}

TEST_CASE("LEAVE reports a rank's reason once, as one printable line of bounded length") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, proven()};
  CHECK(ask(server, a, "LEAVE 1 early") == Lines{"1: ERR 1 send HELLO <id> <rank> <nodes> first"});
  ask(server, a, "HELLO 2 1 2");
  CHECK(ask(server, a, "LEAVE 3") == Lines{"1: ERR 3 LEAVE needs <how> written as one field (a space as '_')"});
  CHECK(server.take_departures().empty());
  CHECK(ask(server, a, "LEAVE 4 ran_out_of_memory:_a%0Aline%1B") == Lines{"1: OK 4"});
  CHECK(ask(server, a, "LEAVE 5 again") == Lines{"1: OK 5"});
  const std::vector<StoreServer::Departure> left = server.take_departures();
  REQUIRE(left.size() == 1);
  CHECK(left[0].rank == 1);
  CHECK(left[0].why == "ran out of memory: a?line?");
  CHECK(server.take_departures().empty());
  Client b{2, proven()};
  ask(server, b, "HELLO 1 0 2");
  ask(server, b, "LEAVE 2 " + std::string(5000, 'x'));
  const std::vector<StoreServer::Departure> long_one = server.take_departures();
  REQUIRE(long_one.size() == 1);
  CHECK(long_one[0].why == std::string(StoreServer::kMaxWhyBytes - 3, 'x') + "...");
  CHECK_FALSE(server.said_bye(0));  // leaving is not finishing
}

// ------------------------------------------------ the proof of the job secret

namespace {

std::string nonce_hex(char fill) { return carflow::hex_encode(std::string(job_auth::kNonceBytes, fill)); }

// The store's AUTH reply -> its nonce and proof (bytes).
void parse_store_auth(const std::string& reply, std::string* nonce, std::string* proof) {
  // "<conn>: AUTH <nonce> <proof>"
  const size_t auth = reply.find("AUTH ");
  REQUIRE(auth != std::string::npos);
  const std::string rest = reply.substr(auth + 5);
  const size_t space = rest.find(' ');
  REQUIRE(space != std::string::npos);
  REQUIRE(carflow::hex_decode(rest.substr(0, space), nonce));
  REQUIRE(carflow::hex_decode(rest.substr(space + 1), proof));
}

// The client's side of the exchange with `secret`; returns the store's
// reply to PROOF, and the lines the client sent in *sent.
Lines prove_with(StoreServer& server, Client& c, const std::string& secret, char nonce_fill,
                 std::vector<std::string>* sent = nullptr) {
  const std::string client_nonce(job_auth::kNonceBytes, nonce_fill);
  const std::string auth = "AUTH " + nonce_hex(nonce_fill);
  const Lines challenge = ask(server, c, auth);
  REQUIRE(challenge.size() == 1);
  std::string store_nonce, store_proof;
  parse_store_auth(challenge[0], &store_nonce, &store_proof);
  CHECK(store_nonce.size() == job_auth::kNonceBytes);
  // The client checks the store as the store checks the client.
  CHECK(job_auth::verify(store_proof, kSecret, job_auth::kStoreRole, "", client_nonce, store_nonce));
  const std::string proof =
      "PROOF " + carflow::hex_encode(job_auth::proof(secret, job_auth::kClientRole, "", client_nonce, store_nonce));
  if (sent != nullptr) *sent = {auth, proof};
  return ask(server, c, proof);
}

const std::string kRefusal = "ERR 0 no proof of the job secret";

}  // namespace

TEST_CASE("a connection that proves the job secret is served, and the store proves it too") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, {}};
  CHECK(StoreServer::max_line_bytes(a.session) == job_auth::kMaxUnprovenLineBytes);
  CHECK(prove_with(server, a, kSecret, 'a') == Lines{"1: OK 0"});
  CHECK(StoreServer::max_line_bytes(a.session) == carflow::bootstrap_protocol::kMaxLineBytes);
  CHECK(ask(server, a, "HELLO 1 0 2") == Lines{"1: OK 1"});
  CHECK(server.refused() == 0);
  server.drop(a.conn, a.session);
  CHECK(server.refused() == 0);
}

TEST_CASE("a connection without the secret is refused before any verb and counted") {
  for (const std::string& first : Lines{"HELLO 1 0 2", "PUT 1 k v", "GET 1 k", "FENCE 1", "BYE 1", "PROOF 00", "",
                                  "AUTH", "AUTH xyz", "AUTH " + nonce_hex('a') + "00", "auth " + nonce_hex('a'),
                                  std::string("\x01\xff garbage", 11)}) {
    INFO("first line '", first, "'");
    StoreServer server(2, kSecret, [](uint32_t) { return true; });
    Client x{1, {}};
    CHECK(ask(server, x, first) == Lines{"1: " + kRefusal});
    CHECK(x.session.closing);
    CHECK(x.session.rank < 0);
    CHECK(ask(server, x, "HELLO 2 0 2").empty());  // nothing more is read from it
    CHECK(server.refused() == 1);
    server.drop(x.conn, x.session);
    CHECK(server.refused() == 1);  // counted once
  }
}

TEST_CASE("a proof made with another secret is refused, and the rank stays free") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client x{1, {}}, a{2, {}};
  const std::string wrong(job_auth::kSecretBytes, '\x5b');
  CHECK(prove_with(server, x, wrong, 'x') == Lines{"1: " + kRefusal});
  CHECK(x.session.closing);
  CHECK(server.refused() == 1);
  CHECK(prove_with(server, a, kSecret, 'a') == Lines{"2: OK 0"});
  CHECK(ask(server, a, "HELLO 1 0 2") == Lines{"2: OK 1"});
}

TEST_CASE("a recorded exchange replayed on a new connection does not verify") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, {}}, replay{2, {}};
  std::vector<std::string> recorded;
  CHECK(prove_with(server, a, kSecret, 'a', &recorded) == Lines{"1: OK 0"});
  // The store answers the same AUTH with a fresh nonce, so the old PROOF is wrong.
  const Lines challenge = ask(server, replay, recorded[0]);
  REQUIRE(challenge.size() == 1);
  CHECK(challenge[0].substr(0, 8) == "2: AUTH ");
  CHECK(ask(server, replay, recorded[1]) == Lines{"2: " + kRefusal});
  CHECK(server.refused() == 1);
  // And a store's recorded answer fails a client's check: the client's nonce is new.
  std::string store_nonce, store_proof;
  parse_store_auth(challenge[0], &store_nonce, &store_proof);
  CHECK_FALSE(job_auth::verify(store_proof, kSecret, job_auth::kStoreRole, "",
                               std::string(job_auth::kNonceBytes, 'b'), store_nonce));
}

TEST_CASE("the exchange runs once, in order: a second AUTH or an early PROOF is refused") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client twice{1, {}};
  REQUIRE(ask(server, twice, "AUTH " + nonce_hex('t')).size() == 1);
  CHECK(ask(server, twice, "AUTH " + nonce_hex('t')) == Lines{"1: " + kRefusal});
  Client proven_twice{2, {}};
  CHECK(prove_with(server, proven_twice, kSecret, 'p') == Lines{"2: OK 0"});
  CHECK(ask(server, proven_twice, "AUTH " + nonce_hex('p')) ==
        Lines{"2: ERR " + nonce_hex('p') + " send HELLO <id> <rank> <nodes> first"});  // proven: not a refusal
  CHECK(server.refused() == 1);
}

TEST_CASE("a stranger reads no key and writes none") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client a{1, {}}, b{2, {}};
  REQUIRE(prove_with(server, a, kSecret, 'a') == Lines{"1: OK 0"});
  REQUIRE(prove_with(server, b, kSecret, 'b') == Lines{"2: OK 0"});
  ask(server, a, "HELLO 1 0 2");
  ask(server, b, "HELLO 1 1 2");
  CHECK(ask(server, a, "PUT 2 ep.0 real") == Lines{"1: OK 2"});
  CHECK(ask(server, b, "GET 2 live.1").empty());  // waits for rank 1's own key
  for (const std::string& line : Lines{"GET 1 ep.0", "PUT 1 live.1 forged", "PUT 1 ep.0 forged"}) {
    Client x{9, {}};
    INFO(line);
    CHECK(ask(server, x, line) == Lines{"9: " + kRefusal});
    server.drop(x.conn, x.session);
  }
  Client half{10, {}};  // past AUTH, never proven
  REQUIRE(ask(server, half, "AUTH " + nonce_hex('h')).size() == 1);
  CHECK(ask(server, half, "PUT 1 live.1 forged") == Lines{"10: " + kRefusal});
  CHECK(ask(server, a, "GET 3 ep.0") == Lines{"1: VAL 3 real"});
  CHECK(ask(server, a, "PUT 4 live.1 real1") == Lines{"2: VAL 2 real1", "1: OK 4"});
  CHECK(server.refused() == 4);
}

TEST_CASE("a connection dropped before its proof counts as refused, and one ended by the caller too") {
  StoreServer server(2, kSecret, [](uint32_t) { return true; });
  Client silent{1, {}}, long_line{2, {}};
  server.drop(silent.conn, silent.session);
  CHECK(server.refused() == 1);
  server.refuse(long_line.session);  // cfrun: a line past max_line_bytes
  CHECK(long_line.session.closing);
  server.drop(long_line.conn, long_line.session);
  CHECK(server.refused() == 2);
}
