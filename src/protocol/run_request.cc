// A protocol run request as run options (run_request.h).
#include "protocol/run_request.h"

#include <nlohmann/json.hpp>
#include <set>

#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"

namespace pulsebox::protocol {
namespace {

using nlohmann::json;

// Thrown inside the parser only; parse_run_request turns it into the result.
struct FieldError {
  std::string field;
  std::string message;
};

[[noreturn]] void refuse(const std::string& field, const std::string& why) {
  throw FieldError{field, field + ": " + why};
}

void only_keys(const json& object, const std::string& prefix, const std::set<std::string>& known) {
  for (const auto& [key, value] : object.items()) {
    if (known.count(key) == 0) refuse(prefix + key, "unknown field (docs/protocol.md lists them)");
  }
}

std::string text(const json& value, const std::string& field) {
  if (!value.is_string()) refuse(field, "expected a string");
  return value.get<std::string>();
}

std::vector<std::string> text_list(const json& value, const std::string& field) {
  if (!value.is_array()) refuse(field, "expected an array of strings");
  std::vector<std::string> out;
  for (std::size_t i = 0; i < value.size(); ++i)
    out.push_back(text(value[i], field + "[" + std::to_string(i) + "]"));
  return out;
}

std::map<std::string, std::string> text_map(const json& value, const std::string& field) {
  if (!value.is_object()) refuse(field, "expected an object of NAME: VALUE strings");
  std::map<std::string, std::string> out;
  for (const auto& [name, item] : value.items()) {
    if (name.empty() || name.find('=') != std::string::npos || name.find('\0') != std::string::npos)
      refuse(field + "." + name, "not a variable name");
    out[name] = text(item, field + "." + name);
  }
  return out;
}

// A limit: a string as the CLI flag takes it ("512M", "30s") or a number.
std::string limit_text(const json& value, const std::string& field) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_unsigned()) return std::to_string(value.get<std::uint64_t>());
  if (value.is_number_float()) {
    std::string out = value.dump();
    return out;
  }
  refuse(field, "expected a number or a string such as \"512M\" or \"30s\"");
}

