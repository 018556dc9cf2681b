// The secret scrubber's built-in patterns, and the literal prefilter that
// spares most text from them. Internal: the scrubber uses both; the unit
// tests check the one against the other.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pulsebox {

struct BuiltinPatternSource {
  enum class Role {
    Redact,         // a secret: redact the match, or capture `group`
    PendingPrefix,  // streaming: a secret that may continue in the next chunk
    PemBegin,       // streaming: where a private key block starts
    PemEnd,         // streaming: where it ends
  };
  std::string regex;  // RE2 syntax, matched byte-wise (Latin-1)
  int group = 0;
  Role role = Role::Redact;
};

std::vector<BuiltinPatternSource> builtin_pattern_sources();

// False only if no redacting built-in pattern (nor PemBegin) can match
// anywhere in `text`: then they need not run, nor, in a fresh process, be
// compiled. Most text is like that, pulsebox's own audit details included.
bool may_match_builtin_pattern(std::string_view text);

// The same for every pattern but PemEnd, the pending prefix included (a
// keyword at the end of a stream's buffer, whose value may still come).
bool may_hold_builtin_secret(std::string_view text);

}  // namespace pulsebox
