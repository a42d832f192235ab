// The real PyTorch snapshots of tests/data/torch_snapshots/ replayed through `caching` on the
// real GPU (the H200), with each run's own settings: the driver, not a recording, now places
// every segment, as it did inside the PyTorch process. Peak reserved and allocated bytes,
// cudaMalloc and cudaFree counts, OOMs and retries must equal what PyTorch recorded
// (expected.json, memory_stats at the end of the recording). The CTest twin on the simulated
// device is TorchSnapshots.ReplaysGiveWhatPyTorchRecorded.
//
// Measured tolerance: on the GPU the driver, not the recording, places each segment, and
// PyTorch takes the lowest address among equal-size free blocks; where our process's driver
// placed a segment elsewhere than the PyTorch process's did, the decisions part ways (on the
// H200: snap_roundup4, 20.77 against 20.71 GiB and 135 against 134 cudaMallocs; the loop with
// gradients waiting on a side stream, snap_stream_wait and its runs under a memory fraction,
// 1.2 MB less peak allocated: results/h200/logs/gpu_whatif_check_f091051.log). Such a run must
// then give exactly what the same replay gives on the simulated device placing segments itself
// (no recorded addresses): the placement made the difference, not a decision. Only those
// recordings may differ so; OOMs and retries must be equal in every run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <unordered_map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "gpu_test_helpers.h"
#include "torch_snapshot_data.h"

namespace gmb {
namespace {

// Run it in a process of its own (scripts/gpu_verify.sh does): on the whole card the driver's
// placement of each cudaMalloc decides PyTorch's best-fit ties, and after other Gpu* tests have
// used the CUDA context the driver places segments elsewhere (7 of 11 recordings then differed by
// up to 2 MiB of allocated bytes; alone, 11 of 12 are exact on the H200, snap_roundup4 one
// cudaMalloc off: results/h200/logs/gpu_torch_snapshots_2d5e277.log).
TEST(GpuTorchSnapshots, ReplaysOnTheRealDeviceGiveWhatPyTorchRecorded) {
  REQUIRE_GPU();
  const std::string dir = testing::torch_snapshot_dir();
  std::ifstream f(dir + "/expected.json");
  ASSERT_TRUE(f) << "missing " << dir << "/expected.json";
  const nlohmann::json expected = nlohmann::json::parse(f);
  int compared = 0, equal = 0;
  for (const auto& run : expected) {
    const std::string name = run.at("name");
    if (!run.at("exact").get<bool>()) continue;  // the trace lost its start
    SCOPED_TRACE(name);
    PyTorchSnapshot s = testing::load_torch_snapshot(dir + "/" + name + ".pickle.gz");
    AllocatorOptions options{{"alloc_conf", s.alloc_conf}};
    if (!run.at("memory_limit").is_null())
      options["memory_limit_bytes"] = std::to_string(run.at("memory_limit").get<Bytes>());
    auto device = make_cuda_device(0);  // the whole card, as in the recording
    auto allocator = make_allocator("caching", *device, options);
    auto live = testing::replay_snapshot_ops(s, *allocator);
    std::unordered_map<std::string, std::int64_t> got;
    for (auto& [k, v] : allocator->memory_stats()) got[k] = v;
    const auto& want = run.at("memory_stats");
    bool same = true;
    std::string line = fmt::format("[gpu-snapshot] {}:", name);
    for (const char* key : {"reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_device_alloc",
                            "num_device_free", "num_ooms", "num_alloc_retries"}) {
      const std::int64_t w = want.at(key).get<std::int64_t>();
      same &= got[key] == w;
      line += fmt::format(" {} {}{}", key, got[key], got[key] == w ? "" : fmt::format(" (PyTorch {})", w));
    }
    for (const char* key : {"num_ooms", "num_alloc_retries"})
      EXPECT_EQ(got[key], want.at(key).get<std::int64_t>()) << key << "; " << line;
    if (!same) {  // placed elsewhere: the simulated device's own placement gives the same figures
      EXPECT_TRUE(name == "snap_roundup4" || name.rfind("snap_stream_", 0) == 0)
          << "a recording not known to depend on the driver's placement differs on the GPU; " << line;
      SimDeviceOptions o;
      o.capacity_bytes = device->info().capacity_bytes;
      auto sim = make_sim_device(o);
      auto sim_allocator = make_allocator("caching", *sim, options);
      testing::replay_snapshot_ops(s, *sim_allocator);
      std::unordered_map<std::string, std::int64_t> on_sim;
      for (auto& [k, v] : sim_allocator->memory_stats()) on_sim[k] = v;
      for (const char* key : {"reserved_bytes.all.peak", "allocated_bytes.all.peak", "num_device_alloc",
                              "num_device_free"})
        EXPECT_EQ(got[key], on_sim[key]) << key << " against the simulated device's own placement; " << line;
      line += " (as on the simulated device placing segments itself)";
    }
    std::printf("%s\n", line.c_str());
    for (auto& [id, p] : live) allocator->deallocate(p);
    allocator->empty_cache();
    ++compared;
    equal += same;
  }
  std::printf("[gpu-snapshot] %d of %d recorded runs reproduced on the GPU\n", equal, compared);
  EXPECT_GE(compared, 1);
  EXPECT_GE(equal, compared / 2) << "most recorded runs must give PyTorch's figures exactly on the GPU";
}

}  // namespace
}  // namespace gmb
