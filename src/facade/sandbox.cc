#include "pulsebox/sandbox.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>

#include "audit/key.h"
#include "core/agent_dir.h"
#include "core/fs.h"
#include "core/sandbox_home.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "core/trace.h"
#include "pulsebox/error.h"
#include "pulsebox/lifecycle.h"
#include "pulsebox/path_validator.h"
#include "pulsebox/session.h"
#include "seccomp/profile.h"
#include "workspace/safe_open.h"

namespace pulsebox {

using core::Error;
using core::ErrorKind;

namespace {

EnforcementLevel weakest(EnforcementLevel a, EnforcementLevel b) {
  return static_cast<int>(a) >= static_cast<int>(b) ? a : b;
}

std::filesystem::path default_audit_path(const SandboxOptions& options) {
  if (!options.audit_log_path.empty()) return options.audit_log_path;
  return options.workspace / ".agent" / "logs" / "audit.jsonl";
}

// The path the policy is asked about: the file a spelling names, as the
// path checks resolve it ("./a" and "a//b" are "a" and "a/b"), so that no
// spelling escapes a rule. A path the checks refuse is asked about as given
// (its read or staging is refused anyway).
std::string policy_target(std::string_view path) {
  const std::size_t slashes = std::min(path.find_first_not_of('/'), path.size());
  auto normal = workspace::check_relative_path(path.substr(slashes));
  if (!normal) return std::string(path);
  return slashes > 0 ? "/" + *normal : *normal;
}

// Where `relative` leads beneath `root` with its symlinks followed (as a
// read follows them), or nullopt when it does not open (the read then says
// why). A path that opens but whose place cannot be told is refused.
std::optional<std::string> resolved_location(const std::filesystem::path& root,
                                             const std::string& relative) {
  auto root_fd = core::open_directory(root);
  if (!root_fd) return std::nullopt;
  auto fd = workspace::open_beneath(root_fd.value().get(), relative, O_PATH);
  if (!fd) return std::nullopt;
  std::error_code ec;
  const auto where =
      std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fd.value().get()), ec);
  const auto inside = where.lexically_relative(root);
  if (ec || inside.empty() || *inside.begin() == "..") {
    throw SandboxSecurityError(
        "refusing to read " + relative + ": cannot tell where it leads (is /proc mounted?)", 0,
        "path");
  }
  return inside.string();
}

// Where a staged change of `normal` lands: the deepest existing directory
// on its way with its symlinks followed (as a commit follows them beneath
// the root), then the rest as named. The last name is not followed: a
// delete removes a symlink itself.
std::string landing_place(const std::filesystem::path& root, const std::string& normal) {
  for (auto slash = normal.rfind('/'); slash != std::string::npos && slash > 0;
       slash = normal.rfind('/', slash - 1)) {
    if (const auto parent = resolved_location(root, normal.substr(0, slash))) {
      return (*parent == "." ? normal.substr(slash + 1) : *parent + normal.substr(slash));
    }
  }
  return normal;
}

}  // namespace

