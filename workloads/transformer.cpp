#include "workloads/transformer.h"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "workloads/transformer_compute.h"
#include "workloads/transformer_eager.h"

namespace gmb {

const char* to_string(DType t) {
  switch (t) {
    case DType::BF16: return "bf16";
    case DType::FP16: return "fp16";
    case DType::FP32: return "fp32";
  }
  return "?";
}
const char* to_string(Recompute r) {
  switch (r) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full: return "full";
  }
  return "?";
}
const char* to_string(TransformerMode m) { return m == TransformerMode::Train ? "train" : "inference"; }
const char* to_string(Optimizer o) {
  switch (o) {
    case Optimizer::Foreach: return "foreach";
    case Optimizer::Fused: return "fused";
    case Optimizer::SingleTensor: return "single_tensor";
  }
  return "?";
}
Bytes dtype_bytes(DType t) { return t == DType::FP32 ? 4 : 2; }
const char* to_string(Style s) { return s == Style::PytorchEager ? "pytorch_eager" : "korthikanti"; }
const char* to_string(Family f) {
  switch (f) {
    case Family::Gpt: return "gpt";
    case Family::Llama: return "llama";
    case Family::Bert: return "bert";
  }
  return "?";
}
const char* to_string(Precision p) {
  switch (p) {
    case Precision::AutocastBf16: return "autocast_bf16";
    case Precision::Bf16: return "bf16";
    case Precision::Fp32: return "fp32";
  }
  return "?";
}
const char* to_string(Attention a) {
  switch (a) {
    case Attention::Explicit: return "explicit";
    case Attention::SdpaFlash: return "sdpa_flash";
    case Attention::SdpaMemEfficient: return "sdpa_mem_efficient";
  }
  return "?";
}

ActivationBytes korthikanti_layer_bytes(const TransformerParams& p, std::uint64_t s, std::uint64_t b) {
  const Bytes e = dtype_bytes(p.dtype), h = p.hidden, a = p.heads, f = p.ffn_mult;
  ActivationBytes r;
  r.attention = (5 * e + 1) * s * b * h + (2 * e + 1) * a * s * s * b;
  r.mlp = (e + 2 * f * e + 1) * s * b * h;
  r.layer_norm = 2 * e * s * b * h;
  return r;
}

namespace {

// Parameter tensors of a layer, in creation order (as a PyTorch module would create them).
enum LayerParam { kQkvW, kQkvB, kProjW, kProjB, kLn1G, kLn1B, kLn2G, kLn2B, kFc1W, kFc1B, kFc2W, kFc2B, kLayerParams };
// Global tensors, after the layers: the embedding (tied with the output layer), the final norm.
enum GlobalParam { kEmb, kLnfG, kLnfB, kGlobalParams };

std::vector<std::uint64_t> param_elements(const TransformerParams& p) {
  const std::uint64_t h = p.hidden, f = p.ffn_mult;
  std::vector<std::uint64_t> v;
  v.push_back(p.vocab * h);  // embedding first, as a model's constructor creates it
  for (std::uint64_t l = 0; l < p.layers; ++l)
    for (std::uint64_t x : {3 * h * h, 3 * h, h * h, h, h, h, h, h, f * h * h, f * h, f * h * h, h}) v.push_back(x);
  v.push_back(h);
  v.push_back(h);
  return v;
}

// Persistent buffer ids: 1 + 8 * tensor + role. Step-local ids: (step + 1) << 32 | n.
enum Role { kWeight, kGrad, kMaster, kAdamM, kAdamV };
constexpr BufferId kWorkspaceId = (1ull << 32) - 1;

std::uint64_t ceil_div(std::uint64_t a, std::uint64_t b) { return (a + b - 1) / b; }
std::uint64_t kv_heads_of(const TransformerParams& p) { return p.kv_heads ? p.kv_heads : p.heads; }
constexpr std::size_t kTouchBuffersPerLaunch = tfgpu::kMaxTouchBuffers;

}  // namespace

std::uint64_t transformer_param_count(const TransformerParams& p) {
  std::uint64_t n = 0;
  if (p.style == Style::PytorchEager) {
    for (const auto& t : eager_params(p)) n += t.elems;
    return n;
  }
  for (auto x : param_elements(p)) n += x;
  return n;
}

GemmExtents gemm_extents(const GemmDesc& g) {
  // Column-major: op(A) is m x k, op(B) k x n, C m x n; a stored matrix of r rows and c columns
  // with leading dimension ld spans ld * (c - 1) + r elements.
  auto span = [](std::uint64_t rows, std::uint64_t cols, std::uint64_t ld) { return ld * (cols - 1) + rows; };
  GemmExtents e;
  std::uint64_t ea = g.trans_a ? span(g.k, g.m, g.lda) : span(g.m, g.k, g.lda);
  std::uint64_t eb = g.trans_b ? span(g.n, g.k, g.ldb) : span(g.k, g.n, g.ldb);
  std::uint64_t ec = span(g.m, g.n, g.ldc);
  e.a = g.stride_a * (g.batch - 1) + ea;
  e.b = g.stride_b * (g.batch - 1) + eb;
  e.c = g.stride_c * (g.batch - 1) + ec;
  return e;
}

// Builds one step's ops: allocations, frees and compute, with names for tests.
struct TransformerWorkload::Emit {
  TransformerWorkload& w;
  StepState& st;
  std::vector<Op>& out;
  Bytes elem;

  // korthikanti (TransformerWorkload::gives_slots): a persistent id is its slot, the workspace has
  // `persistent`, this step's n-th buffer persistent + 1 + n (TransformerWorkload::gives_slots).
  bool give_slots = false;
  std::uint64_t persistent = 0;    // persistent ids are below this
  std::uint64_t live_locals = 0;   // this step's buffers allocated and not freed yet

