// driver_probe: what the CUDA driver does with plain allocations, measured on the GPU.
//
// Build:  nvcc -O2 -std=c++17 -o driver_probe scripts/probe/driver_probe.cu -lcuda
// Run:    ./driver_probe > driver_probe.json        (progress on stderr)
//         ./driver_probe --only placement,small    (sections: placement, small, pool, latency)
//
// Prints one JSON object on stdout:
//   placement  cudaMalloc addresses for fixed sequences (hex and decimal), the allocation's
//              range (cuMemGetAddressRange) and cudaMemGetInfo's free value after every call;
//              passes: right after the primary context is created, the same again (is the
//              state reproducible once everything is freed?), and with resident allocations.
//              Checks the driver placement model (README "Devices"): VA regions of the request rounded up
//              to 32 MiB, placed top-down, carved newest-region-first best-fit from the low
//              end, released when empty.
//   small      device memory taken by N small cudaMallocs (free-memory delta) and the
//              pointer strides; the largest size packed into shared 2 MiB pages.
//   pool       cudaMemPool (cudaMemPoolCreate, pinned, device 0) growth and reuse:
//              ReservedMemCurrent / UsedMemCurrent after each step, pointers, release
//              threshold UINT64_MAX and 0, cudaMemPoolTrimTo.
//   latency    medians of 50 cudaMalloc / cudaFree (and pool) calls per size; whether
//              cudaMalloc / cudaFree wait for a ~200 ms kernel on another stream.
// Every CUDA call is checked; a section that fails records its error and frees what it
// allocated, the others still run. Never uses managed memory.

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static constexpr size_t KiB = 1024;
static constexpr size_t MiB = 1024 * KiB;
static constexpr size_t GiB = 1024 * MiB;

// ------------------------------------------------------------------------------------------
// errors

struct CudaError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

static void check_rt(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) {
    char buf[512];
    snprintf(buf, sizeof buf, "%s failed: %s (%s) at %s:%d", what, cudaGetErrorName(e),
             cudaGetErrorString(e), file, line);
    (void)cudaGetLastError();  // clear a non-sticky error
    throw CudaError(buf);
  }
}
static void check_drv(CUresult e, const char* what, const char* file, int line) {
  if (e != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(e, &name);
    char buf[512];
    snprintf(buf, sizeof buf, "%s failed: %s at %s:%d", what, name ? name : "?", file, line);
    throw CudaError(buf);
  }
}
#define CK(x) check_rt((x), #x, __FILE__, __LINE__)
#define CKD(x) check_drv((x), #x, __FILE__, __LINE__)

// ------------------------------------------------------------------------------------------
// a small JSON writer

struct Json {
  std::string s;
  std::vector<bool> first;
  bool after_key = false;
  void sep() {
    if (after_key) {
      after_key = false;
      return;
    }
    if (!first.empty()) {
      if (!first.back()) s += ',';
      first.back() = false;
    }
  }
  Json& ob() { sep(); s += '{'; first.push_back(true); return *this; }
  Json& oe() { s += '}'; first.pop_back(); return *this; }
  Json& ab() { sep(); s += '['; first.push_back(true); return *this; }
  Json& ae() { s += ']'; first.pop_back(); return *this; }
  Json& k(const std::string& key) {
    sep();
    str_raw(key);
    s += ':';
    after_key = true;
    return *this;
  }
  void str_raw(const std::string& v) {
    s += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') { s += '\\'; s += c; }
      else if (c == '\n') s += "\\n";
      else if (static_cast<unsigned char>(c) < 0x20) { char b[8]; snprintf(b, 8, "\\u%04x", c); s += b; }
      else s += c;
    }
    s += '"';
  }
  Json& str(const std::string& v) { sep(); str_raw(v); return *this; }
  Json& u(uint64_t v) { sep(); s += std::to_string(v); return *this; }
  Json& i(int64_t v) { sep(); s += std::to_string(v); return *this; }
  Json& d(double v) { sep(); char b[64]; snprintf(b, sizeof b, "%.6g", v); s += b; return *this; }
  Json& b(bool v) { sep(); s += v ? "true" : "false"; return *this; }
  Json& null() { sep(); s += "null"; return *this; }
  Json& raw(const std::string& v) { sep(); s += v; return *this; }
  Json& hex(uint64_t v) { char b[32]; snprintf(b, sizeof b, "0x%" PRIx64, v); return str(b); }
};

