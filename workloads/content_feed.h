// A file's whole content read on a helper thread into one buffer that never moves, for a reader
// that follows it as it arrives (pickle::ArrivingBytes): a snapshot's pickle is inflated on one
// core while it is parsed on another, and the reader finds each block still in the cache.
//
// The buffer is address space reserved for the most the content may hold (max_bytes), filled
// from its start; pages are only made as they are written. Where that much cannot be reserved,
// start() gives nullptr and the caller reads the content whole (ByteInput::read_rest).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "workloads/byte_input.h"
#include "workloads/pickle/pickle_reader.h"

namespace gmb {

class ContentFeed final : public pickle::ArrivingBytes {
 public:
  // Starts reading what `in` has left, as read_rest(max_bytes, what) would; `in` is taken
  // unless the result is nullptr.
  static std::unique_ptr<ContentFeed> start(std::unique_ptr<ByteInput>& in, std::uint64_t max_bytes, std::string what);
  ~ContentFeed() override;  // waits for the helper thread

  const char* data() const override { return buffer_; }
  std::size_t wait_for(std::size_t n) override;
  std::size_t expected_size() const override { return expected_; }
  // All of it: waits for the end, then throws the reading's error (the TraceError read_rest
  // would throw: a damaged gzip stream, a content too large, a read error).
  std::string_view finish();

  // Cores this process may run on: the feed helps where there are two or more.
  static int usable_cores();

 private:
  ContentFeed(std::unique_ptr<ByteInput> in, char* buffer, std::size_t reserved);
  void read(std::uint64_t max_bytes, const std::string& what);

  std::unique_ptr<ByteInput> in_;
  char* buffer_;
  std::size_t reserved_;
  std::size_t expected_;
  std::atomic<std::size_t> ready_{0};  // bytes arrived
  std::mutex mutex_;
  std::condition_variable arrived_;
  bool done_ = false;  // under mutex_
  std::exception_ptr error_;
  std::thread reader_;
};

}  // namespace gmb
