// The native backend, for real: a static probe runs inside the sandbox and
// reports what it sees. Runs as root (an unprivileged id range, idmapped
// workspace) and as an ordinary user (one mapped id); CI does both.
#include <dirent.h>
#include <seccomp.h>
#include <sys/file.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fcntl.h>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "backends/native/probe.h"
#include "helpers/cli_runner.h"
#include "helpers/test_support.h"
#include "linux/cgroup.h"
#include "linux/userns.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"
#include "seccomp/profile.h"

namespace pulsebox {
namespace {

using testing::TempDir;
namespace fs = std::filesystem;

using testing::parse_report;
using testing::processes_with_marker;

class NativeBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto backend = make_native_backend(native_options());
    const Availability availability = backend->availability();
    PULSEBOX_SKIP_UNLESS(availability.available, availability.reason);
    const char* probe = std::getenv("PULSEBOX_PROBE");
    ASSERT_NE(probe, nullptr) << "PULSEBOX_PROBE is set by meson";
    fs::copy_file(probe, workspace_ / "probe");
    fs::permissions(workspace_ / "probe", fs::perms(0755));
    testing::write_file(workspace_ / "a.txt", "original\n");
  }

  NativeBackendOptions native_options() {
    NativeBackendOptions options;
    options.state_dir = state_.path();
    return options;
  }

  SandboxOptions options() {
    SandboxOptions o;
    o.workspace = workspace_.path();
    o.policy.add_rule({ActionType::Shell, "*", Decision::Allow, "test"});
    o.backend = make_native_backend(native_options());
    // Limits are strong only with cgroups (root, or a delegated cgroup: the
    // cgroup suite); everything else must be strong here.
    o.accept_weaker = {Dimension::Limits};
    return o;
  }

  ProcessResult run(Sandbox& sandbox, const std::vector<std::string>& argv,
                    ExecuteOptions execute = {}) {
    return sandbox.execute(argv, execute);
  }

  TempDir workspace_;
  TempDir state_;
};

