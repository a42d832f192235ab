#include "workloads/byte_input.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <zlib.h>

#include "workloads/compressed_block.h"

#if GMB_HAVE_LIBDEFLATE
#include <libdeflate.h>
#endif
#if GMB_HAVE_ISAL
#include "workloads/isal_inflate.h"
#endif

namespace gmb {

TraceError::TraceError(const std::string& file_, std::uint64_t line_, const std::string& message)
    // (line 0: the file as a whole)
    : std::runtime_error(line_ ? fmt::format("{}:{}: {}", printable_text(file_), line_, message)
                               : fmt::format("{}: {}", printable_text(file_), message)),
      file(file_),
      line(line_) {}

TraceError::TraceError(const std::string& file_, std::uint64_t offset, const std::string& message, bool)
    : std::runtime_error(fmt::format("{}: byte {}: {}", printable_text(file_), offset, message)),
      file(file_),
      byte_offset(offset) {}

TraceError TraceError::at_byte(const std::string& file, std::uint64_t offset, const std::string& message) {
  return TraceError(file, offset, message, true);
}

TraceError::TraceError(const std::string& file_, const std::string& where, const std::string& message)
    : std::runtime_error(fmt::format("{}: {}: {}", printable_text(file_), where, message)), file(file_) {}

TraceError TraceError::in_content(const std::string& file, const std::string& where, const std::string& message) {
  return TraceError(file, where, message);
}

namespace {

constexpr std::size_t kBlock = std::size_t(1) << 20;  // bytes read per refill
// The most a file's own word on its length (a gzip length field) is trusted for sizing room:
// a file that lies costs no more than this before it is found out.
constexpr std::uint64_t kTrustedLengthAtMost = std::uint64_t(1) << 30;

class FileBytes final : public ByteInput {
 public:
  FileBytes(std::string path, std::FILE* f, std::string head)
      : ByteInput(std::move(path)), f_(f), head_(std::move(head)) {}
  ~FileBytes() override { std::fclose(f_); }
  bool gzip() const override { return false; }
  std::uint64_t size_hint() const override { return file_bytes_; }

 protected:
  std::size_t produce(char* dst, std::size_t room) override {
    if (!head_.empty() && room >= head_.size()) {
      std::memcpy(dst, head_.data(), head_.size());
      const std::size_t n = head_.size();
      head_.clear();
      return n;
    }
    std::size_t n = std::fread(dst, 1, room, f_);
    if (n == 0 && std::ferror(f_)) throw TraceError(path(), 0, fmt::format("read error: {}", std::strerror(errno)));
    return n;
  }

 private:
  std::FILE* f_;
  std::string head_;  // bytes read by open() to tell gzip from plain, delivered first
};

// gzip members one after another (as `cat a.gz b.gz` makes) inflate as one content.
//
// Where ISA-L is installed, a regular file is inflated by it (isal_inflate.h: 2.5 times as fast
// as zlib). ISA-L says only that something is wrong, not what or where; so at its first trouble
// zlib reads the file again from its start, skips the bytes already given and goes on: it finds
// the damage and names it exactly as it does for a file read by zlib alone (or, where the two
// disagree, inflates what zlib accepts). A pipe cannot be read again: zlib reads it.
class GzipBytes final : public ByteInput {
 public:
  GzipBytes(std::string path, std::FILE* f, std::string head)
      : ByteInput(std::move(path)), f_(f), head_(std::move(head)), in_(kBlock / 4) {
    zs_ = z_stream{};
    if (inflateInit2(&zs_, 15 + 16) != Z_OK) throw TraceError(this->path(), 0, "zlib could not start");
    start_member();
  }
  ~GzipBytes() override {
    inflateEnd(&zs_);
    std::fclose(f_);
  }
  bool gzip() const override { return true; }
  bool whole_content(std::uint64_t max_bytes, WholeContent& out) override;
  // The last member's length field, read without moving the stream.
  std::uint64_t size_hint() const override {
    unsigned char tail[4];
    if (file_bytes_ < 18 || ::pread(::fileno(f_), tail, 4, static_cast<off_t>(file_bytes_ - 4)) != 4) return 0;
    return length_field(tail);
  }
  // The length field `tail` (the file's last 4 bytes), no more than deflate can inflate this
  // file to (1032 to 1).
  std::uint64_t length_field(const unsigned char* tail) const {
    return std::min<std::uint64_t>(isize(tail), file_bytes_ * 1032);
  }
  // A gzip member's ISIZE field (its last 4 bytes, little-endian): its inflated length modulo 2^32.
  static std::uint64_t isize(const unsigned char* field) {
    return field[0] | field[1] << 8 | field[2] << 16 | std::uint64_t(field[3]) << 24;
  }

