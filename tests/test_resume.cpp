// Never a lost result: each case is written to DIR/cases/<id>.json as it ends, Ctrl-C stops after
// the running case and says how to resume, --resume runs only the rest and makes the same tables
// as a run never stopped; output folders are never shared or silently overwritten.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "harness/io/atomic_write.h"
#include "harness/report/csv_report.h"
#include "harness/report/json_report.h"
#include "harness/report/markdown_report.h"
#include "harness/run/case_file.h"
#include "harness/run/runner.h"
#include "test_helpers.h"
#include "workloads/hole_pattern.h"

namespace fs = std::filesystem;
using nlohmann::json;
using namespace gmb::testing;

namespace {

std::set<std::string> case_files(const fs::path& dir) {
  std::set<std::string> out;
  if (!fs::exists(dir / "cases")) return out;
  for (const auto& e : fs::directory_iterator(dir / "cases")) out.insert(e.path().filename().string());
  return out;
}

// results.json's cases without what depends on the host clock (nothing on sim is timed by it,
// but the harness's own time is measured everywhere).
json memory_figures(const fs::path& dir) {
  json j = json::parse(read_text(dir / "results.json"));
  json cases = j.at("cases");
  std::function<void(json&)> strip = [&](json& v) {
    if (v.is_object()) {
      for (auto it = v.begin(); it != v.end();) {
        if (it.key().find("seconds") != std::string::npos || it.key().find("harness") != std::string::npos)
          it = v.erase(it);
        else
          strip(*it++);
      }
    } else if (v.is_array()) {
      for (auto& x : v) strip(x);
    }
  };
  strip(cases);
  return cases;
}

// A config of 8 cases, each some tenths of a second on sim.
std::string write_sweep_config(const fs::path& dir) {
  const fs::path config = dir / "sweep.yaml";
  write_text(config,
             "name: sweep\n"
             "device: {capacity: [6GiB, 24GiB]}\n"
             "allocators: [cuda_malloc, caching, {caching: {alloc_conf: \"expandable_segments:True\"}}, cuda_mempool]\n"
             "workloads:\n"
             "  - transformer: {style: korthikanti, layers: 8, hidden: 1024, heads: 16, vocab: 50257, batch: 4, steps: 60,\n"
             "                  seq_len: {dist: uniform, min: 128, max: 1024}}\n"
             "run: {on_oom: stop, repeat: 1}\n");
  return config.string();
}

}  // namespace

TEST(Plan, PrintsEveryCaseWithAStableId) {
  auto r = run_gpumembench("plan --config " + source_path("configs/hole_pattern.yaml") + " --device sim");
  ASSERT_EQ(r.status, 0) << r.out;
  std::vector<json> lines;
  std::size_t at = 0;
  while (at < r.out.size()) {
    const std::size_t nl = r.out.find('\n', at);
    lines.push_back(json::parse(r.out.substr(at, nl - at)));
    at = nl + 1;
  }
  ASSERT_EQ(lines.size(), 4u) << r.out;
  std::set<std::string> ids;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    EXPECT_EQ(lines[i].at("index"), i);
    const std::string id = lines[i].at("id");
    EXPECT_EQ(id.size(), 16u);
    EXPECT_EQ(id.find_first_not_of("0123456789abcdef"), std::string::npos) << id;
    ids.insert(id);
    EXPECT_EQ(lines[i].at("spec").at("device").at("kind"), "sim");
    EXPECT_EQ(lines[i].at("spec").at("version"), GMB_VERSION);
  }
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(lines[1].at("label"), "caching x hole_pattern");
  // The same config and flags: the same ids; other steps: other ids.
  EXPECT_EQ(run_gpumembench("plan --config " + source_path("configs/hole_pattern.yaml") + " --device sim").out, r.out);
  auto other = run_gpumembench("plan --config " + source_path("configs/hole_pattern.yaml") + " --device sim --steps 3");
  EXPECT_EQ(other.out.find(lines[0].at("id").get<std::string>()), std::string::npos);
}

TEST(Plan, AnInputFilesContentIsPartOfTheId) {
  auto dir = temp_dir("planinput");
  write_text(dir / "t.csv", "action,id,bytes\nalloc,0,4096\nfree,0,\n");
  write_text(dir / "c.yaml", "name: t\nallocators: [caching]\nworkloads:\n  - trace: {path: t.csv}\n");
  auto a = run_gpumembench("plan --config " + (dir / "c.yaml").string() + " --device sim");
  write_text(dir / "t.csv", "action,id,bytes\nalloc,0,8192\nfree,0,\n");
  auto b = run_gpumembench("plan --config " + (dir / "c.yaml").string() + " --device sim");
  ASSERT_EQ(a.status, 0) << a.out;
  EXPECT_NE(json::parse(a.out).at("id"), json::parse(b.out).at("id"));
  fs::remove_all(dir);
}

