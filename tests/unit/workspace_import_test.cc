// Importing a change set: one bad path is refused, not the whole set; type
// swaps that never follow a link; commits that keep times, modes, targets.
// The upper directory here is a plain directory (no whiteouts), read the way
// Workspace::import_overlay reads an overlayfs upper directory.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <map>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"
#include "workspace/owner_opened.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

using testing::hand_to_ordinary_user;
using testing::listing;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;

struct stat lstat_of(const fs::path& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st;
}

std::int64_t mtime_ns(const fs::path& path) {
  const struct stat st = lstat_of(path);
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
}

void set_mtime(const fs::path& path, std::int64_t ns) {
  const timespec times[2] = {{0, UTIME_OMIT},
                             {static_cast<time_t>(ns / 1000000000), ns % 1000000000}};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW), 0) << path;
}

class WorkspaceImportTest : public ::testing::Test {
 protected:
  WorkspaceImportTest() {
    fs::create_directories(ws());
    fs::create_directories(upper());
    write_file(ws() / "README", "readme\n");
    write_file(outside() / "secret.txt", "outside\n");
  }
  fs::path ws() const { return base_.path() / "ws"; }
  fs::path upper() const { return base_.path() / "upper"; }
  fs::path outside() const { return base_.path() / "outside"; }
  fs::path tx_dir(const std::string& id) const { return ws() / ".agent" / "transactions" / id; }
  // Everything outside the workspace must stay exactly as it was.
  void expect_outside_untouched() const {
    EXPECT_EQ(
        listing(outside()),
        (std::map<std::string, std::string>{{"secret.txt", listing(outside()).at("secret.txt")}}));
    EXPECT_EQ(read_file(outside() / "secret.txt"), "outside\n");
  }
  TempDir base_;
};

TEST_F(WorkspaceImportTest, SpecialFilesAreRefusedOneByOne) {
  write_file(upper() / "kept.txt", "kept\n");
  ASSERT_EQ(::mkfifo((upper() / "fifo").c_str(), 0644), 0);
  const int sock = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const std::string socket_path = (upper() / "sock").string();
  ASSERT_LT(socket_path.size(), sizeof address.sun_path);
  std::strcpy(address.sun_path, socket_path.c_str());
  ASSERT_EQ(::bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ::close(sock);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::mknod((upper() / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
  }

  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  ASSERT_TRUE(result.transaction.has_value());
  std::map<std::string, std::string> refused;
  for (const auto& item : result.refused)
    refused[item.path] = item.reason;
  EXPECT_NE(refused["fifo"].find("FIFO"), std::string::npos);
  EXPECT_NE(refused["sock"].find("socket"), std::string::npos);
  if (root) {
    EXPECT_NE(refused["null"].find("character device"), std::string::npos);
  }
  EXPECT_EQ(refused.size(), root ? 3u : 2u);
  // Recorded with the transaction, for `pulsebox changes`.
  const TransactionInfo info = workspace.describe(*result.transaction);
  EXPECT_EQ(info.refused.size(), refused.size());
  ASSERT_EQ(info.changes.size(), 1u);
  EXPECT_EQ(info.changes[0].path, "kept.txt");
  workspace.commit(*result.transaction);
  EXPECT_EQ(read_file(ws() / "kept.txt"), "kept\n");
  EXPECT_FALSE(fs::exists(fs::symlink_status(ws() / "fifo")));
}

TEST_F(WorkspaceImportTest, ATooLargeFileIsRefusedAndTheRestTaken) {
  write_file(upper() / "big.bin", std::string(2048, 'x'));
  write_file(upper() / "small.txt", "small\n");
  WorkspaceLimits limits;
  limits.max_file_bytes = 1024;
  Workspace workspace(ws(), default_workspace_policy(), limits);
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  ASSERT_TRUE(result.transaction.has_value());
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].path, "big.bin");
  EXPECT_NE(result.refused[0].reason.find("over the per-file limit of 1024"), std::string::npos)
      << result.refused[0].reason;
  EXPECT_EQ(workspace.describe(*result.transaction).changes.size(), 1u);
}

TEST_F(WorkspaceImportTest, OnlyRefusedPathsMakeNoTransactionButSayWhy) {
  ASSERT_EQ(::mkfifo((upper() / "fifo").c_str(), 0644), 0);
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  EXPECT_FALSE(result.transaction.has_value());
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].path, "fifo");
  EXPECT_TRUE(workspace.list_transactions().empty());
}

TEST_F(WorkspaceImportTest, TheWholeSetOverTheTotalLimitStillFails) {
  write_file(upper() / "a", std::string(600, 'a'));
  write_file(upper() / "b", std::string(600, 'b'));
  WorkspaceLimits limits;
  limits.max_total_bytes = 1000;
  Workspace workspace(ws(), default_workspace_policy(), limits);
  EXPECT_THROW((void)workspace.import_overlay(upper(), ws(), ImportOptions{}),
               SandboxResourceError);
  EXPECT_TRUE(workspace.list_transactions().empty());
}

TEST_F(WorkspaceImportTest, SetuidBitsAreDroppedWithANote) {
  write_file(upper() / "tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((upper() / "tool").c_str(), 04755), 0);
  fs::create_directories(upper() / "shared");
  ASSERT_EQ(::chmod((upper() / "shared").c_str(), 02775), 0);
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  ASSERT_TRUE(result.transaction.has_value());
  EXPECT_TRUE(result.refused.empty());
  std::map<std::string, std::string> notes;
  for (const auto& item : result.notes)
    notes[item.path] = item.note;
  EXPECT_NE(notes["tool"].find("setuid/setgid bits dropped"), std::string::npos);
  // A setgid bit on a directory may be refused by some file systems: only
  // check it when it took.
  if ((lstat_of(upper() / "shared").st_mode & S_ISGID) != 0) {
    EXPECT_NE(notes["shared"].find("setuid/setgid bits dropped"), std::string::npos);
  }
  EXPECT_EQ(workspace.describe(*result.transaction).notes.size(), result.notes.size());
  workspace.commit(*result.transaction);
  EXPECT_EQ(lstat_of(ws() / "tool").st_mode & 07777, 0755u);
  EXPECT_EQ(lstat_of(ws() / "shared").st_mode & 07777, 0775u);
}

TEST_F(WorkspaceImportTest, HardLinksAreReported) {
  write_file(upper() / "one", "same inode\n");
  ASSERT_EQ(::link((upper() / "one").c_str(), (upper() / "two").c_str()), 0);
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  ASSERT_EQ(result.notes.size(), 1u);
  EXPECT_EQ(result.notes[0].path, "two");
  EXPECT_EQ(result.notes[0].note, "hard link to one: committed as a separate copy");
  workspace.commit(*result.transaction);
  EXPECT_EQ(read_file(ws() / "two"), "same inode\n");
}

// An upper file on the workspace's file system becomes its blob, and then
// the committed file, as it is (a hard link: no copy), but only when that
// is exactly what a copy would be; otherwise it is copied.
// Sets `flag` (FS_IOC_SETFLAGS) on a file: false where the file system
// keeps no such flags.
bool set_inode_flag(const fs::path& path, int flag) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int flags = 0;
  bool set = fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  flags |= flag;
  set = set && ::ioctl(fd, FS_IOC_SETFLAGS, &flags) == 0;
  if (fd >= 0) ::close(fd);
  return set;
}

