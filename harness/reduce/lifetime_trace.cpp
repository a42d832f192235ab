#include "harness/reduce/lifetime_trace.h"

#include <stdexcept>
#include <unordered_map>

#include <fmt/format.h>

#include "allocators/registry.h"

namespace gmb {

LifetimeTrace LifetimeTrace::from_ops(const std::vector<Op>& ops, std::uint64_t events) {
  LifetimeTrace t;
  std::unordered_map<BufferId, std::uint32_t> live;  // id -> lifetime
  std::uint64_t event = 0;
  for (const Op& op : ops) {
    if (event == events) break;
    // A free request changes no allocator's decisions, only what it counts as allocated.
    if (!is_buffer_call(op.kind) || op.kind == Op::Kind::FreeRequested) continue;
    if (op.kind == Op::Kind::Alloc) {
      if (t.bytes.size() >= UINT32_MAX) throw std::invalid_argument("more than 2^32 - 1 allocations before the OOM");
      const auto l = static_cast<std::uint32_t>(t.bytes.size());
      live[op.id] = l;  // an id allocated again starts a new lifetime
      t.bytes.push_back(op.bytes);
      t.stream.push_back(op.stream);
      t.input_event.push_back(event);
      t.freed.push_back(0);
      t.events.push_back({l, false});
    } else {
      auto it = live.find(op.id);
      if (it == live.end())
        throw std::invalid_argument(fmt::format("event {}: free of id {}, which is not live", event, op.id));
      t.freed[it->second] = 1;
      t.events.push_back({it->second, true});
      live.erase(it);
    }
    ++event;
  }
  if (t.events.empty() || t.events.back().is_free)
    throw std::invalid_argument(fmt::format("event {} is not an allocation: no request to reduce", event ? event - 1 : 0));
  t.request = t.events.back().lifetime;
  return t;
}

std::vector<Op> LifetimeTrace::to_ops(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of) const {
  std::vector<Op> out;
  std::vector<BufferId> id(lifetimes());
  BufferId next = 0;
  std::uint64_t event = 0;
  for (const Event& e : events) {
    const std::uint32_t l = e.lifetime;
    if (keep[l]) {
      Op op;
      op.kind = e.is_free ? Op::Kind::Free : Op::Kind::Alloc;
      if (!e.is_free) id[l] = next++;
      op.id = id[l];
      op.bytes = e.is_free ? 0 : bytes_of[l];
      op.stream = stream[l];
      op.source_line = event + 1;
      out.push_back(op);
    }
    ++event;
  }
  return out;
}

std::uint64_t LifetimeTrace::events_kept(const std::vector<char>& keep) const {
  std::uint64_t n = 0;
  for (std::size_t l = 0; l < lifetimes(); ++l)
    if (keep[l]) n += freed[l] ? 2 : 1;
  return n;
}

OomKind oom_kind_at_request(Bytes live_requested, Bytes request, Bytes limit) {
  // live + request > limit, without overflow (live <= limit: it was served).
  return live_requested > limit || request > limit - live_requested ? OomKind::Capacity : OomKind::Fragmentation;
}

LifetimeReplayer::LifetimeReplayer(const LifetimeTrace& trace, ReplaySetup setup)
    : trace_(trace), setup_(std::move(setup)), ptr_(trace.lifetimes(), 0) {}

std::unique_ptr<Device> LifetimeReplayer::make_device() const {
  SimDeviceOptions o;
  o.capacity_bytes = setup_.capacity_bytes;
  return make_sim_device(o);
}

template <typename Visit>
void LifetimeReplayer::for_each_event(const std::vector<std::uint32_t>* events, Visit visit) const {
  if (!events) {
    for (const LifetimeTrace::Event& e : trace_.events)
      if (!visit(e)) return;
    return;
  }
  for (std::uint32_t i : *events)
    if (!visit(trace_.events[i])) return;
}

ReplayOutcome LifetimeReplayer::replay(InspectableAllocator& allocator, const std::vector<char>& keep,
                                       const std::vector<Bytes>& bytes_of, const std::vector<std::uint32_t>* events,
                                       std::vector<char>* reserved_growth) {
  ++replays_;
  ReplayOutcome out;
  Bytes live = 0;  // requested bytes live; never above the capacity while every request is served
  std::uint64_t event = 0;
  bool failed = false;
  for_each_event(events, [&](const LifetimeTrace::Event& e) {
    const std::uint32_t l = e.lifetime;
    if (!keep[l]) return true;
    if (e.is_free) {
      allocator.deallocate(ptr_[l]);
      ptr_[l] = 0;
      live -= bytes_of[l];
    } else {
      const Bytes before = reserved_growth ? allocator.in_use().reserved_bytes : 0;
      const std::optional<DevPtr> p = allocator.allocate(bytes_of[l], trace_.stream[l]);
      if (!p) {
        const OomDetails d = allocator.last_oom();
        out.what = l == trace_.request ? ReplayOutcome::What::OomAtRequest : ReplayOutcome::What::OomElsewhere;
        out.event = event;
        out.live_requested_bytes = live;
        out.limit_bytes = d.limit_bytes && d.limit_bytes < setup_.capacity_bytes ? d.limit_bytes : setup_.capacity_bytes;
        out.kind = oom_kind_at_request(live, bytes_of[l], out.limit_bytes);
        failed = true;
        return false;
      }
      if (reserved_growth) (*reserved_growth)[l] = allocator.in_use().reserved_bytes > before;
      ptr_[l] = *p;
      live += bytes_of[l];
    }
    ++event;
    return true;
  });
  events_ += event + (failed ? 1 : 0);
  return out;
}

ReplayOutcome LifetimeReplayer::run(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of,
                                    const std::vector<std::uint32_t>* events, std::vector<char>* reserved_growth) {
  auto device = make_device();
  auto allocator = make_allocator(setup_.allocator, *device, setup_.options);
  return replay(*allocator, keep, bytes_of, events, reserved_growth);
}

LifetimeReplayer::Kept LifetimeReplayer::run_and_keep(const std::vector<char>& keep, const std::vector<Bytes>& bytes_of) {
  Kept k;
  k.device = make_device();
  k.allocator = make_allocator(setup_.allocator, *k.device, setup_.options);
  k.outcome = replay(*k.allocator, keep, bytes_of, nullptr, nullptr);
  k.pointers.assign(trace_.lifetimes(), 0);
  std::vector<char> live(trace_.lifetimes(), 0);
  std::uint64_t event = 0;
  for (const LifetimeTrace::Event& e : trace_.events) {  // which lifetimes were live when the replay stopped
    if (!keep[e.lifetime]) continue;
    if (k.outcome.what != ReplayOutcome::What::NoOom && event == k.outcome.event) break;
    live[e.lifetime] = !e.is_free;
    ++event;
  }
  for (std::size_t l = 0; l < live.size(); ++l)
    if (live[l]) k.pointers[l] = ptr_[l];
  return k;
}

}  // namespace gmb
