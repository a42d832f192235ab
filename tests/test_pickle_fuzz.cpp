// Mutated snapshots (bit flips, truncations, splices of two files, byte runs copied or repeated)
// must either convert or fail with a TraceError naming the place: never crash, hang or
// allocate without bound; and the streamed conversion must give what the two-pass one gives. Deterministic: a fixed seed, the same inputs every run. The libFuzzer
// target tests/fuzz/fuzz_snapshot.cpp explores further (clang; not part of CI).
#include <gtest/gtest.h>

#include <random>

#include "snapshot_text.h"
#include "test_helpers.h"
#include "workloads/pickle/pickle_reader.h"
#include "workloads/pytorch_snapshot.h"

namespace gmb {
namespace {

std::string synthetic(const std::string& name) {
  std::ifstream in(testing::source_path("tests/data/torch_snapshots/synthetic/" + name), std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string mutate(std::mt19937_64& rng, const std::vector<std::string>& corpus) {
  auto pick = [&](std::size_t n) { return n ? static_cast<std::size_t>(rng() % n) : 0; };
  std::string s = corpus[pick(corpus.size())];
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds && !s.empty(); ++r) {
    switch (pick(6)) {
      case 0:  // flip one bit
        s[pick(s.size())] ^= static_cast<char>(1u << pick(8));
        break;
      case 1:  // truncate
        s.resize(pick(s.size()));
        break;
      case 2: {  // splice: a prefix of this one, a suffix of another
        const std::string& o = corpus[pick(corpus.size())];
        s = s.substr(0, pick(s.size())) + o.substr(pick(o.size()));
        break;
      }
      case 3:  // a random byte
        s[pick(s.size())] = static_cast<char>(rng());
        break;
      case 4: {  // repeat a run of bytes
        std::size_t at = pick(s.size()), len = 1 + pick(16);
        s.insert(at, s.substr(at, len));
        break;
      }
      case 5: {  // set a length-like field to a large value
        std::size_t at = pick(s.size());
        for (std::size_t i = at; i < at + 4 && i < s.size(); ++i) s[i] = '\xff';
        break;
      }
    }
  }
  return s;
}

TEST(PickleFuzz, MutatedSnapshotsConvertOrFailCleanly) {
  std::vector<std::string> corpus;
  for (const char* name : {"basic.pickle", "basic_p2.pickle", "two_streams.pickle", "overflow.pickle",
                           "two_devices.pickle", "expandable_oom.pickle", "legacy_list.pickle", "values_p0.pickle", "long_trace.pickle",
                           "values_p4.pickle"})
    corpus.push_back(synthetic(name));
  std::mt19937_64 rng(20261130);
  int converted = 0, refused = 0;
  for (int i = 0; i < 20000; ++i) {
    std::string input = mutate(rng, corpus);
    try {
      // Bounded: at most one value per input byte.
      pickle::Document d = pickle::parse(input, "fuzz.pickle");
      ASSERT_LE(d.node_count(), input.size()) << "iteration " << i;
    } catch (const pickle::PickleError&) {
    }
    // The trace converted while parsing gives what the two-pass conversion gives, error or not.
    const std::string streamed = testing::conversion_text([&] { return convert_pytorch_snapshot(input, "fuzz.pickle"); });
    const std::string two_pass =
        testing::conversion_text([&] { return convert_pytorch_snapshot_unstreamed(input, "fuzz.pickle"); });
    ASSERT_TRUE(streamed == two_pass) << "iteration " << i << ": " << testing::first_difference(streamed, two_pass);
    try {
      PyTorchSnapshot s = convert_pytorch_snapshot(input, "fuzz.pickle");
      ASSERT_LE(s.ops.size(), 2 * input.size()) << "iteration " << i;
      ++converted;
    } catch (const TraceError& e) {
      std::string what = e.what();
      ASSERT_EQ(what.rfind("fuzz.pickle: ", 0), 0u) << what;
      // Never raw bytes: the message is printable ASCII.
      for (char c : what) ASSERT_TRUE(c >= 0x20 && c < 0x7f) << "iteration " << i << ": " << what;
      ++refused;
    }
  }
  // Both outcomes occur, so the mutations reach past the first bytes.
  EXPECT_GT(converted, 100);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace gmb
