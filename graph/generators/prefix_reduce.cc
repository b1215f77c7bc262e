// GASNet-style prefix reduction of a block-cyclic array (GASNet collectives notes v1.7,
// "PrefixReduce" and "UPC-imposed complications"): element k of the
// destination array gets source elements 0..k combined in array order; the
// destination may have another block size and offset (the GASNet notes' reblocking).
//
// Terms: L / D = the source / destination CyclicLayout (graph/layout.h),
// v = L.virtual_rank(i) (v 0 owns element 0), R = L.rows(), n_v = L.chunks(i):
// R or R-1, the images with R rows a prefix of virtual ranks. Row c of the
// array is chunk c of every image in virtual-rank order. es = elem_size.
//
// dissemination (any operator; preserves operand order):
//  (a) every image folds each chunk of its run: its row partials part_v[c].
//  (b) the dissemination pattern over virtual ranks (GASNet notes: the one of the
//      dissemination barrier): in round k, v sends to v + 2^k its inclusive
//      values (everything received so far op part_v, ranks [v-2^k+1, v]) and
//      receives from v - 2^k, combining the incoming values on the LEFT of its
//      exclusive values. After ceil(log2 P) rounds
//      excl_v[c] = part_0[c] op .. op part_{v-1}[c]. A message holds the
//      receiver's n_w rows: a lower rank has every row a higher one has.
//  (c) every image has rows 0..R-2 (row R-1's total is never needed), so the
//      last virtual rank's inclusive values are those rows' totals. It
//      prefix-combines them, scan[c] = total_0 op .. op total_c, and a
//      binomial broadcast rooted there hands scan to every image.
//  (d) the carry of chunk c is scan[c-1] op excl_v[c] (v 0: scan[c-1]); one
//      Prefix REDUCE over the run with a carry per chunk, except that the
//      chunk holding element 0 has no carry and gets a Prefix of its own.
//      The results land in user_dst when D places every element where L does,
//      else in a temp in source layout for (e).
//  (e) reblocking: element k moves from L.owner(k) to D.owner(k) in pieces,
//      maximal runs of k contiguous in both layouts. Per (from, to) pair one
//      message: packed into a temp region by one COPY per piece unless the
//      pieces already lie back to back in the source run, and received
//      straight into user_dst when they lie back to back there, else into a
//      temp and COPYed out piece by piece. Local pieces are direct COPYs.
// Rounds: ceil(log2 P) for (b), + ceil(log2 P) for (c) when R >= 2, + 1 for
// (e). Messages: sum over k of the images with data at v >= 2^k (n_w * es
// bytes each), + P-1 when R >= 2 ((R-1) * es bytes each), + one per
// (from, to) pair that shares elements when the layouts differ.
#include <algorithm>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/layout.h"
#include "graph/registry.h"

namespace carflow {
namespace {

// Round k of (b) uses tag k (2^k < P, so k < 32).
constexpr uint32_t kBroadcastTag = 32;
constexpr uint32_t kReblockTag = 33;

BufferRef slice(BufferRef ref, uint64_t first_elem, uint64_t elems, uint64_t es) {
  ref.offset += first_elem * es;
  ref.length = elems * es;
  return ref;
}

BufferRef source_run(const CyclicLayout& L, uint32_t image, uint64_t es) {
  return user_src(L.local_first(image) * es, L.count(image) * es);
}

// One image's rows during (b)-(d).
struct RowState {
  uint64_t n = 0;                 // n_v
  BufferRef part;                 // n_v row partials
  CarId part_car = kNoCar;
  BufferRef excl;                 // n_v exclusive values, once v has received
  CarId excl_car = kNoCar;        // the last CAR that wrote excl
  DagBuilder::Deps excl_readers;  // CARs that read excl since then

