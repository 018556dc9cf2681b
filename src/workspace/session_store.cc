// An open session (session_store.h): its record under .agent/sessions/,
// its lock, its layers, recovery of an interrupted commit; and the record
// helpers sessions.cc and held.cc share.
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <utility>

#include "audit/chain.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/text.h"
#include "core/throw_error.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "workspace/layers.h"
#include "workspace/session_storage.h"
#include "workspace/session_store.h"
#include "workspace/store_files.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

// Changes listed in a session run's result; the session's review lists all.
constexpr std::size_t kMaxRunChanges = 10000;

std::int64_t to_ns(Workspace::RunClock time) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(time.time_since_epoch()).count();
}

}  // namespace

core::Status ensure_agent_subdir(const Workspace& ws, const char* name) {
  const fs::path agent = ws.agent_dir();
  struct stat st {};
  if (::lstat(agent.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "session",
                 agent.string() + " is not a directory (a symlink?); refusing to use it");
  }
  ::mkdir(agent.c_str(), 0700);
  const fs::path dir = agent / name;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error::from_errno("session", "creating " + dir.string());
  }
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "session",
                 dir.string() + " is not a directory (a symlink?); refusing to use it");
  }
  return core::ok_status();
}

core::Result<json> read_record(const fs::path& file) {
  PB_TRY(text, core::read_regular_file(file, kMaxRecordBytes, "session record"));
  return core::parse_json(text, file.string());
}

Workspace::RunClock from_ns(std::int64_t ns) {
  return Workspace::RunClock(
      std::chrono::duration_cast<Workspace::RunClock::duration>(std::chrono::nanoseconds(ns)));
}

fs::path record_path(const Workspace& ws, const std::string& name) {
  return ws.agent_dir() / "sessions" / (name + ".json");
}

