// The OCI runtime's commands that work from state alone (design §1.4-1.5),
// driven through the CLI as engines drive them. The "container" is a
// `sleep` child of the test, named by a state record the test writes.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "helpers/cli_runner.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"
#include "oci/process_ref.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::run_oci;

class OciStateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(child_.pid(), 0);
    // /proc shows the child once posix_spawn returned; its start time is fixed.
    const auto start = oci::process_start_time(child_.pid());
    ASSERT_TRUE(start.has_value());
    start_time_ = *start;
  }

  nlohmann::json state_of(const std::string& id) {
    const auto run = run_oci(root_, {"state", id});
    EXPECT_EQ(run.exit_code, 0) << run.err;
    // go-runc reads stdout and stderr together: nothing may be on stderr.
    EXPECT_EQ(run.err, "");
    auto parsed = nlohmann::json::parse(run.out, nullptr, false);
    EXPECT_TRUE(parsed.is_object()) << run.out;
    return parsed;
  }

  testing::TempDir temp_;
  fs::path root_ = temp_ / "root";
  testing::SleepChild child_;
  std::uint64_t start_time_ = 0;
};

TEST_F(OciStateCliTest, StateOfRunningAndCreated) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  auto state = state_of("c1");
  EXPECT_EQ(state["status"], "running");
  EXPECT_EQ(state["pid"], child_.pid());
  EXPECT_EQ(state["id"], "c1");
  EXPECT_EQ(state["ociVersion"], "1.2.1");
  EXPECT_EQ(state["bundle"], "/bundles/c1");
  EXPECT_EQ(state["annotations"]["org.pulsebox.enforced"], "test");
  testing::write_oci_record(root_, "c2", child_.pid(), start_time_, /*with_fifo=*/true);
  EXPECT_EQ(state_of("c2")["status"], "created");
}

// Only a fifo at exec.fifo is a process waiting for start: a file, a
// symlink or a directory put there reads as running, and start refuses it
// (it wrote its byte into a regular file and ran poststart again).
TEST_F(OciStateCliTest, OnlyAFifoAtExecFifoReadsAsCreated) {
  for (const char* kind : {"file", "symlink", "directory"}) {
    SCOPED_TRACE(kind);
    const std::string id = std::string("c-") + kind;
    testing::write_oci_record(root_, id, child_.pid(), start_time_);
    const fs::path fifo = root_ / id / "exec.fifo";
    if (std::string(kind) == "file") testing::write_file(fifo, "");
    if (std::string(kind) == "symlink") fs::create_symlink("state.json", fifo);
    if (std::string(kind) == "directory") fs::create_directory(fifo);
    EXPECT_EQ(state_of(id)["status"], "running");
    const auto started = run_oci(root_, {"start", id});
    EXPECT_EQ(started.exit_code, 1) << started.err;
    EXPECT_NE(started.err.find("is not created"), std::string::npos) << started.err;
    fs::remove(fifo);
  }
}

// Two starts of one container: the second is refused while the first
// holds the fifo (the state lock is shared, so that `state` never reads a
// start as a create); both used to write their byte and run poststart.
TEST_F(OciStateCliTest, AStartWhileAnotherIsUnderWayIsRefused) {
  core::UniqueFd reader;
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_, /*with_fifo=*/true, {},
                            &reader);
  // The first start, as it is between its lock and its byte.
  const int first = ::open((root_ / "c1" / "exec.fifo").c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  ASSERT_GE(first, 0);
  ASSERT_EQ(::flock(first, LOCK_EX | LOCK_NB), 0);
  const auto second = run_oci(root_, {"start", "c1"});
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find("is being started, or was, by another command"), std::string::npos)
      << second.err;
  EXPECT_TRUE(fs::exists(root_ / "c1" / "exec.fifo")) << "the first start's fifo is left to it";
  ::close(first);
  // Once the first is gone without its byte, a start works. The container's
  // process (a thread here) takes the byte and closes its end, as its
  // execve would: start waits for that, up to its handshake time. Until
  // start opens the fifo, a read finds end-of-file (the first writer came
  // and went) and is tried again.
  constexpr auto kPatience = std::chrono::seconds(20);  // under start's 30 s handshake
  std::thread process([&reader, kPatience] {
    const auto deadline = std::chrono::steady_clock::now() + kPatience;
    char byte = 0;
    while (::read(reader.get(), &byte, 1) != 1 && std::chrono::steady_clock::now() < deadline)
      ::usleep(1000);
    reader.reset();
  });
  const auto started = std::chrono::steady_clock::now();
  const auto again = run_oci(root_, {"start", "c1"});
  process.join();
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_LT(std::chrono::steady_clock::now() - started, kPatience)
      << "start saw the process take its byte (not its handshake time running out)";
  EXPECT_FALSE(fs::exists(root_ / "c1" / "exec.fifo"));
}

