#include "workloads/pytorch_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "common/live_map.h"
#include "common/text_excerpt.h"
#include "common/units.h"
#include "workloads/content_feed.h"
#include "workloads/pickle/pickle_reader.h"

namespace gmb {

using pickle::Document;
using pickle::Ref;
using pickle::Type;

const char* to_string(DeviceCall::Kind kind) {
  switch (kind) {
    case RecordedSegmentEvent::Kind::Malloc: return "segment_alloc";
    case RecordedSegmentEvent::Kind::Free: return "segment_free";
    case RecordedSegmentEvent::Kind::Map: return "segment_map";
    case RecordedSegmentEvent::Kind::Unmap: return "segment_unmap";
  }
  return "?";
}

namespace {

const char* article(Type t) {
  switch (t) {
    case Type::Int:
    case Type::BigInt: return "an int";
    case Type::Dict: return "a dict";
    case Type::List: return "a list";
    case Type::Str: return "a str";
    case Type::Float: return "a float";
    default: return "a value";
  }
}

// A block alive when the trace starts (no alloc recorded for it).
struct InitialBlock {
  DevPtr address;
  Bytes bytes;
  StreamId stream;
  BufferId tagged_id;  // the id its Free uses during conversion
  std::uint32_t origin;
  // Listed active_pending_free and not in the trace: freed before the trace's first entry, its
  // memory still taken at the end (a FreeRequested follows its Alloc).
  bool free_pending = false;
};

constexpr BufferId kInitialTag = BufferId(1) << 63;

class TraceSink;

class Converter {
 public:
  Converter(const Document& doc, const std::string& file) : d_(doc), file_(file) {}

  // sink: the traces converted while parsing (nullptr: none, every trace is in the Document).
  PyTorchSnapshot run(int want_device, const TraceSink* sink) {
    sink_ = sink;
    Ref root = d_.root();
    Ref segments = Document::kAbsent, traces = Document::kAbsent, settings = Document::kAbsent;
    if (d_.type(root) == Type::List) {
      segments = root;
      s_.notes.push_back("the snapshot is a bare list of segments (an old format): no trace, no allocator settings");
    } else if (d_.type(root) == Type::Dict) {
      segments = d_.get(root, "segments");
      traces = d_.get(root, "device_traces");
      settings = d_.get(root, "allocator_settings");
      if (segments == Document::kAbsent && traces == Document::kAbsent)
        bad("the top level", "a dict with the keys segments and device_traces (torch.cuda.memory._snapshot()), "
                             "found a dict without either");
    } else {
      bad("the top level", fmt::format("a dict (torch.cuda.memory._snapshot()) or a list of segments, found {}",
                                       pickle::type_name(d_.type(root))));
    }
    if (segments != Document::kAbsent) expect(segments, Type::List, [] { return std::string("segments"); });
    if (traces != Document::kAbsent) {
      expect(traces, Type::List, [] { return std::string("device_traces"); });
      for (std::size_t i = 0; i < d_.size(traces); ++i)
        expect(d_.items(traces)[i], Type::List, [&] { return fmt::format("device_traces[{}]", i); });
    }
    pick_device(want_device, segments, traces);
    if (settings != Document::kAbsent) read_settings(settings);
    else s_.notes.push_back("the snapshot records no allocator_settings: PyTorch's defaults are assumed");

    Ref trace = traces != Document::kAbsent && s_.device < static_cast<int>(d_.size(traces))
                    ? d_.items(traces)[static_cast<std::size_t>(s_.device)]
                    : Document::kAbsent;
    s_.has_trace = trace != Document::kAbsent && entries_of(traces, static_cast<std::size_t>(s_.device)) > 0;
    if (s_.has_trace) convert_trace(traces, trace);
    if (segments != Document::kAbsent) read_blocks_alive(segments);
    finish();
    return std::move(s_);
  }

  // One device's trace, entry by entry: begin_trace, convert_entry for entries 0, 1, 2...,
  // end_trace (its notes). A TraceSink calls them while the pickle is parsed.
  void begin_trace(int device, std::size_t expected_entries) {
    prev_free_requested_ = false;
    s_.device = device;
    key_class_.assign(d_.node_count(), kUnclassified);
    last_pairs_ = kNoneRemembered;
    s_.ops.reserve(s_.ops.size() + expected_entries);  // at most one op per entry (two for an oom)
    s_.op_origin.reserve(s_.op_origin.size() + expected_entries);
  }
  // While a TraceSink converts: where each container looked into goes (pickle::ListSink::take).
  void record_reads(std::vector<Ref>* reads) { reads_ = reads; }
  // The Document dropped its nodes from `floor` on (pickle::ListSink::nodes_dropped).
  void forget_nodes_from(Ref floor) {
    if (key_class_.size() > floor) key_class_.resize(floor);
    last_pairs_ = kNoneRemembered;
    for (auto& a : action_cache_) a = {Document::kAbsent, kUnknownAction};
    ++nodes_seen_;  // what origin_seen_ and file_seen_ hold is of an older numbering
    if (any_frame_seen_)
      for (FrameSeen& f : frame_seen_)
        if (f.frame != Document::kAbsent && f.frame >= floor) f = FrameSeen{};
    if (floor <= highest_stack_origin_) {
      for (StackOrigin& k : stack_origin_)
        if (k.list != Document::kAbsent && k.list >= floor) k = StackOrigin{};
      highest_stack_origin_ = floor ? floor - 1 : 0;
    }
  }
  // Takes over the trace `from` converted (its ops, live blocks, streams, origins).
  void adopt_trace(Converter&& from) {
    s_.ops = std::move(from.s_.ops);
    s_.op_origin = std::move(from.s_.op_origin);
    s_.segment_events = std::move(from.s_.segment_events);
    s_.ooms = std::move(from.s_.ooms);
    s_.origins = std::move(from.s_.origins);
    streams_ = std::move(from.streams_);
    live_ = std::move(from.live_);
    freed_log_ = std::move(from.freed_log_);
    freed_addrs_ = std::move(from.freed_addrs_);
    initial_ = std::move(from.initial_);
    free_ids_ = std::move(from.free_ids_);
    next_id_ = from.next_id_;
    origin_index_ = std::move(from.origin_index_);
    delayed_frees_ = from.delayed_frees_;
    ignored_ = from.ignored_;
    requested_pending_ = from.requested_pending_;
    prev_free_requested_ = from.prev_free_requested_;
    taken_back_ = std::move(from.taken_back_);
    releases_open_ = from.releases_open_;
    frees_in_releases_ = std::move(from.frees_in_releases_);
    s_.empty_caches = from.s_.empty_caches;
    prev_requested_addr_ = from.prev_requested_addr_;
    prev_requested_entry_ = from.prev_requested_entry_;
  }

 private:
  // The entries of device_traces[device]: in the Document, or (a list the sink claimed) converted.
  std::uint64_t entries_of(Ref traces, std::size_t device) const;
  void convert_trace(Ref traces, Ref trace);

