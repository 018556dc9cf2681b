#include <re2/re2.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <optional>
#include <set>

#include "core/json_writer.h"
#include "core/sha256.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "secrets/builtin_patterns.h"
#include "secrets/wrapped_base64.h"

namespace pulsebox {
namespace {

struct Range {
  std::size_t begin;
  std::size_t end;
};

// What one search found: the ranges to redact, and the whole matches they came
// from (a stream must not cut inside "Bearer <value>", or the value would
// lose the keyword that identifies it).
struct Matches {
  std::vector<Range> redact;
  std::vector<Range> spans;
};

// Bytes the stream may hold back while waiting for the rest of a secret.
constexpr std::size_t kMaxCarry = 64 * 1024;
// A base64 fragment shorter than this would match ordinary text too often.
constexpr std::size_t kMinBase64Fragment = 8;

const char* const kAssignmentKeywords =
    "api[_-]?key|secret[_-]?key|client[_-]?secret|secret|password|passwd|"
    "access[_-]?token|auth[_-]?token|refresh[_-]?token|token";
// "pwd" is a password (MYSQL_PWD=, Pwd= in a connection string) unless its
// value is an absolute path: the shell's PWD= and OLDPWD=, in every `env`.
const char* const kPathOrPasswordKeyword = "pwd";

RE2::Options latin1_options(bool longest_match) {
  RE2::Options options;
  // Latin-1 so that any byte sequence (binary output) is matched byte-wise.
  options.set_encoding(RE2::Options::EncodingLatin1);
  options.set_longest_match(longest_match);
  options.set_log_errors(false);
  options.set_max_mem(64 << 20);
  return options;
}

std::string url_encode(std::string_view value, bool plus_for_space) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(c);
    } else if (c == ' ' && plus_for_space) {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0xF]);
    }
  }
  return out;
}

std::string json_escape(std::string_view value, bool escape_slash) {
  std::string out;
  core::append_json_escaped(out, value, escape_slash);
  return out;
}

std::string base64_unpadded(std::string_view bytes, bool url_safe) {
  const char* alphabet = url_safe
                             ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                             : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : bytes) {
    acc = (acc << 8) | static_cast<unsigned char>(c);
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(alphabet[(acc >> bits) & 0x3F]);
    }
  }
  if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 0x3F]);
  return out;
}

struct SecretForm {
  std::string text;
  bool case_insensitive;
  bool base64 = false;  // also looked for across the line ends of wrapped base64
};

// The forms in which a secret may show up in output.
std::string without_surrounding_space(std::string_view value) {
  constexpr std::string_view kSpace = " \t\r\n\v\f";
  const std::size_t first = value.find_first_not_of(kSpace);
  if (first == std::string_view::npos) return {};
  return std::string(value.substr(first, value.find_last_not_of(kSpace) - first + 1));
}

std::vector<SecretForm> secret_forms(const std::string& value) {
  std::vector<SecretForm> forms;
  forms.push_back({value, true});
  for (bool plus : {false, true})
    forms.push_back({url_encode(value, plus), true});
  for (bool slash : {false, true})
    forms.push_back({json_escape(value, slash), true});
  // base64 of the value at each byte alignment inside a larger blob: keep only
  // the characters that depend on the value's bytes alone.
  for (std::size_t offset = 0; offset < 3; ++offset) {
    std::string padded(offset, '\0');
    padded += value;
    padded.append(2, '\0');
    const std::size_t first = (8 * offset + 5) / 6;
    const std::size_t last = (8 * (offset + value.size())) / 6;
    if (last <= first || last - first < kMinBase64Fragment) continue;
    for (bool url_safe : {false, true}) {
      forms.push_back({base64_unpadded(padded, url_safe).substr(first, last - first), false, true});
    }
  }
  return forms;
}

struct Pattern {
  std::unique_ptr<RE2> re;
  int group;  // 0 = the whole match, else only this capture is redacted
};

// The built-in patterns are constants: compiled once per process, on first
// use, and shared by every scrubber (adding a secret recompiles only the
// secrets' alternation).
struct BuiltinPatterns {
  std::vector<Pattern> patterns;
  std::unique_ptr<RE2> pending_prefix;  // a secret that may continue in the next chunk
  std::unique_ptr<RE2> pem_begin;
  std::unique_ptr<RE2> pem_end;
};

