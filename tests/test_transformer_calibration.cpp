// The transformer's pytorch_eager style against real PyTorch 2.11 training loops recorded on an
// H200 (scripts/record_torch_training.py: GPT, GPT-2, Llama and BERT shapes, autocast, bf16 and
// fp32, explicit, flash and memory-efficient attention, fixed and dynamic lengths; shrunk by
// scripts/summarize_torch_train.py into tests/data/torch_train/). Every shape runs on the
// simulated device with the recorded per-step lengths (seq_len: {dist: sequence}).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "harness/run/runner.h"
#include "test_helpers.h"
#include "torch_ref_data.h"
#include "workloads/transformer.h"
#include "workloads/transformer_eager.h"

using namespace gmb;
using namespace gmb::testing;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

const std::string kDir = source_path("tests/data/torch_train");

std::vector<std::string> shapes() {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(kDir))
    if (e.path().extension() == ".json") v.push_back(e.path().stem().string());
  std::sort(v.begin(), v.end());
  return v;
}

json load(const std::string& name) { return json::parse(read_text(kDir + "/" + name + ".json")); }

// The recorded model (the script's model code is what pytorch_eager describes).
TransformerParams params_of(const json& j) {
  const json& m = j["model"];
  TransformerParams p;
  p.style = Style::PytorchEager;
  const std::string fam = m["family"], prec = m["precision"], att = m["attention"];
  p.family = fam == "gpt" ? Family::Gpt : fam == "bert" ? Family::Bert : Family::Llama;
  p.precision = prec == "autocast_bf16" ? Precision::AutocastBf16 : prec == "bf16" ? Precision::Bf16 : Precision::Fp32;
  p.attention = att == "explicit"     ? Attention::Explicit
                : att == "sdpa_flash" ? Attention::SdpaFlash
                                      : Attention::SdpaMemEfficient;
  p.layers = m["layers"], p.hidden = m["hidden"], p.heads = m["heads"], p.vocab = m["vocab"], p.batch = m["batch"];
  p.dropout = m.value("dropout", 0.0);
  p.kv_heads = m.value("kv_heads", 0);
  p.ffn = m.value("ffn", 0);
  p.optimizer = Optimizer::Foreach;
  p.seq_len.dist = SeqDist::Sequence;
  p.seq_len.values = j["lengths"].get<std::vector<std::uint64_t>>();
  p.steps = p.seq_len.values.size();
  // GPT's learned positions: nn.Embedding(max(lengths), h) in the script.
  if (p.family == Family::Gpt) p.max_positions = *std::max_element(p.seq_len.values.begin(), p.seq_len.values.end());
  return p;
}

// Allocations the recording did not see: the parameters (and llama's inv_freq buffer), made
// before recording began.
std::uint64_t made_before_recording(const TransformerParams& p) {
  return eager_params(p).size() + (p.family == Family::Llama ? 1 : 0);
}

double rel(double sim, double real) { return (sim - real) / real; }

}  // namespace

TEST(TransformerCalibration, EveryRecordedShapeIsHere) {
  auto v = shapes();
  EXPECT_GE(v.size(), 7u);
  std::set<std::string> families, precisions, attentions;
  for (const auto& n : v) {
    json j = load(n);
    families.insert(j["model"]["family"]);
    precisions.insert(j["model"]["precision"]);
    attentions.insert(j["model"]["attention"]);
  }
  EXPECT_EQ(families.size(), 3u);
  EXPECT_EQ(precisions.size(), 3u);
  EXPECT_EQ(attentions.size(), 3u);
}

