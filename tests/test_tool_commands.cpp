// The tool around the benchmark, as a user meets it: --version, `gpumembench configs`,
// --config by a shipped config's name from any folder, and `gpumembench plot`. These run the
// build tree's binary, which finds the source tree's configs/ and scripts/plot.py
// (tests/install_check.sh checks the same from an installed tree).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <utility>
#include <vector>

#include "common/huge_page_allocator.h"
#include "devices/cuda_path.h"
#include "test_helpers.h"

namespace gmb {
namespace {

namespace fs = std::filesystem;
using testing::CommandResult;
using testing::source_path;
using testing::temp_dir;

// The binary run from `dir` with `env` set, both restored afterwards (the child inherits them).
CommandResult run_in(const fs::path& dir, const std::string& args,
                     const std::vector<std::pair<std::string, std::string>>& env = {}) {
  const fs::path cwd = fs::current_path();
  std::vector<std::pair<std::string, std::optional<std::string>>> saved;
  for (const auto& [name, value] : env) {
    const char* old = std::getenv(name.c_str());
    saved.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    setenv(name.c_str(), value.c_str(), 1);
  }
  fs::current_path(dir);
  CommandResult r = testing::run_gpumembench(args);
  fs::current_path(cwd);
  for (const auto& [name, old] : saved) old ? setenv(name.c_str(), old->c_str(), 1) : unsetenv(name.c_str());
  return r;
}

std::vector<fs::path> source_configs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(source_path("configs")))
    if (e.path().extension() == ".yaml") out.push_back(e.path());
  return out;
}

TEST(Tool, VersionSaysCommitCudaPathAndPyTorchRelease) {
  auto v = testing::run_gpumembench("--version");
  EXPECT_EQ(v.status, 0) << v.out;
  EXPECT_EQ(v.out.rfind("gpumembench 0.", 0), 0u) << v.out;
  EXPECT_NE(v.out.find("\ncommit: "), std::string::npos) << v.out;
  EXPECT_EQ(v.out.find("commit: \n"), std::string::npos) << "an empty commit: " << v.out;
  EXPECT_NE(v.out.find(cuda_path_built_in() ? "CUDA path: built in (CUDA " : "CUDA path: not built in (sim-only build"),
            std::string::npos)
      << v.out;
  EXPECT_NE(v.out.find("caching allocator: reproduces PyTorch 2.11's CUDACachingAllocator"), std::string::npos) << v.out;
  // How the replay loops were compiled, as this build was configured (GMB_PGO).
  const std::string mode = GMB_PGO_MODE;
  EXPECT_NE(v.out.find(mode == "use"        ? "replay loops: profile-guided (GMB_PGO=use"
                       : mode == "generate" ? "replay loops: instrumented (GMB_PGO=generate"
                                            : "replay loops: plain (GMB_PGO=off"),
            std::string::npos)
      << v.out;
  // The large buffers' pages, as this machine and GMB_HUGE_PAGES make them.
  EXPECT_NE(v.out.find("\nlarge buffers: " + huge_pages::choice_text() + "\n"), std::string::npos) << v.out;
#if GMB_HUGE_PAGES
  auto off = testing::run_gpumembench_with_prefix("GMB_HUGE_PAGES=off ", "--version");
  EXPECT_NE(off.out.find("\nlarge buffers: 4 KiB pages (GMB_HUGE_PAGES=off)\n"), std::string::npos) << off.out;
  auto on = testing::run_gpumembench_with_prefix("GMB_HUGE_PAGES=on ", "--version");
  EXPECT_NE(on.out.find("\nlarge buffers: 2 MiB pages (GMB_HUGE_PAGES=on)\n"), std::string::npos) << on.out;
#endif
}

TEST(Tool, ConfigsListsEveryShippedConfigWithItsFirstCommentLine) {
  auto r = testing::run_gpumembench("configs");
  EXPECT_EQ(r.status, 0) << r.out;
  const auto configs = source_configs();
  ASSERT_GE(configs.size(), 10u);
  for (const auto& path : configs) {
    std::ifstream in(path);
    std::string first;
    std::getline(in, first);
    ASSERT_EQ(first.rfind("# ", 0), 0u) << path << " does not start with a comment line";
    const std::string line = "  " + path.stem().string();
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
    EXPECT_NE(r.out.find(first.substr(2)), std::string::npos) << first << "\n" << r.out;
  }
  EXPECT_NE(r.out.find("In: " + source_path("configs")), std::string::npos) << r.out;
}

