// open_trace's reader for PyTorch snapshots: the pickle is parsed whole before the first op is
// handed out (its dict closes only at the end, with the allocator settings after the trace), its
// trace converted for one device while it is parsed (pytorch_snapshot.h) and its bytes let go
// as they are; what stays is the ops (16 bytes each, packed_ops.h) and the distinct origins,
// shared by every replay_from_start() reader.
#include <fmt/format.h>

#include "workloads/content_feed.h"
#include "workloads/pytorch_snapshot.h"

namespace gmb {

namespace {

class PyTorchSnapshotSource final : public TraceSource {
 public:
  PyTorchSnapshotSource(std::shared_ptr<const PyTorchSnapshot> s, bool gzip) : shared_(std::move(s)), s_(*shared_) {
    meta_.format = "pytorch_snapshot";
    meta_.alloc_conf = s_.alloc_conf;
    meta_.has_alloc_conf = s_.has_alloc_conf;
    meta_.alloc_conf_from_fields = s_.alloc_conf_from_fields;
    meta_.alloc_conf_error = s_.alloc_conf_error;
    meta_.device_capacity = s_.device_capacity;
    meta_.recorded_device = s_.device;
    meta_.notes = s_.notes;
    meta_.gzip = gzip;
    meta_.records_ooms = true;
    meta_.recorded_ooms = s_.ooms.size();
    meta_.recorded_ooms_complete = true;  // the whole pickle is parsed before the first op
    for (const RecordedOom& o : s_.ooms)
      if (meta_.recorded_oom_events.size() < TraceMeta::kMaxRecordedOomEvents) meta_.recorded_oom_events.push_back(o.op);
  }

  std::unique_ptr<TraceSource> replay_from_start() const override {
    return std::make_unique<PyTorchSnapshotSource>(shared_, meta_.gzip);
  }

  const TraceMeta& meta() const override { return meta_; }

  // The converter numbers buffers densely, an id free again only once its buffer is freed, so
  // the id is a slot (Workload::gives_slots): the harness hashes no id (buffer_slots.h).
  bool gives_slots() const override { return s_.ids_end < UINT32_MAX; }
  std::uint32_t slots_end() const override { return static_cast<std::uint32_t>(s_.ids_end + 1); }

  std::size_t read(std::vector<Op>& out, std::size_t max_ops) override {
    std::size_t n = std::min(max_ops, s_.ops.size() - next_);
    const std::size_t at = out.size();
    s_.ops.append_to(out, next_, n);
    if (gives_slots())  // a buffer's slot is its id + 1 (ids are dense and taken only by live buffers)
      for (std::size_t i = at; i < out.size(); ++i) out[i].slot = static_cast<std::uint32_t>(out[i].id + 1);
    chunk_before_ = chunk_start_;
    chunk_start_ = next_;
    next_ += n;
    return n;
  }

  // The ops of the last two reads are found by their identity (kind, id, entry, size).
  std::string origin(const Op& op) const override {
    for (std::size_t i = chunk_before_; i < next_; ++i) {
      const Op o = s_.ops[i];
      if (o.kind == op.kind && o.id == op.id && o.source_line == op.source_line && o.bytes == op.bytes)
        return s_.origins[s_.op_origin[i]];
    }
    return {};
  }

  const PyTorchSnapshot& snapshot() const { return s_; }

 private:
  std::shared_ptr<const PyTorchSnapshot> shared_;
  const PyTorchSnapshot& s_;
  TraceMeta meta_;
  std::size_t next_ = 0, chunk_start_ = 0, chunk_before_ = 0;
};

}  // namespace

const PyTorchSnapshot* pytorch_snapshot_of(const TraceSource& source) {
  auto* s = dynamic_cast<const PyTorchSnapshotSource*>(&source);
  return s ? &s->snapshot() : nullptr;
}

std::unique_ptr<TraceSource> make_pytorch_snapshot_source(std::unique_ptr<ByteInput> in, const TraceOpenOptions& options) {
  // A snapshot is parsed whole, so its length needs a bound: a regular file (what
  // _dump_snapshot writes) up to kMaxSnapshotBytes inflated; a pipe or a device (/dev/urandom
  // starting like a pickle) would be read into memory without end.
  if (!in->regular_file())
    in->fail_at(0, "a PyTorch snapshot is read whole: give it as a regular file (plain or .gz), not a pipe or device");
  const bool gzip = in->gzip();
  const std::string path = in->path();
  // The pickle is parsed as it is read and inflated on a second thread (content_feed.h), with
  // one core too: its bytes then stay within the feed's window, not the pickle's length. Read
  // whole, a pickle's every page is fresh memory the kernel zero-fills, which cost more than
  // the two threads' turns on one core (docs/TRACES.md); where ISA-L inflates the stream it is
  // as fast as libdeflate's whole-buffer inflate besides. Whole only where the feed cannot start.
  std::shared_ptr<const PyTorchSnapshot> s;
  if (auto feed = ContentFeed::start(in, kMaxSnapshotBytes, "the snapshot's content"))
    s = std::make_shared<const PyTorchSnapshot>(convert_pytorch_snapshot(*feed, path, options.device));
  if (!s) {
    WholeContent content = in->read_rest(kMaxSnapshotBytes, "the snapshot's content");
    in.reset();
    s = std::make_shared<const PyTorchSnapshot>(convert_pytorch_snapshot(std::move(content), path, options.device));
  }
  return std::make_unique<PyTorchSnapshotSource>(std::move(s), gzip);
}

}  // namespace gmb