Sandbox::Sandbox(SandboxOptions options)
    : options_(std::move(options)),
      scrubber_(options_.secrets),
      workspace_(options_.workspace, workspace_policy_for(options_.policy), WorkspaceLimits{},
                 options_.allow_system_directory ? SystemDirectoryUse::Allow
                                                 : SystemDirectoryUse::Refuse) {
  // Every option is checked here, once; execute() checks only its own.
  options_.limits.validate();
  if (options_.seccomp_profile != "unconfined" &&
      !seccomp::is_builtin_profile(options_.seccomp_profile)) {
    if (auto profile = seccomp::load_profile(options_.seccomp_profile); !profile) {
      core::throw_error(
          core::Error(ErrorKind::kInvalidInput, "seccomp", std::move(profile).error().to_string()));
    }
  }
  // Explicit variables pass even when they change how programs load code
  // (PYTHONPATH=src is the caller's choice); execute audits their names.
  for (const auto& [name, value] : options_.environment) {
    if (name.empty() || name.find('=') != std::string::npos ||
        name.find('\0') != std::string::npos || value.find('\0') != std::string::npos) {
      throw SandboxConfigError(
          "environment variable \"" + name + "\": a name must be non-empty, without = or NUL bytes",
          0, "env");
    }
  }
  if (!options_.session.empty()) {
    if (const std::string problem = check_session_name(options_.session); !problem.empty()) {
      throw SandboxConfigError("session: " + problem, 0, "session");
    }
    if (options_.changes != ChangesMode::Keep) {
      throw SandboxConfigError(
          "a session keeps each run's changes in the session: commit or discard them with "
          "`pulsebox session commit|discard " +
              options_.session + "`, not per run",
          0, "session");
    }
  }
  options_.workspace = workspace_.root();
  core::check_or_throw(core::ensure_agent_dir(options_.workspace));
  {
    const char* home = std::getenv("HOME");
    core::register_with_enclosing_workspaces(options_.workspace, home ? home : "");
    core::find_nested_workspaces_once(options_.workspace);
    // Nested workspaces' own directories are theirs, not this one's files.
    for (const std::string& nested :
         core::value_or_throw(core::nested_workspaces(options_.workspace)))
      hidden_workspace_paths_.push_back(nested + "/.agent");
  }
  if (!options_.home.empty()) {
    options_.home =
        core::value_or_throw(core::prepare_home_dir(options_.home, options_.workspace, "--home"));
  }
  const AuditKeyLocation key =
      options_.audit_key ? *options_.audit_key : default_audit_key_location();
  // Commit points are sealed with the audit log's key. The audit log, its
  // key and the key's anchors, when kept inside the workspace (not in
  // .agent/), are hidden from the command too, and the import refuses a
  // run's change to them: with the key a command could MAC records and seal
  // commit points of its own.
  const std::filesystem::path audit_path = default_audit_path(options_);
  workspace_.set_audit_key(key);
  workspace_.add_own_path(audit_path);
  for (const std::string& own : workspace_.own_paths())
    hidden_workspace_paths_.push_back(own);
  audit_ = std::make_unique<AuditLog>(audit_path, &scrubber_,
                                      AuditLog::Options{.fsync = options_.audit_fsync, .key = key});
}

Sandbox::~Sandbox() = default;

const Backend& Sandbox::backend() const {
  if (!backend_) throw SandboxUnavailableError("the sandbox is not initialized", 0, "sandbox");
  return *backend_;
}

void Sandbox::initialize() {
  std::vector<AuditRecord> batch;
  initialize(batch);
  audit_->record_all(batch);
}

void Sandbox::initialize(std::vector<AuditRecord>& batch) {
  if (backend_) return;
  core::trace_phase("sandbox: initialize");
  try {
    choose_backend(batch);
  } catch (...) {
    audit_->record_all(batch);
    batch.clear();
    throw;
  }
}

