// What a user sees of the build's variant: a GPU run where none can run is a usage error that
// says why (no GPU visible, or a sim-only build without the CUDA path), exit 2, nothing run.
#include <gtest/gtest.h>

#include "devices/cuda_path.h"
#include "devices/device.h"
#include "test_helpers.h"

namespace gmb {
namespace {

using testing::run_gpumembench;
using testing::source_path;

TEST(BuildVariant, DeviceCudaWithoutACudaPathOrGpuIsAUsageError) {
  if (cuda_device_available()) GTEST_SKIP() << "a GPU is visible: --device cuda runs";
  const auto dir = testing::temp_dir("device_cuda");
  auto r = run_gpumembench("--config " + source_path("configs/hole_pattern.yaml") + " --device cuda --output " +
                           (dir / "out").string());
  EXPECT_EQ(r.status, 2) << r.out;
  if (cuda_path_built_in()) {
    EXPECT_NE(r.out.find("--device cuda: no CUDA GPU is visible"), std::string::npos) << r.out;
  } else {
    EXPECT_NE(r.out.find("--device cuda: this gpumembench is a sim-only build without the CUDA path"),
              std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("use --device sim"), std::string::npos) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "out")) << "nothing is written";
  auto f = run_gpumembench("frontier --config " + source_path("configs/hole_pattern.yaml") + " --device cuda");
  EXPECT_EQ(f.status, 2) << f.out;
  EXPECT_NE(f.out.find(cuda_path_built_in() ? "no CUDA GPU is visible" : "sim-only build"), std::string::npos)
      << f.out;
}

}  // namespace
}  // namespace gmb
