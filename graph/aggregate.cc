#include "graph/aggregate.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace carflow {
namespace {

// A message CAR's place in its member's DAG: direction, peer and tag name
// it on both sides of the edge, so corresponding CARs of a group's members
// have equal keys.
using MessageKey = std::tuple<bool, uint32_t, uint32_t>;  // is a SEND, peer, tag

MessageKey message_key(const Car& car) { return {car.kind == CarKind::Send, car.peer, car.tag}; }

class Merger {
 public:
  explicit Merger(std::vector<AggregateMember>& members) : members_(members) {}

  LocalDag run() {
    concatenate();
    for (uint32_t leader = 0; leader < members_.size(); ++leader) {
      if (members_[leader].group == leader) coalesce_group(leader);
    }
    add_exit();
    return compact();
  }

 private:
  // Every member's CARs one after the other, tagged with the member, their
  // temp slots renumbered.
  void concatenate() {
    out_.image = members_[0].dag.image;
    out_.src_bytes = members_[0].dag.src_bytes;
    out_.dst_bytes = members_[0].dag.dst_bytes;
    for (uint32_t m = 0; m < members_.size(); ++m) {
      const LocalDag& dag = members_[m].dag;
      const CarId base = static_cast<CarId>(out_.cars.size());
      const uint32_t slots = static_cast<uint32_t>(out_.temps.size());
      base_.push_back(base);
      out_.temps.insert(out_.temps.end(), dag.temps.begin(), dag.temps.end());
      out_.members.push_back({dag.src_bytes, dag.dst_bytes, members_[m].elem_size});
      for (const Car& car : dag.cars) {
        Car c = car;
        c.member = m;
        for (BufferRef* ref : {&c.src, &c.src2, &c.dst}) {
          if (ref->space == BufferSpace::Temp) ref->slot += slots;
        }
        for (Dep& d : c.deps) d.car += base;
        out_.cars.push_back(std::move(c));
      }
    }
    redirect_.assign(out_.cars.size(), kNoCar);
  }

  // The message CARs of member m, by key (merged ids).
  std::vector<std::pair<MessageKey, CarId>> messages_of(uint32_t m) const {
    std::vector<std::pair<MessageKey, CarId>> list;
    const LocalDag& dag = members_[m].dag;
    for (CarId c = 0; c < dag.cars.size(); ++c) {
      if (dag.cars[c].is_message()) list.emplace_back(message_key(dag.cars[c]), base_[m] + c);
    }
    std::sort(list.begin(), list.end());
    return list;
  }

  void coalesce_group(uint32_t leader) {
    std::vector<uint32_t> group;
    for (uint32_t m = leader; m < members_.size(); ++m) {
      if (members_[m].group == leader) group.push_back(m);
    }
    if (group.size() < 2) return;
    std::vector<std::vector<std::pair<MessageKey, CarId>>> lists;
    for (uint32_t m : group) lists.push_back(messages_of(m));
    // Equal specs give equal messages; anything else is left uncoalesced
    // rather than guessed at.
    for (const auto& list : lists) {
      if (list.size() != lists[0].size()) return;
      for (size_t k = 0; k < list.size(); ++k) {
        if (list[k].first != lists[0][k].first) return;
      }
    }
    for (size_t k = 0; k < lists[0].size(); ++k) {
      std::vector<CarId> ids;
      for (const auto& list : lists) ids.push_back(list[k].second);
      if (std::get<0>(lists[0][k].first)) {
        coalesce_sends(leader, ids);
      } else {
        coalesce_receives(leader, ids);
      }
    }
  }

  CarId add(Car car) {
    out_.cars.push_back(std::move(car));
    redirect_.push_back(kNoCar);
    return static_cast<CarId>(out_.cars.size() - 1);
  }

  uint32_t add_temp(uint64_t bytes) {
    out_.temps.push_back(bytes);
    return static_cast<uint32_t>(out_.temps.size() - 1);
  }

  // One SEND for the corresponding SENDs `ids`: each member's bytes are
  // copied into a pack slot once the member's SEND would have been ready.
  void coalesce_sends(uint32_t leader, const std::vector<CarId>& ids) {
    const Car first = out_.cars[ids[0]];
    uint64_t total = 0;
    for (CarId id : ids) total += out_.cars[id].src.length;
    Car send;
    send.kind = CarKind::Send;
    send.peer = first.peer;
    send.tag = first.tag;
    send.member = leader;
    if (total > 0) {
      const uint32_t slot = add_temp(total);
      send.src = BufferRef{BufferSpace::Temp, slot, 0, total};
      uint64_t offset = 0;
      for (CarId id : ids) {
        const Car& s = out_.cars[id];
        if (s.src.length == 0) {
          append_deps(&send.deps, s.deps);
          continue;
        }
        Car pack;
        pack.kind = CarKind::Copy;
        pack.member = s.member;
        pack.src = s.src;
        pack.dst = BufferRef{BufferSpace::Temp, slot, offset, s.src.length};
        pack.deps = s.deps;
        offset += s.src.length;
        const CarId packed = add(std::move(pack));
        send.deps.push_back(Dep{packed, DepKind::Buffer});
      }
    } else {
      for (CarId id : ids) append_deps(&send.deps, out_.cars[id].deps);
    }
    const CarId merged = add(std::move(send));
    for (CarId id : ids) redirect_[id] = merged;
  }

