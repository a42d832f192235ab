// `gpumembench replay` on PyTorch snapshots, as a user runs it: the settings and capacity it
// says it used, the self-check line, --trace-device, --export-snapshot, and exit 2 with the
// place named for bad input.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cmath>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "test_helpers.h"
#include "workloads/pickle/pickle_writer.h"

namespace gmb {
namespace {

using testing::run_gpumembench;
using testing::source_path;
using testing::temp_dir;

std::string synthetic(const std::string& name) { return source_path("tests/data/torch_snapshots/synthetic/" + name); }
std::string recorded(const std::string& name) { return source_path("tests/data/torch_snapshots/" + name + ".pickle.gz"); }

bool has(const std::string& out, const std::string& part) { return out.find(part) != std::string::npos; }

TEST(CliSnapshot, UsesTheSnapshotsOwnSettingsAndSaysSo) {
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("basic.pickle"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "replaying device 0, the only one in the snapshot")) << r.out;
  EXPECT_TRUE(has(r.out, "allocator settings: the recorded \"\" (--alloc-conf replaces them)"));
  // The note gives the capacity the replay runs at: the table's heading says the same.
  EXPECT_TRUE(has(r.out, "capacity: 139.80 GiB, the simulated device's default (an H200's whole memory): a snapshot "
                         "records neither the device's size nor a memory fraction")) << r.out;
  EXPECT_TRUE(has(r.out, "\n### trace[basic.pickle] @ 139.80 GiB\n")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes (3 segment events and 0 OOMs, same sizes, same order) (on the "
                         "simulated device)"));
  EXPECT_TRUE(has(r.out, "\n### trace[basic.pickle] @ ")) << r.out;
  EXPECT_TRUE(has(r.out, "\n| caching | 52.0 MiB | 32.9 MiB |")) << r.out;
}

TEST(CliSnapshot, TheRecordedSettingsWinOverAStaleOptionString) {
  // The option string says max_split_size_mb:128 alone; the allocator ran with expandable
  // segments on (set_allocator_settings keeps them), as its settings and its mapped segments say.
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("stale_conf_text.pickle"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "the recorded option string \"max_split_size_mb:128,max_non_split_rounding_mb:256\" is not what "
                         "the allocator ran with: the settings it records one by one say \"max_non_split_rounding_mb:256,"
                         "expandable_segments:True,max_split_size_mb:128\"")) << r.out;
  EXPECT_TRUE(has(r.out, "allocator settings: the recorded \"max_non_split_rounding_mb:256,expandable_segments:True,"
                         "max_split_size_mb:128\" (--alloc-conf replaces them)")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes")) << r.out;
  // The stale string alone is a what-if, not the recorded run.
  auto w = run_gpumembench("replay --device sim --allocator caching --alloc-conf max_split_size_mb:128 --trace " +
                           synthetic("stale_conf_text.pickle"));
  ASSERT_EQ(w.status, 0) << w.out;
  EXPECT_FALSE(has(w.out, "reproduces the recorded run")) << w.out;
  // Where the string and the settings agree, the string is kept as written, with no note.
  auto k = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("expandable_oom.pickle"));
  ASSERT_EQ(k.status, 0) << k.out;
  EXPECT_TRUE(has(k.out, "allocator settings: the recorded \"expandable_segments:True,max_split_size_mb:128\"")) << k.out;
  EXPECT_FALSE(has(k.out, "is not what the allocator ran with")) << k.out;
}

TEST(CliSnapshot, AnotherSettingIsAWhatIfWithoutSelfCheck) {
  auto r = run_gpumembench("replay --device sim --allocator caching --alloc-conf expandable_segments:True --capacity 1GiB "
                           "--trace " + synthetic("basic.pickle"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "allocator settings: \"expandable_segments:True\" (--alloc-conf); the recorded ones are \"\""));
  EXPECT_TRUE(has(r.out, "\n| caching[expandable_segments:True] | ")) << r.out;
  EXPECT_FALSE(has(r.out, "reproduces the recorded run"));
  auto m = run_gpumembench("replay --device sim --allocator cuda_malloc --trace " + synthetic("expandable_oom.pickle"));
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_TRUE(has(m.out, "the recorded allocator settings \"expandable_segments:True,max_split_size_mb:128\" are the "
                         "caching allocator's; not used by cuda_malloc"));
}

