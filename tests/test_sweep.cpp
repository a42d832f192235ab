// Sweeps across processes, GPUs and nodes (issue 16): the shard a process runs (--shard, or the
// launcher's environment), a sweep run whole, in 3 shards and in 2 worker processes, joined by
// `gpumembench merge` into the same tables; the merge's refusals; a worker that dies is a failed
// case of its own, never a lost sweep.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "devices/device.h"
#include "harness/sweep/case_plan.h"
#include "harness/sweep/shard.h"
#include "test_helpers.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace gmb::testing;

namespace {

std::optional<gmb::Shard> shard_of(const std::map<std::string, std::string>& env) {
  return gmb::shard_from_environment([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

std::string shard_error(const std::map<std::string, std::string>& env) {
  try {
    shard_of(env);
  } catch (const gmb::ShardError& e) {
    return e.what();
  }
  return "(no error)";
}

// 2 workloads x 3 allocators x 2 capacities; at 1 GiB the transformer runs out of memory.
std::string write_sweep_config(const fs::path& dir) {
  const fs::path config = dir / "sweep.yaml";
  write_text(config,
             "name: sweeptest\n"
             "device: {capacity: [1GiB, 4GiB]}\n"
             "allocators: [cuda_malloc, caching, {caching: {alloc_conf: \"expandable_segments:True\"}}]\n"
             "workloads:\n"
             "  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: 250MiB, repeat: 3}\n"
             "  - transformer: {style: korthikanti, layers: 4, hidden: 1024, heads: 16, vocab: 50257, batch: 2,\n"
             "                  steps: 20, seq_len: {dist: uniform, min: 128, max: 1024}}\n"
             "run: {on_oom: stop, repeat: 1}\n"
             "output: {formats: [md, csv, json, latex]}\n");
  return config.string();
}

// Per case label: the memory figures and the first OOM, without what the host clock decides.
std::map<std::string, json> figures_by_label(const fs::path& dir) {
  std::map<std::string, json> out;
  const json results = json::parse(read_text(dir / "results.json"));
  for (const json& c : results.at("cases"))
    out[c.at("label")] = {c.at("peak_reserved_bytes"), c.at("peak_allocated_bytes"), c.at("fragmentation"),
                          c.at("ooms"),                c.at("oom"),                  c.at("device_mallocs"),
                          c.at("steps_completed")};
  return out;
}

std::string without_command_line(const std::string& tex) {
  return std::regex_replace(tex, std::regex("% command: [^\n]*\n"), "");
}

std::set<std::string> case_files(const fs::path& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::directory_iterator(dir / "cases")) out.insert(e.path().filename().string());
  return out;
}

}  // namespace

TEST(Shard, ParsesIOfN) {
  EXPECT_EQ(gmb::parse_shard("1/3").text(), "1/3");
  EXPECT_EQ(gmb::parse_shard("0/1").whole(), true);
  for (const char* bad : {"3/3", "1/0", "-1/3", "1", "a/3", "1/3/4", "", " 1/3"})
    EXPECT_THROW(gmb::parse_shard(bad), gmb::ShardError) << bad;
}

TEST(Shard, FromEachLauncherVariable) {
  EXPECT_FALSE(shard_of({}));
  auto s = shard_of({{"SLURM_ARRAY_TASK_ID", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->text(), "2/4");
  EXPECT_EQ(s->source, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT");
  // An array numbered from 1 (--array=1-4), or in steps (--array=0-6:2).
  s = shard_of({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_MIN", "1"}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
  EXPECT_EQ(s->text(), "0/4");
  s = shard_of({{"SLURM_ARRAY_TASK_ID", "4"}, {"SLURM_ARRAY_TASK_STEP", "2"}, {"SLURM_ARRAY_TASK_COUNT", "4"}});
  EXPECT_EQ(s->text(), "2/4");
  s = shard_of({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "8"}});
  EXPECT_EQ(s->text(), "3/8");
  EXPECT_EQ(s->source, "SLURM_PROCID/SLURM_NTASKS");
  s = shard_of({{"JOB_COMPLETION_INDEX", "5"}, {"GPUMEMBENCH_SHARD_COUNT", "6"}});
  EXPECT_EQ(s->text(), "5/6");
  EXPECT_EQ(s->source, "JOB_COMPLETION_INDEX/GPUMEMBENCH_SHARD_COUNT");
  // SLURM_NTASKS alone (a batch script's allocation) is no shard.
  EXPECT_FALSE(shard_of({{"SLURM_NTASKS", "8"}}));
}

TEST(Shard, ArrayBeforeTasksBeforeKubernetes) {
  const std::map<std::string, std::string> all = {
      {"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "2"}, {"SLURM_PROCID", "0"},
      {"SLURM_NTASKS", "1"},        {"JOB_COMPLETION_INDEX", "3"},   {"GPUMEMBENCH_SHARD_COUNT", "5"}};
  EXPECT_EQ(shard_of(all)->text(), "1/2");
  auto no_array = all;
  no_array.erase("SLURM_ARRAY_TASK_ID");
  no_array.erase("SLURM_ARRAY_TASK_COUNT");
  EXPECT_EQ(shard_of(no_array)->text(), "0/1");
  no_array.erase("SLURM_PROCID");
  EXPECT_EQ(shard_of(no_array)->text(), "3/5");
}

TEST(Shard, MalformedVariablesAreErrorsNamingThem) {
  EXPECT_EQ(shard_error({{"SLURM_ARRAY_TASK_ID", "x"}, {"SLURM_ARRAY_TASK_COUNT", "3"}}),
            "SLURM_ARRAY_TASK_ID=\"x\": not a whole number (0, 1, 2, ...)");
  EXPECT_EQ(shard_error({{"SLURM_ARRAY_TASK_ID", "1"}, {"SLURM_ARRAY_TASK_COUNT", "-3"}}),
            "SLURM_ARRAY_TASK_COUNT=\"-3\": not a whole number (0, 1, 2, ...)");
  EXPECT_EQ(shard_error({{"SLURM_ARRAY_TASK_ID", "1"}}),
            "SLURM_ARRAY_TASK_ID is set but not SLURM_ARRAY_TASK_COUNT: give --shard I/N");
  EXPECT_EQ(shard_error({{"SLURM_PROCID", "4"}, {"SLURM_NTASKS", "4"}}),
            "SLURM_PROCID=4, SLURM_NTASKS=4: shard index 4 is not below the shard count 4 (valid: 0 to 3)");
  EXPECT_EQ(shard_error({{"JOB_COMPLETION_INDEX", "0"}}),
            "JOB_COMPLETION_INDEX is set but not GPUMEMBENCH_SHARD_COUNT: give --shard I/N");
  EXPECT_EQ(shard_error({{"JOB_COMPLETION_INDEX", "0"}, {"GPUMEMBENCH_SHARD_COUNT", "0"}}),
            "JOB_COMPLETION_INDEX=0, GPUMEMBENCH_SHARD_COUNT=0: 0 shards (valid: 1 to 1000000)");
  EXPECT_NE(shard_error({{"SLURM_ARRAY_TASK_ID", "3"}, {"SLURM_ARRAY_TASK_MIN", "0"}, {"SLURM_ARRAY_TASK_STEP", "2"},
                         {"SLURM_ARRAY_TASK_COUNT", "4"}})
                .find("not a task of an evenly spaced array"),
            std::string::npos);
}

TEST(Shard, CommandLineSaysTheSourceAndRefusesBadValues) {
  auto dir = temp_dir("shardcli");
  const std::string config = source_path("configs/hole_pattern.yaml");
  auto r = run_gpumembench("--config " + config + " --device sim --shard 3/3 --output " + (dir / "a").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--shard 3/3: shard index 3 is not below the shard count 3 (valid: 0 to 2)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "a"));
  r = run_gpumembench_with_prefix("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=abc ",
                                  "--config " + config + " --device sim --output " + (dir / "b").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("SLURM_ARRAY_TASK_COUNT=\"abc\": not a whole number"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "b"));
  // From the environment: said, and the run is that shard's (cases 1 and 3 of 4), labelled.
  r = run_gpumembench_with_prefix("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 ",
                                  "--config " + config + " --device sim --output " + (dir / "c").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("gpumembench: shard 1/2 (from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT)"), std::string::npos)
      << r.out;
  EXPECT_EQ(case_files(dir / "c").size(), 2u);
  const json results = json::parse(read_text(dir / "c" / "results.json"));
  EXPECT_EQ(results.at("shard").at("index"), 1);
  EXPECT_EQ(results.at("shard").at("count"), 2);
  EXPECT_EQ(results.at("shard").at("plan_cases"), 4);
  EXPECT_EQ(results.at("cases").size(), 2u);
  EXPECT_EQ(results.at("cases")[0].at("allocator_label"), "caching");
  EXPECT_EQ(results.at("cases")[1].at("allocator_label"), "cuda_mempool");
  EXPECT_NE(read_text(dir / "c" / "results.md").find("Shard 1/2 (from SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT): 2 of "
                                                     "the sweep's 4 cases"),
            std::string::npos);
  // --shard wins over the environment; --shard 0/1 is the whole sweep.
  r = run_gpumembench_with_prefix("SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_COUNT=2 ",
                                  "plan --config " + config + " --device sim --shard 0/1");
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 4) << r.out;
  fs::remove_all(dir);
}

TEST(Sweep, WholeShardedAndInWorkersMergeToTheSameTables) {
  auto dir = temp_dir("sweepmerge");
  const std::string config = write_sweep_config(dir);
  auto run = [&](const std::string& flags, const std::string& out) {
    auto r = run_gpumembench("--config " + config + " --device sim --quiet " + flags + " --output " + (dir / out).string());
    EXPECT_EQ(r.status, 0) << flags << "\n" << r.out;
  };
  run("", "whole");
  for (int i = 0; i < 3; ++i) run("--shard " + std::to_string(i) + "/3", "shard" + std::to_string(i));
  run("--jobs 2", "jobs2");
  ASSERT_EQ(case_files(dir / "whole").size(), 12u);
  EXPECT_EQ(case_files(dir / "jobs2"), case_files(dir / "whole"));
  std::set<std::string> sharded;
  for (int i = 0; i < 3; ++i) {
    const auto files = case_files(dir / ("shard" + std::to_string(i)));
    EXPECT_EQ(files.size(), 4u);
    sharded.insert(files.begin(), files.end());
  }
  EXPECT_EQ(sharded, case_files(dir / "whole"));

  auto merge = [&](const std::string& ins, const std::string& out) {
    auto r = run_gpumembench("merge " + ins + " --output " + (dir / out).string());
    EXPECT_EQ(r.status, 0) << r.out;
    return r;
  };
  const std::string shards =
      (dir / "shard0").string() + " " + (dir / "shard1").string() + " " + (dir / "shard2").string();
  merge(shards, "merged_shards");
  merge((dir / "jobs2").string(), "merged_jobs");
  merge((dir / "whole").string(), "merged_whole");
  // With the config: its order, nothing missing.
  auto r = run_gpumembench("merge " + shards + " --config " + config + " --device sim --output " +
                           (dir / "merged_config").string());
  EXPECT_EQ(r.status, 0) << r.out;

  const auto whole = figures_by_label(dir / "whole");
  ASSERT_EQ(whole.size(), 12u);
  std::size_t ooms = 0;
  for (const auto& [label, f] : whole) ooms += !f[4].is_null();
  EXPECT_GE(ooms, 3u) << "the sweep has OOM cases";
  for (const char* m : {"jobs2", "merged_shards", "merged_jobs", "merged_whole", "merged_config"}) {
    SCOPED_TRACE(m);
    EXPECT_EQ(figures_by_label(dir / m), whole);
    EXPECT_EQ(read_text(dir / m / "results.md"), read_text(dir / "whole" / "results.md"));
    EXPECT_EQ(read_text(dir / m / "results.csv"), read_text(dir / "whole" / "results.csv"));
    EXPECT_EQ(without_command_line(read_text(dir / m / "results.tex")),
              without_command_line(read_text(dir / "whole" / "results.tex")));
    EXPECT_EQ(fs::exists(dir / m / "oom"), fs::exists(dir / "whole" / "oom"));
  }
  EXPECT_EQ(case_files(dir / "merged_shards"), case_files(dir / "whole"));
  // A merged folder is a run's folder: merged again, the same tables.
  merge((dir / "merged_shards").string(), "merged_again");
  EXPECT_EQ(read_text(dir / "merged_again" / "results.md"), read_text(dir / "whole" / "results.md"));

  // Missing shards are listed (by label with the config), the rest is written, exit 1.
  r = run_gpumembench("merge " + (dir / "shard0").string() + " --config " + config + " --device sim --output " +
                      (dir / "part").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("8 cases of the sweep have no file:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  caching x hole_pattern @ 1.00 GiB"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "part" / "results.md"));
  r = run_gpumembench("merge " + (dir / "shard1").string() + " --output " + (dir / "part2").string());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("case 0 of the 12 of sweeptest"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Merge, RefusesCasesThatDisagreeOrMix) {
  auto dir = temp_dir("mergerefuse");
  const std::string config = source_path("configs/hole_pattern.yaml");
  ASSERT_EQ(run_gpumembench("--config " + config + " --device sim --quiet --output " + (dir / "a").string()).status, 0);
  fs::copy(dir / "a", dir / "b", fs::copy_options::recursive);
  const std::string one = *case_files(dir / "b").begin();
  json j = json::parse(read_text(dir / "b" / "cases" / one));
  // The same case with another peak: refused, both files named.
  json changed = j;
  changed["result"]["runs"][0]["peak_reserved_bytes"] = 12345;
  write_text(dir / "b" / "cases" / one, changed.dump());
  auto r = run_gpumembench("merge " + (dir / "a").string() + " " + (dir / "b").string() + " --output " +
                           (dir / "m").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find((dir / "a" / "cases" / one).string() + " and " + (dir / "b" / "cases" / one).string() +
                       " are the same case"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("first at runs/0/peak_reserved_bytes"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "m"));
  // A spec changed by hand: its id is no longer its hash.
  changed = j;
  changed["spec"]["run"]["repeat"] = 5;
  write_text(dir / "b" / "cases" / one, changed.dump());
  r = run_gpumembench("merge " + (dir / "b").string() + " --output " + (dir / "m").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is not the hash of its spec"), std::string::npos) << r.out;
  // Another tool version (a consistent file of it): refused unless --allow-mixed.
  fs::remove(dir / "b" / "cases" / one);
  changed = j;
  changed["spec"]["version"] = "0.0.1";
  changed["tool_version"] = "0.0.1";
  changed["id"] = gmb::case_id(changed["spec"]);
  write_text(dir / "b" / "cases" / (changed["id"].get<std::string>() + ".json"), changed.dump());
  r = run_gpumembench("merge " + (dir / "b").string() + " --output " + (dir / "m").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("the case files mix tool versions: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--allow-mixed"), std::string::npos) << r.out;
  r = run_gpumembench("merge " + (dir / "b").string() + " --allow-mixed --output " + (dir / "m").string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("the cases mix tool versions (--allow-mixed)"), std::string::npos) << r.out;
  // A GPU case whose figures differ between two runs (the driver decides part of them): the
  // first is kept and the difference said, not refused.
  for (const char* d : {"g1", "g2"}) fs::create_directories(dir / d / "cases");
  json gpu = j;
  gpu["spec"]["device"]["kind"] = "cuda";
  gpu["id"] = gmb::case_id(gpu["spec"]);
  const std::string gpu_file = gpu["id"].get<std::string>() + ".json";
  write_text(dir / "g1" / "cases" / gpu_file, gpu.dump());
  gpu["result"]["runs"][0]["peak_reserved_bytes"] = gpu["result"]["runs"][0]["peak_reserved_bytes"].get<std::uint64_t>() + 2097152;
  write_text(dir / "g2" / "cases" / gpu_file, gpu.dump());
  r = run_gpumembench("merge " + (dir / "g1").string() + " " + (dir / "g2").string() + " --output " +
                      (dir / "gm").string());
  EXPECT_NE(r.out.find("are the same GPU case"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("first at runs/0/peak_reserved_bytes"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(dir / "gm" / "results.md"));
  // Not a run's folder.
  r = run_gpumembench("merge " + dir.string() + " --output " + (dir / "n").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find(dir.string() + ": not the folder of a run (it has no cases/ folder)"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(Workers, BadFlagsAreUsageErrors) {
  const std::string config = source_path("configs/hole_pattern.yaml");
  auto r = run_gpumembench("--config " + config + " --device sim --gpus all --output /nonexistent/x");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--gpus runs cases on GPUs (--device cuda)"), std::string::npos) << r.out;
  r = run_gpumembench("--config " + config + " --device sim --jobs 0");
  EXPECT_EQ(r.status, 2) << r.out;
  r = run_gpumembench("--config " + config + " --device sim --worker-case 0123456789abcdef --output /tmp");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--worker-case 0123456789abcdef: not a case of"), std::string::npos) << r.out;
  r = run_gpumembench("--config " + config + " --device sim --in-process --jobs 2 --output /tmp");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--in-process runs every case in this process; --jobs and --gpus run them in worker processes"),
            std::string::npos)
      << r.out;
}

// Issue 13, isolation on the GPU: a sticky CUDA error (an illegal address written by a kernel, as
// after a real bug or an Xid) ends the case it happens in, recorded as an error in the tables;
// the cases before and after it run normally, because each GPU case has a process of its own.
TEST(GpuWorkers, AStickyCudaErrorEndsOneCaseAndTheSweepGoesOn) {
  if (!gmb::cuda_device_available()) GTEST_SKIP() << "no CUDA GPU visible";
  auto dir = temp_dir("gpufault");
  write_text(dir / "c.yaml",
             "name: gpufault\n"
             "device: {capacity: 8GiB}\n"
             "allocators: [cuda_malloc, caching, cuda_mempool]\n"
             "workloads:\n"
             "  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: 250MiB}\n"
             "output: {formats: [md, json]}\n");
  const std::string out = (dir / "out").string();
  auto r = run_gpumembench_with_prefix("GMB_INJECT_CUDA_FAULT='caching x' ",
                                       "--config " + (dir / "c.yaml").string() + " --device cuda --quiet --output " + out);
  EXPECT_EQ(r.status, 1) << r.out;  // a case failed: the sweep says so, and its tables are complete
  const json results = json::parse(read_text(fs::path(out) / "results.json"));
  ASSERT_EQ(results.at("cases").size(), 3u) << r.out;
  std::map<std::string, json> by_allocator;
  for (const json& c : results.at("cases")) by_allocator[c.at("allocator")] = c;
  const std::string error = by_allocator.at("caching").value("error", "");
  EXPECT_FALSE(error.empty()) << r.out;
  std::printf("[gpu] the faulted case's error: %s\n", error.c_str());
  for (const char* ok : {"cuda_malloc", "cuda_mempool"}) {
    const json& c = by_allocator.at(ok);
    EXPECT_FALSE(c.contains("error")) << ok << ": " << c.dump();
    EXPECT_GE(c.value("peak_reserved_bytes", 0ull), 600ull << 20) << ok;  // 100 + 200 + 300 MiB live at peak
  }
  EXPECT_NE(read_text(fs::path(out) / "results.md").find(error.substr(0, 20)), std::string::npos);
  // In one process the same fault poisons every later case: that is why isolation is the default.
  const std::string shared = (dir / "shared").string();
  r = run_gpumembench_with_prefix("GMB_INJECT_CUDA_FAULT='caching x' ", "--config " + (dir / "c.yaml").string() +
                                                                          " --device cuda --quiet --in-process --output " + shared);
  std::printf("[gpu] --in-process after the fault: exit %d\n%s\n", r.status, r.out.c_str());
  fs::remove_all(dir);
}

TEST(Workers, AWorkerThatDiesIsAFailedCaseAndTheSweepGoesOn) {
  auto dir = temp_dir("workerdies");
  // One long case first (a worker to kill), then short ones.
  write_text(dir / "c.yaml",
             "name: dies\n"
             "allocators: [caching]\n"
             "workloads:\n"
             "  - transformer: {style: korthikanti, layers: 8, hidden: 1024, heads: 16, vocab: 50257, batch: 4,\n"
             "                  steps: 100000, seq_len: {dist: uniform, min: 128, max: 1024}}\n"
             "  - hole_pattern: {sizes: [100MiB], free: [], probe: 1MiB}\n"
             "  - hole_pattern: {sizes: [200MiB], free: [], probe: 1MiB}\n");
  const std::string out = (dir / "out").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open((dir / "log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(GMB_BINARY, GMB_BINARY, "--config", (dir / "c.yaml").c_str(), "--device", "sim", "--jobs", "1", "--quiet",
          "--output", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  // The worker of the first case: killed as the kernel's OOM killer would.
  const std::string children = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  pid_t worker = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!worker && std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(children);
    in >> worker;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(worker, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(worker, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = read_text(dir / "log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 1) << log;
  EXPECT_NE(log.find("failed: the worker process of this case (worker 1) was killed by signal 9"), std::string::npos)
      << log;
  const json results = json::parse(read_text(fs::path(out) / "results.json"));
  ASSERT_EQ(results.at("cases").size(), 3u);
  EXPECT_NE(results.at("cases")[0].value("error", "").find("was killed by signal 9"), std::string::npos);
  EXPECT_EQ(results.at("cases")[0].at("label"), "caching x transformer[L8 h1024 a16 b4 bf16, uniform 128..1024]");
  for (std::size_t i = 1; i < 3; ++i) EXPECT_FALSE(results.at("cases")[i].contains("error")) << i;
  EXPECT_EQ(case_files(out).size(), 3u);
  fs::remove_all(dir);
}

TEST(Workers, CtrlCStopsEveryWorkerAndResumeFinishes) {
  auto dir = temp_dir("workersstop");
  write_text(dir / "c.yaml",
             "name: stops\n"
             "allocators: [caching, cuda_malloc, cuda_mempool]\n"
             "workloads:\n"
             "  - transformer: {style: korthikanti, layers: 8, hidden: 1024, heads: 16, vocab: 50257, batch: 4,\n"
             "                  steps: 400, seq_len: {dist: uniform, min: 128, max: 1024}}\n"
             "  - hole_pattern: {sizes: [100MiB], free: [], probe: 1MiB}\n");
  const std::string out = (dir / "out").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open((dir / "log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(GMB_BINARY, GMB_BINARY, "--config", (dir / "c.yaml").c_str(), "--device", "sim", "--jobs", "2", "--quiet",
          "--output", out.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  const std::string children = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (std::string line; line.empty() && std::chrono::steady_clock::now() < deadline;) {
    std::ifstream in(children);
    std::getline(in, line);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = read_text(dir / "log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  EXPECT_NE(log.find("gpumembench: stopped by SIGINT after"), std::string::npos) << log;
  EXPECT_NE(log.find("--resume " + out), std::string::npos) << log;
  const std::size_t done = case_files(out).size();
  EXPECT_LT(done, 6u);
  EXPECT_FALSE(fs::exists(fs::path(out) / "results.md"));
  for (const auto& f : case_files(out)) {
    EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;
    EXPECT_FALSE(json::parse(read_text(fs::path(out) / "cases" / f)).at("result").contains("error") &&
                 !json::parse(read_text(fs::path(out) / "cases" / f)).at("result").at("error").get<std::string>().empty())
        << f << ": a stopped worker is not a failed case";
  }
  auto r = run_gpumembench("--config " + (dir / "c.yaml").string() + " --device sim --jobs 2 --resume " + out);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(case_files(out).size(), 6u);
  EXPECT_TRUE(fs::exists(fs::path(out) / "results.md"));
  fs::remove_all(dir);
}
