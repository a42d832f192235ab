#include <gtest/gtest.h>

#include <set>

#include "devices/device.h"

using namespace gmb;

namespace {
std::unique_ptr<Device> sim(Bytes capacity = 8 * GiB) {
  SimDeviceOptions o;
  o.capacity_bytes = capacity;
  return make_sim_device(o);
}
}  // namespace

TEST(SimDevice, SmallMallocsArePackedIntoShared2MiBPagesAt512ByteSteps) {
  auto d = sim();
  std::vector<DevPtr> ptrs;
  for (int i = 0; i < 1000; ++i) ptrs.push_back(*d->malloc(1));
  EXPECT_EQ(d->used_bytes(), 2 * MiB);  // as measured on the H200: 1000 x 1 B take one page
  EXPECT_EQ(ptrs[1] - ptrs[0], 512u);
  for (DevPtr p : ptrs) d->free(p);
  EXPECT_EQ(d->used_bytes(), 0u);
}

TEST(SimDevice, LargeMallocsTakeWhole2MiBPages) {
  auto d = sim();
  auto p = d->malloc(3 * MiB + 1);
  ASSERT_TRUE(p);
  EXPECT_EQ(d->used_bytes(), 4 * MiB);
  d->free(*p);
  EXPECT_EQ(d->used_bytes(), 0u);
}

TEST(SimDevice, OutOfMemoryAtCapacityIsNulloptNotAnException) {
  auto d = sim(100 * MiB);
  auto a = d->malloc(60 * MiB);
  ASSERT_TRUE(a);
  EXPECT_FALSE(d->malloc(60 * MiB));
  EXPECT_TRUE(d->malloc(40 * MiB));
  EXPECT_EQ(d->counters().mallocs, 3u);
}

TEST(SimDevice, PlacesRegionsTopDownAndCarvesExistingRegionsFirst) {
  // As on the H200 (tests/test_sim_placement.cpp replays the measured sequences).
  auto d = sim();
  DevPtr a = *d->malloc(30 * MiB);  // too big for the context's own regions: new 32 MiB region
  DevPtr b = *d->malloc(2 * MiB);   // carved from the newest region, right after a
  EXPECT_EQ(b, a + 30 * MiB);
  DevPtr c = *d->malloc(100 * MiB);  // new 128 MiB region, right below the first
  EXPECT_EQ(c + 128 * MiB, a);
  d->free(a);
  d->free(b);  // first region now empty: released, leaving a 32 MiB hole
  DevPtr e = *d->malloc(20 * MiB);  // fits in c's region tail (128 MiB region, 28 MiB free)
  EXPECT_EQ(e, c + 100 * MiB);
  DevPtr f = *d->malloc(30 * MiB);  // a hole of exactly the region's size is not reused
  EXPECT_EQ(f, c - 32 * MiB);
}

