// What a commit applies is exactly what the sandbox wrote, and never undoes
// what the user did on the host meanwhile, and nothing a sandbox writes or a
// planted transaction holds stops a commit halfway or reaches outside:
//  - a host edit during the run that keeps the old mtime (cp -p, rsync -t,
//    a checkout of an older file) is noticed by its ctime, which user space
//    cannot set, and the commit refuses the path;
//  - file names are bytes: a name that is not UTF-8 is committed under that
//    exact name, never under a replacement-character spelling of it.
// Driven through the CLI, as root and as an ordinary user (tools/check).
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

class WorkspaceIntegrityTest : public testing::CliFixture {
 protected:
  std::vector<std::string> env() const { return cli_env(); }

  std::vector<std::string> run_args(const std::string& command,
                                    const std::vector<std::string>& flags = {}) const {
    std::vector<std::string> args = {"run",    "--json", "--allow-weaker",
                                     "limits", "-w",     workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", command});
    return args;
  }

  // Runs `before` in a sandbox, which then prints "ready" and waits for the
  // file go/go (the test's scratch directory, bound read-only at /go) before
  // it runs `after`. `host_edit` runs in between. Returns the transaction.
  std::string run_with_host_edit(const std::string& before, const std::string& after,
                                 const std::function<void()>& host_edit) {
    const fs::path log = scratch_ / "run.log";
    fs::remove(scratch_ / "go");
    fs::remove(log);
    // Searchable by the sandbox's user, whichever host id it has.
    fs::permissions(scratch_.path(), fs::perms(0755));
    std::vector<std::string> argv = {binary_};
    for (auto arg : run_args(before +
                                 "; echo ready; i=0; while [ ! -e /go/go ] && [ $i -lt 1000 ]; "
                                 "do sleep 0.01; i=$((i+1)); done; [ -e /go/go ] && " +
                                 after,
                             {"--ro-bind", scratch_.path().string() + ":/go"})) {
      if (arg != "--json") argv.push_back(arg);  // the output streams: "ready" comes at once
    }
    const pid_t client = testing::spawn(argv, env(), log);
    EXPECT_GT(client, 0);
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (testing::read_file(log).find("ready") == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) {
        ADD_FAILURE() << "the sandbox never got ready: " << testing::read_file(log);
        break;
      }
      std::this_thread::sleep_for(10ms);
    }
    host_edit();
    testing::write_file(scratch_ / "go", "");
    EXPECT_EQ(testing::wait_for(client, 30s), 0) << testing::read_file(log);
    const std::string text = testing::read_file(log);
    const auto at = text.find("tx-");
    if (at == std::string::npos) {
      ADD_FAILURE() << "no transaction: " << text;
      return "";
    }
    return text.substr(at, text.find_first_of(" \n", at) - at);
  }

  // A manifest or log entry as the store writes one, for a path that did
  // not exist when it was staged.
  static nlohmann::json planted_entry(const std::string& path, const std::string& op, unsigned mode,
                                      const std::string& blob = "", std::uint64_t size = 0) {
    const nlohmann::json absent = {
        {"type", "absent"}, {"inode", 0}, {"device", 0},  {"size", 0},
        {"mtime_ns", 0},    {"mode", 0},  {"sha256", ""}, {"changed_during_run", false}};
    return {{"path", path}, {"op", op},     {"mode", mode},      {"link_target", ""},
            {"blob", blob}, {"size", size}, {"snapshot", absent}};
  }
  // `content` as the blob blobs/0/0 of transaction directory `dir`, of `mode`.
  static void plant_blob(const fs::path& dir, const std::string& content, unsigned mode) {
    fs::create_directories(dir / "blobs/0");
    testing::write_file(dir / "blobs/0/0", content);
    ASSERT_EQ(::chmod((dir / "blobs/0/0").c_str(), mode), 0);
  }

