// Kills a committing process after every single step of the commit in turn,
// then checks that reconcile() leaves either the old workspace (and a pending
// transaction that still commits) or the fully committed one, nothing between.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <map>
#include <thread>

#include "core/fs.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/workspace.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

using testing::listing;
using testing::TempDir;
using testing::write_file;

void populate(const std::filesystem::path& root) {
  write_file(root / "keep.txt", "unchanged\n");
  write_file(root / "modify.txt", "before\n");
  write_file(root / "delete.txt", "gone soon\n");
  write_file(root / "tree/a.txt", "a\n");
  write_file(root / "tree/sub/b.txt", "b\n");
  write_file(root / "dir-to-file/x", "x\n");
  write_file(root / "mode.sh", "#!/bin/sh\n");
}

std::string stage(Workspace& ws) {
  const auto tx = ws.create_transaction("crash test");
  ws.stage_write(tx, "modify.txt", "after\n");
  ws.stage_write(tx, "added/new.bin", std::string("\x00\x01\x02", 3), 0600);
  ws.stage_mkdir(tx, "added", 0755);
  ws.stage_delete(tx, "delete.txt");
  ws.stage_delete(tx, "tree");
  ws.stage_write(tx, "dir-to-file", "now a file\n");
  ws.stage_symlink(tx, "link", "keep.txt");
  ws.stage_chmod(tx, "mode.sh", 0755);
  return tx;
}

// Commits `tx` in a child process killed (SIGKILL) at the commit's
// `crash_after`-th step: its wait status, or -1 when it could not be run.
int commit_killed_at_step(const std::filesystem::path& dir, const std::string& tx,
                          const CommitOptions& options, int crash_after) {
  const pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {
    int steps = 0;
    workspace::commit_failpoint = [&](std::string_view) {
      if (++steps == crash_after) ::raise(SIGKILL);
    };
    try {
      Workspace(dir).commit(tx, options);
    } catch (...) {
      ::_exit(3);
    }
    ::_exit(0);
  }
  int status = 0;
  return ::waitpid(child, &status, 0) == child ? status : -1;
}

// populate()'s workspace in <upper>/../ws and the transaction `options`
// import from `upper`, which holds `files` (path, content).
std::string import_over_populated(const std::filesystem::path& upper,
                                  const std::map<std::string, std::string>& files,
                                  const ImportOptions& options) {
  const auto ws_dir = upper.parent_path() / "ws";
  populate(ws_dir);
  for (const auto& [path, content] : files)
    write_file(upper / path, content);
  return Workspace(ws_dir).import_overlay(upper, ws_dir, options).transaction.value();
}