  void push(Op::Kind kind, BufferId id, Bytes bytes, const char* name, std::uint64_t slot = 0) {
    out.push_back({kind, id, bytes, 0, static_cast<std::uint32_t>(slot)});  // step_ops checks the bound
    st.names.push_back(name);
  }
  std::uint64_t slot_of_lasting(BufferId id) const {  // a persistent buffer or the workspace
    if (id != kWorkspaceId && id >= persistent) throw std::logic_error("transformer: an unknown persistent id");
    return id == kWorkspaceId ? persistent : id;
  }
  BufferId alloc(Bytes bytes, const char* name) {
    const std::uint64_t n = st.sizes.size();
    const BufferId id = st.base + n;  // the step's buffers are numbered in order
    st.sizes.push_back(bytes);
    push(Op::Kind::Alloc, id, bytes, name, give_slots ? persistent + 1 + n : 0);
    ++live_locals;
    return id;
  }
  void alloc_as(BufferId id, Bytes bytes, const char* name) {
    push(Op::Kind::Alloc, id, bytes, name, give_slots ? slot_of_lasting(id) : 0);
  }
  void free(BufferId id, const char* name = "free") {
    if (!id) return;
    if (id >= st.base) {
      push(Op::Kind::Free, id, 0, name, give_slots ? persistent + 1 + (id - st.base) : 0);
      --live_locals;
    } else if (!give_slots) {
      push(Op::Kind::Free, id, 0, name);
    } else if (id > kWorkspaceId) {  // an earlier step's buffer: its slot may have been taken again
      throw std::logic_error(fmt::format("transformer: {} of step {} freed in a later step", name, (id >> 32) - 1));
    } else {
      push(Op::Kind::Free, id, 0, name, slot_of_lasting(id));
    }
  }
  // A new compute op, filled in place (the descriptors are large: no copies).
  ComputeDesc& compute(ComputeDesc::Kind kind, const char* name) {
    BufferId index = st.compute.size();
    ComputeDesc& d = st.compute.emplace_back();
    d.kind = kind;
    d.name = name;
    push(Op::Kind::Compute, index, 0, name);
    return d;
  }
  void touch(const char* name, std::initializer_list<BufferId> outs, std::initializer_list<BufferId> ins) {
    touch(name, outs.begin(), outs.size(), ins.begin(), ins.size());
  }
  void touch(const char* name, const BufferId* outs, std::size_t n_out, const BufferId* ins, std::size_t n_in) {
    ComputeDesc& d = compute(ComputeDesc::Kind::Touch, name);
    d.first_id = std::uint32_t(st.ids.size());
    for (std::size_t i = 0; i < n_in; ++i)
      if (ins[i]) st.ids.push_back(ins[i]), ++d.n_in, d.bytes += double(bytes_of(ins[i]));
    for (std::size_t i = 0; i < n_out; ++i)
      if (outs[i]) st.ids.push_back(outs[i]), ++d.n_out, d.bytes += double(bytes_of(outs[i]));
  }
  // buffer_bytes, with this step's own buffers (most of those a kernel touches) and the persistent
  // ones (the optimizer's) looked up first. (id - st.base wraps for an id below the step's: one
  // test for both bounds.)
  Bytes bytes_of(BufferId id) const {
    if (id - st.base < st.sizes.size()) return st.sizes[id - st.base];
    if (id < persistent) return w.persistent_sizes_[id];
    return w.buffer_bytes(id);
  }
  // Row-major C[M x N] (+)= op(A) op(B), A stored [M x K] ([K x M] when trans_a), B [K x N]
  // ([N x K] when trans_b), `batch` matrices at the given element strides.
  void mm(const char* name, std::uint64_t M, std::uint64_t N, std::uint64_t K, BufferId A, Bytes a_off, bool ta,
          BufferId B, Bytes b_off, bool tb, BufferId C, bool accumulate = false, std::uint64_t batch = 1,
          std::uint64_t sa = 0, std::uint64_t sb = 0, std::uint64_t sc = 0) {
    // cuBLAS is column-major: C^T = op(B)^T op(A)^T, so B comes first.
    ComputeDesc& d = compute(ComputeDesc::Kind::Gemm, name);
    GemmDesc& g = d.gemm;
    g.m = N, g.n = M, g.k = K, g.batch = batch;
    g.trans_a = tb, g.a = B, g.a_offset = b_off, g.lda = tb ? K : N, g.stride_a = sb;
    g.trans_b = ta, g.b = A, g.b_offset = a_off, g.ldb = ta ? M : K, g.stride_b = sa;
    g.c = C, g.ldc = N, g.stride_c = sc;
    g.accumulate = accumulate;
    d.flops = 2.0 * double(M) * double(N) * double(K) * double(batch);
    d.bytes = double(elem) * double(batch) * (double(M * K + K * N + M * N) + (accumulate ? double(M * N) : 0.0));
  }
};

TransformerWorkload::TransformerWorkload(TransformerParams p) : p_(std::move(p)), sampler_(p_.seq_len) {
  if (!p_.layers || !p_.hidden || !p_.heads || !p_.ffn_mult || !p_.vocab || !p_.batch)
    throw std::invalid_argument("transformer: layers, hidden, heads, ffn_mult, vocab and batch must be positive");
  if (p_.hidden % p_.heads) throw std::invalid_argument("transformer: heads must divide hidden");
  if (p_.mode == TransformerMode::Inference && (!p_.generate || !p_.kv_block))
    throw std::invalid_argument("transformer: generate and kv_block must be positive");
  if (p_.style == Style::PytorchEager) {
    if (p_.mode != TransformerMode::Train || p_.recompute != Recompute::None)
      throw std::invalid_argument("transformer: style pytorch_eager models training without recomputation");
    if (p_.family == Family::Llama && (kv_heads_of(p_) > p_.heads || p_.heads % kv_heads_of(p_)))
      throw std::invalid_argument("transformer: kv_heads must divide heads");
    if ((p_.hidden / p_.heads) % 2) throw std::invalid_argument("transformer: the head size must be even");
    if (p_.family == Family::Llama && p_.attention == Attention::Explicit)
      throw std::invalid_argument("transformer: family llama runs with sdpa_flash or sdpa_mem_efficient");
    if (p_.family == Family::Llama && p_.dropout > 0)
      throw std::invalid_argument("transformer: family llama has no dropout");
    if (p_.family == Family::Bert && p_.attention != Attention::Explicit)
      throw std::invalid_argument("transformer: family bert runs with explicit attention");
    if (p_.family == Family::Bert && SeqLenSampler(p_.seq_len).max_shape_len() > (p_.max_positions ? p_.max_positions : 512))
      throw std::invalid_argument("transformer: bert's sequences are at most max_positions (512) long");
    if (p_.family == Family::Gpt && p_.max_positions && SeqLenSampler(p_.seq_len).max_shape_len() > p_.max_positions)
      throw std::invalid_argument("transformer: the longest sequence exceeds max_positions");
    // The parameters' and optimizer states' sizes, looked up for every compute op.
    const std::size_t np = eager_params(p_).size();
    persistent_sizes_.assign(1 + 8 * np, 0);
    for (BufferId id = 1; id < persistent_sizes_.size(); ++id) persistent_sizes_[id] = eager_persistent_bytes(p_, id);
    return;
  }
  param_elems_ = param_elements(p_);
  // Persistent buffers' sizes are known up front, so any step's ops can be made first.
  const Bytes e = dtype_bytes(p_.dtype);
  persistent_sizes_.assign(1 + 8 * param_elems_.size(), 0);
  for (std::uint64_t t = 0; t < param_elems_.size(); ++t) {
    const Bytes n = param_elems_[t];
    for (auto [role, bytes] : {std::pair{kWeight, e * n}, {kGrad, e * n}, {kMaster, 4 * n}, {kAdamM, 4 * n},
                               {kAdamV, 4 * n}})
      persistent_sizes_[1 + 8 * t + role] = bytes;
  }
}