  // A pending transaction's manifest holding `entries`.
  static void plant_manifest(const fs::path& dir, const std::string& tx,
                             const nlohmann::json& entries, std::uint64_t next_blob = 1) {
    const nlohmann::json doc = {{"version", 1},
                                {"id", tx},
                                {"created", "2026-01-01T00:00:00Z"},
                                {"next_blob", next_blob},
                                {"origin", "planted"},
                                {"entries", entries}};
    testing::write_file(dir / "manifest.json", doc.dump());
  }

  testing::CliRun commit(const std::string& tx) const {
    return testing::run_cli({"commit", "-w", workspace_.path().string(), tx}, "", env());
  }
};

// Writes `content` over `path` and sets its times back as they were: what
// `cp -p` of an older copy, `rsync -t` and `git checkout` leave behind.
void write_keeping_times(const fs::path& path, const std::string& content, bool by_rename) {
  struct stat before {};
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  if (by_rename) {
    const fs::path temp = path.string() + ".tmp";
    testing::write_file(temp, content);
    fs::rename(temp, path);
  } else {
    testing::write_file(path, content);
  }
  const timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
  struct stat after {};
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  ASSERT_EQ(after.st_size, before.st_size) << "the edit must keep the size too";
  ASSERT_EQ(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
}

TEST_F(WorkspaceIntegrityTest, AHostEditThatKeepsTheOldMtimeIsNeverOverwrittenByTheCommit) {
  for (const bool by_rename : {false, true}) {
    SCOPED_TRACE(by_rename ? "rsync -t (a new file renamed over it)" : "cp -p (written in place)");
    testing::write_file(workspace_ / "a.txt", "original\n");
    testing::write_file(workspace_ / "b.txt", "b\n");
    // The sandbox read a.txt before the host's edit, and writes it after.
    const std::string tx = run_with_host_edit(
        "cat a.txt > /dev/null", "echo run >> a.txt; echo run >> b.txt",
        [&] { write_keeping_times(workspace_ / "a.txt", "ORIGINAL\n", by_rename); });
    if (HasFailure()) return;
    const auto refused = commit(tx);
    EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("a.txt: changed on the host while the run"), std::string::npos)
        << refused.err;
    EXPECT_EQ(refused.err.find("b.txt:"), std::string::npos) << refused.err;
    EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "ORIGINAL\n");
    EXPECT_EQ(testing::read_file(workspace_ / "b.txt"), "b\n") << "nothing is applied";
    testing::run_cli({"discard", "-w", workspace_.path().string(), tx}, "", env());
  }
}

TEST_F(WorkspaceIntegrityTest, ATreeTheHostChangedDuringTheRunIsNotDeletedByTheCommit) {
  testing::write_file(workspace_ / "dir/old.txt", "old\n");
  const std::string tx = run_with_host_edit("ls dir > /dev/null", "rm -rf dir", [&] {
    testing::write_file(workspace_ / "dir/users-new-file.txt", "keep me\n");
  });
  if (HasFailure()) return;
  const auto refused = commit(tx);
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("dir: changed on the host while the run"), std::string::npos)
      << refused.err;
  EXPECT_EQ(testing::read_file(workspace_ / "dir/users-new-file.txt"), "keep me\n");
}

