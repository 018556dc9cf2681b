// Sessions and a review loop that loses nothing, through the real CLI (as
// root and, in tools/check, as an ordinary user):
//  - a 50-run session (a venv, pip from a local wheel directory, a build, a
//    rename, deletions) reviewed once and committed once gives byte for
//    byte the workspace that committing after every run gives;
//  - a session survives `reconcile` and goes on through the server;
//  - changes that cannot be staged (a FIFO, a 60 MB file, a 17th pending
//    transaction) are held, said in changes_status and by exit 123, listed
//    by `changes`, and dropped only by `discard`;
//  - `--changes commit` refused keeps the transaction and says so.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"
#include "pulsebox/secrets.h"
#include "pulsebox/session.h"
#include "workspace/transactions.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Every path of a tree with what it is: type, mode, content or link target.
std::map<std::string, std::string> tree_of(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    const std::string rel = it->path().lexically_relative(root).string();
    if (rel == ".agent") {
      it.disable_recursion_pending();
      continue;
    }
    struct stat st {};
    ::lstat(it->path().c_str(), &st);
    const std::string mode = std::to_string(st.st_mode & 07777);
    if (S_ISLNK(st.st_mode)) {
      out[rel] = "l " + fs::read_symlink(it->path()).string();
    } else if (S_ISDIR(st.st_mode)) {
      out[rel] = "d " + mode;
    } else {
      out[rel] = "f " + mode + " " + testing::read_file(it->path());
    }
  }
  return out;
}

// Copies a workspace as it is (the reference side of a comparison).
void copy_tree(const fs::path& from, const fs::path& to) {
  fs::copy(from, to, fs::copy_options::recursive | fs::copy_options::copy_symlinks);
}

class SessionTest : public testing::CliFixture {
 protected:
  std::vector<std::string> env(bool served = false) const {
    auto e = cli_env(served);
    // Byte-identical .pyc files on both sides of a comparison.
    e.push_back("SOURCE_DATE_EPOCH=0");
    return e;
  }

  testing::CliRun run(const fs::path& ws, const std::vector<std::string>& flags,
                      const std::string& command, bool served = false) const {
    std::vector<std::string> args = {"run", "--json", "--allow-weaker", "limits", "--timeout",
                                     "120", "-w",     ws.string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--env", "SOURCE_DATE_EPOCH=0", "--env", "PYTHONDONTWRITEBYTECODE=1",
                             "--", "sh", "-c", command});
    return testing::run_cli(args, "", env(served));
  }

  json run_json(const fs::path& ws, const std::vector<std::string>& flags,
                const std::string& command, int expected_exit = 0, bool served = false) const {
    const auto result = run(ws, flags, command, served);
    EXPECT_EQ(result.exit_code, expected_exit) << command << "\n" << result.err;
    try {
      return json::parse(result.out);
    } catch (const json::exception&) {
      ADD_FAILURE() << "not JSON: " << result.out.substr(0, 2000) << "\n" << result.err;
      return json::object();
    }
  }

  testing::CliRun cli(const std::vector<std::string>& args) const {
    return testing::run_cli(args, "", env());
  }
};

// The fifty commands of the session: each builds on the ones before it.
std::vector<std::string> fifty_commands() {
  std::vector<std::string> commands = {
      // A wheel, made deterministically (fixed zip times).
      "mkdir -p wheels && python3 - <<'EOF'\n"
      "import zipfile\n"
      "files = {'demo/__init__.py': 'def hello():\\n    return \"hello from demo\"\\n',\n"
      "         'demo-1.0.dist-info/METADATA': 'Metadata-Version: 2.1\\nName: demo\\nVersion: "
      "1.0\\n',\n"
      "         'demo-1.0.dist-info/WHEEL': 'Wheel-Version: 1.0\\nGenerator: test\\n"
      "Root-Is-Purelib: true\\nTag: py3-none-any\\n'}\n"
      "import hashlib, base64\n"
      "record = ''\n"
      "for name, text in files.items():\n"
      "    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b'=')\n"
      "    record += f'{name},sha256={digest.decode()},{len(text)}\\n'\n"
      "record += 'demo-1.0.dist-info/RECORD,,\\n'\n"
      "files['demo-1.0.dist-info/RECORD'] = record\n"
      "with zipfile.ZipFile('wheels/demo-1.0-py3-none-any.whl', 'w') as z:\n"
      "    for name, text in files.items():\n"
      "        z.writestr(zipfile.ZipInfo(name, (2020, 1, 1, 0, 0, 0)), text)\n"
      "EOF",
      "python3 -m venv .venv",
      ".venv/bin/pip install --no-index --find-links wheels --no-compile -q demo",
      ".venv/bin/python -c 'import demo; print(demo.hello())' > hello.txt",
      "mkdir -p src && printf '#include <stdio.h>\\nint main(void){puts(\"built\");return 0;}\\n' "
      "> src/main.c",
      "printf 'app: src/main.c\\n\\tcc -o app src/main.c\\n' > Makefile",
      "make -s",
      "./app > built.txt",
      "mv hello.txt greeting.txt",
      "rm -r wheels",
      "rm old/one.txt",
      "rm -r old",
      "mkdir old && echo reborn > old/new.txt",
      "ln -s greeting.txt link-to-greeting",
      "chmod 600 notes.txt",
  };
  for (int i = static_cast<int>(commands.size()); i < 49; ++i) {
    commands.push_back("echo line " + std::to_string(i) + " >> log.txt && cat log.txt > /dev/null");
  }
  commands.push_back(
      "test -x .venv/bin/python && test -f greeting.txt && rm log.txt && echo done > done.txt");
  return commands;
}

