// Sequence-length distributions: bounds, shaping (padding, buckets, pad to max, packing),
// reproducibility and the histogram file.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "test_helpers.h"
#include "workloads/seq_len.h"

using namespace gmb;
using namespace gmb::testing;

namespace {

SeqLenSpec spec(SeqDist d, std::uint64_t min, std::uint64_t max) {
  SeqLenSpec s;
  s.dist = d;
  s.min = min;
  s.max = max;
  s.mean = (min + max) / 2.0;
  s.stddev = (max - min) / 4.0;
  s.mu = std::log((min + max) / 3.0);
  s.sigma = 0.7;
  s.exponent = 1.1;
  return s;
}

std::vector<std::uint64_t> draw(const SeqLenSampler& s, int n, std::uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint64_t> v;
  for (int i = 0; i < n; ++i) v.push_back(s.sample(rng));
  return v;
}

}  // namespace

TEST(SeqLen, EveryDistributionStaysWithinItsBounds) {
  for (SeqDist d : {SeqDist::Uniform, SeqDist::Normal, SeqDist::LogNormal, SeqDist::Zipf}) {
    SeqLenSampler s(spec(d, 37, 1000));
    auto v = draw(s, 20000);
    EXPECT_EQ(*std::min_element(v.begin(), v.end()) >= 37, true) << to_string(d);
    EXPECT_LE(*std::max_element(v.begin(), v.end()), 1000u) << to_string(d);
    EXPECT_GT(std::set<std::uint64_t>(v.begin(), v.end()).size(), 20u) << to_string(d) << " is not spread";
  }
  SeqLenSpec f;
  f.dist = SeqDist::Fixed;
  f.value = 321;
  for (auto x : draw(SeqLenSampler(f), 100)) EXPECT_EQ(x, 321u);
}

TEST(SeqLen, DistributionsHaveTheirShape) {
  auto mean = [](const std::vector<std::uint64_t>& v) {
    double m = 0;
    for (auto x : v) m += double(x);
    return m / double(v.size());
  };
  // Uniform 100..300: mean 200. Normal(500, 50) inside 1..2000: mean 500.
  EXPECT_NEAR(mean(draw(SeqLenSampler(spec(SeqDist::Uniform, 100, 300)), 50000)), 200.0, 2.0);
  SeqLenSpec n = spec(SeqDist::Normal, 1, 2000);
  n.mean = 500;
  n.stddev = 50;
  EXPECT_NEAR(mean(draw(SeqLenSampler(n), 50000)), 500.0, 2.0);
  // Lognormal: the median is exp(mu).
  SeqLenSpec ln = spec(SeqDist::LogNormal, 1, 100000);
  ln.mu = std::log(400.0);
  ln.sigma = 0.5;
  auto lv = draw(SeqLenSampler(ln), 20001);
  std::nth_element(lv.begin(), lv.begin() + 10000, lv.end());
  EXPECT_NEAR(double(lv[10000]), 400.0, 12.0);
  // Zipf: a long tail; the shortest length is the most frequent, the mean far above the median.
  auto zv = draw(SeqLenSampler(spec(SeqDist::Zipf, 64, 4096)), 50000);
  std::map<std::uint64_t, int> counts;
  for (auto x : zv) ++counts[x];
  EXPECT_EQ(std::max_element(counts.begin(), counts.end(), [](auto& a, auto& b) { return a.second < b.second; })->first,
            64u);
  std::nth_element(zv.begin(), zv.begin() + 25000, zv.end());
  EXPECT_GT(mean(zv), 2.0 * double(zv[25000]) - 64.0);
}

