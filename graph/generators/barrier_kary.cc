// K-ary tree barrier: zero-byte signals fan in up a k-ary tree to rank 0
// (parent of r is (r-1)/k), then fan out down the same tree.
// k = spec.radix (0 = 4). 2(P-1) messages; depth 2 * height of the tree.
//
// An image sends up only after every child has signalled, so rank 0 hears
// (transitively) from every image before it releases anyone; a release is
// forwarded only after it arrived. Tag 0 goes up, tag 1 comes down.
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

constexpr uint32_t kDefaultRadix = 4;

LocalDag kary_barrier(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t k = spec.radix == 0 ? kDefaultRadix : spec.radix;
  DagBuilder b(image, 0, 0);
  DagBuilder::Deps heard;
  for (uint64_t c = k * image + 1; c <= k * image + k && c < P; ++c) {
    heard.push_back(after(b.recv(static_cast<uint32_t>(c), 0, no_buffer())));
  }
  DagBuilder::Deps released = heard;
  if (image != 0) {
    const uint32_t parent = static_cast<uint32_t>((image - 1) / k);
    b.send(parent, 0, no_buffer(), heard);
    released = {after(b.recv(parent, 1, no_buffer()))};
  }
  for (uint64_t c = k * image + 1; c <= k * image + k && c < P; ++c) {
    b.send(static_cast<uint32_t>(c), 1, no_buffer(), released);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(kary_barrier,
                           {CollKind::Barrier, "kary", &kary_barrier, true, false,
                            "fan-in then fan-out over a k-ary tree (radix, default 4); 2(P-1) messages",
                            kUsesRadix});

}  // namespace carflow