// The host probe (a clone with every namespace) is remembered per boot in
// the state directory; a memo that does not match, or that others could
// write, is never trusted: the probe runs again and rewrites it.
TEST_F(NativeBackendTest, TheHostProbeIsRememberedOnlyInAMatchingOwnFile) {
  const fs::path memo = state_.path() / "host-probe";
  const auto first = backends::native::remembered_or_fresh_probe(state_.path());
  ASSERT_TRUE(first.namespaces_ok) << first.namespaces_reason;
  const std::string remembered = testing::read_file(memo);
  EXPECT_EQ(remembered.rfind("namespaces ok, boot ", 0), 0u) << remembered;
  EXPECT_EQ(fs::status(memo).permissions(), fs::perms::owner_read | fs::perms::owner_write);

  testing::write_file(memo, "namespaces ok, boot of another day\n");
  EXPECT_TRUE(backends::native::remembered_or_fresh_probe(state_.path()).namespaces_ok);
  EXPECT_EQ(testing::read_file(memo), remembered);

  // Group-writable: someone else could have written it. Probed and rewritten 0600.
  fs::permissions(memo, fs::perms::group_write, fs::perm_options::add);
  EXPECT_TRUE(backends::native::remembered_or_fresh_probe(state_.path()).namespaces_ok);
  EXPECT_EQ(fs::status(memo).permissions(), fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(testing::read_file(memo), remembered);
}

TEST_F(NativeBackendTest, TheProbeSeesAnIsolatedUnprivilegedSandbox) {
  Sandbox sandbox(options());
  const std::string home = std::getenv("HOME") != nullptr ? std::getenv("HOME") : "/root";
  const auto result = run(sandbox, {"/workspace/probe", "report", home, home + "/.ssh",
                                    workspace_.path().string(), state_.path().string(), "/home"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  auto seen = parse_report(result.stdout_data);
  EXPECT_EQ(seen["pid"], "2") << "init is pid 1, the command pid 2";
  EXPECT_EQ(seen["ppid"], "1");
  EXPECT_EQ(seen["uid"], "1000");
  EXPECT_EQ(seen["gid"], "1000");
  EXPECT_EQ(seen["hostname"], "pulsebox");
  for (const char* set : {"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"}) {
    EXPECT_EQ(seen[set], "0000000000000000") << set;
  }
  EXPECT_EQ(seen["NoNewPrivs"], "1");
  std::istringstream points(seen["mount_points"]);
  std::string point;
  int mounts = 0;
  while (points >> point) {
    ++mounts;
    if (point == "/home/sandbox") continue;  // HOME: a private tmpfs, no host directory
    for (const char* host_only :
         {"/home", "/root", "/var", "/run", "/sys", "/boot", "/mnt", "/media", "/srv", "/opt"}) {
      EXPECT_NE(point.rfind(host_only, 0), 0u) << "host mount visible: " << point;
    }
  }
  EXPECT_GT(mounts, 5);
  // Masks are binds of read-only sources: read-only, nosuid, nodev themselves.
  for (const char* masked : {"/etc/shadow", "/proc/keys", "/proc/timer_list", "/proc/kallsyms",
                             "/proc/acpi", "/proc/sys", "/"}) {
    const std::string options = seen[std::string("mount_options ") + masked];
    if (options.empty()) continue;  // not here
    EXPECT_EQ(options.rfind("ro,", 0), 0u) << masked << ": " << options;
    EXPECT_NE(options.find("nosuid"), std::string::npos) << masked << ": " << options;
    EXPECT_NE(options.find("nodev"), std::string::npos) << masked << ": " << options;
  }
  EXPECT_EQ(seen["root_fs"], "tmpfs");
  EXPECT_EQ(seen["workspace_fs"], "overlay");
  EXPECT_EQ(seen["tmp_fs"], "tmpfs");
  EXPECT_EQ(seen["proc_fs"], "proc");
  EXPECT_EQ(seen["shadow"], "EACCES");
  EXPECT_EQ(seen["etc_passwd_readable"], "ok");
  // /home holds only the sandbox's own HOME (a tmpfs, checked above).
  for (const std::string& hidden :
       {home, home + "/.ssh", workspace_.path().string(), state_.path().string()}) {
    EXPECT_EQ(seen["host_path " + hidden], "ENOENT") << hidden;
  }
  EXPECT_EQ(seen["write_usr"], "EROFS");
  EXPECT_EQ(seen["write_etc"], "EROFS");
  EXPECT_EQ(seen["write_root"], "EROFS");
  EXPECT_EQ(seen["write_tmp"], "ok");
  EXPECT_EQ(seen["write_workspace"], "ok");
  EXPECT_NE(seen["proc_sys_write"], "ok");
  EXPECT_NE(seen["kcore"], "ok");
  EXPECT_EQ(seen["agent_dir"], "absent")
      << "the audit log and transactions stay hidden: not even an empty mount point";
  EXPECT_EQ(seen["interfaces"], "lo");
  EXPECT_EQ(seen["lo_up"], "1");
  EXPECT_EQ(seen["extra_fds"], "0");
  EXPECT_EQ(seen["sid_is_self"], "1");

  // The write landed in a transaction only.
  EXPECT_FALSE(fs::exists(workspace_ / "probe-new.txt"));
  ASSERT_TRUE(result.transaction_id.has_value());
  ASSERT_EQ(result.changes.size(), 1u);
  EXPECT_EQ(result.changes[0].path, "probe-new.txt");
  EXPECT_EQ(result.changes[0].kind, ChangeKind::Added);
  sandbox.commit_transaction(*result.transaction_id);
  EXPECT_EQ(testing::read_file(workspace_ / "probe-new.txt"), "written by the probe\n");
}

TEST_F(NativeBackendTest, WorkspaceEditsDeletesAndModesBecomeOneTransaction) {
  testing::write_file(workspace_ / "dir/keep.txt", "keep\n");
  testing::write_file(workspace_ / "gone.txt", "bye\n");
  auto o = options();
  o.changes = ChangesMode::Commit;
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"sh", "-c",
                                    "echo more >> a.txt && rm gone.txt && mkdir -p new/deep && "
                                    "echo n > new/deep/n.txt && chmod 700 dir/keep.txt"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "original\nmore\n");
  EXPECT_FALSE(fs::exists(workspace_ / "gone.txt"));
  EXPECT_EQ(testing::read_file(workspace_ / "new/deep/n.txt"), "n\n");
  EXPECT_EQ(fs::status(workspace_ / "dir/keep.txt").permissions() & fs::perms::all,
            fs::perms(0700));
}

// Read-only directories the run made (a Go module cache's are) commit with
// their modes, as root and as an ordinary user, whether moved in whole
// (files only) or entry by entry (a symlink in it): the files kept in place
// are renamed out of them.
TEST_F(NativeBackendTest, ReadOnlyDirectoriesTheRunMadeAreCommitted) {
  auto o = options();
  o.changes = ChangesMode::Commit;
  Sandbox sandbox(std::move(o));
  const auto result =
      run(sandbox, {"sh", "-c",
                    "mkdir -p whole/sub linked && echo w > whole/sub/w.txt && echo l > "
                    "linked/l.txt && ln -s l.txt linked/to-l && chmod 555 whole/sub linked && "
                    "chmod 500 whole"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(result.changes_status.outcome, ChangesOutcome::Committed)
      << result.changes_status.detail;
  EXPECT_EQ(testing::read_file(workspace_ / "whole/sub/w.txt"), "w\n");
  EXPECT_EQ(testing::read_file(workspace_ / "linked/l.txt"), "l\n");
  EXPECT_EQ(fs::read_symlink(workspace_ / "linked/to-l"), "l.txt");
  EXPECT_EQ(fs::status(workspace_ / "whole").permissions() & fs::perms::all, fs::perms(0500));
  EXPECT_EQ(fs::status(workspace_ / "whole/sub").permissions() & fs::perms::all, fs::perms(0555));
  EXPECT_EQ(fs::status(workspace_ / "linked").permissions() & fs::perms::all, fs::perms(0555));
  for (const char* dir : {"whole/sub", "whole", "linked"})  // the fixture's directory goes
    fs::permissions(workspace_ / dir, fs::perms(0700));
}

TEST_F(NativeBackendTest, AHostEditDuringTheRunIsNeverOverwrittenByItsCommit) {
  testing::write_file(workspace_ / "b.txt", "b\n");
  Sandbox sandbox(options());
  // The command edits a.txt and b.txt at once and says so; then the user
  // edits a.txt on the host (output arrives during the run, before its
  // changes are imported).
  ExecuteOptions execute;
  std::string seen;
  execute.on_output = [&](OutputStream, std::string_view text) {
    seen += text;
    if (seen == "edited\n") testing::write_file(workspace_ / "a.txt", "the user's edit\n");
  };
  const auto result =
      run(sandbox, {"sh", "-c", "echo run >> a.txt && echo run >> b.txt && echo edited"}, execute);
  ASSERT_EQ(seen, "edited\n");
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data;
  ASSERT_TRUE(result.transaction_id.has_value());
  try {
    sandbox.commit_transaction(*result.transaction_id);
    FAIL() << "the commit would have overwritten the user's edit";
  } catch (const SandboxConcurrentModificationError& error) {
    EXPECT_NE(std::string(error.what()).find("a.txt: changed on the host while the run"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(std::string(error.what()).find("b.txt"), std::string::npos) << error.what();
  }
  EXPECT_EQ(testing::read_file(workspace_ / "a.txt"), "the user's edit\n");
}

// Kernels before 5.3 have no clone3: the launcher falls back to clone(). A
// seccomp filter in a child process makes clone3 fail with ENOSYS there.
TEST_F(NativeBackendTest, WithoutClone3TheLauncherFallsBackToClone) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    scmp_filter_ctx filter = ::seccomp_init(SCMP_ACT_ALLOW);
    if (filter == nullptr ||
        ::seccomp_rule_add(filter, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0) != 0 ||
        ::seccomp_load(filter) != 0) {
      ::_exit(90);
    }
    if (::syscall(SYS_clone3, nullptr, 0) != -1 || errno != ENOSYS) ::_exit(91);
    try {
      Sandbox sandbox(options());
      const auto result = sandbox.execute({"/workspace/probe", "report"});
      const auto seen = parse_report(result.stdout_data);
      ::_exit(result.exit_code == 0 && seen.at("pid") == "2" && seen.at("uid") == "1000" ? 0 : 92);
    } catch (...) {
      ::_exit(93);
    }
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "90: filter, 91: clone3 still works, 92: wrong sandbox, "
                                       "93: the run threw";
}

// --- seccomp -------------------------------------------------------------

std::map<std::string, std::string> syscall_results(const std::string& report) {
  std::map<std::string, std::string> out;
  for (const auto& [key, value] : parse_report(report)) {
    if (key.rfind("syscall ", 0) == 0) out[key.substr(8)] = value;
  }
  return out;
}

TEST_F(NativeBackendTest, TheDefaultProfileDeniesEveryDangerousCallWithEperm) {
  Sandbox sandbox(options());
  const auto result = run(sandbox, {"/workspace/probe", "syscalls"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(result.enforcement.syscalls, EnforcementLevel::StronglyEnforced);
  const auto seen = syscall_results(result.stdout_data);
  ASSERT_GE(seen.size(), 45u);
  for (const auto& [name, outcome] : seen) {
    EXPECT_EQ(outcome, name == "clone3" ? "ENOSYS" : "EPERM") << name;
  }
}

TEST_F(NativeBackendTest, DeniedCallsReturnTheErrnoTheProfileConfigures) {
  // The default profile with errnoRet 42 (ENOMSG) on its deny rules: proof
  // that the filter answers, not the kernel.
  auto profile = seccomp::load_profile("default");
  ASSERT_TRUE(profile.ok());
  std::string text = profile->text;
  const std::string from = "\"errnoRet\": 1";
  int replaced = 0;
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + 1)) {
    if (std::isdigit(static_cast<unsigned char>(text[at + from.size()]))) continue;
    text.replace(at, from.size(), "\"errnoRet\": 42");
    ++replaced;
  }
  ASSERT_GT(replaced, 5);
  TempDir dir;
  testing::write_file(dir / "enomsg.json", text);
  auto o = options();
  o.seccomp_profile = (dir / "enomsg.json").string();
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"/workspace/probe", "syscalls"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  for (const auto& [name, outcome] : syscall_results(result.stdout_data)) {
    // Not matched by an allow rule's condition: the profile's default errno.
    const bool by_default = name == "clone(CLONE_NEWUSER)" || name == "ioctl(TIOCSTI)" ||
                            name.rfind("personality", 0) == 0;
    EXPECT_EQ(outcome, name == "clone3" ? "ENOSYS" : by_default ? "EPERM" : "ENOMSG") << name;
  }
}

TEST_F(NativeBackendTest, AKillActionEndsTheSandboxAndNamesTheSyscall) {
  auto o = options();
  o.seccomp_profile = "strict";
  Sandbox sandbox(std::move(o));
  const std::string marker = "pulsebox-seccomp-" + std::to_string(::getpid());
  const auto result = run(
      sandbox, {"sh", "-c",
                "/workspace/probe daemon " + marker + "; /workspace/probe syscalls; echo after"});
  EXPECT_EQ(result.termination_reason, TerminationReason::Seccomp);
  EXPECT_EQ(result.signal, std::optional<int>(SIGSYS));
  EXPECT_NE(result.termination_detail.find("strict does not allow mount"), std::string::npos)
      << result.termination_detail;
  EXPECT_EQ(result.stdout_data.find("after"), std::string::npos) << "the sandbox went on";
  EXPECT_EQ(processes_with_marker(marker), 0);
}

TEST_F(NativeBackendTest, AUserSuppliedDockerProfileIsEnforced) {
  TempDir dir;
  testing::write_file(dir / "docker.json", R"({
  "defaultAction": "SCMP_ACT_ALLOW",
  "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
  "syscalls": [
    {"names": ["mkdir", "mkdirat"], "action": "SCMP_ACT_ERRNO", "errnoRet": 13,
     "comment": "no new directories"},
    {"names": ["uname"], "action": "SCMP_ACT_ERRNO", "errnoRet": 1,
     "includes": {"caps": ["CAP_SYS_ADMIN"]}, "comment": "only with a capability: dropped"},
    {"names": ["getpriority"], "action": "SCMP_ACT_KILL", "args": [
      {"index": 0, "value": 0, "valueTwo": 0, "op": "SCMP_CMP_EQ"}]}
  ]
})");
  auto o = options();
  o.seccomp_profile = (dir / "docker.json").string();
  Sandbox sandbox(std::move(o));
  auto result = run(sandbox, {"sh", "-c", "uname -s; mkdir d 2>&1; echo done"});
  EXPECT_EQ(result.exit_code, 0) << result.stderr_data;
  EXPECT_NE(result.stdout_data.find("Linux\n"), std::string::npos) << result.stdout_data;
  EXPECT_NE(result.stdout_data.find("Permission denied"), std::string::npos) << result.stdout_data;
  EXPECT_FALSE(result.transaction_id.has_value()) << "mkdir was refused, nothing changed";
  result = run(sandbox, {"nice", "-n", "1", "true"});  // nice reads getpriority(PRIO_PROCESS)
  EXPECT_EQ(result.termination_reason, TerminationReason::Seccomp);
  EXPECT_NE(result.termination_detail.find("does not allow getpriority"), std::string::npos)
      << result.termination_detail;
}

TEST_F(NativeBackendTest, TheThirtyTwoBitEntryPointIsClosed) {
  Sandbox sandbox(options());
  const auto result = run(sandbox, {"/workspace/probe", "int80"});
  // Killed by the filter (SIGSYS), or the kernel has no 32-bit emulation
  // (SIGSEGV); never a working 32-bit getpid.
  ASSERT_TRUE(result.signal.has_value()) << result.stdout_data;
  EXPECT_TRUE(*result.signal == SIGSYS || *result.signal == SIGSEGV) << *result.signal;
  if (*result.signal == SIGSYS) {
    EXPECT_EQ(result.termination_reason, TerminationReason::Seccomp);
  }
}

TEST_F(NativeBackendTest, TheDefaultProfileRunsARealToolchain) {
  testing::write_file(workspace_ / "hello.c",
                      "#include <stdio.h>\nint main(void) { puts(\"hello from c\"); return 0; }\n");
  testing::write_file(workspace_ / "Makefile",
                      "all: hello\nhello: hello.c\n\tcc -O1 -o hello hello.c\n");
  testing::write_file(workspace_ / "tool.py",
                      "import json, subprocess\n"
                      "print(json.dumps({'sum': sum(range(10))}))\n");
  Sandbox sandbox(options());
  const auto result = run(
      sandbox,
      {"sh", "-c",
       "set -e; make -s && ./hello && printf 'b\\na\\nb\\n' | sort | uniq -c | tr -s ' ' && "
       "python3 tool.py && git init -q repo && cd repo && echo x > f && git add f && "
       "git -c user.name=p -c user.email=p@example.invalid commit -qm first && git log --oneline "
       "| wc -l && echo '#include <vector>\nint main(){std::vector<int> v(3);return "
       "(int)v.size()-3;}' "
       "> t.cc && c++ -o /tmp/t t.cc && /tmp/t && echo c++ ok"});
  ASSERT_EQ(result.exit_code, 0) << result.stdout_data << result.stderr_data
                                 << result.termination_detail;
  EXPECT_NE(result.stdout_data.find("hello from c\n"), std::string::npos) << result.stdout_data;
  EXPECT_NE(result.stdout_data.find(" 1 a\n 2 b\n"), std::string::npos) << result.stdout_data;
  EXPECT_NE(result.stdout_data.find("{\"sum\": 45}\n"), std::string::npos) << result.stdout_data;
  EXPECT_NE(result.stdout_data.find("\n1\n"), std::string::npos) << "one git commit";
  EXPECT_NE(result.stdout_data.find("c++ ok\n"), std::string::npos) << result.stdout_data;
}

TEST_F(NativeBackendTest, AnInvalidProfileIsRefusedBeforeAnythingRuns) {
  TempDir dir;
  testing::write_file(dir / "bad.json",
                      "{\n  \"defaultAction\": \"SCMP_ACT_ALLOW\",\n"
                      "  \"syscalls\": [{\"names\": [\"read\"], \"action\": "
                      "\"SCMP_ACT_ERRNO\", \"args\": [{\"index\": 9, "
                      "\"value\": 0, \"op\": \"SCMP_CMP_EQ\"}]}]\n}\n");
  auto o = options();
  o.seccomp_profile = (dir / "bad.json").string();
  try {
    Sandbox sandbox(std::move(o));
    FAIL() << "an invalid profile was accepted";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(
        std::string(error.what()).find("bad.json:3: syscalls[0].args[0].index: expected 0 to 5"),
        std::string::npos)
        << error.what();
  }
}

TEST_F(NativeBackendTest, AnAuditLogKeptInTheWorkspaceIsHidden) {
  auto o = options();
  o.audit_log_path = workspace_ / "logs/audit.jsonl";
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"sh", "-c", "cat logs/audit.jsonl | wc -c"});
  EXPECT_EQ(result.stdout_data, "0\n") << result.stderr_data;
  EXPECT_GT(fs::file_size(workspace_ / "logs/audit.jsonl"), 0u);
}

// The ids mapped inside: one for an ordinary user by default, 65536 as root
// and with subordinate ids (newuidmap, /etc/subuid).
std::uint64_t mapped_ids(const std::string& uid_map) {
  std::uint64_t total = 0;
  std::istringstream lines(uid_map);
  std::uint64_t inside = 0, outside = 0, count = 0;
  while (lines >> inside >> outside >> count)
    total += count;
  return total;
}

TEST_F(NativeBackendTest, IdMapsAreOneIdRootlessAndARangeAsRootOrWithSubordinateIds) {
  Sandbox plain(options());
  auto result = run(plain, {"cat", "/proc/self/uid_map"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(mapped_ids(result.stdout_data), ::geteuid() == 0 ? 65536u : 1u) << result.stdout_data;

  if (::geteuid() != 0) {
    const bool has_range = linux_api::own_subordinate_id_base("/etc/subuid", 65535).has_value() &&
                           linux_api::own_subordinate_id_base("/etc/subgid", 65535).has_value() &&
                           ::access(linux_api::kNewUidMap, X_OK) == 0;
    PULSEBOX_SKIP_UNLESS(has_range, "newuidmap and an /etc/subuid range for this user");
  }
  auto o = options();
  auto native = native_options();
  native.subordinate_ids = true;
  o.backend = make_native_backend(native);
  Sandbox ranged(std::move(o));
  result = run(ranged, {"sh", "-c", "cat /proc/self/uid_map; id -u; id -G; echo w > w.txt"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(mapped_ids(result.stdout_data), 65536u) << result.stdout_data;
  EXPECT_NE(result.stdout_data.find("\n1000\n1000\n"), std::string::npos)
      << "uid 1000 and no supplementary groups: " << result.stdout_data;
  ASSERT_EQ(result.changes.size(), 1u);

  // The same from the command line.
  const auto cli = testing::run_cli({"run", "-w", workspace_.path().string(), "--subordinate-ids",
                                     "--json", "--", "cat", "/proc/self/uid_map"},
                                    "", {"PULSEBOX_STATE_DIR=" + state_.path().string()});
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_EQ(mapped_ids(nlohmann::json::parse(cli.out)["stdout"].get<std::string>()), 65536u);
}

TEST_F(NativeBackendTest, ADaemonDoesNotOutliveTheRun) {
  Sandbox sandbox(options());
  const std::string marker = "pulsebox-daemon-" + std::to_string(::getpid());
  const auto result = run(sandbox, {"/workspace/probe", "daemon", marker});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_NE(result.stdout_data.find("daemon=started"), std::string::npos);
  EXPECT_EQ(processes_with_marker(marker), 0) << "the double-forked sleeper survived the run";
}

// This process's children that have exited and wait to be reaped.
int zombie_children() {
  int zombies = 0;
  const std::string self = std::to_string(::getpid());
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = testing::read_file(entry.path() / "stat");
    const auto end = stat.rfind(')');
    if (end == std::string::npos || end + 4 > stat.size()) continue;
    std::istringstream fields(stat.substr(end + 2));
    std::string state, ppid;
    fields >> state >> ppid;
    if (state == "Z" && ppid == self) ++zombies;
  }
  return zombies;
}

// The user namespace of an idmapped workspace (root) is made by a helper
// process that is not waited for on the run's path: its stack stays mapped
// until it is reaped, once the command is started (or by the teardown). No
// zombie is left while the sandbox lives on.
TEST_F(NativeBackendTest, TheIdmappingHelperIsReapedWhileTheSandboxLives) {
  Sandbox sandbox(options());
  for (int i = 0; i < 2; ++i) {
    const auto result = run(sandbox, {"/bin/true"});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(zombie_children(), 0);
}

// Maps that any user may write for a namespace of its own: root inside is
// this process's uid and gid.
linux_api::IdMaps own_id_as_root() {
  linux_api::IdMaps maps;
  maps.uids = {{0, static_cast<std::uint32_t>(::getuid()), 1}};
  maps.gids = {{0, static_cast<std::uint32_t>(::getgid()), 1}};
  maps.deny_setgroups = ::getuid() != 0;
  return maps;
}

// A mapping namespace outlives its helper; the helper, told to exit, is
// reaped by try_reap() once it has, and a helper still running is waited
// for when destroyed (never unmapping the stack it runs on).
TEST(MappingNamespace, OutlivesItsHelperWhichIsReapedAfterItExits) {
  const linux_api::IdMaps maps = own_id_as_root();
  auto made = linux_api::create_mapping_namespace(maps);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  std::error_code ec;
  const auto ns = fs::read_symlink("/proc/self/fd/" + std::to_string(made->ns.get()), ec).string();
  EXPECT_EQ(ns.rfind("user:[", 0), 0u) << ns;
  EXPECT_NE(ns, fs::read_symlink("/proc/self/ns/user", ec).string()) << "a namespace of its own";
  bool reaped = false;
  for (int i = 0; i < 500 && !reaped; ++i) {
    reaped = made->helper.try_reap();
    if (!reaped) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_TRUE(reaped) << "the helper did not exit within a second";
  EXPECT_TRUE(made->helper.try_reap()) << "reaped once, nothing left to reap";
  EXPECT_EQ(fs::read_symlink("/proc/self/fd/" + std::to_string(made->ns.get()), ec).string(), ns)
      << "the namespace lives on without its helper";
  {
    auto another = linux_api::create_mapping_namespace(maps);
    ASSERT_TRUE(another.ok()) << another.error().to_string();
  }  // destroyed at once: waits for its helper
  EXPECT_EQ(zombie_children(), 0);
}

// An embedder's own SIGCHLD handler may reap every child (waitpid(-1)),
// the helper included: reaping it again then finds it gone, and never
// waits for another process that was given its pid.
TEST(MappingNamespace, AHelperSomeoneElseReapedIsGoneNotWaitedFor) {
  const linux_api::IdMaps maps = own_id_as_root();
  auto made = linux_api::create_mapping_namespace(maps);
  ASSERT_TRUE(made.ok()) << made.error().to_string();
  pid_t reaped = 0;
  for (int i = 0; i < 500 && reaped <= 0; ++i) {
    int status = 0;
    reaped = ::waitpid(-1, &status, WNOHANG | __WALL);
    if (reaped <= 0) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_GT(reaped, 0) << "the helper did not exit within a second";
  EXPECT_TRUE(made->helper.try_reap()) << "gone: another waiter reaped it";
}

TEST_F(NativeBackendTest, TheTimeoutKillsTheWholeSandbox) {
  auto o = options();
  o.limits.wall_time_seconds = 1;
  o.limits.termination_grace_seconds = 0.5;
  Sandbox sandbox(std::move(o));
  const std::string marker = "pulsebox-timeout-" + std::to_string(::getpid());
  const auto started = std::chrono::steady_clock::now();
  const auto result =
      run(sandbox, {"sh", "-c", "/workspace/probe daemon " + marker + " && exec sleep 60"});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_EQ(result.termination_reason, TerminationReason::Timeout);
  EXPECT_TRUE(result.timed_out);
  EXPECT_LT(seconds, 20) << "the run outlived its deadline by far";
  EXPECT_EQ(processes_with_marker(marker), 0);
}

TEST_F(NativeBackendTest, ExitStatusAndSignalsComeThrough) {
  Sandbox sandbox(options());
  auto exited = run(sandbox, {"sh", "-c", "exit 7"});
  EXPECT_EQ(exited.exit_code, 7);
  EXPECT_EQ(exited.termination_reason, TerminationReason::None);
  auto killed = run(sandbox, {"sh", "-c", "kill -KILL $$"});
  EXPECT_EQ(killed.signal, std::optional<int>(9));
  EXPECT_EQ(killed.exit_code, 137);
  EXPECT_EQ(killed.termination_reason, TerminationReason::Signal);
  auto output = run(sandbox, {"sh", "-c", "echo out; echo err >&2"});
  EXPECT_EQ(output.stdout_data, "out\n");
  EXPECT_EQ(output.stderr_data, "err\n");
}

TEST_F(NativeBackendTest, TheOutputCapStopsTheSandbox) {
  auto o = options();
  o.limits.max_output_bytes = 4096;
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"sh", "-c", "while :; do echo aaaaaaaaaaaaaaaa; done"});
  EXPECT_TRUE(result.truncated);
  EXPECT_EQ(result.termination_reason, TerminationReason::OutputLimit);
  EXPECT_EQ(result.stdout_data.size(), 4096u);
}

TEST_F(NativeBackendTest, ProcessLimitHoldsForTheWholeSandbox) {
  auto o = options();
  o.limits.max_processes = 8;
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"/workspace/probe", "forks", "40"});
  ASSERT_EQ(result.exit_code, 0) << result.stderr_data;
  const auto seen = parse_report(result.stdout_data);
  EXPECT_LE(std::stoi(seen.at("forked")), 8);
  EXPECT_EQ(seen.at("fork_error"), "EAGAIN");
}

TEST_F(NativeBackendTest, LocalhostModeHasAWorkingLoopbackAndNothingElse) {
  auto o = options();
  o.network.mode = NetworkMode::LocalhostOnly;
  o.policy.add_rule({ActionType::Network, "*", Decision::Allow, "test"});
  Sandbox sandbox(std::move(o));
  const auto result = run(sandbox, {"/workspace/probe", "loopback"});
  EXPECT_EQ(parse_report(result.stdout_data)["loopback"], "ok") << result.stdout_data;
  const auto report = run(sandbox, {"/workspace/probe", "report"});
  EXPECT_EQ(parse_report(report.stdout_data)["interfaces"], "lo");
}

TEST_F(NativeBackendTest, EachLaunchFailureNamesItsStage) {
  Sandbox sandbox(options());
  const auto missing = run(sandbox, {"no-such-command-here"});
  EXPECT_EQ(missing.termination_reason, TerminationReason::LaunchError);
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.termination_detail.find("cannot execute no-such-command-here: ENOENT"),
            std::string::npos)
      << missing.termination_detail;

  const auto not_executable = run(sandbox, {"/workspace/a.txt"});
  EXPECT_EQ(not_executable.exit_code, 126);
  EXPECT_NE(not_executable.termination_detail.find("EACCES"), std::string::npos)
      << not_executable.termination_detail;

  // A directory the sandbox user may not enter.
  fs::create_directory(workspace_ / "locked");
  fs::permissions(workspace_ / "locked", fs::perms::none);
  ExecuteOptions execute;
  execute.cwd = "locked";
  const auto bad_cwd = run(sandbox, {"true"}, execute);
  fs::permissions(workspace_ / "locked", fs::perms(0755));
  EXPECT_EQ(bad_cwd.termination_reason, TerminationReason::LaunchError);
  EXPECT_EQ(bad_cwd.exit_code, 125);
  EXPECT_NE(bad_cwd.termination_detail.find(
                "changing to the working directory /workspace/locked: EACCES"),
            std::string::npos)
      << bad_cwd.termination_detail;

  // A base mount (made while the supervisor still prepares the staging
  // directory): a directory bind under a file bind. init has ended when the
  // supervisor hands it the rest of the plan; its own error is reported.
  TempDir sources;
  fs::permissions(sources.path(), fs::perms(0755));  // init is "other" to host files
  testing::write_file(sources / "file", "x");
  fs::create_directory(sources / "dir");
  auto clashing = options();
  clashing.binds = {{sources / "file", "/data", false}, {sources / "dir", "/data/sub", false}};
  Sandbox clash(std::move(clashing));
  const auto base_mount = run(clash, {"true"});
  EXPECT_EQ(base_mount.termination_reason, TerminationReason::LaunchError);
  EXPECT_EQ(base_mount.exit_code, 125);
  EXPECT_NE(base_mount.termination_detail.find("creating /data/sub: ENOTDIR"), std::string::npos)
      << base_mount.termination_detail;

  // A setup step in the child: the kernel refuses a 100-character hostname.
  auto o = options();
  auto native = native_options();
  native.hostname = std::string(100, 'h');
  o.backend = make_native_backend(native);
  Sandbox long_name(std::move(o));
  const auto hostname = run(long_name, {"true"});
  EXPECT_EQ(hostname.termination_reason, TerminationReason::LaunchError);
  EXPECT_EQ(hostname.exit_code, 125);
  EXPECT_NE(hostname.termination_detail.find("setting the hostname: EINVAL"), std::string::npos)
      << hostname.termination_detail;
}

TEST_F(NativeBackendTest, AStagingAreaInsideTheWorkspaceIsRefused) {
  auto o = options();
  auto native = native_options();
  native.state_dir = workspace_ / "state";
  o.backend = make_native_backend(native);
  Sandbox overlapping(std::move(o));
  try {
    overlapping.execute({"true"});
    FAIL() << "a state directory inside the workspace was accepted";
  } catch (const SandboxConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("inside the workspace"), std::string::npos)
        << error.what();
  }
}

// The facade prepares each run before its last checks (the sandbox is set
// up meanwhile): a run refused then starts nothing and leaves nothing.
TEST_F(NativeBackendTest, ARunRefusedAfterItWasPreparedStartsNothingAndLeavesNothing) {
  auto o = options();
  o.accept_weaker.clear();           // limits may be weaker here: that alone refuses it
  o.seccomp_profile = "unconfined";  // not accepted: refused whatever the limits
  {
    Sandbox sandbox(std::move(o));
    EXPECT_THROW(run(sandbox, {"sh", "-c", "echo ran > ran.txt"}), SandboxUnsupportedPolicyError);
  }
  EXPECT_FALSE(fs::exists(workspace_ / "ran.txt"));
  int left = 0;
  for (const auto& entry : fs::directory_iterator(state_.path() / "runs")) {
    ++left;
    ADD_FAILURE() << "left behind: " << entry.path();
  }
  EXPECT_EQ(left, 0);
  // Its cgroup went too.
  for (const auto& dir : {"/sys/fs/cgroup/unified/pulsebox", "/sys/fs/cgroup/memory/pulsebox"}) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      EXPECT_EQ(entry.path().filename().string().find("sandbox-" + std::string("run-")),
                std::string::npos)
          << entry.path() << " (is another run going on?)";
    }
  }
}

