#include "cli/review.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <iterator>
#include <set>
#include <stdexcept>
#include <tuple>

#include "core/agent_dir.h"
#include "core/byte_names.h"
#include "core/text.h"
#include "linux/userns.h"
#include "policy/policy_json.h"
#include "pulsebox/backend.h"
#include "pulsebox/session.h"
#include "workspace/diff.h"
#include "workspace/ignore_rules.h"
#include "workspace/safe_open.h"

namespace pulsebox::cli::review {

std::filesystem::path workspace_path(const std::string& given) {
  if (!given.empty()) return given;
  std::error_code ec;
  const auto here = std::filesystem::current_path(ec);
  if (ec) return ".";
  const auto found = core::find_workspace_root(here);
  return found ? found->root : std::filesystem::path(".");
}

std::filesystem::path kept_dir() {
  auto kept = make_native_backend()->kept_changes_dir();
  if (!kept) throw SandboxConfigError("the native backend keeps no sessions here");
  return *kept;
}

SessionReview::SessionReview(Workspace& workspace, const std::string& name) : ws(workspace) {
  ImportResult imported = session_transaction(ws, name, kept_dir());
  transaction = imported.transaction;
  refused = std::move(imported.refused);
}

SessionReview::~SessionReview() {
  if (!transaction) return;
  try {
    ws.discard(*transaction);
  } catch (const SandboxError&) {
    // left pending: `pulsebox changes` lists it
  }
}

namespace {

AuditKeyLocation audit_key_location(const Options& options) {
  if (options.audit_key.empty()) return default_audit_key_location();
  return AuditKeyLocation{std::filesystem::absolute(options.audit_key), true, ""};
}

Workspace open_workspace_with_policy(const Options& options) {
  const SystemDirectoryUse system_directory =
      options.allow_system_dir ? SystemDirectoryUse::Allow : SystemDirectoryUse::Refuse;
  if (options.policy_file.empty()) {
    return Workspace(workspace_path(options.workspace), default_workspace_policy(),
                     WorkspaceLimits{}, system_directory);
  }
  auto loaded = policy::load_policy_file(options.policy_file);
  if (!loaded) throw SandboxConfigError(loaded.error().to_string());
  // A user policy starts from the workspace defaults: its rules come first.
  ActionPolicy policy = default_workspace_policy();
  const auto& rules = loaded->rules();
  for (auto it = rules.rbegin(); it != rules.rend(); ++it)
    policy.add_rule(*it);
  for (ActionType action : kAllActionTypes) {
    if (auto decision = loaded->default_for(action)) policy.set_default(action, *decision);
  }
  return Workspace(workspace_path(options.workspace), std::move(policy), WorkspaceLimits{},
                   system_directory);
}

}  // namespace

Workspace open_workspace(const Options& options) {
  Workspace ws = open_workspace_with_policy(options);
  ws.set_audit_key(audit_key_location(options));  // commit points are sealed with it
  return ws;
}

std::vector<std::string> resolve_ids(const Workspace& ws, const std::vector<std::string>& ids,
                                     bool allow_damaged) {
  std::vector<std::string> out;
  for (const std::string& given : ids) {
    std::string id = given;
    if (given == "latest") {
      // The newest: ids hold their creation time only to the second, so
      // the creation stamp (to the microsecond) decides first. One
      // description held at a time.
      std::optional<std::pair<std::string, std::string>> newest;  // created, id
      ws.for_each_transaction([&](TransactionInfo&& info) {
        auto stamp = std::pair(std::move(info.created), std::move(info.id));
        if (!newest || *newest < stamp) newest = std::move(stamp);
      });
      if (!newest) {
        throw SandboxConfigError("latest: no pending transactions in " + ws.root().string());
      }
      id = newest->second;
    } else {
      try {
        (void)ws.describe(id);  // throws naming it when it is missing or damaged
      } catch (const SandboxError&) {
        std::error_code ec;
        const bool damaged =
            id.find('/') == std::string::npos && id.rfind("tx-", 0) == 0 &&
            std::filesystem::exists(ws.agent_dir() / "transactions" / id / "manifest.json", ec);
        if (!allow_damaged || !damaged) throw;
      }
    }
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  return out;
}

std::vector<std::string> checked_paths(const std::vector<std::string>& paths) {
  std::vector<std::string> out;
  for (const std::string& path : paths) {
    auto checked = workspace::check_relative_path(path);
    if (!checked) {
      throw SandboxConfigError("path argument " + core::quote_name(path) + ": " +
                               checked.error().message() +
                               " (paths are relative to the workspace root)");
    }
    out.push_back(std::move(checked).value());
  }
  return out;
}

bool selects(const std::vector<std::string>& filters, std::string_view path) {
  if (filters.empty()) return true;
  for (const std::string& filter : filters) {
    if (path == filter) return true;
    if (path.size() > filter.size() && path.substr(0, filter.size()) == filter &&
        path[filter.size()] == '/') {
      return true;
    }
  }
  return false;
}

std::vector<std::string> unmatched(const std::vector<std::string>& filters,
                                   const std::vector<StagedChange>& changes) {
  std::vector<std::string> out;
  for (const std::string& filter : filters) {
    const bool found = std::any_of(changes.begin(), changes.end(), [&](const StagedChange& c) {
      return selects({filter}, c.path);
    });
    if (!found) out.push_back(filter);
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> damaged_transactions(
    const Workspace& ws, const std::set<std::string>& listed) {
  std::vector<std::pair<std::string, std::string>> out;
  const auto dir = ws.agent_dir() / "transactions";
  std::error_code ec;
  const auto status = std::filesystem::symlink_status(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    throw SandboxError("cannot read " + dir.string() + ": " + ec.message() +
                       " (run as the workspace's owner)");
  }
  if (status.type() == std::filesystem::file_type::not_found) return out;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) {
    throw SandboxError("cannot read " + dir.string() + ": " + ec.message() +
                       " (run as the workspace's owner)");
  }
  std::vector<std::string> names;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  if (ec) throw SandboxError("cannot read " + dir.string() + ": " + ec.message());
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    if (listed.count(name) != 0) continue;
    // Without a manifest it is staging in progress, or what reconcile removes.
    if (!std::filesystem::exists(dir / name / "manifest.json", ec)) continue;
    try {
      (void)ws.describe(name);
    } catch (const SandboxError& error) {
      out.emplace_back(name, error.what());
    }
  }
  return out;
}

namespace {

// The type of `path` in the workspace, never following a symlink.
mode_t workspace_type(int root_fd, const std::string& path) {
  auto fd = workspace::open_beneath(root_fd, path, O_PATH | O_NOFOLLOW,
                                    workspace::ResolveMode::kComponentWalk);
  struct stat st {};
  if (!fd || ::fstat(fd->get(), &st) != 0) return 0;
  return st.st_mode & S_IFMT;
}

}  // namespace

Grouping::Grouping(const Workspace& ws)
    : root_(::open(ws.root().c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)) {
  if (!root_) throw SandboxError("cannot open the workspace " + ws.root().string());
  const int root_fd = root_.get();
  grouper_ = std::make_unique<workspace::ReviewGrouper>(
      workspace::workspace_ignore_rules(root_fd), [this, root_fd](const std::string& path) {
        if (current_ != nullptr) {
          for (const StagedChange& change : *current_) {
            if (change.path == path) return change.op == StagedOp::Write;
          }
        }
        return workspace_type(root_fd, path) == S_IFREG;
      });
}

std::vector<std::optional<workspace::ReviewGroup>> Grouping::of(const TransactionInfo& info) {
  current_ = &info.changes;
  std::vector<std::optional<workspace::ReviewGroup>> out;
  out.reserve(info.changes.size());
  for (const StagedChange& change : info.changes) {
    if (change.contains_secret) {
      out.emplace_back();
      continue;
    }
    const bool directory = change.op == StagedOp::Mkdir ||
                           (change.op != StagedOp::Write && change.op != StagedOp::Symlink &&
                            workspace_type(root_.get(), change.path) == S_IFDIR);
    out.push_back(grouper_->group_of(change.path, directory));
  }
  current_ = nullptr;
  return out;
}

std::vector<std::string> Grouping::take_warnings() {
  const auto& all = grouper_->rules().warnings();
  std::vector<std::string> out(all.begin() + static_cast<long>(warned_), all.end());
  warned_ = all.size();
  return out;
}

std::map<workspace::ReviewGroup, std::size_t> count_groups(
    const std::vector<std::optional<workspace::ReviewGroup>>& groups) {
  std::map<workspace::ReviewGroup, std::size_t> counts;
  for (const auto& group : groups) {
    if (group) ++counts[*group];
  }
  return counts;
}

Audit::Audit(const Workspace& ws, const Options& options)
    : uid_(static_cast<std::int64_t>(::getuid())) {
  AuditKeyLocation key = audit_key_location(options);
  const std::filesystem::path path = options.audit_log.empty()
                                         ? ws.agent_dir() / "logs" / "audit.jsonl"
                                         : std::filesystem::path(options.audit_log);
  log_ = std::make_unique<AuditLog>(path, &scrubber_, AuditLog::Options{.key = std::move(key)});
  if (const std::string& why = log_->key_warning(); !why.empty()) {
    print_error("warning: the audit log is not keyed: " + why +
                "; name a private file outside the workspace with PULSEBOX_AUDIT_KEY or "
                "--audit-key to key it");
  }
  // Not getpwuid(): in the static CLI glibc's NSS would load the host's modules.
  user_ =
      linux_api::user_name_in_passwd("/etc/passwd", static_cast<std::uint32_t>(uid_)).value_or("");
}

Audit::~Audit() = default;

void Audit::record(const std::string& action, const std::string& target, bool allowed,
                   const std::string& detail, const std::vector<std::string>& paths) {
  nlohmann::json names = nlohmann::json::array();
  for (const std::string& path : paths)
    names.push_back(core::escape_malformed_utf8(path));
  log_->record({.action = action,
                .target = target,
                .decision = allowed ? "allow" : "deny",
                .detail = detail,
                .extra = {{"uid", uid_},
                          {"user", user_},
                          {"paths", names.dump()},
                          {"path_count", static_cast<std::int64_t>(paths.size())}}});
}

nlohmann::json group_json(const std::optional<workspace::ReviewGroup>& group) {
  if (!group) return nullptr;
  nlohmann::json out = {{"reason", std::string(workspace::to_string(group->reason))}};
  core::put_name(out, "directory", group->directory);
  return out;
}

nlohmann::json groups_json(const std::map<workspace::ReviewGroup, std::size_t>& counts) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [group, count] : counts) {
    nlohmann::json item = group_json(group);
    item["count"] = count;
    out.push_back(std::move(item));
  }
  return out;
}

