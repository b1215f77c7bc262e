// The long-run memory figure: CALLS collectives of random kinds, sizes
// (1 B to 64 KiB, uniform) and sync modes on 8 images (threads of one
// process, or under cfrun -n N --images 8/N, N = 2 or 4, processes of
// 8/N threads); each process's resident memory after WARMUP calls and at
// the end, its schedule cache's hit rate, and what the first call of a
// size never seen costs against its repeat.
//
//   memory_soak [CALLS [WARMUP [SEED]]]   (defaults 1000000 100000 1)
//   cfrun -n 2 --images 4 memory_soak ...
//
// Every image draws the same calls from SEED (kind, bytes, root, IN and
// OUT mode), starts each and waits for it; a failed call is counted and
// the run exits 1. Sources hold fixed bytes and destinations are not read
// (the soak of tests/mp_collectives checks results): the subject is the
// memory the runtime keeps. Prints one JSON line per 10% of the run and
// one summary line, then a table.
#include <carflow/carflow.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "bench/arg.h"

namespace {

constexpr cf_image_t kImages = 8;
constexpr size_t kMaxBlock = 64 * 1024;
constexpr int kNewSizes = 32;  // first calls of unseen sizes timed at the end
constexpr int kInModes[3] = {CF_COLL_IN_NOSYNC, CF_COLL_IN_MYSYNC, CF_COLL_IN_ALLSYNC};
constexpr int kOutModes[3] = {CF_COLL_OUT_NOSYNC, CF_COLL_OUT_MYSYNC, CF_COLL_OUT_ALLSYNC};
constexpr int kAll = CF_COLL_IN_ALLSYNC | CF_COLL_OUT_ALLSYNC | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;

using Clock = std::chrono::steady_clock;

struct Run {
  uint64_t calls = 0, warmup = 0, seed = 1;
  cf_image_t first_image = 0;  // this process's first image: it measures the process
  std::atomic<uint64_t> failures{0};
  uint64_t rss_warm = 0, rss_end = 0, rss_peak_after_warm = 0;
  cf_cache_stats_t cache_warm{}, cache_end{};
  double seconds = 0, first_us = 0, repeat_us = 0;
};

uint64_t resident_bytes() {
  long pages = 0, resident = 0;
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// One drawn call, started and waited for; false when it failed.
bool one_call(std::mt19937_64& rng, char* src, char* dst) {
  const int kind = static_cast<int>(rng() % 7);
  const size_t nbytes = 1 + rng() % kMaxBlock;
  const cf_image_t root = static_cast<cf_image_t>(rng() % kImages);
  const int flags = kInModes[rng() % 3] | kOutModes[rng() % 3] | CF_COLL_LOCAL | CF_COLL_ALL_THREADS;
  cf_coll_handle_t h = CF_COLL_INVALID_HANDLE;
  switch (kind) {
    case 0: h = cf_coll_broadcast_nb(CF_TEAM_ALL, dst, root, src, nbytes, flags); break;
    case 1: h = cf_coll_scatter_nb(CF_TEAM_ALL, dst, root, src, nbytes, flags); break;
    case 2: h = cf_coll_gather_nb(CF_TEAM_ALL, root, dst, src, nbytes, flags); break;
    case 3: h = cf_coll_gather_all_nb(CF_TEAM_ALL, dst, src, nbytes, flags); break;
    case 4: h = cf_coll_exchange_nb(CF_TEAM_ALL, dst, src, nbytes, flags); break;
    case 5:
      h = cf_coll_allreduce_nb(CF_TEAM_ALL, dst, src, 1, nbytes, CF_BUILTIN(CF_OP_BOR, CF_DT_UINT8), 0, flags);
      break;
    default: h = cf_coll_barrier_nb(CF_TEAM_ALL, flags); break;
  }
  return h != CF_COLL_INVALID_HANDLE && cf_coll_wait_sync(h) == CF_OK;
}

double call_us(char* src, char* dst, size_t nbytes) {
  cf_coll_barrier(CF_TEAM_ALL, kAll);
  const auto t0 = Clock::now();
  cf_coll_allreduce(CF_TEAM_ALL, dst, src, 1, nbytes, CF_BUILTIN(CF_OP_BOR, CF_DT_UINT8), 0, kAll);
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}

void image_main(cf_image_t me, void* arg) {
  Run& run = *static_cast<Run*>(arg);
  std::vector<char> src(kImages * kMaxBlock + kMaxBlock, static_cast<char>(me + 1));
  std::vector<char> dst(kImages * kMaxBlock + kMaxBlock, 0);
  std::mt19937_64 rng(run.seed);
  const uint64_t step = std::max<uint64_t>(1, run.calls / 10);
  const auto start = Clock::now();
  for (uint64_t i = 0; i < run.calls; ++i) {
    if (!one_call(rng, src.data(), dst.data())) run.failures.fetch_add(1, std::memory_order_relaxed);
    if ((i + 1) % step != 0 && i + 1 != run.warmup) continue;
    cf_coll_barrier(CF_TEAM_ALL, kAll);
    if (me != run.first_image) continue;
    const uint64_t rss = resident_bytes();
    cf_cache_stats_t cache{};
    cf_get_cache_stats(&cache);
    if (i + 1 == run.warmup) run.rss_warm = rss, run.cache_warm = cache;
    if (i + 1 > run.warmup) run.rss_peak_after_warm = std::max(run.rss_peak_after_warm, rss);
    std::printf("{\"calls\": %llu, \"rss_bytes\": %llu, \"cache_built\": %llu, \"cache_evicted\": %llu, "
                "\"cache_bytes\": %llu, \"seconds\": %.1f}\n",
                (unsigned long long)(i + 1), (unsigned long long)rss, (unsigned long long)cache.built,
                (unsigned long long)cache.evicted, (unsigned long long)cache.bytes,
                std::chrono::duration<double>(Clock::now() - start).count());
    std::fflush(stdout);
  }
  cf_coll_barrier(CF_TEAM_ALL, kAll);
  if (me == run.first_image) {
    run.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    run.rss_end = resident_bytes();
    cf_get_cache_stats(&run.cache_end);
  }
  // Sizes above 64 KiB were never drawn: the first call builds, the repeat hits.
  std::vector<double> first, repeat;
  for (int k = 0; k < kNewSizes; ++k) {
    const size_t nbytes = kMaxBlock + 8 * (k + 1);
    first.push_back(call_us(src.data(), dst.data(), nbytes));
    repeat.push_back(call_us(src.data(), dst.data(), nbytes));
  }
  if (me == run.first_image) {
    std::sort(first.begin(), first.end());
    std::sort(repeat.begin(), repeat.end());
    run.first_us = first[first.size() / 2];
    run.repeat_us = repeat[repeat.size() / 2];
  }
}

}  // namespace

int main(int argc, char** argv) {
  Run run;
  run.calls = carflow_bench::arg_uint(argc, argv, 1, "CALLS", 1000000, 1, uint64_t{1} << 40);
  run.warmup = carflow_bench::arg_uint(argc, argv, 2, "WARMUP", std::min<uint64_t>(100000, run.calls), 1, run.calls);
  run.seed = carflow_bench::arg_uint(argc, argv, 3, "SEED", 1, 0, uint64_t{1} << 62);
  if (cf_init(&argc, &argv) != CF_OK) return 2;
  cf_set_error_mode(CF_ERRORS_RETURN);
  const cf_node_t nodes = cf_nodes();
  if (kImages % nodes != 0) {
    std::fprintf(stderr, "memory_soak: %u processes do not divide %u images\n", nodes, kImages);
    return 2;
  }
  const cf_image_t local = kImages / nodes;
  run.first_image = cf_mynode() * local;
  if (cf_run_images(local, nullptr, 0, image_main, &run) != CF_OK) {
    std::fprintf(stderr, "memory_soak: %s\n", cf_last_error());
    return 2;
  }
  cf_finalize();
  // Hits: calls whose schedule was in the image's cache (each image makes
  // every call; the checkpoints' barriers are counted too, and hit).
  const double made = static_cast<double>(run.calls) * local;  // the cache is this process's
  const double after_warm = static_cast<double>(run.calls - run.warmup) * local;
  const double hit = 1 - static_cast<double>(run.cache_end.built) / made;
  const double hit_after_warm =
      after_warm > 0 ? 1 - static_cast<double>(run.cache_end.built - run.cache_warm.built) / after_warm : 0;
  const double growth = static_cast<double>(run.rss_end) - static_cast<double>(run.rss_warm);
  std::printf("{\"bench\": \"memory_soak\", \"processes\": %u, \"images\": %u, \"calls\": %llu, \"warmup\": %llu, \"seed\": %llu, "
              "\"failures\": %llu, \"seconds\": %.1f, \"rss_warm_bytes\": %llu, \"rss_end_bytes\": %llu, "
              "\"rss_peak_after_warm_bytes\": %llu, \"rss_growth_bytes\": %.0f, \"cache_built\": %llu, "
              "\"cache_evicted\": %llu, \"cache_bytes\": %llu, \"hit_rate\": %.4f, \"hit_rate_after_warmup\": %.4f, "
              "\"first_call_us\": %.1f, \"repeat_call_us\": %.1f}\n",
              nodes, kImages, (unsigned long long)run.calls, (unsigned long long)run.warmup,
              (unsigned long long)run.seed, (unsigned long long)run.failures.load(), run.seconds, (unsigned long long)run.rss_warm,
              (unsigned long long)run.rss_end, (unsigned long long)run.rss_peak_after_warm, growth,
              (unsigned long long)run.cache_end.built, (unsigned long long)run.cache_end.evicted,
              (unsigned long long)run.cache_end.bytes, hit, hit_after_warm, run.first_us, run.repeat_us);
  std::printf("%-28s %12s\n", "calls x images", std::to_string(run.calls).append(" x 8").c_str());
  std::printf("%-28s %12.1f\n", "RSS after warm-up, MiB", run.rss_warm / 1048576.0);
  std::printf("%-28s %12.1f\n", "RSS at the end, MiB", run.rss_end / 1048576.0);
  std::printf("%-28s %12.3f\n", "growth, MiB", growth / 1048576.0);
  std::printf("%-28s %12.4f\n", "schedule cache hit rate", hit);
  std::printf("%-28s %12.1f\n", "new size, first call, us", run.first_us);
  std::printf("%-28s %12.1f\n", "same size again, us", run.repeat_us);
  return run.failures.load() == 0 ? 0 : 1;
}
