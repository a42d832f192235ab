// The state at a case's first OOM, as files a person can read: the segment/block map as JSON
// and as an SVG picture, the allocated-vs-reserved series up to the OOM (CSV and SVG), and
// every OOM of the run (CSV). Written under DIR/oom/ by write_reports; the usage series is
// drawn by timeline_report.h.
#pragma once

#include <cstddef>
#include <string>

#include <nlohmann/json.hpp>

#include "harness/run/results.h"

namespace gmb {

// True when the case's first run recorded an OOM with its details (block map, series).
bool has_oom_details(const CaseResult& c);

// "case03_caching_expandable_segments_True": the index keeps names unique, the allocator label
// makes them readable. Files are DIR/oom/<stem>.json, .svg, .timeline.csv, .timeline.svg, .ooms.csv.
std::string oom_file_stem(std::size_t index, const CaseResult& c);

// Counts over a block map: what the picture shows, as numbers.
struct BlockMapSummary {
  std::size_t segments = 0, allocated_blocks = 0, holes = 0;
  Bytes segment_bytes = 0, allocated_bytes = 0, hole_bytes = 0, largest_hole_bytes = 0, unmapped_bytes = 0;
};
BlockMapSummary summarize_block_map(const std::vector<SegmentInfo>& segments);

nlohmann::json oom_state_json(const CaseResult& c, const DeviceInfo& device, const std::string& stem);
// One row per segment: used blocks, holes (free blocks), unmapped tail; sizes labelled; the
// device's capacity bar and the failed request drawn at the same scale.
std::string block_map_svg(const CaseResult& c, const DeviceInfo& device);
// Every OOM of the first run, one row each.
std::string oom_events_csv(const CaseResult& c);

// Writes the files above for every case with OOM details into dir/oom/.
void write_oom_reports(const RunReport& report, const std::string& dir);

}  // namespace gmb