bool has_inode_flag(const fs::path& path, int flag) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  int flags = 0;
  const bool got = fd >= 0 && ::ioctl(fd, FS_IOC_GETFLAGS, &flags) == 0;
  if (fd >= 0) ::close(fd);
  return got && (flags & flag) != 0;
}

TEST_F(WorkspaceImportTest, AnUpperFileIsLinkedOnlyWhenACopyWouldBeTheSame) {
  write_file(upper() / "plain.txt", "plain\n");
  write_file(upper() / "owned.txt", "owned by the sandbox's user\n");
  write_file(upper() / "noted.txt", "with an extended attribute\n");
  const bool has_xattr = ::setxattr((upper() / "noted.txt").c_str(), "user.note", "x", 1, 0) == 0;
  write_file(upper() / "tool", "#!/bin/sh\n");
  ASSERT_EQ(::chmod((upper() / "tool").c_str(), 04755), 0);
  write_file(upper() / "one", "two names\n");
  ASSERT_EQ(::link((upper() / "one").c_str(), (upper() / "two").c_str()), 0);
  const bool root = ::geteuid() == 0;
  if (root) {
    ASSERT_EQ(::chown((upper() / "owned.txt").c_str(), 12345, 12345), 0);
  }
  std::map<std::string, ino_t> inode;
  std::map<std::string, std::string> content;
  for (const char* name : {"plain.txt", "owned.txt", "noted.txt", "tool", "one", "two"}) {
    inode[name] = lstat_of(upper() / name).st_ino;
    content[name] = read_file(upper() / name);
  }
  const std::int64_t plain_time = mtime_ns(upper() / "plain.txt");

  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  // The upper directory moves whole into the transaction, its files that
  // a copy would match staying where they lie as their blobs: the run
  // directory's removal can never touch a committed file.
  EXPECT_FALSE(fs::exists(upper()));
  EXPECT_TRUE(fs::exists(tx_dir(*tx) / "blobs" / "u" / "plain.txt"));
  workspace.commit(*tx);
  for (const char* name : {"plain.txt", "owned.txt", "noted.txt", "tool", "one", "two"})
    EXPECT_EQ(read_file(ws() / name), content[name]) << name;
  EXPECT_EQ(lstat_of(ws() / "plain.txt").st_ino, inode["plain.txt"]);
  EXPECT_EQ(mtime_ns(ws() / "plain.txt"), plain_time);
  // As root a file of the sandbox's user is given root's owner first, then
  // the directory's at commit, as a copy; otherwise it is our own already.
  EXPECT_EQ(lstat_of(ws() / "owned.txt").st_ino, inode["owned.txt"]);
  EXPECT_EQ(lstat_of(ws() / "owned.txt").st_uid, lstat_of(ws()).st_uid);
  EXPECT_EQ(lstat_of(ws() / "owned.txt").st_gid, lstat_of(ws()).st_gid);
  // Copied: attributes, setuid bits and other names never reach the workspace.
  if (has_xattr) {
    EXPECT_NE(lstat_of(ws() / "noted.txt").st_ino, inode["noted.txt"]);
    EXPECT_LT(::getxattr((ws() / "noted.txt").c_str(), "user.note", nullptr, 0), 0);
  }
  EXPECT_NE(lstat_of(ws() / "tool").st_ino, inode["tool"]);
  EXPECT_EQ(lstat_of(ws() / "tool").st_mode & 07777, 0755u);
  EXPECT_NE(lstat_of(ws() / "one").st_ino, inode["one"]);
  EXPECT_NE(lstat_of(ws() / "two").st_ino, inode["one"]);
  EXPECT_EQ(lstat_of(ws() / "one").st_nlink, 1u);
}

// An inode flag its owner may set (chattr +d), as a sandbox may on its own
// files, and a copy would not have: the file is copied, never linked.
TEST_F(WorkspaceImportTest, AnUpperFileWithAnInodeFlagIsCopiedNotLinked) {
  write_file(upper() / "flagged.txt", "not to be dumped\n");
  if (!set_inode_flag(upper() / "flagged.txt", FS_NODUMP_FL)) {
    GTEST_SKIP() << "the file system of " << upper() << " keeps no inode flags";
  }
  const ino_t inode = lstat_of(upper() / "flagged.txt").st_ino;
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "flagged.txt"), "not to be dumped\n");
  EXPECT_NE(lstat_of(ws() / "flagged.txt").st_ino, inode);
  EXPECT_FALSE(has_inode_flag(ws() / "flagged.txt", FS_NODUMP_FL));
}

// A refused path keeps the upper directory where it is, whole, for the run
// to hold: its files are linked as their blobs then, not moved with it.
TEST_F(WorkspaceImportTest, WithARefusedPathTheUpperDirectoryStaysWhereItIs) {
  write_file(upper() / "plain.txt", "plain\n");
  ASSERT_EQ(::mkfifo((upper() / "fifo").c_str(), 0644), 0);
  Workspace workspace(ws());
  const ImportResult result =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true});
  ASSERT_TRUE(result.transaction.has_value());
  ASSERT_EQ(result.refused.size(), 1u);
  EXPECT_EQ(result.refused[0].path, "fifo");
  EXPECT_TRUE(fs::exists(fs::symlink_status(upper() / "fifo")));
  EXPECT_FALSE(fs::exists(upper() / "plain.txt"));  // linked, its upper name released
  EXPECT_FALSE(fs::exists(tx_dir(*result.transaction) / "blobs" / "u"));
  workspace.commit(*result.transaction);
  EXPECT_EQ(read_file(ws() / "plain.txt"), "plain\n");
  EXPECT_EQ(lstat_of(ws() / "plain.txt").st_nlink, 1u);
}

