#include "engine/schedule.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <new>
#include <utility>

namespace carflow {

namespace {

// The compiled dependency structure: per CAR its distinct predecessors and
// successors, and whether it still runs.
struct Plan {
  std::vector<std::vector<uint32_t>> preds, succs;
  std::vector<bool> live;
  std::vector<std::vector<uint32_t>> fused;  // a fused COPY's absorbed CARs, in index order
  std::vector<uint32_t> unpack;              // a RECV's absorbed COPY (UINT32_MAX: none)
  uint32_t exit = 0;
};

void insert_unique(std::vector<uint32_t>* v, uint32_t x) {
  if (std::find(v->begin(), v->end(), x) == v->end()) v->push_back(x);
}

void erase_value(std::vector<uint32_t>* v, uint32_t x) { v->erase(std::remove(v->begin(), v->end(), x), v->end()); }

Plan plan_dependencies(const LocalDag& dag) {
  const size_t n = dag.cars.size();
  Plan p;
  p.preds.resize(n);
  p.succs.resize(n);
  p.live.assign(n, true);
  p.fused.resize(n);
  for (size_t i = 0; i < n; ++i) {
    for (const Dep& d : dag.cars[i].deps) insert_unique(&p.preds[i], d.car);
    std::sort(p.preds[i].begin(), p.preds[i].end());
  }
  // COPYs with equal predecessor sets: the first absorbs the others.
  std::map<std::vector<uint32_t>, uint32_t> first_copy;
  std::vector<uint32_t> leader(n);
  for (uint32_t i = 0; i < n; ++i) {
    leader[i] = i;
    if (dag.cars[i].kind != CarKind::Copy) continue;
    auto [it, fresh] = first_copy.emplace(p.preds[i], i);
    if (!fresh) {
      leader[i] = it->second;
      p.live[i] = false;
      p.fused[it->second].push_back(i);
    }
  }
  for (uint32_t i = 0; i < n; ++i) {
    std::vector<uint32_t> mapped;
    for (uint32_t d : p.preds[i]) insert_unique(&mapped, leader[d]);
    p.preds[i] = p.live[i] ? std::move(mapped) : std::vector<uint32_t>{};
    for (uint32_t d : p.preds[i]) p.succs[d].push_back(i);
  }
  // Bypass JOINs whose removal adds no edges.
  for (uint32_t j = 0; j < n; ++j) {
    if (j == dag.exit || !p.live[j] || dag.cars[j].kind != CarKind::Join) continue;
    const std::vector<uint32_t> in = p.preds[j], out = p.succs[j];
    if (in.size() > 1 && out.size() > 1) continue;
    for (uint32_t s : out) {
      erase_value(&p.preds[s], j);
      for (uint32_t d : in) insert_unique(&p.preds[s], d);
    }
    for (uint32_t d : in) {
      erase_value(&p.succs[d], j);
      for (uint32_t s : out) insert_unique(&p.succs[d], s);
    }
    p.preds[j].clear();
    p.succs[j].clear();
    p.live[j] = false;
  }
  // A COPY that is a RECV's only successor, and has no other predecessor
  // (an aggregate's unpack), runs as part of the RECV's completion: the
  // RECV takes over its successors. Nothing waited for the RECV alone, so
  // nothing starts later than before (a SEND that forwards the received
  // bytes beside a copy of them still goes first).
  p.unpack.assign(n, UINT32_MAX);
  for (uint32_t c = 0; c < n; ++c) {
    if (!p.live[c] || dag.cars[c].kind != CarKind::Copy || p.preds[c].size() != 1) continue;
    const uint32_t r = p.preds[c][0];
    if (dag.cars[r].kind != CarKind::Recv || p.succs[r].size() != 1) continue;
    p.unpack[r] = c;
    erase_value(&p.succs[r], c);
    for (uint32_t s : p.succs[c]) {
      erase_value(&p.preds[s], c);
      insert_unique(&p.preds[s], r);
      insert_unique(&p.succs[r], s);
    }
    p.preds[c].clear();
    p.succs[c].clear();
    p.live[c] = false;
  }
  // An exit JOIN that only waits for one CAR, which nothing else waits for
  // (a broadcast's receiver: RECV -> exit): that CAR is the exit.
  p.exit = dag.exit;
  if (dag.cars[dag.exit].kind == CarKind::Join && p.preds[dag.exit].size() == 1 &&
      p.succs[p.preds[dag.exit][0]].size() == 1) {
    const uint32_t last = p.preds[dag.exit][0];
    p.succs[last].clear();
    p.preds[dag.exit].clear();
    p.live[dag.exit] = false;
    p.exit = last;
  }
  return p;
}

}  // namespace

Schedule::Schedule(CollectiveSpec spec, LocalDag dag) : spec_(std::move(spec)), dag_(std::move(dag)) {
  const size_t n = dag_.cars.size();
  const Plan plan = plan_dependencies(dag_);
  members_ = std::max<uint32_t>(1, static_cast<uint32_t>(dag_.members.size()));  // before the segments
  for (uint64_t bytes : dag_.temps) {  // before the segments, which resolve temps
    temp_offsets_.push_back(temp_bytes_);
    temp_bytes_ += (bytes + 63) / 64 * 64;
  }
  // Only the CARs that still run are compiled, numbered densely in DAG
  // order: an aggregate's fused COPYs and bypassed JOINs are most of its
  // DAG, and an instance then carries no state for them.
  std::vector<uint32_t> compact(n, UINT32_MAX);
  uint32_t live = 0;
  for (size_t i = 0; i < n; ++i) {
    if (plan.live[i]) compact[i] = live++;
  }
  cars_.resize(live);
  dag_ids_.resize(live);
  for (size_t i = 0; i < n; ++i) {
    if (!plan.live[i]) continue;
    dag_ids_[compact[i]] = static_cast<uint32_t>(i);
    const Car& car = dag_.cars[i];
    CompiledCar& c = cars_[compact[i]];
    c = CompiledCar{car.kind,    car.incoming_left, car.shape, car.first_elems,
                    car.chunk_elems, car.peer,       car.tag,   car.member,
                    car.src,     car.src2,          car.dst,   static_cast<uint32_t>(successors_.size()),
                    static_cast<uint32_t>(plan.succs[i].size()), static_cast<int32_t>(plan.preds[i].size())};
    if (car.kind == CarKind::Copy || car.kind == CarKind::Send) c.src_at = place(car.src, car.member);
    if (car.kind == CarKind::Copy || car.kind == CarKind::Recv || car.kind == CarKind::RecvReduce) {
      c.dst_at = place(car.dst, car.member);
    }
    for (uint32_t s : posting_first(plan.succs[i])) successors_.push_back(compact[s]);
    // A fused COPY's segments are its own copy and its absorbed ones; a
    // RECV's are those of the COPY it took over.
    const uint32_t copy = car.kind == CarKind::Copy ? static_cast<uint32_t>(i) : plan.unpack[i];
    if (copy != UINT32_MAX && (copy != i || !plan.fused[i].empty())) {
      c.seg_begin = static_cast<uint32_t>(segments_.size());
      segments_.push_back(segment(dag_.cars[copy]));
      for (uint32_t f : plan.fused[copy]) segments_.push_back(segment(dag_.cars[f]));
      c.seg_count = static_cast<uint32_t>(segments_.size()) - c.seg_begin;
      c.seg_words = std::all_of(segments_.begin() + c.seg_begin, segments_.end(),
                                [](const CopySegment& g) { return g.length >= 8 && g.length <= 16; });
      c.seg_word = std::all_of(segments_.begin() + c.seg_begin, segments_.end(),
                               [](const CopySegment& g) { return g.length == 8; });
      c.unpacks = car.kind == CarKind::Recv;
    }
    if (plan.preds[i].empty()) roots_.push_back(static_cast<uint32_t>(i));
  }
  for (uint32_t i = 0; i < cars_.size(); ++i) {
    if (cars_[i].deps > 1) counted_.push_back(i);
  }
  roots_ = posting_first(roots_);
  for (uint32_t& r : roots_) r = compact[r];
  exit_ = compact[plan.exit];
  const bool exit_counts = cars_[exit_].kind == CarKind::Join && cars_[exit_].deps > 1;
  direct_ = exit_counts;
  for (uint32_t i = 0; i < cars_.size(); ++i) {
    CompiledCar& c = cars_[i];
    c.to_exit = exit_counts && c.succ_count == 1 && successors_[c.succ_begin] == exit_;
    c.last = i == exit_;
    if (i != exit_ && (c.deps != 0 || !c.to_exit)) direct_ = false;
  }
  measure_footprint();
}

CopySegment::Place Schedule::place(const BufferRef& b, uint32_t member) const {
  if (b.space == BufferSpace::Temp) return CopySegment::Place{2 * members_, temp_offsets_[b.slot] + b.offset};
  // Callers pass user buffers and temps only (graph/validate).
  return CopySegment::Place{2 * member + (b.space == BufferSpace::UserDst ? 1 : 0), b.offset};
}

CopySegment Schedule::segment(const Car& copy) const {
  return CopySegment{place(copy.src, copy.member), place(copy.dst, copy.member), copy.dst.length};
}

// CARs made ready together run in list order, local work (COPY, REDUCE)
// inline in the thread that readies it: messages go first, so peers can
// start on them while this image copies or computes (a root's own copy
// ahead of its SENDs would leave its receivers idle for the whole copy).
std::vector<uint32_t> Schedule::posting_first(std::vector<uint32_t> ids) const {
  std::stable_partition(ids.begin(), ids.end(), [&](uint32_t id) {
    const CarKind kind = dag_.cars[id].kind;
    return kind == CarKind::Send || kind == CarKind::Recv || kind == CarKind::RecvReduce;
  });
  return ids;
}

Schedule::~Schedule() {
  while (free_ != nullptr) {
    Instance* next = free_->next_free;
    delete free_;
    free_ = next;
  }
}

Instance::~Instance() { std::free(temp); }

void Schedule::measure_footprint() {
  static_bytes_ = sizeof(Schedule) + dag_.cars.size() * sizeof(Car) + cars_.capacity() * sizeof(CompiledCar) +
                  (successors_.capacity() + roots_.capacity() + counted_.capacity() + dag_ids_.capacity()) * 4 +
                  segments_.capacity() * sizeof(CopySegment);
  for (const Car& car : dag_.cars) static_bytes_ += car.deps.capacity() * sizeof(Dep);
  instance_bytes_ = sizeof(Instance) + cars_.size() * sizeof(CarState);
}

// Also a new instance's first arena: one allocation path for both.
void Schedule::restore_temp(Instance* inst) {
  inst->temp = static_cast<char*>(std::aligned_alloc(64, temp_bytes_));
  if (inst->temp == nullptr) {
    inst->next_free = free_;  // back in the pool, still without an arena
    free_ = inst;
    throw std::bad_alloc();
  }
  inst->user[2 * members_] = inst->temp;  // CopySegment::Place
  ++temps_held_;
  if (account_ != nullptr) *account_ += temp_bytes_;
}

uint64_t Schedule::drop_idle_temps() {
  uint64_t freed = 0;
  for (Instance* inst = free_; inst != nullptr; inst = inst->next_free) {
    if (inst->temp == nullptr) continue;
    std::free(inst->temp);
    inst->temp = nullptr;
    inst->user[2 * members_] = nullptr;
    --temps_held_;
    freed += temp_bytes_;
  }
  if (account_ != nullptr) *account_ -= freed;
  return freed;
}

Instance* Schedule::new_instance() {
  // Pool growth: once per concurrently outstanding call of this schedule.
  auto* inst = new Instance();
  inst->schedule = this;
  inst->cars = std::make_unique<CarState[]>(cars_.size());
  if (members_ > 1) {
    inst->user_many = std::make_unique<char*[]>(2 * size_t{members_} + 1);
    inst->ops_many = std::make_unique<ReduceOp[]>(members_);
    inst->user = inst->user_many.get();
    inst->ops = inst->ops_many.get();
  }
  // Its temp arena comes from acquire() (restore_temp), as after drop_idle_temps.
  for (uint32_t i = 0; i < cars_.size(); ++i) {
    inst->cars[i].index = i;
    inst->cars[i].instance = inst;
    inst->cars[i].car = &cars_[i];
    inst->cars[i].op.owner = &inst->cars[i];
  }
  ++created_;
  if (account_ != nullptr) *account_ += instance_bytes_;
  return inst;
}

}  // namespace carflow
