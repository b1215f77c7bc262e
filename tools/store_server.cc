#include "tools/store_server.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace carflow {

std::string take_field(std::string_view* rest) {
  const size_t space = rest->find(' ');
  std::string field(rest->substr(0, space));
  rest->remove_prefix(space == std::string_view::npos ? rest->size() : space + 1);
  return field;
}

bool parse_count(const std::string& name, const std::string& text, uint32_t min, uint32_t max, uint32_t* out,
                 std::string* error) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || v < min || v > max) {
    *error = name + " '" + text + "': expected an integer in [" + std::to_string(min) + ", " +
             std::to_string(max) + "]";
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

namespace {

// A reason as the launcher may print it on its own line: a rank's %XX can
// decode to any byte, a newline or an escape sequence among them.
std::string printable_why(std::string why) {
  if (why.size() > StoreServer::kMaxWhyBytes) why.replace(StoreServer::kMaxWhyBytes - 3, std::string::npos, "...");
  for (char& ch : why) {
    if (static_cast<unsigned char>(ch) < 0x20 || static_cast<unsigned char>(ch) > 0x7e) ch = '?';
  }
  return why;
}

}  // namespace

StoreServer::StoreServer(uint32_t nodes, std::string secret, std::function<bool(uint32_t)> rank_running)
    : nodes_(nodes),
      secret_(std::move(secret)),
      store_(nodes),
      rank_running_(std::move(rank_running)),
      rank_connection_(nodes, 0),
      said_bye_(nodes, false),
      left_(nodes, false) {}

void StoreServer::handle(uint64_t conn, Session& session, std::string_view line, std::vector<Outgoing>* out) {
  if (session.closing) return;
  if (session.proof != Session::Proof::kProven) return prove(conn, session, line, out);
  std::string_view rest = line;
  const std::string verb = take_field(&rest);
  std::string id = take_field(&rest);
  if (id.empty() || !bootstrap_protocol::is_token(id)) id = "0";
  if (verb == "HELLO") return hello(conn, session, id, rest, out);
  if (session.rank < 0) {
    out->push_back({conn, "ERR " + id + " send HELLO <id> <rank> <nodes> first"});
    return;
  }
  const uint32_t rank = static_cast<uint32_t>(session.rank);
  if (verb == "PUT") {
    const std::string key = take_field(&rest);
    if (key.empty() || !bootstrap_protocol::is_token(key) || !bootstrap_protocol::is_token(rest)) {
      out->push_back({conn, "ERR " + id + " PUT needs <key> <value> without spaces"});
      return;
    }
    store_.put(key, std::string(rest), out);
    out->push_back({conn, "OK " + id});
  } else if (verb == "GET" && !rest.empty() && bootstrap_protocol::is_token(rest)) {
    store_.get(conn, id, std::string(rest), out);
  } else if (verb == "FENCE") {
    store_.fence(rank, conn, id, out);
  } else if (verb == "BYE") {
    said_bye_[rank] = true;
    out->push_back({conn, "OK " + id});
  } else if (verb == "LEAVE") {
    if (rest.empty() || !bootstrap_protocol::is_token(rest)) {
      out->push_back({conn, "ERR " + id + " LEAVE needs <how> written as one field (a space as '_')"});
      return;
    }
    if (!left_[rank]) {
      left_[rank] = true;
      departures_.push_back({rank, printable_why(bootstrap_protocol::decode_words(rest))});
    }
    out->push_back({conn, "OK " + id});
  } else {
    out->push_back({conn, "ERR " + id + " unknown request '" + verb + "'"});
  }
}

void StoreServer::hello(uint64_t conn, Session& session, const std::string& id, std::string_view rest,
                        std::vector<Outgoing>* out) {
  const std::string rank_text = take_field(&rest);
  const std::string nodes_text(rest);
  std::string error;
  uint32_t rank = 0;
  if (session.rank >= 0) {
    error = "this connection is already rank " + std::to_string(session.rank);
  } else if (nodes_text != std::to_string(nodes_)) {
    error = "nodes '" + nodes_text + "' but cfrun started " + std::to_string(nodes_);
  } else if (!parse_count("rank", rank_text, 0, nodes_ - 1, &rank, &error)) {
  } else if (rank_connection_[rank] != 0) {
    error = "rank " + rank_text + " is already connected";
  } else if (!rank_running_(rank)) {
    error = "rank " + rank_text + " has already exited";
  }
  if (!error.empty()) {
    session.closing = true;
    out->push_back({conn, "ERR " + id + " " + error});
    return;
  }
  session.rank = rank;
  rank_connection_[rank] = conn;
  out->push_back({conn, "OK " + id});
}

size_t StoreServer::max_line_bytes(const Session& session) {
  return session.proof == Session::Proof::kProven ? bootstrap_protocol::kMaxLineBytes
                                                  : job_auth::kMaxUnprovenLineBytes;
}

// AUTH <client nonce>, answered with the store's nonce and proof; then
// PROOF <client proof>. Anything else, or a wrong proof, ends the
// connection with one reason that tells a stranger nothing more.
void StoreServer::prove(uint64_t conn, Session& session, std::string_view line, std::vector<Outgoing>* out) {
  std::string_view rest = line;
  const std::string verb = take_field(&rest);
  std::string bytes, error;
  if (session.proof == Session::Proof::kNone && verb == "AUTH" && rest.size() == 2 * job_auth::kNonceBytes &&
      hex_decode(rest, &bytes) && random_bytes(job_auth::kNonceBytes, &session.store_nonce, &error)) {
    session.client_nonce = std::move(bytes);
    session.proof = Session::Proof::kChallenged;
    const std::string proof =
        job_auth::proof(secret_, job_auth::kStoreRole, "", session.client_nonce, session.store_nonce);
    out->push_back({conn, "AUTH " + hex_encode(session.store_nonce) + " " + hex_encode(proof)});
    return;
  }
  if (session.proof == Session::Proof::kChallenged && verb == "PROOF" && hex_decode(rest, &bytes) &&
      job_auth::verify(bytes, secret_, job_auth::kClientRole, "", session.client_nonce, session.store_nonce)) {
    session.proof = Session::Proof::kProven;
    out->push_back({conn, "OK 0"});
    return;
  }
  refuse(session);
  out->push_back({conn, "ERR 0 no proof of the job secret"});
}

void StoreServer::refuse(Session& session) {
  if (session.closing) return;
  session.closing = true;
  ++refused_;
}

void StoreServer::drop(uint64_t conn, const Session& session) {
  if (session.proof != Session::Proof::kProven && !session.closing) ++refused_;
  if (session.rank >= 0 && rank_connection_[static_cast<size_t>(session.rank)] == conn) {
    rank_connection_[static_cast<size_t>(session.rank)] = 0;
  }
  store_.drop_connection(conn);
}

}  // namespace carflow
