#include "allocators/vmm_stitch/vmm_stitch_allocator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "allocators/caching/caching_allocator.h"
#include "allocators/option_parsing.h"
#include "allocators/vmm_stitch/free_runs.h"
#include "common/units.h"

namespace gmb {
namespace {

using vmm_stitch::FreeRuns;
using vmm_stitch::Run;

constexpr Bytes kSmallSize = 1 * MiB;        // PyTorch's small pool: requests up to 1 MiB
constexpr Bytes kGranularityStep = 2 * MiB;  // the H200's VMM granularity: chunks are multiples
constexpr Bytes kMaxGranularity = 1 * GiB;

struct StitchOptions {
  Bytes granularity = 2 * MiB;
  Bytes fragment_limit = 2 * MiB;
  double reuse_limit = 10;
  Bytes stitch_cache_limit = 1000 * GiB;
};

StitchOptions parse_stitch_options(const AllocatorOptions& o) {
  check_option_keys(o, vmm_stitch_options());
  StitchOptions s;
  s.granularity = option_size(o, "granularity", s.granularity);
  if (s.granularity == 0 || s.granularity % kGranularityStep != 0 || s.granularity > kMaxGranularity)
    throw OptionError("granularity", fmt::format("granularity {} is not a multiple of 2 MiB up to 1 GiB",
                                                 format_bytes(s.granularity)),
                      "2MiB, 4MiB, ... 1GiB");
  s.fragment_limit = option_size(o, "fragment_limit", s.fragment_limit);
  s.stitch_cache_limit = option_size(o, "stitch_cache_limit", s.stitch_cache_limit);
  if (auto it = o.find("reuse_limit"); it != o.end()) {
    const std::string& v = it->second;
    std::size_t used = 0;
    double r = 0;
    try {
      r = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (v.empty() || used != v.size() || !std::isfinite(r) || r < 1 || r > 1e6)
      throw OptionError("reuse_limit", fmt::format("'{}' is not a number from 1 to 1000000", v),
                        "a number >= 1, e.g. 10");
    s.reuse_limit = r;
  }
  return s;
}

class VmmStitchAllocator final : public InspectableAllocator {
 public:
  VmmStitchAllocator(Device& device, const StitchOptions& o)
      : device_(device), o_(o), chunk_(o.granularity),
        small_(make_caching_allocator(device, {})) {
    const Bytes device_granularity = device.vmm_granularity();
    if (device_granularity == 0 || chunk_ % device_granularity != 0)
      throw OptionError("granularity",
                        fmt::format("granularity {} is not a multiple of this device's VMM granularity ({})",
                                    format_bytes(chunk_), format_bytes(device_granularity)),
                        fmt::format("a multiple of {}", format_bytes(device_granularity)));
  }

  ~VmmStitchAllocator() override {
    bool synced = false;
    for (std::size_t s = 0; s < stitched_.size(); ++s)
      if (stitched_[s].alive) drop_stitched(s, synced);
    for (std::size_t g = 0; g < segments_.size(); ++g)
      if (segments_[g].alive) release_segment(g, synced);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (bytes == 0) return DevPtr{0};  // as `caching`: nullptr, not counted
    std::optional<DevPtr> p = bytes <= kSmallSize ? allocate_small(bytes, stream) : allocate_large(bytes);
    if (p) ++allocs_;
    update_peaks();
    return p;
  }

  void deallocate(DevPtr ptr) override {
    auto it = live_.find(ptr);
    if (it == live_.end()) {
      if (ptr == 0) return;
      if (small_live_.erase(ptr)) ++frees_;
      small_->deallocate(ptr);  // the small pool's, or a bad pointer it reports
      update_peaks();
      return;
    }
    const Live l = it->second;
    live_.erase(it);
    ++frees_;
    allocated_ -= l.size;
    requested_ -= l.requested;
    if (!l.stitched) {
      free_chunks_of(l.owner, l.first, l.count);
    } else {
      Stitched& s = stitched_[l.owner];
      for (std::size_t i = 0; i < l.count; ++i) free_chunk(s.chunks[i]);
      s.live = false;
      s.released_at = ++clock_;
      cached_order_.emplace(s.released_at, l.owner);
      if (s.busy == 0) available_.insert(key_of(l.owner));
      collect_stitched();
    }
    update_peaks();
  }

  void empty_cache() override {
    small_->empty_cache();
    bool synced = false;
    while (!cached_order_.empty()) drop_stitched(cached_order_.begin()->second, synced);
    release_free_segments(synced);
    update_peaks();
  }

  AllocatorStats stats() const override {
    const AllocatorStats small = small_->stats();
    AllocatorStats s;
    s.allocated_bytes = small.allocated_bytes + allocated_;
    s.reserved_bytes = small.reserved_bytes + physical_bytes();
    s.requested_bytes = small.requested_bytes + requested_;
    s.peak_allocated_bytes = peak_allocated_;
    s.peak_reserved_bytes = peak_reserved_;
    s.segments = small.segments + live_segments_;
    s.allocs = allocs_;
    s.frees = frees_;
    s.cache_hits = small.cache_hits + hits_;
    s.device_allocs = small.device_allocs + segment_creates_;
    s.device_frees = small.device_frees + segment_releases_;
    s.ooms = ooms_;
    s.alloc_retries = small.alloc_retries + retries_;
    return s;
  }

  MemoryInUse in_use() const override {
    const MemoryInUse small = small_->in_use();
    return {small.allocated_bytes + allocated_, small.reserved_bytes + physical_bytes()};
  }

  OomDetails last_oom() const override { return oom_; }

  std::optional<FreeSpace> free_space() const override {
    FreeSpace f{runs_.free_chunks() * chunk_, largest_free_block(), allocated_, requested_};
    if (auto small = small_->free_space()) {
      f.free_bytes += small->free_bytes;
      f.allocated_bytes += small->allocated_bytes;
      f.requested_bytes += small->requested_bytes;
      f.largest_free_bytes = std::max(f.largest_free_bytes, small->largest_free_bytes);
    }
    return f;
  }

  // The segments with their chunks in runs of used and free ones; then the small pool's.
  std::vector<SegmentInfo> segments() const override {
    std::vector<SegmentInfo> out;
    for (const Segment& g : segments_) {
      if (!g.alive) continue;
      SegmentInfo info{g.base, g.chunks.size() * chunk_, 0, "vmm", {}};
      for (std::size_t i = 0; i < g.chunks.size();) {
        const bool used = chunks_[g.chunks[i]].used;
        std::size_t j = i;
        while (j < g.chunks.size() && chunks_[g.chunks[j]].used == used) ++j;
        info.blocks.push_back({i * chunk_, (j - i) * chunk_, used, true});
        i = j;
      }
      out.push_back(std::move(info));
    }
    for (SegmentInfo& s : small_->segments()) out.push_back(std::move(s));
    return out;
  }

  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override {
    auto i = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
    // Active = allocated here (no block waits for a stream): GMLake's own metric reads its peak.
    return {{"active_bytes.all.peak", i(peak_allocated_)},
            {"vmm.chunk_bytes", i(chunk_)},
            {"vmm.chunks", i(physical_bytes() / chunk_)},
            {"vmm.free_chunks", i(runs_.free_chunks())},
            {"vmm.segments", i(live_segments_)},
            {"vmm.stitches", i(stitches_)},
            {"vmm.stitched_block_reuses", i(stitched_reuses_)},
            {"vmm.stitched_blocks", i(live_stitched_)},
            {"vmm.stitched_bytes", i(stitched_bytes_)},
            {"vmm.stitched_blocks_collected", i(stitched_collected_)},
            {"vmm.chunk_creates", i(chunk_creates_)},
            {"vmm.chunk_releases", i(chunk_releases_)},
            {"small.reserved_bytes", i(small_->in_use().reserved_bytes)}};
  }

 private:
  struct Chunk {
    Device::PhysicalHandle handle = 0;
    std::size_t segment = 0, index = 0;  // where it is mapped first: its segment, at this index
    bool used = false;
    std::vector<std::size_t> stitched_in;  // the sBlocks that map it too
  };
  struct Segment {
    DevPtr base = 0;
    std::uint64_t rank = 0;  // creation order: ties between equal free runs go to the oldest
    std::vector<std::size_t> chunks;
    std::size_t used = 0;  // chunks in use
    bool alive = false;
  };
  struct Stitched {
    DevPtr base = 0;
    std::uint64_t rank = 0;  // creation order: ties between equal cached sBlocks go to the oldest
    std::vector<std::size_t> chunks;
    std::size_t busy = 0;       // its chunks in use (by it or by anyone else)
    bool live = false;          // handed out now (else cached)
    bool alive = false;
    std::uint64_t released_at = 0;
  };
  struct Live {
    Bytes size = 0, requested = 0;
    bool stitched = false;
    std::size_t owner = 0;          // segment, or sBlock when stitched
    std::size_t first = 0, count = 0;  // chunks: [first, first + count) of the segment, or the sBlock's first count
  };
  using StitchedKey = std::tuple<std::size_t, std::uint64_t, std::size_t>;  // chunks, rank, id

  // --- the small pool ---
  std::optional<DevPtr> allocate_small(Bytes bytes, StreamId stream) {
    std::optional<DevPtr> p = small_->allocate(bytes, stream);
    if (!p) {
      bool synced = false;
      if (release_free_segments(synced)) {
        ++retries_;
        p = small_->allocate(bytes, stream);
      }
    }
    if (!p) {
      record_oom(bytes, small_->last_oom().message);
      return std::nullopt;
    }
    small_live_.insert(*p);
    return p;
  }

  // --- the large path: see the header for the order ---
  std::optional<DevPtr> allocate_large(Bytes bytes) {
    const DeviceInfo& info = device_.info();
    const Bytes device = std::max(info.total_bytes, info.capacity_bytes);
    if (bytes > device) {  // before any rounding: no size arithmetic near 2^64
      record_oom(bytes, fmt::format("vmm_stitch: {} refused: larger than the whole device ({})",
                                    format_bytes(bytes), format_bytes(device)));
      return std::nullopt;
    }
    const std::size_t n = static_cast<std::size_t>((bytes + chunk_ - 1) / chunk_);
    const Bytes rounded = n * chunk_;
    if (auto p = from_free_run(n, bytes)) return hit(*p);
    if (auto p = from_cached_stitched(n, bytes)) return hit(*p);
    const bool stitchable = rounded >= o_.fragment_limit;
    if (stitchable && runs_.free_chunks() >= n) {
      if (auto p = stitch(n, bytes)) return hit(*p);
      return address_space_oom(bytes, n);
    }
    over_limit_ = 0;
    bool grown = grow(stitchable ? n - runs_.free_chunks() : n);
    if (!grown && free_cached_memory(stitchable)) {
      ++retries_;
      over_limit_ = 0;
      grown = grow(stitchable ? n - runs_.free_chunks() : n);
    }
    if (!grown && over_limit_)
      throw AllocatorModelLimit(fmt::format(
          "vmm_stitch's model keeps each physical chunk: at most {} live chunks ({} at the granularity of {}), "
          "and this request needs {} more; a larger granularity option covers more memory",
          kMaxLiveChunks, format_bytes(kMaxLiveChunks * chunk_), format_bytes(chunk_), over_limit_));
    if (!grown) {
      record_oom(bytes, fmt::format("vmm_stitch: out of memory allocating {} ({} chunks of {}): {} free chunks, "
                                    "the device refused the rest",
                                    format_bytes(bytes), n, format_bytes(chunk_), runs_.free_chunks()));
      return std::nullopt;
    }
    if (auto p = from_free_run(n, bytes)) return p;
    if (auto p = stitch(n, bytes)) return p;
    return address_space_oom(bytes, n);
  }

  std::optional<DevPtr> address_space_oom(Bytes bytes, std::size_t n) {
    record_oom(bytes, fmt::format("vmm_stitch: out of virtual address space stitching {} ({} chunks of {})",
                                  format_bytes(bytes), n, format_bytes(chunk_)));
    return std::nullopt;
  }

  // Before asking the device again: the small pool's cached segments go back, and (when the
  // request is not stitched from every free chunk anyway) the segments with no used chunk.
  // True when that gave memory back.
  bool free_cached_memory(bool stitchable) {
    const Bytes before = in_use().reserved_bytes;
    small_->empty_cache();
    bool synced = false;
    if (!stitchable) release_free_segments(synced);
    return in_use().reserved_bytes < before;
  }

  DevPtr hit(DevPtr p) {
    ++hits_;
    return p;
  }

  // A pBlock: the best-fitting free run, split.
  std::optional<DevPtr> from_free_run(std::size_t n, Bytes bytes) {
    const Run* run = runs_.best_fit(n);
    if (!run) return std::nullopt;
    const std::size_t g = run->segment, first = run->first;
    take_chunks_of(g, first, n);
    const DevPtr p = segments_[g].base + first * chunk_;
    add_live(p, Live{n * chunk_, bytes, false, g, first, n});
    return p;
  }

  // A cached sBlock of n to n x reuse_limit chunks, all free, best fit: its first n chunks.
  std::optional<DevPtr> from_cached_stitched(std::size_t n, Bytes bytes) {
    auto it = available_.lower_bound({n, 0, 0});
    if (it == available_.end()) return std::nullopt;
    const std::size_t chunks = std::get<0>(*it), id = std::get<2>(*it);
    if (static_cast<long double>(chunks) > static_cast<long double>(n) * o_.reuse_limit) return std::nullopt;
    Stitched& s = stitched_[id];
    available_.erase(it);
    cached_order_.erase(s.released_at);
    s.live = true;
    for (std::size_t i = 0; i < n; ++i) take_chunk(s.chunks[i]);
    ++stitched_reuses_;
    add_live(s.base, Live{n * chunk_, bytes, true, id, 0, n});
    return s.base;
  }

  // An sBlock of n chunks from the free runs, largest first; the last run gives what is missing
  // from its low end. The free runs together hold n chunks.
  // nullopt (nothing taken) when no virtual range can be had, even after the cached sBlocks gave
  // theirs back.
  std::optional<DevPtr> stitch(std::size_t n, Bytes bytes) {
    std::optional<DevPtr> base = device_.reserve_address_range(n * chunk_);
    if (!base && !cached_order_.empty()) {
      bool synced = false;
      while (!cached_order_.empty()) drop_stitched(cached_order_.begin()->second, synced);
      base = device_.reserve_address_range(n * chunk_);
    }
    if (!base) return std::nullopt;
    std::vector<std::size_t> picked;
    picked.reserve(n);
    while (picked.size() < n) {
      const Run run = *runs_.by_size().rbegin();
      const std::size_t k = std::min(run.length, n - picked.size());
      const Segment& g = segments_[run.segment];
      for (std::size_t i = 0; i < k; ++i) picked.push_back(g.chunks[run.first + i]);
      take_chunks_of(run.segment, run.first, k);
    }
    const std::size_t id = new_stitched();
    Stitched& s = stitched_[id];
    s = Stitched{*base, ++made_, std::move(picked), n, true, true, 0};
    for (std::size_t i = 0; i < n; ++i) {
      device_.map_physical(s.base + i * chunk_, chunks_[s.chunks[i]].handle);
      chunks_[s.chunks[i]].stitched_in.push_back(id);
    }
    ++stitches_;
    ++live_stitched_;
    stitched_bytes_ += n * chunk_;
    add_live(s.base, Live{n * chunk_, bytes, true, id, 0, n});
    collect_stitched();
    return s.base;
  }

  // A new segment of n chunks, all free. False (nothing taken) when the device refuses one.
  bool grow(std::size_t n) {
    if (n == 0) return true;
    // The model keeps every chunk (its handle, its segment, the sBlocks that map it): a request
    // of terabytes at 2 MiB would take gigabytes of host memory and minutes, then the host's
    // memory killer. Past the limit nothing is asked of the device: where the device could not
    // hold it anyway this is the OOM it would be; otherwise allocate_large, once cached memory
    // is freed and it still does not fit, ends the case (AllocatorModelLimit).
    if (n > kMaxLiveChunks - (chunk_creates_ - chunk_releases_)) {
      const DeviceInfo& info = device_.info();
      if (physical_bytes() + Bytes{n} * chunk_ <= std::max(info.total_bytes, info.capacity_bytes)) over_limit_ = n;
      return false;
    }
    std::optional<DevPtr> base = device_.reserve_address_range(n * chunk_);
    if (!base) return false;
    std::vector<Device::PhysicalHandle> handles;
    handles.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      std::optional<Device::PhysicalHandle> h = device_.create_physical(chunk_);
      if (!h) {
        if (!handles.empty()) device_.synchronize();
        for (std::size_t j = 0; j < handles.size(); ++j) {
          device_.unmap_physical(*base + j * chunk_, chunk_);
          device_.release_physical(handles[j]);
        }
        device_.release_address_range(*base, n * chunk_);
        return false;
      }
      device_.map_physical(*base + i * chunk_, *h);
      handles.push_back(*h);
    }
    const std::size_t g = new_segment();
    Segment& seg = segments_[g];
    seg.base = *base;
    seg.rank = ++made_;
    seg.alive = true;
    seg.used = 0;
    seg.chunks.clear();
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t c = new_chunk();
      chunks_[c] = Chunk{handles[i], g, i, false, {}};
      seg.chunks.push_back(c);
    }
    chunk_creates_ += n;
    ++segment_creates_;
    ++live_segments_;
    runs_.give(g, seg.rank, 0, n);
    return true;
  }

