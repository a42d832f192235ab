// The transformer workload through the command line: config errors, and a small dynamic vs
// fixed run on the simulated device with its tables and results.json.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "allocators/registry.h"
#include "harness/config/config.h"
#include "test_helpers.h"

using namespace gmb::testing;
namespace fs = std::filesystem;

namespace {

const char* kHead = "allocators: [caching]\nworkloads:\n  - transformer:\n";

// Expects exit 2 with every needle in the output, and nothing written.
void expect_error(const std::string& body, const std::vector<std::string>& needles,
                  const std::string& extra_file = {}, const std::string& extra_text = {}) {
  auto dir = temp_dir("tfcfg");
  write_text(dir / "bad.yaml", kHead + body);
  if (!extra_file.empty()) write_text(dir / extra_file, extra_text);
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --config " + (dir / "bad.yaml").string() + " --output " + out.string());
  EXPECT_EQ(r.status, 2) << r.out;
  for (const auto& n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << "missing '" << n << "' in:\n" << r.out;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

}  // namespace

TEST(TransformerConfig, BadValuesAreErrorsAtTheirLineWithTheValidChoices) {
  // Line 4 is the first key under `transformer:`.
  expect_error("      seq_len: {dist: gamma, max: 10}\n",
               {"bad.yaml:4:23", "workloads[0].transformer.seq_len.dist", "'gamma' is not a valid choice",
                "fixed, uniform, normal, lognormal, zipf, histogram, sequence"});
  expect_error("      hidden: 1000\n      heads: 16\n      seq_len: 128\n",
               {"bad.yaml:5:14", "transformer.heads", "heads (16) must divide hidden (1000)"});
  expect_error("      seq_len: {dist: uniform, min: 300, max: 200}\n",
               {"bad.yaml:4:37", "seq_len.min", "min (300) is greater than max (200)"});
  expect_error("      layers: 0\n      seq_len: 128\n", {"bad.yaml:4:15", "transformer.layers", "out of range"});
  expect_error("      batch: -4\n      seq_len: 128\n",
               {"bad.yaml:4:14", "transformer.batch", "'-4' is not a non-negative integer"});
  expect_error("      seq_len: {dist: uniform, mean: 5, max: 100}\n",
               {"bad.yaml:4:32", "seq_len.mean", "unknown key 'mean' for dist uniform", "valid: min, max"});
  expect_error("      seq_len: {dist: uniform, max: 1000, buckets: [256, 512]}\n",
               {"bad.yaml:4:52", "seq_len.buckets", "the largest bucket (512) cannot hold the longest sequence (1000)"});
  expect_error("      seq_len: {dist: normal, mean: 500, max: 1000}\n",
               {"bad.yaml:4:16", "seq_len.std", "dist normal needs std"});
  const std::string k = "      style: korthikanti\n";
  expect_error(k + "      dtype: int8\n      seq_len: 128\n", {"bad.yaml:5:14", "transformer.dtype", "bf16, fp16, fp32"});
  expect_error(k + "      recompute: some\n      seq_len: 128\n", {"transformer.recompute", "none, selective, full"});
  expect_error(k + "      generate: 10\n      seq_len: 128\n",
               {"bad.yaml:5:17", "transformer.generate", "applies only with mode: inference"});
  expect_error("      seq_len: 128\n      layerz: 3\n",
               {"bad.yaml:5:7", "unknown key 'layerz'", "style, layers, hidden, heads, ffn_mult, vocab, batch"});
  // pytorch_eager (the default) and korthikanti each have their own keys.
  expect_error("      dtype: bf16\n      seq_len: 128\n",
               {"bad.yaml:4:14", "transformer.dtype", "applies only with style: korthikanti"});
  expect_error(k + "      precision: bf16\n      seq_len: 128\n",
               {"bad.yaml:5:18", "transformer.precision", "applies only with style: pytorch_eager (the default)"});
  expect_error("      style: eager\n      seq_len: 128\n", {"bad.yaml:4:14", "transformer.style", "pytorch_eager, korthikanti"});
  expect_error("      preset: gpt3\n      seq_len: 128\n",
               {"bad.yaml:4:15", "transformer.preset", "gpt2_small, gpt2_medium, llama, bert_base, bert_large"});
  expect_error("      precision: fp16\n      seq_len: 128\n",
               {"bad.yaml:4:18", "transformer.precision", "autocast_bf16, bf16, fp32"});
  expect_error("      attention: flash\n      seq_len: 128\n",
               {"bad.yaml:4:18", "transformer.attention", "explicit, sdpa_flash, sdpa_mem_efficient"});
  expect_error("      preset: llama\n      kv_heads: 5\n      seq_len: 128\n",
               {"bad.yaml:5:17", "transformer.kv_heads", "kv_heads (5) must divide heads (32)"});
  expect_error("      kv_heads: 2\n      seq_len: 128\n",
               {"bad.yaml:4:17", "transformer.kv_heads", "applies only with family: llama"});
  expect_error("      preset: bert_base\n      seq_len: 1024\n",
               {"bad.yaml:5:16", "transformer.seq_len", "the longest sequence (1024 tokens) is longer than max_positions (512)"});
  expect_error("      preset: bert_base\n      attention: sdpa_flash\n      seq_len: 128\n",
               {"bad.yaml:5:18", "transformer.attention", "family bert runs with explicit attention"});
  expect_error("      dropout: 1.5\n      seq_len: 128\n", {"bad.yaml:4:16", "transformer.dropout", "out of range"});
  expect_error("      preset: llama\n      dropout: 0.1\n      seq_len: 128\n",
               {"bad.yaml:5:16", "transformer.dropout", "family llama has no dropout"});
  expect_error("      zero_grad: none\n      seq_len: 128\n",
               {"bad.yaml:4:18", "transformer.zero_grad", "set_to_none, zero"});
  expect_error("      layers: 2\n", {"transformer.seq_len", "missing"});
  expect_error("      seq_len: {dist: histogram, file: h.csv}\n",
               {"bad.yaml:4:40", "seq_len.file", "h.csv:3: weight 'x' is not a number"}, "h.csv",
               "length,weight\n128,1\n256,x\n");
  expect_error("      seq_len: {dist: sequence, values: [128, 0, 64]}\n",
               {"bad.yaml:4:47", "seq_len.values[1]", "out of range"});
  expect_error("      seq_len: {dist: sequence, values: [128, x]}\n",
               {"bad.yaml:4:47", "seq_len.values[1]", "'x' is not a non-negative integer"});
  expect_error("      seq_len: {dist: sequence, values: []}\n",
               {"bad.yaml:4:41", "seq_len.values", "expected a non-empty list of lengths"});
  expect_error("      seq_len: {dist: sequence, values: [128], max: 5}\n",
               {"seq_len.max", "unknown key 'max' for dist sequence", "valid: values"});
  expect_error("      seq_len: {dist: histogram, file: nowhere.csv}\n",
               {"seq_len.file", "nowhere.csv: cannot open the histogram file"});
}

TEST(TransformerConfig, ShippedConfigsLoadWithTheSameModelAndAllAllocators) {
  auto dyn = gmb::load_config(source_path("configs/dynamic_seq.yaml"));
  auto fix = gmb::load_config(source_path("configs/fixed_seq.yaml"));
  ASSERT_EQ(dyn.workloads.size(), 1u);
  ASSERT_EQ(fix.workloads.size(), 1u);
  EXPECT_EQ(dyn.device.capacity_bytes, 24ull << 30);
  EXPECT_EQ(fix.device.capacity_bytes, 24ull << 30);
  std::vector<std::string> labels;
  for (auto& a : dyn.allocators) labels.push_back(gmb::allocator_label(a.name, a.options));
  for (const char* want : {"cuda_malloc", "cuda_managed[prefetch=true]", "cuda_mempool", "caching",
                           "caching[expandable_segments:True]", "caching[max_split_size_mb:128]"})
    EXPECT_NE(std::find(labels.begin(), labels.end(), want), labels.end()) << want;
  ASSERT_EQ(fix.allocators.size(), dyn.allocators.size());
  // Same model, different sequence shaping.
  auto wd = dyn.workloads[0].make(), wf = fix.workloads[0].make();
  std::string ld = wd->label(), lf = wf->label();
  EXPECT_EQ(ld.substr(0, ld.find(',')), lf.substr(0, lf.find(','))) << ld << " vs " << lf;
  EXPECT_EQ(wd->num_steps(), wf->num_steps());
}

// The model-family configs: presets give the published shapes, and every allocator runs them.
TEST(TransformerConfig, PresetConfigsLoadWithTheirModels) {
  std::map<std::string, std::vector<std::string>> want = {
      {"configs/gpt2.yaml",
       {"transformer[gpt2_small L12 h768 a12 b8 autocast_bf16 sdpa_flash, uniform 128..1024]",
        "transformer[gpt2_medium L24 h1024 a16 b4 autocast_bf16 sdpa_flash, uniform 128..1024]"}},
      {"configs/llama.yaml",
       {"transformer[llama L22 h2048 a32 b4 bf16 sdpa_flash, lognormal(6.64379,0.6) 256..2048, kv 4]"}},
      {"configs/bert.yaml",
       {"transformer[bert_base L12 h768 a12 b8 autocast_bf16 explicit, uniform 64..512, dropout 0.1]",
        "transformer[bert_large L24 h1024 a16 b4 autocast_bf16 explicit, uniform 64..512, dropout 0.1]"}}};
  for (const auto& [path, labels] : want) {
    auto c = gmb::load_config(source_path(path));
    ASSERT_EQ(c.workloads.size(), labels.size()) << path;
    EXPECT_EQ(c.allocators.size(), 4u) << path;
    for (std::size_t i = 0; i < labels.size(); ++i) EXPECT_EQ(c.workloads[i].make()->label(), labels[i]) << path;
  }
}

TEST(TransformerConfig, DynamicVersusFixedOnSimReportsTokensAndTimeShares) {
  auto dir = temp_dir("tfrun");
  const std::string model =
      "      style: korthikanti\n      layers: 2\n      hidden: 256\n      heads: 4\n      vocab: 1000\n      batch: 4\n      steps: 12\n";
  write_text(dir / "c.yaml", std::string("name: tf\ndevice: {capacity: 4GiB}\nallocators:\n  - caching\n"
                                         "  - cuda_malloc\nworkloads:\n  - transformer:\n") +
                                 model + "      seq_len: {dist: uniform, min: 16, max: 512, seed: 3}\n" +
                                 "  - transformer:\n" + model +
                                 "      seq_len: {dist: uniform, min: 16, max: 512, seed: 3, pad_to_max: true}\n");
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --config " + (dir / "c.yaml").string() + " --output " + out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  for (const char* col : {"| allocator | peak reserved | peak allocated | fragmentation | device mallocs | device frees | "
                          "hit rate | steps/s | tokens/s real | tokens/s padded | in allocator calls | OOM |",
                          "peak reserved (fragmentation) after step: 1/4 | 1/2 | 3/4 | all",
                          "\n### transformer[L2 h256 a4 b4 bf16, uniform 16..512] @ 4.00 GiB\n",
                          "\n### transformer[L2 h256 a4 b4 bf16, uniform 16..512, pad max] @ 4.00 GiB\n",
                          "\n| caching | ", "(modeled)"})
    EXPECT_NE(r.out.find(col), std::string::npos) << "missing '" << col << "' in:\n" << r.out;
  auto j = nlohmann::json::parse(read_text(out / "results.json"));
  ASSERT_EQ(j["cases"].size(), 4u);
  const auto& dyn = j["cases"][0];
  const auto& fix = j["cases"][2];
  EXPECT_EQ(dyn["workload"], "transformer");
  EXPECT_EQ(dyn["steps_completed"], 12);
  for (const auto* c : {&dyn, &fix}) {
    const auto& t = (*c)["throughput"];
    EXPECT_TRUE(t["modeled"].get<bool>());
    EXPECT_GT(t["tokens_per_s"].get<double>(), 0);
    EXPECT_GE(t["padded_tokens_per_s"].get<double>(), t["tokens_per_s"].get<double>());
    EXPECT_GE((*c)["alloc_time_share"].get<double>(), 0);
    EXPECT_LT((*c)["alloc_time_share"].get<double>(), 1);
    // The harness's host time is measured; its share only means something against a measured run.
    EXPECT_TRUE((*c)["harness_seconds"]["median"].is_number());
    EXPECT_TRUE((*c)["harness_overhead_share"].is_null()) << "no share against a modeled time";
    EXPECT_GT((*c)["hit_rate"].get<double>(), 0.5) << "the caching allocator reuses blocks";
    EXPECT_TRUE((*c)["oom"].is_null());
  }
  // Padding to the maximum: every step holds batch x 512 tokens.
  double fsps = fix["throughput"]["steps_per_s"].get<double>();
  EXPECT_NEAR(fix["throughput"]["padded_tokens_per_s"].get<double>() / fsps, 4 * 512, 1e-6);
  // The same sequences (same seed): the same real tokens per step in both runs.
  double dsps = dyn["throughput"]["steps_per_s"].get<double>();
  EXPECT_NEAR(dyn["throughput"]["tokens_per_s"].get<double>() / dsps,
              fix["throughput"]["tokens_per_s"].get<double>() / fsps, 1e-6);
  // Padding computes more tokens, each for less time: padded batches fill the kernels better and
  // their lengths (512) are multiples of 8, where cuBLAS runs the attention GEMMs at full speed
  // (docs/STEP_TIME.md); at this small size that outweighs the padding, so the padded run is not
  // slower per step. It allocates more at its peak.
  EXPECT_GT(fix["throughput"]["padded_tokens_per_s"].get<double>(), dyn["throughput"]["padded_tokens_per_s"].get<double>());
  EXPECT_GT(fix["peak_allocated_bytes"].get<double>(), dyn["peak_allocated_bytes"].get<double>());
  // cuda_malloc asks the driver for every buffer: its allocator share is larger than caching's.
  EXPECT_GT(j["cases"][1]["alloc_time_share"].get<double>(), dyn["alloc_time_share"].get<double>());
  EXPECT_EQ(j["cases"][1]["hit_rate"].get<double>(), 0.0);
  auto csv = read_text(out / "results.csv");
  EXPECT_NE(csv.find("padded_tokens_per_s,alloc_time_share,harness_overhead_share"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TransformerConfig, StepsFlagShortensEveryWorkload) {
  auto dir = temp_dir("tfsteps");
  write_text(dir / "c.yaml",
             "allocators: [caching]\nworkloads:\n  - transformer: {layers: 1, hidden: 128, heads: 2, vocab: 500, "
             "batch: 2, steps: 50, seq_len: 64}\n  - hole_pattern: {repeat: 7}\n");
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --steps 3 --config " + (dir / "c.yaml").string() + " --output " +
                           out.string() + " --format json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read_text(out / "results.json"));
  EXPECT_EQ(j["cases"][0]["steps_completed"], 3);
  EXPECT_EQ(j["cases"][1]["steps_completed"], 3);
  EXPECT_NE(j["command"].get<std::string>().find("--steps 3"), std::string::npos) << "the command is recorded";
  auto bad = run_gpumembench("--device sim --steps 0 --config " + (dir / "c.yaml").string());
  EXPECT_EQ(bad.status, 2);
  EXPECT_NE(bad.out.find("--steps: '0' is not a step count"), std::string::npos) << bad.out;
  fs::remove_all(dir);
}
