// `pulsebox run` on a remote server (remote_run.h).
#include "http/remote_run.h"

#include <fcntl.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "archive/workspace_archive.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/libexec_helper.h"
#include "core/text.h"
#include "http/changes_import.h"
#include "http/remote_target.h"
#include "policy/policy_json.h"
#include "protocol/run_request.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"
#include "run/run_command.h"

namespace pulsebox::http {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kRefused = run::kExitRefused;
constexpr std::size_t kMaxStdinBytes = 16 << 20;
constexpr std::size_t kMaxEventBytes = 16 << 20;
// The extractor's default limits (1 GiB of content, 200,000 entries) with a
// tar header and padding for each entry.
constexpr std::uint64_t kMaxExportBytes = (1ULL << 30) + 200000ULL * 1536;

// --events: nothing for people; what would be a line on stderr is an event.
bool events_mode = false;

void say(const std::string& line) {
  if (events_mode) {
    (void)core::write_all(STDOUT_FILENO, protocol::warning_event("", line) + "\n", "an event");
    return;
  }
  (void)core::write_all(STDERR_FILENO, "pulsebox: " + core::escape_for_terminal(line, true) + "\n",
                        "a message");
}

// The run is refused before the server took it: an error event with
// --events (docs/protocol.md), else a line on stderr; exit 125.
int refuse(const std::string& message,
           protocol::ErrorCode code = protocol::ErrorCode::Unavailable) {
  if (!events_mode) {
    say(message);
    return kRefused;
  }
  (void)core::write_all(STDOUT_FILENO, protocol::error_event("", {code, message, "", {}}) + "\n",
                        "an event");
  return kRefused;
}

// What a remote run cannot do: the server's machine has other files.
std::string unsupported(const run::RunOptions& o) {
  if (!o.ro_binds.empty() || !o.rw_binds.empty() || !o.volumes.empty())
    return "--bind, --ro-bind and -v name this machine's paths";
  if (!o.home.empty()) return "--home names this machine's directory";
  if (!o.session.empty()) return "--session keeps layers on the server's disk";
  if (!o.env_files.empty()) return "--env-file: pass the variables with --env";
  if (o.terminal) return "-t needs a terminal of the sandbox's own on this machine";
  if (o.subordinate_ids) return "--subordinate-ids maps this machine's ids";
  if (!o.approve_with.empty()) return "--approve-with: use -y, or the protocol's approvals";
  static const std::set<std::string> kNamed = {"default", "strict", "permissive", "unconfined"};
  if (kNamed.count(o.seccomp) == 0) return "--seccomp FILE: name a built-in profile";
  return "";
}

core::Result<json> run_request(const run::RunOptions& o, const std::string& upload,
                               const std::string& cwd) {
  json out = {{"v", 1}, {"request", "run"}, {"argv", o.command}, {"workspace_upload", upload}};
  if (!cwd.empty()) out["cwd"] = cwd;
  for (const auto& item : o.env) {
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return core::Error(core::ErrorKind::kInvalidInput, "remote",
                         "--env \"" + item + "\": expected NAME=VALUE");
    out["env"][item.substr(0, eq)] = item.substr(eq + 1);
  }
  for (const auto& name : o.secrets) {
    const char* value = std::getenv(name.c_str());
    if (value == nullptr) {
      return core::Error(core::ErrorKind::kInvalidInput, "remote",
                         "--secret " + name + ": the variable is not set in this environment");
    }
    out["secrets"][name] = value;
  }
  for (const protocol::LimitField& field : protocol::limit_fields()) {
    if (!(o.*field.value).empty()) out["limits"][field.name] = o.*field.value;
  }
  out["network"] = {{"mode", o.net}};
  if (!o.allow.empty()) out["network"]["allow"] = o.allow;
  if (!o.allow_domains.empty()) out["network"]["allow_domains"] = o.allow_domains;
  if (!o.policy_file.empty()) {
    // Checked here, where the file is: its errors name its line.
    PB_TRY(policy, policy::load_policy_file(o.policy_file));
    out["policy"] = json::parse(policy::policy_to_json(policy));
  }
  out["seccomp"] = o.seccomp;
  out["changes"] = "keep";  // brought home, then committed or discarded here
  if (!o.allow_weaker.empty()) out["allow_weaker"] = o.allow_weaker;
  out["approvals"] = o.yes ? "allow" : "deny";
  if (!o.profile.empty()) out["profile"] = o.profile;
  if (!o.execution_id.empty()) out["execution_id"] = o.execution_id;
  // The command's stdin: what this process has, unless it is a terminal.
  if (::isatty(STDIN_FILENO) != 1) {
    std::string data;
    char chunk[65536];
    for (;;) {
      const ssize_t n = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      data.append(chunk, static_cast<std::size_t>(n));
      if (data.size() > kMaxStdinBytes) {
        return core::Error(core::ErrorKind::kResource, "remote",
                           "stdin: over 16 MiB cannot travel to a remote run; give it a file in "
                           "the workspace");
      }
    }
    if (!data.empty()) out["stdin_base64"] = core::to_base64(data);
  }
  return out;
}

// An output event's bytes; base64 that does not decode is shown as it came.
std::string decode_output(const json& event) {
  if (event.contains("data")) return event["data"].get<std::string>();
  const std::string text = event.value("data_base64", "");
  return core::from_base64(text).value_or(text);
}

void audit(const fs::path& workspace, const std::string& action, const std::string& decision,
           const std::string& target, const std::string& detail) {
  try {
    AuditLog log(workspace / ".agent" / "logs" / "audit.jsonl", nullptr,
                 AuditLog::Options{.key = default_audit_key_location()});
    log.record(AuditRecord{.action = action,
                           .target = target,
                           .decision = decision,
                           .isolation_level = "remote_container",
                           .detail = detail});
  } catch (const std::exception& error) {
    say(std::string("warning: the audit log: ") + error.what());
  }
}

// The local run in this process's place, when the environment chose a
// server nobody answers at.
int fall_back(const std::string& cli, const std::vector<std::string>& args,
              const fs::path& workspace, const std::string& url, const std::string& why) {
  say("the remote server PULSE_REMOTE_URL=" + url + " does not answer (" + why +
      "): running on this machine with the native backend");
  audit(workspace, "backend_fallback", "allow", "remote",
        "PULSE_REMOTE_URL=" + url + " does not answer (" + why + "); ran with the native backend");
  std::vector<std::string> argv = {cli, "run", "--backend", "native"};
  argv.insert(argv.end(), args.begin(), args.end());
  core::exec_program(argv);
  return refuse("cannot run " + cli + ": " + core::describe_errno(errno));
}

struct Events {
  json result;
  json changes;
  json error;
  bool events_out = false;  // --events: pass them on
  bool json_out = false;    // --json: only the result, at the end
};

void take_event(const std::string& line, Events& seen) {
  const json event = json::parse(line, nullptr, false);
  if (!event.is_object()) return;
  const std::string kind = event.value("event", "");
  if (kind == "result") return void(seen.result = event);
  if (kind == "changes") return void(seen.changes = event);
  if (kind == "error") seen.error = event;
  if (seen.events_out) {
    (void)core::write_all(STDOUT_FILENO, line + "\n", "an event");
    return;
  }
  if (seen.json_out) return;
  if (kind == "output") {
    (void)core::write_all(event["stream"] == "stdout" ? STDOUT_FILENO : STDERR_FILENO,
                          decode_output(event), "output");
  } else if (kind == "warning") {
    say(event.value("message", ""));
  } else if (kind == "approval") {
    say("approval " + event.value("approval_id", "") + ": " + event.value("decision", "") + " by " +
        event.value("approver", ""));
  } else if (kind == "error") {
    say(event["error"].value("message", "the server refused the run"));
  }
}

}  // namespace

