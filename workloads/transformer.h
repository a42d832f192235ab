// A transformer, step by step, in one of two styles:
//  - pytorch_eager (the default): the allocations PyTorch 2.11's eager mode makes, op by op and
//    tensor by tensor, for GPT-, Llama- and BERT-style models trained with autocast/bf16/fp32,
//    explicit or scaled_dot_product_attention, and AdamW (transformer_eager.cpp; calibrated
//    against recorded PyTorch runs in tests/data/torch_train/);
//  - korthikanti: a Megatron-style decoder at the per-tensor sizes of Korthikanti et al. 2022,
//    "Reducing Activation Recomputation in Large Transformer Models" (training with
//    recomputation, or inference with a growing KV cache), with the GEMMs and memory-touching
//    kernels between them as Compute ops.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "workloads/seq_len.h"
#include "workloads/workload.h"

namespace gmb {

enum class DType { BF16, FP16, FP32 };
enum class Style { PytorchEager, Korthikanti };
// pytorch_eager: the model family, how it computes, and which attention it runs.
enum class Family { Gpt, Llama, Bert };
enum class Precision { AutocastBf16, Bf16, Fp32 };  // autocast: fp32 parameters, bf16 matmuls
enum class Attention { Explicit, SdpaFlash, SdpaMemEfficient };
enum class Recompute { None, Selective, Full };
enum class TransformerMode { Train, Inference };
// Adam as PyTorch runs it: foreach (the default on CUDA: one fp32 temporary per parameter, all
// alive at once, multi-tensor kernels), fused (no temporaries), single_tensor (foreach=False:
// one temporary at a time, one kernel per tensor).
enum class Optimizer { Foreach, Fused, SingleTensor };
const char* to_string(DType t);
const char* to_string(Recompute r);
const char* to_string(TransformerMode m);
const char* to_string(Optimizer o);
const char* to_string(Style s);
const char* to_string(Family f);
const char* to_string(Precision p);
const char* to_string(Attention a);
Bytes dtype_bytes(DType t);

struct TransformerParams {
  Style style = Style::PytorchEager;
  // pytorch_eager only (korthikanti uses dtype and is a GPT-style decoder).
  Family family = Family::Gpt;
  Precision precision = Precision::AutocastBf16;
  Attention attention = Attention::Explicit;
  double dropout = 0;              // p of every dropout (0: none runs, as F.dropout(p=0) allocates nothing)
  std::uint64_t kv_heads = 0;      // llama: grouped-query attention (0: = heads)
  std::uint64_t ffn = 0;           // MLP width (0: ffn_mult x hidden)
  std::uint64_t max_positions = 0; // gpt: learned positions (0: the longest sequence); bert: 512
  bool zero_grad_to_none = true;   // optimizer.zero_grad(set_to_none=True); false: grads zeroed, kept
  std::string preset;              // for labels
  std::uint64_t layers = 2;
  std::uint64_t hidden = 256;
  std::uint64_t heads = 4;
  std::uint64_t ffn_mult = 4;
  std::uint64_t vocab = 50257;
  std::uint64_t batch = 2;
  DType dtype = DType::BF16;
  std::uint64_t steps = 10;
  SeqLenSpec seq_len;
  Recompute recompute = Recompute::None;
  TransformerMode mode = TransformerMode::Train;
  Optimizer optimizer = Optimizer::Foreach;
  // Inference: tokens generated per request, and tokens added to the KV cache per regrowth
  // (1: the cache is re-allocated for every token, as torch.cat in a naive decoder does).
  std::uint64_t generate = 64;
  std::uint64_t kv_block = 1;
  // The cuBLAS workspace (allocated through the allocator under test, as PyTorch does; 0: none,
  // cuBLAS then runs without one).
  Bytes cublas_workspace = 32ull << 20;
};

// Korthikanti et al. per-layer activation memory, in bytes, for sequence s, batch b:
// 16-bit: attention 11sbh + 5as^2b, MLP 19sbh, layer norms 4sbh (with ffn_mult 4). Other
// element sizes e scale every tensor except the 1-byte dropout masks:
// attention (5e+1)sbh + (2e+1)as^2b, MLP (e + 2*ffn_mult*e + 1)sbh, layer norms 2e*sbh.
struct ActivationBytes {
  Bytes attention = 0, mlp = 0, layer_norm = 0;
  Bytes total() const { return attention + mlp + layer_norm; }
};
ActivationBytes korthikanti_layer_bytes(const TransformerParams& p, std::uint64_t s, std::uint64_t b);

// Parameters of the model (embedding tied with the output layer).
std::uint64_t transformer_param_count(const TransformerParams& p);

// What one Compute op does; exposed for tests (operand bounds) and for the modeled time.
struct GemmDesc {
  // cuBLAS column-major: C[m x n] = op(A) op(B), batched with strides (elements).
  bool trans_a = false, trans_b = false;
  std::uint64_t m = 0, n = 0, k = 0, batch = 1;
  BufferId a = 0, b = 0, c = 0;
  Bytes a_offset = 0, b_offset = 0, c_offset = 0;  // bytes into the buffer
  std::uint64_t lda = 0, ldb = 0, ldc = 0;
  std::uint64_t stride_a = 0, stride_b = 0, stride_c = 0;
  bool accumulate = false;  // beta = 1 (weight gradients)
};

// Elements each operand of a GEMM spans (batch strides included), to check they fit their buffers.
struct GemmExtents {
  std::uint64_t a = 0, b = 0, c = 0;
};
GemmExtents gemm_extents(const GemmDesc& g);

// A view of buffer ids (inputs or outputs of a Touch), kept in the workload's id pool.
struct IdSpan {
  const BufferId* first = nullptr;
  const BufferId* last = nullptr;
  const BufferId* begin() const { return first; }
  const BufferId* end() const { return last; }
  std::size_t size() const { return std::size_t(last - first); }
};

struct ComputeDesc {
  enum class Kind : std::uint8_t { Gemm, Touch };
  Kind kind = Kind::Touch;
  const char* name = "";  // a string literal
  GemmDesc gemm;
  // Touch: one kernel that reads every input buffer once and writes every output buffer once;
  // the ids are in the workload's pool (TransformerWorkload::inputs/outputs).
  std::uint32_t first_id = 0;
  std::uint16_t n_in = 0, n_out = 0;
  double flops = 0;
  double bytes = 0;  // memory traffic
};

// The simulated step time of one kernel (modeled), fitted to the H200 (NVIDIA H200, driver 580.159,
// CUDA 13.0, cuBLAS of CUDA 13.0) by scripts/probe/step_probe.cpp: every GEMM and touch kernel of 12
// steps of dynamic_seq and of fixed_seq, each timed between two CUDA events with the GPU kept busy
// before it (results/h200/probe/step/; docs/STEP_TIME.md). Least squares over the 22 steps after the
// first; the GEMMs whose cuBLAS call took over 150 us on the host (a shape's first call) are left out.
struct ModelRates {
  // bf16/fp16 GEMMs whose leading dimensions and batch strides are multiples of 8 elements and
  // whose operands start on 16-byte boundaries (10,989 GEMMs; mean error 7%):
  //   t = flops / gemm_flops + bytes written / gemm_write_bytes_per_s + bytes read / gemm_read_bytes_per_s + gemm_fixed_s
  double gemm_flops = 1218e12;
  double gemm_write_bytes_per_s = 1.66e12;
  double gemm_read_bytes_per_s = 5.30e12;
  double gemm_fixed_s = 4.09e-6;
  // The others take cuBLAS's slower kernels (t = flops / rate + fixed): batched ones with an even
  // leading dimension (attention at a length that is not a multiple of 8: 1,003 GEMMs), with an
  // odd one (575), and single ones (the LM head at vocab 50257: 63).
  double gemm_unaligned_even_flops = 88e12, gemm_unaligned_even_fixed_s = 8.87e-6;
  double gemm_unaligned_odd_flops = 51e12, gemm_unaligned_odd_fixed_s = 8.33e-6;
  double gemm_unaligned_single_flops = 124e12, gemm_unaligned_single_fixed_s = 110.7e-6;
  double flops_fp32 = 50e12;    // assumption (not measured): FP32 without tensor cores
  // The touch kernel (reads and writes whole buffers): 8,426 kernels, t = bytes / rate + fixed.
  double bytes_per_s = 4.06e12;
  double touch_fixed_s = 4.25e-6;
  // Host time of one launch, medians of the 22 steps: a cuBLAS GEMM call (with its workspace
  // check) and a touch kernel launch.
  double gemm_launch_s = 13.0e-6;
  double kernel_launch_s = 4.7e-6;
};

class TransformerWorkload final : public Workload {
 public:
  explicit TransformerWorkload(TransformerParams p);
  ~TransformerWorkload() override;

