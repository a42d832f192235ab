// The caching allocator: PyTorch 2.11's DeviceCachingAllocator (native backend) decision for
// decision, without CUDA graphs' pools. A block used on another stream (record_stream) comes as
// a free request and, later, its deallocate: the statistics drop at the request, the block
// returns at the deallocate, or earlier where PyTorch would wait for its stream (an OOM's retry,
// empty_cache: release_cached_blocks).
// Hot paths avoid allocation and locking: blocks live in an arena, the free sets are bitmaps of
// size bins holding small intrusive B+trees (free_block_set.h, block_set.h), live blocks are
// found through an open-addressing table keyed by address. Where the outcome of a test varies
// from call to call (which pool, split or not, a new peak), the code computes rather than
// branches: on the mixed benchmark, mispredicted branches and cache misses cost more than the
// instructions.
#include "allocators/caching/caching_allocator.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cmath>
#include <cstring>
#include <utility>
#include <limits>
#include <stdexcept>
#include <string_view>

#include <fmt/format.h>

#include "allocators/call_run.h"
#include "allocators/caching/alloc_conf.h"
#include "allocators/caching/expandable_segment.h"
#include "allocators/caching/block_set.h"
#include "allocators/caching/free_block_set.h"
#include "allocators/registry.h"
#include "common/units.h"

namespace gmb {
namespace caching {
namespace {

struct Pool;

// 128 bytes, on a cache line boundary: what malloc/free read of a block and of its neighbours
// (address, size, links, set position, requested size, flags) is in the first line; es and
// gc_count_base are in the second. The pool is a flag (CachingAllocator::pool_of), and so is
// whether the block lies in an expandable segment (set_es keeps it in step with es).
struct alignas(64) Block {
  DevPtr ptr = 0;
  Bytes size = 0;
  Block* prev = nullptr;  // neighbours inside the segment
  Block* next = nullptr;
  // Leaf of the set the block is in: its pool's free set (mapped, not allocated) or its pool's
  // unmapped set (expandable segments); nullptr for allocated blocks, which are in neither.
  void* tleaf = nullptr;
  void* tbin = nullptr;  // the free set's size bin holding the block (free_block_set.h)
  Bytes requested = 0;
  StreamId stream = 0;
  bool small = false;  // in the small pool, else the large one
  bool allocated = false;
  bool mapped = true;
  bool expandable = false;  // es != nullptr; es is not read (nor reset by make()) otherwise
  // Freed by its caller, still taken until its deallocate (free_requested): allocated stays true
  // (neither merged nor reused), the statistics no longer count it.
  bool free_requested = false;
  ExpandableSegment* es = nullptr;
  std::int64_t gc_count_base = 0;  // kept only under garbage collection

  // Without a branch: whether a block is split varies from call to call.
  bool is_split() const {
    return (reinterpret_cast<std::uintptr_t>(prev) | reinterpret_cast<std::uintptr_t>(next)) != 0;
  }
  void set_es(ExpandableSegment* s) {
    es = s;
    expandable = s != nullptr;
  }
};

using SizeSet = FreeBlockSet<Block>;     // PyTorch BlockPool::blocks
using AddrSet = BlockSet<Block, false>;  // PyTorch BlockPool::unmapped

enum StatType { kAll = 0, kSmall = 1, kLarge = 2 };

struct Pool {
  SizeSet blocks;    // cached free blocks
  AddrSet unmapped;  // expandable segments: address space without pages
  bool is_small = false;
  bool track_gc_age = false;  // garbage collection is on: blocks record gc_count_base
  std::size_t stat_index = kLarge - 1;  // its figures' index in a StatArray's per-pool arrays
  std::int64_t get_free_blocks_call_count = 0;

  template <bool kPlain = false>
  [[gnu::always_inline]] void insert_into_blocks(Block* b) {
    if (!kPlain && track_gc_age) b->gc_count_base = get_free_blocks_call_count;
    blocks.insert(b);
  }
};

struct Stat {
  std::int64_t current = 0, peak = 0, allocated = 0, freed = 0;
  void increase(std::int64_t n) {
    current += n;
    if (current > peak) peak = current;
    allocated += n;
  }
  void decrease(std::int64_t n) {
    current -= n;
    freed += n;
  }
};

// One statistic for all/small_pool/large_pool. The hot paths update several of these per call,
// so only what cannot be derived is kept: `allocated` (the sum of increases) per pool only, the
// all-pool one being their sum, and no `freed` (= allocated - current); a decrease is two
// subtractions. The all-pool figures are fields apart from the per-pool arrays (index p:
// Pool::stat_index, kSmall - 1 or kLarge - 1), so that the compiler knows an update of one does
// not touch the other.
struct StatArray {
  std::int64_t all_current = 0, all_peak = 0;
  std::int64_t current[2] = {}, peak[2] = {}, allocated[2] = {};
  [[gnu::always_inline]] void increase(std::size_t p, std::int64_t n) {
    all_current += n;
    current[p] += n;
    allocated[p] += n;
    raise_peaks(p);
  }
  [[gnu::always_inline]] void decrease(std::size_t p, std::int64_t n) {
    all_current -= n;
    current[p] -= n;
  }
  // increase(n) for n > 0, decrease(-n) for n < 0, nothing for 0, without a branch on n (peak
  // >= current always, so raising the peaks changes nothing unless current went up).
  [[gnu::always_inline]] void add(std::size_t p, std::int64_t n) {
    all_current += n;
    current[p] += n;
    allocated[p] += std::max<std::int64_t>(n, 0);
    raise_peaks(p);
  }
  // A new peak is rare once a program runs in its steady state: a branch that is almost never
  // taken costs less than storing the maximum every time.
  [[gnu::always_inline]] void raise_peaks(std::size_t p) {
    if (__builtin_expect(all_current > all_peak, 0)) all_peak = all_current;
    if (__builtin_expect(current[p] > peak[p], 0)) peak[p] = current[p];
  }
  Stat at(int idx) const {
    Stat s;
    if (idx == kAll) {
      s.current = all_current;
      s.peak = all_peak;
      s.allocated = allocated[0] + allocated[1];
    } else {
      s.current = current[idx - 1];
      s.peak = peak[idx - 1];
      s.allocated = allocated[idx - 1];
    }
    s.freed = s.allocated - s.current;
    return s;
  }
};

// PyTorch's active/active_bytes are not kept apart: a block is active while it is allocated or
// its free is requested and not done, so without free requests they equal allocation/
// allocated_bytes. With them, memory_stats gives the .all figures from the blocks pending
// (CachingAllocator::bytes_pending_, its active peaks) and leaves out the per-pool ones.
struct DeviceStats {
  StatArray allocation, segment, inactive_split;
  StatArray allocated_bytes, reserved_bytes, inactive_split_bytes, requested_bytes;
  std::int64_t num_alloc_retries = 0, num_ooms = 0;
  Stat oversize_allocations, oversize_segments;
  std::int64_t num_sync_all_streams = 0, num_device_alloc = 0, num_device_free = 0;
  std::int64_t max_split_size = 0;
};

// Blocks come from chunks and go back to a free list: no malloc on the hot path.
class BlockArena {
 public:
  // A block in its initial state, as far as anything reads it: the first cache line (es,
  // requested and gc_count_base are written before they are read).
  [[gnu::always_inline]] Block* make() {
    if (__builtin_expect(!free_, 0)) grow();
    Block* b = free_;
    free_ = b->next;
    b->ptr = 0;
    b->size = 0;
    b->prev = b->next = nullptr;
    b->tleaf = b->tbin = nullptr;
    b->requested = 0;
    b->stream = 0;
    b->small = false;
    b->allocated = false;
    b->mapped = true;
    b->expandable = false;
    b->free_requested = false;
    return b;
  }
  void recycle(Block* b) {
    b->next = free_;
    free_ = b;
  }

