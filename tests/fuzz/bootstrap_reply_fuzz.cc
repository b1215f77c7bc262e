// The bootstrap client (transports/bootstrap/bootstrap.h) reading what a
// store sends it: a fake store on loopback answers Bootstrap::connect with
// the input's bytes, so the client's parsers see them as from the network.
// The first byte picks where the bytes go:
//   0    instead of the store's AUTH answer (the client's check of the store)
//   1    after a right AUTH answer, instead of the store's reply to PROOF
//   else after the proof, as everything the store says from HELLO on
//        (replies, VAL values, ERR reasons, LOST notices)
// The store then closes its side, so every wait of the client ends. Once
// connected, the client asks GETs until the connection is gone, and takes
// LOST notices. Then the words and hex codecs of the protocol on the same
// bytes: encode then decode gives the bytes back.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include "tests/fuzz/fuzz_check.h"
#include "transports/bootstrap/bootstrap.h"
#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

namespace {

using carflow_fuzz::check;
namespace job_auth = carflow::job_auth;

const std::string kSecret(job_auth::kSecretBytes, '\x5a');

bool send_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::send(fd, text.data(), text.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    text.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// One line from the client, or "" when it closed.
std::string read_line(int fd) {
  std::string line;
  char c;
  while (::recv(fd, &c, 1, 0) == 1 && c != '\n') line.push_back(c);
  return line;
}

// The loopback port the fake store listens on, for the whole run.
class Listener {
 public:
  Listener() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    check(fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
              ::listen(fd_, 16) == 0 && ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0,
          "a loopback listener for the fake store");
    kvs_ = "127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  int fd() const { return fd_; }
  const std::string& kvs() const { return kvs_; }

 private:
  int fd_ = -1;
  std::string kvs_;
};

// The store's side of one connection: its proof up to `stage`, then the
// input's bytes; then it reads until the client closes.
void fake_store(int listen_fd, unsigned stage, std::string_view bytes) {
  const int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  const std::string auth = read_line(fd);
  if (stage >= 1 && auth.rfind("AUTH ", 0) == 0) {
    std::string client_nonce;
    carflow::hex_decode(std::string_view(auth).substr(5), &client_nonce);
    const std::string store_nonce(job_auth::kNonceBytes, '\x11');
    const std::string proof = job_auth::proof(kSecret, job_auth::kStoreRole, "", client_nonce, store_nonce);
    send_all(fd, "AUTH " + carflow::hex_encode(store_nonce) + " " + carflow::hex_encode(proof) + "\n");
    read_line(fd);  // PROOF
    if (stage >= 2) send_all(fd, "OK 0\n");
  }
  send_all(fd, bytes);
  ::shutdown(fd, SHUT_WR);
  while (!read_line(fd).empty()) {
  }
  ::close(fd);
}

void client(const Listener& listener) {
  std::string error;
  std::unique_ptr<carflow::Bootstrap> b = carflow::Bootstrap::connect(listener.kvs(), 0, 2, 0, kSecret, &error);
  if (!b) {
    check(!error.empty(), "a failed connect says why");
    return;
  }
  // The engine bounds the rank itself (the transports ignore one past the job).
  b->watch([](uint32_t, const std::string&) {});
  std::string value;
  while (b->get("k", &value, -1, &error)) check(value.find('\n') == std::string::npos, "a value is one line");
  check(!error.empty(), "a failed get says why");
}

void codecs(std::string_view bytes) {
  using namespace carflow::bootstrap_protocol;
  const std::string words = encode_words(bytes);
  check(is_token(words), "encoded words are a token");
  check(decode_words(words) == bytes, "decoding encoded words gives them back");
  (void)decode_words(bytes);
  std::string decoded;
  check(carflow::hex_decode(carflow::hex_encode(bytes), &decoded) && decoded == bytes, "hex round trip");
  if (carflow::hex_decode(bytes, &decoded)) check(decoded.size() * 2 == bytes.size(), "hex halves the length");
  std::string secret;
  if (job_auth::parse_secret(bytes, &secret, &decoded)) check(secret.size() == job_auth::kSecretBytes, "a secret's size");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Listener listener;
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  std::thread store(fake_store, listener.fd(), static_cast<unsigned>(data[0]), bytes);
  client(listener);
  store.join();
  codecs(bytes);
  return 0;
}