// ------------------------------------------------------------------------------------------
// helpers

using Clock = std::chrono::steady_clock;
static double us_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
}
static double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
static size_t mem_free() {
  size_t f = 0, t = 0;
  CK(cudaMemGetInfo(&f, &t));
  return f;
}
static uint64_t u64(const void* p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// every cudaMalloc goes through here, so that a failing section can free what it took
static std::set<void*> g_live;
static void* dmalloc(size_t n) {
  void* p = nullptr;
  CK(cudaMalloc(&p, n));
  g_live.insert(p);
  return p;
}
static void dfree(void* p) {
  CK(cudaFree(p));
  g_live.erase(p);
}
static void free_all_quietly() {
  cudaDeviceSynchronize();
  for (void* p : g_live) cudaFree(p);
  g_live.clear();
  cudaGetLastError();
}

// deterministic random numbers (splitmix64; independent of the standard library)
struct Rng {
  uint64_t x;
  explicit Rng(uint64_t seed) : x(seed) {}
  uint64_t next() {
    uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  uint64_t range(uint64_t lo, uint64_t hi) { return lo + next() % (hi - lo + 1); }  // [lo, hi]
};

// ------------------------------------------------------------------------------------------
// a. placement

struct Op {
  bool alloc;
  std::string label;
  size_t size;  // alloc only
};

static std::vector<std::pair<std::string, std::vector<Op>>> placement_sequences() {
  std::vector<std::pair<std::string, std::vector<Op>>> seqs;
  auto A = [](const std::string& l, size_t n) { return Op{true, l, n}; };
  auto F = [](const std::string& l) { return Op{false, l, 0}; };
  {
    std::vector<Op> v;
    for (int i = 0; i < 20; ++i) v.push_back(A("a" + std::to_string(i), 2 * MiB));
    for (int i = 0; i < 20; ++i) v.push_back(F("a" + std::to_string(i)));
    seqs.push_back({"2MiB_x20", v});
  }
  {
    std::vector<Op> v;
    for (int i = 0; i < 10; ++i) v.push_back(A("a" + std::to_string(i), 20 * MiB));
    for (int i = 0; i < 10; ++i) v.push_back(F("a" + std::to_string(i)));
    seqs.push_back({"20MiB_x10", v});
  }
  seqs.push_back({"hole_100_200_300_free200_250",
                  {A("a", 100 * MiB), A("b", 200 * MiB), A("c", 300 * MiB), F("b"),
                   A("d", 250 * MiB), F("a"), F("c"), F("d")}});
  // regions of 32 MiB: does 1+30 MiB share one region, does 31 MiB open a new one, ...
  seqs.push_back({"region_32MiB",
                  {A("a", 1 * MiB), A("b", 30 * MiB), A("c", 31 * MiB), A("d", 33 * MiB),
                   A("e", 16 * MiB), A("f", 2 * MiB), F("b"), A("g", 20 * MiB), A("h", 8 * MiB),
                   A("i", 64 * MiB), A("j", 2 * MiB), F("a"), F("c"), F("d"), F("e"), F("f"),
                   F("g"), F("h"), F("i"), F("j")}});
  // is a region released once empty (same address again)?
  seqs.push_back({"release_when_empty",
                  {A("x", 10 * MiB), A("y", 10 * MiB), F("x"), F("y"), A("z", 10 * MiB),
                   A("w", 64 * MiB), F("z"), F("w"), A("v", 10 * MiB), F("v")}});
  seqs.push_back({"small_and_large",
                  {A("s1", 1), A("s512", 512), A("m1", MiB), A("m1p", MiB + 1), A("m2", 2 * MiB),
                   A("m3", 3 * MiB), A("s1b", 1), A("m40", 40 * MiB), A("s1c", 1), F("s1"),
                   F("s512"), F("m1"), F("m1p"), F("m2"), F("m3"), F("s1b"), F("m40"), F("s1c")}});
  {
    // mixed 2..600 MiB, frees in random order (seed fixed)
    Rng rng(42);
    std::vector<Op> v;
    std::vector<std::string> live;
    int next = 0;
    for (int step = 0; step < 80; ++step) {
      bool do_alloc = live.empty() || (live.size() < 12 && rng.range(0, 99) < 60);
      if (do_alloc) {
        size_t n = rng.range(2, 600) * MiB;
        if (rng.range(0, 3) == 0) n += rng.range(1, MiB - 1);
        std::string l = "m" + std::to_string(next++);
        v.push_back(A(l, n));
        live.push_back(l);
      } else {
        size_t k = rng.range(0, live.size() - 1);
        v.push_back(F(live[k]));
        live.erase(live.begin() + k);
      }
    }
    while (!live.empty()) {
      size_t k = rng.range(0, live.size() - 1);
      v.push_back(F(live[k]));
      live.erase(live.begin() + k);
    }
    seqs.push_back({"mixed_2_600MiB_seed42", v});
  }
  return seqs;
}

// returns the pointers of the allocs, in order
static std::vector<uint64_t> run_sequence(Json& j, const std::string& name,
                                          const std::vector<Op>& ops) {
  std::map<std::string, void*> ptrs;
  std::vector<uint64_t> got;
  j.ob().k("name").str(name).k("free_before").u(mem_free()).k("events").ab();
  for (const Op& op : ops) {
    j.ob();
    if (op.alloc) {
      void* p = dmalloc(op.size);
      ptrs[op.label] = p;
      got.push_back(u64(p));
      CUdeviceptr base = 0;
      size_t range = 0;
      CKD(cuMemGetAddressRange(&base, &range, reinterpret_cast<CUdeviceptr>(p)));
      j.k("op").str("alloc").k("label").str(op.label).k("size").u(op.size);
      j.k("ptr").hex(u64(p)).k("ptr_dec").u(u64(p));
      j.k("range_base").hex(base).k("range_size").u(range);
    } else {
      void* p = ptrs.at(op.label);
      dfree(p);
      ptrs.erase(op.label);
      j.k("op").str("free").k("label").str(op.label).k("ptr").hex(u64(p)).k("ptr_dec").u(u64(p));
    }
    j.k("free").u(mem_free()).oe();
  }
  j.ae();
  for (auto& kv : ptrs) dfree(kv.second);  // sequences free everything themselves
  j.k("free_after").u(mem_free()).oe();
  return got;
}

static void section_placement(Json& j) {
  auto seqs = placement_sequences();
  j.ob();
  j.k("model_to_check")
      .str("VA regions = request rounded up to 32 MiB, placed top-down; later requests carved "
           "newest-region-first, best fit, from the low end; region released when empty");
  j.k("passes").ab();
  // 1 and 2: right after the primary context (nothing else allocated); twice
  std::vector<std::vector<uint64_t>> got[2];
  for (int pass = 0; pass < 2; ++pass) {
    j.ob().k("pass").str(pass == 0 ? "context_only" : "context_only_repeat");
    j.k("resident").ab().ae();
    j.k("sequences").ab();
    for (auto& s : seqs) got[pass].push_back(run_sequence(j, s.first, s.second));
    j.ae().oe();
  }
  // 3: with resident allocations that stay for the whole pass (a process that already
  // holds memory, as a PyTorch process does)
  {
    j.ob().k("pass").str("with_resident");
    std::vector<void*> res;
    j.k("resident").ab();
    for (size_t n : {size_t(2 * MiB), size_t(20 * MiB), size_t(GiB)}) {
      void* p = dmalloc(n);
      res.push_back(p);
      j.ob().k("size").u(n).k("ptr").hex(u64(p)).k("ptr_dec").u(u64(p)).k("free").u(mem_free()).oe();
    }
    j.ae();
    j.k("sequences").ab();
    for (auto& s : seqs) run_sequence(j, s.first, s.second);
    j.ae();
    for (void* p : res) dfree(p);
    j.oe();
  }
  j.ae();
  // reproducibility: did the second pass get exactly the pointers of the first?
  j.k("repeat_identical").ob();
  for (size_t i = 0; i < seqs.size(); ++i) j.k(seqs[i].first).b(got[0][i] == got[1][i]);
  j.oe();
  j.oe();
}

// ------------------------------------------------------------------------------------------
// b. small allocations

static void section_small(Json& j) {
  struct Sz { size_t size; int n; };
  std::vector<Sz> sizes = {
      {1, 1000}, {512, 1000}, {4 * KiB, 1000}, {64 * KiB, 1000}, {128 * KiB, 100},
      {256 * KiB, 100}, {512 * KiB, 100}, {768 * KiB, 100}, {MiB - 1, 100}, {MiB, 100},
      {MiB + 1, 100}, {MiB + MiB / 2, 100}, {2 * MiB - 1, 100}, {2 * MiB, 100},
      {2 * MiB + 1, 100}, {3 * MiB, 100}};
  j.ob().k("sizes").ab();
  size_t largest_packed = 0;
  for (const Sz& sz : sizes) {
    CK(cudaDeviceSynchronize());
    size_t f0 = mem_free();
    std::vector<void*> ps;
    ps.reserve(sz.n);
    for (int i = 0; i < sz.n; ++i) ps.push_back(dmalloc(sz.size));
    CK(cudaDeviceSynchronize());
    size_t f1 = mem_free();
    // strides between consecutive calls
    std::map<int64_t, int> hist;
    int64_t mn = INT64_MAX, mx = INT64_MIN;
    for (size_t i = 1; i < ps.size(); ++i) {
      int64_t d = static_cast<int64_t>(u64(ps[i])) - static_cast<int64_t>(u64(ps[i - 1]));
      hist[d]++;
      mn = std::min(mn, d);
      mx = std::max(mx, d);
    }
    int64_t mode = 0;
    int mode_n = 0;
    for (auto& kv : hist)
      if (kv.second > mode_n) { mode = kv.first; mode_n = kv.second; }
    uint64_t lo = UINT64_MAX, hi = 0;
    for (void* p : ps) { lo = std::min(lo, u64(p)); hi = std::max(hi, u64(p)); }
    int64_t delta = static_cast<int64_t>(f0) - static_cast<int64_t>(f1);
    size_t page_rounded = (sz.size + 2 * MiB - 1) / (2 * MiB) * (2 * MiB);
    bool packed = delta >= 0 && static_cast<double>(delta) < 0.75 * double(page_rounded) * sz.n;
    if (packed) largest_packed = std::max(largest_packed, sz.size);
    j.ob().k("size").u(sz.size).k("n").i(sz.n).k("free_delta_bytes").i(delta);
    j.k("bytes_per_alloc").d(double(delta) / sz.n).k("rounded_to_2MiB_per_alloc").u(page_rounded);
    j.k("packed_below_2MiB_pages").b(packed);
    j.k("stride_mode").i(mode).k("stride_mode_count").i(mode_n).k("stride_min").i(mn).k("stride_max").i(mx);
    j.k("span_bytes").u(hi - lo).k("first_ptrs").ab();
    for (size_t i = 0; i < std::min<size_t>(8, ps.size()); ++i) j.hex(u64(ps[i]));
    j.ae();
    for (void* p : ps) dfree(p);
    CK(cudaDeviceSynchronize());
    j.k("free_after_release_delta").i(static_cast<int64_t>(f0) - static_cast<int64_t>(mem_free()));
    j.oe();
    fprintf(stderr, "  small %zu x %d: %lld bytes\n", sz.size, sz.n, (long long)delta);
  }
  j.ae().k("largest_size_packed_into_shared_2MiB_pages").u(largest_packed);
  j.oe();
}

// ------------------------------------------------------------------------------------------
// c. cudaMemPool

struct Pool {
  cudaMemPool_t pool = nullptr;
  cudaStream_t stream = nullptr;
  std::set<void*> live;
  Pool() {
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = cudaMemAllocationTypePinned;
    props.handleTypes = cudaMemHandleTypeNone;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    CK(cudaMemPoolCreate(&pool, &props));
    CK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    threshold(UINT64_MAX);
  }
  ~Pool() {
    cudaStreamSynchronize(stream);
    for (void* p : live) cudaFreeAsync(p, stream);
    cudaStreamSynchronize(stream);
    cudaMemPoolDestroy(pool);
    cudaStreamDestroy(stream);
    cudaGetLastError();
  }
  void threshold(uint64_t v) {
    cuuint64_t x = v;
    CK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &x));
  }
  uint64_t attr(cudaMemPoolAttr a) {
    cuuint64_t x = 0;
    CK(cudaMemPoolGetAttribute(pool, a, &x));
    return x;
  }
  void* alloc(size_t n, cudaStream_t s = nullptr) {
    void* p = nullptr;
    CK(cudaMallocFromPoolAsync(&p, n, pool, s ? s : stream));
    live.insert(p);
    return p;
  }
  void free(void* p, cudaStream_t s = nullptr) {
    CK(cudaFreeAsync(p, s ? s : stream));
    live.erase(p);
  }
  void sync() { CK(cudaStreamSynchronize(stream)); }
  void trim(size_t keep) { CK(cudaMemPoolTrimTo(pool, keep)); }
  // the pool's figures, as one JSON object
  void state(Json& j, const char* what, void* p = nullptr, size_t size = 0) {
    j.ob().k("step").str(what);
    if (size) j.k("size").u(size);
    if (p) j.k("ptr").hex(u64(p)).k("ptr_dec").u(u64(p));
    j.k("reserved").u(attr(cudaMemPoolAttrReservedMemCurrent));
    j.k("used").u(attr(cudaMemPoolAttrUsedMemCurrent));
    j.k("reserved_high").u(attr(cudaMemPoolAttrReservedMemHigh));
    j.k("free_device").u(mem_free());
    j.oe();
  }
};

