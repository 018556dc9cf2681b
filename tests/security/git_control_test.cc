// A sandboxed command must not be able to plant anything that makes the host
// run code later, when the user runs git, enters the directory or opens it in
// an editor. The attack that broke it: a run writes `.git/commondir` (-> a
// directory of its own whose `config` sets core.fsmonitor), `pulsebox commit`
// applied it, and the user's next `git status` ran the command. Each test
// plants one such change with a real sandboxed run, checks that
// `pulsebox commit` refuses it (exit 125, naming the path) with nothing
// applied, and, for the git attacks, that the real `git status` on the host
// then runs nothing. Runs as root and as an ordinary user (rootless).
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "helpers/cli_runner.h"
#include "helpers/test_support.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/workspace.h"

namespace pulsebox {
namespace {

using testing::CliRun;
using testing::TempDir;
namespace fs = std::filesystem;

class GitControlTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = make_native_backend(NativeBackendOptions{.state_dir = state_.path()});
    const Availability availability = backend->availability();
    PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
    ASSERT_NE(std::getenv("PULSEBOX_BIN"), nullptr) << "PULSEBOX_BIN is set by meson";
    testing::write_file(workspace_ / "a.txt", "original\n");
  }

  std::vector<std::string> env() const {
    return {"PULSEBOX_STATE_DIR=" + state_.path().string(), "NO_COLOR=1", "PULSEBOX_SERVER=off"};
  }

  // Runs `script` with sh in a sandbox on the workspace; returns the id of
  // the transaction holding its changes ("" and a failure when there is none).
  std::string sandbox(const std::string& script) {
    const auto run =
        testing::run_cli({"run", "--json", "--allow-weaker", "limits", "--timeout", "60", "-w",
                          workspace_.path().string(), "--", "sh", "-c", script},
                         "", env());
    auto result = nlohmann::json::parse(run.out, nullptr, false);
    if (result.is_discarded() || !result.is_object()) {
      ADD_FAILURE() << "no result (exit " << run.exit_code << "): " << run.err;
      return "";
    }
    if (result.value("exit_code", -1) != 0) {
      ADD_FAILURE() << "the planting script failed: " << result.dump();
      return "";
    }
    if (!result.contains("transaction_id") || !result["transaction_id"].is_string()) {
      ADD_FAILURE() << "the run changed nothing: " << result.dump();
      return "";
    }
    return result["transaction_id"].get<std::string>();
  }

  CliRun commit(const std::string& tx, const std::string& policy_json = "") {
    std::vector<std::string> args = {"commit", "-w", workspace_.path().string()};
    if (!policy_json.empty()) {
      const fs::path policy = scratch_ / "policy.json";
      testing::write_file(policy, policy_json);
      args.insert(args.end(), {"--policy", policy.string()});
    }
    args.push_back(tx);
    return testing::run_cli(args, "", env());
  }

  void discard(const std::string& tx) {
    const auto run = testing::run_cli({"discard", "-w", workspace_.path().string(), tx}, "", env());
    EXPECT_EQ(run.exit_code, 0) << run.err;
  }

