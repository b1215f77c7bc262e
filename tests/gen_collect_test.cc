// Gather_all (direct, ring, recursive_doubling, bruck) and exchange
// (pairwise, windowed, bruck): exact message counts, per-image round
// structure, the bruck byte budget, the exchange window, and the v forms
// (graph/generators/gather_all.cc, exchange.cc).
#include <doctest/doctest.h>

#include <functional>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/registry.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

const char* const kGatherAll[] = {"direct", "ring", "recursive_doubling", "bruck"};
const char* const kExchange[] = {"pairwise", "windowed", "bruck"};

uint32_t log2_ceil(uint32_t P) { return patterns::ceil_log2(P); }

int64_t expected_messages(CollKind kind, const std::string& a, int64_t P) {
  if (a == "bruck") return P * log2_ceil(static_cast<uint32_t>(P));
  if (kind == CollKind::GatherAll && a == "recursive_doubling") {
    const int64_t pof2 = patterns::floor_pow2(static_cast<uint32_t>(P)), rem = P - pof2;
    return pof2 * log2_ceil(static_cast<uint32_t>(pof2)) + 2 * rem;
  }
  return P * (P - 1);
}

GlobalDag build(const CollectiveSpec& spec) {
  GlobalDag dag;
  std::string error;
  INFO(coll_kind_name(spec.kind), " ", spec.algorithm, " P=", spec.images);
  REQUIRE(generate_global(spec, &dag, &error));
  INFO(error);
  REQUIRE(validate_global(dag, &error));
  return dag;
}

std::vector<const Car*> sends_of(const LocalDag& image) {
  std::vector<const Car*> sends;
  for (const Car& car : image.cars) {
    if (car.kind == CarKind::Send) sends.push_back(&car);
  }
  return sends;
}

// Gives the cases over both kinds: (kind, algorithm).
void for_each_algorithm(const std::function<void(CollKind, const char*)>& fn) {
  for (const char* a : kGatherAll) fn(CollKind::GatherAll, a);
  for (const char* a : kExchange) fn(CollKind::Exchange, a);
}

TEST_CASE("gather_all and exchange send exactly the promised messages for P = 1..33") {
  for_each_algorithm([](CollKind kind, const char* a) {
    for (uint32_t P = 1; P <= 33; ++P) {
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{1}, uint64_t{24}}) {
        INFO(coll_kind_name(kind), " ", a, " P=", P, " nbytes=", nbytes);
        const GlobalDag dag = build(testref::make_spec(kind, a, P, 0, nbytes));
        CHECK(static_cast<int64_t>(dag_stats(dag).messages) == expected_messages(kind, a, P));
        for (const LocalDag& image : dag.images) {
          for (const Car& car : image.cars) CHECK(car.tag < 0x40000000u);
        }
      }
    }
  });
}

TEST_CASE("bruck sends exactly ceil(log2 P) messages per image, both kinds") {
  for (CollKind kind : {CollKind::GatherAll, CollKind::Exchange}) {
    for (uint32_t P = 1; P <= 33; ++P) {
      INFO(coll_kind_name(kind), " P=", P);
      const GlobalDag dag = build(testref::make_spec(kind, "bruck", P, 0, 16));
      for (const LocalDag& image : dag.images) CHECK(sends_of(image).size() == log2_ceil(P));
    }
  }
}

// Uniform blocks: every image sends (P-1) * nbytes. Any layout: every image
// receives each other image's block exactly once (nothing twice, no surplus).
TEST_CASE("bruck gather_all moves (P-1) blocks per image: no surplus") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (bool variable : {false, true}) {
      CollectiveSpec spec = testref::make_spec(CollKind::GatherAll, "bruck", P, 0, 10);
      if (variable) {
        for (uint32_t i = 0; i < P; ++i) spec.counts.push_back(i % 4 == 1 ? 0 : 3 + i);
      }
      INFO("P=", P, " variable=", variable);
      const GlobalDag dag = build(spec);
      uint64_t total = 0;
      for (uint32_t i = 0; i < P; ++i) total += variable ? spec.counts[i] : spec.nbytes;
      for (uint32_t i = 0; i < P; ++i) {
        uint64_t sent = 0, received = 0;
        for (const Car& car : dag.images[i].cars) {
          if (car.kind == CarKind::Send) sent += car.message_bytes();
          if (car.kind == CarKind::Recv) received += car.message_bytes();
        }
        if (!variable) CHECK(sent == uint64_t{P - 1} * spec.nbytes);
        CHECK(received == total - (variable ? spec.counts[i] : spec.nbytes));
      }
    }
  }
}