TEST(CliSnapshot, RealRecordingUnderAMemoryFractionReproducesItsOoms) {
  // Recorded on the H200 (143,771 MiB) under set_per_process_memory_fraction = 16 GiB.
  auto r = run_gpumembench("replay --device sim --allocator caching --capacity 150109880320 --memory-limit 16GiB --trace " +
                           recorded("snap_oom_cap16g_expandable"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "2 recorded OOMs: each is replayed as an allocation of its size"));
  EXPECT_TRUE(has(r.out, "recorded run: 2 failed allocations (events 16111, 59591); replayed: 2 OOMs (first at event 16111)"))
      << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes (166 segment events and 2 OOMs, same sizes, same order)")) << r.out;
}

// --capacity alone is the same memory fraction of a larger card (caching_allocator.h): the run
// and its self-check both model the limit and the room above it. The self-check once replayed
// on a card of the capacity without the limit and said "no" to a run that gave PyTorch's own
// figures (159 cudaMallocs and 7 frees, 2 OOMs).
TEST(CliSnapshot, ACapacityAloneIsTheLimitTheSelfCheckReplaysUnderToo) {
  auto r = run_gpumembench("replay --device sim --allocator caching --capacity 16GiB --trace " +
                           recorded("snap_oom_cap16g_expandable"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "| caching[expandable_segments:True] | 15.56 GiB | 15.28 GiB | 2.7% | 159 | 7 |")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes (166 segment events and 2 OOMs, same sizes, same order)")) << r.out;
}

// Under a memory fraction the OOM is judged against the fraction, not the card: this run needs
// 16.20 GiB of live tensors later on, more than the 16 GiB PyTorch was allowed, so no allocator
// could have run it there (a capacity OOM), although the card had 124 GiB free.
TEST(CliSnapshot, AnOomUnderAMemoryFractionIsJudgedAgainstTheFraction) {
  auto r = run_gpumembench("replay --device sim --allocator caching --capacity 150109880320 --memory-limit 16GiB --trace " +
                           recorded("snap_oom_cap16g"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "| capacity | needs at least 16.20 GiB (short by 209.0 MiB) |")) << r.out;
  EXPECT_FALSE(has(r.out, "fits with a non-fragmenting allocator")) << r.out;
}

// The same recording in a config: the trace's `memory_limit:` is the caching allocator's limit,
// as --memory-limit is in a replay; cuda_malloc has the whole card and fits.
TEST(CliSnapshot, AConfigTraceCarriesTheRecordedMemoryLimit) {
  auto dir = temp_dir("trace_limit");
  testing::write_text(dir / "c.yaml", "name: limit\ndevice: {capacity: 150109880320}\n"
                                      "allocators: [caching, cuda_malloc]\nrun: {on_oom: continue}\n"
                                      "workloads:\n  - trace: {path: " + recorded("snap_oom_cap16g") +
                                          ", memory_limit: 16GiB}\n");
  auto r = run_gpumembench("--device sim --config " + (dir / "c.yaml").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "memory limit 16.00 GiB (memory_limit): the caching allocator's")) << r.out;
  EXPECT_TRUE(has(r.out, "### trace[snap_oom_cap16g.pickle.gz] @ 139.80 GiB")) << r.out;
  EXPECT_TRUE(has(r.out, "| caching[memory_limit_bytes=17179869184] |")) << r.out;
  EXPECT_TRUE(has(r.out, "capacity at step 0 (event 16111, 945.3 MiB), 2 OOMs (0 fragmentation, 2 capacity) |")) << r.out;
  EXPECT_TRUE(has(r.out, "| cuda_malloc | 16.35 GiB (modeled) | 16.20 GiB |")) << r.out;

  testing::write_text(dir / "bad.yaml", "name: bad\nallocators: [caching]\nworkloads:\n  - trace: {path: " +
                                            recorded("snap_oom_cap16g") + ", memory_limit: 0}\n");
  auto bad = run_gpumembench("--device sim --config " + (dir / "bad.yaml").string());
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_TRUE(has(bad.out, "memory_limit")) << bad.out;
  testing::write_text(dir / "above.yaml", "name: above\ndevice: {capacity: [20GiB, 8GiB]}\nallocators: [caching]\n"
                                          "workloads:\n  - trace: {path: " + recorded("snap_oom_cap16g") +
                                              ", memory_limit: 16GiB}\n");
  bad = run_gpumembench("--device sim --config " + (dir / "above.yaml").string());
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_TRUE(has(bad.out, "key 'workloads[0].trace.memory_limit': 16.00 GiB is more than the device's capacity 8.00 GiB"))
      << bad.out;
  std::filesystem::remove_all(dir);
}

