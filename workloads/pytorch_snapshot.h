// A PyTorch memory snapshot (the pickled dict of torch.cuda.memory._snapshot(), written by
// torch.cuda.memory._dump_snapshot) converted to the ops of one device, plus what the recorded
// run did that a replay can be checked against (segment events, OOMs).
//
// Shapes read: {"segments", "device_traces", "allocator_settings", "external_annotations"}; the
// older dict whose blocks carry "history"; a bare list of segments. Trace entries:
//   alloc           an Alloc of `size` bytes (the requested size) at `addr`, a dense id per live address
//   free_completed  the Free: the block returns to the allocator here (after free_requested, later
//                   when the block was used on another stream: record_stream)
//   free_requested  only counted (how many frees waited on other streams)
//   segment_alloc / segment_free / segment_map / segment_unmap   the recorded device calls
//   oom             the recorded OOM; replayed as an Alloc of its size freed right away (the
//                   recording does not say how long the block would have lived)
//   snapshot, user_defined   ignored
// A trace ring buffer that overflowed leaves blocks alive at the start with no alloc: a free of
// an unknown address, or a block alive in `segments` that the trace never touches. They are
// allocated first, in address order, and the notes say how many.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "devices/device_call.h"  // the same four calls, replayed
#include "common/huge_page_allocator.h"
#include "workloads/trace_source.h"
#include "workloads/packed_ops.h"
#include "workloads/workload.h"

namespace gmb {

// A device call PyTorch's allocator made, as the snapshot recorded it.
struct RecordedSegmentEvent {
  using Kind = DeviceCall::Kind;
  Kind kind = Kind::Malloc;
  Bytes bytes = 0;
  DevPtr address = 0;
  std::uint64_t before_op = 0;  // happened before ops[before_op] (ops.size(): after the last)
  std::uint64_t entry = 0;      // index in device_traces[device]
};
const char* to_string(DeviceCall::Kind kind);  // PyTorch's trace action: "segment_alloc"...

struct RecordedOom {
  Bytes bytes = 0;        // the request, rounded by the allocator
  Bytes device_free = 0;  // cudaMemGetInfo's free bytes at the OOM
  std::uint64_t op = 0;   // the Alloc op that replays it
  std::uint64_t entry = 0;
};

struct PyTorchSnapshot {
  int device = 0;
  std::vector<int> devices_with_events;  // for the notes and --trace-device errors
  std::string alloc_conf;                // PYTORCH_CUDA_ALLOC_CONF syntax
  // The option string with the four settings PyTorch also records one by one (expandable
  // segments, max split size, GC threshold, power-of-two roundup) taken from those records: what
  // the allocator ran with where a later torch.cuda.memory._set_allocator_settings kept
  // expandable_segments from an earlier string. None when there is no option string to check, or
  // no such setting recorded (or one of another type than PyTorch writes: a note says so).
  std::optional<std::string> alloc_conf_from_fields;
  bool has_alloc_conf = false;
  // Why the recorded settings could not be read (a setting of another type than PyTorch writes),
  // or empty. An error only where they are used: --alloc-conf, or another allocator, replays.
  std::string alloc_conf_error;
  bool native_allocator = true;          // false for backend:cudaMallocAsync, and for our export of another allocator's run
  std::string exported_allocator;        // gpumembench's export: the allocator that made the run (its row label)
  Bytes device_capacity = 0;             // never recorded by PyTorch: 0
  std::vector<std::string> notes;
  // Alloc/Free; source_line = trace entry index + 1 (0: a block alive at start). 16 bytes an op
  // (packed_ops.h), tens of MB for a long trace.
  PackedOps ops;
  // Every op's id is below this: ids are dense, a freed buffer's id given to the next alloc, so
  // it is about the most buffers live at once (what a replay sizes its per-buffer arrays by).
  BufferId ids_end = 0;
  std::uint64_t blocks_alive_at_start = 0;  // the first ops
  // Memory reserved before the trace's first entry, so the trace does not start with the
  // allocator: segment_free / segment_unmap of memory the trace had not reserved, and listed
  // segments (or the parts of them) it does not hold at its end. How many, and their bytes.
  std::uint64_t segments_from_before = 0;
  Bytes bytes_from_before = 0;
  bool has_trace = false;                // false: only the segments (state at the time of the snapshot)
  std::vector<RecordedSegmentEvent> segment_events;
  std::vector<RecordedOom> ooms;
  std::uint64_t empty_caches = 0;  // the Op::Kind::EmptyCache ops: the program's torch.cuda.empty_cache()
  // Where each Alloc came from: op_origin[i] indexes origins (0 = unknown).
  std::vector<std::uint32_t, HugePageAllocator<std::uint32_t>> op_origin;
  std::vector<std::string> origins{""};
};

// (bytes, address) of every recorded cudaMalloc, in order: where the driver put the segments
// (RecordedPlacementDevice replays them).
std::vector<std::pair<Bytes, DevPtr>> recorded_placements(const PyTorchSnapshot& snapshot);

// Converts a pickled snapshot (already decompressed). device: -1 = the device with the most
// trace events. Throws TraceError: a malformed pickle at its byte offset ("byte 4096"), content
// that is not what PyTorch writes at its path in the pickle ("segments[3].blocks: expected a
// list, found str").
PyTorchSnapshot convert_pytorch_snapshot(std::string_view pickle_bytes, const std::string& file, int device = -1);
// The same, the pickle's bytes freed once parsed: the conversion's ops then take their memory
// (huge_page_allocator.h keeps freed blocks), not pages the kernel has to zero-fill.
PyTorchSnapshot convert_pytorch_snapshot(WholeContent&& pickle_bytes, const std::string& file, int device = -1);
// The same, the pickle parsed as it arrives (read and inflated on another thread).
class ContentFeed;
PyTorchSnapshot convert_pytorch_snapshot(ContentFeed& feed, const std::string& file, int device = -1);
// The conversion in two passes, the whole pickle parsed before any entry is converted: what
// convert_pytorch_snapshot falls back to for a pickle that refers back to converted entries,
// and what tests compare it with. The same result, slower, with the whole tree in memory.
PyTorchSnapshot convert_pytorch_snapshot_unstreamed(std::string_view pickle_bytes, const std::string& file, int device = -1);

// The converted snapshot behind a source open_trace made for a snapshot; nullptr for other formats.
const PyTorchSnapshot* pytorch_snapshot_of(const TraceSource& source);

// The most inflated bytes a snapshot may hold (it is read whole into memory): 16 GiB, far above
// what PyTorch's default of 100000 trace entries makes.
constexpr std::uint64_t kMaxSnapshotBytes = std::uint64_t(16) << 30;

// The snapshot reader of open_trace's format table (trace_source.h): a regular file only.
std::unique_ptr<TraceSource> make_pytorch_snapshot_source(std::unique_ptr<ByteInput> in, const TraceOpenOptions& options);

}  // namespace gmb
