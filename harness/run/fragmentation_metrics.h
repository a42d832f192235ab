// The published fragmentation metrics, each as its source defines it (docs/METRICS.md), from
// one run's figures. Absent (nullopt) where the allocator cannot give the inputs: never 0 for
// "unknown".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/run/results.h"

namespace gmb {

// The families of metrics the tables may show beside gpumembench's own fragmentation
// (`output: {metrics: [...]}`, --metrics); the CSV and JSON hold them all.
inline const std::vector<std::string>& metric_families() {
  static const std::vector<std::string> families = {"gmlake", "stalloc", "tf", "memory_viz"};
  return families;
}

// GMLake (ASPLOS'24): 1 - peak active bytes / peak reserved bytes (the two peaks apart).
inline std::optional<double> gmlake_fragmentation(const RunMetrics& m) {
  if (!m.peak_active_bytes || m.peak_reserved_bytes == 0) return std::nullopt;
  if (*m.peak_active_bytes >= m.peak_reserved_bytes) return 0.0;
  return 1.0 - double(*m.peak_active_bytes) / double(m.peak_reserved_bytes);
}

// STAlloc: memory utilization, peak allocated / peak reserved, and the waste it leaves,
// peak reserved - peak allocated.
inline std::optional<double> stalloc_utilization(const RunMetrics& m) {
  if (m.peak_reserved_bytes == 0) return std::nullopt;
  return m.peak_allocated_bytes >= m.peak_reserved_bytes ? 1.0
                                                         : double(m.peak_allocated_bytes) / double(m.peak_reserved_bytes);
}
inline Bytes stalloc_waste_bytes(const RunMetrics& m) {
  return m.peak_reserved_bytes > m.peak_allocated_bytes ? m.peak_reserved_bytes - m.peak_allocated_bytes : 0;
}

// TensorFlow BFCAllocator::GetFragmentation: (free - largest free chunk) / free, free being the
// reserved bytes in no live chunk. With nothing free TF divides by zero; here that is 0 (no
// free byte is in a piece too small to use).
inline std::optional<double> tf_bfc_fragmentation(const std::optional<FreeSpace>& f) {
  if (!f) return std::nullopt;
  if (f->free_bytes == 0) return 0.0;
  const Bytes largest = f->largest_free_bytes < f->free_bytes ? f->largest_free_bytes : f->free_bytes;
  return double(f->free_bytes - largest) / double(f->free_bytes);
}

// PyTorch memory_viz (torch/cuda/_memory_viz.py, segment summary): internal free bytes, inside
// live blocks beyond what was requested (rounding), and external free bytes, in free blocks of
// the segments (gaps). At the peak-reserved point.
inline std::optional<Bytes> internal_free_bytes(const std::optional<FreeSpace>& f) {
  if (!f) return std::nullopt;
  return f->allocated_bytes > f->requested_bytes ? f->allocated_bytes - f->requested_bytes : 0;
}
inline std::optional<Bytes> external_free_bytes(const std::optional<FreeSpace>& f) {
  if (!f) return std::nullopt;
  return f->free_bytes;
}

}  // namespace gmb
