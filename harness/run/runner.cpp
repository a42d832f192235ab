#include "harness/run/runner.h"

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <fstream>
#include <optional>
#include <unordered_map>
#include <stdexcept>
#include <utility>

#if defined(__SSE2__) && defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include "allocators/caching/caching_allocator.h"
#include "allocators/call_run.h"
#include "devices/recorded_placement_device.h"
#include "devices/recording_device.h"
#include "allocators/registry.h"
#include "common/huge_page_allocator.h"
#include "common/units.h"
#include "harness/run/buffer_table.h"
#include "harness/run/step_ops_ahead.h"
#include "harness/run/tick_clock.h"
#include "harness/run/workload_need.h"

namespace gmb {

const char* to_string(OomKind kind) { return kind == OomKind::Fragmentation ? "fragmentation" : "capacity"; }

OomKind classify_oom(const WorkloadNeed& need, std::uint64_t step, Bytes capacity) {
  return need.requested_from(step) > capacity ? OomKind::Capacity : OomKind::Fragmentation;
}

const char* to_string(OnOom policy) {
  switch (policy) {
    case OnOom::Stop: return "stop";
    case OnOom::SkipStep: return "skip_step";
    case OnOom::Continue: return "continue";
  }
  return "?";
}

DeviceChoice resolve_device(DeviceChoice choice) {
  if (choice != DeviceChoice::Auto) return choice;
  return cuda_device_available() ? DeviceChoice::Cuda : DeviceChoice::Sim;
}

DeviceInfo describe_device(const DeviceSpec& spec) {
  if (resolve_device(spec.choice) == DeviceChoice::Cuda) {
    DeviceInfo info = cuda_device_info();
    if (spec.capacity_bytes && spec.capacity_bytes < info.capacity_bytes) {
      info.ballast_bytes = info.capacity_bytes - spec.capacity_bytes;
      info.capacity_bytes = spec.capacity_bytes;
    }
    return info;
  }
  SimDeviceOptions o;
  if (spec.capacity_bytes) o.capacity_bytes = spec.capacity_bytes;
  o.ordinal = spec.ordinal;
  return sim_device_info(o);
}

DeviceInfo device_of_cases(const std::vector<CaseResult>& cases) {
  for (const CaseResult& c : cases)
    if (c.device) return *c.device;
  for (const CaseResult& c : cases)
    if (!c.error.empty()) throw DeviceError(c.error);
  throw DeviceError("no case made a device");
}

std::unique_ptr<Device> make_device(const DeviceSpec& spec) {
  if (resolve_device(spec.choice) == DeviceChoice::Cuda) return make_cuda_device(spec.capacity_bytes);
  SimDeviceOptions o;
  if (spec.capacity_bytes) o.capacity_bytes = spec.capacity_bytes;
  o.card_bytes = spec.card_bytes;
  o.ordinal = spec.ordinal;
  return make_sim_device(o);
}

namespace {

// One repeat of a case.
struct CaseRun {
  const RunSettings& settings;
  Device& device;
  InspectableAllocator& allocator;
  Workload& workload;
  // The workload's need; null while a NeedTracker computes it from this run's own steps: then
  // the OOMs are classified, and the steps' need filled in, when the run ends (finish_need).
  const WorkloadNeed* need;
  NeedTracker* need_tracker;
  CaseResult& result;  // timeline / steps / block map are filled on the first run only
  bool first_run;
  AllocatorEventGate* event_gate;  // events exported (first run): closed before the clean-up
  RecordingDevice* recorder = nullptr;  // device calls kept (first run): taken before the clean-up
  std::uint64_t* empty_caches = nullptr;  // EmptyCache ops made, which the recorder's marks count
  bool need_complete = false;  // after run(): need_tracker saw every step of the workload
  // The usage after each event up to the first OOM (first run, oom_block_map). On a real GPU it
  // is sampled into a ring as the run goes (usage_ring). On sim it is not sampled (the ring's
  // stores cost about 4% of a trace replay); the first OOM's own sample is kept (usage_wanted)
  // and run_case runs the case again up to that OOM with the ring on: the sim is deterministic,
  // so that run makes the same calls, and its OOM is checked to be the same one.
  bool usage_ring = false;
  std::optional<UsageSample> usage_wanted{};

  // By Op::slot (buffer_slots.h): the pointer the live buffer there got (0: none; slot 0 is
  // never a buffer's, so a free of an id that is not live reads 0).
  std::vector<DevPtr> slot_ptr = std::vector<DevPtr>(1, 0);
  // On a real GPU, compute finds buffers by id (ComputeContext::buffer): id -> pointer as well,
  // kept outside the timed calls.
  bool ids_needed = false;
  BufferTable live_by_id{};
  // Call by call (no CallRunner): the slot of each buffer whose free was requested, by pointer (a
  // block waiting holds its memory, so one buffer a pointer), to forget those the allocator takes
  // back early (Allocator::take_returned_early). Empty until a free is requested.
  std::unordered_map<DevPtr, std::uint32_t> requested_slot{};
  RunMetrics m{};
  // Host time inside allocator calls and compute calls, in ticks (converted at the end).
  TickClock::Ticks alloc_ticks = 0, compute_ticks = 0, generation_ticks = 0;
  double real_tokens = 0, padded_tokens = 0;

