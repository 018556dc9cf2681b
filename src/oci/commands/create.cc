// `create` (design §1.3): the state directory, config.json, the cgroup, the
// exec fifo, the plan, the clone and its handshake, the pid file. Whatever
// fails on the way takes back what was made: no half-built container stays.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "core/fs.h"
#include "core/trace.h"
#include "linux/cgroup.h"
#include "oci/cgroups.h"
#include "oci/commands/commands.h"
#include "oci/commands/process_handoff.h"
#include "oci/device_filter.h"
#include "oci/hooks.h"
#include "oci/invalid_input.h"
#include "oci/launch/join.h"
#include "oci/plan_builder.h"
#include "oci/spec/spec.h"
#include "oci/tmpcopyup.h"

namespace pulsebox::oci::commands {
namespace {

// The ambient capabilities the plan leaves out (plan_builder: not both
// permitted and inheritable), named so nothing is dropped silently.
void warn_ambient_left_out(std::uint64_t asked, std::uint64_t raised,
                           const std::function<void(std::string_view)>& warn) {
  const std::uint64_t left_out = asked & ~raised;
  if (left_out == 0 || !warn) return;
  const auto names = spec::known_capability_names();
  std::string list;
  for (std::size_t cap = 0; cap < 64; ++cap) {
    if (((left_out >> cap) & 1) == 0) continue;
    if (!list.empty()) list += ", ";
    list += cap < names.size() ? names[cap] : std::to_string(cap);
  }
  warn("config.json: process.capabilities.ambient: " + list +
       " not raised: an ambient capability must also be permitted and inheritable "
       "(runc and crun leave it out too)");
}

namespace fs = std::filesystem;

constexpr const char* kFifoName = "exec.fifo";

core::Error io_error(const std::string& what) {
  return core::Error::from_errno("oci", what);
}

core::Status write_config_copy(int dir_fd, const fs::path& bundle) {
  PB_TRY(text,
         core::read_regular_file(bundle / "config.json", spec::kMaxConfigBytes, "config.json"));
  core::UniqueFd out(
      ::openat(dir_fd, "config.json", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return io_error("copying config.json into the state directory");
  return core::write_all(out.get(), text, "config.json");
}

// cgroup v1's device controller: each rule in order, a deny or an allow.
core::Status write_v1_device_rules(const std::string& leaf,
                                   const std::vector<spec::DeviceRule>& rules) {
  PB_TRY(dir, core::open_directory(leaf));
  for (const auto& rule : rules) {
    const auto number = [](std::int64_t n) { return n < 0 ? std::string("*") : std::to_string(n); };
    const std::string line =
        std::string(1, rule.type) + (rule.type == 'a' ? ""
                                                      : " " + number(rule.major) + ":" +
                                                            number(rule.minor) + " " + rule.access);
    auto written =
        linux_api::write_limit(dir.get(), rule.allow ? "devices.allow" : "devices.deny", line);
    if (!written.ok()) return std::move(written).error().with_context("linux.resources.devices");
  }
  return core::ok_status();
}

std::string hex(std::uint64_t value) {
  char text[24];
  std::snprintf(text, sizeof text, "%llx", static_cast<unsigned long long>(value));
  return text;
}

// What is in force, as §4's one line.
std::string enforcement_report(const launch::ContainerPlan& plan, const std::string& cgroup) {
  std::string namespaces;
  constexpr int kMade[] = {CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNS,
                           CLONE_NEWNET,  CLONE_NEWIPC, CLONE_NEWUTS};
  for (const int flag : kMade) {
    if (((plan.clone_namespaces | plan.unshare_namespaces) & static_cast<std::uint64_t>(flag)) == 0)
      continue;
    namespaces += (namespaces.empty() ? "" : ",") + std::string(spec::namespace_name(flag));
  }
  if (plan.new_cgroup_namespace) namespaces += ",cgroup";
  // Entered by path (launch/join.h): the container's, but not made for it.
  for (const auto& ns : plan.join_namespaces)
    namespaces += ",joined:" + std::string(spec::namespace_name(ns.type));
  return "namespaces=" + namespaces + ";cgroup=" + cgroup + ";seccomp=" +
         (plan.seccomp_program.empty()
              ? std::string("none")
              : std::to_string(plan.seccomp_program.size()) + " instructions,kernel-kill") +
         ";caps=" + hex(plan.capabilities.bounding) +
         ";nnp=" + (plan.no_new_privileges ? "1" : "0") +
         ";masked=" + std::to_string(plan.masked_paths.size()) +
         ";readonly=" + std::to_string(plan.readonly_paths.size()) +
         ";root=" + (plan.root_readonly ? "ro" : "rw");
}

// Every field, so that a limit added later cannot be left out of this test.
bool has_limits(const CgroupResources& r) {
  return r != CgroupResources{};
}

// Takes back what create made, newest first.
struct Undo {
  ContainerDir* dir = nullptr;
  ContainerCgroup* cgroup = nullptr;
  launch::ContainerProcess* process = nullptr;

  core::Error operator()(core::Error error) const {
    if (process != nullptr) {
      (void)process->kill();
      siginfo_t info{};
      ::waitid(static_cast<idtype_t>(P_PIDFD), static_cast<id_t>(process->pidfd()), &info, WEXITED);
    }
    if (cgroup != nullptr) (void)cgroup->remove();
    if (dir != nullptr) (void)dir->remove();
    return error;
  }
};

}  // namespace

core::Result<Created> create(StateStore& store, const CreateOptions& options) {
  if (!valid_container_id(options.id))
    return oci::invalid("container ID \"" + options.id +
                        "\": use letters, digits and _ . + - (at most 128, not first)");
  if (options.preserve_fds < 0) return oci::invalid("--preserve-fds: must be >= 0");
  std::error_code error;
  const fs::path bundle = fs::absolute(options.bundle, error).lexically_normal();
  // Every refusal of the config comes before anything is made.
  PB_TRY(spec, spec::read_spec(bundle));
  PB_TRY(limits, cgroup_resources(spec.linux.resources));
  PB_TRY(cgroups_path, parse_cgroups_path(spec.linux.cgroups_path, false, options.id));
  // Each phase is also a crash point: PULSEBOX_TRACE_STOP_AT stops create
  // there, and tests/oci/oci_crash_test.cc kills it and checks that delete
  // and reconcile leave nothing behind.
  core::trace_phase("oci: config read");
  PB_TRY(namespace_paths, launch::open_namespace_paths(spec));
  const bool in_user_namespace = spec.find_namespace(CLONE_NEWUSER) != nullptr;
  const bool root = ::geteuid() == 0;

  PB_TRY(dir, store.create(options.id));
  Undo undo;
  undo.dir = &dir;
  core::trace_phase("oci: dir locked");

  ContainerRecord record;
  record.id = options.id;
  record.bundle = bundle.string();
  record.rootfs = spec.root_path.string();
  record.created = rfc3339_now();
  record.owner = std::to_string(::geteuid());
  record.annotations = spec.annotations;
  record.runtime_hooks = runtime_hooks_to_json(spec.hooks);
  if (auto status = dir.write_record(record); !status.ok()) return undo(status.error());
  if (auto status = write_config_copy(dir.fd(), bundle); !status.ok()) return undo(status.error());
  core::trace_phase("oci: record written");

  // The cgroup. An ordinary user without limits gets none (it may not be
  // able to make one); root always does, so that kill --all, ps and the
  // device rules have a place.
  ContainerCgroup cgroup;
  std::vector<CgroupView> cgroup_views;
  std::string cgroup_report = "none(an ordinary user's container without limits)";
  if (root || has_limits(limits)) {
    const auto host = linux_api::discover_cgroups();
    // The leaves are in the record before they exist: a create killed
    // before it lists them as made leaves nothing delete cannot find.
    auto made = ContainerCgroup::create(host, cgroups_path, limits,
                                        [&](const std::vector<std::string>& leaves) {
                                          record.planned_cgroup_leaves = leaves;
                                          return dir.write_record(record);
                                        });
    if (!made) return undo(std::move(made).error());
    cgroup = std::move(made).value();
    undo.cgroup = &cgroup;
    record.cgroup_leaves = cgroup.leaf_dirs();
    if (auto status = dir.write_record(record); !status.ok()) return undo(status.error());
    for (const auto& leaf : cgroup.leaf_dirs()) {
      for (const auto& [name, mount] : host.hierarchy_mounts) {
        if (leaf.rfind(mount + "/", 0) != 0) continue;
        cgroup_views.push_back({name.empty() && host.hybrid ? "unified" : name, leaf});
      }
    }
    const auto devices = host.hierarchy_mounts.find("devices");
    if (devices != host.hierarchy_mounts.end()) {
      std::string leaf;
      for (const auto& dir_path : cgroup.leaf_dirs()) {
        if (dir_path.rfind(devices->second + "/", 0) == 0) leaf = dir_path;
      }
      // No leaf there would leave every device open to a root container.
      if (leaf.empty())
        return undo(core::Error(core::ErrorKind::kInternal, "oci",
                                "no devices cgroup leaf was made for the container"));
      if (auto status = write_v1_device_rules(leaf, device_rules(spec)); !status.ok())
        return undo(status.error());
      cgroup_report = "v1:" + std::to_string(cgroup.leaf_dirs().size()) + " leaves,devices";
    } else if (cgroup.unified_fd() >= 0 && (root || !in_user_namespace)) {
      // cgroup v2: the same rules as a device program on the unified leaf,
      // attached before the process is cloned into it. Where it cannot be
      // loaded create fails: real root with CAP_MKNOD could open any device
      // node it makes.
      auto program = device_filter_program(device_rules(spec));
      if (!program) return undo(std::move(program).error());
      if (auto status = attach_device_filter(cgroup.unified_fd(), *program); !status.ok())
        return undo(status.error());
      cgroup_report = "v2:devices";
    } else if (!in_user_namespace) {
      return undo(core::Error(core::ErrorKind::kUnsupported, "oci",
                              "config.json: linux.resources.devices: no cgroup v1 devices "
                              "controller and no cgroup v2 leaf for the device rules; add a user "
                              "namespace or use a host with either"));
    } else {
      cgroup_report = "v2";
    }
    core::trace_phase("oci: cgroup made");
  }

  // The exec fifo: create keeps a write end open only until the clone; the
  // process holds both ends while it waits (spawn.h).
  if (::mkfifoat(dir.fd(), kFifoName, 0600) != 0) return undo(io_error("making exec.fifo"));
  auto fifo_read = above_preserved(
      core::UniqueFd(::openat(dir.fd(), kFifoName, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)),
      options.preserve_fds);
  if (!fifo_read) return undo(std::move(fifo_read).error());
  auto fifo_write = above_preserved(
      core::UniqueFd(::openat(dir.fd(), kFifoName, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)),
      options.preserve_fds);
  if (!fifo_write) return undo(std::move(fifo_write).error());
  core::UniqueFd console;
  if (!options.console_socket.empty()) {
    auto connected = connect_console(options.console_socket);
    if (connected) connected = above_preserved(std::move(connected).value(), options.preserve_fds);
    if (!connected) return undo(std::move(connected).error());
    console = std::move(connected).value();
  }
  core::UniqueFd cgroup_fd;
  if (cgroup.unified_fd() >= 0) {
    auto moved = above_preserved(core::UniqueFd(::fcntl(cgroup.unified_fd(), F_DUPFD_CLOEXEC, 0)),
                                 options.preserve_fds);
    if (!moved) return undo(std::move(moved).error());
    cgroup_fd = std::move(moved).value();
  }
  // The process joins the v1 leaves itself, after Go (ContainerCgroup::open_task_files).
  std::vector<core::UniqueFd> task_files;
  cgroup.open_task_files();
  for (const int fd : cgroup.self_join_fds()) {
    auto moved =
        above_preserved(core::UniqueFd(::fcntl(fd, F_DUPFD_CLOEXEC, 0)), options.preserve_fds);
    if (!moved) return undo(std::move(moved).error());
    task_files.push_back(std::move(moved).value());
  }
  core::trace_phase("oci: fifo made");

  // tmpcopyup trees, filled here (the image is read by descriptor, inside
  // the root) and attached by the process; in a user namespace root shifts
  // the owners through its maps, and an ordinary user's copy is made
  // inside a namespace with those maps (tmpcopyup.h).
  std::vector<core::UniqueFd> copy_ups;
  PlanInputs inputs;
  {
    for (const std::size_t index : copy_up_mounts(spec)) {
      auto flags_and_data = mount_flags_and_data(spec, index);
      if (!flags_and_data) return undo(std::move(flags_and_data).error());
      const std::string& destination = spec.mounts[index].destination;
      auto tree = in_user_namespace && !root
                      ? make_tmpcopyup_in_user_namespace(spec.root_path.string(), destination,
                                                         flags_and_data->second,
                                                         flags_and_data->first, spec.linux.id_maps)
                      : make_tmpcopyup(spec.root_path.string(), destination, flags_and_data->second,
                                       flags_and_data->first,
                                       in_user_namespace ? &spec.linux.id_maps : nullptr);
      if (tree) tree = above_preserved(std::move(tree).value(), options.preserve_fds);
      if (!tree) return undo(std::move(tree).error());
      inputs.copy_up_fds[index] = tree->get();
      copy_ups.push_back(std::move(tree).value());
    }
  }
  for (auto& path : namespace_paths) {
    auto moved = above_preserved(std::move(path.fd), options.preserve_fds);
    if (!moved) return undo(std::move(moved).error());
    path.fd = std::move(moved).value();
    inputs.namespace_fds[path.index] = path.fd.get();
  }
  inputs.preserved_fds = options.preserve_fds;
  inputs.exec_fifo_fd = fifo_read->get();
  inputs.exec_fifo_writer_fd = fifo_write->get();
  inputs.console_socket_fd = console.get();
  inputs.cgroup_fd = cgroup_fd.get();
  for (const auto& fd : task_files)
    inputs.cgroup_task_fds.push_back(fd.get());
  inputs.new_session_keyring = !options.no_new_keyring;
  inputs.can_mknod = root;
  inputs.cgroup_views = cgroup_views;
  inputs.container_id = options.id;
  auto plan = build_container_plan(spec, inputs);
  if (!plan) return undo(std::move(plan).error());
  plan->seal();
  warn_ambient_left_out(spec.process->capabilities.ambient, plan->capabilities.ambient,
                        options.warn);

  auto spawned = launch::spawn_container(*plan);
  fifo_read->reset();
  fifo_write->reset();
  console.reset();
  cgroup_fd.reset();
  task_files.clear();
  copy_ups.clear();
  namespace_paths.clear();
  if (!spawned) return undo(std::move(spawned).error());
  launch::ContainerProcess process = std::move(spawned).value();
  undo.process = &process;
  core::trace_phase("oci: maps written");

  record.process.pid = process.pid();
  const auto start_time = process_start_time(process.pid());
  if (!start_time)
    return undo(core::Error(core::ErrorKind::kIo, "oci", "the container's process vanished"));
  record.process.start_time = *start_time;
  record.namespace_flags = plan->clone_namespaces | plan->unshare_namespaces |
                           (plan->new_cgroup_namespace ? CLONE_NEWCGROUP : 0);
  // Joined ones too: they are the container's, and exec joins them all.
  for (const auto& ns : plan->join_namespaces)
    record.namespace_flags |= static_cast<std::uint64_t>(ns.type);
  record.enforced = enforcement_report(*plan, cgroup_report);
  if (auto status = dir.write_record(record); !status.ok()) return undo(status.error());
  if (!record.cgroup_leaves.empty()) {
    if (auto status = cgroup.attach_rest(process.pid(), cgroup.unified_fd() >= 0); !status.ok())
      return undo(status.error());
  }
  core::trace_phase("oci: pid recorded");

  // The setup includes the createContainer hooks, each up to its timeout.
  int setup_ms = kHandshakeMs;
  for (const auto& hook : plan->create_container_hooks)
    setup_ms += hook.timeout_seconds * 1000;
  core::Status status = process.go();
  if (status.ok()) status = process.wait_ready(setup_ms);
  if (!status.ok()) return undo(status.error().with_context("create " + options.id));
  core::trace_phase("oci: init ready");
  if (plan->pause_for_runtime_hooks) {
    // prestart and createRuntime: the process has its namespaces and mounts
    // and waits before createContainer and pivot_root.
    const HookState hook_state{options.id, "creating", process.pid(), bundle.string(),
                               spec.annotations};
    if (auto hooks = run_hooks(spec.hooks.create_runtime, hook_state); !hooks.ok())
      return undo(hooks.error().with_context("create " + options.id));
    status = process.go();
    if (status.ok()) status = process.wait_ready(setup_ms);
    if (!status.ok()) return undo(status.error().with_context("create " + options.id));
  }

  if (!options.pid_file.empty()) {
    auto written = core::write_file_atomic(fs::absolute(options.pid_file, error),
                                           std::to_string(process.pid()));
    if (!written.ok()) return undo(std::move(written).error().with_context("--pid-file"));
    core::trace_phase("oci: pid file written");
  }
  if (auto detached = process.detach(kHandshakeMs); !detached.ok())
    return undo(detached.error().with_context("create " + options.id));
  core::trace_phase("oci: detached");
  // Only now, with the process detached, does the record say created: until
  // then a create killed (its lock gone) leaves a "creating" record, which
  // reads as stopped, and delete or reconcile kill the process through its
  // pidfd, even one whose parent-death signal is still on its way.
  record.phase = ContainerRecord::Phase::Created;
  if (auto written = dir.write_record(record); !written.ok()) return undo(written.error());
  core::trace_phase("oci: created recorded");
  return Created{options.id, std::move(process), record.enforced};
}

namespace {

// The time the container's startContainer hooks may take (their own
// timeouts, the default where config.json gives none), read only when the
// program is late: the common start reads no config.
int start_container_hooks_ms(const StateStore& store, std::string_view id,
                             const std::filesystem::path& bundle) {
  const auto text = core::read_regular_file(store.root() / std::string(id) / "config.json",
                                            spec::kMaxConfigBytes, "the container's config.json");
  if (!text) return 0;
  const auto parsed = spec::parse_spec(text.value(), bundle);
  if (!parsed) return 0;
  std::int64_t seconds = 0;  // up to a day per hook: summed wide, then clamped
  for (const auto& hook : parsed.value().hooks.start_container)
    seconds += hook.timeout.value_or(kDefaultHookTimeoutSeconds);
  return static_cast<int>(std::min<std::int64_t>(seconds * 1000, INT_MAX));
}

// The program runs before start returns, and before poststart as the
// runtime spec orders them: the process holds its read end of the fifo,
// close-on-exec, through its startContainer hooks to execve, and the last
// reader gone is POLLERR on this write end (a process that ended first, as
// after a failed hook, closes it too). False once `timeout_ms` has passed.
bool wait_until_program_runs(int fifo, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  pollfd readers_gone{fifo, 0, 0};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                          deadline - std::chrono::steady_clock::now())
                          .count();
    if (left <= 0) return false;
    const int ready = ::poll(&readers_gone, 1, static_cast<int>(left));
    if (ready > 0 || (ready < 0 && errno != EINTR)) return true;
  }
}

}  // namespace

core::Status start(StateStore& store, std::string_view id) {
  PB_TRY(dir, store.open(id, false));
  PB_TRY(record, dir.read_record());
  const Status status = status_of(dir, record);
  if (status != Status::Created)
    return oci::invalid("container " + std::string(id) + " is not created (it is " +
                        status_name(status) + ")");
  // The process holds the read end: a non-blocking open for writing works.
  core::UniqueFd fifo(
      ::openat(dir.fd(), kFifoName, O_WRONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW));
  if (!fifo) return io_error("opening " + std::string(id) + "/exec.fifo");
  // One start at a time (the state lock is shared, so that `state` never
  // reads a start as a create): the fifo's own lock, then the fifo must
  // still be there, not removed by a start that came first.
  struct stat opened {};
  if (::fstat(fifo.get(), &opened) != 0 || !S_ISFIFO(opened.st_mode))
    return oci::invalid("container " + std::string(id) + ": exec.fifo is not a fifo");
  if (::flock(fifo.get(), LOCK_EX | LOCK_NB) != 0 || ::fstat(fifo.get(), &opened) != 0 ||
      opened.st_nlink == 0)
    return oci::invalid("container " + std::string(id) +
                        " is being started, or was, by another command");
  core::trace_phase("oci: start fifo opened");
  // The byte, then the fifo gone. A start killed between the two leaves a
  // fifo whose reader closed it at execve, which reads as running
  // (ContainerDir::waits_for_start); removed first, a start killed before
  // its byte left a process waiting for ever that read as running. A reader
  // gone meanwhile (the process killed) is an error, not SIGPIPE.
  struct sigaction ignore {
  }, previous{};
  ignore.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &ignore, &previous);
  const ssize_t written = ::write(fifo.get(), "0", 1);
  const int write_errno = errno;
  ::sigaction(SIGPIPE, &previous, nullptr);
  if (written != 1 && write_errno == EPIPE)
    return oci::invalid("container " + std::string(id) + "'s process ended before it was started");
  errno = write_errno;
  if (written != 1) return io_error("writing exec.fifo");
  core::trace_phase("oci: start byte written");
  if (::unlinkat(dir.fd(), kFifoName, 0) != 0 && errno != ENOENT)
    return io_error("removing exec.fifo");
  // Bounded by the handshake's time and the hooks' timeouts; past them
  // start returns anyway: the container is started.
  if (!wait_until_program_runs(fifo.get(), kHandshakeMs))
    (void)wait_until_program_runs(fifo.get(), start_container_hooks_ms(store, id, record.bundle));
  core::trace_phase("oci: program running");
  run_recorded_hooks(record, "poststart", "running");
  return core::ok_status();
}

}  // namespace pulsebox::oci::commands
