// Every registered generator, every P in 1..33, several roots and sizes,
// with and without segmentation and sync transforms: the global DAG
// validates (matched, in bounds, deadlock-free), round-trips through JSON,
// and sends exactly the messages its algorithm promises.
#include <doctest/doctest.h>

#include "graph/builder.h"
#include "graph/generators/patterns.h"
#include "graph/json.h"
#include "graph/registry.h"
#include "graph/transforms.h"
#include "graph/validate.h"
#include "tests/gen_check.h"

namespace carflow {
namespace {

// Messages the algorithm must send for one call without sync transforms;
// -1 where this file does not know (each family's own test counts those).
int64_t expected_messages(const CollectiveSpec& spec) {
  const int64_t P = spec.images;
  const int64_t segments = static_cast<int64_t>(split_segments(spec.nbytes, spec.segment_bytes, 1).size());
  const std::string& a = spec.algorithm;
  switch (spec.kind) {
    case CollKind::Broadcast:
      // A flat broadcast to one other image sends the message whole.
      if (a == "flat" && P == 2) return 1;
      if (a == "flat" || a == "binomial") return (P - 1) * segments;
      break;
    case CollKind::Barrier:
      if (a == "dissemination") return P * patterns::ceil_log2(static_cast<uint32_t>(P));
      if (a == "direct") return P * (P - 1);
      break;
    case CollKind::Allreduce:
      if (a == "recursive_doubling") {
        const int64_t pof2 = patterns::floor_pow2(static_cast<uint32_t>(P)), rem = P - pof2;
        return pof2 * patterns::ceil_log2(static_cast<uint32_t>(pof2)) + 2 * rem;
      }
      if (a == "ring") return 2 * P * (P - 1);
      if (a == "direct") return P * (P - 1);
      break;
    default:
      break;
  }
  return -1;
}

// The spec of one test point for any registered generator.
CollectiveSpec spec_for(const GeneratorInfo& gen, uint32_t P, uint32_t root, uint64_t nbytes) {
  CollectiveSpec spec = testref::make_spec(gen.kind, gen.name, P, root, nbytes);
  spec.elem_size = is_computational(gen.kind) ? 8 : 1;
  return spec;
}

void check_messages(const GlobalDag& dag, int64_t extra) {
  const int64_t want = expected_messages(dag.spec);
  if (want >= 0) CHECK(static_cast<int64_t>(dag_stats(dag).messages) == want + extra);
}

TEST_CASE("every generator gives a valid global DAG for P = 1..33 with the promised messages") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P = 1; P <= 33; ++P) {
      for (uint32_t root : {0u, P - 1, P / 2}) {
        for (uint64_t nbytes : {uint64_t{8}, uint64_t{1000}, uint64_t{65536} + 8}) {
          for (uint64_t segment : {uint64_t{0}, uint64_t{4096}}) {
            CollectiveSpec spec = spec_for(*gen, P, root, nbytes);
            spec.segment_bytes = gen->segmented ? segment : 0;
            INFO(coll_kind_name(gen->kind), " ", gen->name, " P=", P, " root=", spec.root,
                 " nbytes=", spec.nbytes, " segment=", spec.segment_bytes);
            GlobalDag dag;
            std::string error;
            REQUIRE(generate_global(spec, &dag, &error));
            INFO(error);
            REQUIRE(validate_global(dag, &error));
            check_messages(dag, 0);
          }
        }
      }
    }
  }
}

