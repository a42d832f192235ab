// One memory call an allocator made to its device, as recorded (RecordingDevice) or as read
// from a PyTorch snapshot's segment_* events (workloads/pytorch_snapshot.h).
#pragma once

#include <cstdint>

#include "common/types.h"

namespace gmb {

struct DeviceCall {
  enum class Kind : std::uint8_t { Malloc, Free, Map, Unmap };
  Kind kind = Kind::Malloc;
  Bytes bytes = 0;
  DevPtr address = 0;
  std::uint64_t mark = 0;  // the caller's mark when the call was made (e.g. the op being replayed)
};

}  // namespace gmb