 protected:
  std::size_t produce(char* dst, std::size_t room) override {
#if GMB_HAVE_ISAL
    if (!fast_started_) {
      fast_started_ = true;
      if (regular_file()) fast_ = std::make_unique<IsalInflate>(f_, std::move(head_));
    }
    if (fast_) {
      std::size_t n = 0;
      if (fast_->produce(dst, room, n)) {
        given_by_fast_ += n;
        return n;
      }
      fast_.reset();
      read_again_with_zlib();
    }
#endif
    return produce_with_zlib(dst, room);
  }

 private:
#if GMB_HAVE_ISAL
  // zlib from the file's first byte, the content ISA-L gave skipped (the same bytes: deflate
  // has one decoding).
  void read_again_with_zlib() {
    if (std::fseek(f_, 0, SEEK_SET) != 0) throw TraceError(path(), 0, fmt::format("cannot read the file again: {}", std::strerror(errno)));
    std::clearerr(f_);  // a read error ISA-L met is zlib's to meet again, or not
    head_.clear();
    zs_.next_in = nullptr;
    zs_.avail_in = 0;
    inflateReset(&zs_);
    start_member();
    std::vector<char> skipped(kBlock);
    while (given_by_fast_ > 0) {
      const std::size_t n = produce_with_zlib(skipped.data(), static_cast<std::size_t>(std::min<std::uint64_t>(given_by_fast_, skipped.size())));
      if (n == 0) throw TraceError(path(), 0, "the file changed while it was read (it ends earlier when read again)");
      given_by_fast_ -= n;
    }
  }
#endif

  std::size_t produce_with_zlib(char* dst, std::size_t room) {
    if (done_) return 0;
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(room);
    while (zs_.avail_out == room) {
      if (zs_.avail_in == 0 && !fill_input()) {
        if (!member_started_) {  // a clean end right after a member
          done_ = true;
          return 0;
        }
        fail_compressed("truncated gzip stream: the file ends inside the compressed data");
      }
      member_started_ = true;
      const Bytef* const out_at = zs_.next_out;
      const int rc = inflate(&zs_, Z_NO_FLUSH);
      check_output(out_at, rc);
      if (rc == Z_STREAM_END) {
        member_started_ = false;
        // Another member may follow; anything else after the stream is damage.
        if (zs_.avail_in == 0 && !fill_input()) {
          done_ = true;
          break;
        }
        if (zs_.next_in[0] != 0x1f) fail_compressed("bytes after the end of the gzip stream are not another gzip member");
        out_before_member_ += zs_.total_out;
        inflateReset(&zs_);
        start_member();
        continue;
      }
      if (rc == Z_BUF_ERROR && zs_.avail_in == 0) continue;  // needs more input
      if (rc != Z_OK)
        fail_compressed(fmt::format("corrupt gzip data ({})", zs_.msg ? zs_.msg : "zlib error " + std::to_string(rc)));
    }
    return room - zs_.avail_out;
  }

  bool fill_input() {
    const std::size_t n = read_compressed_block(f_, head_, in_.data(), in_.size());
    if (n == 0 && std::ferror(f_)) throw TraceError(path(), 0, fmt::format("read error: {}", std::strerror(errno)));
    // in_ was consumed whole (zlib asks for more only then): its last bytes may be a trailer's first.
    const std::size_t used = zs_.next_in ? static_cast<std::size_t>(zs_.next_in - reinterpret_cast<Bytef*>(in_.data())) : 0;
    keep_tail(reinterpret_cast<const unsigned char*>(in_.data()), used);
    consumed_in_ += used;
    zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
    zs_.avail_in = static_cast<uInt>(n);
    return n > 0;
  }
  [[noreturn]] void fail_compressed(const std::string& what, std::uint64_t back = 0) {
    const std::uint64_t at =
        consumed_in_ + (zs_.next_in ? static_cast<std::uint64_t>(zs_.next_in - reinterpret_cast<Bytef*>(in_.data())) : 0);
    throw TraceError::at_byte(path(), offset_of_output(),
                              fmt::format("{} (compressed byte {})", what, at - back));
  }

