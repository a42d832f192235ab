#include "harness/export/snapshot_export.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "allocators/caching/alloc_conf.h"
#include "devices/recorded_placement_device.h"
#include "devices/recording_device.h"
#include "allocators/registry.h"
#include "harness/io/atomic_write.h"  // temporary_path_for, FileWriteError
#include "workloads/pickle/pickle_writer.h"
#include "workloads/pytorch_snapshot.h"  // to_string(DeviceCall::Kind): the trace action names

namespace gmb {

namespace {

// The pickle goes to the file in pieces as it grows; every write is checked.
class PickleFile {
 public:
  // Written under a temporary name and renamed at close: a failed export leaves no partial file.
  // A device or a FIFO at path (--export-snapshot /dev/null) is written in place, never replaced.
  explicit PickleFile(const std::string& path)
      : path_(path), tmp_(temporary_path_for(path)), f_(std::fopen(tmp_.c_str(), "wb")) {
    if (!f_) fail();
  }
  ~PickleFile() {
    if (!f_) return;
    std::fclose(f_);
    if (tmp_ != path_) std::remove(tmp_.c_str());
  }
  std::string& buffer() { return buf_; }
  void flush_if_large() {
    if (buf_.size() >= (std::size_t(4) << 20)) flush();
  }
  void close() {
    flush();
    FILE* f = f_;
    f_ = nullptr;
    if (std::fclose(f) != 0 || (tmp_ != path_ && std::rename(tmp_.c_str(), path_.c_str()) != 0)) {
      const int err = errno;
      if (tmp_ != path_) std::remove(tmp_.c_str());
      fail(err);
    }
  }

