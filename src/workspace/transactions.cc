#include "workspace/transactions.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstring>
#include <exception>
#include <nlohmann/json.hpp>
#include <set>
#include <span>

#include "audit/chain.h"
#include "core/byte_names.h"
#include "core/fs.h"
#include "core/json_parse.h"
#include "core/json_writer.h"
#include "core/sha256.h"
#include "core/text.h"
#include "workspace/entry_stream.h"
#include "workspace/protected_changes.h"
#include "workspace/safe_open.h"
#include "workspace/store_files.h"
#include "workspace/tree.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::random_hex;
using core::UniqueFd;
using json = nlohmann::json;

std::function<void(std::string_view)> commit_failpoint;

// Floored: a time before 1970 with a fraction (-0.5 s is -1 s + 0.5 s) keeps
// tv_nsec in [0, 1e9), which utimensat requires.
timespec to_timespec(std::int64_t ns) {
  std::int64_t seconds = ns / 1000000000;
  std::int64_t fraction = ns % 1000000000;
  if (fraction < 0) {
    fraction += 1000000000;
    --seconds;
  }
  return {static_cast<time_t>(seconds), static_cast<long>(fraction)};
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

// One entry as a JSON object, appended to `out` (the keys entry_from_json
// reads). Paths and link targets are bytes (core/byte_names.h).
void append_entry_json(std::string& out, const Entry& e) {
  core::JsonObjectWriter j(out);
  j.name("path", e.path);
  j.field("op", to_string(e.op));
  j.field("mode", e.mode);
  j.name("link_target", e.link_target);
  j.field("blob", e.blob);
  j.field("size", e.size);
  if (e.blob_inode != 0) j.field("blob_inode", e.blob_inode);
  j.field("mtime_ns", e.mtime_ns);
  j.field("contains_secret", e.contains_secret);
  const Snapshot& s = e.snapshot;
  j.begin_object("snapshot");
  j.field("type", to_string(s.type));
  j.field("inode", s.inode);
  j.field("device", s.device);
  j.field("size", s.size);
  j.field("mtime_ns", s.mtime_ns);
  j.field("newest_ctime_ns", s.newest_ctime_ns);
  j.field("mode", s.mode);
  j.field("sha256", s.sha256);
  j.field("changed_during_run", s.changed_during_run);
  j.end_object();
  if (!e.base_blob.empty()) j.field("base_blob", e.base_blob);
  if (!e.base_link.empty()) j.name("base_link", e.base_link);
  if (!e.redacted_link.empty()) j.name("redacted_link", e.redacted_link);
  if (e.base_redacted) j.field("base_redacted", true);
  if (e.base_withheld) j.field("base_withheld", true);
  j.finish();
}

Entry entry_from_json(const json& j) {
  Entry e;
  e.path = core::get_name(j, "path");
  e.op = op_from_string(j.at("op").get<std::string>());
  e.mode = j.at("mode").get<unsigned>();
  e.link_target = core::get_name(j, "link_target");
  e.blob = j.at("blob").get<std::string>();
  e.size = j.at("size").get<std::uint64_t>();
  e.blob_inode = j.value("blob_inode", std::uint64_t{0});
  e.mtime_ns = j.value("mtime_ns", std::int64_t{0});
  e.contains_secret = j.value("contains_secret", false);
  e.snapshot = snapshot_from_json(j.at("snapshot"));
  e.base_blob = j.value("base_blob", std::string());
  if (j.contains("base_link")) e.base_link = core::get_name(j, "base_link");
  if (j.contains("redacted_link")) e.redacted_link = core::get_name(j, "redacted_link");
  e.base_redacted = j.value("base_redacted", false);
  e.base_withheld = j.value("base_withheld", false);
  return e;
}

std::string blob_name(std::uint64_t n) {
  return std::to_string(n / kBlobsPerShard) + "/" + std::to_string(n);
}

bool is_blob_name(std::string_view name) {
  if (name == kInPlaceBlob) return true;
  const auto digits = [](std::string_view part) {
    return !part.empty() && part.find_first_not_of("0123456789") == std::string_view::npos;
  };
  const std::size_t slash = name.find('/');
  if (slash == std::string_view::npos) return digits(name);
  return digits(name.substr(0, slash)) && digits(name.substr(slash + 1));
}

std::string blob_relative_path(const Entry& entry) {
  if (entry.blob != kInPlaceBlob) return entry.blob;
  std::string relative;
  relative.reserve(kInPlaceBlob.size() + 1 + entry.path.size());
  relative.append(kInPlaceBlob).append("/").append(entry.path);
  return relative;
}

core::Result<BlobShards::Location> BlobShards::locate(const std::string& blob, bool create) {
  // In place: u/<path>, the path checked at load (entry_problem), its
  // directories opened one name at a time without following a symlink.
  const bool in_place = blob.size() > kInPlaceBlob.size() + 1 && blob.starts_with(kInPlaceBlob) &&
                        blob[kInPlaceBlob.size()] == '/';
  const std::size_t slash = in_place ? blob.rfind('/') : blob.find('/');
  if (slash == std::string::npos) return Location{dir_, blob};
  const std::string shard = blob.substr(0, slash);
  if (!shard_fd_ || shard != shard_) {
    shard_fd_.reset();
    if (in_place) {
      PB_TRY(fd, open_beneath(dir_, shard, O_RDONLY | O_DIRECTORY, ResolveMode::kComponentWalk));
      shard_fd_ = std::move(fd);
    } else {
      if (create && ::mkdirat(dir_, shard.c_str(), 0700) != 0 && errno != EEXIST) {
        return Error::from_errno("workspace", "mkdir blob directory " + shard);
      }
      UniqueFd fd(::openat(dir_, shard.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!fd) return Error::from_errno("workspace", "open blob directory " + shard);
      shard_fd_ = std::move(fd);
    }
    shard_ = shard;
  }
  return Location{shard_fd_.get(), blob.substr(slash + 1)};
}

// What is wrong with an entry read back from a manifest or a write-ahead
// log, "" when nothing: its path must be in normal form, and its blob a name
// this store made (is_blob_name), never a path that could reach outside blobs/
// (a manifest in a planted .agent/ would otherwise copy any file the user
// can read into the workspace).
std::string entry_problem(const Entry& entry) {
  auto checked = check_relative_path(entry.path);
  if (!checked || *checked != entry.path) return "bad path " + core::quote_name(entry.path);
  // The commit reaches each path by name beneath the workspace's root.
  if (entry.path.size() >= PATH_MAX) return "a path over the kernel's limit of PATH_MAX bytes";
  if (entry.op == StagedOp::Write ? !is_blob_name(entry.blob) : !entry.blob.empty()) {
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

core::Result<json> read_entries(const std::filesystem::path& file, std::string_view key,
                                const std::function<void(Entry&&)>& each) {
  // Parsed as it is read, each entry straight from the parser's events: a
  // 100,000-entry manifest's text, or a document of it, is never in memory
  // whole.
  auto fd = core::open_regular_file(file, kMaxTransactionFileBytes, "transaction file");
  if (!fd) return corrupt(file, fd.error().to_string());
  auto streamed = stream_entries(fd->get(), kMaxTransactionFileBytes, file.string(), key, each);
  if (!streamed) return corrupt(file, streamed.error().to_string());
  if (*streamed) {
    if (!(*streamed)->problem.empty()) return corrupt(file, (*streamed)->problem);
    return std::move((*streamed)->document);
  }
  // Its syntax or depth stopped the parse: read again for the diagnostic
  // (line, column, the depth), entries ignored this time.
  if (::lseek(fd->get(), 0, SEEK_SET) != 0) return corrupt(file, "it cannot be read again");
  auto document = core::parse_json_fd_streaming(fd->get(), kMaxTransactionFileBytes, file.string(),
                                                key, [](json&) {});
  if (!document) return corrupt(file, document.error().to_string());
  return corrupt(file, "its entries could not be read");
}

core::Result<json> read_only_entries(const std::filesystem::path& file, std::string_view key,
                                     const std::function<void(Entry&&)>& each) {
  PB_TRY(document, read_entries(file, key, each));
  const auto found = document.is_object() ? document.find(key) : document.end();
  if (found == document.end() || !found->is_array() || !found->empty()) {
    return corrupt(file, "its \"" + std::string(key) + "\" is not one array of entry objects");
  }
  return document;
}

core::Status write_entries(const std::filesystem::path& file, const json& head,
                           std::string_view key, const Entries& entries) {
  return core::write_file_atomic(file, 0600, [&](int fd) -> core::Status {
    constexpr std::size_t kChunk = 1 << 16;
    std::string buffer = json(std::string(key)).dump() + ":[";
    buffer.insert(0, "{");
    bool first = true;
    for (const auto& [path, entry] : entries) {
      buffer += first ? "\n" : ",\n";
      first = false;
      // Names are kept as bytes (JsonObjectWriter::name); any other
      // string that is not UTF-8 throws rather than be written changed.
      append_entry_json(buffer, entry);
      if (buffer.size() >= kChunk) {
        PB_CHECK(core::write_all(fd, buffer, file.string()));
        buffer.clear();
      }
    }
    buffer += "]";
    const std::string rest = head.dump(1);  // an object: "{...}"
    if (rest.size() > 2) buffer += ",";
    buffer.append(rest, 1);
    return core::write_all(fd, buffer, file.string());
  });
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
void adopt_owner(int dir, const std::string& name, const struct stat* replaced,
                 const struct stat* now, const struct stat* dir_stat) {
  if (::geteuid() != 0) return;
  struct stat owner {};
  if (replaced != nullptr) {
    owner = *replaced;
  } else if (dir_stat != nullptr) {
    owner = *dir_stat;
  } else if (::fstat(dir, &owner) != 0) {
    return;
  }
  if (now != nullptr && now->st_uid == owner.st_uid && now->st_gid == owner.st_gid) return;
  (void)::fchownat(dir, name.c_str(), owner.st_uid, owner.st_gid, AT_SYMLINK_NOFOLLOW);
}

bool beneath_new_directory(const Draft& draft, const std::string& path) {
  for (std::size_t slash = path.find('/'); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const auto it = draft.entries.find(std::string_view(path).substr(0, slash));
    if (it != draft.entries.end() && type_after(it->second) == NodeType::Directory &&
        it->second.snapshot.type != NodeType::Directory) {
      return true;
    }
  }
  return false;
}

bool is_at_or_beneath(std::string_view path, std::string_view item) {
  return path == item ||
         (path.size() > item.size() && path.starts_with(item) && path[item.size()] == '/');
}

bool is_selected(const std::vector<std::string>& selected, const std::string& path) {
  if (selected.empty()) return true;
  for (const std::string& item : selected) {
    if (is_at_or_beneath(path, item)) return true;
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

core::Result<int> TransactionStore::shared_root() const {
  if (!shared_root_) {
    PB_TRY(fd, open_root());
    shared_root_ = std::move(fd);
  }
  return shared_root_.get();
}

core::Result<BlobShards*> TransactionStore::blob_shards(const std::string& id) const {
  if (!blobs_fd_ || blobs_id_ != id) {
    PB_TRY(fd, core::open_directory(tx_dir(id) / "blobs"));
    blobs_fd_ = std::move(fd);
    blobs_id_ = id;
    blob_shards_ = BlobShards(blobs_fd_.get());
  }
  return &blob_shards_;
}

bool TransactionStore::commit_decided(const std::string& id) const {
  std::error_code ec;
  return std::filesystem::exists(tx_dir(id) / "READY", ec);
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

core::Result<TransactionStore::Unfinished> TransactionStore::unfinished_ids() const {
  Unfinished found;
  const auto dir = root_ / ".agent" / "transactions";
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return found;
    return unreadable(dir, errno);
  }
  const std::string importing = "/" + std::string(kImportManifest);
  for (const std::string& name : list_directory(fd.get())) {
    struct stat st {};
    if (::fstatat(fd.get(), (name + "/READY").c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      found.decided.push_back(name);
    if (::fstatat(fd.get(), (name + importing).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
      found.importing.push_back(name);
  }
  return found;
}

core::Status TransactionStore::promote_import(const std::string& id) const {
  const auto dir = tx_dir(id);
  PB_CHECK(fsync_path(dir / "blobs"));  // the moved directory's name, before a manifest names it
  if (::rename((dir / kImportManifest).c_str(), (dir / "manifest.json").c_str()) != 0)
    return Error::from_errno("workspace", "make " + (dir / kImportManifest).string() +
                                              " the manifest of transaction " + id);
  return fsync_path(dir);
}

core::Status TransactionStore::finish_import(const std::string& id) const {
  PB_CHECK(check_directories(id));
  const auto moved = tx_dir(id) / "blobs" / kInPlaceBlob;
  UniqueFd fd(::open(moved.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno != ENOENT) return Error::from_errno("workspace", "open " + moved.string());
    // Not moved: the run's directory is whole where it was. The
    // transaction the import began goes with the draft when it holds
    // nothing (one that cannot be removed stays listed, empty, as before).
    const auto draft = tx_dir(id) / kImportManifest;
    auto begun = load(id);
    struct stat ready {};
    if (begun && begun->entries.empty() && ::lstat((tx_dir(id) / "READY").c_str(), &ready) != 0) {
      std::error_code ec;
      std::filesystem::remove_all(tx_dir(id), ec);
      if (!ec) return core::ok_status();
    }
    if (::unlink(draft.c_str()) != 0 && errno != ENOENT)
      return Error::from_errno("workspace", "remove " + draft.string());
    return core::ok_status();
  }
  // Killed between the move and its fix-up, the directory has the run's
  // modes: closed to others here, and its owner's rwx on every directory,
  // or an ordinary user's commit could not rename files out of a read-only
  // one past its commit point (whoever finishes the import: root may for
  // a user's workspace). The staged modes are the draft's.
  if (::fchmod(fd.get(), 0700) != 0)
    return Error::from_errno("workspace", "change the mode of " + moved.string());
  if (!make_directories_owner_writable(fd.get())) {
    return Error(ErrorKind::kIo, "workspace",
                 "could not give every directory beneath " + moved.string() +
                     " its owner's rwx (transaction " + id + ")");
  }
  return promote_import(id);
}

core::Result<std::vector<std::string>> TransactionStore::finish_decided() {
  PB_TRY(found, unfinished_ids());
  if (found.decided.empty() && found.importing.empty()) return found.decided;  // no lock taken
  PB_TRY(lock_fd, lock());
  PB_TRY(root_fd, open_root());
  PB_TRY(still, unfinished_ids());  // another process may have finished them
  // Decided commits first: a workspace half applied comes before an import.
  std::size_t temp_files = 0;
  for (const std::string& id : still.decided)
    PB_CHECK(replay(id, root_fd.get(), &temp_files));
  for (const std::string& id : still.importing)
    PB_CHECK(finish_import(id));
  return still.decided;
}

bool is_transaction_id(std::string_view id) {
  if (id.size() < 19 || id.size() > 64 || !id.starts_with("tx-") || id[17] != '-') return false;
  const auto all_of = [](std::string_view text, const char* set) {
    return !text.empty() && text.find_first_not_of(set) == std::string_view::npos;
  };
  return all_of(id.substr(3, 14), "0123456789") && all_of(id.substr(18), "0123456789abcdef");
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
  Draft draft;
  const auto add = [&draft](Entry&& entry) {
    draft.total_bytes += entry.size;
    if (!entry.base_blob.empty()) draft.base_bytes += entry.snapshot.size;
    std::string path = entry.path;
    draft.entries.insert_or_assign(std::move(path), std::move(entry));
  };
  PB_TRY(head, load_each(id, add, file));
  draft.id = std::move(head.id);
  draft.created = std::move(head.created);
  draft.origin = std::move(head.origin);
  draft.next_blob = head.next_blob;
  draft.refused = std::move(head.refused);
  draft.notes = std::move(head.notes);
  return draft;
}

core::Status TransactionStore::check_directories(const std::string& id) const {
  const auto dir = tx_dir(id);
  struct Wanted {
    std::filesystem::path path;
    bool optional;
  };
  const Wanted wanted[] = {
      {root_ / ".agent", false}, {dir.parent_path(), false}, {dir, false},
      {dir / "blobs", true},     {dir / "base", true},       {dir / "redacted", true}};
  for (const auto& [path, optional] : wanted) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) {
      if (errno == ENOENT && optional) continue;
      if (errno == ENOENT) {
        return Error(
            ErrorKind::kInvalidInput, "workspace",
            "no transaction \"" + id + "\" in " + root_.string() + " (see `pulsebox changes`)");
      }
      return unreadable(path, errno);
    }
    if (!S_ISDIR(st.st_mode)) {
      return Error(ErrorKind::kSecurity, "workspace",
                   path.string() +
                       " is not a directory (a symlink?): pulsebox never made this transaction "
                       "so; refusing to use it (`pulsebox discard " +
                       id + "` removes it)");
    }
  }
  return core::ok_status();
}

core::Result<Draft> TransactionStore::load_each(const std::string& id,
                                                const std::function<void(Entry&&)>& each,
                                                std::string_view file) const {
  if (id.empty() || id.find('/') != std::string::npos || id.front() == '.') {
    return Error(ErrorKind::kInvalidInput, "workspace", "\"" + id + "\" is not a transaction id");
  }
  PB_CHECK(check_directories(id));
  const auto manifest = tx_dir(id) / file;
  std::error_code ec;
  if (!std::filesystem::exists(manifest, ec)) {
    return Error(
        ErrorKind::kInvalidInput, "workspace",
        "no transaction \"" + id + "\" in " + root_.string() + " (see `pulsebox changes`)");
  }
  Draft draft;
  // Thrown inside the parser, the caller's own JSON error would be taken for
  // the file's: kept, no more calls, and thrown once the file is read.
  std::exception_ptr thrown;
  const auto each_until_thrown = [&](Entry&& entry) {
    if (thrown) return;
    try {
      each(std::move(entry));
    } catch (...) {
      thrown = std::current_exception();
    }
  };
  auto read = read_only_entries(manifest, "entries", each_until_thrown);
  if (thrown) std::rethrow_exception(thrown);
  PB_TRY(document, std::move(read));
  try {
    draft.id = document.at("id").get<std::string>();
    draft.created = document.at("created").get<std::string>();
    draft.origin = document.contains("origin") ? core::get_name(document, "origin") : "";
    draft.next_blob = document.at("next_blob").get<std::uint64_t>();
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
  json document = {
      {"version", 1}, {"id", draft.id}, {"created", draft.created}, {"next_blob", draft.next_blob}};
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
  // The entries are written one at a time: never one document of them all.
  return write_entries(tx_dir(draft.id) / file, document, "entries", draft.entries);
}

core::Status TransactionStore::discard(const std::string& id) {
  PB_TRY(lock_fd, lock());
  // A damaged manifest is no reason to keep the transaction: that is how
  // the user gets rid of it.
  auto draft = load(id);
  if (!draft && draft.error().kind() != ErrorKind::kRecovery) return std::move(draft).error();
  if (commit_decided(id)) {
    return Error(
        ErrorKind::kRecovery, "workspace",
        "transaction " + id + " is being committed; run `pulsebox reconcile` to finish it");
  }
  std::error_code ec;
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
  if (commit_decided(id)) {
    return Error(ErrorKind::kRecovery, "workspace", "transaction " + id + " is being committed");
  }
  std::error_code ec;
  std::vector<std::string> blobs, bases;
  for (auto it = draft.entries.begin(); it != draft.entries.end();) {
    if (!is_selected(selected, it->first)) {
      ++it;
      continue;
    }
    if (!it->second.blob.empty()) blobs.push_back(blob_relative_path(it->second));
    if (!it->second.base_blob.empty()) bases.push_back(it->second.base_blob);
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
  // Through the shards, opened without following a symlink (check_directories
  // covered blobs/ and base/ themselves).
  if (!blobs.empty()) {
    PB_TRY(blob_dir, core::open_directory(tx_dir(id) / "blobs"));
    BlobShards shards(blob_dir.get());
    for (const std::string& blob : blobs) {
      if (auto found = shards.locate(blob)) (void)::unlinkat(found->dir, found->name.c_str(), 0);
    }
  }
  for (const std::string& base : bases)
    std::filesystem::remove(tx_dir(id) / "base" / base, ec);
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
  PB_TRY(root_fd, shared_root());
  PB_TRY(protected_change, find_protected_change(root_fd, draft, entry));
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

namespace {

// Links `source` as `blob` in blobs_fd; false when the file system will
// not (another one: EXDEV, ...), and the blob is then written as a copy.
// The open file itself is linked (by its fd, else through /proc/self/fd,
// which needs no privilege): the inode that was read and scanned,
// whatever its name is now. Without /proc, its name, checked to still be
// that inode.
core::Result<bool> link_blob(const TransactionStore::BlobSource& source, int blobs_fd,
                             const std::string& blob) {
  // The open file itself, where the kernel allows it (CAP_DAC_READ_SEARCH,
  // as root): a quarter of a link through /proc went to walking that path.
  if (::linkat(source.fd, "", blobs_fd, blob.c_str(), AT_EMPTY_PATH) == 0) return true;
  if (errno != EPERM && errno != ENOENT) return false;
  char opened[40];
  std::snprintf(opened, sizeof opened, "/proc/self/fd/%d", source.fd);
  if (::linkat(AT_FDCWD, opened, blobs_fd, blob.c_str(), AT_SYMLINK_FOLLOW) == 0) return true;
  if (errno != ENOENT) return false;
  if (::linkat(source.dir, source.name.c_str(), blobs_fd, blob.c_str(), 0) != 0) {
    return false;
  }
  struct stat linked {};
  if (::fstatat(blobs_fd, blob.c_str(), &linked, AT_SYMLINK_NOFOLLOW) != 0 ||
      linked.st_dev != source.st.st_dev || linked.st_ino != source.st.st_ino) {
    ::unlinkat(blobs_fd, blob.c_str(), 0);
    return Error(ErrorKind::kSecurity, "workspace",
                 core::quote_name(source.name) + " was replaced while it was read");
  }
  return true;
}

}  // namespace

core::Status TransactionStore::stage(Draft& draft, Entry entry, std::string_view bytes,
                                     bool check_policy, const BlobSource* source) {
  PB_TRY(path, check_relative_path(entry.path));
  entry.path = path;
  // One tree: nothing is staged beneath a path the transaction makes a file,
  // a symlink or nothing (its commit could not apply it, and would fail past
  // its commit point). The same walk says whether the path lies beneath a
  // new directory (beneath_new_directory): each ancestor is looked up once.
  bool beneath_new = false;
  for (auto slash = entry.path.find('/'); slash != std::string::npos;
       slash = entry.path.find('/', slash + 1)) {
    const auto above = draft.entries.find(std::string_view(entry.path).substr(0, slash));
    if (above == draft.entries.end()) continue;
    const NodeType above_type = type_after(above->second);
    if (above_type == NodeType::Directory) {
      beneath_new = beneath_new || above->second.snapshot.type != NodeType::Directory;
      continue;
    }
    // Beneath a staged symlink the commit would write through it.
    const bool symlink = above_type == NodeType::Symlink;
    const char* as = above->second.op == StagedOp::Delete ? " for deletion"
                     : symlink                            ? " as a symlink"
                                                          : " as a file";
    return Error(symlink ? ErrorKind::kSecurity : ErrorKind::kInvalidInput, "workspace",
                 "refusing to stage " + core::quote_name(entry.path) + ": transaction " + draft.id +
                     " stages " + core::quote_name(above->first) + as +
                     "; stage a directory there first");
  }
  // The path's own entry when it is staged again (looked up once: nothing
  // below adds or removes it before it is replaced).
  const auto staged = draft.entries.find(entry.path);
  const bool restaged = staged != draft.entries.end();
  // An unread source's content is read only if it must be copied (or
  // scanned) after all.
  const bool unread = source != nullptr && source->unread;
  const std::uint64_t content_size =
      unread ? static_cast<std::uint64_t>(source->st.st_size) : bytes.size();
  std::string loaded;
  const auto load_content = [&]() -> core::Status {
    if (!unread || !loaded.empty() || content_size == 0) return core::ok_status();
    PB_TRY(read, core::read_all(source->fd, limits_.max_file_bytes, entry.path));
    if (read.size() != content_size) {
      return Error(ErrorKind::kSecurity, "workspace",
                   core::quote_name(entry.path) + " changed size while it was staged");
    }
    loaded = std::move(read);
    bytes = loaded;
    return core::ok_status();
  };
  if (entry.op == StagedOp::Write) {
    if (content_size > limits_.max_file_bytes) {
      return Error(ErrorKind::kResource, "workspace",
                   core::quote_name(entry.path) + ": " + std::to_string(content_size) +
                       " bytes is over the per-file limit of " +
                       std::to_string(limits_.max_file_bytes));
    }
    std::uint64_t total = draft.staged_bytes() + content_size;
    if (restaged) total -= staged->second.size;
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
  if (restaged) {
    entry.snapshot = staged->second.snapshot;  // the first snapshot is the one that counts
    entry.base_blob = staged->second.base_blob;
    entry.base_link = staged->second.base_link;
    entry.base_redacted = staged->second.base_redacted;
    entry.base_withheld = staged->second.base_withheld;
  } else if (beneath_new) {
    entry.snapshot = Snapshot{};
  } else {
    PB_TRY(root_fd, shared_root());
    PB_TRY(snapshot, take_snapshot(root_fd, entry.path));
    entry.snapshot = std::move(snapshot);
  }
  if (check_policy) PB_CHECK(check_entry_policy(draft, entry));
  if (!restaged && entry.snapshot.exists()) {
    PB_TRY(root_fd, shared_root());
    PB_CHECK(keep_base(draft, entry, root_fd));
  }
  entry.contains_secret = false;
  entry.redacted_link.clear();
  // The command names its paths too: a name holding a value flags the
  // change (the commit would write the value into the workspace's names).
  // A session's runs found theirs while the values were known.
  const bool secret_name = beneath_known_secret_name(entry.path) ||
                           (reads_new_file_contents() && secrets_->contains_secret(entry.path));
  // A session's copy of this kind of entry: a file's content is never
  // shown as a link's target (a later run that knew no value replaced it).
  const std::string* known_redacted = nullptr;
  const auto* known_copies = entry.op == StagedOp::Symlink ? known_secret_links_
                             : entry.op == StagedOp::Write ? known_secrets_
                                                           : nullptr;
  if (known_copies != nullptr) {
    if (auto known = known_copies->find(entry.path); known != known_copies->end())
      known_redacted = &known->second;
  }
  if (entry.op == StagedOp::Symlink) {
    if (reads_new_file_contents() &&
        (secret_name || secrets_->contains_secret(entry.link_target))) {
      entry.contains_secret = true;
      entry.redacted_link = secrets_->redact(entry.link_target);
    } else if (known_redacted != nullptr) {
      entry.contains_secret = true;
      entry.redacted_link = *known_redacted;
    } else if (secret_name) {
      entry.contains_secret = true;
      entry.redacted_link = entry.link_target;  // a session's run found no value in it
    }
  } else if (secret_name && entry.op != StagedOp::Write) {
    entry.contains_secret = true;  // nothing of its own is shown
  }
  if (entry.op == StagedOp::Write) {
    const bool in_place = source != nullptr && source->in_place;
    entry.blob = in_place ? std::string(kInPlaceBlob) : blob_name(draft.next_blob++);
    // Its path only for messages: built for each of 100,000 files it was a
    // visible part of an import's time.
    const auto blob_path = [&] { return (tx_dir(draft.id) / "blobs" / entry.blob).string(); };
    bool linked = in_place;  // it is the blob where it lies
    if (in_place) *source->linked = true;
    if (!in_place && source != nullptr) {
      PB_TRY(shards, blob_shards(draft.id));
      PB_TRY(blob, shards->locate(entry.blob, /*create=*/true));
      PB_TRY(done, link_blob(*source, blob.dir, blob.name));
      linked = done;
      *source->linked = done;
    }
    if (!linked) {
      PB_TRY(shards, blob_shards(draft.id));
      PB_TRY(blob, shards->locate(entry.blob, /*create=*/true));
      PB_CHECK(load_content());
      UniqueFd fd(::openat(blob.dir, blob.name.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
      if (!fd) return Error::from_errno("workspace", "create " + blob_path());
      PB_CHECK(core::write_all(fd.get(), bytes, blob_path()));
      // The blob is renamed into place at commit, so it gets its final mode
      // and modification time now (a linked one has them already).
      if (::fchmod(fd.get(), entry.mode) != 0) {
        return Error::from_errno("workspace", "chmod " + blob_path());
      }
      if (entry.mtime_ns != 0) {
        const timespec times[2] = {{0, UTIME_OMIT}, to_timespec(entry.mtime_ns)};
        if (::futimens(fd.get(), times) != 0) {
          return Error::from_errno("workspace", "set the time of " + blob_path());
        }
      }
    }
    entry.size = content_size;
    // Only the redacted copy is ever shown (diff).
    std::optional<std::string> redacted;
    if (reads_new_file_contents()) PB_CHECK(load_content());
    if (reads_new_file_contents() && (secret_name || secrets_->contains_secret(bytes))) {
      redacted = secrets_->redact(bytes);
    } else if (known_redacted != nullptr) {
      redacted = *known_redacted;
    } else if (secret_name) {
      // Only its name holds a value (a session's run found none in the
      // content, or could not check it: over kMaxScannedBytes, shown as it
      // is, as before). The diff reads a flagged file's redacted copy.
      PB_CHECK(load_content());
      redacted = std::string(bytes);
    }
    if (redacted) {
      entry.contains_secret = true;
      const auto file = tx_dir(draft.id) / "redacted" / blob_relative_path(entry);
      std::error_code ec;
      std::filesystem::create_directories(file.parent_path(), ec);
      PB_CHECK(core::write_file_atomic(file, *redacted, 0600));
    }
  }
  if (restaged) {
    draft.total_bytes -= staged->second.size;
    if (!staged->second.blob.empty()) {
      std::error_code ec;
      const std::string blob = blob_relative_path(staged->second);
      std::filesystem::remove(tx_dir(draft.id) / "blobs" / blob, ec);
      std::filesystem::remove(tx_dir(draft.id) / "redacted" / blob, ec);
    }
    failpoint("restaged " + entry.path);
  }
  // Only entries beneath the path go: `staged` stays valid.
  if (type_after(entry) != NodeType::Directory) drop_beneath(draft, entry.path);
  draft.total_bytes += entry.size;
  if (restaged) {
    staged->second = std::move(entry);
  } else {
    // The key is copied from the entry before the entry is moved.
    draft.entries.emplace(entry.path, std::move(entry));
  }
  return core::ok_status();
}

bool TransactionStore::beneath_known_secret_name(std::string_view path) const {
  if (known_secret_names_ == nullptr || known_secret_names_->empty()) return false;
  for (std::size_t end = path.find('/');; end = path.find('/', end + 1)) {
    if (known_secret_names_->contains(path.substr(0, end))) return true;
    if (end == std::string_view::npos) return false;
  }
}

void TransactionStore::drop_beneath(Draft& draft, const std::string& path) {
  // A file, symlink or deletion staged over staged children replaces them,
  // as it would on a file system.
  const std::string prefix = path + "/";
  std::error_code ec;
  for (auto it = draft.entries.lower_bound(prefix);
       it != draft.entries.end() && it->first.starts_with(prefix);) {
    const Entry& child = it->second;
    draft.total_bytes -= child.size;
    if (!child.blob.empty()) {
      const std::string blob = blob_relative_path(child);
      std::filesystem::remove(tx_dir(draft.id) / "blobs" / blob, ec);
      std::filesystem::remove(tx_dir(draft.id) / "redacted" / blob, ec);
    }
    if (!child.base_blob.empty())
      std::filesystem::remove(tx_dir(draft.id) / "base" / child.base_blob, ec);
    it = draft.entries.erase(it);
  }
}

core::Status TransactionStore::keep_base(Draft& draft, Entry& entry, int root_fd) {
  const Snapshot& snapshot = entry.snapshot;
  if (snapshot.type != NodeType::File && snapshot.type != NodeType::Symlink)
    return core::ok_status();
  // With a registered secret value, the base is checked for it as it is
  // kept (or was, by a session's run: known); one that cannot be kept and
  // checked is never shown (a diff would read the path's current content,
  // which nothing checked).
  const bool checked = secrets_ != nullptr && secrets_->secret_count() > 0;
  const ImportOptions::KnownBase* known = nullptr;
  bool unchecked_there = false;  // a session's run could not check it (KnownBase::subtree)
  if (known_bases_ != nullptr && !known_bases_->empty()) {
    if (auto found = known_bases_->find(entry.path); found != known_bases_->end())
      known = &found->second;
    for (auto slash = entry.path.find('/'); slash != std::string::npos && !unchecked_there;
         slash = entry.path.find('/', slash + 1)) {
      auto above = known_bases_->find(entry.path.substr(0, slash));
      unchecked_there = above != known_bases_->end() && above->second.subtree;
    }
    unchecked_there = unchecked_there || (known != nullptr && known->subtree);
  }
  entry.base_withheld = checked || known != nullptr || withhold_unknown_bases_ || unchecked_there;
  // Values given now need not be the session's: what its runs could not
  // check is never shown.
  if (unchecked_there || (known == nullptr && withhold_unknown_bases_) ||
      (known != nullptr && !known->redacted)) {
    return core::ok_status();
  }
  if (snapshot.type == NodeType::File &&
      (snapshot.size > limits_.max_file_bytes ||
       draft.base_bytes + snapshot.size > limits_.max_total_bytes)) {
    return core::ok_status();  // not kept: diff shows the current file, unless withheld
  }
  std::string name;
  auto parent = open_parent(root_fd, entry.path, &name);
  if (!parent) return core::ok_status();
  auto read = read_file_or_link(parent->get(), name, snapshot.type == NodeType::Symlink,
                                limits_.max_file_bytes, entry.path);
  if (!read) return core::ok_status();
  std::string content = std::move(read).value();
  // Changed since the snapshot: no base rather than the wrong one.
  if (core::sha256_hex(content) != snapshot.sha256) return core::ok_status();
  const std::uint64_t size = content.size();
  if (known != nullptr && snapshot.sha256 != known->sha256 && !checked) {
    return core::ok_status();  // not what was checked, and nothing to check it with now
  }
  if (known != nullptr && snapshot.sha256 == known->sha256) {
    content = checked ? secrets_->redact(*known->redacted) : *known->redacted;
    entry.base_redacted = true;
  } else if (checked && secrets_->contains_secret(content)) {
    content = secrets_->redact(content);
    entry.base_redacted = true;
  }
  // Redaction marks can be longer than the values: over the limit, the
  // diff could not read it back.
  if (content.size() > limits_.max_file_bytes) {
    entry.base_redacted = false;
    return core::ok_status();
  }
  entry.base_withheld = false;
  if (snapshot.type == NodeType::Symlink) {
    entry.base_link = std::move(content);
    return core::ok_status();
  }
  const auto dir = tx_dir(draft.id) / "base";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string base = std::to_string(draft.next_blob++);
  const auto path = dir / base;
  // A file of this name is one a failed staging left (the counter is saved
  // with the manifest): overwrite it.
  UniqueFd out(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::from_errno("workspace", "create " + path.string());
  PB_CHECK(core::write_all(out.get(), content, path.string()));
  entry.base_blob = base;
  draft.base_bytes += size;  // as load() counts it: the snapshot's size
  return core::ok_status();
}

}  // namespace pulsebox::workspace