  // --- chunk states: a chunk is used by one live block; the sBlocks that map it count it busy ---
  void take_chunks_of(std::size_t g, std::size_t first, std::size_t n) {
    Segment& seg = segments_[g];
    runs_.take(g, seg.rank, first, n);
    for (std::size_t i = first; i < first + n; ++i) mark(seg.chunks[i], true);
  }
  void free_chunks_of(std::size_t g, std::size_t first, std::size_t n) {
    Segment& seg = segments_[g];
    for (std::size_t i = first; i < first + n; ++i) mark(seg.chunks[i], false);
    runs_.give(g, seg.rank, first, n);
  }
  void take_chunk(std::size_t c) { take_chunks_of(chunks_[c].segment, chunks_[c].index, 1); }
  void free_chunk(std::size_t c) { free_chunks_of(chunks_[c].segment, chunks_[c].index, 1); }

  void mark(std::size_t c, bool used) {
    Chunk& chunk = chunks_[c];
    chunk.used = used;
    Segment& seg = segments_[chunk.segment];
    seg.used = used ? seg.used + 1 : seg.used - 1;
    for (std::size_t id : chunk.stitched_in) {
      Stitched& s = stitched_[id];
      const bool was_available = !s.live && s.busy == 0;
      s.busy = used ? s.busy + 1 : s.busy - 1;
      const bool available = !s.live && s.busy == 0;
      if (was_available && !available) available_.erase(key_of(id));
      if (!was_available && available) available_.insert(key_of(id));
    }
  }

