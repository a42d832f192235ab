#include "harness/sweep/shard.h"

#include <fmt/format.h>

#include "common/text_excerpt.h"

namespace gmb {

namespace {

// A whole number of at most 18 digits (no sign, no spaces): nullopt otherwise.
std::optional<std::size_t> whole_number(const std::string& s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) return std::nullopt;
  return static_cast<std::size_t>(std::stoull(s));
}

std::size_t env_number(const EnvLookup& getenv, const char* name) {
  const char* v = getenv(name);
  auto n = whole_number(v ? v : "");
  if (!n) throw ShardError(fmt::format("{}={}: not a whole number (0, 1, 2, ...)", name, ("\"" + escaped_excerpt(v ? v : "") + "\"")));
  return *n;
}

Shard checked(std::size_t index, std::size_t count, std::string source, const std::string& what) {
  if (count == 0 || count > kMaxShards)
    throw ShardError(fmt::format("{}: {} shards (valid: 1 to {})", what, count, kMaxShards));
  if (index >= count)
    throw ShardError(fmt::format("{}: shard index {} is not below the shard count {} (valid: 0 to {})", what, index,
                                 count, count - 1));
  return Shard{index, count, std::move(source)};
}

}  // namespace

std::string Shard::text() const { return fmt::format("{}/{}", index, count); }

Shard parse_shard(const std::string& text) {
  const std::size_t slash = text.find('/');
  const auto i = slash == std::string::npos ? std::nullopt : whole_number(text.substr(0, slash));
  const auto n = slash == std::string::npos ? std::nullopt : whole_number(text.substr(slash + 1));
  if (!i || !n)
    throw ShardError(fmt::format("--shard {}: not I/N (shard I of N, counted from 0: 0/3, 1/3, 2/3)",
                                 ("\"" + escaped_excerpt(text) + "\"")));
  return checked(*i, *n, "--shard", "--shard " + text);
}

std::optional<Shard> shard_from_environment(const EnvLookup& getenv) {
  auto set = [&](const char* name) { return getenv(name) != nullptr; };
  auto both = [&](const char* a, const char* b) -> bool {
    if (set(a) && !set(b)) throw ShardError(fmt::format("{} is set but not {}: give --shard I/N", a, b));
    return set(a);
  };
  if (both("SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT")) {
    const std::size_t id = env_number(getenv, "SLURM_ARRAY_TASK_ID");
    const std::size_t count = env_number(getenv, "SLURM_ARRAY_TASK_COUNT");
    const std::size_t min = set("SLURM_ARRAY_TASK_MIN") ? env_number(getenv, "SLURM_ARRAY_TASK_MIN") : 0;
    const std::size_t step = set("SLURM_ARRAY_TASK_STEP") ? env_number(getenv, "SLURM_ARRAY_TASK_STEP") : 1;
    const std::string what = fmt::format("SLURM_ARRAY_TASK_ID={} (SLURM_ARRAY_TASK_MIN={}, SLURM_ARRAY_TASK_STEP={}, "
                                         "SLURM_ARRAY_TASK_COUNT={})",
                                         id, min, step, count);
    if (step == 0 || id < min || (id - min) % step)
      throw ShardError(what + ": not a task of an evenly spaced array (submit with --array=0-" +
                       std::to_string(count ? count - 1 : 0) + ")");
    return checked((id - min) / step, count, "SLURM_ARRAY_TASK_ID/SLURM_ARRAY_TASK_COUNT", what);
  }
  if (set("SLURM_PROCID") && set("SLURM_NTASKS")) {
    const std::size_t id = env_number(getenv, "SLURM_PROCID");
    const std::size_t count = env_number(getenv, "SLURM_NTASKS");
    return checked(id, count, "SLURM_PROCID/SLURM_NTASKS", fmt::format("SLURM_PROCID={}, SLURM_NTASKS={}", id, count));
  }
  if (both("JOB_COMPLETION_INDEX", kShardCountVariable)) {
    const std::size_t id = env_number(getenv, "JOB_COMPLETION_INDEX");
    const std::size_t count = env_number(getenv, kShardCountVariable);
    return checked(id, count, std::string("JOB_COMPLETION_INDEX/") + kShardCountVariable,
                   fmt::format("JOB_COMPLETION_INDEX={}, {}={}", id, kShardCountVariable, count));
  }
  return std::nullopt;
}

std::vector<PlannedCase> cases_of_shard(const std::vector<PlannedCase>& plan, const Shard& shard) {
  std::vector<PlannedCase> out;
  for (const PlannedCase& c : plan)
    if (c.index % shard.count == shard.index) out.push_back(c);
  return out;
}

}  // namespace gmb