  template <class Path>
  [[noreturn]] void bad(const Path& where, const std::string& expected) const {
    if constexpr (std::is_invocable_v<Path>) throw TraceError::in_content(file_, where(), "expected " + expected);
    else throw TraceError::in_content(file_, where, "expected " + expected);
  }
  template <class Path>
  void expect(Ref r, Type t, const Path& where) const {
    if (d_.type(r) != t) bad(where, fmt::format("{}, found {}", article(t), pickle::type_name(d_.type(r))));
  }
  template <class Path>
  Ref field(Ref dict, std::string_view key, const Path& where) const {
    return present(d_.get(dict, key), key, where);
  }
  // A value already looked up under `key`: an error where it is absent.
  template <class Path>
  Ref present(Ref r, std::string_view key, const Path& where) const {
    if (r == Document::kAbsent)
      bad([&] { return where(); }, fmt::format("the key '{}'", key));
    return r;
  }
  template <class Path>
  std::int64_t int_value(Ref r, const Path& where) const {
    if (d_.type(r) == Type::BigInt)
      bad(where, "an int of at most 2^63 - 1 (a signed 64-bit value, as PyTorch writes), found a larger int");
    // (bool is an int in Python, but PyTorch writes no bool where a number belongs)
    if (d_.type(r) != Type::Int) bad(where, fmt::format("an int, found {}", pickle::type_name(d_.type(r))));
    return d_.as_int(r);
  }
  template <class Path>
  std::uint64_t uint_field(Ref dict, std::string_view key, const Path& where) const {
    return uint_of(d_.get(dict, key), key, where);
  }
  template <class Path>
  std::uint64_t uint_of(Ref got, std::string_view key, const Path& where) const {
    // The usual: a small int (a Ref of its own) or a non-negative one in a node, read here; any
    // other value (absent, another type, negative, too large) goes the way that names it.
    if (Document::is_immediate(got)) return static_cast<std::uint64_t>(d_.as_int(got));
    if (got != Document::kAbsent && d_.type(got) == Type::Int && d_.as_int(got) >= 0)
      return static_cast<std::uint64_t>(d_.as_int(got));
    return checked_uint_of(got, key, where);
  }
  template <class Path>
  [[gnu::noinline]] std::uint64_t checked_uint_of(Ref got, std::string_view key, const Path& where) const {
    auto path = [&] { return fmt::format("{}.{}", where(), key); };
    std::int64_t v = int_value(present(got, key, where), path);
    if (v < 0) bad(path, fmt::format("a non-negative int, found {}", v));
    return static_cast<std::uint64_t>(v);
  }
  template <class Path>
  std::string_view str_field(Ref dict, std::string_view key, const Path& where) const {
    return str_of(d_.get(dict, key), key, where);
  }
  template <class Path>
  std::string_view str_of(Ref got, std::string_view key, const Path& where) const {
    Ref r = present(got, key, where);
    auto path = [&] { return fmt::format("{}.{}", where(), key); };
    if (d_.type(r) != Type::Str) bad(path, fmt::format("a str, found {}", pickle::type_name(d_.type(r))));
    return d_.as_bytes(r);
  }

  StreamId stream_id(std::int64_t raw) {
    if (raw == 0) return 0;
    auto it = streams_.find(raw);
    if (it != streams_.end()) return it->second;
    StreamId id = static_cast<StreamId>(streams_.size() + 1);
    streams_.emplace(raw, id);
    return id;
  }

  void pick_device(int want, Ref segments, Ref traces) {
    std::map<int, std::uint64_t> events;  // device -> trace entries (0 for devices with segments only)
    if (traces != Document::kAbsent)
      for (std::size_t i = 0; i < d_.size(traces); ++i) {
        auto n = entries_of(traces, i);
        if (n) events[static_cast<int>(i)] = n;
      }
    std::map<int, std::uint64_t> seg_devices;
    if (segments != Document::kAbsent)
      for (std::size_t i = 0; i < d_.size(segments); ++i) {
        Ref seg = d_.items(segments)[i];
        auto where = [&] { return fmt::format("segments[{}]", i); };
        expect(seg, Type::Dict, where);
        Ref dev = d_.get(seg, "device");
        int device = dev == Document::kAbsent ? 0 : static_cast<int>(int_value(dev, [&] { return where() + ".device"; }));
        ++seg_devices[device];
      }
    for (auto& [dev, n] : events) s_.devices_with_events.push_back(dev);
    auto listing = [&] {
      std::string s;
      for (auto& [dev, n] : events) s += fmt::format("{}device {} ({} events)", s.empty() ? "" : ", ", dev, n);
      for (auto& [dev, n] : seg_devices)
        if (!events.count(dev)) s += fmt::format("{}device {} ({} segments, no events)", s.empty() ? "" : ", ", dev, n);
      return s.empty() ? std::string("none") : s;
    };
    if (want >= 0) {
      if (!events.count(want) && !seg_devices.count(want))
        throw TraceError::in_content(file_, "--trace-device",
                            fmt::format("device {} has no events and no segments in this snapshot (it has: {})", want,
                                        listing()));
      s_.device = want;
    } else if (!events.empty()) {
      s_.device = events.begin()->first;
      for (auto& [dev, n] : events)
        if (n > events[s_.device]) s_.device = dev;
    } else if (!seg_devices.empty()) {
      s_.device = seg_devices.begin()->first;
      for (auto& [dev, n] : seg_devices)
        if (n > seg_devices[s_.device]) s_.device = dev;
    } else {
      throw TraceError::in_content(file_, "the top level", "the snapshot holds no trace events and no segments: nothing to replay");
    }
    std::map<int, bool> all;
    for (auto& [dev, n] : events) all[dev] = true;
    for (auto& [dev, n] : seg_devices) all[dev] = true;
    if (all.size() > 1 || want >= 0)
      s_.notes.push_back(fmt::format("replaying device {}{} (the snapshot has: {}; pick with --trace-device N)", s_.device,
                                     want >= 0 ? " (--trace-device)" : ", the one with the most events", listing()));
    else
      s_.notes.push_back(fmt::format("replaying device {}, the only one in the snapshot", s_.device));
  }

  // allocator_settings -> PYTORCH_CUDA_ALLOC_CONF text: the option string PyTorch last parsed
  // when it is there; else rebuilt from the individual settings.
  void read_settings(Ref settings) {
    auto where = [] { return std::string("allocator_settings"); };
    expect(settings, Type::Dict, where);
    s_.has_alloc_conf = true;
    Ref text = d_.get(settings, "PYTORCH_CUDA_ALLOC_CONF");
    try {
      // (None: PyTorch read no such variable; the settings are rebuilt from the others.)
      if (text != Document::kAbsent && d_.type(text) != Type::Str && d_.type(text) != Type::None)
        expect(text, Type::Str, [] { return std::string("allocator_settings.PYTORCH_CUDA_ALLOC_CONF"); });
      if (text != Document::kAbsent && d_.type(text) == Type::Str && !d_.as_bytes(text).empty()) {
        s_.alloc_conf = std::string(d_.as_bytes(text));
        s_.alloc_conf_from_fields = conf_with_recorded_fields(s_.alloc_conf, settings);
      } else {
        s_.alloc_conf = rebuilt_alloc_conf(settings);
      }
    } catch (const TraceError& e) {
      // Kept for where the settings are used (dropped, a setting would replay other settings
      // than the recorded run's): the message without the file's name, which the user adds.
      s_.alloc_conf_error = without_file_name(e);
    }
    if (s_.alloc_conf.find("cudaMallocAsync") != std::string::npos) s_.native_allocator = false;
    // Our export of another allocator's run (cuda_malloc, bfc, ...): not PyTorch's decisions.
    Ref exported = d_.get(settings, "gpumembench_allocator");
    if (exported != Document::kAbsent && d_.type(exported) == Type::Str) {
      s_.exported_allocator = printable_text(d_.as_bytes(exported));
      const bool caching = s_.exported_allocator == "caching" || s_.exported_allocator.rfind("caching[", 0) == 0;
      if (!caching) s_.native_allocator = false;
    }
  }

  // A TraceError's message without the file's name in front: for a note or an error the user's
  // own message names the file in.
  std::string without_file_name(const TraceError& e) const {
    const std::string what = e.what(), named = printable_text(file_) + ": ";
    return what.rfind(named, 0) == 0 ? what.substr(named.size()) : what;
  }

  // The option string `text` with the settings PyTorch records one by one put in from those
  // records: the options of the text that no record covers (backend, max_non_split_rounding_mb,
  // one of the four not recorded) kept as written. The harness tells whether it decides as the
  // text does (the option parser is the allocator's). None where the snapshot records none of
  // them, or one of a type PyTorch does not write (then the text is used as written: a note).
  std::optional<std::string> conf_with_recorded_fields(const std::string& text, Ref settings) {
    // Each record and the option it covers.
    static constexpr std::pair<const char*, const char*> kCovers[] = {
        {"expandable_segments", "expandable_segments"},
        {"max_split_size", "max_split_size_mb"},
        {"garbage_collection_threshold", "garbage_collection_threshold"},
        {"roundup_power2_divisions", "roundup_power2_divisions"}};
    std::vector<std::string_view> covered;
    for (const auto& [field, option] : kCovers)
      if (d_.get(settings, field) != Document::kAbsent) covered.push_back(option);
    if (covered.empty()) return std::nullopt;
    std::string rebuilt;
    try {
      rebuilt = rebuilt_alloc_conf(settings);
    } catch (const TraceError& e) {
      s_.notes.push_back(fmt::format("{}: the option string \"{}\" is used as written, not checked against them",
                                     without_file_name(e), printable_text(text)));
      return std::nullopt;
    }
    // Options at bracket depth 0 split at commas; those a record covers are left out.
    std::vector<std::string> kept;
    auto keep = [&](std::string_view option) {
      const auto trim = [](std::string_view v) {
        while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
        return v;
      };
      option = trim(option);
      const std::string_view key = trim(option.substr(0, option.find(':')));
      if (option.empty() || std::find(covered.begin(), covered.end(), key) != covered.end()) return;
      kept.emplace_back(option);
    };
    int depth = 0;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
      if (i == text.size() || (text[i] == ',' && depth == 0)) {
        keep(std::string_view(text).substr(start, i - start));
        start = i + 1;
      } else if (text[i] == '[') {
        ++depth;
      } else if (text[i] == ']' && depth > 0) {
        --depth;
      }
    }
    if (!rebuilt.empty()) kept.push_back(rebuilt);
    return fmt::format("{}", fmt::join(kept, ","));
  }