TEST_CASE("sync transforms keep every DAG valid and add exactly the messages of their signals") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
      for (int flags : {kSpecInAllSync, kSpecOutAllSync, kSpecInAllSync | kSpecOutAllSync}) {
        CollectiveSpec spec = spec_for(*gen, P, 0, 64);
        spec.flags = flags;
        INFO(gen->name, " P=", P, " flags=", flags);
        GlobalDag dag;
        std::string error;
        REQUIRE(generate_global(spec, &dag, &error));
        INFO(error);
        REQUIRE(validate_global(dag, &error));
        // IN_ALLSYNC: a dissemination barrier; OUT_ALLSYNC: the cheapest
        // sufficient signal (transforms.h).
        const int64_t barrier = int64_t{P} * patterns::ceil_log2(P);
        int64_t out = barrier;
        if (out_allsync_root(spec) >= 0) out = P - 1;
        if (out_allsync_fan_in_root(spec) >= 0) out = 2 * (int64_t{P} - 1);
        check_messages(dag, ((flags & kSpecInAllSync) ? barrier : 0) + ((flags & kSpecOutAllSync) ? out : 0));
        // Transforms append their CARs and mark exactly those (JSON "sync").
        CollectiveSpec bare = spec;
        bare.flags = 0;
        GlobalDag plain;
        REQUIRE(generate_global(bare, &plain, &error));
        for (uint32_t i = 0; i < P; ++i) {
          const size_t original = plain.images[i].cars.size();
          size_t wrong = 0;
          for (CarId c = 0; c < dag.images[i].cars.size(); ++c) wrong += dag.images[i].cars[c].sync != (c >= original);
          CHECK_MESSAGE(wrong == 0, "image ", i, ": ", wrong, " CARs marked wrongly");
        }
      }
    }
  }
}

// OUT_ALLSYNC: no image's exit may complete before every data CAR of every
// image has (the generator's CARs keep their ids under the transform; a
// SEND counts as done when its receive is, as a rendezvous transport has it).
TEST_CASE("OUT_ALLSYNC: every image's exit waits for every image's data; gather and reductions to a root use P-1 signals, broadcast and scatter 2(P-1)") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
      CollectiveSpec spec = spec_for(*gen, P, P / 2, 64);
      spec.flags = kSpecOutAllSync;
      INFO(coll_kind_name(gen->kind), " ", gen->name, " P=", P);
      GlobalDag plain, dag;
      std::string error;
      CollectiveSpec bare = spec;
      bare.flags = 0;
      REQUIRE(generate_global(bare, &plain, &error));
      REQUIRE(generate_global(spec, &dag, &error));
      REQUIRE(validate_global(dag, &error));
      testref::check_exits_wait_for_all_data(dag, plain);
      const uint64_t extra = dag_stats(dag).messages - dag_stats(plain).messages;
      if (out_allsync_root(spec) >= 0) {
        CHECK(extra == P - 1);  // the GASNet notes' zero-byte broadcast from the root
      } else if (out_allsync_fan_in_root(spec) >= 0) {
        CHECK(extra == 2 * (uint64_t{P} - 1));  // zero-byte fan-in to the root, then broadcast
      } else {
        CHECK(extra == uint64_t{P} * patterns::ceil_log2(P));  // an exit barrier
      }
    }
  }
}

TEST_CASE("every generator's DAG round-trips through JSON exactly") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {1u, 2u, 7u, 16u}) {
      CollectiveSpec spec = spec_for(*gen, P, P - 1, 10000);
      spec.segment_bytes = gen->segmented ? 4096 : 0;
      spec.flags = kSpecOutAllSync;
      INFO(gen->name, " P=", P);
      GlobalDag dag, back;
      std::string error;
      REQUIRE(generate_global(spec, &dag, &error));
      const std::string text = dag_to_json(dag);
      REQUIRE(dag_from_json(text, &back, &error));
      CHECK(back == dag);
      CHECK(dag_to_json(back) == text);
    }
  }
}