void Sandbox::choose_backend(std::vector<AuditRecord>& batch) {
  auto init_record = [&](const std::string& target, const std::string& decision,
                         const std::string& level, const std::string& detail) {
    batch.push_back({.action = "sandbox-init",
                     .target = target,
                     .decision = decision,
                     .isolation_level = level,
                     .detail = detail});
  };
  auto refuse = [&](const std::string& target, const std::string& why) {
    init_record(target, "deny", "unavailable", why);
    throw SandboxUnavailableError(why, 0, "sandbox");
  };
  auto use = [&](std::shared_ptr<Backend> backend) {
    const Availability availability = backend->availability();
    if (!availability.available)
      refuse(backend->name(), backend->name() + ": " + availability.reason);
    core::trace_phase("sandbox: backend available");
    // What was removed is on record at once, not with the run's records.
    std::vector<AuditRecord> removed;
    for (const std::string& what : backend->reconcile_if_needed()) {
      removed.push_back({.action = "reconcile",
                         .target = backend->name(),
                         .decision = "allow",
                         .detail = "removed " + what});
    }
    audit_->record_all(removed);
    core::trace_phase("sandbox: backend reconciled");
    backend_ = std::move(backend);
    init_record(
        backend_->name(), "allow", backend_->isolation_level(),
        backend_->is_unsafe()
            ? "WARNING: unsafe host execution selected explicitly; the command is not isolated"
            : "backend " + backend_->name() + " initialized");
  };

  if (options_.backend) return use(options_.backend);
  const std::string& name = options_.backend_name;
  if (name == "host") {
    if (!options_.unsafe_host_execution) {
      refuse("host",
             "the host backend runs the command unsandboxed on this machine; it needs an explicit "
             "opt-in (--unsafe-host)");
    }
    return use(make_host_backend());
  }
  if (name == "native") return use(make_native_backend(options_.native));
  if (name == "remote") {
    refuse("remote",
           "the library's API does not reach a remote server yet; `pulsebox run --backend "
           "remote` does (docs/protocol.md)");
  }
  if (!name.empty()) {
    throw SandboxConfigError("unknown backend \"" + name + "\" (expected native, host or remote)");
  }

  std::string tried;
  const char* remote = std::getenv("PULSE_REMOTE_URL");
  if (remote != nullptr && remote[0] != '\0') {
    tried = "remote (PULSE_REMOTE_URL is set): the library's API does not reach it; ";
  }
  auto native = make_native_backend(options_.native);
  const Availability native_availability = native->availability();
  if (native_availability.available) {
    // Never silently: the audit log says the remote server was not used.
    if (!tried.empty()) {
      init_record("remote", "deny", "native",
                  "PULSE_REMOTE_URL is set, but the library's API does not reach a remote server "
                  "(`pulsebox run` does): running with the native backend");
    }
    return use(std::move(native));
  }
  tried += "native: " + native_availability.reason;
  if (options_.unsafe_host_execution) {
    init_record("host", "allow", "host_unsafe",
                "no secure backend (" + tried + "); falling back to the host by explicit opt-in");
    return use(make_host_backend());
  }
  refuse("none",
         "no secure backend is available (" + tried +
             "); to run unsandboxed on this host anyway, pass --backend host --unsafe-host");
}

std::string Sandbox::command_text(const std::vector<std::string>& argv) const {
  std::string text;
  for (const auto& arg : argv) {
    if (!text.empty()) text += ' ';
    text += arg;
  }
  return text;
}

std::vector<EnforcementDecision> Sandbox::enforcement_plan() {
  initialize();
  std::vector<EnforcementDecision> plan;
  auto add = [&](Dimension dimension, const Capability& capability, bool requested) {
    EnforcementDecision decision;
    decision.dimension = dimension;
    decision.level = capability.level;
    decision.requested = requested;
    decision.reason = capability.reason;
    decision.fix = capability.fix;
    decision.accepted = capability.level != EnforcementLevel::StronglyEnforced &&
                        options_.accept_weaker.count(dimension) > 0;
    plan.push_back(std::move(decision));
  };
  add(Dimension::Network, backend_->network_capability(options_.network), true);
  add(Dimension::Secrets, backend_->secrets_capability(options_.secret_policy), true);
  add(Dimension::Filesystem, backend_->filesystem_capability(), true);

  // Limits: every applied limit counts towards the reported level; only the
  // explicit ones can refuse the run.
  std::vector<LimitKind> applied = {LimitKind::Memory, LimitKind::Processes,
                                    LimitKind::Cpu,    LimitKind::WallTime,
                                    LimitKind::Output, LimitKind::OpenFiles};
  if (options_.limits.swap_bytes) applied.push_back(LimitKind::Swap);
  if (options_.limits.cpu_time_seconds) applied.push_back(LimitKind::CpuTime);
  if (options_.limits.disk_bytes || options_.limits.working_directory_bytes)
    applied.push_back(LimitKind::Disk);
  Capability limits{EnforcementLevel::StronglyEnforced, "", ""};
  Capability explicit_limits{EnforcementLevel::StronglyEnforced, "", ""};
  for (LimitKind kind : applied) {
    Capability capability = backend_->limit_capability(kind);
    if (kind == LimitKind::Memory && !options_.limits.memory_rlimit_fallback &&
        capability.level != EnforcementLevel::StronglyEnforced) {
      capability = {EnforcementLevel::Unsupported,
                    "no cgroup holds the memory limit here, and this run goes without the "
                    "per-process RLIMIT_DATA fallback (so sanitizer builds run)",
                    capability.fix};
    }
    const bool is_explicit = options_.explicit_limits.count(kind) > 0;
    Capability& target = is_explicit ? explicit_limits : limits;
    if (capability.level != EnforcementLevel::StronglyEnforced) {
      if (!target.reason.empty()) target.reason += "; ";
      target.reason += std::string(to_string(kind)) + ": " + capability.reason;
      target.fix = capability.fix;
    }
    target.level = weakest(target.level, capability.level);
  }
  if (!options_.explicit_limits.empty() &&
      explicit_limits.level != EnforcementLevel::StronglyEnforced) {
    explicit_limits.level = weakest(explicit_limits.level, limits.level);
    add(Dimension::Limits, explicit_limits, true);
  } else {
    limits.level = weakest(limits.level, explicit_limits.level);
    if (limits.reason.empty()) limits.reason = "every limit is enforced for the whole sandbox";
    add(Dimension::Limits, limits, false);
  }
  add(Dimension::Syscalls, backend_->syscall_capability(options_.seccomp_profile), true);
  return plan;
}

