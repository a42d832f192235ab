// gzip members, one after another, inflated by ISA-L (Intel's igzip, Debian's libisal-dev):
// 2.5 times as fast as zlib's stream on a snapshot's pickle (BM_GzipStream), checking each member's header
// CRC (when it has one), data CRC and length as zlib does. It says only whether all went well;
// GzipBytes (byte_input.cpp) has zlib read the file again to say what went wrong and where.
#pragma once

#include <cstddef>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

struct inflate_state;

namespace gmb {

class IsalInflate {
 public:
  // f: the file, read from where it stands; `head`: bytes already read from it, given first.
  IsalInflate(std::FILE* f, std::string head);
  ~IsalInflate();
  IsalInflate(const IsalInflate&) = delete;
  IsalInflate& operator=(const IsalInflate&) = delete;

  // Inflates up to `room` bytes at `dst` into `n` (0: the content ended, after a whole member).
  // false: trouble (damaged or truncated data, bytes after a member that start no other, a
  // read error), and nothing more is inflated; what was given before stands.
  bool produce(char* dst, std::size_t room, std::size_t& n);

 private:
  bool fill();  // more compressed bytes; false at the file's end

  std::FILE* f_;
  std::string head_;
  std::vector<unsigned char> in_;
  std::unique_ptr<inflate_state> st_;
  bool ended_ = false;
  std::uint64_t member_in_ = 0;  // compressed bytes of the present member ISA-L has taken
};

}  // namespace gmb