TEST(SeqLen, PaddingToAMultipleAndBucketing) {
  SeqLenSpec dyn = spec(SeqDist::Uniform, 1, 1000);
  dyn.seed = 5;
  SeqLenSpec pad = dyn;
  pad.pad_to_multiple = 64;
  SeqLenSpec bucket = dyn;
  bucket.buckets = {128, 256, 512, 1024};
  SeqLenSpec max = dyn;
  max.pad_to_max = true;
  SeqLenSampler sd(dyn), sp(pad), sb(bucket), sm(max);
  for (std::uint64_t step = 0; step < 200; ++step) {
    BatchShape d = sd.batch(step, 4), p = sp.batch(step, 4), b = sb.batch(step, 4), m = sm.batch(step, 4);
    // Same seed and step: the same lengths, shaped differently.
    EXPECT_EQ(d.real_tokens, p.real_tokens);
    EXPECT_EQ(d.real_tokens, b.real_tokens);
    EXPECT_LE(d.real_tokens, d.padded_tokens);
    EXPECT_EQ(p.seq_len % 64, 0u);
    EXPECT_GE(p.seq_len, d.seq_len);
    EXPECT_LT(p.seq_len - d.seq_len, 64u);
    std::uint64_t want = 128;
    while (want < d.seq_len) want *= 2;
    EXPECT_EQ(b.seq_len, want) << "the smallest bucket holding the longest sequence";
    EXPECT_EQ(m.seq_len, 1000u);
    EXPECT_EQ(m.padded_tokens, 4000u);
  }
}

TEST(SeqLen, PackingFillsRowsOfThePackLength) {
  SeqLenSpec p = spec(SeqDist::Uniform, 20, 200);
  p.pack = true;
  p.pack_length = 512;
  SeqLenSampler s(p);
  EXPECT_EQ(s.max_shape_len(), 512u);
  SeqLenSpec d = spec(SeqDist::Uniform, 20, 200);
  SeqLenSampler dyn(d);
  double packed = 0, padded = 0;
  for (std::uint64_t step = 0; step < 100; ++step) {
    BatchShape b = s.batch(step, 8);
    EXPECT_EQ(b.seq_len, 512u);
    EXPECT_EQ(b.padded_tokens, 8u * 512);
    EXPECT_LE(b.real_tokens, 8u * 512);
    // A row is closed only when the next sequence (at most 200 tokens) does not fit.
    EXPECT_GT(b.real_tokens, 8u * (512 - 200));
    EXPECT_GE(b.sequences, 8u * 2) << "rows hold several sequences";
    packed += double(b.real_tokens) / double(b.padded_tokens);
    BatchShape x = dyn.batch(step, 8);
    padded += double(x.real_tokens) / double(x.padded_tokens);
  }
  // Packing wastes less than padding each batch to its longest sequence.
  EXPECT_GT(packed / 100, 0.8);
  EXPECT_GT(packed, padded);
}

TEST(SeqLen, TheSeedAndTheStepDecideTheLengths) {
  SeqLenSpec a = spec(SeqDist::LogNormal, 1, 4096);
  a.seed = 11;
  SeqLenSampler s1(a), s2(a);
  for (std::uint64_t step : {0, 1, 77, 1000000}) {
    EXPECT_EQ(s1.batch(step, 16).real_tokens, s2.batch(step, 16).real_tokens);
    EXPECT_EQ(s1.batch(step, 16).seq_len, s2.batch(step, 16).seq_len);
  }
  EXPECT_NE(s1.batch(0, 16).real_tokens, s1.batch(1, 16).real_tokens);
  a.seed = 12;
  SeqLenSampler s3(a);
  int differ = 0;
  for (std::uint64_t step = 0; step < 10; ++step) differ += s1.batch(step, 16).real_tokens != s3.batch(step, 16).real_tokens;
  EXPECT_GE(differ, 9);
}

TEST(SeqLen, HistogramFileIsSampledByWeight) {
  auto dir = temp_dir("hist");
  write_text(dir / "h.csv", "# lengths seen in a dataset\nlength,weight\n128,3\n512,1\n\n2048,0\n1024, 0.5\n");
  SeqLenSpec h;
  h.dist = SeqDist::Histogram;
  h.histogram = read_histogram((dir / "h.csv").string());
  ASSERT_EQ(h.histogram.size(), 4u);
  SeqLenSampler s(h);
  EXPECT_EQ(s.min_len(), 128u);
  EXPECT_EQ(s.max_len(), 1024u) << "a bin of weight 0 is never drawn";
  std::map<std::uint64_t, int> c;
  for (auto x : draw(s, 45000)) ++c[x];
  EXPECT_EQ(c.size(), 3u);
  EXPECT_NEAR(c[128] / 45000.0, 3 / 4.5, 0.01);
  EXPECT_NEAR(c[512] / 45000.0, 1 / 4.5, 0.01);
  EXPECT_NEAR(c[1024] / 45000.0, 0.5 / 4.5, 0.01);
  std::filesystem::remove_all(dir);
}

