// --export-snapshot (harness/export/snapshot_export.h): the simulated run as a PyTorch snapshot that
// our own reader reads back as the same ops, and that PyTorch's allocator would have recorded.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include "harness/run/snapshot_check.h"
#include "harness/export/snapshot_export.h"
#include "test_helpers.h"
#include "workloads/pytorch_snapshot.h"

namespace gmb {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using SnapshotOps = decltype(PyTorchSnapshot::ops);

OpReader reader_of(const SnapshotOps& ops) {
  auto at = std::make_shared<std::size_t>(0);
  return [&ops, at](std::vector<Op>& out, std::size_t max) {
    std::size_t n = std::min(max, ops.size() - *at);
    ops.append_to(out, *at, n);
    *at += n;
    return n;
  };
}

std::string ops_text(const SnapshotOps& ops) {
  std::string out;
  for (const Op& op : ops)
    out += op.kind == Op::Kind::Alloc ? fmt::format("a{}:{}@{} ", op.id, op.bytes, op.stream) : fmt::format("f{} ", op.id);
  return out;
}

TEST(SnapshotExport, ReadsBackAsTheSameOpsAndSegmentEvents) {
  PyTorchSnapshot s = convert_pytorch_snapshot(
      slurp(testing::source_path("tests/data/torch_snapshots/synthetic/two_streams.pickle")), "two_streams.pickle");
  auto dir = testing::temp_dir("export");
  std::string path = (dir / "out.pickle").string();
  AllocatorOptions options{{"alloc_conf", s.alloc_conf}};
  SnapshotExportSummary sum = export_snapshot(path, reader_of(s.ops), "caching", options, 0);
  EXPECT_EQ(sum.ooms, 0u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  PyTorchSnapshot back = convert_pytorch_snapshot(slurp(path), "out.pickle");
  EXPECT_EQ(ops_text(back.ops), ops_text(s.ops));
  EXPECT_EQ(back.alloc_conf, "");
  EXPECT_TRUE(back.has_alloc_conf);
  EXPECT_EQ(back.blocks_alive_at_start, 0u);
  // The recorded run was PyTorch's decisions; so is the export.
  ASSERT_EQ(back.segment_events.size(), s.segment_events.size());
  for (std::size_t i = 0; i < s.segment_events.size(); ++i) {
    EXPECT_EQ(back.segment_events[i].kind, s.segment_events[i].kind);
    EXPECT_EQ(back.segment_events[i].bytes, s.segment_events[i].bytes);
    EXPECT_EQ(back.segment_events[i].before_op, s.segment_events[i].before_op);
  }
  EXPECT_EQ(to_text(check_snapshot_replay(back, options, 0)),
            "reproduces the recorded run: yes (2 segment events and 0 OOMs, same sizes, same order)");
}

TEST(SnapshotExport, KeepsOomsOriginsAndExpandableMaps) {
  PyTorchSnapshot s = convert_pytorch_snapshot(
      slurp(testing::source_path("tests/data/torch_snapshots/synthetic/expandable_oom.pickle")), "expandable_oom.pickle");
  auto dir = testing::temp_dir("export");
  std::string path = (dir / "oom.pickle").string();
  AllocatorOptions options{{"alloc_conf", s.alloc_conf}};
  auto origin = [&](const Op& op) { return op.kind == Op::Kind::Alloc && op.bytes == 64 * MiB ? "train.py:52 in forward" : ""; };
  SnapshotExportSummary sum = export_snapshot(path, reader_of(s.ops), "caching", options, 80 * MiB, origin);
  EXPECT_EQ(sum.ooms, 1u);
  PyTorchSnapshot back = convert_pytorch_snapshot(slurp(path), "oom.pickle");
  EXPECT_EQ(back.alloc_conf, "expandable_segments:True,max_split_size_mb:128");
  ASSERT_EQ(back.ooms.size(), 1u);
  EXPECT_EQ(back.origins[back.op_origin[back.ooms[0].op]], "train.py:52 in forward");
  EXPECT_EQ(ops_text(back.ops), ops_text(s.ops));
  EXPECT_EQ(to_text(check_snapshot_replay(back, options, 80 * MiB)),
            "reproduces the recorded run: yes (2 segment events and 1 OOMs, same sizes, same order)");
}

// A run at a tight --capacity with expandable segments: maps fail and take back their pages, and
// the memory limit --capacity sets decides. The export is that run: read back with its own
// settings at the same capacity it gives the same figures and reproduces itself, event for
// event (it used to drop an op's device calls after a failed map, and to replay without the
// limit: "no, first difference at segment event 162").
TEST(SnapshotExport, ATightExpandableRunReadsBackAsItselfAndSelfChecks) {
  const auto dir = testing::temp_dir("export_tight");
  const std::string exported = (dir / "e.pickle").string();
  const std::string row =
      "| caching[expandable_segments:True] | 15.56 GiB | 15.28 GiB | 2.7% | 159 | 7 | 99.5% | 100.00% (modeled) | "
      "capacity at step 0 (event 16111, 945.3 MiB), 2 OOMs (0 fragmentation, 2 capacity) |";
  auto r = testing::run_gpumembench(
      "replay --device sim -q --allocator caching --capacity 16GiB --trace " +
      testing::source_path("tests/data/torch_snapshots/snap_oom_cap16g_expandable.pickle.gz") + " --export-snapshot " +
      exported);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(row), std::string::npos) << r.out;
  r = testing::run_gpumembench("replay --device sim -q --allocator caching --capacity 16GiB --trace " + exported);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find(row), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("reproduces the recorded run: yes (166 segment events and 2 OOMs, same sizes, same order)"),
            std::string::npos)
      << r.out;
  // One segment_map per range mapped, as PyTorch records them (the sim maps 20 MiB pages): as many
  // as the table's device mallocs, and the unmaps as its frees.
  const std::string bytes = testing::read_text(exported);
  const PyTorchSnapshot back = convert_pytorch_snapshot(bytes, exported);
  std::size_t maps = 0, unmaps = 0;
  for (const RecordedSegmentEvent& e : back.segment_events) {
    maps += e.kind == RecordedSegmentEvent::Kind::Map;
    unmaps += e.kind == RecordedSegmentEvent::Kind::Unmap;
  }
  EXPECT_EQ(maps, 159u);
  EXPECT_EQ(unmaps, 7u);
  std::filesystem::remove_all(dir);
}

