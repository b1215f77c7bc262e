// Reduction operators bound to a call: built-in kernels (vectorizable loops
// over whole blocks) and client functions from the cf_coll_init table.
//
// func < 0 names a built-in: func = -1 - (op * 16 + type) (CF_BUILTIN).
// func >= 0 indexes the client table; the client function is called with the
// seed's vector signature (GASNet collectives notes v1.7, "Client-provided (prefix) reduction
// function"), one element at a time for element-wise combines.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace carflow {

// The GASNet notes' callback signature (cf_coll_reduce_fn in the C header).
using ClientReduceFn = void(void* results, size_t result_count, const void* left_operands,
                            size_t left_count, const void* right_operands, size_t elem_size,
                            int flags, int arg);

struct ClientFunction {
  ClientReduceFn* fn = nullptr;
  unsigned flags = 0;  // kNonCommutative | kAmSafe
};
inline constexpr unsigned kNonCommutative = 1u << 0;  // CF_COLL_NONCOMM
inline constexpr unsigned kAmSafe = 1u << 1;          // CF_COLL_AMSAFE

enum BuiltinOp { kOpSum, kOpProd, kOpMin, kOpMax, kOpBand, kOpBor, kOpBxor, kOpMinloc, kOpMaxloc,
                 kOpCount };
enum BuiltinType { kInt8, kUint8, kInt32, kUint32, kInt64, kUint64, kFloat, kDouble, kTypeCount };

struct ReduceOp {
  // dst = left op right over nbytes, element-wise; dst may alias left or right.
  using Kernel = void (*)(const ReduceOp& op, void* dst, const void* left, const void* right,
                          size_t nbytes);
  // Over `count` elements of src (graph/car.h, ReduceShape): Fold writes one
  // element, Prefix `count`; `carry` (nullptr = none) is the left-most operand.
  using ChunkKernel = void (*)(const ReduceOp& op, void* dst, const void* carry, const void* src,
                               size_t count);
  Kernel kernel = nullptr;
  ChunkKernel fold_kernel = nullptr;
  ChunkKernel prefix_kernel = nullptr;
  ClientReduceFn* client = nullptr;
  int client_flags = 0;
  int func = 0;  // the call's func: a table index or a CF_BUILTIN code (CF_CHECK compares it)
  int arg = 0;
  uint32_t elem_size = 1;
  bool commutative = true;
  bool amsafe = true;   // may run on helper threads

  void apply(void* dst, const void* left, const void* right, size_t nbytes) const {
    kernel(*this, dst, left, right, nbytes);
  }
  void fold(void* dst, const void* carry, const void* src, size_t count) const {
    fold_kernel(*this, dst, carry, src, count);
  }
  void prefix(void* dst, const void* carry, const void* src, size_t count) const {
    prefix_kernel(*this, dst, carry, src, count);
  }
};

// Resolves (func, func_arg) for elements of elem_size bytes. False with
// *error naming the argument and the rule (unknown op, wrong elem_size for
// the type, bitwise op on a floating type, index not in the table).
bool resolve_reduce_op(int func, int func_arg, size_t elem_size,
                       const std::vector<ClientFunction>& table, ReduceOp* out,
                       std::string* error);

// Element size a built-in expects (MINLOC/MAXLOC: a (value, index) pair of
// the type), or 0 for an invalid func.
size_t builtin_elem_size(int func);

}  // namespace carflow
