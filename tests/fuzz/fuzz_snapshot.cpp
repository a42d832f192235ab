// libFuzzer target for the pickle reader and the snapshot conversion (scripts/sanitize_fuzz.sh):
//   cmake -S . -B build-san -DCMAKE_CXX_COMPILER=clang++ -DGMB_BUILD_FUZZ=ON
//   cmake --build build-san --target fuzz_snapshot
//   build-san/tests/fuzz/fuzz_snapshot tests/data/torch_snapshots/synthetic -max_total_time=600
// Any input must convert or throw TraceError, and the streamed conversion must give what the
// two-pass one gives (the same ops, notes and events, or the same error); anything else (a
// crash, another exception, a difference, a sanitizer report) is a finding.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "../snapshot_text.h"
#include "workloads/pytorch_snapshot.h"

namespace {

template <class Convert>
std::string text_of(Convert&& convert) {
  try {
    return gmb::testing::snapshot_text(convert());
  } catch (const gmb::TraceError& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::string streamed = text_of([&] { return gmb::convert_pytorch_snapshot(input, "fuzz.pickle"); });
  const std::string two_pass = text_of([&] { return gmb::convert_pytorch_snapshot_unstreamed(input, "fuzz.pickle"); });
  if (streamed != two_pass) {
    std::fprintf(stderr, "streamed:\n%s\ntwo-pass:\n%s\n", streamed.substr(0, 2000).c_str(), two_pass.substr(0, 2000).c_str());
    std::abort();
  }
  return 0;
}
