#include "harness/oom_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "allocators/units.h"
#include "harness/oom_diagnosis.h"
#include "harness/report.h"

namespace gmb {

using nlohmann::json;

bool has_oom_details(const CaseResult& c) {
  return !c.runs.empty() && c.runs.front().first_oom && !c.oom_events.empty();
}

std::string oom_file_stem(std::size_t index, const CaseResult& c) {
  std::string slug;
  for (char ch : c.allocator_label.empty() ? c.allocator : c.allocator_label) {
    bool keep = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (keep) slug += ch;
    else if (!slug.empty() && slug.back() != '_') slug += '_';
  }
  while (!slug.empty() && slug.back() == '_') slug.pop_back();
  return fmt::format("case{:02}_{}", index, slug.empty() ? "case" : slug);
}

BlockMapSummary summarize_block_map(const std::vector<SegmentInfo>& segments) {
  BlockMapSummary s;
  s.segments = segments.size();
  for (const auto& seg : segments) {
    for (const auto& b : seg.blocks) {
      if (b.mapped) s.segment_bytes += b.size;
      if (!b.mapped) {
        s.unmapped_bytes += b.size;
      } else if (b.allocated) {
        ++s.allocated_blocks;
        s.allocated_bytes += b.size;
      } else {
        ++s.holes;
        s.hole_bytes += b.size;
        s.largest_hole_bytes = std::max(s.largest_hole_bytes, b.size);
      }
    }
  }
  return s;
}

namespace {

const char* block_state(const BlockInfo& b) { return !b.mapped ? "unmapped" : b.allocated ? "allocated" : "free"; }

json oom_record_json(const OomRecord& o) {
  json j{{"step", o.step},
              {"event", o.event},
              {"kind", to_string(o.kind)},
              {"requested_bytes", o.requested_bytes},
              {"allocated_bytes", o.allocated_bytes},
              {"reserved_bytes", o.reserved_bytes},
              {"cached_bytes", o.cached_bytes},
              {"largest_free_block_bytes", o.largest_free_block},
              {"capacity_bytes", o.capacity_bytes},
              {"retried_after_freeing_cache", o.retried_after_freeing_cache},
              {"need_from_here_bytes", o.need_from_here_bytes},
              {"fragmentation", o.fragmentation()},
              {"message", o.message}};
  if (!o.origin.empty()) j["origin"] = o.origin;
  return j;
}

// CSV field: quoted, quotes doubled.
std::string csv_quote(const std::string& s) {
  std::string e = "\"";
  for (char ch : s) e += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return e + "\"";
}

std::string xml_escape(const std::string& s) {
  std::string o;
  for (char ch : s) {
    switch (ch) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += ch;
    }
  }
  return o;
}

// Text width at the SVG's sans-serif font sizes, roughly: enough to decide whether a label fits.
double text_width(const std::string& s, double font_px) { return 0.6 * font_px * double(s.size()); }

// Colours of the picture (also in the legend).
constexpr const char* kUsed = "#3b6fb6";
constexpr const char* kHole = "#f2a33a";
constexpr const char* kUnmapped = "#e6e6e6";
constexpr const char* kDeviceFree = "#d9f0d3";
constexpr const char* kRequest = "#d62728";

struct Svg {
  std::string body;
  void rect(double x, double y, double w, double h, const char* fill, const std::string& title,
            const char* stroke = "#ffffff", const char* extra = "") {
    body += fmt::format(R"(<rect x="{:.1f}" y="{:.1f}" width="{:.1f}" height="{:.1f}" fill="{}" stroke="{}" {}>)",
                        x, y, std::max(w, 1.0), h, fill, stroke, extra);
    if (!title.empty()) body += "<title>" + xml_escape(title) + "</title>";
    body += "</rect>\n";
  }
  void text(double x, double y, const std::string& s, double size = 11, const char* anchor = "start",
            const char* fill = "#222222", const char* weight = "normal") {
    body += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" font-size="{}" text-anchor="{}" fill="{}" font-weight="{}">{}</text>)",
                        x, y, size, anchor, fill, weight, xml_escape(s));
    body += "\n";
  }
  // Text wrapped at spaces to max_width; returns the y below the last line.
  double lines(double x, double y, const std::string& s, double size, double max_width, const char* weight = "normal",
               const char* fill = "#222222") {
    const std::size_t per_line = std::max<std::size_t>(20, std::size_t(max_width / (0.6 * size)));
    std::string rest = s;
    while (!rest.empty()) {
      std::size_t cut = rest.size();
      if (cut > per_line) {
        cut = rest.rfind(' ', per_line);
        if (cut == std::string::npos || cut == 0) cut = per_line;
      }
      text(x, y, rest.substr(0, cut), size, "start", fill, weight);
      rest = cut < rest.size() ? rest.substr(rest[cut] == ' ' ? cut + 1 : cut) : "";
      y += size * 1.35;
    }
    return y;
  }
  // A label centred in a box when it fits there.
  void label_in(double x, double w, double y, const std::string& s, const char* fill = "#ffffff", double size = 10) {
    if (text_width(s, size) + 6 <= w) text(x + w / 2, y, s, size, "middle", fill);
  }
  std::string finish(double width, double height) const {
    return fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{:.0f}" height="{:.0f}" viewBox="0 0 {:.0f} {:.0f}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">)",
                       width, height, width, height) +
           "\n" + fmt::format(R"(<rect x="0" y="0" width="{:.0f}" height="{:.0f}" fill="#ffffff"/>)", width, height) +
           "\n" + body + "</svg>\n";
  }
};