 private:
  [[noreturn]] void fail(int err = errno) const {
    throw FileWriteError(fmt::format("cannot write {}: {}", path_, std::strerror(err)));
  }
  void flush() {
    if (!buf_.empty() && std::fwrite(buf_.data(), 1, buf_.size(), f_) != buf_.size()) fail();
    buf_.clear();
  }
  std::string path_, tmp_;
  FILE* f_;
  std::string buf_;
};

void write_frames(pickle::Writer& w, const std::string& origin) {
  w.begin_list();
  if (!origin.empty()) {
    // "file:line in function" back into PyTorch's frame dict.
    std::string file = origin, name = "?";
    std::int64_t line = 0;
    auto in = origin.find(" in ");
    if (in != std::string::npos) {
      file = origin.substr(0, in);
      name = origin.substr(in + 4);
    }
    auto colon = file.rfind(':');
    if (colon != std::string::npos) {
      try {
        line = std::stoll(file.substr(colon + 1));
        file = file.substr(0, colon);
      } catch (...) {
      }
    }
    w.begin_dict();
    w.key("name");
    w.str(name);
    w.key("filename");
    w.str(file);
    w.key("line");
    w.integer(line);
    w.end_dict();
  }
  w.end_list();
}

// taken_back: a free_completed the allocator made inside a request (it waited for the block's
// stream before giving up): marked for our reader, which replays it after that request (PyTorch's
// viewer ignores the key).
// own_release: a segment_free or segment_unmap an allocator other than PyTorch's made by its own
// policy (cuda_malloc frees its block's memory at the free, a pool trims it): marked, since our
// reader takes a release no request made for the program's empty_cache().
void write_entry(pickle::Writer& w, const char* action, DevPtr addr, Bytes size, StreamId stream, std::uint64_t time,
                 const std::string& origin = {}, bool taken_back = false, bool own_release = false) {
  w.begin_dict();
  w.key("action");
  w.str(action);
  w.key(std::string_view(action) == "oom" ? "device_free" : "addr");
  w.uinteger(addr);
  w.key("size");
  w.uinteger(size);
  w.key("stream");
  w.integer(stream);
  w.key("time_us");
  w.uinteger(time);
  w.key("frames");
  write_frames(w, origin);
  if (taken_back) {
    w.key("gpumembench_taken_back");
    w.boolean(true);
  }
  if (own_release) {
    w.key("gpumembench_own_release");
    w.boolean(true);
  }
  w.end_dict();
}

// PyTorch's settings string applies to the allocators that take it (the caching allocator).
bool takes_alloc_conf(const std::string& allocator) {
  const AllocatorEntry* entry = find_allocator(allocator);
  return entry && entry->traits.accepts_alloc_conf;
}

void write_settings(pickle::Writer& w, const std::string& allocator, const AllocatorOptions& options) {
  std::string conf;
  auto it = options.find("alloc_conf");
  if (it != options.end()) conf = it->second;
  caching::CachingConfig c;
  if (takes_alloc_conf(allocator)) c = caching::parse_alloc_conf(conf);
  w.begin_dict();
  w.key("PYTORCH_CUDA_ALLOC_CONF");
  w.str(conf);
  w.key("max_split_size");
  w.integer(c.max_split_size == UINT64_MAX ? -1 : static_cast<std::int64_t>(c.max_split_size));
  w.key("garbage_collection_threshold");
  w.real(c.garbage_collection_threshold);
  w.key("expandable_segments");
  w.boolean(c.expandable_segments);
  w.key("pinned_num_register_threads");
  w.integer(static_cast<std::int64_t>(c.pinned_num_register_threads));
  w.key("release_lock_on_cudamalloc");
  w.boolean(c.release_lock_on_cudamalloc);
  w.key("pinned_use_cuda_host_register");
  w.boolean(c.pinned_use_cuda_host_register);
  w.key("roundup_power2_divisions");
  w.begin_dict();
  for (std::size_t i = 0; i < caching::kRoundupIntervals; ++i) {
    w.key(std::to_string(std::uint64_t(1) << i));
    w.integer(static_cast<std::int64_t>(c.roundup_power2_divisions[i]));
  }
  w.end_dict();
  // Not PyTorch's: which allocator of gpumembench made this run (the viewers ignore it).
  w.key("gpumembench_allocator");
  w.str(allocator_label(allocator, options));
  w.end_dict();
}

}  // namespace

SnapshotExportSummary export_snapshot(const std::string& path, const OpReader& read, const std::string& allocator_name,
                                      const AllocatorOptions& options, Bytes capacity, const OpOrigin& origin,
                                      std::vector<std::pair<Bytes, DevPtr>> placements, Bytes card_bytes, int device) {
  SnapshotExportSummary summary;
  {
    PickleFile file(path);  // removes its temporary unless closed
    pickle::Writer w(file.buffer());
    SimDeviceOptions o;
    if (capacity) o.capacity_bytes = capacity;
    o.card_bytes = card_bytes;
    RecordedPlacementDevice sim(make_sim_device(o), std::move(placements));
    RecordingDevice rec(sim);
    auto allocator = make_allocator(allocator_name, rec, options);
    struct Live {
      DevPtr ptr;
      Bytes bytes;
      StreamId stream;
      bool free_requested = false;  // its free_requested written (Op::Kind::FreeRequested)
    };
    std::unordered_map<BufferId, Live> live;
    // Whether the allocator releases memory only where PyTorch's does (a request's retry, its
    // garbage collection, empty_cache): else its releases are marked (write_entry's own_release).
    const bool pytorch_decisions = allocator_traits(allocator_name).replayable_in_pytorch;
    std::size_t calls_done = 0;
    std::uint64_t time = 0;
    // One op's device calls, written as PyTorch records them: pages mapped (or unmapped) side by
    // side are one segment_map (segment_unmap) of the range (join_page_range).
    auto device_calls = [&] {
      const auto& calls = rec.calls();
      std::optional<DeviceCall> range;
      auto flush = [&] {
        if (!range) return;
        const bool release = range->kind == DeviceCall::Kind::Free || range->kind == DeviceCall::Kind::Unmap;
        write_entry(w, to_string(range->kind), range->address, range->bytes, 0, time, {}, false,
                    release && !pytorch_decisions);
        ++summary.entries;
        range.reset();
      };
      for (; calls_done < calls.size(); ++calls_done) {
        if (range && join_page_range(*range, calls[calls_done])) continue;
        flush();
        range = calls[calls_done];
      }
      flush();
    };

    // The free_completed of each block the allocator returned before its free (it waited for the
    // block's stream): inside a request it is marked taken back (write_entry), at the program's
    // empty_cache not (PyTorch records it there as well).
    auto returned_early = [&](bool inside_request) {
      for (DevPtr early : allocator->take_returned_early())
        for (auto it = live.begin(); it != live.end(); ++it)
          if (it->second.free_requested && it->second.ptr == early) {
            write_entry(w, "free_completed", early, it->second.bytes, it->second.stream, time, {}, inside_request);
            ++summary.entries;
            live.erase(it);
            break;
          }
    };

    w.begin_dict();
    w.key("device_traces");
    w.begin_list();
    for (int d = 0; d < device; ++d) {  // the devices before it: no entries
      w.begin_list();
      w.end_list();
    }
    w.begin_list();
    std::vector<Op> chunk;
    while (true) {
      chunk.clear();
      if (read(chunk, 65536) == 0) break;
      for (const Op& op : chunk) {
        ++time;
        // The op's own device calls apart: a map that fails takes back the pages the same call
        // mapped (RecordingDevice), never those of an op already written.
        rec.set_mark(time);
        if (op.kind == Op::Kind::Alloc) {
          // A request of 0 bytes is no entry (nor is its free): PyTorch hands out nullptr for it
          // without asking its allocator, so a snapshot holds none, and several would share one
          // address (a snapshot read back refuses an alloc where a block is live).
          if (op.bytes == 0) continue;
          auto p = allocator->allocate(op.bytes, op.stream);
          // Blocks the allocator took back inside the call (it waited for their streams, as
          // PyTorch does before it gives up): their free_completed, then what the call reserved.
          returned_early(true);
          device_calls();
          if (p) {
            live[op.id] = {*p, op.bytes, op.stream, false};
            write_entry(w, "alloc", *p, op.bytes, op.stream, time, origin ? origin(op) : std::string());
          } else {
            Bytes used = sim.used_bytes();
            Bytes cap = sim.info().capacity_bytes;
            write_entry(w, "oom", cap > used ? cap - used : 0, op.bytes, op.stream, time, origin ? origin(op) : std::string());
            ++summary.ooms;
          }
          ++summary.entries;
        } else if (op.kind == Op::Kind::FreeRequested) {
          auto it = live.find(op.id);
          if (it == live.end() || it->second.free_requested) continue;  // its allocation failed
          // Its block returns at the buffer's free (free_completed), a few entries on.
          write_entry(w, "free_requested", it->second.ptr, it->second.bytes, it->second.stream, time);
          allocator->free_requested(it->second.ptr);
          it->second.free_requested = true;
          ++summary.entries;
        } else if (op.kind == Op::Kind::EmptyCache) {
          // The program's empty_cache: the blocks it waited for (their free_completed), then what
          // it gave back to the driver, as PyTorch records them.
          allocator->empty_cache();
          returned_early(false);
          device_calls();
        } else if (op.kind == Op::Kind::Free) {
          auto it = live.find(op.id);
          if (it == live.end()) continue;  // its allocation failed
          // The block returns to the allocator, then what it gives back to the driver (a
          // segment_free between the two would read back as a free that waited on another stream).
          if (!it->second.free_requested) {
            write_entry(w, "free_requested", it->second.ptr, it->second.bytes, it->second.stream, time);
            ++summary.entries;
          }
          allocator->deallocate(it->second.ptr);
          write_entry(w, "free_completed", it->second.ptr, it->second.bytes, it->second.stream, time);
          device_calls();
          ++summary.entries;
          live.erase(it);
        }
        file.flush_if_large();
      }
    }
    w.end_list();
    w.end_list();

    // The state at the end, as torch.cuda.memory._snapshot() lists it.
    std::unordered_map<DevPtr, Bytes> requested;
    std::unordered_set<DevPtr> pending;  // freed, not returned: PyTorch's active_pending_free
    for (const auto& [id, l] : live) {
      requested[l.ptr] = l.bytes;
      if (l.free_requested) pending.insert(l.ptr);
    }
    bool expandable = false;
    if (takes_alloc_conf(allocator_name)) {
      auto it = options.find("alloc_conf");
      expandable = it != options.end() && caching::parse_alloc_conf(it->second).expandable_segments;
    }
    w.key("segments");
    w.begin_list();
    for (const SegmentInfo& seg : allocator->segments()) {
      Bytes allocated = 0, active = 0, req = 0;
      for (const BlockInfo& b : seg.blocks)
        if (b.allocated) {
          active += b.size;
          if (!pending.count(seg.address + b.offset)) allocated += b.size;
          auto r = requested.find(seg.address + b.offset);
          req += r == requested.end() ? b.size : r->second;
        }
      w.begin_dict();
      w.key("device");
      w.integer(device);
      w.key("address");
      w.uinteger(seg.address);
      w.key("total_size");
      w.uinteger(seg.size);
      w.key("allocated_size");
      w.uinteger(allocated);
      w.key("active_size");
      w.uinteger(active);
      w.key("requested_size");
      w.uinteger(req);
      w.key("stream");
      w.integer(seg.stream);
      w.key("segment_type");
      w.str(seg.pool == "small" ? "small" : "large");
      w.key("segment_pool_id");
      w.begin_tuple();
      w.integer(0);
      w.integer(0);
      w.end_tuple();
      w.key("is_expandable");
      w.boolean(expandable);
      w.key("frames");
      write_frames(w, {});
      w.key("blocks");
      w.begin_list();
      for (const BlockInfo& b : seg.blocks) {
        auto r = requested.find(seg.address + b.offset);
        w.begin_dict();
        w.key("address");
        w.uinteger(seg.address + b.offset);
        w.key("size");
        w.uinteger(b.size);
        w.key("requested_size");
        w.uinteger(b.allocated ? (r == requested.end() ? b.size : r->second) : 0);
        w.key("state");
        w.str(!b.allocated                               ? "inactive"
              : pending.count(seg.address + b.offset) ? "active_pending_free"
                                                      : "active_allocated");
        w.key("frames");
        write_frames(w, {});
        w.end_dict();
      }
      w.end_list();
      w.end_dict();
      ++summary.segments;
    }
    w.end_list();
    w.key("allocator_settings");
    write_settings(w, allocator_name, options);
    w.key("external_annotations");
    w.begin_list();
    w.end_list();
    w.end_dict();
    w.finish();
    file.close();
  }
  return summary;
}

}  // namespace gmb
