// The native backend: a sandbox built from kernel primitives (see
// docs/backends.md and runtime/launch_plan.h for the process layout).
//
// Per run: a staging directory <state>/runs/<id>/ (its lock, <id>.lock, is
// flock-ed while in use) holds the overlay's upper and work directories; the
// mount points of the new root and of the workspace's lower layer, and an
// unreadable empty file used to mask host files, are shared by all runs in
// <state>/mnt/. After the run the upper directory becomes a transaction (the
// facade imports it), then cleanup() moves the staging directory into
// <state>/trash/; a later run, in the background, makes it reusable in
// <state>/pool/ (when nothing changed) or removes it (TrashRemover).
#include <fcntl.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "backends/native_runtime.h"
#include "core/fs.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "core/trace.h"
#include "linux/cgroup.h"
#include "linux/syscalls.h"
#include "linux/userns.h"
#include "pulsebox/backend.h"
#include "pulsebox/error.h"
#include "runtime/launcher.h"
#include "runtime/plan.h"
#include "runtime/supervisor.h"
#include "runtime/sync_channel.h"
#include "seccomp/compiler.h"
#include "seccomp/profile.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;

namespace {

namespace fs = std::filesystem;

constexpr std::uint32_t kRootRangeSize = 65536;
// The host ids root's sandboxes map to when /etc/subuid has no "root" range:
// far above any ordinary account.
constexpr std::uint32_t kDefaultRootIdBase = 0x70000000;

// The cgroup namespace is made by init itself once it is in its cgroups
// (LaunchPlan::new_cgroup_namespace).
constexpr std::uint64_t kNamespaces =
    CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS;
// How often the supervisor reads the sandbox's CPU time for --cpu-time.
constexpr auto kCgroupPollInterval = std::chrono::milliseconds(100);

[[noreturn]] void fail(Error error) {
  core::throw_error(std::move(error));
}

// Creates (or checks) a directory only `uid` controls: not a symlink, owned by
// uid, no write access for others. A directory planted by someone else in a
// shared place such as /var/tmp is refused.
void ensure_private_dir(const fs::path& dir, mode_t mode) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    fail(Error::from_errno("native", "creating the state directory " + dir.string()));
  }
  if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
    fail(Error(ErrorKind::kSecurity, "native",
               "the state directory " + dir.string() +
                   " is not a directory owned by this user; remove it or set PULSEBOX_STATE_DIR"));
  }
  if ((st.st_mode & 07777) != mode && ::chmod(dir.c_str(), mode) != 0) {
    fail(Error::from_errno("native", "chmod " + dir.string()));
  }
}

// <state>/mnt: root/ and lower/, empty directories every run mounts on in
// its own mount namespace, and empty and empty-dir, bound over masked files
// and directories. Made
// once and checked each run (the type and owner: never a symlink).
fs::path ensure_mount_points(const fs::path& state_dir) {
  const fs::path dir = state_dir / "mnt";
  ensure_private_dir(dir, ::geteuid() == 0 ? 0711 : 0700);
  auto check = [&](const fs::path& path, bool directory, mode_t mode = 0755) {
    // Made first, checked after: concurrent first runs all try, EEXIST is
    // fine (looking first and making after raced: found on a 1-CPU VM).
    int made = -1;
    if (directory) {
      made = ::mkdir(path.c_str(), mode);
    } else if (const int fd = ::open(path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0);
               fd >= 0) {
      made = ::close(fd);
    }
    if (made != 0 && errno != EEXIST)
      fail(Error::from_errno("native", "creating " + path.string()));
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) fail(Error::from_errno("native", path.string()));
    const bool right_type =
        directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode) && st.st_size == 0;
    if (!right_type || st.st_uid != ::geteuid()) {
      fail(Error(ErrorKind::kSecurity, "native",
                 path.string() + " is not " +
                     (directory ? "a directory" : "an empty regular file") +
                     " owned by this user; remove it (pulsebox makes it again)"));
    }
    // The mode whatever the umask was (the file: unreadable).
    const mode_t wanted = directory ? mode : 0;
    if ((st.st_mode & 07777) != wanted && ::chmod(path.c_str(), wanted) != 0)
      fail(Error::from_errno("native", "chmod " + path.string()));
  };
  check(dir / "root", true);
  check(dir / "lower", true);
  check(dir / "empty", false);
  check(dir / "empty-dir", true, 0555);  // a masked directory reads as empty
  return dir;
}

// Removes a staging tree. The overlay leaves a mode-000 "work" directory, so
// directories are made accessible before they are entered. Stops early (the
// tree partly removed) once *stop is set.
void remove_tree(const fs::path& path, const std::atomic<bool>* stop = nullptr) {
  if (stop != nullptr && stop->load()) return;
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    ::chmod(path.c_str(), 0700);
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(path, ec))
      remove_tree(entry.path(), stop);
    ::rmdir(path.c_str());
  } else {
    ::unlink(path.c_str());
  }
}

// At most this many finished staging trees wait in <state>/pool/ for reuse.
constexpr int kPoolCapacity = 8;

bool is_empty_directory(const fs::path& path) {
  std::error_code ec;
  return fs::is_directory(path, ec) && fs::is_empty(path, ec) && !ec;
}

// Entries in `dir` (none when it cannot be read).
int count_entries(const fs::path& dir) {
  std::error_code ec;
  int entries = 0;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    ++entries;
  }
  return entries;
}

// Clears the overlay's instance id from an upper root (the next mount sets
// a new one), then says whether no other overlay attribute is left
// ("opaque", "impure", ...): only then may it be another run's upper root.
bool clear_overlay_id(const fs::path& upper) {
  for (const char* uuid : {"user.overlay.uuid", "trusted.overlay.uuid"})
    ::lremovexattr(upper.c_str(), uuid);
  char names[4096];
  const ssize_t size = ::llistxattr(upper.c_str(), names, sizeof names);
  if (size < 0) return errno == ENOTSUP;  // unknown: do not reuse
  for (ssize_t at = 0; at < size; at += static_cast<ssize_t>(std::strlen(names + at)) + 1) {
    const std::string_view name(names + at);
    if (name.starts_with("user.overlay.") || name.starts_with("trusted.overlay.")) return false;
  }
  return true;
}

// Makes a finished run's staging tree (run/upper, run/work) reusable: the
// overlay's own directories in work/ go (work/work and, for a volatile mount,
// work/work/incompat/volatile/dirty); what is left must be an empty upper
// (nothing changed, no overlay attribute) and an empty work directory.
bool make_reusable(const fs::path& tree) {
  const fs::path inner = tree / "work" / "work";
  for (const fs::path& dir : {inner, inner / "incompat", inner / "incompat" / "volatile"})
    ::chmod(dir.c_str(), 0700);  // the overlay makes them mode 000
  ::unlink((inner / "incompat" / "volatile" / "dirty").c_str());
  ::rmdir((inner / "incompat" / "volatile").c_str());
  ::rmdir((inner / "incompat").c_str());
  ::rmdir(inner.c_str());
  return count_entries(tree) == 2 && is_empty_directory(tree / "work") &&
         is_empty_directory(tree / "upper") && clear_overlay_id(tree / "upper");
}

// Finished runs' staging trees wait in <state>/trash/; a thread of a later
// run, while its sandbox runs, makes each reusable into <state>/pool/ (where
// the next runs take their staging from) or removes it. Removing a
// directory frees a block: on the benchmark host (ext4, -o discard, no
// journal) each costs a synchronous discard, ~0.3 ms, and the overlay makes
// three per run it must lose again; reuse spares the other three (~0.4 ms
// less per run here, where the discards slow the sandbox's own file system
// work). The thread stops when its run ends; whatever is left waits for the
// next run. Concurrent runs may race on the same tree: every step tolerates
// the other having done it.
// Makes each tree in trash/ reusable into pool/ (up to kPoolCapacity) or
// removes it, until `stop` is set.
void empty_trash(const fs::path& trash, const fs::path& pool, const std::atomic<bool>& stop) {
  std::error_code error;
  int pooled = count_entries(pool);
  for (const auto& entry : fs::directory_iterator(trash, error)) {
    if (stop.load()) break;
    if (pooled < kPoolCapacity && make_reusable(entry.path()) &&
        ::rename(entry.path().c_str(), (pool / entry.path().filename()).c_str()) == 0) {
      ++pooled;
      continue;
    }
    remove_tree(entry.path(), &stop);
  }
}

