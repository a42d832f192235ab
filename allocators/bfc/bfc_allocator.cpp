#include "allocators/bfc/bfc_allocator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <set>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>

#include "allocators/bfc/bfc_bins.h"
#include "allocators/option_parsing.h"
#include "common/units.h"

namespace gmb {
namespace {

using namespace bfc;

struct BfcOptions {
  bool allow_growth = false;
  bool garbage_collection = true;
  double fraction = 0;     // 0: not set
  Bytes memory_limit = 0;  // 0: not set
};

BfcOptions parse_bfc_options(const AllocatorOptions& o) {
  check_option_keys(o, bfc_options());
  BfcOptions b;
  b.allow_growth = option_bool(o, "allow_growth", false);
  b.garbage_collection = option_bool(o, "garbage_collection", true);
  b.memory_limit = option_size(o, "memory_limit", 0);
  if (o.count("memory_limit") && b.memory_limit < kMinAllocationSize)
    throw OptionError("memory_limit", "memory_limit must be at least 256 bytes", "a size such as 512MiB, 1GB, 4096");
  if (auto it = o.find("per_process_gpu_memory_fraction"); it != o.end()) {
    const std::string& v = it->second;
    std::size_t used = 0;
    double f = 0;
    try {
      f = std::stod(v, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != v.size() || !std::isfinite(f) || f <= 0 || f > 1)
      throw OptionError("per_process_gpu_memory_fraction", fmt::format("'{}' is not a fraction in (0, 1]", v),
                        "a number above 0 and at most 1, e.g. 0.5");
    b.fraction = f;
  }
  if (b.memory_limit && b.fraction > 0)
    throw OptionError("memory_limit", "memory_limit and per_process_gpu_memory_fraction both set the limit",
                      "one of memory_limit, per_process_gpu_memory_fraction");
  return b;
}

Bytes limit_for(const BfcOptions& b, Bytes capacity) {
  if (b.memory_limit) return b.memory_limit;
  if (b.fraction > 0) return static_cast<Bytes>(static_cast<long double>(capacity) * b.fraction);
  // TF's MinSystemMemory for compute capability 9 (the H200): kept free for the system.
  const Bytes reserve = capacity < (Bytes{2} << 30) ? Bytes{225} << 20 : Bytes{1800} << 20;
  return capacity > reserve ? capacity - reserve : 0;
}

class BfcAllocator final : public InspectableAllocator {
 public:
  BfcAllocator(Device& device, const BfcOptions& o)
      : device_(device), o_(o), limit_(limit_for(o, device.info().capacity_bytes)) {
    region_bytes_ = o.allow_growth ? rounded_bytes(std::min(limit_, kInitialGrowthRegion)) : rounded_bytes(limit_);
  }

  ~BfcAllocator() override {
    for (const Region& r : regions_) device_.free(r.ptr);
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId) override {
    if (bytes == 0) return DevPtr{0};  // TF hands out nullptr for 0 bytes
    const Bytes rounded = rounded_bytes(bytes);
    retried_ = false;
    if (bytes <= limit_) {
      if (auto p = find_chunk(rounded, bytes)) return hit(*p);
      if (extend(rounded))
        if (auto p = find_chunk(rounded, bytes)) return p;
      // TF's retry path: free the regions without a live chunk, then one more region.
      if (deallocate_free_regions(rounded) && extend(rounded))
        if (auto p = find_chunk(rounded, bytes)) return p;
    }
    record_oom(bytes, rounded);
    return std::nullopt;
  }

  void deallocate(DevPtr ptr) override {
    if (ptr == 0) return;
    auto it = live_.find(ptr);
    if (it == live_.end()) return;
    const Handle h = it->second;
    live_.erase(it);
    Chunk& c = chunks_[h];
    in_use_ -= c.size;
    requested_ -= c.requested;
    c.in_use = false;
    c.requested = 0;
    ++frees_;
    insert_free(coalesce(h));
  }

  void empty_cache() override { deallocate_regions_without_live_chunks(); }

  AllocatorStats stats() const override {
    AllocatorStats s;
    s.allocated_bytes = in_use_;
    s.reserved_bytes = pool_;
    s.requested_bytes = requested_;
    s.peak_allocated_bytes = peak_in_use_;
    s.peak_reserved_bytes = peak_pool_;
    s.segments = regions_.size();
    s.allocs = num_allocs_;
    s.frees = frees_;
    s.cache_hits = hits_;
    s.device_allocs = device_allocs_;
    s.device_frees = device_frees_;
    s.ooms = ooms_;
    s.alloc_retries = retries_;
    return s;
  }
  MemoryInUse in_use() const override { return {in_use_, pool_}; }
  OomDetails last_oom() const override { return oom_; }

  std::optional<FreeSpace> free_space() const override {
    return FreeSpace{pool_ - in_use_, largest_free_chunk(), in_use_, requested_};
  }

  std::vector<SegmentInfo> segments() const override {
    std::vector<SegmentInfo> out;
    for (const Region& r : regions_) {
      SegmentInfo s{r.ptr, r.size, 0, "", {}};
      for (Handle h = r.first; h != kNone; h = chunks_[h].next)
        s.blocks.push_back({chunks_[h].ptr - r.ptr, chunks_[h].size, chunks_[h].in_use, true});
      out.push_back(std::move(s));
    }
    return out;
  }

  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override {
    auto i = [](Bytes v) { return static_cast<std::int64_t>(v); };
    return {{"num_allocs", i(num_allocs_)},       {"bytes_in_use", i(in_use_)},
            {"peak_bytes_in_use", i(peak_in_use_)}, {"largest_alloc_size", i(largest_alloc_)},
            {"bytes_limit", i(limit_)},           {"bytes_reserved", i(pool_)},
            {"peak_bytes_reserved", i(peak_pool_)}, {"largest_free_block_bytes", i(largest_free_chunk())}};
  }

 private:
  using Handle = std::size_t;
  static constexpr Handle kNone = SIZE_MAX;

  struct Chunk {
    DevPtr ptr = 0;
    Bytes size = 0;
    Bytes requested = 0;
    bool in_use = false;
    int bin = -1;  // the bin holding it while free; -1 otherwise
    Handle prev = kNone, next = kNone;
  };
  struct Region {
    DevPtr ptr;
    Bytes size;
    Handle first;  // its chunks, in address order through next
  };
  // A bin: its free chunks by (size, address), as TF's FreeChunkSet orders them.
  using Bin = std::set<std::tuple<Bytes, DevPtr, Handle>>;

  std::optional<DevPtr> hit(DevPtr p) {
    ++hits_;
    return p;
  }

  // The smallest free chunk that fits, from the request's bin up (TF's FindChunkPtr).
  std::optional<DevPtr> find_chunk(Bytes rounded, Bytes requested) {
    for (int b = bin_for_size(rounded); b < kNumBins; ++b) {
      auto it = bins_[b].lower_bound({rounded, 0, 0});
      if (it == bins_[b].end()) continue;
      const Handle h = std::get<2>(*it);
      remove_free(h);
      if (chunks_[h].size >= rounded * 2 || chunks_[h].size - rounded >= kMaxInternalFragmentation) split(h, rounded);
      Chunk& c = chunks_[h];
      c.in_use = true;
      c.requested = requested;
      live_[c.ptr] = h;
      in_use_ += c.size;
      requested_ += requested;
      peak_in_use_ = std::max(peak_in_use_, in_use_);
      largest_alloc_ = std::max(largest_alloc_, c.size);
      ++num_allocs_;
      return c.ptr;
    }
    return std::nullopt;
  }

  // One more region (TF's Extend).
  bool extend(Bytes rounded) {
    const Bytes available = rounded_down(limit_ - pool_);
    if (rounded > available) return false;
    bool increased = false;
    while (rounded > region_bytes_) {
      region_bytes_ = region_bytes_ > UINT64_MAX / 2 ? UINT64_MAX : region_bytes_ * 2;
      increased = true;
    }
    Bytes bytes = std::min(region_bytes_, available);
    std::optional<DevPtr> ptr = device_.malloc(bytes);
    while (!ptr) {  // TF's back-pedal: 0.9x, rounded up to 256 bytes, down to the request
      bytes = rounded_bytes(static_cast<Bytes>(static_cast<long double>(bytes) * 0.9L));
      if (bytes < rounded) return false;
      ptr = device_.malloc(bytes);
    }
    if (!increased) region_bytes_ = region_bytes_ > UINT64_MAX / 2 ? UINT64_MAX : region_bytes_ * 2;
    ++device_allocs_;
    pool_ += bytes;
    peak_pool_ = std::max(peak_pool_, pool_);
    const Handle h = new_chunk();
    chunks_[h] = Chunk{*ptr, bytes, 0, false, -1, kNone, kNone};
    // Regions stay in address order, as TF's RegionManager keeps them.
    Region r{*ptr, bytes, h};
    regions_.insert(std::upper_bound(regions_.begin(), regions_.end(), r,
                                     [](const Region& a, const Region& b) { return a.ptr < b.ptr; }),
                    r);
    insert_free(h);
    return true;
  }

  // TF's DeallocateFreeRegions: with garbage collection on, the regions without a live chunk go
  // back to the device when that could make room for the request.
  bool deallocate_free_regions(Bytes rounded) {
    if (!o_.garbage_collection) return false;
    Bytes free_region_bytes = 0;
    for (const Region& r : regions_)
      if (!has_live_chunk(r)) free_region_bytes += r.size;
    if (free_region_bytes == 0) return false;
    if (rounded > limit_ - pool_ + free_region_bytes) return false;
    ++retries_;
    retried_ = true;
    deallocate_regions_without_live_chunks();
    return true;
  }

  void deallocate_regions_without_live_chunks() {
    for (auto it = regions_.begin(); it != regions_.end();) {
      if (has_live_chunk(*it)) {
        ++it;
        continue;
      }
      for (Handle h = it->first; h != kNone;) {
        const Handle next = chunks_[h].next;
        if (chunks_[h].bin >= 0) remove_free(h);
        delete_chunk(h);
        h = next;
      }
      device_.free(it->ptr);
      ++device_frees_;
      pool_ -= it->size;
      it = regions_.erase(it);
    }
  }

  bool has_live_chunk(const Region& r) const {
    for (Handle h = r.first; h != kNone; h = chunks_[h].next)
      if (chunks_[h].in_use) return true;
    return false;
  }

  // c becomes `bytes` long; the rest a new free chunk right after it.
  void split(Handle h, Bytes bytes) {
    const Handle n = new_chunk();
    Chunk& c = chunks_[h];
    chunks_[n] = Chunk{c.ptr + bytes, c.size - bytes, 0, false, -1, h, c.next};
    if (c.next != kNone) chunks_[c.next].prev = n;
    c.next = n;
    c.size = bytes;
    insert_free(n);
  }

  // Merges a free chunk with its free neighbours (next first, then previous, as TF does);
  // returns the chunk that holds it now.
  Handle coalesce(Handle h) {
    const Handle next = chunks_[h].next;
    if (next != kNone && !chunks_[next].in_use) {
      remove_free(next);
      merge(h, next);
    }
    const Handle prev = chunks_[h].prev;
    if (prev != kNone && !chunks_[prev].in_use) {
      remove_free(prev);
      merge(prev, h);
      return prev;
    }
    return h;
  }

  void merge(Handle a, Handle b) {  // b follows a
    Chunk& ca = chunks_[a];
    ca.size += chunks_[b].size;
    ca.next = chunks_[b].next;
    if (ca.next != kNone) chunks_[ca.next].prev = a;
    for (Region& r : regions_)
      if (r.first == b) r.first = a;  // (never: b has a predecessor) kept for safety of the list
    delete_chunk(b);
  }

  void insert_free(Handle h) {
    Chunk& c = chunks_[h];
    c.bin = bin_for_size(c.size);
    bins_[c.bin].insert({c.size, c.ptr, h});
  }
  void remove_free(Handle h) {
    Chunk& c = chunks_[h];
    bins_[c.bin].erase({c.size, c.ptr, h});
    c.bin = -1;
  }

  Bytes largest_free_chunk() const {
    for (int b = kNumBins - 1; b >= 0; --b)
      if (!bins_[b].empty()) return std::get<0>(*bins_[b].rbegin());
    return 0;
  }

  Handle new_chunk() {
    if (!unused_.empty()) {
      const Handle h = unused_.back();
      unused_.pop_back();
      return h;
    }
    chunks_.emplace_back();
    return chunks_.size() - 1;
  }
  void delete_chunk(Handle h) {
    chunks_[h] = Chunk{};
    unused_.push_back(h);
  }

  void record_oom(Bytes bytes, Bytes rounded) {
    ++ooms_;
    oom_ = OomDetails{};
    oom_.requested_bytes = bytes;
    oom_.allocated_bytes = in_use_;
    oom_.reserved_bytes = pool_;
    oom_.cached_bytes = pool_ - in_use_;
    oom_.largest_free_block = largest_free_chunk();
    oom_.retried_after_freeing_cache = retried_;
    oom_.limit_bytes = limit_;
    oom_.message = fmt::format(
        "Allocator (GPU_0_bfc) ran out of memory trying to allocate {} (rounded to {}). Total free in pool {}, "
        "largest free chunk {}, unallocated {}, pool size {}, pool limit {}.",
        format_bytes(bytes), rounded, format_bytes(pool_ - in_use_), format_bytes(largest_free_chunk()),
        format_bytes(limit_ - pool_), format_bytes(pool_), format_bytes(limit_));
  }

  Device& device_;
  BfcOptions o_;
  Bytes limit_;
  Bytes region_bytes_;  // TF's curr_region_allocation_bytes_
  std::vector<Chunk> chunks_;
  std::vector<Handle> unused_;
  std::vector<Region> regions_;
  std::array<Bin, kNumBins> bins_;
  std::unordered_map<DevPtr, Handle> live_;
  Bytes pool_ = 0, peak_pool_ = 0, in_use_ = 0, peak_in_use_ = 0, requested_ = 0, largest_alloc_ = 0;
  std::uint64_t num_allocs_ = 0, frees_ = 0, hits_ = 0, device_allocs_ = 0, device_frees_ = 0, ooms_ = 0,
                retries_ = 0;
  bool retried_ = false;
  OomDetails oom_;
};

}  // namespace

std::vector<AllocatorOption> bfc_options() {
  return {{"allow_growth", "true, false"},
          {"per_process_gpu_memory_fraction", "a number above 0 and at most 1, e.g. 0.5"},
          {"memory_limit", "a size such as 512MiB, 1GB, 4096"},
          {"garbage_collection", "true, false"}};
}

void validate_bfc_options(const AllocatorOptions& options) { parse_bfc_options(options); }

std::unique_ptr<InspectableAllocator> make_bfc_allocator(Device& device, const AllocatorOptions& options) {
  return std::make_unique<BfcAllocator>(device, parse_bfc_options(options));
}

Bytes bfc_memory_limit(const AllocatorOptions& options, Bytes capacity) {
  return limit_for(parse_bfc_options(options), capacity);
}

}  // namespace gmb
