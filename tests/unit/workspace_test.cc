#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

using testing::read_file;
using testing::TempDir;
using testing::write_file;

class WorkspaceTest : public ::testing::Test {
 protected:
  WorkspaceTest() {
    write_file(dir_ / "src/main.cc", "int main() { return 0; }\n");
    write_file(dir_ / "README", "readme\n");
    write_file(dir_ / "old/a.txt", "a\n");
    write_file(dir_ / "old/deep/b.txt", "b\n");
  }
  Workspace workspace() const { return Workspace(dir_.path()); }
  TempDir dir_;
};

TEST_F(WorkspaceTest, StageAndCommitEveryKindOfChange) {
  auto ws = workspace();
  const auto tx = ws.create_transaction("unit test");
  const std::string binary(
      "\x7f"
      "ELF\x00\x01\x02\xff",
      8);
  ws.stage_write(tx, "bin/tool", binary, 0755);  // new file in a new directory
  ws.stage_mkdir(tx, "bin", 0750);
  ws.stage_write(tx, "src/main.cc", "int main() { return 1; }\n");
  ws.stage_delete(tx, "old");  // a whole directory
  ws.stage_symlink(tx, "link", "src/main.cc");
  ws.stage_chmod(tx, "README", 0600);
  EXPECT_EQ(ws.list_transactions().size(), 1u);
  const auto info = ws.describe(tx);
  ASSERT_EQ(info.changes.size(), 6u);
  EXPECT_EQ(info.origin, "unit test");
  // Nothing touched the workspace yet.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "bin"));
  EXPECT_EQ(read_file(dir_ / "src/main.cc"), "int main() { return 0; }\n");

  const auto changed = ws.commit(tx);
  EXPECT_EQ(changed.size(), 6u);
  EXPECT_EQ(read_file(dir_ / "bin/tool"), binary);
  EXPECT_EQ(std::filesystem::status(dir_ / "bin/tool").permissions() & std::filesystem::perms::all,
            static_cast<std::filesystem::perms>(0755));
  EXPECT_EQ(std::filesystem::status(dir_ / "bin").permissions() & std::filesystem::perms::all,
            static_cast<std::filesystem::perms>(0750));
  EXPECT_EQ(read_file(dir_ / "src/main.cc"), "int main() { return 1; }\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "old"));
  EXPECT_EQ(std::filesystem::read_symlink(dir_ / "link"), "src/main.cc");
  EXPECT_EQ(std::filesystem::status(dir_ / "README").permissions() & std::filesystem::perms::all,
            static_cast<std::filesystem::perms>(0600));
  EXPECT_TRUE(ws.list_transactions().empty());
}

// Stagings into one transaction at once (an agent's server handling two
// requests) each keep their change. Each loaded, changed and saved the
// manifest without a lock: two that loaded the same one gave their files the
// same staged name, and one failed ("File exists").
TEST_F(WorkspaceTest, StagingsAtOnceEachKeepTheirChange) {
  const std::string tx = workspace().create_transaction();
  constexpr int kEach = 60;
  std::string errors[2];
  const auto stage = [&](int which) {
    try {
      Workspace ws(dir_.path());
      for (int i = 0; i < kEach; ++i)
        ws.stage_write(tx, std::to_string(which) + "-" + std::to_string(i), "x\n");
    } catch (const std::exception& error) {
      errors[which] = error.what();
    }
  };
  std::thread first(stage, 0);
  std::thread second(stage, 1);
  first.join();
  second.join();
  EXPECT_EQ(errors[0] + errors[1], "");
  EXPECT_EQ(workspace().describe(tx).changes.size(), 2u * kEach);
}

// A transaction whose commit was decided (READY) and interrupted takes no
// more changes: its replay applies what was decided, and one staged after
// it was dropped without a word.
TEST_F(WorkspaceTest, StagingIntoADecidedCommitIsRefused) {
  auto ws = workspace();
  const std::string tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  const auto dir = dir_.path() / ".agent/transactions" / tx;
  const std::string manifest = testing::read_file(dir / "manifest.json");
  write_file(dir / "READY", "");
  EXPECT_THROW(ws.stage_write(tx, "new.txt", "late\n"), SandboxRecoveryError);
  EXPECT_EQ(testing::read_file(dir / "manifest.json"), manifest);
}

TEST_F(WorkspaceTest, ChangeKinds) {
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "new.txt", "x");
  ws.stage_write(tx, "README", "changed\n");
  ws.stage_delete(tx, "old/a.txt");
  ws.stage_chmod(tx, "src/main.cc", 0700);
  ws.stage_symlink(tx, "l", "README");
  std::map<std::string, ChangeKind> kinds;
  for (const auto& change : ws.describe(tx).changes)
    kinds[change.path] = change.kind;
  EXPECT_EQ(kinds.at("new.txt"), ChangeKind::Added);
  EXPECT_EQ(kinds.at("README"), ChangeKind::Modified);
  EXPECT_EQ(kinds.at("old/a.txt"), ChangeKind::Deleted);
  EXPECT_EQ(kinds.at("src/main.cc"), ChangeKind::Mode);
  EXPECT_EQ(kinds.at("l"), ChangeKind::Symlink);
}

