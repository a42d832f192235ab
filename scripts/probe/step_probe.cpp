// step_probe: where a training step's time goes on the GPU, for the simulated device's step-time
// model (issue 14, part 3; devices/step_time_model.h holds the constants fitted from its output).
//
// Build:  cmake --build build-gpu --target gmb_step_probe     (CUDA builds only)
// Run:    build-gpu/gmb_step_probe --config configs/dynamic_seq.yaml --steps 3 --ops ops.csv > probe.json
//
// Sections (one JSON object on stdout, progress on stderr):
//   ops      the config's first workload, `--steps` steps, every buffer a plain cudaMalloc: for
//            each op the host time of its call (cudaMalloc, cudaFree with the GPU idle, or the
//            kernel launch) and, for a compute op, its GPU time between two events, with a
//            ~0.3 ms kernel queued before it so that it starts as soon as it is launched (what
//            a training loop that runs ahead of the GPU sees). One CSV row per op (--ops).
//   launch   host time per launch and GPU time per kernel of 512 back-to-back tiny kernels
//            (the touch kernel on 1 MiB, a 64x64x64 bf16 cuBLAS GEMM), queued behind a long one.
//   waits    which calls wait for queued GPU work: each call timed on the host with the GPU idle
//            and again with ~20 ms of kernels queued (cudaMalloc, cudaFree, cudaMallocAsync,
//            cudaFreeAsync, cudaMemPoolTrimTo, cudaMallocManaged, cudaFree of managed memory).
//   loop     (--sections loop) the ops of --loop-steps steps as a training loop runs them through
//            cudaMalloc, and through cudaMallocManaged + cudaMemPrefetchAsync, with no
//            synchronization: each call's host time and whether the GPU was still busy.
//   managed  cudaMallocManaged + cudaMemPrefetchAsync + a kernel writing it + cudaFree, by size,
//            medians of 5: host time of each call, GPU time of the prefetch and of the first and
//            second kernel over the range; and the first kernel without a prefetch.
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "harness/config/config.h"
#include "workloads/transformer.h"
#include "workloads/transformer_compute.h"

using namespace gmb;

