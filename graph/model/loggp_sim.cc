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
#include <cmath>

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

struct Event {
  double t;
  uint64_t key;  // READY: the CAR; DISPATCH: kDispatch | image
  bool operator<(const Event& o) const { return t < o.t || (t == o.t && key < o.key); }
};

// A 4-ary min-heap: half the depth of a binary one, and a node's children
// share a cache line.
class EventHeap {
 public:
  bool empty() const { return v_.empty(); }
  size_t size() const { return v_.size(); }
  void push(Event e) {
    size_t i = v_.size();
    v_.push_back(e);
    while (i > 0) {
      const size_t parent = (i - 1) / 4;
      if (!(e < v_[parent])) break;
      v_[i] = v_[parent];
      i = parent;
    }
    v_[i] = e;
  }
  Event pop() {
    const Event top = v_[0];
    const Event last = v_.back();
    v_.pop_back();
    const size_t n = v_.size();
    if (n == 0) return top;
    size_t i = 0;
    for (;;) {
      const size_t first = 4 * i + 1;
      if (first >= n) break;
      size_t best = first;
      const size_t end = std::min(first + 4, n);
      for (size_t k = first + 1; k < end; ++k) {
        if (v_[k] < v_[best]) best = k;
      }
      if (!(v_[best] < last)) break;
      v_[i] = v_[best];
      i = best;
    }
    v_[i] = last;
    return top;
  }

 private:
  std::vector<Event> v_;
};

struct ImageState {
  double cpu_free = 0, nic_free = 0;
  uint32_t head = kNoFlatCar, tail = kNoFlatCar;  // CARs waiting for the CPU
  uint32_t last_cpu = kNoFlatCar, last_send = kNoFlatCar;
};

bool is_receive(CarKind k) { return k == CarKind::Recv || k == CarKind::RecvReduce; }

class LogGPSim {
 public:
  LogGPSim(const FlatDag& dag, const LogGPModel& model) : dag_(dag), model_(model) {}

  bool run(LogGPResult* result, std::string* error);

 private:
  const LogGPParams& pair_params(uint32_t c) const {
    return model_.for_pair(dag_.image[c], dag_.image[dag_.match[c]]);
  }
  double duration(uint32_t c) const;
  bool rendezvous(uint32_t c) const { return static_cast<double>(dag_.bytes[c]) > pair_params(c).S; }
  void on_ready(uint32_t c, double now);
  void on_dispatch(uint32_t image, double now);
  void execute(uint32_t c, double now);
  void relax(uint32_t x, double time, uint32_t cause) {
    if (time >= t_[x]) {
      t_[x] = time;
      cause_[x] = cause;
    }
    if (--pending_[x] == 0) became_ready(x);
  }
  void deliver(uint32_t r, uint32_t send, const LogGPParams& p);
  void became_ready(uint32_t x);
  void critical_path(uint32_t last, LogGPResult* result) const;
  std::string deadlock() const;

  const FlatDag& dag_;
  const LogGPModel& model_;
  // Per CAR: before it runs, the latest time it waits for (then its start).
  std::vector<double> t_;
  std::vector<uint32_t> pending_, cause_, next_;
  std::vector<ImageState> images_;
  EventHeap heap_;
  uint64_t ran_ = 0;
};

double bytes_less_one(uint64_t s) { return s == 0 ? 0.0 : static_cast<double>(s - 1); }

double LogGPSim::duration(uint32_t c) const {
  const uint64_t s = dag_.bytes[c];
  const double bytes = static_cast<double>(s);
  switch (dag_.kind[c]) {
    case CarKind::Send:
    case CarKind::Recv: {
      const LogGPParams& p = pair_params(c);
      return p.o + bytes_less_one(s) * p.O;
    }
    case CarKind::RecvReduce: {
      const LogGPParams& p = pair_params(c);
      return p.o + bytes_less_one(s) * p.O + bytes * model_.inter.gamma;
    }
    case CarKind::Reduce: return bytes * model_.inter.gamma;
    case CarKind::Copy: return bytes * model_.inter.beta;
    case CarKind::Join: return 0;
  }
  return 0;
}

void LogGPSim::on_ready(uint32_t c, double now) {
  ImageState& s = images_[dag_.image[c]];
  if (s.head == kNoFlatCar && s.cpu_free <= now) return execute(c, now);
  // Wait behind the running CAR and the earlier ready ones.
  next_[c] = kNoFlatCar;
  if (s.head == kNoFlatCar) {
    s.head = s.tail = c;
    heap_.push({s.cpu_free, kDispatch | dag_.image[c]});
  } else {
    next_[s.tail] = c;
    s.tail = c;
  }
}

void LogGPSim::on_dispatch(uint32_t image, double now) {
  ImageState& s = images_[image];
  const uint32_t c = s.head;
  s.head = next_[c];
  if (s.head == kNoFlatCar) s.tail = kNoFlatCar;
  execute(c, now);
  if (s.head != kNoFlatCar) heap_.push({s.cpu_free, kDispatch | image});
}