TEST_F(OciStateCliTest, KillTermStopsIt) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  const auto run = run_oci(root_, {"kill", "c1", "TERM"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(child_.wait_for_signal(), SIGTERM);
  const auto state = state_of("c1");
  EXPECT_EQ(state["status"], "stopped");
  EXPECT_EQ(state["pid"], 0);
  // A stopped container takes no signal.
  const auto again = run_oci(root_, {"kill", "c1", "9"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("container c1 is not running"), std::string::npos) << again.err;
}

TEST_F(OciStateCliTest, KillDefaultsToTermAndTakesNumbers) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  EXPECT_EQ(run_oci(root_, {"kill", "c1"}).exit_code, 0);
  EXPECT_EQ(child_.wait_for_signal(), SIGTERM);
  testing::SleepChild other;
  const auto start = oci::process_start_time(other.pid());
  ASSERT_TRUE(start.has_value());
  testing::write_oci_record(root_, "c2", other.pid(), *start);
  EXPECT_EQ(run_oci(root_, {"kill", "c2", "9"}).exit_code, 0);
  EXPECT_EQ(other.wait_for_signal(), SIGKILL);
  const auto bad = run_oci(root_, {"kill", "c1", "NOPE"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("invalid signal"), std::string::npos);
}

TEST_F(OciStateCliTest, PsNeedsACgroup) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  const auto run = run_oci(root_, {"ps", "--format", "json", "c1"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("has no cgroup"), std::string::npos) << run.err;
  EXPECT_EQ(run.out, "");
}

TEST_F(OciStateCliTest, DeleteRunningNeedsForce) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  const auto refused = run_oci(root_, {"delete", "c1"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(
      refused.err.find("container c1 is running: stop it first (kill c1 KILL) or use --force"),
      std::string::npos)
      << refused.err;
  EXPECT_TRUE(fs::exists(root_ / "c1"));
  EXPECT_TRUE(child_.alive());
  const auto forced = run_oci(root_, {"delete", "--force", "c1"});
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_EQ(child_.wait_for_signal(), SIGKILL);
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciStateCliTest, DeleteStoppedRemovesTheDirectory) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  ASSERT_EQ(run_oci(root_, {"kill", "c1", "KILL"}).exit_code, 0);
  EXPECT_EQ(child_.wait_for_signal(), SIGKILL);
  const auto run = run_oci(root_, {"delete", "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_FALSE(fs::exists(root_ / "c1"));
  // containerd calls delete and then delete --force: the second is not-found.
  const auto second = run_oci(root_, {"delete", "--force", "c1"});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("container c1 does not exist"), std::string::npos) << second.err;
}

TEST_F(OciStateCliTest, CreatedIsDestroyedWithoutForce) {
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_, /*with_fifo=*/true);
  const auto run = run_oci(root_, {"delete", "c1"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(child_.wait_for_signal(), SIGKILL);
  EXPECT_FALSE(fs::exists(root_ / "c1"));
}

TEST_F(OciStateCliTest, NotFoundWording) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"state", "nope"}, {"kill", "nope", "9"}, {"delete", "nope"}, {"state", "../x"}}) {
    const auto run = run_oci(root_, args);
    EXPECT_EQ(run.exit_code, 1) << args[0];
    EXPECT_NE(run.err.find("does not exist"), std::string::npos) << args[0] << ": " << run.err;
    EXPECT_EQ(run.out, "");
  }
}

