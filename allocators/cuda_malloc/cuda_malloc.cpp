#include "allocators/cuda_malloc/cuda_malloc.h"

#include <fmt/format.h>

#include "allocators/registry.h"
#include "allocators/tracking_allocator.h"
#include "common/units.h"

namespace gmb {
namespace {

// Reserved bytes are what the driver really took: cudaMemGetInfo on the GPU, the driver
// model (2 MiB pages, small requests packed) on sim.
class CudaMallocAllocator final : public TrackingAllocator {
 public:
  explicit CudaMallocAllocator(Device& device)
      : TrackingAllocator(device), baseline_(device.used_bytes()) {}

  ~CudaMallocAllocator() override {
    live_.for_each([this](DevPtr ptr, const Live&) { device_.free(ptr); });
  }

  std::optional<DevPtr> allocate(Bytes bytes, StreamId stream) override {
    // The driver hands out nullptr for 0 bytes and takes no memory (the H200, scripts/probe/
    // zero_byte_probe.cu): no call, nothing counted; its free is a no-op.
    if (bytes == 0) return DevPtr{0};
    if (refuse_larger_than_device(bytes, "cudaMalloc")) return std::nullopt;
    auto ptr = device_.malloc(bytes);
    if (!ptr) {
      record_oom(bytes, fmt::format("cudaMalloc of {} failed: out of memory", format_bytes(bytes)));
      return std::nullopt;
    }
    record_alloc(*ptr, bytes, stream, true);
    refresh();
    return ptr;
  }

  void deallocate(DevPtr ptr) override {
    if (!record_free(ptr, true)) return;
    device_.free(ptr);
    refresh();
  }

 private:
  void refresh() {
    Bytes used = device_.used_bytes();
    set_reserved(used > baseline_ ? used - baseline_ : 0, live_.size());
  }
  Bytes baseline_;
};

}  // namespace

std::vector<AllocatorOption> cuda_malloc_options() { return {}; }

void validate_cuda_malloc_options(const AllocatorOptions& options) {
  check_option_keys(options, cuda_malloc_options());
}

std::unique_ptr<InspectableAllocator> make_cuda_malloc_allocator(Device& device, const AllocatorOptions& options) {
  validate_cuda_malloc_options(options);
  return std::make_unique<CudaMallocAllocator>(device);
}

}  // namespace gmb
