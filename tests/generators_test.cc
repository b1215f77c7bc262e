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

namespace carflow {
namespace {

// Messages the algorithm must send for one call without sync transforms.
uint64_t expected_messages(const CollectiveSpec& spec) {
  const uint64_t P = spec.images;
  const uint64_t segments = split_segments(spec.nbytes, spec.segment_bytes, 1).size();
  const std::string& a = spec.algorithm;
  if (a == "flat" || a == "binomial") return (P - 1) * segments;
  if (a == "dissemination") return P * patterns::ceil_log2(static_cast<uint32_t>(P));
  if (a == "recursive_doubling") {
    const uint64_t pof2 = patterns::floor_pow2(static_cast<uint32_t>(P)), rem = P - pof2;
    return pof2 * patterns::ceil_log2(static_cast<uint32_t>(pof2)) + 2 * rem;
  }
  if (a == "ring") return 2 * P * (P - 1);
  return 0;
}

TEST_CASE("every generator gives a valid global DAG for P = 1..33 with the promised messages") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P = 1; P <= 33; ++P) {
      for (uint32_t root : {0u, P - 1, P / 2}) {
        for (uint64_t nbytes : {uint64_t{8}, uint64_t{1000}, uint64_t{65536} + 8}) {
          for (uint64_t segment : {uint64_t{0}, uint64_t{4096}}) {
            CollectiveSpec spec;
            spec.kind = gen->kind;
            spec.algorithm = gen->name;
            spec.images = P;
            spec.root = gen->kind == CollKind::Broadcast ? root : 0;
            spec.nbytes = gen->kind == CollKind::Barrier ? 0 : nbytes;
            spec.elem_size = gen->kind == CollKind::Allreduce ? 8 : 1;
            spec.segment_bytes = gen->segmented ? segment : 0;
            INFO(coll_kind_name(gen->kind), " ", gen->name, " P=", P, " root=", spec.root,
                 " nbytes=", spec.nbytes, " segment=", spec.segment_bytes);
            GlobalDag dag;
            std::string error;
            REQUIRE(generate_global(spec, &dag, &error));
            INFO(error);
            REQUIRE(validate_global(dag, &error));
            CHECK(dag_stats(dag).messages == expected_messages(spec));
          }
        }
      }
    }
  }
}

TEST_CASE("sync transforms keep every DAG valid and add two barriers' worth of messages") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {1u, 2u, 3u, 5u, 8u, 13u}) {
      for (int flags : {kSpecInAllSync, kSpecOutAllSync, kSpecInAllSync | kSpecOutAllSync}) {
        CollectiveSpec spec;
        spec.kind = gen->kind;
        spec.algorithm = gen->name;
        spec.images = P;
        spec.nbytes = gen->kind == CollKind::Barrier ? 0 : 64;
        spec.elem_size = gen->kind == CollKind::Allreduce ? 8 : 1;
        spec.flags = flags;
        INFO(gen->name, " P=", P, " flags=", flags);
        GlobalDag dag;
        std::string error;
        REQUIRE(generate_global(spec, &dag, &error));
        INFO(error);
        REQUIRE(validate_global(dag, &error));
        const int barriers = ((flags & kSpecInAllSync) ? 1 : 0) + ((flags & kSpecOutAllSync) ? 1 : 0);
        CHECK(dag_stats(dag).messages ==
              expected_messages(spec) + barriers * P * patterns::ceil_log2(P));
      }
    }
  }
}

TEST_CASE("every generator's DAG round-trips through JSON exactly") {
  for (const GeneratorInfo* gen : GeneratorRegistry::instance().all()) {
    for (uint32_t P : {1u, 2u, 7u, 16u}) {
      CollectiveSpec spec;
      spec.kind = gen->kind;
      spec.algorithm = gen->name;
      spec.images = P;
      spec.root = gen->kind == CollKind::Broadcast ? P - 1 : 0;
      spec.nbytes = gen->kind == CollKind::Barrier ? 0 : 10000;
      spec.elem_size = gen->kind == CollKind::Allreduce ? 8 : 1;
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