// execute() goes on from the run prepare() set up; a prepared run that is
// never executed is torn down when it is dropped, so that another run with
// the same id does not wait for its lock.
TEST_F(NativeBackendTest, APreparedRunGoesOnInExecuteOrIsTornDownWhenDropped) {
  auto backend = make_native_backend(native_options());
  ExecutionRequest request;
  request.argv = {"sh", "-c", "echo prepared"};
  request.workspace = workspace_.path();
  request.environment = {{"PATH", "/usr/bin:/bin"}};
  request.execution_id = "run-prepared";
  std::string out;
  request.on_output = [&](OutputStream, std::string_view text) { out += text; };
  auto dropped = backend->prepare(request);
  ASSERT_NE(dropped, nullptr);
  EXPECT_TRUE(fs::exists(state_.path() / "runs" / "run-prepared"));
  dropped.reset();
  EXPECT_TRUE(fs::is_empty(state_.path() / "runs"));
  // The same id again, prepared and executed: the command runs once, in
  // the sandbox prepare() set up.
  auto prepared = backend->prepare(request);
  ASSERT_NE(prepared, nullptr);
  const auto outcome = backend->execute(request, std::move(prepared));
  EXPECT_EQ(outcome.result.exit_code, 0) << outcome.result.termination_detail;
  EXPECT_EQ(out, "prepared\n");
  backend->cleanup();
  EXPECT_TRUE(fs::is_empty(state_.path() / "runs"));
}

