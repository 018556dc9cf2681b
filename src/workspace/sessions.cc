// Sessions (include/pulsebox/session.h): names, listing, review and commit.

#include <nlohmann/json.hpp>

#include "core/byte_names.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/error.h"
#include "workspace/session_store.h"

namespace pulsebox {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;

using workspace::OpenSession;

namespace workspace {
// Workspace::commit_ending_layer() is private: only the commit of a whole
// session, which ends its layer, may move the layer's files in.
struct SessionCommitAccess {
  static std::vector<std::string> commit_ending_layer(Workspace& ws, const std::string& tx,
                                                      bool allow_secrets) {
    return ws.commit_ending_layer(tx, allow_secrets);
  }
};
}  // namespace workspace

std::string check_session_name(const std::string& name) {
  if (name.empty() || name.size() > 64) return "a session name has 1 to 64 characters";
  if (name.front() == '.' || name.front() == '-') {
    return "a session name may not start with '.' or '-': \"" + name + "\"";
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return "a session name holds only letters, digits, '.', '_' and '-': " +
             core::quote_name(name);
    }
  }
  return "";
}

std::vector<SessionInfo> list_sessions(const Workspace& ws, const fs::path& kept_dir) {
  std::vector<SessionInfo> sessions;
  for (const auto& file : workspace::record_files(ws.agent_dir() / "sessions")) {
    SessionInfo info;
    info.name = file.stem().string();
    if (const std::string problem = check_session_name(info.name); !problem.empty()) {
      info.damaged = "not a session's record: " + problem;
      sessions.push_back(std::move(info));
      continue;
    }
    std::filesystem::path storage;
    std::uint64_t next = 0;
    auto document = workspace::read_record(file);
    const bool removing = document && workspace::record_says_removing(*document);
    core::Status parsed =
        !document  ? core::Status(std::move(document).error())
        : removing ? core::ok_status()
                   : workspace::parse_session(*document, info, storage, next, nullptr, kept_dir);
    if (!parsed) {
      info.damaged = parsed.error().to_string();
    } else if (info.committing || removing) {
      // A commit or a removal a crash interrupted: opening the session
      // finishes (or undoes) it.
      auto opened = OpenSession::open(const_cast<Workspace&>(ws), info.name, kept_dir, false);
      if (!opened) {
        if (!std::filesystem::exists(file)) continue;  // finished: the session ended
        info.damaged = opened.error().to_string();
      } else if (!opened->exists()) {
        continue;
      } else {
        info = opened->info();
      }
    }
    sessions.push_back(std::move(info));
  }
  return sessions;
}

SessionInfo describe_session(const Workspace& ws, const std::string& name,
                             const fs::path& kept_dir) {
  auto session =
      core::value_or_throw(OpenSession::open(const_cast<Workspace&>(ws), name, kept_dir, false));
  return session.info();
}

ImportResult session_transaction(Workspace& ws, const std::string& name, const fs::path& kept_dir,
                                 const ImportOptions& options) {
  auto session = core::value_or_throw(OpenSession::open(ws, name, kept_dir, false));
  core::check_or_throw(session.collapse());
  if (session.info().layers.empty()) return {};
  ImportOptions import = options;
  import.known_secrets = session.known_secrets();
  import.known_secret_links = session.known_secret_links();
  import.known_secret_names = session.known_secret_names();
  import.known_bases = session.known_bases();
  import.withhold_unknown_bases = session.bases_incomplete();
  import.origin = "session " + name;
  import.run_started = workspace::from_ns(session.info().base_stamp_ns);
  import.take_upper_files = false;  // the layer is kept: never its files
  import.share_upper_files = true;  // a review: no copy of the layer's bytes
  return ws.import_overlay(session.info().layers.front(), ws.root(), import);
}