// A config's caching case with the snapshot's own settings gives PyTorch's own figures, as
// replay does (segments where the driver put them); with other settings it is a what-if.
TEST(CliSnapshot, AConfigCaseWithTheRecordedSettingsGivesPyTorchsFigures) {
  auto dir = temp_dir("trace_own_settings");
  testing::write_text(dir / "c.yaml", "name: own\ndevice: {capacity: 150109880320}\nrun: {on_oom: continue}\n"
                                      "allocators:\n  - caching: {alloc_conf: \"roundup_power2_divisions:4\"}\n"
                                      "workloads:\n  - trace: {path: " + recorded("snap_roundup4") + "}\n");
  auto r = run_gpumembench("--device sim --config " + (dir / "c.yaml").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "the recorded allocator settings \"roundup_power2_divisions:4\": a caching entry with these "
                         "as its alloc_conf (or others of the same effect) replays the recorded run")) << r.out;
  // PyTorch's memory_stats at the end of the recording (expected.json): 22,236,102,656 B, 134 cudaMallocs.
  EXPECT_TRUE(has(r.out, "| caching[roundup_power2_divisions:4] | 20.71 GiB | 17.92 GiB | 13.5% | 134 | 0 |")) << r.out;
  auto results = nlohmann::json::parse(testing::read_text(dir / "out" / "results.json"));
  EXPECT_EQ(results["cases"][0]["peak_reserved_bytes"].get<std::uint64_t>(), 22236102656u);
  EXPECT_EQ(results["cases"][0]["device_mallocs"].get<std::uint64_t>(), 134u);
  // The same settings spelled otherwise are the recorded run too, in a config and in replay.
  testing::write_text(dir / "s.yaml", "name: spelt\ndevice: {capacity: 150109880320}\nrun: {on_oom: continue}\n"
                                      "allocators:\n  - caching: {alloc_conf: \"roundup_power2_divisions: 4,backend:native\"}\n"
                                      "workloads:\n  - trace: {path: " + recorded("snap_roundup4") + "}\n");
  r = run_gpumembench("--device sim --config " + (dir / "s.yaml").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "| 20.71 GiB | 17.92 GiB | 13.5% | 134 | 0 |")) << r.out;
  r = run_gpumembench("replay --device sim --allocator caching --capacity 150109880320 --alloc-conf "
                      "'backend:native,roundup_power2_divisions: 4' --trace " + recorded("snap_roundup4"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes (134 segment events")) << r.out;
  // Recorded defaults: a plain caching entry is the recorded run, and the notes say so.
  testing::write_text(dir / "d.yaml", "name: defaults\ndevice: {capacity: 150109880320}\nallocators: [caching]\n"
                                      "workloads:\n  - trace: {path: " + recorded("snap_default") + "}\n");
  r = run_gpumembench("--device sim --config " + (dir / "d.yaml").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "the recorded allocator settings are PyTorch's defaults: a caching entry without alloc_conf "
                         "(or with one of the same effect) replays the recorded run")) << r.out;
  std::filesystem::remove_all(dir);
}

// A segment in `segments` the trace never reserved was cached before its first entry: the trace
// does not start with the allocator, the self-check cannot know, and the notes say what the
// replay leaves out. A block alive at the start whose free the trace requests (still pending) is
// that block, not a second one at its address.
TEST(CliSnapshot, SegmentsFromBeforeTheTraceAreNamedAndNotSelfChecked) {
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("cached_segment.pickle"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "1 segments or ranges (1.00 GiB) were reserved before the trace's first entry (listed in "
                         "the snapshot's segments, freed or unmapped, with no segment_alloc or segment_map of them in "
                         "the trace)")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: not checked (the trace does not start with the allocator (1 "
                         "segments were reserved before its first entry))")) << r.out;
  // A segment freed (empty_cache) that the trace never reserved, and the part of an expandable
  // segment mapped before it: reserved before the first entry too.
  const std::pair<std::string, std::string> before[] = {{"freed_before.pickle", "1 segments or ranges (1.00 GiB)"},
                                                        {"partly_mapped_before.pickle", "1 segments or ranges (20.0 MiB)"}};
  for (const auto& [file, note] : before) {
    r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic(file));
    EXPECT_EQ(r.status, 0) << r.out;
    EXPECT_TRUE(has(r.out, note + " were reserved before the trace's first entry")) << r.out;
    EXPECT_TRUE(has(r.out, "reproduces the recorded run: not checked (the trace does not start with the allocator (1 "
                           "segments were reserved before its first entry))")) << r.out;
  }
  r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("pending_free_at_start.pickle"));
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "1 blocks were alive before the trace's first entry")) << r.out;
  EXPECT_TRUE(has(r.out, "1 blocks were freed but not yet returned when the snapshot was taken")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: not checked")) << r.out;
}

