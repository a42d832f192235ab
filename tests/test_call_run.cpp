// CallRunner (allocators/call_run.h) on the caching allocator: run_calls must make exactly the
// decisions of allocate/deallocate called one by one (the replay loop of the runner uses it),
// including where it keeps blocks by slot and a caller mixes the two (deallocate of a pointer
// run_calls allocated, a slot allocated twice), an OOM in the middle, and the early stop at the
// mark.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "allocators/caching/caching_allocator.h"
#include "allocators/call_run.h"
#include "devices/device.h"

namespace gmb {
namespace {

struct Call {
  std::uint8_t kind;  // CallView::kAllocate / kDeallocate / kFreeRequested
  Bytes bytes;
  StreamId stream;
  std::uint32_t slot;
};

CallView view_of(const std::vector<Call>& calls, std::size_t first) {
  return CallView{reinterpret_cast<const unsigned char*>(calls.data() + first), sizeof(Call), offsetof(Call, kind),
                  offsetof(Call, bytes), offsetof(Call, stream), offsetof(Call, slot)};
}

struct Side {
  explicit Side(const std::string& conf, Bytes capacity) {
    SimDeviceOptions o;
    o.capacity_bytes = capacity;
    device = make_sim_device(o);
    AllocatorOptions opts;
    if (!conf.empty()) opts["alloc_conf"] = conf;
    alloc = make_caching_allocator(*device, opts);
  }
  std::unique_ptr<Device> device;
  std::unique_ptr<InspectableAllocator> alloc;
  std::vector<DevPtr> slot_ptr = std::vector<DevPtr>(64, 0);
  // The slots whose buffer's free was requested (and not made), whichever way the calls went.
  std::set<std::uint32_t> requested;
  void note(const Call& c) {
    if (c.kind == CallView::kFreeRequested)
      requested.insert(c.slot);
    else
      requested.erase(c.slot);
  }
  // Blocks waiting on another stream that a retry took back outside run_calls' slots (those of
  // the pointer API): their slots, among those requested, forget them.
  void forget_returned_early() {
    for (DevPtr early : alloc->take_returned_early())
      for (std::uint32_t k : requested)
        if (slot_ptr[k] == early) {
          slot_ptr[k] = 0;
          break;
        }
  }
};

// A random mix over 63 slots: mostly frees of live slots and allocs into free ones, now and
// then an alloc into a live slot (its buffer stays live) and a zero-byte alloc; two streams.
std::vector<Call> random_calls(std::uint64_t seed, std::size_t n) {
  std::mt19937_64 rng(seed);
  std::vector<Call> calls;
  std::vector<bool> live(64, false), requested(64, false);
  for (std::size_t i = 0; i < n; ++i) {
    const auto slot = static_cast<std::uint32_t>(1 + rng() % 63);
    const bool again = rng() % 50 == 0;
    if (live[slot] && !again) {
      // One live buffer in eight is freed while another stream uses it: its free request
      // first, its deallocate when the slot comes up again.
      if (!requested[slot] && rng() % 8 == 0) {
        calls.push_back({CallView::kFreeRequested, 0, 0, slot});
        requested[slot] = true;
        continue;
      }
      calls.push_back({CallView::kDeallocate, 0, 0, slot});
      live[slot] = requested[slot] = false;
      continue;
    }
    requested[slot] = false;  // allocated again: the requested buffer stays live, by address
    const std::uint64_t r = rng();
    Bytes bytes = r % 20 == 0 ? (Bytes{2} << 20) << (r >> 8) % 6 : (Bytes{512} << (r >> 8) % 12) + (r >> 20) % 512;
    if (r % 97 == 0) bytes = 0;
    calls.push_back({CallView::kAllocate, bytes, static_cast<StreamId>((r >> 30) & 1), slot});
    live[slot] = true;
  }
  return calls;
}

void expect_same_state(const Side& a, const Side& b, std::size_t at) {
  EXPECT_EQ(a.alloc->memory_stats(), b.alloc->memory_stats()) << "after call " << at;
  EXPECT_EQ(a.alloc->stats().cache_hits, b.alloc->stats().cache_hits) << "after call " << at;
  const auto sa = a.alloc->block_map(), sb = b.alloc->block_map();
  ASSERT_EQ(sa.size(), sb.size()) << "after call " << at;
  for (std::size_t s = 0; s < sa.size(); ++s) {
    EXPECT_EQ(sa[s].address, sb[s].address);
    ASSERT_EQ(sa[s].blocks.size(), sb[s].blocks.size());
    for (std::size_t k = 0; k < sa[s].blocks.size(); ++k) {
      EXPECT_EQ(sa[s].blocks[k].offset, sb[s].blocks[k].offset);
      EXPECT_EQ(sa[s].blocks[k].allocated, sb[s].blocks[k].allocated);
    }
  }
}

// Runs `calls` on `one` call by call and on `many` through run_calls in runs of `run` calls
// (every `mix`-th call of a run made by deallocate/allocate on `many` too), with OOMs where the
// capacity is short; compares every result.
void run_both(const std::string& conf, Bytes capacity, std::size_t run, std::size_t mix, std::uint64_t seed) {
  const std::vector<Call> calls = random_calls(seed, 4000);
  // highs: the same runs through run_calls_highs, which must make the same calls and report
  // the maxima and the last bytes in use of many's per-call results.
  Side one(conf, capacity), many(conf, capacity), highs(conf, capacity);
  CallRunner* runner = call_runner(*many.alloc);
  ASSERT_NE(runner, nullptr) << "caching implements CallRunner";
  CallRunner* highs_runner = call_runner(*highs.alloc);
  CallHighs h{{0, 0}, {0, 0}};
  std::size_t ooms = 0;
  CallResult results[64];
  for (std::size_t i = 0; i < calls.size();) {
    // The reference: one call.
    auto one_call = [&](Side& s, const Call& c) -> std::optional<DevPtr> {
      if (c.kind == CallView::kAllocate) {
        std::optional<DevPtr> p = s.alloc->allocate(c.bytes, c.stream);
        s.forget_returned_early();
        s.note(c);
        if (p) s.slot_ptr[c.slot] = *p;
        return p;
      }
      s.note(c);
      if (c.kind == CallView::kFreeRequested) {
        const DevPtr p = s.slot_ptr[c.slot];
        if (p) s.alloc->free_requested(p);
        return p;
      }
      const DevPtr p = s.slot_ptr[c.slot];
      s.slot_ptr[c.slot] = 0;
      if (p) s.alloc->deallocate(p);
      return p;
    };
    if (mix && i % mix == 0) {  // the caller mixes: this call made on both one by one
      EXPECT_EQ(one_call(one, calls[i]).has_value(), one_call(many, calls[i]).has_value()) << "call " << i;
      one_call(highs, calls[i]);
      ++i;
      continue;
    }
    const std::size_t n = std::min(run, calls.size() - i);
    bool failed = false, highs_failed = false;
    const std::size_t done = runner->run_calls(view_of(calls, i), n, many.slot_ptr.data(), results,
                                               MemoryInUse{~Bytes{0}, ~Bytes{0}}, failed);
    for (std::size_t k = i; k < i + done; ++k) many.note(calls[k]);
    many.forget_returned_early();
    const CallHighs h_before = h;
    ASSERT_EQ(highs_runner->run_calls_highs(view_of(calls, i), n, highs.slot_ptr.data(),
                                            MemoryInUse{~Bytes{0}, ~Bytes{0}}, h, highs_failed),
              done);
    EXPECT_EQ(highs_failed, failed);
    for (std::size_t k = i; k < i + done; ++k) highs.note(calls[k]);
    highs.forget_returned_early();
    MemoryInUse want_high = h_before.high, want_last = h_before.last;
    for (std::size_t k = 0; k < done; ++k) {
      want_high.allocated_bytes = std::max(want_high.allocated_bytes, results[k].after.allocated_bytes);
      want_high.reserved_bytes = std::max(want_high.reserved_bytes, results[k].after.reserved_bytes);
      want_last = results[k].after;
    }
    EXPECT_EQ(h.high.allocated_bytes, want_high.allocated_bytes) << "call " << i;
    EXPECT_EQ(h.high.reserved_bytes, want_high.reserved_bytes) << "call " << i;
    EXPECT_EQ(h.last.allocated_bytes, want_last.allocated_bytes) << "call " << i;
    EXPECT_EQ(h.last.reserved_bytes, want_last.reserved_bytes) << "call " << i;
    ASSERT_LE(done, n);
    ASSERT_TRUE(done == n || failed) << "stops early only at a failed allocation, the mark being above all";
    for (std::size_t k = 0; k < done; ++k) {
      const std::optional<DevPtr> p = one_call(one, calls[i + k]);
      ASSERT_TRUE(p.has_value()) << "call " << i + k << " failed one by one but not in run_calls";
      EXPECT_EQ(results[k].ptr, *p) << "call " << i + k;
      EXPECT_EQ(results[k].after.allocated_bytes, one.alloc->in_use().allocated_bytes) << "call " << i + k;
      EXPECT_EQ(results[k].after.reserved_bytes, one.alloc->in_use().reserved_bytes) << "call " << i + k;
    }
    i += done;
    if (failed) {
      ++ooms;
      const DevPtr before = many.slot_ptr[calls[i].slot];
      EXPECT_FALSE(one_call(one, calls[i]).has_value()) << "call " << i << " failed in run_calls only";
      EXPECT_EQ(many.slot_ptr[calls[i].slot], before) << "a failed allocation leaves its slot";
      ++i;
    }
    expect_same_state(one, many, i);
    expect_same_state(one, highs, i);
    EXPECT_EQ(one.slot_ptr, many.slot_ptr);
    EXPECT_EQ(one.slot_ptr, highs.slot_ptr);
  }
  if (capacity < GiB) {
    EXPECT_GT(ooms, 0u) << "the capacity was meant to be short";
  }
  // What is still live is given back by pointer (as the runner does when a run ends).
  for (std::size_t s = 0; s < one.slot_ptr.size(); ++s) {
    if (one.slot_ptr[s]) one.alloc->deallocate(one.slot_ptr[s]);
    if (many.slot_ptr[s]) many.alloc->deallocate(many.slot_ptr[s]);
    if (highs.slot_ptr[s]) highs.alloc->deallocate(highs.slot_ptr[s]);
  }
  expect_same_state(one, many, calls.size());
  expect_same_state(one, highs, calls.size());
}

TEST(CallRun, CachingRunCallsMakesTheCallsDecisions) { run_both("", 80 * GiB, 64, 0, 1); }
TEST(CallRun, CachingRunCallsUnderOoms) { run_both("", 160 * MiB, 64, 0, 2); }
TEST(CallRun, CachingRunCallsMixedWithSingleCalls) { run_both("", 160 * MiB, 17, 5, 3); }
TEST(CallRun, CachingRunCallsExpandableSegments) { run_both("expandable_segments:True", 200 * MiB, 64, 7, 4); }
TEST(CallRun, CachingRunCallsMaxSplitSize) { run_both("max_split_size_mb:20", 160 * MiB, 33, 0, 5); }

// Two allocs, a free, a 1 MiB alloc and a free, for the stops at the mark.
std::vector<Call> mark_calls() {
  return {{CallView::kAllocate, 4096, 0, 1},
          {CallView::kAllocate, 8192, 0, 2},
          {CallView::kDeallocate, 0, 0, 1},
          {CallView::kAllocate, 1 << 20, 0, 3},
          {CallView::kDeallocate, 0, 0, 2}};
}

TEST(CallRun, StopsAfterTheCallThatPassesTheMark) {
  Side s("", 80 * GiB);
  CallRunner* runner = call_runner(*s.alloc);
  ASSERT_NE(runner, nullptr);
  const std::vector<Call> calls = mark_calls();
  CallResult results[5];
  bool failed = true;
  // Nothing reserved yet: the first call reserves a 2 MiB segment, above a mark of 0.
  EXPECT_EQ(runner->run_calls(view_of(calls, 0), 4, s.slot_ptr.data(), results, MemoryInUse{0, 0}, failed), 1u);
  EXPECT_FALSE(failed);
  EXPECT_EQ(results[0].after.reserved_bytes, 2 * MiB);
  // At 2 MiB reserved and 4 KiB allocated: the next alloc raises allocated at the same reservation.
  EXPECT_EQ(runner->run_calls(view_of(calls, 1), 3, s.slot_ptr.data(), results, MemoryInUse{4096, 2 * MiB}, failed), 1u);
  // With the mark at the new point, the free and the 1 MiB alloc (in the same segment, more
  // allocated than the mark) run: the alloc passes it, and the free after it waits.
  EXPECT_EQ(
      runner->run_calls(view_of(calls, 2), 3, s.slot_ptr.data(), results, MemoryInUse{4096 + 8192, 2 * MiB}, failed),
      2u);
  EXPECT_NE(s.slot_ptr[2], 0u);
  EXPECT_EQ(results[1].after.allocated_bytes, 8192 + (Bytes{1} << 20));
  EXPECT_EQ(s.slot_ptr[1], 0u);
  EXPECT_NE(s.slot_ptr[3], 0u);
}

TEST(CallRun, RunCallsHighsStopsAfterTheCallThatPassesTheMark) {
  Side s("", 80 * GiB);
  CallRunner* runner = call_runner(*s.alloc);
  ASSERT_NE(runner, nullptr);
  const std::vector<Call> calls = mark_calls();
  CallHighs h{{0, 0}, {0, 0}};
  bool failed = true;
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 0), 4, s.slot_ptr.data(), MemoryInUse{0, 0}, h, failed), 1u);
  EXPECT_FALSE(failed);
  EXPECT_EQ(h.high.reserved_bytes, 2 * MiB);
  EXPECT_EQ(h.last.allocated_bytes, 4096u);
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 1), 4, s.slot_ptr.data(), MemoryInUse{4096, 2 * MiB}, h, failed),
            1u);
  EXPECT_EQ(h.high.allocated_bytes, 4096u + 8192u);
  // The free and the 1 MiB alloc (passes the mark), not the last free.
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 2), 3, s.slot_ptr.data(), MemoryInUse{4096 + 8192, 2 * MiB}, h,
                                    failed),
            2u);
  EXPECT_EQ(h.high.allocated_bytes, 8192 + (Bytes{1} << 20));
  EXPECT_EQ(h.last.allocated_bytes, 8192 + (Bytes{1} << 20));
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 4), 1, s.slot_ptr.data(), MemoryInUse{~Bytes{0}, ~Bytes{0}}, h,
                                    failed),
            1u);
  EXPECT_EQ(h.high.allocated_bytes, 8192 + (Bytes{1} << 20)) << "a free lowers no high";
  EXPECT_EQ(h.last.allocated_bytes, Bytes{1} << 20);
}