 private:
  [[gnu::noinline]] void grow() {
    constexpr std::size_t kChunk = 256;
    chunks_.emplace_back(new Block[kChunk]);
    Block* c = chunks_.back().get();
    for (std::size_t i = 0; i < kChunk; ++i) {
      c[i].next = free_;
      free_ = &c[i];
    }
  }
  std::vector<std::unique_ptr<Block[]>> chunks_;
  Block* free_ = nullptr;
};

// Address -> live block. Open addressing, linear probing, backward-shift deletion. A slot is
// just the block pointer (the key is the block's address, which does not change while the
// block is live): comparing it reads the block, which the caller reads next anyway. Kept at
// most 1/8 full (8 bytes a slot, 64 bytes per live block), so that a probe almost always ends
// at the first or second slot: the exits of probe loops are branches the CPU mispredicts.
class PtrMap {
 public:
  PtrMap() { rehash(64); }

  Block* find(DevPtr key) const {
    for (std::size_t i = slot(key);; i = (i + 1) & mask_) {
      Block* b = slots_[i];
      if (!b || b->ptr == key) return b;
    }
  }

  void insert(Block* b) {
    if ((count_ + 1) * 8 > slots_.size()) rehash(slots_.size() * 2);
    std::size_t i = slot(b->ptr);
    while (slots_[i]) i = (i + 1) & mask_;
    slots_[i] = b;
    ++count_;
  }

  // Removes key and returns its block (nullptr: not there).
  Block* take(DevPtr key) {
    std::size_t i = slot(key);
    Block* found;
    while ((found = slots_[i]) && found->ptr != key) i = (i + 1) & mask_;
    if (!found) return nullptr;
    for (std::size_t j = (i + 1) & mask_; slots_[j]; j = (j + 1) & mask_) {
      const std::size_t home = slot(slots_[j]->ptr);
      // Move j back into the hole at i unless its home lies cyclically in (i, j].
      const bool in_range = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!in_range) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = nullptr;
    --count_;
    return found;
  }

  std::size_t size() const { return count_; }

  template <class F>
  void for_each(F&& f) const {
    for (Block* b : slots_)
      if (b) f(b);
  }

 private:
  std::size_t slot(DevPtr key) const {
    return static_cast<std::size_t>(((key >> 9) * 0x9E3779B97F4A7C15ULL) >> shift_);
  }
  void rehash(std::size_t capacity) {
    std::vector<Block*> old = std::move(slots_);
    slots_.assign(capacity, nullptr);
    mask_ = capacity - 1;
    shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(capacity));
    count_ = 0;
    for (Block* b : old)
      if (b) insert(b);
  }
  std::vector<Block*> slots_;
  std::size_t mask_ = 0;
  unsigned shift_ = 0;
  std::size_t count_ = 0;
};

bool is_pow2(Bytes v) { return v != 0 && (v & (v - 1)) == 0; }

// c10::format_size: the sizes in PyTorch's OOM message.
std::string torch_format_size(Bytes size) {
  if (size <= 1024) return fmt::format("{} bytes", size);
  if (size <= 1048576) return fmt::format("{:.2f} KiB", static_cast<double>(size) / 1024.0);
  if (size <= 1073741824ULL) return fmt::format("{:.2f} MiB", static_cast<double>(size) / 1048576.0);
  return fmt::format("{:.2f} GiB", static_cast<double>(size) / 1073741824.0);
}

struct AllocParams {
  Bytes size = 0;  // rounded request
  StreamId stream = 0;
  Pool* pool = nullptr;
  Bytes alloc_size = 0;  // segment size if a new segment is needed
  Block* block = nullptr;
};

class CachingAllocator final : public InspectableAllocator, public CallRunner {
 public:
  CachingAllocator(Device& device, CachingConfig config, Bytes limit)
      : device_(device),
        cfg_(std::move(config)),
        allowed_memory_maximum_(limit),
        gc_active_(cfg_.garbage_collection_threshold > 0.0),
        es_active_(cfg_.expandable_segments),
        rounds_power2_(std::any_of(cfg_.roundup_power2_divisions.begin(),
                                   cfg_.roundup_power2_divisions.end(),
                                   [](Bytes d) { return d > 1; })),
        card_bytes_(device.info().total_bytes ? device.info().total_bytes
                                              : device.info().capacity_bytes),
        plain_(!gc_active_ && !es_active_ && !rounds_power2_ && cfg_.max_split_size == UINT64_MAX &&
               card_bytes_ < (Bytes{1} << 48)) {
    small_.track_gc_age = large_.track_gc_age = gc_active_;
    small_.is_small = true;
    small_.stat_index = kSmall - 1;
    large_.is_small = false;
    large_.stat_index = kLarge - 1;
    stats_.max_split_size = static_cast<std::int64_t>(cfg_.max_split_size);
  }

  ~CachingAllocator() override {
    // Give every segment back to the device.
    std::vector<Block*> all = all_blocks();
    for (Block* b : all)
      if (!b->expandable && !b->prev) device_.free(b->ptr);
    expandable_segments_.clear();
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    if (bytes == 0) return DevPtr{0};  // PyTorch hands out nullptr for 0 bytes
    if (stream < 0 || stream > 65535) throw_bad_stream(stream);
    Block* b = malloc(bytes, stream);
    if (!b) return std::nullopt;
    live_.insert(b);
    return b->ptr;
  }

  void deallocate(DevPtr ptr) override {
    if (ptr == 0) return;
    free(take_live(ptr));
  }

  void free_requested(DevPtr ptr) override {
    if (ptr == 0) return;
    Block* b = live_.find(ptr);
    if (!b && by_slot_live_to_map()) b = live_.find(ptr);
    if (!b) throw_bad_pointer(ptr);
    request_free(b);
  }

  void empty_cache() override { release_cached_blocks(); }

  std::vector<DevPtr> take_returned_early() override { return std::exchange(returned_early_, {}); }