// Requests of 0 bytes, two of them live at once, through `caching` (no call) and `cuda_malloc` (a
// cudaMalloc of 0 bytes): no entry for them, and the export reads back as the other ops.
TEST(SnapshotExport, LeavesOutZeroByteRequests) {
  PackedOps ops;
  auto op = [](Op::Kind kind, BufferId id, Bytes bytes) {
    Op o;
    o.kind = kind;
    o.id = id;
    o.bytes = bytes;
    return o;
  };
  ops.push_back(op(Op::Kind::Alloc, 0, 0));
  ops.push_back(op(Op::Kind::Alloc, 1, 0));
  ops.push_back(op(Op::Kind::Alloc, 2, 4096));
  ops.push_back(op(Op::Kind::Free, 0, 0));
  ops.push_back(op(Op::Kind::Free, 2, 0));
  ops.push_back(op(Op::Kind::Free, 1, 0));
  auto dir = testing::temp_dir("export_zero");
  for (const char* allocator : {"caching", "cuda_malloc"}) {
    SCOPED_TRACE(allocator);
    const std::string path = (dir / (std::string(allocator) + ".pickle")).string();
    const SnapshotExportSummary sum = export_snapshot(path, reader_of(ops), allocator, {}, 0);
    // segment_alloc, alloc, free_requested, free_completed, and cuda_malloc's segment_free.
    EXPECT_EQ(sum.entries, std::string(allocator) == "caching" ? 4u : 5u);
    const PyTorchSnapshot back = convert_pytorch_snapshot(slurp(path), "back.pickle");
    EXPECT_EQ(ops_text(back.ops), "a0:4096@0 f0 ");
  }
}

// cuda_malloc gives each block back to the driver at its free: the segment_free follows the
// free_completed, so the read-back sees no free that waited on another stream.
TEST(SnapshotExport, ASegmentFreeFollowsTheFreeThatMadeIt) {
  PackedOps ops;
  for (BufferId id = 0; id < 3; ++id) {
    Op a;
    a.kind = Op::Kind::Alloc;
    a.id = id;
    a.bytes = 3 * MiB;
    ops.push_back(a);
  }
  for (BufferId id = 0; id < 3; ++id) {
    Op f;
    f.kind = Op::Kind::Free;
    f.id = id;
    ops.push_back(f);
  }
  auto dir = testing::temp_dir("export_segfree");
  const std::string path = (dir / "cm.pickle").string();
  export_snapshot(path, reader_of(ops), "cuda_malloc", {}, 0);
  const PyTorchSnapshot back = convert_pytorch_snapshot(slurp(path), "back.pickle");
  for (const std::string& note : back.notes) EXPECT_EQ(note.find("later than their free was requested"), std::string::npos) << note;
  ASSERT_EQ(back.segment_events.size(), 6u);
  EXPECT_EQ(back.segment_events[3].kind, RecordedSegmentEvent::Kind::Free);
  EXPECT_EQ(back.segment_events[3].before_op, 4u) << "after the free that made it (op 3)";
  // Its segment events are cuda_malloc's, not PyTorch's: the self-check says why it does not
  // compare (it said "no, first difference at segment event 0" before).
  EXPECT_EQ(back.exported_allocator, "cuda_malloc");
  auto r = testing::run_gpumembench("replay --device sim --allocator caching --trace " + path);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("reproduces the recorded run: not checked (the snapshot is gpumembench's export of a "
                       "cuda_malloc run, not the native caching allocator's)"),
            std::string::npos)
      << r.out;
}

// A trace of GPU 1 is written as GPU 1's (an empty trace for GPU 0 before it).
TEST(SnapshotExport, KeepsTheGpuNumber) {
  PackedOps ops;
  Op a;
  a.kind = Op::Kind::Alloc;
  a.bytes = 3 * MiB;
  ops.push_back(a);
  auto dir = testing::temp_dir("export_gpu");
  const std::string path = (dir / "g1.pickle").string();
  export_snapshot(path, reader_of(ops), "caching", {}, 0, {}, {}, 0, /*device=*/1);
  const PyTorchSnapshot back = convert_pytorch_snapshot(slurp(path), "back.pickle");
  EXPECT_EQ(back.device, 1);
  EXPECT_EQ(ops_text(back.ops), "a0:3145728@0 ");
}

TEST(SnapshotExport, AnUnwritablePathIsAnErrorAndLeavesNothing) {
  SnapshotOps ops;
  EXPECT_THROW(export_snapshot("/nonexistent-dir/x.pickle", reader_of(ops), "caching", {}, 0), std::runtime_error);
}

}  // namespace
}  // namespace gmb
