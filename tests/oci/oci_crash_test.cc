// A pulsebox-runc command killed with SIGKILL at any step leaves nothing
// that `delete --force` and `reconcile` do not remove (design §5): no
// <root>/<id>, no cgroup leaf, no process of the container, no mount on the
// host. PULSEBOX_TRACE_STOP_AT stops the command at one phase; the test
// kills it there (by the pid it started) and cleans up as an engine would.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "helpers/oci_bundle.h"
#include "helpers/oci_fixture.h"
#include "helpers/oci_state.h"
#include "helpers/test_support.h"

namespace pulsebox {
namespace {

namespace fs = std::filesystem;
using testing::run_oci;
using testing::run_oci_to_files;

// The phases of create, in order (src/oci/commands/create.cc, spawn.cc).
const char* const kCreatePhases[] = {
    "oci: config read",      "oci: dir locked", "oci: record written",   "oci: cgroup leaves made",
    "oci: cgroup made",      "oci: fifo made",  "oci: cloned",           "oci: maps written",
    "oci: pid recorded",     "oci: init ready", "oci: pid file written", "oci: detached",
    "oci: created recorded",
};

struct ProcessStat {
  pid_t ppid = 0;
  char state = '?';
  std::uint64_t start_time = 0;
};

// nullopt when the process is gone, also while it is read: a read of a
// process reaped after the open fails with ESRCH, which std::ifstream's
// buffer turns into an exception.
std::optional<ProcessStat> read_stat(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  char buffer[1024];
  const ssize_t got = ::read(fd, buffer, sizeof buffer);
  ::close(fd);
  if (got <= 0) return std::nullopt;
  const std::string text(buffer, static_cast<std::size_t>(got));
  const auto paren = text.rfind(')');
  if (paren == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(paren + 2));
  ProcessStat stat;
  std::string skip;
  fields >> stat.state >> stat.ppid;
  for (int field = 5; field < 22; ++field)
    fields >> skip;
  fields >> stat.start_time;
  return stat;
}

// A process seen earlier: gone, a zombie, or another one under a reused pid.
bool process_ended(pid_t pid, std::uint64_t start_time) {
  const auto stat = read_stat(pid);
  return !stat || stat->start_time != start_time || stat->state == 'Z' || stat->state == 'X';
}

// The children of `parent`, from a scan of /proc (this kernel has no
// /proc/<pid>/task/<tid>/children).
std::vector<std::pair<pid_t, std::uint64_t>> children_of(pid_t parent) {
  std::vector<std::pair<pid_t, std::uint64_t>> children;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const pid_t pid = std::stoi(name);
    if (const auto stat = read_stat(pid); stat && stat->ppid == parent)
      children.emplace_back(pid, stat->start_time);
  }
  return children;
}

std::string join_lines(const std::vector<std::string>& lines, const std::string& separator) {
  std::string text;
  for (const auto& line : lines)
    text += (text.empty() ? "" : separator) + line;
  return text;
}

std::set<std::string> mountinfo_lines() {
  std::ifstream in("/proc/self/mountinfo");
  std::set<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.insert(line);
  return lines;
}

class OciCrashTest : public testing::OciContainerTest {
 protected:
  void SetUp() override {
    OciContainerTest::SetUp();
    if (IsSkipped()) return;
    mounts_before_ = mountinfo_lines();
    bundle_ = bundle({"sleep", "60"});
  }
  void TearDown() override {
    if (started_ > 0) {
      ::kill(started_, SIGKILL);
      ::waitpid(started_, nullptr, 0);
    }
    OciContainerTest::TearDown();
  }

