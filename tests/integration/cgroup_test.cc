// Resource limits through cgroups, for real: a fork bomb, a memory hog, a
// busy loop, a daemon, a crashed run. The same suite runs on this kind of
// host (hybrid: v1 memory/pids/cpu + an empty unified hierarchy), as root and
// as an ordinary user in a delegated cgroup (tools/check), and on pure cgroup
// v2 inside a VM (tools/vm-test).
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>
#include <utility>

#include "core/unique_fd.h"
#include "helpers/cli_runner.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"
#include "pulsebox/sandbox.h"

namespace pulsebox {
namespace {

using testing::parse_report;
using testing::processes_with_marker;
using testing::TempDir;
namespace fs = std::filesystem;

// The per-sandbox cgroups ("sandbox-*") under every parent pulsebox uses here.
std::set<std::string> sandbox_cgroups(const linux_api::CgroupHost& host) {
  std::set<std::string> found;
  for (const auto* place :
       {&host.unified, &host.memory, &host.pids, &host.cpu, &host.cpu_accounting}) {
    if (!place->usable) continue;
    DIR* dir = ::opendir(place->parent.c_str());
    if (dir == nullptr) continue;
    while (const dirent* entry = ::readdir(dir)) {
      if (std::strncmp(entry->d_name, "sandbox-", 8) == 0) {
        found.insert(place->parent + "/" + entry->d_name);
      }
    }
    ::closedir(dir);
  }
  return found;
}

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = make_native_backend(native_options());
    const Availability availability = backend->availability();
    PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
    host_ = linux_api::discover_cgroups();
    for (auto controller : linux_api::kAllCgroupControllers) {
      const auto& place = host_.place(controller);
      PULSEBOX_SKIP_UNLESS(place.usable, std::string("cgroup ") +
                                             linux_api::cgroup_controller_name(controller) + ": " +
                                             place.problem + " (" + place.fix + ")");
    }
    static bool described = false;
    if (!std::exchange(described, true)) {
      std::cout << "cgroups: " << host_.describe() << "; memory cgroups in " << host_.memory.parent
                << std::endl;
    }
    before_ = sandbox_cgroups(host_);
    const char* probe = std::getenv("PULSEBOX_PROBE");
    ASSERT_NE(probe, nullptr) << "PULSEBOX_PROBE is set by meson";
    fs::copy_file(probe, workspace_ / "probe");
    fs::permissions(workspace_ / "probe", fs::perms(0755));
  }

  void TearDown() override {
    if (IsSkipped()) return;
    // Sandboxes that are not this test's may come and go beside its own
    // under the same parent (one still being torn down, or another user of
    // the hierarchy's): what this test left behind is a new cgroup nobody
    // holds.
    for (const auto& dir : sandbox_cgroups(host_)) {
      if (before_.count(dir) == 0) {
        EXPECT_FALSE(left_behind(dir)) << "a sandbox's cgroup was left behind: " << dir;
      }
    }
  }

