#include "harness/run/snapshot_check.h"

#include <algorithm>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>

#include "devices/recorded_placement_device.h"
#include "devices/recording_device.h"
#include "allocators/caching/alloc_conf.h"
#include "allocators/registry.h"
#include "common/text_excerpt.h"
#include "common/units.h"

namespace gmb {

namespace {

// One device event on either side: PyTorch's name, its size, and the op it came before (the
// call's mark).
struct Event {
  DeviceCall call;
  std::uint64_t entry;  // recorded side: the trace entry
};

// Maps and unmaps of contiguous pages during one op are one range (join_page_range).
void append_coalesced(std::vector<Event>& out, const Event& e) {
  if (!out.empty() && join_page_range(out.back().call, e.call)) return;
  out.push_back(e);
}

std::string describe(const Event& e, const PyTorchSnapshot& s, bool recorded) {
  const DeviceCall& c = e.call;
  std::string where = c.mark < s.ops.size()
                          ? fmt::format("before op {} (trace entry {})", c.mark, s.ops[c.mark].source_line - 1)
                          : "after the last op";
  return fmt::format("{} of {} ({} B) {}", to_string(c.kind), format_bytes(c.bytes), c.bytes,
                     recorded ? fmt::format("at trace entry {}", e.entry) : where);
}

// Why the snapshot cannot be checked, or "" where it can.
std::string why_not_checked(const PyTorchSnapshot& s) {
  if (!s.has_trace) return "the snapshot has no trace";
  if (!s.native_allocator && !s.exported_allocator.empty())
    return fmt::format("the snapshot is gpumembench's export of a {} run, not the native caching allocator's",
                       s.exported_allocator);
  if (!s.native_allocator)
    return "the snapshot comes from the cudaMallocAsync backend, not the native caching allocator";
  if (s.blocks_alive_at_start)
    return fmt::format("the trace does not start with the allocator ({} blocks were alive before its first entry)",
                       s.blocks_alive_at_start);
  if (s.segments_from_before)
    return fmt::format("the trace does not start with the allocator ({} segments were reserved before its first entry)",
                       s.segments_from_before);
  return {};
}

// The replay's device calls (each marked with the op it came in) and OOMs (ops), against the
// recording's. capacity: the replayed device's, for the message of an OOM the recording lacks.
SnapshotCheck compare_with_recording(const PyTorchSnapshot& s, const std::vector<DeviceCall>& calls,
                                     const std::vector<std::uint64_t>& replayed_ooms, Bytes capacity) {
  SnapshotCheck c;
  // The allocator's destructor gives everything back: not part of the recorded run (the
  // caller's calls end with the last op).
  std::vector<Event> replayed, recorded;
  for (const DeviceCall& call : calls) append_coalesced(replayed, {call, 0});
  for (const RecordedSegmentEvent& e : s.segment_events)
    append_coalesced(recorded, {{e.kind, e.bytes, e.address, e.before_op}, e.entry});
  c.checked = true;
  c.segment_events = recorded.size();
  c.ooms = s.ooms.size();
  const std::size_t n = std::min(recorded.size(), replayed.size());
  for (std::size_t i = 0; i < n && c.first_difference.empty(); ++i) {
    const Event &a = recorded[i], &b = replayed[i];
    if (a.call.kind != b.call.kind || a.call.bytes != b.call.bytes || a.call.mark != b.call.mark)
      c.first_difference =
          fmt::format("segment event {}: recorded {}, replayed {}", i, describe(a, s, true), describe(b, s, false));
  }
  if (c.first_difference.empty() && recorded.size() != replayed.size()) {
    c.first_difference =
        recorded.size() > replayed.size()
            ? fmt::format("segment event {}: recorded {}, the replay made no more device calls", n,
                          describe(recorded[n], s, true))
            : fmt::format("segment event {}: the recording ends, the replay made a {}", n, describe(replayed[n], s, false));
  }
  if (c.first_difference.empty()) {
    std::vector<std::uint64_t> recorded_ooms;
    for (const RecordedOom& o : s.ooms) recorded_ooms.push_back(o.op);
    for (std::size_t i = 0; i < std::max(recorded_ooms.size(), replayed_ooms.size()) && c.first_difference.empty(); ++i) {
      if (i >= recorded_ooms.size())
        c.first_difference = fmt::format("OOM {}: the replay ran out of memory at op {} (trace entry {}), the recording "
                                         "did not (capacity {})",
                                         i, replayed_ooms[i], s.ops[replayed_ooms[i]].source_line - 1,
                                         format_bytes(capacity));
      else if (i >= replayed_ooms.size() || recorded_ooms[i] != replayed_ooms[i])
        c.first_difference = fmt::format("OOM {}: recorded at trace entry {} ({} requested), {}", i, s.ooms[i].entry,
                                         format_bytes(s.ooms[i].bytes),
                                         i >= replayed_ooms.size()
                                             ? std::string("the replay did not run out of memory there")
                                             : fmt::format("the replay ran out at op {} instead", replayed_ooms[i]));
    }
  }
  c.reproduces = c.first_difference.empty();
  return c;
}

SnapshotCheck not_checked(std::string reason) {
  SnapshotCheck c;
  c.not_checked_reason = std::move(reason);
  return c;
}

}  // namespace

SnapshotCheck check_without_recorded_settings(const PyTorchSnapshot& s) {
  return not_checked(s.has_trace ? "the snapshot records no allocator settings: replayed with PyTorch's defaults, "
                                   "which may not be the run's"
                                 : why_not_checked(s));
}

SnapshotCheck check_snapshot_replay(const PyTorchSnapshot& s, const AllocatorOptions& options, Bytes capacity,
                                    Bytes card_bytes) {
  if (std::string why = why_not_checked(s); !why.empty()) return not_checked(std::move(why));
  SimDeviceOptions o;
  if (capacity) o.capacity_bytes = capacity;
  o.card_bytes = card_bytes;
  // Segments where the driver put them: ties between equal-size free blocks go by address.
  RecordedPlacementDevice placed(make_sim_device(o), recorded_placements(s));
  RecordingDevice rec(placed);
  std::vector<std::uint64_t> replayed_ooms;
  try {
    auto allocator = make_allocator("caching", rec, options);
    // The live blocks by id: the converter numbers buffers densely, reusing freed ids (a trace
    // that starts with the allocator has no ids from before its first entry), so a vector.
    constexpr DevPtr kNotLive = ~DevPtr(0);
    std::vector<DevPtr> live;
    std::unordered_map<DevPtr, BufferId> requested;  // buffers whose free was requested, by pointer
    auto forget_returned_early = [&] {  // blocks taken back (an alloc's retry, empty_cache): no free follows
      for (DevPtr early : allocator->take_returned_early())
        if (auto it = requested.find(early); it != requested.end()) {
          live[it->second] = kNotLive;
          requested.erase(it);
        }
    };
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op op = s.ops[i];
      rec.set_mark(i);
      if (op.kind == Op::Kind::Alloc) {
        auto p = allocator->allocate(op.bytes, op.stream);
        forget_returned_early();
        if (!p) {
          replayed_ooms.push_back(i);
          continue;
        }
        if (op.id >= live.size()) live.resize(std::max<std::size_t>(2 * live.size(), op.id + 1), kNotLive);
        live[op.id] = *p;
      } else if (op.kind == Op::Kind::FreeRequested) {  // (asks the device for nothing)
        if (op.id < live.size() && live[op.id] != kNotLive) {
          allocator->free_requested(live[op.id]);
          requested[live[op.id]] = op.id;
        }
      } else if (op.kind == Op::Kind::Free) {
        if (op.id < live.size() && live[op.id] != kNotLive) {
          requested.erase(live[op.id]);
          allocator->deallocate(live[op.id]);
          live[op.id] = kNotLive;
        }
      } else if (op.kind == Op::Kind::EmptyCache) {
        allocator->empty_cache();
        forget_returned_early();
      }
    }
    rec.set_mark(s.ops.size());
    return compare_with_recording(s, rec.calls(), replayed_ooms, o.capacity_bytes);
  } catch (const AllocatorModelLimit& e) {  // (the run stops at it too, and says so)
    return not_checked(fmt::format("the replay could not run to its end: {}", e.what()));
  }
}

