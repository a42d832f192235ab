// Why does GpuCachingFidelity mismatch PyTorch on the H200 for a few small-allocation-heavy
// cases when the simulated device matches all of them? PyTorch's best fit takes, among free
// blocks of one pool and stream with equal size, the one at the lowest address, so the
// order in which cudaMalloc placed the segments steers later reuse and splits. These tests
// replay the cases that mismatched through a Device that forwards every call to the real
// GPU and records each cudaMalloc, then compare the segment addresses with the ones PyTorch
// got (the `ptr` of every event where num_device_alloc grew).
//
//  - MismatchesFollowAnAddressOrderDivergence: for each case, the cudaMalloc sequence
//    (size, address relative to the first, PyTorch's the same way), the first malloc whose
//    address lies on the other side of an earlier segment than PyTorch's (among all
//    segments, and among segments of the same pool and stream, the only order best fit can
//    see), and the first statistic that differs. It then replays the case again on the GPU
//    with PyTorch's addresses shown to the allocator (real cudaMalloc underneath, addresses
//    translated back on cudaFree). Fails when a statistic differs while the addresses were
//    still in PyTorch's order: that would be a decision of the allocator, not the driver's.
//  - DriverRegionsShareTheHostMmapArea: where cudaMalloc regions live in /proc/self/maps,
//    and whether a host mmap/munmap moves the next cudaMalloc region (prints, asserts only
//    that the calls work).
//  - AllCasesWithHostGapsPlugged: the experiment. If the driver's new regions go to the
//    highest free gap of the process's address space, host mappings freed earlier (glibc
//    arenas, big buffers, thread stacks) leave gaps above the driver's regions that a fresh
//    process does not have; PyTorch's recording and the sim both saw new regions placed
//    below the older ones. Plugging every gap of the mmap area with PROT_NONE reservations
//    (and keeping glibc from mmapping during the replay) restores that. Replays all cases
//    that way and prints how many match (asserts nothing about the count).
//
// What was known when this was written: the same build matched all 65 cases when the GPU
// tests ran in one process (gmb_tests --gtest_filter='Gpu*') and mismatched 5 under ctest
// (a process of its own); there the first new region (22 MiB, default__boundaries) went
// 194 MiB above the context's regions where PyTorch and the sim put it below them. Showing
// the allocator on the sim those H200 addresses reproduces the H200's first mismatch exactly
// (event 342, inactive_split_bytes), and the sim reproduces PyTorch's segment order for all
// five cases.
//
// Output lines start with [diag]. Set GMB_FIDELITY_DIAG_SIM=1 to run the first test on the
// simulated device where there is no GPU (what the sim does with the same cases).
#include <gtest/gtest.h>

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "allocators/caching/caching_allocator.h"
#include "devices/device.h"
#include "devices/forwarding_device.h"
#include "torch_ref_data.h"

