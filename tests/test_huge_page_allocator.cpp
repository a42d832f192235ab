// HugePageAllocator (common/huge_page_allocator.h): what a vector sees (its contents, kept as it
// grows) and, where huge pages are used, freed blocks serving the next ones, whole or in part,
// without two live blocks ever sharing memory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/huge_page_allocator.h"

namespace gmb {
namespace {

constexpr std::size_t kMiB = std::size_t(1) << 20;

TEST(HugePageAllocator, AVectorKeepsItsContentsAsItGrowsPastHugePages) {
  std::vector<std::uint64_t, HugePageAllocator<std::uint64_t>> v;
  for (std::uint64_t i = 0; i < 3 * kMiB; ++i) v.push_back(i * 7);  // 24 MiB, several moves
  for (std::uint64_t i = 0; i < v.size(); i += 4099) ASSERT_EQ(v[i], i * 7) << i;
  EXPECT_EQ(v.back(), (3 * kMiB - 1) * 7);
}

#if GMB_HUGE_PAGES
TEST(HugePageAllocator, AFreedBlockServesTheNextOnesWithoutOverlap) {
  huge_pages::release_kept();  // blocks other tests freed would serve these first
  HugePageAllocator<char> a;
  char* big = a.allocate(8 * kMiB);
  big[0] = 1;
  big[8 * kMiB - 1] = 2;
  a.deallocate(big, 8 * kMiB);
  // The freed 8 MiB serve a 3 MiB block (4 MiB of huge pages) and then a 4 MiB one after it.
  char* first = a.allocate(3 * kMiB);
  char* second = a.allocate(4 * kMiB);
  EXPECT_EQ(first, big);
  EXPECT_EQ(second, big + 4 * kMiB);
  // A block larger than anything kept is new, apart from both.
  char* third = a.allocate(16 * kMiB);
  EXPECT_TRUE(third + 16 * kMiB <= first || third >= second + 4 * kMiB);
  // Each is usable to its end.
  first[3 * kMiB - 1] = 3;
  second[4 * kMiB - 1] = 4;
  third[16 * kMiB - 1] = 5;
  EXPECT_EQ(first[3 * kMiB - 1], 3);
  EXPECT_EQ(second[4 * kMiB - 1], 4);
  a.deallocate(first, 3 * kMiB);
  a.deallocate(second, 4 * kMiB);
  a.deallocate(third, 16 * kMiB);
}
#endif

// A fake sysfs root with one virtio device of the given id and features.
class FakeSysfs {
 public:
  FakeSysfs() : root_(std::filesystem::temp_directory_path() / ("gmb_sysfs_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(root_);
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }
  FakeSysfs& device(const std::string& name, const std::string& id, const std::string& features) {
    const auto dir = root_ / "bus/virtio/devices" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "device") << id << "\n";
    std::ofstream(dir / "features") << features << "\n";
    return *this;
  }
  std::string root() const { return root_.string(); }

 private:
  std::filesystem::path root_;
};

// The balloon of the build machine, as its sysfs shows it: stats, deflate on OOM, free page
// reporting (bit 5) and more.
constexpr const char* kReportingBalloon = "0110010100000000000000000000000010000000";
constexpr const char* kPlainBalloon = "0110000100000000000000000000000010000000";

TEST(HugePages, AreLeftOutOnlyWhereABalloonReportsFreePagesToTheHost) {
  FakeSysfs sysfs;
  EXPECT_TRUE(huge_pages::decide(nullptr, sysfs.root())) << "no virtio bus at all: bare metal";
  sysfs.device("virtio1", "0x0002", kReportingBalloon);  // a block device: bit 5 means something else
  EXPECT_TRUE(huge_pages::decide(nullptr, sysfs.root()));
  sysfs.device("virtio0", "0x0005", kPlainBalloon);
  EXPECT_TRUE(huge_pages::decide(nullptr, sysfs.root())) << "a balloon without free page reporting";
  sysfs.device("virtio4", "0x0005", kReportingBalloon);
  EXPECT_FALSE(huge_pages::decide(nullptr, sysfs.root()));
  EXPECT_FALSE(huge_pages::decide("auto", sysfs.root()));
  EXPECT_FALSE(huge_pages::decide("yes please", sysfs.root())) << "anything but on or off is auto";
}

TEST(HugePages, TheEnvironmentsOnOrOffOverridesTheMachine) {
  FakeSysfs sysfs;
  sysfs.device("virtio0", "0x0005", kReportingBalloon);
  EXPECT_TRUE(huge_pages::decide("on", sysfs.root()));
  EXPECT_FALSE(huge_pages::decide("off", std::string(sysfs.root()) + "/nothing-there"));
}

}  // namespace
}  // namespace gmb
