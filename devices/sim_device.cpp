// The simulated GPU: deterministic, no GPU needed. Every rule below was measured on the H200
// (driver 580.159, CUDA 13.0) by scripts/probe/driver_probe.cu; the probe's output is
// results/h200/probe/driver_probe.json and results/h200/native_allocators.md reads it.
//
// cudaMalloc placement and footprint: devices/sim_malloc_model.h (VA regions placed top-down,
// best fit; requests below one page packed into shared 2 MiB pages, best fit, oldest first).
//
// cudaMemPool (cudaMemPoolCreate, pinned, device 0): see the PoolModel comment below.
// Managed memory: taken in 2 MiB pages from the same physical memory (not measured: the probe
// never allocates managed memory on a shared GPU); prefetch and advice change nothing here.
// Call costs: cudaMalloc/cudaFree and the pool calls are the probe's medians of 50 calls on the
// H200 (results/h200/probe/); VMM calls are medians measured on the H200 the same way (map of
// 2 MiB 44 us, unmap 33 us); managed memory, small cudaMallocs, trims and which calls wait for
// the GPU come from scripts/probe/step_probe.cpp (the step-time constants below).
// The one-at-a-time VMM calls (create/map/unmap/release of a physical handle): see create_cost.
// The modeled timeline (Device::model_kernel; docs/STEP_TIME.md): each call adds its cost to the
// host's time, a kernel or a prefetch queues GPU time behind the work already queued, and a call
// that waits for the GPU (cudaFree, a synchronize) first moves the host to the end of the queue.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <deque>
#include <iterator>
#include <map>
#include <array>
#include <vector>

#include <fmt/format.h>

#include "devices/call_log_file.h"
#include "devices/device.h"
#include "common/live_map.h"
#include "common/units.h"
#include "devices/sim_malloc_model.h"

