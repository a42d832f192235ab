// The runner's id tables must behave exactly like a map under any order of puts and
// takes (a wrong pointer would free someone else's block).
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "harness/run/buffer_slots.h"
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
        if (it != ref.end()) {
          EXPECT_EQ(*before, it->second);
        }
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

namespace gmb {
namespace {

// Slots follow ids as the runner's id table did: the same slot for an id allocated again, slot
// 0 for a free of an id that is not live, freed slots reused, and never two live ids on one slot.
TEST(BufferSlots, GiveEveryLiveIdItsOwnSlotAndReuseFreedOnes) {
  BufferSlots slots;
  std::vector<Op> ops = {{Op::Kind::Alloc, 10, 1, 0}, {Op::Kind::Alloc, 20, 1, 0}, {Op::Kind::Compute, 5, 0, 0},
                         {Op::Kind::Free, 10, 0, 0},  {Op::Kind::Free, 99, 0, 0},  {Op::Kind::Alloc, 30, 1, 0},
                         {Op::Kind::Alloc, 20, 1, 0}, {Op::Kind::Free, 20, 0, 0},  {Op::Kind::Free, 20, 0, 0}};
  slots.assign(ops);
  EXPECT_EQ(ops[0].slot, 1u);
  EXPECT_EQ(ops[1].slot, 2u);
  EXPECT_EQ(ops[2].slot, 0u);  // compute: left alone
  EXPECT_EQ(ops[3].slot, 1u);
  EXPECT_EQ(ops[4].slot, 0u);  // 99 was never allocated
  EXPECT_EQ(ops[5].slot, 1u);  // 10's slot, free again
  EXPECT_EQ(ops[6].slot, 2u);  // 20 is live: its slot
  EXPECT_EQ(ops[7].slot, 2u);
  EXPECT_EQ(ops[8].slot, 0u);  // 20 is no longer live
  EXPECT_EQ(slots.end(), 3u);

  std::mt19937_64 rng(3);
  std::unordered_map<BufferId, std::uint32_t> live;
  std::unordered_map<std::uint32_t, BufferId> owner;
  for (int round = 0; round < 200; ++round) {
    std::vector<Op> batch;
    for (int i = 0; i < 500; ++i)
      batch.push_back({rng() % 2 ? Op::Kind::Alloc : Op::Kind::Free, rng() % 300, 1, 0});
    slots.assign(batch);
    for (const Op& op : batch) {
      auto it = live.find(op.id);
      if (op.kind == Op::Kind::Alloc) {
        ASSERT_NE(op.slot, 0u);
        if (it != live.end()) {
          ASSERT_EQ(op.slot, it->second);
        } else {
          ASSERT_EQ(owner.count(op.slot), 0u) << "slot " << op.slot << " is live already";
          live[op.id] = op.slot;
          owner[op.slot] = op.id;
        }
      } else if (it == live.end()) {
        ASSERT_EQ(op.slot, 0u);
      } else {
        ASSERT_EQ(op.slot, it->second);
        owner.erase(op.slot);
        live.erase(it);
      }
    }
  }
  EXPECT_LE(slots.end(), 301u);  // at most one slot per id that can be live at once, plus slot 0
}

}  // namespace
}  // namespace gmb
