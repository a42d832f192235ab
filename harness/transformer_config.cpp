// Placeholder until the transformer workload lands (issue 5).
#include "harness/config.h"

namespace gmb {

std::vector<std::string> transformer_keys() { return {}; }

WorkloadSpec parse_transformer_workload(const YamlReader& y, const YAML::Node& n, const std::string& key,
                                        const std::string&) {
  y.fail(n, key, "the transformer workload is not built yet");
}

}  // namespace gmb
