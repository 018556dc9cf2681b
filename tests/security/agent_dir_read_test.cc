// read_file never reads pulsebox's own directory, .agent/ (its transactions'
// staged bytes, its audit log), by any spelling or through a symlink: the
// sandboxed command never sees it, a write to it is refused, and a staged
// file that holds a registered secret is only ever shown redacted (diff).
// Before, read_file ".agent/transactions/<id>/blobs/0/0" returned the raw bytes
// a run wrote, a secret's value included, to a caller that had not
// registered it (a protocol request, a remote token holder on an upload).
// Driven through `pulsebox run` and `pulsebox request`, as root and as an
// ordinary user.
#include <nlohmann/json.hpp>

#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class AgentDirReadTest : public testing::CliFixture {
 protected:
  json read(const std::string& path) const {
    const json request = {{"v", 1},
                          {"request", "read_file"},
                          {"workspace", workspace_.path().string()},
                          {"path", path}};
    const auto run = testing::run_cli({"request"}, request.dump(), cli_env());
    return json::parse(run.out.empty() ? "{}" : run.out);
  }

  // The staged blobs of every transaction, as paths relative to the workspace.
  std::vector<std::string> blobs() const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry :
         fs::recursive_directory_iterator(workspace_ / ".agent" / "transactions", ec)) {
      // blobs/<n> or blobs/<shard>/<n>
      const fs::path parent = entry.path().parent_path();
      if (entry.is_regular_file() &&
          (parent.filename() == "blobs" || parent.parent_path().filename() == "blobs"))
        out.push_back(entry.path().lexically_relative(workspace_.path()).string());
    }
    return out;
  }
};

TEST_F(AgentDirReadTest, AStagedSecretIsNotReadFromTheTransactionStore) {
  const auto run =
      testing::run_cli({"run", "--allow-weaker", "limits", "--secret", "TOKEN", "-w",
                        workspace_.path().string(), "--", "sh", "-c", "echo \"$TOKEN\" > leak.txt"},
                       "", [&] {
                         auto env = cli_env();
                         env.push_back("TOKEN=s3cr3t-value-4242");
                         return env;
                       }());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto staged = blobs();
  ASSERT_FALSE(staged.empty()) << "the run staged no file";
  for (const std::string& blob : staged) {
    for (const std::string& spelling : {blob, "./" + blob, ".AGENT" + blob.substr(6)}) {
      const json reply = read(spelling);
      EXPECT_EQ(reply.dump().find("s3cr3t-value-4242"), std::string::npos) << reply;
      EXPECT_TRUE(reply.contains("error")) << spelling << ": " << reply;
    }
  }
}

TEST_F(AgentDirReadTest, TheAuditLogIsNotReadDirectlyNorThroughASymlink) {
  testing::write_file(workspace_ / "a.txt", "a\n");
  ASSERT_FALSE(read("a.txt").contains("error"));  // makes .agent/ and its audit log
  ASSERT_TRUE(fs::exists(workspace_ / ".agent" / "logs" / "audit.jsonl"));
  fs::create_symlink(".agent/logs/audit.jsonl", workspace_ / "log");
  for (const std::string path : {".agent/logs/audit.jsonl", "log"}) {
    const json reply = read(path);
    EXPECT_FALSE(reply.contains("data")) << path << ": " << reply;
    ASSERT_TRUE(reply.contains("error")) << path << ": " << reply;
    EXPECT_NE(reply["error"]["message"].get<std::string>().find(".agent"), std::string::npos)
        << reply;
  }
}

