// A run's id becomes file names (the native backend's <state>/runs/<id> and
// its <id>.lock, the host backend's .agent/runs/<id>) and a cgroup's name,
// so an id is a single plain name: it starts with a letter or a digit (not
// "." or "..", which name the runs directory and its parent) and does not
// end in ".lock" (another run's lock file). Before, "--execution-id .."
// passed the check (only its characters were checked), the run failed late
// ("creating the run directory .../runs/..: File exists") and left lock
// files named "..lock" and "...lock" that no reconcile removes.
// Driven through the CLI, as root and as an ordinary user.
#include "helpers/cli_fixture.h"
#include "helpers/cli_runner.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;

class ExecutionIdTest : public testing::CliFixture {};

TEST_F(ExecutionIdTest, AnIdThatIsNotOnePlainNameIsRefusedByTheFlag) {
  for (const std::string id : {".", "..", ".hidden", "x.lock"}) {
    const auto run = testing::run_cli({"run", "--execution-id", id, "--allow-weaker", "limits",
                                       "-w", workspace_.path().string(), "--", "true"},
                                      "", cli_env());
    EXPECT_NE(run.exit_code, 0) << id;
    EXPECT_NE(run.err.find("--execution-id"), std::string::npos) << id << ": " << run.err;
  }
  // Nothing was made for them.
  std::error_code ec;
  for (const auto& dir : {state_.path() / "runs", workspace_.path() / ".agent" / "runs"}) {
    for (const auto& entry : fs::directory_iterator(dir, ec))
      ADD_FAILURE() << "left behind: " << entry.path();
  }
}

TEST_F(ExecutionIdTest, APlainIdStillNamesTheRun) {
  const auto run = testing::run_cli({"run", "--execution-id", "build-42.v1", "--allow-weaker",
                                     "limits", "-w", workspace_.path().string(), "--", "true"},
                                    "", cli_env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(testing::read_file(workspace_ / ".agent" / "logs" / "audit.jsonl").find("build-42.v1"),
            std::string::npos);
}

}  // namespace
}  // namespace pulsebox
