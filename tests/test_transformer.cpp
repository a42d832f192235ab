// The transformer workload's events: activation sizes against Korthikanti et al., the
// persistent state, recomputation, the KV cache, determinism, and GEMM operand bounds.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "workloads/transformer.h"
#include "workloads/transformer_eager.h"

using namespace gmb;

namespace {

constexpr BufferId kFirstStepLocalId = 1ull << 32;

TransformerParams small(std::uint64_t layers = 2, Recompute r = Recompute::None, DType t = DType::BF16) {
  TransformerParams p;
  p.style = Style::Korthikanti;
  p.layers = layers;
  p.hidden = 256;
  p.heads = 8;
  p.vocab = 1000;
  p.batch = 3;
  p.dtype = t;
  p.recompute = r;
  p.steps = 4;
  p.seq_len.dist = SeqDist::Fixed;
  p.seq_len.value = 96;
  return p;
}

struct StepOps {
  std::vector<Op> ops;
  std::vector<const char*> names;
  StepInfo info;
};

StepOps run_step(TransformerWorkload& w, std::uint64_t step) {
  StepOps s;
  w.step_ops(step, s.ops, s.info);
  s.names = w.last_op_names();
  return s;
}

// Bytes of this step's own (non-persistent) buffers live just before the op named `name`.
Bytes step_local_live_before(const StepOps& s, const std::string& name) {
  std::map<BufferId, Bytes> live;
  for (std::size_t i = 0; i < s.ops.size(); ++i) {
    const Op& op = s.ops[i];
    if (op.kind == Op::Kind::Alloc && s.names[i] == name) break;
    if (op.id < kFirstStepLocalId || op.kind == Op::Kind::Compute) continue;
    if (op.kind == Op::Kind::Alloc) live[op.id] = op.bytes;
    if (op.kind == Op::Kind::Free) live.erase(op.id);
  }
  Bytes total = 0;
  for (auto& [id, b] : live) total += b;
  return total;
}

}  // namespace

TEST(Transformer, KorthikantiFormulaFor16BitAnd32Bit) {
  TransformerParams p = small();
  p.hidden = 1024;
  p.heads = 16;
  const Bytes s = 512, b = 2, h = 1024, a = 16;
  auto r = korthikanti_layer_bytes(p, s, b);
  EXPECT_EQ(r.attention, 11 * s * b * h + 5 * a * s * s * b);
  EXPECT_EQ(r.mlp, 19 * s * b * h);
  EXPECT_EQ(r.layer_norm, 4 * s * b * h);
  EXPECT_EQ(r.total(), s * b * h * (34 + 5 * a * s / h));  // the paper's per-layer total
  p.dtype = DType::FP32;  // every tensor doubles except the 1-byte dropout masks
  auto f = korthikanti_layer_bytes(p, s, b);
  EXPECT_EQ(f.attention, 21 * s * b * h + 9 * a * s * s * b);
  EXPECT_EQ(f.mlp, 37 * s * b * h);
  EXPECT_EQ(f.layer_norm, 8 * s * b * h);
}

// At the end of the forward pass (just before the logits), the activations held are: the
// input ids and labels (int64), the embedding dropout mask, each layer's saved tensors, the
// last layer's output and the final layer norm's output.
TEST(Transformer, ForwardHoldsExactlyTheKorthikantiActivationsPerLayer) {
  for (DType t : {DType::BF16, DType::FP32}) {
    for (std::uint64_t layers : {1, 2, 5}) {
      TransformerParams p = small(layers, Recompute::None, t);
      TransformerWorkload w(p);
      for (std::uint64_t step : {0, 1}) {
        StepOps s = run_step(w, step);
        const Bytes sq = 96, b = 3, h = 256, T = sq * b, e = dtype_bytes(t);
        Bytes expected = 16 * T + T * h + layers * korthikanti_layer_bytes(p, sq, b).total() + 2 * e * T * h;
        EXPECT_EQ(step_local_live_before(s, "logits"), expected)
            << to_string(t) << " layers " << layers << " step " << step;
      }
    }
  }
}

