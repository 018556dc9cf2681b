#include "workspace/transactions.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "audit/chain.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/sha256.h"
#include "core/text.h"
#include "workspace/protected_changes.h"
#include "workspace/safe_open.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::random_hex;
using core::UniqueFd;
using json = nlohmann::json;

std::function<void(std::string_view)> commit_failpoint;

namespace {

constexpr const char* kTempPrefix = ".pulsebox-tmp-";
// A manifest takes a few hundred bytes per staged path.
constexpr std::uint64_t kMaxTransactionFileBytes = core::kDefaultReadLimit;

timespec to_timespec(std::int64_t ns) {
  return {static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

// Sets the modification time of `name` in `dir` itself, never of what a
// symlink points to.
core::Status set_mtime_at(int dir, const std::string& name, std::int64_t mtime_ns,
                          const std::string& path) {
  if (mtime_ns == 0) return core::ok_status();
  const timespec times[2] = {{0, UTIME_OMIT}, to_timespec(mtime_ns)};
  if (::utimensat(dir, name.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0 && errno != ENOENT) {
    return Error::from_errno("workspace", "set the modification time of " + path);
  }
  return core::ok_status();
}

void failpoint(std::string_view step) {
  if (commit_failpoint) commit_failpoint(step);
}

StagedOp op_from_string(std::string_view text) {
  for (auto op :
       {StagedOp::Write, StagedOp::Delete, StagedOp::Mkdir, StagedOp::Symlink, StagedOp::Chmod}) {
    if (to_string(op) == text) return op;
  }
  return StagedOp::Write;
}

json snapshot_to_json(const Snapshot& s) {
  return {{"type", std::string(to_string(s.type))},
          {"inode", s.inode},
          {"device", s.device},
          {"size", s.size},
          {"mtime_ns", s.mtime_ns},
          {"newest_ctime_ns", s.newest_ctime_ns},
          {"mode", s.mode},
          {"sha256", s.sha256},
          {"changed_during_run", s.changed_during_run}};
}

Snapshot snapshot_from_json(const json& j) {
  Snapshot s;
  s.type = node_type_from_string(j.at("type").get<std::string>());
  s.inode = j.at("inode").get<std::uint64_t>();
  s.device = j.at("device").get<std::uint64_t>();
  s.size = j.at("size").get<std::uint64_t>();
  s.mtime_ns = j.at("mtime_ns").get<std::int64_t>();
  s.newest_ctime_ns = j.value("newest_ctime_ns", std::int64_t{0});
  s.mode = j.at("mode").get<unsigned>();
  s.sha256 = j.at("sha256").get<std::string>();
  s.changed_during_run = j.value("changed_during_run", false);
  return s;
}

// Paths and link targets are bytes (core/byte_names.h).
json entry_to_json(const Entry& e) {
  json j = json::object();
  core::put_name(j, "path", e.path);
  j["op"] = std::string(to_string(e.op));
  j["mode"] = e.mode;
  core::put_name(j, "link_target", e.link_target);
  j["blob"] = e.blob;
  j["size"] = e.size;
  j["mtime_ns"] = e.mtime_ns;
  j["contains_secret"] = e.contains_secret;
  j["snapshot"] = snapshot_to_json(e.snapshot);
  if (!e.base_blob.empty()) j["base_blob"] = e.base_blob;
  if (!e.base_link.empty()) core::put_name(j, "base_link", e.base_link);
  if (!e.redacted_link.empty()) core::put_name(j, "redacted_link", e.redacted_link);
  return j;
}

Entry entry_from_json(const json& j) {
  Entry e;
  e.path = core::get_name(j, "path");
  e.op = op_from_string(j.at("op").get<std::string>());
  e.mode = j.at("mode").get<unsigned>();
  e.link_target = core::get_name(j, "link_target");
  e.blob = j.at("blob").get<std::string>();
  e.size = j.at("size").get<std::uint64_t>();
  e.mtime_ns = j.value("mtime_ns", std::int64_t{0});
  e.contains_secret = j.value("contains_secret", false);
  e.snapshot = snapshot_from_json(j.at("snapshot"));
  e.base_blob = j.value("base_blob", std::string());
  if (j.contains("base_link")) e.base_link = core::get_name(j, "base_link");
  if (j.contains("redacted_link")) e.redacted_link = core::get_name(j, "redacted_link");
  return e;
}

// What is wrong with an entry read back from a manifest or a write-ahead
// log, "" when nothing: its path must be in normal form, and its blob a name
// this store made (digits), never a path that could reach outside blobs/
// (a manifest in a planted .agent/ would otherwise copy any file the user
// can read into the workspace).
std::string entry_problem(const Entry& entry) {
  auto checked = check_relative_path(entry.path);
  if (!checked || *checked != entry.path) return "bad path " + core::quote_name(entry.path);
  const bool digits =
      !entry.blob.empty() && entry.blob.find_first_not_of("0123456789") == std::string::npos;
  if (entry.op == StagedOp::Write ? !digits : !entry.blob.empty()) {
    return "bad blob name for " + core::quote_name(entry.path);
  }
  if (!entry.base_blob.empty() &&
      entry.base_blob.find_first_not_of("0123456789") != std::string::npos) {
    return "bad base name for " + core::quote_name(entry.path);
  }
  return "";
}

Error corrupt(const std::filesystem::path& file, const std::string& why) {
  return Error(ErrorKind::kRecovery, "workspace",
               file.string() + " is damaged (" + why +
                   "); discard the transaction or run `pulsebox reconcile`");
}

// Manifests and write-ahead logs are pulsebox's own, but a damaged or
// planted one must be refused, never crash or block the reader.
core::Result<json> read_json(const std::filesystem::path& file) {
  auto text = core::read_regular_file(file, kMaxTransactionFileBytes, "transaction file");
  if (!text) return corrupt(file, text.error().to_string());
  auto document = core::parse_json(*text, file.string());
  if (!document) return corrupt(file, document.error().to_string());
  return std::move(document).value();
}

core::Status fsync_path(const std::filesystem::path& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return Error::from_errno("workspace", "open " + path.string());
  if (::fsync(fd.get()) != 0) return Error::from_errno("workspace", "fsync " + path.string());
  return core::ok_status();
}

// As root, a new entry takes the owner of the directory it is created in, and
// a replaced file keeps its owner: committing a user's workspace as root must
// not leave root-owned files behind.
void adopt_owner(int dir, const std::string& name, const struct stat* replaced) {
  if (::geteuid() != 0) return;
  struct stat owner {};
  if (replaced != nullptr) {
    owner = *replaced;
  } else if (::fstat(dir, &owner) != 0) {
    return;
  }
  (void)::fchownat(dir, name.c_str(), owner.st_uid, owner.st_gid, AT_SYMLINK_NOFOLLOW);
}

}  // namespace

bool beneath_new_directory(const Draft& draft, const std::string& path) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const auto it = draft.entries.find(path.substr(0, slash));
    if (it != draft.entries.end() && type_after(it->second) == NodeType::Directory &&
        it->second.snapshot.type != NodeType::Directory) {
      return true;
    }
  }
  return false;
}

bool is_selected(const std::vector<std::string>& selected, const std::string& path) {
  if (selected.empty()) return true;
  for (const std::string& item : selected) {
    if (path == item || (path.size() > item.size() && path.compare(0, item.size(), item) == 0 &&
                         path[item.size()] == '/')) {
      return true;
    }
  }
  return false;
}

std::string_view to_string(StagedOp op) {
  switch (op) {
    case StagedOp::Write:
      return "write";
    case StagedOp::Delete:
      return "delete";
    case StagedOp::Mkdir:
      return "mkdir";
    case StagedOp::Symlink:
      return "symlink";
    case StagedOp::Chmod:
      return "chmod";
  }
  return "write";
}

NodeType type_after(const Entry& entry) {
  switch (entry.op) {
    case StagedOp::Write:
      return NodeType::File;
    case StagedOp::Mkdir:
      return NodeType::Directory;
    case StagedOp::Symlink:
      return NodeType::Symlink;
    case StagedOp::Delete:
      return NodeType::Absent;
    case StagedOp::Chmod:
      break;
  }
  return entry.snapshot.exists() ? entry.snapshot.type : NodeType::File;
}

ChangeKind change_kind(const Entry& entry) {
  switch (entry.op) {
    case StagedOp::Delete:
      return ChangeKind::Deleted;
    case StagedOp::Chmod:
      return ChangeKind::Mode;
    case StagedOp::Symlink:
      return ChangeKind::Symlink;
    case StagedOp::Mkdir:
    case StagedOp::Write:
      return entry.snapshot.exists() ? ChangeKind::Modified : ChangeKind::Added;
  }
  return ChangeKind::Modified;
}

TransactionStore::TransactionStore(std::filesystem::path root, const ActionPolicy& policy,
                                   WorkspaceLimits limits)
    : root_(std::move(root)), policy_(policy), limits_(limits) {}

std::filesystem::path TransactionStore::tx_dir(const std::string& id) const {
  return root_ / ".agent" / "transactions" / id;
}

core::Result<UniqueFd> TransactionStore::open_root() const {
  auto fd = core::open_directory(root_);
  if (!fd) return std::move(fd).error().with_kind(ErrorKind::kInvalidInput);
  return fd;
}

core::Result<UniqueFd> TransactionStore::lock() const {
  const auto agent = root_ / ".agent";
  struct stat st {};
  if (::lstat(agent.c_str(), &st) == 0 && !S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "workspace",
                 agent.string() + " is not a directory (a symlink?); refusing to use it");
  }
  std::error_code ec;
  std::filesystem::create_directories(agent / "transactions", ec);
  if (ec) {
    return Error(ErrorKind::kIo, "workspace", "cannot create " + agent.string(), ec.value());
  }
  ::chmod(agent.c_str(), 0700);
  const auto path = agent / "lock";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!fd) return Error::from_errno("workspace", "open " + path.string());
  while (::flock(fd.get(), LOCK_EX) != 0) {
    if (errno != EINTR) return Error::from_errno("workspace", "lock " + path.string());
  }
  return fd;  // closing it releases the lock
}

