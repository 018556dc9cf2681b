// A commit makes its blobs durable before its write-ahead log names them:
// a few with an fsync each (and each directory above them), many with one
// syncfs() (workspace/blob_durability.h). Each commit runs in a child whose
// seccomp filter fails one of those system calls, which shows which one the
// commit made, and which records each file it synced (its failpoints).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/fs.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"
#include "workspace/blob_durability.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

#if defined(__x86_64__)
constexpr std::uint32_t kThisArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
constexpr std::uint32_t kThisArch = AUDIT_ARCH_AARCH64;
#endif

// From now on in this process, system call `nr` fails with EIO.
bool fail_with_eio(long nr) {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kThisArch, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, static_cast<std::uint32_t>(nr), 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EIO & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof filter / sizeof filter[0]), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

struct Committed {
  std::string error;                // "" when the commit succeeded
  std::vector<std::string> synced;  // each fsync's path, beneath the workspace, in order
  bool synced_before(const std::string& first, const std::string& then) const {
    const auto a = std::find(synced.begin(), synced.end(), first);
    const auto b = std::find(synced.begin(), synced.end(), then);
    return a != synced.end() && b != synced.end() && a < b;
  }
  bool synced_any(const std::string& path) const {
    return std::find(synced.begin(), synced.end(), path) != synced.end();
  }
};

constexpr std::string_view kSyncedMark = "\n@@synced@@\n";

// Commits `tx` of the workspace `root` in a child where `failing` fails
// with EIO: its error, and what it synced.
Committed commit_where_failing(const std::filesystem::path& root, const std::string& tx,
                               long failing, const CommitOptions& options = {}) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return {"pipe failed", {}};
  const pid_t child = ::fork();
  if (child < 0) return {"fork failed", {}};
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::string said;
    std::string synced;
    const std::string prefix = root.string() + "/";
    workspace::commit_failpoint = [&](std::string_view step) {
      if (!step.starts_with("synced ")) return;
      step.remove_prefix(7);
      if (step.starts_with(prefix)) step.remove_prefix(prefix.size());
      synced += std::string(step) + "\n";
    };
    if (!fail_with_eio(failing)) {
      said = "the seccomp filter was refused";
    } else {
      try {
        Workspace(root).commit(tx, options);
      } catch (const std::exception& error) {
        said = error.what();
        if (said.empty()) said = "an error without a message";
      }
    }
    (void)core::write_all(pipe_fds[1], said + std::string(kSyncedMark) + synced, "the result");
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  auto read = core::read_all(pipe_fds[0], 1 << 20, "the child's result");
  ::close(pipe_fds[0]);
  const std::string said = read ? *read : "reading the child's result failed";
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return {"the committing child died (status " + std::to_string(status) + ")", {}};
  const std::size_t mark = said.find(kSyncedMark);
  if (mark == std::string::npos) return {"no result from the child: " + said, {}};
  Committed committed{said.substr(0, mark), {}};
  std::istringstream lines(said.substr(mark + kSyncedMark.size()));
  for (std::string line; std::getline(lines, line);)
    committed.synced.push_back(line);
  return committed;
}

std::string stage_files(Workspace& ws, const std::string& prefix, std::size_t count) {
  const auto tx = ws.create_transaction("durability");
  ws.stage_mkdir(tx, prefix, 0755);
  for (std::size_t i = 0; i < count; ++i)
    ws.stage_write(tx, prefix + "/file" + std::to_string(i) + ".txt", "content " + prefix, 0644);
  return tx;
}

TEST(CommitDurabilityTest, AFewFilesAreSyncedEachAndTheFileSystemIsLeftAlone) {
  TempDir root;
  write_file(root.path() / "kept.txt", "kept\n");
  Workspace ws(root.path());
  const auto few = stage_files(ws, "few", 3);
  // Each file and its directory: the limit exactly, then one past it.
  const auto at_limit = stage_files(ws, "at", workspace::kFsyncEachUpTo - 1);
  const auto past_limit = stage_files(ws, "past", workspace::kFsyncEachUpTo);

  // The few: no syncfs() is needed (it fails here), and they are committed,
  // each blob synced, then each directory up to the workspace's root.
  const Committed committed = commit_where_failing(root.path(), few, SYS_syncfs);
  EXPECT_EQ(committed.error, "");
  EXPECT_EQ(read_file(root.path() / "few/file2.txt"), "content few");
  const std::string tx_dir = ".agent/transactions/" + few;
  std::size_t blobs_synced = 0;
  for (const std::string& path : committed.synced)
    blobs_synced += path.starts_with(tx_dir + "/blobs/0/") ? 1 : 0;
  EXPECT_EQ(blobs_synced, 3u) << ::testing::PrintToString(committed.synced);
  EXPECT_TRUE(committed.synced_before(tx_dir + "/blobs/0", tx_dir + "/blobs"));
  EXPECT_TRUE(committed.synced_before(tx_dir + "/blobs", tx_dir));
  EXPECT_TRUE(committed.synced_before(tx_dir, ".agent/transactions"));
  EXPECT_TRUE(committed.synced_before(".agent", root.path().string()));

  EXPECT_EQ(commit_where_failing(root.path(), at_limit, SYS_syncfs).error, "");
  EXPECT_TRUE(std::filesystem::exists(root.path() / "at"));
  // One past the limit: one syncfs(), whose failure refuses the commit.
  const Committed refused = commit_where_failing(root.path(), past_limit, SYS_syncfs);
  EXPECT_NE(refused.error.find("syncfs"), std::string::npos) << refused.error;
  EXPECT_FALSE(refused.synced_any(".agent/transactions/" + past_limit + "/blobs"));
  EXPECT_FALSE(std::filesystem::exists(root.path() / "past"));
  EXPECT_EQ(Workspace(root.path()).list_transactions().size(), 1u);
}

