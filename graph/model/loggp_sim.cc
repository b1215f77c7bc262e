// The LogGP simulator (rules in loggp.h): one event queue over all images.
//
// Events: READY (a CAR's dependencies are done and, for a receive, its
// message has arrived) and DISPATCH (an image's CPU frees while CARs wait).
// A CAR's end is known the moment it starts (nothing preempts it), so its
// successors are relaxed right then with that end time and pushed as READY
// at it: one heap entry per CAR, no completion events. READY events pop in
// (time, CAR number) order, so appending to an image's FIFO keeps "in the
// order they became ready, ties by CAR id".
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>

#include "graph/model/loggp.h"

namespace carflow {
namespace {

// What set a CAR's start, in the top two bits of its cause (CAR numbers
// take at most 27 bits, kMaxFlatCars).
enum Why : uint32_t { kByDep = 0, kByMessage = 1, kByCpu = 2, kByNic = 3 };
constexpr uint32_t kWhyShift = 30;
constexpr uint32_t kCarMask = (1u << kWhyShift) - 1;
constexpr uint32_t kNoCause = UINT32_MAX;
constexpr uint32_t kRan = UINT32_MAX;  // pending[c] once c has run
constexpr uint64_t kDispatch = uint64_t{1} << 32;

// A monotone priority queue on (time, key): a radix heap (Ahuja, Mehlhorn,
// Orlin, Tarjan, "Faster algorithms for the shortest path problem", JACM
// 1990) over the 128-bit (time bits, key); a non-negative double's bits
// order as the double does. An item lives in the bucket of the highest bit
// where it differs from the last one taken, so pushes append and a pop
// scans one bucket: far fewer cache misses than a binary heap of a million
// entries. The simulation never pushes an earlier time than it took last;
// an equal time with a smaller key (a zero-cost CAR's successor) goes to
// `late_` and is taken first, as a heap would.
class EventQueue {
 public:
  bool empty() const { return size_ == 0; }
  void push(double t, uint64_t key) {
    const Item item = pack(t, key);
    ++size_;
    if (item < last_) {
      late_.push_back(item);
      std::push_heap(late_.begin(), late_.end(), std::greater<Item>());
      return;
    }
    buckets_[bucket(item)].push_back(item);
  }
  // The least (time, key); the queue must not be empty.
  void pop(double* t, uint64_t* key) {
    --size_;
    Item item;
    if (!late_.empty()) {
      std::pop_heap(late_.begin(), late_.end(), std::greater<Item>());
      item = late_.back();
      late_.pop_back();
    } else {
      if (buckets_[0].empty()) refill();
      item = buckets_[0].back();
      buckets_[0].pop_back();
    }
    const uint64_t bits = static_cast<uint64_t>(item >> 64);
    std::memcpy(t, &bits, sizeof bits);
    *key = static_cast<uint64_t>(item);
  }

 private:
  using Item = unsigned __int128;
  static Item pack(double t, uint64_t key) {
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    return (Item{bits} << 64) | key;
  }
  size_t bucket(Item item) const {
    const Item diff = item ^ last_;
    const uint64_t hi = static_cast<uint64_t>(diff >> 64), lo = static_cast<uint64_t>(diff);
    return hi != 0 ? 128 - __builtin_clzll(hi) : lo != 0 ? 64 - __builtin_clzll(lo) : 0;
  }
  // Moves the least non-empty bucket's items down, around its minimum.
  void refill() {
    size_t b = 1;
    while (buckets_[b].empty()) ++b;
    std::vector<Item>& from = buckets_[b];
    last_ = *std::min_element(from.begin(), from.end());
    for (const Item item : from) buckets_[bucket(item)].push_back(item);
    from.clear();
  }

  std::array<std::vector<Item>, 129> buckets_;
  std::vector<Item> late_;
  Item last_ = 0;
  size_t size_ = 0;
};

struct ImageState {
  double cpu_free = 0, nic_free = 0;
  uint32_t head = kNoFlatCar, tail = kNoFlatCar;  // CARs waiting for the CPU
  uint32_t last_cpu = kNoFlatCar, last_send = kNoFlatCar;
};

// A CAR's state while the simulation runs, in its FlatCar:
//   t        before it runs, the latest time it waits for; then its start
//   pending  dependencies (and the message) not yet done; kRan once run
//   cause    what set its start (Why) and the CAR that did
//   next     the next CAR in its image's CPU queue
using CarState = FlatCar;

bool is_receive(CarKind k) { return k == CarKind::Recv || k == CarKind::RecvReduce; }
double bytes_less_one(uint64_t s) { return s == 0 ? 0.0 : static_cast<double>(s - 1); }

class LogGPSim {
 public:
  LogGPSim(FlatDag& dag, const LogGPModel& model) : dag_(dag), state_(dag.car), model_(model) {}

  bool run(LogGPResult* result, std::string* error);