std::string device_words(const CaseResult& c, const DeviceInfo& d) {
  std::string s = fmt::format("{} ({})", d.name, to_string(d.kind));
  if (d.kind == DeviceKind::Sim && c.memory_modeled) s += ", reserved bytes modeled";
  return s;
}

// A round tick spacing: 1, 2, 2.5 or 5 times a power of ten, at least raw.
double nice_step(double raw) {
  double mag = 1;
  while (mag > raw) mag /= 10;
  while (mag * 10 <= raw) mag *= 10;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (raw <= m * mag) return m * mag;
  return 10 * mag;
}

// A byte axis up to ymax: its unit (the largest binary unit below ymax) and its tick step.
struct ByteAxis {
  double unit = 1;
  const char* name = "B";
  double step = 1;  // in bytes
  std::string label(double bytes) const { return fmt::format("{:g} {}", bytes / unit, name); }
};
ByteAxis byte_axis(double ymax) {
  ByteAxis a;
  const char* names[] = {"KiB", "MiB", "GiB", "TiB"};
  double u = 1024;
  for (const char* n : names) {
    if (ymax >= u) {
      a.unit = u;
      a.name = n;
    }
    u *= 1024;
  }
  a.step = nice_step(ymax / a.unit / 5) * a.unit;
  return a;
}

}  // namespace

json oom_state_json(const CaseResult& c, const DeviceInfo& device, const std::string& stem) {
  json j;
  j["case"] = c.label;
  j["allocator"] = c.allocator;
  j["allocator_label"] = c.allocator_label;
  j["workload"] = c.workload_label;
  j["device"] = {{"kind", to_string(device.kind)},
                 {"name", device.name},
                 {"capacity_bytes", c.capacity_bytes},
                 {"capacity_requested_bytes", c.capacity_requested_bytes},
                 {"ballast_bytes", c.ballast_bytes}};
  j["memory_modeled"] = c.memory_modeled;
  const RunMetrics& m = c.runs.front();
  j["oom"] = oom_record_json(*m.first_oom);
  j["what_would_fix_it"] = oom_fix_text(c, *m.first_oom);
  if (c.need)
    j["need"] = {{"peak_requested_bytes", c.need->peak_requested_bytes},
                 {"peak_requested_step", c.need->peak_requested_step},
                 {"peak_requested_event", c.need->peak_requested_event},
                 {"peak_rounded_bytes", c.need->peak_rounded_bytes}};
  j["ooms"] = m.ooms;
  j["ooms_by_kind"] = {{"fragmentation", m.fragmentation_ooms}, {"capacity", m.capacity_ooms}};
  BlockMapSummary s = summarize_block_map(c.oom_segments);
  const OomRecord& o = *m.first_oom;
  j["summary"] = {{"segments", s.segments},
                  {"segment_bytes", s.segment_bytes},
                  {"allocated_blocks", s.allocated_blocks},
                  {"allocated_bytes", s.allocated_bytes},
                  {"holes", s.holes},
                  {"hole_bytes", s.hole_bytes},
                  {"largest_hole_bytes", s.largest_hole_bytes},
                  {"unmapped_bytes", s.unmapped_bytes},
                  {"capacity_minus_reserved_bytes",
                   o.capacity_bytes > o.reserved_bytes ? o.capacity_bytes - o.reserved_bytes : 0},
                  {"capacity_minus_allocated_bytes",
                   o.capacity_bytes > o.allocated_bytes ? o.capacity_bytes - o.allocated_bytes : 0}};
  json segs = json::array();
  for (std::size_t i = 0; i < c.oom_segments.size(); ++i) {
    const auto& seg = c.oom_segments[i];
    json blocks = json::array();
    for (const auto& b : seg.blocks)
      blocks.push_back({{"offset", b.offset}, {"size", b.size}, {"state", block_state(b)}});
    segs.push_back({{"index", i},
                    {"address", seg.address},
                    {"size", seg.size},
                    {"pool", seg.pool},
                    {"stream", seg.stream},
                    {"blocks", blocks}});
  }
  j["segments"] = segs;
  j["files"] = {{"block_map_svg", stem + ".svg"},
                {"usage_csv", stem + ".timeline.csv"},
                {"usage_svg", stem + ".timeline.svg"},
                {"ooms_csv", stem + ".ooms.csv"}};
  j["usage_window_events"] = c.oom_usage_window_events;
  j["usage_first_event"] = c.oom_usage.empty() ? 0 : c.oom_usage.front().event;
  return j;
}

