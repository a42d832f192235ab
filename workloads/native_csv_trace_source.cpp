// The native trace format: CSV with a header naming the columns action,id,bytes[,stream] in any
// order; `#` comments and blank lines are skipped; `bytes` is empty on a free and on a
// free_requested (Op::Kind::FreeRequested, read by the general path only). Ids are the
// file's own (any 64-bit value, reusable once freed). `empty_cache,,,` (Op::Kind::EmptyCache,
// the general path too) is the program's torch.cuda.empty_cache(): no id, no bytes.
#include <cassert>
#include <cstring>

#include <fmt/format.h>

#include "workloads/csv_lines.h"
#include "workloads/live_id_set.h"
#include "workloads/trace_source.h"

namespace gmb {

namespace {

constexpr const char* kColumns[] = {"action", "id", "bytes", "stream"};

class NativeCsvSource final : public TraceSource {
 public:
  explicit NativeCsvSource(std::unique_ptr<ByteInput> in) : in_(std::move(in)), lines_(*in_) {
    meta_.format = "native_csv";
    meta_.gzip = in_->gzip();
    read_header();
  }
  const TraceMeta& meta() const override { return meta_; }
  bool gives_slots() const override { return true; }
  std::uint32_t slots_end() const override { return live_.slots_end(); }

  std::size_t read(std::vector<Op>& out, std::size_t max_ops) override {
    std::size_t n = 0;
    std::string_view line;
    while (n < max_ops) {
      if (canonical_) {  // most lines: parsed in place, in one pass
        const std::string_view buf = in_->buffered();
        const char* const start = buf.data();
        const char* p = start;
        const char* const end = p + buf.size();
        // The lines taken are consumed together when the run ends (lines_.skip_lines).
        std::uint64_t line = lines_.line_number();
        const char* last = nullptr;  // the start of the last line taken
        while (n < max_ops) {
          Op& op = out.emplace_back();  // parsed in place; taken back where the line is not taken
          const char* next = end - p >= kFastLookahead ? parse_fast(p, op) : nullptr;
          if (!next) next = parse_plain(p, end, op);
          // A failed check changed nothing: the general path parses the line again and reports it.
          if (next) op.slot = op.kind == Op::Kind::Alloc ? live_.insert(op.id) : live_.erase(op.id);
          if (!next || !op.slot) {
            out.pop_back();
            break;
          }
          op.source_line = ++line;
          last = p;
          p = next + 1;
          ++n;
        }
        if (last)
          lines_.skip_lines(static_cast<std::size_t>(p - start), line - lines_.line_number(),
                            static_cast<std::size_t>(last - start));
        if (n == max_ops) break;
      }
      if (!lines_.next(line)) break;
      if (line.empty() || line[0] == '#') continue;
      out.push_back(parse(line));
      ++n;
    }
    return n;
  }

 private:
  // parse_plain for the lines whose numbers have at most 15 digits, when kFastLookahead bytes
  // are buffered from p: it reads eight bytes at a time and never past p + 54 (16 bytes for the
  // stream after at most "alloc," 15 digits "," 15 digits ","). Where it returns null,
  // parse_plain reads the line and decides: what this takes, parse_plain takes the same way.
  static constexpr std::ptrdiff_t kFastLookahead = 64;
  const char* parse_fast(const char* p, Op& op) const {
    const std::uint64_t head = CsvLines::load8(p);
    constexpr std::uint64_t kAlloc = 0x2c636f6c6c61ull;  // "alloc," (the first byte lowest)
    constexpr std::uint64_t kFree = 0x2c65657266ull;     // "free,"
    if ((head & 0xFFFFFFFFFFFFull) == kAlloc) {
      p += 6;
      op.kind = Op::Kind::Alloc;
    } else if ((head & 0xFFFFFFFFFFull) == kFree) {
      p += 5;
      op.kind = Op::Kind::Free;
    } else {
      return nullptr;
    }
    std::uint64_t v = 0;
    int n = CsvLines::decimal16(p, v);
    if (n == 0 || n > 15 || p[n] != ',') return nullptr;
    op.id = v;
    p += n + 1;
    if (op.kind == Op::Kind::Alloc) {
      n = CsvLines::decimal16(p, v);
      if (n == 0 || n > 15) return nullptr;
      op.bytes = v;
      p += n;
    } else if (*p != ',' && *p != '\n') {
      return nullptr;
    }
    if (*p == ',' && has_stream_) {
      ++p;
      if (unsigned(p[0] - '0') < 10 && p[1] == '\n') {  // one digit, the common stream
        op.stream = static_cast<StreamId>(p[0] - '0');
        return p + 1;
      }
      if (*p != '\n') {
        n = CsvLines::decimal16(p, v);
        if (n == 0 || n > 15 || v > static_cast<std::uint64_t>(kMaxStreamId)) return nullptr;
        op.stream = static_cast<StreamId>(v);
        p += n;
      }
    }
    return *p == '\n' ? p : nullptr;
  }