TEST_CASE("no image leaves a barrier, or an ALLSYNC collective, before every image has entered") {
  for (uint32_t P = 1; P <= 33; ++P) {
    for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
      const bool is_barrier = gen->kind == CollKind::Barrier;
      CollectiveSpec spec = spec_for(*gen, P, 0, 64);
      // Barriers as they are; other collectives with IN_ALLSYNC.
      spec.flags = is_barrier ? 0 : kSpecInAllSync;
      GlobalDag dag;
      std::string error;
      REQUIRE(generate_global(spec, &dag, &error));
      const auto reached = testref::exits_reached_from_entries(dag);
      for (uint32_t from = 0; from < P; ++from) {
        for (uint32_t to = 0; to < P; ++to) {
          INFO(gen->name, " P=", P, ": image ", to, "'s exit does not wait for image ", from);
          CHECK(reached[from][to]);
        }
      }
    }
  }
}

TEST_CASE("with IN_ALLSYNC every CAR but the entry barrier's own waits for it, OUT_ALLSYNC's exit signals included") {
  // CF_CHECK relies on it (engine/arg_check.h): an image that finds a
  // mismatch on the entry barrier must not have posted anything else.
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {2u, 3u, 5u, 8u}) {
      CollectiveSpec spec = spec_for(*gen, P, P / 2, 64);
      spec.flags = kSpecInAllSync | kSpecOutAllSync;
      GlobalDag dag;
      std::string error;
      REQUIRE(generate_global(spec, &dag, &error));
      for (const LocalDag& local : dag.images) {
        for (const Car& car : local.cars) {
          if (!car.deps.empty()) continue;
          INFO(gen->name, " P=", P, " image ", local.image, ": a CAR of kind ", car_kind_name(car.kind),
               " tag ", car.tag, " starts before the entry barrier");
          CHECK(((car.kind == CarKind::Send || car.kind == CarKind::Recv) && is_entry_sync_tag(car.tag)));
        }
      }
    }
  }
}

TEST_CASE("binomial broadcast reaches every image in ceil(log2 P) message hops") {
  for (uint32_t P = 1; P <= 33; ++P) {
    CollectiveSpec spec;
    spec.kind = CollKind::Broadcast;
    spec.algorithm = "binomial";
    spec.images = P;
    spec.root = P / 3;
    spec.nbytes = 8;
    GlobalDag dag;
    std::string error;
    REQUIRE(generate_global(spec, &dag, &error));
    // Critical path in CARs: one hop is SEND then RECV; plus root COPY-free
    // sends and the exit JOINs. Hops = depth of the binomial tree.
    const uint64_t hops = patterns::ceil_log2(P);
    CHECK(dag_stats(dag).critical_path <= 2 * hops + 2);
  }
}

}  // namespace
}  // namespace carflow

namespace carflow {
namespace {

bool moves_data(CollKind kind) {
  return kind != CollKind::Barrier && kind != CollKind::Allreduce;
}


TEST_CASE("every data-movement generator delivers the reference bytes (sequential executor)") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    if (!moves_data(gen->kind)) continue;
    for (uint32_t P : {1u, 2u, 3u, 4u, 5u, 7u, 8u, 13u, 16u, 17u, 32u}) {
      for (uint64_t nbytes : {uint64_t{1}, uint64_t{7}, uint64_t{64}, uint64_t{4096}}) {
        if (nbytes * P * P > (uint64_t{1} << 22)) continue;  // exchange buffers stay small
        for (uint32_t root : {0u, P - 1, P / 2}) {
          CollectiveSpec spec = testref::make_spec(gen->kind, gen->name, P, root, nbytes);
          spec.segment_bytes = gen->segmented ? 1024 : 0;
          testref::check_generator(spec, 2);
          const bool v = gen->kind == CollKind::Scatter || gen->kind == CollKind::Gather ||
                         gen->kind == CollKind::GatherAll || gen->kind == CollKind::Exchange;
          if (v && root == 0) {
            CollectiveSpec var = spec;
            carflow::reference::make_variable(&var, false);
            testref::check_generator(var, 2);
            var = spec;
            carflow::reference::make_variable(&var, true);
            testref::check_generator(var, 2);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace carflow