  // allocate/deallocate call by call, with the live blocks of the calls' slots kept by slot
  // (by_slot_) instead of in the pointer map: a free finds its block without hashing.
  std::size_t run_calls(const CallView& calls, std::size_t n, DevPtr* slot_ptr, CallResult* results,
                        MemoryInUse mark, bool& failed) override {
    CallHighs unused;
    return plain_ ? run_calls_as<true, true>(calls, n, slot_ptr, results, unused, mark, failed)
                  : run_calls_as<false, true>(calls, n, slot_ptr, results, unused, mark, failed);
  }
  std::size_t run_calls_highs(const CallView& calls, std::size_t n, DevPtr* slot_ptr, MemoryInUse mark,
                              CallHighs& highs, bool& failed) override {
    return plain_ ? run_calls_as<true, false>(calls, n, slot_ptr, nullptr, highs, mark, failed)
                  : run_calls_as<false, false>(calls, n, slot_ptr, nullptr, highs, mark, failed);
  }
  // kPlain: the options most runs use (plain_), compiled in as constants. kEach: a result per
  // call into results (run_calls), else the maxima into highs (run_calls_highs).
  template <bool kPlain, bool kEach>
  std::size_t run_calls_as(const CallView& calls, std::size_t n, DevPtr* slot_ptr, CallResult* results,
                           CallHighs& highs, MemoryInUse mark, bool& failed) {
    failed = false;
    // A retry that takes back blocks waiting on another stream clears their slots here.
    struct RunSlots {
      DevPtr*& at;
      ~RunSlots() { at = nullptr; }
    } run_slots{run_slot_ptr_ = slot_ptr};
    // The maxima in locals (the stores into blocks could alias highs), stored back at each return.
    Bytes high_a = highs.high.allocated_bytes, high_r = highs.high.reserved_bytes;
    MemoryInUse last = highs.last;
    auto done = [&](std::size_t made) {
      if (!kEach) highs = {{high_a, high_r}, last};
      return made;
    };
    const unsigned char* rec = calls.base;
    // by_slot_ in locals: the stores into blocks below could alias the vector's own pointers.
    // Only the resize here moves it.
    Block** by_slot = by_slot_.data();
    std::size_t by_slot_size = by_slot_.size();
    for (std::size_t i = 0; i < n; ++i, rec += calls.stride) {
      const auto kind = CallView::field<std::uint8_t>(rec, calls.kind_at);
      if (kind > CallView::kFreeRequested) return done(i);  // another kind of record ends the calls
      const auto slot = CallView::field<std::uint32_t>(rec, calls.slot_at);
      CallResult local;
      CallResult& r = kEach ? results[i] : local;
      if (kind == CallView::kAllocate) {
        const auto bytes = CallView::field<Bytes>(rec, calls.bytes_at);
        DevPtr ptr = 0;  // PyTorch hands out nullptr for 0 bytes
        if (bytes != 0) {
          const auto stream = CallView::field<StreamId>(rec, calls.stream_at);
          if (stream < 0 || stream > 65535) throw_bad_stream(stream);
          Block* b = malloc<kPlain>(bytes, stream);
          if (!b) {
            failed = true;
            return done(i);
          }
          if (__builtin_expect(slot >= by_slot_size, 0)) {
            by_slot_.resize(std::max<std::size_t>(slot + 1, 2 * by_slot_size), nullptr);
            by_slot = by_slot_.data();
            by_slot_size = by_slot_.size();
          }
          // A slot allocated again (its buffer never freed): the earlier block stays live, by address.
          if (by_slot[slot]) live_.insert(by_slot[slot]);
          by_slot[slot] = b;
          ptr = b->ptr;
        }
        r.ptr = slot_ptr[slot] = ptr;
      } else if (__builtin_expect(kind == CallView::kFreeRequested, 0)) {
        r.ptr = slot_ptr[slot];  // the slot keeps it until the deallocate
        if (r.ptr) {
          Block* b = slot < by_slot_size ? by_slot[slot] : nullptr;
          if (!b || b->ptr != r.ptr) b = live_.find(r.ptr);
          if (!b) throw_bad_pointer(r.ptr);
          request_free(b);
        }
      } else {
        r.ptr = slot_ptr[slot];
        slot_ptr[slot] = 0;
        if (r.ptr) {
          Block* b = slot < by_slot_size ? by_slot[slot] : nullptr;
          if (b && b->ptr == r.ptr) {
            by_slot[slot] = nullptr;
            free<kPlain>(b);
          } else if (!free_by_pointer(r.ptr)) {
            r.ptr = 0;  // a block of the pointer API taken back in this run, its caller not told yet
          }
        }
      }
      const MemoryInUse after = in_use();
      if (kEach) {
        r.after = after;
      } else {
        high_a = std::max(high_a, after.allocated_bytes);
        high_r = std::max(high_r, after.reserved_bytes);
        last = after;
      }
      if (after.reserved_bytes > mark.reserved_bytes ||
          (after.reserved_bytes == mark.reserved_bytes && after.allocated_bytes > mark.allocated_bytes))
        return done(i + 1);
    }
    return done(n);
  }

  AllocatorStats stats() const override {
    AllocatorStats s;
    s.allocated_bytes = static_cast<Bytes>(stats_.allocated_bytes.all_current);
    s.reserved_bytes = static_cast<Bytes>(stats_.reserved_bytes.all_current);
    // PyTorch's requested_bytes counts a block until it returns; here, as allocated_bytes does,
    // until its free request (requested <= allocated).
    s.requested_bytes = static_cast<Bytes>(stats_.requested_bytes.all_current) - requested_pending_;
    s.peak_allocated_bytes = static_cast<Bytes>(stats_.allocated_bytes.all_peak);
    s.peak_reserved_bytes = static_cast<Bytes>(stats_.reserved_bytes.all_peak);
    s.segments = static_cast<std::uint64_t>(stats_.segment.all_current);
    s.allocs = static_cast<std::uint64_t>(stats_.allocation.at(kAll).allocated);
    s.frees = static_cast<std::uint64_t>(stats_.allocation.at(kAll).freed);
    s.cache_hits = cache_hits_;
    s.device_allocs = static_cast<std::uint64_t>(stats_.num_device_alloc);
    s.device_frees = static_cast<std::uint64_t>(stats_.num_device_free);
    s.ooms = static_cast<std::uint64_t>(stats_.num_ooms);
    s.alloc_retries = static_cast<std::uint64_t>(stats_.num_alloc_retries);
    return s;
  }

  MemoryInUse in_use() const override {
    return {static_cast<Bytes>(stats_.allocated_bytes.all_current), static_cast<Bytes>(stats_.reserved_bytes.all_current)};
  }

  OomDetails last_oom() const override { return last_oom_; }

  // Free = reserved (mapped) - allocated: every mapped byte of a segment is in a block. The
  // largest free block is looked for in both pools' free sets.
  std::optional<FreeSpace> free_space() const override {
    FreeSpace f;
    f.allocated_bytes = static_cast<Bytes>(stats_.allocated_bytes.all_current);
    f.requested_bytes = static_cast<Bytes>(stats_.requested_bytes.all_current) - requested_pending_;
    // Blocks freed but not returned (free_requested) are neither allocated nor free.
    f.free_bytes = static_cast<Bytes>(stats_.reserved_bytes.all_current) - f.allocated_bytes - bytes_pending_;
    for (const Pool* pool : {&large_, &small_})
      for (const Block* b = pool->blocks.first(); b; b = pool->blocks.next(b))
        f.largest_free_bytes = std::max(f.largest_free_bytes, b->size);
    return f;
  }

  std::vector<SegmentInfo> segments() const override;
  std::vector<SegmentInfo> block_map() const override;
  std::vector<std::pair<std::string, std::int64_t>> memory_stats() const override;
  std::string memory_summary() const override;

