// Uploaded workspaces (upload_store.h).
#include "http/upload_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "backends/native/staging.h"
#include "core/fs.h"
#include "core/text.h"

namespace pulsebox::http {
namespace {

namespace fs = std::filesystem;
using core::Error;
using core::ErrorKind;
using core::UniqueFd;

constexpr std::string_view kIncoming = ".incoming-";
constexpr std::string_view kEvicting = ".evicting-";

// A tar stream's own bytes beside the content it carries: each entry's
// header with its pax records (a long name, a binary name) and its padding.
constexpr std::uint64_t kArchiveBytesPerEntry = 6 << 10;
constexpr std::uint64_t kArchiveSlack = 1 << 20;

bool is_hex_name(std::string_view name) {
  return name.size() == 64 && std::all_of(name.begin(), name.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

fs::path lock_path(const fs::path& dir, const std::string& hex) {
  return dir / (hex + ".lock");
}

bool is_real_directory(const fs::path& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

void remove_quietly(const fs::path& path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) return;
  if (S_ISDIR(st.st_mode)) {
    backends::native::remove_tree(path);
  } else {
    ::unlink(path.c_str());
  }
}

// Removes its path when it goes out of scope, unless released.
class TempPath {
 public:
  explicit TempPath(fs::path path) : path_(std::move(path)) {}
  ~TempPath() {
    if (!path_.empty()) remove_quietly(path_);
  }
  TempPath(const TempPath&) = delete;
  TempPath& operator=(const TempPath&) = delete;
  const fs::path& path() const { return path_; }
  void release() { path_.clear(); }

 private:
  fs::path path_;
};

}  // namespace

std::optional<std::string> upload_hex(std::string_view name) {
  constexpr std::string_view kPrefix = "sha256:";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  const std::string_view hex = name.substr(kPrefix.size());
  if (!is_hex_name(hex)) return std::nullopt;
  return std::string(hex);
}

core::Result<std::unique_ptr<UploadStore>> UploadStore::open(const fs::path& dir,
                                                             UploadLimits limits) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec)
    return Error(ErrorKind::kIo, "uploads", "cannot create " + dir.string() + ": " + ec.message());
  // Sandboxes reach a tree through this directory; nobody may list it.
  if (::chmod(dir.c_str(), 0711) != 0) return Error::from_errno("uploads", "chmod " + dir.string());
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.starts_with(kIncoming) || name.starts_with(kEvicting)) {
      remove_quietly(entry.path());
    } else if (name.ends_with(".lock") &&
               !is_real_directory(dir / name.substr(0, name.size() - 5))) {
      ::unlink(entry.path().c_str());  // a tree that was never renamed into place
    }
  }
  return std::unique_ptr<UploadStore>(new UploadStore(dir, limits));
}

bool UploadStore::has(const std::string& hex) const {
  struct stat st {};
  return is_hex_name(hex) && is_real_directory(dir_ / hex) &&
         ::lstat(lock_path(dir_, hex).c_str(), &st) == 0;
}

