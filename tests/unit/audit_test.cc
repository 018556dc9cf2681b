#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "audit/anchor.h"
#include "audit/chain.h"
#include "audit/key.h"
#include "core/sha256.h"
#include "helpers/test_support.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"
#include "pulsebox/lifecycle.h"
#include "pulsebox/secrets.h"

namespace pulsebox {
namespace {

using testing::read_lines;
using testing::TempDir;
using testing::write_lines;

void write_entries(const std::filesystem::path& path, int count) {
  AuditLog log(path);
  for (int i = 0; i < count; ++i) {
    log.record({.action = "shell", .target = "cmd " + std::to_string(i), .decision = "allow"});
  }
}

TEST(AuditLogTest, LineHasReferenceFieldsAndChain) {
  TempDir dir;
  const auto path = dir / "logs/audit.jsonl";  // parent created on demand
  SecretScrubber scrubber({"sup3rs3cret"});
  AuditLog log(path, &scrubber);
  EXPECT_EQ(log.record({.action = "shell",
                        .target = "echo sup3rs3cret",
                        .decision = "allow",
                        .exit_code = 0,
                        .duration_ms = 12.5,
                        .container_id = "native",
                        .isolation_level = "native",
                        .detail = "ran\nFAKE LINE\x1b[31m"}),
            1u);
  EXPECT_EQ(log.record({.action = "read", .target = "a.txt", .decision = "allow"}), 2u);
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  const auto first = nlohmann::json::parse(lines[0]);
  for (const char* field :
       {"timestamp", "action", "target", "decision", "exit_code", "duration_ms", "container_id",
        "isolation_level", "redacted", "detail", "seq", "pid", "prev", "hash"}) {
    EXPECT_TRUE(first.contains(field)) << field;
  }
  EXPECT_EQ(first["target"], "echo [REDACTED_SECRET]");
  EXPECT_EQ(first["redacted"], true);
  EXPECT_EQ(first["detail"], "ranFAKE LINE[31m");  // control characters stripped
  EXPECT_EQ(first["exit_code"], 0);
  EXPECT_EQ(first["prev"], std::string(64, '0'));
  EXPECT_EQ(first["pid"], ::getpid());
  const auto second = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(second["seq"], 2);
  EXPECT_EQ(second["prev"], first["hash"]);
  EXPECT_EQ(second["redacted"], false);
  EXPECT_TRUE(second["exit_code"].is_null());
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
}

TEST(AuditLogTest, NetworkDecisionFields) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl");
  log.log_network("example.org", 443, "tcp", "deny", "native", "strongly_enforced", "not allowed");
  const auto entry = nlohmann::json::parse(read_lines(dir / "a.jsonl").at(0));
  EXPECT_EQ(entry["action"], "network");
  EXPECT_EQ(entry["destination"], "example.org");
  EXPECT_EQ(entry["port"], 443);
  EXPECT_EQ(entry["protocol"], "tcp");
  EXPECT_EQ(entry["enforcement_level"], "strongly_enforced");
}

TEST(AuditLogTest, ContinuesChainAcrossReopen) {
  TempDir dir;
  write_entries(dir / "a.jsonl", 3);
  write_entries(dir / "a.jsonl", 2);
  const auto check = verify_audit_log(dir / "a.jsonl");
  EXPECT_TRUE(check.ok) << check.problem;
  EXPECT_EQ(check.entries, 5u);
}

TEST(AuditLogTest, SeveralProcessesShareOneLog) {
  TempDir dir;
  const auto path = dir / "shared.jsonl";
  constexpr int kProcesses = 4;
  constexpr int kEntriesEach = 100;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        write_entries(path, kEntriesEach);
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), static_cast<std::size_t>(kProcesses * kEntriesEach));
  std::set<int> pids;
  for (const auto& line : lines)
    pids.insert(nlohmann::json::parse(line)["pid"].get<int>());
  EXPECT_EQ(pids.size(), static_cast<std::size_t>(kProcesses));
  const auto check = verify_audit_log(path);
  EXPECT_TRUE(check.ok) << "line " << check.line << ": " << check.problem;
}

// Each log remembers the tip it appended; another writer's append (same
// file, another open) must be noticed, good or bad.
TEST(AuditLogTest, AnotherWritersAppendIsNoticed) {
  TempDir dir;
  const auto path = dir / "a.jsonl";
  AuditLog first(path);
  AuditLog second(path);
  EXPECT_EQ(first.record({.action = "a"}), 1u);
  EXPECT_EQ(second.record({.action = "b"}), 2u);
  EXPECT_EQ(first.record({.action = "c"}), 3u);
  EXPECT_EQ(first.record({.action = "d"}), 4u);
  EXPECT_EQ(second.record({.action = "e"}), 5u);
  const auto check = verify_audit_log(path);
  EXPECT_TRUE(check.ok) << "line " << check.line << ": " << check.problem;
  EXPECT_EQ(check.entries, 5u);

  std::ofstream(path, std::ios::app) << "not an audit entry\n";
  EXPECT_THROW(first.record({.action = "f"}), SandboxRecoveryError);
}

