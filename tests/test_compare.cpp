// `gpumembench compare`: cases matched by label, each metric per input with its ratio to the
// first, the device of each input in the header, and bad inputs named with exit status 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "harness/compare/compare.h"
#include "test_helpers.h"

using namespace gmb::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Two results.json as gpumembench writes them: an H200 run and a sim run of the same cases.
json h200_results() {
  return json::parse(R"({
    "tool": {"name": "gpumembench", "version": "0.1.0"},
    "config": {"name": "holes"}, "run": {"repeat": 3},
    "device": {"kind": "cuda", "name": "NVIDIA H200", "capacity_bytes": 4294967296},
    "cases": [
      {"label": "caching x hole", "peak_reserved_bytes": 891289600, "fragmentation": 0.235294,
       "throughput": {"steps_per_s": 100, "tokens_per_s": 0, "modeled": false},
       "memory_modeled": false, "oom": null, "ooms": 0, "repeats": 3},
      {"label": "cuda_malloc x hole", "peak_reserved_bytes": 681574400, "fragmentation": 0,
       "throughput": {"steps_per_s": 50, "tokens_per_s": 0, "modeled": false},
       "memory_modeled": false, "oom": null, "ooms": 0, "repeats": 3},
      {"label": "only in h200", "peak_reserved_bytes": 1048576, "fragmentation": 0,
       "throughput": {"steps_per_s": 1, "modeled": false}, "oom": null, "ooms": 0, "repeats": 3}
    ]})");
}

json sim_results() {
  return json::parse(R"({
    "tool": {"name": "gpumembench", "version": "0.1.0"},
    "config": {"name": "holes"}, "run": {"repeat": 1},
    "device": {"kind": "sim", "name": "simulated H200-like GPU", "capacity_bytes": 734003200},
    "cases": [
      {"label": "cuda_malloc x hole", "peak_reserved_bytes": 681574400, "fragmentation": 0,
       "throughput": {"steps_per_s": 25, "tokens_per_s": 0, "modeled": true},
       "memory_modeled": true, "oom": null, "ooms": 0, "repeats": 1},
      {"label": "caching x hole", "peak_reserved_bytes": 681574400, "fragmentation": 0,
       "throughput": {"steps_per_s": 200, "tokens_per_s": 0, "modeled": true}, "memory_modeled": false,
       "oom": {"kind": "fragmentation", "step": 2, "event": 9, "requested_bytes": 1}, "ooms": 3, "repeats": 1},
      {"label": "only in sim", "error": "cudaMalloc failed"}
    ]})");
}

struct Inputs {
  fs::path dir, a, b;
};

Inputs write_inputs() {
  Inputs in;
  in.dir = temp_dir("compare");
  fs::create_directories(in.dir / "h200");
  fs::create_directories(in.dir / "sim");
  in.a = in.dir / "h200" / "results.json";
  in.b = in.dir / "sim" / "results.json";
  write_text(in.a, h200_results().dump(2));
  write_text(in.b, sim_results().dump(2));
  return in;
}

// The Markdown line of a case in the section titled `section`.
std::string md_row(const std::string& md, const std::string& section, const std::string& label) {
  auto s = md.find("### " + section + "\n");
  if (s == std::string::npos) return "";
  auto end = md.find("\n### ", s + 1);
  auto r = md.find("| " + label + " |", s);
  if (r == std::string::npos || (end != std::string::npos && r > end)) return "";
  return md.substr(r, md.find('\n', r) - r);
}

}  // namespace