namespace gmb {
namespace {

constexpr DevPtr kManagedBase = 0x200000000000ULL;
// Pools: the H200 put the first pool's memory at 0x302000000; each pool gets 1 TiB of VA.
constexpr DevPtr kPoolBase = 0x302000000ULL;
constexpr Bytes kPoolSpan = 1ULL << 40;
constexpr int kMaxPools = 16;
constexpr Bytes kPoolGranule = 32 * MiB;  // pool memory is mapped and released in 32 MiB pieces
constexpr Bytes kPoolStep = 512;

Bytes round_up(Bytes n, Bytes step) { return (n + step - 1) / step * step; }

// Piecewise linear in the size between measured points (the first point's cost below it, the
// last segment's slope above the last).
struct CostPoint {
  double bytes, seconds;
};
template <std::size_t N>
double cost_at(const CostPoint (&pts)[N], Bytes bytes) {
  const double b = static_cast<double>(bytes);
  if (b <= pts[0].bytes) return pts[0].seconds;
  for (std::size_t i = 1; i < N; ++i)
    if (b <= pts[i].bytes || i == N - 1)
      return pts[i - 1].seconds +
             (pts[i].seconds - pts[i - 1].seconds) * (b - pts[i - 1].bytes) / (pts[i].bytes - pts[i - 1].bytes);
  return pts[N - 1].seconds;
}
constexpr double kMiB = 1048576.0;
// cudaMalloc and cudaFree in a training loop (modeled): medians of the calls of steps 1-5 of
// dynamic_seq and fixed_seq run through cudaMalloc with no synchronization
// (scripts/probe/step_probe.cpp --sections loop; the frees made while the GPU was idle, so without
// a wait). They are flatter than the isolated calls of the driver probe (51.8 us at 2 MiB,
// 88.5 us at 100 MiB, 167 us at 1 GiB for cudaMalloc; 41.9 us, 149 us, 688 us for cudaFree);
// the 1 GiB cudaFree is the driver probe's (no such free ran on an idle GPU in the loop).
constexpr CostPoint kMallocCost[] = {{2 * kMiB, 55e-6}, {64 * kMiB, 60e-6}, {256 * kMiB, 70e-6}, {1024 * kMiB, 125e-6}};
constexpr CostPoint kFreeCost[] = {{2 * kMiB, 45e-6}, {64 * kMiB, 60e-6}, {256 * kMiB, 96e-6}, {1024 * kMiB, 688e-6}};
double malloc_cost(Bytes b) { return cost_at(kMallocCost, b); }
double free_cost(Bytes b) { return cost_at(kFreeCost, b); }
// cudaMallocFromPoolAsync and cudaFreeAsync inside a run (modeled): 1.6 and 2.2 us. The H200's
// call log of dynamic_seq through cuda_mempool (results/h200/probe/pool/timeline/, 120 steps)
// has 1.77 us a malloc that does not grow the pool and 2.44 us a free (its free includes the
// log's cudaEventRecord); scaled to 1.9 us an event, the median over 20 unlogged H200 runs of
// the four transformer configs through both cuda_mempool rows (alloc_seconds / events, 1.4 to
// 2.7 us, the growth below taken out). The driver probe's isolated calls took 0.65 and 0.81 us.
constexpr double kAsyncMallocCost = 1.6e-6, kAsyncFreeCost = 2.2e-6;
// A cudaMallocFromPoolAsync that maps new memory into the pool costs the host 55 us more for
// each 32 MiB granule (least squares over the 317 growing calls of that log: 2.0 us + 55.0 us a
// granule; 46.9 us median for one granule, 2.1 ms for 32). In a run's first step the pool grows
// by ~20 GiB, ~35 ms of host time in which the GPU catches up, which changes which frees it
// has reached (PoolModel) and so the pool's layout at a cap (results/h200/probe/pool/band/).
constexpr double kPoolGrowCostPerGranule = 55e-6;
// The VMM calls one at a time (modeled): medians of 50 calls each on the H200 at 2 MiB and
// 20 MiB (scripts/probe/vmm_probe.cu, results/h200/probe/vmm_probe.json), linear in the size
// between the two and beyond (below 2 MiB: the 2 MiB cost). cuMemAddressReserve/Free measured
// about 0.5 us each and are modeled as free, as for expandable segments.
double handle_call_cost(Bytes bytes, double at_2mib_us, double at_20mib_us) {
  const double x = static_cast<double>(std::max<Bytes>(bytes, 2 * MiB) - 2 * MiB) / static_cast<double>(18 * MiB);
  return (at_2mib_us + (at_20mib_us - at_2mib_us) * x) * 1e-6;
}
double create_cost(Bytes b) { return handle_call_cost(b, 7.402, 7.718); }     // cuMemCreate
double map_cost(Bytes b) { return handle_call_cost(b, 19.591, 20.563); }      // cuMemMap + cuMemSetAccess
double unmap_cost(Bytes b) { return handle_call_cost(b, 12.968, 13.117); }    // cuMemUnmap
double release_cost(Bytes b) { return handle_call_cost(b, 9.155, 16.967); }   // cuMemRelease

// The step-time model's driver constants (modeled; docs/STEP_TIME.md), measured on the H200 by
// scripts/probe/step_probe.cpp (results/h200/probe/step/step_probe.json):
//  - cudaFree (of device or managed memory) waits until the GPU has run all queued work: with
//    18.8 ms of kernels queued it took 18.85 ms, 26 us with the GPU idle. cudaMalloc,
//    cudaMallocManaged, cudaMallocAsync, cudaFreeAsync, cudaMemPrefetchAsync and
//    cudaMemPoolTrimTo do not wait (the same with and without the queued kernels).
//  - A cudaMalloc below 2 MiB that fits a shared page already there, and the cudaFree of one
//    that leaves its page in use: 2.5 us (medians 1.8-2.9 us in the probe's steps, of requests
//    up to 1 MiB), against ~50 us for one that takes or releases a page. 1-2 MiB requests are
//    packed too: in the loop probe of dynamic_seq 92 of 193 cudaMallocs of 1-2 MiB took under
//    20 us, none of the 4429 of 2 MiB or more.
constexpr double kPackedMallocCost = 2.5e-6;
constexpr double kPackedFreeCost = 2.5e-6;
//  - Fitted, not measured call by call: in gpumembench's own runs on the H200 the cudaMalloc and
//    cudaFree calls cost more than in the probe's loop (those runs hold a ~115 GiB ballast and run
//    300 steps; the probe neither). One factor for every cudaMalloc, cudaFree and managed-memory
//    call brings the modeled cuda_malloc runs of dynamic_seq and fixed_seq to the H200's
//    (docs/STEP_TIME.md: their in-allocator seconds against the probe's).
constexpr double kInRunCallFactor = 1.8;
//  - cudaMemPoolTrimTo: 265 us to release 256 MiB (8 granules of 32 MiB): 33 us per granule.
constexpr double kPoolTrimCostPerGranule = 33e-6;
//  - Launches go in rounds of 1280: the launch after a full round waits until the GPU has run
//    every launch before it. It bounds how far ahead of the GPU a loop without waits runs, how
//    long its next wait (a cudaFree, a synchronize) lasts, and which frees a cudaMemPool sees
//    completed (PoolModel). Fitted to the H200's timeline of dynamic_seq through cuda_mempool
//    (results/h200/probe/pool/timeline/, scripts/probe/host_lag.py): there the host's waits in a
//    launch mostly end with the GPU caught up completely (309 of 391 waits of 0.3 ms or more),
//    and the frees the GPU had not reached at a pool request were 0 / 0 / 14 / 363 / 774 / 1098
//    (10th / 25th / 50th / 75th / 90th / 99th percentile; that run's log costs the host about
//    2.6 us a pool call); the sim with this rule, the pool calls' in-run costs above and that
//    cost gives 0 / 0 / 54 / 402 / 728 / 1054 (rounds of 1024: 0 / 0 / 22 / 292 / 615 / 1026;
//    with the driver probe's 0.65 / 0.81 us a pool call, rounds of 1024 gave 0 / 1 / 48 / 324 /
//    669 / 1040). With one slot freed at a time it gave 1091 .. 1402: the host always a full
//    queue ahead. The depth is fitted, not measured. The H200's long waits come at the first
//    cuBLAS call of a GEMM shape (results/h200/probe/step/: 2-5 ms for about 5 of a new
//    length's 27 shapes), which the sim does not model (docs/STEP_TIME.md).
constexpr std::size_t kLaunchQueueDepth = 1280;
//  - Device memory given back to the driver (cudaFree of a segment, cuMemRelease, a pool's
//    trim) is handed out again only about 7 ms after it was freed: a cudaMalloc that needs it
//    (the device has too little other free memory) waits until then. On the H200 at a 24 GiB
//    cap (configs/dynamic_seq.yaml through caching[max_split_size_mb:128], every call timed by
//    GMB_CUDA_CALL_LOG with a synchronize before it, results/h200/probe/cap/), the 1,595
//    cudaMallocs made right after a cudaFree took 5.9 / 6.9 / 7.5 ms (10th / 50th / 90th
//    percentile), the 6,363 others 0.10 ms (median): 36 ms of each step. scripts/probe/cap_probe.cu
//    (free_cost) sees the same on a nearly full device (re-mallocs stall 4.7-8.9 ms) and not
//    with 20 ms between the frees and the mallocs, nor on an empty device. Modeled: each freed
//    range becomes reusable kFreedMemoryReuseSeconds after its free (host clock), in the order
//    freed; a request that can succeed waits until enough of it is reusable. Whether the driver
//    scrubs the memory in that time is not known; only the delay is modeled.
constexpr double kFreedMemoryReuseSeconds = 7.0e-3;
//  - Managed memory, medians of 5 per size (64 KiB .. 1 GiB): cudaMallocManaged 10 us (53 us at
//    1 GiB), cudaMemPrefetchAsync 4 us on the host and on the GPU 44 us at 2 MiB, 163 us at
//    32 MiB, 0.95 ms at 256 MiB, 4.9 ms at 1 GiB; cudaFree of it 21 us at 2 MiB, 0.20 ms at
//    32 MiB, 1.46 ms at 256 MiB, 7.3 ms at 1 GiB (after the wait for the GPU); without a
//    prefetch the first kernel that touches it pays the page faults instead: 0.17 ms at 2 MiB,
//    2.2 ms at 32 MiB, 13.9 ms at 256 MiB, 81 ms at 1 GiB.
constexpr CostPoint kManagedMallocCost[] = {{2 * kMiB, 9.3e-6}, {256 * kMiB, 10.3e-6}, {1024 * kMiB, 53.2e-6}};
// cudaFree of managed memory in the loop (medians, GPU idle): 6.5 us up to 1 MiB, 36 us at 4 MiB,
// 101 us at 16 MiB, 292 us at 64 MiB, 567 us at 128 MiB, 1.07 ms at 256 MiB; 1 GiB as isolated.
constexpr CostPoint kManagedFreeCost[] = {{1 * kMiB, 6.5e-6},     {4 * kMiB, 35.7e-6},     {16 * kMiB, 100.6e-6},
                                          {64 * kMiB, 291.5e-6},  {128 * kMiB, 566.5e-6},  {256 * kMiB, 1073.4e-6},
                                          {1024 * kMiB, 7311.5e-6}};
constexpr double kPrefetchHostCost = 4.0e-6;
constexpr CostPoint kPrefetchGpuCost[] = {{64 * 1024.0, 52.0e-6}, {2 * kMiB, 44.2e-6}, {32 * kMiB, 163.4e-6},
                                          {256 * kMiB, 947.1e-6}, {1024 * kMiB, 4896.6e-6}};
constexpr CostPoint kFirstTouchGpuCost[] = {{64 * 1024.0, 64.9e-6}, {2 * kMiB, 168.4e-6}, {32 * kMiB, 2159.1e-6},
                                            {256 * kMiB, 13917.3e-6}, {1024 * kMiB, 81113.2e-6}};

// The cudaMemPool model, from the probe's pool section and scripts/probe/pool_probe.cu
// (results/h200/probe/pool/; the rules below were found with the scripted patterns of
// scripts/probe/pool_patterns.py, results/h200/probe/pool/script/):
//  - Requests are rounded up to 512 bytes and placed in the pool's own contiguous virtual range,
//    best fit (the smallest free range that holds them, from its low end).
//  - The free ranges are in two tiers, each merged only within itself: the frees since the pool
//    last settled (a stream's merged only with its own), and the settled ranges. A request
//    takes the first of:
//      1. best fit over its own stream's recent frees; of equal ones the longest freed (a range
//         a request split counts as freed when it did);
//      2. best fit over the settled ranges every 32 MiB granule of which has memory (the pool's
//         unbounded end aside); of equal ones the longest settled, then the newest freed;
//      3. with cross-stream reuse, best fit over the other streams' recent frees;
//      4. best fit over every free range, both tiers merged; of equal ones the longest freed;
//      5. the pool's end.
//    After 4 or 5 the pool settles: the recent frees the GPU had reached when the request came
//    (on the modeled timeline) join the settled ranges. A synchronize settles every free.
//  - Judged from the H200's own state, this puts every one of the 10,425 requests of its twelve
//    unsynchronized mixes, the 1,245 of the six synchronized ones and the 2,034 of the 234
//    scripted patterns where the H200 did (session 9's rule: 9,573 of the 10,425). With kernels
//    queued, from the H200's call logs (frees_done): 20,776 of the first 20,786 requests of
//    dynamic_seq, 4,743 of the 4,744 of fixed_seq's first steps, 10,678 of 10,767 of
//    fixed_seq_eager's, and all 5,143 of the two-stream snapshot (session 9's rule: 20,745;
//    4,743; 10,401; 4,823). So a pool's layout, and at a tight cap its OOMs, depend on how far
//    the host runs ahead of the GPU: on the H200 a 5 us slower host turns fixed_seq_eager's run
//    to the end into a fragmentation OOM at step 15 (results/h200/probe/pool/delay/). Without
//    kernels (the mixes, trace replays) the GPU has reached every free at once.
//  - Physical memory backs that range in 32 MiB granules: 1 B reserves 32 MiB, 100 MiB
//    reserves 128 MiB, 1 GiB reserves 1 GiB, and consecutive requests share granules
//    (1 B + 1 MiB + 2 MiB + 20 MiB + 100 MiB + 1 GiB reserve 1152 MiB together).
//  - The granules a request touches that have no memory are backed first by moving idle
//    granules (backed, holding no live allocation, and no free the GPU has not yet reached)
//    and only then by new memory. Given the H200's placements, this gives its
//    ReservedMemCurrent after every op of all 18 recorded mixes, synchronized or not. That is
//    how 100+200+300 MiB, free 200, 250 MiB reserves 704 MiB on the H200 and not 864: five idle
//    granules of the freed 200 MiB are reused. With kernels running, a granule whose free the
//    GPU has not reached is not moved: on fixed_seq (results/h200/probe/pool/early/) this takes
//    the sim's peak from 22.31 GiB to the H200's 22.78 GiB (the same in its four runs).
//  - ReservedMemCurrent = backed granules x 32 MiB; UsedMemCurrent = the bytes requested.
//  - Above the release threshold, idle granules go back to the device at the next
//    synchronization (threshold 0: reserved drops to 0 at the stream sync after the free,
//    not at the free); cudaMemPoolTrimTo releases idle granules down to the bytes to keep
//    (with 20 MiB live, trim to 0 keeps the one 32 MiB granule that holds it).
//  - Which idle granule is moved or released first (here the highest) changes nothing in
//    ReservedMemCurrent on the recorded mixes.
//  - Reuse across streams: the sim's GPU is idle, so a free has always completed; a range
//    freed on another stream is reusable when opportunistic reuse or internal dependencies
//    are allowed, else only after a synchronize. Event dependencies are not modeled.
struct PoolBlock {
  Bytes size = 0;       // rounded
  Bytes requested = 0;  // counted in UsedMem
  StreamId stream = 0;
};

// A set of a pool's granule indices (kPoolSpan / kPoolGranule of them) as a bitmap: whether a
// granule is backed is asked for every granule a cudaMallocAsync touches.
class GranuleSet {
 public:
  static constexpr std::size_t kGranules = kPoolSpan / kPoolGranule;
  bool count(std::uint64_t g) const { return (words_[g >> 6] >> (g & 63)) & 1; }
  void insert(std::uint64_t g) {
    if (count(g)) return;
    words_[g >> 6] |= std::uint64_t{1} << (g & 63);
    ++size_;
  }
  void erase(std::uint64_t g) {
    if (!count(g)) return;
    words_[g >> 6] &= ~(std::uint64_t{1} << (g & 63));
    --size_;
  }
  std::size_t size() const { return size_; }
  void clear() {
    words_.fill(0);
    size_ = 0;
  }
  // f(g) for every granule in the set, highest first.
  template <class F>
  void for_each_descending(F&& f) const {
    for (std::size_t w = words_.size(); w-- > 0;)
      for (std::uint64_t m = words_[w]; m;) {
        const int b = 63 - __builtin_clzll(m);
        f(std::uint64_t(w * 64 + static_cast<std::size_t>(b)));
        m &= ~(std::uint64_t{1} << b);
      }
  }

