#include "graph/model/flat_dag.h"

#include <algorithm>
#include <tuple>

namespace carflow {
namespace {

bool fail(std::string* error, std::string message) {
  *error = std::move(message);
  return false;
}

// Bytes a CAR's cost counts (graph/model/loggp.h).
uint64_t cost_bytes(const Car& car) {
  switch (car.kind) {
    case CarKind::Send: return car.src.length;
    case CarKind::Recv:
    case CarKind::RecvReduce: return car.dst.length;
    case CarKind::Reduce: return car.src.length;
    case CarKind::Copy: return car.dst.length;
    case CarKind::Join: return 0;
  }
  return 0;
}

}  // namespace

std::string FlatDag::label(uint32_t c) const {
  return "image " + std::to_string(car[c].image()) + " CAR " + std::to_string(local(c)) + " (" +
         car_kind_name(car[c].kind()) + ")";
}

uint64_t FlatDag::big(uint32_t c) const {
  auto it = std::lower_bound(big_bytes.begin(), big_bytes.end(), std::pair<uint32_t, uint64_t>{c, 0});
  return it != big_bytes.end() && it->first == c ? it->second : kBigFlatBytes;
}

namespace {

std::string too_many_cars(uint64_t max_cars, uint64_t image) {
  return "--images: the DAG passes " + std::to_string(max_cars) + " CARs at image " + std::to_string(image) +
         " (the simulator's limit)";
}

}  // namespace

void FlatImages::restart(uint32_t first) {
  first_image = first;
  ends.clear();
  car.clear();
  deps.clear();
  big_bytes.clear();
  succ.clear();
  peer.clear();
  tag.clear();
  member.clear();
  footprint = 0;
  error.clear();
}

bool FlatImages::pack(const LocalDag& local, uint32_t team, uint64_t max_cars, std::string* error) {
  const uint64_t base = car.size(), edges = succ.size();
  if (pack_one(local, team, max_cars, error)) return true;
  // Nothing of a refused image stays, so the images before it can be used.
  car.resize(base);
  deps.resize(base);
  while (!big_bytes.empty() && big_bytes.back().first >= base) big_bytes.pop_back();
  succ.resize(edges);
  peer.resize(base);
  tag.resize(base);
  if (!member.empty()) member.resize(base);
  return false;
}

bool FlatImages::pack_one(const LocalDag& local, uint32_t team, uint64_t max_cars, std::string* error) {
  const uint32_t image = first_image + images();
  // Made only on an error: a string per image was a heap block per image.
  auto where = [image] { return "image " + std::to_string(image); };
  if (!local.error.empty()) return fail(error, local.error);
  if (local.image != image) {
    return fail(error, where() + ": expected DAGs in rank order, got image " + std::to_string(local.image));
  }
  if (image >= kMaxFlatImages) {
    return fail(error, "--images: over " + std::to_string(kMaxFlatImages) + " images (the simulator's limit)");
  }
  const uint64_t base = car.size(), n = local.cars.size();
  if (base + n > max_cars) return fail(error, too_many_cars(max_cars, image));
  // Successor lists: count, then place, in this image's slice of succ.
  count_.assign(n + 1, 0);
  for (uint64_t c = 0; c < n; ++c) {
    for (const Dep& d : local.cars[c].deps) {
      if (d.car >= n || d.car == c) {
        return fail(error, where() + " CAR " + std::to_string(c) + ": dependency on CAR " +
                               std::to_string(d.car) + ", which is not another CAR of the image");
      }
      ++count_[d.car];
    }
  }
  const uint64_t edges = succ.size();
  uint64_t at = edges;
  // Sized once and written by index: a push_back per array per CAR (its
  // capacity check, not inlined for these allocators) cost more than the
  // writes themselves.
  car.resize(base + n);
  deps.resize(base + n);
  FlatCar* const flat = car.data() + base;
  uint32_t* const dep_count = deps.data() + base;
  for (uint64_t c = 0; c < n; ++c) {
    const uint64_t k = count_[c];
    count_[c] = static_cast<uint32_t>(at - edges);
    const uint64_t bytes = cost_bytes(local.cars[c]);
    flat[c].set(bytes, local.cars[c].kind, image);
    if (bytes >= kBigFlatBytes) big_bytes.push_back({static_cast<uint32_t>(base + c), bytes});
    flat[c].succ_begin = static_cast<uint32_t>(at);
    dep_count[c] = static_cast<uint32_t>(local.cars[c].deps.size());
    at += k;
  }
  if (at >= UINT32_MAX) return fail(error, where() + ": over 2^32 dependencies in all");
  succ.resize(at);
  peer.resize(base + n);
  tag.resize(base + n);
  uint32_t* const to = succ.data() + edges;
  for (uint64_t c = 0; c < n; ++c) {
    const Car& one = local.cars[c];
    for (const Dep& d : one.deps) to[count_[d.car]++] = static_cast<uint32_t>(base + c);
    if (one.is_message() && (one.peer >= team || one.peer == image)) {
      return fail(error, where() + " CAR " + std::to_string(c) + ": peer " + std::to_string(one.peer) +
                             " is not another team rank (P = " + std::to_string(team) + ")");
    }
    peer[base + c] = one.peer;
    tag[base + c] = one.tag;
    if (one.member != 0 && member.empty()) member.assign(base + c, 0);
    if (!member.empty()) member.push_back(one.member);
  }
  ends.push_back(static_cast<uint32_t>(base + n));
  footprint = std::max({footprint, local.src_bytes, local.dst_bytes});
  for (const MemberBuffers& m : local.members) footprint = std::max({footprint, m.src_bytes, m.dst_bytes});
  return true;
}

FlatDagBuilder::FlatDagBuilder(uint32_t team_images, RankSymmetry mirror, uint64_t max_cars)
    : FlatDagBuilder(1, max_cars) {
  team_ = team_images;
  mirror_ = mirror;
}

FlatDagBuilder::FlatDagBuilder(uint32_t images, uint64_t max_cars)
    : images_(images), max_cars_(std::min(max_cars, kMaxFlatCars)), team_(images) {
  packed_.ends.reserve(images);
}

void FlatDagBuilder::reserve(uint64_t cars) {
  cars = std::min(cars, max_cars_);
  packed_.car.reserve(cars + 1);
  packed_.deps.reserve(cars);
  packed_.succ.reserve(cars + cars / 2);
  packed_.peer.reserve(cars);
  packed_.tag.reserve(cars);
}

bool FlatDagBuilder::add(const LocalDag& local, std::string* error) {
  const uint32_t image = packed_.images();
  if (!local.error.empty()) return fail(error, local.error);
  if (image >= images_) {
    return fail(error, "image " + std::to_string(image) + ": expected DAGs in rank order, got image " +
                           std::to_string(local.image));
  }
  return packed_.pack(local, team_, max_cars_, error);
}

bool FlatDagBuilder::append(const FlatImages& more, std::string* error) {
  const uint32_t first = packed_.images();
  const uint64_t base = packed_.car.size(), edges = packed_.succ.size();
  if (more.first_image != first || uint64_t{first} + more.images() > images_) {
    return fail(error, "image " + std::to_string(first) + ": expected DAGs in rank order, got image " +
                           std::to_string(more.first_image));
  }
  for (uint32_t k = 0; k < more.images(); ++k) {
    if (base + more.ends[k] > max_cars_) return fail(error, too_many_cars(max_cars_, first + k));
    packed_.ends.push_back(static_cast<uint32_t>(base + more.ends[k]));
  }
  if (edges + more.succ.size() >= UINT32_MAX) {
    return fail(error, "image " + std::to_string(first) + ": over 2^32 dependencies in all");
  }
  const uint64_t cars = base + more.car.size(), deps = edges + more.succ.size();
  if (cars + 1 > packed_.car.capacity() || deps > packed_.succ.capacity()) {
    // Past the estimate: room for the rest at the rate so far (and a
    // little more), not a doubling that copies and touches every page twice.
    const double rest = static_cast<double>(images_) / std::max(packed_.images(), 1u) * 1.05;
    auto at_rate = [rest](uint64_t n) { return std::max(n, static_cast<uint64_t>(static_cast<double>(n) * rest)); };
    reserve(std::min(at_rate(cars), max_cars_));
    packed_.succ.reserve(at_rate(deps));
  }
  for (FlatCar car : more.car) {
    car.succ_begin += static_cast<uint32_t>(edges);
    packed_.car.push_back(car);
  }
  packed_.deps.insert(packed_.deps.end(), more.deps.begin(), more.deps.end());
  for (auto [c, bytes] : more.big_bytes) packed_.big_bytes.push_back({static_cast<uint32_t>(base + c), bytes});
  for (uint32_t x : more.succ) packed_.succ.push_back(static_cast<uint32_t>(base + x));
  packed_.footprint = std::max(packed_.footprint, more.footprint);
  packed_.peer.insert(packed_.peer.end(), more.peer.begin(), more.peer.end());
  packed_.tag.insert(packed_.tag.end(), more.tag.begin(), more.tag.end());
  if (!more.member.empty() && packed_.member.empty()) packed_.member.assign(base, 0);
  if (!packed_.member.empty()) {
    if (more.member.empty()) {
      packed_.member.resize(packed_.car.size(), 0);
    } else {
      packed_.member.insert(packed_.member.end(), more.member.begin(), more.member.end());
    }
  }
  if (!more.error.empty()) return fail(error, more.error);
  return true;
}

}  // namespace carflow