// A workspace inside another has its own .agent/ (its pending changes, a
// registered secret among them, and its audit log), which the enclosing
// workspace's sandbox saw as ordinary files. Each workspace lists the ones
// it encloses (.agent/nested) as they are opened, and a run hides theirs.
TEST_F(AgentDirReadTest, ANestedWorkspacesOwnDirectoryIsHiddenFromTheEnclosingOnes) {
  auto secret_env = cli_env();
  secret_env.push_back("TOKEN=n3sted-s3cr3t-77");
  auto run_in = [&](const fs::path& dir, const std::string& command,
                    const std::vector<std::string>& env) {
    return testing::run_cli({"run", "--allow-weaker", "limits", "--secret", "TOKEN", "-w",
                             dir.string(), "--", "sh", "-c", command},
                            "", env);
  };
  const std::string look =
      "ls -A sub/.agent; cat sub/.agent/logs/audit.jsonl; "
      "find sub/.agent -type f -exec cat {} +; true";
  auto check_hidden = [&](const fs::path& outer, const std::string& when) {
    const auto seen = run_in(outer, look, secret_env);
    ASSERT_EQ(seen.exit_code, 0) << when << ": " << seen.err;
    EXPECT_EQ(seen.out.find("n3sted-s3cr3t-77"), std::string::npos) << when << ": " << seen.out;
    EXPECT_EQ(seen.out.find("transactions"), std::string::npos) << when << ": " << seen.out;
    EXPECT_EQ(seen.out.find("\"seq\""), std::string::npos) << when << ": " << seen.out;
  };

  // The enclosing workspace first, then the nested one.
  ASSERT_EQ(run_in(workspace_.path(), "true", secret_env).exit_code, 0);
  fs::create_directories(workspace_ / "sub");
  const auto staged = run_in(workspace_ / "sub", "echo \"$TOKEN\" > pending.txt", secret_env);
  ASSERT_EQ(staged.exit_code, 0) << staged.err;
  check_hidden(workspace_.path(), "nested made second");
  for (const auto& entry : fs::recursive_directory_iterator(workspace_ / "sub" / ".agent")) {
    if (!entry.is_regular_file()) continue;
    const std::string relative = entry.path().lexically_relative(workspace_.path()).string();
    const json reply = read(relative);
    EXPECT_TRUE(reply.contains("error")) << relative << ": " << reply;
    EXPECT_EQ(reply.dump().find("n3sted-s3cr3t-77"), std::string::npos) << reply;
  }

  // The nested one first: listed the next time it is opened.
  const fs::path outer = scratch_ / "outer";
  fs::create_directories(outer / "sub");
  ASSERT_EQ(run_in(outer / "sub", "echo \"$TOKEN\" > pending.txt", secret_env).exit_code, 0);
  ASSERT_EQ(run_in(outer, "true", secret_env).exit_code, 0);
  ASSERT_EQ(run_in(outer / "sub", "true", secret_env).exit_code, 0);
  check_hidden(outer, "nested made first");

  // The nested one first and never opened again: the enclosing one's first
  // run finds it. A .agent/ of another tool's stays the project's.
  const fs::path first = scratch_ / "first";
  fs::create_directories(first / "deep" / "sub");
  fs::create_directories(first / "tool" / ".agent");
  testing::write_file(first / "tool" / ".agent" / "config", "tool-setting-5150\n");
  ASSERT_EQ(run_in(first / "deep" / "sub", "echo \"$TOKEN\" > pending.txt", secret_env).exit_code,
            0);
  const auto seen = run_in(first, look + "; cat tool/.agent/config", secret_env);
  ASSERT_EQ(seen.exit_code, 0) << seen.err;
  EXPECT_EQ(seen.out.find("n3sted-s3cr3t-77"), std::string::npos) << seen.out;
  EXPECT_NE(seen.out.find("tool-setting-5150"), std::string::npos) << seen.out;
  const auto deep = run_in(first, "find deep/sub/.agent -type f -exec cat {} +; true", secret_env);
  ASSERT_EQ(deep.exit_code, 0) << deep.err;
  EXPECT_EQ(deep.out.find("n3sted-s3cr3t-77"), std::string::npos) << deep.out;
  EXPECT_EQ(deep.out.find("\"seq\""), std::string::npos) << deep.out;

  // A nested workspace whose .gitignore its user changed is pulsebox's all
  // the same (its audit log says so).
  const fs::path edited = scratch_ / "edited";
  fs::create_directories(edited / "inner");
  ASSERT_EQ(run_in(edited / "inner", "echo \"$TOKEN\" > pending.txt", secret_env).exit_code, 0);
  testing::write_file(edited / "inner" / ".agent" / ".gitignore", "*.log\n");
  const auto inner = run_in(edited, "find inner/.agent -type f -exec cat {} +; true", secret_env);
  ASSERT_EQ(inner.exit_code, 0) << inner.err;
  EXPECT_EQ(inner.out.find("\"seq\""), std::string::npos) << inner.out;
}

