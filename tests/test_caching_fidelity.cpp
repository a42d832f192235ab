// Fidelity: the caching allocator against real PyTorch, event by event.
//
// tests/data/torch_ref/ holds what scripts/torch_reference.py recorded on the H200 with torch
// 2.11: manifest.json (per case: alloc_conf, the exact memory limit PyTorch applied, the trace)
// and <case>.csv.gz (PyTorch's statistics after every event). Every case is replayed on a
// simulated device through make_caching_allocator and must match after every event:
// allocated, reserved, active, requested and inactive_split bytes, segments, whether the
// allocation ran out of memory, and the retry/OOM/device call counters. A free of an id whose
// alloc ran out of memory is skipped (the recording skips it too).
//
// Skips while the data directory is missing; fails on any mismatch once it is there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocators/caching/caching_allocator.h"
#include "common/units.h"
#include "devices/device.h"
#include "harness/run/runner.h"
#include "test_helpers.h"
#include "torch_ref_data.h"
#include "workloads/trace.h"

namespace gmb {
namespace {

using namespace torch_ref;

std::string describe(const Row& r) {
  if (r.empty_cache) return fmt::format("#{} empty_cache", r.event);
  return r.alloc ? fmt::format("#{} alloc id={} bytes={} ({}) stream={}", r.event, r.id, r.bytes,
                               format_bytes(r.bytes), r.stream)
                 : fmt::format("#{} free id={} stream={}", r.event, r.id, r.stream);
}

struct CaseResult {
  std::size_t events = 0;
  std::string failure;  // empty: every event matched
};

// Makes the device a case replays on: the simulated one in CI, the real GPU in the Gpu test.
using DeviceMaker = std::function<std::unique_ptr<Device>(Bytes card_bytes)>;

CaseResult replay_case(const nlohmann::json& c, const std::vector<Row>& rows, Bytes card_bytes,
                       const DeviceMaker& make_device) {
  CaseResult res;
  auto device = make_device(card_bytes);
  const std::string conf = c.value("alloc_conf", std::string());
  // The exact limit PyTorch applied, else the requested one, else the card's size (a real GPU
  // leaves a little less free).
  const nlohmann::json* limit = recorded_limit(c);
  auto alloc = make_caching_allocator(*device, case_options(c, card_bytes));

  std::unordered_map<std::int64_t, DevPtr> live;
  std::vector<std::string> history;  // recent events, for the report
  for (const Row& r : rows) {
    const int oom = apply_event(*alloc, live, r);
    ++res.events;

    const Ours ours = our_stats(*alloc, oom);
    std::string diff;
    for (int i : differing_fields(r, ours))
      diff += fmt::format("\n    {:<21} pytorch {:>14}  ours {:>14}  (diff {:+})", kFields[i],
                          r.v[i], ours.v[i], ours.v[i] - r.v[i]);
    history.push_back(describe(r) + (r.alloc && r.v[10] == 0
                                         ? fmt::format(" -> ptr {:#x}", r.ptr)
                                         : std::string()));
    if (!diff.empty()) {
      std::string ctx;
      std::size_t from = history.size() > 8 ? history.size() - 8 : 0;
      for (std::size_t i = from; i < history.size(); ++i) ctx += "\n    " + history[i];
      std::string segs;
      for (const auto& s : alloc->segments()) {
        segs += fmt::format("\n    {:#x} {} stream {} {}:", s.address, format_bytes(s.size),
                            s.stream, s.pool);
        int shown = 0;
        for (const auto& b : s.blocks) {
          if (++shown > 12) {
            segs += " ...";
            break;
          }
          segs += fmt::format(" [{} {}]", format_bytes(b.size), b.allocated ? "used" : "free");
        }
      }
      res.failure = fmt::format(
          "case {} (alloc_conf \"{}\", limit {}): first mismatch at event {} of {}: {}{}\n"
          "  last events (PyTorch's pointers):{}\n  our segments after the event:{}",
          c.value("name", std::string("?")), conf,
          limit ? std::to_string(limit->get<std::uint64_t>()) : std::string("none"), r.event,
          rows.size(), describe(r), diff, ctx, segs);
      return res;
    }
    if (history.size() > 64) history.erase(history.begin(), history.begin() + 32);
  }
  return res;
}

// Replays every recorded case on devices from make_device; fails on any mismatch.
void replay_all_cases(const DeviceMaker& make_device, const char* tag) {
  const std::string dir = data_dir();
  const std::string manifest_path = dir + "/manifest.json";
  // The data is committed: its absence is a defect, not a reason to skip.
  ASSERT_TRUE(file_exists(manifest_path))
      << "no PyTorch reference data in " << dir
      << " (recorded on the GPU machine by scripts/torch_reference.py)";
#ifndef GMB_HAVE_ZLIB
  GTEST_SKIP() << "built without zlib: cannot read the .csv.gz reference data";
#else
  nlohmann::json manifest;
  {
    std::ifstream in(manifest_path);
    in >> manifest;
  }
  // The card PyTorch ran on: the limit for cases without one, and the size expandable
  // segments reserve address space for.
  const Bytes card = manifest_card_bytes(manifest);
  ASSERT_TRUE(manifest.contains("cases")) << manifest_path << ": no \"cases\"";

  std::size_t cases = 0, events = 0, failed = 0, skipped = 0;
  for (const auto& c : manifest["cases"]) {
    const std::string name = c.value("name", std::string());
    if (!case_replayable(c)) {
      // Not recorded, or hit the card's own limit (machine-dependent): nothing to compare.
      ++skipped;
      std::printf("[fidelity] %-40s skipped (status %s%s)\n", name.c_str(),
                  c.value("status", std::string("ok")).c_str(),
                  c.value("device_oom_suspect", false) ? ", device OOM" : "");
      continue;
    }
    const std::string path = dir + "/" + name + ".csv.gz";
    ASSERT_TRUE(file_exists(path)) << "manifest names case " << name << " but " << path
                                   << " is missing";
    std::vector<Row> rows = parse_rows(read_gz(path), name);
    CaseResult r = replay_case(c, rows, card, make_device);
    ++cases;
    events += r.events;
    if (!r.failure.empty()) {
      ++failed;
      ADD_FAILURE() << r.failure;
    }
    std::printf("[%s] %-40s %6zu events %s\n", tag, name.c_str(), rows.size(),
                r.failure.empty() ? "match" : "MISMATCH");
  }
  std::printf("[%s] %zu cases, %zu events replayed, %zu mismatching, %zu skipped\n", tag, cases,
              events, failed, skipped);
  EXPECT_GT(cases, 0u) << "the manifest lists no case to replay";
#endif
}

TEST(CachingFidelity, MatchesRecordedPyTorchEventByEvent) {
  replay_all_cases(
      [](Bytes card) {
        SimDeviceOptions o;
        o.capacity_bytes = card;
        return make_sim_device(o);
      },
      "fidelity");
}

// `--capacity X` is PyTorch's set_per_process_memory_fraction(X / card) on the H200: the
// expandable-segment cases recorded under a cap, replayed through the runner with the cap as
// the capacity (no explicit limit), reach PyTorch's peak reserved bytes and OOM count. A
// simulated card of exactly X bytes did not (a smaller expandable segment, no room for the page
// PyTorch maps past the limit): es__es_press_a__6g peaked at 6128 MiB against PyTorch's 6154.
TEST(CachingFidelity, ACapacityActsAsPyTorchsMemoryFraction) {
#ifndef GMB_HAVE_ZLIB
  GTEST_SKIP() << "built without zlib: cannot read the .csv.gz reference data";
#else
  nlohmann::json manifest;
  {
    std::ifstream in(data_dir() + "/manifest.json");
    ASSERT_TRUE(in.good()) << "no " << data_dir() << "/manifest.json";
    in >> manifest;
  }
  const auto dir = testing::temp_dir("capacity_as_fraction");
  std::size_t checked = 0;
  for (const auto& c : manifest["cases"]) {
    const std::string name = c.value("name", std::string());
    const std::string conf = c.value("alloc_conf", std::string());
    const nlohmann::json* limit = recorded_limit(c);
    if (!case_replayable(c) || !limit || conf.find("expandable_segments:True") == std::string::npos) continue;
    std::vector<Row> rows = parse_rows(read_gz(data_dir() + "/" + name + ".csv.gz"), name);
    if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.empty_cache; }))
      continue;  // the native trace format has no empty_cache
    std::string trace = "action,id,bytes,stream\n";
    for (const Row& r : rows)
      trace += r.alloc ? fmt::format("alloc,{},{},{}\n", r.id, r.bytes, r.stream)
                       : fmt::format("free,{},,{}\n", r.id, r.stream);
    const std::string path = (dir / (name + ".csv")).string();
    testing::write_text(path, trace);
    CaseSpec spec{"caching", {{"alloc_conf", conf}}, [=] { return make_trace_workload(path, {}, 1 << 16); }};
    DeviceSpec dev;
    dev.choice = DeviceChoice::Sim;
    dev.capacity_bytes = limit->get<Bytes>();
    RunSettings settings;
    settings.on_oom = OnOom::Continue;
    const gmb::CaseResult res = run_case(spec, dev, settings);
    ASSERT_EQ(res.runs.size(), 1u) << name << ": " << res.error;
    const auto& ms = c["final_memory_stats"];
    EXPECT_EQ(res.runs[0].peak_reserved_bytes, ms["reserved_bytes.all.peak"].get<Bytes>()) << name;
    EXPECT_EQ(res.runs[0].ooms, c["ooms"].get<std::uint64_t>()) << name;
    EXPECT_EQ(res.capacity_bytes, dev.capacity_bytes) << name << ": the capacity reported is the limit";
    ++checked;
  }
  std::filesystem::remove_all(dir);
  EXPECT_GE(checked, 12u) << "expandable-segment cases under a cap in the reference data";
#endif
}

// The same traces through the same allocator on the H200: the policy code is shared, so the
// figures must equal PyTorch's there too (real cudaMalloc, real VMM for expandable segments).
TEST(GpuCachingFidelity, MatchesRecordedPyTorchOnTheRealDevice) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  replay_all_cases([](Bytes) { return make_cuda_device(0); }, "gpu-fidelity");
}

}  // namespace
}  // namespace gmb
