// The snapshot self-check (harness/run/snapshot_check.h): a recorded run replayed through `caching`
// with its own settings gives "yes"; a replay that differs names the first difference.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "devices/recording_device.h"
#include "harness/run/snapshot_check.h"
#include "test_helpers.h"

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