// The list of nested workspaces read as empty when it could not be read
// (a repository shipping .agent/nested as a symlink, or one past 256 KiB),
// and every nested .agent/ was shown: a run now refuses to start.
TEST_F(AgentDirReadTest, AListOfNestedWorkspacesThatCannotBeReadStopsTheRun) {
  auto run_in = [&](const fs::path& dir) {
    return testing::run_cli({"run", "--allow-weaker", "limits", "-w", dir.string(), "--", "true"},
                            "", cli_env());
  };
  ASSERT_EQ(run_in(workspace_.path()).exit_code, 0);
  const fs::path list = workspace_ / ".agent" / "nested";
  fs::remove(list);
  fs::create_symlink("/dev/null", list);
  const auto linked = run_in(workspace_.path());
  EXPECT_NE(linked.exit_code, 0) << linked.out;
  EXPECT_NE(linked.err.find(list.string()), std::string::npos) << linked.err;

  fs::remove(list);
  testing::write_file(list, std::string(300 * 1024, 'a') + "\n");
  const auto big = run_in(workspace_.path());
  EXPECT_NE(big.exit_code, 0) << big.out;
  EXPECT_NE(big.err.find("nested"), std::string::npos) << big.err;

  fs::remove(list);
  EXPECT_EQ(run_in(workspace_.path()).exit_code, 0);
}

// An audit key named inside the workspace (PULSEBOX_AUDIT_KEY=key, or the
// default one of a home directory used as the workspace) was made there and
// read by the command, its anchors beside it: with the key a command can MAC
// audit records and seal commit points of its own.
TEST_F(AgentDirReadTest, AnAuditKeyKeptInsideTheWorkspaceIsHiddenFromTheCommand) {
  auto env = cli_env();
  env.push_back("PULSEBOX_AUDIT_KEY=" + (workspace_ / "keys" / "audit.key").string());
  const auto run = testing::run_cli(
      {"run", "--allow-weaker", "limits", "-w", workspace_.path().string(), "--", "sh", "-c",
       "od -An -tx1 -v keys/audit.key | tr -d ' \\n'; echo; ls -A keys/audit-anchors; true"},
      "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const std::string key = testing::read_file(workspace_ / "keys" / "audit.key");
  ASSERT_FALSE(key.empty()) << "no key was made at " << (workspace_ / "keys" / "audit.key");
  std::string hex;
  for (const unsigned char byte : key) {
    static const char digits[] = "0123456789abcdef";
    hex += digits[byte >> 4];
    hex += digits[byte & 15];
  }
  EXPECT_EQ(run.out.find(hex.substr(0, 16)), std::string::npos) << run.out;
  for (const auto& anchor : fs::directory_iterator(workspace_ / "keys" / "audit-anchors")) {
    const std::string name = anchor.path().filename().string();
    EXPECT_EQ(run.out.find(name), std::string::npos) << name << " listed: " << run.out;
  }
  const json request = {{"v", 1},
                        {"request", "read_file"},
                        {"workspace", workspace_.path().string()},
                        {"path", "keys/audit.key"}};
  const auto reply = testing::run_cli({"request"}, request.dump(), env);
  EXPECT_NE(reply.out.find("\"error\""), std::string::npos) << reply.out;
}

// The default audit key, when it would lie inside the workspace and could
// not be made there (its directory writable by others: the run goes on with
// a warning), was not there to mask: the command wrote one at its path and
// the run's commit installed it, and the next run keyed the audit log with
// the command's bytes. A run's change at, beneath or on the way to an own
// path is refused now; the rest of its changes is committed.
TEST_F(AgentDirReadTest, ARunNeverWritesAnAuditKeyThatDoesNotExistYet) {
  fs::create_directories(workspace_ / "state" / "pulsebox");
  fs::permissions(workspace_ / "state" / "pulsebox", fs::perms::all);  // 0777: no key made
  auto env = cli_env();
  env.push_back("PULSEBOX_AUDIT_KEY=");
  env.push_back("XDG_STATE_HOME=" + (workspace_ / "state").string());
  const auto planted = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "commit", "--json", "-w",
       workspace_.path().string(), "--", "sh", "-c",
       "cd state/pulsebox && mkdir audit-anchors && echo a > audit-anchors/a && "
       "head -c 32 /dev/zero > audit.key && chmod 600 audit.key && echo kept > ../../other.txt"},
      "", env);
  ASSERT_NE(planted.err.find("not keyed"), std::string::npos) << planted.err;
  EXPECT_EQ(planted.exit_code, 123) << planted.out << planted.err;
  EXPECT_FALSE(fs::exists(workspace_ / "state" / "pulsebox" / "audit.key"));
  EXPECT_FALSE(fs::exists(workspace_ / "state" / "pulsebox" / "audit-anchors"));
  EXPECT_EQ(testing::read_file(workspace_ / "other.txt"), "kept\n");
  const json result = json::parse(planted.out);
  std::string refused;
  for (const json& item : result["changes_status"]["refused"])
    refused += item["path"].get<std::string>() + " ";
  EXPECT_NE(refused.find("state/pulsebox/audit.key "), std::string::npos) << result.dump();
  EXPECT_NE(refused.find("state/pulsebox/audit-anchors "), std::string::npos) << result.dump();
  // Nor a symlink, file or deletion on the way to one.
  const auto swapped = testing::run_cli(
      {"run", "--allow-weaker", "limits", "--changes", "commit", "--json", "-w",
       workspace_.path().string(), "--", "sh", "-c", "rm -rf state && ln -s /tmp state"},
      "", env);
  EXPECT_EQ(swapped.exit_code, 123) << swapped.out << swapped.err;
  EXPECT_TRUE(fs::is_directory(fs::symlink_status(workspace_ / "state")));
  EXPECT_TRUE(fs::is_directory(workspace_ / "state" / "pulsebox"));
}

