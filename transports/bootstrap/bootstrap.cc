#include "transports/bootstrap/bootstrap.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>

#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace carflow {

namespace bootstrap_protocol {

bool is_token(std::string_view text) {
  for (char c : text) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

std::string encode_words(std::string_view words) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : words) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == ' ') {
      out += '_';
    } else if (c == '_' || c == '%' || byte < 0x21 || byte > 0x7e) {
      out += '%';
      out += kHex[byte >> 4];
      out += kHex[byte & 15];
    } else {
      out += c;
    }
  }
  return out;
}

std::string decode_words(std::string_view token) {
  auto hex = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
  };
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] == '_') {
      out += ' ';
    } else if (token[i] == '%' && i + 2 < token.size() && hex(token[i + 1]) >= 0 &&
               hex(token[i + 2]) >= 0) {
      out += static_cast<char>(hex(token[i + 1]) * 16 + hex(token[i + 2]));
      i += 2;
    } else {
      out += token[i];
    }
  }
  return out;
}

}  // namespace bootstrap_protocol

namespace {

using bootstrap_protocol::is_token;
using bootstrap_protocol::kMaxLineBytes;

constexpr int kConnectTimeoutMs = 10000;
constexpr int kHelloTimeoutMs = 30000;  // the launcher answers at once; this only bounds a stuck one
constexpr int kByeTimeoutMs = 10000;

// Takes the text up to the next space (or the end) off the front of *rest.
std::string_view take_field(std::string_view* rest) {
  const size_t space = rest->find(' ');
  std::string_view field = rest->substr(0, space);
  rest->remove_prefix(space == std::string_view::npos ? rest->size() : space + 1);
  return field;
}

bool parse_uint(std::string_view text, uint64_t max, uint64_t* out) {
  if (text.empty() || text.size() > 20) return false;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (digit > max || v > (max - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

}  // namespace

bool read_env_uint(const char* name, uint64_t min, uint64_t max, uint64_t* out, bool* present,
                   std::string* error) {
  const char* text = std::getenv(name);
  *present = text != nullptr && *text != '\0';
  if (!*present) return true;
  if (!parse_uint(text, max, out) || *out < min) {
    *error = std::string(name) + "='" + text + "': expected an integer in [" +
             std::to_string(min) + ", " + std::to_string(max) + "]";
    return false;
  }
  return true;
}

namespace {

int remaining_ms(std::chrono::steady_clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  return left.count() < 0 ? 0 : static_cast<int>(left.count());
}

// Non-blocking connect bounded by the deadline; returns a blocking socket or -1.
int connect_one(const addrinfo* ai, std::chrono::steady_clock::time_point deadline,
                int* err) {
  const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                          ai->ai_protocol);
  if (fd < 0) {
    *err = errno;
    return -1;
  }
  int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
  if (rc != 0 && errno == EINPROGRESS) {
    pollfd p{fd, POLLOUT, 0};
    do {
      rc = ::poll(&p, 1, remaining_ms(deadline));
    } while (rc < 0 && errno == EINTR);
    int so_error = 0;
    socklen_t len = sizeof so_error;
    if (rc == 0) {
      so_error = ETIMEDOUT;
    } else if (rc < 0 || ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len) != 0) {
      so_error = errno;
    }
    rc = so_error == 0 ? 0 : -1;
    errno = so_error;
  }
  if (rc != 0) {
    *err = errno;
    ::close(fd);
    return -1;
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const int one = 1;  // request/reply lines: Nagle plus delayed ACK would add 40 ms each
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

int connect_to(const std::string& kvs, std::string* error) {
  const size_t colon = kvs.rfind(':');
  uint64_t port = 0;
  if (colon == std::string::npos || colon == 0 ||
      !parse_uint(std::string_view(kvs).substr(colon + 1), 65535, &port) || port == 0) {
    *error = "CF_KVS='" + kvs + "': expected HOST:PORT with a port in [1, 65535]";
    return -1;
  }
  const std::string host = kvs.substr(0, colon);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* list = nullptr;
  const int gai = ::getaddrinfo(host.c_str(), kvs.c_str() + colon + 1, &hints, &list);
  if (gai != 0) {
    *error = "CF_KVS='" + kvs + "': cannot resolve '" + host + "': " + ::gai_strerror(gai);
    return -1;
  }
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kConnectTimeoutMs);
  int fd = -1, err = ECONNREFUSED;
  for (const addrinfo* ai = list; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = connect_one(ai, deadline, &err);
  }
  ::freeaddrinfo(list);
  if (fd < 0) {
    *error = "CF_KVS='" + kvs + "': cannot connect to the launcher's store: " +
             std::strerror(err);
  }
  return fd;
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::from_env(std::string* error) {
  error->clear();
  const char* kvs = std::getenv("CF_KVS");
  if (kvs == nullptr || *kvs == '\0') return nullptr;
  uint64_t nodes = 0, rank = 0, images = 0;
  bool has_nodes = false, has_rank = false, has_images = false;
  if (!read_env_uint("CF_NODES", 1, INT32_MAX, &nodes, &has_nodes, error)) return nullptr;
  if (!has_nodes) {
    *error = "CF_NODES is not set but CF_KVS is: cfrun sets both (run under tools/cfrun)";
    return nullptr;
  }
  if (!read_env_uint("CF_RANK", 0, nodes - 1, &rank, &has_rank, error)) return nullptr;
  if (!has_rank) {
    *error = "CF_RANK is not set but CF_KVS is: cfrun sets both (run under tools/cfrun)";
    return nullptr;
  }
  if (!read_env_uint("CF_IMAGES", 1, 65536, &images, &has_images, error)) return nullptr;
  const char* secret_hex = std::getenv(job_auth::kSecretVariable);
  std::string secret;
  if (secret_hex == nullptr || *secret_hex == '\0') {
    *error = std::string(job_auth::kSecretVariable) + " is not set but CF_KVS is: cfrun sets both (run under tools/cfrun)";
    return nullptr;
  }
  if (!job_auth::parse_secret(secret_hex, &secret, error)) return nullptr;
  return connect(kvs, static_cast<uint32_t>(rank), static_cast<uint32_t>(nodes),
                 static_cast<uint32_t>(images), secret, error);
}

namespace {

// One line of at most job_auth::kMaxUnprovenLineBytes, read a byte at a
// time (nothing past it may be taken from the socket: the reader thread
// owns what follows). false on timeout, end of stream or a longer line.
bool read_short_line(int fd, std::chrono::steady_clock::time_point deadline, std::string* line) {
  line->clear();
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, remaining_ms(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return false;
    char c;
    const ssize_t n = ::recv(fd, &c, 1, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    if (c == '\n') return true;
    if (line->size() >= job_auth::kMaxUnprovenLineBytes) return false;
    line->push_back(c);
  }
}

bool send_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// Both directions of the proof (job_auth.h): the store must answer our
// fresh nonce with its proof before we give ours.
bool prove_to_store(int fd, const std::string& kvs, const std::string& secret, std::string* error) {
  const std::string what = "CF_KVS='" + kvs + "': ";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kHelloTimeoutMs);
  std::string client_nonce, line;
  if (!random_bytes(job_auth::kNonceBytes, &client_nonce, error)) return false;
  if (!send_all(fd, "AUTH " + hex_encode(client_nonce) + "\n") || !read_short_line(fd, deadline, &line)) {
    *error = what + "the store closed the connection or did not answer its proof of the job secret";
    return false;
  }
  std::string_view rest = line;
  std::string store_nonce, store_proof;
  if (take_field(&rest) != "AUTH" || !hex_decode(take_field(&rest), &store_nonce) ||
      store_nonce.size() != job_auth::kNonceBytes || !hex_decode(rest, &store_proof) ||
      !job_auth::verify(store_proof, secret, job_auth::kStoreRole, "", client_nonce, store_nonce)) {
    *error = what + "the store did not prove it knows this job's secret (" + job_auth::kSecretVariable +
             "): not this job's cfrun";
    return false;
  }
  const std::string proof = job_auth::proof(secret, job_auth::kClientRole, "", client_nonce, store_nonce);
  if (!send_all(fd, "PROOF " + hex_encode(proof) + "\n") || !read_short_line(fd, deadline, &line) ||
      line != "OK 0") {
    *error = what + "the store refused this process's proof of the job secret (" + job_auth::kSecretVariable +
             " differs from cfrun's)";
    return false;
  }
  return true;
}

}  // namespace

std::unique_ptr<Bootstrap> Bootstrap::connect(const std::string& kvs, uint32_t rank,
                                              uint32_t nodes, uint32_t images_per_node,
                                              const std::string& secret, std::string* error) {
  error->clear();
  if (nodes == 0 || rank >= nodes) {
    *error = "bootstrap rank " + std::to_string(rank) + " of " + std::to_string(nodes) +
             " nodes: expected rank < nodes";
    return nullptr;
  }
  const int fd = connect_to(kvs, error);
  if (fd < 0) return nullptr;
  if (!prove_to_store(fd, kvs, secret, error)) {
    ::close(fd);
    return nullptr;
  }
  const int wake_fd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake_fd < 0) {
    *error = std::string("bootstrap: eventfd failed: ") + std::strerror(errno);
    ::close(fd);
    return nullptr;
  }
  std::unique_ptr<Bootstrap> b(new Bootstrap(fd, wake_fd, rank, nodes, images_per_node, secret));
  Reply reply;
  const std::string what = "bootstrap hello as rank " + std::to_string(rank) + " of " +
                           std::to_string(nodes) + " at " + kvs;
  if (!b->request("HELLO", std::to_string(rank) + " " + std::to_string(nodes),
                  kHelloTimeoutMs, what, &reply, error)) {
    return nullptr;
  }
  return b;
}

Bootstrap::Bootstrap(int fd, int wake_fd, uint32_t rank, uint32_t nodes,
                     uint32_t images_per_node, std::string secret)
    : fd_(fd), wake_fd_(wake_fd), rank_(rank), nodes_(nodes),
      images_per_node_(images_per_node), secret_(std::move(secret)) {
  reader_ = std::thread([this] { read_loop(); });
}

Bootstrap::~Bootstrap() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof one);
  reader_.join();
  ::close(fd_);
  ::close(wake_fd_);
}

bool Bootstrap::put(const std::string& key, const std::string& value, std::string* error) {
  const std::string what = "bootstrap put '" + key + "'";
  if (key.empty() || !is_token(key) || !is_token(value)) {
    *error = what + ": key and value must be printable ASCII without spaces (key non-empty)";
    return false;
  }
  if (key.size() + value.size() + 32 > kMaxLineBytes) {
    *error = what + ": key and value exceed " + std::to_string(kMaxLineBytes) + " bytes";
    return false;
  }
  Reply reply;
  return request("PUT", key + " " + value, -1, what, &reply, error);
}

bool Bootstrap::get(const std::string& key, std::string* value, int timeout_ms,
                    std::string* error) {
  const std::string what = "bootstrap get '" + key + "'";
  if (key.empty() || !is_token(key) || key.size() + 32 > kMaxLineBytes) {
    *error = what + ": key must be non-empty printable ASCII without spaces";
    return false;
  }
  Reply reply;
  if (!request("GET", key, timeout_ms, what, &reply, error)) return false;
  *value = std::move(reply.text);
  return true;
}

bool Bootstrap::fence(int timeout_ms, std::string* error) {
  Reply reply;
  return request("FENCE", "", timeout_ms, "bootstrap fence", &reply, error);
}

std::string Bootstrap::local_ip() const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  char text[INET6_ADDRSTRLEN] = {};
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 || addr.ss_family != AF_INET) return "";
  ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, text, sizeof text);
  return text;
}

