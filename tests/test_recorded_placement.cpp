// RecordedPlacementDevice: segments go where the recording put them, but never on top of a
// segment that is still live here (the recorded run had freed it; this run has not).
#include <gtest/gtest.h>

#include "devices/recorded_placement_device.h"

using namespace gmb;

namespace {
std::unique_ptr<Device> sim() {
  SimDeviceOptions o;
  o.capacity_bytes = 8 * GiB;
  return make_sim_device(o);
}
constexpr DevPtr kA = 0x7f0000000000ULL, kB = 0x7f0000400000ULL;
}  // namespace

TEST(RecordedPlacement, SegmentsTakeTheRecordedAddressesWhileTheSizesAgree) {
  RecordedPlacementDevice d(sim(), {{2 * MiB, kA}, {4 * MiB, kB}, {2 * MiB, kA}});
  EXPECT_EQ(*d.malloc(2 * MiB), kA);
  EXPECT_EQ(*d.malloc(4 * MiB), kB);
  d.free(kA);
  EXPECT_EQ(*d.malloc(2 * MiB), kA);  // the recording reused A after its free: so does this run
  EXPECT_FALSE(d.diverged());
  EXPECT_EQ(d.placed(), 3u);
}

TEST(RecordedPlacement, ARecordedAddressStillLiveHereIsNotHandedOutTwice) {
  // The recorded run freed A before its third cudaMalloc; this run still holds A then.
  RecordedPlacementDevice d(sim(), {{2 * MiB, kA}, {4 * MiB, kB}, {2 * MiB, kA}, {2 * MiB, kB}});
  const DevPtr a = *d.malloc(2 * MiB);
  const DevPtr b = *d.malloc(4 * MiB);
  const DevPtr c = *d.malloc(2 * MiB);
  EXPECT_EQ(a, kA);
  EXPECT_EQ(b, kB);
  EXPECT_NE(c, kA);
  EXPECT_TRUE(d.diverged());  // and from here on, addresses of its own, none recorded
  EXPECT_GE(c, DevPtr(1) << 52);
  const DevPtr e = *d.malloc(2 * MiB);
  EXPECT_NE(e, kB);
  // Each segment is freed as itself: freeing c leaves a, b and e live.
  d.free(c);
  EXPECT_EQ(d.used_bytes(), 8 * MiB);
  d.free(a);
  d.free(b);
  d.free(e);
  EXPECT_EQ(d.used_bytes(), 0u);
}

TEST(RecordedPlacement, ARecordedRangeOverlappingALiveSegmentIsRefusedToo) {
  // A recorded 4 MiB segment at A + 2 MiB would overlap the live 4 MiB segment at A.
  RecordedPlacementDevice d(sim(), {{4 * MiB, kA}, {4 * MiB, kA + 2 * MiB}});
  EXPECT_EQ(*d.malloc(4 * MiB), kA);
  EXPECT_NE(*d.malloc(4 * MiB), kA + 2 * MiB);
  EXPECT_TRUE(d.diverged());
}

TEST(RecordedPlacement, AMovedSegmentNeverLandsOnALiveRecordedOneAbove2To52) {
  // A snapshot this tool exported records addresses above 2^52. Here the first recorded segment
  // sits exactly where inner address + 2^52 of this run's third cudaMalloc would be; the third
  // call diverges (the recording reused A, which this run still holds).
  auto probe = sim();
  probe->malloc(2 * MiB);
  probe->malloc(2 * MiB);
  const DevPtr third_inner = *probe->malloc(2 * MiB);
  const DevPtr y = third_inner + (DevPtr(1) << 52);
  RecordedPlacementDevice d(sim(), {{2 * MiB, y}, {2 * MiB, kA}, {2 * MiB, kA}});
  EXPECT_EQ(*d.malloc(2 * MiB), y);
  EXPECT_EQ(*d.malloc(2 * MiB), kA);
  const DevPtr c = *d.malloc(2 * MiB);
  EXPECT_TRUE(d.diverged());
  EXPECT_GE(c, y + 2 * MiB);  // above every recorded range, so never on y
  d.free(y);                  // frees the recorded segment, not the moved one
  EXPECT_EQ(d.used_bytes(), 4 * MiB);
  d.free(c);
  d.free(kA);
  EXPECT_EQ(d.used_bytes(), 0u);
}

TEST(RecordedPlacement, ARecordingWithNoRoomAboveItIsNotPlaced) {
  // A recorded range ending within 2^52 of 2^63 (a snapshot's addresses are signed 64-bit)
  // leaves no room for moved addresses above it: nothing is placed as recorded, and addresses
  // are the inner device's own.
  const DevPtr high = (DevPtr(1) << 63) - (DevPtr(1) << 51);
  auto probe = sim();
  const DevPtr inner = *probe->malloc(2 * MiB);
  RecordedPlacementDevice d(sim(), {{2 * MiB, high}});
  EXPECT_EQ(*d.malloc(2 * MiB), inner);
  EXPECT_EQ(d.placed(), 0u);
}

TEST(RecordedPlacement, WithNothingRecordedLiveBelow2To52AddressesAreTheInnerDevicesOwn) {
  // Nothing recorded (a what-if): the sim's own addresses, as an RMM log of the run shows them.
  auto probe = sim();
  const DevPtr first = *probe->malloc(2 * MiB);
  RecordedPlacementDevice none(sim(), {});
  EXPECT_EQ(*none.malloc(2 * MiB), first);
  // Only recorded segments above 2^52 live at the divergence (a recording of our own export):
  // inner addresses cannot meet them, so they are not moved either.
  const DevPtr high = (DevPtr(1) << 52) + 64 * MiB;
  RecordedPlacementDevice d(sim(), {{2 * MiB, high}, {4 * MiB, high}});
  EXPECT_EQ(*d.malloc(2 * MiB), high);
  const DevPtr second_inner = *probe->malloc(2 * MiB);
  EXPECT_EQ(*d.malloc(4 * MiB), second_inner);  // the recorded range is live here: diverged
  EXPECT_TRUE(d.diverged());
}
