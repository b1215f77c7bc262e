// Validation of DAGs before anyone runs, saves or simulates them.
//
// A LocalDag is well formed when: every dependency names an existing CAR,
// the CARs are acyclic, every buffer range lies inside its buffer (user
// buffers by src_bytes/dst_bytes, temps by their slot size), message CARs name
// a peer in [0, P) other than the image itself, REDUCE/COPY operands have equal
// lengths, and every CAR reaches `exit` (a JOIN).
// A GlobalDag is valid when every LocalDag is, image i sits at index i, every
// SEND is matched by exactly one receive (same pair, same tag, equal bytes) and
// vice versa, and the DAG with each matched SEND/receive pair contracted to one
// node is acyclic: that makes it deadlock-free whether the transport completes
// a SEND eagerly or only once the receive is posted (rendezvous).
#pragma once

#include <string>
#include <vector>

#include "graph/car.h"

namespace carflow {

// Returns true when valid; otherwise false and *error names the image, the
// CAR and the rule that failed.
// elem_size: the spec's element size (Fold / Prefix REDUCE lengths).
bool validate_local(const LocalDag& dag, uint32_t images, std::string* error,
                    uint32_t elem_size = 1);
bool validate_global(const GlobalDag& dag, std::string* error);

// Data hazards: two CARs of the image that touch the same bytes, one of
// them writing, must be ordered by the image's own dependencies (directly
// or not), and nothing writes the user source. Costs C^2/64 words for C
// CARs: run for plug-in generators' DAGs and `carflow check`, not on every
// built-in schedule (their tests check them). Above kHazardCheckCars CARs
// per image it is skipped (returns true).
inline constexpr size_t kHazardCheckCars = 1u << 14;
bool check_hazards(const LocalDag& dag, std::string* error);

// Matches SENDs to receives by (sender, receiver, tag). Returns false with
// *error on an unmatched or doubly matched message or a byte-count mismatch.
bool match_messages(const GlobalDag& dag, std::vector<MessageEdge>* edges, std::string* error);

struct DagStats {
  uint64_t cars = 0;
  uint64_t messages = 0;        // matched SEND/receive pairs
  uint64_t message_bytes = 0;   // sum over messages
  uint64_t max_sends_per_image = 0;
  uint64_t critical_path = 0;   // longest chain of CARs, message edges included
};
// Statistics of a valid global DAG (call validate_global first).
DagStats dag_stats(const GlobalDag& dag);

}  // namespace carflow
