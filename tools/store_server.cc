#include "tools/store_server.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "transports/bootstrap/bootstrap.h"

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

StoreServer::StoreServer(uint32_t nodes, std::function<bool(uint32_t)> rank_running)
    : nodes_(nodes),
      store_(nodes),
      rank_running_(std::move(rank_running)),
      rank_connection_(nodes, 0),
      said_bye_(nodes, false) {}

void StoreServer::handle(uint64_t conn, Session& session, std::string_view line, std::vector<Outgoing>* out) {
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

void StoreServer::drop(uint64_t conn, const Session& session) {
  if (session.rank >= 0 && rank_connection_[static_cast<size_t>(session.rank)] == conn) {
    rank_connection_[static_cast<size_t>(session.rank)] = 0;
  }
  store_.drop_connection(conn);
}

}  // namespace carflow