// 100/200/300 MiB, the 200 freed, a 250 MiB probe: through `caching` on 620 MiB, an OOM.
static gmb::CaseSpec hole_case() {
  gmb::HolePatternParams p;
  p.sizes = {100 * gmb::MiB, 200 * gmb::MiB, 300 * gmb::MiB};
  p.free_indices = {1};
  p.probes = {250 * gmb::MiB};
  return gmb::CaseSpec{"caching", {}, [p] { return gmb::make_hole_pattern(p); }};
}
const gmb::DeviceSpec kHoleDevice{gmb::DeviceChoice::Sim, 620 * gmb::MiB};

TEST(CaseFile, RoundTripsEveryFigure) {
  // A case with an OOM, a timeline and a block map: written and read back, it makes the same tables.
  const gmb::CaseSpec spec = hole_case();
  const gmb::DeviceSpec device = kHoleDevice;
  gmb::RunSettings settings;
  settings.timeline = true;
  settings.repeat = 2;
  gmb::RunReport report;
  report.config_name = "t";
  report.device = gmb::make_device(device)->info();
  report.cases.push_back(gmb::run_case(spec, device, settings));
  ASSERT_TRUE(report.cases[0].runs[0].first_oom);
  ASSERT_FALSE(report.cases[0].timeline.empty());
  gmb::RunReport again = report;
  again.cases[0] = gmb::case_result_from_json(json::parse(gmb::case_result_json(report.cases[0]).dump()));
  EXPECT_EQ(gmb::to_json(again).dump(), gmb::to_json(report).dump());
  EXPECT_EQ(gmb::markdown_table(again), gmb::markdown_table(report));
  EXPECT_EQ(gmb::csv_table(again), gmb::csv_table(report));
  EXPECT_EQ(gmb::case_result_json(again.cases[0]).dump(), gmb::case_result_json(report.cases[0]).dump());
}

TEST(CaseFile, ACaseFileWithoutTheLiveRequestedBytesStillReads) {
  // Case files written before OOM records kept the live requested bytes: read, the figure unknown.
  const gmb::CaseResult c = gmb::run_case(hole_case(), kHoleDevice, gmb::RunSettings{});
  ASSERT_TRUE(c.runs[0].first_oom);
  EXPECT_EQ(c.runs[0].first_oom->live_requested_bytes, 400 * gmb::MiB);  // the 100 and 300 MiB blocks
  json j = gmb::case_result_json(c);
  std::function<void(json&)> strip = [&](json& x) {
    if (x.is_object()) {
      x.erase("live_requested_bytes");
      for (auto& [k, v] : x.items()) strip(v);
    } else if (x.is_array()) {
      for (auto& v : x) strip(v);
    }
  };
  strip(j);
  ASSERT_EQ(j.dump().find("live_requested_bytes"), std::string::npos);
  const gmb::CaseResult back = gmb::case_result_from_json(j);
  ASSERT_TRUE(back.runs[0].first_oom);
  EXPECT_FALSE(back.runs[0].first_oom->live_requested_bytes);
  EXPECT_EQ(back.runs[0].first_oom->allocated_bytes, c.runs[0].first_oom->allocated_bytes);
}

TEST(CaseFile, TextIsTheJsonDumpWithTheUsageWindow) {
  // case_file_text writes the usage window up to an OOM itself: the same bytes as the json's dump,
  // and read back, the same rows (numbers up to 2^64 - 1 included).
  gmb::CaseFileHeader h;
  h.id = "abc";
  h.spec = {{"allocator", "caching"}};
  h.config_name = "label with \"quotes\" and \u0001";
  gmb::CaseResult r;
  r.label = "caching x hole";
  r.oom_usage_window_events = 4;
  r.oom_usage = {{0, 0, 0, 0}, {1, 2, 3, 4}, {7, 1, UINT64_MAX, 1ull << 40}};
  const std::string text = gmb::case_file_text(h, r);
  EXPECT_EQ(text, gmb::case_file_json(h, r).dump());
  EXPECT_NE(text.find("\"oom_usage\":[[0,0,0,0],[1,2,3,4],[7,1,18446744073709551615,1099511627776]]"), std::string::npos);
  const gmb::CaseResult back = gmb::case_result_from_json(json::parse(text).at("result"));
  ASSERT_EQ(back.oom_usage.size(), 3u);
  EXPECT_EQ(back.oom_usage[2].allocated_bytes, UINT64_MAX);
  r.oom_usage.clear();
  EXPECT_EQ(gmb::case_file_text(h, r), gmb::case_file_json(h, r).dump());
  EXPECT_NE(gmb::case_file_text(h, r).find("\"oom_usage\":[]"), std::string::npos);
}