  // The option string rebuilt from the settings PyTorch records, each of the type PyTorch writes
  // (TraceError otherwise).
  std::string rebuilt_alloc_conf(Ref settings) {
    std::vector<std::string> parts;
    auto at = [](const char* key) { return [key] { return fmt::format("allocator_settings.{}", key); }; };
    Ref es = d_.get(settings, "expandable_segments");
    if (es != Document::kAbsent) {
      if (!d_.is_int(es)) bad(at("expandable_segments"), fmt::format("a bool, found {}", pickle::type_name(d_.type(es))));
      if (d_.as_int(es)) parts.push_back("expandable_segments:True");
    }
    Ref ms = d_.get(settings, "max_split_size");
    if (ms != Document::kAbsent) {
      std::int64_t v = int_value(ms, at("max_split_size"));  // SIZE_MAX (written as -1) = unlimited
      if (v > 0 && v < (std::int64_t(1) << 62)) parts.push_back(fmt::format("max_split_size_mb:{}", v / std::int64_t(MiB)));
    }
    Ref gc = d_.get(settings, "garbage_collection_threshold");
    if (gc != Document::kAbsent) {
      expect(gc, Type::Float, at("garbage_collection_threshold"));
      if (d_.as_float(gc) > 0) parts.push_back(fmt::format("garbage_collection_threshold:{}", d_.as_float(gc)));
    }
    Ref rd = d_.get(settings, "roundup_power2_divisions");
    if (rd != Document::kAbsent) {
      expect(rd, Type::Dict, at("roundup_power2_divisions"));
      std::vector<std::string> divs;
      std::string leading_zero;  // the first interval, where it has no divisions
      const auto& kv = d_.items(rd);
      for (std::size_t i = 0; i + 1 < kv.size(); i += 2) {
        const std::string_view size = str_of(kv[i], "key", at("roundup_power2_divisions"));
        const std::int64_t div = int_value(kv[i + 1], [&] {
          return fmt::format("allocator_settings.roundup_power2_divisions['{}']", pickle::escape_excerpt(size, 40));
        });
        if (div < 0)  // (0: the interval not set, as PyTorch writes every one)
          bad([&] {
                return fmt::format("allocator_settings.roundup_power2_divisions['{}']", pickle::escape_excerpt(size, 40));
              },
              fmt::format("a number of divisions, 0 or more, found {}", div));
        // PyTorch's parser gives the intervals below the first one listed that one's divisions:
        // a 0 before the first interval that has divisions is listed, so it stays 0.
        if (div > 0 && divs.empty() && !leading_zero.empty()) divs.push_back(fmt::format("{}:0", leading_zero));
        if (div > 0) divs.push_back(fmt::format("{}:{}", size, div));
        if (div == 0 && divs.empty() && leading_zero.empty()) leading_zero = std::string(size);
      }
      if (!divs.empty()) parts.push_back(fmt::format("roundup_power2_divisions:[{}]", fmt::join(divs, ",")));
    }
    return fmt::format("{}", fmt::join(parts, ","));
  }

  template <class Path>
  std::uint32_t origin_of(Ref entry, const Path& where) {
    return origin_of_frames(d_.get(entry, "frames"), where);
  }
  // A frame's file: not Python (C/C++ frames of stacks="all", or none), a library's Python
  // (PyTorch's, site- or dist-packages, the standard library), or the user's.
  enum FileKind : std::uint8_t { kNotPython, kLibraryPython, kUserPython };
  // The origin of an entry's (or a block's) frames; `where` names the entry, for the error of
  // frames that are not what PyTorch writes (each stack checked once, when it is first seen).
  template <class Path>
  std::uint32_t origin_of_frames(Ref frames, const Path& where) {
    if (frames == Document::kAbsent || d_.type(frames) == Type::None) return 0;
    if (d_.type(frames) != Type::List)
      bad([&] { return where() + ".frames"; }, fmt::format("a list, found {}", pickle::type_name(d_.type(frames))));
    if (reads_) reads_->push_back(frames);
    StackOrigin& known = stack_origin_[(frames * 0x9e3779b1u) >> (32 - kStackOriginBits)];
    if (known.list == frames) return known.origin;  // (its frames were read, and marked so, when it was made)
    check_frames(frames, where);
    const std::uint32_t origin = origin_of_stack(frames);
    known = {frames, origin};
    highest_stack_origin_ = std::max(highest_stack_origin_, frames);
    return origin;
  }
  // The origin of each stack seen, by its list's node: PyTorch shares one stack between the
  // entries that have it, and the pickle reader gives a stack it has read before the same list,
  // so most allocations find their origin here without a look at the frames. Forgotten, as
  // frame_seen_, for the nodes a drop numbers anew.
  static constexpr int kStackOriginBits = 10;
  struct StackOrigin {
    Ref list = Document::kAbsent;
    std::uint32_t origin = 0;
  };
  StackOrigin stack_origin_[std::size_t{1} << kStackOriginBits];
  Ref highest_stack_origin_ = 0;  // no list above it is remembered (a drop above it forgets none)
  // Each frame a dict with its filename and name strs and its line an int, as PyTorch writes.
  template <class Path>
  [[gnu::noinline]] void check_frames(Ref frames, const Path& where) {
    const pickle::Items items = d_.items(frames);
    for (std::size_t k = 0; k < items.size(); ++k) {
      auto at = [&] { return fmt::format("{}.frames[{}]", where(), k); };
      expect(items[k], Type::Dict, at);
      FrameSeen& seen = frame_seen(items[k]);  // (each distinct frame is checked once: stacks share them)
      if (seen.checked) continue;
      str_field(items[k], "filename", at);
      str_field(items[k], "name", at);
      int_value(present(d_.get(items[k], "line"), "line", at), [&] { return at() + ".line"; });
      seen.checked = true;
    }
  }
  std::uint32_t origin_of_stack(Ref frames) {
    if (d_.size(frames) == 0) return 0;
    // The innermost frame of the user's Python code: not PyTorch's, not C/C++ (stacks="all").
    Ref pick = Document::kAbsent, first_py = Document::kAbsent;
    for (Ref f : d_.items(frames)) {
      if (d_.type(f) != Type::Dict) continue;
      if (reads_) reads_->push_back(f);
      const FileKind kind = frame_seen(f).kind;
      if (kind == kNotPython) continue;
      if (first_py == Document::kAbsent) first_py = f;
      if (kind == kUserPython) {
        pick = f;
        break;
      }
    }
    if (pick == Document::kAbsent) pick = first_py;
    if (pick == Document::kAbsent) pick = d_.items(frames)[0];
    if (d_.type(pick) != Type::Dict) return 0;
    FrameSeen& frame = frame_seen(pick);
    if (frame.origin == kNoOrigin) frame.origin = origin_of_parts(pick);
    return frame.origin;
  }
  // What is known of frame dict f (its file's kind; its origin, once asked): PyTorch writes each
  // distinct frame once and fetches it in every later entry with it, so a stack's frames are
  // the same few nodes from entry to entry. Cached by node; forget_nodes_from forgets the
  // nodes a drop numbers anew (the dicts are final: the sink read them, so an append restarts).
  static constexpr std::uint32_t kNoOrigin = UINT32_MAX;
  struct FrameSeen {
    Ref frame = Document::kAbsent;
    FileKind kind = kNotPython;
    bool checked = false;  // of the shape PyTorch writes (check_frames)
    std::uint32_t origin = kNoOrigin;
  };
  static constexpr std::size_t kFramesSeen = 1024;
  FrameSeen frame_seen_[kFramesSeen];
  bool any_frame_seen_ = false;  // (a snapshot without stacks has none to forget)
  FrameSeen& frame_seen(Ref f) {
    FrameSeen& seen = frame_seen_[f & (kFramesSeen - 1)];
    if (seen.frame != f) {
      seen = {f, file_kind(d_.get(f, "filename")), false, kNoOrigin};
      any_frame_seen_ = true;
    }
    return seen;
  }
  std::uint32_t origin_of_parts(Ref pick) {
    // The frame's text from its three values: memoized strs and small ints, the same nodes from
    // entry to entry, so the text is made once per frame seen (a cache by node, forgotten when
    // nodes are dropped).
    const Ref parts[3] = {d_.get(pick, "filename"), d_.get(pick, "line"), d_.get(pick, "name")};
    OriginSeen& seen = origin_seen_[(parts[0] * 31u + parts[1] * 17u + parts[2]) & (kOriginsSeen - 1)];
    if (seen.numbering == nodes_seen_ && seen.parts[0] == parts[0] && seen.parts[1] == parts[1] &&
        seen.parts[2] == parts[2])
      return seen.origin;
    const std::uint32_t origin = origin_of_frame(pick);
    seen = {nodes_seen_, {parts[0], parts[1], parts[2]}, origin};
    return origin;
  }
  // A frame's file (FileKind), cached by node.
  FileKind file_kind(Ref fn) {
    if (fn == Document::kAbsent || d_.type(fn) != Type::Str) return kNotPython;
    FileSeen& seen = file_seen_[fn & (kFilesSeen - 1)];
    if (seen.numbering == nodes_seen_ && seen.file == fn) return seen.kind;
    const std::string_view name = d_.as_bytes(fn);
    FileKind kind = kNotPython;
    if (name.size() > 3 && name.substr(name.size() - 3) == ".py")
      kind = name.find("/torch/") == std::string_view::npos && name.find("site-packages/") == std::string_view::npos &&
                     name.find("dist-packages/") == std::string_view::npos && name.find("/lib/python") == std::string_view::npos
                 ? kUserPython
                 : kLibraryPython;
    seen = {nodes_seen_, fn, kind};
    return kind;
  }
  // Entries of origin_seen_ and file_seen_ hold for the node numbering they were made in: a
  // drop numbers nodes anew (forget_nodes_from), so an entry of an older one is not used.
  static constexpr std::size_t kOriginsSeen = 1024, kFilesSeen = 256;
  std::uint64_t nodes_seen_ = 1;  // the numbering now (0: an entry never made)
  struct OriginSeen {
    std::uint64_t numbering = 0;
    Ref parts[3] = {Document::kAbsent, Document::kAbsent, Document::kAbsent};
    std::uint32_t origin = 0;
  };
  struct FileSeen {
    std::uint64_t numbering = 0;
    Ref file = Document::kAbsent;
    FileKind kind = kNotPython;
  };
  std::vector<OriginSeen> origin_seen_ = std::vector<OriginSeen>(kOriginsSeen);
  std::vector<FileSeen> file_seen_ = std::vector<FileSeen>(kFilesSeen);
  // The origin text of frame dict `pick`: "file.py:line in name".
  std::uint32_t origin_of_frame(Ref pick) {
    auto text_of = [&](const char* key) -> std::string {
      Ref r = d_.get(pick, key);
      if (r == Document::kAbsent) return "?";
      if (d_.type(r) == Type::Str) return printable_text(d_.as_bytes(r).substr(0, 200));
      if (d_.is_int(r)) return std::to_string(d_.as_int(r));
      return "?";
    };
    std::string filename = text_of("filename");
    auto slash = filename.find_last_of('/');
    if (slash != std::string::npos) filename = filename.substr(slash + 1);
    std::string text = fmt::format("{}:{} in {}", filename, text_of("line"), text_of("name"));
    auto [it, inserted] = origin_index_.emplace(text, static_cast<std::uint32_t>(s_.origins.size()));
    if (inserted) s_.origins.push_back(text);
    return it->second;
  }

