// FreeBlockSet: a pool's cached free blocks (PyTorch's BlockPool::blocks), in exactly the order
// of std::set<Block*, BlockComparatorSize>: by (stream, size, address), streams as unsigned
// numbers.
//
// Why not one ordered tree: the malloc path asks for the best fit (the first block of its
// stream not smaller than the request), and free/split insert and erase a few blocks per call;
// a tree over all free blocks costs a root-to-leaf search of 128-bit keys for each of them.
// Here each stream's blocks are spread over size bins, and a bitmap says which bins hold any.
// A bin covers one size class (one size per 512 bytes below 64 KiB, then 64 classes per power
// of two, like TLSF) and keeps its blocks in a BlockSet (block_set.h) ordered by (size,
// address), so ties still go to the lowest address. Bins are monotone in size: bin order, then
// the order inside a bin, is the set's order. A bin holds a few blocks, so a best-fit search
// is a bitmap scan and a look at one small leaf, and a block records its stream and bin (tbin),
// so erasing searches nothing.
// Most bins hold no block or one. A block that comes into an empty bin is kept in the stream's
// dense array `one` (8 bytes a bin), not in the bin's BlockSet (64 bytes a bin, with the nodes):
// inserting, erasing and finding it then touch the bitmap, that array and the block, lines that
// stay in the L1 cache, and no bin header (3200 of them, 200 KiB a stream). It moves into the
// bin's BlockSet when a second block comes, and the BlockSet's last block moves back when the
// others are gone.
//
// Block must have the fields BlockSet needs (stream, size, ptr, tleaf) and `void* tbin`; a
// block's key must not change while it is in the set.
#pragma once

#include <algorithm>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "allocators/allocator.h"  // AllocatorModelLimit
#include "allocators/caching/block_set.h"

namespace gmb::caching {

template <class Block>
class FreeBlockSet {
  using Set = BlockSet<Block, true>;

  // Sizes in 512-byte units u: u < 128 has a bin of its own, larger u fall in 64 equal bins per
  // power of two. Sizes below 2^64 need 3200 bins: 50 bitmap words under one summary word.
  static constexpr int kBins = 3200;
  static constexpr int kWords = kBins / 64;

  // Branch-free: with fl = max(floor(log2 u), 6), u < 128 gives u itself. floor(log2(u | 64))
  // is that maximum (the bit of 64 is the top one exactly when u < 128).
  static int bin_of(Bytes size) {
    const Bytes u = size >> 9;
    const int shift = 57 - __builtin_clzll(u | 64);  // fl - 6; u in [2^fl, 2^(fl+1)) for u >= 64
    return (shift << 6) + static_cast<int>(u >> shift);
  }

  using Bin = Set;

  // The bins of one stream. Bin i holds blocks (its bitmap bit is set) exactly when one[i] is a
  // block (then bin(i) is empty) or bin(i) is not empty (then it holds 2 blocks or more).
  // Aligned so that a block's tbin holds the stream and the bin index together (bin_holding).
  static constexpr std::uintptr_t kBinMask = 4095;
  static_assert(kBins <= kBinMask + 1);
  struct alignas(kBinMask + 1) Stream {
    Stream(StreamId s, typename Set::Nodes& nodes) : stream(s) {
      for (int i = 0; i < kBins; ++i) new (&bin(i)) Bin(nodes);
    }
    ~Stream() {
      for (int i = 0; i < kBins; ++i) bin(i).~Bin();
    }
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;

    Bin& bin(int i) { return std::launder(reinterpret_cast<Bin*>(raw))[i]; }
    bool empty() const { return summary == 0; }
    bool holds(int i) const { return (words[i >> 6] >> (i & 63)) & 1; }
    // Bin i's first / last block (bin i holds blocks).
    Block* first_in(int i) { return one[i] ? one[i] : bin(i).first(); }
    Block* last_in(int i) { return one[i] ? one[i] : bin(i).last(); }