// Commits the transaction `import(base)` makes in a fresh directory, killed
// at its 1st, 2nd, ... step until one runs whole; after each kill,
// reconcile() and a commit of what is still pending must give `new_state`,
// and `check(base, when)` runs. How many kills reconcile found past the
// commit point.
int killed_at_every_step(
    const std::function<std::string(const std::filesystem::path&)>& import,
    const std::map<std::string, std::string>& old_state,
    const std::map<std::string, std::string>& new_state,
    const std::function<void(const std::filesystem::path&, const std::string&)>& check =
        [](const std::filesystem::path&, const std::string&) {}) {
  int saw_new = 0;
  for (int crash_after = 1; crash_after < 60; ++crash_after) {
    const std::string when = "after crash at step " + std::to_string(crash_after);
    TempDir dir;
    const std::string tx = import(dir.path());
    const int status = commit_killed_at_step(dir.path() / "ws", tx, {}, crash_after);
    EXPECT_GE(status, 0);
    if (status < 0) return saw_new;
    if (WIFEXITED(status)) {
      EXPECT_EQ(WEXITSTATUS(status), 0) << "commit failed without a crash";
      EXPECT_EQ(listing(dir.path() / "ws"), new_state);
      check(dir.path(), "after the whole commit");
      return saw_new;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << when;
    Workspace ws(dir.path() / "ws");
    EXPECT_NO_THROW(ws.reconcile()) << when;
    if (listing(dir.path() / "ws") == old_state) {
      ws.commit(tx);
    } else {
      ++saw_new;
    }
    EXPECT_EQ(listing(dir.path() / "ws"), new_state) << when;
    EXPECT_TRUE(ws.list_transactions().empty());
    check(dir.path(), when);
  }
  ADD_FAILURE() << "the commit never ran whole in 60 steps";
  return saw_new;
}

TEST(CommitCrashTest, EveryStepLeavesOldOrNewAfterReconcile) {
  // The committed state, from an uninterrupted commit.
  TempDir reference;
  populate(reference.path());
  const auto old_state = listing(reference.path());
  {
    Workspace ws(reference.path());
    ws.commit(stage(ws));
  }
  const auto new_state = listing(reference.path());
  ASSERT_NE(old_state, new_state);

  int saw_old = 0;
  int saw_new = 0;
  bool completed = false;
  for (int crash_after = 1; crash_after < 100 && !completed; ++crash_after) {
    TempDir dir;
    populate(dir.path());
    std::string tx;
    {
      Workspace ws(dir.path());
      tx = stage(ws);
    }
    const int status = commit_killed_at_step(dir.path(), tx, {}, crash_after);
    ASSERT_GE(status, 0);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "commit failed without a crash";
      completed = true;  // the commit has fewer steps than crash_after
      EXPECT_EQ(listing(dir.path()), new_state);
      break;
    }
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

    Workspace ws(dir.path());
    ws.reconcile();
    const auto state = listing(dir.path());
    if (state == old_state) {
      ++saw_old;
      // Rolled back: the transaction is still pending and commits cleanly.
      ASSERT_EQ(ws.list_transactions().size(), 1u) << "after crash at step " << crash_after;
      ws.commit(tx);
      EXPECT_EQ(listing(dir.path()), new_state) << "retry after crash at step " << crash_after;
    } else {
      ++saw_new;
      ASSERT_EQ(state, new_state) << "half-committed workspace after crash at step " << crash_after;
      EXPECT_TRUE(ws.list_transactions().empty());
    }
    EXPECT_TRUE(ws.reconcile().replayed.empty()) << "reconcile is not idempotent";
  }
  EXPECT_TRUE(completed);
  EXPECT_GE(saw_old, 2);  // killed before the commit point
  EXPECT_GE(saw_new, 8);  // killed after it: replayed (one per applied step and more)
}

// A run's import whose new directory is kept in place (blobs/u) and moved
// into the workspace whole, killed at every step of its commit: a replay
// finds the directory moved with its files, which counts as done.
TEST(CommitCrashTest, ANewDirectoryMovedWholeIsFinishedAfterEveryStep) {
  const auto import_run = [](const std::filesystem::path& base) {
    return import_over_populated(
        base / "upper",
        {{"new/a.txt", "a\n"}, {"new/sub/b.txt", "b\n"}, {"zz.txt", "after the directory\n"}},
        ImportOptions{.take_upper_files = true});
  };
  TempDir reference;
  const auto tx_reference = import_run(reference.path());
  const auto ws_reference = reference.path() / "ws";
  ASSERT_TRUE(std::filesystem::exists(ws_reference / ".agent/transactions" / tx_reference /
                                      "blobs/u/new/sub/b.txt"));
  const auto old_state = listing(ws_reference);
  Workspace(ws_reference).commit(tx_reference);
  const auto new_state = listing(ws_reference);
  ASSERT_NE(old_state, new_state);

  EXPECT_GE(killed_at_every_step(import_run, old_state, new_state),
            3);  // killed after the commit point, the directory moved or not
}