// record_stream: a block freed while another stream still uses it. PyTorch's allocated bytes drop
// at its free_requested, its memory returns at free_completed. freed_at_peak (make_test_snapshots.py):
// 8 MiB freed, then 6 and 2 MiB allocated beside it before it returns: PyTorch's peak allocated is
// 8 MiB, one 20 MiB segment. cuda_malloc counts the block until its memory returns (16 MiB).
TEST(CliSnapshot, ABlockFreedWhileAnotherStreamUsesItStopsCountingAtItsFree) {
  auto dir = temp_dir("freed_at_peak");
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("freed_at_peak.pickle") +
                           " --output " + (dir / "out").string() + " --export-snapshot " + (dir / "e.pickle").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "\n| caching | 20.0 MiB | 8.0 MiB |")) << r.out;
  EXPECT_TRUE(has(r.out, "1 blocks returned to the allocator later than their free was requested")) << r.out;
  EXPECT_TRUE(has(r.out, "1 blocks were freed but not yet returned when the snapshot was taken")) << r.out;
  EXPECT_TRUE(has(r.out, "reproduces the recorded run: yes (1 segment events and 0 OOMs")) << r.out;
  auto results = nlohmann::json::parse(testing::read_text(dir / "out" / "results.json"));
  EXPECT_EQ(results["cases"][0]["peak_allocated_bytes"].get<std::uint64_t>(), 8u << 20);
  EXPECT_EQ(results["cases"][0]["peak_reserved_bytes"].get<std::uint64_t>(), 20u << 20);
  // The export keeps each free request where it was: read back, the same figures and the same
  // block freed and not returned at the end.
  auto back = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "e.pickle").string());
  ASSERT_EQ(back.status, 0) << back.out;
  EXPECT_TRUE(has(back.out, "\n| caching | 20.0 MiB | 8.0 MiB |")) << back.out;
  EXPECT_TRUE(has(back.out, "1 blocks returned to the allocator later than their free was requested")) << back.out;
  EXPECT_TRUE(has(back.out, "1 blocks were freed but not yet returned when the snapshot was taken")) << back.out;
  EXPECT_TRUE(has(back.out, "reproduces the recorded run: yes (1 segment events")) << back.out;
  auto m = run_gpumembench("replay --device sim --allocator cuda_malloc --trace " + synthetic("freed_at_peak.pickle"));
  ASSERT_EQ(m.status, 0) << m.out;
  EXPECT_TRUE(has(m.out, "\n| cuda_malloc | 16.0 MiB (modeled) | 16.0 MiB |")) << m.out;
  std::filesystem::remove_all(dir);
}

// Under a smaller card the second 1 GiB request finds no room until the first block, freed while
// another stream used it, comes back: PyTorch waits for that stream before it gives up, and so
// does the replay. The export writes that block's free_completed inside the request (before the
// segment it frees and the one the request gets), as PyTorch's trace does, and nothing at its
// recorded return; it marks it (gpumembench_taken_back), so our reader replays it after the
// request, where the replay takes the block back again: the export reads back as the same run.
TEST(CliSnapshot, ARequestThatWouldFailTakesBackABlockWaitingOnAnotherStream) {
  auto dir = temp_dir("taken_back");
  auto r = run_gpumembench("replay --device sim --allocator caching --capacity 1600MiB --trace " +
                           synthetic("taken_back.pickle") + " --export-snapshot " + (dir / "e.pickle").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "\n| caching | 1024.0 MiB | 1024.0 MiB | 0.0% | 2 | 1 |")) << r.out;
  EXPECT_TRUE(has(r.out, "| none |")) << r.out;
  auto back = run_gpumembench("replay --device sim --allocator caching --capacity 1600MiB --trace " +
                              (dir / "e.pickle").string());
  ASSERT_EQ(back.status, 0) << back.out;
  EXPECT_TRUE(has(back.out, "\n| caching | 1024.0 MiB | 1024.0 MiB | 0.0% | 2 | 1 |")) << back.out;
  EXPECT_TRUE(has(back.out, "reproduces the recorded run: yes (3 segment events and 0 OOMs")) << back.out;
  std::filesystem::remove_all(dir);
}