namespace {

// A directory of .agent/ that cannot be read is an error naming it, never an
// empty list (the user would believe nothing is pending).
Error unreadable(const std::filesystem::path& path, int err) {
  return Error(ErrorKind::kInvalidInput, "workspace",
               "cannot read " + path.string() + ": " + std::strerror(err) +
                   "; run pulsebox as the user who owns the workspace, or fix the permissions",
               err);
}

}  // namespace

core::Result<std::vector<std::string>> TransactionStore::list_ids() const {
  std::vector<std::string> ids;
  const auto dir = root_ / ".agent" / "transactions";
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return ids;
    return unreadable(dir, errno);
  }
  if (!S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kSecurity, "workspace",
                 dir.string() + " is not a directory (a symlink?); refusing to use it");
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return unreadable(dir, errno);
  for (const std::string& name : list_directory(fd.get())) {
    struct stat manifest {};
    const std::string file = name + "/manifest.json";
    if (::fstatat(fd.get(), file.c_str(), &manifest, AT_SYMLINK_NOFOLLOW) == 0) {
      ids.push_back(name);
    } else if (errno != ENOENT) {
      ids.push_back(name);  // there, but unreadable: listed as damaged by its load()
    }
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

core::Result<std::vector<std::string>> TransactionStore::decided_ids() const {
  std::vector<std::string> ids;
  const auto dir = root_ / ".agent" / "transactions";
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return ids;
    return unreadable(dir, errno);
  }
  for (const std::string& name : list_directory(fd.get())) {
    struct stat ready {};
    const std::string file = name + "/READY";
    if (::fstatat(fd.get(), file.c_str(), &ready, AT_SYMLINK_NOFOLLOW) == 0) ids.push_back(name);
  }
  return ids;
}