TEST(Compare, MarkdownShowsEachInputWithItsDeviceAndTheRatioToTheFirst) {
  auto in = write_inputs();
  auto r = run_gpumembench("compare " + in.a.string() + " " + (in.dir / "sim").string());
  ASSERT_EQ(r.status, 0) << r.out;
  // Header: each input with its device, capacity and runs.
  EXPECT_NE(r.out.find("2 inputs, 2 of 4 cases in every input"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| h200 | " + in.a.string() + " | cuda: NVIDIA H200 | 4.00 GiB | 3 | holes | 0.1.0 |"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| sim | " + in.b.string() + " | sim: simulated H200-like GPU | 700.0 MiB | 1 |"),
            std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| case | h200 (cuda: NVIDIA H200) | sim (sim: simulated H200-like GPU) | sim/h200 |"),
            std::string::npos) << r.out;
  // 650 / 850 MiB = 0.765; modeled figures say so; steps/s 200 / 100 = 2.
  EXPECT_EQ(md_row(r.out, "Peak reserved", "caching x hole"), "| caching x hole | 850.0 MiB | 650.0 MiB | 0.765x |");
  EXPECT_EQ(md_row(r.out, "Peak reserved", "cuda_malloc x hole"),
            "| cuda_malloc x hole | 650.0 MiB | 650.0 MiB (modeled) | 1.00x |");
  // Fractions: the difference in percentage points, not a ratio (0x said nothing).
  EXPECT_NE(r.out.find("| case | h200 (cuda: NVIDIA H200) | sim (sim: simulated H200-like GPU) | sim − h200 |"),
            std::string::npos) << r.out;
  EXPECT_EQ(md_row(r.out, "Fragmentation", "caching x hole"), "| caching x hole | 23.5% | 0.0% | -23.5 pp |");
  EXPECT_EQ(md_row(r.out, "Fragmentation", "cuda_malloc x hole"),
            "| cuda_malloc x hole | 0.0% | 0.0% (modeled) | +0.0 pp |");
  EXPECT_NE(r.out.find("(cases matched by label)"), std::string::npos) << r.out;
  EXPECT_EQ(md_row(r.out, "Steps/s", "caching x hole"), "| caching x hole | 100.0 | 200.0 (modeled) | 2.00x |");
  EXPECT_EQ(md_row(r.out, "Steps/s", "cuda_malloc x hole"), "| cuda_malloc x hole | 50.00 | 25.00 (modeled) | 0.500x |");
  EXPECT_EQ(md_row(r.out, "OOM", "caching x hole"), "| caching x hole | none | fragmentation at step 2 (3 OOMs) | no |");
  EXPECT_EQ(md_row(r.out, "OOM", "cuda_malloc x hole"), "| cuda_malloc x hole | none | none (modeled) | yes |");
  // A case in one input only: a dash elsewhere; a failed case says error.
  EXPECT_EQ(md_row(r.out, "Peak reserved", "only in h200"), "| only in h200 | 1.0 MiB | – | – |");
  EXPECT_EQ(md_row(r.out, "Peak reserved", "only in sim"), "| only in sim | – | error | – |");
  EXPECT_EQ(md_row(r.out, "Tokens/s", "caching x hole"), "") << "no tokens measured: no tokens table";
  EXPECT_NE(r.out.find("(modeled): figure from the simulated device"), std::string::npos);
  fs::remove_all(in.dir);
}

