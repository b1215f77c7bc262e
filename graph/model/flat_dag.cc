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
  return "image " + std::to_string(car[c].image) + " CAR " + std::to_string(local(c)) + " (" +
         car_kind_name(car[c].kind) + ")";
}

FlatDagBuilder::FlatDagBuilder(uint32_t team_images, RankSymmetry mirror, uint64_t max_cars)
    : FlatDagBuilder(1, max_cars) {
  team_ = team_images;
  mirror_ = mirror;
}

FlatDagBuilder::FlatDagBuilder(uint32_t images, uint64_t max_cars)
    : max_cars_(std::min(max_cars, kMaxFlatCars)), team_(images) {
  dag_.images = images;
  dag_.image_base.reserve(uint64_t{images} + 1);
  dag_.image_base.push_back(0);
}

void FlatDagBuilder::reserve(uint64_t cars) {
  cars = std::min(cars, max_cars_);
  dag_.car.reserve(cars + 1);
  dag_.succ.reserve(cars + cars / 2);
  peer_.reserve(cars);
  tag_.reserve(cars);
}

bool FlatDagBuilder::add(const LocalDag& local, std::string* error) {
  const uint32_t image = static_cast<uint32_t>(dag_.image_base.size() - 1);
  // Made only on an error: a string per image was a heap block per image.
  auto where = [image] { return "image " + std::to_string(image); };
  if (!local.error.empty()) return fail(error, local.error);
  if (image >= dag_.images || local.image != image) {
    return fail(error, where() + ": expected DAGs in rank order, got image " + std::to_string(local.image));
  }
  const uint64_t base = dag_.car.size(), n = local.cars.size();
  if (base + n > max_cars_) {
    return fail(error, "--images: the DAG passes " + std::to_string(max_cars_) +
                           " CARs at image " + std::to_string(image) + " (the simulator's limit)");
  }
  // Successor lists: count, then place, in this image's slice of succ.
  std::vector<uint32_t>& count = count_;
  count.assign(n + 1, 0);
  for (uint64_t c = 0; c < n; ++c) {
    for (const Dep& d : local.cars[c].deps) {
      if (d.car >= n || d.car == c) {
        return fail(error, where() + " CAR " + std::to_string(c) + ": dependency on CAR " +
                               std::to_string(d.car) + ", which is not another CAR of the image");
      }
      ++count[d.car];
    }
  }
  const uint64_t edges = dag_.succ.size();
  uint64_t at = edges;
  for (uint64_t c = 0; c < n; ++c) {
    const uint64_t k = count[c];
    count[c] = static_cast<uint32_t>(at - edges);
    FlatCar flat;
    flat.bytes = cost_bytes(local.cars[c]);
    flat.image = image;
    flat.deps = static_cast<uint32_t>(local.cars[c].deps.size());
    flat.succ_begin = static_cast<uint32_t>(at);
    flat.kind = local.cars[c].kind;
    dag_.car.push_back(flat);
    at += k;
  }
  if (at >= UINT32_MAX) return fail(error, where() + ": over 2^32 dependencies in all");
  dag_.succ.resize(at);
  for (uint64_t c = 0; c < n; ++c) {
    const Car& car = local.cars[c];
    for (const Dep& d : car.deps) dag_.succ[edges + count[d.car]++] = static_cast<uint32_t>(base + c);
    if (car.is_message() && (car.peer >= team_ || car.peer == image)) {
      return fail(error, where() + " CAR " + std::to_string(c) + ": peer " + std::to_string(car.peer) +
                             " is not another team rank (P = " + std::to_string(team_) + ")");
    }
    peer_.push_back(car.peer);
    tag_.push_back(car.tag);
    if (car.member != 0 && !any_member_) {
      any_member_ = true;
      member_.assign(base + c, 0);
    }
    if (any_member_) member_.push_back(car.member);
  }
  dag_.image_base.push_back(static_cast<uint32_t>(base + n));
  return true;
}

}  // namespace carflow