// /dev: the usual devices work, /dev/shm is a writable tmpfs, /dev/pts a
// devpts, the fd links point into /proc, and nothing else can be made there.
TEST_F(NativeBackendTest, DevHasTheUsualDevicesAndIsReadOnly) {
  Sandbox sandbox(options());
  const auto result =
      run(sandbox, {"sh", "-c",
                    "echo x > /dev/null && head -c 3 /dev/zero | od -An -tx1 && "
                    "head -c 5 /dev/urandom | wc -c && head -c 2 /dev/full | wc -c && "
                    "echo shm > /dev/shm/f && cat /dev/shm/f && readlink /dev/stdout /dev/ptmx && "
                    "test -c /dev/tty && test -c /dev/random && ls /dev/fd/ > /dev/null && "
                    "grep -q ' /dev/pts devpts ' /proc/self/mounts && "
                    "(touch /dev/new 2>/dev/null && echo writable || echo read-only)"});
  EXPECT_EQ(result.exit_code, 0) << result.stderr_data << result.termination_detail;
  EXPECT_EQ(result.stdout_data, " 00 00 00\n5\n2\nshm\n/proc/self/fd/1\npts/ptmx\nread-only\n")
      << result.stderr_data;
}

TEST_F(NativeBackendTest, ExtraBindsAreReadOnlyUnlessAskedAndRefusedInsideOwnDirectories) {
  TempDir data;
  testing::write_file(data / "input.txt", "bound\n");
  // Binds keep host permissions: the sandbox user is "other" to host files.
  fs::permissions(data.path(), fs::perms(0755));
  auto o = options();
  o.binds = {{data.path(), "/data", false}};
  Sandbox sandbox(std::move(o));
  const auto result =
      run(sandbox, {"sh", "-c", "cat /data/input.txt; echo x > /data/out 2>/dev/null || echo ro"});
  EXPECT_EQ(result.stdout_data, "bound\nro\n") << result.stderr_data << result.termination_detail;

  auto bad = options();
  bad.binds = {{data.path(), "/usr/data", false}};
  Sandbox refused(std::move(bad));
  EXPECT_THROW(refused.execute({"true"}), SandboxConfigError);
}

