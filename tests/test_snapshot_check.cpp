// The snapshot self-check (harness/run/snapshot_check.h): a recorded run replayed through `caching`
// with its own settings gives "yes"; a replay that differs names the first difference.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "devices/recording_device.h"
#include "harness/run/runner.h"
#include "harness/run/snapshot_check.h"
#include "test_helpers.h"
#include "torch_snapshot_data.h"
#include "workloads/trace.h"
#include "workloads/trace_source.h"

namespace gmb {
namespace {

PyTorchSnapshot synthetic(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/torch_snapshots/synthetic/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return convert_pytorch_snapshot(ss.str(), name);
}

TEST(SnapshotCheck, ReproducesARunPyTorchsAllocatorRecorded) {
  PyTorchSnapshot s = synthetic("basic.pickle");
  SnapshotCheck c = check_snapshot_replay(s, {{"alloc_conf", s.alloc_conf}}, 0);
  EXPECT_EQ(to_text(c), "reproduces the recorded run: yes (3 segment events and 0 OOMs, same sizes, same order)");
}

TEST(SnapshotCheck, NamesTheFirstDifference) {
  PyTorchSnapshot s = synthetic("basic.pickle");
  // Under expandable segments the replay maps pages where PyTorch called cudaMalloc.
  SnapshotCheck c = check_snapshot_replay(s, {{"alloc_conf", "expandable_segments:True"}}, 0);
  EXPECT_EQ(to_text(c),
            "reproduces the recorded run: no, first difference at segment event 0: recorded segment_alloc of 2.0 MiB "
            "(2097152 B) at trace entry 0, replayed segment_map of 2.0 MiB (2097152 B) before op 0 (trace entry 1)");
}

TEST(SnapshotCheck, ComparesOomsAndExpandableMaps) {
  PyTorchSnapshot s = synthetic("expandable_oom.pickle");
  // The recorded OOM needs a card too small for the 64 MiB request after 36 MiB live.
  SnapshotCheck small = check_snapshot_replay(s, {{"alloc_conf", s.alloc_conf}}, 80 * MiB);
  EXPECT_EQ(to_text(small), "reproduces the recorded run: yes (2 segment events and 1 OOMs, same sizes, same order)");
  SnapshotCheck big = check_snapshot_replay(s, {{"alloc_conf", s.alloc_conf}}, 0);
  EXPECT_FALSE(big.reproduces);
  EXPECT_NE(to_text(big).find("segment event 2: the recording ends, the replay made a segment_map of 60.0 MiB"),
            std::string::npos)
      << to_text(big);
}

TEST(SnapshotCheck, SaysWhyItDidNotCheck) {
  PyTorchSnapshot s = synthetic("overflow.pickle");
  EXPECT_EQ(to_text(check_snapshot_replay(s, {}, 0)),
            "reproduces the recorded run: not checked (the trace does not start with the allocator (2 blocks were alive "
            "before its first entry))");
}

// The CLI checks a replay of `caching` on sim from the run's own device calls (check_snapshot_run),
// not from a second replay (check_snapshot_replay): both must say the same, word for word, on
// runs that reproduce the recording, runs with OOMs the recording lacks or lost, and runs that
// differ (other settings, another capacity).
struct BothChecks {
  std::string from_run, from_replay;
};

BothChecks check_both_ways(const std::string& path, const AllocatorOptions& options, const DeviceSpec& device) {
  auto source = open_trace(path);
  const PyTorchSnapshot* s = pytorch_snapshot_of(*source);
  if (!s) throw std::runtime_error(path + ": not a snapshot");
  CaseSpec spec{"caching", options, trace_workload_factory(path, {}, *source)};
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  settings.segment_placements = recorded_placements(*s);
  std::vector<DeviceCall> calls;
  settings.device_calls = &calls;
  AllocatorOptions used;
  DeviceInfo info;
  settings.on_device_ready = [&](const DeviceInfo& d, const AllocatorOptions& o) {
    info = d;
    used = o;
  };
  const CaseResult r = run_case(spec, device, settings);
  EXPECT_TRUE(r.error.empty()) << r.error;
  EXPECT_EQ(r.runs.at(0).ooms, r.oom_events.size());
  std::vector<std::uint64_t> oom_ops;
  for (const OomRecord& o : r.oom_events) oom_ops.push_back(o.event);
  const RunMetrics& m = r.runs.at(0);
  return {to_text(check_snapshot_run(*s, calls, oom_ops, m.allocs + m.frees + m.ooms, info.capacity_bytes)),
          to_text(check_snapshot_replay(*s, used, info.capacity_bytes, info.total_bytes))};
}

TEST(SnapshotCheck, TheRunsOwnDeviceCallsSayWhatASecondReplaySays) {
  std::ifstream f(testing::torch_snapshot_dir() + "/expected.json");
  ASSERT_TRUE(f);
  int yes = 0, no = 0, with_ooms = 0;
  for (const auto& run : nlohmann::json::parse(f)) {
    const std::string name = run.at("name");
    if (name == "snap_speed_120steps") continue;  // (snap_default's loop, longer)
    SCOPED_TRACE(name);
    const std::string path = testing::torch_snapshot_dir() + "/" + name + ".pickle.gz";
    const std::string conf = pytorch_snapshot_of(*open_trace(path))->alloc_conf;
    const Bytes card = run.at("total_memory").get<Bytes>();
    std::vector<std::pair<AllocatorOptions, DeviceSpec>> cases;
    AllocatorOptions own{{"alloc_conf", conf}};
    if (!run.at("memory_limit").is_null()) {
      AllocatorOptions limited = own;
      limited["memory_limit_bytes"] = std::to_string(run.at("memory_limit").get<Bytes>());
      cases.push_back({limited, DeviceSpec{DeviceChoice::Sim, card}});
    }
    cases.push_back({own, DeviceSpec{DeviceChoice::Sim, card}});
    cases.push_back({own, DeviceSpec{DeviceChoice::Sim, 6 * GiB}});  // a memory limit of 6 GiB: OOMs
    cases.push_back({{{"alloc_conf", "expandable_segments:True,max_split_size_mb:64"}}, DeviceSpec{DeviceChoice::Sim, card}});
    for (const auto& [options, device] : cases) {
      const BothChecks c = check_both_ways(path, options, device);
      EXPECT_EQ(c.from_run, c.from_replay) << "options " << options.at("alloc_conf") << ", capacity "
                                           << device.capacity_bytes;
      yes += c.from_run.find(": yes (") != std::string::npos;
      no += c.from_run.find(": no, ") != std::string::npos;
      with_ooms += c.from_run.find("OOM") != std::string::npos;
    }
  }
  // The comparison saw each kind of answer.
  EXPECT_GE(yes, 8);
  EXPECT_GE(no, 8);
  EXPECT_GE(with_ooms, 3);
}

// A request of 0 bytes is no allocator call: the calls after it are still mapped to their ops.
TEST(SnapshotCheck, TheRunsOwnDeviceCallsAreMappedPastAZeroByteRequest) {
  const std::string path = testing::source_path("tests/data/torch_snapshots/synthetic/zero_byte.pickle");
  const BothChecks whole = check_both_ways(path, {{"alloc_conf", ""}}, DeviceSpec{DeviceChoice::Sim, 0});
  EXPECT_EQ(whole.from_run, "reproduces the recorded run: yes (3 segment events and 0 OOMs, same sizes, same order)");
  EXPECT_EQ(whole.from_run, whole.from_replay);
  const BothChecks small = check_both_ways(path, {{"alloc_conf", ""}}, DeviceSpec{DeviceChoice::Sim, 24 * MiB});
  EXPECT_EQ(small.from_run,
            "reproduces the recorded run: no, first difference at segment event 2: recorded segment_alloc of 30.0 MiB "
            "(31457280 B) at trace entry 9, replayed segment_free of 2.0 MiB (2097152 B) before op 5 (trace entry 10)");
  EXPECT_EQ(small.from_run, small.from_replay);
}

TEST(RecordingDevice, ForgetsTheMapsOfAFailedMapCall) {
  SimDeviceOptions o;
  o.capacity_bytes = 4 * MiB;
  auto sim = make_sim_device(o);
  RecordingDevice rec(*sim);
  Bytes g = rec.vmm_granularity();
  auto base = rec.reserve_address_range(8 * g);
  ASSERT_TRUE(base);
  rec.set_mark(1);
  ASSERT_TRUE(rec.map(*base, g));
  rec.set_mark(2);
  bool ok = true;
  std::size_t mapped = 0;
  while (ok) {
    ok = rec.map(*base + (1 + mapped) * g, g);
    if (ok) ++mapped;
  }
  for (std::size_t i = 0; i < mapped; ++i) rec.unmap(*base + (1 + i) * g, g);
  ASSERT_EQ(rec.calls().size(), 1u);  // only the first, successful call's map
  EXPECT_EQ(rec.calls()[0].mark, 1u);
}

}  // namespace
}  // namespace gmb

