// The vocabulary every layer shares: byte counts, device addresses, streams and the size units.
// The lowest layer (common/): it includes nothing of the project.
#pragma once

#include <cstdint>

namespace gmb {

using Bytes = std::uint64_t;
using DevPtr = std::uint64_t;  // a device address as an integer; 0 is never a valid block
using StreamId = int;          // 0 = the default stream; others are created on first use

constexpr Bytes KiB = 1024;
constexpr Bytes MiB = 1024 * KiB;
constexpr Bytes GiB = 1024 * MiB;
constexpr Bytes TiB = 1024 * GiB;

// The largest device (capacity) accepted anywhere: 1 PiB, far above any card. A request
// larger than the device is refused before any rounding, so with sizes bounded by this no
// rounding, page count or sum of live bytes can overflow 64 bits.
constexpr Bytes kMaxDeviceBytes = 1024 * TiB;
// Stream ids a trace may use: the caching allocator keys its free blocks by a 16-bit stream
// (allocators/caching/block_set.h), so readers refuse larger ids where the file names them.
constexpr std::int64_t kMaxStreamId = 65535;

}  // namespace gmb