TEST_F(NativeBackendTest, ReconcileRemovesCrashedRunsButNotLiveOnes) {
  // A run's lock sits beside its directory and is taken before the directory
  // is made, so a concurrent reconcile never takes a live run for a crashed one.
  const fs::path runs = state_.path() / "runs";
  fs::create_directories(runs / "run-crashed/upper");
  testing::write_file(runs / "run-crashed.lock", "");
  fs::create_directories(runs / "run-live/upper");
  testing::write_file(runs / "run-live.lock", "");
  testing::write_file(runs / "run-orphan.lock", "");  // crashed before its mkdir
  const int live_lock = ::open((runs / "run-live.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_EQ(::flock(live_lock, LOCK_EX), 0);
  auto backend = make_native_backend(native_options());
  const auto removed = backend->reconcile();
  std::size_t staging = 0;
  for (const auto& line : removed) {
    if (line.find("staging directory") == std::string::npos) continue;
    ++staging;
    EXPECT_NE(line.find("run-crashed"), std::string::npos) << line;
  }
  EXPECT_EQ(staging, 1u);
  EXPECT_FALSE(fs::exists(runs / "run-crashed"));
  EXPECT_FALSE(fs::exists(runs / "run-crashed.lock"));
  EXPECT_FALSE(fs::exists(runs / "run-orphan.lock"));
  EXPECT_TRUE(fs::exists(runs / "run-live"));
  EXPECT_TRUE(fs::exists(runs / "run-live.lock"));
  ::close(live_lock);
}

// Start-up reconciles only when a run's lock file is left unlocked: a live
// run's lock (or none) means nothing crashed; a crashed one's triggers the
// whole reconcile, cgroups included.
TEST_F(NativeBackendTest, StartUpReconcilesOnlyAfterACrash) {
  const fs::path runs = state_.path() / "runs";
  auto backend = make_native_backend(native_options());
  EXPECT_EQ(backend->reconcile_if_needed(), std::vector<std::string>{}) << "no runs/ yet";
  fs::create_directories(runs / "run-live/upper");
  testing::write_file(runs / "run-live.lock", "");
  const int live_lock = ::open((runs / "run-live.lock").c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_EQ(::flock(live_lock, LOCK_EX), 0);
  EXPECT_EQ(backend->reconcile_if_needed(), std::vector<std::string>{});
  EXPECT_TRUE(fs::exists(runs / "run-live"));

  fs::create_directories(runs / "run-crashed/upper");
  testing::write_file(runs / "run-crashed.lock", "");
  const auto removed = backend->reconcile_if_needed();
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_NE(removed[0].find("run-crashed"), std::string::npos) << removed[0];
  EXPECT_FALSE(fs::exists(runs / "run-crashed"));
  EXPECT_TRUE(fs::exists(runs / "run-live"));

  // A lock file alone (a run that could not remove its cgroup keeps it).
  testing::write_file(runs / "run-left-cgroup.lock", "");
  EXPECT_EQ(backend->reconcile_if_needed(), std::vector<std::string>{});
  EXPECT_FALSE(fs::exists(runs / "run-left-cgroup.lock")) << "the full reconcile ran";
  ::close(live_lock);
}

// Many sandboxes at once on one state directory, each starting with a
// reconcile: none may take another's staging directory for a crashed one.
TEST_F(NativeBackendTest, ConcurrentSandboxesDoNotReconcileEachOther) {
  const std::string failures = testing::run_concurrently(4, [&](int) {
    std::string failed;
    for (int run = 0; run < 4; ++run) {
      Sandbox sandbox(options());  // initialize() reconciles
      const auto result = sandbox.execute({"/workspace/probe", "write", "/tmp/x", "y"});
      if (result.exit_code != 0) failed += result.termination_detail + "; ";
    }
    return failed;
  });
  EXPECT_EQ(failures, "");
  EXPECT_TRUE(fs::is_empty(state_.path() / "runs")) << "every run cleaned up after itself";
}

// A finished run's staging directory leaves runs/ at once and waits in
// trash/ until a later run removes it in the background, even a tree the
// overlay left unreadable (mode 000) and one full of changes.
TEST_F(NativeBackendTest, FinishedRunsStagingIsRemovedDuringTheNextRun) {
  const fs::path trash = state_.path() / "trash";
  {
    Sandbox sandbox(options());
    ASSERT_EQ(run(sandbox, {"/workspace/probe", "write", "/workspace/made.txt", "y"}).exit_code, 0);
  }
  EXPECT_TRUE(fs::is_empty(state_.path() / "runs"));
  std::vector<fs::path> finished;
  for (const auto& entry : fs::directory_iterator(trash))
    finished.push_back(entry.path());
  ASSERT_EQ(finished.size(), 1u) << "the run's staging directory waits in trash/";
  // A leftover the remover must tolerate: another process's half-removed tree.
  fs::create_directories(trash / "run-partial/work/work");
  ::chmod((trash / "run-partial/work/work").c_str(), 0);

  // The next run removes both while its command runs (long enough here).
  Sandbox next(options());
  ASSERT_EQ(run(next, {"/workspace/probe", "sleep", "trash-test", "1"}).exit_code, 0);
  for (const auto& path : finished)
    EXPECT_FALSE(fs::exists(path)) << path << " still in trash/";
  EXPECT_FALSE(fs::exists(trash / "run-partial"));
}

// A finished run that changed nothing leaves a staging tree a later run
// reuses (the overlay's own directories removed, its instance id cleared):
// fewer directories freed per run. One with changes is removed, never
// reused: a run must not see another's upper layer.
TEST_F(NativeBackendTest, UnchangedStagingTreesAreReusedChangedOnesRemoved) {
  const fs::path trash = state_.path() / "trash";
  const fs::path pool = state_.path() / "pool";
  auto entries = [](const fs::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir))
      names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  };
  Sandbox sandbox(options());
  ASSERT_EQ(run(sandbox, {"true"}).exit_code, 0);
  const auto first = entries(trash);
  ASSERT_EQ(first.size(), 1u);
  // The next run recycles it while its command runs (long enough here).
  ASSERT_EQ(run(sandbox, {"/workspace/probe", "sleep", "pool-test", "1"}).exit_code, 0);
  ASSERT_EQ(entries(pool), first) << "the unchanged tree waits in pool/";
  const fs::path pooled = pool / first[0];
  EXPECT_EQ(entries(pooled), (std::vector<std::string>{"upper", "work"}));
  EXPECT_TRUE(fs::is_empty(pooled / "upper"));
  EXPECT_TRUE(fs::is_empty(pooled / "work")) << "the overlay's work/work is gone";
  char names[1024];
  EXPECT_EQ(::llistxattr((pooled / "upper").c_str(), names, sizeof names), 0)
      << "the overlay's attributes (its uuid) are cleared";

  // The next run takes it, and sees only its own changes. Its upper/
  // moves whole into the transaction, its new file staying in place as the
  // staged copy: its tree in trash/ has no upper/ left.
  const auto changed =
      run(sandbox, {"sh", "-c", "mkdir /workspace/d && echo x > /workspace/d/new.txt"});
  ASSERT_EQ(changed.exit_code, 0) << changed.termination_detail;
  ASSERT_TRUE(changed.transaction_id.has_value());
  EXPECT_EQ(changed.changes.size(), 2u);
  EXPECT_FALSE(fs::exists(pooled)) << "taken by the run";
  std::vector<std::string> with_changes;
  for (const auto& name : entries(trash))
    if (!fs::exists(trash / name / "upper")) with_changes.push_back(name);
  ASSERT_EQ(with_changes.size(), 1u);
  EXPECT_TRUE(fs::exists(workspace_.path() / ".agent" / "transactions" / *changed.transaction_id /
                         "blobs" / "u" / "d" / "new.txt"));

  ASSERT_EQ(run(sandbox, {"/workspace/probe", "sleep", "pool-test", "1"}).exit_code, 0);
  EXPECT_FALSE(fs::exists(trash / with_changes[0])) << "removed during the run";
  EXPECT_FALSE(fs::exists(pool / with_changes[0])) << "a tree with changes is never reused";
  const auto fresh = run(sandbox, {"sh", "-c", "test ! -e /workspace/d"});
  EXPECT_EQ(fresh.exit_code, 0) << "another run's change leaked into a later run";
}

// The first runs on a fresh state directory all make its shared mount
// points at once: losing that race is fine (found by the VM's single CPU).
TEST_F(NativeBackendTest, FirstRunsOnAFreshStateDirectoryShareItsMountPoints) {
  constexpr int kClients = 6;
  for (int round = 0; round < 20; ++round) {
    TempDir state;
    std::atomic<int> waiting{kClients};
    const std::string failures = testing::run_concurrently(kClients, [&](int) {
      SandboxOptions o = options();
      NativeBackendOptions native = native_options();
      native.state_dir = state.path();
      o.backend = make_native_backend(native);
      Sandbox sandbox(std::move(o));
      sandbox.initialize();
      // Start together, so that several find mnt/ missing.
      waiting.fetch_sub(1);
      while (waiting.load() > 0)
        std::this_thread::yield();
      const auto result = sandbox.execute({"true"});
      return result.exit_code == 0 ? std::string() : result.termination_detail;
    });
    ASSERT_EQ(failures, "") << "round " << round;
  }
}

TEST_F(NativeBackendTest, CapabilitiesReportStrongIsolation) {
  auto backend = make_native_backend(native_options());
  EXPECT_EQ(backend->filesystem_capability().level, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->network_capability({}).level, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->secrets_capability({}).level, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->process_containment_capability().level, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->limit_capability(LimitKind::WallTime).level,
            EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->syscall_capability("default").level, EnforcementLevel::StronglyEnforced);
  EXPECT_EQ(backend->syscall_capability("unconfined").level, EnforcementLevel::Unsupported);
  // An allowlist: a veth pair as root, pasta for an ordinary user who can
  // use /dev/net/tun, refused otherwise (docs/network.md).
  NetworkPolicy allowlist;
  allowlist.mode = NetworkMode::Allowlist;
  const bool connectable = ::geteuid() == 0 || (::access("/usr/bin/pasta", X_OK) == 0 &&
                                                ::access("/dev/net/tun", R_OK | W_OK) == 0);
  EXPECT_EQ(backend->network_capability(allowlist).level,
            connectable ? EnforcementLevel::StronglyEnforced : EnforcementLevel::Unsupported);
}

TEST_F(NativeBackendTest, TheCommandLineRunsNativeByDefault) {
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string()};
  const std::string w = workspace_.path().string();
  auto run = testing::run_cli({"run", "-w", w, "--json", "--", "sh", "-c", "echo n > n.txt; id -u"},
                              "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json["isolation_level"], "native");
  EXPECT_EQ(json["stdout"], "1000\n");
  EXPECT_EQ(json["enforcement"]["filesystem"], "strongly_enforced");
  EXPECT_EQ(json["enforcement"]["network"], "strongly_enforced");
  EXPECT_EQ(json["changes"][0]["path"], "n.txt");
  EXPECT_FALSE(fs::exists(workspace_ / "n.txt"));

  run = testing::run_cli(
      {"run", "-w", w, "--changes", "commit", "--", "sh", "-c", "echo c > c.txt"}, "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("filesystem  strongly_enforced"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("pulsebox: changes committed: tx-"), std::string::npos) << run.err;
  EXPECT_EQ(testing::read_file(workspace_ / "c.txt"), "c\n");

  // Without a seccomp filter, and without accepting that, nothing runs.
  run = testing::run_cli(
      {"run", "-w", w, "--seccomp", "unconfined", "--", "sh", "-c", "echo x > x.txt"}, "", env);
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("--allow-weaker syscalls"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(workspace_ / "x.txt"));
}

// Docker's spellings (issue #19): -v HOST:SANDBOX:ro onto a directory whose
// name starts with a dot, -e, --env-file, --network, --workdir, --rm, and the
// command without "--".
TEST_F(NativeBackendTest, DockerStyleFlagsRunTheCommandWithoutDashes) {
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string()};
  TempDir cache;
  fs::permissions(cache.path(), fs::perms(0755));
  testing::write_file(cache / "x", "cached\n");
  fs::permissions(cache / "x", fs::perms(0644));
  fs::create_directories(workspace_ / "sub");
  testing::write_file(workspace_ / "vars.env", "# comment\n\nFROM_FILE=f=1\nBOTH=file\n");
  const auto run = testing::run_cli(
      {"run", "-w", workspace_.path().string(), "--allow-weaker", "limits", "-v",
       cache.path().string() + ":/root/.cache:ro", "--env-file", (workspace_ / "vars.env").string(),
       "-e", "BOTH=cli", "--network", "none", "--workdir", "sub", "--rm", "sh", "-c",
       "cat /root/.cache/x; echo $FROM_FILE $BOTH; pwd; touch /root/.cache/y 2>/dev/null || echo "
       "read-only; echo n > n.txt"},
      "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "cached\nf=1 cli\n/workspace/sub\nread-only\n");
  EXPECT_NE(run.err.find("pulsebox: changes discarded (1 added)"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(workspace_ / "sub" / "n.txt"));
  const auto pending = testing::run_cli({"changes", "-w", workspace_.path().string()}, "", env);
  EXPECT_NE(pending.out.find("no pending transactions"), std::string::npos) << pending.out;
}

// A real `env` in a sandbox: explicit variables that load code pass (and
// are audited by name only), and the scrubber leaves non-secret assignments
// (PWD, OLDPWD, ...) alone: nothing of it is redacted.
TEST_F(NativeBackendTest, ARealEnvShowsExplicitVariablesAndNothingRedacted) {
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string()};
  const auto run =
      testing::run_cli({"run", "-w", workspace_.path().string(), "--allow-weaker", "limits", "-e",
                        "PYTHONPATH=src-4711", "-e", "NODE_OPTIONS=--max-old-space-size=64", "-e",
                        "GIT_AUTHOR_NAME=bot", "--", "sh", "-c", "cd /tmp; cd /workspace; env"},
                       "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const char* line :
       {"PYTHONPATH=src-4711\n", "NODE_OPTIONS=--max-old-space-size=64\n", "GIT_AUTHOR_NAME=bot\n",
        "PWD=/workspace\n", "OLDPWD=/tmp\n", "HOME=/home/sandbox\n", "LANG=C.UTF-8\n"}) {
    EXPECT_NE(run.out.find(line), std::string::npos) << line << " in:\n" << run.out;
  }
  EXPECT_EQ(run.out.find("REDACTED"), std::string::npos) << run.out;
  const std::string audit = testing::read_file(workspace_ / ".agent" / "logs" / "audit.jsonl");
  EXPECT_NE(audit.find("\"PYTHONPATH\""), std::string::npos);
  EXPECT_EQ(audit.find("src-4711"), std::string::npos);
}

// As root the sandbox's ids are unprivileged: a state directory inside a
// directory only root may enter (mktemp -d) failed every run with EACCES in
// the sandbox's setup. It is refused at the start, with the fix.
TEST_F(NativeBackendTest, AStateDirectoryTheSandboxCannotReachIsRefusedWithTheFix) {
  PULSEBOX_SKIP_UNLESS_ROOT("only root runs sandboxes as unprivileged ids other than its own");
  TempDir closed;
  fs::permissions(closed.path(), fs::perms(0700));
  const std::string state = (closed / "state").string();
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state};
  const std::vector<std::string> args = {
      "run", "-w", workspace_.path().string(), "--allow-weaker", "limits", "--", "true"};
  auto run = testing::run_cli(args, "", env);
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("the state directory " + state +
                         " is out of reach of the sandbox's unprivileged ids: " +
                         closed.path().string() + " (mode 0700)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("fix: chmod o+x " + closed.path().string()), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("EACCES"), std::string::npos) << run.err;
  // The fix it names works.
  fs::permissions(closed.path(), fs::perms(0711));
  run = testing::run_cli(args, "", env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

// An ordinary user without a delegated cgroup (tools/check runs this suite as
// one): limits say why and how to fix it, and an explicit limit that cannot
// be held is refused before anything runs.
// PULSEBOX_TRACE=1: each phase with its time, the child processes' marks
// (recorded in memory they share with the supervisor) among them, in order.
TEST_F(NativeBackendTest, TheTraceShowsEveryPhaseOfARunInOrder) {
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string(),
                                        "PULSEBOX_TRACE=1"};
  const auto run =
      testing::run_cli({"run", "-w", workspace_.path().string(), "--", "true"}, "", env);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::vector<std::pair<double, std::string>> lines;
  std::istringstream err(run.err);
  std::string line;
  const std::string prefix = "pulsebox trace: ";
  while (std::getline(err, line)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const double ms = std::stod(line.substr(prefix.size()));
    lines.emplace_back(ms, line.substr(line.find("faults")));
  }
  auto at = [&](const std::string& phase) {
    for (const auto& [ms, text] : lines) {
      if (text.size() >= phase.size() &&
          text.compare(text.size() - phase.size(), phase.size(), phase) == 0) {
        return ms;
      }
    }
    ADD_FAILURE() << "no trace line for " << phase << " in:\n" << run.err;
    return -1.0;
  };
  const std::vector<std::string> order = {
      "main",
      "native: cgroup created",
      "child: init: started",
      "child: init: go",
      "child: init: base mounts made, hostname, lo, bounding set",
      "child: init: plan ready",
      "child: init: mounts made",
      "child: command: started",
      "child: command: seccomp filter loaded",
      "child: init: the command exited",
      "child: init: the sandbox's other processes reaped",
      "native: result read",
      "sandbox: changes imported",
      "native: init reaped, cgroup removed",
      "main: returning"};
  for (std::size_t i = 1; i < order.size(); ++i)
    EXPECT_LE(at(order[i - 1]), at(order[i])) << order[i - 1] << " before " << order[i];
  // init makes its base mounts while the supervisor prepares the rest (the
  // supervisor's "plan sent" is stamped after the send: init may be first).
  EXPECT_LE(at("child: init: namespaces made"), at("child: init: go"));
  EXPECT_LE(at("native: launched (id maps written, go sent)"), at("native: plan sent"));
  EXPECT_LE(at("native: seccomp filter ready"), at("child: init: plan ready"));
  // The static CLI's entry point timed one fault on its text and says
  // whether it populated the text for that (cli/prefault.h); a build
  // without that entry point (sanitizers) has nothing to say.
  int text_lines = 0;
  for (const auto& [ms, text] : lines) {
    if (text.ends_with("main: text populated (one text fault was slow)") ||
        text.ends_with("main: text left to fault in (one text fault was fast)")) {
      ++text_lines;
      EXPECT_LE(at("main"), ms);
    }
  }
  EXPECT_EQ(text_lines, PULSEBOX_STATIC_CLI) << run.err;
}

TEST_F(NativeBackendTest, WithoutADelegatedCgroupAnExplicitMemoryLimitIsRefused) {
  const linux_api::CgroupHost host = linux_api::discover_cgroups();
  if (host.memory.usable)
    GTEST_SKIP() << "skipped: this user has a memory cgroup (the cgroup suite covers it)";
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string()};
  const std::string w = workspace_.path().string();
  auto caps = testing::run_cli({"capabilities"}, "", env);
  EXPECT_NE(caps.out.find("limits.memory             partially_enforced"), std::string::npos)
      << caps.out;
  EXPECT_NE(caps.out.find("is not delegated to it"), std::string::npos) << caps.out;
  auto run = testing::run_cli(
      {"run", "-w", w, "--memory", "64M", "--", "sh", "-c", "echo x > x.txt"}, "", env);
  EXPECT_EQ(run.exit_code, 125);
  EXPECT_NE(run.err.find("memory: RLIMIT_DATA"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("fix: "), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("chown"), std::string::npos) << "the administrator's step" << run.err;
  EXPECT_FALSE(fs::exists(workspace_ / "x.txt"));
  run = testing::run_cli(
      {"run", "-w", w, "--memory", "64M", "--allow-weaker", "limits", "--", "true"}, "", env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
}

// Issue #19 item 5: the fallback without a memory cgroup caps each process's
// private writable memory (RLIMIT_DATA), not its address space (RLIMIT_AS),
// which the JVM and Go reserve far beyond what they use: `java -version`
// failed under the 1 GiB default ("Could not create G1ServiceThread").
TEST_F(NativeBackendTest, WithoutAMemoryCgroupTheFallbackCapsDataNotAddressSpace) {
  const linux_api::CgroupHost host = linux_api::discover_cgroups();
  if (host.memory.usable)
    GTEST_SKIP() << "skipped: this user has a memory cgroup, no rlimit stands in for it";
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string(),
                                        "PULSEBOX_SERVER=off"};
  const std::string w = workspace_.path().string();
  auto caps = testing::run_cli({"capabilities"}, "", env);
  EXPECT_NE(caps.out.find("RLIMIT_DATA"), std::string::npos) << caps.out;
  // ulimit counts KiB: the default 1 GiB as data, the address space unlimited.
  auto run = testing::run_cli({"run", "-w", w, "--allow-weaker", "limits", "--", "sh", "-c",
                               "echo data=$(ulimit -d) as=$(ulimit -v)"},
                              "", env);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("data=1048576 as=unlimited"), std::string::npos) << run.out << run.err;
  // A real program that reserves address space, when Debian's JRE is here.
  if (::access("/usr/bin/java", X_OK) == 0) {
    run = testing::run_cli({"run", "-w", w, "--allow-weaker", "limits", "--", "java", "-version"},
                           "", env);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    EXPECT_NE(run.err.find("version"), std::string::npos) << run.err;
  }
}

// The ci profile goes without the memory rlimit where no cgroup holds memory,
// so an AddressSanitizer build runs; the report says memory is not enforced.
TEST_F(NativeBackendTest, TheCiProfileRunsSanitizerBuildsWithoutAMemoryCgroup) {
  const linux_api::CgroupHost host = linux_api::discover_cgroups();
  if (host.memory.usable)
    GTEST_SKIP() << "skipped: this user has a memory cgroup, no rlimit stands in for it";
  const std::vector<std::string> env = {"PULSEBOX_STATE_DIR=" + state_.path().string(),
                                        "PULSEBOX_SERVER=off"};
  const fs::path source = workspace_ / "main.c";
  testing::write_file(source, "#include <stdlib.h>\nint main(void){free(malloc(8));return 0;}\n");
  const std::string compile = "cc -fsanitize=address -o " + (workspace_ / "asan").string() + " " +
                              source.string() + " 2>&1";
  PULSEBOX_SKIP_UNLESS(std::system(compile.c_str()) == 0, "no AddressSanitizer toolchain here");
  const std::string w = workspace_.path().string();
  auto run = testing::run_cli(
      {"run", "--json", "-w", w, "--allow-weaker", "limits", "--", "./asan"}, "", env);
  EXPECT_NE(nlohmann::json::parse(run.out)["exit_code"], 0)
      << "the RLIMIT_DATA fallback let ASan run";
  run = testing::run_cli({"run", "--json", "-w", w, "--profile", "ci", "-e",
                          "ASAN_OPTIONS=detect_leaks=0", "--", "./asan"},
                         "", env);
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err;
  const auto result = nlohmann::json::parse(run.out);
  EXPECT_EQ(result["enforcement"]["limits"], "unsupported") << result["enforcement"];
  // Why, in the audit log's enforcement record.
  const std::string log = testing::read_file(workspace_ / ".agent/logs/audit.jsonl");
  EXPECT_NE(log.find("without the per-process RLIMIT_DATA fallback"), std::string::npos);
}

}  // namespace
}  // namespace pulsebox
