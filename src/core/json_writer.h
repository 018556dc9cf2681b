// A JSON object written straight into a string, for records written by the
// hundred thousand (a transaction's manifest and write-ahead log: building
// each entry as an nlohmann::json first, a map of nodes, cost more than
// the rest of writing it).
//
// Usage: JsonObjectWriter w(out); w.field("op", "write"); w.field("size",
// n); w.name("path", path); w.begin_object("snapshot") ... w.end_object();
// w.finish(). field()'s strings must be valid UTF-8 (std::invalid_argument
// otherwise, as nlohmann's dump() throws); name() keeps any bytes as
// core::put_name does (byte_names.h). The text
// parses to what nlohmann::json would have written.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pulsebox::core {

// `text` escaped for a JSON string, without the quotes, appended to `out`:
// the quote, the backslash and control characters escaped (and '/' with
// `escape_slash`, as some encoders write it); other bytes copied as they are.
void append_json_escaped(std::string& out, std::string_view text, bool escape_slash = false);
// `text` as a JSON string, quotes included.
void append_json_string(std::string& out, std::string_view text);

class JsonObjectWriter {
 public:
  explicit JsonObjectWriter(std::string& out) : out_(out) {}

  void field(std::string_view key, std::string_view value);
  void field(std::string_view key, const char* value) { field(key, std::string_view(value)); }
  void field(std::string_view key, std::uint64_t value);
  void field(std::string_view key, std::int64_t value);
  void field(std::string_view key, unsigned value) { field(key, std::uint64_t{value}); }
  void field(std::string_view key, bool value);
  // A value already written as JSON text (`null`, a number as nlohmann
  // formats it), copied as it is.
  void raw(std::string_view key, std::string_view json);
  // A file name: as it is when it is valid UTF-8, else escaped under `key`
  // and its exact bytes in hex under `key` + "_hex" (core::put_name).
  void name(std::string_view key, std::string_view bytes);
  // A nested object under `key`, closed by end_object().
  void begin_object(std::string_view key);
  void end_object();
  // Closes the outermost object.
  void finish() { end_object(); }

 private:
  void key(std::string_view key);
  std::string& out_;
  bool first_ = true;
};

}  // namespace pulsebox::core
