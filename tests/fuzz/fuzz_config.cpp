// libFuzzer target: the YAML config reader (load_config: YAML syntax, every section, every
// workload kind, allocator options). Any input must load or throw ConfigError; anything else (a
// crash, another exception, a sanitizer report) is a finding. Corpus: tests/fuzz/corpus/config.
#include <cstdint>

#include "fuzz_input_file.h"
#include "harness/config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = fuzz_input_file(data, size, ".yaml");
  try {
    gmb::load_config(path);
  } catch (const gmb::ConfigError&) {
  }
  return 0;
}
