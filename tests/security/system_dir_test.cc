// A system directory is refused as a workspace or a state directory unless
// forced, before anything is created in it. The attack: `pulsebox run -w
// /etc` (or `-w /`, or a link to /etc) and PULSEBOX_STATE_DIR=/etc/... were
// accepted, and .agent/ or the state directory appeared there (as root;
// the commit of a run's changes would have followed). The refusals need no
// sandbox and run the same as root and as an ordinary user; whatever a
// regression creates in a system directory is removed again. The forced
// runs use a stand-in home directory under /tmp ($HOME itself is on the
// list), so nothing is ever written into a real system directory.
#include "helpers/bounded_cli.h"
#include "helpers/test_support.h"
#include "pulsebox/backend.h"

namespace pulsebox {
namespace {

using testing::BoundedRun;
using testing::TempDir;
namespace fs = std::filesystem;

// Removes `path` at the end of the test if the test created it.
class RemovedIfCreated {
 public:
  explicit RemovedIfCreated(fs::path path) : path_(std::move(path)), existed_(exists()) {}
  ~RemovedIfCreated() {
    std::error_code ec;
    if (!existed_ && exists()) fs::remove_all(path_, ec);
  }
  bool exists() const {
    std::error_code ec;
    return fs::symlink_status(path_, ec).type() != fs::file_type::not_found;
  }
  bool existed() const { return existed_; }

 private:
  fs::path path_;
  bool existed_;
};

class SystemDirTest : public ::testing::Test {
 protected:
  BoundedRun run(const std::vector<std::string>& args, std::vector<std::string> env = {}) {
    env.insert(env.begin(),
               {"PULSEBOX_STATE_DIR=" + state_.path().string(), "PULSEBOX_SERVER=off"});
    return testing::run_cli_bounded(args, env);
  }

  static void expect_refused(const BoundedRun& run, const std::vector<std::string>& parts) {
    EXPECT_FALSE(run.timed_out) << "still running at the deadline";
    EXPECT_EQ(run.exit_code, 125) << run.err;
    for (const auto& part : parts)
      EXPECT_NE(run.err.find(part), std::string::npos) << part << " not in: " << run.err;
  }

  static std::vector<std::string> run_true(const std::string& workspace) {
    return {"run", "-w", workspace, "--allow-weaker", "limits", "--", "true"};
  }

  TempDir state_;
  TempDir scratch_;
};

TEST_F(SystemDirTest, RunInEtcIsRefusedAndCreatesNothing) {
  const RemovedIfCreated agent("/etc/.agent");
  expect_refused(run(run_true("/etc")),
                 {"the workspace /etc is a system directory (the system's configuration",
                  "--allow-system-dir"});
  EXPECT_EQ(agent.exists(), agent.existed());
}

TEST_F(SystemDirTest, RunInTheRootDirectoryIsRefused) {
  const RemovedIfCreated agent("/.agent");
  expect_refused(run(run_true("/")), {"the workspace / is a system directory (the root of the "
                                      "file system",
                                      "--allow-system-dir"});
  EXPECT_EQ(agent.exists(), agent.existed());
}

TEST_F(SystemDirTest, ALinkToEtcIsRefusedNamingBoth) {
  const RemovedIfCreated agent("/etc/.agent");
  const fs::path link = scratch_ / "project";
  fs::create_symlink("/etc", link);
  expect_refused(run(run_true(link.string())),
                 {"the workspace " + link.string() + " (resolved: /etc) is a system directory"});
  EXPECT_EQ(agent.exists(), agent.existed());
}

TEST_F(SystemDirTest, TheChangesCommandsRefuseSystemDirectories) {
  const RemovedIfCreated etc_agent("/etc/.agent");
  const RemovedIfCreated usr_agent("/usr/.agent");
  expect_refused(run({"changes", "-w", "/usr"}), {"the workspace /usr is a system directory"});
  for (const char* command : {"diff", "commit", "discard"}) {
    SCOPED_TRACE(command);
    expect_refused(run({command, "-w", "/etc", "tx-1"}),
                   {"the workspace /etc is a system directory"});
  }
  expect_refused(run({"reconcile", "-w", "/etc"}), {"the workspace /etc is a system directory"});
  EXPECT_EQ(etc_agent.exists(), etc_agent.existed());
  EXPECT_EQ(usr_agent.exists(), usr_agent.existed());
}

TEST_F(SystemDirTest, AStateDirectoryInEtcIsRefusedAndNotCreated) {
  const fs::path state = "/etc/pulsebox-test-" + std::to_string(::getpid());
  const RemovedIfCreated created(state);
  ASSERT_FALSE(created.existed());
  TempDir workspace;
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state.string()};
  const std::string expected = "the state directory " + state.string() + " is a system directory";
  expect_refused(run(run_true(workspace.path().string()), env),
                 {expected, "PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1"});
  expect_refused(run({"reconcile", "-w", workspace.path().string()}, env), {expected});
  // The server makes its socket's directory first: refused as well, at once.
  const BoundedRun served = run({"serve", "--local", "--no-prestart"}, env);
  EXPECT_FALSE(served.timed_out) << "the server started in " << state;
  EXPECT_NE(served.exit_code, 0);
  EXPECT_NE(served.err.find(expected), std::string::npos) << served.err;
  EXPECT_FALSE(created.exists());
}

// $HOME itself is a system directory by the rule; a stand-in home under
// /tmp shows the refusal and the force flags without touching a real one.
TEST_F(SystemDirTest, TheForceFlagsAcceptWhatIsOtherwiseRefused) {
  TempDir home;
  const std::vector<std::string> env = {"HOME=" + home.path().string()};
  const std::string ws = home.path().string();
  expect_refused(run({"changes", "-w", ws}, env),
                 {"the workspace " + ws + " is a system directory (a home directory"});
  const BoundedRun forced = run({"changes", "--allow-system-dir", "-w", ws}, env);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_NE(forced.out.find("no pending transactions in " + ws), std::string::npos) << forced.out;

  TempDir workspace;
  const std::vector<std::string> home_state = {"HOME=" + ws, "PULSEBOX_STATE_DIR=" + ws};
  expect_refused(run({"reconcile", "-w", workspace.path().string()}, home_state),
                 {"the state directory " + ws + " is a system directory"});
  std::vector<std::string> forced_state = home_state;
  forced_state.push_back("PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1");
  const BoundedRun reconciled = run({"reconcile", "-w", workspace.path().string()}, forced_state);
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
}

TEST_F(SystemDirTest, RunWithTheForceFlagRunsInAHomeDirectory) {
  const Availability availability =
      make_native_backend(NativeBackendOptions{.state_dir = state_.path()})->availability();
  PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
  TempDir home;
  const std::string ws = home.path().string();
  const std::vector<std::string> env = {"HOME=" + ws};
  expect_refused(run(run_true(ws), env), {"the workspace " + ws + " is a system directory"});
  std::vector<std::string> args = run_true(ws);
  args.insert(args.begin() + 1, "--allow-system-dir");
  const BoundedRun forced = run(args, env);
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
}

}  // namespace
}  // namespace pulsebox
