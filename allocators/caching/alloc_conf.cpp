#include "allocators/caching/alloc_conf.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "allocators/allocator.h"
#include "common/text_excerpt.h"

namespace gmb::caching {
namespace {

// Keys of c10's AcceleratorAllocatorConfig followed by those CUDAAllocatorConfig registers.
const std::vector<std::string> kKeys = {
    "large_segment_size_mb", "max_split_size_mb", "max_non_split_rounding_mb",
    "garbage_collection_threshold", "roundup_power2_divisions", "expandable_segments",
    "pinned_use_background_threads", "backend", "release_lock_on_cudamalloc",
    "pinned_use_cuda_host_register", "release_lock_on_hipmalloc", "pinned_use_hip_host_register",
    "graph_capture_record_stream_reuse", "pinned_reserve_segment_size_mb",
    "pinned_num_register_threads", "per_process_memory_fraction", "pinned_free_catch_all",
    "throw_on_cudamalloc_oom"};

bool is_pow2(std::uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Splits "k1:v1,k2:[a:1,>:2]" into keys, values and the separators , : [ ] (whitespace dropped),
// exactly as PyTorch's ConfigTokenizer does.
class Tokens {
 public:
  explicit Tokens(std::string_view text) : text_(text) {
    std::string buf;
    for (char ch : text) {
      if (ch == ',' || ch == ':' || ch == '[' || ch == ']') {
        if (!buf.empty()) toks_.push_back(std::move(buf)), buf.clear();
        toks_.emplace_back(1, ch);
      } else if (!std::isspace(static_cast<unsigned char>(ch))) {
        buf += ch;
      }
    }
    if (!buf.empty()) toks_.push_back(std::move(buf));
  }

  std::size_t size() const { return toks_.size(); }

  const std::string& at(std::size_t i) const {
    if (i >= toks_.size()) fail("Index out of bounds in ConfigTokenizer (a value is missing)");
    return toks_[i];
  }

  void expect(std::size_t i, const char* token, const std::string& after) const {
    if (i >= toks_.size() || toks_[i] != token)
      fail(fmt::format("expected '{}' after '{}' but got {}", token, escaped_excerpt(after, 80),
                       i < toks_.size() ? "'" + escaped_excerpt(toks_[i], 80) + "'" : std::string("the end")));
  }

  std::uint64_t to_size(std::size_t i, const std::string& key) const {
    const std::string& t = at(i);
    bool digits = !t.empty() && std::all_of(t.begin(), t.end(),
                                            [](char c) { return c >= '0' && c <= '9'; });
    errno = 0;
    unsigned long long v = digits ? std::strtoull(t.c_str(), nullptr, 10) : 0;
    if (!digits || errno == ERANGE)
      fail(fmt::format("invalid value '{}' for {}: expected a non-negative integer", escaped_excerpt(t, 80), key));
    return v;
  }

  double to_double(std::size_t i, const std::string& key) const {
    const std::string& t = at(i);
    char* end = nullptr;
    errno = 0;
    double v = std::strtod(t.c_str(), &end);
    if (t.empty() || end != t.c_str() + t.size() || errno == ERANGE || !std::isfinite(v))
      fail(fmt::format("invalid value '{}' for {}: expected a number", escaped_excerpt(t, 80), key));
    return v;
  }

  bool to_bool(std::size_t i) const {
    const std::string& t = at(i);
    if (t == "True") return true;
    if (t == "False") return false;
    fail(fmt::format("Expected 'True' or 'False' at index {} in ConfigTokenizer but got '{}'", i,
                     escaped_excerpt(t, 80)));
  }

  [[noreturn]] void fail(const std::string& message) const {
    throw OptionError("alloc_conf",
                      fmt::format("alloc_conf \"{}\": {}", escaped_excerpt(text_, 80), message),
                      alloc_conf_keys_text());
  }

 private:
  std::string_view text_;
  std::vector<std::string> toks_;
};

// Returns the index of the last token of the value that starts at i (a single token or a list).
std::size_t skip_value(const Tokens& t, std::size_t i) {
  if (t.at(i) != "[") return i;
  while (++i < t.size() && t.at(i) != "]") {
  }
  if (i >= t.size()) t.fail("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
  return i;
}

std::size_t parse_roundup(const Tokens& t, std::size_t i, CachingConfig& c) {
  auto& div = c.roundup_power2_divisions;
  if (t.at(i) == "[") {
    bool first_value = true;
    std::size_t last_index = 0;
    while (++i < t.size() && t.at(i) != "]") {
      std::size_t value_index = i;
      t.expect(++i, ":", t.at(value_index));
      std::uint64_t value = t.to_size(++i, "roundup_power2_divisions");
      if (value != 0 && !is_pow2(value))
        t.fail("For roundups, the divisions has to be power of 2 or 0 to disable roundup");
      if (t.at(value_index) == ">") {
        std::fill(div.begin() + static_cast<std::ptrdiff_t>(std::min(last_index + 1, div.size())),
                  div.end(), value);
      } else {
        std::uint64_t boundary = t.to_size(value_index, "roundup_power2_divisions interval");
        if (!is_pow2(boundary)) t.fail("For roundups, the intervals have to be power of 2");
        std::size_t index = static_cast<std::size_t>(63 - __builtin_clzll(boundary));
        index = std::min(index, div.size() - 1);
        if (first_value) {
          std::fill(div.begin(), div.begin() + static_cast<std::ptrdiff_t>(index), value);
          first_value = false;
        }
        div[index] = value;
        last_index = index;
      }
      if (i + 1 < t.size() && t.at(i + 1) != "]") {
        t.expect(i + 1, ",", t.at(i));
        ++i;
      }
    }
    if (i >= t.size())
      t.fail("Expected closing bracket ']' in ConfigTokenizer but reached end of config");
  } else {
    std::uint64_t value = t.to_size(i, "roundup_power2_divisions");
    if (!is_pow2(value)) t.fail("For roundups, the divisions has to be power of 2");
    div.fill(value);
  }
  return i;
}

}  // namespace

const std::vector<std::string>& alloc_conf_keys() { return kKeys; }

std::string alloc_conf_keys_text() {
  std::string out;
  for (const auto& k : kKeys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

CachingConfig parse_alloc_conf(std::string_view text) {
  CachingConfig c;
  c.text = std::string(text);
  Tokens t(text);
  constexpr std::uint64_t kMB = MiB;
  const std::uint64_t max_mb = std::numeric_limits<std::uint64_t>::max() / kMB;

  // large_segment_size_mb is read first: the other sizes' minimum and default depend on it.
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t.at(i) != "large_segment_size_mb") continue;
    t.expect(i + 1, ":", t.at(i));
    std::uint64_t v = t.to_size(i + 2, "large_segment_size_mb");
    if (v <= kMinLargeAlloc / kMB)
      t.fail(fmt::format("CachingAllocator option large_segment_size_mb must be > {} MB",
                         kMinLargeAlloc / kMB));
    c.large_segment_size = std::min(v, max_mb) * kMB;
  }
  c.max_non_split_rounding_size = c.large_segment_size;

  for (std::size_t i = 0; i < t.size(); ++i) {
    const std::string key = t.at(i);
    if (key == "," || key == ":" || key == "[" || key == "]")
      t.fail(fmt::format("unexpected '{}' at token {}", escaped_excerpt(key, 80), i));
    if (std::find(kKeys.begin(), kKeys.end(), key) == kKeys.end())
      t.fail(fmt::format("Unrecognized key '{}' in Accelerator allocator config.", escaped_excerpt(key, 80)));
    t.expect(i + 1, ":", key);
    i += 2;  // the value
    if (key == "large_segment_size_mb") {
      // handled above
    } else if (key == "max_split_size_mb" || key == "max_non_split_rounding_mb") {
      std::uint64_t v = t.to_size(i, key);
      std::uint64_t min_mb = c.large_segment_size / kMB;
      if (v < min_mb)
        t.fail(fmt::format("CachingAllocator option {} too small, must be >= {}", key, min_mb));
      Bytes bytes = std::min(v, max_mb) * kMB;
      (key == "max_split_size_mb" ? c.max_split_size : c.max_non_split_rounding_size) = bytes;
    } else if (key == "garbage_collection_threshold") {
      double v = t.to_double(i, key);
      if (!(v > 0 && v < 1.0))
        t.fail("garbage_collect_threshold is invalid, set it in (0.0, 1.0)");
      c.garbage_collection_threshold = v;
    } else if (key == "roundup_power2_divisions") {
      i = parse_roundup(t, i, c);
    } else if (key == "expandable_segments") {
      c.expandable_segments = t.to_bool(i);
    } else if (key == "pinned_use_background_threads") {
      c.pinned_use_background_threads = t.to_bool(i);
    } else if (key == "backend") {
      const std::string& v = t.at(i);
      if (v != "native" && v != "cudaMallocAsync")
        t.fail("Unknown allocator backend, options are native and cudaMallocAsync");
      if (v != "native")
        t.fail("backend:cudaMallocAsync is not the caching allocator; use the cuda_mempool "
               "allocator for cudaMallocAsync (this allocator reimplements backend:native)");
      c.backend = v;
    } else if (key == "release_lock_on_cudamalloc" || key == "release_lock_on_hipmalloc") {
      c.release_lock_on_cudamalloc = t.to_bool(i);
    } else if (key == "pinned_use_cuda_host_register" || key == "pinned_use_hip_host_register") {
      c.pinned_use_cuda_host_register = t.to_bool(i);
    } else if (key == "pinned_num_register_threads") {
      std::uint64_t v = t.to_size(i, key);
      if (!is_pow2(v))
        t.fail(fmt::format("Number of register threads has to be power of 2, got {}", v));
      if (v > 128)
        t.fail(fmt::format(
            "Number of register threads should be less than or equal to 128, got {}", v));
      c.pinned_num_register_threads = v;
    } else if (key == "pinned_reserve_segment_size_mb") {
      std::uint64_t v = t.to_size(i, key);
      if (v == 0) t.fail("Pinned reserve segment size has to be greater than 0");
      c.pinned_reserve_segment_size_mb = v;
    } else if (key == "graph_capture_record_stream_reuse") {
      c.graph_capture_record_stream_reuse = t.to_bool(i);
    } else if (key == "per_process_memory_fraction") {
      double v = t.to_double(i, key);
      if (!(v >= 0.0 && v <= 1.0))
        t.fail("per_process_memory_fraction is invalid, set it in [0.0, 1.0]");
      c.per_process_memory_fraction = v;
    } else if (key == "pinned_free_catch_all") {
      c.pinned_free_catch_all = t.to_bool(i);
    } else if (key == "throw_on_cudamalloc_oom") {
      c.throw_on_cudamalloc_oom = t.to_bool(i);
    }
    if (key == "large_segment_size_mb") i = skip_value(t, i);
    if (i + 1 < t.size()) {
      t.expect(i + 1, ",", t.at(i));
      ++i;
    }
  }
  return c;
}

bool same_decisions(std::string_view a, std::string_view b) {
  if (a == b) return true;
  CachingConfig x, y;
  try {
    x = parse_alloc_conf(a);
    y = parse_alloc_conf(b);
  } catch (const OptionError&) {
    return false;
  }
  return x.max_split_size == y.max_split_size && x.max_non_split_rounding_size == y.max_non_split_rounding_size &&
         x.large_segment_size == y.large_segment_size && x.roundup_power2_divisions == y.roundup_power2_divisions &&
         x.garbage_collection_threshold == y.garbage_collection_threshold &&
         x.expandable_segments == y.expandable_segments &&
         x.per_process_memory_fraction == y.per_process_memory_fraction && x.backend == y.backend;
}

}  // namespace gmb::caching