SnapshotCheck check_snapshot_run(const PyTorchSnapshot& s, const std::vector<DeviceCall>& calls,
                                 const std::vector<std::uint64_t>& oom_ops, std::uint64_t calls_made, Bytes capacity) {
  if (std::string why = why_not_checked(s); !why.empty()) return not_checked(std::move(why));
  std::vector<DeviceCall> by_op = calls;
  // Each op is at most one allocator call: where every op was one, call k is op k.
  if (calls_made != s.ops.size()) {
    // The op of each call, as the run made them: an alloc of some bytes is a call (counted as
    // an alloc or, failing, an OOM); a free is one where its buffer's alloc was, counted at its
    // free request where one came first (`caching` counts the free there); an empty_cache is one
    // (the runner counts it). A zero-byte alloc is no call (PyTorch hands out nullptr), nor is
    // its free.
    std::vector<std::uint64_t> op_of_call;
    op_of_call.reserve(calls_made);
    std::vector<bool> live;  // by id (dense: the converter numbers buffers so), until counted freed
    std::size_t next_oom = 0;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op op = s.ops[i];
      if (op.id >= live.size()) live.resize(std::max<std::size_t>(2 * live.size(), op.id + 1), false);
      if (op.kind == Op::Kind::Alloc) {
        const bool failed = next_oom < oom_ops.size() && oom_ops[next_oom] == i;
        if (failed) ++next_oom;
        if (op.bytes) op_of_call.push_back(i);
        live[op.id] = op.bytes && !failed;
      } else if ((op.kind == Op::Kind::Free || op.kind == Op::Kind::FreeRequested) && live[op.id]) {
        op_of_call.push_back(i);
        live[op.id] = false;
      } else if (op.kind == Op::Kind::EmptyCache) {
        op_of_call.push_back(i);
      }
    }
    for (DeviceCall& c : by_op) c.mark = c.mark < op_of_call.size() ? op_of_call[c.mark] : s.ops.size();
  }
  return compare_with_recording(s, by_op, oom_ops, capacity);
}

