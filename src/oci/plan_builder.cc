#include "oci/plan_builder.h"

#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <set>
#include <string_view>

#include "linux/caps.h"
#include "oci/hooks.h"
#include "oci/invalid_input.h"
#include "oci/launch/join.h"
#include "runtime/plan.h"
#include "seccomp/compiler.h"

namespace pulsebox::oci {
namespace {

using linux_api::MountOp;
using linux_api::MountStep;

// runc's PATH for a process.env without one.
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

core::Error not_yet(const std::string& path, const std::string& why) {
  return core::Error(core::ErrorKind::kUnsupported, "oci",
                     "config.json: " + path + ": not supported yet by pulsebox oci: " + why);
}

struct DefaultDevice {
  const char* path;
  unsigned major, minor;
};
// runc's default devices, made in every container.
constexpr DefaultDevice kDefaultDevices[] = {
    {"/dev/null", 1, 3},   {"/dev/zero", 1, 5},    {"/dev/full", 1, 7},
    {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},
};

// The options of one mount, told apart.
struct MountOptions {
  unsigned long flags = 0;  // MS_RDONLY, MS_NOSUID, ... as mount_setattr attributes take them
  bool bind = false;
  bool recursive = false;
  std::string data;      // filesystem options: "mode=755,size=64k"
  bool copy_up = false;  // tmpcopyup
  // MS_PRIVATE, MS_SLAVE or MS_UNBINDABLE, | MS_REC for the r- forms; 0: none
  // given. The option as written, for errors.
  unsigned long propagation = 0;
  std::string propagation_option;
};

// The flags of a propagation option; nullopt when `option` is none. shared
// is refused: the container's tree is a slave of the host's from its first
// step, so that nothing it mounts propagates back, and a peer group with the
// host (what shared means) is not made.
core::Result<std::optional<unsigned long>> propagation_of(const std::string& option,
                                                          const std::string& where) {
  const std::optional<unsigned long> flags = spec::propagation_flags(option);
  if (!flags) return flags;
  if ((*flags & MS_SHARED) != 0)
    return not_yet(where + " \"" + option + "\"",
                   "shared propagation with the host is not made (pulsebox never lets the "
                   "container's mounts propagate back to the host); use rslave to see the host's "
                   "new mounts, or rprivate");
  return flags;
}

core::Result<MountOptions> read_mount_options(const spec::Mount& mount, const std::string& where) {
  MountOptions result;
  for (const auto& option : mount.options) {
    static const std::pair<std::string_view, unsigned long> kFlags[] = {
        {"ro", MS_RDONLY},
        {"nosuid", MS_NOSUID},
        {"nodev", MS_NODEV},
        {"noexec", MS_NOEXEC},
        {"noatime", MS_NOATIME},
        {"nodiratime", MS_NODIRATIME},
        {"strictatime", MS_STRICTATIME},
    };
    // The kernel's defaults for a new mount.
    static const std::string_view kDefaults[] = {"rw",   "defaults", "suid",     "dev",
                                                 "exec", "atime",    "diratime", "relatime"};
    if (option == "bind" || option == "rbind") {
      result.bind = true;
      result.recursive = result.recursive || option == "rbind";
      continue;
    }
    const auto flag = std::find_if(std::begin(kFlags), std::end(kFlags),
                                   [&](const auto& entry) { return entry.first == option; });
    if (flag != std::end(kFlags)) {
      result.flags |= flag->second;
      continue;
    }
    if (std::find(std::begin(kDefaults), std::end(kDefaults), option) != std::end(kDefaults))
      continue;
    if (option == "tmpcopyup") {
      result.copy_up = true;
      continue;
    }
    PB_TRY(propagation, propagation_of(option, where + ".options"));
    if (propagation) {
      result.propagation = *propagation;
      result.propagation_option = option;
      continue;
    }
    if (spec::is_mount_flag_option(option))
      return not_yet(where + ".options \"" + option + "\"",
                     "this mount flag or propagation is not applied yet; remove it");
    if (!result.data.empty()) result.data += ",";
    result.data += option;
  }
  return result;
}

MountStep step(MountOp op, std::string target, std::string stage) {
  MountStep result;
  result.op = op;
  result.target = std::move(target);
  result.stage = std::move(stage);
  return result;
}

// The container's own leaves only (never the host's tree): on v2 the leaf
// itself, on a hybrid host a tmpfs holding one bind per hierarchy; all of
// it read-only when the options say ro (podman's do).
core::Status add_cgroup_mount(const spec::Mount& mount, const std::string& where,
                              const MountOptions& options, const PlanInputs& inputs,
                              launch::ContainerPlan& plan) {
  if (inputs.cgroup_views.empty())
    return not_yet(where,
                   "the container has no cgroup of its own to show (an ordinary "
                   "user's container without limits); remove the mount");
  if (!options.data.empty())
    return not_yet(where + ".options \"" + options.data + "\"", "cgroup mounts take no options");
  const unsigned long attributes = options.flags | MS_NOSUID | MS_NODEV | MS_NOEXEC;
  if (inputs.cgroup_views.size() == 1 && inputs.cgroup_views[0].name.empty()) {
    MountStep bind = step(MountOp::Bind, mount.destination, "binding the container's cgroup");
    bind.source = inputs.cgroup_views[0].leaf;
    bind.recursive = false;
    bind.flags = attributes;
    plan.mounts.push_back(std::move(bind));
    return core::ok_status();
  }
  MountStep tmpfs = step(MountOp::Tmpfs, mount.destination, "mounting a tmpfs for the cgroups");
  tmpfs.flags = attributes & ~static_cast<unsigned long>(MS_RDONLY);
  tmpfs.data = "mode=755";
  plan.mounts.push_back(std::move(tmpfs));
  for (const auto& view : inputs.cgroup_views) {
    MountStep bind = step(MountOp::Bind, mount.destination + "/" + view.name,
                          "binding the container's " + view.name + " cgroup");
    bind.source = view.leaf;
    bind.recursive = false;
    bind.flags = attributes;
    plan.mounts.push_back(std::move(bind));
  }
  if ((options.flags & MS_RDONLY) != 0) {
    MountStep read_only =
        step(MountOp::ReadOnly, mount.destination, "making the cgroup mount read-only");
    plan.mounts.push_back(std::move(read_only));
  }
  return core::ok_status();
}

core::Status add_mount(const spec::Spec& spec, std::size_t index, const PlanInputs& inputs,
                       launch::ContainerPlan& plan) {
  const spec::Mount& mount = spec.mounts[index];
  const std::string where = "mounts[" + std::to_string(index) + "] (" + mount.destination + ")";
  PB_TRY(options, read_mount_options(mount, where));
  const std::string stage = "mounting " + mount.destination;
  if (options.bind || mount.type == "bind") {
    if (!options.data.empty())
      return not_yet(where + ".options \"" + options.data + "\"",
                     "a bind mount takes no filesystem options; remove them");
    MountStep bind = step(MountOp::Bind, mount.destination, "binding " + mount.destination);
    // runc: a relative source is under the bundle.
    std::filesystem::path source = mount.source;
    if (source.is_relative()) source = spec.bundle / source;
    bind.source = source.lexically_normal().string();
    bind.recursive = options.recursive;
    bind.flags = options.flags;
    bind.propagation = options.propagation;
    plan.mounts.push_back(std::move(bind));
    return core::ok_status();
  }
  // A new filesystem is private already (it has no peers, and a slave of
  // nothing is private): private and slave say nothing more for it.
  if ((options.propagation & MS_UNBINDABLE) != 0)
    return not_yet(where + ".options \"" + options.propagation_option + "\"",
                   "unbindable is applied to bind mounts only; remove it");
  // Proc and devpts get fixed attributes (nosuid, nodev, noexec; devpts
  // nosuid, noexec): an option asking for more is not applied yet.
  const auto fixed = [&](unsigned long allowed) -> core::Status {
    if ((options.flags & ~allowed) != 0)
      return not_yet(where + ".options", "only nosuid, nodev and noexec are applied to " +
                                             mount.type + "; remove the others");
    return core::ok_status();
  };
  if (options.copy_up && mount.type != "tmpfs")
    return oci::invalid("config.json: " + where + ".options \"tmpcopyup\": only for a tmpfs");
  if (options.copy_up) {
    const auto fd = inputs.copy_up_fds.find(index);
    if (fd == inputs.copy_up_fds.end())
      return core::Error(core::ErrorKind::kInternal, "oci",
                         "config.json: " + where + ": no tmpcopyup tree was made for it");
    MountStep attach = step(MountOp::AttachFd, mount.destination, stage);
    attach.fd = fd->second;
    plan.mounts.push_back(std::move(attach));
  } else if (mount.type == "tmpfs") {
    MountStep tmpfs = step(MountOp::Tmpfs, mount.destination, stage);
    tmpfs.flags = options.flags;
    tmpfs.data = options.data;
    plan.mounts.push_back(std::move(tmpfs));
  } else if (mount.type == "proc") {
    PB_CHECK(fixed(MS_NOSUID | MS_NODEV | MS_NOEXEC));
    if (!options.data.empty())
      return not_yet(where + ".options \"" + options.data + "\"", "proc takes no options yet");
    plan.mounts.push_back(step(MountOp::Proc, mount.destination, stage));
  } else if (mount.type == "devpts") {
    PB_CHECK(fixed(MS_NOSUID | MS_NOEXEC));
    MountStep devpts = step(MountOp::Devpts, mount.destination, stage);
    devpts.data = options.data;
    plan.mounts.push_back(std::move(devpts));
  } else if (mount.type == "sysfs" || mount.type == "mqueue") {
    if (!options.data.empty())
      return not_yet(where + ".options \"" + options.data + "\"",
                     mount.type + " takes no filesystem options");
    MountStep fs =
        step(mount.type == "sysfs" ? MountOp::Sysfs : MountOp::Mqueue, mount.destination, stage);
    fs.flags = options.flags;
    plan.mounts.push_back(std::move(fs));
  } else if (mount.type == "cgroup" || mount.type == "cgroup2") {
    PB_CHECK(add_cgroup_mount(mount, where, options, inputs, plan));
  } else {
    return not_yet(where + ".type \"" + mount.type + "\"",
                   "use bind, tmpfs, proc, sysfs, devpts or mqueue");
  }
  return core::ok_status();
}

// A device node: made with mknod as real root, else the host's node of the
// same path, type and numbers bound on it (mknod is refused in a user
// namespace).
core::Status add_device(const std::string& where, const std::string& path, char type,
                        unsigned major, unsigned minor, unsigned mode, int uid, int gid,
                        bool bind_host, launch::ContainerPlan& plan) {
  if (bind_host) {
    struct stat host {};
    const bool character = type == 'c' || type == 'u';
    if (::stat(path.c_str(), &host) != 0 ||
        (character ? !S_ISCHR(host.st_mode) : !S_ISBLK(host.st_mode)) ||
        ::major(host.st_rdev) != major || ::minor(host.st_rdev) != minor) {
      return core::Error(core::ErrorKind::kUnsupported, "oci",
                         "config.json: " + where + ": " + path +
                             ": no host device with the same type and numbers to bind in a "
                             "user namespace; remove the device or run as root");
    }
    MountStep bind = step(MountOp::Bind, path, "binding the device " + path);
    bind.source = path;
    bind.recursive = false;
    plan.mounts.push_back(std::move(bind));
    return core::ok_status();
  }
  MountStep node = step(MountOp::MakeDevice, path, "making the device " + path);
  node.mode = (type == 'b' ? S_IFBLK : type == 'p' ? S_IFIFO : S_IFCHR) | (mode & 07777);
  node.device = type == 'p' ? 0 : makedev(major, minor);
  node.uid = uid;
  node.gid = gid;
  plan.mounts.push_back(std::move(node));
  return core::ok_status();
}

core::Status add_devices(const spec::Spec& spec, bool bind_host, launch::ContainerPlan& plan) {
  std::set<std::string> listed;
  for (const auto& device : spec.linux.devices)
    listed.insert(device.path);
  for (const auto& device : kDefaultDevices) {
    if (listed.count(device.path)) continue;  // linux.devices says how
    PB_CHECK(add_device("the default devices", device.path, 'c', device.major, device.minor, 0666,
                        -1, -1, bind_host, plan));
  }
  for (std::size_t i = 0; i < spec.linux.devices.size(); ++i) {
    const auto& device = spec.linux.devices[i];
    const std::string where = "linux.devices[" + std::to_string(i) + "]";
    if (bind_host && device.type == 'p')
      return not_yet(where, "a fifo device cannot be bound from the host in a user namespace");
    PB_CHECK(add_device(where, device.path, device.type, static_cast<unsigned>(device.major),
                        static_cast<unsigned>(device.minor), device.file_mode.value_or(0666),
                        device.uid ? static_cast<int>(*device.uid) : -1,
                        device.gid ? static_cast<int>(*device.gid) : -1, bind_host, plan));
  }
  // runc's /dev links; ptmx leads to the container's own devpts.
  static const std::pair<const char*, const char*> kLinks[] = {
      {"/dev/fd", "/proc/self/fd"},       {"/dev/stdin", "/proc/self/fd/0"},
      {"/dev/stdout", "/proc/self/fd/1"}, {"/dev/stderr", "/proc/self/fd/2"},
      {"/dev/ptmx", "pts/ptmx"},
  };
  for (const auto& [link, target] : kLinks) {
    if (listed.count(link)) continue;
    MountStep symlink = step(MountOp::Symlink, link, std::string("linking ") + link);
    symlink.source = target;
    plan.mounts.push_back(std::move(symlink));
  }
  return core::ok_status();
}

// A sysctl is written in the namespace the container is in: joined by a
// path naming the runtime's own (the host's), it would change the host's
// (runc refuses net.* there: "not allowed in host network namespace").
core::Status refuse_sysctl_in_runtimes_namespace(const spec::Spec& spec, const PlanInputs& inputs,
                                                 const std::string& key) {
  const int type = spec::sysctl_namespace(key);
  if (type == 0) return core::ok_status();  // refused when the spec was read
  // /proc/self/ns's name: config.json's "network" is "net" there.
  const std::string name = type == CLONE_NEWNET ? "net" : std::string(spec::namespace_name(type));
  for (std::size_t i = 0; i < spec.linux.namespaces.size(); ++i) {
    if (spec.linux.namespaces[i].clone_flag != type || spec.linux.namespaces[i].path.empty())
      continue;
    const auto fd = inputs.namespace_fds.find(i);
    struct stat joined {
    }, own{};
    // Unknown is refused like the host's own: the write must be provably
    // elsewhere.
    if (fd == inputs.namespace_fds.end() || ::fstat(fd->second, &joined) != 0 ||
        ::stat(("/proc/self/ns/" + name).c_str(), &own) != 0)
      return core::Error::from_errno(
          "oci", "config.json: linux.sysctl." + key + ": comparing linux.namespaces[" +
                     std::to_string(i) + "].path with the runtime's own");
    if (joined.st_dev == own.st_dev && joined.st_ino == own.st_ino)
      return oci::invalid("config.json: linux.sysctl." + key + ": linux.namespaces[" +
                          std::to_string(i) + "].path is the runtime's own " + name +
                          " namespace (the host's): the write would change it; remove "
                          "the sysctl or join a namespace of the container's own");
  }
  return core::ok_status();
}

// The config's filter, for create's and exec's process alike. No
// supervisor stays with the container: the kernel kills. libseccomp's tree,
// not the ranges: the filter is compiled for every create and loaded once,
// and the ranges' check against libseccomp's program costs more than it
// saves on one load (docs/benchmarks.md).
core::Status add_seccomp(const spec::Spec& spec, launch::ContainerPlan& plan) {
  if (!spec.linux.seccomp) return core::ok_status();
  PB_TRY(filter, seccomp::compile(*spec.linux.seccomp, seccomp::Layout::BinaryTree,
                                  seccomp::KillActions::Kernel));
  plan.seccomp_program = filter->program;
  plan.seccomp_flags = filter->load_flags;
  return core::ok_status();
}

// linux.namespaces[i].path: joined through the descriptor create opened.
core::Status add_joined_namespace(const spec::Spec& spec, std::size_t i, const PlanInputs& inputs,
                                  launch::ContainerPlan& plan) {
  const auto& ns = spec.linux.namespaces[i];
  const std::string where = "linux.namespaces[" + std::to_string(i) + "].path";
  if (ns.clone_flag == CLONE_NEWNS)
    return not_yet(where,
                   "the container's mounts and pivot_root would change a joined mount "
                   "namespace for every process in it; give no path for \"mount\"");
  const auto fd = inputs.namespace_fds.find(i);
  plan.join_namespaces.push_back(
      {fd == inputs.namespace_fds.end() ? -1 : fd->second, ns.clone_flag});
  return core::ok_status();
}

core::Status add_namespaces(const spec::Spec& spec, const PlanInputs& inputs,
                            launch::ContainerPlan& plan) {
  bool has_mount = false;
  for (std::size_t i = 0; i < spec.linux.namespaces.size(); ++i) {
    const auto& ns = spec.linux.namespaces[i];
    if (!ns.path.empty()) {
      PB_CHECK(add_joined_namespace(spec, i, inputs, plan));
      continue;
    }
    switch (ns.clone_flag) {
      case CLONE_NEWUSER:
      case CLONE_NEWPID:
        plan.clone_namespaces |= static_cast<std::uint64_t>(ns.clone_flag);
        break;
      case CLONE_NEWCGROUP:
        plan.new_cgroup_namespace = true;
        break;
      case CLONE_NEWNS:
        has_mount = true;
        [[fallthrough]];
      default:
        plan.unshare_namespaces |= static_cast<std::uint64_t>(ns.clone_flag);
    }
  }
  // Every rooted mount step and pivot_root happen in the container's own
  // mount namespace, never the host's.
  if (!has_mount)
    return core::Error(core::ErrorKind::kUnsupported, "oci",
                       "config.json: linux.namespaces: pulsebox oci needs a mount namespace; add "
                       "{\"type\": \"mount\"}");
  if (!spec.hostname.empty() && (plan.unshare_namespaces & CLONE_NEWUTS) == 0)
    return oci::invalid("config.json: hostname: needs a uts namespace; add {\"type\": \"uts\"}");
  std::sort(plan.join_namespaces.begin(), plan.join_namespaces.end(),
            [](const auto& a, const auto& b) {
              return launch::join_rank(a.type) < launch::join_rank(b.type);
            });
  if (!plan.join_namespaces.empty() && (plan.clone_namespaces & CLONE_NEWUSER) != 0)
    return not_yet("linux.namespaces",
                   "a new user namespace together with a namespace path; join an existing "
                   "user namespace by path instead, or give no paths");
  if ((plan.clone_namespaces & CLONE_NEWUSER) != 0) {
    plan.id_maps = spec.linux.id_maps;
    plan.set_groups = !spec.linux.id_maps.deny_setgroups;
  }
  return core::ok_status();
}

core::Status add_process(const spec::Process& process, launch::ContainerPlan& plan) {
  plan.uid = process.user.uid;
  plan.gid = process.user.gid;
  plan.additional_gids.assign(process.user.additional_gids.begin(),
                              process.user.additional_gids.end());
  if (process.user.umask) plan.umask = static_cast<mode_t>(*process.user.umask);
  plan.cwd = process.cwd.empty() ? "/" : process.cwd;
  plan.capabilities = process.capabilities;
  // The kernel raises an ambient capability only when it is both permitted
  // and inheritable; runc and crun leave the others out and run (`runc
  // spec` asks for ambient capabilities it does not make inheritable).
  // create reports the ones left out (ambient_left_out).
  plan.capabilities.ambient &= process.capabilities.permitted & process.capabilities.inheritable;
  plan.last_capability = linux_api::prepare_capability_drop().last_capability;
  plan.no_new_privileges = process.no_new_privileges;
  plan.oom_score_adj = process.oom_score_adj;
  for (const auto& limit : process.rlimits)
    plan.rlimits.push_back({limit.resource, limit.soft, limit.hard});
  plan.args = process.args;
  plan.env = process.env;
  std::string path = kDefaultPath;
  for (const auto& entry : process.env) {
    if (entry.rfind("PATH=", 0) == 0) path = entry.substr(5);
  }
  plan.exec_candidates = runtime::exec_candidates(process.args.front(), path);
  if (plan.exec_candidates.empty())
    return oci::invalid("config.json: process.args[0] \"" + process.args.front() +
                        "\": not found on the PATH of process.env (" + path +
                        "); give an absolute path");
  if (process.console_size) {
    plan.console_rows = process.console_size->first;
    plan.console_columns = process.console_size->second;
  }
  return core::ok_status();
}

// The state JSON without its closing brace, ending in `"pid":`.
std::string state_before_pid(const spec::Spec& spec, const std::string& id,
                             const std::string& status) {
  std::string text = hook_state_json({id, status, 0, spec.bundle.string(), spec.annotations});
  text.pop_back();  // '}'
  return text + ",\"pid\":";
}

void add_container_hooks(const spec::Spec& spec, const std::string& id,
                         launch::ContainerPlan& plan) {
  const auto convert = [](const spec::Hook& hook) {
    launch::ContainerHook out;
    out.stage = hook.name + " (" + hook.path + ")";
    out.path = hook.path;
    out.args = hook.args.empty() ? std::vector<std::string>{hook.path} : hook.args;
    out.env = hook.env;
    out.timeout_seconds = hook.timeout.value_or(kDefaultHookTimeoutSeconds);
    return out;
  };
  for (const auto& hook : spec.hooks.create_container)
    plan.create_container_hooks.push_back(convert(hook));
  for (const auto& hook : spec.hooks.start_container)
    plan.start_container_hooks.push_back(convert(hook));
  if (!plan.create_container_hooks.empty())
    plan.create_container_state = state_before_pid(spec, id, "creating");
  if (!plan.start_container_hooks.empty())
    plan.start_container_state = state_before_pid(spec, id, "created");
}

// The descriptors create and exec both hand to the process: stdio, the
// preserved fds, the console socket and the cgroup to clone into.
core::Status take_process_fds(const PlanInputs& inputs, launch::ContainerPlan& plan) {
  if (inputs.cgroup_task_fds.size() > launch::ContainerPlan::kMaxCgroupTaskFiles)
    return core::Error(core::ErrorKind::kInternal, "oci",
                       "more v1 cgroup leaves than the container's process can join");
  for (int fd = 0; fd < 3; ++fd)
    plan.stdio[fd] = inputs.stdio[fd];
  plan.preserved_fds = inputs.preserved_fds;
  plan.console_socket_fd = inputs.console_socket_fd;
  plan.cgroup_fd = inputs.cgroup_fd;
  std::copy_n(inputs.cgroup_task_fds.begin(), inputs.cgroup_task_fds.size(), plan.cgroup_task_fds);
  plan.cgroup_task_fd_count = static_cast<int>(inputs.cgroup_task_fds.size());
  return core::ok_status();
}

}  // namespace

core::Result<launch::ContainerPlan> build_container_plan(const spec::Spec& spec,
                                                         const PlanInputs& inputs) {
  if (!spec.process)
    return oci::invalid("config.json: process: missing; create needs the container's process");
  launch::ContainerPlan plan;
  PB_CHECK(add_namespaces(spec, inputs, plan));
  plan.rootfs = spec.root_path.string();
  plan.root_readonly = spec.root_readonly;
  if (!spec.linux.rootfs_propagation.empty()) {
    PB_TRY(propagation, propagation_of(spec.linux.rootfs_propagation, "linux.rootfsPropagation"));
    plan.root_propagation = propagation.value_or(0);
  }
  // The reader let through only keys of the container's own namespaces.
  for (const auto& [key, value] : spec.linux.sysctl) {
    PB_CHECK(refuse_sysctl_in_runtimes_namespace(spec, inputs, key));
    // The dotted form's separators become the path's, its '/' a dot.
    std::string path = "proc/sys/";
    for (char c : key)
      path += c == '.' ? '/' : c == '/' ? '.' : c;
    const auto slash = path.rfind('/');
    plan.sysctls.push_back(
        {path.substr(0, slash), path.substr(slash + 1), value, "writing linux.sysctl." + key});
  }
  // createRuntime, poststart and poststop are the runtime's (oci/hooks.h);
  // these two the process runs itself.
  add_container_hooks(spec, inputs.container_id, plan);
  plan.pause_for_runtime_hooks = !spec.hooks.create_runtime.empty();

  for (std::size_t i = 0; i < spec.mounts.size(); ++i)
    PB_CHECK(add_mount(spec, i, inputs, plan));
  const bool user_namespace = (plan.clone_namespaces & CLONE_NEWUSER) != 0;
  PB_CHECK(add_devices(spec, user_namespace || !inputs.can_mknod, plan));
  plan.masked_paths = spec.linux.masked_paths;
  plan.readonly_paths = spec.linux.readonly_paths;
  plan.hostname = spec.hostname;
  plan.domainname = spec.domainname;
  plan.personality = spec.linux.personality;

  const spec::Process& process = *spec.process;
  if (process.terminal && inputs.console_socket_fd < 0)
    return oci::invalid("config.json: process.terminal is true: give --console-socket");
  if (!process.terminal && inputs.console_socket_fd >= 0)
    return oci::invalid("--console-socket: given, but process.terminal is false in config.json");
  PB_CHECK(add_process(process, plan));

  PB_CHECK(add_seccomp(spec, plan));

  PB_CHECK(take_process_fds(inputs, plan));
  plan.exec_fifo_fd = inputs.exec_fifo_fd;
  plan.exec_fifo_writer_fd = inputs.exec_fifo_writer_fd;
  plan.new_session_keyring = inputs.new_session_keyring;
  plan.seal();
  return plan;
}

core::Result<launch::ContainerPlan> build_exec_plan(const spec::Spec& spec,
                                                    const spec::Process& process,
                                                    const PlanInputs& inputs) {
  if (process.args.empty())
    return oci::invalid("exec: the process has no args; give the program to run");
  if (process.terminal && inputs.console_socket_fd < 0)
    return oci::invalid("exec: the process has a terminal: give --console-socket");
  if (!process.terminal && inputs.console_socket_fd >= 0)
    return oci::invalid("--console-socket: given, but the process has no terminal (--tty)");
  launch::ContainerPlan plan;
  PB_CHECK(add_process(process, plan));
  if (process.rlimits.empty() && spec.process) {
    for (const auto& limit : spec.process->rlimits)
      plan.rlimits.push_back({limit.resource, limit.soft, limit.hard});
  }
  const spec::Namespace* user = spec.find_namespace(CLONE_NEWUSER);
  if (user != nullptr && user->path.empty()) plan.set_groups = !spec.linux.id_maps.deny_setgroups;
  if (!plan.set_groups && !plan.additional_gids.empty())
    return oci::invalid(
        "exec: process.user.additionalGids: setgroups is denied in the "
        "container's user namespace; remove them");
  PB_CHECK(add_seccomp(spec, plan));
  PB_CHECK(take_process_fds(inputs, plan));
  plan.seal();
  return plan;
}

std::vector<std::size_t> copy_up_mounts(const spec::Spec& spec) {
  std::vector<std::size_t> indexes;
  for (std::size_t i = 0; i < spec.mounts.size(); ++i) {
    const auto& options = spec.mounts[i].options;
    if (std::find(options.begin(), options.end(), "tmpcopyup") != options.end())
      indexes.push_back(i);
  }
  return indexes;
}

core::Result<std::pair<unsigned long, std::string>> mount_flags_and_data(const spec::Spec& spec,
                                                                         std::size_t index) {
  const spec::Mount& mount = spec.mounts.at(index);
  PB_TRY(options, read_mount_options(
                      mount, "mounts[" + std::to_string(index) + "] (" + mount.destination + ")"));
  return std::make_pair(options.flags, options.data);
}

std::vector<spec::DeviceRule> device_rules(const spec::Spec& spec) {
  // Nothing is allowed unless a rule says so (runc's starting point too).
  std::vector<spec::DeviceRule> rules(1);
  rules.insert(rules.end(), spec.linux.resources.devices.begin(),
               spec.linux.resources.devices.end());
  const auto allow = [&](char type, std::int64_t major, std::int64_t minor) {
    spec::DeviceRule rule;
    rule.allow = true;
    rule.type = type;
    rule.major = major;
    rule.minor = minor;
    rule.access = "rwm";
    rules.push_back(rule);
  };
  // runc's first implicit allows: mknod of any node (opening one is what
  // the rules guard; images make nodes while building).
  const auto allow_mknod = [&](char type) {
    allow(type, -1, -1);
    rules.back().access = "m";
  };
  allow_mknod('c');
  allow_mknod('b');
  for (const auto& device : kDefaultDevices)
    allow('c', device.major, device.minor);
  allow('c', 5, 1);     // /dev/console
  allow('c', 5, 2);     // /dev/ptmx
  allow('c', 136, -1);  // the pts
  for (const auto& device : spec.linux.devices) {
    if (device.type == 'p') continue;  // a fifo is no device to the cgroup
    allow(device.type == 'b' ? 'b' : 'c', device.major, device.minor);
  }
  return rules;
}

core::Result<CgroupResources> cgroup_resources(const spec::Resources& resources) {
  CgroupResources result;
  if (resources.memory) {
    const auto& memory = *resources.memory;
    if (memory.use_hierarchy || memory.check_before_update)
      return not_yet("linux.resources.memory",
                     "useHierarchy and checkBeforeUpdate are not applied; remove them");
    result.memory_limit = memory.limit;
    result.memory_swap = memory.swap;
    result.memory_reservation = memory.reservation;
    result.memory_swappiness = memory.swappiness;
    result.disable_oom_killer = memory.disable_oom_killer.value_or(false);
  }
  result.pids_limit = resources.pids_limit;
  if (resources.cpu) {
    const auto& cpu = *resources.cpu;
    result.cpu_shares = cpu.shares;
    result.cpu_quota = cpu.quota;
    result.cpu_period = cpu.period;
    result.cpu_burst = cpu.burst;
    result.cpu_idle = cpu.idle;
    result.cpuset_cpus = cpu.cpus;
    result.cpuset_mems = cpu.mems;
  }
  if (resources.block_io) {
    const auto& block = *resources.block_io;
    BlockIoLimits limits;
    limits.weight = block.weight.value_or(0);
    limits.leaf_weight = block.leaf_weight.value_or(0);
    // Index for index with the config's weightDevice (0: that one unset).
    for (const auto& entry : block.weight_device) {
      limits.weight_device.push_back({entry.major, entry.minor, entry.weight.value_or(0)});
      limits.leaf_weight_device.push_back(
          {entry.major, entry.minor, entry.leaf_weight.value_or(0)});
    }
    const auto rates = [](const std::vector<spec::BlockIoDevice>& entries) {
      std::vector<BlockDeviceValue> out;
      for (const auto& entry : entries)
        out.push_back({entry.major, entry.minor, entry.rate});
      return out;
    };
    limits.read_bps = rates(block.throttle_read_bps);
    limits.write_bps = rates(block.throttle_write_bps);
    limits.read_iops = rates(block.throttle_read_iops);
    limits.write_iops = rates(block.throttle_write_iops);
    result.block_io = std::move(limits);
  }
  for (const auto& limit : resources.hugepage_limits)
    result.hugepage_limits.push_back({limit.page_size, limit.limit});
  result.unified = resources.unified;
  return result;
}

}  // namespace pulsebox::oci
