// The device-level limit adaptor: what it refuses, what it charges, and that a refused call never
// reaches (and is never counted by) the device under it.
#include <gtest/gtest.h>

#include "devices/device.h"
#include "devices/limit_device.h"

using namespace gmb;

namespace {

std::unique_ptr<Device> sim(Bytes capacity) {
  SimDeviceOptions o;
  o.capacity_bytes = capacity;
  return make_sim_device(o);
}

TEST(LimitDevice, ChargesGranulesAndRefusesPastTheLimitWithoutAskingTheDevice) {
  auto card = sim(1 * GiB);
  LimitDevice capped(*card, 256 * KiB, 64 * KiB);
  auto a = capped.malloc_managed(1);  // charged one 64 KiB granule
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(capped.outstanding(), 64 * KiB);
  auto b = capped.malloc_managed(128 * KiB + 1);  // three granules: 256 KiB in all, at the limit
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(capped.outstanding(), 256 * KiB);
  EXPECT_FALSE(capped.last_refused());
  const std::uint64_t driver_calls = card->counters().managed_mallocs;
  EXPECT_FALSE(capped.malloc_managed(1).has_value());
  EXPECT_TRUE(capped.last_refused());
  EXPECT_EQ(card->counters().managed_mallocs, driver_calls) << "a refused call never reaches the device";
  EXPECT_EQ(capped.counters().managed_mallocs, driver_calls) << "the wrapper reports the device's counters";
  capped.free_managed(*a);
  EXPECT_EQ(capped.outstanding(), 192 * KiB);
  auto c = capped.malloc_managed(64 * KiB);
  ASSERT_TRUE(c.has_value());
  EXPECT_FALSE(capped.last_refused());
  capped.free_managed(*b);
  capped.free_managed(*c);
  EXPECT_EQ(capped.outstanding(), 0u);
  EXPECT_EQ(card->used_bytes(), sim(1 * GiB)->used_bytes());
}

TEST(LimitDevice, AFailureOfTheDeviceIsNotARefusal) {
  auto card = sim(64 * MiB);
  LimitDevice capped(*card, 1 * GiB, 1);
  EXPECT_FALSE(capped.malloc(128 * MiB).has_value()) << "the card is smaller than the limit";
  EXPECT_FALSE(capped.last_refused());
  EXPECT_EQ(capped.outstanding(), 0u);
}

TEST(LimitDevice, SizesNearTwoToThe64AreRefusedNotWrapped) {
  auto card = sim(1 * GiB);
  LimitDevice capped(*card, 1 * GiB, 64 * KiB);
  EXPECT_FALSE(capped.malloc(UINT64_MAX).has_value());
  EXPECT_TRUE(capped.last_refused());
  EXPECT_FALSE(capped.malloc(UINT64_MAX - 64 * KiB + 2).has_value());
  EXPECT_EQ(capped.outstanding(), 0u);
}

}  // namespace
