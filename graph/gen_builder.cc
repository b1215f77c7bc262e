#include "graph/gen_builder.h"

#include "graph/layout.h"
#include "graph/transforms.h"

namespace carflow {
namespace {

const char* space_name(BufferSpace space) {
  switch (space) {
    case BufferSpace::UserSrc: return "CF_SPACE_SRC";
    case BufferSpace::UserDst: return "CF_SPACE_DST";
    case BufferSpace::Temp: return "CF_SPACE_TEMP";
    case BufferSpace::None: break;
  }
  return "no buffer";
}

std::string range(uint64_t offset, uint64_t length) {
  return "[" + std::to_string(offset) + ", " + std::to_string(offset + length) + ")";
}

}  // namespace

uint32_t GenBuilder::PeerCounts::next(uint32_t peer) {
  if (many_.empty()) {
    for (Count& c : few_) {
      if (c.peer == peer) return ++c.messages;
    }
    if (few_.size() < kFew) {
      few_.push_back({peer, 1});
      return 1;
    }
    for (const Count& c : few_) many_.emplace(c.peer, c.messages);
    few_.clear();
  }
  return ++many_[peer];
}

GenBuilder::GenBuilder(std::string_view generator, const CollectiveSpec& spec, uint32_t image)
    : builder_(image, 0, 0),
      generator_(generator),
      image_(image),
      images_(spec.images),
      reduces_(is_computational(spec.kind)),
      elem_size_(spec.elem_size == 0 ? 1 : spec.elem_size),
      src_bytes_(src_extent(spec, image)),
      dst_bytes_(dst_extent(spec, image)) {}

CarId GenBuilder::refuse(const char* call, const std::string& what) {
  if (error_.empty()) {
    error_ = "generator '" + std::string(generator_) + "', image " + std::to_string(image_) + ": " + call + ": " +
             what;
  }
  return kNoCar;
}


bool GenBuilder::peer_ok(const char* call, uint32_t peer) {
  if (peer < images_ && peer != image_) return true;
  refuse(call, "peer: " + std::to_string(peer) +
                   (peer == image_ ? " is the image itself"
                                   : " is not a team rank (P = " + std::to_string(images_) + ")"));
  return false;
}

bool GenBuilder::buffer_ok(const char* call, const char* arg, BufferRef* ref) {
  uint64_t size = 0;
  switch (ref->space) {
    case BufferSpace::UserSrc: size = src_bytes_; break;
    case BufferSpace::UserDst: size = dst_bytes_; break;
    case BufferSpace::Temp:
      if (ref->slot >= temps_.size()) {
        refuse(call, std::string(arg) + ": temp slot " + std::to_string(ref->slot) + " was not made (" +
                         std::to_string(temps_.size()) + " slots)");
        return false;
      }
      size = temps_[ref->slot];
      break;
    case BufferSpace::None:
      if (ref->offset == 0 && ref->length == 0) return true;
      refuse(call, std::string(arg) + ": no buffer, yet " + range(ref->offset, ref->length));
      return false;
  }
  if (ref->offset > size || ref->length > size - ref->offset) {
    refuse(call, std::string(arg) + ": bytes " + range(ref->offset, ref->length) + " of " + space_name(ref->space) +
                     " (" + std::to_string(size) + " bytes on this image)");
    return false;
  }
  if (ref->space != BufferSpace::Temp) ref->slot = 0;
  return true;
}

bool GenBuilder::deps_ok(const char* call, const CarId* deps, size_t ndeps, DagBuilder::Deps* out) {
  if (ndeps > 0 && deps == nullptr) {
    refuse(call, "deps: NULL with ndeps " + std::to_string(ndeps));
    return false;
  }
  out->reserve(ndeps);
  for (size_t i = 0; i < ndeps; ++i) {
    const CarId id = deps[i] == kNoCar ? kNoCar : deps[i] & ~kBufferDepBit;
    if (id >= cars_) {
      refuse(call, "deps[" + std::to_string(i) + "]: " +
                       (deps[i] == kNoCar ? std::string("CF_CAR_NONE") : "CAR " + std::to_string(id)) +
                       " is not a CAR added before (" + std::to_string(cars_) + " so far)");
      return false;
    }
    out->push_back(Dep{id, (deps[i] & kBufferDepBit) != 0 ? DepKind::Buffer : DepKind::Progress});
  }
  return true;
}

CarId GenBuilder::added(CarId id) {
  ++cars_;
  return id;
}

// A SEND (to_peer) or RECV: the tag is the next on the link, a zero-byte
// message carries no buffer.
CarId GenBuilder::message(bool send, uint32_t peer, BufferRef buf, const CarId* deps, size_t ndeps) {
  const char* call = send ? "cf_dag_send" : "cf_dag_recv";
  DagBuilder::Deps dd;
  if (failed() || !peer_ok(call, peer) || !buffer_ok(call, send ? "src" : "dst", &buf) ||
      !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  const uint32_t tag = (send ? sends_to_ : receives_from_).next(peer);
  if (tag >= kTransformTagBase) {
    return refuse(call, "more than " + std::to_string(kTransformTagBase - 1) + " messages " +
                            (send ? "to" : "from") + " one peer");
  }
  if (buf.length == 0) buf = no_buffer();
  return added(send ? builder_.send(peer, tag, buf, std::move(dd)) : builder_.recv(peer, tag, buf, std::move(dd)));
}

CarId GenBuilder::send(uint32_t peer, BufferRef src, const CarId* deps, size_t ndeps) {
  return message(true, peer, src, deps, ndeps);
}

CarId GenBuilder::recv(uint32_t peer, BufferRef dst, const CarId* deps, size_t ndeps) {
  return message(false, peer, dst, deps, ndeps);
}

CarId GenBuilder::recv_reduce(const char* call, uint32_t peer, BufferRef dst, BufferRef local, bool incoming_left,
                              const CarId* deps, size_t ndeps) {
  DagBuilder::Deps dd;
  if (failed() || !peer_ok(call, peer) || !buffer_ok(call, "dst", &dst) || !buffer_ok(call, "local", &local) ||
      !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  if (!reduces_) return refuse(call, "the collective's kind does not reduce");
  if (local.space != BufferSpace::None && local.length != dst.length) {
    return refuse(call, "local, dst: lengths differ (" + std::to_string(local.length) + " and " +
                            std::to_string(dst.length) + ")");
  }
  if (dst.length % elem_size_ != 0) {
    return refuse(call, "dst: " + std::to_string(dst.length) + " bytes is not whole elements of " +
                            std::to_string(elem_size_));
  }
  const uint32_t tag = receives_from_.next(peer);
  if (tag >= kTransformTagBase) return refuse(call, "too many messages from one peer");
  return added(builder_.recv_reduce(peer, tag, dst, incoming_left, std::move(dd), local));
}

CarId GenBuilder::reduce(BufferRef dst, BufferRef left, BufferRef right, const CarId* deps, size_t ndeps) {
  const char* call = "cf_dag_reduce";
  DagBuilder::Deps dd;
  if (failed() || !buffer_ok(call, "dst", &dst) || !buffer_ok(call, "left", &left) ||
      !buffer_ok(call, "right", &right) || !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  if (!reduces_) return refuse(call, "the collective's kind does not reduce");
  if (dst.length != left.length || dst.length != right.length) {
    return refuse(call, "dst, left, right: lengths differ (" + std::to_string(dst.length) + ", " +
                            std::to_string(left.length) + ", " + std::to_string(right.length) + ")");
  }
  if (dst.length % elem_size_ != 0) {
    return refuse(call, "dst: " + std::to_string(dst.length) + " bytes is not whole elements of " +
                            std::to_string(elem_size_));
  }
  return added(builder_.reduce(dst, left, right, std::move(dd)));
}

CarId GenBuilder::fold(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems, uint64_t chunk_elems,
                       const CarId* deps, size_t ndeps) {
  const char* call = "cf_dag_fold";
  DagBuilder::Deps dd;
  if (failed() || !buffer_ok(call, "dst", &dst) || !buffer_ok(call, "src", &src) ||
      !buffer_ok(call, "carry", &carry) || !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  if (!reduces_) return refuse(call, "the collective's kind does not reduce");
  if (src.length % elem_size_ != 0) return refuse(call, "src: not whole elements");
  Car shape;
  shape.first_elems = first_elems;
  shape.chunk_elems = chunk_elems;
  const uint64_t chunks = chunk_count(shape, src.length / elem_size_);
  if (dst.length != chunks * elem_size_) {
    return refuse(call, "dst: " + std::to_string(dst.length) + " bytes, but src makes " + std::to_string(chunks) +
                            " chunks of one element each");
  }
  if (carry.space != BufferSpace::None && carry.length != dst.length) {
    return refuse(call, "carry: must be one element per chunk, as dst");
  }
  return added(builder_.fold(dst, src, carry, first_elems, chunk_elems, std::move(dd)));
}

CarId GenBuilder::prefix(BufferRef dst, BufferRef src, BufferRef carry, uint64_t first_elems, uint64_t chunk_elems,
                         const CarId* deps, size_t ndeps) {
  const char* call = "cf_dag_prefix";
  DagBuilder::Deps dd;
  if (failed() || !buffer_ok(call, "dst", &dst) || !buffer_ok(call, "src", &src) ||
      !buffer_ok(call, "carry", &carry) || !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  if (!reduces_) return refuse(call, "the collective's kind does not reduce");
  if (src.length % elem_size_ != 0) return refuse(call, "src: not whole elements");
  if (dst.length != src.length) return refuse(call, "dst, src: lengths differ");
  Car shape;
  shape.first_elems = first_elems;
  shape.chunk_elems = chunk_elems;
  const uint64_t chunks = chunk_count(shape, src.length / elem_size_);
  if (carry.space != BufferSpace::None && carry.length != chunks * elem_size_) {
    return refuse(call, "carry: must be one element per chunk (" + std::to_string(chunks) + ")");
  }
  return added(builder_.prefix(dst, src, carry, first_elems, chunk_elems, std::move(dd)));
}

CarId GenBuilder::copy(BufferRef dst, BufferRef src, const CarId* deps, size_t ndeps) {
  const char* call = "cf_dag_copy";
  DagBuilder::Deps dd;
  if (failed() || !buffer_ok(call, "dst", &dst) || !buffer_ok(call, "src", &src) ||
      !deps_ok(call, deps, ndeps, &dd)) {
    return kNoCar;
  }
  if (dst.length != src.length) {
    return refuse(call, "dst, src: lengths differ (" + std::to_string(dst.length) + " and " +
                            std::to_string(src.length) + ")");
  }
  return added(builder_.copy(dst, src, std::move(dd)));
}

CarId GenBuilder::join(const CarId* deps, size_t ndeps) {
  const char* call = "cf_dag_join";
  DagBuilder::Deps dd;
  if (failed() || !deps_ok(call, deps, ndeps, &dd)) return kNoCar;
  return added(builder_.join(std::move(dd)));
}

uint32_t GenBuilder::temp(uint64_t bytes) {
  if (!error_.empty()) return UINT32_MAX;
  if (bytes >= (uint64_t{1} << 48)) {
    refuse("cf_dag_temp", "bytes: " + std::to_string(bytes) + " (2^48 or more)");
    return UINT32_MAX;
  }
  temps_.push_back(bytes);
  return builder_.temp_slot(bytes);
}

LocalDag GenBuilder::finish() {
  LocalDag out = builder_.finish();
  out.src_bytes = src_bytes_;  // the extents, computed once (the builder was given 0)
  out.dst_bytes = dst_bytes_;
  out.error = error_;
  return out;
}

}  // namespace carflow
