// open_trace's reader for PyTorch snapshots: the pickle is read whole (its dict closes only at
// the end, with the allocator settings after the trace), its trace converted for one device
// while it is parsed (pytorch_snapshot.h), and the pickle's bytes freed before the first op is
// handed out; what stays is the ops (about 40 bytes each) and the distinct origins, shared by
// every replay_from_start() reader.
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
    meta_.alloc_conf_error = s_.alloc_conf_error;
    meta_.device_capacity = s_.device_capacity;
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

  std::size_t read(std::vector<Op>& out, std::size_t max_ops) override {
    std::size_t n = std::min(max_ops, s_.ops.size() - next_);
    out.insert(out.end(), s_.ops.begin() + static_cast<std::ptrdiff_t>(next_),
               s_.ops.begin() + static_cast<std::ptrdiff_t>(next_ + n));
    chunk_before_ = chunk_start_;
    chunk_start_ = next_;
    next_ += n;
    return n;
  }

  // The ops of the last two reads are found by their identity (kind, id, entry, size).
  std::string origin(const Op& op) const override {
    for (std::size_t i = chunk_before_; i < next_; ++i) {
      const Op& o = s_.ops[i];
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

// The most a snapshot read on one core is read whole (its content, and its file): the peak
// memory a trace may add (the bound for a 10 M-event trace is 64 MiB above start-up).
constexpr std::uint64_t kReadWholeOnOneCore = std::uint64_t(64) << 20;

bool read_whole_on_one_core(const ByteInput& in) {
  // Both the content's length (as the file says it) and the file's: a gzip length field is
  // taken modulo 2^32, so a pickle of 4 GiB and more may say it is small; its compressed
  // file cannot.
  return in.size_hint() <= kReadWholeOnOneCore && in.file_bytes() <= kReadWholeOnOneCore;
}

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
  // With a second core the pickle is parsed as it is read and inflated there (content_feed.h).
  // On one core a pickle of at most kReadWholeOnOneCore is read whole first (libdeflate
  // inflates it whole, faster than block by block); a larger one is streamed too, so that
  // memory stays bounded (the feed's window) whatever the pickle's length.
  std::shared_ptr<const PyTorchSnapshot> s;
  if (ContentFeed::usable_cores() >= 2 || !read_whole_on_one_core(*in))
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
