// Text from users' files quoted back (common/text_excerpt.h): readable UTF-8 stays, anything a
// terminal would act on, or that is no UTF-8, comes out as \xNN.
#include <gtest/gtest.h>

#include "common/text_excerpt.h"

namespace gmb {
namespace {

TEST(PrintableText, KeepsReadableUtf8AndEscapesWhatATerminalActsOn) {
  EXPECT_EQ(printable_text("train.py"), "train.py");
  EXPECT_EQ(printable_text("modèle_训练.py"), "modèle_训练.py");  // 2- and 3-byte sequences
  EXPECT_EQ(printable_text("a\x1b[31mred\x07"), "a\\x1b[31mred\\x07");            // C0 controls
  EXPECT_EQ(printable_text("128\xc2\x9b" "31m"), "128\\xc2\\x9b31m");            // U+009B, C1 CSI
  EXPECT_EQ(printable_text("abc\xe2\x80\xaeRLO"), "abc\\xe2\\x80\\xaeRLO");     // U+202E, bidi override
  EXPECT_EQ(printable_text("x\x7f"), "x\\x7f");
  EXPECT_EQ(printable_text("siz\xd6_mb"), "siz\\xd6_mb");                        // a lead byte alone
  EXPECT_EQ(printable_text("\xc0\xaf"), "\\xc0\\xaf");                           // overlong '/'
  EXPECT_EQ(printable_text("\xed\xa0\x80"), "\\xed\\xa0\\x80");                  // a surrogate
  EXPECT_EQ(printable_text("\xf0\x9f\x98\x80!"), "\xf0\x9f\x98\x80!");           // U+1F600 stays
  EXPECT_EQ(printable_text("\xf0\x9f\x98"), "\\xf0\\x9f\\x98");                  // cut short
}

TEST(PrintableText, AMessageKeepsItsLinesAndTabs) {
  EXPECT_EQ(printable_message("unknown allocator 'a\x1b[2Jb'\n\tvalid: caching"),
            "unknown allocator 'a\\x1b[2Jb'\n\tvalid: caching");
}

TEST(WellFormedUtf8, KeepsWellFormedTextAndPutsUFFFDForEachByteThatIsNot) {
  EXPECT_TRUE(is_well_formed_utf8("modèle_训练.py \xf0\x9f\x98\x80"));
  EXPECT_EQ(well_formed_utf8("modèle_训练.py"), "modèle_训练.py");
  EXPECT_EQ(well_formed_utf8("a\x1b[2J"), "a\x1b[2J");  // controls are UTF-8: a terminal's business
  const std::string r = "\xef\xbf\xbd";
  for (const std::string& bad : {std::string("tr\xffin.py"), std::string("\xc0\xaf"), std::string("\xed\xa0\x80"),
                                 std::string("\xf0\x9f\x98"), std::string("siz\xd6_mb")})
    EXPECT_FALSE(is_well_formed_utf8(bad)) << printable_text(bad);
  EXPECT_EQ(well_formed_utf8("tr\xffin.py"), "tr" + r + "in.py");
  EXPECT_EQ(well_formed_utf8("\xc0\xaf"), r + r);              // overlong '/': two bytes, two
  EXPECT_EQ(well_formed_utf8("\xed\xa0\x80"), r + r + r);      // a surrogate
  EXPECT_EQ(well_formed_utf8("\xf0\x9f\x98!"), r + r + r + "!");  // cut short
  EXPECT_TRUE(is_well_formed_utf8(well_formed_utf8("\xfe\xff\x80" "abc\xe2\x82")));
  // Surrogates kept where asked (Python's pickle passes them), nothing else.
  EXPECT_TRUE(is_well_formed_utf8("\xed\xa0\x80", /*allow_surrogates=*/true));
  EXPECT_EQ(well_formed_utf8("\xed\xa0\x80\xff", /*allow_surrogates=*/true), "\xed\xa0\x80" + r);
  EXPECT_FALSE(is_well_formed_utf8("\xc0\xaf", /*allow_surrogates=*/true));
}

}  // namespace
}  // namespace gmb
