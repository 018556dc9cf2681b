// Unicode text the way policy targets compare it: Python's
// unicodedata.normalize("NFC", s).lower(), which is also ICU's root-locale
// toLower (the reference and the earlier ICU build agree on it).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pulsebox::core {

// `utf8` in NFC (canonical composition), or nullopt if it is not
// well-formed UTF-8.
std::optional<std::string> nfc(std::string_view utf8);

// The full lower case of well-formed UTF-8 in the root locale: each code
// point's simple lower case, except U+0130 (becomes "i\u0307") and capital
// sigma at the end of a word (becomes final sigma, U+03C2). Nullopt if
// `utf8` is not well-formed.
std::optional<std::string> full_lower(std::string_view utf8);

}  // namespace pulsebox::core