TEST_F(SessionTest, FiftyRunsReviewedOnceMatchCommittingAfterEveryRun) {
  testing::write_file(workspace_ / "notes.txt", "notes\n");
  testing::write_file(workspace_ / "old/one.txt", "one\n");
  testing::write_file(workspace_ / "old/two.txt", "two\n");
  const fs::path reference = scratch_ / "reference";
  copy_tree(workspace_.path(), reference);
  const auto before = tree_of(workspace_.path());

  const auto commands = fifty_commands();
  ASSERT_EQ(commands.size(), 50u);
  for (const std::string& command : commands) {
    const json result = run_json(workspace_.path(), {"--session", "build"}, command);
    ASSERT_EQ(result.value("exit_code", -1), 0) << command << "\n" << result.dump().substr(0, 3000);
    ASSERT_EQ(result["changes_status"]["status"], "session") << command;
  }
  EXPECT_EQ(tree_of(workspace_.path()), before) << "a session run changed the workspace";

  // One review: the session's net changes.
  const auto list = cli({"session", "list", "--json", "-w", workspace_.path().string()});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  const json sessions = json::parse(list.out);
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0]["runs"], 50);
  EXPECT_EQ(sessions[0]["layers"], 1) << "the session's layers were not merged";
  const auto stat = cli({"diff", "-w", workspace_.path().string(), "build", "--json", "--all"});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  const json review = json::parse(stat.out);
  std::set<std::string> reviewed;
  for (const auto& item : review["paths"])
    reviewed.insert(item["path"].get<std::string>());
  for (const char* path : {"greeting.txt", "old/one.txt", "old/new.txt", "built.txt", "app",
                           ".venv/pyvenv.cfg", "link-to-greeting", "notes.txt", "done.txt"}) {
    EXPECT_TRUE(reviewed.count(path)) << path << " missing from the review";
  }
  EXPECT_FALSE(reviewed.count("log.txt")) << "a file made and deleted within the session";
  EXPECT_FALSE(reviewed.count("wheels")) << "a directory made and deleted within the session";

  // The times the session saw are the times committed.
  const json seen = run_json(workspace_.path(), {"--session", "build"},
                             "stat -c %Y greeting.txt src/main.c .venv/pyvenv.cfg");
  // One commit.
  const auto commit =
      cli({"session", "commit", "--json", "-w", workspace_.path().string(), "build"});
  ASSERT_EQ(commit.exit_code, 0) << commit.out << commit.err;
  EXPECT_TRUE(json::parse(commit.out)["session_ended"].get<bool>());

  // The same commands, each committed after its run, on the copy.
  for (const std::string& command : commands) {
    const json result = run_json(reference, {"--changes", "commit"}, command);
    ASSERT_EQ(result["changes_status"]["status"] == "committed" ||
                  result["changes_status"]["status"] == "unchanged",
              true)
        << command << ": " << result["changes_status"].dump();
  }
  const auto session_tree = tree_of(workspace_.path());
  const auto reference_tree = tree_of(reference);
  EXPECT_EQ(session_tree.size(), reference_tree.size());
  for (const auto& [path, what] : reference_tree) {
    const auto found = session_tree.find(path);
    if (found == session_tree.end()) {
      ADD_FAILURE() << path << " missing after the session commit";
    } else if (found->second != what) {
      ADD_FAILURE() << path << " differs: " << found->second.substr(0, 200) << " vs "
                    << what.substr(0, 200);
    }
  }
  EXPECT_EQ(testing::read_file(workspace_ / "greeting.txt"), "hello from demo\n");
  std::string committed_times;
  for (const char* path : {"greeting.txt", "src/main.c", ".venv/pyvenv.cfg"}) {
    struct stat st {};
    ::lstat((workspace_ / path).c_str(), &st);
    committed_times += std::to_string(st.st_mtim.tv_sec) + "\n";
  }
  EXPECT_EQ(seen["stdout"], committed_times) << "modification times were not kept";
  EXPECT_EQ(testing::read_file(workspace_ / "built.txt"), "built\n");
}

TEST_F(SessionTest, ASessionSurvivesReconcileAndGoesOnThroughTheServer) {
  json result = run_json(workspace_.path(), {"--session", "s"}, "echo one > one.txt");
  ASSERT_EQ(result["changes_status"]["status"], "session");
  const auto reconcile = cli({"reconcile", "-w", workspace_.path().string()});
  ASSERT_EQ(reconcile.exit_code, 0) << reconcile.err;
  testing::LocalServer server;
  ASSERT_EQ(server.start(binary_, env(true), state_ / "server.sock", scratch_ / "server.log"), "");
  result = run_json(workspace_.path(), {"--session", "s"}, "cat one.txt > two.txt",
                    /*expected_exit=*/0, /*served=*/true);
  EXPECT_EQ(server.served_runs(), 1) << server.log();
  EXPECT_EQ(result["changes_status"]["status"], "session");
  result = run_json(workspace_.path(), {"--session", "s"}, "cat two.txt");
  EXPECT_EQ(result["stdout"], "one\n");
  EXPECT_FALSE(fs::exists(workspace_ / "one.txt"));
  const auto discard = cli({"session", "discard", "-w", workspace_.path().string(), "s"});
  EXPECT_EQ(discard.exit_code, 0) << discard.err;
  const auto list = cli({"session", "list", "--json", "-w", workspace_.path().string()});
  EXPECT_EQ(json::parse(list.out).size(), 0u);
}