std::string to_text(const SnapshotCheck& c) {
  if (!c.checked) return fmt::format("reproduces the recorded run: not checked ({})", c.not_checked_reason);
  if (c.reproduces)
    return fmt::format("reproduces the recorded run: yes ({} segment events and {} OOMs, same sizes, same order)",
                       c.segment_events, c.ooms);
  return fmt::format("reproduces the recorded run: no, first difference at {}", c.first_difference);
}

std::string recorded_alloc_conf(const TraceMeta& meta, std::string* note) {
  if (!meta.alloc_conf_from_fields) return meta.alloc_conf;
  const std::string& fields = *meta.alloc_conf_from_fields;
  if (caching::same_decisions(meta.alloc_conf, fields)) return meta.alloc_conf;
  // Either string not taken by the allocator's parser: the text stays, and its error, if any,
  // says what is wrong where the settings are used.
  try {
    caching::parse_alloc_conf(meta.alloc_conf);
    caching::parse_alloc_conf(fields);
  } catch (const std::exception&) {
    return meta.alloc_conf;
  }
  if (note)
    *note = fmt::format("the recorded option string \"{}\" is not what the allocator ran with: the settings it "
                        "records one by one say \"{}\" (a later torch.cuda.memory._set_allocator_settings keeps "
                        "expandable_segments); replaying those",
                        printable_text(meta.alloc_conf), printable_text(fields));
  return fields;
}

}  // namespace gmb