// A new AuditLog on a log this process appended to (a server makes one per
// request) continues the chain from what it remembers; a file changed since,
// even to the same size, is read again.
TEST(AuditLogTest, ALaterLogOfThisProcessContinuesItsChain) {
  TempDir dir;
  const auto path = dir / "a.jsonl";
  for (int i = 0; i < 3; ++i) {
    AuditLog log(path);
    EXPECT_EQ(log.record({.action = "run"}), static_cast<std::uint64_t>(2 * i + 1));
    EXPECT_EQ(log.record({.action = "run"}), static_cast<std::uint64_t>(2 * i + 2));
  }
  EXPECT_TRUE(verify_audit_log(path).ok);
  // The same size, other bytes: the last line's hash replaced by another
  // of the same length. A tip read from the file continues from that hash;
  // a remembered one would continue from the old.
  auto lines = read_lines(path);
  const std::string old_hash = nlohmann::json::parse(lines.back())["hash"];
  std::string other_hash = old_hash;
  other_hash[0] = other_hash[0] == 'a' ? 'b' : 'a';
  lines.back().replace(lines.back().find(old_hash), old_hash.size(), other_hash);
  write_lines(path, lines);
  AuditLog later(path);
  later.record({.action = "next"});
  const auto last = nlohmann::json::parse(read_lines(path).back());
  EXPECT_EQ(last["seq"], 7);
  EXPECT_EQ(last["prev"], other_hash);
  const auto check = verify_audit_log(path);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 6u) << check.problem;  // the edited line, not the new one
}

TEST(AuditLogTest, FsyncOptionWorks) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl", nullptr, {.fsync = true});
  log.record({.action = "x"});
  EXPECT_TRUE(verify_audit_log(dir / "a.jsonl").ok);
}

TEST(AuditLogTest, RefusesToExtendAMangledLog) {
  TempDir dir;
  write_lines(dir / "a.jsonl", {"not json at all"});
  AuditLog log(dir / "a.jsonl");
  EXPECT_THROW(log.record({.action = "x"}), SandboxRecoveryError);
}

class AuditTamperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    write_entries(path_, 6);
    lines_ = read_lines(path_);
  }
  AuditVerification verify_with(const std::vector<std::string>& lines) {
    write_lines(path_, lines);
    return verify_audit_log(path_);
  }
  TempDir dir_;
  std::filesystem::path path_ = dir_ / "audit.jsonl";
  std::vector<std::string> lines_;
};

TEST_F(AuditTamperTest, IntactLogVerifies) {
  const auto check = verify_audit_log(path_);
  EXPECT_TRUE(check.ok);
  EXPECT_EQ(check.entries, 6u);
}

TEST_F(AuditTamperTest, EditedLine) {
  auto lines = lines_;
  const auto at = lines[3].find("cmd 3");
  lines[3].replace(at, 5, "cmd X");
  const auto check = verify_with(lines);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 4u);
  EXPECT_NE(check.problem.find("edited"), std::string::npos) << check.problem;
}

TEST_F(AuditTamperTest, RemovedLine) {
  auto lines = lines_;
  lines.erase(lines.begin() + 2);
  const auto check = verify_with(lines);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 3u);
  EXPECT_NE(check.problem.find("1 line removed"), std::string::npos) << check.problem;
}

TEST_F(AuditTamperTest, RemovedFirstLines) {
  auto lines = lines_;
  lines.erase(lines.begin(), lines.begin() + 2);
  const auto check = verify_with(lines);
  EXPECT_EQ(check.line, 1u);
  EXPECT_NE(check.problem.find("2 lines removed"), std::string::npos) << check.problem;
}

TEST_F(AuditTamperTest, InsertedCopy) {
  auto lines = lines_;
  lines.insert(lines.begin() + 4, lines[1]);
  const auto check = verify_with(lines);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 5u);
  EXPECT_NE(check.problem.find("inserted"), std::string::npos) << check.problem;
}

TEST_F(AuditTamperTest, Reordered) {
  auto lines = lines_;
  std::swap(lines[2], lines[3]);
  const auto check = verify_with(lines);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 3u);
  EXPECT_NE(check.problem.find("reordered"), std::string::npos) << check.problem;
}

TEST_F(AuditTamperTest, ForgedLineWithRecomputedOwnHashBreaksTheChain) {
  // An attacker rewrites line 2 and fixes its own hash but not line 3's prev.
  auto lines = lines_;
  auto forged = nlohmann::ordered_json::parse(lines[1]);
  forged["prev"] = std::string(64, 'f');
  lines[1] = forged.dump();
  const auto check = verify_with(lines);
  EXPECT_FALSE(check.ok);
  EXPECT_EQ(check.line, 2u);
}

// HMAC-SHA256 from its definition (RFC 2104) over the plain SHA-256, to
// check the keyed MAC is that.
std::string hmac_by_definition(const std::string& key, const std::string& message) {
  auto raw = [](const std::string& hex) {
    std::string out;
    for (std::size_t i = 0; i < hex.size(); i += 2)
      out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
    return out;
  };
  std::string inner(64, '\x36'), outer(64, '\x5c');
  for (std::size_t i = 0; i < key.size(); ++i) {
    inner[i] = static_cast<char>(inner[i] ^ key[i]);
    outer[i] = static_cast<char>(outer[i] ^ key[i]);
  }
  return core::sha256_hex(outer + raw(core::sha256_hex(inner + message)));
}

TEST(AuditKeyTest, MacIsHmacSha256) {
  const std::string bytes = "0123456789abcdef0123456789abcdef";
  auto key = audit::Key::from_bytes(bytes, "test.key");
  ASSERT_TRUE(key.ok()) << key.error().to_string();
  EXPECT_EQ((*key)->mac("prev-", "body"), hmac_by_definition(bytes, "prev-body"));
  EXPECT_EQ((*key)->mac("", ""), hmac_by_definition(bytes, ""));
  EXPECT_EQ((*key)->id().size(), 16u);
  EXPECT_EQ((*key)->id().find(core::sha256_hex(bytes).substr(0, 16)), std::string::npos);
}