  std::string kind() const override { return "transformer"; }
  std::string label() const override;
  std::uint64_t num_steps() const override { return p_.steps; }
  void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo& info) override;
  void prepare(ComputeContext& ctx) override;
  ModeledKernel compute(const Op& op, ComputeContext& ctx) override;
  void finish() override;

  // Step k + 1's ops may be made (on another thread) while step k's compute runs.
  bool makes_ops_ahead() const override { return true; }
  // korthikanti: the slots follow from the ids (slot_of), with no hashing: a persistent tensor's id
  // is its slot, the workspace's is the next one, and a step's n-th buffer has the one after that
  // plus n (each of its buffers is freed within the step: step_ops checks it, so the next step's
  // n-th buffer can take the slot again). pytorch_eager keeps gradients across steps: the harness
  // gives its slots.
  bool gives_slots() const override { return p_.style == Style::Korthikanti; }
  std::uint32_t slots_end() const override { return slots_end_; }

  // For tests: the last step's compute ops, buffer sizes and names (index = position of the
  // op in the step's ops), and the shape of a step.
  const std::vector<ComputeDesc>& last_compute() const { return last_->compute; }
  IdSpan inputs(const ComputeDesc& c) const { return ids_of(*last_, c, false); }
  IdSpan outputs(const ComputeDesc& c) const { return ids_of(*last_, c, true); }
  const std::vector<const char*>& last_op_names() const { return last_->names; }
  Bytes buffer_bytes(BufferId id) const;
  BatchShape shape_of(std::uint64_t step) const { return sampler_.batch(step, p_.batch); }
  ModeledKernel modeled_seconds(const ComputeDesc& c) const;