// A file kept in place is reached beneath blobs/u one name at a time,
// never through a symlink: one planted there (for a directory of the
// staged path) would rename a file from anywhere into the workspace.
TEST_F(WorkspaceImportTest, AFileKeptInPlaceIsNeverReachedThroughAPlantedSymlink) {
  fs::create_directories(upper() / "dir");
  write_file(upper() / "dir" / "secret.txt", "mine\n");
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  const fs::path kept = tx_dir(*tx) / "blobs" / "u" / "dir";
  ASSERT_TRUE(fs::exists(kept / "secret.txt"));
  fs::rename(kept, tx_dir(*tx) / "blobs" / "u" / "moved");
  fs::create_directory_symlink(outside(), kept);
  EXPECT_THROW(workspace.commit(*tx), SandboxRecoveryError);
  EXPECT_FALSE(fs::exists(ws() / "dir" / "secret.txt"));
  expect_outside_untouched();
}

// A name that is not UTF-8 cannot be a manifest's in-place blob: that file
// is linked as before, and its name in the moved directory released.
TEST_F(WorkspaceImportTest, ANameThatIsNotUtf8IsLinkedBesideTheFilesKeptInPlace) {
  const std::string odd = "odd\xff.txt";
  write_file(upper() / odd, "odd\n");
  write_file(upper() / "plain.txt", "plain\n");
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  EXPECT_TRUE(fs::exists(tx_dir(*tx) / "blobs" / "u" / "plain.txt"));
  EXPECT_FALSE(fs::exists(tx_dir(*tx) / "blobs" / "u" / odd));
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / odd), "odd\n");
  EXPECT_EQ(read_file(ws() / "plain.txt"), "plain\n");
  EXPECT_EQ(lstat_of(ws() / odd).st_nlink, 1u);
}

// A new directory holding only files kept in place (and directories) is
// committed as one rename of the run's own directory, with the staged
// modes (a setgid bit dropped), not one rename a file.
TEST_F(WorkspaceImportTest, ANewDirectoryOfFilesKeptInPlaceIsCommittedAsOneRename) {
  fs::create_directories(upper() / "new" / "sub");
  write_file(upper() / "new" / "a.txt", "a\n");
  write_file(upper() / "new" / "sub" / "b.txt", "b\n");
  ASSERT_EQ(::chmod((upper() / "new").c_str(), 02750), 0);
  ASSERT_EQ(::chmod((upper() / "new" / "sub").c_str(), 0700), 0);
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  const ino_t kept = lstat_of(tx_dir(*tx) / "blobs" / "u" / "new").st_ino;
  const ino_t file = lstat_of(tx_dir(*tx) / "blobs" / "u" / "new" / "sub" / "b.txt").st_ino;
  workspace.commit(*tx);
  EXPECT_EQ(lstat_of(ws() / "new").st_ino, kept) << "moved as one";
  EXPECT_EQ(lstat_of(ws() / "new" / "sub" / "b.txt").st_ino, file);
  EXPECT_EQ(lstat_of(ws() / "new").st_mode & 07777, 0750u);
  EXPECT_EQ(lstat_of(ws() / "new" / "sub").st_mode & 07777, 0700u);
  EXPECT_EQ(read_file(ws() / "new" / "a.txt"), "a\n");
  EXPECT_EQ(read_file(ws() / "new" / "sub" / "b.txt"), "b\n");
  EXPECT_FALSE(fs::exists(tx_dir(*tx)));
}

// Imports `upper` into `ws` in a child process killed (SIGKILL) at the
// import's step `step`: its wait status, or -1 when it could not be run.
int import_killed_at(const fs::path& ws, const fs::path& upper, std::string_view step) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    workspace::commit_failpoint = [step](std::string_view at) {
      if (at == step) ::raise(SIGKILL);
    };
    try {
      (void)Workspace(ws).import_overlay(upper, ws, ImportOptions{.take_upper_files = true});
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  return ::waitpid(child, &status, 0) == child ? status : -1;
}

// Killed after the run's upper directory moved into the transaction but
// before the draft naming its files became the manifest, the import is
// finished by the next opening of the workspace: every change is listed
// and commits. Before, the transaction's manifest was the empty one, and
// the run's files sat in it unlisted.
TEST_F(WorkspaceImportTest, AnImportKilledAfterTheUpperDirectoryMovedIsFinishedAtTheNextOpening) {
  write_file(upper() / "a.txt", "a\n");
  write_file(upper() / "new" / "b.txt", "b\n");
  const int status = import_killed_at(ws(), upper(), "import: upper directory moved");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_FALSE(fs::exists(upper())) << "the kill came after the move";
  Workspace workspace(ws());
  const auto listed = workspace.list_transactions();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_TRUE(listed[0].damaged.empty()) << listed[0].damaged;
  std::vector<std::string> paths;
  for (const auto& change : listed[0].changes)
    paths.push_back(change.path);
  EXPECT_EQ(paths, (std::vector<std::string>{"a.txt", "new", "new/b.txt"}));
  EXPECT_FALSE(fs::exists(tx_dir(listed[0].id) / "import.json"));
  workspace.commit(listed[0].id);
  EXPECT_EQ(read_file(ws() / "a.txt"), "a\n");
  EXPECT_EQ(read_file(ws() / "new" / "b.txt"), "b\n");
}

// Killed before the move, the run's upper directory is whole where it was,
// and the next opening drops the draft that names files it never took,
// with the empty transaction the import began (before, it was listed).
TEST_F(WorkspaceImportTest, AnImportKilledBeforeTheUpperDirectoryMovedLeavesItWhole) {
  write_file(upper() / "a.txt", "a\n");
  const auto before = listing(upper());
  const int status = import_killed_at(ws(), upper(), "import: draft saved");
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  EXPECT_EQ(listing(upper()), before);
  const fs::path transactions = ws() / ".agent" / "transactions";
  ASSERT_EQ(std::distance(fs::directory_iterator(transactions), fs::directory_iterator()), 1);
  Workspace workspace(ws());
  EXPECT_TRUE(workspace.list_transactions().empty());
  EXPECT_TRUE(fs::is_empty(transactions));
  // The run's changes import whole from where they still are.
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "a.txt"), "a\n");
}