// Reads a session record; `storage` and `next_layer` are only for OpenSession.
core::Status parse_session(const json& document, SessionInfo& info, fs::path& storage,
                           std::uint64_t& next_layer, SessionSecrets* secrets,
                           const fs::path& kept_dir, bool layers_may_be_missing) {
  const std::string expected_name = info.name;
  try {
    info.name = document.at("name").get<std::string>();
    info.created = document.at("created").get<std::string>();
    info.last_run = document.value("last_run", "");
    info.runs = document.at("runs").get<std::uint64_t>();
    info.base_stamp_ns = document.at("base_stamp_ns").get<std::int64_t>();
    storage = document.at("storage").get<std::string>();
    next_layer = document.at("next_layer").get<std::uint64_t>();
    info.layers.clear();
    for (const auto& layer : document.at("layers")) {
      const std::string leaf = layer.get<std::string>();
      if (leaf.empty() || leaf.find_first_not_of("0123456789") != std::string::npos) {
        return Error(ErrorKind::kInvalidInput, "session", "a layer name is not a number");
      }
      info.layers.push_back(storage / leaf);
    }
    if (document.contains("committing") && document["committing"].is_string()) {
      info.committing = document["committing"].get<std::string>();
      // Joined to the transactions directory and removed from it: a name
      // of that directory's own, never a path (a planted record).
      if (!is_transaction_id(*info.committing)) {
        return Error(
            ErrorKind::kSecurity, "session",
            "the commit it names is not a transaction id: " + core::quote_name(*info.committing));
      }
    }
    std::set<std::string> marked;
    // Marks with a redacted copy: a file's ("secrets") or a link's.
    for (const auto& [key, copies] :
         {std::pair{"secrets", secrets == nullptr ? nullptr : &secrets->written},
          std::pair{"secret_links", secrets == nullptr ? nullptr : &secrets->links}}) {
      if (!document.contains(key)) continue;
      for (const auto& item : document[key]) {
        const std::string file = item.at("redacted").get<std::string>();
        if (file.empty() || file.find_first_not_of("0123456789") != std::string::npos) {
          return Error(ErrorKind::kInvalidInput, "session",
                       "a redacted copy's name is not a number");
        }
        const std::string path = core::get_name(item, "path");
        marked.insert(path);
        if (copies != nullptr) (*copies)[path] = file;
      }
    }
    if (document.contains("secret_names")) {
      for (const auto& item : document["secret_names"]) {
        const std::string path = core::get_name(item, "path");
        marked.insert(path);
        if (secrets != nullptr) secrets->named.insert(path);
      }
    }
    info.secret_paths.assign(marked.begin(), marked.end());
    if (document.contains("secret_unchecked")) {
      for (const auto& item : document["secret_unchecked"]) {
        std::string path = core::get_name(item, "path");
        if (secrets != nullptr) secrets->unchecked.insert(std::move(path));
      }
    }
    // null: no mark held. Else a key and an array of fingerprints, each 64
    // hex digits: anything else is a damaged record, never "no values".
    if (document.contains("secret_values") && !document["secret_values"].is_null()) {
      const json& values = document["secret_values"];
      const auto is_hex = [](const json& text) {
        return text.is_string() && text.get_ref<const std::string&>().size() == 64 &&
               text.get_ref<const std::string&>().find_first_not_of("0123456789abcdef") ==
                   std::string::npos;
      };
      if (!values.is_object() || !values.contains("key") || !is_hex(values["key"]) ||
          !values.contains("fingerprints") || !values["fingerprints"].is_array() ||
          !std::ranges::all_of(values["fingerprints"], is_hex)) {
        return Error(ErrorKind::kInvalidInput, "session",
                     "secret_values is malformed: a key and fingerprints of 64 hex digits each");
      }
      if (secrets != nullptr) {
        secrets->value_key = values["key"].get<std::string>();
        for (const auto& fingerprint : values["fingerprints"])
          secrets->value_fingerprints.insert(fingerprint.get<std::string>());
      }
    }
    if (secrets != nullptr)
      secrets->bases_incomplete = document.value("secret_bases_incomplete", false);
    if (document.contains("secret_bases")) {
      for (const auto& item : document["secret_bases"]) {
        SessionSecrets::Base base{item.at("redacted").get<std::string>(),
                                  item.at("sha256").get<std::string>(),
                                  item.value("subtree", false)};
        if (base.redacted.find_first_not_of("0123456789") != std::string::npos ||
            (base.sha256.size() != 64 && !(base.sha256.empty() && base.redacted.empty())) ||
            (base.subtree && !base.redacted.empty()) ||
            base.sha256.find_first_not_of("0123456789abcdef") != std::string::npos) {
          return Error(ErrorKind::kInvalidInput, "session",
                       "a secret base's redacted copy or sha256 is malformed");
        }
        std::string path = core::get_name(item, "path");
        if (secrets != nullptr) secrets->bases[std::move(path)] = std::move(base);
      }
    }
  } catch (const json::exception& error) {
    return Error(ErrorKind::kInvalidInput, "session", error.what());
  }
  if (!expected_name.empty() && info.name != expected_name) {
    return Error(ErrorKind::kInvalidInput, "session",
                 "the record names another session: " + core::quote_name(info.name));
  }
  PB_CHECK(check_kept_location(storage, "session-", kept_dir));
  // Each layer is a directory of the session's own, never a symlink.
  for (const auto& layer : info.layers) {
    struct stat st {};
    const bool found = ::lstat(layer.c_str(), &st) == 0;
    if (!found && errno == ENOENT) {
      if (layers_may_be_missing) continue;
      return Error(ErrorKind::kInvalidInput, "session",
                   "layer " + core::quote_name(layer.string()) +
                       " is missing (removed by hand?); `pulsebox session discard " + info.name +
                       "` removes what is left of the session");
    }
    if (!found) {
      return Error::from_errno("session",
                               "layer " + core::quote_name(layer.string()) + " cannot be read");
    }
    if (!S_ISDIR(st.st_mode) || S_ISLNK(st.st_mode)) {
      return Error(ErrorKind::kSecurity, "session",
                   "layer " + core::quote_name(layer.string()) + " is not a directory");
    }
  }
  return core::ok_status();
}

// The JSON files of an .agent/ subdirectory. A directory that exists but
// cannot be read is an error, never an empty list.
std::vector<fs::path> record_files(const fs::path& dir) {
  std::vector<fs::path> files;
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      // .agent itself may be unreadable: say so rather than "none".
      if (::access(dir.parent_path().c_str(), R_OK | X_OK) != 0 && errno == EACCES) {
        core::throw_error(Error::from_errno("session", "reading " + dir.parent_path().string())
                              .with_kind(ErrorKind::kInvalidInput));
      }
      return files;
    }
    core::throw_error(Error::from_errno("session", "reading " + dir.string())
                          .with_kind(ErrorKind::kInvalidInput));
  }
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    if (it->path().extension() == ".json") files.push_back(it->path());
  }
  if (ec) {
    core::throw_error(Error(ErrorKind::kInvalidInput, "session",
                            "reading " + dir.string() + ": " + ec.message(), ec.value()));
  }
  std::sort(files.begin(), files.end());
  return files;
}

