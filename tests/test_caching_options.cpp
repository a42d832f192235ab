// PyTorch's allocator option string: what it accepts and how it refuses.
#include <gtest/gtest.h>

#include <string>

#include "allocators/caching/alloc_conf.h"
#include "allocators/caching/caching_allocator.h"
#include "devices/device.h"
#include "allocators/registry.h"

namespace gmb {
namespace {

using caching::parse_alloc_conf;

std::string error_of(const std::string& conf) {
  try {
    parse_alloc_conf(conf);
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "alloc_conf");
    EXPECT_NE(e.valid.find("max_split_size_mb"), std::string::npos);
    return e.what();
  }
  return "";
}

TEST(CachingOptions, Defaults) {
  auto c = parse_alloc_conf("");
  EXPECT_EQ(c.max_split_size, UINT64_MAX);
  EXPECT_EQ(c.max_non_split_rounding_size, 20 * MiB);
  EXPECT_FALSE(c.expandable_segments);
  EXPECT_EQ(c.garbage_collection_threshold, 0.0);
  for (auto d : c.roundup_power2_divisions) EXPECT_EQ(d, 0u);
}

TEST(CachingOptions, ParsesEveryAllocatorKey) {
  auto c = parse_alloc_conf(
      " expandable_segments:True, max_split_size_mb:128,max_non_split_rounding_mb:64,"
      "garbage_collection_threshold:0.6,roundup_power2_divisions:8");
  EXPECT_TRUE(c.expandable_segments);
  EXPECT_EQ(c.max_split_size, 128 * MiB);
  EXPECT_EQ(c.max_non_split_rounding_size, 64 * MiB);
  EXPECT_DOUBLE_EQ(c.garbage_collection_threshold, 0.6);
  for (auto d : c.roundup_power2_divisions) EXPECT_EQ(d, 8u);
  EXPECT_EQ(c.divisions_for(5 * MiB), 8u);
}

TEST(CachingOptions, RoundupListForm) {
  auto c = parse_alloc_conf("roundup_power2_divisions:[256:1,512:2,>:8]");
  // Interval i holds sizes [2^i MiB, 2^(i+1) MiB).
  for (int i = 0; i <= 8; ++i) EXPECT_EQ(c.roundup_power2_divisions[i], 1u) << i;
  EXPECT_EQ(c.roundup_power2_divisions[9], 2u);
  for (int i = 10; i < 16; ++i) EXPECT_EQ(c.roundup_power2_divisions[i], 8u) << i;
  EXPECT_EQ(c.divisions_for(300 * MiB), 1u);
  EXPECT_EQ(c.divisions_for(600 * MiB), 2u);
  EXPECT_EQ(c.divisions_for(100 * GiB), 8u);

  auto d = parse_alloc_conf("roundup_power2_divisions:[>:4]");  // '>' first: from interval 1 on
  EXPECT_EQ(d.roundup_power2_divisions[0], 0u);
  EXPECT_EQ(d.roundup_power2_divisions[1], 4u);
  auto e = parse_alloc_conf("roundup_power2_divisions:[64:8,256:0]");
  EXPECT_EQ(e.roundup_power2_divisions[0], 8u);
  EXPECT_EQ(e.roundup_power2_divisions[6], 8u);
  EXPECT_EQ(e.roundup_power2_divisions[7], 0u);
  EXPECT_EQ(e.roundup_power2_divisions[8], 0u);
}

TEST(CachingOptions, CudaKeysAreAccepted) {
  auto c = parse_alloc_conf(
      "backend:native,release_lock_on_cudamalloc:True,pinned_use_cuda_host_register:True,"
      "pinned_num_register_threads:8,per_process_memory_fraction:0.25,"
      "graph_capture_record_stream_reuse:False,pinned_use_background_threads:True");
  EXPECT_DOUBLE_EQ(c.per_process_memory_fraction, 0.25);
  EXPECT_EQ(c.pinned_num_register_threads, 8u);
}

TEST(CachingOptions, LargeSegmentSizeMovesTheMinimums) {
  auto c = parse_alloc_conf("large_segment_size_mb:64,max_split_size_mb:64");
  EXPECT_EQ(c.large_segment_size, 64 * MiB);
  EXPECT_EQ(c.max_non_split_rounding_size, 64 * MiB);
  EXPECT_NE(error_of("max_split_size_mb:32,large_segment_size_mb:64")
                .find("max_split_size_mb too small, must be >= 64"),
            std::string::npos);
  EXPECT_NE(error_of("large_segment_size_mb:10").find("large_segment_size_mb must be > 10 MB"),
            std::string::npos);
}

TEST(CachingOptions, RejectsWhatPyTorchRejects) {
  EXPECT_NE(error_of("foo:1").find("Unrecognized key 'foo' in Accelerator allocator config."),
            std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:19").find("max_split_size_mb too small, must be >= 20"),
            std::string::npos);
  EXPECT_NE(error_of("max_non_split_rounding_mb:1").find("too small, must be >= 20"),
            std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:1.0")
                .find("garbage_collect_threshold is invalid, set it in (0.0, 1.0)"),
            std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:0").find("(0.0, 1.0)"), std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:3").find("has to be power of 2"),
            std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[100:2]").find("intervals have to be power of 2"),
            std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[256:3]").find("power of 2 or 0"),
            std::string::npos);
  EXPECT_NE(error_of("roundup_power2_divisions:[256:2").find("Expected closing bracket"),
            std::string::npos);
  EXPECT_NE(error_of("expandable_segments:true").find("Expected 'True' or 'False'"),
            std::string::npos);
  EXPECT_NE(error_of("backend:cuda").find("Unknown allocator backend"), std::string::npos);
  EXPECT_NE(error_of("backend:cudaMallocAsync").find("cuda_mempool"), std::string::npos);
  EXPECT_NE(error_of("per_process_memory_fraction:1.5").find("[0.0, 1.0]"), std::string::npos);
  EXPECT_NE(error_of("pinned_num_register_threads:3").find("power of 2, got 3"),
            std::string::npos);
}