struct ConflictCase {
  const char* name;
  void (*mutate)(const std::filesystem::path& root);
  const char* reason;
};

class WorkspaceConflictTest : public WorkspaceTest,
                              public ::testing::WithParamInterface<ConflictCase> {};

TEST_P(WorkspaceConflictTest, ConcurrentChangeRefusesWholeCommitAndKeepsTransaction) {
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "mine\n");
  ws.stage_write(tx, "fresh.txt", "mine\n");
  ws.stage_write(tx, "src/main.cc", "mine\n");
  ws.stage_delete(tx, "old");
  GetParam().mutate(dir_.path());
  try {
    ws.commit(tx);
    FAIL() << "commit succeeded despite: " << GetParam().name;
  } catch (const SandboxConcurrentModificationError& error) {
    EXPECT_NE(std::string(error.what()).find(GetParam().reason), std::string::npos) << error.what();
    EXPECT_FALSE(error.paths().empty());
  }
  // Nothing applied, transaction kept.
  EXPECT_NE(read_file(dir_ / "src/main.cc"), "mine\n");
  EXPECT_EQ(ws.list_transactions().size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    Kinds, WorkspaceConflictTest,
    ::testing::Values(
        ConflictCase{"created", [](const auto& r) { write_file(r / "fresh.txt", "theirs"); },
                     "fresh.txt: created"},
        ConflictCase{"deleted", [](const auto& r) { std::filesystem::remove(r / "README"); },
                     "README: deleted"},
        ConflictCase{"content", [](const auto& r) { write_file(r / "README", "theirs\n"); },
                     "README: content changed"},
        ConflictCase{"replaced",
                     [](const auto& r) {
                       write_file(r / "README.new", "readme\n");
                       std::filesystem::rename(r / "README.new", r / "README");
                     },
                     "README: replaced by another file"},
        ConflictCase{"type",
                     [](const auto& r) {
                       std::filesystem::remove(r / "README");
                       std::filesystem::create_directory(r / "README");
                     },
                     "README: replaced: was a file, now a directory"},
        ConflictCase{"mode", [](const auto& r) { ::chmod((r / "README").c_str(), 0600); },
                     "README: mode changed"},
        ConflictCase{"mtime",
                     [](const auto& r) {
                       const timespec times[2] = {{0, UTIME_OMIT}, {1000, 0}};
                       ::utimensat(AT_FDCWD, (r / "README").c_str(), times, 0);
                     },
                     "README: modification time changed"},
        ConflictCase{"deep in a deleted tree",
                     [](const auto& r) { write_file(r / "old/deep/b.txt", "theirs\n"); },
                     "old: directory contents changed"}),
    [](const ::testing::TestParamInfo<ConflictCase>& param_info) {
      std::string name = param_info.param.name;
      for (char& c : name) {
        if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
      }
      return name;
    });

TEST_F(WorkspaceTest, SnapshotIsTakenWhenFirstStaged) {
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "one\n");
  write_file(dir_ / "README", "theirs\n");
  ws.stage_write(tx, "README", "two\n");  // restaging keeps the first snapshot
  EXPECT_THROW(ws.commit(tx), SandboxConcurrentModificationError);
}

