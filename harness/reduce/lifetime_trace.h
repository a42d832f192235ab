// A trace cut at its first OOM, seen as allocation lifetimes (an allocation and its free, if any,
// are one item), and a fast replay of any subset of them: what the reducer (reduce.h) searches
// over. Removing a lifetime removes its allocation and its free together, so a subset is always a
// valid trace (never a free without its allocation).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "allocators/allocator.h"
#include "harness/run/results.h"
#include "workloads/workload.h"

namespace gmb {

struct LifetimeTrace {
  struct Event {
    std::uint32_t lifetime;
    bool is_free;
  };
  std::vector<Event> events;               // in trace order; the last is the request that failed
  std::vector<Bytes> bytes;                // per lifetime: the request
  std::vector<StreamId> stream;            // per lifetime
  std::vector<std::uint64_t> input_event;  // per lifetime: its allocation's event in the input
  std::vector<char> freed;                 // per lifetime: freed before the request
  std::uint32_t request = 0;               // the lifetime of the request (never freed)

  std::size_t lifetimes() const { return bytes.size(); }
  // The first `events` Alloc/Free ops of `ops` (Compute ops skipped, not counted); the last one
  // taken must be an allocation. Throws std::invalid_argument for a free of an id not live.
  static LifetimeTrace from_ops(const std::vector<Op>& ops, std::uint64_t events);
  // The kept lifetimes as ops with sizes `bytes_of` (per lifetime), ids renumbered 0, 1, ... in
  // allocation order; source_line = the allocation's or free's event in the input + 1.
  std::vector<Op> to_ops(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of) const;
  std::uint64_t events_kept(const std::vector<char>& keep) const;
};

// One allocator at one capacity, on the simulated device.
struct ReplaySetup {
  std::string allocator;
  AllocatorOptions options;
  Bytes capacity_bytes = 0;
};

struct ReplayOutcome {
  enum class What { NoOom, OomAtRequest, OomElsewhere } what = What::NoOom;
  std::uint64_t event = 0;          // the failed event (kept events counted from 0)
  OomKind kind = OomKind::Capacity;  // OomAtRequest / OomElsewhere
  Bytes live_requested_bytes = 0;   // requested bytes live before the failed request
  Bytes limit_bytes = 0;            // what the allocator could take (device or its own limit)
};

// The kind of an OOM at the last event of a trace, as classify_oom (runner.cpp) judges it for a
// trace that ends there: capacity when the live requested bytes and the request together exceed
// what the allocator may take, fragmentation otherwise.
OomKind oom_kind_at_request(Bytes live_requested, Bytes request, Bytes limit);

// Replays subsets of one LifetimeTrace: a fresh simulated device and allocator per replay, the
// trace and the pointer table in memory (no file IO, nothing allocated per event).
class LifetimeReplayer {
 public:
  LifetimeReplayer(const LifetimeTrace& trace, ReplaySetup setup);
  // Replays the kept lifetimes with sizes bytes_of up to the first failed allocation. `events`,
  // when given, lists the indices of trace.events to walk (in order; a superset of the kept ones'
  // events): a reducer passes its current trace's, so a replay costs what the candidate holds,
  // not the whole input. reserved_growth, when given, gets per lifetime whether its allocation
  // grew the reserved bytes.
  ReplayOutcome run(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of,
                    const std::vector<std::uint32_t>* events = nullptr, std::vector<char>* reserved_growth = nullptr);
  // Replays the kept lifetimes and keeps the allocator as it stands at the end (at the failed
  // request, if one failed), with each lifetime's pointer (0: not live).
  struct Kept {
    std::unique_ptr<Device> device;        // declared first: destroyed after the allocator
    std::unique_ptr<InspectableAllocator> allocator;
    std::vector<DevPtr> pointers;          // per lifetime
    ReplayOutcome outcome;
  };
  Kept run_and_keep(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of);
  std::uint64_t replays() const { return replays_; }
  std::uint64_t events_replayed() const { return events_; }

 private:
  ReplayOutcome replay(InspectableAllocator& allocator, const std::vector<char>& keep, const std::vector<Bytes>& bytes_of,
                       const std::vector<std::uint32_t>* events, std::vector<char>* reserved_growth);
  template <typename Visit>
  void for_each_event(const std::vector<std::uint32_t>* events, Visit visit) const;
  std::unique_ptr<Device> make_device() const;
  const LifetimeTrace& trace_;
  ReplaySetup setup_;
  std::vector<DevPtr> ptr_;
  std::uint64_t replays_ = 0, events_ = 0;
};

}  // namespace gmb