TEST(Resume, InterruptedAndResumedRunMakesTheSameTables) {
  auto dir = temp_dir("resume");
  const std::string config = write_sweep_config(dir);
  auto whole = run_gpumembench("--config " + config + " --device sim --quiet --output " + (dir / "whole").string());
  ASSERT_EQ(whole.status, 0) << whole.out;
  EXPECT_EQ(case_files(dir / "whole").size(), 8u);

  // Ctrl-C once a case file is there: the run stops after the case it is running.
  const std::string part = (dir / "part").string();
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open((dir / "part.log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    execl(GMB_BINARY, GMB_BINARY, "--config", config.c_str(), "--device", "sim", "--quiet", "--output", part.c_str(),
          static_cast<char*>(nullptr));
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  while (case_files(part).empty() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  kill(pid, SIGINT);
  int status = 0;
  waitpid(pid, &status, 0);
  const std::string log = read_text(dir / "part.log");
  ASSERT_TRUE(WIFEXITED(status)) << log;
  EXPECT_EQ(WEXITSTATUS(status), 130) << log;
  const std::size_t done = case_files(part).size();
  EXPECT_GE(done, 1u);
  EXPECT_LT(done, 8u) << "the run stopped before its end";
  EXPECT_NE(log.find(fmt::format("gpumembench: stopped by SIGINT after {} of 8 cases", done)), std::string::npos) << log;
  EXPECT_NE(log.find("--resume " + part), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(fs::path(part) / "results.md")) << "no table of a part of the cases";
  for (const auto& f : case_files(part)) EXPECT_EQ(f.find(".tmp"), std::string::npos) << f;

  // Resumed: the rest runs, the tables are those of the whole run.
  auto resumed = run_gpumembench("--config " + config + " --device sim --resume " + part);
  ASSERT_EQ(resumed.status, 0) << resumed.out;
  EXPECT_NE(resumed.out.find(fmt::format("{} of 8 cases taken from {}/cases (done before), {} run now", done, part,
                                         8 - done)),
            std::string::npos)
      << resumed.out;
  EXPECT_EQ(case_files(part), case_files(dir / "whole"));
  EXPECT_EQ(memory_figures(part), memory_figures(dir / "whole"));
  EXPECT_EQ(read_text(fs::path(part) / "results.md"), read_text(dir / "whole" / "results.md"));
  EXPECT_EQ(read_text(fs::path(part) / "results.csv"), read_text(dir / "whole" / "results.csv"));
  EXPECT_FALSE(fs::exists(fs::path(part) / ".gpumembench.lock"));
  fs::remove_all(dir);
}

TEST(Resume, ACaseFileOfAnotherSpecRunsAgainAndOthersAreLeftAlone) {
  auto dir = temp_dir("resumespec");
  const std::string config = source_path("configs/hole_pattern.yaml");
  const std::string out = (dir / "out").string();
  // Only cuda_malloc first (its id is the same as in the full run), then the rest by --resume.
  auto first = run_gpumembench("--config " + config + " --device sim --quiet --allocator cuda_malloc --output " + out);
  ASSERT_EQ(first.status, 0) << first.out;
  ASSERT_EQ(case_files(out).size(), 1u);
  write_text(fs::path(out) / "cases" / "0123456789abcdef.json", "{}");  // not a case of this run
  auto rest = run_gpumembench("--config " + config + " --device sim --resume " + out);
  ASSERT_EQ(rest.status, 0) << rest.out;
  EXPECT_NE(rest.out.find("1 of 4 cases taken from"), std::string::npos) << rest.out;
  EXPECT_NE(rest.out.find("1 case file in " + out + "/cases belong to other cases"), std::string::npos) << rest.out;
  EXPECT_EQ(case_files(out).size(), 5u);
  // A case file whose spec is not the case's: run again, and said so.
  std::string one;  // a case of the run
  for (const auto& f : case_files(out))
    if (f != "0123456789abcdef.json") one = f;
  json j = json::parse(read_text(fs::path(out) / "cases" / one));
  j["spec"]["run"]["repeat"] = 7;
  write_text(fs::path(out) / "cases" / one, j.dump());
  auto again = run_gpumembench("--config " + config + " --device sim --resume " + out);
  ASSERT_EQ(again.status, 0) << again.out;
  EXPECT_NE(again.out.find("its spec differs): running the case again"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("3 of 4 cases taken from"), std::string::npos) << again.out;
  fs::remove_all(dir);
}

TEST(OutputFolder, NonEmptyFolderIsRefusedUnlessOverwrite) {
  auto dir = temp_dir("outfolder");
  const std::string config = source_path("configs/hole_pattern.yaml");
  const fs::path out = dir / "out";
  ASSERT_EQ(run_gpumembench("--config " + config + " --device sim --quiet --output " + out.string()).status, 0);
  // A stale OOM file of an older run, and a file of the user's.
  fs::create_directories(out / "oom");
  write_text(out / "oom" / "case07_stale.json", "{}");
  write_text(out / "notes.txt", "mine");
  auto r = run_gpumembench("--config " + config + " --device sim --quiet --output " + out.string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--output " + out.string() + ": the folder is not empty"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--overwrite"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out / "oom" / "case07_stale.json")) << "nothing touched";
  r = run_gpumembench("--config " + config + " --device sim --quiet --overwrite --output " + out.string());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_FALSE(fs::exists(out / "oom" / "case07_stale.json"));
  EXPECT_EQ(read_text(out / "notes.txt"), "mine") << "only what a run writes is removed";
  EXPECT_TRUE(fs::exists(out / "results.json"));
  // A file where the folder should be: exit 2 before anything runs.
  write_text(dir / "file", "x");
  r = run_gpumembench("--config " + config + " --device sim --quiet --output " + (dir / "file").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("is a file, not a folder"), std::string::npos) << r.out;
  fs::remove_all(dir);
}

TEST(OutputFolder, ASecondRunIntoTheSameFolderIsRefusedNamingTheHolder) {
  auto dir = temp_dir("outlock");
  fs::create_directories(dir / "out");
  // This process holds the folder's lock as a running gpumembench would.
  const int fd = ::open((dir / "out" / ".gpumembench.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  const std::string pid = std::to_string(getpid()) + "\n";
  ASSERT_EQ(write(fd, pid.data(), pid.size()), static_cast<ssize_t>(pid.size()));
  auto r = run_gpumembench("--config " + source_path("configs/hole_pattern.yaml") + " --device sim --quiet --output " +
                           (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("another gpumembench run is writing there (pid " + std::to_string(getpid()) + ")"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(dir / "out" / "results.json"));
  close(fd);
  fs::remove_all(dir);
}

TEST(OutputFolder, RunsOfOneConfigInTheSameSecondGetTheirOwnFolders) {
  auto dir = temp_dir("outsame");
  const std::string cmd = "cd " + dir.string() + " && for i in 1 2 3; do " + std::string(GMB_BINARY) + " --config " +
                          source_path("configs/hole_pattern.yaml") + " --device sim --quiet > run$i.log 2>&1 & done; wait";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  std::vector<fs::path> folders;
  for (const auto& e : fs::directory_iterator(dir / "results")) folders.push_back(e.path());
  EXPECT_EQ(folders.size(), 3u) << read_text(dir / "run1.log") << read_text(dir / "run2.log");
  for (const auto& f : folders) {
    EXPECT_NO_THROW(json::parse(read_text(f / "results.json"))) << f;
    EXPECT_EQ(case_files(f).size(), 4u) << f;
  }
  fs::remove_all(dir);
}

TEST(CheckedWrites, AFullDiskIsAnErrorNamingTheFile) {
  EXPECT_THROW(
      {
        try {
          gmb::write_file_atomically("/dev/full", std::string(1 << 16, 'x'));
        } catch (const gmb::FileWriteError& e) {
          EXPECT_STREQ(e.what(), "cannot write /dev/full: No space left on device");
          throw;
        }
      },
      gmb::FileWriteError);
  auto r = run_gpumembench("replay --trace " + source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                           " --allocator caching --device sim --capacity 1792MiB --quiet --timeline /dev/full");
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_NE(r.out.find("gpumembench: cannot write /dev/full: No space left on device"), std::string::npos) << r.out;
  // The exports too (the RMM log's rows were written by fmt::print, which threw mid-replay: an
  // internal error that named no file).
  for (const char* flag : {"--export-rmm-log", "--export-snapshot"}) {
    r = run_gpumembench("replay --trace " + source_path("tests/data/torch_snapshots/snap_default.pickle.gz") +
                        " --allocator caching --device sim --quiet " + flag + " /dev/full");
    EXPECT_EQ(r.status, 1) << flag << r.out;
    EXPECT_NE(r.out.find("gpumembench: cannot write /dev/full: No space left on device"), std::string::npos)
        << flag << r.out;
    EXPECT_EQ(r.out.find("internal error"), std::string::npos) << flag << r.out;
  }
  // No temporary is left beside a file whose write failed (a folder in its place).
  auto dir = temp_dir("fullwrite");
  fs::create_directories(dir / "t.csv");
  r = run_gpumembench("replay --trace " + source_path("configs/traces/fragmentation_oom/fragmentation_oom.csv") +
                      " --allocator caching --device sim --capacity 1792MiB --quiet --timeline " + (dir / "t.csv").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--timeline " + (dir / "t.csv").string() + ": is a folder, not a file"), std::string::npos) << r.out;
  for (const auto& e : fs::directory_iterator(dir)) EXPECT_EQ(e.path().filename(), "t.csv");
  fs::remove_all(dir);
}

// frontier and compare take their --output folder as a run does: before the search, refused when
// another process writes there or when it holds other files; --overwrite replaces only their own.
TEST(OutputFolder, FrontierAndCompareTakeTheirFolderBeforeTheyWork) {
  auto dir = temp_dir("outfrontier");
  write_text(dir / "f.yaml",
             "device: {capacity: 2GiB}\nallocators: [caching]\n"
             "workloads:\n  - hole_pattern: {sizes: [200MiB, 200MiB], free: [0], probe: 300MiB}\n");
  const std::string frontier = "frontier --device sim --quiet --config " + (dir / "f.yaml").string() + " --output " +
                               (dir / "fr").string();
  fs::create_directories(dir / "fr");
  write_text(dir / "fr" / "notes.txt", "mine");
  auto r = run_gpumembench(frontier);
  ASSERT_EQ(r.status, 0) << "a frontier writes beside other files (a run's, for the plots): " << r.out;
  r = run_gpumembench(frontier);
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("--output " + (dir / "fr").string() + ": the folder holds the files of an earlier one: "),
            std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find("--resume"), std::string::npos) << "a frontier cannot be resumed: " << r.out;
  EXPECT_EQ(r.out.find("frontier: caching"), std::string::npos) << "refused before the search: " << r.out;

  write_text(dir / "fr" / "frontier.csv", "stale\n");
  r = run_gpumembench(frontier + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_text(dir / "fr" / "notes.txt"), "mine") << "--overwrite keeps what the frontier does not write";
  EXPECT_NE(read_text(dir / "fr" / "frontier.csv"), "stale\n");
  EXPECT_TRUE(fs::exists(dir / "fr" / "frontier.json"));
  EXPECT_FALSE(fs::exists(dir / "fr" / ".gpumembench.lock"));

  // Held by another process: refused, naming it.
  const int fd = ::open((dir / "fr" / ".gpumembench.lock").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(flock(fd, LOCK_EX), 0);
  r = run_gpumembench(frontier + " --overwrite");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("another gpumembench run is writing there"), std::string::npos) << r.out;
  ASSERT_EQ(run_gpumembench("--config " + (dir / "f.yaml").string() + " --device sim --quiet --output " +
                            (dir / "run").string()).status, 0);
  const std::string results = (dir / "run" / "results.json").string();
  r = run_gpumembench("compare " + results + " " + results + " --output " + (dir / "fr").string() + " --overwrite");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("another gpumembench run is writing there"), std::string::npos) << r.out;
  close(fd);
  fs::remove(dir / "fr" / ".gpumembench.lock");

  r = run_gpumembench("compare " + results + " " + results + " --output " + (dir / "fr").string());
  ASSERT_EQ(r.status, 0) << "beside the frontier's files: " << r.out;
  r = run_gpumembench("compare " + results + " " + results + " --output " + (dir / "fr").string());
  EXPECT_EQ(r.status, 2) << "the folder holds an earlier comparison: " << r.out;
  r = run_gpumembench("compare " + results + " " + results + " --output " + (dir / "fr").string() + " --overwrite");
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_TRUE(fs::exists(dir / "fr" / "compare.md"));
  EXPECT_TRUE(fs::exists(dir / "fr" / "frontier.json")) << "compare --overwrite replaces only compare files";
  fs::remove_all(dir);
}