const BuiltinPatterns& builtin_patterns();

}  // namespace

struct SecretScrubber::Engine {
  std::unique_ptr<RE2> literals;
  std::unique_ptr<RE2> base64_forms;  // the base64 forms of `literals` alone
  // The most bytes a match of `literals` or `base64_forms` can span.
  std::size_t max_literal_length = 0;
  bool use_builtin_patterns = false;

  const BuiltinPatterns* builtins() const {
    return use_builtin_patterns ? &builtin_patterns() : nullptr;
  }
  // The built-in patterns if `text` could match one of them: most text
  // cannot, and needs neither their matching nor, in a fresh process, their
  // compilation.
  const BuiltinPatterns* builtins_for(std::string_view text) const {
    return use_builtin_patterns && may_match_builtin_pattern(text) ? &builtin_patterns() : nullptr;
  }
  // The same for a stream's pending prefix (a keyword at the very end).
  const BuiltinPatterns* builtins_for_prefix(std::string_view text) const {
    return use_builtin_patterns && may_hold_builtin_secret(text) ? &builtin_patterns() : nullptr;
  }

  static void collect(const RE2& re, int group, std::string_view text, std::vector<Range>& out,
                      std::vector<Range>* spans = nullptr) {
    re2::StringPiece input(text.data(), text.size());
    re2::StringPiece captures[2];
    const int wanted = group + 1;
    std::size_t pos = 0;
    while (pos <= text.size() &&
           re.Match(input, pos, text.size(), RE2::UNANCHORED, captures, wanted)) {
      const std::size_t whole_begin = static_cast<std::size_t>(captures[0].data() - text.data());
      const std::size_t whole_end = whole_begin + captures[0].size();
      const re2::StringPiece& part = captures[group];
      if (part.data() != nullptr && !part.empty()) {
        const std::size_t begin = static_cast<std::size_t>(part.data() - text.data());
        out.push_back({begin, begin + part.size()});
        if (spans != nullptr) spans->push_back({whole_begin, whole_end});
      }
      pos = whole_end > pos ? whole_end : pos + 1;
    }
  }

  // Matches of the base64 forms that span the line ends of wrapped base64
  // (one within a line is a match of `literals` already).
  static void collect_wrapped(const RE2& re, std::string_view text, std::size_t run_before,
                              std::vector<Range>& out, std::vector<Range>& spans) {
    for_each_wrapped_block(text, run_before, [&](const WrappedBlock& block) {
      std::vector<Range> found;
      collect(re, 0, block.joined, found);
      for (const Range& range : found) {
        const Range in_text{block.text_offset(range.begin), block.text_offset(range.end - 1) + 1};
        if (in_text.end - in_text.begin == range.end - range.begin) continue;
        out.push_back(in_text);
        spans.push_back(in_text);
      }
      return true;
    });
  }

  static std::vector<Range> sort_and_merge(std::vector<Range> ranges) {
    std::sort(ranges.begin(), ranges.end(),
              [](const Range& a, const Range& b) { return a.begin < b.begin; });
    std::vector<Range> merged;
    for (const Range& r : ranges) {
      if (!merged.empty() && r.begin <= merged.back().end) {
        merged.back().end = std::max(merged.back().end, r.end);
      } else {
        merged.push_back(r);
      }
    }
    return merged;
  }

  // All ranges to redact in `text` (sorted, merged) and their whole matches.
  // `builtins_possible` false: the caller knows no built-in pattern can match.
  // `run_before`: for_each_wrapped_block's, for a stream's carry.
  Matches find(std::string_view text, bool builtins_possible = true,
               std::size_t run_before = 0) const {
    Matches found;
    if (literals) collect(*literals, 0, text, found.redact, &found.spans);
    if (base64_forms) collect_wrapped(*base64_forms, text, run_before, found.redact, found.spans);
    if (const BuiltinPatterns* builtin = builtins_possible ? builtins_for(text) : nullptr) {
      for (const Pattern& pattern : builtin->patterns)
        collect(*pattern.re, pattern.group, text, found.redact, &found.spans);
    }
    found.redact = sort_and_merge(std::move(found.redact));
    found.spans = sort_and_merge(std::move(found.spans));
    return found;
  }

