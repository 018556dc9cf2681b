// A run request of the protocol (docs/protocol.md "run"; schema:
// docs/schema/request.schema.json) as the `pulsebox run` options it means.
// Only what the protocol names is reachable: no host binds, HOME, audit log
// path, policy file or env file (a remote caller must not name the
// server's files).
//
// Usage:
//   auto parsed = parse_run_request(body);          // Result<RunRequest>
//   if (!parsed) -> error_response(parsed.error())  // the field is named
//   run::RunOptions options = parsed->options;      // then the workspace
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "core/unique_fd.h"
#include "protocol/messages.h"
#include "run/run_command.h"

namespace pulsebox::protocol {

enum class ApprovalMode {
  Deny,   // an ASK is refused (the default: nobody to ask)
  Allow,  // an ASK is allowed (the caller's own -y)
  Ask,    // an approval_request event; the answer comes back over the carrier
};

struct RunRequest {
  run::RunOptions options;       // workspace left empty unless "workspace" was given
  std::string workspace;         // "workspace": a path on the server's machine
  std::string workspace_upload;  // "workspace_upload": "sha256:HEX" of an upload
  // "secrets": NAME -> VALUE, given to the command and scrubbed from
  // everything it writes; the run's environment as the secret policy sees it.
  std::map<std::string, std::string> secret_environment;
  std::optional<std::string> stdin_bytes;  // "stdin" or "stdin_base64"
  ApprovalMode approvals = ApprovalMode::Deny;
  std::string execution_id;
};

// Either the request or the error naming its field.
struct ParsedRunRequest {
  std::optional<RunRequest> request;
  ProtocolError error;
  explicit operator bool() const { return request.has_value(); }
};

// The request's "limits" fields and the run options they set, in order.
struct LimitField {
  const char* name;                     // "memory"
  std::string run::RunOptions::*value;  // &RunOptions::memory
};
const std::vector<LimitField>& limit_fields();

ParsedRunRequest parse_run_request(std::string_view body);

// The run's I/O on a protocol carrier: no terminal, no output descriptors
// (everything is an event), stdin from the request (held open in
// `stdin_file` for the run), the request's secrets as the environment the
// secret policy reads. nullopt when the stdin cannot be held.
std::optional<run::RunIo> carrier_io(const RunRequest& request, core::UniqueFd& stdin_file);
ParsedRunRequest parse_run_request(const nlohmann::json& body);

}  // namespace pulsebox::protocol
