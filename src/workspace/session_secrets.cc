// A session's marks of registered secret values (SessionSecrets in
// session_store.h): the files its runs wrote holding one, and what they
// replaced in the workspace that held one, each checked while its run knew
// the values, so that the session's review (without them) shows neither.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <climits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/byte_names.h"
#include "core/fs.h"
#include "core/text.h"
#include "pulsebox/error.h"
#include "pulsebox/secrets.h"
#include "workspace/overlay_reader.h"
#include "workspace/owner_opened.h"
#include "workspace/safe_open.h"
#include "workspace/secret_base.h"
#include "workspace/session_store.h"
#include "workspace/store_files.h"

namespace pulsebox::workspace {

using core::Error;
using core::ErrorKind;
using core::UniqueFd;
using nlohmann::json;
namespace fs = std::filesystem;

BaseCheckBudget base_check_budget;

namespace {

json written_json(const std::string& path, const std::string& file) {
  json item = {{"redacted", file}};
  core::put_name(item, "path", path);
  return item;
}

json name_json(const std::string& path) {
  json item = json::object();
  core::put_name(item, "path", path);
  return item;
}

json base_json(const std::string& path, const SessionSecrets::Base& base) {
  json item = {{"redacted", base.redacted}, {"sha256", base.sha256}};
  if (base.subtree) item["subtree"] = true;
  core::put_name(item, "path", path);
  return item;
}

// What an item takes in the record as save() writes it (dump(2), nested
// two levels deeper than here: 4 more spaces on each of its lines).
std::uint64_t record_size(const json& item) {
  return item.dump(2).size() + 4 * (item.size() + 2) + 2;
}

// A copy's name before it is made: the longest a run gives.
constexpr const char* kLongestCopyName = "18446744073709551615";

}  // namespace

// One run's check: its values, where its copies go, what it may still read
// and mark.
struct SecretScan {
  const SecretScrubber& secrets;
  UniqueFd workspace_root;
  UniqueFd storage;
  UniqueFd redacted;        // storage/redacted, made on the first copy
  std::uint64_t next_name;  // the layer's number keeps runs' copies apart
  std::uint64_t marks_bytes = 0;
  std::uint64_t marks_of_run = 0;
  std::uint64_t paths_read = 0;
  std::uint64_t bytes_read = 0;