 private:
  std::array<std::uint64_t, kGranules / 64> words_{};
  std::size_t size_ = 0;
};

// A freed range of a pool: its length, the stream that freed it, and when (the pool clock at its
// newest free or at the split that left it: equal fits go to the oldest).
struct PoolRange {
  Bytes size = 0;
  StreamId stream = 0;
  std::uint64_t freed = 0;
  double reached = 0;  // modeled GPU time at which the GPU reaches its newest free
};

// Ranges offset -> PoolRange, disjoint, by offset: a pool's pending and recent frees. A sorted
// vector, not a tree: every cudaMallocAsync walks the recent frees, and they are few.
class RangeList {
 public:
  // A plain struct, not std::pair (whose assignment is not trivial): the vector moves its entries
  // with memmove when one is inserted or erased.
  struct Entry {
    Bytes first;
    PoolRange second;
  };
  using iterator = std::vector<Entry>::iterator;
  using const_iterator = std::vector<Entry>::const_iterator;
  iterator begin() { return v_.begin(); }
  iterator end() { return v_.end(); }
  const_iterator begin() const { return v_.begin(); }
  const_iterator end() const { return v_.end(); }
  bool empty() const { return v_.empty(); }
  std::size_t size() const { return v_.size(); }
  void clear() { v_.clear(); }
  template <class Pred>
  void remove_if(Pred pred) {
    v_.erase(std::remove_if(v_.begin(), v_.end(), pred), v_.end());
  }
  // The first range at `offset` or above.
  iterator lower_bound(Bytes offset) {
    return std::lower_bound(v_.begin(), v_.end(), offset, [](const Entry& e, Bytes o) { return e.first < o; });
  }
  iterator erase(iterator it) { return v_.erase(it); }  // the next range
  // Moves the range at `it` to `offset`, which must keep the order (between its neighbours).
  static void move_to(iterator it, Bytes offset, Bytes size) {
    it->first = offset;
    it->second.size = size;
  }
  // Inserts a range at `at`, which must be where its offset belongs (a new offset).
  iterator insert(iterator at, Bytes offset, const PoolRange& r) { return v_.insert(at, Entry{offset, r}); }
  // Inserts or replaces the range at `offset`.
  void set(Bytes offset, const PoolRange& r) {
    auto it = lower_bound(offset);
    if (it != v_.end() && it->first == offset) it->second = r;
    else v_.insert(it, Entry{offset, r});
  }

 private:
  std::vector<Entry> v_;
};

// A settled free range (see PoolModel::settled): [start, end), the pool clock at its newest free
// and at the settle that made it (a range merged from several is as new as the newest of each).
struct SettledRange {
  Bytes start = 0, end = 0;
  std::uint64_t freed = 0;
  std::uint64_t settled = 0;
};

struct PoolModel {
  MemPoolOptions options;
  DevPtr base = 0;
  bool alive = false;
  LiveMap<PoolBlock> live;  // offset -> block (looked up on every free: a flat hash table)
  RangeList pending;  // freed, not reusable by other streams yet
  // Ranges freed since the pool last settled (below), merged only with each other (and a
  // stream's only with its own). A split keeps the rest in the tier, as new as the split.
  RangeList recent;
  // Every other free range, merged only with each other: the recent frees join them at a settle
  // (a request that neither the recent frees of its stream nor a fully backed settled range
  // holds, or a synchronize), as many as the GPU has reached by then. Disjoint from `recent`, in
  // address order; the last one ends at kPoolSpan unless a live block or recent free does.
  std::vector<SettledRange> settled{{0, kPoolSpan, 0, 0}};
  // `recent` and `settled` together are the free memory between live blocks: best fit over
  // every free range walks both, merging touching ranges, and never the live blocks.
  GranuleSet backed;  // granule indices with physical memory
  // The pool's clock, one tick a cudaMallocAsync or cudaFreeAsync: the age of a free range.
  std::uint64_t clock = 0;
  MemPoolUsage usage;

