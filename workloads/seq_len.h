// Sequence-length distributions and how a batch of sampled lengths becomes a tensor shape
// (dynamic padding to the longest, padding to a multiple, bucketing, padding to the maximum,
// packing). Seeded and reproducible: the lengths of step n depend only on (seed, n).
//
// The samplers use <random> (std::mt19937_64 and the standard distributions). mt19937_64 is
// the same everywhere, but the standard distributions are implementation-defined, so the
// same seed gives the same lengths with libstdc++ (Debian, Ubuntu: both our machines) and
// may differ with another standard library.
#pragma once

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace gmb {

enum class SeqDist { Fixed, Uniform, Normal, LogNormal, Zipf, Histogram, Sequence };
// fixed, uniform, normal, lognormal, zipf, histogram, sequence
const std::vector<std::string>& seq_dist_names();
const char* to_string(SeqDist dist);

struct HistogramBin {
  std::uint64_t length = 0;
  double weight = 0;
};

struct SeqLenSpec {
  SeqDist dist = SeqDist::Fixed;
  std::uint64_t value = 512;  // fixed
  // Bounds: uniform draws from [min, max]; normal, lognormal and zipf samples outside are
  // drawn again (truncated distributions). Histogram: derived from the file.
  std::uint64_t min = 1, max = 0;
  double mean = 0, stddev = 0;  // normal
  double mu = 0, sigma = 1;     // lognormal: ln(length) ~ N(mu, sigma)
  double exponent = 1.0;        // zipf: P(min + r - 1) proportional to r^-exponent, r = 1..max-min+1
  std::vector<HistogramBin> histogram;
  std::string histogram_path;   // for labels
  // sequence: step n's rows all have length values[n % size] (a recorded run replayed
  // exactly); padding and buckets still apply, packing does not.
  std::vector<std::uint64_t> values;
  std::uint64_t seed = 1;

  // Shaping a batch: the tensor length is the batch's longest, then rounded up to a multiple,
  // then raised to the smallest bucket that holds it. pad_to_max uses max_len() for every
  // batch (fixed shape). pack concatenates sequences into rows of pack_length tokens.
  std::uint64_t pad_to_multiple = 1;
  std::vector<std::uint64_t> buckets;  // ascending
  bool pad_to_max = false;
  bool pack = false;
  std::uint64_t pack_length = 0;  // 0: the distribution's maximum
};

// A bad specification or histogram file; `file`/`line` set for file errors.
struct SeqLenError : std::invalid_argument {
  SeqLenError(const std::string& message, std::string key_ = {}, std::string file_ = {},
              std::uint64_t line_ = 0)
      : std::invalid_argument(message), key(std::move(key_)), file(std::move(file_)), line(line_) {}
  std::string key;  // the spec key at fault ("max", "buckets", ...), empty for file errors
  std::string file;
  std::uint64_t line;
};

// Reads "length,weight" lines (optional header `length,weight`, `#` comments, blank lines), plain
// or gzip, at most kMaxHistogramBytes. Throws SeqLenError naming the file and line.
constexpr std::uint64_t kMaxHistogramBytes = std::uint64_t(16) << 20;
std::vector<HistogramBin> read_histogram(const std::string& path);

struct BatchShape {
  std::uint64_t rows = 0;     // the batch dimension of the tensors
  std::uint64_t seq_len = 0;  // the padded length of the tensors
  std::uint64_t real_tokens = 0;
  std::uint64_t padded_tokens = 0;  // rows * seq_len
  std::uint64_t sequences = 0;      // sequences in the batch (packing: more than rows)
};

// The longest list dist sequence takes (a million steps).
constexpr std::size_t kMaxSequenceValues = 1'000'000;

class SeqLenSampler {
 public:
  // Validates the spec (throws SeqLenError naming the key).
  explicit SeqLenSampler(SeqLenSpec spec);
  const SeqLenSpec& spec() const { return spec_; }

  std::uint64_t sample(std::mt19937_64& rng) const;
  // The shape of step `step`'s batch of `batch` rows; deterministic in (seed, step).
  BatchShape batch(std::uint64_t step, std::uint64_t batch) const;
  // The lengths a sample can take, and the longest tensor length a batch can get.
  std::uint64_t min_len() const { return lo_; }
  std::uint64_t max_len() const { return hi_; }
  std::uint64_t max_shape_len() const;
  // "uniform(128..2048), pad x64" and the like, for labels.
  std::string describe() const;

 private:
  std::uint64_t shape_len(std::uint64_t longest) const;
  SeqLenSpec spec_;
  std::uint64_t lo_ = 0, hi_ = 0;
  std::vector<double> cdf_;  // zipf and histogram: cumulative weights
  std::vector<std::uint64_t> values_;  // histogram: the length of each bin
};

}  // namespace gmb
