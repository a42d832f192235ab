// The two diagnostics both devices honour, the CUDA device in real time and the simulated one
// in modeled time, so that a GPU run and a sim run of one config compare call by call. Not
// results: nothing here changes a decision.
//  - GMB_CUDA_CALL_LOG=PATH: a CSV row per driver allocation call and per launch (CallLogFile).
//  - GMB_CUDA_POOL_CALL_DELAY_US=N: N microseconds of host time before every pool call.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>

#include "common/types.h"

namespace gmb {

// The file of GMB_CUDA_CALL_LOG: PATH.<pid> for a process's first device, PATH.<pid>.<n> for the
// n-th after it (a process that runs several cases makes a device for each), with the header
// call,bytes,ok,wait_us,call_us,ptr,pool_reserved,t_us,frees_done. Off when the variable is unset
// or empty; DeviceError when the file cannot be opened; a failed write is reported on stderr
// when it is closed.
class CallLogFile {
 public:
  CallLogFile();
  ~CallLogFile();
  CallLogFile(const CallLogFile&) = delete;
  CallLogFile& operator=(const CallLogFile&) = delete;

  bool on() const { return file_ != nullptr; }
  // One row. A free's bytes (given as 0) are those of the malloc that returned `ptr`; a failed
  // call's pointer is written as 0.
  void row(const char* call, Bytes bytes, bool ok, double wait_us, double call_us, DevPtr ptr, Bytes pool_reserved,
           double t_us, std::uint64_t frees_done);

 private:
  std::FILE* file_ = nullptr;
  std::string name_;
  std::unordered_map<DevPtr, Bytes> sizes_;  // live mallocs' bytes, for their frees' rows
};

// GMB_CUDA_POOL_CALL_DELAY_US in seconds (0 when unset or empty); DeviceError naming the
// variable unless it is a number from 0 to 1,000,000 (one second a call).
double pool_call_delay_seconds_from_environment();

}  // namespace gmb
