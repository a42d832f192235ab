#include "workloads/pickle/pickle_reader.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <cstring>
#include <iterator>
#include <map>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

namespace gmb::pickle {

const char* type_name(Type type) {
  switch (type) {
    case Type::None: return "NoneType";
    case Type::Bool: return "bool";
    case Type::Int:
    case Type::BigInt: return "int";
    case Type::Float: return "float";
    case Type::Str: return "str";
    case Type::Bytes: return "bytes";
    case Type::List: return "list";
    case Type::Tuple: return "tuple";
    case Type::Dict: return "dict";
    case Type::Set: return "set";
  }
  return "?";
}

double Document::as_float(Ref r) const {
  double d;
  std::memcpy(&d, &nodes_[r].payload, sizeof d);
  return d;
}

std::string_view Document::as_bytes(Ref r) const {
  return std::string_view(text_).substr(nodes_[r].payload, nodes_[r].length);
}

std::size_t Document::size(Ref r) const {
  std::size_t n = items(r).size();
  return type(r) == Type::Dict ? n / 2 : n;
}

Ref Document::get(Ref dict, std::string_view key) const {
  const auto& kv = items(dict);
  for (std::size_t i = kv.size(); i >= 2; i -= 2) {
    Ref k = kv[i - 2];
    if (type(k) == Type::Str && as_bytes(k) == key) return kv[i - 1];
  }
  return kAbsent;
}

void Document::clear() {
  nodes_ = HugeArray<Node>();
  items_ = RefArray();
  decltype(text_)().swap(text_);
  root_ = 0;
}

PickleError::PickleError(const std::string& file_, std::uint64_t offset_, const std::string& message)
    : std::runtime_error(fmt::format("{}: byte {}: {}", file_, offset_, message)), file(file_), offset(offset_) {}

std::string escape_excerpt(std::string_view bytes, std::size_t max_chars) {
  std::string out;
  for (std::size_t i = 0; i < bytes.size() && i < max_chars; ++i) {
    auto c = static_cast<unsigned char>(bytes[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'') out += static_cast<char>(c);
    else out += fmt::format("\\x{:02x}", c);
  }
  if (bytes.size() > max_chars) out += "...";
  return out;
}

// The pickle machine: a value stack, a stack of marks, and the memo.
class Builder {
 public:
  // data: the bytes, or (arriving) those there so far; expected: the whole length, for sizing.
  Builder(std::string_view data, std::size_t expected, const std::string& file, ListSink* sink, ArrivingBytes* arriving)
      : in_(data), file_(file), sink_(sink), arriving_(arriving) {
    // Most opcodes of a snapshot add a node and take 2 to 10 bytes: room for the usual count up
    // front, so the node vector is not copied as it grows (still proportional to the input).
    // Items: a snapshot's are mostly memo references (2 to 5 bytes each) and small values, under
    // one per 2 bytes of input; reserved, not touched (huge_page_allocator.h maps large blocks),
    // so a vector of several MB is not copied as it grows.
    // With a sink the tree stays small (what is dropped is reused): no room up front, which
    // would be a huge page of zeros each.
    if (!sink_) {
      doc_.nodes_.reserve(expected / 8);
      doc_.items_.reserve(expected / 2);
    }
    memo_.reserve(expected / 16);  // a snapshot memoizes about one value per 36 bytes
  }

  Document run() {
    do {
      if (pos_ >= in_.size() && !arrive(pos_ + 1)) fail(pos_, "the pickle ends before its STOP opcode (truncated file?)");
      op_at_ = pos_;
    } while (step(static_cast<unsigned char>(in_[pos_++])));
    if (stack_.size() != 1 || !marks_.empty())
      fail(op_at_, fmt::format("STOP with {} values and {} marks on the stack (expected one value)", stack_.size(),
                               marks_.size()));
    arrive(SIZE_MAX);  // all of it
    if (pos_ != in_.size())
      fail(pos_, fmt::format("{} bytes after the pickle's STOP opcode: '{}'", in_.size() - pos_,
                             escape_excerpt(in_.substr(pos_))));
    doc_.root_ = stack_.back();
    return std::move(doc_);
  }

 private:
  using Node = Document::Node;

  [[noreturn]] void fail(std::uint64_t at, const std::string& message) const { throw PickleError(file_, at, message); }

  std::string_view take(std::uint64_t n) {
    if (__builtin_expect(n > in_.size() - pos_, 0)) need(n);
    auto s = in_.substr(pos_, n);
    pos_ += n;
    return s;
  }
  // n <= 8 little-endian bytes (n is a constant at every call: inlined, one load).
  [[gnu::always_inline]] std::uint64_t le(std::size_t n) {
    if (__builtin_expect(n > in_.size() - pos_, 0)) need(n);
    const std::uint64_t v = little_endian(in_.data() + pos_, n);
    pos_ += n;
    return v;
  }
  // n more bytes from pos_ on: waits for them where they are still arriving; else the error.
  [[gnu::cold, gnu::noinline]] void need(std::uint64_t n) {
    if (!have(n)) truncated(n);
  }
  bool have(std::uint64_t n) { return n <= in_.size() - pos_ || arrive(n > SIZE_MAX - pos_ ? SIZE_MAX : pos_ + n); }
  // Arriving bytes: waits until there are k (SIZE_MAX: all there will be); true when there are.
  [[gnu::cold, gnu::noinline]] bool arrive(std::size_t k) {
    if (!arriving_) return in_.size() >= k;
    arriving_->release(std::min(pos_, undo_from_));
    in_ = std::string_view(arriving_->data(), arriving_->wait_for(k));
    return in_.size() >= k;
  }
  [[noreturn, gnu::cold, gnu::noinline]] void truncated(std::uint64_t n) {
    fail(op_at_, fmt::format("the opcode needs {} more bytes but only {} are left (truncated file?)", n,
                             in_.size() - pos_));
  }
  [[gnu::always_inline]] static std::uint64_t little_endian(const char* p, std::size_t n) {
    std::uint64_t v = 0;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    std::memcpy(&v, p, n);
#else
    for (std::size_t i = 0; i < n; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
#endif
    return v;
  }
  // A protocol 0 argument: the bytes up to the next newline.
  std::string_view line() {
    auto nl = in_.find('\n', pos_);
    while (nl == std::string_view::npos) {
      const std::size_t searched = in_.size();
      if (searched - pos_ > kMaxTextBytes)
        fail(op_at_, "a text argument of more than 64 MiB without its ending newline (more than this reader takes)");
      if (!arrive(searched + 1)) fail(op_at_, "a text argument without its ending newline (truncated file?)");
      nl = in_.find('\n', searched);
    }
    auto s = in_.substr(pos_, nl - pos_);
    pos_ = nl + 1;
    return s;
  }

  [[gnu::always_inline]] Ref add(Type type, std::uint64_t payload, std::uint32_t length = 0) {
    if (__builtin_expect(doc_.nodes_.size() >= Document::kImmediate - 1, 0)) fail(op_at_, "too many values");
    doc_.nodes_.push_back(Node{type, false, 0, length, payload});
    return static_cast<Ref>(doc_.nodes_.size() - 1);
  }
  // The bytes of a str or bytes of n bytes at pos_: at most kMaxTextBytes. A snapshot's strs are
  // file and function names and short notes; a pickle's word alone would otherwise make the
  // reader hold gigabytes (the bytes in the feed, then their copy) before any other check.
  static constexpr std::uint64_t kMaxTextBytes = std::uint64_t(64) << 20;
  std::string_view take_text(std::uint64_t n, const char* what) {
    if (n > kMaxTextBytes)
      fail(op_at_, fmt::format("a {} of {} bytes: more than the 64 MiB this reader takes for one (a snapshot's strs "
                               "are file names, function names and short notes)",
                               what, n));
    return take(n);
  }
  [[gnu::always_inline]] Ref add_text(Type type, std::string_view bytes) {
    if (type == Type::Str && bytes.size() <= 8) return short_str(bytes);
    if (bytes.size() >= UINT32_MAX) fail(op_at_, "a string of 4 GiB or more");
    return store_text(type, bytes);
  }
  // A new node for bytes, appended to text_ (below 4 GiB: add_text checks).
  Ref store_text(Type type, std::string_view bytes) {
    const std::uint64_t at = doc_.text_.size();
    doc_.text_.append(bytes.data(), bytes.size());
    return add(type, at, static_cast<std::uint32_t>(bytes.size()));
  }
  // A str of at most 8 bytes: one node for every equal one met recently (a direct-mapped cache
  // of 256). Strings are values, so sharing a node changes nothing a reader sees; a snapshot
  // writes some values anew in every trace entry (compile_context 'N/A'): 450,000 nodes and
  // 7 MB less for a 450,000-entry trace.
  [[gnu::always_inline]] Ref short_str(std::string_view bytes) {
    std::uint64_t content = 0;  // the bytes and the length: equal for equal strings only
    std::memcpy(&content, bytes.data(), bytes.size());
    const auto size = static_cast<std::uint32_t>(bytes.size());
    ShortStr& slot = short_strs_[((content * 0x9E3779B97F4A7C15ull) >> 56) ^ size];
    if (slot.ref != Document::kAbsent && slot.content == content && slot.size == size) return slot.ref;
    slot = {content, size, store_text(Type::Str, bytes)};
    short_str_made_ = true;
    return slot.ref;
  }
  struct ShortStr {
    std::uint64_t content = 0;
    std::uint32_t size = 0;
    Ref ref = Document::kAbsent;
  };
  ShortStr short_strs_[256];
  bool short_str_made_ = false;  // a node made for a short str since the last drop (drop_nodes renumbers it)
  // A container holding the values stack_[from, to) (none by default).
  Ref add_container(Type type, std::size_t from = 0, std::size_t to = 0) {
    const std::uint64_t n = to - from;
    if (n > UINT32_MAX) fail(op_at_, "a container of 2^32 items or more");
    const std::uint64_t at = doc_.items_.size();
    doc_.items_.append(stack_.data() + from, n);
    return add(type, at, static_cast<std::uint32_t>(n));
  }
  // Appends stack_[from, to) to the items of container c.
  void append_items(Ref c, std::size_t from, std::size_t to) { append_items(c, stack_.data() + from, to - from); }
  // Appends values[0, n) (not in items_) to the items of container c.
  void append_items(Ref c, const Ref* values, std::uint64_t n) {
    auto& items = doc_.items_;
    Node& node = doc_.nodes_[c];
    if (sink_) {
      if (node.sink & kTaken) throw SinkRestart{};  // the sink has read it: its items are final
      if (c < lowest_target_) lowest_target_ = c;
    }
    const std::uint64_t size = node.length;
    if (size + n > UINT32_MAX) fail(op_at_, "a container of 2^32 items or more");
    const std::uint64_t room = node.moved ? room_.at(c) : size;  // items_[payload, payload + room) is c's
    if (size + n > room && node.payload + room == items.size()) {  // the last in items_: grows in place
      // Appended, not resized then copied over: no zero-fill of what is written at once.
      items.resize(node.payload + size);
      items.append(values, n);
      node.length = static_cast<std::uint32_t>(size + n);
      if (node.moved) room_.erase(c);
      node.moved = false;
      return;
    } else if (size + n > room) {  // moves to the end with twice the room
      const std::uint64_t more = std::max(size + n, 2 * room);
      const std::uint64_t at = items.size();
      items.resize(at + more);
      if (size) std::memmove(&items[at], &items[node.payload], size * sizeof(Ref));
      node.payload = at;
      // Filled exactly (the first items of a container made empty, as every list and dict of
      // a pickle is): no room to keep.
      if (node.moved && more == size + n) room_.erase(c);
      node.moved = more != size + n;
      if (node.moved) room_[c] = more;
    }
    if (n) std::memcpy(&items[node.payload + size], values, n * sizeof(Ref));
    node.length = static_cast<std::uint32_t>(size + n);
  }
  Ref add_int(std::int64_t v) {
    if (static_cast<std::uint64_t>(v) < static_cast<std::uint64_t>(Document::kImmediateLimit))
      return Document::kImmediate | static_cast<Ref>(v);
    return add(Type::Int, static_cast<std::uint64_t>(v));
  }
  Ref add_float(double d) {
    std::uint64_t bits;
    std::memcpy(&bits, &d, sizeof d);
    return add(Type::Float, bits);
  }
  // The n (1 to 8) low bytes of v as a two's complement number (the bytes above them ignored).
  static std::int64_t sign_extended(std::uint64_t v, std::size_t n) {
    const unsigned drop = static_cast<unsigned>(64 - 8 * n);
    return static_cast<std::int64_t>(v << drop) >> drop;
  }
  // LONG1/LONG4 payload: little-endian two's complement. Int when it fits in 64 bits.
  Ref add_long(std::string_view b) {
    std::size_t n = b.size();
    if (n == 0) return add_int(0);
    // Without the redundant sign bytes on top (the top byte keeps the sign bit): an Int when
    // what is left fits in 8 bytes.
    const bool negative = static_cast<unsigned char>(b[n - 1]) & 0x80;
    const char fill = negative ? '\xff' : '\x00';
    while (n > 1 && b[n - 1] == fill && ((static_cast<unsigned char>(b[n - 2]) & 0x80) != 0) == negative) --n;
    if (n <= 8) return add_int(sign_extended(little_endian(b.data(), n), n));
    return add_text(Type::BigInt, b.substr(0, n));
  }

  void push(Ref r) { stack_.push_back(r); }
  Ref pop() {
    if (stack_.size() <= base()) fail(op_at_, "the opcode needs a value but the stack is empty here");
    Ref r = stack_.back();
    stack_.pop_back();
    return r;
  }
  Ref top() {
    if (stack_.size() <= base()) fail(op_at_, "the opcode needs a value but the stack is empty here");
    return stack_.back();
  }
  std::size_t base() const { return marks_.empty() ? 0 : marks_.back(); }
  // The error of popping n - 1 values then asking for the top one, before anything is popped.
  void need_values(std::size_t n) {
    if (stack_.size() < base() + n) fail(op_at_, "the opcode needs a value but the stack is empty here");
  }
  // APPENDS, ADDITEMS, SETITEMS: the container is the value below the last mark. The errors of
  // popping the mark, then asking for the value below it; returns the mark.
  std::size_t check_container_below_mark() {
    const std::size_t m = last_mark();
    const std::size_t below = marks_.size() > 1 ? marks_[marks_.size() - 2] : 0;
    if (m <= below) fail(op_at_, "the opcode needs a value but the stack is empty here");
    return m;
  }
  // LIST, TUPLE, FROZENSET, DICT: a container of the values above the last mark.
  void mark_container(Type type) {
    const std::size_t m = last_mark();
    const Ref c = add_container(type, m, stack_.size());
    drop_mark(m);
    push(c);
  }
  // APPENDS, ADDITEMS: the values above the last mark join the container below it.
  void append_mark(Type type, const char* op_name) {
    const std::size_t m = check_container_below_mark();
    const Ref c = container(stack_[m - 1], type, type, op_name);
    if (sink_ && type == Type::List && to_sink(c, m - 1)) return sink_batch(c, m);
    append_items(c, m, stack_.size());
    drop_mark(m);
  }
  // A batch of claimed list c read flat (ListSink::takes_flat), right after its MARK: each item
  // EMPTY_DICT [its memo] MARK (key value)* SETITEMS, with keys fetched from the memo that are
  // strs and values that are ints, strs or memo fetches of no container, then the APPENDS.
  // What the general path leaves after the batch's drop is left here too: the same memo (each
  // dict's slot consumed, each str's slot its node), the same nodes for strs and ints (no dict
  // nodes, no items, no marks). At anything else (another opcode or value, the memo filled out
  // of order, bytes missing) the input and the memo go back to the MARK and the general path
  // reads the batch; strs and ints it made stay, unused until the drop.
  [[gnu::noinline]] void flat_batch(Ref c) {
    const std::size_t at = pos_, memo_at = memo_.size(), count_at = memo_count_;
    if (memo_count_ != memo_.size()) return;  // the memo filled out of order: the general path
    flat_kv_.resize(0);
    flat_ends_.resize(0);
    check_shapes();
    undo_from_ = at;
    auto undo = [&] {
      pos_ = at;
      undo_from_ = SIZE_MAX;
      memo_.resize(memo_at);
      memo_count_ = count_at;
      forget_stacks();  // (their slots may be stored anew)
    };
    for (;;) {
      int op = flat_next();
      if (op == 'e') {  // APPENDS
        op_at_ = pos_++;
        break;
      }
      if (op != '}') return undo();
      // The entry by shape, or opcode by opcode (then learned). Its memo holds kConsumed, as its
      // batch's drop would leave it.
      const std::size_t entry_at = pos_;
      Shape* s = find_shape(entry_shapes_);
      std::size_t scalars_after = 0;  // pairs read after a prefix shape's, before a list
      const bool read = s ? read_shaped(*s, kConsumed, flat_kv_.extend(2 * std::size_t{s->pairs}), true) &&
                                (!s->prefix || flat_pairs_after_mark(flat_kv_, true, &scalars_after))
                          : flat_open(kConsumed) && flat_pairs(flat_kv_, true);
      if (!read || flat_kv_.size() > UINT32_MAX) return undo();
      flat_ends_.push_back(static_cast<std::uint32_t>(flat_kv_.size()));
      if (!s) {
        learn_shape(entry_shapes_, entry_at, true);
      } else if (scalars_after && !s->tried_longer) {
        // A prefix shorter than this entry's could be (learned from an entry of another
        // layout): tried once, the longer one learned then matches first.
        s->tried_longer = true;
        learn_shape(entry_shapes_, entry_at, true);
      }
    }
    undo_from_ = SIZE_MAX;
    read_.clear();
    sink_->take_flat(doc_, c, flat_kv_.data(), flat_ends_.data(), flat_ends_.size(), read_);
    mark_taken();
    close_sink_batch(marks_.back());
  }
  // At a container's EMPTY_DICT or EMPTY_LIST: steps over it and its memo, if it has one
  // (which stores `r`).
  bool flat_open(Ref r) {
    ++pos_;
    return flat_memo_after(r);
  }
  // A dict's MARK (key value)* SETITEMS as the flat read takes them: keys fetched strs, values
  // scalars, fetched scalars or (lists: true) lists of dicts (flat_list); appended to kv.
  bool flat_pairs(RefArray& kv, bool lists) {
    if (flat_next() != '(') return false;
    ++pos_;
    return flat_pairs_after_mark(kv, lists);
  }
  // The same from a pair's key on (after the MARK, or after a prefix read by shape); counts in
  // *scalars the pairs before the first whose value is a list.
  bool flat_pairs_after_mark(RefArray& kv, bool lists, std::size_t* scalars = nullptr) {
    bool list_met = false;
    for (;;) {
      int op = flat_next();
      if (op == 'u') {  // SETITEMS
        ++pos_;
        return true;
      }
      Ref key, value;
      if (!flat_fetch(op, key) || doc_.type(key) != Type::Str) return false;
      op = flat_next();
      if (op == 'h' || op == 'j') {
        // A list fetched again: a stack PyTorch shares between entries (one traceback object).
        if (!flat_fetch(op, value) && !(lists && flat_fetched_list(value))) return false;
      } else if (op == ']' && lists) {
        if (!flat_list(value)) return false;
      } else if (!flat_scalar(op, value)) {
        return false;
      }
      list_met |= value < Document::kImmediate && doc_.nodes_[value].type == Type::List;
      if (scalars && !list_met) ++*scalars;
      kv.push_back(key);
      kv.push_back(value);
    }
  }
  // A value that is a list of dicts (a trace entry's frames): EMPTY_LIST [its memo], then no
  // item, one dict and APPEND, or MARK, dicts, APPENDS; each dict EMPTY_DICT [its memo] MARK
  // (key value)* SETITEMS with keys and values as an entry's. Made as the general path makes
  // them: the list's node, then each dict's node with its items, then the list's items.
  bool flat_list(Ref& r) {
    // The list's node is made where the general read makes it, before the dicts it holds, but
    // only once it is known not to be a stack seen before (a kept list): until then nothing else
    // is made, and its memo slot holds the number it will have.
    const Ref list = static_cast<Ref>(doc_.nodes_.size());
    const std::size_t memo_at = memo_.size();
    if (!flat_open(list)) return false;
    int op = flat_next();
    if (op == '}' || op == 'h' || op == 'j') {  // one item
      make_list(list);
      Ref d;
      if (!flat_frame(op, d) || flat_next() != 'a') return false;
      ++pos_;
      append_items(list, &d, 1);
    } else if (op == '(') {
      ++pos_;
      const std::size_t items_at = pos_;
      // A stack read before, byte for byte: its kept list, without reading a frame.
      std::uint64_t stack_hash = 0;
      const std::size_t stack_length = stack_bytes(&stack_hash);
      Ref same = seen_stack(stack_length, stack_hash);
      bool fetched_only = false;
      if (same == kNoMemo) {
        flat_items_.truncate(0);
        std::uint64_t hash = hash_start(Type::List);
        flat_fetched_dicts(&hash);
        if (flat_next() == 'e') {  // fetched frames only, the usual
          ++pos_;
          fetched_only = true;
          // A stack equal to a list kept before: that node, in the memo too, instead of a new
          // one (a value; the kept list is final).
          same = kept_list(hash, flat_items_.data(), flat_items_.size());
          if (same != kNoMemo && items_at + stack_length == pos_) remember_stack(items_at, stack_length, stack_hash, same);
        }
      }
      if (same != kNoMemo) {
        if (memo_.size() > memo_at) memo_.back() = same;
        r = same;
        return true;
      }
      make_list(list);
      if (!fetched_only) {
        for (;;) {
          op = flat_next();
          if (op == 'e') break;
          Ref d;
          if (!flat_frame(op, d)) return false;
          flat_items_.push_back(d);
          flat_fetched_dicts(nullptr);
        }
        ++pos_;
      }
      append_items(list, flat_items_.data(), flat_items_.size());
    } else {
      make_list(list);  // empty
    }
    r = list;
    return true;
  }
  void make_list([[maybe_unused]] Ref list) {
    [[maybe_unused]] const Ref made = add_container(Type::List);
    assert(made == list);  // (nothing made since its memo slot was given the number)
  }
  // A list kept by an earlier drop (final) that holds exactly items[0, count) (whose
  // items_hash is `hash`), or kNoMemo. Outside a drop every node is older than any floor.
  Ref kept_list(std::uint64_t hash, const Ref* items, std::size_t count) {
    if (kept_container_slots_.empty() || count == 0) return kNoMemo;
    const Floor outside_a_drop{0, kNoTarget, kNoTarget, 0, 0, 0};
    return find_kept_container(hash, Type::List, items, count, outside_a_drop)->ref;
  }
  // Stacks seen: the bytes of a list of fetched frames (its items' BINGETs through its APPENDS)
  // and the kept list they gave. Equal bytes parse alike, so they give the same list while the
  // memo slots they fetch and the list's node stay as they were. The slots are older than
  // every later batch (a drop renumbers only its own batch's); a memo slot stored again forgets
  // every stack (SnapshotStreaming.EntriesWithFramesConvertAsInTwoPasses, frames_stored_again).
  // Precautions a snapshot never needs (its floors only rise, and a batch read again stores
  // the same values): a stack whose node a drop renumbers is forgotten, and all at an undo.
  static constexpr std::size_t kStacksSeen = 4096, kStackBytes = 1024;
  struct StackSeen {
    std::uint64_t hash = 0;
    Ref list = kNoMemo;
    std::string bytes;
  };
  std::vector<StackSeen> stacks_seen_;
  bool any_stack_seen_ = false;
  Ref highest_stack_list_ = 0;  // no stack remembered gave a list above it (a drop below it forgets none)
  // The bytes from pos_ (after the list's MARK) through its APPENDS, where they are BINGETs and
  // LONG_BINGETs only (at most kStackBytes): their length, else 0; their hash in *hash.
  std::size_t stack_bytes(std::uint64_t* hash) const {
    if (in_.size() - pos_ < kStackBytes + kFlatRoom) return 0;
    const char* const start = in_.data() + pos_;
    const char* p = start;
    const char* const end = start + kStackBytes;
    // Every entry's stack is hashed as it is scanned, by its memo indices: each word's product
    // is off the chain from word to word (a rotate and an add). A hash only picks the slot: a
    // stack found is compared byte for byte.
    std::uint64_t h = 0;
    auto mix = [&h](std::uint64_t w) { h = ((h << 29) | (h >> 35)) + w * 0xff51afd7ed558ccdull; };
    for (;;) {  // (LONG_BINGETs four at a time: a stack's frames fetched from a memo past 256)
      while (p + 20 <= end && p[0] == 'j' && p[5] == 'j' && p[10] == 'j' && p[15] == 'j') {
        mix(little_endian(p + 1, 8));   // the first index, the second's opcode and 3 bytes of it
        mix(little_endian(p + 9, 8));   // the second's last byte, the third
        mix(little_endian(p + 16, 4));  // the fourth
        p += 20;
      }
      if (p < end && *p == 'j') {
        mix(little_endian(p + 1, 4));
        p += 5;
      } else if (p < end && *p == 'h') {
        mix(static_cast<unsigned char>(p[1]) + 0x100);
        p += 2;
      } else {
        break;
      }
    }
    if (p >= end || *p != 'e') return 0;
    const std::size_t n = static_cast<std::size_t>(p + 1 - start);
    *hash = hash_item(h ^ (n * 0x9e3779b97f4a7c15ull), 0);
    return n;
  }
  // The kept list of the stack at pos_, n bytes whose hash is `hash` (stack_bytes), if it was
  // seen (pos_ then after its APPENDS), or kNoMemo.
  Ref seen_stack(std::size_t n, std::uint64_t hash) {
    if (!any_stack_seen_ || n == 0) return kNoMemo;
    const StackSeen& seen = stacks_seen_[hash & (kStacksSeen - 1)];
    if (seen.list == kNoMemo || seen.hash != hash || seen.bytes.size() != n ||
        std::memcmp(seen.bytes.data(), in_.data() + pos_, n) != 0)
      return kNoMemo;
    pos_ += n;
    return seen.list;
  }
  // The stack of n bytes from `at` (whose hash is `hash`) gave kept list `list`.
  void remember_stack(std::size_t at, std::size_t n, std::uint64_t hash, Ref list) {
    if (stacks_seen_.empty()) stacks_seen_.resize(kStacksSeen);
    StackSeen& seen = stacks_seen_[hash & (kStacksSeen - 1)];
    seen.hash = hash;
    seen.list = list;
    seen.bytes.assign(in_.data() + at, n);
    any_stack_seen_ = true;
    highest_stack_list_ = std::max(highest_stack_list_, list);
  }
  void forget_stacks_from(Ref floor) {
    if (!any_stack_seen_ || floor > highest_stack_list_) return;  // (the usual: stacks' lists are older than a batch)
    for (StackSeen& seen : stacks_seen_)
      if (seen.list != kNoMemo && seen.list >= floor) seen.list = kNoMemo;
    highest_stack_list_ = floor ? floor - 1 : 0;
  }
  void forget_stacks() {
    if (!any_stack_seen_) return;
    for (StackSeen& seen : stacks_seen_) seen.list = kNoMemo;
    any_stack_seen_ = false;
    highest_stack_list_ = 0;
  }
  // A run of BINGET / LONG_BINGET of dicts (a stack's frames, each written once and fetched
  // after), appended to flat_items_ as flat_frame would, in one loop, and mixed into *hash (as
  // items_hash mixes them) where given: no FRAME between them and kFlatRoom bytes after each
  // (else the loop stops and flat_next goes on from there).
  void flat_fetched_dicts(std::uint64_t* hash) {
    if (in_.size() - pos_ < 2 * kFlatRoom) return;
    const char* p = in_.data() + pos_;
    const char* const end = in_.data() + in_.size() - kFlatRoom;
    const Ref* const memo = memo_.data();
    const std::size_t memo_size = memo_.size();
    const Node* const nodes = doc_.nodes_.data();
    std::uint64_t h = hash ? *hash : 0;
    static constexpr std::size_t kChunk = 64;  // room made at a time
    for (bool more = true; more;) {
      Ref* const out = flat_items_.extend(kChunk);
      std::size_t n = 0;
      for (; n < kChunk; ++n) {
        std::uint64_t index;
        std::size_t length;
        if (p >= end) break;
        if (*p == 'j') {
          index = little_endian(p + 1, 4);
          length = 5;
        } else if (*p == 'h') {
          index = static_cast<unsigned char>(p[1]);
          length = 2;
        } else {
          break;
        }
        if (index >= memo_size) break;
        const Ref r = memo[index];
        static_assert(kConsumed >= Document::kImmediate && kNoMemo >= Document::kImmediate);  // no node
        if (r >= Document::kImmediate || nodes[r].type != Type::Dict) break;
        out[n] = r;
        h = hash_item(h, r);
        p += length;
      }
      more = n == kChunk;
      flat_items_.truncate(flat_items_.size() - (kChunk - n));
    }
    if (hash) *hash = h;
    pos_ = static_cast<std::size_t>(p - in_.data());
  }
  // One frame of a flat list (op, read by flat_next): a new dict, or one fetched from the memo
  // (PyTorch makes one dict per distinct frame and the pickler writes it once).
  bool flat_frame(int op, Ref& r) {
    if (op == '}') return flat_dict(r);
    return flat_fetch_container(op, r) && doc_.nodes_[r].type == Type::Dict;
  }
  // A list fetched from the memo as a frames value: as memo_get takes it (marked shared, never
  // a claimed one: the general path restarts there).
  bool flat_fetched_list(Ref& r) { return flat_fetch_container(flat_next(), r) && take_fetched_list(r); }
  bool take_fetched_list(Ref r) {
    Node& node = doc_.nodes_[r];
    if (node.type != Type::List || (node.sink & kClaimed)) return false;
    node.sink |= kShared;
    return true;
  }
  // One dict of a flat list, at its EMPTY_DICT: by shape where it has one of frame_shapes_.
  bool flat_dict(Ref& r) {
    const std::size_t at = pos_;
    if (const Shape* s = find_shape(frame_shapes_)) {
      // Its items written in place, at the end of items_, where the general read's SETITEMS
      // puts them (nothing else is added to items_ between EMPTY_DICT and SETITEMS).
      const std::size_t n = 2 * std::size_t{s->pairs};
      const Ref dict = add(Type::Dict, doc_.items_.size(), static_cast<std::uint32_t>(n));
      if (!read_shaped(*s, dict, doc_.items_.extend(n), false)) return false;
      if (dict < lowest_target_) lowest_target_ = dict;  // as append_items notes a container that took items
      r = dict;
      return true;
    }
    const Ref dict = add_container(Type::Dict);
    flat_dict_kv_.resize(0);
    if (!flat_open(dict) || !flat_pairs(flat_dict_kv_, false)) return false;
    append_items(dict, flat_dict_kv_.data(), flat_dict_kv_.size());
    learn_shape(frame_shapes_, at, false);
    r = dict;
    return true;
  }
  // The flat reader reads an opcode only with kFlatRoom bytes after it in hand (the longest it
  // reads without a check: LONG1's 8-byte load, a SHORT_BINUNICODE and its memo), so each read
  // below needs no check of its own.
  static constexpr std::size_t kFlatRoom = 272;  // BINUNICODE: 5 + 255
  // The next opcode after any FRAMEs (their lengths checked as the general path checks them);
  // -1 where fewer than kFlatRoom bytes are left (the general path reads the end of a pickle).
  int flat_next() {
    for (;;) {
      if (__builtin_expect(in_.size() - pos_ < kFlatRoom, 0) && !arrive(pos_ + kFlatRoom)) return -1;
      const unsigned char op = static_cast<unsigned char>(in_[pos_]);
      if (op != 0x95) return op;
      const std::uint64_t n = little_endian(in_.data() + pos_ + 1, 8);
      pos_ += 9;  // (put back by the batch's undo)
      if (!have(n)) return -1;
    }
  }
  // MEMOIZE, or BINPUT / LONG_BINPUT of the next index (op, read by flat_next): stores r.
  bool flat_memoize(int op, Ref r) {
    if (!memo_next(op, in_.data() + pos_, r)) return false;
    pos_ += op == 0x94 ? 1 : op == 'q' ? 2 : 5;
    return true;
  }
  // MEMOIZE, or BINPUT / LONG_BINPUT of the next index, at `at` (op is *at): stores r; false
  // where the index is another (the memo filled out of order) or the memo is full.
  bool memo_next(int op, const char* at, Ref r) {
    if (memo_count_ != memo_.size() || memo_count_ >= UINT32_MAX - 1) return false;
    if (op == 'q' && little_endian(at + 1, 1) != memo_.size()) return false;
    if (op == 'r' && little_endian(at + 1, 4) != memo_.size()) return false;
    memo_.push_back(r);
    ++memo_count_;
    return true;
  }
  static bool is_memo_op(int op) { return op == 0x94 || op == 'q' || op == 'r'; }
  // After a value: its memo, if the next opcode is one (which stores r).
  bool flat_memo_after(Ref r) {
    const int op = flat_next();
    return !is_memo_op(op) || flat_memoize(op, r);
  }
  // BINGET / LONG_BINGET (op) of a stored slot that is no container; pos_ moves past it only
  // where it is one.
  bool flat_fetch(int op, Ref& r) {
    std::size_t length;
    if (!flat_fetched(op, r, length) || (r < Document::kImmediate && doc_.nodes_[r].type >= Type::List)) return false;
    pos_ += length;
    return true;
  }
  // The same for a slot that holds a container (a node).
  bool flat_fetch_container(int op, Ref& r) {
    std::size_t length;
    if (!flat_fetched(op, r, length) || r >= Document::kImmediate || doc_.nodes_[r].type < Type::List) return false;
    pos_ += length;
    return true;
  }
  // What the BINGET / LONG_BINGET (op) at pos_ fetches, and its length; false at another
  // opcode or a slot never stored or dropped.
  bool flat_fetched(int op, Ref& r, std::size_t& length) const {
    std::uint64_t index;
    if (op == 'h') {
      index = static_cast<unsigned char>(in_[pos_ + 1]);
      length = 2;
    } else if (op == 'j') {
      index = little_endian(in_.data() + pos_ + 1, 4);
      length = 5;
    } else {
      return false;
    }
    if (index >= memo_.size() || memo_[index] >= kConsumed) return false;
    r = memo_[index];
    return true;
  }
  // BININT1 / BININT2 / BININT / LONG1 of 8 bytes at most, or a str of 255 bytes at most with
  // its memo if it has one: made as the general path makes them.
  bool flat_scalar(int op, Ref& r) {
    op_at_ = pos_;
    const char* p = in_.data() + pos_ + 1;
    switch (op) {
      case 'K':
        r = add_int(static_cast<std::int64_t>(little_endian(p, 1)));
        pos_ += 2;
        return true;
      case 'M':
        r = add_int(static_cast<std::int64_t>(little_endian(p, 2)));
        pos_ += 3;
        return true;
      case 'J':
        r = add_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(little_endian(p, 4))));
        pos_ += 5;
        return true;
      case 0x8a: {  // LONG1
        const std::size_t n = static_cast<unsigned char>(p[0]);
        if (n < 1 || n > 8) return false;
        r = add_int(sign_extended(little_endian(p + 1, 8), n));
        pos_ += 2 + n;
        return true;
      }
      case 0x8c:    // SHORT_BINUNICODE
      case 'X': {   // BINUNICODE (protocols 2 and 3), as long as a short one at most
        const std::size_t head = op == 0x8c ? 2 : 5;
        const std::uint64_t n = op == 0x8c ? little_endian(p, 1) : little_endian(p, 4);
        if (n > 255) return false;
        r = add_text(Type::Str, std::string_view(in_.data() + pos_ + head, static_cast<std::size_t>(n)));
        pos_ += head + static_cast<std::size_t>(n);
        return flat_memo_after(r);
      }
      default: return false;
    }
  }

  // ---- Shapes: the flat read of a dict in one byte comparison -------------------------------
  // Python writes every trace entry, and every dict of its frames, with the same opcodes: the
  // same keys fetched from the same memo slots, values of the same kinds and lengths; only the
  // values' bytes differ. A dict read flat opcode by opcode is learned as a Shape: its bytes
  // with the value bytes masked out. A dict whose bytes equal a shape's outside the mask is read
  // by the shape: the same memo slots stored, the same ints and strs made in the same order, the
  // same keys and values given, as the opcode-by-opcode read (flat_pairs) would; anything else
  // is read that way. A shape never holds a FRAME, so a dict with one inside is read opcode by
  // opcode. Entries and frame dicts have a ShapeSet each. An entry's shape may be a prefix: its
  // pairs up to one the shape cannot hold (a list of frames, or bytes past kShapeBytes), the rest
  // then read opcode by opcode.
  static constexpr std::size_t kShapeBytes = 128;  // longer dicts are learned as a prefix, or not
  static constexpr int kShapeValues = 16;
  static constexpr int kShapes = 8;
  static_assert(kShapeBytes <= kFlatRoom);
  enum ShapeValue : std::uint8_t { kFetch1, kFetch4, kInt1, kInt2, kInt4, kLong1, kStr1, kStr4 };
  static constexpr std::uint8_t kNoMemoOp = 0;  // else a shape holds the memo's opcode (MEMOIZE, BINPUT, LONG_BINPUT)
  struct Shape {
    alignas(16) unsigned char bytes[kShapeBytes];  // the entry's bytes, 0 where masked
    alignas(16) unsigned char mask[kShapeBytes];   // 0xff where a byte must be equal
    std::uint32_t length = 0;                      // bytes from '}' through 'u' (or the prefix); 0: no shape
    std::uint8_t dict_memo = kNoMemoOp;
    std::uint8_t pairs = 0;
    bool prefix = false;                           // the dict goes on after `length` bytes
    bool tried_longer = false;                     // a longer prefix was learned (or tried) after it
    struct Value {
      std::uint8_t kind, at, size, memo;  // at: the opcode's offset; size: LONG1's or a str's bytes
    } values[kShapeValues];
    std::uint32_t key_slot[kShapeValues];  // the memo slots the keys are fetched from
    Ref key[kShapeValues];                 // and what they held when learned
  };
  // The shapes of one kind of dict: trace entries, or the dicts of their frames.
  struct ShapeSet {
    Shape shapes[kShapes] = {};
    int last = 0, next = 0;  // the shape that matched last; the one the next learned replaces
  };
  // Whether the entry at p (its '}', kShapeBytes readable) has shape s's bytes: 16 bytes at a
  // time (GCC's vector extension: SSE2 on x86-64, plain words elsewhere), up to its length (the
  // mask is zero from there on: a trace entry's prefix shape is about half of kShapeBytes).
  using Bytes16 = unsigned char __attribute__((vector_size(16)));
  [[gnu::always_inline]] static bool same_bytes(const Shape& s, const unsigned char* p) {
    Bytes16 diff = {};
    assert(s.length <= kShapeBytes);
    for (std::size_t i = 0; i < s.length; i += 16) {
      Bytes16 x, b, m;
      std::memcpy(&x, p + i, 16);
      std::memcpy(&b, s.bytes + i, 16);
      std::memcpy(&m, s.mask + i, 16);
      diff |= (x ^ b) & m;
    }
    std::uint64_t half[2];
    std::memcpy(half, &diff, 16);
    return (half[0] | half[1]) == 0;
  }
  // The shape of `set` that the dict at pos_ (its '}') has, or nullptr (nothing changed).
  [[gnu::always_inline]] Shape* find_shape(ShapeSet& set) {
    if (in_.size() - pos_ < kShapeBytes + kFlatRoom) return nullptr;
    const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + pos_);
    int k = set.last;
    if (!set.shapes[k].length || !same_bytes(set.shapes[k], p)) {
      k = -1;
      for (int i = 0; i < kShapes; ++i)
        if (i != set.last && set.shapes[i].length && same_bytes(set.shapes[i], p)) {
          k = i;
          break;
        }
      if (k < 0) return nullptr;
      set.last = k;
    }
    return &set.shapes[k];
  }
  // The dict at pos_, which has shape s, read: its memo stores `dict` (its node, or kConsumed
  // for a trace entry, which has none), its keys and values go to kv[0, 2 * s.pairs), pos_ to
  // after its SETITEMS. False where the opcode-by-opcode read gives up too (a value fetched
  // from a slot that holds no scalar, or with `lists` (an entry's) no list of frames; a memo
  // index out of turn).
  [[gnu::noinline]] bool read_shaped(const Shape& s, Ref dict, Ref* kv, bool lists) {
    const std::size_t at = pos_;
    const auto* p = reinterpret_cast<const unsigned char*>(in_.data() + at);
    if (s.dict_memo != kNoMemoOp && !memo_next(s.dict_memo, reinterpret_cast<const char*>(p + 1), dict)) return false;
    for (int i = 0; i < s.pairs; ++i) {
      const Shape::Value v = s.values[i];
      const unsigned char* q = p + v.at;
      const char* arg = reinterpret_cast<const char*>(q + 1);
      Ref r;
      op_at_ = at + v.at;
      switch (v.kind) {
        case kFetch1:
        case kFetch4: {
          const std::uint64_t index = v.kind == kFetch1 ? little_endian(arg, 1) : little_endian(arg, 4);
          if (index >= memo_.size() || memo_[index] >= kConsumed) return false;
          r = memo_[index];
          // A container: only an entry's list of frames fetched again, as flat_pairs takes it.
          if (r < Document::kImmediate && doc_.nodes_[r].type >= Type::List && !(lists && take_fetched_list(r)))
            return false;
          break;
        }
        case kInt1: r = add_int(static_cast<std::int64_t>(little_endian(arg, 1))); break;
        case kInt2: r = add_int(static_cast<std::int64_t>(little_endian(arg, 2))); break;
        case kInt4: r = add_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(little_endian(arg, 4)))); break;
        case kLong1: r = add_int(sign_extended(little_endian(arg + 1, 8), v.size)); break;
        default: {  // kStr1, kStr4
          const std::size_t head = v.kind == kStr1 ? 2 : 5;
          r = add_text(Type::Str, std::string_view(reinterpret_cast<const char*>(q + head), v.size));
          if (v.memo != kNoMemoOp && !memo_next(v.memo, reinterpret_cast<const char*>(q + head + v.size), r))
            return false;
        }
      }
      kv[2 * i] = s.key[i];
      kv[2 * i + 1] = r;
    }
    pos_ = at + s.length;
    return true;
  }
  // The dict in [at, pos_), just read opcode by opcode, becomes a shape of `set` (replacing the
  // oldest) unless it holds a FRAME or a container, is longer than kShapeBytes or has more than
  // kShapeValues values. With `prefix` (an entry's), the pairs before the first such one become
  // a prefix shape instead, where there is at least one.
  [[gnu::noinline]] void learn_shape(ShapeSet& set, std::size_t at, bool prefix) {
    const std::size_t length = pos_ - at;
    const auto* b = reinterpret_cast<const unsigned char*>(in_.data() + at);
    Shape t;
    const std::size_t copied = std::min(length, kShapeBytes);
    std::memcpy(t.bytes, b, copied);
    std::memset(t.bytes + copied, 0, kShapeBytes - copied);
    std::memset(t.mask, 0xff, copied);
    std::memset(t.mask + copied, 0, kShapeBytes - copied);
    std::size_t i = 1;  // after '}'
    // Every byte read below is within the dict (i < length, and i + k < length for an
    // opcode's k argument bytes: the dict was just read whole); holes only within kShapeBytes.
    auto fits = [&](std::size_t end) { return end <= length && end <= kShapeBytes; };
    auto hole = [&](std::size_t from, std::size_t n) {
      std::memset(t.mask + from, 0, n);
      std::memset(t.bytes + from, 0, n);
    };
    auto memo_op = [&](std::uint8_t& op) {  // its index, if it has one, is a hole (memo_next checks it)
      op = i < length && is_memo_op(b[i]) ? b[i] : kNoMemoOp;
      const std::size_t index_bytes = op == 'q' ? 1 : op == 'r' ? 4 : 0;
      if (op == kNoMemoOp) return true;
      if (!fits(i + 1 + index_bytes)) return false;
      hole(i + 1, index_bytes);
      i += 1 + index_bytes;
      return true;
    };
    if (!memo_op(t.dict_memo) || i >= length || b[i] != '(') return;
    ++i;
    int n = 0;
    // The pairs before pair_at, n of them, as a prefix shape (mask and bytes cleared from there).
    auto learn_prefix = [&](std::size_t pair_at) {
      if (!prefix || n == 0 || pair_at > kShapeBytes) return;
      std::memset(t.mask + pair_at, 0, kShapeBytes - pair_at);
      std::memset(t.bytes + pair_at, 0, kShapeBytes - pair_at);
      t.length = static_cast<std::uint32_t>(pair_at);
      t.pairs = static_cast<std::uint8_t>(n);
      t.prefix = true;
      add_shape(set, t);
    };
    while (i < length && b[i] != 'u') {
      const std::size_t pair_at = i;
      if (n == kShapeValues) return learn_prefix(pair_at);
      std::uint64_t slot;
      if (b[i] == 'h' && fits(i + 2)) {
        slot = b[i + 1];
        i += 2;
      } else if (b[i] == 'j' && fits(i + 5)) {
        slot = little_endian(reinterpret_cast<const char*>(b + i + 1), 4);
        i += 5;
      } else {
        return b[i] == 0x95 ? void() : learn_prefix(pair_at);  // (at a FRAME, as below)
      }
      if (slot >= memo_.size()) return;
      t.key_slot[n] = static_cast<std::uint32_t>(slot);
      t.key[n] = memo_[slot];
      Shape::Value& v = t.values[n];
      v = {kFetch1, static_cast<std::uint8_t>(i), 0, kNoMemoOp};
      // The value's opcode and its argument bytes (k past the opcode), if they fit.
      auto arg = [&](std::size_t k) { return i + 1 + k <= length && fits(i + 1 + k); };
      switch (b[i]) {
        case 'h': if (!arg(1)) return learn_prefix(pair_at); v.kind = kFetch1; hole(i + 1, 1); i += 2; break;
        case 'j': if (!arg(4)) return learn_prefix(pair_at); v.kind = kFetch4; hole(i + 1, 4); i += 5; break;
        case 'K': if (!arg(1)) return learn_prefix(pair_at); v.kind = kInt1; hole(i + 1, 1); i += 2; break;
        case 'M': if (!arg(2)) return learn_prefix(pair_at); v.kind = kInt2; hole(i + 1, 2); i += 3; break;
        case 'J': if (!arg(4)) return learn_prefix(pair_at); v.kind = kInt4; hole(i + 1, 4); i += 5; break;
        case 0x8a:
          if (!arg(1) || !arg(1 + std::size_t{b[i + 1]})) return learn_prefix(pair_at);
          v.kind = kLong1;
          v.size = b[i + 1];
          hole(i + 2, v.size);
          i += 2 + v.size;
          break;
        case 0x8c:
        case 'X': {
          const std::size_t head = b[i] == 0x8c ? 2 : 5;
          if (!arg(head - 1)) return learn_prefix(pair_at);
          const std::uint64_t size = b[i] == 0x8c ? b[i + 1] : little_endian(reinterpret_cast<const char*>(b + i + 1), 4);
          if (size > 255 || !arg(head - 1 + static_cast<std::size_t>(size))) return learn_prefix(pair_at);
          v.kind = b[i] == 0x8c ? kStr1 : kStr4;
          v.size = static_cast<std::uint8_t>(size);
          hole(i + head, v.size);
          i += head + v.size;
          if (!memo_op(v.memo)) return learn_prefix(pair_at);
          break;
        }
        case 0x95: return;  // a FRAME (one in 64 KiB): the next entry learns
        default: return learn_prefix(pair_at);  // a container, or what the flat read does not take
      }
      ++n;
    }
    if (i + 1 != length || b[i] != 'u' || !fits(length)) return learn_prefix(i);
    t.length = static_cast<std::uint32_t>(length);
    t.pairs = static_cast<std::uint8_t>(n);
    add_shape(set, t);
  }
  void add_shape(ShapeSet& set, const Shape& t) {
    set.shapes[set.next] = t;
    set.last = set.next;
    set.next = (set.next + 1) % kShapes;
  }
  // At a flat batch's start: a shape whose key slots no longer hold its keys (the memo stored
  // again, or renumbered by a drop) is forgotten.
  void check_shapes() {
    for (ShapeSet* set : {&entry_shapes_, &frame_shapes_})
      for (Shape& s : set->shapes)
        for (int i = 0; i < s.pairs && s.length; ++i)
          if (s.key_slot[i] >= memo_.size() || memo_[s.key_slot[i]] != s.key[i]) s.length = 0;
  }

  // The values above mark m, to the sink as items of list c; then what was made for them dropped.
  [[gnu::noinline]] void sink_batch(Ref c, std::size_t m) {
    give(c, m, stack_.size() - m);
    close_sink_batch(m);
  }
  // A batch the sink took ends at its mark m: the mark goes, and what was made since it is
  // dropped where that is safe (no older container took a newer value, the memo in order).
  void close_sink_batch(std::size_t m) {
    if (arriving_) arriving_->release(pos_);  // the batch's bytes are read for good
    if (!has_floor()) return drop_mark(m);  // (the mark was above a list when made: it has one)
    const Floor f = floors_.back();
    const bool clean = lowest_target_ >= f.nodes;
    drop_mark(m);
    if (clean && !memo_irregular_) drop_nodes(f);
  }
  // The values above the last mark are stack_[mark, stack_.size()); the caller uses them, then
  // drops them and the mark (drop_mark).
  std::size_t last_mark() {
    if (marks_.empty()) fail(op_at_, "the opcode needs a MARK but there is none");
    return marks_.back();
  }
  void drop_mark(std::size_t m) {
    if (sink_ && has_floor()) {
      lowest_target_ = std::min(lowest_target_, floors_.back().lowest_target);
      floors_.pop_back();
    }
    marks_.pop_back();
    stack_.resize(m);
  }
  // With a sink, a mark above a list (the one APPENDS would fill) keeps a Floor.
  void push_mark() {
    marks_.push_back(stack_.size());
    if (sink_ && !stack_.empty() && stack_.back() < Document::kImmediate &&
        doc_.nodes_[stack_.back()].type == Type::List)
      push_floor();
  }
  [[gnu::noinline]] void push_floor() {
    floors_.push_back(Floor{marks_.size() - 1, static_cast<Ref>(doc_.nodes_.size()), lowest_target_,
                            doc_.items_.size(), doc_.text_.size(), memo_.size()});
    lowest_target_ = kNoTarget;
  }
  bool has_floor() const { return !floors_.empty() && floors_.back().mark == marks_.size() - 1; }

  // With a sink. Lists whose items it takes are `claimed` (their node says so). What the
  // Document holds at a mark: after a batch the sink took, everything made since is dropped.
  struct Floor {
    std::size_t mark;   // its index in marks_
    Ref nodes;
    Ref lowest_target;  // the lowest-numbered container that took items between the floor before and this mark
    std::uint64_t items, text, memo;
  };
  static constexpr Ref kNoTarget = UINT32_MAX;
  // Node::sink bits. kClaimed: a list whose items go to the sink. kTaken: a container the sink
  // has read (its items are final). kShared: a list fetched from the memo or DUP'd, so maybe in
  // two places: never claimed, since the sink takes items one place would show.
  // kEntry: an item the sink was given (a trace entry), never kept by a drop. kKept: a node
  // a drop kept (its payload is then the kept node's number).
  static constexpr std::uint8_t kClaimed = 1, kTaken = 2, kShared = 4, kEntry = 8, kKept = 16;
  bool claimed(Ref r) const { return r < Document::kImmediate && (doc_.nodes_[r].sink & kClaimed); }
  // A value fetched again (memo, DUP): a claimed list so fetched restarts, another list is marked.
  void fetched_again(Ref r) {
    if (r >= Document::kImmediate) return;
    Node& node = doc_.nodes_[r];
    if (node.type != Type::List) return;
    if (node.sink & kClaimed) throw SinkRestart{};
    node.sink |= kShared;
  }
  // True: list c (at stack_[p]) is the sink's, now or from before. A list is claimed when it is
  // empty, referenced once (Python's pickler fills a list where it first meets it, so the list
  // of a device is never fetched again before its items), and never read by the sink.
  [[gnu::noinline]] bool to_sink(Ref c, std::size_t p) {
    Node& node = doc_.nodes_[c];
    if (node.sink & kClaimed) return true;
    if (node.length != 0 || (node.sink & (kTaken | kShared)) || claims_ >= kMaxClaims ||
        !sink_->claim(doc_, stack_.data(), stack_.size(), p, marks_.data(), marks_.size()))
      return false;
    node.sink |= kClaimed;
    ++claims_;
    return true;
  }
  static constexpr int kMaxClaims = 64;  // a snapshot has one list per device
  // Hands stack_[from, from + n) to the sink as items of list c. The containers it read are
  // marked `taken`: a later append to one restarts the parse without the sink.
  [[gnu::noinline]] void give(Ref c, std::size_t from, std::size_t n) {
    read_.clear();
    sink_->take(doc_, c, stack_.data() + from, n, read_);
    mark_taken();
    for (std::size_t i = from; i < from + n; ++i)
      if (stack_[i] < doc_.nodes_.size()) doc_.nodes_[stack_[i]].sink |= kEntry;
  }
  void mark_taken() {
    for (Ref r : read_)
      if (r < doc_.nodes_.size()) doc_.nodes_[r].sink |= kTaken;
  }
  // Drops the nodes, items and text made since the mark of floor f. The memo's later slots
  // name the only ones that can be used again: a str, bytes or number among them is kept (moved
  // down, in memo order), a container is gone (kConsumed: a BINGET of it restarts the parse).
  // Callers check first that no container older than the mark took a newer value, and that the
  // memo was filled in order (so no slot before f.memo names a newer node).
  [[gnu::noinline]] void drop_nodes(const Floor& f) {
    auto& nodes = doc_.nodes_;
    const Ref floor = f.nodes;
    kept_nodes_.clear();
    kept_text_.clear();
    kept_items_.clear();
    // (Most slots name an older value or none: tested here, not in a call each.)
    for (std::size_t i = f.memo; i < memo_.size(); ++i)
      if (const Ref r = memo_[i]; r >= floor && r < Document::kImmediate) memo_[i] = keep(r, f, kKeepDepth);
    if (short_str_made_)  // (slots made before the last drop name nodes below every later floor)
      for (ShortStr& s : short_strs_)
        if (s.ref != Document::kAbsent && s.ref >= floor)
          s.ref = (nodes[s.ref].sink & kKept) ? static_cast<Ref>(nodes[s.ref].payload) : Document::kAbsent;
    short_str_made_ = false;
    nodes.resize(floor);
    nodes.append(kept_nodes_.data(), kept_nodes_.size());
    doc_.text_.resize(f.text);
    doc_.text_.append(kept_text_);
    doc_.items_.resize(f.items);
    if (!kept_items_.empty()) doc_.items_.append(kept_items_.data(), kept_items_.size());
    room_.erase(room_.lower_bound(floor), room_.end());
    forget_stacks_from(floor);
    sink_->nodes_dropped(floor);
  }
  // Value r, which a memo slot names, as it is numbered after the drop of floor f: older
  // values and immediates as they are; a str, bytes or number made since the floor kept (moved
  // down: kept_nodes_, kept_text_); a container made since kept with what it holds where that
  // is `depth` levels of containers at most, else kConsumed (a BINGET of it restarts the
  // parse). PyTorch writes each distinct stack frame (a dict) once and fetches it from the memo
  // in every later entry with that frame; dropped, the first such fetch would start the parse
  // over without the sink, building the whole pickle's tree. A container the sink was given as
  // an item (a trace entry) or claimed, or one kept beyond kMaxKeptContainers, is not kept.
  Ref keep(Ref r, const Floor& f, int depth) {
    const Ref floor = f.nodes;
    if (r < floor || r >= Document::kImmediate) return r;  // older, an immediate, or none
    Node& n = doc_.nodes_[r];
    if (n.sink & kKept) return static_cast<Ref>(n.payload);  // kept already: payload is its new number
    if (n.type >= Type::List) {
      if (depth == 0 || (n.sink & (kClaimed | kEntry)) || kept_containers_ >= kMaxKeptContainers) return kConsumed;
      // Its items kept first (their new numbers), gathered before they are appended: a kept
      // child appends its own items to kept_items_. Items all older than the floor (a stack of
      // frames fetched from the memo, the usual) keep their numbers: read in place.
      const Ref* items = doc_.items_.data() + n.payload;
      const std::size_t count = n.length;
      // (An item made since the floor is in [floor, kImmediate): one unsigned comparison each.)
      const Ref newer_span = Document::kImmediate - floor;
      bool newer = false;
      for (std::size_t i = 0; i < count; ++i) newer |= static_cast<Ref>(items[i] - floor) < newer_span;
      if (newer) {
        std::vector<Ref>& copy = keep_scratch_[static_cast<std::size_t>(depth)];
        copy.assign(items, items + count);
        for (Ref& item : copy)
          if ((item = keep(item, f, depth - 1)) == kConsumed) return kConsumed;
        items = copy.data();
      }
      // One node per value here too: the fresh dicts and lists of equal frames and stacks
      // become one each (a container kept is never changed: an append to it restarts).
      const std::uint64_t hash = items_hash(n.type, items, count);
      KeptContainer* slot = find_kept_container(hash, n.type, items, count, f);
      if (slot->ref != kNoMemo) {
        n.sink |= kKept;
        n.payload = slot->ref;
        return slot->ref;
      }
      *slot = {hash, static_cast<Ref>(floor + kept_nodes_.size())};
      if (++kept_container_slots_used_ * 2 > kept_container_slots_.size()) grow_kept_containers();
      Node k = n;
      k.moved = false;  // (a container's `moved` says it has room; a kept one has none)
      k.sink = kTaken;  // its items are final: an append to it restarts the parse
      k.payload = f.items + kept_items_.size();
      kept_items_.insert(kept_items_.end(), items, items + count);
      ++kept_containers_;
      return mark_kept(n, k, floor);
    }
    Node k = n;
    if (n.type == Type::Str || n.type == Type::Bytes || n.type == Type::BigInt) {
      // One node per value: PyTorch makes a new Python str for every frame's filename and
      // name, and the pickler memoizes each, so a trace with stacks would keep its every
      // frame's text (the pickle's length, again) where it needs the few distinct ones.
      kept_key_.assign(1, static_cast<char>(n.type));
      kept_key_.append(doc_.text_.data() + n.payload, n.length);
      auto [at, added] = kept_by_value_.try_emplace(kept_key_, kNoMemo);
      if (!added && holds_kept(at->second, kept_key_, f)) {
        n.sink |= kKept;
        n.payload = at->second;
        return at->second;
      }
      at->second = static_cast<Ref>(floor + kept_nodes_.size());
      k.payload = f.text + kept_text_.size();
      kept_text_.append(doc_.text_.data() + n.payload, n.length);
    }
    return mark_kept(n, k, floor);
  }
  // Node n (made since the floor) kept as k: k's new number, which n's payload now holds.
  Ref mark_kept(Node& n, const Node& k, Ref floor) {
    n.sink |= kKept;
    n.payload = floor + kept_nodes_.size();
    kept_nodes_.push_back(k);
    return static_cast<Ref>(n.payload);
  }
  // Kept containers by value: an open-addressing table of (hash of type and items, node).
  // A slot whose node no longer holds that value (dropped by a lower floor since) is passed
  // over; at most kMaxKeptContainers are ever added.
  struct KeptContainer {
    std::uint64_t hash = 0;
    Ref ref = kNoMemo;
  };
  static std::uint64_t items_hash(Type type, const Ref* items, std::size_t count) {
    std::uint64_t h = hash_start(type);
    for (std::size_t i = 0; i < count; ++i) h = hash_item(h, items[i]);
    return h;
  }
  static std::uint64_t hash_start(Type type) { return 0x9e3779b97f4a7c15ull * (static_cast<std::uint64_t>(type) + 1); }
  [[gnu::always_inline]] static std::uint64_t hash_item(std::uint64_t h, Ref item) {
    h = (h ^ item) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 32);
  }
  // The slot holding this value, or the empty slot where it goes.
  KeptContainer* find_kept_container(std::uint64_t hash, Type type, const Ref* items, std::size_t count, const Floor& f) {
    if (kept_container_slots_.empty()) kept_container_slots_.resize(1024);
    const std::size_t mask = kept_container_slots_.size() - 1;
    for (std::size_t i = hash & mask;; i = (i + 1) & mask) {
      KeptContainer& slot = kept_container_slots_[i];
      if (slot.ref == kNoMemo || (slot.hash == hash && holds_kept_items(slot.ref, type, items, count, f))) return &slot;
    }
  }
  void grow_kept_containers() {
    std::vector<KeptContainer> old(kept_container_slots_.size() * 2);
    old.swap(kept_container_slots_);
    const std::size_t mask = kept_container_slots_.size() - 1;
    for (const KeptContainer& k : old) {
      if (k.ref == kNoMemo) continue;
      std::size_t i = k.hash & mask;
      while (kept_container_slots_[i].ref != kNoMemo) i = (i + 1) & mask;
      kept_container_slots_[i] = k;
    }
  }
  // True where node r, a kept container (below this floor or kept by this drop), still holds
  // exactly `items` as a container of this type.
  bool holds_kept_items(Ref r, Type type, const Ref* items, std::size_t count, const Floor& f) const {
    const auto [node, at] = kept_node(r, f, doc_.items_, kept_items_, f.items);
    return node && node->type == type && node->length == count && (node->sink & kTaken) &&
           (count == 0 || std::memcmp(at, items, count * sizeof(Ref)) == 0);  // (no null to memcmp)
  }
  // True where node r, kept by an earlier drop (below this floor) or by this one, still holds
  // the value `key` (its type's byte, then its text): a later floor may lie below an earlier
  // one (a second device's list), and then what that drop kept was dropped since.
  bool holds_kept(Ref r, std::string_view key, const Floor& f) const {
    const std::string_view text = key.substr(1);
    const auto [node, at] = kept_node(r, f, doc_.text_, kept_text_, f.text);
    return node && static_cast<char>(node->type) == key[0] && node->length == text.size() &&
           std::memcmp(at, text.data(), text.size()) == 0;
  }
  // Node r as the drop of floor f numbers it, and where its payload starts: below the floor the
  // Document's node, its payload in `older` (items_ or text_); from the floor on the node this
  // drop keeps, its payload in `kept` (kept_items_ or kept_text_, which start at the floor's
  // `kept_from`). {nullptr, nullptr} where r names no such node or its payload lies outside.
  template <class Older, class Kept>
  auto kept_node(Ref r, const Floor& f, const Older& older, const Kept& kept, std::uint64_t kept_from) const
      -> std::pair<const Node*, decltype(kept.data())> {
    if (r < f.nodes) {
      if (r >= doc_.nodes_.size()) return {nullptr, nullptr};
      const Node* node = &doc_.nodes_[r];
      if (node->payload + node->length > older.size()) return {nullptr, nullptr};
      return {node, older.data() + node->payload};
    }
    if (r - f.nodes >= kept_nodes_.size()) return {nullptr, nullptr};
    const Node* node = &kept_nodes_[r - f.nodes];
    return {node, kept.data() + (node->payload - kept_from)};
  }
  // Container r, which must be of type want1 or want2.
  Ref container(Ref r, Type want1, Type want2, const char* op_name) {
    Type t = doc_.type(r);
    if (t != want1 && t != want2)
      fail(op_at_, fmt::format("{} applies to a {}, found a {}", op_name, type_name(want1), type_name(t)));
    return r;
  }

  // The memo is a vector: Python numbers it 0, 1, 2... An index may skip ahead, but never past
  // the input's length, so the vector stays within four bytes per input byte.
  void memo_put(std::uint64_t index) {
    if (index > UINT32_MAX - 1 || (index >= in_.size() && !arrive(index + 1)))
      fail(op_at_, fmt::format("memo index {} is larger than the pickle", index));
    if (sink_) {
      if (claimed(top())) throw SinkRestart{};
      if (index < memo_.size()) {  // a slot filled late or again
        memo_irregular_ = true;
        forget_stacks();
      }
    }
    if (index == memo_.size()) memo_.push_back(kNoMemo);  // the usual: the next index
    else if (index > memo_.size()) memo_.resize(index + 1, kNoMemo);
    if (memo_[index] == kNoMemo) ++memo_count_;
    memo_[index] = top();
  }
  void memo_get(std::uint64_t index) {
    if (__builtin_expect(index >= memo_.size() || memo_[index] >= kConsumed, 0)) {
      if (index < memo_.size() && memo_[index] == kConsumed) throw SinkRestart{};
      fail(op_at_, fmt::format("memo index {} was never stored", index));
    }
    if (sink_) fetched_again(memo_[index]);
    push(memo_[index]);
  }
  std::uint64_t decimal(std::string_view s, const char* what) {
    std::uint64_t v = 0;
    if (s.empty() || s.size() > 19) fail(op_at_, fmt::format("{} '{}' is not a decimal number", what, escape_excerpt(s)));
    for (char c : s) {
      if (c < '0' || c > '9') fail(op_at_, fmt::format("{} '{}' is not a decimal number", what, escape_excerpt(s)));
      v = v * 10 + static_cast<std::uint64_t>(c - '0');
    }
    return v;
  }
  // Protocol 0 INT/LONG text: optional sign, digits, (LONG) an optional trailing 'L'.
  Ref text_int(std::string_view s, bool is_long) {
    if (is_long && !s.empty() && s.back() == 'L') s.remove_suffix(1);
    if (!is_long && s == "00") return add(Type::Bool, 0);
    if (!is_long && s == "01") return add(Type::Bool, 1);
    bool neg = !s.empty() && (s[0] == '-' || s[0] == '+') ? s[0] == '-' : false;
    std::string_view digits = !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string_view::npos)
      fail(op_at_, fmt::format("integer '{}' is not a decimal number", escape_excerpt(s)));
    while (digits.size() > 1 && digits[0] == '0') digits.remove_prefix(1);
    if (digits.size() <= 18) {
      std::int64_t v = 0;
      for (char c : digits) v = v * 10 + (c - '0');
      return add_int(neg ? -v : v);
    }
    // Larger: little-endian two's complement bytes (the LONG1 form), Int when they fit. The
    // conversion is quadratic: bounded, as Python bounds it (sys.int_info.default_max_str_digits).
    if (digits.size() > 4300) fail(op_at_, fmt::format("an integer of {} decimal digits (at most 4300)", digits.size()));
    std::string mag;  // magnitude, little-endian base 256
    for (char c : digits) {
      unsigned carry = static_cast<unsigned>(c - '0');
      for (auto& byte : mag) {
        unsigned v = static_cast<unsigned char>(byte) * 10u + carry;
        byte = static_cast<char>(v & 0xff);
        carry = v >> 8;
      }
      while (carry) {
        mag += static_cast<char>(carry & 0xff);
        carry >>= 8;
      }
    }
    mag += '\0';  // room for the sign bit
    if (neg) {
      unsigned carry = 1;
      for (auto& byte : mag) {
        unsigned v = (~static_cast<unsigned char>(byte) & 0xffu) + carry;
        byte = static_cast<char>(v & 0xff);
        carry = v >> 8;
      }
    }
    return add_long(mag);
  }
  static void put_utf8(std::string& out, std::uint32_t cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xc0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xe0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    } else {
      out += static_cast<char>(0xf0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
      out += static_cast<char>(0x80 | (cp & 0x3f));
    }
  }
  std::uint32_t hex(std::string_view s) {
    std::uint32_t v = 0;
    for (char c : s) {
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) fail(op_at_, fmt::format("bad hex escape '{}'", escape_excerpt(s)));
      v = v * 16 + static_cast<std::uint32_t>(d);
    }
    return v;
  }
  // UNICODE (protocol 0): raw-unicode-escape, latin-1 bytes with \uXXXX and \UXXXXXXXX.
  std::string raw_unicode_escape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size() && (s[i + 1] == 'u' || s[i + 1] == 'U')) {
        std::size_t n = s[i + 1] == 'u' ? 4 : 8;
        if (i + 2 + n > s.size()) fail(op_at_, "a \\u escape cut short in a UNICODE string");
        std::uint32_t cp = hex(s.substr(i + 2, n));
        if (cp > 0x10ffff) fail(op_at_, "a \\U escape beyond U+10FFFF");
        put_utf8(out, cp);
        i += 1 + n;
      } else {
        put_utf8(out, static_cast<unsigned char>(s[i]));
      }
    }
    return out;
  }
  // STRING (protocol 0): a quoted Python bytes repr.
  std::string quoted_string(std::string_view s) {
    if (s.size() < 2 || (s[0] != '\'' && s[0] != '"') || s.back() != s[0])
      fail(op_at_, fmt::format("STRING argument '{}' is not quoted", escape_excerpt(s)));
    s = s.substr(1, s.size() - 2);
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] != '\\') {
        out += s[i];
        continue;
      }
      if (++i >= s.size()) fail(op_at_, "STRING ends with a lone backslash");
      switch (s[i]) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '0': out += '\0'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'x':
          if (i + 2 >= s.size()) fail(op_at_, "a \\x escape cut short in a STRING");
          out += static_cast<char>(hex(s.substr(i + 1, 2)));
          i += 2;
          break;
        default: fail(op_at_, fmt::format("unsupported escape '\\{}' in a STRING", escape_excerpt(s.substr(i, 1))));
      }
    }
    return out;
  }
  Ref mark_tuple(std::size_t n) {
    if (stack_.size() < base() + n) fail(op_at_, fmt::format("TUPLE{} needs {} values on the stack", n, n));
    const std::size_t from = stack_.size() - n;
    const Ref t = add_container(Type::Tuple, from, stack_.size());
    stack_.resize(from);
    return t;
  }

  [[noreturn]] void refuse(const char* name, unsigned char op) {
    fail(op_at_, fmt::format("opcode {} ('{}') is refused: it would create Python objects or run Python code, "
                             "which a memory snapshot never needs (only plain dicts, lists, tuples, str, bytes, "
                             "int, float, bool and None are read)",
                             name, escape_excerpt(std::string_view(reinterpret_cast<const char*>(&op), 1))));
  }

  // One opcode; false at STOP.
  [[gnu::always_inline]] bool step(unsigned char op) {  // one call site: the loop in run()
    switch (op) {
      case '.': return false;  // STOP
      // Framing and protocol.
      case 0x80: {  // PROTO
        auto v = le(1);
        if (v > 5) fail(op_at_, fmt::format("pickle protocol {} (this reader knows protocols 0 to 5)", v));
        return true;
      }
      case 0x95: {  // FRAME: the length of the next frame; checked, then ignored
        auto n = le(8);
        if (!have(n)) fail(op_at_, fmt::format("FRAME of {} bytes but only {} are left (truncated file?)", n, in_.size() - pos_));
        return true;
      }
      // Marks and stack.
      case '(':  // MARK
        push_mark();
        if (flat_ && has_floor() && claimed(stack_[marks_.back() - 1])) flat_batch(stack_[marks_.back() - 1]);
        return true;
      case '0': pop(); return true;                            // POP
      case '1': drop_mark(last_mark()); return true;           // POP_MARK
      case '2':                                                // DUP
        if (sink_) fetched_again(top());
        push(top());
        return true;
      // Constants and numbers.
      case 'N': push(add(Type::None, 0)); return true;
      case 0x88: push(add(Type::Bool, 1)); return true;  // NEWTRUE
      case 0x89: push(add(Type::Bool, 0)); return true;  // NEWFALSE
      case 'K': push(add_int(static_cast<std::int64_t>(le(1)))); return true;  // BININT1
      case 'M': push(add_int(static_cast<std::int64_t>(le(2)))); return true;  // BININT2
      case 'J': push(add_int(static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4))))); return true;  // BININT
      case 0x8a: {  // LONG1
        const std::uint64_t n = le(1);
        // The common case (addresses, times): 1 to 8 bytes, read as one 8-byte load where the
        // input has 8 bytes left (it has: the STOP opcode at least follows), sign-extended.
        if (n - 1 < 8 && in_.size() - pos_ >= 8) {
          const std::int64_t v = sign_extended(little_endian(in_.data() + pos_, 8), n);
          pos_ += n;
          push(add_int(v));
          return true;
        }
        push(add_long(take(n)));
        return true;
      }
      case 0x8b: {                                     // LONG4
        auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)));
        if (n < 0) fail(op_at_, "LONG4 with a negative length");
        push(add_long(take(static_cast<std::uint64_t>(n))));
        return true;
      }
      case 'I': push(text_int(line(), false)); return true;  // INT
      case 'L': push(text_int(line(), true)); return true;   // LONG
      case 'G': {                                       // BINFLOAT: big-endian double
        auto s = take(8);
        std::uint64_t bits = 0;
        for (char c : s) bits = (bits << 8) | static_cast<unsigned char>(c);
        double d;
        std::memcpy(&d, &bits, sizeof d);
        push(add_float(d));
        return true;
      }
      case 'F': {  // FLOAT (text)
        std::string s(line());
        char* end = nullptr;
        double d = std::strtod(s.c_str(), &end);
        if (s.empty() || end != s.c_str() + s.size())
          fail(op_at_, fmt::format("FLOAT '{}' is not a number", escape_excerpt(s)));
        push(add_float(d));
        return true;
      }
      // Strings and bytes.
      case 0x8c: push(add_text(Type::Str, take(le(1)))); return true;  // SHORT_BINUNICODE
      case 'X': push(add_text(Type::Str, take_text(le(4), "str"))); return true;   // BINUNICODE
      case 0x8d: push(add_text(Type::Str, take_text(le(8), "str"))); return true;  // BINUNICODE8
      case 'V': push(add_text(Type::Str, raw_unicode_escape(line()))); return true;  // UNICODE
      case 'U': push(add_text(Type::Str, take(le(1)))); return true;   // SHORT_BINSTRING (py2 str)
      case 'T': {                                                 // BINSTRING
        auto n = static_cast<std::int32_t>(static_cast<std::uint32_t>(le(4)));
        if (n < 0) fail(op_at_, "BINSTRING with a negative length");
        push(add_text(Type::Str, take_text(static_cast<std::uint64_t>(n), "str")));
        return true;
      }
      case 'S': push(add_text(Type::Str, quoted_string(line()))); return true;  // STRING
      case 'C': push(add_text(Type::Bytes, take(le(1)))); return true;          // SHORT_BINBYTES
      case 'B': push(add_text(Type::Bytes, take_text(le(4), "bytes"))); return true;          // BINBYTES
      case 0x8e: push(add_text(Type::Bytes, take_text(le(8), "bytes"))); return true;         // BINBYTES8
      case 0x96: push(add_text(Type::Bytes, take_text(le(8), "bytearray"))); return true;         // BYTEARRAY8
      // Containers.
      case ']': push(add_container(Type::List)); return true;   // EMPTY_LIST
      case '}': push(add_container(Type::Dict)); return true;   // EMPTY_DICT
      case ')': push(add_container(Type::Tuple)); return true;  // EMPTY_TUPLE
      case 0x8f: push(add_container(Type::Set)); return true;   // EMPTY_SET
      case 'l': mark_container(Type::List); return true;   // LIST
      case 't': mark_container(Type::Tuple); return true;  // TUPLE
      case 0x91: mark_container(Type::Set); return true;   // FROZENSET
      case 'd': {                                     // DICT
        const std::size_t m = last_mark();
        if ((stack_.size() - m) % 2) fail(op_at_, fmt::format("DICT with an odd number of values ({})", stack_.size() - m));
        mark_container(Type::Dict);
        return true;
      }
      case 0x85: push(mark_tuple(1)); return true;  // TUPLE1
      case 0x86: push(mark_tuple(2)); return true;  // TUPLE2
      case 0x87: push(mark_tuple(3)); return true;  // TUPLE3
      case 'a': {  // APPEND: the list is below the value
        need_values(2);
        const std::size_t v = stack_.size() - 1;
        const Ref list = container(stack_[v - 1], Type::List, Type::List, "APPEND");
        if (sink_ && to_sink(list, v - 1)) give(list, v, 1);  // no mark: nothing dropped
        else append_items(list, v, v + 1);
        stack_.pop_back();
        return true;
      }
      case 'e': append_mark(Type::List, "APPENDS"); return true;  // APPENDS
      case 0x90: append_mark(Type::Set, "ADDITEMS"); return true;  // ADDITEMS
      case 's': {                                             // SETITEM: the dict is below key and value
        need_values(3);
        const std::size_t k = stack_.size() - 2;
        append_items(container(stack_[k - 1], Type::Dict, Type::Dict, "SETITEM"), k, k + 2);
        stack_.resize(k);
        return true;
      }
      case 'u': {  // SETITEMS
        const std::size_t m = check_container_below_mark();
        const Ref dict = container(stack_[m - 1], Type::Dict, Type::Dict, "SETITEMS");
        if ((stack_.size() - m) % 2) fail(op_at_, fmt::format("SETITEMS with an odd number of values ({})", stack_.size() - m));
        append_items(dict, m, stack_.size());
        drop_mark(m);
        return true;
      }
      // Memo.
      case 0x94:  // MEMOIZE: index = entries stored so far (len(memo))
        // The usual case inline: the next index, a value on the stack (memo_count_ counts
        // stored entries, each stored by an opcode before this one: below the input's length).
        if (memo_count_ == memo_.size() && memo_count_ < UINT32_MAX - 1 && stack_.size() > base() &&
            !(sink_ && claimed(stack_.back()))) {
          memo_.push_back(stack_.back());
          ++memo_count_;
          return true;
        }
        memo_put(memo_count_);
        return true;
      case 'q': memo_put(le(1)); return true;          // BINPUT
      case 'r': memo_put(le(4)); return true;          // LONG_BINPUT
      case 'p': memo_put(decimal(line(), "PUT index")); return true;
      case 'h': memo_get(le(1)); return true;  // BINGET
      case 'j': memo_get(le(4)); return true;  // LONG_BINGET
      case 'g': memo_get(decimal(line(), "GET index")); return true;
      // Refused: these name Python code or objects.
      case 'c': refuse("GLOBAL", op);
      case 0x93: refuse("STACK_GLOBAL", op);
      case 'R': refuse("REDUCE", op);
      case 'b': refuse("BUILD", op);
      case 'i': refuse("INST", op);
      case 'o': refuse("OBJ", op);
      case 0x81: refuse("NEWOBJ", op);
      case 0x92: refuse("NEWOBJ_EX", op);
      case 'P': refuse("PERSID", op);
      case 'Q': refuse("BINPERSID", op);
      case 0x82: refuse("EXT1", op);
      case 0x83: refuse("EXT2", op);
      case 0x84: refuse("EXT4", op);
      case 0x97: refuse("NEXT_BUFFER", op);
      case 0x98: refuse("READONLY_BUFFER", op);
      default:
        fail(op_at_, fmt::format("unknown pickle opcode '{}' (not a pickle, or a corrupt one)",
                                 escape_excerpt(std::string_view(reinterpret_cast<const char*>(&op), 1))));
    }
  }

  std::string_view in_;
  const std::string& file_;
  std::size_t pos_ = 0, op_at_ = 0;
  std::vector<Ref> stack_;
  std::vector<std::size_t> marks_;
  static constexpr Ref kNoMemo = UINT32_MAX;
  static constexpr Ref kConsumed = UINT32_MAX - 1;  // a container a sink took, or one dropped with its batch
  std::vector<Ref, HugePageAllocator<Ref>> memo_;  // reserved with the nodes (Builder())
  std::size_t memo_count_ = 0;
  // Containers whose room (items) is more than their items; ordered, so that a drop removes
  // those above its floor without walking the others.
  std::map<Ref, std::uint64_t> room_;
  Document doc_;
  ListSink* sink_ = nullptr;
  ArrivingBytes* arriving_ = nullptr;  // in_ grows as they arrive
  // Where a flat batch read now may put pos_ back (flat_batch's undo); SIZE_MAX: none. Bytes
  // before min(pos_, undo_from_) are never read again: they are released to arriving_.
  std::size_t undo_from_ = SIZE_MAX;
  std::vector<Floor> floors_;  // with a sink: one per mark
  Ref lowest_target_ = kNoTarget;
  bool memo_irregular_ = false;
  int claims_ = 0;
  std::vector<Ref> read_;  // what the sink read of the last items it took
  const bool flat_ = sink_ && sink_->takes_flat();
  RefArray flat_kv_;
  HugeArray<std::uint32_t> flat_ends_;
  RefArray flat_items_, flat_dict_kv_;  // a flat list's dicts, a flat dict's keys and values
  ShapeSet entry_shapes_, frame_shapes_;
  std::vector<Node> kept_nodes_;
  std::string kept_text_;
  std::vector<Ref> kept_items_;
  static constexpr int kKeepDepth = 2;  // a list of frames: the list, its dicts
  static constexpr std::uint64_t kMaxKeptContainers = std::uint64_t(1) << 18;
  std::uint64_t kept_containers_ = 0;
  std::array<std::vector<Ref>, kKeepDepth + 1> keep_scratch_;
  std::vector<KeptContainer> kept_container_slots_;  // a power of two, at most half used
  std::size_t kept_container_slots_used_ = 0;
  // Every str, bytes and big int a drop kept, by value (type byte, then text): its node.
  std::unordered_map<std::string, Ref> kept_by_value_;
  std::string kept_key_;
};

Document parse(std::string_view data, const std::string& file) {
  return Builder(data, data.size(), file, nullptr, nullptr).run();
}

Document parse(std::string_view data, const std::string& file, ListSink* sink) {
  return Builder(data, data.size(), file, sink, nullptr).run();
}

Document parse(ArrivingBytes& data, const std::string& file, ListSink* sink) {
  return Builder(std::string_view(data.data(), 0), data.expected_size(), file, sink, &data).run();
}

}  // namespace gmb::pickle