 private:
  [[noreturn, gnu::cold, gnu::noinline]] static void throw_bad_stream(StreamId stream) {
    throw std::invalid_argument(
        fmt::format("caching allocator: stream id {} outside [0, 65535]", stream));
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void throw_bad_pointer(DevPtr ptr) {
    throw std::invalid_argument(fmt::format("invalid device pointer: {:#x}", ptr));
  }

  // The live block at ptr, no longer live (throws when there is none). One that run_calls keeps
  // by slot is found after moving all of those to the pointer map, once: run_calls then finds
  // it there too.
  Block* take_live(DevPtr ptr) {
    if (Block* b = live_.take(ptr)) return b;
    if (by_slot_live_to_map()) {
      if (Block* b = live_.take(ptr)) return b;
    }
    throw_bad_pointer(ptr);
  }
  [[gnu::noinline]] bool by_slot_live_to_map() {
    bool any = false;
    for (Block*& b : by_slot_)
      if (b) {
        live_.insert(std::exchange(b, nullptr));
        any = true;
      }
    return any;
  }

  // ---- malloc / free -----------------------------------------------------------------------
  // Inlined into the callers' loops (run_calls); what is not served from the cache goes on in
  // malloc_from_device.
  // orig_size > 0.
  template <bool kPlain = false>
  [[gnu::always_inline]] Block* malloc(Bytes orig_size, StreamId stream) {
    AllocParams p;
    // A request larger than the card fails whatever its size (no block, no device can hold it):
    // handled as card + 1 bytes it takes PyTorch's decisions (free the cache, retry, OOM)
    // without rounding near 2^64.
    const Bytes size = std::min(orig_size, card_bytes_ + 1);
    // Plain: round_size's rule for a size in [1, card + 1], without its branches.
    p.size = kPlain ? (size + kMinBlockSize - 1) & ~(kMinBlockSize - 1) : round_size(size);
    assert(p.size == round_size(size));
    p.stream = stream;
    p.pool = pool_by_small_[p.size <= kSmallSize];
    if (__builtin_expect(!get_free_block<kPlain>(p), 0)) return malloc_from_device(p, orig_size);
    ++cache_hits_;
    return alloc_found_block<kPlain>(p, orig_size, should_split<kPlain>(p.block, p.size));
  }

  [[gnu::noinline]] Block* malloc_from_device(AllocParams& p, Bytes orig_size) {
    p.alloc_size = allocation_size(p.size);
    if (gc_active_) garbage_collect_cached_blocks();
    bool retried = false;
    const bool found = alloc_block(p, false) ||
                       (release_available_cached_blocks(p) && alloc_block(p, false)) ||
                       ((retried = true) && release_cached_blocks() && alloc_block(p, true));
    if (!found) {
      record_oom(orig_size, p, retried);
      return nullptr;
    }
    return alloc_found_block(p, orig_size, should_split(p.block, p.size));
  }

  // PyTorch's free() of a block with stream uses: the statistics now, the block at its deallocate.
  // A second request for the same block changes nothing.
  [[gnu::noinline]] void request_free(Block* block) {
    if (block->free_requested) return;
    block->free_requested = true;
    any_free_requested_ = true;
    const std::size_t st = pool_of(block).stat_index;
    stats_.allocation.decrease(st, 1);
    stats_.allocated_bytes.decrease(st, static_cast<std::int64_t>(block->size));
    if (block->size >= cfg_.max_split_size) stats_.oversize_allocations.decrease(1);
    bytes_pending_ += block->size;
    requested_pending_ += block->requested;
    ++blocks_pending_;
    pending_.push_back(block);
  }
  // Active = allocated + pending, and it rises only at an allocation: its peak, where it can pass
  // the allocated peak (blocks pending).
  [[gnu::noinline]] void note_active_peak() {
    const Stat& a = stats_.allocated_bytes.at(kAll);
    const Stat& n = stats_.allocation.at(kAll);
    active_bytes_peak_ = std::max(active_bytes_peak_, a.current + static_cast<std::int64_t>(bytes_pending_));
    active_peak_ = std::max(active_peak_, n.current + static_cast<std::int64_t>(blocks_pending_));
  }
  // PyTorch's synchronize_and_free_events: it waits for the streams every block freed while in
  // use waits on, and returns those blocks. Each is no longer live: inside run_calls its slot is
  // cleared in the caller's slot_ptr, else the caller learns its pointer (take_returned_early);
  // no deallocate may follow.
  [[gnu::noinline]] void return_pending_blocks() {
    const std::vector<Block*> blocks = std::exchange(pending_, {});
    for (Block* b : blocks) {
      const auto at = std::find(by_slot_.begin(), by_slot_.end(), b);
      if (at != by_slot_.end()) {
        *at = nullptr;
        if (run_slot_ptr_)
          run_slot_ptr_[at - by_slot_.begin()] = 0;
        else
          returned_early_.push_back(b->ptr);
      } else {  // the pointer API's (or moved there): its caller learns it
        live_.take(b->ptr);
        returned_early_.push_back(b->ptr);
      }
      free_after_request(b);
    }
  }
  // run_calls' free of a block it does not keep by slot: the live block at ptr, or nothing where
  // ptr is a block taken back early that no live block has replaced (its caller then learns
  // nothing more of it). Whether a block was freed.
  [[gnu::noinline]] bool free_by_pointer(DevPtr ptr) {
    if (!returned_early_.empty() && !live_.find(ptr)) {
      const auto at = std::find(returned_early_.begin(), returned_early_.end(), ptr);
      if (at != returned_early_.end()) {
        returned_early_.erase(at);
        return false;
      }
    }
    free(take_live(ptr));
    return true;
  }
  // The deallocate of a block whose free was requested: it returns to its pool.
  [[gnu::noinline]] void free_after_request(Block* block) {
    if (!pending_.empty()) {  // (empty while return_pending_blocks returns them all)
      const auto at = std::find(pending_.begin(), pending_.end(), block);
      if (at != pending_.end()) {
        *at = pending_.back();
        pending_.pop_back();
      }
    }
    block->free_requested = false;
    bytes_pending_ -= block->size;
    requested_pending_ -= block->requested;
    --blocks_pending_;
    block->allocated = false;
    free_block(block);
  }

  template <bool kPlain = false>
  [[gnu::always_inline]] void free(Block* block) {
    // The flag is on the block's second cache line: read only while some block waits.
    if (__builtin_expect(blocks_pending_ != 0, 0) && block->free_requested) return free_after_request(block);
    block->allocated = false;
    const std::size_t st = pool_of(block).stat_index;
    stats_.allocation.decrease(st, 1);
    stats_.allocated_bytes.decrease(st, static_cast<std::int64_t>(block->size));
    if (!kPlain && block->size >= cfg_.max_split_size) stats_.oversize_allocations.decrease(1);
    free_block<kPlain>(block);
  }

  Bytes round_size(Bytes size) const {
    if (size < kMinBlockSize) return kMinBlockSize;
    if (rounds_power2_) {
      Bytes divisions = cfg_.divisions_for(size);
      if (divisions > 1 && size > kMinBlockSize * divisions)
        return roundup_power2_next_division(size, divisions);
    }
    return round_to_min_block(size);
  }

  static Bytes roundup_power2_next_division(Bytes size, Bytes divisions) {
    if (is_pow2(size)) return size;
    Bytes power2_floor = Bytes{1} << (63 - __builtin_clzll(size));
    Bytes division = power2_floor >> (63 - __builtin_clzll(divisions));
    if (division == 0) return power2_floor << 1;
    Bytes floor = size & ~(division - 1);
    return floor == size ? size : floor + division;
  }

  Bytes allocation_size(Bytes size) const {
    if (size <= kSmallSize) return kSmallBuffer;
    if (size < kMinLargeAlloc) return cfg_.large_segment_size;
    return kRoundLarge * ((size + kRoundLarge - 1) / kRoundLarge);
  }

  Pool& pool_of(const Block* b) { return *pool_by_small_[b->small]; }

  template <bool kPlain = false>
  bool should_split(const Block* block, Bytes size) const {
    Bytes remaining = block->size - size;
    // Both rules evaluated and selected without branches: which pool varies call to call.
    const int small_rule = remaining >= kMinBlockSize;
    const int large_rule = (kPlain || size < cfg_.max_split_size) & (remaining > kSmallSize);
    const int use_small = block->small | (!kPlain && es_active_);
    return (use_small & small_rule) | ((1 - use_small) & large_rule);
  }

  template <bool kPlain = false>
  [[gnu::always_inline]] bool get_free_block(AllocParams& p) {
    Pool& pool = *p.pool;
    if (!kPlain && gc_active_) ++pool.get_free_blocks_call_count;
    Block* it = pool.blocks.lower_bound(BlockKey{p.stream, p.size, 0});
    if (!it || it->stream != p.stream) return false;
    if (kPlain) {  // no expandable block, no max_split_size
      assert(!it->expandable && cfg_.max_split_size == UINT64_MAX);
      p.block = it;
      pool.blocks.erase(it);
      return true;
    }
    if (it->expandable) {
      if (es_active_) {
        // Best fit by the size a block can grow to: its own plus the unmapped space after it.
        auto expandable_size = [](const Block* b) {
          return b->size + (b->next && !b->next->mapped ? b->next->size : 0);
        };
        Block* next = pool.blocks.next(it);
        while (it->expandable && next && next->stream == p.stream &&
               expandable_size(next) < expandable_size(it)) {
          it = next;
          next = pool.blocks.next(next);
        }
      } else {
        do {
          it = pool.blocks.next(it);
        } while (it && it->expandable && it->stream == p.stream);
        if (!it || it->stream != p.stream) return false;
      }
    }
    // Do not return an oversized block for a request below max_split_size ...
    if (p.size < cfg_.max_split_size && it->size >= cfg_.max_split_size) return false;
    // ... and round a large request up by at most max_non_split_rounding_size.
    if (p.size >= cfg_.max_split_size && it->size >= p.size + cfg_.max_non_split_rounding_size)
      return false;
    p.block = it;
    pool.blocks.erase(it);
    return true;
  }

  template <bool kPlain = false>
  [[gnu::always_inline]] Block* alloc_found_block(AllocParams& p, Bytes orig_size, bool split_remainder) {
    Pool& pool = *p.pool;
    const std::size_t st = pool.stat_index;
    Block* block = p.block;
    const bool already_split = block->is_split();
    if (split_remainder) {
      Block* remaining = block;
      block = arena_.make();
      block->stream = p.stream;
      block->size = p.size;
      block->small = pool.is_small;
      block->ptr = remaining->ptr;
      if (!kPlain && remaining->expandable) block->set_es(remaining->es);  // es: second cache line
      block->prev = remaining->prev;
      if (block->prev) block->prev->next = block;
      block->next = remaining;
      remaining->prev = block;
      remaining->ptr += p.size;
      remaining->size -= p.size;
      pool.insert_into_blocks<kPlain>(remaining);
      if (kPlain || !block->expandable) {
        if (already_split) {
          // An inactive split block shrinks by size bytes.
          stats_.inactive_split_bytes.decrease(st, static_cast<std::int64_t>(block->size));
        } else {
          // A new inactive split block of remaining->size bytes.
          stats_.inactive_split_bytes.increase(st, static_cast<std::int64_t>(remaining->size));
          stats_.inactive_split.increase(st, 1);
        }
      }
    } else if (already_split && (kPlain || !block->expandable)) {
      stats_.inactive_split_bytes.decrease(st, static_cast<std::int64_t>(block->size));
      stats_.inactive_split.decrease(st, 1);
    }
    block->allocated = true;
    block->requested = orig_size;
    const auto size = static_cast<std::int64_t>(block->size);
    stats_.allocation.increase(st, 1);
    stats_.allocated_bytes.increase(st, size);
    stats_.requested_bytes.increase(st, static_cast<std::int64_t>(orig_size));
    if (__builtin_expect(blocks_pending_ != 0, 0)) note_active_peak();
    if (!kPlain && block->size >= cfg_.max_split_size) stats_.oversize_allocations.increase(1);
    return block;
  }

  template <bool kPlain = false>
  [[gnu::always_inline]] void free_block(Block* block) {
    Pool& pool = pool_of(block);
    const Bytes requested = block->requested;
    std::int64_t net_blocks = 0, net_bytes = 0;
    if constexpr (kPlain) {
      // The merges inline, each neighbour in its known direction (every block is mapped).
      if (Block* prev = block->prev; prev && !prev->allocated) {  // [prev block]
        --net_blocks;
        net_bytes -= static_cast<std::int64_t>(prev->size);
        merge_mapped<true>(block, prev, pool);
      }
      if (Block* next = block->next; next && !next->allocated) {  // [block next]
        --net_blocks;
        net_bytes -= static_cast<std::int64_t>(next->size);
        merge_mapped<false>(block, next, pool);
      }
    } else {
      Block* candidates[2] = {block->prev, block->next};
      for (Block* c : candidates) {
        const Bytes subsumed = try_merge_blocks(block, c, pool);
        net_blocks -= subsumed > 0;
        net_bytes -= static_cast<std::int64_t>(subsumed);
      }
    }
    pool.insert_into_blocks<kPlain>(block);
    const bool split = block->is_split();
    net_blocks += split;
    net_bytes += split ? static_cast<std::int64_t>(block->size) : 0;
    const std::size_t st = pool.stat_index;
    if (kPlain || !block->expandable) {
      // Expandable segments are left out of inactive_split, as in PyTorch.
      stats_.inactive_split.add(st, net_blocks);
      stats_.inactive_split_bytes.add(st, net_bytes);
    }
    stats_.requested_bytes.decrease(st, static_cast<std::int64_t>(requested));
  }

  // Merges src (a neighbour of dst) into dst; returns the bytes subsumed (0: not merged). The
  // test inline (a free's neighbours are mostly allocated), the merge apart.
  [[gnu::always_inline]] Bytes try_merge_blocks(Block* dst, Block* src, Pool& pool) {
    if (!src || src->allocated || dst->mapped != src->mapped) return 0;
    return merge_blocks(dst, src, pool);
  }
  [[gnu::noinline]] Bytes merge_blocks(Block* dst, Block* src, Pool& pool) {
    const Bytes subsumed = src->size;
    if (dst->prev == src)
      absorb<true>(dst, src);
    else
      absorb<false>(dst, src);
    if (src->mapped)
      pool.blocks.erase(src);
    else
      pool.unmapped.erase(src);
    arena_.recycle(src);
    return subsumed;
  }
  // merge_blocks for a neighbour known to be below dst (kBelow) or above it, both mapped.
  template <bool kBelow>
  [[gnu::always_inline]] void merge_mapped(Block* dst, Block* src, Pool& pool) {
    assert(src->mapped && dst->mapped);
    absorb<kBelow>(dst, src);
    pool.blocks.erase(src);
    arena_.recycle(src);
  }
  // dst takes over src, its neighbour in the segment below it (kBelow: [src dst]) or above it
  // ([dst src]): the links and the size. Taking src out of its set is the caller's.
  template <bool kBelow>
  [[gnu::always_inline]] static void absorb(Block* dst, Block* src) {
    if constexpr (kBelow) {
      dst->ptr = src->ptr;
      dst->prev = src->prev;
      if (dst->prev) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next) dst->next->prev = dst;
    }
    dst->size += src->size;
  }