  // Whether nobody holds `dir`'s lock, as reconcile() decides it: a live
  // run's cgroup is locked while it lives, and made and locked under a
  // shared lock on its parent, which this takes exclusively first.
  static bool left_behind(const std::string& dir) {
    core::UniqueFd parent(
        ::open(fs::path(dir).parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!parent || ::flock(parent.get(), LOCK_EX) != 0) return false;
    core::UniqueFd group(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    return group && ::flock(group.get(), LOCK_EX | LOCK_NB) == 0;
  }

  NativeBackendOptions native_options() {
    NativeBackendOptions options;
    options.state_dir = state_.path();
    return options;
  }

  // No weaker level is accepted: every limit must be enforced.
  SandboxOptions options() {
    SandboxOptions o;
    o.workspace = workspace_.path();
    o.policy.add_rule({ActionType::Shell, "*", Decision::Allow, "test"});
    o.backend = make_native_backend(native_options());
    o.limits.wall_time_seconds = 60;
    return o;
  }

  linux_api::CgroupHost host_;
  std::set<std::string> before_;
  TempDir workspace_;
  TempDir state_;
};

TEST_F(CgroupTest, EveryLimitIsStronglyEnforced) {
  SandboxOptions o = options();
  o.limits.cpu_time_seconds = 30;
  o.limits.swap_bytes = 64ull << 20;
  Sandbox sandbox(std::move(o));
  sandbox.initialize();
  for (LimitKind kind : {LimitKind::Memory, LimitKind::Swap, LimitKind::Processes, LimitKind::Cpu,
                         LimitKind::CpuTime, LimitKind::WallTime}) {
    const Capability capability = sandbox.backend().limit_capability(kind);
    EXPECT_EQ(capability.level, EnforcementLevel::StronglyEnforced)
        << to_string(kind) << ": " << capability.reason;
  }
  const auto result = sandbox.execute({"/workspace/probe", "hog", "1"});
  EXPECT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(result.enforcement.limits, EnforcementLevel::StronglyEnforced);
}

TEST_F(CgroupTest, AForkBombStopsAtPidsMax) {
  SandboxOptions o = options();
  o.limits.max_processes = 24;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/workspace/probe", "forkbomb"});
  EXPECT_EQ(result.termination_reason, TerminationReason::Pids) << result.termination_detail;
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_EQ(parse_report(result.stdout_data)["fork_error"], "EAGAIN");
  EXPECT_NE(result.termination_detail.find("limit of 24 processes"), std::string::npos)
      << result.termination_detail;
  EXPECT_EQ(result.metrics.process_count, 24u) << "the peak, read from the cgroup";
}

TEST_F(CgroupTest, AMemoryHogIsOomKilledAtItsLimit) {
  SandboxOptions o = options();
  o.limits.memory_bytes = 64ull << 20;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/workspace/probe", "hog", "1024"});
  EXPECT_EQ(result.termination_reason, TerminationReason::Oom) << result.termination_detail;
  EXPECT_EQ(result.signal, SIGKILL);
  EXPECT_EQ(result.exit_code, 128 + SIGKILL);
  EXPECT_EQ(parse_report(result.stdout_data).count("allocated_mib"), 0u);
  EXPECT_NE(result.termination_detail.find("memory limit of 64 MiB"), std::string::npos)
      << result.termination_detail;
  EXPECT_GE(result.metrics.peak_memory_bytes, 32ull << 20);
  EXPECT_LE(result.metrics.peak_memory_bytes, 64ull << 20);
}

// The memory limit is in place before anything runs in the cgroup, so the
// sandbox never holds more than it, even during init's setup. Written once
// init was in its cgroup (as it was, after "go"), a limit below what init
// had charged made the kernel run the OOM killer from the writer's call
// (cgroup v2's memory.max), at any point of init's life: in the VM it once
// chose init as it exited, whose memory was still its supervisor's, and
// took the server down with it. 64 KiB is below what init's namespaces
// take, so init's setup fails, and says so as `oom`.
TEST_F(CgroupTest, TheMemoryLimitHoldsFromInitsFirstInstruction) {
  SandboxOptions o = options();
  o.limits.memory_bytes = 64ull << 10;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/bin/true"});
  EXPECT_EQ(result.termination_reason, TerminationReason::Oom) << result.termination_detail;
  EXPECT_LE(result.metrics.peak_memory_bytes, 64ull << 10)
      << "the sandbox held more than its limit: the limit came after its first charges";
}

// Between a limit too small for init's setup and one the command runs in
// there are limits at which the command's execve fails for want of memory,
// which the kernel reports as E2BIG for the arguments' pages ("Argument list
// too long" for `true`). Each of them is reported as what it is.
TEST_F(CgroupTest, ALimitTooSmallForTheCommandsImageIsReportedAsOom) {
  for (std::uint64_t kib = 64; kib <= 320; kib += 16) {
    SCOPED_TRACE(std::to_string(kib) + " KiB");
    SandboxOptions o = options();
    o.limits.memory_bytes = kib << 10;
    Sandbox sandbox(std::move(o));
    const auto result = sandbox.execute({"/bin/true"});
    if (result.exit_code == 0) continue;
    EXPECT_EQ(result.termination_reason, TerminationReason::Oom)
        << "exit " << result.exit_code << ", signal " << result.signal.value_or(0) << ": "
        << result.termination_detail;
    EXPECT_NE(result.termination_detail.find("memory limit of " + std::to_string(kib) + " KiB"),
              std::string::npos)
        << result.termination_detail;
  }
}

TEST_F(CgroupTest, UnderItsLimitAHogRunsAndItsPeakIsMeasured) {
  SandboxOptions o = options();
  o.limits.memory_bytes = 256ull << 20;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/workspace/probe", "hog", "48"});
  ASSERT_EQ(result.exit_code, 0) << result.termination_detail;
  EXPECT_EQ(parse_report(result.stdout_data)["allocated_mib"], "48");
  EXPECT_EQ(result.termination_reason, TerminationReason::None);
  EXPECT_GE(result.metrics.peak_memory_bytes, 48ull << 20);
  EXPECT_LE(result.metrics.peak_memory_bytes, 256ull << 20);
}

TEST_F(CgroupTest, HalfACpuGetsAboutHalfACore) {
  SandboxOptions o = options();
  o.limits.cpu_quota_percent = 50;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/workspace/probe", "spin", "2"});
  ASSERT_EQ(result.exit_code, 0) << result.termination_detail;
  auto seen = parse_report(result.stdout_data);
  const double cpu_ms = std::stod(seen["cpu_ms"]);
  const double wall_ms = std::stod(seen["wall_ms"]);
  const double share = cpu_ms / wall_ms;
  std::cout << "cpu " << cpu_ms << " ms in " << wall_ms << " ms: " << share << " of a core\n";
  // CFS bandwidth: 50 ms per 100 ms period. Below 0.5 when the host is busy.
  EXPECT_LE(share, 0.65);
  EXPECT_GE(share, 0.25);
  EXPECT_GE(result.metrics.cpu_time_ms, cpu_ms * 0.9) << "the cgroup counts the probe's time";
}

TEST_F(CgroupTest, TheCpuTimeLimitStopsTheWholeSandbox) {
  SandboxOptions o = options();
  o.limits.cpu_time_seconds = 0.5;
  Sandbox sandbox(std::move(o));
  const auto result = sandbox.execute({"/workspace/probe", "spin", "20"});
  EXPECT_EQ(result.termination_reason, TerminationReason::CpuTime) << result.termination_detail;
  EXPECT_NE(result.exit_code, 0);
  EXPECT_GE(result.metrics.cpu_time_ms, 500.0);
  EXPECT_LT(result.metrics.elapsed_ms, 15000.0) << "stopped long before the probe's 20 s";
}

TEST_F(CgroupTest, ADaemonisedGrandchildIsKilledAtTheEndOfTheRun) {
  Sandbox sandbox(options());
  const std::string marker = "pulsebox-cgroup-daemon-" + std::to_string(::getpid());
  const auto result = sandbox.execute({"/workspace/probe", "daemon", marker});
  EXPECT_EQ(result.exit_code, 0) << result.termination_detail;
  EXPECT_EQ(processes_with_marker(marker), 0) << "the double-forked sleeper survived the run";
}

// Concurrent runs, each reconciling at start: none may take another's new
// cgroup for a crashed run's (the parent's lock orders them).
TEST_F(CgroupTest, ConcurrentRunsEachGetTheirCgroup) {
  constexpr int kClients = 4;
  constexpr int kRunsEach = 4;
  std::vector<std::unique_ptr<TempDir>> workspaces;
  for (int i = 0; i < kClients; ++i) {
    workspaces.push_back(std::make_unique<TempDir>());
    fs::copy_file(workspace_ / "probe", *workspaces.back() / "probe");
    fs::permissions(*workspaces.back() / "probe", fs::perms(0755));
  }
  const std::string failures = testing::run_concurrently(kClients, [&](int i) {
    std::string failed;
    for (int run = 0; run < kRunsEach; ++run) {
      SandboxOptions o = options();
      o.workspace = workspaces[static_cast<std::size_t>(i)]->path();
      o.limits.memory_bytes = 128ull << 20;
      Sandbox sandbox(std::move(o));  // initialize() reconciles
      const auto result = sandbox.execute({"/workspace/probe", "hog", "4"});
      if (result.exit_code != 0 || result.metrics.peak_memory_bytes < (4ull << 20)) {
        failed += "run " + std::to_string(run) + ": exit " + std::to_string(result.exit_code) +
                  " " + result.termination_detail + "; ";
      }
    }
    return failed;
  });
  EXPECT_EQ(failures, "");
}

// A launch makes the unified cgroup before clone (clone3 puts init there)
// and the others while init makes its namespaces: in parts, the same
// directories and `tasks` files as made at once.
TEST_F(CgroupTest, MadeInPartsTheOtherHierarchiesComeOnlyWhenAsked) {
  linux_api::CgroupSettings settings;
  settings.memory_max = 64ull << 20;
  settings.pids_max = 8;
  settings.cpu_quota_us = 50000;
  const std::string suffix = std::to_string(::getpid());
  auto whole = linux_api::SandboxCgroup::make(host_, "run-whole-" + suffix, settings);
  ASSERT_TRUE(whole.ok()) << whole.error().to_string();
  auto parts = linux_api::SandboxCgroup::make(host_, "run-parts-" + suffix, settings,
                                              linux_api::SandboxCgroup::Hierarchies::UnifiedFirst);
  ASSERT_TRUE(parts.ok()) << parts.error().to_string();

  const std::vector<std::string> unified_only =
      host_.unified.usable
          ? std::vector<std::string>{host_.unified.parent + "/sandbox-run-parts-" + suffix}
          : std::vector<std::string>{};
  EXPECT_EQ(parts->directories(), unified_only);
  for (const auto& dir : whole->directories()) {
    const std::string own = fs::path(dir).parent_path() / ("sandbox-run-parts-" + suffix);
    if (std::find(unified_only.begin(), unified_only.end(), own) == unified_only.end()) {
      EXPECT_FALSE(fs::exists(own)) << own << " made before it was asked for";
    }
  }
  EXPECT_TRUE(parts->self_join_fds().empty());

  ASSERT_TRUE(parts->make_others().ok());
  ASSERT_EQ(parts->directories().size(), whole->directories().size());
  for (std::size_t i = 0; i < whole->directories().size(); ++i) {
    EXPECT_EQ(fs::path(parts->directories()[i]).parent_path(),
              fs::path(whole->directories()[i]).parent_path())
        << "the same hierarchy, in the same order";
    EXPECT_TRUE(fs::is_directory(parts->directories()[i])) << parts->directories()[i];
  }
  EXPECT_EQ(parts->self_join_fds().size(), whole->self_join_fds().size());
  // Each directory had its limits when it was made, before anything could
  // run in it (the memory and pids controllers are usable here: SetUp).
  int memory_limits = 0;
  int pids_limits = 0;
  for (const auto& dir : parts->directories()) {
    for (const char* file : {"memory.max", "memory.limit_in_bytes"}) {
      if (!fs::exists(fs::path(dir) / file)) continue;
      EXPECT_EQ(testing::read_file(fs::path(dir) / file), "67108864\n") << dir << "/" << file;
      ++memory_limits;
    }
    if (fs::exists(fs::path(dir) / "pids.max")) {
      EXPECT_EQ(testing::read_file(fs::path(dir) / "pids.max"), "8\n") << dir;
      ++pids_limits;
    }
  }
  EXPECT_EQ(memory_limits, 1);
  EXPECT_EQ(pids_limits, 1);
  EXPECT_TRUE(parts->remove().ok());
  EXPECT_TRUE(whole->remove().ok());
}

// A crashed supervisor leaves its cgroups (and maybe a process in them):
// reconcile kills what is left and removes them; a live run's are kept.
TEST_F(CgroupTest, ReconcileRemovesACrashedRunsCgroups) {
  linux_api::CgroupSettings settings;
  settings.memory_max = 64ull << 20;
  settings.pids_max = 8;
  auto live =
      linux_api::SandboxCgroup::create(host_, "run-live-" + std::to_string(::getpid()), settings);
  ASSERT_TRUE(live.ok()) << live.error().to_string();

  int report[2];
  ASSERT_EQ(::pipe(report), 0);
  const pid_t crashing = ::fork();
  if (crashing == 0) {
    auto group = linux_api::SandboxCgroup::create(
        host_, "run-crashed-" + std::to_string(::getpid()), settings);
    if (!group) ::_exit(1);
    const pid_t straggler = ::fork();
    if (straggler == 0) {
      // Not the cgroup locks (a crashed run holds none): everything but the
      // report pipe goes before it reports.
      ::close_range(3, static_cast<unsigned>(report[1]) - 1, 0);
      ::close_range(static_cast<unsigned>(report[1]) + 1, ~0U, 0);
      const pid_t self = ::getpid();
      (void)!::write(report[1], &self, sizeof self);
      ::close(report[1]);
      ::pause();
      ::_exit(0);
    }
    if (!group->attach(straggler, false)) ::_exit(2);
    ::_exit(0);  // "crash": no destructor, the cgroups stay
  }
  ::close(report[1]);
  pid_t straggler = -1;
  ASSERT_EQ(::read(report[0], &straggler, sizeof straggler),
            static_cast<ssize_t>(sizeof straggler));
  ::close(report[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(crashing, &status, 0), crashing);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  // By name, not by count: other runs' cgroups may come and go meanwhile.
  const auto left = sandbox_cgroups(host_);
  for (const auto& dir : live->directories())
    ASSERT_EQ(left.count(dir), 1u) << dir;
  const std::string crashed_name = "/sandbox-run-crashed-" + std::to_string(crashing);
  ASSERT_EQ(std::count_if(left.begin(), left.end(),
                          [&](const std::string& dir) { return dir.ends_with(crashed_name); }),
            static_cast<std::ptrdiff_t>(live->directories().size()))
      << "the crashed run's cgroups, one per hierarchy";

  const auto removed = make_native_backend(native_options())->reconcile();
  std::size_t crashed_cgroups = 0;
  for (const auto& line : removed) {
    if (line.find("run-crashed-" + std::to_string(crashing)) != std::string::npos)
      ++crashed_cgroups;
    EXPECT_EQ(line.find("run-live-"), std::string::npos) << "a live run's cgroup was removed";
  }
  EXPECT_EQ(crashed_cgroups, live->directories().size()) << "one per hierarchy";
  for (const auto& dir : live->directories())
    EXPECT_TRUE(fs::exists(dir)) << dir;
  // The straggler was killed (it is our grandchild, reparented: poll for it).
  bool gone = false;
  for (int i = 0; i < 200 && !gone; ++i) {
    const std::string stat = testing::read_file("/proc/" + std::to_string(straggler) + "/stat");
    const auto state = stat.rfind(')');
    // Gone, or a zombie waiting for whoever reaps orphans here.
    gone = stat.empty() || (state != std::string::npos && stat.substr(state + 2, 1) == "Z");
    if (!gone) ::usleep(10000);
  }
  EXPECT_TRUE(gone) << "the crashed run's process " << straggler << " is still alive";
  ASSERT_TRUE(live->remove().ok());
}

TEST_F(CgroupTest, TheCliReportsTheOutcomeAndTheMetrics) {
  const auto run = testing::run_cli({"run", "--workspace", workspace_.path().string(), "--json",
                                     "--pids", "12", "--", "/workspace/probe", "forkbomb"},
                                    "", {"PULSEBOX_STATE_DIR=" + state_.path().string()});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["termination_reason"], "pids");
  EXPECT_EQ(json["metrics"]["process_count"], 12);
  EXPECT_EQ(json["enforcement"]["limits"], "strongly_enforced");
}

}  // namespace
}  // namespace pulsebox
