// PyTorch 2.11 eager training, allocation by allocation (see transformer_eager.h). What each
// op allocates and frees, and when, was read off PyTorch's source and checked against the
// recorded allocation sequences of real runs (tests/data/torch_train/); the comments name the
// mechanism behind each event. Notation: b rows, s tokens per row, T = b*s, h hidden, nh heads,
// hd = h/nh, V vocabulary, f MLP width.
#include "workloads/transformer_eager.h"

#include <algorithm>
#include <stdexcept>

namespace gmb {

namespace {

constexpr std::size_t kNone = SIZE_MAX;
std::uint64_t round_up(std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m * m; }
std::uint64_t ffn_width(const TransformerParams& p) { return p.ffn ? p.ffn : p.ffn_mult * p.hidden; }
std::uint64_t kv_heads(const TransformerParams& p) { return p.kv_heads ? p.kv_heads : p.heads; }

// Per-layer parameter tensors, in registration order of the recorded models' modules.
enum GptParam { kG_Ln1W, kG_Ln1B, kG_Ln2W, kG_Ln2B, kG_QkvW, kG_QkvB, kG_ProjW, kG_ProjB, kG_Fc1W, kG_Fc1B, kG_Fc2W,
                kG_Fc2B, kG_Count };
enum BertParam { kB_QkvW, kB_QkvB, kB_ProjW, kB_ProjB, kB_Ln1W, kB_Ln1B, kB_Ln2W, kB_Ln2B, kB_Fc1W, kB_Fc1B, kB_Fc2W,
                 kB_Fc2B, kB_Count };
enum LlamaParam { kL_N1, kL_N2, kL_Wq, kL_Wk, kL_Wv, kL_Wo, kL_Gate, kL_Up, kL_Down, kL_Count };
constexpr std::size_t kBertFirstLayer = 6;  // head_bias, wte, wpe, tte, ln.w, ln.b

std::uint64_t gpt_positions(const TransformerParams& p) {
  if (p.max_positions) return p.max_positions;
  return SeqLenSampler(p.seq_len).max_shape_len();
}

}  // namespace

std::vector<EagerParam> eager_params(const TransformerParams& p) {
  const std::uint64_t h = p.hidden, f = ffn_width(p), V = p.vocab;
  std::vector<EagerParam> v;
  switch (p.family) {
    case Family::Gpt:
      v.push_back({V * h, "wte"});
      v.push_back({gpt_positions(p) * h, "wpe"});
      for (std::uint64_t l = 0; l < p.layers; ++l)
        for (auto [n, name] : {std::pair{h, "ln1.weight"}, {h, "ln1.bias"}, {h, "ln2.weight"}, {h, "ln2.bias"},
                               {3 * h * h, "qkv.weight"}, {3 * h, "qkv.bias"}, {h * h, "proj.weight"}, {h, "proj.bias"},
                               {f * h, "fc1.weight"}, {f, "fc1.bias"}, {f * h, "fc2.weight"}, {h, "fc2.bias"}})
          v.push_back({n, name});
      v.push_back({h, "ln_f.weight"});
      v.push_back({h, "ln_f.bias"});
      break;
    case Family::Bert: {
      const std::uint64_t P = p.max_positions ? p.max_positions : 512;
      for (auto [n, name] : {std::pair{V, "head_bias"}, {V * h, "wte"}, {P * h, "wpe"}, {2 * h, "tte"}, {h, "ln.weight"},
                             {h, "ln.bias"}})
        v.push_back({n, name});
      for (std::uint64_t l = 0; l < p.layers; ++l)
        for (auto [n, name] : {std::pair{3 * h * h, "qkv.weight"}, {3 * h, "qkv.bias"}, {h * h, "proj.weight"},
                               {h, "proj.bias"}, {h, "ln1.weight"}, {h, "ln1.bias"}, {h, "ln2.weight"}, {h, "ln2.bias"},
                               {f * h, "fc1.weight"}, {f, "fc1.bias"}, {f * h, "fc2.weight"}, {h, "fc2.bias"}})
          v.push_back({n, name});
      for (auto [n, name] : {std::pair{h * h, "head_fc.weight"}, {h, "head_fc.bias"}, {h, "head_ln.weight"},
                             {h, "head_ln.bias"}})
        v.push_back({n, name});
      break;
    }
    case Family::Llama: {
      const std::uint64_t kv = kv_heads(p) * (h / p.heads);
      v.push_back({V * h, "emb"});
      for (std::uint64_t l = 0; l < p.layers; ++l)
        for (auto [n, name] : {std::pair{h, "n1.weight"}, {h, "n2.weight"}, {h * h, "wq"}, {kv * h, "wk"}, {kv * h, "wv"},
                               {h * h, "wo"}, {f * h, "gate"}, {f * h, "up"}, {f * h, "down"}})
          v.push_back({n, name});
      v.push_back({h, "norm.weight"});
      v.push_back({V * h, "out"});
      break;
    }
  }
  return v;
}

std::vector<std::size_t> eager_param_alloc_order(const TransformerParams& p) {
  std::vector<std::size_t> order(eager_params(p).size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  // BERT's head_bias is the root module's own parameter: first in parameters(), but moved to
  // the GPU after every child module's.
  if (p.family == Family::Bert) std::rotate(order.begin(), order.begin() + 1, order.end());
  return order;
}

Bytes eager_param_elem(const TransformerParams& p) { return p.precision == Precision::Bf16 ? 2 : 4; }

BufferId eager_weight_id(std::size_t t) { return 1 + 8 * t + 0; }
BufferId eager_exp_avg_id(std::size_t t) { return 1 + 8 * t + 3; }
BufferId eager_exp_avg_sq_id(std::size_t t) { return 1 + 8 * t + 4; }
BufferId eager_step_id(std::size_t t) { return 1 + 8 * t + 5; }

Bytes eager_persistent_bytes(const TransformerParams& p, BufferId id) {
  if (id == kEagerWorkspaceFwd || id == kEagerWorkspaceBwd) return p.cublas_workspace ? kEagerCublasWorkspace : 0;
  if (id == kEagerWorkspaceLt) return p.cublas_workspace ? kEagerLtWorkspace : 0;
  if (id == kEagerInvFreq) return p.family == Family::Llama ? (p.hidden / p.heads / 2) * eager_param_elem(p) : 0;
  if (id == 0 || id >= (1ull << 32)) return 0;
  const std::size_t t = (id - 1) / 8, role = (id - 1) % 8;
  const auto params = eager_params(p);
  if (t >= params.size()) return 0;
  const Bytes n = params[t].elems * eager_param_elem(p);
  if (role == 0 || role == 3 || role == 4) return n;
  if (role == 5) return p.optimizer == Optimizer::Fused ? 4 : 0;
  return 0;
}

std::pair<Bytes, Bytes> cuda_column_sum_scratch(std::uint64_t rows, std::uint64_t cols, int sms, int threads_per_sm) {
  // Reducing over the slow dimension of a contiguous tensor: block.x walks the outputs
  // ("vectorize along output", 4 at a time when the row length allows), block.y the inputs.
  std::uint64_t vec = 4;
  while (cols % vec) vec /= 2;
  const std::uint64_t max_threads = 512 / vec;
  auto last_pow2 = [](std::uint64_t n) {
    std::uint64_t r = 1;
    while (r * 2 <= n) r *= 2;
    return r;
  };
  const std::uint64_t dim0 = cols / vec, dim1 = rows;
  const std::uint64_t d0 = dim0 < max_threads ? last_pow2(dim0) : max_threads;
  const std::uint64_t d1 = dim1 < max_threads ? last_pow2(dim1) : max_threads;
  std::uint64_t bw = std::min<std::uint64_t>(d0, 32);
  const std::uint64_t bh = std::min<std::uint64_t>(d1, max_threads / bw);
  bw = std::min<std::uint64_t>(d0, max_threads / bh);
  const std::uint64_t threads = bw * bh;
  std::uint64_t step_output = bw, step_input = 1;
  auto values_per_thread = [&] { return (rows + step_input - 1) / step_input; };
  bool split_warps = false;
  if (values_per_thread() >= bh * 16 || values_per_thread() >= 256) {
    step_input *= bh;
    split_warps = true;
  } else {
    step_output *= bh;
  }
  const std::uint64_t grid = (cols / vec + step_output - 1) / step_output;
  const std::uint64_t target = std::uint64_t(sms) * (std::uint64_t(threads_per_sm) / threads);
  if (!split_warps || values_per_thread() < 256 || grid > target) return {0, 0};
  const std::uint64_t c1 = (target + grid - 1) / grid, c2 = (values_per_thread() + 15) / 16,
                      c3 = (values_per_thread() + 255) / 256;
  const std::uint64_t ctas = std::max(std::min(c1, c2), c3);
  if (ctas <= 1) return {0, 0};
  return {4 * cols * ctas * bw * vec, 4 * grid};
}

namespace {

// One training step's events. Tensors are buffer ids; 0 is "none".
class EagerStep {
 public:
  EagerStep(const TransformerParams& p, const BatchShape& sh, bool first, EagerSink& k, std::vector<BufferId>& kept)
      : p_(p), k_(k), first_(first), params_(eager_params(p)), kept_(kept) {
    if (first || kept_.size() != params_.size()) kept_.assign(params_.size(), 0);
    tied_ = p.family == Family::Gpt ? 0 : p.family == Family::Bert ? 1 : kNone;
    b = sh.rows, s = sh.seq_len, T = b * s, h = p.hidden, nh = p.heads, hd = h / nh, V = p.vocab, f = ffn_width(p);
    ac = p.precision == Precision::AutocastBf16;
    pe = eager_param_elem(p);
    me = ac ? 2 : pe;  // matmul outputs
    xe = ac ? 4 : pe;  // the residual stream (autocast: the fp32 embedding output's type)
    dropout = p.dropout > 0;
    ws_fwd = ws_bwd = ws_lt = first && p.cublas_workspace;
    grads_.assign(params_.size(), 0);
  }

  void run();

 private:
  struct Lin {
    BufferId out = 0, in = 0, saved_in = 0, w_cast = 0;
    bool in_cast = false;
    std::uint64_t in_f = 0, out_f = 0;
    std::size_t w = kNone, bias = kNone;
  };
  struct Norm {
    BufferId out = 0, mean = 0, rstd = 0, in = 0;
    std::size_t w = kNone, bias = kNone;
  };
  struct Attn {
    BufferId qc = 0, kc = 0, mask = 0, sm = 0, dmask = 0, dout = 0, pc = 0, vc = 0, out = 0, lse = 0, r16 = 0, r8 = 0;
    BufferId q = 0, k = 0, v = 0;  // what sdpa saved (the views' storage)
  };
  struct Layer {
    BufferId x = 0, qkv = 0, x_mid = 0, fc1 = 0, gelu = 0, m1 = 0, m2 = 0, x1 = 0, out = 0;
    Norm n1, n2;
    Lin lqkv, lproj, lfc1, lfc2;
    Attn at;
    // llama: the rotated q, the repeated k and v (saved by sdpa), SwiGLU's saved tensors
    BufferId q = 0, k = 0, v = 0, silu = 0, prod = 0;
    Lin lq, lk, lv, lo, lgate, lup, ldown;
  };

  BufferId A(Bytes n, const char* name) { return k_.alloc(n, name); }
  void F(BufferId& id, const char* name = "free") {
    if (id) k_.free(id, name);
    id = 0;
  }
  void Fv(BufferId id, const char* name = "free") { F(id, name); }
  // GEMM outputs: the first GEMM of a thread creates its cuBLAS handle's workspace (through
  // the caching allocator, after the GEMM's output); the first linear with a bias (addmm
  // through cuBLASLt with a bias epilogue) creates cuBLASLt's.
  BufferId gemm(Bytes n, const char* name, bool backward, bool lt = false) {
    BufferId id = A(n, name);
    if (!backward && ws_fwd) {
      k_.alloc_as(kEagerWorkspaceFwd, kEagerCublasWorkspace, "cublas_workspace");
      ws_fwd = false;
    }
    if (!backward && lt && ws_lt) {
      k_.alloc_as(kEagerWorkspaceLt, kEagerLtWorkspace, "cublaslt_workspace");
      ws_lt = false;
    }
    if (backward && ws_bwd) {
      k_.alloc_as(kEagerWorkspaceBwd, kEagerCublasWorkspace, "cublas_workspace_backward");
      ws_bwd = false;
    }
    return id;
  }
  // A bias gradient: sum over the tokens, with the reduction kernel's scratch.
  BufferId column_sum(std::uint64_t rows, std::uint64_t cols, Bytes e, const char* name) {
    BufferId out = A(cols * e, name);
    auto [buf, sem] = cuda_column_sum_scratch(rows, cols);
    if (buf) {
      BufferId bu = A(buf, "reduce_staging"), se = A(sem, "reduce_semaphores");
      F(se);
      F(bu);
    }
    return out;
  }
  // AccumulateGrad: the first gradient is stolen; a second (tied embedding) is added in place
  // when the first is a plain tensor (autocast's fp32 copy), else out of place.
  void set_grad(std::size_t t, BufferId g, bool first_is_view = false) {
    if (kept_[t]) {
      // zero_grad(set_to_none=False): AccumulateGrad adds into the kept .grad in place (once
      // the tied embedding's two grads have met in its input buffer) and the new one goes.
      if (t == tied_ && !grads_[t]) {
        grads_[t] = g;
        return;
      }
      if (t == tied_) {
        BufferId first = grads_[t];
        grads_[t] = 0;
        if (first_is_view) {
          BufferId sum = A(params_[t].elems * pe, "grad_accumulate");
          F(first);
          F(g);
          g = sum;
        } else {
          F(g);
          g = first;
        }
      }
      F(g, "grad_accumulated");
      return;
    }
    if (!grads_[t]) {
      grads_[t] = g;
      return;
    }
    if (first_is_view) {
      BufferId sum = A(params_[t].elems * pe, "grad_accumulate");
      F(grads_[t]);
      F(g);
      grads_[t] = sum;
    } else {
      F(g);
    }
  }
  // InputBuffer::accumulate for an activation's gradients: in place into the first when it is
  // not a view, else into the second, else a new tensor.
  BufferId accumulate(BufferId old, bool old_view, BufferId add, bool add_view, Bytes bytes) {
    if (!old_view) {
      F(add);
      return old;
    }
    if (!add_view) {
      F(old);
      return add;
    }
    BufferId sum = A(bytes, "grad_sum");
    F(old);
    F(add);
    return sum;
  }

  Norm layer_norm(BufferId x, std::size_t w, std::size_t bias);
  void layer_norm_back(Norm& n, BufferId& g, bool free_in, BufferId* dx);
  Lin linear(BufferId in, bool in_fp32, std::uint64_t in_f, std::uint64_t out_f, std::size_t w, std::size_t bias);
  // into: the input's grad already in its InputBuffer; dx is added to it as soon as it is
  // made (the engine accumulates when a node delivers its output), and *into returned.
  BufferId linear_back(Lin& l, BufferId& g, bool free_g, bool free_in, bool need_dx = true, BufferId* into = nullptr,
                       bool into_view = false);
  // The attention of q, k, v (views of a projection's output, or llama's rotated copies).
  Attn attention(bool causal);
  BufferId explicit_attention_back(Attn& at, BufferId& da, bool causal);
  void sdpa_back_scratch();
  void dropout_fwd(std::uint64_t n, Bytes e, BufferId& mask, BufferId& out);
  void embedding_dropout_back(BufferId& g, BufferId& mask);
  BufferId branch_grad(BufferId g, BufferId& mask, const char* bf16_name);
  BufferId mlp_back(Layer& y, BufferId g);
  void embedding_back(BufferId& g, bool free_g, std::uint64_t indices, std::uint64_t weights, std::size_t t,
                      bool tied_first_is_view);

  struct Rms {
    BufferId x = 0, xf = 0, rs = 0, to = 0, out = 0;
    std::size_t w = kNone;
  };
  Rms rms_norm(BufferId x, std::size_t w);
  BufferId rms_norm_back(Rms& r, BufferId& g);
  BufferId rotary(BufferId& q, std::uint64_t width, Bytes e);
  // cos/sin: freed by the last node that saved them (layer 0's q rotation), else null.
  BufferId rotary_back(BufferId& g, std::uint64_t width, Bytes e, BufferId* cos = nullptr, BufferId* sin = nullptr);

  void gpt();
  void bert();
  void llama();
  // Cross-entropy on the logits; returns (in logits) the grad of the logits.
  void loss_and_head_back(BufferId& logits);
  void optimizer();

  const TransformerParams& p_;
  EagerSink& k_;
  bool first_;
  std::vector<EagerParam> params_;
  std::vector<BufferId> grads_;
  std::vector<BufferId>& kept_;  // zero_grad(set_to_none=False): each parameter's .grad across steps
  std::size_t tied_ = kNone;     // the embedding tied with the output layer
  std::vector<BufferId> bias_casts_;  // autocast's cache entries that nothing else holds
  std::uint64_t b = 0, s = 0, T = 0, h = 0, nh = 0, hd = 0, V = 0, f = 0;
  Bytes pe = 4, me = 2, xe = 4;
  bool ac = true, dropout = false, ws_fwd = false, ws_bwd = false, ws_lt = false;
  BufferId idx = 0, tgt = 0, loss = 0, total_weight = 0, logprobs = 0, ones = 0;
};

EagerStep::Norm EagerStep::layer_norm(BufferId x, std::size_t w, std::size_t bias) {
  // native_layer_norm: output, then mean and rstd in fp32 (one per token); saves its input.
  Norm n;
  n.in = x, n.w = w, n.bias = bias;
  n.out = A(T * h * xe, "layer_norm_out");
  n.mean = A(T * 4, "layer_norm_mean");
  n.rstd = A(T * 4, "layer_norm_rstd");
  return n;
}

void EagerStep::layer_norm_back(Norm& n, BufferId& g, bool free_in, BufferId* dx) {
  *dx = A(T * h * xe, "grad_layer_norm_in");
  BufferId dw = A(h * pe, "grad_layer_norm_weight"), db = A(h * pe, "grad_layer_norm_bias");
  F(g);
  if (free_in) F(n.in, "layer_norm_in");
  F(n.mean);
  F(n.rstd);
  set_grad(n.w, dw);
  set_grad(n.bias, db);
}

EagerStep::Lin EagerStep::linear(BufferId in, bool in_fp32, std::uint64_t in_f, std::uint64_t out_f, std::size_t w,
                                 std::size_t bias) {
  // Under autocast, linear casts its arguments right to left (the argument evaluation order of
  // the cast wrapper): bias, weight (both cached for the autocast region), then the input when
  // it is fp32. The weight's bf16 copy is saved for backward; the bias's lives in the cache.
  Lin l;
  l.in = in, l.in_f = in_f, l.out_f = out_f, l.w = w, l.bias = bias, l.saved_in = in;
  if (ac) {
    if (bias != kNone) bias_casts_.push_back(A(params_[bias].elems * 2, "autocast_bias"));
    l.w_cast = A(params_[w].elems * 2, "autocast_weight");
    if (in_fp32) {
      l.saved_in = A(T * in_f * 2, "autocast_input");
      l.in_cast = true;
    }
  }
  l.out = gemm(T * out_f * me, "linear_out", false, bias != kNone);
  return l;
}

BufferId EagerStep::linear_back(Lin& l, BufferId& g, bool free_g, bool free_in, bool need_dx, BufferId* into,
                                bool into_view) {
  // With a bias: addmm's backward (input grad, then weight grad), the bias grad summed over
  // the tokens; without: mm's (weight grad first). Then the saved tensors go, and under
  // autocast each cast's backward turns its grad into the fp32 parameter's (input cast first:
  // the last created).
  BufferId dx = 0, dw = 0, db = 0;
  if (l.bias != kNone) {
    if (need_dx) dx = gemm(T * l.in_f * me, "grad_linear_in", true);
    dw = gemm(l.out_f * l.in_f * me, "grad_linear_weight", true);
    db = column_sum(T, l.out_f, me, "grad_linear_bias");
    if (free_g) F(g);
    if (free_in || l.in_cast) F(l.saved_in, "linear_saved_input");
    F(l.w_cast, "autocast_weight");
  } else {
    dw = gemm(l.out_f * l.in_f * me, "grad_linear_weight", true);
    if (need_dx) dx = gemm(T * l.in_f * me, "grad_linear_in", true);
    if (free_g) F(g);
    F(l.w_cast, "autocast_weight");
    if (free_in || l.in_cast) F(l.saved_in, "linear_saved_input");
  }
  bool dx_view = true;  // matmul's grad of a 3-d input is a view of the 2-d one
  if (ac) {
    if (l.in_cast && dx) {
      BufferId d32 = A(T * l.in_f * 4, "grad_autocast_input");
      F(dx);
      dx = d32;
      dx_view = false;
      if (into) {
        *into = accumulate(*into, into_view, dx, dx_view, T * l.in_f * 4);
        dx = *into;
        into = nullptr;
      }
    }
    BufferId w32 = A(l.out_f * l.in_f * 4, "grad_weight_fp32");
    F(dw);
    set_grad(l.w, w32);
    if (db) {
      BufferId b32 = A(l.out_f * 4, "grad_bias_fp32");
      F(db);
      set_grad(l.bias, b32);
    }
  } else {
    set_grad(l.w, dw, true);
    if (db) set_grad(l.bias, db);
  }
  if (into && dx) dx = *into = accumulate(*into, into_view, dx, dx_view, T * l.in_f * (ac ? 2 : pe));
  return dx;
}

// The explicit attention's backward, from the grad of its merged output (da, freed) to the
// grad of the qkv projection's output (returned); frees what the forward saved. causal: the
// scores went through masked_fill, whose backward comes before the scale's and frees the mask.
BufferId EagerStep::explicit_attention_back(Attn& at, BufferId& da, bool causal) {
  const std::uint64_t S = b * nh * s * s;
  BufferId dctx = A(T * h * me, "grad_attention_context");  // the merge's reshape, backward
  F(da);
  BufferId dv = gemm(T * h * me, "grad_v", true);
  BufferId dp = gemm(S * me, "grad_probs", true);
  F(dctx);
  F(at.vc, "v_contiguous");
  if (ac) F(at.pc, "probs_bf16");
  if (ac) {
    BufferId d32 = A(S * 4, "grad_probs_fp32");
    F(dp);
    dp = d32;
  }
  if (dropout) {
    BufferId d = A(S * (ac ? 4 : me), "grad_attention_dropout");
    F(dp);
    F(at.dmask);
    if (!ac) F(at.dout);
    dp = d;
  }
  BufferId dsm = A(S * (ac ? 4 : me), "grad_softmax_in");
  BufferId tmp = A(S * (ac ? 4 : me), "softmax_backward_temp");
  F(tmp);
  F(dp);
  F(at.sm, "softmax_out");
  if (ac) {
    BufferId d16 = A(S * 2, "grad_scores_bf16");
    F(dsm);
    dsm = d16;
  }
  if (causal) {
    BufferId dm = A(S * me, "grad_masked_fill");
    F(dsm);
    F(at.mask, "causal_mask");
    dsm = dm;
  }
  BufferId dsc = A(S * me, "grad_scale");
  F(dsm);
  BufferId dk = gemm(T * h * me, "grad_k", true);
  BufferId dq = gemm(T * h * me, "grad_q", true);
  F(dsc);
  F(at.qc, "q_contiguous");
  F(at.kc, "k_contiguous");
  BufferId dvc = A(T * h * me, "grad_v_reshape");
  F(dv);
  BufferId dqc = A(T * h * me, "grad_q_reshape");
  F(dq);
  BufferId dqkv = A(T * 3 * h * me, "grad_qkv_cat");
  F(dqc);
  F(dk);
  F(dvc);
  return dqkv;
}

// The grad of a residual branch's output from the residual's grad g (kept): autocast's bf16
// copy of it, then the branch's dropout backward, which frees the mask.
BufferId EagerStep::branch_grad(BufferId g, BufferId& mask, const char* bf16_name) {
  if (ac) g = A(T * h * 2, bf16_name);
  if (dropout) {
    BufferId d = A(T * h * me, "grad_dropout");
    if (ac) F(g);
    F(mask);
    g = d;
  }
  return g;
}

// The MLP branch (fc1, gelu, fc2, dropout) backward from the residual's grad g to the grad of
// fc1's output (returned); frees what fc2 and gelu saved.
BufferId EagerStep::mlp_back(Layer& y, BufferId g) {
  BufferId g2 = branch_grad(g, y.m2, "grad_fc2_out_bf16");
  BufferId dgelu = linear_back(y.lfc2, g2, ac || dropout, true);
  BufferId dfc1 = A(T * f * me, "grad_gelu_in");
  F(dgelu);
  F(y.fc1, "fc1_out");
  return dfc1;
}

// The embeddings' dropout backward: g (freed) becomes the grad of the dropout's input.
void EagerStep::embedding_dropout_back(BufferId& g, BufferId& mask) {
  BufferId d = A(T * h * xe, "grad_dropout");
  F(g);
  F(mask);
  g = d;
}

// The scratch of sdpa's backward kernel, allocated and freed inside it: flash's softmax row
// sums and dq accumulator, or memory-efficient attention's delta and workspace.
void EagerStep::sdpa_back_scratch() {
  if (p_.attention == Attention::SdpaFlash) {
    BufferId sd = A(b * nh * round_up(s, 128) * 4, "flash_softmax_d");
    BufferId acc = A(b * round_up(s, 128) * nh * round_up(hd, 32) * 4, "flash_dq_accum");
    F(acc);
    F(sd);
  } else {
    const std::uint64_t R = round_up(s, 128);
    BufferId delta = A(b * nh * s * 4, "mem_efficient_delta");
    BufferId ws = A(b * nh * R * hd * 4 + b * nh * (R / 128) * 16, "mem_efficient_workspace");
    F(delta);
    F(ws);
  }
}

void EagerStep::dropout_fwd(std::uint64_t n, Bytes e, BufferId& mask, BufferId& out) {
  // native_dropout: the bool mask, then the output; backward needs the mask only.
  mask = A(n, "dropout_mask");
  out = A(n * e, "dropout_out");
}

EagerStep::Attn EagerStep::attention(bool causal) {
  Attn at;
  const std::uint64_t S = b * nh * s * s;  // elements of the score matrices
  if (p_.attention == Attention::Explicit) {
    // matmul on 4-d views: q and k^T are copied contiguous (saved by bmm), scores, * scale.
    at.qc = A(T * h * me, "q_contiguous");
    at.kc = A(T * h * me, "k_contiguous");
    BufferId scores = gemm(S * me, "attention_scores", false);
    BufferId scaled = A(S * me, "attention_scaled");
    F(scores);
    BufferId sc = scaled;
    if (causal) {
      BufferId ones = A(s * s, "causal_ones");
      at.mask = A(s * s, "causal_mask");  // triu(1), saved by masked_fill
      F(ones);
      sc = A(S * me, "attention_masked");
      F(scaled);
    }
    // softmax under autocast runs in fp32: an fp32 copy of its input, then the output.
    if (ac) {
      BufferId conv = A(S * 4, "softmax_input_fp32");
      at.sm = A(S * 4, "softmax_out");
      F(conv);
    } else {
      at.sm = A(S * me, "softmax_out");
    }
    BufferId probs = at.sm;
    if (dropout) {
      dropout_fwd(S, ac ? 4 : me, at.dmask, at.dout);
      probs = at.dout;
    }
    if (ac) {
      at.pc = A(S * 2, "probs_bf16");
    } else {
      at.pc = probs;
    }
    at.vc = A(T * h * me, "v_contiguous");
    BufferId ctx = gemm(T * h * me, "attention_context", false);
    F(sc, "attention_scores");  // attend()'s locals at return
    if (dropout && ac) F(at.dout, "dropout_out");
    // .transpose(1, 2).reshape(b, s, h) copies the heads back together.
    at.out = A(T * h * me, "attention_merged");
    F(ctx);
    return at;
  }
  // scaled_dot_product_attention: the output in [b, s, heads, hd] (the transposes back are
  // views) and the log-sum-exp; flash also returns its RNG state on the GPU.
  at.out = A(T * h * me, "sdpa_out");
  if (p_.attention == Attention::SdpaFlash) {
    at.lse = A(b * nh * s * 4, "sdpa_logsumexp");
    at.r16 = A(16, "flash_rng_state");
    at.r8 = A(8, "flash_debug");
  } else {
    at.lse = A(b * nh * round_up(s, 32) * 4, "sdpa_logsumexp");
  }
  return at;
}

void EagerStep::embedding_back(BufferId& g, bool free_g, std::uint64_t n, std::uint64_t weights, std::size_t t,
                               bool first_is_view) {
  // embedding_dense_backward (CUDA): up to 3072 indices, one kernel into a zeroed grad; beyond,
  // sort the indices (cub radix sort) and reduce by segments, with their temporaries.
  const Bytes ge = xe;  // the grad's dtype is the embedding output's
  if (n <= 3072) {
    BufferId gw = A(weights * h * ge, "grad_embedding");
    if (free_g) F(g);
    set_grad(t, gw, first_is_view);
    return;
  }
  BufferId sorted = A(n * 8, "sorted_indices"), orig = A(n * 8, "orig_indices");
  BufferId range = A(n * 8, "arange");
  BufferId tmp = A(16 * round_up(n, 32) + 18943, "cub_sort_temp");
  F(tmp);
  F(range);
  BufferId gw = A(weights * h * ge, "grad_embedding");
  BufferId seg_off = A(n * 8, "segment_offsets"), nseg = A(8, "num_segments");
  BufferId dummy = A(n * 8, "unique_dummy");
  tmp = A(1279, "cub_unique_temp");
  F(tmp);
  F(dummy);
  const std::uint64_t max_seg = std::min(n, weights);
  BufferId pps = A(max_seg * 8, "partials_per_segment"), ppso = A(max_seg * 8, "partials_per_segment_offset");
  tmp = A(1279, "cub_scan_temp");
  F(tmp);
  BufferId npart = A(8, "num_partial_segments");
  const std::uint64_t max_partial = n / 10 + max_seg;
  BufferId pso = A(max_partial * 8, "partial_segment_offset");
  // The per-segment partial sums (fp32, one row each); with very few embedding rows (BERT's 2
  // token types) PyTorch allocated an index-sized buffer instead. Recorded for 2 rows and for
  // vocabularies (30522 and up); the threshold between them is an assumption.
  BufferId gps = weights <= 64 ? A(max_partial * 8, "partial_segment_index")
                               : A(max_partial * h * 4, "grad_weight_per_segment");
  F(gps);
  F(pso);
  F(npart);
  F(ppso);
  F(pps);
  F(nseg);
  F(seg_off);
  F(orig);
  F(sorted);
  if (free_g) F(g);
  set_grad(t, gw, first_is_view);
}

// Cross-entropy on logits.float() (log_softmax saved, nll_loss) and its backward.
void EagerStep::loss_and_head_back(BufferId& logits) {
  BufferId l32 = logits;
  if (me != 4) l32 = A(T * V * 4, "logits_fp32");
  logprobs = A(T * V * 4, "log_softmax");
  loss = A(4, "loss");
  total_weight = A(4, "nll_total_weight");
  if (l32 != logits) F(l32);
  F(logits, "logits");  // del logits
  ones = A(4, "grad_loss");
  BufferId gn = A(T * V * 4, "grad_nll");
  F(total_weight);
  BufferId gl = A(T * V * 4, "grad_log_softmax");
  F(gn);
  F(logprobs);
  if (me != 4) {
    BufferId g16 = A(T * V * me, "grad_logits");
    F(gl);
    gl = g16;
  }
  logits = gl;  // the grad of the logits, for the head's backward
}

void EagerStep::optimizer() {
  // AdamW(foreach=True): states created lazily at the first step (exp_avg, exp_avg_sq per
  // parameter; the step counters live on the CPU); then _multi_tensor_adam's one list of
  // temporaries, torch._foreach_sqrt(exp_avg_sqs), freed at return (last first). Fused: the
  // step counters are on the GPU and there is no temporary. single_tensor: each parameter's
  // denom (sqrt, then / bias_correction2_sqrt) is kept until the next one replaces it.
  const std::size_t np = params_.size();
  const bool fused = p_.optimizer == Optimizer::Fused;
  if (first_)
    for (std::size_t t = 0; t < np; ++t) {
      const Bytes n = params_[t].elems * pe;
      if (fused) k_.alloc_as(eager_step_id(t), 4, "adam_step");
      k_.alloc_as(eager_exp_avg_id(t), n, "adam_exp_avg");
      k_.alloc_as(eager_exp_avg_sq_id(t), n, "adam_exp_avg_sq");
    }
  if (p_.optimizer == Optimizer::Foreach) {
    std::vector<BufferId> tmp(np);
    for (std::size_t t = 0; t < np; ++t) tmp[t] = A(params_[t].elems * pe, "adam_exp_avg_sq_sqrt");
    for (std::size_t t = np; t-- > 0;) F(tmp[t], "adam_exp_avg_sq_sqrt");
  } else if (p_.optimizer == Optimizer::SingleTensor) {
    BufferId denom = 0;
    for (std::size_t t = 0; t < np; ++t) {
      BufferId sq = A(params_[t].elems * pe, "adam_sqrt");
      BufferId d = A(params_[t].elems * pe, "adam_denom");
      F(sq);
      F(denom);
      denom = d;
    }
    F(denom);
  }
  // zero_grad(set_to_none=True): the grads go in parameter order; set_to_none=False zeroes
  // them in place (torch._foreach_zero_) and keeps them.
  for (std::size_t t = 0; t < np; ++t) {
    if (p_.zero_grad_to_none) {
      F(grads_[t], "grad");
    } else if (!kept_[t]) {
      kept_[t] = grads_[t];
      grads_[t] = 0;
    }
  }
}

void EagerStep::run() {
  if (first_) {
    const auto order = eager_param_alloc_order(p_);
    for (std::size_t t : order) k_.alloc_as(eager_weight_id(t), params_[t].elems * pe, "weight");
    if (p_.family == Family::Llama) k_.alloc_as(kEagerInvFreq, (hd / 2) * pe, "inv_freq");
  }
  idx = A(T * 8, "input_ids");
  tgt = A(T * 8, "targets");
  switch (p_.family) {
    case Family::Gpt: gpt(); break;
    case Family::Bert: bert(); break;
    case Family::Llama: llama(); break;
  }
  optimizer();
  F(loss, "loss");
  F(idx, "input_ids");
  F(tgt, "targets");
}

void EagerStep::gpt() {
  const std::size_t L = p_.layers;
  auto lp = [&](std::size_t l, int k) { return 2 + l * kG_Count + k; };
  const std::size_t lnf_w = 2 + L * kG_Count, lnf_b = lnf_w + 1;
  BufferId pos = A(s * 8, "positions");
  BufferId e1 = A(T * h * xe, "wte_out"), e2 = A(s * h * xe, "wpe_out");
  BufferId x = A(T * h * xe, "embedding_sum");
  F(e1);
  F(e2);
  BufferId emask = 0;
  if (dropout) {
    BufferId d = 0;
    dropout_fwd(T * h, xe, emask, d);
    F(x);
    x = d;
  }
  std::vector<Layer> ls(L);
  const bool explicit_attn = p_.attention == Attention::Explicit;
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = ls[l];
    y.x = x;
    y.n1 = layer_norm(x, lp(l, kG_Ln1W), lp(l, kG_Ln1B));
    y.lqkv = linear(y.n1.out, ac, h, 3 * h, lp(l, kG_QkvW), lp(l, kG_QkvB));
    if (ac) F(y.n1.out);
    y.qkv = y.lqkv.out;
    y.at = attention(true);
    y.lproj = linear(y.at.out, false, h, h, lp(l, kG_ProjW), lp(l, kG_ProjB));
    BufferId add_in = y.lproj.out;
    if (dropout) {
      BufferId d = 0;
      dropout_fwd(T * h, me, y.m1, d);
      F(y.lproj.out);
      add_in = d;
    }
    y.x_mid = A(T * h * xe, "residual_1");
    F(add_in);
    if (!dropout) y.lproj.out = 0;
    y.n2 = layer_norm(y.x_mid, lp(l, kG_Ln2W), lp(l, kG_Ln2B));
    y.lfc1 = linear(y.n2.out, ac, h, f, lp(l, kG_Fc1W), lp(l, kG_Fc1B));
    if (ac) F(y.n2.out);
    y.fc1 = y.lfc1.out;
    y.gelu = A(T * f * me, "gelu_out");
    y.lfc2 = linear(y.gelu, false, f, h, lp(l, kG_Fc2W), lp(l, kG_Fc2B));
    BufferId fc2 = y.lfc2.out;
    add_in = fc2;
    if (dropout) dropout_fwd(T * h, me, y.m2, add_in);
    y.out = A(T * h * xe, "residual_2");
    if (dropout) F(add_in);
    // forward() returns: q, k, v (views of the qkv output) and y go.
    if (explicit_attn) F(y.qkv, "qkv_out");
    F(fc2, "fc2_out");
    x = y.out;
  }
  Norm nf = layer_norm(x, lnf_w, lnf_b);
  Lin head;
  head.in = nf.out, head.in_f = h, head.out_f = V, head.w = 0, head.saved_in = nf.out;
  if (ac) {
    head.w_cast = A(V * h * 2, "autocast_weight");
    head.saved_in = A(T * h * 2, "autocast_input");
    head.in_cast = true;
  }
  head.out = gemm(T * V * me, "logits", false);
  if (ac) F(nf.out);
  for (auto& c : bias_casts_) F(c, "autocast_bias");  // leaving autocast clears its cache
  BufferId g = head.out;
  loss_and_head_back(g);
  BufferId dx = linear_back(head, g, true, !ac);
  BufferId gx = 0;
  layer_norm_back(nf, dx, true, &gx);
  for (std::size_t l = L; l-- > 0;) {
    Layer& y = ls[l];
    // x_out = x_mid + fc2(...): the grad flows to both; autocast converts the bf16 branch's.
    BufferId dfc1 = mlp_back(y, gx);
    BufferId dln2 = linear_back(y.lfc1, dfc1, true, !ac);
    BufferId dxm = 0;
    layer_norm_back(y.n2, dln2, true, &dxm);
    gx = accumulate(gx, false, dxm, false, T * h * xe);
    BufferId g1 = branch_grad(gx, y.m1, "grad_proj_out_bf16");
    const bool sdpa = !explicit_attn;
    BufferId da = linear_back(y.lproj, g1, ac || dropout, !sdpa);
    Attn& at = y.at;
    BufferId dqkv = 0;
    if (explicit_attn) {
      dqkv = explicit_attention_back(at, da, true);
    } else {
      BufferId dq = A(T * h * me, "grad_q"), dk = A(T * h * me, "grad_k"), dv = A(T * h * me, "grad_v");
      sdpa_back_scratch();
      F(da);
      F(y.qkv, "qkv_out");
      F(at.lse);
      F(at.out, "sdpa_out");
      F(at.r16);
      F(at.r8);
      dqkv = A(T * 3 * h * me, "grad_qkv_cat");
      F(dq);
      F(dk);
      F(dv);
    }
    BufferId dln1 = linear_back(y.lqkv, dqkv, true, !ac);
    BufferId dxin = 0;
    layer_norm_back(y.n1, dln1, true, &dxin);
    gx = accumulate(gx, false, dxin, false, T * h * xe);
  }
  // x = wte(idx) + wpe(pos): wpe's grad is summed over the rows first (broadcast).
  if (dropout) embedding_dropout_back(gx, emask);
  // (sum_to reduces the leading dimension even when it is 1: a new tensor.)
  BufferId gp = A(s * h * xe, "grad_wpe_out");
  embedding_back(gp, true, s, params_[1].elems / h, 1, false);
  F(pos, "positions");
  embedding_back(gx, true, T, V, 0, !ac);
  F(ones, "grad_loss");
}

void EagerStep::bert() {
  const std::size_t L = p_.layers;
  auto lp = [&](std::size_t l, int k) { return kBertFirstLayer + l * kB_Count + k; };
  const std::size_t hfc_w = kBertFirstLayer + L * kB_Count, hfc_b = hfc_w + 1, hln_w = hfc_w + 2, hln_b = hfc_w + 3;
  BufferId pos = A(s * 8, "positions"), types = A(T * 8, "token_types");
  BufferId e1 = A(T * h * xe, "wte_out"), e2 = A(s * h * xe, "wpe_out");
  BufferId s1 = A(T * h * xe, "embedding_sum");
  F(e1);
  F(e2);
  BufferId e3 = A(T * h * xe, "tte_out");
  BufferId s2 = A(T * h * xe, "embedding_sum");
  F(s1);
  F(e3);
  Norm ne = layer_norm(s2, 4, 5);
  BufferId emask = 0, x = ne.out;
  if (dropout) {
    dropout_fwd(T * h, xe, emask, x);
    F(ne.out);
  }
  std::vector<Layer> ls(L);
  const bool explicit_attn = p_.attention == Attention::Explicit;
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = ls[l];
    y.x = x;
    y.lqkv = linear(x, ac, h, 3 * h, lp(l, kB_QkvW), lp(l, kB_QkvB));
    y.qkv = y.lqkv.out;
    y.at = attention(false);
    y.lproj = linear(y.at.out, false, h, h, lp(l, kB_ProjW), lp(l, kB_ProjB));
    BufferId add_in = y.lproj.out;
    if (dropout) {
      dropout_fwd(T * h, me, y.m1, add_in);
      F(y.lproj.out);
    }
    y.x_mid = A(T * h * xe, "residual_1");
    F(add_in);
    y.lproj.out = 0;
    y.n1 = layer_norm(y.x_mid, lp(l, kB_Ln1W), lp(l, kB_Ln1B));
    y.x1 = y.n1.out;
    y.lfc1 = linear(y.x1, ac, h, f, lp(l, kB_Fc1W), lp(l, kB_Fc1B));
    y.fc1 = y.lfc1.out;
    y.gelu = A(T * f * me, "gelu_out");
    y.lfc2 = linear(y.gelu, false, f, h, lp(l, kB_Fc2W), lp(l, kB_Fc2B));
    BufferId fc2 = y.lfc2.out;
    add_in = fc2;
    if (dropout) dropout_fwd(T * h, me, y.m2, add_in);
    BufferId s3 = A(T * h * xe, "residual_2");
    if (dropout) F(add_in);
    y.n2 = layer_norm(s3, lp(l, kB_Ln2W), lp(l, kB_Ln2B));
    // forward() returns: its locals x (ln1's output: fc1 saved the bf16 cast), q/k/v, y go;
    // then the caller's x (this layer's input) unless saved.
    if (ac) F(y.x1, "ln1_out");
    if (explicit_attn) F(y.qkv, "qkv_out");
    F(fc2, "fc2_out");
    if (ac) F(y.x, "layer_in");
    x = y.n2.out;
    y.out = x;
  }
  // MLM head: gelu(head_fc(x)) -> head_ln (autocast: in fp32) -> tied decoder with its bias.
  Lin hfc = linear(x, ac, h, h, hfc_w, hfc_b);
  BufferId hg = A(T * h * me, "head_gelu");
  BufferId hln_in = hg;
  if (ac) hln_in = A(T * h * 4, "autocast_layer_norm_input");
  Norm hn = layer_norm(hln_in, hln_w, hln_b);
  if (ac) F(hg);
  if (ac) F(x, "last_layer_out");
  Lin dec = linear(hn.out, ac, h, V, 1, 0);
  if (ac) F(hn.out);
  for (auto& c : bias_casts_) F(c, "autocast_bias");
  BufferId g = dec.out;
  loss_and_head_back(g);
  BufferId dx = linear_back(dec, g, true, !ac);
  BufferId dhg = 0;
  layer_norm_back(hn, dx, true, &dhg);
  if (ac) {
    BufferId d16 = A(T * h * 2, "grad_head_gelu_bf16");
    F(dhg);
    dhg = d16;
  }
  BufferId dhfc = A(T * h * me, "grad_head_gelu_in");
  F(dhg);
  F(hfc.out, "head_fc_out");
  BufferId gx = linear_back(hfc, dhfc, true, !ac);
  for (std::size_t l = L; l-- > 0;) {
    Layer& y = ls[l];
    BufferId ds3 = 0;
    layer_norm_back(y.n2, gx, true, &ds3);
    // s3 = x1 + dropout(fc2): the fc2 branch (bf16 under autocast), then x1's.
    BufferId dfc1 = mlp_back(y, ds3);
    BufferId gx1 = linear_back(y.lfc1, dfc1, true, !ac, true, &ds3, false);
    BufferId dsm = 0;
    layer_norm_back(y.n1, gx1, true, &dsm);
    BufferId g1 = branch_grad(dsm, y.m1, "grad_proj_out_bf16");
    BufferId da = linear_back(y.lproj, g1, ac || dropout, true);
    Attn& at = y.at;
    BufferId dqkv = explicit_attention_back(at, da, false);
    // The layer input's grads: the residual's (ln1's input grad) and the qkv projection's.
    gx = linear_back(y.lqkv, dqkv, true, !ac, true, &dsm, false);
  }
  if (dropout) embedding_dropout_back(gx, emask);
  BufferId ds2 = 0;
  layer_norm_back(ne, gx, true, &ds2);
  // s2 = (wte + wpe) + tte: tte's embedding first (created last), then wpe's, then wte's.
  embedding_back(ds2, false, T, 2, 3, false);
  F(types, "token_types");  // saved by tte's embedding, a local of forward()
  BufferId gp = A(s * h * xe, "grad_wpe_out");
  embedding_back(gp, true, s, params_[2].elems / h, 2, false);
  F(pos, "positions");
  embedding_back(ds2, true, T, V, 1, !ac);
  F(ones, "grad_loss");
}

// Llama's RMSNorm as its reference code writes it: in fp32, cast back, times the weight.
EagerStep::Rms EagerStep::rms_norm(BufferId x, std::size_t w) {
  Rms r;
  r.w = w;
  r.x = x;
  r.xf = xe == 4 ? x : A(T * h * 4, "rms_x_fp32");  // x.float()
  BufferId pw = A(T * h * 4, "rms_pow");
  BufferId mn = A(T * 4, "rms_mean");
  F(pw);
  BufferId ep = A(T * 4, "rms_add_eps");
  F(mn);
  r.rs = A(T * 4, "rms_rsqrt");
  F(ep);
  BufferId mu = A(T * h * 4, "rms_normalized");
  r.to = xe == 4 ? mu : A(T * h * xe, "rms_normalized_cast");
  r.out = A(T * h * xe, "rms_out");
  if (r.to != mu) F(mu);
  return r;
}

BufferId EagerStep::rms_norm_back(Rms& r, BufferId& g) {
  // out = weight * to: other's grad first (g * weight), then self's (g * to), summed to [h].
  BufferId go = A(T * h * xe, "grad_rms_normalized");
  BufferId gs = A(T * h * xe, "grad_rms_weight_full");
  BufferId dw = column_sum(T, h, xe, "grad_rms_weight");
  F(gs);
  F(g);
  BufferId to = r.to;
  if (xe != 4) F(r.to, "rms_normalized_cast");
  set_grad(r.w, dw);
  if (xe != 4) {
    BufferId c = A(T * h * 4, "grad_rms_normalized_fp32");
    F(go);
    go = c;
  }
  // mu = xf * rs: rs's grad (summed over h), then xf's.
  BufferId gr_full = A(T * h * 4, "grad_rms_rsqrt_full");
  BufferId gx = A(T * h * 4, "grad_rms_x");
  BufferId gr = A(T * 4, "grad_rms_rsqrt");
  F(gr_full);
  F(go);
  if (xe == 4) F(to, "rms_normalized");
  // rsqrt's backward: -0.5 * g * rs^3.
  BufferId p3 = A(T * 4, "rsqrt_backward_pow"), m = A(T * 4, "rsqrt_backward_mul");
  BufferId ge = A(T * 4, "grad_rms_add_eps");
  F(m);
  F(p3);
  F(gr);
  F(r.rs, "rms_rsqrt");
  BufferId gm = A(T * h * 4, "grad_rms_pow");  // mean's backward: expand / h
  F(ge);
  BufferId a1 = A(T * h * 4, "pow_backward_pow"), a2 = A(T * h * 4, "pow_backward_mul");
  BufferId a3 = A(T * h * 4, "grad_rms_x_pow");
  F(a2);
  F(a1);
  F(gm);
  F(r.xf, "rms_x_fp32");
  gx = accumulate(gx, false, a3, false, T * h * 4);
  if (xe != 4) {
    BufferId d = A(T * h * xe, "grad_rms_in");
    F(gx);
    gx = d;
  }
  return gx;
}

// q * cos + rotate_half(q) * sin, rotate_half(q) = cat(-q2, q1).
BufferId EagerStep::rotary(BufferId& q, std::uint64_t width, Bytes e) {
  BufferId qc = A(T * width * e, "rotary_mul_cos");
  BufferId neg = A(T * width / 2 * e, "rotary_neg");
  BufferId cat = A(T * width * e, "rotary_cat");
  F(neg);
  BufferId qs = A(T * width * e, "rotary_mul_sin");
  F(cat);
  BufferId out = A(T * width * e, "rotary_out");
  F(qc);
  F(qs);
  F(q, "rotary_in");
  return out;
}

BufferId EagerStep::rotary_back(BufferId& g, std::uint64_t width, Bytes e, BufferId* cos, BufferId* sin) {
  BufferId gs = A(T * width * e, "grad_rotary_sin");
  if (sin) F(*sin, "rotary_sin");
  BufferId gn = A(T * width / 2 * e, "grad_rotary_neg");
  BufferId g2 = A(T * width * e, "grad_rotary_slice2");  // slice_backward: zeros + copy
  F(gn);
  BufferId g1 = A(T * width * e, "grad_rotary_slice1");
  F(gs);
  g2 = accumulate(g2, false, g1, false, T * width * e);
  BufferId gc = A(T * width * e, "grad_rotary_cos");
  F(g);
  if (cos) F(*cos, "rotary_cos");
  return accumulate(g2, false, gc, false, T * width * e);
}

void EagerStep::llama() {
  const std::size_t L = p_.layers;
  const std::uint64_t kvh = kv_heads(p_), kv = kvh * hd;
  const Bytes re = std::max(me, pe);  // rotary: q (matmul output) times cos (param dtype)
  auto lp = [&](std::size_t l, int k) { return 1 + l * kL_Count + k; };
  const std::size_t norm_w = 1 + L * kL_Count, out_w = norm_w + 1;
  // cos/sin: arange, inv_freq.float(), outer, cat, cos()/sin() in fp32, cast to the params'.
  BufferId t = A(s * 4, "rotary_positions");
  BufferId invf = pe == 4 ? 0 : A(hd / 2 * 4, "inv_freq_fp32");
  BufferId freqs = A(s * hd / 2 * 4, "rotary_freqs");
  F(invf);
  BufferId emb = A(s * hd * 4, "rotary_emb");
  BufferId cs[2];
  for (auto& c : cs) {
    BufferId c32 = A(s * hd * 4, "rotary_cos_sin_fp32");
    c = c32;
    if (pe != 4) {
      c = A(s * hd * pe, "rotary_cos_sin");
      F(c32);
    }
  }
  BufferId x = A(T * h * xe, "embedding_out");
  std::vector<Layer> ls(L);
  std::vector<Rms> r1(L), r2(L);
  for (std::size_t l = 0; l < L; ++l) {
    Layer& y = ls[l];
    y.x = x;
    r1[l] = rms_norm(x, lp(l, kL_N1));
    const BufferId y1 = r1[l].out;
    const bool cast_in = ac && xe == 4;
    y.lq = linear(y1, cast_in, h, h, lp(l, kL_Wq), kNone);
    y.lk = linear(y1, cast_in, h, kv, lp(l, kL_Wk), kNone);
    y.lv = linear(y1, cast_in, h, kv, lp(l, kL_Wv), kNone);
    BufferId q = y.lq.out, k = y.lk.out;
    y.q = rotary(q, h, re);
    y.k = rotary(k, kv, re);
    // repeat_kv: expand + reshape copies k and v to every head.
    BufferId kr = A(T * h * re, "repeat_k");
    F(y.k);
    y.k = kr;
    y.v = A(T * h * me, "repeat_v");
    F(y.lv.out, "v_proj_out");
    y.at = attention(true);
    y.lo = linear(y.at.out, false, h, h, lp(l, kL_Wo), kNone);
    y.x_mid = A(T * h * xe, "residual_1");
    F(y.lo.out);
    r2[l] = rms_norm(y.x_mid, lp(l, kL_N2));
    const BufferId y2 = r2[l].out;
    if (cast_in) Fv(y1, "rms_out");  // `y` rebound; only its bf16 casts are saved
    y.lgate = linear(y2, cast_in, h, f, lp(l, kL_Gate), kNone);
    y.silu = A(T * f * me, "silu_out");
    y.lup = linear(y2, cast_in, h, f, lp(l, kL_Up), kNone);
    y.prod = A(T * f * me, "swiglu_out");
    y.ldown = linear(y.prod, false, f, h, lp(l, kL_Down), kNone);
    y.out = A(T * h * xe, "residual_2");
    F(y.ldown.out);
    if (cast_in) Fv(y2, "rms_out");
    if (xe != 4) {
      F(y.x_mid, "residual_1");  // a local of forward(): its fp32 copy is what is saved
      F(y.x, "layer_in");
    }
    x = y.out;
  }
  Rms rf = rms_norm(x, norm_w);
  Lin head = linear(rf.out, ac && xe == 4, h, V, out_w, kNone);
  if (head.in_cast) F(rf.out, "rms_out");  // a temporary; its bf16 cast is saved
  F(t);
  F(freqs);
  F(emb);
  if (xe != 4) F(x, "last_layer_out");
  for (auto& c : bias_casts_) F(c, "autocast_bias");
  BufferId g = head.out;
  loss_and_head_back(g);
  BufferId dx = linear_back(head, g, true, true);
  BufferId gx = rms_norm_back(rf, dx);
  for (std::size_t l = L; l-- > 0;) {
    Layer& y = ls[l];
    BufferId gd = gx;
    BufferId dprod = linear_back(y.ldown, gd, false, true);
    BufferId gup = A(T * f * me, "grad_up_out"), gsilu = A(T * f * me, "grad_silu_out");
    F(dprod);
    F(y.lup.out, "up_out");
    F(y.silu, "silu_out");
    BufferId dyu = linear_back(y.lup, gup, true, false);
    BufferId dgate = A(T * f * me, "grad_gate_out");
    F(gsilu);
    F(y.lgate.out, "gate_out");
    BufferId dy2 = linear_back(y.lgate, dgate, true, true, true, &dyu, true);
    BufferId dxm = rms_norm_back(r2[l], dy2);
    gx = accumulate(gx, false, dxm, false, T * h * xe);
    BufferId go = gx;
    BufferId da = linear_back(y.lo, go, false, false);
    BufferId dq = 0, dk = 0, dv = 0;
    if (p_.attention == Attention::Explicit) {
      throw std::invalid_argument("transformer: llama with explicit attention is not modeled yet");
    }
    dq = A(T * h * me, "grad_q"), dk = A(T * h * me, "grad_k"), dv = A(T * h * me, "grad_v");
    sdpa_back_scratch();
    F(da);
    F(y.k, "repeat_k");
    F(y.q, "rotary_q");
    F(y.v, "repeat_v");
    F(y.at.lse);
    F(y.at.out, "sdpa_out");
    F(y.at.r16);
    F(y.at.r8);
    // repeat_kv's backward sums the copies of each kv head.
    BufferId gv = A(T * kv * me, "grad_v_heads");
    F(dv);
    BufferId gk = A(T * kv * re, "grad_k_heads");
    F(dk);
    gk = rotary_back(gk, kv, re);
    BufferId gq = l ? rotary_back(dq, h, re) : rotary_back(dq, h, re, &cs[0], &cs[1]);
    // .view(b, s, heads, hd).transpose(1, 2) backward: copies into the projections' layout.
    BufferId cv = A(T * kv * me, "grad_v_proj_out");
    F(gv);
    BufferId d1 = linear_back(y.lv, cv, true, false);
    BufferId ck = A(T * kv * me, "grad_k_proj_out");
    F(gk);
    linear_back(y.lk, ck, true, false, true, &d1, true);
    BufferId cq = A(T * h * me, "grad_q_proj_out");
    F(gq);
    BufferId dy1 = linear_back(y.lq, cq, true, true, true, &d1, false);
    BufferId dxin = rms_norm_back(r1[l], dy1);
    gx = accumulate(gx, false, dxin, false, T * h * xe);
  }
  embedding_back(gx, true, T, V, 0, false);
  F(ones, "grad_loss");
}

}  // namespace

void eager_train_step(const TransformerParams& p, const BatchShape& shape, bool first, EagerSink& sink,
                      std::vector<BufferId>& kept_grads) {
  EagerStep(p, shape, first, sink, kept_grads).run();
}

}  // namespace gmb