  // What a CAR that overwrites excl must wait for.
  DagBuilder::Deps before_write() const {
    DagBuilder::Deps deps = excl_readers;
    if (excl_car != kNoCar) deps.push_back(after_buffer(excl_car));
    return deps;
  }
};

// The inclusive values of the first `rows` rows: excl op part, or part alone
// before v has received anything. *car: the CAR after which they are ready.
BufferRef inclusive(DagBuilder& b, RowState& st, uint64_t rows, uint64_t es, CarId* car) {
  if (st.excl_car == kNoCar) {
    *car = st.part_car;
    return slice(st.part, 0, rows, es);
  }
  const BufferRef out = temp(b.temp_slot(rows * es), 0, rows * es);
  *car = b.reduce(out, slice(st.excl, 0, rows, es), slice(st.part, 0, rows, es),
                  {after_buffer(st.excl_car), after_buffer(st.part_car)});
  st.excl_readers.push_back(after_buffer(*car));
  return out;
}

// Step (b) for an image holding data.
void disseminate(DagBuilder& b, const CyclicLayout& L, uint32_t image, uint32_t P, uint64_t es,
                 RowState& st) {
  const uint32_t v = L.virtual_rank(image);
  uint32_t k = 0;
  for (uint64_t step = 1; step < P; step <<= 1, ++k) {
    if (v + step < P) {
      const uint32_t to = L.real_image(static_cast<uint32_t>(v + step));
      const uint64_t rows = L.chunks(to);
      if (rows > 0) {
        CarId ready;
        const BufferRef out = inclusive(b, st, rows, es, &ready);
        b.send(to, k, out, {after_buffer(ready)});
      }
    }
    if (v < step) continue;
    const uint32_t from = L.real_image(static_cast<uint32_t>(v - step));
    const DagBuilder::Deps deps = st.before_write();
    if (st.excl_car == kNoCar) {
      st.excl = temp(b.temp_slot(st.n * es), 0, st.n * es);
      st.excl_car = b.recv(from, k, st.excl, deps);
    } else {
      st.excl_car = b.recv_reduce(from, k, st.excl, true, deps);
    }
    st.excl_readers.clear();
  }
}

// Step (c): scan[c] = total_0 op .. op total_c for the R-1 rows c < R-1, made
// on the last virtual rank and broadcast from there. *ready: the CAR after
// which this image holds it.
BufferRef row_totals(DagBuilder& b, const CyclicLayout& L, uint32_t image, uint32_t P,
                     uint64_t es, RowState& st, CarId* ready) {
  const uint64_t rows = L.rows() - 1;
  const BufferRef scan = temp(b.temp_slot(rows * es), 0, rows * es);
  const uint32_t root = L.real_image(P - 1);
  const patterns::BinomialNode node = patterns::binomial_node(patterns::virtual_rank(image, root, P), P);
  if (node.has_parent) {
    *ready = b.recv(patterns::real_rank(node.parent, root, P), kBroadcastTag, scan);
  } else {
    CarId totals_car;
    const BufferRef totals = inclusive(b, st, rows, es, &totals_car);
    *ready = b.prefix(scan, totals, no_buffer(), 0, 0, {after_buffer(totals_car)});
  }
  for (uint32_t child : node.children) {
    b.send(patterns::real_rank(child, root, P), kBroadcastTag, scan, {after_buffer(*ready)});
  }
  return scan;
}

// Step (d): the prefix of the image's run into `out` (count elements).
// Returns the CARs that write `out`.
std::vector<CarId> prefix_run(DagBuilder& b, const CyclicLayout& L, uint32_t image, uint64_t es,
                              RowState& st, BufferRef scan, CarId scan_car, BufferRef out) {
  const BufferRef src = source_run(L, image, es);
  const uint64_t count = L.count(image);
  if (L.virtual_rank(image) == 0) {
    const uint64_t head = L.first_chunk(image);  // holds element 0: no carry
    std::vector<CarId> cars{b.prefix(slice(out, 0, head, es), slice(src, 0, head, es), no_buffer(), 0, 0)};
    if (st.n >= 2) {
      cars.push_back(b.prefix(slice(out, head, count - head, es), slice(src, head, count - head, es), scan,
                              0, L.chunk(), {after_buffer(scan_car)}));
    }
    return cars;
  }
  CarId carry_car = st.excl_car;
  if (st.n >= 2) {  // carry[c] = scan[c-1] op excl[c], in place
    DagBuilder::Deps deps = st.before_write();
    deps.push_back(after_buffer(scan_car));
    const BufferRef tail = slice(st.excl, 1, st.n - 1, es);
    carry_car = b.reduce(tail, slice(scan, 0, st.n - 1, es), tail, deps);
  }
  return {b.prefix(out, src, st.excl, L.first_chunk(image), L.chunk(), {after_buffer(carry_car)})};
}

// ---- (e) reblocking -------------------------------------------------------

// Elements [k, k + n) of the array, contiguous in both layouts.
struct Piece {
  uint64_t k, n;
};

// One side of the reblocking: a layout and the block arithmetic of its spec
// fields. A blocked layout over P > 1 images breaks contiguity at every
// block boundary (the owner changes); otherwise nowhere.
struct Side {
  CyclicLayout layout;
  uint64_t blksz, offset, count;
  uint32_t P;

