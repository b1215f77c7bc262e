// Reduce (MPI_Reduce): every image's vector of nbytes combined element-wise,
// x_0 op x_1 op ... op x_(P-1), into the root's destination. Non-root images
// have no destination (dst_bytes 0); their partials live in temp slots. All
// three generators preserve operand order (non-commutative ops are safe) and
// fix the evaluation order run to run.
//
// binomial      a two-sided binomial tree (OrderedNode below): ranks right
//               of the root reduce to the root, ranks left of it to root-1,
//               which sends the root their partial; every partial is a run
//               of consecutive ranks, combined as it arrives (RECV_REDUCE)
//               on the side it lies. Pipelined by segments of
//               spec.segment_bytes, each its own reduce chain. P-1 messages
//               per segment for every root (no extra hop to the root);
//               depth max(ceil(log2(P-root)), ceil(log2 root)) + (root > 0),
//               at most ceil(log2 P) + 1; an image sends n bytes, the root
//               none.
// rabenseifner  reduce-scatter by recursive halving (distance-doubling
//               partners, as allreduce_rabenseifner.cc: lower group on the
//               left), then a binomial gather of the reduced blocks to the
//               root. P = P' + rem: images r < 2 rem fold in pairs first;
//               the root is never folded away (in its pair it is the one
//               that stays). L = log2 P' halving rounds + L gather rounds
//               (+1 fold round); rem + P' L + (P'-1) messages; an image sends
//               about n (P'-1)/P' bytes while halving, and at most n/2 while
//               gathering. For large vectors.
// flat          every non-root image sends its vector to the root, which
//               combines them in a fixed chain starting from its own vector:
//               r+1, r-1, r+2, r-2, ..., higher ranks as the right operand,
//               lower as the left. P-1 messages, the root receives (P-1) n
//               bytes serially; for few images or tiny vectors.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/halving.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// ---- binomial -------------------------------------------------------------

// The two-sided tree. Ranks right of the root form binomial_node() over
// vr = rank - root (P - root ranks, rooted at the root): subtrees are runs
// of consecutive ranks to the right of their parent, so a child's partial
// is the right operand. Ranks left of the root form its mirror image over
// vr = root - 1 - rank (root ranks, rooted at root - 1): runs to the left,
// left operands. The root combines its right children nearest first, then
// root - 1 with everything left of it. An image's combines form one chain
// (one message at a time), so putting the left side last costs one round:
// depth max(ceil(log2(P - root)), ceil(log2 root)) + (root > 0 ? 1 : 0).
struct OrderedChild {
  uint32_t rank = 0;
  bool left = false;  // the child's partial is the left operand
};
struct OrderedNode {
  bool has_parent = false;
  uint32_t parent = 0;                 // team rank
  std::vector<OrderedChild> children;  // combine order: smallest subtree first
};

OrderedNode ordered_node(uint32_t image, uint32_t root, uint32_t P) {
  OrderedNode node;
  const bool left = image < root;
  // Team rank of virtual rank v on this image's side.
  auto real = [&](uint32_t v) { return left ? root - 1 - v : root + v; };
  const uint32_t vr = left ? root - 1 - image : image - root;
  const patterns::BinomialNode t = patterns::binomial_node(vr, left ? root : P - root);
  node.has_parent = t.has_parent || left;
  node.parent = t.has_parent ? real(t.parent) : root;  // root - 1 reports to the root
  for (auto c = t.children.rbegin(); c != t.children.rend(); ++c) node.children.push_back({real(*c), left});
  if (image == root && root > 0) node.children.push_back({root - 1, true});
  return node;
}

LocalDag binomial_reduce_vec(const CollectiveSpec& spec, uint32_t image) {
  const uint64_t n = spec.nbytes;
  const bool is_root = image == spec.root;
  DagBuilder b(image, n, is_root ? n : 0);
  const OrderedNode node = ordered_node(image, spec.root, spec.images);
  const std::vector<Segment> segments = split_segments(n, spec.segment_bytes, spec.elem_size);
  // Partials: the root's destination, an inner image's temp; leaves send
  // straight from their source.
  const bool leaf = node.children.empty() && !is_root;
  const uint32_t slot = is_root || leaf ? 0 : b.temp_slot(n);
  for (uint32_t s = 0; s < segments.size(); ++s) {
    const Segment& seg = segments[s];
    const BufferRef own = user_src(seg.offset, seg.length);
    if (leaf) {
      b.send(node.parent, s, own);
      continue;
    }
    const BufferRef acc = is_root ? user_dst(seg.offset, seg.length) : temp(slot, seg.offset, seg.length);
    // The first child's data combines with my own straight into acc.
    CarId partial = node.children.empty() ? b.copy(acc, own) : kNoCar;
    for (const OrderedChild& child : node.children) {
      partial = partial == kNoCar
                    ? b.recv_reduce(child.rank, s, acc, child.left, {}, own)
                    : b.recv_reduce(child.rank, s, acc, child.left, {after_buffer(partial)});
    }
    if (node.has_parent) b.send(node.parent, s, acc, {after_buffer(partial)});
  }
  return b.finish();
}

// ---- rabenseifner ---------------------------------------------------------

// Tags: 0 = fold, 1 + k = halving round k, 1 + L + j = gather step j.
constexpr uint32_t kFoldTag = 0;

