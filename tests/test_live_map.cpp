// The pointer -> live entry table (TrackingAllocator: cuda_malloc, cuda_managed, cuda_mempool,
// ideal; the snapshot reader's live blocks) must behave exactly like a map under any order of
// puts, finds and takes: a wrong entry would free another allocation or count the wrong bytes.
#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

#include "common/live_map.h"

namespace gmb {
namespace {

TEST(LiveMap, AgreesWithAMapUnderRandomPutsAndTakes) {
  std::mt19937_64 rng(11);
  LiveMap<Bytes> table;  // starts small: it must grow
  std::unordered_map<DevPtr, Bytes> ref;
  for (int i = 0; i < 200000; ++i) {
    // Aligned device pointers close together (as drivers hand them out), a few unaligned ones and
    // the empty marker's neighbourhood.
    const int kind = static_cast<int>(rng() % 10);
    DevPtr ptr = kind < 7 ? 0x7f0000000000ull + (rng() % 3000) * 512 : kind < 9 ? rng() % 5000 : ~DevPtr(0) - rng() % 2;
    if (const Bytes* v = table.find(ptr)) {
      ASSERT_TRUE(ref.count(ptr)) << "pointer " << ptr << " at op " << i;
      ASSERT_EQ(*v, ref[ptr]);
    } else {
      ASSERT_FALSE(ref.count(ptr)) << "pointer " << ptr << " at op " << i;
    }
    if (rng() % 3 != 2) {
      const Bytes v = rng();
      table.put(ptr, v);
      ref[ptr] = v;
    } else {
      Bytes got = 0;
      const bool found = table.take(ptr, got);
      auto it = ref.find(ptr);
      ASSERT_EQ(found, it != ref.end()) << "pointer " << ptr << " at op " << i;
      if (it != ref.end()) {
        EXPECT_EQ(got, it->second);
        ref.erase(it);
      }
    }
    ASSERT_EQ(table.size(), ref.size());
  }
  std::size_t seen = 0;
  table.for_each([&](DevPtr ptr, const Bytes& v) {
    ++seen;
    ASSERT_TRUE(ref.count(ptr));
    EXPECT_EQ(ref[ptr], v);
  });
  EXPECT_EQ(seen, ref.size());
}

// A set (NoValue; the snapshot reader's addresses freed before): the same pointers found after
// many puts and takes as a std::set would hold, the empty marker among them.
TEST(LiveMap, ASetOfPointersHoldsWhatWasPutAndNotTaken) {
  std::mt19937_64 rng(12);
  LiveMap<NoValue> set;
  std::unordered_map<DevPtr, int> ref;
  for (int i = 0; i < 100000; ++i) {
    const DevPtr ptr = rng() % 4 ? 0x7f0000000000ull + (rng() % 20000) * 512 : ~DevPtr(0) - rng() % 2;
    if (rng() % 4) {
      set.put(ptr, NoValue{});
      ref[ptr] = 1;
    } else {
      NoValue none;
      ASSERT_EQ(set.take(ptr, none), ref.erase(ptr) == 1) << "pointer " << ptr << " at op " << i;
    }
  }
  ASSERT_EQ(set.size(), ref.size());
  for (DevPtr p = 0x7f0000000000ull; p < 0x7f0000000000ull + 20000 * 512; p += 512)
    ASSERT_EQ(set.find(p) != nullptr, ref.count(p) == 1) << "pointer " << p;
  EXPECT_EQ(set.find(~DevPtr(0)) != nullptr, ref.count(~DevPtr(0)) == 1);
}

}  // namespace
}  // namespace gmb