  bool cuts() const { return blksz > 0 && P > 1; }
  uint64_t next_cut(uint64_t k) const {
    return cuts() ? ((offset + k) / blksz + 1) * blksz - offset : UINT64_MAX;
  }
  // Calls f(first, end) for each stretch [first, end) of the array this
  // image holds that no cut of this side splits, in increasing k.
  template <typename F>
  void stretches(uint32_t image, F f) const {
    if (layout.count(image) == 0) return;
    if (!cuts()) {
      f(uint64_t{0}, count);
      return;
    }
    const uint64_t v = layout.virtual_rank(image), b0 = offset / blksz;
    for (uint64_t c = 0; c < layout.chunks(image); ++c) {
      const uint64_t block = b0 + c * P + v;
      f(std::max(block * blksz, offset) - offset, std::min((block + 1) * blksz, offset + count) - offset);
    }
  }
};

// The pieces image `image` holds on side `own`, grouped by the image that
// holds them on side `other`, each group in increasing k.
std::vector<std::vector<Piece>> pieces_by_peer(const Side& own, const Side& other, uint32_t image) {
  std::vector<std::vector<Piece>> by_peer(own.P);
  own.stretches(image, [&](uint64_t k, uint64_t end) {
    while (k < end) {
      const uint64_t stop = std::min({end, own.next_cut(k), other.next_cut(k)});
      by_peer[other.layout.owner(k)].push_back({k, stop - k});
      k = stop;
    }
  });
  return by_peer;
}

uint64_t total_elems(const std::vector<Piece>& pieces) {
  uint64_t n = 0;
  for (const Piece& p : pieces) n += p.n;
  return n;
}

// Whether the pieces lie back to back in layout X's local order.
bool back_to_back(const CyclicLayout& X, const std::vector<Piece>& pieces) {
  for (size_t j = 1; j < pieces.size(); ++j) {
    if (X.local(pieces[j].k) != X.local(pieces[j - 1].k) + pieces[j - 1].n) return false;
  }
  return true;
}

// Sends this image's results (`result`, source layout, written by `wrote`)
// to their destination images; local pieces are COPYed.
void send_pieces(DagBuilder& b, const Side& src, const Side& dst, uint32_t image, uint64_t es,
                 BufferRef result, const std::vector<CarId>& wrote) {
  DagBuilder::Deps ready;
  for (CarId car : wrote) ready.push_back(after_buffer(car));
  const uint64_t first = src.layout.local_first(image);
  const auto at = [&](const Piece& p) { return slice(result, src.layout.local(p.k) - first, p.n, es); };
  const std::vector<std::vector<Piece>> out = pieces_by_peer(src, dst, image);
  uint64_t pack_elems = 0;
  for (uint32_t to = 0; to < src.P; ++to) {
    if (to != image && !back_to_back(src.layout, out[to])) pack_elems += total_elems(out[to]);
  }
  const uint32_t pack = pack_elems > 0 ? b.temp_slot(pack_elems * es) : 0;
  uint64_t packed = 0;  // elements
  for (uint32_t to = 0; to < src.P; ++to) {
    const std::vector<Piece>& pieces = out[to];
    if (pieces.empty()) continue;
    if (to == image) {
      for (const Piece& p : pieces) b.copy(user_dst(dst.layout.local(p.k) * es, p.n * es), at(p), ready);
    } else if (back_to_back(src.layout, pieces)) {
      b.send(to, kReblockTag, slice(at(pieces[0]), 0, total_elems(pieces), es), ready);
    } else {
      const uint64_t start = packed;
      DagBuilder::Deps copies;
      for (const Piece& p : pieces) {
        copies.push_back(after_buffer(b.copy(temp(pack, packed * es, p.n * es), at(p), ready)));
        packed += p.n;
      }
      b.send(to, kReblockTag, temp(pack, start * es, (packed - start) * es), copies);
    }
  }
}

// Receives the pieces of this image's destination that other images hold.
void receive_pieces(DagBuilder& b, const Side& src, const Side& dst, uint32_t image, uint64_t es) {
  const std::vector<std::vector<Piece>> in = pieces_by_peer(dst, src, image);
  const auto at = [&](const Piece& p) { return user_dst(dst.layout.local(p.k) * es, p.n * es); };
  for (uint32_t from = 0; from < dst.P; ++from) {
    const std::vector<Piece>& pieces = in[from];
    if (from == image || pieces.empty()) continue;
    const uint64_t n = total_elems(pieces);
    if (back_to_back(dst.layout, pieces)) {
      b.recv(from, kReblockTag, slice(at(pieces[0]), 0, n, es));
      continue;
    }
    const uint32_t slot = b.temp_slot(n * es);
    const CarId got = b.recv(from, kReblockTag, temp(slot, 0, n * es));
    uint64_t at_elem = 0;
    for (const Piece& p : pieces) {
      b.copy(at(p), temp(slot, at_elem * es, p.n * es), {after_buffer(got)});
      at_elem += p.n;
    }
  }
}

// Whether D puts every element on the image and at the local index L does.
bool same_placement(const CollectiveSpec& spec, const CyclicLayout& L, const CyclicLayout& D) {
  if (spec.src_blksz == spec.dst_blksz && spec.src_offset == spec.dst_offset) return true;
  return spec.images == 1 && L.local(0) == D.local(0);  // one image: a shifted run
}

LocalDag dissemination_prefix_reduce(const CollectiveSpec& spec, uint32_t image) {
  const uint32_t P = spec.images;
  const uint64_t es = spec.elem_size, count = spec.nbytes / es;
  const CyclicLayout L = src_cyclic(spec), D = dst_cyclic(spec);
  const bool in_place = same_placement(spec, L, D);
  DagBuilder b(image, src_extent(spec, image), dst_extent(spec, image));
  RowState st;
  st.n = L.chunks(image);
  BufferRef result;
  std::vector<CarId> wrote;
  if (st.n > 0) {
    st.part = temp(b.temp_slot(st.n * es), 0, st.n * es);
    st.part_car = b.fold(st.part, source_run(L, image, es), no_buffer(),
                         L.chunk() == 0 ? 0 : L.first_chunk(image), L.chunk());
    disseminate(b, L, image, P, es, st);
    BufferRef scan;
    CarId scan_car = kNoCar;
    if (L.rows() >= 2) scan = row_totals(b, L, image, P, es, st, &scan_car);
    const uint64_t n = L.count(image);
    result = in_place ? user_dst(L.local_first(image) * es, n * es) : temp(b.temp_slot(n * es), 0, n * es);
    wrote = prefix_run(b, L, image, es, st, scan, scan_car, result);
  }
  if (!in_place && count > 0) {
    const Side src{L, spec.src_blksz, spec.src_offset, count, P};
    const Side dst{D, spec.dst_blksz, spec.dst_offset, count, P};
    if (st.n > 0) send_pieces(b, src, dst, image, es, result, wrote);
    receive_pieces(b, src, dst, image, es);
  }
  return b.finish();
}

}  // namespace

CARFLOW_REGISTER_GENERATOR(dissemination_prefix_reduce,
                           {CollKind::PrefixReduce, "dissemination", &dissemination_prefix_reduce, true,
                            false,
                            "row partials over the dissemination pattern, totals broadcast, "
                            "reblocking by pieces; any operator"});

}  // namespace carflow