  // Bytes in use after each allocator call: the run's peak reserved R with the most bytes
  // allocated while R was reserved (fragmentation at peak reserved), and this step's peaks.
  Bytes peak_reserved = 0, allocated_at_peak_reserved = 0;
  Bytes step_peak_allocated = 0, step_peak_reserved = 0;
  // Where the allocator has a block view, its free space is read again whenever (R, A) moves
  // (rarely after the first step): the TF BFC and memory_viz figures at peak reserved.
  bool has_free_space = false;
  bool peak_seen = false;
  void track(const MemoryInUse& u) {
    if (u.reserved_bytes >= peak_reserved) {
      const Bytes a =
          u.reserved_bytes > peak_reserved ? u.allocated_bytes : std::max(allocated_at_peak_reserved, u.allocated_bytes);
      const bool moved = !peak_seen || u.reserved_bytes > peak_reserved || a > allocated_at_peak_reserved;
      allocated_at_peak_reserved = a;
      peak_reserved = u.reserved_bytes;
      peak_seen = true;
      if (moved && has_free_space) m.free_space_at_peak_reserved = allocator.free_space();
    }
    step_peak_allocated = std::max(step_peak_allocated, u.allocated_bytes);
    step_peak_reserved = std::max(step_peak_reserved, u.reserved_bytes);
  }

  void record_timeline(std::uint64_t event, char action, const Op& op, bool oom) {
    if (!first_run || !settings.timeline) return;
    AllocatorStats s = allocator.stats();
    result.timeline.push_back(
        {event, action, op.id, op.bytes, s.allocated_bytes, s.reserved_bytes, s.segments, oom});
  }

  // Records a failed allocation: the OOM, its kind, and at the first one the block map.
  void record_oom(const Op& op, std::uint64_t step, std::uint64_t event) {
    ++m.ooms;
    AllocatorStats s = allocator.stats();
    OomDetails d = allocator.last_oom();
    OomRecord r;
    r.step = step;
    r.event = event;
    r.requested_bytes = op.bytes;
    r.allocated_bytes = s.allocated_bytes;
    r.reserved_bytes = s.reserved_bytes;
    r.cached_bytes = s.reserved_bytes > s.allocated_bytes ? s.reserved_bytes - s.allocated_bytes : 0;
    r.live_requested_bytes = s.requested_bytes;
    r.largest_free_block = d.largest_free_block;
    // What the allocator may take: the device, or less where the allocator has its own limit
    // (a memory fraction); a need above it is a capacity OOM whatever the card holds.
    r.capacity_bytes = device.info().capacity_bytes;
    if (d.limit_bytes && d.limit_bytes < r.capacity_bytes) r.capacity_bytes = d.limit_bytes;
    r.retried_after_freeing_cache = d.retried_after_freeing_cache;
    if (need) {
      r.need_from_here_bytes = need->requested_from(step);
      r.kind = classify_oom(*need, step, r.capacity_bytes);
      ++(r.kind == OomKind::Fragmentation ? m.fragmentation_ooms : m.capacity_ooms);
    } else if (!unclassified.empty() && unclassified.back().step == step &&
               unclassified.back().capacity_bytes == r.capacity_bytes) {
      ++unclassified.back().count;
    } else {
      unclassified.push_back({step, r.capacity_bytes, 1});
    }
    track({s.allocated_bytes, s.reserved_bytes});  // a failed call may have emptied the cache
    r.message = d.message;
    const bool details = first_run && settings.oom_block_map;
    // Where the request came from in the user's program (a trace that records it): only for the
    // records kept, as the lookup may wait for the trace reader.
    if (!m.first_oom || (details && result.oom_events.size() < CaseResult::kMaxOomEvents)) r.origin = workload.op_origin(op);
    if (!m.first_oom) {
      if (details) {
        result.oom_segments = allocator.block_map();
        const UsageSample at{event, step, s.allocated_bytes, s.reserved_bytes};
        if (usage_ring)
          keep_usage_up_to_oom(at);
        else
          usage_wanted = at;
      }
      m.first_oom = r;
      m.free_space_at_first_oom = allocator.free_space();
    }
    if (details && result.oom_events.size() < CaseResult::kMaxOomEvents) result.oom_events.push_back(r);
    record_timeline(event, 'a', op, true);
  }

  // OOMs made before the need was known, by step and capacity (in run order): classified by
  // finish_need.
  struct Unclassified {
    std::uint64_t step;
    Bytes capacity_bytes;
    std::uint64_t count;
  };
  std::vector<Unclassified> unclassified{};

  // Once the need is known: what record_oom and the step series would have said with it.
  void finish_need(const WorkloadNeed& known) {
    need = &known;
    auto classify = [&](OomRecord& r) {
      r.need_from_here_bytes = known.requested_from(r.step);
      if (r.origin == kSetupOomOrigin) return;  // a capacity OOM whatever the need (record_setup_oom)
      r.kind = classify_oom(known, r.step, r.capacity_bytes);
    };
    for (const Unclassified& u : unclassified)
      (classify_oom(known, u.step, u.capacity_bytes) == OomKind::Fragmentation ? m.fragmentation_ooms
                                                                                : m.capacity_ooms) += u.count;
    unclassified.clear();
    if (m.first_oom) classify(*m.first_oom);
    if (first_run) {
      for (OomRecord& r : result.oom_events) classify(r);
      for (StepSample& s : result.steps)
        s.need_bytes = s.step < known.step_peak_requested_bytes.size() ? known.step_peak_requested_bytes[s.step] : 0;
    }
  }

  // The buffers the allocator took back before their free (it waited for their streams, as
  // PyTorch does before it gives up on a request): their slots forget them, so no free follows.
  void forget_returned_early(DevPtr* ptrs) {
    for (DevPtr p : allocator.take_returned_early())
      if (auto it = requested_slot.find(p); it != requested_slot.end()) {
        ptrs[it->second] = 0;
        requested_slot.erase(it);
      }
  }

  // The program's own empty_cache (a snapshot's Op::Kind::EmptyCache): allocator time, and an
  // event of its own (a trace's events are its ops, the recorded OOMs numbered so). It can take
  // back blocks freed while another stream used them (caching, as PyTorch waits for those).
  void empty_cache() {
    const TickClock::Ticks t = TickClock::now();
    allocator.empty_cache();  // its device calls marked with the calls before it (the mark source)
    if (empty_caches) ++*empty_caches;
    if (__builtin_expect(!requested_slot.empty(), 0)) forget_returned_early(slot_ptr.data());
    alloc_ticks += TickClock::now() - t;
    ++m.events;
    track(allocator.in_use());
  }