// The draft cannot become the manifest after the run's directory moved in:
// the directory goes back as the import found it, every mode as it was (an
// ordinary user's move had given its read-only directories the owner's
// rwx), for the caller to keep as held changes; no transaction is left.
TEST_F(WorkspaceImportTest, AManifestNotSavedAfterTheMoveLeavesTheRunsDirectoryAsItWas) {
  write_file(upper() / "ro" / "deep" / "a.txt", "a\n");
  ASSERT_EQ(::chmod((upper() / "ro" / "deep").c_str(), 0500), 0);
  ASSERT_EQ(::chmod((upper() / "ro").c_str(), 0555), 0);
  ASSERT_EQ(::chmod(upper().c_str(), 0751), 0);
  const fs::path transactions = ws() / ".agent" / "transactions";
  ASSERT_TRUE(hand_to_ordinary_user(base_.path()));
  const int status = testing::run_as_ordinary_user([&] {
    workspace::commit_failpoint = [&](std::string_view at) {
      if (at != "import: upper directory moved") return;
      // A directory where the manifest was: the rename over it fails.
      for (const auto& tx : fs::directory_iterator(transactions)) {
        fs::remove(tx.path() / "manifest.json");
        fs::create_directories(tx.path() / "manifest.json" / "in-the-way");
      }
    };
    try {
      (void)Workspace(ws()).import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true});
    } catch (const std::exception& error) {
      return std::string(error.what()).find("manifest") != std::string::npos ? 0 : 5;
    }
    return 1;
  });
  EXPECT_EQ(status, 0) << "1: imported anyway; 5: the error names no manifest";
  EXPECT_EQ(lstat_of(upper()).st_mode & 07777, 0751u);
  EXPECT_EQ(lstat_of(upper() / "ro").st_mode & 07777, 0555u);
  EXPECT_EQ(lstat_of(upper() / "ro" / "deep").st_mode & 07777, 0500u);
  EXPECT_EQ(read_file(upper() / "ro" / "deep" / "a.txt"), "a\n");
  EXPECT_TRUE(fs::is_empty(transactions)) << "the transaction is discarded";
  fs::permissions(upper() / "ro", fs::perms::owner_all, fs::perm_options::add);
  fs::permissions(upper() / "ro" / "deep", fs::perms::owner_all, fs::perm_options::add);
}

// Killed after the run's directory was renamed in but before its
// directories got their owner's rwx, an ordinary user's import is finished
// by the next opening with the modes a commit needs. Before, it was
// promoted as it lay: the commit of a run that did `chmod 555 src` failed
// past its commit point (a name cannot leave a read-only directory), and
// every later opening failed the same way.
// `root_opens_first`: root (when the suite runs as root) opens the
// workspace before its user does, and so finishes the user's import.
void killed_before_fix_up_then_committed(const fs::path& base, const fs::path& ws,
                                         const fs::path& upper, bool root_opens_first) {
  write_file(ws / "src" / "main.c", "old\n");
  write_file(upper / "src" / "main.c", "new\n");
  ASSERT_EQ(::chmod((upper / "src").c_str(), 0555), 0);
  ASSERT_TRUE(hand_to_ordinary_user(base));
  const int killed = testing::run_as_ordinary_user([&] {
    workspace::commit_failpoint = [](std::string_view at) {
      if (at == "import: upper directory renamed") ::raise(SIGKILL);
    };
    (void)Workspace(ws).import_overlay(upper, ws, ImportOptions{.take_upper_files = true});
    return 1;
  });
  ASSERT_EQ(killed, -1) << "the import was to be killed after the rename";
  ASSERT_FALSE(fs::exists(upper));
  if (root_opens_first) {
    EXPECT_EQ(Workspace(ws).list_transactions().size(), 1u);
  }
  const int committed = testing::run_as_ordinary_user([&] {
    Workspace workspace(ws);
    const auto listed = workspace.list_transactions();
    if (listed.size() != 1 || listed[0].changes.size() != 2) return 10;
    workspace.commit(listed[0].id);
    return read_file(ws / "src" / "main.c") == "new\n" ? 0 : 11;
  });
  EXPECT_EQ(committed, 0) << "10: not listed as staged; 11: not committed; 101: an error";
  EXPECT_EQ(lstat_of(ws / "src").st_mode & 07777, 0555u) << "the run's own mode, committed";
  fs::permissions(ws / "src", fs::perms::owner_all, fs::perm_options::add);
}

TEST_F(WorkspaceImportTest, AnImportKilledBeforeItsDirectoriesWereMadeWritableStillCommits) {
  killed_before_fix_up_then_committed(base_.path(), ws(), upper(), false);
}

// Root may open a user's workspace first (`sudo pulsebox changes`): the
// import it finishes needs the user's modes all the same.
TEST_F(WorkspaceImportTest, AnImportRootFinishesForItsUserStillCommits) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to open an ordinary user's workspace first";
  killed_before_fix_up_then_committed(base_.path(), ws(), upper(), true);
}

