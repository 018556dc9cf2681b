// The protocol's requests over HTTP (run_service.h).
#include "http/run_service.h"

#include <condition_variable>
#include <cstdlib>

#include "core/fs.h"
#include "core/json_parse.h"
#include "core/text.h"
#include "model/limits_parse.h"
#include "protocol/operations.h"
#include "protocol/run_request.h"
#include "pulsebox/error.h"

namespace pulsebox::http {
namespace {

using protocol::ErrorCode;
using protocol::ProtocolError;

// A limit's value as a number of its unit, to compare; throws naming the field.
double magnitude(const std::string& text, const std::string& field, const std::string& kind) {
  if (kind == "size") {
    auto parsed = model::parse_size(text, field);
    if (!parsed) throw SandboxConfigError(field + ": " + parsed.error().message(), 0, "limits");
    return static_cast<double>(parsed.value());
  }
  if (kind == "duration") {
    auto parsed = model::parse_duration_seconds(text, field);
    if (!parsed) throw SandboxConfigError(field + ": " + parsed.error().message(), 0, "limits");
    return parsed.value();
  }
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || end == nullptr || *end != '\0' || !(value > 0)) {
    throw SandboxConfigError(field + ": \"" + text + "\" is not a positive number", 0, "limits");
  }
  return value;
}

}  // namespace

std::vector<std::string> clamp_limits(run::RunOptions& options, const RunMaxima& maxima) {
  struct Limit {
    const char* field;
    std::string* asked;
    const std::string& maximum;
    const char* kind;
  };
  const Limit limits[] = {{"limits.memory", &options.memory, maxima.memory, "size"},
                          {"limits.disk", &options.disk, maxima.disk, "size"},
                          {"limits.timeout", &options.timeout, maxima.timeout, "duration"},
                          {"limits.pids", &options.pids, maxima.pids, "number"},
                          {"limits.cpus", &options.cpus, maxima.cpus, "number"}};
  std::vector<std::string> changed;
  for (const Limit& limit : limits) {
    if (limit.maximum.empty()) continue;
    const double maximum = magnitude(limit.maximum, limit.field, limit.kind);
    if (limit.asked->empty()) {
      *limit.asked = limit.maximum;
      continue;  // the server's default: nothing was asked
    }
    if (magnitude(*limit.asked, limit.field, limit.kind) > maximum) {
      changed.push_back(std::string(limit.field) + ": " + *limit.asked + " asked, " +
                        limit.maximum + " is this server's maximum");
      *limit.asked = limit.maximum;
    }
  }
  return changed;
}

// The answers to one run's approval requests, given by other requests.
struct RunService::Approvals {
  std::optional<uid_t> uid;  // the run's caller's: only it may answer
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::string, bool> answers;
};

RunService::RunService(RunServiceOptions options) : options_(std::move(options)) {
  NativeBackendOptions native;
  native.state_dir = options_.state_dir;
  runtime_ = backends::make_native_runtime(native, /*prestart=*/true);
}

std::shared_ptr<RunService::Approvals> RunService::approvals_for(const std::string& run_id,
                                                                 bool create) {
  const std::lock_guard lock(approvals_mutex_);
  for (auto it = approvals_.begin(); it != approvals_.end();) {
    it = it->second.expired() ? approvals_.erase(it) : std::next(it);
  }
  const auto found = approvals_.find(run_id);
  if (!create) return found != approvals_.end() ? found->second.lock() : nullptr;
  // One live run per id: a second one would take over the first one's
  // approvals (and whose uid may answer them).
  if (found != approvals_.end()) return nullptr;
  auto made = std::make_shared<Approvals>();
  approvals_[run_id] = made;
  return made;
}