TEST_CASE("recursive_doubling gather_all: at most log2 P' + 1 sends per image") {
  for (uint32_t P = 1; P <= 33; ++P) {
    const GlobalDag dag =
        build(testref::make_spec(CollKind::GatherAll, "recursive_doubling", P, 0, 8));
    const uint32_t rounds = log2_ceil(patterns::floor_pow2(P));
    for (const LocalDag& image : dag.images) {
      INFO("P=", P, " image=", image.image);
      CHECK(sends_of(image).size() <= rounds + 1);
    }
  }
}

// Every CAR `car` (transitively) depends on, within one image.
std::vector<bool> ancestors(const LocalDag& dag, CarId car) {
  std::vector<bool> seen(dag.cars.size(), false);
  std::vector<CarId> stack{car};
  while (!stack.empty()) {
    const CarId c = stack.back();
    stack.pop_back();
    for (const Dep& d : dag.cars[c].deps) {
      if (!seen[d.car]) {
        seen[d.car] = true;
        stack.push_back(d.car);
      }
    }
  }
  return seen;
}

// The image's message CARs of `kind` in creation (posting) order.
std::vector<CarId> posted(const LocalDag& dag, CarKind kind) {
  std::vector<CarId> ids;
  for (CarId c = 0; c < dag.cars.size(); ++c) {
    if (dag.cars[c].kind == kind) ids.push_back(c);
  }
  return ids;
}

TEST_CASE("pairwise and windowed exchange post in the GASNet notes' order: (p+k) mod P, k = 1..P-1") {
  for (const char* a : {"pairwise", "windowed"}) {
    for (uint32_t P : {1u, 2u, 5u, 16u, 17u}) {
      const GlobalDag dag = build(testref::make_spec(CollKind::Exchange, a, P, 0, 4));
      for (const LocalDag& image : dag.images) {
        const auto sends = posted(image, CarKind::Send), recvs = posted(image, CarKind::Recv);
        REQUIRE(sends.size() == P - 1);
        for (uint32_t k = 1; k < P; ++k) {
          INFO(a, " P=", P, " image=", image.image, " k=", k);
          CHECK(image.cars[sends[k - 1]].peer == (image.image + k) % P);
          CHECK(image.cars[recvs[k - 1]].peer == (image.image + P - k) % P);
        }
      }
    }
  }
}

TEST_CASE("pairwise exchange and direct gather_all never chain their messages") {
  for (uint32_t P : {2u, 7u, 16u}) {
    for (CollKind kind : {CollKind::Exchange, CollKind::GatherAll}) {
      const char* a = kind == CollKind::Exchange ? "pairwise" : "direct";
      const GlobalDag dag = build(testref::make_spec(kind, a, P, 0, 8));
      for (const LocalDag& image : dag.images) {
        for (const Car& car : image.cars) {
          if (car.is_message()) CHECK(car.deps.empty());
        }
      }
    }
  }
}

TEST_CASE("windowed exchange keeps at most W sends and W receives in flight per image") {
  for (uint32_t window : {0u, 1u, 2u, 3u, 8u, 40u}) {
    const uint32_t W = window == 0 ? 8 : window;
    for (uint32_t P : {1u, 2u, 3u, 9u, 10u, 17u, 33u}) {
      CollectiveSpec spec = testref::make_spec(CollKind::Exchange, "windowed", P, 0, 8);
      spec.window = window;
      const GlobalDag dag = build(spec);
      for (const LocalDag& image : dag.images) {
        for (CarKind kind : {CarKind::Send, CarKind::Recv}) {
          const auto ids = posted(image, kind);
          for (size_t k = 0; k < ids.size(); ++k) {
            INFO("W=", W, " P=", P, " image=", image.image, " k=", k + 1, " ", car_kind_name(kind));
            const auto before = ancestors(image, ids[k]);
            // Message k waits for message k - W (so no more than W are ready at
            // once) and for no message of its kind after it in the order.
            if (k >= W) CHECK(before[ids[k - W]]);
            if (k < W) {
              for (CarId other : ids) CHECK_FALSE(before[other]);
            }
            for (size_t later = k; later < ids.size(); ++later) CHECK_FALSE(before[ids[later]]);
          }
        }
      }
      testref::check_generator(spec, 2);
    }
  }
}