 private:
  struct Emit;
  friend struct Emit;
  void train_step(Emit& e, const BatchShape& shape, bool first);
  void inference_step(Emit& e, const BatchShape& shape, bool first);

  // What one step's ops refer to. Two of them, by step parity, so that step k + 1 can be made
  // while step k's compute reads its own.
  struct StepState {
    BufferId base = 0;  // the step's buffers are base, base + 1, ... ((step + 1) << 32)
    std::vector<ComputeDesc> compute;
    std::vector<BufferId> ids;  // Touch inputs and outputs
    std::vector<Bytes> sizes;   // by (id - base)
    std::vector<const char*> names;
  };
  static IdSpan ids_of(const StepState& st, const ComputeDesc& c, bool outputs) {
    const BufferId* first = st.ids.data() + c.first_id + (outputs ? c.n_in : 0);
    return {first, first + (outputs ? c.n_out : c.n_in)};
  }

  TransformerParams p_;
  SeqLenSampler sampler_;
  ModelRates rates_;
  static constexpr std::uint64_t kPrecomputedSteps = 1 << 16;  // about 1.2 s of draws at most
  std::vector<BatchShape> shapes_;  // drawn in prepare()
  StepState slots_[2];
  const StepState* last_ = &slots_[0];
  std::vector<Bytes> persistent_sizes_;  // by id
  std::vector<BufferId> params_, grads_, masters_, adam_m_, adam_v_;
  std::vector<BufferId> eager_kept_grads_;  // pytorch_eager with zero_grad_to_none = false
  std::vector<std::uint64_t> param_elems_;
  BufferId workspace_ = 0;
  std::uint32_t slots_end_ = 1;  // korthikanti: above every slot given (Emit, gives_slots)
  void* gpu_ = nullptr;  // transformer_compute.cu state (cuBLAS handle)
};

std::unique_ptr<Workload> make_transformer(const TransformerParams& params);

}  // namespace gmb