// Whether this file system stamps a queried file's next change finer than
// its clock's tick (the kernel's multigrain time stamps): two changes in a
// row with a stat between get two different stamps.
bool stamps_finer_than_a_tick(const std::filesystem::path& dir) {
  const auto probe = dir / "stamp-probe";
  write_file(probe, "");
  const int fd = ::open(probe.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return false;
  bool finer = true;
  for (int i = 0; i < 5 && finer; ++i) {
    struct stat first {};
    struct stat second {};
    finer = ::futimens(fd, nullptr) == 0 && ::fstat(fd, &first) == 0 &&
            ::futimens(fd, nullptr) == 0 && ::fstat(fd, &second) == 0 &&
            (first.st_ctim.tv_sec != second.st_ctim.tv_sec ||
             first.st_ctim.tv_nsec != second.st_ctim.tv_nsec);
  }
  ::close(fd);
  std::filesystem::remove(probe);
  return finer;
}

std::int64_t ctime_ns(const std::filesystem::path& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return std::int64_t{st.st_ctim.tv_sec} * 1'000'000'000 + st.st_ctim.tv_nsec;
}

// The clock file of this user's own that stamp_now() falls back to.
std::string own_clock_name() {
  return "clock-" + std::to_string(::geteuid());
}

std::int64_t stamp_ns(const Workspace& ws) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(ws.stamp_now().time_since_epoch())
      .count();
}

// A file the host writes right before a run must not count as changed during
// it: the same tick stamps both, so only a stamp finer than the tick tells
// them apart. Each round: a change, the stamp, a change.
TEST_F(WorkspaceTest, TheRunsStampIsAfterEveryEarlierChangeAndAtOrBeforeEveryLaterOne) {
  PULSEBOX_SKIP_UNLESS(stamps_finer_than_a_tick(dir_.path()),
                       "the file system under " + dir_.path().string() +
                           " stamps changes by its clock's tick (no multigrain time stamps)");
  auto ws = workspace();
  for (int round = 0; round < 200; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    // A file of its own each round, made then written: on even rounds
    // queried between (its change then takes a precise stamp), on odd ones
    // not (the host's usual write, stamped by the coarse clock or newer).
    const auto before = dir_ / ("before-" + std::to_string(round) + ".txt");
    write_file(before, "");
    if (round % 2 == 0) (void)ctime_ns(before);
    write_file(before, "before\n");
    // The same for the change after the stamp, alternating every two
    // rounds, so that each pair of queried and unqueried files occurs.
    const auto after = dir_ / ("after-" + std::to_string(round) + ".txt");
    write_file(after, "");
    if ((round / 2) % 2 == 0) (void)ctime_ns(after);
    const std::int64_t stamp = stamp_ns(ws);
    write_file(after, "after\n");
    ASSERT_LT(ctime_ns(before), stamp);
    ASSERT_GE(ctime_ns(after), stamp);
  }
}