PolicyEvaluation Sandbox::require_not_denied(ActionType action, const std::string& target) {
  const PolicyEvaluation evaluation = options_.policy.explain(action, target);
  if (evaluation.decision == Decision::Deny) {
    const std::string verb(to_string(action));
    audit_->record({.action = verb,
                    .target = target,
                    .decision = "deny",
                    .detail = "policy: " + evaluation.describe()});
    throw PolicyDenied("policy denies " + verb + " of " + target + ": " + evaluation.describe(), 0,
                       "policy");
  }
  return evaluation;
}

std::string Sandbox::read_file(std::string_view relative_path) {
  const std::string target(relative_path);
  const std::string normal = policy_target(relative_path);
  PolicyEvaluation evaluation = require_not_denied(ActionType::Read, normal);
  if (!normal.empty() && normal.front() != '/') {
    // The rule holds wherever a symlink in the workspace leads, too (the
    // reference reads with O_NOFOLLOW; this read follows symlinks beneath the root).
    const auto resolved = resolved_location(options_.workspace, normal);
    if (resolved && *resolved != normal) {
      evaluation = require_not_denied(ActionType::Read, *resolved);
    }
    // pulsebox's own files are hidden from the command and never read here:
    // a staged file's raw bytes (a secret's value, which only diff shows,
    // redacted) or the audit log.
    for (const std::string& place : {normal, resolved.value_or(normal)}) {
      if (!is_own_path(place)) continue;
      deny_own_path("read", target,
                    "refusing to read " + target + ": " +
                        (place == normal ? "" : "it resolves to " + place + ", ") +
                        "pulsebox's own (.agent: transactions and audit log); review staged "
                        "changes with diff");
    }
  }
  PathValidator validator(options_.workspace,
                          {.allowed_external_reads = options_.allowed_external_reads});
  std::string bytes;
  try {
    bytes = relative_path.empty() || relative_path.front() != '/' ? validator.read(relative_path)
                                                                  : validator.read_external(target);
  } catch (const SandboxError& error) {
    audit_->record(
        {.action = "read", .target = target, .decision = "deny", .detail = error.what()});
    throw;
  }
  auto scrubbed = scrubber_.scrub(bytes);
  audit_->record({.action = "read",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = "read " + std::to_string(bytes.size()) + " bytes"});
  return std::move(scrubbed.text);
}

bool Sandbox::is_own_path(const std::string& relative) const {
  // In any case: a case-insensitive file system's .AGENT is .agent.
  if (core::ascii_lower(relative.substr(0, relative.find('/'))) == ".agent") return true;
  return std::any_of(
      hidden_workspace_paths_.begin(), hidden_workspace_paths_.end(),
      [&relative](const std::string& hidden) { return core::is_at_or_beneath(relative, hidden); });
}

void Sandbox::deny_own_path(const std::string& action, const std::string& target,
                            const std::string& why) {
  audit_->record({.action = action, .target = target, .decision = "deny", .detail = why});
  throw SandboxSecurityError(why, 0, "path");
}

