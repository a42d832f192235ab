// The simulated GPU: deterministic, no GPU needed. It models what the H200's driver
// (580.159) was seen to do (../shared/GPU.md):
//  - physical memory is taken in 2 MiB pages; small cudaMallocs are packed into shared
//    2 MiB pages at 512-byte steps;
//  - virtual addresses: regions of the request rounded up to 32 MiB, placed top-down in the
//    highest gap that fits; later requests are carved from existing regions first (newest
//    region first, best fit, low end of the free range); an empty region is released.
// Placing memory like the driver makes every address tie-break in a policy allocator the same
// as on the GPU. Call costs are modeled from the H200 measurements.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <fmt/format.h>

#include "allocators/device.h"

namespace gmb {
namespace {

constexpr Bytes kRegionGranularity = 32 * MiB;
constexpr Bytes kSmallStep = 512;
// Requests up to this size are packed into shared 2 MiB pages.
constexpr Bytes kPackLimit = 1 * MiB;
constexpr DevPtr kVaLow = 0x7f0000000000ULL;
constexpr DevPtr kVaHigh = 0x7fc000000000ULL;
constexpr DevPtr kManagedBase = 0x600000000000ULL;

Bytes round_up(Bytes n, Bytes step) { return (n + step - 1) / step * step; }

// Modeled call costs in seconds, interpolated on log(size) between H200 measurements.
double interpolate_cost(Bytes bytes, double at_2mib, double at_100mib, double at_1gib) {
  double x = std::log2(std::max<double>(static_cast<double>(bytes), 2.0 * MiB));
  const double x0 = 21, x1 = std::log2(100.0 * MiB), x2 = 30;
  if (x <= x1) return at_2mib + (at_100mib - at_2mib) * (x - x0) / (x1 - x0);
  return at_100mib + (at_1gib - at_100mib) * (x - x1) / (x2 - x1);
}
double malloc_cost(Bytes b) { return interpolate_cost(b, 50e-6, 75e-6, 172e-6); }
double free_cost(Bytes b) { return interpolate_cost(b, 41e-6, 125e-6, 675e-6); }

// Free-range bookkeeping inside one driver VA region.
struct Region {
  Bytes size = 0;
  std::uint64_t created = 0;           // creation order: newest region is searched first
  std::map<Bytes, Bytes> free_ranges;  // offset -> length
  std::uint64_t live = 0;
  bool vmm = false;  // a cuMemAddressReserve range: never carved by cudaMalloc
};

struct SmallPage {
  DevPtr base = 0;
  std::map<Bytes, Bytes> free_ranges;  // offset -> length in bytes
  std::uint64_t live = 0;
};

struct PoolModel {
  MemPoolOptions options;
  MemPoolUsage usage;
  std::map<DevPtr, Bytes> live;          // ptr -> rounded size
  std::multimap<Bytes, DevPtr> cached;   // freed ranges kept by the pool, by size
  std::map<DevPtr, Bytes> chunks;        // memory the pool holds from the device
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(const SimDeviceOptions& o) {
    info_.kind = DeviceKind::Sim;
    info_.name = o.name;
    info_.capacity_bytes = o.capacity_bytes;
    info_.total_bytes = o.capacity_bytes;
    info_.page_bytes = o.page_bytes;
    info_.driver = "simulated (H200, driver 580 placement model)";
  }

  const DeviceInfo& info() const override { return info_; }

  std::optional<DevPtr> malloc(Bytes bytes) override {
    ++counters_.mallocs;
    counters_.modeled_call_seconds += malloc_cost(bytes);
    if (bytes == 0) return DevPtr{0};
    if (bytes <= kPackLimit) return malloc_small(bytes);
    Bytes size = round_up(bytes, info_.page_bytes);
    if (used_ + size > info_.capacity_bytes) return std::nullopt;
    DevPtr p = place(size);
    used_ += size;
    large_[p] = size;
    return p;
  }