// With --disk a run's changes are on a tmpfs of its own: they are copied
// into the session (whiteouts and opaque directories included).
TEST_F(SessionTest, ASessionRunWithADiskLimitKeepsItsChanges) {
  testing::write_file(workspace_ / "gone.txt", "gone\n");
  testing::write_file(workspace_ / "dir/old.txt", "old\n");
  json result = run_json(workspace_.path(), {"--session", "d", "--disk", "8M"},
                         "echo kept > kept.txt && rm gone.txt && rm -r dir && mkdir dir && "
                         "echo new > dir/new.txt");
  ASSERT_EQ(result["changes_status"]["status"], "session") << result["changes_status"];
  result = run_json(workspace_.path(), {"--session", "d", "--disk", "8M"},
                    "cat kept.txt; ls dir; test -e gone.txt || echo no-gone");
  EXPECT_EQ(result["stdout"], "kept\nnew.txt\nno-gone\n");
  const auto commit = cli({"session", "commit", "-w", workspace_.path().string(), "d"});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  EXPECT_EQ(testing::read_file(workspace_ / "kept.txt"), "kept\n");
  EXPECT_FALSE(fs::exists(workspace_ / "gone.txt"));
  EXPECT_FALSE(fs::exists(workspace_ / "dir/old.txt"));
  EXPECT_EQ(testing::read_file(workspace_ / "dir/new.txt"), "new\n");
}

// The review commands find the workspace from a subdirectory, as `run` does.
TEST_F(SessionTest, ReviewCommandsRunFromASubdirectoryFindTheWorkspace) {
  fs::create_directories(workspace_ / "sub/deep");
  const json result = run_json(workspace_.path(), {"--session", "s"}, "echo x > x.txt");
  ASSERT_EQ(result["changes_status"]["status"], "session");
  const std::string deep = (workspace_ / "sub/deep").string();
  const auto sessions = testing::run_cli({"session", "list", "--json"}, "", env(), deep);
  ASSERT_EQ(sessions.exit_code, 0) << sessions.err;
  EXPECT_EQ(json::parse(sessions.out).size(), 1u) << sessions.out;
  const auto changes = testing::run_cli({"changes", "--json"}, "", env(), deep);
  ASSERT_EQ(changes.exit_code, 0) << changes.err;
  EXPECT_FALSE(fs::exists(workspace_ / "sub/deep/.agent")) << "a second .agent was made";
}

// `pulsebox session commit` killed (SIGKILL) at a step of its commit: the
// next pulsebox command that opens the session finishes it (past the
// commit point) or undoes it (before), as root and as an ordinary user.
TEST_F(SessionTest, AKilledSessionCommitIsFinishedOrUndoneByTheNextCommand) {
  for (const char* step : {"snapshots checked", "ready marker", "directories synced"}) {
    SCOPED_TRACE(step);
    testing::TempDir ws_dir;
    fs::permissions(ws_dir.path(), fs::perms(0755));
    testing::write_file(ws_dir / "a.txt", "a\n");
    const json result =
        run_json(ws_dir.path(), {"--session", "s"}, "echo A > a.txt; echo b > b.txt");
    ASSERT_EQ(result["changes_status"]["status"], "session");
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      const std::string at = step;
      workspace::commit_failpoint = [at](std::string_view name) {
        if (name == at) ::raise(SIGKILL);
      };
      Workspace ws(ws_dir.path());
      try {
        commit_session(ws, "s", state_ / "kept");
      } catch (...) {
        ::_exit(3);
      }
      ::_exit(0);
    }
    int status = 0;
    ::waitpid(child, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status)) << "the commit was not killed at " << step;
    const auto list =
        testing::run_cli({"session", "list", "--json", "-w", ws_dir.path().string()}, "", env());
    ASSERT_EQ(list.exit_code, 0) << list.err;
    const bool decided = std::string(step) != "snapshots checked";
    if (decided) {
      EXPECT_EQ(json::parse(list.out).size(), 0u) << list.out;
      EXPECT_EQ(testing::read_file(ws_dir / "a.txt"), "A\n");
      EXPECT_EQ(testing::read_file(ws_dir / "b.txt"), "b\n");
    } else {
      ASSERT_EQ(json::parse(list.out).size(), 1u) << list.out;
      EXPECT_TRUE(json::parse(list.out)[0]["committing"].is_null());
      EXPECT_EQ(testing::read_file(ws_dir / "a.txt"), "a\n");
      EXPECT_FALSE(fs::exists(ws_dir / "b.txt"));
    }
    const auto changes =
        testing::run_cli({"changes", "--json", "-w", ws_dir.path().string()}, "", env());
    EXPECT_EQ(json::parse(changes.out).size(), 0u) << "a transaction was left: " << changes.out;
  }
}

