// Shared helpers for the tests: temp dirs, running the gpumembench binary.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>

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

// Runs the gpumembench binary with args (a shell fragment), capturing output and status.
inline CommandResult run_gpumembench(const std::string& args) {
  std::string cmd = std::string(GMB_BINARY) + " " + args + " 2>&1";
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

inline std::string source_path(const std::string& rel) { return std::string(GMB_SOURCE_DIR) + "/" + rel; }

}  // namespace gmb::testing