  bool cross_stream_reuse() const {
    return options.reuse_allow_opportunistic || options.reuse_allow_internal_dependencies;
  }
};

class SimDevice final : public Device {
 public:
  explicit SimDevice(const SimDeviceOptions& o) : info_(checked_info(o)), malloc_model_(info_.page_bytes) {}

  const DeviceInfo& info() const override { return info_; }

  // A cudaMalloc / cudaFree / managed call of the probe's cost, as it costs inside a run
  // (kInRunCallFactor).
  void add_driver_call_seconds(double probe_seconds) { add_modeled_call_seconds(probe_seconds * kInRunCallFactor); }

  // The logged calls (SimCallLog): each do_X logs around X.
  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    if (!log_.on()) return malloc_device(bytes);
    const LogStart at = log_start();
    const auto p = malloc_device(bytes);
    log_row("malloc", bytes, p.has_value(), at, p.value_or(0), 0);
    return p;
  }
  void do_free(DevPtr ptr) override {
    if (!log_.on()) return free_device(ptr);
    const LogStart at = log_start();
    free_device(ptr);
    log_row("free", 0, true, at, ptr, 0);
  }
  std::optional<DevPtr> do_malloc_async(PoolHandle h, Bytes bytes, StreamId stream) override {
    if (!log_.on()) return malloc_async(h, bytes, stream);
    const LogStart at = log_start();
    const auto p = malloc_async(h, bytes, stream);
    log_row("malloc_async", bytes, p.has_value(), at, p.value_or(0), pool_at(h).usage.reserved_current);
    return p;
  }
  void do_free_async(PoolHandle h, DevPtr ptr, StreamId stream) override {
    if (!log_.on()) return free_async(h, ptr, stream);
    const LogStart at = log_start();
    free_async(h, ptr, stream);
    free_reached_at_.push_back(gpu_reaches_now());
    log_row("free_async", 0, true, at, ptr, pool_at(h).usage.reserved_current);
  }

  std::optional<DevPtr> malloc_device(Bytes bytes) {
    // A packed request's cost: whether it takes a new page (below).
    if (bytes == 0 || !malloc_model_.packed(bytes)) add_driver_call_seconds(malloc_cost(bytes));
    if (bytes == 0) return DevPtr{0};
    const Bytes available = info_.capacity_bytes > used_ ? info_.capacity_bytes - used_ : 0;
    const auto placed = malloc_model_.malloc(bytes, available);
    if (malloc_model_.packed(bytes))
      add_driver_call_seconds(placed && placed->taken == 0 ? kPackedMallocCost : malloc_cost(info_.page_bytes));
    if (!placed) return std::nullopt;
    take_physical(placed->taken);
    return placed->ptr;
  }

  void free_device(DevPtr ptr) {
    if (ptr == 0) return;
    wait_for_modeled_gpu();  // cudaFree waits for the device's queued work (results/h200/probe/)
    const auto freed = malloc_model_.free(ptr);
    // A large request's or a released page's cost; a packed one whose page stays is cheap.
    add_driver_call_seconds(freed && freed->released > 0 ? free_cost(freed->released) : kPackedFreeCost);
    if (freed) give_physical(freed->released);
  }

  Bytes vmm_granularity() const override { return info_.page_bytes; }

  std::optional<DevPtr> do_reserve_address_range(Bytes bytes) override {
    if (bytes > 2 * kMaxDeviceBytes) return std::nullopt;  // more address space than modeled
    return malloc_model_.reserve_range(round_up(bytes, info_.page_bytes));
  }

  void do_release_address_range(DevPtr base, Bytes) override { malloc_model_.release_range(base); }

  bool do_map(DevPtr addr, Bytes bytes) override {
    add_modeled_call_seconds(44e-6 * static_cast<double>(bytes / info_.page_bytes));
    if (bytes > info_.capacity_bytes || used_ + bytes > info_.capacity_bytes) return false;
    take_physical(bytes);
    mapped_[addr] = bytes;
    return true;
  }

  void do_unmap(DevPtr addr, Bytes bytes) override {
    add_modeled_call_seconds(33e-6 * static_cast<double>(bytes / info_.page_bytes));
    // Unmap every mapping inside [addr, addr + bytes).
    for (auto it = mapped_.lower_bound(addr); it != mapped_.end() && it->first < addr + bytes;) {
      give_physical(it->second);
      it = mapped_.erase(it);
    }
  }

  // Physical handles: memory is taken at creation and given back at release; a mapping only
  // records where a handle is seen (the same handle may be mapped at several addresses).
  std::optional<PhysicalHandle> do_create_physical(Bytes bytes) override {
    add_modeled_call_seconds(create_cost(bytes));
    if (bytes == 0 || bytes % info_.page_bytes != 0)
      throw DeviceError(fmt::format("simulated device: cuMemCreate of {} bytes, not a multiple of the {}-byte "
                                    "granularity", bytes, info_.page_bytes));
    if (bytes > info_.capacity_bytes || used_ + bytes > info_.capacity_bytes) return std::nullopt;
    take_physical(bytes);
    const PhysicalHandle h = ++handle_seq_;
    handles_[h] = bytes;
    return h;
  }

  void do_release_physical(PhysicalHandle h) override {
    auto it = handles_.find(h);
    if (it == handles_.end()) throw DeviceError(fmt::format("simulated device: cuMemRelease of unknown handle {}", h));
    add_modeled_call_seconds(release_cost(it->second));
    give_physical(it->second);
    handles_.erase(it);
  }

  void do_map_physical(DevPtr addr, PhysicalHandle h) override {
    auto it = handles_.find(h);
    if (it == handles_.end()) throw DeviceError(fmt::format("simulated device: cuMemMap of unknown handle {}", h));
    add_modeled_call_seconds(map_cost(it->second));
    if (!handle_maps_.emplace(addr, it->second).second)
      throw DeviceError(fmt::format("simulated device: cuMemMap at {:#x}, already mapped", addr));
  }

  void do_unmap_physical(DevPtr addr, Bytes bytes) override {
    auto it = handle_maps_.find(addr);
    if (it == handle_maps_.end() || it->second != bytes)
      throw DeviceError(fmt::format("simulated device: cuMemUnmap of {} bytes at {:#x}: no such mapping", bytes, addr));
    add_modeled_call_seconds(unmap_cost(bytes));
    handle_maps_.erase(it);
  }

  std::optional<DevPtr> do_malloc_managed(Bytes bytes) override {
    add_driver_call_seconds(cost_at(kManagedMallocCost, bytes));
    if (bytes > info_.capacity_bytes) return std::nullopt;  // before rounding: no overflow
    // Modeled: managed ranges in 64 KiB GPU pages (as the cuda_managed cap charges them).
    Bytes size = round_up(std::max<Bytes>(bytes, 1), 64 * KiB);
    if (used_ + size > info_.capacity_bytes) return std::nullopt;  // no oversubscription
    used_ += size;
    DevPtr p = managed_next_;
    managed_next_ += size;
    managed_.put(p, size);
    untouched_managed_.push_back({p, size});  // its pages are faulted in by the next kernel, unless prefetched
    return p;
  }

