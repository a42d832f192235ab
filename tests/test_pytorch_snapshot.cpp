// PyTorch snapshots converted to ops (workloads/pytorch_snapshot.h): the synthetic snapshots of
// scripts/make_test_snapshots.py in every shape PyTorch writes, and the errors for content that
// is not what PyTorch writes.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "allocators/caching/alloc_conf.h"
#include "test_helpers.h"
#include "workloads/pytorch_snapshot.h"

namespace gmb {
namespace {

constexpr Bytes kMiB = 1024 * 1024;

std::string synthetic(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/torch_snapshots/synthetic/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

PyTorchSnapshot convert(const std::string& name, int device = -1) {
  return convert_pytorch_snapshot(synthetic(name), name, device);
}

std::string ops_text(const PyTorchSnapshot& s) {
  std::string out;
  for (const Op& op : s.ops)
    out += op.kind == Op::Kind::Alloc           ? fmt::format("a{}:{}@{} ", op.id, op.bytes, op.stream)
           : op.kind == Op::Kind::FreeRequested ? fmt::format("r{}@{} ", op.id, op.stream)
                                                : fmt::format("f{}@{} ", op.id, op.stream);
  return out;
}

bool has_note(const PyTorchSnapshot& s, const std::string& part) {
  for (const auto& n : s.notes)
    if (n.find(part) != std::string::npos) return true;
  return false;
}

TEST(PyTorchSnapshot, ConvertsAllocAndFreeCompletedWithDenseReusedIds) {
  PyTorchSnapshot s = convert("basic.pickle");
  EXPECT_EQ(ops_text(s), "a0:1000@0 a1:5242880@0 a2:3000000@0 f0@0 f1@0 a1:31457280@0 f2@0 f1@0 ");
  EXPECT_EQ(s.blocks_alive_at_start, 0u);
  EXPECT_TRUE(s.has_alloc_conf);
  EXPECT_EQ(s.alloc_conf, "");
  EXPECT_TRUE(s.native_allocator);
  EXPECT_EQ(s.device_capacity, 0u);
  ASSERT_EQ(s.segment_events.size(), 3u);
  EXPECT_EQ(s.segment_events[0].kind, RecordedSegmentEvent::Kind::Malloc);
  EXPECT_EQ(s.segment_events[0].bytes, 2 * kMiB);
  EXPECT_EQ(s.segment_events[0].before_op, 0u);
  EXPECT_EQ(s.segment_events[2].bytes, 30 * kMiB);
  EXPECT_EQ(s.segment_events[2].before_op, 5u);
  // Origins: the innermost frame of the user's code, not PyTorch's.
  EXPECT_EQ(s.origins[s.op_origin[0]], "train.py:12 in step");
  EXPECT_EQ(s.origins[s.op_origin[2]], "train.py:14 in attention");
  EXPECT_EQ(s.op_origin[3], 0u);  // frees have none
  EXPECT_EQ(s.ops[1].source_line, 4u);  // the trace entry (1-based)
}

TEST(PyTorchSnapshot, EveryPickleProtocolGivesTheSameOps) {
  std::string want = ops_text(convert("basic.pickle"));
  for (const char* name : {"basic_p2.pickle", "basic_p3.pickle", "basic_p5.pickle"}) EXPECT_EQ(ops_text(convert(name)), want) << name;
}

TEST(PyTorchSnapshot, FreesWhenTheBlockReturnsNotWhenItIsRequested) {
  PyTorchSnapshot s = convert("two_streams.pickle");
  // The side stream is 1; its first block is freed (r: free_requested) before stream 0
  // allocates and returns (free_completed) after; the other frees complete at once (f alone).
  EXPECT_EQ(ops_text(s), "a0:4194304@1 r0@1 a1:6291456@0 f0@1 a0:8388608@1 f1@0 ");
  EXPECT_TRUE(has_note(s, "1 blocks returned to the allocator later than their free was requested")) << s.notes[0];
  EXPECT_TRUE(has_note(s, "streams besides the default one: 1, numbered from 1"));
}

TEST(PyTorchSnapshot, AllocatesBlocksAliveBeforeTheTraceFirst) {
  PyTorchSnapshot s = convert("overflow.pickle");
  // Two blocks: one freed in the trace (2 MiB at +4 MiB), one alive at the end that the trace
  // never mentions (4 MiB at +0); allocated first in address order.
  EXPECT_EQ(ops_text(s), "a0:4194304@0 a1:2097152@0 f1@0 a2:1049088@0 ");
  EXPECT_EQ(s.blocks_alive_at_start, 2u);
  EXPECT_TRUE(has_note(s, "2 blocks were alive before the trace's first entry"));
  EXPECT_EQ(s.ops[0].source_line, 0u);
}

TEST(PyTorchSnapshot, ABlockFreedBeforeTheTraceAndStillWaitingIsAllocatedThenFreed) {
  // Listed active_pending_free, never in the trace: its free request follows the blocks alive at
  // the start, so it holds its memory without counting as allocated (as PyTorch counted it).
  PyTorchSnapshot s = convert("pending_before_trace.pickle");
  EXPECT_EQ(ops_text(s), "a0:4194304@0 r0@0 a1:4194304@0 ");
  EXPECT_EQ(s.blocks_alive_at_start, 1u);
}

TEST(PyTorchSnapshot, OurTakenBackMarkIsFollowedOnlyWhereItHolds) {
  // A mark that is not True is no mark (the request completes at once: one free); a True one on
  // a block whose free was never requested is a plain free, in place.
  PyTorchSnapshot s = convert("marks.pickle");
  EXPECT_EQ(ops_text(s), "a0:4194304@0 f0@0 a0:2097152@0 f0@0 a0:1048576@0 ");
}

TEST(PyTorchSnapshot, PicksTheDeviceWithTheMostEventsOrTheOneAskedFor) {
  PyTorchSnapshot s = convert("two_devices.pickle");
  EXPECT_EQ(s.device, 1);
  EXPECT_EQ(ops_text(s), "a0:1048576@0 a1:1048576@0 a2:1048576@0 f0@0 f1@0 f2@0 ");
  EXPECT_TRUE(has_note(s, "replaying device 1, the one with the most events (the snapshot has: device 0 (3 events), "
                          "device 1 (10 events); pick with --trace-device N)"));
  PyTorchSnapshot s0 = convert("two_devices.pickle", 0);
  EXPECT_EQ(ops_text(s0), "a0:512@0 r0@0 ");  // freed, not returned when the snapshot was taken
  EXPECT_TRUE(has_note(s0, "1 blocks were freed but not yet returned"));
  try {
    convert("two_devices.pickle", 3);
    FAIL() << "no error";
  } catch (const TraceError& e) {
    EXPECT_STREQ(e.what(), "two_devices.pickle: --trace-device: device 3 has no events and no segments in this snapshot "
                           "(it has: device 0 (3 events), device 1 (10 events))");
  }
}

TEST(PyTorchSnapshot, ReplaysRecordedOomsAsAllocationsAndKeepsMapEvents) {
  PyTorchSnapshot s = convert("expandable_oom.pickle");
  EXPECT_EQ(s.alloc_conf, "expandable_segments:True,max_split_size_mb:128");
  EXPECT_EQ(ops_text(s), "a0:12582912@0 a1:25165824@0 a2:67108864@0 f2@0 ");
  ASSERT_EQ(s.ooms.size(), 1u);
  EXPECT_EQ(s.ooms[0].bytes, 64 * kMiB);
  EXPECT_EQ(s.ooms[0].device_free, 1024 * kMiB);
  EXPECT_EQ(s.ooms[0].op, 2u);
  EXPECT_EQ(s.origins[s.op_origin[2]], "train.py:52 in forward");
  ASSERT_EQ(s.segment_events.size(), 2u);
  EXPECT_EQ(s.segment_events[1].kind, RecordedSegmentEvent::Kind::Map);
  EXPECT_EQ(s.segment_events[1].before_op, 1u);
}

TEST(PyTorchSnapshot, RebuildsTheOptionStringFromTheSettings) {
  PyTorchSnapshot s = convert("rebuilt_settings.pickle");
  // (The intervals below 256 MiB have no divisions: "1:0" keeps them so.)
  EXPECT_EQ(s.alloc_conf,
            "expandable_segments:True,max_split_size_mb:256,garbage_collection_threshold:0.6,"
            "roundup_power2_divisions:[1:0,256:4,512:8]");
}

TEST(PyTorchSnapshot, PutsTheRecordedSettingsIntoTheOptionString) {
  // All four recorded (as PyTorch writes them): the text's other options kept, the four rebuilt.
  PyTorchSnapshot stale = convert("stale_conf_text.pickle");
  EXPECT_EQ(stale.alloc_conf, "max_split_size_mb:128,max_non_split_rounding_mb:256");
  EXPECT_EQ(stale.alloc_conf_from_fields, "max_non_split_rounding_mb:256,expandable_segments:True,max_split_size_mb:128");
  // One recorded: only its option comes from the record.
  PyTorchSnapshot partial = convert("partial_conf_fields.pickle");
  EXPECT_EQ(partial.alloc_conf_from_fields, "max_split_size_mb:128,expandable_segments:True");
  // One of another type than PyTorch writes: nothing to check against, and a note says so.
  PyTorchSnapshot mistyped = convert("mistyped_conf_field.pickle");
  EXPECT_EQ(mistyped.alloc_conf, "expandable_segments:True");
  EXPECT_FALSE(mistyped.alloc_conf_from_fields);
  EXPECT_TRUE(has_note(mistyped, "allocator_settings.expandable_segments: expected a bool, found str: the option string "
                                 "\"expandable_segments:True\" is used as written")) << fmt::format("{}", fmt::join(mistyped.notes, "\n"));
  // No text: nothing to check.
  EXPECT_FALSE(convert("rebuilt_settings.pickle").alloc_conf_from_fields);
}

TEST(PyTorchSnapshot, ReadsTheOldBareListOfSegments) {
  PyTorchSnapshot s = convert("legacy_list.pickle");
  EXPECT_FALSE(s.has_trace);
  EXPECT_FALSE(s.has_alloc_conf);
  // The blocks alive, in address order, with their requested sizes from the history.
  EXPECT_EQ(ops_text(s), "a0:100@0 a1:6291356@0 ");
  EXPECT_EQ(s.origins[s.op_origin[1]], "train.py:60 in step");
  EXPECT_TRUE(has_note(s, "a bare list of segments"));
}

std::string error_of(const std::string& bytes) {
  try {
    convert_pytorch_snapshot(bytes, "bad.pickle");
  } catch (const TraceError& e) {
    return e.what();
  }
  return "no error";
}

// A pickle of plain data in Python's protocol 2 layout, written by hand for the error cases.
std::string pickled(const std::string& body) { return "\x80\x02" + body + "."; }
std::string k(int v) { return std::string("K") + char(v); }
std::string str(const std::string& s) { return "X" + std::string(1, char(s.size())) + std::string(3, '\0') + s; }

// A snapshot of one alloc whose allocator_settings hold an empty PYTORCH_CUDA_ALLOC_CONF and `items`.
std::string with_settings(const std::string& items) {
  return pickled("}(" + str("allocator_settings") + "}(" + str("PYTORCH_CUDA_ALLOC_CONF") + str("") + items + "u" +
                 str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") + k(200) + str("size") +
                 k(100) + str("stream") + k(0) + "ueeu");
}

TEST(PyTorchSnapshot, NamesThePathAndWhatWasExpected) {
  EXPECT_EQ(error_of(pickled("N")),
            "bad.pickle: the top level: expected a dict (torch.cuda.memory._snapshot()) or a list of segments, found NoneType");
  // {"segments": [ {"blocks": "x", "address": 0} ]}
  EXPECT_EQ(error_of(pickled("}(" + str("segments") + "](}(" + str("address") + k(0) + str("blocks") + str("x") +
                             "ueu")),
            "bad.pickle: segments[0].blocks: expected a list, found str");
  // {"device_traces": [[{"action": "free_me", "addr": 1, "size": 2, "stream": 0}]]}
  EXPECT_EQ(error_of(pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("free_me") + str("addr") +
                             k(1) + str("size") + k(2) + str("stream") + k(0) + "ueeu")),
            "bad.pickle: device_traces[0][0].action: expected one of alloc, free_requested, free_completed, "
            "segment_alloc, segment_free, segment_map, segment_unmap, oom, snapshot, user_defined; found 'free_me'");
  // An alloc without its size.
  EXPECT_EQ(error_of(pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") +
                             k(1) + "ueeu")),
            "bad.pickle: device_traces[0][0]: expected the key 'size'");
  EXPECT_EQ(error_of(pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") +
                             k(1) + str("size") + str("big") + "ueeu")),
            "bad.pickle: device_traces[0][0].size: expected an int, found str");
  EXPECT_EQ(error_of("\x80\x04\x95"), "bad.pickle: byte 2: the opcode needs 8 more bytes but only 0 are left (truncated file?)");
  // A bool where a number belongs (Python's bool is an int; PyTorch writes none there).
  EXPECT_EQ(error_of(pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") +
                             k(1) + str("size") + "\x88" + str("stream") + k(0) + "ueeu")),
            "bad.pickle: device_traces[0][0].size: expected an int, found bool");
  // 2^63 fits in 64 bits, but not in the signed 64-bit value PyTorch writes (LONG1 of 9 bytes).
  EXPECT_EQ(error_of(pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") +
                             k(1) + str("size") + "\x8a\x09" + std::string(7, '\0') + "\x80" + std::string(1, '\0') +
                             str("stream") + k(0) + "ueeu")),
            "bad.pickle: device_traces[0][0].size: expected an int of at most 2^63 - 1 (a signed 64-bit value, as "
            "PyTorch writes), found a larger int");
  // One block listed twice in segments (two blocks alive at one address): not one block.
  const std::string block = "}(" + str("address") + "M" + std::string("\x00\x10", 2) + str("size") + "M" +
                            std::string("\x00\x10", 2) + str("state") + str("active_allocated") + "u";
  EXPECT_EQ(error_of(pickled("}(" + str("segments") + "](}(" + str("address") + "M" + std::string("\x00\x10", 2) +
                             str("blocks") + "](" + block + block + "eueu")),
            "bad.pickle: segments[0].blocks[1].address: a block at 0x1000, where a block listed before is alive too");
}