  // --- giving memory back ---
  // Cached sBlocks beyond the limit, least recently released first.
  void collect_stitched() {
    bool synced = false;
    while (stitched_bytes_ > o_.stitch_cache_limit && !cached_order_.empty())
      drop_stitched(cached_order_.begin()->second, synced);
  }

  void drop_stitched(std::size_t id, bool& synced) {
    Stitched& s = stitched_[id];
    if (!synced) {  // cuMemUnmap does not wait for work still using the range
      device_.synchronize();
      synced = true;
    }
    for (std::size_t i = 0; i < s.chunks.size(); ++i) {
      device_.unmap_physical(s.base + i * chunk_, chunk_);
      auto& in = chunks_[s.chunks[i]].stitched_in;
      in.erase(std::find(in.begin(), in.end(), id));
    }
    device_.release_address_range(s.base, s.chunks.size() * chunk_);
    if (!s.live) {
      cached_order_.erase(s.released_at);
      if (s.busy == 0) available_.erase(key_of(id));
      ++stitched_collected_;
    }
    stitched_bytes_ -= s.chunks.size() * chunk_;
    --live_stitched_;
    s = Stitched{};
    unused_stitched_.push_back(id);
  }

  // Every segment with no used chunk and no live sBlock over it (the cached ones over it are
  // dropped first). True when one was released.
  bool release_free_segments(bool& synced) {
    bool released = false;
    for (std::size_t g = 0; g < segments_.size(); ++g) {
      Segment& seg = segments_[g];
      if (!seg.alive || seg.used != 0) continue;
      bool live_stitch = false;
      std::set<std::size_t> cached;
      for (std::size_t c : seg.chunks)
        for (std::size_t id : chunks_[c].stitched_in) {
          if (stitched_[id].live) live_stitch = true;
          cached.insert(id);
        }
      if (live_stitch) continue;
      for (std::size_t id : cached) drop_stitched(id, synced);
      release_segment(g, synced);
      released = true;
    }
    return released;
  }