namespace gmb {
namespace {

// The cases that mismatched on the H200 (ctest run of GpuCachingFidelity).
const char* const kCases[] = {"default__boundaries", "default__mix_small_a", "default__mix_small_b",
                              "rp4__mix_small_a", "rplist__boundaries"};

using namespace torch_ref;

// ---------------------------------------------------------------------------------------
// The reference data (format: see torch_ref_data.h)

struct Case {
  std::string name;
  nlohmann::json spec;
  std::vector<Row> rows;
  // PyTorch's cudaMallocs: the event and the address it returned (the new segment's base:
  // a fresh segment's first block is at its start). 0 where an event made several.
  std::vector<std::pair<std::int64_t, DevPtr>> torch_mallocs;
};

struct Data {
  Bytes card = 150ull * 1000 * 1000 * 1000;
  std::vector<Case> cases;  // in manifest order
};

// Reads every case (or only `only`). Everything is read before any device is touched.
Data load(const std::vector<std::string>& only) {
  Data d;
#ifdef GMB_HAVE_ZLIB
  nlohmann::json manifest;
  std::ifstream in(data_dir() + "/manifest.json");
  if (!in) throw std::runtime_error("no " + data_dir() + "/manifest.json");
  in >> manifest;
  d.card = manifest_card_bytes(manifest);
  for (const auto& c : manifest["cases"]) {
    Case k;
    k.name = c.value("name", std::string());
    if (!only.empty() && std::find(only.begin(), only.end(), k.name) == only.end()) continue;
    if (!case_replayable(c)) continue;
    k.spec = c;
    k.rows = parse_rows(read_gz(data_dir() + "/" + k.name + ".csv.gz"), k.name,
                        /*check_header=*/false);  // checked by the fidelity test
    std::int64_t prev = 0;
    for (const Row& r : k.rows) {
      std::int64_t n = r.v[kDeviceAllocField];
      if (n < 0) break;  // this torch does not report the counter
      for (std::int64_t i = prev; i < n; ++i)
        k.torch_mallocs.emplace_back(r.event, (n - prev == 1 && r.alloc) ? r.ptr : 0);
      prev = std::max(prev, n);
    }
    d.cases.push_back(std::move(k));
  }
#else
  (void)only;
#endif
  return d;
}

// ---------------------------------------------------------------------------------------
// /proc/self/maps

struct Mapping {
  std::uint64_t lo = 0, hi = 0;
  std::string line;
};

std::vector<Mapping> read_maps() {
  std::vector<Mapping> out;
  std::ifstream in("/proc/self/maps");
  std::string line;
  while (std::getline(in, line)) {
    Mapping m;
    if (std::sscanf(line.c_str(), "%lx-%lx", &m.lo, &m.hi) != 2) continue;
    m.line = line;
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(), [](const Mapping& a, const Mapping& b) { return a.lo < b.lo; });
  return out;
}

// The mappings of /proc/self/maps nearest to addr (at most `count`), compactly.
std::string maps_near(const std::vector<Mapping>& maps, DevPtr addr, std::size_t count) {
  if (maps.empty()) return " (no /proc/self/maps)";
  std::size_t at = 0;
  while (at < maps.size() && maps[at].hi <= addr) ++at;
  std::size_t from = at > count / 2 ? at - count / 2 : 0;
  std::size_t to = std::min(maps.size(), from + count);
  std::string s;
  for (std::size_t i = from; i < to; ++i) {
    std::string line = maps[i].line;
    // drop offset/dev/inode columns: "lo-hi perms path"
    std::istringstream ls(line);
    std::string range, perms, off, dev, inode, path;
    ls >> range >> perms >> off >> dev >> inode;
    std::getline(ls, path);
    path.erase(0, path.find_first_not_of(' '));
    std::uint64_t lo = maps[i].lo, hi = maps[i].hi;
    if (i > from && lo > maps[i - 1].hi)
      s += fmt::format("\n[diag]       (gap {:.1f} MiB)", double(lo - maps[i - 1].hi) / MiB);
    s += fmt::format("\n[diag]     {}{:x}-{:x} {:>9.1f} MiB {} {}", (addr >= lo && addr < hi) ? "> " : "  ",
                     lo, hi, double(hi - lo) / MiB, perms, path.empty() ? "[anon]" : path);
  }
  return s;
}

// ---------------------------------------------------------------------------------------
// A Device that forwards every call to another one and records cudaMalloc / cudaFree.

struct MallocRecord {
  std::int64_t event = 0;  // the replay event that made it
  Bytes bytes = 0;
  StreamId stream = 0;
  DevPtr real = 0;    // what the device returned
  DevPtr shown = 0;   // what the allocator got (real, or PyTorch's address when translating)
  std::int64_t freed_event = -1;
};

class RecordingDevice final : public ForwardingDevice {
 public:
  // present: addresses to show the allocator instead of the real ones, by malloc index
  // (PyTorch's); 0 or past the end: the real address.
  RecordingDevice(Device& inner, std::vector<DevPtr> present = {})
      : ForwardingDevice(inner), present_(std::move(present)) {}

  std::int64_t event = 0;  // set by the replay before every event
  StreamId stream = 0;
  std::vector<MallocRecord> mallocs;  // successful ones, in order
  std::size_t failed_mallocs = 0;
  // Called after every successful malloc (index into mallocs).
  std::function<void(std::size_t)> on_malloc;

 private:
  std::optional<DevPtr> do_malloc(Bytes bytes) override {
    auto p = inner().malloc(bytes);
    if (!p) {
      ++failed_mallocs;
      return p;
    }
    MallocRecord r;
    r.event = event;
    r.bytes = bytes;
    r.stream = stream;
    r.real = *p;
    r.shown = *p;
    std::size_t k = mallocs.size();
    if (k < present_.size() && present_[k] != 0) r.shown = present_[k];
    to_real_[r.shown] = k;
    mallocs.push_back(r);
    if (on_malloc) on_malloc(k);
    return r.shown;
  }