class TrashRemover {
 public:
  TrashRemover(fs::path trash, fs::path pool) {
    std::error_code ec;
    if (fs::is_empty(trash, ec) || ec) return;  // the usual case: nothing to do
    thread_ = std::thread([this, trash = std::move(trash), pool = std::move(pool)] {
      empty_trash(trash, pool, stop_);
    });
  }
  TrashRemover(const TrashRemover&) = delete;
  TrashRemover& operator=(const TrashRemover&) = delete;
  ~TrashRemover() {
    stop_.store(true);
    if (thread_.joinable()) thread_.join();
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// A run's staging directory with empty upper/ and work/: a reusable tree
// from the pool (renamed: atomic, so concurrent runs never share one), or
// new directories.
void make_staging(const fs::path& pool, const fs::path& run_dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(pool, ec)) {
    if (::rename(entry.path().c_str(), run_dir.c_str()) != 0) continue;  // another run's now
    // Modes as if new; owners are set by prepare_staging.
    if (::chmod(run_dir.c_str(), 0700) == 0 && ::chmod((run_dir / "upper").c_str(), 0755) == 0 &&
        ::chmod((run_dir / "work").c_str(), 0755) == 0) {
      return;
    }
    remove_tree(run_dir);  // not what it should be: start afresh
    break;
  }
  if (::mkdir(run_dir.c_str(), 0700) != 0) {
    fail(Error::from_errno("native", "creating the run directory " + run_dir.string()));
  }
  for (const char* dir : {"upper", "work"}) {
    if (::mkdir((run_dir / dir).c_str(), 0755) != 0) {
      fail(Error::from_errno("native", "creating " + (run_dir / dir).string()));
    }
  }
}

// A descriptor number of at least 3, so the child's stdio can be set up
// without clobbering it.
void move_above_stdio(UniqueFd& fd) {
  if (fd.get() >= 3) return;
  fd.reset(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 3));
}

struct HostProbe {
  bool namespaces_ok = false;
  std::string namespaces_reason;
};

HostProbe probe_host() {
  HostProbe probe;
  // A child in every namespace the sandbox uses, which exits at once.
  const long pid =
      linux_api::sys_clone_fork(kNamespaces | CLONE_NEWCGROUP | CLONE_NEWNET | SIGCHLD, nullptr);
  if (pid == 0) ::_exit(0);
  if (pid < 0) {
    const int error_number = errno;
    probe.namespaces_reason =
        "creating user, mount, pid, ipc, uts, cgroup and network namespaces "
        "failed: " +
        core::describe_errno(error_number);
  } else {
    int status = 0;
    ::waitpid(static_cast<pid_t>(pid), &status, 0);
    probe.namespaces_ok = true;
  }
  return probe;
}

// The probe costs a clone with every namespace (~2-3 ms, a network namespace
// included), so a success is remembered in the state directory, keyed by
// what decides it: the boot, this process's user namespace, its seccomp
// mode and the user namespace sysctls. A later failure still surfaces as a
// clear launch error.
std::string probe_key() {
  auto first_line = [](const char* path) {
    std::string line;
    std::getline(std::ifstream(path), line);
    return line;
  };
  std::string seccomp_mode;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    if (line.rfind("Seccomp:", 0) == 0) seccomp_mode = line;
  }
  struct stat user_ns {};
  ::stat("/proc/self/ns/user", &user_ns);
  const std::string boot_id = first_line("/proc/sys/kernel/random/boot_id");
  if (boot_id.empty()) return "";
  return "namespaces ok, boot " + boot_id + ", userns " + std::to_string(user_ns.st_ino) + ", " +
         seccomp_mode + ", max_user_namespaces " +
         first_line("/proc/sys/user/max_user_namespaces") + ", unprivileged_userns_clone " +
         first_line("/proc/sys/kernel/unprivileged_userns_clone") + "\n";
}

