#include "engine/schedule.h"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

namespace carflow {

Schedule::Schedule(CollectiveSpec spec, LocalDag dag) : spec_(std::move(spec)), dag_(std::move(dag)) {
  const size_t n = dag_.cars.size();
  std::vector<uint32_t> out_degree(n, 0);
  for (const Car& car : dag_.cars) {
    for (const Dep& d : car.deps) ++out_degree[d.car];
  }
  cars_.resize(n);
  uint32_t next = 0;
  for (size_t i = 0; i < n; ++i) {
    const Car& car = dag_.cars[i];
    cars_[i] = CompiledCar{car.kind,    car.incoming_left, car.shape, car.first_elems,
                           car.chunk_elems, car.peer,       car.tag,   car.member,
                           car.src,     car.src2,          car.dst,   next,
                           0,           static_cast<int32_t>(car.deps.size())};
    next += out_degree[i];
    if (car.deps.empty()) roots_.push_back(static_cast<uint32_t>(i));
  }
  successors_.resize(next);
  for (size_t i = 0; i < n; ++i) {
    for (const Dep& d : dag_.cars[i].deps) {
      CompiledCar& pred = cars_[d.car];
      successors_[pred.succ_begin + pred.succ_count++] = static_cast<uint32_t>(i);
    }
  }
  members_ = std::max<uint32_t>(1, static_cast<uint32_t>(dag_.members.size()));
  for (uint64_t bytes : dag_.temps) {
    temp_offsets_.push_back(temp_bytes_);
    temp_bytes_ += (bytes + 63) / 64 * 64;
  }
}

Schedule::~Schedule() {
  while (free_ != nullptr) {
    Instance* next = free_->next_free;
    delete free_;
    free_ = next;
  }
}

Instance::~Instance() { std::free(temp); }

Instance* Schedule::acquire() {
  Instance* inst = free_;
  if (inst != nullptr) {
    free_ = inst->next_free;
  } else {
    // Pool growth: once per concurrently outstanding call of this schedule.
    inst = new Instance();
    inst->schedule = this;
    inst->cars = std::make_unique<CarState[]>(cars_.size());
    if (temp_bytes_ > 0) {
      inst->temp = static_cast<char*>(std::aligned_alloc(64, temp_bytes_));
      if (inst->temp == nullptr) {
        delete inst;
        throw std::bad_alloc();
      }
    }
    if (members_ > 1) {
      inst->user_many = std::make_unique<char*[]>(2 * size_t{members_});
      inst->ops_many = std::make_unique<ReduceOp[]>(members_);
      inst->user = inst->user_many.get();
      inst->ops = inst->ops_many.get();
    }
    for (uint32_t i = 0; i < cars_.size(); ++i) {
      inst->cars[i].index = i;
      inst->cars[i].instance = inst;
      inst->cars[i].op.owner = &inst->cars[i];
    }
    ++created_;
  }
  for (uint32_t i = 0; i < cars_.size(); ++i) {
    inst->cars[i].pending.store(cars_[i].deps, std::memory_order_relaxed);
  }
  inst->status.store(0, std::memory_order_relaxed);
  inst->done.store(false, std::memory_order_relaxed);
  inst->next_free = nullptr;
  return inst;
}

void Schedule::release(Instance* instance) {
  instance->next_free = free_;
  free_ = instance;
}

}  // namespace carflow
