// pool_probe: how the cudaMemPool (and cudaMalloc) behave on seeded mixes, op by op, for
// calibrating the sim's models (devices/sim_device.cpp).
//
// Build:  nvcc -O2 -std=c++17 -o pool_probe scripts/probe/pool_probe.cu
// Run:    ./pool_probe SECTION OUT_DIR [seeds] [repeats]
//
// Sections (each writes CSV files into OUT_DIR, progress on stderr):
//   pool_mix     the GpuNative random mixes (tests/test_gpu_native.cpp: the same generator)
//                through cudaMallocFromPoolAsync / cudaFreeAsync on the legacy stream, pool as
//                the cuda_mempool allocator makes it (pinned, release threshold max, every reuse
//                flag on). One file per seed and repeat: op,kind,slot,bytes,offset,reserved,
//                used,device_free (offset from the first pointer the pool returned; reserved
//                and used are the pool's attributes; device_free is cudaMemGetInfo). Each
//                repeat uses a new pool in this process; a variant `sync` synchronizes after
//                every free (is the driver's choice timing dependent?). Ends with trims.
//   malloc_mix   the same mixes through cudaMalloc / cudaFree (one seed per process: the
//                placement depends on the context's history): ptr, device_free per op.
//   pool_rules   small scripted patterns: growth of single requests (size sweep), which free
//                range a request reuses (first fit vs best fit, across granules), coalescing
//                of neighbouring frees, where a request that fits no hole goes and how much
//                the pool grows, and what cudaMemPoolTrimTo returns.
//   script FILE  scripted patterns read from FILE (scripts/probe/pool_patterns.py writes them),
//                each in a new pool: `pattern NAME`, `a LABEL BYTES` (cudaMallocFromPoolAsync),
//                `f LABEL` (cudaFreeAsync), `s` (stream synchronize). Writes pool_script.csv:
//                pattern,step,kind,label,bytes,offset,reserved (offset from the pattern's first
//                pointer).
// Every CUDA call is checked; a failure exits 1 after writing what it has.

#include "probe_pool.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// ---- the GpuNative generator (tests/test_gpu_native.cpp: random_mix), kept identical ----
static uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}
struct MixOp {
  bool alloc;
  size_t slot;
  size_t bytes;
};
static std::vector<MixOp> random_mix(uint64_t seed, int steps = 400, size_t max_live = 24) {
  uint64_t s = seed;
  std::vector<MixOp> ops;
  std::vector<size_t> live;
  size_t next = 0;
  for (int i = 0; i < steps; ++i) {
    bool alloc = live.empty() || (live.size() < max_live && splitmix64(s) % 100 < 55);
    if (alloc) {
      double e = 9.0 + (std::log2(600.0 * MiB) - 9.0) * double(splitmix64(s) % 1000000) / 1e6;
      size_t bytes = static_cast<size_t>(std::exp2(e));
      if (splitmix64(s) % 2 == 0) bytes = (bytes + MiB - 1) / MiB * MiB;
      ops.push_back({true, next, bytes < 1 ? 1 : bytes});
      live.push_back(next++);
    } else {
      size_t k = splitmix64(s) % live.size();
      ops.push_back({false, live[k], 0});
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
    }
  }
  while (!live.empty()) {
    size_t k = splitmix64(s) % live.size();
    ops.push_back({false, live[k], 0});
    live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
  }
  return ops;
}

// ---- pool_mix ----
static void pool_mix_once(const std::string& dir, uint64_t seed, int rep, bool sync_after_free,
                          int steps, size_t max_live) {
  auto ops = random_mix(seed, steps, max_live);
  Pool P;
  std::vector<void*> ptr(ops.size(), nullptr);
  uint64_t first = 0;
  std::string name = "pool_mix_s" + std::to_string(seed) + (steps != 400 ? "_n" + std::to_string(steps) : "") +
                     (max_live != 24 ? "_l" + std::to_string(max_live) : "") + (sync_after_free ? "_sync" : "") +
                     "_r" + std::to_string(rep) + ".csv";
  FILE* f = open_out(dir, name);
  fprintf(f, "op,kind,slot,bytes,offset,reserved,used,device_free\n");
  uint64_t peak = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const MixOp& op = ops[i];
    int64_t off = -1;
    if (op.alloc) {
      void* p = P.alloc(op.bytes);
      ptr[op.slot] = p;
      if (!first) first = u64(p);
      off = int64_t(u64(p) - first);
    } else {
      P.free(ptr[op.slot]);
      ptr[op.slot] = nullptr;
      if (sync_after_free) CK(cudaStreamSynchronize(nullptr));
    }
    uint64_t r = P.reserved();
    peak = r > peak ? r : peak;
    fprintf(f, "%zu,%s,%zu,%zu,%lld,%llu,%llu,%zu\n", i, op.alloc ? "alloc" : "free", op.slot, op.bytes,
            (long long)off, (unsigned long long)r, (unsigned long long)P.used(), device_free());
  }
  P.trim(0);
  fprintf(f, "# end: first_ptr %#llx peak_reserved %llu reserved_high %llu after_trim0 %llu\n",
          (unsigned long long)first, (unsigned long long)peak,
          (unsigned long long)P.attr(cudaMemPoolAttrReservedMemHigh), (unsigned long long)P.reserved());
  close_out(f);
  fprintf(stderr, "pool_mix seed %llu rep %d%s: %zu ops, peak reserved %llu MiB\n", (unsigned long long)seed,
          rep, sync_after_free ? " sync" : "", ops.size(), (unsigned long long)(peak / MiB));
}

