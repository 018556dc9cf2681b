// The plain-C ABI (include/pulsebox/pulsebox.h) over the facade: the
// options are a protocol run request's fields, read by the protocol's
// parser and turned into SandboxOptions by `pulsebox run`'s own code, so a
// C caller gets the CLI's semantics. Every entry point catches everything:
// no exception crosses into C.
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "config/run_config.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/unique_fd.h"
#include "protocol/messages.h"
#include "protocol/run_request.h"
#include "pulsebox/sandbox.h"
#include "pulsebox/version.h"
#include "pulsebox/workspace.h"
#include "run/run_command.h"

// The C functions alone leave the library (src/capi/libpulsebox.map).
#pragma GCC visibility push(default)
#include "pulsebox/pulsebox.h"
#pragma GCC visibility pop

extern char** environ;

// The handles' types are declared in the header, under the default
// visibility above; their definitions stay inside the library.
#define PULSEBOX_HIDDEN __attribute__((visibility("hidden")))

struct PULSEBOX_HIDDEN pulsebox_error {
  pulsebox_status code = PULSEBOX_ERROR_INTERNAL;
  std::string message;
  std::string field;
  std::vector<std::string> paths;
};

struct PULSEBOX_HIDDEN pulsebox_result {
  pulsebox::ProcessResult result;  // as `pulsebox run` reports it
  int exit_status = 0;
  std::string json;
};

struct PULSEBOX_HIDDEN pulsebox_string_list {
  std::vector<std::string> items;
};

// How an ASK of the action policy is decided ("approvals" in the options).
enum class Approvals { Callback, Allow, Deny };

struct PULSEBOX_HIDDEN pulsebox_sandbox {
  pulsebox::run::RunOptions options;
  Approvals approvals = Approvals::Callback;
  // The run in progress (its callbacks), for the approver.
  const pulsebox_run_options* current_run = nullptr;
  std::unique_ptr<pulsebox::Sandbox> sandbox;
};

