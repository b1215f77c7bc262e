// The host rings alone (transports/ofi/host_rings.h), no engine: what a
// message (8 bytes, or `bytes`) between two processes of one host costs in
// the transport carflow uses for them. Two pinned threads of one process each own a
// node's segment (the cache traffic is that of two processes).
//
// - round_trip_ns: node 0 pushes, node 1 polls it and pushes back, node 0
//   polls the answer; per round trip (compare bench/pingpong_floor's one
//   cache line, and a 2-process 8-byte allreduce or barrier);
// - stream_ns: node 0 pushes messages back to back (retrying when the ring
//   is full), node 1 takes them; per message (compare a 2-process 8-byte
//   broadcast, whose root runs ahead the same way).
//
// A 1 KiB stream shows what the VM's slow phase costs (bench/PERFORMANCE_LOG.md, comparison with
// MPI): its 16 data lines cross between the cores at about 35 ns a line
// then, against about 8 in the fast phase.
//
//   bazel run -c opt //bench:ring_floor -- [messages=2000000] [bytes=8]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/arg.h"
#include "bench/two_cpus.h"
#include "transports/ofi/host_rings.h"

namespace {

using carflow::HostRings;
using carflow::MsgKey;
using carflow_bench::pin;
using carflow_bench::two_cpus;

bool take_all(void*, uint32_t, uint32_t, const MsgKey&, uint32_t, bool, bool) { return true; }

// Takes one message from `rings`, spinning until it is there.
void take_one(HostRings& rings, HostRings::Message* m) {
  while (rings.poll(m, 1, UINT64_MAX, &take_all, nullptr) == 0) {
  }
}

// Pushes message i of `bytes` (its first 8 bytes: i), retrying while the ring is full.
void push_one(HostRings& rings, uint32_t to, uint64_t i, std::vector<char>& payload) {
  std::memcpy(payload.data(), &i, sizeof i);
  while (!rings.push(to, 1 - to, to, MsgKey{0, static_cast<uint32_t>(i), 0}, payload.data(), payload.size(), 0,
                     0)) {
  }
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const uint64_t messages = carflow_bench::arg_uint(argc, argv, 1, "messages", 2000000, 1, uint64_t{1} << 40);
  const uint64_t bytes = carflow_bench::arg_uint(argc, argv, 2, "bytes", 8, 8, HostRings::kMaxBytes);
  const std::vector<int> cpus = two_cpus();
  if (cpus.empty()) {
    std::fprintf(stderr, "ring_floor: needs two CPUs\n");
    return 1;
  }
  std::unique_ptr<HostRings> node[2];
  std::string names[2], error;
  for (uint32_t n = 0; n < 2; ++n) {
    node[n] = HostRings::create(n, 2, &names[n], &error);
    if (node[n] == nullptr) {
      std::fprintf(stderr, "ring_floor: %s\n", error.c_str());
      return 1;
    }
  }
  for (uint32_t n = 0; n < 2; ++n) {
    if (!node[n]->attach({names[0], names[1]}, &error)) {
      std::fprintf(stderr, "ring_floor: %s\n", error.c_str());
      return 1;
    }
  }
  for (uint32_t n = 0; n < 2; ++n) node[n]->unlink();

  bool bad = false;  // written by the echo thread, read after join
  // A message came whole and in order: its key and first 8 bytes say i.
  auto wrong = [bytes](const HostRings::Message& m, uint64_t i) {
    uint64_t first = 0;
    std::memcpy(&first, m.data, sizeof first);
    return m.key.seq != static_cast<uint32_t>(i) || m.nbytes != bytes || first != i;
  };
  std::thread echo([&] {
    pin(cpus[1]);
    auto m = std::make_unique<HostRings::Message>();
    std::vector<char> payload(bytes);
    for (uint64_t i = 0; i < messages; ++i) {  // round trips
      take_one(*node[1], m.get());
      push_one(*node[1], 0, i, payload);
    }
    for (uint64_t i = 0; i < messages; ++i) {  // stream
      take_one(*node[1], m.get());
      if (wrong(*m, i)) bad = true;
    }
  });
  pin(cpus[0]);
  auto m = std::make_unique<HostRings::Message>();
  std::vector<char> payload(bytes);
  auto t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < messages; ++i) {
    push_one(*node[0], 1, i, payload);
    take_one(*node[0], m.get());
    if (wrong(*m, i)) bad = true;
  }
  const double round_trip = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  for (uint64_t i = 0; i < messages; ++i) push_one(*node[0], 1, i, payload);
  echo.join();
  const double stream = seconds_since(t0);
  if (bad) {
    std::fprintf(stderr, "ring_floor: a message came out of order or damaged\n");
    return 1;
  }
  std::printf(
      "{\"bench\":\"ring_floor\",\"cpus\":[%d,%d],\"messages\":%llu,\"bytes\":%llu,\"round_trip_ns\":%.1f,"
      "\"stream_ns\":%.1f}\n",
      cpus[0], cpus[1], static_cast<unsigned long long>(messages), static_cast<unsigned long long>(bytes),
              1e9 * round_trip / static_cast<double>(messages), 1e9 * stream / static_cast<double>(messages));
  return 0;
}
