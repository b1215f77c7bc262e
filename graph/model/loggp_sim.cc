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
#include <type_traits>
#include <unordered_map>

#include "graph/model/loggp.h"

namespace carflow {
namespace {

// What set a CAR's start, in the top two bits of its cause (CAR numbers
// take at most 27 bits, kMaxFlatCars).
enum Why : uint32_t { kByDep = 0, kByMessage = 1, kByCpu = 2, kByNic = 3 };
constexpr uint32_t kWhyShift = 30;
constexpr uint32_t kCarMask = (1u << kWhyShift) - 1;
constexpr uint32_t kNoCause = UINT32_MAX;
constexpr uint32_t kRan = UINT32_MAX;  // a CAR's link once it has run
constexpr uint64_t kDispatch = uint64_t{1} << 32;
// DAGs below this many CARs take the RadixQueue, larger ones the SweepQueue.
constexpr uint64_t kSmallQueueCars = uint64_t{1} << 16;

// Both event queues give (time, key) pairs in that order, all keys of the
// least time as one run, sorted (if they are not already): the run shows
// the simulator which CARs come next so it can prefetch them. Keys pushed at
// the current time are merged in through a small heap, so the order is
// exactly (time, key) even for a zero-cost CAR's successors. The run and
// that heap are kept here; Queue::next_time() makes the next run.
template <typename Queue>
class TimeOrder {
 public:
  // The least (time, key); the queue must not be empty.
  void pop(double* t, uint64_t* key) {
    if (pos_ == run_.size() && now_heap_.empty()) static_cast<Queue*>(this)->next_time();
    *t = now_;
    if (!now_heap_.empty() && (pos_ == run_.size() || now_heap_.front() < run_[pos_])) {
      std::pop_heap(now_heap_.begin(), now_heap_.end(), std::greater<uint64_t>());
      *key = now_heap_.back();
      now_heap_.pop_back();
    } else {
      *key = run_[pos_++];
    }
  }
  // The key i places after the next one in the current run, or kNoKey.
  static constexpr uint64_t kNoKey = UINT64_MAX;
  uint64_t ahead(size_t i) const { return pos_ + i < run_.size() ? run_[pos_ + i] : kNoKey; }

 protected:
  bool run_empty() const { return pos_ == run_.size() && now_heap_.empty(); }
  void push_now(uint64_t key) {
    now_heap_.push_back(key);
    std::push_heap(now_heap_.begin(), now_heap_.end(), std::greater<uint64_t>());
  }
  // next_time(): the run's keys go into run_ between these two.
  void start_run() {
    run_.clear();
    pos_ = 0;
  }
  void end_run() {
    started_ = true;
    if (!std::is_sorted(run_.begin(), run_.end())) std::sort(run_.begin(), run_.end());
  }

  bool started_ = false;
  double now_ = 0;
  std::vector<uint64_t> run_;  // the current time's keys, sorted
  size_t pos_ = 0;
  std::vector<uint64_t> now_heap_;  // keys pushed at the current time
};

// SweepQueue, for large DAGs: pending times in a binary heap, each time's
// keys in a vector (a slot) found through a hash map. Symmetric algorithms
// put a whole sweep over the images (a million events) at one time; taking
// them as one sorted run costs one heap operation per distinct time rather
// than per event.
class SweepQueue : public TimeOrder<SweepQueue> {
 public:
  bool empty() const { return run_empty() && times_.empty(); }
  void push(double t, uint64_t key) {
    if (started_ && t == now_) return push_now(key);
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    if (bits != cached_bits_ || cached_slot_ == kNone) {
      auto [it, added] = slot_of_.try_emplace(bits, 0u);
      if (added) {
        it->second = take_slot();
        times_.push_back(t);
        std::push_heap(times_.begin(), times_.end(), std::greater<double>());
      }
      cached_bits_ = bits;
      cached_slot_ = it->second;
    }
    slots_[cached_slot_].push_back(key);
  }