namespace {

using pulsebox::protocol::ErrorCode;
using pulsebox::protocol::ProtocolError;

// A refusal of the ABI layer itself (a NULL argument, ...).
struct CallError {
  pulsebox_status code;
  std::string field;
  std::string message;
};

[[noreturn]] void refuse(pulsebox_status code, const std::string& field, const std::string& why) {
  throw CallError{code, field, field.empty() ? why : field + ": " + why};
}

void require(const void* argument, const char* name) {
  if (argument == nullptr) refuse(PULSEBOX_ERROR_INVALID_REQUEST, name, "must not be NULL");
}

pulsebox_status status_for(ErrorCode code) {
  switch (code) {
    case ErrorCode::InvalidRequest:
      return PULSEBOX_ERROR_INVALID_REQUEST;
    case ErrorCode::InvalidField:
      return PULSEBOX_ERROR_INVALID_FIELD;
    case ErrorCode::PolicyDenied:
      return PULSEBOX_ERROR_POLICY_DENIED;
    case ErrorCode::UnsupportedPolicy:
      return PULSEBOX_ERROR_UNSUPPORTED_POLICY;
    case ErrorCode::Security:
    case ErrorCode::Forbidden:
      return PULSEBOX_ERROR_SECURITY;
    case ErrorCode::Unavailable:
    case ErrorCode::Busy:
    case ErrorCode::ShuttingDown:
      return PULSEBOX_ERROR_UNAVAILABLE;
    case ErrorCode::Conflict:
      return PULSEBOX_ERROR_CONFLICT;
    case ErrorCode::NotFound:
      return PULSEBOX_ERROR_NOT_FOUND;
    case ErrorCode::TooLarge:
      return PULSEBOX_ERROR_TOO_LARGE;
    case ErrorCode::Unauthorized:
    case ErrorCode::Internal:
      break;
  }
  return PULSEBOX_ERROR_INTERNAL;
}

[[noreturn]] void refuse(const ProtocolError& error) {
  throw CallError{status_for(error.code), error.field, error.message};
}

pulsebox_status fail(pulsebox_error** error, pulsebox_error made) {
  const pulsebox_status code = made.code;
  if (error != nullptr) *error = new (std::nothrow) pulsebox_error(std::move(made));
  return code;
}

// Runs `body`, turning whatever it throws into a status and an error.
template <typename Body>
pulsebox_status guarded(pulsebox_error** error, Body&& body) noexcept {
  if (error != nullptr) *error = nullptr;
  try {
    body();
    return PULSEBOX_OK;
  } catch (const CallError& refused) {
    return fail(error, {refused.code, refused.message, refused.field, {}});
  } catch (const std::bad_alloc&) {
    return fail(error, {PULSEBOX_ERROR_INTERNAL, "out of memory", "", {}});
  } catch (const std::exception& thrown) {
    try {
      const ProtocolError mapped = pulsebox::protocol::error_from_exception(thrown);
      return fail(error, {status_for(mapped.code), mapped.message, mapped.field, mapped.paths});
    } catch (...) {
      return fail(error, {PULSEBOX_ERROR_INTERNAL, "out of memory", "", {}});
    }
  } catch (...) {
    return fail(error, {PULSEBOX_ERROR_INTERNAL, "an unknown failure inside pulsebox", "", {}});
  }
}

// Bytes for the caller: malloc'd, NUL-terminated, freed with pulsebox_string_free.
char* copy_out(std::string_view bytes) {
  char* out = static_cast<char*>(std::malloc(bytes.size() + 1));
  if (out == nullptr) throw std::bad_alloc();
  std::memcpy(out, bytes.data(), bytes.size());
  out[bytes.size()] = '\0';
  return out;
}

// The run request's fields that are not options of a sandbox, and where
// the C caller gives them instead.
const std::map<std::string, std::string>& per_run_fields() {
  static const std::map<std::string, std::string> kFields = {
      {"argv", "pulsebox_sandbox_run's argv"},
      {"cwd", "pulsebox_run_options.cwd"},
      {"stdin", "pulsebox_run_options.stdin_data"},
      {"stdin_base64", "pulsebox_run_options.stdin_data"},
      {"execution_id", "pulsebox_run_options.execution_id"},
      {"workspace", "pulsebox_sandbox_new's workspace"},
  };
  return kFields;
}

// The options JSON as a run request (the protocol's parser names the field
// of any error), with `approvals` read as the C ABI means it.
pulsebox::protocol::RunRequest parse_options(const char* options_json, Approvals& approvals) {
  nlohmann::json body = nlohmann::json::object();
  if (options_json != nullptr && *options_json != '\0') {
    auto parsed = pulsebox::core::parse_json(options_json, "the options");
    if (!parsed) refuse(PULSEBOX_ERROR_INVALID_REQUEST, "", parsed.error().to_string());
    body = std::move(parsed).value();
  }
  if (!body.is_object()) refuse(PULSEBOX_ERROR_INVALID_REQUEST, "", "options: expected an object");
  static const std::set<std::string> kOptions = {"policy",  "limits",       "network",  "secrets",
                                                 "env",     "seccomp",      "changes",  "session",
                                                 "profile", "allow_weaker", "approvals"};
  for (const auto& [key, value] : body.items()) {
    if (const auto it = per_run_fields().find(key); it != per_run_fields().end()) {
      refuse(PULSEBOX_ERROR_INVALID_FIELD, key,
             "not an option of a sandbox; give it as " + it->second);
    }
    if (kOptions.count(key) == 0) {
      refuse(PULSEBOX_ERROR_INVALID_FIELD, key, "unknown option (pulsebox.h lists them)");
    }
  }
  if (body.contains("approvals") && body["approvals"] == "ask") {
    refuse(PULSEBOX_ERROR_INVALID_FIELD, "approvals",
           "expected allow or deny (without it, on_approval decides)");
  }
  body["v"] = pulsebox::protocol::kProtocolVersion;
  body["argv"] = nlohmann::json::array({"true"});  // the run gives its own
  auto parsed = pulsebox::protocol::parse_run_request(body);
  if (!parsed) refuse(parsed.error);
  if (body.contains("approvals")) {
    approvals = parsed.request->approvals == pulsebox::protocol::ApprovalMode::Allow
                    ? Approvals::Allow
                    : Approvals::Deny;
  }
  return std::move(*parsed.request);
}

// The approver of a C sandbox: "approvals", else the run's on_approval.
pulsebox::Approver c_approver(pulsebox_sandbox* owner, pulsebox::Approver yes) {
  return [owner, yes = std::move(yes)](const pulsebox::ApprovalRequest& request) {
    if (owner->approvals == Approvals::Allow) return yes(request);
    if (owner->approvals == Approvals::Deny) {
      return pulsebox::ApprovalAnswer{false, "approvals: deny", ""};
    }
    const pulsebox_run_options* run = owner->current_run;
    if (run == nullptr || run->on_approval == nullptr) {
      return pulsebox::ApprovalAnswer{false, "the C caller", "no on_approval callback"};
    }
    const std::string json = request.to_json();
    const bool approved = run->on_approval(run->user_data, json.c_str()) != 0;
    return pulsebox::ApprovalAnswer{approved, "on_approval callback",
                                    approved ? "" : "the callback denied it"};
  };
}

// The caller's run options, zeroed past what its struct_size covers.
pulsebox_run_options read_run_options(const pulsebox_run_options* given) {
  pulsebox_run_options out;
  pulsebox_run_options_init(&out);
  if (given == nullptr) return out;
  if (given->struct_size < offsetof(pulsebox_run_options, cwd)) {
    refuse(PULSEBOX_ERROR_INVALID_REQUEST, "options.struct_size",
           "not set: initialise the options with pulsebox_run_options_init");
  }
  std::memcpy(&out, given, std::min(given->struct_size, sizeof out));
  out.struct_size = sizeof out;
  return out;
}

void check_execution_id(const char* id) {
  nlohmann::json body = {{"v", pulsebox::protocol::kProtocolVersion},
                         {"argv", nlohmann::json::array({"true"})},
                         {"execution_id", id}};
  auto parsed = pulsebox::protocol::parse_run_request(body);
  if (!parsed) refuse(parsed.error);
}

// NOT_FOUND for an id that names no transaction, before the facade's own
// (less specific) refusal.
void require_transaction(pulsebox_sandbox* sandbox, const char* transaction) {
  require(sandbox, "sandbox");
  require(transaction, "transaction");
  bool found = false;
  sandbox->sandbox->workspace().for_each_transaction(
      [&](pulsebox::TransactionInfo&& info) { found = found || info.id == transaction; });
  if (found) return;
  refuse(PULSEBOX_ERROR_NOT_FOUND, "transaction",
         std::string("no transaction \"") + transaction + "\" in this workspace");
}

}  // namespace

