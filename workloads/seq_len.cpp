#include "workloads/seq_len.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <sstream>

#include <fmt/format.h>

#include "workloads/csv_lines.h"

namespace gmb {

const std::vector<std::string>& seq_dist_names() {
  static const std::vector<std::string> names = {"fixed", "uniform", "normal", "lognormal", "zipf", "histogram", "sequence"};
  return names;
}

const char* to_string(SeqDist dist) {
  switch (dist) {
    case SeqDist::Fixed: return "fixed";
    case SeqDist::Uniform: return "uniform";
    case SeqDist::Normal: return "normal";
    case SeqDist::LogNormal: return "lognormal";
    case SeqDist::Zipf: return "zipf";
    case SeqDist::Histogram: return "histogram";
    case SeqDist::Sequence: return "sequence";
  }
  return "?";
}

namespace {

std::string trim(const std::string& s) {
  std::size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return {};
  std::size_t e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::uint64_t round_up(std::uint64_t n, std::uint64_t m) { return m <= 1 ? n : (n + m - 1) / m * m; }

// Truncated sampling: redraw outside [lo, hi]; after many misses, clamp (the spec checks keep
// the centre inside the bounds, so this practically never happens).
template <typename Draw>
std::uint64_t truncated(std::mt19937_64& rng, Draw draw, std::uint64_t lo, std::uint64_t hi) {
  double x = 0;
  for (int i = 0; i < 1000; ++i) {
    x = std::round(draw(rng));
    if (x >= double(lo) && x <= double(hi)) return std::uint64_t(x);
  }
  return x < double(lo) ? lo : hi;
}

}  // namespace

std::vector<HistogramBin> read_histogram(const std::string& path) {
  std::vector<HistogramBin> bins;
  bool any_positive = false;
  std::uint64_t n = 0;
  try {
    // Through the trace readers' byte layer: a FIFO nobody writes to reads as empty, a line has
    // CsvLines' length bound, and the whole file kMaxHistogramBytes.
    std::unique_ptr<ByteInput> input;
    try {
      input = ByteInput::open(path);
    } catch (const TraceError& e) {  // "<path>:0: cannot open the trace file: why"
      const std::string why = e.what();
      const std::size_t at = why.find(": ", why.find("cannot open"));
      throw SeqLenError(fmt::format("{}: cannot open the histogram file{}", path,
                                    at == std::string::npos ? std::string() : why.substr(at)),
                        {}, path, 0);
    }
    CsvLines lines(*input);
    std::string_view view;
    while (lines.next(view)) {
      n = lines.line_number();
      if (lines.line_offset() + view.size() > kMaxHistogramBytes)
        throw SeqLenError(fmt::format("{}:{}: the histogram file is larger than {} MiB (a short list of 'length,weight' "
                                      "lines is expected)",
                                      path, n, kMaxHistogramBytes >> 20),
                          {}, path, n);
      const std::string line(view);
      std::string t = trim(line);
      if (t.empty() || t[0] == '#') continue;
      if (bins.empty() && t == "length,weight") continue;
      auto fail = [&](const std::string& msg) {
        throw SeqLenError(fmt::format("{}:{}: {}", path, n, msg), {}, path, n);
      };
      auto comma = t.find(',');
      if (comma == std::string::npos || t.find(',', comma + 1) != std::string::npos)
        fail(fmt::format("expected 'length,weight', got '{}'", escaped_excerpt(t, 80)));
      std::string ls = trim(t.substr(0, comma)), ws = trim(t.substr(comma + 1));
      if (ls.empty() || ls.size() > 12 || ls.find_first_not_of("0123456789") != std::string::npos)
        fail(fmt::format("length '{}' is not a positive integer", escaped_excerpt(ls, 80)));
      HistogramBin bin;
      bin.length = std::stoull(ls);
      if (bin.length == 0) fail("length must be at least 1");
      try {
        std::size_t used = 0;
        bin.weight = std::stod(ws, &used);
        if (used != ws.size()) throw std::invalid_argument("trailing");
      } catch (...) {
        fail(fmt::format("weight '{}' is not a number", escaped_excerpt(ws, 80)));
      }
      if (!std::isfinite(bin.weight) || bin.weight < 0) fail(fmt::format("weight '{}' must be zero or more", escaped_excerpt(ws, 80)));
      any_positive = any_positive || bin.weight > 0;
      bins.push_back(bin);
    }
  } catch (const TraceError& e) {  // cannot open, a line too long: the reader's message names the file
    throw SeqLenError(e.what(), {}, path, e.line ? e.line : n);
  }
  if (!any_positive)
    throw SeqLenError(fmt::format("{}: no bin with a positive weight (lines 'length,weight')", path), {}, path, 0);
  return bins;
}

SeqLenSampler::SeqLenSampler(SeqLenSpec s) : spec_(std::move(s)) {
  auto need_max = [&] {
    if (spec_.max == 0) throw SeqLenError(fmt::format("dist {} needs max", to_string(spec_.dist)), "max");
    if (spec_.min == 0) throw SeqLenError("min must be at least 1", "min");
    if (spec_.min > spec_.max)
      throw SeqLenError(fmt::format("min ({}) is greater than max ({})", spec_.min, spec_.max), "min");
  };
  switch (spec_.dist) {
    case SeqDist::Fixed:
      if (spec_.value == 0) throw SeqLenError("value must be at least 1", "value");
      lo_ = hi_ = spec_.value;
      break;
    case SeqDist::Uniform:
      need_max();
      lo_ = spec_.min, hi_ = spec_.max;
      break;
    case SeqDist::Normal:
      need_max();
      if (!(spec_.stddev > 0)) throw SeqLenError("std must be greater than zero", "std");
      if (spec_.mean < double(spec_.min) || spec_.mean > double(spec_.max))
        throw SeqLenError(fmt::format("mean ({}) must lie within min..max ({}..{})", spec_.mean, spec_.min, spec_.max),
                          "mean");
      lo_ = spec_.min, hi_ = spec_.max;
      break;
    case SeqDist::LogNormal:
      need_max();
      if (!(spec_.sigma > 0)) throw SeqLenError("sigma must be greater than zero", "sigma");
      if (std::exp(spec_.mu) < double(spec_.min) || std::exp(spec_.mu) > double(spec_.max))
        throw SeqLenError(fmt::format("the median exp(mu) = {:.1f} must lie within min..max ({}..{})",
                                      std::exp(spec_.mu), spec_.min, spec_.max),
                          "mu");
      lo_ = spec_.min, hi_ = spec_.max;
      break;
    case SeqDist::Zipf: {
      need_max();
      if (!(spec_.exponent > 0)) throw SeqLenError("exponent must be greater than zero", "exponent");
      if (spec_.max - spec_.min > 10'000'000)
        throw SeqLenError("max - min must be at most 10000000 for zipf", "max");
      lo_ = spec_.min, hi_ = spec_.max;
      double acc = 0;
      for (std::uint64_t r = 1; r <= hi_ - lo_ + 1; ++r) {
        acc += std::pow(double(r), -spec_.exponent);
        cdf_.push_back(acc);
      }
      break;
    }
    case SeqDist::Histogram: {
      if (spec_.histogram.empty()) throw SeqLenError("dist histogram needs file", "file");
      double acc = 0;
      lo_ = UINT64_MAX, hi_ = 0;
      for (const auto& b : spec_.histogram) {
        if (b.weight <= 0) continue;
        acc += b.weight;
        cdf_.push_back(acc);
        values_.push_back(b.length);
        lo_ = std::min(lo_, b.length);
        hi_ = std::max(hi_, b.length);
      }
      if (cdf_.empty()) throw SeqLenError("the histogram has no bin with a positive weight", "file");
      break;
    }
    case SeqDist::Sequence:
      if (spec_.values.empty()) throw SeqLenError("dist sequence needs a non-empty list of lengths", "values");
      if (spec_.values.size() > kMaxSequenceValues)
        throw SeqLenError(fmt::format("at most {} lengths in a sequence", kMaxSequenceValues), "values");
      lo_ = UINT64_MAX, hi_ = 0;
      for (auto v : spec_.values) {
        if (v == 0) throw SeqLenError("every length of a sequence must be at least 1", "values");
        lo_ = std::min(lo_, v);
        hi_ = std::max(hi_, v);
      }
      break;
  }
  if (spec_.pad_to_multiple == 0) throw SeqLenError("pad_to_multiple must be at least 1", "pad_to_multiple");
  for (std::size_t i = 0; i < spec_.buckets.size(); ++i) {
    if (spec_.buckets[i] == 0) throw SeqLenError("bucket lengths must be at least 1", "buckets");
    if (i && spec_.buckets[i] <= spec_.buckets[i - 1])
      throw SeqLenError(fmt::format("buckets must be strictly ascending ({} after {})", spec_.buckets[i],
                                    spec_.buckets[i - 1]),
                        "buckets");
  }
  if (spec_.pack && spec_.dist == SeqDist::Sequence)
    throw SeqLenError("pack draws sequences; dist sequence gives each step's length, so it cannot pack", "pack");
  if (spec_.pack) {
    if (spec_.pad_to_max || !spec_.buckets.empty() || spec_.pad_to_multiple > 1)
      throw SeqLenError("pack builds full rows; it cannot be combined with pad_to_max, pad_to_multiple or buckets",
                        "pack");
    if (spec_.pack_length == 0) spec_.pack_length = hi_;
    if (spec_.pack_length < hi_)
      throw SeqLenError(fmt::format("pack_length ({}) is shorter than the longest sequence ({})", spec_.pack_length, hi_),
                        "pack_length");
  } else if (spec_.pack_length) {
    throw SeqLenError("pack_length applies only with pack: true", "pack_length");
  }
  if (!spec_.buckets.empty() && round_up(hi_, spec_.pad_to_multiple) > spec_.buckets.back())
    throw SeqLenError(fmt::format("the largest bucket ({}) cannot hold the longest sequence ({})",
                                  spec_.buckets.back(), round_up(hi_, spec_.pad_to_multiple)),
                      "buckets");
}

std::uint64_t SeqLenSampler::sample(std::mt19937_64& rng) const {
  switch (spec_.dist) {
    case SeqDist::Fixed: return spec_.value;
    case SeqDist::Uniform: return std::uniform_int_distribution<std::uint64_t>(lo_, hi_)(rng);
    case SeqDist::Normal: {
      std::normal_distribution<double> d(spec_.mean, spec_.stddev);
      return truncated(rng, d, lo_, hi_);
    }
    case SeqDist::LogNormal: {
      std::lognormal_distribution<double> d(spec_.mu, spec_.sigma);
      return truncated(rng, d, lo_, hi_);
    }
    case SeqDist::Sequence: return spec_.values[std::uniform_int_distribution<std::size_t>(0, spec_.values.size() - 1)(rng)];
    case SeqDist::Zipf:
    case SeqDist::Histogram: {
      double u = std::uniform_real_distribution<double>(0, cdf_.back())(rng);
      std::size_t i = std::upper_bound(cdf_.begin(), cdf_.end(), u) - cdf_.begin();
      i = std::min(i, cdf_.size() - 1);
      return spec_.dist == SeqDist::Zipf ? lo_ + i : values_[i];
    }
  }
  return lo_;
}

std::uint64_t SeqLenSampler::shape_len(std::uint64_t longest) const {
  std::uint64_t s = spec_.pad_to_max ? hi_ : longest;
  s = round_up(s, spec_.pad_to_multiple);
  if (!spec_.buckets.empty()) s = *std::lower_bound(spec_.buckets.begin(), spec_.buckets.end(), s);
  return s;
}

std::uint64_t SeqLenSampler::max_shape_len() const { return spec_.pack ? spec_.pack_length : shape_len(hi_); }

BatchShape SeqLenSampler::batch(std::uint64_t step, std::uint64_t rows) const {
  std::seed_seq seq{std::uint32_t(spec_.seed), std::uint32_t(spec_.seed >> 32), std::uint32_t(step),
                    std::uint32_t(step >> 32)};
  std::mt19937_64 rng(seq);
  BatchShape b;
  b.rows = rows;
  if (spec_.dist == SeqDist::Sequence) {
    const std::uint64_t len = spec_.values[step % spec_.values.size()];
    b.sequences = rows;
    b.real_tokens = rows * len;
    b.seq_len = shape_len(len);
  } else if (spec_.pack) {
    // Greedy packing: sequences fill a row in the order drawn; one that does not fit starts
    // the next row; the one left over when the rows are full is dropped.
    b.seq_len = spec_.pack_length;
    std::uint64_t row = 0, used = 0;
    while (row < rows) {
      std::uint64_t len = sample(rng);
      if (used + len > b.seq_len) {
        ++row;
        used = 0;
        if (row == rows) break;
      }
      used += len;
      b.real_tokens += len;
      ++b.sequences;
    }
  } else {
    std::uint64_t longest = 0;
    for (std::uint64_t i = 0; i < rows; ++i) {
      std::uint64_t len = sample(rng);
      longest = std::max(longest, len);
      b.real_tokens += len;
    }
    b.sequences = rows;
    b.seq_len = shape_len(longest);
  }
  b.padded_tokens = b.rows * b.seq_len;
  return b;
}

std::string SeqLenSampler::describe() const {
  std::string d;
  switch (spec_.dist) {
    case SeqDist::Fixed: d = fmt::format("fixed {}", spec_.value); break;
    case SeqDist::Uniform: d = fmt::format("uniform {}..{}", lo_, hi_); break;
    case SeqDist::Normal: d = fmt::format("normal({:g},{:g}) {}..{}", spec_.mean, spec_.stddev, lo_, hi_); break;
    case SeqDist::LogNormal: d = fmt::format("lognormal({:g},{:g}) {}..{}", spec_.mu, spec_.sigma, lo_, hi_); break;
    case SeqDist::Zipf: d = fmt::format("zipf({:g}) {}..{}", spec_.exponent, lo_, hi_); break;
    case SeqDist::Histogram: {
      auto slash = spec_.histogram_path.find_last_of('/');
      d = fmt::format("histogram {}", slash == std::string::npos ? spec_.histogram_path
                                                                 : spec_.histogram_path.substr(slash + 1));
      break;
    }
    case SeqDist::Sequence:
      d = fmt::format("sequence of {} ({}..{})", spec_.values.size(), lo_, hi_);
      break;
  }
  if (spec_.pack) return d + fmt::format(", packed {}", spec_.pack_length);
  if (spec_.pad_to_max) d += ", pad max";
  if (spec_.pad_to_multiple > 1) d += fmt::format(", pad x{}", spec_.pad_to_multiple);
  if (!spec_.buckets.empty()) {
    std::string b;
    for (auto v : spec_.buckets) b += (b.empty() ? "" : "/") + std::to_string(v);
    d += ", buckets " + b;
  }
  return d;
}

}  // namespace gmb
