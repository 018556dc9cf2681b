// The protocol's requests other than run (operations.h), through the
// library's facade: the same policy checks, audit records and conflict
// detection as the CLI's review commands.
#include "protocol/operations.h"

#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "backends/capabilities_json.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "pulsebox/backend.h"
#include "pulsebox/error.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/workspace.h"

namespace pulsebox::protocol {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

ProtocolError field_error(const std::string& field, const std::string& why) {
  return {ErrorCode::InvalidField, field + ": " + why, field, {}};
}

Json reply() {
  Json out;
  out["v"] = kProtocolVersion;
  return out;
}

std::optional<std::string> text_field(const json& body, const std::string& field) {
  if (!body.contains(field) || !body[field].is_string()) return std::nullopt;
  return body[field].get<std::string>();
}

Json changes_json(const TransactionInfo& info) {
  Json out;
  out["id"] = info.id;
  out["created"] = info.created;
  out["origin"] = core::escape_malformed_utf8(info.origin);
  out["contains_secrets"] = info.contains_secrets;
  out["damaged"] = info.damaged.empty() ? Json(nullptr) : Json(info.damaged);
  Json changes = Json::array();
  for (const StagedChange& change : info.changes) {
    Json item = {{"kind", std::string(to_string(change.kind))}};
    core::put_name(item, "path", change.path);
    changes.push_back(std::move(item));
  }
  out["changes"] = std::move(changes);
  return out;
}

Json capabilities() {
  Json out = reply();
  out["backends"]["native"] = backends::capabilities_json(*make_native_backend());
  out["backends"]["host"] = backends::capabilities_json(*make_host_backend());
  return out;
}

OperationResult answer(std::string_view name, const json& body, const fs::path& root) {
  OperationResult out{reply(), std::nullopt};
  SandboxOptions options;
  options.workspace = root;
  Sandbox sandbox(std::move(options));
  const std::optional<std::string> transaction = text_field(body, "transaction");
  const bool needs_transaction = name == "diff" || name == "commit" || name == "discard";
  if (needs_transaction && !transaction) {
    out.error = field_error("transaction", "missing: the transaction's id");
    return out;
  }
  if (name == "changes") {
    Workspace ws(root);
    Json list = Json::array();
    for (const TransactionInfo& info : ws.list_transactions()) {
      if (!transaction || info.id == *transaction) list.push_back(changes_json(info));
    }
    if (transaction && list.empty()) {
      out.error = {ErrorCode::NotFound, "no transaction " + *transaction, "transaction", {}};
      return out;
    }
    out.body["transactions"] = std::move(list);
  } else if (name == "diff") {
    const std::string diff = sandbox.preview_changes(*transaction);
    out.body["transaction"] = *transaction;
    if (core::is_valid_utf8(diff)) {
      out.body["diff"] = diff;
    } else {
      out.body["diff"] = core::escape_malformed_utf8(diff);
      out.body["diff_base64"] = core::to_base64(diff);
    }
  } else if (name == "commit") {
    Json paths = Json::array();
    for (const std::string& path : sandbox.commit_transaction(*transaction)) {
      paths.push_back(core::escape_malformed_utf8(path));
    }
    out.body["transaction"] = *transaction;
    out.body["committed"] = std::move(paths);
  } else if (name == "discard") {
    sandbox.discard_transaction(*transaction);
    out.body["transaction"] = *transaction;
    out.body["discarded"] = true;
  } else if (name == "read_file") {
    const std::optional<std::string> path = text_field(body, "path");
    if (!path) {
      out.error = field_error("path", "missing: a path relative to the workspace");
      return out;
    }
    const std::string bytes = sandbox.read_file(*path);
    out.body["path"] = *path;
    if (core::is_valid_utf8(bytes)) {
      out.body["data"] = bytes;
    } else {
      out.body["data_base64"] = core::to_base64(bytes);
    }
  }
  return out;
}

}  // namespace

bool is_operation(std::string_view name) {
  static const std::set<std::string_view> kNames = {"capabilities", "changes", "diff",
                                                    "commit",       "discard", "read_file"};
  return kNames.count(name) != 0;
}

std::variant<fs::path, ProtocolError> caller_workspace(const json& body, const Caller& caller) {
  const std::optional<std::string> given = text_field(body, "workspace");
  if (!given || given->empty()) {
    return field_error("workspace", "missing: the workspace's absolute path");
  }
  const fs::path root(*given);
  if (!root.is_absolute()) return field_error("workspace", "expected an absolute path");
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return field_error("workspace", "\"" + core::escape_malformed_utf8(*given) +
                                        "\" is not a directory on the server's machine");
  }
  const uid_t owner = caller.uid.value_or(::geteuid());
  if (st.st_uid != owner) {
    return ProtocolError{ErrorCode::Forbidden,
                         "workspace: \"" + core::escape_malformed_utf8(*given) +
                             "\" belongs to uid " + std::to_string(st.st_uid) +
                             ", not to the caller (uid " + std::to_string(owner) + ")",
                         "workspace",
                         {}};
  }
  return root.lexically_normal();
}

OperationResult handle_operation(std::string_view name, const json& body, const Caller& caller) {
  if (!body.is_object()) {
    return {reply(),
            ProtocolError{ErrorCode::InvalidRequest, "a request is a JSON object", "", {}}};
  }
  if (!body.contains("v") || body["v"] != kProtocolVersion) {
    return {reply(), ProtocolError{ErrorCode::InvalidRequest,
                                   "v: this server speaks protocol version " +
                                       std::to_string(kProtocolVersion),
                                   "v",
                                   {}}};
  }
  if (!is_operation(name)) {
    return {reply(),
            ProtocolError{
                ErrorCode::NotFound, "no request \"" + std::string(name) + "\"", "request", {}}};
  }
  try {
    if (name == "capabilities") return {capabilities(), std::nullopt};
    auto workspace = caller_workspace(body, caller);
    if (auto* refused = std::get_if<ProtocolError>(&workspace)) return {reply(), *refused};
    return answer(name, body, std::get<fs::path>(workspace));
  } catch (const std::exception& error) {
    return {reply(), error_from_exception(error)};
  }
}

}  // namespace pulsebox::protocol
