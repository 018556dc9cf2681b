// pulsebox::Sandbox: the facade, the C++ counterpart of the reference's
// `Sandbox` class.
//
// Usage:
//   pulsebox::SandboxOptions options;
//   options.workspace = "/home/me/project";
//   options.policy.add_rule({pulsebox::ActionType::Shell, "*", pulsebox::Decision::Allow, ""});
//   pulsebox::Sandbox sandbox(options);
//   sandbox.initialize();                 // picks the backend (or throws)
//   auto result = sandbox.execute({"make", "test"});
//   if (result.transaction_id) std::cout << sandbox.workspace().diff(*result.transaction_id);
//
// Backend choice (initialize): an explicit `backend` object; else
// `backend_name` ("native", "host", "remote"); else remote when
// PULSE_REMOTE_URL is set, else native, else host only when
// unsafe_host_execution is set; else SandboxUnavailableError (audited).
//
// execute() follows the reference order with its defects fixed:
//  1. lifecycle STARTING; the SHELL action is evaluated (DENY throws PolicyDenied,
//     ASK calls `approver`, see below);
//  2. the effective network and secret policies: a mode other than deny
//     requested while the action policy denies NETWORK / SECRETS throws
//     PolicyDenied (the reference silently passed here);
//  3. the request is handed to the backend's prepare() (the native backend
//     sets the sandbox up meanwhile; nothing runs in it yet), then every
//     dimension's enforcement level is asked of the backend and
//     audited; a requested policy enforced less than strongly throws
//     SandboxUnsupportedPolicyError naming the dimension, the reason and the
//     fix, unless `accept_weaker` holds that dimension. Limits not set
//     explicitly (see explicit_limits) are applied as strongly as the host
//     allows and only reported;
//  4. RUNNING; the backend runs the command; output is scrubbed as it streams;
//  5. the run's workspace changes become a transaction, then kept, committed
//     or discarded per `changes`; a commit conflict keeps the transaction;
//     with a session they are added to the session instead. What cannot be
//     staged (a FIFO, a file over the size limit, ...) is kept as "held"
//     changes, never dropped; ProcessResult::changes_status says which;
//  6. CLEANING, backend cleanup, FINALIZED (or RECOVERY_REQUIRED).
// Every decision is written to the audit log.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "pulsebox/audit.h"
#include "pulsebox/backend.h"
#include "pulsebox/export.h"
#include "pulsebox/policy.h"
#include "pulsebox/result.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"

namespace pulsebox {

enum class ChangesMode { Keep, Commit, Discard };

// An ASK decision of the action policy on what execute() is about to do: the
// command (SHELL), or a network or secrets mode other than deny (NETWORK,
// SECRETS, target "*"). Shown to SandboxOptions::approver before anything runs.
struct ApprovalRequest {
  ActionType action = ActionType::Shell;
  std::string target;
  PolicyEvaluation evaluation;  // the rule (or default) that asked
  std::string execution_id;
  std::filesystem::path workspace;