// The legend of the block map's colours, in one row at y; returns the y below it.
double block_map_legend(Svg& g, double x, double y) {
  auto legend = [&](const char* fill, const char* stroke, const std::string& what, const char* extra = "") {
    g.rect(x, y, 16, 12, fill, "", stroke, extra);
    g.text(x + 22, y + 10, what, 11);
    x += 30 + text_width(what, 11);
  };
  legend(kUsed, "#ffffff", "allocated block");
  legend(kHole, "#ffffff", "hole: free block inside a segment (cached)");
  legend(kUnmapped, "#999999", "reserved address space, unmapped", R"(stroke-dasharray="4 3")");
  legend(kDeviceFree, "#7fb77e", "device memory never reserved");
  legend(kRequest, kRequest, "the request", R"(fill-opacity="0.25")");
  return y + 30;
}

// Before the full map (hundreds of rows on a long run): the holes by size, against the request,
// and the largest holes with what pins them. A hole goes back to the device only with its whole
// segment, so the allocated blocks of its segment are what keep it reserved.
double hole_summary(Svg& g, double left, double bar_x, double bar_w, double y, const std::vector<SegmentInfo>& segments,
                    Bytes requested) {
  struct Hole {
    Bytes size;
    std::size_t segment;
  };
  std::vector<Hole> holes;
  for (std::size_t i = 0; i < segments.size(); ++i)
    for (const auto& b : segments[i].blocks)
      if (b.mapped && !b.allocated) holes.push_back({b.size, i});
  if (holes.empty()) {
    g.text(left, y + 12, "No holes: every reserved byte is allocated (or unmapped).", 12, "start", "#111111", "bold");
    return y + 30;
  }
  // Histogram over powers of two: [<1 MiB], [1, 2) MiB, [2, 4) MiB, ...
  std::vector<std::pair<std::size_t, Bytes>> buckets(1);  // (count, bytes)
  auto bucket_of = [](Bytes b) {
    std::size_t k = 0;
    for (Bytes lim = MiB; b >= lim && k < 40; lim *= 2) ++k;
    return k;
  };
  for (const auto& h : holes) {
    std::size_t k = bucket_of(h.size);
    if (buckets.size() <= k) buckets.resize(k + 1);
    ++buckets[k].first;
    buckets[k].second += h.size;
  }
  const std::size_t request_bucket = bucket_of(requested);
  if (buckets.size() <= request_bucket) buckets.resize(request_bucket + 1);  // the request's row, empty
  g.text(left, y + 12,
         fmt::format("Holes by size: {} holes, {} in all; the request needs one of at least {}", holes.size(),
                     format_bytes(std::accumulate(holes.begin(), holes.end(), Bytes{0},
                                                  [](Bytes a, const Hole& h) { return a + h.size; })),
                     format_bytes(requested)),
         12, "start", "#111111", "bold");
  y += 20;
  std::size_t most = 1;
  for (const auto& b : buckets) most = std::max(most, b.first);
  constexpr double kBarH = 14;
  for (std::size_t k = 0; k < buckets.size(); ++k) {
    if (!buckets[k].first && k + 1 < buckets.size() && k != request_bucket) continue;
    const std::string range = k == 0 ? "below 1 MiB" : fmt::format("{} to {}", format_bytes(MiB << (k - 1)), format_bytes(MiB << k));
    g.text(left, y + 11, range, 11);
    const double w = bar_w * 0.6 * double(buckets[k].first) / double(most);
    if (buckets[k].first) g.rect(bar_x, y, w, kBarH, kHole, "");
    g.text(bar_x + w + 6, y + 11,
           fmt::format("{} hole(s), {}{}", buckets[k].first, format_bytes(buckets[k].second),
                       k == request_bucket ? "   <- the request's size" : ""),
           11, "start", k == request_bucket ? kRequest : "#222222");
    y += kBarH + 4;
  }
  // The largest holes, each with the allocated blocks of its segment.
  std::vector<Hole> largest = holes;
  std::sort(largest.begin(), largest.end(), [](const Hole& a, const Hole& b) { return a.size > b.size; });
  largest.resize(std::min<std::size_t>(largest.size(), 5));
  y += 10;
  g.text(left, y + 12, "Largest holes and what pins them (the allocated blocks of the same segment):", 12, "start",
         "#111111", "bold");
  y += 20;
  for (const auto& h : largest) {
    const auto& seg = segments[h.segment];
    std::size_t count = 0;
    Bytes bytes = 0, biggest = 0;
    for (const auto& b : seg.blocks)
      if (b.mapped && b.allocated) ++count, bytes += b.size, biggest = std::max(biggest, b.size);
    g.text(left, y + 11,
           fmt::format("hole {} in segment #{} ({}): {}", format_bytes(h.size), h.segment + 1, format_bytes(seg.size),
                       count == 1 ? fmt::format("pinned by 1 allocated block of {}", format_bytes(bytes))
                       : count    ? fmt::format("pinned by {} allocated blocks, {} in all, the largest {}", count,
                                                format_bytes(bytes), format_bytes(biggest))
                                  : "nothing allocated there: the segment could be released"),
           11);
    y += 17;
  }
  if (holes.size() > largest.size()) {
    g.text(left, y + 11, fmt::format("... and {} smaller or equal hole(s)", holes.size() - largest.size()), 11, "start",
           "#555555");
    y += 17;
  }
  return y + 24;
}

