#include "engine/reduce_ops.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

namespace carflow {
namespace {

template <typename T, typename F>
void elementwise(void* dst, const void* left, const void* right, size_t nbytes, F f) {
  const size_t n = nbytes / sizeof(T);
  T* d = static_cast<T*>(dst);
  const T* l = static_cast<const T*>(left);
  const T* r = static_cast<const T*>(right);
  for (size_t i = 0; i < n; ++i) d[i] = f(l[i], r[i]);  // alias-safe: reads before write
}

// (value, index) pairs; ties keep the smaller index, as MPI_MINLOC/MAXLOC do.
template <typename T, bool kMin>
void loc_kernel(const ReduceOp&, void* dst, const void* left, const void* right, size_t nbytes) {
  const size_t n = nbytes / (2 * sizeof(T));
  T* d = static_cast<T*>(dst);
  const T* l = static_cast<const T*>(left);
  const T* r = static_cast<const T*>(right);
  for (size_t i = 0; i < n; ++i) {
    T lv = l[2 * i], li = l[2 * i + 1], rv = r[2 * i], ri = r[2 * i + 1];
    bool take_left = kMin ? (lv < rv) : (lv > rv);
    if (lv == rv) take_left = li <= ri;
    d[2 * i] = take_left ? lv : rv;
    d[2 * i + 1] = take_left ? li : ri;
  }
}

template <typename T, int kOp>
void op_kernel(const ReduceOp&, void* dst, const void* left, const void* right, size_t nbytes) {
  if constexpr (kOp == kOpSum) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return static_cast<T>(a + b); });
  } else if constexpr (kOp == kOpProd) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return static_cast<T>(a * b); });
  } else if constexpr (kOp == kOpMin) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return std::min(a, b); });
  } else if constexpr (kOp == kOpMax) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return std::max(a, b); });
  } else if constexpr (std::is_integral_v<T> && kOp == kOpBand) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return static_cast<T>(a & b); });
  } else if constexpr (std::is_integral_v<T> && kOp == kOpBor) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return static_cast<T>(a | b); });
  } else if constexpr (std::is_integral_v<T> && kOp == kOpBxor) {
    elementwise<T>(dst, left, right, nbytes, [](T a, T b) { return static_cast<T>(a ^ b); });
  }
}

template <typename T>
ReduceOp::Kernel kernel_for(int op) {
  switch (op) {
    case kOpSum: return &op_kernel<T, kOpSum>;
    case kOpProd: return &op_kernel<T, kOpProd>;
    case kOpMin: return &op_kernel<T, kOpMin>;
    case kOpMax: return &op_kernel<T, kOpMax>;
    case kOpBand: return std::is_integral_v<T> ? &op_kernel<T, kOpBand> : nullptr;
    case kOpBor: return std::is_integral_v<T> ? &op_kernel<T, kOpBor> : nullptr;
    case kOpBxor: return std::is_integral_v<T> ? &op_kernel<T, kOpBxor> : nullptr;
    case kOpMinloc: return &loc_kernel<T, true>;
    case kOpMaxloc: return &loc_kernel<T, false>;
    default: return nullptr;
  }
}

ReduceOp::Kernel builtin_kernel(int op, int type) {
  switch (type) {
    case kInt8: return kernel_for<int8_t>(op);
    case kUint8: return kernel_for<uint8_t>(op);
    case kInt32: return kernel_for<int32_t>(op);
    case kUint32: return kernel_for<uint32_t>(op);
    case kInt64: return kernel_for<int64_t>(op);
    case kUint64: return kernel_for<uint64_t>(op);
    case kFloat: return kernel_for<float>(op);
    case kDouble: return kernel_for<double>(op);
    default: return nullptr;
  }
}

constexpr size_t kTypeSize[kTypeCount] = {1, 1, 4, 4, 8, 8, 4, 8};
constexpr const char* kOpNames[kOpCount] = {"SUM", "PROD", "MIN", "MAX", "BAND",
                                            "BOR", "BXOR", "MINLOC", "MAXLOC"};
constexpr const char* kTypeNames[kTypeCount] = {"INT8", "UINT8", "INT32", "UINT32",
                                                "INT64", "UINT64", "FLOAT", "DOUBLE"};

// Client functions combine one element at a time through the seed's vector
// signature (left_count = result_count = 1). A scratch element keeps results
// from overwriting an operand the callback may still read.
void client_kernel(const ReduceOp& op, void* dst, const void* left, const void* right,
                   size_t nbytes) {
  const size_t es = op.elem_size;
  thread_local std::vector<unsigned char> scratch;
  if (scratch.size() < es) scratch.resize(es);
  for (size_t off = 0; off + es <= nbytes; off += es) {
    op.client(scratch.data(), 1, static_cast<const char*>(left) + off, 1,
              static_cast<const char*>(right) + off, es, op.client_flags, op.arg);
    std::memcpy(static_cast<char*>(dst) + off, scratch.data(), es);
  }
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
  op.arg = func_arg;
  if (func >= 0) {
    if (static_cast<size_t>(func) >= table.size() || table[func].fn == nullptr) {
      *error = "func: " + std::to_string(func) + " is not an index of the function table " +
               "registered at cf_coll_init (" + std::to_string(table.size()) + " entries)";
      return false;
    }
    op.kernel = &client_kernel;
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
  op.kernel = builtin_kernel(opcode, type);
  if (op.kernel == nullptr) {
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
