// pulsebox run's flags, and the SandboxOptions they make (run_command.h).
#include <cstdlib>
#include <filesystem>

#include "audit/key.h"
#include "core/agent_dir.h"
#include "core/fs.h"
#include "policy/policy_json.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/session.h"
#include "run/approval.h"
#include "run/run_command.h"

namespace pulsebox::run {
namespace {

std::uint64_t positive_integer(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || value == 0 || text.front() == '-') {
    bad_input(flag + ": \"" + text + "\" is not valid (expected a whole number greater than zero)");
  }
  return value;
}

// An --env-file's variables: NAME=VALUE lines, blank lines and lines whose
// first non-blank character is # skipped; the value is taken verbatim.
void read_env_file(const std::string& file, std::map<std::string, std::string>& environment) {
  constexpr std::uint64_t kMaxEnvFileBytes = 1 << 20;
  auto text = core::read_regular_file(file, kMaxEnvFileBytes, "--env-file");
  if (!text) bad_input(text.error().to_string());
  std::size_t line_number = 0;
  std::size_t start = 0;
  const std::string& all = *text;
  while (start < all.size()) {
    const std::size_t end = std::min(all.find('\n', start), all.size());
    std::string line = all.substr(start, end - start);
    start = end + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::size_t first = line.find_first_not_of(" \t");
    if (first == std::string::npos || line[first] == '#') continue;
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || eq == 0 || line.find_first_of(" \t") < eq) {
      bad_input(file + ":" + std::to_string(line_number) +
                ": expected NAME=VALUE (a # starts a comment line) in --env-file");
    }
    environment[line.substr(0, eq)] = line.substr(eq + 1);
  }
}

}  // namespace

std::vector<std::string> run_command_line(std::vector<std::string> before,
                                          const std::optional<std::vector<std::string>>& after) {
  // An unknown flag ends CLI11's parse like a command would; a command
  // starting with "-" follows "--".
  if (!before.empty() && before.front().size() > 1 && before.front().front() == '-') {
    throw CLI::ExtrasError("run", {before.front()});
  }
  if (!after) return before;
  if (before.empty()) return *after;
  before.emplace_back("--");
  before.insert(before.end(), after->begin(), after->end());
  return before;
}

// A variable of the run's environment (RunIo), or null.
const char* run_getenv(const RunIo& io, const std::string& name) {
  if (io.environment == nullptr) return std::getenv(name.c_str());
  const auto it = io.environment->find(name);
  return it == io.environment->end() ? nullptr : it->second.c_str();
}

RunPlace run_place(const RunOptions& o) {
  RunPlace place;
  std::string cwd = o.cwd;
  if (cwd == "/workspace") cwd.clear();
  if (cwd.rfind("/workspace/", 0) == 0) cwd = cwd.substr(11);
  if (!cwd.empty() && cwd.front() == '/') {
    bad_input("--cwd " + o.cwd + ": expected a path inside /workspace");
  }
  place.cwd = cwd;
  if (!o.workspace.empty()) {
    place.workspace = o.workspace;
    return place;
  }
  // No -w: the workspace the current directory lies in, so that a run from
  // a subdirectory never makes a second .agent/ there.
  place.workspace = ".";
  std::error_code ec;
  const auto here = std::filesystem::current_path(ec);
  if (ec) return place;
  if (auto found = core::find_workspace_root(here)) {
    place.workspace = found->root;
    if (o.cwd.empty()) place.cwd = found->relative.string();
  }
  return place;
}