  static constexpr const char* kSetupOomOrigin = "in the workload's setup (cuBLAS), before the first step";

  // The workload's own setup (cuBLAS) found no device memory before the first step: the case's
  // OOM, at step 0 and event 0, a capacity OOM (what is missing is not the allocator's doing).
  void record_setup_oom(const std::string& message) {
    ++m.ooms;
    ++m.capacity_ooms;
    OomRecord r;
    r.capacity_bytes = device.info().capacity_bytes;
    if (need) r.need_from_here_bytes = need->requested_from(0);
    r.kind = OomKind::Capacity;
    r.message = message;
    r.origin = kSetupOomOrigin;
    if (!m.first_oom) {
      m.first_oom = r;
      m.free_space_at_first_oom = allocator.free_space();
    }
    if (first_run && settings.oom_block_map && result.oom_events.size() < CaseResult::kMaxOomEvents)
      result.oom_events.push_back(r);
  }

  // A run of allocator ops between two compute ops, timed as one: the clock costs 10-16 ns a
  // read, as much as a cached allocation, so reading it around every call would make the
  // harness a large part of what is measured. Inside the run the harness only moves pointers
  // in and out of slot_ptr (a load and a store a call) and reads the bytes in use after each
  // call (the peaks, and the usage picture at an OOM): a few ns a call. Events, the timeline
  // and the usage samples are written after the clock stops.
  // Each call's result (CallResult: the pointer, and the bytes in use after it) is kept for the
  // bookkeeping after the clock stops; skipped[j]: an alloc skipped after an OOM (on_oom:
  // skip_step), no event (read only while the step skips allocs). Index j is op i + j of the run.
  static constexpr std::size_t kMaxRun = 64;
  CallResult results[kMaxRun]{};
  bool skipped[kMaxRun]{};
  // Where the allocator runs many calls in one (allocators/call_run.h): the ops as it reads them.
  CallRunner* call_runner_ = nullptr;
  CallView op_view{};
  static_assert(sizeof(Op::Kind) == 1 && std::uint8_t(Op::Kind::Alloc) == CallView::kAllocate &&
                std::uint8_t(Op::Kind::Free) == CallView::kDeallocate &&
                std::uint8_t(Op::Kind::FreeRequested) == CallView::kFreeRequested &&
                std::uint8_t(Op::Kind::Compute) > CallView::kFreeRequested);

  bool sampling_usage() const { return usage_ring && !m.first_oom; }

