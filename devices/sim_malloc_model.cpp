#include "devices/sim_malloc_model.h"

#include <algorithm>
#include <iterator>

#include "devices/device.h"

namespace gmb {
namespace {

constexpr Bytes kRegionGranularity = 32 * MiB;
constexpr Bytes kSmallStep = 512;
// The H200's addresses in a fresh process: the top of the context's first region.
constexpr DevPtr kVaHigh = 0x7f3e06000000ULL;
constexpr DevPtr kVaLow = 0x300000000000ULL;
// Where the H200's range (79 TiB) is full: devices far larger than any card made today (up to
// kMaxDeviceBytes, 1024 TiB, whose expandable segments reserve 1 1/8 of it each) get regions in
// [2^47, 2^52), top-down too. These addresses exist only in the model (a real process's are
// below 2^47); they stay below 2^52, where RecordedPlacementDevice moves the ones it hands out.
constexpr DevPtr kVaExtendedLow = DevPtr{1} << 47;
constexpr DevPtr kVaExtendedHigh = DevPtr{1} << 52;

Bytes round_up(Bytes n, Bytes step) { return (n + step - 1) / step * step; }

}  // namespace

SimMallocModel::SimMallocModel(Bytes page_bytes) : page_bytes_(page_bytes) { add_context_regions(); }

std::optional<SimMallocModel::Placement> SimMallocModel::malloc(Bytes bytes, Bytes available) {
  if (packed(bytes)) return malloc_packed(bytes, available);
  if (bytes > available) return std::nullopt;  // before rounding: no overflow
  const Bytes size = round_up(bytes, page_bytes_);
  if (size > available) return std::nullopt;
  const DevPtr p = place(size);
  large_.put(p, size);
  return Placement{p, size};
}

std::optional<SimMallocModel::Freed> SimMallocModel::free(DevPtr ptr) {
  Bytes size = 0;
  if (large_.take(ptr, size)) {
    unplace(ptr, size);
    return Freed{size};
  }
  if (!packed_.take(ptr, size)) return std::nullopt;
  return free_packed(ptr, size);
}

DevPtr SimMallocModel::reserve_range(Bytes size) { return new_region(size, /*vmm=*/true); }

void SimMallocModel::release_range(DevPtr base) { erase_region(regions_.find(base)); }

// --- the context's own regions (see the header) ---
void SimMallocModel::add_context_regions() {
  for (Bytes n : {8 * MiB, 64 * MiB, 414 * MiB}) place(n);
  for (auto& [base, r] : regions_) r.pinned = true;
}

// --- VA regions ---
DevPtr SimMallocModel::place(Bytes size) {
  // Existing regions, newest first; best fit inside the first region that can hold it.
  for (auto at = carve_order_.rbegin(); at != carve_order_.rend(); ++at) {
    Region& r = at->second->second;
    if (r.largest_free < size) continue;
    auto best = r.free_ranges.end();
    for (auto it = r.free_ranges.begin(); it != r.free_ranges.end(); ++it)
      if (it->second >= size && (best == r.free_ranges.end() || it->second < best->second)) best = it;
    const Bytes off = best->first, len = best->second;
    if (len > size) {
      *best = {off + size, len - size};  // what is left stays below the next range: the order holds
    } else {
      r.free_ranges.erase(best);
    }
    if (len == r.largest_free) update_largest_free(r);
    ++r.live;
    return at->second->first + off;
  }
  const DevPtr base = new_region(round_up(size, kRegionGranularity), false);
  Region& r = regions_[base];
  r.free_ranges.clear();
  if (r.size > size) r.free_ranges.push_back({size, r.size - size});
  update_largest_free(r);
  r.live = 1;
  return base;
}

void SimMallocModel::update_largest_free(Region& r) {
  r.largest_free = 0;
  for (const auto& [off, len] : r.free_ranges) r.largest_free = std::max(r.largest_free, len);
}

void SimMallocModel::erase_region(std::map<DevPtr, Region>::iterator it) {
  if (it == regions_.end()) return;
  const auto at = std::lower_bound(carve_order_.begin(), carve_order_.end(), it->second.created,
                                   [](const auto& e, std::uint64_t created) { return e.first < created; });
  if (at != carve_order_.end() && at->first == it->second.created) carve_order_.erase(at);
  const auto ext = std::lower_bound(extents_.begin(), extents_.end(), it->first,
                                    [](const Extent& e, DevPtr base) { return e.first < base; });
  if (ext != extents_.end() && ext->first == it->first) extents_.erase(ext);
  regions_.erase(it);
}

// Top-down in [low, high): the highest gap between regions strictly larger than the region, or
// else the space down to low if it holds it; the region sits at the top of it. 0: no room.
DevPtr SimMallocModel::top_down_gap(DevPtr low, DevPtr high, Bytes size) const {
  DevPtr top = high;
  for (auto it = extents_.rbegin(); it != extents_.rend(); ++it) {
    if (it->first >= high) continue;  // a region above the range
    const DevPtr end = it->second;
    if (end <= low) break;  // the regions below the range (the ranges do not overlap)
    if (top > end && top - end > size) return top - size;
    top = std::min(top, it->first);
  }
  return top >= low && top - low >= size ? top - size : 0;
}

DevPtr SimMallocModel::new_region(Bytes size, bool vmm) {
  DevPtr base = top_down_gap(kVaLow, kVaHigh, size);
  if (base == 0) base = top_down_gap(kVaExtendedLow, kVaExtendedHigh, size);
  if (base == 0) throw DeviceError("simulated device: virtual address space exhausted");
  Region r;
  r.size = size;
  r.created = ++region_seq_;
  r.vmm = vmm;
  r.free_ranges.push_back({0, size});
  r.largest_free = size;
  auto it = regions_.emplace(base, std::move(r)).first;
  extents_.insert(std::lower_bound(extents_.begin(), extents_.end(), base,
                                   [](const Extent& e, DevPtr b) { return e.first < b; }),
                  Extent{base, base + size});
  if (!vmm) carve_order_.push_back(Carvable{it->second.created, it});
  return base;
}

void SimMallocModel::unplace(DevPtr ptr, Bytes size) {
  auto it = regions_.upper_bound(ptr);
  if (it == regions_.begin()) return;
  --it;
  Region& r = it->second;
  const Bytes off = ptr - it->first;
  // Merged with the free ranges it touches, in place.
  auto& ranges = r.free_ranges;
  const auto next = std::lower_bound(ranges.begin(), ranges.end(), off,
                                     [](const Region::FreeRange& f, Bytes o) { return f.first < o; });
  const bool joins_next = next != ranges.end() && next->first == off + size;
  const bool joins_prev = next != ranges.begin() && std::prev(next)->first + std::prev(next)->second == off;
  Bytes len = size;
  if (joins_prev && joins_next) {
    len = std::prev(next)->second += size + next->second;
    ranges.erase(next);
  } else if (joins_prev) {
    len = std::prev(next)->second += size;
  } else if (joins_next) {
    next->first = off;
    len = next->second += size;
  } else {
    ranges.insert(next, {off, size});
  }
  r.largest_free = std::max(r.largest_free, len);
  if (--r.live == 0 && !r.pinned) erase_region(it);
}

// --- packed requests in shared pages ---
std::optional<SimMallocModel::Placement> SimMallocModel::malloc_packed(Bytes bytes, Bytes available) {
  const Bytes size = round_up(bytes, kSmallStep);
  auto best = page_ranges_.lower_bound(PageRange{size, 0, 0, 0});
  if (best != page_ranges_.end()) {
    const auto [len, age, base, off] = *best;
    page_ranges_.erase(best);
    Page& page = pages_.at(base);
    page.free_ranges.erase(off);
    if (len > size) add_page_range(base, off + size, len - size, age);  // the rest keeps its age
    ++page.live;
    packed_.put(base + off, size);
    return Placement{base + off, 0};
  }
  if (page_bytes_ > available) return std::nullopt;
  const DevPtr base = place(page_bytes_);
  Page& page = pages_[base];
  page.live = 1;
  if (page_bytes_ > size) add_page_range(base, size, page_bytes_ - size, ++age_seq_);
  packed_.put(base, size);
  return Placement{base, page_bytes_};
}

SimMallocModel::Freed SimMallocModel::free_packed(DevPtr ptr, Bytes size) {
  auto pit = std::prev(pages_.upper_bound(ptr));  // the page holding a live packed pointer
  const DevPtr base = pit->first;
  Page& page = pit->second;
  auto drop = [&](std::map<Bytes, std::pair<Bytes, std::uint64_t>>::iterator r) {
    page_ranges_.erase(PageRange{r->second.first, r->second.second, base, r->first});
    return page.free_ranges.erase(r);
  };
  Bytes start = ptr - base, len = size;
  auto next = page.free_ranges.lower_bound(start);
  if (next != page.free_ranges.end() && next->first == start + len) {
    len += next->second.first;
    next = drop(next);
  }
  if (next != page.free_ranges.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.first == start) {
      start = prev->first;
      len += prev->second.first;
      drop(prev);
    }
  }
  if (--page.live > 0) {
    add_page_range(base, start, len, ++age_seq_);  // merged with its neighbours: freed now
    return Freed{0};
  }
  pages_.erase(pit);  // its only free range was just merged away
  unplace(base, page_bytes_);
  return Freed{page_bytes_};
}

void SimMallocModel::add_page_range(DevPtr page, Bytes offset, Bytes length, std::uint64_t age) {
  pages_.at(page).free_ranges.emplace(offset, std::make_pair(length, age));
  page_ranges_.emplace(length, age, page, offset);
}

}  // namespace gmb
