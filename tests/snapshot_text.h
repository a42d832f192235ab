// Everything a converted snapshot holds, as text, for tests that compare two conversions of one
// pickle (the streamed one and the two-pass one must agree to the last field).
#pragma once

#include <algorithm>
#include <string>

#include <fmt/format.h>

#include "workloads/pytorch_snapshot.h"

namespace gmb::testing {

inline std::string snapshot_text(const PyTorchSnapshot& s) {
  std::string out = fmt::format("device {} devices_with_events [{}] alloc_conf '{}' has {} native {} capacity {}\n",
                                s.device, fmt::join(s.devices_with_events, ","), s.alloc_conf, s.has_alloc_conf,
                                s.native_allocator, s.device_capacity);
  out += fmt::format("has_trace {} alive_at_start {}\n", s.has_trace, s.blocks_alive_at_start);
  for (const std::string& n : s.notes) out += "note " + n + "\n";
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    out += fmt::format("op {} {} {} {} line {} origin '{}'\n", op.kind == Op::Kind::Alloc ? "alloc" : "free", op.id,
                       op.bytes, op.stream, op.source_line, s.origins.at(s.op_origin.at(i)));
  }
  for (const RecordedSegmentEvent& e : s.segment_events)
    out += fmt::format("segment {} {} {:#x} before {} entry {}\n", to_string(e.kind), e.bytes, e.address, e.before_op,
                       e.entry);
  for (const RecordedOom& o : s.ooms)
    out += fmt::format("oom {} free {} op {} entry {}\n", o.bytes, o.device_free, o.op, o.entry);
  out += fmt::format("origins {}\n", s.origins.size());
  return out;
}

// Where two texts first differ, line by line: what a failed comparison prints (a whole snapshot's
// text is tens of MB; the test framework's diff of two would not fit in memory).
inline std::string first_difference(const std::string& a, const std::string& b) {
  std::size_t line = 1, from = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size() && a[i] == b[i]; ++i)
    if (a[i] == '\n') {
      ++line;
      from = i + 1;
    }
  if (a == b) return "equal";
  auto line_at = [&](const std::string& s) {
    if (from >= s.size()) return std::string("<end>");
    return s.substr(from, std::min(s.find('\n', from), s.size()) - from).substr(0, 300);
  };
  return fmt::format("line {}:\n  {}\n  {}", line, line_at(a), line_at(b));
}

// The text of a conversion, or "error: " and its message.
template <class Convert>
std::string conversion_text(Convert&& convert) {
  try {
    return snapshot_text(convert());
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace gmb::testing
