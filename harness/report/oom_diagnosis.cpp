#include "harness/report/oom_diagnosis.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/units.h"

namespace gmb {

std::string oom_fix_text(const CaseResult& c, const OomRecord& oom) {
  const Bytes need = c.need ? c.need->peak_requested_bytes : 0;
  if (oom.kind == OomKind::Capacity) {
    const Bytes at_least = std::max(need, oom.need_from_here_bytes);
    return fmt::format("needs at least {} (short by {})", format_bytes(at_least),
                       format_bytes(at_least > oom.capacity_bytes ? at_least - oom.capacity_bytes : 0));
  }
  std::string text = fmt::format("fits with a non-fragmenting allocator (needs {}); ", format_bytes(need));
  if (oom.cached_bytes) return text + fmt::format("{} lost to fragmentation at the OOM", format_bytes(oom.cached_bytes));
  // Nothing cached: the memory went elsewhere, and "0 B lost to fragmentation" would say it
  // went nowhere. Where: rounding inside the live blocks, and what the allocator left unreserved
  // (its growth step, or the device's own pieces, were larger than what was left).
  const Bytes unreserved = oom.capacity_bytes > oom.reserved_bytes ? oom.capacity_bytes - oom.reserved_bytes : 0;
  if (!oom.live_requested_bytes)  // (a case file of an earlier version)
    return text + fmt::format("nothing cached at the OOM: {} allocated, {} left unreserved for a request of {}",
                              format_bytes(oom.allocated_bytes), format_bytes(unreserved), format_bytes(oom.requested_bytes));
  const Bytes requested = *oom.live_requested_bytes;
  const Bytes rounding = oom.allocated_bytes > requested ? oom.allocated_bytes - requested : 0;
  return text + fmt::format("nothing cached at the OOM: {} lost to rounding inside live blocks ({} allocated for {} "
                            "requested), {} left unreserved for a request of {}",
                            format_bytes(rounding), format_bytes(oom.allocated_bytes), format_bytes(requested),
                            format_bytes(unreserved), format_bytes(oom.requested_bytes));
}

SameCapacityCases same_capacity_cases(const RunReport& report, std::size_t index) {
  SameCapacityCases out;
  const CaseResult& c = report.cases[index];
  // On a GPU the capacity left after the ballast differs a little from case to case: the
  // capacity asked for is what makes two cases comparable.
  auto capacity = [](const CaseResult& x) {
    return x.capacity_requested_bytes ? x.capacity_requested_bytes : x.capacity_bytes;
  };
  for (std::size_t i = 0; i < report.cases.size(); ++i) {
    const CaseResult& o = report.cases[i];
    if (i == index || o.workload_label != c.workload_label || capacity(o) != capacity(c)) continue;
    const std::string& label = o.allocator_label.empty() ? o.allocator : o.allocator_label;
    out.others.push_back(label);
    bool clean = o.error.empty() && !o.runs.empty();
    for (const auto& m : o.runs) clean = clean && m.ooms == 0;
    if (clean) out.completed.push_back(label);
  }
  return out;
}

std::string oom_diagnosis_text(const RunReport& report, std::size_t index) {
  const CaseResult& c = report.cases[index];
  if (c.runs.empty() || !c.runs.front().first_oom) return "";
  const OomRecord& o = *c.runs.front().first_oom;
  std::string text = oom_fix_text(c, o);
  if (o.kind != OomKind::Fragmentation) return text;
  const SameCapacityCases same = same_capacity_cases(report, index);
  if (same.others.empty()) return text;
  if (same.completed.empty()) return text + "; no other setting completed at this capacity";
  return text + "; completed at this capacity: " + fmt::format("{}", fmt::join(same.completed, ", "));
}

}  // namespace gmb
