// A file's whole content read on a helper thread into one buffer that never moves, for a reader
// that follows it as it arrives (pickle::ArrivingBytes): a snapshot's pickle is inflated on one
// core while it is parsed on another, and the reader finds each block still in the cache.
//
// The buffer is address space reserved for the most the content may hold (max_bytes), filled
// from its start; pages are only made as they are written. Where that much cannot be reserved,
// start() gives nullptr and the caller reads the content whole (ByteInput::read_rest).
//
// Memory stays within a window, not the content's length: the reader says which bytes it no
// longer needs (release), and the helper keeps at most `window` bytes ahead of that point,
// moving the 2 MiB pages the reader has left behind to where it writes next (mremap), so a
// content of any length touches about `window` bytes of fresh memory. It goes beyond the window
// only while the reader waits for bytes it has not released room for (a long stretch it must
// hold, such as a snapshot's segments), never making the reader wait on it. Where the system
// cannot move pages (MREMAP_DONTUNMAP, Linux 5.7), the content is kept whole, as before.
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
  static constexpr std::size_t kPage = std::size_t(2) << 20;    // moved whole: one huge page
  static constexpr std::size_t kWindow = std::size_t(4) << 20;  // ahead of what the reader released

  // Starts reading what `in` has left, as read_rest(max_bytes, what) would; `in` is taken
  // unless the result is nullptr. `window`: 0 keeps the content whole (no page is moved).
  static std::unique_ptr<ContentFeed> start(std::unique_ptr<ByteInput>& in, std::uint64_t max_bytes, std::string what,
                                            std::size_t window = kWindow);
  ~ContentFeed() override;  // waits for the helper thread

  const char* data() const override { return buffer_; }
  std::size_t wait_for(std::size_t n) override;
  void release(std::size_t offset) override;
  std::size_t expected_size() const override { return expected_; }
  // Waits for the end of the reading, then throws its error (the TraceError read_rest would
  // throw: a damaged gzip stream, a content too large, a read error). The reader reads no more.
  void finish();
  // The whole content, after finish(): the buffer, or, where pages behind the reader were moved,
  // the file read again whole (read_rest), for a reader that starts over.
  std::string_view content();
  // Pages moved so far (each kPage bytes of fresh memory not touched).
  std::size_t pages_moved() const { return pages_moved_.load(); }

 private:
  ContentFeed(std::unique_ptr<ByteInput> in, char* mapping, std::size_t mapped, char* buffer, std::size_t reserved,
              std::uint64_t max_bytes, std::string what, std::size_t window);
  void read();
  void arrived(std::size_t n);         // the helper: n bytes are in the buffer
  void make_room(std::size_t n);       // the helper: pages for the next block, from those behind the reader

  std::unique_ptr<ByteInput> in_;
  const std::string path_;
  const std::uint64_t start_offset_;  // where in the file's content the feed started
  char* const mapping_;
  const std::size_t mapped_;
  char* const buffer_;  // within mapping_, on a kPage boundary
  const std::size_t reserved_;
  const std::uint64_t max_bytes_;
  const std::string what_;
  std::size_t window_;  // 0: keep the content whole
  const std::size_t expected_;
  std::atomic<std::size_t> ready_{0};     // bytes arrived
  std::atomic<std::size_t> released_{0};  // bytes before this the reader no longer needs
  // While the helper waits for room: the release that lets it go on (else kNotWaiting).
  static constexpr std::size_t kNotWaiting = SIZE_MAX;
  std::atomic<std::size_t> helper_needs_{kNotWaiting};
  std::atomic<std::size_t> pages_moved_{0};
  std::mutex mutex_;
  std::condition_variable arrived_cv_, room_cv_;
  bool done_ = false;           // under mutex_: the reading ended
  std::size_t reader_wants_ = 0;  // under mutex_: the reader waits until this many bytes arrived (0: it does not wait)
  // finish() or the destructor: no more waiting for room, and (with a window) every byte
  // arrived is behind the reader: the rest is inflated to find any damage, in a window's memory.
  std::atomic<bool> reader_gone_{false};
  std::exception_ptr error_;
  // The helper's own: pages below written_pages_ hold bytes (or were given memory); pages below
  // next_free_ have been moved away (empty now).
  std::size_t written_pages_ = 0, next_free_ = 0;
  WholeContent again_;  // content() where pages were moved
  std::thread helper_;
};

}  // namespace gmb