namespace carflow {
namespace {

// One end of a message as its receiver's bucket sees it.
// Packed so that (sender, member, tag, car) order is two integer compares.
struct MessageEnd {
  uint64_t hi, lo;  // sender << 32 | member, tag << 32 | car
  MessageEnd(uint32_t sender, uint32_t member, uint32_t tag, uint32_t car)
      : hi(uint64_t{sender} << 32 | member), lo(uint64_t{tag} << 32 | car) {}
  uint32_t sender() const { return static_cast<uint32_t>(hi >> 32); }
  uint32_t member() const { return static_cast<uint32_t>(hi); }
  uint32_t tag() const { return static_cast<uint32_t>(lo >> 32); }
  uint32_t car() const { return static_cast<uint32_t>(lo); }
  bool same_key(const MessageEnd& o) const { return hi == o.hi && (lo >> 32) == (o.lo >> 32); }
  bool key_less(const MessageEnd& o) const { return hi != o.hi ? hi < o.hi : (lo >> 32) < (o.lo >> 32); }
  bool operator<(const MessageEnd& o) const { return hi != o.hi ? hi < o.hi : lo < o.lo; }
};

std::string key_text(uint32_t sender, uint32_t receiver, const MessageEnd& e) {
  return "(sender " + std::to_string(sender) + ", receiver " + std::to_string(receiver) +
         (e.member() != 0 ? ", member " + std::to_string(e.member()) : "") + ", tag " +
         std::to_string(e.tag()) + ")";
}

bool sort_unique(const FlatDag& dag, uint32_t receiver, std::vector<MessageEnd>* ends,
                 std::string* error) {
  // Ends come in CAR order, which most generators give in tag order too.
  if (!std::is_sorted(ends->begin(), ends->end())) std::sort(ends->begin(), ends->end());
  for (size_t i = 1; i < ends->size(); ++i) {
    if ((*ends)[i - 1].same_key((*ends)[i])) {
      const MessageEnd& e = (*ends)[i];
      return fail(error, dag.label(e.car()) + ": duplicate message " + key_text(e.sender(), receiver, e) +
                             "; " + dag.label((*ends)[i - 1].car()) + " uses the same tag");
    }
  }
  return true;
}

bool unmatched(const FlatDag& dag, uint32_t receiver, const MessageEnd& e, bool is_send,
               std::string* error) {
  const std::string other = is_send ? "receive on image " + std::to_string(receiver)
                                    : "SEND on image " + std::to_string(e.sender());
  return fail(error, dag.label(e.car()) + ": no " + other + " matches " + key_text(e.sender(), receiver, e));
}

}  // namespace

bool FlatDagBuilder::finish(FlatDag* out, std::string* error) {
  const uint64_t added = packed_.images();
  if (added != images_) {
    return fail(error, "only " + std::to_string(added) + " of " + std::to_string(images_) +
                           " images were added");
  }
  FlatDag dag;
  dag.images = images_;
  dag.image_base.reserve(uint64_t{images_} + 1);
  dag.image_base.push_back(0);
  dag.image_base.insert(dag.image_base.end(), packed_.ends.begin(), packed_.ends.end());
  dag.car = std::move(packed_.car);
  dag.deps = std::move(packed_.deps);
  dag.big_bytes = std::move(packed_.big_bytes);
  dag.succ = std::move(packed_.succ);
  dag.footprint = packed_.footprint;
  const HugeVector<uint32_t> peer = std::move(packed_.peer), tag = std::move(packed_.tag);
  const HugeVector<uint32_t> members = std::move(packed_.member);
  const bool any_member = !members.empty();
  const uint32_t P = dag.images;
  const uint64_t n = dag.car.size();
  // The end marker: the last CAR's successors end where it begins.
  FlatCar end;
  end.succ_begin = static_cast<uint32_t>(dag.succ.size());
  dag.car.push_back(end);
  // Mirrored: image 0 receives every message, each from the image whose
  // SEND image 0's SEND to `peer` stands for, sigma_peer^-1(0).
  const bool mirrored = mirror_ != RankSymmetry::None;
  auto receiver = [&](uint64_t c) { return mirrored ? 0u : peer[c]; };
  auto sender = [&](uint32_t c) {
    if (!mirrored) return dag.car[c].image();
    return mirror_ == RankSymmetry::Xor ? peer[c] : (team_ - peer[c]) % team_;
  };
  // SENDs bucketed by receiver (a counting sort), so each receiver's
  // messages pair up in a small sort of their own.
  std::vector<uint32_t> start(uint64_t{P} + 1, 0);
  for (uint64_t c = 0; c < n; ++c) {
    if (dag.car[c].kind() == CarKind::Send) ++start[receiver(c) + 1];
  }
  for (uint32_t j = 0; j < P; ++j) start[j + 1] += start[j];
  std::vector<uint32_t> by_receiver(start[P]);
  {
    std::vector<uint32_t> at(start.begin(), start.end() - 1);
    for (uint64_t c = 0; c < n; ++c) {
      if (dag.car[c].kind() == CarKind::Send) by_receiver[at[receiver(c)]++] = static_cast<uint32_t>(c);
    }
  }
  auto member = [&](uint32_t c) { return any_member ? members[c] : 0u; };
  std::vector<MessageEnd> sends, recvs;
  uint32_t most = 0;  // the most messages one image receives
  for (uint32_t j = 0; j < P; ++j) most = std::max(most, start[j + 1] - start[j]);
  sends.reserve(most);
  recvs.reserve(most);
  for (uint32_t j = 0; j < P; ++j) {
    sends.clear();
    recvs.clear();
    for (uint32_t k = start[j]; k < start[j + 1]; ++k) {
      const uint32_t s = by_receiver[k];
      sends.emplace_back(sender(s), member(s), tag[s], s);
    }
    for (uint32_t c = dag.image_base[j]; c < dag.image_base[j + 1]; ++c) {
      if (dag.car[c].kind() == CarKind::Recv || dag.car[c].kind() == CarKind::RecvReduce) {
        recvs.emplace_back(peer[c], member(c), tag[c], static_cast<uint32_t>(c));
      }
    }
    if (!sort_unique(dag, j, &sends, error) || !sort_unique(dag, j, &recvs, error)) return false;
    size_t r = 0;
    for (const MessageEnd& s : sends) {
      if (r < recvs.size() && recvs[r].key_less(s)) return unmatched(dag, j, recvs[r], false, error);
      if (r == recvs.size() || !recvs[r].same_key(s)) return unmatched(dag, j, s, true, error);
      const MessageEnd& m = recvs[r++];
      const uint64_t sent = dag.bytes(s.car()), received = dag.bytes(m.car());
      if (sent != received) {
        return fail(error, dag.label(m.car()) + ": receives " + std::to_string(received) +
                               " bytes but its SEND " + dag.label(s.car()) + " sends " + std::to_string(sent));
      }
      dag.car[s.car()].match = m.car();
      dag.car[m.car()].match = s.car();
      ++dag.messages;
      dag.message_bytes += sent;
    }
    if (r < recvs.size()) return unmatched(dag, j, recvs[r], false, error);
  }
  *out = std::move(dag);
  return true;
}

bool estimate_flat_cars(const GeneratorInfo& gen, const CollectiveSpec& spec, uint64_t max_cars,
                        uint64_t* estimate, std::string* error, std::span<const LocalDag> known) {
  const uint32_t P = spec.images;
  if (P == 0) return fail(error, "--images: must be at least 1");
  max_cars = std::min(max_cars, kMaxFlatCars);
  // An all-to-all algorithm shows itself in any image other than the root.
  const uint32_t sample = (spec.root + 1) % P;
  const uint64_t cars =
      sample < known.size() ? known[sample].cars.size() : generate_local(gen, spec, sample).cars.size();
  *estimate = cars * P;
  if (*estimate > max_cars) {
    return fail(error, "--images: " + gen.name + " on " + std::to_string(P) + " images needs about " +
                           std::to_string(*estimate) + " CARs (image " + std::to_string(sample) +
                           " alone has " + std::to_string(cars) + "), over the simulator's limit of " +
                           std::to_string(max_cars) + " CARs");
  }
  return true;
}

bool build_flat_dag(const GeneratorInfo& gen, const CollectiveSpec& spec, FlatDag* out,
                    std::string* error, uint64_t max_cars, std::span<const LocalDag> known) {
  uint64_t estimate = 0;
  if (!estimate_flat_cars(gen, spec, max_cars, &estimate, error, known)) return false;
  FlatDagBuilder builder(spec.images, max_cars);
  builder.reserve(estimate);
  for (uint32_t i = 0; i < spec.images; ++i) {
    const bool ok = i < known.size() ? builder.add(known[i], error) : builder.add(generate_local(gen, spec, i), error);
    if (!ok) return false;
  }
  return builder.finish(out, error);
}

bool build_mirrored_flat_dag(const LocalDag& image0, uint32_t images, RankSymmetry symmetry, FlatDag* out,
                             std::string* error, uint64_t max_cars) {
  FlatDagBuilder builder(images, symmetry, max_cars);
  builder.reserve(image0.cars.size());
  return builder.add(image0, error) && builder.finish(out, error);
}

bool flat_dag_from_global(const GlobalDag& global, FlatDag* out, std::string* error) {
  const uint32_t P = static_cast<uint32_t>(global.images.size());
  if (P == 0) return fail(error, "the DAG has no images");
  FlatDagBuilder builder(P);
  for (const LocalDag& local : global.images) {
    if (!builder.add(local, error)) return false;
  }
  return builder.finish(out, error);
}

}  // namespace carflow