TEST(CachingOptions, RejectsMalformedStrings) {
  EXPECT_NE(error_of("max_split_size_mb=128").find("Unrecognized key 'max_split_size_mb=128'"),
            std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:").find("missing"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:128abc").find("invalid value '128abc'"),
            std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb:-128").find("invalid value"), std::string::npos);
  EXPECT_NE(error_of("max_split_size_mb,128").find("expected ':'"), std::string::npos);
  EXPECT_NE(error_of("expandable_segments:True:False").find("expected ','"), std::string::npos);
  EXPECT_NE(error_of(",expandable_segments:True").find("unexpected ','"), std::string::npos);
  EXPECT_NE(error_of("garbage_collection_threshold:abc").find("expected a number"),
            std::string::npos);
}

TEST(CachingOptions, FactoryChecksKeysAndLimit) {
  auto device = make_sim_device({});
  EXPECT_THROW(make_caching_allocator(*device, {{"alloc_conf", "bogus:1"}}), OptionError);
  EXPECT_THROW(make_caching_allocator(*device, {{"max_split_size_mb", "128"}}), OptionError);
  EXPECT_THROW(make_caching_allocator(*device, {{"memory_limit_bytes", "lots"}}), OptionError);
  try {
    make_caching_allocator(*device, {{"alloc_conf", "expandable_segments:yes"}});
    FAIL();
  } catch (const OptionError& e) {
    EXPECT_EQ(e.key, "alloc_conf");
  }
  auto ok = make_allocator("caching", *device,
                           {{"alloc_conf", "expandable_segments:True"}, {"memory_limit_bytes", "1GiB"}});
  ASSERT_TRUE(ok);
  EXPECT_TRUE(ok->allocate(10, 0).has_value());
}

}  // namespace
}  // namespace gmb
