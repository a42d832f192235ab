// A recorded allocation trace read as a stream of Alloc/Free ops, whatever its format: the seam
// between the trace readers (one file each: native_csv_trace_source.cpp, rmm_log_trace_source.cpp,
// the PyTorch snapshot reader) and the trace workload (trace.h), which replays it in chunks and
// never holds it whole.
//
// The format is detected from the content, never from the file name: gzip is inflated first
// (byte_input.h), then the start of the content picks a row of trace_formats(). A new format is
// one row there plus its reader.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "workloads/byte_input.h"
#include "workloads/trace_error.h"
#include "workloads/workload.h"

namespace gmb {

struct TraceMeta {
  std::string format;            // "native_csv", "rmm_log", "pytorch_snapshot"
  std::string alloc_conf;        // recorded allocator settings in PYTORCH_CUDA_ALLOC_CONF syntax
  bool has_alloc_conf = false;
  std::optional<std::string> alloc_conf_from_fields;  // PyTorchSnapshot::alloc_conf_from_fields
  std::string alloc_conf_error;  // the recorded settings could not be read: why (PyTorchSnapshot)
  Bytes device_capacity = 0;     // total memory of the recording device, 0 if unknown
  int recorded_device = -1;      // the recording's GPU number (a snapshot's device), -1 if unknown
  std::vector<std::string> notes;  // what the reader decided, printed to the user (device picked, blocks alive at start, ...)
  bool gzip = false;             // the file was gzip-compressed
  // Allocations that failed in the recorded run (RMM `allocate failure`, snapshot `oom`); they
  // are not replayed. Complete once read() has returned 0, or from the start where
  // recorded_ooms_complete says so (a snapshot, parsed whole). Events are positions in the op
  // stream: the failure happened just before op number `event` (0-based), the replay's event
  // numbering for the same point; the first kMaxRecordedOomEvents are kept.
  bool records_ooms = false;  // the format can record them (the figures below mean something)
  std::uint64_t recorded_ooms = 0;
  bool recorded_ooms_complete = false;  // the figures cover the whole trace before it is read to its end
  std::vector<std::uint64_t> recorded_oom_events;
  static constexpr std::size_t kMaxRecordedOomEvents = 1000;
};

class TraceSource {   // a trace read as a stream, never loaded whole
 public:
  virtual ~TraceSource() = default;
  virtual const TraceMeta& meta() const = 0;
  // Appends at most max_ops Alloc/Free ops (ids dense and reused, so tables stay small; source_line = the
  // line, or the event index for binary formats); returns how many; 0 at the end. Throws TraceError.
  // Every op is valid: an Alloc names an id not live, a Free a live one (the reader checks, with
  // a set that holds the live ids only). The native CSV keeps the file's own ids.
  virtual std::size_t read(std::vector<Op>& out, std::size_t max_ops) = 0;
  // Where an op came from in the user's program ("train.py:88 in forward"), "" if unknown.
  // Asked for ops of the piece being replayed while the next may be read (the replay reads one
  // piece ahead: trace.h), from
  // another thread than read() but never at the same time (the trace workload serialises them).
  virtual std::string origin(const Op&) const { return {}; }
  // A new reader from the first op, sharing what this one holds in memory (a snapshot, read
  // whole): so a trace that is parsed whole is parsed once however often it is replayed.
  // nullptr for a streamed format (open the file again). Safe from several threads.
  virtual std::unique_ptr<TraceSource> replay_from_start() const { return nullptr; }
  // True when read() sets Op::slot (Workload::gives_slots says what that promises); every slot
  // given so far is then below slots_end().
  virtual bool gives_slots() const { return false; }
  virtual std::uint32_t slots_end() const { return 0; }
};

struct TraceOpenOptions { int device = -1; /* snapshot device, -1 = the one with most events */ };

// Opens `path`, detects its format from the content and returns its reader. Throws TraceError:
// unreadable file, damaged gzip, unrecognised content (the message names the file, the byte
// offset or line, the recognised formats and an escaped excerpt), or the reader's own errors
// on the first bytes.
std::unique_ptr<TraceSource> open_trace(const std::string& path, const TraceOpenOptions& = {});

// For the user, one line each: the format detected, then the reader's notes.
std::vector<std::string> describe(const TraceMeta& meta);

// ---- Format table ----

// The start of the (decompressed) content, for format detection.
struct TraceHead {
  std::string_view bytes;       // up to the first 64 KiB
  std::string_view first_line;  // the first line that is neither blank nor a '#' comment, without its end
  std::uint64_t first_line_number = 0;  // 1-based; 0 when there is none
  std::uint64_t first_line_offset = 0;
  bool text = true;             // first_line holds only printable ASCII (and tabs)
};

struct TraceFormat {
  const char* name;         // TraceMeta::format
  const char* description;  // for error messages: what the content must look like
  bool (*sniff)(const TraceHead&);
  std::unique_ptr<TraceSource> (*open)(std::unique_ptr<ByteInput>, const TraceOpenOptions&);
};

// In detection order.
const std::vector<TraceFormat>& trace_formats();
// "pytorch_snapshot (a pickled ...); rmm_log (...); ...; plain or gzip-compressed": for messages.
std::string recognised_formats();

// The readers (each in its own file).
std::unique_ptr<TraceSource> make_native_csv_source(std::unique_ptr<ByteInput>, const TraceOpenOptions&);
bool looks_like_native_csv(const TraceHead&);
std::unique_ptr<TraceSource> make_rmm_log_source(std::unique_ptr<ByteInput>, const TraceOpenOptions&);
bool looks_like_rmm_log(const TraceHead&);
// A column of an RMM log's header in any letters ("thread", "POINTER"): another reader's header
// that holds one was meant as an RMM log.
bool names_an_rmm_column(std::string_view name);

}  // namespace gmb
