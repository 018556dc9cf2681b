#include "pulsebox/result.h"

#include <nlohmann/json.hpp>

#include "core/byte_names.h"
#include "model/result_json.h"
#include "protocol/version.h"

namespace pulsebox {

std::string_view to_string(EnforcementLevel level) {
  switch (level) {
    case EnforcementLevel::StronglyEnforced:
      return "strongly_enforced";
    case EnforcementLevel::PartiallyEnforced:
      return "partially_enforced";
    case EnforcementLevel::Advisory:
      return "advisory";
    case EnforcementLevel::Unsupported:
      return "unsupported";
  }
  return "unsupported";
}

std::optional<EnforcementLevel> parse_enforcement_level(std::string_view text) {
  for (auto level : {EnforcementLevel::StronglyEnforced, EnforcementLevel::PartiallyEnforced,
                     EnforcementLevel::Advisory, EnforcementLevel::Unsupported}) {
    if (to_string(level) == text) return level;
  }
  return std::nullopt;
}

std::string_view to_string(TerminationReason reason) {
  switch (reason) {
    case TerminationReason::None:
      return "";
    case TerminationReason::Timeout:
      return "timeout";
    case TerminationReason::Oom:
      return "oom";
    case TerminationReason::Pids:
      return "pids";
    case TerminationReason::CpuTime:
      return "cpu_time";
    case TerminationReason::OutputLimit:
      return "output_limit";
    case TerminationReason::DiskLimit:
      return "disk_limit";
    case TerminationReason::Signal:
      return "signal";
    case TerminationReason::Cancelled:
      return "cancelled";
    case TerminationReason::LaunchError:
      return "launch_error";
    case TerminationReason::Seccomp:
      return "seccomp";
  }
  return "";
}

std::string_view to_string(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::Added:
      return "added";
    case ChangeKind::Modified:
      return "modified";
    case ChangeKind::Deleted:
      return "deleted";
    case ChangeKind::Mode:
      return "mode";
    case ChangeKind::Symlink:
      return "symlink";
  }
  return "modified";
}

std::string_view to_string(ChangesOutcome outcome) {
  switch (outcome) {
    case ChangesOutcome::Unchanged:
      return "unchanged";
    case ChangesOutcome::Staged:
      return "staged";
    case ChangesOutcome::Committed:
      return "committed";
    case ChangesOutcome::Discarded:
      return "discarded";
    case ChangesOutcome::Conflict:
      return "conflict";
    case ChangesOutcome::Held:
      return "held";
    case ChangesOutcome::Session:
      return "session";
  }
  return "unchanged";
}

namespace {

void put_output(nlohmann::ordered_json& out, const std::string& key, const std::string& bytes) {
  if (core::is_valid_utf8(bytes)) {
    out[key] = bytes;
    return;
  }
  out[key] = core::escape_malformed_utf8(bytes);
  out[key + "_base64"] = core::to_base64(bytes);
}

nlohmann::ordered_json path_reasons(const std::vector<PathReason>& items, const char* what) {
  auto out = nlohmann::ordered_json::array();
  for (const PathReason& item : items) {
    nlohmann::ordered_json entry;
    core::put_name(entry, "path", item.path);
    entry[what] = item.reason;
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

namespace model {

nlohmann::ordered_json result_object(const ProcessResult& result) {
  using json = nlohmann::ordered_json;
  json out;
  out["v"] = protocol::kProtocolVersion;
  out["command"] = result.command;
  json argv = json::array();
  for (const auto& word : result.argv)
    argv.push_back(core::escape_malformed_utf8(word));
  out["argv"] = std::move(argv);
  out["exit_code"] = result.exit_code;
  out["signal"] = result.signal ? json(*result.signal) : json(nullptr);
  // Output that is not UTF-8 goes exact as base64 beside the readable text.
  put_output(out, "stdout", result.stdout_data);
  put_output(out, "stderr", result.stderr_data);
  out["duration_ms"] = result.duration_ms;
  out["timed_out"] = result.timed_out;
  out["truncated"] = result.truncated;
  out["termination_reason"] = result.termination_reason == TerminationReason::None
                                  ? json(nullptr)
                                  : json(std::string(to_string(result.termination_reason)));
  if (!result.termination_detail.empty()) out["termination_detail"] = result.termination_detail;
  out["metrics"] = {
      {"elapsed_ms", result.metrics.elapsed_ms},
      {"cpu_time_ms", result.metrics.cpu_time_ms},
      {"peak_memory_bytes", result.metrics.peak_memory_bytes},
      {"process_count", result.metrics.process_count},
      {"output_bytes", result.metrics.output_bytes},
  };
  out["isolation_level"] = result.isolation_level;
  json accesses = json::array();
  for (const NetworkAccess& access : result.network_accesses) {
    accesses.push_back({{"method", access.method},
                        {"host", access.host},
                        {"port", access.port},
                        {"decision", access.allowed ? "allow" : "deny"},
                        {"reason", access.reason},
                        {"addresses", access.addresses},
                        {"bytes_up", access.bytes_up},
                        {"bytes_down", access.bytes_down}});
  }
  out["network"] = {{"setup", result.network}, {"accesses", std::move(accesses)}};
  out["enforcement"] = {
      {"network", std::string(to_string(result.enforcement.network))},
      {"secrets", std::string(to_string(result.enforcement.secrets))},
      {"filesystem", std::string(to_string(result.enforcement.filesystem))},
      {"limits", std::string(to_string(result.enforcement.limits))},
      {"syscalls", std::string(to_string(result.enforcement.syscalls))},
  };
  out["transaction_id"] = result.transaction_id ? json(*result.transaction_id) : json(nullptr);
  if (!result.execution_id.empty()) out["execution_id"] = result.execution_id;
  json changes = json::array();
  for (const Change& change : result.changes) {
    json item = {{"kind", std::string(to_string(change.kind))}};
    core::put_name(item, "path", change.path);
    changes.push_back(std::move(item));
  }
  out["changes"] = std::move(changes);
  const ChangesStatus& status = result.changes_status;
  json changes_status;
  changes_status["status"] = std::string(to_string(status.outcome));
  changes_status["refused"] = path_reasons(status.refused, "reason");
  changes_status["notes"] = path_reasons(status.notes, "note");
  changes_status["held_id"] = status.held_id ? json(*status.held_id) : json(nullptr);
  changes_status["session"] = status.session ? json(*status.session) : json(nullptr);
  changes_status["contains_secrets"] = status.contains_secrets;
  changes_status["detail"] = status.detail;
  out["changes_status"] = std::move(changes_status);
  out["pid"] = result.pid;
  return out;
}

}  // namespace model

std::string to_json(const ProcessResult& result) {
  return model::result_object(result).dump(-1, ' ', false,
                                           nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace pulsebox