  // The common line of the canonical header (action,id,bytes[,stream]): "alloc,12,4096,0" or
  // "free,12,,0", no blanks, ids and sizes of at most 19 digits, the stream at most kMaxStreamId.
  // Returns where its '\n' is, or null for anything else (left to the general path, which
  // gives the errors) or when the line's end is not in the buffer yet.
  const char* parse_plain(const char* p, const char* end, Op& op) const {
    auto digits = [&](std::uint64_t& v) {
      const char* start = p;
      v = 0;
      while (p < end && unsigned(*p - '0') < 10 && p - start < 19) v = v * 10 + unsigned(*p++ - '0');
      return p > start && p - start < 19 + 1 && (p == end || unsigned(*p - '0') >= 10);
    };
    if (end - p >= 6 && std::memcmp(p, "alloc,", 6) == 0) {
      p += 6;
      op.kind = Op::Kind::Alloc;
    } else if (end - p >= 5 && std::memcmp(p, "free,", 5) == 0) {
      p += 5;
      op.kind = Op::Kind::Free;
    } else {
      return nullptr;
    }
    std::uint64_t v = 0;
    if (!digits(v) || p == end || *p++ != ',') return nullptr;
    op.id = v;
    if (op.kind == Op::Kind::Alloc) {
      if (!digits(v)) return nullptr;
      op.bytes = v;
    } else if (p < end && *p != ',' && *p != '\n') {
      return nullptr;  // a free that carries bytes: the general path reports it
    }
    if (p < end && *p == ',' && has_stream_) {
      ++p;
      if (p < end && *p != '\n') {
        if (!digits(v) || v > static_cast<std::uint64_t>(kMaxStreamId)) return nullptr;
        op.stream = static_cast<StreamId>(v);
      }
    }
    if (p == end || *p != '\n') return nullptr;
    return p;
  }


 private:
  [[noreturn]] void fail(const std::string& message) const {
    in_->fail_after_checking_the_rest(TraceError(in_->path(), lines_.line_number(), message));
  }

  void read_header() {
    std::string_view line;
    while (lines_.next(line)) {
      if (line.empty() || line[0] == '#') continue;
      std::vector<std::string_view> f(CsvLines::split(line, nullptr, 0));
      CsvLines::split(line, f.data(), f.size());
      for (int i = 0; i < static_cast<int>(f.size()); ++i) {
        int c = 0;
        while (c < 4 && f[i] != kColumns[c]) ++c;
        if (c == 4)
          fail(fmt::format("unknown column '{}' in the header (valid: action, id, bytes, stream){}",
                           escaped_excerpt(f[i], 60), names_an_rmm_column(f[i])
                                                          ? "; an RMM log's header is Thread,Time,Action,Pointer,Size,"
                                                            "Stream, capitalised as RMM writes it"
                                                          : ""));
        if (col_[c] >= 0)
          fail(fmt::format("column '{}' is named twice in the header (fields {} and {})", kColumns[c], col_[c] + 1, i + 1));
        col_[c] = i;
      }
      header_fields_ = f.size();
      if (col_[0] < 0 || col_[1] < 0 || col_[2] < 0) fail("the header line must name the columns action,id,bytes[,stream]");
      canonical_ = f.size() <= 4 && col_[0] == 0 && col_[1] == 1 && col_[2] == 2 && (col_[3] == 3 || col_[3] < 0);
      has_stream_ = col_[3] == 3;
      for (int c : col_) needed_ = std::max(needed_, c + 1);
      // A row may stop before an empty last `stream` field.
      min_fields_ = needed_ - (col_[3] == needed_ - 1 ? 1 : 0);
      return;
    }
    fail(fmt::format("empty trace: no header line (recognised: {})", recognised_formats()));
  }

