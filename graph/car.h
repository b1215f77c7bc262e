// CAR and DAG types: the data every other part of carflow speaks.
//
// Terms (graph/README.md, api/README.md):
//   image      one participant; in a DAG, images are team ranks 0..P-1.
//   CAR        one node of a DAG (the MPICH communication agent notes' request).
//   LocalDag   the CARs one image runs for one collective.
//   GlobalDag  the LocalDags of all P images plus the collective's arguments;
//              matching each SEND to its RECV gives the message edges.
// This header is pure data: no threads, no sockets, no engine types.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/small_vector.h"

namespace carflow {

using CarId = uint32_t;
inline constexpr CarId kNoCar = UINT32_MAX;

enum class CarKind : uint8_t {
  Send,        // send `src` to `peer` under `tag`
  Recv,        // receive from `peer` under `tag` into `dst`
  RecvReduce,  // receive from `peer` and combine with the op into `dst`: dst = dst op
               // incoming, or with `src` set, dst = src op incoming (saves a copy)
  Reduce,      // dst = src op src2 (src is the left operand); see ReduceShape
  Copy,        // dst = src
  Join,        // no data; completes when its predecessors have
};

enum class BufferSpace : uint8_t {
  None,     // no data (JOIN, zero-byte messages)
  UserSrc,  // the caller's source buffer
  UserDst,  // the caller's destination buffer
  Temp,     // a temporary slot owned by the instance
};

struct BufferRef {
  BufferSpace space = BufferSpace::None;
  uint32_t slot = 0;     // temp slot index (Temp only)
  uint64_t offset = 0;   // bytes from the start of the buffer or slot
  uint64_t length = 0;   // bytes
  bool operator==(const BufferRef&) const = default;
};

// What a REDUCE computes. `chunks` below: src cut into runs of elements, the
// first `first_elems` long, then `chunk_elems` each (the last may be
// shorter); chunk_elems == 0 makes the whole src one chunk, first_elems == 0
// means "as long as chunk_elems". Element size: the spec's elem_size.
//   Elementwise  dst = src op src2, element by element (equal lengths).
//   Fold         one dst element per chunk: the chunk combined left to right
//                (the GASNet notes' reduce callback: left operands, one right);
//                with src2 (one element per chunk) as the left-most operand.
//   Prefix       dst as long as src; within each chunk dst[j] = src[first]
//                op ... op src[j], with src2[chunk] (if given) on the left.
enum class ReduceShape : uint8_t { Elementwise, Fold, Prefix };

// Progress: B may only start after A (ordering, e.g. a round structure).
// Buffer: B touches bytes that A writes or reads (a data hazard).
// The engine waits for both alike; the kind is kept for readers and transforms.
enum class DepKind : uint8_t { Progress, Buffer };

struct Dep {
  CarId car = kNoCar;
  DepKind kind = DepKind::Progress;
  bool operator==(const Dep&) const = default;
};
// A CAR's dependencies: up to three inside the Car, more on the heap.
using CarDeps = SmallVector<Dep, 3>;

struct Car {
  CarKind kind = CarKind::Join;
  uint32_t peer = 0;        // team rank of the other side (SEND/RECV/RECV_REDUCE)
  uint32_t tag = 0;         // edge tag: unique per (sender, receiver) pair in one DAG
  BufferRef src;            // SEND data, COPY source, REDUCE left operand,
                            // RECV_REDUCE local operand (none = dst itself)
  BufferRef src2;           // REDUCE right operand
  BufferRef dst;            // RECV/RECV_REDUCE/COPY/REDUCE destination
  bool incoming_left = false;  // RECV_REDUCE: incoming is the left operand (else the right)
  ReduceShape shape = ReduceShape::Elementwise;  // REDUCE only
  uint64_t first_elems = 0;   // Fold / Prefix chunking (ReduceShape)
  uint64_t chunk_elems = 0;
  bool sync = false;        // added by a sync-mode transform (graph/transforms.h)
  // Aggregates (graph/aggregate.h): the member collective this CAR belongs to.
  // It selects the member's user buffers and reduction op, and its messages
  // travel under the member's sequence number. 0 outside aggregates.
  uint32_t member = 0;
  CarDeps deps;
  bool operator==(const Car&) const = default;

