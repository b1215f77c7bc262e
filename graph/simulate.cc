#include "graph/simulate.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <random>
#include <tuple>

namespace carflow {
namespace {

struct Ref {
  uint32_t image;
  CarId car;
};

class Simulator {
 public:
  Simulator(const GlobalDag& dag, std::vector<Bytes>* src, std::vector<Bytes>* dst,
            const SimReduceFn& reduce, uint64_t seed)
      : dag_(dag), src_(*src), dst_(*dst), reduce_(reduce), rng_(seed) {}

  bool run(SimResult* result, std::string* error) {
    const uint32_t P = static_cast<uint32_t>(dag_.images.size());
    src_.resize(P);
    dst_.resize(P);
    temps_.resize(P);
    pending_.resize(P);
    succ_.resize(P);
    for (uint32_t i = 0; i < P; ++i) {
      const LocalDag& d = dag_.images[i];
      if (src_[i].size() < d.src_bytes) src_[i].resize(d.src_bytes);
      if (dst_[i].size() < d.dst_bytes) dst_[i].resize(d.dst_bytes);
      for (uint64_t t : d.temps) temps_[i].emplace_back(t);
      pending_[i].resize(d.cars.size());
      succ_[i].resize(d.cars.size());
      for (CarId c = 0; c < d.cars.size(); ++c) {
        pending_[i][c] = static_cast<uint32_t>(d.cars[c].deps.size());
        for (const Dep& dep : d.cars[c].deps) succ_[i][dep.car].push_back(c);
      }
      for (CarId c = 0; c < d.cars.size(); ++c) {
        if (pending_[i][c] == 0) make_ready(i, c);
      }
    }
    while (!runnable_.empty()) {
      std::uniform_int_distribution<size_t> pick(0, runnable_.size() - 1);
      const size_t k = pick(rng_);
      const Work w = runnable_[k];
      runnable_[k] = runnable_.back();
      runnable_.pop_back();
      if (!execute(w, error)) return false;
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < P; ++i) total += dag_.images[i].cars.size();
    if (result_.cars_run != total) {
      for (uint32_t i = 0; i < P; ++i) {
        for (CarId c = 0; c < dag_.images[i].cars.size(); ++c) {
          if (pending_[i][c] != kDone) {
            *error = "deadlock: image " + std::to_string(i) + " CAR " + std::to_string(c) + " (" +
                     car_kind_name(dag_.images[i].cars[c].kind) + ") never ran";
            return false;
          }
        }
      }
    }
    *result = result_;
    return true;
  }

 private:
  static constexpr uint32_t kDone = UINT32_MAX;
  // A runnable unit: a local CAR, or a matched (SEND, receive) pair.
  struct Work {
    Ref a, b;
    bool message;
  };
  using Key = std::tuple<uint32_t, uint32_t, uint32_t>;  // from, to, tag (one member: see simulate())

  uint8_t* at(uint32_t image, const BufferRef& ref) {
    switch (ref.space) {
      case BufferSpace::UserSrc: return src_[image].data() + ref.offset;
      case BufferSpace::UserDst: return dst_[image].data() + ref.offset;
      case BufferSpace::Temp: return temps_[image][ref.slot].data() + ref.offset;
      case BufferSpace::None: break;
    }
    return nullptr;
  }

  void make_ready(uint32_t image, CarId c) {
    const Car& car = dag_.images[image].cars[c];
    if (!car.is_message()) {
      runnable_.push_back(Work{{image, c}, {0, 0}, false});
      return;
    }
    const bool send = car.kind == CarKind::Send;
    const Key key = send ? Key{image, car.peer, car.tag} : Key{car.peer, image, car.tag};
    auto& mine = send ? sends_ : recvs_;
    auto& theirs = send ? recvs_ : sends_;
    const auto it = theirs.find(key);
    if (it == theirs.end()) {
      mine.emplace(key, Ref{image, c});
      return;
    }
    const Ref other = it->second;
    theirs.erase(it);
    runnable_.push_back(send ? Work{{image, c}, other, true} : Work{other, {image, c}, true});
  }

  void complete(Ref r) {
    pending_[r.image][r.car] = kDone;
    ++result_.cars_run;
    for (CarId s : succ_[r.image][r.car]) {
      if (--pending_[r.image][s] == 0) make_ready(r.image, s);
    }
  }