// The one-at-a-time VMM calls (vmm_stitch): memory is taken by cuMemCreate and given back by
// cuMemRelease; mapping a handle at a second address takes nothing more. Every call is counted.
TEST(SimDevice, PhysicalHandlesTakeMemoryOnceWhereverTheyAreMapped) {
  auto d = sim(8 * MiB);
  const DevPtr a = *d->reserve_address_range(4 * MiB);
  const DevPtr b = *d->reserve_address_range(2 * MiB);
  const auto h1 = d->create_physical(2 * MiB), h2 = d->create_physical(4 * MiB);
  ASSERT_TRUE(h1 && h2);
  EXPECT_EQ(d->used_bytes(), 6 * MiB);
  EXPECT_FALSE(d->create_physical(4 * MiB)) << "2 MiB are left";
  EXPECT_THROW(d->create_physical(3 * MiB), DeviceError) << "not a multiple of the granularity";
  d->map_physical(a, *h1);
  d->map_physical(b, *h1);  // the same memory at a second address
  EXPECT_THROW(d->map_physical(a, *h2), DeviceError) << "already mapped there";
  EXPECT_EQ(d->used_bytes(), 6 * MiB);
  EXPECT_THROW(d->unmap_physical(a, 4 * MiB), DeviceError) << "the mapping there is 2 MiB";
  d->unmap_physical(a, 2 * MiB);
  d->unmap_physical(b, 2 * MiB);
  d->release_physical(*h1);
  d->release_physical(*h2);
  EXPECT_EQ(d->used_bytes(), 0u);
  d->release_address_range(a, 4 * MiB);
  d->release_address_range(b, 2 * MiB);
  const DeviceCounters& c = d->counters();
  EXPECT_EQ(c.handle_creates, 4u) << "the refused and the bad one are calls too";
  EXPECT_EQ(c.handle_maps, 3u);
  EXPECT_EQ(c.handle_unmaps, 3u);
  EXPECT_EQ(c.handle_releases, 2u);
  EXPECT_EQ(c.address_reserves, 2u);
  EXPECT_EQ(c.address_frees, 2u);
  // Modeled from the H200's medians at 2 and 20 MiB (results/h200/probe/vmm_probe.json), linear
  // in between, charged for refused calls too: creates of 2, 4, 4 and 3 MiB, maps of 2, 2 and
  // 4 MiB, unmaps of 2 and 2 MiB, releases of 2 and 4 MiB.
  auto us = [](Bytes b, double at2, double at20) { return at2 + (at20 - at2) * double(b - 2 * MiB) / double(18 * MiB); };
  const double expected = us(2 * MiB, 7.402, 7.718) + 2 * us(4 * MiB, 7.402, 7.718) + us(3 * MiB, 7.402, 7.718) +
                          2 * us(2 * MiB, 19.591, 20.563) + us(4 * MiB, 19.591, 20.563) +
                          2 * us(2 * MiB, 12.968, 13.117) + us(2 * MiB, 9.155, 16.967) + us(4 * MiB, 9.155, 16.967);
  EXPECT_NEAR(c.modeled_call_seconds, expected * 1e-6, 1e-12);
}

TEST(SimDevice, VmmMapsCountTowardCapacity) {
  auto d = sim(64 * MiB);
  DevPtr va = *d->reserve_address_range(1 * GiB);
  EXPECT_TRUE(d->map(va, 40 * MiB));
  EXPECT_FALSE(d->map(va + 40 * MiB, 40 * MiB));
  EXPECT_EQ(d->used_bytes(), 40 * MiB);
  d->unmap(va, 40 * MiB);
  EXPECT_EQ(d->used_bytes(), 0u);
}

// The modeled timeline (docs/STEP_TIME.md): kernels queue GPU time, cudaMalloc goes on at once,
// cudaFree waits until the queue has run.
TEST(SimDeviceTimeline, CudaFreeWaitsForQueuedKernelsAndCudaMallocDoesNot) {
  auto d = sim();
  d->model_kernel(10e-3, 5e-6);  // 10 ms of GPU work, launched in 5 us
  EXPECT_DOUBLE_EQ(d->counters().modeled_host_seconds, 5e-6);
  EXPECT_DOUBLE_EQ(d->counters().modeled_gpu_end_seconds, 5e-6 + 10e-3);
  auto p = d->malloc(64 * MiB);
  ASSERT_TRUE(p);
  const double after_malloc = d->counters().modeled_host_seconds;
  EXPECT_GT(after_malloc, 5e-6);
  EXPECT_LT(after_malloc, 1e-3);  // ~108 us: no wait
  d->free(*p);
  // The free waited for the 10 ms kernel, then took its own time; the wait is part of the call.
  EXPECT_GT(d->counters().modeled_host_seconds, 5e-6 + 10e-3);
  EXPECT_GT(d->counters().modeled_call_seconds, 10e-3 - 5e-6);
  EXPECT_DOUBLE_EQ(d->counters().modeled_elapsed_seconds(), d->counters().modeled_host_seconds);
}