  void release_segment(std::size_t g, bool& synced) {
    Segment& seg = segments_[g];
    if (!synced) {
      device_.synchronize();
      synced = true;
    }
    runs_.forget_segment(g, seg.rank);
    for (std::size_t i = 0; i < seg.chunks.size(); ++i) {
      device_.unmap_physical(seg.base + i * chunk_, chunk_);
      device_.release_physical(chunks_[seg.chunks[i]].handle);
      chunks_[seg.chunks[i]] = Chunk{};
      unused_chunks_.push_back(seg.chunks[i]);
    }
    chunk_releases_ += seg.chunks.size();
    ++segment_releases_;
    device_.release_address_range(seg.base, seg.chunks.size() * chunk_);
    seg = Segment{};
    --live_segments_;
    unused_segments_.push_back(g);
  }

  // --- bookkeeping ---
  void add_live(DevPtr p, const Live& l) {
    live_[p] = l;
    allocated_ += l.size;
    requested_ += l.requested;
  }

  Bytes physical_bytes() const { return (chunk_creates_ - chunk_releases_) * chunk_; }

  // The largest block one request could get without new memory: a free run, a free cached
  // sBlock, or all free chunks stitched (for requests of at least fragment_limit).
  Bytes largest_free_block() const {
    Bytes largest = runs_.largest() * chunk_;
    if (!available_.empty()) largest = std::max(largest, std::get<0>(*available_.rbegin()) * chunk_);
    const Bytes all = runs_.free_chunks() * chunk_;
    if (all >= o_.fragment_limit) largest = std::max(largest, all);
    return largest;
  }

