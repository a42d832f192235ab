#include <gtest/gtest.h>

#include "common/units.h"

using namespace gmb;

TEST(ParseSize, PlainBytesAndBinaryAndDecimalUnits) {
  EXPECT_EQ(parse_size("4096"), 4096u);
  EXPECT_EQ(parse_size("512B"), 512u);
  EXPECT_EQ(parse_size("100MiB"), 100u * MiB);
  EXPECT_EQ(parse_size("24GiB"), 24u * GiB);
  EXPECT_EQ(parse_size("1.5GiB"), 3u * GiB / 2);
  EXPECT_EQ(parse_size("1KiB"), 1024u);
  EXPECT_EQ(parse_size("1KB"), 1000u);
  EXPECT_EQ(parse_size("24GB"), 24000000000u);
  EXPECT_EQ(parse_size(" 2 MiB "), 2u * MiB);
}

TEST(ParseSize, RejectsNegativeFractionalBytesAndUnknownUnits) {
  EXPECT_FALSE(parse_size("-1MiB"));
  EXPECT_FALSE(parse_size("-1"));
  EXPECT_FALSE(parse_size("1.5"));      // not whole bytes
  EXPECT_FALSE(parse_size("10 parsecs"));
  EXPECT_FALSE(parse_size("MiB"));
  EXPECT_FALSE(parse_size(""));
  EXPECT_FALSE(parse_size("1.2.3GiB"));
  EXPECT_FALSE(parse_size("99999999999999999999999"));
}

TEST(FormatBytes, BinaryUnitsForHumans) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(250 * MiB), "250.0 MiB");
  EXPECT_EQ(format_bytes(3 * GiB / 2), "1.50 GiB");
}
