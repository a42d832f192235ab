// libFuzzer target: the text trace readers, native CSV and RMM log, through open_trace (format
// detection) and to the last op, with the reader's checks (ids, sizes, streams, frees). Any input
// must read or throw TraceError. Corpus: tests/fuzz/corpus/native_csv and corpus/rmm_log.
#include <cstdint>
#include <vector>

#include "fuzz_input_file.h"
#include "workloads/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // A pickle goes to the snapshot reader, which fuzz_snapshot covers.
  if (size && (data[0] == 0x80 || data[0] == '(' || data[0] == ']' || data[0] == '}')) return 0;
  const std::string path = fuzz_input_file(data, size, ".csv");
  try {
    auto source = gmb::open_trace(path);
    std::vector<gmb::Op> ops;
    while (source->read(ops, 4096)) ops.clear();
  } catch (const gmb::TraceError&) {
  }
  return 0;
}