std::string Bootstrap::derived_key(std::string_view purpose) const { return job_auth::derive_key(secret_, purpose); }

bool Bootstrap::bye(std::string* error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (said_bye_) return true;
  }
  Reply reply;
  if (!request("BYE", "", kByeTimeoutMs, "bootstrap bye", &reply, error)) return false;
  std::lock_guard<std::mutex> lock(mu_);
  said_bye_ = true;
  return true;
}

void Bootstrap::leave(const std::string& why) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    id = next_id_++;  // not waited for: the reader drops its OK by id
  }
  constexpr size_t kMaxWhyBytes = 4096;  // encoded, at most 3 times that: far below kMaxLineBytes
  const std::string how = bootstrap_protocol::encode_words(std::string_view(why).substr(0, kMaxWhyBytes));
  send_line("LEAVE " + std::to_string(id) + " " + how + "\n");
}

void Bootstrap::watch(LostCallback on_lost) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    on_lost_ = std::move(on_lost);
  }
  const uint64_t one = 1;  // the reader hands over notices that came before
  (void)!::write(wake_fd_, &one, sizeof one);
}

bool Bootstrap::request(const std::string& verb, const std::string& args, int timeout_ms,
                        const std::string& what, Reply* reply, std::string* error) {
  uint64_t id = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
      *error = what + ": launcher connection closed";
      return false;
    }
    id = next_id_++;
    waiting_.emplace(id, std::nullopt);
  }
  std::string line = verb + " " + std::to_string(id);
  if (!args.empty()) line += " " + args;
  line += '\n';
  const bool sent = send_line(line);
  const int send_errno = errno;
  std::unique_lock<std::mutex> lock(mu_);
  if (!sent) {
    waiting_.erase(id);
    *error = what + ": cannot send to the launcher: " + std::strerror(send_errno);
    return false;
  }
  auto done = [&] { return waiting_.at(id).has_value() || closed_; };
  if (timeout_ms < 0) {
    replied_.wait(lock, done);
  } else if (!replied_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done)) {
    waiting_.erase(id);  // a late reply is dropped by the reader
    *error = what + ": timed out after " + std::to_string(timeout_ms) + " ms";
    return false;
  }
  std::optional<Reply> got = std::move(waiting_.at(id));
  waiting_.erase(id);
  if (!got) {
    *error = what + ": launcher connection closed";
    return false;
  }
  if (!got->ok) {
    *error = what + ": launcher answered: " + got->text;
    return false;
  }
  *reply = std::move(*got);
  return true;
}

