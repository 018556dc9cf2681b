// The audit log must show when someone who can write it rewrote it. The
// attack that broke it: the chain was an unkeyed SHA-256 chain, so anyone
// able to write the file could edit a record, truncate the log or replace
// it with another, recompute every hash, and `pulsebox audit verify` said
// OK (an empty file too). Now each record carries an HMAC under a key kept
// outside the workspace, and an anchor beside the key holds the tip, so
// verify detects edits, recomputed chains, truncation, substitution and
// deletion. Also: verify reads hostile files with bounds (/dev/zero, a FIFO,
// a huge line, deep nesting). Runs as root and as an ordinary user.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "core/sha256.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"
#include "pulsebox/sandbox.h"

namespace pulsebox {
namespace {

using testing::read_lines;
using testing::TempDir;
using testing::write_lines;
namespace fs = std::filesystem;

// An attacker's rewrite of one line: a new prev, the body's hash recomputed
// with SHA-256 (no key needed); the MAC, if any, kept, or dropped with the
// key id (the line then looks unkeyed).
std::string rechain(const std::string& line, const std::string& prev, bool keep_mac,
                    std::string* hash_out) {
  const auto at = line.rfind(",\"hash\":\"");
  std::string body = line.substr(0, at);
  const auto prev_at = body.rfind(",\"prev\":\"");
  body = body.substr(0, prev_at);
  const auto key_id_at = body.rfind(",\"key_id\":\"");
  if (!keep_mac && key_id_at != std::string::npos) body = body.substr(0, key_id_at);
  body += ",\"prev\":\"" + prev + "\"";
  const std::string hash = core::sha256_hex(prev + body);
  *hash_out = hash;
  std::string suffix = ",\"hash\":\"" + hash + "\"";
  const auto mac_at = line.rfind(",\"mac\":\"");
  if (keep_mac && mac_at != std::string::npos && mac_at > at) {
    suffix += line.substr(mac_at, line.size() - 1 - mac_at);
  }
  return body + suffix + "}";
}

// Every line rechained from the first: what an attacker writes after
// editing any line of an unkeyed log.
std::vector<std::string> rechain_all(std::vector<std::string> lines, bool keep_mac) {
  std::string prev(64, '0');
  for (auto& line : lines) {
    std::string hash;
    line = rechain(line, prev, keep_mac, &hash);
    prev = hash;
  }
  return lines;
}

class AuditChainTest : public ::testing::Test {
 protected:
  void SetUp() override {
    binary_ = std::getenv("PULSEBOX_BIN") != nullptr ? std::getenv("PULSEBOX_BIN") : "";
    ASSERT_FALSE(binary_.empty()) << "PULSEBOX_BIN is set by meson";
    auto backend = make_native_backend(NativeBackendOptions{.state_dir = state_.path()});
    native_ = backend->availability().available;
    testing::write_file(workspace_ / "a.txt", "original\n");
  }

  fs::path log() const { return workspace_ / ".agent/logs/audit.jsonl"; }
  fs::path key() const { return keys_ / "audit.key"; }

  // The key and its anchors in a private temp dir, never a home directory.
  std::vector<std::string> env(const fs::path& key_file = {}) const {
    return {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1", "PULSEBOX_SERVER=off",
            "PULSEBOX_AUDIT_KEY=" + (key_file.empty() ? key() : key_file).string()};
  }
  // No key named, and no home to keep one in.
  std::vector<std::string> homeless_env() const {
    return {"PULSEBOX_STATE_DIR=" + state_.path().string(),
            "NO_COLOR=1",
            "PULSEBOX_SERVER=off",
            "PULSEBOX_AUDIT_KEY=",
            "XDG_STATE_HOME=",
            "HOME=/nonexistent"};
  }

  testing::CliRun run_sandbox(const fs::path& workspace, const std::vector<std::string>& env,
                              const std::string& command = "true") {
    std::vector<std::string> args = {"run", "-w", workspace.string(), "--allow-weaker", "limits"};
    if (!native_) args.insert(args.end(), {"--backend", "host", "--unsafe-host"});
    args.insert(args.end(), {"--", "sh", "-c", command});
    return testing::run_cli(args, "", env);
  }
  // Two runs: a log of a couple of dozen records, keyed.
  void two_runs() {
    for (const char* command : {"echo one > b.txt", "echo two > c.txt"}) {
      const auto run = run_sandbox(workspace_.path(), env(), command);
      ASSERT_EQ(run.exit_code, 0) << run.err;
    }
    lines_ = read_lines(log());
    ASSERT_GT(lines_.size(), 6u);
  }

