// CF_CHECK: agreement of single-valued arguments (GASNet collectives notes v1.7, "Argument
// conventions": root, nbytes, flags and the reduction must agree across
// images; "high-quality implementations are encouraged to issue an
// explanatory fatal error message if debugging is enabled or if checking for
// agreement does not require additional communication").
//
// Each call gets a digest of 8 one-byte fields (ArgField order, field i in
// byte i): the kind byte is kind + 1, so a digest is never 0 (0 = none, CF_CHECK
// off); the others are a CRC-8 of the field's value. The digest rides on
// every message of the call (MsgOp::digest), so checking costs no extra
// message; comparing field by field names the argument that differs. A CRC-8
// misses one disagreement in 256 per field: this is a debugging aid.
//
// Once an image finds a difference, its later sends carry CF_ERR_MISMATCH and
// a report (field, the two images) instead of the digest, so the images that
// hear it fail alike and name the same argument.
#pragma once

#include <cstdint>
#include <string>

#include "engine/engine.h"
#include "engine/schedule.h"

namespace carflow {

enum class ArgField : uint8_t { Kind, Root, Nbytes, Flags, Op, Counts, Layout, Algorithm };
inline constexpr int kArgFields = 8;
const char* arg_field_name(ArgField field);  // "nbytes"

// The call flags that must agree (carflow.h: CF_COLL_IN_* / OUT_* sync
// modes, SINGLE / LOCAL, AGGREGATE, EXCLUSIVE). ALL_THREADS and the
// *_IN_SEGMENT hints describe how this node calls, not the collective.
inline constexpr int kCheckedFlags = 0x1ff | (1 << 12);

// The digest of one call run with algorithm `gen` (never 0).
uint64_t arg_digest(const CollectiveCall& call, const GeneratorInfo& gen);
// Folds member digest `member` into an aggregate's `acc` field by field
// (start with acc = 0), so a member's disagreement shows in its field.
uint64_t combine_digests(uint64_t acc, uint64_t member);
// The first field in which two digests differ.
ArgField first_difference(uint64_t a, uint64_t b);

// A mismatch report: what a failed image sends in place of its digest.
uint64_t mismatch_report(ArgField field, uint32_t image_a, uint32_t image_b);
bool is_mismatch_report(uint64_t value);
// "CF_CHECK: argument nbytes differs between images: image 3 and image 0
// passed different values"; "" for a value that is not a report.
std::string describe_mismatch(uint64_t report);

// A message CAR of a checking instance completed (Engine::on_message_complete):
// a receive compares the sender's digest with the instance's own, or takes
// the sender's report; returns the status to complete with, recording the
// report in inst.report.
int check_arrival(Instance& inst, const CompiledCar& car, const MsgOp& op, int status);

}  // namespace carflow
