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

// ASCII-only lower case, for keywords such as "allow" or "Write".
std::string ascii_lower(std::string_view text);

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