  // Commit of `tx` is refused for `path` and changes nothing; the
  // transaction is then discarded.
  void expect_refused(const std::string& tx, const std::string& path, const std::string& action,
                      const std::map<std::string, std::string>& before) {
    const auto refused = commit(tx);
    EXPECT_EQ(refused.exit_code, 125) << refused.out << refused.err;
    EXPECT_NE(refused.err.find("refusing to " + action + " " + path + ":"), std::string::npos)
        << refused.err;
    EXPECT_NE(refused.err.find("protected path"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("add a policy rule naming it"), std::string::npos) << refused.err;
    EXPECT_EQ(testing::listing(workspace_.path()), before) << "a refused commit changed files";
    discard(tx);
  }

  struct HostRun {
    int exit_code = -1;
    std::string output;
  };

  // The real git, run on the host the way the user would: HOME a directory
  // of its own, no system configuration.
  HostRun git(const fs::path& cwd, const std::vector<std::string>& args) {
    std::vector<std::string> argv_storage = {"git"};
    argv_storage.insert(argv_storage.end(), args.begin(), args.end());
    std::vector<std::string> env_storage = {"HOME=" + home_.path().string(),
                                            "PATH=/usr/bin:/bin",
                                            "GIT_CONFIG_NOSYSTEM=1",
                                            "GIT_AUTHOR_NAME=user",
                                            "GIT_AUTHOR_EMAIL=user@example.invalid",
                                            "GIT_COMMITTER_NAME=user",
                                            "GIT_COMMITTER_EMAIL=user@example.invalid",
                                            "LC_ALL=C"};
    const std::vector<char*> argv = testing::c_strings(argv_storage);
    const std::vector<char*> envp = testing::c_strings(env_storage);
    const fs::path output = scratch_ / "git.out";
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 1, output.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0600);
    posix_spawn_file_actions_adddup2(&actions, 1, 2);
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, "/usr/bin/git", &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    HostRun run;
    if (rc != 0) {
      ADD_FAILURE() << "cannot run /usr/bin/git";
      return run;
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    run.output = testing::read_file(output);
    return run;
  }

  // A repository with one commit at `dir`.
  void init_repository(const fs::path& dir) {
    fs::create_directories(dir);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"init", "-q"}, {"add", "-A"}, {"commit", "-q", "--allow-empty", "-m", "first"}}) {
      const auto run = git(dir, args);
      ASSERT_EQ(run.exit_code, 0) << run.output;
    }
  }

  // A git config setting core.fsmonitor to a command that leaves the marker.
  std::string fsmonitor_config() const {
    return "[core]\n\tfsmonitor = \"touch " + marker().string() + "; false\"\n";
  }
  fs::path marker() const { return scratch_ / "PWNED"; }

  // printf of `text` into `file` in a planting script (`>` or `>>`).
  static std::string printf_to(const std::string& text, const std::string& redirect,
                               const std::string& file) {
    std::string escaped;
    for (char c : text) {
      if (c == '\n') {
        escaped += "\\n";
      } else if (c == '\t') {
        escaped += "\\t";
      } else if (c == '\'') {
        escaped += "'\\''";
      } else {
        escaped += c;
      }
    }
    return "printf '" + escaped + "' " + redirect + " " + file;
  }

  TempDir workspace_;
  TempDir state_;
  TempDir home_;
  TempDir scratch_;
};

TEST_F(GitControlTest, ACommondirPointingAtPlantedConfigIsRefusedAndGitRunsNothing) {
  init_repository(workspace_.path());
  const auto before = testing::listing(workspace_.path());
  const std::string tx = sandbox("mkdir evil && cp -r .git/objects .git/refs .git/HEAD evil/ && " +
                                 printf_to(fsmonitor_config(), ">", "evil/config") +
                                 " && echo ../evil > .git/commondir");
  ASSERT_FALSE(tx.empty());
  const auto refused = commit(tx);
  EXPECT_EQ(refused.exit_code, 125) << refused.err;
  EXPECT_NE(refused.err.find("refusing to write .git/commondir: protected path (.git/commondir:"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(testing::listing(workspace_.path()), before);
  const auto status = git(workspace_.path(), {"status"});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_FALSE(fs::exists(marker())) << "git status ran the planted fsmonitor command";

  // The plant is real: with rules naming each protected path, the commit
  // applies it and git runs the command.
  const auto allowed = commit(tx, R"({"rules": [
      {"action": "write", "target": ".git/commondir", "decision": "allow"},
      {"action": "write", "target": "evil/**", "decision": "allow"}]})");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  git(workspace_.path(), {"status"});
  EXPECT_TRUE(fs::exists(marker())) << "the control did not reproduce the attack";
}

