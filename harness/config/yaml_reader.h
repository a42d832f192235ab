// Strict reading of YAML config nodes: every error names the file, line, column and key,
// with the valid choices.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "devices/device.h"

namespace gmb {

struct ConfigError : std::runtime_error {
  ConfigError(const std::string& file, int line, int column, const std::string& key,
              const std::string& message);
  std::string file;
  int line;    // 1-based; 0 when unknown
  int column;  // 1-based
  std::string key;
};

class YamlReader {
 public:
  explicit YamlReader(std::string file) : file_(std::move(file)) {}
  const std::string& file() const { return file_; }

  [[noreturn]] void fail(const YAML::Node& at, const std::string& key, const std::string& message) const;
  [[noreturn]] void fail(const YAML::Mark& at, const std::string& key, const std::string& message) const;

  // The node must be a map whose keys are all in `valid`.
  void expect_map(const YAML::Node& node, const std::string& key, const std::vector<std::string>& valid) const;
  // Every map in the tree has each key once: yaml-cpp keeps a duplicate in iteration while
  // node[key] finds only the first, so a key given twice would be silently half ignored.
  void expect_unique_keys(const YAML::Node& node, const std::string& key = "") const;
  void expect_sequence(const YAML::Node& node, const std::string& key) const;
  // Where a key's name sits (for "unknown key" messages); the node's mark if absent.
  YAML::Mark key_mark(const YAML::Node& map, const std::string& name) const;

  std::string string(const YAML::Node& node, const std::string& key) const;
  std::string choice(const YAML::Node& node, const std::string& key, const std::vector<std::string>& valid) const;
  Bytes size(const YAML::Node& node, const std::string& key, bool allow_zero = true) const;
  std::vector<Bytes> sizes(const YAML::Node& node, const std::string& key) const;  // scalar or list
  std::uint64_t count(const YAML::Node& node, const std::string& key, std::uint64_t min = 0,
                      std::uint64_t max = UINT64_MAX) const;
  double number(const YAML::Node& node, const std::string& key, double min, double max) const;
  bool boolean(const YAML::Node& node, const std::string& key) const;

 private:
  std::string file_;
};

std::string join(const std::vector<std::string>& items, const std::string& sep = ", ");

}  // namespace gmb
