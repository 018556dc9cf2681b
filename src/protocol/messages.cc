// The protocol's messages (messages.h).
#include "protocol/messages.h"

#include <map>

#include "core/byte_names.h"
#include "core/text.h"
#include "model/result_json.h"
#include "pulsebox/error.h"

namespace pulsebox::protocol {
namespace {

Json envelope(std::string_view event, const std::string& run_id) {
  Json out;
  out["v"] = kProtocolVersion;
  out["event"] = std::string(event);
  out["run_id"] = run_id;
  return out;
}

// Text from the command may hold bytes that are not UTF-8: replaced, never
// an exception (the fields that must be exact are put with put_name or
// base64 before this).
std::string dump(const Json& message) {
  return message.dump(-1, ' ', false, Json::error_handler_t::replace);
}

Json string_list(const std::vector<std::string>& items) {
  Json out = Json::array();
  for (const auto& item : items)
    out.push_back(core::escape_malformed_utf8(item));
  return out;
}

}  // namespace

std::string_view to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidRequest:
      return "invalid_request";
    case ErrorCode::InvalidField:
      return "invalid_field";
    case ErrorCode::Unauthorized:
      return "unauthorized";
    case ErrorCode::Forbidden:
      return "forbidden";
    case ErrorCode::NotFound:
      return "not_found";
    case ErrorCode::Conflict:
      return "conflict";
    case ErrorCode::TooLarge:
      return "too_large";
    case ErrorCode::UnsupportedPolicy:
      return "unsupported_policy";
    case ErrorCode::PolicyDenied:
      return "policy_denied";
    case ErrorCode::Security:
      return "security";
    case ErrorCode::Busy:
      return "busy";
    case ErrorCode::ShuttingDown:
      return "shutting_down";
    case ErrorCode::Unavailable:
      return "unavailable";
    case ErrorCode::Internal:
      return "internal";
  }
  return "internal";
}

int http_status(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidRequest:
    case ErrorCode::InvalidField:
      return 400;
    case ErrorCode::Unauthorized:
      return 401;
    case ErrorCode::Forbidden:
    case ErrorCode::PolicyDenied:
    case ErrorCode::Security:
      return 403;
    case ErrorCode::NotFound:
      return 404;
    case ErrorCode::Conflict:
      return 409;
    case ErrorCode::TooLarge:
      return 413;
    case ErrorCode::UnsupportedPolicy:
      return 422;
    case ErrorCode::Busy:
    case ErrorCode::ShuttingDown:
    case ErrorCode::Unavailable:
      return 503;
    case ErrorCode::Internal:
      return 500;
  }
  return 500;
}

Json error_object(const ProtocolError& error) {
  Json out;
  out["code"] = std::string(to_string(error.code));
  out["message"] = core::escape_malformed_utf8(error.message);
  out["field"] = error.field.empty() ? Json(nullptr) : Json(error.field);
  if (!error.paths.empty()) out["paths"] = string_list(error.paths);
  return out;
}

std::string error_response(const ProtocolError& error) {
  Json out;
  out["v"] = kProtocolVersion;
  out["error"] = error_object(error);
  return dump(out);
}

std::string field_for_flag(std::string_view flag) {
  static const std::map<std::string_view, std::string_view> kFields = {
      {"--workspace", "workspace"},
      {"--cwd", "cwd"},
      {"--env", "env"},
      {"--secret", "secrets"},
      {"--memory", "limits.memory"},
      {"--swap", "limits.swap"},
      {"--pids", "limits.pids"},
      {"--cpus", "limits.cpus"},
      {"--timeout", "limits.timeout"},
      {"--cpu-time", "limits.cpu_time"},
      {"--max-output", "limits.max_output"},
      {"--disk", "limits.disk"},
      {"--net", "network.mode"},
      {"--allow", "network.allow"},
      {"--allow-domain", "network.allow_domains"},
      {"--policy", "policy"},
      {"--seccomp", "seccomp"},
      {"--changes", "changes"},
      {"--session", "session"},
      {"--allow-weaker", "allow_weaker"},
      {"--profile", "profile"},
  };
  const auto it = kFields.find(flag);
  return it == kFields.end() ? std::string() : std::string(it->second);
}