  // ---- device allocation --------------------------------------------------------------------
  bool alloc_block(AllocParams& p, bool is_retry) {
    if (is_retry) ++stats_.num_alloc_retries;
    if (total_allocated_memory_ + p.alloc_size > allowed_memory_maximum_) return false;
    if (es_active_) {
      p.block = try_allocate_expandable_block(p.stream, *p.pool, p.size);
      return p.block != nullptr;
    }
    std::optional<DevPtr> ptr = device_.malloc(p.alloc_size);
    if (!ptr || *ptr == 0) return false;
    total_allocated_memory_ += p.alloc_size;
    Block* b = arena_.make();
    b->stream = p.stream;
    b->size = p.alloc_size;
    b->small = p.pool->is_small;
    b->ptr = *ptr;
    p.block = b;
    stats_.segment.increase(p.pool->stat_index, 1);
    stats_.reserved_bytes.increase(p.pool->stat_index, static_cast<std::int64_t>(p.alloc_size));
    if (p.alloc_size >= cfg_.max_split_size) stats_.oversize_segments.increase(1);
    ++stats_.num_device_alloc;
    return true;
  }

  // Frees cached oversize blocks (>= max_split_size) of the request's stream: one large
  // enough, or else the largest ones until their total reaches the request.
  bool release_available_cached_blocks(const AllocParams& p) {
    if (cfg_.max_split_size == UINT64_MAX) return false;
    Pool& pool = *p.pool;
    const Bytes key_size = std::max(p.size, cfg_.max_split_size);
    Block* it = pool.blocks.lower_bound(BlockKey{p.stream, key_size, 0});
    if (!it || it->stream != p.stream || it->expandable) {
      if (it == pool.blocks.first()) return false;
      it = it ? pool.blocks.prev(it) : pool.blocks.last();
      Bytes released = 0;
      while (released < key_size && it->size >= cfg_.max_split_size && it->stream == p.stream) {
        Block* cur = it;
        Block* before = pool.blocks.prev(cur);
        if (before) it = before;
        if (!cur->expandable) {
          released += cur->size;
          release_block(cur);
        }
        if (!before) break;
      }
      if (released < key_size) return false;
    } else {
      release_block(it);
    }
    return true;
  }