// A command can nest directories as deep as it likes: copying its layer
// (--disk) never overflows the stack, and a layer too deep to merge or
// commit is held instead of making the whole session unusable.
TEST_F(SessionTest, AHostileDeepTreeIsHeldAndTheSessionStaysCommittable) {
  auto deep = [](int levels) {
    std::string path;
    for (int i = 0; i < levels; ++i)
      path += "a/";
    return path;
  };
  json result = run_json(workspace_.path(), {"--session", "deep", "--disk", "64M"},
                         "echo important > keep.txt && mkdir -p " + deep(200));
  ASSERT_EQ(result["changes_status"]["status"], "session") << result["changes_status"];
  result = run_json(workspace_.path(), {"--session", "deep"}, "mkdir -p b/" + deep(600),
                    /*expected_exit=*/123);
  EXPECT_EQ(result["changes_status"]["status"], "held") << result["changes_status"];
  EXPECT_NE(result["changes_status"]["detail"].get<std::string>().find("deeper"),
            std::string::npos);
  result =
      run_json(workspace_.path(), {"--session", "deep"}, "cat keep.txt; test -d b || echo no-b");
  EXPECT_EQ(result["stdout"], "important\nno-b\n");
  const auto commit = cli({"session", "commit", "-w", workspace_.path().string(), "deep"});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  EXPECT_EQ(testing::read_file(workspace_ / "keep.txt"), "important\n");
  EXPECT_TRUE(fs::is_directory(workspace_ / deep(200)));
}

