#include "core/json_lines.h"

#include <cstring>
#include <string>

namespace pulsebox::core {
namespace {

class LineFinder {
 public:
  explicit LineFinder(std::string_view text) : text_(text) {}

  // Scans the value at the current position. `rest` is what remains of
  // the wanted path below this value, or nullopt when the wanted value is
  // not inside it.
  void value(std::optional<std::string_view> rest, bool root, int depth) {
    skip_space();
    if (at_end() || depth > 256 || found_) return;
    if (rest && rest->empty()) {
      found_ = line_;
      return;
    }
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      skip_space();
      if (peek('}')) return void(++pos_);
      std::string key;
      while (!at_end() && !found_) {
        skip_space();
        key.clear();
        string(rest ? &key : nullptr);
        skip_space();
        ++pos_;  // ':'
        value(rest ? member(*rest, key, root) : std::nullopt, false, depth + 1);
        skip_space();
        if (peek(',')) {
          ++pos_;
          continue;
        }
        ++pos_;  // '}'
        return;
      }
    } else if (c == '[') {
      ++pos_;
      skip_space();
      if (peek(']')) return void(++pos_);
      for (std::size_t index = 0; !at_end() && !found_; ++index) {
        value(rest ? element(*rest, index) : std::nullopt, false, depth + 1);
        skip_space();
        if (peek(',')) {
          ++pos_;
          continue;
        }
        ++pos_;  // ']'
        return;
      }
    } else if (c == '"') {
      string(nullptr);
    } else {
      while (!at_end() && std::strchr(",]} \t\r\n", text_[pos_]) == nullptr)
        ++pos_;
    }
  }

  std::optional<int> found() const { return found_; }

 private:
  // What remains of `rest` below member `key`, if the path goes through it.
  static std::optional<std::string_view> member(std::string_view rest, std::string_view key,
                                                bool root) {
    if (!root) {
      if (rest.empty() || rest.front() != '.') return std::nullopt;
      rest.remove_prefix(1);
    }
    if (rest.substr(0, key.size()) != key) return std::nullopt;
    rest.remove_prefix(key.size());
    if (!rest.empty() && rest.front() != '.' && rest.front() != '[') return std::nullopt;
    return rest;
  }
  static std::optional<std::string_view> element(std::string_view rest, std::size_t index) {
    const std::string step = "[" + std::to_string(index) + "]";
    if (rest.substr(0, step.size()) != step) return std::nullopt;
    return rest.substr(step.size());
  }

  bool at_end() const { return pos_ >= text_.size(); }
  bool peek(char c) const { return !at_end() && text_[pos_] == c; }
  void skip_space() {
    while (!at_end() && std::strchr(" \t\r\n", text_[pos_]) != nullptr) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
  }
  // At the opening quote; escapes are kept as their second character.
  void string(std::string* into) {
    ++pos_;
    while (!at_end() && text_[pos_] != '"') {
      if (text_[pos_] == '\\') ++pos_;
      if (!at_end() && into != nullptr) into->push_back(text_[pos_]);
      ++pos_;
    }
    ++pos_;
  }

  std::string_view text_;
  std::size_t pos_ = 0;
  int line_ = 1;
  std::optional<int> found_;
};

}  // namespace

std::optional<int> json_value_line(std::string_view text, std::string_view path) {
  LineFinder finder(text);
  finder.value(path, true, 0);
  return finder.found();
}

}  // namespace pulsebox::core
