#include "workloads/pickle/pickle_writer.h"

#include <cstring>
#include <stdexcept>

#include "common/text_excerpt.h"

namespace gmb::pickle {

namespace {
constexpr unsigned char kProto = 0x80, kMark = '(', kStop = '.', kEmptyDict = '}', kEmptyList = ']',
                        kSetItems = 'u', kAppends = 'e', kTuple = 't', kBinUnicode = 'X', kBinInt1 = 'K',
                        kBinInt2 = 'M', kBinInt = 'J', kLong1 = 0x8a, kBinFloat = 'G', kNewTrue = 0x88,
                        kNewFalse = 0x89, kNone = 'N', kBinPut = 'q', kLongBinPut = 'r', kBinGet = 'h',
                        kLongBinGet = 'j';
constexpr std::uint32_t kBatch = 1000;  // items per APPENDS / SETITEMS, as Python writes them
constexpr std::size_t kMemoMaxLength = 64;  // longer strings (frames' file names are) still memoized
}  // namespace

Writer::Writer(std::string& out) : out_(out) {
  op(kProto);
  op(3);
}

void Writer::le(std::uint64_t v, int n) {
  for (int i = 0; i < n; ++i) out_ += static_cast<char>((v >> (8 * i)) & 0xff);
}

void Writer::item_done() {
  if (open_.empty()) return;
  Open& o = open_.back();
  if (o.level == Level::Tuple) return;
  ++o.pending;
  // A dict flushes after whole pairs.
  const std::uint32_t limit = o.level == Level::Dict ? 2 * kBatch : kBatch;
  if (o.pending == limit) {
    op(o.level == Level::Dict ? kSetItems : kAppends);
    op(kMark);
    o.pending = 0;
  }
}

void Writer::begin_dict() {
  op(kEmptyDict);
  op(kMark);
  open_.push_back({Level::Dict});
}
void Writer::end_dict() {
  if (open_.empty() || open_.back().level != Level::Dict) throw std::logic_error("pickle writer: end_dict without begin_dict");
  if (open_.back().pending % 2) throw std::logic_error("pickle writer: a dict key without its value");
  op(kSetItems);
  open_.pop_back();
  item_done();
}
void Writer::begin_list() {
  op(kEmptyList);
  op(kMark);
  open_.push_back({Level::List});
}
void Writer::end_list() {
  if (open_.empty() || open_.back().level != Level::List) throw std::logic_error("pickle writer: end_list without begin_list");
  op(kAppends);
  open_.pop_back();
  item_done();
}
void Writer::begin_tuple() {
  op(kMark);
  open_.push_back({Level::Tuple});
}
void Writer::end_tuple() {
  if (open_.empty() || open_.back().level != Level::Tuple) throw std::logic_error("pickle writer: end_tuple without begin_tuple");
  op(kTuple);
  open_.pop_back();
  item_done();
}

void Writer::str(std::string_view s) {
  if (s.size() <= kMemoMaxLength) {
    auto it = memo_.find(std::string(s));
    if (it != memo_.end()) {
      if (it->second < 256) {
        op(kBinGet);
        le(it->second, 1);
      } else {
        op(kLongBinGet);
        le(it->second, 4);
      }
      item_done();
      return;
    }
  }
  // Python's unpickler decodes a str as UTF-8 with surrogates passed and fails on any other byte
  // that is no UTF-8, which would make the whole file unloadable: such bytes are written as U+FFFD
  // (our own readers hand on what a file holds; the exports escape frame names already).
  if (!is_well_formed_utf8(s, /*allow_surrogates=*/true)) {
    str(well_formed_utf8(s, /*allow_surrogates=*/true));
    return;
  }
  op(kBinUnicode);
  le(s.size(), 4);
  out_.append(s.data(), s.size());
  if (s.size() <= kMemoMaxLength && memo_.size() < UINT32_MAX) {
    auto index = static_cast<std::uint32_t>(memo_.size());
    memo_.emplace(std::string(s), index);
    if (index < 256) {
      op(kBinPut);
      le(index, 1);
    } else {
      op(kLongBinPut);
      le(index, 4);
    }
  }
  item_done();
}

void Writer::integer(std::int64_t v) {
  if (v >= 0 && v < 256) {
    op(kBinInt1);
    le(static_cast<std::uint64_t>(v), 1);
  } else if (v >= 0 && v < 65536) {
    op(kBinInt2);
    le(static_cast<std::uint64_t>(v), 2);
  } else if (v >= INT32_MIN && v <= INT32_MAX) {
    op(kBinInt);
    le(static_cast<std::uint32_t>(static_cast<std::int32_t>(v)), 4);
  } else {
    // LONG1: the shortest little-endian two's complement.
    auto u = static_cast<std::uint64_t>(v);
    int n = 8;
    while (n > 1) {
      auto top = static_cast<unsigned char>((u >> (8 * (n - 1))) & 0xff);
      auto next_sign = ((u >> (8 * (n - 2))) & 0x80) != 0;
      if ((top == 0x00 && !next_sign) || (top == 0xff && next_sign)) --n;
      else break;
    }
    op(kLong1);
    le(static_cast<std::uint64_t>(n), 1);
    le(u, n);
  }
  item_done();
}

void Writer::uinteger(std::uint64_t v) {
  if (v <= static_cast<std::uint64_t>(INT64_MAX)) return integer(static_cast<std::int64_t>(v));
  op(kLong1);
  le(9, 1);
  le(v, 8);
  le(0, 1);  // a positive number whose top bit is set needs a zero byte
  item_done();
}

void Writer::real(double v) {
  op(kBinFloat);
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof v);
  for (int i = 7; i >= 0; --i) out_ += static_cast<char>((bits >> (8 * i)) & 0xff);
  item_done();
}

void Writer::boolean(bool v) {
  op(v ? kNewTrue : kNewFalse);
  item_done();
}

void Writer::none() {
  op(kNone);
  item_done();
}

void Writer::finish() {
  if (!open_.empty()) throw std::logic_error("pickle writer: finish with an open container");
  op(kStop);
}

}  // namespace gmb::pickle