  bool combine(void* dst, const void* left, const void* right, size_t n, std::string* error) {
    if (!reduce_) {
      *error = "the DAG reduces but no reduction function was given";
      return false;
    }
    reduce_(dst, left, right, n);
    return true;
  }

  // Fold / Prefix (ReduceShape) one element at a time, left to right, with
  // the elementwise function: the order any correct kernel must follow.
  bool run_chunked(uint32_t image, const Car& car, std::string* error) {
    const uint64_t es = dag_.spec.elem_size;
    const std::vector<uint8_t> in(at(image, car.src), at(image, car.src) + car.src.length);
    const uint8_t* carry = car.src2.space == BufferSpace::None ? nullptr : at(image, car.src2);
    std::vector<uint8_t> acc(es);
    uint8_t* out = at(image, car.dst);
    bool ok = true;
    for_each_chunk(car, car.src.length / es, [&](uint64_t c, uint64_t first, uint64_t n) {
      for (uint64_t j = 0; j < n && ok; ++j) {
        const uint8_t* x = in.data() + (first + j) * es;
        if (j == 0 && carry == nullptr) {
          std::memcpy(acc.data(), x, es);
        } else {
          const uint8_t* left = j == 0 ? carry + c * es : acc.data();
          ok = combine(acc.data(), left, x, es, error);
        }
        if (car.shape == ReduceShape::Prefix) std::memcpy(out + (first + j) * es, acc.data(), es);
      }
      if (car.shape == ReduceShape::Fold) std::memcpy(out + c * es, acc.data(), es);
    });
    return ok;
  }

  bool execute(const Work& w, std::string* error) {
    if (w.message) {
      const Car& s = dag_.images[w.a.image].cars[w.a.car];
      const Car& r = dag_.images[w.b.image].cars[w.b.car];
      const uint64_t n = r.dst.length;
      if (s.src.length != n) {
        *error = "message size mismatch";
        return false;
      }
      if (n > 0) {
        const uint8_t* from = at(w.a.image, s.src);
        uint8_t* to = at(w.b.image, r.dst);
        if (r.kind == CarKind::Recv) {
          std::memmove(to, from, n);
        } else {
          std::vector<uint8_t> incoming(from, from + n);
          const uint8_t* local = r.src.space == BufferSpace::None ? to : at(w.b.image, r.src);
          if (!(r.incoming_left ? combine(to, incoming.data(), local, n, error)
                                : combine(to, local, incoming.data(), n, error))) {
            return false;
          }
        }
      }
      ++result_.messages;
      result_.bytes += n;
      complete(w.a);
      complete(w.b);
      return true;
    }
    const Car& car = dag_.images[w.a.image].cars[w.a.car];
    if (car.kind == CarKind::Copy && car.dst.length > 0) {
      std::memmove(at(w.a.image, car.dst), at(w.a.image, car.src), car.dst.length);
    } else if (car.kind == CarKind::Reduce && car.shape != ReduceShape::Elementwise) {
      if (!run_chunked(w.a.image, car, error)) return false;
    } else if (car.kind == CarKind::Reduce && car.dst.length > 0) {
      if (!combine(at(w.a.image, car.dst), at(w.a.image, car.src), at(w.a.image, car.src2),
                   car.dst.length, error)) {
        return false;
      }
    }
    complete(w.a);
    return true;
  }

  const GlobalDag& dag_;
  std::vector<Bytes>& src_;
  std::vector<Bytes>& dst_;
  const SimReduceFn& reduce_;
  std::mt19937_64 rng_;
  std::vector<std::vector<Bytes>> temps_;
  std::vector<std::vector<uint32_t>> pending_;
  std::vector<std::vector<std::vector<CarId>>> succ_;
  std::map<Key, Ref> sends_, recvs_;
  std::vector<Work> runnable_;
  SimResult result_;
};

}  // namespace

bool simulate(const GlobalDag& dag, std::vector<Bytes>* src, std::vector<Bytes>* dst,
              const SimReduceFn& reduce, uint64_t seed, SimResult* result, std::string* error) {
  for (const LocalDag& image : dag.images) {
    if (!image.members.empty()) {
      // One pair of user buffers per image here; the engine runs aggregates.
      *error = "image " + std::to_string(image.image) + ": aggregates are not simulated";
      return false;
    }
  }
  Simulator sim(dag, src, dst, reduce, seed);
  return sim.run(result, error);
}

}  // namespace carflow