TEST(Compare, CsvJsonAndLatexCarryTheSameNumbers) {
  auto in = write_inputs();
  auto out = in.dir / "cmp";
  auto r = run_gpumembench("compare " + in.a.string() + " " + in.b.string() + " --output " + out.string() +
                           " --format csv,json,latex");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("### Peak reserved"), std::string::npos) << "the Markdown table still goes to stdout";
  EXPECT_FALSE(fs::exists(out / "compare.md")) << "only the asked-for formats are written";

  std::string csv = read_text(out / "compare.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "label,input,input_name,path,device_kind,device_name,present,error,runs,peak_reserved_bytes,"
            "peak_reserved_ratio,fragmentation,fragmentation_diff_pp,steps_per_s,steps_per_s_ratio,tokens_per_s,"
            "tokens_per_s_ratio,oom_kind,oom_step,ooms,oom_same_as_first,memory_modeled,throughput_modeled,hit_rate,"
            "hit_rate_diff_pp,workload");
  EXPECT_NE(csv.find("\"caching x hole\",1,\"sim\",\"" + in.b.string() +
                     "\",\"sim\",\"simulated H200-like GPU\",1,\"\",1,681574400,0.764706,0.000000,-23.5294,200,2,0,1,"
                     "fragmentation,2,3,0,0,1,0.000000,0,\"\"\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\"caching x hole\",0,\"h200\",\"" + in.a.string() +
                     "\",\"cuda\",\"NVIDIA H200\",1,\"\",3,891289600,1,0.235294,0,100,1,0,1,,,0,1,0,0,0.000000,0,\"\"\n"),
            std::string::npos) << csv;
  EXPECT_NE(csv.find("\"only in h200\",1,\"sim\",\"" + in.b.string() + "\",\"sim\",\"simulated H200-like GPU\",0,\"\","
                     ",,,,,,,,,,,,,,,,,\"\"\n"),
            std::string::npos) << csv;

  auto j = json::parse(read_text(out / "compare.json"));
  EXPECT_EQ(j["kind"], "compare");
  EXPECT_EQ(j["inputs"][1]["device"]["kind"], "sim");
  EXPECT_EQ(j["common_cases"], 2);
  ASSERT_EQ(j["cases"][0]["label"], "caching x hole");
  EXPECT_NEAR(j["cases"][0]["inputs"][1]["ratio_to_first"]["peak_reserved_bytes"].get<double>(), 650.0 / 850.0, 1e-9);
  EXPECT_NEAR(j["cases"][0]["inputs"][1]["difference_to_first_pp"]["fragmentation"].get<double>(), -23.5294, 1e-9);
  EXPECT_FALSE(j["cases"][0]["inputs"][1]["ratio_to_first"].contains("fragmentation")) << "fractions: no ratio";
  EXPECT_EQ(j["match"], "label");
  EXPECT_EQ(j["cases"][0]["inputs"][1]["oom"]["kind"], "fragmentation");
  EXPECT_EQ(j["cases"][0]["inputs"][1]["oom_same_as_first"], false);
  EXPECT_TRUE(j["cases"][2]["inputs"][1].is_null()) << "only in h200: absent from sim";

  std::string tex = read_text(out / "compare.tex");
  // As wide as the line; the ratio header over two lines; products as $\times$.
  EXPECT_NE(tex.find("\\begin{tabularx}{\\linewidth}{@{}>{\\raggedright\\arraybackslash}Xrrr@{}}"), std::string::npos)
      << tex;
  EXPECT_NE(tex.find("Case & h200 & sim & \\begin{tabular}[b]{@{}r@{}}sim/\\\\h200\\end{tabular} \\\\"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("\\emph{Peak reserved (MiB)}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("cuda\\_malloc $\\times$ hole & 650.0 & 650.0$^\\dagger$ & 1.00 \\\\"), std::string::npos) << tex;
  EXPECT_NE(tex.find("h200: NVIDIA H200 (cuda), capacity 4.00 GiB, median of 3 runs."), std::string::npos) << tex;
  EXPECT_NE(tex.find("$^\\dagger$ modeled (simulated device), not measured."), std::string::npos) << tex;
  fs::remove_all(in.dir);
}

TEST(Compare, FormatWithoutOutputPrintsThatFormat) {
  auto in = write_inputs();
  auto r = run_gpumembench("compare " + in.a.string() + " " + in.b.string() + " --format latex");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\\toprule"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("### Peak reserved"), std::string::npos) << r.out;
  fs::remove_all(in.dir);
}

TEST(Compare, BadInputsExitTwoNamingTheFile) {
  auto in = write_inputs();
  auto missing = (in.dir / "nope" / "results.json").string();
  auto r = run_gpumembench("compare " + in.a.string() + " " + missing);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(missing + ": cannot open"), std::string::npos) << r.out;

  write_text(in.dir / "garbage.json", "{ not json");
  r = run_gpumembench("compare " + in.a.string() + " " + (in.dir / "garbage.json").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find((in.dir / "garbage.json").string() + ": not JSON"), std::string::npos) << r.out;

  write_text(in.dir / "other.json", R"({"tool": {"name": "nvidia-smi"}, "cases": []})");
  r = run_gpumembench("compare " + in.a.string() + " " + (in.dir / "other.json").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find((in.dir / "other.json").string() + ": not a gpumembench results.json"), std::string::npos)
      << r.out;

  json unrelated = sim_results();
  for (auto& c : unrelated["cases"]) c["label"] = "x " + c["label"].get<std::string>();
  write_text(in.dir / "unrelated.json", unrelated.dump());
  r = run_gpumembench("compare " + in.a.string() + " " + (in.dir / "unrelated.json").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find((in.dir / "unrelated.json").string() + ": no case in common with " + in.a.string()),
            std::string::npos) << r.out;

  r = run_gpumembench("compare " + in.a.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("at least two"), std::string::npos) << r.out;

  r = run_gpumembench("compare " + in.a.string() + " " + in.b.string() + " --format pdf");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("'pdf' is not a format (valid: md, csv, json, latex)"), std::string::npos) << r.out;
  fs::remove_all(in.dir);
}

TEST(Compare, TwoSimRunsAtDifferentCapacitiesEndToEnd) {
  // The caching allocator on 700 MiB frees its cache and retries: 650 MiB reserved instead of 850.
  auto dir = temp_dir("compare_e2e");
  write_text(dir / "holes.yaml", R"(name: holes
allocators: [cuda_malloc, caching]
workloads:
  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: 250MiB}
)");
  for (const char* cap : {"4GiB", "700MiB"}) {
    auto r = run_gpumembench("--device sim --quiet --capacity " + std::string(cap) + " --config " +
                             (dir / "holes.yaml").string() + " --output " + (dir / cap).string() + " --format json");
    ASSERT_EQ(r.status, 0) << r.out;
  }
  auto r = run_gpumembench("compare " + (dir / "4GiB").string() + " " + (dir / "700MiB").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 of 2 cases in every input"), std::string::npos) << r.out;
  EXPECT_EQ(md_row(r.out, "Peak reserved", "caching x hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]"),
            "| caching x hole_pattern[100/200/300 MiB, free #1, probe 250 MiB] | 850.0 MiB | 650.0 MiB | 0.765x |")
      << r.out;
  fs::remove_all(dir);
}

