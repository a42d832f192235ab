// The next block of a compressed file, for the inflaters (byte_input.cpp's zlib stream,
// isal_inflate.cpp): `head`, the bytes read before to tell the format, first (head.size() <=
// room), then the file. 0 at the file's end or at a read error; std::ferror(f) tells which.
#pragma once

#include <cstdio>
#include <cstring>
#include <string>

namespace gmb {

inline std::size_t read_compressed_block(std::FILE* f, std::string& head, void* dst, std::size_t room) {
  if (!head.empty()) {
    const std::size_t n = head.size();
    std::memcpy(dst, head.data(), n);
    head.clear();
    return n;
  }
  return std::fread(dst, 1, room, f);
}

}  // namespace gmb