  StitchedKey key_of(std::size_t id) const { return {stitched_[id].chunks.size(), stitched_[id].rank, id}; }

  std::size_t new_chunk() { return take_slot(chunks_, unused_chunks_); }
  std::size_t new_segment() { return take_slot(segments_, unused_segments_); }
  std::size_t new_stitched() { return take_slot(stitched_, unused_stitched_); }
  template <typename T>
  static std::size_t take_slot(std::vector<T>& v, std::vector<std::size_t>& unused) {
    if (!unused.empty()) {
      const std::size_t i = unused.back();
      unused.pop_back();
      return i;
    }
    v.emplace_back();
    return v.size() - 1;
  }

  void update_peaks() {
    const MemoryInUse u = in_use();
    peak_allocated_ = std::max(peak_allocated_, u.allocated_bytes);
    peak_reserved_ = std::max(peak_reserved_, u.reserved_bytes);
  }

  void record_oom(Bytes bytes, std::string message) {
    ++ooms_;
    const MemoryInUse u = in_use();
    oom_ = OomDetails{};
    oom_.requested_bytes = bytes;
    oom_.allocated_bytes = u.allocated_bytes;
    oom_.reserved_bytes = u.reserved_bytes;
    oom_.cached_bytes = u.reserved_bytes - u.allocated_bytes;
    oom_.largest_free_block = free_space()->largest_free_bytes;
    oom_.message = std::move(message);
  }

