// The one JSON form of an OOM record, shared by every file that holds one: results.json (a
// case's "oom"), the oom/ block-map files and frontier.json (each probe's first OOM). compare
// reads it back from results.json.
#pragma once

#include <nlohmann/json.hpp>

#include "harness/run/results.h"

namespace gmb {

// step, event, kind, requested/allocated/reserved/cached bytes, largest_free_block_bytes,
// capacity_bytes, retried_after_freeing_cache, need_from_here_bytes, fragmentation, message,
// and origin where the trace recorded one.
nlohmann::json oom_record_json(const OomRecord& oom);

}  // namespace gmb
