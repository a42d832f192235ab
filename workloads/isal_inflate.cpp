#include "workloads/isal_inflate.h"

#include <algorithm>
#include <cstdint>

#include <isa-l/igzip_lib.h>

#include "workloads/compressed_block.h"

namespace gmb {

namespace {
constexpr std::size_t kInputBlock = std::size_t(1) << 18;  // compressed bytes read at a time
}

IsalInflate::IsalInflate(std::FILE* f, std::string head)
    : f_(f), head_(std::move(head)), in_(kInputBlock), st_(std::make_unique<inflate_state>()) {
  isal_inflate_init(st_.get());
  st_->crc_flag = ISAL_GZIP;  // header, CRC-32 and length of every member checked
}

IsalInflate::~IsalInflate() = default;

bool IsalInflate::fill() {
  const std::size_t n = read_compressed_block(f_, head_, in_.data(), in_.size());
  st_->next_in = in_.data();
  st_->avail_in = static_cast<std::uint32_t>(n);
  return n > 0;
}

bool IsalInflate::produce(char* dst, std::size_t room, std::size_t& n) {
  n = 0;
  if (ended_) return true;
  inflate_state& st = *st_;
  st.next_out = reinterpret_cast<std::uint8_t*>(dst);
  st.avail_out = static_cast<std::uint32_t>(std::min<std::size_t>(room, UINT32_MAX));
  const std::uint32_t want = st.avail_out;
  while (st.avail_out == want) {
    if (st.block_state == ISAL_BLOCK_FINISH) {  // a member ended (its trailer checked): another may follow
      if (st.avail_in == 0 && !fill()) {
        if (std::ferror(f_)) return false;
        ended_ = true;
        return true;
      }
      if (st.next_in[0] != 0x1f) return false;  // not a gzip member: zlib says what it is
      std::uint8_t* const next_in = st.next_in;
      const std::uint32_t avail_in = st.avail_in;
      isal_inflate_reset(&st);
      member_in_ = 0;
      st.crc_flag = ISAL_GZIP;
      st.next_in = next_in;
      st.avail_in = avail_in;
      continue;
    }
    // At the file's end ISA-L may still hold decoded bytes: one call with no input gives them.
    if (st.avail_in == 0 && !fill() && std::ferror(f_)) return false;
    // A member's header with a reserved FLG bit set (RFC 1952: must be refused), which ISA-L
    // reads past: zlib names it. The FLG is the member's 4th byte.
    if (member_in_ <= 3 && member_in_ + st.avail_in > 3 && (st.next_in[3 - member_in_] & 0xe0)) return false;
    const std::uint32_t in_before = st.avail_in;
    const int rc = isal_inflate(&st);
    member_in_ += in_before - st.avail_in;
    if (rc < 0) return false;
    // No input taken and no output made: the file ends inside a member, or a state this loop
    // does not know; zlib says which.
    if (st.avail_in == in_before && st.avail_out == want && st.block_state != ISAL_BLOCK_FINISH) return false;
  }
  n = want - st.avail_out;
  return true;
}

}  // namespace gmb