TEST(CliSnapshot, PicksTheTraceDevice) {
  auto r = run_gpumembench("replay --device sim --allocator caching --trace-device 0 --trace " + synthetic("two_devices.pickle"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "replaying device 0 (--trace-device) (the snapshot has: device 0 (3 events), device 1 (10 events)"));
  // The OOM message names the replayed GPU as PyTorch's did on it (1 MiB holds no segment).
  for (const char* d : {"0", "1"}) {
    auto small = run_gpumembench(std::string("replay --device sim --allocator caching --capacity 1MiB --trace-device ") + d +
                                 " --trace " + synthetic("two_devices.pickle"));
    ASSERT_EQ(small.status, 0) << small.out;
    EXPECT_TRUE(has(small.out, std::string("Tried to allocate 2.00 MiB. GPU ") + d + " has a total capacity")) << small.out;
  }
  auto bad = run_gpumembench("replay --device sim --allocator caching --trace-device 5 --trace " + synthetic("two_devices.pickle"));
  EXPECT_EQ(bad.status, 2);
  EXPECT_TRUE(has(bad.out, "two_devices.pickle: --trace-device: device 5 has no events and no segments in this snapshot"))
      << bad.out;
  auto dir = temp_dir("snapcli");
  testing::write_text(dir / "t.csv", "action,id,bytes\nalloc,0,100\n");
  auto csv = run_gpumembench("replay --device sim --allocator caching --trace-device 0 --trace " + (dir / "t.csv").string());
  EXPECT_EQ(csv.status, 2);
  EXPECT_TRUE(has(csv.out, "--trace-device applies to PyTorch snapshots")) << csv.out;
}

TEST(CliSnapshot, BadSnapshotsExitTwoNamingThePlace) {
  auto dir = temp_dir("snapbad");
  // Truncated pickle.
  std::string whole = testing::read_text(synthetic("basic.pickle"));
  std::ofstream(dir / "cut.pickle", std::ios::binary) << whole.substr(0, 700);
  auto r = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "cut.pickle").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_TRUE(has(r.out, "cut.pickle: byte 2: FRAME of 1885 bytes but only 689 are left (truncated file?)")) << r.out;
  // A refused opcode.
  auto g = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("refused_set_p2.pickle"));
  EXPECT_EQ(g.status, 2);
  EXPECT_TRUE(has(g.out, "refused_set_p2.pickle: byte 15: opcode GLOBAL ('c') is refused")) << g.out;
  // The wrong type somewhere inside.
  const char bad_pickle[] = "\x80\x02}(X\x08\0\0\0segments](}(X\x07\0\0\0addressK\x00X\x06\0\0\0blocksX\x01\0\0\0xueu.";
  std::string bad_type(bad_pickle, sizeof bad_pickle - 1);
  std::ofstream(dir / "type.pickle", std::ios::binary) << bad_type;
  auto t = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "type.pickle").string());
  EXPECT_EQ(t.status, 2);
  EXPECT_TRUE(has(t.out, "type.pickle: segments[0].blocks: expected a list, found str")) << t.out;
  // A gzip stream cut short.
  std::string gz = testing::read_text(recorded("snap_frames_p2"));
  std::ofstream(dir / "cut.pickle.gz", std::ios::binary) << gz.substr(0, gz.size() / 2);
  auto z = run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "cut.pickle.gz").string());
  EXPECT_EQ(z.status, 2);
  EXPECT_TRUE(has(z.out, "cut.pickle.gz: byte ")) << z.out;
  for (const auto* o : {&r, &g, &t, &z})
    for (char c : o->out) ASSERT_TRUE(c == '\n' || (c >= 0x20 && c < 0x7f)) << o->out;
}

