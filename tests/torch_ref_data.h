// Readers for the PyTorch reference data in tests/data/torch_ref/, shared by
// test_caching_fidelity.cpp and test_gpu_fidelity_diag.cpp.
//
// The directory holds what scripts/torch_reference.py recorded: manifest.json (per case:
// alloc_conf, the exact memory limit PyTorch applied, the trace) and <case>.csv.gz (PyTorch's
// statistics after every event).
#pragma once

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#ifdef GMB_HAVE_ZLIB
#include <zlib.h>
#endif

#include "allocators/allocator.h"
#include "devices/device.h"

namespace gmb::torch_ref {

// GMB_TORCH_REF_DIR overrides the directory (to check a fresh recording before committing it).
inline std::string data_dir() {
  const char* env = std::getenv("GMB_TORCH_REF_DIR");
  return env && *env ? std::string(env) : std::string(GMB_SOURCE_DIR) + "/tests/data/torch_ref";
}

// Columns of <case>.csv.gz after event,action,id,bytes,stream,ptr.
inline constexpr const char* kFields[] = {"allocated_bytes",   "reserved_bytes",   "active_bytes",
                                          "requested_bytes",   "inactive_split_bytes", "segments",
                                          "num_alloc_retries", "num_ooms",         "num_device_alloc",
                                          "num_device_free",   "oom"};
inline constexpr int kNumFields = sizeof(kFields) / sizeof(kFields[0]);
inline constexpr int kDeviceAllocField = 8;

struct Row {
  std::int64_t event = 0;
  bool alloc = false;
  bool empty_cache = false;  // torch.cuda.empty_cache() (id -1); neither alloc nor free
  std::int64_t id = 0;
  Bytes bytes = 0;
  StreamId stream = 0;
  std::uint64_t ptr = 0;
  std::int64_t v[kNumFields] = {};
};

inline bool file_exists(const std::string& path) { return std::ifstream(path).good(); }

// A CSV line's comma-separated cells (no quoting), a trailing empty cell included.
inline std::vector<std::string> csv_cells(const std::string& line) {
  std::vector<std::string> cells;
  std::istringstream ls(line);
  for (std::string cell; std::getline(ls, cell, ',');) cells.push_back(cell);
  if (!line.empty() && line.back() == ',') cells.emplace_back();
  return cells;
}

#ifdef GMB_HAVE_ZLIB
inline std::string read_gz(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open " + path);
  std::string out;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(n));
  int err = 0;
  const char* msg = gzerror(f, &err);
  std::string what = msg ? msg : "";
  gzclose(f);
  if (n < 0 || (err != Z_OK && err != Z_STREAM_END))
    throw std::runtime_error("cannot read " + path + ": " + what);
  return out;
}
#endif

// check_header: throw unless the first line is the expected header (else it is skipped).
inline std::vector<Row> parse_rows(const std::string& text, const std::string& name,
                                   bool check_header = true) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);  // header
  const std::string expected_header =
      "event,action,id,bytes,stream,ptr,allocated_bytes,reserved_bytes,active_bytes,"
      "requested_bytes,inactive_split_bytes,segments,num_alloc_retries,num_ooms,"
      "num_device_alloc,num_device_free,oom";
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (check_header && line != expected_header)
    throw std::runtime_error(name + ": unexpected header: " + line);
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> f = csv_cells(line);
    if (f.size() != 6 + kNumFields) throw std::runtime_error(name + ": bad row: " + line);
    Row r;
    r.event = std::stoll(f[0]);
    r.alloc = f[1] == "alloc";
    r.empty_cache = f[1] == "empty_cache";
    if (!r.alloc && !r.empty_cache && f[1] != "free")
      throw std::runtime_error(name + ": unknown action '" + f[1] + "' (valid: alloc, free, empty_cache): " + line);
    r.id = std::stoll(f[2]);
    r.bytes = f[3].empty() ? 0 : std::stoull(f[3]);
    r.stream = static_cast<StreamId>(std::stoi(f[4]));
    r.ptr = std::stoull(f[5]);
    for (int i = 0; i < kNumFields; ++i) r.v[i] = std::stoll(f[6 + i]);
    rows.push_back(r);
  }
  return rows;
}