// RFC 4231's test cases 1, 2 and 6 (a key longer than the block is hashed
// first).
TEST(AuditKeyTest, HmacSha256MatchesRfc4231) {
  EXPECT_EQ(core::HmacSha256(std::string(20, '\x0b')).hex_mac("Hi There"),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
  EXPECT_EQ(core::HmacSha256("Jefe").hex_mac("what do ya want ", "for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(core::HmacSha256(std::string(131, '\xaa'))
                .hex_mac("Test Using Larger Than Block-Size Key - Hash Key First"),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

TEST(AuditKeyTest, IsMadeOncePrivateAndReused) {
  TempDir dir;
  const auto file = dir / "state/pulsebox/audit.key";
  auto first = audit::Key::load(file, /*create=*/true);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  struct stat st {};
  ASSERT_EQ(::lstat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_EQ(st.st_size, 32);
  ASSERT_EQ(::stat((dir / "state/pulsebox").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  auto second = audit::Key::load(file, /*create=*/false);
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ((*first)->id(), (*second)->id());
  EXPECT_FALSE(audit::Key::load(dir / "absent.key", /*create=*/false).ok());
}

TEST(AuditKeyTest, LocationFollowsTheEnvironment) {
  TempDir dir;
  auto from = [](std::map<std::string, std::string> env) {
    return audit::key_location([env](const char* name) -> const char* {
      const auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  const auto chosen = from({{"PULSEBOX_AUDIT_KEY", "/k/a.key"}, {"HOME", dir.path()}});
  EXPECT_EQ(chosen.file, "/k/a.key");
  EXPECT_TRUE(chosen.chosen);
  const auto state = from({{"XDG_STATE_HOME", dir.path()}, {"HOME", "/nonexistent"}});
  EXPECT_EQ(state.file, dir / "pulsebox/audit.key");
  EXPECT_FALSE(state.chosen);
  const auto home = from({{"HOME", dir.path()}, {"XDG_STATE_HOME", "relative"}});
  EXPECT_EQ(home.file, dir / ".local/state/pulsebox/audit.key");
  const auto homeless = from({{"HOME", "/nonexistent"}});
  EXPECT_TRUE(homeless.file.empty());
  EXPECT_NE(homeless.unavailable.find("HOME /nonexistent is not a directory"), std::string::npos)
      << homeless.unavailable;
  EXPECT_TRUE(from({}).file.empty());
}

class KeyedAuditTest : public ::testing::Test {
 protected:
  AuditLog::Options keyed() const { return {.key = {.file = key_, .chosen = true}}; }
  void write(int count, const std::string& prefix = "cmd ") {
    AuditLog log(path_, nullptr, keyed());
    ASSERT_TRUE(log.keyed());
    for (int i = 0; i < count; ++i)
      log.record({.action = "shell", .target = prefix + std::to_string(i), .decision = "allow"});
  }
  AuditVerification verify() const { return verify_audit_log(path_, {.key_file = key_}); }
  std::filesystem::path anchor() const {
    auto key = audit::Key::load(key_, false);
    return audit::anchor_path(**key, audit::log_identity(path_));
  }

  TempDir dir_;
  std::filesystem::path path_ = dir_ / "ws/.agent/logs/audit.jsonl";
  std::filesystem::path key_ = dir_ / "keys/audit.key";
};

TEST_F(KeyedAuditTest, AKeyedLogVerifiesWithItsKeyAndAnchorOnly) {
  write(3);
  write(2);
  auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.summary;
  EXPECT_EQ(check.entries, 5u);
  EXPECT_EQ(check.keyed_from, 1u);
  EXPECT_EQ(check.anchor, AuditAnchorState::Matched);
  EXPECT_TRUE(check.notes.empty());
  const auto line = nlohmann::json::parse(read_lines(path_).at(0));
  EXPECT_EQ(line["key_id"].get<std::string>().size(), 16u);
  EXPECT_EQ(line["mac"].get<std::string>().size(), 64u);
  // Without the key: consistent, nothing more.
  check = verify_audit_log(path_);
  EXPECT_EQ(check.verdict, AuditVerdict::Unproven);
  EXPECT_TRUE(check.ok);
  EXPECT_FALSE(check.macs_checked);
  // Without the anchor: no record edited, but truncation would not show.
  std::filesystem::remove(anchor());
  check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Unproven);
  EXPECT_EQ(check.anchor, AuditAnchorState::Missing);
  EXPECT_NE(check.summary.find("no anchor"), std::string::npos) << check.summary;
}

TEST_F(KeyedAuditTest, SeveralProcessesShareOneKeyedLogAndMakeOneKey) {
  constexpr int kProcesses = 4;
  constexpr int kEntriesEach = 50;
  std::vector<pid_t> children;
  for (int p = 0; p < kProcesses; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      try {
        AuditLog log(path_, nullptr, keyed());
        for (int i = 0; i < kEntriesEach; ++i)
          log.record({.action = "shell", .target = std::to_string(i)});
      } catch (...) {
        ::_exit(1);
      }
      ::_exit(0);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  const auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified)
      << "line " << check.line << ": " << check.problem;
  EXPECT_EQ(check.entries, static_cast<std::uint64_t>(kProcesses * kEntriesEach));
  std::set<std::string> key_ids;
  for (const auto& line : read_lines(path_))
    key_ids.insert(nlohmann::json::parse(line)["key_id"].get<std::string>());
  EXPECT_EQ(key_ids.size(), 1u);
}

TEST_F(KeyedAuditTest, AnUnkeyedLogTurnsKeyedAndSaysSo) {
  {
    AuditLog log(path_);
    for (int i = 0; i < 3; ++i)
      log.record({.action = "shell"});
  }
  write(2);
  const auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  EXPECT_EQ(check.keyed_from, 4u);
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("lines 1-3 are unkeyed"), std::string::npos) << check.notes[0];
  // Editing an unkeyed line now breaks the first keyed line's chain.
  auto lines = read_lines(path_);
  std::string hash;
  auto edited = nlohmann::ordered_json::parse(lines[2]);
  edited["action"] = "forged";
  edited.erase("hash");
  std::string body = edited.dump();
  body.pop_back();
  lines[2] =
      body + ",\"hash\":\"" + audit::chain_hash(edited["prev"].get<std::string>(), body) + "\"}";
  write_lines(path_, lines);
  const auto broken = verify();
  EXPECT_EQ(broken.verdict, AuditVerdict::Tampered);
  EXPECT_EQ(broken.line, 4u) << broken.problem;
}

TEST_F(KeyedAuditTest, AKeyedLogIsNotExtendedWithoutItsKeyOrWithAnother) {
  write(2);
  const auto before = testing::read_file(path_);
  {
    AuditLog unkeyed(path_, nullptr, {.key = {.unavailable = "no HOME"}});
    EXPECT_FALSE(unkeyed.keyed());
    EXPECT_EQ(unkeyed.key_warning(), "no HOME");
    EXPECT_THROW(unkeyed.record({.action = "x"}), SandboxSecurityError);
  }
  {
    AuditLog other(path_, nullptr, {.key = {.file = dir_ / "other/audit.key", .chosen = true}});
    try {
      other.record({.action = "x"});
      ADD_FAILURE() << "appended with another key";
    } catch (const SandboxSecurityError& error) {
      EXPECT_NE(std::string(error.what()).find("another key"), std::string::npos) << error.what();
    }
  }
  EXPECT_EQ(testing::read_file(path_), before);
}

TEST_F(KeyedAuditTest, AChosenKeyThatCannotBeUsedIsAnErrorADefaultOneAWarning) {
  testing::write_file(key_, "too short");
  ::chmod(key_.c_str(), 0600);
  EXPECT_THROW(AuditLog(path_, nullptr, keyed()), SandboxSecurityError);
  AuditLog fallback(path_, nullptr, {.key = {.file = key_, .chosen = false}});
  EXPECT_FALSE(fallback.keyed());
  EXPECT_NE(fallback.key_warning().find("not 32"), std::string::npos) << fallback.key_warning();
}

TEST_F(KeyedAuditTest, ATruncatedOrRewrittenLogIsNotExtended) {
  write(4);
  auto lines = read_lines(path_);
  lines.pop_back();
  write_lines(path_, lines);
  AuditLog log(path_, nullptr, keyed());
  try {
    log.record({.action = "x"});
    ADD_FAILURE() << "appended to a truncated log";
  } catch (const SandboxSecurityError& error) {
    EXPECT_NE(std::string(error.what()).find("does not match its anchor"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(read_lines(path_), lines);
  const auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Tampered);
  EXPECT_EQ(check.line, 3u);
  EXPECT_NE(check.problem.find("1 record removed from the end"), std::string::npos)
      << check.problem;
}

TEST_F(KeyedAuditTest, AMissingAnchorOrARemovedLogIsRecordedInTheLog) {
  write(3);
  std::filesystem::remove(anchor());
  // The log's ctime moves on, as after another process's append: this
  // process's remembered tip no longer counts (with it, the writer would
  // write the same anchor again, losing nothing).
  ::chmod(path_.c_str(), 0600);
  write(1);
  auto lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(nlohmann::json::parse(lines[3])["action"], "audit-anchor");
  auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("line 4: no anchor was found"), std::string::npos)
      << check.notes[0];

  std::filesystem::rename(path_, path_.string() + ".1");
  write(1);
  lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["seq"], 1);
  check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("line 1: the log at this path ended at record 5"),
            std::string::npos)
      << check.notes[0];
}

TEST_F(KeyedAuditTest, AnAnchorOneAppendBehindStillVerifies) {
  // A writer that stopped between appending and updating the anchor.
  write(2);
  const auto saved = testing::read_file(anchor());
  write(1);
  testing::write_file(anchor(), saved);
  auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("lines 3-3 come after the anchor's tip"), std::string::npos)
      << check.notes[0];
  write(1);  // and the next writer goes on from there
  check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  EXPECT_TRUE(check.notes.empty());
}

// The anchor as the log's writer left it.
audit::Anchor read_anchor(const std::filesystem::path& key_file, const std::filesystem::path& log,
                          const std::filesystem::path& anchor_file) {
  auto key = audit::Key::load(key_file, false);
  EXPECT_TRUE(key.ok());
  auto file = audit::AnchorFile::open(anchor_file, false);
  EXPECT_TRUE(file.ok());
  auto anchor = file->read(**key, audit::log_identity(log));
  EXPECT_TRUE(anchor.ok() && anchor->has_value());
  return **anchor;
}

std::vector<AuditRecord> three_records(const std::string& prefix) {
  std::vector<AuditRecord> records;
  for (int i = 0; i < 3; ++i)
    records.push_back(
        {.action = "enforcement", .target = prefix + std::to_string(i), .decision = "allow"});
  return records;
}

TEST_F(KeyedAuditTest, RecordsMadeTogetherAreOneAppendEachWithItsOwnSeqAndMac) {
  write(2);
  const audit::Anchor before = read_anchor(key_, path_, anchor());
  {
    AuditLog log(path_, nullptr, keyed());
    EXPECT_EQ(log.record_all(three_records("dim ")), 5u);
  }
  const audit::Anchor after = read_anchor(key_, path_, anchor());
  // One append: the anchor was written once, for the last of the three.
  EXPECT_EQ(after.generation, before.generation + 1);
  EXPECT_EQ(after.records, 5u);
  const auto lines = read_lines(path_);
  ASSERT_EQ(lines.size(), 5u);
  for (int i = 0; i < 3; ++i) {
    const auto line = nlohmann::json::parse(lines[static_cast<std::size_t>(2 + i)]);
    EXPECT_EQ(line["seq"], 3 + i);
    EXPECT_EQ(line["target"], "dim " + std::to_string(i));
    EXPECT_EQ(line["mac"].get<std::string>().size(), 64u);
  }
  const auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.summary;
  EXPECT_EQ(check.entries, 5u);
  EXPECT_TRUE(check.notes.empty());
}

TEST_F(KeyedAuditTest, AnAnchorBehindByAWholeAppendOfSeveralRecordsStillVerifies) {
  // A writer that stopped after appending three records together, before
  // updating the anchor.
  write(2);
  const auto saved = testing::read_file(anchor());
  {
    AuditLog log(path_, nullptr, keyed());
    log.record_all(three_records("dim "));
  }
  testing::write_file(anchor(), saved);
  auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  ASSERT_EQ(check.notes.size(), 1u);
  EXPECT_NE(check.notes[0].find("lines 3-5 come after the anchor's tip"), std::string::npos)
      << check.notes[0];
  write(1);  // the next writer checks the three and goes on from there
  check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  EXPECT_EQ(check.entries, 6u);
  EXPECT_TRUE(check.notes.empty());
}

TEST(AuditLogTest, RecordingNoRecordsTogetherAppendsNothing) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  AuditLog log(path);
  EXPECT_EQ(log.record_all({}), 0u);
  EXPECT_TRUE(read_lines(path).empty());
  EXPECT_EQ(log.record({.action = "shell", .target = "x", .decision = "allow"}), 1u);
}

TEST_F(KeyedAuditTest, ATornAnchorCopyFallsBackAndAForgedOneIsTampering) {
  write(3);
  auto bytes = testing::read_file(anchor());
  ASSERT_EQ(bytes.size(), 1024u);
  // Generation 3 is in the second copy: tear it.
  bytes.replace(600, 20, std::string(20, 'x'));
  testing::write_file(anchor(), bytes);
  auto check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Verified) << check.problem;
  bytes.replace(100, 20, std::string(20, 'x'));
  testing::write_file(anchor(), bytes);
  check = verify();
  EXPECT_EQ(check.verdict, AuditVerdict::Tampered);
  EXPECT_NE(check.problem.find("damaged or forged"), std::string::npos) << check.problem;
}

TEST_F(KeyedAuditTest, AnEditOfTheSameSizeIsNotHiddenByTheTipCache) {
  AuditLog log(path_, nullptr, keyed());
  log.record({.action = "shell", .target = "cmd 1"});
  log.record({.action = "shell", .target = "cmd 2"});
  struct stat before {};
  ASSERT_EQ(::stat(path_.c_str(), &before), 0);
  auto lines = read_lines(path_);
  lines[1].replace(lines[1].find("cmd 2"), 5, "cmd 9");
  write_lines(path_, lines);
  const timespec times[2] = {before.st_atim, before.st_mtim};  // mtime set back
  ASSERT_EQ(::utimensat(AT_FDCWD, path_.c_str(), times, 0), 0);
  EXPECT_THROW(log.record({.action = "next"}), SandboxSecurityError);
  EXPECT_EQ(read_lines(path_), lines);
}

TEST_F(KeyedAuditTest, ATipWhoseHashWasChangedIsNotExtended) {
  // The MAC covers prev and the body, not the hash field: a writer that
  // chained from a changed hash would extend a broken chain.
  write(2);
  auto lines = read_lines(path_);
  const std::string hash = nlohmann::json::parse(lines[1])["hash"];
  lines[1].replace(lines[1].find(hash), 64, std::string(64, 'e'));
  write_lines(path_, lines);
  std::filesystem::remove(anchor());  // so the tip is read from the log
  AuditLog log(path_, nullptr, keyed());
  EXPECT_THROW(log.record({.action = "x"}), SandboxSecurityError);
  EXPECT_EQ(read_lines(path_), lines);
}

TEST_F(KeyedAuditTest, VerifyingWhileAnotherProcessAppendsFindsNothingWrong) {
  write(1);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    try {
      AuditLog log(path_, nullptr, keyed());
      for (int i = 0; i < 400; ++i)
        log.record({.action = "shell", .target = std::string(3000 + i, 'x')});
    } catch (...) {
      ::_exit(1);
    }
    ::_exit(0);
  }
  int status = 0;
  int checks = 0;
  for (; checks < 2000 && ::waitpid(pid, &status, WNOHANG) == 0; ++checks) {
    const auto check = verify();
    ASSERT_NE(check.verdict, AuditVerdict::Tampered)
        << "check " << checks << ": line " << check.line << ": " << check.problem;
  }
  if (checks == 2000) {
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  }
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(verify().verdict, AuditVerdict::Verified);
}

TEST_F(KeyedAuditTest, AStrippedMacIsNamed) {
  write(2);
  auto lines = read_lines(path_);
  lines[1] = lines[1].substr(0, lines[1].rfind(",\"mac\":\"")) + "}";
  write_lines(path_, lines);
  const auto check = verify_audit_log(path_);
  EXPECT_EQ(check.verdict, AuditVerdict::Tampered);
  EXPECT_EQ(check.line, 2u);
  EXPECT_NE(check.problem.find("names a key but has no MAC"), std::string::npos) << check.problem;
}

TEST(AuditLogTest, AFieldTooLongForALineIsCutAndSaysSo) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl");
  log.record({.action = "shell", .target = std::string(3u << 20, 'a'), .detail = "d"});
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_LE(lines[0].size(), audit::kMaxLineBytes);
  const auto target = nlohmann::json::parse(lines[0])["target"].get<std::string>();
  EXPECT_NE(target.find(" bytes cut]"), std::string::npos) << target.substr(target.size() - 40);
  EXPECT_EQ(verify_audit_log(dir / "a.jsonl").verdict, AuditVerdict::Unproven);
}

// A line is the text nlohmann::ordered_json's dump gives its fields (the
// chain hashes those bytes, any JSON reader reads them): read back and
// dumped again it is the same, byte for byte, whatever its fields hold
// (quotes, tabs, stripped control characters, invalid UTF-8 in a value or a
// name, a secret, every kind of extra value, names taken twice or by the
// chain's own fields); numbers are written as nlohmann writes them.
TEST(AuditLogTest, ALineIsTheTextNlohmannWritesForItsFields) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  SecretScrubber scrubber({"sup3rs3cret"});
  AuditLog log(path, &scrubber);
  const std::string bad_utf8 = "caf\xc3 \xff\xfe \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x82";
  log.record(
      {.action = "shell",
       .target = "printf '\"a\\\\b\"\t' \x7f\x01 sup3rs3cret \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
       .decision = "allow",
       .exit_code = -3,
       .duration_ms = 12.0,
       .container_id = bad_utf8,
       .isolation_level = "native",
       .detail = "tab\there, / slash, \x1b[31m",
       .extra = {{"port", std::int64_t{-9007199254740993}},
                 {"ratio", 0.1},
                 {"huge", 1e300},
                 {"tiny", -5e-324},
                 {"whole", 3.0},
                 {"nan", std::numeric_limits<double>::quiet_NaN()},
                 {"flag", true},
                 {"off", false},
                 {"nothing", nullptr},
                 {"text", std::string("line\nbreak sup3rs3cret")},
                 {"port", std::int64_t{1}},
                 {"hash", std::string("planted")},
                 {"mac", std::string("planted")},
                 {"action", std::string("planted")},
                 {"n\xff"
                  "ame",
                  std::string("bad name")},
                 {"", std::string("empty name")},
                 {"cut_short", std::string("\xe2\x82"
                                           "A x\xe2\x82")},
                 {"negative_zero", -0.0},
                 {"infinite", std::numeric_limits<double>::infinity()}}});
  log.record({.action = "read", .target = "", .decision = "deny", .duration_ms = 0.25});
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    const auto parsed = nlohmann::ordered_json::parse(line);
    EXPECT_EQ(parsed.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict), line);
  }
  const auto first = nlohmann::ordered_json::parse(lines[0]);
  std::vector<std::string> names;
  for (const auto& [name, value] : first.items())
    names.push_back(name);
  const std::vector<std::string> expected = {"seq",
                                             "timestamp",
                                             "pid",
                                             "action",
                                             "target",
                                             "decision",
                                             "exit_code",
                                             "duration_ms",
                                             "container_id",
                                             "isolation_level",
                                             "detail",
                                             "port",
                                             "ratio",
                                             "huge",
                                             "tiny",
                                             "whole",
                                             "nan",
                                             "flag",
                                             "off",
                                             "nothing",
                                             "text",
                                             "n\xef\xbf\xbd"
                                             "ame",
                                             "",
                                             "cut_short",
                                             "negative_zero",
                                             "infinite",
                                             "redacted",
                                             "prev",
                                             "hash"};
  EXPECT_EQ(names, expected);
  EXPECT_NE(lines[0].find("\"exit_code\":-3,\"duration_ms\":12.0,"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("\"port\":-9007199254740993,\"ratio\":0.1,\"huge\":1e+300,"
                          "\"tiny\":-5e-324,\"whole\":3.0,\"nan\":null,\"flag\":true,"
                          "\"off\":false,\"nothing\":null,"),
            std::string::npos)
      << lines[0];
  EXPECT_EQ(first["target"],
            "printf '\"a\\\\b\"\t'  [REDACTED_SECRET] \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
  EXPECT_EQ(first["detail"], "tab\there, / slash, [31m");
  EXPECT_EQ(first["text"], "linebreak [REDACTED_SECRET]");
  EXPECT_EQ(first["redacted"], true);
  // nlohmann's replacement: one U+FFFD a byte of a malformed sequence,
  // one for a sequence cut short.
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(first["container_id"], "caf" + fffd + " " + fffd + fffd + " " + fffd + fffd + fffd +
                                       " " + fffd + fffd + fffd + fffd + " " + fffd);
  EXPECT_EQ(first["cut_short"], fffd + "A x" + fffd);
  EXPECT_NE(lines[0].find("\"negative_zero\":-0.0,\"infinite\":null,"), std::string::npos);
  EXPECT_NE(lines[1].find("\"target\":\"\",\"decision\":\"deny\",\"exit_code\":null,"
                          "\"duration_ms\":0.25,"),
            std::string::npos)
      << lines[1];
}

// A keyed line: the key's id after "redacted", the MAC after the hash.
TEST(AuditLogTest, AKeyedLineIsTheTextNlohmannWritesForItsFields) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  AuditLog log(path, nullptr, {.key = {.file = dir / "keys/audit.key", .chosen = true}});
  ASSERT_TRUE(log.keyed());
  log.record({.action = "shell", .target = "true", .decision = "allow", .exit_code = 0});
  log.record({.action = "read", .target = "a.txt", .decision = "allow"});
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    const auto parsed = nlohmann::ordered_json::parse(line);
    EXPECT_EQ(parsed.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::strict), line);
    std::vector<std::string> tail;
    for (const auto& [name, value] : parsed.items())
      tail.push_back(name);
    ASSERT_GE(tail.size(), 5u);
    tail.erase(tail.begin(), tail.end() - 5);
    EXPECT_EQ(tail, (std::vector<std::string>{"redacted", "key_id", "prev", "hash", "mac"}));
  }
  EXPECT_TRUE(verify_audit_log(path).ok);
}