  BufferId new_id() {
    if (!free_ids_.empty()) {
      BufferId id = free_ids_.back();
      free_ids_.pop_back();
      return id;
    }
    return next_id_++;
  }

  void push_op(Op::Kind kind, BufferId id, Bytes bytes, StreamId stream, std::uint64_t entry, std::uint32_t origin) {
    Op op;
    op.kind = kind;
    op.id = id;
    op.bytes = bytes;
    op.stream = stream;
    op.source_line = entry + 1;
    s_.ops.push_back(op);
    s_.op_origin.push_back(origin);
  }

  // A free converted but held back until the entry that places it (taken_back_, frees_in_releases_).
  struct TakenBack {
    BufferId id;
    StreamId stream;
    std::uint64_t entry;
  };
  // A block the trace has allocated, or found alive at its start, until its free_completed.
  struct Live {
    BufferId id;
    Bytes bytes;
    StreamId stream;
    bool free_requested;
  };
  // Whether the trace freed `addr` before (and has not allocated it again: the caller found it
  // not live): a second free of it is a broken trace, where a free of an address never seen is
  // a block allocated before the trace's first entry. live_ holds only live blocks (hundreds,
  // where a trace uses tens of thousands of addresses over its run), so it stays in the cache,
  // and its lookups are on every entry's path; the addresses freed are set aside in a short log
  // and joined to the set of freed addresses a few thousand at a time, off that path (inserts
  // that do not wait on one another).
  bool freed_before(DevPtr addr) {
    absorb_freed_log();
    return freed_addrs_.find(addr) != nullptr;
  }
  void log_freed(DevPtr addr) {
    freed_log_.push_back(addr);
    if (freed_log_.size() >= kFreedLogMax) absorb_freed_log();
  }
  void absorb_freed_log() {
    constexpr std::size_t kAhead = 8;  // (the set is larger than the cache: its slots prefetched)
    const std::size_t n = freed_log_.size();
    for (std::size_t i = 0; i < n; ++i) {
      if (i + kAhead < n) freed_addrs_.prefetch(freed_log_[i + kAhead]);
      freed_addrs_.put(freed_log_[i], NoValue{});
    }
    freed_log_.clear();
  }
  static constexpr std::size_t kFreedLogMax = 4096;

  // The keys of a trace entry that the conversion reads, the value of each found in one pass
  // over the entry (the last where a key repeats, as Document::get): a trace has ~7 keys per
  // entry, and key strings are memoized in the pickle, so each key node is classified once.
  enum EntryKey : std::uint8_t {
    kUnclassified, kOtherKey, kAction, kAddr, kSize, kStream, kDeviceFree, kFrames, kTakenBack, kOwnRelease, kKeys
  };
  struct EntryFields {
    Ref value[kKeys] = {Document::kAbsent, Document::kAbsent, Document::kAbsent, Document::kAbsent, Document::kAbsent,
                        Document::kAbsent, Document::kAbsent, Document::kAbsent, Document::kAbsent, Document::kAbsent};
    Ref operator[](EntryKey k) const { return value[k]; }
  };
  std::vector<std::uint8_t> key_class_;  // by node: the EntryKey of a key node
  EntryKey classify_key(Ref k) {
    if (Document::is_immediate(k)) return kOtherKey;  // an int key: no node, not a name
    if (__builtin_expect(k >= key_class_.size(), 0)) key_class_.resize(d_.node_count(), kUnclassified);  // a parse goes on
    std::uint8_t& c = key_class_[k];
    if (c != kUnclassified) return static_cast<EntryKey>(c);
    static constexpr std::pair<const char*, EntryKey> kNames[] = {{"action", kAction}, {"addr", kAddr},
                                                                  {"size", kSize},     {"stream", kStream},
                                                                  {"device_free", kDeviceFree}, {"frames", kFrames},
                                                                  {"gpumembench_taken_back", kTakenBack},
                                                                  {"gpumembench_own_release", kOwnRelease}};
    c = kOtherKey;
    if (d_.type(k) == Type::Str)
      for (const auto& [name, key] : kNames)
        if (d_.as_bytes(k) == name) c = key;
    return static_cast<EntryKey>(c);
  }
  EntryFields entry_fields(const Ref* kv, std::size_t n) {  // a dict's keys and values, interleaved
    EntryFields f;
    const std::size_t pairs = n / 2;
    if (pairs == last_pairs_) {  // the keys of the entry before, mostly
      std::size_t j = 0;
      while (j < pairs && kv[2 * j] == last_keys_[j]) ++j;
      if (j == pairs) {
        for (j = 0; j < pairs; ++j) f.value[last_classes_[j]] = kv[2 * j + 1];
        return f;
      }
    }
    for (std::size_t j = 0; j + 1 < n; j += 2) f.value[classify_key(kv[j])] = kv[j + 1];
    last_pairs_ = pairs <= kRememberedPairs ? pairs : kNoneRemembered;
    for (std::size_t j = 0; j < pairs && j < kRememberedPairs; ++j) {
      last_keys_[j] = kv[2 * j];
      last_classes_[j] = key_class_of(kv[2 * j]);
    }
    return f;
  }
  EntryKey key_class_of(Ref k) const {  // k classified
    return Document::is_immediate(k) ? kOtherKey : static_cast<EntryKey>(key_class_[k]);
  }
  // The keys of the last entry classified one by one, and their classes: the entries of a trace
  // mostly have the same keys in the same order (memoized: the same nodes), so most entries
  // are classified by comparing their keys with these. Forgotten when nodes are dropped (their
  // numbers are used again).
  static constexpr std::size_t kRememberedPairs = 16, kNoneRemembered = SIZE_MAX;
  Ref last_keys_[kRememberedPairs];
  std::uint8_t last_classes_[kRememberedPairs];
  std::size_t last_pairs_ = kNoneRemembered;

