// PyTorch snapshot reading: the pickle parsed and converted to ops (in memory, already inflated),
// on a real recording (tests/data/torch_snapshots/snap_default.pickle.gz: 94,588 trace entries).
// items/s = trace entries per second.
//
//   BM_PickleParse            the pickle alone
//   BM_SnapshotConvert        pickle + conversion to ops
//   BM_SnapshotReplayCaching  what `gpumembench replay --trace snap_default.pickle.gz --allocator
//                             caching --device sim` does: inflate, parse and convert once, then the
//                             run through `caching` on sim (the need from the run's own steps);
//                             /process_time: per CPU second of all threads. With two cores or more
//                             the file is inflated on a second thread as it is parsed
//                             (content_feed.h), which takes turns with the parser on one core
//   BM_SnapshotReplayCaching120Steps  the same on snap_speed_120steps.pickle.gz (452,603 entries)
//   BM_SnapshotReplayCaching120StepsStacks  the same 120 steps with a stack in every entry, in
//                             PyTorch's own layout (each distinct frame written once, fetched from
//                             the memo after; a 60 MB pickle): the file GMB_BENCH_STACKS_SNAPSHOT
//                             names, default /tmp/gmb_speed_frames_shared.pickle.gz, which
//                             `scripts/make_frames_snapshot.py tests/data/torch_snapshots/
//                             snap_speed_120steps.pickle.gz F --shared-dicts` makes (and
//                             scripts/measure_speed.py); skipped, saying so, where it is missing
//   BM_GzipStream             snap_speed_120steps.pickle.gz (3.2 MB, 33 MB inflated) read as a
//                             stream to its end (ByteInput::refill, as every trace reader reads):
//                             ISA-L where it is installed, zlib otherwise (the label says which);
//                             bytes/s = inflated bytes
//   BM_GzipReadWhole          the same file read whole (read_rest: libdeflate where installed)
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <fstream>

#include "harness/run/runner.h"
#include "workloads/byte_input.h"
#include "workloads/pickle/pickle_reader.h"
#include "workloads/pytorch_snapshot.h"
#include "workloads/trace.h"

namespace {

std::string inflated(const std::string& path) {
  auto in = gmb::ByteInput::open(path);
  const auto content = in->read_rest(gmb::kMaxSnapshotBytes, "the snapshot");
  return std::string(content.data(), content.size());
}

const std::string& recording() {
  static const std::string bytes = inflated(std::string(GMB_SOURCE_DIR) + "/tests/data/torch_snapshots/snap_default.pickle.gz");
  return bytes;
}

void BM_PickleParse(benchmark::State& state) {
  const std::string& bytes = recording();
  for (auto _ : state) {
    auto doc = gmb::pickle::parse(bytes, "snap_default.pickle");
    benchmark::DoNotOptimize(doc.root());
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes.size()));
}
BENCHMARK(BM_PickleParse)->Unit(benchmark::kMillisecond);

void BM_SnapshotConvert(benchmark::State& state) {
  const std::string& bytes = recording();
  std::size_t entries = 0;
  for (auto _ : state) {
    gmb::PyTorchSnapshot s = gmb::convert_pytorch_snapshot(bytes, "snap_default.pickle");
    entries = s.ops.size() + s.segment_events.size();
    benchmark::DoNotOptimize(entries);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * 94588));
  state.counters["ops"] = static_cast<double>(entries);
}
BENCHMARK(BM_SnapshotConvert)->Unit(benchmark::kMillisecond);

void replay_caching_file(benchmark::State& state, const std::string& path, std::int64_t entries) {
  for (auto _ : state) {
    gmb::CaseSpec spec{"caching", {}, gmb::trace_workload_factory(path)};
    gmb::DeviceSpec dev;
    dev.choice = gmb::DeviceChoice::Sim;
    gmb::RunSettings settings;
    settings.on_oom = gmb::OnOom::Continue;
    gmb::CaseResult r = gmb::run_case(spec, dev, settings);
    benchmark::DoNotOptimize(r.runs.at(0).events);
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * entries);
}
void replay_caching(benchmark::State& state, const char* name, std::int64_t entries) {
  replay_caching_file(state, std::string(GMB_SOURCE_DIR) + "/tests/data/torch_snapshots/" + name, entries);
}
void BM_SnapshotReplayCaching(benchmark::State& state) { replay_caching(state, "snap_default.pickle.gz", 94588); }
BENCHMARK(BM_SnapshotReplayCaching)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SnapshotReplayCaching)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
// The same loop recorded for 120 steps: 452,603 entries, where the fixed costs are a smaller part.
void BM_SnapshotReplayCaching120Steps(benchmark::State& state) {
  replay_caching(state, "snap_speed_120steps.pickle.gz", 452603);
}
BENCHMARK(BM_SnapshotReplayCaching120Steps)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SnapshotReplayCaching120Steps)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();
void BM_SnapshotReplayCaching120StepsStacks(benchmark::State& state) {
  const char* env = std::getenv("GMB_BENCH_STACKS_SNAPSHOT");
  const std::string path = env ? env : "/tmp/gmb_speed_frames_shared.pickle.gz";
  if (!std::ifstream(path)) {
    state.SkipWithError(("no " + path + ": make it with scripts/make_frames_snapshot.py "
                         "tests/data/torch_snapshots/snap_speed_120steps.pickle.gz " + path + " --shared-dicts")
                            .c_str());
    return;
  }
  replay_caching_file(state, path, 452603);
}
BENCHMARK(BM_SnapshotReplayCaching120StepsStacks)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_SnapshotReplayCaching120StepsStacks)->Unit(benchmark::kMillisecond)->MeasureProcessCPUTime();

const std::string& speed_file() {
  static const std::string path = std::string(GMB_SOURCE_DIR) + "/tests/data/torch_snapshots/snap_speed_120steps.pickle.gz";
  return path;
}

void BM_GzipStream(benchmark::State& state) {
  std::uint64_t bytes = 0;
  for (auto _ : state) {
    auto in = gmb::ByteInput::open(speed_file());
    while (!in->at_end()) {
      bytes += in->buffered().size();
      in->consume(in->buffered().size());
    }
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
#if GMB_HAVE_ISAL
  state.SetLabel("ISA-L");
#else
  state.SetLabel("zlib");
#endif
}
BENCHMARK(BM_GzipStream)->Unit(benchmark::kMillisecond);

void BM_GzipReadWhole(benchmark::State& state) {
  std::uint64_t bytes = 0;
  for (auto _ : state) {
    auto in = gmb::ByteInput::open(speed_file());
    bytes += in->read_rest(gmb::kMaxSnapshotBytes, "the snapshot").size();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(bytes));
}
BENCHMARK(BM_GzipReadWhole)->Unit(benchmark::kMillisecond);

}  // namespace
