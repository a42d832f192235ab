// cap_probe: two questions the sim's models could not answer from the earlier probes (issue 14).
//
// Build:  nvcc -O2 -std=c++17 -o cap_probe scripts/probe/cap_probe.cu
// Run:    ./cap_probe pool_cap|free_cost OUT_DIR
//
//   pool_cap   What a cudaMemPool does when the device has no memory left to back a request.
//              A ballast cudaMalloc leaves about 1 GiB free (as gpumembench's --capacity does).
//              The pool is filled with pairs (31 MiB, 1 MiB), so every 32 MiB granule it backs
//              holds one live 1 MiB block; then the 31 MiB blocks are freed. No free range holds
//              64 MiB and no granule is idle, so a 64 MiB request needs new memory, which the
//              device does not have. The sim (granules of 32 MiB, moved only when idle) refuses
//              it; does the H200? Each 64 MiB request is logged (ok, offset, reserved, used,
//              device free) until one fails, then 30 MiB requests (which fit the holes).
//              Variants: `sync` (a synchronize after the frees) and `nosync`; `comb16` with
//              pairs (15 MiB, 1 MiB) (two live blocks per granule). File pool_cap.csv.
//   free_cost  Does a cudaMalloc or cudaFree cost more when device memory is nearly full (the
//              caching allocator's max_split_size_mb runs free and re-malloc large segments at a
//              24 GiB cap)? Rounds of: malloc N blocks of S, free them all, each call timed,
//              with the device nearly full (ballast leaves N*S + 64 MiB) and nearly empty (no
//              ballast); sizes 64 MiB, 256 MiB, 1 GiB; and with a 20 ms pause between rounds.
//              File free_cost.csv: mode,size,round,phase,index,us.
// Every CUDA call but the requests expected to fail is checked; a failure exits 1.

#include "probe_pool.h"

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

// A ballast that leaves `leave` bytes free (nothing when leave == 0).
struct Ballast {
  void* p = nullptr;
  explicit Ballast(size_t leave) {
    if (!leave) return;
    size_t free = device_free();
    if (free <= leave) throw std::runtime_error("less free memory than the ballast should leave");
    CK(cudaMalloc(&p, free - leave));
  }
  ~Ballast() {
    if (p) cudaFree(p);
  }
};

// ---- pool_cap ----
static void pool_cap_variant(FILE* f, const char* variant, size_t big, size_t small, bool sync) {
  Ballast ballast(GiB);
  Pool P;
  uint64_t base = 0;
  auto row = [&](const char* step, size_t bytes, void* p) {
    if (p && !base) base = u64(p);
    fprintf(f, "%s,%s,%zu,%d,%lld,%llu,%llu,%zu\n", variant, step, bytes, p ? 1 : 0,
            p ? (long long)(u64(p) - base) : -1LL, (unsigned long long)P.attr(cudaMemPoolAttrReservedMemCurrent),
            (unsigned long long)P.attr(cudaMemPoolAttrUsedMemCurrent), device_free());
  };
  fprintf(f, "%s,start,0,1,-1,0,0,%zu\n", variant, device_free());
  std::vector<void*> bigs, smalls;
  for (int i = 0; i < 4096; ++i) {  // pairs until the device is full
    void* a = P.try_alloc(big);
    if (!a) { row("fill big", big, a); break; }
    void* b = P.try_alloc(small);
    if (!b) { row("fill small", small, b); P.free(a); break; }
    bigs.push_back(a);
    smalls.push_back(b);
  }
  fprintf(f, "%s,pairs,%zu,1,-1,%llu,%llu,%zu\n", variant, bigs.size(),
          (unsigned long long)P.attr(cudaMemPoolAttrReservedMemCurrent),
          (unsigned long long)P.attr(cudaMemPoolAttrUsedMemCurrent), device_free());
  for (void* a : bigs) P.free(a);
  if (sync) CK(cudaDeviceSynchronize());
  row("freed bigs", 0, nullptr);
  std::vector<void*> got;
  for (int i = 0; i < 64; ++i) {
    void* p = P.try_alloc(64 * MiB);
    row("ask 64MiB", 64 * MiB, p);
    if (!p) break;
    got.push_back(p);
  }
  for (int i = 0; i < 8; ++i) {
    void* p = P.try_alloc(30 * MiB);
    row("ask 30MiB", 30 * MiB, p);
    if (!p) break;
    got.push_back(p);
  }
  CK(cudaDeviceSynchronize());
  for (void* p : got) P.free(p);
  for (void* p : smalls) P.free(p);
  CK(cudaDeviceSynchronize());
  fprintf(stderr, "pool_cap %s: %zu pairs\n", variant, bigs.size());
}

static void pool_cap(const std::string& dir) {
  FILE* f = open_out(dir, "pool_cap.csv");
  fprintf(f, "variant,step,bytes,ok,offset,reserved,used,device_free\n");
  pool_cap_variant(f, "comb_sync", 31 * MiB, MiB, true);
  pool_cap_variant(f, "comb_nosync", 31 * MiB, MiB, false);
  pool_cap_variant(f, "comb16_sync", 15 * MiB, MiB, true);
  close_out(f);
}

// ---- free_cost ----
static double us_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
}

static void free_cost_mode(FILE* f, const char* mode, size_t size, size_t count, bool tight, int pause_ms) {
  Ballast ballast(tight ? count * size + 64 * MiB : 0);
  std::vector<void*> v(count, nullptr);
  for (int round = 0; round < 8; ++round) {
    for (size_t i = 0; i < count; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      CK(cudaMalloc(&v[i], size));
      fprintf(f, "%s,%zu,%d,malloc,%zu,%.1f\n", mode, size, round, i, us_since(t0));
    }
    for (size_t i = 0; i < count; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      CK(cudaFree(v[i]));
      fprintf(f, "%s,%zu,%d,free,%zu,%.1f\n", mode, size, round, i, us_since(t0));
    }
    if (pause_ms) std::this_thread::sleep_for(std::chrono::milliseconds(pause_ms));
  }
}

static void free_cost(const std::string& dir) {
  FILE* f = open_out(dir, "free_cost.csv");
  fprintf(f, "mode,size,round,phase,index,us\n");
  for (size_t size : {64 * MiB, 256 * MiB, GiB}) {
    size_t count = 4 * GiB / size;
    free_cost_mode(f, "tight", size, count, true, 0);
    free_cost_mode(f, "ample", size, count, false, 0);
    free_cost_mode(f, "tight_pause20ms", size, count, true, 20);
    fprintf(stderr, "free_cost %zu MiB done\n", size / MiB);
  }
  close_out(f);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: cap_probe pool_cap|free_cost OUT_DIR\n");
    return 2;
  }
  std::string section = argv[1], dir = argv[2];
  try {
    CK(cudaSetDevice(0));
    CK(cudaFree(nullptr));
    if (section == "pool_cap") {
      pool_cap(dir);
    } else if (section == "free_cost") {
      free_cost(dir);
    } else {
      fprintf(stderr, "cap_probe: unknown section %s\n", section.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    fprintf(stderr, "cap_probe: %s: %s\n", section.c_str(), e.what());
    return 1;
  }
  return 0;
}
