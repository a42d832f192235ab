// The CUDA device's entry points in a sim-only build (GMB_WITH_CUDA=OFF): no GPU is ever
// visible, and asking for one is an error that says the path is not built in.
#include "devices/cuda_fault.h"
#include "devices/cuda_path.h"
#include "devices/device.h"

namespace gmb {

bool cuda_path_built_in() { return false; }

bool cuda_device_available() { return false; }

int cuda_device_count() { return 0; }

std::unique_ptr<Device> make_cuda_device(Bytes) { throw DeviceError(kNoCudaPathMessage); }

DeviceInfo cuda_device_info() { throw DeviceError(kNoCudaPathMessage); }

}  // namespace gmb

namespace gmb {
bool inject_cuda_fault_if_asked(const std::string&) { return false; }  // no GPU path: nothing to fault
}  // namespace gmb