void RunService::run(RunStream& stream) {
  auto refuse = [&](const ProtocolError& error) {
    stream.write_line(protocol::error_event("", error));
  };
  auto parsed = protocol::parse_run_request(std::string_view(stream.request.body));
  if (!parsed) return refuse(parsed.error);
  protocol::RunRequest& request = *parsed.request;
  run::RunOptions options = std::move(request.options);
  // Held until the run ends: the upload is not evicted under it.
  std::optional<RunServiceOptions::FoundUpload> found;
  if (!request.workspace_upload.empty()) {
    if (options_.find_upload) found = options_.find_upload(request.workspace_upload);
    if (!found) {
      return refuse({ErrorCode::NotFound,
                     "workspace_upload: no upload " + request.workspace_upload +
                         " on this server (PUT /v1/workspaces/<sha256> first)",
                     "workspace_upload",
                     {}});
    }
    // An upload is shared by everyone who sends the same content and is
    // found by its hash: a run may not change it (its changes come back
    // through an export, and are committed where the workspace lives).
    if (options.changes == "commit" || !options.session.empty()) {
      return refuse({ErrorCode::Forbidden,
                     std::string(options.session.empty() ? "changes: commit" : "session") +
                         ": a run on an upload keeps its changes as a transaction to export "
                         "(changes keep or discard); an upload itself never changes",
                     options.session.empty() ? "changes" : "session",
                     {}});
    }
    options.workspace = found->root.string();
  } else if (!stream.client.uid) {
    return refuse({ErrorCode::Forbidden,
                   "workspace: a client over " + stream.client.transport +
                       " names an uploaded workspace (workspace_upload), never a path of the "
                       "server's machine",
                   "workspace",
                   {}});
  } else {
    const nlohmann::json body = nlohmann::json::parse(stream.request.body, nullptr, false);
    const protocol::Caller caller{.identity = stream.client.describe(), .uid = stream.client.uid};
    auto workspace = protocol::caller_workspace(body, caller);
    if (auto* refused = std::get_if<ProtocolError>(&workspace)) return refuse(*refused);
    options.workspace = std::get<std::filesystem::path>(workspace).string();
  }
  // The run's id is chosen here, so that answers can find it.
  const std::string run_id =
      request.execution_id.empty() ? "run-" + core::random_hex(16) : request.execution_id;
  std::vector<std::string> clamped;
  try {
    clamped = clamp_limits(options, options_.maxima);
  } catch (const std::exception& error) {
    return refuse(protocol::error_from_exception(error));
  }
  std::shared_ptr<Approvals> approvals = approvals_for(run_id, true);
  if (!approvals) {
    return refuse({ErrorCode::InvalidField,
                   "execution_id: a run with the id " + run_id + " is going on; choose another",
                   "execution_id",
                   {}});
  }
  approvals->uid = stream.client.uid;
  run::RunEvents events;
  events.execution_id = run_id;
  events.write = stream.write_line;
  if (request.approvals == protocol::ApprovalMode::Ask) {
    events.wait_for_answer = [approvals](const std::string& id,
                                         unsigned timeout) -> std::optional<bool> {
      std::unique_lock lock(approvals->mutex);
      approvals->changed.wait_for(lock, std::chrono::seconds(timeout),
                                  [&] { return approvals->answers.count(id) != 0; });
      const auto it = approvals->answers.find(id);
      if (it == approvals->answers.end()) return std::nullopt;
      return it->second;
    };
  }
  for (const std::string& change : clamped)
    stream.write_line(protocol::warning_event(run_id, change));
  core::UniqueFd stdin_file;
  auto io = protocol::carrier_io(request, stdin_file);
  if (!io) return refuse({ErrorCode::Internal, "cannot hold the run's stdin", "stdin", {}});
  io->native_backend = runtime_->make_backend();
  io->cancel_fd = stream.cancel_fd;
  io->events = &events;
  (void)run::execute_run(options, *io);
}

void RunService::answer(const httplib::Request& request, httplib::Response& response,
                        const ClientIdentity& client) {
  auto fail = [&](const ProtocolError& error) {
    response.status = protocol::http_status(error.code);
    response.set_content(protocol::error_response(error), "application/json");
  };
  const std::string run_id = request.matches.size() > 1 ? request.matches[1].str() : "";
  auto body = core::parse_json(request.body, "the answer");
  if (!body || !body.value().is_object()) {
    return fail({ErrorCode::InvalidRequest, "an answer is a JSON object", "", {}});
  }
  const nlohmann::json& answer = body.value();
  const std::string id = answer.value("approval_id", "");
  const std::string decision = answer.value("decision", "");
  if (id.empty()) return fail({ErrorCode::InvalidField, "approval_id: missing", "approval_id", {}});
  if (decision != "allow" && decision != "deny") {
    return fail({ErrorCode::InvalidField, "decision: expected allow or deny", "decision", {}});
  }
  const auto approvals = approvals_for(run_id, false);
  if (!approvals || approvals->uid != client.uid) {
    return fail({ErrorCode::NotFound, "no run " + run_id + " of yours here", "run_id", {}});
  }
  {
    const std::lock_guard lock(approvals->mutex);
    approvals->answers.emplace(id, decision == "allow");  // the first answer counts
  }
  approvals->changed.notify_all();
  protocol::Json out;
  out["v"] = protocol::kProtocolVersion;
  out["approval_id"] = id;
  out["decision"] = decision;
  response.set_content(out.dump(), "application/json");
}

}  // namespace pulsebox::http