TEST(Transformer, SelectiveRecomputeDropsTheAttentionMatricesAndFullKeepsOnlyLayerInputs) {
  const Bytes sq = 96, b = 3, h = 256, a = 8, T = sq * b, e = 2;
  const Bytes outside = 16 * T + T * h + 2 * e * T * h;
  for (std::uint64_t layers : {1, 3}) {
    TransformerParams sel = small(layers, Recompute::Selective);
    TransformerWorkload ws(sel);
    StepOps s = run_step(ws, 1);
    // Selective: 34sbh per layer (the 5as^2b of softmax, its dropout mask and output are gone).
    EXPECT_EQ(step_local_live_before(s, "logits"), outside + layers * 34 * T * h);
    TransformerWorkload wf(small(layers, Recompute::Full));
    StepOps f = run_step(wf, 1);
    EXPECT_EQ(step_local_live_before(f, "logits"), outside + layers * e * T * h);
  }
  // Recomputation trades memory for compute: more FLOPs per step, the same final state.
  auto flops = [](TransformerWorkload& w) {
    std::vector<Op> ops;
    StepInfo info;
    w.step_ops(1, ops, info);
    double f = 0;
    for (auto& c : w.last_compute()) f += c.flops;
    return f;
  };
  TransformerWorkload none(small(2)), sel(small(2, Recompute::Selective)), full(small(2, Recompute::Full));
  double fn = flops(none), fs = flops(sel), ff = flops(full);
  EXPECT_GT(fs, fn);
  EXPECT_GT(ff, fs);
  (void)a;
}

TEST(Transformer, StateIsSixteenBytesPerParameterAndEveryStepFreesWhatItAllocates) {
  for (DType t : {DType::BF16, DType::FP16, DType::FP32}) {
    for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full}) {
      TransformerParams p = small(2, r, t);
      TransformerWorkload w(p);
      std::map<BufferId, Bytes> live;
      Bytes persistent = 0;
      for (std::uint64_t step = 0; step < 3; ++step) {
        StepOps s = run_step(w, step);
        for (const Op& op : s.ops) {
          if (op.kind == Op::Kind::Alloc) {
            ASSERT_FALSE(live.count(op.id)) << "id reused while live";
            live[op.id] = op.bytes;
            if (op.id < kFirstStepLocalId) {
              EXPECT_EQ(step, 0u) << "persistent state is allocated at the first step only";
              persistent += op.bytes;
            }
          } else if (op.kind == Op::Kind::Free) {
            ASSERT_TRUE(live.count(op.id)) << "free of a buffer not live";
            EXPECT_GE(op.id, kFirstStepLocalId) << "persistent state is never freed";
            live.erase(op.id);
          }
        }
        for (auto& [id, bytes] : live) EXPECT_LT(id, kFirstStepLocalId) << "step " << step << " leaks";
      }
      EXPECT_EQ(persistent, 16 * transformer_param_count(p) + p.cublas_workspace) << to_string(t);
    }
  }
  // Parameters: embedding (tied output) + per layer 12h^2 + 13h + final norm.
  TransformerParams p = small(2);
  EXPECT_EQ(transformer_param_count(p), 1000ull * 256 + 2 * (12ull * 256 * 256 + 13 * 256) + 2 * 256);
}

TEST(Transformer, EveryGemmOperandFitsItsBufferAndEveryBufferIsWritten) {
  std::vector<TransformerParams> cases;
  for (Recompute r : {Recompute::None, Recompute::Selective, Recompute::Full})
    for (DType t : {DType::BF16, DType::FP32}) cases.push_back(small(2, r, t));
  TransformerParams inf = small(2);
  inf.mode = TransformerMode::Inference;
  inf.generate = 5;
  cases.push_back(inf);
  inf.kv_block = 4;
  cases.push_back(inf);
  for (const auto& p : cases) {
    TransformerWorkload w(p);
    for (std::uint64_t step = 0; step < 2; ++step) {
      StepOps s = run_step(w, step);
      const Bytes e = dtype_bytes(p.dtype);
      std::set<BufferId> written;
      for (const auto& c : w.last_compute()) {
        if (c.kind == ComputeDesc::Kind::Gemm) {
          const GemmDesc& g = c.gemm;
          GemmExtents x = gemm_extents(g);
          EXPECT_LE(g.a_offset + x.a * e, w.buffer_bytes(g.a)) << c.name;
          EXPECT_LE(g.b_offset + x.b * e, w.buffer_bytes(g.b)) << c.name;
          EXPECT_LE(g.c_offset + x.c * e, w.buffer_bytes(g.c)) << c.name;
          EXPECT_GT(w.buffer_bytes(g.a), 0u) << c.name;
          written.insert(g.c);
        }
        for (BufferId id : w.outputs(c)) written.insert(id);
      }
      for (std::size_t i = 0; i < s.ops.size(); ++i)
        if (s.ops[i].kind == Op::Kind::Alloc && std::string(s.names[i]) != "cublas_workspace" &&
            std::string(s.names[i]).rfind("adam", 0) != 0 && std::string(s.names[i]) != "master_weight" &&
            std::string(s.names[i]) != "grad") {
          EXPECT_TRUE(written.count(s.ops[i].id)) << s.names[i] << " is never written";
        }
    }
  }
}