// A kept layer's import whose blobs are the layer's own files
// (share_upper_files, a session's review), killed at every step of its
// commit: the blobs become copies of the store's own before the commit
// point, so the old workspace or the new one comes back, and the layer's
// files end as they began, linked from nowhere else.
TEST(CommitCrashTest, SharedBlobsBecomePrivateBeforeTheCommitPoint) {
  const auto import_shared = [](const std::filesystem::path& base) {
    return import_over_populated(
        base / "layer",
        {{"modify.txt", "from the layer\n"}, {"new/a.txt", "a\n"}, {"dir-to-file", "now a file\n"}},
        ImportOptions{.share_upper_files = true});
  };
  const auto layer_is_whole = [](const std::filesystem::path& base, const std::string& when) {
    for (const char* name : {"modify.txt", "new/a.txt", "dir-to-file"}) {
      struct stat st {};
      ASSERT_EQ(::stat((base / "layer" / name).c_str(), &st), 0) << name << ", " << when;
      EXPECT_EQ(st.st_nlink, 1u) << name << ", " << when;
      struct stat in_ws {};
      if (::stat((base / "ws" / name).c_str(), &in_ws) == 0) {
        EXPECT_NE(in_ws.st_ino, st.st_ino) << name << " is the layer's inode, " << when;
      }
    }
    EXPECT_EQ(testing::read_file(base / "layer/modify.txt"), "from the layer\n") << when;
  };
  TempDir reference;
  const auto tx_reference = import_shared(reference.path());
  struct stat linked {};
  ASSERT_EQ(::stat((reference / "layer/modify.txt").c_str(), &linked), 0);
  ASSERT_EQ(linked.st_nlink, 2u) << "the import copied the layer's file instead of sharing it";
  const auto ws_reference = reference.path() / "ws";
  const auto old_state = listing(ws_reference);
  Workspace(ws_reference).commit(tx_reference);
  const auto new_state = listing(ws_reference);
  ASSERT_NE(old_state, new_state);
  ASSERT_EQ(testing::read_file(ws_reference / "modify.txt"), "from the layer\n");

  EXPECT_GE(killed_at_every_step(import_shared, old_state, new_state, layer_is_whole),
            3);  // killed after the commit point, part of the renames made or not
}

// As root, each entry a commit makes takes its directory's owner (a
// user's workspace must not gain root's files), killed at every step of
// the commit too: a directory made just before the kill is still root's,
// and the replay that finds it must give it the owner as well.
TEST(CommitCrashTest, AsRootEveryNewEntryTakesItsOwnerAfterEveryStep) {
  PULSEBOX_SKIP_UNLESS_ROOT("gives the workspace to another user");
  static constexpr uid_t kOwner = 4321;
  const auto stage_as_owner = [](const std::filesystem::path& base) {
    const auto ws_dir = base / "ws";
    populate(ws_dir);
    for (const auto& item : std::filesystem::recursive_directory_iterator(ws_dir))
      EXPECT_EQ(::lchown(item.path().c_str(), kOwner, kOwner), 0) << item.path();
    EXPECT_EQ(::chown(ws_dir.c_str(), kOwner, kOwner), 0);
    Workspace ws(ws_dir);
    const auto tx = ws.create_transaction("owner test");
    ws.stage_mkdir(tx, "added", 0755);
    ws.stage_mkdir(tx, "added/deeper", 0700);
    ws.stage_write(tx, "added/deeper/new.txt", "new\n");
    ws.stage_write(tx, "modify.txt", "after\n");
    ws.stage_symlink(tx, "link", "keep.txt");
    return tx;
  };
  const auto all_the_owners = [](const std::filesystem::path& base, const std::string& when) {
    const auto ws_dir = base / "ws";
    for (auto it = std::filesystem::recursive_directory_iterator(ws_dir);
         it != std::filesystem::recursive_directory_iterator(); ++it) {
      if (it->path().filename() == ".agent") {
        it.disable_recursion_pending();
        continue;
      }
      struct stat st {};
      ASSERT_EQ(::lstat(it->path().c_str(), &st), 0) << it->path();
      EXPECT_EQ(st.st_uid, kOwner) << it->path().lexically_relative(ws_dir) << ", " << when;
      EXPECT_EQ(st.st_gid, kOwner) << it->path().lexically_relative(ws_dir) << ", " << when;
    }
  };
  TempDir reference;
  const auto tx_reference = stage_as_owner(reference.path());
  const auto old_state = listing(reference.path() / "ws");
  Workspace(reference.path() / "ws").commit(tx_reference);
  const auto new_state = listing(reference.path() / "ws");
  ASSERT_NE(old_state, new_state);
  all_the_owners(reference.path(), "after an uninterrupted commit");

  EXPECT_GE(killed_at_every_step(stage_as_owner, old_state, new_state, all_the_owners), 5);
}

