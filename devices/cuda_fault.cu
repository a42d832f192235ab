#include "devices/cuda_fault.h"

#include <cstdlib>

#include <cuda_runtime.h>

namespace gmb {

namespace {

__global__ void write_to_an_invalid_address(int* p) { *p = 42; }

}  // namespace

bool inject_cuda_fault_if_asked(const std::string& label) {
  const char* want = std::getenv("GMB_INJECT_CUDA_FAULT");
  if (!want || !*want || label.find(want) == std::string::npos) return false;
  write_to_an_invalid_address<<<1, 1>>>(reinterpret_cast<int*>(0x10));
  (void)cudaDeviceSynchronize();  // cudaErrorIllegalAddress, sticky for the rest of this process
  return true;
}

}  // namespace gmb
