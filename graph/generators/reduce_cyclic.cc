// GASNet-style reduce of a block-cyclic array (GASNet collectives notes v1.7, "Reduce" and "Notes
// on (non-)commutative (prefix) reduction operators"): every used element of
// the array combined in array order, one element in the root's user_dst.
//
// Terms: L = the source CyclicLayout (graph/layout.h), v = L.virtual_rank(i)
// (v 0 owns element 0), R = L.rows(), n_v = L.chunks(i): R or R-1, and the
// images with R rows are a prefix of virtual ranks. Row c of the array is
// chunk c of every image in virtual-rank order. es = spec.elem_size.
// Images without data (n_v = 0) take no part; an indefinite layout (blksz 0)
// is one row on image `offset`.
//
// rows    (any operator; preserves operand order) every image folds each
//         chunk of its run to one element, its row partials. A binomial tree
//         over virtual ranks, whose subtrees are the contiguous ranges
//         [v, v + 2^j), combines the row vectors element-wise with the higher
//         ranks' vector on the right; a subtree's vector has the rows of its
//         lowest member, so a child with R-1 rows combines the common prefix.
//         v 0 then folds its R row results in row order and sends the element
//         to the root (GASNet notes: "each subtree contains only consecutive
//         contributions"). Rounds ceil(log2 P) + 1; messages (images holding
//         data) - 1, plus 1 when the root is not v 0; n_child * es bytes per
//         tree edge, es bytes to the root.
// scalar  (commutative operators only: it reorders operands) every image
//         folds its whole run to one element and a binomial tree rooted at the
//         root combines the scalars; subtrees holding no data send nothing
//         (GASNet notes: "we can reduce the multiple blocks on a node to a single
//         scalar before starting communication"). Rounds ceil(log2 P);
//         messages at most P-1 (exactly P-1 when every image holds data), es
//         bytes each.
#include <vector>

#include "graph/builder.h"
#include "graph/generators/block_ranges.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

constexpr uint32_t kTreeTag = 0;    // child -> parent
constexpr uint32_t kResultTag = 1;  // rows: v 0 -> root

// The image's used elements: one contiguous run of its source buffer.
BufferRef source_run(const CyclicLayout& L, uint32_t image, uint64_t es) {
  return user_src(L.local_first(image) * es, L.count(image) * es);
}

// Folds each chunk of the image's run to one element of `out` (n_v elements).
CarId fold_rows(DagBuilder& b, const CyclicLayout& L, uint32_t image, uint64_t es, BufferRef out) {
  const uint64_t first = L.chunk() == 0 ? 0 : L.first_chunk(image);
  return b.fold(out, source_run(L, image, es), no_buffer(), first, L.chunk());
}

LocalDag rows_reduce(const CollectiveSpec& spec, uint32_t image) {
  const CyclicLayout L = src_cyclic(spec);
  const uint64_t es = spec.elem_size, rows = L.chunks(image);
  const uint32_t P = spec.images, first_image = L.first_image();
  DagBuilder b(image, src_extent(spec, image), dst_extent(spec, image));
  if (image == spec.root && image != first_image && L.rows() > 0) {
    b.recv(first_image, kResultTag, user_dst(0, es));
  }
  if (rows == 0) return b.finish();  // nor any image of my subtree
  const uint32_t acc = b.temp_slot(rows * es);
  CarId last = fold_rows(b, L, image, es, temp(acc, 0, rows * es));
  const patterns::BinomialNode node = patterns::binomial_node(L.virtual_rank(image), P);
  // Smallest subtree first: the range my vector covers grows to the right.
  for (auto child = node.children.rbegin(); child != node.children.rend(); ++child) {
    const uint32_t from = L.real_image(*child);
    const uint64_t child_rows = L.chunks(from);
    if (child_rows == 0) continue;
    last = b.recv_reduce(from, kTreeTag, temp(acc, 0, child_rows * es), false, {after_buffer(last)});
  }
  if (node.has_parent) {
    b.send(L.real_image(node.parent), kTreeTag, temp(acc, 0, rows * es), {after_buffer(last)});
    return b.finish();
  }
  // v 0: the row results, combined in row order, are the array's result.
  const BufferRef result = image == spec.root ? user_dst(0, es) : temp(b.temp_slot(es), 0, es);
  const CarId total = b.fold(result, temp(acc, 0, rows * es), no_buffer(), 0, 0, {after_buffer(last)});
  if (image != spec.root) b.send(spec.root, kResultTag, result, {after_buffer(total)});
  return b.finish();
}

// Whether some image of the binomial subtree of `vr` (rooted at the root)
// holds data.
bool subtree_holds_data(const CyclicLayout& L, uint32_t vr, uint32_t root, uint32_t P) {
  const uint32_t end = patterns::binomial_subtree_end(vr, P);
  for (uint32_t w = vr; w < end; ++w) {
    if (L.count(patterns::real_rank(w, root, P)) > 0) return true;
  }
  return false;
}

LocalDag scalar_reduce(const CollectiveSpec& spec, uint32_t image) {
  const CyclicLayout L = src_cyclic(spec);
  const uint64_t es = spec.elem_size;
  const uint32_t P = spec.images, root = spec.root, vr = patterns::virtual_rank(image, root, P);
  DagBuilder b(image, src_extent(spec, image), dst_extent(spec, image));
  if (!subtree_holds_data(L, vr, root, P)) return b.finish();
  const patterns::BinomialNode node = patterns::binomial_node(vr, P);
  std::vector<uint32_t> senders;  // children whose subtree holds data
  for (uint32_t child : node.children) {
    if (subtree_holds_data(L, child, root, P)) senders.push_back(patterns::real_rank(child, root, P));
  }
  // The root with nothing to receive folds straight into its destination.
  const bool direct = !node.has_parent && senders.empty();
  const BufferRef acc = direct ? user_dst(0, es) : temp(b.temp_slot(es), 0, es);
  CarId last = kNoCar;
  if (L.count(image) > 0) {
    last = b.fold(acc, source_run(L, image, es), no_buffer(), 0, 0);
  }
  for (uint32_t from : senders) {
    if (last == kNoCar) {
      last = b.recv(from, kTreeTag, acc);
    } else {
      last = b.recv_reduce(from, kTreeTag, acc, false, {after_buffer(last)});
    }
  }
  if (node.has_parent) {
    b.send(patterns::real_rank(node.parent, root, P), kTreeTag, acc, {after_buffer(last)});
  } else if (!direct) {
    b.copy(user_dst(0, es), acc, {after_buffer(last)});
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(rows_reduce,
                           {CollKind::Reduce, "rows", &rows_reduce, true, false,
                            "per-row partials combined over a binomial tree; any operator"});
CARFLOW_REGISTER_GENERATOR(scalar_reduce,
                           {CollKind::Reduce, "scalar", &scalar_reduce, false, false,
                            "one scalar per image over a binomial tree; commutative operators"});

}  // namespace carflow
