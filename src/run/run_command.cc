// The run itself: the sandbox, its output, and the summary or JSON result
// (run_command.h).
#include <string.h>
#include <unistd.h>

#include <map>
#include <sstream>

#include "config/run_config.h"
#include "core/fs.h"
#include "core/terminal.h"
#include "core/text.h"
#include "core/trace.h"
#include "protocol/messages.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"
#include "run/raw_terminal.h"
#include "run/run_command.h"
#include "run/stdin_source.h"

namespace pulsebox::run {
namespace {

using core::Colour;
using core::paint;

}  // namespace

void bad_input(const std::string& message) {
  throw SandboxConfigError(message);
}

bool is_valid_execution_id(std::string_view id) {
  // The id names files and a cgroup: one plain name, never "." or "..",
  // and never another run's <id>.lock.
  constexpr std::string_view kAlnum =
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  return !id.empty() && id.size() <= 64 && kAlnum.find(id.front()) != std::string_view::npos &&
         id.find_first_not_of(
             "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") ==
             std::string_view::npos &&
         !id.ends_with(".lock");
}

int exit_status_for(const ProcessResult& result) {
  switch (result.termination_reason) {
    case TerminationReason::Timeout:
      return 124;
    case TerminationReason::LaunchError:
      return result.exit_code == 126 || result.exit_code == 127 ? result.exit_code : kExitRefused;
    default:
      break;
  }
  if (result.exit_code == 0 && result.termination_reason == TerminationReason::None &&
      result.changes_status.lost()) {
    return kExitChangesNotKept;
  }
  return result.exit_code;
}

// The result as the CLI reports it: a timeout is exit 124 in the summary,
// the JSON and the exit status alike; the signal that ended the command
// stays in `signal` (the library's ProcessResult keeps 128+N).
ProcessResult as_reported(ProcessResult result) {
  if (result.termination_reason == TerminationReason::Timeout) {
    if (!result.signal && result.exit_code > 128) result.signal = result.exit_code - 128;
    result.exit_code = 124;
  }
  return result;
}

namespace {

std::string signal_name(int signal) {
  const char* abbreviation = ::sigabbrev_np(signal);
  return abbreviation != nullptr ? std::string("SIG") + abbreviation
                                 : "signal " + std::to_string(signal);
}

// "exit 3", "exit 137 (memory_limit)", "timeout (killed by SIGTERM), exit 124".
std::string ending_of(const ProcessResult& result) {
  const std::string exit = "exit " + std::to_string(result.exit_code);
  if (result.termination_reason == TerminationReason::Timeout) {
    const std::string how = result.signal ? "killed by " + signal_name(*result.signal)
                                          : "the command ended after SIGTERM";
    return "timeout (" + how + "), " + exit;
  }
  if (result.termination_reason != TerminationReason::None) {
    return exit + " (" + std::string(to_string(result.termination_reason)) + ")";
  }
  return exit;
}

std::string count_by_kind(const std::vector<Change>& changes) {
  std::map<std::string, int> counts;
  for (const auto& change : changes)
    ++counts[std::string(to_string(change.kind))];
  std::string detail;
  for (const auto& [kind, count] : counts)
    detail += (detail.empty() ? "" : ", ") + std::to_string(count) + " " + kind;
  return detail.empty() ? "nothing changed" : detail;
}

void print_summary(const ProcessResult& result, const std::string& workspace,
                   const std::string& network_mode, const RunIo& io) {
  const bool colour = ::isatty(io.err_fd) == 1 && run_getenv(io, "NO_COLOR") == nullptr;
  std::ostringstream err;
  // One write at the end, to whichever stderr the run reports to.
  struct Flush {
    std::ostringstream& text;
    int fd;
    ~Flush() { (void)core::write_all(fd, text.str(), "the run's summary"); }
  } flush{err, io.err_fd};
  const std::string ending = ending_of(result);
  char timing[64];
  std::snprintf(timing, sizeof timing, " in %.0f ms", result.duration_ms);
  err << "pulsebox: " << ending << timing << ", isolation " << result.isolation_level << "\n";
  if (!result.termination_detail.empty()) {
    err << "pulsebox: " << core::escape_for_terminal(result.termination_detail, true) << "\n";
  }
  err << "pulsebox: enforcement:\n";
  for (const auto& d : result.enforcement_decisions) {
    const bool strong = d.level == EnforcementLevel::StronglyEnforced;
    std::string note;
    if (!strong && d.accepted) note = " (accepted with --allow-weaker)";
    if (!strong && !d.requested) note = " (default limits, applied as far as this host allows)";
    if (d.dimension == Dimension::Network) {
      note = ", --net " + network_mode +
             (result.network.empty() ? "" : " (" + result.network + ")") + note;
    }
    err << "  " << std::string(to_string(d.dimension))
        << std::string(12 - to_string(d.dimension).size(), ' ')
        << paint(to_string(d.level), strong ? Colour::Green : Colour::Yellow, colour) << note
        << "\n";
  }
  std::size_t refused = 0;
  for (const auto& access : result.network_accesses) {
    if (access.method == "more") {  // the decisions past the recorded ones, counted
      err << "pulsebox: network: " << core::escape_for_terminal(access.reason, true) << "\n";
      continue;
    }
    if (access.allowed || refused++ >= 5) continue;
    err << "pulsebox: network: refused " << core::escape_for_terminal(access.host, true)
        << (access.port ? ":" + std::to_string(access.port) : "") << ": "
        << core::escape_for_terminal(access.reason, true) << "\n";
  }
  if (refused > 5) err << "pulsebox: network: " << refused - 5 << " more refused (audit log)\n";
  const ChangesStatus& status = result.changes_status;
  const std::string detail = count_by_kind(result.changes);
  for (const auto& note : status.notes) {
    err << "pulsebox: note: " << core::quote_name(note.path) << ": " << note.reason << "\n";
  }
  if (status.contains_secrets) {
    // A session's flag is the session's: what its earlier runs left counts.
    err << "pulsebox: " << paint("warning", Colour::Yellow, colour)
        << (status.outcome == ChangesOutcome::Session
                ? ": the session holds a change with a registered secret value (in a file, a "
                  "symlink's target or a name); session commit refuses it unless "
                  "--allow-secrets\n"
                : ": a change holds a registered secret value (in a file, a symlink's target or "
                  "a name); commit refuses it unless --allow-secrets\n");
  }
  if (status.outcome == ChangesOutcome::Held) {
    err << "pulsebox: " << paint("changes held", Colour::Red, colour) << ": "
        << core::escape_for_terminal(status.detail, true) << "\n";
    for (const auto& item : status.refused) {
      err << "pulsebox:   " << core::quote_name(item.path) << ": " << item.reason << "\n";
    }
    if (status.held_id) {
      err << "pulsebox:   drop them: pulsebox discard -w " << workspace << " " << *status.held_id
          << "\n";
    }
  }
  if (status.outcome == ChangesOutcome::Session && status.session) {
    err << "pulsebox: session " << paint(*status.session, Colour::Bold, colour) << ": " << detail
        << "\n"
        << "pulsebox:   review: pulsebox session diff -w " << workspace << " " << *status.session
        << "\n"
        << "pulsebox:   apply:  pulsebox session commit -w " << workspace << " " << *status.session
        << "\n";
    return;
  }
  // A discarded transaction is gone: naming it as one to review would lie.
  if (status.outcome == ChangesOutcome::Discarded) {
    err << "pulsebox: changes discarded" << (result.changes.empty() ? "" : " (" + detail + ")")
        << "\n";
    return;
  }
  if (!result.transaction_id) {
    if (status.outcome == ChangesOutcome::Unchanged) err << "pulsebox: no workspace changes\n";
    return;
  }
  if (status.outcome == ChangesOutcome::Committed) {
    err << "pulsebox: changes committed: " << *result.transaction_id << " (" << detail << ")\n";
    return;
  }
  if (status.outcome == ChangesOutcome::Conflict) {
    err << "pulsebox: " << paint("changes not committed", Colour::Red, colour) << ", kept as "
        << *result.transaction_id << "\n";
  }
  err << "pulsebox: changes: " << paint(*result.transaction_id, Colour::Bold, colour) << " ("
      << detail << ")\n"
      << "pulsebox:   review: pulsebox diff -w " << workspace << " " << *result.transaction_id
      << "\n"
      << "pulsebox:   apply:  pulsebox commit -w " << workspace << " " << *result.transaction_id
      << "\n";
}

// Sandbox checks the options once and names what it refused by its stage;
// here it is named by the flag that set it.
std::string with_flag(const SandboxConfigError& error) {
  static const std::map<std::string, std::string> kFlags = {{"workspace", "--workspace"},
                                                            {"seccomp", "--seccomp"},
                                                            {"env", "--env"},
                                                            {"cwd", "--cwd"},
                                                            {"secret", "--secret"}};
  const auto it = kFlags.find(error.stage());
  const std::string message = error.what();
  if (it == kFlags.end() || message.rfind(it->second, 0) == 0) return message;
  return it->second + ": " + message;
}

void print_run_error(const RunIo& io, std::string_view message) {
  // The message may quote the command, whose arguments may be anything.
  (void)core::write_all(io.err_fd, "pulsebox: " + core::escape_for_terminal(message, true) + "\n",
                        "an error");
}

// ASK decisions as events: the request, then the answer, whoever gave it
// (-y, --approve-with, or the carrier's client when it asks).
Approver approver_with_events(Approver decide, const RunEvents& events, const std::string& run_id,
                              unsigned timeout_seconds) {
  if (!decide && !events.wait_for_answer) return {};  // refused, as without events
  auto asked = std::make_shared<int>(0);
  return [decide = std::move(decide), &events, run_id, timeout_seconds,
          asked](const ApprovalRequest& request) {
    const std::string approval_id = "approval-" + std::to_string(++*asked);
    events.write(protocol::approval_request_event(run_id, approval_id, request, timeout_seconds));
    ApprovalAnswer answer;
    if (decide) {
      answer = decide(request);
    } else {
      const std::optional<bool> given = events.wait_for_answer(approval_id, timeout_seconds);
      answer = {
          .approved = given.value_or(false),
          .approver = "the client",
          .detail = given ? "" : "no answer within " + std::to_string(timeout_seconds) + " s"};
    }
    events.write(protocol::approval_event(run_id, approval_id, answer));
    return answer;
  };
}

}  // namespace

int execute_run(const RunOptions& o, const RunIo& given_io) {
  // --events without a carrier of its own: JSON lines on the run's stdout.
  RunEvents stdout_events;
  RunIo io = given_io;
  if (io.events == nullptr && o.events) {
    stdout_events.write = [fd = io.out_fd](std::string_view message) {
      return core::write_all(fd, std::string(message) + "\n", "an event").ok();
    };
    io.events = &stdout_events;
  }
  const RunEvents* events = io.events;
  // The carrier's id, else --execution-id, else a new one (the facade
  // makes it when no events need it first).
  std::string run_id = events != nullptr ? events->execution_id : std::string();
  if (run_id.empty()) run_id = o.execution_id;
  if (run_id.empty() && events != nullptr) run_id = "run-" + core::random_hex(16);
  auto report = [&](const std::exception& error, const std::string& message) {
    if (events != nullptr) {
      protocol::ProtocolError refused = protocol::error_from_exception(error);
      if (refused.field.empty()) refused.message = message;
      events->write(protocol::error_event(run_id, refused));
    } else {
      print_run_error(io, message);
    }
    return kExitRefused;
  };
  try {
    if (o.command.empty())
      bad_input("no command given (pulsebox run [OPTIONS] -- COMMAND [ARG...])");
    if (events != nullptr && (o.json || o.terminal)) {
      bad_input(o.json ? "--events and --json both choose the output: give one of them"
                       : "-t: a terminal's output cannot travel as events; drop -t");
    }
    core::trace_phase("cli: parsed");
    // Found once: each lookup canonicalises the path and its ancestors.
    const RunPlace place = run_place(o);
    // The profile, the flags and the workspace's config file, in that order.
    RunOptions effective = o;
    const config::RunConfig settings =
        config::apply_run_config(effective, place.workspace,
                                 [&io](const std::string& name) { return run_getenv(io, name); });
    effective.workspace_rules = settings.workspace_rules;
    effective.workspace = place.workspace.string();
    SandboxOptions options = build_sandbox_options(effective, io);
    if (events != nullptr)
      options.approver =
          approver_with_events(std::move(options.approver), *events, run_id, o.approve_timeout);
    core::trace_phase("cli: options built");
    Sandbox sandbox(std::move(options));
    core::trace_phase("cli: sandbox constructed");
    if (const std::string& why = sandbox.audit().key_warning(); !why.empty()) {
      const std::string warning = "warning: the audit log is not keyed: " + why +
                                  "; name a private file outside the workspace with "
                                  "PULSEBOX_AUDIT_KEY or --audit-key to key it";
      if (events != nullptr) {
        events->write(protocol::warning_event(run_id, warning));
      } else {
        print_run_error(io, warning);
      }
    }
    ExecuteOptions execute;
    execute.cwd = place.cwd;
    execute.cancel_fd = io.cancel_fd;
    execute.execution_id = run_id;
    // -t: the user's terminal is read by the relay, so no stdin source.
    auto stdin_source = StdinSource::open(o.terminal ? -1 : io.in_fd, o.interactive);
    if (!stdin_source) bad_input("stdin: " + stdin_source.error().to_string());
    execute.stdin_fd = stdin_source.value()->fd();
    std::unique_ptr<RawTerminal> raw_terminal;
    if (o.terminal) {
      if (::isatty(io.in_fd) != 1)
        bad_input("-t: stdin is not a terminal (run it from a terminal, or drop -t)");
      auto entered = RawTerminal::enter(io.in_fd);
      if (!entered) bad_input("-t: " + entered.error().to_string());
      raw_terminal = std::move(entered).value();
      execute.terminal = true;
      execute.terminal_input_fd = io.in_fd;
      execute.terminal_resize_fd = raw_terminal->resize_fd();
    }
    // Output chunks may end inside a UTF-8 character: each stream keeps
    // its unfinished one for its next chunk.
    protocol::Utf8Joiner stdout_text, stderr_text;
    if (events != nullptr) {
      execute.on_output = [&](OutputStream stream, std::string_view bytes) {
        auto& joiner = stream == OutputStream::Stdout ? stdout_text : stderr_text;
        const std::string text = joiner.take(bytes);
        if (!text.empty()) events->write(protocol::output_event(run_id, stream, text));
      };
      std::error_code ec;
      const auto workspace = std::filesystem::absolute(place.workspace, ec).lexically_normal();
      events->write(protocol::started_event(run_id, o.command, workspace.string(), place.cwd));
    } else if (!o.json) {
      execute.on_output = [&io](OutputStream stream, std::string_view text) {
        (void)core::write_all(stream == OutputStream::Stdout ? io.out_fd : io.err_fd, text,
                              "output");
      };
    }
    ProcessResult result = as_reported(sandbox.execute(o.command, execute));
    // Streamed already, as output events: not sent twice.
    if (events != nullptr) {
      result.stdout_data.clear();
      result.stderr_data.clear();
    }
    raw_terminal.reset();  // the summary is for a terminal in its normal mode
    const int status = exit_status_for(result);
    if (events != nullptr) {
      for (auto [stream, joiner] : {std::pair{OutputStream::Stdout, &stdout_text},
                                    std::pair{OutputStream::Stderr, &stderr_text}}) {
        if (const std::string rest = joiner->finish(); !rest.empty()) {
          events->write(protocol::output_event(run_id, stream, rest));
        }
      }
      if (result.transaction_id || result.changes_status.session || result.changes_status.held_id) {
        events->write(protocol::changes_event(run_id, result));
      }
      events->write(protocol::result_event(run_id, result, status));
    } else if (o.json) {
      (void)core::write_all(io.out_fd, to_json(result) + "\n", "the result");
    } else {
      print_summary(result, place.workspace.string(), o.net, io);
    }
    return status;
  } catch (const SandboxConfigError& error) {
    return report(error, with_flag(error));
  } catch (const SandboxError& error) {
    return report(error, error.what());
  }
}

}  // namespace pulsebox::run
