#include "core/text.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

namespace pulsebox::core {

namespace {

// The well-formed UTF-8 sequence at bytes[at]: its length and code point,
// or length 0 (an overlong form, a surrogate, past U+10FFFF, cut short).
std::size_t utf8_sequence(std::string_view bytes, std::size_t at, char32_t& cp) {
  const auto lead = static_cast<unsigned char>(bytes[at]);
  std::size_t extra = 0;
  if (lead < 0x80) {
    cp = lead;
  } else if ((lead & 0xE0) == 0xC0) {
    cp = lead & 0x1F;
    extra = 1;
  } else if ((lead & 0xF0) == 0xE0) {
    cp = lead & 0x0F;
    extra = 2;
  } else if ((lead & 0xF8) == 0xF0) {
    cp = lead & 0x07;
    extra = 3;
  } else {
    return 0;
  }
  if (at + extra >= bytes.size() && extra > 0) return 0;
  for (std::size_t k = 1; k <= extra; ++k) {
    const auto cont = static_cast<unsigned char>(bytes[at + k]);
    if ((cont & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (cont & 0x3F);
  }
  static constexpr char32_t kMinForLength[] = {0, 0x80, 0x800, 0x10000};
  if (cp < kMinForLength[extra] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return 0;
  return extra + 1;
}

// Characters that change what a terminal shows without being seen: C1
// controls (U+009B is CSI on many terminals), the bidirectional controls
// that reorder a line (Trojan Source), zero-width and other invisible
// format characters, line and paragraph separators, Unicode tags.
bool is_invisible_or_control(char32_t cp) {
  return cp < 0x20 || (cp >= 0x7F && cp <= 0x9F) || cp == 0xAD || cp == 0x61C || cp == 0x115F ||
         cp == 0x1160 || cp == 0x180E || (cp >= 0x200B && cp <= 0x200F) ||
         (cp >= 0x2028 && cp <= 0x202E) || (cp >= 0x2060 && cp <= 0x206F) || cp == 0x3164 ||
         cp == 0xFEFF || cp == 0xFFA0 || (cp >= 0xFFF9 && cp <= 0xFFFB) ||
         (cp >= 0xE0000 && cp <= 0xE007F);
}

void append_octal(std::string& out, unsigned char byte) {
  out += '\\';
  out += static_cast<char>('0' + (byte >> 6));
  out += static_cast<char>('0' + ((byte >> 3) & 7));
  out += static_cast<char>('0' + (byte & 7));
}

enum class Escape { Name, Text, TextKeepingNewlines };

// Appends `text` with git's C escapes for what `style` must not show raw;
// returns whether anything was escaped.
bool append_escaped(std::string& out, std::string_view text, Escape style) {
  static constexpr char kShort[] = "abtnvfr";  // \a (7) to \r (13)
  bool escaped = false;
  std::size_t at = 0;
  while (at < text.size()) {
    const char c = text[at];
    if (style == Escape::Name && (c == '"' || c == '\\')) {
      out += '\\';
      out += c;
      escaped = true;
      ++at;
      continue;
    }
    const bool kept =
        (c == '\t' && style != Escape::Name) || (c == '\n' && style == Escape::TextKeepingNewlines);
    char32_t cp = 0;
    const std::size_t length = utf8_sequence(text, at, cp);
    if (kept || (length > 0 && !is_invisible_or_control(cp))) {
      const std::size_t take = kept ? 1 : length;
      out.append(text.substr(at, take));
      at += take;
      continue;
    }
    escaped = true;
    if (length == 1 && c >= 7 && c <= 13) {
      out += '\\';
      out += kShort[c - 7];
    } else {
      // Every byte of the character, or the one byte that is not UTF-8.
      for (std::size_t k = 0; k < std::max<std::size_t>(length, 1); ++k)
        append_octal(out, static_cast<unsigned char>(text[at + k]));
    }
    at += std::max<std::size_t>(length, 1);
  }
  return escaped;
}

}  // namespace

std::optional<std::u32string> decode_utf8(std::string_view bytes) {
  std::u32string out;
  out.reserve(bytes.size());
  std::size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp = 0;
    const std::size_t length = utf8_sequence(bytes, i, cp);
    if (length == 0) return std::nullopt;
    out.push_back(cp);
    i += length;
  }
  return out;
}

bool is_valid_utf8(std::string_view bytes) {
  return decode_utf8(bytes).has_value();
}

std::string encode_utf8(std::u32string_view code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t cp : code_points) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  return out;
}

std::string strip_control_characters(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if ((byte < 0x20 && c != '\t') || byte == 0x7F) continue;
    out.push_back(c);
  }
  return out;
}

std::string ascii_lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool is_at_or_beneath(std::string_view path, std::string_view base) {
  if (path.size() == base.size()) return path == base;
  return path.size() > base.size() && path.starts_with(base) && path[base.size()] == '/';
}

std::string octal_mode(unsigned mode) {
  std::string out;
  for (int shift = 9; shift >= 0; shift -= 3) {
    const unsigned digit = (mode >> shift) & 07;
    if (shift == 9 && digit == 0) continue;
    out += static_cast<char>('0' + digit);
  }
  return out;
}

TextPosition position_of_offset(std::string_view text, std::size_t offset) {
  TextPosition pos;
  for (std::size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++pos.line;
      pos.column = 1;
    } else {
      ++pos.column;
    }
  }
  return pos;
}

std::string describe_errno(int error_number) {
  const char* name = ::strerrorname_np(error_number);
  return std::string(name != nullptr ? name : "errno " + std::to_string(error_number)) + " (" +
         std::strerror(error_number) + ")";
}

std::string random_hex(std::size_t digits) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string bytes((digits + 1) / 2, '\0');
  std::size_t filled = 0;
  while (filled < bytes.size()) {
    const ssize_t got = ::getrandom(bytes.data() + filled, bytes.size() - filled, 0);
    if (got > 0) {
      filled += static_cast<std::size_t>(got);
    } else if (got < 0 && errno != EINTR) {
      // Kernels before 3.17: the C++ library's source instead.
      std::random_device entropy;
      for (; filled < bytes.size(); ++filled)
        bytes[filled] = static_cast<char>(entropy());
    }
  }
  std::string out;
  out.reserve(digits);
  for (std::size_t i = 0; i < digits; ++i) {
    const auto byte = static_cast<unsigned char>(bytes[i / 2]);
    out.push_back(kHex[i % 2 == 0 ? byte >> 4 : byte & 0x0f]);
  }
  return out;
}

std::string quote_name(std::string_view name) {
  std::string quoted = "\"";
  if (!append_escaped(quoted, name, Escape::Name)) return std::string(name);
  return quoted + "\"";
}

std::string escape_for_terminal(std::string_view text, bool keep_newlines) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text, keep_newlines ? Escape::TextKeepingNewlines : Escape::Text);
  return out;
}

}  // namespace pulsebox::core
