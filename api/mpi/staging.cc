// MPI buffers as carflow's contiguous bytes, and MPI's predefined
// reductions as carflow's built-in functions.
#include <cstring>
#include <span>

#include "api/mpi/layer.h"

namespace carflow::mpi {
namespace {

// Whether type's elements lie in memory in type-map order (so that one run
// of size bytes is exactly what MPI_Pack would write). Derived types other
// than these few are taken as reordered: packing them is always right.
bool in_type_map_order(MPI_Datatype type) {
  int nints = 0, naddrs = 0, ntypes = 0, combiner = 0;
  PMPI_Type_get_envelope(type, &nints, &naddrs, &ntypes, &combiner);
  if (combiner == MPI_COMBINER_NAMED) return true;
  const bool one_inner = combiner == MPI_COMBINER_DUP || combiner == MPI_COMBINER_CONTIGUOUS ||
                         combiner == MPI_COMBINER_VECTOR || combiner == MPI_COMBINER_HVECTOR ||
                         combiner == MPI_COMBINER_RESIZED;
  if (!one_inner || ntypes != 1 || nints > 3 || naddrs > 2) return false;
  int ints[3];
  MPI_Aint addrs[2];
  MPI_Datatype inner;
  PMPI_Type_get_contents(type, nints, naddrs, ntypes, ints, addrs, &inner);
  bool ordered = true;
  if (combiner == MPI_COMBINER_VECTOR) ordered = ints[2] > 0;  // stride
  if (combiner == MPI_COMBINER_HVECTOR) ordered = addrs[0] > 0;
  ordered = ordered && in_type_map_order(inner);
  int inner_combiner = 0;
  PMPI_Type_get_envelope(inner, &nints, &naddrs, &ntypes, &inner_combiner);
  if (inner_combiner != MPI_COMBINER_NAMED) PMPI_Type_free(&inner);
  return ordered;
}

// What staging asks of a datatype: a predefined one's from the table, any
// other's from MPI.
struct Layout {
  int size = 0;
  MPI_Aint extent = 0, true_lb = 0, true_extent = 0;
  bool named = false;
};

Layout layout_of(MPI_Datatype type) {
  if (const NamedType* t = named_type(type)) return {t->size, t->extent, t->true_lb, t->true_extent, true};
  Layout l;
  MPI_Aint lb = 0;
  PMPI_Type_size(type, &l.size);
  PMPI_Type_get_extent(type, &lb, &l.extent);
  PMPI_Type_get_true_extent(type, &l.true_lb, &l.true_extent);
  return l;
}

// count elements of type (layout l) form one run of bytes with no holes,
// in type-map order; *true_lb is its offset from the buffer address.
bool one_run(int count, MPI_Datatype type, const Layout& l, MPI_Aint* true_lb) {
  if (l.true_extent != l.size || (count > 1 && l.extent != l.size)) return false;
  *true_lb = l.true_lb;
  return l.named || in_type_map_order(type);  // a predefined type is its own map
}

enum class Mode { In, Out, InOut };

}  // namespace

size_t type_bytes(int count, MPI_Datatype type) {
  // An erroneous call is left for PMPI to report on its communicator.
  if (count <= 0 || type == MPI_DATATYPE_NULL) return 0;
  const NamedType* named = named_type(type);
  int size = named != nullptr ? named->size : 0;
  if (named == nullptr) PMPI_Type_size(type, &size);
  return count <= 0 || size <= 0 ? 0 : static_cast<size_t>(count) * static_cast<size_t>(size);
}

int Staged::stage(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align, bool fill) {
  const Layout layout = layout_of(type);
  nbytes = count <= 0 || layout.size <= 0 ? 0 : static_cast<size_t>(count) * static_cast<size_t>(layout.size);
  MPI_Aint lb = 0;
  if (one_run(count, type, layout, &lb)) {
    char* run = static_cast<char*>(buf) + lb;
    // align is a power of two (carflow's rule): a mask, not a division,
    // which would cost more than the rest of the staging.
    if (align <= 1 || (reinterpret_cast<uintptr_t>(run) & (align - 1)) == 0) {
      data = run;
      return MPI_SUCCESS;
    }
    tmp_.reset(new char[nbytes]);  // new[] aligns to 16, enough for any carflow type
    if (fill) std::memcpy(tmp_.get(), run, nbytes);
    user_ = run;
  } else {
    tmp_.reset(new char[nbytes]);
    packed_ = true;
    user_ = buf;
    if (fill) {
      int position = 0;
      const int rc = PMPI_Pack(buf, count, type, tmp_.get(), static_cast<int>(nbytes), &position, comm);
      if (rc != MPI_SUCCESS) return rc;
    }
  }
  data = tmp_.get();
  count_ = count;
  type_ = type;
  return MPI_SUCCESS;
}

int Staged::stage_in(const void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align) {
  return stage(const_cast<void*>(buf), count, type, comm, align, true);
}

int Staged::stage_out(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align) {
  writes_ = true;
  return stage(buf, count, type, comm, align, false);
}

int Staged::stage_inout(void* buf, int count, MPI_Datatype type, MPI_Comm comm, size_t align) {
  writes_ = true;
  return stage(buf, count, type, comm, align, true);
}

int Staged::write_back(MPI_Comm comm) {
  if (!packed_) {
    std::memcpy(user_, tmp_.get(), nbytes);
    return MPI_SUCCESS;
  }
  int position = 0;
  return PMPI_Unpack(tmp_.get(), static_cast<int>(nbytes), &position, user_, count_, type_, comm);
}

// Packed displacements: block i right after block i-1, from the start.
static bool packed_displs(const int counts[], const int displs[], int n) {
  long at = 0;
  for (int i = 0; i < n; at += counts[i], ++i) {
    if (displs[i] != at) return false;
  }
  return true;
}

int Blocks::stage(void* base, const int counts[], const int displs[], MPI_Datatype type, int n, MPI_Comm comm,
                  bool fill) {
  bytes.resize(n);
  long total = 0;
  for (int i = 0; i < n; ++i) {
    bytes[i] = type_bytes(counts[i], type);
    total += counts[i];
  }
  if (packed_displs(counts, displs, n)) {
    const int rc = fill ? whole_.stage_in(base, static_cast<int>(total), type, comm)
                        : whole_.stage_out(base, static_cast<int>(total), type, comm);
    data = whole_.data;
    nbytes = whole_.nbytes;
    return rc;
  }
  nbytes = type_bytes(static_cast<int>(total), type);
  packed_.reset(new char[nbytes + 1]);
  data = packed_.get();
  base_ = static_cast<char*>(base);
  counts_.assign(counts, counts + n);
  displs_.assign(displs, displs + n);
  type_ = type;
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type, &lb, &extent);
  size_t at = 0;
  for (int i = 0; fill && i < n; at += bytes[i], ++i) {
    if (bytes[i] == 0) continue;
    Staged block;
    const int rc = block.stage_in(base_ + displs[i] * extent, counts[i], type, comm);
    if (rc != MPI_SUCCESS) return rc;
    std::memcpy(data + at, block.data, bytes[i]);
  }
  return MPI_SUCCESS;
}

