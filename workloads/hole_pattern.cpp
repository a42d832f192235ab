#include "workloads/hole_pattern.h"

#include <fmt/format.h>

namespace gmb {
namespace {

std::string mib_list(const std::vector<Bytes>& sizes) {
  std::string s;
  for (Bytes b : sizes) {
    if (!s.empty()) s += "/";
    s += b % MiB == 0 ? fmt::format("{}", b / MiB) : fmt::format("{:.2f}", double(b) / MiB);
  }
  return s;
}

class HolePattern final : public Workload {
 public:
  explicit HolePattern(HolePatternParams p) : p_(std::move(p)) {}
  std::string kind() const override { return "hole_pattern"; }
  std::string label() const override {
    std::string freed;
    for (auto i : p_.free_indices) freed += (freed.empty() ? "" : ",") + std::to_string(i);
    return fmt::format("hole_pattern[{} MiB, free #{}, probe {} MiB]", mib_list(p_.sizes), freed,
                       mib_list(p_.probes));
  }
  std::uint64_t num_steps() const override { return p_.repeat; }

  void step_ops(std::uint64_t step, std::vector<Op>& out, StepInfo&) override {
    const BufferId base = step * (p_.sizes.size() + p_.probes.size());
    for (std::size_t i = 0; i < p_.sizes.size(); ++i)
      out.push_back({Op::Kind::Alloc, base + i, p_.sizes[i], 0});
    std::vector<bool> freed(p_.sizes.size(), false);
    for (auto i : p_.free_indices) {
      out.push_back({Op::Kind::Free, base + i, 0, 0});
      freed[i] = true;
    }
    for (std::size_t j = 0; j < p_.probes.size(); ++j)
      out.push_back({Op::Kind::Alloc, base + p_.sizes.size() + j, p_.probes[j], 0});
    // Release everything at the end of the step so that repeats start from the same state.
    for (std::size_t j = p_.probes.size(); j-- > 0;)
      out.push_back({Op::Kind::Free, base + p_.sizes.size() + j, 0, 0});
    for (std::size_t i = p_.sizes.size(); i-- > 0;)
      if (!freed[i]) out.push_back({Op::Kind::Free, base + i, 0, 0});
  }

 private:
  HolePatternParams p_;
};

}  // namespace

std::unique_ptr<Workload> make_hole_pattern(const HolePatternParams& params) {
  return std::make_unique<HolePattern>(params);
}

}  // namespace gmb
