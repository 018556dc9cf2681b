#include <string>
#include <vector>

#include "core/text.h"
#include "pulsebox/policy.h"

namespace pulsebox {
namespace {

struct GlobToken {
  enum class Kind { Literal, AnyOne, Star, Set } kind = Kind::Literal;
  char32_t literal = 0;
  bool negated = false;
  std::vector<std::pair<char32_t, char32_t>> ranges;

  bool matches(char32_t c) const {
    switch (kind) {
      case Kind::Literal:
        return c == literal;
      case Kind::AnyOne:
        return true;
      case Kind::Set: {
        bool in = false;
        for (const auto& [lo, hi] : ranges)
          in = in || (c >= lo && c <= hi);
        return in != negated;
      }
      case Kind::Star:
        break;
    }
    return false;
  }
};

// fnmatch rules: "[!..]" negates, ']' first in a set is literal, an
// unterminated '[' is a literal '['. Consecutive stars collapse into one.
std::vector<GlobToken> tokenize(const std::u32string& pattern) {
  std::vector<GlobToken> tokens;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char32_t c = pattern[i];
    GlobToken token;
    if (c == U'*') {
      if (!tokens.empty() && tokens.back().kind == GlobToken::Kind::Star) continue;
      token.kind = GlobToken::Kind::Star;
    } else if (c == U'?') {
      token.kind = GlobToken::Kind::AnyOne;
    } else if (c == U'[') {
      std::size_t j = i + 1;
      bool negated = false;
      if (j < pattern.size() && pattern[j] == U'!') {
        negated = true;
        ++j;
      }
      std::vector<std::pair<char32_t, char32_t>> ranges;
      bool first = true;
      bool closed = false;
      while (j < pattern.size()) {
        if (pattern[j] == U']' && !first) {
          closed = true;
          break;
        }
        first = false;
        char32_t lo = pattern[j];
        char32_t hi = lo;
        if (j + 2 < pattern.size() && pattern[j + 1] == U'-' && pattern[j + 2] != U']') {
          hi = pattern[j + 2];
          j += 2;
        }
        ranges.emplace_back(lo, hi);
        ++j;
      }
      if (closed) {
        token.kind = GlobToken::Kind::Set;
        token.negated = negated;
        token.ranges = std::move(ranges);
        i = j;
      } else {
        token.literal = U'[';
      }
    } else {
      token.literal = c;
    }
    tokens.push_back(std::move(token));
  }
  return tokens;
}

}  // namespace

bool glob_match(std::string_view pattern_utf8, std::string_view text_utf8) {
  const auto pattern = core::decode_utf8(pattern_utf8);
  const auto text = core::decode_utf8(text_utf8);
  if (!pattern || !text) return false;
  const std::vector<GlobToken> tokens = tokenize(*pattern);

  // Greedy match with a single backtrack point (the last star): a later star
  // can always absorb what an earlier one would have, so this is complete and
  // costs at most |tokens| x |text|.
  std::size_t p = 0;
  std::size_t t = 0;
  std::size_t star = std::u32string::npos;
  std::size_t mark = 0;
  while (t < text->size()) {
    if (p < tokens.size() && tokens[p].kind == GlobToken::Kind::Star) {
      star = p++;
      mark = t;
    } else if (p < tokens.size() && tokens[p].matches((*text)[t])) {
      ++p;
      ++t;
    } else if (star != std::u32string::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < tokens.size() && tokens[p].kind == GlobToken::Kind::Star)
    ++p;
  return p == tokens.size();
}

}  // namespace pulsebox
