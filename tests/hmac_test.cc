// SHA-256 and HMAC-SHA256 (transports/bootstrap/hmac.h) against the
// published vectors: FIPS 180-2 Appendix B (SHA-256 examples) and RFC 4231
// (Identifiers and Test Vectors for HMAC-SHA-256), test cases 1-4, 6 and 7.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "transports/bootstrap/hmac.h"
#include "transports/bootstrap/job_auth.h"

using carflow::hex_decode;
using carflow::hex_encode;
using carflow::hmac_sha256;
using carflow::Sha256;

namespace {

std::string hex_of(const Sha256::Digest& d) {
  return hex_encode(std::string_view(reinterpret_cast<const char*>(d.data()), d.size()));
}

std::string bytes(const std::string& hex) {
  std::string out;
  REQUIRE(hex_decode(hex, &out));
  return out;
}

}  // namespace

TEST_CASE("SHA-256 gives the FIPS 180-2 example digests") {
  CHECK(hex_of(Sha256::of("abc")) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(hex_of(Sha256::of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")) ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  Sha256 million;
  const std::string thousand(1000, 'a');
  for (int i = 0; i < 1000; ++i) million.update(thousand);
  CHECK(hex_of(million.finish()) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  CHECK(hex_of(Sha256::of("")) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST_CASE("SHA-256 is the same whatever pieces the message is fed in") {
  const std::string message(200, 'x');
  const Sha256::Digest whole = Sha256::of(message);
  for (size_t piece : {1, 3, 55, 56, 63, 64, 65, 128}) {
    Sha256 h;
    for (size_t at = 0; at < message.size(); at += piece) h.update(std::string_view(message).substr(at, piece));
    INFO("piece ", piece);
    CHECK(h.finish() == whole);
  }
}

TEST_CASE("HMAC-SHA256 gives the RFC 4231 results") {
  struct Case {
    int number;
    std::string key, data, mac;
  };
  const std::string long_key(131, '\xaa');
  const Case cases[] = {
      {1, std::string(20, '\x0b'), "Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"},
      {2, "Jefe", "what do ya want for nothing?", "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"},
      {3, std::string(20, '\xaa'), std::string(50, '\xdd'),
       "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"},
      {4, bytes("0102030405060708090a0b0c0d0e0f10111213141516171819"), std::string(50, '\xcd'),
       "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"},
      {6, long_key, "Test Using Larger Than Block-Size Key - Hash Key First",
       "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"},
      {7, long_key,
       "This is a test using a larger than block-size key and a larger than block-size data. The key needs to "
       "be hashed before being used by the HMAC algorithm.",
       "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"},
  };
  for (const Case& c : cases) {
    INFO("RFC 4231 test case ", c.number);
    CHECK(hex_of(hmac_sha256(c.key, c.data)) == c.mac);
  }
}

TEST_CASE("MACs compare equal only when every byte is") {
  CHECK(carflow::equal_in_constant_time("abcd", "abcd"));
  CHECK_FALSE(carflow::equal_in_constant_time("abcd", "abce"));
  CHECK_FALSE(carflow::equal_in_constant_time("abcd", "xbcd"));
  CHECK_FALSE(carflow::equal_in_constant_time("abcd", "abc"));
  CHECK(carflow::equal_in_constant_time("", ""));
}

TEST_CASE("a proof verifies only with the same secret, role, context and nonces") {
  namespace auth = carflow::job_auth;
  std::string secret, other, error;
  REQUIRE(auth::new_secret(&secret, &error));
  REQUIRE(auth::new_secret(&other, &error));
  CHECK(secret.size() == auth::kSecretBytes);
  CHECK(secret != other);
  const std::string a(32, 'a'), b(32, 'b');
  const std::string p = auth::proof(secret, auth::kStoreRole, "", a, b);
  CHECK(p.size() == auth::kProofBytes);
  CHECK(auth::verify(p, secret, auth::kStoreRole, "", a, b));
  CHECK_FALSE(auth::verify(p, other, auth::kStoreRole, "", a, b));
  CHECK_FALSE(auth::verify(p, secret, auth::kClientRole, "", a, b));
  CHECK_FALSE(auth::verify(p, secret, auth::kStoreRole, "0>1", a, b));
  CHECK_FALSE(auth::verify(p, secret, auth::kStoreRole, "", b, a));
  CHECK_FALSE(auth::verify(p.substr(1), secret, auth::kStoreRole, "", a, b));
}

TEST_CASE("CF_JOB_SECRET must be 64 hex digits") {
  std::string secret, error;
  CHECK(carflow::job_auth::parse_secret(std::string(64, 'A'), &secret, &error));
  CHECK(secret == std::string(32, '\xaa'));
  for (const std::string& bad : std::vector<std::string>{"", "abc", std::string(63, 'a'), std::string(66, 'a'), std::string(64, 'g')}) {
    INFO("'", bad, "'");
    error.clear();
    CHECK_FALSE(carflow::job_auth::parse_secret(bad, &secret, &error));
    CHECK(error.find("CF_JOB_SECRET: expected 64 hex digits") != std::string::npos);
  }
}