// ... but a directory that was there before the commit is not the
// commit's to give away: a root-owned one (a `sudo make`'s build/) at a
// staged new directory's path stays root's, and so does one that is not
// empty.
TEST(CommitCrashTest, AsRootADirectoryTheCommitDidNotMakeKeepsItsOwner) {
  PULSEBOX_SKIP_UNLESS_ROOT("gives the workspace to another user");
  TempDir dir;
  populate(dir.path());
  ASSERT_EQ(::chown(dir.path().c_str(), 4321, 4321), 0);
  // Root's, as made; "empty" passes every other check of a replay's
  // directory (empty, root's, under a directory that is not root's).
  std::filesystem::create_directories(dir / "build/root-only");
  std::filesystem::create_directories(dir / "empty");
  Workspace ws(dir.path());
  const auto tx = ws.create_transaction("a directory that is there");
  ws.stage_mkdir(tx, "build", 0755);
  ws.stage_mkdir(tx, "build/root-only", 0755);
  ws.stage_mkdir(tx, "empty", 0755);
  ws.commit(tx);
  for (const char* name : {"build", "build/root-only", "empty"}) {
    struct stat st {};
    ASSERT_EQ(::stat((dir / name).c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, 0u) << name;
  }
}

// A partial commit, killed at every step: after reconcile the workspace is
// the old one with the whole transaction pending, or has exactly the chosen
// paths with the rest still pending; either way the rest then commits to the
// same final state.
TEST(CommitCrashTest, APartialCommitIsAllOrNothingToo) {
  const CommitOptions part{.paths = {"modify.txt", "added/new.bin", "tree"},
                           .allow_secrets = false};
  TempDir reference;
  populate(reference.path());
  const auto old_state = listing(reference.path());
  std::size_t pending_after_part = 0;
  std::map<std::string, std::string> part_state;
  {
    Workspace ws(reference.path());
    const auto tx = stage(ws);
    ws.commit(tx, part);
    part_state = listing(reference.path());
    pending_after_part = ws.describe(tx).changes.size();
    ws.commit(tx);
  }
  const auto new_state = listing(reference.path());
  ASSERT_NE(old_state, part_state);
  ASSERT_NE(part_state, new_state);
  EXPECT_EQ(pending_after_part, 4u);  // of 8: "added" came along with added/new.bin

  int saw_old = 0;
  int saw_part = 0;
  bool completed = false;
  for (int crash_after = 1; crash_after < 100 && !completed; ++crash_after) {
    TempDir dir;
    populate(dir.path());
    std::string tx;
    {
      Workspace ws(dir.path());
      tx = stage(ws);
    }
    const int status = commit_killed_at_step(dir.path(), tx, part, crash_after);
    ASSERT_GE(status, 0);
    if (WIFEXITED(status)) {
      ASSERT_EQ(WEXITSTATUS(status), 0) << "commit failed without a crash";
      completed = true;
      EXPECT_EQ(listing(dir.path()), part_state);
      break;
    }
    Workspace ws(dir.path());
    ws.reconcile();
    const auto state = listing(dir.path());
    ASSERT_EQ(ws.list_transactions().size(), 1u) << "after crash at step " << crash_after;
    if (state == old_state) {
      ++saw_old;
      EXPECT_EQ(ws.describe(tx).changes.size(), 8u);
    } else {
      ++saw_part;
      ASSERT_EQ(state, part_state)
          << "half-committed workspace after crash at step " << crash_after;
      EXPECT_EQ(ws.describe(tx).changes.size(), pending_after_part);
    }
    EXPECT_TRUE(ws.reconcile().replayed.empty()) << "reconcile is not idempotent";
    ws.commit(tx);
    EXPECT_EQ(listing(dir.path()), new_state) << "the rest, after a crash at step " << crash_after;
    EXPECT_TRUE(ws.list_transactions().empty());
  }
  EXPECT_TRUE(completed);
  EXPECT_GE(saw_old, 2);
  EXPECT_GE(saw_part, 4);
}

TEST(ReconcileTest, RemovesIncompleteStagingAndTemporaryFiles) {
  TempDir dir;
  populate(dir.path());
  Workspace ws(dir.path());
  const auto tx = ws.create_transaction();
  ws.stage_write(tx, "modify.txt", "after\n");
  // A transaction directory without a manifest (a crash while creating it).
  std::filesystem::create_directories(dir / ".agent/transactions/tx-broken/blobs");
  // A decided commit whose apply was interrupted, leaving a temporary file.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    workspace::commit_failpoint = [](std::string_view step) {
      if (step == "ready marker") ::raise(SIGKILL);
    };
    Workspace(dir.path()).commit(tx);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFSIGNALED(status));
  write_file(dir / ".pulsebox-tmp-leftover", "");
  const auto report = ws.reconcile();
  EXPECT_EQ(report.replayed, std::vector<std::string>{tx});
  EXPECT_EQ(report.removed_staging, std::vector<std::string>{"tx-broken"});
  EXPECT_EQ(report.removed_temp_files, 1u);
  EXPECT_FALSE(std::filesystem::exists(dir / ".pulsebox-tmp-leftover"));
  EXPECT_EQ(testing::read_file(dir / "modify.txt"), "after\n");
}

