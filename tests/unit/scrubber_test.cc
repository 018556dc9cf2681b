#include <gtest/gtest.h>

#include <re2/re2.h>

#include <memory>
#include <random>

#include "core/byte_names.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "secrets/builtin_patterns.h"

namespace pulsebox {
namespace {

constexpr std::string_view kR = SecretScrubber::kReplacement;

std::string r() {
  return std::string(kR);
}

TEST(ScrubberTest, RegisteredValueCaseInsensitive) {
  SecretScrubber scrubber({"Hunter2Secret"});
  EXPECT_EQ(scrubber.redact("pw is hunter2secret!"), "pw is " + r() + "!");
  EXPECT_EQ(scrubber.redact("HUNTER2SECRET"), r());
  const auto result = scrubber.scrub("nothing here");
  EXPECT_FALSE(result.changed);
  EXPECT_EQ(result.text, "nothing here");
  EXPECT_TRUE(scrubber.scrub("x Hunter2Secret").changed);
}

TEST(ScrubberTest, RegisteringTheSameValueTwiceKeepsOne) {
  SecretScrubber scrubber({"repeat-me-1"});
  scrubber.add_secret("repeat-me-1");
  EXPECT_EQ(scrubber.secret_count(), 1u);
  scrubber.add_secret("another-one");
  EXPECT_EQ(scrubber.secret_count(), 2u);
}

TEST(ScrubberTest, ShortValuesAreIgnored) {
  SecretScrubber scrubber({"abc"}, false);
  EXPECT_EQ(scrubber.secret_count(), 0u);
  EXPECT_EQ(scrubber.redact("abc abc"), "abc abc");
}

// A value read from a file often ends in a newline, which the command can
// leave off (`printf %s $TOKEN`): an attack wrote the bare value into a file
// and printed it, and neither was found. The value without its surrounding
// white space is a form of it too, as long as that is not too short.
TEST(ScrubberTest, AValueIsFoundWithoutItsSurroundingWhiteSpace) {
  SecretScrubber scrubber({"S3cr3tVaLuE42\n", "  xy\t"}, false);
  EXPECT_EQ(scrubber.redact("out: S3cr3tVaLuE42."), "out: " + r() + ".");
  EXPECT_EQ(scrubber.redact("S3cr3tVaLuE42\nnext"), r() + "next");  // the whole value first
  EXPECT_TRUE(scrubber.contains_secret("key=S3cr3tVaLuE42"));
  EXPECT_EQ(scrubber.redact("a xy b"), "a xy b");  // "xy" alone is too short to look for
}

// Megabytes of values made the alternation too large for RE2, and the
// scrubber aborted the process (12 values of 120 KB through `pulsebox run
// --secret`). Values past the limit are refused as input, and the scrubber
// keeps what it had.
TEST(ScrubberTest, ValuesPastTheLimitAreRefusedAndTheScrubberKeepsWhatItHad) {
  const std::string half(SecretScrubber::kMaxSecretBytes / 2, 'k');
  SecretScrubber scrubber({"first-value-1", "first-value-2"}, false);
  try {
    scrubber.add_secret(std::string(SecretScrubber::kMaxSecretBytes - 20, 'm'));
    ADD_FAILURE() << "no refusal";
  } catch (const SandboxConfigError& error) {
    EXPECT_EQ(error.stage(), "secret");
    EXPECT_NE(std::string(error.what()).find(std::to_string(SecretScrubber::kMaxSecretBytes)),
              std::string::npos)
        << error.what();
  }
  EXPECT_EQ(scrubber.secret_count(), 2u);
  EXPECT_EQ(scrubber.redact("a first-value-1 b"), "a " + r() + " b");
  scrubber.add_secret("second-value-2");  // room for it still
  EXPECT_EQ(scrubber.redact("second-value-2"), r());
  EXPECT_THROW(SecretScrubber({half, half + "x"}), SandboxConfigError);  // the sum counts
  // Several at once: all of them or none.
  EXPECT_THROW(
      scrubber.add_secrets({"third-value-3", std::string(SecretScrubber::kMaxSecretBytes, 'n')}),
      SandboxConfigError);
  EXPECT_EQ(scrubber.redact("third-value-3"), "third-value-3");
  // A value given twice is one value, as add_secret counts it: a remote
  // run's client once refused what its server had accepted.
  const std::string over_half(SecretScrubber::kMaxSecretBytes / 2 + 1, 'o');
  EXPECT_EQ(SecretScrubber({over_half, over_half}, false).secret_count(), 1u);
}

TEST(ScrubberTest, EncodedForms) {
  SecretScrubber scrubber({"p@ss w/rd\"x"}, false);
  // URL-encoded (both space styles, either hex case).
  EXPECT_EQ(scrubber.redact("u=p%40ss%20w%2Frd%22x&"), "u=" + r() + "&");
  EXPECT_EQ(scrubber.redact("u=p%40ss+w%2frd%22x"), "u=" + r());
  // JSON-escaped.
  EXPECT_EQ(scrubber.redact(R"({"v":"p@ss w/rd\"x"})"), R"({"v":")" + r() + R"("})");
  EXPECT_EQ(scrubber.redact(R"({"v":"p@ss w\/rd\"x"})"), R"({"v":")" + r() + R"("})");
}

TEST(ScrubberTest, Base64AtEveryAlignment) {
  SecretScrubber scrubber({"correct-horse-battery"}, false);
  // base64("correct-horse-battery"), and the same value inside larger blobs
  // where it starts at byte offsets 1 and 2 of a 3-byte group.
  EXPECT_NE(scrubber.redact("Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5"), "Y29ycmVjdC1ob3JzZS1iYXR0ZXJ5");
  EXPECT_TRUE(scrubber.scrub("eGNvcnJlY3QtaG9yc2UtYmF0dGVyeQ==").changed);  // "x" + secret
  EXPECT_TRUE(scrubber.scrub("eHljb3JyZWN0LWhvcnNlLWJhdHRlcnk=").changed);  // "xy" + secret
  EXPECT_TRUE(scrubber.contains_secret("eHljb3JyZWN0LWhvcnNlLWJhdHRlcnk="));
  EXPECT_FALSE(scrubber.scrub("aGVsbG8gd29ybGQ=").changed);  // "hello world"
}

TEST(ScrubberTest, LongestFormWins) {
  SecretScrubber scrubber({"abcd", "abcdefgh"}, false);
  EXPECT_EQ(scrubber.redact("xabcdefghx"), "x" + r() + "x");
}

TEST(ScrubberTest, BuiltInPatterns) {
  SecretScrubber scrubber;
  EXPECT_EQ(scrubber.redact("api_key=abc123def"), "api_key=" + r());
  EXPECT_EQ(scrubber.redact("PASSWORD: \"hunter22\""), "PASSWORD: \"" + r() + "\"");
  EXPECT_EQ(scrubber.redact("export GITHUB_TOKEN='tok_123'"), "export GITHUB_TOKEN='" + r() + "'");
  EXPECT_EQ(scrubber.redact("Authorization: Bearer abc.def-ghi"), "Authorization: Bearer " + r());
  EXPECT_EQ(scrubber.redact("key AIzaSyA1234567890abcdefghijklmnopqrstuv end"),
            "key " + r() + " end");
  EXPECT_EQ(scrubber.redact("sk-abcdefghijklmnopqrstuvwx"), r());
  EXPECT_EQ(scrubber.redact("ghp_abcdefghijklmnopqrstuvwxyz0123456789"), r());
  EXPECT_EQ(scrubber.redact("xoxb-1234567890-abcdef"), r());
  EXPECT_EQ(scrubber.redact("AKIAIOSFODNN7EXAMPLE"), r());
  EXPECT_EQ(scrubber.redact("t=eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig_nature-1 ok"),
            "t=" + r() + " ok");
  const std::string pem =
      "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\nabcdef==\n-----END RSA PRIVATE KEY-----";
  EXPECT_EQ(scrubber.redact("before\n" + pem + "\nafter"), "before\n" + r() + "\nafter");
  // Ordinary text is left alone.
  for (const char* plain : {"tokens = 5", "the password field", "sk-short", "AKIA lower",
                            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"}) {
    EXPECT_EQ(scrubber.redact(plain), plain);
  }
}

// `env` in a sandbox prints PWD= and OLDPWD=: paths, not passwords.
TEST(ScrubberTest, WorkingDirectoryVariablesAreNotPasswords) {
  SecretScrubber scrubber;
  for (const char* plain : {"PWD=/workspace", "OLDPWD=/tmp", "pwd: /home/sandbox/x",
                            "PWD='/workspace/a b'", "HOME=/home/sandbox\nPWD=/workspace\n"}) {
    EXPECT_EQ(scrubber.redact(plain), plain);
  }
  EXPECT_EQ(scrubber.redact("MYSQL_PWD=hunter22"), "MYSQL_PWD=" + r());
  EXPECT_EQ(scrubber.redact("Uid=me;Pwd=myPass123;"), "Uid=me;Pwd=" + r() + ";");
  EXPECT_EQ(scrubber.redact("PWD=/workspace MYSQL_PWD=hunter22"),
            "PWD=/workspace MYSQL_PWD=" + r());
}

TEST(ScrubberTest, PatternsCanBeDisabled) {
  SecretScrubber scrubber({}, false);
  EXPECT_EQ(scrubber.redact("password=abc123"), "password=abc123");
}

TEST(ScrubberTest, ContainsSecretChecksRegisteredValuesOnly) {
  SecretScrubber scrubber({"my-deploy-key"});
  EXPECT_TRUE(scrubber.contains_secret("xx MY-DEPLOY-KEY"));
  EXPECT_TRUE(scrubber.contains_secret("{\"k\":\"my-deploy-key\"}"));
  EXPECT_FALSE(scrubber.contains_secret("password=foo"));
  EXPECT_FALSE(SecretScrubber().contains_secret("anything"));
}

TEST(ScrubberTest, BinaryInputIsSafe) {
  SecretScrubber scrubber({"s3cr3t-value"});
  std::string binary("\x00\xff\xfe", 3);
  binary += "s3cr3t-value";
  binary += std::string("\x80\x00", 2);
  const std::string out = scrubber.redact(binary);
  EXPECT_EQ(out, std::string("\x00\xff\xfe", 3) + r() + std::string("\x80\x00", 2));
}

TEST(ScrubberTest, AdversarialInputIsHandled) {
  // Inputs that make backtracking engines explode; RE2 is linear.
  SecretScrubber scrubber({"aaaaaaaaaaaaaaaaaaaab"});
  const std::string many_a(1 << 20, 'a');
  EXPECT_EQ(scrubber.redact(many_a), many_a);
  std::string assignments;
  for (int i = 0; i < 50000; ++i)
    assignments += "password=";
  EXPECT_TRUE(scrubber.scrub(assignments + "x").changed);
}

std::string stream_through(const SecretScrubber& scrubber, const std::vector<std::string>& chunks) {
  auto stream = scrubber.stream();
  std::string out;
  for (const auto& chunk : chunks)
    out += stream.feed(chunk);
  out += stream.finish();
  return out;
}

// Every split point of the input into two chunks gives the same output as
// scrubbing it whole.
// The prefilter may say "maybe" freely, but never "no" to a text a built-in
// pattern matches: random texts made of the patterns' own pieces and near
// misses, checked against every pattern itself.
// The prefilters may say "maybe" freely, but never "no" to a text a
// built-in pattern matches: random texts made of the patterns' own pieces
// and near misses, checked against every pattern itself.
TEST(ScrubberTest, ThePrefiltersNeverMissABuiltInPattern) {
  RE2::Options latin1;
  latin1.set_encoding(RE2::Options::EncodingLatin1);
  latin1.set_log_errors(false);
  using Role = BuiltinPatternSource::Role;
  std::vector<std::pair<Role, std::unique_ptr<RE2>>> patterns;
  for (const auto& source : builtin_pattern_sources()) {
    if (source.role == Role::PemEnd) continue;  // only looked for after a PemBegin
    patterns.emplace_back(source.role, std::make_unique<RE2>(source.regex, latin1));
    ASSERT_TRUE(patterns.back().second->ok()) << source.regex;
  }
  const std::vector<std::string> pieces = {" ",
                                           "=",
                                           ":",
                                           "\"",
                                           "'",
                                           "\n",
                                           "\t",
                                           ".",
                                           "_",
                                           "-",
                                           "é",
                                           "\xff",
                                           "-----BEGIN",
                                           "-----BEGI",
                                           "RSA PRIVATE KEY-----",
                                           "-----END",
                                           " PRIVATE KEY-----",
                                           "AIza",
                                           "AIz",
                                           "sk-",
                                           "sk",
                                           "gh",
                                           "ghp_",
                                           "gho",
                                           "GHS_",
                                           "xox",
                                           "xoxb-",
                                           "eyJ",
                                           "eyJhbGci",
                                           "AKIA",
                                           "AKI",
                                           "ASIA",
                                           "api",
                                           "ap",
                                           "API_KEY",
                                           "Api-Key",
                                           "Secret",
                                           "secr",
                                           "PassWord",
                                           "pas",
                                           "passwd",
                                           "pwd",
                                           "PWD",
                                           "token",
                                           "tok",
                                           "TOKEN",
                                           "Bearer",
                                           "BEARER",
                                           "beare",
                                           "client",
                                           "refresh",
                                           "auth",
                                           "abcdefghijklmnopqrstuvwxyz0123456789",
                                           "ABCDEFGHIJKLMNOP",
                                           "1234"};
  std::mt19937 random(20261130);
  int redacting = 0;
  int any = 0;
  for (int round = 0; round < 30000; ++round) {
    std::string text;
    const int count = 1 + static_cast<int>(random() % 10);
    for (int i = 0; i < count; ++i)
      text += pieces[random() % pieces.size()];
    bool redact = false;
    bool other = false;
    for (const auto& [role, pattern] : patterns) {
      if (!RE2::PartialMatch(text, *pattern)) continue;
      (role == Role::Redact || role == Role::PemBegin ? redact : other) = true;
    }
    if (redact) {
      ++redacting;
      EXPECT_TRUE(may_match_builtin_pattern(text)) << "missed: " << text;
    }
    if (redact || other) {
      ++any;
      EXPECT_TRUE(may_hold_builtin_secret(text)) << "missed: " << text;
    }
  }
  EXPECT_GT(redacting, 1000) << "the pieces should often make a match";
  EXPECT_GT(any, redacting) << "and sometimes only a pending prefix";

  // pulsebox's own audit details need no pattern at all.
  for (const char* clean : {"sandbox-init native allow backend native initialized",
                            "secrets strongly_enforced", "a token bucket", ""}) {
    EXPECT_FALSE(may_match_builtin_pattern(clean)) << clean;
  }
  EXPECT_TRUE(may_hold_builtin_secret("secrets strongly_enforced"));
  for (const char* secret : {"PASSWORD=x", "api_key: 'x'", "Authorization: Bearer abcd",
                             "-----BEGIN OPENSSH PRIVATE KEY-----", "client_secret\t= x"}) {
    EXPECT_TRUE(may_match_builtin_pattern(secret)) << secret;
  }
}

// `text` cut into lines of `width` characters, each ended by `end`.
std::string wrapped_lines(const std::string& text, std::size_t width, const std::string& end) {
  std::string out;
  for (std::size_t pos = 0; pos < text.size(); pos += width)
    out += text.substr(pos, width) + end;
  return out;
}

// base64(1) and openssl wrap their output (76 and 64 columns): the base64
// of a long value, such as a key file's, spans lines, and a shorter one
// inside a larger blob can straddle a line's end. Found either way, and by
// the stream however the lines arrive.
TEST(ScrubberTest, Base64SplitAcrossLinesIsFound) {
  const std::string value =
      "{\"type\": \"service_account\", \"private_key_id\": \"3f1c9e0b7a\", "
      "\"client_email\": \"ci@example.iam\"}";
  SecretScrubber scrubber({value, "correct-horse-battery"}, false);
  // base64 of the value alone, of "xy" + the value, and of a blob in which
  // "correct-horse-battery" straddles the first line's end at 76 columns.
  const std::string alone = core::to_base64(value);
  const std::string shifted = core::to_base64("xy" + value);
  const std::string blob = core::to_base64(std::string(50, '.') + "correct-horse-battery" + "tail");
  ASSERT_GT(alone.size(), 76u);
  for (const std::string& encoded : {alone, shifted, blob}) {
    for (const auto& [width, end] :
         {std::pair<std::size_t, std::string>{76, "\n"}, {64, "\r\n"}, {20, "\n"}}) {
      const std::string text = "key:\n" + wrapped_lines(encoded, width, end) + "done\n";
      const SecretScrubber::Redaction result = scrubber.scrub(text);
      EXPECT_TRUE(result.changed) << width << ": " << text;
      EXPECT_TRUE(scrubber.contains_secret(text)) << width;
      EXPECT_EQ(result.text.rfind("key:\n", 0), 0u);
      EXPECT_NE(result.text.find("done\n"), std::string::npos);
      // However the text arrives: the stream once cut a line's run short
      // and then no longer joined it to the next line.
      for (std::size_t chunk = 1; chunk <= 40; ++chunk) {
        std::vector<std::string> chunks;
        for (std::size_t pos = 0; pos < text.size(); pos += chunk)
          chunks.push_back(text.substr(pos, chunk));
        ASSERT_EQ(stream_through(scrubber, chunks), result.text) << width << ", " << chunk;
      }
    }
  }
  // With a short value alone the stream holds back little: the run it keeps
  // of a line must still be long enough to be joined to the next line.
  const SecretScrubber short_only({"correct-horse-battery"}, false);
  for (std::size_t lead = 40; lead <= 60; ++lead) {
    const std::string text = wrapped_lines(
        core::to_base64(std::string(lead, '.') + "correct-horse-battery" + "tail"), 64, "\n");
    const std::string expected = short_only.redact(text);
    ASSERT_NE(expected, text) << lead;
    for (std::size_t chunk = 1; chunk <= 40; ++chunk) {
      std::vector<std::string> chunks;
      for (std::size_t pos = 0; pos < text.size(); pos += chunk)
        chunks.push_back(text.substr(pos, chunk));
      ASSERT_EQ(stream_through(short_only, chunks), expected) << lead << ", " << chunk;
    }
  }
  // Line ends alone are not a value: ordinary wrapped base64 is left as it is.
  // Nor are runs too short to be an encoder's lines (ordinary prose).
  EXPECT_FALSE(scrubber.scrub(wrapped_lines(alone, 8, "\n")).changed);
  const std::string other = wrapped_lines(core::to_base64(std::string(200, 'q')), 76, "\n");
  EXPECT_FALSE(scrubber.scrub(other).changed);
}

// A large value holds back more than the stream's 64 KiB carry limit, so
// the stream cuts inside a line's run whatever it would keep: a line end
// must still join that run as in the whole text (an attack: the small
// value leaked at 8 of 81 such cuts).
TEST(ScrubberStreamTest, ALargeValuesHoldbackStillJoinsWrappedLines) {
  std::string large;
  for (std::size_t i = 0; i < 50000; ++i)
    large += static_cast<char>('a' + (i * 7919) % 26);
  const SecretScrubber both({"correct-horse-battery-staple", large}, false);
  const std::string blob = std::string(57 * 1500 + 51, 'A') + "correct-horse-battery-staple" +
                           std::string(57 * 1500, 'B');
  const std::string long_text = wrapped_lines(core::to_base64(blob), 76, "\n");
  const std::string long_expected = both.redact(long_text);
  const std::size_t form = long_text.find("Y29ycmVj");
  ASSERT_NE(form, std::string::npos);
  ASSERT_EQ(long_expected.find("Y29ycmVj"), std::string::npos);
  const std::size_t holdback = 50000 * 4 / 3 * 9 / 8;  // the large value's base64 form, wrapped
  for (std::size_t first = form + holdback - 60; first <= form + holdback + 60; first += 3) {
    auto stream = both.stream();
    std::string out = stream.feed(std::string_view(long_text).substr(0, first));
    out += stream.feed(std::string_view(long_text).substr(first));
    out += stream.finish();
    ASSERT_EQ(out == long_expected, true) << "first chunk of " << first;
  }
}

TEST(ScrubberStreamTest, SecretSplitAcrossTwoChunksAtEveryPosition) {
  SecretScrubber scrubber({"split-me-secret"});
  const std::string input =
      "line one\nthe value split-me-secret appears; password = hunter22 and "
      "ghp_abcdefghijklmnopqrstuvwxyz0123456789 too\n-----BEGIN PRIVATE KEY-----\nAAAA\n"
      "-----END PRIVATE KEY-----\nBearer abcdef123 done";
  const std::string expected = scrubber.redact(input);
  ASSERT_EQ(expected.find("split-me-secret"), std::string::npos);
  ASSERT_EQ(expected.find("hunter22"), std::string::npos);
  for (std::size_t cut = 0; cut <= input.size(); ++cut) {
    EXPECT_EQ(stream_through(scrubber, {input.substr(0, cut), input.substr(cut)}), expected)
        << "split at " << cut;
  }
}

// Random chunkings (seeded, so failures reproduce) give the whole-text result.
TEST(ScrubberStreamTest, RandomChunkingsMatchWholeText) {
  SecretScrubber scrubber({"rotating-key-42", "xyzzy-plugh"});
  const std::string input =
      "a rotating-key-42 b\ntoken: t0k3n_value c xyzzy-plugh\td Bearer zzzzyyyy e "
      "sk-abcdefghijklmnopqrstuvwx f\n-----BEGIN EC PRIVATE KEY-----\nBBBB\n"
      "-----END EC PRIVATE KEY-----\nAKIAIOSFODNN7EXAMPLE end";
  const std::string expected = scrubber.redact(input);
  std::mt19937 random(12345);
  for (int round = 0; round < 300; ++round) {
    std::vector<std::string> chunks;
    for (std::size_t pos = 0; pos < input.size();) {
      const std::size_t length = 1 + random() % 24;
      chunks.push_back(input.substr(pos, length));
      pos += length;
    }
    ASSERT_EQ(stream_through(scrubber, chunks), expected) << "round " << round;
  }
}

// Found by the fuzzer: an unterminated BEGIN followed by a complete key. The
// whole-text pattern redacts from the first BEGIN to the END; so must the stream.
TEST(ScrubberStreamTest, UnterminatedBeginBeforeACompleteKey) {
  SecretScrubber scrubber;
  const std::string input =
      "a -----BEGIN PRIVATE KEY-----\nAAA\n-----END PR x\nmiddle text\n"
      "-----BEGIN PRIVATE KEY-----\nBBB\n-----END PRIVATE KEY-----\nz";
  const std::string expected = scrubber.redact(input);
  ASSERT_EQ(expected, "a " + r() + "\nz");
  for (std::size_t cut = 0; cut <= input.size(); ++cut) {
    EXPECT_EQ(stream_through(scrubber, {input.substr(0, cut), input.substr(cut)}), expected)
        << "split at " << cut;
  }
}

// Found by the fuzzer: a registered value right before a private key block
// is one redaction with it in the whole text; the stream must not emit the
// value's marker before it knows the block follows.
TEST(ScrubberStreamTest, AMatchTouchingALaterOneWaitsForIt) {
  SecretScrubber scrubber({"zq9xw7"});
  const std::string input =
      "p\x9f\x83sword = zq9xw7-----BEGIN PRIVATE KEY-----\nAAA\n-----END PRIVATE KEY-----\n";
  const std::string expected = scrubber.redact(input);
  EXPECT_EQ(expected, "p\x9f\x83sword = " + r() + "\n");
  for (std::size_t chunk = 1; chunk <= 40; ++chunk) {
    std::vector<std::string> chunks;
    for (std::size_t pos = 0; pos < input.size(); pos += chunk)
      chunks.push_back(input.substr(pos, chunk));
    EXPECT_EQ(stream_through(scrubber, chunks), expected) << "chunks of " << chunk;
  }
}

TEST(ScrubberStreamTest, ByteByByte) {
  SecretScrubber scrubber({"tiny-secret-1"});
  const std::string input = "a tiny-secret-1 b token=abcdef c";
  std::vector<std::string> chunks;
  for (char c : input)
    chunks.emplace_back(1, c);
  EXPECT_EQ(stream_through(scrubber, chunks), scrubber.redact(input));
}

TEST(ScrubberStreamTest, EmitsEarlyWhenSafe) {
  SecretScrubber scrubber;
  auto stream = scrubber.stream();
  EXPECT_EQ(stream.feed("hello world\n"), "hello world\n");
  EXPECT_EQ(stream.feed("partial"), "");  // might become "partial-secret..." later
  EXPECT_EQ(stream.finish(), "partial");
  EXPECT_FALSE(stream.redacted());
}

TEST(ScrubberStreamTest, OversizedPrivateKeyIsDroppedUntilItsEnd) {
  SecretScrubber scrubber;
  auto stream = scrubber.stream();
  std::string out = stream.feed("start\n-----BEGIN PRIVATE KEY-----\n");
  const std::string body_line(64, 'Q');
  for (int i = 0; i < 2000; ++i)
    out += stream.feed(body_line + "\n");  // 130 KiB
  out += stream.feed("-----END PRIVATE KEY-----\nafter\n");
  out += stream.finish();
  EXPECT_EQ(out.find("QQQQ"), std::string::npos);
  EXPECT_NE(out.find(r()), std::string::npos);
  EXPECT_EQ(out.rfind("start\n", 0), 0u);
  EXPECT_NE(out.find("after\n"), std::string::npos);
  EXPECT_TRUE(stream.redacted());
}

TEST(ScrubberStreamTest, LongTokenWithoutWhitespaceIsFlushed) {
  SecretScrubber scrubber;
  auto stream = scrubber.stream();
  const std::string token(100 * 1024, 'z');
  const std::string out = stream.feed(token);
  EXPECT_GT(out.size(), 0u);  // the carry is bounded
  EXPECT_EQ(out + stream.finish(), token);
}

TEST(EnvironmentTest, MinimalByDefault) {
  const std::map<std::string, std::string> host = {
      {"AWS_SECRET_ACCESS_KEY", "x"}, {"PATH", "/host/bin"}, {"LD_PRELOAD", "evil.so"}};
  const auto env = build_sandbox_environment({}, host);
  EXPECT_EQ(env.count("AWS_SECRET_ACCESS_KEY"), 0u);
  EXPECT_EQ(env.at("HOME"), "/home/sandbox");
  EXPECT_EQ(env.at("TMPDIR"), "/tmp");
  EXPECT_NE(env.at("PATH"), "/host/bin");
  EXPECT_EQ(env.count("LD_PRELOAD"), 0u);
}

TEST(EnvironmentTest, InheritedDangerousVariablesAreDroppedExplicitOnesPass) {
  const std::map<std::string, std::string> host = {{"API_TOKEN", "t"},
                                                   {"OTHER", "o"},
                                                   {"LD_PRELOAD", "evil.so"},
                                                   {"PYTHONPATH", "/evil"},
                                                   {"BASH_FUNC_x%%", "() { :; }"}};
  const auto explicit_env = build_sandbox_environment(
      {SecretMode::AllowExplicit, {"API_TOKEN", "LD_PRELOAD", "MISSING"}}, host,
      {{"EXTRA", "1"}, {"NODE_OPTIONS", "--max-old-space-size=64"}, {"GIT_AUTHOR_NAME", "bot"}});
  EXPECT_EQ(explicit_env.at("API_TOKEN"), "t");
  EXPECT_EQ(explicit_env.count("OTHER"), 0u);
  EXPECT_EQ(explicit_env.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(explicit_env.count("PYTHONPATH"), 0u);
  EXPECT_EQ(explicit_env.count("MISSING"), 0u);
  EXPECT_EQ(explicit_env.at("EXTRA"), "1");
  // Typed by the caller (--env): the caller's choice.
  EXPECT_EQ(explicit_env.at("NODE_OPTIONS"), "--max-old-space-size=64");
  EXPECT_EQ(explicit_env.at("GIT_AUTHOR_NAME"), "bot");
  EXPECT_EQ(explicit_env.at("GIT_OPTIONAL_LOCKS"), "0");
  const auto all =
      build_sandbox_environment({SecretMode::AllowAll, {}}, host, {{"PYTHONPATH", "src"}});
  EXPECT_EQ(all.at("OTHER"), "o");
  EXPECT_EQ(all.at("PYTHONPATH"), "src");
  EXPECT_EQ(all.count("LD_PRELOAD"), 0u);
  EXPECT_EQ(all.count("BASH_FUNC_x%%"), 0u);
}

}  // namespace
}  // namespace pulsebox
