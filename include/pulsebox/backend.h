// The backend interface: what actually runs a command, and how strongly it
// enforces each part of a policy on this host.
//
// Call order (driven by pulsebox::Sandbox):
//   availability()         may this backend run here at all, and if not why
//   reconcile_if_needed()  once, before the first run: remove what crashed
//                          runs left (reconcile() does it unconditionally)
//   prepare(request)       optional, with the request about to run, before
//                          the facade's last checks and their audit records:
//                          the backend may set the sandbox up meanwhile and
//                          returns it as a PreparedRun
//   *_capability(...)      per dimension, before each run (the facade refuses
//                          a run when a requested policy would be enforced
//                          less than strongly and the caller did not accept it)
//   execute(request, prepared)
//                          the run (from the prepared one, if given); output is
//                          streamed through the callback
//   cleanup()              after each run
//
// Levels: StronglyEnforced (the kernel enforces it for the whole sandbox),
// PartiallyEnforced (enforced with known gaps, named in `reason`), Advisory
// (only recorded), Unsupported (not enforced at all).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pulsebox/export.h"
#include "pulsebox/limits.h"
#include "pulsebox/network.h"
#include "pulsebox/result.h"
#include "pulsebox/secrets.h"

namespace pulsebox {

enum class LimitKind { Memory, Swap, Processes, Cpu, CpuTime, WallTime, Output, Disk, OpenFiles };
PULSEBOX_API std::string_view to_string(LimitKind kind);
inline constexpr LimitKind kAllLimitKinds[] = {
    LimitKind::Memory, LimitKind::Swap,    LimitKind::Processes,
    LimitKind::Cpu,    LimitKind::CpuTime, LimitKind::WallTime,
    LimitKind::Output, LimitKind::Disk,    LimitKind::OpenFiles};

struct Capability {
  EnforcementLevel level = EnforcementLevel::Unsupported;
  std::string reason;  // why this level, on this host
  std::string fix;     // what to change to raise it ("" when nothing can)
};

struct Availability {
  bool available = false;
  std::string reason;
};

enum class OutputStream { Stdout, Stderr };

// An extra host path shown inside the sandbox (native backend). Read-only
// unless `writable`; the sandbox path must be absolute and outside
// /workspace, /proc, /dev and the read-only system directories.
struct BindMount {
  std::filesystem::path host;
  std::string sandbox_path;
  bool writable = false;
};

struct ExecutionRequest {
  std::vector<std::string> argv;
  std::filesystem::path workspace;                 // the host directory shown to the command
  std::string cwd;                                 // relative to the workspace; "" is its root
  std::map<std::string, std::string> environment;  // complete; built by the facade
  ResourcePolicy limits;
  NetworkPolicy network;
  SecretPolicy secrets;
  std::string execution_id;
  std::vector<BindMount> binds;
  // A built-in seccomp profile ("default", "strict", "permissive"), a file in
  // Docker/OCI format, or "unconfined" (no filter).
  std::string seccomp_profile = "default";
  // Paths inside the workspace (relative) the command must not see, besides
  // .agent/: e.g. an audit log kept there.
  std::vector<std::string> hidden_workspace_paths;
  // Directories layered over the workspace, top first, in overlayfs's layer
  // format: a session's earlier changes (see session.h). Only backends with
  // a kept_changes_dir() take them.
  std::vector<std::filesystem::path> lower_layers;
  // Raw output chunks as they arrive (the facade scrubs them).
  std::function<void(OutputStream, std::string_view)> on_output;
  // Cancels the run once readable or hung up (-1: none); see ExecuteOptions.
  int cancel_fd = -1;
  // The command's stdin (-1: /dev/null); see ExecuteOptions. Not owned.
  int stdin_fd = -1;
  // A pseudo-terminal for the command; see ExecuteOptions. Native only.
  bool terminal = false;
  int terminal_input_fd = -1;
  int terminal_resize_fd = -1;
};

struct ExecutionOutcome {
  ProcessResult result;  // stdout/stderr are left empty: output goes to on_output
  // A directory holding the run's view of the workspace changes, to import as
  // a transaction, and how to read it.
  std::optional<std::filesystem::path> changes_dir;
  bool changes_dir_is_full_copy = false;  // else an overlayfs upper directory
};

// A run that prepare() set up ahead of its command's start. Passed to
// execute() with the very request it was prepared for, it goes on from where
// it is; destroyed unexecuted, it is torn down.
class PULSEBOX_API PreparedRun {
 public:
  virtual ~PreparedRun();
};

class PULSEBOX_API Backend {
 public:
  virtual ~Backend();

  virtual std::string name() const = 0;
  // True when the command runs with the invoking user's full access to the host.
  virtual bool is_unsafe() const = 0;
  // The audit log's isolation_level: "native", "host_unsafe", "remote_container".
  virtual std::string isolation_level() const = 0;
  virtual Availability availability() const = 0;

