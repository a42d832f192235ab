// Writes a replayed run as an RMM memory event log (the format of RMM's logging_resource_adaptor,
// read back by workloads/rmm_log_trace_source.cpp): one row per allocation, free and failed
// allocation, as the events arrive from the logging adaptors (allocators/adaptors/logging_allocator.h).
// Written to FILE.tmp and renamed by commit(): a run that fails leaves no half-written log.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>

#include "allocators/adaptors/logging_allocator.h"

namespace gmb {

class RmmLogWriter final : public AllocatorEventSink {
 public:
  // Throws std::runtime_error when the file cannot be created.
  explicit RmmLogWriter(std::string path);
  ~RmmLogWriter() override;  // without commit(): removes the temporary file
  RmmLogWriter(const RmmLogWriter&) = delete;
  RmmLogWriter& operator=(const RmmLogWriter&) = delete;

  // Thread: 1. Time: host time since the writer was made (HH:MM:SS.ffffff). Pointers as %p
  // prints them, "(nil)" on a failure. Streams: the replay's stream ids as handles (0x0, 0x1, ...).
  void on_event(const AllocatorEvent& event) override;
  // Flushes, checks every write through close, renames into place. Throws std::runtime_error.
  void commit();
  std::uint64_t rows() const { return rows_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::uint64_t rows_ = 0;
};

}  // namespace gmb
