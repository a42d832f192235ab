// The trace readers' set of live ids (workloads/live_id_set.h) must behave like a set with a
// slot per member, whether an id is small (kept in an array by id) or not (hashed): a wrong
// answer would accept a free of a dead buffer, refuse a valid one, or give two live buffers one
// slot.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <set>
#include <unordered_map>
#include <vector>

#include "workloads/live_id_set.h"

namespace gmb {
namespace {

TEST(LiveIdSet, AgreesWithASetAndGivesSlotsLastFreedFirst) {
  std::mt19937_64 rng(7);
  LiveIdSet set;
  std::unordered_map<std::uint64_t, std::uint32_t> ref;  // id -> slot
  std::vector<std::uint32_t> freed;                       // slots in the order they were freed
  std::uint32_t next_slot = 1;
  std::set<std::uint32_t> used;
  for (int i = 0; i < 300000; ++i) {
    // Small ids (the array, growing), ids just below and above its limit of 2^20, large ones
    // and the hash's empty marker.
    const int kind = static_cast<int>(rng() % 10);
    const std::uint64_t id = kind < 5   ? rng() % 3000
                             : kind < 6 ? (std::uint64_t(1) << 20) - 1 - rng() % 3
                             : kind < 7 ? (std::uint64_t(1) << 20) + rng() % 3
                             : kind < 9 ? rng() % 100000 * 0x10000001ull
                                        : ~std::uint64_t(0) - rng() % 2;
    if (rng() % 2) {
      const std::uint32_t slot = set.insert(id);
      if (ref.count(id)) {
        ASSERT_EQ(slot, 0u) << "id " << id << " is live already, at op " << i;
        continue;
      }
      std::uint32_t expect = next_slot;
      if (!freed.empty()) {
        expect = freed.back();
        freed.pop_back();
      } else {
        ++next_slot;
      }
      ASSERT_EQ(slot, expect) << "id " << id << " at op " << i;
      ASSERT_TRUE(used.insert(slot).second) << "slot " << slot << " given twice";
      ref[id] = slot;
    } else {
      const std::uint32_t slot = set.erase(id);
      auto it = ref.find(id);
      if (it == ref.end()) {
        ASSERT_EQ(slot, 0u) << "id " << id << " is not live, at op " << i;
        continue;
      }
      ASSERT_EQ(slot, it->second) << "id " << id << " at op " << i;
      used.erase(slot);
      freed.push_back(slot);
      ref.erase(it);
    }
  }
  EXPECT_EQ(set.slots_end(), next_slot);
}

}  // namespace
}  // namespace gmb