// A run's `chmod 000` on its own directory or file keeps an ordinary user
// (tools/check runs this suite as one) out of them too: such a run's
// changes were held whole, unreviewable, and a session holding them could
// be neither reviewed nor committed, only thrown away. Both now go
// through, with the modes the runs left.
TEST_F(SessionTest, WhatARunLockedAgainstItsOwnerIsReviewedAndCommitted) {
  const fs::path ws = workspace_.path();
  json result = run_json(ws, {"--session", "locked"},
                         "mkdir locked && echo inside > locked/f.txt && echo sealed > sealed.txt "
                         "&& chmod 000 locked sealed.txt");
  ASSERT_EQ(result["changes_status"]["status"], "session") << result["changes_status"];
  result = run_json(ws, {"--session", "locked"},
                    "chmod 700 locked && echo later > locked/g.txt && chmod 000 locked");
  ASSERT_EQ(result["changes_status"]["status"], "session") << result["changes_status"];
  const auto diff = cli({"session", "diff", "-w", ws.string(), "locked"});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  for (const char* line : {"+inside\n", "+later\n", "+sealed\n"})
    EXPECT_NE(diff.out.find(line), std::string::npos) << line << " in\n" << diff.out;
  const auto committed = cli({"session", "commit", "-w", ws.string(), "locked"});
  ASSERT_EQ(committed.exit_code, 0) << committed.err;

  result = run_json(ws, {}, "mkdir shut && echo shut > shut/s.txt && chmod 000 shut");
  ASSERT_EQ(result["changes_status"]["status"], "staged") << result["changes_status"];
  const std::string tx = result["transaction_id"];
  const auto staged = cli({"diff", "-w", ws.string(), tx});
  ASSERT_EQ(staged.exit_code, 0) << staged.err;
  EXPECT_NE(staged.out.find("+shut\n"), std::string::npos) << staged.out;
  const auto applied = cli({"commit", "-w", ws.string(), tx});
  ASSERT_EQ(applied.exit_code, 0) << applied.err;
  // The workspace's root shut: the run's directory could be neither read
  // nor moved to be held, and its changes were lost. The root's own mode
  // is never a change (as root's runs, it is not staged).
  result = run_json(ws, {}, "echo rooted > rooted.txt && chmod 100 .");
  ASSERT_EQ(result["changes_status"]["status"], "staged") << result["changes_status"];
  ASSERT_EQ(cli({"commit", "-w", ws.string(), result["transaction_id"]}).exit_code, 0);
  result = run_json(ws, {"--session", "rooted"}, "echo layered > layered.txt && chmod 555 .");
  ASSERT_EQ(result["changes_status"]["status"], "session") << result["changes_status"];
  ASSERT_EQ(cli({"session", "commit", "-w", ws.string(), "rooted"}).exit_code, 0);
  EXPECT_EQ(testing::read_file(ws / "rooted.txt"), "rooted\n");
  EXPECT_EQ(testing::read_file(ws / "layered.txt"), "layered\n");

  for (const char* path : {"locked", "sealed.txt", "shut"}) {
    struct stat st {};
    ASSERT_EQ(::lstat((ws / path).c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 07777, 0u) << path;
    fs::permissions(ws / path, fs::perms::owner_all);
  }
  EXPECT_EQ(testing::read_file(ws / "locked/f.txt"), "inside\n");
  EXPECT_EQ(testing::read_file(ws / "locked/g.txt"), "later\n");
  EXPECT_EQ(testing::read_file(ws / "sealed.txt"), "sealed\n");
  EXPECT_EQ(testing::read_file(ws / "shut/s.txt"), "shut\n");
}

TEST_F(SessionTest, HeldChangesGoWholeAndTheirRecordsAreShownSafely) {
  const json result =
      run_json(workspace_.path(), {}, "mkfifo p && echo x > x.txt", /*expected_exit=*/123);
  const std::string held = result["changes_status"]["held_id"];
  const std::string tx = result["transaction_id"];
  const auto with_paths =
      cli({"discard", "-w", workspace_.path().string(), tx, held, "--", "x.txt"});
  EXPECT_EQ(with_paths.exit_code, 125) << with_paths.err;
  EXPECT_NE(with_paths.err.find("held changes go whole"), std::string::npos) << with_paths.err;
  // A planted record with escape sequences in its fields.
  testing::write_file(workspace_ / ".agent/held/held-planted.json",
                      "{\"id\":\"held-planted\",\"created\":\"\\u001b]0;PWNED\\u0007\","
                      "\"origin\":\"o\",\"reason\":\"\\u001b[2J\",\"refused\":[],"
                      "\"location\":\"/tmp\"}");
  const auto listed = cli({"changes", "-w", workspace_.path().string()});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_EQ(listed.out.find('\x1b'), std::string::npos)
      << "an escape sequence reached the terminal";
  const auto planted = cli({"discard", "-w", workspace_.path().string(), "held-planted"});
  EXPECT_EQ(planted.exit_code, 125) << "a planted record named /tmp: " << planted.err;
}

TEST_F(SessionTest, SessionFlagsAreChecked) {
  auto result = run(workspace_.path(), {"--session", "../x"}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(result.err.find("--session"), std::string::npos) << result.err;
  result = run(workspace_.path(), {"--session", "s", "--changes", "commit"}, "true");
  EXPECT_EQ(result.exit_code, 125);
  EXPECT_NE(result.err.find("session commit"), std::string::npos) << result.err;
  const auto missing = cli({"session", "commit", "-w", workspace_.path().string(), "nope"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("no session"), std::string::npos) << missing.err;
}

// The held entry of a run: listed by `changes`, its directory on disk.
json held_entry(const json& listing, const std::string& id) {
  for (const auto& item : listing) {
    if (item.value("id", "") == id) return item;
  }
  return json();
}

TEST_F(SessionTest, AFifoIsHeldNotDroppedAndTheRestIsStaged) {
  const json result = run_json(workspace_.path(), {}, "mkfifo pipe && echo ok > ok.txt",
                               /*expected_exit=*/123);
  const json& status = result["changes_status"];
  ASSERT_EQ(status["status"], "held") << status.dump();
  ASSERT_TRUE(status["held_id"].is_string()) << status.dump();
  ASSERT_EQ(status["refused"].size(), 1u) << status.dump();
  EXPECT_EQ(status["refused"][0]["path"], "pipe");
  ASSERT_TRUE(result["transaction_id"].is_string()) << "the rest was not staged";

  const auto changes = cli({"changes", "--json", "-w", workspace_.path().string()});
  ASSERT_EQ(changes.exit_code, 0) << changes.err;
  const json held = held_entry(json::parse(changes.out), status["held_id"]);
  ASSERT_FALSE(held.is_null()) << changes.out;
  EXPECT_EQ(held["status"], "held");
  const fs::path location = held["location"].get<std::string>();
  struct stat st {};
  ASSERT_EQ(::lstat((location / "pipe").c_str(), &st), 0) << "the FIFO is not kept";
  EXPECT_TRUE(S_ISFIFO(st.st_mode));

  const auto discard =
      cli({"discard", "-w", workspace_.path().string(), status["held_id"].get<std::string>()});
  EXPECT_EQ(discard.exit_code, 0) << discard.err;
  EXPECT_FALSE(fs::exists(location));
  const auto after = cli({"changes", "--json", "-w", workspace_.path().string()});
  EXPECT_TRUE(held_entry(json::parse(after.out), status["held_id"]).is_null());
}

TEST_F(SessionTest, AFileOverTheSizeLimitIsHeldWholeAndNamed) {
  const json result = run_json(workspace_.path(), {},
                               "head -c 62914560 /dev/zero > big.bin && echo small > small.txt",
                               /*expected_exit=*/123);
  const json& status = result["changes_status"];
  ASSERT_EQ(status["status"], "held") << status.dump();
  ASSERT_EQ(status["refused"].size(), 1u) << status.dump();
  EXPECT_EQ(status["refused"][0]["path"], "big.bin");
  EXPECT_NE(status["refused"][0]["reason"].get<std::string>().find("limit"), std::string::npos);
  const auto changes = cli({"changes", "--json", "-w", workspace_.path().string()});
  const json held = held_entry(json::parse(changes.out), status["held_id"]);
  ASSERT_FALSE(held.is_null()) << changes.out;
  EXPECT_EQ(fs::file_size(fs::path(held["location"].get<std::string>()) / "big.bin"), 62914560u);
}

TEST_F(SessionTest, ASeventeenthPendingTransactionIsHeldWhole) {
  for (int i = 0; i < 16; ++i) {
    const json result =
        run_json(workspace_.path(), {}, "echo " + std::to_string(i) + " > f" + std::to_string(i));
    ASSERT_EQ(result["changes_status"]["status"], "staged");
  }
  const json result = run_json(workspace_.path(), {}, "echo 16 > f16", /*expected_exit=*/123);
  const json& status = result["changes_status"];
  ASSERT_EQ(status["status"], "held") << status.dump();
  EXPECT_NE(status["detail"].get<std::string>().find("open transactions"), std::string::npos)
      << status.dump();
  EXPECT_TRUE(result["transaction_id"].is_null());
  const auto changes = cli({"changes", "--json", "-w", workspace_.path().string()});
  const json held = held_entry(json::parse(changes.out), status["held_id"]);
  ASSERT_FALSE(held.is_null()) << changes.out;
  EXPECT_EQ(testing::read_file(fs::path(held["location"].get<std::string>()) / "f16"), "16\n");
}

TEST_F(SessionTest, ARefusedCommitAfterTheRunKeepsTheTransactionAndSaysSo) {
  const json result =
      run_json(workspace_.path(), {"--changes", "commit"},
               "mkdir -p .vscode && echo '{}' > .vscode/tasks.json && echo fine > fine.txt",
               /*expected_exit=*/123);
  const json& status = result["changes_status"];
  EXPECT_EQ(status["status"], "conflict") << status.dump();
  ASSERT_TRUE(result["transaction_id"].is_string());
  EXPECT_NE(status["detail"].get<std::string>().find(result["transaction_id"].get<std::string>()),
            std::string::npos);
  EXPECT_FALSE(fs::exists(workspace_ / "fine.txt"));
  const auto changes = cli({"changes", "--json", "-w", workspace_.path().string()});
  EXPECT_NE(changes.out.find(result["transaction_id"].get<std::string>()), std::string::npos);
}

TEST_F(SessionTest, GitStatusInsideTheSandboxChangesNothing) {
  const std::string ws = workspace_.path().string();
  testing::write_file(workspace_ / "a.txt", "a\n");
  const auto init = testing::run_cli({"run", "--json", "--allow-weaker", "limits", "--changes",
                                      "commit", "-w", ws, "--", "sh", "-c",
                                      "git init -q && git add a.txt && git -c user.name=t -c "
                                      "user.email=t@t commit -qm init"},
                                     "", env());
  ASSERT_EQ(init.exit_code, 123) << "committing a new repository needs a rule: " << init.err;
  // Commit the repository the way the docs say (a rule naming .git).
  testing::write_file(scratch_ / "policy.json",
                      R"({"rules": [{"action": "write", "target": ".git", "decision": "allow"},)"
                      R"({"action": "write", "target": ".git/**", "decision": "allow"}]})");
  const auto committed =
      cli({"commit", "-w", ws, "--policy", (scratch_ / "policy.json").string(), "latest"});
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  const json status = run_json(workspace_.path(), {}, "git status --short && git diff");
  EXPECT_EQ(status["stdout"], "");
  EXPECT_EQ(status["changes_status"]["status"], "unchanged") << status["changes"];
}

class SecretInChangesTest : public SessionTest {
 protected:
  static constexpr const char* kValue = "hunter2-sandbox-token-0731";

  testing::CliRun run_with_secret(const std::vector<std::string>& flags,
                                  const std::string& command) const {
    std::vector<std::string> args = {
        "run",   "--json", "--allow-weaker",          "limits", "--secret",
        "TOKEN", "-w",     workspace_.path().string()};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"--", "sh", "-c", command});
    auto e = env();
    e.push_back(std::string("TOKEN=") + kValue);
    return testing::run_cli(args, "", e);
  }

  // The review never shows the value; the commit refuses it unless allowed.
  void expect_guarded(const std::string& id, const std::vector<std::string>& commit_args,
                      const std::vector<std::string>& allowed_args) const {
    const auto diff = cli({"diff", "-w", workspace_.path().string(), id, "--all"});
    EXPECT_EQ(diff.exit_code, 0) << diff.err;
    EXPECT_EQ(diff.out.find(kValue), std::string::npos) << "the diff shows the secret";
    EXPECT_NE(diff.out.find("REDACTED"), std::string::npos) << diff.out;
    const auto refused = cli(commit_args);
    EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("secret"), std::string::npos) << refused.err;
    EXPECT_FALSE(fs::exists(workspace_ / "config.txt"));
    const auto allowed = cli(allowed_args);
    EXPECT_EQ(allowed.exit_code, 0) << allowed.out << allowed.err;
    EXPECT_EQ(testing::read_file(workspace_ / "config.txt"), std::string("token=") + kValue + "\n");
    const std::string log = testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
    EXPECT_EQ(log.find(kValue), std::string::npos) << "the audit log holds the value";
  }
};

TEST_F(SecretInChangesTest, ARunsChangedFileHoldingASecretIsFlaggedRedactedAndRefused) {
  const auto result = run_with_secret({}, "echo token=$TOKEN > config.txt");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const json out = json::parse(result.out);
  EXPECT_TRUE(out["changes_status"]["contains_secrets"].get<bool>()) << out["changes_status"];
  const std::string tx = out["transaction_id"];
  const std::string log = testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
  EXPECT_NE(log.find("changes-secret"), std::string::npos);
  const std::string ws = workspace_.path().string();
  expect_guarded(tx, {"commit", "-w", ws, tx}, {"commit", "-w", ws, "--allow-secrets", tx});
}

TEST_F(SecretInChangesTest, ASessionRemembersTheSecretUntilItsCommit) {
  auto result = run_with_secret({"--session", "s"}, "echo token=$TOKEN > config.txt");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_TRUE(json::parse(result.out)["changes_status"]["contains_secrets"].get<bool>());
  // A later run of the session without the secret registered could move the
  // marked file to where no mark is (`mv`), past the review: it is refused
  // before it starts, unless the weaker level is accepted.
  const auto refused = run(workspace_.path(), {"--session", "s"}, "mv config.txt moved.txt");
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("--allow-weaker secrets"), std::string::npos) << refused.err;
  EXPECT_NE(testing::read_file(workspace_ / ".agent/logs/audit.jsonl")
                .find("secrets: not enforced strongly for this run"),
            std::string::npos)
      << "the refusal is not in the audit log";
  const json later = run_json(workspace_.path(), {"--session", "s", "--allow-weaker", "secrets"},
                              "echo more > more.txt");
  EXPECT_EQ(later["changes_status"]["status"], "session");
  EXPECT_EQ(later["enforcement"]["secrets"], "partially_enforced") << later["enforcement"];
  // With the value registered again, nothing is weaker.
  const auto again = run_with_secret({"--session", "s"}, "echo again >> more.txt");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["enforcement"]["secrets"], "strongly_enforced");
  const std::string ws = workspace_.path().string();
  expect_guarded("s", {"session", "commit", "-w", ws, "s"},
                 {"session", "commit", "-w", ws, "--allow-secrets", "s"});
  EXPECT_EQ(testing::read_file(workspace_ / "more.txt"), "more\nagain\n");
}

// A registered value under 4 bytes cannot be scrubbed (it would match
// everywhere): it was ignored without a word, printed unscrubbed, while the
// result said `secrets: strongly_enforced` (found by an attack). The
// dimension is now weaker, which refuses the run unless accepted.
TEST_F(SecretInChangesTest, AValueTooShortToScrubIsRefusedUnlessTheWeakerLevelIsAccepted) {
  auto e = env();
  e.push_back("SHORT=xK9");
  const std::vector<std::string> base = {
      "run",   "--json", "--allow-weaker",          "limits", "--secret",
      "SHORT", "-w",     workspace_.path().string()};
  auto args = base;
  args.insert(args.end(), {"--", "sh", "-c", "echo $SHORT"});
  const auto refused = testing::run_cli(args, "", e);
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("the value of SHORT is under 4 bytes"), std::string::npos)
      << refused.err;
  auto padded = env();
  padded.push_back("SHORT=  xy\n");  // 5 bytes, of which a command prints "xy"
  const auto also = testing::run_cli(args, "", padded);
  EXPECT_EQ(also.exit_code, 125) << also.out << also.err;
  EXPECT_NE(refused.err.find("--allow-weaker secrets"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out.find("xK9"), std::string::npos) << refused.out;
  args = base;
  args.insert(args.end(), {"--allow-weaker", "secrets", "--", "sh", "-c", "echo $SHORT"});
  const auto accepted = testing::run_cli(args, "", e);
  ASSERT_EQ(accepted.exit_code, 0) << accepted.err;
  EXPECT_EQ(json::parse(accepted.out)["enforcement"]["secrets"], "partially_enforced");
}

// Values too large to look for together aborted the CLI (SIGABRT after
// seconds): refused now, before the command starts.
TEST_F(SecretInChangesTest, ValuesPastTheScrubbersLimitAreRefusedBeforeTheRun) {
  auto e = env();
  const std::size_t each = SecretScrubber::kMaxSecretBytes / 3 + 1;
  for (const char* name : {"BIG1", "BIG2", "BIG3"})
    e.push_back(std::string(name) + "=" + std::string(each, name[3]));
  const auto refused =
      testing::run_cli({"run", "--secret", "BIG1", "--secret", "BIG2", "--secret", "BIG3", "-w",
                        workspace_.path().string(), "--", "touch", "ran"},
                       "", e);
  EXPECT_EQ(refused.exit_code, 125) << refused.err;
  EXPECT_EQ(refused.err.rfind("pulsebox: --secret: the 3 registered secret values hold", 0), 0u)
      << refused.err;
  EXPECT_NE(refused.err.find(std::to_string(SecretScrubber::kMaxSecretBytes)), std::string::npos);
  EXPECT_FALSE(fs::exists(workspace_ / "ran"));
}

// What a run replaced is the host's, but with the value registered the
// review shows it redacted: a run that deleted a file holding the value
// showed it in the diff, where `cat` in the run would have been scrubbed.
TEST_F(SecretInChangesTest, AFileThatHeldTheSecretBeforeARunDeletedItShowsRedacted) {
  testing::write_file(workspace_ / "config.txt", std::string("name=demo\ntoken=") + kValue + "\n");
  testing::write_file(workspace_ / "notes.txt", "plain\n");
  const auto result = run_with_secret({}, "rm config.txt && echo more >> notes.txt");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const std::string tx = json::parse(result.out)["transaction_id"];
  const std::string ws = workspace_.path().string();
  const auto diff = cli({"diff", "-w", ws, tx});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(diff.out.find(kValue), std::string::npos) << "the diff shows the secret";
  EXPECT_NE(diff.out.find("-token=[REDACTED"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("secret: config.txt held a registered secret value before"),
            std::string::npos)
      << diff.out;
  EXPECT_NE(diff.out.find("+more"), std::string::npos) << diff.out;
  const json paths = json::parse(cli({"diff", "--json", "-w", ws, tx}).out)["paths"];
  ASSERT_EQ(paths.size(), 2u) << paths;
  EXPECT_EQ(paths[0]["path"], "config.txt");
  EXPECT_EQ(paths[0]["before_secret"], "redacted");
  EXPECT_TRUE(paths[1]["before_secret"].is_null()) << paths;
  // The deletion writes no value into the workspace: no --allow-secrets.
  const auto committed = cli({"commit", "-w", ws, tx});
  EXPECT_EQ(committed.exit_code, 0) << committed.out << committed.err;
  EXPECT_FALSE(fs::exists(workspace_ / "config.txt"));
}

// A name is the command's to choose: `mv a "$TOKEN"` carried the value out
// in the run's result (its list of changes), past the scrubbed output, and
// the commit wrote it into the workspace unasked.
TEST_F(SecretInChangesTest, APathNamedWithTheSecretIsRedactedInTheResultAndFlagged) {
  testing::write_file(workspace_ / "a.txt", "a\n");
  const auto result = run_with_secret({}, "mv a.txt \"$TOKEN\" && ln -s a \"l$TOKEN\"");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_EQ(result.out.find(kValue), std::string::npos) << result.out;
  const json out = json::parse(result.out);
  EXPECT_TRUE(out["changes_status"]["contains_secrets"].get<bool>()) << out["changes_status"];
  const std::string tx = out["transaction_id"];
  const std::string ws = workspace_.path().string();
  const auto refused = cli({"commit", "-w", ws, tx});
  EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("secret"), std::string::npos) << refused.err;
  EXPECT_TRUE(fs::exists(workspace_ / "a.txt"));
  const auto allowed = cli({"commit", "-w", ws, "--allow-secrets", tx});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.out << allowed.err;
  EXPECT_EQ(testing::read_file(workspace_ / kValue), "a\n");
}

// The same through a session, whose review runs later without the value:
// its run checked what it replaced while the value was known.
TEST_F(SecretInChangesTest, ASessionRemembersWhatItsRunReplacedHeldTheSecret) {
  const std::string ws = workspace_.path().string();
  testing::write_file(workspace_ / "config.txt", std::string("token=") + kValue + "\n");
  testing::write_file(workspace_ / "dir/key.txt", std::string("key ") + kValue + "\n");
  testing::write_file(workspace_ / "dir/other.txt", "other\n");
  auto result = run_with_secret(
      {"--session", "s"}, "echo changed > config.txt && rm -r dir && mkdir dir && echo x > dir/y");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  const auto diff = cli({"diff", "-w", ws, "s", "--all"});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(diff.out.find(kValue), std::string::npos) << "the diff shows the secret";
  EXPECT_NE(diff.out.find("-token=[REDACTED"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("-key [REDACTED"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("-other"), std::string::npos) << diff.out;
  // The host's file changed since the run checked it: its content then is
  // not what was checked, and is not shown.
  testing::write_file(workspace_ / "config.txt", std::string("token2=") + kValue + "\n");
  const auto later = cli({"diff", "-w", ws, "s", "--", "config.txt"});
  EXPECT_EQ(later.exit_code, 0) << later.err;
  EXPECT_EQ(later.out.find(kValue), std::string::npos) << later.out;
  EXPECT_NE(later.out.find("[content not shown"), std::string::npos) << later.out;
  const json paths = json::parse(cli({"diff", "--json", "-w", ws, "s"}).out)["paths"];
  std::map<std::string, json> by_path;
  for (const json& item : paths)
    by_path[item["path"].get<std::string>()] = item["before_secret"];
  EXPECT_EQ(by_path["config.txt"], "withheld") << paths;
  EXPECT_EQ(by_path["dir/key.txt"], "redacted") << paths;
  EXPECT_TRUE(by_path["dir/other.txt"].is_null()) << paths;
}

// What a session's runs delete beneath directories: hidden by an opaque
// directory at any depth, or deleted whole by one run and brought back by
// the next (the merge makes the directory opaque, and the review lists
// each file it held). And a later run with another value registered, which
// finds none of its own in what was there, keeps the first run's mark.
TEST_F(SecretInChangesTest, ASessionChecksWhatItsRunsDeleteBeneathDirectories) {
  const std::string ws = workspace_.path().string();
  const std::string held = std::string("token=") + kValue + "\n";
  testing::write_file(workspace_ / "nested/sub/secret.txt", held);
  testing::write_file(workspace_ / "whole/deep/a.txt", held);
  testing::write_file(workspace_ / "swapped.txt", held);
  testing::write_file(workspace_ / "kept.txt", held + "more\n");
  testing::write_file(workspace_ / "clean.txt", "clean\n");
  auto first = run_with_secret({"--session", "s"},
                               "rm -r nested && mkdir -p nested/sub && echo new > nested/sub/other"
                               " && rm -r whole && rm swapped.txt && mkdir swapped.txt"
                               " && sed -i /token/d kept.txt && echo more >> clean.txt");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  // The next runs: one with another value registered, one with none.
  auto e = env();
  e.push_back("OTHER=another-registered-value-42");
  const auto other = testing::run_cli(
      {"run", "--json", "--allow-weaker", "limits", "--secret", "OTHER", "-w", ws, "--session", "s",
       "--", "sh", "-c", "mkdir -p whole/deep && echo again >> kept.txt"},
      "", e);
  ASSERT_EQ(other.exit_code, 0) << other.err;
  const json none = run_json(workspace_.path(), {"--session", "s"},
                             "rmdir swapped.txt && echo plain > swapped.txt");
  ASSERT_EQ(none["changes_status"]["status"], "session") << none.dump();
  const auto diff = cli({"diff", "-w", ws, "s", "--all"});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(diff.out.find(kValue), std::string::npos) << diff.out;
  for (const char* path : {"nested/sub/secret.txt", "whole/deep/a.txt", "swapped.txt", "kept.txt"})
    EXPECT_NE(diff.out.find(std::string("a/") + path), std::string::npos) << path << diff.out;
  // What held no value is shown as it was: a file replaced by a directory
  // (which cannot be listed as one) made the check give up on every base.
  EXPECT_NE(diff.out.find(" clean\n+more\n"), std::string::npos) << diff.out;
}

}  // namespace
}  // namespace pulsebox
