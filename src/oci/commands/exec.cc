// `exec` (design §1.6): a new process in a created or running container,
// as podman's conmon (`exec --pid-file P --process F --detach ID`) and
// containerd's shim (`exec --process F --detach --pid-file P ID`) call it,
// or runc's inline form (`exec [--cwd D] [--env K=V] [--user U[:G]]
// [--cap C] [--tty] ID ARGS...`). The process joins the container through
// the pidfd its record verifies, lands in its cgroup leaves before it runs
// anything, and gets the container's seccomp profile.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "core/fs.h"
#include "core/json_parse.h"
#include "core/trace.h"
#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/commands/process_handoff.h"
#include "oci/commands/signal_forwarding.h"
#include "oci/invalid_input.h"
#include "oci/plan_builder.h"
#include "oci/spec/spec.h"

namespace pulsebox::oci::commands {
namespace {

namespace fs = std::filesystem;

constexpr const char* kStopBeforeExec = "oci exec: before execve";
// Every namespace type a container may have; exec joins those that are
// not this process's own (setns refuses re-entering one's user namespace).
constexpr std::pair<int, const char*> kNamespaceFiles[] = {
    {CLONE_NEWUSER, "user"},    {CLONE_NEWIPC, "ipc"}, {CLONE_NEWUTS, "uts"},
    {CLONE_NEWNET, "net"},      {CLONE_NEWPID, "pid"}, {CLONE_NEWNS, "mnt"},
    {CLONE_NEWCGROUP, "cgroup"}};

// The namespaces of `pid` that are not this process's own. Where this
// process may not read the link (an ordinary user and a created container's
// still undumpable process), the record says: the namespaces create made or
// joined.
std::uint64_t namespaces_to_join(pid_t pid, std::uint64_t recorded) {
  std::uint64_t flags = 0;
  for (const auto& [flag, name] : kNamespaceFiles) {
    struct stat own {
    }, theirs{};
    const std::string file = std::string("/ns/") + name;
    const bool known = ::stat(("/proc/self" + file).c_str(), &own) == 0 &&
                       ::stat(("/proc/" + std::to_string(pid) + file).c_str(), &theirs) == 0;
    if (known ? own.st_ino != theirs.st_ino || own.st_dev != theirs.st_dev
              : (recorded & static_cast<std::uint64_t>(flag)) != 0)
      flags |= static_cast<std::uint64_t>(flag);
  }
  return flags;
}

// runc's inline form: the container's own process with these changes.
core::Result<spec::Process> inline_process(const nlohmann::json& config,
                                           const ExecOptions& options) {
  nlohmann::json process = config.value("process", nlohmann::json::object());
  if (options.args.empty()) return invalid("exec: give --process F or the program to run");
  process["args"] = options.args;
  process["terminal"] = options.tty;
  process.erase("consoleSize");
  if (!options.cwd.empty()) process["cwd"] = options.cwd;
  for (const auto& entry : options.env) {
    if (entry.find('=') == std::string::npos) return invalid("--env " + entry + ": give KEY=VALUE");
    process["env"].push_back(entry);
  }
  if (!options.user.empty()) {
    const auto colon = options.user.find(':');
    const auto number = [&](std::string_view text) -> std::optional<std::uint32_t> {
      std::uint32_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (error != std::errc() || end != text.data() + text.size() || text.empty())
        return std::nullopt;
      return value;
    };
    const auto uid = number(std::string_view(options.user).substr(0, colon));
    const auto gid = colon == std::string::npos
                         ? std::optional<std::uint32_t>(0)
                         : number(std::string_view(options.user).substr(colon + 1));
    if (!uid || !gid) return invalid("--user " + options.user + ": give UID[:GID] as numbers");
    process["user"]["uid"] = *uid;
    process["user"]["gid"] = *gid;
    process["user"].erase("additionalGids");
  }
  for (const auto& cap : options.caps) {
    for (const char* set : {"bounding", "effective", "permitted"})
      process["capabilities"][set].push_back(cap);
  }
  if (options.no_new_privileges) process["noNewPrivileges"] = true;
  return spec::parse_process(process.dump(), "exec's flags");
}

}  // namespace

core::Result<int> exec(StateStore& store, const ExecOptions& options) {
  if (options.preserve_fds < 0) return invalid("--preserve-fds: must be >= 0");
  PB_TRY(opened, store.open(options.id, false));
  // The shared lock only until the process runs: a foreground exec must
  // not keep `delete` (which takes it exclusively) waiting.
  std::optional<ContainerDir> dir(std::move(opened));
  PB_TRY(record, dir->read_record());
  const Status status = status_of(*dir, record);
  if (status != Status::Created && status != Status::Running)
    return invalid("container " + options.id + " is not running");
  // setns through a pidfd needs ptrace access, and until start the
  // process is undumpable with the memory of create (whose user namespace
  // is the host's): only root gets that access.
  if (status == Status::Created && ::geteuid() != 0)
    return invalid("container " + options.id +
                   " is created, not started: an ordinary user can exec into it once it runs");
  PB_TRY(container, open_verified_pidfd(record.process));

  // The container's own config, as create copied it.
  const fs::path config_path = store.root() / options.id / "config.json";
  PB_TRY(config_text, core::read_regular_file(config_path, spec::kMaxConfigBytes,
                                              "the container's config.json"));
  PB_TRY(spec, spec::parse_spec(config_text, record.bundle));
  std::optional<spec::Process> process;
  if (!options.process_file.empty()) {
    if (!options.args.empty())
      return invalid("exec: give --process F or the program's args, not both");
    PB_TRY(text,
           core::read_regular_file(options.process_file, spec::kMaxConfigBytes, "--process file"));
    PB_TRY(parsed, spec::parse_process(text, options.process_file));
    process = std::move(parsed);
  } else {
    PB_TRY(config, core::parse_json(config_text, "the container's config.json"));
    PB_TRY(parsed, inline_process(config, options));
    process = std::move(parsed);
  }

  PlanInputs inputs;
  inputs.preserved_fds = options.preserve_fds;
  core::UniqueFd console;
  if (!options.console_socket.empty()) {
    PB_TRY(connected, connect_console(options.console_socket));
    PB_TRY(moved, above_preserved(std::move(connected), options.preserve_fds));
    console = std::move(moved);
    inputs.console_socket_fd = console.get();
  }
  ContainerCgroup cgroup = ContainerCgroup::from_record(record.cgroup_leaves);
  core::UniqueFd cgroup_fd;
  if (cgroup.unified_fd() >= 0) {
    PB_TRY(moved, above_preserved(core::UniqueFd(::fcntl(cgroup.unified_fd(), F_DUPFD_CLOEXEC, 0)),
                                  options.preserve_fds));
    cgroup_fd = std::move(moved);
    inputs.cgroup_fd = cgroup_fd.get();
  }
  // The process joins the v1 leaves itself, after Go (ContainerCgroup::open_task_files).
  std::vector<core::UniqueFd> task_files;
  cgroup.open_task_files();
  for (const int fd : cgroup.self_join_fds()) {
    PB_TRY(moved,
           above_preserved(core::UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)), options.preserve_fds));
    inputs.cgroup_task_fds.push_back(moved.get());
    task_files.push_back(std::move(moved));
  }
  PB_TRY(plan, build_exec_plan(spec, *process, inputs));
  PB_TRY(pidfd, above_preserved(std::move(container), options.preserve_fds));
  plan.join_pidfd = pidfd.get();
  plan.join_pidfd_namespaces = namespaces_to_join(record.process.pid, record.namespace_flags);
  plan.stop_before_exec = core::trace_stops_at(kStopBeforeExec);
  plan.seal();

  // Blocked from before the clone: one that comes during the handshake
  // waits for the signalfd instead of ending exec and orphaning the process.
  std::optional<ForwardedSignals> forwarded;
  core::UniqueFd signal_fd;
  if (!options.detach) {
    forwarded.emplace();
    PB_TRY(fd, forwarded->open_fd());
    signal_fd = std::move(fd);
  }
  PB_TRY(spawned, launch::spawn_container(plan));
  console.reset();
  cgroup_fd.reset();
  task_files.clear();
  pidfd.reset();
  const auto fail = [&](core::Error error) -> core::Error {
    (void)spawned.kill();
    siginfo_t info{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spawned.pidfd()), &info, WEXITED);
    return error.with_context("exec in " + options.id);
  };
  // The v1 leaves before Go: nothing runs outside the container's cgroup.
  if (!record.cgroup_leaves.empty()) {
    if (auto attached = cgroup.attach_rest(spawned.pid(), cgroup.unified_fd() >= 0); !attached.ok())
      return fail(attached.error());
  }
  core::Status handshake = spawned.go();
  if (handshake.ok()) handshake = spawned.wait_ready(kHandshakeMs);
  if (!handshake.ok()) return fail(handshake.error());
  if (auto detached = spawned.detach(kHandshakeMs); !detached.ok()) return fail(detached.error());
  // Only a program that runs is reported: the pid file's process is the
  // program, and a missing one is exec's error ("executing P: No such file
  // or directory", the words podman maps to 127).
  if (plan.stop_before_exec) {
    siginfo_t stopped{};
    ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(spawned.pidfd()), &stopped,
             WSTOPPED | WEXITED | WNOWAIT);
  } else if (auto executed = spawned.wait_exec(kHandshakeMs); !executed.ok()) {
    return fail(executed.error());
  }
  if (!options.pid_file.empty()) {
    std::error_code error;
    auto written = core::write_file_atomic(fs::absolute(options.pid_file, error),
                                           std::to_string(spawned.pid()));
    if (!written.ok()) return fail(std::move(written).error().with_context("--pid-file"));
  }
  dir.reset();
  if (options.detach) return 0;
  return wait_forwarding(spawned.pidfd(), signal_fd.get(), "the exec'd process");
}

}  // namespace pulsebox::oci::commands