core::Status check_kept_location(const fs::path& location, std::string_view prefix,
                                 const fs::path& kept_dir) {
  auto refuse = [&](const std::string& why) {
    return Error(ErrorKind::kSecurity, "session",
                 "refusing the kept directory " + core::quote_name(location.string()) + ": " + why);
  };
  if (!location.is_absolute() || location.lexically_normal() != location) {
    return refuse("not an absolute, normal path");
  }
  // Only pulsebox's own kept directory: a repository can ship a kept/ of
  // its own, owned by the user who cloned it.
  if (!location.filename().string().starts_with(prefix) ||
      location.parent_path() != kept_dir.lexically_normal()) {
    return refuse("not a directory pulsebox keeps (in " + kept_dir.string() + ")");
  }
  struct stat st {};
  if (::lstat(kept_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() ||
      (st.st_mode & 022) != 0) {
    return refuse(kept_dir.string() + " is not a private directory of the current user");
  }
  if (::lstat(location.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return refuse("not a directory (a symlink?)");
  }
  return core::ok_status();
}

bool record_says_removing(const json& document) {
  const auto removing = document.find("removing");
  return removing != document.end() && removing->is_boolean() && removing->get<bool>();
}

namespace {

// What an interrupted OpenSession::remove() left: the storage the record
// names, when it says it is this session's (a record copied or planted in
// another workspace, or under another name, removes nothing), then the
// record.
core::Status finish_removal(const Workspace& ws, const std::string& name, const json& document,
                            const fs::path& record, const fs::path& kept_dir) {
  const auto storage = document.find("storage");
  if (storage != document.end() && storage->is_string()) {
    const fs::path location = storage->get<std::string>();
    if (check_kept_location(location, "session-", kept_dir).ok() &&
        storage_owner(location, owner_stamp(ws, name)) == StorageOwner::kThisSession) {
      PB_CHECK(remove_storage(location));
    }
  }
  if (::unlink(record.c_str()) != 0 && errno != ENOENT) {
    return Error::from_errno("session", "removing " + record.string());
  }
  return core::ok_status();
}

}  // namespace

core::Result<OpenSession> OpenSession::open(Workspace& ws, const std::string& name,
                                            const fs::path& kept_dir, bool create, bool recover,
                                            bool layers_may_be_missing) {
  if (const std::string problem = check_session_name(name); !problem.empty()) {
    return Error(ErrorKind::kInvalidInput, "session", problem);
  }
  PB_CHECK(ensure_agent_subdir(ws, "sessions"));
  const fs::path lock_path = ws.agent_dir() / "sessions" / (name + ".lock");
  UniqueFd lock(::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock) return Error::from_errno("session", "open " + lock_path.string());
  while (::flock(lock.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Error::from_errno("session", "lock " + lock_path.string());
  }
  OpenSession session(ws, name, std::move(lock));
  const fs::path record = record_path(ws, name);
  struct stat st {};
  std::optional<json> document;
  if (::lstat(record.c_str(), &st) == 0) {
    PB_TRY(read, read_record(record));
    document = std::move(read);
    if (record_says_removing(*document)) {
      if (auto finished = finish_removal(ws, name, *document, record, kept_dir); !finished) {
        return std::move(finished).error().with_context("session " + name);
      }
      document.reset();  // as if the removal had run whole
    }
  }
  if (document) {
    session.info_.name = name;
    auto parsed = parse_session(*document, session.info_, session.storage_, session.next_layer_,
                                &session.secrets_, kept_dir, layers_may_be_missing);
    if (!parsed) {
      return std::move(parsed).error().with_context("session " + name + " (" + record.string() +
                                                    ")");
    }
    session.exists_ = true;
    // Older records lack it: their commits always ended the session.
    const auto ends = document->find("commit_ends_session");
    session.commit_ends_session_ =
        ends == document->end() || !ends->is_boolean() || ends->get<bool>();
    if (recover) PB_CHECK(session.recover());
    return session;
  }
  if (!create) {
    return Error(
        ErrorKind::kInvalidInput, "session",
        "no session \"" + name + "\" in " + ws.root().string() + " (see `pulsebox session list`)");
  }
  PB_CHECK(check_kept_location(kept_dir / "session-new", "session-", kept_dir));
  session.storage_ = kept_dir / ("session-" + core::random_hex(12));
  if (::mkdir(session.storage_.c_str(), 0711) != 0) {
    return Error::from_errno("session", "creating " + session.storage_.string());
  }
  PB_CHECK(write_owner(session.storage_, owner_stamp(ws, name)));
  session.info_.name = name;
  session.info_.created = audit::utc_timestamp();
  // The conflict check of the session's commit is against the workspace
  // as it is now.
  session.info_.base_stamp_ns = to_ns(ws.stamp_now());
  PB_CHECK(session.save());
  session.exists_ = true;
  return session;
}

core::Status OpenSession::save() {
  json layers = json::array();
  for (const auto& layer : info_.layers)
    layers.push_back(layer.filename().string());
  const json document = {{"version", 1},
                         {"name", info_.name},
                         {"created", info_.created},
                         {"last_run", info_.last_run},
                         {"runs", info_.runs},
                         {"base_stamp_ns", info_.base_stamp_ns},
                         {"storage", storage_.string()},
                         {"next_layer", next_layer_},
                         {"layers", std::move(layers)},
                         {"committing", info_.committing ? json(*info_.committing) : json(nullptr)},
                         {"commit_ends_session", commit_ends_session_},
                         {"removing", removing_},
                         {"secrets", secrets_json()},
                         {"secret_links", secret_links_json()},
                         {"secret_bases", secret_bases_json()},
                         {"secret_names", secret_names_json()},
                         {"secret_unchecked", secret_unchecked_json()},
                         {"secret_values", secret_values_json()},
                         {"secret_bases_incomplete", secrets_.bases_incomplete}};
  return core::write_file_atomic(record_path(*workspace_, name_), document.dump(2) + "\n", 0600);
}

CommitState commit_state(const Workspace& workspace, const std::string& tx) {
  if (!is_transaction_id(tx)) return CommitState::kUnreadable;
  const fs::path dir = workspace.agent_dir() / "transactions" / tx;
  bool unreadable = false;
  const auto present = [&dir, &unreadable](const char* name) {
    struct stat st {};
    if (::lstat((dir / name).c_str(), &st) == 0) return true;
    unreadable = unreadable || errno != ENOENT;
    return false;
  };
  // The manifest before the marker: the two are never there together, and
  // a marker beside a manifest must not make an undecided commit read as
  // made.
  const bool ready = present("READY");
  const bool manifest = present("manifest.json");
  const bool marker = present(kCommittedMarker);
  if (unreadable) return CommitState::kUnreadable;
  if (ready) return CommitState::kDecided;
  if (manifest) return CommitState::kUndoable;
  if (marker) return CommitState::kCommitted;
  return CommitState::kUnknown;
}

void remove_commit_marker(const Workspace& workspace, const std::string& tx) {
  if (!is_transaction_id(tx)) return;
  // The marker file, then the directory if that left it empty: never more.
  UniqueFd transactions(::open((workspace.agent_dir() / "transactions").c_str(),
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!transactions) return;
  UniqueFd dir(
      ::openat(transactions.get(), tx.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!dir) return;
  struct stat st {};
  if (::fstatat(dir.get(), kCommittedMarker, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
    ::unlinkat(dir.get(), kCommittedMarker, 0);
  ::unlinkat(transactions.get(), tx.c_str(), AT_REMOVEDIR);
}

core::Status check_no_session_commits(const Workspace& workspace, const std::string& tx) {
  std::vector<fs::path> files;
  // Records are read only from a directory of its own, as sessions are
  // opened (ensure_agent_subdir): never through a symlink.
  struct stat dir_st {};
  const fs::path sessions = workspace.agent_dir() / "sessions";
  if (::lstat(sessions.c_str(), &dir_st) != 0 || !S_ISDIR(dir_st.st_mode)) return core::ok_status();
  try {
    files = record_files(sessions);
  } catch (const SandboxError&) {
    return core::ok_status();  // no session can be opened there either
  }
  for (const auto& file : files) {
    struct stat st {};
    if (::lstat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    auto document = read_record(file);
    if (!document) continue;  // a damaged record names nothing it could lose
    const auto committing = document->find("committing");
    if (committing != document->end() && committing->is_string() &&
        committing->get<std::string>() == tx) {
      return Error(ErrorKind::kRecovery, "workspace",
                   "transaction " + tx + " is the interrupted commit of session " +
                       core::quote_name(file.stem().string()) +
                       "; `pulsebox session list` finishes or undoes it (the session keeps "
                       "its changes when it is undone). A record that is not yours: remove " +
                       file.string());
    }
  }
  return core::ok_status();
}

core::Status OpenSession::keep_after_unknown_commit() {
  for (const fs::path& layer : info_.layers) {
    auto copied = unshare_layer_files(layer);
    if (!copied) return std::move(copied).error().with_context("session " + name_);
  }
  info_.committing.reset();
  return save();
}

void OpenSession::claim_unstated_storage() {
  const std::string stamp = owner_stamp(*workspace_, name_);
  if (fs::is_directory(storage_) && storage_owner(storage_, stamp) == StorageOwner::kUnstated)
    (void)write_owner(storage_, stamp);
}

bool OpenSession::storage_used_elsewhere() const {
  return storage_owner(storage_, owner_stamp(*workspace_, name_)) == StorageOwner::kAnother &&
         still_used_by_its_owner(storage_);
}

core::Status OpenSession::remove(StorageRemoval which) {
  const std::string stamp = owner_stamp(*workspace_, name_);
  const StorageOwner owner = storage_owner(storage_, stamp);
  // By name, storage of an earlier pulsebox goes too, and so does storage
  // whose session no longer names it (its workspace was moved).
  const bool remove_storage_too =
      owner == StorageOwner::kThisSession ||
      (which == StorageRemoval::kNamedByTheUser &&
       (owner == StorageOwner::kUnstated || !still_used_by_its_owner(storage_)));
  if (exists_ && !removing_) {
    // Storage of an earlier pulsebox says whose it is before the record
    // says "removing", so that a crash leaves a removal the next opening
    // may finish.
    if (remove_storage_too && owner == StorageOwner::kUnstated) claim_unstated_storage();
    removing_ = true;
    // Best effort: a full disk must not keep a discard from freeing space.
    // Without it, a crash leaves a record naming missing layers, which a
    // discard still removes.
    (void)save();
    failpoint("session removal recorded");
  }
  if (remove_storage_too) PB_CHECK(remove_storage(storage_));
  failpoint("session layers removed");
  if (::unlink(record_path(*workspace_, name_).c_str()) != 0 && errno != ENOENT) {
    return Error::from_errno("session", "removing the record of session " + name_);
  }
  exists_ = false;
  info_.layers.clear();
  return core::ok_status();
}

// A commit interrupted by a crash (or an error): once its transaction was
// decided (READY), finish it, then end the session or keep it as the commit
// meant to; before that, undo it (the session stays).
core::Status OpenSession::recover() {
  if (!info_.committing) return core::ok_status();
  const std::string tx = *info_.committing;
  try {
    // Any workspace operation first finishes a decided commit: then the
    // transaction is gone.
    workspace_->for_each_transaction([](TransactionInfo&&) {});
    switch (commit_state(*workspace_, tx)) {
      case CommitState::kCommitted:
        if (commit_ends_session_) {
          PB_CHECK(remove(StorageRemoval::kOnlyItsOwn));
        } else {
          info_.committing.reset();
          PB_CHECK(save());
        }
        remove_commit_marker(*workspace_, tx);
        return core::ok_status();
      case CommitState::kUnknown:
        // A commit that ends the session leaves its marker; a commit that
        // keeps it needs none.
        // Storage made for another workspace or session (the record was
        // copied or planted here) is not this record's to change.
        if (commit_ends_session_ && !storage_used_elsewhere()) {
          return keep_after_unknown_commit();
        }
        info_.committing.reset();
        return save();
      case CommitState::kDecided:
        return Error(ErrorKind::kRecovery, "session",
                     "the commit of session " + name_ + " (transaction " + tx +
                         ") is decided but not finished; run `pulsebox reconcile`");
      case CommitState::kUnreadable:
        return Error(ErrorKind::kRecovery, "session",
                     "cannot tell where the commit of session " + name_ + " (transaction " + tx +
                         ") stands: its directory cannot be read");
      case CommitState::kUndoable:
        break;
    }
    // The record first: a crash before the discard leaves a pending
    // transaction, never a record naming one that is gone.
    info_.committing.reset();
    PB_CHECK(save());
    workspace_->discard(tx);
  } catch (const SandboxError& error) {
    return Error(ErrorKind::kIo, "session",
                 "finishing the interrupted commit of session " + name_ + ": " + error.what());
  }
  return core::ok_status();
}

core::Result<std::vector<Change>> OpenSession::add_run(const fs::path& upper,
                                                       const SecretScrubber* secrets) {
  // Everything that can refuse the run's changes happens while they are
  // still where the caller can hold them.
  if (layer_deeper_than(upper, kMaxLayerDepth)) {
    return Error(ErrorKind::kResource, "session",
                 "the run's changes are nested deeper than " + std::to_string(kMaxLayerDepth) +
                     " directories: they could neither be merged into the session nor committed");
  }
  const std::vector<fs::path> below = info_.layers;
  const fs::path base = workspace_->root();
  auto changes = describe_layer(
      upper, [&](const std::string& path) { return kind_in_view(below, base, path); },
      [&](const std::string& dir) { return names_in_view(below, base, dir); }, kMaxRunChanges);
  // The marks as they were: a run refused after its scan must not leave
  // the marks of the layers below changed by changes that never joined them.
  const SessionSecrets marks_before = secrets_;
  const std::vector<std::string> secret_paths_before = info_.secret_paths;
  bool saved_once = false;
  const auto refused = [&](Error why) {
    secrets_ = marks_before;
    info_.secret_paths = secret_paths_before;
    for (const std::string& copy : new_copies_)
      ::unlink((storage_ / "redacted" / copy).c_str());
    new_copies_.clear();
    superseded_copies_.clear();
    if (saved_once) (void)save();
    return why;
  };
  if (secrets != nullptr && secrets->secret_count() > 0) {
    if (auto scanned = scan_for_secrets(upper, *secrets); !scanned)
      return refused(std::move(scanned).error());
  }
  // The layer's number is taken (and saved) before the layer is made, so a
  // crash in between never leaves a directory a later run would collide with.
  const fs::path layer = storage_ / std::to_string(next_layer_++);
  // This save only takes the number: the marks change with the save that
  // adds the layer, or a crash between would leave the layers below with
  // marks the run removed.
  SessionSecrets scanned = std::exchange(secrets_, marks_before);
  auto taken = save();
  secrets_ = std::move(scanned);
  if (!taken) return refused(std::move(taken).error());
  saved_once = true;
  failpoint("session layer number saved");
  auto moved = move_layer(upper, layer);
  if (!moved) return refused(std::move(moved).error().with_context("keeping the run's changes"));
  info_.layers.insert(info_.layers.begin(), layer);
  ++info_.runs;
  info_.last_run = audit::utc_timestamp();
  if (auto saved = save(); !saved) {
    // Back where the caller can hold it (a rename; a copy left the original).
    info_.layers.erase(info_.layers.begin());
    ::rename(layer.c_str(), upper.c_str());
    return refused(std::move(saved).error());
  }
  for (const std::string& copy : superseded_copies_)
    ::unlink((storage_ / "redacted" / copy).c_str());
  superseded_copies_.clear();
  new_copies_.clear();
  // A merge that fails now leaves the layers as they are; the next run tries
  // again, and the session's review needs them merged.
  (void)collapse();
  return changes;
}

core::Status OpenSession::collapse() {
  while (info_.layers.size() > 1) {
    auto merged = merge_layer(info_.layers[0], info_.layers[1]);
    if (!merged) {
      return std::move(merged).error().with_context("merging the layers of session " + name_);
    }
    // Recorded first: a crash before the removal leaves an unlisted, empty
    // directory, never a record listing a layer that is gone.
    const fs::path merged_layer = info_.layers[0];
    info_.layers.erase(info_.layers.begin());
    PB_CHECK(save());
    PB_CHECK(remove_layer_tree(merged_layer));
  }
  return core::ok_status();
}

}  // namespace pulsebox::workspace
