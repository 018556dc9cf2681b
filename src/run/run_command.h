// `pulsebox run` as a library: its options and their flags, the
// SandboxOptions they make, and the run itself with its output and summary.
// The CLI (a run in this process) and the local server (a run for a client)
// both call it; output and environment come from RunIo, not this process.
//
// Usage:
//   run::RunOptions options;
//   CLI::App parser;
//   run::add_run_options(parser, options);   // then parse the arguments
//   options.command = {...};                  // what followed "--"
//   const int status = run::execute_run(options, run::RunIo{});
#pragma once

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "pulsebox/backend.h"
#include "pulsebox/sandbox.h"

namespace pulsebox::run {

struct RunOptions {
  std::string workspace;  // "": the workspace the current directory lies in, else "."
  bool allow_system_dir = false;
  std::string cwd;
  std::string execution_id;  // --execution-id; "": one is made
  std::string backend;
  bool unsafe_host = false;
  std::string net = "none";
  std::vector<std::string> allow;
  std::vector<std::string> allow_domains;
  std::string memory, swap, pids, cpus, timeout, cpu_time, max_output, disk;
  std::vector<std::string> env;
  std::vector<std::string> env_files;  // --env-file: NAME=VALUE lines, before --env
  std::vector<std::string> secrets;
  std::string policy_file;
  std::string policy_json;  // the protocol's "policy": the file's JSON, inline
  std::string seccomp = "default";
  std::string changes = "keep";
  std::string session;
  bool json = false;
  bool events = false;  // --events: protocol events on stdout (docs/protocol.md)
  std::vector<std::string> allow_weaker;
  std::string audit_log;
  std::string audit_key;
  std::vector<std::string> ro_binds, rw_binds;
  std::vector<std::string> volumes;  // -v HOST:SANDBOX[:ro]
  bool rm = false;                   // --rm: --changes discard
  bool subordinate_ids = false;
  std::string home;  // --home: a host directory kept as the sandbox's HOME
  // ASK decisions (run/approval.h): -y, --approve-with CMD, --approve-timeout.
  bool yes = false;
  std::string approve_with;
  unsigned approve_timeout = 60;
  // --profile (config/run_config.h), and the workspace config file's rules
  // (deny or ask), added over the action policy.
  std::string profile;
  // The limits a run starts from before its flags (a built-in profile's,
  // such as ci): they count as defaults, applied as far as the host allows,
  // not as limits the user asked to be enforced strongly.
  std::optional<ResourcePolicy> base_limits;
  std::vector<PolicyRule> workspace_rules;
  bool interactive = false;  // -i: a terminal on stdin is relayed, not /dev/null
  bool terminal = false;     // -t: a pseudo-terminal of the sandbox's own
  std::vector<std::string> command;
};

// The flags of `pulsebox run`, added to `command` (the CLI's subcommand, or
// the server's own parser). The command may follow the flags without "--"
// (a prefix command): the parser's remaining() holds it.
void add_run_options(CLI::App& command, RunOptions& options);

// The command a run's arguments name: what followed the flags (`before`,
// the parser's remaining()) and, when the line had a "--", what followed it
// (`after_dashes`); `pulsebox run make -- -k` runs make -- -k. Throws
// CLI::ExtrasError when `before` starts with an unknown flag.
std::vector<std::string> run_command_line(std::vector<std::string> before,
                                          const std::optional<std::vector<std::string>>& after);

// A run that reports as protocol events (docs/protocol.md) instead of text:
// `run --events`, the local server's JSON requests, pulsebox-http.
struct RunEvents {
  // One message per call; false when the reader is gone.
  std::function<bool(std::string_view message)> write;
  // "approvals": "ask": waits up to `timeout_seconds` for the answer to
  // `approval_id` from the carrier; nullopt when none came. Empty: ASK
  // decisions are made as without events (-y, --approve-with, or refused).
  std::function<std::optional<bool>(const std::string& approval_id, unsigned timeout_seconds)>
      wait_for_answer;
  std::string execution_id;  // "": one is made
};

struct RunIo {
  // The user's stdin (run/stdin_source.h says what the command gets); -1:
  // none, the command reads /dev/null.
  int in_fd = STDIN_FILENO;
  int out_fd = STDOUT_FILENO;
  int err_fd = STDERR_FILENO;
  // The environment --secret names are read from, and NO_COLOR; null: this
  // process's.
  const std::map<std::string, std::string>* environment = nullptr;
  // A protocol carrier's run: `environment` is only the request's secrets,
  // so the audit key is found in this process's environment (the
  // server's), as its review requests find it.
  bool audit_key_of_this_process = false;
  // The backend of a native run (a server's, shared with other runs); null:
  // the facade makes its own.
  std::shared_ptr<Backend> native_backend;
  int cancel_fd = -1;  // ExecuteOptions::cancel_fd
  // Where a terminal may be asked to approve an ASK decision (with err_fd,
  // both terminals); -1: never (a server's run has no terminal of its own).
  int prompt_fd = -1;
  // Events instead of the summary and "pulsebox: ..." errors. Null: text,
  // or events on out_fd when RunOptions::events is set.
  const RunEvents* events = nullptr;
};

// The exit status when pulsebox itself refused or failed (docs/cli.md).
inline constexpr int kExitRefused = 125;
// The command succeeded, but its workspace changes are not all where they
// were asked to be: held (some could not be staged) or, with --changes
// commit, a commit that was refused. `changes_status` in --json says which.
inline constexpr int kExitChangesNotKept = 123;

// A variable of the run's environment (RunIo::environment, else this
// process's), or null.
const char* run_getenv(const RunIo& io, const std::string& name);

// Throws SandboxConfigError(message): a flag's value that cannot be used,
// the message naming the flag.
[[noreturn]] void bad_input(const std::string& message);

// The flags' values as SandboxOptions: their syntax checked here, each error
// naming its flag (SandboxConfigError). What they mean (the workspace, the
// seccomp profile, the environment) is checked once, by Sandbox.
SandboxOptions build_sandbox_options(const RunOptions& options, const RunIo& io);

// Where the run happens: the workspace (-w, else the nearest directory
// from the current one upwards that holds .agent/, else the current
// directory) and the working directory in it, relative (--cwd, else the
// current directory's place in the workspace found).
struct RunPlace {
  std::filesystem::path workspace;
  std::string cwd;
};
RunPlace run_place(const RunOptions& options);

// The result as `pulsebox run` reports it (a timeout is exit 124; the
// signal stays in `signal`), and the exit status it then exits with
// (124, 125, 123: the changes were not kept as asked, else the command's).
ProcessResult as_reported(ProcessResult result);
int exit_status_for(const ProcessResult& result);

// A run's id as the protocol and --execution-id take it: 1 to 64 of
// A-Z a-z 0-9 - _ . starting with a letter or digit, not ending in ".lock".
bool is_valid_execution_id(std::string_view id);

// Runs the command; returns the exit status `pulsebox run` exits with.
// Errors are printed on io.err_fd ("pulsebox: ..."), never thrown.
int execute_run(const RunOptions& options, const RunIo& io);

}  // namespace pulsebox::run
