// The command line as a user meets it: tables, files, errors and exit statuses.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_helpers.h"

using namespace gmb::testing;
namespace fs = std::filesystem;

namespace {

const char* kHoleConfig = R"(name: holes
device: {capacity: 4GiB}
allocators:
  - cuda_malloc
workloads:
  - hole_pattern: {sizes: [100MiB, 200MiB, 300MiB], free: [1], probe: 250MiB}
)";

// Runs a config and expects exit 2 with all `needles` in the message, and nothing written.
void expect_config_error(const std::string& yaml, const std::vector<std::string>& needles) {
  auto dir = temp_dir("cfgerr");
  write_text(dir / "bad.yaml", yaml);
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --config " + (dir / "bad.yaml").string() + " --output " + out.string());
  EXPECT_EQ(r.status, 2) << r.out;
  for (const auto& n : needles) EXPECT_NE(r.out.find(n), std::string::npos) << "missing '" << n << "' in:\n" << r.out;
  EXPECT_FALSE(fs::exists(out)) << "a bad config must not write anything";
  fs::remove_all(dir);
}

}  // namespace

TEST(Cli, HolePatternOnSimPrintsTableAndWritesResultFiles) {
  auto dir = temp_dir("hole");
  write_text(dir / "holes.yaml", kHoleConfig);
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --config " + (dir / "holes.yaml").string() + " --output " + out.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_NE(r.out.find("\n### hole_pattern["), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n| cuda_malloc | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("650.0 MiB"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(out / "results.json"));
  ASSERT_TRUE(fs::exists(out / "results.csv"));
  ASSERT_TRUE(fs::exists(out / "results.md"));
  auto j = nlohmann::json::parse(read_text(out / "results.json"));
  EXPECT_EQ(j["tool"]["name"], "gpumembench");
  EXPECT_EQ(j["device"]["kind"], "sim");
  EXPECT_EQ(j["device"]["capacity_bytes"], 4ull << 30);
  ASSERT_EQ(j["cases"].size(), 1u);
  const auto& c = j["cases"][0];
  EXPECT_EQ(c["allocator"], "cuda_malloc");
  EXPECT_EQ(c["workload"], "hole_pattern");
  // 100 + 200 + 300 MiB, free 200, + 250 MiB: cudaMalloc never reuses; peak 650 MiB.
  EXPECT_EQ(c["peak_reserved_bytes"], 650ull << 20);
  EXPECT_EQ(c["peak_allocated_bytes"], 650ull << 20);
  EXPECT_DOUBLE_EQ(c["fragmentation"].get<double>(), 0.0);
  EXPECT_EQ(c["device_mallocs"], 4);
  EXPECT_EQ(c["device_frees"], 4);
  EXPECT_TRUE(c["oom"].is_null());
  EXPECT_TRUE(c["throughput"]["modeled"].get<bool>());
  EXPECT_TRUE(c["memory_modeled"].get<bool>());
  fs::remove_all(dir);
}

TEST(Cli, CapacityTooSmallRecordsACapacityOomAndStillExitsZero) {
  auto dir = temp_dir("oom");
  write_text(dir / "holes.yaml", kHoleConfig);
  auto out = dir / "out";
  auto r = run_gpumembench("--device sim --capacity 500MiB --config " + (dir / "holes.yaml").string() +
                           " --output " + out.string() + " --format json");
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read_text(out / "results.json"));
  const auto& oom = j["cases"][0]["oom"];
  ASSERT_FALSE(oom.is_null());
  EXPECT_EQ(oom["requested_bytes"], 300ull << 20);  // 100 + 200 fit, 300 does not
  EXPECT_EQ(oom["allocated_bytes"], 300ull << 20);
  EXPECT_EQ(oom["kind"], "capacity");
  EXPECT_EQ(oom["event"], 2);
  EXPECT_FALSE(fs::exists(out / "results.csv")) << "only the asked-for format is written";
  fs::remove_all(dir);
}