 private:
  // Without nodes, no need to read the other end (a cache miss).
  const LogGPParams& pair_params(const FlatCar& car) const {
    return model_.images_per_node == 0 ? model_.inter : model_.for_pair(car.image, dag_.car[car.match].image);
  }
  double duration(const FlatCar& car) const;
  void on_ready(uint32_t c, double now);
  void on_dispatch(uint32_t image, double now);
  void execute(uint32_t c, double now);
  void relax(uint32_t x, double time, uint32_t cause) {
    CarState& st = state_[x];
    if (time >= st.t) {
      st.t = time;
      st.cause = cause;
    }
    if (--st.pending == 0) became_ready(x);
  }
  void deliver(uint32_t r, uint32_t send, const LogGPParams& p);
  void became_ready(uint32_t x);
  void critical_path(uint32_t last, LogGPResult* result) const;
  std::string deadlock() const;

  const FlatDag& dag_;
  HugeVector<FlatCar>& state_;
  const LogGPModel& model_;
  HugeVector<ImageState> images_;
  EventQueue queue_;
  uint64_t ran_ = 0;
  uint32_t last_ = kNoFlatCar;  // the CAR that ended last so far, and when
  double last_done_ = 0;
};

double LogGPSim::duration(const FlatCar& car) const {
  const double bytes = static_cast<double>(car.bytes);
  switch (car.kind) {
    case CarKind::Send:
    case CarKind::Recv: {
      const LogGPParams& p = pair_params(car);
      return p.o + bytes_less_one(car.bytes) * p.O;
    }
    case CarKind::RecvReduce: {
      const LogGPParams& p = pair_params(car);
      return p.o + bytes_less_one(car.bytes) * p.O + bytes * model_.inter.gamma;
    }
    case CarKind::Reduce: return bytes * model_.inter.gamma;
    case CarKind::Copy: return bytes * model_.inter.beta;
    case CarKind::Join: return 0;
  }
  return 0;
}

void LogGPSim::on_ready(uint32_t c, double now) {
  const uint32_t image = dag_.car[c].image;
  ImageState& s = images_[image];
  if (s.head == kNoFlatCar && s.cpu_free <= now) return execute(c, now);
  // Wait behind the running CAR and the earlier ready ones.
  state_[c].next = kNoFlatCar;
  if (s.head == kNoFlatCar) {
    s.head = s.tail = c;
    queue_.push(s.cpu_free, kDispatch | image);
  } else {
    state_[s.tail].next = c;
    s.tail = c;
  }
}

void LogGPSim::on_dispatch(uint32_t image, double now) {
  ImageState& s = images_[image];
  const uint32_t c = s.head;
  s.head = state_[c].next;
  if (s.head == kNoFlatCar) s.tail = kNoFlatCar;
  execute(c, now);
  if (s.head != kNoFlatCar) queue_.push(s.cpu_free, kDispatch | image);
}

void LogGPSim::execute(uint32_t c, double now) {
  const FlatCar& car = dag_.car[c];
  CarState& st = state_[c];
  ImageState& s = images_[car.image];
  double start = now;
  if (start > st.t) st.cause = (kByCpu << kWhyShift) | s.last_cpu;
  if (car.kind == CarKind::Send) {
    if (s.nic_free > start) {
      start = s.nic_free;
      st.cause = (kByNic << kWhyShift) | s.last_send;
    }
    const LogGPParams& p = pair_params(car);
    s.nic_free = start + p.g + bytes_less_one(car.bytes) * p.G;
    s.last_send = c;
  }
  const double done = start + duration(car);
  if (last_ == kNoFlatCar || done > last_done_) last_ = c, last_done_ = done;
  st.t = start;
  st.pending = kRan;
  s.cpu_free = done;
  s.last_cpu = c;
  ++ran_;
  const uint32_t end = dag_.car[c + 1].succ_begin;
  for (uint32_t k = car.succ_begin; k < end; ++k) relax(dag_.succ[k], done, (kByDep << kWhyShift) | c);
  if (car.kind == CarKind::Send) deliver(car.match, c, pair_params(car));
}

// An eager message's arrival is known at its SEND's start; a rendezvous one
// needs the receive posted too, so became_ready() works it out.
void LogGPSim::deliver(uint32_t r, uint32_t send, const LogGPParams& p) {
  const uint64_t s = dag_.car[send].bytes;
  CarState& st = state_[r];
  if (static_cast<double>(s) <= p.S) {
    const double arrival = state_[send].t + p.o + bytes_less_one(s) * p.G + p.L;
    if (arrival >= st.t) {
      st.t = arrival;
      st.cause = (kByMessage << kWhyShift) | send;
    }
  }
  if (--st.pending == 0) became_ready(r);
}

void LogGPSim::became_ready(uint32_t x) {
  const FlatCar& car = dag_.car[x];
  CarState& st = state_[x];
  if (is_receive(car.kind)) {
    const LogGPParams& p = pair_params(car);
    if (static_cast<double>(car.bytes) > p.S) {
      const double posted = st.t;
      st.t = std::max(state_[car.match].t, posted) + p.o + bytes_less_one(car.bytes) * p.G + p.L +
             (p.L + 2 * p.o);
      st.cause = (kByMessage << kWhyShift) | car.match;
    }
  }
  queue_.push(st.t, x);
}

bool LogGPSim::run(LogGPResult* result, std::string* error) {
  const uint64_t n = dag_.cars();
  images_.assign(dag_.images, ImageState{});
  for (uint64_t c = 0; c < n; ++c) {
    FlatCar& st = state_[c];
    st.t = 0;
    st.cause = kNoCause;
    st.next = kNoFlatCar;
    st.pending = st.deps + (is_receive(st.kind) ? 1 : 0);
    if (st.pending == 0) queue_.push(0.0, c);
  }
  while (!queue_.empty()) {
    double t;
    uint64_t key;
    queue_.pop(&t, &key);
    if (key & kDispatch) {
      on_dispatch(static_cast<uint32_t>(key & 0xffffffffu), t);
    } else {
      on_ready(static_cast<uint32_t>(key), t);
    }
  }
  if (ran_ != n) {
    *error = deadlock();
    return false;
  }
  LogGPResult r;
  r.cars = n;
  r.messages = dag_.messages;
  r.message_bytes = dag_.message_bytes;
  if (last_ != kNoFlatCar) {
    r.time_ns = last_done_;
    r.last_image = dag_.car[last_].image;
    critical_path(last_, &r);
  }
  *result = std::move(r);
  return true;
}

void LogGPSim::critical_path(uint32_t last, LogGPResult* result) const {
  static const char* const kWhyNames[] = {"dependency", "message", "cpu", "nic"};
  std::vector<PathStep>& path = result->critical_path;
  for (uint32_t c = last; c != kNoFlatCar;) {
    const FlatCar& car = dag_.car[c];
    PathStep step;
    step.image = car.image;
    step.car = dag_.local(c);
    step.kind = car.kind;
    step.start_ns = state_[c].t;
    step.done_ns = state_[c].t + duration(car);
    const uint32_t cause = state_[c].cause;
    step.waited_for = cause == kNoCause ? "start" : kWhyNames[cause >> kWhyShift];
    path.push_back(step);
    c = cause == kNoCause ? kNoFlatCar : (cause & kCarMask);
  }
  std::reverse(path.begin(), path.end());
}

// Names the images that did not finish and, for the first few, the first
// CAR that never ran and what it still waits on (dependencies are local to
// the image, so its own CARs are all that need scanning).
std::string LogGPSim::deadlock() const {
  const uint64_t n = dag_.cars();
  uint64_t stuck = 0;
  std::vector<uint32_t> images;
  auto ran = [&](uint32_t c) { return state_[c].pending == kRan; };
  for (uint32_t i = 0; i < dag_.images; ++i) {
    bool any = false;
    for (uint32_t c = dag_.image_base[i]; c < dag_.image_base[i + 1]; ++c) {
      if (!ran(c)) ++stuck, any = true;
    }
    if (any) images.push_back(i);
  }
  std::string out = "deadlock: " + std::to_string(stuck) + " of " + std::to_string(n) +
                    " CARs never ran, on " + std::to_string(images.size()) + " of " +
                    std::to_string(dag_.images) + " images (";
  for (size_t k = 0; k < images.size() && k < 8; ++k) out += (k ? ", " : "") + std::to_string(images[k]);
  out += images.size() > 8 ? ", ...)" : ")";
  constexpr size_t kShown = 4;
  for (size_t k = 0; k < images.size() && k < kShown; ++k) {
    const uint32_t i = images[k];
    uint32_t c = dag_.image_base[i];
    while (ran(c)) ++c;
    std::string waits;
    for (uint32_t d = dag_.image_base[i]; d < dag_.image_base[i + 1]; ++d) {
      if (ran(d)) continue;
      for (uint32_t e = dag_.car[d].succ_begin; e < dag_.car[d + 1].succ_begin; ++e) {
        if (dag_.succ[e] == c) waits += (waits.empty() ? "" : ", ") + dag_.label(d);
      }
    }
    if (is_receive(dag_.car[c].kind) && !ran(dag_.car[c].match)) {
      waits += (waits.empty() ? "its message from " : ", and its message from ") +
               dag_.label(dag_.car[c].match) + ", which never ran";
    }
    out += "; " + dag_.label(c) + " waits on " + (waits.empty() ? "nothing that ran" : waits);
  }
  return out;
}

}  // namespace

bool simulate_loggp(FlatDag& dag, const LogGPModel& model, LogGPResult* result,
                    std::string* error) {
  LogGPSim sim(dag, model);
  return sim.run(result, error);
}

}  // namespace carflow
