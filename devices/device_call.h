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

// Joins `next` to `range` where both map (or both unmap) pages side by side under one mark (one
// op): PyTorch records one event per range, the simulated device is called per page. False, and
// `range` unchanged, where they are not one range.
inline bool join_page_range(DeviceCall& range, const DeviceCall& next) {
  if (range.kind != next.kind || range.mark != next.mark ||
      (next.kind != DeviceCall::Kind::Map && next.kind != DeviceCall::Kind::Unmap))
    return false;
  if (range.address + range.bytes == next.address) {
    range.bytes += next.bytes;
    return true;
  }
  if (next.address + next.bytes == range.address) {
    range.address = next.address;
    range.bytes += next.bytes;
    return true;
  }
  return false;
}

}  // namespace gmb