TransformerWorkload::~TransformerWorkload() { finish(); }

std::string TransformerWorkload::label() const {
  if (p_.style == Style::PytorchEager) {
    std::string extra;
    if (p_.family == Family::Llama && kv_heads_of(p_) != p_.heads) extra += fmt::format(", kv {}", kv_heads_of(p_));
    if (p_.dropout > 0) extra += fmt::format(", dropout {:g}", p_.dropout);
    if (p_.optimizer != Optimizer::Foreach) extra += fmt::format(", adam {}", to_string(p_.optimizer));
    if (!p_.zero_grad_to_none) extra += ", zero_grad zero";
    return fmt::format("transformer[{} L{} h{} a{} b{} {} {}, {}{}]", p_.preset.empty() ? to_string(p_.family) : p_.preset,
                       p_.layers, p_.hidden, p_.heads, p_.batch, to_string(p_.precision), to_string(p_.attention),
                       sampler_.describe(), extra);
  }
  std::string extra;
  if (p_.ffn_mult != 4) extra += fmt::format(", ffn x{}", p_.ffn_mult);
  if (p_.recompute != Recompute::None) extra += fmt::format(", recompute {}", to_string(p_.recompute));
  if (p_.mode == TransformerMode::Train && p_.optimizer != Optimizer::Foreach)
    extra += fmt::format(", adam {}", to_string(p_.optimizer));
  if (p_.mode == TransformerMode::Inference)
    extra += fmt::format(", inference +{} tok{}", p_.generate,
                         p_.kv_block > 1 ? fmt::format(" kv_block {}", p_.kv_block) : std::string());
  return fmt::format("transformer[L{} h{} a{} b{} {}, {}{}]", p_.layers, p_.hidden, p_.heads, p_.batch,
                     to_string(p_.dtype), sampler_.describe(), extra);
}

Bytes TransformerWorkload::buffer_bytes(BufferId id) const {
  if (p_.style == Style::PytorchEager && id < (1ull << 32))
    return id < persistent_sizes_.size() ? persistent_sizes_[id] : eager_persistent_bytes(p_, id);
  if (id == kWorkspaceId) return p_.cublas_workspace;
  if (id < persistent_sizes_.size()) return persistent_sizes_[id];
  const std::uint64_t step = (id >> 32) - 1;
  const StepState& st = slots_[step & 1];
  if (id >= st.base && id - st.base < st.sizes.size()) return st.sizes[id - st.base];
  return 0;
}

void TransformerWorkload::step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo& info) {
  StepState& st = slots_[step & 1];
  st.base = (step + 1) << 32;
  st.sizes.clear();
  st.compute.clear();
  st.ids.clear();
  st.names.clear();
  st.names.reserve(out.capacity());
  Emit e{*this, st, out, dtype_bytes(p_.dtype)};
  e.give_slots = gives_slots();
  e.persistent = persistent_sizes_.size();
  const BatchShape shape = step < shapes_.size() ? shapes_[step] : sampler_.batch(step, p_.batch);
  if (p_.style == Style::PytorchEager) {
    // Compute: every tensor is written once when it is made (a memory-touch kernel); the
    // GEMMs' FLOPs are not modeled in this style.
    struct Sink final : EagerSink {
      Emit& e;
      explicit Sink(Emit& em) : e(em) {}
      BufferId alloc(Bytes bytes, const char* name) override {
        BufferId id = e.alloc(bytes, name);
        e.touch(name, {id}, {});
        return id;
      }
      void alloc_as(BufferId id, Bytes bytes, const char* name) override {
        e.alloc_as(id, bytes, name);
        e.touch(name, {id}, {});
      }
      void free(BufferId id, const char* name) override { e.free(id, name); }
    } sink(e);
    eager_train_step(p_, shape, step == 0, sink, eager_kept_grads_);
    info.real_tokens = double(shape.real_tokens);
    info.padded_tokens = double(shape.padded_tokens);
  } else if (p_.mode == TransformerMode::Train) {
    train_step(e, shape, step == 0);
    info.real_tokens = double(shape.real_tokens);
    info.padded_tokens = double(shape.padded_tokens);
  } else {
    inference_step(e, shape, step == 0);
    info.real_tokens = double(shape.real_tokens + shape.sequences * p_.generate);
    info.padded_tokens = double(shape.padded_tokens + shape.rows * p_.generate);
  }
  // The slots of this step's buffers are the next step's (slot_of): none may outlive the step.
  if (e.give_slots) {
    if (e.live_locals != 0)
      throw std::logic_error(fmt::format("transformer: {} buffers of step {} outlive it", e.live_locals, step));
    const std::uint64_t end = e.persistent + 1 + st.sizes.size();  // above every slot of the step
    if (end >= UINT32_MAX) throw std::length_error("transformer: more than 2^32 - 2 buffer slots");
    slots_end_ = std::max(slots_end_, static_cast<std::uint32_t>(end));
  }
  last_ = &st;
}

namespace {

// The activations of one layer (0: not held).
struct LayerActs {
  BufferId x = 0;  // the layer's input: the first layer norm's input, saved
  BufferId ln1 = 0, q = 0, k = 0, v = 0, sm = 0, amask = 0, adrop = 0, ctx = 0, pmask = 0, xmid = 0, ln2 = 0,
           fc1 = 0, gelu = 0, mmask = 0, out = 0;
};

}  // namespace

