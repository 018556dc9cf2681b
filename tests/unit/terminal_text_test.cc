// Showing names and text that a sandbox chose to a person: core::quote_name
// (git's quoting of names), core::escape_for_terminal (free text), and the
// diff's headers and terminal form built on them; and core::write_decimal,
// the numbers the child after clone() and the pre-libc client write.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <string>
#include <utility>
#include <vector>

#include "core/decimal_text.h"
#include "core/text.h"
#include "workspace/diff.h"

namespace pulsebox {
namespace {

using core::escape_for_terminal;
using core::quote_name;

TEST(QuoteName, NamesThatNeedNothingAreShownAsTheyAre) {
  for (const std::string name : {"src/main.cc", "with space.txt", "naïve/日本語.md", "a-b_c.d",
                                 "emoji \xf0\x9f\x98\x80.txt", ""}) {
    EXPECT_EQ(quote_name(name), name);
  }
}

TEST(QuoteName, ControlCharactersUseGitsCEscapesInQuotes) {
  EXPECT_EQ(quote_name("esc\x1b[2K\x1b[1Ahidden"), "\"esc\\033[2K\\033[1Ahidden\"");
  EXPECT_EQ(quote_name("new\nline"), "\"new\\nline\"");
  EXPECT_EQ(quote_name("cr\rret"), "\"cr\\rret\"");
  EXPECT_EQ(quote_name("tab\there"), "\"tab\\there\"");
  EXPECT_EQ(quote_name(std::string("\a\b\v\f", 4)), "\"\\a\\b\\v\\f\"");
  EXPECT_EQ(quote_name(std::string("nul\0x", 5)), "\"nul\\000x\"");
  EXPECT_EQ(quote_name("del\x7f"), "\"del\\177\"");
  EXPECT_EQ(quote_name("bell\x07"), "\"bell\\a\"");
}

TEST(QuoteName, QuotesAndBackslashesAreEscapedSoTheQuotedFormIsUnambiguous) {
  EXPECT_EQ(quote_name("say \"hi\""), "\"say \\\"hi\\\"\"");
  EXPECT_EQ(quote_name("back\\slash"), "\"back\\\\slash\"");
}

TEST(QuoteName, BytesThatAreNotUtf8AreOctal) {
  EXPECT_EQ(quote_name("bad\xff\xfe.txt"), "\"bad\\377\\376.txt\"");
  EXPECT_EQ(quote_name("cut\xe2\x80"), "\"cut\\342\\200\"");            // a sequence cut short
  EXPECT_EQ(quote_name("overlong\xc0\xaf"), "\"overlong\\300\\257\"");  // '/' in two bytes
  EXPECT_EQ(quote_name("surrogate\xed\xa0\x80"), "\"surrogate\\355\\240\\200\"");
}

TEST(QuoteName, InvisibleCharactersThatReorderOrHideTextAreEscaped) {
  // C1 CSI (an escape sequence on 8-bit terminals), RLO (Trojan Source),
  // the isolates, zero-width space and joiner, BOM, line separator, a tag.
  for (const auto& [name, shown] : std::vector<std::pair<std::string, std::string>>{
           {"csi\xc2\x9b"
            "2J",
            "\"csi\\302\\2332J\""},
           {"bidi\xe2\x80\xaetxt.exe", "\"bidi\\342\\200\\256txt.exe\""},
           {"iso\xe2\x81\xa6x\xe2\x81\xa9", "\"iso\\342\\201\\246x\\342\\201\\251\""},
           {"zw\xe2\x80\x8b", "\"zw\\342\\200\\213\""},
           {"zwj\xe2\x80\x8d", "\"zwj\\342\\200\\215\""},
           {"bom\xef\xbb\xbf", "\"bom\\357\\273\\277\""},
           {"ls\xe2\x80\xa8", "\"ls\\342\\200\\250\""},
           {"tag\xf3\xa0\x80\x81", "\"tag\\363\\240\\200\\201\""},
       }) {
    EXPECT_EQ(quote_name(name), shown);
  }
}

TEST(EscapeForTerminal, TextKeepsTabsBackslashesAndQuotes) {
  EXPECT_EQ(escape_for_terminal("a\tb \"c\" d\\e"), "a\tb \"c\" d\\e");
  EXPECT_EQ(escape_for_terminal("\x1b[2K\x1b[1Ahidden\r"), "\\033[2K\\033[1Ahidden\\r");
  EXPECT_EQ(escape_for_terminal("bad\xff"), "bad\\377");
  EXPECT_EQ(escape_for_terminal("rlo\xe2\x80\xae"), "rlo\\342\\200\\256");
  EXPECT_EQ(escape_for_terminal("two\nlines"), "two\\nlines");
  EXPECT_EQ(escape_for_terminal("two\nlines\x1b", /*keep_newlines=*/true), "two\nlines\\033");
  EXPECT_EQ(escape_for_terminal("日本語 ok"), "日本語 ok");
}

TEST(DiffHeaders, NamesAreQuotedOnlyWhenTheyNeedIt) {
  EXPECT_EQ(workspace::diff_header("src/a.c"), "diff --git a/src/a.c b/src/a.c");
  EXPECT_EQ(workspace::diff_header("new\nline"), "diff --git \"a/new\\nline\" \"b/new\\nline\"");

  workspace::DiffSide after;
  after.exists = true;
  after.mode = 0644;
  after.content = "x\n";
  const std::string diff = workspace::unified_file_diff("esc\x1b[2K", {}, after, false);
  EXPECT_EQ(diff,
            "diff --git \"a/esc\\033[2K\" \"b/esc\\033[2K\"\n"
            "new file mode 100644\n"
            "--- /dev/null\n"
            "+++ \"b/esc\\033[2K\"\n"
            "@@ -0,0 +1 @@\n"
            "+x\n");
  after.content = std::string("bin\0ary", 7);
  EXPECT_NE(workspace::unified_file_diff("esc\x1b[2K", {}, after, false)
                .find("Binary files /dev/null and \"b/esc\\033[2K\" differ\n"),
            std::string::npos);
}

TEST(DiffForTerminal, ContentIsEscapedAndOurOwnColoursKept) {
  workspace::DiffSide before;
  before.exists = true;
  before.mode = 0644;
  before.content = "keep \x1b[31m\n\x1b[2K\x1b[1Aold\n";
  workspace::DiffSide after = before;
  after.content = "keep \x1b[31m\nnew\x1b[0m\n";
  for (bool colour : {false, true}) {
    SCOPED_TRACE(colour ? "colour" : "plain");
    const std::string raw = workspace::unified_file_diff("f.txt", before, after, colour);
    const std::string shown = workspace::escape_diff_for_terminal(raw);
    const std::string red = colour ? "\x1b[31m" : "";
    const std::string green = colour ? "\x1b[32m" : "";
    const std::string reset = colour ? "\x1b[0m" : "";
    EXPECT_NE(shown.find("\n keep \\033[31m\n"), std::string::npos) << shown;
    EXPECT_NE(shown.find("\n" + red + "-\\033[2K\\033[1Aold" + reset + "\n"), std::string::npos)
        << shown;
    EXPECT_NE(shown.find("\n" + green + "+new\\033[0m" + reset + "\n"), std::string::npos) << shown;
    // Without the content's escapes, the two forms have the same lines.
    EXPECT_EQ(std::count(shown.begin(), shown.end(), '\n'),
              std::count(raw.begin(), raw.end(), '\n'));
  }
}

TEST(WriteDecimal, WritesWhatToStringWritesForEveryEdge) {
  char text[core::kMaxDecimalChars];
  for (const unsigned long long value :
       {0ULL, 7ULL, 9ULL, 10ULL, 65534ULL, 4294967295ULL, 4294967296ULL, ULLONG_MAX}) {
    EXPECT_EQ(std::string(text, core::write_decimal(value, text)), std::to_string(value));
  }
  for (const long long value : {0LL, -1LL, 1LL, -10LL, -999LL, -1000LL, LLONG_MAX, LLONG_MIN}) {
    EXPECT_EQ(std::string(text, core::write_signed_decimal(value, text)), std::to_string(value));
  }
}

TEST(OctalMode, ThreeDigitsOrFourWithSpecialBits) {
  EXPECT_EQ(core::octal_mode(0755), "755");
  EXPECT_EQ(core::octal_mode(0), "000");
  EXPECT_EQ(core::octal_mode(0640), "640");
  EXPECT_EQ(core::octal_mode(04755), "4755");
  EXPECT_EQ(core::octal_mode(07777), "7777");
  EXPECT_EQ(core::octal_mode(01777), "1777");
}

TEST(IsAtOrBeneath, ComparesWholeNamesOnly) {
  EXPECT_TRUE(core::is_at_or_beneath("a", "a"));
  EXPECT_TRUE(core::is_at_or_beneath("a/b", "a"));
  EXPECT_TRUE(core::is_at_or_beneath("a/b/c", "a/b"));
  EXPECT_FALSE(core::is_at_or_beneath("ab", "a"));
  EXPECT_FALSE(core::is_at_or_beneath("a", "a/b"));
  EXPECT_FALSE(core::is_at_or_beneath("a/bc", "a/b"));
  EXPECT_FALSE(core::is_at_or_beneath("b/a", "a"));
  EXPECT_FALSE(core::is_at_or_beneath("a", ""));
}

}  // namespace
}  // namespace pulsebox