  void convert_trace_entries(Ref trace) {
    const auto& entries = d_.items(trace);
    begin_trace(s_.device, entries.size());
    for (std::size_t i = 0; i < entries.size(); ++i) convert_entry(entries[i], i);
    end_trace();
  }

 public:
  void convert_entry(Ref e, std::uint64_t i) {
    expect(e, Type::Dict, [&] { return fmt::format("device_traces[{}][{}]", s_.device, i); });
    if (reads_) reads_->push_back(e);
    const auto& kv = d_.items(e);
    convert_fields(entry_fields(kv.begin(), kv.size()), i);
  }
  // An entry the parser read without making its dict (pickle::ListSink::take_flat).
  void convert_flat_entry(const Ref* kv, std::size_t n, std::uint64_t i) { convert_fields(entry_fields(kv, n), i); }

 private:
  // A trace entry's action. The action strs are memoized in the pickle (the same few nodes in
  // every entry): each node is classified once, in a small cache by node.
  enum Action : std::uint8_t { kUnknownAction, kAllocAction, kFreeRequested, kFreeCompleted, kSegmentAlloc,
                               kSegmentFree, kSegmentMap, kSegmentUnmap, kOomAction, kIgnoredAction };
  struct CachedAction {
    Ref node;
    Action action;
  };
  CachedAction action_cache_[8] = {{Document::kAbsent, kUnknownAction}, {Document::kAbsent, kUnknownAction},
                                   {Document::kAbsent, kUnknownAction}, {Document::kAbsent, kUnknownAction},
                                   {Document::kAbsent, kUnknownAction}, {Document::kAbsent, kUnknownAction},
                                   {Document::kAbsent, kUnknownAction}, {Document::kAbsent, kUnknownAction}};
  template <class Path>
  Action action_of(Ref r, const Path& where) {
    CachedAction& c = action_cache_[r & 7];
    if (c.node == r && r != Document::kAbsent) return c.action;
    const std::string_view a = str_of(r, "action", where);  // throws unless a str
    static constexpr std::pair<const char*, Action> kNames[] = {
        {"alloc", kAllocAction},          {"free_requested", kFreeRequested}, {"free_completed", kFreeCompleted},
        {"segment_alloc", kSegmentAlloc}, {"segment_free", kSegmentFree},     {"segment_map", kSegmentMap},
        {"segment_unmap", kSegmentUnmap}, {"oom", kOomAction},                {"snapshot", kIgnoredAction},
        {"user_defined", kIgnoredAction}};
    Action action = kUnknownAction;
    for (const auto& [name, value] : kNames)
      if (a == name) action = value;
    if (!Document::is_immediate(r)) c = {r, action};
    return action;
  }

  void convert_fields(const EntryFields& f, std::uint64_t i) {
    const int dev = s_.device;
    auto where = [&] { return fmt::format("device_traces[{}][{}]", dev, i); };
    const Action action = action_of(f[kAction], where);
    // Whether the entry before was the free_requested of an address, and which.
    const bool after_free_requested = prev_free_requested_;
    const DevPtr requested_addr = prev_requested_addr_;
    prev_free_requested_ = false;
    // A free_requested that this entry does not complete at once waits on another stream: its
    // op comes now, before this entry's (Op::Kind::FreeRequested).
    if (__builtin_expect(after_free_requested, 0)) {
      const Ref p = f[kAddr];
      // (A block our export marks as taken back inside a request waited, whatever came between.)
      const bool completes = action == kFreeCompleted && p != Document::kAbsent && d_.is_int(p) &&
                             static_cast<DevPtr>(d_.as_int(p)) == requested_addr && !is_taken_back(f);
      if (!completes) push_free_requested(requested_addr, prev_requested_entry_);
    }
    if (action == kFreeRequested) {
      Ref p = f[kAddr];
      if (p != Document::kAbsent && d_.is_int(p)) {
        prev_free_requested_ = true;
        prev_requested_addr_ = static_cast<DevPtr>(d_.as_int(p));
        prev_requested_entry_ = i;
      }
    }
    if (action == kIgnoredAction) {
      ++ignored_;
      return;
    }
    if (__builtin_expect(releases_open_, 0) && action != kSegmentFree && action != kSegmentUnmap &&
        action != kFreeCompleted)
      close_releases(action != kSegmentAlloc && action != kSegmentMap && action != kOomAction);
    if (action == kOomAction) {
      Bytes size = uint_of(f[kSize], "size", where);
      Ref df = f[kDeviceFree];
      Bytes device_free = df != Document::kAbsent && d_.is_int(df) && d_.as_int(df) > 0 ? static_cast<Bytes>(d_.as_int(df)) : 0;
      StreamId stream = stream_id(int_value(present(f[kStream], "stream", where), [&] { return where() + ".stream"; }));
      s_.ooms.push_back({size, device_free, s_.ops.size(), i});
      BufferId id = new_id();
      std::uint32_t origin = origin_of_frames(f[kFrames], where);
      push_op(Op::Kind::Alloc, id, size, stream, i, origin);
      push_op(Op::Kind::Free, id, 0, stream, i, 0);
      free_ids_.push_back(id);
      push_taken_back();
      return;
    }
    DevPtr addr = uint_of(f[kAddr], "addr", where);
    Bytes size = uint_of(f[kSize], "size", where);
    if (action == kAllocAction) {
      StreamId stream = stream_id(int_value(present(f[kStream], "stream", where), [&] { return where() + ".stream"; }));
      if (live_.find(addr))
        throw TraceError::in_content(file_, where(),
                                     fmt::format("alloc at address {:#x}, which is already allocated and was never "
                                                 "freed (free_completed) in the trace",
                                                 addr));
      const Live l{new_id(), size, stream, false};
      live_.put(addr, l);
      push_op(Op::Kind::Alloc, l.id, size, stream, i, origin_of_frames(f[kFrames], where));
      push_taken_back();
    } else if (action == kFreeRequested || action == kFreeCompleted) {
      Live* it = live_.find(addr);
      if (!it && freed_before(addr))
        throw TraceError::in_content(
            file_, where(),
            fmt::format("{} at address {:#x}, which the trace already freed (free_completed) and did not allocate again",
                        action == kFreeRequested ? "free_requested" : "free_completed", addr));
      if (!it) {
        // Allocated before the trace's first entry (the ring buffer dropped its alloc).
        StreamId stream = stream_id(int_value(present(f[kStream], "stream", where), [&] { return where() + ".stream"; }));
        BufferId tagged = kInitialTag | initial_.size();
        initial_.push_back({addr, size, stream, tagged, 0, false});
        live_.put(addr, Live{tagged, size, stream, false});
        it = live_.find(addr);
      }
      if (action == kFreeRequested) {
        // PyTorch records a block's free request once (its free()); a second before the block
        // returned (free_completed) is no trace PyTorch writes.
        if (it->free_requested)
          throw TraceError::in_content(file_, where(),
                                       fmt::format("free_requested at address {:#x}, whose free was already requested "
                                                   "and not yet completed (free_completed)",
                                                   addr));
        ++requested_pending_;
        it->free_requested = true;
        return;
      }
      // Our export's mark on a block whose free was requested: taken back inside the next request
      // (after its failed attempts), so its free follows that request (the replay takes the block
      // back there too). Without a request before it, a plain free.
      const bool taken_back = it->free_requested && is_taken_back(f);
      if (it->free_requested) {
        --requested_pending_;
        // A free_completed that is not right after its free_requested waited on another stream.
        if (!after_free_requested || requested_addr != addr || taken_back) ++delayed_frees_;
      }
      if (__builtin_expect(taken_back, 0)) {
        taken_back_.push_back({it->id, it->stream, i});
      } else if (__builtin_expect(releases_open_, 0)) {
        frees_in_releases_.push_back({it->id, it->stream, i});
      } else {
        push_free(it->id, it->stream, i);
      }
      Live gone;
      live_.take(addr, gone);
      log_freed(addr);
    } else if (action == kSegmentAlloc || action == kSegmentFree || action == kSegmentMap ||
               action == kSegmentUnmap) {
      RecordedSegmentEvent ev;
      ev.kind = action == kSegmentAlloc  ? RecordedSegmentEvent::Kind::Malloc
                : action == kSegmentFree ? RecordedSegmentEvent::Kind::Free
                : action == kSegmentMap  ? RecordedSegmentEvent::Kind::Map
                                         : RecordedSegmentEvent::Kind::Unmap;
      ev.bytes = size;
      ev.address = addr;
      ev.before_op = s_.ops.size();
      ev.entry = i;
      s_.segment_events.push_back(ev);
      // (Our export marks the releases another allocator made by its own policy: no program's.)
      if ((action == kSegmentFree || action == kSegmentUnmap) && !is_marked(f[kOwnRelease])) releases_open_ = true;
    } else {
      throw TraceError::in_content(file_, where() + ".action",
                                   fmt::format("expected one of alloc, free_requested, free_completed, segment_alloc, "
                                               "segment_free, segment_map, segment_unmap, oom, snapshot, user_defined; "
                                               "found '{}'",
                                               pickle::escape_excerpt(str_of(f[kAction], "action", where), 40)));
    }
  }