TEST_CASE("ring gather_all forwards the block it received in the step before") {
  for (uint32_t P : {2u, 3u, 8u, 13u}) {
    const GlobalDag dag = build(testref::make_spec(CollKind::GatherAll, "ring", P, 0, 8));
    for (const LocalDag& image : dag.images) {
      const auto sends = posted(image, CarKind::Send), recvs = posted(image, CarKind::Recv);
      REQUIRE(sends.size() == P - 1);
      for (uint32_t s = 0; s + 1 < P; ++s) {
        INFO("P=", P, " image=", image.image, " step=", s);
        CHECK(image.cars[sends[s]].peer == (image.image + 1) % P);
        if (s == 0) {
          CHECK(image.cars[sends[s]].src.space == BufferSpace::UserSrc);
        } else {
          CHECK(image.cars[sends[s]].src == image.cars[recvs[s - 1]].dst);
        }
      }
    }
  }
}

// Exchange v forms: per-pair counts with zeros, several shapes.
void make_variable_exchange(CollectiveSpec* s, uint64_t salt) {
  const uint64_t P = s->images;
  for (uint64_t i = 0; i < P * P; ++i) {
    const uint64_t v = (i * 31 + salt * 7) % 23;
    s->counts.push_back(v % 4 == 0 ? 0 : v);
  }
}

TEST_CASE("exchange v forms (variable counts incl. zeros) deliver the reference bytes") {
  std::vector<uint32_t> sizes{1, 2, 3, 4, 5, 6, 7, 8, 9, 16, 17};
  for (const char* a : kExchange) {
    for (uint32_t P : sizes) {
      for (uint64_t salt : {0u, 1u, 2u}) {
        CollectiveSpec spec = testref::make_spec(CollKind::Exchange, a, P, 0, 0);
        spec.window = salt == 2 ? 2 : 0;
        make_variable_exchange(&spec, salt);
        const testref::GenOutcome out = testref::check_generator(spec, 3);
        CHECK(out.ok);
        CHECK(static_cast<int64_t>(out.messages) == expected_messages(CollKind::Exchange, a, P));
      }
      // All blocks empty: zero-byte messages, same count.
      CollectiveSpec empty = testref::make_spec(CollKind::Exchange, a, P, 0, 0);
      empty.counts.assign(uint64_t{P} * P, 0);
      CHECK(static_cast<int64_t>(testref::check_generator(empty, 1).messages) ==
            expected_messages(CollKind::Exchange, a, P));
    }
  }
}

TEST_CASE("gather_all v forms (counts incl. zeros, packed and scattered displs) are exact") {
  for (const char* a : kGatherAll) {
    for (uint32_t P = 1; P <= 17; ++P) {
      for (int shape = 0; shape < 3; ++shape) {
        CollectiveSpec spec = testref::make_spec(CollKind::GatherAll, a, P, 0, 0);
        for (uint32_t i = 0; i < P; ++i) spec.counts.push_back(i % 3 == 2 ? 0 : 1 + (i * 5) % 9);
        if (shape == 1) {  // reversed with gaps
          uint64_t next = 2;
          spec.displs.assign(P, 0);
          for (uint32_t i = P; i-- > 0;) {
            spec.displs[i] = next;
            next += spec.counts[i] + 3;
          }
        } else if (shape == 2) {  // rank order but with gaps
          uint64_t next = 1;
          for (uint32_t i = 0; i < P; ++i) {
            spec.displs.push_back(next);
            next += spec.counts[i] + 2;
          }
        }
        const testref::GenOutcome out = testref::check_generator(spec, 3);
        CHECK(out.ok);
        CHECK(static_cast<int64_t>(out.messages) == expected_messages(CollKind::GatherAll, a, P));
      }
    }
  }
}

TEST_CASE("uniform gather_all and exchange deliver the reference bytes for P = 1..33") {
  for_each_algorithm([](CollKind kind, const char* a) {
    for (uint32_t P = 1; P <= 33; ++P) {
      for (uint64_t nbytes : {uint64_t{0}, uint64_t{3}}) {
        testref::check_generator(testref::make_spec(kind, a, P, 0, nbytes), 1);
      }
    }
  });
}

TEST_CASE("dissemination schedules are logarithmic: bruck's critical path grows with log2 P") {
  for (CollKind kind : {CollKind::GatherAll, CollKind::Exchange}) {
    for (uint32_t P : {2u, 5u, 16u, 17u, 33u}) {
      const GlobalDag dag = build(testref::make_spec(kind, "bruck", P, 0, 8));
      INFO(coll_kind_name(kind), " P=", P);
      // Per round at most: pack COPY, SEND, RECV; plus the first/last COPY and exit.
      CHECK(dag_stats(dag).critical_path <= 3 * uint64_t{log2_ceil(P)} + 3);
    }
  }
}

}  // namespace
}  // namespace carflow