TEST(Transformer, SameParametersGiveTheSameOpsAndTheSeedChangesTheLengths) {
  TransformerParams p = small(2);
  p.seq_len = SeqLenSpec{};
  p.seq_len.dist = SeqDist::Uniform;
  p.seq_len.min = 16;
  p.seq_len.max = 200;
  p.seq_len.seed = 7;
  TransformerWorkload a(p), b(p);
  std::vector<std::uint64_t> lens;
  for (std::uint64_t step = 0; step < 5; ++step) {
    StepOps x = run_step(a, step), y = run_step(b, step);
    ASSERT_EQ(x.ops.size(), y.ops.size());
    for (std::size_t i = 0; i < x.ops.size(); ++i) {
      EXPECT_EQ(x.ops[i].kind, y.ops[i].kind);
      EXPECT_EQ(x.ops[i].id, y.ops[i].id);
      EXPECT_EQ(x.ops[i].bytes, y.ops[i].bytes);
    }
    EXPECT_EQ(x.info.real_tokens, y.info.real_tokens);
    lens.push_back(a.shape_of(step).seq_len);
  }
  // A step's ops do not depend on the steps generated before it.
  TransformerWorkload c(p);
  StepOps late = run_step(c, 3), again = run_step(a, 3);
  EXPECT_EQ(late.ops.size(), again.ops.size());
  EXPECT_EQ(late.info.padded_tokens, again.info.padded_tokens);
  p.seq_len.seed = 8;
  TransformerWorkload d(p);
  std::vector<std::uint64_t> other;
  for (std::uint64_t step = 0; step < 5; ++step) other.push_back(d.shape_of(step).seq_len);
  EXPECT_NE(lens, other);
}

TEST(Transformer, StepInfoCountsRealAndPaddedTokens) {
  TransformerParams p = small(1);
  p.seq_len = SeqLenSpec{};
  p.seq_len.dist = SeqDist::Uniform;
  p.seq_len.min = 10;
  p.seq_len.max = 100;
  p.seq_len.pad_to_max = true;
  TransformerWorkload w(p);
  StepOps s = run_step(w, 2);
  BatchShape sh = w.shape_of(2);
  EXPECT_EQ(s.info.padded_tokens, 3.0 * 100);
  EXPECT_EQ(s.info.real_tokens, double(sh.real_tokens));
  EXPECT_LT(s.info.real_tokens, s.info.padded_tokens);
  // The tensors are sized by the padded length.
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].kind == Op::Kind::Alloc && std::string(s.names[i]) == "q") {
      EXPECT_EQ(s.ops[i].bytes, 2ull * 3 * 100 * 256);
    }
}

