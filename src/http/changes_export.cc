// A transaction as an upper tree and a manifest (changes_export.h).
#include "http/changes_export.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/byte_names.h"
#include "core/fs.h"
#include "pulsebox/policy.h"
#include "workspace/safe_open.h"
#include "workspace/transactions.h"

namespace pulsebox::http {
namespace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;
using core::UniqueFd;

// The mode the directory `relative` has in the upload's tree, or 0755.
unsigned tree_directory_mode(int root_fd, const std::string& relative) {
  auto fd = workspace::open_beneath(root_fd, relative, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  struct stat st {};
  if (!fd || ::fstat(fd.value().get(), &st) != 0) return 0755;
  return st.st_mode & 0777;
}

// The directory that holds `relative`'s last component beneath upper_fd,
// made as needed (each with its mode in the upload's tree) and walked
// without following a symlink; `name` receives the last component.
core::Result<UniqueFd> make_parent(int upper_fd, int root_fd, const std::string& relative,
                                   std::string* name) {
  // The store checked it already; the export does not depend on that.
  if (auto checked = workspace::check_relative_path(relative); !checked || *checked != relative) {
    return Error(
        ErrorKind::kSecurity, "export",
        "\"" + core::escape_malformed_utf8(relative) + "\": not a path beneath the workspace");
  }
  UniqueFd current(::fcntl(upper_fd, F_DUPFD_CLOEXEC, 0));
  if (!current) return Error::from_errno("export", "dup");
  std::size_t start = 0;
  for (std::size_t slash; (slash = relative.find('/', start)) != std::string::npos;
       start = slash + 1) {
    const std::string component = relative.substr(start, slash - start);
    const unsigned mode = tree_directory_mode(root_fd, relative.substr(0, slash));
    if (::mkdirat(current.get(), component.c_str(), mode | S_IRWXU) == 0) {
      ::fchmodat(current.get(), component.c_str(), mode | S_IRWXU, 0);
    } else if (errno != EEXIST) {
      return Error::from_errno("export", "mkdir " + relative.substr(0, slash));
    }
    UniqueFd next(::openat(current.get(), component.c_str(),
                           O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      return Error(ErrorKind::kSecurity, "export",
                   "\"" + core::escape_malformed_utf8(relative) +
                       "\": a change beneath something that is not a directory");
    }
    current = std::move(next);
  }
  *name = relative.substr(start);
  return current;
}

core::Status copy_content(int from, int to, const std::string& relative) {
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::from_errno("export", "reading " + relative);
    if (n == 0) return core::Status();
    PB_CHECK(core::write_all(to, std::string_view(buffer, static_cast<std::size_t>(n)), relative));
  }
}

// A new file `name` in dir_fd with `mode`, holding what `source_fd` holds.
core::Status write_copy(int source_fd, int dir_fd, const std::string& name, unsigned mode,
                        const std::string& relative) {
  UniqueFd out(
      ::openat(dir_fd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::from_errno("export", "create " + relative);
  PB_CHECK(copy_content(source_fd, out.get(), relative));
  if (::fchmod(out.get(), mode & 07777) != 0)
    return Error::from_errno("export", "chmod " + relative);
  return core::Status();
}

// A directory `name` with `mode` (already made as a parent: its mode set).
core::Status make_directory(int dir_fd, const std::string& name, unsigned mode,
                            const std::string& relative) {
  if (::mkdirat(dir_fd, name.c_str(), 0700) != 0 && errno != EEXIST) {
    return Error::from_errno("export", "mkdir " + relative);
  }
  struct stat st {};
  if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
    return Error(ErrorKind::kInvalidInput, "export",
                 "\"" + core::escape_malformed_utf8(relative) + "\": changed twice");
  }
  // The archive's reader needs to enter it; its mode travels as it is.
  if (::fchmodat(dir_fd, name.c_str(), (mode & 0777) | S_IRWXU, 0) != 0) {
    return Error::from_errno("export", "chmod " + relative);
  }
  return core::Status();
}

}  // namespace

bool has_transaction(const fs::path& root, const std::string& id) {
  if (id.empty() || id.front() == '.' || id.find('/') != std::string::npos) return false;
  struct stat st {};
  return ::lstat((root / ".agent" / "transactions" / id / "manifest.json").c_str(), &st) == 0 &&
         S_ISREG(st.st_mode);
}

core::Status materialise_changes(const fs::path& root, const std::string& id,
                                 const fs::path& upper) {
  if (!has_transaction(root, id)) {
    return Error(ErrorKind::kInvalidInput, "transaction", "no transaction \"" + id + "\"");
  }
  const ActionPolicy policy;
  const workspace::TransactionStore store(root, policy, WorkspaceLimits{});
  PB_TRY(draft, store.load(id));
  PB_TRY(root_fd, core::open_directory(root));
  const fs::path blobs = store.tx_dir(id) / "blobs";
  PB_TRY(blobs_fd, core::open_directory(blobs));
  workspace::BlobShards shards(blobs_fd.get());
  if (::mkdir(upper.c_str(), 0755) != 0)
    return Error::from_errno("export", "mkdir " + upper.string());
  PB_TRY(upper_fd, core::open_directory(upper));

  nlohmann::json deleted = nlohmann::json::array();
  // Sorted: a directory before what it holds.
  for (const auto& [path, entry] : draft.entries) {
    if (path == kChangesManifest) {
      return Error(ErrorKind::kInvalidInput, "transaction",
                   std::string("the transaction changes \"") + kChangesManifest +
                       "\", the name its export uses for its manifest: review it on the server");
    }
    if (entry.op == StagedOp::Delete) {
      nlohmann::json item = nlohmann::json::object();
      core::put_name(item, "path", path);
      deleted.push_back(std::move(item));
      continue;
    }
    std::string name;
    PB_TRY(dir, make_parent(upper_fd.get(), root_fd.get(), path, &name));
    switch (entry.op) {
      case StagedOp::Write: {
        // The blob carries its final mode: a hard link is the file as staged.
        PB_TRY(where, shards.locate(workspace::blob_relative_path(entry)));
        if (::linkat(where.dir, where.name.c_str(), dir.get(), name.c_str(), 0) == 0) break;
        UniqueFd blob(::openat(where.dir, where.name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
        if (!blob) return Error::from_errno("export", "open the content of " + path);
        PB_CHECK(write_copy(blob.get(), dir.get(), name, entry.mode, path));
        break;
      }
      case StagedOp::Mkdir:
        PB_CHECK(make_directory(dir.get(), name, entry.mode, path));
        break;
      case StagedOp::Symlink:
        if (::symlinkat(entry.link_target.c_str(), dir.get(), name.c_str()) != 0) {
          return Error::from_errno("export", "symlink " + path);
        }
        break;
      case StagedOp::Chmod: {
        auto current = workspace::open_beneath(root_fd.get(), path, O_RDONLY | O_NOFOLLOW);
        struct stat st {};
        if (!current || ::fstat(current.value().get(), &st) != 0) {
          return Error(ErrorKind::kInvalidInput, "export",
                       "\"" + core::escape_malformed_utf8(path) +
                           "\": its mode changed, but it is not in the upload any more");
        }
        if (S_ISDIR(st.st_mode)) {
          PB_CHECK(make_directory(dir.get(), name, entry.mode, path));
        } else if (S_ISREG(st.st_mode)) {
          PB_CHECK(write_copy(current.value().get(), dir.get(), name, entry.mode, path));
        } else {
          return Error(ErrorKind::kInvalidInput, "export",
                       "\"" + core::escape_malformed_utf8(path) +
                           "\": a mode change of something neither a file nor a directory");
        }
        break;
      }
      case StagedOp::Delete:
        break;
    }
  }
  const nlohmann::json manifest = {{"v", 1}, {"transaction", id}, {"deleted", std::move(deleted)}};
  UniqueFd out(::openat(upper_fd.get(), kChangesManifest,
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out) return Error::from_errno("export", std::string("create ") + kChangesManifest);
  return core::write_all(out.get(), manifest.dump(), kChangesManifest);
}

}  // namespace pulsebox::http