  static std::string apply(std::string_view text, const std::vector<Range>& ranges,
                           std::size_t limit, bool* changed) {
    std::string out;
    out.reserve(limit);
    std::size_t pos = 0;
    for (const Range& r : ranges) {
      if (r.end > limit) break;
      out.append(text.substr(pos, r.begin - pos));
      out.append(kReplacement);
      pos = r.end;
      *changed = true;
    }
    out.append(text.substr(pos, limit - pos));
    return out;
  }
};

namespace {

void refuse_past_the_limit(std::size_t bytes, std::size_t values) {
  if (bytes <= SecretScrubber::kMaxSecretBytes) return;
  throw SandboxConfigError("the " + std::to_string(values) + " registered secret values hold " +
                               std::to_string(bytes) + " bytes, over the " +
                               std::to_string(SecretScrubber::kMaxSecretBytes) +
                               " a sandbox looks for in its output: register fewer or shorter "
                               "values",
                           0, "secret");
}

// The registered values' alternation. Within kMaxSecretBytes it compiles
// (checked up to 600 KB of values); one RE2 still refuses is the caller's
// input, refused as such, never an abort.
std::unique_ptr<RE2> compile_registered(const std::string& pattern,
                                        const std::vector<std::string>& values) {
  auto re = std::make_unique<RE2>(pattern, latin1_options(/*longest_match=*/true));
  if (re->ok()) return re;
  std::size_t bytes = 0;
  for (const std::string& value : values)
    bytes += value.size();
  throw SandboxConfigError("the " + std::to_string(values.size()) +
                               " registered secret values are too large to look for together (" +
                               std::to_string(bytes) +
                               " bytes in all, with their encoded forms): register fewer or "
                               "shorter values",
                           0, "secret");
}

std::unique_ptr<RE2> compile(const std::string& pattern, bool longest = false) {
  auto re = std::make_unique<RE2>(pattern, latin1_options(longest));
  // Built-in patterns are constants: failing to compile one is a programming
  // error caught by the unit tests, never a runtime condition.
  if (!re->ok()) std::abort();
  return re;
}

BuiltinPatterns compile_patterns() {
  const std::vector<BuiltinPatternSource> sources = builtin_pattern_sources();
  BuiltinPatterns built;
  for (const auto& source : sources) {
    auto re = compile(source.regex);
    switch (source.role) {
      case BuiltinPatternSource::Role::Redact:
        built.patterns.push_back({std::move(re), source.group});
        break;
      case BuiltinPatternSource::Role::PendingPrefix:
        built.pending_prefix = std::move(re);
        break;
      case BuiltinPatternSource::Role::PemBegin:
        built.pem_begin = std::move(re);
        break;
      case BuiltinPatternSource::Role::PemEnd:
        built.pem_end = std::move(re);
        break;
    }
  }
  return built;
}

const BuiltinPatterns& builtin_patterns() {
  static const BuiltinPatterns patterns = compile_patterns();
  return patterns;
}

}  // namespace