SandboxOptions build_sandbox_options(const RunOptions& o, const RunIo& io) {
  SandboxOptions options;
  std::error_code ec;
  options.workspace = run_place(o).workspace;  // Sandbox checks it
  options.allow_system_directory = o.allow_system_dir;

  // Network.
  const auto mode = parse_network_mode_cli(o.net);
  if (!mode)
    bad_input("--net \"" + o.net + "\": expected none, localhost, allowlist, proxy or all");
  options.network.mode = *mode;
  for (const auto& rule : o.allow)
    options.network.rules.push_back(parse_network_rule(rule));
  options.network.domains = o.allow_domains;
  if (!o.allow.empty() && *mode != NetworkMode::Allowlist && *mode != NetworkMode::Proxy) {
    bad_input("--allow needs --net allowlist (or --net proxy, for addresses)");
  }
  if (*mode == NetworkMode::Allowlist && o.allow.empty()) {
    bad_input("--net allowlist needs at least one --allow DEST[:PORT]");
  }
  if (!o.allow_domains.empty() && *mode != NetworkMode::Proxy) {
    bad_input("--allow-domain needs --net proxy");
  }
  if (*mode == NetworkMode::Proxy && o.allow_domains.empty() && o.allow.empty()) {
    bad_input("--net proxy needs at least one --allow-domain NAME or --allow ADDRESS");
  }

  // Limits: explicit ones must be enforced strongly.
  if (o.base_limits) options.limits = *o.base_limits;
  ResourcePolicy& limits = options.limits;
  auto set_size = [&](const std::string& text, const char* flag, LimitKind kind, auto&& assign) {
    if (text.empty()) return;
    assign(parse_size(text, flag));
    options.explicit_limits.insert(kind);
  };
  set_size(o.memory, "--memory", LimitKind::Memory,
           [&](std::uint64_t v) { limits.memory_bytes = v; });
  // --swap 0 is no swap at all; none lifts the limit.
  if (!o.swap.empty()) {
    limits.swap_bytes = parse_size_limit(o.swap, "--swap");
    if (limits.swap_bytes) options.explicit_limits.insert(LimitKind::Swap);
  }
  if (!o.max_output.empty()) {
    const auto cap = parse_size_limit(o.max_output, "--max-output");
    limits.max_output_bytes = cap && *cap > 0 ? *cap : UINT64_MAX;
    if (cap && *cap > 0) options.explicit_limits.insert(LimitKind::Output);
  }
  set_size(o.disk, "--disk", LimitKind::Disk, [&](std::uint64_t v) { limits.disk_bytes = v; });
  if (!o.pids.empty()) {
    limits.max_processes = positive_integer(o.pids, "--pids");
    options.explicit_limits.insert(LimitKind::Processes);
  }
  if (!o.cpus.empty()) {
    std::size_t used = 0;
    double cpus = 0;
    try {
      cpus = std::stod(o.cpus, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != o.cpus.size() || !(cpus > 0) || cpus > 4096) {
      bad_input("--cpus: \"" + o.cpus +
                "\" is not valid (expected a number of CPUs such as 1 or 0.5)");
    }
    limits.cpu_quota_percent = cpus * 100;
    options.explicit_limits.insert(LimitKind::Cpu);
  }
  if (!o.timeout.empty()) {
    const auto wall = parse_duration_limit(o.timeout, "--timeout");
    limits.wall_time_seconds = wall.value_or(kNoWallTimeLimit);
    if (wall) options.explicit_limits.insert(LimitKind::WallTime);
  }
  if (!o.cpu_time.empty()) {
    limits.cpu_time_seconds = parse_duration_limit(o.cpu_time, "--cpu-time");
    if (limits.cpu_time_seconds) options.explicit_limits.insert(LimitKind::CpuTime);
  }

  // Environment and secrets.
  for (const auto& file : o.env_files)
    read_env_file(file, options.environment);
  for (const auto& item : o.env) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      bad_input("--env \"" + item + "\": expected NAME=VALUE");
    options.environment[item.substr(0, eq)] = item.substr(eq + 1);
  }
  if (!o.secrets.empty()) {
    options.secret_policy.mode = SecretMode::AllowExplicit;
    for (const auto& name : o.secrets) {
      const char* value = run_getenv(io, name);
      if (value == nullptr)
        bad_input("--secret " + name + ": the variable is not set in this environment");
      options.secret_policy.explicit_env.push_back(name);
    }
  }

  // The action policy: a file, or the defaults with SHELL allowed; explicit
  // --net and --secret flags are the user's own decision.
  if (!o.policy_file.empty()) {
    auto loaded = policy::load_policy_file(o.policy_file);
    if (!loaded) bad_input(loaded.error().to_string());
    options.policy = std::move(loaded).value();
  } else if (!o.policy_json.empty()) {
    auto parsed = policy::parse_policy_json(o.policy_json, "policy");
    if (!parsed) bad_input("--policy: " + parsed.error().to_string());
    options.policy = std::move(parsed).value();
  } else {
    options.policy.add_rule({ActionType::Shell, "*", Decision::Allow, "pulsebox run"});
    if (*mode != NetworkMode::DenyAll) {
      options.policy.add_rule({ActionType::Network, "*", Decision::Allow, "--net " + o.net});
    }
    if (!o.secrets.empty()) {
      options.policy.add_rule({ActionType::Secrets, "*", Decision::Allow, "--secret"});
    }
  }

  // The workspace's config file may add rules; they only deny or ask.
  for (const PolicyRule& rule : o.workspace_rules)
    options.policy.add_rule(rule);

  if (o.yes && !o.approve_with.empty()) {
    bad_input("-y and --approve-with both decide ASK decisions: give one of them");
  }
  options.approver = make_cli_approver(o, io);

  options.seccomp_profile = o.seccomp;  // Sandbox checks it

  if (o.rm && o.changes != "keep" && o.changes != "discard") {
    bad_input("--rm discards the run's changes; --changes " + o.changes + " contradicts it");
  }
  const std::string changes = o.rm ? "discard" : o.changes;
  if (changes == "keep") {
    options.changes = ChangesMode::Keep;
  } else if (changes == "commit") {
    options.changes = ChangesMode::Commit;
  } else if (changes == "discard") {
    options.changes = ChangesMode::Discard;
  } else {
    bad_input("--changes \"" + o.changes + "\": expected keep, commit or discard");
  }
  if (!o.session.empty()) {
    if (const std::string problem = check_session_name(o.session); !problem.empty()) {
      bad_input("--session: " + problem);
    }
    if (changes != "keep") {
      bad_input("--session keeps each run's changes in the session; " +
                (o.rm ? std::string("--rm") : "--changes " + o.changes) +
                " does not apply (commit them with `pulsebox session commit " + o.session + "`)");
    }
    options.session = o.session;
  }

  for (const auto& word : o.allow_weaker) {
    if (word == "all") {
      for (Dimension d : kAllDimensions)
        options.accept_weaker.insert(d);
      continue;
    }
    const auto dimension = parse_dimension(word);
    if (!dimension) {
      bad_input("--allow-weaker \"" + word +
                "\": expected network, secrets, filesystem, limits, syscalls or all");
    }
    options.accept_weaker.insert(*dimension);
  }
  // Extra binds: HOST[:SANDBOX], the sandbox path defaulting to the host path.
  auto add_bind = [&](const std::string& spec, bool writable, const char* flag) {
    const auto colon = spec.find(':');
    BindMount bind;
    bind.host = spec.substr(0, colon);
    bind.sandbox_path = colon == std::string::npos ? spec : spec.substr(colon + 1);
    bind.writable = writable;
    if (bind.host.empty() || !std::filesystem::exists(bind.host, ec)) {
      bad_input(std::string(flag) + " " + spec + ": no such host path \"" + bind.host.string() +
                "\"");
    }
    options.binds.push_back(std::move(bind));
  };
  for (const auto& spec : o.ro_binds)
    add_bind(spec, false, "--ro-bind");
  for (const auto& spec : o.rw_binds)
    add_bind(spec, true, "--bind");
  // -v HOST:SANDBOX[:ro], Docker's spelling of --bind and --ro-bind.
  for (const auto& spec : o.volumes) {
    std::string bind = spec;
    bool writable = true;
    if (bind.size() > 3 && bind.compare(bind.size() - 3, 3, ":ro") == 0) {
      bind.resize(bind.size() - 3);
      writable = false;
    } else if (bind.size() > 3 && bind.compare(bind.size() - 3, 3, ":rw") == 0) {
      bind.resize(bind.size() - 3);
    }
    const auto colon = bind.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == bind.size() ||
        bind.find(':', colon + 1) != std::string::npos) {
      bad_input("--volume " + spec + ": expected HOST:SANDBOX, HOST:SANDBOX:ro or HOST:SANDBOX:rw");
    }
    add_bind(bind, writable, "--volume");
  }
  if (!o.home.empty()) options.home = std::filesystem::absolute(o.home, ec);  // Sandbox checks it
  options.native.subordinate_ids = o.subordinate_ids;
  options.backend_name = o.backend;
  if (io.environment != nullptr) options.host_environment = *io.environment;
  if (io.native_backend && (o.backend.empty() || o.backend == "native")) {
    options.backend = io.native_backend;
  }
  options.unsafe_host_execution = o.unsafe_host;
  if (!o.audit_log.empty()) options.audit_log_path = o.audit_log;
  // The run's own environment (a server's client's), not this process's.
  if (!o.audit_key.empty()) {
    options.audit_key = AuditKeyLocation{std::filesystem::absolute(o.audit_key), true, ""};
  } else if (io.audit_key_of_this_process) {
    options.audit_key = audit::key_location([](const char* name) { return std::getenv(name); });
  } else {
    options.audit_key =
        audit::key_location([&io](const char* name) { return run_getenv(io, name); });
  }
  return options;
}