  // empty_cache(): every unsplit cached block back to the device; free pages of expandable
  // segments unmapped.
  bool release_cached_blocks() {
    ++stats_.num_sync_all_streams;
    if (blocks_pending_) return_pending_blocks();
    release_blocks(large_);
    release_blocks(small_);
    return true;
  }

  void release_blocks(Pool& pool) {
    std::vector<Block*> to_unmap;
    for (Block* b = pool.blocks.first(); b;) {
      Block* cur = b;
      b = pool.blocks.next(b);
      if (cur->expandable)
        to_unmap.push_back(cur);
      else if (!cur->prev && !cur->next)
        release_block(cur);
    }
    for (Block* b : to_unmap) {
      unmap_block(b);
      if (!b->prev && !b->next) release_expandable_segment(b);
    }
  }

  void release_block(Block* b) {
    ++stats_.num_device_free;
    device_.free(b->ptr);
    total_allocated_memory_ -= b->size;
    Pool& pool = pool_of(b);
    stats_.segment.decrease(pool.stat_index, 1);
    stats_.reserved_bytes.decrease(pool.stat_index, static_cast<std::int64_t>(b->size));
    if (b->size >= cfg_.max_split_size) stats_.oversize_segments.decrease(1);
    pool.blocks.erase(b);
    arena_.recycle(b);
  }

  void garbage_collect_cached_blocks() {
    const auto gc_threshold = static_cast<Bytes>(cfg_.garbage_collection_threshold *
                                                 static_cast<double>(allowed_memory_maximum_));
    if (total_allocated_memory_ <= gc_threshold) return;
    const Bytes target = total_allocated_memory_ - gc_threshold;
    Bytes reclaimed = 0;
    auto gc_count = [this](const Block* b) {  // b is in the large pool
      return static_cast<std::size_t>(
          static_cast<int>(large_.get_free_blocks_call_count - b->gc_count_base));
    };
    std::size_t total_age = 0;
    int freeable = 0;
    for (Block* b = large_.blocks.first(); b; b = large_.blocks.next(b)) {
      if (!b->is_split()) {
        total_age += gc_count(b);
        ++freeable;
      }
    }
    if (freeable == 0) return;
    bool block_freed = true;
    while (reclaimed < target && block_freed && freeable > 0) {
      const double age_threshold = static_cast<double>(total_age) / freeable;
      block_freed = false;
      for (Block* b = large_.blocks.first(); b;) {
        Block* cur = b;
        b = large_.blocks.next(b);
        if (!cur->is_split() && !cur->expandable &&
            static_cast<double>(gc_count(cur)) >= age_threshold) {
          block_freed = true;
          reclaimed += cur->size;
          total_age -= gc_count(cur);
          --freeable;
          release_block(cur);
        }
      }
    }
  }

  // ---- expandable segments ------------------------------------------------------------------
  // The lowest address, in any of the stream's segments of this pool, where size bytes of
  // free and unmapped space follow each other; a new segment if there is none.
  Block* find_expandable_block(StreamId stream, Pool& pool, Bytes size) {
    auto allocatable = [](const Block* b) { return b && !b->allocated; };
    auto has_room = [&](Block* b) {
      Bytes bytes = 0;
      while (bytes < size && allocatable(b)) {
        bytes += b->size;
        b = b->next;
      }
      return bytes >= size;
    };
    for (Block* it = pool.unmapped.lower_bound(BlockKey{stream, 0, 0}); it && it->stream == stream;
         it = pool.unmapped.next(it)) {
      Block* c = it;
      if (allocatable(c->prev)) c = c->prev;
      if (has_room(c)) return c;
    }
    const Bytes segment_size = pool.is_small ? kSmallBuffer : cfg_.large_segment_size;
    expandable_segments_.push_back(
        std::make_unique<ExpandableSegment>(device_, stream, segment_size, card_bytes_));
    ExpandableSegment* es = expandable_segments_.back().get();
    Block* candidate = arena_.make();
    candidate->stream = stream;
    candidate->size = es->size();
    candidate->small = pool.is_small;
    candidate->ptr = es->base();
    candidate->mapped = false;
    candidate->set_es(es);
    pool.unmapped.insert(candidate);
    return candidate;
  }

  bool map_block(Block* to_map, Bytes size) {
    SegmentRange r = to_map->es->map(to_map->ptr, size);
    if (r.size == 0) return false;
    Pool& pool = pool_of(to_map);
    pool.unmapped.erase(to_map);
    to_map->mapped = true;
    if (r.size < to_map->size) {
      Block* remaining = arena_.make();
      remaining->stream = to_map->stream;
      remaining->size = to_map->size - r.size;
      remaining->small = pool.is_small;
      remaining->ptr = to_map->ptr + r.size;
      remaining->mapped = false;
      remaining->set_es(to_map->es);
      splice(remaining, to_map, to_map->next);
      pool.unmapped.insert(remaining);
      to_map->size = r.size;
    }
    try_merge_blocks(to_map, to_map->prev, pool);
    try_merge_blocks(to_map, to_map->next, pool);
    pool.insert_into_blocks(to_map);
    total_allocated_memory_ += r.size;
    stats_.reserved_bytes.increase(pool.stat_index, static_cast<std::int64_t>(r.size));
    ++stats_.num_device_alloc;
    return true;
  }

  Block* try_allocate_expandable_block(StreamId stream, Pool& pool, Bytes size) {
    Block* candidate = find_expandable_block(stream, pool, size);
    if (!candidate->mapped && !map_block(candidate, std::min(candidate->size, size)))
      return nullptr;
    while (candidate->size < size) {
      // free -> unmapped -> ...: map part of the unmapped block; it merges with the free one.
      Bytes remaining = size - candidate->size;
      Block* next = candidate->next;
      if (!map_block(next, std::min(remaining, next->size))) return nullptr;
      candidate = next;
    }
    pool.blocks.erase(candidate);
    return candidate;
  }