TEST(Cli, ConfigErrorsNameFileLineColumnKeyAndChoices) {
  expect_config_error(kHoleConfig + std::string("bogus: 1\n"), {"bad.yaml:7:1", "unknown key 'bogus'", "valid:"});
  expect_config_error(
      "allocators:\n  - cuda_mallocc\nworkloads:\n  - hole_pattern\n",
      {"bad.yaml:2:5", "allocators[0]", "unknown allocator 'cuda_mallocc'", "cuda_malloc, cuda_managed, cuda_mempool, caching"});
  expect_config_error("allocators: [cuda_malloc]\nworkloads:\n  - hole_pattern: {sizes: [-1MiB]}\n",
                      {"bad.yaml:3:28", "workloads[0].hole_pattern.sizes[0]", "'-1MiB' is not a size"});
  expect_config_error("allocators: [cuda_malloc]\nworkloads:\n  - hole_pattern: {free: [3]}\n",
                      {"bad.yaml:3:27", "free[0]", "out of range", "0 to 2"});
  expect_config_error("allocators: [cuda_malloc]\nworkloads: [hole_pattern]\nrun: {on_oom: explode}\n",
                      {"bad.yaml:3:15", "run.on_oom", "stop, skip_step, continue"});
  expect_config_error("allocators: [cuda_malloc\nworkloads: [hole_pattern]\n", {"bad.yaml:", "YAML syntax error"});
  expect_config_error("allocators:\n  - cuda_mempool: {release_threshold: lots}\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:2:39", "release_threshold", "not a size"});
  expect_config_error("allocators: [cuda_malloc]\nworkloads: [hole_pattern]\ndevice: {capacity: 0}\n",
                      {"bad.yaml:3:20", "device.capacity"});
}