int Blocks::stage_in(const void* base, const int counts[], const int displs[], MPI_Datatype type, int n,
                     MPI_Comm comm) {
  return stage(const_cast<void*>(base), counts, displs, type, n, comm, true);
}

int Blocks::stage_out(void* base, const int counts[], const int displs[], MPI_Datatype type, int n,
                      MPI_Comm comm) {
  writes_ = true;
  return stage(base, counts, displs, type, n, comm, false);
}

int Blocks::finish(MPI_Comm comm) {
  if (!writes_) return MPI_SUCCESS;
  if (packed_ == nullptr) return whole_.finish(comm);
  MPI_Aint lb = 0, extent = 0;
  PMPI_Type_get_extent(type_, &lb, &extent);
  size_t at = 0;
  for (size_t i = 0; i < counts_.size(); at += bytes[i], ++i) {
    if (bytes[i] == 0) continue;
    Staged block;
    int rc = block.stage_out(base_ + displs_[i] * extent, counts_[i], type_, comm);
    if (rc != MPI_SUCCESS) return rc;
    std::memcpy(block.data, data + at, bytes[i]);
    rc = block.finish(comm);
    if (rc != MPI_SUCCESS) return rc;
  }
  return MPI_SUCCESS;
}

namespace {

enum class TypeClass { Int, Float, Byte, Pair };

struct TypeRow {
  MPI_Datatype type;
  int dt;            // CF_DT_*
  TypeClass cls;
};

size_t dt_bytes(int dt) {
  switch (dt) {
    case CF_DT_INT8: case CF_DT_UINT8: return 1;
    case CF_DT_INT32: case CF_DT_UINT32: case CF_DT_FLOAT: return 4;
    default: return 8;
  }
}

int int_dt(size_t bytes, bool is_signed) {
  switch (bytes) {
    case 1: return is_signed ? CF_DT_INT8 : CF_DT_UINT8;
    case 4: return is_signed ? CF_DT_INT32 : CF_DT_UINT32;
    case 8: return is_signed ? CF_DT_INT64 : CF_DT_UINT64;
    default: return -1;
  }
}

// MPI's predefined types that have a carflow type (MPI-4.0, 6.9.2
// "Predefined Reduction Operations": integer, floating point and byte
// classes; the MINLOC / MAXLOC pairs whose two halves share one type).
// MPI_SHORT, MPI_LONG_DOUBLE, complex types and mixed pairs
// (MPI_DOUBLE_INT) have none and stay with PMPI.
std::span<const TypeRow> reduction_types() {
  static const TypeRow rows[] = {
      {MPI_INT, int_dt(sizeof(int), true), TypeClass::Int},
      {MPI_DOUBLE, CF_DT_DOUBLE, TypeClass::Float},
      {MPI_FLOAT, CF_DT_FLOAT, TypeClass::Float},
      {MPI_LONG, int_dt(sizeof(long), true), TypeClass::Int},
      {MPI_UNSIGNED, int_dt(sizeof(unsigned), false), TypeClass::Int},
      {MPI_UNSIGNED_LONG, int_dt(sizeof(unsigned long), false), TypeClass::Int},
      {MPI_LONG_LONG, int_dt(sizeof(long long), true), TypeClass::Int},
      {MPI_LONG_LONG_INT, int_dt(sizeof(long long), true), TypeClass::Int},
      {MPI_UNSIGNED_LONG_LONG, int_dt(sizeof(unsigned long long), false), TypeClass::Int},
      {MPI_INT8_T, CF_DT_INT8, TypeClass::Int},
      {MPI_UINT8_T, CF_DT_UINT8, TypeClass::Int},
      {MPI_INT32_T, CF_DT_INT32, TypeClass::Int},
      {MPI_UINT32_T, CF_DT_UINT32, TypeClass::Int},
      {MPI_INT64_T, CF_DT_INT64, TypeClass::Int},
      {MPI_UINT64_T, CF_DT_UINT64, TypeClass::Int},
      {MPI_SIGNED_CHAR, CF_DT_INT8, TypeClass::Int},
      {MPI_UNSIGNED_CHAR, CF_DT_UINT8, TypeClass::Int},
      {MPI_AINT, int_dt(sizeof(MPI_Aint), true), TypeClass::Int},
      {MPI_OFFSET, int_dt(sizeof(MPI_Offset), true), TypeClass::Int},
      {MPI_COUNT, int_dt(sizeof(MPI_Count), true), TypeClass::Int},
      {MPI_INTEGER, CF_DT_INT32, TypeClass::Int},
      {MPI_INTEGER4, CF_DT_INT32, TypeClass::Int},
      {MPI_INTEGER8, CF_DT_INT64, TypeClass::Int},
      {MPI_REAL, CF_DT_FLOAT, TypeClass::Float},
      {MPI_REAL4, CF_DT_FLOAT, TypeClass::Float},
      {MPI_DOUBLE_PRECISION, CF_DT_DOUBLE, TypeClass::Float},
      {MPI_REAL8, CF_DT_DOUBLE, TypeClass::Float},
      {MPI_BYTE, CF_DT_UINT8, TypeClass::Byte},
      {MPI_2INT, int_dt(sizeof(int), true), TypeClass::Pair},
      {MPI_2INTEGER, CF_DT_INT32, TypeClass::Pair},
      {MPI_2REAL, CF_DT_FLOAT, TypeClass::Pair},
      {MPI_2DOUBLE_PRECISION, CF_DT_DOUBLE, TypeClass::Pair},
  };
  return rows;
}

// -1: not a predefined op with a carflow function; else its index in
// kOps, NamedType::func's order.
constexpr int kOps[kPredefinedOps] = {CF_OP_SUM,  CF_OP_PROD, CF_OP_MIN,    CF_OP_MAX,   CF_OP_BAND,
                                      CF_OP_BOR,  CF_OP_BXOR, CF_OP_MINLOC, CF_OP_MAXLOC};

// carflow's function for op (a kOps entry) on row's type of `bytes` bytes,
// or NamedType::kNoFunc. Pairs only with the LOC ops, the LOC ops only with pairs; bitwise
// ops on integers and bytes, the others on integers and floats. Any other
// combination is erroneous MPI: PMPI reports it as MPI would. The size
// check keeps out a Fortran kind that is not the C type assumed.
int builtin_func(const TypeRow& row, int cf_op, size_t bytes) {
  const bool loc = cf_op == CF_OP_MINLOC || cf_op == CF_OP_MAXLOC;
  const bool bitwise = cf_op == CF_OP_BAND || cf_op == CF_OP_BOR || cf_op == CF_OP_BXOR;
  bool ok = row.dt >= 0 && bytes == (row.cls == TypeClass::Pair ? 2 : 1) * dt_bytes(row.dt);
  if (ok && loc) ok = row.cls == TypeClass::Pair;
  if (ok && !loc) ok = row.cls != TypeClass::Pair && (bitwise ? row.cls != TypeClass::Float : row.cls != TypeClass::Byte);
  return ok ? CF_BUILTIN(cf_op, row.dt) : NamedType::kNoFunc;
}

// One predefined type into the table (row: its reduction type, or null);
// the first row naming a handle wins.
void add_named(MPI_Datatype type, const TypeRow* row) {
  if (type == MPI_DATATYPE_NULL) return;
  NamedType* slots = layer().named_types;
  size_t used = 0;
  for (size_t i = 0; i < kNamedTypeSlots; ++i) used += slots[i].type != MPI_DATATYPE_NULL;
  size_t i = named_slot(type);
  while (slots[i].type != MPI_DATATYPE_NULL && slots[i].type != type) i = (i + 1) % kNamedTypeSlots;
  if (slots[i].type == type || 2 * (used + 1) > kNamedTypeSlots) return;
  NamedType& t = slots[i];
  MPI_Aint lb = 0;
  PMPI_Type_size(type, &t.size);
  PMPI_Type_get_extent(type, &lb, &t.extent);
  PMPI_Type_get_true_extent(type, &t.true_lb, &t.true_extent);
  t.plain = t.size > 0 && t.extent == t.size && t.true_extent == t.size && t.true_lb == 0;
  for (int op = 0; row != nullptr && op < kPredefinedOps; ++op) {
    t.func[op] = builtin_func(*row, kOps[op], static_cast<size_t>(t.size));
  }
  t.type = type;
}

}  // namespace