std::vector<BuiltinPatternSource> builtin_pattern_sources() {
  using Role = BuiltinPatternSource::Role;
  const std::string keywords = kAssignmentKeywords;
  return {
      {"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----(?s:.*?)-----END[A-Z0-9 ]*PRIVATE KEY-----", 0,
       Role::Redact},
      {"(?i:" + keywords + ")[\"']?[ \\t]*[:=][ \\t]*[\"']?([^\\s\"',;&]+)", 1, Role::Redact},
      {std::string("(?i:") + kPathOrPasswordKeyword +
           ")[\"']?[ \\t]*[:=][ \\t]*[\"']?([^/\\s\"',;&][^\\s\"',;&]*)",
       1, Role::Redact},
      {"(?i:bearer)[ \\t]+([A-Za-z0-9._~+/=-]{4,})", 1, Role::Redact},
      {"AIza[0-9A-Za-z_-]{35}", 0, Role::Redact},
      {"\\bsk-[A-Za-z0-9_-]{20,}", 0, Role::Redact},
      {"\\bgh[pousr]_[A-Za-z0-9]{36,}", 0, Role::Redact},
      {"\\bxox[abposr]-[A-Za-z0-9-]{10,}", 0, Role::Redact},
      {"\\beyJ[A-Za-z0-9_-]{4,}\\.eyJ[A-Za-z0-9_-]{4,}\\.[A-Za-z0-9_-]+", 0, Role::Redact},
      {"\\b(?:AKIA|ASIA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA)[0-9A-Z]{16}\\b", 0, Role::Redact},
      // A keyword (and perhaps part of its value) at the very end of the
      // buffer: the value may still be arriving.
      {"(?:(?i:(?:" + keywords + "|" + kPathOrPasswordKeyword +
           ")[\"']?[ \\t]*(?:[:=][ \\t]*[\"']?[^\\s\"',;&]*)?|"
           "bearer(?:[ \\t]+[A-Za-z0-9._~+/=-]*)?)|-----BEGIN[A-Z0-9 ]*-{0,5})\\z",
       0, Role::PendingPrefix},
      {"-----BEGIN[A-Z0-9 ]*PRIVATE KEY-----", 0, Role::PemBegin},
      {"-----END[A-Z0-9 ]*PRIVATE KEY-----", 0, Role::PemEnd},
  };
}

namespace {

// A literal that every built-in pattern needs (PemEnd excepted: it is only
// looked for after a PemBegin): the keywords in any case, the rest as
// written. Checked against the patterns themselves by the unit tests.
constexpr std::string_view kKeywordTriggers[] = {"api", "secret", "pass", "pwd", "token"};
constexpr std::string_view kBearer = "bearer";
constexpr std::string_view kExactTriggers[] = {
    "-----BEGIN", "AIza", "sk-",  "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox",
    "eyJ",        "AKIA", "ASIA", "AGPA", "AIDA", "AROA", "AIPA", "ANPA", "ANVA"};

bool has_at(std::string_view text, std::size_t at, std::string_view word, bool fold) {
  if (text.size() - at < word.size()) return false;
  for (std::size_t k = 0; k < word.size(); ++k) {
    unsigned char c = static_cast<unsigned char>(text[at + k]);
    if (fold && c >= 'A' && c <= 'Z') c = static_cast<unsigned char>(c - 'A' + 'a');
    if (c != static_cast<unsigned char>(word[k])) return false;
  }
  return true;
}

bool is_ascii_letter(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// After a keyword trigger: the rest of the keyword ([A-Za-z_-]*), then what
// the assignment pattern wants: an optional quote, blanks, ':' or '='.
bool assignment_follows(std::string_view text, std::size_t i) {
  while (i < text.size() && (is_ascii_letter(text[i]) || text[i] == '_' || text[i] == '-'))
    ++i;
  if (i < text.size() && (text[i] == '"' || text[i] == '\'')) ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
    ++i;
  return i < text.size() && (text[i] == ':' || text[i] == '=');
}

// One pass; `assignments` says whether a keyword counts only when an
// assignment follows it (the redacting patterns) or anywhere (the pending
// prefix of a stream, which is a keyword at the very end).
bool has_trigger(std::string_view text, bool assignments) {
  enum class Kind { Keyword, Bearer, Exact };
  struct Trigger {
    std::string_view word;
    Kind kind;
  };
  // The triggers by the byte they start with: most bytes start none and
  // cost one lookup, the rest compare a few short words.
  static const auto by_first_byte = [] {
    std::array<std::vector<Trigger>, 256> table;
    auto add_folded = [&](std::string_view word, Kind kind) {
      table[static_cast<unsigned char>(word[0])].push_back({word, kind});
      table[static_cast<unsigned char>(word[0] - 'a' + 'A')].push_back({word, kind});
    };
    for (std::string_view word : kKeywordTriggers)
      add_folded(word, Kind::Keyword);
    add_folded(kBearer, Kind::Bearer);
    for (std::string_view word : kExactTriggers)
      table[static_cast<unsigned char>(word[0])].push_back({word, Kind::Exact});
    return table;
  }();
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (const Trigger& trigger : by_first_byte[static_cast<unsigned char>(text[i])]) {
      if (!has_at(text, i, trigger.word, trigger.kind != Kind::Exact)) continue;
      const std::size_t next = i + trigger.word.size();
      switch (trigger.kind) {
        case Kind::Exact:
          return true;
        case Kind::Keyword:
          if (!assignments || assignment_follows(text, next)) return true;
          break;
        case Kind::Bearer:
          if (!assignments || (next < text.size() && (text[next] == ' ' || text[next] == '\t')))
            return true;
          break;
      }
    }
  }
  return false;
}

}  // namespace