namespace carflow {
namespace {

// One end of a message as its receiver's bucket sees it.
struct MessageEnd {
  uint32_t sender, member, tag, car;
  auto key() const { return std::tie(sender, member, tag); }
  auto order() const { return std::tie(sender, member, tag, car); }
};

std::string key_text(uint32_t sender, uint32_t receiver, const MessageEnd& e) {
  return "(sender " + std::to_string(sender) + ", receiver " + std::to_string(receiver) +
         (e.member != 0 ? ", member " + std::to_string(e.member) : "") + ", tag " +
         std::to_string(e.tag) + ")";
}

bool sort_unique(const FlatDag& dag, uint32_t receiver, std::vector<MessageEnd>* ends,
                 std::string* error) {
  // Ends come in CAR order, which most generators give in tag order too.
  auto before = [](const MessageEnd& a, const MessageEnd& b) { return a.order() < b.order(); };
  if (!std::is_sorted(ends->begin(), ends->end(), before)) std::sort(ends->begin(), ends->end(), before);
  for (size_t i = 1; i < ends->size(); ++i) {
    if ((*ends)[i - 1].key() == (*ends)[i].key()) {
      const MessageEnd& e = (*ends)[i];
      return fail(error, dag.label(e.car) + ": duplicate message " + key_text(e.sender, receiver, e) +
                             "; " + dag.label((*ends)[i - 1].car) + " uses the same tag");
    }
  }
  return true;
}

bool unmatched(const FlatDag& dag, uint32_t receiver, const MessageEnd& e, bool is_send,
               std::string* error) {
  const std::string other = is_send ? "receive on image " + std::to_string(receiver)
                                    : "SEND on image " + std::to_string(e.sender);
  return fail(error, dag.label(e.car) + ": no " + other + " matches " + key_text(e.sender, receiver, e));
}

}  // namespace

bool FlatDagBuilder::finish(FlatDag* out, std::string* error) {
  const uint64_t added = dag_.image_base.size() - 1;
  if (added != dag_.images) {
    return fail(error, "only " + std::to_string(added) + " of " + std::to_string(dag_.images) +
                           " images were added");
  }
  const uint32_t P = dag_.images;
  const uint64_t n = dag_.car.size();
  // The end marker: the last CAR's successors end where it begins.
  FlatCar end;
  end.succ_begin = static_cast<uint32_t>(dag_.succ.size());
  dag_.car.push_back(end);
  // Mirrored: image 0 receives every message, each from the image whose
  // SEND image 0's SEND to `peer` stands for, sigma_peer^-1(0).
  const bool mirrored = mirror_ != RankSymmetry::None;
  auto receiver = [&](uint64_t c) { return mirrored ? 0u : peer_[c]; };
  auto sender = [&](uint32_t c) {
    if (!mirrored) return dag_.car[c].image;
    return mirror_ == RankSymmetry::Xor ? peer_[c] : (team_ - peer_[c]) % team_;
  };
  // SENDs bucketed by receiver (a counting sort), so each receiver's
  // messages pair up in a small sort of their own.
  std::vector<uint32_t> start(uint64_t{P} + 1, 0);
  for (uint64_t c = 0; c < n; ++c) {
    if (dag_.car[c].kind == CarKind::Send) ++start[receiver(c) + 1];
  }
  for (uint32_t j = 0; j < P; ++j) start[j + 1] += start[j];
  std::vector<uint32_t> by_receiver(start[P]);
  {
    std::vector<uint32_t> at(start.begin(), start.end() - 1);
    for (uint64_t c = 0; c < n; ++c) {
      if (dag_.car[c].kind == CarKind::Send) by_receiver[at[receiver(c)]++] = static_cast<uint32_t>(c);
    }
  }
  auto member = [&](uint32_t c) { return any_member_ ? member_[c] : 0u; };
  std::vector<MessageEnd> sends, recvs;
  for (uint32_t j = 0; j < P; ++j) {
    sends.clear();
    recvs.clear();
    for (uint32_t k = start[j]; k < start[j + 1]; ++k) {
      const uint32_t s = by_receiver[k];
      sends.push_back({sender(s), member(s), tag_[s], s});
    }
    for (uint32_t c = dag_.image_base[j]; c < dag_.image_base[j + 1]; ++c) {
      if (dag_.car[c].kind == CarKind::Recv || dag_.car[c].kind == CarKind::RecvReduce) {
        recvs.push_back({peer_[c], member(c), tag_[c], c});
      }
    }
    if (!sort_unique(dag_, j, &sends, error) || !sort_unique(dag_, j, &recvs, error)) return false;
    size_t r = 0;
    for (const MessageEnd& s : sends) {
      if (r < recvs.size() && recvs[r].key() < s.key()) return unmatched(dag_, j, recvs[r], false, error);
      if (r == recvs.size() || recvs[r].key() != s.key()) return unmatched(dag_, j, s, true, error);
      const MessageEnd& m = recvs[r++];
      const uint64_t sent = dag_.car[s.car].bytes, received = dag_.car[m.car].bytes;
      if (sent != received) {
        return fail(error, dag_.label(m.car) + ": receives " + std::to_string(received) +
                               " bytes but its SEND " + dag_.label(s.car) + " sends " + std::to_string(sent));
      }
      dag_.car[s.car].match = m.car;
      dag_.car[m.car].match = s.car;
      ++dag_.messages;
      dag_.message_bytes += sent;
    }
    if (r < recvs.size()) return unmatched(dag_, j, recvs[r], false, error);
  }
  peer_ = {};
  tag_ = {};
  member_ = {};
  *out = std::move(dag_);
  dag_ = FlatDag{};
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