extern "C" {

const char* pulsebox_version(void) {
  static const std::string kVersion(pulsebox::version());
  return kVersion.c_str();
}

int pulsebox_abi_version(void) {
  return PULSEBOX_ABI_VERSION;
}

const char* pulsebox_status_name(pulsebox_status status) {
  switch (status) {
    case PULSEBOX_OK:
      return "ok";
    case PULSEBOX_ERROR_INVALID_REQUEST:
      return "invalid_request";
    case PULSEBOX_ERROR_INVALID_FIELD:
      return "invalid_field";
    case PULSEBOX_ERROR_POLICY_DENIED:
      return "policy_denied";
    case PULSEBOX_ERROR_UNSUPPORTED_POLICY:
      return "unsupported_policy";
    case PULSEBOX_ERROR_SECURITY:
      return "security";
    case PULSEBOX_ERROR_UNAVAILABLE:
      return "unavailable";
    case PULSEBOX_ERROR_CONFLICT:
      return "conflict";
    case PULSEBOX_ERROR_NOT_FOUND:
      return "not_found";
    case PULSEBOX_ERROR_TOO_LARGE:
      return "too_large";
    case PULSEBOX_ERROR_INTERNAL:
      return "internal";
  }
  return "internal";
}

pulsebox_status pulsebox_error_code(const pulsebox_error* error) {
  return error == nullptr ? PULSEBOX_OK : error->code;
}

const char* pulsebox_error_message(const pulsebox_error* error) {
  return error == nullptr ? "" : error->message.c_str();
}

const char* pulsebox_error_field(const pulsebox_error* error) {
  return error == nullptr || error->field.empty() ? nullptr : error->field.c_str();
}

size_t pulsebox_error_path_count(const pulsebox_error* error) {
  return error == nullptr ? 0 : error->paths.size();
}

const char* pulsebox_error_path(const pulsebox_error* error, size_t index) {
  return error == nullptr || index >= error->paths.size() ? nullptr : error->paths[index].c_str();
}

void pulsebox_error_free(pulsebox_error* error) {
  delete error;
}

void pulsebox_string_free(char* text) {
  std::free(text);
}

size_t pulsebox_string_list_count(const pulsebox_string_list* list) {
  return list == nullptr ? 0 : list->items.size();
}

const char* pulsebox_string_list_get(const pulsebox_string_list* list, size_t index) {
  return list == nullptr || index >= list->items.size() ? nullptr : list->items[index].c_str();
}

void pulsebox_string_list_free(pulsebox_string_list* list) {
  delete list;
}

pulsebox_status pulsebox_sandbox_new(const char* workspace, const char* options_json,
                                     pulsebox_sandbox** out, pulsebox_error** error) {
  return guarded(error, [&] {
    require(out, "out");
    *out = nullptr;
    require(workspace, "workspace");
    if (*workspace == '\0') refuse(PULSEBOX_ERROR_INVALID_REQUEST, "workspace", "empty");
    auto made = std::make_unique<pulsebox_sandbox>();
    pulsebox::protocol::RunRequest request = parse_options(options_json, made->approvals);
    pulsebox::run::RunOptions& options = made->options;
    options = std::move(request.options);
    options.workspace = workspace;
    options.command.clear();
    // The run's environment: this process's, with the options' secrets.
    std::map<std::string, std::string> environment;
    pulsebox::run::RunIo io;
    io.in_fd = io.out_fd = io.err_fd = -1;
    if (!request.secret_environment.empty()) {
      for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
        const std::string_view item(*entry);
        const auto eq = item.find('=');
        if (eq != std::string_view::npos)
          environment.emplace(item.substr(0, eq), item.substr(eq + 1));
      }
      for (const auto& [name, value] : request.secret_environment)
        environment[name] = value;
      io.environment = &environment;
    }
    const auto getenv = [&io](const std::string& name) {
      return pulsebox::run::run_getenv(io, name);
    };
    const pulsebox::config::RunConfig settings = pulsebox::config::apply_run_config(
        options, pulsebox::run::run_place(options).workspace, getenv);
    options.workspace_rules = settings.workspace_rules;
    pulsebox::SandboxOptions sandbox_options = pulsebox::run::build_sandbox_options(options, io);
    sandbox_options.approver = c_approver(made.get(), std::move(sandbox_options.approver));
    made->sandbox = std::make_unique<pulsebox::Sandbox>(std::move(sandbox_options));
    *out = made.release();
  });
}

