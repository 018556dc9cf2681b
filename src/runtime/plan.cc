#include "runtime/plan.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include <algorithm>

#include "core/sandbox_home.h"

namespace pulsebox::runtime {

using core::Error;
using core::ErrorKind;
using linux_api::MountOp;
using linux_api::MountStep;

namespace {

bool is_under(const std::string& path, const std::string& dir) {
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         (dir == "/" || path[dir.size()] == '/'));
}

class StepList {
 public:
  // `root`: where the new root is mounted; `empty_file` and `empty_dir`:
  // what masks are bound from.
  StepList(std::string root, std::string empty_file, std::string empty_dir)
      : root_(std::move(root)),
        empty_file_(std::move(empty_file)),
        empty_dir_(std::move(empty_dir)) {}

  std::string in_root(const std::string& path) const { return root_ + path; }

  void add(MountOp op, const std::string& target, std::string stage, std::string source = "",
           std::string data = "", unsigned long flags = 0) {
    MountStep step;
    step.op = op;
    step.target = in_root(target);
    step.source = std::move(source);
    step.data = std::move(data);
    step.flags = flags;
    step.stage = std::move(stage);
    steps_.push_back(std::move(step));
  }
  MountStep& last() { return steps_.back(); }
  void add_raw(MountStep step) { steps_.push_back(std::move(step)); }

  void make_dir(const std::string& path, unsigned mode = 0755) {
    add(MountOp::MakeDir, path, "creating " + path);
    last().mode = mode;
  }
  void bind_read_only(const std::string& host, const std::string& path, bool recursive = true) {
    add(MountOp::Bind, path, "bind-mounting " + host + " on " + path, host);
    last().recursive = recursive;
    add(MountOp::ReadOnly, path, "making " + path + " read-only");
    last().recursive = recursive;
  }
  void tmpfs(const std::string& path, const std::string& data, unsigned long flags) {
    add(MountOp::Tmpfs, path, "mounting tmpfs on " + path, "", data, flags);
  }
  // The read-only sources masks are bound from: the shared empty file and
  // empty directory, each bound on itself and made read-only (host paths,
  // in the sandbox's namespace only; they go with the old root). A bind of a
  // read-only mount is read-only, nosuid and nodev from the start, so each
  // mask is then one mount(2), with no file system of its own to create and
  // tear down.
  void bind_mask_sources() {
    for (const auto& source : {empty_file_, empty_dir_}) {
      MountStep bind;
      bind.op = MountOp::Bind;
      bind.source = source;
      bind.target = source;
      bind.recursive = false;
      bind.stage = "bind-mounting " + source + " on itself";
      add_raw(std::move(bind));
      MountStep read_only;
      read_only.op = MountOp::ReadOnly;
      read_only.target = source;
      read_only.recursive = false;
      read_only.stage = "making " + source + " read-only";
      add_raw(std::move(read_only));
    }
  }
  // Hides a host file or directory under an empty read-only one (a file or
  // directory the kernel does not have here is skipped).
  void mask(const std::string& path, bool is_directory) {
    const std::string& source = is_directory ? empty_dir_ : empty_file_;
    add(MountOp::Bind, path, "bind-mounting " + source + " on " + path, source);
    last().recursive = false;
    last().optional = true;
  }

  std::vector<MountStep> take() { return std::move(steps_); }

 private:
  std::string root_;
  std::string empty_file_;
  std::string empty_dir_;
  std::vector<MountStep> steps_;
};

}  // namespace

std::string check_bind_target(const std::string& sandbox_path,
                              const std::vector<std::string>& system_paths) {
  const std::filesystem::path path(sandbox_path);
  if (!path.is_absolute()) return "the sandbox path must be absolute";
  // Components that start with a dot (/root/.cache) are names like others;
  // only "." and ".." themselves are refused.
  bool dot_component = false;
  for (const auto& part : path.relative_path()) {
    if (part == "." || part == "..") dot_component = true;
  }
  if (dot_component || path.lexically_normal().string() != sandbox_path ||
      (sandbox_path.size() > 1 && sandbox_path.back() == '/')) {
    return "the sandbox path must be normal (no ., .. or trailing /)";
  }
  if (sandbox_path == "/") return "cannot bind over the sandbox's root";
  for (const char* own : {"/workspace", "/proc", "/dev"}) {
    if (is_under(sandbox_path, own)) return std::string("cannot bind inside ") + own;
  }
  for (const auto& system : system_paths) {
    if (is_under(sandbox_path, system)) return "cannot bind inside the read-only " + system;
  }
  return "";
}