TEST_F(GitControlTest, AGitFileInAWorkspaceThatIsNotARepositoryIsRefused) {
  const auto before = testing::listing(workspace_.path());
  const std::string tx =
      sandbox("git init -q --bare evil2 && " +
              printf_to(fsmonitor_config() + "\tbare = false\n", ">>", "evil2/config") +
              " && echo 'gitdir: evil2' > .git");
  ASSERT_FALSE(tx.empty());
  const auto refused = commit(tx);
  EXPECT_EQ(refused.exit_code, 125) << refused.err;
  EXPECT_NE(refused.err.find("refusing to write .git: protected path (.git:"), std::string::npos)
      << refused.err;
  EXPECT_EQ(testing::listing(workspace_.path()), before);
  git(workspace_.path(), {"status"});
  EXPECT_FALSE(fs::exists(marker())) << "git status ran the planted fsmonitor command";

  const auto allowed = commit(tx, R"({"rules": [
      {"action": "write", "target": ".git", "decision": "allow"},
      {"action": "write", "target": "evil2/**", "decision": "allow"}]})");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.err;
  git(workspace_.path(), {"status"});
  EXPECT_TRUE(fs::exists(marker())) << "the control did not reproduce the attack";
}

TEST_F(GitControlTest, ANestedRepositorysConfigIsRefused) {
  init_repository(workspace_ / "sub");
  const auto before = testing::listing(workspace_.path());
  const std::string tx = sandbox(printf_to(fsmonitor_config(), ">>", "sub/.git/config"));
  ASSERT_FALSE(tx.empty());
  expect_refused(tx, "sub/.git/config", "write", before);
  git(workspace_ / "sub", {"status"});
  EXPECT_FALSE(fs::exists(marker())) << "git status ran the planted fsmonitor command";
}

TEST_F(GitControlTest, ASubmodulesGitDirectoryIsRefused) {
  init_repository(scratch_ / "library");
  init_repository(workspace_.path());
  const auto added = git(workspace_.path(), {"-c", "protocol.file.allow=always", "submodule", "add",
                                             "-q", (scratch_ / "library").string(), "lib"});
  ASSERT_EQ(added.exit_code, 0) << added.output;
  ASSERT_EQ(git(workspace_.path(), {"commit", "-q", "-m", "submodule"}).exit_code, 0);
  const auto before = testing::listing(workspace_.path());
  for (const auto& [script, path] : std::vector<std::pair<std::string, std::string>>{
           {printf_to(fsmonitor_config(), ">>", ".git/modules/lib/config"),
            ".git/modules/lib/config"},
           {"printf '#!/bin/sh\\ntouch " + marker().string() +
                "\\n' > .git/modules/lib/hooks/post-checkout && "
                "chmod +x .git/modules/lib/hooks/post-checkout",
            ".git/modules/lib/hooks/post-checkout"},
           {"echo 'gitdir: ../evil' > lib/.git", "lib/.git"},
       }) {
    SCOPED_TRACE(path);
    const std::string tx = sandbox(script);
    ASSERT_FALSE(tx.empty());
    expect_refused(tx, path, "write", before);
  }
  git(workspace_ / "lib", {"status"});
  git(workspace_.path(), {"status"});
  EXPECT_FALSE(fs::exists(marker())) << "git status ran a planted command";
}

TEST_F(GitControlTest, ABareRepositoryAnywhereInTheTreeIsProtected) {
  // One the run creates (x.git), one that already exists (kept.git), and a
  // directory that only lacks HEAD to become one (y/).
  ASSERT_EQ(git(workspace_.path(), {"init", "-q", "--bare", "kept.git"}).exit_code, 0);
  testing::write_file(workspace_ / "y/config", fsmonitor_config());
  fs::create_directories(workspace_ / "y/objects");
  fs::create_directories(workspace_ / "y/refs");
  const auto before = testing::listing(workspace_.path());
  for (const auto& [script, path] : std::vector<std::pair<std::string, std::string>>{
           {"git init -q --bare x.git && " + printf_to(fsmonitor_config(), ">>", "x.git/config"),
            "x.git/HEAD"},
           {printf_to(fsmonitor_config(), ">>", "kept.git/config"), "kept.git/config"},
           {"mkdir -p kept.git/hooks && echo 'touch x' > kept.git/hooks/pre-receive",
            "kept.git/hooks/pre-receive"},
           {"echo 'ref: refs/heads/main' > y/HEAD", "y/HEAD"},
           // The workspace root itself made a bare repository.
           {"git init -q --bare .", "HEAD"},
       }) {
    SCOPED_TRACE(script);
    const std::string tx = sandbox(script);
    ASSERT_FALSE(tx.empty());
    expect_refused(tx, path, "write", before);
  }
}