// Two names of extra fields that differ only in bytes that are not UTF-8
// are written once: both would become the same name with U+FFFD in it, a
// line whose reader refuses the repeated name, and a log that could then
// be neither verified nor extended by another writer.
TEST(AuditLogTest, NamesThatBecomeOneNameAreWrittenOnce) {
  TempDir dir;
  const auto path = dir / "audit.jsonl";
  AuditLog(path).record({.action = "network",
                         .target = "example",
                         .decision = "allow",
                         .extra = {{"a\xff", std::string("1")}, {"a\xfe", std::string("2")}}});
  const auto lines = read_lines(path);
  ASSERT_EQ(lines.size(), 1u);
  const auto line = nlohmann::ordered_json::parse(lines[0]);
  EXPECT_EQ(line["a\xef\xbf\xbd"], "1");
  EXPECT_EQ(lines[0].find("\"2\""), std::string::npos) << lines[0];
  AuditLog(path).record({.action = "read", .target = "b.txt", .decision = "allow"});
  const auto check = verify_audit_log(path);
  EXPECT_TRUE(check.ok) << check.problem;
  EXPECT_EQ(check.entries, 2u);
}

TEST(AuditLogTest, RefusesALogThatIsNotARegularFile) {
  TempDir dir;
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(AuditLog(dir / "fifo"), SandboxConfigError);
}

