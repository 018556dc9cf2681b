// Small text helpers shared by the policy, audit and CLI code.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace pulsebox::core {

// True if `bytes` is well-formed UTF-8 (no overlongs, no surrogates).
bool is_valid_utf8(std::string_view bytes);

// Decodes well-formed UTF-8 into code points; nullopt if malformed.
std::optional<std::u32string> decode_utf8(std::string_view bytes);
std::string encode_utf8(std::u32string_view code_points);

// Removes C0 control characters except tab, and DEL (log-injection guard).
std::string strip_control_characters(std::string_view text);

// A name (a path: bytes, not always UTF-8) as a person should see it, in a
// terminal or a pipe: unchanged when nothing in it can act on a terminal or
// hide what it is, else in double quotes with git's C escapes (core.quotePath):
// \a \b \t \n \v \f \r \" \\, and three-digit octal for the other control
// characters (ESC is \033), for each byte that is not UTF-8, and for the
// bytes of C1 controls, bidirectional controls and invisible format
// characters (U+202E is \342\200\256). `git apply` reads such names back.
//   quote_name("src/a.c")          -> src/a.c
//   quote_name("a\x1b[2Kb")        -> "a\033[2Kb"  (with the quotes)
std::string quote_name(std::string_view name);

// Free text (a message, a line of a file) for a terminal: the same escapes
// without quotes; tabs, backslashes and quotes stay as they are, newlines
// too when `keep_newlines`.
std::string escape_for_terminal(std::string_view text, bool keep_newlines = false);

// ASCII-only lower case, for keywords such as "allow" or "Write".
std::string ascii_lower(std::string_view text);

// Whether the relative path `path` is `base` or lies beneath it, by name:
// "a/b" is beneath "a", "ab" is not.
bool is_at_or_beneath(std::string_view path, std::string_view base);

// A file mode's permission bits in octal as chmod takes them: "755",
// "4755" when a setuid, setgid or sticky bit is set.
std::string octal_mode(unsigned mode);

// "EINVAL (Invalid argument)": the errno's name and its description.
std::string describe_errno(int error_number);

// `digits` random lowercase hex digits from the kernel's generator
// (getrandom(2)), for names that must not collide: run ids, temporary
// files. (std::random_device asks the CPU first: a trapped cpuid on a VM.)
std::string random_hex(std::size_t digits);

// 1-based line and column of a byte offset, for error messages.
struct TextPosition {
  std::size_t line = 1;
  std::size_t column = 1;
};
TextPosition position_of_offset(std::string_view text, std::size_t offset);

}  // namespace pulsebox::core
