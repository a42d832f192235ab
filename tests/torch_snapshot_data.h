// The real PyTorch snapshots of tests/data/torch_snapshots/ (recorded on the H200 with
// scripts/record_torch_training.py), shared by the sim and GPU replay tests.
#pragma once

#include <cstdlib>
#include <string>

#include "test_helpers.h"
#include "workloads/byte_input.h"
#include "workloads/pytorch_snapshot.h"

namespace gmb::testing {

inline std::string torch_snapshot_dir() {
  const char* env = std::getenv("GMB_TORCH_SNAPSHOT_DIR");  // another set of recordings, same layout
  return env ? env : source_path("tests/data/torch_snapshots");
}

// The whole file (plain or gzip) converted; the tests need every op at once.
inline PyTorchSnapshot load_torch_snapshot(const std::string& path) {
  auto in = ByteInput::open(path);
  std::string content;
  while (true) {
    auto b = in->buffered();
    content.append(b.data(), b.size());
    in->consume(b.size());
    if (!in->refill()) break;
  }
  return convert_pytorch_snapshot(content, path);
}

}  // namespace gmb::testing