TEST(AuditParseTest, BoundedAndStrict) {
  auto problem = [](const std::string& line) {
    auto entry = audit::parse_entry(line);
    return entry.ok() ? std::string() : entry.error().message();
  };
  const std::string tail = ",\"hash\":\"" + std::string(64, 'a') + "\"}";
  const std::string prev = "\"prev\":\"" + std::string(64, '0') + "\"";
  EXPECT_EQ(problem("{\"seq\":1," + prev + tail), "");
  EXPECT_NE(problem("{\"seq\":1,\"x\":" + std::string(100000, '[') + std::string(100000, ']') +
                    "," + prev + tail)
                .find("nested deeper than"),
            std::string::npos);
  EXPECT_NE(problem("{\"seq\":1,\"seq\":2," + prev + tail).find("appears twice"),
            std::string::npos);
  EXPECT_NE(problem("{\"seq\":-1," + prev + tail).find("seq"), std::string::npos);
  EXPECT_NE(problem("{\"seq\":1," + prev + "}").find("hash"), std::string::npos);
  EXPECT_NE(problem(std::string(audit::kMaxLineBytes + 1, ' ')).find("1 MiB"), std::string::npos);
  EXPECT_NE(problem("[1," + prev + tail).find("not"), std::string::npos);
}

TEST(LifecycleTest, ExactlyTheReferenceTransitions) {
  using S = LifecycleState;
  const std::vector<std::pair<S, S>> allowed = {
      {S::Created, S::Starting},         {S::Created, S::Failed},    {S::Created, S::Cleaning},
      {S::Starting, S::Running},         {S::Starting, S::Failed},   {S::Starting, S::Cleaning},
      {S::Running, S::Completing},       {S::Running, S::Stopping},  {S::Running, S::Failed},
      {S::Stopping, S::Failed},          {S::Stopping, S::Cleaning}, {S::Completing, S::Cleaning},
      {S::Completing, S::Failed},        {S::Failed, S::Cleaning},   {S::Cleaning, S::Finalized},
      {S::Cleaning, S::RecoveryRequired}};
  const S all[] = {S::Created, S::Starting, S::Running,   S::Stopping,        S::Completing,
                   S::Failed,  S::Cleaning, S::Finalized, S::RecoveryRequired};
  int count = 0;
  for (S from : all) {
    for (S to : all) {
      const bool expected =
          std::find(allowed.begin(), allowed.end(), std::make_pair(from, to)) != allowed.end();
      EXPECT_EQ(is_transition_allowed(from, to), expected)
          << to_string(from) << " -> " << to_string(to);
      count += expected ? 1 : 0;
    }
  }
  EXPECT_EQ(count, 16);
  EXPECT_TRUE(is_terminal(S::Finalized));
  EXPECT_TRUE(is_terminal(S::RecoveryRequired));
  EXPECT_FALSE(is_terminal(S::Failed));
}