  // Runs the allocator ops from ops[i] up to the next compute op or kMaxRun ops (one op when a
  // timeline is kept: it reads the full statistics after every call). Returns the next op.
  std::size_t run_allocator_ops(const Op* ops, std::size_t n_ops, std::size_t i, std::uint64_t step, bool& skipping,
                                bool& step_ok, bool& stop) {
    // The run ends at the first compute op, found as the ops are run (not by a pass of its own).
    const std::size_t end = std::min(n_ops, i + (settings.timeline ? 1 : kMaxRun));
    DevPtr* const ptrs = slot_ptr.data();  // sized for every slot of this step (run())
    // Read once, not per op: the loops below store through pointers the compiler cannot tell apart.
    const bool timeline = first_run && settings.timeline, ids = ids_needed;
    std::size_t k = i;
    for (;;) {  // once, and again after each OOM inside the run
      const std::size_t first = k;
      const bool sample = sampling_usage();
      // The loops after the clock read each call's result; most runs want only the step's peaks,
      // which the allocator keeps as it goes (run_calls_highs).
      const bool each = !call_runner_ || ids || timeline || skipping || sample;
      CallHighs highs{{step_peak_allocated, step_peak_reserved}, {}};
      bool failed = false;
      const TickClock::Ticks t = TickClock::now();
      if (call_runner_) {
        // Many calls in one, up to a compute op (the allocator may keep its blocks by slot: then
        // every call goes through it). A call stops it where track() must read the allocator
        // (the peak moved); the first call of the run is made alone (no peak yet).
        while (k < end && is_buffer_call(ops[k].kind)) {
          if (skipping && ops[k].kind == Op::Kind::Alloc) {
            skipped[k - i] = true;
            ++k;
            continue;
          }
          std::size_t stretch = end;
          if (skipping) {  // the frees (and free requests) up to the next alloc
            stretch = k + 1;
            while (stretch < end && (ops[stretch].kind == Op::Kind::Free || ops[stretch].kind == Op::Kind::FreeRequested))
              ++stretch;
          }
          if (!peak_seen) stretch = k + 1;
          const CallView calls{reinterpret_cast<const unsigned char*>(ops + k), op_view.stride, op_view.kind_at,
                               op_view.bytes_at, op_view.stream_at, op_view.slot_at};
          const MemoryInUse mark{allocated_at_peak_reserved, peak_reserved};
          const std::size_t done =
              each ? call_runner_->run_calls(calls, stretch - k, ptrs, &results[k - i], mark, failed)
                   : call_runner_->run_calls_highs(calls, stretch - k, ptrs, mark, highs, failed);
          // Before the last call none passed the mark: their track() would only raise the step's
          // peaks, which the loops after the clock (or highs) do for every call.
          if (skipping)
            for (std::size_t q = k; q < k + done; ++q) skipped[q - i] = false;
          if (done) track(each ? results[k + done - 1 - i].after : highs.last);
          k += done;
          if (failed) break;  // else it stopped at the mark, a compute op (the loop's test) or the end
        }
      } else {
        for (; k < end && is_buffer_call(ops[k].kind); ++k) {
          const Op& o = ops[k];
          CallResult& p = results[k - i];
          skipped[k - i] = false;
          if (o.kind == Op::Kind::Alloc) {
            if (skipping) {
              skipped[k - i] = true;
              continue;
            }
            const std::optional<DevPtr> ptr = allocator.allocate(o.bytes, o.stream);
            if (__builtin_expect(!requested_slot.empty(), 0)) forget_returned_early(ptrs);
            if (!ptr) {
              failed = true;  // the slot keeps what it held: nothing, or a buffer this id had already
              break;
            }
            p.ptr = ptrs[o.slot] = *ptr;
          } else if (o.kind == Op::Kind::FreeRequested) {
            p.ptr = ptrs[o.slot];  // taken until the buffer's free
            if (p.ptr) {
              allocator.free_requested(p.ptr);
              requested_slot[p.ptr] = o.slot;
            }
          } else {
            p.ptr = ptrs[o.slot];
            ptrs[o.slot] = 0;
            if (p.ptr) {
              if (__builtin_expect(!requested_slot.empty(), 0)) requested_slot.erase(p.ptr);
              allocator.deallocate(p.ptr);
            }
          }
          p.after = allocator.in_use();
          track(p.after);
        }
      }
      alloc_ticks += TickClock::now() - t;
      // The step's peaks over every call made (a call that was made has its result; skipped
      // allocs have none): in the loops below, which read the results anyway.
      Bytes step_a = step_peak_allocated, step_r = step_peak_reserved;
      auto step_peaks = [&](const CallResult& p) {
        step_a = std::max(step_a, p.after.allocated_bytes);
        step_r = std::max(step_r, p.after.reserved_bytes);
      };
      // skipped[] is written only while skipping (the flag does not change inside this pass).
      if (!ids && !timeline && !skipping) {
        // Most runs: the event count, the step's peaks, and the usage ring until the first OOM.
        std::uint64_t event = m.events;
        if (sample) {
          // Per event only the bytes in use go into the ring; the event and the step come from
          // the run of samples they start (usage_runs), written once per run, not per event.
          if (!usage_continues(event, step)) open_usage_run(usage_count, event, step);
          std::uint64_t count = usage_count;
          const std::size_t n = k - first;
          const Op* const run_ops = ops + first;
          const CallResult* const run_results = &results[first - i];
          Bytes* const ring = usage_mem.get();
          if (n >= kRunApart) {
            for (std::size_t j = 0;;) {  // call j: op first + j
              j = sample_calls_apart(run_ops, run_results, j, n, ring, count, step_a, step_r);
              if (j == n) break;
              // Call j has no sample: the samples after it start a run of their own.
              open_usage_run(count, event + j + 1, step);
              ++j;
            }
          } else {
            for (std::size_t j = 0; j < n; ++j) {  // the same, inline: a call costs more than these few
              const CallResult& p = run_results[j];
              step_peaks(p);
              if (__builtin_expect(no_sample(run_ops[j], p), 0)) {
                open_usage_run(count, event + j + 1, step);
                continue;
              }
              store_usage(ring + 2 * (count & (kUsageWindow - 1)), p.after);
              ++count;
            }
          }
          usage_count = count;
          event += k - first;
          // Every call of the pass has its sample or started a run after it (no sample).
          usage_next_event = event;
          usage_next_step = step;
        } else if (each) {
          for (std::size_t q = first; q < k; ++q) step_peaks(results[q - i]);
          event += k - first;
        } else {
          step_a = highs.high.allocated_bytes;  // started from the step's peaks
          step_r = highs.high.reserved_bytes;
          event += k - first;
        }
        m.events = event;
      } else if (!ids && !timeline) {
        // Allocs skipped after an OOM (on_oom: skip_step) are no events; after the first OOM no
        // usage is sampled.
        assert(!sample);
        std::uint64_t event = m.events;
        for (std::size_t q = first; q < k; ++q) {
          if (skipped[q - i]) continue;
          step_peaks(results[q - i]);
          ++event;
        }
        m.events = event;
      } else {
        std::uint64_t events = m.events;
        for (std::size_t q = first; q < k; ++q) {
          if (skipped[q - i]) continue;
          const CallResult& p = results[q - i];
          const Op& op = ops[q];
          const std::uint64_t event = events++;
          const bool alloc = op.kind == Op::Kind::Alloc, request = op.kind == Op::Kind::FreeRequested;
          step_peaks(p);
          if (ids) {
            if (alloc)
              live_by_id.put(op.id, p.ptr);
            else if (!request)
              live_by_id.take(op.id);
          }
          if (!alloc && !p.ptr) continue;  // its allocation failed: nothing freed
          if (timeline) record_timeline(event, alloc ? 'a' : request ? 'r' : 'f', op, false);
          if (sample) record_usage(event, step, p.after);
        }
        m.events = events;
      }
      step_peak_allocated = step_a;
      step_peak_reserved = step_r;
      if (!failed) return k;  // the compute op that ends the run, or its end
      record_oom(ops[k], step, m.events++);
      step_ok = false;
      ++k;
      if (settings.on_oom == OnOom::SkipStep) skipping = true;
      if (settings.on_oom == OnOom::Stop) {
        stop = true;  // the frees not made leave their buffers live (released when the run ends)
        return k;
      }
      if (k == end || !is_buffer_call(ops[k].kind)) return k;
    }
  }

