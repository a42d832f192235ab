// BlockSet (the caching allocator's ordered block sets) against std::set with PyTorch's
// comparators, under random inserts, erases, lookups and iteration.
#include <gtest/gtest.h>

#include "block_set_order_check.h"

#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "allocators/caching/block_set.h"

namespace gmb::caching {
namespace {

struct B {
  StreamId stream = 0;
  Bytes size = 0;
  DevPtr ptr = 0;
  void* tleaf = nullptr;
};

struct BySize {
  bool operator()(const B* a, const B* b) const {
    if (a->stream != b->stream) return static_cast<std::uint32_t>(a->stream) < static_cast<std::uint32_t>(b->stream);
    if (a->size != b->size) return a->size < b->size;
    return a->ptr < b->ptr;
  }
};
struct ByAddr {
  bool operator()(const B* a, const B* b) const {
    if (a->stream != b->stream) return static_cast<std::uint32_t>(a->stream) < static_cast<std::uint32_t>(b->stream);
    return a->ptr < b->ptr;
  }
};

template <bool kBySize, class Cmp>
void run(std::uint32_t seed, int n_ops, int key_range) {
  std::mt19937_64 rng(seed);
  BlockSet<B, kBySize> set;
  std::set<B*, Cmp> ref;
  std::vector<std::unique_ptr<B>> pool;
  std::vector<B*> in;
  auto check_order = [&] { gmb::testing::expect_same_order(set, ref); };
  for (int op = 0; op < n_ops; ++op) {
    int what = static_cast<int>(rng() % 10);
    if (what < 5 || in.empty()) {  // insert a new, unique key
      auto b = std::make_unique<B>();
      b->stream = static_cast<StreamId>(rng() % 3);
      b->size = 512 * (1 + rng() % static_cast<std::uint64_t>(key_range));
      b->ptr = 512 * (rng() % (1ull << 30));
      if (ref.count(b.get())) continue;
      set.insert(b.get());
      ref.insert(b.get());
      in.push_back(b.get());
      pool.push_back(std::move(b));
    } else if (what < 9) {  // erase a random member
      B* b = gmb::testing::erase_random_member(in, set, ref, rng);
      ASSERT_EQ(b->tleaf, nullptr);
    } else {  // lower_bound of a random key
      B key;
      key.stream = static_cast<StreamId>(rng() % 3);
      key.size = 512 * (rng() % static_cast<std::uint64_t>(key_range + 2));
      key.ptr = rng() % 2 ? 0 : 512 * (rng() % (1ull << 30));
      auto it = ref.lower_bound(&key);
      B* expect = it == ref.end() ? nullptr : *it;
      ASSERT_EQ(set.lower_bound(BlockKey{key.stream, key.size, key.ptr}), expect);
    }
    if (op % 97 == 0) check_order();
  }
  check_order();
  // Drain completely, then refill: nodes are reused.
  for (B* b : in) set.erase(b);
  EXPECT_TRUE(set.empty());
  EXPECT_EQ(set.first(), nullptr);
  EXPECT_EQ(set.lower_bound(BlockKey{0, 0, 0}), nullptr);
  for (B* b : in) set.insert(b);
  EXPECT_EQ(set.size(), in.size());
}

TEST(CachingBlockSet, MatchesStdSetBySize) {
  for (std::uint32_t seed = 1; seed <= 6; ++seed) run<true, BySize>(seed, 20000, seed % 2 ? 40 : 5000);
}

TEST(CachingBlockSet, MatchesStdSetByAddress) {
  for (std::uint32_t seed = 11; seed <= 14; ++seed) run<false, ByAddr>(seed, 20000, 100);
}

TEST(CachingBlockSet, LargeSetGrowsAndShrinks) { run<true, BySize>(99, 200000, 100000); }

// A set of zero to three blocks, as most size bins are: a block inserted into an empty set is
// held by the set itself and joins the tree when a second comes. Order, lookups and tleaf after
// every insert and erase, against std::set.
template <bool kBySize, class Cmp>
void run_small(std::uint32_t seed) {
  std::mt19937_64 rng(seed);
  BlockSet<B, kBySize> set;
  std::set<B*, Cmp> ref;
  std::vector<std::unique_ptr<B>> pool;
  std::vector<B*> in;
  for (int op = 0; op < 20000; ++op) {
    if (in.empty() || (in.size() < 3 && rng() % 2)) {
      auto b = std::make_unique<B>();
      b->stream = static_cast<StreamId>(rng() % 2);
      b->size = 512 * (1 + rng() % 4);
      b->ptr = 512 * (rng() % 64);
      if (ref.count(b.get())) continue;
      set.insert(b.get());
      ref.insert(b.get());
      in.push_back(b.get());
      ASSERT_NE(b->tleaf, nullptr);
      pool.push_back(std::move(b));
    } else {
      B* b = gmb::testing::erase_random_member(in, set, ref, rng);
      ASSERT_EQ(b->tleaf, nullptr);
    }
    ASSERT_EQ(set.empty(), ref.empty());
    gmb::testing::expect_same_order(set, ref);
    if (::testing::Test::HasFatalFailure()) return;
    for (int k = 0; k < 4; ++k) {
      B key;
      key.stream = static_cast<StreamId>(rng() % 2);
      key.size = 512 * (rng() % 6);
      key.ptr = 512 * (rng() % 66);
      auto it = ref.lower_bound(&key);
      ASSERT_EQ(set.lower_bound(BlockKey{key.stream, key.size, key.ptr}), it == ref.end() ? nullptr : *it);
    }
  }
}

TEST(CachingBlockSet, SmallSetsMatchStdSet) {
  for (std::uint32_t seed = 21; seed <= 24; ++seed) {
    run_small<true, BySize>(seed);
    run_small<false, ByAddr>(seed);
  }
}

}  // namespace
}  // namespace gmb::caching
