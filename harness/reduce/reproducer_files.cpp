#include "harness/reduce/reproducer_files.h"

#include <filesystem>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "allocators/registry.h"
#include "common/text_excerpt.h"
#include "common/units.h"
#include "harness/report/oom_diagnosis.h"
#include "harness/report/oom_block_map.h"
#include "harness/report/report.h"
#include "workloads/trace.h"

namespace gmb {

namespace {

std::string alloc_conf_of(const AllocatorOptions& o) {
  auto it = o.find("alloc_conf");
  return it == o.end() ? "" : it->second;
}

// A Python string literal (the settings are plain ASCII option strings; anything else is escaped).
std::string py_str(const std::string& s) {
  std::string out = "\"";
  for (unsigned char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\', out += char(ch);
    else if (ch >= 0x20 && ch < 0x7f) out += char(ch);
    else out += fmt::format("\\x{:02x}", ch);
  }
  return out + "\"";
}

// Per segment of the block map at the OOM, its blocks in address order, the allocated ones named
// by their id in the reduced trace: which live blocks hold the holes in place.
std::string pinning_blocks_md(const ReproducerInputs& in) {
  const std::vector<Op>& ops = in.result.ops;
  const LifetimeTrace t = LifetimeTrace::from_ops(ops, ops.size());
  LifetimeReplayer replayer(t, in.settings.target);
  LifetimeReplayer::Kept k = replayer.run_and_keep(std::vector<char>(t.lifetimes(), 1), t.bytes);
  std::map<DevPtr, std::uint32_t> id_at;  // lifetime index = id of the reduced trace (ids follow allocation order)
  for (std::uint32_t l = 0; l < t.lifetimes(); ++l)
    if (k.pointers[l]) id_at[k.pointers[l]] = l;
  const std::vector<SegmentInfo> segments = k.allocator->block_map();
  std::string out;
  std::size_t with_holes = 0, full = 0;
  for (const SegmentInfo& seg : segments) {
    bool hole = false;
    for (const BlockInfo& b : seg.blocks) hole |= b.mapped && !b.allocated;
    if (!hole) {
      ++full;
      continue;
    }
    if (++with_holes > 40) continue;
    std::string row;
    for (const BlockInfo& b : seg.blocks) {
      if (!row.empty()) row += " | ";
      if (!b.mapped) {
        row += fmt::format("unmapped {}", format_bytes(b.size));
      } else if (!b.allocated) {
        row += fmt::format("**hole {}**", format_bytes(b.size));
      } else {
        auto it = id_at.find(seg.address + b.offset);
        row += it == id_at.end() ? fmt::format("allocated {}", format_bytes(b.size))
                                 : fmt::format("id {} ({}, event {})", it->second, format_bytes(b.size),
                                               t.input_event[it->second]);
      }
    }
    out += fmt::format("- segment at +{} ({}, {} pool): {}\n", format_bytes(seg.address - (segments.empty() ? 0 : segments.front().address)),
                       format_bytes(seg.size), seg.pool.empty() ? "no" : seg.pool, row);
  }
  if (with_holes > 40) out += fmt::format("- ... and {} more segments with holes\n", with_holes - 40);
  if (with_holes == 0) out += "- no segment has a hole: every reserved byte is allocated\n";
  out += fmt::format("\n{} segment(s) with holes, {} without (held whole by live blocks). A hole goes back to the "
                     "device only with its whole segment: the live blocks of a segment with a hole are what "
                     "split the free memory. Events are those of the reduced trace.\n",
                     with_holes, full);
  return out;
}

}  // namespace

std::string with_commas(std::uint64_t v) {
  std::string s = std::to_string(v);
  for (int i = int(s.size()) - 3; i > 0; i -= 3) s.insert(std::size_t(i), ",");
  return s;
}

const OomRecord* first_oom(const CaseResult& c) {
  return c.runs.empty() || !c.runs.front().first_oom ? nullptr : &*c.runs.front().first_oom;
}

std::string reproducer_summary_md(const ReproducerInputs& in) {
  const ReduceResult& r = in.result;
  const OomRecord* before = first_oom(in.input_case);
  const OomRecord* after = first_oom(in.reduced_case);
  const std::string target = allocator_label(in.settings.target.allocator, in.settings.target.options);
  std::string s = fmt::format("# OOM reproducer: {}\n\n", in.source);
  s += fmt::format("Made by `{}` (gpumembench {}) on the simulated device: {} at {}{}.\n\n", in.command_line,
                   GMB_VERSION, target, format_bytes(in.settings.target.capacity_bytes),
                   in.memory_limit_bytes ? fmt::format(", memory limit {}", format_bytes(in.memory_limit_bytes)) : "");
  auto cell = [](const OomRecord* o, auto f) { return o ? f(*o) : std::string("-"); };
  s += "| | input | reduced |\n|---|---:|---:|\n";
  s += fmt::format("| events | {} ({} up to the OOM) | {} |\n", with_commas(r.input_events), with_commas(r.oom_event + 1),
                   with_commas(r.ops.size()));
  s += fmt::format("| OOM at event | {} | {} |\n", with_commas(r.oom_event), with_commas(r.ops.size() - 1));
  // The run's tables judge the first OOM by the whole trace's need; the reducer by the trace up to
  // the request (where the reproducer ends). Where they differ the input's cell says both.
  const std::string input_kind =
      before && before->kind != r.kind
          ? fmt::format("{} at the request; the run calls it {} (the events after it need more than the capacity)",
                        to_string(r.kind), to_string(before->kind))
          : std::string(to_string(r.kind));
  s += fmt::format("| OOM kind | {} | {} |\n", input_kind, cell(after, [](const OomRecord& o) { return std::string(to_string(o.kind)); }));
  s += fmt::format("| request | {} | {} |\n", format_bytes(r.request_bytes), format_bytes(r.ops.back().bytes));
  s += fmt::format("| allocated at the OOM | {} | {} |\n",
                   cell(before, [](const OomRecord& o) { return format_bytes(o.allocated_bytes); }),
                   cell(after, [](const OomRecord& o) { return format_bytes(o.allocated_bytes); }));
  s += fmt::format("| reserved at the OOM | {} | {} |\n",
                   cell(before, [](const OomRecord& o) { return format_bytes(o.reserved_bytes); }),
                   cell(after, [](const OomRecord& o) { return format_bytes(o.reserved_bytes); }));
  s += fmt::format("| largest free block | {} | {} |\n",
                   cell(before, [](const OomRecord& o) { return format_bytes(o.largest_free_block); }),
                   cell(after, [](const OomRecord& o) { return format_bytes(o.largest_free_block); }));
  if (in.settings.contrast)
    s += fmt::format("| under {} | no OOM up to the request | {} |\n",
                     allocator_label(in.settings.target.allocator, *in.settings.contrast),
                     in.reduced_contrast_case && !first_oom(*in.reduced_contrast_case) ? "no OOM" : "OOM");
  s += fmt::format("\nReduction: {} replays, {} events replayed in {:.1f} s ({:.1f} M events/s); {}.\n",
                   with_commas(r.replays), with_commas(r.events_replayed), r.seconds,
                   r.seconds > 0 ? double(r.events_replayed) / r.seconds / 1e6 : 0.0,
                   r.stopped_by.empty() ? "ran to the end: no single allocation (with its free) can be removed"
                                        : "stopped by the " + r.stopped_by +
                                              ": the trace is a valid reproducer but may not be minimal");
  if (after) s += fmt::format("\nAt the OOM (reduced trace): {}\n", oom_fix_text(in.reduced_case, *after));
  s += "\n## Which live blocks split the free memory\n\nThe block map at the OOM of the reduced trace (after the "
       "allocator's free-cache-and-retry), segments with holes, blocks in address order:\n\n";
  s += pinning_blocks_md(in);
  s += "\n## Files\n\n- `reduced_trace.csv`: the reduced trace (native CSV); `gpumembench replay --trace "
       "reduced_trace.csv --allocator " + in.settings.target.allocator;
  if (!alloc_conf_of(in.settings.target.options).empty())
    s += " --alloc-conf " + alloc_conf_of(in.settings.target.options);
  s += fmt::format(" --capacity {}{}` replays it\n", in.settings.target.capacity_bytes,
                   in.memory_limit_bytes ? fmt::format(" --memory-limit {}", in.memory_limit_bytes) : "");
  s += "- `oom_block_map.svg`: every segment and block at the OOM\n";
  if (allocator_traits(in.settings.target.allocator).replayable_in_pytorch)
    s += "- `repro_torch.py`: the same events in real PyTorch (`python3 repro_torch.py`: exit 1 when the OOM "
         "happens at the predicted event, 0 without an OOM, 2 for an OOM elsewhere, 3 when it cannot run" +
         std::string(in.settings.contrast ? "; `--contrast` runs it under the contrast settings, where it must "
                                            "not OOM" : "") + ")\n";
  return s;
}

std::string repro_torch_py(const ReproducerInputs& in) {
  if (!allocator_traits(in.settings.target.allocator).replayable_in_pytorch) return "";
  const ReduceResult& r = in.result;
  const OomRecord* after = first_oom(in.reduced_case);
  const Bytes limit = in.memory_limit_bytes ? in.memory_limit_bytes : in.settings.target.capacity_bytes;
  std::string events;
  std::size_t on_line = 0;
  for (const Op& op : r.ops) {
    std::string e = op.kind == Op::Kind::Alloc ? fmt::format("(0, {}, {}, {}),", op.id, op.bytes, op.stream)
                                               : fmt::format("(1, {}, 0, {}),", op.id, op.stream);
    if (on_line + e.size() > 96) events += "\n", on_line = 0;
    events += (on_line ? " " : "    ") + e;
    on_line += e.size() + (on_line ? 1 : 4);
  }
  std::string s;
  s += "#!/usr/bin/env python3\n";
  s += fmt::format(
      "\"\"\"An OOM reproducer written by `gpumembench reduce` (gpumembench {}): {} events that end in a {} OOM\n"
      "in PyTorch's CUDA caching allocator, replayed through torch.cuda.caching_allocator_alloc and\n"
      "caching_allocator_delete with the allocator's memory limited to {} bytes ({}) by\n"
      "set_per_process_memory_fraction.\n\n"
      "Source: {}\n"
      "Predicted (gpumembench, simulated device): the request of {} bytes at event {} fails with\n"
      "{} bytes allocated and {} bytes reserved, largest free block {} bytes.\n\n"
      "Usage: python3 repro_torch.py [--alloc-conf STR] [--contrast]\n"
      "Exit status: 1 the OOM happened at the predicted event (reproduced); 0 no OOM; 2 an OOM at another\n"
      "event; 3 cannot run here (no GPU, not enough free memory, torch already initialised CUDA).\n"
      "\"\"\"\n",
      GMB_VERSION, r.ops.size(), to_string(r.kind), limit, format_bytes(limit), in.source, r.ops.back().bytes,
      r.ops.size() - 1, after ? after->allocated_bytes : 0, after ? after->reserved_bytes : 0,
      after ? after->largest_free_block : 0);
  s += "import argparse\nimport math\nimport os\nimport sys\n\n";
  s += fmt::format("ALLOC_CONF = {}  # PYTORCH_CUDA_ALLOC_CONF of the OOM\n", py_str(alloc_conf_of(in.settings.target.options)));
  s += fmt::format("CONTRAST_ALLOC_CONF = {}  # settings under which the same events must not OOM (None: none)\n",
                   in.settings.contrast ? py_str(alloc_conf_of(*in.settings.contrast)) : "None");
  s += fmt::format("LIMIT_BYTES = {}  # what the allocator may reserve\n", limit);
  s += fmt::format("OOM_EVENT = {}  # the event whose allocation fails (0-based)\n", r.ops.size() - 1);
  s += fmt::format("PREDICTED = {{\"allocated\": {}, \"reserved\": {}, \"largest_free_block\": {}}}\n",
                   after ? after->allocated_bytes : 0, after ? after->reserved_bytes : 0,
                   after ? after->largest_free_block : 0);
  s += "# (kind, id, bytes, stream): kind 0 allocates `bytes` as buffer `id`, kind 1 frees buffer `id`.\n";
  s += "EVENTS = [\n" + events + "\n]\n";
  s += R"PY(

def fraction_for(limit, total):
    """The fraction f with int(f * total) == limit, as PyTorch computes allowed_memory_maximum."""
    f = (limit + 0.5) / total
    for _ in range(64):
        got = int(f * total)
        if got == limit:
            return f
        f = math.nextafter(f, 2.0 if got < limit else 0.0)
    raise SystemExit("cannot express %d bytes as a fraction of %d" % (limit, total))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--alloc-conf", default=None, help="PYTORCH_CUDA_ALLOC_CONF to use instead of ALLOC_CONF")
    ap.add_argument("--contrast", action="store_true", help="run under CONTRAST_ALLOC_CONF (expect no OOM)")
    args = ap.parse_args()
    conf = ALLOC_CONF
    if args.contrast:
        if CONTRAST_ALLOC_CONF is None:
            print("this reproducer has no contrast settings")
            return 3
        conf = CONTRAST_ALLOC_CONF
    if args.alloc_conf is not None:
        conf = args.alloc_conf
    if "torch" in sys.modules:
        print("torch was imported before the settings could be set")
        return 3
    # Read when PyTorch initialises CUDA: it must be set before.
    if conf:
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = conf
    else:
        os.environ.pop("PYTORCH_CUDA_ALLOC_CONF", None)
    try:
        import torch
    except ImportError:
        print("PyTorch is not installed here (import torch failed)")
        return 3

    if not torch.cuda.is_available():
        print("no CUDA device visible")
        return 3
    torch.cuda.init()
    total = torch.cuda.get_device_properties(0).total_memory
    free, _ = torch.cuda.mem_get_info(0)  # after the CUDA context took its share
    if free < LIMIT_BYTES:
        print("only %d bytes free on the card, %d needed" % (free, LIMIT_BYTES))
        return 3
    if torch.cuda.memory_reserved(0) != 0:
        print("PyTorch already holds %d bytes" % torch.cuda.memory_reserved(0))
        return 3
    # The limit is fraction x total_memory (not x the free memory): the CUDA context is not counted.
    torch.cuda.set_per_process_memory_fraction(fraction_for(LIMIT_BYTES, total), 0)
    print("torch %s, %s, total %d bytes, limit %d bytes, PYTORCH_CUDA_ALLOC_CONF=%r, %d events"
          % (torch.__version__, torch.cuda.get_device_name(0), total, LIMIT_BYTES, conf, len(EVENTS)))
    streams = {0: torch.cuda.current_stream(0)}
    live = {}
    for i, (kind, buf, size, stream) in enumerate(EVENTS):
        if kind == 1:
            torch.cuda.caching_allocator_delete(live.pop(buf))
            continue
        if stream not in streams:
            streams[stream] = torch.cuda.Stream(0)
        try:
            live[buf] = torch.cuda.caching_allocator_alloc(size, 0, streams[stream])
        except torch.cuda.OutOfMemoryError as e:
            stats = torch.cuda.memory_stats(0)
            print("OOM at event %d: %d bytes requested" % (i, size))
            print(str(e).splitlines()[0])
            print(torch.cuda.memory_summary(0))
            print("allocated %d (predicted %d), reserved %d (predicted %d)"
                  % (stats["allocated_bytes.all.current"], PREDICTED["allocated"],
                     stats["reserved_bytes.all.current"], PREDICTED["reserved"]))
            if i == OOM_EVENT:
                print("REPRODUCED: the OOM happened at the predicted event %d" % OOM_EVENT)
                return 1
            print("OOM ELSEWHERE: at event %d, predicted %d" % (i, OOM_EVENT))
            return 2
    print(torch.cuda.memory_summary(0))
    if args.contrast:
        print("NO OOM: all %d events ran under the contrast settings %r, as predicted" % (len(EVENTS), conf))
    else:
        print("NO OOM: all %d events ran under %r (predicted: an OOM at event %d under %r)"
              % (len(EVENTS), conf, OOM_EVENT, ALLOC_CONF))
    return 0


if __name__ == "__main__":
    sys.exit(main())
)PY";
  return s;
}

