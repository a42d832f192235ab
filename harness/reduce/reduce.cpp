#include "harness/reduce/reduce.h"

#include <chrono>

#include <fmt/format.h>

#include "allocators/registry.h"
#include "common/units.h"

namespace gmb {

namespace {

struct BudgetSpent {
  std::string why;
};

class Reducer {
 public:
  Reducer(const LifetimeTrace& trace, const ReduceSettings& settings, OomKind kind, std::uint64_t input_events)
      : trace_(trace),
        settings_(settings),
        kind_(kind),
        target_(trace, settings.target),
        keep_(trace.lifetimes(), 1),
        bytes_(trace.bytes),
        start_(std::chrono::steady_clock::now()) {
    if (settings.contrast) {
      ReplaySetup c = settings.target;
      c.options = *settings.contrast;
      contrast_.emplace(trace, c);
    }
    active_.resize(trace.events.size());
    for (std::uint32_t i = 0; i < active_.size(); ++i) active_[i] = i;
    progress_.input_events = input_events;
    progress_.events = trace.events.size();
  }

  // The candidate keep_/bytes_ is a reproducer: the OOM at the request, of the same kind, and
  // none under the contrast. A fragmentation OOM must also keep at least the input's room: the
  // live requested bytes and the request together no more than at the input's OOM (else larger
  // sizes could turn it into an OOM at the brink of the capacity, a different story).
  // Callers check the budget (spend) before they change keep_/bytes_ into a candidate, so that a
  // spent budget leaves the best trace so far in place.
  bool interesting() {
    const ReplayOutcome o = target_.run(keep_, bytes_, &active_);
    if (o.what != ReplayOutcome::What::OomAtRequest || o.kind != kind_) return false;
    if (kind_ == OomKind::Fragmentation) {
      if (!need_at_request_) need_at_request_ = o.live_requested_bytes;  // the input itself: the first test
      if (o.live_requested_bytes > *need_at_request_) return false;
    }
    if (!contrast_) return true;
    return contrast_->run(keep_, bytes_, &active_).what == ReplayOutcome::What::NoOom;
  }

  // keep_ holds a reproducer again: the events to walk are only its own from now on.
  void accepted() {
    std::vector<std::uint32_t> left;
    left.reserve(active_.size());
    for (std::uint32_t i : active_)
      if (keep_[trace_.events[i].lifetime]) left.push_back(i);
    active_ = std::move(left);
    progress_.events = active_.size();
  }

  // Delta debugging over `items` (kept lifetimes, in trace order): removes chunks of them while
  // the trace stays interesting, halving the chunk size down to single lifetimes; at size 1 it
  // repeats until a pass removes nothing (1-minimal: no single lifetime of `items` can go).
  bool ddmin(std::vector<std::uint32_t> items, const char* phase) {
    progress_.phase = phase;
    bool any = false;
    std::size_t chunk = std::max<std::size_t>(1, (items.size() + 1) / 2);
    while (!items.empty()) {
      bool removed = false;
      std::vector<std::uint32_t> left;  // the items kept during this pass
      for (std::size_t start = 0; start < items.size();) {
        const std::size_t end = std::min(items.size(), start + chunk);
        spend();
        for (std::size_t i = start; i < end; ++i) keep_[items[i]] = 0;
        if (interesting()) {
          removed = any = true;
          accepted();
        } else {
          for (std::size_t i = start; i < end; ++i) keep_[items[i]] = 1, left.push_back(items[i]);
        }
        start = end;
        report();
      }
      items = std::move(left);
      if (chunk == 1 && !removed) break;
      if (chunk > 1) chunk = (chunk + 1) / 2;
    }
    return any;
  }