TEST(Cli, AllocatorFlagRunsOnlyTheNamedOrLabelledAllocators) {
  auto dir = temp_dir("only");
  write_text(dir / "three.yaml",
             "allocators:\n  - cuda_malloc\n  - caching\n  - caching: {alloc_conf: \"expandable_segments:True\"}\n"
             "workloads: [hole_pattern]\n");
  const std::string base = "--device sim --quiet --format json --config " + (dir / "three.yaml").string();
  auto labels_in = [](const fs::path& out) {
    std::vector<std::string> v;
    const auto j = nlohmann::json::parse(read_text(out / "results.json"));
    for (const auto& c : j["cases"]) v.push_back(c["allocator_label"]);
    return v;
  };
  auto r = run_gpumembench(base + " --allocator caching --output " + (dir / "a").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(labels_in(dir / "a"), (std::vector<std::string>{"caching", "caching[expandable_segments:True]"}));
  r = run_gpumembench(base + " --allocator caching[expandable_segments:True] --allocator cuda_malloc --output " +
                      (dir / "b").string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(labels_in(dir / "b"), (std::vector<std::string>{"cuda_malloc", "caching[expandable_segments:True]"}));
  r = run_gpumembench(base + " --allocator cuda_mempool --output " + (dir / "c").string());
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("'cuda_mempool' is not an allocator of"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("valid: cuda_malloc, caching, caching[expandable_segments:True]"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "c")) << "nothing is written for a bad flag";
  fs::remove_all(dir);
}

TEST(Cli, MissingConfigFileIsAUsageError) {
  auto r = run_gpumembench("--config /nonexistent/x.yaml");
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/x.yaml"), std::string::npos) << r.out;
}

TEST(Cli, HelpAndVersion) {
  auto h = run_gpumembench("--help");
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("--config"), std::string::npos);
  EXPECT_NE(h.out.find("replay"), std::string::npos);
  EXPECT_NE(h.out.find("Examples:\n  gpumembench --config hole_pattern.yaml"), std::string::npos) << h.out;
  auto v = run_gpumembench("--version");
  EXPECT_EQ(v.status, 0);
  EXPECT_NE(v.out.find("gpumembench 0."), std::string::npos) << v.out;
}

// Every subcommand, in every place a reader looks for them.
const std::vector<std::string> kSubcommandLines = {"gpumembench --config FILE", "gpumembench replay --trace FILE",
                                                   "gpumembench frontier --config FILE", "gpumembench compare RESULTS",
                                                   "gpumembench configs", "gpumembench plot RESULTS_DIR",
                                                   "gpumembench help"};

TEST(Cli, NoArgumentsListsEverySubcommandAndExitsTwo) {
  auto r = run_gpumembench("");
  EXPECT_EQ(r.status, 2) << r.out;
  for (const auto& line : kSubcommandLines) EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  for (const auto& flag : {"--steps N", "--allocator NAME", "--output DIR", "--format", "--timeline FILE"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag << "\n" << r.out;
}

TEST(Cli, HelpSubcommandPrintsTheHelpOfEachSubcommandWithExamples) {
  auto h = run_gpumembench("help");
  EXPECT_EQ(h.status, 0) << h.out;
  for (const auto& line : kSubcommandLines) EXPECT_NE(h.out.find(line), std::string::npos) << line << "\n" << h.out;
  const std::vector<std::pair<std::string, std::string>> subs = {
      {"replay", "gpumembench replay --trace configs/traces/fragmentation_oom/fragmentation_oom.csv"},
      {"frontier", "gpumembench frontier --config fragmentation_oom --device sim"},
      {"compare", "gpumembench compare results/h200/dynamic_seq"}};
  for (const auto& [sub, example] : subs) {
    for (const std::string& args : {"help " + sub, sub + " --help"}) {
      auto r = run_gpumembench(args);
      EXPECT_EQ(r.status, 0) << args << "\n" << r.out;
      EXPECT_NE(r.out.find("Examples:"), std::string::npos) << args << "\n" << r.out;
      EXPECT_NE(r.out.find(example), std::string::npos) << args << "\n" << r.out;
    }
  }
  // What each value means, not a formula to decode.
  auto f = run_gpumembench("frontier --help");
  EXPECT_NE(f.out.find("default: the peak allocated bytes of the run that passes at --hi"), std::string::npos) << f.out;
  EXPECT_EQ(f.out.find("bytes / 1"), std::string::npos) << f.out;
  for (const auto& flag : {"--steps", "--allocator", "--param", "--lo", "--hi", "--resolution", "--capacity"})
    EXPECT_NE(f.out.find(flag), std::string::npos) << flag << "\n" << f.out;
  auto bad = run_gpumembench("help nosuch");
  EXPECT_EQ(bad.status, 2) << bad.out;
  EXPECT_NE(bad.out.find("nosuch"), std::string::npos) << bad.out;
}

TEST(Cli, FrontierTakesTheStepsAndAllocatorFlagsOfARun) {
  auto dir = temp_dir("frontier_flags");
  write_text(dir / "f.yaml",
             "device: {capacity: 2GiB}\nallocators:\n  - cuda_malloc\n  - caching\n"
             "  - caching: {alloc_conf: \"expandable_segments:True\", label: expandable}\n"
             "workloads:\n  - hole_pattern: {sizes: [200MiB, 200MiB], free: [0], probe: 300MiB, repeat: 4}\n");
  auto r = run_gpumembench("frontier --device sim --quiet --steps 2 --allocator expandable --allocator cuda_malloc "
                           "--config " + (dir / "f.yaml").string() + " --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read_text(dir / "out" / "frontier.json"));
  std::vector<std::string> rows;
  for (const auto& row : j["rows"]) rows.push_back(row["allocator"]);
  EXPECT_EQ(rows, (std::vector<std::string>{"cuda_malloc", "expandable"})) << "the config's label names the row";
  // The range and resolution the search chose: null at the top (none asked), each row's as used.
  EXPECT_TRUE(j["lo"].is_null() && j["hi"].is_null() && j["resolution"].is_null()) << j.dump();
  for (const auto& row : j["rows"]) {
    EXPECT_EQ(row["resolution"].get<std::uint64_t>(), 2u << 20) << row.dump();
    EXPECT_GT(row["hi"].get<std::uint64_t>(), row["lo"].get<std::uint64_t>()) << row.dump();
    EXPECT_LE(row["frontier"].get<std::uint64_t>(), row["hi"].get<std::uint64_t>()) << row.dump();
  }
  r = run_gpumembench("frontier --device sim --quiet --allocator nosuch --config " + (dir / "f.yaml").string() +
                      " --output " + (dir / "bad").string());
  EXPECT_EQ(r.status, 2) << r.out;
  EXPECT_NE(r.out.find("valid: cuda_malloc, caching, expandable"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(dir / "bad"));
  r = run_gpumembench("frontier --device sim --quiet --steps 0 --config " + (dir / "f.yaml").string());
  EXPECT_EQ(r.status, 2) << r.out;
  fs::remove_all(dir);
}

TEST(Cli, AllocatorLabelFromTheConfigNamesTheRowsAndMustBeUnique) {
  auto dir = temp_dir("labels");
  write_text(dir / "l.yaml",
             "allocators:\n  - caching\n  - caching: {alloc_conf: \"expandable_segments:True\", label: expandable}\n"
             "workloads: [hole_pattern]\n");
  auto r = run_gpumembench("--device sim --quiet --format json,md --config " + (dir / "l.yaml").string() +
                           " --output " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out;
  auto j = nlohmann::json::parse(read_text(dir / "out" / "results.json"));
  ASSERT_EQ(j["cases"].size(), 2u);
  EXPECT_EQ(j["cases"][1]["allocator_label"], "expandable");
  EXPECT_EQ(j["cases"][1]["options"]["alloc_conf"], "expandable_segments:True") << "label is not an option";
  EXPECT_EQ(j["cases"][1]["label"].get<std::string>().rfind("expandable x hole_pattern[", 0), 0u) << j["cases"][1]["label"];
  EXPECT_NE(r.out.find("\n| expandable | "), std::string::npos) << r.out;
  expect_config_error("allocators:\n  - caching: {label: a}\n  - cuda_malloc: {label: a}\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:3:", "allocators[1].cuda_malloc.label", "'a' already names allocators[0]"});
  expect_config_error("allocators:\n  - caching\n  - caching\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:3:", "allocators[1]", "'caching' already names allocators[0]"});
  expect_config_error("allocators:\n  - caching: {label: \"\"}\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:2:", "allocators[0].caching.label", "non-empty"});
  expect_config_error("allocators:\n  - caching: {lable: x}\nworkloads: [hole_pattern]\n",
                      {"bad.yaml:2:", "lable", "label"});
  fs::remove_all(dir);
}

TEST(Replay, WritesTheTimelineWithValuesAfterEachEvent) {
  auto dir = temp_dir("replay");
  write_text(dir / "t.csv",
             "action,id,bytes,stream\nalloc,0,104857600,0\nalloc,1,209715200,0\nfree,1,,0\nalloc,2,1,\n");
  auto tl = dir / "timeline.csv";
  auto r = run_gpumembench("replay --device sim --trace " + (dir / "t.csv").string() +
                           " --allocator cuda_malloc --timeline " + tl.string());
  ASSERT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(read_text(tl),
            "event,action,id,bytes,allocated_bytes,reserved_bytes,segments,oom\n"
            "0,alloc,0,104857600,104857600,104857600,1,0\n"
            "1,alloc,1,209715200,314572800,314572800,2,0\n"
            "2,free,1,,104857600,104857600,1,0\n"
            "3,alloc,2,1,104857601,106954752,2,0\n");
  fs::remove_all(dir);
}

TEST(Replay, MalformedTracesNameTheLine) {
  auto dir = temp_dir("badtrace");
  write_text(dir / "a.csv", "action,id,bytes,stream\nalloc,0,100,0\nfree,7,,0\n");
  auto r = run_gpumembench("replay --device sim --trace " + (dir / "a.csv").string() + " --allocator cuda_malloc");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("a.csv:3: free of unknown id 7"), std::string::npos) << r.out;

  write_text(dir / "b.csv", "action,id,bytes,stream\nalloc,0,100,0\nalloc,1,lots,0\n");
  r = run_gpumembench("replay --device sim --trace " + (dir / "b.csv").string() + " --allocator cuda_malloc");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("b.csv:3: bytes 'lots' is not a non-negative integer"), std::string::npos) << r.out;

  write_text(dir / "c.csv", "alloc,0,100,0\n");
  r = run_gpumembench("replay --device sim --trace " + (dir / "c.csv").string() + " --allocator cuda_malloc");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("c.csv:1:"), std::string::npos) << r.out;

  r = run_gpumembench("replay --device sim --trace " + (dir / "a.csv").string() + " --allocator no_such");
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.out.find("unknown allocator 'no_such'"), std::string::npos) << r.out;
  fs::remove_all(dir);
}