// Frames of other shapes than PyTorch writes (a list of dicts with filename and name strs and an
// int line): exit 2 with the path, not an origin made up or dropped.
TEST(PyTorchSnapshot, FramesOfAnotherShapeAreNamedByTheirPath) {
  auto with_frames = [](const std::string& frames) {
    return pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") + k(1) +
                   str("size") + k(2) + str("stream") + k(0) + str("frames") + frames + "ueeu");
  };
  EXPECT_EQ(error_of(with_frames("}(" + str("a") + k(1) + "u")),
            "bad.pickle: device_traces[0][0].frames: expected a list, found dict");
  EXPECT_EQ(error_of(with_frames("](" + str("x") + k(1) + "e")),
            "bad.pickle: device_traces[0][0].frames[0]: expected a dict, found str");
  EXPECT_EQ(error_of(with_frames("](}(" + str("filename") + k(5) + str("line") + str("x") + str("name") + "Nue")),
            "bad.pickle: device_traces[0][0].frames[0].filename: expected a str, found int");
  EXPECT_EQ(error_of(with_frames("](}(" + str("filename") + str("t.py") + str("line") + str("x") + str("name") +
                                 str("f") + "ue")),
            "bad.pickle: device_traces[0][0].frames[0].line: expected an int, found str");
  EXPECT_EQ(error_of(with_frames("N")), "no error");  // (no frames: no origin)
}