bool may_match_builtin_pattern(std::string_view text) {
  return has_trigger(text, true);
}

bool may_hold_builtin_secret(std::string_view text) {
  return has_trigger(text, false);
}

std::string_view to_string(SecretMode mode) {
  switch (mode) {
    case SecretMode::DenyAll:
      return "deny_all";
    case SecretMode::AllowExplicit:
      return "allow_explicit";
    case SecretMode::AllowAll:
      return "allow_all";
  }
  return "deny_all";
}

SecretScrubber::SecretScrubber(const std::vector<std::string>& secrets, bool builtin_patterns)
    : builtin_patterns_(builtin_patterns) {
  add_secrets(secrets);
  if (!engine_) rebuild();
}

SecretScrubber::~SecretScrubber() = default;
SecretScrubber::SecretScrubber(const SecretScrubber&) = default;
SecretScrubber& SecretScrubber::operator=(const SecretScrubber&) = default;
SecretScrubber::SecretScrubber(SecretScrubber&&) noexcept = default;
SecretScrubber& SecretScrubber::operator=(SecretScrubber&&) noexcept = default;

void SecretScrubber::add_secret(std::string_view value) {
  add_secrets({std::string(value)});
}

void SecretScrubber::add_secrets(const std::vector<std::string>& values) {
  const std::size_t before = secrets_.size();
  try {
    // Views into secrets_: no reallocation may move them while they are used.
    secrets_.reserve(before + values.size());
    std::set<std::string_view> known(secrets_.begin(), secrets_.end());
    std::size_t bytes = 0;
    for (const std::string& secret : secrets_)
      bytes += secret.size();
    for (const std::string& value : values) {
      if (value.size() < kMinSecretLength || known.count(value) > 0) continue;
      secrets_.push_back(value);
      known.insert(secrets_.back());
      bytes += value.size();
    }
    if (secrets_.size() == before) return;
    refuse_past_the_limit(bytes, secrets_.size());
    rebuild();
  } catch (...) {
    secrets_.resize(before);  // refused: the scrubber stays what it was
    throw;
  }
}

bool SecretScrubber::scrubbable(std::string_view value) {
  return without_surrounding_space(value).size() >= kMinSecretLength;
}

std::size_t SecretScrubber::secret_count() const {
  return secrets_.size();
}

std::vector<std::string> SecretScrubber::fingerprints(std::string_view key) const {
  const core::HmacSha256 mac(key);
  std::vector<std::string> out;
  out.reserve(secrets_.size());
  for (const std::string& value : secrets_)
    out.push_back(mac.hex_mac(value));
  return out;
}