// A cloned repository may ship .agent/ with symlinks in it. reconcile
// removes what it finds in .agent/transactions and .agent/runs: through a
// symlink it would remove another directory's contents (the user's home,
// the workspace's parent). It refuses such a directory, and never follows
// an entry that is a symlink.
TEST(ReconcileTest, NeverRemovesAnythingThroughAPlantedSymlink) {
  for (const char* planted : {"transactions", "runs"}) {
    SCOPED_TRACE(planted);
    TempDir dir;
    TempDir victim;
    write_file(victim / "precious/file", "mine\n");
    write_file(victim / "other/wal.json", "{}");
    std::filesystem::create_directories(dir / ".agent");
    std::filesystem::create_directory_symlink(victim.path(), dir / ".agent" / planted);
    Workspace ws(dir.path());
    EXPECT_THROW(ws.reconcile(), SandboxSecurityError);
    EXPECT_EQ(testing::read_file(victim / "precious/file"), "mine\n");
    EXPECT_TRUE(std::filesystem::exists(victim / "other/wal.json"));
  }
  // An entry that is a symlink to a directory: neither it nor what it
  // points to is touched.
  TempDir dir;
  TempDir victim;
  write_file(victim / "wal.json", "{}");
  write_file(victim / "remaining.json", "{}");
  std::filesystem::create_directories(dir / ".agent/transactions");
  std::filesystem::create_directories(dir / ".agent/runs");
  std::filesystem::create_directory_symlink(victim.path(), dir / ".agent/transactions/tx-link");
  std::filesystem::create_directory_symlink(victim.path(), dir / ".agent/runs/run-link");
  Workspace ws(dir.path());
  (void)ws.reconcile();
  EXPECT_TRUE(std::filesystem::exists(victim / "wal.json"));
  EXPECT_TRUE(std::filesystem::exists(victim / "remaining.json"));
}

// The host backend's run copies: the lock sits beside the directory and is
// taken before it is made. A crashed run's copy goes, a live one's stays,
// a lock file alone (a run that died before its mkdir) goes quietly, and an
// older version's live run (its lock inside the directory) is kept.
TEST(ReconcileTest, RemovesCrashedRunsButNotLiveOnes) {
  TempDir dir;
  const auto runs = dir / ".agent/runs";
  write_file(runs / "run-crashed/root/x", "copy");
  write_file(runs / "run-crashed.lock", "");
  write_file(runs / "run-live/root/x", "copy");
  write_file(runs / "run-live.lock", "");
  write_file(runs / "run-orphan.lock", "");
  write_file(runs / "run-older/lock", "");
  std::vector<int> held;
  for (const char* lock : {"run-live.lock", "run-older/lock"}) {
    const int fd = ::open((runs / lock).c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);
    held.push_back(fd);
  }
  // flock locks are per open file description: a child process stands in
  // for the live runs so the parent's reconcile sees the locks taken.
  const pid_t holder = ::fork();
  if (holder == 0) {
    ::pause();
    ::_exit(0);
  }
  for (const int fd : held)
    ::close(fd);
  Workspace ws(dir.path());
  const auto report = ws.reconcile();
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_EQ(report.removed_runs, std::vector<std::string>{"run-crashed"});
  EXPECT_FALSE(std::filesystem::exists(runs / "run-crashed"));
  EXPECT_FALSE(std::filesystem::exists(runs / "run-crashed.lock"));
  EXPECT_FALSE(std::filesystem::exists(runs / "run-orphan.lock"));
  EXPECT_TRUE(std::filesystem::exists(runs / "run-live/root/x"));
  EXPECT_TRUE(std::filesystem::exists(runs / "run-live.lock"));
  EXPECT_TRUE(std::filesystem::exists(runs / "run-older/lock"));
}

