// SHA-256 (FIPS 180-4, Secure Hash Standard, section 6.2) and HMAC-SHA256
// (RFC 2104, HMAC: Keyed-Hashing for Message Authentication), the one
// primitive the job's handshakes need (job_auth.h). Written here rather than
// linked: no crypto library is part of the build, and a few hundred bytes
// hashed per connection need no speed.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace carflow {

class Sha256 {
 public:
  static constexpr size_t kDigestBytes = 32;
  static constexpr size_t kBlockBytes = 64;
  using Digest = std::array<uint8_t, kDigestBytes>;

  Sha256();
  void update(std::string_view bytes);
  Digest finish();  // the object is spent afterwards
  static Digest of(std::string_view bytes);

 private:
  void compress(const uint8_t* block);
  uint32_t state_[8];
  uint8_t block_[kBlockBytes];
  size_t block_used_ = 0;
  uint64_t total_bytes_ = 0;
};

Sha256::Digest hmac_sha256(std::string_view key, std::string_view message);

// Whether a and b are equal, in time that depends on their sizes only, so a
// MAC check tells a guesser nothing about how much of its guess was right.
bool equal_in_constant_time(std::string_view a, std::string_view b);

// n bytes from getrandom(2); false with *error when the kernel gives none.
bool random_bytes(size_t n, std::string* out, std::string* error);

std::string hex_encode(std::string_view bytes);
// Lower- or upper-case hex of an even length; false on anything else.
bool hex_decode(std::string_view hex, std::string* bytes);

}  // namespace carflow