TEST_F(OciStateCliTest, ListAndReconcile) {
  testing::write_oci_record(root_, "live", child_.pid(), start_time_);
  testing::SleepChild gone;
  const auto gone_start = oci::process_start_time(gone.pid());
  ASSERT_TRUE(gone_start.has_value());
  testing::write_oci_record(root_, "dead", gone.pid(), *gone_start);
  ::kill(gone.pid(), SIGKILL);
  ASSERT_EQ(gone.wait_for_signal(), SIGKILL);
  // A create killed right after its mkdir: no record at all.
  fs::create_directory(root_ / "half");
  // What a power loss can leave (records are renamed into place unsynced):
  // an empty state.json.
  fs::create_directory(root_ / "torn");
  std::ofstream(root_ / "torn" / "state.json").close();

  const auto json = run_oci(root_, {"list", "--format", "json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto listed = nlohmann::json::parse(json.out);
  ASSERT_EQ(listed.size(), 2u) << json.out;
  EXPECT_EQ(listed[0]["id"], "dead");
  EXPECT_EQ(listed[0]["status"], "stopped");
  EXPECT_EQ(listed[1]["id"], "live");
  EXPECT_EQ(listed[1]["status"], "running");
  const auto table = run_oci(root_, {"list"});
  EXPECT_EQ(table.out.rfind("ID\tPID\tSTATUS", 0), 0u) << table.out;

  const auto reconcile = run_oci(root_, {"reconcile"});
  EXPECT_EQ(reconcile.exit_code, 0) << reconcile.err;
  EXPECT_FALSE(fs::exists(root_ / "dead"));
  EXPECT_FALSE(fs::exists(root_ / "half"));
  EXPECT_FALSE(fs::exists(root_ / "torn"));
  EXPECT_TRUE(fs::exists(root_ / "live"));
  EXPECT_TRUE(child_.alive());
}

TEST_F(OciStateCliTest, RefusedAndNotYetCommands) {
  for (const char* name : {"pause", "resume", "update", "checkpoint", "restore", "events"}) {
    const auto run = run_oci(root_, {name, "c1"});
    EXPECT_EQ(run.exit_code, 1) << name;
    EXPECT_NE(run.err.find("not supported by pulsebox oci"), std::string::npos) << run.err;
  }
  const auto exec = run_oci(root_, {"exec", "c1", "true"});
  EXPECT_EQ(exec.exit_code, 1);
  EXPECT_NE(exec.err.find("container c1 does not exist"), std::string::npos) << exec.err;
  // create and run name the config they could not read; start needs a container.
  for (const char* name : {"create", "run"}) {
    const auto run = run_oci(root_, {name, "--bundle", "/x", "c1"});
    EXPECT_EQ(run.exit_code, 1) << name;
    EXPECT_NE(run.err.find("/x/config.json"), std::string::npos) << run.err;
  }
  const auto start = run_oci(root_, {"start", "c1"});
  EXPECT_EQ(start.exit_code, 1);
  EXPECT_NE(start.err.find("container c1 does not exist"), std::string::npos) << start.err;
}

TEST_F(OciStateCliTest, FeaturesIsTheReadersOwnDocument) {
  const auto run = run_oci(root_, {"features"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto features = nlohmann::json::parse(run.out);
  EXPECT_EQ(features["ociVersionMax"], "1.2.1") << run.out;
  EXPECT_EQ(features["linux"]["cgroup"]["systemd"], false) << run.out;
  EXPECT_EQ(run.err, "");
}

TEST_F(OciStateCliTest, GlobalFlags) {
  const auto systemd =
      testing::run_cli({"oci", "--systemd-cgroup", "--root", root_.string(), "state", "c1"});
  EXPECT_EQ(systemd.exit_code, 1);
  EXPECT_NE(systemd.err.find("podman --cgroup-manager cgroupfs, containerd SystemdCgroup = false"),
            std::string::npos)
      << systemd.err;
  // containerd's call shape: --log FILE --log-format json, and it reads the
  // last error from the file.
  const fs::path log = temp_ / "log.json";
  const auto run = testing::run_cli({"oci", "--root", root_.string(), "--log", log.string(),
                                     "--log-format", "json", "delete", "nope"});
  EXPECT_EQ(run.exit_code, 1);
  const auto lines = testing::read_lines(log);
  ASSERT_EQ(lines.size(), 1u);
  const auto line = nlohmann::json::parse(lines[0]);
  EXPECT_EQ(line["level"], "error");
  EXPECT_NE(line["msg"].get<std::string>().find("container nope does not exist"),
            std::string::npos);
  EXPECT_TRUE(line["time"].is_string());
  // A shared --root is refused.
  fs::create_directories(temp_ / "shared");
  fs::permissions(temp_ / "shared", fs::perms::all);
  const auto shared = testing::run_cli({"oci", "--root", (temp_ / "shared").string(), "list"});
  EXPECT_EQ(shared.exit_code, 1);
  EXPECT_NE(shared.err.find("writable by group or others"), std::string::npos) << shared.err;
}

// The pulsebox-runc symlink reaches the same commands through argv[0].
TEST_F(OciStateCliTest, RuncName) {
  const char* runc = std::getenv("PULSEBOX_RUNC");
  ASSERT_NE(runc, nullptr) << "PULSEBOX_RUNC is not set (meson sets it)";
  testing::write_oci_record(root_, "c1", child_.pid(), start_time_);
  const std::string saved = std::getenv("PULSEBOX_BIN");
  ::setenv("PULSEBOX_BIN", runc, 1);
  const auto version = testing::run_cli({"--version"});
  const auto state = testing::run_cli({"--root", root_.string(), "state", "c1"});
  // `run` through this name is the OCI runtime's, never a sandbox run.
  const auto run = testing::run_cli({"--root", root_.string(), "run", "--bundle", "/x", "c9"});
  ::setenv("PULSEBOX_BIN", saved.c_str(), 1);
  EXPECT_EQ(version.exit_code, 0) << version.err;
  EXPECT_EQ(version.out.rfind("pulsebox-runc version ", 0), 0u) << version.out;
  EXPECT_NE(version.out.find("\ncommit: "), std::string::npos);
  EXPECT_NE(version.out.find("\nspec: 1.2.1\n"), std::string::npos);
  EXPECT_EQ(state.exit_code, 0) << state.err;
  EXPECT_EQ(nlohmann::json::parse(state.out)["status"], "running");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("run: cannot open config.json /x/config.json"), std::string::npos)
      << run.err;
}

}  // namespace
}  // namespace pulsebox
