// The ISA-L reader on its own (where ISA-L is installed): it inflates every layout of gzip
// members without trouble (a trouble would only send the file to zlib, slower, and no test of
// the content would see it), and finds trouble in every kind of damage.
#include <gtest/gtest.h>

#if GMB_HAVE_ISAL && GMB_HAVE_ZLIB
#include <zlib.h>

#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

#include "gzip_text.h"
#include "test_helpers.h"
#include "workloads/isal_inflate.h"

namespace gmb {
namespace {

using testing::gzip_of;

// The content, or "trouble after N bytes".
std::string inflate(const std::string& path, std::size_t room) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  EXPECT_NE(f, nullptr);
  std::string got, block(room, '\0');
  {
    IsalInflate in(f, "");
    for (std::size_t n = 1; n > 0;) {
      if (!in.produce(block.data(), block.size(), n)) {
        got = fmt::format("trouble after {} bytes", got.size());
        break;
      }
      got.append(block.data(), n);
    }
  }
  std::fclose(f);
  return got;
}

TEST(IsalInflate, InflatesEveryLayoutOfMembersWithoutTroubleAndFindsEveryDamage) {
  const auto dir = testing::temp_dir("isal");
  const std::string path = (dir / "t.gz").string();
  std::string text;
  for (int i = 0; text.size() < (std::size_t(2) << 20); ++i) text += fmt::format("alloc,{},{},{}\n", i, 512 * (i % 61), i % 2);
  const std::string a = gzip_of(text.substr(0, 100)), b = gzip_of(text.substr(100, 1'000'000)), c = gzip_of(text.substr(1'000'100)),
                    empty = gzip_of("");
  const std::map<std::string, std::string> layouts = {
      {"one member", gzip_of(text)},           {"three members", a + b + c},
      {"empty members", empty + a + empty + b + c + empty}, {"stored blocks", gzip_of(text, 0)},
      {"best compression", gzip_of(text, 9)},
  };
  for (const auto& [name, gz] : layouts)
    for (std::size_t room : {std::size_t(1), std::size_t(4093), std::size_t(1) << 18}) {
      if (room == 1 && gz.size() > 200'000 && name != "three members") continue;  // (byte by byte: one layout is enough)
      testing::write_text(path, gz);
      EXPECT_EQ(inflate(path, room), text) << name << ", room " << room;
    }
  const std::string whole = a + b + c;
  std::map<std::string, std::string> damaged = {
      {"cut", whole.substr(0, whole.size() - 1000)},
      {"cut in a trailer", whole.substr(0, whole.size() - 3)},
      {"junk after", whole + "junk"},
  };
  for (std::size_t field : {std::size_t(8), std::size_t(4)}) {  // the last member's CRC, then its length
    std::string d = whole;
    d[d.size() - field] ^= 1;
    damaged[fmt::format("trailer byte -{}", field)] = d;
  }
  std::string header = whole;
  header[a.size() + 2] = 9;  // the second member's method: not deflate
  damaged["a header"] = header;
  for (const auto& [name, gz] : damaged) {
    testing::write_text(path, gz);
    EXPECT_EQ(inflate(path, std::size_t(1) << 18).rfind("trouble after ", 0), 0u) << name;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gmb
#endif