void learn_named_types() {
  for (const TypeRow& row : reduction_types()) add_named(row.type, &row);
  // The predefined types data movement meets besides those.
  for (MPI_Datatype type : {MPI_CHAR, MPI_SHORT, MPI_UNSIGNED_SHORT, MPI_INT16_T, MPI_UINT16_T, MPI_WCHAR,
                            MPI_C_BOOL, MPI_LONG_DOUBLE, MPI_C_FLOAT_COMPLEX, MPI_C_DOUBLE_COMPLEX, MPI_PACKED,
                            MPI_FLOAT_INT, MPI_DOUBLE_INT, MPI_LONG_INT, MPI_SHORT_INT, MPI_CHARACTER,
                            MPI_LOGICAL, MPI_COMPLEX, MPI_DOUBLE_COMPLEX}) {
    add_named(type, nullptr);
  }
}

int predefined_op(MPI_Op op) {
  if (op == MPI_SUM) return 0;  // the commonest, before the table is built
  // In the order of kOps.
  static const MPI_Op ops[kPredefinedOps] = {MPI_SUM,  MPI_PROD, MPI_MIN,    MPI_MAX,   MPI_BAND,
                                             MPI_BOR,  MPI_BXOR, MPI_MINLOC, MPI_MAXLOC};
  for (int i = 1; i < kPredefinedOps; ++i) {
    if (op == ops[i]) return i;
  }
  return -1;
}

}  // namespace carflow::mpi