HostProbe remembered_or_fresh_probe(const fs::path& state_dir) {
  const fs::path memo = state_dir / "host-probe";
  const std::string expected = probe_key();
  struct stat st {};
  if (!expected.empty() && ::lstat(memo.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      st.st_uid == ::geteuid() && (st.st_mode & 022) == 0) {
    std::ifstream in(memo);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (text == expected) return {true, ""};
  }
  HostProbe probe = probe_host();
  if (probe.namespaces_ok && !expected.empty()) {
    try {
      ensure_private_dir(state_dir, ::geteuid() == 0 ? 0711 : 0700);
      (void)core::write_file_atomic(memo, expected, 0600);
    } catch (const std::exception&) {
      // Not remembered: the next process probes again.
    }
  }
  return probe;
}

std::string namespaces_fix() {
  return "allow unprivileged user namespaces: sysctl -w kernel.unprivileged_userns_clone=1 "
         "(Debian), user.max_user_namespaces > 0, and on Ubuntu "
         "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor profile for pulsebox";
}

// What every NativeBackend made from the same options shares, thread-safe:
// the host's probe and cgroup layout, compiled seccomp filters, the
// idmapping user namespaces and, with prestart, a sandbox started ahead of
// its run (see Prestart below). Launches, runs and teardowns are its
// methods; a NativeBackend holds one run at a time.
class NativeHost final : public backends::NativeRuntime,
                         public std::enable_shared_from_this<NativeHost> {
 public:
  NativeHost(NativeBackendOptions options, bool prestart) : options_(std::move(options)) {
    if (options_.state_dir.empty()) options_.state_dir = backends::default_state_dir();
    backends::check_state_dir(options_.state_dir, options_.allow_system_state_dir);
    // Threads other than the caller's use it (prestart): never relative to
    // a working directory that may change.
    if (prestart) options_.state_dir = fs::absolute(options_.state_dir);
    filters_ = std::make_unique<seccomp::FilterCache>(options_.state_dir / "seccomp");
    if (prestart) prestart_ = std::make_unique<Prestart>(*this);
  }
  ~NativeHost() override;
  NativeHost(const NativeHost&) = delete;
  NativeHost& operator=(const NativeHost&) = delete;

  const NativeBackendOptions& options() const { return options_; }

  std::shared_ptr<Backend> make_backend() override;
  void start_ahead(const NetworkPolicy& network, const ResourcePolicy& limits) override;
  void wait_until_idle() override;

  Availability availability() const {
    const HostProbe& probe = host();
    if (!probe.namespaces_ok) return {false, probe.namespaces_reason + "; " + namespaces_fix()};
    return {true, "user, mount, pid, ipc, uts, cgroup and network namespaces work on this host"};
  }

  std::vector<std::string> reconcile();
  std::vector<std::string> reconcile_if_needed();

  Capability network_capability(const NetworkPolicy& policy) const {
    switch (policy.mode) {
      case NetworkMode::DenyAll:
      case NetworkMode::LocalhostOnly:
        return {EnforcementLevel::StronglyEnforced,
                "a new network namespace with only the loopback interface", ""};
      case NetworkMode::AllowAll:
        return {EnforcementLevel::StronglyEnforced,
                "the host's network namespace is shared, as requested", ""};
      case NetworkMode::Allowlist:
      case NetworkMode::Proxy:
        break;
    }
    return {EnforcementLevel::Unsupported,
            "allowlist and proxy networking are not part of this build yet; a run that accepts "
            "this gets no network at all (loopback only)",
            "use --net none, localhost or all"};
  }
  Capability secrets_capability(const SecretPolicy& policy) const {
    if (policy.mode == SecretMode::AllowAll) {
      return {EnforcementLevel::StronglyEnforced, "every host variable is passed, as requested",
              ""};
    }
    return {EnforcementLevel::StronglyEnforced,
            "the environment is built from the secret policy only, and no host home directory "
            "(~/.ssh, ~/.aws, ~/.config) is mounted",
            ""};
  }
  Capability filesystem_capability() const {
    return {EnforcementLevel::StronglyEnforced,
            "a tmpfs root with read-only system directories (secrets in /etc hidden), the "
            "workspace through a copy-on-write overlay, private /tmp, /proc and /dev; nothing "
            "else of the host is visible",
            ""};
  }
  Capability limit_capability(LimitKind kind) const {
    const linux_api::CgroupHost& host = cgroups();
    const std::string where = " in the sandbox's own cgroup (" + host.describe() + ")";
    auto file = [](const linux_api::ControllerPlace& place, const char* v2, const char* v1) {
      return std::string(place.v1 ? v1 : v2);
    };
    auto unavailable = [](const linux_api::ControllerPlace& place) {
      return " (no cgroup: " + place.problem + ")";
    };
    switch (kind) {
      case LimitKind::WallTime:
        return {EnforcementLevel::StronglyEnforced,
                "the sandbox's init is killed at the deadline, and with it every process in its "
                "pid namespace",
                ""};
      case LimitKind::Output:
        return {EnforcementLevel::StronglyEnforced,
                "pulsebox reads all output and stops the sandbox at the cap", ""};
      case LimitKind::OpenFiles:
        return {EnforcementLevel::StronglyEnforced, "RLIMIT_NOFILE is set for every process", ""};
      case LimitKind::Processes:
        if (host.pids.usable) {
          return {EnforcementLevel::StronglyEnforced,
                  file(host.pids, "pids.max", "pids.max (v1)") + where +
                      " counts every process and thread of the sandbox",
                  ""};
        }
        return {EnforcementLevel::StronglyEnforced,
                "RLIMIT_NPROC, counted per uid inside the sandbox's own user namespace, where "
                "only the sandbox's processes run as that uid" +
                    unavailable(host.pids),
                ""};
      case LimitKind::Memory:
        if (host.memory.usable) {
          return {EnforcementLevel::StronglyEnforced,
                  file(host.memory, "memory.max", "memory.limit_in_bytes (v1)") + where +
                      ": the kernel's OOM killer acts at the limit, which includes /tmp",
                  ""};
        }
        return {EnforcementLevel::PartiallyEnforced,
                "RLIMIT_AS caps each process's address space, not the sandbox's memory" +
                    unavailable(host.memory),
                host.memory.fix};
      case LimitKind::Swap:
        if (host.memory.usable && host.swap_accounting) {
          return {EnforcementLevel::StronglyEnforced,
                  file(host.memory, "memory.swap.max", "memory.memsw.limit_in_bytes (v1)") + where,
                  ""};
        }
        if (host.memory.usable) {
          return {EnforcementLevel::Unsupported,
                  "this kernel does not account swap to cgroups (swapaccount=0)",
                  "boot with swapaccount=1"};
        }
        return {EnforcementLevel::Unsupported, "swap is not limited" + unavailable(host.memory),
                host.memory.fix};
      case LimitKind::Cpu:
        if (host.cpu.usable) {
          return {EnforcementLevel::StronglyEnforced,
                  file(host.cpu, "cpu.max", "cpu.cfs_quota_us (v1)") + where +
                      ": CFS bandwidth for the whole sandbox",
                  ""};
        }
        return {EnforcementLevel::Unsupported,
                "CPU bandwidth is not limited" + unavailable(host.cpu), host.cpu.fix};
      case LimitKind::CpuTime:
        if (host.cpu_accounting.usable) {
          return {EnforcementLevel::StronglyEnforced,
                  "pulsebox reads the sandbox's CPU time (" +
                      file(host.cpu_accounting, "cpu.stat", "cpuacct.usage (v1)") + where +
                      ") every 100 ms and stops it at the limit (SIGTERM, grace, SIGKILL)",
                  ""};
        }
        return {EnforcementLevel::PartiallyEnforced,
                "RLIMIT_CPU caps each process, not the sandbox" + unavailable(host.cpu_accounting),
                host.cpu_accounting.fix};
      case LimitKind::Disk:
        break;
    }
    return {EnforcementLevel::Unsupported,
            "the native backend does not limit disk use: the sandbox's changes are written to "
            "the state directory's file system",
            "put PULSEBOX_STATE_DIR on a file system of the size wanted"};
  }
  Capability syscall_capability(const std::string& profile) const {
    if (profile == "unconfined") {
      return {EnforcementLevel::Unsupported,
              "no seccomp filter (--seccomp unconfined); the command still has no capabilities "
              "and no_new_privs",
              "use a seccomp profile (default, strict, permissive or a file)"};
    }
    return {EnforcementLevel::StronglyEnforced,
            "the seccomp profile " + profile +
                " is loaded into the command before execve and inherited by everything it "
                "starts; denied calls fail with the profile's errno, kill actions end the "
                "sandbox and are reported with the syscall's name",
            ""};
  }
  Capability process_containment_capability() const {
    return {EnforcementLevel::StronglyEnforced,
            "a pid namespace: when the command ends, its init kills every process left in the "
            "sandbox before it reports; on a timeout, or if init dies, the kernel kills them all",
            ""};
  }

 public:
  const HostProbe& host() const {
    std::call_once(probe_once_, [this] { probe_ = remembered_or_fresh_probe(options_.state_dir); });
    return probe_;
  }
  const linux_api::CgroupHost& cgroups() const {
    std::call_once(cgroups_once_, [this] { cgroups_ = linux_api::discover_cgroups(); });
    return cgroups_;
  }
  // How the sandbox's ids map to the host's.
  struct IdPlan {
    bool idmapped_workspace = false;  // root: the workspace's owner shown as the sandbox uid
    std::uint32_t uid_base = 0;
    std::uint32_t gid_base = 0;
  };
  // The id maps and the ids of init and the command (before clone()).
  IdPlan plan_ids(runtime::LaunchPlan& plan);
  // The staging directory's modes and owners and, for root, the idmapped
  // workspace tree (while init makes its base mounts).
  void prepare_staging(const IdPlan& ids, const fs::path& workspace, const fs::path& run_dir,
                       UniqueFd& idmapped_tree);

  // What a launch depends on, besides this backend's options: everything
  // init makes before PlanReady.
  struct LaunchSpec {
    std::string id;  // names the staging directory and the cgroups
    bool own_network = true;
    ResourcePolicy limits;
    std::vector<BindMount> binds;
  };
  // One sandbox from its launch to its teardown. On the heap and never
  // moved: init reads `plan` and runs on `sandbox.init_stack`.
  struct SandboxRun {
    std::string id;
    fs::path run_dir;
    UniqueFd run_lock;  // held until the staging directory is gone
    bool staging_made = false;
    runtime::LaunchPlan plan;
    std::unique_ptr<core::ChildTrace> trace;
    runtime::MountLayout layout;
    IdPlan ids;
    linux_api::CgroupSettings settings;
    std::optional<linux_api::SandboxCgroup> cgroup;
    UniqueFd out_read, err_read;
    runtime::LaunchedSandbox sandbox;
    bool launched = false;
    std::string launch_error;  // when not launched: why
    bool reported = false;     // init sent Exited: it is ending by itself
    std::string shape;         // shape_text() of its plan, when started ahead
    fs::path changes_dir;      // the overlay's upper directory (arm())
  };
  // Up to init waiting for PlanReady: cgroup, clone3, id maps, base
  // mounts (init's), staging directory. A bad extra bind throws; a launch
  // that fails in the kernel is returned with its launch_error.
  std::unique_ptr<SandboxRun> launch(const LaunchSpec& spec);
  // The workspace, the command and its filter, then PlanReady: init sets
  // the sandbox up and waits for Start.
  void arm(SandboxRun& run, const ExecutionRequest& request, const fs::path& workspace);
  // Start, then supervises the run and fills outcome.result once init has
  // reported. `start`: when the run began (its wall-clock limit and
  // duration count from there).
  void start_and_supervise(SandboxRun& run, const ExecutionRequest& request,
                           runtime::Clock::time_point start, ExecutionOutcome& outcome);
  // init reaped, cgroup removed, staging moved to trash/ (idempotent).
  void tear_down(SandboxRun& run);

  // What a launch for `spec` would give init before PlanReady, as text: a
  // sandbox started ahead is used only for a run whose shape is the same
  // now (the ids, namespaces, cgroup limits and every base mount step,
  // computed afresh: a file hidden since, or a bind gone, shows here).
  std::string shape_of(const LaunchSpec& spec);

  // With prestart: the sandbox started ahead for runs of this shape, if
  // there is one and it is still waiting; nullptr otherwise (launch then).
  std::unique_ptr<SandboxRun> take_started(const std::string& shape);
  // Hands finished runs over (teardown in the background when prestarting,
  // here otherwise) and, with prestart, asks for a sandbox of `next`'s shape.
  void retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next);
  bool prestarts() const { return prestart_ != nullptr; }
  // Runs whose lock this object holds (made by launch(), until tear_down()).
  bool holds_run(const std::string& id) const {
    const std::lock_guard lock(runs_mutex_);
    return own_runs_.count(id) > 0;
  }
  Stats stats() const override {
    const std::lock_guard lock(stats_mutex_);
    return stats_;
  }
  void count(int Stats::*counter) {
    const std::lock_guard lock(stats_mutex_);
    ++(stats_.*counter);
  }

 private:
  class Prestart;
  // A launch's parts that decide its shape, written into `plan` (and
  // `layout`, `settings`) for `spec`: what launch() does before clone3.
  IdPlan plan_launch(const LaunchSpec& spec, const fs::path& mount_points,
                     runtime::LaunchPlan& plan, runtime::MountLayout& layout,
                     linux_api::CgroupSettings& settings);

  NativeBackendOptions options_;
  mutable std::once_flag probe_once_;
  mutable HostProbe probe_;
  mutable std::once_flag cgroups_once_;
  mutable linux_api::CgroupHost cgroups_;
  std::unique_ptr<seccomp::FilterCache> filters_;
  // user namespaces for idmapped workspace mounts, by workspace owner
  std::mutex mapping_mutex_;
  std::map<std::pair<uid_t, gid_t>, UniqueFd> mapping_namespaces_;
  mutable std::mutex stats_mutex_;
  Stats stats_;
  mutable std::mutex runs_mutex_;
  std::set<std::string> own_runs_;
  std::unique_ptr<Prestart> prestart_;
};

// Every run's lock file sits in runs/ (flock-ed) until it has cleaned up,
// cgroups included; one nobody holds is a crashed run's (reconcile() has
// the details). With none, start-up skips scanning each cgroup hierarchy.
std::vector<std::string> NativeHost::reconcile_if_needed() {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(options_.state_dir / "runs", ec)) {
    const fs::path path = entry.path();
    // This process's own runs (a server's, started ahead or running) hold
    // their locks: no need to try them.
    if (holds_run(path.stem().string())) continue;
    const fs::path lock_path = path.extension() == ".lock" ? path : core::run_lock_path(path);
    UniqueFd lock(::open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    // Released first: reconcile() would take our lock for a live run.
    if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) == 0) {
      lock.reset();
      return reconcile();
    }
  }
  return {};
}

