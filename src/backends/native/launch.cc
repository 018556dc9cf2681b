#include "backends/native/launch.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "backends/native/capabilities.h"
#include "backends/native/host.h"
#include "backends/native/namespaces.h"
#include "backends/native/staging.h"
#include "backends/native/state_dir.h"
#include "core/fs.h"
#include "core/sandbox_home.h"
#include "core/trace.h"
#include "linux/syscalls.h"
#include "runtime/sync_channel.h"

namespace pulsebox::backends::native {

using core::Error;
using core::UniqueFd;
namespace fs = std::filesystem;

namespace {

// Length-prefixed fields: no value can run into the next.
void add_field(std::string& text, std::string_view value) {
  text += std::to_string(value.size());
  text += ':';
  text += value;
  text += ';';
}
void add_field(std::string& text, std::uint64_t value) {
  add_field(text, std::to_string(value));
}
void add_field(std::string& text, const std::optional<std::uint64_t>& value) {
  add_field(text, value ? std::to_string(*value) : "-");
}

// Every limit the host's cgroups can hold goes to the sandbox's cgroup; the
// rlimits (arm()) stand in for the others (capabilities says which).
linux_api::CgroupSettings cgroup_settings(const ResourcePolicy& limits,
                                          const linux_api::CgroupHost& host) {
  linux_api::CgroupSettings settings;
  if (host.memory.usable) {
    settings.memory_max = limits.memory_bytes;
    if (host.swap_accounting && limits.swap_bytes) settings.swap_max = limits.swap_bytes;
  }
  // +1: init is in the cgroup too.
  if (host.pids.usable) settings.pids_max = limits.max_processes + 1;
  if (host.cpu.usable) {
    settings.cpu_quota_us = static_cast<std::uint64_t>(std::llround(
        limits.cpu_quota_percent / 100.0 * static_cast<double>(settings.cpu_period_us)));
  }
  return settings;
}

bool needs_cgroup(const linux_api::CgroupHost& host, const linux_api::CgroupSettings& settings) {
  return host.unified.usable || settings.memory_max || settings.pids_max || settings.cpu_quota_us;
}

}  // namespace

std::string spec_key(const LaunchSpec& spec) {
  std::string text;
  add_field(text, static_cast<std::uint64_t>(spec.network));
  add_field(text, spec.limits.memory_bytes);
  add_field(text, spec.limits.swap_bytes);
  add_field(text, spec.limits.max_processes);
  add_field(text, std::to_string(spec.limits.cpu_quota_percent));
  add_field(text, spec.binds.size());
  for (const auto& bind : spec.binds) {
    add_field(text, bind.host.string());
    add_field(text, bind.sandbox_path);
    add_field(text, bind.writable ? 1 : 0);
  }
  return text;
}

std::string shape_text(const runtime::LaunchPlan& plan, const linux_api::CgroupSettings& settings,
                       bool idmapped_workspace) {
  std::string text;
  add_field(text, plan.namespaces);
  add_field(text, plan.new_cgroup_namespace ? 1 : 0);
  add_field(text, plan.new_root);
  add_field(text, plan.hostname);
  add_field(text, plan.bring_up_loopback ? 1 : 0);
  add_field(text, static_cast<std::uint64_t>(plan.network_handover));
  for (const auto* maps : {&plan.id_maps.uids, &plan.id_maps.gids}) {
    add_field(text, maps->size());
    for (const auto& map : *maps) {
      add_field(text, map.inside);
      add_field(text, map.outside);
      add_field(text, map.count);
    }
  }
  add_field(text, plan.id_maps.deny_setgroups ? 1 : 0);
  add_field(text, plan.id_maps.use_helpers ? 1 : 0);
  for (const std::uint64_t id :
       {std::uint64_t{plan.init_uid}, std::uint64_t{plan.init_gid}, std::uint64_t{plan.command_uid},
        std::uint64_t{plan.command_gid}, std::uint64_t{plan.clear_groups},
        std::uint64_t{idmapped_workspace}}) {
    add_field(text, id);
  }
  add_field(text, settings.memory_max);
  add_field(text, settings.swap_max);
  add_field(text, settings.pids_max);
  add_field(text, settings.cpu_quota_us);
  add_field(text, settings.cpu_period_us);
  add_field(text, plan.base_mounts.size());
  for (const auto& step : plan.base_mounts) {
    add_field(text, static_cast<std::uint64_t>(step.op));
    add_field(text, step.source);
    add_field(text, step.target);
    add_field(text, step.data);
    add_field(text, step.flags);
    add_field(text, step.mode);
    add_field(text, step.recursive ? 1 : 0);
    add_field(text, step.optional ? 1 : 0);
  }
  return text;
}

core::Result<IdPlan> NativeHost::plan_launch(const LaunchSpec& spec, const fs::path& mount_points,
                                             runtime::LaunchPlan& plan,
                                             runtime::MountLayout& layout,
                                             linux_api::CgroupSettings& settings) {
  plan.namespaces = kSandboxNamespaces;
  plan.new_cgroup_namespace = true;
  const bool own_network = spec.network != NetworkSetup::HostNamespace;
  if (own_network) plan.namespaces |= CLONE_NEWNET;
  plan.new_root = (mount_points / "root").string();
  plan.hostname = options_.hostname;
  plan.bring_up_loopback = own_network;
  using Handover = runtime::LaunchPlan::NetworkHandover;
  // pasta joins the namespace by init's pid: the sockets say it exists.
  const bool connected = spec.network == NetworkSetup::Veth || spec.network == NetworkSetup::Pasta;
  plan.network_handover = spec.network == NetworkSetup::Proxy ? Handover::ProxyListener
                          : connected                         ? Handover::Netlink
                                                              : Handover::None;
  if (spec.network == NetworkSetup::Proxy) plan.proxy_port = kProxyPort;
  PB_TRY(ids, plan_ids(options_, plan));

  layout.mount_points = mount_points;
  layout.system_paths = options_.system_paths;
  layout.hidden_paths = options_.hidden_paths;
  layout.binds = spec.binds;
  // /tmp and /dev/shm live in RAM: without cgroups, the memory limit caps each.
  layout.tmpfs_size_bytes = spec.limits.memory_bytes;
  layout.home_uid = plan.command_uid;
  layout.home_gid = plan.command_gid;
  layout.idmap_home = ids.idmapped_workspace;

  settings = cgroup_settings(spec.limits, cgroups());
  return ids;
}

std::string NativeHost::shape_of(const LaunchSpec& spec) {
  count(&NativeRuntime::Stats::shapes_computed);
  runtime::LaunchPlan plan;
  runtime::MountLayout layout;
  linux_api::CgroupSettings settings;
  auto ids = plan_launch(spec, mount_points_dir(options_.state_dir), plan, layout, settings);
  if (!ids) return "";  // never the shape of a started sandbox
  auto base = runtime::build_base_mount_steps(layout);
  if (!base) return "";  // never the shape of a started sandbox
  plan.base_mounts = std::move(base).value();
  return shape_text(plan, settings, ids->idmapped_workspace);
}

core::Result<std::unique_ptr<SandboxRun>> NativeHost::launch(const LaunchSpec& spec) {
  auto run = std::make_unique<SandboxRun>();
  run->id = spec.id;
  run->network->setup = spec.network;
  PB_CHECK(launch_into(*run, spec));
  return run;
}

// Launched in parts: init makes its namespaces while this process writes the
// id maps, makes the v1 cgroups and checks the state directory's mount
// points, and writes the base mount steps (everything that needs no
// staging); after "go" init joins its cgroups and makes the base mounts
// while this process writes the limits and makes the staging directory
// (and, in arm(), the idmapped workspace, the workspace's mounts and the
// seccomp filter); then PlanReady lets init finish (runtime/launch_plan.h).
// Only what clone needs comes before it.
core::Status NativeHost::launch_into(SandboxRun& run, const LaunchSpec& spec) {
  // Staging, locked for the run's lifetime so reconcile() leaves it alone.
  const fs::path& state = options_.state_dir;
  PB_CHECK(ensure_private_dir(state, state_dir_mode()));
  PB_CHECK(ensure_private_dir(state / "runs", state_dir_mode()));
  run.run_dir = state / "runs" / spec.id;
  // The lock comes first, beside the directory: a concurrent reconcile()
  // never sees the directory of a live run unlocked.
  PB_TRY(lock, core::create_locked_file(core::run_lock_path(run.run_dir)));
  run.run_lock = std::move(lock);
  {
    const std::lock_guard hold(runs_mutex_);
    own_runs_.insert(spec.id);
  }
  // Made before "go" (init mounts on them after it); named now for the plan.
  const fs::path mount_points = mount_points_dir(state);

  runtime::LaunchPlan& plan = run.plan;
  plan.exec_error = &run.exec_error;
  if (core::trace_enabled()) {
    run.trace = std::make_unique<core::ChildTrace>();
    plan.trace = run.trace.get();
  }
  // Pooled: the command is a process of init's pid namespace (every native
  // sandbox has its own, kSandboxNamespaces), over once init is reaped, and
  // the plan outlives init (SandboxRun::sandbox is destroyed first).
  static_assert((kSandboxNamespaces & CLONE_NEWPID) != 0);
  PB_TRY(command_stack, linux_api::ChildStack::allocate(runtime::LaunchPlan::kCommandStackSize,
                                                        linux_api::StackReuse::kPooled));
  plan.command_stack = std::move(command_stack);
  plan.capabilities = linux_api::prepare_capability_drop();
  PB_TRY(ids, plan_launch(spec, mount_points, plan, run.layout, run.settings));
  run.ids = ids;
  run.layout.run_dir = run.run_dir;
  // A bad bind is the caller's mistake, reported before any process exists;
  // the steps themselves are built while init makes its namespaces.
  PB_CHECK(runtime::check_extra_binds(run.layout));
  core::trace_phase("native: ids planned, binds checked");

  // The sandbox's unified cgroup, created before the child exists (clone3
  // puts it there); the v1 ones while init makes its namespaces (before
  // "go", which hands init their `tasks` files). Each gets its limits as it
  // is made, so they hold from init's first instruction.
  if (needs_cgroup(cgroups(), run.settings)) {
    auto made = linux_api::SandboxCgroup::make(cgroups(), spec.id, run.settings,
                                               linux_api::SandboxCgroup::Hierarchies::UnifiedFirst);
    if (!made) return std::move(made).error().with_context("creating the sandbox's cgroup");
    run.cgroup = std::move(made).value();
    plan.cgroup_fd = run.cgroup->unified_fd();
  }
  core::trace_phase("native: cgroup created");

  int out_pipe[2], err_pipe[2], channel[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) {
    return Error::from_errno("native", "creating the sandbox's pipes");
  }
  run.out_read.reset(out_pipe[0]);
  run.err_read.reset(err_pipe[0]);
  UniqueFd out_write(out_pipe[1]), err_write(err_pipe[1]);
  UniqueFd supervisor_end(channel[0]), child_end(channel[1]);
  core::move_above_stdio(out_write);
  core::move_above_stdio(err_write);
  core::move_above_stdio(child_end);
  plan.stdout_fd = out_write.get();
  plan.stderr_fd = err_write.get();
  plan.channel_fd = child_end.get();

  auto launched = runtime::launch_sandbox(
      plan, std::move(supervisor_end), [&run, &state](pid_t pid, bool in_cgroup) -> core::Status {
        // What init uses right after "go": the cgroups it joins, the
        // mount points and the base mount steps.
        PB_CHECK(ensure_mount_points(state));
        PB_TRY(base, runtime::build_base_mount_steps(run.layout));
        run.plan.base_mounts = std::move(base);
        if (!run.cgroup) return core::ok_status();
        PB_CHECK(run.cgroup->make_others());
        const std::vector<int> task_fds = run.cgroup->self_join_fds();
        if (task_fds.size() > std::size(run.plan.cgroup_task_fds)) {
          return Error(core::ErrorKind::kInternal, "native", "more v1 cgroups than init can join");
        }
        std::copy(task_fds.begin(), task_fds.end(), run.plan.cgroup_task_fds);
        run.plan.cgroup_task_fd_count = static_cast<int>(task_fds.size());
        return run.cgroup->attach_rest(pid, in_cgroup);
      });
  if (!launched) {
    run.launch_error = launched.error().to_string();
    return core::ok_status();
  }
  run.sandbox = std::move(launched).value();
  run.launched = true;
  core::trace_phase("native: launched (id maps written, go sent)");
  PB_CHECK(ensure_private_dir(state / "trash", 0700));
  PB_CHECK(ensure_private_dir(state / "pool", 0700));

  // The staging directory (its lock is held since before the cgroup).
  PB_CHECK(make_staging(state / "pool", run.run_dir));
  run.staging_made = true;
  core::trace_phase("native: staging directory made");
  return core::ok_status();
}

core::Status NativeHost::arm(SandboxRun& run, const ExecutionRequest& request,
                             const fs::path& workspace) {
  const ResourcePolicy& limits = request.limits;
  runtime::LaunchPlan& plan = run.plan;
  const linux_api::CgroupSettings& settings = run.settings;
  PB_TRY(idmapped_tree, prepare_staging(run.ids, options_, idmapping_, workspace, run.run_dir));
  core::trace_phase("native: staging directory ready");
  runtime::MountLayout& layout = run.layout;
  layout.workspace = workspace;
  layout.hidden_workspace_paths = request.hidden_workspace_paths;
  layout.lower_layers = request.lower_layers;
  layout.changes_size_bytes = changes_size_limit(limits).value_or(0);
  if (layout.changes_size_bytes > 0) {
    struct stat ws {};
    if (::stat(workspace.c_str(), &ws) != 0)
      return Error::from_errno("native", "workspace " + workspace.string());
    layout.upper_mode = ws.st_mode & 07777;
    layout.upper_uid = plan.command_uid;
    layout.upper_gid = plan.command_gid;
    plan.send_changes_root = runtime::changes_root(layout).string();
  }
  // Numbers init has free: it keeps only these three (and closed 0-2).
  const int free_fd = std::max({plan.channel_fd, plan.stdout_fd, plan.stderr_fd}) + 1;
  if (idmapped_tree) {
    plan.passed_tree_fd = free_fd;
    layout.idmapped_workspace_fd = plan.passed_tree_fd;
  }
  // Root's kept HOME: shown with the sandbox user as its owner, as the workspace is.
  UniqueFd home_tree;
  const auto home_bind =
      std::find_if(request.binds.begin(), request.binds.end(),
                   [](const BindMount& bind) { return bind.sandbox_path == core::kSandboxHome; });
  if (layout.idmap_home && home_bind != request.binds.end()) {
    PB_TRY(tree, native::idmapped_tree(run.ids, options_, idmapping_, home_bind->host));
    home_tree = std::move(tree);
    plan.passed_home_fd = free_fd + 1;
    layout.idmapped_home_fd = plan.passed_home_fd;
  }
  // The command's stdin: init takes it with the plan, the command makes it
  // its fd 0 (the caller keeps its own descriptor).
  plan.passed_stdin_fd = request.stdin_fd >= 0 && !request.terminal ? free_fd + 2 : -1;
  plan.terminal = request.terminal;
  plan.window = {};
  if (request.terminal && request.terminal_input_fd >= 0)
    (void)::ioctl(request.terminal_input_fd, TIOCGWINSZ, &plan.window);
  PB_CHECK(plan_network(run, request));
  plan.mounts = runtime::build_workspace_mount_steps(layout);
  // With a tmpfs of its own, init hands its root over as the run goes
  // (supervise.cc) and the changes are read through that descriptor.
  run.changes_dir = run.run_dir / "upper";

  plan.argv_storage = request.argv;
  auto environment = request.environment;
  if (run.network->setup == NetworkSetup::Proxy) {
    // The one way out: programs that honour the variables find it; the
    // others find no network at all.
    const std::string url = "http://127.0.0.1:" + std::to_string(kProxyPort);
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"})
      environment[name] = url;
    environment["NO_PROXY"] = environment["no_proxy"] = "localhost,127.0.0.1,::1";
  }
  for (const auto& [key, value] : environment)
    plan.env_storage.push_back(key + "=" + value);
  const auto path_it = request.environment.find("PATH");
  plan.exec_candidates = runtime::exec_candidates(
      request.argv[0], path_it != request.environment.end() ? path_it->second : "/usr/bin:/bin");
  plan.cwd = request.cwd.empty() ? "/workspace" : "/workspace/" + request.cwd;
  plan.seal();
  core::trace_phase("native: mounts planned");
  if (request.seccomp_profile != "unconfined") {
    PB_TRY(filter, filters_->get(request.seccomp_profile));
    run.filter = std::move(filter);
    plan.load_seccomp = true;
    plan.seccomp_listener = run.filter->uses_listener;
    plan.seccomp_program.len = static_cast<unsigned short>(run.filter->program.size());
    plan.seccomp_program.filter = const_cast<sock_filter*>(run.filter->program.data());
  }
  core::trace_phase("native: seccomp filter ready");
  auto add_limit = [&](int resource, std::uint64_t value) {
    plan.rlimits.push_back({resource, rlimit{value, value}});
  };
  add_limit(RLIMIT_NOFILE, limits.max_open_files);
  add_limit(RLIMIT_CORE, 0);
  // Only without a memory cgroup. RLIMIT_DATA, not RLIMIT_AS: the JVM and Go
  // reserve address space (PROT_NONE) far beyond what they use, which only
  // RLIMIT_AS counts.
  if (!settings.memory_max && limits.memory_rlimit_fallback) {
    add_limit(RLIMIT_DATA, limits.memory_bytes);
  }
  // +1: in the rootless layout init runs as the sandbox uid too.
  if (!settings.pids_max) add_limit(RLIMIT_NPROC, limits.max_processes + 1);
  // CPU time: the supervisor reads the cgroup's total; RLIMIT_CPU (per
  // process, whole seconds) only without it, so the two never race.
  if (limits.cpu_time_seconds && !cgroups().cpu_accounting.usable) {
    add_limit(RLIMIT_CPU, static_cast<std::uint64_t>(std::ceil(*limits.cpu_time_seconds)));
  }
  PB_CHECK(make_network(run, request, network_facts()));
  core::trace_phase("native: network made");
  // init has its own copy of the tree once it takes the message. If it
  // cannot take it, a base mount failed and init has ended (its error waits
  // in the channel and is reported at the run's end) or it is unreachable:
  // either way it goes.
  const int passed[] = {idmapped_tree.get(), home_tree.get(),
                        plan.passed_stdin_fd >= 0 ? request.stdin_fd : -1};
  if (!runtime::send_plan_ready(run.sandbox.channel.get(), passed, 3)) {
    linux_api::sys_pidfd_send_signal(run.sandbox.pidfd.get(), SIGKILL);
  }
  core::trace_phase("native: plan sent");
  return core::ok_status();
}

}  // namespace pulsebox::backends::native