TEST(Transformer, InferenceKvCacheGrowsByReallocation) {
  TransformerParams p = small(3);
  p.mode = TransformerMode::Inference;
  p.generate = 6;
  TransformerWorkload w(p);
  StepOps s = run_step(w, 1);
  const Bytes e = 2, b = 3, h = 256, sq = 96;
  std::vector<Bytes> k_sizes;
  for (std::size_t i = 0; i < s.ops.size(); ++i)
    if (s.ops[i].kind == Op::Kind::Alloc && std::string(s.names[i]) == "k_cache") k_sizes.push_back(s.ops[i].bytes);
  // Prefill caches the prompt; each of the 5 later tokens re-allocates every layer's cache one token longer.
  ASSERT_EQ(k_sizes.size(), 3u * 6);
  EXPECT_EQ(k_sizes.front(), e * b * sq * h);
  EXPECT_EQ(k_sizes.back(), e * b * (sq + 5) * h);
  EXPECT_EQ(s.info.real_tokens, 3.0 * (96 + 6));
  // With kv_block 4 the cache grows twice (96 -> 100 -> 104) for 5 appended tokens.
  p.kv_block = 4;
  TransformerWorkload w4(p);
  StepOps s4 = run_step(w4, 1);
  std::size_t grows = 0;
  for (std::size_t i = 0; i < s4.ops.size(); ++i)
    if (s4.ops[i].kind == Op::Kind::Alloc && std::string(s4.names[i]) == "k_cache") ++grows;
  EXPECT_EQ(grows, 3u * 3);
}

TEST(Transformer, KorthikantiGivesEachLiveBufferASlotOfItsOwn) {
  // The slots the workload gives (gives_slots): each alloc a slot from 1 up below slots_end()
  // that no other live buffer holds, each free its buffer's slot; train with every recompute
  // mode and inference with a growing KV cache, over steps with different lengths.
  for (int mode = 0; mode < 4; ++mode) {
    TransformerParams p = small(2, mode == 1 ? Recompute::Selective : mode == 2 ? Recompute::Full : Recompute::None);
    if (mode == 3) p.mode = TransformerMode::Inference, p.generate = 5, p.kv_block = 2;
    p.seq_len.dist = SeqDist::Uniform;
    p.seq_len.min = 17;
    p.seq_len.max = 130;
    TransformerWorkload w(p);
    ASSERT_TRUE(w.gives_slots());
    std::map<std::uint32_t, BufferId> live;  // slot -> id
    std::map<BufferId, std::uint32_t> slot_of;
    for (std::uint64_t step = 0; step < 4; ++step) {
      StepOps s = run_step(w, step);
      for (const Op& op : s.ops) {
        if (op.kind == Op::Kind::Alloc) {
          ASSERT_GE(op.slot, 1u);
          ASSERT_LT(op.slot, w.slots_end());
          ASSERT_EQ(live.count(op.slot), 0u) << "mode " << mode << " step " << step << " id " << op.id;
          live[op.slot] = op.id;
          slot_of[op.id] = op.slot;
        } else if (op.kind == Op::Kind::Free) {
          ASSERT_EQ(slot_of.count(op.id), 1u);
          ASSERT_EQ(op.slot, slot_of[op.id]);
          live.erase(op.slot);
          slot_of.erase(op.id);
        }
      }
    }
  }
  TransformerParams eager = small();
  eager.style = Style::PytorchEager;
  EXPECT_FALSE(TransformerWorkload(eager).gives_slots());  // its gradients may outlive a step
}