// A command's `chmod 000` keeps even its owner out of a directory or a
// file; root reads them anyway, an ordinary user did not: the import failed
// ("open directory locked: Permission denied") and the run's changes were
// held whole, none of them reviewable. Its own entries are read with the
// owner's permission added for the read, and staged with the modes the run
// left.
TEST_F(WorkspaceImportTest, AnOrdinaryUsersRunThatLockedItsOwnFilesIsStagedAndCommitted) {
  write_file(upper() / "locked" / "inner" / "f.txt", "inside\n");
  write_file(upper() / "sealed.txt", "sealed\n");
  write_file(upper() / "plain.txt", "plain\n");
  write_file(upper() / "listed" / "l.txt", "listed\n");
  ASSERT_EQ(::chmod((upper() / "listed").c_str(), 0600), 0);  // read, but not searched
  ASSERT_EQ(::chmod((upper() / "locked" / "inner").c_str(), 0), 0);
  ASSERT_EQ(::chmod((upper() / "locked").c_str(), 0), 0);
  ASSERT_EQ(::chmod((upper() / "sealed.txt").c_str(), 0), 0);
  ASSERT_TRUE(hand_to_ordinary_user(base_.path()));
  const int status = testing::run_as_ordinary_user([&] {
    Workspace workspace(ws());
    const auto imported =
        workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true});
    if (!imported.transaction || !imported.refused.empty()) return 10;
    std::map<std::string, unsigned> modes;
    for (const auto& change : workspace.describe(*imported.transaction).changes)
      modes[change.path] = change.mode;
    const std::map<std::string, unsigned> expected = {
        {"locked", 0},       {"locked/inner", 0}, {"locked/inner/f.txt", 0644}, {"sealed.txt", 0},
        {"plain.txt", 0644}, {"listed", 0600},    {"listed/l.txt", 0644}};
    if (modes != expected) return 11;
    const std::string diff = workspace.diff(*imported.transaction);
    if (diff.find("+sealed\n") == std::string::npos || diff.find("+inside\n") == std::string::npos)
      return 12;
    // A review killed as it read the file left the owner's read bit on
    // its staged copy: the commit takes it off, rather than call the
    // transaction damaged.
    int left_readable = 0;
    for (const auto& item : fs::recursive_directory_iterator(tx_dir(*imported.transaction))) {
      if (item.is_regular_file() && (lstat_of(item.path()).st_mode & 07777) == 0)
        left_readable += ::chmod(item.path().c_str(), 0400) == 0 ? 1 : 0;
    }
    if (left_readable == 0) return 13;
    workspace.commit(*imported.transaction);
    return 0;
  });
  ASSERT_EQ(status, 0) << "10: not staged whole; 11: other paths or modes; 12: the diff; 13: "
                          "no staged file of mode 000; 101: an error";
  EXPECT_EQ(lstat_of(ws() / "locked").st_mode & 07777, 0u);
  EXPECT_EQ(lstat_of(ws() / "listed").st_mode & 07777, 0600u);
  EXPECT_EQ(lstat_of(ws() / "sealed.txt").st_mode & 07777, 0u);
  // Opened to their owner before they are read: this process is the
  // ordinary user itself when the suite runs as one (root reads anyway).
  fs::permissions(ws() / "listed", fs::perms::owner_all);
  fs::permissions(ws() / "locked", fs::perms::owner_all);
  EXPECT_EQ(lstat_of(ws() / "locked" / "inner").st_mode & 07777, 0u);
  fs::permissions(ws() / "locked" / "inner", fs::perms::owner_all);
  fs::permissions(ws() / "sealed.txt", fs::perms::owner_read);
  EXPECT_EQ(read_file(ws() / "sealed.txt"), "sealed\n");
  EXPECT_EQ(read_file(ws() / "locked" / "inner" / "f.txt"), "inside\n");
  EXPECT_EQ(read_file(ws() / "plain.txt"), "plain\n");
  EXPECT_EQ(read_file(ws() / "listed" / "l.txt"), "listed\n");
}

// The run's changes at `upper` staged as a run's are (its files taken).
std::optional<std::string> staged_taking_upper(Workspace& workspace, const fs::path& upper) {
  return workspace.import_overlay(upper, workspace.root(), ImportOptions{.take_upper_files = true})
      .transaction;
}

// A commit into a directory the workspace has read-only for its user (a
// run's `chmod 500 n`, committed by an earlier part of the same
// transaction) failed past its commit point ("rename into place: n/g:
// Permission denied"), and every later command replayed it into the same
// failure until the user gave the directory write permission by hand. It
// is refused before anything is applied, naming the directory.
TEST_F(WorkspaceImportTest, ACommitIntoADirectoryItsUserCannotWriteIsRefusedBeforeItsCommitPoint) {
  write_file(upper() / "n" / "a" / "f.txt", "f\n");
  write_file(upper() / "n" / "g.txt", "g\n");
  ASSERT_EQ(::chmod((upper() / "n").c_str(), 0500), 0);
  ASSERT_TRUE(hand_to_ordinary_user(base_.path()));
  const int status = testing::run_as_ordinary_user([&] {
    Workspace workspace(ws());
    const auto tx = staged_taking_upper(workspace, upper());
    if (!tx) return 10;
    workspace.commit(*tx, CommitOptions{.paths = {"n/a/f.txt"}});
    try {
      workspace.commit(*tx);
      return 11;
    } catch (const SandboxError& error) {
      const std::string why = error.what();
      if (why.find("what n holds") == std::string::npos ||
          why.find("nothing was applied") == std::string::npos) {
        std::fprintf(stderr, "%s\n", why.c_str());
        return 12;
      }
    }
    // Nothing is left half done: the transaction is listed, and commits
    // once the user lets itself write there.
    if (Workspace(ws()).list_transactions().size() != 1) return 13;
    ::chmod((ws() / "n").c_str(), 0700);
    Workspace(ws()).commit(*tx);
    return read_file(ws() / "n" / "g.txt") == "g\n" ? 0 : 14;
  });
  EXPECT_EQ(status, 0) << "10: not staged; 11: committed into it; 12: the error; 13: not listed; "
                          "14: not committed after; 101: an error";
}

// Two more ways a commit wrote into a directory its ordinary user may not
// write past its commit point: removing a tree of read-only directories
// (a Go module cache's are 555), which it now opens up as it removes
// them, as `rm -rf` after `chmod -R u+w` would; and a mode change of a
// file with another link, replaced by a copy made in its directory, which
// is refused before the commit point like any other write into it.
TEST_F(WorkspaceImportTest, ACommitRemovesReadOnlyTreesAndRefusesCopiesIntoReadOnlyDirectories) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make the run's whiteout";
  write_file(ws() / "vendor" / "mod" / "x.txt", "x\n");
  write_file(ws() / "ro" / "h.txt", "h\n");
  ASSERT_EQ(::link((ws() / "ro" / "h.txt").c_str(), (ws() / "h-link.txt").c_str()), 0);
  ASSERT_EQ(::mknod((upper() / "vendor").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0);  // rm -rf
  write_file(upper() / "ro" / "h.txt", "h\n");
  ASSERT_EQ(::chmod((upper() / "ro" / "h.txt").c_str(), 0600), 0);  // chmod 600 ro/h.txt
  for (const fs::path& dir :
       {ws() / "vendor" / "mod", ws() / "vendor", ws() / "ro", upper() / "ro"})
    ASSERT_EQ(::chmod(dir.c_str(), 0555), 0);
  ASSERT_TRUE(hand_to_ordinary_user(base_.path()));
  const int status = testing::run_as_ordinary_user([&] {
    Workspace workspace(ws());
    const auto tx = staged_taking_upper(workspace, upper());
    if (!tx) return 10;
    try {
      workspace.commit(*tx);
      return 11;
    } catch (const SandboxError& error) {
      if (std::string(error.what()).find("what ro holds") == std::string::npos) {
        std::fprintf(stderr, "%s\n", error.what());
        return 12;
      }
    }
    workspace.commit(*tx, CommitOptions{.paths = {"vendor"}});
    if (fs::exists(ws() / "vendor")) return 13;
    ::chmod((ws() / "ro").c_str(), 0755);
    Workspace(ws()).commit(*tx);
    return 0;
  });
  EXPECT_EQ(status, 0) << "10: not staged; 11: committed; 12: the error; 13: vendor left; 101: "
                          "an error";
  EXPECT_EQ(lstat_of(ws() / "ro" / "h.txt").st_mode & 07777, 0600u);
  EXPECT_EQ(lstat_of(ws() / "h-link.txt").st_mode & 07777, 0644u) << "its other link changed";
}