// A frame's file and function are shown in tables and messages: their control bytes escaped,
// never a terminal's escape sequence (UTF-8 stays as it is).
TEST(PyTorchSnapshot, AnOriginsControlBytesAreEscaped) {
  const std::string frame = "}(" + str("filename") + str("/home/u/\x1b[31mm\xc3\xa9.py") + str("line") + k(7) +
                            str("name") + str("fwd\x07\n") + "u";
  const PyTorchSnapshot s = convert_pytorch_snapshot(
      pickled("}(" + str("device_traces") + "](](}(" + str("action") + str("alloc") + str("addr") + k(1) + str("size") +
              k(2) + str("stream") + k(0) + str("frames") + "](" + frame + "eueeu"),
      "ctrl.pickle", -1);
  ASSERT_EQ(s.ops.size(), 1u);
  EXPECT_EQ(s.origins[s.op_origin[0]], "\\x1b[31mm\xc3\xa9.py:7 in fwd\\x07\\x0a");
}

// Settings rebuilt from allocator_settings (no PYTORCH_CUDA_ALLOC_CONF text): one of another type
// than PyTorch writes is kept as the reason the recorded settings cannot be used, not dropped
// (the replay would run under other settings than the recorded run's, and say nothing). Replays
// that use them fail with it (the next test).
TEST(PyTorchSnapshot, AllocatorSettingsOfTheWrongTypeAreKeptAsAnError) {
  auto settings_error = [](const std::string& items) {
    return convert_pytorch_snapshot(with_settings(items), "bad.pickle", -1).alloc_conf_error;
  };
  EXPECT_EQ(settings_error(str("max_split_size") + str("big")), "allocator_settings.max_split_size: expected an int, found str");
  EXPECT_EQ(settings_error(str("expandable_segments") + str("yes")),
            "allocator_settings.expandable_segments: expected a bool, found str");
  EXPECT_EQ(settings_error(str("garbage_collection_threshold") + str("0.6")),
            "allocator_settings.garbage_collection_threshold: expected a float, found str");
  EXPECT_EQ(settings_error(str("roundup_power2_divisions") + "](e"),
            "allocator_settings.roundup_power2_divisions: expected a dict, found list");
  EXPECT_EQ(settings_error(str("roundup_power2_divisions") + "}(" + str("4") + str("x") + "u"),
            "allocator_settings.roundup_power2_divisions['4']: expected an int, found str");
  EXPECT_EQ(settings_error(str("roundup_power2_divisions") + "}(" + str("1") + "J" + std::string("\xfe\xff\xff\xff", 4) + "u"),
            "allocator_settings.roundup_power2_divisions['1']: expected a number of divisions, 0 or more, found -2");
  // The option string itself of another type: not rebuilt from the other settings instead.
  EXPECT_EQ(settings_error(str("PYTORCH_CUDA_ALLOC_CONF") + k(5) + str("expandable_segments") + "\x88"),
            "allocator_settings.PYTORCH_CUDA_ALLOC_CONF: expected a str, found int");
  // What PyTorch writes: True, 128 MiB, 0.6, {"4": 2}.
  PyTorchSnapshot ok = convert_pytorch_snapshot(
      with_settings(str("expandable_segments") + "\x88" + str("max_split_size") + "J" + std::string("\0\0\0\x08", 4) +
                    str("garbage_collection_threshold") + "G" + std::string("\x3f\xe3\x33\x33\x33\x33\x33\x33", 8) +
                    str("roundup_power2_divisions") + "}(" + str("4") + k(2) + "u"),
      "ok.pickle", -1);
  EXPECT_EQ(ok.alloc_conf_error, "");
  EXPECT_EQ(ok.alloc_conf,
            "expandable_segments:True,max_split_size_mb:128,garbage_collection_threshold:0.6,roundup_power2_divisions:[4:2]");
  // Intervals without divisions below the first with some: the first is listed as 0, else
  // PyTorch's parser (and ours) would give them the first listed interval's divisions.
  PyTorchSnapshot mixed = convert_pytorch_snapshot(
      with_settings(str("roundup_power2_divisions") + "}(" + str("1") + k(0) + str("2") + k(0) + str("256") + k(8) +
                    str("512") + k(0) + str("1024") + k(2) + "u"),
      "ok.pickle", -1);
  EXPECT_EQ(mixed.alloc_conf, "roundup_power2_divisions:[1:0,256:8,1024:2]");
  const caching::CachingConfig parsed = caching::parse_alloc_conf(mixed.alloc_conf);
  EXPECT_EQ(parsed.roundup_power2_divisions[1], 0u) << "2 MiB: no divisions, as recorded";
  EXPECT_EQ(parsed.roundup_power2_divisions[8], 8u);
  EXPECT_EQ(parsed.roundup_power2_divisions[9], 0u);
  EXPECT_EQ(parsed.roundup_power2_divisions[10], 2u);
}