  bool is_message() const {
    return kind == CarKind::Send || kind == CarKind::Recv || kind == CarKind::RecvReduce;
  }
  bool is_receive() const { return kind == CarKind::Recv || kind == CarKind::RecvReduce; }
  // Bytes this CAR moves on the wire (SEND: src, receives: dst).
  uint64_t message_bytes() const { return kind == CarKind::Send ? src.length : dst.length; }
};

// The chunks of a Fold / Prefix REDUCE over `elems` source elements
// (ReduceShape): calls f(chunk index, first element, element count) in
// order; returns the number of chunks (0 for no elements).
template <typename F>
uint64_t for_each_chunk(const Car& car, uint64_t elems, F f) {
  if (elems == 0) return 0;
  uint64_t len = car.chunk_elems == 0 ? elems : (car.first_elems ? car.first_elems : car.chunk_elems);
  uint64_t start = 0, c = 0;
  while (start < elems) {
    if (len > elems - start) len = elems - start;
    f(c++, start, len);
    start += len;
    len = car.chunk_elems == 0 ? elems : car.chunk_elems;
  }
  return c;
}
inline uint64_t chunk_count(const Car& car, uint64_t elems) {
  return for_each_chunk(car, elems, [](uint64_t, uint64_t, uint64_t) {});
}

// The order is the C API's CF_KIND_* order.
enum class CollKind : uint8_t {
  Broadcast,
  Barrier,
  Allreduce,
  Scatter,    // root's block i goes to image i
  Gather,     // image i's block goes to block i of the root's destination
  GatherAll,  // every image's destination gets every image's block
  Exchange,   // block j of image i's source goes to block i of image j's destination
  Permute,    // image i's source goes to image perm[i]'s destination
  ReduceVec,      // element-wise over every image's vector, result at the root
  Scan,           // image i gets x_0 op ... op x_i (exclusive: ... op x_{i-1})
  ReduceScatter,  // element-wise reduction; image i keeps block i of the result
  Reduce,         // GASNet notes: a block-cyclic array reduced to one element at the root
  PrefixReduce,   // GASNet notes: prefix reduction of a block-cyclic array into another
};
inline constexpr int kCollKinds = 13;
// The C API's CF_COLL_EXCLUSIVE (scan): spec.flags bit.
inline constexpr int kExclusiveFlag = 1 << 12;
// Computational kinds reduce with an op and need whole elements.
inline bool is_computational(CollKind k) {
  return k == CollKind::Allreduce || k >= CollKind::ReduceVec;
}

const char* coll_kind_name(CollKind kind);
bool parse_coll_kind(const std::string& name, CollKind* kind);
const char* car_kind_name(CarKind kind);
bool parse_car_kind(const std::string& name, CarKind* kind);
const char* buffer_space_name(BufferSpace space);
bool parse_buffer_space(const std::string& name, BufferSpace* space);
const char* reduce_shape_name(ReduceShape shape);
bool parse_reduce_shape(const std::string& name, ReduceShape* shape);
const char* dep_kind_name(DepKind kind);
bool parse_dep_kind(const std::string& name, DepKind* kind);

// The arguments a generator sees: everything that shapes the DAG and nothing
// that is bound per call (user pointers, the op's function).
struct CollectiveSpec {
  CollKind kind = CollKind::Broadcast;
  std::string algorithm;       // generator name within the kind
  uint32_t images = 1;         // team size P
  uint32_t root = 0;           // rooted collectives: team rank of the root
  uint64_t nbytes = 0;         // bytes per image, or per block (graph/layout.h)
  uint32_t elem_size = 1;      // reductions: element size; segments cut on elements
  uint64_t segment_bytes = 0;  // pipelining chunk; 0 = no segmentation
  int flags = 0;               // the call's CF_COLL_* flags
  // Variable-size ("v") forms; empty = every block is nbytes, packed.
  //   scatter, gather, gather_all: counts[i] = bytes of image i's block;
  //     displs[i] = its offset in the buffer holding all blocks (empty = packed).
  //   exchange: counts[i * P + j] = bytes image i sends to image j; blocks are
  //     packed in rank order in both source and destination (displs empty).
  std::vector<uint64_t> counts;
  std::vector<uint64_t> displs;
  std::vector<uint32_t> perm;  // permute: image i sends to perm[i]
  // Algorithm parameters (0 = the generator's default); part of the DAG's shape.
  uint32_t radix = 0;          // k of k-nomial / k-ary trees
  uint32_t window = 0;         // flow-controlled exchange: messages in flight per image
  // LogP model parameters in nanoseconds (logp broadcast): latency, overhead, gap.
  uint32_t logp_L = 0, logp_o = 0, logp_g = 0;
  // GASNet-style reduce / prefix_reduce: block-cyclic arrays (graph/layout.h,
  // CyclicLayout). nbytes = elem_count * elem_size. blksz in elements, 0 =
  // indefinite layout (offset then names the image holding the array).
  uint64_t src_blksz = 0, src_offset = 0;
  uint64_t dst_blksz = 0, dst_offset = 0;
  // Node-aware (hierarchical) generators: team ranks [k*ppn, (k+1)*ppn) share
  // node k (the last node may hold fewer). 0 = unknown: every rank its own node.
  uint32_t images_per_node = 0;
  bool operator==(const CollectiveSpec&) const = default;
};

// Aggregates hold at most this many members (graph/aggregate.h).
inline constexpr uint32_t kMaxAggregateMembers = 4096;

// The user buffers and element size of one member of an aggregate.
struct MemberBuffers {
  uint64_t src_bytes = 0;
  uint64_t dst_bytes = 0;
  uint32_t elem_size = 1;
  bool operator==(const MemberBuffers&) const = default;
};

struct LocalDag {
  uint32_t image = 0;             // team rank
  uint64_t src_bytes = 0;         // size of the user source buffer on this image
  uint64_t dst_bytes = 0;         // size of the user destination buffer
  std::vector<uint64_t> temps;    // temp slot sizes in bytes
  std::vector<Car> cars;
  CarId exit = kNoCar;            // the JOIN whose completion completes the image
  // Aggregates only: every member's buffers, indexed by Car::member (member
  // 0's equal src_bytes / dst_bytes). Empty for a single collective.
  std::vector<MemberBuffers> members;
  // Set by a generator that could not build this DAG (a plug-in's builder
  // error, api/generator.cc): validate_local refuses the DAG with it.
  std::string error;
  bool operator==(const LocalDag&) const = default;

