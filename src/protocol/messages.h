// The protocol's messages (docs/protocol.md, docs/schema/): errors as
// objects with a stable code, and the events of a run as JSON objects, one
// per line (or per message on the local socket). Every message carries
// "v": kProtocolVersion.
//
// Usage:
//   send(started_event(run_id, argv, workspace, cwd));
//   send(output_event(run_id, OutputStream::Stdout, "text"));
//   send(error_event(run_id, {ErrorCode::InvalidField, "limits.memory: ...", "limits.memory",
//   {}}));
#pragma once

#include <exception>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "protocol/version.h"
#include "pulsebox/result.h"
#include "pulsebox/sandbox.h"

namespace pulsebox::protocol {

using Json = nlohmann::ordered_json;

// The stable codes; docs/protocol.md lists each with its HTTP status.
enum class ErrorCode {
  InvalidRequest,     // 400: not JSON, not an object, a wrong version
  InvalidField,       // 400: a field's value (the field is named)
  Unauthorized,       // 401: no token, or a wrong one
  Forbidden,          // 403: a workspace the caller does not own, a path refused
  NotFound,           // 404: no such transaction, upload or route
  Conflict,           // 409: the workspace changed under a commit
  TooLarge,           // 413: an archive or request beyond the server's limits
  UnsupportedPolicy,  // 422: a policy this host cannot enforce strongly
  PolicyDenied,       // 403: the action policy said DENY (or an ASK was denied)
  Security,           // 403: a request that would break isolation
  Busy,               // 503: the run queue is full
  ShuttingDown,       // 503: the server stops
  Unavailable,        // 503: no backend may run the command
  Internal,           // 500
};

std::string_view to_string(ErrorCode code);
int http_status(ErrorCode code);

struct ProtocolError {
  ErrorCode code = ErrorCode::Internal;
  std::string message;
  std::string field;               // "" when no single field is concerned
  std::vector<std::string> paths;  // Conflict: the paths that changed
};

// {"code": ..., "message": ..., "field": ...}
Json error_object(const ProtocolError& error);
// {"v": 1, "error": {...}}: the body of a refused request.
std::string error_response(const ProtocolError& error);

// The protocol error for a library exception (SandboxConfigError ->
// InvalidField naming the field its flag sets, PolicyDenied -> PolicyDenied,
// ...); anything else is Internal.
ProtocolError error_from_exception(const std::exception& error);

// The protocol field a CLI flag sets ("--memory" -> "limits.memory"), or "".
std::string field_for_flag(std::string_view flag);

// Events. `run_id` is the run's execution id.
std::string started_event(const std::string& run_id, const std::vector<std::string>& argv,
                          const std::string& workspace, const std::string& cwd);
// Text that is valid UTF-8 goes as "data", anything else as "data_base64".
std::string output_event(const std::string& run_id, OutputStream stream, std::string_view bytes);
std::string approval_request_event(const std::string& run_id, const std::string& approval_id,
                                   const ApprovalRequest& request, unsigned timeout_seconds);
std::string approval_event(const std::string& run_id, const std::string& approval_id,
                           const ApprovalAnswer& answer);
// After a run that kept changes: where they are and what they are.
std::string changes_event(const std::string& run_id, const ProcessResult& result);
// The last event of a run: the result object (as --json prints it) and the
// exit status `pulsebox run` exits with.
std::string result_event(const std::string& run_id, const ProcessResult& result, int exit_status);
std::string error_event(const std::string& run_id, const ProtocolError& error);
// Something the caller should know that does not stop the run.
std::string warning_event(const std::string& run_id, const std::string& message);

// Output arrives in chunks that may split a UTF-8 character; this keeps an
// unfinished character for the next chunk of its stream, so text stays
// text. finish() returns what is left at the end.
class Utf8Joiner {
 public:
  std::string take(std::string_view chunk);
  std::string finish();

 private:
  std::string pending_;
};

}  // namespace pulsebox::protocol