// Staging through the protocol named pulsebox's own paths: a delete of the
// key (with a client policy allowing deletes) made `diff` show its 32 bytes,
// and a staged write replaced it at commit; the same reached a nested
// workspace's pending blobs and audit log, and the workspace's own .agent/.
TEST_F(AgentDirReadTest, PulseboxsOwnPathsAreNeverStagedThroughTheProtocol) {
  auto env = cli_env();
  env.push_back("PULSEBOX_AUDIT_KEY=" + (workspace_ / "keys" / "audit.key").string());
  fs::create_directories(workspace_ / "sub");
  ASSERT_EQ(
      testing::run_cli({"run", "--allow-weaker", "limits", "-w", (workspace_ / "sub").string(),
                        "--", "sh", "-c", "echo pending > p.txt"},
                       "", env)
          .exit_code,
      0);
  std::error_code ec;
  fs::create_directory_symlink("keys", workspace_ / "link", ec);
  const json allow_all = {{"rules",
                           {{{"action", "delete"}, {"target", "*"}, {"decision", "allow"}},
                            {{"action", "write"}, {"target", "*"}, {"decision", "allow"}}}}};
  auto request = [&](json body) {
    body["v"] = 1;
    body["workspace"] = workspace_.path().string();
    const auto reply = testing::run_cli({"request"}, body.dump(), env);
    return json::parse(reply.out.empty() ? "{}" : reply.out);
  };
  const json created = request({{"request", "create_transaction"}});
  ASSERT_TRUE(created.contains("transaction")) << created;
  const std::string tx = created["transaction"];
  for (const std::string path :
       {"keys/audit.key", "keys/audit-anchors", "keys", "link/audit.key", "link/audit-anchors/x",
        ".agent/logs/audit.jsonl", "sub/.agent/logs/audit.jsonl", "sub", "."}) {
    for (const std::string op : {"stage_delete", "stage_write"}) {
      json body = {{"request", op}, {"transaction", tx}, {"path", path}, {"policy", allow_all}};
      if (op == "stage_write") body["data_base64"] = "AAAA";
      const json reply = request(body);
      EXPECT_TRUE(reply.contains("error")) << op << " " << path << ": " << reply;
    }
  }
  const json diff = request({{"request", "diff"}, {"transaction", tx}});
  EXPECT_EQ(diff.dump().find("audit.key"), std::string::npos) << diff;
  EXPECT_EQ(diff.dump().find(".agent"), std::string::npos) << diff;
}

}  // namespace
}  // namespace pulsebox