  // One receive for the corresponding receives `ids`, into a pack slot; each
  // member's part is copied (RECV) or combined (RECV_REDUCE) into its
  // destination by a CAR of its own, which the member's successors wait for.
  void coalesce_receives(uint32_t leader, const std::vector<CarId>& ids) {
    const Car first = out_.cars[ids[0]];
    uint64_t total = 0;
    Car recv;
    recv.kind = CarKind::Recv;
    recv.peer = first.peer;
    recv.tag = first.tag;
    recv.member = leader;
    for (CarId id : ids) {
      total += out_.cars[id].dst.length;
      append_deps(&recv.deps, out_.cars[id].deps);
    }
    const uint32_t slot = total > 0 ? add_temp(total) : 0;
    if (total > 0) recv.dst = BufferRef{BufferSpace::Temp, slot, 0, total};
    const CarId merged = add(std::move(recv));
    uint64_t offset = 0;
    for (CarId id : ids) {
      const Car r = out_.cars[id];
      if (r.dst.length == 0) {
        redirect_[id] = merged;
        continue;
      }
      const BufferRef incoming{BufferSpace::Temp, slot, offset, r.dst.length};
      offset += r.dst.length;
      Car unpack;
      unpack.member = r.member;
      unpack.dst = r.dst;
      if (r.kind == CarKind::Recv) {
        unpack.kind = CarKind::Copy;
        unpack.src = incoming;
      } else {
        const BufferRef local = r.src.space == BufferSpace::None ? r.dst : r.src;
        unpack.kind = CarKind::Reduce;
        unpack.src = r.incoming_left ? incoming : local;
        unpack.src2 = r.incoming_left ? local : incoming;
      }
      unpack.deps = {Dep{merged, DepKind::Buffer}};
      redirect_[id] = add(std::move(unpack));
    }
  }

  static void append_deps(std::vector<Dep>* to, const std::vector<Dep>& from) {
    to->insert(to->end(), from.begin(), from.end());
  }

  void add_exit() {
    Car exit;
    exit.kind = CarKind::Join;
    for (uint32_t m = 0; m < members_.size(); ++m) {
      exit.deps.push_back(Dep{base_[m] + members_[m].dag.exit, DepKind::Progress});
    }
    out_.exit = add(std::move(exit));
  }

  // Drops the replaced CARs and points every dependency at what replaced
  // them; a CAR named twice is named once.
  LocalDag compact() {
    std::vector<CarId> new_id(out_.cars.size(), kNoCar);
    CarId next = 0;
    for (CarId c = 0; c < out_.cars.size(); ++c) {
      if (redirect_[c] == kNoCar) new_id[c] = next++;
    }
    LocalDag dag;
    dag.image = out_.image;
    dag.src_bytes = out_.src_bytes;
    dag.dst_bytes = out_.dst_bytes;
    dag.temps = std::move(out_.temps);
    dag.members = std::move(out_.members);
    dag.cars.reserve(next);
    for (CarId c = 0; c < out_.cars.size(); ++c) {
      if (redirect_[c] != kNoCar) continue;
      Car car = std::move(out_.cars[c]);
      std::vector<Dep> deps;
      for (const Dep& d : car.deps) {
        const CarId target = new_id[redirect_[d.car] == kNoCar ? d.car : redirect_[d.car]];
        const bool seen = std::any_of(deps.begin(), deps.end(), [&](const Dep& x) { return x.car == target; });
        if (!seen) deps.push_back(Dep{target, d.kind});
      }
      car.deps = std::move(deps);
      dag.cars.push_back(std::move(car));
    }
    dag.exit = new_id[out_.exit];
    return dag;
  }

  std::vector<AggregateMember>& members_;
  LocalDag out_;
  std::vector<CarId> base_;      // member -> id of its first CAR in out_
  std::vector<CarId> redirect_;  // replaced CAR -> the CAR its successors now wait for
};

}  // namespace

LocalDag merge_aggregate(std::vector<AggregateMember> members) {
  return Merger(members).run();
}

}  // namespace carflow
