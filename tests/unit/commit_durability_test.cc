// A commit makes its blobs durable before its write-ahead log names them:
// a few with an fsync each (and each directory above them), many with one
// syncfs() (workspace/blob_durability.h). Each commit runs in a child whose
// seccomp filter fails one of those system calls, which shows which one the
// commit made.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <string>

#include "core/fs.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"
#include "workspace/blob_durability.h"

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

// Commits `tx` of the workspace `root` in a child where `failing` fails
// with EIO: "" when the commit succeeded, else its error's message.
std::string commit_where_failing(const std::filesystem::path& root, const std::string& tx,
                                 long failing, const CommitOptions& options = {}) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return "pipe failed";
  const pid_t child = ::fork();
  if (child < 0) return "fork failed";
  if (child == 0) {
    ::close(pipe_fds[0]);
    std::string said;
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
    (void)core::write_all(pipe_fds[1], said, "the result");
    ::_exit(0);
  }
  ::close(pipe_fds[1]);
  std::string said;
  char buffer[4096];
  for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(pipe_fds[0]);
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return "the committing child died (status " + std::to_string(status) + ")";
  return said;
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
  const auto many = stage_files(ws, "many", workspace::kFsyncEachUpTo + 1);

  // The few: no syncfs() is needed (it fails here), and they are committed.
  EXPECT_EQ(commit_where_failing(root.path(), few, SYS_syncfs), "");
  EXPECT_EQ(read_file(root.path() / "few/file2.txt"), "content few");
  // The many: one syncfs(), whose failure refuses the commit.
  const std::string refused = commit_where_failing(root.path(), many, SYS_syncfs);
  EXPECT_NE(refused.find("syncfs"), std::string::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists(root.path() / "many"));
  EXPECT_EQ(Workspace(root.path()).list_transactions().size(), 1u);
}

TEST(CommitDurabilityTest, ABlobThatCannotBeSyncedRefusesTheCommitAndNothingIsApplied) {
  TempDir root;
  write_file(root.path() / "kept.txt", "kept\n");
  Workspace ws(root.path());
  const auto tx = stage_files(ws, "new", 2);

  const std::string refused = commit_where_failing(root.path(), tx, SYS_fsync);
  // The first fsync is of a blob, before anything is applied.
  EXPECT_NE(refused.find("fsync"), std::string::npos) << refused;
  EXPECT_NE(refused.find("blobs"), std::string::npos) << refused;
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

  EXPECT_EQ(commit_where_failing(root, *imported.transaction, SYS_syncfs), "");
  EXPECT_EQ(read_file(root / "made/sub/file.txt"), "made by the run\n");
  EXPECT_TRUE(std::filesystem::is_directory(root / "made/empty/deeper"));
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
      commit_where_failing(root.path(), tx, SYS_syncfs, CommitOptions{.paths = {"one.txt"}});
  EXPECT_NE(refused.find("syncfs"), std::string::npos) << refused;
  EXPECT_FALSE(std::filesystem::exists(root.path() / "one.txt"));
  Workspace(root.path()).commit(tx);
  EXPECT_EQ(read_file(root.path() / "two.txt"), "two\n");
}

}  // namespace
}  // namespace pulsebox