  void do_free_managed(DevPtr ptr) override {
    wait_for_modeled_gpu();  // as cudaFree of device memory
    Bytes size = 0;
    const bool known = managed_.take(ptr, size);
    touched(ptr);
    add_driver_call_seconds(cost_at(kManagedFreeCost, size));
    if (!known) return;
    used_ -= size;
  }

  void prefetch_managed(DevPtr ptr, Bytes bytes, StreamId) override {
    // Behind queued work the migration is the GPU's; on an idle GPU the call itself does it.
    const DeviceCounters& c = counters();
    if (c.modeled_gpu_end_seconds > c.modeled_host_seconds) {
      add_driver_call_seconds(kPrefetchHostCost);
      queue_modeled_gpu_seconds(cost_at(kPrefetchGpuCost, bytes));
    } else {
      add_driver_call_seconds(kPrefetchHostCost + cost_at(kPrefetchGpuCost, bytes));
    }
    touched(ptr);
  }
  void advise_managed(DevPtr, Bytes, bool, bool) override {}

  // --- cudaMemPool model (see PoolModel) ---
  PoolHandle create_pool(const MemPoolOptions& options) override {
    // A destroyed pool's slot (and its address range) is reused, as the H200 reused 0x302000000.
    std::size_t slot = 0;
    while (slot < pools_.size() && pools_[slot].alive) ++slot;
    if (slot >= static_cast<std::size_t>(kMaxPools))
      throw DeviceError(fmt::format("simulated device: more than {} memory pools at once", kMaxPools));
    if (slot == pools_.size()) pools_.emplace_back();
    PoolModel& pool = pools_[slot];
    pool = PoolModel{};
    pool.options = options;
    pool.base = kPoolBase + slot * kPoolSpan;
    pool.alive = true;
    return static_cast<PoolHandle>(slot);
  }

  void destroy_pool(PoolHandle h) override {
    PoolModel& pool = pool_at(h);
    give_physical(pool.backed.size() * kPoolGranule);
    pool.backed.clear();
    pool.live = LiveMap<PoolBlock>{};
    pool.settled = {{0, kPoolSpan, 0, 0}};
    pool.pending.clear();
    pool.recent.clear();
    pool.usage.reserved_current = pool.usage.used_current = 0;
    pool.alive = false;
  }

  std::optional<DevPtr> malloc_async(PoolHandle h, Bytes bytes, StreamId stream) {
    add_modeled_call_seconds(kAsyncMallocCost + pool_call_delay_seconds_);
    const double request_time = counters().modeled_host_seconds;
    PoolModel& pool = pool_at(h);
    // Larger than the device: refused before rounding and before counting its 32 MiB granules.
    if (bytes > info_.capacity_bytes) return std::nullopt;
    const Bytes size = round_up(std::max<Bytes>(bytes, 1), kPoolStep);

    const std::uint64_t tick = ++pool.clock;

    // Best fit: the smallest range that holds the request, from its low end, searched in the five
    // steps of the model's comment above PoolBlock:
    std::optional<Bytes> best;
    Bytes best_len = ~Bytes{0};  // no range is this long: the first that holds the request is taken
    std::uint64_t best_a = 0, best_b = 0;
    // (len, a, b) beats the best so far: shorter, or as long with a smaller a, or b; the first of
    // equal keys (the lowest: each tier is walked in address order) stays.
    auto better = [&](Bytes len, std::uint64_t a, std::uint64_t b) {
      return len >= size && (len < best_len || (len == best_len && (a < best_a || (a == best_a && b < best_b))));
    };
    auto take_best = [&](Bytes start, Bytes len, std::uint64_t a, std::uint64_t b) {
      best = start;
      best_len = len;
      best_a = a;
      best_b = b;
    };
    // 1. The recent frees of the request's own stream; of equal ones the longest freed.
    for (const auto& [off, r] : pool.recent)
      if (r.stream == stream && better(r.size, r.freed, 0)) take_best(off, r.size, r.freed, 0);
    // 2. The settled ranges every granule of which is backed (not the pool's unbounded end); of
    //    equal ones the longest settled, then the newest freed.
    if (!best)
      for (const SettledRange& r : pool.settled)
        if (r.end != kPoolSpan && better(r.end - r.start, r.settled, ~r.freed) && fully_backed(pool, r.start, r.end))
          take_best(r.start, r.end - r.start, r.settled, ~r.freed);
    // 3. With cross-stream reuse, the other streams' recent frees; of equal ones the longest freed.
    if (!best && pool.cross_stream_reuse())
      for (const auto& [off, r] : pool.recent)
        if (r.stream != stream && better(r.size, r.freed, 0)) take_best(off, r.size, r.freed, 0);
    // 4. Every free range, both tiers merged; of equal ones the longest freed. The pool settles.
    //    5. Else the pool's end.
    const bool settles = !best;
    bool blocked = false;  // ranges freed on other streams that this stream may not reuse yet
    for (const auto& [off, p] : pool.pending) blocked |= p.stream != stream;
    Bytes tail = 0;
    if (best) {
      // placed in a recent free or a settled range
    } else if (!blocked) {  // the free memory between live blocks
      tail = kPoolSpan;
      for_each_free_run(pool, [&](Bytes start, Bytes end, std::uint64_t age) {
        if (end == kPoolSpan) tail = start;
        else if (better(end - start, age, 0)) take_best(start, end - start, age, 0);
      });
    } else {  // the gaps between live blocks and those ranges
      std::vector<std::pair<Bytes, Bytes>> occupied;  // [start, end)
      occupied.reserve(pool.live.size() + pool.pending.size());
      pool.live.for_each([&](Bytes off, const PoolBlock& b) { occupied.emplace_back(off, off + b.size); });
      for (const auto& [off, p] : pool.pending)
        if (p.stream != stream) occupied.emplace_back(off, off + p.size);
      std::sort(occupied.begin(), occupied.end());
      for (auto it = occupied.begin(); it != occupied.end(); ++it) {
        if (it->first > tail) {
          const std::uint64_t age = merged_age(pool, tail, it->first);
          if (better(it->first - tail, age, 0)) take_best(tail, it->first - tail, age, 0);
        }
        tail = std::max(tail, it->second);
      }
    }
    const Bytes offset = best ? *best : tail;
    if (offset + size > kPoolSpan)
      throw DeviceError(fmt::format(
          "simulated device: memory pool virtual address range exhausted (the model gives a pool {} of "
          "address space, the span the H200's driver gave one; a pool larger than that is not modeled)",
          format_bytes(kPoolSpan)));
    // Back the granules it touches: idle granules first, then new memory.
    const std::uint64_t g0 = offset / kPoolGranule, g1 = (offset + size - 1) / kPoolGranule;
    std::vector<std::uint64_t> missing;
    for (std::uint64_t g = g0; g <= g1; ++g)
      if (!pool.backed.count(g)) missing.push_back(g);
    if (!missing.empty()) {
      std::vector<std::uint64_t> idle = idle_granules(pool, true, g0, g1, counters().modeled_host_seconds);
      std::size_t moved = std::min(idle.size(), missing.size());
      Bytes grow = (missing.size() - moved) * kPoolGranule;
      if (used_ + grow > info_.capacity_bytes) return std::nullopt;
      take_physical(grow);
      add_modeled_call_seconds(kPoolGrowCostPerGranule * double(grow / kPoolGranule));
      for (std::size_t i = 0; i < moved; ++i) pool.backed.erase(idle[i]);
      for (std::uint64_t g : missing) pool.backed.insert(g);
      pool.usage.reserved_current = pool.backed.size() * kPoolGranule;
    }
    // The frees the GPU had reached when the request came (its growth's host time aside) settle.
    if (settles) settle(pool, request_time, tick, false);
    drop_overlap(pool.pending, offset, offset + size);
    drop_overlap(pool.recent, offset, offset + size, tick);
    cut_settled(pool, offset, offset + size);
    pool.live.put(offset, PoolBlock{size, bytes, stream});
    pool.usage.used_current += bytes;
    pool.usage.used_high = std::max(pool.usage.used_high, pool.usage.used_current);
    pool.usage.reserved_high = std::max(pool.usage.reserved_high, pool.usage.reserved_current);
    return pool.base + offset;
  }

