// The free runs of chunks of vmm_stitch's segments (its free pBlocks): per segment, runs as
// first chunk -> length, never touching (a freed range merges with its neighbours); over all
// segments, the runs ordered by (length, the segment's rank, first chunk) for best fit and for
// stitching largest first. The rank is the segment's creation order, not its address: where the
// driver puts a reserved range must not change a decision (sim and GPU place them differently).
#pragma once

#include <cassert>
#include <cstddef>
#include <iterator>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <cstdint>

namespace gmb::vmm_stitch {

struct Run {
  std::size_t length = 0;
  std::uint64_t rank = 0;  // its segment's creation order (unique; slots are reused, ranks not)
  std::size_t first = 0;   // index of its first chunk in the segment
  std::size_t segment = 0;
  bool operator<(const Run& o) const {
    return std::tie(length, rank, first, segment) < std::tie(o.length, o.rank, o.first, o.segment);
  }
};

class FreeRuns {
 public:
  std::size_t free_chunks() const { return free_chunks_; }
  const std::set<Run>& by_size() const { return by_size_; }

  // The smallest run of at least n chunks (of equals, the oldest segment's first), or nullptr.
  const Run* best_fit(std::size_t n) const {
    auto it = by_size_.lower_bound(Run{n, 0, 0, 0});
    return it == by_size_.end() ? nullptr : &*it;
  }

  std::size_t largest() const { return by_size_.empty() ? 0 : by_size_.rbegin()->length; }

  // Chunks [first, first + n) of segment `segment` (of rank `rank`) become free.
  void give(std::size_t segment, std::uint64_t rank, std::size_t first, std::size_t n) {
    auto& runs = per_segment_[segment];
    std::size_t start = first, length = n;
    auto next = runs.lower_bound(first);
    if (next != runs.end() && next->first == first + n) {
      length += next->second;
      erase(segment, rank, next->first, next->second);
      next = runs.lower_bound(first);
    }
    if (next != runs.begin()) {
      auto prev = std::prev(next);
      assert(prev->first + prev->second <= first);
      if (prev->first + prev->second == first) {
        start = prev->first;
        length += prev->second;
        erase(segment, rank, prev->first, prev->second);
      }
    }
    insert(segment, rank, start, length);
  }

  // Chunks [first, first + n), inside one free run of the segment, are taken.
  void take(std::size_t segment, std::uint64_t rank, std::size_t first, std::size_t n) {
    auto& runs = per_segment_[segment];
    auto it = runs.upper_bound(first);
    assert(it != runs.begin());
    --it;
    const std::size_t run_first = it->first, run_length = it->second;
    assert(run_first <= first && first + n <= run_first + run_length);
    erase(segment, rank, run_first, run_length);
    if (run_first < first) insert(segment, rank, run_first, first - run_first);
    if (first + n < run_first + run_length) insert(segment, rank, first + n, run_first + run_length - first - n);
  }

  // A segment is going away: its runs (all of it, when nothing in it is used) are forgotten.
  void forget_segment(std::size_t segment, std::uint64_t rank) {
    auto it = per_segment_.find(segment);
    if (it == per_segment_.end()) return;
    for (const auto& [first, length] : std::map<std::size_t, std::size_t>(it->second))
      erase(segment, rank, first, length);
    per_segment_.erase(segment);
  }

 private:
  void insert(std::size_t segment, std::uint64_t rank, std::size_t first, std::size_t length) {
    per_segment_[segment][first] = length;
    by_size_.insert(Run{length, rank, first, segment});
    free_chunks_ += length;
  }
  void erase(std::size_t segment, std::uint64_t rank, std::size_t first, std::size_t length) {
    per_segment_[segment].erase(first);
    by_size_.erase(Run{length, rank, first, segment});
    free_chunks_ -= length;
  }

  std::map<std::size_t, std::map<std::size_t, std::size_t>> per_segment_;  // segment -> first -> length
  std::set<Run> by_size_;
  std::size_t free_chunks_ = 0;
};

}  // namespace gmb::vmm_stitch