static void section_pool(Json& j) {
  const std::vector<size_t> sizes = {1, MiB, 2 * MiB, 20 * MiB, 100 * MiB, GiB};
  j.ob();
  // c1: each size alone in an empty, trimmed pool
  {
    Pool P;
    j.k("single_request").ab();
    for (size_t n : sizes) {
      P.trim(0);
      void* p = P.alloc(n);
      P.sync();
      P.state(j, "alloc", p, n);
      P.free(p);
      P.sync();
      P.trim(0);
    }
    j.ae();
  }
  // c2: cumulative, nothing freed: how ReservedMemCurrent grows
  {
    Pool P;
    j.k("cumulative").ab();
    for (size_t n : sizes) {
      void* p = P.alloc(n);
      P.sync();
      P.state(j, "alloc", p, n);
    }
    j.ae();
  }
  // c3: growth steps with repeated requests of one size
  {
    j.k("growth_steps").ab();
    for (auto [n, count] : std::vector<std::pair<size_t, int>>{
             {512, 200}, {MiB, 80}, {5 * MiB, 30}, {30 * MiB, 12}, {100 * MiB, 6}}) {
      Pool P;
      j.ob().k("size").u(n).k("count").i(count).k("reserved_after_each").ab();
      std::vector<uint64_t> ptrs;
      for (int i = 0; i < count; ++i) {
        void* p = P.alloc(n);
        P.sync();
        ptrs.push_back(u64(p));
        j.u(P.attr(cudaMemPoolAttrReservedMemCurrent));
      }
      j.ae().k("ptrs").ab();
      for (uint64_t p : ptrs) j.hex(p);
      j.ae().oe();
    }
    j.ae();
  }
  // c4: reuse of freed memory: free 100 MiB, then ask 50, 100, 150 MiB
  {
    Pool P;
    j.k("reuse_after_sync").ab();
    void* a = P.alloc(100 * MiB);
    P.sync();
    P.state(j, "alloc A 100MiB", a, 100 * MiB);
    P.free(a);
    P.sync();
    P.state(j, "free A, sync");
    void* b = P.alloc(50 * MiB);
    P.sync();
    P.state(j, "alloc B 50MiB", b, 50 * MiB);
    void* b2 = P.alloc(50 * MiB);
    P.sync();
    P.state(j, "alloc B2 50MiB (B still live)", b2, 50 * MiB);
    P.free(b);
    P.free(b2);
    P.sync();
    P.state(j, "free B, B2, sync");
    void* c = P.alloc(100 * MiB);
    P.sync();
    P.state(j, "alloc C 100MiB", c, 100 * MiB);
    P.free(c);
    P.sync();
    P.state(j, "free C, sync");
    void* d = P.alloc(150 * MiB);
    P.sync();
    P.state(j, "alloc D 150MiB", d, 150 * MiB);
    P.free(d);
    P.sync();
    P.state(j, "free D, sync");
    void* e = P.alloc(60 * MiB);
    void* f = P.alloc(60 * MiB);
    void* g = P.alloc(60 * MiB);
    P.sync();
    P.state(j, "alloc E,F,G 60MiB each (E)", e, 60 * MiB);
    P.state(j, "(F)", f, 60 * MiB);
    P.state(j, "(G)", g, 60 * MiB);
    P.free(f);
    P.sync();
    void* h = P.alloc(40 * MiB);
    P.sync();
    P.state(j, "free F, alloc H 40MiB", h, 40 * MiB);
    for (void* p : {e, g, h}) P.free(p);
    P.sync();
    P.state(j, "free all, sync");
    P.trim(0);
    P.state(j, "trim 0");
    j.ae();
  }
  // c5: reuse without a host sync: same stream (stream order) and another stream
  {
    Pool P;
    cudaStream_t other;
    CK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    j.k("reuse_without_sync").ab();
    void* a = P.alloc(100 * MiB);
    P.free(a);
    void* b = P.alloc(100 * MiB);  // same stream, no sync: stream-ordered reuse expected
    P.sync();
    P.state(j, "alloc A, free A, alloc B same stream, no sync (A)", a, 100 * MiB);
    P.state(j, "(B)", b, 100 * MiB);
    P.free(b);
    void* c = P.alloc(100 * MiB, other);  // other stream, no sync
    CK(cudaStreamSynchronize(other));
    P.sync();
    P.state(j, "free B, alloc C on another stream, no sync (C)", c, 100 * MiB);
    P.free(c, other);
    CK(cudaStreamSynchronize(other));
    j.ae();
    CK(cudaStreamDestroy(other));
  }
  // c6: release threshold 0: does memory go back at synchronization?
  {
    Pool P;
    P.threshold(0);
    j.k("release_threshold_0").ab();
    for (size_t n : {size_t(100 * MiB), size_t(GiB)}) {
      void* p = P.alloc(n);
      P.sync();
      P.state(j, "alloc, sync", p, n);
      P.free(p);
      P.state(j, "free (no sync yet)");
      P.sync();
      P.state(j, "stream sync");
      CK(cudaDeviceSynchronize());
      P.state(j, "device sync");
    }
    j.ae();
  }
  // c7: release threshold max, then cudaMemPoolTrimTo
  {
    Pool P;
    j.k("trim").ab();
    void* a = P.alloc(100 * MiB);
    void* b = P.alloc(GiB);
    void* c = P.alloc(20 * MiB);
    P.sync();
    P.state(j, "alloc 100MiB, 1GiB, 20MiB");
    P.free(a);
    P.free(b);
    P.sync();
    P.state(j, "free 100MiB and 1GiB, sync");
    P.trim(512 * MiB);
    P.state(j, "trim to 512MiB (20MiB live)");
    P.trim(0);
    P.state(j, "trim to 0 (20MiB live)");
    P.free(c);
    P.sync();
    P.state(j, "free 20MiB, sync");
    P.trim(0);
    P.state(j, "trim to 0");
    j.ae();
  }
  // c8: many small requests: 1000 x 1 B
  {
    Pool P;
    std::vector<void*> ps;
    for (int i = 0; i < 1000; ++i) ps.push_back(P.alloc(1));
    P.sync();
    j.k("small_1000_x_1B").ob();
    j.k("reserved").u(P.attr(cudaMemPoolAttrReservedMemCurrent));
    j.k("used").u(P.attr(cudaMemPoolAttrUsedMemCurrent));
    std::map<int64_t, int> hist;
    for (size_t i = 1; i < ps.size(); ++i) hist[int64_t(u64(ps[i])) - int64_t(u64(ps[i - 1]))]++;
    int64_t mode = 0;
    int mode_n = 0;
    for (auto& kv : hist)
      if (kv.second > mode_n) { mode = kv.first; mode_n = kv.second; }
    j.k("stride_mode").i(mode).k("stride_mode_count").i(mode_n).k("first_ptrs").ab();
    for (int i = 0; i < 8; ++i) j.hex(u64(ps[i]));
    j.ae().oe();
    for (void* p : ps) P.free(p);
    P.sync();
  }
  j.oe();
}