  void free_async(PoolHandle h, DevPtr ptr, StreamId stream) {
    add_modeled_call_seconds(kAsyncFreeCost + pool_call_delay_seconds_);
    PoolModel& pool = pool_at(h);
    if (ptr < pool.base) return;
    const Bytes off = ptr - pool.base;
    PoolBlock block;
    if (!pool.live.take(off, block)) return;
    pool.usage.used_current -= block.requested;
    const PoolRange freed{block.size, stream, ++pool.clock, gpu_reaches_now()};
    if (!pool.cross_stream_reuse()) pool.pending.set(off, freed);
    add_recent(pool, off, freed);
    // Memory above the release threshold goes back at the next synchronization, not here.
  }

  void trim_pool(PoolHandle h, Bytes keep) override {
    PoolModel& pool = pool_at(h);
    const Bytes before = pool.usage.reserved_current;
    release_idle(pool, keep);
    add_modeled_call_seconds(kPoolTrimCostPerGranule * double((before - pool.usage.reserved_current) / kPoolGranule));
  }

  // See sim_pool_consistency (device.h).
  std::string pool_consistency(PoolHandle h) const {
    if (h < 0 || static_cast<std::size_t>(h) >= pools_.size() || !pools_[h].alive)
      throw DeviceError(fmt::format("simulated device: no memory pool {}", h));
    const PoolModel& pool = pools_[h];
    using Range = std::pair<Bytes, Bytes>;  // [start, end)
    auto str = [](const Range& r) { return fmt::format("[{:#x}, {:#x})", r.first, r.second); };
    // The free memory between live blocks.
    std::vector<Range> blocks, free;
    pool.live.for_each([&](Bytes off, const PoolBlock& b) { blocks.emplace_back(off, off + b.size); });
    std::sort(blocks.begin(), blocks.end());
    Bytes at = 0;
    for (const Range& b : blocks) {
      if (b.first < at) return "live blocks overlap at " + str(b);
      if (b.first > at) free.emplace_back(at, b.first);
      at = b.second;
    }
    if (at < kPoolSpan) free.emplace_back(at, kPoolSpan);
    // recent (merged within a stream) and settled (merged), each in address order, disjoint.
    std::vector<Range> pieces;
    for (auto it = pool.recent.begin(); it != pool.recent.end(); ++it) {
      const Range r{it->first, it->first + it->second.size};
      if (r.first >= r.second) return "an empty recent free at " + str(r);
      if (it != pool.recent.begin()) {
        const auto prev = std::prev(it);
        const Bytes prev_end = prev->first + prev->second.size;
        if (prev_end > r.first) return "recent frees out of order or overlapping at " + str(r);
        if (prev_end == r.first && prev->second.stream == it->second.stream)
          return "a stream's touching recent frees not merged at " + str(r);
      }
      pieces.push_back(r);
    }
    for (std::size_t i = 0; i < pool.settled.size(); ++i) {
      const SettledRange& s = pool.settled[i];
      if (s.start >= s.end) return "an empty settled range at " + str({s.start, s.end});
      if (i && pool.settled[i - 1].end >= s.start)
        return "settled ranges out of order, overlapping or not merged at " + str({s.start, s.end});
      pieces.emplace_back(s.start, s.end);
    }
    std::sort(pieces.begin(), pieces.end());
    std::vector<Range> merged;
    for (const Range& r : pieces) {
      if (!merged.empty() && merged.back().second > r.first) return "a recent free overlaps a settled range at " + str(r);
      if (!merged.empty() && merged.back().second == r.first) merged.back().second = r.second;
      else merged.push_back(r);
    }
    if (merged != free) return "the recent frees and settled ranges are not the free memory between live blocks";
    // Every pending range lies in the recent frees.
    for (const auto& [off, p] : pool.pending) {
      auto it = std::upper_bound(pool.recent.begin(), pool.recent.end(), off,
                                 [](Bytes o, const RangeList::Entry& e) { return o < e.first; });
      if (it == pool.recent.begin() || std::prev(it)->first + std::prev(it)->second.size < off + p.size)
        return "a pending range not among the recent frees at " + str({off, off + p.size});
    }
    return "";
  }

  MemPoolUsage pool_usage(PoolHandle h) const override {
    if (h < 0 || static_cast<std::size_t>(h) >= pools_.size())
      throw DeviceError(fmt::format("simulated device: no memory pool {}", h));
    return pools_[h].usage;
  }

  void do_synchronize() override {
    wait_for_modeled_gpu();
    for (PoolModel& pool : pools_) {
      if (!pool.alive) continue;
      pool.pending.clear();  // every free has completed
      settle(pool, 0, ++pool.clock, true);
      if (pool.usage.reserved_current > pool.options.release_threshold)
        release_idle(pool, pool.options.release_threshold);
    }
  }

  void do_model_kernel(double gpu_seconds, double launch_seconds) override {
    // A launch that finds the round of kLaunchQueueDepth launches full waits until the GPU has
    // run every launch before it, and starts the next round.
    if (launches_in_round_ == kLaunchQueueDepth) {
      const DeviceCounters& c = counters();
      if (c.modeled_gpu_end_seconds > c.modeled_host_seconds)
        add_modeled_host_seconds(c.modeled_gpu_end_seconds - c.modeled_host_seconds);
      launches_in_round_ = 0;
    }
    ++launches_in_round_;
    add_modeled_host_seconds(launch_seconds);
    // Managed memory that no prefetch moved is faulted in by the first kernel after its allocation
    // (the workloads touch every buffer they allocate).
    for (const Untouched& u : untouched_managed_) gpu_seconds += cost_at(kFirstTouchGpuCost, u.bytes);
    untouched_managed_.clear();
    queue_modeled_gpu_seconds(gpu_seconds);
    if (log_.on()) log_row("launch", 0, true, log_start(), 0, 0);
  }

  void* native_stream(StreamId) override { return nullptr; }
  Bytes used_bytes() const override { return used_; }

 private:
  static DeviceInfo checked_info(const SimDeviceOptions& o) {
    if (o.capacity_bytes > kMaxDeviceBytes)
      throw DeviceError(fmt::format("simulated device: capacity {} is above the largest accepted, {}",
                                    o.capacity_bytes, kMaxDeviceBytes));
    return sim_device_info(o);
  }

  // When the modeled GPU reaches a call made now: once it has run the work queued before it.
  double gpu_reaches_now() const {
    const DeviceCounters& c = counters();
    return std::max(c.modeled_gpu_end_seconds, c.modeled_host_seconds);
  }

