#include "harness/config/yaml_reader.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

#include "common/text_excerpt.h"
#include "common/units.h"

namespace gmb {

ConfigError::ConfigError(const std::string& file_, int line_, int column_, const std::string& key_,
                         const std::string& message)
    : std::runtime_error(line_ > 0 ? fmt::format("{}:{}:{}: {}{}", file_, line_, column_,
                                                 key_.empty() ? "" : "key '" + escaped_excerpt(key_, 120) + "': ", message)
                                   : fmt::format("{}: {}{}", file_,
                                                 key_.empty() ? "" : "key '" + escaped_excerpt(key_, 120) + "': ", message)),
      file(file_), line(line_), column(column_), key(key_) {}

std::string join(const std::vector<std::string>& items, const std::string& sep) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

void YamlReader::fail(const YAML::Mark& at, const std::string& key, const std::string& message) const {
  bool known = at.line >= 0;
  throw ConfigError(file_, known ? at.line + 1 : 0, known ? at.column + 1 : 0, key, message);
}

void YamlReader::fail(const YAML::Node& at, const std::string& key, const std::string& message) const {
  fail(at.Mark(), key, message);
}

void YamlReader::expect_map(const YAML::Node& node, const std::string& key,
                            const std::vector<std::string>& valid) const {
  if (node.IsNull()) return;  // `key:` with nothing: an empty map
  if (!node.IsMap()) fail(node, key, fmt::format("expected a map with keys {}", join(valid)));
  for (auto it = node.begin(); it != node.end(); ++it) {
    std::string name = it->first.Scalar();
    if (std::find(valid.begin(), valid.end(), name) == valid.end())
      fail(it->first, key.empty() ? name : key + "." + name,
           fmt::format("unknown key '{}' (valid: {})", escaped_excerpt(name, 80), join(valid)));
  }
}

void YamlReader::expect_unique_keys(const YAML::Node& node, const std::string& key) const {
  if (node.IsSequence()) {
    for (std::size_t i = 0; i < node.size(); ++i) expect_unique_keys(node[i], fmt::format("{}[{}]", key, i));
    return;
  }
  if (!node.IsMap()) return;
  std::unordered_map<std::string, YAML::Mark> seen;
  for (auto it = node.begin(); it != node.end(); ++it) {
    const std::string name = it->first.IsScalar() ? it->first.Scalar() : std::string();
    const std::string path = key.empty() ? name : key + "." + name;
    if (it->first.IsScalar()) {
      auto [first, inserted] = seen.emplace(name, it->first.Mark());
      if (!inserted)
        fail(it->first, path,
             fmt::format("'{}' is given twice, at line {} and line {} (keep one)", name, first->second.line + 1,
                         it->first.Mark().line + 1));
    }
    expect_unique_keys(it->second, path);
  }
}

void YamlReader::expect_sequence(const YAML::Node& node, const std::string& key) const {
  if (!node.IsSequence()) fail(node, key, "expected a list");
}

YAML::Mark YamlReader::key_mark(const YAML::Node& map, const std::string& name) const {
  if (map.IsMap())
    for (auto it = map.begin(); it != map.end(); ++it)
      if (it->first.Scalar() == name) return it->first.Mark();
  return map.Mark();
}

std::string YamlReader::string(const YAML::Node& node, const std::string& key) const {
  if (!node.IsScalar()) fail(node, key, "expected a string");
  return node.Scalar();
}

std::string YamlReader::choice(const YAML::Node& node, const std::string& key,
                               const std::vector<std::string>& valid) const {
  std::string v = string(node, key);
  if (std::find(valid.begin(), valid.end(), v) == valid.end())
    fail(node, key, fmt::format("'{}' is not a valid choice (valid: {})", escaped_excerpt(v, 80), join(valid)));
  return v;
}

Bytes YamlReader::size(const YAML::Node& node, const std::string& key, bool allow_zero) const {
  if (!node.IsScalar()) fail(node, key, "expected a size such as 250MiB, 1.5GiB, 24GB or 4096");
  auto v = parse_size(node.Scalar());
  if (!v)
    fail(node, key,
         fmt::format("'{}' is not a size (a non-negative byte count, or a number with B, KiB, MiB, GiB, "
                     "TiB, KB, MB, GB, TB)",
                     escaped_excerpt(node.Scalar(), 80)));
  if (!allow_zero && *v == 0) fail(node, key, "must be greater than zero");
  return *v;
}

std::vector<Bytes> YamlReader::sizes(const YAML::Node& node, const std::string& key) const {
  std::vector<Bytes> out;
  if (node.IsScalar()) {
    out.push_back(size(node, key, false));
    return out;
  }
  if (!node.IsSequence() || node.size() == 0) fail(node, key, "expected a size or a non-empty list of sizes");
  for (std::size_t i = 0; i < node.size(); ++i)
    out.push_back(size(node[i], fmt::format("{}[{}]", key, i), false));
  return out;
}

std::uint64_t YamlReader::count(const YAML::Node& node, const std::string& key, std::uint64_t min,
                                std::uint64_t max) const {
  if (!node.IsScalar()) fail(node, key, "expected an integer");
  const std::string& s = node.Scalar();
  if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 19)
    fail(node, key, fmt::format("'{}' is not a non-negative integer", escaped_excerpt(s, 80)));
  std::uint64_t v = std::stoull(s);
  if (v < min || v > max)
    fail(node, key, max == UINT64_MAX ? fmt::format("{} is out of range (at least {})", v, min)
                                      : fmt::format("{} is out of range ({} to {})", v, min, max));
  return v;
}

double YamlReader::number(const YAML::Node& node, const std::string& key, double min, double max) const {
  if (!node.IsScalar()) fail(node, key, "expected a number");
  double v = 0;
  try {
    std::size_t used = 0;
    v = std::stod(node.Scalar(), &used);
    if (used != node.Scalar().size()) throw std::invalid_argument("trailing");
  } catch (...) {
    fail(node, key, fmt::format("'{}' is not a number", escaped_excerpt(node.Scalar(), 80)));
  }
  if (!std::isfinite(v) || v < min || v > max)
    fail(node, key, fmt::format("{} is out of range ({} to {})", escaped_excerpt(node.Scalar(), 80), min, max));
  return v;
}

bool YamlReader::boolean(const YAML::Node& node, const std::string& key) const {
  if (!node.IsScalar()) fail(node, key, "expected true or false");
  auto v = parse_bool(node.Scalar());
  if (!v) fail(node, key, fmt::format("'{}' is not a boolean (valid: true, false)", escaped_excerpt(node.Scalar(), 80)));
  return *v;
}

}  // namespace gmb