// The replay that would use such settings fails with the reason and the way out (exit 2); one
// given --alloc-conf, or through another allocator, runs.
TEST(PyTorchSnapshot, RecordedSettingsOfTheWrongTypeFailOnlyWhereUsed) {
  auto dir = testing::temp_dir("bad_settings");
  testing::write_text(dir / "s.pickle", with_settings(str("max_split_size") + str("big")));
  const std::string replay = "replay --device sim -q --capacity 1GiB --trace " + (dir / "s.pickle").string();
  auto r = testing::run_gpumembench(replay + " --allocator caching");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("s.pickle: allocator_settings.max_split_size: expected an int, found str; --alloc-conf replaces "
                       "the recorded allocator settings"),
            std::string::npos)
      << r.out;
  r = testing::run_gpumembench(replay + " --allocator caching --alloc-conf max_split_size_mb:128");
  EXPECT_EQ(r.status, 0) << r.out;
  r = testing::run_gpumembench(replay + " --allocator bfc");
  EXPECT_EQ(r.status, 0) << r.out;
  // In a config, no caching entry replays settings that cannot be read as the recorded run.
  testing::write_text(dir / "c.yaml", "name: c\nallocators: [caching]\nworkloads:\n  - trace: {path: s.pickle}\n");
  r = testing::run_gpumembench("--device sim --capacity 1GiB --config " + (dir / "c.yaml").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("the recorded allocator settings cannot be read (allocator_settings.max_split_size: expected an "
                       "int, found str): no caching entry replays the recorded run"),
            std::string::npos)
      << r.out;
  // Settings PyTorch would refuse, quoted back escaped (no terminal escape sequence).
  testing::write_text(dir / "esc.pickle", with_settings(str("PYTORCH_CUDA_ALLOC_CONF") + str("bogus:1,\x1b[31m")));
  r = testing::run_gpumembench("replay --device sim -q --allocator caching --trace " + (dir / "esc.pickle").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("esc.pickle: the recorded allocator settings \"bogus:1,\\x1b[31m\": "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << r.out;
  std::filesystem::remove_all(dir);
}

// An address freed twice with no alloc between is a broken trace (exit 2 naming the entry), not a
// block alive before the trace's first entry: that reading doubled the block and inflated every
// peak. Freed and allocated again, the address is an ordinary new block. A free requested twice
// is broken too.
TEST(PyTorchSnapshot, ASecondFreeOfAnAddressIsABrokenTrace) {
  auto entry = [](const std::string& action) {
    return "}(" + str("action") + str(action) + str("addr") + k(200) + str("size") + k(100) + str("stream") + k(0) + "u";
  };
  auto trace = [](const std::string& entries) { return pickled("}(" + str("device_traces") + "](](" + entries + "eeu"); };
  PyTorchSnapshot ok = convert_pytorch_snapshot(
      trace(entry("alloc") + entry("free_completed") + entry("alloc") + entry("free_requested") + entry("free_completed")),
      "ok.pickle", -1);
  EXPECT_EQ(ops_text(ok), "a0:100@0 f0@0 a0:100@0 f0@0 ");
  EXPECT_EQ(ok.blocks_alive_at_start, 0u);
  EXPECT_EQ(error_of(trace(entry("alloc") + entry("free_completed") + entry("free_completed"))),
            "bad.pickle: device_traces[0][2]: free_completed at address 0xc8, which the trace already freed "
            "(free_completed) and did not allocate again");
  // The first free of an address never allocated is a block from before the trace; its second is not.
  EXPECT_EQ(error_of(trace(entry("free_completed") + entry("free_requested"))),
            "bad.pickle: device_traces[0][1]: free_requested at address 0xc8, which the trace already freed "
            "(free_completed) and did not allocate again");
  EXPECT_EQ(error_of(trace(entry("alloc") + entry("alloc"))),
            "bad.pickle: device_traces[0][1]: alloc at address 0xc8, which is already allocated and was never freed "
            "(free_completed) in the trace");
  // A free requested twice (a buffer freed twice by the program: PyTorch records one request).
  EXPECT_EQ(error_of(trace(entry("alloc") + entry("free_requested") + entry("free_requested") + entry("free_completed"))),
            "bad.pickle: device_traces[0][2]: free_requested at address 0xc8, whose free was already requested and "
            "not yet completed (free_completed)");
  EXPECT_EQ(error_of(trace(entry("free_requested") + entry("free_requested"))),
            "bad.pickle: device_traces[0][1]: free_requested at address 0xc8, whose free was already requested and "
            "not yet completed (free_completed)");
}

// A trace with two errors: the one a user sees is the first in the trace, whether it is in an
// entry's types (a size that is a str) or in what the entries do (a second free).
TEST(PyTorchSnapshot, TheFirstErrorInTheTraceIsTheOneReported) {
  auto entry = [](const std::string& action, const std::string& size) {
    return "}(" + str("action") + str(action) + str("addr") + k(200) + str("size") + size + str("stream") + k(0) + "u";
  };
  auto trace = [](const std::string& entries) { return pickled("}(" + str("device_traces") + "](](" + entries + "eeu"); };
  // A second free (found by apply) before a size that is a str (found by extract).
  EXPECT_EQ(error_of(trace(entry("alloc", k(100)) + entry("free_completed", k(100)) + entry("free_completed", k(100)) +
                           entry("alloc", str("big")))),
            "bad.pickle: device_traces[0][2]: free_completed at address 0xc8, which the trace already freed "
            "(free_completed) and did not allocate again");
  // The other way round.
  EXPECT_EQ(error_of(trace(entry("alloc", k(100)) + entry("alloc", str("big")) + entry("free_completed", k(100)) +
                           entry("free_completed", k(100)))),
            "bad.pickle: device_traces[0][1].size: expected an int, found str");
}

// Among many addresses allocated and freed, the conversion still tells a block from before the
// trace (its first free, at an address never seen) from a second free of an address freed long
// before (only live blocks are looked up on the way; the addresses freed, only at such a free).
TEST(PyTorchSnapshot, ASecondFreeIsFoundAmongManyAddressesFreedBefore) {
  auto entry = [](const std::string& action, int addr) {
    return "}(" + str("action") + str(action) + str("addr") + "M" + std::string(1, char(addr & 0xff)) +
           std::string(1, char(addr >> 8)) + str("size") + k(100) + str("stream") + k(0) + "u";
  };
  auto trace = [](const std::string& entries) { return pickled("}(" + str("device_traces") + "](](" + entries + "eeu"); };
  std::string entries;
  for (int a = 1000; a < 1300; ++a) entries += entry("alloc", a) + entry("free_completed", a);
  PyTorchSnapshot ok = convert_pytorch_snapshot(trace(entries + entry("free_completed", 5000) + entry("alloc", 1000)),
                                                "ok.pickle", -1);
  EXPECT_EQ(ok.blocks_alive_at_start, 1u);  // 5000: alive before the trace's first entry
  EXPECT_EQ(ok.ops.size(), 603u);  // its alloc first, then 600, its free and the new alloc at 1000
  EXPECT_EQ(error_of(trace(entries + entry("free_completed", 5000) + entry("free_completed", 1007))),
            "bad.pickle: device_traces[0][601]: free_completed at address 0x3ef, which the trace already freed "
            "(free_completed) and did not allocate again");
}

}  // namespace
}  // namespace gmb
