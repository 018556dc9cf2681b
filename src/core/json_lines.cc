#include "core/json_lines.h"

#include <cstring>

namespace pulsebox::core {
namespace {

class Scanner {
 public:
  Scanner(std::string_view text, std::map<std::string, int>& out) : text_(text), out_(out) {}

  void value(const std::string& path, int depth) {
    skip_space();
    if (at_end() || depth > 256) return;
    out_[path] = line_;
    const char c = text_[pos_];
    if (c == '{') {
      ++pos_;
      skip_space();
      if (peek('}')) return void(++pos_);
      while (!at_end()) {
        skip_space();
        std::string key;
        string(&key);
        skip_space();
        ++pos_;  // ':'
        value(path.empty() ? key : path + "." + key, depth + 1);
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
      for (int index = 0; !at_end(); ++index) {
        value(path + "[" + std::to_string(index) + "]", depth + 1);
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

 private:
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
  std::map<std::string, int>& out_;
  std::size_t pos_ = 0;
  int line_ = 1;
};

}  // namespace

std::map<std::string, int> json_value_lines(std::string_view text) {
  std::map<std::string, int> lines;
  Scanner(text, lines).value("", 0);
  return lines;
}

}  // namespace pulsebox::core
