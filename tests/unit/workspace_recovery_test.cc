// Recovery and errors when opening a workspace: a decided commit is finished
// by the next operation, an unreadable .agent/ is an error (never "no
// pending transactions"), a damaged transaction is listed, not left out.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

// Commits `tx` in a child killed right after the commit point.
void commit_and_crash_after_the_commit_point(const std::filesystem::path& root,
                                             const std::string& tx,
                                             const CommitOptions& options = {}) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    workspace::commit_failpoint = [](std::string_view step) {
      if (step == "ready marker") ::raise(SIGKILL);
    };
    try {
      Workspace(root).commit(tx, options);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "the commit was not interrupted";
}

TEST(WorkspaceRecoveryTest, ADecidedCommitIsFinishedByTheNextOperation) {
  TempDir dir;
  write_file(dir / "a.txt", "before\n");
  std::string tx;
  {
    Workspace ws(dir.path());
    tx = ws.create_transaction();
    ws.stage_write(tx, "a.txt", "after\n");
  }
  commit_and_crash_after_the_commit_point(dir.path(), tx);
  ASSERT_EQ(read_file(dir / "a.txt"), "before\n");
  Workspace ws(dir.path());
  EXPECT_TRUE(ws.list_transactions().empty());  // finished, not listed as pending
  EXPECT_EQ(read_file(dir / "a.txt"), "after\n");
  EXPECT_TRUE(ws.reconcile().replayed.empty());
}

TEST(WorkspaceRecoveryTest, ADecidedPartialCommitIsFinishedByTheNextCommit) {
  TempDir dir;
  write_file(dir / "a.txt", "a\n");
  write_file(dir / "b.txt", "b\n");
  std::string tx;
  {
    Workspace ws(dir.path());
    tx = ws.create_transaction();
    ws.stage_write(tx, "a.txt", "new a\n");
    ws.stage_write(tx, "b.txt", "new b\n");
  }
  commit_and_crash_after_the_commit_point(
      dir.path(), tx, CommitOptions{.paths = {"a.txt"}, .allow_secrets = false});
  Workspace ws(dir.path());
  ws.commit(tx);  // finishes the decided part first, then commits the rest
  EXPECT_EQ(read_file(dir / "a.txt"), "new a\n");
  EXPECT_EQ(read_file(dir / "b.txt"), "new b\n");
  EXPECT_TRUE(ws.list_transactions().empty());
}

TEST(WorkspaceRecoveryTest, ADamagedTransactionIsListedWithTheReason) {
  TempDir dir;
  Workspace ws(dir.path());
  const auto good = ws.create_transaction();
  ws.stage_write(good, "a.txt", "a\n");
  const std::string bad = "tx-20260101000000-abcdef";
  write_file(dir / ".agent/transactions" / bad / "manifest.json", "{not json");
  const auto listed = ws.list_transactions();
  ASSERT_EQ(listed.size(), 2u);
  const auto& damaged = listed[0].id == bad ? listed[0] : listed[1];
  EXPECT_EQ(damaged.id, bad);
  EXPECT_NE(damaged.damaged.find("is damaged"), std::string::npos) << damaged.damaged;
  const auto& fine = listed[0].id == bad ? listed[1] : listed[0];
  EXPECT_TRUE(fine.damaged.empty());
  ws.discard(bad);  // still removable
  EXPECT_EQ(ws.list_transactions().size(), 1u);
}

// A pending transaction that changes a.txt (written "a\n" into the
// workspace first) and adds `added` unless it is empty.
std::string pending_change_of_a(const TempDir& dir, Workspace& ws, const std::string& added) {
  write_file(dir / "a.txt", "a\n");
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "a.txt", "changed\n");
  if (!added.empty()) ws.stage_write(tx, added, "new\n");
  return tx;
}