TEST_F(GitControlTest, ASymlinkThatRedirectsAProtectedPathIsRefused) {
  init_repository(workspace_.path());
  ASSERT_EQ(git(workspace_.path(), {"init", "-q", "--bare", "kept.git"}).exit_code, 0);
  fs::create_directories(workspace_ / "other");
  const auto before = testing::listing(workspace_.path());
  for (const auto& [script, path] : std::vector<std::pair<std::string, std::string>>{
           {"ln -s other .vscode", ".vscode"},
           {"ln -s other .github", ".github"},
           {"mkdir -p sub && ln -s ../other sub/.github", "sub/.github"},
           {"ln -s other .husky", ".husky"},
           {"ln -s other .config", ".config"},
           {"rm -rf .git/hooks && ln -s ../other .git/hooks", ".git/hooks"},
           {"rm -rf .git/objects/info && ln -s ../../other .git/objects/info", ".git/objects/info"},
           {"rm -rf .git/refs && ln -s ../other .git/refs", ".git/refs"},
           {"rm -rf kept.git/objects && ln -s ../other kept.git/objects", "kept.git/objects"},
       }) {
    SCOPED_TRACE(script);
    const std::string tx = sandbox(script);
    ASSERT_FALSE(tx.empty());
    expect_refused(tx, path, "write", before);
  }
}

TEST_F(GitControlTest, EveryOtherProtectedFileIsRefusedAtAnyDepth) {
  init_repository(workspace_.path());
  // Each row: a file the run writes (its directory exists on the host, so
  // the file is the only change).
  const std::vector<std::string> paths = {
      ".gitattributes",
      "pkg/.gitattributes",
      ".gitmodules",
      "vendor/lib/.gitmodules",
      ".lfsconfig",
      ".envrc",
      "services/api/.envrc",
      ".vscode/tasks.json",
      ".vscode/settings.json",
      ".vscode/launch.json",
      "app/.vscode/tasks.json",
      "project.code-workspace",
      ".devcontainer/devcontainer.json",
      ".devcontainer.json",
      ".idea/workspace.xml",
      ".husky/pre-commit",
      ".githooks/pre-commit",
      ".pre-commit-config.yaml",
      ".github/workflows/ci.yml",
      "sub/.github/workflows/ci.yml",
      ".gitlab-ci.yml",
      ".hg/hgrc",
      ".hg/sharedpath",
      "mise.toml",
      "mise.local.toml",
      ".mise.toml",
      ".mise/config.toml",
      ".config/mise/config.toml",
      "sub/.agent/transactions/x",
      // git's control files under .git, and names it does not know.
      ".git/config",
      ".git/config.worktree",
      ".git/commondir",
      ".git/info/attributes",
      ".git/info/exclude",
      ".git/hooks/post-checkout",
      ".git/worktrees/w/commondir",
      ".git/objects/info/alternates",
      ".git/rebase-merge/git-rebase-todo",
      ".git/sequencer/todo",
      ".git/branches/origin",
      ".git/some-future-file",
      // Names compared as a case-insensitive file system would.
      ".GIT/config",
      ".Git/hooks/pre-commit",
      ".VSCode/tasks.json",
      ".GitAttributes",
      // A .git file in a subdirectory (a submodule's or worktree's).
      "sub/.git",
  };
  for (const std::string& path : paths) {
    SCOPED_TRACE(path);
    fs::create_directories((workspace_ / path).parent_path());
    const auto before = testing::listing(workspace_.path());
    const std::string tx = sandbox("echo planted > '" + path + "'");
    ASSERT_FALSE(tx.empty());
    expect_refused(tx, path, "write", before);
  }
}

