// What the review commands (changes, diff, commit, discard, reconcile) share:
// their options, the workspace they open, "latest" and path arguments, the
// grouping of noise, and the audit records of what they decide.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "core/unique_fd.h"
#include "pulsebox/audit.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "pulsebox/workspace.h"
#include "workspace/review_groups.h"

namespace pulsebox::cli::review {

struct Options {
  std::string workspace;           // "": found from the current directory (workspace_path)
  std::vector<std::string> ids;    // TX, "latest" (and held ids for discard)
  std::vector<std::string> paths;  // after "--", relative to the workspace
  std::string policy_file;
  std::string audit_log;
  std::string audit_key;
  bool json = false;
  bool all = false;
  bool stat = false;
  bool name_only = false;
  bool allow_secrets = false;
  bool allow_system_dir = false;
};

// Runs `body` and turns library exceptions into one-line errors (exit 125).
// (The library quotes the names of the sandbox's choosing in its messages.)
template <class Body>
int guarded(Body&& body) {
  try {
    return body();
  } catch (const SandboxError& error) {
    print_error(error.what());
    return kExitUsage;
  }
}

// The workspace a review command works on: `-w DIR` as given, else the
// nearest directory upwards holding .agent/ (as `run` finds it), else ".".
std::filesystem::path workspace_path(const std::string& given);

Workspace open_workspace(const Options& options);

// Where the native backend of this environment (PULSEBOX_STATE_DIR) keeps
// sessions' layers and held changes: records may name nothing else.
std::filesystem::path kept_dir();

// The ids named, in order, each once: "latest" is the newest pending
// transaction. Every one must exist (SandboxConfigError naming it); with
// `allow_damaged`, one whose manifest cannot be read counts (discard).
std::vector<std::string> resolve_ids(const Workspace& ws, const std::vector<std::string>& ids,
                                     bool allow_damaged = false);

// The path arguments checked and normalised ("./src/" -> "src"); a bad one
// is a SandboxConfigError naming it.
std::vector<std::string> checked_paths(const std::vector<std::string>& paths);
// Whether a path argument selects `path`: itself or anything beneath it.
bool selects(const std::vector<std::string>& filters, std::string_view path);
// The filters that select nothing in `changes` (to name them in an error).
std::vector<std::string> unmatched(const std::vector<std::string>& filters,
                                   const std::vector<StagedChange>& changes);

// Transactions with a manifest that are not among the `listed` ids because
// it cannot be read (damaged), with why; an unreadable transaction
// directory (permissions) throws SandboxError.
std::vector<std::pair<std::string, std::string>> damaged_transactions(
    const Workspace& ws, const std::set<std::string>& listed);

// The review groups of a transaction's paths (workspace/review_groups.h),
// from the workspace's own .gitignore files.
class Grouping {
 public:
  explicit Grouping(const Workspace& ws);
  // Each change's group (nullopt: shown on its own), in the order given.
  // A change holding a secret is never grouped.
  std::vector<std::optional<workspace::ReviewGroup>> of(const TransactionInfo& info);
  // Why a .gitignore could not be read, once each.
  std::vector<std::string> take_warnings();

 private:
  core::UniqueFd root_;
  const std::vector<StagedChange>* current_ = nullptr;  // the transaction being grouped
  std::unique_ptr<workspace::ReviewGrouper> grouper_;
  std::size_t warned_ = 0;
};

// A path's review group as JSON ({"reason", "directory"}), null for none.
nlohmann::json group_json(const std::optional<workspace::ReviewGroup>& group);
// Counts per group as a JSON array of group_json objects with "count".
nlohmann::json groups_json(const std::map<workspace::ReviewGroup, std::size_t>& counts);

// Counts per group, in order of directory.
std::map<workspace::ReviewGroup, std::size_t> count_groups(
    const std::vector<std::optional<workspace::ReviewGroup>>& groups);

// A session's net changes as the transaction its commit would make
// (session_transaction), for the time of a review: discarded when this
// ends, however it ends (a transaction left behind would hold links to the
// session's files, which the next review could then not share).
struct SessionReview {
  SessionReview(Workspace& workspace, const std::string& name);
  ~SessionReview();
  SessionReview(const SessionReview&) = delete;
  SessionReview& operator=(const SessionReview&) = delete;

  Workspace& ws;
  std::optional<std::string> transaction;  // nullopt: the session changed nothing
  std::vector<RefusedChange> refused;
};

// Appends the review commands' records to the workspace's audit log (the
// one `pulsebox run` writes, with the same key): who (uid, user name),
// what (the ids, the paths) and the result. Opened before anything is
// changed, so an action that cannot be audited is not done.
class Audit {
 public:
  Audit(const Workspace& ws, const Options& options);
  ~Audit();
  void record(const std::string& action, const std::string& target, bool allowed,
              const std::string& detail, const std::vector<std::string>& paths = {});

 private:
  SecretScrubber scrubber_;
  std::unique_ptr<AuditLog> log_;
  std::int64_t uid_;
  std::string user_;
};

// JSON helpers: a name exactly (core::put_name), a list of names as
// [{"path": ...}], and a document printed on one line.
nlohmann::json path_object(const std::string& path);
// Paths left out of a transaction: [{"path", "reason"}].
nlohmann::json refused_json(const std::vector<RefusedChange>& refused);
nlohmann::json path_list(const std::vector<std::string>& paths);
void print_json(const nlohmann::json& document);
// The text print_json prints, without its newline.
std::string one_line(const nlohmann::json& document);

// A document printed as print_json prints it, with its array under `key`
// printed one element at a time, so its elements are never all held as
// JSON. `object` holds every other member: nlohmann keeps an object's keys
// sorted, so those before `key` are printed first and the rest by finish()
// (std::logic_error if `object` has `key` itself). Call add() per element,
// then finish(). `nested`: the object is an element the caller prints
// inside a larger document (no newline after it).
class JsonArrayPrinter {
 public:
  JsonArrayPrinter(const nlohmann::json& object, std::string_view key, bool nested = false);
  void add(const nlohmann::json& element);
  void finish();

 private:
  std::string closing_;  // the array's end, the members after `key`, the object's end
  bool first_ = true;
};

}  // namespace pulsebox::cli::review
