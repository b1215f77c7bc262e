#include "engine/arg_check.h"

#include <algorithm>
#include <cctype>
#include <initializer_list>
#include <string_view>
#include <vector>

#include "engine/status.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Where each field lies in a digest and the CRC that fills it, MSB first,
// polynomials without their top term: CRC-5/USB (0x05), CRC-7/MMC (0x09),
// CRC-8 (0x07), CRC-16/CCITT (0x1021). The widths fill the 64 bits.
struct FieldBits {
  int shift, width;
  uint32_t poly;
};
constexpr FieldBits kBits[kArgFields] = {
    {0, 5, 0x05},  {5, 7, 0x09},  {12, 8, 0x07}, {20, 7, 0x09},
    {27, 7, 0x09}, {34, 7, 0x09}, {41, 7, 0x09}, {48, 16, 0x1021},
};
static_assert(kBits[kArgFields - 1].shift + kBits[kArgFields - 1].width == 64);
static_assert(kCollKinds + 1 < (1 << 5), "the kind field holds kind + 1");

const FieldBits& bits_of(ArgField field) { return kBits[static_cast<int>(field)]; }

// Bit by bit: digests are made once per call and only when CF_CHECK is on.
uint32_t crc(const FieldBits& f, uint32_t c, const void* data, size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint32_t top = 1u << (f.width - 1), mask = (top << 1) - 1;
  for (size_t i = 0; i < n; ++i) {
    for (int bit = 7; bit >= 0; --bit) {
      const bool feedback = ((c & top) != 0) != (((p[i] >> bit) & 1) != 0);
      c = (c << 1) & mask;
      if (feedback) c ^= f.poly;
    }
  }
  return c;
}

uint32_t crc_of(ArgField field, std::initializer_list<uint64_t> values, uint32_t c = 0) {
  for (uint64_t v : values) c = crc(bits_of(field), c, &v, sizeof v);
  return c;
}

// A vector's length, then its elements.
template <typename T>
uint32_t crc_of(ArgField field, const std::vector<T>& values, uint32_t c = 0) {
  return crc(bits_of(field), crc_of(field, {values.size()}, c), values.data(), values.size() * sizeof(T));
}

uint32_t algorithm_crc(std::string_view name) { return crc(bits_of(ArgField::Algorithm), 0, name.data(), name.size()); }

uint32_t field_value(uint64_t digest, int field) {
  return static_cast<uint32_t>(digest >> kBits[field].shift) & ((1u << kBits[field].width) - 1);
}

uint64_t with_field(uint64_t digest, ArgField field, uint32_t value) {
  return digest | uint64_t{value} << bits_of(field).shift;
}

// Reports: bits 0-4 are 0 (a digest's kind never is), bits 5-7 the field;
// then the two images, 28 bits each from bits 8 and 36, or for the
// algorithm 20 bits each from bits 8 and 28 and the XOR of the two
// algorithms' CRCs from bit 48. Never 0: the two images differ.
constexpr uint32_t kImageMask = (1u << 28) - 1, kAlgoImageMask = (1u << 20) - 1;

std::string image_words(uint32_t image) {
  return image == kAlgoImageMask ? "an image numbered " + std::to_string(kAlgoImageMask) + " or more"
                                 : "image " + std::to_string(image);
}

// The generators of `kind` this process has whose names' CRC is `c`:
// "'a'", "'a' or 'b'", or what says there is none.
std::string names_with_crc(CollKind kind, uint32_t c) {
  std::string names;
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().list(kind)) {
    if (algorithm_crc(gen->name) == c) names += (names.empty() ? "'" : " or '") + gen->name + "'";
  }
  return names.empty() ? "an algorithm not registered in this process" : names;
}

// "CF_ALGO_GATHER_ALL"
std::string algo_variable(CollKind kind) {
  std::string name = coll_kind_name(kind);
  for (char& ch : name) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return "CF_ALGO_" + name;
}

// The algorithm part of a report: who chose what, as far as `self` knows.
std::string algorithm_words(uint64_t report, uint32_t self, const Schedule& local) {
  const uint32_t a = (report >> 8) & kAlgoImageMask, b = (report >> 28) & kAlgoImageMask;
  const uint32_t x = static_cast<uint32_t>(report >> 48);
  std::string words = image_words(a) + " and " + image_words(b) + " chose different algorithms";
  std::string variable = "CF_ALGO_<KIND>";
  if (!local.parts.empty()) {  // an aggregate: its digest combines the members'
    words += " for a member of an aggregate: this image (" + std::to_string(self) + ") chose";
    std::vector<std::string> names;
    for (const Schedule* part : local.parts) {
      const std::string name = "'" + part->spec().algorithm + "'";
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
    for (size_t i = 0; i < names.size(); ++i) words += (i == 0 ? " " : ", ") + names[i];
  } else {
    const CollectiveSpec& spec = local.spec();
    variable = algo_variable(spec.kind);
    words += ": this image (" + std::to_string(self) + ") chose '" + spec.algorithm + "' for this " +
             coll_kind_name(spec.kind);
    if (self == a || self == b) {
      words += " and " + image_words(self == a ? b : a) + " chose " +
               names_with_crc(spec.kind, x ^ algorithm_crc(spec.algorithm));
    }
  }
  return words + "; the registered generators (CF_PLUGINS, cf_generator_register) or the " + variable +
         " / cf_coll_set_algorithm choices differ between images or processes";
}

}  // namespace

