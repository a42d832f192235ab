#include "harness/export/rmm_log_writer.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "harness/io/atomic_write.h"  // FileWriteError, temporary_path_for

namespace gmb {

RmmLogWriter::RmmLogWriter(std::string path)
    : path_(std::move(path)), tmp_(temporary_path_for(path_)), start_(std::chrono::steady_clock::now()) {
  f_ = std::fopen(tmp_.c_str(), "w");
  if (!f_) throw std::runtime_error(fmt::format("cannot write {}: {}", path_, std::strerror(errno)));
  std::setvbuf(f_, nullptr, _IOFBF, std::size_t(1) << 20);
  std::fputs("Thread,Time,Action,Pointer,Size,Stream\n", f_);
}

RmmLogWriter::~RmmLogWriter() {
  if (!f_) return;
  std::fclose(f_);
  if (tmp_ != path_) std::remove(tmp_.c_str());
}

void RmmLogWriter::on_event(const AllocatorEvent& e) {
  const char* action = nullptr;
  switch (e.kind) {
    case AllocatorEvent::Kind::Alloc: action = "allocate"; break;
    case AllocatorEvent::Kind::Free: action = "free"; break;
    case AllocatorEvent::Kind::AllocFailed: action = "allocate failure"; break;
    default: return;  // segment changes: not part of an RMM log
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - start_).count();
  const long long s = us / 1000000;
  // Formatted apart and written with fwrite, which does not throw (fmt::print to a FILE* does, at
  // a full disk, mid-replay): a write error is found by commit() and named there.
  fmt::memory_buffer row;
  fmt::format_to(std::back_inserter(row), "1,{:02}:{:02}:{:02}.{:06},{},", s / 3600, s / 60 % 60, s % 60,
                 us % 1000000, action);
  if (e.ptr) fmt::format_to(std::back_inserter(row), "{:#x}", e.ptr);
  else fmt::format_to(std::back_inserter(row), "(nil)");
  fmt::format_to(std::back_inserter(row), ",{},{:#x}\n", e.bytes, static_cast<unsigned>(e.stream));
  std::fwrite(row.data(), 1, row.size(), f_);
  ++rows_;
}

void RmmLogWriter::commit() {
  const bool write_error = std::ferror(f_) != 0;
  const int close_rc = std::fclose(f_);
  f_ = nullptr;
  if (write_error || close_rc != 0) {
    if (tmp_ != path_) std::remove(tmp_.c_str());
    throw FileWriteError(fmt::format("cannot write {}: {}", path_, std::strerror(errno ? errno : EIO)));
  }
  if (tmp_ == path_) return;
  std::error_code ec;
  std::filesystem::rename(tmp_, path_, ec);
  if (ec) throw std::runtime_error(fmt::format("cannot rename {} to {}: {}", tmp_, path_, ec.message()));
}

}  // namespace gmb
