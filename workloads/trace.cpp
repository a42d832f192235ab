#include "workloads/trace.h"

#include <fstream>

#include <fmt/format.h>

namespace gmb {

namespace {

class TraceWorkload final : public Workload {
 public:
  explicit TraceWorkload(Trace t) : t_(std::move(t)) {}
  std::string kind() const override { return "trace"; }
  std::string label() const override {
    auto slash = t_.path.find_last_of('/');
    return fmt::format("trace[{}]", slash == std::string::npos ? t_.path : t_.path.substr(slash + 1));
  }
  std::uint64_t num_steps() const override { return 1; }
  void step_ops(std::uint64_t, std::vector<Op>& out, StepInfo&) override {
    out.insert(out.end(), t_.ops.begin(), t_.ops.end());
  }

 private:
  Trace t_;
};

}  // namespace

Trace read_trace(const std::string& path) {
  auto source = open_trace(path);
  Trace trace;
  trace.path = path;
  while (source->read(trace.ops, std::size_t(1) << 16) > 0) {
  }
  return trace;
}

void write_trace(const std::string& path, const std::vector<Op>& ops) {
  std::ofstream out(path);
  if (!out) throw TraceError(path, 0, "cannot write the trace file");
  out << "action,id,bytes,stream\n";
  for (const Op& op : ops) {
    if (op.kind == Op::Kind::Alloc) out << "alloc," << op.id << ',' << op.bytes << ',' << op.stream << '\n';
    else if (op.kind == Op::Kind::Free) out << "free," << op.id << ",," << op.stream << '\n';
  }
}

std::unique_ptr<Workload> make_trace_workload(Trace trace) {
  return std::make_unique<TraceWorkload>(std::move(trace));
}

}  // namespace gmb