// Where .agent/clock cannot be changed the stamp is read off the clock file
// systems stamp with, never the precise one that runs ahead of it: a change
// made right after it must not look older than the run. Rounded down to an
// even second, it stays at or before a stamp of whole seconds (or two).
TEST_F(WorkspaceTest, WithoutItsClockFileTheStampIsStillAtOrBeforeEveryLaterChange) {
  auto ws = workspace();
  // open(O_RDWR) fails (EISDIR) for both the clock and the user's own
  std::filesystem::create_directories(dir_ / ".agent/clock");
  std::filesystem::create_directories(dir_ / ".agent" / own_clock_name());
  for (int round = 0; round < 500; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    const std::int64_t stamp = stamp_ns(ws);
    ASSERT_EQ(stamp % 2'000'000'000, 0) << stamp;
    write_file(dir_ / "after.txt", "after " + std::to_string(round) + "\n");
    ASSERT_GE(ctime_ns(dir_ / "after.txt"), stamp);
  }
}

// A clock file this user cannot write (left by a run as root, or made
// read-only), or one another user could write, is left alone and the
// user's own .agent/clock-UID stamped: the stamp stays the file system's,
// where the coarse fallback counts a host change made up to two seconds
// before the run as made during it. As root the clock is root's and
// writable by all, the stamp taken by a child that is uid 65534.
TEST_F(WorkspaceTest, AClockFileThisUserCannotWriteGivesWayToTheUsersOwn) {
  auto ws = workspace();
  const auto clock = dir_ / ".agent/clock";
  std::filesystem::create_directories(dir_ / ".agent");
  write_file(clock, "");
  const bool as_root = ::geteuid() == 0;
  ASSERT_EQ(::chmod(clock.c_str(), as_root ? 0666 : 0400), 0);
  const uid_t first_owner = ::geteuid();
  ASSERT_TRUE(testing::hand_to_ordinary_user(dir_.path()));
  ASSERT_EQ(::lchown(clock.c_str(), first_owner, static_cast<gid_t>(-1)), 0);  // left as it was
  struct stat before {};
  ASSERT_EQ(::lstat(clock.c_str(), &before), 0);
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  uid_t user = 0;
  const int status = testing::run_as_ordinary_user([&] {
    const std::int64_t stamp = stamp_ns(ws);
    user = ::geteuid();
    const bool sent = ::write(pipe_fds[1], &stamp, sizeof stamp) == sizeof stamp &&
                      ::write(pipe_fds[1], &user, sizeof user) == sizeof user;
    return sent ? 0 : 3;
  });
  ::close(pipe_fds[1]);
  std::int64_t stamp = 0;
  const bool read_back = ::read(pipe_fds[0], &stamp, sizeof stamp) == sizeof stamp &&
                         ::read(pipe_fds[0], &user, sizeof user) == sizeof user;
  ::close(pipe_fds[0]);
  ASSERT_EQ(status, 0);
  ASSERT_TRUE(read_back);
  const auto own = dir_ / (".agent/clock-" + std::to_string(user));
  struct stat st {};
  ASSERT_EQ(::lstat(own.c_str(), &st), 0) << own;
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_uid, user);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_EQ(stamp, ctime_ns(own)) << "the stamp is not the user's clock file's (the fallback's "
                                  << (stamp % 2'000'000'000 == 0 ? "even second" : "?") << ")";
  struct stat after {};
  ASSERT_EQ(::lstat(clock.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(after.st_uid, before.st_uid);
  EXPECT_EQ(after.st_mode, before.st_mode);
  EXPECT_EQ(after.st_ctim.tv_sec, before.st_ctim.tv_sec);
  EXPECT_EQ(after.st_ctim.tv_nsec, before.st_ctim.tv_nsec);
}

// A clock that is not a regular file (a FIFO here: opened for writing it
// would not block, but it is no file system stamp) gives way to the
// user's own.
TEST_F(WorkspaceTest, AClockThatIsNotARegularFileGivesWayToTheUsersOwn) {
  auto ws = workspace();
  std::filesystem::create_directories(dir_ / ".agent");
  const auto clock = dir_ / ".agent/clock";
  ASSERT_EQ(::mkfifo(clock.c_str(), 0600), 0);
  const std::int64_t stamp = stamp_ns(ws);
  EXPECT_EQ(stamp, ctime_ns(dir_ / ".agent" / own_clock_name()));
  EXPECT_TRUE(std::filesystem::is_fifo(clock));
}

// A .agent that is a symbolic link is not followed to stamp a file where it
// leads (the run refuses such a workspace elsewhere; the stamp falls back).
TEST_F(WorkspaceTest, TheStampFollowsNoLinkAtDotAgent) {
  auto ws = workspace();
  const TempDir elsewhere;
  write_file(elsewhere / "clock", "");
  std::filesystem::create_directory_symlink(elsewhere.path(), dir_ / ".agent");
  const std::int64_t ctime_before = ctime_ns(elsewhere / "clock");
  const std::int64_t stamp = stamp_ns(ws);
  EXPECT_EQ(stamp % 2'000'000'000, 0) << stamp;
  EXPECT_EQ(ctime_ns(elsewhere / "clock"), ctime_before);
  EXPECT_FALSE(std::filesystem::exists(elsewhere / own_clock_name()));
}

TEST_F(WorkspaceTest, Limits) {
  Workspace ws(dir_.path(), default_workspace_policy(),
               {.max_total_bytes = 100, .max_file_bytes = 60, .max_open_transactions = 2});
  const auto tx = ws.create_transaction();
  EXPECT_THROW(ws.stage_write(tx, "a", std::string(61, 'x')), SandboxResourceError);
  ws.stage_write(tx, "a", std::string(60, 'x'));
  EXPECT_THROW(ws.stage_write(tx, "b", std::string(41, 'x')), SandboxResourceError);
  ws.stage_write(tx, "a", std::string(10, 'x'));  // restaging replaces, freeing budget
  ws.stage_write(tx, "b", std::string(41, 'x'));
  (void)ws.create_transaction();
  EXPECT_THROW((void)ws.create_transaction(), SandboxResourceError);
}

TEST_F(WorkspaceTest, ReferenceDefaultLimits) {
  WorkspaceLimits limits;
  EXPECT_EQ(limits.max_total_bytes, 256ull << 20);
  EXPECT_EQ(limits.max_file_bytes, 50ull << 20);
  EXPECT_EQ(limits.max_open_transactions, 16u);
}

TEST_F(WorkspaceTest, BadPathsAndModesAreRefused) {
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  EXPECT_THROW(ws.stage_write(tx, "../escape", "x"), SandboxSecurityError);
  EXPECT_THROW(ws.stage_write(tx, "/etc/passwd", "x"), SandboxSecurityError);
  EXPECT_THROW(ws.stage_write(tx, "suid", "x", 04755), SandboxSecurityError);
  EXPECT_THROW(ws.stage_chmod(tx, "README", 02755), SandboxSecurityError);
}

TEST_F(WorkspaceTest, SymlinkInWorkspaceCannotRedirectACommitOutside) {
  TempDir outside;
  std::filesystem::create_symlink(outside.path(), dir_ / "escape");
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  EXPECT_THROW(ws.stage_write(tx, "escape/owned.txt", "x"), SandboxSecurityError);
  EXPECT_FALSE(std::filesystem::exists(outside / "owned.txt"));
}

TEST_F(WorkspaceTest, ProtectedPathsAreRefusedAtCommitUnlessARuleNamesThem) {
  std::filesystem::create_directories(dir_ / ".git/hooks");
  // The default workspace policy refuses when staging through the API...
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  try {
    ws.stage_write(tx, ".git/hooks/pre-commit", "#!/bin/sh\ncurl evil\n", 0755);
    FAIL() << "protected path staged";
  } catch (const PolicyDenied& error) {
    EXPECT_NE(std::string(error.what()).find("protected path (.git/hooks: git runs the hooks"),
              std::string::npos)
        << error.what();
  }
  for (const char* path : {".git/config", ".envrc", ".github/workflows/ci.yml", ".agent/x",
                           ".vscode/tasks.json", ".git/modules/sub/hooks/post-checkout"}) {
    EXPECT_THROW(ws.stage_write(tx, path, "x"), PolicyDenied) << path;
  }
  // ...a bare "*" allow does not count...
  ActionPolicy broad = default_workspace_policy();
  broad.add_rule({ActionType::Write, "**", Decision::Allow, "everything"});
  Workspace broad_ws(dir_.path(), broad);
  EXPECT_THROW(broad_ws.stage_write(tx, ".git/hooks/pre-commit", "x"), PolicyDenied);
  // ...a rule naming the path does.
  ActionPolicy named = default_workspace_policy();
  named.add_rule({ActionType::Write, ".git/hooks/pre-commit", Decision::Allow, "reviewed"});
  Workspace named_ws(dir_.path(), named);
  named_ws.stage_write(tx, ".git/hooks/pre-commit", "#!/bin/sh\n", 0755);
  named_ws.commit(tx);
  EXPECT_TRUE(std::filesystem::exists(dir_ / ".git/hooks/pre-commit"));
}

TEST_F(WorkspaceTest, AProtectedPathIsRefusedThroughASymlinkedDirectory) {
  // A symlink the user made: staging through it lands in .git/hooks.
  std::filesystem::create_directories(dir_ / ".git/hooks");
  std::filesystem::create_directory_symlink(".git/hooks", dir_ / "hooks");
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  try {
    ws.stage_write(tx, "hooks/post-checkout", "#!/bin/sh\n", 0755);
    FAIL() << "a write through hooks -> .git/hooks was staged";
  } catch (const PolicyDenied& error) {
    EXPECT_NE(std::string(error.what()).find("it resolves to .git/hooks/post-checkout"),
              std::string::npos)
        << error.what();
  }
  // A symlink staged in the same transaction would be written through at
  // commit, wherever it points.
  ws.stage_symlink(tx, "link", "src");
  EXPECT_THROW(ws.stage_write(tx, "link/main.cc", "x"), SandboxSecurityError);
  EXPECT_FALSE(std::filesystem::exists(dir_ / ".git/hooks/post-checkout"));
}

TEST_F(WorkspaceTest, OnlyARuleThatSpellsOutAProtectedNameUnprotectsIt) {
  std::filesystem::create_directories(dir_ / "sub/.git");
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  for (const char* broad : {"*/*", "sub/*", "sub/**", "*.git/*", "*/config", "**/config"}) {
    ActionPolicy policy = default_workspace_policy();
    policy.add_rule({ActionType::Write, broad, Decision::Allow, "broad"});
    Workspace broad_ws(dir_.path(), policy);
    EXPECT_THROW(broad_ws.stage_write(tx, "sub/.git/config", "x"), PolicyDenied) << broad;
  }
  for (const char* named : {"sub/.git/config", "sub/.git/*", "**/.git/**"}) {
    ActionPolicy policy = default_workspace_policy();
    policy.add_rule({ActionType::Write, named, Decision::Allow, "named"});
    Workspace named_ws(dir_.path(), policy);
    EXPECT_NO_THROW(named_ws.stage_write(tx, "sub/.git/config", "x")) << named;
  }
}

TEST_F(WorkspaceTest, PolicyDenyRefusesStaging) {
  ActionPolicy policy = default_workspace_policy();
  policy.add_rule({ActionType::Delete, "src/*", Decision::Deny, "keep sources"});
  Workspace ws(dir_.path(), policy);
  const auto tx = ws.create_transaction();
  EXPECT_THROW(ws.stage_delete(tx, "src/main.cc"), PolicyDenied);
  // Replacing a file by a directory removes it: that needs DELETE too.
  EXPECT_THROW(ws.stage_mkdir(tx, "src/main.cc"), PolicyDenied);
  ws.stage_write(tx, "src/main.cc", "ok\n");
}

TEST_F(WorkspaceTest, DiscardRemovesTheTransactionOnly) {
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "README", "changed\n");
  ws.discard(tx);
  EXPECT_TRUE(ws.list_transactions().empty());
  EXPECT_EQ(read_file(dir_ / "README"), "readme\n");
  EXPECT_THROW(ws.discard(tx), SandboxConfigError);
  EXPECT_THROW(ws.commit("../../etc"), SandboxConfigError);
}

TEST_F(WorkspaceTest, DiffShowsEveryKind) {
  write_file(dir_ / "blob.bin", std::string("\x00\x01", 2));
  write_file(dir_ / "lines.txt", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n");
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "lines.txt", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n10");
  ws.stage_write(tx, "blob.bin", std::string("\x00\x02", 2));
  ws.stage_delete(tx, "README");
  ws.stage_chmod(tx, "src/main.cc", 0755);
  ws.stage_symlink(tx, "link", "README");
  ws.stage_write(tx, "new.txt", "hello\n");
  const std::string diff = ws.diff(tx);
  EXPECT_NE(diff.find("diff --git a/lines.txt b/lines.txt\n--- a/lines.txt\n+++ b/lines.txt\n"
                      "@@ -2,9 +2,9 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n 9\n-10\n+10\n"
                      "\\ No newline at end of file\n"),
            std::string::npos)
      << diff;
  EXPECT_NE(diff.find("Binary files a/blob.bin and b/blob.bin differ"), std::string::npos);
  EXPECT_NE(
      diff.find("deleted file mode 100644\n--- a/README\n+++ /dev/null\n@@ -1 +0,0 @@\n-readme\n"),
      std::string::npos)
      << diff;
  EXPECT_NE(diff.find("diff --git a/src/main.cc b/src/main.cc\nold mode 100644\nnew mode 100755\n"),
            std::string::npos)
      << diff;
  EXPECT_NE(diff.find("new file mode 120777\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+README\n"
                      "\\ No newline at end of file\n"),
            std::string::npos)
      << diff;
  EXPECT_NE(
      diff.find("new file mode 100644\n--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+hello\n"),
      std::string::npos);
  const std::string coloured = ws.diff(tx, true);
  EXPECT_NE(coloured.find("\033[32m+five\033[0m"), std::string::npos);
  EXPECT_NE(coloured.find("\033[31m-5\033[0m"), std::string::npos);
}

TEST_F(WorkspaceTest, DiffOfALargeRewriteStaysCorrect) {
  std::string before;
  std::string after;
  for (int i = 0; i < 20000; ++i) {
    before += "line " + std::to_string(i) + "\n";
    after += "other " + std::to_string(i) + "\n";
  }
  write_file(dir_ / "big.txt", before);
  auto ws = workspace();
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "big.txt", after);
  const std::string diff = ws.diff(tx);
  EXPECT_NE(diff.find("@@ -1,20000 +1,20000 @@\n"), std::string::npos);
  // diff --git, ---, +++, one hunk header, then every old and every new line.
  EXPECT_EQ(std::count(diff.begin(), diff.end(), '\n'), 4 + 40000);
}

}  // namespace
}  // namespace pulsebox