ProtocolError error_from_exception(const std::exception& error) {
  ProtocolError out{ErrorCode::Internal, error.what(), "", {}};
  if (const auto* config = dynamic_cast<const SandboxConfigError*>(&error)) {
    out.code = ErrorCode::InvalidField;
    // The message starts with the flag that set the field ("--memory: ..."),
    // or the facade named its stage.
    const std::string message = config->what();
    const auto end = message.find_first_of(" :\"=");
    if (message.rfind("--", 0) == 0) {
      out.field = field_for_flag(message.substr(0, end));
      // Named as the protocol names it: "limits.memory: ...", not the flag.
      if (!out.field.empty()) out.message = out.field + message.substr(end);
    }
    if (out.field.empty()) out.field = field_for_flag("--" + config->stage());
    if (out.field.empty()) out.code = ErrorCode::InvalidRequest;
  } else if (const auto* conflict =
                 dynamic_cast<const SandboxConcurrentModificationError*>(&error)) {
    out.code = ErrorCode::Conflict;
    out.paths = conflict->paths();
  } else if (dynamic_cast<const SandboxUnsupportedPolicyError*>(&error) != nullptr) {
    out.code = ErrorCode::UnsupportedPolicy;
  } else if (dynamic_cast<const PolicyDenied*>(&error) != nullptr) {
    out.code = ErrorCode::PolicyDenied;
  } else if (dynamic_cast<const SandboxSecurityError*>(&error) != nullptr) {
    out.code = ErrorCode::Security;
  } else if (dynamic_cast<const SandboxUnavailableError*>(&error) != nullptr) {
    out.code = ErrorCode::Unavailable;
  } else if (dynamic_cast<const SandboxResourceError*>(&error) != nullptr) {
    out.code = ErrorCode::TooLarge;
  }
  return out;
}

std::string started_event(const std::string& run_id, const std::vector<std::string>& argv,
                          const std::string& workspace, const std::string& cwd) {
  Json out = envelope("started", run_id);
  out["argv"] = string_list(argv);
  core::put_name(out, "workspace", workspace);
  core::put_name(out, "cwd", cwd);
  return dump(out);
}

std::string output_event(const std::string& run_id, OutputStream stream, std::string_view bytes) {
  Json out = envelope("output", run_id);
  out["stream"] = stream == OutputStream::Stdout ? "stdout" : "stderr";
  if (core::is_valid_utf8(bytes)) {
    out["data"] = std::string(bytes);
  } else {
    out["data_base64"] = core::to_base64(bytes);
  }
  return dump(out);
}

std::string approval_request_event(const std::string& run_id, const std::string& approval_id,
                                   const ApprovalRequest& request, unsigned timeout_seconds) {
  Json out = envelope("approval_request", run_id);
  out["approval_id"] = approval_id;
  out["action"] = std::string(to_string(request.action));
  out["target"] = core::escape_malformed_utf8(request.target);
  out["rule"] = request.evaluation.describe();
  out["timeout_seconds"] = timeout_seconds;
  return dump(out);
}

std::string approval_event(const std::string& run_id, const std::string& approval_id,
                           const ApprovalAnswer& answer) {
  Json out = envelope("approval", run_id);
  out["approval_id"] = approval_id;
  out["decision"] = answer.approved ? "allow" : "deny";
  out["approver"] = answer.approver;
  out["detail"] = answer.detail;
  return dump(out);
}

std::string changes_event(const std::string& run_id, const ProcessResult& result) {
  Json out = envelope("changes", run_id);
  const Json full = model::result_object(result);
  out["transaction_id"] = full["transaction_id"];
  out["changes"] = full["changes"];
  out["changes_status"] = full["changes_status"];
  return dump(out);
}

std::string result_event(const std::string& run_id, const ProcessResult& result, int exit_status) {
  Json out = envelope("result", run_id);
  out["exit_status"] = exit_status;
  out["result"] = model::result_object(result);
  return dump(out);
}

std::string error_event(const std::string& run_id, const ProtocolError& error) {
  Json out = envelope("error", run_id);
  out["error"] = error_object(error);
  return dump(out);
}

std::string warning_event(const std::string& run_id, const std::string& message) {
  Json out = envelope("warning", run_id);
  out["message"] = core::escape_malformed_utf8(message);
  return dump(out);
}

std::string Utf8Joiner::take(std::string_view chunk) {
  std::string text = pending_ + std::string(chunk);
  pending_.clear();
  // An unfinished sequence at the end: at most 3 bytes, starting at a lead
  // byte whose length reaches past the end.
  const std::size_t size = text.size();
  for (std::size_t back = 1; back <= 3 && back <= size; ++back) {
    const auto byte = static_cast<unsigned char>(text[size - back]);
    if ((byte & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    std::size_t length = 1;
    if ((byte & 0xE0) == 0xC0)
      length = 2;
    else if ((byte & 0xF0) == 0xE0)
      length = 3;
    else if ((byte & 0xF8) == 0xF0)
      length = 4;
    if (length > back) {
      pending_ = text.substr(size - back);
      text.resize(size - back);
    }
    break;
  }
  return text;
}

std::string Utf8Joiner::finish() {
  return std::exchange(pending_, std::string());
}

}  // namespace pulsebox::protocol
