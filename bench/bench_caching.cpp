// Host-side cost of the caching allocator's decisions, per allocate+deallocate pair, on the
// simulated device (warm cache: no device call inside the timed loop). The same patterns are
// timed for PyTorch's own C++ allocator by scripts/bench_torch_allocator.py, which carries an
// exact copy of make_mixed_pattern() below.
//
//   BM_CachingWarmPair/<bytes>/<expandable>   one size, allocated and freed again and again
//   BM_CachingMixed/<expandable>              a live set of 1000 small and 200 large blocks;
//                                             each step frees one block and allocates a new
//                                             size of the same class in its place
#include <benchmark/benchmark.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "allocators/caching/caching_allocator.h"
#include "devices/device.h"

namespace gmb {
namespace {

// ---- BEGIN mixed pattern: scripts/bench_torch_allocator.py compiles this block verbatim ----
struct MixedOp {
  std::uint32_t slot;
  std::uint64_t bytes;
};
struct MixedPattern {
  std::vector<std::uint64_t> initial;  // slot -> bytes of the initial live set
  std::vector<MixedOp> ops;            // free slot, allocate bytes into it
};

inline std::uint64_t splitmix64(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

MixedPattern make_mixed_pattern(std::uint32_t n_small = 1000, std::uint32_t n_large = 200,
                                std::uint32_t n_ops = 1u << 16, std::uint64_t seed = 12345) {
  static const std::uint64_t kSmall[] = {512, 1024, 3072, 4096, 16384, 65536, 200000, 262144,
                                         1048576};
  static const std::uint64_t kLarge[] = {2u << 20, 3u << 20, 4u << 20, 8u << 20, 12u << 20,
                                         16u << 20, 32u << 20, 64u << 20};
  const std::uint64_t ns = sizeof(kSmall) / sizeof(kSmall[0]);
  const std::uint64_t nl = sizeof(kLarge) / sizeof(kLarge[0]);
  MixedPattern p;
  std::uint64_t s = seed;
  for (std::uint32_t i = 0; i < n_small; ++i) p.initial.push_back(kSmall[splitmix64(s) % ns]);
  for (std::uint32_t i = 0; i < n_large; ++i) p.initial.push_back(kLarge[splitmix64(s) % nl]);
  for (std::uint32_t i = 0; i < n_ops; ++i) {
    std::uint64_t r = splitmix64(s);
    MixedOp op;
    if (r % 6 == 0) {
      op.slot = n_small + static_cast<std::uint32_t>(splitmix64(s) % n_large);
      op.bytes = kLarge[splitmix64(s) % nl];
    } else {
      op.slot = static_cast<std::uint32_t>(splitmix64(s) % n_small);
      op.bytes = kSmall[splitmix64(s) % ns];
    }
    p.ops.push_back(op);
  }
  return p;
}

// Identifies the pattern (printed by both benchmarks; they must agree).
std::uint64_t pattern_checksum(const MixedPattern& p) {
  std::uint64_t h = 1469598103934665603ULL;
  auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  for (std::uint64_t b : p.initial) mix(b);
  for (const MixedOp& op : p.ops) {
    mix(op.slot);
    mix(op.bytes);
  }
  return h & ((1ULL << 40) - 1);  // fits a double exactly
}
// ---- END mixed pattern ------------------------------------------------------------------

struct Setup {
  explicit Setup(bool expandable) {
    SimDeviceOptions o;
    o.capacity_bytes = 140 * GiB;
    device = make_sim_device(o);
    AllocatorOptions opts;
    if (expandable) opts["alloc_conf"] = "expandable_segments:True";
    alloc = make_caching_allocator(*device, opts);
  }
  std::unique_ptr<Device> device;
  std::unique_ptr<InspectableAllocator> alloc;
};

void BM_CachingWarmPair(benchmark::State& state) {
  Setup s(state.range(1) != 0);
  const Bytes bytes = static_cast<Bytes>(state.range(0));
  s.alloc->deallocate(*s.alloc->allocate(bytes, 0));  // warm: the segment is cached
  const auto device_allocs = s.alloc->stats().device_allocs;
  for (auto _ : state) {
    DevPtr p = *s.alloc->allocate(bytes, 0);
    benchmark::DoNotOptimize(p);
    s.alloc->deallocate(p);
  }
  state.counters["device_allocs_in_loop"] =
      static_cast<double>(s.alloc->stats().device_allocs - device_allocs);
  state.SetLabel(state.range(1) ? "expandable_segments:True" : "native");
}
BENCHMARK(BM_CachingWarmPair)
    ->ArgNames({"bytes", "expandable"})
    ->Args({512, 0})
    ->Args({1 << 20, 0})
    ->Args({100 << 20, 0})
    ->Args({512, 1})
    ->Args({1 << 20, 1})
    ->Args({100 << 20, 1});

void BM_CachingMixed(benchmark::State& state) {
  Setup s(state.range(0) != 0);
  static const MixedPattern pattern = make_mixed_pattern();
  std::vector<DevPtr> live(pattern.initial.size());
  for (std::size_t i = 0; i < live.size(); ++i) live[i] = *s.alloc->allocate(pattern.initial[i], 0);
  auto step = [&](const MixedOp& op) {
    s.alloc->deallocate(live[op.slot]);
    live[op.slot] = *s.alloc->allocate(op.bytes, 0);
  };
  for (const MixedOp& op : pattern.ops) step(op);  // warm up: the cache reaches its working set
  const auto device_allocs = s.alloc->stats().device_allocs;
  std::size_t i = 0;
  const std::size_t n = pattern.ops.size();
  for (auto _ : state) {
    step(pattern.ops[i]);
    if (++i == n) i = 0;
  }
  auto st = s.alloc->stats();
  state.counters["device_allocs_in_loop"] = static_cast<double>(st.device_allocs - device_allocs);
  state.counters["reserved_GiB"] = static_cast<double>(st.reserved_bytes) / GiB;
  state.counters["pattern_checksum"] = static_cast<double>(pattern_checksum(pattern));
  state.SetLabel(state.range(0) ? "expandable_segments:True" : "native");
  for (DevPtr p : live) s.alloc->deallocate(p);
}
BENCHMARK(BM_CachingMixed)->ArgName("expandable")->Arg(0)->Arg(1);

}  // namespace
}  // namespace gmb
