// The bytes of a trace file, read as a stream through one buffer: plain, or gzip-compressed
// (detected from the magic bytes 1f 8b, never from the name) and inflated block by block with
// zlib. A file of any length costs the same memory. Every trace reader reads through this layer:
// the native CSV and RMM log readers (workloads/*_trace_source.cpp) scan its buffer line by
// line; binary readers (the PyTorch snapshot pickle reader) use read_exact / read_u8 and fail()
// so their errors name the byte offset the same way.
//
// Offsets are positions in the decompressed content (what a reader sees); a damaged gzip stream
// is reported at its compressed offset as well.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/huge_page_allocator.h"
#include "common/text_excerpt.h"  // escaped_excerpt, for the readers' messages
#include "workloads/trace_error.h"

namespace gmb {

// Content read whole (read_rest): in huge pages where it is large (a 7 MB snapshot in 4 KiB
// pages took 1,700 page faults, a tenth of its replay).
using WholeContent = std::basic_string<char, std::char_traits<char>, HugePageAllocator<char>>;

class ByteInput {
 public:
  // Opens the file; throws TraceError when it cannot be read or its gzip header is damaged.
  static std::unique_ptr<ByteInput> open(const std::string& path);
  virtual ~ByteInput() = default;

  const std::string& path() const { return path_; }
  virtual bool gzip() const = 0;

  // The unconsumed bytes already buffered (no read).
  std::string_view buffered() const { return {buf_.data() + pos_, end_ - pos_}; }
  // Reads more after the buffered bytes (the buffer grows when they fill it). False at the end
  // of the content. Invalidates views returned before.
  bool refill();
  // At least n unconsumed bytes unless the content ends first (then all that is left).
  std::string_view peek(std::size_t n);
  void consume(std::size_t n) { pos_ += n; }
  // Offset of the first unconsumed byte.
  std::uint64_t offset() const { return base_ + pos_; }
  bool at_end() { return pos_ == end_ && !refill(); }
  // Everything not yet consumed, to the end of the content (inflated), consumed. For formats
  // that are parsed whole (pickles). TraceError when it holds more than max_bytes (`what` names
  // the content in the message).
  WholeContent read_rest(std::uint64_t max_bytes, std::string_view what);
  // read_rest into `dst`, which has room for max_bytes + 1 (content_feed.h reserves it), block
  // by block through produce(): arrived(n) after each block, n the bytes there so far. Returns
  // the content's length; throws what read_rest throws.
  std::uint64_t stream_rest(char* dst, std::uint64_t max_bytes, std::string_view what,
                            const std::function<void(std::uint64_t)>& arrived);
  // A regular file (not a pipe, FIFO or character device such as /dev/zero): its length is
  // bounded by what the disk holds.
  bool regular_file() const { return regular_file_; }
  // A regular file's length on disk (compressed, where it is), 0 otherwise.
  std::uint64_t file_bytes() const { return file_bytes_; }
  bool pipe() const { return pipe_; }  // a FIFO or a socket: its bytes can be read once
  // What the file says the whole content's length is, 0 where it does not say (a pipe): only a
  // hint, for sizing (a gzip stream's own length field, taken modulo 2^32, is that of its last
  // member).
  virtual std::uint64_t size_hint() const { return 0; }

  // For binary readers: exactly n bytes, or TraceError "truncated: ... at byte N (expected
  // <what>)".
  void read_exact(void* dst, std::size_t n, std::string_view what);
  std::uint8_t read_u8(std::string_view what);
  // TraceError at the current offset / at `offset`.
  [[noreturn]] void fail(const std::string& message) const { fail_at(offset(), message); }
  [[noreturn]] void fail_at(std::uint64_t offset, const std::string& message) const;
  // A text reader's error `e` in its content: in gzip-compressed content the rest is inflated
  // first (discarded), and damage to the gzip stream, if it has any, is the error thrown: the
  // bytes inflated before damage is found can be garbage, which is not the file's content.
  [[noreturn]] void fail_after_checking_the_rest(const TraceError& e);

 protected:
  explicit ByteInput(std::string path);
  bool refill_at_most(std::size_t want);  // refill(), producing at most `want` bytes
  // read_rest's and stream_rest's error for content over max_bytes, at the current offset.
  [[noreturn]] void fail_too_large(std::uint64_t max_bytes, std::string_view what) const;
  // Appends up to `room` bytes of content at `dst`; 0 at the end. Throws TraceError.
  virtual std::size_t produce(char* dst, std::size_t room) = 0;
  // The whole content from its first byte, at most max_bytes, where this input can give it
  // faster than produce() block by block: false where it cannot or does not (read_rest then
  // streams, which also gives the precise message for damaged input).
  virtual bool whole_content(std::uint64_t /*max_bytes*/, WholeContent& /*out*/) { return false; }
  std::uint64_t file_bytes_ = 0;  // a regular file's length on disk, 0 otherwise

 private:
  std::string path_;
  std::vector<char> buf_;
  std::size_t pos_ = 0, end_ = 0;  // unconsumed bytes: buf_[pos_, end_)
  std::uint64_t base_ = 0;         // content offset of buf_[0]
  bool ended_ = false;
  bool regular_file_ = false;
  bool pipe_ = false;
};


}  // namespace gmb
