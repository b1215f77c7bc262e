#include "engine/reduce_ops.h"

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <utility>

namespace carflow {
namespace {

// Integer sums and products wrap modulo 2^bits, as the hardware does,
// instead of being undefined on signed overflow: computed in the unsigned
// type of the same width (promoted past int for the narrow ones).
template <typename T, bool = std::is_integral_v<T>>
struct WideOf {
  using type = T;
};
template <typename T>
struct WideOf<T, true> {
  using type = std::make_unsigned_t<decltype(std::declval<T>() + 0u)>;
};
template <typename T>
using Wide = typename WideOf<T>::type;

// One built-in operator as an element type E and a combine f(left, right).
template <typename T, int kOp>
struct Scalar {
  using E = T;
  static E f(E a, E b) {
    if constexpr (kOp == kOpSum) return static_cast<T>(static_cast<Wide<T>>(a) + static_cast<Wide<T>>(b));
    if constexpr (kOp == kOpProd) return static_cast<T>(static_cast<Wide<T>>(a) * static_cast<Wide<T>>(b));
    if constexpr (kOp == kOpMin) return std::min(a, b);
    if constexpr (kOp == kOpMax) return std::max(a, b);
    if constexpr (kOp == kOpBand) return static_cast<T>(a & b);
    if constexpr (kOp == kOpBor) return static_cast<T>(a | b);
    if constexpr (kOp == kOpBxor) return static_cast<T>(a ^ b);
  }
};

// (value, index) pairs; ties keep the smaller index, as MPI_MINLOC/MAXLOC
// do, which makes the operator commutative and associative.
template <typename T, bool kMin>
struct Loc {
  struct E {
    T value, index;
  };
  static E f(E a, E b) {
    bool left = kMin ? a.value < b.value : a.value > b.value;
    if (a.value == b.value) left = a.index <= b.index;
    return left ? a : b;
  }
};

// Whole-block loops with the combine inlined: no per-element call, and
// restrict-qualified pointers per aliasing case (dst is the left operand,
// the right one, or neither: buffers are identical or disjoint), so the
// compiler vectorizes them (this file is built with -O3, engine/BUILD).
// Each loop also has an AVX2 clone beside the baseline (x86-64-v2, SSE4.2
// vectors), chosen once at load time by the CPU (an ifunc): wider vectors
// for the large combines of bandwidth-bound allreduces where the CPU has
// them. Not under ThreadSanitizer: an ifunc resolver runs
// before its runtime is up, and the instrumented resolver crashes.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define CF_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CF_VECTOR_CLONES
#endif
template <class Op, typename E>
CF_VECTOR_CLONES void combine_disjoint(E* __restrict d, const E* __restrict l, const E* __restrict r, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::f(l[i], r[i]);
}
template <class Op, typename E>
CF_VECTOR_CLONES void combine_into_left(E* __restrict d, const E* __restrict r, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::f(d[i], r[i]);
}
template <class Op, typename E>
CF_VECTOR_CLONES void combine_into_right(E* __restrict d, const E* __restrict l, size_t n) {
  for (size_t i = 0; i < n; ++i) d[i] = Op::f(l[i], d[i]);
}

template <class Op>
void elementwise(const ReduceOp&, void* dst, const void* left, const void* right, size_t nbytes) {
  using E = typename Op::E;
  const size_t n = nbytes / sizeof(E);
  E* d = static_cast<E*>(dst);
  const E* l = static_cast<const E*>(left);
  const E* r = static_cast<const E*>(right);
  if (d == l && d == r) {
    for (size_t i = 0; i < n; ++i) d[i] = Op::f(d[i], d[i]);
  } else if (d == l) {
    combine_into_left<Op>(d, r, n);
  } else if (d == r) {
    combine_into_right<Op>(d, l, n);
  } else {
    combine_disjoint<Op>(d, l, r, n);
  }
}

// Left to right, always: the fixed order that makes results bit-identical
// run to run and equal to a sequential reduction.
template <class Op>
void fold(const ReduceOp&, void* dst, const void* carry, const void* src, size_t count) {
  using E = typename Op::E;
  const E* s = static_cast<const E*>(src);
  E acc = carry ? Op::f(*static_cast<const E*>(carry), s[0]) : s[0];
  for (size_t i = 1; i < count; ++i) acc = Op::f(acc, s[i]);
  *static_cast<E*>(dst) = acc;
}

template <class Op>
void prefix(const ReduceOp&, void* dst, const void* carry, const void* src, size_t count) {
  using E = typename Op::E;
  const E* s = static_cast<const E*>(src);
  E* d = static_cast<E*>(dst);
  E acc = carry ? Op::f(*static_cast<const E*>(carry), s[0]) : s[0];
  d[0] = acc;
  for (size_t i = 1; i < count; ++i) d[i] = acc = Op::f(acc, s[i]);
}

template <class Op>
void bind(ReduceOp* op) {
  op->kernel = &elementwise<Op>;
  op->fold_kernel = &fold<Op>;
  op->prefix_kernel = &prefix<Op>;
}

template <typename T>
bool bind_for(int opcode, ReduceOp* op) {
  constexpr bool kInt = std::is_integral_v<T>;
  switch (opcode) {
    case kOpSum: bind<Scalar<T, kOpSum>>(op); return true;
    case kOpProd: bind<Scalar<T, kOpProd>>(op); return true;
    case kOpMin: bind<Scalar<T, kOpMin>>(op); return true;
    case kOpMax: bind<Scalar<T, kOpMax>>(op); return true;
    case kOpMinloc: bind<Loc<T, true>>(op); return true;
    case kOpMaxloc: bind<Loc<T, false>>(op); return true;
    default: break;
  }
  if constexpr (kInt) {
    switch (opcode) {
      case kOpBand: bind<Scalar<T, kOpBand>>(op); return true;
      case kOpBor: bind<Scalar<T, kOpBor>>(op); return true;
      case kOpBxor: bind<Scalar<T, kOpBxor>>(op); return true;
      default: break;
    }
  }
  return false;
}

bool bind_builtin(int opcode, int type, ReduceOp* op) {
  switch (type) {
    case kInt8: return bind_for<int8_t>(opcode, op);
    case kUint8: return bind_for<uint8_t>(opcode, op);
    case kInt32: return bind_for<int32_t>(opcode, op);
    case kUint32: return bind_for<uint32_t>(opcode, op);
    case kInt64: return bind_for<int64_t>(opcode, op);
    case kUint64: return bind_for<uint64_t>(opcode, op);
    case kFloat: return bind_for<float>(opcode, op);
    case kDouble: return bind_for<double>(opcode, op);
    default: return false;
  }
}

constexpr size_t kTypeSize[kTypeCount] = {1, 1, 4, 4, 8, 8, 4, 8};
constexpr const char* kOpNames[kOpCount] = {"SUM", "PROD", "MIN", "MAX", "BAND",
                                            "BOR", "BXOR", "MINLOC", "MAXLOC"};
constexpr const char* kTypeNames[kTypeCount] = {"INT8", "UINT8", "INT32", "UINT32",
                                                "INT64", "UINT64", "FLOAT", "DOUBLE"};

// Client functions through the GASNet notes' vector signature. Results go to a
// scratch area first: the callback may still be reading an operand that
// the destination aliases.
thread_local std::vector<unsigned char> t_scratch;
unsigned char* scratch(size_t bytes) {
  if (t_scratch.size() < bytes) t_scratch.resize(bytes);
  return t_scratch.data();
}

// Element-wise: one call per element (result_count = left_count = 1).
void client_elementwise(const ReduceOp& op, void* dst, const void* left, const void* right,
                        size_t nbytes) {
  const size_t es = op.elem_size;
  unsigned char* out = scratch(es);
  for (size_t off = 0; off + es <= nbytes; off += es) {
    op.client(out, 1, static_cast<const char*>(left) + off, 1,
              static_cast<const char*>(right) + off, es, op.client_flags, op.arg);
    std::memcpy(static_cast<char*>(dst) + off, out, es);
  }
}

// Fold: one call with the first count-1 elements as left operands and the
// last as the right one (a reduce callback always has left_count > 0); a
// carry is combined by a second call.
void client_fold(const ReduceOp& op, void* dst, const void* carry, const void* src, size_t count) {
  const size_t es = op.elem_size;
  const char* s = static_cast<const char*>(src);
  unsigned char* out = scratch(2 * es);
  if (count == 1) {
    std::memcpy(out, s, es);
  } else {
    op.client(out, 1, s, count - 1, s + (count - 1) * es, es, op.client_flags, op.arg);
  }
  if (carry != nullptr) {
    std::memcpy(out + es, out, es);
    op.client(out, 1, carry, 1, out + es, es, op.client_flags, op.arg);
  }
  std::memcpy(dst, out, es);
}

// Prefix: one call, the carry (if any) as the single left operand.
void client_prefix(const ReduceOp& op, void* dst, const void* carry, const void* src, size_t count) {
  const size_t bytes = count * op.elem_size;
  unsigned char* out = scratch(bytes);
  op.client(out, count, carry, carry ? 1 : 0, src, op.elem_size, op.client_flags, op.arg);
  std::memcpy(dst, out, bytes);
}

}  // namespace

size_t builtin_elem_size(int func) {
  if (func >= 0) return 0;
  const int code = -1 - func, op = code / 16, type = code % 16;
  if (op >= kOpCount || type >= kTypeCount) return 0;
  return (op == kOpMinloc || op == kOpMaxloc ? 2 : 1) * kTypeSize[type];
}

bool resolve_reduce_op(int func, int func_arg, size_t elem_size,
                       const std::vector<ClientFunction>& table, ReduceOp* out,
                       std::string* error) {
  ReduceOp op;
  op.elem_size = static_cast<uint32_t>(elem_size);
  op.func = func;
  op.arg = func_arg;
  if (func >= 0) {
    if (static_cast<size_t>(func) >= table.size() || table[func].fn == nullptr) {
      *error = "func: " + std::to_string(func) + " is not an index of the function table " +
               "registered at cf_coll_init (" + std::to_string(table.size()) + " entries)";
      return false;
    }
    op.kernel = &client_elementwise;
    op.fold_kernel = &client_fold;
    op.prefix_kernel = &client_prefix;
    op.client = table[func].fn;
    op.client_flags = static_cast<int>(table[func].flags & kNonCommutative);
    op.commutative = (table[func].flags & kNonCommutative) == 0;
    op.amsafe = (table[func].flags & kAmSafe) != 0;
    *out = op;
    return true;
  }
  const int code = -1 - func, opcode = code / 16, type = code % 16;
  if (opcode >= kOpCount || type >= kTypeCount) {
    *error = "func: " + std::to_string(func) + " is neither a table index nor CF_BUILTIN(op, type)";
    return false;
  }
  if (!bind_builtin(opcode, type, &op)) {
    *error = std::string("func: CF_OP_") + kOpNames[opcode] + " is not defined for CF_DT_" +
             kTypeNames[type] + " (bitwise ops take integer types)";
    return false;
  }
  const size_t want = builtin_elem_size(func);
  if (elem_size != want) {
    *error = "elem_size: " + std::to_string(elem_size) + " does not match CF_OP_" +
             kOpNames[opcode] + " on CF_DT_" + kTypeNames[type] + " (expected " +
             std::to_string(want) + ")";
    return false;
  }
  *out = op;
  return true;
}

}  // namespace carflow