  testing::CliRun verify(const fs::path& file, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"audit", "verify", file.string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_cli(args, "", env());
  }
  // verify must fail with exit 1 and name `fragment` (e.g. "line 3").
  void expect_tampered(const std::vector<std::string>& fragments) {
    const auto result = verify(log());
    EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
    for (const auto& fragment : fragments) {
      EXPECT_NE(result.out.find(fragment), std::string::npos)
          << "no \"" << fragment << "\" in: " << result.out << result.err;
    }
  }

  TempDir workspace_;
  TempDir state_;
  TempDir keys_;
  TempDir scratch_;
  std::string binary_;
  bool native_ = false;
  std::vector<std::string> lines_;
};

TEST_F(AuditChainTest, AnIntactKeyedLogVerifiesAndSaysWhatThatProves) {
  two_runs();
  const auto result = verify(log());
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_NE(result.out.find("VERIFIED"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("keyed chain of " + std::to_string(lines_.size()) + " records"),
            std::string::npos)
      << result.out;
  EXPECT_NE(result.out.find("matches its anchor"), std::string::npos) << result.out;
  // Each record carries its MAC; the key is a private file outside the workspace.
  EXPECT_NE(lines_.front().find(",\"mac\":\""), std::string::npos) << lines_.front();
  struct stat st {};
  ASSERT_EQ(::lstat(key().c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  const auto verify = testing::run_cli({"audit", "verify", "--json", log().string()}, "", env());
  const auto parsed = nlohmann::json::parse(verify.out);
  EXPECT_EQ(parsed["verdict"], "verified") << verify.out;
  EXPECT_EQ(parsed["mode"], "keyed") << verify.out;
  EXPECT_EQ(parsed["anchor"], "matched") << verify.out;
}

TEST_F(AuditChainTest, AnEditedRecordWithRecomputedHashesIsDetected) {
  two_runs();
  auto lines = lines_;
  const auto at = lines[2].find("\"decision\":\"");
  ASSERT_NE(at, std::string::npos);
  lines[2].insert(at + 12, "forged-");
  write_lines(log(), rechain_all(lines, /*keep_mac=*/true));
  expect_tampered({"TAMPERED", "line 3", "MAC"});
}

TEST_F(AuditChainTest, AChainRecomputedWithoutMacsIsDetected) {
  // The attacker drops every MAC and recomputes the unkeyed chain: a log
  // that looks unkeyed, but its anchor says otherwise.
  two_runs();
  auto lines = lines_;
  const auto at = lines[2].find("\"decision\":\"");
  lines[2].insert(at + 12, "forged-");
  write_lines(log(), rechain_all(lines, /*keep_mac=*/false));
  expect_tampered({"TAMPERED", "line 1", "anchor"});
}

TEST_F(AuditChainTest, TruncationIsDetected) {
  two_runs();
  auto lines = lines_;
  lines.resize(lines.size() - 2);
  write_lines(log(), lines);
  expect_tampered(
      {"TAMPERED", "2 records removed from the end", "line " + std::to_string(lines.size())});
}

TEST_F(AuditChainTest, ASubstitutedLogIsDetected) {
  two_runs();
  // Another workspace's log, genuinely keyed with the same key.
  TempDir other;
  testing::write_file(other / "x.txt", "x\n");
  ASSERT_EQ(run_sandbox(other.path(), env()).exit_code, 0);
  fs::copy_file(other / ".agent/logs/audit.jsonl", log(), fs::copy_options::overwrite_existing);
  expect_tampered({"TAMPERED", "anchor"});
  // And an entirely fabricated one, hashes recomputed.
  write_lines(log(), rechain_all({lines_[0], lines_[1]}, false));
  expect_tampered({"TAMPERED", "anchor"});
}

TEST_F(AuditChainTest, AnAppendedRecordWithoutTheKeyIsDetected) {
  two_runs();
  auto lines = lines_;
  std::string last_hash = nlohmann::json::parse(lines.back())["hash"];
  auto forged = lines.back();
  const auto seq_end = forged.find(',');
  forged = "{\"seq\":" + std::to_string(lines.size() + 1) + forged.substr(seq_end);
  std::string hash;
  lines.push_back(rechain(forged, last_hash, false, &hash));
  write_lines(log(), lines);
  expect_tampered({"TAMPERED", "line " + std::to_string(lines.size())});
}

TEST_F(AuditChainTest, AnEmptiedOrDeletedLogIsDetected) {
  two_runs();
  write_lines(log(), {});
  expect_tampered({"TAMPERED", std::to_string(lines_.size()) + " records"});
  fs::remove(log());
  const auto result = verify(log());
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find("deleted"), std::string::npos) << result.out << result.err;
}

TEST_F(AuditChainTest, AnEmptyFileIsNotOk) {
  const fs::path empty = scratch_ / "empty.jsonl";
  testing::write_file(empty, "");
  const auto result = verify(empty);
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.out.find("no records"), std::string::npos) << result.out;
  // The verdict after the path, never the word of a verified log. (This
  // looked for "OK" anywhere, which a temporary directory's random name
  // held once in CI: /tmp/pulsebox-test-uHiOKH.)
  EXPECT_EQ(result.out.rfind(empty.string() + ": NOTHING TO VERIFY: ", 0), 0u) << result.out;
  EXPECT_EQ(result.out.find("VERIFIED"), std::string::npos) << result.out;
}

TEST_F(AuditChainTest, AnotherKeyIsNamedAsSuch) {
  two_runs();
  TempDir other_keys;
  testing::write_file(other_keys / "other.key", std::string(32, 'k'));
  ::chmod((other_keys / "other.key").c_str(), 0600);
  const auto result = verify(log(), {"--key", (other_keys / "other.key").string()});
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find("line 1"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("another key"), std::string::npos) << result.out;
}

TEST_F(AuditChainTest, AKeyedLogIsNotExtendedWithoutItsKey) {
  two_runs();
  const auto run = run_sandbox(workspace_.path(), homeless_env());
  EXPECT_EQ(run.exit_code, 125) << run.err;
  EXPECT_NE(run.err.find("keyed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("PULSEBOX_AUDIT_KEY"), std::string::npos) << run.err;
  EXPECT_EQ(read_lines(log()), lines_);
  EXPECT_EQ(verify(log()).exit_code, 0);
}

TEST_F(AuditChainTest, WithoutAPlaceForTheKeyTheLogIsUnkeyedAndSaysSo) {
  const auto run = run_sandbox(workspace_.path(), homeless_env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("warning: the audit log is not keyed"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("PULSEBOX_AUDIT_KEY"), std::string::npos) << run.err;
  const auto result = testing::run_cli({"audit", "verify", log().string()}, "", homeless_env());
  EXPECT_EQ(result.exit_code, 2) << result.out << result.err;
  EXPECT_NE(result.out.find("unkeyed"), std::string::npos) << result.out;
  EXPECT_NE(result.out.find("could have rewritten it"), std::string::npos) << result.out;
  // With a key, the log goes on keyed; the unkeyed lines before are pinned
  // from then on, and the report says so.
  const std::size_t unkeyed = read_lines(log()).size();
  ASSERT_EQ(run_sandbox(workspace_.path(), env()).exit_code, 0);
  const auto keyed = verify(log());
  EXPECT_EQ(keyed.exit_code, 0) << keyed.out << keyed.err;
  EXPECT_NE(keyed.out.find("lines 1-" + std::to_string(unkeyed) + " are unkeyed"),
            std::string::npos)
      << keyed.out;
}

// Sets or unsets variables of this process for its lifetime: the server
// helper adds to this process's environment, and must not inherit a key or
// a home from it.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::vector<std::pair<std::string, const char*>>& values) {
    for (const auto& [name, value] : values) {
      const char* old = std::getenv(name.c_str());
      saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
      if (value == nullptr) {
        ::unsetenv(name.c_str());
      } else {
        ::setenv(name.c_str(), value, 1);
      }
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }

 private:
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST_F(AuditChainTest, ARunThroughTheServerIsKeyedWithTheClientsKey) {
  PULSEBOX_SKIP_UNLESS(native_, "the local server runs native sandboxes only");
  // The server has no key and no home; its client names one.
  testing::LocalServer server;
  {
    const ScopedEnvironment homeless(
        {{"PULSEBOX_AUDIT_KEY", nullptr}, {"XDG_STATE_HOME", nullptr}, {"HOME", "/nonexistent"}});
    ASSERT_EQ(server.start(binary_, {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1"},
                           state_ / "server.sock", scratch_ / "server.log"),
              "");
  }
  const auto run =
      run_sandbox(workspace_.path(), {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1",
                                      "PULSEBOX_AUDIT_KEY=" + key().string()});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err.find("not keyed"), std::string::npos) << run.err;
  EXPECT_EQ(server.served_runs(), 1) << server.log();
  const auto result = verify(log());
  EXPECT_EQ(result.exit_code, 0) << result.out << result.err;
  EXPECT_EQ(server.stop(), 0) << server.log();
}

TEST_F(AuditChainTest, AnUnsafeKeyFileIsRefused) {
  struct Case {
    std::string name;
    std::function<void(const fs::path&)> make;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"symlink",
       [](const fs::path& key) {
         testing::write_file(key.string() + ".real", std::string(32, 'r'));
         ::chmod((key.string() + ".real").c_str(), 0600);
         fs::create_symlink(key.string() + ".real", key);
       },
       "symbolic link"},
      {"group-readable",
       [](const fs::path& key) {
         testing::write_file(key, std::string(32, 'r'));
         ::chmod(key.c_str(), 0640);
       },
       "chmod 600"},
      {"not a key",
       [](const fs::path& key) {
         testing::write_file(key, "short");
         ::chmod(key.c_str(), 0600);
       },
       "not 32"},
      {"a directory", [](const fs::path& key) { fs::create_directories(key); },
       "not a regular file"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    TempDir keys;
    const fs::path key = keys / "audit.key";
    c.make(key);
    TempDir workspace;
    const auto run = run_sandbox(workspace.path(), env(key));
    EXPECT_EQ(run.exit_code, 125) << run.err;
    EXPECT_NE(run.err.find(key.string()), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(c.expected), std::string::npos) << run.err;
  }
  // A directory others can write: they could replace the key.
  TempDir open_dir;
  ::chmod(open_dir.path().c_str(), 0777);
  const auto run = run_sandbox(workspace_.path(), env(open_dir / "audit.key"));
  EXPECT_EQ(run.exit_code, 125) << run.err;
  EXPECT_NE(run.err.find("writable by others"), std::string::npos) << run.err;
}

// `pulsebox audit verify` with a bound on everything it reads. Run with an
// alarm and an address-space limit, so that a verifier that reads forever
// fails the test instead of hanging it or exhausting the machine's memory.
testing::CliRun verify_bounded(const std::string& binary, const std::string& file,
                               const std::vector<std::string>& env) {
  int out[2], err[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) return {};
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    const rlimit memory{1ull << 30, 1ull << 30};
    ::setrlimit(RLIMIT_AS, &memory);
    ::alarm(20);
    for (const auto& entry : env)
      ::putenv(const_cast<char*>(entry.c_str()));
    ::execl(binary.c_str(), binary.c_str(), "audit", "verify", file.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(out[1]);
  ::close(err[1]);
  auto drain = [](int fd) {
    std::string text;
    char buffer[4096];
    ssize_t n;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0)
      text.append(buffer, static_cast<std::size_t>(n));
    ::close(fd);
    return text;
  };
  testing::CliRun run;
  run.out = drain(out[0]);
  run.err = drain(err[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return run;
}

TEST_F(AuditChainTest, VerifyRefusesWhatIsNotARegularFile) {
  const fs::path fifo = scratch_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& file : {std::string("/dev/zero"), fifo.string()}) {
    SCOPED_TRACE(file);
    const auto result = verify_bounded(binary_, file, env());
    EXPECT_EQ(result.exit_code, 125) << result.out << result.err;
    EXPECT_NE(result.err.find("not a regular file"), std::string::npos) << result.err;
  }
}

TEST_F(AuditChainTest, VerifyBoundsLinesAndNesting) {
  const fs::path huge = scratch_ / "huge.jsonl";
  testing::write_file(huge, "{\"seq\":1,\"x\":\"" + std::string(3u << 20, 'a') + "\"}\n");
  auto result = verify_bounded(binary_, huge.string(), env());
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find("line 1: longer than 1 MiB"), std::string::npos) << result.out;

  const fs::path deep = scratch_ / "deep.jsonl";
  testing::write_file(deep, std::string(100000, '[') + std::string(100000, ']') + "\n");
  result = verify_bounded(binary_, deep.string(), env());
  EXPECT_EQ(result.exit_code, 1) << result.out << result.err;
  EXPECT_NE(result.out.find("line 1: not a valid audit entry"), std::string::npos) << result.out;
}

}  // namespace
}  // namespace pulsebox