  // The check of a member's inflated bytes. zlib's own CRC-32 (crc32_z, about 4 instructions a
  // byte) costs as much as the inflate; libdeflate's uses carry-less multiplication. So once
  // zlib has read a member's header (and checked its header CRC, if it has one), zlib is told
  // not to check the data (inflateValidate), and the CRC-32 and length in the member's trailer
  // are checked here, with zlib's messages at the compressed bytes where zlib stops.
  void start_member() {
#if GMB_HAVE_LIBDEFLATE
    header_ = gz_header{};
    inflateValidate(&zs_, 1);
    inflateGetHeader(&zs_, &header_);
    own_check_ = false;
#endif
  }
  void check_output(const Bytef* out_at, int rc) {
#if GMB_HAVE_LIBDEFLATE
    if (own_check_) {
      crc_ = libdeflate_crc32(crc_, out_at, static_cast<std::size_t>(zs_.next_out - out_at));
    } else if (header_.done == 1 && rc == Z_OK) {
      crc_ = static_cast<std::uint32_t>(zs_.adler);  // zlib's CRC of what it inflated so far
      inflateValidate(&zs_, 0);
      own_check_ = true;
    }
    if (rc == Z_STREAM_END && own_check_) {
      // The trailer: the 8 bytes before next_in (CRC-32, then the length modulo 2^32).
      const std::size_t here = static_cast<std::size_t>(zs_.next_in - reinterpret_cast<Bytef*>(in_.data()));
      unsigned char trailer[8];
      for (std::size_t i = 0; i < 8; ++i) {
        const std::size_t back = 8 - i;  // bytes before next_in
        trailer[i] = back <= here ? static_cast<unsigned char>(in_[here - back]) : tail_[8 - (back - here)];
      }
      if (isize(trailer) != crc_) fail_compressed("corrupt gzip data (incorrect data check)", 4);
      if (isize(trailer + 4) != (zs_.total_out & 0xffffffffu)) fail_compressed("corrupt gzip data (incorrect length check)");
    }
#else
    (void)out_at, (void)rc;
#endif
  }
  // The last 8 compressed bytes consumed before in_ is filled again (a trailer may straddle).
  void keep_tail(const unsigned char* bytes, std::size_t n) {
    if (n >= 8) {
      std::memcpy(tail_, bytes + n - 8, 8);
    } else {
      std::memmove(tail_, tail_ + n, 8 - n);
      std::memcpy(tail_ + 8 - n, bytes, n);
    }
  }
  std::uint64_t offset_of_output() const { return out_before_member_ + zs_.total_out; }