TEST_F(GitControlTest, DeletingAProtectedPathOrADirectoryHoldingOneIsRefused) {
  init_repository(workspace_.path());
  init_repository(workspace_ / "sub");
  testing::write_file(workspace_ / "pkg/.gitattributes", "*.bin binary\n");
  testing::write_file(workspace_ / "pkg/main.c", "int main;\n");
  const auto before = testing::listing(workspace_.path());
  for (const auto& [script, path, why] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"rm -rf sub", "sub", "it would remove sub/.git,"},
           {"rm -rf .git", ".git", "protected path (.git:"},
           {"rm pkg/.gitattributes", "pkg/.gitattributes", "protected path (.gitattributes:"},
           {"rm -rf pkg", "pkg", "it would remove pkg/.gitattributes,"},
           {"rm -rf sub && echo file > sub", "sub", "it would remove sub/.git,"},
       }) {
    SCOPED_TRACE(script);
    const std::string tx = sandbox(script);
    ASSERT_FALSE(tx.empty());
    const auto refused = commit(tx);
    EXPECT_EQ(refused.exit_code, 125) << refused.err;
    EXPECT_NE(refused.err.find(path + ": " + why), std::string::npos) << refused.err;
    EXPECT_EQ(testing::listing(workspace_.path()), before);
    discard(tx);
  }
}

TEST_F(GitControlTest, ASandboxedGitCommitInAnExistingRepositoryStaysCommittable) {
  init_repository(workspace_.path());
  const std::string tx = sandbox(
      "export GIT_AUTHOR_NAME=agent GIT_AUTHOR_EMAIL=agent@example.invalid "
      "GIT_COMMITTER_NAME=agent GIT_COMMITTER_EMAIL=agent@example.invalid && "
      "echo changed >> a.txt && echo new > b.txt && git add -A && "
      "git commit -q -m 'sandboxed work' && git checkout -q -b feature && echo more > c.txt && "
      "git add c.txt && git commit -q -m 'more work' && git tag -a -m release v1 && git gc -q");
  ASSERT_FALSE(tx.empty());
  const auto committed = commit(tx);
  ASSERT_EQ(committed.exit_code, 0) << committed.err;
  const auto log = git(workspace_.path(), {"log", "--format=%s", "feature"});
  EXPECT_EQ(log.output, "more work\nsandboxed work\nfirst\n");
  const auto head = git(workspace_.path(), {"rev-parse", "--abbrev-ref", "HEAD"});
  EXPECT_EQ(head.output, "feature\n");
  const auto fsck = git(workspace_.path(), {"fsck", "--no-progress"});
  EXPECT_EQ(fsck.exit_code, 0) << fsck.output;
  const auto status = git(workspace_.path(), {"status", "--porcelain", "--", ":!.agent"});
  EXPECT_EQ(status.output, "");
}

TEST_F(GitControlTest, ARuleNamingAPathUnprotectsExactlyThatPath) {
  fs::create_directories(workspace_ / ".vscode");
  const auto before = testing::listing(workspace_.path());
  const std::string tx = sandbox("echo '{}' > .vscode/tasks.json && echo 'echo hi' > .envrc");
  ASSERT_FALSE(tx.empty());
  // Broad rules never count: none of them spells out a protected name.
  for (const std::string broad : {"*", "**", "*/*", ".*", "*.json", "*rc"}) {
    SCOPED_TRACE(broad);
    const auto refused = commit(tx, R"({"rules": [{"action": "write", "target": ")" + broad +
                                        R"(", "decision": "allow"}]})");
    EXPECT_EQ(refused.exit_code, 125) << refused.err;
    EXPECT_NE(refused.err.find("protected path"), std::string::npos) << refused.err;
  }
  // Naming one leaves the other refused.
  const auto one = commit(tx, R"({"rules": [
      {"action": "write", "target": ".vscode/tasks.json", "decision": "allow"}]})");
  EXPECT_EQ(one.exit_code, 125) << one.err;
  EXPECT_NE(one.err.find("refusing to write .envrc:"), std::string::npos) << one.err;
  EXPECT_EQ(testing::listing(workspace_.path()), before);
  const auto both = commit(tx, R"({"rules": [
      {"action": "write", "target": ".vscode/tasks.json", "decision": "allow"},
      {"action": "write", "target": ".envrc", "decision": "allow"}]})");
  EXPECT_EQ(both.exit_code, 0) << both.err;
  EXPECT_EQ(testing::read_file(workspace_ / ".envrc"), "echo hi\n");
  EXPECT_EQ(testing::read_file(workspace_ / ".vscode/tasks.json"), "{}\n");
}

}  // namespace
}  // namespace pulsebox