bool Bootstrap::send_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(write_mu_);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::send(fd_, line.data() + done, line.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The reader: the only thread that reads fd_. Runs until the destructor,
// also after the launcher closed the connection, so that watch() called
// later still gets the notices.
void Bootstrap::read_loop() {
  std::string buffer;
  char chunk[4096];
  bool open = true;
  for (;;) {
    pollfd fds[2] = {{open ? fd_ : -1, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      std::lock_guard<std::mutex> lock(mu_);  // cannot happen with valid fds; fail callers
      closed_ = true;
      replied_.notify_all();
      return;
    }
    if (fds[1].revents != 0) {
      uint64_t count = 0;
      (void)!::read(wake_fd_, &count, sizeof count);
      std::lock_guard<std::mutex> lock(mu_);
      if (stopping_) return;
    }
    if (open && fds[0].revents != 0) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n > 0) {
        buffer.append(chunk, static_cast<size_t>(n));
        size_t start = 0, end;
        while ((end = buffer.find('\n', start)) != std::string::npos) {
          handle_line(std::string_view(buffer).substr(start, end - start));
          start = end + 1;
        }
        buffer.erase(0, start);
      }
      const bool broken = n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN) ||
                          buffer.size() > kMaxLineBytes;
      if (broken) {
        open = false;
        std::lock_guard<std::mutex> lock(mu_);
        closed_ = true;
        if (!said_bye_ && !stopping_) {
          notices_.push_back({kLauncherRank, "launcher connection closed"});
        }
        replied_.notify_all();
      }
    }
    deliver_notices();
  }
}

void Bootstrap::handle_line(std::string_view line) {
  std::string_view rest = line;
  const std::string_view verb = take_field(&rest);
  const std::string_view first = take_field(&rest);
  uint64_t number = 0;
  if (!parse_uint(first, UINT64_MAX, &number)) return;  // not ours to answer; ignore
  std::lock_guard<std::mutex> lock(mu_);
  if (verb == "LOST") {
    if (number < kLauncherRank) {
      notices_.push_back({static_cast<uint32_t>(number), bootstrap_protocol::decode_words(rest)});
    }
    return;
  }
  const bool ok = verb == "OK" || verb == "VAL";
  if (!ok && verb != "ERR") return;
  auto it = waiting_.find(number);
  if (it == waiting_.end()) return;  // its caller timed out
  it->second = Reply{ok, std::string(rest)};
  replied_.notify_all();
}

void Bootstrap::deliver_notices() {
  std::vector<LostNotice> ready;
  LostCallback callback;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!on_lost_ || notices_.empty()) return;
    ready.swap(notices_);
    callback = on_lost_;
  }
  for (const LostNotice& n : ready) callback(n.rank, n.how);
}

}  // namespace carflow
