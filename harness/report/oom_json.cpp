#include "harness/report/oom_json.h"

namespace gmb {

nlohmann::json oom_record_json(const OomRecord& o) {
  nlohmann::json j{{"step", o.step},
                   {"event", o.event},
                   {"kind", to_string(o.kind)},
                   {"requested_bytes", o.requested_bytes},
                   {"allocated_bytes", o.allocated_bytes},
                   {"reserved_bytes", o.reserved_bytes},
                   {"cached_bytes", o.cached_bytes},
                   {"live_requested_bytes", o.live_requested_bytes ? nlohmann::json(*o.live_requested_bytes) : nlohmann::json()},
                   {"largest_free_block_bytes", o.largest_free_block},
                   {"capacity_bytes", o.capacity_bytes},
                   {"retried_after_freeing_cache", o.retried_after_freeing_cache},
                   {"need_from_here_bytes", o.need_from_here_bytes},
                   {"fragmentation", o.fragmentation()},
                   {"message", o.message}};
  if (!o.origin.empty()) j["origin"] = o.origin;
  return j;
}

}  // namespace gmb