  void do_free(DevPtr ptr) override {
    DevPtr real = ptr;
    if (auto it = to_real_.find(ptr); it != to_real_.end()) {
      real = mallocs[it->second].real;
      mallocs[it->second].freed_event = event;
      to_real_.erase(it);
    }
    inner().free(real);
  }

  std::vector<DevPtr> present_;
  std::map<DevPtr, std::size_t> to_real_;
};

// ---------------------------------------------------------------------------------------
// Replay and order analysis

// The caching allocator's pools: its small-pool segments are exactly 2 MiB (kSmallBuffer);
// a large-pool segment is never 2 MiB (20 MiB, or >= 10 MiB rounded to 2 MiB).
bool small_pool(Bytes segment_bytes) { return segment_bytes == 2 * MiB; }

struct OrderDivergence {
  long k = -1;          // index of the first malloc whose order differs (-1: none)
  long other = -1;      // the earlier malloc it is on the wrong side of
  std::int64_t event = -1;
};

struct ReplayResult {
  std::size_t events = 0;
  std::int64_t mismatch_event = -1;  // first event whose statistics differ
  std::string mismatch;              // which ones
  std::vector<MallocRecord> mallocs;
  long malloc_event_divergence = -1;  // first malloc made at another event than PyTorch's
  OrderDivergence any, pool;          // among all live segments / same pool and stream
  std::string maps_at_first;          // /proc/self/maps near the first cudaMalloc
  std::string maps_at_divergence;     // and near the first pool-order divergence
};

int sign(DevPtr a, DevPtr b) { return a < b ? -1 : (a > b ? 1 : 0); }

struct ReplayOptions {
  bool translate = false;   // show the allocator PyTorch's addresses
  bool capture_maps = false;
};

ReplayResult replay(const Case& c, Bytes card, Device& base, const ReplayOptions& o) {
  ReplayResult res;
  std::vector<DevPtr> present;
  if (o.translate)
    for (const auto& [ev, p] : c.torch_mallocs) present.push_back(p);
  RecordingDevice dev(base, present);
  const auto& tm = c.torch_mallocs;
  dev.on_malloc = [&](std::size_t k) {
    const auto& m = dev.mallocs;
    if (k == 0 && o.capture_maps) res.maps_at_first = maps_near(read_maps(), m[0].real, 10);
    if (k >= tm.size() || tm[k].second == 0) return;
    if (tm[k].first != m[k].event && res.malloc_event_divergence < 0)
      res.malloc_event_divergence = static_cast<long>(k);
    for (std::size_t j = 0; j < k; ++j) {
      if (m[j].freed_event >= 0 || tm[j].second == 0) continue;  // only live segments matter
      if (sign(m[k].shown, m[j].shown) == sign(tm[k].second, tm[j].second)) continue;
      if (res.any.k < 0) res.any = {static_cast<long>(k), static_cast<long>(j), m[k].event};
      if (res.pool.k < 0 && small_pool(m[k].bytes) == small_pool(m[j].bytes) &&
          m[k].stream == m[j].stream) {
        res.pool = {static_cast<long>(k), static_cast<long>(j), m[k].event};
        if (o.capture_maps) res.maps_at_divergence = maps_near(read_maps(), m[k].real, 12);
      }
    }
  };

  {
    auto alloc = make_caching_allocator(dev, case_options(c.spec, card));
    std::unordered_map<std::int64_t, DevPtr> live;
    live.reserve(4096);
    for (const Row& r : c.rows) {
      dev.event = r.event;
      dev.stream = r.stream;
      const int oom = apply_event(*alloc, live, r);
      ++res.events;
      const Ours ours = our_stats(*alloc, oom);
      std::string diff;
      for (int i : differing_fields(r, ours))
        diff += fmt::format(" {} pytorch {} ours {};", kFields[i], r.v[i], ours.v[i]);
      if (!diff.empty()) {
        res.mismatch_event = r.event;
        res.mismatch = fmt::format("#{} {} id={}{}:{}", r.event, r.alloc ? "alloc" : r.empty_cache ? "empty_cache" : "free", r.id,
                                   r.alloc ? fmt::format(" bytes={}", r.bytes) : std::string(),
                                   diff);
        break;
      }
    }
    dev.event = static_cast<std::int64_t>(c.rows.size());  // teardown frees
  }
  res.mallocs = dev.mallocs;
  return res;
}

std::string rel_mib(DevPtr p, DevPtr base) {
  double d = (static_cast<double>(p) - static_cast<double>(base)) / MiB;
  return d == static_cast<double>(static_cast<long long>(d)) ? fmt::format("{:+.0f}", d)
                                                             : fmt::format("{:+.2f}", d);
}

std::string size_str(Bytes b) {
  return b % MiB == 0 ? fmt::format("{} MiB", b / MiB) : fmt::format("{} B", b);
}

// Prints the cudaMalloc sequence next to PyTorch's, the order divergences and the first
// mismatch; returns whether every mismatch is explained by an earlier divergence of the
// order best fit sees (same pool and stream).
bool report(const Case& c, const char* tag, const ReplayResult& r, bool table) {
  const auto& tm = c.torch_mallocs;
  const auto& m = r.mallocs;
  std::printf("[diag] %s on %s: %zu/%zu events, %zu cudaMallocs (PyTorch %zu by then)\n",
              c.name.c_str(), tag, r.events, c.rows.size(), m.size(),
              static_cast<std::size_t>(std::count_if(tm.begin(), tm.end(), [&](const auto& t) {
                return r.mismatch_event < 0 || t.first <= r.mismatch_event;
              })));
  if (table && !m.empty() && !tm.empty()) {
    // up to a few rows past the first divergence (at most 40), else the first 16
    std::size_t rows = std::min<std::size_t>(
        m.size(), r.pool.k >= 0 ? std::min<std::size_t>(40, std::max<std::size_t>(r.pool.k + 4, 12)) : 16);
    std::printf("[diag]     #  event        size  pool   pytorch(MiB)   ours(MiB)   first: pytorch %#lx ours %#lx\n",
                static_cast<unsigned long>(tm[0].second), static_cast<unsigned long>(m[0].real));
    for (std::size_t k = 0; k < rows; ++k) {
      std::string t = k < tm.size() && tm[k].second ? rel_mib(tm[k].second, tm[0].second) : "?";
      std::string note;
      if (static_cast<long>(k) == r.any.k) note += fmt::format("  <- order differs (vs #{})", r.any.other);
      if (static_cast<long>(k) == r.pool.k)
        note += fmt::format("  <- same pool+stream order differs (vs #{})", r.pool.other);
      if (k < tm.size() && tm[k].first != m[k].event) note += fmt::format("  (PyTorch: event {})", tm[k].first);
      std::printf("[diag]  %4zu %6ld %11s  %-5s %13s %11s%s\n", k, static_cast<long>(m[k].event),
                  size_str(m[k].bytes).c_str(), small_pool(m[k].bytes) ? "small" : "large", t.c_str(),
                  rel_mib(m[k].shown, m[0].shown).c_str(), note.c_str());
    }
    if (rows < m.size()) std::printf("[diag]     ... %zu more\n", m.size() - rows);
  }
  auto div = [](const OrderDivergence& d) {
    return d.k < 0 ? std::string("none")
                   : fmt::format("malloc #{} (event {}) vs #{}", d.k, d.event, d.other);
  };
  std::printf("[diag]   order vs PyTorch: all segments: %s; same pool+stream: %s\n", div(r.any).c_str(),
              div(r.pool).c_str());
  if (r.malloc_event_divergence >= 0)
    std::printf("[diag]   cudaMalloc #%ld made at another event than PyTorch's\n", r.malloc_event_divergence);
  bool explained = true;
  if (r.mismatch_event < 0) {
    std::printf("[diag]   statistics: every event matches\n");
  } else {
    explained = r.pool.k >= 0 && r.pool.event < r.mismatch_event;
    std::printf("[diag]   statistics: first mismatch %s\n[diag]   verdict: %s\n", r.mismatch.c_str(),
                explained ? "mismatch AFTER the address order diverged (placement, not a decision)"
                          : "mismatch while the addresses were in PyTorch's order: ALLOCATOR DECISION");
  }
  if (!r.maps_at_first.empty())
    std::printf("[diag]   /proc/self/maps around ours #0 (%#lx) when it was made:%s\n",
                static_cast<unsigned long>(m[0].real), r.maps_at_first.c_str());
  if (!r.maps_at_divergence.empty())
    std::printf("[diag]   /proc/self/maps around ours #%ld (%#lx) when it diverged:%s\n", r.pool.k,
                static_cast<unsigned long>(m[r.pool.k].real), r.maps_at_divergence.c_str());
  std::fflush(stdout);
  return explained;
}

bool run_on_sim() {
  const char* e = std::getenv("GMB_FIDELITY_DIAG_SIM");
  return e && *e && std::string(e) != "0";
}

std::unique_ptr<Device> sim_device(Bytes card) {
  SimDeviceOptions o;
  o.capacity_bytes = card;
  return make_sim_device(o);
}

TEST(GpuFidelityDiag, MismatchesFollowAnAddressOrderDivergence) {
  const bool gpu = cuda_device_available();
  if (!gpu && !run_on_sim()) GTEST_SKIP() << "no CUDA GPU visible (GMB_FIDELITY_DIAG_SIM=1: run on sim)";
#ifndef GMB_HAVE_ZLIB
  GTEST_SKIP() << "built without zlib";
#endif
  Data d = load({std::begin(kCases), std::end(kCases)});
  ASSERT_EQ(d.cases.size(), std::size(kCases)) << "a case is missing from " << data_dir();
  const char* tag = gpu ? "cuda" : "sim";
  for (const Case& c : d.cases) {
    ASSERT_FALSE(c.torch_mallocs.empty()) << c.name << ": no num_device_alloc in the recording";
    // 1. as GpuCachingFidelity replays it, with the order analysis
    {
      auto dev = gpu ? make_cuda_device(0) : sim_device(d.card);
      ReplayResult r = replay(c, d.card, *dev, {false, gpu});
      EXPECT_TRUE(report(c, tag, r, true))
          << c.name << " on " << tag << ": statistics differ at " << r.mismatch
          << " while every segment was in PyTorch's address order (same pool and stream)";
    }
    // 2. the same on the same device, the allocator seeing PyTorch's addresses
    {
      auto dev = gpu ? make_cuda_device(0) : sim_device(d.card);
      ReplayResult r = replay(c, d.card, *dev, {true, false});
      std::string t = std::string(tag) + " with PyTorch's addresses";
      report(c, t.c_str(), r, false);
      EXPECT_EQ(r.mismatch_event, -1)
          << c.name << ": with PyTorch's own addresses the allocator still differs at " << r.mismatch;
    }
    // 3. for reference: the simulated device
    if (gpu) {
      auto dev = sim_device(d.card);
      ReplayResult r = replay(c, d.card, *dev, {false, false});
      report(c, "sim", r, false);
    }
  }
}

// ---------------------------------------------------------------------------------------
// The mechanism: cudaMalloc regions and host mmaps in one address space

TEST(GpuFidelityDiag, DriverRegionsShareTheHostMmapArea) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto dev = make_cuda_device(0);
  // Larger than any free range of the driver's existing regions: each cudaMalloc below opens
  // a region of its own, and freeing it releases the region.
  constexpr Bytes kRegion = 1 * GiB;
  auto a = dev->malloc(kRegion);
  ASSERT_TRUE(a);
  auto maps = read_maps();
  bool listed = std::any_of(maps.begin(), maps.end(), [&](const Mapping& m) { return *a >= m.lo && *a < m.hi; });
  std::printf("[diag] mechanism: cudaMalloc(1 GiB) a = %#lx, inside a /proc/self/maps entry: %s%s\n",
              static_cast<unsigned long>(*a), listed ? "yes" : "no", maps_near(maps, *a, 6).c_str());
  dev->free(*a);
  void* h = mmap(nullptr, kRegion, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  ASSERT_NE(h, MAP_FAILED);
  auto b = dev->malloc(kRegion);
  ASSERT_TRUE(b);
  ASSERT_EQ(munmap(h, kRegion), 0);
  auto c = dev->malloc(kRegion);
  ASSERT_TRUE(c);
  auto hp = reinterpret_cast<DevPtr>(h);
  std::printf("[diag] mechanism: free(a); host mmap(1 GiB) h = a%s MiB; cudaMalloc b = a%s MiB; "
              "munmap(h); cudaMalloc c = a%s MiB\n",
              rel_mib(hp, *a).c_str(), rel_mib(*b, *a).c_str(), rel_mib(*c, *a).c_str());
  std::printf("[diag] mechanism: host mmap took a's place: %s; b moved away while h was there: %s; "
              "c back in h's place after munmap: %s => %s\n",
              hp == *a ? "yes" : "no", *b != *a ? "yes" : "no", *c == hp ? "yes" : "no",
              (hp == *a && *b != *a && *c == hp)
                  ? "cudaMalloc regions come from the process's mmap area: host mappings move them"
                  : "not shown by this probe (see the addresses)");
  std::fflush(stdout);
  dev->free(*b);
  dev->free(*c);
}

// ---------------------------------------------------------------------------------------
// The experiment: plug the gaps of the mmap area, then replay every case

class HostGapPlugs {
 public:
  // Reserves (PROT_NONE) every gap between mappings of the mmap area: from the mapping below
  // the stack down to the lowest mapping reached without crossing a gap of 1 TiB or more.
  // The gap right below the stack is left alone (the stack grows into it).
  HostGapPlugs() {
    auto maps = read_maps();
    std::size_t stack = maps.size();
    for (std::size_t i = 0; i < maps.size(); ++i)
      if (maps[i].line.find("[stack]") != std::string::npos) stack = i;
    if (stack == maps.size() || stack < 2) return;
    std::size_t top = stack - 1;  // the highest mapping below the stack
    std::size_t low = top;
    while (low > 0 && maps[low].lo - maps[low - 1].hi < (1ull << 40)) --low;
    lowest_ = maps[low].lo;
    for (std::size_t i = low; i < top; ++i) {
      std::uint64_t from = maps[i].hi, to = maps[i + 1].lo;
      if (to <= from) continue;
      void* p = mmap(reinterpret_cast<void*>(from), to - from, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
      if (p == MAP_FAILED) {
        ++failed_;
        continue;
      }
      if (reinterpret_cast<std::uint64_t>(p) != from) {  // a kernel without FIXED_NOREPLACE
        munmap(p, to - from);
        ++failed_;
        continue;
      }
      plugs_.emplace_back(p, to - from);
      bytes_ += to - from;
    }
    // Keep glibc's main arena off mmap while plugged (big buffers would land right below
    // the plugs, among the driver's regions).
    mallopt(M_MMAP_MAX, 0);
  }
  ~HostGapPlugs() {
    for (auto& [p, n] : plugs_) munmap(p, n);
    mallopt(M_MMAP_MAX, 65536);
  }
  std::size_t count() const { return plugs_.size(); }
  std::size_t failed() const { return failed_; }
  Bytes bytes() const { return bytes_; }
  std::uint64_t lowest() const { return lowest_; }

 private:
  std::vector<std::pair<void*, std::size_t>> plugs_;
  std::size_t failed_ = 0;
  Bytes bytes_ = 0;
  std::uint64_t lowest_ = 0;
};

TEST(GpuFidelityDiag, AllCasesWithHostGapsPlugged) {
  if (!cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
#ifndef GMB_HAVE_ZLIB
  GTEST_SKIP() << "built without zlib";
#endif
  Data d = load({});
  ASSERT_FALSE(d.cases.empty());
  { auto warm = make_cuda_device(0); }  // the context exists before the plugs
  std::vector<std::string> results;
  results.reserve(d.cases.size());
  std::size_t matched = 0, order_same = 0;
  std::vector<std::string> lines;
  lines.reserve(d.cases.size() + 4);
  std::size_t plugs = 0, failed = 0;
  Bytes plugged = 0;
  {
    HostGapPlugs guard;
    plugs = guard.count();
    failed = guard.failed();
    plugged = guard.bytes();
    for (const Case& c : d.cases) {
      auto dev = make_cuda_device(0);
      ReplayResult r = replay(c, d.card, *dev, {false, false});
      bool ok = r.mismatch_event < 0;
      matched += ok;
      order_same += r.pool.k < 0;
      lines.push_back(fmt::format("[diag] plugged {:<34} {:>5} events {}  pool-order vs PyTorch: {}", c.name,
                                  c.rows.size(), ok ? "match   " : "MISMATCH",
                                  r.pool.k < 0 ? std::string("same")
                                               : fmt::format("differs at malloc #{} (event {})", r.pool.k,
                                                             r.pool.event)));
      if (!ok) lines.push_back("[diag]          first mismatch " + r.mismatch);
    }
  }
  std::printf("[diag] experiment: %zu gaps of the mmap area plugged (%.1f GiB, %zu could not be), "
              "glibc mmap off during the replays\n",
              plugs, double(plugged) / GiB, failed);
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf("[diag] experiment: %zu/%zu cases match PyTorch with the gaps plugged, %zu/%zu with "
              "PyTorch's segment order (same pool+stream)\n",
              matched, d.cases.size(), order_same, d.cases.size());
  std::fflush(stdout);
  EXPECT_GT(plugs + failed, 0u) << "found no gap to plug: /proc/self/maps unreadable?";
}

}  // namespace
}  // namespace gmb
