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

// A fake sysfs root: virtio devices of the given id and features, and the transparent huge
// pages' mode.
class FakeSysfs {
 public:
  FakeSysfs()
      : root_(std::filesystem::temp_directory_path() /
              ("gmb_sysfs_" + std::to_string(::getpid()) + "_" + std::to_string(count_++))) {
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  ~FakeSysfs() { std::filesystem::remove_all(root_); }
  FakeSysfs& device(const std::string& name, const std::string& id, const char* features) {
    const auto dir = root_ / "bus/virtio/devices" / name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir / "device") << id << "\n";
    if (features) std::ofstream(dir / "features") << features << "\n";
    return *this;
  }
  FakeSysfs& transparent_huge_pages(const std::string& enabled) {
    std::filesystem::create_directories(root_ / "kernel/mm/transparent_hugepage");
    std::ofstream(root_ / "kernel/mm/transparent_hugepage/enabled") << enabled << "\n";
    return *this;
  }
  std::string root() const { return root_.string(); }

 private:
  static inline int count_ = 0;
  std::filesystem::path root_;
};

// The balloon of the build machine, as its sysfs shows it (128 bits, as Linux 6.x writes them,
// bit 0 first): stats, deflate on OOM, free page reporting (bit 5) and more.
const std::string kReportingBalloon = "01100101" + std::string(24, '0') + "1" + std::string(95, '0');
const std::string kPlainBalloon = "01100001" + std::string(24, '0') + "1" + std::string(95, '0');

bool advised(const char* setting, const FakeSysfs& sysfs) { return huge_pages::decide(setting, sysfs.root()).advise; }

TEST(HugePages, AreLeftOutOnlyWhereABalloonReportsFreePagesToTheHost) {
  FakeSysfs sysfs;
  sysfs.transparent_huge_pages("always [madvise] never");
  EXPECT_TRUE(advised(nullptr, sysfs)) << "no virtio bus at all: bare metal";
  EXPECT_EQ(huge_pages::decide(nullptr, sysfs.root()).why, "2 MiB pages (transparent huge pages, advised)");
  sysfs.device("virtio1", "0x0002", kReportingBalloon.c_str());  // a block device: bit 5 means something else
  EXPECT_TRUE(advised(nullptr, sysfs));
  sysfs.device("virtio0", "0x0005", kPlainBalloon.c_str());
  EXPECT_TRUE(advised(nullptr, sysfs)) << "a balloon without free page reporting";
  sysfs.device("virtio5", "0x0005", nullptr).device("virtio6", "0x0005", "0110");  // unreadable, too short
  EXPECT_TRUE(advised(nullptr, sysfs));
  sysfs.device("virtio4", "0x0005", kReportingBalloon.substr(0, 64).c_str());  // 64 bits, as older kernels write
  EXPECT_FALSE(advised(nullptr, sysfs));
  EXPECT_EQ(huge_pages::decide(nullptr, sysfs.root()).why,
            "4 KiB pages (this machine's balloon reports free pages to its host; GMB_HUGE_PAGES=on to change)");
  EXPECT_FALSE(advised("auto", sysfs));
  EXPECT_FALSE(advised("AUTO", sysfs));
}

TEST(HugePages, TheEnvironmentsOnOrOffOverridesTheMachineAndAnotherValueIsSaid) {
  FakeSysfs sysfs;
  sysfs.device("virtio0", "0x0005", kReportingBalloon.c_str());
  EXPECT_TRUE(advised("on", sysfs));
  EXPECT_TRUE(advised("On", sysfs));
  EXPECT_EQ(huge_pages::decide("on", sysfs.root()).why, "2 MiB pages (GMB_HUGE_PAGES=on)");
  FakeSysfs bare;
  EXPECT_FALSE(advised("off", bare));
  EXPECT_EQ(huge_pages::decide("off", bare.root()).why, "4 KiB pages (GMB_HUGE_PAGES=off)");
  const huge_pages::Choice odd = huge_pages::decide("yes\x1b[2J", sysfs.root());
  EXPECT_FALSE(odd.advise) << "a value not understood is auto";
  EXPECT_EQ(odd.why,
            "4 KiB pages (this machine's balloon reports free pages to its host; GMB_HUGE_PAGES=on to change; "
            "GMB_HUGE_PAGES='yes\\x1b[2J' not understood (on, off, auto): auto)");
}

TEST(HugePages, AMachineWithoutTransparentHugePagesIsSaidToHaveNone) {
  FakeSysfs sysfs;
  sysfs.transparent_huge_pages("always madvise [never]");
  EXPECT_EQ(huge_pages::decide(nullptr, sysfs.root()).why,
            "4 KiB pages (transparent huge pages are off on this machine)");
}

}  // namespace
}  // namespace gmb