  // Bytes of a user buffer (UserSrc / UserDst) as member `member` sees it.
  uint64_t user_bytes(uint32_t member, BufferSpace space) const {
    if (!members.empty()) {
      return space == BufferSpace::UserSrc ? members[member].src_bytes : members[member].dst_bytes;
    }
    return space == BufferSpace::UserSrc ? src_bytes : dst_bytes;
  }
};

// Where each CAR of one image stood when a collective was dumped while it
// ran (the engine's hang dump): graph JSON's optional "run_state".
enum class CarRunState : uint8_t { Done, Running, Ready, WaitingDep, WaitingMessage };
// "done", "running", "ready", "waiting_dep", "waiting_message".
const char* run_state_name(CarRunState state);
bool parse_run_state(const std::string& name, CarRunState* state);
struct RunState {
  uint32_t image = 0;                // the team rank whose CARs these are
  std::vector<CarRunState> cars;     // one per CAR of that image; empty = no run state
  bool operator==(const RunState&) const = default;
};

struct GlobalDag {
  CollectiveSpec spec;
  std::vector<LocalDag> images;   // index = team rank
  RunState run_state;             // hang dumps only
  bool operator==(const GlobalDag&) const = default;
};

// A message edge of a global DAG: SEND (from_image, from_car) matched to the
// receive (to_image, to_car).
struct MessageEdge {
  uint32_t from_image = 0;
  CarId from_car = 0;
  uint32_t to_image = 0;
  CarId to_car = 0;
  bool operator==(const MessageEdge&) const = default;
};

}  // namespace carflow