  // Lifetimes that are never freed, neighbours in trace order, merged into one allocation of
  // their summed size (at the first one's place) while the trace stays interesting: a model's
  // weights or a batch's live activations that only fill memory become a few blocks. Groups of
  // half the items, then halving, down to pairs.
  bool merge() {
    progress_.phase = "merge";
    std::vector<std::uint32_t> items;
    for (std::uint32_t l = 0; l < trace_.lifetimes(); ++l)
      if (keep_[l] && !trace_.freed[l] && l != trace_.request) items.push_back(l);
    bool any = false;
    std::size_t group = std::max<std::size_t>(2, items.size() / 2);
    while (items.size() >= 2) {
      bool merged = false;
      std::vector<std::uint32_t> left;
      for (std::size_t start = 0; start < items.size();) {
        const std::size_t end = std::min(items.size(), start + group);
        Bytes sum = 0;
        bool fits = end - start >= 2;
        for (std::size_t i = start; i < end && fits; ++i) {
          fits = bytes_[items[i]] <= settings_.target.capacity_bytes - sum;
          if (fits) sum += bytes_[items[i]];
        }
        if (fits) {
          spend();
          const Bytes first = bytes_[items[start]];
          bytes_[items[start]] = sum;
          for (std::size_t i = start + 1; i < end; ++i) keep_[items[i]] = 0;
          if (interesting()) {
            merged = any = true;
            accepted();
            left.push_back(items[start]);
          } else {
            bytes_[items[start]] = first;
            for (std::size_t i = start + 1; i < end; ++i) keep_[items[i]] = 1;
            fits = false;
          }
          report();
        }
        if (!fits)
          for (std::size_t i = start; i < end; ++i) left.push_back(items[i]);
        start = end;
      }
      items = std::move(left);
      if (group == 2 && !merged) break;
      if (group > 2) group = (group + 1) / 2;
    }
    return any;
  }

  // Each kept size but the request's, in trace order, rounded to the coarsest power-of-two
  // multiple (down first, then up) that keeps the trace interesting; from the size's own power of
  // two down to 1/2048 of it, never below 512 bytes. Returns whether a size changed.
  bool coarsen() {
    progress_.phase = "coarsen";
    bool changed = false;
    for (std::uint32_t l = 0; l < trace_.lifetimes(); ++l) {
      if (!keep_[l] || l == trace_.request) continue;  // the failed request keeps its size: it is the user's
      const Bytes s = bytes_[l];
      if (s == 0) continue;
      int hi = 0;  // 2^hi > s
      while (hi < 64 && (s >> hi) != 0) ++hi;
      const int lo = std::max(9, hi - 11);
      bool done = false;
      for (int k = std::min(hi, 63); k >= lo && !done; --k) {
        const Bytes g = Bytes{1} << k;
        const Bytes down = s / g * g;
        const Bytes up = s % g == 0 ? s : (down > UINT64_MAX - g ? 0 : down + g);
        for (Bytes candidate : {down, up}) {
          if (candidate == 0 || candidate == s) continue;
          spend();
          bytes_[l] = candidate;
          if (interesting()) {
            done = changed = true;
            break;
          }
          bytes_[l] = s;
        }
        report();
        if (s % g == 0) break;  // already a multiple of this power of two: nothing finer to try
      }
    }
    return changed;
  }

  void run() {
    if (!interesting()) throw ReduceError("internal error: the trace cut at its OOM does not reproduce it");
    // Lifetimes that ended before the OOM and never made the allocator take memory from the
    // device are the likeliest to go: ddmin over them alone first, the others held.
    std::vector<char> grew(trace_.lifetimes(), 0);
    target_.run(keep_, bytes_, &active_, &grew);
    std::vector<std::uint32_t> freed_plain;
    for (std::uint32_t l = 0; l < trace_.lifetimes(); ++l)
      if (l != trace_.request && trace_.freed[l] && !grew[l]) freed_plain.push_back(l);
    ddmin(freed_plain, "ddmin (freed lifetimes)");
    // Then removal, merging and coarsening in turn until a round changes nothing (each can make
    // room for the others); the last round's ddmin found no single lifetime to remove.
    for (int round = 0; round < 8; ++round) {
      std::vector<std::uint32_t> all;
      for (std::uint32_t l = 0; l < trace_.lifetimes(); ++l)
        if (keep_[l] && l != trace_.request) all.push_back(l);
      bool changed = ddmin(all, "ddmin");
      changed = merge() || changed;
      if (settings_.coarsen) changed = coarsen() || changed;
      if (!changed) break;
    }
  }