  std::FILE* f_;
  std::string head_;  // the magic bytes read by open(), delivered first
  std::vector<char> in_;
  z_stream zs_;
  std::uint64_t consumed_in_ = 0;  // compressed bytes before in_[0]
  std::uint64_t out_before_member_ = 0;  // content bytes of the members before this one
  bool member_started_ = false, done_ = false;
  unsigned char tail_[8] = {};
#if GMB_HAVE_LIBDEFLATE
  gz_header header_{};
  bool own_check_ = false;  // zlib checks nothing more of this member: check_output does
  std::uint32_t crc_ = 0;
#endif
#if GMB_HAVE_ISAL
  std::unique_ptr<IsalInflate> fast_;  // null: zlib reads (a pipe, or after ISA-L's trouble)
  bool fast_started_ = false;
  std::uint64_t given_by_fast_ = 0;  // content bytes ISA-L gave
#endif
};

#if GMB_HAVE_LIBDEFLATE
// libdeflate inflates a whole buffer 2-3 times as fast as zlib's streaming inflate (a 6.9 MB
// snapshot: 2.1-2.9 ms against 5.9-6.5 ms, both checking the CRC). The compressed file is read
// whole (pread: the stream's position does not move), each member inflated into room sized by
// its own length field, grown and the member inflated again where that field was wrong. Any
// failure returns false, and the streaming path reads the file and reports what is wrong.
bool GzipBytes::whole_content(std::uint64_t max_bytes, WholeContent& out) {
  if (file_bytes_ < 18 || file_bytes_ > max_bytes) return false;  // 18: the smallest gzip member
  std::string packed(static_cast<std::size_t>(file_bytes_), '\0');
  for (std::size_t got = 0; got < packed.size();) {
    const ssize_t n = ::pread(::fileno(f_), packed.data() + got, packed.size() - got, static_cast<off_t>(got));
    if (n <= 0) return false;
    got += static_cast<std::size_t>(n);
  }
  std::unique_ptr<libdeflate_decompressor, void (*)(libdeflate_decompressor*)> d(libdeflate_alloc_decompressor(),
                                                                                libdeflate_free_decompressor);
  if (!d) return false;
  out.clear();
  // The last member's length field is at the file's end (the only member's, mostly); an
  // earlier member's is not known before it is inflated: then four times its compressed bytes
  // to start with, doubled until it fits. The field is trusted as far as read_rest trusts
  // size_hint (deflate's 1032 to 1, kTrustedLengthAtMost): a file that lies costs no more room.
  const std::uint64_t last_isize = std::min(
      length_field(reinterpret_cast<const unsigned char*>(packed.data() + packed.size() - 4)), kTrustedLengthAtMost);
  std::size_t in_at = 0;
  while (in_at < packed.size()) {
    const std::size_t left = packed.size() - in_at;
    if (left < 18) return false;  // not a whole member
    std::uint64_t room = std::max<std::uint64_t>(in_at == 0 ? last_isize : 0, 4 * std::uint64_t(left));
    for (;;) {
      if (out.size() + room > max_bytes) room = max_bytes - out.size() + 1;
      const std::size_t at = out.size();
      out.resize(at + static_cast<std::size_t>(room));
      std::size_t in_used = 0, out_made = 0;
      const libdeflate_result r = libdeflate_gzip_decompress_ex(d.get(), packed.data() + in_at, left, out.data() + at,
                                                                static_cast<std::size_t>(room), &in_used, &out_made);
      if (r == LIBDEFLATE_SUCCESS) {
        out.resize(at + out_made);
        in_at += in_used;
        break;
      }
      out.resize(at);
      if (r != LIBDEFLATE_INSUFFICIENT_SPACE || at + room > max_bytes) return false;
      room *= 2;
    }
    if (out.size() > max_bytes) return false;
  }
  return true;
}
#else
bool GzipBytes::whole_content(std::uint64_t, WholeContent&) { return false; }
#endif

}  // namespace

ByteInput::ByteInput(std::string path) : path_(std::move(path)) {}

std::unique_ptr<ByteInput> ByteInput::open(const std::string& path) {
  // Opened without blocking, so that a FIFO nobody writes to reads as empty instead of waiting
  // for ever; then blocking again for the reads (a pipe with a writer delivers as it writes).
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) throw TraceError(path, 0, fmt::format("cannot open the trace file: {}", std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || S_ISDIR(st.st_mode)) {
    ::close(fd);
    throw TraceError(path, 0, "cannot open the trace file: it is a folder");
  }
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  std::FILE* f = ::fdopen(fd, "rb");
  if (!f) {
    ::close(fd);
    throw TraceError(path, 0, fmt::format("cannot open the trace file: {}", std::strerror(errno)));
  }
  unsigned char magic[2] = {0, 0};
  const std::size_t n = std::fread(magic, 1, 2, f);
  const bool gz = n == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  // The bytes read go back in front of the rest without seeking: a pipe cannot seek.
  std::string head(reinterpret_cast<const char*>(magic), n);
  std::unique_ptr<ByteInput> in;
  if (gz) in = std::make_unique<GzipBytes>(path, f, std::move(head));
  else in = std::make_unique<FileBytes>(path, f, std::move(head));
  in->regular_file_ = S_ISREG(st.st_mode);
  in->pipe_ = S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode);
  if (in->regular_file_) in->file_bytes_ = static_cast<std::uint64_t>(st.st_size);
  return in;
}

void ByteInput::fail_too_large(std::uint64_t max_bytes, std::string_view what) const {
  fail(fmt::format("{} is larger than {} MiB (the most read whole)", what, max_bytes >> 20));
}

WholeContent ByteInput::read_rest(std::uint64_t max_bytes, std::string_view what) {
  auto too_large = [&] { fail_too_large(max_bytes, what); };
  // Produced straight into the result, not through the buffer, in room made once where the
  // file says its length (a snapshot of hundreds of MB would otherwise be copied at every
  // doubling, and once more from the buffer). The hint is trusted up to kTrustedLengthAtMost:
  // a file that lies about its length makes the result grow as it would without one.
  {
    // The whole content at once where the input can (then what was consumed is dropped).
    WholeContent whole;
    if (whole_content(max_bytes, whole) && whole.size() >= offset()) {
      whole.erase(0, static_cast<std::size_t>(offset()));
      base_ = offset() + whole.size();  // all consumed: offset() is the content's length
      pos_ = end_ = 0;
      ended_ = true;
      return whole;
    }
  }
  const std::string_view b = buffered();
  if (b.size() > max_bytes) too_large();
  const std::uint64_t cap = max_bytes + 1;  // one byte more than allowed: the test for too much
  std::uint64_t room = b.size() + std::max<std::uint64_t>(std::min(size_hint(), kTrustedLengthAtMost), kBlock);
  WholeContent content;
  content.resize(static_cast<std::size_t>(std::min(room, cap)));
  if (!b.empty()) std::memcpy(content.data(), b.data(), b.size());  // b.data() is null before the first refill
  consume(b.size());
  std::size_t filled = b.size();
  while (!ended_) {
    if (filled == content.size()) {
      if (filled >= cap) too_large();
      content.resize(static_cast<std::size_t>(std::min<std::uint64_t>(cap, std::max<std::uint64_t>(2 * filled, filled + kBlock))));
    }
    // At most 1 GiB a call (zlib counts its output room in 32 bits).
    const std::size_t n = produce(content.data() + filled, std::min<std::size_t>(content.size() - filled, std::size_t(1) << 30));
    if (n == 0) {
      ended_ = true;
      break;
    }
    filled += n;
    base_ += n;  // consumed as produced: offset() counts them
  }
  if (filled > max_bytes) too_large();
  content.resize(filled);
  return content;
}