TEST_F(WorkspaceIntegrityTest, NamesThatAreNotUtf8AreCommittedExactly) {
  const std::string bad = "bad\xff\xfe.txt";
  const std::string dir = "d\xe9j\xe0";  // Latin-1 "déjà"
  const std::string link = "l\xfe";
  const auto run =
      testing::run_cli(run_args("printf 'content' > \"$(printf 'bad\\377\\376.txt')\"; "
                                "mkdir \"$(printf 'd\\351j\\340')\"; "
                                "echo in > \"$(printf 'd\\351j\\340/f')\"; "
                                "ln -s \"$(printf 't\\377')\" \"$(printf 'l\\376')\""),
                       "", env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto result = nlohmann::json::parse(run.out);
  // --json: the escaped name for people, the exact bytes in hex.
  std::set<std::string> hex_names;
  for (const auto& change : result["changes"]) {
    if (change.contains("path_hex")) hex_names.insert(change["path_hex"]);
  }
  EXPECT_TRUE(hex_names.count("626164fffe2e747874")) << result.dump();
  bool escaped = false;
  for (const auto& change : result["changes"])
    escaped = escaped || change["path"] == "bad\\xff\\xfe.txt";
  EXPECT_TRUE(escaped) << result.dump();

  const auto listed =
      testing::run_cli({"changes", "--json", "-w", workspace_.path().string()}, "", env());
  EXPECT_NE(listed.out.find("626164fffe2e747874"), std::string::npos) << listed.out;

  const auto committed = commit(result["transaction_id"]);
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(testing::read_file(workspace_ / bad), "content");
  EXPECT_EQ(testing::read_file(workspace_ / dir / "f"), "in\n");
  EXPECT_EQ(fs::read_symlink(workspace_ / link).string(), "t\xff");
  // Nothing under another spelling.
  for (const auto& entry : fs::directory_iterator(workspace_.path())) {
    const std::string name = entry.path().filename().string();
    EXPECT_EQ(name.find("\xef\xbf\xbd"), std::string::npos) << "a U+FFFD name: " << name;
  }
}

// A transaction is files under .agent/: a workspace can arrive with one
// planted (a cloned repository, an archive). Its blob names must stay inside
// its blobs/ directory and be files: a commit of "../../etc/hostname" or of
// a symlink blob would move a file of the user's (or a link to it) into the
// workspace.
TEST_F(WorkspaceIntegrityTest, APlantedTransactionCannotReachOutsideItsBlobs) {
  testing::write_file(workspace_ / "a.txt", "a\n");
  const std::string tx = "tx-20260101000000-abcdef";
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  fs::create_directories(dir / "blobs");
  auto manifest = [&](const std::string& blob) {
    plant_manifest(dir, tx,
                   nlohmann::json::array({planted_entry("stolen.txt", "write", 0644, blob, 5)}));
  };
  // A file of the test's own outside the workspace (never a system file: a
  // regression would move it).
  const fs::path secret = scratch_ / "secret.txt";
  testing::write_file(secret, "secret");
  manifest(secret.lexically_relative(dir / "blobs").string());
  for (const char* command : {"diff", "commit"}) {
    const auto refused =
        testing::run_cli({command, "-w", workspace_.path().string(), tx}, "", env());
    EXPECT_EQ(refused.exit_code, 125) << command << ": " << refused.out << refused.err;
    EXPECT_NE(refused.err.find("bad blob name"), std::string::npos) << refused.err;
  }
  EXPECT_FALSE(fs::exists(workspace_ / "stolen.txt"));

  manifest("0");
  fs::create_symlink(secret, dir / "blobs/0");
  const auto refused = commit(tx);
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("not a regular file"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "stolen.txt")));
  EXPECT_EQ(testing::read_file(secret), "secret");

  // Blobs live in shard directories (blobs/<n/100>/<n>): a shard that is a
  // symlink to a directory of the user's is not followed, by the commit or
  // by the diff that shows it.
  fs::remove(dir / "blobs/0");
  const fs::path elsewhere = scratch_ / "elsewhere";
  fs::create_directories(elsewhere);
  testing::write_file(elsewhere / "0", "secret");
  fs::create_symlink(elsewhere, dir / "blobs/0");
  manifest("0/0");
  const auto shard = commit(tx);
  EXPECT_EQ(shard.exit_code, 125) << shard.out << shard.err;
  EXPECT_NE(shard.err.find("not a regular file"), std::string::npos) << shard.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "stolen.txt")));
  EXPECT_EQ(testing::read_file(elsewhere / "0"), "secret");
  const auto shown = testing::run_cli({"diff", "-w", workspace_.path().string(), tx}, "", env());
  EXPECT_EQ(shown.out.find("secret"), std::string::npos) << shown.out;
  for (const char* bad : {"0/", "/0", "0/0/0", "0/../0"}) {
    manifest(bad);
    const auto named = commit(tx);
    EXPECT_EQ(named.exit_code, 125) << bad << ": " << named.out << named.err;
    EXPECT_NE(named.err.find("bad blob name"), std::string::npos) << bad << ": " << named.err;
  }
  EXPECT_EQ(testing::read_file(elsewhere / "0"), "secret");
}

