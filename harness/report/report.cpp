#include "harness/report/report.h"

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "harness/report/csv_report.h"
#include "harness/report/json_report.h"
#include "harness/report/latex_report.h"
#include "harness/report/markdown_report.h"
#include "harness/report/oom_block_map.h"
#include "harness/report/timeline_report.h"
#include "harness/run/json_text.h"

namespace gmb {

std::string utc_now(const char* format) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, format, &tm);
  return buf;
}

void write_reports(const RunReport& r, const std::string& dir, const std::vector<std::string>& formats) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  auto has = [&](const char* f) { return std::find(formats.begin(), formats.end(), f) != formats.end(); };
  if (has("json")) write_file_atomically((fs::path(dir) / "results.json").string(), json_text(to_json(r), 2) + "\n");
  if (has("csv")) write_file_atomically((fs::path(dir) / "results.csv").string(), csv_table(r));
  if (has("md")) write_file_atomically((fs::path(dir) / "results.md").string(), markdown_table(r));
  if (has("latex")) write_file_atomically((fs::path(dir) / "results.tex").string(), latex_table(r));
  // A case that could not run to its end (its error says why) has the timeline of part of its
  // workload: none is written for it, as replay writes no --timeline then.
  auto whole_timeline = [](const CaseResult& c) { return !c.timeline.empty() && c.error.empty(); };
  if (std::any_of(r.cases.begin(), r.cases.end(), whole_timeline)) {
    fs::create_directories(fs::path(dir) / "timelines");
    for (std::size_t i = 0; i < r.cases.size(); ++i)
      if (whole_timeline(r.cases[i]))
        write_timeline_csv((fs::path(dir) / "timelines" / fmt::format("case{:02}.csv", i)).string(),
                           r.cases[i].timeline);
  }
  write_oom_reports(r, dir);  // oom/: block map, usage series and OOM list per case with an OOM
}

}  // namespace gmb