// Binomial gather over rel = newrank ^ root_new, steps j = L-1..0: an image
// whose rel has bit j set sends keep[j], the range it holds, to
// newrank ^ 2^j and is done; the partner receives it into give[j]. Only the
// root receives at step 0, so a non-root image's data stays in keep[0].
template <typename Work, typename Real>
void gather_rounds(DagBuilder& b, const Halves& h, uint32_t newrank, uint32_t root_new, bool first_from_src,
                   const Work& work, const Real& real, const std::vector<CarId>& halving_send,
                   CarId writer) {
  const uint32_t rounds = static_cast<uint32_t>(h.keep.size());
  CarDeps held_writers{after_buffer(writer)};
  for (uint32_t j = rounds; j-- > 0;) {
    const uint32_t partner = real(newrank ^ (1u << j));
    const uint32_t tag = 1 + rounds + j;
    if ((newrank ^ root_new) & (1u << j)) {
      b.send(partner, tag, work(h.keep[j]), held_writers);
      return;
    }
    DagBuilder::Deps recv_deps;  // halving round j read these bytes of the work buffer
    if (j > 0 || !first_from_src) recv_deps.push_back(after_buffer(halving_send[j]));
    held_writers.push_back(after_buffer(b.recv(partner, tag, work(h.give[j]), recv_deps)));
  }
}

LocalDag rabenseifner_reduce_vec(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images, root = spec.root;
  const uint64_t n = spec.nbytes;
  const bool is_root = image == root;
  DagBuilder b(image, n, is_root ? n : 0);
  const patterns::Fold fold(P);
  const uint32_t pof2 = fold.pof2, rem = fold.rem, rounds = fold.rounds;
  // Pair i = (2i, 2i+1), i < rem: 2i+1 stays in the core, or 2i if it is the root.
  auto stays = [&](uint32_t pair) { return root == 2 * pair ? 2 * pair : 2 * pair + 1; };
  if (image < 2 * rem && image != stays(image / 2)) {
    b.send(stays(image / 2), kFoldTag, user_src(0, n));
    return b.finish();
  }
  const bool folded = fold.paired(image);
  const uint32_t newrank = fold.newrank(image);
  const uint32_t root_new = fold.newrank(root);
  auto real = [&](uint32_t nr) { return nr < rem ? stays(nr) : nr + rem; };
  const Halves h = halves(split_blocks(n, pof2, spec.elem_size), newrank, rounds);

  // Work buffer: the root's destination; elsewhere a temp covering `window`
  // (the whole vector when the fold combines it, else the half kept first).
  const Segment window = folded || rounds == 0 ? Segment{0, n} : h.keep[0];
  const uint32_t slot = is_root ? 0 : b.temp_slot(window.length);
  auto work = [&](const Segment& s) {
    return is_root ? user_dst(s.offset, s.length) : temp(slot, s.offset - window.offset, s.length);
  };
  CarId writer = kNoCar;  // the last CAR that wrote the range this image holds
  if (folded) {
    const uint32_t other = image ^ 1u;
    writer = b.recv_reduce(other, kFoldTag, work({0, n}), other < image, {}, user_src(0, n));
  } else if (rounds == 0) {
    writer = b.copy(work(window), user_src(window.offset, window.length));
  }  // else round 0 combines the source's kept half into the work buffer
  const std::vector<CarId> sends = halving_rounds(b, h, newrank, !folded, work, real, &writer);
  gather_rounds(b, h, newrank, root_new, !folded, work, real, sends, writer);
  return b.finish();
}

// ---- flat -----------------------------------------------------------------

LocalDag flat_reduce_vec(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images, root = spec.root;
  const uint64_t n = spec.nbytes;
  const bool is_root = image == root;
  DagBuilder b(image, n, is_root ? n : 0);
  if (!is_root) {
    b.send(root, 0, user_src(0, n));
    return b.finish();
  }
  // x_(r-d) .. x_(r+d) accumulates outward from the root's own vector.
  // The first contribution combines with the root's own vector straight
  // into dst (RECV_REDUCE with a local operand), the rest into dst.
  CarId acc = P == 1 ? b.copy(user_dst(0, n), user_src(0, n)) : kNoCar;
  auto combine = [&](uint32_t from, bool left) {
    acc = acc == kNoCar ? b.recv_reduce(from, 0, user_dst(0, n), left, {}, user_src(0, n))
                        : b.recv_reduce(from, 0, user_dst(0, n), left, {after_buffer(acc)});
  };
  for (uint32_t d = 1; d < P; ++d) {
    if (d < P - root) combine(root + d, false);
    if (d <= root) combine(root - d, true);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(binomial_reduce_vec,
                           {CollKind::ReduceVec, "binomial", &binomial_reduce_vec, true, true,
                            "two-sided binomial tree rooted at the root, pipelined by segments"});
CARFLOW_REGISTER_GENERATOR(rabenseifner_reduce_vec,
                           {CollKind::ReduceVec, "rabenseifner", &rabenseifner_reduce_vec, true, false,
                            "recursive-halving reduce-scatter + binomial gather; large vectors"});
CARFLOW_REGISTER_GENERATOR(flat_reduce_vec,
                           {CollKind::ReduceVec, "flat", &flat_reduce_vec, true, false,
                            "every image sends to the root, which combines in a fixed order"});

}  // namespace carflow