  // --- the call log ---
  struct LogStart {
    double host_seconds;
    std::uint64_t frees_reached;
  };
  LogStart log_start() {
    const double now = counters().modeled_host_seconds;
    while (!free_reached_at_.empty() && free_reached_at_.front() <= now) {
      free_reached_at_.pop_front();
      ++frees_reached_;
    }
    return {now, frees_reached_};
  }
  void log_row(const char* call, Bytes bytes, bool ok, LogStart at, DevPtr ptr, Bytes pool_reserved) {
    log_.row(call, bytes, ok, 0.0, (counters().modeled_host_seconds - at.host_seconds) * 1e6, ptr, pool_reserved,
             at.host_seconds * 1e6, at.frees_reached);
  }

  // --- device memory taken from and given back to the driver ---
  // Every path that takes device memory (cudaMalloc, map, cuMemCreate, pool growth) goes through
  // take_physical, and every path that gives it back (cudaFree, unmap, cuMemRelease, trims,
  // pool destruction) through give_physical, so that none forgets the reuse delay below. The
  // caller has checked that used_ + bytes fits the capacity. Managed memory is the exception:
  // its pages are counted in used_ directly, with no reuse delay (none was measured for it).
  void take_physical(Bytes bytes) {
    if (bytes == 0) return;
    wait_for_reusable(bytes);
    used_ += bytes;
  }
  void give_physical(Bytes bytes) {
    assert(bytes <= used_);
    used_ -= bytes;
    note_freed(bytes);
  }

  // --- freed memory the driver hands out again only kFreedMemoryReuseSeconds later ---
  void note_freed(Bytes bytes) {
    if (bytes == 0) return;
    maturing_.push_back({counters().modeled_host_seconds + kFreedMemoryReuseSeconds, bytes});
    maturing_bytes_ += bytes;
  }
  // Before taking `bytes` more (the caller checked used_ + bytes <= capacity): the call waits
  // until the device has that much free memory that is not still maturing.
  void wait_for_reusable(Bytes bytes) {
    const double now = counters().modeled_host_seconds;
    double until = now;
    // maturing_bytes_ is the sum of maturing_; ready_at never decreases along it.
    while (!maturing_.empty() &&
           (maturing_.front().ready_at <= now || used_ + maturing_bytes_ + bytes > info_.capacity_bytes)) {
      until = std::max(until, maturing_.front().ready_at);
      maturing_bytes_ -= maturing_.front().bytes;
      maturing_.pop_front();
    }
    assert(maturing_.empty() == (maturing_bytes_ == 0));
    if (until > now) add_modeled_call_seconds(until - now);
  }

  // --- pool helpers ---
  PoolModel& pool_at(PoolHandle h) {
    if (h < 0 || static_cast<std::size_t>(h) >= pools_.size() || !pools_[h].alive)
      throw DeviceError(fmt::format("simulated device: no memory pool {}", h));
    return pools_[h];
  }

  // The backed granules that hold no live block and no pending range, highest first; with
  // `skip`, not those of [skip0, skip1]; with `unreached_after` (the modeled time now), not those
  // holding a recent free the GPU has not reached by then either (a merged run of recent frees
  // counts as reached when its newest free is): kernels queued before that free may still use
  // its memory, so the pool does not move it elsewhere. On the H200
  // (results/h200/probe/pool/early/): after a 180.6 MiB block was freed and half of it taken
  // again, the next request at the pool's end mapped 6 new granules where moving the two idle
  // ones of the freed half would have mapped 4 (its free one call back, not yet reached).
  static std::vector<std::uint64_t> idle_granules(const PoolModel& pool, bool skip = false,
                                                  std::uint64_t skip0 = 0, std::uint64_t skip1 = 0,
                                                  double unreached_after = -1) {
    GranuleSet busy;
    auto mark = [&](Bytes off, Bytes size) {
      if (off >= kPoolSpan) return;  // never: blocks and ranges lie inside the span (tells the compiler so)
      for (std::uint64_t g = off / kPoolGranule; g <= (off + size - 1) / kPoolGranule; ++g) busy.insert(g);
    };
    pool.live.for_each([&](Bytes off, const PoolBlock& b) { mark(off, b.size); });
    for (const auto& [off, p] : pool.pending) mark(off, p.size);
    if (unreached_after >= 0)
      for (const auto& [off, r] : pool.recent)
        if (r.reached > unreached_after) mark(off, r.size);
    std::vector<std::uint64_t> idle;
    pool.backed.for_each_descending([&](std::uint64_t g) {
      if (!busy.count(g) && !(skip && g >= skip0 && g <= skip1)) idle.push_back(g);
    });
    return idle;
  }

  void release_idle(PoolModel& pool, Bytes keep) {
    if (pool.usage.reserved_current <= keep) return;
    for (std::uint64_t g : idle_granules(pool)) {
      if (pool.usage.reserved_current <= keep) break;
      pool.backed.erase(g);
      give_physical(kPoolGranule);
      pool.usage.reserved_current -= kPoolGranule;
    }
  }

  // A freed range joins the recent frees, merged with those of the same stream it touches (the
  // merged range is as old as this, the newest, free).
  static void add_recent(PoolModel& pool, Bytes start, PoolRange r) {
    auto next = pool.recent.lower_bound(start);
    if (next != pool.recent.end() && next->first == start + r.size && next->second.stream == r.stream) {
      r.size += next->second.size;
      next = pool.recent.erase(next);
    }
    if (next != pool.recent.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second.size == start && prev->second.stream == r.stream) {
        prev->second.size += r.size;
        prev->second.freed = r.freed;
        prev->second.reached = std::max(prev->second.reached, r.reached);
        return;
      }
    }
    pool.recent.insert(next, start, r);
  }

  // f(start, end, age) for each run of touching free ranges, recent and settled merged, in
  // address order: the free memory between live blocks; its age the newest of the ranges it
  // holds, as scripts/probe/pool_settle_rule.py merges them (not the newest free ever merged into
  // it: a part taken since counts no more, and the rest of a recent free a request split is as
  // new as the split). The last run ends at kPoolSpan unless a live block does.
  template <class F>
  static void for_each_free_run(const PoolModel& pool, F&& f) {
    auto r = pool.recent.begin();
    auto s = pool.settled.begin();
    Bytes run_start = 0, run_end = 0;
    std::uint64_t age = 0;
    bool open = false;
    while (r != pool.recent.end() || s != pool.settled.end()) {
      Bytes start, end;
      std::uint64_t freed;
      if (s == pool.settled.end() || (r != pool.recent.end() && r->first < s->start)) {
        start = r->first, end = r->first + r->second.size, freed = r->second.freed;
        ++r;
      } else {
        start = s->start, end = s->end, freed = s->freed;
        ++s;
      }
      if (open && start == run_end) {
        run_end = end;
        age = std::max(age, freed);
        continue;
      }
      if (open) f(run_start, run_end, age);
      run_start = start, run_end = end, age = freed, open = true;
    }
    if (open) f(run_start, run_end, age);
  }

  // The age of the free range [start, end) between live blocks and other streams' pending frees
  // (best fit over every free range this stream may use): the newest of the recent frees and
  // settled ranges it holds (each lies wholly inside), as for_each_free_run ages a run.
  static std::uint64_t merged_age(const PoolModel& pool, Bytes start, Bytes end) {
    std::uint64_t age = 0;
    auto s = std::lower_bound(pool.settled.begin(), pool.settled.end(), start,
                              [](const SettledRange& r, Bytes o) { return r.start < o; });
    for (; s != pool.settled.end() && s->start < end; ++s) age = std::max(age, s->freed);
    auto r = std::lower_bound(pool.recent.begin(), pool.recent.end(), start,
                              [](const RangeList::Entry& e, Bytes o) { return e.first < o; });
    for (; r != pool.recent.end() && r->first < end; ++r) age = std::max(age, r->second.freed);
    return age;
  }

