#include "harness/report/oom_block_map.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <numeric>

#include <fmt/format.h>

#include "common/units.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/report/oom_json.h"
#include "harness/report/report.h"
#include "harness/report/svg.h"
#include "harness/report/table_format.h"
#include "harness/report/timeline_report.h"
#include "harness/run/json_text.h"

namespace gmb {

using nlohmann::json;
using namespace svg;

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

std::string device_words(const CaseResult& c, const DeviceInfo& d) {
  std::string s = fmt::format("{} ({})", d.name, to_string(d.kind));
  if (d.kind == DeviceKind::Sim && c.memory_modeled) s += ", reserved bytes modeled";
  return s;
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
    write_file_atomically((oom / (stem + ".json")).string(), json_text(state, 2) + "\n");
    write_file_atomically((oom / (stem + ".svg")).string(), block_map_svg(c, report.device));
    write_file_atomically((oom / (stem + ".timeline.csv")).string(), usage_csv(c));
    write_file_atomically((oom / (stem + ".timeline.svg")).string(), usage_svg(c));
    write_file_atomically((oom / (stem + ".ooms.csv")).string(), oom_events_csv(c));
  }
}

}  // namespace gmb