// Allocations per step within 5% of the recording's, every step (in fact equal).
TEST(TransformerCalibration, AllocationsPerStepMatchTheRecording) {
  for (const auto& name : shapes()) {
    json j = load(name);
    TransformerParams p = params_of(j);
    TransformerWorkload w(p);
    const auto& real = j["default"]["allocs_per_step"];
    ASSERT_EQ(real.size(), p.steps) << name;
    std::uint64_t worst = 0;
    for (std::uint64_t step = 0; step < p.steps; ++step) {
      std::vector<Op> ops;
      StepInfo info;
      w.step_ops(step, ops, info);
      std::uint64_t sim = std::count_if(ops.begin(), ops.end(), [](const Op& o) { return o.kind == Op::Kind::Alloc; });
      std::uint64_t rec = real[step].get<std::uint64_t>();
      if (step == 0) {
        sim -= made_before_recording(p);
        rec -= j["allocs_before_trace"].get<std::uint64_t>();
      }
      EXPECT_LE(std::fabs(rel(double(sim), double(rec))), 0.05) << name << " step " << step << ": " << sim << " vs " << rec;
      worst = std::max<std::uint64_t>(worst, sim > rec ? sim - rec : rec - sim);
    }
    std::printf("[calibration] %s: %s allocations per step (worst difference %llu)\n", name.c_str(),
                real[1].dump().c_str(), (unsigned long long)worst);
  }
}

// Peak allocated within 3% and peak reserved within 5% of real PyTorch's, under the caching
// allocator at its defaults and with expandable_segments:True.
TEST(TransformerCalibration, PeaksMatchTheRecordingForDefaultAndExpandableSegments) {
  for (const auto& name : shapes()) {
    json j = load(name);
    TransformerParams p = params_of(j);
    for (const char* setting : {"default", "expandable"}) {
      AllocatorOptions options;
      if (std::string(setting) == "expandable") options["alloc_conf"] = "expandable_segments:True";
      CaseSpec spec{"caching", options, [p] { return make_transformer(p); }};
      CaseResult r = run_case(spec, DeviceSpec{DeviceChoice::Sim, j["total_memory"].get<Bytes>()}, RunSettings{});
      ASSERT_EQ(r.runs.size(), 1u) << name << ": " << r.error;
      const RunMetrics& m = r.runs[0];
      const json& real = j[setting];
      const double pa = real["peak_allocated_bytes"].get<double>(), pr = real["peak_reserved_bytes"].get<double>();
      std::printf("[calibration] %-20s %-10s peak allocated %9.1f MiB (real %9.1f, %+.2f%%), reserved %9.1f MiB "
                  "(real %9.1f, %+.2f%%)\n",
                  name.c_str(), setting, double(m.peak_allocated_bytes) / 1048576, pa / 1048576,
                  100 * rel(double(m.peak_allocated_bytes), pa), double(m.peak_reserved_bytes) / 1048576, pr / 1048576,
                  100 * rel(double(m.peak_reserved_bytes), pr));
      EXPECT_EQ(m.steps_completed, p.steps) << name;
      EXPECT_LE(std::fabs(rel(double(m.peak_allocated_bytes), pa)), 0.03) << name << " " << setting;
      EXPECT_LE(std::fabs(rel(double(m.peak_reserved_bytes), pr)), 0.05) << name << " " << setting;
    }
  }
}