  // Whether every granule of [start, end) has memory.
  static bool fully_backed(const PoolModel& pool, Bytes start, Bytes end) {
    for (std::uint64_t g = start / kPoolGranule; g <= (end - 1) / kPoolGranule; ++g)
      if (!pool.backed.count(g)) return false;
    return true;
  }

  // The recent frees the GPU has reached by `now` (with `all`, every one) join the settled
  // ranges, as new as this settle (`tick`), merged with those they touch. Without cross-stream
  // reuse a free stays recent until a synchronize: settled ranges serve every stream.
  static void settle(PoolModel& pool, double now, std::uint64_t tick, bool all) {
    if (!all && !pool.cross_stream_reuse()) return;
    pool.recent.remove_if([&](const RangeList::Entry& e) {
      if (!all && e.second.reached > now) return false;
      add_settled(pool, e.first, e.first + e.second.size, e.second.freed, tick);
      return true;
    });
  }
  static void add_settled(PoolModel& pool, Bytes start, Bytes end, std::uint64_t freed, std::uint64_t tick) {
    auto next = std::lower_bound(pool.settled.begin(), pool.settled.end(), start,
                                 [](const SettledRange& r, Bytes o) { return r.start < o; });
    const bool joins_prev = next != pool.settled.begin() && std::prev(next)->end == start;
    const bool joins_next = next != pool.settled.end() && next->start == end;
    if (joins_prev) {
      auto prev = std::prev(next);
      prev->end = joins_next ? next->end : end;
      prev->freed = std::max({prev->freed, freed, joins_next ? next->freed : 0});
      prev->settled = tick;
      if (joins_next) pool.settled.erase(next);
    } else if (joins_next) {
      next->start = start;
      next->freed = std::max(next->freed, freed);
      next->settled = tick;
    } else {
      pool.settled.insert(next, SettledRange{start, end, freed, tick});
    }
  }
  // [start, end) is taken: no settled range keeps any of it; what is left of one keeps its ages.
  static void cut_settled(PoolModel& pool, Bytes start, Bytes end) {
    auto it = std::lower_bound(pool.settled.begin(), pool.settled.end(), start,
                               [](const SettledRange& r, Bytes o) { return r.end <= o; });
    while (it != pool.settled.end() && it->start < end) {
      if (it->start < start && it->end > end) {
        SettledRange above = *it;
        above.start = end;
        it->end = start;
        pool.settled.insert(it + 1, above);
        return;
      }
      if (it->start < start) {
        it->end = start;
        ++it;
      } else if (it->end > end) {
        it->start = end;
        return;
      } else {
        it = pool.settled.erase(it);
      }
    }
  }

  // A range taken again is no longer pending or recent. With `renew`, what is left of a range
  // around the taken part is as new as that (the pool clock of the request): on the H200 the
  // rest of a recent free the request split goes after older recent frees of its length.
  static void drop_overlap(RangeList& ranges, Bytes start, Bytes end, std::uint64_t renew = 0) {
    if (ranges.empty()) return;
    auto it = ranges.lower_bound(start);
    if (it != ranges.begin()) --it;
    // The parts of a range outside [start, end) stay, as old as the range: cut in place, so that
    // only a range split in two or taken whole moves the ones after it.
    while (it != ranges.end() && it->first < end) {
      const Bytes s = it->first, e = s + it->second.size;
      if (e <= start) {
        ++it;
        continue;
      }
      if (renew && (s < start || e > end)) it->second.freed = renew;
      if (s < start && e > end) {  // its parts below and above
        const PoolRange above{e - end, it->second.stream, it->second.freed, it->second.reached};
        it->second.size = start - s;
        ranges.insert(it + 1, end, above);
        break;  // ranges do not overlap: nothing further can
      }
      if (s < start) {  // its part below
        it->second.size = start - s;
        ++it;
      } else if (e > end) {  // its part above, still before those that follow
        RangeList::move_to(it, end, e - end);
        break;
      } else {
        it = ranges.erase(it);
      }
    }
  }

  DeviceInfo info_;
  Bytes used_ = 0;
  struct Maturing {
    double ready_at;  // modeled host seconds
    Bytes bytes;
  };
  std::deque<Maturing> maturing_;  // freed memory, oldest first
  Bytes maturing_bytes_ = 0;
  SimMallocModel malloc_model_;  // cudaMalloc / cudaFree and VA reservations (after info_: its page)
  std::map<DevPtr, Bytes> mapped_;
  std::map<PhysicalHandle, Bytes> handles_;    // live physical handles and their sizes
  std::map<DevPtr, Bytes> handle_maps_;        // address -> bytes of each handle mapping
  PhysicalHandle handle_seq_ = 0;
  LiveMap<Bytes> managed_;  // live managed ranges: their bytes
  // Managed ranges no kernel or prefetch has reached yet, by address (managed_next_ only grows, so
  // appending keeps the order in which the next kernel adds up their faults); few at a time.
  struct Untouched {
    DevPtr ptr;
    Bytes bytes;
  };
  std::vector<Untouched> untouched_managed_;
  void touched(DevPtr ptr) {
    for (auto it = untouched_managed_.rbegin(); it != untouched_managed_.rend(); ++it)
      if (it->ptr == ptr) {
        untouched_managed_.erase(std::next(it).base());
        return;
      }
  }
  // Launches in the current round (at most kLaunchQueueDepth). A synchronize or a cudaFree that
  // waits for the GPU does not start a new round: the queue is a ring, used on from where it was.
  std::size_t launches_in_round_ = 0;
  // GMB_CUDA_POOL_CALL_DELAY_US, as on the CUDA device: host time added to every pool call.
  double pool_call_delay_seconds_ = pool_call_delay_seconds_from_environment();
  DevPtr managed_next_ = kManagedBase;
  std::vector<PoolModel> pools_;
  // GMB_CUDA_CALL_LOG in modeled time: t_us the host clock when a call began, call_us its modeled
  // cost (waits included), wait_us 0, frees_done the cudaFreeAsyncs the modeled GPU had reached.
  CallLogFile log_;
  std::deque<double> free_reached_at_;  // with the log on: when the modeled GPU reaches each free not yet counted
  std::uint64_t frees_reached_ = 0;
};

}  // namespace

const char* to_string(DeviceKind kind) { return kind == DeviceKind::Sim ? "sim" : "cuda"; }

DeviceInfo sim_device_info(const SimDeviceOptions& o) {
  DeviceInfo info;
  info.kind = DeviceKind::Sim;
  info.name = o.name;
  info.capacity_bytes = o.capacity_bytes;
  info.total_bytes = std::max(o.card_bytes, o.capacity_bytes);
  info.page_bytes = o.page_bytes;
  info.ordinal = o.ordinal;
  info.driver = "simulated (H200, driver 580.159 model)";
  return info;
}

std::unique_ptr<Device> make_sim_device(const SimDeviceOptions& options) {
  return std::make_unique<SimDevice>(options);
}

std::string sim_pool_consistency(const Device& sim, int pool) {
  const auto* d = dynamic_cast<const SimDevice*>(&sim);
  if (!d) throw DeviceError("sim_pool_consistency: not a simulated device");
  return d->pool_consistency(pool);
}

}  // namespace gmb