namespace {

StepList step_list_for(const MountLayout& layout) {
  return StepList((layout.mount_points / "root").string(), (layout.mount_points / "empty").string(),
                  (layout.mount_points / "empty-dir").string());
}

}  // namespace

core::Status check_extra_binds(const MountLayout& layout) {
  for (const auto& bind : layout.binds) {
    const std::string problem = check_bind_target(bind.sandbox_path, layout.system_paths);
    if (!problem.empty()) {
      return Error(ErrorKind::kInvalidInput, "mounts",
                   "bind " + bind.host.string() + " -> " + bind.sandbox_path + ": " + problem);
    }
    struct stat st {};
    if (::stat(bind.host.c_str(), &st) != 0) {
      return Error::from_errno("mounts", "bind source " + bind.host.string())
          .with_kind(ErrorKind::kInvalidInput);
    }
  }
  return core::ok_status();
}

core::Result<std::vector<MountStep>> build_base_mount_steps(const MountLayout& layout) {
  StepList steps = step_list_for(layout);
  steps.bind_mask_sources();

  // The root: a small tmpfs holding only mount points, /dev's entries and
  // symlinks (read-only after pivot_root).
  steps.add(MountOp::Tmpfs, "", "mounting the sandbox's root (tmpfs)", "", "mode=0755,size=1m",
            MS_NOSUID | MS_NODEV | MS_NOEXEC);

  // System directories, read-only; merged-/usr symlinks are recreated.
  for (const auto& system : layout.system_paths) {
    struct stat st {};
    if (::lstat(system.c_str(), &st) != 0) continue;
    if (S_ISLNK(st.st_mode)) {
      std::error_code ec;
      const auto target = std::filesystem::read_symlink(system, ec);
      if (!ec) steps.add(MountOp::Symlink, system, "linking " + system, target.string());
      continue;
    }
    if (!S_ISDIR(st.st_mode)) continue;
    // Parents first (e.g. /usr/local/lib under /usr is already covered).
    std::string partial;
    for (const auto& part : std::filesystem::path(system).relative_path()) {
      partial += "/" + part.string();
      if (partial != system) steps.make_dir(partial);
    }
    steps.make_dir(system);
    steps.bind_read_only(system, system);
  }
  for (const auto& hidden : layout.hidden_paths) {
    struct stat st {};
    if (::lstat(hidden.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    bool visible = false;
    for (const auto& system : layout.system_paths)
      visible = visible || is_under(hidden, system);
    if (visible) steps.mask(hidden, S_ISDIR(st.st_mode));
  }

  // A fresh /proc, with the parts that reveal or change the host masked or
  // read-only (crun's list).
  steps.make_dir("/proc");
  steps.add(MountOp::Proc, "/proc", "mounting proc on /proc");
  for (const char* file : {"/proc/kcore", "/proc/keys", "/proc/timer_list", "/proc/sched_debug",
                           "/proc/latency_stats", "/proc/kallsyms"}) {
    steps.mask(file, false);
  }
  for (const char* dir : {"/proc/acpi", "/proc/scsi"}) {
    steps.mask(dir, true);
  }
  for (const char* path :
       {"/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus", "/proc/fs", "/proc/asound"}) {
    const std::string in_root = steps.in_root(path);
    steps.add(MountOp::Bind, path, std::string("bind-mounting ") + path + " on itself", in_root);
    steps.last().optional = true;
    steps.add(MountOp::ReadOnly, path, std::string("making ") + path + " read-only");
    steps.last().optional = true;
  }

  // A minimal /dev, on the root's tmpfs (read-only with it): the device
  // files are binds of the host's, each its own mount.
  steps.make_dir("/dev");
  for (const char* device : {"null", "zero", "full", "random", "urandom", "tty"}) {
    const std::string path = std::string("/dev/") + device;
    steps.add(MountOp::MakeFile, path, "creating " + path);
    steps.last().mode = 0666;
    steps.add(MountOp::Bind, path, "bind-mounting " + path, path);
    steps.last().recursive = false;
  }
  steps.make_dir("/dev/pts");
  steps.add(MountOp::Devpts, "/dev/pts", "mounting devpts on /dev/pts", "",
            "newinstance,ptmxmode=0666,mode=620");
  steps.add(MountOp::Symlink, "/dev/ptmx", "linking /dev/ptmx", "pts/ptmx");
  steps.make_dir("/dev/shm");
  const std::string size =
      layout.tmpfs_size_bytes > 0 ? ",size=" + std::to_string(layout.tmpfs_size_bytes) : "";
  steps.tmpfs("/dev/shm", "mode=1777" + size, MS_NOSUID | MS_NODEV);
  steps.add(MountOp::Symlink, "/dev/fd", "linking /dev/fd", "/proc/self/fd");
  steps.add(MountOp::Symlink, "/dev/stdin", "linking /dev/stdin", "/proc/self/fd/0");
  steps.add(MountOp::Symlink, "/dev/stdout", "linking /dev/stdout", "/proc/self/fd/1");
  steps.add(MountOp::Symlink, "/dev/stderr", "linking /dev/stderr", "/proc/self/fd/2");

  steps.make_dir("/tmp", 01777);
  steps.tmpfs("/tmp", "mode=1777" + size, MS_NOSUID | MS_NODEV);

  // HOME: a private tmpfs of the command's, unless a host directory is kept
  // there (SandboxOptions::home, one of the extra binds below).
  const std::string home(core::kSandboxHome);
  const bool home_bound =
      std::any_of(layout.binds.begin(), layout.binds.end(),
                  [&](const BindMount& bind) { return bind.sandbox_path == home; });
  if (!home_bound) {
    steps.make_dir(std::filesystem::path(home).parent_path().string());
    steps.make_dir(home, 0700);
    steps.tmpfs(home,
                "mode=0700,uid=" + std::to_string(layout.home_uid) +
                    ",gid=" + std::to_string(layout.home_gid) + size,
                MS_NOSUID | MS_NODEV);
  }

  // Extra binds, each validated.
  PB_CHECK(check_extra_binds(layout));
  for (const auto& bind : layout.binds) {
    struct stat st {};
    if (::stat(bind.host.c_str(), &st) != 0) {
      return Error::from_errno("mounts", "bind source " + bind.host.string())
          .with_kind(ErrorKind::kInvalidInput);
    }
    std::string partial;
    const std::filesystem::path target(bind.sandbox_path);
    for (const auto& part : target.parent_path().relative_path()) {
      partial += "/" + part.string();
      steps.make_dir(partial);
    }
    if (S_ISDIR(st.st_mode)) {
      steps.make_dir(bind.sandbox_path);
    } else {
      steps.add(MountOp::MakeFile, bind.sandbox_path, "creating " + bind.sandbox_path);
      steps.last().mode = 0644;
    }
    const std::string host = std::filesystem::canonical(bind.host).string();
    if (layout.idmap_home && bind.sandbox_path == home) continue;  // after PlanReady
    if (bind.writable) {
      steps.add(MountOp::Bind, bind.sandbox_path,
                "bind-mounting " + host + " on " + bind.sandbox_path, host);
    } else {
      steps.bind_read_only(host, bind.sandbox_path);
    }
  }
  return steps.take();
}

std::vector<MountStep> build_workspace_mount_steps(const MountLayout& layout) {
  StepList steps = step_list_for(layout);
  if (!layout.hosts_file.empty()) steps.bind_read_only(layout.hosts_file.string(), "/etc/hosts");
  // The workspace: overlayfs, lower = the host directory (through an
  // idmapped mount when one is given), upper/work in the run's staging area.
  std::string lower = layout.workspace.string();
  if (layout.idmapped_workspace_fd >= 0) {
    lower = (layout.mount_points / "lower").string();
    MountStep attach;
    attach.op = MountOp::AttachFd;
    attach.fd = layout.idmapped_workspace_fd;
    attach.target = lower;  // a host path: the old root is still visible here
    attach.stage = "attaching the idmapped workspace";
    steps.add_raw(std::move(attach));
  }
  // The run's changes on a tmpfs of their own (--disk): init mounts it in
  // its mount namespace and makes the upper and work directories on it.
  const std::filesystem::path changes = changes_root(layout);
  if (layout.changes_size_bytes > 0) {
    const std::string at = changes.string();
    MountStep mount;
    mount.op = MountOp::Tmpfs;
    mount.target = at;  // a host path: the old root is still visible here
    mount.data = "mode=0700,size=" + std::to_string(layout.changes_size_bytes);
    mount.flags = MS_NOSUID | MS_NODEV;
    mount.stage = "mounting the tmpfs for the run's changes (--disk)";
    steps.add_raw(std::move(mount));
    MountStep upper;
    upper.op = MountOp::MakeDir;
    upper.target = at + "/upper";
    upper.mode = layout.upper_mode;
    upper.uid = static_cast<int>(layout.upper_uid);
    upper.gid = static_cast<int>(layout.upper_gid);
    upper.stage = "creating the upper directory on the tmpfs";
    steps.add_raw(std::move(upper));
    MountStep work;
    work.op = MountOp::MakeDir;
    work.target = at + "/work";
    work.mode = 0700;
    work.stage = "creating the work directory on the tmpfs";
    steps.add_raw(std::move(work));
  }
  steps.make_dir("/workspace");
  // Layers, top first: the .agent whiteout (the workspace's .agent/ is not
  // there at all, rather than an empty mount point), a session's earlier
  // changes, then the workspace.
  std::string lowers = linux_api::escape_overlay_path(lower);
  for (auto layer = layout.lower_layers.rbegin(); layer != layout.lower_layers.rend(); ++layer)
    lowers = linux_api::escape_overlay_path(layer->string()) + ":" + lowers;
  if (layout.hide_agent_dir) {
    lowers = linux_api::escape_overlay_path((layout.mount_points / "agent-whiteout").string()) +
             ":" + lowers;
  }
  // volatile: no sync of the upper file system at unmount. The upper
  // directory is a scratch area that pulsebox copies into a transaction
  // (synced before a commit applies it) or throws away; syncing it cost
  // every run a disk cache flush.
  const std::string overlay_options =
      "lowerdir=" + lowers +
      ",upperdir=" + linux_api::escape_overlay_path((changes / "upper").string()) +
      ",workdir=" + linux_api::escape_overlay_path((changes / "work").string()) +
      ",userxattr,index=off,xino=off,volatile";
  steps.add(MountOp::Overlay, "/workspace", "mounting overlay on /workspace", "", overlay_options,
            MS_NOSUID | MS_NODEV);

  if (layout.idmapped_home_fd >= 0) {
    MountStep attach;
    attach.op = MountOp::AttachFd;
    attach.fd = layout.idmapped_home_fd;
    attach.target = steps.in_root(std::string(core::kSandboxHome));
    attach.stage = "attaching the idmapped home";
    steps.add_raw(std::move(attach));
  }

  for (const auto& hidden : layout.hidden_workspace_paths) {
    struct stat st {};
    const auto host = layout.workspace / hidden;
    if (hidden.empty() || ::lstat(host.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    steps.mask("/workspace/" + hidden, S_ISDIR(st.st_mode));
  }

  return steps.take();
}

core::Result<std::vector<MountStep>> build_mount_steps(const MountLayout& layout) {
  PB_TRY(steps, build_base_mount_steps(layout));
  for (auto& step : build_workspace_mount_steps(layout))
    steps.push_back(std::move(step));
  return steps;
}

std::filesystem::path changes_root(const MountLayout& layout) {
  return layout.changes_size_bytes > 0 ? layout.mount_points / "changes" : layout.run_dir;
}

std::vector<std::string> exec_candidates(const std::string& program, const std::string& path) {
  if (program.find('/') != std::string::npos) return {program};
  std::vector<std::string> candidates;
  std::size_t start = 0;
  while (start <= path.size()) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    if (!dir.empty() && dir.front() == '/') candidates.push_back(dir + "/" + program);
    start = end + 1;
  }
  return candidates;
}

}  // namespace pulsebox::runtime
