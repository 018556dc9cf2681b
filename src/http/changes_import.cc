// A remote run's changes brought home (changes_import.h).
#include "http/changes_import.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "archive/workspace_archive.h"
#include "core/byte_names.h"
#include "core/json_parse.h"
#include "core/unique_fd.h"
#include "workspace/safe_open.h"

namespace pulsebox::http {
namespace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;
using core::UniqueFd;

constexpr const char* kManifest = ".pulsebox-changes.json";
constexpr std::uint64_t kMaxManifestBytes = 64ULL << 20;

// The directory `relative` beneath `root_fd`, made where missing with the
// mode the workspace's own directory there has (so that it reads as
// unchanged), never following a link.
core::Result<UniqueFd> parent_directory(int root_fd, int lower_fd, const std::string& relative) {
  UniqueFd here(::dup(root_fd));
  UniqueFd lower(::dup(lower_fd));
  if (relative.empty()) return here;
  std::size_t start = 0;
  while (start <= relative.size()) {
    const auto end = relative.find('/', start);
    const std::string name = relative.substr(start, end == std::string::npos ? end : end - start);
    struct stat st {};
    mode_t mode = 0755;
    UniqueFd lower_next;
    if (lower && ::fstatat(lower.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode)) {
      mode = st.st_mode & 07777;
      lower_next.reset(
          ::openat(lower.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    }
    if (::mkdirat(here.get(), name.c_str(), mode) != 0 && errno != EEXIST) {
      return Error(ErrorKind::kIo, "remote", "making " + relative + " in the changes", errno);
    }
    UniqueFd next(
        ::openat(here.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next) {
      return Error(ErrorKind::kSecurity, "remote",
                   "the changes' " + relative + " is not a directory", errno);
    }
    here = std::move(next);
    lower = std::move(lower_next);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return here;
}

// Each deletion as overlayfs writes it: a whiteout (a 0/0 character
// device), or, where the upper tree has a new directory in its place, that
// directory made opaque (everything the workspace had below it goes).
core::Status mark_deletions(const fs::path& upper, const fs::path& workspace,
                            const nlohmann::json& deleted) {
  UniqueFd upper_fd(::open(upper.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  UniqueFd lower_fd(::open(workspace.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!upper_fd || !lower_fd) {
    return Error(ErrorKind::kIo, "remote", "opening the changes' directories", errno);
  }
  if (!deleted.is_array()) {
    return Error(ErrorKind::kInvalidInput, "remote",
                 "the changes' manifest: deleted is not a list");
  }
  for (const auto& item : deleted) {
    std::string raw;
    try {
      raw = core::get_name(item, "path");
    } catch (const std::exception&) {
      return Error(ErrorKind::kInvalidInput, "remote",
                   "the changes' manifest: a deletion has no path");
    }
    PB_TRY(path, workspace::check_relative_path(raw));
    if (path == ".agent" || path.rfind(".agent/", 0) == 0) continue;  // never the local .agent/
    const auto slash = path.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash);
    const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
    PB_TRY(parent, parent_directory(upper_fd.get(), lower_fd.get(), dir));
    struct stat st {};
    if (::fstatat(parent.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
      if (!S_ISDIR(st.st_mode)) continue;  // replaced by a file or link: that says it
      UniqueFd opaque(
          ::openat(parent.get(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
      if (!opaque || ::fsetxattr(opaque.get(), "user.overlay.opaque", "y", 1, 0) != 0) {
        return Error(ErrorKind::kIo, "remote", "marking " + path + " as replaced", errno);
      }
      continue;
    }
    if (::mknodat(parent.get(), name.c_str(), S_IFCHR | 0, ::makedev(0, 0)) != 0) {
      return Error(ErrorKind::kIo, "remote", "marking " + path + " as deleted", errno);
    }
  }
  return core::ok_status();
}

}  // namespace

core::Result<ImportResult> import_remote_changes(const ChangesArchive& archive,
                                                 const fs::path& workspace,
                                                 const ImportOptions& options) {
  const fs::path upper = archive.work_dir / "upper";
  if (::mkdir(upper.c_str(), 0700) != 0) {
    return Error(ErrorKind::kIo, "remote", "making " + upper.string(), errno);
  }
  UniqueFd tar(::open(archive.tar.c_str(), O_RDONLY | O_CLOEXEC));
  if (!tar) return Error(ErrorKind::kIo, "remote", "opening the received changes", errno);
  PB_TRY(extracted, archive::extract_archive(tar.get(), upper));
  (void)extracted;
  // The manifest, then out of the tree: it is no change of the workspace.
  UniqueFd manifest_fd(
      ::openat(UniqueFd(::open(upper.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)).get(), kManifest,
               O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!manifest_fd) {
    return Error(ErrorKind::kInvalidInput, "remote",
                 std::string("the server's changes have no ") + kManifest);
  }
  PB_TRY(text, workspace::read_regular_file(manifest_fd.get(), kMaxManifestBytes, kManifest));
  manifest_fd.reset();
  fs::remove(upper / kManifest);
  PB_TRY(manifest, core::parse_json(text, kManifest));
  if (!manifest.is_object() || manifest.value("v", 0) != 1) {
    return Error(ErrorKind::kInvalidInput, "remote",
                 std::string(kManifest) + ": not a version 1 manifest");
  }
  PB_CHECK(
      mark_deletions(upper, workspace,
                     manifest.contains("deleted") ? manifest["deleted"] : nlohmann::json::array()));
  Workspace local(workspace);
  try {
    return local.import_overlay(upper, workspace, options);
  } catch (const std::exception& error) {
    return Error(ErrorKind::kIo, "remote", std::string("importing the changes: ") + error.what());
  }
}

}  // namespace pulsebox::http