void SecretScrubber::rebuild() {
  auto engine = std::make_shared<Engine>();
  std::set<std::string> seen;
  std::string alternation;
  std::string base64_alternation;
  for (const std::string& secret : secrets_) {
    // A value read from a file often ends in a newline the command can
    // leave off: without its surrounding white space it is a form too.
    std::vector<SecretForm> forms = secret_forms(secret);
    if (const std::string bare = without_surrounding_space(secret); bare != secret) {
      const std::vector<SecretForm> more = secret_forms(bare);
      forms.insert(forms.end(), more.begin(), more.end());
    }
    for (const SecretForm& form : forms) {
      if (form.text.size() < kMinSecretLength || !seen.insert(form.text).second) continue;
      const std::string quoted =
          (form.case_insensitive ? "(?i:" : "(?:") + RE2::QuoteMeta(form.text) + ")";
      alternation += (alternation.empty() ? "" : "|") + quoted;
      std::size_t longest = form.text.size();
      if (form.base64) {
        base64_alternation += (base64_alternation.empty() ? "" : "|") + quoted;
        longest = longest_wrapped_span(form.text.size());
      }
      engine->max_literal_length = std::max(engine->max_literal_length, longest);
    }
  }
  // Leftmost-longest: where two registered forms overlap, the longer wins.
  if (!alternation.empty()) engine->literals = compile_registered(alternation, secrets_);
  if (!base64_alternation.empty())
    engine->base64_forms = compile_registered(base64_alternation, secrets_);

  engine->use_builtin_patterns = builtin_patterns_;
  engine_ = std::move(engine);
}

SecretScrubber::Redaction SecretScrubber::scrub(std::string_view text) const {
  Redaction result;
  const auto found = engine_->find(text);
  result.text = Engine::apply(text, found.redact, text.size(), &result.changed);
  return result;
}

bool SecretScrubber::contains_secret(std::string_view text) const {
  if (!engine_->literals) return false;
  if (RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *engine_->literals))
    return true;
  bool found = false;
  if (engine_->base64_forms) {
    for_each_wrapped_block(text, 0, [&](const WrappedBlock& block) {
      found = RE2::PartialMatch(block.joined, *engine_->base64_forms);
      return !found;
    });
  }
  return found;
}

// ---------------------------------------------------------------------------
// Streaming

struct SecretScrubber::Stream::State {
  std::shared_ptr<const Engine> engine;
  std::string carry;
  bool in_private_key = false;  // dropping an oversized PEM block until its END line
  bool redacted = false;
  // The base64 characters emitted right before the carry, in the run it
  // starts with: a line end joins runs as in the whole text however the
  // text was cut (an attack found a stream that joined fewer).
  std::size_t run_before_carry = 0;

  // A cut between "\r" and "\n" counts 0 (the run ended at the "\r"), and
  // the carry's first line end then joins nothing. No match is lost: one
  // across that line end would start before the cut and have held the cut
  // back to its start.
  void drop(std::size_t bytes) {
    run_before_carry = run_ending_at(carry, bytes, run_before_carry);
    carry.erase(0, bytes);
  }

  // Where the unfinished PEM private key block starts, if any. Pairs are
  // walked in order as the whole-text pattern sees them: a BEGIN extends to
  // the first END after it, and the first BEGIN without one is unfinished.
  std::optional<std::size_t> unfinished_private_key(std::string_view buffer,
                                                    bool builtins_possible = true) const {
    const BuiltinPatterns* builtin = builtins_possible ? engine->builtins_for(buffer) : nullptr;
    if (builtin == nullptr) return std::nullopt;
    std::size_t pos = 0;
    for (;;) {
      re2::StringPiece begin;
      if (!builtin->pem_begin->Match(re2::StringPiece(buffer.data(), buffer.size()), pos,
                                     buffer.size(), RE2::UNANCHORED, &begin, 1)) {
        return std::nullopt;
      }
      const std::size_t begin_at = static_cast<std::size_t>(begin.data() - buffer.data());
      re2::StringPiece end;
      if (!builtin->pem_end->Match(re2::StringPiece(buffer.data(), buffer.size()),
                                   begin_at + begin.size(), buffer.size(), RE2::UNANCHORED, &end,
                                   1)) {
        return begin_at;
      }
      pos = static_cast<std::size_t>(end.data() - buffer.data()) + end.size();
    }
  }

  std::string drain_private_key() {
    std::vector<Range> ends;
    Engine::collect(*engine->builtins()->pem_end, 0, carry, ends);
    if (ends.empty()) {
      // Keep just enough to recognise an END line split across chunks.
      if (carry.size() > 128) drop(carry.size() - 128);
      return {};
    }
    drop(ends.front().end);
    in_private_key = false;
    return process();
  }