// A config's trace of GPU 1 (the device with the most events) names GPU 1 in its OOM messages, as replay does.
TEST(CliSnapshot, AConfigTraceNamesTheRecordedGpu) {
  auto dir = temp_dir("trace_gpu");
  testing::write_text(dir / "c.yaml", "name: gpu1\ndevice: {capacity: 1MiB}\nallocators: [caching]\n"
                                      "run: {on_oom: continue}\nworkloads:\n  - trace: {path: " +
                                          synthetic("two_devices.pickle") + "}\n");
  auto r = run_gpumembench("--device sim -q --config " + (dir / "c.yaml").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  const std::string results = testing::read_text(dir / "out" / "results.json");
  EXPECT_TRUE(has(results, "GPU 1 has a total capacity")) << results.substr(0, 3000);
  EXPECT_FALSE(has(results, "GPU 0 has")) << results.substr(0, 3000);
}

TEST(CliSnapshot, AnAllocatorWhoseRunIsNoSnapshotIsRefusedBeforeRunning) {
  auto dir = temp_dir("snapcli_vmm");
  auto r = run_gpumembench("replay --device sim --allocator vmm_stitch --trace " + synthetic("basic.pickle") +
                           " --export-snapshot " + (dir / "v.pickle").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_TRUE(has(r.out, "--export-snapshot: a run of vmm_stitch is not a PyTorch snapshot (it maps physical pieces "
                         "into ranges of its own); it writes the runs of cuda_malloc,")) << r.out;
  EXPECT_FALSE(std::filesystem::exists(dir / "v.pickle"));
}

TEST(CliSnapshot, ExportsTheSimulatedRunAsASnapshot) {
  auto dir = temp_dir("snapexport");
  std::string out = (dir / "whatif.pickle").string();
  auto r = run_gpumembench("replay --device sim --allocator caching --alloc-conf expandable_segments:True --trace " +
                           recorded("snap_frames_p2") + " --export-snapshot " + out);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(has(r.out, "the simulated run written as a PyTorch snapshot to " + out)) << r.out;
  // Read back by our own reader: the same ops, PyTorch's shape.
  auto back = run_gpumembench("replay --device sim --allocator caching --trace " + out);
  ASSERT_EQ(back.status, 0) << back.out;
  EXPECT_TRUE(has(back.out, "allocator settings: the recorded \"expandable_segments:True\" (--alloc-conf replaces them)")) << back.out;
  EXPECT_TRUE(has(back.out, "reproduces the recorded run: yes")) << back.out;
  auto unwritable = run_gpumembench("replay --device sim --allocator caching --trace " + synthetic("basic.pickle") +
                                    " --export-snapshot /nonexistent-dir/x.pickle");
  EXPECT_EQ(unwritable.status, 2);
  // Found before the replay runs.
  EXPECT_TRUE(has(unwritable.out, "--export-snapshot /nonexistent-dir/x.pickle: the folder /nonexistent-dir does not exist"))
      << unwritable.out;
}

// Four recorded PyTorch snapshots replayed through a cudaMemPool (`--allocator cuda_mempool`):
// the sim's peak reserved bytes against the H200's (the same command with --device cuda, one
// run each, results/h200/probe/pool/README.md). Equal to the byte on all four, the two-stream one
// included (session 9's model: -1.1%, -1.1%, -1.0% and +1.1%; its call log judged request by
// request: results/h200/probe/pool/early/).
TEST(CliSnapshot, ThroughTheMemPoolReservesWhatTheH200Reserved) {
  const struct {
    const char* name;
    double h200_peak_reserved;
  } runs[] = {{"snap_default", 20535312384.0},
              {"snap_max_split128", 20535312384.0},
              {"snap_oom_cap16g", 19964887040.0},
              {"snap_two_streams", 9428795392.0}};
  for (const auto& run : runs) {
    SCOPED_TRACE(run.name);
    const auto dir = temp_dir("mempool_snapshot");
    auto r = run_gpumembench("replay --quiet --device sim --allocator cuda_mempool --format json --output " + dir.string() +
                             " --trace " + recorded(run.name));
    ASSERT_EQ(r.status, 0) << r.out;
    std::ifstream f(dir / "results.json");
    ASSERT_TRUE(f) << dir / "results.json";
    const double sim = nlohmann::json::parse(f).at("cases").at(0).at("peak_reserved_bytes").get<double>();
    const double diff = 100.0 * (sim - run.h200_peak_reserved) / run.h200_peak_reserved;
    std::printf("[mempool-snapshot] %s: peak reserved H200 %.0f, sim %.0f (%+.2f%%)\n", run.name, run.h200_peak_reserved,
                sim, diff);
    EXPECT_EQ(sim, run.h200_peak_reserved);
    std::filesystem::remove_all(dir);
  }
}

}  // namespace
}  // namespace gmb