 private:
  friend class TimeOrder<SweepQueue>;
  static constexpr uint32_t kNone = UINT32_MAX;
  uint32_t take_slot() {
    if (!free_.empty()) {
      const uint32_t slot = free_.back();
      free_.pop_back();
      return slot;
    }
    slots_.emplace_back();
    return static_cast<uint32_t>(slots_.size() - 1);
  }
  void next_time() {
    std::pop_heap(times_.begin(), times_.end(), std::greater<double>());
    now_ = times_.back();
    times_.pop_back();
    uint64_t bits;
    std::memcpy(&bits, &now_, sizeof bits);
    auto it = slot_of_.find(bits);
    const uint32_t slot = it->second;
    slot_of_.erase(it);
    if (cached_slot_ == slot) cached_slot_ = kNone;
    start_run();
    run_.swap(slots_[slot]);  // the slot keeps run_'s old capacity for reuse
    free_.push_back(slot);
    end_run();
  }

  std::vector<double> times_;  // a min-heap of the times that have keys
  std::unordered_map<uint64_t, uint32_t> slot_of_;  // a time's bits -> its slot
  std::vector<std::vector<uint64_t>> slots_;
  std::vector<uint32_t> free_;
  uint64_t cached_bits_ = 0;  // pushes come in runs to one time
  uint32_t cached_slot_ = kNone;
};

// RadixQueue, for small DAGs (they fit in cache, and most of their times
// are met by one or two events): a radix heap of (time, key) entries over
// the time's bits (a non-negative double's bits order as the double does).
// Times never go back (every push is at or after the time last taken: a
// CAR starts no earlier than the event that made it ready), so an entry
// waits in the bucket of the highest bit where its time differs from the
// time last taken, and the next time empties the lowest nonempty bucket
// into lower ones: a push costs no comparison, and an entry moves down at
// most once per bit. The binary heap of times spent most of a small DAG's
// simulation in its sifts, and grouping keys into slots cost more than it
// saved where times rarely repeat.
class RadixQueue : public TimeOrder<RadixQueue> {
 public:
  bool empty() const { return run_empty() && first_.empty() && mask_ == 0; }
  void push(double t, uint64_t key) {
    uint64_t bits;
    std::memcpy(&bits, &t, sizeof bits);
    if (bits <= last_) {
      // The current time (an earlier one cannot come: see above).
      if (started_) return push_now(key);
      first_.push_back(key);
      return;
    }
    const int b = 63 - __builtin_clzll(bits ^ last_);
    buckets_[b].push_back({bits, key});
    mask_ |= uint64_t{1} << b;
  }

 private:
  friend class TimeOrder<RadixQueue>;
  struct Entry {
    uint64_t bits, key;
  };
  void next_time() {
    start_run();
    if (!started_ && !first_.empty()) {
      run_.swap(first_);  // time 0's keys, pushed before the first pop
    } else {
      const int i = __builtin_ctzll(mask_);
      std::vector<Entry>& from = buckets_[i];
      uint64_t least = from.front().bits;
      for (const Entry& e : from) least = std::min(least, e.bits);
      last_ = least;
      // Every other entry of bucket i differs from the new time below bit i.
      for (const Entry& e : from) {
        if (e.bits == least) {
          run_.push_back(e.key);
        } else {
          const int b = 63 - __builtin_clzll(e.bits ^ least);
          buckets_[b].push_back(e);
          mask_ |= uint64_t{1} << b;
        }
      }
      from.clear();
      mask_ &= ~(uint64_t{1} << i);
    }
    std::memcpy(&now_, &last_, sizeof now_);
    end_run();
  }