std::vector<std::string> NativeHost::reconcile() {
  // Mounts and processes cannot outlive a run: the mounts live in the
  // sandbox's mount namespace and init dies with its supervisor
  // (PR_SET_PDEATHSIG), taking the pid namespace with it. What a crash
  // leaves is the staging directory, unlocked.
  std::vector<std::string> removed;
  for (const auto& path : linux_api::reconcile_cgroups(cgroups()))
    removed.push_back("the cgroup of a crashed run (" + path + ")");
  const auto staging = core::remove_crashed_runs(options_.state_dir / "runs",
                                                 [](const fs::path& dir) { remove_tree(dir); });
  for (const auto& path : staging) {
    removed.push_back("the staging directory of crashed run " + path.filename().string() + " (" +
                      path.string() + ")");
  }
  return removed;
}

NativeHost::IdPlan NativeHost::plan_ids(runtime::LaunchPlan& plan) {
  const uid_t sandbox_uid = options_.sandbox_uid;
  const gid_t sandbox_gid = options_.sandbox_gid;
  plan.command_uid = sandbox_uid;
  plan.command_gid = sandbox_gid;
  if (::geteuid() != 0) {
    // The sandbox uid is the invoking user, so the workspace is writable
    // inside and nothing else of the host is owned by the sandbox.
    plan.init_uid = sandbox_uid;
    plan.init_gid = sandbox_gid;
    if (!options_.subordinate_ids) {
      plan.id_maps.uids = {{sandbox_uid, static_cast<std::uint32_t>(::geteuid()), 1}};
      plan.id_maps.gids = {{sandbox_gid, static_cast<std::uint32_t>(::getegid()), 1}};
      plan.id_maps.deny_setgroups = true;
      return {};
    }
    const auto uid_base = linux_api::own_subordinate_id_base("/etc/subuid", kRootRangeSize - 1);
    const auto gid_base = linux_api::own_subordinate_id_base("/etc/subgid", kRootRangeSize - 1);
    const bool helpers =
        ::access(linux_api::kNewUidMap, X_OK) == 0 && ::access(linux_api::kNewGidMap, X_OK) == 0;
    if (!uid_base || !gid_base || !helpers || sandbox_uid >= kRootRangeSize ||
        sandbox_gid >= kRootRangeSize) {
      fail(Error(ErrorKind::kUnavailable, "native",
                 std::string("subordinate ids were asked for, but ") +
                     (!helpers ? "newuidmap/newgidmap are not installed (apt-get install uidmap)"
                               : "this user has no range of 65535 ids in /etc/subuid and "
                                 "/etc/subgid (as root: usermod --add-subuids 100000-165534 "
                                 "--add-subgids 100000-165534 USER)")));
    }
    auto range = [](std::uint32_t sandbox_id, std::uint32_t own, std::uint32_t base) {
      std::vector<linux_api::IdMapping> maps;
      if (sandbox_id > 0) maps.push_back({0, base, sandbox_id});
      maps.push_back({sandbox_id, own, 1});
      maps.push_back({sandbox_id + 1, base + sandbox_id, kRootRangeSize - sandbox_id - 1});
      return maps;
    };
    plan.id_maps.uids = range(sandbox_uid, static_cast<std::uint32_t>(::geteuid()), *uid_base);
    plan.id_maps.gids = range(sandbox_gid, static_cast<std::uint32_t>(::getegid()), *gid_base);
    plan.id_maps.use_helpers = true;
    plan.id_maps.deny_setgroups = false;
    plan.clear_groups = true;  // newgidmap leaves setgroups allowed: drop the host's groups
    return {};
  }
  // Root: a range of unprivileged host ids; the workspace is shown through
  // an idmapped mount in which its owner is the sandbox uid.
  IdPlan ids;
  ids.idmapped_workspace = true;
  ids.uid_base = linux_api::subordinate_id_base("/etc/subuid", "root", kRootRangeSize)
                     .value_or(kDefaultRootIdBase);
  ids.gid_base = linux_api::subordinate_id_base("/etc/subgid", "root", kRootRangeSize)
                     .value_or(kDefaultRootIdBase);
  plan.id_maps.uids = {{0, ids.uid_base, kRootRangeSize}};
  plan.id_maps.gids = {{0, ids.gid_base, kRootRangeSize}};
  plan.id_maps.deny_setgroups = false;
  plan.clear_groups = true;
  plan.init_uid = 0;
  plan.init_gid = 0;
  return ids;
}