// Freed device memory is handed out again only ~7 ms after its cudaFree (the H200 at a cap:
// results/h200/probe/cap/): a cudaMalloc that needs it waits; one that other free memory can
// serve, or that comes later, does not.
TEST(SimDeviceTimeline, ACudaMallocOfMemoryFreedMomentsAgoWaitsUntilTheDriverHandsItOutAgain) {
  auto d = sim(1 * GiB);
  auto big = d->malloc(768 * MiB);
  ASSERT_TRUE(big);
  d->free(*big);
  const double freed_at = d->counters().modeled_host_seconds;
  auto small = d->malloc(128 * MiB);  // 256 MiB never freed is enough: no wait
  ASSERT_TRUE(small);
  EXPECT_LT(d->counters().modeled_host_seconds - freed_at, 1e-3);
  auto needs_freed = d->malloc(512 * MiB);  // only 128 MiB never freed are left
  ASSERT_TRUE(needs_freed);
  EXPECT_NEAR(d->counters().modeled_host_seconds, freed_at + 7e-3, 0.3e-3)
      << "waited until 7 ms after the free, then the call's own ~0.1 ms";
  EXPECT_GT(d->counters().modeled_call_seconds, 7e-3) << "the wait is the call's time";
  const double before_refused = d->counters().modeled_host_seconds;
  EXPECT_FALSE(d->malloc(512 * MiB)) << "past the capacity";
  EXPECT_LT(d->counters().modeled_host_seconds - before_refused, 1e-3) << "a request that cannot succeed fails at once";

  auto later = sim(1 * GiB);
  auto p = later->malloc(768 * MiB);
  later->free(*p);
  later->model_kernel(0, 20e-3);  // the host does 20 ms of other work first
  const double before = later->counters().modeled_host_seconds;
  ASSERT_TRUE(later->malloc(768 * MiB));
  EXPECT_LT(later->counters().modeled_host_seconds - before, 1e-3);
}

// Launches go in rounds of 1280; the launch after a full round waits until the GPU has run every
// launch before it (as the H200's host mostly did: results/h200/probe/pool/timeline/).
TEST(SimDeviceTimeline, TheLaunchAfterARoundOf1280WaitsUntilTheGpuHasCaughtUp) {
  auto d = sim();
  for (int i = 0; i < 1280; ++i) d->model_kernel(1e-3, 1e-6);  // 1 ms kernels, launched in 1 us
  EXPECT_NEAR(d->counters().modeled_host_seconds, 1.280e-3, 1e-6);  // no wait within a round
  EXPECT_NEAR(d->counters().modeled_gpu_end_seconds, 1.280, 1e-3);
  d->model_kernel(1e-3, 1e-6);  // the 1281st: waits for all 1280 kernels, not for one slot
  EXPECT_NEAR(d->counters().modeled_host_seconds, 1.280 + 1e-6, 1e-3);
  for (int i = 1281; i < 2000; ++i) d->model_kernel(1e-3, 1e-6);
  EXPECT_NEAR(d->counters().modeled_gpu_end_seconds, 2.0, 0.01);
  EXPECT_NEAR(d->counters().modeled_host_seconds, 1.280 + 720e-6, 1e-3);  // a new round, no wait yet
  EXPECT_NEAR(d->counters().modeled_elapsed_seconds(), 2.0, 0.01);
}

TEST(SimDeviceTimeline, AManagedRangeIsFaultedInByTheNextKernelUnlessPrefetched) {
  auto faulted = sim(), prefetched = sim();
  for (auto* d : {faulted.get(), prefetched.get()}) {
    auto p = d->malloc_managed(256 * MiB);
    ASSERT_TRUE(p);
    if (d == prefetched.get()) d->prefetch_managed(*p, 256 * MiB, 0);
    d->model_kernel(1e-3, 5e-6);
  }
  // 256 MiB: 13.9 ms of page faults on the H200 against a 0.95 ms prefetch.
  EXPECT_GT(faulted->counters().modeled_elapsed_seconds(), 13e-3);
  EXPECT_LT(prefetched->counters().modeled_elapsed_seconds(), 3e-3);
}
