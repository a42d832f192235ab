#include "workloads/trace_source.h"

#include <algorithm>

#include <fmt/format.h>

#include "workloads/pytorch_snapshot.h"

namespace gmb {

namespace {

constexpr std::size_t kHeadBytes = std::size_t(64) << 10;

// Pickle: protocol 2+ starts with PROTO (0x80); protocols 0 and 1 with MARK '(' or an empty
// list / dict (']', '}').
bool looks_like_pickle(const TraceHead& head) {
  if (head.bytes.empty()) return false;
  const auto c = static_cast<unsigned char>(head.bytes[0]);
  return c == 0x80 || c == '(' || c == ']' || c == '}';
}


TraceHead make_head(std::string_view bytes) {
  TraceHead h;
  h.bytes = bytes;
  std::size_t at = 0;
  std::uint64_t line = 0;
  while (at < bytes.size()) {
    std::size_t nl = bytes.find('\n', at);
    std::string_view l = bytes.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    ++line;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (!l.empty() && l[0] != '#') {
      h.first_line = l;
      h.first_line_number = line;
      h.first_line_offset = at;
      break;
    }
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  for (char ch : h.first_line) {
    const auto c = static_cast<unsigned char>(ch);
    if ((c < 0x20 && c != '\t') || c >= 0x7f) h.text = false;
  }
  // Binary content may hold no newline (or a NUL) before the 64 KiB: not text either.
  if (h.first_line_number && h.first_line.size() == bytes.size() - h.first_line_offset && bytes.size() == kHeadBytes)
    h.text = false;
  return h;
}

[[noreturn]] void unknown_format(const ByteInput& in, const TraceHead& head) {
  if (head.bytes.substr(0, 3) == "\xef\xbb\xbf")  // (Windows editors save CSV so)
    in.fail_at(0, fmt::format("not a trace in a recognised format: the content starts with a UTF-8 byte order mark "
                              "(EF BB BF), which no trace format has; save the file without it (recognised: {})",
                              recognised_formats()));
  // Lines that end in CR alone (classic Mac OS): one long line with control bytes in it, which
  // would otherwise be called binary.
  if (head.bytes.find('\r') != std::string_view::npos && head.bytes.find('\n') == std::string_view::npos &&
      std::all_of(head.bytes.begin(), head.bytes.end(), [](char ch) {
        const auto c = static_cast<unsigned char>(ch);
        return c == '\r' || c == '\t' || (c >= 0x20 && c < 0x7f);
      }))
    in.fail_at(0, fmt::format("not a trace in a recognised format: its lines end in CR alone (classic Mac OS line "
                              "endings), and a trace's lines end in LF or CRLF; convert them (e.g. tr '\\r' "
                              "'\\n') (recognised: {})",
                              recognised_formats()));
  if (head.text)
    throw TraceError(in.path(), head.first_line_number,
                     fmt::format("not a trace in a recognised format: the first line \"{}\" is not the header of "
                                 "one (recognised: {})",
                                 escaped_excerpt(head.first_line, 80), recognised_formats()));
  in.fail_at(0, fmt::format("not a trace in a recognised format: {}binary content that starts with \"{}\" "
                            "(recognised: {})",
                            in.gzip() ? "gzip-compressed " : "", escaped_excerpt(head.bytes, 32),
                            recognised_formats()));
}

}  // namespace

std::string recognised_formats() {
  std::string s;
  for (const auto& f : trace_formats()) s += fmt::format("{}{} ({})", s.empty() ? "" : "; ", f.name, f.description);
  return s + "; plain or gzip-compressed";
}

std::vector<std::string> describe(const TraceMeta& meta) {
  std::string what = meta.format;
  for (const auto& f : trace_formats())
    if (meta.format == f.name) what = fmt::format("{} ({})", f.name, f.description);
  std::vector<std::string> lines = {fmt::format("format {}{}", what, meta.gzip ? ", gzip-compressed" : "")};
  lines.insert(lines.end(), meta.notes.begin(), meta.notes.end());
  return lines;
}

const std::vector<TraceFormat>& trace_formats() {
  static const std::vector<TraceFormat> formats = {
      {"pytorch_snapshot", "a pickled torch.cuda.memory._snapshot()", looks_like_pickle, make_pytorch_snapshot_source},
      {"rmm_log", "CSV with the header Thread,Time,Action,Pointer,Size,Stream", looks_like_rmm_log, make_rmm_log_source},
      {"native_csv", "CSV with the header action,id,bytes[,stream]", looks_like_native_csv, make_native_csv_source},
  };
  return formats;
}

std::unique_ptr<TraceSource> open_trace(const std::string& path, const TraceOpenOptions& options) {
  std::unique_ptr<ByteInput> in = ByteInput::open(path);
  // A replay opens its trace more than once (checked first, then replayed; again for an export),
  // and a pipe's bytes come once: the second reading would find it empty. Refused before any
  // byte is read, so the message does not depend on when the writer comes.
  if (in->pipe())
    throw TraceError(path, 0,
                     "the trace is a pipe, and a replay reads its trace more than once: give it as a regular file "
                     "(for <(...) or a FIFO, write its output to a file first)");
  const TraceHead head = make_head(in->peek(kHeadBytes));
  for (const auto& f : trace_formats())
    if (f.open && f.sniff(head)) return f.open(std::move(in), options);
  unknown_format(*in, head);
}

}  // namespace gmb