  // Removes what crashed runs left; returns one line per thing removed.
  virtual std::vector<std::string> reconcile() = 0;
  // reconcile(), skipped where the backend can tell cheaply that no run
  // crashed since the last reconcile (what Sandbox does before its first run).
  virtual std::vector<std::string> reconcile_if_needed() { return reconcile(); }
  // May set up the sandbox for `request` ahead of execute() (the native
  // backend goes as far as the command's start). Never throws: nullptr when
  // it prepared nothing (the default) or failed, and then execute() does it
  // afresh and reports what fails.
  virtual std::unique_ptr<PreparedRun> prepare(const ExecutionRequest& request);
  // Runs `request`, going on from `prepared` (prepare()'s, for this very
  // request) when given. Throws SandboxError only when the run could not be
  // attempted at all; a command that fails to start is a result with
  // termination_reason launch_error.
  virtual ExecutionOutcome execute(const ExecutionRequest& request,
                                   std::unique_ptr<PreparedRun> prepared) = 0;
  ExecutionOutcome execute(const ExecutionRequest& request) { return execute(request, nullptr); }
  virtual void cleanup() = 0;

  // A directory on the file system of the runs' changes_dir, where the
  // caller may keep a run's changes by renaming changes_dir into it (a
  // session's layers, held changes): cleanup() and reconcile() leave it
  // alone. nullopt when the backend has none (then sessions are refused and
  // changes that cannot be staged cannot be kept).
  virtual std::optional<std::filesystem::path> kept_changes_dir() { return std::nullopt; }

  virtual Capability network_capability(const NetworkPolicy& policy) const = 0;
  virtual Capability secrets_capability(const SecretPolicy& policy) const = 0;
  virtual Capability filesystem_capability() const = 0;
  virtual Capability limit_capability(LimitKind kind) const = 0;
  virtual Capability syscall_capability(const std::string& seccomp_profile) const = 0;
  virtual Capability process_containment_capability() const = 0;
};

}  // namespace pulsebox

namespace pulsebox {

// The unsafe host backend (see docs/backends.md). Sandbox uses it only with
// an explicit opt-in (SandboxOptions::unsafe_host_execution).
PULSEBOX_API std::shared_ptr<Backend> make_host_backend();

// The native backend (see docs/backends.md): user, mount, pid, ipc, uts,
// cgroup and network namespaces; a tmpfs root with read-only system
// directories; the workspace through overlayfs; every capability dropped.
struct NativeBackendOptions {
  // Host directories bound read-only at the same path (symlinks, such as
  // Debian's /bin -> usr/bin, are recreated as symlinks).
  std::vector<std::string> system_paths = {"/usr",   "/bin",   "/sbin",   "/lib",
                                           "/lib32", "/lib64", "/libx32", "/etc"};
  // Paths under system_paths hidden inside (an unreadable empty file or an
  // empty directory in their place).
  std::vector<std::string> hidden_paths = {"/etc/shadow",
                                           "/etc/shadow-",
                                           "/etc/gshadow",
                                           "/etc/gshadow-",
                                           "/etc/sudoers",
                                           "/etc/sudoers.d",
                                           "/etc/ssl/private",
                                           "/etc/security/opasswd",
                                           "/etc/credstore",
                                           "/etc/credstore.encrypted",
                                           "/etc/ssh/ssh_host_rsa_key",
                                           "/etc/ssh/ssh_host_ecdsa_key",
                                           "/etc/ssh/ssh_host_ed25519_key",
                                           "/etc/ssh/ssh_host_dsa_key",
                                           "/etc/pulsebox"};
  std::string hostname = "pulsebox";
  // The uid and gid the command runs as inside.
  unsigned sandbox_uid = 1000;
  unsigned sandbox_gid = 1000;
  // Rootless only: map 65536 ids (the sandbox uid/gid -> the invoking user,
  // the others -> the user's /etc/subuid and /etc/subgid ranges, through
  // newuidmap/newgidmap) instead of one, for runs that need other ids to
  // exist inside. The command still holds no capabilities, so it cannot take
  // those ids itself. Without ranges or helpers, a run is refused with the fix.
  // (root always maps a range.)
  bool subordinate_ids = false;
  // Per-run staging (overlay upper and work directories). Default:
  // $PULSEBOX_STATE_DIR, else /var/lib/pulsebox as root and
  // /var/tmp/pulsebox-UID otherwise.
  std::filesystem::path state_dir;
  // A system directory as state_dir (/etc/..., /tmp itself, a home
  // directory itself, ...: see SystemDirectoryUse in workspace.h) makes
  // make_native_backend throw SandboxSecurityError unless this is set or
  // PULSEBOX_ALLOW_SYSTEM_STATE_DIR=1.
  bool allow_system_state_dir = false;
};
PULSEBOX_API std::shared_ptr<Backend> make_native_backend(NativeBackendOptions options = {});

}  // namespace pulsebox