void check_reproducer_folder(const std::string& dir, bool overwrite) {
  namespace fs = std::filesystem;
  if (dir.empty()) return;
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return;  // a new folder
  if (!fs::is_directory(fs::status(dir, ec)))
    throw std::invalid_argument(fmt::format("--output {}: {}, not a folder", printable_text(dir),
                                            fs::is_symlink(st) ? "a link to no folder" : "a file"));
  if (overwrite) return;
  fs::directory_iterator it(dir, ec);
  if (ec)
    throw std::invalid_argument(fmt::format("--output {}: cannot list the folder ({}); --overwrite writes into it anyway",
                                            printable_text(dir), ec.message()));
  if (it == fs::directory_iterator()) return;
  const std::string first = it->path().filename().string();
  const bool more = it.increment(ec) != fs::directory_iterator();
  throw std::invalid_argument(fmt::format(
      "--output {}: the folder holds files ({}{}); reduce writes into a new or empty folder, or with --overwrite "
      "replaces its own files there (reduced_trace.csv, oom_block_map.svg, summary.md, repro_torch.py) and leaves "
      "the others",
      printable_text(dir), printable_text(first), more ? ", ..." : ""));
}

std::string write_reproducer(const std::string& folder, const ReproducerInputs& in) {
  namespace fs = std::filesystem;
  // A new folder is written under a temporary name beside it and renamed when complete, so a
  // failed write leaves nothing; into an existing folder each file is written to a temporary name
  // and renamed. "repro/" names the folder repro (the temporary one must not be inside it).
  std::string dir = folder;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  std::error_code ec;
  const bool fresh = !fs::exists(dir, ec);
  const std::string at = fresh ? dir + ".tmp-reduce" : dir;
  try {
    if (fresh) fs::remove_all(at, ec);
    fs::create_directories(at, ec);
    if (ec) throw std::runtime_error(fmt::format("cannot create the folder {}: {}", dir, ec.message()));
    write_trace(at + "/reduced_trace.csv.tmp", in.result.ops);
    fs::rename(at + "/reduced_trace.csv.tmp", at + "/reduced_trace.csv");
    if (first_oom(in.reduced_case)) write_file_atomically(at + "/oom_block_map.svg", block_map_svg(in.reduced_case, in.device));
    write_file_atomically(at + "/summary.md", reproducer_summary_md(in));
    const std::string py = repro_torch_py(in);
    if (!py.empty()) {
      write_file_atomically(at + "/repro_torch.py", py);
      fs::permissions(at + "/repro_torch.py",
                      fs::perms::owner_exec | fs::perms::group_exec | fs::perms::others_exec, fs::perm_options::add, ec);
    }
    // An earlier reproducer's files that this one does not write (repro_torch.py of a caching
    // reduce, now another allocator's) must not stay beside it: removed once the new ones are in.
    if (!fresh) {
      if (!first_oom(in.reduced_case)) fs::remove(at + "/oom_block_map.svg", ec);
      if (py.empty()) fs::remove(at + "/repro_torch.py", ec);
    }
    if (fresh) fs::rename(at, dir);
  } catch (const std::exception& e) {
    if (fresh) fs::remove_all(at, ec);
    throw std::runtime_error(fmt::format("cannot write the reproducer into {}: {}", dir, e.what()));
  }
  return dir;
}

}  // namespace gmb