core::Result<std::vector<std::string>> TransactionStore::finish_decided() {
  PB_TRY(decided, decided_ids());
  if (decided.empty()) return decided;  // the common case: no lock taken
  PB_TRY(lock_fd, lock());
  PB_TRY(root_fd, open_root());
  PB_TRY(still_decided, decided_ids());  // another process may have finished them
  std::size_t temp_files = 0;
  for (const std::string& id : still_decided)
    PB_CHECK(replay(id, root_fd.get(), &temp_files));
  return still_decided;
}

core::Result<std::string> TransactionStore::create(std::string origin) {
  PB_TRY(lock_fd, lock());
  PB_TRY(ids, list_ids());
  if (ids.size() >= limits_.max_open_transactions) {
    return Error(ErrorKind::kResource, "workspace",
                 "there are already " + std::to_string(ids.size()) +
                     " open transactions (the limit is " +
                     std::to_string(limits_.max_open_transactions) +
                     "); commit or discard some first (`pulsebox changes`)");
  }
  Draft draft;
  const std::string stamp = audit::utc_timestamp();
  draft.created = stamp;
  // tx-YYYYMMDDhhmmss-<random>: sorts by creation time.
  std::string compact;
  for (char c : stamp.substr(0, 19)) {
    if (std::isdigit(static_cast<unsigned char>(c))) compact.push_back(c);
  }
  draft.id = "tx-" + compact + "-" + random_hex(6);
  draft.origin = std::move(origin);
  std::error_code ec;
  std::filesystem::create_directories(tx_dir(draft.id) / "blobs", ec);
  if (ec)
    return Error(ErrorKind::kIo, "workspace", "cannot create " + tx_dir(draft.id).string(),
                 ec.value());
  PB_CHECK(save(draft));
  return draft.id;
}

core::Result<Draft> TransactionStore::load(const std::string& id, std::string_view file) const {
  if (id.empty() || id.find('/') != std::string::npos || id.front() == '.') {
    return Error(ErrorKind::kInvalidInput, "workspace", "\"" + id + "\" is not a transaction id");
  }
  const auto manifest = tx_dir(id) / file;
  std::error_code ec;
  if (!std::filesystem::exists(manifest, ec)) {
    return Error(
        ErrorKind::kInvalidInput, "workspace",
        "no transaction \"" + id + "\" in " + root_.string() + " (see `pulsebox changes`)");
  }
  PB_TRY(document, read_json(manifest));
  Draft draft;
  try {
    draft.id = document.at("id").get<std::string>();
    draft.created = document.at("created").get<std::string>();
    draft.origin = document.contains("origin") ? core::get_name(document, "origin") : "";
    draft.next_blob = document.at("next_blob").get<std::uint64_t>();
    for (const auto& item : document.at("entries")) {
      Entry entry = entry_from_json(item);
      if (const std::string problem = entry_problem(entry); !problem.empty())
        return corrupt(manifest, problem);
      draft.total_bytes += entry.size;
      if (!entry.base_blob.empty()) draft.base_bytes += entry.snapshot.size;
      draft.entries[entry.path] = std::move(entry);
    }
    for (const auto& item : document.value("refused", json::array()))
      draft.refused.push_back({core::get_name(item, "path"), core::get_name(item, "reason")});
    for (const auto& item : document.value("notes", json::array()))
      draft.notes.push_back({core::get_name(item, "path"), core::get_name(item, "note")});
  } catch (const json::exception& error) {
    return corrupt(manifest, error.what());
  }
  if (draft.id != id) return corrupt(manifest, "it names another transaction");
  return draft;
}

core::Status TransactionStore::save(const Draft& draft, std::string_view file) const {
  json entries = json::array();
  for (const auto& [path, entry] : draft.entries)
    entries.push_back(entry_to_json(entry));
  json document = {{"version", 1},
                   {"id", draft.id},
                   {"created", draft.created},
                   {"next_blob", draft.next_blob},
                   {"entries", std::move(entries)}};
  core::put_name(document, "origin", draft.origin);  // a command line: bytes
  json refused = json::array();
  for (const RefusedChange& item : draft.refused) {
    json j = json::object();
    core::put_name(j, "path", item.path);
    core::put_name(j, "reason", item.reason);
    refused.push_back(std::move(j));
  }
  json notes = json::array();
  for (const ChangeNote& item : draft.notes) {
    json j = json::object();
    core::put_name(j, "path", item.path);
    core::put_name(j, "note", item.note);
    notes.push_back(std::move(j));
  }
  document["refused"] = std::move(refused);
  document["notes"] = std::move(notes);
  // Every string is valid UTF-8 (names go through core::put_name): a
  // replacement here would change a name.
  return core::write_file_atomic(tx_dir(draft.id) / file, document.dump(1), 0600);
}