const char* arg_field_name(ArgField field) {
  static const char* const kNames[kArgFields] = {"kind", "root", "nbytes", "flags",
                                                 "op", "counts", "layout", "algorithm"};
  return kNames[static_cast<int>(field)];
}

uint64_t arg_digest(const CollectiveCall& call, const GeneratorInfo& gen) {
  uint64_t d = 0;
  d = with_field(d, ArgField::Kind, static_cast<uint32_t>(call.kind) + 1);
  d = with_field(d, ArgField::Root, crc_of(ArgField::Root, {call.root}));
  d = with_field(d, ArgField::Nbytes, crc_of(ArgField::Nbytes, {call.nbytes}));
  d = with_field(d, ArgField::Flags, crc_of(ArgField::Flags, {uint64_t(call.flags & kCheckedFlags)}));
  // The op by its id (the table index or CF_BUILTIN code) and func_arg, not
  // the function pointer: another process maps the same function elsewhere.
  if (is_computational(call.kind)) {
    d = with_field(d, ArgField::Op, crc_of(ArgField::Op, {uint64_t(int64_t{call.op.func}),
                                                          uint64_t(int64_t{call.op.arg}), uint64_t{call.elem_size}}));
  }
  d = with_field(d, ArgField::Counts, crc_of(ArgField::Counts, call.counts));
  uint32_t layout = crc_of(ArgField::Layout, {call.src_blksz, call.src_offset, call.dst_blksz, call.dst_offset});
  layout = crc_of(ArgField::Layout, call.perm, crc_of(ArgField::Layout, call.displs, layout));
  d = with_field(d, ArgField::Layout, layout);
  return with_field(d, ArgField::Algorithm, algorithm_crc(gen.name));
}

uint64_t combine_digests(uint64_t acc, uint64_t member) {
  uint64_t out = 0;
  for (int f = 0; f < kArgFields; ++f) {
    const uint32_t pair[2] = {field_value(acc, f), field_value(member, f)};
    uint32_t v = crc(kBits[f], 0, pair, sizeof pair);
    if (f == 0 && v == 0) v = 1;  // the kind field keeps the digest non-zero
    out = with_field(out, static_cast<ArgField>(f), v);
  }
  return out;
}

ArgField first_difference(uint64_t a, uint64_t b) {
  for (int f = 0; f < kArgFields; ++f) {
    if (field_value(a, f) != field_value(b, f)) return static_cast<ArgField>(f);
  }
  return ArgField::Kind;
}

uint64_t mismatch_report(ArgField field, uint32_t image_a, uint32_t image_b, uint64_t digest_a, uint64_t digest_b) {
  const uint64_t head = uint64_t{static_cast<uint8_t>(field)} << 5;
  if (field != ArgField::Algorithm) {
    return head | uint64_t{image_a & kImageMask} << 8 | uint64_t{image_b & kImageMask} << 36;
  }
  const int algo = static_cast<int>(ArgField::Algorithm);
  const uint64_t x = field_value(digest_a, algo) ^ field_value(digest_b, algo);
  return head | uint64_t{std::min(image_a, kAlgoImageMask)} << 8 | uint64_t{std::min(image_b, kAlgoImageMask)} << 28 |
         x << 48;
}

bool is_mismatch_report(uint64_t value) { return value != 0 && (value & 0x1f) == 0; }

std::string describe_mismatch(uint64_t report, uint32_t self, const Schedule& local) {
  if (!is_mismatch_report(report)) return "";
  const auto field = static_cast<ArgField>((report >> 5) & 7);
  const std::string head = std::string("CF_CHECK: argument ") + arg_field_name(field) + " differs between images: ";
  if (field == ArgField::Algorithm) return head + algorithm_words(report, self, local);
  const uint64_t a = (report >> 8) & kImageMask, b = (report >> 36) & kImageMask;
  return head + "image " + std::to_string(a) + " and image " + std::to_string(b) + " passed different values";
}

int check_arrival(Instance& inst, const CompiledCar& car, const MsgOp& op, int status) {
  if (car.kind == CarKind::Send) return status;
  uint64_t report = 0;
  if (status == kErrMismatch && is_mismatch_report(op.digest)) {
    report = op.digest;  // the sender failed: pass its finding on
  } else if (status == kOk && op.digest != 0 && op.digest != inst.digest) {
    report = mismatch_report(first_difference(op.digest, inst.digest), op.peer, op.self, op.digest, inst.digest);
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
