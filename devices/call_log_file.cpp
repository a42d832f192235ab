#include "devices/call_log_file.h"

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include <fmt/format.h>
#include <unistd.h>

#include "common/text_excerpt.h"
#include "devices/device.h"

namespace gmb {

CallLogFile::CallLogFile() {
  const char* path = std::getenv("GMB_CUDA_CALL_LOG");
  if (!path || !*path) return;
  static std::atomic<int> devices{0};  // logs opened in this process so far
  const int n = devices++;
  const long pid = static_cast<long>(getpid());
  name_ = n == 0 ? fmt::format("{}.{}", path, pid) : fmt::format("{}.{}.{}", path, pid, n);
  file_ = std::fopen(name_.c_str(), "w");
  if (!file_) throw DeviceError(fmt::format("GMB_CUDA_CALL_LOG: cannot write {}", name_));
  std::fputs("call,bytes,ok,wait_us,call_us,ptr,pool_reserved,t_us,frees_done\n", file_);
}

CallLogFile::~CallLogFile() {
  if (!file_) return;
  const bool write_failed = std::ferror(file_) != 0;  // asked before fclose frees the FILE
  if (std::fclose(file_) != 0 || write_failed)
    std::fprintf(stderr, "gpumembench: GMB_CUDA_CALL_LOG: writing %s failed\n", name_.c_str());
}

void CallLogFile::row(const char* call, Bytes bytes, bool ok, double wait_us, double call_us, DevPtr ptr,
                      Bytes pool_reserved, double t_us, std::uint64_t frees_done) {
  if (bytes == 0) {
    auto it = sizes_.find(ptr);
    if (it != sizes_.end()) bytes = it->second, sizes_.erase(it);
  } else if (ok) {
    sizes_[ptr] = bytes;
  }
  std::fprintf(file_, "%s,%llu,%d,%.1f,%.1f,%#llx,%llu,%.1f,%llu\n", call, static_cast<unsigned long long>(bytes),
               ok ? 1 : 0, wait_us, call_us, static_cast<unsigned long long>(ok ? ptr : 0),
               static_cast<unsigned long long>(pool_reserved), t_us, static_cast<unsigned long long>(frees_done));
}

double pool_call_delay_seconds_from_environment() {
  const char* v = std::getenv("GMB_CUDA_POOL_CALL_DELAY_US");
  if (!v || !*v) return 0.0;
  char* end = nullptr;
  errno = 0;
  const double us = std::strtod(v, &end);
  if (end == v || *end != '\0' || errno != 0 || !std::isfinite(us) || us < 0 || us > 1e6)
    throw DeviceError(fmt::format("GMB_CUDA_POOL_CALL_DELAY_US: '{}' is not a number of microseconds from 0 to "
                                  "1000000",
                                  escaped_excerpt(v)));
  return us * 1e-6;
}

}  // namespace gmb
