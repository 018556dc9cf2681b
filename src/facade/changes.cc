// Sandbox::execute's fifth stage: what becomes of a run's workspace
// changes. A transaction (kept, committed or discarded as ChangesMode
// says), the session's next layer, or held changes: never dropped, and
// ProcessResult::changes_status says which.
#include <string>
#include <vector>

#include "audit/chain.h"
#include "core/text.h"
#include "facade/run_state.h"
#include "pulsebox/error.h"
#include "pulsebox/session.h"
#include "workspace/layers.h"
#include "workspace/owner_opened.h"

namespace pulsebox {

// 5. The run's workspace changes become a transaction (then committed or
// discarded as ChangesMode says). What cannot be imported is said in the
// result and the audit log.
void Sandbox::import_changes(Run& run, ProcessResult& result) {
  const ExecutionOutcome& outcome = run.outcome;
  if (!outcome.changes_dir) return;
  workspace::open_run_directory_to_owner(*outcome.changes_dir);  // `chmod 000 .`, rootless
  if (run.session) {
    add_to_session(run, result);
    return;
  }
  ChangesStatus& status = result.changes_status;
  ImportOptions import;
  import.origin = run.id + ": " + run.command;
  import.run_started = run.started;
  import.secrets = &scrubber_;
  // The run's upper directory is removed after this (or kept whole as held
  // changes when the import fails).
  import.take_upper_files = true;
  ImportResult imported;
  try {
    imported = outcome.changes_dir_is_full_copy
                   ? workspace_.import_copy(*outcome.changes_dir, import)
                   : workspace_.import_overlay(*outcome.changes_dir, options_.workspace, import);
  } catch (const SandboxError& error) {
    if (options_.changes == ChangesMode::Discard) {
      status.outcome = ChangesOutcome::Discarded;
      status.detail = error.what();
      return;
    }
    hold_changes(run, result, std::string("the changes could not be staged: ") + error.what(), {},
                 std::nullopt);
    return;
  }
  for (const auto& note : imported.notes)
    status.notes.push_back({note.path, note.note});
  if (imported.transaction) {
    const std::string& tx = *imported.transaction;
    result.transaction_id = tx;
    status.outcome = ChangesOutcome::Staged;
    result.changes.reserve(imported.staged.size());
    for (auto& change : imported.staged)
      result.changes.push_back({std::move(change.path), change.kind});
    imported.staged = {};
    status.contains_secrets = imported.contains_secrets;
    audit_->record({.action = "changes-staged",
                    .target = tx,
                    .decision = "allow",
                    .isolation_level = run.level,
                    .detail = std::to_string(result.changes.size()) + " changes from " + run.id});
    if (imported.contains_secrets) {
      audit_->record({.action = "changes-secret",
                      .target = tx,
                      .decision = "deny",
                      .isolation_level = run.level,
                      .detail = "a staged change holds a registered secret value; commit "
                                "refuses it unless allowed explicitly"});
    }
  }
  if (!imported.refused.empty() && options_.changes != ChangesMode::Discard) {
    std::vector<PathReason> refused;
    for (const auto& item : imported.refused)
      refused.push_back({item.path, item.reason});
    const std::string reason = std::to_string(refused.size()) +
                               (refused.size() == 1 ? " path" : " paths") + " could not be staged";
    hold_changes(run, result, reason, std::move(refused), imported.transaction);
  }
  if (!imported.transaction) return;
  const std::string tx = *imported.transaction;
  if (options_.changes == ChangesMode::Commit) {
    try {
      commit_transaction(tx);
      if (status.outcome == ChangesOutcome::Staged) status.outcome = ChangesOutcome::Committed;
    } catch (const SandboxError& error) {
      status.outcome = ChangesOutcome::Conflict;
      status.detail = "changes kept as " + tx + ", not committed: " + error.what();
      append_detail(result, status.detail);
    }
  } else if (options_.changes == ChangesMode::Discard) {
    discard_transaction(tx);
    status.outcome = ChangesOutcome::Discarded;
  }
}

// A session run: the run's upper directory becomes the session's top layer.
void Sandbox::open_session(Run& run, ExecutionRequest& request) {
  const auto kept = backend_->kept_changes_dir();
  if (!kept) {
    run.deny("session", "the " + run.backend_name + " backend cannot keep a session");
    run.refuse(SandboxConfigError("session " + options_.session + ": the " + run.backend_name +
                                      " backend cannot keep a session's layers; use the "
                                      "native backend",
                                  0, "session"));
  }
  auto opened = workspace::OpenSession::open(workspace_, options_.session, *kept, true);
  if (!opened) {
    run.deny("session", opened.error().to_string());
    run.refuse(SandboxConfigError("session " + options_.session + ": " + opened.error().to_string(),
                                  0, "session"));
  }
  run.session.emplace(std::move(opened).value());
  request.lower_layers = run.session->info().layers;
}

void Sandbox::add_to_session(Run& run, ProcessResult& result) {
  ChangesStatus& status = result.changes_status;
  auto added = run.session->add_run(*run.outcome.changes_dir, &scrubber_);
  if (!added) {
    hold_changes(
        run, result,
        "adding the run to session " + options_.session + " failed: " + added.error().to_string(),
        {}, std::nullopt);
    return;
  }
  result.changes = std::move(added).value();
  status.outcome = ChangesOutcome::Session;
  status.contains_secrets = !run.session->info().secret_paths.empty();
  status.session = options_.session;
  audit_->record({.action = "session-run",
                  .target = options_.session,
                  .decision = "allow",
                  .isolation_level = run.level,
                  .detail = std::to_string(result.changes.size()) + " changes from " + run.id +
                            " added to the session (" +
                            std::to_string(run.session->info().layers.size()) + " layer(s))"});
}

// Changes that cannot (all) be staged stay on disk, recorded as held, until
// the user discards them: never dropped.
void Sandbox::hold_changes(Run& run, ProcessResult& result, const std::string& reason,
                           std::vector<PathReason> refused,
                           std::optional<std::string> transaction) {
  ChangesStatus& status = result.changes_status;
  status.outcome = ChangesOutcome::Held;
  status.refused = std::move(refused);
  status.detail = reason;
  const auto kept = backend_->kept_changes_dir();
  std::string id = "held-" + run.id;
  if (id.size() > 100 ||
      id.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
    id = "held-" + core::random_hex(16);
  }
  std::string kept_detail;
  if (!kept) {
    kept_detail = "the " + run.backend_name + " backend cannot keep them: they are lost";
  } else if (auto moved = workspace::move_layer(*run.outcome.changes_dir, *kept / id); !moved) {
    kept_detail =
        "keeping them in " + (*kept / id).string() + " failed: " + moved.error().to_string();
  } else {
    HeldChanges held{.id = id,
                     .created = audit::utc_timestamp(),
                     .origin = run.id + ": " + run.command,
                     .reason = reason,
                     .location = *kept / id,
                     .transaction = transaction};
    for (const auto& item : status.refused)
      held.refused.push_back({item.path, item.reason});
    try {
      record_held(workspace_, held);
      status.held_id = id;
      kept_detail = "kept as " + id + " in " + held.location.string();
    } catch (const SandboxError& error) {
      kept_detail =
          "kept in " + held.location.string() + ", but recording it failed: " + error.what();
    }
  }
  status.detail += "; " + kept_detail;
  std::string paths;
  for (const auto& item : status.refused)
    paths += (paths.empty() ? "" : ", ") + core::quote_name(item.path) + " (" + item.reason + ")";
  audit_->record({.action = "changes-held",
                  .target = status.held_id.value_or(run.id),
                  .decision = "deny",
                  .isolation_level = run.level,
                  .detail = status.detail + (paths.empty() ? "" : ": " + paths)});
}

}  // namespace pulsebox