// ------------------------------------------------------------------------------------------
// d. latency

__global__ void spin_kernel(uint64_t ns, unsigned long long* out) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
  if (out) *out = t - t0;
}

static void section_latency(Json& j) {
  const int reps = 50;
  j.ob().k("reps").i(reps).k("cudaMalloc_cudaFree").ab();
  for (size_t n : {size_t(512), size_t(MiB), size_t(100 * MiB), size_t(GiB)}) {
    std::vector<double> tm, tf;
    for (int r = 0; r < reps + 3; ++r) {
      auto t0 = Clock::now();
      void* p = dmalloc(n);
      double a = us_since(t0);
      t0 = Clock::now();
      dfree(p);
      double f = us_since(t0);
      if (r >= 3) { tm.push_back(a); tf.push_back(f); }
    }
    j.ob().k("size").u(n).k("malloc_us_median").d(median(tm)).k("free_us_median").d(median(tf));
    j.k("malloc_us_min").d(*std::min_element(tm.begin(), tm.end()));
    j.k("free_us_min").d(*std::min_element(tf.begin(), tf.end())).oe();
  }
  j.ae();
  // the same through an explicit pool (release threshold max), warm
  {
    Pool P;
    j.k("pool_mallocasync_freeasync").ab();
    for (size_t n : {size_t(512), size_t(MiB), size_t(100 * MiB), size_t(GiB)}) {
      std::vector<double> tm, tf;
      for (int r = 0; r < reps + 3; ++r) {
        auto t0 = Clock::now();
        void* p = P.alloc(n);
        double a = us_since(t0);
        t0 = Clock::now();
        P.free(p);
        double f = us_since(t0);
        if (r >= 3) { tm.push_back(a); tf.push_back(f); }
      }
      P.sync();
      j.ob().k("size").u(n).k("malloc_us_median").d(median(tm)).k("free_us_median").d(median(tf)).oe();
    }
    j.ae();
  }
  // do cudaMalloc / cudaFree wait for a ~200 ms kernel on another (non-blocking) stream?
  {
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    unsigned long long* d_out = static_cast<unsigned long long*>(dmalloc(sizeof(unsigned long long)));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    const uint64_t spin_ns = 200ull * 1000 * 1000;
    j.k("while_kernel_runs").ab();
    struct Test { const char* what; size_t size; bool is_free; };
    for (Test t : {Test{"cudaMalloc", MiB, false}, Test{"cudaMalloc", GiB, false},
                   Test{"cudaFree", MiB, true}, Test{"cudaFree", GiB, true}}) {
      void* pre = t.is_free ? dmalloc(t.size) : nullptr;
      CK(cudaDeviceSynchronize());
      CK(cudaEventRecord(e0, s));
      spin_kernel<<<1, 1, 0, s>>>(spin_ns, d_out);
      CK(cudaGetLastError());
      CK(cudaEventRecord(e1, s));
      std::this_thread::sleep_for(std::chrono::milliseconds(10));  // let it start
      bool busy_before = cudaStreamQuery(s) == cudaErrorNotReady;
      auto t0 = Clock::now();
      void* p = nullptr;
      if (t.is_free) dfree(pre);
      else p = dmalloc(t.size);
      double call_ms = us_since(t0) / 1000.0;
      cudaError_t q = cudaStreamQuery(s);
      bool busy_after = q == cudaErrorNotReady;
      if (q != cudaErrorNotReady) CK(q);
      CK(cudaStreamSynchronize(s));
      float kernel_ms = 0;
      CK(cudaEventElapsedTime(&kernel_ms, e0, e1));
      if (p) dfree(p);
      j.ob().k("call").str(t.what).k("size").u(t.size).k("call_ms").d(call_ms);
      j.k("kernel_ms").d(kernel_ms).k("kernel_busy_before_call").b(busy_before);
      j.k("kernel_still_running_after_call").b(busy_after);
      j.k("waited_for_kernel").b(!busy_after && call_ms > 0.5 * kernel_ms - 10).oe();
      fprintf(stderr, "  %s %zu during kernel: %.2f ms (kernel %.1f ms)\n", t.what, t.size,
              call_ms, kernel_ms);
    }
    j.ae();
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    dfree(d_out);
    CK(cudaStreamDestroy(s));
  }
  j.oe();
}

