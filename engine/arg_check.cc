#include "engine/arg_check.h"

#include <initializer_list>

#include "engine/status.h"

namespace carflow {
namespace {

// CRC-8, polynomial x^8 + x^2 + x + 1 (0x07), bit by bit: digests are made
// once per call and only when CF_CHECK is on.
uint8_t crc8(uint8_t crc, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int bit = 0; bit < 8; ++bit) crc = static_cast<uint8_t>((crc & 0x80) ? (crc << 1) ^ 0x07 : crc << 1);
  }
  return crc;
}

uint8_t crc8_of(std::initializer_list<uint64_t> values) {
  uint8_t crc = 0;
  for (uint64_t v : values) crc = crc8(crc, &v, sizeof v);
  return crc;
}

template <typename T>
uint8_t crc8_of(const std::vector<T>& values) {
  return crc8(crc8_of({values.size()}), values.data(), values.size() * sizeof(T));
}

uint8_t field_byte(uint64_t digest, int field) { return static_cast<uint8_t>(digest >> (8 * field)); }

uint64_t with_field(uint64_t digest, ArgField field, uint8_t value) {
  return digest | uint64_t{value} << (8 * static_cast<int>(field));
}

}  // namespace

const char* arg_field_name(ArgField field) {
  static const char* const kNames[kArgFields] = {"kind", "root", "nbytes", "flags",
                                                 "op", "counts", "layout", "algorithm"};
  return kNames[static_cast<int>(field)];
}

uint64_t arg_digest(const CollectiveCall& call, const GeneratorInfo& gen) {
  uint64_t d = 0;
  d = with_field(d, ArgField::Kind, static_cast<uint8_t>(static_cast<uint8_t>(call.kind) + 1));
  d = with_field(d, ArgField::Root, crc8_of({call.root}));
  d = with_field(d, ArgField::Nbytes, crc8_of({call.nbytes}));
  d = with_field(d, ArgField::Flags, crc8_of({uint64_t(call.flags & kCheckedFlags)}));
  // The op by its id (the table index or CF_BUILTIN code) and func_arg, not
  // the function pointer: another process maps the same function elsewhere.
  if (is_computational(call.kind)) {
    d = with_field(d, ArgField::Op, crc8_of({uint64_t(int64_t{call.op.func}), uint64_t(int64_t{call.op.arg}),
                                             uint64_t{call.elem_size}}));
  }
  d = with_field(d, ArgField::Counts, crc8_of(call.counts));
  const uint8_t layout = crc8_of({call.src_blksz, call.src_offset, call.dst_blksz, call.dst_offset,
                                  uint64_t{crc8_of(call.displs)}, uint64_t{crc8_of(call.perm)}});
  d = with_field(d, ArgField::Layout, layout);
  return with_field(d, ArgField::Algorithm, crc8(0, gen.name.data(), gen.name.size()));
}

uint64_t combine_digests(uint64_t acc, uint64_t member) {
  uint64_t out = 0;
  for (int f = 0; f < kArgFields; ++f) {
    const uint8_t pair[2] = {field_byte(acc, f), field_byte(member, f)};
    uint8_t b = crc8(0, pair, 2);
    if (f == 0 && b == 0) b = 1;  // the kind byte keeps the digest non-zero
    out = with_field(out, static_cast<ArgField>(f), b);
  }
  return out;
}

ArgField first_difference(uint64_t a, uint64_t b) {
  for (int f = 0; f < kArgFields; ++f) {
    if (field_byte(a, f) != field_byte(b, f)) return static_cast<ArgField>(f);
  }
  return ArgField::Kind;
}

// Layout: byte 0 is 0 (a digest's kind byte never is), byte 1 the field + 1,
// bytes 2-4 and 5-7 the two images (24 bits each).
uint64_t mismatch_report(ArgField field, uint32_t image_a, uint32_t image_b) {
  return (uint64_t{static_cast<uint8_t>(field)} + 1) << 8 | uint64_t{image_a & 0xffffff} << 16 |
         uint64_t{image_b & 0xffffff} << 40;
}

bool is_mismatch_report(uint64_t value) {
  const uint64_t field = (value >> 8) & 0xff;
  return (value & 0xff) == 0 && field >= 1 && field <= kArgFields;
}

std::string describe_mismatch(uint64_t report) {
  if (!is_mismatch_report(report)) return "";
  const auto field = static_cast<ArgField>(((report >> 8) & 0xff) - 1);
  const uint64_t a = (report >> 16) & 0xffffff, b = (report >> 40) & 0xffffff;
  return std::string("CF_CHECK: argument ") + arg_field_name(field) +
         " differs between images: image " + std::to_string(a) + " and image " + std::to_string(b) +
         " passed different values";
}

int check_arrival(Instance& inst, const CompiledCar& car, const MsgOp& op, int status) {
  if (car.kind == CarKind::Send) return status;
  uint64_t report = 0;
  if (status == kErrMismatch && is_mismatch_report(op.digest)) {
    report = op.digest;  // the sender failed: pass its finding on
  } else if (status == kOk && op.digest != 0 && op.digest != inst.digest) {
    report = mismatch_report(first_difference(op.digest, inst.digest), op.peer, op.self);
    status = kErrMismatch;
  }
  if (report != 0) {
    // Before the status (complete() sets it): a send that sees the status
    // finds the report.
    uint64_t none = 0;
    inst.report.compare_exchange_strong(none, report, std::memory_order_acq_rel);
  }
  return status;
}

}  // namespace carflow
