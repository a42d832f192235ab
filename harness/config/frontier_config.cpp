// YAML `frontier:` section: the defaults of `gpumembench frontier --config FILE`.
//
//   frontier: {param: capacity, lo: 1GiB, hi: 4GiB, resolution: 2MiB}
//   frontier: {param: batch, lo: 1, hi: 64}
#include <algorithm>

#include <fmt/format.h>

#include "harness/config/config.h"

namespace gmb {

const std::vector<std::string>& frontier_params() {
  static const std::vector<std::string> params = {"capacity", "batch", "seq_len"};
  return params;
}

FrontierSpec parse_frontier_section(const YamlReader& y, const YAML::Node& n, const Config& c) {
  y.expect_map(n, "frontier", {"param", "lo", "hi", "resolution"});
  FrontierSpec f;
  if (n["param"]) f.param = y.choice(n["param"], "frontier.param", frontier_params());
  const bool capacity = f.param == "capacity";
  auto value = [&](const char* k) -> std::uint64_t {
    std::string key = std::string("frontier.") + k;
    if (!capacity) return y.count(n[k], key, 1);
    const Bytes v = y.size(n[k], key, false);
    if (v > kMaxDeviceBytes)
      y.fail(n[k], key, fmt::format("{} is larger than 1024TiB, the largest device accepted (valid: 1 B to 1024TiB)",
                                    n[k].Scalar()));
    return v;
  };
  if (n["lo"]) f.lo = value("lo");
  if (n["hi"]) f.hi = value("hi");
  if (n["resolution"]) f.resolution = value("resolution");
  if (f.lo && f.hi && f.lo > f.hi)
    y.fail(n["lo"], "frontier.lo", fmt::format("lo ({}) is above hi ({})", n["lo"].Scalar(), n["hi"].Scalar()));
  if (!capacity)
    for (std::size_t i = 0; i < c.workloads.size(); ++i) {
      const auto& w = c.workloads[i];
      bool has = std::any_of(w.params.begin(), w.params.end(), [&](auto& kv) { return kv.first == f.param; });
      if (!has)
        y.fail(n["param"], "frontier.param",
               fmt::format("workloads[{}] ({}) cannot vary '{}' (valid for it: capacity{}{})", i, w.kind, f.param,
                           w.params.empty() ? "" : ", ",
                           [&] {
                             std::string s;
                             for (const auto& kv : w.params) s += (s.empty() ? "" : ", ") + kv.first;
                             return s;
                           }()));
    }
  return f;
}

}  // namespace gmb