// A run's lock is never seen unlocked while it is made: a reconcile that
// took it then (between the open and the flock) would run in full, as for
// a crash, every time another run starts beside it. A watcher opens each
// lock by name as soon as it can and tries to take it.
TEST(RunLockTest, IsNeverSeenUnlockedWhileMade) {
  TempDir dir;
  constexpr int kLocks = 3000;
  std::atomic<int> next{0};
  std::atomic<int> seen_unlocked{0};
  auto name = [&](int i) { return dir / ("run-" + std::to_string(i) + ".lock"); };
  std::thread watcher([&] {
    for (int i; (i = next.load()) < kLocks;) {
      core::UniqueFd fd(::open(name(i).c_str(), O_RDONLY | O_CLOEXEC));
      struct stat st {};
      // Unlinked by then: the maker held it and let go (not this race).
      if (fd && ::flock(fd.get(), LOCK_EX | LOCK_NB) == 0 && ::fstat(fd.get(), &st) == 0 &&
          st.st_nlink > 0) {
        ++seen_unlocked;
      }
    }
  });
  for (int i = 0; i < kLocks; ++i) {
    auto lock = core::create_locked_file(name(i));
    ASSERT_TRUE(lock.ok()) << lock.error().to_string();
    ::unlink(name(i).c_str());  // while still holding it, as a run does
    next.store(i + 1);
  }
  watcher.join();
  EXPECT_EQ(seen_unlocked.load(), 0);
}

// What the start-up check (a full reconcile only after a crash) counts as a
// crashed run's leftover, and what it takes for a run that finished.
TEST(RunLockTest, OnlyALeftoverCountsAsACrash) {
  TempDir dir;
  write_file(dir / "run-crashed.lock", "");
  write_file(dir / "run-crashed/upper/x", "");
  write_file(dir / "run-no-lock/upper/x", "");
  write_file(dir / "run-left-cgroup.lock", "");
  EXPECT_TRUE(core::left_by_crashed_run(dir / "run-crashed.lock"));
  EXPECT_TRUE(core::left_by_crashed_run(dir / "run-crashed"));
  EXPECT_TRUE(core::left_by_crashed_run(dir / "run-no-lock"));
  EXPECT_TRUE(core::left_by_crashed_run(dir / "run-left-cgroup.lock"));
  // Listed, then gone with the run that finished (directory, then lock).
  EXPECT_FALSE(core::left_by_crashed_run(dir / "run-finished.lock"));
  EXPECT_FALSE(core::left_by_crashed_run(dir / "run-finished"));

  auto live = core::create_locked_file(dir / "run-live.lock");
  ASSERT_TRUE(live.ok());
  write_file(dir / "run-live/upper/x", "");
  // flock locks are per open file description: a child process stands in
  // for the reconciling one.
  const auto seen_from_a_child = [](const std::filesystem::path& entry) {
    const pid_t child = ::fork();
    if (child == 0) ::_exit(core::left_by_crashed_run(entry) ? 1 : 0);
    int status = 0;
    ::waitpid(child, &status, 0);
    return WIFEXITED(status) && WEXITSTATUS(status) == 1;
  };
  EXPECT_FALSE(seen_from_a_child(dir / "run-live.lock"));
  EXPECT_FALSE(seen_from_a_child(dir / "run-live"));
  ::unlink((dir / "run-live.lock").c_str());  // the run finishing, holding its lock
  std::filesystem::remove_all(dir / "run-live");
  EXPECT_FALSE(seen_from_a_child(dir / "run-live.lock"));
  EXPECT_FALSE(seen_from_a_child(dir / "run-live"));
}

}  // namespace
}  // namespace pulsebox
