// Who may join a job. cfrun makes a random secret per job and hands it to
// its processes in their environment (CF_JOB_SECRET, 64 hex digits), never
// on a command line. Every connection to cfrun's store and every liveness
// link proves, in both directions, that its ends know the secret before
// anything else is served, without sending it: each side sends a fresh
// random nonce and answers with HMAC-SHA256 (hmac.h) over both nonces and
// its role. A recorded exchange does not verify again (the other side's
// nonce is new each time), and one side's answer is never the other's (the
// role is part of the MAC).
//
// The store's lines (transports/bootstrap/bootstrap.h has the rest):
//   client: AUTH <client nonce>          64 hex digits each
//   store:  AUTH <store nonce> <store proof>
//   client: PROOF <client proof>
//   store:  OK 0                         or ERR 0 <reason>, then it closes
// Until the proof, a line is at most kMaxUnprovenLineBytes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace carflow::job_auth {

inline constexpr char kSecretVariable[] = "CF_JOB_SECRET";
inline constexpr size_t kSecretBytes = 32;  // 256 bits
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;   // one HMAC-SHA256
inline constexpr size_t kMaxUnprovenLineBytes = 256;

// The roles whose proofs differ: a store's answer cannot pass as a client's.
inline constexpr std::string_view kStoreRole = "carflow store";
inline constexpr std::string_view kClientRole = "carflow store client";
inline constexpr std::string_view kAcceptorRole = "carflow liveness acceptor";
inline constexpr std::string_view kConnectorRole = "carflow liveness connector";

// A new secret (kSecretBytes from getrandom); false with *error if none.
bool new_secret(std::string* secret, std::string* error);
// CF_JOB_SECRET's text -> the secret's bytes; false with *error naming the
// variable and the rule.
bool parse_secret(std::string_view hex, std::string* secret, std::string* error);

// The MAC a side sends: HMAC-SHA256(secret, role, context, both nonces),
// each part length-prefixed so no two different inputs hash alike.
// context names the link (the liveness ranks); empty for the store.
std::string proof(std::string_view secret, std::string_view role, std::string_view context,
                  std::string_view first_nonce, std::string_view second_nonce);
// Whether `received` is proof(...) with these arguments, compared in
// constant time.
bool verify(std::string_view received, std::string_view secret, std::string_view role,
            std::string_view context, std::string_view first_nonce, std::string_view second_nonce);

// A key for one purpose (the liveness mesh's), derived from the secret so
// that the secret itself serves the store alone: HMAC-SHA256(secret, purpose).
std::string derive_key(std::string_view secret, std::string_view purpose);

}  // namespace carflow::job_auth
