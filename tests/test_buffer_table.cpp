// The runner's id -> pointer table must behave exactly like a map under any order of puts and
// takes (a wrong pointer would free someone else's block).
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "harness/run/buffer_table.h"

namespace gmb {
namespace {

TEST(BufferTable, AgreesWithAMapUnderRandomPutsAndTakes) {
  std::mt19937_64 rng(7);
  BufferTable table(4);  // small on purpose: it must grow
  std::unordered_map<BufferId, DevPtr> ref;
  for (int i = 0; i < 200000; ++i) {
    // Ids close together (as workloads make them) and a few extreme ones, the empty marker included.
    BufferId id = rng() % 3 == 0 ? rng() % 4096 : (rng() % 5 == 0 ? ~BufferId(0) - rng() % 2 : 1000 + rng() % 600);
    switch (rng() % 3) {
      case 0: {
        DevPtr p = rng() | 1;
        table.put(id, p);
        ref[id] = p;
        break;
      }
      case 1: {  // exchange: the value before, then the new one
        DevPtr p = rng() | 1;
        auto before = table.exchange(id, p);
        auto it = ref.find(id);
        ASSERT_EQ(before.has_value(), it != ref.end()) << "id " << id << " at op " << i;
        if (it != ref.end()) EXPECT_EQ(*before, it->second);
        ref[id] = p;
        break;
      }
      case 2: {
        auto got = table.take(id);
        auto it = ref.find(id);
        ASSERT_EQ(got.has_value(), it != ref.end()) << "id " << id << " at op " << i;
        if (it != ref.end()) {
          EXPECT_EQ(*got, it->second);
          ref.erase(it);
        }
        break;
      }
    }
    ASSERT_EQ(table.size(), ref.size());
    BufferId probe = 1000 + rng() % 600;
    auto f = table.find(probe);
    auto it = ref.find(probe);
    ASSERT_EQ(f.has_value(), it != ref.end());
    if (f) {
      ASSERT_EQ(*f, it->second);
    }
  }
  std::size_t seen = 0;
  table.for_each([&](BufferId id, DevPtr p) {
    ++seen;
    ASSERT_TRUE(ref.count(id));
    EXPECT_EQ(ref[id], p);
  });
  EXPECT_EQ(seen, ref.size());
  table.clear();
  EXPECT_EQ(table.size(), 0u);
  EXPECT_FALSE(table.find(1000).has_value());
}

}  // namespace
}  // namespace gmb
