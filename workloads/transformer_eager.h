// The pytorch_eager style of the transformer workload: the allocations PyTorch 2.11's eager
// mode makes for one training step (forward under autocast or not, cross-entropy, backward
// through the autograd engine, AdamW, zero_grad(set_to_none=True)), op by op and tensor by
// tensor, at the real sizes and in the real order. Calibrated against real runs recorded on an
// H200 (scripts/record_torch_training.py, tests/data/torch_train/); the model code of that
// script is the model described here.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

#include "workloads/transformer.h"

namespace gmb {

// Where the generator puts its events.
class EagerSink {
 public:
  virtual ~EagerSink() = default;
  virtual BufferId alloc(Bytes bytes, const char* name) = 0;              // a buffer of this step
  virtual void alloc_as(BufferId id, Bytes bytes, const char* name) = 0;  // a persistent one
  virtual void free(BufferId id, const char* name) = 0;
};

struct EagerParam {
  std::uint64_t elems = 0;
  const char* name = "";
};

// The parameters in model.parameters() order (the optimizer's and zero_grad's), and the order
// in which model.to(device) allocates them (a module's children before its own parameters).
std::vector<EagerParam> eager_params(const TransformerParams& p);
std::vector<std::size_t> eager_param_alloc_order(const TransformerParams& p);
// Bytes per parameter element (fp32 under autocast and fp32; bf16 for pure bf16).
Bytes eager_param_elem(const TransformerParams& p);
// Persistent buffers besides parameters and optimizer states: the cuBLAS workspaces of the
// forward and backward threads (one per handle), the cuBLASLt workspace, and non-persistent
// module buffers (llama's inv_freq).
constexpr BufferId kEagerWorkspaceFwd = (1ull << 32) - 2;
constexpr BufferId kEagerWorkspaceLt = (1ull << 32) - 3;
constexpr BufferId kEagerWorkspaceBwd = (1ull << 32) - 4;
constexpr BufferId kEagerInvFreq = (1ull << 32) - 5;
constexpr Bytes kEagerCublasWorkspace = 32ull << 20;  // CUBLAS_WORKSPACE_CONFIG :4096:8 on Hopper
constexpr Bytes kEagerLtWorkspace = 1ull << 20;       // CUBLASLT_WORKSPACE_SIZE default
Bytes eager_persistent_bytes(const TransformerParams& p, BufferId id);
// Persistent ids of parameter t: weight, AdamW exp_avg, exp_avg_sq, and (fused) the step.
BufferId eager_weight_id(std::size_t t);
BufferId eager_exp_avg_id(std::size_t t);
BufferId eager_exp_avg_sq_id(std::size_t t);
BufferId eager_step_id(std::size_t t);

// One training step (step 0 also creates the parameters, the workspaces and AdamW's states).
// kept_grads: the parameters' gradients kept across steps (zero_grad_to_none = false), carried
// from one step to the next by the caller; reset at the first step.
void eager_train_step(const TransformerParams& p, const BatchShape& shape, bool first, EagerSink& sink,
                      std::vector<BufferId>& kept_grads);

// The global-memory scratch that PyTorch's CUDA reduction (Reduce.cuh, setReduceConfig)
// allocates to sum a contiguous [rows x cols] tensor over its rows (a bias gradient):
// {staging buffer bytes, semaphore bytes}, {0, 0} when the reduction needs none. For a GPU with
// `sms` multiprocessors of `threads_per_sm` threads (H200: 132, 2048).
std::pair<Bytes, Bytes> cuda_column_sum_scratch(std::uint64_t rows, std::uint64_t cols, int sms = 132,
                                                int threads_per_sm = 2048);

}  // namespace gmb
