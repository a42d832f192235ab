// The bytes in use event by event: the timeline CSV of a run and the allocated/reserved series
// up to a case's first OOM (CSV and SVG, in DIR/oom/ next to the block map).
#pragma once

#include <string>
#include <vector>

#include "harness/run/results.h"

namespace gmb {

// Writes the timeline CSV: event,action,id,bytes,allocated_bytes,reserved_bytes,segments,oom; whole or
// not at all (FileWriteError names the file).
void write_timeline_csv(const std::string& path, const std::vector<TimelineRow>& rows);

// Allocated and reserved bytes per event up to the first OOM, with the capacity line.
std::string usage_svg(const CaseResult& c);
std::string usage_csv(const CaseResult& c);

}  // namespace gmb