  // {"action": "shell", "target": "...", "decision": "ask", "rule": "ask by
  //  rule #1 (...)", "reason": "...", "execution_id": "...", "workspace": "..."}
  PULSEBOX_API std::string to_json() const;
};

struct ApprovalAnswer {
  bool approved = false;
  // Who decided ("terminal", "--yes", "--approve-with CMD", ...): audited.
  std::string approver;
  // Why, when there is more to say ("exit 1", "timed out", "answered n").
  std::string detail;
};

// Called on the thread that called execute(); may block (a prompt). An
// exception it throws counts as a denial.
using Approver = std::function<ApprovalAnswer(const ApprovalRequest&)>;

struct SandboxOptions {
  std::filesystem::path workspace;
  // A system directory as the workspace ("/", /etc, a home directory
  // itself, ...: see SystemDirectoryUse) is refused with
  // SandboxSecurityError unless this is set (the CLI's --allow-system-dir).
  bool allow_system_directory = false;
  // Defaults to the reference defaults (SHELL denied!): the CLI allows SHELL.
  ActionPolicy policy;
  std::vector<std::filesystem::path> allowed_external_reads;
  // Values scrubbed from every output and from the audit log.
  std::vector<std::string> secrets;
  ResourcePolicy limits;
  // Limits the caller set explicitly: these must be enforced strongly.
  std::set<LimitKind> explicit_limits;
  NetworkPolicy network;
  SecretPolicy secret_policy;
  // Extra variables for the command (--env); dangerous names are refused.
  std::map<std::string, std::string> environment;
  // The environment the secret policy takes variables (and their values, to
  // scrub) from; unset: this process's. A server running commands for a
  // client passes the client's.
  std::optional<std::map<std::string, std::string>> host_environment;
  std::shared_ptr<Backend> backend;
  std::string backend_name;  // "", "native", "host", "remote"
  bool unsafe_host_execution = false;
  // Options of the native backend (system directories, hidden paths, ...).
  NativeBackendOptions native;
  // The seccomp profile: "default", "strict", "permissive", a Docker/OCI
  // JSON file, or "unconfined". Checked when the Sandbox is constructed
  // (SandboxConfigError names the file, line and field).
  std::string seccomp_profile = "default";
  // Extra host paths shown inside the sandbox (native backend), each audited.
  std::vector<BindMount> binds;
  // A host directory kept as the command's HOME (/home/sandbox) between runs,
  // made 0700 when missing; refused inside the workspace or a system
  // directory. Empty: a fresh private HOME each run.
  std::filesystem::path home;
  std::set<Dimension> accept_weaker;
  std::filesystem::path audit_log_path;  // default <workspace>/.agent/logs/audit.jsonl
  bool audit_fsync = false;
  // The audit log's key (audit.h); unset: default_audit_key_location().
  std::optional<AuditKeyLocation> audit_key;
  ChangesMode changes = ChangesMode::Keep;
  // A session name (session.h): each run sees the session's earlier
  // changes, and its own are added to the session instead of becoming a
  // transaction. Needs a backend with kept_changes_dir() and
  // ChangesMode::Keep. "": no session.
  std::string session;
  // Decides each ASK of the action policy before execute() runs anything;
  // the request and its answer (approver included) are audited ("approval").
  // Unset: an ASK is refused with PolicyDenied naming the rule that asked.
  // Reads and staged writes through this class keep the reference's
  // behaviour (ASK passes, audited as "ask").
  Approver approver;
};

struct ExecuteOptions {
  std::string cwd;           // relative to the workspace
  std::string execution_id;  // generated when empty
  // Scrubbed output as it arrives.
  std::function<void(OutputStream, std::string_view)> on_output;
  // A descriptor that cancels the run once it is readable or hung up: the
  // sandbox gets SIGTERM, then SIGKILL after the grace period, and the
  // result's termination_reason is "cancelled". For example an eventfd
  // another thread writes, or a client's connection. -1: none. Not owned.
  int cancel_fd = -1;
  // The command's stdin: a descriptor the sandbox is given as its fd 0, so
  // only a pipe or a file opened read-only (anything else, such as a
  // terminal or a socket, would hand the sandbox the host's end of it:
  // relay it through a pipe). -1: /dev/null. Not owned; the caller keeps it
  // open for the run.
  int stdin_fd = -1;
  // A pseudo-terminal of the sandbox's own devpts as the command's stdin,
  // stdout and stderr (its controlling terminal; Ctrl-C and Ctrl-Z reach it
  // through its line discipline). Its output arrives scrubbed as Stdout.
  // What `terminal_input_fd` gives (the user's terminal, in raw mode: the
  // caller's job) is copied to it; its size is taken from that descriptor
  // at the start and again whenever `terminal_resize_fd` (e.g. a pipe a
  // SIGWINCH handler writes) is readable. The sandbox never gets either
  // descriptor. -1: none. Not owned. The native backend only; stdin_fd is
  // ignored.
  bool terminal = false;
  int terminal_input_fd = -1;
  int terminal_resize_fd = -1;
};

class PULSEBOX_API Sandbox {
 public:
  explicit Sandbox(SandboxOptions options);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  void initialize();
  bool initialized() const { return backend_ != nullptr; }
  const Backend& backend() const;