  // The segment releases since the last such answer were the program's empty_cache() (true) or a
  // request's own; then the frees completed among them.
  void close_releases(bool empty_cache) {
    releases_open_ = false;
    if (empty_cache) {
      push_op(Op::Kind::EmptyCache, 0, 0, 0, s_.segment_events.back().entry, 0);
      ++s_.empty_caches;
    }
    push_frees(frees_in_releases_);
  }

  // The free request of the block at addr (live: its free_requested entry made it so).
  void push_free_requested(DevPtr addr, std::uint64_t entry) {
    if (const Live* l = live_.find(addr)) push_op(Op::Kind::FreeRequested, l->id, 0, l->stream, entry, 0);
  }

  // An entry with our export's mark gpumembench_taken_back: True (any other value: no mark).
  bool is_taken_back(const EntryFields& f) const { return is_marked(f[kTakenBack]); }
  // One of our export's marks: the value True (absent or any other: no mark).
  bool is_marked(Ref mark) const {
    return __builtin_expect(mark != Document::kAbsent, 0) && d_.type(mark) == Type::Bool && d_.as_int(mark) != 0;
  }
  // A block's free; its id is given to a later alloc (not the tagged ids of blocks alive before
  // the trace).
  void push_free(BufferId id, StreamId stream, std::uint64_t entry) {
    push_op(Op::Kind::Free, id, 0, stream, entry, 0);
    if (!(id & kInitialTag)) free_ids_.push_back(id);
  }
  // Frees held back until the entry that placed them, in their order; the list emptied.
  void push_frees(std::vector<TakenBack>& frees) {
    for (const TakenBack& t : frees) push_free(t.id, t.stream, t.entry);
    frees.clear();
  }
  // The frees of blocks taken back inside the request just converted (kTakenBack), after it.
  void push_taken_back() {
    if (__builtin_expect(taken_back_.empty(), 1)) return;
    push_frees(taken_back_);
  }

  void end_trace() {
    if (releases_open_) close_releases(true);
    push_taken_back();
    if (prev_free_requested_) push_free_requested(prev_requested_addr_, prev_requested_entry_);
    prev_free_requested_ = false;
    if (delayed_frees_)
      s_.notes.push_back(fmt::format("{} blocks returned to the allocator later than their free was requested "
                                     "(used on another stream: record_stream): each is freed at its free_requested "
                                     "and returns at its free_completed; `caching` stops counting it as allocated "
                                     "at the request, as PyTorch does, the other allocators at its return",
                                     delayed_frees_));
    if (requested_pending_)
      s_.notes.push_back(fmt::format("{} blocks were freed but not yet returned when the snapshot was taken "
                                     "(free_requested without free_completed): their memory is still taken at "
                                     "the end",
                                     requested_pending_));
    if (s_.empty_caches)
      s_.notes.push_back(fmt::format("{} {} of torch.cuda.empty_cache() by the program (segments released where no "
                                     "allocation asked for memory): replayed as the allocator's empty_cache there",
                                     s_.empty_caches, s_.empty_caches == 1 ? "call" : "calls"));
    if (ignored_) s_.notes.push_back(fmt::format("{} snapshot/user_defined entries ignored", ignored_));
    if (!s_.ooms.empty())
      s_.notes.push_back(fmt::format("{} recorded OOMs: each is replayed as an allocation of its size, freed right "
                                     "away if it succeeds",
                                     s_.ooms.size()));
  }

 private:
  // Blocks alive when the snapshot was taken that the trace never allocated: alive since before
  // its first entry (or, without a trace, the whole state to replay).
  void read_blocks_alive(Ref segments) {
    std::uint64_t checked = 0;
    // initial_[0, from_trace): blocks the trace freed (or asked to free) without allocating them.
    const std::size_t from_trace = initial_.size();
    // What the trace reserved, its segment events replayed in order: the segments it cudaMalloc'd
    // that are live at its end, and the expandable segments' pages (2 MiB) mapped at its end. A
    // segment_free or an unmap of memory it had not reserved, and a listed segment (or the part of
    // one: PyTorch lists an expandable segment's mapped ranges as segments of their own) it does
    // not hold at its end, were reserved before its first entry.
    constexpr DevPtr kPage = DevPtr(2) << 20;
    std::unordered_map<DevPtr, Bytes> mallocs;
    std::unordered_set<DevPtr> pages;
    std::uint64_t page_budget = std::uint64_t(1) << 26;  // page steps in all (a hostile size ends them)
    bool pages_known = true;
    auto each_page = [&](DevPtr start, Bytes bytes, auto&& f) {
      const DevPtr end = bytes > ~start ? ~DevPtr(0) : start + bytes;
      for (DevPtr p = start / kPage * kPage; p < end && pages_known; p += kPage) {
        if (!page_budget--) pages_known = false;
        else f(p);
        if (p > ~DevPtr(0) - kPage) break;
      }
    };
    auto from_before = [&](Bytes bytes) {
      ++s_.segments_from_before;
      s_.bytes_from_before += bytes;
    };
    for (const RecordedSegmentEvent& e : s_.segment_events) {
      switch (e.kind) {
        case RecordedSegmentEvent::Kind::Malloc: mallocs[e.address] = e.bytes; break;
        case RecordedSegmentEvent::Kind::Free:
          if (!mallocs.erase(e.address)) from_before(e.bytes);
          break;
        case RecordedSegmentEvent::Kind::Map: each_page(e.address, e.bytes, [&](DevPtr p) { pages.insert(p); }); break;
        case RecordedSegmentEvent::Kind::Unmap: {
          Bytes missing = 0;
          each_page(e.address, e.bytes, [&](DevPtr p) { missing += pages.erase(p) ? 0 : kPage; });
          if (missing && pages_known) from_before(std::min(missing, e.bytes));
          break;
        }
      }
    }
    auto reserved_before = [&](DevPtr address, DevPtr end) -> Bytes {
      if (mallocs.count(address) || !pages_known) return 0;
      Bytes missing = 0;
      each_page(address, end - address, [&](DevPtr p) { missing += pages.count(p) ? 0 : kPage; });
      return pages_known ? std::min<Bytes>(missing, end - address) : 0;
    };
    for (std::size_t si = 0; si < d_.size(segments); ++si) {
      Ref seg = d_.items(segments)[si];
      auto where = [&] { return fmt::format("segments[{}]", si); };
      Ref dev = d_.get(seg, "device");
      int device = dev == Document::kAbsent ? 0 : static_cast<int>(d_.as_int(dev));
      if (device != s_.device) continue;
      DevPtr address = uint_field(seg, "address", where);
      Ref st = d_.get(seg, "stream");
      StreamId stream = st == Document::kAbsent ? 0 : stream_id(int_value(st, [&] { return where() + ".stream"; }));
      Ref blocks = field(seg, "blocks", where);
      auto bwhere = [&] { return where() + ".blocks"; };
      expect(blocks, Type::List, bwhere);
      DevPtr at = address;
      for (std::size_t bi = 0; bi < d_.size(blocks); ++bi) {
        Ref b = d_.items(blocks)[bi];
        auto bw = [&] { return fmt::format("segments[{}].blocks[{}]", si, bi); };
        expect(b, Type::Dict, bw);
        Bytes size = uint_field(b, "size", bw);
        Ref ba = d_.get(b, "address");
        DevPtr baddr = ba == Document::kAbsent ? at : static_cast<DevPtr>(int_value(ba, [&] { return bw() + ".address"; }));
        at = baddr + size;
        std::string_view state = str_field(b, "state", bw);
        if (state != "active_allocated" && state != "active_pending_free") {
          if (state != "inactive")
            throw TraceError::in_content(file_, bw() + ".state",
                                fmt::format("expected active_allocated, active_pending_free or inactive; found '{}'",
                                            pickle::escape_excerpt(state, 40)));
          continue;
        }
        ++checked;
        if (const Live* l = live_.find(baddr)) {  // allocated in the trace: alive at its end
          // A block listed before, alive at the start: two blocks at one address. (One the trace
          // asked to free without allocating it, its free pending, is this block.)
          if ((l->id & kInitialTag) && (l->id & ~kInitialTag) >= from_trace)
            throw TraceError::in_content(file_, bw() + ".address",
                                         fmt::format("a block at {:#x}, where a block listed before is alive too", baddr));
          continue;
        }
        Bytes requested = size;
        std::uint32_t origin = origin_of(b, bw);
        Ref rq = d_.get(b, "requested_size");
        Ref hist = d_.get(b, "history");
        if (rq != Document::kAbsent && d_.is_int(rq) && d_.as_int(rq) > 0) {
          requested = static_cast<Bytes>(d_.as_int(rq));
        } else if (hist != Document::kAbsent && d_.type(hist) == Type::List && d_.size(hist) > 0 &&
                   d_.type(d_.items(hist)[0]) == Type::Dict) {
          Ref h0 = d_.items(hist)[0];
          Ref rs = d_.get(h0, "real_size");
          if (rs != Document::kAbsent && d_.is_int(rs) && d_.as_int(rs) > 0) requested = static_cast<Bytes>(d_.as_int(rs));
          origin = origin_of(h0, [&] { return bw() + ".history[0]"; });
        }
        BufferId tagged = kInitialTag | initial_.size();
        initial_.push_back({baddr, requested, stream, tagged, origin, state == "active_pending_free"});
        live_.put(baddr, Live{tagged, requested, stream, false});
      }
      if (s_.has_trace) {
        Ref ts = d_.get(seg, "total_size");
        const DevPtr end = std::max<DevPtr>(
            at, ts != Document::kAbsent && d_.is_int(ts) && d_.as_int(ts) > 0 ? address + static_cast<DevPtr>(d_.as_int(ts))
                                                                               : address);
        if (const Bytes before = reserved_before(address, std::max(end, address + 1))) from_before(before);
      }
    }
    (void)checked;
  }