  std::string process() {
    if (in_private_key) return drain_private_key();
    const std::string_view buffer = carry;
    // One pass decides for all three uses below: most chunks hold nothing
    // any built-in pattern (the pending prefix included) could match.
    const BuiltinPatterns* builtin = engine->builtins_for_prefix(buffer);
    const Matches found = engine->find(buffer, builtin != nullptr, run_before_carry);
    const std::vector<Range>& ranges = found.redact;

    // Tokens after the last whitespace may still grow into a secret.
    std::size_t cut = 0;
    for (std::size_t i = buffer.size(); i > 0; --i) {
      if (std::isspace(static_cast<unsigned char>(buffer[i - 1]))) {
        cut = i;
        break;
      }
    }
    const std::size_t holdback = engine->max_literal_length > 0
                                     ? std::min(engine->max_literal_length - 1, buffer.size())
                                     : 0;
    cut = std::min(cut, buffer.size() - holdback);
    if (builtin != nullptr) {
      re2::StringPiece match;
      if (builtin->pending_prefix->Match(re2::StringPiece(buffer.data(), buffer.size()), 0,
                                         buffer.size(), RE2::UNANCHORED, &match, 1)) {
        cut = std::min(cut, static_cast<std::size_t>(match.data() - buffer.data()));
      }
    }
    const auto pem_start = unfinished_private_key(buffer, builtin != nullptr);
    if (pem_start) cut = std::min(cut, *pem_start);
    // A match that reaches the cut waits, whole, with what follows it: cut
    // inside it, its rest would no longer be recognised; ending at the cut,
    // a match starting right there is one redaction with it in the whole
    // text (touching ranges merge: one marker, not two; found by the fuzzer).
    for (const Range& span : found.spans) {
      if (span.begin < cut && span.end >= cut) {
        cut = span.begin;
        break;
      }
    }

    if (buffer.size() - cut > kMaxCarry) {
      if (pem_start) {
        // An oversized private key: replace it and drop input up to its END.
        bool changed = false;
        std::string out = Engine::apply(buffer, ranges, *pem_start, &changed);
        out += kReplacement;
        redacted = true;
        drop(*pem_start);
        in_private_key = true;
        return out + drain_private_key();
      }
      // A single token longer than the carry limit: emit all but the
      // literal holdback, redacting a match that straddles the cut entirely.
      cut = buffer.size() - holdback;
      for (const Range& r : ranges) {
        if (r.begin < cut && r.end > cut) cut = r.end;
      }
    }
    bool changed = false;
    std::string out = Engine::apply(buffer, ranges, cut, &changed);
    redacted = redacted || changed;
    drop(cut);
    return out;
  }
};

SecretScrubber::Stream::Stream(std::unique_ptr<State> state) : state_(std::move(state)) {}
SecretScrubber::Stream::~Stream() = default;
SecretScrubber::Stream::Stream(Stream&&) noexcept = default;
SecretScrubber::Stream& SecretScrubber::Stream::operator=(Stream&&) noexcept = default;

std::string SecretScrubber::Stream::feed(std::string_view chunk) {
  state_->carry.append(chunk);
  // Cheap path: nothing can be emitted before a whitespace arrives unless the
  // carry grew large, so skip rescanning for whitespace-free chunks.
  const bool has_space = std::any_of(chunk.begin(), chunk.end(), [](char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
  });
  if (!has_space && state_->carry.size() <= kMaxCarry && !state_->in_private_key) return {};
  return state_->process();
}

std::string SecretScrubber::Stream::finish() {
  if (state_->in_private_key) {
    state_->carry.clear();
    return {};
  }
  bool changed = false;
  const auto found = state_->engine->find(state_->carry, true, state_->run_before_carry);
  std::string out = Engine::apply(state_->carry, found.redact, state_->carry.size(), &changed);
  state_->redacted = state_->redacted || changed;
  state_->carry.clear();
  state_->run_before_carry = 0;
  return out;
}

bool SecretScrubber::Stream::redacted() const {
  return state_->redacted;
}

SecretScrubber::Stream SecretScrubber::stream() const {
  auto state = std::make_unique<Stream::State>();
  state->engine = engine_;
  return Stream(std::move(state));
}

}  // namespace pulsebox