// A transaction staged before blobs were sharded (blobs/<n>, as an older
// pulsebox wrote it) still commits.
TEST_F(WorkspaceIntegrityTest, ATransactionWithUnshardedBlobsStillCommits) {
  const std::string tx = "tx-20260101000000-0ld0ld";
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  fs::create_directories(dir / "blobs");
  testing::write_file(dir / "blobs/7", "old\n");
  fs::permissions(dir / "blobs/7", fs::perms(0644));
  nlohmann::json absent = {
      {"type", "absent"}, {"inode", 0}, {"device", 0},  {"size", 0},
      {"mtime_ns", 0},    {"mode", 0},  {"sha256", ""}, {"changed_during_run", false}};
  nlohmann::json entry = {{"path", "old.txt"}, {"op", "write"}, {"mode", 0644},
                          {"link_target", ""}, {"blob", "7"},   {"size", 5},
                          {"snapshot", absent}};
  nlohmann::json doc = {{"version", 1},   {"id", tx},        {"created", "2026-01-01T00:00:00Z"},
                        {"next_blob", 8}, {"origin", "old"}, {"entries", {entry}}};
  testing::write_file(dir / "manifest.json", doc.dump());
  const auto committed = commit(tx);
  EXPECT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  EXPECT_EQ(testing::read_file(workspace_ / "old.txt"), "old\n");
}

