#include "workloads/trace.h"

#include <fstream>
#include <sstream>
#include <unordered_set>

#include <fmt/format.h>

namespace gmb {

TraceError::TraceError(const std::string& file_, std::uint64_t line_, const std::string& message)
    : std::runtime_error(fmt::format("{}:{}: {}", file_, line_, message)), file(file_), line(line_) {}

namespace {

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> fields;
  std::string field;
  std::istringstream in(line);
  while (std::getline(in, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.emplace_back();
  for (auto& f : fields) {
    while (!f.empty() && (f.back() == ' ' || f.back() == '\r' || f.back() == '\t')) f.pop_back();
    std::size_t s = 0;
    while (s < f.size() && (f[s] == ' ' || f[s] == '\t')) ++s;
    f.erase(0, s);
  }
  return fields;
}

bool parse_u64(const std::string& s, std::uint64_t& out) {
  if (s.empty() || s.size() > 20 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  try {
    out = std::stoull(s);
  } catch (...) {
    return false;
  }
  return true;
}

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
  std::ifstream in(path);
  if (!in) throw TraceError(path, 0, "cannot open the trace file");
  Trace trace;
  trace.path = path;
  std::string line;
  std::uint64_t lineno = 0;
  int col_action = -1, col_id = -1, col_bytes = -1, col_stream = -1;
  bool have_header = false;
  std::unordered_set<BufferId> live;
  while (std::getline(in, line)) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    auto f = split_csv(line);
    if (!have_header) {
      for (int i = 0; i < static_cast<int>(f.size()); ++i) {
        if (f[i] == "action") col_action = i;
        else if (f[i] == "id") col_id = i;
        else if (f[i] == "bytes") col_bytes = i;
        else if (f[i] == "stream") col_stream = i;
        else
          throw TraceError(path, lineno, fmt::format("unknown column '{}' in the header (valid: action, id, bytes, stream)", f[i]));
      }
      if (col_action < 0 || col_id < 0 || col_bytes < 0)
        throw TraceError(path, lineno, "the header line must name the columns action,id,bytes[,stream]");
      have_header = true;
      continue;
    }
    int needed = std::max({col_action, col_id, col_bytes, col_stream}) + 1;
    if (static_cast<int>(f.size()) < needed - (col_stream == needed - 1 ? 1 : 0))
      throw TraceError(path, lineno, fmt::format("expected {} fields, found {}: '{}'", needed, f.size(), line));
    Op op;
    op.source_line = lineno;
    const std::string& action = f[col_action];
    std::uint64_t id = 0;
    if (!parse_u64(f[col_id], id))
      throw TraceError(path, lineno, fmt::format("id '{}' is not a non-negative integer", f[col_id]));
    op.id = id;
    if (col_stream >= 0 && col_stream < static_cast<int>(f.size()) && !f[col_stream].empty()) {
      std::uint64_t s = 0;
      if (!parse_u64(f[col_stream], s) || s > 1000000)
        throw TraceError(path, lineno, fmt::format("stream '{}' is not a small non-negative integer", f[col_stream]));
      op.stream = static_cast<StreamId>(s);
    }
    if (action == "alloc") {
      std::uint64_t bytes = 0;
      if (!parse_u64(f[col_bytes], bytes))
        throw TraceError(path, lineno, fmt::format("bytes '{}' is not a non-negative integer", f[col_bytes]));
      if (!live.insert(id).second)
        throw TraceError(path, lineno, fmt::format("alloc of id {} which is already allocated", id));
      op.kind = Op::Kind::Alloc;
      op.bytes = bytes;
    } else if (action == "free") {
      if (!live.erase(id))
        throw TraceError(path, lineno, fmt::format("free of unknown id {} (never allocated, or already freed)", id));
      op.kind = Op::Kind::Free;
    } else {
      throw TraceError(path, lineno, fmt::format("unknown action '{}' (valid: alloc, free)", action));
    }
    trace.ops.push_back(op);
  }
  if (!have_header) throw TraceError(path, lineno, "empty trace: the header line action,id,bytes,stream is required");
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