  void free(DevPtr ptr) override {
    ++counters_.frees;
    if (ptr == 0) return;
    if (auto it = large_.find(ptr); it != large_.end()) {
      counters_.modeled_call_seconds += free_cost(it->second);
      used_ -= it->second;
      unplace(ptr, it->second);
      large_.erase(it);
      return;
    }
    counters_.modeled_call_seconds += free_cost(0);
    free_small(ptr);
  }

  Bytes vmm_granularity() const override { return info_.page_bytes; }

  std::optional<DevPtr> reserve_address_range(Bytes bytes) override {
    Bytes size = round_up(bytes, info_.page_bytes);
    DevPtr base = new_region(size, /*vmm=*/true);
    return base;
  }

  void release_address_range(DevPtr base, Bytes) override { regions_.erase(base); }

  bool map(DevPtr addr, Bytes bytes) override {
    ++counters_.vmm_maps;
    counters_.modeled_call_seconds += 44e-6 * static_cast<double>(bytes / info_.page_bytes);
    if (used_ + bytes > info_.capacity_bytes) return false;
    used_ += bytes;
    mapped_[addr] = bytes;
    return true;
  }

  void unmap(DevPtr addr, Bytes bytes) override {
    ++counters_.vmm_unmaps;
    counters_.modeled_call_seconds += 33e-6 * static_cast<double>(bytes / info_.page_bytes);
    // Unmap every mapping inside [addr, addr + bytes).
    for (auto it = mapped_.lower_bound(addr); it != mapped_.end() && it->first < addr + bytes;) {
      used_ -= it->second;
      it = mapped_.erase(it);
    }
  }

  std::optional<DevPtr> malloc_managed(Bytes bytes) override {
    ++counters_.managed_mallocs;
    counters_.modeled_call_seconds += 13e-6;
    Bytes size = round_up(std::max<Bytes>(bytes, 1), info_.page_bytes);
    if (used_ + size > info_.capacity_bytes) return std::nullopt;
    used_ += size;
    DevPtr p = managed_next_;
    managed_next_ += size;
    managed_[p] = size;
    return p;
  }

  void free_managed(DevPtr ptr) override {
    ++counters_.managed_frees;
    counters_.modeled_call_seconds += 13e-6;
    auto it = managed_.find(ptr);
    if (it == managed_.end()) return;
    used_ -= it->second;
    managed_.erase(it);
  }

  void prefetch_managed(DevPtr, Bytes, StreamId) override {}
  void advise_managed(DevPtr, Bytes, bool, bool) override {}

  // --- cudaMemPool model: reserves in 2 MiB steps, keeps freed memory up to the release
  // threshold, reuses a cached range that fits (best fit), trims on request.
  PoolHandle create_pool(const MemPoolOptions& options) override {
    pools_.emplace_back();
    pools_.back().options = options;
    return static_cast<PoolHandle>(pools_.size() - 1);
  }
  void destroy_pool(PoolHandle pool) override { trim_pool(pool, 0); }

  std::optional<DevPtr> malloc_async(PoolHandle h, Bytes bytes, StreamId) override {
    ++counters_.async_mallocs;
    counters_.modeled_call_seconds += 0.62e-6;
    PoolModel& pool = pools_.at(h);
    Bytes size = round_up(std::max<Bytes>(bytes, 1), kSmallStep);
    auto it = pool.cached.lower_bound(size);
    DevPtr p;
    if (it != pool.cached.end()) {
      p = it->second;
      Bytes have = it->first;
      pool.cached.erase(it);
      if (have > size) pool.cached.emplace(have - size, p + size);
    } else {
      Bytes chunk = round_up(size, info_.page_bytes);
      if (used_ + chunk > info_.capacity_bytes) {
        trim_pool(h, 0);  // the driver releases unused pool memory before failing
        if (used_ + chunk > info_.capacity_bytes) return std::nullopt;
      }
      used_ += chunk;
      p = place(chunk);
      pool.chunks[p] = chunk;
      pool.usage.reserved_current += chunk;
      if (chunk > size) pool.cached.emplace(chunk - size, p + size);
    }
    pool.live[p] = size;
    pool.usage.used_current += size;
    pool.usage.used_high = std::max(pool.usage.used_high, pool.usage.used_current);
    pool.usage.reserved_high = std::max(pool.usage.reserved_high, pool.usage.reserved_current);
    return p;
  }