  bool budget_spent() const {
    return paths_read >= base_check_budget.paths || bytes_read >= base_check_budget.bytes;
  }
};

namespace {

json copies_json(const std::map<std::string, std::string>& copies) {
  json out = json::array();
  for (const auto& [path, file] : copies)
    out.push_back(written_json(path, file));
  return out;
}

json paths_json(const std::set<std::string, std::less<>>& paths) {
  json out = json::array();
  for (const std::string& path : paths)
    out.push_back(name_json(path));
  return out;
}

}  // namespace

json OpenSession::secrets_json() const {
  return copies_json(secrets_.written);
}

json OpenSession::secret_links_json() const {
  return copies_json(secrets_.links);
}

json OpenSession::secret_names_json() const {
  return paths_json(secrets_.named);
}

json OpenSession::secret_unchecked_json() const {
  return paths_json(secrets_.unchecked);
}

json OpenSession::secret_bases_json() const {
  json out = json::array();
  for (const auto& [path, base] : secrets_.bases)
    out.push_back(base_json(path, base));
  return out;
}

json OpenSession::secret_values_json() const {
  if (secrets_.value_key.empty()) return nullptr;
  return {{"key", secrets_.value_key}, {"fingerprints", secrets_.value_fingerprints}};
}

std::uint64_t OpenSession::record_bytes() const {
  std::uint64_t bytes = 0;
  for (const auto& [path, file] : secrets_.written)
    bytes += record_size(written_json(path, file));
  for (const auto& [path, file] : secrets_.links)
    bytes += record_size(written_json(path, file));
  for (const auto* paths : {&secrets_.named, &secrets_.unchecked}) {
    for (const std::string& path : *paths)
      bytes += record_size(name_json(path));
  }
  for (const std::string& fingerprint : secrets_.value_fingerprints)
    bytes += record_size(json(fingerprint));
  for (const auto& [path, base] : secrets_.bases)
    bytes += record_size(base_json(path, base));
  return bytes;
}

namespace {

// Each copy is written unsynced, and scan_for_secrets syncs them all at
// once before the record names them: a sync each made a run that deleted
// 20,000 such files take a minute.
core::Result<std::string> keep_redacted(SecretScan& scan, const fs::path& dir,
                                        const std::string& text, std::vector<std::string>& made) {
  if (!scan.redacted) {
    if (::mkdirat(scan.storage.get(), "redacted", 0700) != 0 && errno != EEXIST) {
      return Error::from_errno("session", "creating " + dir.string());
    }
    scan.redacted.reset(
        ::openat(scan.storage.get(), "redacted", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!scan.redacted) return Error::from_errno("session", "open " + dir.string());
  }
  const std::string name = std::to_string(scan.next_name++);
  UniqueFd out(::openat(scan.redacted.get(), name.c_str(),
                        O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::from_errno("session", "create " + (dir / name).string());
  made.push_back(name);
  PB_CHECK(core::write_all(out.get(), text, (dir / name).string()));
  return name;
}

}  // namespace

// The run's layer holds every file it wrote: each is checked now, while the
// values are known (written marks first: a run whose marks do not fit is
// refused, while bases that do not fit are withheld). A file that no
// longer holds one, or that the run deleted, loses its mark. What the
// layer replaces or hides in the workspace is checked too
// (check_bases_of).
core::Status OpenSession::scan_for_secrets(const fs::path& layer, const SecretScrubber& secrets) {
  SecretScan scan{.secrets = secrets, .next_name = next_layer_ * 1000000};
  scan.storage.reset(::open(storage_.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!scan.storage) return Error::from_errno("session", "open " + storage_.string());
  const fs::path& workspace = workspace_->root();
  scan.workspace_root.reset(
      ::open(workspace.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!scan.workspace_root) return Error::from_errno("session", "open " + workspace.string());
  scan.marks_bytes = record_bytes();
  UniqueFd root(::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!root) return Error::from_errno("session", "open " + layer.string());
  PB_CHECK(mark_written(root.get(), scan));
  // Room for the values' digests before the bases take theirs (a base that
  // finds none is withheld; a digest that finds none refuses the run), and
  // again for names marked beneath an opaque directory.
  PB_CHECK(keep_fingerprints(scan));
  PB_CHECK(check_bases_of(root.get(), scan));
  PB_CHECK(keep_fingerprints(scan));
  if (scan.redacted && ::syncfs(scan.redacted.get()) != 0) {
    return Error::from_errno("session", "sync " + (storage_ / "redacted").string());
  }
  info_.secret_paths = marked_paths();
  return core::ok_status();
}

// The values are needed by later runs while a mark made with them is held;
// with none held, no run needs any.
core::Status OpenSession::keep_fingerprints(SecretScan& scan) {
  if (!secrets_.holds_marks()) {
    for (const std::string& fingerprint : secrets_.value_fingerprints)
      scan.marks_bytes -= std::min(scan.marks_bytes, record_size(json(fingerprint)));
    secrets_.value_key.clear();
    secrets_.value_fingerprints.clear();
    return core::ok_status();
  }
  if (secrets_.value_key.empty()) secrets_.value_key = core::random_hex(64);
  for (std::string& fingerprint : scan.secrets.fingerprints(secrets_.value_key)) {
    if (secrets_.value_fingerprints.contains(fingerprint)) continue;
    const std::uint64_t size = record_size(json(fingerprint));
    if (scan.marks_bytes + size > kMaxSecretRecordBytes) {
      return Error(ErrorKind::kResource, "session",
                   "the run registers more secret values than the session's record can "
                   "remember beside its marks");
    }
    secrets_.value_fingerprints.insert(std::move(fingerprint));
    scan.marks_bytes += size;
  }
  return core::ok_status();
}

// Whether the session's layers below hold a whiteout or a non-directory at
// `path` (the first of them that holds anything there): a directory a run
// makes there hides what the workspace holds beneath it, since the merge
// marks it opaque (merge_directory), even where the kernel did not.
bool OpenSession::hides_below(const std::string& path) const {
  for (const fs::path& layer : info_.layers) {
    UniqueFd root(::open(layer.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!root) continue;
    auto found = open_beneath(root.get(), path, O_PATH | O_NOFOLLOW);
    if (!found) continue;
    struct stat st {};
    if (::fstat(found->get(), &st) != 0) continue;
    if (!S_ISDIR(st.st_mode)) return true;  // a whiteout, a file, a symlink
    UniqueFd dir(::openat(found->get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir && is_opaque(dir.get())) return false;  // it hides the workspace's itself
  }
  return false;
}

bool OpenSession::needs_values_beyond(const SecretScrubber& values) const {
  if (secrets_.value_key.empty()) return false;  // no mark held (or an older pulsebox's)
  const std::vector<std::string> given = values.fingerprints(secrets_.value_key);
  const std::set<std::string> known(given.begin(), given.end());
  return std::ranges::any_of(secrets_.value_fingerprints,
                             [&](const std::string& needed) { return !known.contains(needed); });
}

std::vector<std::string> OpenSession::marked_paths() const {
  std::set<std::string> paths;
  for (const auto& [path, file] : secrets_.written)
    paths.insert(path);
  for (const auto& [path, file] : secrets_.links)
    paths.insert(path);
  paths.insert(secrets_.named.begin(), secrets_.named.end());
  return {paths.begin(), paths.end()};
}

// What the run replaced at `path` takes its marks with it: those at the
// path (a directory made there), or everything beneath it too (a file,
// symlink or whiteout there, or an opaque directory). What the layer holds
// there is walked and marked again, names too (a mark kept for a name no
// longer there would keep its values needed for good).
void OpenSession::forget_marks_at(const std::string& path, Forget which, SecretScan& scan) {
  const auto replaced = [&](const std::string& marked) {
    return which == Forget::kAt ? marked == path : core::is_at_or_beneath(marked, path);
  };
  for (auto* copies : {&secrets_.written, &secrets_.links}) {
    std::erase_if(*copies, [&](const auto& item) {
      if (!replaced(item.first)) return false;
      scan.marks_bytes -=
          std::min(scan.marks_bytes, record_size(written_json(item.first, item.second)));
      superseded_copies_.push_back(item.second);
      return true;
    });
  }
  for (auto* marks : {&secrets_.unchecked, &secrets_.named}) {
    std::erase_if(*marks, [&](const std::string& marked) {
      if (!replaced(marked)) return false;
      scan.marks_bytes -= std::min(scan.marks_bytes, record_size(name_json(marked)));
      return true;
    });
  }
}

namespace {

core::Status no_room_for_marks(const SecretScan& scan) {
  return Error(ErrorKind::kResource, "session",
               "the run's files hold registered secret values in more places than the "
               "session's record can remember (there was room for " +
                   std::to_string(scan.marks_of_run) + " more)");
}

}  // namespace

// A path whose name holds a value (the mark covers what is beneath it), or a
// file too large to check.
core::Status OpenSession::mark_path(std::set<std::string, std::less<>>& marks,
                                    const std::string& path, SecretScan& scan) {
  if (marks.contains(path)) return core::ok_status();
  const std::uint64_t size = record_size(name_json(path));
  if (scan.marks_bytes + size > kMaxSecretRecordBytes) return no_room_for_marks(scan);
  marks.insert(path);
  scan.marks_bytes += size;
  ++scan.marks_of_run;
  return core::ok_status();
}

// A symlink whose target holds a value: its redacted target is kept as a
// written file's redacted content is.
core::Status OpenSession::mark_link(int dirfd, const std::string& name, const std::string& path,
                                    SecretScan& scan) {
  std::string target(PATH_MAX, '\0');
  const ssize_t length = ::readlinkat(dirfd, name.c_str(), target.data(), target.size());
  if (length < 0) {
    return Error::from_errno("session", core::quote_name(path) +
                                            ": the run's symlink cannot be read, so it cannot "
                                            "be checked for the registered secret values");
  }
  target.resize(static_cast<std::size_t>(length));
  if (!scan.secrets.contains_secret(target)) return core::ok_status();
  const std::uint64_t size = record_size(written_json(path, kLongestCopyName));
  if (scan.marks_bytes + size > kMaxSecretRecordBytes) return no_room_for_marks(scan);
  PB_TRY(file,
         keep_redacted(scan, storage_ / "redacted", scan.secrets.redact(target), new_copies_));
  secrets_.links[path] = std::move(file);
  scan.marks_bytes += size;
  ++scan.marks_of_run;
  return core::ok_status();
}

core::Status OpenSession::mark_written(int layer_fd, SecretScan& scan) {
  const fs::path dir = storage_ / "redacted";
  std::function<core::Status(int, const std::string&, int, bool)> walk =
      [&](int dirfd, const std::string& prefix, int depth, bool beneath_named) -> core::Status {
    if (depth > kMaxLayerDepth) return core::ok_status();
    // What cannot be read cannot be checked, and a later run can make it
    // readable (a merge gives the layer below the directory's new mode):
    // the run is refused. Its own files are read whatever their mode
    // (OwnerOpened); another owner's (a mapped range's) may not be.
    const auto unreadable = [&](const std::string& path) {
      return Error::from_errno("session", core::quote_name(path) +
                                              ": the run left it unreadable, so it cannot be "
                                              "checked for the registered secret values");
    };
    std::vector<std::string> names = list_directory(dirfd);
    if (prefix.empty()) std::erase(names, std::string(".agent"));  // pulsebox's own: never a change
    for (const std::string& name : names) {
      const std::string path = prefix + name;
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return unreadable(path);
      const bool whiteout = S_ISCHR(st.st_mode) && major(st.st_rdev) == 0 && minor(st.st_rdev) == 0;
      // The commit would write a name holding a value into the workspace:
      // whatever is at or beneath it is flagged, as a run's import does. A
      // whiteout is a deletion only of what the workspace holds.
      const auto names_a_value = [&] {
        if (!scan.secrets.contains_secret(path)) return false;
        return !whiteout || open_beneath(scan.workspace_root.get(), path, O_PATH | O_NOFOLLOW);
      };
      if (S_ISDIR(st.st_mode)) {
        const OwnerOpened child(dirfd, name, O_RDONLY | O_DIRECTORY, st);
        if (!child) return unreadable(path);
        const bool hides = is_opaque(child.get()) || hides_below(path);
        forget_marks_at(path, hides ? Forget::kAtOrBeneath : Forget::kAt, scan);
        const bool named = beneath_named || names_a_value();
        if (named && !beneath_named) PB_CHECK(mark_path(secrets_.named, path, scan));
        PB_CHECK(walk(child.get(), path + "/", depth + 1, named));
        continue;
      }
      // A whiteout, a symlink or a special file: whatever it replaced goes.
      forget_marks_at(path, Forget::kAtOrBeneath, scan);
      if (!beneath_named && names_a_value()) PB_CHECK(mark_path(secrets_.named, path, scan));
      if (S_ISLNK(st.st_mode)) PB_CHECK(mark_link(dirfd, name, path, scan));
      if (!S_ISREG(st.st_mode)) continue;
      if (static_cast<std::uint64_t>(st.st_size) > kMaxScannedBytes) {
        PB_CHECK(mark_path(secrets_.unchecked, path, scan));
        continue;
      }
      const OwnerOpened fd(dirfd, name, O_RDONLY | O_NONBLOCK, st);
      if (!fd) return unreadable(path);
      auto bytes = core::read_all(fd.get(), kMaxScannedBytes, path);
      if (!bytes) return unreadable(path);
      if (!scan.secrets.contains_secret(*bytes)) continue;
      const std::uint64_t size = record_size(written_json(path, kLongestCopyName));
      if (scan.marks_bytes + size > kMaxSecretRecordBytes) return no_room_for_marks(scan);
      PB_TRY(file, keep_redacted(scan, dir, scan.secrets.redact(*bytes), new_copies_));
      secrets_.written[path] = std::move(file);
      scan.marks_bytes += size;
      ++scan.marks_of_run;
    }
    return core::ok_status();
  };
  if (is_opaque(layer_fd)) {  // the whole view replaced
    for (auto* copies : {&secrets_.written, &secrets_.links}) {
      for (const auto& [path, file] : *copies)
        superseded_copies_.push_back(file);
      copies->clear();
    }
    secrets_.unchecked.clear();
    secrets_.named.clear();
    scan.marks_bytes = record_bytes();
  }
  return walk(layer_fd, "", 0, false);
}

void OpenSession::forget_base(const std::string& path, SecretScan& scan) {
  auto record = secrets_.bases.find(path);
  if (record == secrets_.bases.end()) return;
  scan.marks_bytes -= std::min(scan.marks_bytes, record_size(base_json(path, record->second)));
  // Removed once the record no longer names it (add_run).
  if (!record->second.redacted.empty()) superseded_copies_.push_back(record->second.redacted);
  secrets_.bases.erase(record);
}

// Nothing at or beneath `path` is checked any more (the budget is spent,
// or a directory cannot be read): marked so, or, where the record has no
// room ("" is the whole workspace), no base the session does not know is
// shown.
void OpenSession::withhold_from(const std::string& path, SecretScan& scan) {
  const SessionSecrets::Base base{.subtree = true};
  const std::uint64_t size = record_size(base_json(path, base));
  if (path.empty() || scan.marks_bytes + size > kMaxSecretRecordBytes) {
    secrets_.bases_incomplete = true;
    return;
  }
  forget_base(path, scan);
  secrets_.bases[path] = base;
  scan.marks_bytes += size;
}

// `whole`: the layer replaces or hides the path itself, so a directory
// there goes with everything it holds (a later run's directory may bring
// it back opaque, showing each file deleted).
core::Status OpenSession::check_base_at(const std::string& path, bool whole, int depth,
                                        SecretScan& scan) {
  using Kind = CheckedBase::Kind;
  if (scan.budget_spent()) {
    withhold_from(path, scan);
    return core::ok_status();
  }
  const int root = scan.workspace_root.get();
  CheckedBase found = check_base(root, path, scan.secrets, kMaxScannedBytes);
  if (found.kind == Kind::kDirectory) {
    if (!whole || depth > kMaxLayerDepth) return core::ok_status();
    auto dir = open_beneath(root, path, O_RDONLY | O_DIRECTORY);
    if (!dir) {
      withhold_from(path, scan);  // what it holds cannot be checked
      return core::ok_status();
    }
    for (const std::string& name : list_directory(dir->get())) {
      if (scan.budget_spent()) {
        withhold_from(path, scan);
        break;
      }
      PB_CHECK(check_base_at(path + "/" + name, true, depth + 1, scan));
    }
    return core::ok_status();
  }
  if (found.kind != Kind::kNone) {
    ++scan.paths_read;
    scan.bytes_read += found.bytes_read;
  }
  const auto record = secrets_.bases.find(path);
  // Marked unchecked by an earlier run: this run's values need not be
  // that run's, so its check cannot clear the mark.
  if (record != secrets_.bases.end() && record->second.redacted.empty()) return core::ok_status();
  if (record != secrets_.bases.end() && !record->second.redacted.empty() && !found.sha256.empty() &&
      record->second.sha256 == found.sha256) {
    // The content an earlier run found holding its values: still not shown
    // as it is, whatever this run's values are. Its copy is redacted again
    // with this run's, which may be other ones.
    if (found.kind == Kind::kClean) return core::ok_status();
    auto earlier = core::read_regular_file(storage_ / "redacted" / record->second.redacted,
                                           kMaxScannedBytes, "redacted copy");
    if (earlier) {
      found.redacted = scan.secrets.redact(*earlier);
    } else {
      found = CheckedBase{.kind = Kind::kUnchecked};
    }
  }
  forget_base(path, scan);
  if (found.kind == Kind::kNone || found.kind == Kind::kClean) return core::ok_status();
  SessionSecrets::Base base;
  if (found.kind == Kind::kHolds) {
    base.sha256 = found.sha256;
    base.redacted = kLongestCopyName;
  }
  const std::uint64_t size = record_size(base_json(path, base));
  if (scan.marks_bytes + size > kMaxSecretRecordBytes) {
    secrets_.bases_incomplete = true;  // the review shows no base it does not know
    return core::ok_status();
  }
  if (found.kind == Kind::kHolds) {
    PB_TRY(file, keep_redacted(scan, storage_ / "redacted", found.redacted, new_copies_));
    base.redacted = std::move(file);
  }
  secrets_.bases[path] = std::move(base);
  scan.marks_bytes += size;
  return core::ok_status();
}

// Each workspace path the layer replaces (its files, symlinks, whiteouts
// and special files, a directory over a file) or hides (beneath an opaque
// directory, at any depth, as the import reads it: overlay_reader.cc) is
// checked. A record stands while the workspace holds the content it was
// made of.
core::Status OpenSession::check_bases_of(int layer_fd, SecretScan& scan) {
  const int root = scan.workspace_root.get();
  std::function<core::Status(int, const std::string&, int, bool)> walk =
      [&](int dirfd, const std::string& prefix, int depth, bool hidden) -> core::Status {
    if (depth > kMaxLayerDepth) return core::ok_status();
    const std::string here = prefix.empty() ? "" : prefix.substr(0, prefix.size() - 1);
    std::vector<std::string> names = list_directory(dirfd);
    if (prefix.empty()) std::erase(names, std::string(".agent"));  // pulsebox's own
    if (hidden) {
      auto below = prefix.empty() ? core::Result<UniqueFd>(UniqueFd(
                                        ::openat(root, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)))
                                  : open_beneath(root, here, O_RDONLY | O_DIRECTORY);
      if (!below && below.error().error_number() != ENOENT &&
          below.error().error_number() != ENOTDIR) {
        withhold_from(here, scan);  // hidden, and cannot be listed
      }
      const std::set<std::string> present(names.begin(), names.end());
      for (const std::string& name :
           below ? list_directory(below->get()) : std::vector<std::string>{}) {
        if (present.count(name) != 0 || (prefix.empty() && name == ".agent")) continue;
        // Its deletion is staged by its name, which a run's import checks.
        if (scan.secrets.contains_secret(prefix + name))
          PB_CHECK(mark_path(secrets_.named, prefix + name, scan));
        PB_CHECK(check_base_at(prefix + name, true, depth + 1, scan));
      }
    }
    for (const std::string& name : names) {
      const std::string path = prefix + name;
      struct stat st {};
      if (::fstatat(dirfd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
      if (!S_ISDIR(st.st_mode)) {
        PB_CHECK(check_base_at(path, true, depth + 1, scan));
        continue;
      }
      const OwnerOpened child(dirfd, name, O_RDONLY | O_DIRECTORY, st);
      if (!child) {
        withhold_from(path, scan);  // what it replaces cannot be seen
        continue;
      }
      const bool opaque = is_opaque(child.get()) || (!hidden && hides_below(path));
      // A directory over a file or symlink replaces it; an opaque one over
      // a directory hides what that holds (walked below, as hidden).
      PB_CHECK(check_base_at(path, false, depth + 1, scan));
      PB_CHECK(walk(child.get(), path + "/", depth + 1, hidden || opaque));
    }
    return core::ok_status();
  };
  return walk(layer_fd, "", 0, is_opaque(layer_fd));
}

namespace {

std::map<std::string, std::string> read_copies(const fs::path& storage,
                                               const std::map<std::string, std::string>& copies,
                                               const std::string& unreadable) {
  std::map<std::string, std::string> known;
  for (const auto& [path, file] : copies) {
    auto text =
        core::read_regular_file(storage / "redacted" / file, kMaxScannedBytes, "redacted copy");
    known[path] = text ? std::move(text).value() : unreadable;
  }
  return known;
}

}  // namespace

std::map<std::string, std::string> OpenSession::known_secrets() const {
  return read_copies(storage_, secrets_.written,
                     "[content withheld: it holds a registered secret]\n");
}

std::map<std::string, std::string> OpenSession::known_secret_links() const {
  return read_copies(storage_, secrets_.links, "[target withheld: it holds a registered secret]");
}

std::map<std::string, ImportOptions::KnownBase> OpenSession::known_bases() const {
  std::map<std::string, ImportOptions::KnownBase> known;
  for (const auto& [path, base] : secrets_.bases) {
    ImportOptions::KnownBase& entry = known[path];
    entry.sha256 = base.sha256;
    entry.subtree = base.subtree;
    if (base.redacted.empty()) continue;  // not checked: never shown
    auto text = core::read_regular_file(storage_ / "redacted" / base.redacted, kMaxScannedBytes,
                                        "redacted copy");
    if (text) entry.redacted = std::move(text).value();  // else not shown either
  }
  return known;
}

}  // namespace pulsebox::workspace