  const std::vector<char>& keep() const { return keep_; }
  const std::vector<Bytes>& bytes() const { return bytes_; }
  std::uint64_t replays() const { return target_.replays() + (contrast_ ? contrast_->replays() : 0); }
  std::uint64_t events_replayed() const {
    return target_.events_replayed() + (contrast_ ? contrast_->events_replayed() : 0);
  }
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  void spend() {
    if (settings_.max_replays && replays() >= settings_.max_replays) throw BudgetSpent{"replay limit"};
    if (settings_.max_seconds > 0 && seconds() >= settings_.max_seconds) throw BudgetSpent{"time limit"};
  }
  void report() {
    if (!settings_.progress) return;
    progress_.replays = replays();
    progress_.seconds = seconds();
    settings_.progress(progress_);
  }

  const LifetimeTrace& trace_;
  const ReduceSettings& settings_;
  OomKind kind_;
  LifetimeReplayer target_;
  std::optional<LifetimeReplayer> contrast_;
  std::vector<char> keep_;
  std::vector<Bytes> bytes_;
  std::vector<std::uint32_t> active_;  // indices of trace_.events kept by the best trace so far
  std::optional<Bytes> need_at_request_;  // live requested bytes before the input's failed request
  std::chrono::steady_clock::time_point start_;
  ReduceProgress progress_;
};

}  // namespace

ReduceResult reduce_oom(const std::vector<Op>& input, const ReduceSettings& settings) {
  ReduceResult r;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t replays = 0, events_replayed = 0;
  // The first OOM of the whole input.
  {
    LifetimeTrace whole;
    std::uint64_t n = 0;
    auto event_of = [](const Op& op) { return op.kind == Op::Kind::Alloc || op.kind == Op::Kind::Free; };
    for (const Op& op : input) n += event_of(op);
    r.input_events = n;
    // A trace that ends with a free has no request at its end: the whole-trace replay only needs
    // a final allocation to stand on, so look for the OOM on the prefix up to the last allocation.
    std::uint64_t last_alloc = 0, event = 0;
    for (const Op& op : input) {
      if (!event_of(op)) continue;
      if (op.kind == Op::Kind::Alloc) last_alloc = event + 1;
      ++event;
    }
    if (last_alloc == 0) throw ReduceError("the trace has no allocation");
    whole = LifetimeTrace::from_ops(input, last_alloc);
    LifetimeReplayer replayer(whole, settings.target);
    const ReplayOutcome o = replayer.run(std::vector<char>(whole.lifetimes(), 1), whole.bytes);
    replays += replayer.replays();
    events_replayed += replayer.events_replayed();
    if (o.what == ReplayOutcome::What::NoOom)
      throw NoOomError(fmt::format("the trace runs without an OOM under {} at {}: nothing to reduce",
                                    allocator_label(settings.target.allocator, settings.target.options),
                                    format_bytes(settings.target.capacity_bytes)));
    r.oom_event = o.event;
    r.kind = o.kind;
  }
  const LifetimeTrace trace = LifetimeTrace::from_ops(input, r.oom_event + 1);
  r.request_bytes = trace.bytes[trace.request];
  Reducer reducer(trace, settings, r.kind, r.input_events);
  if (settings.contrast) {
    ReplaySetup c = settings.target;
    c.options = *settings.contrast;
    LifetimeReplayer check(trace, c);
    const ReplayOutcome o = check.run(std::vector<char>(trace.lifetimes(), 1), trace.bytes);
    replays += check.replays();
    events_replayed += check.events_replayed();
    if (o.what != ReplayOutcome::What::NoOom)
      throw ReduceError(fmt::format("the trace up to its OOM (event {}) also runs out of memory under {} (at event "
                                    "{}): no contrast to keep",
                                    r.oom_event, allocator_label(settings.target.allocator, *settings.contrast),
                                    o.event));
  }
  try {
    reducer.run();
  } catch (const BudgetSpent& b) {
    r.stopped_by = b.why;
  }
  r.ops = trace.to_ops(reducer.keep(), reducer.bytes());
  r.replays = replays + reducer.replays();
  r.events_replayed = events_replayed + reducer.events_replayed();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace gmb