TEST(Transformer, ModeledTimeIsTheH200FitOfEachKernel) {
  TransformerParams p = small(1);
  p.hidden = 4096;
  p.heads = 32;
  p.seq_len.value = 2048;
  p.batch = 4;
  p.vocab = 50257;  // GPT-2's: the LM head's leading dimension is odd
  TransformerWorkload w(p);
  run_step(w, 1);
  const ComputeDesc* q = nullptr;
  const ComputeDesc* ln = nullptr;
  const ComputeDesc* head = nullptr;
  const ComputeDesc* scores = nullptr;
  for (const auto& c : w.last_compute()) {
    if (std::string(c.name) == "q_proj" && !q) q = &c;
    if (std::string(c.name) == "layer_norm_1" && !ln) ln = &c;
    if (std::string(c.name) == "lm_head" && !head) head = &c;
    if (std::string(c.name) == "qk^T" && !scores) scores = &c;
  }
  ASSERT_TRUE(q && ln && head && scores);
  // q projection, aligned (leading dimensions 4096): 2 * (2048*4) * 4096 * 4096 FLOPs, writes
  // 8192 x 4096 bf16 and reads the rest, at the rates fitted on the H200, plus 4.09 us.
  EXPECT_DOUBLE_EQ(q->flops, 2.0 * 8192 * 4096 * 4096);
  const double written = 2.0 * 8192 * 4096, read = 2.0 * (8192.0 * 4096 + 4096.0 * 4096);
  const ModeledKernel qk = w.modeled_seconds(*q);
  EXPECT_NEAR(qk.gpu_seconds, q->flops / 1218e12 + written / 1.66e12 + read / 5.30e12 + 4.09e-6, 1e-12);
  EXPECT_NEAR(qk.gpu_seconds, 289.2e-6, 0.1e-6);
  EXPECT_DOUBLE_EQ(qk.launch_seconds, 13.0e-6);  // a cuBLAS call on the host
  // Attention scores at 2048 tokens: batched, aligned, the same formula.
  const double s_written = 2.0 * 2048 * 2048 * 4 * 32;
  EXPECT_NEAR(w.modeled_seconds(*scores).gpu_seconds,
              scores->flops / 1218e12 + s_written / 1.66e12 + (scores->bytes - s_written) / 5.30e12 + 4.09e-6, 1e-12);
  // The LM head (50257 rows, not a multiple of 8): cuBLAS's unaligned path, 124 TFLOP/s + 110.7 us.
  EXPECT_NEAR(w.modeled_seconds(*head).gpu_seconds, head->flops / 124e12 + 110.7e-6, 1e-12);
  // Layer norm, a touch kernel: reads and writes 2 * 8192 * 4096 bytes at 4.06 TB/s, plus 4.25 us;
  // launched in 4.7 us.
  EXPECT_DOUBLE_EQ(ln->bytes, 2.0 * 2 * 8192 * 4096);
  EXPECT_NEAR(w.modeled_seconds(*ln).gpu_seconds, ln->bytes / 4.06e12 + 4.25e-6, 1e-12);
  EXPECT_DOUBLE_EQ(w.modeled_seconds(*ln).launch_seconds, 4.7e-6);
  // fp32 GEMMs at the assumed 50 TFLOP/s (not measured).
  p.dtype = DType::FP32;
  TransformerWorkload w32(p);
  run_step(w32, 1);
  for (const auto& c : w32.last_compute())
    if (std::string(c.name) == "q_proj") {
      EXPECT_NEAR(w32.modeled_seconds(c).gpu_seconds, c.flops / 50e12 + 4.09e-6, 1e-12);
      break;
    }
}

// At a length that is not a multiple of 8 the attention GEMMs take cuBLAS's slower kernels: an
// even leading dimension at 88 TFLOP/s plus 8.87 us, an odd one at 51 TFLOP/s plus 8.33 us.
TEST(Transformer, ModeledAttentionAtUnalignedLengthsIsSlower) {
  auto scores_time = [](std::uint64_t len) {
    TransformerParams p = small(1);
    p.seq_len.value = len;
    TransformerWorkload w(p);
    run_step(w, 1);
    for (const auto& c : w.last_compute())
      if (std::string(c.name) == "qk^T") return std::pair{w.modeled_seconds(c).gpu_seconds, c.flops};
    return std::pair{0.0, 0.0};
  };
  auto [even, even_flops] = scores_time(98);
  EXPECT_NEAR(even, even_flops / 88e12 + 8.87e-6, 1e-12);
  auto [odd, odd_flops] = scores_time(97);
  EXPECT_NEAR(odd, odd_flops / 51e12 + 8.33e-6, 1e-12);
  auto [aligned, aligned_flops] = scores_time(96);
  EXPECT_NEAR(aligned, aligned_flops / 1218e12, 6e-6);  // the aligned fit: a few microseconds here
  EXPECT_LT(aligned, even);
  EXPECT_LT(aligned, odd);
}

