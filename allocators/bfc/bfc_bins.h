// TensorFlow BFCAllocator's size arithmetic (xla/tsl/framework/bfc_allocator.{h,cc}): every
// request rounded up to 256 bytes, and 21 bins of free chunks, bin b holding the chunks of
// 256 << b bytes up to twice that (the last bin everything from 256 MiB up).
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/units.h"

namespace gmb::bfc {

constexpr Bytes kMinAllocationSize = 256;
constexpr int kNumBins = 21;
// A chunk is split when the rest is at least as large as the request, or at least this much
// (TF's max_internal_fragmentation_bytes when no fragmentation_fraction is set).
constexpr Bytes kMaxInternalFragmentation = Bytes{128} << 20;
// TF's first region with allow_growth: 2 MiB (or the whole limit when that is less).
constexpr Bytes kInitialGrowthRegion = Bytes{2} << 20;

// Rounds up to a multiple of 256; saturates (never wraps) near 2^64.
constexpr Bytes rounded_bytes(Bytes bytes) {
  if (bytes > UINT64_MAX - (kMinAllocationSize - 1)) return UINT64_MAX & ~(kMinAllocationSize - 1);
  return (bytes + kMinAllocationSize - 1) / kMinAllocationSize * kMinAllocationSize;
}

// Rounds down to a multiple of 256 (what Extend may still ask for).
constexpr Bytes rounded_down(Bytes bytes) { return bytes / kMinAllocationSize * kMinAllocationSize; }

constexpr Bytes bin_size(int bin) { return kMinAllocationSize << bin; }

// The bin of a chunk or request of `bytes`: floor(log2(bytes / 256)), at most the last bin.
constexpr int bin_for_size(Bytes bytes) {
  const Bytes v = std::max(bytes, kMinAllocationSize) >> 8;  // >= 1
  return std::min(kNumBins - 1, 63 - __builtin_clzll(v));
}

}  // namespace gmb::bfc