  Op parse(std::string_view line) {
    std::string_view f[kMaxFields];
    const std::size_t count = CsvLines::split(line, f, kMaxFields);
    if (count < static_cast<std::size_t>(min_fields_))
      fail(fmt::format("expected {} fields, found {}: '{}'", needed_, count, escaped_excerpt(line, 200)));
    if (count > header_fields_)
      fail(fmt::format("expected at most {} fields (the header's), found {}: '{}'", header_fields_, count,
                       escaped_excerpt(line, 80)));
    // The header names each of the four columns at most once (unknown and repeated names are
    // errors), so every used column lies within kMaxFields.
    assert(needed_ <= kMaxFields);
    return parse_fields(f, count);
  }

  Op parse_fields(const std::string_view* f, std::size_t count) {
    Op op;
    op.source_line = lines_.line_number();
    const std::string_view action = f[col_[0]];
    // The action first (a typo is named as such, not by the id it lacks).
    Op::Kind kind;
    if (action == "alloc") kind = Op::Kind::Alloc;
    else if (action == "free") kind = Op::Kind::Free;
    else if (action == "free_requested") kind = Op::Kind::FreeRequested;
    else if (action == "empty_cache") kind = Op::Kind::EmptyCache;
    else
      fail(fmt::format("unknown action '{}' (valid: alloc, free, free_requested, empty_cache)",
                       escaped_excerpt(action, 60)));
    // The program's torch.cuda.empty_cache(): no buffer, so no id and no bytes (a stream, if
    // given, is checked and kept: the call is the device's, not one stream's).
    std::uint64_t id = 0;
    if (kind == Op::Kind::EmptyCache) {
      for (int c : {1, 2})
        if (!f[col_[c]].empty())
          fail(fmt::format("an empty_cache carries no {} (found '{}'): leave the field empty", kColumns[c],
                           escaped_excerpt(f[col_[c]], 60)));
    } else if (!CsvLines::parse_u64(f[col_[1]], id)) {
      fail(fmt::format("id '{}' is not a non-negative integer", escaped_excerpt(f[col_[1]], 60)));
    }
    op.id = id;
    if (col_[3] >= 0 && static_cast<std::size_t>(col_[3]) < count && !f[col_[3]].empty()) {
      std::uint64_t s = 0;
      if (!CsvLines::parse_u64(f[col_[3]], s) || s > static_cast<std::uint64_t>(kMaxStreamId))
        fail(fmt::format("stream '{}' is not a stream id (valid: 0 to {})", escaped_excerpt(f[col_[3]], 60),
                         kMaxStreamId));
      op.stream = static_cast<StreamId>(s);
    }
    op.kind = kind;
    if (kind == Op::Kind::Alloc) {
      std::uint64_t bytes = 0;
      if (!CsvLines::parse_u64(f[col_[2]], bytes))
        fail(fmt::format("bytes '{}' is not a non-negative integer", escaped_excerpt(f[col_[2]], 60)));
      op.slot = live_.insert(id);
      if (!op.slot) fail(fmt::format("alloc of id {} which is already allocated", id));
      op.bytes = bytes;
    } else if (kind != Op::Kind::EmptyCache) {
      const bool request = kind == Op::Kind::FreeRequested;  // the buffer stays live (its slot kept) until its free
      if (!f[col_[2]].empty())
        fail(fmt::format("a {} carries no bytes (found '{}'): leave the bytes field empty", action,
                         escaped_excerpt(f[col_[2]], 60)));
      op.slot = request ? live_.find(id) : live_.erase(id);
      if (!op.slot) fail(fmt::format("{} of unknown id {} (never allocated, or already freed)", action, id));
    }
    return op;
  }

  static constexpr int kMaxFields = 8;
  std::unique_ptr<ByteInput> in_;
  CsvLines lines_;
  TraceMeta meta_;
  int col_[4] = {-1, -1, -1, -1};  // action, id, bytes, stream
  int needed_ = 0, min_fields_ = 0;
  std::size_t header_fields_ = 0;  // a row has at most as many fields as the header
  bool canonical_ = false, has_stream_ = false;  // header action,id,bytes[,stream] exactly: the fast path
  LiveIdSet live_;
};

}  // namespace

bool looks_like_native_csv(const TraceHead& head) {
  if (head.first_line_number == 0) return true;  // nothing but comments: the reader says what is missing
  if (!head.text) return false;
  std::vector<std::string_view> f(CsvLines::split(head.first_line, nullptr, 0));
  CsvLines::split(head.first_line, f.data(), f.size());
  for (auto field : f)
    for (const char* c : kColumns)
      if (field == c) return true;
  return false;
}

std::unique_ptr<TraceSource> make_native_csv_source(std::unique_ptr<ByteInput> in, const TraceOpenOptions&) {
  return std::make_unique<NativeCsvSource>(std::move(in));
}

}  // namespace gmb