TEST(RecordedAllocConf, TheOptionStringStaysWhereTheRecordedSettingsDecideAsItDoes) {
  gmb::TraceMeta m;
  m.alloc_conf = " roundup_power2_divisions:[256:4, >:8] , max_split_size_mb:128";
  // The reader's string with the settings put in: the same decisions in another spelling.
  m.alloc_conf_from_fields =
      "max_split_size_mb:128,roundup_power2_divisions:[1:4,2:4,4:4,8:4,16:4,32:4,64:4,128:4,256:4,512:8,1024:8,2048:8,"
      "4096:8,8192:8,16384:8,32768:8]";
  std::string note;
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), m.alloc_conf);
  EXPECT_EQ(note, "");
  // Nothing to check against: the string.
  m.alloc_conf_from_fields.reset();
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), m.alloc_conf);
  // The settings say expandable segments were on: they win, and the note says why.
  m.alloc_conf_from_fields = "expandable_segments:True,max_split_size_mb:128";
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), "expandable_segments:True,max_split_size_mb:128");
  EXPECT_NE(note.find("is not what the allocator ran with"), std::string::npos) << note;
  // Settings that make no string the allocator takes leave the recorded string as it is.
  note.clear();
  m.alloc_conf_from_fields = "max_split_size_mb:1";
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), m.alloc_conf);
  EXPECT_EQ(note, "");
  // So does a text the allocator does not take: its own error is what the user sees.
  m.alloc_conf = "max_split_size_mb:128]";
  m.alloc_conf_from_fields = "expandable_segments:True,max_split_size_mb:128";
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), "max_split_size_mb:128]");
  EXPECT_EQ(note, "");
  // Settings that say PyTorch's defaults are settings too: they win over a text that says otherwise.
  m.alloc_conf = "expandable_segments:True";
  m.alloc_conf_from_fields = "";
  EXPECT_EQ(gmb::recorded_alloc_conf(m, &note), "");
  EXPECT_NE(note.find("is not what the allocator ran with"), std::string::npos) << note;
}