std::uint64_t ByteInput::stream_rest(char* dst, std::uint64_t max_bytes, std::string_view what,
                                     const std::function<void(std::uint64_t)>& arrived) {
  auto too_large = [&] { fail_too_large(max_bytes, what); };
  const std::string_view b = buffered();
  if (b.size() > max_bytes) too_large();
  if (!b.empty()) std::memcpy(dst, b.data(), b.size());
  consume(b.size());
  std::uint64_t filled = b.size();
  arrived(filled);
  const std::uint64_t cap = max_bytes + 1;  // one byte more than allowed: the test for too much
  while (!ended_) {
    if (filled >= cap) too_large();
    // A quarter of a block at a time: the reader on the other thread starts early and follows
    // closely, reading what is still in the cache.
    const std::size_t n = produce(dst + filled, static_cast<std::size_t>(std::min<std::uint64_t>(cap - filled, kBlock / 4)));
    if (n == 0) {
      ended_ = true;
      break;
    }
    filled += n;
    base_ += n;
    arrived(filled);
  }
  if (filled > max_bytes) too_large();
  return filled;
}

bool ByteInput::refill() { return refill_at_most(SIZE_MAX); }

bool ByteInput::refill_at_most(std::size_t want) {
  if (ended_) return false;
  // Keep the unconsumed bytes at the front; grow when they fill half the buffer.
  if (pos_ > 0) {
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    base_ += pos_;
    end_ -= pos_;
    pos_ = 0;
  }
  // Made on the first refill, by as much as it asks for (64 KiB for the format's head, which
  // is all a snapshot read whole takes from it), then a block; doubled when the unconsumed bytes
  // leave less than half a block.
  if (buf_.size() - end_ < std::min(want, kBlock / 2)) buf_.resize(std::max({2 * buf_.size(), end_ + std::min(want, kBlock)}));
  const std::size_t n = produce(buf_.data() + end_, std::min(buf_.size() - end_, want));
  if (n == 0) {
    ended_ = true;
    return false;
  }
  end_ += n;
  return true;
}

std::string_view ByteInput::peek(std::size_t n) {
  // No more than asked for, by 64 KiB at least: the format's head is peeked at before a
  // snapshot is read whole (a full buffer would be 1 MiB inflated twice).
  while (end_ - pos_ < n && refill_at_most(std::max<std::size_t>(n - (end_ - pos_), std::size_t(64) << 10))) {
  }
  return buffered().substr(0, n);
}

void ByteInput::read_exact(void* dst, std::size_t n, std::string_view what) {
  if (end_ - pos_ < n) peek(n);
  if (end_ - pos_ < n)
    fail(fmt::format("truncated: the content ends after {} more bytes (expected {}, {} bytes)", end_ - pos_, what, n));
  std::memcpy(dst, buf_.data() + pos_, n);
  pos_ += n;
}

std::uint8_t ByteInput::read_u8(std::string_view what) {
  if (pos_ == end_ && !refill()) fail(fmt::format("truncated: the content ends here (expected {})", what));
  return static_cast<std::uint8_t>(buf_[pos_++]);
}

void ByteInput::fail_at(std::uint64_t offset, const std::string& message) const {
  throw TraceError::at_byte(path_, offset, message);
}

void ByteInput::fail_after_checking_the_rest(const TraceError& e) {
  if (gzip())
    do consume(end_ - pos_);  // (a TraceError of the gzip stream goes out from refill)
    while (refill());
  throw e;
}


}  // namespace gmb
