// The self-check of a PyTorch snapshot replay: the recorded run came from PyTorch's own caching
// allocator, so replaying it through `caching` with the recorded settings must make the same
// device calls (segment_alloc / segment_free, segment_map / segment_unmap for expandable
// segments, same sizes, same order, at the same op) and the same OOMs. Every user's snapshot is a
// fidelity test. Runs on the simulated device: decisions, not timings.
#pragma once

#include <string>
#include <vector>

#include "allocators/allocator.h"
#include "devices/device_call.h"
#include "workloads/pytorch_snapshot.h"
#include "workloads/trace_source.h"

namespace gmb {

struct SnapshotCheck {
  bool checked = false;
  std::string not_checked_reason;  // when !checked
  bool reproduces = false;
  std::string first_difference;    // when checked && !reproduces
  std::uint64_t segment_events = 0, ooms = 0;  // recorded (compared)
};

// options: the caching allocator's options (alloc_conf, memory_limit_bytes...); capacity: the
// simulated device (0: the sim's default), card_bytes: the card it is left on (0: the
// capacity), as the run's device has them (a memory limit below a larger card is not a card of
// the limit's size: caching_allocator.h). Checked only when the snapshot has a trace from the
// start of the allocator (no blocks alive before it) and came from the native allocator.
SnapshotCheck check_snapshot_replay(const PyTorchSnapshot& snapshot, const AllocatorOptions& options, Bytes capacity,
                                    Bytes card_bytes = 0);

// The same check from a run that already replayed the snapshot through `caching` with these
// options on the simulated device (the CLI's run: no second replay). calls: the run's device
// calls, each marked with the allocator call it came in (0-based: the allocator's allocs, frees
// and OOMs before it, RunSettings::device_calls); oom_ops: the ops whose allocs failed, in order;
// calls_made: the allocator's allocs + frees + OOMs when the workload ended; capacity: the
// device's, for the message of an OOM the recording lacks.
SnapshotCheck check_snapshot_run(const PyTorchSnapshot& snapshot, const std::vector<DeviceCall>& calls,
                                 const std::vector<std::uint64_t>& oom_ops, std::uint64_t calls_made, Bytes capacity);

// A snapshot that records no allocator settings (older PyTorch), replayed with PyTorch's
// defaults: never checked, since they may not be the run's; says why (or that it has no trace).
SnapshotCheck check_without_recorded_settings(const PyTorchSnapshot& snapshot);

// The allocator settings a trace's run had: its recorded option string (TraceMeta::alloc_conf),
// unless the settings PyTorch also records one by one decide otherwise; then the string with
// those put in (alloc_conf_from_fields), and `note` says so. The string can be stale:
// torch.cuda.memory._set_allocator_settings resets max_split_size_mb, the GC threshold and the
// roundup to their defaults but keeps expandable_segments from the string before it.
std::string recorded_alloc_conf(const TraceMeta& meta, std::string* note);

// "reproduces the recorded run: yes (...)" / "...: no: ..." / "...: not checked (...)".
std::string to_text(const SnapshotCheck& check);

}  // namespace gmb