int remote_run(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::string cli;
  if (args.size() >= 2 && args[0] == "--cli") {
    cli = args[1];
    args.erase(args.begin(), args.begin() + 2);
  }
  CLI::App parser{"pulsebox run"};
  run::RunOptions o;
  run::add_run_options(parser, o);
  std::vector<std::string> flags;
  std::optional<std::vector<std::string>> tail;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      tail = std::vector<std::string>(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    flags.push_back(args[i]);
  }
  events_mode = std::find(flags.begin(), flags.end(), "--events") != flags.end();
  std::reverse(flags.begin(), flags.end());
  try {
    parser.parse(flags);
    o.command = run::run_command_line(parser.remaining(), tail);
  } catch (const CLI::Error& error) {
    return refuse(error.what(), protocol::ErrorCode::InvalidRequest);
  }
  events_mode = o.events;
  if (o.command.empty()) {
    return refuse("no command given (pulsebox run [OPTIONS] -- COMMAND [ARG...])",
                  protocol::ErrorCode::InvalidRequest);
  }
  if (const std::string why = unsupported(o); !why.empty()) {
    return refuse("the remote backend: " + why, protocol::ErrorCode::InvalidRequest);
  }
  const bool chosen_by_flag = o.backend == "remote";
  run::RunPlace place;
  try {
    place = run::run_place(o);
  } catch (const std::exception& error) {
    return refuse(error.what());
  }
  std::error_code ec;
  const fs::path root = fs::canonical(place.workspace, ec);
  if (ec) {
    return refuse("--workspace " + place.workspace.string() + ": " + ec.message());
  }
  auto target = remote_target_from_environment();
  if (!target) {
    return refuse(target.error().message());
  }
  auto made = make_remote_client(target.value());
  if (!made) {
    return refuse(made.error().message());
  }
  httplib::Client& client = *made.value();
  const std::string& url = target.value().url;

  // 1. Is anyone there, and does it take the token?
  auto health = client.Get("/v1/health");
  if (!health) {
    const std::string why = health.error() == httplib::Error::Connection
                                ? "nothing accepts connections there"
                                : httplib::to_string(health.error());
    if (chosen_by_flag || cli.empty()) {
      return refuse("--backend remote: the server at " + url + " does not answer (" + why + ")");
    }
    return fall_back(cli, args, root, url, why);
  }
  if (health->status == 401) {
    audit(root, "remote_run", "deny", url, "the server refused the token");
    return refuse(
        "the server at " + url + " refused the token (PULSE_REMOTE_TOKEN): nothing was run",
        protocol::ErrorCode::Unauthorized);
  }
  if (health->status != 200) {
    return refuse("the server at " + url + " answered " + std::to_string(health->status) +
                  " to health: " + health->body.substr(0, 200));
  }

  // 2. The workspace: sent only when the server does not have this content.
  Workspace local(root);
  const auto run_started = local.stamp_now();
  const archive::WriteOptions tree_options{.only_paths = std::nullopt,
                                           .exclude_top_level = {".agent"}};
  auto hashed = archive::write_tree_archive(
      root, [](std::string_view) { return core::ok_status(); }, tree_options);
  if (!hashed) {
    return refuse("reading the workspace: " + hashed.error().to_string());
  }
  for (const auto& [path, why] : hashed.value().skipped)
    say("not sent: " + core::quote_name(path) + " (" + why + ")");
  const std::string upload = "sha256:" + hashed.value().sha256;
  bool uploaded = false;
  auto known = client.Get("/v1/workspaces/" + upload);
  if (!known || (known->status != 200 && known->status != 404)) {
    return refuse("the server at " + url + " did not say whether it has the workspace" +
                  (known ? ": " + known->body.substr(0, 200) : ""));
  }
  if (known->status == 404) {
    std::string failure;
    auto put = client.Put(
        "/v1/workspaces/" + upload, httplib::Headers{},
        [&](std::size_t, httplib::DataSink& sink) {
          auto written = archive::write_tree_archive(
              root,
              [&](std::string_view bytes) -> core::Status {
                if (sink.write(bytes.data(), bytes.size())) return core::ok_status();
                return core::Error(core::ErrorKind::kIo, "remote", "the upload was cut");
              },
              tree_options);
          if (!written) {
            failure = written.error().to_string();
            return false;
          }
          sink.done();
          return true;
        },
        "application/x-tar");
    if (!put || (put->status != 200 && put->status != 201)) {
      const json body = put ? json::parse(put->body, nullptr, false) : json();
      return refuse("sending the workspace to " + url + " failed: " +
                    (!failure.empty() ? failure
                     : body.is_object() && body.contains("error")
                         ? body["error"].value("message", "")
                     : put ? "status " + std::to_string(put->status)
                           : httplib::to_string(put.error())));
    }
    uploaded = true;
  }

  // 3. The run, its events as they come.
  auto request = run_request(o, upload, place.cwd);
  if (!request) {
    return refuse(request.error().message());
  }
  Events seen;
  seen.events_out = o.events;
  seen.json_out = o.json;
  std::string pending;
  httplib::Request post;
  post.method = "POST";
  post.path = "/v1/runs";
  post.body = request.value().dump();
  post.set_header("Content-Type", "application/json");
  post.content_receiver = [&](const char* data, std::size_t size, std::uint64_t, std::uint64_t) {
    pending.append(data, size);
    if (pending.size() > kMaxEventBytes) {
      say("the server at " + url + " sent an event line over 16 MiB: the run's stream is dropped");
      return false;
    }
    for (auto end = pending.find('\n'); end != std::string::npos; end = pending.find('\n')) {
      take_event(pending.substr(0, end), seen);
      pending.erase(0, end + 1);
    }
    return true;
  };
  auto answered = client.send(post);
  if (!answered || answered->status != 200) {
    return refuse("the run on " + url + " failed: " +
                  (answered ? "status " + std::to_string(answered->status) + " " +
                                  answered->body.substr(0, 200)
                            : httplib::to_string(answered.error())));
  }
  if (seen.result.is_null()) {
    if (seen.error.is_null()) {
      return refuse("the connection to " + url + " ended before the run's result");
    }
    return kRefused;  // the server's error event, passed on or said
  }
  json result = seen.result["result"];
  int status = seen.result.value("exit_status", kRefused);

  // 4. Its changes, brought home as a local transaction.
  // The values the run was given (read from this environment by
  // run_request): the changes, and what they replace, are checked here as a
  // local run's are, so the diff never shows them, and the result names no
  // path by them.
  std::vector<std::string> values;
  for (const auto& name : o.secrets) {
    if (const char* value = std::getenv(name.c_str()); value != nullptr) values.emplace_back(value);
  }
  // The server took the same values (a scrubber refuses them alike), so
  // this does not throw; if it did, nothing here could be checked.
  std::optional<SecretScrubber> checked;
  try {
    checked.emplace(values);
  } catch (const SandboxConfigError& error) {
    return refuse(std::string("--secret: ") + error.what() +
                  "; the run's changes are left on the server");
  }
  const SecretScrubber& scrubber = *checked;
  const auto shown_name = [&](const std::string& path) {
    return scrubber.contains_secret(path) ? scrubber.redact(path) : path;
  };
  std::optional<std::string> local_tx;
  std::vector<RefusedChange> refused;
  bool contains_secrets = false;
  if (result["transaction_id"].is_string()) {
    const std::string remote_tx = result["transaction_id"];
    const fs::path scratch = root / ".agent" / ("remote-" + core::random_hex(12));
    fs::create_directories(scratch, ec);
    const fs::path tar = scratch / "changes.tar";
    {
      std::ofstream out(tar, std::ios::binary);
      httplib::Request export_request;
      export_request.method = "POST";
      export_request.path = "/v1/export";
      export_request.body =
          json{{"v", 1}, {"workspace_upload", upload}, {"transaction", remote_tx}}.dump();
      export_request.set_header("Content-Type", "application/json");
      std::uint64_t received = 0;
      export_request.content_receiver = [&](const char* data, std::size_t size, std::uint64_t,
                                            std::uint64_t) {
        // What the extractor would refuse anyway is not stored first.
        received += size;
        if (received > kMaxExportBytes) return false;
        out.write(data, static_cast<std::streamsize>(size));
        return static_cast<bool>(out);
      };
      auto exported = client.send(export_request);
      if (!exported || exported->status != 200) {
        fs::remove_all(scratch, ec);
        say("the run's changes could not be brought from " + url + " (" +
            (exported ? "status " + std::to_string(exported->status)
                      : httplib::to_string(exported.error())) +
            "); they stay on the server as " + remote_tx);
        return run::kExitChangesNotKept;
      }
    }
    const std::string origin =
        "remote " + result.value("argv", json::array()).dump() + " on " + url;
    auto imported = import_remote_changes({tar, scratch}, root,
                                          ImportOptions{.origin = origin,
                                                        .run_started = run_started,
                                                        .secrets = &scrubber,
                                                        .take_upper_files = true});
    fs::remove_all(scratch, ec);
    if (!imported) {
      say("the run's changes could not be staged here: " + imported.error().to_string());
      return run::kExitChangesNotKept;
    }
    local_tx = imported.value().transaction;
    refused = imported.value().refused;
    contains_secrets = imported.value().contains_secrets;
  }
  std::string outcome = local_tx ? "staged" : "unchanged";
  const std::string changes_mode = o.rm ? "discard" : o.changes;
  std::string commit_refused;  // why a --changes commit kept the transaction
  if (local_tx && changes_mode != "keep") {
    try {
      if (changes_mode == "commit") {
        local.commit(*local_tx);
        outcome = "committed";
      } else {
        local.discard(*local_tx);
        outcome = "discarded";
      }
    } catch (const std::exception& error) {
      commit_refused =
          shown_name("changes not committed, kept as " + *local_tx + ": " + error.what());
      say(commit_refused);
      outcome = "conflict";
      if (status == 0) status = run::kExitChangesNotKept;
    }
  }
  json changes = json::array();
  if (local_tx && outcome != "discarded") {
    for (const StagedChange& change : local.describe(*local_tx).changes) {
      json item = {{"kind", std::string(to_string(change.kind))}};
      core::put_name(item, "path", shown_name(change.path));
      changes.push_back(std::move(item));
    }
  }
  json refused_json = json::array();
  for (const auto& item : refused) {
    json entry = {{"reason", shown_name(item.reason)}};
    core::put_name(entry, "path", shown_name(item.path));
    refused_json.push_back(std::move(entry));
  }
  if (!refused.empty() && status == 0) status = run::kExitChangesNotKept;
  const std::string server_isolation = result.value("isolation_level", "");
  result["isolation_level"] = "remote_container";
  result["remote"] = {{"url", url},
                      {"run_id", seen.result.value("run_id", "")},
                      {"server_isolation_level", server_isolation},
                      {"workspace_upload", upload},
                      {"uploaded", uploaded}};
  result["transaction_id"] = local_tx && outcome != "discarded" ? json(*local_tx) : json(nullptr);
  result["changes"] = changes;
  result["changes_status"]["status"] = outcome;
  result["changes_status"]["refused"] = refused_json;
  result["changes_status"]["contains_secrets"] = contains_secrets;
  if (!commit_refused.empty()) result["changes_status"]["detail"] = commit_refused;
  audit(root, "remote_run", "allow", result.value("command", ""),
        "on " + url + " as " + seen.result.value("run_id", "") + " (" + server_isolation +
            "), workspace " + upload + (uploaded ? " sent" : " already there") + "; exit " +
            std::to_string(status) + (local_tx ? "; changes " + outcome + " as " + *local_tx : ""));

  if (o.events) {
    if (local_tx) {
      json event = seen.changes.is_object() ? seen.changes : json{{"v", 1}, {"event", "changes"}};
      event["run_id"] = seen.result.value("run_id", "");
      event["transaction_id"] = result["transaction_id"];
      event["changes"] = changes;
      event["changes_status"] = result["changes_status"];
      (void)core::write_all(STDOUT_FILENO, event.dump() + "\n", "an event");
    }
    seen.result["result"] = result;
    seen.result["exit_status"] = status;
    (void)core::write_all(STDOUT_FILENO, seen.result.dump() + "\n", "an event");
  } else if (o.json) {
    (void)core::write_all(STDOUT_FILENO, result.dump() + "\n", "the result");
  } else {
    say("exit " + std::to_string(result.value("exit_code", 0)) + ", isolation remote_container (" +
        url + ", " + server_isolation + " there)" +
        (uploaded ? "; the workspace was sent" : "; the workspace was there already"));
    for (const auto& item : refused)
      say("not staged: " + core::quote_name(shown_name(item.path)) + ": " +
          shown_name(item.reason));
    if (local_tx && outcome == "staged") {
      say("changes: " + *local_tx + " (" + std::to_string(changes.size()) + " paths)");
      say("  review: pulsebox diff -w " + root.string() + " " + *local_tx);
      say("  apply:  pulsebox commit -w " + root.string() + " " + *local_tx);
    } else if (local_tx) {
      say("changes " + outcome + ": " + *local_tx);
    } else {
      say("no workspace changes");
    }
  }
  return status;
}

}  // namespace pulsebox::http