TEST(CommitDurabilityTest, ABlobThatCannotBeSyncedRefusesTheCommitAndNothingIsApplied) {
  TempDir root;
  write_file(root.path() / "kept.txt", "kept\n");
  Workspace ws(root.path());
  const auto tx = stage_files(ws, "new", 2);

  const std::string refused = commit_where_failing(root.path(), tx, SYS_fsync).error;
  // The first fsync is of a blob (blobs/<shard>/<n>), before anything is
  // applied.
  EXPECT_NE(refused.find("fsync " + (root.path() / ".agent" / "transactions" / tx).string() +
                         "/blobs/0/"),
            std::string::npos)
      << refused;
  EXPECT_FALSE(std::filesystem::exists(root.path() / "new"));
  ASSERT_EQ(Workspace(root.path()).list_transactions().size(), 1u);
  // Nothing was left half done: the same transaction commits afterwards.
  Workspace(root.path()).commit(tx);
  EXPECT_EQ(read_file(root.path() / "new/file1.txt"), "content new");
}

// A run's new directory is kept where the run made it and moved whole: its
// file and a directory in it that holds none are synced one by one too.
TEST(CommitDurabilityTest, ARunsNewDirectoryKeptInPlaceIsSyncedWithoutTheFileSystem) {
  TempDir base;
  const auto root = base.path() / "ws";
  const auto upper = base.path() / "upper";
  write_file(root / "kept.txt", "kept\n");
  write_file(upper / "made" / "sub" / "file.txt", "made by the run\n");
  std::filesystem::create_directories(upper / "made" / "empty" / "deeper");
  const auto imported =
      Workspace(root).import_overlay(upper, root, ImportOptions{.take_upper_files = true});
  ASSERT_TRUE(imported.transaction);
  // The run's files stayed where it wrote them (the case this covers).
  ASSERT_TRUE(std::filesystem::exists(root / ".agent" / "transactions" / *imported.transaction /
                                      "blobs" / "u" / "made" / "empty" / "deeper"));

  const Committed committed = commit_where_failing(root, *imported.transaction, SYS_syncfs);
  EXPECT_EQ(committed.error, "");
  EXPECT_EQ(read_file(root / "made/sub/file.txt"), "made by the run\n");
  EXPECT_TRUE(std::filesystem::is_directory(root / "made/empty/deeper"));
  // What holds no file is synced too, each name after what it holds.
  const std::string u = ".agent/transactions/" + *imported.transaction + "/blobs/u/made/";
  EXPECT_TRUE(committed.synced_before(u + "empty/deeper", u + "empty"))
      << ::testing::PrintToString(committed.synced);
  EXPECT_TRUE(committed.synced_before(u + "sub/file.txt", u + "sub"));
  EXPECT_TRUE(committed.synced_before(u + "sub", u.substr(0, u.size() - 1)));
  EXPECT_TRUE(committed.synced_before(u + "empty", u.substr(0, u.size() - 1)));
}

// One file deeper than the directories synced one by one may be (in a
// tree the workspace has: one Write, and no Mkdir): one syncfs(), decided
// before any fsync.
TEST(CommitDurabilityTest, ADeepTreeSyncsTheFileSystem) {
  TempDir base;
  const auto root = base.path() / "ws";
  const auto upper = base.path() / "upper";
  std::filesystem::path deep;
  for (std::size_t level = 0; level <= workspace::kFsyncDirectoriesUpTo; ++level)
    deep /= "d";
  std::filesystem::create_directories(root / deep);
  write_file(upper / deep / "file.txt", "deep\n");
  const auto imported =
      Workspace(root).import_overlay(upper, root, ImportOptions{.take_upper_files = true});
  ASSERT_TRUE(imported.transaction);

  const auto staged = Workspace(root).describe(*imported.transaction).changes;
  ASSERT_EQ(staged.size(), 1u);  // the file alone

  const Committed refused = commit_where_failing(root, *imported.transaction, SYS_syncfs);
  EXPECT_NE(refused.error.find("syncfs"), std::string::npos) << refused.error;
  EXPECT_EQ(refused.synced, std::vector<std::string>{});
}

// What a partial commit leaves pending is named again by its manifest:
// the file system is synced for it, as before.
TEST(CommitDurabilityTest, APartialCommitStillSyncsTheFileSystem) {
  TempDir root;
  Workspace ws(root.path());
  const auto tx = ws.create_transaction("partial");
  ws.stage_write(tx, "one.txt", "one\n", 0644);
  ws.stage_write(tx, "two.txt", "two\n", 0644);

  const std::string refused =
      commit_where_failing(root.path(), tx, SYS_syncfs, CommitOptions{.paths = {"one.txt"}}).error;
  EXPECT_NE(refused.find("syncfs"), std::string::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists(root.path() / "one.txt"));
  Workspace(root.path()).commit(tx);
  EXPECT_EQ(read_file(root.path() / "two.txt"), "two\n");
}

}  // namespace
}  // namespace pulsebox