nlohmann::json path_object(const std::string& path) {
  nlohmann::json item = nlohmann::json::object();
  core::put_name(item, "path", path);
  return item;
}

nlohmann::json refused_json(const std::vector<RefusedChange>& refused) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& item : refused) {
    nlohmann::json entry = path_object(item.path);
    core::put_name(entry, "reason", item.reason);
    out.push_back(std::move(entry));
  }
  return out;
}

nlohmann::json path_list(const std::vector<std::string>& paths) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& path : paths)
    out.push_back(path_object(path));
  return out;
}

std::string one_line(const nlohmann::json& document) {
  return document.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void print_json(const nlohmann::json& document) {
  std::cout << one_line(document) << "\n";
}

JsonArrayPrinter::JsonArrayPrinter(const nlohmann::json& object, std::string_view key,
                                   bool nested) {
  if (!object.is_object() || object.contains(key)) {
    throw std::logic_error("JsonArrayPrinter: an object without \"" + std::string(key) + "\"");
  }
  nlohmann::json before = nlohmann::json::object();
  nlohmann::json after = nlohmann::json::object();
  for (const auto& [name, value] : object.items())
    (name < key ? before : after)[name] = value;
  std::string text = one_line(before);
  text.pop_back();  // its closing brace
  if (!before.empty()) text += ',';
  std::cout << text << one_line(nlohmann::json(std::string(key))) << ":[";
  closing_ = "]";
  if (!after.empty())
    closing_ += "," + one_line(after).substr(1);  // from after its opening brace
  else
    closing_ += "}";
  if (!nested) closing_ += "\n";
}

void JsonArrayPrinter::add(const nlohmann::json& element) {
  if (!first_) std::cout << ',';
  first_ = false;
  std::cout << one_line(element);
}

void JsonArrayPrinter::finish() {
  std::cout << closing_;
}

}  // namespace pulsebox::cli::review