TEST(LifecycleTest, EveryTransitionIsAudited) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl");
  SandboxExecution execution("exec-1", &log);
  execution.transition(LifecycleState::Starting);
  execution.transition(LifecycleState::Running);
  EXPECT_THROW(execution.transition(LifecycleState::Finalized), SandboxError);
  EXPECT_EQ(execution.state(), LifecycleState::Running);
  execution.transition(LifecycleState::Completing);
  execution.transition(LifecycleState::Cleaning);
  execution.transition(LifecycleState::Finalized);
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 6u);
  const auto refused = nlohmann::json::parse(lines[2]);
  EXPECT_EQ(refused["action"], "lifecycle-transition");
  EXPECT_EQ(refused["decision"], "deny");
  EXPECT_EQ(refused["from"], "running");
  EXPECT_EQ(refused["to"], "finalized");
  const auto last = nlohmann::json::parse(lines[5]);
  EXPECT_EQ(last["target"], "exec-1");
  EXPECT_EQ(last["detail"], "cleaning -> finalized");
  EXPECT_TRUE(verify_audit_log(dir / "a.jsonl").ok);
}

TEST(LifecycleTest, ATransitionWithABatchJoinsItAndWritesNothingYet) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl");
  SandboxExecution execution("exec-1", &log);
  std::vector<AuditRecord> batch = {{.action = "enforcement", .decision = "allow"}};
  execution.transition(LifecycleState::Starting, batch);
  EXPECT_EQ(execution.state(), LifecycleState::Starting);
  ASSERT_EQ(batch.size(), 2u);
  EXPECT_EQ(batch[1].action, "lifecycle-transition");
  EXPECT_EQ(batch[1].detail, "created -> starting");
  EXPECT_TRUE(read_lines(dir / "a.jsonl").empty());
  log.record_all(batch);
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[1])["to"], "starting");
}

