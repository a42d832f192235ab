// RMM memory event logs, as rmm::mr::logging_resource_adaptor writes them: CSV with the header
// Thread,Time,Action,Pointer,Size,Stream; actions `allocate`, `free` and `allocate failure`;
// pointers as %p prints them (0x..., "(nil)" for null) and streams as hexadecimal handles.
//
// Every stream is replayed (handles become small stream ids: the default stream 0, the others
// 1, 2, ... in order of appearance); threads are replayed in log order. Buffers get dense ids,
// reused once freed, so a log of any length keeps tables the size of its live set. `allocate
// failure` rows are the recorded run's OOMs, counted in TraceMeta and replayed as a PyTorch
// snapshot's `oom` entries are: an allocation of their size, freed right away if it succeeds
// (the what-if may have room for it; the recorded run's OOM is then the replay's too).
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "workloads/csv_lines.h"
#include "workloads/trace_source.h"

namespace gmb {

namespace {

constexpr const char* kHeader[] = {"Thread", "Time", "Action", "Pointer", "Size", "Stream"};

bool is_rmm_header(std::string_view line) {
  std::string_view f[7];
  if (CsvLines::split(line, f, 7) != 6) return false;
  for (int i = 0; i < 6; ++i)
    if (f[i] != kHeader[i]) return false;
  return true;
}

// Hexadecimal with or without 0x; "(nil)" is 0.
bool parse_hex(std::string_view s, std::uint64_t& out) {
  if (s == "(nil)") {
    out = 0;
    return true;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) s.remove_prefix(2);
  if (s.empty() || s.size() > 16) return false;
  const auto r = std::from_chars(s.data(), s.data() + s.size(), out, 16);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

class RmmLogSource final : public TraceSource {
 public:
  explicit RmmLogSource(std::unique_ptr<ByteInput> in) : in_(std::move(in)), lines_(*in_) {
    meta_.format = "rmm_log";
    meta_.gzip = in_->gzip();
    meta_.records_ooms = true;
    std::string_view line;
    // Blank lines and `#` comments before the header are skipped, as the format's detection
    // skips them (trace_source.cpp) and the native CSV does.
    while (lines_.next(line) && (line.empty() || line[0] == '#')) {
    }
    if (!is_rmm_header(line))
      fail("the first line must be the header Thread,Time,Action,Pointer,Size,Stream");
    streams_.emplace(0, 0);
  }
  const TraceMeta& meta() const override { return meta_; }

  std::size_t read(std::vector<Op>& out, std::size_t max_ops) override {
    std::size_t n = 0;
    std::string_view line;
    auto give_pending_free = [&] {  // (before any other row: its id is free again)
      if (!pending_free_ || n >= max_ops) return;
      out.push_back(*pending_free_);
      pending_free_.reset();
      ++ops_;
      ++n;
    };
    give_pending_free();
    while (n < max_ops && lines_.next(line)) {
      if (line.empty()) continue;
      std::string_view f[7];
      const std::size_t count = CsvLines::split(line, f, 7);
      if (count != 6) {
        if (is_rmm_header(line)) continue;  // a log appended to by a second adaptor
        fail(fmt::format("expected 6 fields (Thread,Time,Action,Pointer,Size,Stream), found {}: '{}'", count,
                         escaped_excerpt(line, 200)));
      }
      if (is_rmm_header(line)) continue;
      const std::string_view action = f[2];
      std::uint64_t ptr = 0, size = 0, stream = 0;
      if (!parse_hex(f[3], ptr))
        fail(fmt::format("pointer '{}' is not a hexadecimal address (expected e.g. 0x7f2e4a000000, or (nil))",
                         escaped_excerpt(f[3], 60)));
      if (!CsvLines::parse_u64(f[4], size))
        fail(f[4].size() >= 20 && f[4].find_first_not_of("0123456789") == std::string_view::npos
                 ? fmt::format("size '{}' is larger than 2^64-1 bytes", escaped_excerpt(f[4], 60))
                 : fmt::format("size '{}' is not a non-negative integer", escaped_excerpt(f[4], 60)));
      if (!parse_hex(f[5], stream))
        fail(fmt::format("stream '{}' is not a hexadecimal stream handle (expected e.g. 0 or 0x55d0c6e3a2f0)",
                         escaped_excerpt(f[5], 60)));
      Op op;
      op.source_line = lines_.line_number();
      // Zero bytes answered with a null pointer (RMM's resources do so for a request of 0 bytes,
      // and so does the caching allocator, whose export logs them): nothing was allocated, and
      // the free of that null pointer frees nothing.
      if (ptr == 0 && size == 0 && (action == "allocate" || action == "free")) {
        ++null_zero_rows_;
        continue;
      }
      if (action == "allocate") {
        if (ptr == 0)
          fail(fmt::format("allocate of {} bytes at a null pointer (a failed allocation is logged as 'allocate "
                           "failure'; only a request of 0 bytes may be answered with (nil))",
                           size));
        op.stream = stream_id(stream);  // (a free's stream is its allocation's)
        const BufferId id = new_id();
        if (!live_.emplace(ptr, Live{id, size, op.stream}).second)
          fail(fmt::format("allocate of pointer {} which is already allocated (no free in between)", f[3]));
        op.kind = Op::Kind::Alloc;
        op.id = id;
        op.bytes = size;
      } else if (action == "free") {
        auto it = live_.find(ptr);
        if (it == live_.end())
          fail(fmt::format("free of unknown pointer {} (never allocated, or already freed)", escaped_excerpt(f[3], 60)));
        if (it->second.bytes != size && ++size_mismatches_ == 1) first_mismatch_line_ = lines_.line_number();
        op.kind = Op::Kind::Free;
        op.stream = it->second.stream;
        op.id = it->second.id;
        free_ids_.push_back(it->second.id);
        live_.erase(it);
      } else if (action == "allocate failure") {
        ++meta_.recorded_ooms;
        if (meta_.recorded_oom_events.size() < TraceMeta::kMaxRecordedOomEvents)
          meta_.recorded_oom_events.push_back(ops_);
        op.stream = stream_id(stream);
        op.kind = Op::Kind::Alloc;
        op.id = new_id();
        op.bytes = size;
        Op free = op;
        free.kind = Op::Kind::Free;
        free.bytes = 0;
        pending_free_ = free;
        free_ids_.push_back(op.id);
      } else {
        fail(fmt::format("unknown action '{}' (valid: allocate, free, allocate failure)", escaped_excerpt(action, 60)));
      }
      out.push_back(op);
      ++ops_;
      ++n;
      give_pending_free();
    }
    if (n == 0 && !ended_) end_notes();
    return n;
  }
  BufferId new_id() {
    if (free_ids_.empty()) return next_id_++;
    const BufferId id = free_ids_.back();
    free_ids_.pop_back();
    return id;
  }

 private:
  struct Live {
    BufferId id;
    Bytes bytes;
    StreamId stream;
  };

  [[noreturn]] void fail(const std::string& message) const {
    in_->fail_after_checking_the_rest(TraceError(in_->path(), lines_.line_number(), message));
  }

  StreamId stream_id(std::uint64_t handle) {
    auto it = streams_.find(handle);
    if (it != streams_.end()) return it->second;
    if (streams_.size() > static_cast<std::size_t>(kMaxStreamId))
      fail(fmt::format("more than {} distinct streams (each handle becomes a stream id, 0 to {})", kMaxStreamId + 1,
                       kMaxStreamId));
    const auto id = static_cast<StreamId>(streams_.size());
    streams_.emplace(handle, id);
    if (streams_.size() == 2) meta_.notes.push_back("replaying every stream: the default stream (0) as 0, the others 1, 2, ... in order of appearance");
    return id;
  }

  void end_notes() {
    ended_ = true;
    if (streams_.size() > 1) meta_.notes.push_back(fmt::format("{} streams", streams_.size()));
    if (size_mismatches_)
      meta_.notes.push_back(fmt::format("{} frees named a size other than their allocation's (first at line {}); "
                                        "the allocation's size counts",
                                        size_mismatches_, first_mismatch_line_));
    if (!live_.empty())
      meta_.notes.push_back(fmt::format("{} allocations are never freed in the log", live_.size()));
    if (null_zero_rows_)
      meta_.notes.push_back(fmt::format("{} rows allocate or free 0 bytes at (nil): nothing allocated, not replayed",
                                        null_zero_rows_));
  }

  std::unique_ptr<ByteInput> in_;
  CsvLines lines_;
  TraceMeta meta_;
  std::unordered_map<std::uint64_t, Live> live_;  // pointer -> buffer (live buffers only)
  std::vector<BufferId> free_ids_;
  BufferId next_id_ = 0;
  std::optional<Op> pending_free_;  // a recorded failure's attempt's free, given right after it
  std::unordered_map<std::uint64_t, StreamId> streams_;
  std::uint64_t ops_ = 0, size_mismatches_ = 0, first_mismatch_line_ = 0, null_zero_rows_ = 0;
  bool ended_ = false;
};

}  // namespace

bool looks_like_rmm_log(const TraceHead& head) { return head.text && is_rmm_header(head.first_line); }

bool names_an_rmm_column(std::string_view name) {
  for (std::string_view column : kHeader) {
    bool same = name.size() == column.size();
    for (std::size_t i = 0; i < column.size() && same; ++i) same = (name[i] | 0x20) == (column[i] | 0x20);
    if (same) return true;
  }
  return false;
}

std::unique_ptr<TraceSource> make_rmm_log_source(std::unique_ptr<ByteInput> in, const TraceOpenOptions&) {
  return std::make_unique<RmmLogSource>(std::move(in));
}

}  // namespace gmb
