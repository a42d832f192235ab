// vmm_stitch on the H200: its decisions are its own code, so a fixed mix of requests must make
// the same decisions on the GPU as on the simulated device (the same stitches and reuses, the same
// physical and allocated bytes after every call, the same driver calls), and a stitched range
// must really show the physical memory of the blocks it was stitched from. Skips without a GPU.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "allocators/registry.h"
#include "gpu_test_helpers.h"
#include "harness/config/config.h"
#include "harness/run/runner.h"
#include "test_helpers.h"

using namespace gmb;

namespace {

constexpr Bytes kCapacity = 2 * GiB;

std::int64_t stat(const InspectableAllocator& a, const std::string& key) {
  for (const auto& [k, v] : a.memory_stats())
    if (k == key) return v;
  return -1;
}

struct Observation {
  bool ok = false;
  Bytes reserved = 0, allocated = 0;
  std::int64_t stitches = 0, reuses = 0, chunks = 0;
  bool operator==(const Observation& o) const {
    return ok == o.ok && reserved == o.reserved && allocated == o.allocated && stitches == o.stitches &&
           reuses == o.reuses && chunks == o.chunks;
  }
};

struct MixResult {
  std::vector<Observation> steps;
  DeviceCounters calls;
};

// A seeded mix: requests from 1 MiB + 1 to 96 MiB (vmm_stitch's own chunks; the small pool is
// `caching`'s, whose GPU decisions also depend on where the driver puts its cudaMallocs), a third
// of the events frees of a random live block; it stays below the capacity, so no decision depends
// on how much the driver itself keeps.
MixResult run_mix(Device& device) {
  auto a = make_allocator("vmm_stitch", device, {});
  std::mt19937_64 rng(15);
  std::vector<DevPtr> live;
  MixResult r;
  for (int i = 0; i < 600; ++i) {
    Observation o;
    if (!live.empty() && rng() % 3 == 0) {
      const std::size_t k = rng() % live.size();
      a->deallocate(live[k]);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      o.ok = true;
    } else {
      const Bytes b = 1 * MiB + 1 + rng() % (96 * MiB);
      auto p = a->allocate(b, 0);
      o.ok = p.has_value();
      if (p) live.push_back(*p);
      if (a->stats().allocated_bytes > kCapacity / 2) {  // keep well inside the capacity
        a->deallocate(live.front());
        live.erase(live.begin());
      }
    }
    const AllocatorStats s = a->stats();
    o.reserved = s.reserved_bytes;
    o.allocated = s.allocated_bytes;
    o.stitches = stat(*a, "vmm.stitches");
    o.reuses = stat(*a, "vmm.stitched_block_reuses");
    o.chunks = stat(*a, "vmm.chunks");
    r.steps.push_back(o);
  }
  for (DevPtr p : live) a->deallocate(p);
  a->empty_cache();
  EXPECT_EQ(a->stats().reserved_bytes, 0u);
  a.reset();
  r.calls = device.counters();
  return r;
}

TEST(GpuVmmStitch, AFixedMixMakesTheSameDecisionsAsOnSim) {
  REQUIRE_GPU();
  auto gpu_device = make_cuda_device(kCapacity);
  SimDeviceOptions o;
  o.capacity_bytes = gpu_device->info().capacity_bytes;
  auto sim_device = make_sim_device(o);
  const MixResult gpu = run_mix(*gpu_device);
  const MixResult sim = run_mix(*sim_device);
  ASSERT_EQ(gpu.steps.size(), sim.steps.size());
  for (std::size_t i = 0; i < gpu.steps.size(); ++i)
    ASSERT_TRUE(gpu.steps[i] == sim.steps[i])
        << "event " << i << ": gpu/sim ok " << gpu.steps[i].ok << "/" << sim.steps[i].ok << ", reserved "
        << gpu.steps[i].reserved << "/" << sim.steps[i].reserved << ", allocated " << gpu.steps[i].allocated << "/"
        << sim.steps[i].allocated << ", stitches " << gpu.steps[i].stitches << "/" << sim.steps[i].stitches
        << ", reuses " << gpu.steps[i].reuses << "/" << sim.steps[i].reuses << ", chunks " << gpu.steps[i].chunks
        << "/" << sim.steps[i].chunks;
  const Observation& last = gpu.steps.back();
  std::printf("[gpu] vmm_stitch mix: %zu events, %lld stitches, %lld sBlock reuses; cuMemCreate %llu, cuMemMap %llu, "
              "cuMemUnmap %llu, cuMemRelease %llu, reserves %llu\n",
              gpu.steps.size(), (long long)last.stitches, (long long)last.reuses,
              (unsigned long long)gpu.calls.handle_creates, (unsigned long long)gpu.calls.handle_maps,
              (unsigned long long)gpu.calls.handle_unmaps, (unsigned long long)gpu.calls.handle_releases,
              (unsigned long long)gpu.calls.address_reserves);
  EXPECT_GT(last.stitches, 0) << "the mix must stitch to test stitching";
  EXPECT_EQ(gpu.calls.handle_creates, sim.calls.handle_creates);
  EXPECT_EQ(gpu.calls.handle_maps, sim.calls.handle_maps);
  EXPECT_EQ(gpu.calls.handle_unmaps, sim.calls.handle_unmaps);
  EXPECT_EQ(gpu.calls.handle_releases, sim.calls.handle_releases);
  EXPECT_EQ(gpu.calls.address_reserves, sim.calls.address_reserves);
  EXPECT_EQ(gpu_device->used_bytes(), 0u) << "every chunk went back to the driver";
}

TEST(GpuVmmStitch, AStitchedRangeShowsTheMemoryOfTheBlocksItWasStitchedFrom) {
  REQUIRE_GPU();
  auto device = make_cuda_device(kCapacity);
  auto a = make_allocator("vmm_stitch", *device, {});
  const auto x = a->allocate(4 * MiB, 0), y = a->allocate(4 * MiB, 0);
  ASSERT_TRUE(x && y);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(*x), 0x11, 4 * MiB), cudaSuccess);
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(*y), 0x22, 4 * MiB), cudaSuccess);
  a->deallocate(*x);
  a->deallocate(*y);
  const auto s = a->allocate(8 * MiB, 0);
  ASSERT_TRUE(s);
  EXPECT_EQ(stat(*a, "vmm.stitches"), 1);
  std::vector<unsigned char> host(8 * MiB);
  ASSERT_EQ(cudaMemcpy(host.data(), reinterpret_cast<void*>(*s), host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  std::size_t ones = 0, twos = 0;
  for (unsigned char c : host) {
    if (c == 0x11) ++ones;
    if (c == 0x22) ++twos;
  }
  EXPECT_EQ(ones, 4 * MiB);
  EXPECT_EQ(twos, 4 * MiB);
  // Written through the stitched range, read through a block of the segment it came from.
  ASSERT_EQ(cudaMemset(reinterpret_cast<void*>(*s), 0x33, 8 * MiB), cudaSuccess);
  a->deallocate(*s);
  const auto z = a->allocate(4 * MiB, 0);
  ASSERT_TRUE(z);
  ASSERT_EQ(cudaMemcpy(host.data(), reinterpret_cast<void*>(*z), 4 * MiB, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host[0], 0x33);
  EXPECT_EQ(host[4 * MiB - 1], 0x33);
  a->deallocate(*z);
}

TEST(GpuVmmStitch, TheFragmentationOomCaseRunsAsOnSim) {
  REQUIRE_GPU();
  const Config config = load_config(gmb::testing::source_path("configs/fragmentation_oom.yaml"));
  RunSettings settings;
  settings.on_oom = OnOom::Continue;
  const CaseSpec spec{"vmm_stitch", {}, config.workloads.at(0).make};
  const CaseResult gpu = run_case(spec, DeviceSpec{DeviceChoice::Cuda, 1792 * MiB}, settings);
  const CaseResult sim = run_case(spec, DeviceSpec{DeviceChoice::Sim, 1792 * MiB}, settings);
  ASSERT_EQ(gpu.runs.size(), 1u) << gpu.error;
  ASSERT_EQ(sim.runs.size(), 1u) << sim.error;
  std::printf("[gpu] fragmentation_oom @ 1.75 GiB, vmm_stitch: peak reserved gpu %llu sim %llu; OOMs %llu / %llu; "
              "%.3f s on the GPU\n",
              (unsigned long long)gpu.runs[0].peak_reserved_bytes, (unsigned long long)sim.runs[0].peak_reserved_bytes,
              (unsigned long long)gpu.runs[0].ooms, (unsigned long long)sim.runs[0].ooms, gpu.runs[0].seconds);
  EXPECT_EQ(gpu.runs[0].ooms, 0u);
  EXPECT_EQ(gpu.runs[0].peak_reserved_bytes, sim.runs[0].peak_reserved_bytes);
  EXPECT_EQ(gpu.runs[0].peak_allocated_bytes, sim.runs[0].peak_allocated_bytes);
  EXPECT_EQ(gpu.runs[0].device_allocs, sim.runs[0].device_allocs);
  EXPECT_EQ(gpu.memory_stats, sim.memory_stats);
}

}  // namespace