// The card PyTorch ran on (manifest "total_global_mem"), else 150 GB.
inline Bytes manifest_card_bytes(const nlohmann::json& manifest) {
  Bytes card = 150ull * 1000 * 1000 * 1000;
  if (manifest.contains("total_global_mem") && manifest["total_global_mem"].is_number())
    card = manifest["total_global_mem"].get<Bytes>();
  return card;
}

// Whether a manifest case was recorded and did not hit the card's own limit.
inline bool case_replayable(const nlohmann::json& c) {
  return c.value("status", std::string("ok")) == "ok" && !c.value("device_oom_suspect", false);
}

// The exact limit PyTorch applied (fraction x total, truncated), else the requested one, else
// nullptr.
inline const nlohmann::json* recorded_limit(const nlohmann::json& c) {
  if (c.contains("limit_effective_bytes") && !c["limit_effective_bytes"].is_null())
    return &c["limit_effective_bytes"];
  if (c.contains("limit_bytes") && !c["limit_bytes"].is_null()) return &c["limit_bytes"];
  return nullptr;
}

// The allocator options a case replays with: its alloc_conf and limit (without a recorded
// limit, the card's size).
inline AllocatorOptions case_options(const nlohmann::json& c, Bytes card) {
  AllocatorOptions opts;
  std::string conf = c.value("alloc_conf", std::string());
  if (!conf.empty()) opts["alloc_conf"] = conf;
  const nlohmann::json* limit = recorded_limit(c);
  opts["memory_limit_bytes"] = std::to_string(limit ? limit->get<std::uint64_t>() : card);
  return opts;
}

// Replays one event on alloc (live: the pointers of the ids allocated so far); returns 1 when
// the allocation ran out of memory, else 0. A free of an id whose alloc ran out of memory is
// skipped (the recording skips it too).
inline int apply_event(Allocator& alloc, std::unordered_map<std::int64_t, DevPtr>& live,
                       const Row& r) {
  if (r.empty_cache) {
    alloc.empty_cache();
  } else if (r.alloc) {
    auto p = alloc.allocate(r.bytes, r.stream);
    if (!p) return 1;
    live[r.id] = *p;
  } else if (auto it = live.find(r.id); it != live.end()) {
    alloc.deallocate(it->second);
    live.erase(it);
  }
  return 0;
}

// Our figures for the columns of kFields after an event (oom: whether it ran out of memory).
struct Ours {
  std::int64_t v[kNumFields] = {};
};

inline Ours our_stats(const AllocatorInspection& alloc, int oom) {
  std::map<std::string, std::int64_t> ms;
  for (const auto& [k, v] : alloc.memory_stats()) ms[k] = v;
  return Ours{{ms["allocated_bytes.all.current"], ms["reserved_bytes.all.current"],
               ms["active_bytes.all.current"], ms["requested_bytes.all.current"],
               ms["inactive_split_bytes.all.current"], ms["segment.all.current"],
               ms["num_alloc_retries"], ms["num_ooms"], ms["num_device_alloc"],
               ms["num_device_free"], oom}};
}

// The columns where ours differ from the recording, in kFields order. A counter this torch
// does not report (recorded as -1) is not compared.
inline std::vector<int> differing_fields(const Row& r, const Ours& ours) {
  std::vector<int> out;
  for (int i = 0; i < kNumFields; ++i) {
    if (r.v[i] == -1 && i >= 6 && i <= 9) continue;
    if (ours.v[i] != r.v[i]) out.push_back(i);
  }
  return out;
}

}  // namespace gmb::torch_ref
