// The protocol's requests other than run (docs/protocol.md): capabilities,
// changes, diff, commit, discard, read_file, create_transaction,
// stage_write and stage_delete, answered the same way on every carrier. Each names a workspace on
// the server's machine, which the caller must own.
//
// Usage:
//   const Caller caller{.identity = "uid 1000", .uid = 1000};
//   const OperationResult answer = handle_operation("diff", body, caller);
//   send(answer.error ? error_response(*answer.error) : answer.body.dump());
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "protocol/messages.h"

namespace pulsebox::protocol {

struct Caller {
  std::string identity;      // for the audit log and the server's log
  std::optional<uid_t> uid;  // a local caller's (SO_PEERCRED)
};

struct OperationResult {
  Json body;  // {"v": 1, ...}
  std::optional<ProtocolError> error;
};

// The operations handle_operation answers (not "run" and not "health",
// which the server answers itself).
bool is_operation(std::string_view name);

OperationResult handle_operation(std::string_view name, const nlohmann::json& body,
                                 const Caller& caller);

// The request's "workspace": an absolute path to a directory the caller
// owns (its uid, when known, else this process's), or the error naming
// the field.
std::variant<std::filesystem::path, ProtocolError> caller_workspace(const nlohmann::json& body,
                                                                    const Caller& caller);

}  // namespace pulsebox::protocol