  // The per-dimension verdict execute() would reach (initializes if needed).
  std::vector<EnforcementDecision> enforcement_plan();

  ProcessResult execute(const std::vector<std::string>& argv, const ExecuteOptions& options = {});

  // READ policy, then a race-free bounded read (PathValidator), scrubbed.
  std::string read_file(std::string_view relative_path);

  // The transaction API, with the policy and a registered-secret check.
  std::string create_transaction();
  void stage_write(const std::string& tx, std::string_view path, std::string_view bytes,
                   unsigned mode = 0644);
  void stage_delete(const std::string& tx, std::string_view path);
  std::string preview_changes(const std::string& tx, bool colour = false);
  std::vector<std::string> commit_transaction(const std::string& tx);
  void discard_transaction(const std::string& tx);

  Workspace& workspace() { return workspace_; }
  AuditLog& audit() { return *audit_; }
  const SecretScrubber& scrubber() const { return scrubber_; }

 private:
  // As initialize(), with the record of the backend chosen added to
  // `batch` for the caller to append with what it records next: execute()
  // appends it with the records made just before the command starts.
  // Leftovers of crashed runs removed are recorded at once; a refusal, or
  // any other exception, appends the batch before it leaves.
  void initialize(std::vector<AuditRecord>& batch);
  void choose_backend(std::vector<AuditRecord>& batch);
  // One execute() and its stages (facade/execute.cc), in order.
  struct Run;
  void check_policy(Run& run);
  // ASK: the approver's answer, audited; no approver or a denial throws PolicyDenied.
  void approve(Run& run, ActionType action, const std::string& target,
               const PolicyEvaluation& asked);
  ExecutionRequest build_request(Run& run, const std::vector<std::string>& argv,
                                 const ExecuteOptions& options);
  void decide_enforcement(Run& run);
  ProcessResult run_and_scrub(Run& run, ExecutionRequest& request, const ExecuteOptions& options);
  void audit_network_accesses(Run& run, ProcessResult& result);
  void import_changes(Run& run, ProcessResult& result);
  void open_session(Run& run, ExecutionRequest& request);
  void add_to_session(Run& run, ProcessResult& result);
  void hold_changes(Run& run, ProcessResult& result, const std::string& reason,
                    std::vector<PathReason> refused, std::optional<std::string> transaction);
  void clean_up(Run& run);

  std::string command_text(const std::vector<std::string>& argv) const;
  // Audits and throws PolicyDenied on DENY; ASK and ALLOW pass (as in the reference).
  PolicyEvaluation require_not_denied(ActionType action, const std::string& target);
  // Whether a workspace-relative path is pulsebox's own (.agent/, an audit
  // log kept in the workspace), which read_file never reads.
  bool is_own_path(const std::string& relative) const;
  // is_own_path, or a directory an own path lies in (the workspace too).
  bool holds_own_path(const std::string& relative) const;
  // Throws (and audits) when a staged change of `normal` would reach an own
  // path, by its name or through the workspace's symlinks.
  void refuse_own_place(const std::string& verb, const std::string& target,
                        const std::string& normal);
  // Audits the refusal of `action` on an own path, then throws it (kSecurity).
  [[noreturn]] void deny_own_path(const std::string& action, const std::string& target,
                                  const std::string& why);

  SandboxOptions options_;
  SecretScrubber scrubber_;
  std::unique_ptr<AuditLog> audit_;
  Workspace workspace_;
  std::shared_ptr<Backend> backend_;
  // Workspace paths the command must not see besides .agent/ (the audit log,
  // when it is kept inside the workspace).
  std::vector<std::string> hidden_workspace_paths_;
};

}  // namespace pulsebox