std::string block_map_svg(const CaseResult& c, const DeviceInfo& device) {
  constexpr double kWidth = 1120, kLeft = 16, kBarX = 250, kBarW = 850, kRowH = 22, kGap = 6;
  constexpr std::size_t kMaxRows = 160;
  const RunMetrics& m = c.runs.front();
  const OomRecord& o = *m.first_oom;
  BlockMapSummary s = summarize_block_map(c.oom_segments);
  Svg g;
  const double text_w = kWidth - 2 * kLeft;
  double y = 26;
  y = g.lines(kLeft, y, fmt::format("Block map at the first OOM: {}", c.label), 15, text_w, "bold", "#111111") + 2;
  y = g.lines(kLeft, y,
         fmt::format("{} OOM at step {} (event {}): requested {}; allocated {}, reserved {}, cached {}, "
                     "largest free block {}; free-cache-and-retry {}",
                     to_string(o.kind), o.step, o.event, format_bytes(o.requested_bytes),
                     format_bytes(o.allocated_bytes), format_bytes(o.reserved_bytes), format_bytes(o.cached_bytes),
                     format_bytes(o.largest_free_block), o.retried_after_freeing_cache ? "tried" : "not tried"),
         12, text_w);
  y = g.lines(kLeft, y, "What would fix it: " + oom_fix_text(c, o), 12, text_w, "bold");
  const Bytes dev_free = o.capacity_bytes > o.reserved_bytes ? o.capacity_bytes - o.reserved_bytes : 0;
  const Bytes unused = o.capacity_bytes > o.allocated_bytes ? o.capacity_bytes - o.allocated_bytes : 0;
  y = g.lines(kLeft, y,
         fmt::format("capacity {} on {}: {} not allocated ({} in {} holes, {} never reserved); "
                     "largest hole {} < request {}",
                     format_bytes(o.capacity_bytes), device_words(c, device), format_bytes(unused),
                     format_bytes(s.hole_bytes), s.holes, format_bytes(dev_free), format_bytes(s.largest_hole_bytes),
                     format_bytes(o.requested_bytes)),
         12, text_w);
  y += 10;

  // The whole capacity as one bar: allocated, cached (reserved, not allocated), never reserved.
  {
    const double total = double(std::max({o.capacity_bytes, o.reserved_bytes, o.requested_bytes, Bytes{1}}));
    const double scale = kBarW / total;
    g.text(kLeft, y + 15, fmt::format("device: {}", format_bytes(o.capacity_bytes)), 12, "start", "#111111", "bold");
    double x = kBarX;
    double w = double(o.allocated_bytes) * scale;
    g.rect(x, y, w, kRowH, kUsed, "allocated " + format_bytes(o.allocated_bytes));
    g.label_in(x, w, y + 15, "allocated " + format_bytes(o.allocated_bytes));
    x += w;
    w = double(o.cached_bytes) * scale;
    g.rect(x, y, w, kRowH, kHole, "cached (reserved, free) " + format_bytes(o.cached_bytes));
    g.label_in(x, w, y + 15, "cached " + format_bytes(o.cached_bytes), "#222222");
    x += w;
    w = double(dev_free) * scale;
    g.rect(x, y, w, kRowH, kDeviceFree, "never reserved " + format_bytes(dev_free), "#7fb77e");
    g.label_in(x, w, y + 15, "free " + format_bytes(dev_free), "#222222");
    y += kRowH + kGap;
    g.text(kLeft, y + 15, fmt::format("request: {}", format_bytes(o.requested_bytes)), 12, "start", kRequest, "bold");
    w = double(o.requested_bytes) * scale;
    g.rect(kBarX, y, w, kRowH, kRequest, "request " + format_bytes(o.requested_bytes), kRequest, R"(fill-opacity="0.25")");
    g.label_in(kBarX, w, y + 15, format_bytes(o.requested_bytes), kRequest);
    y += kRowH + 14;
  }
  y = block_map_legend(g, kLeft, y);

  if (!c.oom_segments.empty()) y = hole_summary(g, kLeft, kBarX, kBarW, y, c.oom_segments, o.requested_bytes);

  if (c.oom_segments.empty()) {
    g.text(kLeft, y, "This allocator does not report its segments; only the totals above are known.", 12);
    y += 20;
  } else {
    // The scale: the longest mapped extent (or the request). An expandable segment's unmapped
    // tail can be a hundred times longer; it is cut at the edge and labelled with its size.
    Bytes largest = o.requested_bytes;
    for (const auto& seg : c.oom_segments) {
      Bytes extent = 0;
      for (const auto& b : seg.blocks)
        if (b.mapped) extent = std::max(extent, b.offset + b.size);
      largest = std::max(largest, extent);
    }
    const bool tails = s.unmapped_bytes > 0;  // keep a fifth of the width for unmapped tails
    const double scale = (tails ? 0.8 : 1.0) * kBarW / double(std::max<Bytes>(largest, 1));
    g.text(kLeft, y,
           fmt::format("Full map: {} segment(s), {} reserved, one row each at a common scale ({} across {} the width)",
                       s.segments, format_bytes(s.segment_bytes), format_bytes(largest), tails ? "4/5 of" : "all"),
           12, "start", "#111111", "bold");
    y += 12;
    std::size_t rows = std::min(c.oom_segments.size(), kMaxRows);
    for (std::size_t i = 0; i < rows; ++i) {
      const auto& seg = c.oom_segments[i];
      bool expandable = std::any_of(seg.blocks.begin(), seg.blocks.end(), [](auto& b) { return !b.mapped; });
      Bytes mapped = 0;
      for (const auto& b : seg.blocks) mapped += b.mapped ? b.size : 0;
      std::string name = fmt::format("#{} {}{} {}", i + 1, seg.pool.empty() ? "" : seg.pool + " ",
                                     expandable ? "expandable" : "segment", format_bytes(mapped));
      g.text(kLeft, y + 15, name, 11);
      for (const auto& b : seg.blocks) {
        double x = kBarX + double(b.offset) * scale, w = double(b.size) * scale;
        if (x >= kBarX + kBarW) continue;
        const bool cut = x + w > kBarX + kBarW + 0.5;
        w = std::min(w, kBarX + kBarW - x);
        std::string title = fmt::format("segment #{} at 0x{:x}: {} block of {} at offset {}", i + 1, seg.address,
                                        block_state(b), format_bytes(b.size), format_bytes(b.offset));
        if (!b.mapped) {
          g.rect(x, y, w, kRowH, kUnmapped, title, "#999999", R"(stroke-dasharray="4 3")");
          g.label_in(x, w, y + 15, "unmapped " + format_bytes(b.size) + (cut ? " (cut)" : ""), "#555555");
        } else if (b.allocated) {
          g.rect(x, y, w, kRowH, kUsed, title);
          g.label_in(x, w, y + 15, format_bytes(b.size));
        } else {
          g.rect(x, y, w, kRowH, kHole, title);
          g.label_in(x, w, y + 15, "hole " + format_bytes(b.size), "#222222");
        }
      }
      y += kRowH + kGap;
    }
    if (rows < c.oom_segments.size()) {
      g.text(kLeft, y + 12, fmt::format("... {} more segment(s) not drawn (all are in the JSON file)",
                                        c.oom_segments.size() - rows), 11);
      y += 20;
    }
    // The request at the segments' scale: it is longer than every hole.
    g.text(kLeft, y + 15, "the failed request", 11, "start", kRequest, "bold");
    double w = double(o.requested_bytes) * scale;
    g.rect(kBarX, y, w, kRowH, kRequest, "request " + format_bytes(o.requested_bytes), kRequest, R"(fill-opacity="0.25")");
    g.label_in(kBarX, w, y + 15, format_bytes(o.requested_bytes), kRequest);
    y += kRowH + 18;
  }

  if (device.kind == DeviceKind::Sim) {
    g.text(kLeft, y, c.memory_modeled
                         ? "modeled: simulated device; this allocator's reserved memory comes from a model of the driver."
                         : "simulated device (sim), not a GPU measurement; a policy allocator such as caching decides the same on a GPU.",
           11, "start", "#555555");
    y += 16;
  }
  return g.finish(kWidth, y + 8);
}

