// The protocol's requests other than run (operations.h), through the
// library's facade: the same policy checks, audit records and conflict
// detection as the CLI's review commands.
#include "protocol/operations.h"

#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <set>

#include "backends/capabilities_json.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "policy/policy_json.h"
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

// The fields each request may carry besides "v" and "request"; any other is
// refused by name, never ignored.
const std::map<std::string_view, std::set<std::string_view>>& known_fields() {
  static const std::map<std::string_view, std::set<std::string_view>> kFields = {
      {"capabilities", {}},
      {"changes", {"workspace", "transaction"}},
      {"diff", {"workspace", "transaction"}},
      {"commit", {"workspace", "transaction"}},
      {"discard", {"workspace", "transaction"}},
      {"read_file", {"workspace", "path", "policy", "secrets"}},
      {"create_transaction", {"workspace"}},
      {"stage_write",
       {"workspace", "transaction", "path", "data", "data_base64", "mode", "policy", "secrets"}},
      {"stage_delete", {"workspace", "transaction", "path", "policy"}},
  };
  return kFields;
}

std::optional<ProtocolError> unknown_field(std::string_view name, const json& body) {
  const auto& allowed = known_fields().at(name);
  for (const auto& [key, value] : body.items()) {
    if (key == "v" || key == "request" || allowed.count(key) != 0) continue;
    return field_error(key, "unknown field of a " + std::string(name) + " request");
  }
  return std::nullopt;
}

// The caller's own action policy and secrets for the facade's checks: the
// READ, WRITE and DELETE rules, and the values a staged write may not hold
// and a read is scrubbed of. Without "policy", the reference defaults
// (reads allowed; writes and deletes denied).
std::variant<SandboxOptions, ProtocolError> caller_options(const json& body, const fs::path& root) {
  SandboxOptions options;
  options.workspace = root;
  if (body.contains("policy")) {
    if (!body["policy"].is_object()) return field_error("policy", "expected a policy object");
    auto parsed = policy::parse_policy_json(body["policy"].dump(), "policy");
    if (!parsed) return field_error("policy", parsed.error().message());
    options.policy = std::move(parsed).value();
  }
  if (body.contains("secrets")) {
    if (!body["secrets"].is_object()) {
      return field_error("secrets", "expected an object of NAME: VALUE");
    }
    for (const auto& [name, value] : body["secrets"].items()) {
      if (!value.is_string()) return field_error("secrets." + name, "expected a string");
      options.secrets.push_back(value.get<std::string>());
    }
  }
  return options;
}

// A staged write's content: "data" (text) or "data_base64", and its mode.
std::optional<ProtocolError> staged_content(const json& body, std::string& bytes, unsigned& mode) {
  if (body.contains("data") == body.contains("data_base64")) {
    return field_error("data", "give the content as exactly one of data or data_base64");
  }
  if (body.contains("data")) {
    if (!body["data"].is_string()) return field_error("data", "expected a string");
    bytes = body["data"].get<std::string>();
  } else {
    if (!body["data_base64"].is_string()) return field_error("data_base64", "expected a string");
    auto decoded = core::from_base64(body["data_base64"].get<std::string>());
    if (!decoded) return field_error("data_base64", "not valid base64");
    bytes = std::move(*decoded);
  }
  mode = 0644;
  if (body.contains("mode")) {
    if (!body["mode"].is_number_unsigned() || body["mode"].get<std::uint64_t>() > 0777) {
      return field_error("mode", "expected permission bits from 0 to 511 (0777)");
    }
    mode = body["mode"].get<unsigned>();
  }
  return std::nullopt;
}

OperationResult answer(std::string_view name, const json& body, const fs::path& root) {
  OperationResult out{reply(), std::nullopt};
  auto options = caller_options(body, root);
  if (auto* refused = std::get_if<ProtocolError>(&options)) {
    out.error = *refused;
    return out;
  }
  Sandbox sandbox(std::move(std::get<SandboxOptions>(options)));
  const std::optional<std::string> transaction = text_field(body, "transaction");
  const bool needs_transaction = name == "diff" || name == "commit" || name == "discard" ||
                                 name == "stage_write" || name == "stage_delete";
  if (needs_transaction && !transaction) {
    out.error = field_error("transaction", "missing: the transaction's id");
    return out;
  }
  if (name == "changes") {
    Workspace ws(root);
    Json list = Json::array();
    ws.for_each_transaction([&](TransactionInfo&& info) {
      if (!transaction || info.id == *transaction) list.push_back(changes_json(info));
    });
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
  } else if (name == "create_transaction") {
    out.body["transaction"] = sandbox.create_transaction();
  } else if (name == "stage_write" || name == "stage_delete") {
    const std::optional<std::string> path = text_field(body, "path");
    if (!path || path->empty()) {
      out.error = field_error("path", "missing: a path relative to the workspace");
      return out;
    }
    if (name == "stage_delete") {
      sandbox.stage_delete(*transaction, *path);
    } else {
      std::string bytes;
      unsigned mode = 0;
      if (auto refused = staged_content(body, bytes, mode)) {
        out.error = *refused;
        return out;
      }
      try {
        sandbox.stage_write(*transaction, *path, bytes, mode);
      } catch (const SandboxSecurityError& error) {
        out.error = error_from_exception(error);
        out.error->field = "data";
        out.error->paths = {*path};
        return out;
      }
    }
    out.body["transaction"] = *transaction;
    out.body["path"] = *path;
    out.body["staged"] = name == "stage_write" ? "write" : "delete";
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
  return known_fields().count(name) != 0;
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
  if (auto refused = unknown_field(name, body)) return {reply(), *refused};
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