// Nothing a sandbox writes may stop a commit after its point of no return
// (READY): a workspace left half-committed would fail every later command.
// A time before 1970 with a fraction, and a path longer than the kernel
// takes whole, each did.
TEST_F(WorkspaceIntegrityTest, TimesBefore1970AreCommittedToTheNanosecond) {
  const auto run = testing::run_cli(run_args("mkdir d && echo x > d/f && ln -s f l && "
                                             "touch -h -d '1969-12-31 23:59:59.5 UTC' l && "
                                             "touch -d '1969-12-31 23:59:59.5 UTC' d"),
                                    "", env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto committed = commit(nlohmann::json::parse(run.out)["transaction_id"]);
  ASSERT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  for (const char* name : {"d", "l"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((workspace_ / name).c_str(), &st), 0) << name;
    EXPECT_EQ(st.st_mtim.tv_sec, -1) << name;
    EXPECT_EQ(st.st_mtim.tv_nsec, 500000000) << name;
  }
  const auto listed = testing::run_cli({"changes", "-w", workspace_.path().string()}, "", env());
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
}

TEST_F(WorkspaceIntegrityTest, APathLongerThanTheKernelTakesIsRefusedWhenTheRunEnds) {
  // Directories of 200 bytes until the shell can go no deeper: a path of
  // ~4,200 bytes, over PATH_MAX.
  const auto run = testing::run_cli(
      run_args("n=$(printf 'a%.0s' $(seq 200)); i=0; "
               "while [ $i -lt 24 ]; do mkdir $n && cd $n || break; i=$((i+1)); done; "
               "echo deep > deep.txt"),
      "", env());
  const auto result = nlohmann::json::parse(run.out);
  const auto status = result.value("changes_status", nlohmann::json::object());
  std::string reason;
  for (const auto& item : status.value("refused", nlohmann::json::array()))
    reason += item.value("reason", "");
  // (Not the output itself on failure: its paths are kilobytes long.)
  EXPECT_NE(reason.find("over the kernel's limit of 4095"), std::string::npos) << reason;
  EXPECT_EQ(status.value("status", ""), "held") << reason;
  const auto listed = testing::run_cli({"changes", "-w", workspace_.path().string()}, "", env());
  EXPECT_EQ(listed.exit_code, 0) << listed.err.substr(0, 300);
}

// A name pulsebox never writes (a backslash in it) is refused alone: the
// run's other changes are staged, and the refusal is a field and the exit
// status, both for a file the run made and for one the run deleted with
// its directory.
TEST_F(WorkspaceIntegrityTest, ANameWithABackslashIsRefusedAloneNotTheWholeChangeSet) {
  fs::create_directories(workspace_ / "d");
  testing::write_file(workspace_ / "d/old\\name", "old\n");
  const auto run = testing::run_cli(
      run_args("echo x > 'new\\name' && echo y > ok.txt && rm -r d && mkdir d && echo z > d/f"), "",
      env());
  EXPECT_EQ(run.exit_code, 123) << run.out << run.err;
  const auto result = nlohmann::json::parse(run.out);
  const auto status = result.value("changes_status", nlohmann::json::object());
  EXPECT_EQ(status.value("status", ""), "held") << run.out;
  std::set<std::string> refused;
  for (const auto& item : status.value("refused", nlohmann::json::array())) {
    refused.insert(item.value("path", ""));
    EXPECT_NE(item.value("reason", "").find("backslash"), std::string::npos) << item.dump();
  }
  EXPECT_EQ(refused, (std::set<std::string>{"new\\name", "d/old\\name"})) << run.out;
  ASSERT_TRUE(result.contains("transaction_id")) << run.out;
  const auto committed = commit(result["transaction_id"]);
  ASSERT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  EXPECT_EQ(testing::read_file(workspace_ / "ok.txt"), "y\n");
  EXPECT_EQ(testing::read_file(workspace_ / "d/f"), "z\n");
  EXPECT_FALSE(fs::exists(workspace_ / "new\\name"));
  EXPECT_EQ(testing::read_file(workspace_ / "d/old\\name"), "old\n") << "its removal was refused";
}

// A planted transaction marked as being committed (READY and its log) is
// replayed by the next command that opens the store: its log must pass what
// a commit checks, or nothing of it is applied.
TEST_F(WorkspaceIntegrityTest, APlantedDecidedCommitIsNotReplayed) {
  testing::write_file(workspace_ / "user-notes.txt", "mine\n");
  fs::create_directories(workspace_ / ".git/hooks");
  const std::string tx = "tx-20260101000000-abcdef";
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  fs::create_directories(dir / "blobs/0");
  testing::write_file(dir / "blobs/0/0", "#!/bin/sh\necho planted\n");
  nlohmann::json absent = {
      {"type", "absent"}, {"inode", 0}, {"device", 0},  {"size", 0},
      {"mtime_ns", 0},    {"mode", 0},  {"sha256", ""}, {"changed_during_run", false}};
  nlohmann::json hook = {{"path", ".git/hooks/pre-commit"},
                         {"op", "write"},
                         {"mode", 0755},
                         {"link_target", ""},
                         {"blob", "0/0"},
                         {"size", 22},
                         {"snapshot", absent}};
  nlohmann::json removal = {{"path", "user-notes.txt"}, {"op", "delete"}, {"mode", 0},
                            {"link_target", ""},        {"blob", ""},     {"size", 0},
                            {"snapshot", absent}};
  testing::write_file(dir / "wal.json",
                      nlohmann::json{{"id", tx}, {"steps", {hook, removal}}}.dump());
  testing::write_file(dir / "READY", "");
  const auto listed = testing::run_cli({"changes", "-w", workspace_.path().string()}, "", env());
  EXPECT_NE(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_NE(listed.err.find("cannot tell that it decided it"), std::string::npos) << listed.err;
  EXPECT_FALSE(fs::exists(workspace_ / ".git/hooks/pre-commit"));
  EXPECT_EQ(testing::read_file(workspace_ / "user-notes.txt"), "mine\n");
}

// A planted decided commit whose log passes every check (it writes and
// deletes unprotected paths) is still not replayed: only a commit point
// sealed under this user's audit key is. The user can finish one as logged
// with `reconcile --accept-unsealed ID`.
TEST_F(WorkspaceIntegrityTest, APlantedDecidedCommitWithoutThisUsersSealIsNotReplayed) {
  testing::write_file(workspace_ / "user-notes.txt", "mine\n");
  const std::string tx = "tx-20260101000000-5ea1ed";
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  plant_blob(dir, "planted\n", 0644);
  const nlohmann::json steps = {planted_entry("notes.txt", "write", 0644, "0/0", 8),
                                planted_entry("user-notes.txt", "delete", 0)};
  testing::write_file(dir / "wal.json", nlohmann::json{{"id", tx}, {"steps", steps}}.dump());
  for (const std::string& ready :
       {std::string(), std::string("pulsebox-commit 1 unkeyed\n"),
        "pulsebox-commit 1 0123456789abcdef " + std::string(64, 'a') + "\n"}) {
    testing::write_file(dir / "READY", ready);
    const auto listed = testing::run_cli({"changes", "-w", workspace_.path().string()}, "", env());
    EXPECT_EQ(listed.exit_code, 125) << ready << listed.out << listed.err;
    EXPECT_NE(listed.err.find("(planted?)"), std::string::npos) << ready << listed.err;
    EXPECT_NE(listed.err.find("--accept-unsealed " + tx), std::string::npos) << listed.err;
    EXPECT_FALSE(fs::exists(workspace_ / "notes.txt")) << ready;
    EXPECT_EQ(testing::read_file(workspace_ / "user-notes.txt"), "mine\n") << ready;
  }
  // Where no key can be had, an unkeyed seal still proves nothing.
  auto keyless = env();
  keyless.insert(keyless.end(), {"HOME=/nonexistent", "XDG_STATE_HOME=", "PULSEBOX_AUDIT_KEY="});
  testing::write_file(dir / "READY", "pulsebox-commit 1 unkeyed\n");
  const auto without_key =
      testing::run_cli({"changes", "-w", workspace_.path().string()}, "", keyless);
  EXPECT_EQ(without_key.exit_code, 125) << without_key.out << without_key.err;
  EXPECT_NE(without_key.err.find("without a key"), std::string::npos) << without_key.err;
  EXPECT_FALSE(fs::exists(workspace_ / "notes.txt"));
  const auto accepted = testing::run_cli(
      {"reconcile", "--json", "-w", workspace_.path().string(), "--accept-unsealed", tx}, "",
      env());
  ASSERT_EQ(accepted.exit_code, 0) << accepted.out << accepted.err;
  EXPECT_EQ(nlohmann::json::parse(accepted.out)["replayed"], nlohmann::json::array({tx}));
  EXPECT_EQ(testing::read_file(workspace_ / "notes.txt"), "planted\n");
  EXPECT_FALSE(fs::exists(workspace_ / "user-notes.txt"));
  EXPECT_FALSE(fs::exists(dir));
}

// A commit killed after its commit point is replayed by the next command
// under the audit key that sealed it, and refused under another.
TEST_F(WorkspaceIntegrityTest, AnInterruptedCommitIsReplayedUnderTheKeyThatSealedIt) {
  const auto run = testing::run_cli(run_args("echo new > made.txt"), "", env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string tx = nlohmann::json::parse(run.out)["transaction_id"];
  const fs::path keys = scratch_ / "keys";
  fs::create_directories(keys);
  fs::permissions(keys, fs::perms(0700));
  const std::string sealing_key = "PULSEBOX_AUDIT_KEY=" + (keys / "sealing.key").string();
  std::vector<std::string> argv = {"/usr/bin/env", sealing_key,
                                   "PULSEBOX_TRACE_STOP_AT=commit: log written"};
  for (const std::string& item : env())
    argv.push_back(item);
  argv.insert(argv.end(), {binary_, "commit", "-w", workspace_.path().string(), tx});
  const pid_t committing = testing::spawn(argv, {}, scratch_ / "commit.log");
  ASSERT_GT(committing, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(committing, &status, WUNTRACED), committing);
  ASSERT_TRUE(WIFSTOPPED(status)) << testing::read_file(scratch_ / "commit.log");
  ::kill(committing, SIGKILL);
  ::waitpid(committing, &status, 0);
  const fs::path ready = workspace_ / ".agent/transactions" / tx / "READY";
  ASSERT_TRUE(fs::exists(ready)) << "killed after the commit point";
  EXPECT_EQ(testing::read_file(ready).rfind("pulsebox-commit 1 ", 0), 0u)
      << testing::read_file(ready);

  auto sealing_env = env();
  sealing_env.push_back(sealing_key);
  const fs::path tx_dir = ready.parent_path();
  // The sealed transaction copied into another workspace is not replayed
  // there: the seal names the workspace.
  const fs::path elsewhere = scratch_ / "elsewhere";
  fs::create_directories(elsewhere / ".agent/transactions");
  fs::copy(tx_dir, elsewhere / ".agent/transactions" / tx, fs::copy_options::recursive);
  const auto copied = testing::run_cli({"changes", "-w", elsewhere.string()}, "", sealing_env);
  EXPECT_EQ(copied.exit_code, 125) << copied.out << copied.err;
  EXPECT_NE(copied.err.find("another workspace"), std::string::npos) << copied.err;
  EXPECT_FALSE(fs::exists(elsewhere / "made.txt"));
  // A file put in place of a blob the log names is not applied.
  fs::path blob;
  for (const auto& entry : fs::recursive_directory_iterator(tx_dir / "blobs"))
    if (entry.is_regular_file()) blob = entry.path();
  ASSERT_FALSE(blob.empty());
  const fs::path kept = scratch_ / "kept-blob";
  fs::rename(blob, kept);
  testing::write_file(blob, "bad\n");
  struct stat kept_stat {};
  ASSERT_EQ(::stat(kept.c_str(), &kept_stat), 0);
  ASSERT_EQ(::chmod(blob.c_str(), kept_stat.st_mode & 07777), 0);
  const auto swapped =
      testing::run_cli({"changes", "-w", workspace_.path().string()}, "", sealing_env);
  EXPECT_EQ(swapped.exit_code, 125) << swapped.out << swapped.err;
  EXPECT_NE(swapped.err.find("another inode or size"), std::string::npos) << swapped.err;
  EXPECT_FALSE(fs::exists(workspace_ / "made.txt"));
  fs::rename(kept, blob);

  auto other_env = env();
  other_env.push_back("PULSEBOX_AUDIT_KEY=" + (keys / "other.key").string());
  const auto refused =
      testing::run_cli({"changes", "-w", workspace_.path().string()}, "", other_env);
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("sealed with audit key"), std::string::npos) << refused.err;

  const auto listed =
      testing::run_cli({"changes", "-w", workspace_.path().string()}, "", sealing_env);
  EXPECT_EQ(listed.exit_code, 0) << listed.out << listed.err;
  EXPECT_EQ(testing::read_file(workspace_ / "made.txt"), "new\n");
  EXPECT_FALSE(fs::exists(ready.parent_path()));
}

// The directories of a planted transaction are not followed when they are
// symlinks: blobs/ itself (the commit and the diff), and a shard when a
// path of it is discarded.
TEST_F(WorkspaceIntegrityTest, APlantedTransactionsSymlinkedDirectoriesAreNotFollowed) {
  const fs::path elsewhere = scratch_ / "elsewhere";
  fs::create_directories(elsewhere);
  testing::write_file(elsewhere / "5", "secret");
  nlohmann::json absent = {
      {"type", "absent"}, {"inode", 0}, {"device", 0},  {"size", 0},
      {"mtime_ns", 0},    {"mode", 0},  {"sha256", ""}, {"changed_during_run", false}};
  auto plant = [&](const std::string& tx, const std::string& blob) {
    const fs::path dir = workspace_ / ".agent/transactions" / tx;
    fs::create_directories(dir);
    nlohmann::json a = {{"path", "a.txt"},   {"op", "write"}, {"mode", 0644},
                        {"link_target", ""}, {"blob", blob},  {"size", 6},
                        {"snapshot", absent}};
    nlohmann::json b = {{"path", "b.txt"},   {"op", "write"},   {"mode", 0644},
                        {"link_target", ""}, {"blob", "1/100"}, {"size", 2},
                        {"snapshot", absent}};
    nlohmann::json doc = {{"version", 1},
                          {"id", tx},
                          {"created", "2026-01-01T00:00:00Z"},
                          {"next_blob", 101},
                          {"origin", "planted"},
                          {"entries", {a, b}}};
    testing::write_file(dir / "manifest.json", doc.dump());
    return dir;
  };
  const fs::path linked = plant("tx-20260101000000-aaaaaa", "5");
  fs::create_symlink(elsewhere, linked / "blobs");
  for (const char* command : {"diff", "commit"}) {
    const auto refused = testing::run_cli(
        {command, "-w", workspace_.path().string(), "tx-20260101000000-aaaaaa"}, "", env());
    EXPECT_NE(refused.exit_code, 0) << command << ": " << refused.out;
    EXPECT_NE(refused.err.find("is not a directory"), std::string::npos) << refused.err;
    EXPECT_EQ(refused.out.find("secret"), std::string::npos) << refused.out;
  }
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "a.txt")));
  EXPECT_EQ(testing::read_file(elsewhere / "5"), "secret");

  const fs::path sharded = plant("tx-20260101000000-bbbbbb", "0/5");
  fs::create_directories(sharded / "blobs/1");
  testing::write_file(sharded / "blobs/1/100", "b\n");
  fs::create_symlink(elsewhere, sharded / "blobs/0");
  const auto discarded = testing::run_cli(
      {"discard", "-w", workspace_.path().string(), "tx-20260101000000-bbbbbb", "--", "a.txt"}, "",
      env());
  EXPECT_EQ(discarded.exit_code, 0) << discarded.out << discarded.err;
  EXPECT_EQ(testing::read_file(elsewhere / "5"), "secret");
}