#ifdef GMB_HAVE_ZLIB
// Tensor by tensor: the recorded first steps' allocation sizes, in order, and the bytes in use
// when each is made. (The order of the frees between two allocations is not compared: leaving
// autocast frees its cache in hash-table order.)
TEST(TransformerCalibration, FirstStepsAllocateTheRecordedTensorsInOrder) {
  for (const auto& name : shapes()) {
    json j = load(name);
    TransformerParams p = params_of(j);
    // The recording: alloc/free rows (ids from 1, frees of earlier allocations only).
    std::istringstream in(torch_ref::read_gz(kDir + "/" + name + ".steps.csv.gz"));
    std::string line;
    std::getline(in, line);
    std::vector<std::pair<Bytes, Bytes>> real;  // (size, bytes in use before it)
    std::map<std::uint64_t, Bytes> live;
    Bytes in_use = 0;
    while (std::getline(in, line)) {
      std::stringstream ss(line);
      std::string action, id, bytes;
      std::getline(ss, action, ',');
      std::getline(ss, id, ',');
      std::getline(ss, bytes, ',');
      if (action == "alloc") {
        real.push_back({std::stoull(bytes), in_use});
        live[std::stoull(id)] = std::stoull(bytes);
        in_use += std::stoull(bytes);
      } else {
        in_use -= live.at(std::stoull(id));
        live.erase(std::stoull(id));
      }
    }
    // The workload's first steps, without the parameters made before recording.
    TransformerWorkload w(p);
    std::vector<std::pair<Bytes, Bytes>> sim;
    std::map<BufferId, Bytes> sim_live;
    Bytes sim_use = 0;
    std::uint64_t skip = made_before_recording(p);
    for (std::uint64_t step = 0; sim.size() < real.size() && step < p.steps; ++step) {
      std::vector<Op> ops;
      StepInfo info;
      w.step_ops(step, ops, info);
      for (const Op& o : ops) {
        if (o.kind == Op::Kind::Alloc) {
          if (skip) {
            --skip;
            continue;
          }
          if (sim.size() < real.size()) sim.push_back({o.bytes, sim_use});
          sim_live[o.id] = o.bytes;
          sim_use += o.bytes;
        } else if (o.kind == Op::Kind::Free) {
          sim_use -= sim_live.at(o.id);
          sim_live.erase(o.id);
        }
      }
    }
    ASSERT_EQ(sim.size(), real.size()) << name;
    std::size_t differ = 0, first = real.size();
    for (std::size_t i = 0; i < real.size(); ++i)
      if (sim[i] != real[i]) {
        ++differ;
        first = std::min(first, i);
      }
    EXPECT_EQ(differ, 0u) << name << ": " << differ << " of " << real.size() << " allocations differ, first #" << first + 1
                          << (first < real.size() ? ": sim " + std::to_string(sim[first].first) + " bytes at " +
                                                        std::to_string(sim[first].second) + " in use, real " +
                                                        std::to_string(real[first].first) + " at " +
                                                        std::to_string(real[first].second)
                                                  : std::string());
  }
}
#endif

// The same GPT loop under other allocator settings (max_split_size_mb, roundup_power2_divisions,
// expandable segments with a split limit): peaks within the same bounds.
TEST(TransformerCalibration, PeaksMatchUnderOtherAllocatorSettings) {
  json j = json::parse(read_text(kDir + "/settings/gpt_h1024.json"));
  TransformerParams p = params_of(j);
  ASSERT_GE(j["runs"].size(), 5u);
  for (const auto& run : j["runs"]) {
    AllocatorOptions options;
    const std::string conf = run["alloc_conf"];
    if (!conf.empty()) options["alloc_conf"] = conf;
    CaseSpec spec{"caching", options, [p] { return make_transformer(p); }};
    CaseResult r = run_case(spec, DeviceSpec{DeviceChoice::Sim, j["total_memory"].get<Bytes>()}, RunSettings{});
    ASSERT_EQ(r.runs.size(), 1u) << conf << ": " << r.error;
    const RunMetrics& m = r.runs[0];
    const double pa = run["peak_allocated_bytes"].get<double>(), pr = run["peak_reserved_bytes"].get<double>();
    std::printf("[calibration] gpt_h1024 %-48s peak allocated %+.2f%%, reserved %9.1f MiB (real %9.1f, %+.2f%%)\n",
                conf.empty() ? "(defaults)" : conf.c_str(), 100 * rel(double(m.peak_allocated_bytes), pa),
                double(m.peak_reserved_bytes) / 1048576, pr / 1048576, 100 * rel(double(m.peak_reserved_bytes), pr));
    EXPECT_LE(std::fabs(rel(double(m.peak_allocated_bytes), pa)), 0.03) << conf;
    EXPECT_LE(std::fabs(rel(double(m.peak_reserved_bytes), pr)), 0.05) << conf;
  }
}