void TransformerWorkload::train_step(Emit& e, const BatchShape& sh, bool first) {
  const std::uint64_t s = sh.seq_len, b = sh.rows, T = s * b, h = p_.hidden, a = p_.heads, d = h / a,
                      f = p_.ffn_mult, V = p_.vocab, L = p_.layers;
  const Bytes E = e.elem;
  const bool mixed = E == 2;  // 16-bit weights: fp32 master weights for the optimizer
  auto pid = [&](std::uint64_t tensor, Role role) { return BufferId(1 + 8 * tensor + role); };
  auto lp = [&](std::uint64_t l, LayerParam k) { return 1 + l * kLayerParams + k; };
  auto gp = [&](GlobalParam g) { return g == kEmb ? std::uint64_t(0) : 1 + L * kLayerParams + (g - 1); };
  auto W = [&](std::uint64_t tensor) { return pid(tensor, kWeight); };
  auto G = [&](std::uint64_t tensor) { return pid(tensor, kGrad); };
  auto grads_for = [&](std::initializer_list<std::uint64_t> tensors) {
    if (!first) return;
    for (auto t : tensors) e.alloc_as(G(t), E * param_elems_[t], "grad");
  };

  if (first) {
    if (p_.cublas_workspace) e.alloc_as(kWorkspaceId, p_.cublas_workspace, "cublas_workspace");
    for (std::uint64_t t = 0; t < param_elems_.size(); ++t) {
      e.alloc_as(W(t), E * param_elems_[t], "weight");
      e.touch("init_weight", {W(t)}, {});
      if (mixed) e.alloc_as(pid(t, kMaster), 4 * param_elems_[t], "master_weight");
    }
  }
  const Bytes sbh = E * T * h, mask = T * h, attn = E * a * s * s * b, attn_mask = a * s * s * b;
  const Bytes qkv_w = E * h * h;  // byte offset of K's and V's weights inside the QKV weight

  BufferId ids = e.alloc(8 * T, "input_ids");
  BufferId labels = e.alloc(8 * T, "labels");
  e.touch("load_batch", {ids, labels}, {});
  BufferId x = e.alloc(sbh, "embedding_out");
  BufferId emb_mask = e.alloc(mask, "embedding_dropout_mask");
  e.touch("embedding", {x, emb_mask}, {ids});

  // Softmax, attention dropout: the part selective recomputation drops.
  auto attention_core = [&](LayerActs& t) {
    BufferId scores = e.alloc(attn, "attention_scores");
    e.mm("qk^T", s, s, d, t.q, 0, false, t.k, 0, true, scores, false, b * a, s * d, s * d, s * s);
    t.sm = e.alloc(attn, "softmax_out");
    e.touch("softmax", {t.sm}, {scores});
    e.free(scores, "attention_scores");
    t.amask = e.alloc(attn_mask, "attention_dropout_mask");
    t.adrop = e.alloc(attn, "attention_dropout_out");
    e.touch("attention_dropout", {t.amask, t.adrop}, {t.sm});
  };
  // One layer forward. keep: hold what backward needs; otherwise free at last use (the
  // forward of a fully recomputed layer, which runs without saving).
  auto forward = [&](std::uint64_t l, BufferId xin, bool keep, bool keep_core) {
    LayerActs t;
    t.x = xin;
    auto done = [&](BufferId& id, bool hold, const char* name) {
      if (!hold) {
        e.free(id, name);
        id = 0;
      }
    };
    t.ln1 = e.alloc(sbh, "ln1_out");
    e.touch("layer_norm_1", {t.ln1}, {xin});
    t.q = e.alloc(sbh, "q");
    e.mm("q_proj", T, h, h, t.ln1, 0, false, W(lp(l, kQkvW)), 0, false, t.q);
    t.k = e.alloc(sbh, "k");
    e.mm("k_proj", T, h, h, t.ln1, 0, false, W(lp(l, kQkvW)), qkv_w, false, t.k);
    t.v = e.alloc(sbh, "v");
    e.mm("v_proj", T, h, h, t.ln1, 0, false, W(lp(l, kQkvW)), 2 * qkv_w, false, t.v);
    done(t.ln1, keep, "ln1_out");
    attention_core(t);
    done(t.q, keep, "q");
    done(t.k, keep, "k");
    done(t.sm, keep && keep_core, "softmax_out");
    done(t.amask, keep && keep_core, "attention_dropout_mask");
    t.ctx = e.alloc(sbh, "attention_context");
    e.mm("attention_v", s, d, s, t.adrop, 0, false, t.v, 0, false, t.ctx, false, b * a, s * s, s * d, s * d);
    done(t.adrop, keep && keep_core, "attention_dropout_out");
    done(t.v, keep, "v");
    BufferId proj = e.alloc(sbh, "attention_proj_out");
    e.mm("out_proj", T, h, h, t.ctx, 0, false, W(lp(l, kProjW)), 0, false, proj);
    done(t.ctx, keep, "attention_context");
    t.pmask = e.alloc(mask, "attention_out_dropout_mask");
    t.xmid = e.alloc(sbh, "residual_1");
    e.touch("dropout_residual_1", {t.pmask, t.xmid}, {xin, proj});
    e.free(proj, "attention_proj_out");
    done(t.pmask, keep, "attention_out_dropout_mask");
    t.ln2 = e.alloc(sbh, "ln2_out");
    e.touch("layer_norm_2", {t.ln2}, {t.xmid});
    t.fc1 = e.alloc(f * sbh, "fc1_out");
    e.mm("fc1", T, f * h, h, t.ln2, 0, false, W(lp(l, kFc1W)), 0, false, t.fc1);
    done(t.ln2, keep, "ln2_out");
    t.gelu = e.alloc(f * sbh, "gelu_out");
    e.touch("gelu", {t.gelu}, {t.fc1});
    done(t.fc1, keep, "fc1_out");
    BufferId fc2 = e.alloc(sbh, "fc2_out");
    e.mm("fc2", T, h, f * h, t.gelu, 0, false, W(lp(l, kFc2W)), 0, false, fc2);
    done(t.gelu, keep, "gelu_out");
    t.mmask = e.alloc(mask, "mlp_dropout_mask");
    t.out = e.alloc(sbh, "layer_out");
    e.touch("dropout_residual_2", {t.mmask, t.out}, {t.xmid, fc2});
    e.free(fc2, "fc2_out");
    done(t.mmask, keep, "mlp_dropout_mask");
    done(t.xmid, keep, "residual_1");
    return t;
  };

  // ---- forward
  std::vector<LayerActs> acts(L);
  const bool full = p_.recompute == Recompute::Full;
  const bool keep_core = p_.recompute == Recompute::None;
  for (std::uint64_t l = 0; l < L; ++l) {
    acts[l] = forward(l, x, !full, keep_core);
    x = acts[l].out;
  }
  BufferId xL = x;  // the final layer norm's input
  BufferId lnf = e.alloc(sbh, "final_ln_out");
  e.touch("final_layer_norm", {lnf}, {xL});
  BufferId logits = e.alloc(E * T * V, "logits");
  e.mm("lm_head", T, V, h, lnf, 0, false, W(gp(kEmb)), 0, true, logits);
  // Cross entropy in fp32: the upcast is transient, log-softmax is saved for backward.
  BufferId logits32 = 0;
  if (E != 4) {
    logits32 = e.alloc(4 * T * V, "logits_fp32");
    e.touch("upcast_logits", {logits32}, {logits});
    e.free(logits, "logits");
    logits = 0;
  }
  BufferId logprobs = e.alloc(4 * T * V, "log_softmax");
  e.touch("log_softmax", {logprobs}, {logits32 ? logits32 : logits});
  e.free(logits32 ? logits32 : logits, "logits");
  BufferId loss = e.alloc(4, "loss");
  e.touch("nll_loss", {loss}, {logprobs, labels});

  // ---- backward
  BufferId dlog32 = e.alloc(4 * T * V, "grad_logits_fp32");
  e.touch("cross_entropy_backward", {dlog32}, {logprobs, labels});
  e.free(logprobs, "log_softmax");
  e.free(loss, "loss");
  BufferId dlogits = dlog32;
  if (E != 4) {
    dlogits = e.alloc(E * T * V, "grad_logits");
    e.touch("downcast_grad", {dlogits}, {dlog32});
    e.free(dlog32, "grad_logits_fp32");
  }
  grads_for({gp(kEmb)});
  e.mm("lm_head_dW", V, h, T, dlogits, 0, true, lnf, 0, false, G(gp(kEmb)), true);
  BufferId dlnf = e.alloc(sbh, "grad_final_ln_out");
  e.mm("lm_head_dX", T, h, V, dlogits, 0, false, W(gp(kEmb)), 0, false, dlnf);
  e.free(dlogits, "grad_logits");
  e.free(lnf, "final_ln_out");
  grads_for({gp(kLnfG), gp(kLnfB)});
  BufferId dx = e.alloc(sbh, "grad_layer_out");
  e.touch("final_layer_norm_backward", {dx}, {dlnf, xL});
  e.free(dlnf, "grad_final_ln_out");
  e.free(xL, "layer_out");

  for (std::uint64_t l = L; l-- > 0;) {
    LayerActs t = acts[l];
    if (full) {
      // Recompute the whole layer from its saved input; its output is not needed again.
      t = forward(l, t.x, true, true);
      e.free(t.out, "layer_out (recomputed)");
    }
    // MLP
    BufferId dfc2 = e.alloc(sbh, "grad_fc2_out");
    e.touch("dropout_backward", {dfc2}, {dx, t.mmask});
    e.free(t.mmask, "mlp_dropout_mask");
    grads_for({lp(l, kFc2W), lp(l, kFc2B)});
    e.mm("fc2_dW", f * h, h, T, t.gelu, 0, true, dfc2, 0, false, G(lp(l, kFc2W)), true);
    BufferId dgelu = e.alloc(f * sbh, "grad_gelu_out");
    e.mm("fc2_dX", T, f * h, h, dfc2, 0, false, W(lp(l, kFc2W)), 0, true, dgelu);
    e.free(dfc2, "grad_fc2_out");
    e.free(t.gelu, "gelu_out");
    BufferId dfc1 = e.alloc(f * sbh, "grad_fc1_out");
    e.touch("gelu_backward", {dfc1}, {dgelu, t.fc1});
    e.free(dgelu, "grad_gelu_out");
    e.free(t.fc1, "fc1_out");
    grads_for({lp(l, kFc1W), lp(l, kFc1B)});
    e.mm("fc1_dW", h, f * h, T, t.ln2, 0, true, dfc1, 0, false, G(lp(l, kFc1W)), true);
    BufferId dln2 = e.alloc(sbh, "grad_ln2_out");
    e.mm("fc1_dX", T, h, f * h, dfc1, 0, false, W(lp(l, kFc1W)), 0, true, dln2);
    e.free(dfc1, "grad_fc1_out");
    e.free(t.ln2, "ln2_out");
    grads_for({lp(l, kLn2G), lp(l, kLn2B)});
    BufferId dxmid = e.alloc(sbh, "grad_residual_1");
    e.touch("layer_norm_2_backward", {dxmid}, {dln2, t.xmid, dx});
    e.free(dln2, "grad_ln2_out");
    e.free(t.xmid, "residual_1");
    e.free(dx, "grad_layer_out");
    // Attention
    BufferId dproj = e.alloc(sbh, "grad_attention_proj_out");
    e.touch("dropout_backward", {dproj}, {dxmid, t.pmask});
    e.free(t.pmask, "attention_out_dropout_mask");
    grads_for({lp(l, kProjW), lp(l, kProjB)});
    e.mm("out_proj_dW", h, h, T, t.ctx, 0, true, dproj, 0, false, G(lp(l, kProjW)), true);
    BufferId dctx = e.alloc(sbh, "grad_attention_context");
    e.mm("out_proj_dX", T, h, h, dproj, 0, false, W(lp(l, kProjW)), 0, true, dctx);
    e.free(dproj, "grad_attention_proj_out");
    e.free(t.ctx, "attention_context");
    if (!t.sm) attention_core(t);  // selective: recompute softmax and dropout
    BufferId dadrop = e.alloc(attn, "grad_attention_dropout_out");
    e.mm("attention_v_dP", s, s, d, dctx, 0, false, t.v, 0, true, dadrop, false, b * a, s * d, s * d, s * s);
    BufferId dv = e.alloc(sbh, "grad_v");
    e.mm("attention_v_dV", s, d, s, t.adrop, 0, true, dctx, 0, false, dv, false, b * a, s * s, s * d, s * d);
    e.free(dctx, "grad_attention_context");
    e.free(t.adrop, "attention_dropout_out");
    BufferId dsm = e.alloc(attn, "grad_softmax_out");
    e.touch("attention_dropout_backward", {dsm}, {dadrop, t.amask});
    e.free(dadrop, "grad_attention_dropout_out");
    e.free(t.amask, "attention_dropout_mask");
    BufferId dscores = e.alloc(attn, "grad_attention_scores");
    e.touch("softmax_backward", {dscores}, {dsm, t.sm});
    e.free(dsm, "grad_softmax_out");
    e.free(t.sm, "softmax_out");
    BufferId dq = e.alloc(sbh, "grad_q");
    e.mm("qk_dQ", s, d, s, dscores, 0, false, t.k, 0, false, dq, false, b * a, s * s, s * d, s * d);
    BufferId dk = e.alloc(sbh, "grad_k");
    e.mm("qk_dK", s, d, s, dscores, 0, true, t.q, 0, false, dk, false, b * a, s * s, s * d, s * d);
    e.free(dscores, "grad_attention_scores");
    e.free(t.q, "q");
    e.free(t.k, "k");
    grads_for({lp(l, kQkvW), lp(l, kQkvB)});
    const BufferId gq = G(lp(l, kQkvW));
    e.mm("q_proj_dW", h, h, T, t.ln1, 0, true, dq, 0, false, gq, true);
    e.mm("k_proj_dW", h, h, T, t.ln1, 0, true, dk, 0, false, gq, true);
    e.mm("v_proj_dW", h, h, T, t.ln1, 0, true, dv, 0, false, gq, true);
    BufferId dln1 = e.alloc(sbh, "grad_ln1_out");
    e.mm("q_proj_dX", T, h, h, dq, 0, false, W(lp(l, kQkvW)), 0, true, dln1);
    e.mm("k_proj_dX", T, h, h, dk, 0, false, W(lp(l, kQkvW)), qkv_w, true, dln1, true);
    e.mm("v_proj_dX", T, h, h, dv, 0, false, W(lp(l, kQkvW)), 2 * qkv_w, true, dln1, true);
    e.free(dq, "grad_q");
    e.free(dk, "grad_k");
    e.free(dv, "grad_v");
    e.free(t.ln1, "ln1_out");
    e.free(t.v, "v");
    grads_for({lp(l, kLn1G), lp(l, kLn1B)});
    BufferId dxin = e.alloc(sbh, "grad_layer_in");
    e.touch("layer_norm_1_backward", {dxin}, {dln1, t.x, dxmid});
    e.free(dln1, "grad_ln1_out");
    e.free(dxmid, "grad_residual_1");
    e.free(t.x, l ? "layer_out" : "embedding_out");
    dx = dxin;
  }
  e.touch("embedding_backward", {G(gp(kEmb))}, {dx, ids});
  e.free(dx, "grad_layer_in");
  e.free(emb_mask, "embedding_dropout_mask");
  e.free(ids, "input_ids");
  e.free(labels, "labels");

  // ---- optimizer: Adam. The states are created at the first step, as PyTorch does lazily.
  const std::size_t np = param_elems_.size();
  if (first)
    for (std::size_t t = 0; t < np; ++t) {
      e.alloc_as(pid(t, kAdamM), 4 * param_elems_[t], "adam_exp_avg");
      e.alloc_as(pid(t, kAdamV), 4 * param_elems_[t], "adam_exp_avg_sq");
    }
  // One tensor's update reads its gradient and writes its states, master copy and weights.
  auto update = [&](std::size_t t, BufferId tmp, BufferId* outs, std::size_t& n_out, BufferId* ins, std::size_t& n_in) {
    for (BufferId id : {pid(t, kAdamM), pid(t, kAdamV), tmp, mixed ? pid(t, kMaster) : 0, W(t)})
      if (id) outs[n_out++] = id;
    ins[n_in++] = G(t);
  };
  if (p_.optimizer == Optimizer::SingleTensor) {
    for (std::size_t t = 0; t < np; ++t) {
      BufferId tmp = e.alloc(4 * param_elems_[t], "adam_denom");
      BufferId outs[8], ins[2];
      std::size_t no = 0, ni = 0;
      update(t, tmp, outs, no, ins, ni);
      e.touch("adam", outs, no, ins, ni);
      e.free(tmp, "adam_denom");
    }
  } else {
    // foreach: every temporary of the list is alive at once; fused: none. Multi-tensor kernels
    // take as many tensors as one launch's buffer list holds.
    const bool foreach = p_.optimizer == Optimizer::Foreach;
    std::vector<BufferId> tmps(np, 0);
    if (foreach)
      for (std::size_t t = 0; t < np; ++t) tmps[t] = e.alloc(4 * param_elems_[t], "adam_denom");
    const std::size_t per_launch = kTouchBuffersPerLaunch / (foreach ? 6 : 5);
    for (std::size_t t0 = 0; t0 < np; t0 += per_launch) {
      BufferId outs[kTouchBuffersPerLaunch], ins[kTouchBuffersPerLaunch];
      std::size_t no = 0, ni = 0;
      for (std::size_t t = t0; t < std::min(np, t0 + per_launch); ++t) update(t, tmps[t], outs, no, ins, ni);
      e.touch(foreach ? "adam_foreach" : "adam_fused", outs, no, ins, ni);
    }
    if (foreach)
      for (std::size_t t = 0; t < np; ++t) e.free(tmps[t], "adam_denom");
  }
}

