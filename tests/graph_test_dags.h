// Hand-built global DAGs for the graph tests. They use only DagBuilder, so
// these tests do not depend on any generator compiling or being correct.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/builder.h"
#include "graph/car.h"

namespace carflow::test_dags {

inline GlobalDag make_global(CollKind kind, uint32_t images, uint64_t nbytes,
                             std::vector<LocalDag> locals) {
  GlobalDag dag;
  dag.spec.kind = kind;
  dag.spec.algorithm = "hand_built";
  dag.spec.images = images;
  dag.spec.nbytes = nbytes;
  dag.images = std::move(locals);
  return dag;
}

// Image 0 sends 8 bytes to image 1: the smallest DAG with a message.
//   image 0: car 0 SEND -> car 1 exit      image 1: car 0 RECV -> car 1 exit
inline GlobalDag one_message() {
  DagBuilder a(0, 8, 8);
  a.send(1, 0, user_src(0, 8));
  DagBuilder b(1, 0, 8);
  b.recv(0, 0, user_dst(0, 8));
  return make_global(CollKind::Broadcast, 2, 8, {a.finish(), b.finish()});
}

// Three images using every CAR kind, buffer space and dependency kind, a
// zero-byte message and a RECV_REDUCE with incoming_left:
//   image 0: 0 SEND->1 tag 0, 1 RECV<-2 tag 0 into temp 0, 2 REDUCE, 3 exit
//   image 1: 0 COPY, 1 RECV_REDUCE<-0 tag 0, 2 SEND->2 tag 5 (16 B),
//            3 SEND->2 tag 6 (0 B), 4 exit
//   image 2: 0 RECV<-1 tag 5 into temp 1, 1 RECV<-1 tag 6 (0 B),
//            2 SEND->0 tag 0, 3 COPY temp 1 -> dst, 4 exit
// Messages: 4, 48 bytes; longest chain 1.0, 1.1, 1.2, 2.0, 2.3, 2.4 = 6 CARs.
inline GlobalDag three_image_mix() {
  DagBuilder a(0, 16, 16);
  const uint32_t scratch = a.temp_slot(16);
  a.send(1, 0, user_src(0, 16));
  const CarId got = a.recv(2, 0, temp(scratch, 0, 16));
  a.reduce(user_dst(0, 16), user_src(0, 16), temp(scratch, 0, 16), {after_buffer(got)});

  DagBuilder b(1, 16, 16);
  const CarId init = b.copy(user_dst(0, 16), user_src(0, 16));
  const CarId combined = b.recv_reduce(0, 0, user_dst(0, 16), true, {after_buffer(init)});
  const CarId forward = b.send(2, 5, user_dst(0, 16), {after_buffer(combined)});
  b.send(2, 6, no_buffer(), {after(forward)});

  DagBuilder c(2, 16, 16);
  c.temp_slot(8);
  const uint32_t landing = c.temp_slot(16);
  const CarId data = c.recv(1, 5, temp(landing, 0, 16));
  c.recv(1, 6, no_buffer());
  c.send(0, 0, user_src(0, 16));
  c.copy(user_dst(0, 16), temp(landing, 0, 16), {after_buffer(data)});
  return make_global(CollKind::Allreduce, 3, 16, {a.finish(), b.finish(), c.finish()});
}

// Images 0 and 1 each RECV from the other before SENDing to it. Each image
// is valid and every message matches, but with a SEND and its RECV merged
// the graph has a cycle: under rendezvous both wait forever.
inline GlobalDag crossed_receives() {
  std::vector<LocalDag> locals;
  for (uint32_t image = 0; image < 2; ++image) {
    DagBuilder b(image, 8, 8);
    const CarId got = b.recv(1 - image, 0, user_dst(0, 8));
    b.send(1 - image, 0, user_src(0, 8), {after(got)});
    locals.push_back(b.finish());
  }
  return make_global(CollKind::Allreduce, 2, 8, std::move(locals));
}

// One image whose CARs form a chain of `length` JOINs ending in the exit.
inline LocalDag join_chain(size_t length) {
  LocalDag dag;
  dag.cars.resize(length);
  for (size_t c = 1; c < length; ++c) dag.cars[c].deps.push_back(Dep{CarId(c - 1), DepKind::Progress});
  dag.exit = static_cast<CarId>(length - 1);
  return dag;
}

}  // namespace carflow::test_dags
