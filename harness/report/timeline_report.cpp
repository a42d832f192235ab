// The bytes in use event by event: the timeline CSV of a run (run: {timeline: true}, replay
// --timeline) and the allocated/reserved series up to a case's first OOM (CSV and SVG).
#include "harness/report/timeline_report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <stdexcept>

#include <fmt/format.h>

#include "common/decimal_writer.h"
#include "common/units.h"
#include "harness/io/atomic_write.h"
#include "harness/report/svg.h"

namespace gmb {

using namespace svg;

void write_timeline_csv(const std::string& path, const std::vector<TimelineRow>& rows) {
  fmt::memory_buffer out;
  fmt::format_to(std::back_inserter(out), "event,action,id,bytes,allocated_bytes,reserved_bytes,segments,oom\n");
  for (const auto& r : rows) {
    fmt::format_to(std::back_inserter(out), "{},{},{},", r.event, r.action == 'a' ? "alloc" : r.action == 'r' ? "free_requested" : "free", r.id);
    if (r.action == 'a') fmt::format_to(std::back_inserter(out), "{}", r.bytes);
    fmt::format_to(std::back_inserter(out), ",{},{},{},{}\n", r.allocated_bytes, r.reserved_bytes, r.segments,
                   r.oom ? 1 : 0);
  }
  write_file_atomically(path, std::string_view(out.data(), out.size()));
}

std::string usage_csv(const CaseResult& c) {
  std::string out = "event,step,allocated_bytes,reserved_bytes\n";
  // Up to 131,072 rows: written in place (a row is at most four 20-digit numbers and 4 separators).
  const std::size_t start = out.size();
  out.resize(start + 84 * c.oom_usage.size());
  char* p = out.data() + start;
  auto put = [&p](std::uint64_t v, char after) { put_decimal(p, v, after); };
  for (const auto& u : c.oom_usage) {
    put(u.event, ',');
    put(u.step, ',');
    put(u.allocated_bytes, ',');
    put(u.reserved_bytes, '\n');
  }
  out.resize(std::size_t(p - out.data()));
  return out;
}


std::string usage_svg(const CaseResult& c) {
  constexpr double kWidth = 1120, kX0 = 100, kX1 = 1090, kPlotH = 320;
  const OomRecord& o = *c.runs.front().first_oom;
  Svg g;
  double top = g.lines(16, 24, fmt::format("Allocated and reserved bytes up to the first OOM: {}", c.label), 15,
                       kWidth - 32, "bold", "#111111");
  top = g.lines(16, top,
         fmt::format("{} OOM at event {} (step {}): {} requested with {} allocated and {} reserved of {}{}",
                     to_string(o.kind), o.event, o.step, format_bytes(o.requested_bytes),
                     format_bytes(o.allocated_bytes), format_bytes(o.reserved_bytes), format_bytes(o.capacity_bytes),
                     !c.oom_usage.empty() && c.oom_usage.front().event > 0
                         ? fmt::format(" (the last {} events drawn)", c.oom_usage.size())
                         : ""),
         12, kWidth - 32);
  if (c.oom_usage.empty()) {
    // Nothing kept (on sim, the second run up to the OOM did not reach the same OOM): say why,
    // in the picture itself, rather than draw empty axes.
    std::string why = "no usage was kept for this run";
    for (const std::string& n : c.workload_notes)
      if (n == kUsageNotKeptNote) why = n;
    top = g.lines(16, top + 8, "Not drawn: " + why + ".", 12, kWidth - 32, "bold", kRequest);
    return g.finish(kWidth, top + 16);
  }
  const double kY0 = top + 16, kY1 = kY0 + kPlotH, kHeight = kY1 + 76;
  const auto& u = c.oom_usage;
  Bytes ymax_b = o.capacity_bytes;
  for (const auto& s : u) ymax_b = std::max({ymax_b, s.reserved_bytes, s.allocated_bytes});
  const double ymax = double(std::max<Bytes>(ymax_b, 1)) * 1.05;
  const std::uint64_t e0 = u.empty() ? 0 : u.front().event, e1 = u.empty() ? 1 : std::max(u.back().event, e0 + 1);
  auto px = [&](std::uint64_t e) { return kX0 + (kX1 - kX0) * double(e - e0) / double(e1 - e0); };
  auto py = [&](double b) { return kY1 - (kY1 - kY0) * b / ymax; };
  // Axes and grid.
  const ByteAxis axis = byte_axis(ymax);
  for (double b = 0; b <= ymax; b += axis.step) {
    double yy = py(b);
    g.body += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="#e0e0e0"/>)", kX0, yy, kX1, yy) + "\n";
    g.text(kX0 - 6, yy + 4, axis.label(b), 10, "end");
  }
  const std::uint64_t xstep = std::max<std::uint64_t>(1, std::uint64_t(nice_step(double(e1 - e0) / 6)));
  for (std::uint64_t e = (e0 + xstep - 1) / xstep * xstep; e <= e1; e += xstep)
    g.text(px(e), kY1 + 16, std::to_string(e), 10, "middle");
  g.text((kX0 + kX1) / 2, kY1 + 34, "event", 11, "middle");
  g.body += fmt::format(R"(<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#444"/><line x1="{0}" y1="{2}" x2="{3}" y2="{2}" stroke="#444"/>)",
                        kX0, kY0, kY1, kX1) + "\n";
  // Capacity line.
  g.body += fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}" stroke="{}" stroke-dasharray="6 4"/>)",
                        kX0, py(double(o.capacity_bytes)), kX1, py(double(o.capacity_bytes)), kRequest) + "\n";
  g.text(kX1, py(double(o.capacity_bytes)) - 4, "capacity " + format_bytes(o.capacity_bytes), 10, "end", kRequest);
  // Series as steps (bytes change at events), one point per pixel column at most (the column's
  // highest value, so peaks stay visible).
  auto series = [&](auto value, const char* colour, double width) {
    std::string pts;
    double last_x = -1, col_max = 0, prev_y = -1;
    auto flush = [&] {
      if (last_x < 0) return;
      double yy = py(col_max);
      if (prev_y >= 0) pts += fmt::format("{:.1f},{:.1f} ", last_x, prev_y);
      pts += fmt::format("{:.1f},{:.1f} ", last_x, yy);
      prev_y = yy;
    };
    for (const auto& s : u) {
      double x = std::floor(px(s.event));
      if (x != last_x) {
        flush();
        last_x = x;
        col_max = 0;
      }
      col_max = std::max(col_max, double(value(s)));
    }
    flush();
    g.body += fmt::format(R"(<polyline fill="none" stroke="{}" stroke-width="{}" points="{}"/>)", colour, width, pts) +
              "\n";
  };
  series([](const UsageSample& s) { return s.reserved_bytes; }, kHole, 4);
  series([](const UsageSample& s) { return s.allocated_bytes; }, kUsed, 1.6);
  // The OOM: the request stacked on what was allocated.
  double ox = px(o.event);
  g.body += fmt::format(R"(<line x1="{0:.1f}" y1="{1:.1f}" x2="{0:.1f}" y2="{2:.1f}" stroke="{3}" stroke-width="3"/>)", ox,
                        py(double(o.allocated_bytes)), py(double(o.allocated_bytes + o.requested_bytes)), kRequest) + "\n";
  g.text(ox - 6, py(double(o.allocated_bytes + o.requested_bytes)) - 4, "OOM: +" + format_bytes(o.requested_bytes), 10,
         "end", kRequest);
  // Legend.
  const double ly = kY1 + 56;
  g.rect(kX0, ly - 6, 16, 4, kUsed, "");
  g.text(kX0 + 22, ly, "allocated", 11);
  g.rect(kX0 + 110, ly - 6, 16, 4, kHole, "");
  g.text(kX0 + 132, ly, "reserved", 11);
  g.rect(kX0 + 220, ly - 8, 4, 10, kRequest, "");
  g.text(kX0 + 232, ly, "the failed request, on top of what was allocated", 11);
  return g.finish(kWidth, kHeight);
}


}  // namespace gmb