    void mark(int i) {
      words[i >> 6] |= std::uint64_t{1} << (i & 63);
      summary |= std::uint64_t{1} << (i >> 6);
    }
    void unmark(int i) {
      const std::uint64_t w = words[i >> 6] &= ~(std::uint64_t{1} << (i & 63));
      summary &= ~(std::uint64_t{w == 0} << (i >> 6));
    }
    // First non-empty bin >= i (-1: none). Inlined: most best-fit searches find their bin
    // empty and come here (GCC left it a call).
    [[gnu::always_inline]] int next_bin(int i) const {
      assert(i >= 0 && i <= kBins);
      int w = i >> 6;  // i == kBins: the word past the bins, always 0
      const std::uint64_t m = words[w] & (~std::uint64_t{0} << (i & 63));
      if (m) return (w << 6) | __builtin_ctzll(m);
      const std::uint64_t s = summary & (~std::uint64_t{0} << (w + 1));  // w + 1 < 64
      if (!s) return -1;
      w = __builtin_ctzll(s);
      return (w << 6) | __builtin_ctzll(words[w]);
    }
    // Last non-empty bin <= i (-1: none).
    int prev_bin(int i) const {
      if (i < 0) return -1;
      int w = i >> 6;
      const std::uint64_t m = words[w] & (~std::uint64_t{0} >> (63 - (i & 63)));
      if (m) return (w << 6) | (63 - __builtin_clzll(m));
      const std::uint64_t s = summary & ((std::uint64_t{1} << w) - 1);
      if (!s) return -1;
      w = 63 - __builtin_clzll(s);
      return (w << 6) | (63 - __builtin_clzll(words[w]));
    }
    Block* first() { return first_in(next_bin(0)); }  // not empty()
    Block* last() { return last_in(prev_bin(kBins - 1)); }

    StreamId stream;
    std::uint64_t summary = 0;  // bit w: words[w] != 0
    std::uint64_t words[kWords + 1] = {};  // and a zero word: next_bin(kBins) needs no test
    Block* one[kBins] = {};  // the block of a bin that holds one outside its BlockSet
    // A bin header (64 bytes) on one cache line.
    static_assert(sizeof(Bin) == 64);
    alignas(64) unsigned char raw[kBins * sizeof(Bin)];
  };

  static std::uint16_t order(StreamId s) { return static_cast<std::uint16_t>(s); }
  // tbin: the stream's address | the bin index.
  static void* bin_tag(Stream& s, int i) {
    return reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(&s) |
                                   static_cast<std::uintptr_t>(i));
  }
  static Stream& stream_holding(const Block* b) {
    return *reinterpret_cast<Stream*>(reinterpret_cast<std::uintptr_t>(b->tbin) & ~kBinMask);
  }
  static int bin_holding(const Block* b) {
    const int i = static_cast<int>(reinterpret_cast<std::uintptr_t>(b->tbin) & kBinMask);
    assert(i == bin_of(b->size));
    return i;
  }

