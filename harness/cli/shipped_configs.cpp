#include "harness/cli/shipped_configs.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <system_error>

#include <fmt/format.h>

#include "about/build_info.h"

namespace gmb {
namespace fs = std::filesystem;
namespace {

// The first line that starts with '#', without the '#' and surrounding blanks.
std::string first_comment_line(const fs::path& file) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    auto start = line.find_first_not_of(" \t");
    if (start == std::string::npos || line[start] != '#') continue;
    start = line.find_first_not_of("# \t", start);
    line.erase(0, start == std::string::npos ? line.size() : start);
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t' || line.back() == '\r')) line.pop_back();
    return line;
  }
  return "";
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

std::string names_of(const std::vector<ShippedConfig>& configs) {
  std::string out;
  for (const auto& c : configs) out += (out.empty() ? "" : ", ") + c.name;
  return out;
}

}  // namespace

std::vector<ShippedConfig> shipped_configs() {
  std::map<std::string, ShippedConfig> by_name;
  for (const auto& dir : shipped_config_dirs()) {
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const fs::path p = it->path();
      if (p.extension() != ".yaml" || !is_file(p)) continue;
      by_name.emplace(p.stem().string(), ShippedConfig{p.stem().string(), p, ""});
    }
  }
  std::vector<ShippedConfig> out;
  for (auto& [name, c] : by_name) {
    c.description = first_comment_line(c.path);
    out.push_back(std::move(c));
  }
  return out;
}

ConfigLookup find_config(const std::string& arg) {
  std::error_code ec;
  if (fs::is_directory(arg, ec)) return {std::nullopt, fmt::format("'{}' is a folder, not a YAML config file", arg)};
  // Anything else that exists is read as given (a device or a FIFO too: the reader bounds it).
  if (fs::exists(arg, ec)) return {arg, ""};
  const bool bare_name = !arg.empty() && arg.find('/') == std::string::npos;
  const auto configs = shipped_configs();
  if (bare_name) {
    const std::string name = arg.size() > 5 && arg.compare(arg.size() - 5, 5, ".yaml") == 0 ? arg.substr(0, arg.size() - 5) : arg;
    for (const auto& c : configs)
      if (c.name == name) return {c.path.string(), ""};
  }
  if (configs.empty())
    return {std::nullopt, fmt::format("'{}': no such file, and no shipped configs were found (the installation has "
                                      "no share/gpumembench/configs next to its bin/)",
                                      arg)};
  return {std::nullopt,
          fmt::format("'{}': no such file{}. Shipped configs (by name, with or without .yaml): {}. "
                      "`gpumembench configs` describes each.",
                      arg, bare_name ? " and no shipped config of that name" : "", names_of(configs))};
}

int list_shipped_configs(std::ostream& out, std::ostream& err) {
  const auto configs = shipped_configs();
  if (configs.empty()) {
    err << "gpumembench configs: no shipped configs found (the installation has no share/gpumembench/configs "
           "next to its bin/)\n";
    return 1;
  }
  std::size_t width = 0;
  for (const auto& c : configs) width = std::max(width, c.name.size());
  out << "Shipped configs (run one with gpumembench --config NAME):\n";
  for (const auto& c : configs) out << fmt::format("  {:<{}}  {}\n", c.name, width, c.description);
  std::vector<std::string> dirs;
  for (const auto& d : shipped_config_dirs()) dirs.push_back(d.string());
  out << fmt::format("In: {}\n", fmt::join(dirs, ", "));
  return 0;
}

}  // namespace gmb
