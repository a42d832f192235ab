// The transformer's GPU compute in a sim-only build (GMB_WITH_CUDA=OFF). Only a run on the
// real GPU computes, and a sim-only build never has one (devices/cuda_device_absent.cpp), so
// these are unreachable; they throw rather than pretend to have computed.
#include <stdexcept>

#include "workloads/transformer_compute.h"

namespace gmb::tfgpu {
namespace {
constexpr const char* kNoGpuCompute = "this gpumembench is a sim-only build: the transformer has no GPU compute";
}  // namespace

void* create(void*) { throw std::logic_error(kNoGpuCompute); }
void destroy(void*) {}
void set_workspace(void*, void*, std::size_t) { throw std::logic_error(kNoGpuCompute); }
void gemm(void*, Elem, const GemmCall&) { throw std::logic_error(kNoGpuCompute); }
void touch(void*, const TouchBuffer*, int) { throw std::logic_error(kNoGpuCompute); }

}  // namespace gmb::tfgpu