  // Allocated and reserved bytes after each of the last kUsageWindow events, kept in a ring
  // until the first OOM, when it becomes the picture of how the OOM came about (the step
  // series covers the whole run). A ring, not a growing series: the cost per event stays the
  // same. Per event the ring holds only the two byte counts (16 bytes, two stores); a sample's
  // event and step are those of the run of consecutive events it belongs to (usage_runs: a new
  // run at a step's first sample, and after an event with no sample), written once per run.
  static constexpr std::size_t kUsageWindow = std::size_t(1) << 17;
  static_assert((kUsageWindow & (kUsageWindow - 1)) == 0, "the ring's index wraps by a mask");
  // Sample g (g-th since the run began) at [2 (g mod kUsageWindow)]: allocated, then reserved.
  // Not initialised: only written samples are read. One huge page (2 MiB), not 512 page faults.
  struct UsageMemFree {
    void operator()(Bytes* p) const { HugePageAllocator<Bytes>().deallocate(p, 2 * kUsageWindow); }
  };
  std::unique_ptr<Bytes[], UsageMemFree> usage_mem{};
  std::uint64_t usage_count = 0;  // samples written
  struct UsageRun {
    std::uint64_t first_sample, first_event, step;  // sample first_sample + j is event first_event + j
  };
  // The runs, a ring too. Every run but the last has a sample (an empty last run is replaced by
  // the next), so the kUsageWindow samples of the window lie in at most kUsageWindow + 1 runs.
  static constexpr std::size_t kRunWindow = 2 * kUsageWindow;
  std::vector<UsageRun> usage_runs{};
  std::uint64_t usage_run_count = 0;
  UsageRun& usage_run(std::uint64_t r) { return usage_runs[r & (kRunWindow - 1)]; }
  // The event and step the next sample has if it continues the last run, set after each
  // sample or pass of samples (cheaper than working them out from the last run at each pass:
  // between compute ops a pass may hold one or two calls).
  std::uint64_t usage_next_event = 0, usage_next_step = 0;
  // Whether a sample of (event, step) would be the next one of the last run.
  bool usage_continues(std::uint64_t event, std::uint64_t step) {
    const bool continues = usage_run_count != 0 && event == usage_next_event && step == usage_next_step;
#ifndef NDEBUG
    if (usage_run_count) {
      const UsageRun& last = usage_run(usage_run_count - 1);
      assert(continues == (last.step == step && last.first_event + (usage_count - last.first_sample) == event));
    }
#endif
    return continues;
  }
  // A run whose first sample, sample number `count`, will be of (event, step).
  [[gnu::noinline]] void open_usage_run(std::uint64_t count, std::uint64_t event, std::uint64_t step) {
    if (usage_run_count && usage_run(usage_run_count - 1).first_sample == count) {
      usage_run(usage_run_count - 1) = {count, event, step};  // the last run had no sample
      return;
    }
    if (usage_runs.size() < kRunWindow)
      usage_runs.push_back({count, event, step});
    else
      usage_run(usage_run_count) = {count, event, step};
    ++usage_run_count;
  }
  void record_usage(std::uint64_t event, std::uint64_t step, const MemoryInUse& u) {
    if (!usage_continues(event, step)) open_usage_run(usage_count, event, step);
    store_usage(usage_mem.get() + 2 * (usage_count & (kUsageWindow - 1)), u);
    ++usage_count;
    usage_next_event = event + 1;
    usage_next_step = step;
  }
  // The ring (2 MiB) is written at every event and read only at the first OOM: the stores
  // bypass the cache (no read of each line before it is written, no eviction of the
  // allocator's data); keep_usage_up_to_oom fences before reading.
  static void store_usage(Bytes* at, const MemoryInUse& u) {
#if defined(__SSE2__) && defined(__x86_64__)
    static_assert(sizeof(Bytes) == sizeof(long long));
    auto* w = reinterpret_cast<long long*>(at);
    _mm_stream_si64(w, static_cast<long long>(u.allocated_bytes));
    _mm_stream_si64(w + 1, static_cast<long long>(u.reserved_bytes));
#else
    at[0] = u.allocated_bytes;
    at[1] = u.reserved_bytes;
#endif
  }
  // A call without a sample: a free (or free request) whose allocation failed (it frees
  // nothing). One comparison, not a branch on the kind (allocs and frees come in turn: a branch
  // on the kind would be mispredicted at every other event): a run of calls holds allocs, frees
  // and free requests only.
  static bool no_sample(const Op& op, const CallResult& p) {
    assert(is_buffer_call(op.kind));
    return (std::uint64_t(op.kind == Op::Kind::Alloc) | p.ptr) == 0;
  }
  // The usage ring's loop for a run of kRunApart calls or more: calls [q, end) of the run (ops
  // and results indexed alike), their bytes in use into the ring at sample number `count` on,
  // and the step's peaks over them, until a call with no sample, whose index it returns after
  // taking its peaks (end: none). A function of its own, not inlined into the runner's large
  // loop, where its values stay in registers (inlined, they were kept on the stack); a shorter
  // run, as between the compute ops of a transformer step, is sampled inline, where it costs
  // less than the call.
  static constexpr std::size_t kRunApart = 8;
  [[gnu::noinline]] static std::size_t sample_calls_apart(const Op* ops, const CallResult* res, std::size_t q,
                                                          const std::size_t end, Bytes* const ring,
                                                          std::uint64_t& count, Bytes& step_a, Bytes& step_r) {
    std::uint64_t c = count;
    Bytes a = step_a, r = step_r;
    for (; q < end; ++q) {
      const CallResult& p = res[q];
      a = std::max(a, p.after.allocated_bytes);
      r = std::max(r, p.after.reserved_bytes);
      if (__builtin_expect(no_sample(ops[q], p), 0)) break;
      store_usage(ring + 2 * (c & (kUsageWindow - 1)), p.after);
      ++c;
    }
    count = c;
    step_a = a;
    step_r = r;
    return q;
  }
  // The window in event order, ending with the OOM's own row.
  void keep_usage_up_to_oom(const UsageSample& at_oom) {
#if defined(__SSE2__) && defined(__x86_64__)
    _mm_sfence();  // the streamed samples are in memory before they are read
#endif
    const std::uint64_t n = std::min<std::uint64_t>(usage_count, kUsageWindow);
    std::vector<UsageSample> window;
    window.reserve(n + 1);
    if (n) {
      std::uint64_t g = usage_count - n;  // the window's first sample
      std::uint64_t r = usage_run_count - 1;  // the run that holds it: the last that starts at or before it
      while (usage_run(r).first_sample > g) --r;
      assert(usage_run_count - r <= kRunWindow && usage_run(r).first_sample <= g);
      for (; g < usage_count; ++g) {
        while (r + 1 < usage_run_count && usage_run(r + 1).first_sample <= g) ++r;
        const UsageRun& run = usage_run(r);
        const Bytes* at = usage_mem.get() + 2 * (g & (kUsageWindow - 1));
        window.push_back({run.first_event + (g - run.first_sample), run.step, at[0], at[1]});
      }
    }
    window.push_back(at_oom);
    result.oom_usage = std::move(window);
    result.oom_usage_window_events = kUsageWindow;
    usage_mem.reset();
    usage_runs = {};
  }

