// Decimal text for code that may neither allocate nor call the C library:
// the child after clone() and the client that runs before the C library
// starts.
#pragma once

#include <cstddef>

namespace pulsebox::core {

// The most either function writes: a sign and 19 or 20 digits.
inline constexpr std::size_t kMaxDecimalChars = 21;

// `value` in decimal at `text`, without a terminator: the count written.
constexpr int write_decimal(unsigned long long value, char* text) noexcept {
  char reversed[kMaxDecimalChars];
  int count = 0;
  do {
    reversed[count++] = static_cast<char>('0' + value % 10);
    value /= 10;
  } while (value != 0);
  int n = 0;
  while (count > 0)
    text[n++] = reversed[--count];
  return n;
}

// As write_decimal, with a '-' first when `value` is negative.
constexpr int write_signed_decimal(long long value, char* text) noexcept {
  if (value >= 0) return write_decimal(static_cast<unsigned long long>(value), text);
  text[0] = '-';
  return 1 + write_decimal(0ULL - static_cast<unsigned long long>(value), text + 1);
}

}  // namespace pulsebox::core
