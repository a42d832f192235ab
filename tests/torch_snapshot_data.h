// The real PyTorch snapshots of tests/data/torch_snapshots/ (recorded on the H200 with
// scripts/record_torch_training.py), shared by the sim and GPU replay tests.
#pragma once

#include <cstdlib>
#include <string>
#include <unordered_map>

#include "allocators/allocator.h"

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
  const WholeContent content = in->read_rest(gmb::kMaxSnapshotBytes, "the snapshot");
  return convert_pytorch_snapshot(content, path);
}

// A snapshot's ops through an allocator as PyTorch ran them (a free of a block whose allocation
// failed is skipped); returns the blocks still live, by id.
inline std::unordered_map<BufferId, DevPtr> replay_snapshot_ops(const PyTorchSnapshot& s, Allocator& allocator) {
  std::unordered_map<BufferId, DevPtr> live;
  auto forget_returned_early = [&] {  // taken back while they waited (a retry, empty_cache): no free follows
    for (DevPtr early : allocator.take_returned_early())
      for (auto it = live.begin(); it != live.end(); ++it)
        if (it->second == early) {
          live.erase(it);
          break;
        }
  };
  for (const Op& op : s.ops) {
    if (op.kind == Op::Kind::Alloc) {
      auto p = allocator.allocate(op.bytes, op.stream);
      forget_returned_early();
      if (p) live[op.id] = *p;
    } else if (op.kind == Op::Kind::EmptyCache) {  // the program's torch.cuda.empty_cache()
      allocator.empty_cache();
      forget_returned_early();
    } else if (op.kind == Op::Kind::FreeRequested) {  // freed while another stream uses it
      if (auto it = live.find(op.id); it != live.end()) allocator.free_requested(it->second);
    } else if (auto it = live.find(op.id); it != live.end()) {
      allocator.deallocate(it->second);
      live.erase(it);
    }
  }
  return live;
}

}  // namespace gmb::testing