 public:
  FreeBlockSet() = default;
  FreeBlockSet(const FreeBlockSet&) = delete;
  FreeBlockSet& operator=(const FreeBlockSet&) = delete;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }

  Block* first() const { return first_from(0); }
  Block* last() const {
    for (std::size_t k = streams_.size(); k-- > 0;)
      if (!streams_[k]->empty()) return streams_[k]->last();
    return nullptr;
  }

  Block* next(const Block* b) const {
    Stream& s = stream_holding(b);
    const int i = bin_holding(b);
    if (s.one[i] != b)
      if (Block* n = s.bin(i).next(b)) return n;
    if (int j = s.next_bin(i + 1); j >= 0) return s.first_in(j);
    return first_from(index_of(s.stream) + 1);
  }
  Block* prev(const Block* b) const {
    Stream& s = stream_holding(b);
    const int i = bin_holding(b);
    if (s.one[i] != b)
      if (Block* p = s.bin(i).prev(b)) return p;
    if (int j = s.prev_bin(i - 1); j >= 0) return s.last_in(j);
    for (std::size_t k = index_of(s.stream); k-- > 0;)
      if (!streams_[k]->empty()) return streams_[k]->last();
    return nullptr;
  }

  // First block not less than key (nullptr: none).
  [[gnu::always_inline]] Block* lower_bound(const BlockKey& key) const {
    Stream* s = direct(key.stream);
    if (!s) return lower_bound_in_other_stream(key);
    return lower_bound_in(*s, key);
  }

  [[gnu::always_inline]] void insert(Block* b) {
    Stream* d = direct(b->stream);
    Stream& s = d ? *d : switch_stream(b->stream);
    const int i = bin_of(b->size);
    if (!s.holds(i)) {  // into an empty bin: kept in `one`, no bin header touched
      s.one[i] = b;
      s.mark(i);
    } else {
      insert_into_bin(s, i, b);
    }
    b->tbin = bin_tag(s, i);
    ++size_;
  }

  [[gnu::always_inline]] void erase(Block* b) {
    Stream& s = stream_holding(b);
    const int i = bin_holding(b);
    if (s.one[i] == b) {  // the bin's one block (mostly so): the bin is then empty
      s.one[i] = nullptr;
      s.unmark(i);
    } else {
      Bin& bin = s.bin(i);
      bin.erase(b);
      // A BlockSet holds 2 blocks or more: its last one goes back into `one`.
      if (bin.size() == 1) {
        Block* r = bin.first();
        bin.erase(r);
        s.one[i] = r;
      }
      assert(s.one[i] || !bin.empty());
    }
    b->tbin = nullptr;
    --size_;
  }

 private:
  [[gnu::always_inline]] Block* lower_bound_in(Stream& s, const BlockKey& key) const {
    const int i = bin_of(key.size);
    int j;
    if (Block* o = s.one[i]) {
      // The bin's one block, compared on (size, address) only: its stream is the key's (with
      // the best-fit search's address 0, a size test).
      if (o->size > key.size || (o->size == key.size && (key.ptr == 0 || o->ptr >= key.ptr))) return o;
      j = s.next_bin(i + 1);
    } else {
      j = s.next_bin(i);  // i itself when bin i's BlockSet holds blocks
      if (j == i) {
        if (Block* b = s.bin(i).lower_bound(key)) return b;
        j = s.next_bin(i + 1);
      }
    }
    if (j >= 0) return s.first_in(j);
    return first_from(index_of(s.stream) + 1);
  }
  // A block into bin i, which holds blocks: the one in `one`, if that is where it is, goes into
  // the bin's BlockSet first.
  __attribute__((noinline)) static void insert_into_bin(Stream& s, int i, Block* b) {
    Bin& bin = s.bin(i);
    if (Block* o = s.one[i]) {
      assert(bin.empty());
      s.one[i] = nullptr;
      bin.insert(o);
    }
    bin.insert(b);
  }
  __attribute__((noinline)) Block* lower_bound_in_other_stream(const BlockKey& key) const {
    const std::size_t si = index_of(key.stream);
    if (si == streams_.size()) return nullptr;
    if (streams_[si]->stream != key.stream) return first_from(si);
    return lower_bound_in(*streams_[si], key);
  }

  // Index of the first stream not below `stream` (streams_.size(): none).
  std::size_t index_of(StreamId stream) const {
    auto it = std::lower_bound(streams_.begin(), streams_.end(), order(stream),
                               [](const std::unique_ptr<Stream>& s, std::uint16_t v) {
                                 return order(s->stream) < v;
                               });
    return static_cast<std::size_t>(it - streams_.begin());
  }
  // Programs use a few streams, numbered from 0: those below kDirect are found by their number
  // (programs that alternate two streams would miss a cache of the last one used every switch).
  Stream* direct(StreamId stream) const {
    return static_cast<std::uint32_t>(stream) < kDirect ? direct_[stream] : nullptr;
  }
  // The stream's bins, made on its first insert.
  __attribute__((noinline)) Stream& switch_stream(StreamId stream) {
    const std::size_t i = index_of(stream);
    if (i == streams_.size() || streams_[i]->stream != stream) {
      if (streams_.size() >= kMaxStreams)
        throw AllocatorModelLimit("the caching allocator's model keeps free blocks of at most " +
                                  std::to_string(kMaxStreams) + " streams per pool (each takes " +
                                  std::to_string(sizeof(Stream) >> 10) + " KiB of index); this trace uses more");
      streams_.insert(streams_.begin() + static_cast<std::ptrdiff_t>(i), std::make_unique<Stream>(stream, nodes_));
    }
    Stream* s = streams_[i].get();
    if (static_cast<std::uint32_t>(stream) < kDirect) direct_[stream] = s;
    return *s;
  }
  Block* first_from(std::size_t si) const {
    for (; si < streams_.size(); ++si)
      if (!streams_[si]->empty()) return streams_[si]->first();
    return nullptr;
  }

  typename Set::Nodes nodes_;  // shared by every bin (declared first: destroyed last)
  std::vector<std::unique_ptr<Stream>> streams_;  // by stream, as unsigned numbers
  static constexpr std::uint32_t kDirect = 8;
  // Programs use a few streams; a trace naming thousands would take gigabytes here (and the
  // sorted insert below is linear): refused with a message instead.
  static constexpr std::size_t kMaxStreams = 1024;
  Stream* direct_[kDirect] = {};  // by stream number, for the ones below kDirect (nullptr: none yet)
  std::size_t size_ = 0;
};

}  // namespace gmb::caching
