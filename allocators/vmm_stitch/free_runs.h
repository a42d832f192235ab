// The free runs of chunks of vmm_stitch's segments (its free pBlocks): per segment, runs as
// first chunk -> length, never touching (a freed range merges with its neighbours); over all
// segments, the runs ordered by (length, address) for best fit and for stitching largest first.
#pragma once

#include <cassert>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "common/types.h"

namespace gmb::vmm_stitch {

struct Run {
  std::size_t length = 0;
  DevPtr address = 0;  // of its first chunk
  std::size_t segment = 0;
  std::size_t first = 0;  // index of its first chunk in the segment
  bool operator<(const Run& o) const {
    return std::tie(length, address, segment, first) < std::tie(o.length, o.address, o.segment, o.first);
  }
};

class FreeRuns {
 public:
  explicit FreeRuns(Bytes chunk_bytes) : chunk_bytes_(chunk_bytes) {}

  std::size_t free_chunks() const { return free_chunks_; }
  const std::set<Run>& by_size() const { return by_size_; }

  // The smallest run of at least n chunks (the lowest address of equals), or nullptr.
  const Run* best_fit(std::size_t n) const {
    auto it = by_size_.lower_bound(Run{n, 0, 0, 0});
    return it == by_size_.end() ? nullptr : &*it;
  }

  std::size_t largest() const { return by_size_.empty() ? 0 : by_size_.rbegin()->length; }

  // Chunks [first, first + n) of segment `segment` (based at `base`) become free.
  void give(std::size_t segment, DevPtr base, std::size_t first, std::size_t n) {
    auto& runs = per_segment_[segment];
    std::size_t start = first, length = n;
    auto next = runs.lower_bound(first);
    if (next != runs.end() && next->first == first + n) {
      length += next->second;
      erase(segment, base, next->first, next->second);
      next = runs.lower_bound(first);
    }
    if (next != runs.begin()) {
      auto prev = std::prev(next);
      assert(prev->first + prev->second <= first);
      if (prev->first + prev->second == first) {
        start = prev->first;
        length += prev->second;
        erase(segment, base, prev->first, prev->second);
      }
    }
    insert(segment, base, start, length);
  }

  // Chunks [first, first + n), inside one free run of the segment, are taken.
  void take(std::size_t segment, DevPtr base, std::size_t first, std::size_t n) {
    auto& runs = per_segment_[segment];
    auto it = runs.upper_bound(first);
    assert(it != runs.begin());
    --it;
    const std::size_t run_first = it->first, run_length = it->second;
    assert(run_first <= first && first + n <= run_first + run_length);
    erase(segment, base, run_first, run_length);
    if (run_first < first) insert(segment, base, run_first, first - run_first);
    if (first + n < run_first + run_length) insert(segment, base, first + n, run_first + run_length - first - n);
  }

  // A segment is going away: its runs (all of it, when nothing in it is used) are forgotten.
  void forget_segment(std::size_t segment, DevPtr base) {
    auto it = per_segment_.find(segment);
    if (it == per_segment_.end()) return;
    for (const auto& [first, length] : std::map<std::size_t, std::size_t>(it->second))
      erase(segment, base, first, length);
    per_segment_.erase(segment);
  }

 private:
  void insert(std::size_t segment, DevPtr base, std::size_t first, std::size_t length) {
    per_segment_[segment][first] = length;
    by_size_.insert(Run{length, base + first * chunk_bytes_, segment, first});
    free_chunks_ += length;
  }
  void erase(std::size_t segment, DevPtr base, std::size_t first, std::size_t length) {
    per_segment_[segment].erase(first);
    by_size_.erase(Run{length, base + first * chunk_bytes_, segment, first});
    free_chunks_ -= length;
  }

  Bytes chunk_bytes_;
  std::map<std::size_t, std::map<std::size_t, std::size_t>> per_segment_;  // segment -> first -> length
  std::set<Run> by_size_;
  std::size_t free_chunks_ = 0;
};

}  // namespace gmb::vmm_stitch