void TransformerWorkload::inference_step(Emit& e, const BatchShape& sh, bool first) {
  const std::uint64_t s = sh.seq_len, b = sh.rows, h = p_.hidden, a = p_.heads, d = h / a, f = p_.ffn_mult,
                      V = p_.vocab, L = p_.layers;
  const Bytes E = e.elem;
  auto W = [&](std::uint64_t tensor) { return BufferId(1 + 8 * tensor + kWeight); };
  auto lp = [&](std::uint64_t l, LayerParam k) { return 1 + l * kLayerParams + k; };
  if (first) {
    if (p_.cublas_workspace) e.alloc_as(kWorkspaceId, p_.cublas_workspace, "cublas_workspace");
    for (std::uint64_t t = 0; t < param_elems_.size(); ++t) {
      e.alloc_as(W(t), E * param_elems_[t], "weight");
      e.touch("init_weight", {W(t)}, {});
    }
  }
  const Bytes qkv_w = E * h * h;
  std::vector<BufferId> kc(L), vc(L);
  std::uint64_t cap = ceil_div(s, p_.kv_block) * p_.kv_block;  // cache capacity in tokens

  // One pass through the layers for `T` new tokens per row (prefill: s; decode: 1), with
  // `ctx_len` tokens in the cache after this pass. Nothing is saved: no gradients.
  auto layer = [&](std::uint64_t l, BufferId x, std::uint64_t n, std::uint64_t ctx_len, bool prefill) {
    const std::uint64_t T = n * b;
    const Bytes tok = E * T * h;
    BufferId ln1 = e.alloc(tok, "ln1_out");
    e.touch("layer_norm_1", {ln1}, {x});
    BufferId q = e.alloc(tok, "q"), k = e.alloc(tok, "k"), v = e.alloc(tok, "v");
    e.mm("q_proj", T, h, h, ln1, 0, false, W(lp(l, kQkvW)), 0, false, q);
    e.mm("k_proj", T, h, h, ln1, 0, false, W(lp(l, kQkvW)), qkv_w, false, k);
    e.mm("v_proj", T, h, h, ln1, 0, false, W(lp(l, kQkvW)), 2 * qkv_w, false, v);
    e.free(ln1, "ln1_out");
    if (prefill) {
      kc[l] = e.alloc(E * b * cap * h, "k_cache");
      vc[l] = e.alloc(E * b * cap * h, "v_cache");
      e.touch("kv_cache_write", {kc[l], vc[l]}, {k, v});
    } else {
      if (ctx_len > cap) throw std::logic_error("kv cache overflow");
      e.touch("kv_cache_append", {}, {k, v});
    }
    e.free(k, "k");
    e.free(v, "v");
    // Per row and head: scores [n x ctx_len] against the cache blocks [cap x d].
    BufferId scores = e.alloc(E * b * a * n * ctx_len, "attention_scores");
    e.mm("qk^T", n, ctx_len, d, q, 0, false, kc[l], 0, true, scores, false, b * a, n * d, cap * d, n * ctx_len);
    e.free(q, "q");
    BufferId sm = e.alloc(E * b * a * n * ctx_len, "softmax_out");
    e.touch("softmax", {sm}, {scores});
    e.free(scores, "attention_scores");
    BufferId ctx = e.alloc(tok, "attention_context");
    e.mm("attention_v", n, d, ctx_len, sm, 0, false, vc[l], 0, false, ctx, false, b * a, n * ctx_len, cap * d, n * d);
    e.free(sm, "softmax_out");
    BufferId proj = e.alloc(tok, "attention_proj_out");
    e.mm("out_proj", T, h, h, ctx, 0, false, W(lp(l, kProjW)), 0, false, proj);
    e.free(ctx, "attention_context");
    BufferId xmid = e.alloc(tok, "residual_1");
    e.touch("residual_1", {xmid}, {x, proj});
    e.free(proj, "attention_proj_out");
    BufferId ln2 = e.alloc(tok, "ln2_out");
    e.touch("layer_norm_2", {ln2}, {xmid});
    BufferId fc1 = e.alloc(f * tok, "fc1_out");
    e.mm("fc1", T, f * h, h, ln2, 0, false, W(lp(l, kFc1W)), 0, false, fc1);
    e.free(ln2, "ln2_out");
    BufferId gelu = e.alloc(f * tok, "gelu_out");
    e.touch("gelu", {gelu}, {fc1});
    e.free(fc1, "fc1_out");
    BufferId fc2 = e.alloc(tok, "fc2_out");
    e.mm("fc2", T, h, f * h, gelu, 0, false, W(lp(l, kFc2W)), 0, false, fc2);
    e.free(gelu, "gelu_out");
    BufferId out = e.alloc(tok, "layer_out");
    e.touch("residual_2", {out}, {xmid, fc2});
    e.free(fc2, "fc2_out");
    e.free(xmid, "residual_1");
    e.free(x, "layer_in");
    return out;
  };
  // The next token of each row from the last position's hidden state.
  auto head = [&](BufferId x) {
    BufferId lnf = e.alloc(E * b * h, "final_ln_out");
    e.touch("final_layer_norm", {lnf}, {x});
    e.free(x, "layer_out");
    BufferId logits = e.alloc(E * b * V, "logits");
    e.mm("lm_head", b, V, h, lnf, 0, false, W(0), 0, true, logits);
    e.free(lnf, "final_ln_out");
    BufferId next = e.alloc(8 * b, "next_tokens");
    e.touch("sample", {next}, {logits});
    e.free(logits, "logits");
    return next;
  };

  BufferId ids = e.alloc(8 * b * s, "input_ids");
  e.touch("load_batch", {ids}, {});
  BufferId x = e.alloc(E * b * s * h, "embedding_out");
  e.touch("embedding", {x}, {ids});
  e.free(ids, "input_ids");
  for (std::uint64_t l = 0; l < L; ++l) x = layer(l, x, s, s, true);
  // Only the last position feeds the head: slice it off (a copy), as generate() does.
  BufferId last = e.alloc(E * b * h, "last_hidden");
  e.touch("slice_last", {last}, {x});
  e.free(x, "layer_out");
  BufferId tokens = head(last);
  std::uint64_t len = s;
  for (std::uint64_t g = 1; g < p_.generate; ++g) {
    BufferId xt = e.alloc(E * b * h, "embedding_out");
    e.touch("embedding", {xt}, {tokens});
    e.free(tokens, "next_tokens");
    ++len;
    if (len > cap) {
      // Grow every layer's cache: allocate the larger one, copy, free the old (torch.cat).
      std::uint64_t grown = cap + p_.kv_block;
      for (std::uint64_t l = 0; l < L; ++l) {
        for (BufferId* c : {&kc[l], &vc[l]}) {
          BufferId bigger = e.alloc(E * b * grown * h, c == &kc[l] ? "k_cache" : "v_cache");
          e.touch("kv_cache_copy", {bigger}, {*c});
          e.free(*c, c == &kc[l] ? "k_cache" : "v_cache");
          *c = bigger;
        }
      }
      cap = grown;
    }
    for (std::uint64_t l = 0; l < L; ++l) xt = layer(l, xt, 1, len, false);
    tokens = head(xt);
  }
  e.free(tokens, "next_tokens");
  for (std::uint64_t l = L; l-- > 0;) {
    e.free(vc[l], "v_cache");
    e.free(kc[l], "k_cache");
  }
}

