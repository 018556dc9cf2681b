// Secrets: which host variables a sandbox may see, and scrubbing of output.
//
// Usage:
//   pulsebox::SecretScrubber scrubber({"hunter2-token"});
//   std::string safe = scrubber.redact(output);             // whole text
//   auto stream = scrubber.stream();                        // chunked output
//   write(stream.feed(chunk1)); write(stream.feed(chunk2)); write(stream.finish());
//
// What is redacted (each match becomes "[REDACTED_SECRET]"):
//  - registered values of at least 4 bytes, case-insensitively, and their
//    URL-encoded, JSON-escaped and base64 forms (base64 at all three byte
//    alignments, so the value is found inside a larger encoded blob, and
//    across the line ends of base64 wrapped over lines, as base64(1) and
//    openssl print it); the same for a value without its surrounding white
//    space (a trailing newline), when that leaves at least 4 bytes;
//  - built-in patterns: PEM private keys; `api_key|secret|password|token = value`
//    and `Bearer value` (only the value is replaced); Google `AIza...`; `sk-...`;
//    GitHub `gh[pousr]_...`; Slack `xox?-...`; JWTs; AWS access key ids.
// Matching uses RE2 (linear time in the input, no backtracking), so there is
// no timeout and output is never replaced wholesale.
//
// The stream emits text as soon as no secret could still straddle it, and
// keeps back the rest (a secret split across two chunks is still redacted).
// A PEM private key is held until its END line; if it grows past 64 KiB it is
// replaced and everything up to its END line is dropped.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"

namespace pulsebox {

enum class SecretMode { DenyAll, AllowExplicit, AllowAll };

PULSEBOX_API std::string_view to_string(SecretMode mode);

struct SecretPolicy {
  SecretMode mode = SecretMode::DenyAll;
  // For AllowExplicit: host variable names passed into the sandbox.
  std::vector<std::string> explicit_env;
};

// The sandbox's environment: PATH, HOME=/workspace, TMPDIR=/tmp, LANG=C.UTF-8,
// plus the host variables the policy lets through, plus `extra` (--env).
// Inherited variables that change how programs load code (LD_PRELOAD, LD_*,
// PYTHONPATH, BASH_ENV, NODE_OPTIONS, GIT_SSH_COMMAND, ...) are dropped;
// `extra` is the caller's explicit choice and passes as given.
PULSEBOX_API std::map<std::string, std::string> build_sandbox_environment(
    const SecretPolicy& policy, const std::map<std::string, std::string>& host_environment,
    const std::map<std::string, std::string>& extra = {});
PULSEBOX_API bool is_dangerous_environment_variable(std::string_view name);

class PULSEBOX_API SecretScrubber {
 public:
  static constexpr std::string_view kReplacement = "[REDACTED_SECRET]";
  static constexpr std::size_t kMinSecretLength = 4;
  // The most bytes the registered values may hold in all: the forms of
  // each are looked for in everything the sandbox writes.
  static constexpr std::size_t kMaxSecretBytes = 256 * 1024;

  explicit SecretScrubber(const std::vector<std::string>& secrets = {},
                          bool builtin_patterns = true);
  ~SecretScrubber();
  SecretScrubber(const SecretScrubber&);
  SecretScrubber& operator=(const SecretScrubber&);
  SecretScrubber(SecretScrubber&&) noexcept;
  SecretScrubber& operator=(SecretScrubber&&) noexcept;

  // Registers a value (ignored when shorter than kMinSecretLength).
  // Throws SandboxConfigError (stage "secret") when the registered values
  // would hold more than kMaxSecretBytes, and the scrubber stays as it
  // was; the constructor throws the same.
  void add_secret(std::string_view value);
  // The same for several at once (one rebuild, where one at a time costs a
  // rebuild each); all of them or, when refused, none.
  void add_secrets(const std::vector<std::string>& values);
  // Whether all of `value` is found: at least kMinSecretLength bytes
  // without its surrounding white space (else it, or what the command can
  // print of it, goes unscrubbed).
  static bool scrubbable(std::string_view value);
  std::size_t secret_count() const;

  struct Redaction {
    std::string text;
    bool changed = false;
  };
  Redaction scrub(std::string_view text) const;
  std::string redact(std::string_view text) const { return scrub(text).text; }
  // True if a registered value (in any form) occurs in `text`; patterns are
  // not consulted (a file that merely contains "password=" is not a secret).
  bool contains_secret(std::string_view text) const;
  // A keyed digest (HMAC-SHA256 under `key`, lower-case hex) of each
  // registered value, exactly as given (a case variant is another value:
  // its base64 forms differ): a record can say which values were
  // registered without holding them.
  std::vector<std::string> fingerprints(std::string_view key) const;

  class PULSEBOX_API Stream {
   public:
    ~Stream();
    Stream(Stream&&) noexcept;
    Stream& operator=(Stream&&) noexcept;
    // Returns the redacted text that is now safe to emit (may be empty).
    std::string feed(std::string_view chunk);
    // Emits everything still held back.
    std::string finish();
    // True once anything has been redacted.
    bool redacted() const;

   private:
    friend class SecretScrubber;
    struct State;
    explicit Stream(std::unique_ptr<State> state);
    std::unique_ptr<State> state_;
  };
  Stream stream() const;

  struct Engine;

 private:
  void rebuild();
  std::vector<std::string> secrets_;
  bool builtin_patterns_;
  std::shared_ptr<const Engine> engine_;
};

}  // namespace pulsebox