  // Prepends the blocks alive at the start (address order) and renumbers ids: those blocks take
  // 0..k-1, the trace's own ids follow.
  void finish() {
    const std::size_t k = initial_.size();
    s_.blocks_alive_at_start = k;
    s_.ids_end = next_id_ + k;  // the trace's ids follow the k blocks alive at its start
    if (k) {  // else nothing to prepend and no id to change
      std::vector<std::size_t> order(k);
      for (std::size_t i = 0; i < k; ++i) order[i] = i;
      std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return initial_[a].address < initial_[b].address; });
      std::vector<BufferId> initial_id(k);
      decltype(s_.ops) ops;
      decltype(s_.op_origin) origins;
      ops.reserve(k + s_.ops.size());
      origins.reserve(k + s_.ops.size());
      for (std::size_t j = 0; j < k; ++j) {
        const InitialBlock& b = initial_[order[j]];
        initial_id[order[j]] = j;
        Op op;
        op.kind = Op::Kind::Alloc;
        op.id = j;
        op.bytes = b.bytes;
        op.stream = b.stream;
        op.source_line = 0;
        ops.push_back(op);
        origins.push_back(b.origin);
      }
      for (std::size_t j = 0; j < k; ++j) {  // then the free requests of those freed before the trace
        const InitialBlock& b = initial_[order[j]];
        if (!b.free_pending) continue;
        Op op;
        op.kind = Op::Kind::FreeRequested;
        op.id = j;
        op.stream = b.stream;
        op.source_line = 0;
        ops.push_back(op);
        origins.push_back(0);
      }
      const std::size_t prepended = ops.size();
      for (std::size_t i = 0; i < s_.ops.size(); ++i) {
        Op op = s_.ops[i];
        op.id = op.id & kInitialTag ? initial_id[op.id & ~kInitialTag] : op.id + k;
        ops.push_back(op);
        origins.push_back(s_.op_origin[i]);
      }
      s_.ops = std::move(ops);
      s_.op_origin = std::move(origins);
      for (auto& ev : s_.segment_events) ev.before_op += prepended;
      for (auto& oom : s_.ooms) oom.op += prepended;
    }
    if (k) {
      s_.notes.push_back(
          s_.has_trace
              ? fmt::format("{} blocks were alive before the trace's first entry (the trace buffer overflowed, or "
                            "recording started late): allocated first, in address order",
                            k)
              : fmt::format("the snapshot has no trace for device {}: replaying the {} blocks alive when it was "
                            "taken, in address order",
                            s_.device, k));
    }
    if (s_.segments_from_before)
      s_.notes.push_back(fmt::format(
          "{} segments or ranges ({}) were reserved before the trace's first entry (listed in the snapshot's "
          "segments, freed or unmapped, with no segment_alloc or segment_map of them in the trace): the replay "
          "reserves only what the trace asks for",
          s_.segments_from_before, format_bytes(s_.bytes_from_before)));
    if (!streams_.empty())
      s_.notes.push_back(fmt::format("streams besides the default one: {}, numbered from 1 in order of first use",
                                     streams_.size()));
  }

  const Document& d_;
  const std::string& file_;
  const TraceSink* sink_ = nullptr;
  std::vector<Ref>* reads_ = nullptr;
  PyTorchSnapshot s_;
  std::uint64_t delayed_frees_ = 0, ignored_ = 0, requested_pending_ = 0;
  bool prev_free_requested_ = false;  // the entry before: a free_requested of prev_requested_addr_
  DevPtr prev_requested_addr_ = 0;
  std::uint64_t prev_requested_entry_ = 0;  // that entry's index
  std::vector<TakenBack> taken_back_;  // frees waiting for the request they were made in
  // Segment releases (segment_free, segment_unmap) since the last entry that tells whose they
  // were: a request's own (its retry, or the garbage collection before it) end in the new memory
  // it then takes (segment_alloc, segment_map) or in its OOM; any other entry after them (an
  // alloc served without new memory, a free request, the trace's end) means the program released
  // the cache itself (torch.cuda.empty_cache()), before that entry. The frees completed among
  // them wait here for the answer (an empty_cache comes before them: PyTorch records the blocks
  // it waits for before its releases, and a later free after them).
  bool releases_open_ = false;
  std::vector<TakenBack> frees_in_releases_;
  std::unordered_map<std::int64_t, StreamId> streams_;
  LiveMap<Live> live_;
  std::vector<DevPtr> freed_log_;     // freed since the last absorb_freed_log, in order
  LiveMap<NoValue> freed_addrs_;  // every address freed before that
  std::vector<InitialBlock> initial_;
  std::vector<BufferId> free_ids_;
  BufferId next_id_ = 0;
  std::unordered_map<std::string, std::uint32_t> origin_index_;
};

// Converts the traces while the pickle is parsed (pickle::ListSink): the lists of
// device_traces, found by their place in the snapshot dict as Python's pickler writes it,
//   root dict, MARK, key, value, ..., 'device_traces', outer list, [MARK,] device lists...
// Each entry is converted as it comes, and the parser drops each batch of entries once it is
// converted: the tree never holds the trace. A device's conversion error is kept and thrown
// only if that device is replayed, after the checks that come before it (as Converter::run
// without a sink would meet them).
class TraceSink final : public pickle::ListSink {
 public:
  TraceSink(const std::string& file, std::size_t input_bytes) : file_(file), input_bytes_(input_bytes) {}