  // buckets_[b]: entries whose time first differs from last_ at bit b
  // (mask_ bit b: not empty).
  std::array<std::vector<Entry>, 64> buckets_;
  uint64_t mask_ = 0;
  uint64_t last_ = 0;  // the bits of the current time (0.0 before the first pop)
  std::vector<uint64_t> first_;  // keys pushed at time 0 before the first pop
};

struct ImageState {
  double cpu_free = 0, nic_free = 0;
  uint32_t head = kNoFlatCar, tail = kNoFlatCar;  // CARs waiting for the CPU
  uint32_t last_cpu = kNoFlatCar, last_send = kNoFlatCar;
};

// A CAR's state while the simulation runs, in its FlatCar:
//   t        before it runs, the latest time it waits for; then its start
//   link     until it is ready, its dependencies (and the message) not yet
//            done; while it waits for the CPU, the next CAR in its image's
//            queue; kRan once run (no CAR is queued when the events end)
//   cause    what set its start (Why) and the CAR that did
using CarState = FlatCar;

bool is_receive(CarKind k) { return k == CarKind::Recv || k == CarKind::RecvReduce; }
double bytes_less_one(uint64_t s) { return s == 0 ? 0.0 : static_cast<double>(s - 1); }

template <typename Queue>
class LogGPSim {
 public:
  LogGPSim(FlatDag& dag, const LogGPModel& model, double time_limit_ns)
      : dag_(dag), state_(dag.car), model_(model), limit_(time_limit_ns) {}

  bool run(LogGPResult* result, std::string* error);

 private:
  // Without nodes, no need to read the other end (a cache miss); without
  // bands, no look at the size.
  const LogGPParams& pair_params(const FlatCar& car) const {
    if (model_.images_per_node == 0) return model_.bands.empty() ? model_.inter : model_.for_message(0, 0, bytes(car));
    return model_.for_message(car.image(), dag_.car[car.match].image(), bytes(car));
  }
  // A REDUCE or COPY streams through the collective's buffers, whatever
  // piece of them it takes: the band of the larger of its bytes and theirs.
  const LogGPParams& local_params(const FlatCar& car) const {
    return model_.bands.empty() ? model_.inter : model_.for_local(std::max(bytes(car), dag_.footprint));
  }
  // A CAR's bytes, read from the CAR itself (a reference into dag_.car).
  uint64_t bytes(const FlatCar& car) const {
    const uint64_t b = car.stored_bytes();
    return b == kBigFlatBytes ? dag_.big(static_cast<uint32_t>(&car - dag_.car.data())) : b;
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
    if (--st.link == 0) became_ready(x);
  }
  void deliver(uint32_t r, uint32_t send, const LogGPParams& p);
  void became_ready(uint32_t x);
  void critical_path(uint32_t last, LogGPResult* result) const;
  std::string deadlock() const;
  // The events of a run are known in advance and touch CARs and images
  // scattered over gigabytes: ask for them early, in stages, each reading
  // only what an earlier stage fetched: far ahead the CAR (and the next
  // one, whose succ_begin ends its list) or image; nearer the CAR's image,
  // its message's other end and its successor list, or the image's next
  // CAR; nearest the successors themselves.
  void prefetch_ahead() const {
    constexpr size_t kFar = 16, kNear = 8, kNearest = 4;
    const uint64_t far = queue_.ahead(kFar), near = queue_.ahead(kNear), nearest = queue_.ahead(kNearest);
    if (far != Queue::kNoKey) {
      if (far & kDispatch) {
        prefetch(images_.data() + (far & 0xffffffffu));
      } else {
        prefetch(state_.data() + far);
        prefetch(&state_[far + 1].succ_begin);
      }
    }
    if (near != Queue::kNoKey && (near & kDispatch)) {
      const uint32_t head = images_[near & 0xffffffffu].head;
      if (head != kNoFlatCar) prefetch(state_.data() + head);
    } else if (near != Queue::kNoKey) {
      const FlatCar& car = state_[near];
      prefetch(images_.data() + car.image());
      if (car.match != kNoFlatCar) prefetch(state_.data() + car.match);
      prefetch(dag_.succ.data() + car.succ_begin);
    }
    if (nearest != Queue::kNoKey && !(nearest & kDispatch)) {
      const uint32_t begin = state_[nearest].succ_begin, end = state_[nearest + 1].succ_begin;
      if (begin != end) {
        prefetch(state_.data() + dag_.succ[begin]);
        prefetch(state_.data() + dag_.succ[end - 1]);
      }
    }
  }
  // GCC 12 at -O2 emits no instruction for __builtin_prefetch in this
  // class (its assembly shows none), so on x86-64 it is written out.
  static void prefetch(const void* p) {
#if defined(__x86_64__)
    asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
    __builtin_prefetch(p);
#endif
  }

