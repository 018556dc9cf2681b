#include "core/json_writer.h"

#include <charconv>
#include <stdexcept>

#include "core/byte_names.h"
#include "core/text.h"

namespace pulsebox::core {

void append_json_escaped(std::string& out, std::string_view text, bool escape_slash) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::size_t plain = 0;  // start of the run not yet copied
  for (std::size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c != '"' && c != '\\' && (c != '/' || !escape_slash)) continue;
    out.append(text, plain, i - plain);
    plain = i + 1;
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '/':
        out += "\\/";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        out += "\\u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
        break;
    }
  }
  out.append(text, plain, text.size() - plain);
}

void append_json_string(std::string& out, std::string_view text) {
  out += '"';
  append_json_escaped(out, text);
  out += '"';
}

void JsonObjectWriter::key(std::string_view key) {
  out_ += first_ ? '{' : ',';
  first_ = false;
  append_json_string(out_, key);
  out_ += ':';
}

void JsonObjectWriter::field(std::string_view name, std::string_view value) {
  // nlohmann's dump() throws for such a string too: never written changed.
  if (!is_valid_utf8(value)) {
    throw std::invalid_argument("JSON field " + std::string(name) + " is not valid UTF-8");
  }
  key(name);
  append_json_string(out_, value);
}

void JsonObjectWriter::field(std::string_view name, std::uint64_t value) {
  key(name);
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out_.append(digits, end);
}

void JsonObjectWriter::field(std::string_view name, std::int64_t value) {
  key(name);
  char digits[24];
  const auto end = std::to_chars(digits, digits + sizeof digits, value).ptr;
  out_.append(digits, end);
}

void JsonObjectWriter::field(std::string_view name, bool value) {
  key(name);
  out_ += value ? "true" : "false";
}

void JsonObjectWriter::raw(std::string_view name, std::string_view json) {
  key(name);
  out_ += json;
}

void JsonObjectWriter::name(std::string_view key_name, std::string_view bytes) {
  if (is_valid_utf8(bytes)) {
    key(key_name);
    append_json_string(out_, bytes);
    return;
  }
  key(key_name);
  append_json_string(out_, escape_malformed_utf8(bytes));
  key(std::string(key_name) + "_hex");
  append_json_string(out_, to_hex(bytes));
}

void JsonObjectWriter::begin_object(std::string_view name) {
  key(name);
  first_ = true;
}

void JsonObjectWriter::end_object() {
  if (first_) out_ += '{';
  out_ += '}';
  first_ = false;
}

}  // namespace pulsebox::core
