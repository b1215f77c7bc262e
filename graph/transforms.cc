#include "graph/transforms.h"

#include <utility>

#include "graph/builder.h"

namespace carflow {
namespace {

// Appends a CAR of a sync transform, marked as such (Car::sync).
CarId add_sync_car(LocalDag& dag, Car car) {
  car.sync = true;
  dag.cars.push_back(std::move(car));
  return static_cast<CarId>(dag.cars.size() - 1);
}

// Appends a dissemination barrier whose first sends wait for `start_deps`;
// returns the JOIN that completes when this image has passed it.
CarId append_barrier(LocalDag& dag, uint32_t images, uint32_t tag_base,
                     CarDeps start_deps) {
  auto add = [&](Car car) { return add_sync_car(dag, std::move(car)); };
  CarId prev_recv = kNoCar;
  CarDeps sends;  // the closing JOIN waits for these too: every CAR reaches the exit
  for (uint32_t k = 0, dist = 1; dist < images; ++k, dist *= 2) {
    Car send;
    send.kind = CarKind::Send;
    send.peer = (dag.image + dist) % images;
    send.tag = tag_base + k;
    // As in the dissemination generator: round k waits for round k-1's
    // receive and send, so it carries everything heard so far.
    send.deps = prev_recv == kNoCar ? start_deps
                                    : CarDeps{after(prev_recv), sends.back()};
    sends.push_back(after(add(std::move(send))));
    Car recv;
    recv.kind = CarKind::Recv;
    recv.peer = (dag.image + images - dist) % images;
    recv.tag = tag_base + k;
    prev_recv = add(std::move(recv));
  }
  Car join;
  join.kind = CarKind::Join;
  join.deps = prev_recv == kNoCar ? std::move(start_deps) : std::move(sends);
  if (prev_recv != kNoCar) join.deps.push_back(after(prev_recv));
  return add(std::move(join));
}

// Appends the GASNet notes' zero-byte broadcast from `root` (a binomial tree over
// virtual ranks): the root sends once `start` is done, the others forward
// as soon as the signal arrives. Returns the JOIN that completes when this
// image has the signal and has passed it on.
CarId append_signal_broadcast(LocalDag& dag, uint32_t images, uint32_t root, uint32_t tag,
                              CarId start) {
  auto add = [&](Car car) { return add_sync_car(dag, std::move(car)); };
  const uint32_t vr = (dag.image + images - root) % images;
  CarDeps done = {after(start)};
  CarDeps send_deps = {after(start)};
  uint32_t low = 1;  // lowest set bit of vr; the root's children span all bits
  while (low < images && (vr & low) == 0) low <<= 1;
  if (vr != 0) {
    Car recv;
    recv.kind = CarKind::Recv;
    recv.peer = (vr - low + root) % images;
    recv.tag = tag;
    const CarId got = add(std::move(recv));
    done.push_back(after(got));
    send_deps = {after(got)};
  }
  for (uint32_t bit = low >> 1; bit > 0; bit >>= 1) {
    if (vr + bit >= images) continue;
    Car send;
    send.kind = CarKind::Send;
    send.peer = (vr + bit + root) % images;
    send.tag = tag;
    send.deps = send_deps;
    done.push_back(after(add(std::move(send))));
  }
  Car join;
  join.kind = CarKind::Join;
  join.deps = std::move(done);
  return add(std::move(join));
}

// Appends a zero-byte fan-in to `root` over the binomial tree of virtual
// ranks: each image signals its parent once `start` is done and every child
// has signalled it. Returns the CAR after which (on the root) every image's
// `start` is done: the root's last receive, or elsewhere its signal to the
// parent.
CarId append_signal_gather(LocalDag& dag, uint32_t images, uint32_t root, uint32_t tag, CarId start) {
  auto add = [&](Car car) { return add_sync_car(dag, std::move(car)); };
  const uint32_t vr = (dag.image + images - root) % images;
  CarDeps heard = {after(start)};
  uint32_t low = 1;
  while (low < images && (vr & low) == 0) low <<= 1;
  for (uint32_t bit = 1; bit < low && vr + bit < images; bit <<= 1) {  // children vr + 2^j
    Car recv;
    recv.kind = CarKind::Recv;
    recv.peer = (vr + bit + root) % images;
    recv.tag = tag;
    heard.push_back(after(add(std::move(recv))));
  }
  Car join;
  join.kind = CarKind::Join;
  join.deps = std::move(heard);
  const CarId all_heard = add(std::move(join));
  if (vr == 0) return all_heard;
  Car send;
  send.kind = CarKind::Send;
  send.peer = (vr - low + root) % images;
  send.tag = tag;
  send.deps = {after(all_heard)};
  return add(std::move(send));
}

}  // namespace

LocalDag apply_sync_mode(LocalDag dag, uint32_t images, bool in_allsync, bool out_allsync,
                         int32_t done_root, int32_t fan_in_root) {
  CarId entry = kNoCar;
  if (in_allsync) {
    const size_t original = dag.cars.size();
    entry = append_barrier(dag, images, kTransformTagBase, {});
    for (size_t id = 0; id < original; ++id) {
      if (dag.cars[id].deps.empty()) dag.cars[id].deps.push_back(after(entry));
    }
  }
  if (out_allsync) {
    const size_t before_exit_sync = dag.cars.size();
    CarId done;
    if (done_root >= 0) {
      done = append_signal_broadcast(dag, images, static_cast<uint32_t>(done_root),
                                     kTransformTagBase + 0x200, dag.exit);
    } else if (fan_in_root >= 0) {
      const uint32_t root = static_cast<uint32_t>(fan_in_root);
      const CarId heard = append_signal_gather(dag, images, root, kTransformTagBase + 0x300, dag.exit);
      done = append_signal_broadcast(dag, images, root, kTransformTagBase + 0x200, heard);
    } else {
      done = append_barrier(dag, images, kTransformTagBase + 0x100, {after(dag.exit)});
    }
    // The exit synchronization's receives have no other predecessor: they
    // too wait for the entry barrier.
    for (size_t id = before_exit_sync; entry != kNoCar && id < dag.cars.size(); ++id) {
      if (dag.cars[id].deps.empty()) dag.cars[id].deps.push_back(after(entry));
    }
    Car exit;
    exit.kind = CarKind::Join;
    exit.deps = {after(done)};
    dag.exit = add_sync_car(dag, std::move(exit));
  }
  return dag;
}

LocalDag apply_in_place(LocalDag dag) {
  bool reads_src = false;
  for (const Car& car : dag.cars) reads_src |= car.src.space == BufferSpace::UserSrc || car.src2.space == BufferSpace::UserSrc;
  if (!reads_src || dag.src_bytes == 0) return dag;
  const uint32_t slot = static_cast<uint32_t>(dag.temps.size());
  dag.temps.push_back(dag.src_bytes);
  const CarId copy = static_cast<CarId>(dag.cars.size());
  for (Car& car : dag.cars) {
    for (BufferRef* ref : {&car.src, &car.src2}) {
      if (ref->space == BufferSpace::UserSrc) *ref = BufferRef{BufferSpace::Temp, slot, ref->offset, ref->length};
    }
    // Everything that wrote the destination (or anything at all) waits for the copy.
    if (car.deps.empty()) car.deps.push_back(Dep{copy, DepKind::Buffer});
  }
  Car c;
  c.kind = CarKind::Copy;
  c.src = BufferRef{BufferSpace::UserSrc, 0, 0, dag.src_bytes};
  c.dst = BufferRef{BufferSpace::Temp, slot, 0, dag.src_bytes};
  dag.cars.push_back(std::move(c));
  return dag;
}

LocalDag repeat_calls(const LocalDag& one, uint32_t calls) {
  if (calls <= 1 || !one.error.empty()) return one;
  LocalDag out;
  out.image = one.image;
  out.src_bytes = one.src_bytes;
  out.dst_bytes = one.dst_bytes;
  out.temps = one.temps;  // calls run one after another: they share the slots
  out.members = one.members;
  const size_t n = one.cars.size();
  for (const Car& car : one.cars) {
    if (car.is_message() && (uint64_t{car.tag} + 1) * calls > UINT32_MAX) {
      out.error = "--calls: " + std::to_string(calls) + " calls of this DAG need tags past 32 bits (tag " +
                  std::to_string(car.tag) + ")";
      return out;
    }
  }
  out.cars.reserve(n * calls);
  for (uint32_t k = 0; k < calls; ++k) {
    const CarId base = static_cast<CarId>(k * n);
    for (const Car& car : one.cars) {
      Car& c = out.cars.emplace_back(car);
      for (Dep& d : c.deps) d.car += base;
      if (k > 0 && c.deps.empty()) c.deps.push_back(after(base - static_cast<CarId>(n) + one.exit));
      if (c.is_message()) c.tag = car.tag * calls + k;
    }
  }
  out.exit = static_cast<CarId>((calls - 1) * n + one.exit);
  return out;
}

}  // namespace carflow
