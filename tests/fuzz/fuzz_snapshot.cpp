// libFuzzer target for the pickle reader and the snapshot conversion (scripts/sanitize_fuzz.sh):
//   cmake -S . -B build-san -DCMAKE_CXX_COMPILER=clang++ -DGMB_BUILD_FUZZ=ON
//   cmake --build build-san --target fuzz_snapshot
//   build-san/tests/fuzz/fuzz_snapshot tests/data/torch_snapshots/synthetic -max_total_time=600
// Any input must convert or throw TraceError; anything else (a crash, another exception, a
// sanitizer report) is a finding.
#include <cstdint>
#include <string_view>

#include "workloads/pytorch_snapshot.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    gmb::convert_pytorch_snapshot(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.pickle");
  } catch (const gmb::TraceError&) {
  }
  return 0;
}
