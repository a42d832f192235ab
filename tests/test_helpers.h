// Shared helpers for the tests: temp dirs, running the gpumembench binary.
#pragma once

#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace gmb::testing {

inline std::filesystem::path temp_dir(const std::string& name) {
  static std::mt19937_64 rng(std::random_device{}());
  auto dir = std::filesystem::temp_directory_path() / ("gmb_" + name + "_" + std::to_string(rng()));
  std::filesystem::create_directories(dir);
  return dir;
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
}

inline std::string read_text(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int status = -1;
  std::string out;  // stdout and stderr together
};

// Runs `prefix gpumembench args` (args a shell fragment), capturing output and status.
inline CommandResult run_gpumembench_with_prefix(const std::string& prefix, const std::string& args) {
  std::string cmd = prefix + std::string(GMB_BINARY) + " " + args + " 2>&1";
  CommandResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  int st = pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

// The same under timeout(1): a command that would read or wait for ever ends with status 124.
// Runs the gpumembench binary with args (a shell fragment), capturing output and status.
inline CommandResult run_gpumembench(const std::string& args) { return run_gpumembench_with_prefix("", args); }

inline CommandResult run_gpumembench_bounded(const std::string& args, int seconds = 60) {
  return run_gpumembench_with_prefix("timeout " + std::to_string(seconds) + " ", args);
}

inline std::string source_path(const std::string& rel) { return std::string(GMB_SOURCE_DIR) + "/" + rel; }

// CSV rows as column name -> field (quoted fields unquoted), keyed by label.
inline std::map<std::string, std::map<std::string, std::string>> parse_csv(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false;
  for (std::size_t i = 0; i < text.size(); ++i) {
    char ch = text[i];
    if (quoted) {
      if (ch == '"' && i + 1 < text.size() && text[i + 1] == '"') field += '"', ++i;
      else if (ch == '"') quoted = false;
      else field += ch;
    } else if (ch == '"') {
      quoted = true;
    } else if (ch == ',') {
      row.push_back(field), field.clear();
    } else if (ch == '\n') {
      row.push_back(field), field.clear();
      rows.push_back(row), row.clear();
    } else {
      field += ch;
    }
  }
  std::map<std::string, std::map<std::string, std::string>> out;
  if (rows.empty()) return out;
  for (std::size_t r = 1; r < rows.size(); ++r) {
    EXPECT_EQ(rows[r].size(), rows[0].size()) << "row " << r << " has a different number of fields";
    std::map<std::string, std::string> m;
    for (std::size_t c = 0; c < rows[0].size() && c < rows[r].size(); ++c) m[rows[0][c]] = rows[r][c];
    out[m["label"]] = m;
  }
  return out;
}

// The line of `text` that starts with `prefix`.
}  // namespace gmb::testing
