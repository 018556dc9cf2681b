#include "core/unicode_case.h"

#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <memory>

#include "core/text.h"

namespace pulsebox::core {
namespace {

constexpr char32_t kCapitalDottedI = 0x0130;
constexpr char32_t kCombiningDotAbove = 0x0307;
constexpr char32_t kCapitalSigma = 0x03A3;
constexpr char32_t kFinalSigma = 0x03C2;

// Word_Break MidLetter, MidNumLet and Single_Quote: the case-ignorable
// characters that utf8proc's general category does not tell apart.
constexpr std::array<char32_t, 17> kIgnorablePunctuation = {
    0x0027, 0x002E, 0x003A, 0x00B7, 0x0387, 0x055F, 0x05F4, 0x2018, 0x2019,
    0x2024, 0x2027, 0xFE13, 0xFE52, 0xFE55, 0xFF07, 0xFF0E, 0xFF1A};

// Case_Ignorable (Unicode 3.13): Mn, Me, Cf, Lm, Sk and that punctuation.
bool case_ignorable(char32_t c) {
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(c))) {
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_SK:
      return true;
    default:
      return std::find(kIgnorablePunctuation.begin(), kIgnorablePunctuation.end(), c) !=
             kIgnorablePunctuation.end();
  }
}

// Cased (Lowercase, Uppercase or Lt). Letters of those categories and any
// character with a case mapping are; the few Other_Lowercase and
// Other_Uppercase characters that have neither are listed.
bool cased(char32_t c) {
  const auto code = static_cast<utf8proc_int32_t>(c);
  switch (utf8proc_category(code)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
      return true;
    default:
      break;
  }
  if (utf8proc_tolower(code) != code || utf8proc_toupper(code) != code) return true;
  return c == 0x00AA || c == 0x00BA || (c >= 0x1F130 && c <= 0x1F149) ||
         (c >= 0x1F150 && c <= 0x1F169) || (c >= 0x1F170 && c <= 0x1F189);
}

// Whether the nearest character before (step -1) or after (step +1)
// position `at`, case-ignorable ones skipped, is cased. Case-ignorable
// wins for characters that are both (modifier letters), as in ICU.
bool cased_letter_beside(const std::u32string& text, std::size_t at, int step) {
  for (std::ptrdiff_t i = static_cast<std::ptrdiff_t>(at) + step;
       i >= 0 && i < static_cast<std::ptrdiff_t>(text.size()); i += step) {
    const char32_t c = text[static_cast<std::size_t>(i)];
    if (case_ignorable(c)) continue;
    return cased(c);
  }
  return false;
}

}  // namespace

std::optional<std::string> nfc(std::string_view utf8) {
  utf8proc_uint8_t* composed = nullptr;
  const utf8proc_ssize_t length =
      utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(utf8.data()),
                   static_cast<utf8proc_ssize_t>(utf8.size()), &composed,
                   static_cast<utf8proc_option_t>(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(composed, &std::free);
  if (length < 0) return std::nullopt;
  return std::string(reinterpret_cast<const char*>(composed), static_cast<std::size_t>(length));
}

std::optional<std::string> full_lower(std::string_view utf8) {
  const auto text = decode_utf8(utf8);
  if (!text) return std::nullopt;
  std::u32string lowered;
  lowered.reserve(text->size());
  for (std::size_t i = 0; i < text->size(); ++i) {
    const char32_t c = (*text)[i];
    if (c == kCapitalDottedI) {
      lowered += U'i';
      lowered += kCombiningDotAbove;
    } else if (c == kCapitalSigma && cased_letter_beside(*text, i, -1) &&
               !cased_letter_beside(*text, i, +1)) {
      lowered += kFinalSigma;
    } else {
      lowered += static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c)));
    }
  }
  return encode_utf8(lowered);
}

}  // namespace pulsebox::core
