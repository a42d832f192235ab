#include "workloads/trace.h"

#include <algorithm>
#include <iterator>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "common/text_excerpt.h"

namespace gmb {

namespace {

class TraceWorkload final : public Workload {
 public:
  TraceWorkload(const std::string& path, std::unique_ptr<TraceSource> source, std::size_t chunk_ops)
      : path_(path), source_(std::move(source)), chunk_ops_(chunk_ops) {}
  std::string kind() const override { return "trace"; }
  std::string label() const override {
    auto slash = path_.find_last_of('/');
    return fmt::format("trace[{}]", printable_text(slash == std::string::npos ? path_ : path_.substr(slash + 1)));
  }
  std::uint64_t num_steps() const override { return kUnknownSteps; }
  bool makes_ops_ahead() const override { return true; }
  bool gives_slots() const override { return source_->gives_slots(); }  // fixed for a source: no lock
  std::uint32_t slots_end() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return source_->slots_end();
  }

  // The step's next piece: at most kTracePieceOps ops, up to the step's kTraceChunkOps. A
  // trace that ends at a piece's end gives its step an empty last piece.
  void step_ops(std::uint64_t, std::vector<Op>& out, StepInfo& info) override {
    std::lock_guard<std::mutex> lock(mu_);
    const std::size_t want = std::min(piece_ops_, chunk_ops_ - in_step_);
    std::size_t n = 0;
    while (!ended_ && n < want) {
      const std::size_t got = source_->read(out, want - n);
      if (got == 0) ended_ = true;
      n += got;
    }
    info.end = in_step_ == 0 && n == 0;
    in_step_ += n;
    info.more = !ended_ && in_step_ < chunk_ops_;
    if (!info.more) in_step_ = 0;
  }

  std::string op_origin(const Op& op) const override {
    std::lock_guard<std::mutex> lock(mu_);
    return source_->origin(op);
  }

  std::vector<std::string> notes() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return source_->meta().notes;
  }

  std::optional<RecordedOoms> recorded_ooms() const override {
    std::lock_guard<std::mutex> lock(mu_);
    const TraceMeta& m = source_->meta();
    if (!m.records_ooms) return std::nullopt;
    return RecordedOoms{m.recorded_ooms, m.recorded_oom_events, ended_ || m.recorded_ooms_complete};
  }

 private:
  std::string path_;
  mutable std::mutex mu_;  // step_ops runs on the runner's worker thread, op_origin on its main one
  std::unique_ptr<TraceSource> source_;
  std::size_t chunk_ops_;
  std::size_t piece_ops_ = std::min(chunk_ops_, kTracePieceOps);
  std::size_t in_step_ = 0;  // ops given in this step's pieces so far
  bool ended_ = false;
};

// A trace already in memory (validated when it was read).
class OpsSource final : public TraceSource {
 public:
  explicit OpsSource(std::vector<Op> ops) : ops_(std::move(ops)) { meta_.format = "memory"; }
  const TraceMeta& meta() const override { return meta_; }
  std::size_t read(std::vector<Op>& out, std::size_t max_ops) override {
    const std::size_t n = std::min(max_ops, ops_.size() - next_);
    out.insert(out.end(), ops_.begin() + std::ptrdiff_t(next_), ops_.begin() + std::ptrdiff_t(next_ + n));
    next_ += n;
    return n;
  }

 private:
  std::vector<Op> ops_;
  std::size_t next_ = 0;
  TraceMeta meta_;
};

}  // namespace

std::unique_ptr<Workload> make_trace_workload(const std::string& path, const TraceOpenOptions& options,
                                              std::size_t chunk_ops) {
  return std::make_unique<TraceWorkload>(path, open_trace(path, options), chunk_ops);
}

std::function<std::unique_ptr<Workload>()> trace_workload_factory(const std::string& path,
                                                                  const TraceOpenOptions& options,
                                                                  const TraceSource& opened) {
  std::shared_ptr<const TraceSource> whole = opened.replay_from_start();
  if (whole)
    return [path, whole] { return std::make_unique<TraceWorkload>(path, whole->replay_from_start(), kTraceChunkOps); };
  return [path, options] { return make_trace_workload(path, options); };
}

std::function<std::unique_ptr<Workload>()> trace_workload_factory(const std::string& path,
                                                                  const TraceOpenOptions& options) {
  return trace_workload_factory(path, options, *open_trace(path, options));
}

std::unique_ptr<Workload> make_trace_workload(Trace trace, std::size_t chunk_ops) {
  std::string path = trace.path;
  return std::make_unique<TraceWorkload>(path, std::make_unique<OpsSource>(std::move(trace.ops)), chunk_ops);
}

Trace read_trace(const std::string& path) {
  auto source = open_trace(path);
  Trace trace;
  trace.path = path;
  while (source->read(trace.ops, std::size_t(1) << 16) > 0) {
  }
  return trace;
}

void write_trace(const std::string& path, const std::vector<Op>& ops) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (!f) throw TraceError(path, 0, fmt::format("cannot write the trace file: {}", std::strerror(errno)));
  // Rows formatted into a buffer and written with fwrite, which does not throw (fmt::print to a
  // FILE* does at a full disk): a write error is found by ferror and fclose below.
  fmt::memory_buffer rows;
  auto flush = [&] {
    std::fwrite(rows.data(), 1, rows.size(), f);
    rows.clear();
  };
  fmt::format_to(std::back_inserter(rows), "action,id,bytes,stream\n");
  for (const Op& op : ops) {
    auto out = std::back_inserter(rows);
    if (op.kind == Op::Kind::Alloc) fmt::format_to(out, "alloc,{},{},{}\n", op.id, op.bytes, op.stream);
    else if (op.kind == Op::Kind::Free) fmt::format_to(out, "free,{},,{}\n", op.id, op.stream);
    else if (op.kind == Op::Kind::FreeRequested) fmt::format_to(out, "free_requested,{},,{}\n", op.id, op.stream);
    else if (op.kind == Op::Kind::EmptyCache) fmt::format_to(out, "empty_cache,,,\n");
    if (rows.size() >= (std::size_t(1) << 16)) flush();
  }
  flush();
  const bool ok = !std::ferror(f);
  if (std::fclose(f) != 0 || !ok) throw TraceError(path, 0, "could not write the whole trace file (disk full?)");
}

}  // namespace gmb