  void unmap_block(Block* block) {
    SegmentRange r = block->es->unmap(block->ptr, block->size);
    if (r.size == 0) return;
    Pool& pool = pool_of(block);
    pool.blocks.erase(block);
    const Bytes before = r.ptr - block->ptr;
    if (before > 0) {
      Block* b = arena_.make();
      b->stream = block->stream;
      b->size = before;
      b->small = pool.is_small;
      b->ptr = block->ptr;
      b->set_es(block->es);
      splice(b, block->prev, block);
      pool.insert_into_blocks(b);
    }
    const Bytes after = block->size - (before + r.size);
    if (after > 0) {
      Block* a = arena_.make();
      a->stream = block->stream;
      a->size = after;
      a->small = pool.is_small;
      a->ptr = r.ptr + r.size;
      a->set_es(block->es);
      splice(a, block, block->next);
      pool.insert_into_blocks(a);
    }
    block->ptr = r.ptr;
    block->size = r.size;
    block->mapped = false;
    try_merge_blocks(block, block->prev, pool);
    try_merge_blocks(block, block->next, pool);
    pool.unmapped.insert(block);
    total_allocated_memory_ -= r.size;
    stats_.reserved_bytes.decrease(pool.stat_index, static_cast<std::int64_t>(r.size));
    ++stats_.num_device_free;
  }

  void release_expandable_segment(Block* block) {
    pool_of(block).unmapped.erase(block);
    auto it = std::find_if(expandable_segments_.begin(), expandable_segments_.end(),
                           [&](const auto& e) { return e.get() == block->es; });
    if (it != expandable_segments_.end()) expandable_segments_.erase(it);
    arena_.recycle(block);
  }

  static void splice(Block* b, Block* before, Block* after) {
    if (before) before->next = b;
    b->prev = before;
    if (after) after->prev = b;
    b->next = after;
  }

  // ---- reporting ----------------------------------------------------------------------------
  void record_oom(Bytes orig_size, const AllocParams& p, bool retried) {
    ++stats_.num_ooms;
    OomDetails& o = last_oom_;
    o.requested_bytes = orig_size;
    o.allocated_bytes = static_cast<Bytes>(stats_.allocated_bytes.all_current);
    o.reserved_bytes = static_cast<Bytes>(stats_.reserved_bytes.all_current);
    o.cached_bytes = o.reserved_bytes - o.allocated_bytes;
    o.largest_free_block = 0;
    for (Pool* pool : {&large_, &small_})
      for (Block* b = pool->blocks.first(); b; b = pool->blocks.next(b))
        o.largest_free_block = std::max(o.largest_free_block, b->size);
    o.retried_after_freeing_cache = retried;
    o.limit_bytes = allowed_memory_maximum_;
    const DeviceInfo& info = device_.info();
    const Bytes total = card_bytes_;
    const Bytes used = device_.used_bytes();
    const Bytes device_free = info.capacity_bytes > used ? info.capacity_bytes - used : 0;
    o.message = fmt::format(
        "CUDA out of memory. Tried to allocate {}. GPU {} has a total capacity of {} of which {} "
        "is free. {} allowed; Of the allocated memory {} is allocated by PyTorch, and {} is "
        "reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
        "setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.",
        torch_format_size(std::max(p.alloc_size, orig_size)), info.ordinal, torch_format_size(total), torch_format_size(device_free),
        torch_format_size(allowed_memory_maximum_), torch_format_size(o.allocated_bytes),
        torch_format_size(o.cached_bytes));
  }

  std::vector<Block*> all_blocks() const {
    std::vector<Block*> out;
    out.reserve(live_.size());
    live_.for_each([&](Block* b) { out.push_back(b); });
    for (Block* b : by_slot_)
      if (b) out.push_back(b);
    for (const Pool* pool : {&large_, &small_}) {
      for (Block* b = pool->blocks.first(); b; b = pool->blocks.next(b)) out.push_back(b);
      for (Block* b = pool->unmapped.first(); b; b = pool->unmapped.next(b)) out.push_back(b);
    }
    return out;
  }