  static constexpr std::size_t kMaxLiveChunks = std::size_t{1} << 21;  // 4 TiB at 2 MiB
  std::size_t over_limit_ = 0;  // chunks the last grow() wanted past kMaxLiveChunks (0: none)
  Device& device_;
  StitchOptions o_;
  Bytes chunk_;
  FreeRuns runs_;
  std::unique_ptr<InspectableAllocator> small_;
  std::vector<Chunk> chunks_;
  std::vector<Segment> segments_;
  std::vector<Stitched> stitched_;
  std::vector<std::size_t> unused_chunks_, unused_segments_, unused_stitched_;
  std::set<StitchedKey> available_;                  // cached sBlocks with every chunk free
  std::map<std::uint64_t, std::size_t> cached_order_;  // cached sBlocks by release
  std::unordered_map<DevPtr, Live> live_;
  std::unordered_set<DevPtr> small_live_;
  Bytes allocated_ = 0, requested_ = 0, peak_allocated_ = 0, peak_reserved_ = 0, stitched_bytes_ = 0;
  std::uint64_t allocs_ = 0, frees_ = 0, hits_ = 0, ooms_ = 0, retries_ = 0, stitches_ = 0, stitched_reuses_ = 0,
                stitched_collected_ = 0, chunk_creates_ = 0, chunk_releases_ = 0, segment_creates_ = 0,
                segment_releases_ = 0, live_segments_ = 0,
                live_stitched_ = 0, clock_ = 0, made_ = 0;
  OomDetails oom_;
};

}  // namespace

std::vector<AllocatorOption> vmm_stitch_options() {
  return {{"granularity", "a multiple of 2 MiB up to 1 GiB, e.g. 2MiB"},
          {"fragment_limit", "a size such as 2MiB, 512MiB"},
          {"reuse_limit", "a number >= 1, e.g. 10"},
          {"stitch_cache_limit", "a size such as 1000GiB, or 0 for no cache"}};
}

void validate_vmm_stitch_options(const AllocatorOptions& options) { parse_stitch_options(options); }

std::unique_ptr<InspectableAllocator> make_vmm_stitch_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<VmmStitchAllocator>(device, parse_stitch_options(options));
}

}  // namespace gmb