void add_run_options(CLI::App& command, RunOptions& options) {
  RunOptions& o = options;
  // The command may follow the flags without "--" (Docker's and bwrap's
  // habit); a vector flag takes one value per use so that it never swallows
  // the command.
  command.prefix_command();
  command.add_option("-w,--workspace", o.workspace,
                     "Host directory presented at /workspace (default: the nearest directory "
                     "from . upwards holding .agent/, else .). Not the working directory: that "
                     "is --workdir");
  command.add_flag("--allow-system-dir", o.allow_system_dir,
                   "Accept a system directory (/, /etc, /usr, a home directory itself, ...) as "
                   "the workspace");
  command.add_option("--cwd,--workdir", o.cwd,
                     "Working directory, relative to /workspace (default: where . is in it)");
  command.add_option("--home", o.home,
                     "Host directory kept as the sandbox's HOME (/home/sandbox) between runs, "
                     "made 0700 if missing (default: a fresh private directory each run)");
  command.add_option("--backend", o.backend,
                     "native, host (needs --unsafe-host) or remote (PULSE_REMOTE_URL, "
                     "PULSE_REMOTE_TOKEN: docs/protocol.md)");
  command.add_flag("--unsafe-host", o.unsafe_host, "Allow running unsandboxed on this host");
  command.add_option("--net,--network", o.net,
                     "none, localhost, allowlist, proxy or all (default: none; docs/network.md)");
  command.add_option("--allow", o.allow,
                     "DEST[:PORT][/tcp|udp] that --net allowlist lets through (DEST an IP, a CIDR "
                     "or a host name); with --net proxy, an address the rebinding guard may let "
                     "through (repeatable)");
  command.add_option("--allow-domain", o.allow_domains,
                     "Host name or *.domain the --net proxy lets through (repeatable)");
  command.add_option("--memory", o.memory, "Memory limit, e.g. 512M (default 1G)");
  command.add_option("--swap,--memory-swap", o.swap,
                     "Swap on top of --memory (default 1G; 0 = no swap, none = no limit)");
  command.add_option("--pids,--pids-limit", o.pids, "Process limit (default 64)");
  command.add_option("--cpus", o.cpus, "CPUs, may be fractional (default 1)");
  command.add_option("--timeout", o.timeout,
                     "Wall-clock limit: seconds or 500ms, 90s, 15m, 1h (default 30s; 0 or none = "
                     "no limit)");
  command.add_option("--cpu-time", o.cpu_time,
                     "CPU-time limit, same grammar as --timeout (default: none)");
  command.add_option("--max-output", o.max_output,
                     "stdout+stderr cap, e.g. 64K, 5M (default 5M; 0 or none = no limit)");
  command.add_option("--disk", o.disk,
                     "Bytes the run's workspace changes may take (a tmpfs of their own, "
                     "counted as the sandbox's memory); past it writes fail with ENOSPC");
  command.add_option("-e,--env", o.env, "NAME=VALUE set in the sandbox (repeatable)");
  command.add_option("--env-file", o.env_files,
                     "File of NAME=VALUE lines (# comments) set in the sandbox before --env "
                     "(repeatable)");
  command.add_option("--secret", o.secrets,
                     "Pass host variable NAME in and scrub its value (repeatable)");
  command.add_option("--policy", o.policy_file, "Action policy JSON");
  command.add_option("--seccomp", o.seccomp,
                     "default, strict, permissive, a Docker/OCI profile file, or unconfined");
  command.add_option("--changes", o.changes, "keep, commit or discard (default: keep)");
  command.add_flag("--rm", o.rm, "Discard the run's changes (--changes discard)");
  command.add_option("--session", o.session,
                     "Run in session NAME: see its earlier runs' changes, add this one's");
  command.add_flag("--json", o.json, "Print one JSON result instead of streaming output");
  command.add_flag("--events", o.events,
                   "Print protocol events as JSON lines on stdout: started, output, approvals, "
                   "changes, result (docs/protocol.md)");
  command.add_option("--allow-weaker", o.allow_weaker,
                     "network, secrets, filesystem, limits, syscalls or all: run even if not "
                     "strongly enforced here (repeatable)");
  command.add_option("--audit-log", o.audit_log,
                     "Audit log (default <workspace>/.agent/logs/audit.jsonl)");
  command.add_option("--audit-key", o.audit_key,
                     "The audit log's HMAC key, made if missing (default $PULSEBOX_AUDIT_KEY, "
                     "else ~/.local/state/pulsebox/audit.key)");
  command.add_option("--ro-bind", o.ro_binds,
                     "HOST[:SANDBOX] shown read-only inside (repeatable, audited)");
  command.add_option("--bind", o.rw_binds,
                     "HOST[:SANDBOX] shown read-write inside (repeatable, audited)");
  command.add_option("-v,--volume", o.volumes,
                     "HOST:SANDBOX[:ro], as --bind (or --ro-bind with :ro) (repeatable)");
  command.add_flag("--subordinate-ids", o.subordinate_ids,
                   "Rootless: map 65536 ids from /etc/subuid and /etc/subgid (newuidmap) "
                   "instead of one");
  command.add_option("--profile", o.profile,
                     "agent (the defaults) or a profile of the user's config file; limits "
                     "given as flags win (see `pulsebox config show`)");
  // Approvals of ASK decisions (run/approval.h).
  command.add_flag("-y,--yes", o.yes, "Approve every ASK decision of the action policy");
  command.add_option("--approve-with", o.approve_with,
                     "CMD (sh -c) decides each ASK decision: the decision as JSON on its stdin, "
                     "exit 0 allows, anything else denies (default: ask on a terminal, else "
                     "refuse with exit 125)");
  command
      .add_option("--approve-timeout", o.approve_timeout,
                  "Seconds --approve-with may take before it counts as a denial (default 60)")
      ->check(CLI::Range(1u, 3600u));
  command
      .add_option("--execution-id", o.execution_id,
                  "The run's id in its result, events and audit records (default: a new one)")
      ->check([](const std::string& id) {
        return is_valid_execution_id(id)
                   ? std::string()
                   : "expected 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or "
                     "digit and not ending in \".lock\"";
      });
  // stdin and terminals (run/stdin_source.h).
  command.add_flag("-i,--interactive", o.interactive,
                   "Relay a terminal on stdin to the command (without -i a pipe or file passes, "
                   "a terminal gives /dev/null)");
  command.add_flag("-t,--tty", o.terminal,
                   "Give the command a terminal of its own, relayed to yours (stdin must be a "
                   "terminal; native backend, in this process)");
  for (CLI::Option* option : command.get_options()) {
    if (option->get_expected_max() > 1) option->allow_extra_args(false);
  }
  command.footer(
      "The command and its arguments follow the options, or --: pulsebox run make test, "
      "pulsebox run -- make test. -w is the workspace, --workdir the working directory. When a "
      "`pulsebox serve --local` of this user runs (same binary, same state directory), the "
      "run goes through it; PULSEBOX_SERVER=off runs it in this process.");
}

}  // namespace pulsebox::run