// An entry of the user's with another group's setgid bit: the kernel drops
// that bit from any chmod of its owner's, the widening's too, and the
// owner's added read permission was then left on for good (the mode no
// longer the one added). It comes off; the bit, which the owner can never
// set again, is gone (an import notes dropped setgid bits).
TEST_F(WorkspaceImportTest, AnEntryOpenedAsItsOwnerGetsItsModeBackWithoutItsSetgidBit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to give the file a group its owner is not in";
  write_file(upper() / "g.txt", "g\n");
  ASSERT_TRUE(hand_to_ordinary_user(base_.path()));
  ASSERT_EQ(::chown((upper() / "g.txt").c_str(), 65534, 4321), 0);
  ASSERT_EQ(::chmod((upper() / "g.txt").c_str(), 02000), 0);
  const int status = testing::run_as_ordinary_user([&] {
    const int dir = ::open(upper().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const struct stat st = lstat_of(upper() / "g.txt");
    {
      const workspace::OwnerOpened file(dir, "g.txt", O_RDONLY, st);
      char byte = 0;
      if (!file || ::read(file.get(), &byte, 1) != 1 || byte != 'g') return 10;
    }
    ::close(dir);
    return 0;
  });
  ASSERT_EQ(status, 0) << "10: not read as its owner";
  EXPECT_EQ(lstat_of(upper() / "g.txt").st_mode & 07777, 0u);
}

// The directory cannot go back after the draft failed to become the
// manifest (a name in the way where it was): it stays with its draft, the
// import fails saying where the changes are, and once the way is clear the
// next opening stages them. Before, the draft was removed and the run's
// files sat under an empty manifest.
TEST_F(WorkspaceImportTest, ADirectoryThatCannotGoBackIsStagedByTheNextOpening) {
  write_file(upper() / "a.txt", "a\n");
  const fs::path transactions = ws() / ".agent" / "transactions";
  std::string error;
  workspace::commit_failpoint = [&](std::string_view at) {
    if (at != "import: upper directory moved") return;
    for (const auto& tx : fs::directory_iterator(transactions)) {
      fs::remove(tx.path() / "manifest.json");
      fs::create_directories(tx.path() / "manifest.json" / "in-the-way");
    }
    write_file(upper() / "in-the-way", "x\n");  // the rename back fails: not empty
  };
  try {
    (void)Workspace(ws()).import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true});
  } catch (const std::exception& thrown) {
    error = thrown.what();
  }
  workspace::commit_failpoint = nullptr;
  EXPECT_NE(error.find("could not be moved back"), std::string::npos) << error;
  EXPECT_NE(error.find("the next opening of the workspace stages them"), std::string::npos)
      << error;
  for (const auto& tx : fs::directory_iterator(transactions))
    fs::remove_all(tx.path() / "manifest.json");
  fs::remove_all(upper());
  Workspace workspace(ws());
  const auto listed = workspace.list_transactions();
  ASSERT_EQ(listed.size(), 1u);
  ASSERT_EQ(listed[0].changes.size(), 1u);
  EXPECT_EQ(listed[0].changes[0].path, "a.txt");
  workspace.commit(listed[0].id);
  EXPECT_EQ(read_file(ws() / "a.txt"), "a\n");
}

// A file planted in such a directory after the import (not one the
// transaction stages) makes it go entry by entry: the planted file never
// reaches the workspace.
TEST_F(WorkspaceImportTest, AFilePlantedInANewDirectoryNeverReachesTheWorkspace) {
  fs::create_directories(upper() / "new");
  write_file(upper() / "new" / "a.txt", "a\n");
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  const fs::path kept = tx_dir(*tx) / "blobs" / "u" / "new";
  const ino_t kept_inode = lstat_of(kept).st_ino;
  write_file(kept / "planted.sh", "#!/bin/sh\n");
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "new" / "a.txt"), "a\n");
  EXPECT_FALSE(fs::exists(ws() / "new" / "planted.sh"));
  EXPECT_NE(lstat_of(ws() / "new").st_ino, kept_inode) << "made anew, not moved";
}

// As root, each committed entry takes the owner of the directory it is
// made in (a directory this commit made included), and a replaced file
// keeps its own: the commit stats each directory once, not each file.
TEST_F(WorkspaceImportTest, CommittedEntriesTakeTheirDirectorysOwnerAsRoot) {
  PULSEBOX_SKIP_UNLESS_ROOT("giving files another user's owner needs root");
  fs::create_directories(ws() / "sub");
  ASSERT_EQ(::chown(ws().c_str(), 23456, 23457), 0);
  ASSERT_EQ(::chown((ws() / "sub").c_str(), 34567, 34568), 0);
  ASSERT_EQ(::chown((ws() / "README").c_str(), 45678, 45679), 0);
  write_file(upper() / "a.txt", "a\n");
  write_file(upper() / "README", "replaced\n");
  fs::create_directories(upper() / "sub");
  write_file(upper() / "sub" / "b.txt", "b\n");
  fs::create_directories(upper() / "new" / "deeper");
  write_file(upper() / "new" / "c.txt", "c\n");
  write_file(upper() / "new" / "deeper" / "d.txt", "d\n");

  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  const auto owner = [&](const char* name) {
    const struct stat st = lstat_of(ws() / name);
    return std::make_pair(st.st_uid, st.st_gid);
  };
  using Owner = std::pair<uid_t, gid_t>;
  EXPECT_EQ(owner("a.txt"), Owner(23456, 23457));
  EXPECT_EQ(owner("README"), Owner(45678, 45679));
  EXPECT_EQ(read_file(ws() / "README"), "replaced\n");
  EXPECT_EQ(owner("sub/b.txt"), Owner(34567, 34568));
  EXPECT_EQ(owner("new"), Owner(23456, 23457));
  EXPECT_EQ(owner("new/c.txt"), Owner(23456, 23457));
  EXPECT_EQ(owner("new/deeper"), Owner(23456, 23457));
  EXPECT_EQ(owner("new/deeper/d.txt"), Owner(23456, 23457));
}