  const FlatDag& dag_;
  HugeVector<FlatCar>& state_;
  const LogGPModel& model_;
  const double limit_;
  HugeVector<ImageState> images_;
  Queue queue_;
  uint64_t ran_ = 0;
  uint32_t last_ = kNoFlatCar;  // the CAR that ended last so far, and when
  double last_done_ = 0;
};

template <typename Queue>
double LogGPSim<Queue>::duration(const FlatCar& car) const {
  const uint64_t s = bytes(car);
  const double b = static_cast<double>(s);
  switch (car.kind()) {
    case CarKind::Send:
    case CarKind::Recv: {
      const LogGPParams& p = pair_params(car);
      return p.o + bytes_less_one(s) * p.O;
    }
    case CarKind::RecvReduce: {
      const LogGPParams& p = pair_params(car);
      return p.o + bytes_less_one(s) * p.O + b * local_params(car).gamma;
    }
    case CarKind::Reduce: return b * local_params(car).gamma;
    case CarKind::Copy: return b * local_params(car).beta;
    case CarKind::Join: return 0;
  }
  return 0;
}

template <typename Queue>
void LogGPSim<Queue>::on_ready(uint32_t c, double now) {
  const uint32_t image = dag_.car[c].image();
  ImageState& s = images_[image];
  if (s.head == kNoFlatCar && s.cpu_free <= now) return execute(c, now);
  // Wait behind the running CAR and the earlier ready ones.
  state_[c].link = kNoFlatCar;
  if (s.head == kNoFlatCar) {
    s.head = s.tail = c;
    queue_.push(s.cpu_free, kDispatch | image);
  } else {
    state_[s.tail].link = c;
    s.tail = c;
  }
}

template <typename Queue>
void LogGPSim<Queue>::on_dispatch(uint32_t image, double now) {
  ImageState& s = images_[image];
  const uint32_t c = s.head;
  s.head = state_[c].link;
  if (s.head == kNoFlatCar) s.tail = kNoFlatCar;
  execute(c, now);
  if (s.head != kNoFlatCar) queue_.push(s.cpu_free, kDispatch | image);
}

template <typename Queue>
void LogGPSim<Queue>::execute(uint32_t c, double now) {
  const FlatCar& car = dag_.car[c];
  CarState& st = state_[c];
  ImageState& s = images_[car.image()];
  double start = now;
  if (start > st.t) st.cause = (kByCpu << kWhyShift) | s.last_cpu;
  if (car.kind() == CarKind::Send) {
    if (s.nic_free > start) {
      start = s.nic_free;
      st.cause = (kByNic << kWhyShift) | s.last_send;
    }
    const LogGPParams& p = pair_params(car);
    s.nic_free = start + p.g + bytes_less_one(bytes(car)) * p.G;
    s.last_send = c;
  }
  const double done = start + duration(car);
  if (last_ == kNoFlatCar || done > last_done_) last_ = c, last_done_ = done;
  st.t = start;
  st.link = kRan;
  s.cpu_free = done;
  s.last_cpu = c;
  ++ran_;
  const uint32_t end = dag_.car[c + 1].succ_begin;
  for (uint32_t k = car.succ_begin; k < end; ++k) relax(dag_.succ[k], done, (kByDep << kWhyShift) | c);
  if (car.kind() == CarKind::Send) deliver(car.match, c, pair_params(car));
}

// An eager message's arrival is known at its SEND's start; a rendezvous one
// needs the receive posted too, so became_ready() works it out.
template <typename Queue>
void LogGPSim<Queue>::deliver(uint32_t r, uint32_t send, const LogGPParams& p) {
  const uint64_t s = bytes(dag_.car[send]);
  CarState& st = state_[r];
  if (static_cast<double>(s) <= p.S) {
    const double arrival = state_[send].t + p.o + bytes_less_one(s) * p.G + p.L;
    if (arrival >= st.t) {
      st.t = arrival;
      st.cause = (kByMessage << kWhyShift) | send;
    }
  }
  if (--st.link == 0) became_ready(r);
}

template <typename Queue>
void LogGPSim<Queue>::became_ready(uint32_t x) {
  const FlatCar& car = dag_.car[x];
  CarState& st = state_[x];
  if (is_receive(car.kind())) {
    const LogGPParams& p = pair_params(car);
    const uint64_t s = bytes(car);
    if (static_cast<double>(s) > p.S) {
      const double posted = st.t;
      st.t = std::max(state_[car.match].t, posted) + p.o + bytes_less_one(s) * p.G + p.L +
             (p.L + 2 * p.o);
      st.cause = (kByMessage << kWhyShift) | car.match;
    }
  }
  queue_.push(st.t, x);
}

template <typename Queue>
bool LogGPSim<Queue>::run(LogGPResult* result, std::string* error) {
  const uint64_t n = dag_.cars();
  images_.assign(dag_.images, ImageState{});
  for (uint64_t c = 0; c < n; ++c) {
    FlatCar& st = state_[c];
    st.t = 0;
    st.cause = kNoCause;
    st.link = dag_.deps[c] + (is_receive(st.kind()) ? 1 : 0);
    if (st.link == 0) queue_.push(0.0, c);
  }
  while (!queue_.empty() && !(last_done_ > limit_)) {
    double t;
    uint64_t key;
    queue_.pop(&t, &key);
    // A small DAG stays in cache: there the look ahead only costs.
    if constexpr (std::is_same_v<Queue, SweepQueue>) prefetch_ahead();
    if (key & kDispatch) {
      on_dispatch(static_cast<uint32_t>(key & 0xffffffffu), t);
    } else {
      on_ready(static_cast<uint32_t>(key), t);
    }
  }
  if (last_done_ > limit_) {
    LogGPResult r;
    r.cars = n;
    r.messages = dag_.messages;
    r.message_bytes = dag_.message_bytes;
    r.time_ns = last_done_;
    r.exceeded = true;
    *result = std::move(r);
    return true;
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
    r.last_image = dag_.car[last_].image();
    critical_path(last_, &r);
  }
  *result = std::move(r);
  return true;
}

template <typename Queue>
void LogGPSim<Queue>::critical_path(uint32_t last, LogGPResult* result) const {
  static const char* const kWhyNames[] = {"dependency", "message", "cpu", "nic"};
  std::vector<PathStep>& path = result->critical_path;
  for (uint32_t c = last; c != kNoFlatCar;) {
    const FlatCar& car = dag_.car[c];
    PathStep step;
    step.image = car.image();
    step.car = dag_.local(c);
    step.kind = car.kind();
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
template <typename Queue>
std::string LogGPSim<Queue>::deadlock() const {
  const uint64_t n = dag_.cars();
  uint64_t stuck = 0;
  std::vector<uint32_t> images;
  auto ran = [&](uint32_t c) { return state_[c].link == kRan; };
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
    if (is_receive(dag_.car[c].kind()) && !ran(dag_.car[c].match)) {
      waits += (waits.empty() ? "its message from " : ", and its message from ") +
               dag_.label(dag_.car[c].match) + ", which never ran";
    }
    out += "; " + dag_.label(c) + " waits on " + (waits.empty() ? "nothing that ran" : waits);
  }
  return out;
}

}  // namespace

bool simulate_loggp(FlatDag& dag, const LogGPModel& model, LogGPResult* result, std::string* error,
                    double time_limit_ns) {
  if (dag.cars() < kSmallQueueCars) return LogGPSim<RadixQueue>(dag, model, time_limit_ns).run(result, error);
  return LogGPSim<SweepQueue>(dag, model, time_limit_ns).run(result, error);
}

}  // namespace carflow