void NativeHost::prepare_staging(const IdPlan& ids, const fs::path& workspace,
                                 const fs::path& run_dir, UniqueFd& idmapped_tree) {
  struct stat ws {};
  if (::stat(workspace.c_str(), &ws) != 0) {
    fail(Error::from_errno("native", "workspace " + workspace.string()));
  }
  const fs::path upper = run_dir / "upper";
  const fs::path work = run_dir / "work";
  if (::chmod(upper.c_str(), ws.st_mode & 07777) != 0) {
    fail(Error::from_errno("native", "chmod " + upper.string()));
  }
  if (!ids.idmapped_workspace) return;
  const uid_t host_sandbox_uid = ids.uid_base + options_.sandbox_uid;
  const gid_t host_sandbox_gid = ids.gid_base + options_.sandbox_gid;
  int mapping_namespace = -1;  // entries stay until this host object goes
  {
    const std::lock_guard lock(mapping_mutex_);
    auto key = std::make_pair(ws.st_uid, ws.st_gid);
    auto it = mapping_namespaces_.find(key);
    if (it == mapping_namespaces_.end()) {
      linux_api::IdMaps maps;
      maps.uids = {{ws.st_uid, host_sandbox_uid, 1}};
      maps.gids = {{ws.st_gid, host_sandbox_gid, 1}};
      maps.deny_setgroups = false;
      auto ns = linux_api::create_mapping_namespace(maps);
      if (!ns) fail(std::move(ns).error().with_context("preparing the idmapped workspace"));
      it = mapping_namespaces_.emplace(key, std::move(ns).value()).first;
    }
    mapping_namespace = it->second.get();
  }
  UniqueFd tree(::open_tree(AT_FDCWD, workspace.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
  if (!tree) fail(Error::from_errno("native", "open_tree " + workspace.string()));
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_IDMAP;
  attr.userns_fd = static_cast<std::uint64_t>(mapping_namespace);
  if (::mount_setattr(tree.get(), "", AT_EMPTY_PATH, &attr, sizeof attr) != 0) {
    fail(Error::from_errno(
             "native", "idmapping the workspace mount (MOUNT_ATTR_IDMAP) of " + workspace.string())
             .with_kind(ErrorKind::kUnavailable));
  }
  move_above_stdio(tree);
  idmapped_tree = std::move(tree);

  // init (namespace root = host uid_base) mounts the overlay: it owns the
  // work directory; the upper root is the sandbox user's, like the workspace
  // root is its owner's. The staging directory is reachable by init's group only.
  if (::chown(work.c_str(), ids.uid_base, ids.gid_base) != 0 ||
      ::chown(upper.c_str(), host_sandbox_uid, host_sandbox_gid) != 0 ||
      ::chown(run_dir.c_str(), 0, ids.gid_base) != 0 || ::chmod(run_dir.c_str(), 0710) != 0) {
    fail(Error::from_errno("native", "preparing the ownership of " + run_dir.string()));
  }
}

NativeHost::IdPlan NativeHost::plan_launch(const LaunchSpec& spec, const fs::path& mount_points,
                                           runtime::LaunchPlan& plan, runtime::MountLayout& layout,
                                           linux_api::CgroupSettings& settings) {
  plan.namespaces = kNamespaces;
  plan.new_cgroup_namespace = true;
  if (spec.own_network) plan.namespaces |= CLONE_NEWNET;
  plan.new_root = (mount_points / "root").string();
  plan.hostname = options_.hostname;
  plan.bring_up_loopback = spec.own_network;
  const IdPlan ids = plan_ids(plan);

  layout.mount_points = mount_points;
  layout.system_paths = options_.system_paths;
  layout.hidden_paths = options_.hidden_paths;
  layout.binds = spec.binds;
  // /tmp and /dev/shm live in RAM: without cgroups, the memory limit caps each.
  layout.tmpfs_size_bytes = spec.limits.memory_bytes;

  // Every limit the host's cgroups can hold goes to the sandbox's cgroup;
  // the rlimits (finish()) stand in for the others (capabilities says which).
  const ResourcePolicy& limits = spec.limits;
  const linux_api::CgroupHost& host_cgroups = cgroups();
  if (host_cgroups.memory.usable) {
    settings.memory_max = limits.memory_bytes;
    if (host_cgroups.swap_accounting && limits.swap_bytes) settings.swap_max = limits.swap_bytes;
  }
  // +1: init is in the cgroup too.
  if (host_cgroups.pids.usable) settings.pids_max = limits.max_processes + 1;
  if (host_cgroups.cpu.usable) {
    settings.cpu_quota_us = static_cast<std::uint64_t>(std::llround(
        limits.cpu_quota_percent / 100.0 * static_cast<double>(settings.cpu_period_us)));
  }
  return ids;
}

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

std::string shape_text(const runtime::LaunchPlan& plan, const linux_api::CgroupSettings& settings,
                       bool idmapped_workspace) {
  std::string text;
  add_field(text, plan.namespaces);
  add_field(text, plan.new_cgroup_namespace ? 1 : 0);
  add_field(text, plan.new_root);
  add_field(text, plan.hostname);
  add_field(text, plan.bring_up_loopback ? 1 : 0);
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

}  // namespace

std::string NativeHost::shape_of(const LaunchSpec& spec) {
  runtime::LaunchPlan plan;
  runtime::MountLayout layout;
  linux_api::CgroupSettings settings;
  const IdPlan ids = plan_launch(spec, options_.state_dir / "mnt", plan, layout, settings);
  auto base = runtime::build_base_mount_steps(layout);
  if (!base) return "";  // never the shape of a started sandbox
  plan.base_mounts = std::move(base).value();
  return shape_text(plan, settings, ids.idmapped_workspace);
}

std::unique_ptr<NativeHost::SandboxRun> NativeHost::launch(const LaunchSpec& spec) {
  auto run = std::make_unique<SandboxRun>();
  run->id = spec.id;
  // Staging, locked for the run's lifetime so reconcile() leaves it alone.
  ensure_private_dir(options_.state_dir, ::geteuid() == 0 ? 0711 : 0700);
  ensure_private_dir(options_.state_dir / "runs", ::geteuid() == 0 ? 0711 : 0700);
  ensure_private_dir(options_.state_dir / "trash", 0700);
  ensure_private_dir(options_.state_dir / "pool", 0700);
  run->run_dir = options_.state_dir / "runs" / spec.id;
  // The lock comes first, beside the directory: a concurrent reconcile()
  // never sees the directory of a live run unlocked.
  run->run_lock = core::value_or_throw(core::create_locked_file(core::run_lock_path(run->run_dir)));
  {
    const std::lock_guard lock(runs_mutex_);
    own_runs_.insert(spec.id);
  }
  const fs::path mount_points = ensure_mount_points(options_.state_dir);

  // Launched in parts: init makes its namespaces while this process writes
  // the id maps and the base mount steps (everything that needs no
  // staging); after "go" init makes the base mounts while this process
  // makes the staging directory (and, in finish(), the idmapped workspace,
  // the workspace's mounts and the seccomp filter); then PlanReady lets
  // init finish (runtime/launch_plan.h).
  runtime::LaunchPlan& plan = run->plan;
  if (core::trace_enabled()) {
    run->trace = std::make_unique<core::ChildTrace>();
    plan.trace = run->trace.get();
  }
  auto command_stack = linux_api::ChildStack::allocate(runtime::LaunchPlan::kCommandStackSize);
  if (!command_stack) fail(std::move(command_stack).error());
  plan.command_stack = std::move(command_stack).value();
  plan.capabilities = linux_api::prepare_capability_drop();
  run->ids = plan_launch(spec, mount_points, plan, run->layout, run->settings);
  run->layout.run_dir = run->run_dir;
  // A bad bind is the caller's mistake, reported before any process exists;
  // the steps themselves are built while init makes its namespaces.
  if (auto binds = runtime::check_extra_binds(run->layout); !binds) fail(std::move(binds).error());
  core::trace_phase("native: ids planned, binds checked");

  // The sandbox's cgroup, created before the child exists.
  const linux_api::CgroupSettings& settings = run->settings;
  if (cgroups().unified.usable || settings.memory_max || settings.pids_max ||
      settings.cpu_quota_us) {
    auto created = linux_api::SandboxCgroup::create(cgroups(), spec.id, settings);
    if (!created) fail(std::move(created).error().with_context("creating the sandbox's cgroup"));
    run->cgroup = std::move(created).value();
    plan.cgroup_fd = run->cgroup->unified_fd();
  }
  core::trace_phase("native: cgroup created");

  int out_pipe[2], err_pipe[2], channel[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, channel) != 0) {
    fail(Error::from_errno("native", "creating the sandbox's pipes"));
  }
  run->out_read.reset(out_pipe[0]);
  run->err_read.reset(err_pipe[0]);
  UniqueFd out_write(out_pipe[1]), err_write(err_pipe[1]);
  UniqueFd supervisor_end(channel[0]), child_end(channel[1]);
  move_above_stdio(out_write);
  move_above_stdio(err_write);
  move_above_stdio(child_end);
  plan.stdout_fd = out_write.get();
  plan.stderr_fd = err_write.get();
  plan.channel_fd = child_end.get();

  SandboxRun& r = *run;
  auto launched = runtime::launch_sandbox(plan, std::move(supervisor_end),
                                          [&r](pid_t pid, bool in_cgroup) -> core::Status {
                                            auto base = runtime::build_base_mount_steps(r.layout);
                                            if (!base) return std::move(base).error();
                                            r.plan.base_mounts = std::move(base).value();
                                            if (!r.cgroup) return core::ok_status();
                                            return r.cgroup->attach(pid, in_cgroup);
                                          });
  if (!launched) {
    run->launch_error = launched.error().to_string();
    return run;
  }
  run->sandbox = std::move(launched).value();
  run->launched = true;
  core::trace_phase("native: launched (id maps written, go sent)");

  // The staging directory (its lock is held since before the cgroup).
  make_staging(options_.state_dir / "pool", run->run_dir);
  run->staging_made = true;
  core::trace_phase("native: staging directory made");
  return run;
}

void NativeHost::arm(SandboxRun& run, const ExecutionRequest& request, const fs::path& workspace) {
  const ResourcePolicy& limits = request.limits;
  runtime::LaunchPlan& plan = run.plan;
  runtime::LaunchedSandbox& sandbox = run.sandbox;
  const linux_api::CgroupSettings& settings = run.settings;
  UniqueFd idmapped_tree;
  prepare_staging(run.ids, workspace, run.run_dir, idmapped_tree);
  core::trace_phase("native: staging directory ready");
  runtime::MountLayout& layout = run.layout;
  layout.workspace = workspace;
  layout.hidden_workspace_paths = request.hidden_workspace_paths;
  if (idmapped_tree) {
    // A number init has free: it keeps only these three (and closed 0-2).
    plan.passed_tree_fd = std::max({plan.channel_fd, plan.stdout_fd, plan.stderr_fd}) + 1;
    layout.idmapped_workspace_fd = plan.passed_tree_fd;
  }
  plan.mounts = runtime::build_workspace_mount_steps(layout);
  run.changes_dir = run.run_dir / "upper";

  plan.argv_storage = request.argv;
  for (const auto& [key, value] : request.environment)
    plan.env_storage.push_back(key + "=" + value);
  const auto path_it = request.environment.find("PATH");
  plan.exec_candidates = runtime::exec_candidates(
      request.argv[0], path_it != request.environment.end() ? path_it->second : "/usr/bin:/bin");
  plan.cwd = request.cwd.empty() ? "/workspace" : "/workspace/" + request.cwd;
  plan.seal();
  core::trace_phase("native: mounts planned");
  std::shared_ptr<const seccomp::CompiledFilter> filter;
  if (request.seccomp_profile != "unconfined") {
    auto compiled = filters_->get(request.seccomp_profile);
    if (!compiled) fail(std::move(compiled).error());
    filter = std::move(compiled).value();
    plan.load_seccomp = true;
    plan.seccomp_listener = filter->uses_listener;
    plan.seccomp_program.len = static_cast<unsigned short>(filter->program.size());
    plan.seccomp_program.filter = const_cast<sock_filter*>(filter->program.data());
  }
  core::trace_phase("native: seccomp filter ready");
  auto add_limit = [&](int resource, std::uint64_t value) {
    plan.rlimits.push_back({resource, rlimit{value, value}});
  };
  add_limit(RLIMIT_NOFILE, limits.max_open_files);
  add_limit(RLIMIT_CORE, 0);
  // RLIMIT_AS breaks programs that reserve address space (Go, the JVM,
  // sanitizers): only without a memory cgroup.
  if (!settings.memory_max) add_limit(RLIMIT_AS, limits.memory_bytes);
  // +1: in the rootless layout init runs as the sandbox uid too.
  if (!settings.pids_max) add_limit(RLIMIT_NPROC, limits.max_processes + 1);
  // CPU time: the supervisor reads the cgroup's total; RLIMIT_CPU (per
  // process, whole seconds) only without it, so the two never race.
  if (limits.cpu_time_seconds && !cgroups().cpu_accounting.usable) {
    add_limit(RLIMIT_CPU, static_cast<std::uint64_t>(std::ceil(*limits.cpu_time_seconds)));
  }
  // init has its own copy of the tree once it takes the message. If it
  // cannot take it, a base mount failed and init has ended (its error waits
  // in the channel and is reported below) or it is unreachable: either way
  // it goes.
  if (!runtime::send_plan_ready(sandbox.channel.get(), idmapped_tree.get())) {
    linux_api::sys_pidfd_send_signal(sandbox.pidfd.get(), SIGKILL);
  }
  idmapped_tree.reset();
  core::trace_phase("native: plan sent");
}

void NativeHost::start_and_supervise(SandboxRun& run, const ExecutionRequest& request,
                                     runtime::Clock::time_point start, ExecutionOutcome& outcome) {
  ProcessResult& result = outcome.result;
  const ResourcePolicy& limits = request.limits;
  runtime::LaunchPlan& plan = run.plan;
  runtime::LaunchedSandbox& sandbox = run.sandbox;
  const std::optional<linux_api::SandboxCgroup>& cgroup = run.cgroup;
  const linux_api::CgroupSettings& settings = run.settings;
  auto finish_timing = [&] {
    result.metrics.elapsed_ms =
        std::chrono::duration<double, std::milli>(runtime::Clock::now() - start).count();
    result.duration_ms = result.metrics.elapsed_ms;
  };
  outcome.changes_dir = run.changes_dir;
  outcome.changes_dir_is_full_copy = false;
  // If init cannot take it, it has ended (a workspace mount failed: its
  // error waits in the channel and is reported below).
  (void)runtime::send_start(sandbox.channel.get());
  core::trace_phase("native: start sent");
  // While the sandbox sets up and runs, this process mostly waits. (With
  // prestart the runtime's own thread does it, between runs.)
  std::optional<TrashRemover> trash_remover;
  if (!prestarts())
    trash_remover.emplace(options_.state_dir / "trash", options_.state_dir / "pool");
  result.pid = sandbox.pid;

  // The command says Ready just before execve, handing over the seccomp
  // listener; anything else (a setup error, init's report) is kept for later.
  std::vector<runtime::ChildMessage> messages;
  UniqueFd listener;
  {
    const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
        std::chrono::duration<double>(limits.wall_time_seconds));
    int passed = -1;
    auto first = runtime::receive_message(
        sandbox.channel.get(), static_cast<int>(std::max<long>(wall.count(), 1)), &passed);
    listener.reset(passed);
    if (first && first->kind != runtime::ChildMessageKind::Ready) messages.push_back(*first);
  }
  core::trace_phase("native: command ready to execve");
  std::optional<std::string> forbidden_syscall;
  std::optional<int> command_status;
  bool init_gone = false;  // the channel's end: init exited without reporting

  runtime::SupervisedProcess process;
  process.pid = sandbox.pid;
  process.stdout_fd = run.out_read.get();
  process.stderr_fd = run.err_read.get();
  process.cancel_fd = request.cancel_fd;
  // The run ends with init's report (the command's status, every other
  // process already reaped) or, if init dies first, the channel's end; init's
  // own exit, the namespaces' teardown, is not waited for here.
  for (const auto& message : messages) {
    if (message.kind == runtime::ChildMessageKind::Exited) command_status = message.wait_status;
  }
  process.exit_fd = sandbox.channel.get();
  process.has_exited = [&] {
    if (command_status || init_gone) return true;
    int passed = -1;
    auto message = runtime::receive_message(sandbox.channel.get(), 0, &passed);
    if (passed >= 0) ::close(passed);
    if (!message) {
      init_gone = true;  // EOF (a message is never partial)
      return true;
    }
    messages.push_back(*message);
    if (message->kind == runtime::ChildMessageKind::Exited) command_status = message->wait_status;
    return command_status.has_value();
  };
  // SIGTERM reaches init, which forwards it to everything inside; SIGKILL
  // of init kills the whole pid namespace.
  process.signal_sandbox = [&](int signal) {
    linux_api::sys_pidfd_send_signal(sandbox.pidfd.get(), signal);
    if (signal == SIGKILL && cgroup) cgroup->kill();
  };
  // The cgroup is read while the sandbox runs only when something needs it:
  // CPU time against --cpu-time, the process count where the kernel keeps no
  // peak (before Linux 6.1).
  std::uint64_t sampled_processes = 0;
  if (cgroup && (limits.cpu_time_seconds || (settings.pids_max && !cgroup->keeps_pids_peak()))) {
    process.poll_interval = kCgroupPollInterval;
    process.check_limits = [&]() -> std::optional<TerminationReason> {
      const linux_api::CgroupUsage usage = cgroup->usage();
      sampled_processes = std::max(sampled_processes, usage.pids_current.value_or(0));
      if (limits.cpu_time_seconds && usage.cpu_usec &&
          static_cast<double>(*usage.cpu_usec) > *limits.cpu_time_seconds * 1e6) {
        return TerminationReason::CpuTime;
      }
      return std::nullopt;
    };
  }
  // A kill action of the profile: learn the syscall, end the sandbox before
  // the call runs (the caller stays blocked in the kernel until then).
  process.watch_fd = listener.get();
  process.on_watch = [&] {
    seccomp_notif notification{};
    if (::ioctl(listener.get(), SECCOMP_IOCTL_NOTIF_RECV, &notification) != 0) return;
    if (!forbidden_syscall) {
      forbidden_syscall = seccomp::syscall_name(notification.data.arch, notification.data.nr);
    }
    linux_api::sys_pidfd_send_signal(sandbox.pidfd.get(), SIGKILL);
  };
  const runtime::SupervisionOutcome supervision =
      runtime::supervise(process, limits, start, request.on_output);
  result.timed_out = supervision.timed_out;
  result.truncated = supervision.truncated;
  result.termination_reason = supervision.reason;
  result.metrics.output_bytes = supervision.output_bytes;
  core::trace_phase("native: supervision done");

  // Without a report (init was killed, or failed) its own status is the
  // answer; without a cgroup its rusage is the only measure. Both need init
  // reaped now; otherwise tear_down() reaps it.
  run.reported = command_status.has_value();
  int init_status = 0;
  if (!command_status || !cgroup) {
    rusage usage{};
    init_status = sandbox.wait(&usage);
    result.metrics.cpu_time_ms =
        static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1000.0 +
        static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1000.0;
    result.metrics.peak_memory_bytes = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  }
  linux_api::CgroupUsage cgroup_usage;
  if (cgroup) {
    // Only init is left (or nothing): the counters are final.
    cgroup_usage = cgroup->usage();
    if (cgroup_usage.cpu_usec) {
      result.metrics.cpu_time_ms = static_cast<double>(*cgroup_usage.cpu_usec) / 1000.0;
    }
    if (cgroup_usage.memory_peak) result.metrics.peak_memory_bytes = *cgroup_usage.memory_peak;
    // Less init.
    const std::uint64_t peak = cgroup_usage.pids_peak.value_or(sampled_processes);
    result.metrics.process_count = peak > 0 ? peak - 1 : 0;
  }

  if (run.trace) run.trace->print();
  core::trace_phase("native: result read");
  std::optional<runtime::ChildMessage> error;
  for (const auto& message : runtime::drain_messages(sandbox.channel.get()))
    messages.push_back(message);
  for (const auto& message : messages) {
    if (message.kind == runtime::ChildMessageKind::Error && !error) error = message;
  }
  if (error) {
    result.termination_reason = TerminationReason::LaunchError;
    const bool exec_failed = std::string_view(error->stage) == "executing";
    result.exit_code = !exec_failed ? 125 : error->error_number == ENOENT ? 127 : 126;
    result.termination_detail =
        exec_failed ? "cannot execute " + std::string(error->detail) + ": " +
                          core::describe_errno(error->error_number)
                    : "sandbox setup failed: " + runtime::describe_child_error(*error);
    finish_timing();
    return;
  }
  if (forbidden_syscall) {
    result.termination_reason = TerminationReason::Seccomp;
    result.signal = SIGSYS;
    result.exit_code = 128 + SIGSYS;
    result.termination_detail = "the seccomp profile " + request.seccomp_profile +
                                " does not allow " + *forbidden_syscall +
                                ": the sandbox was killed";
    finish_timing();
    return;
  }
  const int status = command_status.value_or(init_status);
  // The cgroup's counters say why a failing command failed.
  const bool failed = !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const bool reason_open = result.termination_reason == TerminationReason::None;
  if (failed && reason_open && cgroup_usage.oom_kills > 0) {
    result.termination_reason = TerminationReason::Oom;
    result.termination_detail = "the sandbox reached its memory limit of " +
                                format_size(limits.memory_bytes) +
                                ": the kernel's OOM killer ended " +
                                std::to_string(cgroup_usage.oom_kills) + " process(es)";
  } else if (failed && reason_open && cgroup_usage.pids_limit_hits > 0) {
    result.termination_reason = TerminationReason::Pids;
    result.termination_detail = "the sandbox reached its limit of " +
                                std::to_string(limits.max_processes) +
                                " processes: " + std::to_string(cgroup_usage.pids_limit_hits) +
                                " fork()/clone() call(s) failed with EAGAIN";
  } else if (result.termination_reason == TerminationReason::CpuTime &&
             result.termination_detail.empty()) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%g", *limits.cpu_time_seconds);
    result.termination_detail =
        "the sandbox used up its CPU time limit of " + std::string(seconds) + " s";
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
    if (!command_status && result.termination_reason == TerminationReason::None) {
      result.termination_reason = TerminationReason::LaunchError;
      result.exit_code = 125;
      result.termination_detail = "the sandbox's init ended without a report";
    }
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
    result.exit_code = 128 + WTERMSIG(status);
    if (result.termination_reason == TerminationReason::None) {
      result.termination_reason =
          WTERMSIG(status) == SIGXCPU ? TerminationReason::CpuTime : TerminationReason::Signal;
      if (WTERMSIG(status) == SIGSYS && plan.load_seccomp) {
        // SCMP_ACT_TRAP, or a syscall of an architecture the profile omits.
        result.termination_reason = TerminationReason::Seccomp;
        result.termination_detail = "killed by SIGSYS: a system call the seccomp profile " +
                                    request.seccomp_profile + " forbids";
      }
    }
  }
  finish_timing();
}

