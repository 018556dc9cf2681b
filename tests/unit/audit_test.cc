#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

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

}  // namespace
}  // namespace pulsebox