// ------------------------------------------------------------------------------------------

static std::string read_first_line(const char* path) {
  std::ifstream f(path);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

int main(int argc, char** argv) {
  std::set<std::string> only;
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--only" && a + 1 < argc) {
      std::stringstream ss(argv[++a]);
      std::string item;
      while (std::getline(ss, item, ',')) only.insert(item);
    } else if (s == "-h" || s == "--help") {
      printf("usage: driver_probe [--only placement,small,pool,latency] > out.json\n");
      return 0;
    } else {
      fprintf(stderr, "unknown argument %s\n", s.c_str());
      return 2;
    }
  }
  auto want = [&](const char* s) { return only.empty() || only.count(s); };

  Json j;
  j.ob();
  int failures = 0;
  try {
    int dev_count = 0;
    CK(cudaGetDeviceCount(&dev_count));
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));  // create the primary context, nothing else
    CKD(cuInit(0));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    int drv = 0, rt = 0;
    CK(cudaDriverGetVersion(&drv));
    CK(cudaRuntimeGetVersion(&rt));
    size_t f = 0, t = 0;
    CK(cudaMemGetInfo(&f, &t));
    CUdevice cudev;
    CKD(cuDeviceGet(&cudev, 0));
    CUmemAllocationProp ap;
    memset(&ap, 0, sizeof ap);
    ap.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    ap.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    ap.location.id = 0;
    size_t gmin = 0, grec = 0;
    CKD(cuMemGetAllocationGranularity(&gmin, &ap, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CKD(cuMemGetAllocationGranularity(&grec, &ap, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    j.k("tool").str("scripts/probe/driver_probe.cu");
    j.k("device").ob().k("count").i(dev_count).k("name").str(prop.name);
    j.k("cc").str(std::to_string(prop.major) + "." + std::to_string(prop.minor));
    j.k("total_global_mem").u(prop.totalGlobalMem).k("mem_get_info_total").u(t);
    j.k("mem_get_info_free_at_start").u(f);
    j.k("cuda_driver_api_version").i(drv).k("cuda_runtime_version").i(rt);
    j.k("nvidia_driver").str(read_first_line("/proc/driver/nvidia/version"));
    j.k("vmm_granularity_min").u(gmin).k("vmm_granularity_recommended").u(grec);
    j.oe();
  } catch (const std::exception& e) {
    fprintf(stderr, "driver_probe: setup failed: %s\n", e.what());
    j.k("setup_error").str(e.what()).oe();
    printf("%s\n", j.s.c_str());
    return 1;
  }

  struct Section { const char* name; void (*fn)(Json&); };
  for (Section s : {Section{"placement", section_placement}, Section{"small", section_small},
                    Section{"pool", section_pool}, Section{"latency", section_latency}}) {
    if (!want(s.name)) continue;
    fprintf(stderr, "driver_probe: %s\n", s.name);
    auto t0 = Clock::now();
    Json sub;
    try {
      s.fn(sub);
      free_all_quietly();  // should be empty already
      j.k(s.name).raw(sub.s);
    } catch (const std::exception& e) {
      ++failures;
      fprintf(stderr, "driver_probe: section %s failed: %s\n", s.name, e.what());
      free_all_quietly();
      Json err;
      err.ob().k("error").str(e.what()).oe();
      j.k(s.name).raw(err.s);
    }
    j.k(std::string(s.name) + "_seconds").d(us_since(t0) / 1e6);
  }
  j.k("leaked_allocations").u(g_live.size());
  free_all_quietly();
  j.k("failed_sections").i(failures);
  j.oe();
  printf("%s\n", j.s.c_str());
  return failures ? 1 : 0;
}
