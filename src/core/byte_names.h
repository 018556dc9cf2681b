// File names are bytes, not text: Linux allows every byte but '/' and NUL in
// a name, JSON strings are UTF-8. These keep a name exact across JSON (the
// transaction manifest, the write-ahead log, --json output):
//   a name that is valid UTF-8 is stored as it is, under `key`;
//   any other name is stored as its escaped form (each byte of a malformed
//   sequence as the four characters "\xNN") under `key`, for people, and as
//   its exact bytes in hex under `key` + "_hex", for programs.
// A reader takes `key` + "_hex" when it is there, else `key`.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/text.h"

namespace pulsebox::core {

// `bytes` with each byte of a malformed UTF-8 sequence written as "\xNN"
// (lower-case hex); well-formed sequences are kept as they are.
std::string escape_malformed_utf8(std::string_view bytes);

// `bytes` with each byte b of a malformed UTF-8 sequence replaced by the
// private-use code point U+10FE00 + b (always valid UTF-8; such bytes are
// all >= 0x80): one character per byte, and no two inputs alike but for
// text that holds those code points itself.
std::string spell_malformed_utf8(std::string_view bytes);

std::string to_hex(std::string_view bytes);
// Standard base64 with padding (RFC 4648), and back: nullopt unless `text`
// is padded base64.
std::string to_base64(std::string_view bytes);
std::optional<std::string> from_base64(std::string_view text);
// nullopt unless `hex` is an even number of hex digits.
std::optional<std::string> from_hex(std::string_view hex);

template <typename Json>
void put_name(Json& object, const std::string& key, std::string_view name) {
  if (is_valid_utf8(name)) {
    object[key] = std::string(name);
  } else {
    object[key] = escape_malformed_utf8(name);
    object[key + "_hex"] = to_hex(name);
  }
}

// The exact name; throws what Json::at() throws for a missing key, and
// Json's out_of_range for hex that does not decode.
template <typename Json>
std::string get_name(const Json& object, const std::string& key) {
  const std::string hex_key = key + "_hex";
  if (object.contains(hex_key)) {
    if (auto bytes = from_hex(object.at(hex_key).template get<std::string>())) return *bytes;
    throw Json::out_of_range::create(401, hex_key + " is not hex", &object);
  }
  return object.at(key).template get<std::string>();
}

}  // namespace pulsebox::core
