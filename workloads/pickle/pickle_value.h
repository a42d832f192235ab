// The values a Python pickle of plain data holds (None, bool, int, float, str, bytes, list,
// tuple, dict, set), as a tree of nodes in one arena. Shared objects (the pickle memo) are one
// node referenced twice, never copied, so a small pickle cannot expand into a huge tree. The
// items of every container share one vector too (no allocation per container: a snapshot has
// one dict per trace entry).
#pragma once

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/huge_page_allocator.h"

namespace gmb::pickle {

enum class Type : std::uint8_t { None, Bool, Int, BigInt, Float, Str, Bytes, List, Tuple, Dict, Set };
const char* type_name(Type type);  // Python's names: "NoneType", "int", "str", "list"...

// A value of a Document: a node, or (the top bit set) a small non-negative int held in the Ref
// itself. Most ints of a snapshot (sizes, streams, line numbers, memo'd indexes) are below 2^30:
// no node for them, a quarter less to parse and to keep. kAbsent (all bits set) is neither.
using Ref = std::uint32_t;

// The items of a container: a view into its Document, valid while the Document lives.
class Items {
 public:
  Items(const Ref* data, std::size_t size) : data_(data), size_(size) {}
  const Ref* begin() const { return data_; }
  const Ref* end() const { return data_ + size_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  Ref operator[](std::size_t i) const { return data_[i]; }

 private:
  const Ref* data_;
  std::size_t size_;
};

// A growable array of a trivially copyable T whose appends are a room test and a copy, inline
// at every call site: a Document's nodes (one per value) and the items of every container, end
// to end. std::vector's insert at the end is a general routine, about 60 instructions for a
// dict's dozen items, a twentieth of a snapshot's parse, and its push_back stops being inlined
// into the parser's loop as the loop grows. Room doubles as it fills; large blocks are huge
// pages (huge_page_allocator.h).
template <class T>
class HugeArray {
  static_assert(std::is_trivially_copyable_v<T>);

 public:
  HugeArray() = default;
  HugeArray(HugeArray&& o) noexcept { swap(o); }
  HugeArray& operator=(HugeArray&& o) noexcept {
    HugeArray gone(std::move(o));
    swap(gone);
    return *this;
  }
  ~HugeArray() {
    if (data_) HugePageAllocator<T>().deallocate(data_, capacity_);
  }
  const T* data() const { return data_; }
  T* data() { return data_; }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return data_[i]; }
  const T& operator[](std::size_t i) const { return data_[i]; }
  void reserve(std::size_t n) {
    if (n <= capacity_) return;
    T* p = HugePageAllocator<T>().allocate(n);
    if (size_) std::memcpy(static_cast<void*>(p), data_, size_ * sizeof(T));
    if (data_) HugePageAllocator<T>().deallocate(data_, capacity_);
    data_ = p;
    capacity_ = n;
  }
  [[gnu::always_inline]] void push_back(const T& v) {
    if (__builtin_expect(capacity_ == size_, 0)) grow(1);
    data_[size_++] = v;
  }
  void append(const T* from, std::size_t n) {
    if (capacity_ - size_ < n) grow(n);
    T* to = data_ + size_;
    std::size_t i = 0;
    if constexpr (sizeof(T) == 4)
      for (; i + 4 <= n; i += 4) std::memcpy(to + i, from + i, 4 * sizeof(T));  // one 16-byte move
    for (; i < n; ++i) to[i] = from[i];
    size_ += n;
  }
  // n more elements, not initialized: the caller writes them.
  [[gnu::always_inline]] T* extend(std::size_t n) {
    if (__builtin_expect(capacity_ - size_ < n, 0)) grow(n);
    T* p = data_ + size_;
    size_ += n;
    return p;
  }
  // The first n elements kept (n at most the size).
  [[gnu::always_inline]] void truncate(std::size_t n) {
    assert(n <= size_);
    size_ = n;
  }
  // Shrinks, or grows by zeros.
  void resize(std::size_t n) {
    if (n > size_) {
      if (n > capacity_) reserve(std::max(2 * capacity_, n));
      std::memset(static_cast<void*>(data_ + size_), 0, (n - size_) * sizeof(T));
    }
    size_ = n;
  }