// A planted pending transaction's blob whose mode is not its manifest's
// (setuid, where the diff shows 0755) is refused at commit: what is written
// must be what the review showed, and a setuid file never comes from a run.
TEST_F(WorkspaceIntegrityTest, APlantedBlobWithAnotherModeThanItsManifestIsNotCommitted) {
  const std::string tx = "tx-20260101000000-5e7u1d";
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  plant_blob(dir, "#!/bin/sh\nid\n", 04755);
  plant_manifest(dir, tx, nlohmann::json::array({planted_entry("tool", "write", 0755, "0/0", 13)}));
  const auto refused = commit(tx);
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("mode"), std::string::npos) << refused.err;
  EXPECT_FALSE(fs::exists(fs::symlink_status(workspace_ / "tool")));

  // The same blob with the manifest's mode commits.
  ASSERT_EQ(::chmod((dir / "blobs/0/0").c_str(), 0755), 0);
  const auto committed = commit(tx);
  ASSERT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  struct stat st {};
  ASSERT_EQ(::stat((workspace_ / "tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
}

// A mode change of a file with other links (a pnpm store's, a `cp -al`
// tree's) reaches the workspace's file only: the link outside keeps its
// mode, as it keeps its content when the workspace's file is written.
TEST_F(WorkspaceIntegrityTest, AModeChangeLeavesTheFilesOtherLinksAlone) {
  const fs::path shared = scratch_ / "shared.js";
  testing::write_file(shared, "module.exports = 1;\n");
  fs::permissions(shared, fs::perms(0644));
  fs::create_hard_link(shared, workspace_ / "lib.js");
  const auto run = testing::run_cli(run_args("chmod 666 lib.js"), "", env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto committed = commit(nlohmann::json::parse(run.out)["transaction_id"]);
  ASSERT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  struct stat outside {
  }, inside{};
  ASSERT_EQ(::stat(shared.c_str(), &outside), 0);
  ASSERT_EQ(::stat((workspace_ / "lib.js").c_str(), &inside), 0);
  EXPECT_EQ(outside.st_mode & 07777, 0644u);
  EXPECT_EQ(inside.st_mode & 07777, 0666u);
  EXPECT_EQ(testing::read_file(workspace_ / "lib.js"), "module.exports = 1;\n");
  EXPECT_EQ(testing::read_file(shared), "module.exports = 1;\n");
}

}  // namespace
}  // namespace pulsebox
