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

}  // namespace
}  // namespace pulsebox
