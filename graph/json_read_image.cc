// GraphReader: one image section of the document and its CARs (buffers,
// peers and tags, reduce shapes, dependencies).
#include "graph/json_reader.h"

#include <utility>

namespace carflow::json_internal {

bool GraphReader::read_temps(const Json& obj, const Path& at, std::vector<uint64_t>* temps) {
  const Json* value = field(obj, at, "temps");
  const Path path = at.field("temps");
  if (value == nullptr || !expect_array(*value, path, kMaxTempSlots)) return false;
  temps->resize(value->size());
  for (size_t i = 0; i < value->size(); ++i) {
    if (!uint_value((*value)[i], path.at(i), 0, kMaxBufferBytes, &(*temps)[i])) return false;
  }
  return true;
}

// Aggregates: each member's user buffer sizes and element size (optional).
bool GraphReader::read_members(const Json& obj, const Path& at, std::vector<MemberBuffers>* members) {
  const auto it = obj.find("members");
  if (it == obj.end()) return true;
  const Path path = at.field("members");
  if (!expect_array(*it, path, kMaxAggregateMembers)) return false;
  members->resize(it->size());
  for (size_t m = 0; m < it->size(); ++m) {
    const Json& e = (*it)[m];
    const Path here = path.at(m);
    MemberBuffers& out = (*members)[m];
    if (!expect_object(e, here) ||
        !only_fields(e, here, {"src_bytes", "dst_bytes", "elem_size"}, "an aggregate member") ||
        !read_uint(e, here, "src_bytes", 0, kMaxBufferBytes, &out.src_bytes) ||
        !read_uint(e, here, "dst_bytes", 0, kMaxBufferBytes, &out.dst_bytes) ||
        !read_uint(e, here, "elem_size", 1, UINT32_MAX, &out.elem_size)) {
      return false;
    }
  }
  return true;
}

bool GraphReader::read_image(const Json& value, const Path& at, uint32_t index, uint32_t images,
                             const Extents& implied, LocalDag* dag) {
  if (!expect_object(value, at) ||
      !only_fields(value, at, {"image", "src_bytes", "dst_bytes", "temps", "exit", "members", "cars"},
                   "an image") ||
      !read_uint(value, at, "image", 0, UINT32_MAX, &dag->image)) {
    return false;
  }
  if (dag->image != index) {
    return fail_at(at.field("image"), std::to_string(dag->image) + " must equal its index " +
                                          std::to_string(index));
  }
  const Json* cars = nullptr;
  if (!read_uint(value, at, "src_bytes", 0, kMaxBufferBytes, &dag->src_bytes) ||
      !read_uint(value, at, "dst_bytes", 0, kMaxBufferBytes, &dag->dst_bytes)) {
    return false;
  }
  // The user buffers are the collective's (an aggregate's: its first
  // member's, which the collective describes); no other size is right.
  const struct {
    const char* key;
    uint64_t got, want;
  } user[] = {{"src_bytes", dag->src_bytes, implied.src(index)},
              {"dst_bytes", dag->dst_bytes, implied.dst(index)}};
  for (const auto& [key, got, want] : user) {
    if (got != want) {
      return fail_at(at.field(key), std::to_string(got) + " must equal " + std::to_string(want) +
                                        ", the size the collective implies for image " +
                                        std::to_string(index));
    }
  }
  if (!read_temps(value, at, &dag->temps) || (cars = field(value, at, "cars")) == nullptr ||
      !expect_array(*cars, at.field("cars"), kMaxCarsPerImage) ||
      !read_uint(value, at, "exit", 0, UINT32_MAX, &dag->exit)) {
    return false;
  }
  if (dag->exit >= cars->size()) {
    return fail_at(at.field("exit"), std::to_string(dag->exit) + " is not a CAR of this image (" +
                                         std::to_string(cars->size()) + " cars)");
  }
  if (!read_members(value, at, &dag->members)) return false;
  const ImageContext ctx{images, index, cars->size(), dag->temps.size(), dag->members.size()};
  const Path cars_path = at.field("cars");
  dag->cars.resize(cars->size());
  for (CarId id = 0; id < cars->size(); ++id) {
    if (!read_car((*cars)[id], cars_path.at(id), ctx, id, &dag->cars[id])) return false;
  }
  return true;
}

bool GraphReader::read_car(const Json& value, const Path& at, const ImageContext& ctx, CarId id,
                           Car* car) {
  CarId json_id = 0;
  if (!expect_object(value, at) ||
      !only_fields(value, at,
                   {"id", "kind", "peer", "tag", "src", "src2", "dst", "incoming_left", "shape",
                    "first_elems", "chunk_elems", "sync", "member", "deps"},
                   "a CAR") ||
      !read_uint(value, at, "id", 0, UINT32_MAX, &json_id)) {
    return false;
  }
  if (json_id != id) {
    return fail_at(at.field("id"), std::to_string(json_id) + " must equal its index " + std::to_string(id));
  }
  if (!read_name(value, at, "kind", parse_car_kind,
                 "a CAR kind (SEND, RECV, RECV_REDUCE, REDUCE, COPY, JOIN)", &car->kind) ||
      !read_peer_and_tag(value, at, ctx, car)) {
    return false;
  }
  // Which buffers a kind may use is validate_global's rule; here an absent
  // buffer is simply none.
  const std::pair<const char*, BufferRef*> buffers[] = {
      {"src", &car->src}, {"src2", &car->src2}, {"dst", &car->dst}};
  for (const auto& [key, ref] : buffers) {
    const auto it = value.find(key);
    if (it != value.end() && !read_buffer(*it, at.field(key), ctx, ref)) return false;
  }
  const auto sync = value.find("sync");
  if (sync != value.end()) {
    if (!sync->is_boolean()) return fail_at(at.field("sync"), "expected true or false");
    car->sync = sync->get<bool>();
  }
  if (value.contains("member")) {
    if (!read_uint(value, at, "member", 1, UINT32_MAX, &car->member)) return false;
    if (car->member >= ctx.members) {
      return fail_at(at.field("member"), std::to_string(car->member) + " is not a member of this image's "
                                         "aggregate (" + std::to_string(ctx.members) + " members)");
    }
  }
  return read_incoming_left(value, at, car) && read_shape(value, at, car) &&
         read_deps(value, at, ctx, id, car);
}

bool GraphReader::read_shape(const Json& obj, const Path& at, Car* car) {
  if (obj.contains("shape") &&
      !read_name(obj, at, "shape", parse_reduce_shape, "a reduce shape (elementwise, fold, prefix)",
                 &car->shape)) {
    return false;
  }
  if (car->kind != CarKind::Reduce) {
    for (const char* key : {"shape", "first_elems", "chunk_elems"}) {
      if (obj.contains(key)) return fail_at(at.field(key), "only REDUCE has one");
    }
  }
  // The chunk rules themselves are validate_global's (they need elem_size).
  return read_optional_uint(obj, at, "first_elems", UINT64_MAX, &car->first_elems) &&
         read_optional_uint(obj, at, "chunk_elems", UINT64_MAX, &car->chunk_elems);
}

bool GraphReader::read_peer_and_tag(const Json& obj, const Path& at, const ImageContext& ctx, Car* car) {
  if (!car->is_message()) {
    for (const char* key : {"peer", "tag"}) {
      if (obj.contains(key)) return fail_at(at.field(key), "only SEND, RECV and RECV_REDUCE have one");
    }
    return true;
  }
  if (!read_uint(obj, at, "peer", 0, UINT32_MAX, &car->peer) ||
      !read_uint(obj, at, "tag", 0, UINT32_MAX, &car->tag)) {
    return false;
  }
  const std::string peer = std::to_string(car->peer);
  if (car->peer >= ctx.images) {
    return fail_at(at.field("peer"), peer + " is not a team rank (P = " + std::to_string(ctx.images) + ")");
  }
  if (car->peer == ctx.image) return fail_at(at.field("peer"), peer + " is the image itself");
  return true;
}

bool GraphReader::read_buffer(const Json& value, const Path& at, const ImageContext& ctx, BufferRef* ref) {
  if (!expect_object(value, at) ||
      !only_fields(value, at, {"space", "slot", "offset", "length"}, "a buffer") ||
      !read_name(value, at, "space", parse_buffer_space, "a buffer space (none, user_src, user_dst, temp)",
                 &ref->space)) {
    return false;
  }
  if (ref->space == BufferSpace::Temp) {
    if (!read_uint(value, at, "slot", 0, UINT32_MAX, &ref->slot)) return false;
    if (ref->slot >= ctx.temps) {
      return fail_at(at.field("slot"), std::to_string(ref->slot) + " is not a temp slot (the image has " +
                                           std::to_string(ctx.temps) + ")");
    }
  } else if (value.contains("slot")) {
    return fail_at(at.field("slot"), "only temp buffers have a slot");
  }
  return read_uint(value, at, "offset", 0, UINT64_MAX, &ref->offset) &&
         read_uint(value, at, "length", 0, UINT64_MAX, &ref->length);
}

bool GraphReader::read_incoming_left(const Json& obj, const Path& at, Car* car) {
  const auto it = obj.find("incoming_left");
  if (it == obj.end()) return true;
  if (car->kind != CarKind::RecvReduce) {
    return fail_at(at.field("incoming_left"), "only RECV_REDUCE has incoming_left");
  }
  if (!it->is_boolean()) return fail_at(at.field("incoming_left"), "expected true or false");
  car->incoming_left = it->get<bool>();
  return true;
}

bool GraphReader::read_deps(const Json& obj, const Path& at, const ImageContext& ctx, CarId id, Car* car) {
  const Json* deps = field(obj, at, "deps");
  const Path path = at.field("deps");
  // A list longer than the image must name some CAR twice: bounded by it.
  if (deps == nullptr || !expect_array(*deps, path, ctx.cars)) return false;
  car->deps.resize(deps->size());
  for (size_t i = 0; i < deps->size(); ++i) {
    const Json& value = (*deps)[i];
    const Path dep_path = path.at(i);
    Dep& dep = car->deps[i];
    if (!expect_object(value, dep_path) || !only_fields(value, dep_path, {"car", "kind"}, "a dependency") ||
        !read_uint(value, dep_path, "car", 0, UINT32_MAX, &dep.car) ||
        !read_name(value, dep_path, "kind", parse_dep_kind, "a dependency kind (progress, buffer)",
                   &dep.kind)) {
      return false;
    }
    const std::string name = std::to_string(dep.car);
    if (dep.car == id) return fail_at(dep_path.field("car"), name + " is the CAR itself");
    if (dep.car >= ctx.cars) {
      return fail_at(dep_path.field("car"), name + " is not a CAR of this image (" +
                                                std::to_string(ctx.cars) + " cars)");
    }
  }
  return true;
}

}  // namespace carflow::json_internal
