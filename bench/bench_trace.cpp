// Trace replay speed: the native CSV reader alone, and a whole replay through `caching` on the
// simulated device (open, the need pass, the timed run: what `gpumembench replay` does), per
// event. The trace (1 M events: a ring of 1024 live buffers, 512 B - 1 MiB with a few 2-64 MiB
// requests, two streams) is generated into a temporary file once; the 10 M-event one (150 MB)
// only when its benchmark runs.
//
//   BM_NativeCsvRead      open_trace + read() to the end, chunks of 65,536 ops
//   BM_TraceReplayCaching make_trace_workload + run_case (caching, sim, on_oom continue): the
//                         trace is read once (on sim the workload's need comes from the run's
//                         own steps), on a worker thread while the runner's thread replays.
//                         /real_time: events per wall second; /process_time: per CPU second of
//                         both threads together (the one-core figure, steadier on a busy machine)
//   BM_TraceReplayCaching10M  the same for 10 M events (issue 11's size: its memory does not
//                         grow with the trace, the trace is streamed in chunks)
#include <benchmark/benchmark.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/run/runner.h"
#include "workloads/trace.h"

namespace gmb {
namespace {

constexpr std::uint64_t kEvents = 1000000;

// The trace of `events` events in the temporary folder (written on first use).
std::string make_trace_file(std::uint64_t events, const char* name) {
  const std::string p = (std::filesystem::temp_directory_path() / name).string();
  std::FILE* f = std::fopen(p.c_str(), "w");
  std::fputs("action,id,bytes,stream\n", f);
  constexpr std::uint32_t kLive = 1024;
  std::vector<bool> live(kLive);
  std::uint64_t x = 42;
  for (std::uint64_t i = 0, slot = 0; i < events; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const unsigned stream = (slot >> 3) & 1;
    if (live[slot]) {
      std::fprintf(f, "free,%u,,%u\n", unsigned(slot), stream);
      live[slot] = false;
      slot = (slot + 1) % kLive;
    } else {
      const std::uint64_t bytes = (x >> 59) == 0 ? (std::uint64_t(2) << 20) << ((x >> 20) % 6)
                                                 : (std::uint64_t(512) << ((x >> 24) % 12)) + (x >> 40) % 512;
      std::fprintf(f, "alloc,%u,%llu,%u\n", unsigned(slot), static_cast<unsigned long long>(bytes), stream);
      live[slot] = true;
      if ((x >> 33) & 1) slot = (slot + 1) % kLive;
    }
  }
  std::fclose(f);
  return p;
}

const std::string& trace_file() {
  static const std::string path = make_trace_file(kEvents, "gmb_bench_trace_1m.csv");
  return path;
}

void BM_NativeCsvRead(benchmark::State& state) {
  const std::string& path = trace_file();
  std::uint64_t ops = 0;
  for (auto _ : state) {
    auto src = open_trace(path);
    std::vector<Op> chunk;
    chunk.reserve(kTraceChunkOps);
    for (;;) {
      chunk.clear();
      const std::size_t n = src->read(chunk, kTraceChunkOps);
      if (n == 0) break;
      ops += n;
    }
  }
  state.SetItemsProcessed(std::int64_t(ops));
  state.SetBytesProcessed(std::int64_t(std::filesystem::file_size(path) * state.iterations()));
}
BENCHMARK(BM_NativeCsvRead)->Unit(benchmark::kMillisecond);

// One replay of the trace at `path` through `caching` on sim, end to end: its event count.
std::uint64_t replay_through_caching(const std::string& path) {
  CaseSpec spec{"caching", {}, [&] { return make_trace_workload(path); }};
  DeviceSpec dev;
  dev.choice = DeviceChoice::Sim;
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  return run_case(spec, dev, settings).runs.at(0).events;
}

void BM_TraceReplayCaching(benchmark::State& state) {
  const std::string& path = trace_file();
  std::uint64_t events = 0;
  for (auto _ : state) events += replay_through_caching(path);
  state.SetItemsProcessed(std::int64_t(events));
}
BENCHMARK(BM_TraceReplayCaching)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_TraceReplayCaching)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

void BM_TraceReplayCaching10M(benchmark::State& state) {
  static const std::string path = make_trace_file(10 * kEvents, "gmb_bench_trace_10m.csv");
  std::uint64_t events = 0;
  for (auto _ : state) events += replay_through_caching(path);
  state.SetItemsProcessed(std::int64_t(events));
}
BENCHMARK(BM_TraceReplayCaching10M)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(1);
BENCHMARK(BM_TraceReplayCaching10M)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime()->Iterations(1);

}  // namespace
}  // namespace gmb