void NativeHost::tear_down(SandboxRun& run) {
  // init's exit tears its namespaces down (its mount tree with the overlay,
  // its network namespace); its pid namespace took every other process. An
  // init that has not reported (still waiting for its plan, or the run
  // failed before it could) is ended first.
  if (run.launched && !run.reported)
    linux_api::sys_pidfd_send_signal(run.sandbox.pidfd.get(), SIGKILL);
  run.sandbox.wait();
  // No kill first (remove() kills whatever an outsider put there). A cgroup
  // left behind keeps the lock file (unlocked once this process exits): the
  // next start-up reconciles because of it.
  const bool cgroup_removed = !run.cgroup || run.cgroup->remove();
  run.cgroup.reset();
  if (run.staging_made) {
    // Out of the way at once, removed during a later run (TrashRemover).
    const fs::path trash = options_.state_dir / "trash" / run.run_dir.filename();
    if (::rename(run.run_dir.c_str(), trash.c_str()) != 0) remove_tree(run.run_dir);
    run.staging_made = false;
  }
  // While still holding it.
  if (run.run_lock && cgroup_removed) ::unlink(core::run_lock_path(run.run_dir).c_str());
  if (run.run_lock) {
    const std::lock_guard lock(runs_mutex_);
    own_runs_.erase(run.id);
  }
  run.run_lock.reset();
  core::trace_phase("native: init reaped, cgroup removed");
}