core::Status TransactionStore::discard(const std::string& id) {
  PB_TRY(lock_fd, lock());
  // A damaged manifest is no reason to keep the transaction: that is how
  // the user gets rid of it.
  auto draft = load(id);
  if (!draft && draft.error().kind() != ErrorKind::kRecovery) return std::move(draft).error();
  std::error_code ec;
  if (std::filesystem::exists(tx_dir(id) / "READY", ec)) {
    return Error(
        ErrorKind::kRecovery, "workspace",
        "transaction " + id + " is being committed; run `pulsebox reconcile` to finish it");
  }
  std::filesystem::remove_all(tx_dir(id), ec);
  if (ec)
    return Error(ErrorKind::kIo, "workspace", "cannot remove " + tx_dir(id).string(), ec.value());
  return core::ok_status();
}

core::Status TransactionStore::discard_entries(const std::string& id,
                                               const std::vector<std::string>& selected) {
  if (selected.empty()) return discard(id);
  PB_TRY(lock_fd, lock());
  PB_TRY(draft, load(id));
  std::error_code ec;
  if (std::filesystem::exists(tx_dir(id) / "READY", ec)) {
    return Error(ErrorKind::kRecovery, "workspace", "transaction " + id + " is being committed");
  }
  std::vector<std::string> blobs;
  for (auto it = draft.entries.begin(); it != draft.entries.end();) {
    if (!is_selected(selected, it->first)) {
      ++it;
      continue;
    }
    if (!it->second.blob.empty()) blobs.push_back("blobs/" + it->second.blob);
    if (!it->second.base_blob.empty()) blobs.push_back("base/" + it->second.base_blob);
    draft.total_bytes -= it->second.size;
    it = draft.entries.erase(it);
  }
  if (draft.entries.empty()) {
    std::filesystem::remove_all(tx_dir(id), ec);
    if (ec)
      return Error(ErrorKind::kIo, "workspace", "cannot remove " + tx_dir(id).string(), ec.value());
    return core::ok_status();
  }
  // The manifest first: a blob it no longer names is only wasted space.
  PB_CHECK(save(draft));
  for (const std::string& blob : blobs)
    std::filesystem::remove(tx_dir(id) / blob, ec);
  return core::ok_status();
}

core::Status TransactionStore::check_entry_policy(const Draft& draft, const Entry& entry) const {
  std::vector<ActionType> actions;
  switch (entry.op) {
    case StagedOp::Delete:
      actions = {ActionType::Delete};
      break;
    case StagedOp::Write:
    case StagedOp::Mkdir:
    case StagedOp::Symlink:
    case StagedOp::Chmod:
      actions = {ActionType::Write};
      break;
  }
  // Replacing a path of another type removes what was there.
  const NodeType after = type_after(entry);
  if (after != NodeType::Absent && entry.snapshot.exists() && entry.snapshot.type != after) {
    actions.push_back(ActionType::Delete);
  }
  PB_TRY(root_fd, open_root());
  PB_TRY(protected_change, find_protected_change(root_fd.get(), draft, entry));
  for (ActionType action : actions) {
    const PolicyEvaluation evaluation = policy_.explain(action, entry.path);
    if (protected_change) {
      const bool named_by_rule =
          evaluation.source == PolicyEvaluation::Source::Rule &&
          evaluation.decision == Decision::Allow &&
          rule_names_change(evaluation.rule->target_pattern, entry, *protected_change);
      if (!named_by_rule) {
        return Error(ErrorKind::kPolicyDenied, "policy",
                     describe_protected_refusal(to_string(action), entry, *protected_change));
      }
    }
    if (evaluation.decision == Decision::Deny) {
      return Error(ErrorKind::kPolicyDenied, "policy",
                   "refusing to " + std::string(to_string(action)) + " " +
                       core::quote_name(entry.path) + ": policy says " + evaluation.describe());
    }
  }
  return core::ok_status();
}