namespace {
// How cuBLAS can run a GEMM, by the alignment of its operands (ModelRates).
enum class GemmAlignment { Aligned, EvenBatched, OddBatched, Single };
GemmAlignment gemm_alignment(const GemmDesc& g, Bytes elem) {
  const std::uint64_t vec = 16 / elem;  // elements in 16 bytes
  std::uint64_t all = g.lda | g.ldb | g.ldc;
  if (g.batch > 1) all |= g.stride_a | g.stride_b | g.stride_c;
  const bool offsets_aligned = (g.a_offset | g.b_offset | g.c_offset) % 16 == 0;
  if (all % vec == 0 && offsets_aligned) return GemmAlignment::Aligned;
  if (g.batch <= 1) return GemmAlignment::Single;
  return all % 2 == 0 ? GemmAlignment::EvenBatched : GemmAlignment::OddBatched;
}
}  // namespace

ModeledKernel TransformerWorkload::modeled_seconds(const ComputeDesc& c) const {
  const ModelRates& r = rates_;
  ModeledKernel k;
  if (c.kind == ComputeDesc::Kind::Touch) {
    k.gpu_seconds = c.bytes / r.bytes_per_s + r.touch_fixed_s;
    k.launch_seconds = r.kernel_launch_s;
    return k;
  }
  k.launch_seconds = r.gemm_launch_s;
  const GemmDesc& g = c.gemm;
  const Bytes elem = dtype_bytes(p_.dtype);
  if (p_.dtype == DType::FP32) {  // not measured: the FP32 rate, or the memory traffic
    k.gpu_seconds = std::max(c.flops / r.flops_fp32, c.bytes / r.bytes_per_s) + r.gemm_fixed_s;
    return k;
  }
  switch (gemm_alignment(g, elem)) {
    case GemmAlignment::Aligned: {
      const double written = double(elem) * double(g.m) * double(g.n) * double(g.batch);
      const double read = std::max(0.0, c.bytes - written);
      k.gpu_seconds = c.flops / r.gemm_flops + written / r.gemm_write_bytes_per_s + read / r.gemm_read_bytes_per_s +
                      r.gemm_fixed_s;
      break;
    }
    case GemmAlignment::EvenBatched:
      k.gpu_seconds = c.flops / r.gemm_unaligned_even_flops + r.gemm_unaligned_even_fixed_s;
      break;
    case GemmAlignment::OddBatched:
      k.gpu_seconds = c.flops / r.gemm_unaligned_odd_flops + r.gemm_unaligned_odd_fixed_s;
      break;
    case GemmAlignment::Single:
      k.gpu_seconds = c.flops / r.gemm_unaligned_single_flops + r.gemm_unaligned_single_fixed_s;
      break;
  }
  return k;
}