TEST(SeqLen, HistogramErrorsNameTheFileAndLine) {
  auto dir = temp_dir("histerr");
  auto expect_error = [&](const std::string& text, const std::string& needle) {
    write_text(dir / "bad.csv", text);
    try {
      read_histogram((dir / "bad.csv").string());
      ADD_FAILURE() << "no error for: " << text;
    } catch (const SeqLenError& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  expect_error("length,weight\n128,1\n-5,2\n", "bad.csv:3: length '-5' is not a positive integer");
  expect_error("128,1\n256,abc\n", "bad.csv:2: weight 'abc' is not a number");
  expect_error("128,1,7\n", "bad.csv:1: expected 'length,weight'");
  expect_error("128,-1\n", "bad.csv:1: weight '-1' must be zero or more");
  expect_error("128,0\n", "no bin with a positive weight");
  expect_error("0,1\n", "bad.csv:1: length must be at least 1");
  std::filesystem::remove_all(dir);
}

TEST(SeqLen, ImpossibleSpecsAreRejectedNamingTheKey) {
  auto key_of = [](SeqLenSpec s) -> std::string {
    try {
      SeqLenSampler x(s);
    } catch (const SeqLenError& e) {
      return e.key;
    }
    return "accepted";
  };
  SeqLenSpec u = spec(SeqDist::Uniform, 100, 50);
  EXPECT_EQ(key_of(u), "min");
  u = spec(SeqDist::Uniform, 1, 1000);
  u.buckets = {256, 512};
  EXPECT_EQ(key_of(u), "buckets") << "the largest bucket must hold the longest sequence";
  u.buckets = {512, 256, 1024};
  EXPECT_EQ(key_of(u), "buckets");
  u.buckets = {};
  u.pack = true;
  u.pad_to_multiple = 8;
  EXPECT_EQ(key_of(u), "pack");
  u.pad_to_multiple = 1;
  u.pack_length = 100;
  EXPECT_EQ(key_of(u), "pack_length");
  SeqLenSpec n = spec(SeqDist::Normal, 10, 100);
  n.mean = 500;
  EXPECT_EQ(key_of(n), "mean");
  n.mean = 50;
  n.stddev = 0;
  EXPECT_EQ(key_of(n), "std");
}

TEST(SeqLen, SequenceReplaysItsLengthsStepByStepAndCycles) {
  SeqLenSpec s;
  s.dist = SeqDist::Sequence;
  s.values = {300, 128, 1024};
  SeqLenSampler sampler(s);
  EXPECT_EQ(sampler.min_len(), 128u);
  EXPECT_EQ(sampler.max_len(), 1024u);
  const std::uint64_t expect[] = {300, 128, 1024, 300, 128, 1024, 300};
  for (std::uint64_t step = 0; step < 7; ++step) {
    BatchShape b = sampler.batch(step, 4);
    EXPECT_EQ(b.seq_len, expect[step]) << step;
    EXPECT_EQ(b.real_tokens, 4 * expect[step]);
    EXPECT_EQ(b.padded_tokens, 4 * expect[step]);
    EXPECT_EQ(b.sequences, 4u);
  }
  EXPECT_EQ(sampler.describe(), "sequence of 3 (128..1024)");
  s.pad_to_multiple = 64;  // shaping still applies: 300 -> 320
  EXPECT_EQ(SeqLenSampler(s).batch(0, 2).seq_len, 320u);
  EXPECT_EQ(SeqLenSampler(s).batch(0, 2).real_tokens, 600u);
}

TEST(SeqLen, SequenceErrorsNameTheKey) {
  auto key_of = [](SeqLenSpec s) {
    try {
      SeqLenSampler x(s);
    } catch (const SeqLenError& e) {
      return e.key + ": " + e.what();
    }
    return std::string("no error");
  };
  SeqLenSpec s;
  s.dist = SeqDist::Sequence;
  EXPECT_EQ(key_of(s), "values: dist sequence needs a non-empty list of lengths");
  s.values = {5, 0};
  EXPECT_EQ(key_of(s), "values: every length of a sequence must be at least 1");
  s.values = {5};
  s.pack = true;
  EXPECT_EQ(key_of(s), "pack: pack draws sequences; dist sequence gives each step's length, so it cannot pack");
}