// Two workloads (the README's dynamic/ against fixed/): the labels differ, so the cases are
// paired by allocator setting, by default; --match label says why nothing pairs.
TEST(Compare, TwoWorkloadsArePairedByAllocatorEndToEnd) {
  auto dir = temp_dir("compare_workloads");
  for (const char* probe : {"250MiB", "150MiB"}) {
    write_text(dir / "holes.yaml", std::string("name: holes\nallocators: [cuda_malloc, caching]\nworkloads:\n"
                                               "  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: ") +
                                       probe + "}\n");
    auto r = run_gpumembench("--device sim --quiet --capacity 4GiB --config " + (dir / "holes.yaml").string() +
                             " --output " + (dir / probe).string() + " --format json");
    ASSERT_EQ(r.status, 0) << r.out;
  }
  const std::string a = (dir / "250MiB").string(), b = (dir / "150MiB").string();
  auto r = run_gpumembench("compare " + a + " " + b);
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("2 inputs, 2 of 2 cases in every input (cases matched by allocator setting)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("| hole_pattern[100/200/300 MiB, free #1, probe 150 MiB] |"), std::string::npos)
      << "each input's workload in the inputs table\n" << r.out;
  // 250 MiB takes a fourth segment (850 MiB reserved, 23.5% unused at that peak); 150 MiB fits
  // in the freed 200 MiB block (600 MiB reserved, all in use at that peak).
  EXPECT_EQ(md_row(r.out, "Peak reserved", "caching"), "| caching | 850.0 MiB | 600.0 MiB | 0.706x |") << r.out;
  EXPECT_EQ(md_row(r.out, "Fragmentation", "caching"), "| caching | 23.5% | 0.0% | -23.5 pp |") << r.out;
  EXPECT_EQ(md_row(r.out, "Hit rate", "caching"), "| caching | 0.0% | 25.0% | +25.0 pp |") << r.out;

  r = run_gpumembench("compare --match label " + a + " " + b);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("no case in common"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--match allocator pairs cases by allocator setting"), std::string::npos) << r.out;
  r = run_gpumembench("compare --match workload " + a + " " + b);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("allocator"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Compare, RepeatedLabelsInOneInputAreToldApartByCapacity) {
  json a = h200_results();
  a["cases"] = json::array({h200_results()["cases"][0], h200_results()["cases"][0]});
  a["cases"][0]["capacity_bytes"] = 1ull << 30;
  a["cases"][1]["capacity_bytes"] = 2ull << 30;
  gmb::CompareInput x, y;
  x.path = "a.json";
  x.name = "a";
  x.results = a;
  y = x;
  y.path = "b.json";
  y.name = "b";
  auto c = gmb::compare_results({x, y});
  ASSERT_EQ(c.rows.size(), 2u);
  EXPECT_EQ(c.rows[0].label, "caching x hole @ 1.00 GiB");
  EXPECT_EQ(c.rows[1].label, "caching x hole @ 2.00 GiB");
  EXPECT_EQ(c.common, 2u);
}

// A capacity sweep (device.capacity: a list): the header names every capacity the input ran at,
// not the first alone, in Markdown, JSON and LaTeX.
TEST(Compare, ACapacitySweepShowsEveryCapacityInTheHeader) {
  auto dir = temp_dir("compare_sweep");
  write_text(dir / "holes.yaml", R"(name: holes
device: {capacity: [4GiB, 700MiB]}
allocators: [caching]
workloads:
  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: 250MiB}
)");
  auto run = run_gpumembench("--device sim --quiet --config " + (dir / "holes.yaml").string() + " --output " +
                             (dir / "a").string() + " --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  auto r = run_gpumembench("compare " + (dir / "a").string() + " " + (dir / "a").string() + " --output " +
                           (dir / "cmp").string() + " --format md,json,latex");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| sim: simulated H200-like GPU | 4.00 GiB, 700.0 MiB | 1 | holes |"), std::string::npos)
      << r.out;
  const json j = json::parse(read_text(dir / "cmp" / "compare.json"));
  EXPECT_EQ(j["inputs"][0]["device"]["capacity_sweep_bytes"], json::array({4ull << 30, 700ull << 20}));
  EXPECT_NE(read_text(dir / "cmp" / "compare.tex").find("capacities 4.00 GiB, 700.0 MiB, median of 1 run."),
            std::string::npos);
  fs::remove_all(dir);
}