  void free_async(PoolHandle h, DevPtr ptr, StreamId) override {
    ++counters_.async_frees;
    counters_.modeled_call_seconds += 0.73e-6;
    PoolModel& pool = pools_.at(h);
    auto it = pool.live.find(ptr);
    if (it == pool.live.end()) return;
    pool.usage.used_current -= it->second;
    pool.cached.emplace(it->second, ptr);
    pool.live.erase(it);
    if (pool.usage.reserved_current > pool.options.release_threshold)
      trim_pool(h, pool.options.release_threshold);
  }

  void trim_pool(PoolHandle h, Bytes keep) override {
    PoolModel& pool = pools_.at(h);
    // Release whole chunks with nothing live in them, newest first, until at most `keep` stays.
    for (auto it = pool.chunks.begin(); it != pool.chunks.end() && pool.usage.reserved_current > keep;) {
      DevPtr base = it->first;
      Bytes size = it->second;
      bool busy = false;
      for (auto l = pool.live.lower_bound(base); l != pool.live.end() && l->first < base + size; ++l) {
        busy = true;
        break;
      }
      if (busy) { ++it; continue; }
      for (auto c = pool.cached.begin(); c != pool.cached.end();)
        c = (c->second >= base && c->second < base + size) ? pool.cached.erase(c) : std::next(c);
      used_ -= size;
      unplace(base, size);
      pool.usage.reserved_current -= size;
      it = pool.chunks.erase(it);
    }
  }

  MemPoolUsage pool_usage(PoolHandle h) const override { return pools_.at(h).usage; }

  void synchronize() override { ++counters_.synchronizes; }
  void* native_stream(StreamId) override { return nullptr; }
  Bytes used_bytes() const override { return used_; }

 private:
  // --- driver VA placement model ---
  DevPtr place(Bytes size) {
    // Existing regions, newest first; best fit inside the first region that can hold it.
    std::vector<std::pair<std::uint64_t, DevPtr>> order;
    order.reserve(regions_.size());
    for (auto& [base, r] : regions_)
      if (!r.vmm) order.emplace_back(r.created, base);
    std::sort(order.begin(), order.end(), std::greater<>());
    for (auto& [created, base] : order) {
      Region& r = regions_[base];
      auto best = r.free_ranges.end();
      for (auto it = r.free_ranges.begin(); it != r.free_ranges.end(); ++it)
        if (it->second >= size && (best == r.free_ranges.end() || it->second < best->second)) best = it;
      if (best != r.free_ranges.end()) {
        Bytes off = best->first, len = best->second;
        r.free_ranges.erase(best);
        if (len > size) r.free_ranges.emplace(off + size, len - size);
        ++r.live;
        return base + off;
      }
    }
    DevPtr base = new_region(round_up(size, kRegionGranularity), false);
    Region& r = regions_[base];
    r.free_ranges.clear();
    if (r.size > size) r.free_ranges.emplace(size, r.size - size);
    r.live = 1;
    return base;
  }

