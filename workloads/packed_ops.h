// Ops held in 16 bytes each, where an Op takes 40: a converted PyTorch snapshot keeps its whole
// trace until the replay ends (blocks alive before the trace's first entry are found only at its
// end, and they replay first), so its ops are the one part of a snapshot's memory that grows with
// its length. Every byte of it is fresh memory the kernel zero-fills, which a virtual machine
// that hands freed memory back to its host makes several times dearer than the writing itself.
//
// An op packs when its size is below 2^48 bytes, its stream below 2^14, its id and its source
// line below 2^32 and it has no slot (a converted snapshot's ops always do but for the ids of
// blocks alive at the start, tagged while converting); one that does not is held whole beside
// the packed ones and read back the same. Ops are read back by value.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <unordered_map>
#include <vector>

#include "common/huge_page_allocator.h"
#include "workloads/workload.h"

namespace gmb {

class PackedOps {
 public:
  std::size_t size() const { return packed_.size(); }
  bool empty() const { return packed_.empty(); }
  void reserve(std::size_t n) { packed_.reserve(n); }

  void push_back(const Op& op) {
    if (fits(op)) {
      packed_.push_back({op.bytes | std::uint64_t(op.stream) << kBytesBits | std::uint64_t(op.kind) << kKindShift,
                         static_cast<std::uint32_t>(op.id), static_cast<std::uint32_t>(op.source_line)});
    } else {
      wide_.emplace(packed_.size(), op);
      packed_.push_back({kWide << kKindShift, 0, 0});
    }
  }

  Op operator[](std::size_t i) const {
    const Packed& p = packed_[i];
    const std::uint64_t kind = p.word >> kKindShift;
    if (__builtin_expect(kind == kWide, 0)) return wide_.at(i);
    Op op;
    op.kind = static_cast<Op::Kind>(kind);
    op.bytes = p.word & kBytesMask;
    op.stream = static_cast<StreamId>((p.word >> kBytesBits) & kStreamMask);
    op.id = p.id;
    op.source_line = p.line;
    return op;
  }
  Op back() const { return (*this)[size() - 1]; }

  // Appends ops [from, from + n) to out (which grows by doubling, as a caller may append chunk
  // after chunk to one vector: reserving just enough would copy it whole at every chunk).
  void append_to(std::vector<Op>& out, std::size_t from, std::size_t n) const {
    if (out.capacity() - out.size() < n) out.reserve(std::max(out.size() + n, 2 * out.capacity()));
    for (std::size_t i = from; i < from + n; ++i) out.push_back((*this)[i]);
  }

  // The bytes held (packed ops and the whole ones beside them, not counting the table's nodes).
  std::size_t bytes() const { return packed_.capacity() * sizeof(Packed) + wide_.size() * sizeof(Op); }

  // Iterates by value (range for, std algorithms that read).
  class const_iterator {
   public:
    using iterator_category = std::input_iterator_tag;
    using value_type = Op;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = Op;
    const_iterator(const PackedOps* ops, std::size_t i) : ops_(ops), i_(i) {}
    Op operator*() const { return (*ops_)[i_]; }
    const_iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const const_iterator& o) const { return i_ == o.i_; }
    bool operator!=(const const_iterator& o) const { return i_ != o.i_; }

   private:
    const PackedOps* ops_;
    std::size_t i_;
  };
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size()}; }

 private:
  static constexpr unsigned kBytesBits = 48, kStreamBits = 14, kKindShift = kBytesBits + kStreamBits;
  static constexpr std::uint64_t kBytesMask = (std::uint64_t(1) << kBytesBits) - 1;
  static constexpr std::uint64_t kStreamMask = (std::uint64_t(1) << kStreamBits) - 1;
  // The kind bits of an op held whole in wide_, as every op that is no buffer call is (compute:
  // a snapshot has none; empty_cache: a few).
  static constexpr std::uint64_t kWide = 3;
  static_assert(static_cast<int>(Op::Kind::FreeRequested) < static_cast<int>(kWide),
                "Op::Kind has an allocator op the kind bits cannot hold");

  struct Packed {
    std::uint64_t word;  // bytes | stream << 48 | kind << 62
    std::uint32_t id;
    std::uint32_t line;  // source_line
  };
  static_assert(sizeof(Packed) == 16);

  static bool fits(const Op& op) {
    return op.bytes <= kBytesMask && op.stream >= 0 && std::uint64_t(op.stream) <= kStreamMask &&
           op.id <= UINT32_MAX && op.source_line <= UINT32_MAX && op.slot == 0 && is_buffer_call(op.kind);
  }

  std::vector<Packed, HugePageAllocator<Packed>> packed_;
  std::unordered_map<std::size_t, Op> wide_;  // by index
};

}  // namespace gmb