TEST(Transformer, AdamTemporariesFollowPyTorchsImplementations) {
  // Most bytes of this step's own buffers alive at once during the optimizer step.
  auto optimizer_peak = [](Optimizer o) {
    TransformerParams p = small(2);
    p.optimizer = o;
    TransformerWorkload w(p);
    StepOps s = run_step(w, 1);
    std::map<BufferId, Bytes> live;
    Bytes total = 0, peak = 0;
    bool in_optimizer = false;
    for (std::size_t i = 0; i < s.ops.size(); ++i) {
      const Op& op = s.ops[i];
      if (op.kind == Op::Kind::Alloc && std::string(s.names[i]) == "adam_denom") in_optimizer = true;
      if (op.kind == Op::Kind::Compute && std::string(s.names[i]).rfind("adam", 0) == 0) in_optimizer = true;
      if (op.kind == Op::Kind::Alloc) total += (live[op.id] = op.bytes);
      if (op.kind == Op::Kind::Free) total -= live[op.id], live.erase(op.id);
      if (in_optimizer) peak = std::max(peak, total);
    }
    EXPECT_TRUE(live.empty());
    return peak;
  };
  const TransformerParams p = small(2);
  const Bytes params = transformer_param_count(p);
  // foreach: one fp32 temporary per parameter, all alive together.
  EXPECT_EQ(optimizer_peak(Optimizer::Foreach), 4 * params);
  // single tensor: one temporary at a time; the largest tensor is an MLP weight (4h x h).
  EXPECT_EQ(optimizer_peak(Optimizer::SingleTensor), 4ull * 4 * 256 * 256);
  // fused: none.
  EXPECT_EQ(optimizer_peak(Optimizer::Fused), 0u);
}

// pytorch_eager's models have the published models' parameters: GPT-2 small 124,439,808 (tied
// embedding, 1024 positions), TinyLlama-1.1B 1,100,048,384, BERT-base with its MLM head
// (BertForMaskedLM) 109,514,298.
TEST(TransformerEager, ParameterCountsAreThePublishedModels) {
  TransformerParams g;
  g.family = Family::Gpt, g.layers = 12, g.hidden = 768, g.heads = 12, g.vocab = 50257, g.max_positions = 1024;
  EXPECT_EQ(transformer_param_count(g), 124439808u);
  TransformerParams l;
  l.family = Family::Llama, l.layers = 22, l.hidden = 2048, l.heads = 32, l.kv_heads = 4, l.ffn = 5632, l.vocab = 32000;
  EXPECT_EQ(transformer_param_count(l), 1100048384u);
  TransformerParams b;
  b.family = Family::Bert, b.layers = 12, b.hidden = 768, b.heads = 12, b.vocab = 30522;
  EXPECT_EQ(transformer_param_count(b), 109514298u);
}

