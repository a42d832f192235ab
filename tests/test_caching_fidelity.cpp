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

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#ifdef GMB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "allocators/caching/caching_allocator.h"
#include "allocators/device.h"
#include "allocators/units.h"

namespace gmb {
namespace {

// GMB_TORCH_REF_DIR overrides the directory (to check a fresh recording before committing it).
std::string data_dir() {
  const char* env = std::getenv("GMB_TORCH_REF_DIR");
  return env && *env ? std::string(env) : std::string(GMB_SOURCE_DIR) + "/tests/data/torch_ref";
}

// Columns of <case>.csv.gz after event,action,id,bytes,stream,ptr.
constexpr const char* kFields[] = {"allocated_bytes",   "reserved_bytes",   "active_bytes",
                                   "requested_bytes",   "inactive_split_bytes", "segments",
                                   "num_alloc_retries", "num_ooms",         "num_device_alloc",
                                   "num_device_free",   "oom"};
constexpr int kNumFields = sizeof(kFields) / sizeof(kFields[0]);

struct Row {
  std::int64_t event = 0;
  bool alloc = false;
  std::int64_t id = 0;
  Bytes bytes = 0;
  StreamId stream = 0;
  std::uint64_t ptr = 0;
  std::int64_t v[kNumFields] = {};
};

bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

#ifdef GMB_HAVE_ZLIB
std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw std::runtime_error("cannot read " + path + ": " + msg);
  return out;
}
#endif

std::vector<Row> parse_rows(const std::string& text, const std::string& name) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  const std::string expected_header =
      "event,action,id,bytes,stream,ptr,allocated_bytes,reserved_bytes,active_bytes,"
      "requested_bytes,inactive_split_bytes,segments,num_alloc_retries,num_ooms,"
      "num_device_alloc,num_device_free,oom";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line != expected_header) throw std::runtime_error(name + ": unexpected header: " + line);
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::vector<std::string> f;
    std::string cell;
    std::istringstream ls(line);
    while (std::getline(ls, cell, ',')) f.push_back(cell);
    if (line.back() == ',') f.emplace_back();
    if (f.size() != 6 + kNumFields)
      throw std::runtime_error(name + ": bad row: " + line);
    Row r;
    r.event = std::stoll(f[0]);
    r.alloc = f[1] == "alloc";
    r.id = std::stoll(f[2]);
    r.bytes = f[3].empty() ? 0 : std::stoull(f[3]);
    r.stream = static_cast<StreamId>(std::stoi(f[4]));
    r.ptr = std::stoull(f[5]);
    for (int i = 0; i < kNumFields; ++i) r.v[i] = std::stoll(f[6 + i]);
    rows.push_back(r);
  }
  return rows;
}

std::string describe(const Row& r) {
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
  AllocatorOptions opts;
  std::string conf = c.value("alloc_conf", std::string());
  if (!conf.empty()) opts["alloc_conf"] = conf;
  // The exact limit PyTorch applied (fraction x total, truncated), else the requested one.
  const nlohmann::json* limit = nullptr;
  if (c.contains("limit_effective_bytes") && !c["limit_effective_bytes"].is_null())
    limit = &c["limit_effective_bytes"];
  else if (c.contains("limit_bytes") && !c["limit_bytes"].is_null())
    limit = &c["limit_bytes"];
  // Without a recorded limit, the card's size (a real GPU leaves a little less free).
  opts["memory_limit_bytes"] = std::to_string(limit ? limit->get<std::uint64_t>() : card_bytes);
  auto alloc = make_caching_allocator(*device, opts);

  std::unordered_map<std::int64_t, DevPtr> live;
  std::vector<std::string> history;  // recent events, for the report
  for (const Row& r : rows) {
    int oom = 0;
    if (r.alloc) {
      auto p = alloc->allocate(r.bytes, r.stream);
      if (p)
        live[r.id] = *p;
      else
        oom = 1;
    } else if (auto it = live.find(r.id); it != live.end()) {
      alloc->deallocate(it->second);
      live.erase(it);
    }
    ++res.events;

    std::map<std::string, std::int64_t> ms;
    for (const auto& [k, v] : alloc->memory_stats()) ms[k] = v;
    const std::int64_t ours[kNumFields] = {
        ms["allocated_bytes.all.current"],  ms["reserved_bytes.all.current"],
        ms["active_bytes.all.current"],     ms["requested_bytes.all.current"],
        ms["inactive_split_bytes.all.current"], ms["segment.all.current"],
        ms["num_alloc_retries"],            ms["num_ooms"],
        ms["num_device_alloc"],             ms["num_device_free"],
        oom};
    std::string diff;
    for (int i = 0; i < kNumFields; ++i) {
      if (r.v[i] == -1 && i >= 6 && i <= 9) continue;  // counter this torch does not report
      if (ours[i] != r.v[i])
        diff += fmt::format("\n    {:<21} pytorch {:>14}  ours {:>14}  (diff {:+})", kFields[i],
                            r.v[i], ours[i], ours[i] - r.v[i]);
    }
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
  Bytes card = 150ull * 1000 * 1000 * 1000;
  if (manifest.contains("total_global_mem") && manifest["total_global_mem"].is_number())
    card = manifest["total_global_mem"].get<Bytes>();
  ASSERT_TRUE(manifest.contains("cases")) << manifest_path << ": no \"cases\"";

  std::size_t cases = 0, events = 0, failed = 0, skipped = 0;
  for (const auto& c : manifest["cases"]) {
    const std::string name = c.value("name", std::string());
    if (c.value("status", std::string("ok")) != "ok" || c.value("device_oom_suspect", false)) {
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

// The same traces through the same allocator on the H200: the policy code is shared, so the
// figures must equal PyTorch's there too (real cudaMalloc, real VMM for expandable segments).
TEST(GpuCachingFidelity, MatchesRecordedPyTorchOnTheRealDevice) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  replay_all_cases([](Bytes) { return make_cuda_device(0); }, "gpu-fidelity");
}

}  // namespace
}  // namespace gmb