// An alloc, a record of another kind (the harness's compute op), an alloc.
std::vector<Call> calls_around_another_record() {
  constexpr std::uint8_t kOther = CallView::kFreeRequested + 1;
  return {{CallView::kAllocate, 4096, 0, 1}, {kOther, 0, 0, 0}, {CallView::kAllocate, 4096, 0, 2}};
}

TEST(CallRun, StopsAtARecordThatIsNotACall) {
  Side s("", 80 * GiB);
  CallRunner* runner = call_runner(*s.alloc);
  ASSERT_NE(runner, nullptr);
  const std::vector<Call> calls = calls_around_another_record();
  CallResult results[3];
  bool failed = true;
  EXPECT_EQ(runner->run_calls(view_of(calls, 0), 3, s.slot_ptr.data(), results, MemoryInUse{~Bytes{0}, ~Bytes{0}}, failed),
            1u);
  EXPECT_FALSE(failed);
  EXPECT_NE(s.slot_ptr[1], 0u);
  EXPECT_EQ(s.slot_ptr[2], 0u) << "the call after the other record is not made";
}

TEST(CallRun, RunCallsHighsStopsAtARecordThatIsNotACallWithTheHighsSoFar) {
  Side s("", 80 * GiB);
  CallRunner* runner = call_runner(*s.alloc);
  ASSERT_NE(runner, nullptr);
  const std::vector<Call> calls = calls_around_another_record();
  CallHighs h{{0, 0}, {0, 0}};
  bool failed = true;
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 0), 3, s.slot_ptr.data(), MemoryInUse{~Bytes{0}, ~Bytes{0}}, h,
                                    failed),
            1u);
  EXPECT_FALSE(failed);
  EXPECT_EQ(h.high.allocated_bytes, 4096u);
  EXPECT_EQ(h.high.reserved_bytes, 2 * MiB);
  EXPECT_EQ(h.last.allocated_bytes, 4096u);
  // Stopped at its first record: no call made, the highs as they were.
  const CallHighs before = h;
  EXPECT_EQ(runner->run_calls_highs(view_of(calls, 1), 2, s.slot_ptr.data(), MemoryInUse{~Bytes{0}, ~Bytes{0}}, h,
                                    failed),
            0u);
  EXPECT_EQ(h.high.allocated_bytes, before.high.allocated_bytes);
  EXPECT_EQ(h.last.allocated_bytes, before.last.allocated_bytes);
  EXPECT_EQ(s.slot_ptr[2], 0u);
}

}  // namespace
}  // namespace gmb