// pulsebox writes a manifest's entries in path order, once each. One in
// another order (a planted .agent/) is damaged for every reader alike: a
// diff that streams its entries showed a repeated path's first entry, where
// the commit applied its last.
TEST(WorkspaceRecoveryTest, AManifestOutOfPathOrderIsDamagedForEveryReader) {
  TempDir dir;
  Workspace ws(dir.path());
  const auto tx = pending_change_of_a(dir, ws, "b.txt");
  const auto manifest = dir / ".agent/transactions" / tx / "manifest.json";
  auto document = nlohmann::json::parse(read_file(manifest));
  auto& entries = document.at("entries");
  ASSERT_EQ(entries.size(), 2u);
  std::swap(entries[0], entries[1]);
  write_file(manifest, document.dump());

  const auto listed = ws.list_transactions();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_NE(listed[0].damaged.find("not in path order"), std::string::npos) << listed[0].damaged;
  EXPECT_THROW((void)ws.describe(tx), SandboxRecoveryError);
  EXPECT_THROW((void)ws.diff(tx), SandboxRecoveryError);
  EXPECT_THROW((void)ws.diff_stat(tx), SandboxRecoveryError);
  EXPECT_THROW((void)ws.commit(tx), SandboxRecoveryError);
  EXPECT_EQ(read_file(dir / "a.txt"), "a\n");
  EXPECT_FALSE(std::filesystem::exists(dir / "b.txt"));
  ws.discard(tx);
  EXPECT_TRUE(ws.list_transactions().empty());
}

// The order above is checked on the entry objects of the array "entries".
// Entries under that key as an object (or a second "entries" key) were read
// one by one afterwards, unchecked: a path twice, the first shown by the
// diff, the last applied by the commit.
TEST(WorkspaceRecoveryTest, AManifestWhoseEntriesAreNotOneArrayOfEntriesIsDamaged) {
  TempDir dir;
  Workspace ws(dir.path());
  const auto tx = pending_change_of_a(dir, ws, "");
  const auto manifest = dir / ".agent/transactions" / tx / "manifest.json";
  const auto good = nlohmann::json::parse(read_file(manifest));
  const nlohmann::json entry = good.at("entries").at(0);
  nlohmann::json head = good;
  head.erase("entries");
  const std::string rest = head.dump().substr(1);  // its members and "}"

  const std::vector<std::string> planted = {
      R"({"entries":{"k1":)" + entry.dump() + R"(,"k2":)" + entry.dump() + "}," + rest,
      R"({"entries":[)" + entry.dump() + "]," + rest.substr(0, rest.size() - 1) +
          R"(,"entries":{"k":)" + entry.dump() + "}}",
      R"({"entries":[)" + entry.dump() + ",7]," + rest,
      R"({"entries":7,)" + rest,
  };
  for (const std::string& text : planted) {
    ASSERT_TRUE(nlohmann::json::accept(text)) << text;
    write_file(manifest, text);
    const auto listed = ws.list_transactions();
    ASSERT_EQ(listed.size(), 1u);
    EXPECT_NE(listed[0].damaged.find("is damaged"), std::string::npos) << text;
    EXPECT_THROW((void)ws.commit(tx), SandboxRecoveryError) << text;
    EXPECT_EQ(read_file(dir / "a.txt"), "a\n");
  }
  write_file(manifest, good.dump());
  EXPECT_EQ(ws.describe(tx).changes.size(), 1u);
}

// As an ordinary user on a workspace whose .agent/ it cannot read, the
// listing said "no pending transactions" and exited 0.
TEST(WorkspaceRecoveryTest, AnUnreadableAgentDirectoryIsAnErrorNotAnEmptyList) {
  TempDir dir;
  ::chmod(dir.path().c_str(), 0755);
  {
    Workspace ws(dir.path());
    ws.stage_write(ws.create_transaction(), "a.txt", "a\n");
  }
  ASSERT_EQ(::chmod((dir / ".agent").c_str(), 0700), 0);
  const bool root = ::geteuid() == 0;
  if (!root) {
    ASSERT_EQ(::chmod((dir / ".agent/transactions").c_str(), 0), 0);
  }
  // Root reads everything: the listing runs as another user, as the
  // ordinary user is.
  const int status = testing::run_as_ordinary_user([&] {
    try {
      const auto listed = Workspace(dir.path()).list_transactions();
      return listed.empty() ? 1 : 2;
    } catch (const SandboxConfigError& error) {
      const std::string what = error.what();
      return what.find(".agent") != std::string::npos &&
                     what.find("Permission denied") != std::string::npos
                 ? 0
                 : 5;
    } catch (...) {
      return 6;
    }
  });
  if (!root) ::chmod((dir / ".agent/transactions").c_str(), 0700);
  EXPECT_EQ(status, 0) << "1: an empty list; 2: a list; 5: the error names no path";
}

}  // namespace
}  // namespace pulsebox