  // Top-down: the highest gap below kVaHigh that fits; the region sits at the top of it.
  DevPtr new_region(Bytes size, bool vmm) {
    DevPtr top = kVaHigh;
    DevPtr base = 0;
    for (auto it = regions_.rbegin(); it != regions_.rend(); ++it) {
      DevPtr end = it->first + it->second.size;
      if (top >= end + size) { base = top - size; break; }
      top = it->first;
    }
    if (base == 0) base = top - size;
    if (base < kVaLow) throw DeviceError("simulated device: virtual address space exhausted");
    Region r;
    r.size = size;
    r.created = ++region_seq_;
    r.vmm = vmm;
    r.free_ranges.emplace(0, size);
    regions_.emplace(base, std::move(r));
    return base;
  }

  void unplace(DevPtr ptr, Bytes size) {
    auto it = regions_.upper_bound(ptr);
    if (it == regions_.begin()) return;
    --it;
    Region& r = it->second;
    Bytes off = ptr - it->first;
    auto next = r.free_ranges.lower_bound(off);
    Bytes start = off, len = size;
    if (next != r.free_ranges.end() && next->first == off + size) {
      len += next->second;
      next = r.free_ranges.erase(next);
    }
    if (next != r.free_ranges.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        start = prev->first;
        len += prev->second;
        r.free_ranges.erase(prev);
      }
    }
    r.free_ranges.emplace(start, len);
    if (--r.live == 0) regions_.erase(it);
  }

  // --- small allocations packed into shared 2 MiB pages ---
  std::optional<DevPtr> malloc_small(Bytes bytes) {
    Bytes size = round_up(bytes, kSmallStep);
    for (auto& page : small_pages_) {
      for (auto it = page.free_ranges.begin(); it != page.free_ranges.end(); ++it) {
        if (it->second < size) continue;
        Bytes off = it->first, len = it->second;
        page.free_ranges.erase(it);
        if (len > size) page.free_ranges.emplace(off + size, len - size);
        ++page.live;
        small_live_[page.base + off] = size;
        return page.base + off;
      }
    }
    Bytes page_size = info_.page_bytes;
    if (used_ + page_size > info_.capacity_bytes) return std::nullopt;
    used_ += page_size;
    SmallPage page;
    page.base = place(page_size);
    page.free_ranges.emplace(size, page_size - size);
    page.live = 1;
    small_pages_.push_back(page);
    small_live_[page.base] = size;
    return page.base;
  }

  void free_small(DevPtr ptr) {
    auto live = small_live_.find(ptr);
    if (live == small_live_.end()) return;
    Bytes size = live->second;
    small_live_.erase(live);
    for (auto p = small_pages_.begin(); p != small_pages_.end(); ++p) {
      if (ptr < p->base || ptr >= p->base + info_.page_bytes) continue;
      Bytes off = ptr - p->base;
      p->free_ranges.emplace(off, size);
      // coalesce neighbours
      auto it = p->free_ranges.find(off);
      if (auto n = std::next(it); n != p->free_ranges.end() && off + size == n->first) {
        it->second += n->second;
        p->free_ranges.erase(n);
      }
      if (it != p->free_ranges.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == it->first) {
          prev->second += it->second;
          p->free_ranges.erase(it);
        }
      }
      if (--p->live == 0) {
        used_ -= info_.page_bytes;
        unplace(p->base, info_.page_bytes);
        small_pages_.erase(p);
      }
      return;
    }
  }

  DeviceInfo info_;
  Bytes used_ = 0;
  std::map<DevPtr, Region> regions_;
  std::uint64_t region_seq_ = 0;
  std::map<DevPtr, Bytes> large_;
  std::vector<SmallPage> small_pages_;
  std::map<DevPtr, Bytes> small_live_;
  std::map<DevPtr, Bytes> mapped_;
  std::map<DevPtr, Bytes> managed_;
  DevPtr managed_next_ = kManagedBase;
  std::vector<PoolModel> pools_;
};

}  // namespace

const char* to_string(DeviceKind kind) { return kind == DeviceKind::Sim ? "sim" : "cuda"; }

std::unique_ptr<Device> make_sim_device(const SimDeviceOptions& options) {
  return std::make_unique<SimDevice>(options);
}

}  // namespace gmb
