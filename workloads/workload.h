// A workload generates allocation events (ops) step by step and, on a real GPU, runs the
// compute between them. It never knows which allocator serves it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/types.h"

namespace gmb {

using BufferId = std::uint64_t;

struct Op {
  // FreeRequested: the program freed the buffer, but its memory stays taken until the buffer's
  // Free, which comes later (another stream still used it: PyTorch's record_stream, a
  // snapshot's free_requested long before its free_completed). What it changes is the count of
  // allocated bytes: `caching` stops counting the block here, as PyTorch's allocated_bytes does;
  // the other allocators count it until the Free. At most one per buffer, before its Free.
  // EmptyCache: the program returned the allocator's cached memory to the device
  // (torch.cuda.empty_cache(): a snapshot's segment releases that no allocation made). No buffer.
  enum class Kind : std::uint8_t { Alloc, Free, FreeRequested, Compute, EmptyCache };
  Kind kind = Kind::Alloc;
  BufferId id = 0;      // Alloc/Free/FreeRequested: the buffer; Compute: an index the workload understands
  Bytes bytes = 0;      // Alloc: the request
  StreamId stream = 0;
  // Alloc/Free/FreeRequested: the buffer's slot, a small number each live buffer has so that the harness keeps
  // per-buffer state in arrays (harness/run/buffer_slots.h); 0 is no buffer. Set by the harness
  // unless the workload gives slots itself (Workload::gives_slots).
  std::uint32_t slot = 0;
  std::uint64_t source_line = 0;  // trace replay: the line (or event index) in the trace, for messages
};

// Alloc, Free and FreeRequested are the allocator's calls for one buffer; Compute and EmptyCache
// are not (the runner makes them one at a time, between runs of calls).
inline bool is_buffer_call(Op::Kind kind) { return kind <= Op::Kind::FreeRequested; }

struct StepInfo {
  double real_tokens = 0;    // tokens that carry data
  double padded_tokens = 0;  // tokens including padding
  // A workload of unknown length (num_steps() == kUnknownSteps) ends with a step that has no
  // ops and sets this; that step is not run.
  bool end = false;
  // The step goes on: the next step_ops call, for the same step, appends its next piece. A
  // streamed trace gives its steps in pieces small enough to stay in the cache between the
  // reader, the need and the runner; a step is still one step of the results. Callers that want
  // whole steps use whole_step_ops.
  bool more = false;
};

// Failed allocations of the run a trace recorded (not replayed): the count and the event
// positions (the first ones) where they happened.
struct RecordedOoms {
  std::uint64_t count = 0;
  std::vector<std::uint64_t> events;
  // false: the replay stopped before the reader reached the trace's end, and the figures cover
  // the part read (the reader runs up to a step ahead of the replay, so maybe more than it ran)
  bool whole_trace = true;
};

// A compute op's modeled time on the simulated device: the GPU's time for its kernel and the host's
// for launching it (devices/step_time_model.h places both on the modeled timeline).
struct ModeledKernel {
  double gpu_seconds = 0;
  double launch_seconds = 0;
};

// What compute may use: where the live buffers are and how to run.
struct ComputeContext {
  bool real_gpu = false;            // run kernels (true) or return modeled seconds (false)
  void* stream = nullptr;           // cudaStream_t of stream 0 on the GPU
  std::uint64_t step = 0;           // the step whose ops are running
  // A live buffer's pointer, nullopt when it is not allocated (OOM); on a real GPU only (the runner
  // keeps no id lookup on sim, where compute returns modeled seconds and touches no buffer).
  std::function<std::optional<DevPtr>(BufferId)> buffer;
};

class Workload {
 public:
  virtual ~Workload() = default;
  virtual std::string kind() const = 0;   // "hole_pattern", "transformer", "trace"
  virtual std::string label() const = 0;  // kind with its parameters, for tables
  // kUnknownSteps: known only at the end (a trace read as a stream); see StepInfo::end.
  static constexpr std::uint64_t kUnknownSteps = ~std::uint64_t(0);
  virtual std::uint64_t num_steps() const = 0;
  // Appends the ops of step `step` (0-based), or of its next piece where it sets info.more.
  // Deterministic: a workload made again gives the same ops.
  virtual void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo& info) = 0;
  // True when step_ops(k + 1) may run on another thread while compute() runs the ops of step
  // k (the workload keeps two steps' state): the runner then makes the next step's ops ahead,
  // off the thread that launches kernels and calls the allocator, as a data loader would.
  virtual bool makes_ops_ahead() const { return false; }
  // True when step_ops sets Op::slot itself (a trace reader that already keeps its live ids):
  // every alloc a slot from 1 up that no other live buffer has, every free its buffer's slot
  // (0 for an id that is not live), and slots_end() above every slot given so far. Otherwise
  // the harness gives the slots (harness/run/buffer_slots.h).
  virtual bool gives_slots() const { return false; }
  virtual std::uint32_t slots_end() const { return 0; }
  // Called once before the first step (e.g. to create a cuBLAS handle).
  virtual void prepare(ComputeContext& /*ctx*/) {}
  // Runs a Compute op. Returns its modeled time when !ctx.real_gpu, else zeros after launching work.
  virtual ModeledKernel compute(const Op& /*op*/, ComputeContext& /*ctx*/) { return {}; }
  virtual void finish() {}
  // Where an op came from in the user's program ("train.py:88 in forward"), "" if unknown: shown
  // with an OOM. May be called while the next step's ops are being made.
  virtual std::string op_origin(const Op& /*op*/) const { return {}; }
  // A replayed trace's own failed allocations, once the workload has run to its end.
  virtual std::optional<RecordedOoms> recorded_ooms() const { return std::nullopt; }
  // What the workload found while it ran, for the user (a trace reader's notes), one line each.
  virtual std::vector<std::string> notes() const { return {}; }
};

// Appends every piece of step `step` (StepInfo::more) to out; info is the step's: its tokens
// summed, `end` only for a step with no ops that says so.
void whole_step_ops(Workload& workload, std::uint64_t step, std::vector<Op>& out, StepInfo& info);

}  // namespace gmb