SessionCommitResult commit_session(Workspace& ws, const std::string& name, const fs::path& kept_dir,
                                   const CommitOptions& options, const ImportOptions& import) {
  auto session = core::value_or_throw(OpenSession::open(ws, name, kept_dir, false));
  core::check_or_throw(session.collapse());
  SessionCommitResult result;
  if (session.info().layers.empty()) {
    core::check_or_throw(session.remove(OpenSession::StorageRemoval::kNamedByTheUser));
    return result;
  }
  ImportOptions from_session = import;
  from_session.known_secrets = session.known_secrets();
  from_session.known_secret_links = session.known_secret_links();
  from_session.known_secret_names = session.known_secret_names();
  from_session.known_bases = session.known_bases();
  from_session.withhold_unknown_bases = session.bases_incomplete();
  from_session.origin = "session " + name;
  from_session.run_started = workspace::from_ns(session.info().base_stamp_ns);
  from_session.take_upper_files = false;  // the layer is kept until the commit is done
  from_session.share_upper_files = true;  // its files linked as the blobs, not copied
  ImportResult imported = ws.import_overlay(session.info().layers.front(), ws.root(), from_session);
  result.refused = imported.refused;
  result.transaction = imported.transaction;
  if (!imported.transaction) {
    if (imported.refused.empty())
      core::check_or_throw(session.remove(OpenSession::StorageRemoval::kNamedByTheUser));
    return result;
  }
  const std::string tx = *imported.transaction;
  // A session with a refused change keeps it, and lives on.
  const bool ends = imported.refused.empty();
  // The whole session committed ends it: its layer's files become the
  // workspace's. A session that lives on gets copies, so that no file of
  // its layer is ever the workspace's.
  // Not the files of storage a copy's original still uses.
  const bool layer_moves_in = ends && options.paths.empty() && !session.storage_used_elsewhere();
  session.claim_unstated_storage();
  session.set_committing(tx, ends);
  core::check_or_throw(session.save());
  try {
    result.committed = layer_moves_in ? workspace::SessionCommitAccess::commit_ending_layer(
                                            ws, tx, options.allow_secrets)
                                      : ws.commit(tx, options);
  } catch (...) {
    switch (workspace::commit_state(ws, tx)) {
      case workspace::CommitState::kDecided:
      case workspace::CommitState::kCommitted:
      case workspace::CommitState::kUnreadable:
        // The record keeps naming the commit: the next operation on the
        // workspace finishes it, the session's next opening ends or keeps
        // the session (recover).
        throw;
      case workspace::CommitState::kUnknown:
        // Gone without its marker (discarded by another process, or its
        // clean-up failed): the session stays, sharing nothing.
        if (layer_moves_in) (void)session.keep_after_unknown_commit();
        throw;
      case workspace::CommitState::kUndoable:
        break;
    }
    session.set_committing(std::nullopt);
    // A record that cannot say so keeps the transaction: discarded, it
    // would read as a commit whose outcome is unknown.
    if (!session.save()) throw;
    try {
      ws.discard(tx);
    } catch (const SandboxError&) {
      // the transaction stays pending, listed by `pulsebox changes`
    }
    throw;
  }
  if (ends) {
    core::check_or_throw(session.remove(OpenSession::StorageRemoval::kNamedByTheUser));
  } else {
    session.set_committing(std::nullopt);
    core::check_or_throw(session.save());
  }
  // What a moved-in commit leaves of its transaction, once the session has
  // ended. (A crash just before leaves it behind, an empty file that
  // nothing lists: reconcile removes a marker no session record names.)
  if (layer_moves_in) workspace::remove_commit_marker(ws, tx);
  return result;
}

void discard_session(Workspace& ws, const std::string& name, const fs::path& kept_dir) {
  // Opened without recovery and with missing layers allowed: neither an
  // interrupted commit that can be neither finished nor undone (its
  // directory unreadable, its seal refused) nor layers removed by hand may
  // keep the user from throwing the session away. A removal a crash
  // interrupted is finished by the opening itself: done.
  const fs::path record = workspace::record_path(ws, name);
  auto document = workspace::read_record(record);
  const bool was_being_removed = document && workspace::record_says_removing(*document);
  auto opened = OpenSession::open(ws, name, kept_dir, /*create=*/false, /*recover=*/false,
                                  /*layers_may_be_missing=*/true);
  if (!opened && was_being_removed && !fs::exists(record)) return;
  auto session = core::value_or_throw(std::move(opened));
  core::check_or_throw(session.remove(OpenSession::StorageRemoval::kNamedByTheUser));
}

}  // namespace pulsebox