// ---- malloc_mix ----
static void malloc_mix(const std::string& dir, uint64_t seed, const std::string& tag) {
  auto ops = random_mix(seed);
  std::vector<void*> ptr(ops.size(), nullptr);
  FILE* f = open_out(dir, "malloc_mix_s" + std::to_string(seed) + "_" + tag + ".csv");
  fprintf(f, "op,kind,slot,bytes,ptr,device_free\n");
  fprintf(f, "# start device_free %zu\n", device_free());
  for (size_t i = 0; i < ops.size(); ++i) {
    const MixOp& op = ops[i];
    uint64_t p = 0;
    if (op.alloc) {
      void* q = nullptr;
      CK(cudaMalloc(&q, op.bytes));
      ptr[op.slot] = q;
      p = u64(q);
    } else {
      CK(cudaFree(ptr[op.slot]));
      ptr[op.slot] = nullptr;
    }
    fprintf(f, "%zu,%s,%zu,%zu,%#llx,%zu\n", i, op.alloc ? "alloc" : "free", op.slot, op.bytes,
            (unsigned long long)p, device_free());
  }
  close_out(f);
}

// ---- pool_rules ----
struct RuleLog {
  FILE* f;
  Pool* P;
  uint64_t base = 0;
  void row(const char* pattern, const char* step, void* p, size_t bytes) {
    if (p && !base) base = u64(p);
    fprintf(f, "%s,%s,%zu,%lld,%llu,%llu,%zu\n", pattern, step, bytes, p ? (long long)(u64(p) - base) : -1LL,
            (unsigned long long)P->reserved(), (unsigned long long)P->used(), device_free());
  }
};