bool Sandbox::holds_own_path(const std::string& relative) const {
  if (relative.empty() || relative == ".") return true;
  return is_own_path(relative) ||
         std::any_of(hidden_workspace_paths_.begin(), hidden_workspace_paths_.end(),
                     [&relative](const std::string& hidden) {
                       return core::is_at_or_beneath(hidden, relative);
                     });
}

void Sandbox::refuse_own_place(const std::string& verb, const std::string& target,
                               const std::string& normal) {
  if (!normal.empty() && normal.front() == '/') return;  // refused as outside the workspace
  const std::string lands = landing_place(options_.workspace, normal);
  for (const std::string& place : {normal, lands}) {
    if (!holds_own_path(place)) continue;
    deny_own_path(verb, target,
                  "refusing to stage a " + verb + " of " + target + ": " +
                      (place == normal ? "" : "it lands on " + place + ", ") +
                      "pulsebox's own (.agent/ and its audit log, key and anchors), or a "
                      "directory holding them; pulsebox keeps these itself, stage other paths");
  }
}

std::string Sandbox::create_transaction() {
  return workspace_.create_transaction("api");
}

void Sandbox::stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                          unsigned mode) {
  const std::string target(path);
  const std::string normal = policy_target(path);
  refuse_own_place("write", target, normal);
  const PolicyEvaluation evaluation = require_not_denied(ActionType::Write, normal);
  if (scrubber_.contains_secret(bytes)) {
    audit_->record({.action = "write",
                    .target = target,
                    .decision = "deny",
                    .detail = "refused: the content contains a registered secret"});
    throw SandboxSecurityError("refusing to stage " + target + ": it contains a registered secret",
                               0, "secrets");
  }
  // As the reference's commit does, the directories the path needs are
  // made. Each parent is a directory in the workspace (a symlink to one
  // counts) or absent: anything else cannot be one at commit, so it is
  // refused before anything is staged.
  std::vector<std::string> missing;
  if (workspace::check_relative_path(path)) {
    for (auto end = normal.find('/'); end != std::string::npos; end = normal.find('/', end + 1)) {
      const std::string parent = normal.substr(0, end);
      const auto at = workspace_.root() / parent;
      struct stat st {};
      if (::lstat(at.c_str(), &st) != 0 && errno == ENOENT) {
        missing.push_back(parent);
        continue;
      }
      if (::stat(at.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) continue;
      core::throw_error(Error(ErrorKind::kInvalidInput, "path",
                              "refusing to stage " + target + ": " + parent +
                                  " is not a directory in the workspace (a file or a dangling "
                                  "symlink), and a staged write cannot make it one"));
    }
  }
  workspace_.stage_write(tx, path, bytes, mode, &scrubber_);
  for (const std::string& parent : missing)
    workspace_.stage_mkdir(tx, parent);
  audit_->record({.action = "write-staged",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = tx});
}

void Sandbox::stage_delete(const std::string& tx, std::string_view path) {
  const std::string target(path);
  const std::string normal = policy_target(path);
  refuse_own_place("delete", target, normal);
  const PolicyEvaluation evaluation = require_not_denied(ActionType::Delete, normal);
  workspace_.stage_delete(tx, path, &scrubber_);
  audit_->record({.action = "delete-staged",
                  .target = target,
                  .decision = std::string(to_string(evaluation.decision)),
                  .detail = tx});
}

std::string Sandbox::preview_changes(const std::string& tx, bool colour) {
  return workspace_.diff(tx, colour);
}

std::vector<std::string> Sandbox::commit_transaction(const std::string& tx) {
  try {
    auto changed = workspace_.commit(tx);
    for (const auto& path : changed) {
      audit_->record({.action = "commit", .target = path, .decision = "allow", .detail = tx});
    }
    return changed;
  } catch (const SandboxError& error) {
    audit_->record({.action = "commit", .target = tx, .decision = "deny", .detail = error.what()});
    throw;
  }
}

void Sandbox::discard_transaction(const std::string& tx) {
  workspace_.discard(tx);
  audit_->record({.action = "discard",
                  .target = tx,
                  .decision = "allow",
                  .detail = "discarded the transaction"});
}

}  // namespace pulsebox