void pulsebox_sandbox_free(pulsebox_sandbox* sandbox) {
  try {
    delete sandbox;
  } catch (...) {  // a destructor's failure has nobody to report to
  }
}

void pulsebox_run_options_init(pulsebox_run_options* options) {
  if (options == nullptr) return;
  std::memset(options, 0, sizeof *options);
  options->struct_size = sizeof *options;
  options->cancel_fd = -1;
}

pulsebox_status pulsebox_sandbox_run(pulsebox_sandbox* sandbox, const char* const* argv,
                                     const pulsebox_run_options* options, pulsebox_result** out,
                                     pulsebox_error** error) {
  return guarded(error, [&] {
    require(out, "out");
    *out = nullptr;
    require(sandbox, "sandbox");
    require(argv, "argv");
    if (argv[0] == nullptr || *argv[0] == '\0') {
      refuse(PULSEBOX_ERROR_INVALID_REQUEST, "argv", "expected a command");
    }
    const pulsebox_run_options run = read_run_options(options);
    std::vector<std::string> command;
    for (const char* const* arg = argv; *arg != nullptr; ++arg)
      command.emplace_back(*arg);

    pulsebox::ExecuteOptions execute;
    pulsebox::run::RunOptions place = sandbox->options;
    place.cwd = run.cwd != nullptr ? run.cwd : "";
    execute.cwd = pulsebox::run::run_place(place).cwd;
    if (run.execution_id != nullptr) {
      check_execution_id(run.execution_id);
      execute.execution_id = run.execution_id;
    }
    execute.cancel_fd = run.cancel_fd;
    pulsebox::core::UniqueFd stdin_file;
    if (run.stdin_data != nullptr) {
      stdin_file = pulsebox::core::read_only_memory_file(
          std::string_view(run.stdin_data, run.stdin_length), "pulsebox-stdin");
      if (!stdin_file) refuse(PULSEBOX_ERROR_INTERNAL, "stdin", "could not hold the bytes");
      execute.stdin_fd = stdin_file.get();
    }
    if (run.on_output != nullptr) {
      execute.on_output = [&run](pulsebox::OutputStream stream, std::string_view bytes) {
        run.on_output(run.user_data,
                      stream == pulsebox::OutputStream::Stdout ? PULSEBOX_STDOUT : PULSEBOX_STDERR,
                      bytes.data(), bytes.size());
      };
    }
    struct CurrentRun {
      pulsebox_sandbox* sandbox;
      ~CurrentRun() { sandbox->current_run = nullptr; }
    } current{sandbox};
    sandbox->current_run = &run;
    auto made = std::make_unique<pulsebox_result>();
    made->result = pulsebox::run::as_reported(sandbox->sandbox->execute(command, execute));
    made->exit_status = pulsebox::run::exit_status_for(made->result);
    made->json = pulsebox::to_json(made->result);
    *out = made.release();
  });
}

int pulsebox_result_exit_code(const pulsebox_result* result) {
  return result == nullptr ? 0 : result->result.exit_code;
}

