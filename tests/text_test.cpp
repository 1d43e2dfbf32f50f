// Text from outside made safe where it enters (common/text.h): what /metrics, JSON, the DB and
// a terminal get from a job id or a mount point with bytes that are not UTF-8 or control
// characters in it.
#include "common/text.h"

#include <gtest/gtest.h>

namespace stallwatch::common {
namespace {

TEST(OutsideText, ValidUtf8IsKeptAsItIs) {
  const uint64_t before = outsideTextsChanged();
  EXPECT_EQ(boundedUtf8("slurm:4711"), "slurm:4711");
  EXPECT_EQ(boundedUtf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80");
  EXPECT_EQ(outsideTextsChanged(), before);
}

TEST(OutsideText, InvalidBytesAreReplacedAndCounted) {
  const uint64_t before = outsideTextsChanged();
  EXPECT_EQ(boundedUtf8("bad\xFF"), "bad\xEF\xBF\xBD");
  // Overlong forms, surrogates, past U+10FFFF, a cut sequence: each invalid byte replaced.
  EXPECT_EQ(boundedUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(boundedUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(boundedUtf8("\xF4\x90\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(boundedUtf8("x\xE2\x82"), "x\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(isUtf8(boundedUtf8(std::string("\x80\xBF\xFE\xFF", 4))));
  EXPECT_EQ(outsideTextsChanged(), before + 6);
}

TEST(OutsideText, LongTextIsCutOnACharacterBoundary) {
  const std::string id(131 * 1024, 'x');
  const std::string cut = boundedUtf8(id, 128);
  EXPECT_EQ(cut.size(), 128u);
  EXPECT_EQ(cut.substr(125), "...");
  // A two-byte character across the cut is not split.
  std::string euros;
  for (int i = 0; i < 100; ++i) euros += "\xE2\x82\xAC";
  const std::string e = boundedUtf8(euros, 20);
  EXPECT_TRUE(isUtf8(e));
  EXPECT_LE(e.size(), 20u);
  EXPECT_EQ(e, "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC...");
}

TEST(OutsideText, ControlCharactersAreMadeVisibleForATerminal) {
  EXPECT_EQ(printable("/mnt/a\nb"), "/mnt/a\\nb");
  EXPECT_EQ(printable("\x1B[31mred\x1B[0m"), "\\x1b[31mred\\x1b[0m");
  EXPECT_EQ(printable("tab\there\r\x7F"), "tab\\there\\r\\x7f");
  EXPECT_EQ(printable("a\\b"), "a\\\\b");  // unambiguous: a backslash doubled
  EXPECT_EQ(printable("c1 \xC2\x9B"
                      "31m"),
            "c1 \\x9b31m");  // CSI as a C1 control
  EXPECT_EQ(printable("bad\xFF"), "bad\xEF\xBF\xBD");
  EXPECT_EQ(printable("caf\xC3\xA9"), "caf\xC3\xA9");
}

TEST(OutsideText, AWholeOutputKeepsItsOwnLines) {
  EXPECT_EQ(printableLines("job 1\n\tread a\\b\n\x1B]0;title\x07"),
            "job 1\n\tread a\\b\n\\x1b]0;title\\x07");
}

}  // namespace
}  // namespace stallwatch::common
