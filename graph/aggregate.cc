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

  // One SEND for the corresponding SENDs `ids`. Its bytes are, in member
  // order: a packed slot that a coalesced receive filled, when each member
  // forwards exactly its part of it (a relay, e.g. a broadcast tree's inner
  // image: nothing is copied); else a pack slot that COPY CARs fill from the
  // members' sources once each member's SEND would have been ready, shared
  // by every SEND of the same read-only user sources (a root sending to
  // several children packs once).
  void coalesce_sends(uint32_t leader, const std::vector<CarId>& ids) {
    const Car first = out_.cars[ids[0]];
    uint64_t total = 0;
    Car send;
    send.kind = CarKind::Send;
    send.peer = first.peer;
    send.tag = first.tag;
    send.member = leader;
    for (CarId id : ids) {
      total += out_.cars[id].src.length;
      append_deps(&send.deps, out_.cars[id].deps);
    }
    if (total > 0) {
      BufferRef packed;
      if (!forwarded_slot(ids, total, &packed) && !shared_pack(ids, total, &send.deps, &packed)) {
        packed = pack(ids, total, &send.deps);
      }
      send.src = packed;
    }
    const CarId merged = add(std::move(send));
    for (CarId id : ids) redirect_[id] = merged;
  }

  // COPY CARs that pack the members' sources into a new slot; their ids
  // join *deps (each waits for its member SEND's own predecessors).
  BufferRef pack(const std::vector<CarId>& ids, uint64_t total, CarDeps* deps) {
    const uint32_t slot = add_temp(total);
    uint64_t offset = 0;
    std::vector<CarId> copies;
    for (CarId id : ids) {
      const Car s = out_.cars[id];
      if (s.src.length == 0) continue;
      Car copy;
      copy.kind = CarKind::Copy;
      copy.member = s.member;
      copy.src = s.src;
      copy.dst = BufferRef{BufferSpace::Temp, slot, offset, s.src.length};
      copy.deps = s.deps;
      offset += s.src.length;
      copies.push_back(add(std::move(copy)));
      deps->push_back(Dep{copies.back(), DepKind::Buffer});
    }
    const BufferRef packed{BufferSpace::Temp, slot, 0, total};
    if (all_user_src(ids)) packs_.push_back(Pack{sources(ids), packed, std::move(copies)});
    return packed;
  }

  // A pack of exactly these sources made earlier; user sources are never
  // written by a DAG, so its bytes are still the members' bytes.
  bool shared_pack(const std::vector<CarId>& ids, uint64_t, CarDeps* deps, BufferRef* packed) {
    if (!all_user_src(ids)) return false;
    const std::vector<std::pair<uint32_t, BufferRef>> want = sources(ids);
    for (const Pack& p : packs_) {
      if (p.sources != want) continue;
      for (CarId c : p.copies) deps->push_back(Dep{c, DepKind::Buffer});
      *packed = p.slot;
      return true;
    }
    return false;
  }

  bool all_user_src(const std::vector<CarId>& ids) const {
    for (CarId id : ids) {
      if (out_.cars[id].src.space != BufferSpace::UserSrc) return false;
    }
    return true;
  }

  std::vector<std::pair<uint32_t, BufferRef>> sources(const std::vector<CarId>& ids) const {
    std::vector<std::pair<uint32_t, BufferRef>> list;
    for (CarId id : ids) list.emplace_back(out_.cars[id].member, out_.cars[id].src);
    return list;
  }

  // True (and *packed) when every member sends exactly the part of one
  // coalesced receive's slot that was unpacked into its buffer, in order,
  // covering the slot, and nothing else of the member writes those bytes:
  // then the received slot goes out as it came in.
  bool forwarded_slot(const std::vector<CarId>& ids, uint64_t total, BufferRef* packed) const {
    const Unpacked* first = nullptr;
    uint64_t offset = 0;
    for (CarId id : ids) {
      const Car& s = out_.cars[id];
      const Unpacked* u = unpacked_into(s.member, s.src);
      if (u == nullptr || (first != nullptr && u->from.slot != first->from.slot) ||
          u->from.offset != offset || !only_writer(s.member, s.src, u->original)) {
        return false;
      }
      if (first == nullptr) first = u;
      offset += s.src.length;
    }
    if (first == nullptr || offset != total || out_.temps[first->from.slot] != total) return false;
    *packed = BufferRef{BufferSpace::Temp, first->from.slot, 0, total};
    return true;
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
      if (r.kind == CarKind::Recv) unpacked_.push_back(Unpacked{r.member, r.dst, incoming, id});
    }
  }

  static void append_deps(CarDeps* to, const CarDeps& from) {
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
      CarDeps deps;
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

  // Packs of user sources (shared_pack) and what coalesced receives
  // unpacked where (forwarded_slot).
  struct Pack {
    std::vector<std::pair<uint32_t, BufferRef>> sources;  // (member, source), in member order
    BufferRef slot;
    std::vector<CarId> copies;
  };
  struct Unpacked {
    uint32_t member;
    BufferRef to;     // the member's buffer range
    BufferRef from;   // its part of the received slot
    CarId original;   // the member's RECV that the unpack replaced
  };
  std::vector<Pack> packs_;
  std::vector<Unpacked> unpacked_;

  const Unpacked* unpacked_into(uint32_t member, const BufferRef& range) const {
    for (const Unpacked& u : unpacked_) {
      if (u.member == member && u.to == range) return &u;
    }
    return nullptr;
  }

  // True when `writer` is the only CAR of the member's own DAG that writes
  // a byte of `range` (so the bytes a SEND reads there are the received ones).
  bool only_writer(uint32_t member, const BufferRef& range, CarId writer) const {
    const CarId begin = base_[member], end = begin + static_cast<CarId>(members_[member].dag.cars.size());
    for (CarId c = begin; c < end; ++c) {  // the member's CARs, temp slots already renumbered
      const Car& car = out_.cars[c];
      const bool writes = car.kind != CarKind::Send && car.kind != CarKind::Join;
      if (!writes || c == writer) continue;
      const BufferRef& d = car.dst;
      const bool overlaps = d.space == range.space && d.slot == range.slot &&
                            d.offset < range.offset + range.length && range.offset < d.offset + d.length;
      if (overlaps) return false;
    }
    return true;
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
