// The report formats as a user reads them: exact numbers in the CSV, the bold cell and the
// notes of the LaTeX table, the runs count and the `modeled` markers in every format, the
// median and min-max spread over repeats; and the progress line (only on a terminal).
#include <gtest/gtest.h>

#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

#include <nlohmann/json.hpp>

#include "common/units.h"
#include "harness/report/csv_report.h"
#include "harness/report/json_report.h"
#include "harness/report/latex_report.h"
#include "harness/report/markdown_report.h"
#include "harness/report/report.h"
#include "harness/report/table_format.h"
#include "test_helpers.h"

using namespace gmb::testing;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string line_starting(const std::string& text, const std::string& prefix) {
  std::size_t at = text.rfind("\n" + prefix) != std::string::npos ? text.find("\n" + prefix) + 1
                   : text.compare(0, prefix.size(), prefix) == 0 ? 0
                                                                 : std::string::npos;
  if (at == std::string::npos) return "";
  return text.substr(at, text.find('\n', at) - at);
}

const std::string kHole = "hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]";
const std::string kHoleTex = "hole\\_pattern[100/200/300 MiB, free \\#1, probe 250 MiB]";

// The hole pattern (two steps) on a 4 GiB sim, 3 runs per case, every format asked in YAML.
struct SimRun {
  fs::path dir, out;
  CommandResult result;
};
SimRun run_holes(const std::string& extra_args = "", const std::string& formats = "[md, csv, json, latex]") {
  SimRun s;
  s.dir = temp_dir("reports");
  write_text(s.dir / "holes.yaml", "name: holes\ndevice: {capacity: 4GiB}\nallocators: [cuda_malloc, cuda_mempool, caching]\n"
                                   "workloads:\n  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], "
                                   "probe: 250MiB, repeat: 2}\nrun: {repeat: 3}\noutput: {formats: " + formats + "}\n");
  s.out = s.dir / "out";
  s.result = run_gpumembench("--device sim --quiet --config " + (s.dir / "holes.yaml").string() + " --output " +
                             s.out.string() + " " + extra_args);
  return s;
}

}  // namespace

TEST(Reports, CsvHoldsExactValuesRunsAndModeledFlags) {
  auto s = run_holes();
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  auto rows = parse_csv(read_text(s.out / "results.csv"));
  ASSERT_EQ(rows.size(), 3u);
  const auto& malloc_row = rows.at("cuda_malloc x " + kHole);
  // cudaMalloc never reuses: 650 MiB reserved, 8 device mallocs and frees over 2 steps.
  EXPECT_EQ(malloc_row.at("peak_reserved_bytes"), "681574400");
  EXPECT_EQ(malloc_row.at("peak_allocated_bytes"), "681574400");
  EXPECT_EQ(malloc_row.at("fragmentation"), "0.000000");
  EXPECT_EQ(malloc_row.at("device_mallocs"), "8");
  EXPECT_EQ(malloc_row.at("device_frees"), "8");
  EXPECT_EQ(malloc_row.at("repeats"), "3");
  EXPECT_EQ(malloc_row.at("memory_modeled"), "1") << "cudaMalloc's reserved bytes on sim come from a model";
  EXPECT_EQ(malloc_row.at("throughput_modeled"), "1");
  EXPECT_EQ(malloc_row.at("device_kind"), "sim");
  EXPECT_EQ(malloc_row.at("oom_kind"), "");
  const auto& caching = rows.at("caching x " + kHole);
  // PyTorch's decision: the 250 MiB request cannot use the 200 MiB hole: 850 MiB reserved.
  EXPECT_EQ(caching.at("peak_reserved_bytes"), "891289600");
  EXPECT_EQ(caching.at("fragmentation"), "0.235294");
  EXPECT_EQ(caching.at("device_mallocs"), "4");
  EXPECT_EQ(caching.at("allocs"), "8");
  EXPECT_EQ(caching.at("cache_hits"), "4");
  EXPECT_EQ(caching.at("hit_rate"), "0.500000");
  EXPECT_EQ(caching.at("memory_modeled"), "0") << "the caching allocator runs the same code on sim and cuda";
  EXPECT_EQ(caching.at("throughput_modeled"), "1");
  EXPECT_EQ(caching.at("repeats"), "3");
  EXPECT_EQ(rows.at("cuda_mempool x " + kHole).at("memory_modeled"), "1");
  fs::remove_all(s.dir);
}