// Sandboxes started ahead (a NativeHost with prestart, in a long-lived
// process such as `pulsebox serve --local`). One thread of its own tears
// finished runs down, empties trash/, and then starts one sandbox in the
// shape of the last run, up to init waiting for PlanReady: the next run of
// that shape begins at its workspace mounts. The sandboxes are this
// thread's children, and it lives as long as the host: init's
// PR_SET_PDEATHSIG follows the thread that created it.
class NativeHost::Prestart {
 public:
  explicit Prestart(NativeHost& host) : host_(host), thread_([this] { loop(); }) {}
  Prestart(const Prestart&) = delete;
  Prestart& operator=(const Prestart&) = delete;
  ~Prestart() {
    {
      const std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }

  std::unique_ptr<SandboxRun> take(const std::string& shape) {
    if (shape.empty()) return nullptr;
    std::unique_lock lock(mutex_);
    // One being started in this very shape is further along than a new
    // launch would be: wait for it.
    changed_.wait(lock, [&] { return !starting_ || starting_shape_ != shape; });
    if (!ready_ || ready_->shape != shape) return nullptr;
    std::unique_ptr<SandboxRun> run = std::move(ready_);
    if (!still_waiting(*run)) {  // its init ended (killed, or a base mount failed)
      host_.count(&Stats::discarded);
      retired_.push_back(std::move(run));
      changed_.notify_all();
      return nullptr;
    }
    return run;
  }

  void retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next) {
    {
      const std::lock_guard lock(mutex_);
      for (auto& run : runs)
        retired_.push_back(std::move(run));
      if (next != nullptr) wanted_ = *next;
      busy_ = true;
    }
    changed_.notify_all();
  }

  void wait_until_idle() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [&] { return !busy_ && retired_.empty() && !wanted_; });
  }

 private:
  // init still waits for PlanReady: nothing in the channel, no exit.
  static bool still_waiting(const SandboxRun& run) {
    pollfd fds[] = {{run.sandbox.channel.get(), POLLIN, 0}, {run.sandbox.pidfd.get(), POLLIN, 0}};
    return ::poll(fds, 2, 0) == 0;
  }

  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      if (retired_.empty() && !wanted_) {  // nothing left: at rest until more comes
        busy_ = false;
        changed_.notify_all();
      }
      changed_.wait(lock, [&] { return stopping_ || !retired_.empty() || wanted_; });
      if (stopping_) break;
      busy_ = true;
      if (!retired_.empty()) {
        std::vector<std::unique_ptr<SandboxRun>> runs = std::move(retired_);
        retired_.clear();
        lock.unlock();
        for (auto& run : runs)
          tear_down_quietly(*run);
        runs.clear();
        const std::atomic<bool> never{false};
        empty_trash(host_.options_.state_dir / "trash", host_.options_.state_dir / "pool", never);
        lock.lock();
        continue;  // more may have come meanwhile: teardowns first
      }
      LaunchSpec spec = std::move(*wanted_);
      wanted_.reset();
      spec.id = "run-" + core::random_hex(16);
      std::unique_ptr<SandboxRun> old = std::move(ready_);
      lock.unlock();
      const std::string shape = host_.shape_of(spec);
      if (old && old->shape == shape && still_waiting(*old)) {
        lock.lock();
        ready_ = std::move(old);
      } else {
        if (old) {
          host_.count(&Stats::discarded);
          tear_down_quietly(*old);
        }
        lock.lock();
        starting_ = true;
        starting_shape_ = shape;
        lock.unlock();
        std::unique_ptr<SandboxRun> run = launch_quietly(spec);
        lock.lock();
        starting_ = false;
        if (run && run->launched) {
          host_.count(&Stats::started_ahead);
          ready_ = std::move(run);
        } else if (run) {
          retired_.push_back(std::move(run));
        }
      }
      core::trace_flush();
    }
    // Stopping: nothing more is started; the sandbox waiting and whatever
    // is queued are torn down.
    std::vector<std::unique_ptr<SandboxRun>> left = std::move(retired_);
    if (ready_) {
      host_.count(&Stats::discarded);
      left.push_back(std::move(ready_));
    }
    lock.unlock();
    for (auto& run : left)
      tear_down_quietly(*run);
  }

  std::unique_ptr<SandboxRun> launch_quietly(const LaunchSpec& spec) {
    try {
      std::unique_ptr<SandboxRun> run = host_.launch(spec);
      // The shape of what init was given, not of what the spec would give
      // now: the two may differ if the host changed meanwhile.
      if (run->launched)
        run->shape = shape_text(run->plan, run->settings, run->ids.idmapped_workspace);
      return run;
    } catch (const std::exception&) {
      // Not started ahead: the next run launches itself and reports the error.
      return nullptr;
    }
  }

  void tear_down_quietly(SandboxRun& run) {
    try {
      host_.tear_down(run);
    } catch (const std::exception&) {
      // What is left (a cgroup, a staging directory) keeps its lock file
      // unlocked once this process is gone: the next reconcile removes it.
    }
  }

  NativeHost& host_;
  std::mutex mutex_;
  std::condition_variable changed_;
  bool stopping_ = false;
  bool busy_ = false;
  std::vector<std::unique_ptr<SandboxRun>> retired_;
  std::optional<LaunchSpec> wanted_;
  std::unique_ptr<SandboxRun> ready_;
  bool starting_ = false;
  std::string starting_shape_;
  std::thread thread_;  // last: started once everything above exists
};

NativeHost::~NativeHost() {
  prestart_.reset();
}

std::unique_ptr<NativeHost::SandboxRun> NativeHost::take_started(const std::string& shape) {
  return prestart_ ? prestart_->take(shape) : nullptr;
}

void NativeHost::retire(std::vector<std::unique_ptr<SandboxRun>> runs, const LaunchSpec* next) {
  if (prestart_) {
    prestart_->retire(std::move(runs), next);
    return;
  }
  for (auto& run : runs)
    tear_down(*run);
}

void NativeHost::start_ahead(const NetworkPolicy& network, const ResourcePolicy& limits) {
  if (!prestart_) return;
  LaunchSpec spec;
  spec.own_network = network.mode != NetworkMode::AllowAll;
  spec.limits = limits;
  prestart_->retire({}, &spec);
}

void NativeHost::wait_until_idle() {
  if (prestart_) prestart_->wait_until_idle();
}