  void run(const ProgressFn& progress, std::uint64_t repeat_index) {
    ComputeContext ctx;
    ctx.real_gpu = !device.simulated();
    ctx.stream = device.native_stream(0);
    ids_needed = ctx.real_gpu;
    ctx.buffer = [this](BufferId id) -> std::optional<DevPtr> {
      if (!ids_needed) throw std::logic_error("ComputeContext::buffer: buffers are looked up on a real GPU only");
      return live_by_id.find(id);
    };
    try {
      workload.prepare(ctx);
    } catch (const DeviceOutOfMemory& e) {
      record_setup_oom(e.what());
      return;
    }
    has_free_space = allocator.free_space().has_value();
    call_runner_ = call_runner(allocator);
    op_view.stride = sizeof(Op);
    op_view.kind_at = offsetof(Op, kind);
    op_view.bytes_at = offsetof(Op, bytes);
    op_view.stream_at = offsetof(Op, stream);
    op_view.slot_at = offsetof(Op, slot);
    assert(!usage_ring || (first_run && settings.oom_block_map));
    if (usage_ring) {
      usage_mem.reset(HugePageAllocator<Bytes>().allocate(2 * kUsageWindow));  // not initialised (above)
      usage_runs.reserve(1024);
    }
    // A workload of unknown length (a trace stream) runs until a step says it is the end.
    const std::uint64_t steps =
        settings.max_steps ? std::min(settings.max_steps, workload.num_steps()) : workload.num_steps();
    const std::uint64_t steps_known = steps == Workload::kUnknownSteps ? 0 : steps;
    bool stop = false, ended = false;
    if (!device.simulated()) device.synchronize();
    TickCalibration clock;
    clock.start();
    std::optional<StepOpsAhead> maker(std::in_place, workload, steps, need ? nullptr : need_tracker,
                                      settings.threads_beside);
    std::uint64_t step = 0, piece = 0;
    for (; step < steps && !stop; ++step) {
      bool skipping = false, step_ok = true, more = true;
      double step_real_tokens = 0, step_padded_tokens = 0;
      // The step's pieces (one, unless the workload gives it in pieces: StepInfo::more).
      for (bool first_piece = true; more && !stop; first_piece = false) {
        const TickClock::Ticks g = TickClock::now();
        const StepOpsAhead::Step& made = maker->get(piece++);
        if (made.slots_end > slot_ptr.size()) slot_ptr.resize(made.slots_end, 0);
        generation_ticks += TickClock::now() - g;
        if (made.info.end) {  // only ever a step's first piece
          ended = true;
          break;
        }
        more = made.info.more;
        step_real_tokens += made.info.real_tokens;
        step_padded_tokens += made.info.padded_tokens;
        if (first_piece) {
          ctx.step = step;
          const MemoryInUse u = allocator.in_use();  // what the step starts with counts for it
          step_peak_allocated = u.allocated_bytes;
          step_peak_reserved = u.reserved_bytes;
        }
        const Op* ops = made.ops.data();
        const std::size_t n_ops = made.ops.size();
        for (std::size_t i = 0; i < n_ops && !stop;) {
          if (is_buffer_call(ops[i].kind)) {
            i = run_allocator_ops(ops, n_ops, i, step, skipping, step_ok, stop);
            continue;
          }
          if (ops[i].kind == Op::Kind::EmptyCache) {
            empty_cache();
            ++i;
            continue;
          }
          // A run of compute ops, timed as one (between them the harness does nothing).
          std::size_t j = i + 1;
          while (j < n_ops && ops[j].kind == Op::Kind::Compute) ++j;
          if (!skipping) {
            const TickClock::Ticks t = TickClock::now();
            for (std::size_t k = i; k < j; ++k) {
              const ModeledKernel kernel = workload.compute(ops[k], ctx);
              // The sim's timeline; on a GPU a no-op unless its call log is on (GMB_CUDA_CALL_LOG).
              device.model_kernel(kernel.gpu_seconds, kernel.launch_seconds);
            }
            compute_ticks += TickClock::now() - t;
          }
          i = j;
        }
      }
      if (ended) break;
      const TickClock::Ticks t = TickClock::now();
      if (StepAware* hook = step_aware(allocator)) hook->end_of_step(step);  // periodic trims: allocator time
      alloc_ticks += TickClock::now() - t;
      if (step_ok && !more) {  // every piece run (an OOM that stops the run leaves the step unfinished)
        ++m.steps_completed;
        real_tokens += step_real_tokens;
        padded_tokens += step_padded_tokens;
      }
      if (first_run) {
        AllocatorStats s = allocator.stats();
        result.steps.push_back({step, s.allocated_bytes, s.reserved_bytes, s.peak_allocated_bytes,
                                s.peak_reserved_bytes, m.ooms, step_peak_allocated, step_peak_reserved,
                                need && step < need->step_peak_requested_bytes.size()
                                    ? need->step_peak_requested_bytes[step]
                                    : 0,
                                peak_reserved, allocated_at_peak_reserved});
      }
      if (progress) progress(repeat_index, step + 1, steps_known);
    }
    maker.reset();  // its worker is done with the workload before anything else happens to it
    // The tracker saw every step of the workload unless an OOM stopped the run early.
    need_complete = ended || (step == steps && !stop);
    const TickClock::Ticks sync_start = TickClock::now();
    if (!device.simulated()) device.synchronize();
    const TickClock::Ticks sync_ticks = TickClock::now() - sync_start;
    const double wall = clock.stop();
    m.event_generation_seconds = clock.seconds(generation_ticks);
    m.alloc_seconds = clock.seconds(alloc_ticks);
    m.compute_call_seconds = clock.seconds(compute_ticks);
    m.sync_seconds = clock.seconds(sync_ticks);
    m.harness_seconds = std::max(0.0, wall - m.alloc_seconds - m.compute_call_seconds - m.sync_seconds);
    m.modeled_call_seconds = device.counters().modeled_call_seconds;
    workload.finish();
    if (first_run) {
      result.recorded_ooms = workload.recorded_ooms();
      result.workload_notes = workload.notes();
    }
    AllocatorStats s = allocator.stats();
    m.peak_reserved_bytes = s.peak_reserved_bytes;
    m.peak_allocated_bytes = s.peak_allocated_bytes;
    m.peak_reserved_sampled_bytes = peak_reserved;
    m.allocated_at_peak_reserved_bytes = allocated_at_peak_reserved;
    m.fragmentation = peak_reserved ? 1.0 - double(allocated_at_peak_reserved) / double(peak_reserved) : 0.0;
    m.allocs = s.allocs;
    m.frees = s.frees;
    m.cache_hits = s.cache_hits;
    m.device_allocs = s.device_allocs;
    m.device_frees = s.device_frees;
    // On sim the time is modeled: the host's calls and the GPU's kernels on the device's
    // timeline, until both are done (devices/step_time_model.h).
    m.seconds = device.simulated() ? device.counters().modeled_elapsed_seconds() : wall;
    if (m.seconds > 0) {
      m.steps_per_s = double(m.steps_completed) / m.seconds;
      m.tokens_per_s = real_tokens / m.seconds;
      m.padded_tokens_per_s = padded_tokens / m.seconds;
    }
    for (const auto& [key, value] : allocator.memory_stats())
      if (key == "active_bytes.all.peak" && value >= 0) m.peak_active_bytes = static_cast<Bytes>(value);
    if (first_run) {
      result.memory_stats = allocator.memory_stats();
      result.memory_summary = allocator.memory_summary();
    }
    // Release what is still live so the allocator shuts down cleanly (the harness's doing, not
    // the workload's: not reported to an event sink, nor among the device calls kept).
    if (event_gate) event_gate->close();
    if (recorder) *settings.device_calls = recorder->calls();
    for (DevPtr& ptr : slot_ptr)
      if (ptr) allocator.deallocate(std::exchange(ptr, 0));
    live_by_id.clear();
  }
};

// The usage after each event up to the first OOM of a first run on sim, which kept none
// (CaseRun::usage_ring): the case again on a fresh device and allocator, untimed and not
// reported, stopping at its first OOM, with the ring on. That OOM must be `want`, the first
// run's (the sim is deterministic); where it is not, or the run fails, the case says so in its
// notes instead of showing another run's usage.
void usage_up_to_first_oom(const CaseSpec& spec, const RunSettings& settings,
                           const std::function<std::unique_ptr<Device>()>& make_case_device,
                           const AllocatorOptions& options, const UsageSample& want, CaseResult& result) {
  // As the first run was made (a timeline too: its calls are one at a time); it reports nothing
  // (no event gate: the CaseRun below gets none).
  RunSettings again = settings;
  again.on_oom = OnOom::Stop;
  again.on_device_ready = nullptr;
  CaseResult scratch;
  bool same = false;
  try {
    auto device = make_case_device();
    auto allocator = make_allocator(spec.allocator, *device, options);
    auto workload = spec.make_workload();
    NeedTracker unused;  // the need is known (run_case computed it after the first run)
    CaseRun rerun{again, *device, *allocator, *workload, result.need.get(), &unused, scratch, true, nullptr};
    rerun.usage_ring = true;
    rerun.run({}, 0);
    const auto& w = scratch.oom_usage;
    same = !w.empty() && w.back().event == want.event && w.back().step == want.step &&
           w.back().allocated_bytes == want.allocated_bytes && w.back().reserved_bytes == want.reserved_bytes;
  } catch (const std::exception&) {
    same = false;
  }
  if (same) {
    result.oom_usage = std::move(scratch.oom_usage);
    result.oom_usage_window_events = scratch.oom_usage_window_events;
  } else {
    result.workload_notes.push_back(kUsageNotKeptNote);
  }
}

}  // namespace

CaseResult run_case(const CaseSpec& spec, const DeviceSpec& device_spec, const RunSettings& settings,
                    const ProgressFn& progress) {
  CaseResult result;
  result.allocator = spec.allocator;
  result.options = spec.options;
  result.allocator_label = allocator_label(spec.allocator, spec.options);
  // A case whose device cannot be made (a ballast the driver refuses) still names its workload.
  const auto fail = [&](const std::exception& e) {
    result.error = e.what();
    if (result.workload_label.empty()) {
      const auto workload = spec.make_workload();
      result.workload = workload->kind();
      result.workload_label = workload->label();
      result.label = result.allocator_label + " x " + result.workload_label;
    }
  };
  result.need = spec.need;
  // Without a need given: on the GPU one pass over a workload of its own, apart from the timed
  // runs (nothing is added to the thread that calls the allocator); on sim the first run's own
  // steps, read once (a pass of its own only when an OOM stopped that run early).
  if (!result.need && resolve_device(device_spec.choice) != DeviceChoice::Sim) {
    auto workload = spec.make_workload();
    result.need = std::make_shared<const WorkloadNeed>(compute_workload_need(*workload, settings.max_steps));
  }
  // A capacity is the caching allocator's memory limit, PyTorch's memory fraction of a larger
  // card (caching_allocator.h says why that differs from a card of the capacity): the sim gets
  // the H200's card, either device one large page above the limit where PyTorch can map it.
  DeviceSpec case_device = device_spec;
  AllocatorOptions options = spec.options;
  Bytes overshoot = 0;
  const bool capacity_is_limit =
      spec.allocator == "caching" && device_spec.capacity_bytes && caching_capacity_is_limit(options);
  if (capacity_is_limit) {
    // Within the largest device modeled (at a capacity of kMaxDeviceBytes there is no room above
    // the limit), and never an overflow, whatever large_segment_size_mb says.
    overshoot = std::min(caching_limit_overshoot_bytes(options),
                         kMaxDeviceBytes - std::min(device_spec.capacity_bytes, kMaxDeviceBytes));
    case_device.capacity_bytes += overshoot;
    case_device.card_bytes = kH200CardBytes;
  }
  // A bound holds no device memory: it runs on a simulated device of the capacity the case has.
  const AllocatorEntry* entry = find_allocator(spec.allocator);
  if (entry && entry->traits.lower_bound && resolve_device(device_spec.choice) != DeviceChoice::Sim) {
    case_device.choice = DeviceChoice::Sim;
    try {
      case_device.capacity_bytes = describe_device(device_spec).capacity_bytes;
    } catch (const DeviceError& e) {
      fail(e);
      return result;
    }
  }
  // Each run's device, made afresh (options take the memory limit it leaves).
  auto make_case_device = [&] {
    auto device = make_device(case_device);
    if (capacity_is_limit) options["memory_limit_bytes"] = std::to_string(device->info().capacity_bytes - overshoot);
    if (device->simulated() && !settings.segment_placements.empty())
      device = std::make_unique<RecordedPlacementDevice>(std::move(device), settings.segment_placements);
    return device;
  };
  for (std::uint64_t r = 0; r < std::max<std::uint64_t>(settings.repeat, 1); ++r) {
    try {
      auto device = make_case_device();
      auto workload = spec.make_workload();
      // With device calls kept, the allocator runs on a recording device, each call marked with
      // the allocator's calls so far (RunSettings::device_calls).
      std::optional<RecordingDevice> recording;
      const InspectableAllocator* counted = nullptr;  // the allocator whose calls mark the device's
      std::uint64_t empty_caches = 0;  // the workload's EmptyCache ops made so far: calls too
      if (r == 0 && settings.device_calls) {
        settings.device_calls->clear();
        recording.emplace(*device, [&counted, &empty_caches]() -> std::uint64_t {
          if (!counted) return 0;  // (made, or being destroyed: its calls are not kept)
          const AllocatorStats s = counted->stats();
          return s.allocs + s.frees + s.ooms + empty_caches;
        });
      }
      Device& base = recording ? static_cast<Device&>(*recording) : *device;
      // With an event sink, the allocator runs on a logging device inside a logging adaptor.
      std::optional<AllocatorEventGate> gate;
      std::optional<LoggingDevice> logging_device;
      if (r == 0 && settings.event_sink) {
        gate.emplace(*settings.event_sink);
        logging_device.emplace(base, *gate);
      }
      auto allocator = make_allocator(spec.allocator, logging_device ? static_cast<Device&>(*logging_device) : base,
                                      options);
      counted = allocator.get();
      struct Uncount {  // destroyed before the allocator: its destructor's calls ask no count
        const InspectableAllocator*& counted;
        ~Uncount() { counted = nullptr; }
      } uncount{counted};
      if (gate) allocator = std::make_unique<LoggingAllocator>(std::move(allocator), *gate);
      if (r == 0) {
        result.workload = workload->kind();
        result.workload_label = workload->label();
        result.label = result.allocator_label + " x " + result.workload_label;
        result.capacity_bytes = device->info().capacity_bytes - overshoot;
        result.capacity_requested_bytes = device_spec.capacity_bytes;
        result.ballast_bytes = device->info().ballast_bytes;
        result.throughput_modeled = device->simulated();
        result.memory_modeled = memory_modeled(spec.allocator, device->simulated());
        result.device = device->info();
        if (settings.on_device_ready) settings.on_device_ready(*result.device, options);
      }
      NeedTracker tracker;
      CaseRun run{settings, *device, *allocator, *workload, result.need.get(), &tracker, result, r == 0,
                  gate ? &*gate : nullptr};
      run.usage_ring = r == 0 && settings.oom_block_map && !device->simulated();
      run.recorder = recording ? &*recording : nullptr;
      run.empty_caches = &empty_caches;
      run.run(progress, r);
      if (!result.need) {
        if (run.need_complete) {
          result.need = std::make_shared<const WorkloadNeed>(tracker.finish());
        } else {
          auto whole = spec.make_workload();
          result.need = std::make_shared<const WorkloadNeed>(compute_workload_need(*whole, settings.max_steps));
        }
        run.finish_need(*result.need);
      }
      result.runs.push_back(run.m);
      if (run.usage_wanted) {
        // The sim's first run kept no usage before its first OOM: a second run to that OOM.
        usage_up_to_first_oom(spec, settings, make_case_device, options, *run.usage_wanted, result);
      }
    } catch (const DeviceError& e) {
      fail(e);
      break;
    } catch (const AllocatorModelLimit& e) {
      fail(e);
      break;
    }
  }
  if (!result.need) {  // the first run could not run: the need still belongs in the results
    auto workload = spec.make_workload();
    result.need = std::make_shared<const WorkloadNeed>(compute_workload_need(*workload, settings.max_steps));
  }
  return result;
}

}  // namespace gmb