core::Result<UploadStore::Stored> UploadStore::receive(const std::string& hex,
                                                       const BodyReader& read_body) {
  if (!is_hex_name(hex)) {
    return Error(ErrorKind::kInvalidInput, "workspace_upload",
                 "an upload is named sha256:<64 lowercase hex digits>");
  }
  const std::string stem = std::string(kIncoming) + core::random_hex(16);
  TempPath archive_file(dir_ / (stem + ".tar"));
  UniqueFd archive(::open(archive_file.path().c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!archive)
    return Error::from_errno("workspace_upload", "cannot create " + archive_file.path().string());

  const std::uint64_t max_archive_bytes =
      limits_.max_bytes + limits_.max_files * kArchiveBytesPerEntry + kArchiveSlack;
  std::uint64_t received = 0;
  std::optional<Error> refused;
  const bool whole = read_body([&](std::string_view bytes) -> core::Status {
    received += bytes.size();
    if (received > max_archive_bytes) {
      refused = Error(ErrorKind::kResource, "workspace_upload",
                      "the archive is larger than " + std::to_string(max_archive_bytes) +
                          " bytes, more than this server's upload limits allow (--max-upload " +
                          std::to_string(limits_.max_bytes) + " bytes of content, " +
                          "--max-upload-files " + std::to_string(limits_.max_files) + ")");
      return *refused;
    }
    if (auto written = core::write_all(archive.get(), bytes, "the upload"); !written.ok()) {
      refused = written.error();
      return written;
    }
    return core::Status();
  });
  if (refused) return *refused;
  if (!whole) {
    return Error(ErrorKind::kInvalidInput, "workspace_upload",
                 "the archive did not arrive whole (the client stopped sending)");
  }
  if (::lseek(archive.get(), 0, SEEK_SET) != 0)
    return Error::from_errno("workspace_upload", "lseek");

  TempPath tree(dir_ / (stem + ".d"));
  if (::mkdir(tree.path().c_str(), 0700) != 0) {
    return Error::from_errno("workspace_upload", "cannot create " + tree.path().string());
  }
  PB_TRY(stored, unpack(hex, archive.get(), tree.path()));

  // The lock file first: a tree in place always has one, so eviction and
  // leases see it.
  UniqueFd lock(
      ::open(lock_path(dir_, hex).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!lock) return Error::from_errno("workspace_upload", "cannot create the upload's lock file");
  ::futimens(lock.get(), nullptr);
  if (::rename(tree.path().c_str(), (dir_ / hex).c_str()) == 0) {
    tree.release();
    stored.created = true;
    // An eviction of an earlier copy may have unlinked the lock file we
    // opened: the tree in place needs one.
    struct stat st {};
    if (::fstat(lock.get(), &st) == 0 && st.st_nlink == 0) {
      UniqueFd again(
          ::open(lock_path(dir_, hex).c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600));
    }
  } else if (errno == EEXIST || errno == ENOTEMPTY) {
    stored.created = false;  // the same content arrived meanwhile: ours goes
  } else {
    return Error::from_errno("workspace_upload",
                             "cannot keep the upload as " + (dir_ / hex).string());
  }
  return stored;
}

core::Result<UploadStore::Stored> UploadStore::unpack(const std::string& hex, int archive_fd,
                                                      const fs::path& temp_tree) {
  const archive::ExtractLimits limits{.max_total_bytes = limits_.max_bytes,
                                      .max_entries = limits_.max_files};
  PB_TRY(summary, archive::extract_archive(archive_fd, temp_tree, limits));
  if (summary.sha256 != hex) {
    return Error(ErrorKind::kInvalidInput, "workspace_upload",
                 "the archive's sha256 is " + summary.sha256 + ", not " + hex);
  }
  // .agent/ is pulsebox's own: the server keeps a run's transactions there,
  // and must never read ones the caller made up.
  struct stat st {};
  if (::lstat((temp_tree / ".agent").c_str(), &st) == 0) {
    return Error(ErrorKind::kSecurity, "workspace_upload",
                 "\".agent\": the archive holds pulsebox's own directory; leave it out");
  }
  // The server's uid alone: its sandboxes run as it (or as root mapped to it),
  // and no other user of the machine reads a caller's workspace.
  if (::chmod(temp_tree.c_str(), 0700) != 0) return Error::from_errno("workspace_upload", "chmod");
  return Stored{.created = false, .files = summary.files, .bytes = summary.bytes};
}

std::optional<UploadLease> UploadStore::acquire(const std::string& hex) const {
  if (!is_hex_name(hex)) return std::nullopt;
  UniqueFd lock(::open(lock_path(dir_, hex).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
  if (!lock) return std::nullopt;
  while (::flock(lock.get(), LOCK_SH) != 0) {
    if (errno != EINTR) return std::nullopt;
  }
  // Evicted between our open and flock: the lock file is gone.
  struct stat st {};
  if (::fstat(lock.get(), &st) != 0 || st.st_nlink == 0 || !is_real_directory(dir_ / hex)) {
    return std::nullopt;
  }
  ::futimens(lock.get(), nullptr);  // the last use, for eviction
  return UploadLease(std::move(lock), dir_ / hex);
}

std::size_t UploadStore::evict() {
  struct Kept {
    std::string hex;
    struct timespec used;
  };
  std::vector<Kept> kept;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (!is_hex_name(name) || !entry.is_directory(ec)) continue;
    struct stat st {};
    if (::stat(lock_path(dir_, name).c_str(), &st) != 0) continue;
    kept.push_back({name, st.st_mtim});
  }
  if (kept.size() <= limits_.max_uploads) return 0;
  std::sort(kept.begin(), kept.end(), [](const Kept& a, const Kept& b) {
    return a.used.tv_sec != b.used.tv_sec ? a.used.tv_sec > b.used.tv_sec
                                          : a.used.tv_nsec > b.used.tv_nsec;
  });
  std::size_t removed = 0;
  for (std::size_t i = limits_.max_uploads; i < kept.size(); ++i) {
    const std::string& hex = kept[i].hex;
    UniqueFd lock(::open(lock_path(dir_, hex).c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW));
    if (!lock || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) continue;  // in use
    const fs::path doomed = dir_ / (std::string(kEvicting) + core::random_hex(16));
    if (::rename((dir_ / hex).c_str(), doomed.c_str()) != 0) continue;
    // Unlinked while held: a lease that opened it before sees st_nlink 0.
    ::unlink(lock_path(dir_, hex).c_str());
    lock.reset();
    backends::native::remove_tree(doomed);
    ++removed;
  }
  return removed;
}

}  // namespace pulsebox::http