// A Backend for one run at a time, on a NativeHost that may serve others.
class NativeBackend final : public Backend {
 public:
  explicit NativeBackend(std::shared_ptr<NativeHost> host) : host_(std::move(host)) {}
  ~NativeBackend() override { cleanup(); }
  NativeBackend(const NativeBackend&) = delete;
  NativeBackend& operator=(const NativeBackend&) = delete;

  std::string name() const override { return "native"; }
  bool is_unsafe() const override { return false; }
  std::string isolation_level() const override { return "native"; }
  Availability availability() const override { return host_->availability(); }
  std::vector<std::string> reconcile() override { return host_->reconcile(); }
  std::vector<std::string> reconcile_if_needed() override { return host_->reconcile_if_needed(); }
  // The run set up to the command's start while the facade makes its last
  // checks and records (init's workspace mounts and pivot_root overlap
  // them); execute() with the same request goes on from there.
  void prepare(const ExecutionRequest& request) override;
  ExecutionOutcome execute(const ExecutionRequest& request) override;
  // The runs execute() left for it: init reaped, cgroup removed, staging
  // moved to trash/. (execute() returns as soon as init has reported, so
  // the facade reads the changes while the kernel tears init down.) With
  // prestart, this happens on the host's thread, which then starts the
  // next sandbox in this run's shape.
  void cleanup() override {
    prepared_.reset();  // not executed: it goes with the others
    if (finished_.empty()) return;
    host_->retire(std::move(finished_), last_spec_ ? &*last_spec_ : nullptr);
    finished_.clear();
    last_spec_.reset();
  }

  Capability network_capability(const NetworkPolicy& policy) const override {
    return host_->network_capability(policy);
  }
  Capability secrets_capability(const SecretPolicy& policy) const override {
    return host_->secrets_capability(policy);
  }
  Capability filesystem_capability() const override { return host_->filesystem_capability(); }
  Capability limit_capability(LimitKind kind) const override {
    return host_->limit_capability(kind);
  }
  Capability syscall_capability(const std::string& profile) const override {
    return host_->syscall_capability(profile);
  }
  Capability process_containment_capability() const override {
    return host_->process_containment_capability();
  }

 private:
  // A run launched (or taken) and armed for `request`.
  struct Begun {
    NativeHost::SandboxRun* run = nullptr;  // its entry in finished_
    bool armed = false;                     // false: the launch failed in the kernel (run says why)
    fs::path workspace;
    runtime::Clock::time_point start;
  };
  Begun begin(const ExecutionRequest& request);
  // Tears down the prepared run now (an execute() for another request).
  void discard_prepared();
  // What of a request prepare() acted on: execute() goes on from a prepared
  // run only for a request with the same.
  static std::string prepared_key(const ExecutionRequest& request);

  std::shared_ptr<NativeHost> host_;
  // Runs whose result execute() returned (or that prepare() set up), for
  // cleanup().
  std::vector<std::unique_ptr<NativeHost::SandboxRun>> finished_;
  std::optional<NativeHost::LaunchSpec> last_spec_;
  struct Prepared {
    Begun begun;
    std::string key;
  };
  std::optional<Prepared> prepared_;
};

std::shared_ptr<Backend> NativeHost::make_backend() {
  return std::make_shared<NativeBackend>(shared_from_this());
}

NativeBackend::Begun NativeBackend::begin(const ExecutionRequest& request) {
  core::trace_phase("native: execute");
  Begun begun;
  begun.start = runtime::Clock::now();
  const NativeBackendOptions& options = host_->options();
  std::error_code ec;
  begun.workspace = fs::canonical(request.workspace, ec);
  if (ec)
    fail(Error(ErrorKind::kInvalidInput, "native",
               "workspace " + request.workspace.string() + ": " + ec.message()));
  // Inside the workspace, the staging would be an overlay layer inside another.
  const fs::path state = fs::weakly_canonical(options.state_dir, ec);
  const auto [ws_end, state_end] =
      std::mismatch(begun.workspace.begin(), begun.workspace.end(), state.begin(), state.end());
  if (ws_end == begun.workspace.end()) {
    fail(Error(ErrorKind::kInvalidInput, "native",
               "the state directory " + options.state_dir.string() +
                   " is inside the workspace; choose another (PULSEBOX_STATE_DIR)"));
  }

  NativeHost::LaunchSpec spec;
  spec.id = request.execution_id;
  spec.own_network = request.network.mode != NetworkMode::AllowAll;
  spec.limits = request.limits;
  spec.binds = request.binds;
  std::unique_ptr<NativeHost::SandboxRun> run;
  if (host_->prestarts()) {
    run = host_->take_started(host_->shape_of(spec));
    if (run) {
      core::trace_phase("native: sandbox started ahead taken");
      host_->count(&backends::NativeRuntime::Stats::used_started_ahead);
    }
  }
  if (!run) {
    run = host_->launch(spec);
    host_->count(&backends::NativeRuntime::Stats::launched_for_a_run);
  }
  NativeHost::SandboxRun& launched = *run;
  // Whatever happens from here, cleanup() tears the run down.
  finished_.push_back(std::move(run));
  last_spec_ = spec;
  begun.run = &launched;
  if (!launched.launched) return begun;
  host_->arm(launched, request, begun.workspace);
  begun.armed = true;
  return begun;
}

std::string NativeBackend::prepared_key(const ExecutionRequest& request) {
  std::string key;
  add_field(key, request.execution_id);
  add_field(key, request.workspace.string());
  add_field(key, request.cwd);
  add_field(key, request.seccomp_profile);
  add_field(key, static_cast<std::uint64_t>(request.network.mode));
  for (const auto* list : {&request.argv, &request.hidden_workspace_paths}) {
    add_field(key, list->size());
    for (const auto& item : *list)
      add_field(key, item);
  }
  add_field(key, request.environment.size());
  for (const auto& [name, value] : request.environment) {
    add_field(key, name);
    add_field(key, value);
  }
  add_field(key, request.binds.size());
  for (const auto& bind : request.binds) {
    add_field(key, bind.host.string());
    add_field(key, bind.sandbox_path);
    add_field(key, bind.writable ? 1 : 0);
  }
  const ResourcePolicy& l = request.limits;
  for (const std::uint64_t value :
       {l.memory_bytes, l.max_processes, l.max_open_files, l.max_output_bytes}) {
    add_field(key, value);
  }
  add_field(key, l.swap_bytes);
  char numbers[96];
  std::snprintf(numbers, sizeof numbers, "%.17g %.17g %.17g", l.cpu_quota_percent,
                l.wall_time_seconds, l.cpu_time_seconds.value_or(-1));
  add_field(key, numbers);
  return key;
}

void NativeBackend::prepare(const ExecutionRequest& request) {
  prepared_.reset();  // an earlier one not executed stays in finished_ for cleanup()
  try {
    Prepared prepared;
    prepared.key = prepared_key(request);
    prepared.begun = begin(request);
    prepared_ = std::move(prepared);
  } catch (const std::exception&) {
    // execute() does it again and reports it.
  }
}

void NativeBackend::discard_prepared() {
  if (!prepared_) return;
  for (auto it = finished_.begin(); it != finished_.end(); ++it) {
    if (it->get() != prepared_->begun.run) continue;
    host_->tear_down(**it);  // here and now: its lock is released when this returns
    finished_.erase(it);
    break;
  }
  prepared_.reset();
}

ExecutionOutcome NativeBackend::execute(const ExecutionRequest& request) {
  ExecutionOutcome outcome;
  std::optional<Begun> begun;
  if (prepared_ && prepared_->key == prepared_key(request)) {
    begun = prepared_->begun;
    prepared_.reset();
  } else {
    // Another request's: torn down first (it holds its run's lock, which a
    // request with the same id would wait for).
    discard_prepared();
  }
  if (!begun) begun = begin(request);
  if (!begun->armed) {
    ProcessResult& result = outcome.result;
    result.termination_reason = TerminationReason::LaunchError;
    result.exit_code = 125;
    result.termination_detail = begun->run->launch_error;
    result.metrics.elapsed_ms =
        std::chrono::duration<double, std::milli>(runtime::Clock::now() - begun->start).count();
    result.duration_ms = result.metrics.elapsed_ms;
    return outcome;
  }
  host_->start_and_supervise(*begun->run, request, begun->start, outcome);
  return outcome;
}

}  // namespace

std::shared_ptr<Backend> make_native_backend(NativeBackendOptions options) {
  return std::make_shared<NativeHost>(std::move(options), false)->make_backend();
}

void backends::ensure_state_dir(const fs::path& dir) {
  check_state_dir(dir, false);
  ensure_private_dir(dir, ::geteuid() == 0 ? 0711 : 0700);
}

fs::path backends::default_state_dir() {
  if (const char* dir = std::getenv("PULSEBOX_STATE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  if (::geteuid() == 0) return "/var/lib/pulsebox";
  return "/var/tmp/pulsebox-" + std::to_string(::geteuid());
}

std::shared_ptr<backends::NativeRuntime> backends::make_native_runtime(NativeBackendOptions options,
                                                                       bool prestart) {
  return std::make_shared<NativeHost>(std::move(options), prestart);
}

}  // namespace pulsebox
