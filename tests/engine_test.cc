// White-box tests of the engine: dependency handling, matching paths of the
// inproc transport, the schedule cache and instance pool.
#include <doctest/doctest.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "engine/arg_check.h"
#include "engine/engine.h"
#include "engine/status.h"
#include "graph/builder.h"
#include "graph/registry.h"

namespace carflow {
namespace {

constexpr int kSumU64 = -1 - (kOpSum * 16 + kUint64);

ReduceOp sum_u64() {
  ReduceOp op;
  std::string error;
  REQUIRE(resolve_reduce_op(kSumU64, 0, 8, {}, &op, &error));
  return op;
}

// A random lattice of REDUCE CARs over 8-byte temp slots: car i computes
// slot[i] = slot[a] + slot[b] for earlier a, b. Any CAR that ran before its
// predecessors would read a stale slot and change the final sum.
TEST_CASE("choice knobs take their named values and name the variable and the choices otherwise") {
  struct Env {  // sets one variable for the scope of a check
    const char* name;
    Env(const char* n, const char* v) : name(n) { ::setenv(n, v, 1); }
    ~Env() { ::unsetenv(name); }
  };
  Config c;
  std::string error;
  {
    Env e("CF_INPROC_RINGS", "1");
    REQUIRE(Config::from_env(&c, &error));
    CHECK(c.inproc_rings == RingsMode::On);
  }
  {
    Env e("CF_INPROC_RINGS", "0");
    REQUIRE(Config::from_env(&c, &error));
    CHECK(c.inproc_rings == RingsMode::Off);
  }
  REQUIRE(Config::from_env(&c, &error));
  CHECK(c.inproc_rings == RingsMode::Auto);
  {
    Env e("CF_INPROC_RINGS", "yes");
    CHECK_FALSE(Config::from_env(&c, &error));
    CHECK(error == "CF_INPROC_RINGS='yes': expected auto, 1 or 0");
  }
  {
    Env e("CF_PROGRESS", "spin");
    CHECK_FALSE(Config::from_env(&c, &error));
    CHECK(error == "CF_PROGRESS='spin': expected poll, thread or block");
  }
}

TEST_CASE("a CAR never runs before its predecessors (random reduce lattices)") {
  for (uint32_t seed = 1; seed <= 20; ++seed) {
    CAPTURE(seed);
    std::mt19937 rng(seed);
    const uint32_t n = 200 + rng() % 2000;
    DagBuilder b(0, 8, 8 * n);
    std::vector<uint64_t> reference(n);
    // Seeds: slot 0 and 1 come from the user source (value 1).
    b.copy(user_dst(0, 8), user_src(0, 8));
    b.copy(user_dst(8, 8), user_src(0, 8));
    reference[0] = reference[1] = 1;
    for (uint32_t i = 2; i < n; ++i) {
      const uint32_t a = rng() % i, c = rng() % i;
      b.reduce(user_dst(8 * i, 8), user_dst(8 * a, 8), user_dst(8 * c, 8),
               {after_buffer(a), after_buffer(c)});
      reference[i] = reference[a] + reference[c];
    }
    LocalDag dag = b.finish();
    Engine engine(1, Config{});
    ImageContext& img = engine.image(0);
    Schedule schedule(CollectiveSpec{}, std::move(dag));
    uint64_t one = 1;
    std::vector<uint64_t> out(n, 0);
    std::string error;
    const uint64_t h = engine.start_schedule(img, &schedule, &one, out.data(), sum_u64());
    REQUIRE(engine.wait_sync(img, h, &error) == kOk);
    CHECK(out == reference);
  }
}

// Compiling fuses COPYs with equal predecessors into one CAR and bypasses
// JOINs with one predecessor or one successor; every dependency survives
// transitively, so the chain of REDUCEs still sees every copied value.
TEST_CASE("compiling fuses sibling COPYs and bypasses pass-through JOINs, keeping every dependency") {
  constexpr uint32_t kCopies = 8;
  DagBuilder b(0, 8, 8 * (kCopies + 2));
  const BufferRef acc = user_dst(8 * (kCopies + 1), 8);
  const CarId seed = b.copy(user_dst(0, 8), user_src(0, 8));
  std::vector<CarId> joins;
  for (uint32_t k = 1; k <= kCopies; ++k) {
    const CarId c = b.copy(user_dst(8 * k, 8), user_dst(0, 8), {after_buffer(seed)});
    joins.push_back(b.join({after(c)}));
  }
  CarId sum = b.reduce(acc, user_dst(8, 8), user_dst(16, 8), {after(joins[0]), after(joins[1])});
  for (uint32_t k = 3; k <= kCopies; ++k) {
    sum = b.reduce(acc, acc, user_dst(8 * k, 8), {after_buffer(sum), after(joins[k - 1])});
  }
  LocalDag dag = b.finish();
  const size_t total = dag.cars.size();
  Engine engine(1, Config{});
  ImageContext& img = engine.image(0);
  Schedule schedule(CollectiveSpec{}, std::move(dag));
  // 7 copies absorbed by the first, 8 single-predecessor JOINs bypassed,
  // and the exit JOIN dropped (it waited for the last REDUCE alone).
  CHECK(schedule.live_cars() == total - (kCopies - 1) - kCopies - 1);
  CHECK(schedule.cars()[schedule.exit()].kind == CarKind::Reduce);
  for (uint64_t round = 1; round <= 3; ++round) {
    std::vector<uint64_t> out(kCopies + 2, 0);
    std::string error;
    const uint64_t h = engine.start_schedule(img, &schedule, &round, out.data(), sum_u64());
    REQUIRE(engine.wait_sync(img, h, &error) == kOk);
    for (uint32_t k = 0; k <= kCopies; ++k) CHECK(out[k] == round);
    CHECK(out[kCopies + 1] == kCopies * round);
  }
}

TEST_CASE("a schedule readies message CARs before local copies, among its roots and among a CAR's successors") {
  // Image 0 of 2: a root COPY listed before two root SENDs, and a RECV whose
  // successors are a COPY listed before a SEND (forwarding).
  DagBuilder b(0, 2, 64);
  const CarId own = b.copy(user_dst(0, 16), user_src(0, 16));
  const CarId s1 = b.send(1, 1, user_src(0, 8));
  const CarId s2 = b.send(1, 2, user_src(8, 8));
  const CarId r = b.recv(1, 3, user_dst(16, 8));
  const CarId fwd_copy = b.copy(user_dst(24, 8), user_dst(16, 8), {after_buffer(r)});
  const CarId fwd_send = b.send(1, 4, user_dst(16, 8), {after_buffer(r)});
  b.join({after(own), after(s1), after(s2), after(fwd_copy), after(fwd_send)});
  Schedule schedule(CollectiveSpec{}, b.finish());
  const std::vector<uint32_t> want_roots = {s1, s2, r, own};
  CHECK(schedule.roots() == want_roots);
  const CompiledCar& recv = schedule.cars()[r];
  REQUIRE(recv.succ_count == 2);
  CHECK(schedule.successors(recv)[0] == fwd_send);
  CHECK(schedule.successors(recv)[1] == fwd_copy);
}

TEST_CASE("a schedule of roots that release only the exit JOIN runs direct; others do not") {
  // A broadcast root of 3 images: its own COPY and two SENDs, then the exit.
  DagBuilder root(0, 3, 64);
  const CarId own = root.copy(user_dst(0, 8), user_src(0, 8));
  const CarId s1 = root.send(1, 1, user_src(0, 8));
  const CarId s2 = root.send(2, 1, user_src(0, 8));
  root.join({after(own), after(s1), after(s2)});
  Schedule direct(CollectiveSpec{}, root.finish());
  CHECK(direct.direct());
  for (uint32_t i : {own, s1, s2}) CHECK(direct.cars()[i].to_exit);
  CHECK_FALSE(direct.cars()[direct.exit()].to_exit);

  // A forwarding image: the SEND waits for the RECV, so not every CAR is a
  // root. The RECV's successor is the SEND, not the exit; the SEND and
  // the COPY release only the exit.
  DagBuilder fwd(1, 3, 64);
  const CarId r = fwd.recv(0, 1, user_dst(0, 8));
  const CarId copy = fwd.copy(user_dst(8, 8), user_dst(0, 8), {after_buffer(r)});
  const CarId send = fwd.send(2, 1, user_dst(0, 8), {after_buffer(r)});
  fwd.join({after(copy), after(send)});
  Schedule forwarding(CollectiveSpec{}, fwd.finish());
  CHECK_FALSE(forwarding.direct());
  CHECK_FALSE(forwarding.cars()[r].to_exit);
  CHECK(forwarding.cars()[copy].to_exit);
  CHECK(forwarding.cars()[send].to_exit);

  // A leaf: the RECV is the exit (the JOIN after it alone is dropped).
  DagBuilder leaf(2, 3, 64);
  const CarId lr = leaf.recv(0, 1, user_dst(0, 8));
  leaf.join({after(lr)});
  Schedule leaf_schedule(CollectiveSpec{}, leaf.finish());
  CHECK(leaf_schedule.live_cars() == 1);
  CHECK_FALSE(leaf_schedule.direct());
  CHECK_FALSE(leaf_schedule.cars()[0].to_exit);
  CHECK(leaf_schedule.cars()[0].last);
  CHECK_FALSE(leaf_schedule.cars()[0].unpacks);

  // A RECV with unpack segments runs them as its completion starts, then
  // counts the exit down like any CAR that only releases it.
  DagBuilder unpack(1, 2, 64);
  const uint32_t slot = unpack.temp_slot(8);
  const CarId ur = unpack.recv(0, 1, temp(slot, 0, 8));
  const CarId uc = unpack.copy(user_dst(0, 8), temp(slot, 0, 8), {after_buffer(ur)});
  const CarId us = unpack.send(0, 2, user_src(0, 8));
  unpack.join({after(uc), after(us)});
  Schedule unpacking(CollectiveSpec{}, unpack.finish());
  REQUIRE(unpacking.live_cars() == 3);
  CHECK(unpacking.cars()[ur].seg_count == 1);
  CHECK(unpacking.cars()[ur].unpacks);
  CHECK(unpacking.cars()[ur].to_exit);
  CHECK(unpacking.cars()[1].to_exit);  // the SEND (the COPY runs in the RECV: not compiled)
  CHECK(unpacking.direct());
}

TEST_CASE("a RECV runs the COPY that is its only successor in its completion, and releases the COPY's successors") {
  // Image 0 of 2: RECV into a temp slot, two unpack COPYs out of it (fused),
  // then a SEND of the received slot that waits for the copies.
  DagBuilder b(0, 2, 64);
  const uint32_t slot = b.temp_slot(16);
  const BufferRef whole = temp(slot, 0, 16);
  const CarId r = b.recv(1, 1, whole);
  const CarId c1 = b.copy(user_dst(0, 8), temp(slot, 0, 8), {after_buffer(r)});
  const CarId c2 = b.copy(user_dst(32, 8), temp(slot, 8, 8), {after_buffer(r)});
  const CarId s = b.send(1, 2, whole, {after_buffer(c1), after_buffer(c2)});
  b.join({after(s)});
  Schedule schedule(CollectiveSpec{}, b.finish());
  // Left: the RECV (with both copies as segments) and the SEND, which is
  // the exit (the exit JOIN waited for it alone).
  REQUIRE(schedule.live_cars() == 2);
  CHECK(schedule.exit() == 1);
  const CompiledCar& recv = schedule.cars()[0];
  CHECK(recv.kind == CarKind::Recv);
  REQUIRE(recv.seg_count == 2);
  // Member 0's destination (user[1]) at 0 and 32, from the temp slot at 0
  // and 8 (the temp arena follows the one member's two entries: base 2).
  const CopySegment* seg = schedule.segments(recv);
  CHECK((seg[0].dst.base == 1 && seg[0].dst.offset == 0 && seg[0].length == 8));
  CHECK((seg[1].dst.base == 1 && seg[1].dst.offset == 32 && seg[1].length == 8));
  CHECK((seg[0].src.base == 2 && seg[1].src.base == 2 && seg[1].src.offset == seg[0].src.offset + 8));
  REQUIRE(recv.succ_count == 1);
  CHECK(schedule.cars()[schedule.successors(recv)[0]].kind == CarKind::Send);
  CHECK(schedule.cars()[schedule.successors(recv)[0]].deps == 1);
}

// Runs `body(engine, image)` on one thread per image.
template <typename F>
void on_images(Engine& engine, F body) {
  std::vector<std::thread> threads;
  for (uint32_t i = 0; i < engine.images(); ++i) {
    threads.emplace_back([&, i] { body(engine.image(i)); });
  }
  for (auto& t : threads) t.join();
}

CollectiveCall broadcast_call(uint32_t root, void* src, void* dst, uint64_t nbytes) {
  CollectiveCall call;
  call.kind = CollKind::Broadcast;
  call.root = root;
  call.src = src;
  call.dst = dst;
  call.nbytes = nbytes;
  return call;
}

// The receiver posts its RECV only after the sender's SEND has been issued,
// so the message must wait in the unexpected queue: eager below the
// threshold (the SEND completes alone), single copy above it (the SEND
// completes only when the late RECV copies straight from the sender).
TEST_CASE("a message that arrives before its receive is claimed from the unexpected queue") {
  for (uint64_t nbytes : {uint64_t{64}, uint64_t{1} << 20}) {
    CAPTURE(nbytes);
    Config config;
    config.segment_bytes = 0;  // one message, whatever the size
    Engine engine(2, config);
    const bool eager = nbytes <= config.inproc_eager_bytes;
    std::vector<uint8_t> src(nbytes), dst0(nbytes), dst1(nbytes, 0);
    for (size_t i = 0; i < nbytes; ++i) src[i] = static_cast<uint8_t>(i * 13 + 5);
    std::atomic<bool> sent{false}, root_done_before_recv{false};
    on_images(engine, [&](ImageContext& img) {
      std::string error;
      uint64_t h = 0;
      if (img.image == 0) {
        REQUIRE(engine.start(img, broadcast_call(0, src.data(), dst0.data(), nbytes), &h, &error) == kOk);
        root_done_before_recv = engine.is_done(engine.lookup(img, h));
        sent = true;
        CHECK(engine.wait_sync(img, h, &error) == kOk);
      } else {
        while (!sent.load()) std::this_thread::yield();
        CHECK(engine.transport().unexpected_count(1) == 1);
        REQUIRE(engine.start(img, broadcast_call(0, nullptr, dst1.data(), nbytes), &h, &error) == kOk);
        CHECK(engine.wait_sync(img, h, &error) == kOk);
      }
    });
    CHECK(dst1 == src);
    CHECK(dst0 == src);
    CHECK(root_done_before_recv.load() == eager);
    const TransportStats stats = engine.transport().stats();
    CHECK(stats.messages == 1);
    CHECK(stats.unexpected == 1);
    CHECK(stats.eager == (eager ? 1u : 0u));
    CHECK(engine.transport().unexpected_count(1) == 0);
  }
}

// The receive is posted first: a small message is copied by the sender
// straight into it; a large one is copied once, on the receiving side.
TEST_CASE("a message whose receive is already posted is copied once, without buffering") {
  for (uint64_t nbytes : {uint64_t{64}, uint64_t{1} << 20}) {
    CAPTURE(nbytes);
    Config config;
    config.segment_bytes = 0;  // one message, whatever the size
    Engine engine(2, config);
    std::vector<uint8_t> src(nbytes, 7), dst0(nbytes), dst1(nbytes, 0);
    std::atomic<bool> posted{false};
    on_images(engine, [&](ImageContext& img) {
      std::string error;
      uint64_t h = 0;
      if (img.image == 1) {
        REQUIRE(engine.start(img, broadcast_call(0, nullptr, dst1.data(), nbytes), &h, &error) == kOk);
        posted = true;
        CHECK(engine.wait_sync(img, h, &error) == kOk);
      } else {
        while (!posted.load()) std::this_thread::yield();
        REQUIRE(engine.start(img, broadcast_call(0, src.data(), dst0.data(), nbytes), &h, &error) == kOk);
        CHECK(engine.wait_sync(img, h, &error) == kOk);
      }
    });
    CHECK(dst1 == src);
    const TransportStats stats = engine.transport().stats();
    CHECK(stats.unexpected == 0);
    CHECK(stats.eager == 0);
    if (nbytes <= config.inproc_eager_bytes) {
      CHECK(stats.direct == 1);
    } else {
      CHECK(stats.single_copy == 1);
    }
  }
}

// After a loss the images are out of step: a send could reach a receive of
// another collective, and a receive match its message. A call started then
// posts nothing and is failed, done before its start returns.
TEST_CASE("a collective started after a known loss fails at once with CF_ERR_PEER_LOST, posting nothing") {
  Engine engine(2, Config{});
  engine.fail_all(kErrPeerLost, "node 1 was lost (a test)");
  std::vector<uint8_t> src(64, 7);
  std::vector<std::vector<uint8_t>> dst(2, std::vector<uint8_t>(64, 0xAB));
  on_images(engine, [&](ImageContext& img) {
    for (int call = 0; call < 3; ++call) {  // a retry fails the same way
      CAPTURE(img.image);
      CAPTURE(call);
      std::string error;
      uint64_t h = 0;
      REQUIRE(engine.start(img, broadcast_call(0, src.data(), dst[img.image].data(), 64), &h, &error) == kOk);
      CHECK(engine.is_done(engine.lookup(img, h)));
      CHECK(engine.wait_sync(img, h, &error) == kErrPeerLost);
    }
  });
  CHECK(dst[0] == std::vector<uint8_t>(64, 0xAB));  // not even the root's own copy
  CHECK(dst[1] == std::vector<uint8_t>(64, 0xAB));
  CHECK(engine.transport().stats().messages == 0);
  CHECK(engine.transport().unexpected_count(0) == 0);
  CHECK(engine.transport().unexpected_count(1) == 0);
}

// A process held to fewer CPUs than its images (taskset, a cpuset, a
// launcher's binding) shares cores, whatever the host has: its image
// threads must yield rather than spin through each other's time slices.
TEST_CASE("host_cores counts the CPUs the process may use, one share per process on the host") {
  cpu_set_t saved;
  REQUIRE(sched_getaffinity(0, sizeof saved, &saved) == 0);
  const uint32_t host = std::max(1u, std::thread::hardware_concurrency());
  const uint32_t cpus = static_cast<uint32_t>(CPU_COUNT(&saved));
  CHECK(Engine::host_cores(1, 1) == std::min(host, cpus));
  CHECK(Engine::host_cores(1, 2) == std::min(host, 2 * cpus));  // two processes of one image
  CHECK(Engine::host_cores(2, 4) == std::min(host, 2 * cpus));  // two of two images
  int first = 0;
  while (!CPU_ISSET(first, &saved)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(sched_setaffinity(0, sizeof one, &one) == 0);
  CHECK(Engine::host_cores(2, 2) == 1);
  CHECK(Engine::shares_cores(2, 2));
  CHECK_FALSE(Engine::shares_cores(1, 1));
  CHECK(Engine::host_cores(1, 2) == std::min(host, 2u));
  REQUIRE(sched_setaffinity(0, sizeof saved, &saved) == 0);
}

TEST_CASE("repeated calls reuse one schedule and one pooled instance") {
  Engine engine(3, Config{});
  std::vector<std::vector<uint8_t>> dst(3, std::vector<uint8_t>(4096));
  std::vector<uint8_t> src(4096, 9);
  on_images(engine, [&](ImageContext& img) {
    std::string error;
    for (int i = 0; i < 500; ++i) {
      uint64_t h = 0;
      REQUIRE(engine.start(img, broadcast_call(1, src.data(), dst[img.image].data(), 4096), &h,
                           &error) == kOk);
      REQUIRE(engine.wait_sync(img, h, &error) == kOk);
    }
  });
  for (uint32_t i = 0; i < 3; ++i) {
    ImageContext& img = engine.image(i);
    CHECK(img.generator_runs.load() == 1);
    REQUIRE(img.cache.size() == 1);
    CHECK(img.cache.begin()->second->instances_created() == 1);
    CHECK(dst[i] == src);
  }
}

TEST_CASE("outstanding handles complete and sync in any order") {
  const uint32_t n = 300;
  Engine engine(4, Config{});
  std::vector<std::vector<uint64_t>> dst(4, std::vector<uint64_t>(n, 0));
  std::vector<uint64_t> src(n);
  for (uint32_t i = 0; i < n; ++i) src[i] = i * 31 + 1;
  on_images(engine, [&](ImageContext& img) {
    std::string error;
    std::vector<uint64_t> handles(n);
    for (uint32_t i = 0; i < n; ++i) {
      REQUIRE(engine.start(img, broadcast_call(i % 4, &src[i], &dst[img.image][i], 8), &handles[i],
                           &error) == kOk);
    }
    for (uint32_t i = n; i-- > 0;) CHECK(engine.wait_sync(img, handles[i], &error) == kOk);
    CHECK(engine.wait_sync(img, handles[0], &error) == kErrBadArg);  // dead after sync
  });
  for (uint32_t i = 0; i < 4; ++i) CHECK(dst[i] == src);
}

// ---- CF_CHECK's argument digest (engine/arg_check.h) -------------------------

TEST_CASE("CF_CHECK digests tell apart every two algorithms of a kind, and every root below 128 and size below 256") {
  for (int k = 0; k < kCollKinds; ++k) {
    CollectiveCall call;
    call.kind = static_cast<CollKind>(k);
    const std::vector<const GeneratorInfo*> gens = GeneratorRegistry::instance().list(call.kind);
    for (size_t i = 0; i < gens.size(); ++i) {
      for (size_t j = i + 1; j < gens.size(); ++j) {
        INFO(coll_kind_name(call.kind), ": ", gens[i]->name, " and ", gens[j]->name);
        const uint64_t a = arg_digest(call, *gens[i]), b = arg_digest(call, *gens[j]);
        CHECK(a != b);
        CHECK(first_difference(a, b) == ArgField::Algorithm);
      }
    }
  }
  const GeneratorInfo* flat = GeneratorRegistry::instance().find(CollKind::Broadcast, "flat");
  REQUIRE(flat != nullptr);
  CollectiveCall call;
  call.kind = CollKind::Broadcast;
  std::vector<uint64_t> roots, sizes;
  for (call.root = 0; call.root < 128; ++call.root) roots.push_back(arg_digest(call, *flat));
  call.root = 0;
  for (call.nbytes = 0; call.nbytes < 256; ++call.nbytes) sizes.push_back(arg_digest(call, *flat));
  for (const std::vector<uint64_t>* digests : {&roots, &sizes}) {
    std::vector<uint64_t> sorted = *digests;
    std::sort(sorted.begin(), sorted.end());
    CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end());
    for (uint64_t d : sorted) CHECK_FALSE(is_mismatch_report(d));  // a digest is never taken for a report
  }
}

TEST_CASE("a CF_CHECK algorithm report names this image's choice, and the other's on the two images it names") {
  const GeneratorInfo* flat = GeneratorRegistry::instance().find(CollKind::Broadcast, "flat");
  const GeneratorInfo* binomial = GeneratorRegistry::instance().find(CollKind::Broadcast, "binomial");
  REQUIRE(flat != nullptr);
  REQUIRE(binomial != nullptr);
  CollectiveCall call;
  call.kind = CollKind::Broadcast;
  call.nbytes = 8;
  const uint64_t mine = arg_digest(call, *flat), theirs = arg_digest(call, *binomial);
  CollectiveSpec spec;
  spec.kind = CollKind::Broadcast;
  spec.algorithm = "flat";
  spec.nbytes = 8;
  const Schedule schedule(spec, DagBuilder(0, 8, 8).finish());
  const uint64_t report = mismatch_report(first_difference(theirs, mine), 3, 0, theirs, mine);
  REQUIRE(is_mismatch_report(report));
  const std::string head = "CF_CHECK: argument algorithm differs between images: image 3 and image 0 chose "
                           "different algorithms: ";
  const std::string tail = "; the registered generators (CF_PLUGINS, cf_generator_register) or the "
                           "CF_ALGO_BROADCAST / cf_coll_set_algorithm choices differ between images or processes";
  CHECK(describe_mismatch(report, 0, schedule) ==
        head + "this image (0) chose 'flat' for this broadcast and image 3 chose 'binomial'" + tail);
  CHECK(describe_mismatch(report, 7, schedule) == head + "this image (7) chose 'flat' for this broadcast" + tail);
  // Image numbers past the 20 bits an algorithm report has are named as such.
  const uint64_t far = mismatch_report(ArgField::Algorithm, 5000000, 0, theirs, mine);
  CHECK(describe_mismatch(far, 0, schedule).find("an image numbered 1048575 or more and image 0") != std::string::npos);
  // Other arguments: the two images, 28 bits each.
  CHECK(describe_mismatch(mismatch_report(ArgField::Root, 200000000, 6), 6, schedule) ==
        "CF_CHECK: argument root differs between images: image 200000000 and image 6 passed different values");
}

}  // namespace
}  // namespace carflow
