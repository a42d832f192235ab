// FreeBlockSet (the caching allocator's size-binned free sets) against std::set with PyTorch's
// BlockComparatorSize, under random inserts, erases, lookups and iteration in both directions.
#include <gtest/gtest.h>

#include "block_set_order_check.h"

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "allocators/caching/free_block_set.h"

namespace gmb::caching {
namespace {

struct B {
  StreamId stream = 0;
  Bytes size = 0;
  DevPtr ptr = 0;
  void* tleaf = nullptr;
  void* tbin = nullptr;
};

struct BySize {
  bool operator()(const B* a, const B* b) const {
    if (a->stream != b->stream)
      return static_cast<std::uint32_t>(a->stream) < static_cast<std::uint32_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};

// Sizes from every kind of bin: exact (below 64 KiB), geometric, huge; with many equal sizes.
Bytes random_size(std::mt19937_64& rng, int spread) {
  switch (rng() % 4) {
    case 0: return 512 * (1 + rng() % 8);                              // few exact sizes
    case 1: return 512 * (1 + rng() % static_cast<std::uint64_t>(spread));
    case 2: return (Bytes{1} << (20 + rng() % 20)) + 512 * (rng() % 4096);
    default: return 512 * (1 + rng() % (Bytes{1} << 38));
  }
}

void run(std::uint32_t seed, int n_ops, int spread, int n_streams) {
  std::mt19937_64 rng(seed);
  FreeBlockSet<B> set;
  std::set<B*, BySize> ref;
  std::vector<std::unique_ptr<B>> pool;
  std::vector<B*> in;
  const StreamId streams[] = {0, 1, 7, 65535};
  auto check_order = [&] { gmb::testing::expect_same_order(set, ref); };
  for (int op = 0; op < n_ops; ++op) {
    const int what = static_cast<int>(rng() % 10);
    if (what < 5 || in.empty()) {  // insert a new, unique key
      auto b = std::make_unique<B>();
      b->stream = streams[rng() % static_cast<std::uint64_t>(n_streams)];
      b->size = random_size(rng, spread);
      b->ptr = 512 * (rng() % (1ull << 30));
      if (ref.count(b.get())) continue;
      set.insert(b.get());
      ref.insert(b.get());
      in.push_back(b.get());
      pool.push_back(std::move(b));
    } else if (what < 8) {  // erase a random member
      B* b = gmb::testing::erase_random_member(in, set, ref, rng);
      ASSERT_EQ(b->tleaf, nullptr);
    } else {  // lower_bound of a random key, often of a member's size (best fit from ptr 0)
      B key;
      key.stream = streams[rng() % 4];
      key.size = !in.empty() && rng() % 2 ? in[rng() % in.size()]->size + rng() % 2
                                          : random_size(rng, spread);
      if (rng() % 50 == 0) key.size = Bytes{1} << (40 + rng() % 24);  // beyond any block
      key.ptr = rng() % 2 ? 0 : 512 * (rng() % (1ull << 30));
      auto it = ref.lower_bound(&key);
      B* expect = it == ref.end() ? nullptr : *it;
      ASSERT_EQ(set.lower_bound(BlockKey{key.stream, key.size, key.ptr}), expect)
          << "op " << op << " stream " << key.stream << " size " << key.size;
    }
    if (op % 97 == 0) check_order();
  }
  check_order();
  for (B* b : in) set.erase(b);  // drain, then refill: bins and nodes are reused
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.first(), nullptr);
  EXPECT_EQ(set.last(), nullptr);
  EXPECT_EQ(set.lower_bound(BlockKey{0, 0, 0}), nullptr);
  for (B* b : in) set.insert(b);
  EXPECT_EQ(set.size(), in.size());
}

TEST(CachingFreeBlockSet, MatchesStdSetOneStream) {
  for (std::uint32_t seed = 1; seed <= 4; ++seed) run(seed, 20000, seed % 2 ? 40 : 5000, 1);
}

TEST(CachingFreeBlockSet, MatchesStdSetManyStreams) {
  for (std::uint32_t seed = 11; seed <= 14; ++seed) run(seed, 20000, 300, 4);
}

TEST(CachingFreeBlockSet, ManyEqualSizesGrowTheBinTree) { run(99, 100000, 2, 1); }

}  // namespace
}  // namespace gmb::caching