int pulsebox_result_exit_status(const pulsebox_result* result) {
  return result == nullptr ? 0 : result->exit_status;
}

int pulsebox_result_signal(const pulsebox_result* result) {
  return result == nullptr ? 0 : result->result.signal.value_or(0);
}

const char* pulsebox_result_termination_reason(const pulsebox_result* result) {
  if (result == nullptr || result->result.termination_reason == pulsebox::TerminationReason::None) {
    return nullptr;
  }
  // The names are string literals: NUL-terminated and static.
  return pulsebox::to_string(result->result.termination_reason).data();
}

const char* pulsebox_result_stdout(const pulsebox_result* result, size_t* length) {
  if (length != nullptr) *length = result == nullptr ? 0 : result->result.stdout_data.size();
  return result == nullptr ? "" : result->result.stdout_data.c_str();
}

const char* pulsebox_result_stderr(const pulsebox_result* result, size_t* length) {
  if (length != nullptr) *length = result == nullptr ? 0 : result->result.stderr_data.size();
  return result == nullptr ? "" : result->result.stderr_data.c_str();
}

const char* pulsebox_result_transaction_id(const pulsebox_result* result) {
  return result == nullptr || !result->result.transaction_id
             ? nullptr
             : result->result.transaction_id->c_str();
}

const char* pulsebox_result_changes_status(const pulsebox_result* result) {
  if (result == nullptr) return "";
  return pulsebox::to_string(result->result.changes_status.outcome).data();
}

const char* pulsebox_result_json(const pulsebox_result* result) {
  return result == nullptr ? "" : result->json.c_str();
}

void pulsebox_result_free(pulsebox_result* result) {
  delete result;
}

pulsebox_status pulsebox_diff(pulsebox_sandbox* sandbox, const char* transaction, char** diff,
                              size_t* length, pulsebox_error** error) {
  return guarded(error, [&] {
    require(diff, "diff");
    *diff = nullptr;
    require_transaction(sandbox, transaction);
    const std::string text = sandbox->sandbox->preview_changes(transaction);
    *diff = copy_out(text);
    if (length != nullptr) *length = text.size();
  });
}

pulsebox_status pulsebox_commit(pulsebox_sandbox* sandbox, const char* transaction,
                                pulsebox_string_list** committed, pulsebox_error** error) {
  return guarded(error, [&] {
    if (committed != nullptr) *committed = nullptr;
    require_transaction(sandbox, transaction);
    auto list = std::make_unique<pulsebox_string_list>();
    list->items = sandbox->sandbox->commit_transaction(transaction);
    if (committed != nullptr) *committed = list.release();
  });
}

pulsebox_status pulsebox_discard(pulsebox_sandbox* sandbox, const char* transaction,
                                 pulsebox_error** error) {
  return guarded(error, [&] {
    require_transaction(sandbox, transaction);
    sandbox->sandbox->discard_transaction(transaction);
  });
}

pulsebox_status pulsebox_read_file(pulsebox_sandbox* sandbox, const char* path, char** bytes,
                                   size_t* length, pulsebox_error** error) {
  return guarded(error, [&] {
    require(bytes, "bytes");
    *bytes = nullptr;
    require(sandbox, "sandbox");
    require(path, "path");
    const std::string data = sandbox->sandbox->read_file(path);
    *bytes = copy_out(data);
    if (length != nullptr) *length = data.size();
  });
}

pulsebox_status pulsebox_create_transaction(pulsebox_sandbox* sandbox, char** transaction,
                                            pulsebox_error** error) {
  return guarded(error, [&] {
    require(transaction, "transaction");
    *transaction = nullptr;
    require(sandbox, "sandbox");
    *transaction = copy_out(sandbox->sandbox->create_transaction());
  });
}

pulsebox_status pulsebox_stage_write(pulsebox_sandbox* sandbox, const char* transaction,
                                     const char* path, const char* bytes, size_t length,
                                     unsigned mode, pulsebox_error** error) {
  return guarded(error, [&] {
    require_transaction(sandbox, transaction);
    require(path, "path");
    if (bytes == nullptr && length != 0) require(bytes, "bytes");
    sandbox->sandbox->stage_write(transaction, path,
                                  std::string_view(bytes == nullptr ? "" : bytes, length), mode);
  });
}

pulsebox_status pulsebox_stage_delete(pulsebox_sandbox* sandbox, const char* transaction,
                                      const char* path, pulsebox_error** error) {
  return guarded(error, [&] {
    require_transaction(sandbox, transaction);
    require(path, "path");
    sandbox->sandbox->stage_delete(transaction, path);
  });
}

}  // extern "C"