 private:
  [[gnu::noinline]] void grow(std::size_t n) { reserve(std::max(2 * capacity_, size_ + n)); }
  void swap(HugeArray& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(size_, o.size_);
    std::swap(capacity_, o.capacity_);
  }
  T* data_ = nullptr;
  std::size_t size_ = 0, capacity_ = 0;
};
using RefArray = HugeArray<Ref>;

// A parsed pickle. Nodes are immutable once parsing ends.
class Document {
 public:
  Ref root() const { return root_; }
  // Small ints, 0 <= v < kImmediateLimit, are Refs of their own: kImmediate | v.
  static constexpr Ref kImmediate = Ref(1) << 31;
  static constexpr std::int64_t kImmediateLimit = std::int64_t(1) << 30;
  static bool is_immediate(Ref r) { return (r & kImmediate) && r != kAbsent; }
  Type type(Ref r) const { return is_immediate(r) ? Type::Int : nodes_[r].type; }
  bool is_int(Ref r) const { return type(r) == Type::Int || type(r) == Type::Bool; }
  // Int and Bool (Python's bool is an int). Check is_int first.
  std::int64_t as_int(Ref r) const {
    return is_immediate(r) ? static_cast<std::int64_t>(r & ~kImmediate) : static_cast<std::int64_t>(nodes_[r].payload);
  }
  double as_float(Ref r) const;
  // Str, Bytes and BigInt (little-endian two's complement bytes) contents.
  std::string_view as_bytes(Ref r) const;
  // List, Tuple, Set: the items; Dict: keys and values interleaved (k0, v0, k1, v1...).
  Items items(Ref r) const {
    assert(!is_immediate(r) && nodes_[r].type >= Type::List);  // a container: check type() first
    return Items(items_.data() + nodes_[r].payload, nodes_[r].length);
  }
  std::size_t size(Ref r) const;  // items, or pairs for a dict
  // The value of a str key in a dict (the last one where a key repeats); nullptr-like -1 when absent.
  static constexpr Ref kAbsent = UINT32_MAX;
  Ref get(Ref dict, std::string_view key) const;
  std::size_t node_count() const { return nodes_.size(); }  // Refs below it are nodes (immediates aside)
  void clear();  // frees everything

 private:
  friend class Builder;
  // A container's items are items_[payload, payload + length). While parsing, one that grows
  // past its room moves to the end of items_ with twice the room (the old place is left unused:
  // appends cost O(1) on average, and items_ stays within a few times the items); `moved` says
  // its room is larger than its items (the Builder keeps how large). `sink`: what a ListSink
  // (pickle_reader.h) did with it, bits the Builder defines (a list whose items go to the sink,
  // a container the sink has read, a list referenced a second time).
  struct Node {
    Type type;
    bool moved = false;
    std::uint8_t sink = 0;
    std::uint32_t length;   // Str/Bytes/BigInt: byte length; containers: items
    std::uint64_t payload;  // Int/Bool: the value; Float: the bits; Str/Bytes/BigInt: offset into
                            // text_; containers: offset into items_
  };
  // Filled once, tens of megabytes for a large snapshot: huge pages where the system has them.
  template <class T>
  using Store = std::vector<T, HugePageAllocator<T>>;
  HugeArray<Node> nodes_;
  RefArray items_;
  std::basic_string<char, std::char_traits<char>, HugePageAllocator<char>> text_;
  Ref root_ = 0;
};

// Where a pickle is malformed or asks for something this reader refuses: the file, the byte
// offset of the opcode at fault and what was expected. Never echoes more than a short escaped
// excerpt of the input.
struct PickleError : std::runtime_error {
  PickleError(const std::string& file, std::uint64_t offset, const std::string& message);
  std::string file;
  std::uint64_t offset;
};

// Printable ASCII as is, everything else as \xHH; at most `max_chars` input bytes, then "...".
std::string escape_excerpt(std::string_view bytes, std::size_t max_chars = 24);

}  // namespace gmb::pickle