// A file taken as its blob is not read when nothing needs its content; a
// registered secret value makes the import read (and scan) every one.
TEST_F(WorkspaceImportTest, ATakenFileIsStillScannedWhenASecretIsRegistered) {
  const std::string secret = "hunter2-token-value";
  write_file(upper() / "config.env", "TOKEN=" + secret + "\n");
  write_file(upper() / "clean.txt", "nothing here\n");
  const SecretScrubber scrubber({secret});
  Workspace workspace(ws());
  const auto tx = workspace
                      .import_overlay(upper(), ws(),
                                      ImportOptions{.secrets = &scrubber, .take_upper_files = true})
                      .transaction;
  ASSERT_TRUE(tx.has_value());
  EXPECT_FALSE(fs::exists(upper() / "config.env"));  // taken: linked, not copied
  std::map<std::string, bool> flagged;
  for (const auto& change : workspace.describe(*tx).changes)
    flagged[change.path] = change.contains_secret;
  EXPECT_TRUE(flagged["config.env"]);
  EXPECT_FALSE(flagged["clean.txt"]);
  EXPECT_THROW((void)workspace.commit(*tx), SandboxSecurityError);
  EXPECT_FALSE(fs::exists(ws() / "config.env"));
}

// A file staged unread whose link fails (an upper directory on another
// file system, as --disk's tmpfs is) is read then and copied whole.
TEST_F(WorkspaceImportTest, AnUnreadFileOnAnotherFileSystemIsCopiedWhole) {
  const fs::path shm = "/dev/shm";
  struct stat shm_st {};
  if (::stat(shm.c_str(), &shm_st) != 0 || shm_st.st_dev == lstat_of(ws()).st_dev) {
    GTEST_SKIP() << "needs /dev/shm on a file system other than " << ws();
  }
  char pattern[] = "/dev/shm/pulsebox-upper-XXXXXX";
  ASSERT_NE(::mkdtemp(pattern), nullptr);
  const fs::path other = pattern;
  std::string big(300000, 'x');
  for (std::size_t i = 0; i < big.size(); i += 997)
    big[i] = static_cast<char>('a' + i % 26);
  write_file(other / "big.bin", big);
  write_file(other / "empty", "");
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(other, ws(), ImportOptions{.take_upper_files = true}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "big.bin"), big);
  EXPECT_EQ(read_file(ws() / "empty"), "");
  EXPECT_NE(lstat_of(ws() / "big.bin").st_dev, lstat_of(other).st_dev);
  std::error_code ec;
  fs::remove_all(other, ec);
}

// A layer that is kept (a session's) is never taken from: copies only.
TEST_F(WorkspaceImportTest, AKeptLayerIsCopiedAndLeftWhole) {
  write_file(upper() / "plain.txt", "plain\n");
  const ino_t inode = lstat_of(upper() / "plain.txt").st_ino;
  Workspace workspace(ws());
  const auto tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  EXPECT_EQ(lstat_of(upper() / "plain.txt").st_nlink, 1u);
  workspace.commit(*tx);
  EXPECT_EQ(read_file(upper() / "plain.txt"), "plain\n");
  EXPECT_NE(lstat_of(ws() / "plain.txt").st_ino, inode);
}

// Each swap with a symlink whose target lies outside the workspace: the
// import reads it as a symlink, the commit replaces it, and nothing outside
// is ever written.
TEST_F(WorkspaceImportTest, SymlinkReplacedByADirectory) {
  fs::create_symlink(outside(), ws() / "d");
  fs::create_directories(upper() / "d/sub");
  write_file(upper() / "d/secret.txt", "inside\n");
  Workspace workspace(ws());
  const ImportResult result = workspace.import_overlay(upper(), ws(), ImportOptions{});
  ASSERT_TRUE(result.transaction.has_value());
  EXPECT_TRUE(result.refused.empty());
  const std::string diff = workspace.diff(*result.transaction);
  EXPECT_NE(diff.find("+inside"), std::string::npos) << diff;
  workspace.commit(*result.transaction);
  EXPECT_TRUE(S_ISDIR(lstat_of(ws() / "d").st_mode));
  EXPECT_EQ(read_file(ws() / "d/secret.txt"), "inside\n");
  EXPECT_TRUE(fs::is_directory(ws() / "d/sub"));
  expect_outside_untouched();
}

TEST_F(WorkspaceImportTest, DirectoryReplacedByASymlinkAndBack) {
  write_file(ws() / "d/old.txt", "old\n");
  fs::create_symlink(outside(), upper() / "d");
  Workspace workspace(ws());
  auto tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_TRUE(fs::is_symlink(ws() / "d"));
  EXPECT_EQ(fs::read_symlink(ws() / "d"), outside());
  expect_outside_untouched();

  // Back: the symlink (to outside) becomes a directory again.
  fs::remove(upper() / "d");
  write_file(upper() / "d/new.txt", "new\n");
  tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_TRUE(S_ISDIR(lstat_of(ws() / "d").st_mode));
  EXPECT_EQ(read_file(ws() / "d/new.txt"), "new\n");
  expect_outside_untouched();
}

TEST_F(WorkspaceImportTest, DirectoryReplacedByAFileAndBack) {
  write_file(ws() / "d/old.txt", "old\n");
  write_file(upper() / "d", "now a file\n");
  Workspace workspace(ws());
  auto tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "d"), "now a file\n");

  fs::remove(upper() / "d");
  write_file(upper() / "d/again.txt", "again\n");
  tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_EQ(read_file(ws() / "d/again.txt"), "again\n");
}

TEST_F(WorkspaceImportTest, SymlinkToAnOutsideFileReplacedByAFile) {
  fs::create_symlink(outside() / "secret.txt", ws() / "f");
  write_file(upper() / "f", "replaced\n");
  Workspace workspace(ws());
  const auto tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  workspace.commit(*tx);
  EXPECT_FALSE(fs::is_symlink(ws() / "f"));
  EXPECT_EQ(read_file(ws() / "f"), "replaced\n");
  expect_outside_untouched();
}