namespace {

// Input that is no UTF-8 or that a terminal would act on (found by a fuzzing helper): a frame's
// file name with a byte 0xff gave an internal error (exit 1: results.json could not be written)
// and left the other outputs behind; now the run is a run (exit 0), results.json is valid JSON and
// no table holds the raw byte. A config naming an allocator with an escape sequence is refused
// with the sequence escaped.
TEST(CliSnapshot, InputThatIsNoUtf8OrMovesTheTerminalReachesNeitherFilesNorTerminalRaw) {
  namespace fs = std::filesystem;
  const fs::path dir = gmb::testing::temp_dir("not_utf8");
  auto r = gmb::testing::run_gpumembench(
      "replay --device sim -q --trace " +
      gmb::testing::source_path("tests/data/torch_snapshots/synthetic/frames_not_utf8.pickle") +
      " --allocator caching --capacity 40MiB --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find('\xff'), std::string::npos);
  EXPECT_NE(r.out.find("tr\\xffin.py:12"), std::string::npos) << r.out;
  const std::string json = gmb::testing::read_text(dir / "out" / "results.json");
  EXPECT_TRUE(nlohmann::json::accept(json));
  EXPECT_EQ(gmb::testing::read_text(dir / "out" / "results.md").find('\xff'), std::string::npos);

  gmb::testing::write_text(dir / "c.yaml",
                           "name: c\ndevice: {capacity: 1GiB}\nallocators:\n  - \"cuda_m\\e[2Jalloc\"\n"
                           "workloads:\n  - hole_pattern: {sizes: [100MiB], free: [0], probe: 150MiB, repeat: 1}\n");
  r = gmb::testing::run_gpumembench("plan --device sim --config " + (dir / "c.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("unknown allocator 'cuda_m\\x1b[2Jalloc'"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

}  // namespace

namespace {

// A snapshot with a trace and no allocator_settings (as older PyTorch wrote them): the replay uses
// PyTorch's defaults, which may not be the run's, and the self-check says so instead of nothing.
TEST(CliSnapshot, ASnapshotWithoutSettingsIsNotCheckedAndSaysWhy) {
  std::string bytes;
  gmb::pickle::Writer w(bytes);
  w.begin_dict();
  w.key("segments");
  w.begin_list();
  w.end_list();
  w.key("device_traces");
  w.begin_list();
  w.begin_list();
  for (const char* action : {"segment_alloc", "alloc", "free_requested", "free_completed"}) {
    w.begin_dict();
    w.key("action");
    w.str(action);
    w.key("addr");
    w.integer(std::int64_t(1) << 40);
    w.key("size");
    w.integer(std::string(action) == "segment_alloc" ? 2 << 20 : 512 << 10);
    w.key("stream");
    w.integer(0);
    w.end_dict();
  }
  w.end_list();
  w.end_list();
  w.end_dict();
  w.finish();
  const auto dir = gmb::testing::temp_dir("no_settings");
  gmb::testing::write_text(dir / "old.pickle", bytes);
  auto r = gmb::testing::run_gpumembench("replay --device sim --allocator caching --trace " + (dir / "old.pickle").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("reproduces the recorded run: not checked (the snapshot records no allocator settings: replayed "
                       "with PyTorch's defaults, which may not be the run's)"),
            std::string::npos)
      << r.out;
  // Without a trace (a bare list of segments, the oldest form) it says that.
  r = gmb::testing::run_gpumembench("replay --device sim --allocator caching --trace " +
                                    gmb::testing::source_path("tests/data/torch_snapshots/synthetic/legacy_list.pickle"));
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("reproduces the recorded run: not checked (the snapshot has no trace)"), std::string::npos) << r.out;
  // With settings given the replay is a what-if: no line.
  r = gmb::testing::run_gpumembench("replay --device sim --allocator caching --alloc-conf expandable_segments:True --trace " +
                                    (dir / "old.pickle").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("reproduces the recorded run"), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