TEST(Reports, LatexIsBooktabsWithUnitsBoldBestRunsAndModeledNote) {
  auto s = run_holes();
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  std::string tex = read_text(s.out / "results.tex");
  // As wide as the line; short row labels; the number columns under two header lines; no
  // steps/s for a hole pattern (its repeats are not training steps).
  EXPECT_NE(tex.find("{\\setlength{\\tabcolsep}{4pt}%\n"
                     "\\begin{tabularx}{\\linewidth}{@{}>{\\raggedright\\arraybackslash}Xrrrl@{}}\n\\toprule\n"
                     "  & \\multicolumn{2}{c}{Peak (MiB)} & Frag. & \\\\\n\\cmidrule(lr){2-3}\n"
                     "Allocator & reserved & allocated & (\\%) & First OOM \\\\\n\\midrule\n"),
            std::string::npos) << tex;
  // cudaMalloc's reserved bytes are modeled on sim, the caching allocator's computed: not ranked
  // against each other, and with one computed figure alone there is no bold in those columns.
  std::string malloc_row = line_starting(tex, "cuda\\_malloc & ");
  EXPECT_EQ(malloc_row.substr(0, malloc_row.find(" & ", malloc_row.find("& 0.0$") + 1)),
            "cuda\\_malloc & 650.0$^{\\dagger}$ & 650.0 & 0.0$^{\\dagger}$") << tex;
  std::string caching_row = line_starting(tex, "caching & ");
  EXPECT_EQ(caching_row, "caching & 850.0 & 650.0 & 23.5 & none \\\\") << "computed, not modeled\n" << tex;
  EXPECT_EQ(tex.find("x hole"), std::string::npos) << "the workload is said once, under the table\n" << tex;
  EXPECT_NE(tex.find("\\bottomrule\n\\end{tabularx}}\n\\par\\smallskip\n{\\footnotesize\\raggedright\n"
                     "Workload: hole\\_pattern[\\allowbreak{}100/\\allowbreak{}200/\\allowbreak{}300 MiB,\\allowbreak{} "
                     "free \\#1,\\allowbreak{} probe 250 MiB].\n"
                     "Device: simulated H200-like GPU (sim); capacity 4.00 GiB; 3 runs per case.\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("\n$^\\dagger$ modeled (simulated device), not measured.\n"), std::string::npos) << tex;
  EXPECT_NE(tex.find("Bold: the best per column among cases without an OOM; modeled figures are not ranked against "
                     "computed or measured ones."),
            std::string::npos) << tex;
  EXPECT_EQ(tex.find("% $^\\dagger$"), std::string::npos) << "the modeled note must print, not hide in a comment";
  fs::remove_all(s.dir);
}

TEST(Reports, MarkdownOnStdoutAndJsonSayRunsAndModeled) {
  auto s = run_holes();
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  EXPECT_NE(s.result.out.find("holes on simulated H200-like GPU (sim, capacity 4.00 GiB), 3 run(s) per case"),
            std::string::npos) << s.result.out;
  EXPECT_NE(s.result.out.find("\n### " + kHole + " @ 4.00 GiB\n"), std::string::npos) << s.result.out;
  std::string row = line_starting(s.result.out, "| caching |");
  EXPECT_EQ(row.substr(0, row.find(" | 4 | ")), "| caching | 850.0 MiB | 650.0 MiB | 23.5%") << s.result.out;
  row = line_starting(s.result.out, "| cuda_malloc |");
  EXPECT_EQ(row.substr(0, row.find(" | 8 | ")), "| cuda_malloc | 650.0 MiB (modeled) | 650.0 MiB | 0.0% (modeled)")
      << s.result.out;
  EXPECT_NE(s.result.out.find("(modeled): figure from the simulated device"), std::string::npos);
  EXPECT_EQ(read_text(s.out / "results.md"), s.result.out) << "stdout shows the same Markdown as results.md";

  auto j = json::parse(read_text(s.out / "results.json"));
  EXPECT_EQ(j["run"]["repeat"], 3);
  for (const auto& c : j["cases"]) {
    EXPECT_EQ(c["repeats"], 3);
    EXPECT_TRUE(c["throughput"]["modeled"].get<bool>());
    EXPECT_EQ(c["memory_modeled"].get<bool>(), c["allocator"] != "caching");
    EXPECT_DOUBLE_EQ(c["spread"]["fragmentation"]["min"].get<double>(), c["fragmentation"].get<double>());
  }
  fs::remove_all(s.dir);
}

TEST(Reports, FormatsFromYamlOrTheCommandLine) {
  auto s = run_holes("", "[latex]");
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  EXPECT_TRUE(fs::exists(s.out / "results.tex"));
  EXPECT_FALSE(fs::exists(s.out / "results.csv"));
  EXPECT_FALSE(fs::exists(s.out / "results.json"));
  EXPECT_FALSE(fs::exists(s.out / "results.md"));
  EXPECT_NE(s.result.out.find("| allocator | peak reserved |"), std::string::npos) << "the table still goes to stdout";
  fs::remove_all(s.dir);

  s = run_holes("--format csv,tex", "[latex]");  // the command line wins over the config
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  EXPECT_TRUE(fs::exists(s.out / "results.csv"));
  EXPECT_TRUE(fs::exists(s.out / "results.tex"));
  EXPECT_FALSE(fs::exists(s.out / "results.json"));
  fs::remove_all(s.dir);

  s = run_holes("", "[md, pdf]");
  EXPECT_EQ(s.result.status, 2) << s.result.out;
  EXPECT_NE(s.result.out.find("holes.yaml:"), std::string::npos) << s.result.out;
  EXPECT_NE(s.result.out.find("output.formats[1]"), std::string::npos) << s.result.out;
  EXPECT_NE(s.result.out.find("md, csv, json, latex"), std::string::npos) << s.result.out;
  fs::remove_all(s.dir);
}

namespace {

gmb::RunMetrics run(double reserved_gib, double allocated_gib, double steps_per_s) {
  gmb::RunMetrics m;
  m.peak_reserved_bytes = static_cast<gmb::Bytes>(reserved_gib * double(gmb::GiB));
  m.peak_allocated_bytes = static_cast<gmb::Bytes>(allocated_gib * double(gmb::GiB));
  m.fragmentation = 1.0 - allocated_gib / reserved_gib;
  m.steps_per_s = steps_per_s;
  m.tokens_per_s = 100 * steps_per_s;
  m.steps_completed = 10;
  return m;
}

// A report of a run on a 16 GiB H200 (measured figures: nothing "modeled").
gmb::RunReport h200_report(const std::string& config_name) {
  gmb::RunReport r;
  r.tool_version = "0.1.0";
  r.config_name = config_name;
  r.device.kind = gmb::DeviceKind::Cuda;
  r.device.name = "NVIDIA H200";
  r.device.capacity_bytes = 16 * gmb::GiB;
  return r;
}

// Measured figures (cuda) with runs that differ, an OOM, an error and a label full of
// characters LaTeX and Markdown treat specially.
gmb::RunReport synthetic_report() {
  gmb::RunReport r = h200_report("synthetic");
  r.repeat = 3;
  gmb::CaseResult a;
  a.label = "caching[expandable_segments:True] w_1 & 50% #1 {a} ~ ^ \\ $ | b x w";
  a.allocator_label = "caching[expandable_segments:True] w_1 & 50% #1 {a} ~ ^ \\ $ | b";
  a.allocator = "caching";
  a.runs = {run(12, 9, 10), run(11, 9, 12), run(13, 9, 11)};
  gmb::CaseResult b;  // least memory, but it stopped at an OOM: not the best
  b.label = "cuda_malloc x w";
  b.allocator = b.allocator_label = "cuda_malloc";
  b.runs = {run(9, 9, 5), run(9, 9, 5), run(9, 9, 5)};
  for (auto& m : b.runs) {
    m.ooms = 1;
    m.first_oom = gmb::OomRecord{};
    m.first_oom->step = 3;
    m.first_oom->kind = gmb::OomKind::Capacity;
  }
  gmb::CaseResult c;
  c.label = "cuda_managed x w";
  c.allocator = c.allocator_label = "cuda_managed";
  c.runs = {run(14, 9, 20), run(14, 9, 20), run(14, 9, 20)};
  gmb::CaseResult d;
  d.label = "cuda_mempool x w";
  d.allocator = d.allocator_label = "cuda_mempool";
  d.error = "cudaMalloc failed: out of memory";
  r.cases = {a, b, c, d};
  for (auto& x : r.cases) {
    x.workload = "transformer";  // steps and tokens to count
    x.workload_label = "w";
    x.capacity_bytes = x.capacity_requested_bytes = 16 * gmb::GiB;
  }
  return r;
}

}  // namespace

TEST(Reports, LatexShowsMedianSpreadAndBoldsOnlyCasesWithoutOom) {
  std::string tex = gmb::latex_table(synthetic_report());
  EXPECT_NE(tex.find("\\multicolumn{2}{c}{Peak (GiB)}"), std::string::npos) << "10 GiB and more: GiB columns\n" << tex;
  // A transformer counts steps and tokens: a column each.
  EXPECT_NE(tex.find("Xrrrrr>{\\raggedright\\arraybackslash}p{6.5em}@{}}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("& Frag. & Steps & Tokens & \\\\"), std::string::npos) << tex;
  const std::string a = "caching[\\allowbreak{}expandable\\_\\allowbreak{}segments:\\allowbreak{}True] w\\_1 \\& 50\\% "
                        "\\#1 \\{a\\} \\textasciitilde{} \\textasciicircum{} \\textbackslash{} \\$ \\textbar{} b";
  // The run with the median reserved (12 GiB) stands for the case; [min--max] under it.
  EXPECT_NE(tex.find(a + " & \\begin{tabular}[t]{@{}r@{}}\\textbf{12.00}\\\\{\\scriptsize[11.00--13.00]}\\end{tabular} "
                         "& 9.00 & \\begin{tabular}[t]{@{}r@{}}\\textbf{25.0}\\\\{\\scriptsize[18.2--30.8]}\\end{tabular} "
                         "& \\begin{tabular}[t]{@{}r@{}}11.00\\\\{\\scriptsize[10.00--12.00]}\\end{tabular} "
                         "& \\begin{tabular}[t]{@{}r@{}}1100\\\\{\\scriptsize[1000--1200]}\\end{tabular} & none \\\\\n"),
            std::string::npos) << tex;
  // One format per column: 5.00 beside 20.00 and 11.00; the OOM case's rates marked, never bold.
  EXPECT_NE(tex.find("\ncuda\\_malloc & 9.00 & 9.00 & 0.0 & 5.00$^{\\ddagger}$ & 500$^{\\ddagger}$ & capacity, step 3 \\\\\n"),
            std::string::npos) << "an OOM case is never bold, though it reserved least\n" << tex;
  EXPECT_NE(tex.find("\ncuda\\_managed & 14.00 & 9.00 & 35.7 & \\textbf{20.00} & \\textbf{2000} & none \\\\\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("\ncuda\\_mempool & -- & -- & -- & -- & -- & error: cudaMalloc failed: out of memory \\\\\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("p{6.5em}@{}}"), std::string::npos) << "the OOM column wraps where there are OOMs\n" << tex;
  EXPECT_NE(tex.find("Device: NVIDIA H200 (cuda); capacity 16.00 GiB; 3 runs per case."), std::string::npos) << tex;
  EXPECT_NE(tex.find("[min--max] where runs differ"), std::string::npos) << tex;
  EXPECT_NE(tex.find("$^\\ddagger$ rate of the steps run by a case with an OOM; not comparable."), std::string::npos) << tex;
  EXPECT_EQ(tex.find("{\\dagger"), std::string::npos) << "nothing is modeled on cuda\n" << tex;
  EXPECT_EQ(tex.find("$^\\dagger$"), std::string::npos) << "nothing is modeled on cuda\n" << tex;
  EXPECT_EQ(tex.find("not ranked"), std::string::npos) << tex;

  // A trace counts neither training steps nor tokens: no rate column at all.
  auto r = synthetic_report();
  for (auto& c : r.cases) c.workload = "trace";
  tex = gmb::latex_table(r);
  EXPECT_NE(tex.find("Xrrr>{\\raggedright\\arraybackslash}p{6.5em}@{}}"), std::string::npos) << tex;
  EXPECT_NE(tex.find("Allocator & reserved & allocated & (\\%) & First OOM \\\\"), std::string::npos) << tex;
  EXPECT_NE(tex.find("\ncuda\\_malloc & 9.00 & 9.00 & 0.0 & capacity, step 3 \\\\\n"), std::string::npos) << tex;
  EXPECT_EQ(tex.find("ddagger"), std::string::npos) << "no rate, nothing to mark\n" << tex;
}

// With a baseline, each figure that has one shows the case against it on a small line below
// (a column of its own would not fit the page).
TEST(Reports, LatexShowsTheBaselineUnderTheFigures) {
  auto r = synthetic_report();
  r.baseline = "cuda_managed";
  const std::string tex = gmb::latex_table(r);
  EXPECT_NE(tex.find("\ncuda\\_managed & \\begin{tabular}[t]{@{}r@{}}14.00\\\\{\\scriptsize base}\\end{tabular} & 9.00 & "
                     "35.7 & \\begin{tabular}[t]{@{}r@{}}\\textbf{20.00}\\\\{\\scriptsize base}\\end{tabular} & "
                     "\\textbf{2000} & none \\\\\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("\ncuda\\_malloc & \\begin{tabular}[t]{@{}r@{}}9.00\\\\{\\scriptsize $\\times$0.64}\\end{tabular} & "
                     "9.00 & 0.0 & \\begin{tabular}[t]{@{}r@{}}5.00$^{\\ddagger}$\\\\{\\scriptsize -75\\%$^{\\ddagger}$}"
                     "\\end{tabular} & 500$^{\\ddagger}$ & capacity, step 3 \\\\\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("Under a figure: the case against cuda\\_managed on the same workload and capacity, peak reserved "
                     "as a ratio ($\\times$), rates as a change (\\%)."),
            std::string::npos) << tex;
}

// A capacity sweep: one group per capacity under a heading that names it (it was a capacity
// column before the tables grouped by workload and capacity); bold within each group.
TEST(Reports, LatexCapacitySweepGroupsByCapacityAndRanksWithinEachCapacity) {
  auto r = synthetic_report();
  r.cases.pop_back();  // no error row
  auto at_8 = r.cases;
  for (auto& c : r.cases) c.capacity_bytes = c.capacity_requested_bytes = 16 * gmb::GiB;
  for (auto& c : at_8) c.capacity_bytes = c.capacity_requested_bytes = 8 * gmb::GiB;
  at_8[1].runs = {run(3, 2, 50)};  // the fastest, at another capacity: bold there only
  at_8[2].runs = {run(4, 2, 40)};
  at_8[0].runs = {run(5, 2, 30)};
  r.cases.insert(r.cases.end(), at_8.begin(), at_8.end());
  std::string tex = gmb::latex_table(r);
  EXPECT_NE(tex.find("\\toprule\n  & \\multicolumn{2}{c}{Peak (GiB)} & Frag. & Steps & Tokens & \\\\\n"), std::string::npos)
      << tex;
  const std::string heading = "\\midrule\n\\multicolumn{7}{@{}>{\\raggedright\\arraybackslash}p{\\linewidth}@{}}{\\emph{w @ ";
  const std::size_t at16 = tex.find(heading + "16.00 GiB}} \\\\\n"), at8 = tex.find(heading + "8.00 GiB}} \\\\\n");
  ASSERT_NE(at16, std::string::npos) << tex;
  ASSERT_NE(at8, std::string::npos) << tex;
  EXPECT_NE(tex.find("\ncuda\\_managed & 14.00 & 9.00 & 35.7 & \\textbf{20.00} & \\textbf{2000} & none"), std::string::npos)
      << tex;
  EXPECT_GT(tex.find("\ncuda\\_malloc & \\textbf{3.00} & 2.00 & \\textbf{33.3} & \\textbf{50.00} & \\textbf{5000} & none"),
            at8) << tex;
  EXPECT_NE(tex.find("\ncuda\\_managed & 4.00 & 2.00 & 50.0 & 40.00 & 4000 & none"), std::string::npos) << tex;
  // The footer names no single capacity: the headings do.
  EXPECT_NE(tex.find("Device: NVIDIA H200 (cuda); capacity in each group's heading; runs per case differ."),
            std::string::npos) << tex;
  EXPECT_EQ(tex.find("; capacity 16.00 GiB"), std::string::npos) << tex;
  EXPECT_NE(tex.find("Bold: the best per column, workload and capacity among cases without an OOM."), std::string::npos)
      << tex;
}

TEST(Reports, LatexGroupsRowsByWorkloadWhenWorkloadsDiffer) {
  auto r = synthetic_report();
  r.cases.pop_back();
  r.cases[2].workload_label = "trace[run.csv]";
  r.cases[2].allocator_label = "pad x64 test";
  std::string tex = gmb::latex_table(r);
  EXPECT_NE(tex.find("\\midrule\n\\multicolumn{7}{@{}>{\\raggedright\\arraybackslash}p{\\linewidth}@{}}"
                     "{\\emph{w @ 16.00 GiB}} \\\\\n"),
            std::string::npos) << tex;
  EXPECT_NE(tex.find("\\midrule\n\\multicolumn{7}{@{}>{\\raggedright\\arraybackslash}p{\\linewidth}@{}}"
                     "{\\emph{trace[\\allowbreak{}run.csv] @ 16.00 GiB}} \\\\\npad $\\times$64 test & "),
            std::string::npos) << "products as $\\times$\n" << tex;
  EXPECT_EQ(tex.find("Workload:"), std::string::npos) << tex;
}

TEST(Reports, MarkdownAndCsvShowTheMedianRunAndTheSpread) {
  auto r = synthetic_report();
  std::string md = gmb::markdown_table(r);
  // The row is named by the allocator's label; the workload is the section's heading.
  EXPECT_NE(md.find("\n### w @ 16.00 GiB\n"), std::string::npos) << md;
  std::string row = line_starting(md, "| caching[expandable_segments:True]");
  EXPECT_EQ(row.substr(0, row.find(" | 0 | ")),
            "| caching[expandable_segments:True] w_1 & 50% #1 {a} ~ ^ \\ $ \\| b | 12.00 GiB [11.00 GiB–13.00 GiB] | "
            "9.00 GiB | 25.0% [18.2%–30.8%]")
      << md;
  EXPECT_NE(row.find(" | 11.00 [10.00–12.00] | 1100 [1000–1200] | 0 | 0.00% | none |"), std::string::npos) << row;
  // One format per column (5.00 beside 20.00), the OOM case's rates marked.
  EXPECT_NE(md.find("\n| cuda_malloc | 9.00 GiB | 9.00 GiB | 0.0% | 0 | 0 | 0.0% | 5.00 (OOM) | 500 (OOM) | 0 (OOM) | "
                    "0.00% | capacity at step 3"),
            std::string::npos) << md;
  EXPECT_NE(md.find("\n| cuda_managed | 14.00 GiB | 9.00 GiB | 35.7% | 0 | 0 | 0.0% | 20.00 | 2000 | 0 | 0.00% | none |"),
            std::string::npos) << md;
  EXPECT_NE(md.find("(OOM): the rate of the steps run by a case with an OOM"), std::string::npos) << md;
  // A case that could not run: the error where its first figure would be, the row as wide as the others.
  EXPECT_NE(md.find("\n| cuda_mempool | error: cudaMalloc failed: out of memory | | | | | | | | | | |\n"), std::string::npos)
      << md;
  EXPECT_EQ(md.find("harness overhead"), std::string::npos) << "no figure in any row: no column\n" << md;
  EXPECT_NE(md.find("[min–max] where the runs differ"), std::string::npos) << md;

  auto rows = parse_csv(gmb::csv_table(r));
  const auto& a = rows.at(r.cases[0].label);
  EXPECT_EQ(a.at("peak_reserved_bytes"), std::to_string(12 * gmb::GiB));
  EXPECT_EQ(a.at("fragmentation"), "0.250000");
  EXPECT_EQ(a.at("steps_per_s"), "11");
  EXPECT_EQ(a.at("steps_per_s_min"), "10");
  EXPECT_EQ(a.at("steps_per_s_max"), "12");
  EXPECT_EQ(a.at("repeats"), "3");
  EXPECT_EQ(a.at("throughput_modeled"), "0");
  EXPECT_EQ(a.at("peak_reserved_bytes_min"), std::to_string(11 * gmb::GiB));
  EXPECT_EQ(a.at("peak_reserved_bytes_max"), std::to_string(13 * gmb::GiB));
  EXPECT_EQ(a.at("fragmentation_min"), "0.181818");
  EXPECT_EQ(a.at("fragmentation_max"), "0.307692");
  EXPECT_EQ(a.at("error"), "");
  EXPECT_EQ(rows.at("cuda_malloc x w").at("oom_kind"), "capacity");
  // The case that could not run keeps its row (parse_csv checks its width), with the error.
  const auto& d = rows.at("cuda_mempool x w");
  EXPECT_EQ(d.at("error"), "cudaMalloc failed: out of memory");
  EXPECT_EQ(d.at("allocator"), "cuda_mempool");
  EXPECT_EQ(d.at("peak_reserved_bytes"), "");

  auto j = gmb::to_json(r);
  EXPECT_EQ(j["cases"][0]["peak_reserved_bytes"], 12 * gmb::GiB);
  EXPECT_DOUBLE_EQ(j["cases"][0]["spread"]["peak_reserved_bytes"]["min"].get<double>(), 11.0 * double(gmb::GiB));
  EXPECT_DOUBLE_EQ(j["cases"][0]["spread"]["steps_per_s"]["median"].get<double>(), 11.0);
  EXPECT_NEAR(j["cases"][0]["spread"]["fragmentation"]["max"].get<double>(), 1 - 9.0 / 13.0, 1e-12);
}

namespace {

// Two workloads on an H200 (measured, so no "(modeled)"), three allocators each, caching the
// baseline: a hole pattern (no steps or tokens to count) and a transformer (steps/s, tokens/s),
// one case with an OOM.
gmb::RunReport two_workload_report() {
  gmb::RunReport r = h200_report("two");
  r.baseline = "caching";
  auto add = [&](const std::string& workload, const std::string& workload_label, const std::string& allocator,
                 const std::string& label, gmb::RunMetrics m) {
    gmb::CaseResult c;
    c.workload = workload;
    c.workload_label = workload_label;
    c.allocator = allocator;
    c.allocator_label = label;
    c.label = label + " x " + workload_label;
    c.capacity_bytes = c.capacity_requested_bytes = 16 * gmb::GiB;
    m.seconds = 10;
    m.alloc_seconds = 0.5;
    m.harness_seconds = 0.1;
    c.runs = {m};
    r.cases.push_back(c);
  };
  auto mib = [](double reserved, double allocated, std::uint64_t mallocs, std::uint64_t frees) {
    gmb::RunMetrics m;
    m.peak_reserved_bytes = static_cast<gmb::Bytes>(reserved * double(gmb::MiB));
    m.peak_allocated_bytes = static_cast<gmb::Bytes>(allocated * double(gmb::MiB));
    m.fragmentation = 1.0 - allocated / reserved;
    m.device_allocs = mallocs;
    m.device_frees = frees;
    m.allocs = 8;
    m.cache_hits = 8 - mallocs;
    return m;
  };
  const std::string hole = "hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]";
  add("hole_pattern", hole, "caching", "caching", mib(850, 650, 4, 0));
  add("hole_pattern", hole, "caching", "expandable", mib(860, 650, 4, 0));
  add("hole_pattern", hole, "cuda_malloc", "cuda_malloc", mib(650, 650, 8, 8));
  const std::string tf = "transformer[L2 h256 a4 b4 bf16, fixed 256]";
  auto train = [&](double reserved_gib, double steps_per_s) {
    gmb::RunMetrics m = mib(reserved_gib * 1024, 9 * 1024, 4, 0);
    m.steps_per_s = steps_per_s;
    m.tokens_per_s = steps_per_s * 1024;
    m.padded_tokens_per_s = steps_per_s * 1024;
    return m;
  };
  add("transformer", tf, "caching", "caching", train(12, 10));
  add("transformer", tf, "caching", "expandable", train(11, 11.2));
  gmb::RunMetrics oom = train(9.5, 4);
  oom.ooms = 1;
  oom.capacity_ooms = 1;
  oom.first_oom = gmb::OomRecord{};
  oom.first_oom->step = 3;
  oom.first_oom->event = 41;
  oom.first_oom->requested_bytes = 2 * gmb::GiB;
  oom.first_oom->allocated_bytes = 9 * gmb::GiB;
  oom.first_oom->reserved_bytes = 9 * gmb::GiB + 512 * gmb::MiB;
  oom.first_oom->cached_bytes = 512 * gmb::MiB;
  oom.first_oom->largest_free_block = 256 * gmb::MiB;
  oom.first_oom->capacity_bytes = 16 * gmb::GiB;
  oom.first_oom->need_from_here_bytes = 18 * gmb::GiB;
  oom.first_oom->kind = gmb::OomKind::Capacity;
  add("transformer", tf, "cuda_malloc", "cuda_malloc", oom);
  return r;
}

}  // namespace

// What a reader sees: one section per workload and capacity, the workload named once in its
// heading with the capacity; only the columns that mean something for the workload (no steps/s
// or tokens/s for the hole pattern); each case against the baseline.
TEST(Reports, MarkdownGroupsByWorkloadShowsTheRelevantColumnsAndTheBaseline) {
  const std::string md = gmb::markdown_table(two_workload_report());
  EXPECT_EQ(md,
            "two on NVIDIA H200 (cuda, capacity 16.00 GiB), 1 run(s) per case\n"
            "\n"
            "### hole_pattern[100/200/300 MiB, free #1, probe 250 MiB] @ 16.00 GiB\n"
            "\n"
            "| allocator | peak reserved | vs caching | peak allocated | fragmentation | device mallocs | device frees | "
            "hit rate | in allocator calls | harness overhead | OOM |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
            "| caching | 850.0 MiB | baseline | 650.0 MiB | 23.5% | 4 | 0 | 50.0% | 5.00% | 1.00% | none |\n"
            "| expandable | 860.0 MiB | x1.01 | 650.0 MiB | 24.4% | 4 | 0 | 50.0% | 5.00% | 1.00% | none |\n"
            "| cuda_malloc | 650.0 MiB | x0.76 | 650.0 MiB | 0.0% | 8 | 8 | 0.0% | 5.00% | 1.00% | none |\n"
            "\n"
            "### transformer[L2 h256 a4 b4 bf16, fixed 256] @ 16.00 GiB\n"
            "\n"
            "| allocator | peak reserved | vs caching | peak allocated | fragmentation | device mallocs | device frees | "
            "hit rate | steps/s | vs caching | tokens/s real | tokens/s padded | in allocator calls | harness overhead | "
            "OOM |\n"
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n"
            "| caching | 12.00 GiB | baseline | 9.00 GiB | 25.0% | 4 | 0 | 50.0% | 10.00 | baseline | 10240 | 10240 | "
            "5.00% | 1.00% | none |\n"
            "| expandable | 11.00 GiB | x0.92 | 9.00 GiB | 18.2% | 4 | 0 | 50.0% | 11.20 | +12% | 11469 | 11469 | "
            "5.00% | 1.00% | none |\n"
            "| cuda_malloc | 9.50 GiB | x0.79 | 9.00 GiB | 5.3% | 4 | 0 | 50.0% | 4.00 (OOM) | -60% (OOM) | 4096 (OOM) | "
            "4096 (OOM) | 5.00% | 1.00% | capacity at step 3 (event 41, 2.00 GiB) |\n"
            "\n"
            "| first OOM | kind | what would fix it | step | event | request | allocated | reserved | cached | largest "
            "free block | fragmentation at the OOM | capacity left | retried | OOMs: fragmentation / capacity | block map |\n"
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|\n"
            "| cuda_malloc | capacity | needs at least 18.00 GiB (short by 2.00 GiB) | 3 | 41 | 2.00 GiB | 9.00 GiB | "
            "9.50 GiB | 512.0 MiB | 256.0 MiB | 5.3% | 16.00 GiB | no | 0 / 1 |  |\n"
            "\n"
            "vs caching: each case against caching on the same workload and capacity; peak reserved as a ratio (x0.90: "
            "10% less); steps/s as a change (+12%: 12% faster).\n"
            "(OOM): the rate of the steps run by a case with an OOM (stopped or skipping steps); not comparable.\n");
}

// Without a baseline the same tables have no "vs" columns and no note about them.
TEST(Reports, MarkdownWithoutABaselineHasNoRelativeColumns) {
  auto r = two_workload_report();
  r.baseline.clear();
  const std::string md = gmb::markdown_table(r);
  EXPECT_EQ(md.find("vs "), std::string::npos) << md;
  EXPECT_NE(md.find("| caching | 850.0 MiB | 650.0 MiB | 23.5% |"), std::string::npos) << md;
  // A baseline that ran on no case of a group: that group has none.
  r = two_workload_report();
  r.cases.erase(r.cases.begin(), r.cases.begin() + 2);  // the hole pattern's caching settings
  const std::string partial = gmb::markdown_table(r);
  EXPECT_NE(partial.find("| allocator | peak reserved | peak allocated |"), std::string::npos) << partial;
  EXPECT_NE(partial.find("| allocator | peak reserved | vs caching | peak allocated |"), std::string::npos) << partial;
}

// The CSV keeps one row per case and the full, stable set of columns, whatever the workloads:
// scripts read columns by name (units in the names) or by position.
TEST(Reports, CsvHeaderIsTheStableColumnSetWithUnits) {
  const std::string csv = gmb::csv_table(two_workload_report());
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "label,workload,allocator,device_kind,device_name,capacity_bytes,peak_reserved_bytes,peak_allocated_bytes,"
            "fragmentation,device_mallocs,device_frees,allocs,cache_hits,hit_rate,steps_per_s,steps_per_s_min,"
            "steps_per_s_max,tokens_per_s,repeats,throughput_modeled,memory_modeled,oom_kind,oom_step,oom_event,"
            "oom_requested_bytes,ooms,padded_tokens_per_s,alloc_time_share,harness_overhead_share,"
            "peak_reserved_bytes_min,peak_reserved_bytes_max,fragmentation_min,fragmentation_max,tokens_per_s_min,"
            "tokens_per_s_max,error,oom_allocated_bytes,oom_reserved_bytes,oom_cached_bytes,"
            "oom_largest_free_block_bytes,oom_capacity_bytes,oom_retried,fragmentation_ooms,capacity_ooms,"
            "capacity_requested_bytes,ballast_bytes,need_peak_requested_bytes,need_peak_rounded_bytes,need_peak_step,"
            "need_peak_event,allocated_at_peak_reserved_bytes,fragmentation_at_first_oom,oom_need_from_here_bytes,"
            "oom_what_would_fix_it,oom_message,workload_label,allocator_label,fragmentation_gmlake,utilization_stalloc,"
            "waste_stalloc_bytes,fragmentation_tf_at_peak,fragmentation_tf_at_first_oom,internal_free_bytes,"
            "external_free_bytes");
  auto rows = parse_csv(csv);
  ASSERT_EQ(rows.size(), 6u);
  const auto& hole = rows.at("caching x hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]");
  EXPECT_EQ(hole.at("steps_per_s"), "0") << "the CSV keeps every column, also where the tables leave it out";
  EXPECT_EQ(hole.at("alloc_time_share"), "0.050000");
  EXPECT_EQ(hole.at("workload_label"), "hole_pattern[100/200/300 MiB, free #1, probe 250 MiB]");
  EXPECT_EQ(hole.at("allocator_label"), "caching");
  const auto& oom = rows.at("cuda_malloc x transformer[L2 h256 a4 b4 bf16, fixed 256]");
  EXPECT_EQ(oom.at("steps_per_s"), "4");
  EXPECT_EQ(oom.at("oom_kind"), "capacity");
  EXPECT_EQ(oom.at("oom_requested_bytes"), std::to_string(2 * gmb::GiB));
}

// A run with --baseline: the baseline is checked before anything runs, and results.json says it.
TEST(Reports, BaselineFlagAndConfigKey) {
  auto s = run_holes("--baseline caching", "[md, json]");
  ASSERT_EQ(s.result.status, 0) << s.result.out;
  EXPECT_NE(s.result.out.find("### " + kHole + " @ 4.00 GiB\n"), std::string::npos) << s.result.out;
  EXPECT_NE(s.result.out.find("| allocator | peak reserved | vs caching | peak allocated |"), std::string::npos)
      << s.result.out;
  EXPECT_NE(s.result.out.find("| cuda_malloc | 650.0 MiB (modeled) | x0.76 | 650.0 MiB |"), std::string::npos)
      << s.result.out;
  EXPECT_EQ(json::parse(read_text(s.out / "results.json"))["baseline"], "caching");
  fs::remove_all(s.dir);

  s = run_holes("--baseline nosuch", "[md]");
  EXPECT_EQ(s.result.status, 2) << s.result.out;
  EXPECT_NE(s.result.out.find("--baseline: 'nosuch' is not an allocator of"), std::string::npos) << s.result.out;
  EXPECT_NE(s.result.out.find("(valid: cuda_malloc, cuda_mempool, caching)"), std::string::npos) << s.result.out;
  EXPECT_FALSE(fs::exists(s.out)) << "nothing runs, nothing is written";
  fs::remove_all(s.dir);

  // The config key: output.baseline, checked with the file's line and the valid choices.
  auto dir = temp_dir("baseline_key");
  write_text(dir / "b.yaml", "allocators: [cuda_malloc, caching]\nworkloads: [hole_pattern]\n"
                             "output: {baseline: cuda_mallok}\n");
  auto r = run_gpumembench("--device sim --quiet --config " + (dir / "b.yaml").string() + " --output " +
                           (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("b.yaml:3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("output.baseline"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuda_malloc, caching"), std::string::npos) << r.out;
  write_text(dir / "b.yaml", "allocators: [cuda_malloc, caching]\nworkloads: [hole_pattern]\n"
                             "output: {baseline: cuda_malloc}\n");
  r = run_gpumembench("--device sim --quiet --config " + (dir / "b.yaml").string() + " --output " +
                      (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("| allocator | peak reserved | vs cuda_malloc |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| caching | 850.0 MiB | x1.31 |"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Reports, NumbersAndEscapes) {
  EXPECT_EQ(gmb::format_number(185185.2), "185185");
  EXPECT_EQ(gmb::format_number(643.843), "643.8");
  EXPECT_EQ(gmb::format_number(9.99996), "10.00");
  EXPECT_EQ(gmb::format_number(0.5, 3), "0.500");
  EXPECT_EQ(gmb::format_number(0), "0");
  EXPECT_EQ(gmb::format_number(0.000123), "0.000123");
  EXPECT_EQ(gmb::latex_escape("a_b 10% x–y"), "a\\_b 10\\% x--y");
  // One format per column: decimals for four significant digits of the largest value, two of the smallest.
  const gmb::NumberColumn steps = gmb::number_column({35.30, 4.577, 14.16});
  EXPECT_EQ(steps(35.3), "35.30");
  EXPECT_EQ(steps(4.577), "4.58");
  EXPECT_EQ(gmb::number_column({34124, 4570})(4570), "4570");
  EXPECT_EQ(gmb::number_column({22850.3, 6015})(22850.3), "22850") << "never an exponent";
  EXPECT_EQ(gmb::number_column({599, 60})(599), "599.0");
  EXPECT_EQ(gmb::number_column({599, 60})(60), "60.0") << "the same decimals for every value of the column";
  EXPECT_EQ(gmb::number_column({185185, 0.5})(0.5), "0.50");
  EXPECT_EQ(gmb::number_column({9.99996})(9.99996), "10.00");
  EXPECT_EQ(gmb::number_column({0, 0})(0), "0");
  EXPECT_EQ(gmb::latex_label("cuda_malloc x caching[expandable_segments:True], pad x64"),
            "cuda\\_malloc $\\times$ caching[\\allowbreak{}expandable\\_\\allowbreak{}segments:\\allowbreak{}True],"
            "\\allowbreak{} pad $\\times$64");
  EXPECT_EQ(gmb::markdown_escape("a|b\nc"), "a\\|b c");
  EXPECT_EQ(gmb::csv_quote("say \"hi\""), "\"say \"\"hi\"\"\"");
}

namespace {

const char* kProgressConfig = R"(name: progress
allocators: [cuda_malloc, caching]
workloads:
  - hole_pattern: {sizes: [1MiB, 2MiB], free: [0], probe: 1MiB, repeat: 50}
run: {repeat: 2}
)";

// Runs gpumembench with stdout and stderr on a pseudo-terminal, as a user at a terminal sees it.
CommandResult run_on_terminal(const std::vector<std::string>& args) {
  std::vector<std::string> all = {GMB_BINARY};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  winsize ws{};
  ws.ws_col = 200;
  ws.ws_row = 50;
  int master = -1;
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  CommandResult r;
  if (pid < 0) return r;
  if (pid == 0) {
    execv(argv[0], argv.data());
    _exit(127);
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(master, buf, sizeof buf)) > 0) r.out.append(buf, static_cast<std::size_t>(n));
  close(master);
  int st = 0;
  waitpid(pid, &st, 0);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

}  // namespace

TEST(Progress, OnATerminalShowsCaseRunStepElapsedAndTimeLeft) {
  auto dir = temp_dir("progress_tty");
  write_text(dir / "p.yaml", kProgressConfig);
  auto r = run_on_terminal({"--device", "sim", "--config", (dir / "p.yaml").string(), "--output",
                            (dir / "out").string()});
  ASSERT_EQ(r.status, 0) << r.out;
  // The first step of every run is shown, and the last.
  EXPECT_NE(r.out.find("\r\033[Kcase 1/2 cuda_malloc x hole_pattern | run 1/2 | step 1/50 | "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("case 2/2 caching x hole_pattern | run 2/2 | step 50/50 | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" elapsed, ~"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("s left"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| allocator | peak reserved |"), std::string::npos) << "Markdown on the terminal";
  fs::remove_all(dir);
}

TEST(Progress, QuietOnATerminalWithQuiet) {
  auto dir = temp_dir("progress_quiet");
  write_text(dir / "p.yaml", kProgressConfig);
  auto r = run_on_terminal({"--device", "sim", "--quiet", "--config", (dir / "p.yaml").string(), "--output",
                            (dir / "out").string()});
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("case 1/2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\033[K"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| allocator | peak reserved |"), std::string::npos) << "the table still prints";
  fs::remove_all(dir);
}

TEST(Progress, SilentWhenStderrIsNotATerminal) {
  auto dir = temp_dir("progress_pipe");
  write_text(dir / "p.yaml", kProgressConfig);
  auto r = run_gpumembench("--device sim --config " + (dir / "p.yaml").string() + " --output " +
                           (dir / "out").string());  // stdout and stderr into a pipe
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(r.out.find("case 1/2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << "no carriage returns in a log";
  EXPECT_EQ(r.out.find('\033'), std::string::npos) << "no terminal escapes in a log";
  EXPECT_NE(r.out.find("| allocator | peak reserved |"), std::string::npos);
  fs::remove_all(dir);
}