RunRequest parse(const json& body) {
  if (!body.is_object()) refuse("", "a run request is a JSON object");
  only_keys(body, "", {"v",         "request", "argv",         "workspace",    "workspace_upload",
                       "cwd",       "env",     "secrets",      "limits",       "network",
                       "policy",    "seccomp", "changes",      "session",      "allow_weaker",
                       "approvals", "stdin",   "stdin_base64", "execution_id", "profile"});
  if (!body.contains("v") || body["v"] != kProtocolVersion) {
    refuse("v", "this server speaks protocol version " + std::to_string(kProtocolVersion));
  }
  if (body.contains("request") && body["request"] != "run") refuse("request", "expected \"run\"");
  RunRequest out;
  run::RunOptions& o = out.options;
  if (!body.contains("argv")) refuse("argv", "missing: the command and its arguments");
  o.command = text_list(body["argv"], "argv");
  if (o.command.empty() || o.command[0].empty()) refuse("argv", "expected a command");
  if (body.contains("workspace")) out.workspace = text(body["workspace"], "workspace");
  if (body.contains("workspace_upload")) {
    out.workspace_upload = text(body["workspace_upload"], "workspace_upload");
  }
  if (!out.workspace.empty() && !out.workspace_upload.empty()) {
    refuse("workspace_upload", "give a workspace or an upload, not both");
  }
  o.cwd = body.contains("cwd") ? text(body["cwd"], "cwd") : std::string();
  if (body.contains("env")) {
    for (const auto& [name, value] : text_map(body["env"], "env"))
      o.env.push_back(name + "=" + value);
  }
  if (body.contains("secrets")) {
    out.secret_environment = text_map(body["secrets"], "secrets");
    for (const auto& [name, value] : out.secret_environment)
      o.secrets.push_back(name);
  }
  if (body.contains("limits")) {
    const json& limits = body["limits"];
    if (!limits.is_object()) refuse("limits", "expected an object");
    std::set<std::string> known;
    for (const LimitField& field : limit_fields())
      known.insert(field.name);
    only_keys(limits, "limits.", known);
    for (const LimitField& field : limit_fields()) {
      if (limits.contains(field.name)) {
        o.*field.value = limit_text(limits[field.name], std::string("limits.") + field.name);
      }
    }
  }
  if (body.contains("network")) {
    const json& network = body["network"];
    if (!network.is_object()) refuse("network", "expected an object");
    only_keys(network, "network.", {"mode", "allow", "allow_domains"});
    if (network.contains("mode")) o.net = text(network["mode"], "network.mode");
    if (network.contains("allow")) o.allow = text_list(network["allow"], "network.allow");
    if (network.contains("allow_domains")) {
      o.allow_domains = text_list(network["allow_domains"], "network.allow_domains");
    }
  }
  if (body.contains("policy")) {
    if (!body["policy"].is_object()) refuse("policy", "expected a policy object");
    o.policy_json = body["policy"].dump();
  }
  if (body.contains("seccomp")) {
    o.seccomp = text(body["seccomp"], "seccomp");
    // Named profiles only: a path would read the server's files.
    static const std::set<std::string> kNamed = {"default", "strict", "permissive", "unconfined"};
    if (kNamed.count(o.seccomp) == 0) {
      refuse("seccomp", "expected default, strict, permissive or unconfined");
    }
  }
  if (body.contains("changes")) o.changes = text(body["changes"], "changes");
  if (body.contains("session")) o.session = text(body["session"], "session");
  if (body.contains("allow_weaker"))
    o.allow_weaker = text_list(body["allow_weaker"], "allow_weaker");
  if (body.contains("profile")) o.profile = text(body["profile"], "profile");
  if (body.contains("approvals")) {
    const std::string mode = text(body["approvals"], "approvals");
    if (mode == "deny") {
      out.approvals = ApprovalMode::Deny;
    } else if (mode == "allow") {
      out.approvals = ApprovalMode::Allow;
      o.yes = true;  // the caller's own -y
    } else if (mode == "ask") {
      out.approvals = ApprovalMode::Ask;
    } else {
      refuse("approvals", "expected deny, allow or ask");
    }
  }
  if (body.contains("stdin") && body.contains("stdin_base64")) {
    refuse("stdin_base64", "give stdin or stdin_base64, not both");
  }
  if (body.contains("stdin")) out.stdin_bytes = text(body["stdin"], "stdin");
  if (body.contains("stdin_base64")) {
    out.stdin_bytes = core::from_base64(text(body["stdin_base64"], "stdin_base64"));
    if (!out.stdin_bytes) refuse("stdin_base64", "not base64");
  }
  if (body.contains("execution_id")) {
    out.execution_id = text(body["execution_id"], "execution_id");
    if (!run::is_valid_execution_id(out.execution_id))
      refuse("execution_id",
             "expected 1 to 64 letters, digits, '-', '_' or '.', starting with a letter or digit "
             "and not ending in \".lock\"");
  }
  return out;
}

}  // namespace

const std::vector<LimitField>& limit_fields() {
  using run::RunOptions;
  static const std::vector<LimitField> kFields = {{"memory", &RunOptions::memory},
                                                  {"swap", &RunOptions::swap},
                                                  {"pids", &RunOptions::pids},
                                                  {"cpus", &RunOptions::cpus},
                                                  {"timeout", &RunOptions::timeout},
                                                  {"cpu_time", &RunOptions::cpu_time},
                                                  {"max_output", &RunOptions::max_output},
                                                  {"disk", &RunOptions::disk}};
  return kFields;
}

ParsedRunRequest parse_run_request(const nlohmann::json& body) {
  ParsedRunRequest out;
  try {
    out.request = parse(body);
  } catch (const FieldError& error) {
    out.error = {ErrorCode::InvalidField, error.message, error.field, {}};
    if (error.field.empty() || error.field == "v") out.error.code = ErrorCode::InvalidRequest;
  } catch (const json::exception& error) {
    out.error = {ErrorCode::InvalidRequest, error.what(), "", {}};
  }
  return out;
}

std::optional<run::RunIo> carrier_io(const RunRequest& request, core::UniqueFd& stdin_file) {
  run::RunIo io;
  io.in_fd = -1;
  io.out_fd = -1;
  io.err_fd = -1;
  if (request.stdin_bytes) {
    stdin_file = core::read_only_memory_file(*request.stdin_bytes, "pulsebox-stdin");
    if (!stdin_file) return std::nullopt;
    io.in_fd = stdin_file.get();
  }
  io.environment = &request.secret_environment;
  io.audit_key_of_this_process = true;
  return io;
}

ParsedRunRequest parse_run_request(std::string_view body) {
  auto parsed = core::parse_json(body, "the request");
  if (!parsed) {
    ParsedRunRequest out;
    out.error = {ErrorCode::InvalidRequest, parsed.error().to_string(), "", {}};
    return out;
  }
  return parse_run_request(parsed.value());
}

}  // namespace pulsebox::protocol