static void pool_rules(const std::string& dir) {
  FILE* f = open_out(dir, "pool_rules.csv");
  fprintf(f, "pattern,step,bytes,offset,reserved,used,device_free\n");
  // growth: each size alone in a new pool
  for (size_t n : {size_t(1), 2 * MiB, 31 * MiB, 32 * MiB, 32 * MiB + 1, 33 * MiB, 48 * MiB, 64 * MiB,
                   64 * MiB + 512, 96 * MiB + 1, 200 * MiB, 300 * MiB, 500 * MiB, 512 * MiB + 1, 600 * MiB,
                   1000 * MiB, GiB + 1, 2 * GiB + 1, 3 * GiB + 12345}) {
    Pool P;
    RuleLog L{f, &P};
    void* p = P.alloc(n);
    CK(cudaDeviceSynchronize());
    L.row("single", "alloc", p, n);
    P.free(p);
    P.trim(0);
    L.row("single", "free+trim0", nullptr, 0);
  }
  // growth with a 1 MiB block first (is the second request's first granule shared?)
  for (size_t n : {31 * MiB, 32 * MiB, 40 * MiB, 100 * MiB, 600 * MiB}) {
    Pool P;
    RuleLog L{f, &P};
    void* a = P.alloc(MiB);
    L.row("after1m", "alloc 1MiB", a, MiB);
    void* b = P.alloc(n);
    L.row("after1m", "alloc", b, n);
    P.free(a);
    P.free(b);
  }
  // first fit or best fit: holes of 64 MiB (low) and 16 MiB (high), ask 16 MiB, then 8 MiB
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    const size_t sz[] = {64 * MiB, 64 * MiB, 64 * MiB, 16 * MiB, 64 * MiB, 64 * MiB};
    for (size_t n : sz) {
      v.push_back(P.alloc(n));
      L.row("fit", "alloc", v.back(), n);
    }
    P.free(v[1]);
    L.row("fit", "free #1 (64MiB)", nullptr, 0);
    P.free(v[3]);
    L.row("fit", "free #3 (16MiB)", nullptr, 0);
    void* a = P.alloc(16 * MiB);
    L.row("fit", "alloc 16MiB", a, 16 * MiB);
    void* b = P.alloc(8 * MiB);
    L.row("fit", "alloc 8MiB", b, 8 * MiB);
    void* c = P.alloc(40 * MiB);
    L.row("fit", "alloc 40MiB", c, 40 * MiB);
    for (void* p : {a, b, c, v[0], v[2], v[4], v[5]}) P.free(p);
  }
  // the same with odd sizes (holes not granule aligned)
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    const size_t sz[] = {50 * MiB + 512, 70 * MiB, 10 * MiB, 45 * MiB, 90 * MiB + 4096, 5 * MiB, 20 * MiB};
    for (size_t n : sz) {
      v.push_back(P.alloc(n));
      L.row("fit_odd", "alloc", v.back(), n);
    }
    P.free(v[1]);
    L.row("fit_odd", "free #1 (70MiB)", nullptr, 0);
    P.free(v[3]);
    L.row("fit_odd", "free #3 (45MiB)", nullptr, 0);
    P.free(v[5]);
    L.row("fit_odd", "free #5 (5MiB)", nullptr, 0);
    for (size_t n : {size_t(4 * MiB), size_t(44 * MiB), size_t(60 * MiB), size_t(30 * MiB), size_t(100 * MiB)}) {
      void* p = P.alloc(n);
      L.row("fit_odd", "alloc", p, n);
      v.push_back(p);
    }
    for (size_t i : {0, 2, 4, 6, 7, 8, 9, 10, 11}) P.free(v[i]);
  }
  // coalescing: 4 x 40 MiB, free #1 and #2, ask 80 MiB; free #0 too, ask 120 MiB
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    for (int i = 0; i < 5; ++i) {
      v.push_back(P.alloc(40 * MiB));
      L.row("coalesce", "alloc 40MiB", v.back(), 40 * MiB);
    }
    P.free(v[1]);
    P.free(v[2]);
    L.row("coalesce", "free #1 #2", nullptr, 0);
    void* a = P.alloc(80 * MiB);
    L.row("coalesce", "alloc 80MiB", a, 80 * MiB);
    P.free(a);
    P.free(v[0]);
    L.row("coalesce", "free 80MiB, #0", nullptr, 0);
    void* b = P.alloc(120 * MiB);
    L.row("coalesce", "alloc 120MiB", b, 120 * MiB);
    for (void* p : {b, v[3], v[4]}) P.free(p);
  }
  // growth past the holes: idle granules inside holes, a request no hole fits. Which idle
  // granules move (lowest or highest), and does a later request that fits a hole map again?
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    for (int i = 0; i < 8; ++i) {
      v.push_back(P.alloc(96 * MiB));
      L.row("move", "alloc 96MiB", v.back(), 96 * MiB);
    }
    P.free(v[1]);
    L.row("move", "free #1", nullptr, 0);
    P.free(v[5]);
    L.row("move", "free #5", nullptr, 0);
    void* a = P.alloc(160 * MiB);
    L.row("move", "alloc 160MiB", a, 160 * MiB);
    void* b = P.alloc(96 * MiB);
    L.row("move", "alloc 96MiB (fits hole #1 or #5)", b, 96 * MiB);
    void* c = P.alloc(96 * MiB);
    L.row("move", "alloc 96MiB again", c, 96 * MiB);
    for (void* p : {a, b, c, v[0], v[2], v[3], v[4], v[6], v[7]}) P.free(p);
    P.trim(0);
    L.row("move", "free all, trim0", nullptr, 0);
  }
  // the same with a sync before the big request (frees completed on the device)
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    for (int i = 0; i < 8; ++i) v.push_back(P.alloc(96 * MiB));
    L.row("move_sync", "8 x 96MiB", v[0], 96 * MiB);
    P.free(v[1]);
    P.free(v[5]);
    CK(cudaDeviceSynchronize());
    L.row("move_sync", "free #1 #5, sync", nullptr, 0);
    void* a = P.alloc(160 * MiB);
    L.row("move_sync", "alloc 160MiB", a, 160 * MiB);
    void* b = P.alloc(96 * MiB);
    L.row("move_sync", "alloc 96MiB", b, 96 * MiB);
    for (void* p : {a, b, v[0], v[2], v[3], v[4], v[6], v[7]}) P.free(p);
  }
  // trim: live blocks scattered, trim to several sizes
  {
    Pool P;
    RuleLog L{f, &P};
    std::vector<void*> v;
    for (int i = 0; i < 10; ++i) v.push_back(P.alloc((i % 3 + 1) * 50 * MiB + 512));
    L.row("trim", "10 blocks", v[0], 0);
    for (int i = 0; i < 10; i += 2) P.free(v[i]);
    CK(cudaDeviceSynchronize());
    L.row("trim", "free even, sync", nullptr, 0);
    for (size_t keep : {size_t(2 * GiB), 800 * MiB, 400 * MiB, 100 * MiB, size_t(0)}) {
      P.trim(keep);
      L.row("trim", ("trim to " + std::to_string(keep / MiB) + "MiB").c_str(), nullptr, keep);
    }
    void* a = P.alloc(200 * MiB);
    L.row("trim", "alloc 200MiB after trim", a, 200 * MiB);
    for (int i = 1; i < 10; i += 2) P.free(v[i]);
    P.free(a);
  }
  close_out(f);
}