// Every allocation of a step is freed in the step, except the first step's persistent state
// (parameters, AdamW's states, the cuBLAS workspaces), for every family, precision, attention
// and optimizer; and the reduction scratch follows PyTorch's configuration (recorded figures).
TEST(TransformerEager, StepsFreeWhatTheyAllocateAndKeepOnlyTheState) {
  for (Family f : {Family::Gpt, Family::Llama, Family::Bert})
    for (Precision pr : {Precision::AutocastBf16, Precision::Bf16, Precision::Fp32})
      for (Attention at : {Attention::Explicit, Attention::SdpaFlash, Attention::SdpaMemEfficient})
        for (Optimizer o : {Optimizer::Foreach, Optimizer::Fused, Optimizer::SingleTensor}) {
          if ((f == Family::Llama) == (at == Attention::Explicit) && f != Family::Gpt) continue;  // not modeled
          TransformerParams p;
          p.family = f, p.precision = pr, p.attention = at, p.optimizer = o;
          p.layers = 2, p.hidden = 128, p.heads = 4, p.kv_heads = f == Family::Llama ? 2 : 0, p.vocab = 500;
          p.batch = 3, p.dropout = f == Family::Bert || (f == Family::Gpt && o == Optimizer::Fused) ? 0.1 : 0;
          p.seq_len.dist = SeqDist::Sequence;
          p.seq_len.values = {64, 40, 1100 / 3};
          p.max_positions = f == Family::Llama ? 0 : 512;
          TransformerWorkload w(p);
          std::map<BufferId, Bytes> live;
          Bytes state = 0;
          for (std::uint64_t step = 0; step < 3; ++step) {
            std::vector<Op> ops;
            StepInfo info;
            w.step_ops(step, ops, info);
            for (const Op& op : ops) {
              if (op.kind == Op::Kind::Alloc) {
                ASSERT_TRUE(live.emplace(op.id, op.bytes).second) << "allocated twice";
                ASSERT_GT(op.bytes, 0u);
              } else if (op.kind == Op::Kind::Free) {
                ASSERT_EQ(live.erase(op.id), 1u) << w.label() << ": freed a buffer not held, step " << step;
              }
            }
            Bytes held = 0;
            for (auto& [id, bytes] : live) {
              EXPECT_LT(id, 1ull << 32) << w.label() << ": a step's buffer outlives step " << step;
              held += bytes;
            }
            if (step == 0) state = held;
            EXPECT_EQ(held, state) << w.label();
          }
          const Bytes pe = pr == Precision::Bf16 ? 2 : 4;
          const Bytes ws = (32ull << 20) * 2 + (f == Family::Llama ? 0 : 1ull << 20);
          const Bytes extra = (f == Family::Llama ? 64 / 2 / 2 * pe : 0) + (o == Optimizer::Fused ? 4 * eager_params(p).size() : 0);
          EXPECT_EQ(state, 3 * pe * transformer_param_count(p) + ws + extra) << w.label();
        }
  // Bias gradients of [8192 x out] (bf16 grads, recorded on the H200): staging and semaphores.
  EXPECT_EQ(cuda_column_sum_scratch(8192, 1024), (std::pair<Bytes, Bytes>{67108864, 32}));
  EXPECT_EQ(cuda_column_sum_scratch(8192, 4096), (std::pair<Bytes, Bytes>{138412032, 128}));
  EXPECT_EQ(cuda_column_sum_scratch(8192, 3072), (std::pair<Bytes, Bytes>{138412032, 96}));
  EXPECT_EQ(cuda_column_sum_scratch(5680, 512), (std::pair<Bytes, Bytes>{23330816, 16}));
  EXPECT_EQ(cuda_column_sum_scratch(100, 1024), (std::pair<Bytes, Bytes>{0, 0})) << "few rows: one pass, no scratch";
}

// zero_grad(set_to_none=False): the first backward's grads are kept; later ones are added into
// them in place, so every step allocates the same tensors and the grads stay between steps.
TEST(TransformerEager, ZeroingGradsKeepsThemBetweenSteps) {
  for (Family f : {Family::Gpt, Family::Bert, Family::Llama})
    for (Precision pr : {Precision::AutocastBf16, Precision::Fp32}) {
      TransformerParams p;
      p.family = f, p.precision = pr;
      p.attention = f == Family::Llama ? Attention::SdpaFlash : Attention::Explicit;
      p.layers = 2, p.hidden = 128, p.heads = 4, p.vocab = 5000, p.batch = 4, p.max_positions = 512;
      p.seq_len.dist = SeqDist::Sequence;
      p.seq_len.values = {300, 200, 300};
      auto run = [&](bool to_none) {
        p.zero_grad_to_none = to_none;
        TransformerWorkload w(p);
        std::map<BufferId, Bytes> live;
        std::vector<std::pair<std::size_t, Bytes>> per_step;  // (allocations, bytes held at the end)
        for (std::uint64_t step = 0; step < 3; ++step) {
          std::vector<Op> ops;
          StepInfo info;
          w.step_ops(step, ops, info);
          std::size_t n = 0;
          for (const Op& op : ops) {
            if (op.kind == Op::Kind::Alloc) live[op.id] = op.bytes, ++n;
            if (op.kind == Op::Kind::Free) {
              EXPECT_EQ(live.erase(op.id), 1u) << w.label();
            }
          }
          Bytes held = 0;
          for (auto& [id, b] : live) held += b;
          per_step.push_back({n, held});
        }
        return per_step;
      };
      auto none = run(true), zero = run(false);
      const Bytes grads = (pr == Precision::Fp32 || pr == Precision::AutocastBf16 ? 4 : 2) * transformer_param_count(p);
      for (std::size_t s = 0; s < 3; ++s) {
        EXPECT_EQ(zero[s].first, none[s].first) << "step " << s;
        EXPECT_EQ(zero[s].second, none[s].second + grads) << "step " << s;
      }
    }
}
