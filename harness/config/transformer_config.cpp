// YAML -> the transformer workload's parameters (workloads/transformer.h), strictly checked.
#include <algorithm>
#include <climits>
#include <cmath>

#include <fmt/format.h>

#include "harness/config/config.h"
#include "workloads/transformer.h"

namespace gmb {

namespace {

// The longest sequence length (and any length-like count) a config may ask for: 16 M tokens,
// far past any model, so products of lengths and batch sizes stay far from 64-bit overflow.
constexpr std::uint64_t kMaxTokens = std::uint64_t{1} << 24;

const std::vector<std::string> kSeqCommonKeys = {"dist", "seed", "pad_to_multiple", "buckets", "pad_to_max",
                                                 "pack", "pack_length"};

std::vector<std::string> seq_keys_for(SeqDist d) {
  std::vector<std::string> k;
  switch (d) {
    case SeqDist::Fixed: k = {"value"}; break;
    case SeqDist::Uniform: k = {"min", "max"}; break;
    case SeqDist::Normal: k = {"mean", "std", "min", "max"}; break;
    case SeqDist::LogNormal: k = {"mu", "median", "sigma", "min", "max"}; break;
    case SeqDist::Zipf: k = {"exponent", "min", "max"}; break;
    case SeqDist::Histogram: k = {"file"}; break;
    case SeqDist::Sequence: k = {"values"}; break;
  }
  k.insert(k.end(), kSeqCommonKeys.begin(), kSeqCommonKeys.end());
  return k;
}

SeqLenSpec parse_seq_len(const YamlReader& y, const YAML::Node& n, const std::string& key,
                         const std::string& config_dir, std::uint64_t default_seed) {
  SeqLenSpec s;
  s.seed = default_seed;
  if (n.IsScalar()) {  // `seq_len: 1024`: a fixed length
    s.dist = SeqDist::Fixed;
    s.value = y.count(n, key, 1, kMaxTokens);
    return s;
  }
  if (!n.IsMap())
    y.fail(n, key, fmt::format("expected a length or a map with dist ({})", join(seq_dist_names())));
  if (!n["dist"]) y.fail(n, key + ".dist", fmt::format("missing (valid: {})", join(seq_dist_names())));
  std::string dist = y.choice(n["dist"], key + ".dist", seq_dist_names());
  for (SeqDist d : {SeqDist::Fixed, SeqDist::Uniform, SeqDist::Normal, SeqDist::LogNormal, SeqDist::Zipf,
                    SeqDist::Histogram, SeqDist::Sequence})
    if (dist == to_string(d)) s.dist = d;
  // Keys that do not belong to this distribution are errors that say which ones do.
  {
    auto valid = seq_keys_for(s.dist);
    for (auto it = n.begin(); it != n.end(); ++it) {
      std::string name = it->first.Scalar();
      if (std::find(valid.begin(), valid.end(), name) == valid.end())
        y.fail(it->first, key + "." + name,
               fmt::format("unknown key '{}' for dist {} (valid: {})", name, dist, join(valid)));
    }
  }
  auto cnt = [&](const char* k, std::uint64_t min) { return y.count(n[k], key + "." + k, min, kMaxTokens); };
  auto num = [&](const char* k, double lo, double hi) { return y.number(n[k], key + "." + k, lo, hi); };
  auto need = [&](const char* k) {
    if (!n[k]) y.fail(n, key + "." + k, fmt::format("missing: dist {} needs {}", dist, k));
  };
  switch (s.dist) {
    case SeqDist::Fixed:
      need("value");
      s.value = cnt("value", 1);
      break;
    case SeqDist::Normal:
      need("mean");
      need("std");
      s.mean = num("mean", 1, 1e9);
      s.stddev = num("std", 1e-9, 1e9);
      break;
    case SeqDist::LogNormal:
      if (n["mu"] && n["median"]) y.fail(n["median"], key + ".median", "give mu or median, not both");
      if (!n["mu"] && !n["median"]) y.fail(n, key + ".median", "missing: dist lognormal needs median (or mu)");
      need("sigma");
      s.mu = n["mu"] ? num("mu", -50, 50) : std::log(num("median", 1, 1e9));
      s.sigma = num("sigma", 1e-9, 10);
      break;
    case SeqDist::Zipf:
      if (n["exponent"]) s.exponent = num("exponent", 1e-6, 100);
      break;
    case SeqDist::Histogram: {
      need("file");
      std::string path = y.string(n["file"], key + ".file");
      path = beside_config(path, config_dir);
      try {
        s.histogram = read_histogram(path);
      } catch (const SeqLenError& e) {
        y.fail(n["file"], key + ".file", e.what());
      }
      s.histogram_path = path;
      break;
    }
    case SeqDist::Sequence: {
      need("values");
      const YAML::Node v = n["values"];
      if (!v.IsSequence() || v.size() == 0) y.fail(v, key + ".values", "expected a non-empty list of lengths");
      if (v.size() > kMaxSequenceValues)
        y.fail(v, key + ".values", fmt::format("at most {} lengths", kMaxSequenceValues));
      s.values.reserve(v.size());
      for (std::size_t i = 0; i < v.size(); ++i)
        s.values.push_back(y.count(v[i], fmt::format("{}.values[{}]", key, i), 1, kMaxTokens));
      break;
    }
    case SeqDist::Uniform: break;
  }
  if (s.dist == SeqDist::Uniform || s.dist == SeqDist::Normal || s.dist == SeqDist::LogNormal ||
      s.dist == SeqDist::Zipf) {
    need("max");
    s.max = cnt("max", 1);
    if (n["min"]) s.min = cnt("min", 1);
    if (s.min > s.max) y.fail(n["min"], key + ".min", fmt::format("min ({}) is greater than max ({})", s.min, s.max));
  }
  if (n["seed"]) s.seed = y.count(n["seed"], key + ".seed");
  if (n["pad_to_multiple"]) s.pad_to_multiple = cnt("pad_to_multiple", 1);
  if (n["pad_to_max"]) s.pad_to_max = y.boolean(n["pad_to_max"], key + ".pad_to_max");
  if (n["pack"]) s.pack = y.boolean(n["pack"], key + ".pack");
  if (n["pack_length"]) s.pack_length = cnt("pack_length", 1);
  if (n["buckets"]) {
    const YAML::Node b = n["buckets"];
    if (!b.IsSequence() || b.size() == 0) y.fail(b, key + ".buckets", "expected a non-empty list of lengths");
    for (std::size_t i = 0; i < b.size(); ++i)
      s.buckets.push_back(y.count(b[i], fmt::format("{}.buckets[{}]", key, i), 1, kMaxTokens));
  }
  try {
    SeqLenSampler check(s);
  } catch (const SeqLenError& e) {
    YAML::Node at = !e.key.empty() && n[e.key] ? n[e.key] : n;
    y.fail(at, key + (e.key.empty() ? "" : "." + e.key), e.what());
  }
  return s;
}

// Keys that belong to one style only.
const std::vector<std::string> kKorthikantiKeys = {"dtype", "recompute", "mode", "generate", "kv_block"};
const std::vector<std::string> kEagerKeys = {"preset", "family", "precision", "attention", "dropout",
                                             "kv_heads", "ffn", "max_positions", "zero_grad"};

const std::vector<std::string>& preset_names() {
  static const std::vector<std::string> names = {"gpt2_small", "gpt2_medium", "llama", "bert_base", "bert_large"};
  return names;
}

// Model families people train, as published (GPT-2: Radford et al. 2019; Llama-style: the
// TinyLlama-1.1B shape; BERT: Devlin et al. 2019). Every value can be overridden.
void apply_preset(const std::string& name, TransformerParams& p) {
  p.preset = name;
  p.precision = Precision::AutocastBf16;
  p.dropout = 0;
  p.kv_heads = 0;
  p.ffn = 0;
  p.ffn_mult = 4;
  if (name == "gpt2_small" || name == "gpt2_medium") {
    p.family = Family::Gpt;
    p.attention = Attention::SdpaFlash;
    p.vocab = 50257;
    p.max_positions = 1024;
    p.layers = name == "gpt2_small" ? 12 : 24;
    p.hidden = name == "gpt2_small" ? 768 : 1024;
    p.heads = name == "gpt2_small" ? 12 : 16;
  } else if (name == "llama") {
    p.family = Family::Llama;
    p.precision = Precision::Bf16;
    p.attention = Attention::SdpaFlash;
    p.layers = 22, p.hidden = 2048, p.heads = 32, p.kv_heads = 4, p.ffn = 5632, p.vocab = 32000;
  } else {  // bert_base, bert_large
    p.family = Family::Bert;
    p.attention = Attention::Explicit;
    p.dropout = 0.1;
    p.vocab = 30522;
    p.max_positions = 512;
    p.layers = name == "bert_base" ? 12 : 24;
    p.hidden = name == "bert_base" ? 768 : 1024;
    p.heads = name == "bert_base" ? 12 : 16;
  }
}

}  // namespace

std::vector<std::string> transformer_keys() {
  std::vector<std::string> k = {"style", "layers", "hidden", "heads", "ffn_mult", "vocab", "batch", "steps",
                                "seq_len", "optimizer", "seed", "cublas_workspace"};
  k.insert(k.end(), kEagerKeys.begin(), kEagerKeys.end());
  k.insert(k.end(), kKorthikantiKeys.begin(), kKorthikantiKeys.end());
  return k;
}

// Makes batch and seq_len variable for `gpumembench frontier`: the config's values are the
// search's defaults, make_with builds the workload with one of them set.
namespace {

void add_transformer_frontier_params(WorkloadSpec& spec, const TransformerParams& params) {
  const SeqLenSpec& s = params.seq_len;
  std::uint64_t seq = s.dist == SeqDist::Fixed ? s.value : s.max;
  spec.params = {{"batch", params.batch}};
  const bool fixed_list = s.dist == SeqDist::Histogram || s.dist == SeqDist::Sequence;
  if (!fixed_list) spec.params.emplace_back("seq_len", seq);
  spec.make_with = [params](const std::string& param, std::uint64_t value) -> std::unique_ptr<Workload> {
    TransformerParams p = params;
    if (value == 0) throw std::invalid_argument(param + " must be at least 1");
    if (param == "batch") {
      p.batch = value;
    } else if (param == "seq_len") {
      // A fixed length is set; a bounded distribution gets this as its maximum.
      if (p.seq_len.dist == SeqDist::Histogram)
        throw std::invalid_argument("seq_len drawn from a histogram file cannot be varied");
      if (p.seq_len.dist == SeqDist::Sequence)
        throw std::invalid_argument("seq_len given as a sequence of lengths cannot be varied");
      if (p.seq_len.dist == SeqDist::Fixed) {
        p.seq_len.value = value;
      } else {
        p.seq_len.max = value;
        p.seq_len.min = std::min(p.seq_len.min, value);
      }
    } else {
      throw std::invalid_argument("the transformer cannot vary '" + param + "' (valid: batch, seq_len)");
    }
    SeqLenSampler sampler(p.seq_len);  // throws SeqLenError (an invalid_argument) for a bad value
    std::uint64_t tokens = p.mode == TransformerMode::Train ? sampler.max_shape_len() : sampler.max_shape_len() + p.generate;
    if (tokens * p.batch > INT_MAX)
      throw std::invalid_argument(fmt::format("{} rows x {} tokens is too large for one GEMM", p.batch, tokens));
    return make_transformer(p);
  };
}

}  // namespace

WorkloadSpec parse_transformer_workload(const YamlReader& y, const YAML::Node& n, const std::string& key,
                                        const std::string& config_dir) {
  TransformerParams p;
  auto cnt = [&](const char* k, std::uint64_t lo, std::uint64_t hi) {
    return y.count(n[k], key + "." + k, lo, hi);
  };
  if (n["style"]) {
    auto v = y.choice(n["style"], key + ".style", {"pytorch_eager", "korthikanti"});
    p.style = v == "pytorch_eager" ? Style::PytorchEager : Style::Korthikanti;
  }
  const bool eager = p.style == Style::PytorchEager;
  for (const auto& k : eager ? kKorthikantiKeys : kEagerKeys)
    if (n[k])
      y.fail(n[k], key + "." + k,
             fmt::format("applies only with style: {}", eager ? "korthikanti" : "pytorch_eager (the default)"));
  if (eager) {
    if (n["preset"]) apply_preset(y.choice(n["preset"], key + ".preset", preset_names()), p);
    if (n["family"]) {
      auto v = y.choice(n["family"], key + ".family", {"gpt", "llama", "bert"});
      p.family = v == "gpt" ? Family::Gpt : v == "llama" ? Family::Llama : Family::Bert;
    }
    if (n["precision"]) {
      auto v = y.choice(n["precision"], key + ".precision", {"autocast_bf16", "bf16", "fp32"});
      p.precision = v == "autocast_bf16" ? Precision::AutocastBf16 : v == "bf16" ? Precision::Bf16 : Precision::Fp32;
    }
    if (n["attention"]) {
      auto v = y.choice(n["attention"], key + ".attention", {"explicit", "sdpa_flash", "sdpa_mem_efficient"});
      p.attention = v == "explicit" ? Attention::Explicit
                    : v == "sdpa_flash" ? Attention::SdpaFlash
                                        : Attention::SdpaMemEfficient;
    }
    if (n["dropout"]) p.dropout = y.number(n["dropout"], key + ".dropout", 0, 0.999);
    if (n["kv_heads"]) p.kv_heads = cnt("kv_heads", 1, 1 << 12);
    if (n["ffn"]) p.ffn = cnt("ffn", 1, 1 << 20);
    if (n["max_positions"]) p.max_positions = cnt("max_positions", 1, 1 << 20);
    if (n["zero_grad"]) p.zero_grad_to_none = y.choice(n["zero_grad"], key + ".zero_grad", {"set_to_none", "zero"}) == "set_to_none";
    if (n["dropout"] && p.dropout > 0 && p.family == Family::Llama)
      y.fail(n["dropout"], key + ".dropout", "family llama has no dropout (as Llama's reference code)");
    if (n["kv_heads"] && p.family != Family::Llama)
      y.fail(n["kv_heads"], key + ".kv_heads", "applies only with family: llama (grouped-query attention)");
    if (p.family == Family::Llama && p.attention == Attention::Explicit)
      y.fail(n["attention"] ? n["attention"] : n, key + ".attention",
             "family llama runs with sdpa_flash or sdpa_mem_efficient (explicit attention is not modeled for it)");
    if (p.family == Family::Bert && p.attention != Attention::Explicit)
      y.fail(n["attention"] ? n["attention"] : n, key + ".attention",
             "family bert runs with explicit attention (its padding mask keeps sdpa off flash)");
  }
  // Bounds keep every GEMM dimension within cuBLAS's 32-bit int and every size within 64 bits.
  if (n["layers"]) p.layers = cnt("layers", 1, 1024);
  if (n["hidden"]) p.hidden = cnt("hidden", 1, 1 << 17);
  if (n["heads"]) p.heads = cnt("heads", 1, 1 << 12);
  if (n["ffn_mult"]) p.ffn_mult = cnt("ffn_mult", 1, 64);
  if (n["vocab"]) p.vocab = cnt("vocab", 1, 1 << 24);
  if (n["batch"]) p.batch = cnt("batch", 1, 1 << 16);
  if (n["steps"]) p.steps = cnt("steps", 1, 100'000'000);
  if (n["generate"]) p.generate = cnt("generate", 1, 1 << 20);
  if (n["kv_block"]) p.kv_block = cnt("kv_block", 1, 1 << 20);
  if (n["cublas_workspace"]) p.cublas_workspace = y.size(n["cublas_workspace"], key + ".cublas_workspace");
  std::uint64_t seed = 1;
  if (n["seed"]) seed = y.count(n["seed"], key + ".seed");
  if (n["dtype"]) {
    auto v = y.choice(n["dtype"], key + ".dtype", {"bf16", "fp16", "fp32"});
    p.dtype = v == "bf16" ? DType::BF16 : v == "fp16" ? DType::FP16 : DType::FP32;
  }
  if (n["recompute"]) {
    auto v = y.choice(n["recompute"], key + ".recompute", {"none", "selective", "full"});
    p.recompute = v == "none" ? Recompute::None : v == "selective" ? Recompute::Selective : Recompute::Full;
  }
  if (n["optimizer"]) {
    auto v = y.choice(n["optimizer"], key + ".optimizer", {"foreach", "fused", "single_tensor"});
    p.optimizer = v == "foreach" ? Optimizer::Foreach : v == "fused" ? Optimizer::Fused : Optimizer::SingleTensor;
  }
  if (n["mode"]) {
    auto v = y.choice(n["mode"], key + ".mode", {"train", "inference"});
    p.mode = v == "train" ? TransformerMode::Train : TransformerMode::Inference;
  }
  if (p.mode == TransformerMode::Train) {
    for (const char* k : {"generate", "kv_block"})
      if (n[k]) y.fail(n[k], key + "." + k, "applies only with mode: inference");
  } else {
    if (n["recompute"] && p.recompute != Recompute::None)
      y.fail(n["recompute"], key + ".recompute", "applies only with mode: train (inference keeps no activations)");
    if (n["optimizer"]) y.fail(n["optimizer"], key + ".optimizer", "applies only with mode: train");
  }
  if (p.heads > p.hidden || p.hidden % p.heads)
    y.fail(n["heads"] ? n["heads"] : n, key + ".heads",
           fmt::format("heads ({}) must divide hidden ({})", p.heads, p.hidden));
  if (eager && p.kv_heads && p.heads % p.kv_heads)
    y.fail(n["kv_heads"] ? n["kv_heads"] : n, key + ".kv_heads",
           fmt::format("kv_heads ({}) must divide heads ({})", p.kv_heads, p.heads));
  if (eager && (p.hidden / p.heads) % 2)
    y.fail(n["heads"] ? n["heads"] : n, key + ".heads",
           fmt::format("the head size hidden / heads = {} must be even (rotary, flash)", p.hidden / p.heads));
  if (!n["seq_len"])
    y.fail(n, key + ".seq_len",
           fmt::format("missing: a length, or a map with dist ({})", join(seq_dist_names())));
  p.seq_len = parse_seq_len(y, n["seq_len"], key + ".seq_len", config_dir, seed);
  SeqLenSampler sampler(p.seq_len);
  const std::uint64_t s = sampler.max_shape_len();
  const std::uint64_t tokens = p.mode == TransformerMode::Train ? s : s + p.generate;
  // Keeps GEMM dimensions within cuBLAS's 32-bit ints and tensor sizes far from 64-bit overflow.
  if (tokens * p.batch > INT_MAX || double(p.heads) * double(tokens) * double(tokens) * double(p.batch) * 4 > 1e18 ||
      double(tokens) * double(p.batch) * double(p.vocab) * 4 > 1e18)
    y.fail(n["seq_len"], key + ".seq_len",
           fmt::format("the longest batch ({} rows x {} tokens) is too large for one GEMM", p.batch, tokens));
  if (eager) {
    const std::uint64_t positions = p.max_positions ? p.max_positions : (p.family == Family::Bert ? 512 : s);
    if (p.family != Family::Llama && s > positions)
      y.fail(n["max_positions"] ? n["max_positions"] : n["seq_len"], key + ".seq_len",
             fmt::format("the longest sequence ({} tokens) is longer than max_positions ({})", s, positions));
  }
  try {
    TransformerWorkload check(p);
  } catch (const std::invalid_argument& e) {
    y.fail(n, key, e.what());
  }
  WorkloadSpec spec{"transformer", [p] { return make_transformer(p); }, {}, {}, {}, {}, {}};
  if (!p.seq_len.histogram_path.empty()) spec.input_files.push_back(p.seq_len.histogram_path);
  add_transformer_frontier_params(spec, p);  // batch and seq_len for `gpumembench frontier`
  return spec;
}

}  // namespace gmb