void TransformerWorkload::prepare(ComputeContext& ctx) {
  if (ctx.real_gpu && !gpu_) gpu_ = tfgpu::create(ctx.stream);
  // Draw the batches' lengths now, before the timed steps, as a data loader does ahead of
  // the training loop (a draw reseeds the generator: about 19 us, most of a step's event
  // generation). Past kPrecomputedSteps they are drawn step by step (on the runner's worker
  // thread, which makes steps ahead).
  if (shapes_.empty()) {
    shapes_.reserve(std::min<std::uint64_t>(p_.steps, kPrecomputedSteps));
    for (std::uint64_t step = 0; step < p_.steps && step < kPrecomputedSteps; ++step)
      shapes_.push_back(sampler_.batch(step, p_.batch));
  }
}

void TransformerWorkload::finish() {
  if (gpu_) tfgpu::destroy(gpu_);
  gpu_ = nullptr;
}

ModeledKernel TransformerWorkload::compute(const Op& op, ComputeContext& ctx) {
  const StepState& st = slots_[ctx.step & 1];
  if (st.base != (ctx.step + 1) << 32 || op.id >= st.compute.size())
    throw std::logic_error(fmt::format("transformer: no compute op {} in step {}", op.id, ctx.step));
  const ComputeDesc& c = st.compute[op.id];
  if (!ctx.real_gpu || !gpu_) return modeled_seconds(c);
  // A buffer whose allocation failed (an OOM the run goes on after) skips the work.
  if (c.kind == ComputeDesc::Kind::Gemm) {
    const GemmDesc& g = c.gemm;
    auto pa = ctx.buffer(g.a), pb = ctx.buffer(g.b), pc = ctx.buffer(g.c);
    if (!pa || !pb || !pc) return {};
    const Bytes E = dtype_bytes(p_.dtype);
    GemmExtents ext = gemm_extents(g);
    // Never touch memory outside the buffers: a shape that does not fit is a bug, not work.
    if (g.a_offset + ext.a * E > buffer_bytes(g.a) || g.b_offset + ext.b * E > buffer_bytes(g.b) ||
        g.c_offset + ext.c * E > buffer_bytes(g.c))
      throw std::logic_error(fmt::format("transformer: GEMM {} does not fit its buffers", c.name));
    if (auto ws = ctx.buffer(kWorkspaceId))
      tfgpu::set_workspace(gpu_, reinterpret_cast<void*>(*ws), p_.cublas_workspace);
    else
      tfgpu::set_workspace(gpu_, nullptr, 0);
    tfgpu::GemmCall call;
    call.trans_a = g.trans_a, call.trans_b = g.trans_b;
    call.m = g.m, call.n = g.n, call.k = g.k, call.batch = g.batch;
    call.a = reinterpret_cast<const void*>(*pa + g.a_offset);
    call.b = reinterpret_cast<const void*>(*pb + g.b_offset);
    call.c = reinterpret_cast<void*>(*pc + g.c_offset);
    call.lda = g.lda, call.ldb = g.ldb, call.ldc = g.ldc;
    call.stride_a = g.stride_a, call.stride_b = g.stride_b, call.stride_c = g.stride_c;
    call.accumulate = g.accumulate;
    tfgpu::Elem el = p_.dtype == DType::BF16 ? tfgpu::Elem::BF16
                     : p_.dtype == DType::FP16 ? tfgpu::Elem::FP16
                                               : tfgpu::Elem::FP32;
    tfgpu::gemm(gpu_, el, call);
    return {};
  }
  tfgpu::TouchBuffer bufs[tfgpu::kMaxTouchBuffers];
  int n = 0;
  for (int pass = 0; pass < 2; ++pass)
    for (BufferId id : ids_of(st, c, pass == 1)) {
      auto p = ctx.buffer(id);
      if (!p || n == tfgpu::kMaxTouchBuffers) continue;
      bufs[n++] = {reinterpret_cast<void*>(*p), buffer_bytes(id), pass == 1};
    }
  tfgpu::touch(gpu_, bufs, n);
  return {};
}

std::unique_ptr<Workload> make_transformer(const TransformerParams& params) {
  return std::make_unique<TransformerWorkload>(params);
}

}  // namespace gmb
