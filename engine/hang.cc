// CF_HANG_DUMP_S: what a stuck collective waits for. A thread wakes every
// 100 ms (or at SIGUSR1) and reports each instance outstanding longer than
// the limit, once: one line on stderr ("image 3: allreduce #12
// (recursive_doubling) waits for 8 bytes from image 7, tag 2; 5 of 9 CARs
// done") and its global DAG as graph JSON with this image's CAR states
// (graph/car.h, RunState), which `carflow view` colours. The same report
// is made when a sync gives a collective up (a lost peer, a timeout).
#include <signal.h>

#include <cstdio>
#include <filesystem>

#include "engine/engine.h"
#include "engine/engine_internal.h"
#include "graph/json.h"

namespace carflow {
namespace {

std::atomic<bool> g_report_all{false};  // SIGUSR1 arrived
void on_sigusr1(int) { g_report_all.store(true, std::memory_order_relaxed); }

bool receives(CarKind k) { return k == CarKind::Recv || k == CarKind::RecvReduce; }

}  // namespace

void Engine::start_hang_watch() {
  struct sigaction action {};
  action.sa_handler = &on_sigusr1;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
  hang_thread_ = std::thread([this] { hang_loop(); });
}

void Engine::stop_hang_watch() {
  {
    std::lock_guard<std::mutex> lock(live_mutex_);
    hang_stop_ = true;
  }
  hang_cv_.notify_all();
  hang_thread_.join();
}

void Engine::hang_loop() {
  std::unique_lock<std::mutex> lock(live_mutex_);
  while (!hang_stop_) {
    hang_cv_.wait_for(lock, std::chrono::milliseconds(100));
    const bool all = g_report_all.exchange(false, std::memory_order_relaxed);
    const uint64_t now = trace_now();
    for (auto& [inst, live] : live_instances_) {
      const uint64_t age = trace_clock_.duration_ns(now - live.since);
      if (all || (!live.reported && age >= hang_dump_ns_)) {
        report_hang(*inst, age, all ? "SIGUSR1" : "outstanding past CF_HANG_DUMP_S");
        live.reported = true;
      }
    }
  }
}

void Engine::report_hang(Instance& inst, uint64_t age_ns, const char* why) {
  const Schedule& schedule = *inst.schedule;
  const CollectiveSpec& spec = schedule.spec();
  const uint32_t n = static_cast<uint32_t>(schedule.cars().size());
  const uint32_t rank = inst.team_obj->rank;
  // Each CAR's state from its times; the first message it waits on.
  std::vector<CarRunState> states(schedule.dag().cars.size(), CarRunState::WaitingDep);
  uint32_t done = 0, waiting = UINT32_MAX;
  for (uint32_t i = 0; i < n; ++i) {
    const CarTimes& t = inst.times[i];
    const CarKind kind = schedule.cars()[i].kind;
    CarRunState s = CarRunState::WaitingDep;
    if (t.done.load(std::memory_order_relaxed) != 0) {
      s = CarRunState::Done;
      ++done;
    } else if (t.start.load(std::memory_order_relaxed) != 0) {
      const bool message = kind == CarKind::Send || receives(kind);
      s = message ? CarRunState::WaitingMessage : CarRunState::Running;
      if (message && (waiting == UINT32_MAX || (receives(kind) && schedule.cars()[waiting].kind == CarKind::Send))) {
        waiting = i;  // a receive names the image that has not sent best
      }
    } else if (t.ready.load(std::memory_order_relaxed) != 0) {
      s = CarRunState::Ready;
    }
    states[schedule.dag_id(i)] = s;
  }
  std::string what;
  if (waiting != UINT32_MAX) {
    const CompiledCar& car = schedule.cars()[waiting];
    const uint32_t peer = inst.members[car.peer];
    what = car.kind == CarKind::Send
               ? "waits for image " + std::to_string(peer) + " to take " + std::to_string(car.src.length) +
                     " bytes, tag " + std::to_string(car.tag)
               : "waits for " + std::to_string(car.dst.length) + " bytes from image " + std::to_string(peer) +
                     ", tag " + std::to_string(car.tag);
  } else {
    what = "waits on no message (its CARs wait for each other or for a thread)";
  }
  char age[32];
  std::snprintf(age, sizeof age, "%.1f", static_cast<double>(age_ns) / 1e9);
  std::string line = "image " + std::to_string(inst.image->image) + ": " + coll_kind_name(spec.kind) + " #" +
                     std::to_string(inst.seq) + " (" + spec.algorithm + ") " + what + "; " + std::to_string(done) +
                     " of " + std::to_string(n) + " CARs done; outstanding " + age + " s (" + why + ")";
  GlobalDag global = global_dag_of(inst);
  global.run_state.image = rank;
  global.run_state.cars = std::move(states);
  const std::string dir = config_.trace_dir.empty() ? std::string(".") : config_.trace_dir;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/carflow-hang-node" + std::to_string(map_.node) + "-image" +
                           std::to_string(inst.image->image) + "-seq" + std::to_string(inst.seq) + ".json";
  std::string error;
  if (save_dag_file(global, path, &error)) {
    line += "; its DAG: " + path;
  } else {
    line += "; its DAG not written: " + error;
  }
  std::fprintf(stderr, "carflow: hang report: %s\n", line.c_str());
}

}  // namespace carflow
