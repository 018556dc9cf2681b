// What normalize_policy_target makes of non-ASCII, malformed and odd targets.
// The expected spellings were recorded from the ICU build (NFC, '\' to '/',
// root-locale full lower case) so that any other Unicode library behind the
// normaliser must give exactly the same names.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "pulsebox/policy.h"

namespace pulsebox {
namespace {

struct Case {
  const char* what;
  std::string target;
  std::string expected;
};

std::string repeated(const std::string& piece, int count) {
  std::string out;
  for (int i = 0; i < count; ++i)
    out += piece;
  return out;
}

std::vector<Case> corpus() {
  return {
      {"ascii", "Src/Main.CC", "src/main.cc"},
      {"ascii drive and slashes", "C:\\Users\\Bob\\\\Notes.TXT\\", "users/bob/notes.txt"},
      {"unc backslashes", "\\\\Server\\Share\\File", "server/share/file"},
      {"empty", "", ""},
      {"only slashes", "\\/\\", ""},
      {"nfd e acute", "e\u0301", "\u00E9"},
      {"nfd upper e acute", "CAFE\u0301/Menu", "caf\u00E9/menu"},
      {"nfd stacked marks reordered", "a\u0323\u0302", "\u1EAD"},
      {"nfc already", "caf\u00e9", "caf\u00E9"},
      {"upper a ring", "\u00C5ngstr\u00F6m", "\u00E5ngstr\u00F6m"},
      {"angstrom sign", "\u212B", "\u00E5"},
      {"kelvin sign", "\u212A", "k"},
      {"hangul jamo lv", "\u1100\u1161", "\uAC00"},
      {"hangul jamo lvt", "\u1100\u1161\u11A8", "\uAC01"},
      {"hangul syllable plus t", "\uAC00\u11A8", "\uAC01"},
      {"dotted capital i", "\u0130stanbul", "i\u0307stanbul"},
      {"dotted capital i nfd", "I\u0307", "i\u0307"},
      {"dotless small i", "\u0131", "\u0131"},
      {"greek word", "\u039F\u0394\u039F\u03A3", "\u03BF\u03B4\u03BF\u03C2"},
      {"greek path", "\u039F\u0394\u039F\u03A3/\u039F\u0394\u039F\u03A3.txt",
       "\u03BF\u03B4\u03BF\u03C2/\u03BF\u03B4\u03BF\u03C3.txt"},
      {"sigma alone", "\u03A3", "\u03C3"},
      {"sigma mid word", "\u0391\u03A3\u0391", "\u03B1\u03C3\u03B1"},
      {"sigma then space", "\u0391\u03A3 \u0391\u03A3", "\u03B1\u03C2 \u03B1\u03C2"},
      {"sigma then mark", "\u0391\u03A3\u0301", "\u03B1\u03C2\u0301"},
      {"sigma after mark", "\u0391\u0301\u03A3", "\u03AC\u03C2"},
      {"sigma after period", "\u0391.\u03A3", "\u03B1.\u03C2"},
      {"sigma before period and letter", "\u0391\u03A3.\u0391", "\u03B1\u03C3.\u03B1"},
      {"sigma before apostrophe", "\u0391\u03A3'", "\u03B1\u03C2'"},
      {"sigma after colon", "\u0391:\u03A3", "\u03B1:\u03C2"},
      {"sigma after digit", "1\u03A3", "1\u03C3"},
      {"sigma after modifier letter", "\u02B0\u03A3", "\u02B0\u03C3"},
      {"sigma after ordinal indicator", "\u00AA\u03A3", "\u00AA\u03C2"},
      {"sigma after squared capital", "\U0001F130\u03A3", "\U0001F130\u03C2"},
      {"sigma after roman numeral", "\u2160\u03A3", "\u2170\u03C2"},
      {"sigma after cased without mapping", "\u0138\u03A3", "\u0138\u03C2"},
      {"sigma after soft hyphen", "\u0391\u00AD\u03A3", "\u03B1\u00AD\u03C2"},
      {"sigma before soft hyphen and letter", "\u0391\u03A3\u00AD\u0391",
       "\u03B1\u03C3\u00AD\u03B1"},
      {"sigma after malformed byte", "\u0391\xff\u03A3", "\u03B1\U0010FEFF\u03C3"},
      {"small final sigma kept", "\u03C2\u03A3", "\u03C2\u03C2"},
      {"greek tonos", "\u0386\u0388", "\u03AC\u03AD"},
      {"german sharp s", "Stra\u00DFe", "stra\u00DFe"},
      {"capital sharp s", "\u1E9E", "\u00DF"},
      {"strasse upper", "STRASSE", "strasse"},
      {"titlecase dz", "\u01C5", "\u01C6"},
      {"cherokee upper", "\u13A0\u13A1\u13F5", "\uAB70\uAB71\u13FD"},
      {"cherokee small", "\u13F8\uAB70", "\u13F8\uAB70"},
      {"deseret", "\U00010400\U00010427", "\U00010428\U0001044F"},
      {"osage", "\U000104B0", "\U000104D8"},
      {"adlam", "\U0001E900", "\U0001E922"},
      {"fullwidth", "\uFF21\uFF22\uFF23/\uFF3C", "\uFF41\uFF42\uFF43/\uFF3C"},
      {"circled letters", "\u24B6\u24D0", "\u24D0\u24D0"},
      {"roman numeral", "\u216B", "\u217B"},
      {"georgian mtavruli", "\u1C90", "\u10D0"},
      {"cyrillic", "\u0416\u0401", "\u0436\u0451"},
      {"armenian ligature", "\u0587\u0535", "\u0587\u0565"},
      {"ohm sign", "\u2126", "\u03C9"},
      {"cjk compatibility", "\uF900", "\u8C48"},
      {"composition exclusion", "\u0958", "\u0915\u093C"},
      {"private use of malformed bytes", "\U0010FEFF", "\U0010FEFF"},
      {"zero width joiner", "A\u200DB", "a\u200Db"},
      {"malformed lone byte", "a\xff", "a\U0010FEFF"},
      {"malformed two bytes", "key\xfe\xff.PEM", "key\U0010FEFE\U0010FEFF.pem"},
      {"malformed truncated", "\xc3", "\U0010FEC3"},
      {"malformed truncated then ascii",
       "\xe2\x82"
       "A",
       "\U0010FEE2\U0010FE82a"},
      {"malformed surrogate", "\xed\xa0\x80", "\U0010FEED\U0010FEA0\U0010FE80"},
      {"malformed overlong slash",
       "\xc0\xaf"
       "x",
       "\U0010FEC0\U0010FEAFx"},
      {"malformed beyond unicode", "\xf4\x90\x80\x80", "\U0010FEF4\U0010FE90\U0010FE80\U0010FE80"},
      {"malformed continuation", "\x80\xbf", "\U0010FE80\U0010FEBF"},
      {"malformed and upper",
       "A\xff"
       "B\\C",
       "a\U0010FEFFb/c"},
      {"replacement character kept", "a\xef\xbf\xbd", "a\uFFFD"},
      {"long", repeated("AE\u0301\u03A3/", 5000),
       repeated("a\u00E9\u03C2/", 4999) + "a\u00E9\u03C2"},
      {"long mixed", repeated("\u0130\u1100\u1161\xff\\", 3000),
       repeated("i\u0307\uAC00\U0010FEFF/", 2999) + "i\u0307\uAC00\U0010FEFF"},
  };
}

// Code points as C++ escapes, to paste a recorded output into the table.
std::string as_literal(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size();) {
    const auto byte = static_cast<unsigned char>(text[i]);
    if (byte < 0x80) {
      if (text[i] == '"' || text[i] == '\\') out += '\\';
      out += text[i++];
      continue;
    }
    const int length = byte >= 0xF0 ? 4 : byte >= 0xE0 ? 3 : 2;
    char32_t cp = byte & (0xFF >> (length + 1));
    for (int k = 1; k < length; ++k)
      cp = cp << 6 | (static_cast<unsigned char>(text[i + k]) & 0x3F);
    i += length;
    char buffer[16];
    std::snprintf(buffer, sizeof buffer, cp > 0xFFFF ? "\\U%08X" : "\\u%04X",
                  static_cast<unsigned>(cp));
    out += buffer;
  }
  return out;
}

TEST(PolicyNormaliseTest, CorpusMatchesTheRecordedSpellings) {
  const bool record = std::getenv("PULSEBOX_RECORD_NORMALISE") != nullptr;
  for (const Case& c : corpus()) {
    const auto normalized = normalize_policy_target(c.target);
    ASSERT_TRUE(normalized.has_value()) << c.what;
    if (record) std::printf("%s: \"%s\"\n", c.what, as_literal(*normalized).c_str());
    EXPECT_EQ(*normalized, c.expected) << c.what << ": got \"" << as_literal(*normalized) << '"';
  }
}

// ASCII targets take a path of their own (no Unicode library): the same
// text with a non-ASCII name after it takes the library's path, and both
// must spell the ASCII part alike, for every ASCII byte.
TEST(PolicyNormaliseTest, AsciiTargetsNormaliseAsTheUnicodePathWould) {
  std::vector<std::string> targets = {"Src/Main.CC", "C:\\Users\\X", "//a//B//",
                                      "\\",          "Z:",           "..\\A"};
  for (int byte = 1; byte < 0x80; ++byte)
    targets.push_back("A" + std::string(1, static_cast<char>(byte)) + "Z");
  for (const std::string& target : targets) {
    const auto ascii = normalize_policy_target(target);
    const auto unicode = normalize_policy_target(target + "/\u00C9");
    ASSERT_TRUE(ascii.has_value() && unicode.has_value()) << as_literal(target);
    EXPECT_EQ(*unicode, (ascii->empty() ? "" : *ascii + "/") + "\u00E9") << as_literal(target);
  }
}

}  // namespace
}  // namespace pulsebox