  bool claim(const Document& doc, const Ref* stack, std::size_t size, std::size_t p, const std::size_t* marks,
             std::size_t n_marks) override {
    (void)size;
    std::size_t below = 0;  // the marks at or below p: 1 or 2 (counted no further)
    while (below < n_marks && below < 3 && marks[below] <= p) ++below;
    if (below == 0 || below > 2 || marks[0] != 1 || doc.type(stack[0]) != Type::Dict) return false;
    // One device list: [root, (mark) ..., 'device_traces', outer, list]; several:
    // [root, (mark) ..., 'device_traces', outer, (mark) list0, list1, ...].
    const std::size_t outer_at = below == 1 ? p - 1 : marks[1] - 1;
    if (outer_at < 2 || outer_at % 2 != 0) return false;  // the root's values sit at 2, 4, 6...
    const Ref outer = stack[outer_at], key = stack[outer_at - 1];
    if (doc.type(outer) != Type::List || doc.type(key) != Type::Str || doc.as_bytes(key) != "device_traces") return false;
    const std::size_t device = doc.size(outer) + (below == 1 ? 0 : p - marks[1]);
    if (device > static_cast<std::size_t>(INT32_MAX)) return false;
    Claim c;
    c.root = stack[0];
    c.outer = outer;
    c.list = stack[p];
    c.device = device;
    c.converter = std::make_unique<Converter>(doc, file_);
    // The first device's ops reserved, not touched (huge pages): a trace entry takes 40 bytes
    // of pickle or more. Other devices' (a snapshot seldom has two) grow as they come.
    c.converter->begin_trace(static_cast<int>(device), claims_.empty() ? input_bytes_ / 40 : 0);
    claims_.push_back(std::move(c));
    return true;
  }

  bool takes_flat() const override { return true; }
  void take_flat(const Document&, Ref list, const Ref* kv, const std::uint32_t* ends, std::size_t n,
                 std::vector<Ref>& read) override {
    convert(list, n, &read, [&](Converter& to, std::size_t k, std::uint64_t entry) {
      const std::uint32_t from = k ? ends[k - 1] : 0;
      to.convert_flat_entry(kv + from, ends[k] - from, entry);
    });
  }

  void take(const Document&, Ref list, const Ref* items, std::size_t n, std::vector<Ref>& read) override {
    convert(list, n, &read,
            [&](Converter& to, std::size_t k, std::uint64_t entry) { to.convert_entry(items[k], entry); });
  }

  void nodes_dropped(Ref floor) override {
    for (Claim& c : claims_) c.converter->forget_nodes_from(floor);
  }

  // After the parse: every claimed list sits where it was claimed (else the parse is redone
  // without a sink: SinkRestart).
  void check_places(const Document& doc) const {
    for (const Claim& c : claims_)
      if (doc.root() != c.root || doc.get(c.root, "device_traces") != c.outer || c.device >= doc.size(c.outer) ||
          doc.items(c.outer)[c.device] != c.list)
        throw pickle::SinkRestart{};
  }

  // The entries of device_traces[device] the sink took (traces: that list of lists).
  std::uint64_t entries(Ref traces, std::size_t device) const {
    const Claim* c = find(traces, device);
    return c ? c->entries : 0;
  }
  // The converted trace of device_traces[device], or nullptr; throws the conversion's error.
  Converter* converted(Ref traces, std::size_t device) const {
    const Claim* c = find(traces, device);
    if (!c) return nullptr;
    if (c->error) std::rethrow_exception(c->error);
    return c->converter.get();
  }

 private:
  struct Claim {
    Ref root = 0, outer = 0, list = 0;
    std::size_t device = 0;
    std::unique_ptr<Converter> converter;
    std::uint64_t entries = 0;
    std::exception_ptr error;
  };
  // n entries of claimed list `list`, each converted by one(converter, k, entry index), the
  // containers read recorded in `read`; the first error stops the device's conversion.
  template <class ConvertOne>
  void convert(Ref list, std::size_t n, std::vector<Ref>* read, ConvertOne&& one) {
    Claim& c = claim_of(list);
    if (!c.error) {
      c.converter->record_reads(read);
      try {
        for (std::size_t k = 0; k < n; ++k) one(*c.converter, k, c.entries + k);
      } catch (...) {
        c.error = std::current_exception();  // thrown if this device is replayed
      }
      c.converter->record_reads(nullptr);
    }
    c.entries += n;
  }
  Claim& claim_of(Ref list) {
    if (claims_[last_].list != list)
      for (std::size_t i = 0; i < claims_.size(); ++i)
        if (claims_[i].list == list) last_ = i;
    return claims_[last_];
  }
  const Claim* find(Ref traces, std::size_t device) const {
    for (const Claim& c : claims_)
      if (c.outer == traces && c.device == device) return &c;
    return nullptr;
  }

  const std::string& file_;
  std::size_t input_bytes_;
  std::vector<Claim> claims_;
  std::size_t last_ = 0;
};

std::uint64_t Converter::entries_of(Ref traces, std::size_t device) const {
  return d_.size(d_.items(traces)[device]) + (sink_ ? sink_->entries(traces, device) : 0);
}

void Converter::convert_trace(Ref traces, Ref trace) {
  if (Converter* done = sink_ ? sink_->converted(traces, static_cast<std::size_t>(s_.device)) : nullptr) {
    adopt_trace(std::move(*done));
    end_trace();
    return;
  }
  convert_trace_entries(trace);
}

}  // namespace

std::vector<std::pair<Bytes, DevPtr>> recorded_placements(const PyTorchSnapshot& snapshot) {
  std::vector<std::pair<Bytes, DevPtr>> out;
  for (const RecordedSegmentEvent& e : snapshot.segment_events)
    if (e.kind == RecordedSegmentEvent::Kind::Malloc) out.emplace_back(e.bytes, e.address);
  return out;
}

namespace {

template <class Bytes>
Document parse_snapshot(Bytes&& pickle_bytes, const std::string& file, pickle::ListSink* sink) {
  try {
    return pickle::parse(pickle_bytes, file, sink);
  } catch (const pickle::PickleError& e) {
    // Keep the message, name the place the same way as the other snapshot errors.
    std::string msg = e.what();
    std::string prefix = fmt::format("{}: byte {}: ", file, e.offset);
    if (msg.rfind(prefix, 0) == 0) msg = msg.substr(prefix.size());
    throw TraceError::at_byte(file, e.offset, msg);
  }
}

// The trace converted while parsing; where the pickle refers back to what was converted
// (pickle::SinkRestart), parsed again whole and converted after. `owned`: the pickle's bytes,
// freed once parsed.
PyTorchSnapshot convert(std::string_view pickle_bytes, const std::string& file, int device, WholeContent* owned) {
  try {
    TraceSink sink(file, pickle_bytes.size());
    const Document doc = parse_snapshot(pickle_bytes, file, &sink);
    sink.check_places(doc);
    if (owned) WholeContent().swap(*owned);
    return Converter(doc, file).run(device, &sink);
  } catch (const pickle::SinkRestart&) {
  }
  return convert_pytorch_snapshot_unstreamed(pickle_bytes, file, device);
}

}  // namespace

PyTorchSnapshot convert_pytorch_snapshot_unstreamed(std::string_view pickle_bytes, const std::string& file, int device) {
  const Document doc = parse_snapshot(pickle_bytes, file, nullptr);
  return Converter(doc, file).run(device, nullptr);
}

PyTorchSnapshot convert_pytorch_snapshot(std::string_view pickle_bytes, const std::string& file, int device) {
  return convert(pickle_bytes, file, device, nullptr);
}

PyTorchSnapshot convert_pytorch_snapshot(WholeContent&& pickle_bytes, const std::string& file, int device) {
  return convert(pickle_bytes, file, device, &pickle_bytes);
}

PyTorchSnapshot convert_pytorch_snapshot(ContentFeed& feed, const std::string& file, int device) {
  try {
    TraceSink sink(file, feed.expected_size());
    Document doc;
    try {
      doc = parse_snapshot(static_cast<pickle::ArrivingBytes&>(feed), file, &sink);
    } catch (...) {
      feed.finish();  // the reading's own error first (a damaged gzip stream), as read_rest gives it
      throw;
    }
    feed.finish();  // a gzip stream whose check fails after a whole pickle
    sink.check_places(doc);
    return Converter(doc, file).run(device, &sink);
  } catch (const pickle::SinkRestart&) {
  }
  return convert_pytorch_snapshot_unstreamed(feed.content(), file, device);
}

}  // namespace gmb