  // Starts `pulsebox oci --root R args...` with PULSEBOX_TRACE_STOP_AT=phase
  // and waits (bounded) until it stops there. False when it ended instead.
  bool start_stopped_at(const std::string& phase, const std::vector<std::string>& args) {
    started_ = testing::spawn_oci(root_, args, temp_ / "out", temp_ / "err",
                                  {"PULSEBOX_TRACE_STOP_AT=" + phase});
    if (started_ < 0) return false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      const pid_t got = ::waitpid(started_, &status, WNOHANG | WUNTRACED);
      if (got == started_ && WIFSTOPPED(status)) return true;
      if (got == started_) {
        started_ = -1;  // ended without reaching the phase
        ended_status_ = status;
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    ADD_FAILURE() << "pulsebox oci did not stop at \"" << phase << "\" within 30 s";
    return false;
  }

  // What the stopped command has made so far that the cleanup must remove:
  // its children (the container's process once cloned) and the recorded
  // process. Then SIGKILL by its pid.
  void kill_stopped() {
    for (const auto& child : children_of(started_))
      container_processes_.push_back(child);
    if (const auto record = read_record()) {
      const pid_t pid = record->value("/process/pid"_json_pointer, 0);
      const auto start_time = record->value("/process/start_time"_json_pointer, std::uint64_t{0});
      if (pid > 0) container_processes_.emplace_back(pid, start_time);
    }
    ASSERT_EQ(::kill(started_, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(started_, &status, 0), started_);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    started_ = -1;
  }

  std::optional<nlohmann::json> read_record() {
    std::ifstream in(root_ / kId / "state.json");
    if (!in) return std::nullopt;
    auto json = nlohmann::json::parse(in, nullptr, false);
    if (!json.is_object()) return std::nullopt;
    return json;
  }

  void delete_force() {
    const auto deleted = run_oci(root_, {"delete", "--force", kId});
    // Killed before <id> existed: there is nothing to delete.
    if (deleted.exit_code != 0) {
      EXPECT_NE(deleted.err.find("does not exist"), std::string::npos) << deleted.err;
    }
  }

  void reconcile() {
    const auto reconciled = run_oci(root_, {"reconcile"});
    EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
  }

  // Nothing of the container is left anywhere.
  void expect_nothing_left() {
    std::vector<std::string> entries;
    if (fs::exists(root_)) {
      for (const auto& entry : fs::directory_iterator(root_))
        entries.push_back(entry.path().filename());
    }
    EXPECT_TRUE(entries.empty()) << "left in --root: " << join_lines(entries, ", ");
    for (const auto& [key, mount] : host_.hierarchy_mounts) {
      if (subtree_.empty()) break;
      EXPECT_FALSE(fs::exists(fs::path(mount) / subtree_ / kId)) << "cgroup leaf left in " << mount;
    }
    for (const auto& [pid, start_time] : container_processes_) {
      // SIGKILLed processes need a moment to be reaped by their new parent.
      bool ended = false;
      for (int i = 0; i < 200 && !ended; ++i) {
        ended = process_ended(pid, start_time);
        if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      EXPECT_TRUE(ended) << "the container's process " << pid << " is still there";
    }
    std::vector<std::string> new_mounts;
    for (const auto& line : mountinfo_lines()) {
      if (!mounts_before_.count(line) && line.find(temp_.path().string()) != std::string::npos)
        new_mounts.push_back(line);
    }
    EXPECT_TRUE(new_mounts.empty()) << "new host mounts: " << join_lines(new_mounts, "\n");
  }

  std::vector<std::string> create_args() {
    return {"create", "--bundle", bundle_.dir.string(), "--pid-file", (temp_ / "pid").string(),
            kId};
  }

  std::set<std::string> mounts_before_;
  testing::OciBundle bundle_;
  pid_t started_ = -1;
  int ended_status_ = -1;  // start_stopped_at's command ended: its wait status
  std::vector<std::pair<pid_t, std::uint64_t>> container_processes_;
};

// create killed at a phase, then cleaned up by delete --force or reconcile.
class OciCreateCrashTest : public OciCrashTest,
                           public ::testing::WithParamInterface<std::tuple<const char*, bool>> {};

TEST_P(OciCreateCrashTest, NothingLeftAfterCleanup) {
  const std::string phase = std::get<0>(GetParam());
  const bool by_reconcile = std::get<1>(GetParam());
  if (!start_stopped_at(phase, create_args())) {
    ASSERT_FALSE(HasFailure());
    // An ordinary user's container without limits gets no cgroup.
    ASSERT_TRUE((phase == "oci: cgroup made" || phase == "oci: cgroup leaves made") &&
                ::geteuid() != 0)
        << "create ended before \"" << phase << "\": " << testing::read_file(temp_ / "err");
    GTEST_SKIP() << "no cgroup is made for an ordinary user's container without limits";
  }
  ASSERT_NO_FATAL_FAILURE(kill_stopped());
  if (phase == "oci: cloned" || phase == "oci: created recorded") {
    EXPECT_FALSE(container_processes_.empty()) << "no container process seen at " << phase;
  }
  if (by_reconcile) {
    reconcile();
    if (phase == "oci: created recorded") {
      // Recorded as created, the container is complete: one waiting for
      // `start`, which reconcile must keep. delete removes it.
      const auto state = run_oci(root_, {"state", kId});
      EXPECT_NE(state.out.find("\"created\""), std::string::npos) << state.out << state.err;
      delete_force();
    }
  } else {
    delete_force();
  }
  expect_nothing_left();
}

std::string phase_test_name(const ::testing::TestParamInfo<std::tuple<const char*, bool>>& info) {
  std::string name = std::get<0>(info.param);
  name = name.substr(name.find(": ") + 2);
  for (char& c : name) {
    if (c == ' ') c = '_';
  }
  return name + (std::get<1>(info.param) ? "_reconcile" : "_delete");
}

INSTANTIATE_TEST_SUITE_P(Phases, OciCreateCrashTest,
                         ::testing::Combine(::testing::ValuesIn(kCreatePhases), ::testing::Bool()),
                         phase_test_name);

// start killed after opening the fifo, and after writing its byte.
class OciStartCrashTest : public OciCrashTest,
                          public ::testing::WithParamInterface<std::tuple<const char*, bool>> {};

TEST_P(OciStartCrashTest, NothingLeftAfterCleanup) {
  const auto created = run_oci_to_files(root_, create_args(), temp_ / "out", temp_ / "err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto record = read_record();
  ASSERT_TRUE(record.has_value());
  container_processes_.emplace_back(record->value("/process/pid"_json_pointer, 0),
                                    record->value("/process/start_time"_json_pointer, 0ULL));
  const std::string phase = std::get<0>(GetParam());
  ASSERT_TRUE(start_stopped_at(phase.c_str(), {"start", kId}));
  ASSERT_NO_FATAL_FAILURE(kill_stopped());
  // Before the byte the container still waits for a start; after it the
  // program runs (its execve closed the fifo's reader), whatever the fifo
  // left behind. It once read as running with no byte ever to come.
  const bool byte_written = phase == "oci: start byte written";
  std::string status;
  for (int i = 0; i < 300; ++i) {
    const auto state = run_oci(root_, {"state", kId});
    const auto document = nlohmann::json::parse(state.out, nullptr, false);
    status = document.is_object() ? document.value("status", "") : "";
    if (!byte_written || status == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, byte_written ? "running" : "created");
  if (!byte_written) {
    const auto started = run_oci(root_, {"start", kId});  // a second start works
    EXPECT_EQ(started.exit_code, 0) << started.err;
  }
  if (std::get<1>(GetParam())) {
    // Created or running: reconcile keeps it; delete ends it.
    reconcile();
    EXPECT_TRUE(fs::exists(root_ / kId));
  }
  delete_force();
  expect_nothing_left();
}

INSTANTIATE_TEST_SUITE_P(Phases, OciStartCrashTest,
                         ::testing::Combine(::testing::Values("oci: start fifo opened",
                                                              "oci: start byte written"),
                                            ::testing::Bool()),
                         phase_test_name);

// delete killed after the process is killed and after the cgroup is
// removed: the next delete or reconcile finishes it.
class OciDeleteCrashTest : public OciCrashTest,
                           public ::testing::WithParamInterface<std::tuple<const char*, bool>> {};

TEST_P(OciDeleteCrashTest, NothingLeftAfterCleanup) {
  const auto created = run_oci_to_files(root_, create_args(), temp_ / "out", temp_ / "err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  ASSERT_EQ(run_oci(root_, {"start", kId}).exit_code, 0);
  ASSERT_TRUE(start_stopped_at(std::get<0>(GetParam()), {"delete", "--force", kId}))
      << "status " << ended_status_ << ": " << testing::read_file(temp_ / "err");
  ASSERT_NO_FATAL_FAILURE(kill_stopped());
  if (std::get<1>(GetParam())) {
    reconcile();
  } else {
    delete_force();
  }
  expect_nothing_left();
}

INSTANTIATE_TEST_SUITE_P(Phases, OciDeleteCrashTest,
                         ::testing::Combine(::testing::Values("oci: delete process killed",
                                                              "oci: delete cgroup removed"),
                                            ::testing::Bool()),
                         phase_test_name);

// `pulsebox reconcile` runs the OCI runtime's reconcile too and says how
// many containers it removed.
class PulseboxReconcileTest : public OciCrashTest {
 protected:
  testing::CliRun pulsebox_reconcile(const std::vector<std::string>& extra,
                                     const std::vector<std::string>& env = {}) {
    fs::create_directories(temp_ / "workspace");
    std::vector<std::string> args = {"reconcile",
                                     "-w",
                                     (temp_ / "workspace").string(),
                                     "--audit-log",
                                     (temp_ / "audit.jsonl").string(),
                                     "--audit-key",
                                     (temp_ / "audit.key").string()};
    args.insert(args.end(), extra.begin(), extra.end());
    return testing::run_cli(args, "", env);
  }
};

TEST_F(PulseboxReconcileTest, RemovesACrashedCreate) {
  ASSERT_TRUE(start_stopped_at("oci: pid recorded", create_args()));
  ASSERT_NO_FATAL_FAILURE(kill_stopped());
  const auto reconciled = pulsebox_reconcile({"--oci-root", root_.string()});
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
  EXPECT_NE(reconciled.out.find("removed OCI container c1\n"), std::string::npos) << reconciled.out;
  EXPECT_NE(reconciled.out.find("removed 1 OCI container from " + root_.string() + "\n"),
            std::string::npos)
      << reconciled.out;
  expect_nothing_left();
  // Again: nothing left to remove, and the JSON form says so.
  const auto again = pulsebox_reconcile({"--oci-root", root_.string(), "--json"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  const auto json = nlohmann::json::parse(again.out, nullptr, false);
  ASSERT_TRUE(json.is_object()) << again.out;
  EXPECT_EQ(json["oci"]["root"], root_.string());
  EXPECT_EQ(json["oci"]["removed"].size(), 0u);
}

TEST_F(PulseboxReconcileTest, KeepsALiveContainer) {
  const auto created = run_oci_to_files(root_, create_args(), temp_ / "out", temp_ / "err");
  ASSERT_EQ(created.exit_code, 0) << created.err;
  const auto reconciled = pulsebox_reconcile({"--oci-root", root_.string()});
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
  EXPECT_NE(reconciled.out.find("removed 0 OCI containers from "), std::string::npos)
      << reconciled.out;
  EXPECT_TRUE(fs::exists(root_ / kId));
}

// An ordinary user's default --root is $XDG_RUNTIME_DIR/pulsebox-oci (root's
// is the machine's /run/pulsebox-oci, which this test leaves alone).
TEST_F(PulseboxReconcileTest, UsesTheDefaultRoot) {
  if (::geteuid() == 0) GTEST_SKIP() << "root's default --root is the machine's";
  const fs::path runtime_dir = temp_ / "xdg";
  fs::create_directories(runtime_dir);
  fs::permissions(runtime_dir, fs::perms::owner_all, fs::perm_options::replace);
  root_ = runtime_dir / "pulsebox-oci";
  ASSERT_TRUE(start_stopped_at("oci: record written", create_args()));
  ASSERT_NO_FATAL_FAILURE(kill_stopped());
  const auto reconciled = pulsebox_reconcile({}, {"XDG_RUNTIME_DIR=" + runtime_dir.string()});
  EXPECT_EQ(reconciled.exit_code, 0) << reconciled.err;
  EXPECT_NE(reconciled.out.find("removed 1 OCI container from " + root_.string()),
            std::string::npos)
      << reconciled.out;
  expect_nothing_left();
}

}  // namespace
}  // namespace pulsebox
