#include "transports/bootstrap/job_auth.h"

#include "transports/bootstrap/hmac.h"

namespace carflow::job_auth {
namespace {

std::string digest_bytes(const Sha256::Digest& d) { return std::string(reinterpret_cast<const char*>(d.data()), d.size()); }

void append_part(std::string* out, std::string_view part) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(part.size() >> shift & 0xff));
  out->append(part);
}

}  // namespace

bool new_secret(std::string* secret, std::string* error) { return random_bytes(kSecretBytes, secret, error); }

bool parse_secret(std::string_view hex, std::string* secret, std::string* error) {
  if (hex.size() != 2 * kSecretBytes || !hex_decode(hex, secret)) {
    *error = std::string(kSecretVariable) + ": expected " + std::to_string(2 * kSecretBytes) +
             " hex digits (cfrun sets it for each process)";
    return false;
  }
  return true;
}

std::string proof(std::string_view secret, std::string_view role, std::string_view context,
                  std::string_view first_nonce, std::string_view second_nonce) {
  std::string message;
  for (std::string_view part : {role, context, first_nonce, second_nonce}) append_part(&message, part);
  return digest_bytes(hmac_sha256(secret, message));
}

bool verify(std::string_view received, std::string_view secret, std::string_view role,
            std::string_view context, std::string_view first_nonce, std::string_view second_nonce) {
  return equal_in_constant_time(received, proof(secret, role, context, first_nonce, second_nonce));
}

std::string derive_key(std::string_view secret, std::string_view purpose) {
  return digest_bytes(hmac_sha256(secret, purpose));
}

}  // namespace carflow::job_auth
