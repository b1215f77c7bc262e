#include "graph/car.h"

#include <array>
#include <cstring>

namespace carflow {
namespace {

template <typename Enum, size_t N>
bool parse_name(const std::array<const char*, N>& names, const std::string& name, Enum* out) {
  for (size_t i = 0; i < N; ++i) {
    if (name == names[i]) {
      *out = static_cast<Enum>(i);
      return true;
    }
  }
  return false;
}

constexpr std::array<const char*, kCollKinds> kCollNames = {
    "broadcast", "barrier",    "allreduce",      "scatter", "gather",       "gather_all", "exchange",
    "permute",   "reduce_vec", "scan", "reduce_scatter", "reduce", "prefix_reduce"};
constexpr std::array<const char*, 3> kShapeNames = {"elementwise", "fold", "prefix"};
constexpr std::array<const char*, 6> kCarNames = {"SEND", "RECV", "RECV_REDUCE",
                                                  "REDUCE", "COPY", "JOIN"};
constexpr std::array<const char*, 4> kSpaceNames = {"none", "user_src", "user_dst", "temp"};
constexpr std::array<const char*, 2> kDepNames = {"progress", "buffer"};

}  // namespace

const char* coll_kind_name(CollKind kind) { return kCollNames[static_cast<size_t>(kind)]; }
bool parse_coll_kind(const std::string& name, CollKind* kind) {
  return parse_name(kCollNames, name, kind);
}
const char* car_kind_name(CarKind kind) { return kCarNames[static_cast<size_t>(kind)]; }
bool parse_car_kind(const std::string& name, CarKind* kind) {
  return parse_name(kCarNames, name, kind);
}
const char* buffer_space_name(BufferSpace space) {
  return kSpaceNames[static_cast<size_t>(space)];
}
bool parse_buffer_space(const std::string& name, BufferSpace* space) {
  return parse_name(kSpaceNames, name, space);
}
const char* reduce_shape_name(ReduceShape shape) {
  return kShapeNames[static_cast<size_t>(shape)];
}
bool parse_reduce_shape(const std::string& name, ReduceShape* shape) {
  return parse_name(kShapeNames, name, shape);
}
const char* dep_kind_name(DepKind kind) { return kDepNames[static_cast<size_t>(kind)]; }
bool parse_dep_kind(const std::string& name, DepKind* kind) {
  return parse_name(kDepNames, name, kind);
}

const char* run_state_name(CarRunState state) {
  switch (state) {
    case CarRunState::Done: return "done";
    case CarRunState::Running: return "running";
    case CarRunState::Ready: return "ready";
    case CarRunState::WaitingDep: return "waiting_dep";
    case CarRunState::WaitingMessage: return "waiting_message";
  }
  return "?";
}

bool parse_run_state(const std::string& name, CarRunState* state) {
  for (CarRunState s : {CarRunState::Done, CarRunState::Running, CarRunState::Ready, CarRunState::WaitingDep,
                        CarRunState::WaitingMessage}) {
    if (name == run_state_name(s)) return *state = s, true;
  }
  return false;
}

}  // namespace carflow