TEST_F(WorkspaceImportTest, CommitKeepsTimesModesTargetsAndEmptyDirectories) {
  constexpr std::int64_t kFile = 1000000000LL * 1000000000 + 123456789;
  constexpr std::int64_t kLink = 1100000000LL * 1000000000 + 5;
  constexpr std::int64_t kDir = 1200000000LL * 1000000000 + 7;
  constexpr std::int64_t kEmpty = 1300000000LL * 1000000000 + 9;
  write_file(upper() / "pkg/mod.pyc", "bytecode");
  ASSERT_EQ(::chmod((upper() / "pkg/mod.pyc").c_str(), 0640), 0);
  fs::create_symlink("mod.pyc", upper() / "pkg/link");
  fs::create_directories(upper() / "pkg/empty");
  ASSERT_EQ(::chmod((upper() / "pkg/empty").c_str(), 0700), 0);
  set_mtime(upper() / "pkg/mod.pyc", kFile);
  set_mtime(upper() / "pkg/link", kLink);
  set_mtime(upper() / "pkg/empty", kEmpty);
  set_mtime(upper() / "pkg", kDir);
  Workspace workspace(ws());
  const auto tx = workspace.import_overlay(upper(), ws(), ImportOptions{}).transaction;
  ASSERT_TRUE(tx.has_value());
  for (const auto& change : workspace.describe(*tx).changes) {
    if (change.path == "pkg/mod.pyc") {
      EXPECT_EQ(change.mtime_ns, kFile);
    }
  }
  workspace.commit(*tx);
  EXPECT_EQ(mtime_ns(ws() / "pkg/mod.pyc"), kFile);
  EXPECT_EQ(lstat_of(ws() / "pkg/mod.pyc").st_mode & 07777, 0640u);
  EXPECT_EQ(fs::read_symlink(ws() / "pkg/link"), "mod.pyc");
  EXPECT_EQ(mtime_ns(ws() / "pkg/link"), kLink);
  EXPECT_TRUE(fs::is_empty(ws() / "pkg/empty"));
  EXPECT_EQ(lstat_of(ws() / "pkg/empty").st_mode & 07777, 0700u);
  EXPECT_EQ(mtime_ns(ws() / "pkg/empty"), kEmpty);
  EXPECT_EQ(mtime_ns(ws() / "pkg"), kDir);
}

// The import's own summary (a run reports it without reading the manifest
// back) is what describe() lists: each path with its kind, and the secret.
TEST_F(WorkspaceImportTest, TheImportsSummaryIsWhatDescribeLists) {
  const std::string secret = "hunter2-token-value";
  write_file(upper() / "README", "changed\n");
  write_file(upper() / "new" / "clean.txt", "nothing here\n");
  write_file(upper() / "new" / "config.env", "TOKEN=" + secret + "\n");
  fs::create_symlink("clean.txt", upper() / "new" / "link");
  const bool root = ::geteuid() == 0;
  if (root) write_file(ws() / "gone.txt", "gone\n");
  const SecretScrubber scrubber({secret});
  for (const bool in_place : {false, true}) {
    SCOPED_TRACE(in_place ? "files kept in place" : "files linked");
    const fs::path from = base_.path() / (in_place ? "upper-kept" : "upper-linked");
    fs::copy(upper(), from, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    if (root) {  // a whiteout: the run deleted gone.txt
      ASSERT_EQ(::mknod((from / "gone.txt").c_str(), S_IFCHR | 0000, makedev(0, 0)), 0);
    }
    Workspace workspace(ws());
    const ImportResult result = workspace.import_overlay(
        from, ws(), ImportOptions{.secrets = &scrubber, .take_upper_files = in_place});
    ASSERT_TRUE(result.transaction.has_value());
    const TransactionInfo info = workspace.describe(*result.transaction);
    std::vector<std::pair<std::string, ChangeKind>> described, summarised;
    for (const auto& change : info.changes)
      described.emplace_back(change.path, change.kind);
    for (const auto& change : result.staged)
      summarised.emplace_back(change.path, change.kind);
    EXPECT_EQ(summarised, described);
    EXPECT_EQ(summarised.size(), root ? 6u : 5u);
    EXPECT_EQ(fs::exists(tx_dir(*result.transaction) / "blobs" / "u"), in_place);
    EXPECT_TRUE(result.contains_secrets);
    EXPECT_EQ(result.contains_secrets, info.contains_secrets);
    workspace.discard(*result.transaction);
  }
}

// A command that writes a --secret value into a file: the change is
// flagged, the diff shows it redacted, and commit refuses it unless allowed.
TEST_F(WorkspaceImportTest, AChangeHoldingASecretIsFlaggedRedactedAndRefused) {
  const std::string secret = "hunter2-token-value";
  write_file(upper() / "config.env", "TOKEN=" + secret + "\n");
  write_file(upper() / "encoded.txt", "aHVudGVyMi10b2tlbi12YWx1ZQ==\n");  // base64 of it
  write_file(upper() / "clean.txt", "nothing here\n");
  fs::create_symlink(secret, upper() / "link");
  const SecretScrubber scrubber({secret});
  Workspace workspace(ws());
  const auto tx =
      workspace.import_overlay(upper(), ws(), ImportOptions{.secrets = &scrubber}).transaction;
  ASSERT_TRUE(tx.has_value());
  const TransactionInfo info = workspace.describe(*tx);
  EXPECT_TRUE(info.contains_secrets);
  std::map<std::string, bool> flagged;
  for (const auto& change : info.changes)
    flagged[change.path] = change.contains_secret;
  EXPECT_TRUE(flagged["config.env"]);
  EXPECT_TRUE(flagged["encoded.txt"]);
  EXPECT_TRUE(flagged["link"]);
  EXPECT_FALSE(flagged["clean.txt"]);

  const std::string diff = workspace.diff(*tx);
  EXPECT_EQ(diff.find(secret), std::string::npos) << diff;
  EXPECT_EQ(diff.find("aHVudGVyMi10b2tlbi12YWx1ZQ"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+TOKEN=[REDACTED_SECRET]"), std::string::npos) << diff;
  EXPECT_NE(diff.find("+nothing here"), std::string::npos) << diff;

  try {
    (void)workspace.commit(*tx);
    FAIL() << "committed a secret";
  } catch (const SandboxSecurityError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("config.env"), std::string::npos) << what;
    EXPECT_NE(what.find("link"), std::string::npos) << what;
    EXPECT_EQ(what.find("clean.txt"), std::string::npos) << what;
    EXPECT_EQ(what.find(secret), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(ws() / "config.env"));
  // The clean part may go alone; the rest with the user's explicit choice.
  workspace.commit(*tx, CommitOptions{.paths = {"clean.txt"}, .allow_secrets = false});
  workspace.commit(*tx, CommitOptions{.paths = {}, .allow_secrets = true});
  EXPECT_EQ(read_file(ws() / "config.env"), "TOKEN=" + secret + "\n");
}

}  // namespace
}  // namespace pulsebox