// ---- script ----
static void pool_script(const std::string& dir, const std::string& file) {
  FILE* in = fopen(file.c_str(), "r");
  if (!in) throw std::runtime_error("cannot read " + file);
  FILE* f = open_out(dir, "pool_script.csv");
  fprintf(f, "pattern,step,kind,label,bytes,offset,reserved\n");
  std::unique_ptr<Pool> P;
  std::map<std::string, void*> live;
  std::string pattern;
  uint64_t first = 0;
  int step = 0, patterns = 0;
  char line[512];
  while (fgets(line, sizeof line, in)) {
    char kind[16] = {0}, label[128] = {0};
    unsigned long long bytes = 0;
    const int n = sscanf(line, "%15s %127s %llu", kind, label, &bytes);
    if (n < 1 || kind[0] == '#') continue;
    const std::string k = kind;
    if (k == "pattern") {
      for (auto& [l, p] : live) P->free(p);
      live.clear();
      P.reset();  // the old pool is destroyed (after a device synchronize) before the new one
      P = std::make_unique<Pool>();
      pattern = label;
      first = 0;
      step = 0;
      ++patterns;
      continue;
    }
    if (!P) throw std::runtime_error("script: an op before the first pattern line");
    int64_t off = -1;
    if (k == "a") {
      void* p = P->try_alloc(bytes);
      if (p) {
        if (!first) first = u64(p);
        off = int64_t(u64(p) - first);
        live[label] = p;
      }
    } else if (k == "f") {
      auto it = live.find(label);
      if (it == live.end()) throw std::runtime_error(std::string("script: free of unknown label ") + label);
      P->free(it->second);
      live.erase(it);
    } else if (k == "s") {
      CK(cudaStreamSynchronize(nullptr));
    } else {
      throw std::runtime_error("script: unknown op " + k);
    }
    fprintf(f, "%s,%d,%s,%s,%llu,%lld,%llu\n", pattern.c_str(), step++, kind, n > 1 ? label : "", bytes,
            (long long)off, (unsigned long long)P->reserved());
  }
  for (auto& [l, p] : live) P->free(p);
  P.reset();
  fclose(in);
  close_out(f);
  fprintf(stderr, "pool_script: %d patterns\n", patterns);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: pool_probe pool_mix|malloc_mix|pool_rules|script OUT_DIR [seeds,..] [repeats|tag]\n");
    return 2;
  }
  std::string section = argv[1], dir = argv[2];
  std::vector<uint64_t> seeds = {1, 2, 3};
  if (argc > 3 && section != "script") {
    seeds.clear();
    std::string s = argv[3];
    size_t pos = 0;
    while (pos < s.size()) {
      size_t c = s.find(',', pos);
      if (c == std::string::npos) c = s.size();
      seeds.push_back(std::stoull(s.substr(pos, c - pos)));
      pos = c + 1;
    }
  }
  try {
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));
    if (section == "pool_mix") {
      int reps = argc > 4 ? std::atoi(argv[4]) : 1;
      for (uint64_t seed : seeds)
        for (int r = 0; r < reps; ++r) pool_mix_once(dir, seed, r, false, 400, 24);
      for (uint64_t seed : seeds) pool_mix_once(dir, seed, 0, true, 400, 24);
      // longer mixes with a larger live set: more reuse decisions per run
      for (uint64_t seed : seeds) pool_mix_once(dir, seed, 0, false, 3000, 64);
    } else if (section == "malloc_mix") {
      malloc_mix(dir, seeds.at(0), argc > 4 ? argv[4] : "r0");
    } else if (section == "pool_rules") {
      pool_rules(dir);
    } else if (section == "script") {
      if (argc < 4) throw std::runtime_error("script needs a FILE");
      pool_script(dir, argv[3]);
    } else {
      fprintf(stderr, "pool_probe: unknown section %s\n", section.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "pool_probe: %s: %s\n", section.c_str(), e.what());
    return 1;
  }
  return 0;
}
