// cfrun's store as its clients meet it, without sockets (tools/store_server.h):
// HELLO first, PUT / GET / FENCE / BYE, waits answered when they can be, and
// failed when a rank is lost.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "tools/store_server.h"

using carflow::Outgoing;
using carflow::StoreServer;

namespace {

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
  StoreServer server(3, [&](uint32_t r) { return running[r]; });
  Client a{1, {}}, b{2, {}}, c{3, {}}, d{4, {}};
  CHECK(ask(server, a, "PUT 7 k v") == Lines{"1: ERR 7 send HELLO <id> <rank> <nodes> first"});
  CHECK_FALSE(a.session.closing);
  CHECK(ask(server, a, "HELLO 1 0 4") == Lines{"1: ERR 1 nodes '4' but cfrun started 3"});
  CHECK(a.session.closing);
  CHECK(ask(server, b, "HELLO 1 0 3") == Lines{"2: OK 1"});
  CHECK(b.session.rank == 0);
  CHECK(ask(server, b, "HELLO 2 1 3") == Lines{"2: ERR 2 this connection is already rank 0"});
  CHECK(ask(server, c, "HELLO 1 0 3") == Lines{"3: ERR 1 rank 0 is already connected"});
  CHECK(ask(server, d, "HELLO 1 2 3") == Lines{"4: ERR 1 rank 2 has already exited"});
  Client e{5, {}};
  CHECK(ask(server, e, "HELLO 1 x 3") == Lines{"5: ERR 1 rank 'x': expected an integer in [0, 2]"});
  // A dropped connection frees its rank.
  server.drop(b.conn, b.session);
  Client f{6, {}};
  CHECK(ask(server, f, "HELLO 1 0 3") == Lines{"6: OK 1"});
}

TEST_CASE("a GET waits for its key's PUT; PUT and GET refuse malformed lines") {
  StoreServer server(2, [](uint32_t) { return true; });
  Client a{1, {}}, b{2, {}};
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
  StoreServer server(2, [](uint32_t) { return true; });
  Client a{1, {}}, b{2, {}};
  ask(server, a, "HELLO 1 0 2");
  ask(server, b, "HELLO 1 1 2");
  CHECK(ask(server, a, "FENCE 2").empty());
  CHECK(ask(server, a, "FENCE 3").empty());  // round 2 for rank 0
  CHECK(ask(server, b, "FENCE 4") == Lines{"1: OK 2", "2: OK 4"});
  CHECK(ask(server, b, "FENCE 5") == Lines{"1: OK 3", "2: OK 5"});
}

TEST_CASE("after a loss, waits that cannot end fail, and later ones fail at once") {
  StoreServer server(3, [](uint32_t) { return true; });
  Client a{1, {}}, b{2, {}};
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
  StoreServer server(2, [](uint32_t) { return true; });
  Client a{1, {}};
  ask(server, a, "HELLO 1 1 2");
  CHECK_FALSE(server.said_bye(1));
  CHECK(ask(server, a, "BYE 2") == Lines{"1: OK 2"});
  CHECK(server.said_bye(1));
  CHECK_FALSE(server.said_bye(0));
}
