// The facade: backend choice, enforcement refusals, policy checks, audit.
// A FakeBackend stands in at the backend interface (the seam) to test the
// facade's decisions; the host backend tests run real processes.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>
#include <functional>
#include <optional>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <thread>

#include "helpers/namespaces.h"
#include "helpers/test_support.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"

namespace pulsebox {
namespace {

using testing::read_file;
using testing::read_lines;
using testing::TempDir;
using testing::write_file;

class FakeBackend : public Backend {
 public:
  EnforcementLevel network = EnforcementLevel::StronglyEnforced;
  EnforcementLevel secrets = EnforcementLevel::StronglyEnforced;
  EnforcementLevel filesystem = EnforcementLevel::StronglyEnforced;
  EnforcementLevel memory = EnforcementLevel::StronglyEnforced;
  EnforcementLevel syscalls = EnforcementLevel::StronglyEnforced;
  int executions = 0;
  int cleanups = 0;
  std::map<std::string, std::string> last_environment;
  std::function<void()> on_execute;  // called as the command would start
  std::function<void()> on_prepare;  // called as the run would be set up
  std::function<void()> on_cleanup;  // called as the run would be cleaned up
  bool cleanup_fails = false;

  std::string name() const override { return "fake"; }
  bool is_unsafe() const override { return false; }
  std::string isolation_level() const override { return "fake"; }
  Availability availability() const override { return {true, ""}; }
  std::vector<std::string> leftovers;  // what reconcile() says it removed
  std::vector<std::string> reconcile() override { return leftovers; }
  void cleanup() override {
    ++cleanups;
    if (on_cleanup) on_cleanup();
    if (cleanup_fails) throw std::runtime_error("the fake's cleanup failed");
  }
  std::unique_ptr<PreparedRun> prepare(const ExecutionRequest& /*request*/) override {
    if (on_prepare) on_prepare();
    return nullptr;
  }
  using Backend::execute;
  ExecutionOutcome execute(const ExecutionRequest& request,
                           std::unique_ptr<PreparedRun> /*prepared*/) override {
    ++executions;
    if (on_execute) on_execute();
    last_environment = request.environment;
    request.on_output(OutputStream::Stdout, "token: sup3r-s3cret-v");
    request.on_output(OutputStream::Stdout, "alue done\n");
    ExecutionOutcome outcome;
    outcome.result.exit_code = 0;
    return outcome;
  }
  Capability network_capability(const NetworkPolicy&) const override {
    return {network, "net", "fix net"};
  }
  Capability secrets_capability(const SecretPolicy&) const override { return {secrets, "sec", ""}; }
  Capability filesystem_capability() const override { return {filesystem, "fs", ""}; }
  Capability limit_capability(LimitKind kind) const override {
    return {kind == LimitKind::Memory ? memory : EnforcementLevel::StronglyEnforced, "mem",
            "cgroups"};
  }
  Capability syscall_capability(const std::string&) const override { return {syscalls, "sys", ""}; }
  Capability process_containment_capability() const override {
    return {EnforcementLevel::StronglyEnforced, "", ""};
  }
};

class SandboxTest : public ::testing::Test {
 protected:
  SandboxOptions options(std::shared_ptr<Backend> backend = nullptr) {
    write_file(dir_ / "ws/src/a.txt", "alpha\n");
    SandboxOptions o;
    o.workspace = dir_ / "ws";
    o.backend = std::move(backend);
    o.policy.add_rule({ActionType::Shell, "*", Decision::Allow, "test"});
    o.secrets = {"sup3r-s3cret-value"};
    return o;
  }
  std::vector<nlohmann::json> audit_entries() {
    std::vector<nlohmann::json> out;
    for (const auto& line : read_lines(dir_ / "ws/.agent/logs/audit.jsonl")) {
      out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }
  std::vector<std::string> audit_actions() {
    std::vector<std::string> out;
    for (const auto& entry : audit_entries())
      out.push_back(entry["action"]);
    return out;
  }
  TempDir dir_;
};

TEST_F(SandboxTest, TheAutomaticChoiceIsTheNativeBackend) {
  auto backend = make_native_backend();
  PULSEBOX_SKIP_UNLESS(backend->availability().available, backend->availability().reason);
  Sandbox sandbox(options());
  sandbox.initialize();
  EXPECT_EQ(sandbox.backend().name(), "native");
  EXPECT_FALSE(sandbox.backend().is_unsafe());
  EXPECT_EQ(audit_entries().back()["isolation_level"], "native");
}

// Without user namespaces the native backend is unavailable: the run is
// refused (and audited) unless the caller opted into the host backend.
TEST_F(SandboxTest, WithoutNamespacesNoBackendWithoutOptInAndHostOnlyWithIt) {
  const auto outcome =
      testing::run_in_namespaces(testing::NamespaceKind::kNoNestedUserNamespaces, [&]() -> int {
        if (make_native_backend()->availability().available) return 10;
        try {
          Sandbox(options()).initialize();
          return 11;
        } catch (const SandboxUnavailableError& error) {
          if (std::string(error.what()).find("no secure backend is available") == std::string::npos)
            return 12;
        }
        const auto entries = audit_entries();
        if (entries.size() != 1 || entries[0]["action"] != "sandbox-init" ||
            entries[0]["decision"] != "deny" || entries[0]["isolation_level"] != "unavailable") {
          return 13;
        }
        auto o = options();
        o.unsafe_host_execution = true;
        Sandbox sandbox(o);
        sandbox.initialize();
        return sandbox.backend().is_unsafe() ? 0 : 14;
      });
  PULSEBOX_SKIP_UNLESS(!outcome.setup_failed, outcome.setup_error);
  EXPECT_EQ(outcome.exit_code, 0) << "10: native still available, 11: no refusal, 12: wrong "
                                     "message, 13: not audited, 14: no host fallback";
}

TEST_F(SandboxTest, HostBackendNeedsExplicitOptIn) {
  auto o = options();
  o.backend_name = "host";
  EXPECT_THROW(Sandbox(o).initialize(), SandboxUnavailableError);
  o.unsafe_host_execution = true;
  Sandbox sandbox(o);
  sandbox.initialize();
  EXPECT_EQ(sandbox.backend().name(), "host");
  const auto last = audit_entries().back();
  EXPECT_EQ(last["isolation_level"], "host_unsafe");
  EXPECT_NE(last["detail"].get<std::string>().find("WARNING"), std::string::npos);
}

TEST_F(SandboxTest, RunsScrubsAndAuditsEveryStep) {
  auto fake = std::make_shared<FakeBackend>();
  std::vector<std::string> on_disk_at_start;
  fake->on_execute = [&] { on_disk_at_start = audit_actions(); };
  std::optional<std::vector<std::string>> on_disk_at_prepare;
  fake->on_prepare = [&] { on_disk_at_prepare = audit_actions(); };
  Sandbox sandbox(options(fake));
  std::string streamed;
  const auto result = sandbox.execute(
      {"echo", "hi"},
      {.on_output = [&](OutputStream, std::string_view text) { streamed += text; }});
  EXPECT_EQ(fake->executions, 1);
  EXPECT_EQ(fake->cleanups, 1);
  // The secret was split across two chunks and is still redacted.
  EXPECT_EQ(result.stdout_data, "token: [REDACTED_SECRET] done\n");
  EXPECT_EQ(streamed, result.stdout_data);
  EXPECT_EQ(result.enforcement.network, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(fake->last_environment.at("HOME"), "/home/sandbox") << "outside the workspace";
  const std::vector<std::string> expected = {
      "sandbox-init",         "lifecycle-transition", "network",     "enforcement",
      "enforcement",          "enforcement",          "enforcement", "enforcement",
      "lifecycle-transition", "lifecycle-transition", "shell",       "lifecycle-transition",
      "lifecycle-transition"};
  EXPECT_EQ(audit_actions(), expected);
  // Every record before the command's start was on disk when it started
  // (those made together are appended together, before it).
  const std::vector<std::string> before_start(expected.begin(), expected.begin() + 9);
  EXPECT_EQ(on_disk_at_start, before_start);
  // The backend's choice and the Starting transition wait for the records
  // made just before the start: none was written on its own before.
  ASSERT_TRUE(on_disk_at_prepare.has_value());
  EXPECT_EQ(*on_disk_at_prepare, std::vector<std::string>{});
  const auto entries = audit_entries();
  EXPECT_EQ(entries[8]["detail"], "starting -> running");
  EXPECT_EQ(entries[1]["detail"], "created -> starting");
  EXPECT_EQ(entries[9]["detail"], "running -> completing");
  EXPECT_EQ(entries[10]["target"], "echo hi");
  EXPECT_EQ(entries[10]["exit_code"], 0);
  EXPECT_EQ(entries.back()["detail"], "cleaning -> finalized");
  EXPECT_TRUE(verify_audit_log(dir_ / "ws/.agent/logs/audit.jsonl").ok);
}

// The cleanup's records are appended together once it is over: the
// command's record is the last on disk while the backend cleans up.
TEST_F(SandboxTest, TheCleanupIsRecordedInOneAppendAfterIt) {
  auto fake = std::make_shared<FakeBackend>();
  std::vector<nlohmann::json> on_disk_at_cleanup;
  fake->on_cleanup = [&] { on_disk_at_cleanup = audit_entries(); };
  Sandbox sandbox(options(fake));
  sandbox.execute({"true"});
  ASSERT_FALSE(on_disk_at_cleanup.empty());
  EXPECT_EQ(on_disk_at_cleanup.back()["action"], "shell");
  const auto entries = audit_entries();
  ASSERT_EQ(entries.size(), on_disk_at_cleanup.size() + 2);
  EXPECT_EQ(entries[entries.size() - 2]["detail"], "completing -> cleaning");
  EXPECT_EQ(entries.back()["detail"], "cleaning -> finalized");
  EXPECT_TRUE(verify_audit_log(dir_ / "ws/.agent/logs/audit.jsonl").ok);
}

// A failed cleanup is on record between the Cleaning transition and the
// end it leads to; the run's result is still returned.
TEST_F(SandboxTest, AFailedCleanupIsRecordedBeforeRecoveryRequired) {
  auto fake = std::make_shared<FakeBackend>();
  fake->cleanup_fails = true;
  Sandbox sandbox(options(fake));
  const auto result = sandbox.execute({"true"});
  EXPECT_EQ(result.exit_code, 0);
  const auto entries = audit_entries();
  ASSERT_GE(entries.size(), 3u);
  EXPECT_EQ(entries[entries.size() - 3]["detail"], "completing -> cleaning");
  EXPECT_EQ(entries[entries.size() - 2]["action"], "sandbox-cleanup");
  EXPECT_EQ(entries[entries.size() - 2]["decision"], "deny");
  EXPECT_NE(
      entries[entries.size() - 2]["detail"].get<std::string>().find("the fake's cleanup failed"),
      std::string::npos);
  EXPECT_EQ(entries.back()["detail"], "cleaning -> recovery_required");
  EXPECT_TRUE(verify_audit_log(dir_ / "ws/.agent/logs/audit.jsonl").ok);
}

// What a reconcile removed is on record at once, before the run goes on;
// the backend's choice waits for the records made before the start.
TEST_F(SandboxTest, LeftoversRemovedAreRecordedAtOnce) {
  auto fake = std::make_shared<FakeBackend>();
  fake->leftovers = {"the staging directory of crashed run run-1"};
  std::optional<std::vector<std::string>> on_disk_at_prepare;
  fake->on_prepare = [&] { on_disk_at_prepare = audit_actions(); };
  Sandbox sandbox(options(fake));
  sandbox.execute({"true"});
  ASSERT_TRUE(on_disk_at_prepare.has_value());
  EXPECT_EQ(*on_disk_at_prepare, std::vector<std::string>{"reconcile"});
  const auto entries = audit_entries();
  ASSERT_GE(entries.size(), 2u);
  EXPECT_EQ(entries[0]["detail"], "removed the staging directory of crashed run run-1");
  EXPECT_EQ(entries[1]["action"], "sandbox-init");
}

TEST_F(SandboxTest, WeakerDimensionRefusesUnlessAccepted) {
  auto fake = std::make_shared<FakeBackend>();
  fake->filesystem = EnforcementLevel::PartiallyEnforced;
  auto o = options(fake);
  {
    Sandbox sandbox(o);
    try {
      sandbox.execute({"true"});
      FAIL() << "ran despite a weak filesystem";
    } catch (const SandboxUnsupportedPolicyError& error) {
      EXPECT_NE(std::string(error.what())
                    .find("filesystem: the fake backend cannot enforce this "
                          "strongly here (partially_enforced: fs)"),
                std::string::npos)
          << error.what();
      EXPECT_NE(std::string(error.what()).find("--allow-weaker filesystem"), std::string::npos);
    }
    EXPECT_EQ(fake->executions, 0);
    const auto actions = audit_actions();
    EXPECT_EQ(std::count(actions.begin(), actions.end(), "shell"), 1);  // the refusal
    EXPECT_EQ(audit_entries().back()["detail"], "cleaning -> finalized");
  }
  o.accept_weaker = {Dimension::Filesystem};
  Sandbox sandbox(o);
  const auto result = sandbox.execute({"true"});
  EXPECT_EQ(fake->executions, 1);
  EXPECT_EQ(result.enforcement.filesystem, EnforcementLevel::PartiallyEnforced);
}

TEST_F(SandboxTest, DefaultLimitsAreReportedButExplicitOnesRefuse) {
  auto fake = std::make_shared<FakeBackend>();
  fake->memory = EnforcementLevel::PartiallyEnforced;
  auto o = options(fake);
  {
    Sandbox sandbox(o);
    const auto result = sandbox.execute({"true"});  // default memory limit: reported only
    EXPECT_EQ(result.enforcement.limits, EnforcementLevel::PartiallyEnforced);
  }
  o.explicit_limits = {LimitKind::Memory};
  Sandbox sandbox(o);
  EXPECT_THROW(sandbox.execute({"true"}), SandboxUnsupportedPolicyError);
  o.accept_weaker = {Dimension::Limits};
  Sandbox accepting(o);
  EXPECT_NO_THROW(accepting.execute({"true"}));
}

TEST_F(SandboxTest, ShellDenyIsPolicyDenied) {
  auto fake = std::make_shared<FakeBackend>();
  auto o = options(fake);
  o.policy = ActionPolicy();  // reference defaults: SHELL denied
  Sandbox sandbox(o);
  EXPECT_THROW(sandbox.execute({"rm", "-rf", "/"}), PolicyDenied);
  EXPECT_EQ(fake->executions, 0);
}

TEST_F(SandboxTest, NetworkOrSecretsRequestedButDeniedByPolicy) {
  auto fake = std::make_shared<FakeBackend>();
  auto o = options(fake);
  o.network.mode = NetworkMode::AllowAll;
  EXPECT_THROW(Sandbox(o).execute({"curl"}), PolicyDenied);
  o.network.mode = NetworkMode::DenyAll;
  o.secret_policy.mode = SecretMode::AllowAll;
  EXPECT_THROW(Sandbox(o).execute({"env"}), PolicyDenied);
  o.policy.add_rule({ActionType::Secrets, "*", Decision::Allow, ""});
  EXPECT_NO_THROW(Sandbox(o).execute({"env"}));
  EXPECT_EQ(fake->executions, 1);
}

// Issue #19 item 7: ASK is decided by SandboxOptions::approver before the
// backend runs anything; without one, or on a denial, PolicyDenied.
TEST_F(SandboxTest, AskIsDecidedByTheApproverBeforeAnythingRuns) {
  auto fake = std::make_shared<FakeBackend>();
  auto o = options(fake);
  o.policy.add_rule({ActionType::Shell, "make *", Decision::Ask, "builds need a look"});
  EXPECT_THROW(Sandbox(o).execute({"make", "all"}), PolicyDenied);
  EXPECT_EQ(fake->executions, 0);

  std::vector<ApprovalRequest> asked;
  bool answer = false;
  std::vector<std::string> on_disk_when_asked;
  o.approver = [&](const ApprovalRequest& request) {
    asked.push_back(request);
    on_disk_when_asked = audit_actions();
    return ApprovalAnswer{answer, "unit test", "answer " + std::to_string(answer)};
  };
  EXPECT_THROW(Sandbox(o).execute({"make", "all"}), PolicyDenied);
  EXPECT_EQ(fake->executions, 0);
  answer = true;
  EXPECT_NO_THROW(Sandbox(o).execute({"make", "all"}));
  EXPECT_EQ(fake->executions, 1);
  ASSERT_EQ(asked.size(), 2u);
  // What the run recorded before the question is on disk before it is
  // asked (an approver may take its time).
  ASSERT_GE(on_disk_when_asked.size(), 2u);
  EXPECT_EQ(on_disk_when_asked.back(), "lifecycle-transition");
  EXPECT_EQ(audit_entries()[on_disk_when_asked.size() - 1]["detail"], "created -> starting");
  EXPECT_EQ(asked[1].action, ActionType::Shell);
  EXPECT_EQ(asked[1].target, "make all");
  EXPECT_EQ(asked[1].evaluation.rule->reason, "builds need a look");
  const auto request = nlohmann::json::parse(asked[1].to_json());
  EXPECT_EQ(request["decision"], "ask");
  EXPECT_EQ(request["target"], "make all");

  // A command another rule allows is not asked about.
  EXPECT_NO_THROW(Sandbox(o).execute({"ls"}));
  EXPECT_EQ(asked.size(), 2u);

  // An approver that throws denies.
  o.approver = [](const ApprovalRequest&) -> ApprovalAnswer { throw std::runtime_error("gone"); };
  EXPECT_THROW(Sandbox(o).execute({"make", "all"}), PolicyDenied);
  EXPECT_EQ(fake->executions, 2);

  std::vector<std::string> decisions;
  for (const auto& entry : audit_entries()) {
    if (entry["action"] == "approval") decisions.push_back(entry["decision"]);
  }
  EXPECT_EQ(decisions, (std::vector<std::string>{"deny", "allow", "deny"}));
}

TEST_F(SandboxTest, AskForNetworkIsDecidedByTheApprover) {
  auto fake = std::make_shared<FakeBackend>();
  auto o = options(fake);
  o.network.mode = NetworkMode::AllowAll;
  o.policy.add_rule({ActionType::Network, "*", Decision::Ask, "say why"});
  EXPECT_THROW(Sandbox(o).execute({"curl"}), PolicyDenied);
  std::optional<ActionType> asked;
  o.approver = [&](const ApprovalRequest& request) {
    asked = request.action;
    return ApprovalAnswer{true, "unit test", ""};
  };
  EXPECT_NO_THROW(Sandbox(o).execute({"curl"}));
  EXPECT_EQ(asked, ActionType::Network);
  EXPECT_EQ(fake->executions, 1);
}

// Explicit variables are the caller's choice, even those that load code;
// they are audited by name, never by value. Inherited ones stay filtered.
TEST_F(SandboxTest, ExplicitEnvironmentPassesAndIsAuditedByName) {
  auto fake = std::make_shared<FakeBackend>();
  auto o = options(fake);
  o.environment = {{"PYTHONPATH", "src-value-4711"}, {"GIT_AUTHOR_NAME", "bot"}};
  o.host_environment = std::map<std::string, std::string>{{"NODE_OPTIONS", "--inherited"}};
  o.secret_policy.mode = SecretMode::AllowAll;
  o.policy.add_rule({ActionType::Secrets, "*", Decision::Allow, ""});
  Sandbox(o).execute({"true"});
  EXPECT_EQ(fake->last_environment.at("PYTHONPATH"), "src-value-4711");
  EXPECT_EQ(fake->last_environment.at("GIT_AUTHOR_NAME"), "bot");
  EXPECT_EQ(fake->last_environment.count("NODE_OPTIONS"), 0u);
  std::set<std::string> audited;
  for (const auto& entry : audit_entries()) {
    EXPECT_EQ(entry.dump().find("src-value-4711"), std::string::npos) << entry.dump();
    if (entry["action"] == "env") audited.insert(entry["target"].get<std::string>());
  }
  EXPECT_EQ(audited, (std::set<std::string>{"GIT_AUTHOR_NAME", "PYTHONPATH"}));
  o.environment = {{"A=B", "x"}};
  EXPECT_THROW(Sandbox(o).execute({"true"}), SandboxConfigError);
}

TEST_F(SandboxTest, ReadFileChecksPolicyAndScrubs) {
  auto o = options(std::make_shared<FakeBackend>());
  write_file(dir_ / "ws/config.txt", "key=sup3r-s3cret-value\n");
  o.policy.add_rule({ActionType::Read, "private/*", Decision::Deny, "private"});
  Sandbox sandbox(o);
  EXPECT_EQ(sandbox.read_file("config.txt"), "key=[REDACTED_SECRET]\n");
  EXPECT_THROW(sandbox.read_file("private/x"), PolicyDenied);
  EXPECT_THROW(sandbox.read_file("../etc/passwd"), SandboxSecurityError);
  EXPECT_EQ(audit_entries().back()["decision"], "deny");
}

TEST_F(SandboxTest, StagingASecretIsRefused) {
  auto o = options(std::make_shared<FakeBackend>());
  o.policy.add_rule({ActionType::Write, "*", Decision::Allow, ""});
  Sandbox sandbox(o);
  const auto tx = sandbox.create_transaction();
  EXPECT_THROW(sandbox.stage_write(tx, "leak.txt", "value: sup3r-s3cret-value"),
               SandboxSecurityError);
  sandbox.stage_write(tx, "ok.txt", "fine\n");
  EXPECT_NE(sandbox.preview_changes(tx).find("+fine"), std::string::npos);
  sandbox.commit_transaction(tx);
  EXPECT_EQ(read_file(dir_ / "ws/ok.txt"), "fine\n");
}

// What a staged change replaces is kept for the diff redacted, as a run's
// import keeps it: a write over (or the delete of) a file holding the value
// showed it as the removed lines, where read_file of it is scrubbed.
TEST_F(SandboxTest, AStagedChangeOverAFileHoldingASecretShowsItRedacted) {
  auto o = options(std::make_shared<FakeBackend>());
  o.policy.add_rule({ActionType::Write, "*", Decision::Allow, ""});
  o.policy.add_rule({ActionType::Delete, "*", Decision::Allow, ""});
  write_file(dir_ / "ws/held.txt", "token=sup3r-s3cret-value\n");
  write_file(dir_ / "ws/gone.txt", "old sup3r-s3cret-value\n");
  Sandbox sandbox(o);
  const auto tx = sandbox.create_transaction();
  sandbox.stage_write(tx, "held.txt", "rotated\n");
  sandbox.stage_delete(tx, "gone.txt");
  const std::string diff = sandbox.preview_changes(tx);
  EXPECT_EQ(diff.find("sup3r-s3cret-value"), std::string::npos) << diff;
  EXPECT_NE(diff.find("-token=[REDACTED"), std::string::npos) << diff;
  EXPECT_NE(diff.find("-old [REDACTED"), std::string::npos) << diff;
}

// --- the host backend, with real processes -------------------------------

// Dead or a zombie (killed, waiting for its new parent to reap it).
bool process_gone(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] == 'Z' ||
         line[close + 2] == 'X';
}

bool wait_gone(pid_t pid) {
  for (int i = 0; i < 100; ++i) {
    if (process_gone(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class HostBackendTest : public SandboxTest {
 protected:
  SandboxOptions host_options() {
    auto o = options();
    o.backend_name = "host";
    o.unsafe_host_execution = true;
    for (Dimension d : kAllDimensions)
      o.accept_weaker.insert(d);
    return o;
  }
};

TEST_F(HostBackendTest, ExitCodeAndSeparateStreams) {
  Sandbox sandbox(host_options());
  const auto result = sandbox.execute({"sh", "-c", "echo out; echo err >&2; exit 7"});
  EXPECT_EQ(result.exit_code, 7);
  EXPECT_EQ(result.stdout_data, "out\n");
  EXPECT_EQ(result.stderr_data, "err\n");
  EXPECT_EQ(result.isolation_level, "host_unsafe");
  EXPECT_EQ(result.termination_reason, TerminationReason::None);
}

TEST_F(HostBackendTest, MinimalEnvironment) {
  ::setenv("PB_TEST_HOST_SECRET", "do-not-leak", 1);
  Sandbox sandbox(host_options());
  const auto result = sandbox.execute({"env"});
  EXPECT_EQ(result.stdout_data.find("do-not-leak"), std::string::npos);
  EXPECT_NE(result.stdout_data.find("TMPDIR=/tmp"), std::string::npos);
  ::unsetenv("PB_TEST_HOST_SECRET");
}

TEST_F(HostBackendTest, ExplicitSecretIsPassedAndScrubbed) {
  ::setenv("PB_TEST_TOKEN", "tok-1234567890", 1);
  auto o = host_options();
  o.secret_policy = {SecretMode::AllowExplicit, {"PB_TEST_TOKEN"}};
  o.policy.add_rule({ActionType::Secrets, "*", Decision::Allow, ""});
  Sandbox sandbox(o);
  const auto result = sandbox.execute({"sh", "-c", "echo \"got $PB_TEST_TOKEN\""});
  EXPECT_EQ(result.stdout_data, "got [REDACTED_SECRET]\n");
  EXPECT_EQ(read_file(dir_ / "ws/.agent/logs/audit.jsonl").find("tok-1234567890"),
            std::string::npos);
  ::unsetenv("PB_TEST_TOKEN");
}

TEST_F(HostBackendTest, TimeoutKillsTheWholeProcessGroup) {
  auto o = host_options();
  // Long enough for the shell to start its sleeper under ASan on a loaded host.
  o.limits.wall_time_seconds = 2;
  o.limits.termination_grace_seconds = 0.2;
  Sandbox sandbox(o);
  const auto pid_file = dir_ / "bg.pid";
  const auto result =
      sandbox.execute({"sh", "-c", "sleep 60 & echo $! > " + pid_file.string() + "; sleep 60"});
  EXPECT_TRUE(result.timed_out);
  EXPECT_EQ(result.termination_reason, TerminationReason::Timeout);
  EXPECT_LT(result.duration_ms, 10000);
  const std::string written = read_file(pid_file);
  ASSERT_FALSE(written.empty()) << "the command had not started its sleeper at the timeout";
  const pid_t background = std::stoi(written);
  // The background sleeper was in the run's process group: it is gone.
  EXPECT_TRUE(wait_gone(background))
      << "background process " << background << " survived the timeout";
}

TEST_F(HostBackendTest, BackgroundProcessesEndWithTheCommand) {
  Sandbox sandbox(host_options());
  const auto pid_file = dir_ / "bg.pid";
  const auto result = sandbox.execute({"sh", "-c", "sleep 60 & echo $! > " + pid_file.string()});
  EXPECT_EQ(result.exit_code, 0);
  const pid_t background = std::stoi(read_file(pid_file));
  EXPECT_TRUE(wait_gone(background)) << "background process " << background << " survived";
}

TEST_F(HostBackendTest, OutputCapTruncatesAndStops) {
  auto o = host_options();
  o.limits.max_output_bytes = 1000;
  Sandbox sandbox(o);
  const auto result = sandbox.execute({"yes"});
  EXPECT_TRUE(result.truncated);
  EXPECT_EQ(result.termination_reason, TerminationReason::OutputLimit);
  EXPECT_EQ(result.stdout_data.size(), 1000u);
}

TEST_F(HostBackendTest, LaunchErrorsAndSignals) {
  Sandbox sandbox(host_options());
  const auto missing = sandbox.execute({"/no/such/program"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_EQ(missing.termination_reason, TerminationReason::LaunchError);
  EXPECT_NE(missing.termination_detail.find("No such file"), std::string::npos);
  const auto killed = sandbox.execute({"sh", "-c", "kill -9 $$"});
  EXPECT_EQ(killed.signal, std::optional<int>(9));
  EXPECT_EQ(killed.exit_code, 137);
  EXPECT_EQ(killed.termination_reason, TerminationReason::Signal);
}

TEST_F(HostBackendTest, ChangesBecomeATransactionAndTheWorkspaceIsUntouched) {
  Sandbox sandbox(host_options());
  const auto result = sandbox.execute(
      {"sh", "-c", "echo beta > src/b.txt && echo changed > src/a.txt && pwd && echo $HOME"});
  ASSERT_TRUE(result.transaction_id.has_value()) << result.termination_detail;
  EXPECT_EQ(read_file(dir_ / "ws/src/a.txt"), "alpha\n");
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ws/src/b.txt"));
  ASSERT_EQ(result.changes.size(), 2u);
  EXPECT_EQ(result.changes[0].path, "src/a.txt");
  EXPECT_EQ(result.changes[0].kind, ChangeKind::Modified);
  EXPECT_EQ(result.changes[1].kind, ChangeKind::Added);
  sandbox.commit_transaction(*result.transaction_id);
  EXPECT_EQ(read_file(dir_ / "ws/src/a.txt"), "changed\n");
  // The run's private copy is gone after the run.
  EXPECT_FALSE(std::filesystem::exists(dir_ / "ws/.agent/runs") &&
               !std::filesystem::is_empty(dir_ / "ws/.agent/runs"));
}

TEST_F(HostBackendTest, HomeIsAPrivateDirectoryOutsideTheWorkspaceCopy) {
  Sandbox sandbox(host_options());
  const auto result =
      sandbox.execute({"sh", "-c", "test -d \"$HOME\" && echo x > \"$HOME/.dotfile\""});
  EXPECT_EQ(result.exit_code, 0) << result.stderr_data;
  EXPECT_FALSE(result.transaction_id.has_value()) << "a dotfile became a change";
}

TEST_F(HostBackendTest, ChangesCommitAndDiscardModes) {
  auto o = host_options();
  o.changes = ChangesMode::Commit;
  {
    Sandbox sandbox(o);
    sandbox.execute({"sh", "-c", "echo committed > out.txt"});
  }
  EXPECT_EQ(read_file(dir_ / "ws/out.txt"), "committed\n");
  o.changes = ChangesMode::Discard;
  Sandbox sandbox(o);
  const auto result = sandbox.execute({"sh", "-c", "echo discarded > out.txt"});
  EXPECT_EQ(read_file(dir_ / "ws/out.txt"), "committed\n");
  EXPECT_TRUE(sandbox.workspace().list_transactions().empty());
  EXPECT_TRUE(result.transaction_id.has_value());
}

}  // namespace
}  // namespace pulsebox