TEST(LifecycleTest, ARefusedTransitionWritesItsBatchAndItsRecordThenThrows) {
  TempDir dir;
  AuditLog log(dir / "a.jsonl");
  SandboxExecution execution("exec-1", &log);
  std::vector<AuditRecord> batch = {{.action = "enforcement", .decision = "allow"}};
  EXPECT_THROW(execution.transition(LifecycleState::Finalized, batch), SandboxError);
  EXPECT_EQ(execution.state(), LifecycleState::Created);
  EXPECT_TRUE(batch.empty());
  const auto lines = read_lines(dir / "a.jsonl");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(nlohmann::json::parse(lines[0])["action"], "enforcement");
  const auto refused = nlohmann::json::parse(lines[1]);
  EXPECT_EQ(refused["decision"], "deny");
  EXPECT_EQ(refused["detail"], "refused transition created -> finalized");
}

TEST(LifecycleTest, WithoutAnAuditLogABatchStaysAsItWas) {
  SandboxExecution execution("exec-1", nullptr);
  std::vector<AuditRecord> batch;
  execution.transition(LifecycleState::Starting, batch);
  EXPECT_TRUE(batch.empty());
  EXPECT_THROW(execution.transition(LifecycleState::Finalized, batch), SandboxError);
}

// The record's time, computed without a time zone, is what gmtime_r gives
// (the oracle): across leap days, century years, 2038 and sub-second parts.
TEST(AuditTimestampTest, IsUtcAsGmtimeGivesIt) {
  using namespace std::chrono;
  const auto oracle = [](system_clock::time_point at) {
    const long long micros = duration_cast<microseconds>(at.time_since_epoch()).count();
    const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char text[64];
    std::snprintf(text, sizeof text, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                  tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, micros % 1000000);
    return std::string(text);
  };
  EXPECT_EQ(audit::utc_timestamp(system_clock::time_point{}), "1970-01-01T00:00:00.000000Z");
  EXPECT_EQ(audit::utc_timestamp(sys_days{year{2024} / 2 / 29} + hours{23} + minutes{59} +
                                 seconds{59} + microseconds{999999}),
            "2024-02-29T23:59:59.999999Z");
  for (long long seconds : {951782400LL, 951868799LL, 2147483647LL, 2147483648LL, 4107542400LL,
                            4102444799LL, 1764968840LL, 7258118400LL}) {
    for (long long micros : {0LL, 1LL, 500000LL, 999999LL}) {
      const system_clock::time_point at{microseconds{seconds * 1000000 + micros}};
      EXPECT_EQ(audit::utc_timestamp(at), oracle(at)) << seconds << "." << micros;
    }
  }
  // A day's worth of instants, 7 minutes 13.000123 s apart.
  for (long long step = 0; step < 200; ++step) {
    const system_clock::time_point at{microseconds{1764892800000000LL + step * 433000123LL}};
    EXPECT_EQ(audit::utc_timestamp(at), oracle(at));
  }
}

}  // namespace
}  // namespace pulsebox