core::Status TransactionStore::stage(Draft& draft, Entry entry, std::string_view bytes,
                                     bool check_policy) {
  PB_TRY(path, check_relative_path(entry.path));
  entry.path = path;
  if (entry.op == StagedOp::Write) {
    if (bytes.size() > limits_.max_file_bytes) {
      return Error(ErrorKind::kResource, "workspace",
                   core::quote_name(entry.path) + ": " + std::to_string(bytes.size()) +
                       " bytes is over the per-file limit of " +
                       std::to_string(limits_.max_file_bytes));
    }
    std::uint64_t total = draft.staged_bytes() + bytes.size();
    if (auto it = draft.entries.find(entry.path); it != draft.entries.end())
      total -= it->second.size;
    if (total > limits_.max_total_bytes) {
      return Error(ErrorKind::kResource, "workspace",
                   "staging " + core::quote_name(entry.path) + " would bring the transaction to " +
                       std::to_string(total) + " bytes, over the limit of " +
                       std::to_string(limits_.max_total_bytes));
    }
  }
  if (entry.op == StagedOp::Write || entry.op == StagedOp::Mkdir || entry.op == StagedOp::Chmod) {
    if ((entry.mode & (S_ISUID | S_ISGID)) != 0) {
      return Error(ErrorKind::kSecurity, "workspace",
                   core::quote_name(entry.path) + ": refusing a setuid or setgid mode");
    }
    entry.mode &= 0777;
  }
  if (auto it = draft.entries.find(entry.path); it != draft.entries.end()) {
    entry.snapshot = it->second.snapshot;  // the first snapshot is the one that counts
    entry.base_blob = it->second.base_blob;
    entry.base_link = it->second.base_link;
  } else if (beneath_new_directory(draft, entry.path)) {
    entry.snapshot = Snapshot{};
  } else {
    PB_TRY(root_fd, open_root());
    PB_TRY(snapshot, take_snapshot(root_fd.get(), entry.path));
    entry.snapshot = std::move(snapshot);
  }
  if (check_policy) PB_CHECK(check_entry_policy(draft, entry));
  if (!draft.entries.contains(entry.path) && entry.snapshot.exists()) {
    PB_TRY(root_fd, open_root());
    PB_CHECK(keep_base(draft, entry, root_fd.get()));
  }
  entry.contains_secret = false;
  entry.redacted_link.clear();
  if (secrets_ != nullptr && entry.op == StagedOp::Symlink &&
      secrets_->contains_secret(entry.link_target)) {
    entry.contains_secret = true;
    entry.redacted_link = secrets_->redact(entry.link_target);
  }
  if (entry.op == StagedOp::Write) {
    entry.blob = std::to_string(draft.next_blob++);
    const auto blob_path = tx_dir(draft.id) / "blobs" / entry.blob;
    UniqueFd fd(::open(blob_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (!fd) return Error::from_errno("workspace", "create " + blob_path.string());
    PB_CHECK(core::write_all(fd.get(), bytes, blob_path.string()));
    // The blob is renamed into place at commit, so it gets its final mode
    // and modification time now.
    if (::fchmod(fd.get(), entry.mode) != 0) {
      return Error::from_errno("workspace", "chmod " + blob_path.string());
    }
    if (entry.mtime_ns != 0) {
      const timespec times[2] = {{0, UTIME_OMIT}, to_timespec(entry.mtime_ns)};
      if (::futimens(fd.get(), times) != 0) {
        return Error::from_errno("workspace", "set the time of " + blob_path.string());
      }
    }
    entry.size = bytes.size();
    // Only the redacted copy is ever shown (diff).
    std::optional<std::string> redacted;
    if (secrets_ != nullptr && secrets_->contains_secret(bytes)) {
      redacted = secrets_->redact(bytes);
    } else if (known_secrets_ != nullptr) {
      if (auto known = known_secrets_->find(entry.path); known != known_secrets_->end()) {
        redacted = known->second;
      }
    }
    if (redacted) {
      entry.contains_secret = true;
      const auto dir = tx_dir(draft.id) / "redacted";
      std::error_code ec;
      std::filesystem::create_directories(dir, ec);
      PB_CHECK(core::write_file_atomic(dir / entry.blob, *redacted, 0600));
    }
  }
  if (auto it = draft.entries.find(entry.path); it != draft.entries.end()) {
    draft.total_bytes -= it->second.size;
    if (!it->second.blob.empty()) {
      std::error_code ec;
      std::filesystem::remove(tx_dir(draft.id) / "blobs" / it->second.blob, ec);
      std::filesystem::remove(tx_dir(draft.id) / "redacted" / it->second.blob, ec);
    }
  }
  draft.total_bytes += entry.size;
  draft.entries[entry.path] = std::move(entry);
  return core::ok_status();
}

core::Status TransactionStore::keep_base(Draft& draft, Entry& entry, int root_fd) {
  const Snapshot& snapshot = entry.snapshot;
  if (snapshot.type != NodeType::File && snapshot.type != NodeType::Symlink)
    return core::ok_status();
  if (snapshot.type == NodeType::File &&
      (snapshot.size > limits_.max_file_bytes ||
       draft.base_bytes + snapshot.size > limits_.max_total_bytes)) {
    return core::ok_status();  // diff then shows the current file
  }
  std::string name;
  auto parent = open_parent(root_fd, entry.path, &name);
  if (!parent) return core::ok_status();
  if (snapshot.type == NodeType::Symlink) {
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(parent->get(), name.c_str(), target.data(), target.size());
    if (n < 0) return core::ok_status();
    target.resize(static_cast<std::size_t>(n));
    if (core::sha256_hex(target) == snapshot.sha256) entry.base_link = std::move(target);
    return core::ok_status();
  }
  UniqueFd fd(
      ::openat(parent->get(), name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd) return core::ok_status();
  auto bytes = read_regular_file(fd.get(), limits_.max_file_bytes, entry.path);
  // Changed since the snapshot: no base rather than the wrong one.
  if (!bytes || core::sha256_hex(*bytes) != snapshot.sha256) return core::ok_status();
  const auto dir = tx_dir(draft.id) / "base";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string base = std::to_string(draft.next_blob++);
  const auto path = dir / base;
  // A file of this name is one a failed staging left (the counter is saved
  // with the manifest): overwrite it.
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::from_errno("workspace", "create " + path.string());
  PB_CHECK(core::write_all(out.get(), *bytes, path.string()));
  entry.base_blob = base;
  draft.base_bytes += bytes->size();
  return core::ok_status();
}

// Applies every step; each is idempotent so a replay after a crash at any
// point converges on the committed state.
core::Status TransactionStore::apply(const Draft& draft, int root_fd,
                                     std::size_t* temp_files_removed) {
  const auto blobs = tx_dir(draft.id) / "blobs";
  PB_TRY(blob_dir, core::open_directory(blobs));
  std::set<std::string> touched_dirs;
  for (const auto& [path, entry] : draft.entries) {
    std::string name;
    auto parent = open_parent(root_fd, path, &name);
    if (!parent) {
      const int err = parent.error().error_number();
      // The parent is gone: for a delete that is success, otherwise the
      // parent was replaced by an earlier step and this entry cannot apply.
      if (entry.op == StagedOp::Delete && (err == ENOENT || err == ENOTDIR)) continue;
      return std::move(parent).error().with_context("applying " + path);
    }
    const int dir = parent->get();
    const std::string parent_path =
        path.find('/') == std::string::npos ? std::string() : path.substr(0, path.rfind('/'));
    touched_dirs.insert(parent_path);
    struct stat current {};
    const bool exists = ::fstatat(dir, name.c_str(), &current, AT_SYMLINK_NOFOLLOW) == 0;
    switch (entry.op) {
      case StagedOp::Delete:
        PB_CHECK(remove_tree_at(dir, name));
        break;
      case StagedOp::Write: {
        struct stat blob_stat {};
        if (::fstatat(blob_dir.get(), entry.blob.c_str(), &blob_stat, 0) != 0) {
          break;  // already renamed into place by an earlier attempt
        }
        const bool replaces_file = exists && !S_ISDIR(current.st_mode);
        if (exists && S_ISDIR(current.st_mode)) PB_CHECK(remove_tree_at(dir, name));
        if (::renameat(blob_dir.get(), entry.blob.c_str(), dir, name.c_str()) != 0) {
          return Error::from_errno("workspace", "rename into place: " + path);
        }
        adopt_owner(dir, name, replaces_file ? &current : nullptr);
        break;
      }
      case StagedOp::Mkdir:
        if (exists && S_ISDIR(current.st_mode)) {
          UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
          if (!fd || ::fchmod(fd.get(), entry.mode) != 0) {
            return Error::from_errno("workspace", "chmod " + path);
          }
          break;
        }
        if (exists) PB_CHECK(remove_tree_at(dir, name));
        if (::mkdirat(dir, name.c_str(), entry.mode) != 0 && errno != EEXIST) {
          return Error::from_errno("workspace", "mkdir " + path);
        }
        if (::fchmodat(dir, name.c_str(), entry.mode, 0) != 0) {
          return Error::from_errno("workspace", "chmod " + path);
        }
        adopt_owner(dir, name, nullptr);
        break;
      case StagedOp::Symlink: {
        if (exists && S_ISDIR(current.st_mode)) PB_CHECK(remove_tree_at(dir, name));
        const std::string temp = std::string(kTempPrefix) + random_hex(12);
        if (::symlinkat(entry.link_target.c_str(), dir, temp.c_str()) != 0) {
          return Error::from_errno("workspace", "symlink " + path);
        }
        if (auto timed = set_mtime_at(dir, temp, entry.mtime_ns, path); !timed.ok()) {
          ::unlinkat(dir, temp.c_str(), 0);
          return timed;
        }
        if (::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
          const Error error = Error::from_errno("workspace", "rename into place: " + path);
          ::unlinkat(dir, temp.c_str(), 0);
          return error;
        }
        adopt_owner(dir, name, nullptr);
        break;
      }
      case StagedOp::Chmod: {
        UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
        if (!fd || ::fchmod(fd.get(), entry.mode) != 0) {
          return Error::from_errno("workspace", "chmod " + path);
        }
        break;
      }
    }
    failpoint("applied " + path);
  }
  // Make the renames durable, and remove temporary symlinks an interrupted
  // attempt may have left in the directories this commit touches.
  for (const std::string& dir_path : touched_dirs) {
    auto dir = dir_path.empty()
                   ? core::Result<UniqueFd>(UniqueFd(::fcntl(root_fd, F_DUPFD_CLOEXEC, 0)))
                   : open_beneath(root_fd, dir_path, O_RDONLY | O_DIRECTORY);
    if (!dir) continue;  // removed by a later step
    if (temp_files_removed != nullptr) {
      const int dup = ::fcntl(dir->get(), F_DUPFD_CLOEXEC, 0);
      if (DIR* listing = dup >= 0 ? ::fdopendir(dup) : nullptr) {
        while (const dirent* item = ::readdir(listing)) {
          if (std::string_view(item->d_name).rfind(kTempPrefix, 0) == 0 &&
              ::unlinkat(dir->get(), item->d_name, 0) == 0) {
            ++*temp_files_removed;
          }
        }
        ::closedir(listing);
      }
    }
    if (::fsync(dir->get()) != 0) return Error::from_errno("workspace", "fsync " + dir_path);
  }
  // Directory times last, children before parents: every step above that
  // adds or removes an entry in a directory moves its time.
  for (auto it = draft.entries.rbegin(); it != draft.entries.rend(); ++it) {
    const Entry& entry = it->second;
    if (entry.mtime_ns == 0 || type_after(entry) != NodeType::Directory) continue;
    std::string name;
    auto parent = open_parent(root_fd, entry.path, &name);
    if (!parent) continue;  // removed by a later step
    struct stat st {};
    if (::fstatat(parent->get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISDIR(st.st_mode)) {
      continue;
    }
    PB_CHECK(set_mtime_at(parent->get(), name, entry.mtime_ns, entry.path));
  }
  failpoint("directories synced");
  return core::ok_status();
}

namespace {

json draft_entries_json(const Draft& draft) {
  json steps = json::array();
  for (const auto& [path, entry] : draft.entries)
    steps.push_back(entry_to_json(entry));
  return steps;
}

// Splits `draft` for a partial commit: the selected entries, and the new
// directories (beneath_new_directory) they lie in, which they cannot do
// without, go to `part`; the rest stays in `draft`.
Draft split_off(Draft& draft, const std::vector<std::string>& selected) {
  Draft part;
  part.id = draft.id;
  std::set<std::string> taken;
  for (const auto& [path, entry] : draft.entries) {
    if (!is_selected(selected, path)) continue;
    taken.insert(path);
    for (std::size_t slash = path.find('/'); slash != std::string::npos;
         slash = path.find('/', slash + 1)) {
      const auto it = draft.entries.find(path.substr(0, slash));
      if (it != draft.entries.end() && type_after(it->second) == NodeType::Directory &&
          it->second.snapshot.type != NodeType::Directory) {
        taken.insert(it->first);
      }
    }
  }
  for (const std::string& path : taken) {
    auto node = draft.entries.extract(path);
    draft.total_bytes -= node.mapped().size;
    part.total_bytes += node.mapped().size;
    part.entries.insert(std::move(node));
  }
  return part;
}

// The entries left pending whose path is a directory above a committed one:
// their snapshot (a digest of the tree below) changes with the commit.
std::vector<std::string> directories_above(const Draft& rest, const Draft& part) {
  std::vector<std::string> out;
  for (const auto& [path, entry] : rest.entries) {
    if (entry.snapshot.type != NodeType::Directory) continue;
    for (const auto& [committed, ignored] : part.entries) {
      if (committed.size() > path.size() && committed.compare(0, path.size(), path) == 0 &&
          committed[path.size()] == '/') {
        out.push_back(path);
        break;
      }
    }
  }
  return out;
}

// Removes a fully committed transaction's directory in an order that a
// crash at any point leaves either a replayable commit (READY and the log)
// or nothing pending (no manifest): never the applied changes listed as
// pending again.
core::Status remove_committed(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::remove(dir / "manifest.json", ec);
  PB_CHECK(fsync_path(dir));
  std::filesystem::remove(dir / "READY", ec);
  std::filesystem::remove_all(dir, ec);
  if (ec) return Error(ErrorKind::kIo, "workspace", "cannot remove " + dir.string(), ec.value());
  return core::ok_status();
}

}  // namespace

core::Result<std::vector<std::string>> TransactionStore::commit(
    const std::string& id, const std::vector<std::string>& selected) {
  PB_TRY(lock_fd, lock());
  PB_TRY(whole, load(id));
  PB_TRY(root_fd, open_root());
  const auto dir = tx_dir(id);
  std::error_code ec;
  if (std::filesystem::exists(dir / "READY", ec)) {
    return Error(
        ErrorKind::kRecovery, "workspace",
        "transaction " + id + " was interrupted while committing; run `pulsebox reconcile`");
  }
  Draft rest = whole;
  Draft draft = selected.empty() ? std::exchange(rest, Draft{}) : split_off(rest, selected);
  const bool partial = !rest.entries.empty();

  // 1. Nothing changed underneath since staging, and every blob is a file
  // this store wrote (a symlink planted in blobs/ would be renamed into the
  // workspace as if it were the file).
  PB_TRY(blob_dir, core::open_directory(dir / "blobs"));
  for (const auto& [path, entry] : draft.entries) {
    struct stat blob {};
    if (entry.op == StagedOp::Write &&
        (::fstatat(blob_dir.get(), entry.blob.c_str(), &blob, AT_SYMLINK_NOFOLLOW) != 0 ||
         !S_ISREG(blob.st_mode))) {
      return corrupt(dir / "blobs" / entry.blob, "not a regular file");
    }
  }
  std::vector<std::pair<std::string, std::string>> conflicts;  // path, why
  for (const auto& [path, entry] : draft.entries) {
    // Beneath a directory that replaces a symlink or file: that entry's own
    // check covers it, and looking the path up could follow the symlink.
    if (beneath_new_directory(whole, path) && !entry.snapshot.exists()) continue;
    PB_TRY(now, take_snapshot(root_fd.get(), path));
    std::string why = describe_difference(entry.snapshot, now);
    if (!why.empty()) conflicts.emplace_back(path, std::move(why));
  }
  if (!conflicts.empty()) {
    std::string message = "the workspace changed since transaction " + id +
                          " was staged; nothing was applied and the transaction is kept:";
    for (const auto& [path, why] : conflicts)
      message += "\n  " + core::quote_name(path) + ": " + why;
    Error error(ErrorKind::kConcurrentModification, "commit", message);
    for (const auto& [path, why] : conflicts)
      error.paths().push_back(path);
    return error;
  }
  // A pending directory above a committed path gets a fresh snapshot after
  // the commit, but only if it still matches the old one now: a host change
  // to it must stay visible to its own commit.
  std::vector<std::string> refresh;
  for (const std::string& path : directories_above(rest, draft)) {
    PB_TRY(now, take_snapshot(root_fd.get(), path));
    if (describe_difference(rest.entries.at(path).snapshot, now).empty()) refresh.push_back(path);
  }
  failpoint("snapshots checked");

  // 2. The policy allows every change, and no change holds a secret the
  // user has not allowed.
  for (const auto& [path, entry] : draft.entries)
    PB_CHECK(check_entry_policy(draft, entry));
  if (!allow_secrets_) {
    std::vector<std::string> holding;
    for (const auto& [path, entry] : draft.entries) {
      if (entry.contains_secret) holding.push_back(path);
    }
    if (!holding.empty()) {
      std::string names;
      for (const std::string& path : holding)
        names += (names.empty() ? "" : ", ") + core::quote_name(path);
      Error error(ErrorKind::kSecurity, "commit",
                  "refusing to commit transaction " + id + ": " + names +
                      (holding.size() == 1 ? " holds" : " hold") +
                      " a registered secret value (the diff shows it redacted); nothing was "
                      "applied. Commit with --allow-secrets to write it to the workspace anyway");
      for (const std::string& path : holding)
        error.paths().push_back(path);
      return error;
    }
  }

  // 3. Write-ahead log, durable, then the commit point. A partial commit
  // also writes what stays pending (remaining.json), so that a replay can
  // finish it.
  if (::syncfs(root_fd.get()) != 0) return Error::from_errno("workspace", "syncfs (blobs)");
  json wal = {{"id", id}, {"steps", draft_entries_json(draft)}};
  if (partial) {
    PB_CHECK(save(rest, "remaining.json"));
    wal["partial"] = true;
    json names = json::array();
    for (const std::string& path : refresh) {
      json item = json::object();
      core::put_name(item, "path", path);
      names.push_back(std::move(item));
    }
    wal["refresh"] = std::move(names);
  }
  PB_CHECK(core::write_file_atomic(dir / "wal.json", wal.dump(), 0600));
  failpoint("wal written");
  {
    UniqueFd ready(::open((dir / "READY").c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    if (!ready || ::fsync(ready.get()) != 0) {
      return Error::from_errno("workspace", "create " + (dir / "READY").string());
    }
  }
  PB_CHECK(fsync_path(dir));
  failpoint("ready marker");

  // 4. Apply; 5. clean up (or, for a partial commit, keep the rest pending).
  PB_CHECK(apply(draft, root_fd.get(), nullptr));
  if (partial) {
    std::vector<Entry> committed;
    for (const auto& [path, entry] : draft.entries)
      committed.push_back(entry);
    PB_CHECK(finish_partial(id, refresh, committed, root_fd.get()));
  } else {
    PB_CHECK(remove_committed(dir));
  }
  failpoint("cleaned up");
  std::vector<std::string> changed;
  for (const auto& [path, entry] : draft.entries)
    changed.push_back(path);
  return changed;
}

core::Status TransactionStore::finish_partial(const std::string& id,
                                              const std::vector<std::string>& refresh,
                                              const std::vector<Entry>& committed, int root_fd) {
  const auto dir = tx_dir(id);
  std::error_code ec;
  if (std::filesystem::exists(dir / "remaining.json", ec)) {
    PB_TRY(rest, load(id, "remaining.json"));
    for (const std::string& path : refresh) {
      auto it = rest.entries.find(path);
      if (it == rest.entries.end()) continue;
      PB_TRY(now, take_snapshot(root_fd, path));
      now.changed_during_run = it->second.snapshot.changed_during_run;
      it->second.snapshot = std::move(now);
    }
    PB_CHECK(save(rest));
    failpoint("remaining saved");
    std::filesystem::remove(dir / "remaining.json", ec);
  }
  for (const Entry& entry : committed) {
    if (!entry.base_blob.empty()) std::filesystem::remove(dir / "base" / entry.base_blob, ec);
  }
  // READY before the log: a log without READY is dropped by reconcile, a
  // READY without its log could never be replayed.
  std::filesystem::remove(dir / "READY", ec);
  PB_CHECK(fsync_path(dir));
  std::filesystem::remove(dir / "wal.json", ec);
  return core::ok_status();
}

core::Status TransactionStore::replay(const std::string& id, int root_fd,
                                      std::size_t* temp_files_removed) {
  const auto dir = tx_dir(id);
  std::error_code ec;
  PB_TRY(wal, read_json(dir / "wal.json"));
  Draft draft;
  draft.id = id;
  std::vector<std::string> refresh;
  try {
    for (const auto& step : wal.at("steps")) {
      Entry entry = entry_from_json(step);
      if (const std::string problem = entry_problem(entry); !problem.empty())
        return corrupt(dir / "wal.json", problem);
      draft.entries[entry.path] = std::move(entry);
    }
    for (const auto& item : wal.value("refresh", json::array())) {
      std::string path = core::get_name(item, "path");
      if (auto checked = check_relative_path(path); !checked || *checked != path)
        return corrupt(dir / "wal.json", "bad path " + core::quote_name(path));
      refresh.push_back(std::move(path));
    }
  } catch (const json::exception& error) {
    return corrupt(dir / "wal.json", error.what());
  }
  PB_CHECK(apply(draft, root_fd, temp_files_removed));
  if (wal.value("partial", false)) {
    std::vector<Entry> committed;
    for (const auto& [path, entry] : draft.entries)
      committed.push_back(entry);
    return finish_partial(id, refresh, committed, root_fd);
  }
  return remove_committed(dir);
}

core::Result<Workspace::ReconcileReport> TransactionStore::reconcile() {
  PB_TRY(lock_fd, lock());
  PB_TRY(root_fd, open_root());
  Workspace::ReconcileReport report;
  std::error_code ec;
  const auto base = root_ / ".agent" / "transactions";
  std::vector<std::filesystem::path> dirs;
  for (const auto& item : std::filesystem::directory_iterator(base, ec))
    dirs.push_back(item.path());
  for (const auto& dir : dirs) {
    const std::string id = dir.filename().string();
    const bool ready = std::filesystem::exists(dir / "READY", ec);
    if (ready) {
      // Decided: replay the logged steps to the end.
      PB_CHECK(replay(id, root_fd.get(), &report.removed_temp_files));
      report.replayed.push_back(id);
      continue;
    }
    // Not decided: an interrupted commit rolls back to a pending transaction.
    std::filesystem::remove(dir / "wal.json", ec);
    std::filesystem::remove(dir / "remaining.json", ec);
    if (!std::filesystem::exists(dir / "manifest.json", ec)) {
      std::filesystem::remove_all(dir, ec);  // staging that never completed
      report.removed_staging.push_back(id);
    }
  }
  // The host backend's run copies whose owner died: their lock, <id>.lock
  // beside the directory (taken before the directory is made), is free. A
  // lock file alone is a run that died before its mkdir.
  const auto crashed = core::remove_crashed_runs(
      root_ / ".agent" / "runs",
      [](const std::filesystem::path& dir) {
        std::error_code ignored;
        std::filesystem::remove_all(dir, ignored);
      },
      [](const std::filesystem::path& dir) {
        // Older versions locked <id>/lock inside the directory.
        UniqueFd inner(::open((dir / "lock").c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
        return inner && ::flock(inner.get(), LOCK_EX | LOCK_NB) != 0;
      });
  for (const auto& dir : crashed)
    report.removed_runs.push_back(dir.filename().string());
  return report;
}

}  // namespace pulsebox::workspace