std::string usage_csv(const CaseResult& c) {
  std::string out = "event,step,allocated_bytes,reserved_bytes\n";
  for (const auto& u : c.oom_usage)
    out += fmt::format("{},{},{},{}\n", u.event, u.step, u.allocated_bytes, u.reserved_bytes);
  return out;
}

std::string oom_events_csv(const CaseResult& c) {
  std::string out =
      "index,step,event,kind,requested_bytes,allocated_bytes,reserved_bytes,cached_bytes,"
      "largest_free_block_bytes,capacity_bytes,retried_after_freeing_cache,need_from_here_bytes,message\n";
  for (std::size_t i = 0; i < c.oom_events.size(); ++i) {
    const auto& o = c.oom_events[i];
    out += fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", i, o.step, o.event, to_string(o.kind),
                       o.requested_bytes, o.allocated_bytes, o.reserved_bytes, o.cached_bytes, o.largest_free_block,
                       o.capacity_bytes, o.retried_after_freeing_cache ? 1 : 0, o.need_from_here_bytes,
                       csv_quote(o.message));
  }
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

void write_oom_reports(const RunReport& report, const std::string& dir) {
  namespace fs = std::filesystem;
  bool any = std::any_of(report.cases.begin(), report.cases.end(), [](auto& c) { return has_oom_details(c); });
  if (!any) return;
  fs::path oom = fs::path(dir) / "oom";
  fs::create_directories(oom);
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    const CaseResult& c = report.cases[i];
    if (!has_oom_details(c)) continue;
    std::string stem = oom_file_stem(i, c);
    json state = oom_state_json(c, report.device, stem);
    state["what_would_fix_it"] = oom_diagnosis_text(report, i);  // with the settings that completed
    write_file_atomically((oom / (stem + ".json")).string(), state.dump(2) + "\n");
    write_file_atomically((oom / (stem + ".svg")).string(), block_map_svg(c, report.device));
    write_file_atomically((oom / (stem + ".timeline.csv")).string(), usage_csv(c));
    write_file_atomically((oom / (stem + ".timeline.svg")).string(), usage_svg(c));
    write_file_atomically((oom / (stem + ".ooms.csv")).string(), oom_events_csv(c));
  }
}

}  // namespace gmb