void LogGPSim::execute(uint32_t c, double now) {
  ImageState& s = images_[dag_.image[c]];
  double start = now;
  if (start > t_[c]) cause_[c] = (kByCpu << kWhyShift) | s.last_cpu;
  if (dag_.kind[c] == CarKind::Send) {
    if (s.nic_free > start) {
      start = s.nic_free;
      cause_[c] = (kByNic << kWhyShift) | s.last_send;
    }
    const LogGPParams& p = pair_params(c);
    s.nic_free = start + p.g + bytes_less_one(dag_.bytes[c]) * p.G;
    s.last_send = c;
  }
  const double done = start + duration(c);
  t_[c] = start;
  s.cpu_free = done;
  s.last_cpu = c;
  pending_[c] = kRan;
  ++ran_;
  for (uint32_t k = dag_.succ_begin[c]; k < dag_.succ_begin[c + 1]; ++k) {
    relax(dag_.succ[k], done, (kByDep << kWhyShift) | c);
  }
  if (dag_.kind[c] == CarKind::Send) deliver(dag_.match[c], c, pair_params(c));
}

// An eager message's arrival is known at its SEND's start; a rendezvous one
// needs the receive posted too, so became_ready() works it out.
void LogGPSim::deliver(uint32_t r, uint32_t send, const LogGPParams& p) {
  const uint64_t s = dag_.bytes[send];
  if (static_cast<double>(s) <= p.S) {
    const double arrival = t_[send] + p.o + bytes_less_one(s) * p.G + p.L;
    if (arrival >= t_[r]) {
      t_[r] = arrival;
      cause_[r] = (kByMessage << kWhyShift) | send;
    }
  }
  if (--pending_[r] == 0) became_ready(r);
}

void LogGPSim::became_ready(uint32_t x) {
  if (is_receive(dag_.kind[x]) && rendezvous(x)) {
    const uint32_t send = dag_.match[x];
    const LogGPParams& p = pair_params(x);
    const double posted = t_[x];
    t_[x] = std::max(t_[send], posted) + p.o + bytes_less_one(dag_.bytes[x]) * p.G + p.L +
            (p.L + 2 * p.o);
    cause_[x] = (kByMessage << kWhyShift) | send;
  }
  heap_.push({t_[x], x});
}

bool LogGPSim::run(LogGPResult* result, std::string* error) {
  const uint64_t n = dag_.cars();
  t_.assign(n, 0.0);
  cause_.assign(n, kNoCause);
  next_.assign(n, kNoFlatCar);
  pending_.resize(n);
  images_.assign(dag_.images, ImageState{});
  for (uint64_t c = 0; c < n; ++c) {
    pending_[c] = dag_.deps[c] + (is_receive(dag_.kind[c]) ? 1 : 0);
  }
  for (uint64_t c = 0; c < n; ++c) {
    if (pending_[c] == 0) heap_.push({0.0, c});
  }
  while (!heap_.empty()) {
    const Event e = heap_.pop();
    if (e.key & kDispatch) {
      on_dispatch(static_cast<uint32_t>(e.key & 0xffffffffu), e.t);
    } else {
      on_ready(static_cast<uint32_t>(e.key), e.t);
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
  uint32_t last = kNoFlatCar;
  for (uint64_t c = 0; c < n; ++c) {
    const double done = t_[c] + duration(static_cast<uint32_t>(c));
    if (last == kNoFlatCar || done > r.time_ns) {
      r.time_ns = done;
      last = static_cast<uint32_t>(c);
    }
  }
  if (last != kNoFlatCar) {
    r.last_image = dag_.image[last];
    critical_path(last, &r);
  }
  *result = std::move(r);
  return true;
}

void LogGPSim::critical_path(uint32_t last, LogGPResult* result) const {
  static const char* const kWhyNames[] = {"dependency", "message", "cpu", "nic"};
  std::vector<PathStep>& path = result->critical_path;
  for (uint32_t c = last; c != kNoFlatCar;) {
    PathStep step;
    step.image = dag_.image[c];
    step.car = dag_.local(c);
    step.kind = dag_.kind[c];
    step.start_ns = t_[c];
    step.done_ns = t_[c] + duration(c);
    const uint32_t cause = cause_[c];
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
  for (uint32_t i = 0; i < dag_.images; ++i) {
    bool any = false;
    for (uint32_t c = dag_.image_base[i]; c < dag_.image_base[i + 1]; ++c) {
      if (pending_[c] != kRan) ++stuck, any = true;
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
    while (pending_[c] == kRan) ++c;
    std::string waits;
    for (uint32_t d = dag_.image_base[i]; d < dag_.image_base[i + 1]; ++d) {
      if (pending_[d] == kRan) continue;
      for (uint32_t e = dag_.succ_begin[d]; e < dag_.succ_begin[d + 1]; ++e) {
        if (dag_.succ[e] == c) waits += (waits.empty() ? "" : ", ") + dag_.label(d);
      }
    }
    if (is_receive(dag_.kind[c]) && pending_[dag_.match[c]] != kRan) {
      waits += (waits.empty() ? "its message from " : ", and its message from ") +
               dag_.label(dag_.match[c]) + ", which never ran";
    }
    out += "; " + dag_.label(c) + " waits on " + (waits.empty() ? "nothing that ran" : waits);
  }
  return out;
}

}  // namespace

bool simulate_loggp(const FlatDag& dag, const LogGPModel& model, LogGPResult* result,
                    std::string* error) {
  LogGPSim sim(dag, model);
  return sim.run(result, error);
}

}  // namespace carflow
