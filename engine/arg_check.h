// CF_CHECK: agreement of single-valued arguments (GASNet collectives notes v1.7, "Argument
// conventions": root, nbytes, flags and the reduction must agree across
// images; "high-quality implementations are encouraged to issue an
// explanatory fatal error message if debugging is enabled or if checking for
// agreement does not require additional communication").
//
// Each call gets a digest of 8 fields packed in 64 bits (ArgField order,
// low bits first), wide where a difference is hard to rule out:
//   kind 5 bits (kind + 1, so a digest is never 0: 0 = none, CF_CHECK off),
//   root 7, nbytes 8, flags 7, op 7, counts 7, layout 7: a CRC of that width
//   of the field's value; algorithm 16: a CRC-16 of the generator's name.
// The digest rides on every message of the call (MsgOp::digest), so checking
// costs no extra message; comparing field by field names the argument that
// differs. A CRC of w bits catches every difference within w consecutive
// bits of a value (small roots and sizes) and misses others 1 time in 2^w:
// two algorithms (different generators registered, or CF_ALGO_<KIND> set
// differently) pass 1 time in 65536. A debugging aid.
//
// Once an image finds a difference, its later sends carry CF_ERR_MISMATCH and
// a report (field, the two images; for the algorithm the XOR of the two
// names' CRCs, from which either of those images recovers the other's name
// among its registered generators) instead of the digest, so the images
// that hear it fail alike and name the same argument.
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
// digest_a and digest_b are the two images' digests (the algorithm's names
// travel as the XOR of their CRCs).
uint64_t mismatch_report(ArgField field, uint32_t image_a, uint32_t image_b, uint64_t digest_a = 0,
                         uint64_t digest_b = 0);
bool is_mismatch_report(uint64_t value);
// The words of a report as image `self` tells them, `local` the schedule
// its own call ran: "CF_CHECK: argument nbytes differs between images:
// image 3 and image 0 passed different values"; for the algorithm, the
// names this image knows (its own; the other image's when it is one of the
// two and has that generator registered) and that the registered
// generators or CF_ALGO_<KIND> / cf_coll_set_algorithm differ between
// images or processes. "" for a value that is not a report.
std::string describe_mismatch(uint64_t report, uint32_t self, const Schedule& local);

// A message CAR of a checking instance completed (Engine::on_message_complete):
// a receive compares the sender's digest with the instance's own, or takes
// the sender's report; returns the status to complete with, recording the
// report in inst.report.
int check_arrival(Instance& inst, const CompiledCar& car, const MsgOp& op, int status);

}  // namespace carflow
