// What an OOM means and what would fix it, in words a reader can act on: for a capacity OOM the
// capacity the workload needs; for a fragmentation OOM the bytes lost to fragmentation and the
// settings of the same config that completed at the same capacity.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "harness/run/results.h"

namespace gmb {

// capacity: "needs at least 60.23 GiB (short by 22.98 GiB)"; fragmentation: "fits with a
// non-fragmenting allocator (needs 22.21 GiB); 2.33 GiB lost to fragmentation at the OOM".
// The need is the workload's peak of live requested bytes (WorkloadNeed); the bytes lost are
// those reserved but not allocated at the OOM.
std::string oom_fix_text(const CaseResult& c, const OomRecord& oom);

// The other cases of the report with the same workload at the same capacity, and of those the
// ones that ran every repeat without an OOM (allocator labels, in report order).
struct SameCapacityCases {
  std::vector<std::string> others, completed;
};
SameCapacityCases same_capacity_cases(const RunReport& report, std::size_t index);

// oom_fix_text, and for a fragmentation OOM where the config ran other settings at this
// capacity "; completed at this capacity: A, B" (or "; no other setting completed at this
// capacity").
std::string oom_diagnosis_text(const RunReport& report, std::size_t index);

}  // namespace gmb