  Device& device_;
  CachingConfig cfg_;
  Bytes allowed_memory_maximum_;
  bool gc_active_;
  bool es_active_;
  bool rounds_power2_;  // some roundup_power2_divisions entry > 1
  Bytes card_bytes_;
  // No garbage collection, expandable segments, max_split_size or roundup_power2_divisions:
  // run_calls takes a loop with those parts left out (run_calls_as<true>).
  bool plain_;
  Pool small_, large_;
  Pool* const pool_by_small_[2] = {&large_, &small_};  // a load where a branch would mispredict
  DeviceStats stats_;
  Bytes total_allocated_memory_ = 0;
  BlockArena arena_;
  PtrMap live_;                 // live blocks by address, but for those in by_slot_
  std::vector<Block*> by_slot_;  // run_calls: the live block of each slot (nullptr: none there)
  std::vector<std::unique_ptr<ExpandableSegment>> expandable_segments_;
  OomDetails last_oom_;
  std::uint64_t cache_hits_ = 0;
  // The blocks freed but not returned yet (free_requested): their sizes and requested bytes.
  Bytes bytes_pending_ = 0, requested_pending_ = 0;
  std::uint64_t blocks_pending_ = 0;
  std::vector<Block*> pending_;                            // those blocks
  std::vector<DevPtr> returned_early_;                     // (take_returned_early)
  DevPtr* run_slot_ptr_ = nullptr;                         // run_calls' slot_ptr while it runs
  std::int64_t active_bytes_peak_ = 0, active_peak_ = 0;  // (note_active_peak)
  bool any_free_requested_ = false;
};

std::vector<SegmentInfo> CachingAllocator::segments() const {
  std::vector<SegmentInfo> out;
  for (Block* head : all_blocks()) {
    // One segment per cudaMalloc; for expandable segments one per contiguous mapped range.
    if (!head->mapped || (head->prev && head->prev->mapped)) continue;
    SegmentInfo seg;
    seg.address = head->ptr;
    seg.stream = head->stream;
    seg.pool = head->small ? "small" : "large";
    for (const Block* b = head; b && b->mapped; b = b->next) {
      BlockInfo bi;
      bi.offset = b->ptr - head->ptr;
      bi.size = b->size;
      bi.allocated = b->allocated;
      bi.mapped = true;
      seg.blocks.push_back(bi);
      seg.size += b->size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

// Unlike segments() (PyTorch's snapshot: one segment per mapped range), an expandable segment
// is one row over its whole reserved range, its unmapped stretches included.
std::vector<SegmentInfo> CachingAllocator::block_map() const {
  std::vector<SegmentInfo> out;
  for (Block* head : all_blocks()) {
    if (head->prev) continue;
    SegmentInfo seg;
    seg.address = head->ptr;
    seg.stream = head->stream;
    seg.pool = head->small ? "small" : "large";
    for (const Block* b = head; b; b = b->next) {
      seg.blocks.push_back({b->ptr - head->ptr, b->size, b->allocated, b->mapped});
      seg.size += b->size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentInfo& a, const SegmentInfo& b) { return a.address < b.address; });
  return out;
}

std::vector<std::pair<std::string, std::int64_t>> CachingAllocator::memory_stats() const {
  std::vector<std::pair<std::string, std::int64_t>> out;
  auto add_stat = [&](const std::string& prefix, const Stat& s) {
    out.emplace_back(prefix + ".current", s.current);
    out.emplace_back(prefix + ".peak", s.peak);
    out.emplace_back(prefix + ".allocated", s.allocated);
    out.emplace_back(prefix + ".freed", s.freed);
  };
  auto add_array = [&](const char* name, const StatArray& a) {
    add_stat(fmt::format("{}.all", name), a.at(kAll));
    add_stat(fmt::format("{}.small_pool", name), a.at(kSmall));
    add_stat(fmt::format("{}.large_pool", name), a.at(kLarge));
  };
  add_array("allocation", stats_.allocation);
  add_array("segment", stats_.segment);
  // active = allocation + the blocks pending (see DeviceStats): the .all figures only.
  auto add_active = [&](const char* name, const StatArray& same, std::int64_t pending, std::int64_t peak) {
    if (!any_free_requested_) return add_array(name, same);
    Stat a = same.at(kAll);
    a.current += pending;
    a.peak = std::max(peak, a.peak);
    a.freed = a.allocated - a.current;
    add_stat(fmt::format("{}.all", name), a);
  };
  add_active("active", stats_.allocation, static_cast<std::int64_t>(blocks_pending_), active_peak_);
  add_array("inactive_split", stats_.inactive_split);
  add_array("allocated_bytes", stats_.allocated_bytes);
  add_array("reserved_bytes", stats_.reserved_bytes);
  add_active("active_bytes", stats_.allocated_bytes, static_cast<std::int64_t>(bytes_pending_),
             active_bytes_peak_);
  add_array("inactive_split_bytes", stats_.inactive_split_bytes);
  add_array("requested_bytes", stats_.requested_bytes);
  add_stat("oversize_allocations", stats_.oversize_allocations);
  add_stat("oversize_segments", stats_.oversize_segments);
  out.emplace_back("num_alloc_retries", stats_.num_alloc_retries);
  out.emplace_back("num_ooms", stats_.num_ooms);
  out.emplace_back("num_sync_all_streams", stats_.num_sync_all_streams);
  out.emplace_back("num_device_alloc", stats_.num_device_alloc);
  out.emplace_back("num_device_free", stats_.num_device_free);
  out.emplace_back("max_split_size", stats_.max_split_size);
  // torch.cuda.memory_stats() returns its keys sorted.
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

std::string CachingAllocator::memory_summary() const {
  auto format_size = [](std::int64_t sz, double pref) {
    static const char* prefixes[] = {"B  ", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int k = 0;
    for (int i = 1; i < 6; ++i) {
      if (pref < 768 * 1024) break;
      k = i;
      sz /= 1024;
      pref /= 1024;
    }
    return fmt::format("{:6d} {}", sz, prefixes[k]);
  };
  auto format_count = [](std::int64_t cnt, double pref) {
    static const char* prefixes[] = {" ", "K", "M"};
    int k = 0;
    for (int i = 1; i < 3; ++i) {
      if (pref < 750 * 1000) break;
      k = i;
      cnt /= 1000;
      pref /= 1000;
    }
    return fmt::format("{:7d} {} ", cnt, prefixes[k]);
  };
  std::vector<std::string> lines;
  const std::string eq(75, '='), dash(75, '-');
  lines.push_back(eq);
  lines.push_back(fmt::format(" {:16} PyTorch CUDA memory summary, device ID {:<17d} ", "", 0));
  lines.push_back(dash);
  lines.push_back(fmt::format("  {:9} CUDA OOMs: {:<12d} | {:6} cudaMalloc retries: {:<8d}  ", "",
                              stats_.num_ooms, "", stats_.num_alloc_retries));
  lines.push_back(eq);
  lines.push_back("        Metric         | Cur Usage  | Peak Usage | Tot Alloc  | Tot Freed  ");
  struct Metric {
    const StatArray* a;
    const char* name;
    bool bytes;
  };
  const Metric metrics[] = {
      {&stats_.allocated_bytes, "Allocated memory", true},
      {&stats_.allocated_bytes, "Active memory", true},
      {&stats_.requested_bytes, "Requested memory", true},
      {&stats_.reserved_bytes, "GPU reserved memory", true},
      {&stats_.inactive_split_bytes, "Non-releasable memory", true},
      {&stats_.allocation, "Allocations", false},
      {&stats_.allocation, "Active allocs", false},
      {&stats_.segment, "GPU reserved segments", false},
      {&stats_.inactive_split, "Non-releasable allocs", false},
  };
  for (const Metric& m : metrics) {
    const bool active = std::string_view(m.name).substr(0, 6) == "Active";
    if (active && any_free_requested_) continue;  // not kept (DeviceStats)
    lines.push_back(dash);
    const Stat all = m.a->at(kAll);
    const std::pair<int, const char*> subs[] = {
        {kAll, m.name}, {kLarge, "      from large pool"}, {kSmall, "      from small pool"}};
    for (const auto& [idx, label] : subs) {
      const Stat s = m.a->at(idx);
      auto f = [&](std::int64_t v, std::int64_t pref) {
        return m.bytes ? format_size(v, static_cast<double>(pref))
                       : format_count(v, static_cast<double>(pref));
      };
      lines.push_back(fmt::format(" {:<21} | {} | {} | {} | {} ", label, f(s.current, all.current),
                                  f(s.peak, all.peak), f(s.allocated, all.allocated),
                                  f(s.freed, all.freed)));
    }
  }
  const std::pair<const Stat*, const char*> oversize[] = {
      {&stats_.oversize_allocations, "Oversize allocations"},
      {&stats_.oversize_segments, "Oversize GPU segments"}};
  for (const auto& [s, name] : oversize) {
    lines.push_back(dash);
    auto c = [&](std::int64_t v) { return format_count(v, static_cast<double>(v)); };
    lines.push_back(fmt::format(" {:<21} | {} | {} | {} | {} ", name, c(s->current), c(s->peak),
                                c(s->allocated), c(s->freed)));
  }
  lines.push_back(eq);
  std::string out;
  for (const auto& l : lines) out += "|" + l + "|\n";
  return out;
}

}  // namespace
}  // namespace caching

std::vector<AllocatorOption> caching_options() {
  return {{"alloc_conf", "PyTorch's PYTORCH_CUDA_ALLOC_CONF string, e.g. expandable_segments:True"},
          {"memory_limit_bytes", "a byte count or a size such as 24GiB"}};
}

namespace {

struct CachingOptions {
  caching::CachingConfig config;
  std::optional<Bytes> memory_limit;  // memory_limit_bytes, where given
};

CachingOptions parse_caching_options(const AllocatorOptions& options) {
  check_option_keys(options, caching_options());
  CachingOptions o;
  if (auto it = options.find("alloc_conf"); it != options.end())
    o.config = caching::parse_alloc_conf(it->second);
  if (auto it = options.find("memory_limit_bytes"); it != options.end()) {
    o.memory_limit = parse_size(it->second);
    if (!o.memory_limit)
      throw OptionError("memory_limit_bytes",
                        fmt::format("memory_limit_bytes: '{}' is not a size", it->second),
                        "a byte count or a size such as 24GiB");
  }
  return o;
}

}  // namespace

void validate_caching_options(const AllocatorOptions& options) { parse_caching_options(options); }

bool caching_capacity_is_limit(const AllocatorOptions& options) {
  const CachingOptions o = parse_caching_options(options);
  return !o.memory_limit && o.config.per_process_memory_fraction >= 1.0;
}

Bytes caching_limit_overshoot_bytes(const AllocatorOptions& options) {
  if (!caching_capacity_is_limit(options)) return 0;
  const CachingOptions o = parse_caching_options(options);
  // Small-pool pages (2 MiB) equal the small pool's rounded request: no overshoot there.
  return o.config.expandable_segments ? o.config.large_segment_size : 0;
}

std::unique_ptr<InspectableAllocator> make_caching_allocator(Device& device, const AllocatorOptions& options) {
  CachingOptions o = parse_caching_options(options);
  const DeviceInfo& info = device.info();
  Bytes card = info.total_bytes ? info.total_bytes : info.capacity_bytes;
  Bytes limit = info.capacity_bytes;
  if (o.config.per_process_memory_fraction < 1.0)
    limit = static_cast<Bytes>(o.config.per_process_memory_fraction * static_cast<double>(card));
  if (o.memory_limit) limit = *o.memory_limit;
  return std::make_unique<caching::CachingAllocator>(device, std::move(o.config), limit);
}

}  // namespace gmb