namespace {

void ck(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(e)));
}
double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
// The modeled GPU time, whether the workload says it as seconds or as a ModeledKernel.
template <typename T>
double gpu_seconds_of(const T& modeled) {
  if constexpr (std::is_arithmetic_v<T>) return modeled;
  else return modeled.gpu_seconds;
}
double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct Gpu {
  cudaStream_t stream = nullptr;
  void* tf = nullptr;
  void* gate_buf = nullptr;  // 1 GiB read by the gate kernel
  cudaEvent_t e0{}, e1{};
  Gpu() {
    ck(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    tf = tfgpu::create(stream);
    ck(cudaMalloc(&gate_buf, GiB), "cudaMalloc gate");
    ck(cudaMemset(gate_buf, 0, GiB), "cudaMemset gate");
    ck(cudaEventCreate(&e0), "cudaEventCreate");
    ck(cudaEventCreate(&e1), "cudaEventCreate");
  }
  // Keeps the GPU busy for about 0.3 ms per GiB read (times `reps`) while the host goes on.
  void gate(int reps = 1) {
    std::vector<tfgpu::TouchBuffer> b(std::min(reps, tfgpu::kMaxTouchBuffers), {gate_buf, GiB, false});
    tfgpu::touch(tf, b.data(), int(b.size()));
  }
  void sync() { ck(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }
  double elapsed() {
    float ms = 0;
    ck(cudaEventSynchronize(e1), "cudaEventSynchronize");
    ck(cudaEventElapsedTime(&ms, e0, e1), "cudaEventElapsedTime");
    return ms * 1e-3;
  }
};

// --- ops ---
std::string ops_section(Gpu& gpu, const std::string& config_path, std::uint64_t steps, const std::string& csv_path) {
  Config cfg = load_config(config_path);
  auto wl = cfg.workloads.at(0).make();
  auto* tw = dynamic_cast<TransformerWorkload*>(wl.get());
  if (!tw) throw std::runtime_error("step_probe: the config's first workload is not a transformer");
  std::map<BufferId, void*> live;
  ComputeContext ctx;
  ctx.real_gpu = true;
  ctx.stream = gpu.stream;
  ctx.buffer = [&](BufferId id) -> std::optional<DevPtr> {
    auto it = live.find(id);
    if (it == live.end()) return std::nullopt;
    return reinterpret_cast<DevPtr>(it->second);
  };
  wl->prepare(ctx);
  std::ofstream csv(csv_path);
  csv << "config,step,op,kind,name,bytes,flops,traffic_bytes,m,n,k,batch,modeled_s,host_s,gpu_s\n";
  double sum_modeled = 0, sum_gpu = 0, sum_launch = 0, sum_malloc = 0, sum_free = 0;
  std::uint64_t n_compute = 0, n_gemm = 0, n_malloc = 0, n_free = 0;
  std::vector<Op> ops;
  for (std::uint64_t step = 0; step < steps && step < wl->num_steps(); ++step) {
    ops.clear();
    StepInfo info;
    wl->step_ops(step, ops, info);
    ctx.step = step;
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      if (op.kind == Op::Kind::Alloc) {
        void* p = nullptr;
        const double t = now_s();
        ck(cudaMalloc(&p, std::max<Bytes>(op.bytes, 1)), "cudaMalloc");
        const double h = now_s() - t;
        live[op.id] = p;
        csv << fmt::format("{},{},{},malloc,,{},0,0,0,0,0,0,0,{:.9f},0\n", cfg.name, step, i, op.bytes, h);
        sum_malloc += h, ++n_malloc;
      } else if (op.kind == Op::Kind::Free) {
        auto it = live.find(op.id);
        if (it == live.end()) continue;
        const double t = now_s();
        ck(cudaFree(it->second), "cudaFree");
        const double h = now_s() - t;
        live.erase(it);
        csv << fmt::format("{},{},{},free,,{},0,0,0,0,0,0,0,{:.9f},0\n", cfg.name, step, i, op.bytes, h);
        sum_free += h, ++n_free;
      } else {
        const ComputeDesc& c = tw->last_compute().at(op.id);
        gpu.sync();
        gpu.gate();
        ck(cudaEventRecord(gpu.e0, gpu.stream), "cudaEventRecord");
        const double t = now_s();
        wl->compute(op, ctx);
        const double h = now_s() - t;
        ck(cudaEventRecord(gpu.e1, gpu.stream), "cudaEventRecord");
        const double g = gpu.elapsed();
        const double m = gpu_seconds_of(tw->modeled_seconds(c));
        const bool gemm = c.kind == ComputeDesc::Kind::Gemm;
        csv << fmt::format("{},{},{},{},{},0,{},{},{},{},{},{},{:.9f},{:.9f},{:.9f}\n", cfg.name, step, i,
                           gemm ? "gemm" : "touch", c.name, c.flops, c.bytes, gemm ? c.gemm.m : 0,
                           gemm ? c.gemm.n : 0, gemm ? c.gemm.k : 0, gemm ? c.gemm.batch : 0, m, h, g);
        sum_modeled += m, sum_gpu += g, sum_launch += h, ++n_compute, n_gemm += gemm;
      }
    }
    fmt::print(stderr, "ops: {} step {} done ({} ops)\n", cfg.name, step, ops.size());
  }
  wl->finish();
  for (auto& [id, p] : live) cudaFree(p);
  if (!csv.good()) throw std::runtime_error("step_probe: cannot write " + csv_path);
  return fmt::format(
      "{{\"config\": \"{}\", \"steps\": {}, \"compute_ops\": {}, \"gemms\": {}, \"mallocs\": {}, \"frees\": {}, "
      "\"modeled_s\": {:.6f}, \"gpu_s\": {:.6f}, \"launch_host_s\": {:.6f}, \"malloc_host_s\": {:.6f}, "
      "\"free_host_s\": {:.6f}}}",
      cfg.name, steps, n_compute, n_gemm, n_malloc, n_free, sum_modeled, sum_gpu, sum_launch, sum_malloc, sum_free);
}

// --- loop ---
// The same ops as a training loop runs them through cudaMalloc (managed = false) or
// cudaMallocManaged + cudaMemPrefetchAsync (managed = true), with no synchronization between
// them: each call's host time, and whether the GPU still had work queued when it was made.
std::string loop_section(Gpu& gpu, const std::string& config_path, std::uint64_t steps, bool managed,
                         const std::string& csv_path) {
  Config cfg = load_config(config_path);
  auto wl = cfg.workloads.at(0).make();
  std::map<BufferId, std::pair<void*, Bytes>> live;
  ComputeContext ctx;
  ctx.real_gpu = true;
  ctx.stream = gpu.stream;
  ctx.buffer = [&](BufferId id) -> std::optional<DevPtr> {
    auto it = live.find(id);
    if (it == live.end()) return std::nullopt;
    return reinterpret_cast<DevPtr>(it->second.first);
  };
  wl->prepare(ctx);
  std::ofstream csv(csv_path);
  csv << "config,managed,step,op,kind,bytes,gpu_busy,host_s\n";
  std::vector<Op> ops;
  std::vector<double> step_s;
  cudaMemLocation loc{};
  loc.type = cudaMemLocationTypeDevice;
  loc.id = 0;
  for (std::uint64_t step = 0; step < steps && step < wl->num_steps(); ++step) {
    ops.clear();
    StepInfo info;
    wl->step_ops(step, ops, info);
    ctx.step = step;
    const double t_step = now_s();
    for (std::size_t i = 0; i < ops.size(); ++i) {
      const Op& op = ops[i];
      const bool busy = cudaStreamQuery(gpu.stream) == cudaErrorNotReady;
      const char* kind = "compute";
      Bytes bytes = 0;
      const double t = now_s();
      if (op.kind == Op::Kind::Alloc) {
        void* p = nullptr;
        bytes = std::max<Bytes>(op.bytes, 1);
        if (managed) {
          ck(cudaMallocManaged(&p, bytes), "cudaMallocManaged");
          ck(cudaMemPrefetchAsync(p, bytes, loc, 0, gpu.stream), "cudaMemPrefetchAsync");
        } else {
          ck(cudaMalloc(&p, bytes), "cudaMalloc");
        }
        live[op.id] = {p, bytes};
        kind = "malloc";
      } else if (op.kind == Op::Kind::Free) {
        auto it = live.find(op.id);
        if (it == live.end()) continue;
        bytes = it->second.second;
        ck(cudaFree(it->second.first), "cudaFree");
        live.erase(it);
        kind = "free";
      } else {
        wl->compute(op, ctx);
      }
      const double h = now_s() - t;
      csv << fmt::format("{},{},{},{},{},{},{},{:.9f}\n", cfg.name, managed ? 1 : 0, step, i, kind, bytes, busy ? 1 : 0, h);
    }
    gpu.sync();
    step_s.push_back(now_s() - t_step);
    fmt::print(stderr, "loop: {} managed={} step {} {:.1f} ms\n", cfg.name, managed, step, step_s.back() * 1e3);
  }
  wl->finish();
  for (auto& [id, p] : live) cudaFree(p.first);
  if (!csv.good()) throw std::runtime_error("step_probe: cannot write " + csv_path);
  std::string list;
  for (double v : step_s) list += fmt::format("{}{:.6f}", list.empty() ? "" : ", ", v);
  return fmt::format("{{\"config\": \"{}\", \"managed\": {}, \"step_s\": [{}]}}", cfg.name, managed, list);
}

// --- launch ---
std::string launch_section(Gpu& gpu) {
  void *small = nullptr, *a = nullptr, *c = nullptr;
  ck(cudaMalloc(&small, MiB), "cudaMalloc");
  ck(cudaMalloc(&a, MiB), "cudaMalloc");
  ck(cudaMalloc(&c, MiB), "cudaMalloc");
  ck(cudaMemset(a, 0, MiB), "cudaMemset");
  const int n = 512;
  std::string out = "{";
  for (int kind = 0; kind < 2; ++kind) {
    std::vector<double> host, per_kernel;
    for (int rep = 0; rep < 5; ++rep) {
      gpu.sync();
      gpu.gate(40);  // ~12 ms: the launches below queue behind it
      ck(cudaEventRecord(gpu.e0, gpu.stream), "cudaEventRecord");
      const double t = now_s();
      for (int i = 0; i < n; ++i) {
        if (kind == 0) {
          tfgpu::TouchBuffer b{small, MiB, true};
          tfgpu::touch(gpu.tf, &b, 1);
        } else {
          tfgpu::GemmCall g;
          g.m = g.n = g.k = 64;
          g.a = a, g.b = a, g.c = c;
          g.lda = g.ldb = g.ldc = 64;
          tfgpu::gemm(gpu.tf, tfgpu::Elem::BF16, g);
        }
      }
      host.push_back((now_s() - t) / n);
      ck(cudaEventRecord(gpu.e1, gpu.stream), "cudaEventRecord");
      per_kernel.push_back(gpu.elapsed() / n);
    }
    out += fmt::format("{}\"{}\": {{\"host_s_per_launch\": {:.9f}, \"gpu_s_per_kernel\": {:.9f}}}", kind ? ", " : "",
                       kind ? "gemm_64_bf16" : "touch_1mib", median(host), median(per_kernel));
  }
  gpu.sync();
  cudaFree(small), cudaFree(a), cudaFree(c);
  return out + "}";
}

// --- waits ---
std::string waits_section(Gpu& gpu) {
  cudaMemPool_t pool;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = 0;
  ck(cudaMemPoolCreate(&pool, &props), "cudaMemPoolCreate");
  std::uint64_t keep = UINT64_MAX;
  ck(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
  struct Call {
    std::string name;
    std::function<void()> before, call;
  };
  void* p = nullptr;
  std::vector<Call> calls = {
      {"cudaMalloc_2MiB", [] {}, [&] { ck(cudaMalloc(&p, 2 * MiB), "cudaMalloc"); }},
      {"cudaFree_2MiB", [&] { ck(cudaMalloc(&p, 2 * MiB), "cudaMalloc"); }, [&] { ck(cudaFree(p), "cudaFree"); }},
      {"cudaMalloc_256MiB", [] {}, [&] { ck(cudaMalloc(&p, 256 * MiB), "cudaMalloc"); }},
      {"cudaFree_256MiB", [&] { ck(cudaMalloc(&p, 256 * MiB), "cudaMalloc"); }, [&] { ck(cudaFree(p), "cudaFree"); }},
      {"cudaMallocAsync_64MiB", [] {}, [&] { ck(cudaMallocFromPoolAsync(&p, 64 * MiB, pool, gpu.stream), "mallocAsync"); }},
      {"cudaFreeAsync_64MiB", [&] { ck(cudaMallocFromPoolAsync(&p, 64 * MiB, pool, gpu.stream), "mallocAsync"); },
       [&] { ck(cudaFreeAsync(p, gpu.stream), "cudaFreeAsync"); }},
      {"cudaMemPoolTrimTo_0", [&] {
         ck(cudaMallocFromPoolAsync(&p, 256 * MiB, pool, gpu.stream), "mallocAsync");
         ck(cudaFreeAsync(p, gpu.stream), "cudaFreeAsync");
       },
       [&] { ck(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo"); }},
      {"cudaMallocManaged_2MiB", [] {}, [&] { ck(cudaMallocManaged(&p, 2 * MiB), "cudaMallocManaged"); }},
      {"cudaFree_managed_2MiB", [&] { ck(cudaMallocManaged(&p, 2 * MiB), "cudaMallocManaged"); },
       [&] { ck(cudaFree(p), "cudaFree"); }},
      {"cudaMemPrefetchAsync_2MiB", [] {}, [&] {
         cudaMemLocation loc{};
         loc.type = cudaMemLocationTypeDevice;
         loc.id = 0;
         ck(cudaMemPrefetchAsync(p, 2 * MiB, loc, 0, gpu.stream), "cudaMemPrefetchAsync");
       }},
  };
  std::string out = "[";
  for (std::size_t i = 0; i < calls.size(); ++i) {
    double t_idle = 0, t_busy = 0, gate_s = 0;
    for (int busy = 0; busy < 2; ++busy) {
      std::vector<double> ts;
      for (int rep = 0; rep < 5; ++rep) {
        // The calls that make memory leave it for the next call of the list (free, prefetch).
        const bool frees_after = calls[i].name.rfind("cudaMalloc_", 0) == 0 || calls[i].name.rfind("cudaMallocAsync", 0) == 0 ||
                                 calls[i].name.rfind("cudaMallocManaged", 0) == 0;
        gpu.sync();
        calls[i].before();
        gpu.sync();
        if (calls[i].name.rfind("cudaMemPrefetchAsync", 0) == 0) ck(cudaMallocManaged(&p, 2 * MiB), "cudaMallocManaged");
        if (busy) {
          ck(cudaEventRecord(gpu.e0, gpu.stream), "cudaEventRecord");
          gpu.gate(40);
          gpu.gate(40);
          ck(cudaEventRecord(gpu.e1, gpu.stream), "cudaEventRecord");
        }
        const double t = now_s();
        calls[i].call();
        ts.push_back(now_s() - t);
        gpu.sync();
        if (busy) gate_s = gpu.elapsed();
        if (frees_after) {
          if (calls[i].name.rfind("cudaMallocAsync", 0) == 0) ck(cudaFreeAsync(p, gpu.stream), "cudaFreeAsync");
          else ck(cudaFree(p), "cudaFree");
        } else if (calls[i].name.rfind("cudaMemPrefetchAsync", 0) == 0) {
          ck(cudaFree(p), "cudaFree");
        }
        gpu.sync();
      }
      (busy ? t_busy : t_idle) = median(ts);
    }
    out += fmt::format("{}{{\"call\": \"{}\", \"idle_s\": {:.9f}, \"busy_s\": {:.9f}, \"queued_gpu_s\": {:.6f}}}",
                       i ? ", " : "", calls[i].name, t_idle, t_busy, gate_s);
  }
  cudaMemPoolDestroy(pool);
  return out + "]";
}

// --- managed ---
std::string managed_section(Gpu& gpu) {
  std::string out = "[";
  const Bytes sizes[] = {64 * KiB, 2 * MiB, 32 * MiB, 256 * MiB, GiB};
  bool first = true;
  for (Bytes size : sizes) {
    for (int prefetch = 0; prefetch < 2; ++prefetch) {
      std::vector<double> m, pf_host, pf_gpu, k1, k2, f;
      for (int rep = 0; rep < 5; ++rep) {
        void* p = nullptr;
        gpu.sync();
        double t = now_s();
        ck(cudaMallocManaged(&p, size), "cudaMallocManaged");
        m.push_back(now_s() - t);
        if (prefetch) {
          cudaMemLocation loc{};
          loc.type = cudaMemLocationTypeDevice;
          loc.id = 0;
          ck(cudaEventRecord(gpu.e0, gpu.stream), "cudaEventRecord");
          t = now_s();
          ck(cudaMemPrefetchAsync(p, size, loc, 0, gpu.stream), "cudaMemPrefetchAsync");
          pf_host.push_back(now_s() - t);
          ck(cudaEventRecord(gpu.e1, gpu.stream), "cudaEventRecord");
          pf_gpu.push_back(gpu.elapsed());
        }
        for (int pass = 0; pass < 2; ++pass) {
          tfgpu::TouchBuffer b{p, size, true};
          ck(cudaEventRecord(gpu.e0, gpu.stream), "cudaEventRecord");
          tfgpu::touch(gpu.tf, &b, 1);
          ck(cudaEventRecord(gpu.e1, gpu.stream), "cudaEventRecord");
          (pass ? k2 : k1).push_back(gpu.elapsed());
        }
        gpu.sync();
        t = now_s();
        ck(cudaFree(p), "cudaFree managed");
        f.push_back(now_s() - t);
      }
      out += fmt::format(
          "{}{{\"bytes\": {}, \"prefetch\": {}, \"malloc_host_s\": {:.9f}, \"prefetch_host_s\": {:.9f}, "
          "\"prefetch_gpu_s\": {:.9f}, \"first_kernel_gpu_s\": {:.9f}, \"second_kernel_gpu_s\": {:.9f}, "
          "\"free_host_s\": {:.9f}}}",
          first ? "" : ", ", size, prefetch ? "true" : "false", median(m), median(pf_host), median(pf_gpu), median(k1),
          median(k2), median(f));
      first = false;
      fmt::print(stderr, "managed: {} bytes, prefetch {} done\n", size, prefetch);
    }
  }
  return out + "]";
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> configs;
  std::string ops_prefix = "ops";
  std::uint64_t steps = 3, loop_steps = 0;
  std::string sections = "launch,waits,managed,ops";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--config" && i + 1 < argc) configs.push_back(argv[++i]);
    else if (a == "--steps" && i + 1 < argc) steps = std::stoull(argv[++i]);
    else if (a == "--ops" && i + 1 < argc) ops_prefix = argv[++i];
    else if (a == "--loop-steps" && i + 1 < argc) loop_steps = std::stoull(argv[++i]);
    else if (a == "--sections" && i + 1 < argc) sections = argv[++i];
    else {
      fmt::print(stderr, "usage: gmb_step_probe [--config FILE]... [--steps N] [--loop-steps N] [--ops CSV_PREFIX] [--sections launch,waits,managed,ops,loop]\n");
      return 2;
    }
  }
  // Each section on its own: one that fails records its error and the others still run.
  std::string out = "{";
  bool failed = false;
  auto section = [&](const std::string& name, const std::function<std::string()>& fn) {
    std::string body;
    try {
      body = fn();
    } catch (const std::exception& e) {
      body = fmt::format("{{\"error\": \"{}\"}}", e.what());
      failed = true;
    }
    out += (out.size() > 1 ? ", \"" : "\"") + name + "\": " + body;
    fmt::print(stderr, "{} done\n", name);
  };
  try {
    Gpu gpu;
    auto wanted = [&](const char* name) { return ("," + sections + ",").find(std::string(",") + name + ",") != std::string::npos; };
    if (wanted("launch")) section("launch", [&] { return launch_section(gpu); });
    if (wanted("waits")) section("waits", [&] { return waits_section(gpu); });
    if (wanted("managed")) section("managed", [&] { return managed_section(gpu); });
    for (std::size_t i = 0; i < configs.size() && wanted("ops"); ++i)
      section(fmt::format("ops_{}", i), [&] { return ops_section(gpu, configs[i], steps, fmt::format("{}_{}.csv", ops_prefix, i)); });
    for (std::size_t i = 0; i < configs.size() && wanted("loop"); ++i)
      for (int managed = 0; managed < 2; ++managed)
        section(fmt::format("loop_{}_{}", i, managed ? "managed" : "malloc"), [&] {
          return loop_section(gpu, configs[i], loop_steps, managed, fmt::format("{}_loop_{}_{}.csv", ops_prefix, i, managed));
        });
  } catch (const std::exception& e) {
    fmt::print(stderr, "step_probe: {}\n", e.what());
    return 1;
  }
  fmt::print("{}}}\n", out);
  return failed ? 1 : 0;
}