TEST(Tool, ConfigByNameRunsFromAnyFolderWithOrWithoutYaml) {
  const auto dir = temp_dir("config_by_name");
  for (const char* name_text : {"hole_pattern", "hole_pattern.yaml"}) {
    const std::string name = name_text;
    auto r = run_in(dir, "--config " + name + " --device sim --quiet --output out_" + name);
    EXPECT_EQ(r.status, 0) << name << "\n" << r.out;
    EXPECT_NE(r.out.find("hole_pattern[100/200/300 MiB"), std::string::npos) << r.out;
    EXPECT_TRUE(fs::exists(dir / ("out_" + name) / "results.json")) << name;
  }
  // A file in the working folder wins over a shipped config of the same name.
  testing::write_text(dir / "hole_pattern.yaml",
                      "name: local\nallocators: [cuda_malloc]\n"
                      "workloads:\n  - hole_pattern: {sizes: [10MiB, 20MiB, 30MiB], free: [1], probe: 25MiB}\n");
  auto local = run_in(dir, "--config hole_pattern.yaml --device sim --quiet --output local");
  EXPECT_EQ(local.status, 0) << local.out;
  EXPECT_NE(local.out.find("hole_pattern[10/20/30 MiB"), std::string::npos) << "the shipped one ran\n" << local.out;
  // The frontier takes names too.
  auto f = run_in(dir, "frontier --config fragmentation_oom --device sim --quiet --steps 2 --output fr");
  EXPECT_EQ(f.status, 0) << f.out;
  EXPECT_TRUE(fs::exists(dir / "fr" / "frontier.json"));
}

TEST(Tool, UnknownConfigNameListsTheShippedConfigsAndExitsTwo) {
  const auto dir = temp_dir("config_unknown");
  auto r = run_in(dir, "--config no_such_config --device sim --output out");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--config: 'no_such_config': no such file and no shipped config of that name"),
            std::string::npos)
      << r.out;
  for (const auto& path : source_configs()) EXPECT_NE(r.out.find(path.stem().string()), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gpumembench configs"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "out"));
  // A path is taken as a path: no lookup by name.
  auto p = run_in(dir, "--config sub/hole_pattern.yaml --device sim");
  EXPECT_EQ(p.status, 2) << p.out;
  EXPECT_NE(p.out.find("'sub/hole_pattern.yaml': no such file."), std::string::npos) << p.out;
  fs::create_directories(dir / "folder");
  auto d = run_in(dir, "--config folder --device sim");
  EXPECT_EQ(d.status, 2) << d.out;
  EXPECT_NE(d.out.find("'folder' is a folder, not a YAML config file"), std::string::npos) << d.out;
  auto fr = run_in(dir, "frontier --config no_such_config --device sim");
  EXPECT_EQ(fr.status, 2) << fr.out;
  EXPECT_NE(fr.out.find("no shipped config of that name"), std::string::npos) << fr.out;
}

TEST(Tool, PlotSaysWhenPython3OrMatplotlibIsMissing) {
  const auto dir = temp_dir("plot_missing");
  fs::create_directories(dir / "empty_path");
  auto no_python = run_in(dir, "plot results", {{"PATH", (dir / "empty_path").string()}});
  EXPECT_EQ(no_python.status, 1) << no_python.out;
  EXPECT_NE(no_python.out.find("gpumembench plot: python3 was not found on PATH; plotting needs python3 with "
                               "matplotlib (Debian: apt-get install python3-matplotlib)"),
            std::string::npos)
      << no_python.out;
  // A python3 without matplotlib: this one fails every import.
  fs::create_directories(dir / "bin");
  testing::write_text(dir / "bin" / "python3", "#!/bin/sh\nexit 1\n");
  fs::permissions(dir / "bin" / "python3", fs::perms::owner_all);
  const std::string fake = (dir / "bin" / "python3").string();
  auto no_mpl = run_in(dir, "plot results", {{"GMB_PYTHON", fake}});
  EXPECT_EQ(no_mpl.status, 1) << no_mpl.out;
  auto not_exe = run_in(dir, "plot results", {{"GMB_PYTHON", (dir / "nothing").string()}});
  EXPECT_EQ(not_exe.status, 1) << not_exe.out;
  EXPECT_NE(not_exe.out.find("GMB_PYTHON=" + (dir / "nothing").string() + " is not an executable file"),
            std::string::npos)
      << not_exe.out;
  EXPECT_NE(no_mpl.out.find("gpumembench plot: " + fake +
                            " cannot import matplotlib; install it (Debian: apt-get install python3-matplotlib"),
            std::string::npos)
      << no_mpl.out;
}

TEST(Tool, PlotWritesThePlotsOfAResultsFolder) {
  // The interpreter the plot_smoke test found (GMB_PLOT_PYTHON_FOUND), named in GMB_PYTHON.
  const std::string python = GMB_PLOT_PYTHON_FOUND;
  if (python.empty()) GTEST_SKIP() << "no python3 with matplotlib";
  const auto dir = temp_dir("plot_run");
  auto run = run_in(dir, "--config hole_pattern --device sim --quiet --output run --format json");
  ASSERT_EQ(run.status, 0) << run.out;
  auto plot = run_in(dir, "plot run --formats svg", {{"GMB_PYTHON", python}});
  EXPECT_EQ(plot.status, 0) << plot.out;
  for (const char* name : {"memory_over_time.svg", "fragmentation.svg", "throughput_vs_memory.svg"}) {
    EXPECT_TRUE(fs::exists(dir / "run" / "plots" / name)) << name << "\n" << plot.out;
    EXPECT_NE(plot.out.find(name), std::string::npos) << "the written files are listed\n" << plot.out;
  }
  auto bad = run_in(dir, "plot no_such_folder", {{"GMB_PYTHON", python}});
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("no_such_folder: not a folder"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace gmb
